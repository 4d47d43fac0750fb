//! Command-line interface: argument parsing and exit codes only. The work is
//! done by [`crate::pipeline`] and the stages behind it.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand, ValueEnum};

use crate::diagnostic::{self, Diagnostic};
use crate::load::project::Project;
use crate::model::definition::Target;
use crate::model::job::RoleKind;
use crate::plan::{self, Op, Plan};
use crate::validate::schema;
use crate::{cache, diff, guard, init, pipeline};

#[derive(Debug, Parser)]
#[command(
    name = "trainc",
    version,
    about = "Compile distributed training definitions into deterministic Kubernetes manifests"
)]
pub struct Cli {
    /// When to colour output.
    #[arg(long, value_enum, default_value_t = Color::Auto, global = true)]
    pub color: Color,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Color {
    Auto,
    Always,
    Never,
}

impl Color {
    fn choice(self) -> anstream::ColorChoice {
        match self {
            Color::Auto => anstream::ColorChoice::Auto,
            Color::Always => anstream::ColorChoice::Always,
            Color::Never => anstream::ColorChoice::Never,
        }
    }
}

/// How findings are reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// rustc-style diagnostics on stderr.
    Text,
    /// A JSON array of findings on stdout.
    Json,
}

/// How `diff` reports changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DiffFormat {
    Text,
    Markdown,
    Json,
}

#[derive(Debug, clap::Args)]
pub struct Inputs {
    /// Definition files or directories [default: the project's `sources`, else `jobs`].
    pub paths: Vec<PathBuf>,
    /// Project file [default: the nearest `trainc.yaml`, in the working
    /// directory or a parent, up to the top of the git repository].
    #[arg(long, value_name = "FILE")]
    pub project: Option<PathBuf>,
    /// Only this variant of the project file (repeatable) [default: the
    /// project's output and every variant].
    #[arg(long, value_name = "NAME")]
    pub variant: Vec<String>,
}

#[derive(Debug, clap::Args)]
pub struct Output {
    /// Output directory [default: the project's `output`, else `deploy`].
    #[arg(short, long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Directory for container build specs [default: the project's
    /// `buildOutput`, else `build`; none with `-o` elsewhere].
    #[arg(long, value_name = "DIR")]
    pub build_output: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check definitions against the schema and semantic rules.
    Validate {
        #[command(flatten)]
        inputs: Inputs,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Compile definitions, write the files that changed, prune the ones no
    /// longer generated.
    Build {
        #[command(flatten)]
        inputs: Inputs,
        #[command(flatten)]
        output: Output,
        /// Write nothing; exit 1 if the output directory is stale.
        #[arg(long)]
        check: bool,
        /// Compile and compare every file even when the build cache says
        /// nothing changed, and leave the cache alone.
        #[arg(long)]
        no_cache: bool,
        /// Say on stderr whether the build cache was used, and if not, why.
        #[arg(short, long)]
        verbose: bool,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Show what `build` would change, without writing: exit 0 none, 1 changes.
    Diff {
        #[command(flatten)]
        inputs: Inputs,
        #[command(flatten)]
        output: Output,
        #[arg(long, value_enum, default_value_t = DiffFormat::Text)]
        format: DiffFormat,
        /// Only the per-resource summary, no file diffs.
        #[arg(long)]
        stat: bool,
    },
    /// Run every task of one job as local processes, as the cluster would.
    Run(RunArgs),
    /// Print the JSON Schema of the definition (or of the project file).
    Schema {
        #[arg(value_enum, default_value_t = SchemaKind::Definition)]
        kind: SchemaKind,
    },
    /// Write a starter project: trainc.yaml, a definition and its schema.
    Init {
        /// Directory to write into.
        #[arg(default_value = ".")]
        dir: PathBuf,
        /// Name of the starter job.
        #[arg(long, default_value = "mnist")]
        name: String,
        /// Namespace the jobs go to.
        #[arg(long, default_value = "default")]
        namespace: String,
        /// The project's default target: `kubernetes` (plain Jobs), `jobset`
        /// (the JobSet controller) or `tfjob` (the Kubeflow Training Operator);
        /// the starter is a TensorFlow job, which `pytorchjob` does not run.
        #[arg(long, default_value = "kubernetes", value_parser = parse_target)]
        target: Target,
        /// Overwrite existing files.
        #[arg(long)]
        force: bool,
    },
}

/// The arguments of `trainc run --local`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The definition file (or directory) holding the job.
    path: PathBuf,
    /// Run on this machine (the only mode for now).
    #[arg(long, required = true)]
    local: bool,
    /// The job to run when the path holds several.
    #[arg(long, value_name = "NAME")]
    job: Option<String>,
    /// Run the job as this variant of the project file makes it.
    #[arg(long, value_name = "NAME")]
    variant: Option<String>,
    /// Project file [default: the nearest `trainc.yaml`, in the working
    /// directory or a parent, up to the top of the git repository].
    #[arg(long, value_name = "FILE")]
    project: Option<PathBuf>,
    /// Directory standing in for the job's volumes [default: a new
    /// directory under the system's temporary directory].
    #[arg(long, value_name = "DIR")]
    workdir: Option<PathBuf>,
    /// Python interpreter for `python` commands.
    #[arg(long, value_name = "PATH", default_value = "python3")]
    python: PathBuf,
    /// Override a hyperparameter, e.g. `--set epochs=5` (repeatable).
    #[arg(long = "set", value_name = "NAME=VALUE", value_parser = parse_set)]
    set: Vec<(String, String)>,
    /// Override a role's replicas, e.g. `--replicas ps=1` (repeatable).
    #[arg(long, value_name = "ROLE=N", value_parser = parse_replicas)]
    replicas: Vec<(RoleKind, u32)>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum SchemaKind {
    Definition,
    Project,
}

/// How a successful run ended; errors are exit code 2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Exit 0: valid, built, current, no changes.
    Ok,
    /// Exit 1: `build --check` found stale output; `diff` found changes.
    Changes,
    /// `run --local`: the training's own exit status.
    Exit(u8),
}

fn parse_set(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err("expected NAME=VALUE, e.g. `epochs=5`".to_owned()),
    }
}

fn parse_target(s: &str) -> Result<Target, String> {
    Target::ALL
        .into_iter()
        .find(|t| t.as_str() == s)
        .ok_or_else(|| format!("unknown target `{s}`: use kubernetes, jobset, tfjob or pytorchjob"))
}

fn parse_replicas(s: &str) -> Result<(RoleKind, u32), String> {
    let (role, n) = s
        .split_once('=')
        .ok_or_else(|| "expected ROLE=N, e.g. `ps=1`".to_owned())?;
    let kind = RoleKind::ALL
        .into_iter()
        .find(|k| k.as_str() == role)
        .ok_or_else(|| format!("unknown role `{role}`: use chief, ps, worker or evaluator"))?;
    let n = n
        .parse()
        .map_err(|_| format!("`{n}` is not a number of replicas"))?;
    Ok((kind, n))
}

/// A failed run: what to tell the user, and in which format.
pub struct Failure {
    pub diagnostics: Vec<Diagnostic>,
    pub format: Format,
}

fn fail(format: Format) -> impl Fn(Vec<Diagnostic>) -> Failure {
    move |mut diagnostics| {
        diagnostic::normalize(&mut diagnostics);
        Failure {
            diagnostics,
            format,
        }
    }
}

/// The working directory, canonical so that paths below it display relative.
fn current_dir() -> Result<PathBuf, Failure> {
    std::env::current_dir()
        .and_then(|d| d.canonicalize())
        .map_err(|e| Failure {
            diagnostics: vec![Diagnostic::new(format!(
                "cannot read the working directory: {e}"
            ))],
            format: Format::Text,
        })
}

fn plural(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

/// A directory trainc writes, and what it should hold.
struct Dest {
    dir: PathBuf,
    /// How messages name it.
    shown: String,
    tree: crate::emit::Tree,
    /// Manifests (not build specs) of a build that writes several output
    /// directories: `diff` names it with the runs it changes.
    label_runs: bool,
}

/// One output directory a build writes (the project's own, or a
/// variant's), and its build directory.
struct Set {
    /// An index into the project's variants; `None`: the project's own.
    variant: Option<usize>,
    output: PathBuf,
    /// The build-spec directory, when this build writes one.
    build_output: Option<PathBuf>,
    /// Whether `output` is the one the project file configures (no `-o`,
    /// or `-o` naming it): only then does it list the `resources`, and is
    /// unlisted YAML in it warned about.
    own: bool,
}

impl Set {
    /// Variant `i`, into the directories the project file gives it.
    fn variant(project: &Project, i: usize) -> Self {
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
struct Targets {
    project: Project,
    sets: Vec<Set>,
}

impl Targets {
    /// The sets as the pipeline takes them.
    fn pipeline_sets(&self) -> Vec<pipeline::Set<'_>> {
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
    fn dirs(&self) -> Vec<PathBuf> {
        self.sets
            .iter()
            .flat_map(|s| std::iter::once(s.output.clone()).chain(s.build_output.clone()))
            .collect()
    }
}

/// The variants `--variant` names, or an error; none for none.
fn selected(project: &Project, names: &[String]) -> Result<Vec<usize>, Vec<Diagnostic>> {
    let chosen = project.select(names)?;
    Ok(project
        .variants
        .iter()
        .enumerate()
        .filter(|(_, v)| chosen.iter().any(|c| c.name == v.name))
        .map(|(i, _)| i)
        .collect())
}

fn targets(
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

/// Everything up to, not including, touching the output directories: the
/// same for `build`, `build --check` and `diff`. For each set, the manifests
/// come first; build specs follow when the set writes them and there are
/// any, or were. Also returns what was read, for the build cache.
fn desired(
    cwd: &Path,
    inputs: &Inputs,
    targets: &Targets,
    fail: &impl Fn(Vec<Diagnostic>) -> Failure,
) -> Result<(Vec<Dest>, pipeline::Read, Vec<Diagnostic>), Failure> {
    let project = &targets.project;
    let compiled =
        pipeline::desired(project, cwd, &inputs.paths, &targets.pipeline_sets()).map_err(fail)?;
    let mut warnings = compiled.warnings;
    let several = targets.sets.len() > 1 || targets.sets.iter().any(|s| s.variant.is_some());
    let mut dests = Vec::new();
    for (set, out) in targets.sets.iter().zip(compiled.outputs) {
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
            label_runs: several,
        });
        if let Some(dir) = &set.build_output
            && (!out.builds.is_empty() || dir.is_dir())
        {
            dests.push(Dest {
                shown: project.shown_dir(dir),
                dir: dir.clone(),
                tree: out.builds,
                label_runs: false,
            });
        }
    }
    Ok((dests, compiled.read, warnings))
}

/// The output directory is a function of all its inputs: building some of a
/// project's definitions into the project's output would prune every other
/// job. So paths given without `-o` must name exactly the project's
/// definitions (`trainc build jobs/` in a project whose sources are `jobs`).
fn partial_guard(project: &Project, cwd: &Path, paths: &[PathBuf]) -> Result<(), Vec<Diagnostic>> {
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
fn status(plans: &[(Plan, String)], changed: impl Fn(&Plan, &str) -> String) -> String {
    let line = |plan: &Plan, dir: &str| {
        if plan.is_noop() {
            format!("{}\n", up_to_date(&[(plan.changes.len(), dir)]))
        } else {
            changed(plan, dir)
        }
    };
    if plans.iter().all(|(p, _)| p.is_noop()) {
        let dirs: Vec<(usize, &str)> = plans
            .iter()
            .map(|(p, d)| (p.changes.len(), d.as_str()))
            .collect();
        format!("{}\n", up_to_date(&dirs))
    } else {
        plans.iter().map(|(p, d)| line(p, d)).collect()
    }
}

/// Plans every destination; the first refusal ends it.
fn plan_all(
    dests: Vec<Dest>,
    fail: &impl Fn(Vec<Diagnostic>) -> Failure,
) -> Result<Vec<(Plan, String)>, Failure> {
    dests
        .into_iter()
        .map(|d| Ok((plan::plan(&d.dir, &d.shown, d.tree).map_err(fail)?, d.shown)))
        .collect()
}

/// `deploy is up to date (17 files)`, or for several directories
/// `deploy and build are up to date (17 and 2 files)`,
/// `deploy, build and deploy-cpu are up to date (17, 2 and 17 files)`.
fn up_to_date(dirs: &[(usize, impl AsRef<str>)]) -> String {
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

fn summary(plan: &Plan) -> String {
    format!(
        "{} created, {} updated, {} deleted, {} unchanged",
        plan.count(Op::Create),
        plan.count(Op::Update),
        plan.count(Op::Delete),
        plan.count(Op::Unchanged)
    )
}

pub fn run(cli: Cli) -> Result<Status, Failure> {
    let cwd = current_dir()?;
    let mut stdout = anstream::AutoStream::new(std::io::stdout(), cli.color.choice()).lock();
    let out = &mut stdout;
    match cli.command {
        Command::Validate { inputs, format } => validate(&cwd, out, &inputs, format, cli.color),
        Command::Build {
            inputs,
            output,
            check,
            no_cache,
            verbose,
            format,
        } => {
            let opts = BuildOptions {
                check,
                no_cache,
                verbose,
                format,
                color: cli.color,
            };
            build(&cwd, out, &inputs, &output, &opts)
        }
        Command::Diff {
            inputs,
            output,
            format,
            stat,
        } => diff(&cwd, out, &inputs, &output, format, stat, cli.color),
        Command::Run(args) => run_local(&cwd, stdout, args, cli.color),
        Command::Schema { kind } => {
            let text = match kind {
                SchemaKind::Definition => schema::TRAINING_JOB_SCHEMA,
                SchemaKind::Project => schema::PROJECT_SCHEMA,
            };
            let _ = write!(out, "{text}");
            Ok(Status::Ok)
        }
        Command::Init {
            dir,
            name,
            namespace,
            target,
            force,
        } => {
            let starter = init::Starter {
                name: &name,
                namespace: &namespace,
                target,
            };
            init(&cwd, out, &dir, &starter, force)
        }
    }
}

/// Where commands print: stdout, coloured as `--color` says.
type Out = anstream::AutoStream<std::io::StdoutLock<'static>>;

/// `trainc validate`.
fn validate(
    cwd: &Path,
    stdout: &mut Out,
    inputs: &Inputs,
    format: Format,
    color: Color,
) -> Result<Status, Failure> {
    let fail = fail(format);
    let project = Project::discover(cwd, inputs.project.as_deref()).map_err(&fail)?;
    let chosen = selected(&project, &inputs.variant).map_err(&fail)?;
    // Everything `build` would check but the output directories: the
    // definitions as written and as each variant patches them, templates
    // and build contexts, what each output directory would list.
    let mut sets = vec![Set {
        variant: None,
        output: project.output.clone(),
        build_output: Some(project.build_output.clone()),
        own: true,
    }];
    sets.extend(chosen.iter().map(|&i| Set::variant(&project, i)));
    let targets = Targets { project, sets };
    let compiled = pipeline::desired(
        &targets.project,
        cwd,
        &inputs.paths,
        &targets.pipeline_sets(),
    )
    .map_err(&fail)?;
    let mut warnings = compiled.warnings;
    for (set, out) in targets.sets.iter().zip(&compiled.outputs) {
        warnings.extend(crate::resources::unlisted(
            &set.output,
            &targets.project.shown_dir(&set.output),
            &out.extra,
        ));
    }
    if format == Format::Json {
        let _ = write!(stdout, "{}", diagnostic::render_json(&warnings));
    } else {
        warn(&warnings, color);
        let jobs = compiled.outputs.first().map_or(0, |o| o.jobs);
        let names: Vec<&str> = chosen
            .iter()
            .map(|&i| targets.project.variants[i].name.as_str())
            .collect();
        let variants = match names.as_slice() {
            [] => String::new(),
            [one] => format!(", as written and in variant {one}"),
            [first @ .., last] => format!(
                ", as written and in variants {} and {last}",
                first.join(", ")
            ),
        };
        let _ = writeln!(stdout, "{} valid{variants}", plural(jobs, "job"));
    }
    Ok(Status::Ok)
}

/// The flags of `trainc build`.
struct BuildOptions {
    check: bool,
    no_cache: bool,
    verbose: bool,
    format: Format,
    color: Color,
}

/// Prints warnings as text on stderr, where failures go.
fn warn(warnings: &[Diagnostic], color: Color) {
    if warnings.is_empty() {
        return;
    }
    let mut stderr = anstream::AutoStream::new(std::io::stderr(), color.choice());
    let _ = write!(stderr, "{}", diagnostic::render_text(warnings, true));
}

/// `trainc build` and `trainc build --check`.
fn build(
    cwd: &Path,
    stdout: &mut Out,
    inputs: &Inputs,
    output: &Output,
    opts: &BuildOptions,
) -> Result<Status, Failure> {
    let BuildOptions {
        check,
        no_cache,
        verbose,
        format,
        color,
    } = *opts;
    let fail = fail(format);
    let targets = targets(cwd, inputs, output, &fail)?;
    let req = cache::Request {
        cwd,
        project: &targets.project,
        paths: &inputs.paths,
        dirs: targets.dirs(),
    };
    let cache = if no_cache {
        Err("of --no-cache".to_owned())
    } else {
        cache::Cache::open(&req)
    };
    let fresh = match &cache {
        Ok(c) => c.fresh(&req),
        Err(why) => Err(why.clone()),
    };
    if verbose {
        match &fresh {
            Ok(_) => eprintln!("cache: the output is as the last build left it"),
            Err(why) => eprintln!("cache: compiling, because {why}"),
        }
    }
    if let Ok(dests) = fresh {
        // As the full path below: `--check` prints status lines even in JSON.
        if format == Format::Json && !check {
            let _ = write!(stdout, "{}", diagnostic::render_json(&[]));
        } else {
            let dirs: Vec<(usize, String)> = dests
                .iter()
                .map(|(d, n)| (*n, targets.project.shown_dir(d)))
                .collect();
            let _ = writeln!(stdout, "{}", up_to_date(&dirs));
        }
        return Ok(Status::Ok);
    }
    let (dests, read, warnings) = desired(cwd, inputs, &targets, &fail)?;
    if format != Format::Json {
        warn(&warnings, color);
    }
    let record = |plans: &[(Plan, String)]| {
        let Ok(c) = &cache else { return };
        let plans: Vec<&Plan> = plans.iter().map(|(p, _)| p).collect();
        if let Err(why) = c.save(&req, &read, &plans)
            && verbose
        {
            eprintln!("cache: not recorded, because {why}");
        }
    };
    if check {
        let plans = plan_all(dests, &fail)?;
        let current = plans.iter().all(|(p, _)| p.is_noop());
        if current {
            record(&plans);
        }
        let _ = write!(
            stdout,
            "{}",
            status(&plans, |plan, dir| {
                let mut s = format!("{dir} is stale: {}\n", summary(plan));
                for c in plan.pending() {
                    s.push_str(&format!("{} {dir}/{}\n", c.op.sign(), c.path));
                }
                s
            })
        );
        if current {
            return Ok(Status::Ok);
        }
        let _ = writeln!(stdout, "run `trainc build` and commit the result");
        return Ok(Status::Changes);
    }
    // Lock before reading the directories, in a fixed order: what is
    // planned is what is written, even with a second build racing.
    let mut locks = Vec::new();
    for d in &dests {
        locks.push(plan::lock(&d.dir).map_err(|e| fail(vec![e]))?);
    }
    // Every plan before any write: a refusal anywhere writes nothing.
    let plans = plan_all(dests, &fail)?;
    for (plan, _) in &plans {
        plan::apply(plan).map_err(&fail)?;
    }
    // Still locked: the snapshot is of this build's output.
    record(&plans);
    drop(locks);
    if format == Format::Json {
        let _ = write!(stdout, "{}", diagnostic::render_json(&warnings));
        return Ok(Status::Ok);
    }
    // Nothing to do is one line, however many directories.
    let _ = write!(
        stdout,
        "{}",
        status(&plans, |plan, dir| format!(
            "updated {dir}: {}\n",
            summary(plan)
        ))
    );
    Ok(Status::Ok)
}

/// `trainc diff`.
fn diff(
    cwd: &Path,
    stdout: &mut Out,
    inputs: &Inputs,
    output: &Output,
    format: DiffFormat,
    stat: bool,
    color: Color,
) -> Result<Status, Failure> {
    let fail = fail(if format == DiffFormat::Json {
        Format::Json
    } else {
        Format::Text
    });
    let mut reports = Vec::new();
    let mut noop = true;
    let targets = targets(cwd, inputs, output, &fail)?;
    let (dests, _, warnings) = desired(cwd, inputs, &targets, &fail)?;
    if format != DiffFormat::Json {
        warn(&warnings, color);
    }
    for d in dests {
        let plan = plan::plan(&d.dir, &d.shown, d.tree).map_err(&fail)?;
        noop &= plan.is_noop();
        let mut report = diff::report(&plan, &d.shown);
        if d.label_runs {
            for r in &mut report.runs {
                r.output = Some(d.shown.clone());
            }
        }
        reports.push(report);
    }
    let report = diff::Report::merge(reports);
    let text = match format {
        DiffFormat::Text => diff::render_text(&report, true, stat),
        DiffFormat::Markdown => diff::render_markdown(&report, stat),
        DiffFormat::Json => diff::render_json(&report, &warnings),
    };
    let _ = write!(stdout, "{text}");
    Ok(if noop { Status::Ok } else { Status::Changes })
}

/// `trainc run --local`. Takes stdout by value: it is released before the
/// tasks start, so their output is not held behind its lock.
fn run_local(cwd: &Path, mut stdout: Out, args: RunArgs, color: Color) -> Result<Status, Failure> {
    let RunArgs {
        path,
        local: _,
        job,
        variant,
        project,
        workdir,
        python,
        set,
        replicas,
    } = args;
    let fail = fail(Format::Text);
    let project = Project::discover(cwd, project.as_deref()).map_err(&fail)?;
    let variant = match &variant {
        Some(name) => project
            .select(std::slice::from_ref(name))
            .map_err(&fail)?
            .into_iter()
            .next(),
        None => None,
    };
    let (jobs, warnings) =
        pipeline::check_sets(&project, cwd, std::slice::from_ref(&path), &[variant])
            .map_err(&fail)?;
    let mut jobs = jobs.into_iter().next().unwrap_or_default();
    warn(&warnings, color);
    let build_output = variant
        .and_then(|v| v.build_output.as_deref())
        .unwrap_or(&project.build_output);
    pipeline::images(&project, &mut jobs, build_output).map_err(&fail)?;
    let mut job = pick(jobs, job.as_deref()).map_err(|d| fail(vec![d]))?;
    let workdir = match workdir {
        Some(w) => cwd.join(w),
        None => std::env::temp_dir().join(format!(
            "trainc-run-{}-{}-{}",
            job.namespace,
            job.name,
            std::process::id()
        )),
    };
    // Tasks run in the work directory: a relative interpreter path
    // means the one relative to here.
    let python = if python.components().count() > 1 {
        cwd.join(python)
    } else {
        python
    };
    let opts = crate::run::Options {
        workdir: workdir.clone(),
        python,
        set,
        replicas,
    };
    crate::run::apply_overrides(&mut job, &opts).map_err(|d| fail(vec![d]))?;
    if crate::run::uses_python(&job) {
        crate::run::preflight(&opts.python, &job).map_err(|d| fail(vec![d]))?;
    }
    let tasks = crate::run::tasks(&job, &opts).map_err(|d| fail(vec![d]))?;
    let gpus: u32 = job.roles.iter().map(|r| r.gpu).sum();
    let _ = writeln!(
        stdout,
        "running {}/{} locally: {} ({}), work directory {}",
        job.namespace,
        job.name,
        plural(tasks.len(), "task"),
        tasks
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        workdir.display()
    );
    if gpus > 0 {
        let _ = writeln!(stdout, "note: GPU requests are ignored locally");
    }
    for note in crate::run::notes(&job, |name| std::env::var_os(name).is_some()) {
        let _ = writeln!(stdout, "{note}");
    }
    drop(stdout);
    let code = crate::run::supervise(tasks, &workdir).map_err(|d| fail(vec![d]))?;
    Ok(Status::Exit(u8::try_from(code).unwrap_or(1)))
}

/// `trainc init`.
fn init(
    cwd: &Path,
    stdout: &mut Out,
    dir: &Path,
    starter: &init::Starter,
    force: bool,
) -> Result<Status, Failure> {
    let dir = cwd.join(dir);
    let written = init::init(&dir, starter, force).map_err(fail(Format::Text))?;
    for f in written {
        let _ = writeln!(
            stdout,
            "wrote {}",
            crate::load::display_name(cwd, &dir.join(f))
        );
    }
    Ok(Status::Ok)
}

/// The one job to run: the only one, or the one named by `--job`.
fn pick(jobs: Vec<crate::model::Job>, name: Option<&str>) -> Result<crate::model::Job, Diagnostic> {
    let names: Vec<String> = jobs.iter().map(|j| j.name.clone()).collect();
    let mut matching: Vec<crate::model::Job> = jobs
        .into_iter()
        .filter(|j| name.is_none_or(|n| j.name == n))
        .collect();
    match (matching.len(), name) {
        (1, _) => Ok(matching.remove(0)),
        (0, Some(n)) => Err(Diagnostic::new(format!("no job named `{n}`"))
            .hint(format!("the path holds {}", names.join(", ")))),
        _ => Err(Diagnostic::new(format!(
            "the path holds {} jobs: {}",
            names.len(),
            names.join(", ")
        ))
        .hint("pick one with `--job NAME`")),
    }
}

/// Prints a failure: text on stderr (coloured per `--color`), or JSON on stdout.
pub fn report(failure: &Failure, color: Color) {
    if failure.format == Format::Json {
        let _ = write!(
            std::io::stdout(),
            "{}",
            diagnostic::render_json(&failure.diagnostics)
        );
        return;
    }
    let mut stderr = anstream::AutoStream::new(std::io::stderr(), color.choice());
    let _ = write!(
        stderr,
        "{}",
        diagnostic::render_text(&failure.diagnostics, true)
    );
}
