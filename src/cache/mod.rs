//! The build cache: lets `build` and `build --check` answer "up to date"
//! without compiling.
//!
//! After a build, trainc records (outside the output directories) the key of
//! the inputs it compiled ([`key`]), the prints of the build contexts it
//! hashed ([`crate::image::ContextPrint`]) and a snapshot of every output
//! directory ([`snapshot`]). The next build hashes its inputs again, which
//! costs a read of the definitions and no parsing; when the key matches and
//! every context and output directory still match, the output is what a
//! full build would produce, and nothing is compiled. Anything else, or any doubt,
//! takes the full path, which never reads the cache: the cache can make a
//! build faster, never different.
//!
//! Records live in `$TRAINC_CACHE_DIR`, else `$XDG_CACHE_HOME/trainc`, else
//! `~/.cache/trainc`; deleting them is always safe.

mod codec;
pub mod incremental;
pub mod key;
pub mod snapshot;

use std::collections::HashMap;
use std::fs;
use std::io::Write as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use incremental::{Incremental, State};
pub use key::Request;
use snapshot::{Entry, Verdict};

use crate::guard::real;
use crate::image::ContextPrint;
use crate::pipeline::Read;
use crate::plan::{Change, Op, Plan};

/// Bumped whenever the record changes shape or meaning. Formats 6 to 10
/// are the byte encoding of [`codec`] (7 keeps each definition file's
/// parts apart, to be decoded only when it changed; 8 keeps each
/// document's claims apart, to be skipped whole; 9 keeps the snapshots
/// and the per-file part in pieces, each a file of its own; 10 says
/// whether the build warned); 5 and before were JSON.
const FORMAT: u32 = 10;

#[derive(Debug)]
struct Record {
    format: u32,
    key: String,
    /// The build printed warnings: the output is never vouched for without
    /// compiling, so that every build shows them, as without the cache.
    warned: bool,
    contexts: Vec<ContextPrint>,
    /// The directories the status line names, with their file counts.
    dests: Vec<(PathBuf, usize)>,
    /// Every directory the build may write, as it was left; `None` when it
    /// does not exist.
    outputs: Vec<(PathBuf, Option<Vec<Entry>>)>,
    /// Of a record read: the pieces that hold each directory's entries
    /// ([`codec::Reuse`]), beside `outputs`. Empty in one to write.
    pieces: Vec<Option<Vec<codec::Piece>>>,
    /// Of a record read: whether each directory's snapshot holds no racy
    /// entry ([`snapshot::after`]), beside `outputs`.
    calm: Vec<bool>,
    /// Each directory's census ([`snapshot::Census`]), beside `outputs`:
    /// as read, or as a patched edit adjusted it; `None` where it is to be
    /// counted when written.
    census: Vec<Option<snapshot::Census>>,
    /// What each definition file made, for an incremental build; `None`
    /// when the build could not say, and in a record just read.
    files: Option<incremental::Files>,
    /// Of a record read: its per-file part, undecoded
    /// ([`codec::decode_piece`]); `None` when the build could not say.
    read_files: Option<codec::FilesRef>,
}

/// What the cache says of a build (see [`Cache::lookup`]).
#[derive(Debug)]
pub enum Lookup {
    /// The output is current: each directory the status line names, with
    /// its file count.
    Fresh(Vec<(PathBuf, usize)>),
    /// Compiled incrementally, with why the output is not current.
    Incremental(Box<Incremental>, String),
}

/// The definition files and the library as a build reads them (with the
/// same size and encoding checks), each read once.
fn inputs(req: &Request) -> Result<Inputs, String> {
    let cannot = "an input cannot be read; the build will say which";
    let project = req.project;
    let paths = crate::pipeline::files(project, req.cwd, req.paths).map_err(|_| cannot)?;
    // Each file hashed once, where it was read.
    let read = crate::par::map(&paths, |p| {
        let name = crate::load::display_name(&project.root, p);
        let f = crate::load::read_as(p, name, crate::load::shown_path(req.cwd, p)).ok()?;
        let hash = key::source_hash(&f.text);
        Some((f, hash))
    });
    let mut hashes = Vec::with_capacity(read.len());
    let sources = paths
        .into_iter()
        .zip(read)
        .map(|(p, r)| {
            let (f, hash) = r?;
            hashes.push(hash);
            Some((p, f))
        })
        .collect::<Option<_>>()
        .ok_or(cannot)?;
    let library = project.library().map_err(|_| cannot)?;
    let key = req
        .key_hashed(&sources, &hashes, library.digest())
        .ok_or("the trainc executable cannot be inspected")?;
    Ok(Inputs {
        sources,
        hashes,
        library,
        key,
    })
}

/// The definition files and the library as a build reads them (with the
/// same size and encoding checks), each read and hashed once, and the key
/// of a build of them.
pub(super) struct Inputs {
    pub sources: crate::pipeline::Sources,
    /// Each file's [`key::source_hash`].
    pub hashes: Vec<String>,
    pub library: crate::library::Library,
    pub key: String,
}

/// Whether `record` is of the directories `req` writes, and its build
/// contexts are as they were.
fn same_places(req: &Request, record: &Record) -> Result<(), String> {
    let dirs: Vec<&PathBuf> = record.outputs.iter().map(|(d, _)| d).collect();
    if dirs != req.dirs().iter().collect::<Vec<_>>() {
        return Err("the output directories changed".into());
    }
    let generated = req.generated();
    let top = req.project.top();
    if let Some(c) = record.contexts.iter().find(|c| !c.holds(&generated, &top)) {
        return Err(format!("the build context {} changed", shown(req, &c.dir)));
    }
    Ok(())
}

/// The record of one request.
#[derive(Debug)]
pub struct Cache {
    dir: PathBuf,
    /// The record's head; its pieces are beside it, named
    /// `<stem>-<checksum>.piece`.
    file: PathBuf,
    stem: String,
    /// When this build started (see [`snapshot::mark`]).
    started: i128,
    /// The pieces the head read names, once one is decoded: those of them
    /// the head written next does not name are deleted by name, without
    /// listing the directory ([`tidy`]).
    read_named: OnceLock<Vec<u64>>,
}

impl Cache {
    /// The cache for `req`, or why there is none.
    pub fn open(req: &Request) -> Result<Self, String> {
        let started = snapshot::mark();
        // Resolved and cleaned once: the checks below and the writes must
        // mean the same directory (`deploy/x/../../c` is not in `deploy`,
        // and creating it must not create `deploy/x`).
        let dir = real(&req.cwd.join(cache_dir()?));
        for out in req.dirs() {
            let out_real = real(&out);
            if dir.starts_with(&out_real) || out_real.starts_with(&dir) {
                return Err(format!(
                    "the cache directory and {} overlap",
                    shown(req, &out)
                ));
            }
        }
        let location = req
            .location()
            .ok_or("the trainc executable cannot be inspected")?;
        Ok(Self {
            file: dir.join("builds").join(format!("{location}.rec")),
            stem: location,
            dir,
            started,
            read_named: OnceLock::new(),
        })
    }

    /// What the cache says of a build of `sets`: that the output is
    /// current (each directory the status line names, with its file count),
    /// or an incremental build with why the output is not current; or why
    /// the full build must run, for `build --verbose`. Reads the record and
    /// the inputs once for both. May refresh the record (see
    /// [`snapshot::Verdict::Refreshed`]); never touches the output.
    pub fn lookup(&self, req: &Request, sets: &[crate::pipeline::Set]) -> Result<Lookup, String> {
        let mut record = self.load()?;
        let inputs = inputs(req)?;
        let why = if record.key == inputs.key {
            match self.current(req, &mut record) {
                Ok(()) if !record.warned => {
                    let dests = std::mem::take(&mut record.dests);
                    left_to_exit(record);
                    return Ok(Lookup::Fresh(dests));
                }
                // The files with warnings are compiled again (see
                // [`incremental`]), so that the warnings are shown again.
                Ok(()) => "the last build had warnings, which every build shows".to_owned(),
                Err(why) => why,
            }
        } else {
            "the definitions, project, library or trainc changed".to_owned()
        };
        // The output differs from its snapshot only when the key matched
        // (and, for a build that warned, `current` may have refreshed the
        // snapshot: walked, as when it differs).
        let patch = record.key != inputs.key;
        let inc = self.compile(req, record, inputs, sets, patch)?;
        Ok(Lookup::Incremental(Box::new(inc), why))
    }

    /// An incremental build of `sets` (see [`incremental`]): the definition
    /// files that changed since the recorded build compiled, the others'
    /// output taken from the record; or why the full build must run. Never
    /// touches the output. `patch`: see [`incremental::compile`].
    pub fn incremental(
        &self,
        req: &Request,
        sets: &[crate::pipeline::Set],
        patch: bool,
    ) -> Result<Incremental, String> {
        let record = self.load()?;
        self.compile(req, record, inputs(req)?, sets, patch)
    }

    /// Whether the output is as `record` says, the record's key being
    /// current; refreshes the record's snapshots when they needed hashing.
    fn current(&self, req: &Request, record: &mut Record) -> Result<(), String> {
        same_places(req, record)?;
        let mark = snapshot::mark();
        let mut refreshed = false;
        let mut moved = vec![Vec::new(); record.outputs.len()];
        for (i, ((dir, entries), moved)) in record.outputs.iter_mut().zip(&mut moved).enumerate() {
            match snapshot::verify(dir, entries.as_deref(), mark) {
                Verdict::Same => {}
                Verdict::Refreshed(now, m) => {
                    *entries = now;
                    *moved = m;
                    refreshed = true;
                    // Counted again when written: it counts what the
                    // signatures say, and these changed.
                    if let Some(c) = record.census.get_mut(i) {
                        *c = None;
                    }
                }
                Verdict::Differs(why) => {
                    return Err(format!(
                        "{} changed since the last build: {why}",
                        shown(req, dir)
                    ));
                }
            }
        }
        // Best effort: the answer stands without it.
        if refreshed {
            // Only the pieces of the entries hashed again are written again.
            let reuse: Vec<Option<codec::Reuse>> = record
                .pieces
                .iter()
                .zip(&moved)
                .map(|(pieces, dirty)| {
                    Some(codec::Reuse {
                        pieces: pieces.as_deref()?,
                        dirty,
                    })
                })
                .collect();
            let _ = self.write(record, &reuse);
        } else {
            keep_alive(&self.file);
        }
        Ok(())
    }

    fn compile(
        &self,
        req: &Request,
        mut record: Record,
        inputs: Inputs,
        sets: &[crate::pipeline::Set],
        patch: bool,
    ) -> Result<Incremental, String> {
        let files = record
            .read_files
            .take()
            .ok_or("the last build kept no record of each definition file")?;
        same_places(req, &record)?;
        incremental::compile(
            req,
            record,
            files,
            &mut |p| self.piece(p),
            inputs,
            sets,
            patch,
        )
    }

    /// Records a build that compiled `read` (with `state`, the hash of
    /// every file it meant to write) and left the directories of `plans` as
    /// they should be, and whether it `warned`; or says why it could not.
    pub fn save(
        &self,
        req: &Request,
        read: &Read,
        state: &mut State,
        plans: &[&Plan],
        warned: bool,
    ) -> Result<(), String> {
        let key = match state.key.take() {
            Some(key) => key,
            None => req
                .key(&read.sources, &read.library)
                .ok_or("the trainc executable cannot be inspected")?,
        };
        // The record would change the context, and with it every tag.
        if let Some(c) = read.contexts.iter().find(|c| c.reaches(&self.dir)) {
            return Err(format!(
                "the build context {} reaches into the cache directory; leave it out in the context's .dockerignore",
                shown(req, &c.dir)
            ));
        }
        // What each directory now holds, as the plans wrote it.
        let mut written: Vec<(&Path, HashMap<&str, std::borrow::Cow<'_, str>>)> = Vec::new();
        let mut outputs = Vec::new();
        if !state.walked.is_empty() {
            // An incremental build: each directory as its plan's walk saw
            // it, and what the plan did to it; and, for a directory found
            // as the record read says and changed in place, which entries
            // changed since that record (the others are copied from it).
            let base = state.base.take();
            let mut dirty = Vec::new();
            let mut census = Vec::new();
            for dir in req.dirs() {
                let plan = plans.iter().find(|p| p.root == dir);
                let mut changed = None;
                let mut counted = None;
                let entries = match (state.walked.remove(&dir), plan) {
                    (Some(Some(before)), Some(plan)) => {
                        let moved = base.as_ref().and_then(|b| b.moved.get(&dir));
                        let settled = base
                            .as_ref()
                            .filter(|b| b.dirs.get(&dir).is_some_and(|d| d.calm))
                            .map(|_| moved.map_or(&[][..], Vec::as_slice));
                        // What the files the plan rewrites counted before.
                        let was = base
                            .as_ref()
                            .and_then(|b| b.dirs.get(&dir)?.census.as_ref());
                        let was = was.map(|c| {
                            let touched: Vec<(usize, Option<u64>)> = plan
                                .pending()
                                .filter_map(|c| {
                                    let i = before
                                        .binary_search_by(|e| snapshot::walk_cmp(&e.path, &c.path))
                                        .ok()?;
                                    Some((i, snapshot::owned(&before[i]).map(|f| f.sig.size)))
                                })
                                .collect();
                            (c, touched)
                        });
                        let (entries, d) =
                            snapshot::after(&dir, before, plan, self.started, bytes_hash, settled)
                                .map_err(|e| {
                                    format!("{} cannot be recorded: {e}", shown(req, &dir))
                                })?;
                        // Entries changed in place: the census adjusted by
                        // what the rewritten files count now.
                        if let (Some((c, touched)), Some(_)) = (was, &d) {
                            counted = adjusted(c, &touched, &entries);
                        }
                        changed = d.map(|mut d| {
                            d.extend(moved.into_iter().flatten());
                            d.sort_unstable();
                            d.dedup();
                            d
                        });
                        Some(entries)
                    }
                    (Some(Some(_)), None) => {
                        return Err(format!("{} was not planned", shown(req, &dir)));
                    }
                    // Not there before the build, nor planned: not there now,
                    // or the next check finds it.
                    (Some(None) | None, _) if plan.is_none_or(|p| p.changes.is_empty()) => {
                        snapshot::take(&dir, self.started, |rel, _| {
                            Err(std::io::Error::other(format!(
                                "{rel} appeared while the build ran"
                            )))
                        })
                        .map_err(|e| format!("{} cannot be recorded: {e}", shown(req, &dir)))?
                    }
                    (Some(None) | None, _) => snapshot::after(
                        &dir,
                        Vec::new(),
                        plan.ok_or("internal")?,
                        self.started,
                        bytes_hash,
                        None,
                    )
                    .map(|(entries, _)| Some(entries))
                    .map_err(|e| format!("{} cannot be recorded: {e}", shown(req, &dir)))?,
                };
                outputs.push((dir, entries));
                dirty.push(changed);
                census.push(counted);
            }
            let reuse: Vec<Option<codec::Reuse>> = outputs
                .iter()
                .zip(&dirty)
                .map(|((dir, _), dirty)| {
                    let base = base.as_ref()?;
                    Some(codec::Reuse {
                        pieces: base.dirs.get(dir)?.pieces.as_deref()?,
                        dirty: dirty.as_deref()?,
                    })
                })
                .collect();
            let dests = plans.iter().map(|p| (p.root.clone(), p.files())).collect();
            let record = Record {
                format: FORMAT,
                key,
                warned,
                contexts: read.contexts.clone(),
                dests,
                outputs,
                pieces: Vec::new(),
                calm: Vec::new(),
                census,
                files: Self::files(req, read, state),
                read_files: None,
            };
            let written = self.write(&record, &reuse);
            left_to_exit(record);
            return written;
        }
        for p in plans {
            let known = state.hashes.get(&p.root);
            let mut files = HashMap::new();
            for c in p.changes.iter().filter(|c| c.op != Op::Delete) {
                // Borrowed: a cold build of 5,000 jobs has 95,000 of them.
                let hash = match known.and_then(|k| k.get(&c.path)) {
                    Some(hash) => std::borrow::Cow::Borrowed(hash.as_str()),
                    // An unchanged file's bytes are not kept (every file
                    // trainc writes has a header, so none is empty).
                    None if c.new.is_empty() => {
                        return Err(format!("the hash of {} is not known", c.path));
                    }
                    None => std::borrow::Cow::Owned(snapshot::content_hash(&c.new)),
                };
                files.insert(c.path.as_str(), hash);
            }
            written.push((p.root.as_path(), files));
        }
        for dir in req.dirs() {
            let files = written.iter().find(|(d, _)| *d == dir).map(|(_, f)| f);
            // A directory that held nothing holds what the plan wrote: its
            // snapshot is the plan's, with no walk (the next check compares
            // every entry, so anything else that appeared is found then).
            if let (Some(plan), Some(files)) =
                (plans.iter().find(|p| p.root == dir && p.fresh), files)
            {
                let hash = |c: &Change| {
                    files
                        .get(c.path.as_str())
                        .map(|h| h.to_string())
                        .ok_or_else(|| {
                            std::io::Error::other(format!("the hash of {} is not known", c.path))
                        })
                };
                let (entries, _) =
                    snapshot::after(&dir, Vec::new(), plan, self.started, hash, None)
                        .map_err(|e| format!("{} cannot be recorded: {e}", shown(req, &dir)))?;
                outputs.push((dir, Some(entries)));
                continue;
            }
            // Its own files are not read back. Any other file must be one the
            // plan would leave alone: one it would prune can only have
            // appeared after the plan looked.
            let hash = |rel: &str, path: &Path| match files.and_then(|f| f.get(rel)) {
                Some(hash) => Ok(hash.to_string()),
                None => {
                    let (hash, owned) = snapshot::file_hash(rel, path)?;
                    if owned {
                        return Err(std::io::Error::other(format!(
                            "{rel} appeared while the build ran"
                        )));
                    }
                    Ok(hash)
                }
            };
            // Racy from the start of the build, not from now: a file that
            // another program changed after the plan compared it must not be
            // vouched for by the signature it has now. The files this build
            // wrote are hashed once by the next check, which then settles them.
            let entries = snapshot::take(&dir, self.started, hash)
                .map_err(|e| format!("{} cannot be recorded: {e}", shown(req, &dir)))?;
            // And every file the plan wrote or kept must be there, as a file.
            if let Some(files) = files {
                let found: std::collections::HashSet<&str> = entries
                    .iter()
                    .flatten()
                    .filter(|e| e.kind == snapshot::Kind::File)
                    .map(|e| e.path.as_str())
                    .collect();
                if let Some(rel) = files.keys().find(|rel| !found.contains(*rel)) {
                    return Err(format!(
                        "{} cannot be recorded: {rel} went missing while the build ran",
                        shown(req, &dir)
                    ));
                }
            }
            outputs.push((dir, entries));
        }
        let record = Record {
            format: FORMAT,
            key,
            warned,
            contexts: read.contexts.clone(),
            dests: written
                .iter()
                .map(|(d, f)| (d.to_path_buf(), f.len()))
                .collect(),
            outputs,
            pieces: Vec::new(),
            calm: Vec::new(),
            census: Vec::new(),
            files: Self::files(req, read, state),
            read_files: None,
        };
        let written = self.write(&record, &[]);
        left_to_exit(record);
        written
    }

    /// The per-file part of the record, taken from `state`: a build is
    /// recorded once.
    fn files(req: &Request, read: &Read, state: &mut State) -> Option<incremental::Files> {
        let sources = state.sources.take()?;
        Some(incremental::Files {
            global: req.global_key(&read.library)?,
            sources,
            pieces: std::mem::take(&mut state.pieces),
            sums: std::mem::take(&mut state.sums),
        })
    }

    /// The record, when there is one this user can trust and it is of
    /// this version of trainc: its head in a records directory that is no
    /// symlink and that only this user can write, a regular file (no
    /// symlink) of this user's; its pieces beside it, alike.
    fn load(&self) -> Result<Record, String> {
        let head = self.read()?;
        match codec::format(&head) {
            Some(FORMAT) => {
                let record = codec::decode(&head, &mut |p| self.piece(p))
                    .map_err(|_| "the record is damaged")?;
                let snapshots = record.pieces.iter().flatten().flatten();
                let files = record.read_files.iter().flat_map(|f| &f.pieces);
                let mut named: Vec<u64> = snapshots
                    .chain(files.map(|f| &f.piece))
                    .map(|p| p.sum)
                    .collect();
                named.sort_unstable();
                named.dedup();
                // Read once per build: a second read is of the same head.
                let _ = self.read_named.set(named);
                Ok(record)
            }
            Some(_) => Err("the record is from another version of trainc".into()),
            None => Err("the record is damaged".into()),
        }
    }

    /// The record's head.
    fn read(&self) -> Result<Vec<u8>, String> {
        let none = "no record of an earlier build";
        let builds = self.dir.join("builds");
        if fs::symlink_metadata(&builds).is_err() {
            return Err(none.into());
        }
        private_dir(&builds)?;
        let (file, meta) = crate::plan::open_nofollow(&self.file).map_err(|_| none)?;
        if !meta.is_file() || meta.uid() != rustix::process::geteuid().as_raw() {
            return Err(format!(
                "the record {} is not a file of this user's",
                self.file.display()
            ));
        }
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut &file, &mut bytes).map_err(|_| none)?;
        Ok(bytes)
    }

    fn piece_name(&self, sum: u64) -> String {
        format!("{}-{sum:016x}.piece", self.stem)
    }

    /// The bytes of a piece of the record, read as its head is (never more
    /// than the head says it holds); `None` when it is not there or not a
    /// file of this user's. The caller checks its length and checksum.
    fn piece(&self, p: &codec::Piece) -> Option<Vec<u8>> {
        use std::io::Read as _;
        let path = self.dir.join("builds").join(self.piece_name(p.sum));
        let (file, meta) = crate::plan::open_nofollow(&path).ok()?;
        let len = u64::try_from(p.len).ok()?;
        if !meta.is_file() || meta.uid() != rustix::process::geteuid().as_raw() || meta.len() != len
        {
            return None;
        }
        let mut bytes = Vec::with_capacity(p.len);
        (&file).take(len + 1).read_to_end(&mut bytes).ok()?;
        Some(bytes)
    }

    /// Replaces the record: writes the pieces it does not share with the
    /// record read, then renames its head into place, so that a build
    /// killed at any point leaves the old record or the new one whole;
    /// then deletes this record's pieces that the head no longer names.
    /// `reuse`: the directories' snapshots as a record read holds them
    /// (see [`codec::write`]).
    fn write(&self, record: &Record, reuse: &[Option<codec::Reuse>]) -> Result<(), String> {
        let io = |e: std::io::Error| format!("cannot write {}: {e}", self.file.display());
        let builds = self.dir.join("builds");
        {
            use std::os::unix::fs::DirBuilderExt as _;
            fs::create_dir_all(&self.dir).map_err(io)?;
            match fs::DirBuilder::new().mode(0o700).create(&builds) {
                Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(io(e)),
                _ => {}
            }
        }
        // Never written through, nor swept through: a symlink here could
        // point anywhere.
        private_dir(&builds)?;
        tag(&self.dir);
        let encoded = codec::write(record, reuse)
            .map_err(|_| "internal: a record that was not read cannot be written")?;
        let put = |name: &str, bytes: &[u8]| -> std::io::Result<()> {
            let mut tmp = tempfile::Builder::new()
                .prefix(".record-")
                .tempfile_in(&builds)?;
            tmp.write_all(bytes)?;
            tmp.persist(builds.join(name)).map_err(|e| e.error)?;
            Ok(())
        };
        // Written even where a piece of that name is there already: it
        // may be one that was damaged, which the head read never named.
        for (p, bytes) in &encoded.pieces {
            put(&self.piece_name(p.sum), bytes).map_err(io)?;
        }
        put(&format!("{}.rec", self.stem), &encoded.head).map_err(io)?;
        let named: std::collections::HashSet<String> = encoded
            .named
            .iter()
            .map(|p| self.piece_name(p.sum))
            .collect();
        let read = self
            .read_named
            .get()
            .map(|sums| sums.iter().map(|&s| self.piece_name(s)).collect());
        tidy(
            &builds,
            Written {
                stem: &self.stem,
                named: &named,
                started: self.started,
            },
            read,
        );
        Ok(())
    }
}

/// A record just written, whose pieces its head no longer names are
/// deleted by the [`tidy`] that follows, when they were there before its
/// build started: a build of the same record running beside it may have
/// written the newer ones for its own head.
struct Written<'a> {
    stem: &'a str,
    named: &'a std::collections::HashSet<String>,
    started: i128,
}

impl Written<'_> {
    /// Whether `name` in `dir` is a piece of this record that its head no
    /// longer names and that was there before its build: one to delete.
    fn replaced(&self, dir: &impl rustix::fd::AsFd, name: &str) -> bool {
        name.strip_prefix(self.stem)
            .is_some_and(|rest| rest.starts_with('-'))
            && !self.named.contains(name)
            && mtime(dir, name).is_some_and(|t| t < self.started)
    }
}

/// The mtime of `name` in `dir`, in nanoseconds since the epoch, not
/// following a symlink.
fn mtime(dir: &impl rustix::fd::AsFd, name: &str) -> Option<i128> {
    let st = rustix::fs::statat(dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW).ok()?;
    Some(i128::from(st.st_mtime) * 1_000_000_000 + i128::from(st.st_mtime_nsec))
}

/// `census` after the files at `touched` (each index, and the size it
/// counted for when it was one of trainc's own files) were rewritten in
/// place, or hashed again, as `entries` now hold them; `None` when one changed hands
/// (trainc's own, or not), which only a count over every entry settles.
pub(crate) fn adjusted(
    census: &snapshot::Census,
    touched: &[(usize, Option<u64>)],
    entries: &[Entry],
) -> Option<snapshot::Census> {
    let mut c = census.clone();
    for &(i, was) in touched {
        let now = snapshot::owned(entries.get(i)?).map(|f| f.sig.size);
        match (was, now) {
            (Some(was), Some(now)) => c.bytes = c.bytes.checked_sub(was)?.checked_add(now)?,
            (None, None) => {}
            _ => return None,
        }
    }
    // The tests build in debug: every census adjusted is checked against
    // a count.
    debug_assert_eq!(
        c,
        snapshot::Census::of(entries),
        "the census is not the entries'"
    );
    Some(c)
}

/// A record read or written, which the build no longer needs, left to the
/// end of the process rather than freed: a build ends right after it, and
/// freeing a snapshot entry by entry (two strings each, 19,000 entries at
/// 1,000 jobs) was a third of what recording an edit cost beyond the check.
/// The memory is the process's until it exits, which is soon.
fn left_to_exit(record: Record) {
    std::mem::forget(record);
}

/// Whether `name` is that of a piece: `<32 hex digits>-<16 hex digits>.piece`.
fn is_piece(name: &str) -> bool {
    name.strip_suffix(".piece")
        .and_then(|n| n.split_once('-'))
        .is_some_and(|(stem, sum)| {
            stem.len() == 32
                && sum.len() == 16
                && stem
                    .bytes()
                    .chain(sum.bytes())
                    .all(|b| b.is_ascii_hexdigit())
        })
}

/// Records not used for this long are deleted when another is written: each
/// trainc binary, project and output directory has its own, and old ones
/// would pile up.
const UNUSED: Duration = Duration::from_secs(30 * 24 * 3600);

/// Longer than any build takes to write a record's pieces and then its
/// head.
const WRITING: Duration = Duration::from_secs(3600);

/// How often a record written is followed by the whole [`sweep`]; in
/// between, only the pieces it replaced are deleted ([`tidy`]).
const SWEEP_EVERY: Duration = Duration::from_secs(3600);

/// The file whose mtime says when the records directory was last swept.
/// Not a name the sweep deletes.
const SWEPT: &str = ".swept";

/// After `written` is in place: deletes the pieces of the record read
/// (`read`, by name) that its head no longer names and that predate its
/// build, as the sweep would, by name; an edit's cost does not grow with
/// what else the cache holds. The whole sweep runs instead when no record
/// was read (its stale pieces are not known by name) or when the last one
/// ran [`SWEEP_EVERY`] ago (or at a time still to come, after the clock
/// was set back).
fn tidy(builds: &Path, written: Written, read: Option<Vec<String>>) {
    use rustix::fs::{AtFlags, CWD, Mode, OFlags, openat, unlinkat};
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let Ok(fd) = openat(CWD, builds, flags, Mode::empty()) else {
        return;
    };
    let nanos = |t: SystemTime| i128::try_from(t.duration_since(UNIX_EPOCH).ok()?.as_nanos()).ok();
    let now = SystemTime::now();
    let swept = mtime(&fd, SWEPT);
    let after = now.checked_sub(SWEEP_EVERY).and_then(nanos);
    let before = now.checked_add(Duration::from_secs(60)).and_then(nanos);
    let recent = matches!((swept, after, before), (Some(t), Some(a), Some(b)) if a < t && t < b);
    match read {
        Some(read) if recent => {
            for name in read.iter().filter(|n| written.replaced(&fd, n)) {
                let _ = unlinkat(&fd, name.as_str(), AtFlags::empty());
            }
        }
        _ => {
            sweep(builds, Some(written));
            let file_flags = OFlags::WRONLY | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            if let Ok(f) = openat(&fd, SWEPT, file_flags, Mode::from_raw_mode(0o600)) {
                let _ = fs::File::from(f).set_modified(now);
            }
        }
    }
}

/// Marks a record as used (its mtime), at most once a day.
fn keep_alive(file: &Path) {
    let now = SystemTime::now();
    if let Ok((f, m)) = crate::plan::open_nofollow(file)
        && m.is_file()
        && m.modified()
            .is_ok_and(|t| t + Duration::from_secs(24 * 3600) < now)
    {
        let _ = f.set_modified(now);
    }
}

/// Whether the records directory is one whose records this user can trust,
/// and sweep: a real directory (not a symlink) of this user's that nobody
/// else can write. One made by an older trainc with the umask's group write
/// is made private.
fn private_dir(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt as _;
    let m =
        fs::symlink_metadata(dir).map_err(|e| format!("cannot inspect {}: {e}", dir.display()))?;
    if m.file_type().is_symlink() || !m.is_dir() {
        return Err(format!(
            "{} is not a directory (a symlink?); the cache never writes through one",
            dir.display()
        ));
    }
    if m.uid() != rustix::process::geteuid().as_raw() {
        return Err(format!("{} belongs to another user", dir.display()));
    }
    if m.mode() & 0o022 != 0 {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
            .map_err(|_| format!("{} can be written by other users", dir.display()))?;
    }
    Ok(())
}

/// Deletes the records, and temporary files of interrupted writes, unused
/// for [`UNUSED`], the pieces of records that are gone, and those the
/// record `written` no longer names. One listing of the directory, as
/// opened, never through a symlink: one in place of the directory, or of
/// an entry, is left alone.
fn sweep(builds: &Path, written: Option<Written>) {
    use rustix::fs::{AtFlags, CWD, Dir, Mode, OFlags, openat, unlinkat};
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let Ok(fd) = openat(CWD, builds, flags, Mode::empty()) else {
        return;
    };
    let Ok(entries) = Dir::read_from(&fd) else {
        return;
    };
    let now = SystemTime::now();
    let mut records = std::collections::HashSet::new();
    let mut pieces = Vec::new();
    for e in entries.flatten() {
        let Ok(name) = e.file_name().to_str() else {
            continue;
        };
        // Only names trainc gives: `<32 hex digits>.rec` (`.json` before
        // format 6), `.record-XXXXXX`; and pieces, which go with their
        // record.
        let record = name
            .strip_suffix(".rec")
            .or_else(|| name.strip_suffix(".json"))
            .filter(|h| h.len() == 32 && h.bytes().all(|b| b.is_ascii_hexdigit()));
        let ours = record.is_some()
            || name
                .strip_prefix(".record-")
                .is_some_and(|r| r.len() == 6 && r.bytes().all(|b| b.is_ascii_alphanumeric()));
        if is_piece(name) {
            // Its own pieces that a record just written names, or that are
            // newer than its build, stay with its head (below).
            if written.as_ref().is_some_and(|w| w.replaced(&fd, name)) {
                let _ = unlinkat(&fd, name, AtFlags::empty());
            } else {
                pieces.push(name.to_owned());
            }
            continue;
        }
        if !ours {
            continue;
        }
        let file_flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let Ok(file) = openat(&fd, name, file_flags, Mode::empty()).map(fs::File::from) else {
            continue;
        };
        let unused = file
            .metadata()
            .is_ok_and(|m| m.is_file() && m.modified().is_ok_and(|t| t + UNUSED < now));
        if unused {
            let _ = unlinkat(&fd, name, AtFlags::empty());
        } else if let Some(stem) = record.filter(|_| name.ends_with(".rec")) {
            records.insert(stem.to_owned());
        }
    }
    // Not the pieces of a record being written: its head comes last.
    let orphaned = |name: &str| {
        let writing =
            i128::try_from((now - WRITING).duration_since(UNIX_EPOCH).ok()?.as_nanos()).ok()?;
        Some(mtime(&fd, name)? < writing)
    };
    for name in pieces {
        if !records.contains(&name[..32]) && orphaned(&name) == Some(true) {
            let _ = unlinkat(&fd, name.as_str(), AtFlags::empty());
        }
    }
}

/// The content hash of a file whose bytes its plan kept (an incremental
/// build's).
fn bytes_hash(c: &Change) -> std::io::Result<String> {
    Ok(snapshot::content_hash(&c.new))
}

/// How messages name a directory: as status lines do, after resolving
/// `..` and symlinks (a context is often `jobs/../train`).
fn shown(req: &Request, dir: &Path) -> String {
    req.project
        .shown_dir(&dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf()))
}

/// `$TRAINC_CACHE_DIR` (empty: no cache), else `$XDG_CACHE_HOME/trainc`,
/// else `~/.cache/trainc`.
fn cache_dir() -> Result<PathBuf, String> {
    let var = |name| std::env::var_os(name).map(PathBuf::from);
    match var("TRAINC_CACHE_DIR") {
        Some(d) if d.as_os_str().is_empty() => {
            Err("TRAINC_CACHE_DIR is empty, which turns it off".into())
        }
        Some(d) => Ok(d),
        None => match var("XDG_CACHE_HOME").filter(|d| d.is_absolute()) {
            Some(d) => Ok(d.join("trainc")),
            None => var("HOME")
                .filter(|h| h.is_absolute())
                .map(|h| h.join(".cache/trainc"))
                .ok_or_else(|| "there is no cache directory: set TRAINC_CACHE_DIR or HOME".into()),
        },
    }
}

/// Marks the cache directory for backup tools (the CACHEDIR.TAG convention).
fn tag(dir: &Path) {
    // `create_new` also refuses a symlink, dangling or not, in its place.
    if let Ok(mut f) = fs::File::options()
        .write(true)
        .create_new(true)
        .open(dir.join("CACHEDIR.TAG"))
    {
        let _ = f.write_all(
            b"Signature: 8a477f597d28d172789f06886806bc55\n# This directory is a cache of trainc builds; deleting it is safe.\n",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::project::Project;
    use crate::plan::Change;

    /// A stray file that appears between the plan and the record (a generated
    /// file the plan would have pruned, or a file it wrote going missing)
    /// is not recorded as current.
    #[test]
    fn only_what_the_plan_would_leave_is_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let out = root.join("deploy");
        fs::create_dir(&out).unwrap();
        let generated =
            b"# Code generated by trainc. DO NOT EDIT.\napiVersion: v1\nkind: ConfigMap\n".to_vec();
        fs::write(out.join("configmap-a.yaml"), &generated).unwrap();
        let project = Project {
            root: root.to_path_buf(),
            cwd: root.to_path_buf(),
            file: None,
            sources: Vec::new(),
            output: out.clone(),
            build_output: root.join("build"),
            library: None,
            resources: Vec::new(),
            cluster: None,
            variants: Vec::new(),
            defaults: Default::default(),
            deny_warnings: false,
            text: None,
            doc: None,
        };
        let req = Request {
            cwd: root,
            project: &project,
            paths: &[],
            dirs: vec![out.clone()],
        };
        let cache = Cache {
            dir: root.join("cache"),
            file: root.join("cache/builds/0123456789abcdef0123456789abcdef.rec"),
            stem: "0123456789abcdef0123456789abcdef".into(),
            started: snapshot::mark(),
            read_named: OnceLock::new(),
        };
        let plan = Plan {
            root: out.clone(),
            changes: vec![Change {
                path: "configmap-a.yaml".into(),
                op: Op::Unchanged,
                old: Some(generated.clone()),
                new: generated.clone(),
            }],
            kept: 0,
            fresh: false,
        };
        let read = Read {
            sources: Vec::new(),
            library: String::new(),
            contexts: Vec::new(),
        };
        fs::write(out.join("configmap-stray.yaml"), &generated).unwrap();
        assert_eq!(
            cache.save(&req, &read, &mut State::default(), &[&plan], false),
            Err(
                "deploy cannot be recorded: configmap-stray.yaml appeared while the build ran"
                    .into()
            )
        );
        fs::remove_file(out.join("configmap-stray.yaml")).unwrap();
        fs::write(out.join(".trainc-a1B2c3.tmp"), "").unwrap();
        assert!(
            cache
                .save(&req, &read, &mut State::default(), &[&plan], false)
                .is_err(),
            "temporary file"
        );
        fs::remove_file(out.join(".trainc-a1B2c3.tmp")).unwrap();
        fs::remove_file(out.join("configmap-a.yaml")).unwrap();
        assert_eq!(
            cache.save(&req, &read, &mut State::default(), &[&plan], false),
            Err(
                "deploy cannot be recorded: configmap-a.yaml went missing while the build ran"
                    .into()
            )
        );
        fs::write(out.join("configmap-a.yaml"), &generated).unwrap();
        fs::write(out.join("NOTES.md"), "hand-written\n").unwrap();
        assert_eq!(
            cache.save(&req, &read, &mut State::default(), &[&plan], false),
            Ok(())
        );
        assert!(cache.file.is_file());
    }

    /// Old records go; files trainc did not name stay, however old.
    #[test]
    fn the_sweep_deletes_only_old_records() {
        let dir = tempfile::tempdir().unwrap();
        let builds = dir.path();
        let old = SystemTime::now() - UNUSED - Duration::from_secs(60);
        let names = [
            ("0123456789abcdef0123456789abcdef.json", true),
            ("0123456789abcdef0123456789abcdef.rec", true),
            ("0123456789abcdef.rec", false),
            (".record-a1B2c3", true),
            ("report.json", false),
            ("0123456789abcdef.json", false),
            (".record-notours", false),
        ];
        for (name, _) in names {
            let f = fs::File::create(builds.join(name)).unwrap();
            f.set_modified(old).unwrap();
        }
        fs::write(builds.join("fedcba9876543210fedcba9876543210.json"), "").unwrap();
        // Pieces go with their record, and only once a build that could be
        // writing it would have written its head.
        let live = "fedcba9876543210fedcba9876543210";
        fs::write(builds.join(format!("{live}.rec")), "").unwrap();
        let pieces = [
            (format!("{live}-0123456789abcdef.piece"), old, false),
            (
                "0123456789abcdef0123456789abcdef-0123456789abcdef.piece".into(),
                old,
                true,
            ),
            (
                "00000000000000000000000000000000-0123456789abcdef.piece".into(),
                SystemTime::now(),
                false,
            ),
            (
                "00000000000000000000000000000000-0123456789abcdef.pieces".into(),
                old,
                false,
            ),
        ];
        for (name, at, _) in &pieces {
            let f = fs::File::create(builds.join(name)).unwrap();
            f.set_modified(*at).unwrap();
        }
        sweep(builds, None);
        for (name, swept) in names {
            assert_eq!(!builds.join(name).exists(), swept, "{name}");
        }
        for (name, _, swept) in &pieces {
            assert_eq!(!builds.join(name).exists(), *swept, "{name}");
        }
        // A record just written: its pieces that its head no longer names
        // go, unless they are newer than its build (another's, beside it).
        let started = snapshot::mark();
        let named: std::collections::HashSet<String> =
            [format!("{live}-1111111111111111.piece")].into();
        let mine = [
            (format!("{live}-1111111111111111.piece"), old, false),
            (format!("{live}-2222222222222222.piece"), old, true),
            (
                format!("{live}-3333333333333333.piece"),
                SystemTime::now() + Duration::from_secs(5),
                false,
            ),
        ];
        for (name, at, _) in &mine {
            let f = fs::File::create(builds.join(name)).unwrap();
            f.set_modified(*at).unwrap();
        }
        sweep(
            builds,
            Some(Written {
                stem: live,
                named: &named,
                started,
            }),
        );
        for (name, _, swept) in &mine {
            assert_eq!(!builds.join(name).exists(), *swept, "{name}");
        }
        assert!(
            builds
                .join("fedcba9876543210fedcba9876543210.json")
                .exists(),
            "in use"
        );
    }

    /// Between sweeps, a record written deletes by name the pieces of the
    /// record read that it no longer names (not those newer than its
    /// build), and leaves everything else in the directory alone; the
    /// whole sweep runs when none was read, or the last ran an hour ago.
    #[test]
    fn a_record_written_between_sweeps_deletes_only_what_it_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let builds = dir.path();
        let old = SystemTime::now() - WRITING - Duration::from_secs(60);
        let stem = "fedcba9876543210fedcba9876543210";
        fs::write(builds.join(format!("{stem}.rec")), "").unwrap();
        let piece = |n: u8| format!("{stem}-{:016x}.piece", u64::from(n) * 0x1111);
        let orphan = "00000000000000000000000000000000-0123456789abcdef.piece";
        let files = [
            (piece(1), old),
            (piece(2), old),
            (piece(3), SystemTime::now() + Duration::from_secs(5)),
            (piece(4), old),
            (orphan.to_owned(), old),
        ];
        let reset = || {
            for (name, at) in &files {
                let f = fs::File::create(builds.join(name)).unwrap();
                f.set_modified(*at).unwrap();
            }
        };
        reset();
        let named: std::collections::HashSet<String> = [piece(1)].into();
        let written = || Written {
            stem,
            named: &named,
            started: snapshot::mark(),
        };
        let read = || Some(vec![piece(1), piece(2), piece(3)]);
        let left = || {
            files
                .iter()
                .filter(|(n, _)| builds.join(n).exists())
                .map(|(n, _)| n.clone())
                .collect::<Vec<_>>()
        };
        let swept_at = || {
            fs::metadata(builds.join(SWEPT))
                .unwrap()
                .modified()
                .unwrap()
        };

        // Never swept: the whole sweep, which marks when it ran.
        tidy(builds, written(), read());
        assert_eq!(left(), [piece(1), piece(3)]);
        let first = swept_at();

        // Swept just now: only the pieces read and replaced, by name.
        reset();
        tidy(builds, written(), read());
        assert_eq!(left(), [piece(1), piece(3), piece(4), orphan.to_owned()]);
        assert_eq!(swept_at(), first);

        // No record read: its stale pieces are not known by name.
        reset();
        tidy(builds, written(), None);
        assert_eq!(left(), [piece(1), piece(3)]);

        // An hour on, or a stamp from a clock set back: the whole sweep.
        for at in [old, SystemTime::now() + Duration::from_secs(3600)] {
            reset();
            fs::File::options()
                .write(true)
                .open(builds.join(SWEPT))
                .unwrap()
                .set_modified(at)
                .unwrap();
            tidy(builds, written(), read());
            assert_eq!(left(), [piece(1), piece(3)]);
            assert!(swept_at() > old && swept_at() <= SystemTime::now());
        }
        assert!(builds.join(format!("{stem}.rec")).exists());
    }

    /// The sweep never follows a symlink: not a records directory that is
    /// one, not a record that is one. Records are not written through one
    /// either.
    #[test]
    fn the_sweep_and_the_record_never_go_through_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::create_dir(&victim).unwrap();
        let old = SystemTime::now() - UNUSED - Duration::from_secs(60);
        let name = "0123456789abcdef0123456789abcdef.json";
        let f = fs::File::create(victim.join(name)).unwrap();
        f.set_modified(old).unwrap();
        let cache_dir = dir.path().join("cache");
        fs::create_dir(&cache_dir).unwrap();
        std::os::unix::fs::symlink(&victim, cache_dir.join("builds")).unwrap();
        sweep(&cache_dir.join("builds"), None);
        assert!(
            victim.join(name).exists(),
            "swept through a symlinked directory"
        );

        let cache = Cache {
            dir: cache_dir.clone(),
            file: cache_dir.join("builds/fedcba9876543210fedcba9876543210.rec"),
            stem: "fedcba9876543210fedcba9876543210".into(),
            started: snapshot::mark(),
            read_named: OnceLock::new(),
        };
        let record = Record {
            format: FORMAT,
            key: String::new(),
            warned: false,
            contexts: Vec::new(),
            dests: Vec::new(),
            outputs: Vec::new(),
            pieces: Vec::new(),
            calm: Vec::new(),
            census: Vec::new(),
            files: None,
            read_files: None,
        };
        assert!(cache.write(&record, &[]).is_err());
        assert_eq!(fs::read_dir(&victim).unwrap().count(), 1, "nothing written");
        assert!(cache.read().is_err(), "nothing read");

        // A record that is a symlink is neither swept nor trusted.
        fs::remove_file(cache_dir.join("builds")).unwrap();
        cache.write(&record, &[]).unwrap();
        let builds = cache_dir.join("builds");
        std::os::unix::fs::symlink(victim.join(name), builds.join(name)).unwrap();
        sweep(&builds, None);
        assert!(victim.join(name).exists());
        assert!(builds.join(name).is_symlink());
        fs::remove_file(&cache.file).unwrap();
        std::os::unix::fs::symlink(victim.join(name), &cache.file).unwrap();
        assert!(cache.read().is_err());
    }

    /// Records are trusted only in a directory nobody else can write: one
    /// that others can is made private, or not used.
    #[test]
    fn records_live_in_a_private_directory() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let builds = dir.path().join("builds");
        fs::create_dir(&builds).unwrap();
        fs::set_permissions(&builds, fs::Permissions::from_mode(0o777)).unwrap();
        private_dir(&builds).unwrap();
        let mode = fs::metadata(&builds).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
    }
}
