//! Command-line interface: argument parsing, dispatch, presentation and
//! exit codes. Each command has its own module; the work is done by
//! [`crate::pipeline`] and the stages behind it.

mod base;
mod build;
mod completions;
mod diff;
mod help;
mod import;
mod init;
mod manpages;
mod run_local;
mod targets;
mod validate;
mod version;
mod workspace;

use std::io::Write as _;
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use crate::diagnostic::{self, Diagnostic, plural};
use crate::model::definition::RoleKind;
use crate::model::definition::Target;
use crate::project::Project;
use crate::validate::schema;

#[derive(Debug, Parser)]
#[command(
    name = "trainc",
    version = version::short(),
    long_version = version::long(),
    about = "Compile distributed training definitions into deterministic Kubernetes manifests"
)]
#[command(after_help = help::TRAINC.after_help())]
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

/// How `validate` and `build` report (docs/formats.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Messages on stdout, rustc-style diagnostics on stderr.
    Text,
    /// One JSON object on stdout.
    Json,
    /// GitHub Actions annotations (`::error file=…`) on stdout, diagnostics on stderr.
    Github,
    /// A SARIF 2.1.0 log on stdout, for code scanning.
    Sarif,
}

/// How `init` and `run` report (docs/formats.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SummaryFormat {
    /// Messages on stdout, diagnostics on stderr.
    Text,
    /// One JSON object on stdout (`run`: the tasks' output goes to stderr).
    Json,
}

impl SummaryFormat {
    fn findings(self) -> Format {
        match self {
            SummaryFormat::Text => Format::Text,
            SummaryFormat::Json => Format::Json,
        }
    }
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
    /// Fail (exit 2, writing nothing) on any warning, as the project's
    /// `denyWarnings: true` does.
    #[arg(long)]
    pub deny_warnings: bool,
    /// Every project of the repository: those `trainc-workspace.yaml` at
    /// its top lists, else every `trainc.yaml` below the top.
    #[arg(long, conflicts_with_all = ["paths", "project", "variant"])]
    pub workspace: bool,
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
    #[command(after_help = help::VALIDATE.after_help())]
    Validate {
        #[command(flatten)]
        inputs: Inputs,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Compile definitions, write the files that changed, prune the ones no
    /// longer generated.
    #[command(after_help = help::BUILD.after_help())]
    Build {
        #[command(flatten)]
        inputs: Inputs,
        #[command(flatten)]
        output: Output,
        /// Write nothing; exit 1 if the output directory is stale.
        #[arg(long)]
        check: bool,
        /// With `--check`: also report the runs that start, start again or
        /// stop between the output at this git commit (a pull request's
        /// base) and the working tree's.
        #[arg(long, value_name = "REF", requires = "check")]
        base: Option<String>,
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
    #[command(after_help = help::DIFF.after_help())]
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
        /// Compare with the output at this git commit (a pull request's
        /// base: committed there, or built from its definitions) instead of
        /// the output directory on disk.
        #[arg(long, value_name = "REF")]
        base: Option<String>,
    },
    /// Run every task of one job as local processes, as the cluster would.
    ///
    /// The tasks run the definition's commands on this machine, as you:
    /// run only definitions you trust.
    #[command(after_help = help::RUN.after_help())]
    Run(RunArgs),
    /// Print the JSON Schema of the definition (or of the project file).
    #[command(after_help = help::SCHEMA.after_help())]
    Schema {
        #[arg(value_enum, default_value_t = SchemaKind::Definition)]
        kind: SchemaKind,
    },
    /// Write a starter project: trainc.yaml, a definition, the program it trains and the schema.
    #[command(after_help = help::INIT.after_help())]
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
        /// (the JobSet controller), `tfjob` (the Kubeflow Training Operator,
        /// TensorFlow starter only), `pytorchjob` (the same, PyTorch only) or
        /// `trainjob` (Kubeflow Trainer v2, PyTorch only).
        #[arg(long, default_value = "kubernetes", value_parser = parse_target)]
        target: Target,
        /// The starter's framework: `tensorflow` (parameter-server training
        /// with a chief) or `pytorch` (DDP on two nodes).
        #[arg(long, default_value = "tensorflow", value_parser = crate::init::parse_framework)]
        framework: crate::model::definition::Framework,
        /// Overwrite existing files (never a symlink: that is refused even
        /// so).
        #[arg(long)]
        force: bool,
        #[arg(long, value_enum, default_value_t = SummaryFormat::Text)]
        format: SummaryFormat,
    },
    /// Write definitions from the manifests of existing training runs:
    /// Kubeflow PyTorchJobs and TFJobs, JobSets, the Deployments or Jobs of
    /// a hand-made TensorFlow cluster, the ACK/arena TFJob chart's values.
    #[command(after_help = help::IMPORT.after_help())]
    Import {
        /// The manifests (or values file) to read.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// The project to write into: its first `sources` directory, or, with
        /// no `trainc.yaml` there, `DIR/jobs` and a new `trainc.yaml`.
        #[arg(long, value_name = "DIR")]
        into: Option<PathBuf>,
        /// Overwrite existing definitions (never through a symlink).
        #[arg(long)]
        force: bool,
        #[arg(long, value_enum, default_value_t = SummaryFormat::Text)]
        format: SummaryFormat,
    },
    /// Print a shell's completion script for trainc.
    #[command(after_help = help::COMPLETIONS.after_help())]
    Completions {
        /// The shell to complete trainc's commands, flags and values in.
        #[arg(value_enum)]
        shell: completions::Shell,
    },
    /// Write the man pages, one per command, into a directory.
    #[command(after_help = help::MANPAGES.after_help())]
    Manpages {
        /// Where to write trainc.1 and trainc-COMMAND.1 (created if missing;
        /// nothing else in it is touched).
        #[arg(value_name = "DIR")]
        dir: PathBuf,
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
    /// Directory standing in for the job's volumes [default: a new private
    /// directory (mode 0700) under the system's temporary directory].
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
    /// `json`: a summary of the run as one JSON object on stdout, the
    /// tasks' output and trainc's notes on stderr.
    #[arg(long, value_enum, default_value_t = SummaryFormat::Text)]
    format: SummaryFormat,
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
        .ok_or_else(|| {
            let names: Vec<&str> = Target::ALL.iter().map(|t| t.as_str()).collect();
            let (last, rest) = names.split_last().unwrap_or((&"", &[]));
            format!("unknown target `{s}`: use {} or {last}", rest.join(", "))
        })
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

pub fn run(cli: Cli) -> Result<Status, Failure> {
    let cwd = current_dir()?;
    let mut stdout = anstream::AutoStream::new(std::io::stdout(), cli.color.choice()).lock();
    let out = &mut stdout;
    match cli.command {
        Command::Validate { inputs, format } if inputs.workspace => workspace::each(
            &cwd,
            out,
            None,
            workspace::Combine::of(format),
            cli.color,
            |out, inputs| validate::validate(&cwd, out, inputs, format, cli.color),
            inputs.deny_warnings,
        ),
        Command::Validate { inputs, format } => {
            validate::validate(&cwd, out, &inputs, format, cli.color)
        }
        Command::Build {
            inputs,
            output,
            check,
            base,
            no_cache,
            verbose,
            format,
        } => {
            let opts = build::BuildOptions {
                check,
                base: base.as_deref(),
                no_cache,
                verbose,
                format,
                color: cli.color,
            };
            if inputs.workspace {
                return workspace::each(
                    &cwd,
                    out,
                    Some(&output),
                    workspace::Combine::of(format),
                    cli.color,
                    |out, inputs| build::build(&cwd, out, inputs, &output, &opts),
                    inputs.deny_warnings,
                );
            }
            build::build(&cwd, out, &inputs, &output, &opts)
        }
        Command::Diff {
            inputs,
            output,
            format,
            stat,
            base,
        } => {
            let opts = diff::DiffOptions {
                format,
                stat,
                base: base.as_deref(),
                color: cli.color,
            };
            if inputs.workspace {
                let combine = match format {
                    DiffFormat::Text => workspace::Combine::Text,
                    DiffFormat::Markdown => workspace::Combine::Markdown,
                    DiffFormat::Json => workspace::Combine::Json,
                };
                return workspace::each(
                    &cwd,
                    out,
                    Some(&output),
                    combine,
                    cli.color,
                    |out, inputs| diff::diff(&cwd, out, inputs, &output, &opts),
                    inputs.deny_warnings,
                );
            }
            diff::diff(&cwd, out, &inputs, &output, &opts)
        }
        Command::Run(args) => run_local::run_local(&cwd, stdout, args, cli.color),
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
            framework,
            force,
            format,
        } => {
            let starter = crate::init::Starter {
                name: &name,
                namespace: &namespace,
                target,
                framework,
            };
            init::init(&cwd, out, &dir, &starter, force, format)
        }
        Command::Import {
            files,
            into,
            force,
            format,
        } => import::import(&cwd, out, &files, into.as_deref(), force, format),
        Command::Completions { shell } => Ok(completions::completions(out, shell)),
        Command::Manpages { dir } => manpages::manpages(&cwd, out, &dir),
    }
}

/// Where commands print: stdout, coloured as `--color` says, or a buffer
/// (`--workspace` gathers the JSON and SARIF of every project).
type Out = dyn std::io::Write;

/// Standard output, coloured as `--color` says.
type Stdout = anstream::AutoStream<std::io::StdoutLock<'static>>;

/// Whether warnings fail the command, and who said so. The command line
/// is the user's own; the project file is the repository's, so its
/// `denyWarnings` can only make trainc stricter, and the flag wins.
enum Deny {
    No,
    /// `--deny-warnings`.
    Flag,
    /// `denyWarnings: true` in the project file, as messages name it.
    Project(String),
}

impl Deny {
    fn of(inputs: &Inputs, project: &Project) -> Self {
        match &project.file {
            _ if inputs.deny_warnings => Deny::Flag,
            Some(file) if project.deny_warnings => Deny::Project(project.shown(file)),
            _ => Deny::No,
        }
    }

    /// The failure that `warnings` are, when they are denied: the warnings
    /// as warnings, then the error that stops the command. Checked before
    /// anything is written.
    fn check(&self, warnings: &[Diagnostic], format: Format) -> Result<(), Failure> {
        let who = match self {
            _ if warnings.is_empty() => return Ok(()),
            Deny::No => return Ok(()),
            Deny::Flag => "`--deny-warnings`".to_owned(),
            Deny::Project(file) => format!("`denyWarnings: true` in {file}"),
        };
        let mut diagnostics = warnings.to_vec();
        diagnostics.push(
            Diagnostic::new(format!(
                "{} denied by {who}",
                plural(warnings.len(), "warning")
            ))
            .hint("resolve each warning as its help says; nothing was written"),
        );
        Err(Failure {
            diagnostics,
            format,
        })
    }
}

/// How `build` and `diff` hear of a build as it runs
/// ([`crate::build::Report`]).
struct Reporter {
    /// `-v`: the build cache's lines, on stderr.
    verbose: bool,
    deny: Deny,
    format: Format,
    color: Color,
    /// Whether warnings are printed as text (other formats carry them).
    show_warnings: bool,
}

impl crate::build::Report for Reporter {
    type Error = Failure;

    fn cache(&mut self, line: &str) {
        if self.verbose {
            eprintln!("{line}");
        }
    }

    fn warnings(&mut self, warnings: &[Diagnostic]) -> Result<(), Failure> {
        self.deny.check(warnings, self.format)?;
        if self.show_warnings {
            warn(warnings, self.color);
        }
        Ok(())
    }

    fn fail(&self, findings: Vec<Diagnostic>) -> Failure {
        Failure {
            diagnostics: findings,
            format: self.format,
        }
    }
}

/// Prints warnings as text on stderr, where failures go.
fn warn(warnings: &[Diagnostic], color: Color) {
    if warnings.is_empty() {
        return;
    }
    let mut stderr = anstream::AutoStream::new(std::io::stderr(), color.choice());
    let _ = write!(stderr, "{}", diagnostic::render_text(warnings, true));
}

/// Prints a failure as `--format` says: text on stderr; JSON or SARIF on
/// stdout; GitHub annotations on stdout and the text on stderr.
pub fn report(failure: &Failure, color: Color) {
    let diags = &failure.diagnostics;
    let doc = match failure.format {
        Format::Text => None,
        Format::Json => Some(crate::report::json(serde_json::Value::Null, diags)),
        Format::Github => Some(crate::report::github::render(diags, &[], &[])),
        Format::Sarif => Some(crate::report::sarif::render(diags, &[], &[])),
    };
    if let Some(doc) = &doc {
        let _ = write!(std::io::stdout(), "{doc}");
    }
    if matches!(failure.format, Format::Text | Format::Github) {
        let mut stderr = anstream::AutoStream::new(std::io::stderr(), color.choice());
        let _ = write!(stderr, "{}", diagnostic::render_text(diags, true));
    }
}
