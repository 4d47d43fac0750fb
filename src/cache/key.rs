//! The keys of a build: everything a build's output is a function of,
//! hashed. The definition files are hashed one by one ([`source_hash`]); the
//! rest is one global key ([`Request::global_key`]).
//!
//! Inputs are hashed by content, never by mtime: a `git checkout` that
//! rewrites a definition with the same bytes keeps the key, and an edit
//! within the same clock tick as the last build still changes it. A build
//! records the hashes of the very bytes it compiled
//! ([`crate::pipeline::Read`]); a later build reads the inputs afresh, the
//! same way, and compares.

use std::fs;
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

use crate::pipeline;
use crate::project::Project;

/// What one invocation builds: the same request finds the same record.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub cwd: &'a Path,
    pub project: &'a Project,
    pub paths: &'a [PathBuf],
    /// The directories the build may write, in order: for each output
    /// directory (the project's, then its variants'), its manifests, then
    /// its build specs when it writes them.
    pub dirs: Vec<PathBuf>,
}

impl Request<'_> {
    /// The directories the build may write.
    pub fn dirs(&self) -> Vec<PathBuf> {
        self.dirs.clone()
    }

    /// What the image stage must not hash: every directory trainc writes.
    pub fn generated(&self) -> Vec<&Path> {
        let mut dirs = pipeline::generated(self.project, &self.project.build_output);
        dirs.extend(self.dirs.iter().map(PathBuf::as_path));
        dirs
    }

    /// Which record this request uses: one per trainc executable, working
    /// directory, project, output directories and paths, so that two builds
    /// of a project into different places, or by two trainc binaries (the
    /// one pre-commit builds for its hook and the one on `PATH`), do not
    /// evict each other.
    pub fn location(&self) -> Option<String> {
        let mut h = Hasher::new("location");
        executable(&mut h)?;
        h.path(self.cwd);
        h.path(&self.project.root);
        for d in self.dirs() {
            h.path(&d);
        }
        for p in self.paths {
            h.path(p);
        }
        Some(h.finish())
    }

    /// The key of everything but the definition files' bytes: what every
    /// job's output depends on, so that when it changes, every job is
    /// compiled again.
    pub fn global_key(&self, library: &str) -> Option<String> {
        let p = self.project;
        let mut h = Hasher::new("global");
        h.field(env!("CARGO_PKG_VERSION").as_bytes());
        executable(&mut h)?;
        h.path(self.cwd);
        h.path(&p.root);
        h.field(
            p.file
                .as_deref()
                .map_or(b"-".as_slice(), |f| f.as_os_str().as_encoded_bytes()),
        );
        // The project file as parsed: paths, defaults and variants derive
        // from it.
        h.field(p.text.as_deref().unwrap_or("-").as_bytes());
        h.path(&p.output);
        h.path(&p.build_output);
        h.field(&self.dirs.len().to_le_bytes());
        for d in &self.dirs {
            h.path(d);
        }
        h.field(&self.paths.len().to_le_bytes());
        for path in self.paths {
            h.path(path);
        }
        h.field(library.as_bytes());
        // What the root kustomization lists is checked against the file
        // system: a resource gone, or its kustomization.yaml, fails the
        // build. Those inside an output directory are in its snapshot.
        let variants = p.variants.iter().flat_map(|v| &v.resources);
        for r in p.resources.iter().chain(variants) {
            h.field(&crate::resources::print(&r.path));
        }
        Some(h.finish())
    }
}

/// The hash of a definition file's text, as records keep it.
pub fn source_hash(text: &str) -> String {
    hex::encode(&Sha256::digest(text.as_bytes())[..16])
}

/// The running binary: a rebuilt trainc may render differently, so its
/// identity (device, inode, size and times) is part of the key. On Linux
/// `/proc/self/exe` is the file this process runs even when a newer build
/// has replaced it on disk.
fn executable(h: &mut Hasher) -> Option<()> {
    use std::os::unix::fs::MetadataExt as _;
    let m = fs::metadata("/proc/self/exe")
        .or_else(|_| std::env::current_exe().and_then(fs::metadata))
        .ok()?;
    for n in [m.dev(), m.ino(), m.size()] {
        h.field(&n.to_le_bytes());
    }
    for n in [m.mtime(), m.mtime_nsec(), m.ctime(), m.ctime_nsec()] {
        h.field(&n.to_le_bytes());
    }
    Some(())
}

/// SHA-256 over length-prefixed fields: no two different inputs give the
/// same byte stream.
struct Hasher(Sha256);

impl Hasher {
    fn new(domain: &str) -> Self {
        let mut h = Self(Sha256::new());
        h.field(b"trainc-cache");
        h.field(domain.as_bytes());
        h
    }

    fn field(&mut self, bytes: &[u8]) {
        self.0.update((bytes.len() as u64).to_le_bytes());
        self.0.update(bytes);
    }

    fn path(&mut self, p: &Path) {
        self.field(p.as_os_str().as_encoded_bytes());
    }

    fn finish(self) -> String {
        hex::encode(&self.0.finalize()[..16])
    }
}
