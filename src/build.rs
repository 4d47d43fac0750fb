//! One build, as `build`, `build --check` and `diff` run it, in one line:
//! ask the build cache which definition files' results are known and
//! compile the others (a no-op compiles none), or, when the cache cannot
//! tell, compile everything; plan every output directory; for `build`,
//! stage every file before any is linked in, and record the build for the
//! next. The CLI resolves where a build reads and writes ([`Targets`]),
//! says what to run ([`Mode`]) and formats what comes back ([`Built`]);
//! [`Report`] is how it hears of what happens on the way.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::diagnostic::Diagnostic;
use crate::plan::stream::{self, Pending, Stager, Stagers};
use crate::plan::{self, Op, Plan};
use crate::project::Project;
use crate::{cache, pipeline};

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
/// One path: plan every directory, then show the warnings, then (for
/// `build`) stage every directory before linking any in, and record. Only
/// how the plans are made differs: from the record, compiling only the
/// definition files whose results it does not know ([`incremental`]; a
/// no-op compiles none), or, when it cannot tell, compiling every file
/// ([`compile_all`]).
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
    // Only the definition files that changed since the last build (none:
    // a no-op), when the build cache can tell.
    let from_record = match &cache {
        Ok(c) => c
            .incremental(&req, &targets.pipeline_sets())
            .and_then(|inc| incremental(targets, inc, mode == Mode::Write)),
        Err(why) => Err(why.clone()),
    };
    let planned = match from_record {
        Ok((planned, verbose)) => {
            report.cache(&verbose);
            planned
        }
        Err(why) => {
            report.cache(&format!("cache: compiling, because {why}"));
            compile_all(cwd, targets, paths, &cache, mode).map_err(|e| report.fail(e))?
        }
    };
    let Planned {
        dirs,
        locks,
        warnings,
        refused,
        read,
        mut state,
        ..
    } = planned;
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

/// Plans every directory by compiling every definition file, planning (and,
/// for `build`, staging) each job's files as it is rendered
/// ([`plan::stream`]), so that the output tree is never held whole. For
/// `build`, every directory is locked first. `Err`: the findings that stop the build,
/// nothing written.
fn compile_all(
    cwd: &Path,
    targets: &Targets,
    paths: &[PathBuf],
    cache: &Result<cache::Cache, String>,
    mode: Mode,
) -> Result<Planned, Vec<Diagnostic>> {
    let write = mode == Mode::Write;
    let record_it = cache.is_ok() && mode != Mode::Diff;
    // Locked before anything is staged, in a fixed order (every set's
    // output directory, then the build directories that exist): what is
    // planned is what is written, even with a second build racing.
    let mut locks = Vec::new();
    let release =
        |locks: Vec<plan::Lock>| locks.into_iter().rev().for_each(plan::Lock::release_unused);
    let dirs = targets.sets.iter().map(|s| &s.output).chain(
        targets
            .sets
            .iter()
            .filter_map(|s| s.build_output.as_ref())
            .filter(|d| d.is_dir()),
    );
    let mut locked: Vec<PathBuf> = Vec::new();
    for dir in dirs.filter(|_| write) {
        if locked.contains(dir) {
            continue;
        }
        match plan::lock(dir) {
            Ok(l) => locks.push(l),
            Err(e) => {
                release(locks);
                return Err(vec![e]);
            }
        }
        locked.push(dir.clone());
    }
    let stage_mode = match mode {
        Mode::Write => stream::Mode::Stage,
        Mode::Check => stream::Mode::Plan,
        // Only the files that change are kept, for their diff.
        Mode::Diff => stream::Mode::Keep,
    };
    let mut stagers = stagers(targets, record_it, stage_mode);
    let Desired {
        dests,
        read,
        mut state,
        mut warnings,
    } = match desired_into(cwd, paths, targets, record_it, Some(&stagers)) {
        Ok(d) => d,
        Err(findings) => {
            // Dropping the stagers removes what they staged.
            drop(stagers);
            release(locks);
            return Err(findings);
        }
    };
    let (plans, refused) = finish_all(
        dests,
        &mut stagers,
        (&mut state, record_it),
        &mut warnings,
        |d| {
            if write && !locked.contains(&d.dir) {
                // A build directory this build makes.
                locks.push(plan::lock(&d.dir)?);
                locked.push(d.dir.clone());
            }
            Ok(())
        },
    );
    let dirs = plans
        .into_iter()
        .map(|f| PlannedDir {
            directory: Directory {
                plan: f.plan,
                shown: f.shown,
                label_runs: f.label_runs,
            },
            staged: f.staged,
        })
        .collect();
    Ok(Planned {
        dirs,
        locks,
        warnings,
        refused,
        read,
        state,
    })
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

/// A directory trainc writes, and what it should hold.
struct Dest {
    dir: PathBuf,
    /// How messages name it.
    shown: String,
    /// Its files rendered in memory.
    tree: crate::emit::Tree,
    /// The set whose manifests these are; `None`: build specs.
    set: Option<usize>,
    /// The files of its that a sink took as they were rendered
    /// ([`pipeline::Output::streamed`]), with their hashes when asked for.
    streamed: Vec<(String, Option<String>)>,
    /// The root kustomization's entries besides the jobs, when unlisted
    /// YAML in it is warned about: the project's own output.
    unlisted: Option<Vec<String>>,
    /// Manifests (not build specs) of a build that writes several output
    /// directories: `diff` names it with the runs it changes.
    label_runs: bool,
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

/// What [`desired_into`] compiled.
struct Desired {
    /// The directories, each with what it should hold.
    dests: Vec<Dest>,
    read: pipeline::Read,
    /// What the build cache records of the build.
    state: cache::State,
    warnings: Vec<Diagnostic>,
}

/// Everything up to, not including, touching the output directories: the
/// same for `build`, `build --check` and `diff`. For each set, the manifests
/// come first; build specs follow when the set writes them and there are
/// any, or were. Also returns what was read and, when `record`, the state
/// for the build cache.
/// With a `sink`, the jobs' files of the sets it streams are handed to it
/// as they are rendered instead of kept in the trees.
fn desired_into(
    cwd: &Path,
    paths: &[PathBuf],
    targets: &Targets,
    record: bool,
    sink: Option<&dyn crate::plan::stream::Sink>,
) -> Result<Desired, Vec<Diagnostic>> {
    let project = &targets.project;
    let sets = targets.pipeline_sets();
    let compiled = pipeline::desired_into(project, cwd, paths, &sets, sink)?;
    let state = if record {
        cache::State::of(&sets, &compiled)
    } else {
        cache::State::default()
    };
    let warnings = compiled.warnings;
    let several = targets.sets.len() > 1 || targets.sets.iter().any(|s| s.variant.is_some());
    let mut dests = Vec::new();
    for (i, (set, out)) in targets.sets.iter().zip(compiled.outputs).enumerate() {
        dests.push(Dest {
            shown: project.shown_dir(&set.output),
            dir: set.output.clone(),
            tree: out.manifests,
            set: Some(i),
            streamed: out
                .streamed
                .into_iter()
                .map(|(rel, taken)| (rel, taken.hash))
                .collect(),
            // What a controller syncing the project's output would miss.
            unlisted: set.own.then_some(out.extra),
            label_runs: several,
        });
        if let Some(dir) = &set.build_output
            && (!out.builds.is_empty() || dir.is_dir())
        {
            dests.push(Dest {
                shown: project.shown_dir(dir),
                dir: dir.clone(),
                tree: out.builds,
                set: None,
                streamed: Vec::new(),
                unlisted: None,
                label_runs: false,
            });
        }
    }
    Ok(Desired {
        dests,
        read: compiled.read,
        state,
        warnings,
    })
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

/// A directory, planned.
struct Finished {
    plan: Plan,
    /// How messages name the directory.
    shown: String,
    /// Whether `diff` names the directory with the runs it changes (see
    /// [`Dest::label_runs`]).
    label_runs: bool,
    /// What was staged for it, when its files were staged as rendered.
    staged: Option<Pending>,
}

/// Plans each directory: what a stager took as it was rendered, the rest
/// by the walk every build plans with ([`crate::plan::merge`]), after
/// `before` (which may refuse) said yes to a directory no stager took.
/// Every directory's plan, adding to `warnings` what the unlisted-files
/// check finds and to `state` what each walk saw; or every refusal of
/// every directory.
fn finish_all(
    dests: Vec<Dest>,
    stagers: &mut Stagers,
    (state, record): (&mut cache::State, bool),
    warnings: &mut Vec<Diagnostic>,
    mut before: impl FnMut(&Dest) -> Result<(), Diagnostic>,
) -> (Vec<Finished>, Vec<Diagnostic>) {
    let mut plans = Vec::with_capacity(dests.len());
    let mut refused = Vec::new();
    for d in dests {
        let stager = d
            .set
            .and_then(|i| stagers.0.get_mut(i))
            .and_then(Option::take);
        let streamed = match stager {
            Some(stager) => match stager.finish() {
                Ok(s) => Some(s),
                Err(e) => {
                    refused.extend(e);
                    continue;
                }
            },
            None => match before(&d) {
                Ok(()) => None,
                Err(e) => {
                    refused.push(e);
                    continue;
                }
            },
        };
        match finish(d, streamed, state, record) {
            Ok((f, unlisted)) => {
                warnings.extend(unlisted);
                plans.push(f);
            }
            Err(e) => refused.extend(e),
        }
    }
    (plans, refused)
}

/// Plans `d`, with what its stager planned and staged (`streamed`): its
/// plan and the unlisted-files warning, or what it refuses. With `record`,
/// what the walk saw is kept in `state` for the build's record.
fn finish(
    d: Dest,
    streamed: Option<stream::Streamed>,
    state: &mut cache::State,
    record: bool,
) -> Result<(Finished, Option<Diagnostic>), Vec<Diagnostic>> {
    use crate::plan::merge::{self, Want};
    let mut want: Vec<(String, Want)> = d
        .streamed
        .into_iter()
        .map(|(rel, hash)| (rel, Want::Taken(hash)))
        .chain(d.tree.into_iter().map(|(rel, b)| (rel, Want::Bytes(b))))
        .collect();
    want.sort_by(|a, b| crate::plan::snapshot::walk_cmp(&a.0, &b.0));
    let check = d
        .unlisted
        .as_deref()
        .map(|entries| crate::resources::UnlistedCheck {
            output: &d.dir,
            entries,
        });
    let (mut changes, temps, pending) = match streamed {
        Some(s) => (s.changes, s.temps, Some(s.pending)),
        None => (Vec::new(), HashSet::new(), None),
    };
    let merged = merge::plan(merge::Wanted {
        root: &d.dir,
        shown: &d.shown,
        want,
        recorded: None,
        unlisted: check.as_ref().map(|c| c as &dyn merge::Unlisted),
        staged: temps,
    })
    .map_err(|stopped| match stopped {
        merge::Stopped::Failed(e) => vec![e],
        // Nothing was known: every file was compared.
        merge::Stopped::Changed(why) => vec![Diagnostic::new(format!("internal error: {why}"))],
    })?;
    if !merged.refused.is_empty() {
        return Err(merged.refused);
    }
    let unlisted = crate::resources::unlisted_warning(&d.shown, &merged.unlisted);
    if record {
        state.walked(&d.dir, merged.entries);
    }
    changes.extend(merged.changes);
    changes.sort_by(|a, b| a.path.cmp(&b.path));
    let plan = Plan {
        root: d.dir,
        changes,
        kept: merged.kept,
    };
    let f = Finished {
        plan,
        shown: d.shown,
        label_runs: d.label_runs,
        staged: pending,
    };
    Ok((f, unlisted))
}

/// Plans every directory from an incremental build (see
/// [`cache::incremental`]), with what `build -v` says of it; with `lock`,
/// each directory is locked before it is planned. `Err`: why the full
/// build must run, having written nothing.
fn incremental(
    targets: &Targets,
    inc: cache::Incremental,
    lock: bool,
) -> Result<(Planned, String), String> {
    let project = &targets.project;
    let several = targets.sets.len() > 1 || targets.sets.iter().any(|s| s.variant.is_some());
    let mut inc = inc;
    let mut warnings = std::mem::take(&mut inc.warnings);
    let mut locks = Vec::new();
    let mut dirs = Vec::new();
    let mut known = 0u64;
    let mut planned = || -> Result<(), String> {
        for d in std::mem::take(&mut inc.dests) {
            if lock {
                locks.push(plan::lock(&d.dir).map_err(|e| e.message)?);
            }
            let shown = project.shown_dir(&d.dir);
            let label_runs = several && !d.builds;
            // What a controller syncing the project's output would miss,
            // found by the same walk.
            let set = &targets.sets[d.set];
            let unlisted = (set.own && !d.builds)
                .then(|| inc.extra.get(d.set).map(Vec::as_slice))
                .flatten();
            let p = cache::incremental::plan(d, &shown, unlisted, &mut inc.state)?;
            warnings.extend(crate::resources::unlisted_warning(&shown, &p.unlisted));
            known += p.known;
            dirs.push(Directory {
                plan: p.plan,
                shown,
                label_runs,
            });
        }
        inc.within_limit(known)
    };
    if let Err(why) = planned() {
        // The full build runs instead, and locks for itself: what these
        // locks made is removed, as that build would if it failed.
        locks.into_iter().rev().for_each(plan::Lock::release_unused);
        return Err(why);
    }
    let verbose = verbose(&inc, &dirs);
    let dirs = dirs
        .into_iter()
        .map(|directory| PlannedDir {
            directory,
            staged: None,
        })
        .collect();
    let planned = Planned {
        dirs,
        locks,
        warnings,
        refused: Vec::new(),
        read: inc.read,
        state: inc.state,
    };
    Ok((planned, verbose))
}

/// What `build -v` says of an incremental build: how many jobs it compiled,
/// of how many, and why; or that the output is as the last build left it.
fn verbose(inc: &cache::Incremental, dirs: &[Directory]) -> String {
    let why = match inc.why() {
        Some(why) => why,
        None => match dirs
            .iter()
            .find_map(|d| Some((d.plan.pending().next()?, &d.shown)))
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
        crate::diagnostic::plural(inc.compiled, "job"),
        inc.jobs,
    );
    // Each file's own reason, when the line above could not name them all.
    if inc.dirty.len() > 1 {
        for (name, dirty) in &inc.dirty {
            verbose.push_str(&format!("\ncache:   {name} {dirty}"));
        }
    }
    verbose
}
