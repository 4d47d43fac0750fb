//! What each definition file made in the last build, as the build cache
//! records it: the results a build that knows them need not compile again
//! (see [`crate::build`]).
//!
//! A record keeps, per definition file, the hash of its bytes and what it
//! made for each set the build resolved (the definitions as written, then
//! each variant's): its documents as the rules across files see them
//! ([`crate::pipeline::Summary`]), its jobs with every file they wrote
//! (whose hashes and sizes are the output directory's snapshot's), and the
//! images its build specs build. Everything else a job's files depend on
//! (trainc itself, the project file, the library, the output directories,
//! the paths asked for) is the record's global key
//! ([`super::Request::global_key`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::pipeline::Summary;
use crate::plan::snapshot::Entry;

/// What one definition file made in the last build.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SourceRecord {
    pub path: PathBuf,
    /// [`super::key::source_hash`] of its bytes.
    pub hash: String,
    /// Findings that did not stop the build were about it: it is compiled
    /// by every build, so that they are shown every time.
    pub warned: bool,
    /// One per set resolved ([`crate::pipeline::Compiled::parts`]).
    pub parts: Vec<PartRecord>,
}

/// What a definition file made for one set.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct PartRecord {
    pub docs: Vec<Summary>,
    pub jobs: Vec<JobRecord>,
    /// The images its jobs build, as the bake file names them; only where
    /// the set writes build specs.
    pub builds: Vec<BuildRecord>,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct JobRecord {
    pub namespace: String,
    pub name: String,
    /// The images the build specs build for it.
    pub images: Vec<String>,
    /// Its files in the set's output directory. Their hashes and sizes are
    /// the snapshot's: a build records the hash of what it meant to write.
    pub files: Vec<String>,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct BuildRecord {
    pub target: String,
    pub source: String,
    pub context: String,
    /// The Dockerfile, in the build directory (its hash and size are the
    /// snapshot's).
    pub path: String,
    pub image: String,
}

/// The per-file part of a record.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Files {
    /// [`super::Request::global_key`] of the build.
    pub global: String,
    /// In path order.
    pub sources: Vec<SourceRecord>,
}

/// What a build leaves for the next: the per-file records (`None` when a
/// warning was about no definition file, so that only a full build can
/// show it again), and the content hash of every file it meant each
/// directory to hold.
#[derive(Debug, Default)]
pub struct State {
    /// Every definition file's record, in path order.
    pub sources: Option<Vec<SourceRecord>>,
    /// The content hash of each file a stager took as it was rendered, by
    /// directory: a file written without its bytes kept in the plan.
    pub hashes: HashMap<PathBuf, HashMap<String, String>>,
    /// Each directory as the plan's walk ([`crate::plan::merge`]) saw it
    /// (`None`: not there), before anything was written; the record is
    /// made from it and the plan, without another walk.
    pub walked: HashMap<PathBuf, Option<Vec<Entry>>>,
    /// Of an incremental build: nothing was compiled, the last build did
    /// not warn, and every directory is as its snapshot says (no signature
    /// hashed again): the record need not be written.
    pub unchanged: bool,
}

impl State {
    /// Keeps what a plan's walk saw of `dir` (`None`: not there), from
    /// which the record is made once the plan is carried out.
    pub fn walked(&mut self, dir: &Path, entries: Option<Vec<Entry>>) {
        self.walked.insert(dir.to_path_buf(), entries);
    }
}
