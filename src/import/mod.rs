//! `trainc import`: definitions from the manifests a team migrates from.
//!
//! Each input document is recognised by its kind (a Kubeflow PyTorchJob or
//! TFJob, a JobSet, the Deployments or Jobs and Services of a hand-made
//! TensorFlow cluster, the values of the ACK/arena TFJob chart) and turned
//! into one `TrainingJob` definition, with a [`Note`] for every field it
//! read: kept (the definition says the same), changed (kept, but trainc
//! runs it differently), or left out (not expressible: what was done
//! instead). Nothing here writes; the CLI writes the definitions and prints
//! the notes.

mod chart;
mod kubeflow;
mod pod;
mod tasks;

use std::path::Path;

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::diagnostic::Diagnostic;
use crate::load;

/// What became of one field of the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fate {
    /// The definition says the same, and trainc writes it back.
    Kept,
    /// Kept, but trainc runs it differently (the note says how).
    Changed,
    /// Not expressible in a definition: left out, the note says what to
    /// do instead (a patch, a setting of the cluster).
    LeftOut,
}

impl Fate {
    fn word(self) -> &'static str {
        match self {
            Fate::Kept => "kept",
            Fate::Changed => "changed",
            Fate::LeftOut => "left out",
        }
    }
}

/// One field of the input and what became of it.
#[derive(Debug, Clone, Serialize)]
pub struct Note {
    /// Where it was, a dotted path in the input document.
    pub from: String,
    pub fate: Fate,
    /// Where it is in the definition, when it is there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// Why, for what is not kept as it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

impl Note {
    pub fn line(&self) -> String {
        let mut s = format!("{:<8}  {}", self.fate.word(), self.from);
        if let Some(to) = &self.to {
            s.push_str(&format!(" → {to}"));
        }
        if let Some(why) = &self.why {
            s.push_str(&format!(": {why}"));
        }
        s
    }
}

/// One definition made from the input.
#[derive(Debug, Clone)]
pub struct Imported {
    /// The input file, as messages name it.
    pub source: String,
    /// What it was: `PyTorchJob`, `TFJob`, `JobSet`, …
    pub kind: String,
    pub name: String,
    pub namespace: Option<String>,
    /// The `TrainingJob` document.
    pub definition: Value,
    pub notes: Vec<Note>,
}

/// The notes of one definition, as it is made.
#[derive(Default)]
pub(crate) struct Notes(Vec<Note>);

impl Notes {
    pub(crate) fn kept(&mut self, from: impl Into<String>, to: impl Into<String>) {
        self.0.push(Note {
            from: from.into(),
            fate: Fate::Kept,
            to: Some(to.into()),
            why: None,
        });
    }

    pub(crate) fn changed(
        &mut self,
        from: impl Into<String>,
        to: Option<&str>,
        why: impl Into<String>,
    ) {
        self.0.push(Note {
            from: from.into(),
            fate: Fate::Changed,
            to: to.map(str::to_owned),
            why: Some(why.into()),
        });
    }

    pub(crate) fn left_out(&mut self, from: impl Into<String>, why: impl Into<String>) {
        self.0.push(Note {
            from: from.into(),
            fate: Fate::LeftOut,
            to: None,
            why: Some(why.into()),
        });
    }
}

/// Reads `files` and makes a definition of every training run in them.
/// Every document must be one trainc can read; a values file is one
/// document.
pub fn import(cwd: &Path, files: &[std::path::PathBuf]) -> Result<Vec<Imported>, Vec<Diagnostic>> {
    let mut out = Vec::new();
    let mut refused = Vec::new();
    for file in files {
        let path = cwd.join(file);
        let shown = crate::paths::shown_path(cwd, &path);
        let source = match load::read(&path, shown.clone()) {
            Ok(s) => s,
            Err(d) => {
                refused.push(d);
                continue;
            }
        };
        let docs = match load::parse(&source) {
            Ok(d) => d,
            Err(d) => {
                refused.push(d);
                continue;
            }
        };
        let values: Vec<Value> = docs.into_iter().map(|d| d.value).collect();
        match from_documents(&shown, &values) {
            Ok(found) => out.extend(found),
            Err(d) => refused.extend(d),
        }
    }
    if refused.is_empty() {
        Ok(out)
    } else {
        Err(refused)
    }
}

/// The definitions of one file's documents.
fn from_documents(shown: &str, docs: &[Value]) -> Result<Vec<Imported>, Vec<Diagnostic>> {
    let kind = |d: &Value| d["kind"].as_str().unwrap_or_default().to_owned();
    // The chart's values: no `kind`, its own keys.
    if let [only] = docs
        && only.get("kind").is_none()
        && chart::is_values(only)
    {
        return Ok(vec![chart::import(shown, only)]);
    }
    let mut out = Vec::new();
    let mut refused = Vec::new();
    let mut task_objects = Vec::new();
    for (i, doc) in docs.iter().enumerate() {
        match kind(doc).as_str() {
            "PyTorchJob" | "TFJob" => out.push(kubeflow::import(shown, doc)),
            "JobSet" => match kubeflow::import_jobset(shown, doc) {
                Ok(found) => out.push(found),
                Err(d) => refused.push(d),
            },
            "Deployment" | "Job" | "Service" => task_objects.push(doc),
            "" if doc.is_null() => {}
            other => refused.push(
                Diagnostic::new(format!(
                    "{shown}: document {} is {}, which `trainc import` does not read",
                    i + 1,
                    if other.is_empty() {
                        "no Kubernetes object".to_owned()
                    } else {
                        format!("a {other}")
                    }
                ))
                .hint("import Kubeflow PyTorchJobs and TFJobs, JobSets, the Deployments or Jobs (and Services) of a hand-made TensorFlow cluster, or the ACK/arena TFJob chart's values"),
            ),
        }
    }
    if !task_objects.is_empty() {
        match tasks::import(shown, &task_objects) {
            Ok(found) => out.push(found),
            Err(d) => refused.push(d),
        }
    }
    if out.is_empty() && refused.is_empty() {
        refused.push(Diagnostic::new(format!(
            "{shown} holds no training run to import"
        )));
    }
    if refused.is_empty() {
        Ok(out)
    } else {
        Err(refused)
    }
}

/// A definition document: `metadata` and `spec` as built, in the order a
/// person writes them.
pub(crate) fn definition(
    name: &str,
    namespace: Option<&str>,
    meta: Map<String, Value>,
    spec: Map<String, Value>,
) -> Value {
    let mut metadata = Map::new();
    metadata.insert("name".to_owned(), name.into());
    if let Some(ns) = namespace {
        metadata.insert("namespace".to_owned(), ns.into());
    }
    metadata.extend(meta);
    json!({
        "apiVersion": "trainc.dev/v1alpha1",
        "kind": "TrainingJob",
        "metadata": metadata,
        "spec": spec,
    })
}

/// The definition file for `imported`: a comment naming where it came from
/// and what was left out, then the document.
pub fn file_text(imported: &Imported) -> Result<String, String> {
    let mut out = format!(
        "# Imported by `trainc import` from {} ({} {}).\n",
        crate::emit::comment_safe(&imported.source),
        imported.kind,
        crate::emit::comment_safe(&imported.name)
    );
    let left: Vec<&Note> = imported
        .notes
        .iter()
        .filter(|n| n.fate != Fate::Kept)
        .collect();
    if !left.is_empty() {
        out.push_str("# Not kept as it was:\n");
        for n in left {
            out.push_str(&format!("# - {}\n", crate::emit::comment_safe(&n.line())));
        }
    }
    let mut bytes = Vec::new();
    crate::emit::yaml::to_writer(&mut bytes, &imported.definition).map_err(|e| e.to_string())?;
    out.push_str(&String::from_utf8_lossy(&bytes));
    Ok(out)
}
