//! `trainc build` and `trainc build --check`.

use std::path::Path;

use super::targets::{status, summary, targets};
use super::{Color, Deny, Failure, Format, Inputs, Out, Output, Reporter, Status, fail};
use crate::build::Mode;
use crate::diagnostic::Diagnostic;
use crate::plan::{Op, Plan};
use crate::report;
use serde_json::{Value, json};

/// The flags of `trainc build`.
pub(super) struct BuildOptions<'a> {
    pub(super) check: bool,
    /// `--base REF` (with `--check`): the commit the runs are compared with.
    pub(super) base: Option<&'a str>,
    pub(super) no_cache: bool,
    pub(super) verbose: bool,
    pub(super) format: Format,
    pub(super) color: Color,
}

/// `trainc build` and `trainc build --check`.
pub(super) fn build(
    cwd: &Path,
    stdout: &mut Out,
    inputs: &Inputs,
    output: &Output,
    opts: &BuildOptions,
) -> Result<Status, Failure> {
    let BuildOptions {
        check,
        base,
        no_cache,
        verbose,
        format,
        color,
    } = *opts;
    let targets = targets(cwd, inputs, output, &fail(format))?;
    let mut reporter = Reporter {
        verbose,
        deny: Deny::of(inputs, &targets.project),
        format,
        color,
        show_warnings: matches!(format, Format::Text | Format::Github),
    };
    let mode = if check { Mode::Check } else { Mode::Write };
    // With `--base`, the build that compares with the base is the check.
    let (dirs, warnings, against) = match base {
        Some(reference) => {
            let a = super::base::against(
                cwd,
                inputs,
                output,
                &targets,
                reference,
                &mut reporter,
                &fail(format),
            )?;
            (a.on_disk, a.warnings, Some(a.report))
        }
        None => {
            let built =
                crate::build::run(cwd, &targets, &inputs.paths, mode, no_cache, &mut reporter)?;
            (built.dirs, built.warnings, None)
        }
    };
    let plans: Vec<(Plan, String)> = dirs.into_iter().map(|d| (d.plan, d.shown)).collect();
    let current = plans.iter().all(|(p, _)| p.is_noop());
    // Nothing to do is one line, however many directories.
    let text = if check {
        let mut text = status(&plans, |plan, dir| {
            let mut s = format!("{dir} is stale: {}\n", summary(plan));
            for c in plan.pending() {
                s.push_str(&format!("{} {dir}/{}\n", c.op.sign(), c.path));
            }
            s
        });
        if !current {
            text.push_str("run `trainc build` and commit the result\n");
        }
        if let Some(against) = &against {
            text.push_str(&crate::diff::render_text(against, false, true));
        }
        text
    } else {
        status(&plans, |plan, dir| {
            format!("updated {dir}: {}\n", summary(plan))
        })
    };
    match format {
        Format::Text => {
            let _ = write!(stdout, "{text}");
        }
        _ => {
            let done: Vec<Done> = plans
                .iter()
                .map(|(plan, dir)| Done {
                    dir,
                    plan: Some(plan),
                    unchanged: plan.count(Op::Unchanged),
                })
                .collect();
            let _ = write!(
                stdout,
                "{}",
                document(format, check, &done, &warnings, against.as_ref())
            );
            if format == Format::Github {
                eprint!("{text}");
            }
        }
    }
    // The process ends after this: freeing a large build's plans one
    // allocation at a time costs more than a small build.
    std::mem::forget(plans);
    Ok(if check && !current {
        Status::Changes
    } else {
        Status::Ok
    })
}

/// One output directory, as planned (or written), or as the build cache
/// vouched for it.
struct Done<'a> {
    dir: &'a str,
    /// `None`: answered by the cache, so current.
    plan: Option<&'a Plan>,
    unchanged: usize,
}

impl Done<'_> {
    /// A file of the directory, from the working directory.
    fn path(&self, rel: &str) -> String {
        if self.dir == "." {
            rel.to_owned()
        } else {
            format!("{}/{rel}", self.dir)
        }
    }

    fn pending(&self) -> impl Iterator<Item = &crate::plan::Change> {
        self.plan.into_iter().flat_map(Plan::pending)
    }

    fn json(&self) -> Value {
        let files = |op: Op| -> Vec<String> {
            self.pending()
                .filter(|c| c.op == op)
                .map(|c| self.path(&c.path))
                .collect()
        };
        let count = |op: Op| self.plan.map_or(0, |p| p.count(op));
        json!({
            "path": self.dir,
            "current": self.plan.is_none_or(Plan::is_noop),
            "created": files(Op::Create),
            "updated": files(Op::Update),
            "deleted": files(Op::Delete),
            "counts": {
                "created": count(Op::Create),
                "updated": count(Op::Update),
                "deleted": count(Op::Delete),
                "unchanged": self.unchanged,
            },
        })
    }
}

/// The report of `build` or `build --check` for tools. Stale files are
/// annotated (GitHub, SARIF) only by `--check`: a build has just written them.
fn document(
    format: Format,
    check: bool,
    dirs: &[Done],
    warnings: &[Diagnostic],
    against: Option<&crate::diff::Report>,
) -> String {
    // The runs a pull request changes, as notes for its reviewers.
    let notes: Vec<String> = against
        .map(|r| {
            let base = r.base.as_ref().map(|b| b.shown()).unwrap_or_default();
            r.runs
                .iter()
                .map(|run| format!("against {base}: {}", run.line()))
                .collect()
        })
        .unwrap_or_default();
    let stale: Vec<report::Stale> = if check {
        dirs.iter()
            .flat_map(|d| {
                d.pending().map(|c| report::Stale {
                    op: c.op,
                    path: d.path(&c.path),
                })
            })
            .collect()
    } else {
        Vec::new()
    };
    match format {
        Format::Github => report::github::render(warnings, &stale, &notes),
        Format::Sarif => report::sarif::render(warnings, &stale, &notes),
        Format::Text | Format::Json => {
            let mut body = json!({
                "check": check,
                "current": dirs.iter().all(|d| d.plan.is_none_or(Plan::is_noop)),
                "directories": dirs.iter().map(Done::json).collect::<Vec<_>>(),
            });
            if let Some(r) = against {
                // What a reviewer reads: the runs and what they request,
                // and each resource's changed fields; the file diffs are
                // `trainc diff --base`'s.
                let mut r = r.clone();
                for e in &mut r.changes {
                    e.diff.clear();
                }
                body["against_base"] = serde_json::to_value(&r).unwrap_or_default();
            }
            report::json(body, warnings)
        }
    }
}
