//! `trainc init`: a starter project whose definition validates as written
//! and whose program trains, in the cluster and with `trainc run --local`.
//! Not a pipeline stage: it writes the inputs the pipeline reads.

use std::path::Path;

use minijinja::{Environment, context};

use std::sync::Arc;

use crate::diagnostic::Diagnostic;
use crate::load::project::PROJECT_FILE;
use crate::model::definition::{Framework, Target};
use crate::model::project::Defaults;
use crate::source::SourceFile;
use crate::validate::schema::TRAINING_JOB_SCHEMA;
use crate::{load, validate};

const PROJECT_TEMPLATE: &str = include_str!("../library/init/trainc.yaml.j2");
const REQUIREMENTS: &str = include_str!("../library/init/requirements.txt");

/// A framework's starter: the definition (a template) and the program it
/// builds and runs (written as is).
struct Files {
    definition: &'static str,
    program: &'static str,
}

fn starter_files(framework: Framework) -> Files {
    match framework {
        Framework::Tensorflow => Files {
            definition: include_str!("../library/init/tensorflow.yaml.j2"),
            program: include_str!("../library/init/tensorflow/train.py"),
        },
        Framework::Pytorch => Files {
            definition: include_str!("../library/init/pytorch.yaml.j2"),
            program: include_str!("../library/init/pytorch/train.py"),
        },
    }
}

/// `--framework`: `tensorflow` or `pytorch`.
pub fn parse_framework(s: &str) -> Result<Framework, String> {
    [Framework::Tensorflow, Framework::Pytorch]
        .into_iter()
        .find(|f| f.as_str() == s)
        .ok_or_else(|| format!("unknown framework `{s}`: use tensorflow or pytorch"))
}

/// What a starter project is called and where it goes.
#[derive(Debug, Clone)]
pub struct Starter<'a> {
    pub name: &'a str,
    pub namespace: &'a str,
    /// The project's `defaults.target`.
    pub target: Target,
    /// The starter job's framework, and with it its program.
    pub framework: Framework,
}

/// What `init` writes, relative to the target directory.
pub fn files(s: &Starter) -> Result<Vec<(String, String)>, Diagnostic> {
    let env = Environment::new();
    let (name, namespace, target) = (s.name, s.namespace, s.target.as_str());
    let framework = s.framework.as_str();
    let starter = starter_files(s.framework);
    let render = |tpl: &str| {
        env.render_str(tpl, context! { name, namespace, target, framework })
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
        (format!("jobs/{name}.yaml"), render(starter.definition)?),
        ("train/train.py".to_owned(), starter.program.to_owned()),
        ("train/requirements.txt".to_owned(), REQUIREMENTS.to_owned()),
        (
            "schema/trainingjob.schema.json".to_owned(),
            TRAINING_JOB_SCHEMA.to_owned(),
        ),
    ])
}

/// Writes the starter files, refusing to overwrite any unless `force`.
/// Returns the paths written.
pub fn init(dir: &Path, starter: &Starter, force: bool) -> Result<Vec<String>, Vec<Diagnostic>> {
    if let Some(runs) = starter
        .target
        .framework()
        .filter(|f| *f != starter.framework)
    {
        let other = [Target::Tfjob, Target::Pytorchjob]
            .into_iter()
            .find(|t| t.framework() == Some(starter.framework))
            .map_or("", Target::as_str);
        return Err(vec![
            Diagnostic::new(format!(
                "--target {}: that target runs {} jobs, and the starter is a {} job",
                starter.target.as_str(),
                runs.display(),
                starter.framework.display()
            ))
            .hint(format!(
                "pass `--framework {}` for a {} starter, or `--target {other}`, `jobset` or `kubernetes`",
                runs.as_str(),
                runs.display()
            )),
        ]);
    }
    let files = files(starter).map_err(|d| vec![d])?;
    // The starter must validate as written; checking the rendered text also
    // refuses names that are not DNS labels (or that would escape `jobs/`)
    // before anything is written. The build context is checked on disk, so
    // the program goes into a scratch directory that stands in for `dir`.
    let stage = tempfile::tempdir().map_err(|e| {
        vec![Diagnostic::new(format!(
            "cannot create a temporary directory: {e}"
        ))]
    })?;
    write(
        stage.path(),
        files.iter().filter(|(rel, _)| rel.starts_with("train/")),
    )?;
    // `jobs/../train` resolves only where `jobs` exists.
    std::fs::create_dir_all(stage.path().join("jobs")).map_err(|e| {
        vec![Diagnostic::new(format!(
            "cannot create a temporary directory: {e}"
        ))]
    })?;
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
            root: stage.path(),
            top: stage.path(),
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
    write(dir, &files)
}

/// Writes `files` below `root`; returns their relative paths.
fn write<'f>(
    root: &Path,
    files: impl IntoIterator<Item = &'f (String, String)>,
) -> Result<Vec<String>, Vec<Diagnostic>> {
    let mut written = Vec::new();
    for (rel, text) in files {
        let path = root.join(rel);
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
        written.push(rel.clone());
    }
    Ok(written)
}
