//! `trainc diff`.

use std::io::Write as _;
use std::path::Path;

use super::targets::{desired, targets};
use super::{Color, DiffFormat, Failure, Format, Inputs, Out, Output, Status, fail, warn};
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
        let mut report = crate::diff::report(&plan, &d.shown);
        if d.label_runs {
            for r in &mut report.runs {
                r.output = Some(d.shown.clone());
            }
        }
        reports.push(report);
    }
    let report = crate::diff::Report::merge(reports);
    let text = match format {
        DiffFormat::Text => crate::diff::render_text(&report, true, stat),
        DiffFormat::Markdown => crate::diff::render_markdown(&report, stat),
        DiffFormat::Json => crate::diff::render_json(&report, &warnings),
    };
    let _ = write!(stdout, "{text}");
    Ok(if noop { Status::Ok } else { Status::Changes })
}
