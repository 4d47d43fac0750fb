//! One build, as `build`, `build --check` and `diff` run it, in one line:
//! ask the build cache which definition files' results are known, compile
//! the others (a no-op compiles none; with nothing known, every file, each
//! job's files staged as they are rendered), plan every output directory by
//! one walk, and, for `build`, stage every file before any is linked in and
//! record the build for the next. When what the cache knows cannot make the
//! build, the same path runs again knowing nothing. The CLI resolves where a
//! build reads and writes ([`Targets`]), says what to run ([`Mode`]) and
//! formats what comes back ([`Built`]); [`Report`] is how it hears of what
//! happens on the way.

use std::path::{Path, PathBuf};

use crate::diagnostic::Diagnostic;
use crate::plan::merge;
use crate::plan::stream::{self, Pending, Stager, Stagers};
use crate::plan::{self, Op, Plan};
use crate::project::Project;
use crate::{cache, pipeline};

mod compile;

use compile::Stop;

/// What a build does with its plans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `build`: writes them, and records the build.
    Write,
    /// `build --check`: plans only, and records the build when the output
    /// is current.
    Check,
    /// `diff`: plans, keeping the bytes of what changes to show them;
    /// never records.
    Diff,
}

/// How the CLI hears of a build as it runs.
pub trait Report {
    type Error;
    /// A line about the build cache, for `build -v`.
    fn cache(&mut self, line: &str);
    /// The warnings, once they are known and before anything is written:
    /// shown, or refused (`--deny-warnings`), which stops the build.
    fn warnings(&mut self, warnings: &[Diagnostic]) -> Result<(), Self::Error>;
    /// Findings that stop the build, nothing written.
    fn fail(&self, findings: Vec<Diagnostic>) -> Self::Error;
}

/// One output directory, planned (and, for `build`, written).
pub struct Directory {
    pub plan: Plan,
    /// How messages name it.
    pub shown: String,
    /// Whether `diff` names it with the runs it changes: the manifests of
    /// a build that writes several output directories.
    pub label_runs: bool,
}

/// What a build made.
pub struct Built {
    pub dirs: Vec<Directory>,
    /// Findings that did not stop it.
    pub warnings: Vec<Diagnostic>,
}

/// Runs one build of `paths` (none: the project's sources) into `targets`,
/// from `cwd`, with the build cache unless `no_cache`.
///
/// One path ([`plan_build`]): ask the build cache what it knows, compile the
/// rest (with nothing known, every file), plan every directory, then show
/// the warnings, then (for `build`) stage every directory before linking
/// any in, and record. When what the cache knows cannot make the build (a
/// finding, a file of an unchanged job edited by hand), the same path runs
/// again knowing nothing.
pub fn run<R: Report>(
    cwd: &Path,
    targets: &Targets,
    paths: &[PathBuf],
    mode: Mode,
    no_cache: bool,
    report: &mut R,
) -> Result<Built, R::Error> {
    let req = cache::Request {
        cwd,
        project: &targets.project,
        paths,
        dirs: targets.dirs(),
    };
    let cache = if no_cache {
        Err("of --no-cache".to_owned())
    } else {
        cache::Cache::open(&req)
    };
    let known = match &cache {
        Ok(c) => c.known(&req),
        Err(why) => Err(why.clone()),
    };
    if let Err(why) = &known {
        report.cache(&format!("cache: compiling, because {why}"));
    }
    let planned = match plan_build(&req, targets, &cache, mode, known) {
        Ok(p) => p,
        Err(Stop::Recompile(why)) => {
            report.cache(&format!("cache: compiling, because {why}"));
            plan_build(&req, targets, &cache, mode, Err(why)).map_err(|stop| match stop {
                Stop::Findings(f) => report.fail(f),
                Stop::Recompile(why) => {
                    report.fail(vec![Diagnostic::new(format!("internal error: {why}"))])
                }
            })?
        }
        Err(Stop::Findings(f)) => return Err(report.fail(f)),
    };
    if let Some(line) = &planned.verbose {
        report.cache(line);
    }
    let Planned {
        dirs,
        locks,
        mut warnings,
        refused,
        read,
        mut state,
        ..
    } = planned;
    // A job another project of the repository now builds, about to be
    // pruned from here: said before anything is written.
    warnings.extend(crate::workspace::moved(
        &targets.project,
        dirs.iter()
            .map(|d| (&d.directory.plan, d.directory.shown.as_str())),
    ));
    let release =
        |locks: Vec<plan::Lock>| locks.into_iter().rev().for_each(plan::Lock::release_unused);
    if let Err(e) = report.warnings(&warnings) {
        // What the locks made is removed, and what was staged (dropped
        // before them), as when a build fails.
        drop(dirs);
        release(locks);
        return Err(e);
    }
    // Every plan before any write: a refusal anywhere writes nothing.
    if !refused.is_empty() {
        drop(dirs);
        release(locks);
        return Err(report.fail(refused));
    }
    let warned = !warnings.is_empty();
    let dirs = match mode {
        Mode::Write => {
            let dirs = match write_all(dirs) {
                Ok(dirs) => dirs,
                Err(e) => {
                    release(locks);
                    return Err(report.fail(e));
                }
            };
            // Still locked: the snapshot is of this build's output.
            record(&cache, &req, &read, &mut state, &dirs, warned, report);
            dirs
        }
        Mode::Check | Mode::Diff => {
            let dirs: Vec<Directory> = dirs.into_iter().map(|d| d.directory).collect();
            if mode == Mode::Check && dirs.iter().all(|d| d.plan.is_noop()) {
                record(&cache, &req, &read, &mut state, &dirs, warned, report);
            }
            dirs
        }
    };
    drop(locks);
    // The process ends soon after: freeing a large build's record one
    // allocation at a time costs more than a small build.
    std::mem::forget(state);
    Ok(Built { dirs, warnings })
}

/// A directory planned, with what was staged for it as its files were
/// rendered, if they were.
struct PlannedDir {
    directory: Directory,
    staged: Option<Pending>,
}

/// Every directory of a build, planned: what [`run`] shows, writes and
/// records.
struct Planned {
    dirs: Vec<PlannedDir>,
    /// Held from before anything was planned (for `build`) until the
    /// record is written.
    locks: Vec<plan::Lock>,
    /// Findings that do not stop the build.
    warnings: Vec<Diagnostic>,
    /// What the plans refuse (somebody else's file in the way, …),
    /// reported after the warnings; nothing is written then.
    refused: Vec<Diagnostic>,
    read: pipeline::Read,
    state: cache::State,
    /// For `build -v`, of a build that knew something: what it compiled,
    /// and why.
    verbose: Option<String>,
}

/// Stages every directory's files before any is linked in, so that a full
/// disk anywhere changes nothing; then links them in.
fn write_all(dirs: Vec<PlannedDir>) -> Result<Vec<Directory>, Vec<Diagnostic>> {
    let mut ready = Vec::with_capacity(dirs.len());
    let mut done = Vec::with_capacity(dirs.len());
    // What every directory staged is removed when one fails, as the rest
    // is dropped.
    for d in dirs {
        let staged = match d.staged {
            Some(staged) => stream::stage(&d.directory.plan, staged),
            None => plan::stage(&d.directory.plan),
        };
        ready.push(staged?);
        done.push(d.directory);
    }
    for r in ready {
        r.link()?;
    }
    Ok(done)
}

/// Plans every directory: compiles what `known` does not know (with
/// nothing known, every definition file, each job's files planned and, for
/// `build`, staged as they are rendered ([`plan::stream`]), so that the
/// output tree is never held whole), then plans each directory by one walk
/// ([`crate::plan::merge`]). For `build`, every directory is locked first.
fn plan_build(
    req: &cache::Request,
    targets: &Targets,
    cache: &Result<cache::Cache, String>,
    mode: Mode,
    known: Result<cache::Known, String>,
) -> Result<Planned, Stop> {
    let write = mode == Mode::Write;
    let record_it = cache.is_ok() && mode != Mode::Diff;
    let known = known.ok();
    let everything = known.is_none();
    // Locked before anything is staged, in a fixed order (every set's
    // output directory, then the build directories that exist): what is
    // planned is what is written, even with a second build racing.
    let mut locks = Locks::default();
    let dirs = targets.sets.iter().map(|s| &s.output).chain(
        targets
            .sets
            .iter()
            .filter_map(|s| s.build_output.as_ref())
            .filter(|d| d.is_dir()),
    );
    for dir in dirs.filter(|_| write) {
        locks.lock(dir).map_err(|e| Stop::Findings(vec![e]))?;
    }
    // Files are streamed only when every file is compiled: a build that
    // compiles a few keeps them, and may yet give way to one that compiles
    // everything.
    let stage_mode = match mode {
        Mode::Write => stream::Mode::Stage,
        Mode::Check => stream::Mode::Plan,
        // Only the files that change are kept, for their diff.
        Mode::Diff => stream::Mode::Keep,
    };
    let mut stagers = everything.then(|| stagers(targets, record_it, stage_mode));
    let sets = targets.pipeline_sets();
    let sink = stagers.as_ref().map(|s| s as &dyn stream::Sink);
    let mut inc = compile::compile(req, known, &sets, sink)?;
    let said = (!everything).then(|| Said {
        why: inc.why(),
        compiled: inc.compiled,
        jobs: inc.jobs,
        dirty: std::mem::take(&mut inc.dirty),
    });
    let compile::Incremental {
        dests,
        extra,
        mut warnings,
        read,
        mut state,
        bytes,
        ..
    } = inc;
    let project = &targets.project;
    let several = targets.sets.len() > 1 || targets.sets.iter().any(|s| s.variant.is_some());
    let mut planned = Vec::with_capacity(dests.len());
    let mut refused = Vec::new();
    let mut known_bytes = 0u64;
    for d in dests {
        if write {
            // Locked above, but for a build directory this build makes.
            locks.lock(&d.dir).map_err(|e| Stop::Findings(vec![e]))?;
        }
        let shown = project.shown_dir(&d.dir);
        let label_runs = several && !d.builds;
        let set = &targets.sets[d.set];
        // What a controller syncing the project's output would miss, found
        // by the same walk.
        let unlisted = (set.own && !d.builds)
            .then(|| extra.get(d.set).map(Vec::as_slice))
            .flatten();
        let stager = (!d.builds)
            .then(|| stagers.as_mut()?.0.get_mut(d.set)?.take())
            .flatten();
        let mut streamed = match stager.map(stream::Stager::finish) {
            Some(Ok(s)) => Some(s),
            Some(Err(e)) => {
                refused.extend(e);
                continue;
            }
            None => None,
        };
        // Only the walk needs them.
        let temps = streamed
            .as_mut()
            .map(|s| std::mem::take(&mut s.temps))
            .unwrap_or_default();
        let p = match compile::plan(d, &shown, unlisted, temps, (&mut state, record_it)) {
            Ok(p) => p,
            Err(merge::Stopped::Changed(why)) => return Err(Stop::Recompile(why)),
            Err(merge::Stopped::Failed(e)) if everything => {
                refused.push(e);
                continue;
            }
            Err(merge::Stopped::Failed(e)) => {
                return Err(Stop::Recompile(format!(
                    "{}; the build will report it",
                    e.message
                )));
            }
        };
        if !p.refused.is_empty() {
            if !everything {
                return Err(Stop::Recompile(format!(
                    "{}; the build will report it",
                    p.refused[0].message
                )));
            }
            refused.extend(p.refused);
            continue;
        }
        warnings.extend(crate::resources::unlisted_warning(&shown, &p.unlisted));
        known_bytes += p.known;
        let mut plan = p.plan;
        let staged = streamed.map(|s| {
            plan.changes.extend(s.changes);
            s.pending
        });
        plan.changes.sort_by(|a, b| a.path.cmp(&b.path));
        planned.push(PlannedDir {
            directory: Directory {
                plan,
                shown,
                label_runs,
            },
            staged,
        });
    }
    if !everything {
        // What was taken from the record, with what was compiled.
        let within = crate::limits::check_output(
            bytes.saturating_add(known_bytes),
            0,
            true,
            crate::limits::MAX_OUTPUT_BYTES,
        );
        if within.is_err() {
            return Err(Stop::Recompile(
                "the output passes the limit; the build will report it".into(),
            ));
        }
    }
    let verbose = said.map(|said| verbose(said, &planned));
    Ok(Planned {
        dirs: planned,
        locks: std::mem::take(&mut locks.held),
        warnings,
        refused,
        read,
        state,
        verbose,
    })
}

/// The locks a build holds, in the order it took them. Dropped before
/// the build is planned whole, they are released as a failed build's are:
/// an output directory a lock made is removed when empty.
#[derive(Default)]
struct Locks {
    held: Vec<plan::Lock>,
    dirs: Vec<PathBuf>,
}

impl Locks {
    /// Locks `dir`, unless it is locked already.
    fn lock(&mut self, dir: &Path) -> Result<(), Diagnostic> {
        if !self.dirs.iter().any(|d| d == dir) {
            self.held.push(plan::lock(dir)?);
            self.dirs.push(dir.to_path_buf());
        }
        Ok(())
    }
}

impl Drop for Locks {
    fn drop(&mut self) {
        self.held
            .drain(..)
            .rev()
            .for_each(plan::Lock::release_unused);
    }
}

/// Records a build in the cache, and whether it `warned`, telling
/// `report` why it could not.
fn record<R: Report>(
    cache: &Result<cache::Cache, String>,
    req: &cache::Request,
    read: &pipeline::Read,
    state: &mut cache::State,
    dirs: &[Directory],
    warned: bool,
    report: &mut R,
) {
    let Ok(c) = cache else { return };
    let plans: Vec<&Plan> = dirs.iter().map(|d| &d.plan).collect();
    if let Err(why) = c.save(req, read, state, &plans, warned) {
        report.cache(&format!("cache: not recorded, because {why}"));
    }
}

/// One output directory a build writes (the project's own, or a
/// variant's), and its build directory.
pub struct Set {
    /// An index into the project's variants; `None`: the project's own.
    pub variant: Option<usize>,
    pub output: PathBuf,
    /// The build-spec directory, when this build writes one.
    pub build_output: Option<PathBuf>,
    /// Whether `output` is the one the project file configures (no `-o`,
    /// or `-o` naming it): only then does it list the `resources`, and is
    /// unlisted YAML in it warned about.
    pub own: bool,
}

impl Set {
    /// Variant `i`, into the directories the project file gives it.
    pub fn variant(project: &Project, i: usize) -> Self {
        let v = &project.variants[i];
        Set {
            variant: Some(i),
            output: v.output.clone(),
            build_output: v.build_output.clone(),
            own: true,
        }
    }
}

/// Where a build reads and writes, resolved from the project and the
/// arguments, with the guards that keep it from pruning what it should not.
pub struct Targets {
    pub project: Project,
    pub sets: Vec<Set>,
}

impl Targets {
    /// The sets as the pipeline takes them.
    pub fn pipeline_sets(&self) -> Vec<pipeline::Set<'_>> {
        self.sets
            .iter()
            .map(|s| {
                let variant = s.variant.and_then(|i| self.project.variants.get(i));
                pipeline::Set {
                    variant,
                    output: &s.output,
                    build_output: s.build_output.as_deref(),
                    resources: match (variant, s.own) {
                        (Some(v), _) => &v.resources,
                        (None, true) => &self.project.resources,
                        (None, false) => &[],
                    },
                }
            })
            .collect()
    }

    /// Every directory the build may write, in order.
    pub fn dirs(&self) -> Vec<PathBuf> {
        self.sets
            .iter()
            .flat_map(|s| std::iter::once(s.output.clone()).chain(s.build_output.clone()))
            .collect()
    }
}

/// A stager for each set's output directory (see [`crate::plan::stream`]).
fn stagers(targets: &Targets, hash: bool, mode: stream::Mode) -> Stagers {
    Stagers(
        targets
            .sets
            .iter()
            .map(|s| {
                let shown = targets.project.shown_dir(&s.output);
                Some(Stager::new(&s.output, &shown, hash, mode))
            })
            .collect(),
    )
}

/// What an incremental build compiled, and why, for `build -v`.
struct Said {
    /// Which definition files changed; `None`: none did.
    why: Option<String>,
    /// Jobs compiled, of all the jobs.
    compiled: usize,
    jobs: usize,
    /// Each definition file compiled again or dropped, and why.
    dirty: Vec<(String, compile::Dirty)>,
}

/// What `build -v` says of an incremental build: how many jobs it compiled,
/// of how many, and why; or that the output is as the last build left it.
fn verbose(said: Said, dirs: &[PlannedDir]) -> String {
    let Said {
        why,
        compiled,
        jobs,
        dirty,
    } = said;
    let why = match why {
        Some(why) => why,
        None => match dirs
            .iter()
            .find_map(|d| Some((d.directory.plan.pending().next()?, &d.directory.shown)))
        {
            None => return "cache: the output is as the last build left it".to_owned(),
            Some((c, dir)) => {
                let what = match c.op {
                    Op::Create => "is gone",
                    Op::Delete => "is new",
                    _ => "was edited",
                };
                format!("{dir} changed since the last build: {} {what}", c.path)
            }
        },
    };
    let mut verbose = format!(
        "cache: re-rendering {} of {}, because {why}",
        crate::diagnostic::plural(compiled, "job"),
        jobs,
    );
    // Each file's own reason, when the line above could not name them all.
    if dirty.len() > 1 {
        for (name, dirty) in &dirty {
            verbose.push_str(&format!("\ncache:   {name} {dirty}"));
        }
    }
    verbose
}
