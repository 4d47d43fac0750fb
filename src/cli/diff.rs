//! `trainc diff`.

use std::io::Write as _;
use std::path::Path;

use super::targets::{Desired, desired_into, finish_all, incremental, stagers, targets};
use super::{Color, Deny, DiffFormat, Failure, Format, Inputs, Out, Output, Status, fail, warn};
use crate::plan::stream::Mode;
use crate::{cache, plan};

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
    let deny = Deny::of(inputs, &targets.project);
    let req = cache::Request {
        cwd,
        project: &targets.project,
        paths: &inputs.paths,
        dirs: targets.dirs(),
    };
    // Only the definition files that changed since the last build, when the
    // build cache can tell; `diff` never records.
    let planned = cache::Cache::open(&req).and_then(|c| {
        let sets = targets.pipeline_sets();
        let inc = c.incremental(&req, &sets)?;
        incremental(&targets, inc, false)
    });
    match planned {
        Ok(p) => {
            deny.check(&p.warnings, findings)?;
            if format != DiffFormat::Json {
                warn(&p.warnings, color);
            }
            let warnings = p.warnings;
            // The process ends after the report: the record's state is
            // not freed one allocation at a time.
            std::mem::forget(p.state);
            let plans: Vec<(plan::Plan, String, bool)> = p
                .plans
                .into_iter()
                .zip(p.labels)
                .map(|((plan, shown), label)| (plan, shown, label))
                .collect();
            finish(stdout, plans, &warnings, format, stat)
        }
        Err(_) => {
            // Each job's files compared as they are rendered: only those
            // that change are kept.
            let mut stagers = stagers(&targets, false, Mode::Keep);
            let Desired {
                dests, warnings, ..
            } = desired_into(cwd, inputs, &targets, false, Some(&stagers), &fail)?;
            deny.check(&warnings, findings)?;
            if format != DiffFormat::Json {
                warn(&warnings, color);
            }
            let (plans, refused) = finish_all(dests, &mut stagers, |_| Ok(()));
            if !refused.is_empty() {
                return Err(fail(refused));
            }
            let plans = plans
                .into_iter()
                .map(|f| (f.plan, f.shown, f.label_runs))
                .collect();
            finish(stdout, plans, &warnings, format, stat)
        }
    }
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
