//! The build cache: lets `build` and `build --check` answer "up to date"
//! without compiling.
//!
//! After a build, trainc records (outside the output directories) the key of
//! its inputs ([`key`]) and a snapshot of every output directory
//! ([`snapshot`]). The next build hashes its inputs again, which costs a read
//! of the definitions and no parsing; when the key matches and every output
//! directory still matches its snapshot, the output is what a full build
//! would produce, and nothing is compiled. Anything else, or any doubt,
//! takes the full path, which never reads the cache: the cache can make a
//! build faster, never different.
//!
//! Records live in `$TRAINC_CACHE_DIR`, else `$XDG_CACHE_HOME/trainc`, else
//! `~/.cache/trainc`; deleting them is always safe.

pub mod key;
pub mod snapshot;

use std::collections::HashMap;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use key::Request;
use snapshot::{Entry, Verdict};

use crate::plan::{Op, Plan};

/// Bumped whenever the record changes shape or meaning.
const FORMAT: u32 = 1;

#[derive(Debug, Serialize, Deserialize)]
struct Record {
    format: u32,
    key: String,
    /// Build contexts and their fingerprints.
    contexts: Vec<(PathBuf, String)>,
    /// The directories the status line names, with their file counts.
    dests: Vec<(PathBuf, usize)>,
    /// Every directory the build may write, as it was left; `None` when it
    /// does not exist.
    outputs: Vec<(PathBuf, Option<Vec<Entry>>)>,
}

/// The record of one request.
#[derive(Debug)]
pub struct Cache {
    file: PathBuf,
}

/// A build's inputs as hashed before it read them.
#[derive(Debug, Default)]
pub struct Inputs {
    key: Option<String>,
    contexts: Option<Vec<(PathBuf, String)>>,
    /// When the build started (see [`snapshot::mark`]).
    started: i128,
}

impl Inputs {
    /// Records the build contexts' fingerprints: call once the jobs are
    /// valid, before the contexts are hashed into tags.
    pub fn set_contexts(&mut self, contexts: Option<Vec<(PathBuf, String)>>) {
        self.contexts = contexts;
    }
}

impl Cache {
    /// The cache for `req`, or why there is none.
    pub fn open(req: &Request) -> Result<Self, &'static str> {
        let dir = cache_dir()?;
        Ok(Self {
            file: dir.join("builds").join(format!("{}.json", req.location())),
        })
    }

    /// Hashes the inputs. Call before the build reads them.
    pub fn inputs(&self, req: &Request) -> Inputs {
        Inputs {
            started: snapshot::mark(),
            key: req.key(),
            contexts: None,
        }
    }

    /// When the output is current: each directory the status line names,
    /// with its file count; otherwise why not, for `build --verbose`. May
    /// refresh the record (see [`snapshot::Verdict::Refreshed`]); never
    /// touches the output.
    pub fn fresh(&self, req: &Request, inputs: &Inputs) -> Result<Vec<(PathBuf, usize)>, String> {
        let key = inputs
            .key
            .as_deref()
            .ok_or("an input cannot be read; the build will say which")?;
        let bytes = fs::read(&self.file).map_err(|_| "no record of an earlier build")?;
        let mut record: Record = match serde_json::from_slice(&bytes) {
            Ok(r @ Record { format: FORMAT, .. }) => r,
            _ => return Err("the record is from another version of trainc".into()),
        };
        if record.key != key {
            return Err("the definitions, project, library or trainc changed".into());
        }
        let dirs: Vec<&PathBuf> = record.outputs.iter().map(|(d, _)| d).collect();
        if dirs != req.dirs().iter().collect::<Vec<_>>() {
            return Err("the output directories changed".into());
        }
        let contexts = record.contexts.iter().map(|(d, _)| d.clone()).collect();
        if req.fingerprint_contexts(contexts).as_ref() != Some(&record.contexts) {
            return Err("a build context changed".into());
        }
        let mark = snapshot::mark();
        let mut refreshed = false;
        for (dir, entries) in &mut record.outputs {
            match snapshot::verify(dir, entries.as_deref(), mark) {
                Verdict::Same => {}
                Verdict::Refreshed(now) => {
                    *entries = now;
                    refreshed = true;
                }
                Verdict::Differs(why) => {
                    let shown = crate::load::display_name(req.cwd, dir);
                    return Err(format!("{shown} changed since the last build: {why}"));
                }
            }
        }
        if refreshed {
            self.write(&record);
        }
        Ok(record.dests)
    }

    /// Records a build that left `dests` (directory, what it now holds) as
    /// they should be. Skipped when an input changed while the build ran:
    /// the output may then be of either version, and only a key taken both
    /// before and after the build vouches for it.
    pub fn save(&self, req: &Request, inputs: Inputs, dests: &[&Plan]) {
        let (Some(key), Some(contexts)) = (inputs.key, inputs.contexts) else {
            return;
        };
        if req.key().as_deref() != Some(key.as_str()) {
            return;
        }
        let dirs = contexts.iter().map(|(d, _)| d.clone()).collect();
        if req.fingerprint_contexts(dirs).as_ref() != Some(&contexts) {
            return;
        }
        // What each directory now holds, as the plans wrote it.
        let written: Vec<(&Path, HashMap<&str, &[u8]>)> = dests
            .iter()
            .map(|p| {
                let files = p
                    .changes
                    .iter()
                    .filter(|c| c.op != Op::Delete)
                    .map(|c| (c.path.as_str(), c.new.as_slice()))
                    .collect();
                (p.root.as_path(), files)
            })
            .collect();
        // Racy from the start of the build, not from now: a file that
        // another program changed after the plan compared it must not be
        // vouched for by the signature it has now. The files this build
        // wrote are hashed once by the next check, which then settles them.
        let mark = inputs.started;
        let mut outputs = Vec::new();
        for dir in req.dirs() {
            let files = written.iter().find(|(d, _)| *d == dir).map(|(_, f)| f);
            // Files trainc does not own are read; its own are not read back.
            let hash = |rel: &str, path: &Path| match files.and_then(|f| f.get(rel)) {
                Some(bytes) => Ok(snapshot::content_hash(bytes)),
                None => Ok(snapshot::content_hash(&fs::read(path)?)),
            };
            let Ok(entries) = snapshot::take(&dir, mark, hash) else {
                return;
            };
            outputs.push((dir, entries));
        }
        let record = Record {
            format: FORMAT,
            key,
            contexts,
            dests: written
                .iter()
                .map(|(d, f)| (d.to_path_buf(), f.len()))
                .collect(),
            outputs,
        };
        self.write(&record);
    }

    /// Replaces the record atomically. A cache that cannot be written is no
    /// reason to fail a build: errors are dropped.
    fn write(&self, record: &Record) {
        let Some(dir) = self.file.parent() else {
            return;
        };
        let Ok(bytes) = serde_json::to_vec(record) else {
            return;
        };
        if fs::create_dir_all(dir).is_err() {
            return;
        }
        tag(dir.parent().unwrap_or(dir));
        let Ok(mut tmp) = tempfile::Builder::new().prefix(".record-").tempfile_in(dir) else {
            return;
        };
        if tmp.write_all(&bytes).is_ok() {
            let _ = tmp.persist(&self.file);
        }
    }
}

/// `$TRAINC_CACHE_DIR` (empty: no cache), else `$XDG_CACHE_HOME/trainc`,
/// else `~/.cache/trainc`.
fn cache_dir() -> Result<PathBuf, &'static str> {
    let var = |name| std::env::var_os(name).map(PathBuf::from);
    match var("TRAINC_CACHE_DIR") {
        Some(d) if d.as_os_str().is_empty() => Err("TRAINC_CACHE_DIR is empty, which turns it off"),
        Some(d) => Ok(d),
        None => match var("XDG_CACHE_HOME").filter(|d| d.is_absolute()) {
            Some(d) => Ok(d.join("trainc")),
            None => var("HOME")
                .filter(|h| h.is_absolute())
                .map(|h| h.join(".cache/trainc"))
                .ok_or("there is no cache directory: set TRAINC_CACHE_DIR or HOME"),
        },
    }
}

/// Marks the cache directory for backup tools (the CACHEDIR.TAG convention).
fn tag(dir: &Path) {
    let tag = dir.join("CACHEDIR.TAG");
    if !tag.exists() {
        let _ = fs::write(
            tag,
            "Signature: 8a477f597d28d172789f06886806bc55\n# This directory is a cache of trainc builds; deleting it is safe.\n",
        );
    }
}
