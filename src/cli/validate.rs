//! `trainc validate`.

use std::path::Path;

use super::targets::selected;
use super::{Color, Deny, Failure, Format, Inputs, Out, Status, fail, plural, warn};
use crate::build::{Set, Targets};
use crate::project::Project;
use crate::{pipeline, report};
use serde_json::json;

/// `trainc validate`.
pub(super) fn validate(
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
    let compiled = pipeline::rendered(
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
    Deny::of(inputs, &targets.project).check(&warnings, format)?;
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
    let line = format!("{} valid{variants}", plural(jobs, "job"));
    let doc = match format {
        Format::Text => {
            warn(&warnings, color);
            let _ = writeln!(stdout, "{line}");
            return Ok(Status::Ok);
        }
        Format::Json => report::json(json!({"jobs": jobs, "variants": names}), &warnings),
        Format::Github => {
            // The log keeps the rustc-style text; the annotations are for
            // the pull request.
            warn(&warnings, color);
            eprintln!("{line}");
            report::github::render(&warnings, &[], &[])
        }
        Format::Sarif => report::sarif::render(&warnings, &[], &[]),
    };
    let _ = write!(stdout, "{doc}");
    Ok(Status::Ok)
}
