//! The build cache: lets `build`, `build --check` and `diff` compile only
//! the definition files that changed since the last build, and nothing when
//! none did.
//!
//! After a build, trainc records (outside the output directories) what each
//! definition file made ([`files`]), the key of everything else the
//! output depends on ([`key`]), the prints of the build contexts it hashed
//! ([`crate::image::ContextPrint`]) and a snapshot of every output
//! directory ([`crate::plan::snapshot`]). The next build hashes its inputs again, which
//! costs a read of the definitions and no parsing, compiles the files whose
//! bytes changed and plans every directory against its snapshot. A no-op is
//! that build with nothing to compile. Any doubt runs the build again
//! knowing nothing, as `--no-cache` runs it: the cache can make a build
//! faster, never different.
//!
//! Records live in `$TRAINC_CACHE_DIR`, else `$XDG_CACHE_HOME/trainc`, else
//! `~/.cache/trainc`; deleting them is always safe.

pub mod files;
pub mod key;

use std::fs;
use std::io::Write as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::plan::snapshot::{self, Entry};
pub use files::State;
pub use key::Request;
use sha2::{Digest as _, Sha256};

use crate::image::ContextPrint;
use crate::paths::real;
use crate::pipeline::Read;
use crate::plan::{Change, Plan};

/// Bumped whenever the record changes shape or meaning: a record of
/// another format is not read. 11 and 12 are postcard (12 without the key
/// of the whole build); 6 to 10 were a hand-written encoding in pieces, 5
/// and before JSON.
const FORMAT: u32 = 12;

/// What a record file starts with, before its format and checksum.
const MAGIC: &[u8] = b"trainc build record\n";

/// What a build leaves for the next, in one file: serde types in
/// postcard, followed by a SHA-256 checksum of them, so that a record cut
/// short or changed by a byte is found damaged before it is decoded.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Record {
    /// The build printed warnings: the next build shows them again.
    warned: bool,
    contexts: Vec<ContextPrint>,
    /// Every directory the build may write, as it was left; `None` when it
    /// does not exist.
    outputs: Vec<(PathBuf, Option<Vec<Entry>>)>,
    /// What each definition file made, for an incremental build; `None`
    /// when the build could not say.
    files: Option<files::Files>,
}

impl Record {
    /// Writes the record to `out` as it is encoded, hashed on the way:
    /// at 5,000 jobs it is some 19 MB, which a build need not also hold
    /// encoded.
    fn write_to(&self, mut out: impl std::io::Write) -> std::io::Result<()> {
        /// Hashes what passes through it.
        struct Hashing<W> {
            out: W,
            sha: Sha256,
        }
        impl<W: std::io::Write> std::io::Write for Hashing<W> {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                let n = self.out.write(buf)?;
                self.sha.update(&buf[..n]);
                Ok(n)
            }
            fn flush(&mut self) -> std::io::Result<()> {
                self.out.flush()
            }
        }
        out.write_all(MAGIC)?;
        out.write_all(&FORMAT.to_le_bytes())?;
        let mut body = Hashing {
            out: &mut out,
            sha: Sha256::new(),
        };
        postcard::to_io(self, &mut body).map_err(std::io::Error::other)?;
        let sum = body.sha.finalize();
        out.write_all(&sum)?;
        out.flush()
    }

    /// The record's bytes, as [`Record::write_to`] writes them.
    #[cfg(test)]
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        // Writing to memory fails only where encoding does, which a record
        // of plain types never does.
        let _ = self.write_to(&mut out);
        out
    }

    fn decode(bytes: &[u8]) -> Result<Self, String> {
        let damaged = "the record is damaged";
        let other = "the record is from another version of trainc";
        if bytes.first() == Some(&b'{') {
            // Formats 5 and before were JSON objects with a `format`.
            #[derive(serde::Deserialize)]
            struct Json {
                #[allow(dead_code)]
                format: u32,
            }
            serde_json::from_slice::<Json>(bytes).map_err(|_| damaged)?;
            return Err(other.into());
        }
        let rest = bytes.strip_prefix(MAGIC).ok_or(damaged)?;
        let (format, rest) = rest.split_first_chunk::<4>().ok_or(damaged)?;
        if u32::from_le_bytes(*format) != FORMAT {
            return Err(other.into());
        }
        let (body, sum) = rest.split_last_chunk::<32>().ok_or(damaged)?;
        if Sha256::digest(body).as_slice() != sum {
            return Err(damaged.into());
        }
        postcard::from_bytes(body).map_err(|_| damaged.into())
    }
}

/// The definition files and the library as a build reads them (with the
/// same size and encoding checks), each read once.
fn inputs(req: &Request) -> Result<Inputs, String> {
    let cannot = "an input cannot be read; the build will say which";
    let project = req.project;
    let paths = crate::pipeline::files(project, req.cwd, req.paths).map_err(|_| cannot)?;
    // Each file hashed once, where it was read.
    let read = crate::par::map(&paths, |p| {
        let name = crate::paths::display_name(&project.root, p);
        let f = crate::load::read_as(p, name, crate::paths::shown_path(req.cwd, p)).ok()?;
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
    Ok(Inputs {
        sources,
        hashes,
        library,
    })
}

/// What the last build's record knows of a build: see [`Cache::known`].
pub struct Known {
    /// What each definition file made, in path order.
    pub records: Vec<files::SourceRecord>,
    /// Each output directory as the last build left it (`None`: not there).
    pub outputs: Vec<(PathBuf, Option<Vec<Entry>>)>,
    /// The build contexts the last build hashed.
    pub contexts: Vec<ContextPrint>,
    /// The last build printed warnings.
    pub warned: bool,
    /// The definition files as this build reads them, each with its
    /// [`key::source_hash`].
    pub sources: crate::pipeline::Sources,
    pub hashes: Vec<String>,
    pub library: crate::library::Library,
}

/// The definition files and the library as a build reads them (with the
/// same size and encoding checks), each read and hashed once.
pub(super) struct Inputs {
    pub sources: crate::pipeline::Sources,
    /// Each file's [`key::source_hash`].
    pub hashes: Vec<String>,
    pub library: crate::library::Library,
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
    /// The record, `builds/<location>.rec`.
    file: PathBuf,
    /// When this build started (see [`snapshot::mark`]).
    started: i128,
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
            dir,
            started,
        })
    }

    /// What the last build's record knows of this one: each definition
    /// file's result, when the build's inputs other than the definitions
    /// (the global key, the output directories, the build contexts) are as
    /// recorded; or why it knows nothing.
    pub fn known(&self, req: &Request) -> Result<Known, String> {
        let mut record = self.load()?;
        let files = record
            .files
            .take()
            .ok_or("the last build kept no record of each definition file")?;
        same_places(req, &record)?;
        let inputs = inputs(req)?;
        let global = req
            .global_key(inputs.library.digest())
            .ok_or("the trainc executable cannot be inspected")?;
        if files.global != global {
            return Err("the project, library or trainc changed".into());
        }
        let Inputs {
            sources,
            hashes,
            library,
        } = inputs;
        Ok(Known {
            records: files.sources,
            outputs: record.outputs,
            contexts: record.contexts,
            warned: record.warned,
            sources,
            hashes,
            library,
        })
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
        // Nothing changed: the record stands as it is.
        if state.unchanged && !warned && plans.iter().all(|p| p.is_noop()) {
            keep_alive(&self.file);
            return Ok(());
        }
        // The record would change the context, and with it every tag.
        if let Some(c) = read.contexts.iter().find(|c| c.reaches(&self.dir)) {
            return Err(format!(
                "the build context {} reaches into the cache directory; leave it out in the context's .dockerignore",
                shown(req, &c.dir)
            ));
        }
        // What each directory now holds: as its plan's walk saw it, and
        // what the plan did to it. A file written is hashed as the build
        // meant it (its bytes, or the hash taken as it was streamed).
        let hashes = std::mem::take(&mut state.hashes);
        let hash = |dir: &Path, c: &Change| match hashes.get(dir).and_then(|h| h.get(&c.path)) {
            Some(h) => Ok(h.clone()),
            // Every file trainc writes has a header: none is empty.
            None if c.new.is_empty() => Err(std::io::Error::other(format!(
                "the hash of {} is not known",
                c.path
            ))),
            None => Ok(crate::plan::content_hash(&c.new)),
        };
        let mut outputs = Vec::new();
        for dir in req.dirs() {
            let plan = plans.iter().find(|p| p.root == dir);
            let cannot =
                |e: std::io::Error| format!("{} cannot be recorded: {e}", shown(req, &dir));
            let before = match (state.walked.remove(&dir), plan) {
                (Some(Some(before)), Some(_)) => before,
                (Some(Some(_)), None) => {
                    return Err(format!("{} was not planned", shown(req, &dir)));
                }
                // Not there before the build, nor planned: not there now,
                // or the next check finds it.
                (Some(None) | None, _) if plan.is_none_or(|p| p.changes.is_empty()) => {
                    let entries = snapshot::take(&dir, self.started, |rel, _| {
                        Err(std::io::Error::other(format!(
                            "{rel} appeared while the build ran"
                        )))
                    })
                    .map_err(cannot)?;
                    outputs.push((dir, entries));
                    continue;
                }
                (Some(None) | None, _) => Vec::new(),
            };
            let plan = plan.ok_or("internal: a directory without its plan")?;
            let entries = snapshot::after(&dir, before, plan, self.started, |c| hash(&dir, c))
                .map_err(cannot)?;
            outputs.push((dir, Some(entries)));
        }
        let record = Record {
            warned,
            contexts: read.contexts.clone(),
            outputs,
            files: Self::files(req, read, state),
        };
        let written = self.write(&record);
        left_to_exit(record);
        written
    }

    /// The per-file part of the record, taken from `state`: a build is
    /// recorded once.
    fn files(req: &Request, read: &Read, state: &mut State) -> Option<files::Files> {
        let sources = state.sources.take()?;
        Some(files::Files {
            global: req.global_key(&read.library)?,
            sources,
        })
    }

    /// The record, when there is one this user can trust and it is of
    /// this version of trainc: in a records directory that is no symlink
    /// and that only this user can write, a regular file (no symlink) of
    /// this user's.
    fn load(&self) -> Result<Record, String> {
        Record::decode(&self.read()?)
    }

    /// The record's bytes.
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

    /// Replaces the record by renaming a whole new one into place, so
    /// that a build killed at any point leaves the old record or the new
    /// one; then sweeps the records directory, at most once an hour.
    fn write(&self, record: &Record) -> Result<(), String> {
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
        let mut tmp = tempfile::Builder::new()
            .prefix(".record-")
            .tempfile_in(&builds)
            .map_err(io)?;
        record
            .write_to(std::io::BufWriter::new(tmp.as_file_mut()))
            .map_err(io)?;
        tmp.persist(&self.file).map_err(|e| io(e.error))?;
        sweep_now_and_then(&builds);
        Ok(())
    }
}

/// The mtime of `name` in `dir`, in nanoseconds since the epoch, not
/// following a symlink.
fn mtime(dir: &impl rustix::fd::AsFd, name: &str) -> Option<i128> {
    let st = rustix::fs::statat(dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW).ok()?;
    Some(i128::from(st.st_mtime) * 1_000_000_000 + i128::from(st.st_mtime_nsec))
}

/// A record read or written, which the build no longer needs, left to the
/// end of the process rather than freed: a build ends right after it, and
/// freeing a snapshot entry by entry (two strings each, 19,000 entries at
/// 1,000 jobs) was a third of what recording an edit cost beyond the check.
/// The memory is the process's until it exits, which is soon.
fn left_to_exit(record: Record) {
    std::mem::forget(record);
}

/// Records not used for this long are deleted when another is written: each
/// trainc binary, project and output directory has its own, and old ones
/// would pile up.
const UNUSED: Duration = Duration::from_secs(30 * 24 * 3600);

/// How often a record written is followed by a [`sweep`].
const SWEEP_EVERY: Duration = Duration::from_secs(3600);

/// The file whose mtime says when the records directory was last swept.
/// Not a name the sweep deletes.
const SWEPT: &str = ".swept";

/// Runs the [`sweep`] when the last ran [`SWEEP_EVERY`] ago, or never, or
/// at a time still to come (after the clock was set back), and marks when.
fn sweep_now_and_then(builds: &Path) {
    use rustix::fs::{CWD, Mode, OFlags, openat};
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
    if recent {
        return;
    }
    sweep(builds);
    let file_flags = OFlags::WRONLY | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    if let Ok(f) = openat(&fd, SWEPT, file_flags, Mode::from_raw_mode(0o600)) {
        let _ = fs::File::from(f).set_modified(now);
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
/// for [`UNUSED`] (and the pieces of records before format 11). One
/// listing of the directory, as opened, never through a symlink: one in
/// place of the directory, or of an entry, is left alone.
fn sweep(builds: &Path) {
    use rustix::fs::{AtFlags, CWD, Dir, Mode, OFlags, openat, unlinkat};
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let Ok(fd) = openat(CWD, builds, flags, Mode::empty()) else {
        return;
    };
    let Ok(entries) = Dir::read_from(&fd) else {
        return;
    };
    let now = SystemTime::now();
    let hex = |h: &str, len: usize| h.len() == len && h.bytes().all(|b| b.is_ascii_hexdigit());
    for e in entries.flatten() {
        let Ok(name) = e.file_name().to_str() else {
            continue;
        };
        // Only names trainc gives: `<32 hex digits>.rec` (`.json` before
        // format 6), `<32 hex>-<16 hex>.piece` (formats 9 and 10),
        // `.record-XXXXXX`.
        let record = name
            .strip_suffix(".rec")
            .or_else(|| name.strip_suffix(".json"))
            .is_some_and(|h| hex(h, 32));
        let piece = name
            .strip_suffix(".piece")
            .and_then(|n| n.split_once('-'))
            .is_some_and(|(stem, sum)| hex(stem, 32) && hex(sum, 16));
        let temp = name
            .strip_prefix(".record-")
            .is_some_and(|r| r.len() == 6 && r.bytes().all(|b| b.is_ascii_alphanumeric()));
        if !(record || piece || temp) {
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
        }
    }
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
mod tests;
