//! `trainc import`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{Failure, Out, Status, SummaryFormat, fail};
use crate::diagnostic::Diagnostic;
use crate::import::{self, Imported};
use crate::model::project::Defaults;
use crate::source::SourceFile;

/// `trainc import FILE… [--into DIR]`: a definition per training run of the
/// files, written into the project at `DIR` (its first `sources` directory)
/// or, with no project there, into `DIR/jobs` beside a new `trainc.yaml`.
pub(super) fn import(
    cwd: &Path,
    stdout: &mut Out,
    files: &[PathBuf],
    into: Option<&Path>,
    force: bool,
    format: SummaryFormat,
) -> Result<Status, Failure> {
    let fail = fail(format.findings());
    let found = import::import(cwd, files).map_err(&fail)?;
    let dir = cwd.join(into.unwrap_or(Path::new(".")));
    let project_file = dir.join("trainc.yaml");
    let (jobs_dir, mut defaults, new_project) = if project_file.symlink_metadata().is_ok() {
        let project = crate::project::Project::discover(cwd, Some(&project_file)).map_err(&fail)?;
        let first = project
            .sources
            .first()
            .cloned()
            .unwrap_or_else(|| dir.join("jobs"));
        let rel = crate::paths::display_name(&dir, &first);
        (rel, project.defaults.clone(), false)
    } else {
        ("jobs".to_owned(), Defaults::default(), true)
    };
    let mut written: Vec<(String, String)> = Vec::new();
    let mut names = std::collections::BTreeSet::new();
    for imported in &found {
        if !is_file_name(&imported.name) || !names.insert(imported.name.clone()) {
            return Err(fail(vec![
                Diagnostic::new(format!(
                    "{}: a second job named `{}`, or a name that is no file name",
                    imported.source, imported.name
                ))
                .hint("give each imported run its own `metadata.name`, a DNS label"),
            ]));
        }
        let text = import::file_text(imported)
            .map_err(|e| fail(vec![Diagnostic::new(format!("internal error: {e}"))]))?;
        written.push((format!("{jobs_dir}/{}.yaml", imported.name), text));
    }
    if new_project {
        let namespaces: std::collections::BTreeSet<&str> = found
            .iter()
            .filter_map(|i| i.namespace.as_deref())
            .collect();
        let mut text = "# Project settings, written by `trainc import`: where the definitions are,\n# where their output goes.\napiVersion: trainc.dev/v1alpha1\nkind: Project\nsources: [jobs]\noutput: deploy\n".to_owned();
        if let [ns] = namespaces.iter().collect::<Vec<_>>().as_slice() {
            text.push_str(&format!("defaults:\n  namespace: {ns}\n"));
            defaults.namespace = Some((**ns).to_owned());
        }
        written.insert(0, ("trainc.yaml".to_owned(), text));
    }
    check(&dir, &written, &defaults).map_err(&fail)?;
    let paths = crate::init::write_files(cwd, &dir, &written, force).map_err(&fail)?;
    let shown: Vec<String> = paths
        .iter()
        .map(|f| crate::paths::display_name(cwd, &dir.join(f)))
        .collect();
    report(stdout, &found, &shown, new_project, format);
    Ok(Status::Ok)
}

/// A job name that is safe as a file name below `jobs/`.
fn is_file_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && !name.starts_with('.')
}

/// Every definition must validate as written, before anything is written:
/// an import is a start, never a broken project.
fn check(
    dir: &Path,
    files: &[(String, String)],
    defaults: &Defaults,
) -> Result<(), Vec<Diagnostic>> {
    let library = crate::library::Library::builtin()?;
    let cx = crate::validate::Context {
        defaults,
        library: &library,
        root: dir,
        top: dir,
        generated: &[],
    };
    let sources: Vec<Arc<SourceFile>> = files
        .iter()
        .filter(|(rel, _)| rel != "trainc.yaml")
        .map(|(rel, text)| Arc::new(SourceFile::new(rel.clone(), text.clone())))
        .collect();
    crate::validate::validate(&sources, &cx).map(|_| ()).map_err(|mut d| {
        d.push(Diagnostic::new("the imported definitions do not validate: nothing was written").hint(
            "the findings above name what the input has that a definition cannot say; fix it in the input, or import and edit by hand",
        ));
        d
    })
}

fn report(
    stdout: &mut Out,
    found: &[Imported],
    files: &[String],
    new_project: bool,
    format: SummaryFormat,
) {
    let definitions = &files[usize::from(new_project)..];
    match format {
        SummaryFormat::Text => {
            for (imported, file) in found.iter().zip(definitions) {
                let _ = writeln!(
                    stdout,
                    "imported {} {} from {} into {file}",
                    imported.kind, imported.name, imported.source
                );
                for n in &imported.notes {
                    let _ = writeln!(stdout, "  {}", n.line());
                }
            }
            if new_project {
                let _ = writeln!(stdout, "wrote {}", files[0]);
            }
        }
        SummaryFormat::Json => {
            let jobs: Vec<serde_json::Value> = found
                .iter()
                .zip(definitions)
                .map(|(i, file)| {
                    serde_json::json!({
                        "source": i.source, "kind": i.kind, "name": i.name, "file": file, "notes": i.notes,
                    })
                })
                .collect();
            let body = serde_json::json!({"files": files, "jobs": jobs});
            let _ = write!(stdout, "{}", crate::report::json(body, &[]));
        }
    }
}
