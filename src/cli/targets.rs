//! Where `build`, `build --check` and `diff` read and write: the project's
//! output directories and their guards, and the status lines of their plans.

use std::path::{Path, PathBuf};

use super::{Failure, Inputs, Output, plural};
use crate::build::{Set, Targets};
use crate::diagnostic::Diagnostic;
use crate::plan::{Op, Plan};
use crate::project::Project;
use crate::{guard, pipeline};

/// The variants `--variant` names, or an error; none for none.
pub(super) fn selected(project: &Project, names: &[String]) -> Result<Vec<usize>, Vec<Diagnostic>> {
    let chosen = project.select(names)?;
    Ok(project
        .variants
        .iter()
        .enumerate()
        .filter(|(_, v)| chosen.iter().any(|c| c.name == v.name))
        .map(|(i, _)| i)
        .collect())
}

pub(super) fn targets(
    cwd: &Path,
    inputs: &Inputs,
    output: &Output,
    fail: &impl Fn(Vec<Diagnostic>) -> Failure,
) -> Result<Targets, Failure> {
    let mut project = Project::discover(cwd, inputs.project.as_deref()).map_err(fail)?;
    if !inputs.variant.is_empty() && (output.output.is_some() || output.build_output.is_some()) {
        return Err(fail(vec![
            Diagnostic::new("`--variant` cannot be given with `-o` or `--build-output`")
                .hint("a variant is built into the directories the project file gives it (`variants.<name>.output` and `buildOutput`)"),
        ]));
    }
    let chosen = selected(&project, &inputs.variant).map_err(fail)?;
    let own_output = project.output.clone();
    if let Some(o) = &output.output {
        // Also keeps `-o` out of the definitions when it lies among them.
        project.output = cwd.join(o);
    }
    // `-o` naming the project's own output is no way around the guard.
    let same = |a: &Path, b: &Path| {
        a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
    };
    let project_output = same(&project.output, &own_output);
    let build_output = match &output.build_output {
        Some(b) => Some(cwd.join(b)),
        None => project_output.then(|| project.build_output.clone()),
    };
    let project_build = build_output
        .as_deref()
        .is_some_and(|b| same(b, &project.build_output));
    let variants = !inputs.variant.is_empty() || project_output;
    if !inputs.paths.is_empty() && (project_output || project_build || variants) {
        partial_guard(&project, cwd, &inputs.paths).map_err(fail)?;
    }
    let mut sets = Vec::new();
    // `ownOutput: false`: the variants only, unless `-o` asks for the
    // definitions as written somewhere.
    if inputs.variant.is_empty() && (project.own_output || output.output.is_some()) {
        sets.push(Set {
            variant: None,
            output: project.output.clone(),
            build_output,
            own: project_output,
        });
    }
    // The variants go with the project's own output: `-o` elsewhere builds
    // the paths alone.
    if variants {
        sets.extend(chosen.into_iter().map(|i| Set::variant(&project, i)));
    }
    // Where the project file sets each directory, and how messages call it.
    let labels: Vec<[String; 4]> = sets
        .iter()
        .map(|s| match s.variant.map(|i| &project.variants[i]) {
            None => [
                "output",
                "buildOutput",
                "output directory",
                "build directory",
            ]
            .map(str::to_owned),
            Some(v) => [
                v.pointer("output")[1..].to_owned(),
                v.pointer("buildOutput")[1..].to_owned(),
                format!("output directory of variant `{}`", v.name),
                format!("build directory of variant `{}`", v.name),
            ],
        })
        .collect();
    let mut dests = Vec::new();
    for (s, [out_key, build_key, out_what, build_what]) in sets.iter().zip(&labels) {
        let project_set = s.variant.is_none();
        dests.push(guard::Dest {
            path: &s.output,
            flag: (project_set && output.output.is_some()).then_some("-o"),
            key: out_key,
            what: out_what,
            own: s.own,
        });
        if let Some(b) = &s.build_output {
            dests.push(guard::Dest {
                path: b,
                flag: (project_set && output.build_output.is_some()).then_some("--build-output"),
                key: build_key,
                what: build_what,
                own: !project_set || project_build,
            });
        }
    }
    guard::check(&project, cwd, &inputs.paths, &dests).map_err(fail)?;
    Ok(Targets { project, sets })
}

/// The output directory is a function of all its inputs: building some of a
/// project's definitions into the project's output would prune every other
/// job. So paths given without `-o` must name exactly the project's
/// definitions (`trainc build jobs/` in a project whose sources are `jobs`).
pub(super) fn partial_guard(
    project: &Project,
    cwd: &Path,
    paths: &[PathBuf],
) -> Result<(), Vec<Diagnostic>> {
    let given = pipeline::files(project, cwd, paths)?;
    // Without trainc.yaml, and no `jobs/` to stand for the project, the
    // paths alone define the output.
    let all = pipeline::files(project, cwd, &[]).unwrap_or_default();
    if given == all || (project.file.is_none() && all.is_empty()) {
        return Ok(());
    }
    let out = project.shown_dir(&project.output);
    // Run in a subdirectory, the user may not know a project is in play.
    let sources = match &project.file {
        Some(file) if project.found_above() => {
            format!("the sources of the project {}", project.shown(file))
        }
        _ => "the project's sources".to_owned(),
    };
    let missing = all.iter().filter(|f| !given.contains(f)).count();
    let extra = given.iter().filter(|f| !all.contains(f)).count();
    let what = match (missing, extra) {
        (0, n) => format!("{} outside the project's sources", plural(n, "file")),
        (n, 0) => format!(
            "leaves out {} of the project's sources",
            plural(n, "definition file")
        ),
        (m, n) => format!(
            "leaves out {} of the project's sources and adds {} outside them",
            plural(m, "definition file"),
            plural(n, "file")
        ),
    };
    Err(vec![
        Diagnostic::new(format!(
            "the paths given are not {sources} ({what}); building them into {out} would prune the other jobs"
        ))
        .hint(
            "run without paths to build the whole project, or pass `-o DIR` to build only these paths into another directory; `trainc validate PATH…` checks a subset",
        ),
    ])
}

/// The status lines of planned (or written) directories: one line when
/// every directory is current, else a line per directory, `changed` saying
/// what happens to those that are not.
pub(super) fn status(plans: &[(Plan, String)], changed: impl Fn(&Plan, &str) -> String) -> String {
    let line = |plan: &Plan, dir: &str| {
        if plan.is_noop() {
            format!("{}\n", up_to_date(&[(plan.files(), dir)]))
        } else {
            changed(plan, dir)
        }
    };
    if plans.iter().all(|(p, _)| p.is_noop()) {
        let dirs: Vec<(usize, &str)> = plans.iter().map(|(p, d)| (p.files(), d.as_str())).collect();
        format!("{}\n", up_to_date(&dirs))
    } else {
        plans.iter().map(|(p, d)| line(p, d)).collect()
    }
}

/// `deploy is up to date (17 files)`, or for several directories
/// `deploy and build are up to date (17 and 2 files)`,
/// `deploy, build and deploy-cpu are up to date (17, 2 and 17 files)`.
pub(super) fn up_to_date(dirs: &[(usize, impl AsRef<str>)]) -> String {
    /// `a`, `a and b`, `a, b and c`.
    fn and(items: &[String]) -> String {
        match items {
            [] => String::new(),
            [one] => one.clone(),
            [first @ .., last] => format!("{} and {last}", first.join(", ")),
        }
    }
    match dirs {
        [(n, dir)] => format!("{} is up to date ({})", dir.as_ref(), plural(*n, "file")),
        _ => {
            let counts: Vec<String> = dirs.iter().map(|(n, _)| n.to_string()).collect();
            let dirs: Vec<String> = dirs.iter().map(|(_, d)| d.as_ref().to_owned()).collect();
            format!("{} are up to date ({} files)", and(&dirs), and(&counts))
        }
    }
}

pub(super) fn summary(plan: &Plan) -> String {
    format!(
        "{} created, {} updated, {} deleted, {} unchanged",
        plan.count(Op::Create),
        plan.count(Op::Update),
        plan.count(Op::Delete),
        plan.count(Op::Unchanged)
    )
}
