//! The last step of planning a directory, for every build: one walk of the
//! directory ([`snapshot::walk`]), merged with the files it should hold and
//! with the snapshot the last build took of it, both in walk order. The
//! walk finds what to prune, compares the files rendered in memory, leaves
//! the files already planned as they were rendered ([`super::stream`]),
//! vouches for the files of jobs the build cache did not compile again by
//! their signatures (reading none whose signature is as recorded), runs the
//! unlisted-files check when asked, and keeps what it saw, from which the
//! build's record is made without walking again.

use std::cmp::Ordering;
use std::collections::HashSet;
use std::iter::Peekable;
use std::path::Path;

use super::snapshot::{self, Entry, FileState, Kind, Sig};
use super::{Change, Checked, Found, Op};
use crate::diagnostic::Diagnostic;

/// A file a directory should hold.
#[derive(Debug)]
pub enum Want {
    /// As the last build wrote it: the hash its snapshot records.
    Known,
    /// Planned (and staged) as it was rendered, with its content hash when
    /// one was asked for.
    Taken(Option<String>),
    /// Rendered, to be compared with the file there.
    Bytes(Vec<u8>),
}

/// The unlisted-files check ([`crate::resources`]), run by the walk as it
/// meets the entries.
pub trait Unlisted {
    /// Whether an entry that is no directory (its path below the root, its
    /// path on disk, whether it is a symlink, whether it is trainc's) is
    /// YAML the root kustomization does not list.
    fn entry(&self, rel: &str, path: &Path, symlink: bool, owned: bool) -> bool;
    /// Adds what a directory the walk does not enter holds, unlisted.
    fn below(&self, dir: &Path, found: &mut Vec<String>);
}

/// What a directory should hold, for [`plan`].
pub struct Wanted<'a> {
    pub root: &'a Path,
    /// How messages name it.
    pub shown: &'a str,
    /// Every file, in walk order ([`snapshot::walk_cmp`]).
    pub want: Vec<(String, Want)>,
    /// The snapshot the last build took of it; `None`: none, or the
    /// directory was not there.
    pub recorded: Option<Vec<Entry>>,
    pub unlisted: Option<&'a dyn Unlisted>,
    /// This build's own temporary files (staged as rendered): not looked at.
    pub staged: HashSet<String>,
}

/// A directory as [`plan`] found it.
#[derive(Debug, Default)]
pub struct Merged {
    /// What becomes of the files it compared or prunes (not of those
    /// [`Want::Taken`]), in walk order.
    pub changes: Vec<Change>,
    /// The wanted files found as they should be without a change listed.
    pub kept: usize,
    /// Every entry the walk met, as a snapshot; `None`: no directory.
    pub entries: Option<Vec<Entry>>,
    /// YAML files the root kustomization does not list, in walk order.
    pub unlisted: Vec<String>,
    /// The bytes of the files [`Want::Known`].
    pub known: u64,
    /// The walk met every entry as recorded, and no other: a record of it
    /// would be the same.
    pub as_recorded: bool,
    /// What the plan refuses (somebody else's file where one is wanted, …).
    pub refused: Vec<Diagnostic>,
}

/// Why [`plan`] stopped.
#[derive(Debug)]
pub enum Stopped {
    /// A file of a job the build did not compile is not as recorded: only
    /// a build that compiles its job can plan it.
    Changed(String),
    /// The directory could not be walked, or a file in it read.
    Failed(Diagnostic),
}

/// Plans `wanted`'s directory in one walk (see the module's comment).
pub fn plan(wanted: Wanted) -> Result<Merged, Stopped> {
    let Wanted {
        root,
        shown,
        want,
        recorded,
        unlisted,
        staged,
    } = wanted;
    let had = recorded.is_some();
    let recorded = recorded.unwrap_or_default();
    let count = recorded.len();
    let walker = Walker {
        root,
        shown,
        recorded: recorded.into_iter().peekable(),
        want: want.into_iter().peekable(),
        checked: Checked::new(),
        unlisted,
        staged: &staged,
        matched: 0,
        stopped: None,
        out: Merged {
            entries: Some(Vec::with_capacity(count + 16)),
            ..Merged::default()
        },
    };
    // Both callbacks add to what the walk found, in walk order.
    let cell = std::cell::RefCell::new(walker);
    let walked = snapshot::walk(
        root,
        |rel, kind, sig| {
            let mut w = cell.borrow_mut();
            match w.entry(rel, kind, sig) {
                Ok(()) => Ok(true),
                Err(why) => {
                    w.stopped = Some(why);
                    Ok(false)
                }
            }
        },
        |rel| {
            // Hidden directories are not looked into; others, which no
            // plan enters, only by the unlisted-files check.
            let mut w = cell.borrow_mut();
            let name = rel.rsplit('/').next().unwrap_or(rel);
            if let Some(u) = w.unlisted
                && !name.starts_with('.')
            {
                u.below(&root.join(rel), &mut w.out.unlisted);
            }
            Ok(())
        },
    );
    let mut w = cell.into_inner();
    let present = match walked {
        Ok(present) => present,
        Err(e) => {
            return Err(w.stopped.take().unwrap_or_else(|| {
                Stopped::Failed(Diagnostic::new(format!("cannot walk {shown}: {e}")))
            }));
        }
    };
    w.absent_until(None)?;
    let mut out = w.out;
    let seen = out.entries.as_ref().map_or(0, Vec::len);
    out.as_recorded = present == had && w.matched == count && seen == count;
    if !present {
        out.entries = None;
    }
    Ok(out)
}

/// The state of [`plan`]'s walk: the snapshot and the wanted files, both in
/// walk order, merged with the entries as the walk meets them.
struct Walker<'a> {
    root: &'a Path,
    shown: &'a str,
    recorded: Peekable<std::vec::IntoIter<Entry>>,
    want: Peekable<std::vec::IntoIter<(String, Want)>>,
    checked: Checked,
    unlisted: Option<&'a dyn Unlisted>,
    staged: &'a HashSet<String>,
    /// How many entries the walk met as recorded: kind, and for a file the
    /// signature (not racy) and hash.
    matched: usize,
    stopped: Option<Stopped>,
    out: Merged,
}

impl Walker<'_> {
    /// The recorded entry at `rel`, if any; those before it are passed.
    fn recorded(&mut self, rel: &str) -> Option<Entry> {
        while let Some(e) = self.recorded.peek() {
            match snapshot::walk_cmp(&e.path, rel) {
                Ordering::Less => {
                    self.recorded.next();
                }
                Ordering::Equal => return self.recorded.next(),
                Ordering::Greater => return None,
            }
        }
        None
    }

    fn changed(&self, rel: &str, what: &str) -> Stopped {
        Stopped::Changed(format!(
            "{} changed since the last build: {rel} {what}",
            self.shown
        ))
    }

    /// Plans `new` for `rel`: a change, or a refusal kept for the report.
    fn compare(&mut self, rel: String, new: Vec<u8>) -> Option<Change> {
        match super::plan_file(self.root, self.shown, rel, new, &mut self.checked) {
            Ok(change) => Some(change),
            Err(d) => {
                self.out.refused.push(d);
                None
            }
        }
    }

    /// Plans the wanted files that come before `rel` in walk order (all of
    /// them, for `None`): the walk did not meet them, so they are not there.
    fn absent_until(&mut self, rel: Option<&str>) -> Result<(), Stopped> {
        while let Some((path, want)) = self
            .want
            .next_if(|(p, _)| rel.is_none_or(|r| snapshot::walk_cmp(p, r) == Ordering::Less))
        {
            match want {
                Want::Known => return Err(self.changed(&path, "is gone")),
                // Planned as it was rendered.
                Want::Taken(_) => {}
                Want::Bytes(new) => {
                    if let Some(change) = self.compare(path, new) {
                        self.out.changes.push(change);
                    }
                }
            }
        }
        Ok(())
    }

    /// One entry of the walk.
    fn entry(&mut self, rel: &str, kind: Kind, sig: Option<Sig>) -> Result<(), Stopped> {
        if self.staged.contains(rel) {
            return Ok(());
        }
        self.absent_until(Some(rel))?;
        // The recorded entry's path is this entry's: no copy of it.
        let (path, was, recorded) = match self.recorded(rel) {
            Some(e) => (e.path, Some(e.kind), e.file),
            None => (rel.to_owned(), None, None),
        };
        let wanted = self.want.next_if(|(p, _)| p == rel);
        let on_disk = self.root.join(rel);
        let (Kind::File, Some(sig)) = (kind, sig) else {
            // Not a file: a wanted file there is refused, as a plan refuses
            // it (or, of an unchanged job, taken for changed).
            match wanted {
                Some((path, Want::Known)) => return Err(self.changed(&path, "changed type")),
                Some((path, Want::Bytes(new))) => {
                    if let Some(change) = self.compare(path, new) {
                        self.out.changes.push(change);
                    }
                }
                // Refused as it was rendered.
                Some((_, Want::Taken(_))) | None => {}
            }
            if let Some(u) = self.unlisted
                && kind != Kind::Dir
                && u.entry(rel, &on_disk, kind == Kind::Symlink, false)
            {
                self.out.unlisted.push(rel.to_owned());
            }
            if was == Some(kind) && recorded.is_none() {
                self.matched += 1;
            }
            self.push(Entry {
                path,
                kind,
                file: None,
            });
            return Ok(());
        };
        let vouched = recorded
            .as_ref()
            .filter(|f| !f.racy && f.sig == sig)
            .map(|f| f.hash.as_str());
        // The hash of the file as it is now, if known, and whether trainc
        // owns it (`None`: not known).
        let (hash, owned) = match wanted {
            Some((path, Want::Known)) => {
                let Some(want) = &recorded else {
                    return Err(Stopped::Changed(
                        "the record lacks a file of an unchanged job".into(),
                    ));
                };
                let now = match vouched {
                    Some(h) => Some(h.to_owned()),
                    None => snapshot::file_hash(rel, &on_disk)
                        .ok()
                        .filter(|(_, owned)| *owned)
                        .map(|(h, _)| h),
                };
                if now.as_deref() != Some(want.hash.as_str()) || want.hash.starts_with("head:") {
                    return Err(self.changed(&path, "was edited"));
                }
                self.out.known += want.sig.size;
                // Counted, not listed: 95,000 of them at 5,000 jobs.
                self.out.kept += 1;
                (Some(want.hash.clone()), Some(true))
            }
            Some((_, Want::Taken(hash))) => (hash, Some(true)),
            Some((path, Want::Bytes(new))) => {
                let hash = crate::plan::content_hash(&new);
                if vouched == Some(hash.as_str()) {
                    self.out.kept += 1;
                    (Some(hash), Some(true))
                } else {
                    match self.compare(path, new) {
                        Some(change) => {
                            let hash = match &change.old {
                                Some(old) => crate::plan::content_hash(old),
                                None => hash,
                            };
                            self.out.changes.push(change);
                            (Some(hash), Some(true))
                        }
                        None => (None, None),
                    }
                }
            }
            None => {
                let (hash, owned) = self.unwanted(rel, &on_disk, vouched)?;
                (Some(hash), owned)
            }
        };
        if let Some(u) = self.unlisted
            && u.entry(rel, &on_disk, false, owned == Some(true))
        {
            self.out.unlisted.push(rel.to_owned());
        }
        if was == Some(Kind::File) && vouched.is_some() && vouched == hash.as_deref() {
            self.matched += 1;
        }
        self.push(Entry {
            path,
            kind,
            file: Some(FileState {
                sig,
                // Not known only where nothing is recorded: a build that
                // refuses records nothing.
                hash: hash.unwrap_or_default(),
                racy: false,
            }),
        });
        Ok(())
    }

    /// A file no job wants: pruned when trainc owns it, as an
    /// interrupted build's temporary file always is. Its hash (of its head,
    /// `head:…`, when it is not trainc's), and whether trainc owns it
    /// (`None`: a temporary file, not kept).
    fn unwanted(
        &mut self,
        rel: &str,
        on_disk: &Path,
        vouched: Option<&str>,
    ) -> Result<(String, Option<bool>), Stopped> {
        let name = rel.rsplit('/').next().unwrap_or(rel);
        let temp = super::is_temp(name);
        if let Some(h) = vouched
            && !temp
            && h.starts_with("head:")
        {
            return Ok((h.to_owned(), None));
        }
        let delete = |old| Change {
            path: rel.to_owned(),
            op: Op::Delete,
            old,
            new: Vec::new(),
        };
        let head = |head: &[u8]| format!("head:{}", crate::plan::content_hash(head));
        Ok(match super::read_owned(on_disk, rel) {
            Ok(Found::Owned(old)) => {
                let hash = crate::plan::content_hash(&old);
                self.out.changes.push(delete(Some(old)));
                (hash, Some(true))
            }
            Ok(Found::Foreign(h) | Found::TooLarge(h)) if temp => {
                self.out.changes.push(delete(None));
                (head(&h), None)
            }
            Ok(Found::Foreign(h)) => (head(&h), Some(false)),
            Ok(Found::TooLarge(h)) => (head(&h), Some(true)),
            Err(_) if temp => {
                self.out.changes.push(delete(None));
                ("head:".to_owned(), None)
            }
            Err(e) => return Err(Stopped::Failed(super::io_error(on_disk, "read", &e))),
        })
    }

    fn push(&mut self, e: Entry) {
        if let Some(entries) = &mut self.out.entries {
            entries.push(e);
        }
    }
}
