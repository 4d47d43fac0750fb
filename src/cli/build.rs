//! `trainc build` and `trainc build --check`.

use std::io::Write as _;
use std::path::Path;

use super::targets::{desired, plan_all, status, summary, targets, up_to_date};
use super::{Color, Failure, Format, Inputs, Out, Output, Status, fail, warn};
use crate::cache;
use crate::diagnostic;
use crate::plan::{self, Plan};

/// The flags of `trainc build`.
pub(super) struct BuildOptions {
    pub(super) check: bool,
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
        no_cache,
        verbose,
        format,
        color,
    } = *opts;
    let fail = fail(format);
    let targets = targets(cwd, inputs, output, &fail)?;
    let req = cache::Request {
        cwd,
        project: &targets.project,
        paths: &inputs.paths,
        dirs: targets.dirs(),
    };
    let cache = if no_cache {
        Err("of --no-cache".to_owned())
    } else {
        cache::Cache::open(&req)
    };
    let fresh = match &cache {
        Ok(c) => c.fresh(&req),
        Err(why) => Err(why.clone()),
    };
    if verbose {
        match &fresh {
            Ok(_) => eprintln!("cache: the output is as the last build left it"),
            Err(why) => eprintln!("cache: compiling, because {why}"),
        }
    }
    if let Ok(dests) = fresh {
        // As the full path below: `--check` prints status lines even in JSON.
        if format == Format::Json && !check {
            let _ = write!(stdout, "{}", diagnostic::render_json(&[]));
        } else {
            let dirs: Vec<(usize, String)> = dests
                .iter()
                .map(|(d, n)| (*n, targets.project.shown_dir(d)))
                .collect();
            let _ = writeln!(stdout, "{}", up_to_date(&dirs));
        }
        return Ok(Status::Ok);
    }
    let (dests, read, warnings) = desired(cwd, inputs, &targets, &fail)?;
    if format != Format::Json {
        warn(&warnings, color);
    }
    let record = |plans: &[(Plan, String)]| {
        let Ok(c) = &cache else { return };
        let plans: Vec<&Plan> = plans.iter().map(|(p, _)| p).collect();
        if let Err(why) = c.save(&req, &read, &plans)
            && verbose
        {
            eprintln!("cache: not recorded, because {why}");
        }
    };
    if check {
        let plans = plan_all(dests, &fail)?;
        let current = plans.iter().all(|(p, _)| p.is_noop());
        if current {
            record(&plans);
        }
        let _ = write!(
            stdout,
            "{}",
            status(&plans, |plan, dir| {
                let mut s = format!("{dir} is stale: {}\n", summary(plan));
                for c in plan.pending() {
                    s.push_str(&format!("{} {dir}/{}\n", c.op.sign(), c.path));
                }
                s
            })
        );
        if current {
            return Ok(Status::Ok);
        }
        let _ = writeln!(stdout, "run `trainc build` and commit the result");
        return Ok(Status::Changes);
    }
    // Lock before reading the directories, in a fixed order: what is
    // planned is what is written, even with a second build racing.
    let mut locks = Vec::new();
    for d in &dests {
        locks.push(plan::lock(&d.dir).map_err(|e| fail(vec![e]))?);
    }
    // Every plan before any write: a refusal anywhere writes nothing.
    let plans = plan_all(dests, &fail)?;
    for (plan, _) in &plans {
        plan::apply(plan).map_err(&fail)?;
    }
    // Still locked: the snapshot is of this build's output.
    record(&plans);
    drop(locks);
    if format == Format::Json {
        let _ = write!(stdout, "{}", diagnostic::render_json(&warnings));
        return Ok(Status::Ok);
    }
    // Nothing to do is one line, however many directories.
    let _ = write!(
        stdout,
        "{}",
        status(&plans, |plan, dir| format!(
            "updated {dir}: {}\n",
            summary(plan)
        ))
    );
    Ok(Status::Ok)
}
