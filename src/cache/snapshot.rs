//! What an output directory looked like right after a build: every entry, and
//! for each file its `lstat` signature and the hash of its bytes.
//!
//! A file whose signature is unchanged is taken to hold the same bytes, as
//! `git status` does with its index. Two things make that safe:
//!
//! - the signature has the inode, size, mode, mtime and ctime; replacing a
//!   file (as editors, `git checkout` and trainc do) changes the inode, and
//!   writing one in place changes its ctime, which no tool can set back;
//! - a file changed after the build started (the build's own writes, or
//!   another program's while the build compared) is not vouched for by the
//!   signature it has when the snapshot is taken, and one written within a
//!   clock tick of that could change again without its times moving. Such a
//!   "racy" entry is marked, and its bytes are hashed the next time; the
//!   record is then refreshed.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// One entry below an output root, in walk order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Relative, `/`-separated path.
    pub path: String,
    pub kind: Kind,
    /// Files only: `lstat` signature and content hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<FileState>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Kind {
    #[serde(rename = "f")]
    File,
    #[serde(rename = "d")]
    Dir,
    #[serde(rename = "l")]
    Symlink,
    #[serde(rename = "o")]
    Other,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileState {
    pub sig: Sig,
    pub hash: String,
    /// Written too close to the snapshot for the signature to vouch for the
    /// bytes: hash them next time.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub racy: bool,
}

/// `lstat` fields that change when a file's bytes do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sig {
    pub ino: u64,
    pub size: u64,
    pub mode: u32,
    /// Nanoseconds since the epoch.
    pub mtime: i128,
    pub ctime: i128,
}

impl Sig {
    pub(super) fn of(m: &fs::Metadata) -> Self {
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        Self {
            ino: m.ino(),
            size: m.size(),
            mode: m.mode(),
            mtime: ns(m.mtime(), m.mtime_nsec()),
            ctime: ns(m.ctime(), m.ctime_nsec()),
        }
    }

    /// Whether this signature may not vouch for the bytes: the file changed
    /// after `mark`, or so close before it that a later change could leave
    /// the times as they are. File systems stamp times from a coarse clock (a few
    /// milliseconds); those with whole-second times (FAT has two) show no
    /// nanoseconds.
    fn racy(&self, mark: i128) -> bool {
        let coarse = self.mtime % 1_000_000_000 == 0 && self.ctime % 1_000_000_000 == 0;
        let margin = if coarse { 2_000_000_000 } else { 50_000_000 };
        self.mtime.max(self.ctime) >= mark - margin
    }
}

/// Now, in nanoseconds since the epoch: taken before the files are looked
/// at, so that every change during or after that counts as racy.
pub fn mark() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i128::try_from(d.as_nanos()).unwrap_or(i128::MAX))
}

pub fn content_hash(bytes: &[u8]) -> String {
    super::key::hex(&Sha256::digest(bytes)[..16])
}

/// The hash of what a plan looks at in the file at `rel` (`path` on disk):
/// all of a file trainc owns (its [`content_hash`], as of the bytes a build
/// writes), only the first bytes of any other, which is all a plan reads of
/// it; and whether trainc owns it. A foreign file of any size costs one
/// bounded read.
pub fn file_hash(rel: &str, path: &Path) -> io::Result<(String, bool)> {
    use crate::plan::{Found, read_owned};
    Ok(match read_owned(path, rel)? {
        Found::Owned(bytes) => (content_hash(&bytes), true),
        // Never equal to the hash of a whole file.
        Found::Foreign(head) | Found::TooLarge(head) => {
            (format!("head:{}", content_hash(&head)), false)
        }
    })
}

/// Every entry below `root`, never following symlinks; `None` when `root`
/// does not exist. `hash` gives a file's content hash: the bytes the build
/// just wrote, so they need not be read back.
pub fn take(
    root: &Path,
    mark: i128,
    hash: impl Fn(&str, &Path) -> io::Result<String>,
) -> io::Result<Option<Vec<Entry>>> {
    let mut entries = Vec::new();
    let present = walk(root, |path, kind, full, meta| {
        let file = match (kind, meta) {
            (Kind::File, Some(m)) => {
                let sig = Sig::of(m);
                Some(FileState {
                    sig,
                    hash: hash(path, full)?,
                    racy: sig.racy(mark),
                })
            }
            _ => None,
        };
        entries.push(Entry {
            path: path.to_owned(),
            kind,
            file,
        });
        Ok(true)
    })?;
    Ok(present.then_some(entries))
}

/// How a directory compares with its snapshot.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Same entries, same bytes.
    Same,
    /// Same entries and bytes, but signatures that needed hashing: the
    /// snapshot to record instead, so the next check is fast.
    Refreshed(Option<Vec<Entry>>),
    /// The first difference found, for `build --verbose`.
    Differs(String),
}

/// Compares `root` with `recorded`, hashing only the files whose signature
/// moved or was racy.
pub fn verify(root: &Path, recorded: Option<&[Entry]>, mark: i128) -> Verdict {
    let expected = recorded.unwrap_or_default();
    let mut next = expected.iter();
    let mut fresh = Vec::with_capacity(expected.len());
    let mut refreshed = false;
    let mut why = String::new();
    let present = walk(root, |path, kind, full, meta| {
        let Some(want) = next.next() else {
            why = format!("{path} is new");
            return Ok(false);
        };
        if want.path != path || want.kind != kind {
            why = if want.path == path {
                format!("{path} changed type")
            } else if fs::symlink_metadata(root.join(&want.path)).is_err() {
                format!("{} is gone", want.path)
            } else {
                format!("{path} is new")
            };
            return Ok(false);
        }
        let mut entry = want.clone();
        if let (Some(state), Some(m)) = (&mut entry.file, meta) {
            let sig = Sig::of(m);
            if state.racy || sig != state.sig {
                // Equal bytes under a new signature (a `touch`, a checkout)
                // are still current.
                if file_hash(path, full)?.0 != state.hash {
                    why = format!("{path} was edited");
                    return Ok(false);
                }
                state.sig = sig;
                state.racy = sig.racy(mark);
                refreshed = true;
            }
        }
        fresh.push(entry);
        Ok(true)
    });
    match present {
        Ok(present) if present != recorded.is_some() => {
            Verdict::Differs(if present { "it appeared" } else { "it is gone" }.to_owned())
        }
        Ok(present) => match next.next() {
            Some(gone) => Verdict::Differs(format!("{} is gone", gone.path)),
            None if refreshed => Verdict::Refreshed(present.then_some(fresh)),
            None => Verdict::Same,
        },
        Err(e) if why.is_empty() => Verdict::Differs(e.to_string()),
        Err(_) => Verdict::Differs(why),
    }
}

/// Calls `each(relative path, kind, path, lstat)` for every entry below
/// `root` that a plan walks ([`crate::plan::walk`]), in sorted order, until it returns `false`. Returns whether `root`
/// exists; an error when `root` is not a directory or `each` stopped.
pub(super) fn walk(
    root: &Path,
    mut each: impl FnMut(&str, Kind, &Path, Option<&fs::Metadata>) -> io::Result<bool>,
) -> io::Result<bool> {
    // The root may be a symlink, as a build writes through it; nothing
    // below it is followed.
    match fs::metadata(root) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
        Ok(m) if !m.is_dir() => return Err(io::Error::other("not a directory")),
        Ok(_) => {}
    }
    // What a plan walks, and nothing else: what lies outside cannot change
    // a build, and `.git` there is not hashed.
    for entry in crate::plan::walk(root) {
        let entry = entry.map_err(io::Error::other)?;
        let t = entry.file_type();
        let kind = if t.is_file() {
            Kind::File
        } else if t.is_dir() {
            Kind::Dir
        } else if t.is_symlink() {
            Kind::Symlink
        } else {
            Kind::Other
        };
        let meta = match kind {
            Kind::File => Some(entry.metadata().map_err(io::Error::other)?),
            _ => None,
        };
        let rel = entry
            .path()
            .strip_prefix(root)
            .map_err(io::Error::other)?
            .to_str()
            .ok_or_else(|| io::Error::other("a path that is not UTF-8"))?
            .replace(std::path::MAIN_SEPARATOR, "/");
        if !each(&rel, kind, entry.path(), meta.as_ref())? {
            return Err(io::Error::other("stopped"));
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(root: &Path) -> Option<Vec<Entry>> {
        take(root, mark(), |rel, p| Ok(file_hash(rel, p)?.0)).unwrap()
    }

    #[test]
    fn an_unchanged_tree_is_the_same_and_any_change_differs() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("out");
        assert_eq!(snap(&root), None);
        assert_eq!(verify(&root, None, mark()), Verdict::Same);
        fs::create_dir_all(root.join("a")).unwrap();
        fs::write(root.join("a/x.yaml"), "x: 1\n").unwrap();
        let s = snap(&root).unwrap();
        assert!(
            matches!(verify(&root, None, mark()), Verdict::Differs(_)),
            "appeared"
        );
        // Just written, so racy: hashed, and the refreshed snapshot says so.
        assert!(s.iter().any(|e| e.file.as_ref().is_some_and(|f| f.racy)));
        assert!(matches!(
            verify(&root, Some(&s), mark()),
            Verdict::Refreshed(_)
        ));

        fs::write(root.join("a/x.yaml"), "x: 2\n").unwrap();
        assert_eq!(
            verify(&root, Some(&s), mark()),
            Verdict::Differs("a/x.yaml was edited".into())
        );
        fs::write(root.join("a/x.yaml"), "x: 1\n").unwrap();
        assert!(
            matches!(verify(&root, Some(&s), mark()), Verdict::Refreshed(_)),
            "restored"
        );
        fs::write(root.join("a/y.yaml"), "").unwrap();
        assert_eq!(
            verify(&root, Some(&s), mark()),
            Verdict::Differs("a/y.yaml is new".into())
        );
        fs::remove_file(root.join("a/y.yaml")).unwrap();
        fs::remove_file(root.join("a/x.yaml")).unwrap();
        assert_eq!(
            verify(&root, Some(&s), mark()),
            Verdict::Differs("a/x.yaml is gone".into())
        );
        fs::remove_dir_all(&root).unwrap();
        assert_eq!(
            verify(&root, Some(&s), mark()),
            Verdict::Differs("it is gone".into())
        );
    }

    #[test]
    fn an_old_signature_vouches_for_the_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::write(root.join("x.yaml"), "x: 1\n").unwrap();
        // As if the snapshot were taken a minute later.
        let later = mark() + 60_000_000_000;
        let s = take(root, later, |rel, p| Ok(file_hash(rel, p)?.0))
            .unwrap()
            .unwrap();
        assert!(s.iter().all(|e| e.file.as_ref().is_some_and(|f| !f.racy)));
        assert_eq!(verify(root, Some(&s), later), Verdict::Same);
    }

    #[test]
    fn symlinks_are_entries_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("out");
        fs::create_dir(&root).unwrap();
        std::os::unix::fs::symlink(dir.path(), root.join("up")).unwrap();
        let s = snap(&root).unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].kind, Kind::Symlink);
        // A symlinked root is walked, as a build writes through it.
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&root, &link).unwrap();
        assert_eq!(snap(&link), Some(s));
    }
}
