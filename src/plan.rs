//! Stage 5: the desired tree against the directory on disk → operations, and
//! applying them.
//!
//! Everything is decided before the first write: a plan that refuses any file
//! is never applied, so a failed build changes nothing.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::diagnostic::Diagnostic;
use crate::emit::{self, Tree};

mod in_place;
pub mod merge;
pub mod snapshot;
pub mod stream;
mod write;

pub use write::{Ready, apply, stage};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Op {
    Create,
    Update,
    /// A generated file that is no longer produced (or a temporary file left
    /// by an interrupted build): pruned.
    Delete,
    Unchanged,
}

impl Op {
    /// `+`, `~`, `-`, or a space: the marker used in summaries.
    pub fn sign(self) -> char {
        match self {
            Op::Create => '+',
            Op::Update => '~',
            Op::Delete => '-',
            Op::Unchanged => ' ',
        }
    }
}

#[derive(Debug, Clone)]
pub struct Change {
    /// Relative, `/`-separated path inside the output directory.
    pub path: String,
    pub op: Op,
    /// The file on disk, if any; `None` for unchanged files (compared,
    /// then dropped).
    pub old: Option<Vec<u8>>,
    /// The file trainc produces; empty for deletions and for unchanged
    /// files.
    pub new: Vec<u8>,
}

#[derive(Debug, Clone)]
pub struct Plan {
    pub root: PathBuf,
    pub changes: Vec<Change>,
    /// Files left as they are without a change of their own: those of the
    /// jobs an incremental build took from its record unread.
    pub kept: usize,
}

impl Plan {
    pub fn count(&self, op: Op) -> usize {
        let n = self.changes.iter().filter(|c| c.op == op).count();
        if op == Op::Unchanged {
            n + self.kept
        } else {
            n
        }
    }

    /// The files the directory holds once the plan is carried out.
    pub fn files(&self) -> usize {
        self.changes.iter().filter(|c| c.op != Op::Delete).count() + self.kept
    }

    pub fn is_noop(&self) -> bool {
        self.changes.iter().all(|c| c.op == Op::Unchanged)
    }

    /// The changes that do something, in path order.
    pub fn pending(&self) -> impl Iterator<Item = &Change> {
        self.changes.iter().filter(|c| c.op != Op::Unchanged)
    }
}

fn io_error(path: &Path, what: &str, e: &io::Error) -> Diagnostic {
    Diagnostic::new(format!("cannot {what} {}: {e}", path.display()))
}

/// Compares the desired tree with `root` on disk. Refuses (with every reason
/// at once) to overwrite files trainc did not write, to go through
/// symlinks or non-directories, and to make a change to a claim or a
/// PersistentVolume that the API server would refuse ([`in_place`]).
///
/// `shown` is how messages name `root` (relative to the working directory).
pub fn plan(root: &Path, shown: &str, tree: Tree) -> Result<Plan, Vec<Diagnostic>> {
    let mut want: Vec<(String, merge::Want)> = tree
        .into_iter()
        .map(|(rel, new)| (rel, merge::Want::Bytes(new)))
        .collect();
    want.sort_by(|a, b| snapshot::walk_cmp(&a.0, &b.0));
    let merged = merge::plan(merge::Wanted {
        root,
        shown,
        want,
        recorded: None,
        unlisted: None,
        staged: HashSet::new(),
    })
    .map_err(|stopped| match stopped {
        merge::Stopped::Failed(d) => vec![d],
        // Nothing was known: every file was compared.
        merge::Stopped::Changed(why) => vec![Diagnostic::new(format!("internal error: {why}"))],
    })?;
    if !merged.refused.is_empty() {
        return Err(merged.refused);
    }
    let mut changes = merged.changes;
    changes.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(Plan {
        root: root.to_path_buf(),
        changes,
        kept: merged.kept,
    })
}

/// One file of [`plan`]: what becomes of `rel` below `root`, or why it
/// is refused. `checked` holds the directories found so far.
pub fn plan_file(
    root: &Path,
    shown: &str,
    rel: String,
    new: Vec<u8>,
    checked: &mut Checked,
) -> Result<Change, Diagnostic> {
    let (op, old) = classify(root, shown, &rel, &new, checked)?;
    let new = if op == Op::Unchanged { Vec::new() } else { new };
    Ok(Change {
        path: rel,
        op,
        old,
        new,
    })
}

/// What becomes of `rel` below `root` if it is to hold `new`, with the
/// file there now when trainc replaces it; or why it is refused.
fn classify(
    root: &Path,
    shown: &str,
    rel: &str,
    new: &[u8],
    checked: &mut Checked,
) -> Result<(Op, Option<Vec<u8>>), Diagnostic> {
    // Named only in errors: not formatted for each of a cold build's files.
    let show = || format!("{shown}/{rel}");
    // What trainc writes, it must recognise as its own next time.
    if new.len() as u64 > MAX_FILE {
        return Err(Diagnostic::new(format!(
            "{} would be {} bytes; trainc writes no file over {} MiB",
            show(),
            new.len(),
            MAX_FILE >> 20
        ))
        .hint("split the job, or make its strings shorter"));
    }
    // A new kind of file must follow the ownership rule, or the next
    // build would refuse to overwrite it.
    if !owned(rel, new) {
        return Err(Diagnostic::new(format!(
            "internal error: {} would not be recognised as trainc's by the next build (see `plan::owned`)",
            show()
        )));
    }
    if !ancestors(root, shown, rel, checked)? {
        return Ok((Op::Create, None));
    }
    let path = root.join(rel);
    match fs::symlink_metadata(&path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok((Op::Create, None)),
        Err(e) => Err(io_error(&path, "inspect", &e)),
        Ok(m) if m.file_type().is_symlink() => Err(Diagnostic::new(format!(
            "{} is a symlink; trainc never writes through symlinks",
            show()
        ))
        .hint("remove the symlink so trainc can write a generated file there")),
        Ok(m) if !m.is_file() => Err(Diagnostic::new(format!("{} is not a regular file", show()))
            .hint("move it away so trainc can write a generated file there")),
        Ok(_) => match read_owned(&path, rel) {
            // Neither copy is kept: nobody reads an unchanged file's bytes,
            // and the plan of a large tree would hold every file twice.
            Ok(Found::Owned(old)) if old == new => Ok((Op::Unchanged, None)),
            Ok(Found::Owned(old)) => match in_place::refused(&show(), &old, new) {
                Some(refused) => Err(refused),
                None => Ok((Op::Update, Some(old))),
            },
            Ok(Found::Foreign(_)) => Err(Diagnostic::new(format!(
                "{} was not generated by trainc; refusing to overwrite it",
                show()
            ))
            .hint(format!(
                "move the file out of the output directory; trainc only touches files starting with `{}` (see docs/output.md)",
                emit::HEADER_PREFIX
            ))),
            Ok(Found::TooLarge(_)) => Err(too_large(&show())),
            Err(e) => Err(io_error(&path, "read", &e)),
        },
    }
}

/// Prefix and suffix of the temporary files `apply` writes beside their
/// targets (`tempfile` puts 6 random letters and digits between).
const TEMP_PREFIX: &str = ".trainc-";
const TEMP_SUFFIX: &str = ".tmp";

/// At most this many bytes of a file are read to tell whether trainc owns
/// it: enough for the longest header (a path of 4,096 bytes, each escaped)
/// and the `apiVersion` and `kind` lines after it.
pub const SNIFF: usize = 64 * 1024;

/// The largest file trainc writes, and so the largest it reads back whole.
/// A file that looks like trainc's but is larger is not trainc's.
pub const MAX_FILE: u64 = 64 << 20;

/// Whether a directory below an output root may be one trainc made: a
/// namespace or a job, so a DNS label (lower-case letters, digits, `-`).
/// Pruning never enters any other: not `.git` nor any version-control
/// directory (`.hg`, `.svn`, `.jj`, `.bzr`, `_darcs`, `CVS`), not a hidden
/// one, not `node_modules`.
pub fn layout_dir(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// Whether `name` is a temporary file of an interrupted build.
pub fn is_temp(name: &str) -> bool {
    name.strip_prefix(TEMP_PREFIX)
        .and_then(|r| r.strip_suffix(TEMP_SUFFIX))
        .is_some_and(|r| r.len() == 6 && r.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// Whether trainc owns the regular file at `rel` (relative to an output
/// root, `/`-separated) whose first bytes (at least [`SNIFF`] of them, or all)
/// are `head`. See "The header marks ownership" in docs/output.md:
///
/// - every directory on the way is a [`layout_dir`];
/// - a temporary file of an interrupted build is trainc's whatever it holds;
///   any other hidden file is not;
/// - the first line is a complete header, exactly as trainc writes it;
/// - a `.yaml` file declares, right after the header, the `kind` its name
///   says: `kustomization.yaml` a `Kustomization`, `<kind>-….yaml` a `<Kind>`.
pub fn owned(rel: &str, head: &[u8]) -> bool {
    let (dirs, name) = match rel.rsplit_once('/') {
        Some((dirs, name)) => (Some(dirs), name),
        None => (None, rel),
    };
    if dirs.is_some_and(|d| !d.split('/').all(layout_dir)) {
        return false;
    }
    if is_temp(name) {
        return true;
    }
    if name.starts_with('.') || !emit::is_generated(head) {
        return false;
    }
    let Some(stem) = name.strip_suffix(".yaml") else {
        return true;
    };
    declared_kind(head).is_some_and(|kind| {
        if kind == "Kustomization" {
            stem == "kustomization"
        } else {
            stem.strip_prefix(kind.to_ascii_lowercase().as_str())
                .is_some_and(|rest| rest.len() > 1 && rest.starts_with('-'))
        }
    })
}

/// The `kind` a generated YAML file declares: the lines after the header
/// are `apiVersion: …` and `kind: …`, as [`emit::to_yaml`] writes them.
fn declared_kind(head: &[u8]) -> Option<&str> {
    let mut lines = head.split(|&b| b == b'\n').skip(1);
    let api = lines.next()?.strip_prefix(b"apiVersion: ")?;
    let kind = std::str::from_utf8(lines.next()?.strip_prefix(b"kind: ")?).ok()?;
    (!api.is_empty() && !kind.is_empty() && kind.bytes().all(|b| b.is_ascii_alphanumeric()))
        .then_some(kind)
}

/// A regular file as [`read_owned`] found it.
pub enum Found {
    /// trainc's, read whole.
    Owned(Vec<u8>),
    /// Not trainc's; only its first bytes were read, and these are they.
    Foreign(Vec<u8>),
    /// Looks like trainc's but is larger than [`MAX_FILE`]; its first bytes.
    TooLarge(Vec<u8>),
}

/// Opens `path` for reading, never through a symlink in its last
/// component, nor blocking on a FIFO put there meanwhile.
pub(crate) fn open_nofollow(path: &Path) -> io::Result<(fs::File, fs::Metadata)> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let flags = rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK;
    let file = fs::File::options()
        .read(true)
        .custom_flags(flags.bits() as i32)
        .open(path)?;
    let meta = file.metadata()?;
    Ok((file, meta))
}

/// Opens the regular file at `path` as [`open_nofollow`] does.
fn open_file(path: &Path) -> io::Result<(fs::File, u64)> {
    let (file, meta) = open_nofollow(path)?;
    if !meta.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    Ok((file, meta.len()))
}

/// The first [`SNIFF`] bytes of `file` (fewer when it is shorter).
fn read_head(file: &mut fs::File) -> io::Result<Vec<u8>> {
    use std::io::Read as _;
    let mut head = Vec::with_capacity(SNIFF.min(8192));
    io::Read::take(&mut *file, SNIFF as u64).read_to_end(&mut head)?;
    Ok(head)
}

/// Reads the file at `rel` below an output root (`path` on disk): its first
/// bytes, and all of it only when trainc owns it. A foreign file of any size
/// costs one bounded read.
pub fn read_owned(path: &Path, rel: &str) -> io::Result<Found> {
    use std::io::Read as _;
    let (mut file, size) = open_file(path)?;
    let mut bytes = read_head(&mut file)?;
    if !owned(rel, &bytes) {
        return Ok(Found::Foreign(bytes));
    }
    if size > MAX_FILE {
        return Ok(Found::TooLarge(bytes));
    }
    let head = bytes.len();
    file.take(MAX_FILE + 1 - head as u64)
        .read_to_end(&mut bytes)?;
    Ok(if bytes.len() as u64 > MAX_FILE {
        bytes.truncate(head);
        Found::TooLarge(bytes)
    } else {
        Found::Owned(bytes)
    })
}

fn too_large(show: &str) -> Diagnostic {
    Diagnostic::new(format!(
        "{show} starts like a generated file but is larger than any file trainc writes ({} MiB); refusing to read it",
        MAX_FILE >> 20
    ))
    .hint("move the file out of the output directory")
}

/// The directories on the way to planned files, as found so far: `true` a
/// directory, `false` missing. Nothing is made while a plan is made, so
/// every file below a missing directory is new, and needs no look of its own.
pub type Checked = HashMap<PathBuf, bool>;

/// Whether every directory on the way to `rel` exists (`false`: a file
/// there is new), or the one that is a symlink or a file. What is found is
/// remembered in `checked`: a job's files share their directories.
fn ancestors(
    root: &Path,
    shown: &str,
    rel: &str,
    checked: &mut Checked,
) -> Result<bool, Diagnostic> {
    let mut dir = root.to_path_buf();
    let parts: Vec<&str> = rel.split('/').collect();
    for (i, part) in parts[..parts.len().saturating_sub(1)].iter().enumerate() {
        dir.push(part);
        let found = match checked.get(&dir) {
            Some(&found) => found,
            None => {
                let show = || format!("{shown}/{}", parts[..=i].join("/"));
                let found = match fs::symlink_metadata(&dir) {
                    Ok(m) if m.file_type().is_symlink() => {
                        return Err(Diagnostic::new(format!(
                            "{} is a symlink; trainc never writes through symlinks",
                            show()
                        ))
                        .hint("replace the symlink with a directory"));
                    }
                    Ok(m) if !m.is_dir() => {
                        return Err(Diagnostic::new(format!(
                            "{} is in the way of a generated directory",
                            show()
                        ))
                        .hint("move it out of the output directory"));
                    }
                    Ok(_) => true,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => false,
                    Err(e) => return Err(io_error(&dir, "inspect", &e)),
                };
                checked.insert(dir.clone(), found);
                found
            }
        };
        if !found {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Held while a build plans and writes: two builds into the same directory
/// take turns instead of interleaving. Released when dropped.
#[derive(Debug)]
pub struct Lock {
    _dir: fs::File,
    /// The directories [`lock`] made, the outermost first.
    made: Vec<PathBuf>,
}

impl Lock {
    /// Releases the lock of a build that wrote nothing, removing the
    /// directories taking it made if they are still empty: a build that
    /// locks before it knows whether the definitions are valid leaves no
    /// trace when they are not.
    pub fn release_unused(self) {
        // Removed while still locked: a build waiting for the lock then
        // finds, once it has it, that the directory is gone (see `lock`).
        let Lock { _dir, made } = self;
        for dir in made.iter().rev() {
            if fs::remove_dir(dir).is_err() {
                break;
            }
        }
        drop(_dir);
    }
}

/// Creates `root` if needed and locks it (an advisory `flock` on the
/// directory itself, so no lock file ever appears in the synced tree). Waits,
/// saying so, when another build holds it.
pub fn lock(root: &Path) -> Result<Lock, Diagnostic> {
    let mut waited = false;
    // A build that made the directory and failed removes it again (see
    // [`Lock::release_unused`]): one that waited for it then holds a lock
    // on a directory no longer there, and tries again. Each try but the
    // last lost to a build that came and went.
    for _ in 0..1000 {
        if let Some(lock) = lock_once(root, &mut waited)? {
            return Ok(lock);
        }
    }
    Err(Diagnostic::new(format!(
        "cannot lock {}: it is removed and made again, over and over",
        root.display()
    )))
}

/// One try of [`lock`]: `None` when the directory locked is no longer the
/// one at `root`.
fn lock_once(root: &Path, waited: &mut bool) -> Result<Option<Lock>, Diagnostic> {
    use rustix::fs::{FlockOperation, flock};
    let mut parents = std::collections::BTreeSet::new();
    write::make_dir(root, &mut parents).map_err(|e| io_error(root, "create directory", &e))?;
    // A new output directory lasts as its files do. Best effort: a parent
    // that cannot be opened for reading is still one to write below.
    for dir in &parents {
        let _ = write::sync_dir(dir);
    }
    // `make_dir` notes the parent of each directory it made: the root is
    // one, and so is each such parent below the first that existed.
    let mut made: Vec<PathBuf> = parents
        .iter()
        .skip(1)
        .cloned()
        .chain((!parents.is_empty()).then(|| root.to_path_buf()))
        .collect();
    made.sort();
    let dir = match fs::File::open(root) {
        Ok(d) => d,
        // Removed since it was made: by a build that failed, as above.
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error(root, "open", &e)),
    };
    match flock(&dir, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => {}
        Err(rustix::io::Errno::WOULDBLOCK) => {
            if !*waited {
                eprintln!(
                    "waiting for another trainc build to finish writing {}",
                    root.display()
                );
                *waited = true;
            }
            flock(&dir, FlockOperation::LockExclusive)
                .map_err(|e| io_error(root, "lock", &e.into()))?;
        }
        Err(e) => return Err(io_error(root, "lock", &e.into())),
    }
    let same = match (rustix::fs::fstat(&dir), rustix::fs::stat(root)) {
        (Ok(a), Ok(b)) => a.st_dev == b.st_dev && a.st_ino == b.st_ino,
        _ => false,
    };
    if same {
        remove_stages(root);
    }
    Ok(same.then_some(Lock { _dir: dir, made }))
}

/// Removes the hidden stage directories an interrupted build left in
/// `root` (see `write::Stage`), which only a build holding the lock may do.
/// Best effort: one left is hidden, and never read as output.
fn remove_stages(root: &Path) {
    let Ok(entries) = fs::read_dir(root) else {
        return;
    };
    for e in entries.flatten() {
        if e.file_name().to_str().is_some_and(is_temp) && e.file_type().is_ok_and(|t| t.is_dir()) {
            // Never follows a symlink.
            let _ = fs::remove_dir_all(e.path());
        }
    }
}

/// The hash a build keeps of a file's bytes: the first 128 bits of their
/// SHA-256, in hex. The build cache compares a directory with its record
/// by it.
pub fn content_hash(bytes: &[u8]) -> String {
    use sha2::{Digest as _, Sha256};
    hex::encode(&Sha256::digest(bytes)[..16])
}

#[cfg(test)]
mod tests {
    use super::*;

    const JOB: &str = "# Code generated by trainc from jobs/mnist.yaml. DO NOT EDIT.\napiVersion: batch/v1\nkind: Job\nmetadata: {}\n";
    const ROOT: &str = "# Code generated by trainc. DO NOT EDIT.\napiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n";

    /// Ownership is the header, the layout and the kind agreeing, not a
    /// first line that merely starts like the header.
    #[test]
    fn ownership_needs_header_layout_and_kind_to_agree() {
        let dockerfile = "# Code generated by trainc from jobs/mnist.yaml. DO NOT EDIT.\nFROM x\n";
        let cases: &[(&str, &str, bool)] = &[
            ("ml/mnist/job-mnist-ps-0.yaml", JOB, true),
            ("kustomization.yaml", ROOT, true),
            ("ml/mnist/kustomization.yaml", ROOT, true),
            ("ml/mnist/Dockerfile", dockerfile, true),
            (
                "docker-bake.hcl",
                "# Code generated by trainc. DO NOT EDIT.\ngroup {}\n",
                true,
            ),
            ("ml/mnist/.trainc-a1B2c3.tmp", "half a fi", true),
            // The kind the file name says is not the kind it holds.
            ("ml/mnist/configmap-mnist.yaml", JOB, false),
            ("ml/mnist/jobset-mnist.yaml", JOB, false),
            ("ml/mnist/job.yaml", JOB, false),
            ("ml/mnist/job-x.yaml", ROOT, false),
            (
                "ml/mnist/notes.yaml",
                "# Code generated by trainc. DO NOT EDIT.\n",
                false,
            ),
            // Not a directory trainc makes.
            (".git/config", dockerfile, false),
            ("ml/.git/job-x.yaml", JOB, false),
            ("_darcs/job-x.yaml", JOB, false),
            ("CVS/job-x.yaml", JOB, false),
            ("ml/.hidden/job-x.yaml", JOB, false),
            ("node_modules/x/job-x.yaml", JOB, false),
            (".git/.trainc-a1B2c3.tmp", "", false),
            // Hidden, or not quite the header.
            ("ml/mnist/.job-x.yaml", JOB, false),
            ("ml/mnist/.trainc-x.tmp", "", false),
            (
                "ml/mnist/Dockerfile",
                "# Code generated by trainc. DO NOT EDIT",
                false,
            ),
            (
                "ml/mnist/Dockerfile",
                "# Code generated by trainctl. DO NOT EDIT.\n",
                false,
            ),
            (
                "ml/mnist/Dockerfile",
                "# Code generated by trainc. DO NOT EDIT. Mine now.\n",
                false,
            ),
            (
                "ml/mnist/Dockerfile",
                "\u{feff}# Code generated by trainc. DO NOT EDIT.\n",
                false,
            ),
        ];
        for (rel, head, want) in cases {
            assert_eq!(owned(rel, head.as_bytes()), *want, "{rel}: {head:?}");
        }
    }

    /// A file trainc would not recognise as its own is never written.
    /// An interrupted build's stage directory goes when the next build
    /// takes the lock, with what it holds; a symlink or a file of that name,
    /// or a directory of another name, stays.
    #[test]
    fn the_lock_clears_an_interrupted_stage() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("deploy");
        let stage = root.join(".trainc-a1B2c3.tmp");
        fs::create_dir_all(stage.join("ml/job")).unwrap();
        fs::write(stage.join("ml/job/job-x.yaml"), "x").unwrap();
        let victim = dir.path().join("victim");
        fs::create_dir(&victim).unwrap();
        fs::write(victim.join("keep"), "").unwrap();
        std::os::unix::fs::symlink(&victim, root.join(".trainc-d4E5f6.tmp")).unwrap();
        fs::write(root.join(".trainc-g7H8i9.tmp"), "").unwrap();
        fs::create_dir(root.join(".trainc-notours")).unwrap();
        let lock = lock(&root).unwrap();
        assert!(!stage.exists());
        assert!(victim.join("keep").exists());
        assert!(root.join(".trainc-d4E5f6.tmp").is_symlink());
        assert!(
            root.join(".trainc-g7H8i9.tmp").is_file(),
            "pruned, not cleared"
        );
        assert!(root.join(".trainc-notours").is_dir());
        drop(lock);
    }

    #[test]
    fn what_trainc_writes_it_owns() {
        let dir = tempfile::tempdir().unwrap();
        let tree = Tree::from([("ml/x/configmap-a.yaml".to_owned(), JOB.as_bytes().to_vec())]);
        let refused = plan(dir.path(), "deploy", tree).unwrap_err();
        assert_eq!(
            refused[0].title(),
            "internal error: deploy/ml/x/configmap-a.yaml would not be recognised as trainc's by the next build (see `plan::owned`)"
        );
    }

    /// A foreign file costs one bounded read, however large; one that looks
    /// like trainc's but is larger than any file trainc writes is not read.
    #[test]
    fn large_files_are_read_no_further_than_needed() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("job-x.yaml");
        let f = fs::File::create(&big).unwrap();
        f.set_len(1 << 40).unwrap(); // sparse: a terabyte of zeros
        match read_owned(&big, "ml/mnist/job-x.yaml").unwrap() {
            Found::Foreign(head) => assert_eq!(head.len(), SNIFF),
            _ => panic!("foreign"),
        }
        fs::write(&big, JOB).unwrap();
        let f = fs::File::options().write(true).open(&big).unwrap();
        f.set_len(MAX_FILE + 1).unwrap();
        assert!(matches!(
            read_owned(&big, "ml/mnist/job-x.yaml").unwrap(),
            Found::TooLarge(head) if head.len() == SNIFF
        ));
        f.set_len(JOB.len() as u64).unwrap();
        assert!(matches!(
            read_owned(&big, "ml/mnist/job-x.yaml").unwrap(),
            Found::Owned(bytes) if bytes == JOB.as_bytes()
        ));
        // Never through a symlink.
        std::os::unix::fs::symlink(&big, dir.path().join("link.yaml")).unwrap();
        assert!(read_owned(&dir.path().join("link.yaml"), "ml/mnist/job-y.yaml").is_err());
    }

    /// A directory swapped for a symlink after the plan looked: the deletion
    /// fails, and what the symlink points at stays.
    #[test]
    fn deletion_never_goes_through_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("deploy");
        let victim = dir.path().join("victim");
        fs::create_dir_all(root.join("ml/mnist")).unwrap();
        fs::create_dir_all(victim.join("mnist")).unwrap();
        fs::write(root.join("ml/mnist/job-x.yaml"), JOB).unwrap();
        fs::write(victim.join("mnist/job-x.yaml"), JOB).unwrap();
        let plan = plan(&root, "deploy", Tree::new()).unwrap();
        assert_eq!(plan.count(Op::Delete), 1);
        fs::rename(root.join("ml"), dir.path().join("moved")).unwrap();
        std::os::unix::fs::symlink(&victim, root.join("ml")).unwrap();
        assert!(apply(&plan).is_err());
        assert!(victim.join("mnist/job-x.yaml").exists());
        // Without the swap: the file goes, and the directories it leaves
        // empty, up to the root.
        fs::remove_file(root.join("ml")).unwrap();
        fs::rename(dir.path().join("moved"), root.join("ml")).unwrap();
        apply(&plan).unwrap();
        assert!(root.is_dir());
        assert_eq!(fs::read_dir(&root).unwrap().count(), 0);
    }

    /// Pruning deletes trainc's stale files and nothing else: not what lies
    /// in `.git`, not a file whose kind does not match its name, not a
    /// symlink.
    #[test]
    fn pruning_finds_only_owned_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for (rel, text) in [
            ("kustomization.yaml", ROOT),
            ("ml/mnist/job-mnist-worker-1.yaml", JOB),
            ("ml/mnist/.trainc-Ab12cd.tmp", "partial"),
            (".git/config", JOB),
            (".git/objects/job-x.yaml", JOB),
            ("ml/mnist/configmap-x.yaml", JOB),
            ("ml/mnist/NOTES.md", "mine\n"),
        ] {
            let path = root.join(rel);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        }
        std::os::unix::fs::symlink(
            root.join("ml/mnist/job-mnist-worker-1.yaml"),
            root.join("ml/mnist/job-link.yaml"),
        )
        .unwrap();
        let plan = plan(root, ".", Tree::new()).unwrap();
        let deleted: Vec<&str> = plan.changes.iter().map(|c| c.path.as_str()).collect();
        assert_eq!(
            deleted,
            [
                "kustomization.yaml",
                "ml/mnist/.trainc-Ab12cd.tmp",
                "ml/mnist/job-mnist-worker-1.yaml"
            ]
        );
    }
}
