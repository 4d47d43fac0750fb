//! Command-line interface: argument parsing and exit codes only. The work is
//! done by [`crate::pipeline`] and the stages behind it.

use std::io::Write as _;
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use crate::diagnostic::{self, Diagnostic};
use crate::load::project::Project;
use crate::plan::{self, Op};
use crate::validate::schema;
use crate::{init, pipeline};

#[derive(Debug, Parser)]
#[command(
    name = "trainc",
    version,
    about = "Compile distributed training definitions into deterministic Kubernetes manifests"
)]
pub struct Cli {
    /// When to colour diagnostics.
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

#[derive(Debug, clap::Args)]
pub struct Inputs {
    /// Definition files or directories [default: the project's `sources`, else `jobs`].
    pub paths: Vec<PathBuf>,
    /// Project file [default: `trainc.yaml` in the working directory, if any].
    #[arg(long, value_name = "FILE")]
    pub project: Option<PathBuf>,
    /// How to report findings: rustc-style text on stderr, or JSON on stdout.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check definitions against the schema and semantic rules.
    Validate {
        #[command(flatten)]
        inputs: Inputs,
    },
    /// Compile definitions and write the changed files of the output directory.
    Build {
        #[command(flatten)]
        inputs: Inputs,
        /// Output directory [default: the project's `output`, else `deploy`].
        #[arg(short, long, value_name = "DIR")]
        output: Option<PathBuf>,
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
    /// Exit 0.
    Ok,
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

pub fn run(cli: Cli) -> Result<Status, Failure> {
    let cwd = current_dir()?;
    let mut stdout = std::io::stdout().lock();
    match cli.command {
        Command::Validate { inputs } => {
            let fail = fail(inputs.format);
            let project = Project::discover(&cwd, inputs.project.as_deref()).map_err(&fail)?;
            let jobs = pipeline::check(&project, &cwd, &inputs.paths).map_err(&fail)?;
            if inputs.format == Format::Json {
                let _ = write!(stdout, "{}", diagnostic::render_json(&[]));
            } else {
                let _ = writeln!(stdout, "{} valid", plural(jobs.len(), "job"));
            }
            Ok(Status::Ok)
        }
        Command::Build { inputs, output } => {
            let fail = fail(inputs.format);
            let project = Project::discover(&cwd, inputs.project.as_deref()).map_err(&fail)?;
            let out_dir = output.map_or_else(|| project.output.clone(), |o| cwd.join(o));
            let jobs = pipeline::check(&project, &cwd, &inputs.paths).map_err(&fail)?;
            let tree = pipeline::render(&jobs).map_err(&fail)?;
            let plan = plan::plan(&out_dir, tree).map_err(&fail)?;
            plan::apply(&plan).map_err(&fail)?;
            if inputs.format == Format::Json {
                let _ = write!(stdout, "{}", diagnostic::render_json(&[]));
                return Ok(Status::Ok);
            }
            let shown = crate::load::display_name(&cwd, &out_dir);
            let shown = if shown.is_empty() {
                ".".to_owned()
            } else {
                shown
            };
            if plan.is_noop() {
                let _ = writeln!(
                    stdout,
                    "{shown} is up to date ({})",
                    plural(plan.changes.len(), "file")
                );
            } else {
                let _ = writeln!(
                    stdout,
                    "wrote {} to {shown}: {} created, {} updated, {} unchanged",
                    plural(plan.count(Op::Create) + plan.count(Op::Update), "file"),
                    plan.count(Op::Create),
                    plan.count(Op::Update),
                    plan.count(Op::Unchanged),
                );
            }
            Ok(Status::Ok)
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
    let choice = match color {
        Color::Auto => anstream::ColorChoice::Auto,
        Color::Always => anstream::ColorChoice::Always,
        Color::Never => anstream::ColorChoice::Never,
    };
    let mut stderr = anstream::AutoStream::new(std::io::stderr(), choice);
    let _ = write!(
        stderr,
        "{}",
        diagnostic::render_text(&failure.diagnostics, true)
    );
}
