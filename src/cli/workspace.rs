//! `--workspace`: a command on every project of the repository, after the
//! rules across them ([`crate::workspace`]).

use std::path::Path;

use serde_json::{Map, Value};

use super::{Color, Failure, Format, Inputs, Out, Output, Status, fail, report};
use crate::diagnostic::Diagnostic;
use crate::project::Project;

/// How the projects' reports make one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Combine {
    /// Text (each project's under a line naming it), Markdown (under a
    /// heading), GitHub annotations (the line on stderr).
    Text,
    Markdown,
    Github,
    /// One JSON object: `{"version", "projects": [{"project", …}]}`.
    Json,
    /// One SARIF log with a run per project.
    Sarif,
}

impl Combine {
    pub(super) fn of(format: Format) -> Self {
        match format {
            Format::Text => Combine::Text,
            Format::Json => Combine::Json,
            Format::Github => Combine::Github,
            Format::Sarif => Combine::Sarif,
        }
    }

    /// The format failures are reported in.
    fn findings(self) -> Format {
        match self {
            Combine::Text | Combine::Markdown => Format::Text,
            Combine::Github => Format::Github,
            Combine::Json => Format::Json,
            Combine::Sarif => Format::Sarif,
        }
    }
}

/// Runs `command` on each project of the repository that holds `cwd`, in
/// path order, after the rules across them (a finding there stops
/// everything, nothing written). A project that fails is reported and the
/// others still run; the exit status is the worst.
pub(super) fn each(
    cwd: &Path,
    stdout: &mut Out,
    output: Option<&Output>,
    combine: Combine,
    color: Color,
    mut command: impl FnMut(&mut Out, &Inputs) -> Result<Status, Failure>,
    deny_warnings: bool,
) -> Result<Status, Failure> {
    let fail = fail(combine.findings());
    if output.is_some_and(|o| o.output.is_some() || o.build_output.is_some()) {
        return Err(fail(vec![
            Diagnostic::new("`--workspace` builds each project into its own directories: it takes no `-o` or `--build-output`")
                .hint("to build one project elsewhere, run in its directory (or with `--project`) and `-o DIR`"),
        ]));
    }
    let workspace = crate::workspace::discover(cwd).map_err(&fail)?;
    if workspace.projects.is_empty() {
        // No project file anywhere: the one project is the defaults'
        // (`jobs` into `deploy`), as without `--workspace`.
        let inputs = Inputs {
            paths: Vec::new(),
            project: None,
            variant: Vec::new(),
            deny_warnings,
            workspace: false,
        };
        return command(stdout, &inputs);
    }
    let projects: Vec<Project> = workspace
        .projects
        .iter()
        .filter_map(|f| Project::discover(cwd, Some(f)).ok())
        .collect();
    let across = crate::workspace::across(&projects);
    if !across.is_empty() {
        return Err(fail(across));
    }
    let mut worst = Status::Ok;
    let mut gathered: Vec<Value> = Vec::new();
    for file in &workspace.projects {
        let shown = crate::paths::shown_path(cwd, file);
        let inputs = Inputs {
            paths: Vec::new(),
            project: Some(file.clone()),
            variant: Vec::new(),
            deny_warnings,
            workspace: false,
        };
        let ran = match combine {
            Combine::Text => {
                let _ = writeln!(stdout, "{shown}:");
                command(stdout, &inputs)
            }
            Combine::Markdown => {
                let _ = writeln!(stdout, "## Project `{shown}`\n");
                command(stdout, &inputs)
            }
            Combine::Github => {
                eprintln!("{shown}:");
                command(stdout, &inputs)
            }
            Combine::Json | Combine::Sarif => {
                let mut buf: Vec<u8> = Vec::new();
                let ran = command(&mut buf, &inputs);
                let doc = match &ran {
                    Ok(_) => buf,
                    Err(f) if combine == Combine::Json => {
                        crate::report::json(Value::Null, &f.diagnostics).into_bytes()
                    }
                    Err(f) => crate::report::sarif::render(&f.diagnostics, &[], &[]).into_bytes(),
                };
                let mut doc: Value = serde_json::from_slice(&doc).unwrap_or_default();
                if combine == Combine::Json {
                    let mut with = Map::new();
                    with.insert("project".to_owned(), shown.clone().into());
                    if let Value::Object(fields) = doc {
                        with.extend(fields.into_iter().filter(|(k, _)| k != "version"));
                    }
                    doc = Value::Object(with);
                }
                gathered.push(doc);
                ran.map_err(|f| Failure {
                    diagnostics: Vec::new(),
                    format: f.format,
                })
            }
        };
        worst = match ran {
            Ok(status) => worse(worst, status),
            Err(f) => {
                if !f.diagnostics.is_empty() {
                    report(&f, color);
                }
                Status::Exit(2)
            }
        };
    }
    match combine {
        Combine::Json => {
            let doc = serde_json::json!({
                "version": crate::report::VERSION,
                "projects": gathered,
            });
            let _ = writeln!(
                stdout,
                "{}",
                serde_json::to_string_pretty(&doc).unwrap_or_default()
            );
        }
        Combine::Sarif => {
            let mut runs = Vec::new();
            let mut log = Value::Null;
            for doc in gathered {
                if let Some(r) = doc["runs"].as_array() {
                    runs.extend(r.iter().cloned());
                }
                if log.is_null() {
                    log = doc;
                }
            }
            log["runs"] = Value::Array(runs);
            let _ = writeln!(
                stdout,
                "{}",
                serde_json::to_string_pretty(&log).unwrap_or_default()
            );
        }
        _ => {}
    }
    Ok(worst)
}

/// The worse of two outcomes: an error, then changes, then none.
fn worse(a: Status, b: Status) -> Status {
    let rank = |s: Status| match s {
        Status::Ok => 0,
        Status::Changes => 1,
        Status::Exit(_) => 2,
    };
    if rank(b) > rank(a) { b } else { a }
}
