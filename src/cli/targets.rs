//! Where `build`, `build --check` and `diff` read and write: the project's
//! output directories and their guards, and the status lines of their plans.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::{Failure, Inputs, Output, plural};
use crate::diagnostic::Diagnostic;
use crate::load::project::Project;
use crate::plan::stream::{Mode, Pending, Stager, Stagers};
use crate::plan::{self, Op, Plan};
use crate::{guard, pipeline};

/// A directory trainc writes, and what it should hold.
pub(super) struct Dest {
    pub(super) dir: PathBuf,
    /// How messages name it.
    pub(super) shown: String,
    pub(super) tree: crate::emit::Tree,
    /// The set whose manifests these are; `None`: build specs.
    pub(super) set: Option<usize>,
    /// The files of `tree`'s that a sink took as they were rendered
    /// ([`pipeline::Output::streamed`]).
    pub(super) streamed: Vec<String>,
    /// Manifests (not build specs) of a build that writes several output
    /// directories: `diff` names it with the runs it changes.
    pub(super) label_runs: bool,
}

/// One output directory a build writes (the project's own, or a
/// variant's), and its build directory.
pub(super) struct Set {
    /// An index into the project's variants; `None`: the project's own.
    pub(super) variant: Option<usize>,
    pub(super) output: PathBuf,
    /// The build-spec directory, when this build writes one.
    pub(super) build_output: Option<PathBuf>,
    /// Whether `output` is the one the project file configures (no `-o`,
    /// or `-o` naming it): only then does it list the `resources`, and is
    /// unlisted YAML in it warned about.
    pub(super) own: bool,
}

impl Set {
    /// Variant `i`, into the directories the project file gives it.
    pub(super) fn variant(project: &Project, i: usize) -> Self {
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
pub(super) struct Targets {
    pub(super) project: Project,
    pub(super) sets: Vec<Set>,
}

impl Targets {
    /// The sets as the pipeline takes them.
    pub(super) fn pipeline_sets(&self) -> Vec<pipeline::Set<'_>> {
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
    pub(super) fn dirs(&self) -> Vec<PathBuf> {
        self.sets
            .iter()
            .flat_map(|s| std::iter::once(s.output.clone()).chain(s.build_output.clone()))
            .collect()
    }
}

/// The variants `--variant` names, or an error; none for none.
pub(super) fn selected(project: &Project, names: &[String]) -> Result<Vec<usize>, Vec<Diagnostic>> {
    let chosen = project.select(names)?;
    Ok(project
        .variants
        .iter()
        .enumerate()
        .filter(|(_, v)| chosen.iter().any(|c| c.name == v.name))
        .map(|(i, _)| i)
        .collect())
}

pub(super) fn targets(
    cwd: &Path,
    inputs: &Inputs,
    output: &Output,
    fail: &impl Fn(Vec<Diagnostic>) -> Failure,
) -> Result<Targets, Failure> {
    let mut project = Project::discover(cwd, inputs.project.as_deref()).map_err(fail)?;
    if !inputs.variant.is_empty() && (output.output.is_some() || output.build_output.is_some()) {
        return Err(fail(vec![
            Diagnostic::new("`--variant` cannot be given with `-o` or `--build-output`")
                .hint("a variant is built into the directories the project file gives it (`variants.<name>.output` and `buildOutput`)"),
        ]));
    }
    let chosen = selected(&project, &inputs.variant).map_err(fail)?;
    let own_output = project.output.clone();
    if let Some(o) = &output.output {
        // Also keeps `-o` out of the definitions when it lies among them.
        project.output = cwd.join(o);
    }
    // `-o` naming the project's own output is no way around the guard.
    let same = |a: &Path, b: &Path| {
        a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
    };
    let project_output = same(&project.output, &own_output);
    let build_output = match &output.build_output {
        Some(b) => Some(cwd.join(b)),
        None => project_output.then(|| project.build_output.clone()),
    };
    let project_build = build_output
        .as_deref()
        .is_some_and(|b| same(b, &project.build_output));
    let variants = !inputs.variant.is_empty() || project_output;
    if !inputs.paths.is_empty() && (project_output || project_build || variants) {
        partial_guard(&project, cwd, &inputs.paths).map_err(fail)?;
    }
    let mut sets = Vec::new();
    if inputs.variant.is_empty() {
        sets.push(Set {
            variant: None,
            output: project.output.clone(),
            build_output,
            own: project_output,
        });
    }
    // The variants go with the project's own output: `-o` elsewhere builds
    // the paths alone.
    if variants {
        sets.extend(chosen.into_iter().map(|i| Set::variant(&project, i)));
    }
    // Where the project file sets each directory, and how messages call it.
    let labels: Vec<[String; 4]> = sets
        .iter()
        .map(|s| match s.variant.map(|i| &project.variants[i]) {
            None => [
                "output",
                "buildOutput",
                "output directory",
                "build directory",
            ]
            .map(str::to_owned),
            Some(v) => [
                v.pointer("output")[1..].to_owned(),
                v.pointer("buildOutput")[1..].to_owned(),
                format!("output directory of variant `{}`", v.name),
                format!("build directory of variant `{}`", v.name),
            ],
        })
        .collect();
    let mut dests = Vec::new();
    for (s, [out_key, build_key, out_what, build_what]) in sets.iter().zip(&labels) {
        let project_set = s.variant.is_none();
        dests.push(guard::Dest {
            path: &s.output,
            flag: (project_set && output.output.is_some()).then_some("-o"),
            key: out_key,
            what: out_what,
            own: s.own,
        });
        if let Some(b) = &s.build_output {
            dests.push(guard::Dest {
                path: b,
                flag: (project_set && output.build_output.is_some()).then_some("--build-output"),
                key: build_key,
                what: build_what,
                own: !project_set || project_build,
            });
        }
    }
    guard::check(&project, cwd, &inputs.paths, &dests).map_err(fail)?;
    Ok(Targets { project, sets })
}

/// What [`desired_into`] compiled.
pub(super) struct Desired {
    /// The directories, each with what it should hold.
    pub(super) dests: Vec<Dest>,
    pub(super) read: pipeline::Read,
    /// What the build cache records of the build.
    pub(super) state: crate::cache::State,
    pub(super) warnings: Vec<Diagnostic>,
}

/// Everything up to, not including, touching the output directories: the
/// same for `build`, `build --check` and `diff`. For each set, the manifests
/// come first; build specs follow when the set writes them and there are
/// any, or were. Also returns what was read and, when `record`, the state
/// for the build cache.
/// With a `sink`, the jobs' files of the sets it streams are handed to it
/// as they are rendered instead of kept in the trees.
pub(super) fn desired_into(
    cwd: &Path,
    inputs: &Inputs,
    targets: &Targets,
    record: bool,
    sink: Option<&dyn pipeline::Sink>,
    fail: &impl Fn(Vec<Diagnostic>) -> Failure,
) -> Result<Desired, Failure> {
    let project = &targets.project;
    let sets = targets.pipeline_sets();
    let compiled =
        pipeline::desired_into(project, cwd, &inputs.paths, &sets, sink).map_err(fail)?;
    let state = if record {
        crate::cache::State::of(&sets, &compiled)
    } else {
        crate::cache::State::default()
    };
    let mut warnings = compiled.warnings;
    let several = targets.sets.len() > 1 || targets.sets.iter().any(|s| s.variant.is_some());
    let mut dests = Vec::new();
    for (i, (set, out)) in targets.sets.iter().zip(compiled.outputs).enumerate() {
        // What a controller syncing the project's output would miss.
        if set.own {
            warnings.extend(crate::resources::unlisted(
                &set.output,
                &project.shown_dir(&set.output),
                &out.extra,
            ));
        }
        dests.push(Dest {
            shown: project.shown_dir(&set.output),
            dir: set.output.clone(),
            tree: out.manifests,
            set: Some(i),
            streamed: out.streamed.into_keys().collect(),
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
pub(super) fn stagers(targets: &Targets, hash: bool, mode: Mode) -> Stagers {
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
pub(super) struct Finished {
    pub(super) plan: Plan,
    /// How messages name the directory.
    pub(super) shown: String,
    /// Whether `diff` names the directory with the runs it changes (see
    /// [`Dest::label_runs`]).
    pub(super) label_runs: bool,
    /// What was staged for it, when its files were staged as rendered.
    pub(super) staged: Option<Pending>,
}

/// Plans each directory: a set's manifests by the stager that took them,
/// the rest in memory, after `before` (which may refuse) said yes. Every
/// directory's plan, or every refusal of every directory.
pub(super) fn finish_all(
    dests: Vec<Dest>,
    stagers: &mut Stagers,
    mut before: impl FnMut(&Dest) -> Result<(), Diagnostic>,
) -> (Vec<Finished>, Vec<Diagnostic>) {
    let mut plans = Vec::with_capacity(dests.len());
    let mut refused = Vec::new();
    for d in dests {
        let planned = match d
            .set
            .and_then(|i| stagers.0.get_mut(i))
            .and_then(Option::take)
        {
            Some(stager) => {
                let streamed: HashSet<&str> = d.streamed.iter().map(String::as_str).collect();
                stager.finish(d.tree, &streamed).map(|(p, s)| (p, Some(s)))
            }
            None => match before(&d) {
                Ok(()) => plan::plan(&d.dir, &d.shown, d.tree).map(|p| (p, None)),
                Err(e) => Err(vec![e]),
            },
        };
        match planned {
            Ok((plan, staged)) => plans.push(Finished {
                plan,
                shown: d.shown,
                label_runs: d.label_runs,
                staged,
            }),
            Err(e) => refused.extend(e),
        }
    }
    (plans, refused)
}

/// An incremental build, planned.
pub(super) struct Planned {
    pub(super) plans: Vec<(Plan, String)>,
    /// For each plan, whether `diff` names the output directory with the
    /// runs it changes (see [`Dest::label_runs`]).
    pub(super) labels: Vec<bool>,
    pub(super) locks: Vec<plan::Lock>,
    pub(super) warnings: Vec<Diagnostic>,
    pub(super) read: pipeline::Read,
    pub(super) state: crate::cache::State,
    /// For `build -v`: how many jobs were compiled, of how many, and why.
    pub(super) verbose: String,
}

/// [`desired_into`] and the plans, from an incremental build (see
/// [`crate::cache::incremental`]); with `lock`, each directory is locked
/// before it is planned. `Err`: why the full build must run, having
/// written nothing.
pub(super) fn incremental(
    targets: &Targets,
    inc: crate::cache::Incremental,
    lock: bool,
) -> Result<Planned, String> {
    let project = &targets.project;
    let several = targets.sets.len() > 1 || targets.sets.iter().any(|s| s.variant.is_some());
    let mut inc = inc;
    let mut warnings = std::mem::take(&mut inc.warnings);
    let mut locks = Vec::new();
    let mut plans = Vec::new();
    let mut labels = Vec::new();
    let mut known = 0u64;
    let mut planned = || -> Result<(), String> {
        for d in std::mem::take(&mut inc.dests) {
            if lock {
                locks.push(plan::lock(&d.dir).map_err(|e| e.message)?);
            }
            let shown = project.shown_dir(&d.dir);
            labels.push(several && !d.builds);
            // What a controller syncing the project's output would miss,
            // found by the same walk.
            let set = &targets.sets[d.set];
            let unlisted = (set.own && !d.builds)
                .then(|| inc.extra.get(d.set).map(Vec::as_slice))
                .flatten();
            let p = crate::cache::incremental::plan(d, &shown, unlisted, &mut inc.state)?;
            warnings.extend(crate::resources::unlisted_warning(&shown, &p.unlisted));
            known += p.known;
            plans.push((p.plan, shown));
        }
        inc.within_limit(known)
    };
    if let Err(why) = planned() {
        // The full build runs instead, and locks for itself: what these
        // locks made is removed, as that build would if it failed.
        locks.into_iter().rev().for_each(plan::Lock::release_unused);
        return Err(why);
    }
    let verbose = verbose(&inc, &plans);
    Ok(Planned {
        plans,
        labels,
        locks,
        warnings,
        read: inc.read,
        state: inc.state,
        verbose,
    })
}

/// What `build -v` says of an incremental build: how many jobs it compiled,
/// of how many, and why; or that the output is as the last build left it.
fn verbose(inc: &crate::cache::Incremental, plans: &[(Plan, String)]) -> String {
    let why = match inc.why() {
        Some(why) => why,
        None => match plans
            .iter()
            .find_map(|(p, dir)| Some((p.pending().next()?, dir)))
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
        plural(inc.compiled, "job"),
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

/// The output directory is a function of all its inputs: building some of a
/// project's definitions into the project's output would prune every other
/// job. So paths given without `-o` must name exactly the project's
/// definitions (`trainc build jobs/` in a project whose sources are `jobs`).
pub(super) fn partial_guard(
    project: &Project,
    cwd: &Path,
    paths: &[PathBuf],
) -> Result<(), Vec<Diagnostic>> {
    let given = pipeline::files(project, cwd, paths)?;
    // Without trainc.yaml, and no `jobs/` to stand for the project, the
    // paths alone define the output.
    let all = pipeline::files(project, cwd, &[]).unwrap_or_default();
    if given == all || (project.file.is_none() && all.is_empty()) {
        return Ok(());
    }
    let out = project.shown_dir(&project.output);
    // Run in a subdirectory, the user may not know a project is in play.
    let sources = match &project.file {
        Some(file) if project.found_above() => {
            format!("the sources of the project {}", project.shown(file))
        }
        _ => "the project's sources".to_owned(),
    };
    let missing = all.iter().filter(|f| !given.contains(f)).count();
    let extra = given.iter().filter(|f| !all.contains(f)).count();
    let what = match (missing, extra) {
        (0, n) => format!("{} outside the project's sources", plural(n, "file")),
        (n, 0) => format!(
            "leaves out {} of the project's sources",
            plural(n, "definition file")
        ),
        (m, n) => format!(
            "leaves out {} of the project's sources and adds {} outside them",
            plural(m, "definition file"),
            plural(n, "file")
        ),
    };
    Err(vec![
        Diagnostic::new(format!(
            "the paths given are not {sources} ({what}); building them into {out} would prune the other jobs"
        ))
        .hint(
            "run without paths to build the whole project, or pass `-o DIR` to build only these paths into another directory; `trainc validate PATH…` checks a subset",
        ),
    ])
}

/// The status lines of planned (or written) directories: one line when
/// every directory is current, else a line per directory, `changed` saying
/// what happens to those that are not.
pub(super) fn status(plans: &[(Plan, String)], changed: impl Fn(&Plan, &str) -> String) -> String {
    let line = |plan: &Plan, dir: &str| {
        if plan.is_noop() {
            format!("{}\n", up_to_date(&[(plan.files(), dir)]))
        } else {
            changed(plan, dir)
        }
    };
    if plans.iter().all(|(p, _)| p.is_noop()) {
        let dirs: Vec<(usize, &str)> = plans.iter().map(|(p, d)| (p.files(), d.as_str())).collect();
        format!("{}\n", up_to_date(&dirs))
    } else {
        plans.iter().map(|(p, d)| line(p, d)).collect()
    }
}

/// `deploy is up to date (17 files)`, or for several directories
/// `deploy and build are up to date (17 and 2 files)`,
/// `deploy, build and deploy-cpu are up to date (17, 2 and 17 files)`.
pub(super) fn up_to_date(dirs: &[(usize, impl AsRef<str>)]) -> String {
    /// `a`, `a and b`, `a, b and c`.
    fn and(items: &[String]) -> String {
        match items {
            [] => String::new(),
            [one] => one.clone(),
            [first @ .., last] => format!("{} and {last}", first.join(", ")),
        }
    }
    match dirs {
        [(n, dir)] => format!("{} is up to date ({})", dir.as_ref(), plural(*n, "file")),
        _ => {
            let counts: Vec<String> = dirs.iter().map(|(n, _)| n.to_string()).collect();
            let dirs: Vec<String> = dirs.iter().map(|(_, d)| d.as_ref().to_owned()).collect();
            format!("{} are up to date ({} files)", and(&dirs), and(&counts))
        }
    }
}

pub(super) fn summary(plan: &Plan) -> String {
    format!(
        "{} created, {} updated, {} deleted, {} unchanged",
        plan.count(Op::Create),
        plan.count(Op::Update),
        plan.count(Op::Delete),
        plan.count(Op::Unchanged)
    )
}
