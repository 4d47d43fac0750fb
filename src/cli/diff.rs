//! `trainc diff`.

use std::collections::BTreeMap;
use std::path::Path;

use super::targets::targets;
use super::{
    Color, Deny, DiffFormat, Failure, Format, Inputs, Out, Output, Reporter, Status, fail,
};
use crate::base::Base;
use crate::build::Mode;
use crate::diff::FieldChange;
use crate::plan;

/// The flags of `trainc diff`.
pub(super) struct DiffOptions<'a> {
    pub(super) format: DiffFormat,
    pub(super) stat: bool,
    pub(super) base: Option<&'a str>,
    pub(super) color: Color,
}

/// `trainc diff`.
pub(super) fn diff(
    cwd: &Path,
    stdout: &mut Out,
    inputs: &Inputs,
    output: &Output,
    opts: &DiffOptions,
) -> Result<Status, Failure> {
    let DiffOptions {
        format,
        stat,
        base,
        color,
    } = *opts;
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
    if let Some(reference) = base {
        let a = super::base::against(
            cwd,
            inputs,
            output,
            &targets,
            reference,
            &mut reporter,
            &fail,
        )?;
        return Ok(finish(stdout, &a.report, &a.warnings, format, stat));
    }
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
    let report = report(plans, None, &BTreeMap::new());
    Ok(finish(stdout, &report, &built.warnings, format, stat))
}

/// The report of a diff's plans, against `base` when given, each re-run
/// naming the fields of its definition that `changed`.
pub(super) fn report(
    plans: Vec<(plan::Plan, String, bool)>,
    base: Option<&Base>,
    changed: &BTreeMap<String, Vec<FieldChange>>,
) -> crate::diff::Report {
    let mut reports = Vec::new();
    for (plan, shown, label) in plans {
        let mut report = crate::diff::report(&plan, &shown);
        if label {
            for r in &mut report.runs {
                r.output = Some(shown.clone());
            }
        }
        reports.push(report);
    }
    let mut report = crate::diff::Report::merge(reports);
    report.base = base.map(Base::named);
    report.explain(changed);
    report
}

/// Prints a diff's report: exit 0 for no changes, 1 for some.
fn finish(
    stdout: &mut Out,
    report: &crate::diff::Report,
    warnings: &[crate::diagnostic::Diagnostic],
    format: DiffFormat,
    stat: bool,
) -> Status {
    let text = match format {
        DiffFormat::Text => crate::diff::render_text(report, true, stat),
        DiffFormat::Markdown => crate::diff::render_markdown(report, stat),
        DiffFormat::Json => crate::diff::render_json(report, warnings),
    };
    let _ = write!(stdout, "{text}");
    if report.changes.is_empty() {
        Status::Ok
    } else {
        Status::Changes
    }
}
