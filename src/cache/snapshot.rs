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
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use rustix::fd::OwnedFd;
use serde::{Deserialize, Serialize};

use sha2::{Digest as _, Sha256};

/// One entry below an output root, in walk order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Relative, `/`-separated path.
    pub path: String,
    pub kind: Kind,
    /// Files only: `lstat` signature and content hash.
    pub file: Option<FileState>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    Other,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileState {
    pub sig: Sig,
    pub hash: String,
    /// Written too close to the snapshot for the signature to vouch for the
    /// bytes: hash them next time.
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
    /// The signature of a file this build wrote, not looked at: such a file
    /// is racy (see [`Sig::racy`]), so the next check hashes it whatever
    /// its signature, and records the one it finds.
    pub const UNSEEN: Sig = Sig {
        ino: 0,
        size: 0,
        mode: 0,
        mtime: 0,
        ctime: 0,
    };

    fn of_stat(st: &rustix::fs::Stat) -> Self {
        let ns = |s: i64, n: u64| i128::from(s) * 1_000_000_000 + i128::from(n);
        #[allow(clippy::useless_conversion, clippy::unnecessary_cast)]
        Self {
            ino: st.st_ino as u64,
            size: u64::try_from(st.st_size).unwrap_or(u64::MAX),
            mode: st.st_mode as u32,
            mtime: ns(st.st_mtime as i64, st.st_mtime_nsec as u64),
            ctime: ns(st.st_ctime as i64, st.st_ctime_nsec as u64),
        }
    }

    /// Whether this signature may not vouch for the bytes: the file changed
    /// after `mark`, or so close before it that a later change could leave
    /// the times as they are. File systems stamp times from a coarse clock (a few
    /// milliseconds); those with whole-second times (FAT has two) show no
    /// nanoseconds.
    #[inline]
    pub(super) fn racy(&self, mark: i128) -> bool {
        let latest = self.mtime.max(self.ctime);
        // Most signatures are far older than the widest margin: told apart
        // without working out theirs (a build looks at every one).
        if latest < mark - Self::COARSE_MARGIN {
            return false;
        }
        let coarse = self.mtime % 1_000_000_000 == 0 && self.ctime % 1_000_000_000 == 0;
        let margin = if coarse {
            Self::COARSE_MARGIN
        } else {
            50_000_000
        };
        latest >= mark - margin
    }

    /// The margin of whole-second times, the widest.
    const COARSE_MARGIN: i128 = 2_000_000_000;
}

/// The state of an entry that is one of trainc's own files: one whose
/// hash is of its whole content, not only of a foreign file's head.
pub fn owned(e: &Entry) -> Option<&FileState> {
    e.file
        .as_ref()
        .filter(|f| e.kind == Kind::File && !f.hash.starts_with("head:"))
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
    let present = walk(
        root,
        |path, kind, sig| {
            let file = match sig {
                Some(sig) => Some(FileState {
                    sig,
                    hash: hash(path, &root.join(path))?,
                    racy: sig.racy(mark),
                }),
                None => None,
            };
            entries.push(Entry {
                path: path.to_owned(),
                kind,
                file,
            });
            Ok(true)
        },
        |_| Ok(()),
    )?;
    Ok(present.then_some(entries))
}

/// The snapshot of `root` after `plan` was applied to it, from `before`,
/// the entries a walk saw (in walk order) just before: each file written
/// added as racy, with its content `hash` and no signature (the next check
/// hashes it anyway), each file deleted dropped, each directory made for a
/// new file added, and every other signature checked for raciness against
/// `mark`. Costs what the plan wrote, not the size of the tree, and looks
/// at no file written. Whatever else changed since the walk is found by
/// the next check, which compares every entry.
pub fn after(
    root: &Path,
    before: Vec<Entry>,
    plan: &crate::plan::Plan,
    mark: i128,
    hash: impl Fn(&crate::plan::Change) -> io::Result<String>,
) -> io::Result<Vec<Entry>> {
    use crate::plan::Op;
    // Most builds only rewrite files that were there: their entries are
    // changed where they stand, and the tree's entries are not moved.
    let at = |rel: &str| {
        before
            .binary_search_by(|e| walk_cmp(&e.path, rel))
            .ok()
            .filter(|&i| before[i].kind == Kind::File)
    };
    if before.is_empty() {
        return filled(plan, hash);
    }
    let updated: Option<Vec<(usize, &crate::plan::Change)>> = plan
        .pending()
        .map(|c| {
            (c.op == Op::Update)
                .then(|| at(&c.path))
                .flatten()
                .map(|i| (i, c))
        })
        .collect();
    if let Some(updated) = updated {
        let mut out = before;
        for e in &mut out {
            if let Some(f) = &mut e.file {
                f.racy = f.sig.racy(mark);
            }
        }
        for (i, c) in updated {
            out[i].file = written(c, &hash)?.file;
        }
        return Ok(out);
    }
    // Each entry that changes: its new state, or `None` when it is gone.
    let mut mods: Vec<(String, Option<Entry>)> = Vec::new();
    let mut made = std::collections::HashSet::new();
    for c in plan.pending() {
        if c.op == Op::Delete {
            mods.push((c.path.clone(), None));
            // A deletion removes the directories it leaves empty.
            let mut dir = c.path.as_str();
            while let Some((parent, _)) = dir.rsplit_once('/') {
                dir = parent;
                if fs::symlink_metadata(root.join(dir)).is_ok() || !made.insert(dir.to_owned()) {
                    break;
                }
                mods.push((dir.to_owned(), None));
            }
            continue;
        }
        mods.push((c.path.clone(), Some(written(c, &hash)?)));
        if c.op == Op::Create {
            let mut dir = c.path.as_str();
            while let Some((parent, _)) = dir.rsplit_once('/') {
                dir = parent;
                let known = before
                    .binary_search_by(|e| walk_cmp(&e.path, dir))
                    .is_ok_and(|i| before[i].kind == Kind::Dir);
                if known || !made.insert(dir.to_owned()) {
                    break;
                }
                mods.push((
                    dir.to_owned(),
                    Some(Entry {
                        path: dir.to_owned(),
                        kind: Kind::Dir,
                        file: None,
                    }),
                ));
            }
        }
    }
    mods.sort_by(|a, b| walk_cmp(&a.0, &b.0));
    let mut out = Vec::with_capacity(before.len() + mods.len());
    let mut mods = mods.into_iter().peekable();
    for mut e in before {
        while let Some((_, m)) = mods.next_if(|(p, _)| walk_cmp(p, &e.path).is_lt()) {
            out.extend(m);
        }
        if let Some((_, m)) = mods.next_if(|(p, _)| *p == e.path) {
            out.extend(m);
            continue;
        }
        if let Some(f) = &mut e.file {
            f.racy = f.sig.racy(mark);
        }
        out.push(e);
    }
    out.extend(mods.flat_map(|(_, m)| m));
    Ok(out)
}

/// [`after`] for a directory that held nothing: each entry made once, in
/// place, and put in walk order (a cold build of 5,000 jobs has 100,000).
fn filled(
    plan: &crate::plan::Plan,
    hash: impl Fn(&crate::plan::Change) -> io::Result<String>,
) -> io::Result<Vec<Entry>> {
    use crate::plan::Op;
    let mut out = Vec::with_capacity(plan.changes.len() * 11 / 10);
    let mut dirs = std::collections::HashSet::new();
    for c in plan.pending().filter(|c| c.op != Op::Delete) {
        let mut at = 0;
        while let Some(i) = c.path[at..].find('/') {
            let dir = &c.path[..at + i];
            if dirs.insert(dir) {
                out.push(Entry {
                    path: dir.to_owned(),
                    kind: Kind::Dir,
                    file: None,
                });
            }
            at += i + 1;
        }
        out.push(written(c, &hash)?);
    }
    out.sort_unstable_by(|a, b| walk_cmp(&a.path, &b.path));
    Ok(out)
}

/// The entry of a file the build wrote: racy, its signature not looked at.
fn written(
    c: &crate::plan::Change,
    hash: impl Fn(&crate::plan::Change) -> io::Result<String>,
) -> io::Result<Entry> {
    Ok(Entry {
        path: c.path.clone(),
        kind: Kind::File,
        file: Some(FileState {
            sig: Sig::UNSEEN,
            hash: hash(c)?,
            racy: true,
        }),
    })
}

/// How a directory compares with its snapshot.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Same entries, same bytes.
    Same,
    /// Same entries and bytes, but signatures that needed hashing: the
    /// snapshot to record instead, so the next check is fast, and the
    /// indexes of the entries that changed, in order.
    Refreshed(Option<Vec<Entry>>, Vec<usize>),
    /// The first difference found, for `build --verbose`.
    Differs(String),
}

/// Compares `root` with `recorded`, hashing only the files whose signature
/// moved or was racy.
pub fn verify(root: &Path, recorded: Option<&[Entry]>, mark: i128) -> Verdict {
    verify_listing(root, recorded, mark, &mut Vec::new())
}

/// [`verify`], adding to `skipped` the directories the walk does not enter
/// (in walk order), for the unlisted-files check, which looks into them.
pub fn verify_listing(
    root: &Path,
    recorded: Option<&[Entry]>,
    mark: i128,
    skipped: &mut Vec<String>,
) -> Verdict {
    let expected = recorded.unwrap_or_default();
    let mut check = Check::new(root, expected, 0);
    let present = walk_with(root, &mut check, check_dir);
    let Check {
        next, moved, why, ..
    } = check;
    skipped.extend(check.skipped);
    match present {
        Ok(present) if present != recorded.is_some() => {
            Verdict::Differs(if present { "it appeared" } else { "it is gone" }.to_owned())
        }
        Ok(present) => match expected.get(next) {
            Some(gone) => Verdict::Differs(format!("{} is gone", gone.path)),
            None if moved.is_empty() => Verdict::Same,
            None => {
                let mut fresh = expected.to_vec();
                for &(i, sig) in &moved {
                    if let Some(state) = fresh.get_mut(i).and_then(|e| e.file.as_mut()) {
                        state.sig = sig;
                        state.racy = sig.racy(mark);
                    }
                }
                let moved = moved.into_iter().map(|(i, _)| i).collect();
                Verdict::Refreshed(present.then_some(fresh), moved)
            }
        },
        Err(e) if why.is_empty() => Verdict::Differs(e.to_string()),
        Err(_) => Verdict::Differs(why),
    }
}

/// A walk compared with a snapshot's entries, from entry `next` on.
struct Check<'a> {
    root: &'a Path,
    expected: &'a [Entry],
    next: usize,
    /// The files whose bytes are as recorded under a new signature, or a
    /// racy one: their index and signature now.
    moved: Vec<(usize, Sig)>,
    /// The first difference, once the walk stopped at it.
    why: String,
    skipped: Vec<String>,
}

impl<'a> Check<'a> {
    fn new(root: &'a Path, expected: &'a [Entry], next: usize) -> Self {
        Self {
            root,
            expected,
            next,
            moved: Vec::new(),
            why: String::new(),
            skipped: Vec::new(),
        }
    }
}

impl Visitor for Check<'_> {
    fn each(&mut self, path: &str, kind: Kind, sig: Option<Sig>) -> io::Result<bool> {
        let i = self.next;
        let Some(want) = self.expected.get(i) else {
            self.why = format!("{path} is new");
            return Ok(false);
        };
        self.next += 1;
        if want.path != path || want.kind != kind {
            self.why = if want.path == path {
                format!("{path} changed type")
            } else if fs::symlink_metadata(self.root.join(&want.path)).is_err() {
                format!("{} is gone", want.path)
            } else {
                format!("{path} is new")
            };
            return Ok(false);
        }
        if let (Some(state), Some(sig)) = (&want.file, sig)
            && (state.racy || sig != state.sig)
        {
            // Equal bytes under a new signature (a `touch`, a checkout)
            // are still current.
            if file_hash(path, &self.root.join(path))?.0 != state.hash {
                self.why = format!("{path} was edited");
                return Ok(false);
            }
            self.moved.push((i, sig));
        }
        Ok(true)
    }

    fn skipped(&mut self, rel: &str) -> io::Result<()> {
        self.skipped.push(rel.to_owned());
        Ok(())
    }
}

/// Directories with at least this many entries are compared on every
/// core, a share of their entries each: an output directory holds one
/// directory per job, and comparing 19,000 entries one `fstatat` at a time
/// was half of a no-op build.
const FAN_OUT: usize = 64;

/// [`walk_dir`] for a [`Check`]: a large directory's entries, each with
/// what it holds, are compared in parallel, each against its share of the
/// snapshot, and the results joined in walk order, so that the verdict and
/// the refreshed entries are the walk's (and, but for a record out of walk
/// order, the first difference named).
fn check_dir(fd: &OwnedFd, rel: &mut String, check: &mut Check) -> io::Result<bool> {
    let l = list(fd)?;
    if l.found.len() < FAN_OUT {
        for i in 0..l.found.len() {
            if !visit(fd, &l, i, rel, check, check_dir)? {
                return Ok(false);
            }
        }
        return Ok(true);
    }
    let rest = &check.expected[check.next.min(check.expected.len())..];
    let base = check.expected.len() - rest.len();
    // Where each entry's share starts: at its own path. The last ends
    // where the directory's entries do.
    let mut starts = Vec::with_capacity(l.found.len() + 1);
    let mut path = rel.clone();
    for &(start, n, ..) in &l.found {
        path.truncate(rel.len());
        path.push_str(&String::from_utf8_lossy(&l.names[start..start + n]));
        starts.push(base + rest.partition_point(|e| walk_cmp(&e.path, &path).is_lt()));
    }
    starts.push(base + rest.partition_point(|e| e.path.starts_with(rel.as_str())));
    starts[0] = check.next;
    // Shares in order, whatever a damaged record says.
    for i in 1..starts.len() {
        starts[i] = starts[i].max(starts[i - 1]).min(check.expected.len());
    }
    let (root, expected) = (check.root, check.expected);
    let items: Vec<usize> = (0..l.found.len()).collect();
    let results = crate::par::map(&items, |&i| {
        let mut share = Check::new(root, &expected[..starts[i + 1]], starts[i]);
        let mut rel = rel.clone();
        let done = visit(fd, &l, i, &mut rel, &mut share, walk_dir::<Check>);
        (done, share)
    });
    for (i, (done, share)) in results.into_iter().enumerate() {
        check.moved.extend(share.moved);
        check.skipped.extend(share.skipped);
        check.next = share.next;
        if !done? {
            check.why = share.why;
            return Ok(false);
        }
        if share.next < starts[i + 1] {
            // What the walk would have met next, in place of the entry.
            let gone = &expected[share.next].path;
            check.why = if fs::symlink_metadata(root.join(gone)).is_err() {
                format!("{gone} is gone")
            } else {
                format!("{gone} was not met")
            };
            return Ok(false);
        }
    }
    Ok(true)
}

/// Calls `each(relative path, kind, lstat signature of a file)` for every
/// entry below `root` that a plan walks ([`crate::plan::walk`]: no symlink
/// followed but the root, no directory entered but a
/// [`crate::plan::layout_dir`]), in the same order (each directory's entries
/// sorted by name, a directory before what it holds), until it returns
/// `false`; and `skipped(relative path)` for each directory it does not
/// enter. Returns whether `root` exists; an error when `root` is not a
/// directory, a name is not UTF-8, or `each` stopped.
///
/// The same walk as [`crate::plan::walk`], done with one `getdents` per
/// directory and one `fstatat` per file relative to its directory: the
/// walk every cached build pays, and most of a no-op's time.
pub(super) fn walk(
    root: &Path,
    each: impl FnMut(&str, Kind, Option<Sig>) -> io::Result<bool>,
    skipped: impl FnMut(&str) -> io::Result<()>,
) -> io::Result<bool> {
    walk_with(root, &mut Fns(each, skipped), walk_dir)
}

/// What a walk tells of each entry.
trait Visitor {
    /// An entry (a file with its signature); `false` stops the walk.
    fn each(&mut self, rel: &str, kind: Kind, sig: Option<Sig>) -> io::Result<bool>;
    /// A directory the walk does not enter.
    fn skipped(&mut self, rel: &str) -> io::Result<()>;
}

/// The two callbacks of [`walk`].
struct Fns<E, S>(E, S);

impl<E, S> Visitor for Fns<E, S>
where
    E: FnMut(&str, Kind, Option<Sig>) -> io::Result<bool>,
    S: FnMut(&str) -> io::Result<()>,
{
    fn each(&mut self, rel: &str, kind: Kind, sig: Option<Sig>) -> io::Result<bool> {
        (self.0)(rel, kind, sig)
    }
    fn skipped(&mut self, rel: &str) -> io::Result<()> {
        (self.1)(rel)
    }
}

/// How a walk goes through a directory: the directory open as `fd`, at
/// `rel` (empty or ending in `/`); `false` when the visitor stopped.
type Descend<V> = fn(&OwnedFd, &mut String, &mut V) -> io::Result<bool>;

/// [`walk`] with a visitor, going through each directory by `descend`.
fn walk_with<V: Visitor>(root: &Path, v: &mut V, descend: Descend<V>) -> io::Result<bool> {
    use rustix::fs::{CWD, Mode, OFlags, openat};
    // The root may be a symlink, as a build writes through it; nothing
    // below it is followed.
    match fs::metadata(root) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
        Ok(m) if !m.is_dir() => return Err(io::Error::other("not a directory")),
        Ok(_) => {}
    }
    let fd = openat(
        CWD,
        root,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let mut rel = String::new();
    if !descend(&fd, &mut rel, v)? {
        return Err(io::Error::other("stopped"));
    }
    Ok(true)
}

/// The entries of the directory open as `fd` (at `rel`, empty or ending in
/// `/`), then each subdirectory's; `false` when the visitor stopped.
fn walk_dir<V: Visitor>(fd: &OwnedFd, rel: &mut String, v: &mut V) -> io::Result<bool> {
    let l = list(fd)?;
    for i in 0..l.found.len() {
        if !visit(fd, &l, i, rel, v, walk_dir)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// A directory's entries sorted by name: their names, each followed by
/// its NUL, in one buffer (no allocation per entry), and each entry's
/// place in it, kind and, for a file, `lstat` signature.
struct Listing {
    names: Vec<u8>,
    found: Vec<(usize, usize, Kind, Option<Sig>)>,
}

fn list(fd: &OwnedFd) -> io::Result<Listing> {
    use rustix::fs::{AtFlags, FileType, statat};
    let mut names = Vec::new();
    let mut found: Vec<(usize, usize, FileType)> = Vec::new();
    each_name(fd, |name, t| {
        if name == b"." || name == b".." {
            return;
        }
        let start = names.len();
        names.extend_from_slice(name);
        names.push(0);
        found.push((start, name.len(), t));
    })?;
    let name = |e: &(usize, usize, FileType)| &names[e.0..e.0 + e.1];
    // tmpfs lists a directory about newest first, the reverse of the order
    // a build wrote it in: reversed, it is nearly sorted, where sorting it
    // as it comes (insertion sort, for a job's 20 files) took a twentieth of
    // a no-op build's instructions.
    if let (Some(first), Some(last)) = (found.first(), found.last())
        && name(first) > name(last)
    {
        found.reverse();
    }
    found.sort_unstable_by(|a, b| name(a).cmp(name(b)));
    let mut out = Vec::with_capacity(found.len());
    for (start, n, mut t) in found {
        let cname = std::ffi::CStr::from_bytes_with_nul(&names[start..=start + n])
            .map_err(io::Error::other)?;
        let mut sig = None;
        if t == FileType::Unknown || t == FileType::RegularFile {
            let st = statat(fd, cname, AtFlags::SYMLINK_NOFOLLOW)?;
            t = FileType::from_raw_mode(st.st_mode);
            sig = (t == FileType::RegularFile).then(|| Sig::of_stat(&st));
        }
        let kind = match t {
            FileType::RegularFile => Kind::File,
            FileType::Directory => Kind::Dir,
            FileType::Symlink => Kind::Symlink,
            _ => Kind::Other,
        };
        out.push((start, n, kind, sig));
    }
    Ok(Listing { names, found: out })
}

/// Calls `each(name, type)` for every entry of the directory open as `fd`,
/// `.` and `..` included, reading from `fd` itself. On Linux the entries are
/// read into a buffer on the stack: `Dir` opens the directory again and
/// allocates each name, which was a tenth of a no-op build's instructions
/// (one listing per job directory).
#[cfg(target_os = "linux")]
fn each_name(fd: &OwnedFd, mut each: impl FnMut(&[u8], rustix::fs::FileType)) -> io::Result<()> {
    use std::mem::MaybeUninit;
    // Enough for dozens of entries a call; any one entry fits (a name is
    // at most 255 bytes).
    let mut buf = [MaybeUninit::<u8>::uninit(); 8192];
    let mut dir = rustix::fs::RawDir::new(fd, &mut buf);
    while let Some(entry) = dir.next() {
        let entry = entry?;
        each(entry.file_name().to_bytes(), entry.file_type());
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn each_name(fd: &OwnedFd, mut each: impl FnMut(&[u8], rustix::fs::FileType)) -> io::Result<()> {
    let mut dir = rustix::fs::Dir::read_from(fd)?;
    while let Some(entry) = dir.read() {
        let entry = entry?;
        each(entry.file_name().to_bytes(), entry.file_type());
    }
    Ok(())
}

/// Entry `i` of `l`, the listing of the directory open as `fd` (at `rel`),
/// and what it holds, gone through by `descend`; `false` when the visitor
/// stopped.
fn visit<V: Visitor>(
    fd: &OwnedFd,
    l: &Listing,
    i: usize,
    rel: &mut String,
    v: &mut V,
    descend: Descend<V>,
) -> io::Result<bool> {
    use rustix::fs::{Mode, OFlags, openat};
    let (start, n, kind, sig) = l.found[i];
    let name = std::str::from_utf8(&l.names[start..start + n])
        .map_err(|_| io::Error::other("a path that is not UTF-8"))?;
    let len = rel.len();
    rel.push_str(name);
    if kind == Kind::Dir && !crate::plan::layout_dir(name) {
        v.skipped(rel)?;
    } else {
        if !v.each(rel, kind, sig)? {
            return Ok(false);
        }
        if kind == Kind::Dir {
            let cname = std::ffi::CStr::from_bytes_with_nul(&l.names[start..=start + n])
                .map_err(io::Error::other)?;
            let sub = openat(
                fd,
                cname,
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )?;
            rel.push('/');
            if !descend(&sub, rel, v)? {
                return Ok(false);
            }
        }
    }
    rel.truncate(len);
    Ok(true)
}

/// The order of [`walk`] on relative paths: by name, component by
/// component, so `a/b` comes before `a-c` (a `/` sorts before any byte of
/// a name).
pub fn walk_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    // Walks mostly compare a path with itself.
    if a == b {
        return std::cmp::Ordering::Equal;
    }
    let key = |c: u8| if c == b'/' { 0 } else { c };
    a.bytes().map(key).cmp(b.bytes().map(key))
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
            Verdict::Refreshed(..)
        ));

        fs::write(root.join("a/x.yaml"), "x: 2\n").unwrap();
        assert_eq!(
            verify(&root, Some(&s), mark()),
            Verdict::Differs("a/x.yaml was edited".into())
        );
        fs::write(root.join("a/x.yaml"), "x: 1\n").unwrap();
        assert!(
            matches!(verify(&root, Some(&s), mark()), Verdict::Refreshed(..)),
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

    /// The snapshot of a directory that held nothing, taken from the plan
    /// that filled it without looking at a file: the same tree verifies,
    /// hashed once (nothing written is vouched for by a signature never
    /// seen), and whatever appeared beside the plan's files, or changed in
    /// them, since is found.
    #[test]
    fn a_snapshot_from_the_plan_alone_is_checked_by_the_next_walk() {
        use crate::plan::{Change, Op, Plan};
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("out");
        let new = |path: &str, name: &str| {
            Change {
            path: path.into(),
            op: Op::Create,
            old: None,
            new: format!(
                "# Code generated by trainc. DO NOT EDIT.\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}}}\n"
            )
            .into_bytes(),
        }
        };
        let plan = Plan {
            root: root.clone(),
            changes: vec![
                new("a/b/configmap-x.yaml", "x"),
                new("configmap-k.yaml", "k"),
            ],
            kept: 0,
            fresh: true,
        };
        for c in &plan.changes {
            fs::create_dir_all(root.join(&c.path).parent().unwrap()).unwrap();
            fs::write(root.join(&c.path), &c.new).unwrap();
        }
        let m = mark();
        let s = after(&root, Vec::new(), &plan, m, |c| Ok(content_hash(&c.new))).unwrap();
        let paths: Vec<&str> = s.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            ["a", "a/b", "a/b/configmap-x.yaml", "configmap-k.yaml"]
        );
        assert!(
            s.iter()
                .filter_map(|e| e.file.as_ref())
                .all(|f| f.racy && f.sig == Sig::UNSEEN)
        );
        let v = verify(&root, Some(&s), m);
        let Verdict::Refreshed(Some(seen), _) = v else {
            panic!("not hashed and refreshed: {v:?}");
        };
        assert!(
            seen.iter()
                .filter_map(|e| e.file.as_ref())
                .all(|f| f.sig != Sig::UNSEEN)
        );

        fs::write(root.join("a/stray.yaml"), "").unwrap();
        assert_eq!(
            verify(&root, Some(&s), m),
            Verdict::Differs("a/stray.yaml is new".into())
        );
        fs::remove_file(root.join("a/stray.yaml")).unwrap();
        fs::write(root.join("configmap-k.yaml"), new("", "k2").new).unwrap();
        assert_eq!(
            verify(&root, Some(&s), m),
            Verdict::Differs("configmap-k.yaml was edited".into())
        );
    }

    /// A directory of many is compared on every core, with the verdict of
    /// the walk one entry at a time: the same difference named first, the
    /// same entries refreshed, the same directories skipped.
    #[test]
    fn a_large_directory_is_compared_in_parallel_as_one_walk_would() {
        fn one_walk(root: &Path, recorded: Option<&[Entry]>, mark: i128) -> (Verdict, Vec<String>) {
            let expected = recorded.unwrap_or_default();
            let mut check = Check::new(root, expected, 0);
            let present = walk_with(root, &mut check, walk_dir::<Check>);
            let verdict = match present {
                Ok(p) if p != recorded.is_some() => Verdict::Differs("presence".into()),
                Ok(p) => match expected.get(check.next) {
                    Some(gone) => Verdict::Differs(format!("{} is gone", gone.path)),
                    None if check.moved.is_empty() => Verdict::Same,
                    None => {
                        let mut fresh = expected.to_vec();
                        for &(i, sig) in &check.moved {
                            let f = fresh[i].file.as_mut().unwrap();
                            f.sig = sig;
                            f.racy = sig.racy(mark);
                        }
                        let moved = check.moved.iter().map(|m| m.0).collect();
                        Verdict::Refreshed(p.then_some(fresh), moved)
                    }
                },
                Err(_) => Verdict::Differs(check.why.clone()),
            };
            (verdict, check.skipped)
        }
        let both = |root: &Path, s: &[Entry]| {
            let m = mark();
            let mut skipped = Vec::new();
            let par = verify_listing(root, Some(s), m, &mut skipped);
            let one = one_walk(root, Some(s), m);
            assert_eq!((&par, &skipped), (&one.0, &one.1));
            par
        };
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("out");
        let jobs = root.join("ml");
        for i in 0..(2 * FAN_OUT) {
            let job = jobs.join(format!("job-{i:03}"));
            fs::create_dir_all(&job).unwrap();
            for f in ["a.yaml", "b.yaml", "kustomization.yaml"] {
                fs::write(job.join(f), format!("{i} {f}\n")).unwrap();
            }
        }
        fs::create_dir_all(jobs.join(".hidden/deep")).unwrap();
        fs::write(root.join("kustomization.yaml"), "k\n").unwrap();
        fs::write(root.join("z.yaml"), "z\n").unwrap();
        let s = snap(&root).unwrap();
        // Snapshot just after the writes: every file hashed by the next
        // check, then vouched for by its signature.
        let racy: Vec<usize> = (0..s.len())
            .filter(|&i| s[i].file.as_ref().is_some_and(|f| f.racy))
            .collect();
        assert!(!racy.is_empty());
        std::thread::sleep(std::time::Duration::from_millis(120));
        let Verdict::Refreshed(Some(s), moved) = both(&root, &s) else {
            panic!("racy files are refreshed")
        };
        assert_eq!(moved, racy);
        assert_eq!(both(&root, &s), Verdict::Same);

        let touch = |p: &Path| {
            let f = fs::File::options().append(true).open(p).unwrap();
            f.set_modified(SystemTime::now()).unwrap();
        };
        touch(&jobs.join("job-007/b.yaml"));
        touch(&jobs.join("job-100/a.yaml"));
        assert!(matches!(both(&root, &s), Verdict::Refreshed(_, m) if m.len() == 2));
        fs::write(jobs.join("job-050/a.yaml"), "edited\n").unwrap();
        fs::write(jobs.join("job-090/a.yaml"), "edited\n").unwrap();
        assert_eq!(
            both(&root, &s),
            Verdict::Differs("ml/job-050/a.yaml was edited".into())
        );
        fs::write(jobs.join("job-050/a.yaml"), "50 a.yaml\n").unwrap();
        fs::write(jobs.join("job-090/a.yaml"), "90 a.yaml\n").unwrap();
        // What a change makes the check say; the change; its undoing.
        type Change<'a> = (&'a str, &'a dyn Fn(), &'a dyn Fn());
        let changes: [Change; 6] = [
            (
                "ml/job-040/b.yaml is gone",
                &|| fs::remove_file(jobs.join("job-040/b.yaml")).unwrap(),
                &|| fs::write(jobs.join("job-040/b.yaml"), "40 b.yaml\n").unwrap(),
            ),
            (
                "ml/job-031/c.yaml is new",
                &|| fs::write(jobs.join("job-031/c.yaml"), "").unwrap(),
                &|| fs::remove_file(jobs.join("job-031/c.yaml")).unwrap(),
            ),
            (
                "ml/job-127/kustomization.yaml is gone",
                &|| fs::remove_file(jobs.join("job-127/kustomization.yaml")).unwrap(),
                &|| {
                    fs::write(
                        jobs.join("job-127/kustomization.yaml"),
                        "127 kustomization.yaml\n",
                    )
                    .unwrap()
                },
            ),
            (
                "ml/job-000 is gone",
                &|| fs::rename(jobs.join("job-000"), dir.path().join("away")).unwrap(),
                &|| fs::rename(dir.path().join("away"), jobs.join("job-000")).unwrap(),
            ),
            (
                "ml/job-064a is new",
                &|| fs::create_dir(jobs.join("job-064a")).unwrap(),
                &|| fs::remove_dir(jobs.join("job-064a")).unwrap(),
            ),
            (
                "ml/job-070/b.yaml changed type",
                &|| {
                    fs::remove_file(jobs.join("job-070/b.yaml")).unwrap();
                    std::os::unix::fs::symlink("a.yaml", jobs.join("job-070/b.yaml")).unwrap();
                },
                &|| {
                    fs::remove_file(jobs.join("job-070/b.yaml")).unwrap();
                    fs::write(jobs.join("job-070/b.yaml"), "70 b.yaml\n").unwrap();
                },
            ),
        ];
        for (why, change, undo) in changes {
            change();
            assert_eq!(both(&root, &s), Verdict::Differs(why.into()));
            undo();
        }
        // A record whose entries are not in walk order is never believed.
        let mut shuffled = s.clone();
        shuffled.swap(10, 200);
        assert!(matches!(
            verify(&root, Some(&shuffled), mark()),
            Verdict::Differs(_)
        ));
        let mut short = s.clone();
        short.remove(150);
        assert!(matches!(
            verify(&root, Some(&short), mark()),
            Verdict::Differs(_)
        ));
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

    /// The order of the walk, on paths: a directory's entries right after it.
    #[test]
    fn paths_compare_in_walk_order() {
        let mut paths = vec!["a-c", "a/b", "a", "a/b/c", "b", "a.yaml", "A"];
        paths.sort_by(|a, b| walk_cmp(a, b));
        assert_eq!(paths, ["A", "a", "a/b", "a/b/c", "a-c", "a.yaml", "b"]);
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for d in ["a/b", "a-c"] {
            fs::create_dir_all(root.join(d)).unwrap();
        }
        fs::write(root.join("a.yaml"), "").unwrap();
        fs::write(root.join("a/b/c"), "").unwrap();
        let mut seen = Vec::new();
        walk(
            root,
            |rel, _, _| {
                seen.push(rel.to_owned());
                Ok(true)
            },
            |_| Ok(()),
        )
        .unwrap();
        assert!(seen.is_sorted_by(|a, b| walk_cmp(a, b).is_lt()), "{seen:?}");
        assert_eq!(seen, ["a", "a/b", "a/b/c", "a-c", "a.yaml"]);
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
