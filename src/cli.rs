//! Command-line interface: argument parsing and exit codes only. The work is
//! done by [`crate::pipeline`] and the stages behind it.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand, ValueEnum};

use crate::diagnostic::{self, Diagnostic};
use crate::load::project::Project;
use crate::plan::{self, Op, Plan};
use crate::validate::schema;
use crate::{diff, init, pipeline};

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
    /// Project file [default: `trainc.yaml` in the working directory, if any].
    #[arg(long, value_name = "FILE")]
    pub project: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct Output {
    /// Output directory [default: the project's `output`, else `deploy`].
    #[arg(short, long, value_name = "DIR")]
    pub output: Option<PathBuf>,
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
        /// Overwrite existing files.
        #[arg(long)]
        force: bool,
    },
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

/// The output directory as messages name it: relative below the working
/// directory, absolute elsewhere (`../../../tmp/x` helps nobody).
fn shown(cwd: &Path, dir: &Path) -> String {
    let s = crate::load::display_name(cwd, dir);
    if s.is_empty() {
        ".".to_owned()
    } else if s.starts_with("../") {
        dir.to_string_lossy().into_owned()
    } else {
        s
    }
}

/// Everything up to, not including, touching the output directory: the same
/// for `build`, `build --check` and `diff`.
fn desired(
    cwd: &Path,
    inputs: &Inputs,
    output: &Output,
    fail: &impl Fn(Vec<Diagnostic>) -> Failure,
) -> Result<(PathBuf, crate::emit::Tree), Failure> {
    let mut project = Project::discover(cwd, inputs.project.as_deref()).map_err(fail)?;
    let own_output = project.output.clone();
    if let Some(o) = &output.output {
        // Also keeps `-o` out of the definitions when it lies among them.
        project.output = cwd.join(o);
    }
    // `-o` naming the project's own output is no way around the guard.
    let same = |a: &Path, b: &Path| {
        a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
    };
    if !inputs.paths.is_empty() && same(&project.output, &own_output) {
        partial_guard(&project, cwd, &inputs.paths).map_err(fail)?;
    }
    let out_dir = project.output.clone();
    let jobs = pipeline::check(&project, cwd, &inputs.paths).map_err(fail)?;
    let tree = pipeline::render(&jobs).map_err(fail)?;
    Ok((out_dir, tree))
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
    let out = crate::load::display_name(cwd, &project.output);
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
            "the paths given are not the project's sources ({what}); building them into {out} would prune the other jobs"
        ))
        .hint(
            "run without paths to build the whole project, or pass `-o DIR` to build only these paths into another directory; `trainc validate PATH…` checks a subset",
        ),
    ])
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
    let color = cli.color;
    let mut stdout = anstream::AutoStream::new(std::io::stdout(), color.choice()).lock();
    match cli.command {
        Command::Validate { inputs, format } => {
            let fail = fail(format);
            let project = Project::discover(&cwd, inputs.project.as_deref()).map_err(&fail)?;
            let jobs = pipeline::check(&project, &cwd, &inputs.paths).map_err(&fail)?;
            if format == Format::Json {
                let _ = write!(stdout, "{}", diagnostic::render_json(&[]));
            } else {
                let _ = writeln!(stdout, "{} valid", plural(jobs.len(), "job"));
            }
            Ok(Status::Ok)
        }
        Command::Build {
            inputs,
            output,
            check,
            format,
        } => {
            let fail = fail(format);
            let (out_dir, tree) = desired(&cwd, &inputs, &output, &fail)?;
            let dir = shown(&cwd, &out_dir);
            if check {
                let plan = plan::plan(&out_dir, &dir, tree).map_err(&fail)?;
                if plan.is_noop() {
                    let _ = writeln!(
                        stdout,
                        "{dir} is up to date ({})",
                        plural(plan.changes.len(), "file")
                    );
                    return Ok(Status::Ok);
                }
                let _ = writeln!(stdout, "{dir} is stale: {}", summary(&plan));
                for c in plan.pending() {
                    let _ = writeln!(stdout, "{} {dir}/{}", c.op.sign(), c.path);
                }
                let _ = writeln!(stdout, "run `trainc build` and commit the result");
                return Ok(Status::Changes);
            }
            // Lock before reading the directory: what is planned is what is
            // written, even with a second build racing this one.
            let _lock = plan::lock(&out_dir).map_err(|d| fail(vec![d]))?;
            let plan = plan::plan(&out_dir, &dir, tree).map_err(&fail)?;
            plan::apply(&plan).map_err(&fail)?;
            if format == Format::Json {
                let _ = write!(stdout, "{}", diagnostic::render_json(&[]));
            } else if plan.is_noop() {
                let _ = writeln!(
                    stdout,
                    "{dir} is up to date ({})",
                    plural(plan.changes.len(), "file")
                );
            } else {
                let _ = writeln!(stdout, "updated {dir}: {}", summary(&plan));
            }
            Ok(Status::Ok)
        }
        Command::Diff {
            inputs,
            output,
            format,
            stat,
        } => {
            let fail = fail(if format == DiffFormat::Json {
                Format::Json
            } else {
                Format::Text
            });
            let (out_dir, tree) = desired(&cwd, &inputs, &output, &fail)?;
            let dir = shown(&cwd, &out_dir);
            let plan = plan::plan(&out_dir, &dir, tree).map_err(&fail)?;
            let report = diff::report(&plan);
            let text = match format {
                DiffFormat::Text => diff::render_text(&report, true, stat),
                DiffFormat::Markdown => diff::render_markdown(&report, stat),
                DiffFormat::Json => diff::render_json(&report),
            };
            let _ = write!(stdout, "{text}");
            Ok(if plan.is_noop() {
                Status::Ok
            } else {
                Status::Changes
            })
        }
        Command::Schema { kind } => {
            let text = match kind {
                SchemaKind::Definition => schema::TRAINING_JOB_SCHEMA,
                SchemaKind::Project => schema::PROJECT_SCHEMA,
            };
            let _ = write!(stdout, "{text}");
            Ok(Status::Ok)
        }
        Command::Init {
            dir,
            name,
            namespace,
            force,
        } => {
            let dir = cwd.join(dir);
            let written = init::init(&dir, &name, &namespace, force).map_err(fail(Format::Text))?;
            for f in written {
                let _ = writeln!(
                    stdout,
                    "wrote {}",
                    crate::load::display_name(&cwd, &dir.join(f))
                );
            }
            Ok(Status::Ok)
        }
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
