//! `trainc diff`.

use std::io::Write as _;
use std::path::Path;

use super::targets::targets;
use super::{
    Color, Deny, DiffFormat, Failure, Format, Inputs, Out, Output, Reporter, Status, fail,
};
use crate::build::Mode;
use crate::plan;

/// `trainc diff`.
pub(super) fn diff(
    cwd: &Path,
    stdout: &mut Out,
    inputs: &Inputs,
    output: &Output,
    format: DiffFormat,
    stat: bool,
    color: Color,
) -> Result<Status, Failure> {
    let findings = if format == DiffFormat::Json {
        Format::Json
    } else {
        Format::Text
    };
    let fail = fail(findings);
    let targets = targets(cwd, inputs, output, &fail)?;
    let mut reporter = Reporter {
        verbose: false,
        deny: Deny::of(inputs, &targets.project),
        format: findings,
        color,
        show_warnings: format != DiffFormat::Json,
    };
    // `diff` never records, and has no `--no-cache`: an empty
    // `TRAINC_CACHE_DIR` turns the cache off.
    let built = crate::build::run(
        cwd,
        &targets,
        &inputs.paths,
        Mode::Diff,
        false,
        &mut reporter,
    )?;
    let plans = built
        .dirs
        .into_iter()
        .map(|d| (d.plan, d.shown, d.label_runs))
        .collect();
    finish(stdout, plans, &built.warnings, format, stat)
}

/// Reports the plans of a diff.
fn finish(
    stdout: &mut Out,
    plans: Vec<(plan::Plan, String, bool)>,
    warnings: &[crate::diagnostic::Diagnostic],
    format: DiffFormat,
    stat: bool,
) -> Result<Status, Failure> {
    let mut reports = Vec::new();
    let mut noop = true;
    for (plan, shown, label) in plans {
        noop &= plan.is_noop();
        let mut report = crate::diff::report(&plan, &shown);
        if label {
            for r in &mut report.runs {
                r.output = Some(shown.clone());
            }
        }
        reports.push(report);
    }
    let report = crate::diff::Report::merge(reports);
    let text = match format {
        DiffFormat::Text => crate::diff::render_text(&report, true, stat),
        DiffFormat::Markdown => crate::diff::render_markdown(&report, stat),
        DiffFormat::Json => crate::diff::render_json(&report, warnings),
    };
    let _ = write!(stdout, "{text}");
    Ok(if noop { Status::Ok } else { Status::Changes })
}
