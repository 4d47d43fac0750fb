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
    pub(crate) fn racy(&self, mark: i128) -> bool {
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

/// The hash of what a plan looks at in the file at `rel` (`path` on disk):
/// all of a file trainc owns (its [`content_hash`](crate::plan::content_hash), as of the bytes a build
/// writes), only the first bytes of any other, which is all a plan reads of
/// it; and whether trainc owns it. A foreign file of any size costs one
/// bounded read.
pub fn file_hash(rel: &str, path: &Path) -> io::Result<(String, bool)> {
    use crate::plan::{Found, content_hash, read_owned};
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

/// Calls `each(relative path, kind, lstat signature of a file)` for every
/// entry below `root` that a plan looks at (no symlink followed but the
/// root, no directory entered but a [`crate::plan::layout_dir`], no name
/// that is not UTF-8), each directory's entries sorted by name and a
/// directory before what it holds, until it returns `false`; and
/// `skipped(relative path)` for each directory it does not enter. Returns
/// whether `root` exists; an error when `root` is not a directory, or
/// `each` stopped.
///
/// One `getdents` per directory and one `fstatat` per file relative to its
/// directory: the walk every build plans with ([`crate::plan::merge`]),
/// and most of a no-op's time.
pub fn walk(
    root: &Path,
    mut each: impl FnMut(&str, Kind, Option<Sig>) -> io::Result<bool>,
    mut skipped: impl FnMut(&str) -> io::Result<()>,
) -> io::Result<bool> {
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
    if !walk_dir(
        &fd,
        &mut rel,
        &mut Visitor {
            each: &mut each,
            skipped: &mut skipped,
        },
    )? {
        return Err(io::Error::other("stopped"));
    }
    Ok(true)
}

/// What a walk tells of each entry: `each` an entry (a file with its
/// signature; `false` stops the walk), `skipped` a directory the walk does
/// not enter.
struct Visitor<'a> {
    each: &'a mut Each<'a>,
    skipped: &'a mut dyn FnMut(&str) -> io::Result<()>,
}

/// The callback [`walk`] calls for each entry.
type Each<'a> = dyn FnMut(&str, Kind, Option<Sig>) -> io::Result<bool> + 'a;

/// The entries of the directory open as `fd` (at `rel`, empty or ending in
/// `/`), each followed by what it holds; `false` when the visitor stopped.
fn walk_dir(fd: &OwnedFd, rel: &mut String, v: &mut Visitor) -> io::Result<bool> {
    let l = list(fd)?;
    for i in 0..l.found.len() {
        if !visit(fd, &l, i, rel, v)? {
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
/// and what it holds; `false` when the visitor stopped.
fn visit(
    fd: &OwnedFd,
    l: &Listing,
    i: usize,
    rel: &mut String,
    v: &mut Visitor,
) -> io::Result<bool> {
    use rustix::fs::{Mode, OFlags, openat};
    let (start, n, kind, sig) = l.found[i];
    // A name that is not UTF-8 is none trainc gives: nothing to prune,
    // compare or list.
    let Ok(name) = std::str::from_utf8(&l.names[start..start + n]) else {
        return Ok(true);
    };
    let len = rel.len();
    rel.push_str(name);
    if kind == Kind::Dir && !crate::plan::layout_dir(name) {
        (v.skipped)(rel)?;
    } else {
        if !(v.each)(rel, kind, sig)? {
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
            if !walk_dir(&sub, rel, v)? {
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
