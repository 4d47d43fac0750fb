//! `trainc build` and `trainc build --check`.

use std::io::Write as _;
use std::path::Path;

use super::targets::{
    Desired, Finished, Targets, desired_into, finish_all, incremental, stagers, status, summary,
    targets,
};
use super::{Color, Deny, Failure, Format, Inputs, Out, Output, Status, fail, warn};
use crate::cache;
use crate::diagnostic::Diagnostic;
use crate::plan::{self, Op, Plan};
use crate::report;
use serde_json::{Value, json};

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
    let sets = targets.pipeline_sets();
    // Only the definition files that changed since the last build (none:
    // a no-op), when the build cache can tell.
    let planned = match &cache {
        Ok(c) => c
            .incremental(&req, &sets)
            .and_then(|inc| incremental(&targets, inc, !check)),
        Err(why) => Err(why.clone()),
    };
    let Built {
        plans,
        read,
        mut state,
        warnings,
    } = match planned {
        Ok(mut p) => {
            if verbose {
                eprintln!("{}", p.verbose);
            }
            if let Err(denied) = Deny::of(inputs, &targets.project).check(&p.warnings, format) {
                // What these locks made is removed, as a failed full build does.
                p.locks
                    .into_iter()
                    .rev()
                    .for_each(plan::Lock::release_unused);
                return Err(denied);
            }
            if matches!(format, Format::Text | Format::Github) {
                warn(&p.warnings, color);
            }
            if !check {
                // Every directory staged before any is linked in.
                let mut ready = Vec::with_capacity(p.plans.len());
                for (plan, _) in &p.plans {
                    ready.push(plan::stage(plan).map_err(&fail)?);
                }
                for r in ready {
                    r.link().map_err(&fail)?;
                }
                // Still locked: the snapshot is of this build's output.
                let warned = !p.warnings.is_empty();
                record(
                    &cache,
                    &req,
                    &p.read,
                    &mut p.state,
                    &p.plans,
                    warned,
                    verbose,
                );
            }
            drop(p.locks);
            Built {
                plans: p.plans,
                read: p.read,
                state: p.state,
                warnings: p.warnings,
            }
        }
        Err(why) => {
            if verbose {
                eprintln!("cache: compiling, because {why}");
            }
            full(&targets, &req, &cache, cwd, inputs, opts, &fail)?
        }
    };
    let current = plans.iter().all(|(p, _)| p.is_noop());
    if check && current {
        let warned = !warnings.is_empty();
        record(&cache, &req, &read, &mut state, &plans, warned, verbose);
    }
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
            let _ = write!(stdout, "{}", document(format, check, &done, &warnings));
            if format == Format::Github {
                eprint!("{text}");
            }
        }
    }
    // The process ends after this: freeing a large build's plans and
    // records one allocation at a time costs more than a small build.
    std::mem::forget((plans, state));
    Ok(if check && !current {
        Status::Changes
    } else {
        Status::Ok
    })
}

/// A build, planned (and written unless `--check`).
struct Built {
    /// Each directory's plan, with how messages name the directory.
    plans: Vec<(Plan, String)>,
    read: crate::pipeline::Read,
    /// What the build cache records of it.
    state: cache::State,
    warnings: Vec<Diagnostic>,
}

/// The full build: compiles every definition, planning (and, unless
/// `--check`, staging) each job's files as it is rendered
/// ([`plan::stream`]), so that the output tree is never held whole; then,
/// unless `--check`, writes and records every directory, linking nothing in
/// before every directory is planned and staged.
fn full(
    targets: &Targets,
    req: &cache::Request,
    cache: &Result<cache::Cache, String>,
    cwd: &Path,
    inputs: &Inputs,
    opts: &BuildOptions,
    fail: &impl Fn(Vec<Diagnostic>) -> Failure,
) -> Result<Built, Failure> {
    let write = !opts.check;
    // Locked before anything is staged, in a fixed order (every set's
    // output directory, then the build directories that exist): what is
    // planned is what is written, even with a second build racing.
    let mut locks = Vec::new();
    let release =
        |locks: Vec<plan::Lock>| locks.into_iter().rev().for_each(plan::Lock::release_unused);
    let dirs = targets.sets.iter().map(|s| &s.output).chain(
        targets
            .sets
            .iter()
            .filter_map(|s| s.build_output.as_ref())
            .filter(|d| d.is_dir()),
    );
    let mut locked: Vec<std::path::PathBuf> = Vec::new();
    for dir in dirs.filter(|_| write) {
        if locked.contains(dir) {
            continue;
        }
        match plan::lock(dir) {
            Ok(l) => locks.push(l),
            Err(e) => {
                release(locks);
                return Err(fail(vec![e]));
            }
        }
        locked.push(dir.clone());
    }
    let mode = if write {
        plan::stream::Mode::Stage
    } else {
        plan::stream::Mode::Plan
    };
    let stagers = stagers(targets, cache.is_ok(), mode);
    let desired = desired_into(cwd, inputs, targets, cache.is_ok(), Some(&stagers), fail);
    let Desired {
        dests,
        read,
        mut state,
        warnings,
    } = match desired {
        Ok(d) => d,
        Err(f) => {
            // Dropping the stagers removes what they staged.
            drop(stagers);
            release(locks);
            return Err(f);
        }
    };
    if let Err(denied) = Deny::of(inputs, &targets.project).check(&warnings, opts.format) {
        drop(stagers);
        release(locks);
        return Err(denied);
    }
    if matches!(opts.format, Format::Text | Format::Github) {
        warn(&warnings, opts.color);
    }
    // Every plan before any write: a refusal anywhere writes nothing.
    let mut stagers = stagers;
    let (plans, refused) = finish_all(dests, &mut stagers, |d| {
        if write && !locked.contains(&d.dir) {
            // A build directory this build makes.
            locks.push(plan::lock(&d.dir)?);
            locked.push(d.dir.clone());
        }
        Ok(())
    });
    if !refused.is_empty() {
        drop(plans);
        drop(stagers);
        release(locks);
        return Err(fail(refused));
    }
    if !write {
        let plans = plans.into_iter().map(|f| (f.plan, f.shown)).collect();
        return Ok(Built {
            plans,
            read,
            state,
            warnings,
        });
    }
    // Every directory's files staged before any is linked in: a full disk
    // anywhere changes nothing.
    let mut ready = Vec::with_capacity(plans.len());
    let mut done = Vec::with_capacity(plans.len());
    let mut plans = plans.into_iter();
    let mut failed = None;
    for Finished {
        plan,
        shown,
        staged,
        ..
    } in plans.by_ref()
    {
        let staged = match staged {
            Some(staged) => plan::stream::stage(&plan, staged),
            None => plan::stage(&plan),
        };
        match staged {
            Ok(r) => ready.push(r),
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
        done.push((plan, shown));
    }
    if let Some(e) = failed {
        // What every directory staged goes before the locks: an output
        // directory a lock made is removed only when empty.
        drop(ready);
        drop(plans);
        release(locks);
        return Err(fail(e));
    }
    for r in ready {
        r.link().map_err(fail)?;
    }
    // Still locked: the snapshot is of this build's output.
    let warned = !warnings.is_empty();
    record(cache, req, &read, &mut state, &done, warned, opts.verbose);
    drop(locks);
    Ok(Built {
        plans: done,
        read,
        state,
        warnings,
    })
}

/// Records a build in the cache, and whether it `warned`, saying with
/// `verbose` why it could not.
fn record(
    cache: &Result<cache::Cache, String>,
    req: &cache::Request,
    read: &crate::pipeline::Read,
    state: &mut cache::State,
    plans: &[(Plan, String)],
    warned: bool,
    verbose: bool,
) {
    let Ok(c) = cache else { return };
    let plans: Vec<&Plan> = plans.iter().map(|(p, _)| p).collect();
    if let Err(why) = c.save(req, read, state, &plans, warned)
        && verbose
    {
        eprintln!("cache: not recorded, because {why}");
    }
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
fn document(format: Format, check: bool, dirs: &[Done], warnings: &[Diagnostic]) -> String {
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
        Format::Github => report::github::render(warnings, &stale),
        Format::Sarif => report::sarif::render(warnings, &stale),
        Format::Text | Format::Json => {
            let body = json!({
                "check": check,
                "current": dirs.iter().all(|d| d.plan.is_none_or(Plan::is_noop)),
                "directories": dirs.iter().map(Done::json).collect::<Vec<_>>(),
            });
            report::json(body, warnings)
        }
    }
}
