//! `trainc init`: a starter project whose definition validates as written.

use std::path::Path;

use minijinja::{Environment, context};

use std::sync::Arc;

use crate::diagnostic::Diagnostic;
use crate::load::project::PROJECT_FILE;
use crate::model::definition::Target;
use crate::model::project::Defaults;
use crate::source::SourceFile;
use crate::validate::schema::TRAINING_JOB_SCHEMA;
use crate::{load, validate};

const DEFINITION_TEMPLATE: &str = include_str!("../library/init/trainingjob.yaml.j2");
const PROJECT_TEMPLATE: &str = include_str!("../library/init/trainc.yaml.j2");

/// What a starter project is called and where it goes.
#[derive(Debug, Clone)]
pub struct Starter<'a> {
    pub name: &'a str,
    pub namespace: &'a str,
    /// The project's `defaults.target`.
    pub target: Target,
}

/// What `init` writes, relative to the target directory.
pub fn files(s: &Starter) -> Result<Vec<(String, String)>, Diagnostic> {
    let env = Environment::new();
    let (name, namespace, target) = (s.name, s.namespace, s.target.as_str());
    let render = |tpl: &str| {
        env.render_str(tpl, context! { name, namespace, target })
            .map(|mut s| {
                if !s.ends_with('\n') {
                    s.push('\n');
                }
                s
            })
            .map_err(|e| Diagnostic::new(format!("internal error: starter template: {e}")))
    };
    Ok(vec![
        (PROJECT_FILE.to_owned(), render(PROJECT_TEMPLATE)?),
        (format!("jobs/{name}.yaml"), render(DEFINITION_TEMPLATE)?),
        (
            "schema/trainingjob.schema.json".to_owned(),
            TRAINING_JOB_SCHEMA.to_owned(),
        ),
    ])
}

/// Writes the starter files, refusing to overwrite any unless `force`.
/// Returns the paths written.
pub fn init(dir: &Path, starter: &Starter, force: bool) -> Result<Vec<String>, Vec<Diagnostic>> {
    let files = files(starter).map_err(|d| vec![d])?;
    // The starter must validate as written; checking the rendered text also
    // refuses names that are not DNS labels (or that would escape `jobs/`)
    // before anything is written.
    for (rel, text) in files.iter().filter(|(rel, _)| rel.starts_with("jobs/")) {
        let source = Arc::new(SourceFile::new(rel.clone(), text.clone()));
        let docs = load::parse(&source).map_err(|d| vec![d])?;
        let defaults = Defaults {
            namespace: Some(starter.namespace.to_owned()),
            target: Some(starter.target),
            ..Defaults::default()
        };
        let library = crate::library::Library::builtin()?;
        let cx = validate::Context {
            defaults: &defaults,
            library: &library,
            root: dir,
            generated: &[],
        };
        validate::validate(&docs, &cx).map_err(|mut d| {
            d.push(Diagnostic::new("`trainc init` would write an invalid starter").hint(
                "use `--name` and `--namespace` values that are DNS labels: lower-case letters, digits and '-'",
            ));
            d
        })?;
    }
    if !force {
        let existing: Vec<Diagnostic> = files
            .iter()
            .filter(|(rel, _)| dir.join(rel).exists())
            .map(|(rel, _)| {
                Diagnostic::new(format!("{} already exists", dir.join(rel).display()))
                    .hint("pass --force to overwrite it, or run `trainc init` in another directory")
            })
            .collect();
        if !existing.is_empty() {
            return Err(existing);
        }
    }
    let mut written = Vec::new();
    for (rel, text) in files {
        let path = dir.join(&rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| {
                vec![Diagnostic::new(format!(
                    "cannot create {}: {e}",
                    parent.display()
                ))]
            })?;
        }
        std::fs::write(&path, text).map_err(|e| {
            vec![Diagnostic::new(format!(
                "cannot write {}: {e}",
                path.display()
            ))]
        })?;
        written.push(rel);
    }
    Ok(written)
}
