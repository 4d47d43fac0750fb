//! The key of a build: everything a build's output is a function of, hashed.
//!
//! Inputs are hashed by content, never by mtime: a `git checkout` that
//! rewrites a definition with the same bytes keeps the key, and an edit
//! within the same clock tick as the last build still changes it.

use std::fs;
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

use crate::load::project::Project;
use crate::model::Job;
use crate::{par, pipeline};

/// What one invocation builds: the same request finds the same record.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub cwd: &'a Path,
    pub project: &'a Project,
    pub paths: &'a [PathBuf],
    /// The build-spec directory, when this build writes one.
    pub build_output: Option<&'a Path>,
}

impl Request<'_> {
    /// The directories the build may write: the manifests, then the build
    /// specs.
    pub fn dirs(&self) -> Vec<PathBuf> {
        let mut dirs = vec![self.project.output.clone()];
        dirs.extend(self.build_output.map(Path::to_path_buf));
        dirs
    }

    /// Which record this request uses: one per project, output directories
    /// and paths, so that two builds of a project into different places do
    /// not evict each other.
    pub fn location(&self) -> String {
        let mut h = Hasher::new("location");
        h.path(self.cwd);
        h.path(&self.project.root);
        for d in self.dirs() {
            h.path(&d);
        }
        for p in self.paths {
            h.path(p);
        }
        h.finish()
    }

    /// The hash of every input, or `None` when one cannot be read (the build
    /// then reports it, and nothing is cached).
    pub fn key(&self) -> Option<String> {
        let p = self.project;
        let mut h = Hasher::new("key");
        h.field(env!("CARGO_PKG_VERSION").as_bytes());
        executable(&mut h)?;
        h.path(self.cwd);
        h.path(&p.root);
        h.field(
            p.file
                .as_deref()
                .map_or(b"-".as_slice(), |f| f.as_os_str().as_encoded_bytes()),
        );
        h.field(p.text.as_deref().unwrap_or("-").as_bytes());
        h.path(&p.output);
        h.path(&p.build_output);
        h.field(
            self.build_output
                .map_or(b"-".as_slice(), |b| b.as_os_str().as_encoded_bytes()),
        );
        for path in self.paths {
            h.path(path);
        }
        // The project file is in the key as text; paths and defaults derive
        // from it. Definitions and library overrides are read here, before
        // the build reads them: see `Cache::save` for why that order is safe.
        let files = pipeline::files(p, self.cwd, self.paths).ok()?;
        h.field(b"definitions");
        files_into(&mut h, &files)?;
        if let Some(dir) = &p.library {
            h.field(b"library");
            h.field(&[u8::from(dir.is_dir())]);
            files_into(&mut h, &crate::library::override_files(dir))?;
        }
        Some(h.finish())
    }

    /// The build contexts of `jobs` and their fingerprints, sorted; `None`
    /// when one cannot be read.
    pub fn contexts(&self, jobs: &[Job]) -> Option<Vec<(PathBuf, String)>> {
        let mut dirs: Vec<PathBuf> = jobs
            .iter()
            .filter_map(|j| j.build.as_ref().map(|b| b.context.clone()))
            .collect();
        dirs.sort();
        dirs.dedup();
        self.fingerprint_contexts(dirs)
    }

    /// Fingerprints `dirs`, as [`Self::contexts`] does.
    pub fn fingerprint_contexts(&self, dirs: Vec<PathBuf>) -> Option<Vec<(PathBuf, String)>> {
        let build_output = self.build_output.unwrap_or(&self.project.build_output);
        let generated = pipeline::generated(self.project, build_output);
        dirs.into_iter()
            .map(|d| {
                let f = crate::image::context_fingerprint(&d, &generated).ok()?;
                Some((d, f))
            })
            .collect()
    }
}

/// The running binary: a rebuilt trainc may render differently, so its
/// identity is part of the key. On Linux `/proc/self/exe` is the file this
/// process runs even when a newer build has replaced it on disk.
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

/// Each file's path and bytes, read on every core.
fn files_into(h: &mut Hasher, files: &[PathBuf]) -> Option<()> {
    let digests = par::map(files, |f| fs::read(f).ok().map(|b| Sha256::digest(&b)));
    h.field(&files.len().to_le_bytes());
    for (f, d) in files.iter().zip(digests) {
        h.path(f);
        h.field(&d?);
    }
    Some(())
}

/// SHA-256 over length-prefixed fields: no two different inputs give the
/// same byte stream.
pub(super) struct Hasher(Sha256);

impl Hasher {
    pub(super) fn new(domain: &str) -> Self {
        let mut h = Self(Sha256::new());
        h.field(b"trainc-cache");
        h.field(domain.as_bytes());
        h
    }

    pub(super) fn field(&mut self, bytes: &[u8]) {
        self.0.update((bytes.len() as u64).to_le_bytes());
        self.0.update(bytes);
    }

    fn path(&mut self, p: &Path) {
        self.field(p.as_os_str().as_encoded_bytes());
    }

    pub(super) fn finish(self) -> String {
        hex(&self.0.finalize()[..16])
    }
}

pub(super) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}
