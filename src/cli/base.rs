//! `--base REF` of `diff` and `build --check`: where the base's side of the
//! comparison comes from ([`crate::base`] does the comparing).

use std::path::Path;

use super::targets::targets;
use super::{Failure, Inputs, Output, Reporter};
use crate::base::{self, Base, Old};
use crate::build::Targets;
use crate::diagnostic::Diagnostic;
use crate::project::Project;

/// What `--base` hands the command: the working tree's directories against
/// what is on disk (`build --check`'s staleness), the findings that did not
/// stop the build, and the report against the base.
pub(super) struct AgainstBase {
    pub(super) on_disk: Vec<crate::build::Directory>,
    pub(super) warnings: Vec<Diagnostic>,
    pub(super) report: crate::diff::Report,
}

/// Checks out `reference` and compares the working tree's output with the
/// base's: its committed output, else its definitions built, else nothing;
/// each re-run of the report names the fields that changed.
pub(super) fn against(
    cwd: &Path,
    inputs: &Inputs,
    output: &Output,
    working: &Targets,
    reference: &str,
    reporter: &mut Reporter,
    fail: &impl Fn(Vec<Diagnostic>) -> Failure,
) -> Result<AgainstBase, Failure> {
    if !inputs.paths.is_empty() || output.output.is_some() || output.build_output.is_some() {
        return Err(fail(vec![
            Diagnostic::new("`--base` compares whole projects: it takes no paths, `-o` or `--build-output`")
                .hint("run it where `trainc build` runs with no arguments, in the project or with `--project`"),
        ]));
    }
    let project = &working.project;
    let mut within = vec![project.root.as_path()];
    let dirs = working.dirs();
    within.extend(dirs.iter().map(|d| d.as_path()));
    let base = Base::checkout(&project.root, reference, &within).map_err(|d| fail(vec![d]))?;
    let at_base = |findings: Vec<Diagnostic>| {
        let mut out = vec![Diagnostic::new(format!(
            "the project at {} cannot be read",
            base.named().shown()
        ))
        .hint("the comparison reads the base's project file and definitions as they are committed there")];
        out.extend(findings);
        fail(out)
    };
    let base_project = match base_project(&base, cwd, project) {
        Some((cwd, file)) => Some(
            Project::discover(&cwd, file.as_deref())
                .map(|p| (cwd, file, p))
                .map_err(at_base)?,
        ),
        None => None,
    };
    // The first directory the build writes: the project's `output`, or
    // its first variant's with `ownOutput: false`.
    let committed = dirs
        .first()
        .and_then(|d| base.at(d))
        .is_some_and(|d| d.is_dir());
    let old = match &base_project {
        _ if committed => Old::Committed,
        Some((cwd, file, p)) if crate::pipeline::files(p, cwd, &[]).is_ok() => {
            let inputs = Inputs {
                paths: Vec::new(),
                project: file.clone(),
                variant: inputs.variant.clone(),
                deny_warnings: false,
                workspace: false,
            };
            let none = Output {
                output: None,
                build_output: None,
            };
            Old::Built(Box::new(targets(cwd, &inputs, &none, &at_base)?))
        }
        _ => Old::Absent,
    };
    let compared = base::compare(
        cwd,
        working,
        &base,
        old,
        base_project.as_ref().map(|(_, _, p)| p),
        reporter,
    )?;
    let plans = compared
        .against_base
        .into_iter()
        .map(|d| (d.plan, d.shown, d.label_runs))
        .collect();
    Ok(AgainstBase {
        on_disk: compared.on_disk,
        warnings: compared.warnings,
        report: super::diff::report(plans, Some(&base), &compared.changed),
    })
}

/// Where the base's project is read from: the working directory's place in
/// the base, and the project file's when the working tree has one; `None`
/// when the base holds neither (the project is new).
fn base_project(
    base: &Base,
    cwd: &Path,
    project: &Project,
) -> Option<(std::path::PathBuf, Option<std::path::PathBuf>)> {
    let root = base.at(&project.root).filter(|d| d.is_dir())?;
    let cwd = base.at(cwd).filter(|d| d.is_dir()).unwrap_or(root);
    match &project.file {
        Some(file) => {
            let file = base.at(file).filter(|f| f.is_file())?;
            Some((cwd, Some(file)))
        }
        None => Some((cwd, None)),
    }
}
