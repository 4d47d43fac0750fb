//! `trainc run --local`.

use std::io::Write as _;
use std::path::Path;

use super::{Color, Failure, RunArgs, Status, Stdout, SummaryFormat, fail, plural, warn};
use crate::diagnostic::Diagnostic;
use crate::pipeline;
use crate::project::Project;

/// `trainc run --local`. Takes stdout by value: it is released before the
/// tasks start, so their output is not held behind its lock.
pub(super) fn run_local(
    cwd: &Path,
    mut stdout: Stdout,
    args: RunArgs,
    color: Color,
) -> Result<Status, Failure> {
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
        format,
    } = args;
    let fail = fail(format.findings());
    let json = format == SummaryFormat::Json;
    let project = Project::discover(cwd, project.as_deref()).map_err(&fail)?;
    let variant = match &variant {
        Some(name) => project
            .select(std::slice::from_ref(name))
            .map_err(&fail)?
            .into_iter()
            .next(),
        None => None,
    };
    let pipeline::Resolved { jobs, warnings } =
        pipeline::check_sets(&project, cwd, std::slice::from_ref(&path), &[variant])
            .map_err(&fail)?;
    let mut jobs = jobs.into_iter().next().unwrap_or_default();
    if !json {
        warn(&warnings, color);
    }
    let build_output = variant
        .and_then(|v| v.build_output.as_deref())
        .unwrap_or(&project.build_output);
    pipeline::images(&project, &mut jobs, build_output).map_err(&fail)?;
    let mut job = pick(jobs, job.as_deref()).map_err(|d| fail(vec![d]))?;
    // Tasks run in the work directory: a relative interpreter path
    // means the one relative to here.
    let python = if python.components().count() > 1 {
        cwd.join(python)
    } else {
        python
    };
    let overrides = crate::run::Overrides { set, replicas };
    crate::run::apply_overrides(&mut job, &overrides).map_err(|d| fail(vec![d]))?;
    // With `--format json` stdout holds the summary alone: the rest is for
    // people, on stderr.
    let mut say = |line: &str| {
        let _ = if json {
            writeln!(std::io::stderr(), "{line}")
        } else {
            writeln!(stdout, "{line}")
        };
    };
    if crate::run::uses_python(&job) {
        say(&crate::run::preflight_status(&python, &job));
        crate::run::preflight(&python, &job).map_err(|d| fail(vec![d]))?;
    }
    // Made only now, so that a failed check leaves no directory behind.
    let workdir = match workdir {
        Some(w) => cwd.join(w),
        None => crate::run::fresh_workdir(&job).map_err(|d| fail(vec![d]))?,
    };
    let opts = crate::run::Options {
        workdir: workdir.clone(),
        python,
    };
    let tasks = crate::run::tasks(&job, &opts).map_err(|d| fail(vec![d]))?;
    let gpus: u32 = job.roles.iter().map(|r| r.gpu).sum();
    say(&format!(
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
    ));
    if gpus > 0 {
        say("note: GPU requests are ignored locally");
    }
    for note in crate::run::notes(&job, |name| std::env::var_os(name).is_some()) {
        say(&note);
    }
    drop(stdout);
    let outcome = crate::run::supervise(tasks, &workdir, json).map_err(|d| fail(vec![d]))?;
    let code = u8::try_from(outcome.code).unwrap_or(1);
    if json {
        let summary = summary(&job, &workdir, &outcome, code);
        let _ = write!(
            std::io::stdout(),
            "{}",
            crate::report::json(summary, &warnings)
        );
    }
    Ok(Status::Exit(code))
}

/// What `--format json` says of a finished run.
fn summary(
    job: &crate::model::Job,
    workdir: &Path,
    outcome: &crate::run::Outcome,
    code: u8,
) -> serde_json::Value {
    use std::os::unix::process::ExitStatusExt as _;
    let tasks: Vec<serde_json::Value> = outcome
        .tasks
        .iter()
        .map(|(name, status)| {
            serde_json::json!({
                "name": name,
                "code": status.and_then(|s| s.code()),
                "signal": status.and_then(|s| s.signal()),
            })
        })
        .collect();
    serde_json::json!({
        "job": format!("{}/{}", job.namespace, job.name),
        "workdir": workdir.display().to_string(),
        "tasks": tasks,
        "exit": code,
    })
}

/// The one job to run: the only one, or the one named by `--job`.
pub(super) fn pick(
    jobs: Vec<crate::model::Job>,
    name: Option<&str>,
) -> Result<crate::model::Job, Diagnostic> {
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
