//! Stage 5, the write half of [`plan`](super): a plan that passed every check
//! goes onto disk. Every file is at all times either its old or its new
//! complete self, and when [`apply`] returns, what it wrote is durable,
//! without flushing what other programs wrote to the same file system.
//!
//! The order, each step over all files (of every directory a build writes)
//! before the next:
//!
//! 1. each new content is staged, in parallel over the cores: written to a
//!    temporary file in its target directory, or in the nearest directory
//!    above it that exists when its own is yet to be made (on Linux an
//!    unnamed `O_TMPFILE` one for a file that does not exist yet), and its
//!    flush started ([`Flush`]); a streaming build ([`super::stream`])
//!    stages most files this way while it renders them. On Linux, a new
//!    file whose directory is to be made right below the root (a new
//!    namespace, every file of a first build) is instead written under its
//!    own name in a hidden stage directory in the root ([`Stage`]), in the
//!    directories it will have;
//! 2. the flushes are awaited ([`Writer::stage_plan`] returns a [`Ready`]);
//! 3. each directory staged whole goes in with one `rename` that never
//!    replaces anything, the directories the other new files need are made,
//!    and each other temporary file is linked in at its target
//!    ([`Ready::link`]): renamed over it, or, unnamed, given its name by
//!    `linkat`, which is one directory operation instead of a create and a
//!    rename, and as atomic, since the file is complete before it has a
//!    name;
//! 4. the owned files no longer generated are deleted, with the directories
//!    this leaves empty;
//! 5. the directories whose entries changed are flushed.
//!
//! Nothing is linked in before every file is staged: an error while staging
//! (a full disk) removes the temporary files and leaves every target, and
//! every directory, as it was.

use std::collections::{BTreeSet, HashSet};
use std::fs;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use super::{Change, Op, Plan, TEMP_PREFIX, TEMP_SUFFIX, io_error};
use crate::diagnostic::Diagnostic;
use crate::par;

/// How a build makes its writes durable, chosen from the file system of the
/// output directory by [`Flush::choose`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(super) enum Flush {
    /// The file system lives in memory (tmpfs, ramfs): nothing outlives a
    /// reboot, so nothing is flushed.
    Volatile,
    /// A file system whose journal commits in order (ext4 with its journal,
    /// XFS), as git's `core.fsyncMethod=batch`: each file's writeback is
    /// started as soon as it is written (`sync_file_range`), all are awaited
    /// before the first is linked in, so their data is on the device, and
    /// after the renames the touched directories are `fsync`ed. The first of
    /// those commits the journal transaction holding the renames and,
    /// committed before or with it, the files' allocations and sizes, and
    /// flushes the device's cache: one commit for the whole build, where an
    /// `fsync` per file would be one each.
    Batch,
    /// Any other file system (ext4 without a journal, btrfs, NFS, …), and
    /// every system but Linux: each file `fsync`ed before it is linked in,
    /// then the directories.
    EachFile,
    /// Any other file system with more than [`EACH_FILE_MAX`] files to
    /// write: `syncfs` before the renames and at the end, which also flushes
    /// other programs' writes but costs less than thousands of flushes.
    WholeFs,
    /// Any other file system, for files staged as they are rendered
    /// ([`super::stream`]), before anyone knows how many there will be:
    /// nothing is flushed while staging, and once all are staged it is
    /// [`Flush::EachFile`] (each staged file `fsync`ed then) or
    /// [`Flush::WholeFs`] by their number.
    Deferred,
}

/// The most files flushed one by one on a file system without a journal
/// trainc recognises. On the development machine's ext4 without a journal an
/// `fsync` costs 0.6–1.4 ms (so 64 take 40–90 ms), a `syncfs` 20–50 ms with
/// little else unwritten and 0.8 s with 512 MB of other programs' data.
pub(super) const EACH_FILE_MAX: usize = 64;

impl Flush {
    /// The way to flush `files` written files below `root`.
    #[cfg(target_os = "linux")]
    pub(super) fn choose(root: &Path, files: usize) -> Flush {
        Flush::pick(linux::kind(root), files)
    }

    #[cfg(target_os = "linux")]
    fn pick(kind: linux::Kind, files: usize) -> Flush {
        match kind {
            linux::Kind::Memory => Flush::Volatile,
            linux::Kind::Journaled => Flush::Batch,
            linux::Kind::Other if files <= EACH_FILE_MAX => Flush::EachFile,
            linux::Kind::Other => Flush::WholeFs,
        }
    }

    /// `fsync` is all POSIX offers.
    #[cfg(not(target_os = "linux"))]
    pub(super) fn choose(_root: &Path, _files: usize) -> Flush {
        Flush::EachFile
    }

    /// The way to flush files below `root` staged before their number is
    /// known.
    pub(super) fn streaming(root: &Path) -> Flush {
        match Flush::choose(root, usize::MAX) {
            Flush::WholeFs | Flush::EachFile => Flush::Deferred,
            other => other,
        }
    }

    /// What [`Flush::Deferred`] becomes with `files` staged. Off Linux it
    /// is always [`Flush::EachFile`]: `sync(2)` may return there before
    /// anything is written.
    fn settle(self, files: usize) -> Flush {
        match self {
            Flush::Deferred if files <= EACH_FILE_MAX || cfg!(not(target_os = "linux")) => {
                Flush::EachFile
            }
            Flush::Deferred => Flush::WholeFs,
            other => other,
        }
    }
}

/// Writes the files that differ and deletes the stale ones (see the module
/// documentation for the order and the guarantees). Unchanged files are not
/// touched, so their mtimes stay. On an error while staging, the temporary
/// files are removed and no target has changed.
pub fn apply(plan: &Plan) -> Result<(), Vec<Diagnostic>> {
    stage(plan)?.link()
}

/// The first half of [`apply`]: every file staged, nothing in place yet. A
/// build stages every directory's plan before it links any.
pub fn stage(plan: &Plan) -> Result<Ready, Vec<Diagnostic>> {
    let files = plan.pending().filter(|c| c.op != Op::Delete).count();
    Writer::new(&plan.root, Flush::choose(&plan.root, files)).stage_plan(plan, Vec::new())
}

/// One build's write phase: shared by the threads that stage files.
pub(super) struct Writer {
    /// The output root, locked.
    root: PathBuf,
    flush: Flush,
    /// Whether new files below directories yet to be made may be staged in
    /// a [`Stage`] (Linux; the tests turn it off to stage them otherwise).
    whole: AtomicBool,
    /// The stage, once a file needed it; `None` when it could not be made
    /// (such files are then staged as elsewhere).
    stage: OnceLock<Option<Arc<Stage>>>,
    /// Whether new files may still be staged unnamed; the first refusal by
    /// the file system clears it.
    unnamed: AtomicBool,
    /// How many more staged files may stay open until they are linked in:
    /// [`budget`], shared by every writer of the build.
    budget: Arc<AtomicUsize>,
    #[cfg(test)]
    fault: tests::Fault,
}

/// A file staged for its target, not yet linked in.
pub(super) struct Staged {
    target: PathBuf,
    /// The target did not exist: it is created, never replaced.
    new: bool,
    temp: Temp,
}

enum Temp {
    /// An `O_TMPFILE` file: no name until `linkat` gives it its target's.
    #[cfg(target_os = "linux")]
    Unnamed(fs::File),
    /// `.trainc-XXXXXX.tmp` beside the target (removed when dropped), open
    /// while the budget allowed.
    Named(tempfile::TempPath, Option<fs::File>),
    /// Its target's path in the [`Stage`] (which removes it when dropped),
    /// open while the budget allowed.
    #[cfg(target_os = "linux")]
    Whole(PathBuf, Option<fs::File>),
}

/// A hidden directory in an output root, `.trainc-XXXXXX.tmp`, where the
/// new files of directories to be made right below the root are written
/// under their own names, in the directories they will have: each such
/// directory then goes in with one `rename`, whole, where each of its files
/// would otherwise be a directory operation of its own. Nothing in it has
/// a name a reader of the tree could see; dropped, it is removed with what
/// is left in it. An interrupted build's is removed by the next build that
/// takes the lock ([`super::lock`]).
#[cfg(target_os = "linux")]
pub(super) struct Stage {
    dir: PathBuf,
    /// The directories made in it, relative to the root.
    made: Mutex<BTreeSet<String>>,
}

#[cfg(target_os = "linux")]
impl Stage {
    fn new(root: &Path) -> io::Result<Stage> {
        let dir = tempfile::Builder::new()
            .prefix(TEMP_PREFIX)
            .suffix(TEMP_SUFFIX)
            .tempdir_in(root)?
            .keep();
        Ok(Stage {
            dir,
            made: Mutex::new(BTreeSet::new()),
        })
    }

    /// Where the file at `rel` below the root is written, its directories
    /// made.
    fn place(&self, rel: &str) -> io::Result<PathBuf> {
        let mut made = self
            .made
            .lock()
            .map_err(|_| io::Error::other("a staging thread panicked"))?;
        let mut at = 0;
        while let Some(i) = rel[at..].find('/') {
            let dir = &rel[..at + i];
            if !made.contains(dir) {
                fs::create_dir(self.dir.join(dir))?;
                made.insert(dir.to_owned());
            }
            at += i + 1;
        }
        Ok(self.dir.join(rel))
    }
}

#[cfg(target_os = "linux")]
impl Drop for Stage {
    fn drop(&mut self) {
        // Never follows a symlink; whatever was not moved out goes.
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// The first error in path order, whatever order the threads failed in;
/// dropping the rest cleans up what they staged.
fn all<T>(results: Vec<Result<T, Diagnostic>>) -> Result<Vec<T>, Vec<Diagnostic>> {
    let mut ok = Vec::with_capacity(results.len());
    for r in results {
        ok.push(r.map_err(|d| vec![d])?);
    }
    Ok(ok)
}

pub(super) fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// How many staged files may stay open at once in this process, until they
/// are linked in. An unnamed file must (closed, it is gone), and batch
/// flushing waits on the open file; a named one past the budget is closed
/// and opened again to wait. Half the soft limit on open files, less what
/// reading and walking need, shared by every directory a build writes, so
/// that a build of tens of thousands of files never runs out.
fn budget() -> Arc<AtomicUsize> {
    static BUDGET: OnceLock<Arc<AtomicUsize>> = OnceLock::new();
    BUDGET
        .get_or_init(|| {
            let soft = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
            let half = soft.map_or(1 << 16, |n| n / 2).min(1 << 16);
            let n = usize::try_from(half)
                .unwrap_or(1 << 16)
                .saturating_sub(RESERVE);
            reserve_descriptors(n);
            Arc::new(AtomicUsize::new(n))
        })
        .clone()
}

/// Descriptors kept for everything but staged files: the build contexts
/// walked, the definitions and old files read, the locks.
const RESERVE: usize = 64;

/// Grows the process's descriptor table to hold `n` more open files at
/// once, before any staging thread starts. Grown while threads share it,
/// the table waits for an RCU grace period each time it doubles (which made
/// a 19,000-file build on tmpfs half again slower); grown here, it grows
/// once, with no thread to wait for. Best effort: at worst it grows later.
fn reserve_descriptors(n: usize) {
    if n < 64 {
        return;
    }
    let Ok(dir) = fs::File::open(".") else {
        return;
    };
    let slot = i32::try_from(n.saturating_add(RESERVE)).unwrap_or(i32::MAX);
    // The table covers the new descriptor; closing it leaves it so.
    let _ = rustix::io::fcntl_dupfd_cloexec(&dir, slot);
}

/// A plan whose files are all staged, flushed as the file system needs
/// before any is linked in: [`Ready::link`] puts them in place. Dropped
/// instead, it removes what it staged and no target has changed.
pub struct Ready {
    root: PathBuf,
    flush: Flush,
    staged: Vec<Staged>,
    deletions: Vec<String>,
    /// Where the files staged whole are.
    #[cfg(target_os = "linux")]
    stage: Option<Arc<Stage>>,
}

impl Writer {
    pub(super) fn new(root: &Path, flush: Flush) -> Writer {
        Writer {
            root: root.to_path_buf(),
            flush,
            whole: AtomicBool::new(cfg!(target_os = "linux")),
            stage: OnceLock::new(),
            // Linking an unnamed file names it through /proc.
            unnamed: AtomicBool::new(
                cfg!(target_os = "linux") && Path::new("/proc/self/fd").is_dir(),
            ),
            budget: budget(),
            #[cfg(test)]
            fault: tests::Fault::default(),
        }
    }

    #[cfg(test)]
    pub(super) fn apply(&self, plan: &Plan) -> Result<(), Vec<Diagnostic>> {
        self.stage_plan(plan, Vec::new())?.link()
    }

    /// Stages every file `plan` writes and flushes them as the file system
    /// needs, making no directory: `early` holds files staged beforehand (by
    /// [`super::stream::Stager`]) for some of the plan's changes, which are
    /// not staged again. A new file whose directory does not exist yet is
    /// staged in the nearest one above it that does (the root, which is
    /// made if missing, at worst).
    pub(super) fn stage_plan(
        &self,
        plan: &Plan,
        early: Vec<Staged>,
    ) -> Result<Ready, Vec<Diagnostic>> {
        let root = plan.root.as_path();
        // A change staged early keeps no bytes (every file trainc writes has
        // a header, so none is empty); checked against `early`, not assumed.
        let writes: Vec<(&Change, PathBuf)> = plan
            .pending()
            .filter(|c| matches!(c.op, Op::Create | Op::Update) && !c.new.is_empty())
            .map(|c| (c, root.join(&c.path)))
            .collect();
        let written = plan
            .pending()
            .filter(|c| matches!(c.op, Op::Create | Op::Update))
            .count();
        if writes.len() + early.len() != written {
            return Err(vec![Diagnostic::new(format!(
                "internal error: {} files of {} to write were staged, {} are left to stage",
                early.len(),
                written,
                writes.len()
            ))]);
        }
        let mut made = BTreeSet::new();
        if !writes.is_empty() {
            make_dir(root, &mut made).map_err(|e| vec![io_error(root, "create directory", &e)])?;
        }
        // Where each new file is staged: its directory, or the nearest above.
        let mut nearest: std::collections::HashMap<PathBuf, PathBuf> =
            std::collections::HashMap::new();
        let mut dirs = Vec::with_capacity(writes.len());
        for (_, target) in &writes {
            let dir = parent(target);
            let staging = match nearest.get(dir) {
                Some(d) => d.clone(),
                None => {
                    let mut d = dir;
                    while d != root && !fs::symlink_metadata(d).is_ok_and(|m| m.is_dir()) {
                        d = parent(d);
                    }
                    nearest.insert(dir.to_path_buf(), d.to_path_buf());
                    d.to_path_buf()
                }
            };
            dirs.push(staging);
        }
        let jobs: Vec<(&(&Change, PathBuf), &PathBuf)> = writes.iter().zip(&dirs).collect();
        let mut staged = early;
        staged.extend(all(par::map(&jobs, |((c, target), dir)| {
            self.stage_in(dir, target.clone(), &c.new, c.op == Op::Create)
        }))?);
        let flush = self.flush.settle(staged.len());
        match flush {
            Flush::Batch => {
                all(par::map(&staged, |s| {
                    s.wait().map_err(|e| io_error(&s.target, "flush", &e))
                }))?;
            }
            Flush::EachFile if self.flush == Flush::Deferred => {
                all(par::map(&staged, |s| {
                    s.sync().map_err(|e| io_error(&s.target, "flush", &e))
                }))?;
            }
            Flush::WholeFs => syncfs(root).map_err(|d| vec![d])?,
            Flush::Volatile | Flush::EachFile | Flush::Deferred => {}
        }
        Ok(Ready {
            root: root.to_path_buf(),
            flush,
            staged,
            deletions: plan
                .pending()
                .filter(|c| c.op == Op::Delete)
                .map(|c| c.path.clone())
                .collect(),
            #[cfg(target_os = "linux")]
            stage: self.stage.get().cloned().flatten(),
        })
    }

    /// Takes one open file from the budget, if any is left.
    fn keep_open(&self) -> bool {
        self.budget
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok()
    }

    /// Writes `bytes` to a temporary file for `target` and starts its flush;
    /// `new`: the target does not exist, so the file may be unnamed. The
    /// temporary file is in `dir`: the target's
    /// directory or, for a new file whose directory is yet to be made, the
    /// nearest one above it that exists, on the same file system (`linkat`
    /// and `rename` move a file between directories of one).
    pub(super) fn stage_in(
        &self,
        dir: &Path,
        target: PathBuf,
        bytes: &[u8],
        new: bool,
    ) -> Result<Staged, Diagnostic> {
        let temp = self
            .temp_for(dir, &target, new)
            .map_err(|e| io_error(dir, "create a temporary file in", &e))?;
        let file = match &temp {
            #[cfg(target_os = "linux")]
            Temp::Unnamed(f) | Temp::Whole(_, Some(f)) => f,
            Temp::Named(_, Some(f)) => f,
            #[cfg(target_os = "linux")]
            Temp::Whole(_, None) => {
                return Err(Diagnostic::new("internal error: a staged file was closed"));
            }
            Temp::Named(_, None) => {
                return Err(Diagnostic::new("internal error: a staged file was closed"));
            }
        };
        let done = self
            .write(file, &target, bytes)
            .map_err(|e| io_error(&target, "write", &e))
            .and_then(|()| {
                match self.flush {
                    Flush::Batch => start_writeback(file),
                    Flush::EachFile => file.sync_data(),
                    Flush::Volatile | Flush::WholeFs | Flush::Deferred => Ok(()),
                }
                .map_err(|e| io_error(&target, "flush", &e))
            });
        // On an error, dropping `temp` removes the named file.
        done?;
        let wait = || self.flush == Flush::Batch && self.keep_open();
        let temp = match temp {
            Temp::Named(path, Some(f)) => Temp::Named(path, wait().then_some(f)),
            #[cfg(target_os = "linux")]
            Temp::Whole(path, Some(f)) => Temp::Whole(path, wait().then_some(f)),
            other => other,
        };
        Ok(Staged { target, new, temp })
    }

    fn write(&self, mut file: &fs::File, target: &Path, bytes: &[u8]) -> io::Result<()> {
        #[cfg(test)]
        if self.fault.write_fails(target) {
            // Half the content, then the disk is full.
            file.write_all(&bytes[..bytes.len() / 2])?;
            return Err(io::Error::from(rustix::io::Errno::NOSPC));
        }
        let _ = target;
        file.write_all(bytes)
    }

    /// Where `target` is staged: in the [`Stage`] when it is new and its
    /// directory is to be made right below the root (`dir`, the nearest
    /// that exists, is the root), else in `dir` ([`Writer::temp_in`]).
    fn temp_for(&self, dir: &Path, target: &Path, new: bool) -> io::Result<Temp> {
        #[cfg(target_os = "linux")]
        if new && dir == self.root && parent(target) != self.root.as_path() {
            let rel = target.strip_prefix(&self.root).ok().and_then(Path::to_str);
            if let (Some(rel), Some(stage)) = (rel, self.stage()) {
                use std::os::unix::fs::OpenOptionsExt as _;
                let path = stage.place(rel)?;
                let file = fs::File::options()
                    .write(true)
                    .create_new(true)
                    .mode(0o644)
                    .open(&path)?;
                return Ok(Temp::Whole(path, Some(file)));
            }
        }
        self.temp_in(dir, new)
    }

    /// This writer's [`Stage`], made at the first call; `None` when there
    /// is none to be had.
    #[cfg(target_os = "linux")]
    fn stage(&self) -> Option<&Arc<Stage>> {
        if !self.whole.load(Ordering::Relaxed) {
            return None;
        }
        self.stage
            .get_or_init(|| Stage::new(&self.root).ok().map(Arc::new))
            .as_ref()
    }

    /// A temporary file in `dir`, open for writing, mode 0644 (less the
    /// umask): generated manifests are for everyone to read, like a checkout.
    fn temp_in(&self, dir: &Path, new: bool) -> io::Result<Temp> {
        #[cfg(target_os = "linux")]
        if new && self.unnamed.load(Ordering::Relaxed) && self.keep_open() {
            match self.open_unnamed(dir) {
                Ok(f) => return Ok(Temp::Unnamed(f)),
                Err(e) if linux::unnamed_unsupported(&e) => {
                    self.unnamed.store(false, Ordering::Relaxed);
                    self.budget.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => return Err(e),
            }
        }
        let _ = new;
        let mut builder = tempfile::Builder::new();
        builder.prefix(TEMP_PREFIX).suffix(TEMP_SUFFIX);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            builder.permissions(fs::Permissions::from_mode(0o644));
        }
        let (file, path) = builder.tempfile_in(dir)?.into_parts();
        Ok(Temp::Named(path, Some(file)))
    }

    #[cfg(target_os = "linux")]
    fn open_unnamed(&self, dir: &Path) -> io::Result<fs::File> {
        use rustix::fs::{Mode, OFlags};
        #[cfg(test)]
        if self.fault.refuse_unnamed {
            return Err(io::Error::from(rustix::io::Errno::OPNOTSUPP));
        }
        let fd = rustix::fs::open(
            dir,
            OFlags::WRONLY | OFlags::TMPFILE | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o644),
        )?;
        Ok(fs::File::from(fd))
    }
}

impl Staged {
    /// The temporary file's name, when it has one.
    pub(super) fn temp_path(&self) -> Option<&Path> {
        match &self.temp {
            Temp::Named(path, _) => Some(path),
            #[cfg(target_os = "linux")]
            Temp::Unnamed(_) | Temp::Whole(..) => None,
        }
    }

    /// Flushes the file's data ([`Flush::Deferred`] settled as
    /// [`Flush::EachFile`]).
    fn sync(&self) -> io::Result<()> {
        match &self.temp {
            #[cfg(target_os = "linux")]
            Temp::Unnamed(f) | Temp::Whole(_, Some(f)) => f.sync_data(),
            #[cfg(target_os = "linux")]
            Temp::Whole(path, None) => fs::File::open(path)?.sync_data(),
            Temp::Named(_, Some(f)) => f.sync_data(),
            Temp::Named(path, None) => fs::File::open(path)?.sync_data(),
        }
    }

    /// Waits until the file's data is on the device (batch flushing).
    fn wait(&self) -> io::Result<()> {
        match &self.temp {
            #[cfg(target_os = "linux")]
            Temp::Unnamed(f) | Temp::Whole(_, Some(f)) => wait_writeback(f),
            #[cfg(target_os = "linux")]
            Temp::Whole(path, None) => wait_writeback(&fs::File::open(path)?),
            Temp::Named(_, Some(f)) => wait_writeback(f),
            Temp::Named(path, None) => wait_writeback(&fs::File::open(path)?),
        }
    }

    /// Puts the file in place, atomically. A new file never replaces one
    /// that appeared since the plan looked.
    fn link(self) -> Result<(), Diagnostic> {
        let Staged { target, new, temp } = self;
        let done = match temp {
            Temp::Named(path, _) if new => path.persist_noclobber(&target).map_err(|e| e.error),
            Temp::Named(path, _) => path.persist(&target).map_err(|e| e.error),
            #[cfg(target_os = "linux")]
            Temp::Unnamed(f) => linux::link(&f, &target),
            // In place with its directory (`Ready::link`).
            #[cfg(target_os = "linux")]
            Temp::Whole(..) => Ok(()),
        };
        done.map_err(|e| put_error(&target, new, &e))
    }

    /// Whether the file is staged whole with its directory.
    fn whole(&self) -> bool {
        #[cfg(target_os = "linux")]
        if let Temp::Whole(..) = self.temp {
            return true;
        }
        false
    }
}

/// Why putting a new file or directory at `target` (or replacing a file)
/// failed.
fn put_error(target: &Path, new: bool, e: &io::Error) -> Diagnostic {
    if e.kind() == io::ErrorKind::AlreadyExists {
        // The plan found nothing there, and trainc builds wait for each
        // other: another program put it there.
        Diagnostic::new(format!(
            "{} appeared while trainc was writing; not overwriting it",
            target.display()
        ))
        .hint("move it out of the output directory and build again")
    } else {
        io_error(target, if new { "create" } else { "replace" }, e)
    }
}

impl Ready {
    /// Makes the directories the new files need, puts every staged file in
    /// place, deletes what the plan prunes (with the directories this leaves
    /// empty), and flushes the directories whose entries changed.
    pub fn link(self) -> Result<(), Vec<Diagnostic>> {
        let Ready {
            root,
            flush,
            staged,
            deletions,
            #[cfg(target_os = "linux")]
            stage,
        } = self;
        let root = root.as_path();
        // Directories whose entries change, to flush at the end.
        let mut dirs = BTreeSet::new();
        #[cfg(target_os = "linux")]
        if let Some(stage) = &stage {
            // Each directory right below the root that holds a file staged
            // whole, with every file and directory in it.
            let tops: BTreeSet<&std::ffi::OsStr> = staged
                .iter()
                .filter(|s| s.whole())
                .filter_map(|s| s.target.strip_prefix(root).ok()?.iter().next())
                .collect();
            for top in &tops {
                let target = root.join(top);
                linux::rename_new(&stage.dir.join(top), &target)
                    .map_err(|e| vec![put_error(&target, true, &e)])?;
            }
            if !tops.is_empty() {
                dirs.insert(root.to_path_buf());
                if let Ok(made) = stage.made.lock() {
                    dirs.extend(made.iter().map(|rel| root.join(rel)));
                }
            }
            // Empty now; gone before anyone walks the tree.
            let _ = fs::remove_dir(&stage.dir);
        }
        let parents: HashSet<&Path> = staged
            .iter()
            .filter(|s| !s.whole())
            .map(|s| parent(&s.target))
            .collect();
        let mut parents: Vec<&Path> = parents.into_iter().collect();
        parents.sort();
        // In parallel: a directory made meanwhile by another thread is fine.
        for changed in all(par::map(&parents, |dir| {
            let mut changed = BTreeSet::new();
            make_dir(dir, &mut changed)
                .map(|()| changed)
                .map_err(|e| io_error(dir, "create directory", &e))
        }))? {
            dirs.extend(changed);
        }
        dirs.extend(parents.iter().map(|d| d.to_path_buf()));
        all(par::map_owned(staged, Staged::link))?;
        // Pruning comes last: until every new file is in place, the old ones
        // keep the tree complete.
        let mut removed = HashSet::new();
        for r in all(par::map(&deletions, |rel| {
            remove_beneath(root, rel).map_err(|e| io_error(&root.join(rel), "delete", &e))
        }))? {
            dirs.extend(r.changed);
            removed.extend(r.removed);
        }
        match flush {
            Flush::Volatile => Ok(()),
            Flush::WholeFs | Flush::Deferred => syncfs(root).map_err(|d| vec![d]),
            Flush::Batch | Flush::EachFile => {
                let dirs: Vec<PathBuf> =
                    dirs.into_iter().filter(|d| !removed.contains(d)).collect();
                all(par::map(&dirs, |d| {
                    sync_dir(d).map_err(|e| io_error(d, "flush", &e))
                }))
                .map(drop)
            }
        }
    }
}

/// Creates `dir` and any missing directory above it, noting in `changed`
/// the directories that got a new entry.
pub(super) fn make_dir(dir: &Path, changed: &mut BTreeSet<PathBuf>) -> io::Result<()> {
    match fs::create_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => return Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let Some(up) = dir.parent().filter(|p| !p.as_os_str().is_empty()) else {
                return Err(e);
            };
            make_dir(up, changed)?;
            match fs::create_dir(dir) {
                Ok(()) => {}
                // Made meanwhile by another process.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => {
                    return Ok(());
                }
                Err(e) => return Err(e),
            }
        }
        Err(e) => return Err(e),
    }
    changed.insert(parent(dir).to_path_buf());
    Ok(())
}

/// Flushes a directory's entries. A file system that cannot flush a
/// directory says so with `EINVAL`; its entries are then as durable as it
/// makes them.
pub(super) fn sync_dir(dir: &Path) -> io::Result<()> {
    match fs::File::open(dir)?.sync_all() {
        Err(e) if e.kind() == io::ErrorKind::InvalidInput => Ok(()),
        other => other,
    }
}

/// What deleting one file changed: the directories that lost an entry, and
/// those that were removed.
struct Removed {
    changed: Vec<PathBuf>,
    removed: Vec<PathBuf>,
}

/// Deletes the regular file `rel` below `root`, then the directories above
/// it that this leaves empty, up to (not including) `root`. Each directory
/// on the way is opened relative to the one before, never through a
/// symlink: one put in the way since the plan looked fails the deletion
/// instead of deleting what it points at. A file already gone is fine; a
/// directory holding anything else stays.
fn remove_beneath(root: &Path, rel: &str) -> io::Result<Removed> {
    use rustix::fs::{AtFlags, CWD, FileType, Mode, OFlags, openat, statat, unlinkat};
    let dir_flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let gone = |e: rustix::io::Errno| e == rustix::io::Errno::NOENT;
    let mut done = Removed {
        changed: Vec::new(),
        removed: Vec::new(),
    };
    let mut parts: Vec<&str> = rel.split('/').collect();
    let Some(name) = parts.pop() else {
        return Ok(done);
    };
    let below = |parts: &[&str]| {
        parts
            .iter()
            .fold(root.to_path_buf(), |p, part| p.join(part))
    };
    // The root itself may be a symlink, as a build writes through it.
    let mut chain = vec![openat(CWD, root, dir_flags, Mode::empty())?];
    for part in &parts {
        let Some(dir) = chain.last() else {
            return Ok(done);
        };
        match openat(dir, *part, dir_flags | OFlags::NOFOLLOW, Mode::empty()) {
            Ok(fd) => chain.push(fd),
            Err(e) if gone(e) => return Ok(done),
            Err(e) => return Err(e.into()),
        }
    }
    let Some(dir) = chain.last() else {
        return Ok(done);
    };
    match statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Err(e) if gone(e) => return Ok(done),
        Err(e) => return Err(e.into()),
        Ok(st) if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile => {
            return Err(io::Error::other("no longer a regular file"));
        }
        Ok(_) => unlinkat(dir, name, AtFlags::empty())?,
    }
    done.changed.push(below(&parts));
    while let Some(part) = parts.pop() {
        chain.pop();
        let Some(parent) = chain.last() else { break };
        if unlinkat(parent, part, AtFlags::REMOVEDIR).is_err() {
            break;
        }
        done.removed.push(below(&parts).join(part));
        done.changed.push(below(&parts));
    }
    Ok(done)
}

/// Flushes the whole file system `root` is on.
#[cfg(target_os = "linux")]
fn syncfs(root: &Path) -> Result<(), Diagnostic> {
    let dir = fs::File::open(root).map_err(|e| io_error(root, "open", &e))?;
    rustix::fs::syncfs(&dir).map_err(|e| io_error(root, "flush", &e.into()))
}

/// Never chosen off Linux ([`Flush::choose`]); flushes everything.
#[cfg(not(target_os = "linux"))]
fn syncfs(_root: &Path) -> Result<(), Diagnostic> {
    rustix::fs::sync();
    Ok(())
}

#[cfg(target_os = "linux")]
use linux::{start_writeback, wait_writeback};

/// Batch flushing is never chosen off Linux; were it, each file would be
/// flushed whole when awaited.
#[cfg(not(target_os = "linux"))]
fn start_writeback(_file: &fs::File) -> io::Result<()> {
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn wait_writeback(file: &fs::File) -> io::Result<()> {
    file.sync_data()
}

#[cfg(target_os = "linux")]
mod linux {
    use std::fs;
    use std::io;
    use std::path::Path;

    /// What a file system promises, as far as trainc needs to know.
    #[derive(Debug, PartialEq, Eq)]
    pub(super) enum Kind {
        /// Lives in memory.
        Memory,
        /// Commits metadata through a journal, in order.
        Journaled,
        /// Anything else, or not known.
        Other,
    }

    // Magic numbers of `statfs(2)`'s `f_type`.
    const TMPFS: u32 = 0x0102_1994;
    const RAMFS: u32 = 0x8584_58f6;
    const XFS: u32 = 0x5846_5342;
    /// ext2, ext3 and ext4 alike: whether it journals is asked of jbd2.
    const EXT: u32 = 0xef53;

    pub(super) fn kind(dir: &Path) -> Kind {
        use rustix::fs::{Mode, OFlags};
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let Ok(fd) = rustix::fs::open(dir, flags, Mode::empty()) else {
            return Kind::Other;
        };
        let Ok(st) = rustix::fs::fstatfs(&fd) else {
            return Kind::Other;
        };
        // The magic numbers are 32-bit; `f_type` is wider on some targets.
        match st.f_type as u32 {
            TMPFS | RAMFS => Kind::Memory,
            XFS => Kind::Journaled,
            EXT if rustix::fs::fstat(&fd).is_ok_and(|s| has_journal(s.st_dev)) => Kind::Journaled,
            _ => Kind::Other,
        }
    }

    /// Whether the block device `dev` has a jbd2 journal: jbd2 lists each
    /// journal in /proc/fs/jbd2 as `<device>-<journal inode>`. Unknown
    /// (no /sys or /proc) counts as no.
    fn has_journal(dev: u64) -> bool {
        let (major, minor) = (rustix::fs::major(dev), rustix::fs::minor(dev));
        let Ok(link) = fs::read_link(format!("/sys/dev/block/{major}:{minor}")) else {
            return false;
        };
        let Some(name) = link.file_name().and_then(|n| n.to_str()) else {
            return false;
        };
        let Ok(journals) = fs::read_dir("/proc/fs/jbd2") else {
            return false;
        };
        journals
            .flatten()
            .any(|e| e.file_name().to_str().is_some_and(|j| journal_of(j, name)))
    }

    /// Whether jbd2's entry `journal` is the journal of device `name`.
    pub(super) fn journal_of(journal: &str, name: &str) -> bool {
        journal
            .strip_prefix(name)
            .and_then(|r| r.strip_prefix('-'))
            .is_some_and(|ino| !ino.is_empty() && ino.bytes().all(|b| b.is_ascii_digit()))
    }

    /// Whether opening an unnamed file failed because the file system (or
    /// the kernel, before 3.11) does not have them, rather than for a reason
    /// a named file would share.
    pub(super) fn unnamed_unsupported(e: &io::Error) -> bool {
        use rustix::io::Errno;
        Errno::from_io_error(e)
            .is_some_and(|e| e == Errno::OPNOTSUPP || e == Errno::ISDIR || e == Errno::INVAL)
    }

    /// Moves the file or directory at `from` to `to`, which must not exist.
    /// A file system without `RENAME_NOREPLACE` gets a look first: a
    /// directory could then only replace an empty one that another program
    /// made in between.
    pub(super) fn rename_new(from: &Path, to: &Path) -> io::Result<()> {
        use rustix::fs::{CWD, RenameFlags, renameat_with};
        match renameat_with(CWD, from, CWD, to, RenameFlags::NOREPLACE) {
            Err(rustix::io::Errno::INVAL) => match fs::symlink_metadata(to) {
                Ok(_) => Err(io::ErrorKind::AlreadyExists.into()),
                Err(e) if e.kind() == io::ErrorKind::NotFound => fs::rename(from, to),
                Err(e) => Err(e),
            },
            other => Ok(other?),
        }
    }

    /// Gives the unnamed file `file` the name `target`, which must not exist.
    /// Through /proc, since naming a descriptor directly (`AT_EMPTY_PATH`)
    /// needs a capability a build does not have.
    pub(super) fn link(file: &fs::File, target: &Path) -> io::Result<()> {
        use rustix::fs::{AtFlags, CWD};
        use std::os::fd::AsRawFd as _;
        let fd = format!("/proc/self/fd/{}", file.as_raw_fd());
        rustix::fs::linkat(CWD, fd.as_str(), CWD, target, AtFlags::SYMLINK_FOLLOW)?;
        Ok(())
    }

    /// `sync_file_range(2)` over the whole file.
    #[allow(unsafe_code)]
    fn sync_file_range(file: &fs::File, flags: libc::c_uint) -> io::Result<()> {
        use std::os::fd::AsRawFd as _;
        loop {
            // SAFETY: the descriptor is open for the call (`file` is
            // borrowed), and the other arguments are plain integers: the
            // call reads and writes no memory of this process.
            let r = unsafe { libc::sync_file_range(file.as_raw_fd(), 0, 0, flags) };
            if r == 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    /// Starts writing the file's dirty pages to the device, without waiting.
    pub(super) fn start_writeback(file: &fs::File) -> io::Result<()> {
        sync_file_range(file, libc::SYNC_FILE_RANGE_WRITE)
    }

    /// Returns once every page of the file written so far is on the device
    /// (which may still hold it in a volatile cache: the journal commit that
    /// follows flushes that).
    pub(super) fn wait_writeback(file: &fs::File) -> io::Result<()> {
        sync_file_range(
            file,
            libc::SYNC_FILE_RANGE_WAIT_BEFORE
                | libc::SYNC_FILE_RANGE_WRITE
                | libc::SYNC_FILE_RANGE_WAIT_AFTER,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emit::Tree;
    use crate::plan::plan;

    /// Failures a test makes happen.
    #[derive(Default)]
    pub(super) struct Fault {
        /// Writing a file whose path ends with one of these fails halfway
        /// (a full disk).
        pub write: Vec<&'static str>,
        /// The file system refuses unnamed files.
        pub refuse_unnamed: bool,
    }

    impl Fault {
        pub(super) fn write_fails(&self, target: &Path) -> bool {
            self.write.iter().any(|name| target.ends_with(name))
        }
    }

    fn job(name: &str, lr: &str) -> Vec<u8> {
        format!(
            "# Code generated by trainc from jobs/{name}.yaml. DO NOT EDIT.\napiVersion: batch/v1\nkind: Job\nmetadata: {{name: {name}}}\nspec: {{lr: {lr}}}\n"
        )
        .into_bytes()
    }

    /// Every file below `root` with its bytes.
    fn files(root: &Path) -> Vec<(String, Vec<u8>)> {
        let mut out = Vec::new();
        for e in walkdir::WalkDir::new(root).sort_by_file_name() {
            let e = e.unwrap();
            if e.file_type().is_file() {
                let rel = e
                    .path()
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                out.push((rel, fs::read(e.path()).unwrap()));
            }
        }
        out
    }

    /// 3 jobs of 10 files on disk; the desired tree updates the first job,
    /// keeps the second, drops the third (to prune), adds a fourth and a
    /// fifth in new directories, and a sixth in a new namespace (a new
    /// directory right below the root).
    fn scene(root: &Path) -> (Tree, Vec<(String, Vec<u8>)>) {
        for j in 0..3 {
            for t in 0..10 {
                let path = root.join(format!("ml/j{j}/job-j{j}-{t}.yaml"));
                fs::create_dir_all(path.parent().unwrap()).unwrap();
                fs::write(path, job(&format!("j{j}"), "1")).unwrap();
            }
        }
        let tree = desired();
        let want = tree.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        (tree, want)
    }

    fn desired() -> Tree {
        let mut tree = Tree::new();
        for (ns, j, lr) in [
            ("ml", 0, "2"),
            ("ml", 1, "1"),
            ("ml", 3, "1"),
            ("ml", 4, "1"),
            ("ns2", 5, "1"),
        ] {
            for t in 0..10 {
                tree.insert(
                    format!("{ns}/j{j}/job-j{j}-{t}.yaml"),
                    job(&format!("j{j}"), lr),
                );
            }
        }
        tree
    }

    /// The ways a new file may be staged: unnamed or not, and, below a
    /// directory to be made right below the root, whole or not.
    #[derive(Debug, Clone, Copy)]
    struct Way {
        unnamed: bool,
        whole: bool,
    }

    const WAYS: [Way; 4] = [
        Way {
            unnamed: true,
            whole: true,
        },
        Way {
            unnamed: true,
            whole: false,
        },
        Way {
            unnamed: false,
            whole: true,
        },
        Way {
            unnamed: false,
            whole: false,
        },
    ];

    fn writer(root: &Path, flush: Flush, way: Way) -> Writer {
        let mut w = Writer::new(root, flush);
        // Each test its own, as the shared one is the whole process's.
        w.budget = Arc::new(AtomicUsize::new(1 << 10));
        w.unnamed
            .store(way.unnamed && cfg!(target_os = "linux"), Ordering::Relaxed);
        w.whole
            .store(way.whole && cfg!(target_os = "linux"), Ordering::Relaxed);
        w
    }

    /// No temporary file is left, nor a stage directory.
    fn no_temporary_files(root: &Path) {
        let temps: Vec<String> = walkdir::WalkDir::new(root)
            .into_iter()
            .map(|e| e.unwrap().path().to_string_lossy().into_owned())
            .filter(|path| path.contains(TEMP_PREFIX))
            .collect();
        assert!(temps.is_empty(), "{temps:?}");
    }

    const FLUSHES: [Flush; 4] = [
        Flush::Volatile,
        Flush::Batch,
        Flush::EachFile,
        Flush::WholeFs,
    ];

    /// However the files are flushed and staged, the tree is the same, and
    /// new and replaced files get the same mode.
    #[test]
    fn every_way_of_writing_gives_the_same_tree() {
        use std::os::unix::fs::PermissionsExt as _;
        for flush in FLUSHES {
            for way in WAYS {
                let dir = tempfile::tempdir().unwrap();
                let root = dir.path().join("deploy");
                let (tree, want) = scene(&root);
                let p = plan(&root, "deploy", tree).unwrap();
                assert_eq!(
                    (
                        p.count(Op::Create),
                        p.count(Op::Update),
                        p.count(Op::Delete)
                    ),
                    (30, 10, 10)
                );
                let w = writer(&root, flush, way);
                let budget = w.budget.load(Ordering::Relaxed);
                w.apply(&p).unwrap();
                assert_eq!(files(&root), want, "{flush:?} {way:?}");
                // The 20 new files in `ml` were unnamed, and so were the 10
                // in `ns2` unless staged whole; batch flushing kept every
                // file open, the 10 replacements too.
                let open = budget - w.budget.load(Ordering::Relaxed);
                let unnamed = w.unnamed.load(Ordering::Relaxed);
                let whole = w.whole.load(Ordering::Relaxed);
                let kept = match (flush, unnamed, whole) {
                    (Flush::Batch, ..) => 40,
                    (_, true, true) => 20,
                    (_, true, false) => 30,
                    (_, false, _) => 0,
                };
                assert_eq!(open, kept, "{flush:?} {way:?}");
                assert!(!root.join("ml/j2").exists(), "emptied directory removed");
                let mode =
                    |rel: &str| fs::metadata(root.join(rel)).unwrap().permissions().mode() & 0o777;
                assert_eq!(mode("ml/j3/job-j3-0.yaml"), mode("ml/j0/job-j0-0.yaml"));
                assert_eq!(mode("ns2/j5/job-j5-0.yaml"), mode("ml/j0/job-j0-0.yaml"));
                assert_eq!(mode("ns2"), mode("ml"));
                assert_eq!(mode("ns2/j5"), mode("ml/j3"));
                no_temporary_files(&root);
                // Nothing left to do.
                assert!(plan(&root, "deploy", desired()).unwrap().is_noop());
            }
        }
    }

    /// A write that fails halfway (a full disk), with the other files staged
    /// meanwhile on other threads: the error names the first failing file in
    /// path order, whichever thread failed first; every target is as it was,
    /// none is partly written, and no temporary file is left.
    #[test]
    fn a_failing_write_leaves_no_temporary_file_and_no_partial_target() {
        for flush in FLUSHES {
            for way in WAYS {
                // One failing update, one failing creation, one failing
                // creation in a new namespace.
                for failing in [
                    vec!["ml/j4/job-j4-7.yaml", "ml/j0/job-j0-3.yaml"],
                    vec!["ml/j3/job-j3-9.yaml"],
                    vec!["ns2/j5/job-j5-2.yaml"],
                ] {
                    let dir = tempfile::tempdir().unwrap();
                    let root = dir.path().join("deploy");
                    let (tree, _) = scene(&root);
                    let before = files(&root);
                    let p = plan(&root, "deploy", tree).unwrap();
                    let mut w = writer(&root, flush, way);
                    w.fault.write = failing.clone();
                    let err = w.apply(&p).unwrap_err();
                    drop(w);
                    let first = failing.iter().min().unwrap();
                    assert_eq!(
                        err[0].title(),
                        format!(
                            "cannot write {}: {}",
                            root.join(first).display(),
                            io::Error::from(rustix::io::Errno::NOSPC)
                        ),
                        "{flush:?} {way:?}"
                    );
                    assert_eq!(files(&root), before, "{flush:?} {way:?} {failing:?}");
                    assert!(!root.join("ns2").exists(), "{flush:?} {way:?}");
                    no_temporary_files(&root);
                }
            }
        }
    }

    /// A file system without unnamed files: the first refusal switches the
    /// build to named temporary files, and the files are written all the
    /// same.
    #[test]
    fn unnamed_files_fall_back_to_named_ones() {
        for flush in FLUSHES {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path().join("deploy");
            let (tree, want) = scene(&root);
            let p = plan(&root, "deploy", tree).unwrap();
            let mut w = writer(
                &root,
                flush,
                Way {
                    unnamed: true,
                    whole: false,
                },
            );
            w.fault.refuse_unnamed = true;
            w.apply(&p).unwrap();
            assert!(!w.unnamed.load(Ordering::Relaxed), "{flush:?}");
            assert_eq!(files(&root), want, "{flush:?}");
            no_temporary_files(&root);
        }
        #[cfg(target_os = "linux")]
        {
            use rustix::io::Errno;
            for (errno, fallback) in [
                (Errno::OPNOTSUPP, true),
                (Errno::ISDIR, true),
                (Errno::INVAL, true),
                (Errno::NOSPC, false),
                (Errno::ACCESS, false),
                (Errno::NOENT, false),
            ] {
                assert_eq!(
                    linux::unnamed_unsupported(&errno.into()),
                    fallback,
                    "{errno:?}"
                );
            }
        }
    }

    /// More files than may stay open: batch flushing opens the named ones
    /// again to wait on them, and no file is unnamed.
    #[test]
    fn files_past_the_open_budget_are_closed_and_awaited_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("deploy");
        let (tree, want) = scene(&root);
        let p = plan(&root, "deploy", tree).unwrap();
        let w = writer(&root, Flush::Batch, WAYS[0]);
        w.budget.store(3, Ordering::Relaxed);
        w.apply(&p).unwrap();
        assert_eq!(w.budget.load(Ordering::Relaxed), 0);
        assert_eq!(files(&root), want);
        no_temporary_files(&root);
    }

    /// A file put where the plan found none, before the build links its
    /// own there: kept, and the build fails saying so.
    #[test]
    fn a_file_that_appears_meanwhile_is_not_overwritten() {
        for way in WAYS {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path().join("deploy");
            let (tree, _) = scene(&root);
            let p = plan(&root, "deploy", tree).unwrap();
            let theirs = root.join("ml/j3/job-j3-5.yaml");
            fs::create_dir_all(theirs.parent().unwrap()).unwrap();
            fs::write(&theirs, "mine\n").unwrap();
            let err = writer(&root, Flush::Volatile, way).apply(&p).unwrap_err();
            assert_eq!(
                err[0].title(),
                format!(
                    "{} appeared while trainc was writing; not overwriting it",
                    theirs.display()
                )
            );
            assert_eq!(fs::read(&theirs).unwrap(), b"mine\n");
            no_temporary_files(&root);
        }
    }

    /// A directory put where the plan found none, after its files were
    /// staged whole and before they go in: it stays as it is, and the build
    /// fails saying so.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_directory_that_appears_meanwhile_is_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("deploy");
        let (tree, _) = scene(&root);
        let p = plan(&root, "deploy", tree).unwrap();
        let w = writer(&root, Flush::Volatile, WAYS[0]);
        let ready = w.stage_plan(&p, Vec::new()).unwrap();
        let staged = fs::read_dir(&root)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with(TEMP_PREFIX)
            })
            .count();
        assert_eq!(staged, 1, "one stage directory");
        // Empty, which a plain `rename` would replace.
        let theirs = root.join("ns2");
        fs::create_dir(&theirs).unwrap();
        let err = ready.link().unwrap_err();
        assert_eq!(
            err[0].title(),
            format!(
                "{} appeared while trainc was writing; not overwriting it",
                theirs.display()
            )
        );
        assert_eq!(fs::read_dir(&theirs).unwrap().count(), 0);
        drop(w);
        no_temporary_files(&root);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_flush_follows_the_file_system() {
        use linux::Kind;
        assert_eq!(Flush::pick(Kind::Memory, 100_000), Flush::Volatile);
        assert_eq!(Flush::pick(Kind::Journaled, 1), Flush::Batch);
        assert_eq!(Flush::pick(Kind::Journaled, 100_000), Flush::Batch);
        assert_eq!(Flush::pick(Kind::Other, EACH_FILE_MAX), Flush::EachFile);
        assert_eq!(Flush::pick(Kind::Other, EACH_FILE_MAX + 1), Flush::WholeFs);
        // jbd2 names a journal `<device>-<journal inode>`.
        assert!(linux::journal_of("vda-8", "vda"));
        assert!(linux::journal_of("dm-0-8", "dm-0"));
        assert!(!linux::journal_of("sda10-8", "sda1"));
        assert!(!linux::journal_of("vda", "vda"));
        assert!(!linux::journal_of("vda-", "vda"));
        if fs::read_to_string("/proc/mounts").is_ok_and(|m| {
            m.lines()
                .any(|l| l.split(' ').nth(1) == Some("/dev/shm") && l.contains(" tmpfs "))
        }) {
            assert_eq!(linux::kind(Path::new("/dev/shm")), Kind::Memory);
        }
    }
}
