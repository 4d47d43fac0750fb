//! Stage 5 while stage 4 runs: a build's job files are planned and staged
//! as each job is rendered, so that the output tree is never held in memory
//! whole. A cold build of 5,000 jobs renders 250 MB of YAML; holding it
//! until the write phase put the build's peak memory at twice that.
//!
//! Each file is planned exactly as [`plan`](super::plan) plans it (the same
//! refusals, the same comparison with the file on disk) and, when it is to
//! be written, staged at once as the write phase stages it: an unnamed
//! temporary file (or a named one, `.trainc-XXXXXX.tmp`) in its directory,
//! or, for a directory yet to be made, in the nearest one above it, which
//! the locked output root always is. Nothing gets a name a reader could
//! see until [`Stager::finish`] has planned every file and found no
//! refusal, [`stage`] has staged the rest of every directory, and
//! [`super::Ready::link`] puts them in place: a build that fails on the way
//! (a refusal, a file over a limit, a finding about another directory, a
//! full disk) drops the staged files, and every target is as it was.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use super::write::{Flush, Staged, Writer};
use super::{Change, Op, Plan, classify};
use crate::diagnostic::Diagnostic;

/// What became of a file a [`Stager`] took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taken {
    pub len: u64,
    /// Its content hash (the build cache's), when asked for.
    pub hash: Option<String>,
}

/// What a [`Stager`] does with the files it plans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Stages those to write (`build`).
    Stage,
    /// Keeps only what becomes of each (`build --check`).
    Plan,
    /// Keeps the old and new bytes of those that change (`diff`).
    Keep,
}

/// Plans and stages the files of one output directory as they come.
pub struct Stager {
    root: PathBuf,
    shown: String,
    writer: Writer,
    hash: bool,
    mode: Mode,
    /// Set at the first error writing a staged file.
    failing: AtomicBool,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    changes: Vec<Change>,
    staged: Vec<Staged>,
    /// Refusals, by the path they are about.
    refused: Vec<(String, Diagnostic)>,
    /// The first error writing a staged file (a full disk), in path order
    /// among those met: once there is one, nothing more is staged.
    failed: Option<(String, Diagnostic)>,
}

/// What becomes of one file.
struct Planned {
    op: Op,
    /// The file it replaces, when its bytes are kept.
    old: Option<Vec<u8>>,
    /// Its staged copy.
    staged: Option<Staged>,
}

impl Planned {
    /// A file not staged.
    fn unstaged(op: Op, old: Option<Vec<u8>>) -> Self {
        Self {
            op,
            old,
            staged: None,
        }
    }
}

/// Why a file was not planned or not staged.
enum Failure {
    /// The plan refuses it (a file of somebody else's in the way, …).
    Refused(Diagnostic),
    /// Writing its staged copy failed.
    Write(Diagnostic),
}

/// The staged files of a finished [`Stager`], for [`stage`].
pub struct Pending {
    writer: Writer,
    staged: Vec<Staged>,
}

impl Stager {
    /// A stager for `root`; `shown` is how messages name it. With `hash`,
    /// the content hash of every file is computed as it is taken. To
    /// [`Mode::Stage`], `root` must exist (it is locked: see
    /// [`super::lock`]).
    pub fn new(root: &Path, shown: &str, hash: bool, mode: Mode) -> Stager {
        Stager {
            root: root.to_path_buf(),
            shown: shown.to_owned(),
            writer: Writer::new(root, Flush::streaming(root)),
            hash,
            mode,
            failing: AtomicBool::new(false),
            inner: Mutex::new(Inner::default()),
        }
    }

    /// Plans `files` (relative paths and contents, typically one job's),
    /// staging those to write; their sizes and hashes. Refusals are kept
    /// for [`Stager::finish`], so that a build reports them all at once.
    pub fn take(&self, files: Vec<(String, Vec<u8>)>) -> Vec<(String, Taken)> {
        let mut checked = super::Checked::new();
        let mut changes = Vec::with_capacity(files.len());
        let mut staged = Vec::new();
        let mut refused = Vec::new();
        let mut failed = None;
        let mut taken = Vec::with_capacity(files.len());
        for (rel, bytes) in files {
            let hash = self.hash.then(|| crate::plan::content_hash(&bytes));
            let len = bytes.len() as u64;
            taken.push((rel.clone(), Taken { len, hash }));
            match self.stage(&rel, &bytes, &mut checked) {
                Ok(Planned { op, old, staged: s }) => {
                    staged.extend(s);
                    let keep = self.mode == Mode::Keep && op != Op::Unchanged;
                    changes.push(Change {
                        path: rel,
                        op,
                        old,
                        new: if keep { bytes } else { Vec::new() },
                    });
                }
                Err(Failure::Refused(d)) => refused.push((rel, d)),
                Err(Failure::Write(d)) => {
                    self.failing.store(true, Ordering::Relaxed);
                    failed.get_or_insert((rel, d));
                }
            }
        }
        // A poisoned lock means another thread panicked, and the build with it.
        if let Ok(mut inner) = self.inner.lock() {
            inner.changes.append(&mut changes);
            inner.staged.append(&mut staged);
            inner.refused.append(&mut refused);
            if let Some((rel, d)) = failed
                && inner.failed.as_ref().is_none_or(|(first, _)| rel < *first)
            {
                inner.failed = Some((rel, d));
            }
        }
        taken
    }

    fn stage(
        &self,
        rel: &str,
        bytes: &[u8],
        checked: &mut super::Checked,
    ) -> Result<Planned, Failure> {
        let (op, old) =
            classify(&self.root, &self.shown, rel, bytes, checked).map_err(Failure::Refused)?;
        match self.mode {
            Mode::Keep => return Ok(Planned::unstaged(op, old)),
            Mode::Plan => return Ok(Planned::unstaged(op, None)),
            // After a full disk, only what is refused matters.
            Mode::Stage if self.failing.load(Ordering::Relaxed) => {
                return Ok(Planned::unstaged(op, None));
            }
            Mode::Stage => {}
        }
        let target = self.root.join(rel);
        let staged = match op {
            Op::Create => {
                let dir = nearest(&self.root, rel, checked);
                Some(
                    self.writer
                        .stage_in(&dir, target, bytes, true)
                        .map_err(Failure::Write)?,
                )
            }
            Op::Update => {
                let dir = super::write::parent(&target).to_path_buf();
                Some(
                    self.writer
                        .stage_in(&dir, target, bytes, false)
                        .map_err(Failure::Write)?,
                )
            }
            Op::Delete | Op::Unchanged => None,
        };
        Ok(Planned {
            op,
            old: None,
            staged,
        })
    }

    /// What the stager planned and staged, or every refusal (the staged
    /// files then removed). The rest of the directory (its files not
    /// streamed, what to prune) is planned by [`super::merge`], which
    /// leaves this build's own temporary files alone.
    pub fn finish(self) -> Result<Streamed, Vec<Diagnostic>> {
        let Stager {
            root,
            writer,
            inner,
            ..
        } = self;
        let Inner {
            changes,
            staged,
            mut refused,
            failed,
        } = inner.into_inner().unwrap_or_default();
        // In path order, as `plan` reports them, whatever the threads did.
        if !refused.is_empty() {
            refused.sort_by(|a, b| a.0.cmp(&b.0));
            return Err(refused.into_iter().map(|(_, d)| d).collect());
        }
        if let Some((_, d)) = failed {
            return Err(vec![d]);
        }
        let temps = staged
            .iter()
            .filter_map(|s| s.temp_path()?.strip_prefix(&root).ok()?.to_str())
            .map(str::to_owned)
            .collect();
        Ok(Streamed {
            changes,
            temps,
            pending: Pending { writer, staged },
        })
    }
}

/// What a [`Stager`] planned and staged.
pub struct Streamed {
    /// What becomes of each file it took.
    pub changes: Vec<Change>,
    /// Its temporary files, by their paths below the root.
    pub temps: HashSet<String>,
    pub pending: Pending,
}

/// The nearest directory at or above `rel`'s that exists, as far as
/// `checked` (filled by planning `rel`) knows: `root` at worst.
fn nearest(root: &Path, rel: &str, checked: &super::Checked) -> PathBuf {
    let mut dir = root.to_path_buf();
    let parts: Vec<&str> = rel.split('/').collect();
    for part in &parts[..parts.len().saturating_sub(1)] {
        dir.push(part);
        if checked.get(&dir) != Some(&true) {
            dir.pop();
            break;
        }
    }
    dir
}

/// Stages the rest of a streamed plan (see [`super::stage`]), with what
/// was staged as the files were rendered.
pub fn stage(plan: &Plan, pending: Pending) -> Result<super::Ready, Vec<Diagnostic>> {
    let Pending { writer, staged } = pending;
    writer.stage_plan(plan, staged)
}

/// Where a build puts each job's files as they are rendered
/// ([`crate::pipeline`]), instead of holding them in a tree until every
/// job is rendered.
pub trait Sink: Sync {
    /// Whether the files of the set `set` (an index into the sets) go here.
    fn streams(&self, set: usize) -> bool;
    /// Takes the files one job made for `set`: what became of each.
    fn take(&self, set: usize, files: Vec<(String, Vec<u8>)>) -> Vec<(String, Taken)>;
}

/// The stagers of a build's sets, by set: the [`Sink`]
/// a streaming build renders into.
pub struct Stagers(pub Vec<Option<Stager>>);

impl Sink for Stagers {
    fn streams(&self, set: usize) -> bool {
        self.0.get(set).is_some_and(Option::is_some)
    }

    fn take(&self, set: usize, files: Vec<(String, Vec<u8>)>) -> Vec<(String, Taken)> {
        match self.0.get(set) {
            Some(Some(stager)) => stager.take(files),
            // Never asked: `streams` said no.
            _ => Vec::new(),
        }
    }
}
