//! The files of a build context, as `docker build` would send them, and the
//! hash that makes them an image tag.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use sha2::{Digest as _, Sha256};

use super::dockerignore::DockerIgnore;

/// Hashes the rendered Dockerfile and every file of `context` that the
/// context's `.dockerignore` keeps: relative path, executable bit and bytes,
/// in sorted path order. No mtimes, owners or absolute paths, so the same
/// inputs give the same tag on any machine.
///
/// In the same pass, and from the same bytes, it takes the context's
/// [`ContextPrint`] for the build cache. `probes` are the paths validation
/// checked exist (entry point, requirements): they must still be files.
/// The walk stays inside `top`, the repository (a symlink out of it is
/// refused), and within [`MAX_CONTEXT_BYTES`] and [`MAX_CONTEXT_ENTRIES`].
pub fn hash(
    context: &Path,
    dockerfile: &[u8],
    probes: &[String],
    generated: &[&Path],
    top: &Path,
) -> Result<(String, ContextPrint), String> {
    let mut reach = Reach::default();
    let (tag, digest) = scan(
        context,
        Some(dockerfile),
        probes,
        generated,
        top,
        &mut reach,
    )?;
    let print = ContextPrint {
        dir: context.to_path_buf(),
        probes: probes.to_vec(),
        digest,
        reach,
    };
    Ok((tag.unwrap_or_default(), print))
}

/// What a build context contributed to a build, for the build cache
/// ([`crate::cache`]): the bytes behind the tag, the `.dockerignore`, and the
/// paths validation asked about. Equal prints mean an equal tag and equal
/// validation results; files the context ignores are not part of it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ContextPrint {
    pub dir: PathBuf,
    pub probes: Vec<String>,
    pub digest: String,
    /// Where the walk went, for [`ContextPrint::reaches`]; not recorded.
    #[serde(skip)]
    pub reach: Reach,
}

/// The directories a walk of a context entered, by device and inode (a
/// bind mount is another name for the same directory), and the symlinks
/// it followed, with their paths relative to the context.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Reach {
    dirs: Vec<((u64, u64), String)>,
    links: Vec<(String, PathBuf)>,
}

impl Reach {
    fn dir(&mut self, path: &Path, rel: String) {
        use std::os::unix::fs::MetadataExt as _;
        if let Ok(m) = fs::metadata(path) {
            self.dirs.push(((m.dev(), m.ino()), rel));
        }
    }
}

impl ContextPrint {
    /// Whether a build of this context would read anything inside the
    /// directory `path` (a real path): the walk entered it or a directory
    /// above it (by any name: a symlink, a bind mount) and the
    /// `.dockerignore` does not leave it out entirely, or a symlink leads
    /// into it. In doubt, yes.
    pub fn reaches(&self, path: &Path) -> bool {
        use std::os::unix::fs::MetadataExt as _;
        let ignore = match read_ignore(&self.dir) {
            Ok(Some(bytes)) => String::from_utf8(bytes)
                .ok()
                .and_then(|text| DockerIgnore::parse(&text).ok()),
            Ok(None) => DockerIgnore::parse("").ok(),
            Err(_) => None,
        };
        let Some(ignore) = ignore else {
            return true;
        };
        let left_out = |rel: &str| !rel.is_empty() && ignore.excludes_all_below(rel);
        // The nearest directory at or above `path` that the walk entered.
        let mut at = path;
        let mut below: Vec<String> = Vec::new();
        loop {
            if let Ok(m) = fs::metadata(at)
                && let Some((_, rel)) = self
                    .reach
                    .dirs
                    .iter()
                    .find(|(id, _)| *id == (m.dev(), m.ino()))
            {
                let rel = std::iter::once(rel.clone())
                    .chain(below.into_iter().rev())
                    .filter(|s| !s.is_empty())
                    .collect::<Vec<_>>()
                    .join("/");
                return !left_out(&rel);
            }
            match (at.parent(), at.file_name()) {
                (Some(parent), Some(name)) => {
                    below.push(name.to_string_lossy().into_owned());
                    at = parent;
                }
                _ => break,
            }
        }
        // A symlink whose target lies inside.
        self.reach
            .links
            .iter()
            .any(|(rel, target)| target.starts_with(path) && !left_out(rel))
    }

    /// Whether the context is as this print describes it now.
    pub fn holds(&self, generated: &[&Path], top: &Path) -> bool {
        scan(
            &self.dir,
            None,
            &self.probes,
            generated,
            top,
            &mut Reach::default(),
        )
        .is_ok_and(|(_, d)| d == self.digest)
    }
}

/// The tag hash (when given the Dockerfile) and the print digest, in one
/// walk.
fn scan(
    context: &Path,
    dockerfile: Option<&[u8]>,
    probes: &[String],
    generated: &[&Path],
    top: &Path,
    reach: &mut Reach,
) -> Result<(Option<String>, String), String> {
    let mut tag = dockerfile.map(|d| {
        let mut h = Sha256::new();
        field(&mut h, b"Dockerfile");
        field(&mut h, d);
        h
    });
    let mut print = Sha256::new();
    // Read once: the rules applied are the bytes recorded.
    let ignore = match read_ignore(context)? {
        Some(bytes) => {
            field(&mut print, &bytes);
            let text =
                String::from_utf8(bytes).map_err(|_| ".dockerignore is not UTF-8".to_owned())?;
            DockerIgnore::parse(&text)
                .map_err(|(line, e)| format!(".dockerignore line {line}: {e}"))?
        }
        None => {
            field(&mut print, b"-");
            DockerIgnore::parse("").map_err(|(_, e)| e)?
        }
    };
    let mut count = 0usize;
    let mut left = MAX_CONTEXT_BYTES;
    visit(context, &ignore, generated, top, reach, |rel, path| {
        let bytes = read_within(path, rel, &mut left)?;
        let x: &[u8] = if executable(path) { b"x" } else { b"-" };
        for h in tag.iter_mut().chain([&mut print]) {
            field(h, rel.as_bytes());
            field(h, x);
            field(h, &bytes);
        }
        count += 1;
        Ok(())
    })?;
    for h in tag.iter_mut().chain([&mut print]) {
        field(h, count.to_string().as_bytes());
    }
    for p in probes {
        if !context.join(p).is_file() {
            return Err(format!("`{p}` is no longer a file in the build context"));
        }
        field(&mut print, p.as_bytes());
    }
    Ok((
        tag.map(|h| hex::encode(h.finalize())),
        hex::encode(print.finalize()),
    ))
}

/// Calls `each(relative path, path)` for every file of `context` that the
/// `.dockerignore` keeps, in sorted path order, and notes in `reach` the
/// directories it enters and the symlinks it follows. Directories it leaves out
/// entirely (`.git`, data) are not walked. A context must leave out the
/// `generated` directories and `.git`: they change whenever the tag does, or
/// with every commit, and the tag would never settle.
fn visit(
    context: &Path,
    ignore: &DockerIgnore,
    generated: &[&Path],
    top: &Path,
    reach: &mut Reach,
    mut each: impl FnMut(&str, &Path) -> Result<(), String>,
) -> Result<(), String> {
    let generated: Vec<PathBuf> = generated
        .iter()
        .filter_map(|g| g.canonicalize().ok())
        .collect();
    let context_real = context
        .canonicalize()
        .unwrap_or_else(|_| context.to_path_buf());
    let rel_of = |path: &Path| -> Result<String, String> {
        Ok(path
            .strip_prefix(context)
            .map_err(|e| e.to_string())?
            .components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/"))
    };
    let top = top.canonicalize().unwrap_or_else(|_| top.to_path_buf());
    if !context_real.starts_with(&top) {
        return Err(format!(
            "the build context resolves to `{}`, outside the repository",
            context_real.display()
        ));
    }
    reach.dir(context, String::new());
    let mut unsettled: Vec<String> = Vec::new();
    let mut entries = 0usize;
    // Symlinks are visited as the file they point to, as the builder copies it.
    let walker = walkdir::WalkDir::new(context)
        .follow_links(true)
        .sort_by_file_name()
        .min_depth(1)
        .into_iter()
        .filter_entry(|e| {
            !e.file_type().is_dir()
                || rel_of(e.path()).map_or(true, |rel| !ignore.excludes_all_below(&rel))
        });
    for entry in walker {
        let entry = entry.map_err(|e| format!("cannot walk the build context: {e}"))?;
        entries += 1;
        if entries > MAX_CONTEXT_ENTRIES {
            return Err(format!(
                "the build context holds more than {MAX_CONTEXT_ENTRIES} files and directories that its .dockerignore does not leave out entirely"
            ));
        }
        if entry.path_is_symlink()
            && let Ok(target) = entry.path().canonicalize()
        {
            let rel = rel_of(entry.path())?;
            // Checked before the walk enters it or reads it: a link to
            // `/usr/lib` or `~/.docker` is no part of the repository.
            if !target.starts_with(&top) && !ignore.excludes_all_below(&rel) {
                return Err(format!(
                    "`{rel}` in the build context links to `{}`, outside the repository",
                    target.display()
                ));
            }
            reach.links.push((rel, target));
        }
        if entry.file_type().is_dir() {
            reach.dir(entry.path(), rel_of(entry.path())?);
        }
        if !entry.file_type().is_file() {
            continue;
        }
        let rel = rel_of(entry.path())?;
        if ignore.excludes(&rel) {
            continue;
        }
        let unstable = rel == ".git"
            || rel.starts_with(".git/")
            || generated
                .iter()
                .any(|g| context_real.join(&rel).starts_with(g));
        if unstable {
            // Every one, not the first: fixing them one build at a time
            // would take as many builds as there are.
            let top = rel.split('/').next().unwrap_or(&rel).to_owned();
            if !unsettled.contains(&top) {
                unsettled.push(top);
            }
            continue;
        }
        each(&rel, entry.path())?;
    }
    match unsettled.as_slice() {
        [] => Ok(()),
        [one] => Err(format!(
            "the build context includes `{one}/`, which changes with every commit or build; add `{one}/` to the context's .dockerignore"
        )),
        [first @ .., last] => {
            let first: Vec<String> = first.iter().map(|t| format!("`{t}/`")).collect();
            Err(format!(
                "the build context includes {} and `{last}/`, which change with every commit or build; add them to the context's .dockerignore",
                first.join(", ")
            ))
        }
    }
}

/// What a build context holds that changes with every commit or build, so
/// that its image tag would never settle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unsettled {
    /// `.git` at the top of the context (the path relative to it).
    Git(String),
    /// A directory trainc writes, inside the context: its path relative to
    /// the context, and what it is ("output directory").
    Written(String, String),
    /// The context lies inside a directory trainc writes: the directory as
    /// given, and what it is.
    Within(PathBuf, String),
}

/// Every entry of `context` that would make its tag change with every
/// commit or build: `.git` at its top, each of the directories trainc
/// writes (`generated`, with what each is) that lies inside it, and the
/// directory trainc writes that holds the context itself, unless the
/// context's `.dockerignore` leaves them out. Decided by path, so an output
/// directory that does not exist yet counts too: otherwise the first build
/// would pass and every later one fail. Validation reports these, located
/// at `spec.build.context`; [`hash`] refuses the same entries (and any it
/// reaches through a symlink) as a last resort. A `.dockerignore` that
/// cannot be read or parsed is left to [`hash`], which says why.
pub fn unsettled(context: &Path, generated: &[(&Path, String)]) -> Vec<Unsettled> {
    let Ok(real) = context.canonicalize() else {
        return Vec::new();
    };
    let ignore = match read_ignore(context) {
        Ok(Some(bytes)) => match String::from_utf8(bytes)
            .ok()
            .and_then(|t| DockerIgnore::parse(&t).ok())
        {
            Some(i) => i,
            None => return Vec::new(),
        },
        Ok(None) => match DockerIgnore::parse("") {
            Ok(i) => i,
            Err(_) => return Vec::new(),
        },
        Err(_) => return Vec::new(),
    };
    let mut found = Vec::new();
    if fs::symlink_metadata(real.join(".git")).is_ok() && !left_out(&real, ".git", &ignore) {
        found.push(Unsettled::Git(".git".to_owned()));
    }
    let mut seen: Vec<PathBuf> = Vec::new();
    for (dir, what) in generated {
        let given = dir;
        let dir = resolved(dir);
        if seen.contains(&dir) {
            continue;
        }
        seen.push(dir.clone());
        if real.starts_with(&dir) {
            found.push(Unsettled::Within(given.to_path_buf(), what.clone()));
        } else if let Ok(rel) = dir.strip_prefix(&real) {
            let rel = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/");
            if !left_out(&real, &rel, &ignore) {
                found.push(Unsettled::Written(rel, what.clone()));
            }
        }
    }
    found
}

/// Whether the `.dockerignore` leaves out everything a build could find at
/// `rel`: the entry itself, or every file below it; for a directory that
/// does not exist yet, a file directly inside it.
fn left_out(context: &Path, rel: &str, ignore: &DockerIgnore) -> bool {
    if ignore.excludes_all_below(rel) {
        return true;
    }
    let path = context.join(rel);
    let future = || ignore.excludes(rel) || ignore.excludes(&format!("{rel}/file"));
    match fs::symlink_metadata(&path) {
        Err(_) => future(),
        Ok(m) if !m.is_dir() => ignore.excludes(rel),
        Ok(_) => {
            let mut files = walkdir::WalkDir::new(&path)
                .min_depth(1)
                .into_iter()
                .filter_map(Result::ok)
                .filter(|e| !e.file_type().is_dir())
                .peekable();
            // An empty directory (one a build's lock just made) holds what
            // the build will write: judged as one that does not exist yet.
            if files.peek().is_none() {
                return future();
            }
            files.all(|e| {
                e.path().strip_prefix(context).is_ok_and(|r| {
                    let r = r
                        .components()
                        .map(|c| c.as_os_str().to_string_lossy())
                        .collect::<Vec<_>>()
                        .join("/");
                    ignore.excludes(&r)
                })
            })
        }
    }
}

/// `path` with symlinks resolved as far as it exists, the rest appended:
/// an output directory need not exist yet.
fn resolved(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut at = path;
    loop {
        if let Ok(real) = at.canonicalize() {
            return rest.iter().rev().fold(real, |p, c| p.join(c));
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                at = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// The most bytes of files a build context may hash for its tag: far more
/// than training code, and about two seconds of hashing. Data belongs in a
/// volume or outside the context (`.dockerignore`), not in the image.
pub const MAX_CONTEXT_BYTES: u64 = 1024 * 1024 * 1024;

/// The most entries (files and directories) a walk of a build context
/// visits, ignored ones included unless a pattern leaves out a whole
/// directory: a bound on the time the walk takes.
pub const MAX_CONTEXT_ENTRIES: usize = 200_000;

/// The bytes of the file at `path` (`rel` in the context), if they fit in
/// what is `left` of [`MAX_CONTEXT_BYTES`]: the size is checked before the
/// file is read, and the read stops past it, so a file that grows meanwhile
/// costs no more.
fn read_within(path: &Path, rel: &str, left: &mut u64) -> Result<Vec<u8>, String> {
    use std::io::Read as _;
    let over = || {
        format!(
            "the build context holds more than {} MiB of files that its .dockerignore keeps (reached at `{rel}`)",
            MAX_CONTEXT_BYTES / (1024 * 1024)
        )
    };
    let file = fs::File::open(path).map_err(|e| format!("cannot read {rel}: {e}"))?;
    let len = file
        .metadata()
        .map_err(|e| format!("cannot read {rel}: {e}"))?
        .len();
    if len > *left {
        return Err(over());
    }
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.take(*left + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {rel}: {e}"))?;
    let read = bytes.len() as u64;
    if read > *left {
        return Err(over());
    }
    *left -= read;
    Ok(bytes)
}

/// The context's `.dockerignore`, `None` when there is none. Read as
/// definitions are ([`crate::load::open_regular`]): a FIFO by that name
/// would otherwise block the build forever, and a device never end.
fn read_ignore(context: &Path) -> Result<Option<Vec<u8>>, String> {
    let path = context.join(".dockerignore");
    match fs::metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        _ => {}
    }
    let (file, len) = crate::load::open_regular(&path, ".dockerignore").map_err(|d| d.message)?;
    let max = crate::load::MAX_FILE_BYTES;
    let bytes = crate::load::read_capped(file, len)
        .map_err(|e| format!("cannot read .dockerignore: {e}"))?;
    if bytes.len() as u64 > max {
        return Err(format!(".dockerignore is over the {max}-byte limit"));
    }
    Ok(Some(bytes))
}

/// Length-prefixed, so no two different inputs give the same byte stream.
fn field(h: &mut Sha256, bytes: &[u8]) {
    h.update((bytes.len() as u64).to_le_bytes());
    h.update(bytes);
}

#[cfg(unix)]
fn executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn executable(_: &Path) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(p: &Path, dockerfile: &[u8], generated: &[&Path]) -> Result<String, String> {
        hash(p, dockerfile, &[], generated, p).map(|(t, _)| t)
    }

    #[test]
    fn code_changes_the_hash_ignored_files_and_mtimes_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        fs::write(p.join("train.py"), "print(1)\n").unwrap();
        fs::write(p.join(".dockerignore"), "*.log\n").unwrap();
        let a = tag(p, b"FROM x", &[]).unwrap();
        fs::write(p.join("run.log"), "noise").unwrap();
        assert_eq!(tag(p, b"FROM x", &[]).unwrap(), a, "ignored file");
        fs::write(p.join("train.py"), "print(1)\n").unwrap();
        assert_eq!(tag(p, b"FROM x", &[]).unwrap(), a, "rewritten, same bytes");
        assert_ne!(tag(p, b"FROM y", &[]).unwrap(), a, "Dockerfile");
        fs::write(p.join("train.py"), "print(2)\n").unwrap();
        assert_ne!(tag(p, b"FROM x", &[]).unwrap(), a, "code");
        fs::create_dir(p.join("deploy")).unwrap();
        fs::write(p.join("deploy/x.yaml"), "x").unwrap();
        let e = tag(p, b"FROM x", &[&p.join("deploy")]).unwrap_err();
        assert!(
            e.contains("add `deploy/` to the context's .dockerignore"),
            "{e}"
        );
        fs::write(p.join(".dockerignore"), "*.log\ndeploy\n").unwrap();
        assert!(tag(p, b"FROM x", &[&p.join("deploy")]).is_ok());
    }

    /// By path, before the directories exist; each entry once; what the
    /// `.dockerignore` leaves out is fine.
    #[test]
    fn every_unsettled_entry_is_found_even_before_it_exists() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        fs::create_dir_all(p.join(".git/objects")).unwrap();
        fs::write(p.join(".git/HEAD"), "ref").unwrap();
        fs::write(p.join("train.py"), "").unwrap();
        let (deploy, build, elsewhere) = (p.join("deploy"), p.join("out/build"), p.join("../x"));
        let generated = [
            (deploy.as_path(), "output directory".to_owned()),
            (deploy.as_path(), "output directory".to_owned()),
            (build.as_path(), "build directory".to_owned()),
            (elsewhere.as_path(), "output directory".to_owned()),
        ];
        assert_eq!(
            unsettled(p, &generated),
            [
                Unsettled::Git(".git".to_owned()),
                Unsettled::Written("deploy".to_owned(), "output directory".to_owned()),
                Unsettled::Written("out/build".to_owned(), "build directory".to_owned()),
            ]
        );
        fs::write(p.join(".dockerignore"), ".git\ndeploy/\nout/build/*\n").unwrap();
        assert_eq!(unsettled(p, &generated), []);
        // A file brought back is part of the context again.
        fs::create_dir_all(&deploy).unwrap();
        fs::write(deploy.join("kustomization.yaml"), "").unwrap();
        fs::write(
            p.join(".dockerignore"),
            ".git\ndeploy/\nout\n!deploy/kustomization.yaml\n",
        )
        .unwrap();
        assert_eq!(
            unsettled(p, &generated),
            [Unsettled::Written(
                "deploy".to_owned(),
                "output directory".to_owned()
            )]
        );
        fs::create_dir_all(deploy.join("code")).unwrap();
        assert_eq!(
            unsettled(&deploy.join("code"), &generated[..1]),
            [Unsettled::Within(
                deploy.clone(),
                "output directory".to_owned()
            )]
        );
        // The image stage's last resort names every one too.
        fs::remove_file(p.join(".dockerignore")).unwrap();
        fs::create_dir_all(&build).unwrap();
        fs::write(build.join("docker-bake.hcl"), "").unwrap();
        let e = tag(p, b"FROM x", &[&deploy, &build]).unwrap_err();
        assert_eq!(
            e,
            "the build context includes `.git/`, `deploy/` and `out/`, which change with every commit or build; add them to the context's .dockerignore"
        );
    }

    #[test]
    fn the_print_follows_what_the_tag_and_validation_see() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        fs::write(p.join("train.py"), "print(1)\n").unwrap();
        fs::write(p.join(".dockerignore"), ".git\n*.log\n").unwrap();
        let probes = ["train.py".to_owned()];
        let (_, print) = hash(p, b"FROM x", &probes, &[], p).unwrap();
        assert!(print.holds(&[], p));
        // Ignored files, even many in an ignored directory: the same print.
        fs::write(p.join("run.log"), "noise").unwrap();
        fs::create_dir_all(p.join(".git/objects/ab")).unwrap();
        fs::write(p.join(".git/objects/ab/cd"), "blob").unwrap();
        assert!(print.holds(&[], p));
        fs::write(p.join("train.py"), "print(2)\n").unwrap();
        assert!(!print.holds(&[], p), "code");
        fs::write(p.join("train.py"), "print(1)\n").unwrap();
        fs::write(p.join(".dockerignore"), ".git\n*.log\n# note\n").unwrap();
        assert!(!print.holds(&[], p), ".dockerignore");
        fs::write(p.join(".dockerignore"), ".git\n*.log\n").unwrap();
        assert!(print.holds(&[], p));
        fs::remove_file(p.join("train.py")).unwrap();
        assert!(!print.holds(&[], p), "entry point gone");
        let e = hash(p, b"FROM x", &probes, &[], p).unwrap_err();
        assert!(e.contains("`train.py` is no longer a file"), "{e}");
    }

    /// A context stays inside the repository: a symlink in it that leads
    /// out is refused before it is entered, and so is the context itself
    /// reached through one; its files are hashed up to a budget, checked
    /// before a file is read.
    #[test]
    fn a_context_stays_inside_the_repository_and_its_budget() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let repo = root.join("repo");
        let ctx = repo.join("ctx");
        fs::create_dir_all(&ctx).unwrap();
        fs::create_dir_all(root.join("secrets")).unwrap();
        fs::write(root.join("secrets/config.json"), "{}").unwrap();
        fs::write(ctx.join("train.py"), "").unwrap();
        std::os::unix::fs::symlink(root.join("secrets"), ctx.join("docker")).unwrap();
        let e = hash(&ctx, b"FROM x", &[], &[], &repo).unwrap_err();
        assert_eq!(
            e,
            format!(
                "`docker` in the build context links to `{}`, outside the repository",
                root.join("secrets").display()
            )
        );
        // Left out entirely, it is not walked.
        fs::write(ctx.join(".dockerignore"), "docker\n").unwrap();
        assert!(hash(&ctx, b"FROM x", &[], &[], &repo).is_ok());
        std::os::unix::fs::symlink(root.join("secrets"), repo.join("link")).unwrap();
        let e = hash(&repo.join("link"), b"FROM x", &[], &[], &repo).unwrap_err();
        assert!(e.contains("outside the repository"), "{e}");
        // A sparse file over the budget: refused by its size, unread.
        let big = fs::File::create(ctx.join("data.bin")).unwrap();
        big.set_len(MAX_CONTEXT_BYTES + 1).unwrap();
        let e = hash(&ctx, b"FROM x", &[], &[], &repo).unwrap_err();
        assert_eq!(
            e,
            "the build context holds more than 1024 MiB of files that its .dockerignore keeps (reached at `data.bin`)"
        );
    }

    /// Whether a directory (the build cache) is read by a build of the
    /// context: inside it or behind a symlink, unless left out entirely.
    #[test]
    fn a_context_reaches_what_it_holds_or_links_to_unless_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let ctx = root.join("ctx");
        let home = root.join("home");
        fs::create_dir_all(ctx.join(".cache")).unwrap();
        fs::create_dir_all(home.join(".cache")).unwrap();
        fs::write(ctx.join("train.py"), "").unwrap();
        std::os::unix::fs::symlink(&home, ctx.join("home")).unwrap();
        let print = |ignore: &str| {
            fs::write(ctx.join(".dockerignore"), ignore).unwrap();
            hash(&ctx, b"FROM x", &[], &[], &root).unwrap().1
        };
        let p = print("");
        assert!(p.reaches(&ctx.join(".cache")));
        assert!(p.reaches(&home.join(".cache")), "through the symlink");
        assert!(!p.reaches(&root.join("elsewhere")));
        let p = print(".cache\nhome/.cache\n");
        assert!(!p.reaches(&ctx.join(".cache")));
        assert!(!p.reaches(&home.join(".cache")));
        assert!(p.reaches(&home), "the rest of home is read");
        // A `!` pattern with a wildcard, or one inside it, could bring part
        // of it back; one that names a path elsewhere cannot, and BuildKit
        // does not walk it.
        for exception in ["!*.py", "!.cache/keep"] {
            let p = print(&format!(".cache\nhome/.cache\n{exception}\n"));
            assert!(p.reaches(&ctx.join(".cache")), "{exception}");
        }
        let p = print(".cache\nhome/.cache\n!train.py\n");
        assert!(!p.reaches(&ctx.join(".cache")));
        let p = print("home\n");
        assert!(!p.reaches(&home.join(".cache")));
    }
}
