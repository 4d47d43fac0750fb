//! Stage 2: JSON Schema and semantic rules. Nothing downstream ever sees an
//! invalid definition: [`validate`] returns resolved jobs or every finding.

mod budget;
mod image;
mod patches;
pub mod rules;
pub mod schema;
mod security;
mod suggest;

use std::collections::BTreeMap;
use std::path::Path;

use crate::diagnostic::{self, Diagnostic};
use crate::library::Library;
use crate::load::Document;
use crate::model::definition::TrainingJob;
use crate::model::job::{self, Job, namespace_of};
use crate::model::project::Defaults;

pub use budget::floor;
pub use image::{REFERENCE_HINT, dockerfile_path_error, name_error, reference_error};
pub use suggest::did_you_mean;

/// Validates every document and resolves the valid ones. Findings from all
/// documents are gathered, so one run reports everything.
/// What validation needs besides the documents.
pub struct Context<'a> {
    pub defaults: &'a Defaults,
    pub library: &'a Library,
    /// The project root: document names are relative to it.
    pub root: &'a Path,
    /// The directories trainc writes, with what each is: no build context
    /// may include them.
    pub generated: &'a [(&'a Path, String)],
}

/// The resolved jobs and the warnings about them.
pub fn validate(
    docs: &[Document],
    cx: &Context,
) -> Result<(Vec<Job>, Vec<Diagnostic>), Vec<Diagnostic>> {
    let defaults = cx.defaults;
    let mut diags = Vec::new();
    let mut warnings = Vec::new();
    let mut valid: Vec<(&Document, TrainingJob)> = Vec::new();
    for doc in docs {
        if let Some(d) = project_file(doc) {
            diags.push(d);
            continue;
        }
        let found = schema::training_job(doc).check(doc);
        if !found.is_empty() {
            diags.extend(found);
            continue;
        }
        match doc.typed::<TrainingJob>() {
            Ok(mut def) => {
                def.keep_written(|p| doc.source_text(p).map(str::to_owned));
                let (found, warned): (Vec<Diagnostic>, Vec<Diagnostic>) =
                    rules::check(doc, &def, cx)
                        .into_iter()
                        .partition(Diagnostic::is_error);
                warnings.extend(warned);
                if found.is_empty() {
                    valid.push((doc, def));
                } else {
                    diags.extend(found);
                }
            }
            Err(d) => diags.push(d),
        }
    }
    duplicates(&valid, defaults, &mut diags);
    budget::check(&valid, &mut diags);
    if diags.is_empty() {
        collisions(&valid, defaults, &mut diags);
    }
    if !diags.is_empty() {
        // Warnings too: a user fixing errors sees everything at once.
        diags.extend(warnings);
        diagnostic::normalize(&mut diags);
        return Err(diags);
    }
    let mut jobs: Vec<Job> = valid
        .iter()
        .map(|(doc, def)| {
            // rules::check has made sure the preset exists.
            let preset = cx.library.preset(def.framework_name());
            preset.map(|p| job::resolve(def, defaults, &doc.file.name, cx.root, p))
        })
        .collect::<Option<Vec<Job>>>()
        .ok_or_else(|| {
            vec![Diagnostic::new(
                "internal error: a validated job has no preset",
            )]
        })?;
    // Patches are checked by applying them to the pod templates, which
    // only a resolved job has.
    for ((doc, _), job) in valid.iter().zip(&jobs) {
        let (warned, found): (Vec<Diagnostic>, Vec<Diagnostic>) = patches::applied(doc, job)
            .into_iter()
            .partition(|d| !d.is_error());
        warnings.extend(warned);
        diags.extend(found);
    }
    if !diags.is_empty() {
        diags.extend(warnings);
        diagnostic::normalize(&mut diags);
        return Err(diags);
    }
    diagnostic::normalize(&mut warnings);
    jobs.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    Ok((jobs, warnings))
}

/// A project file among the sources (`trainc build examples` finds
/// `examples/mnist/trainc.yaml`) is refused, once and by name, rather than
/// checked as a broken definition: it is no definition, and skipping it
/// would compile that project's jobs without its defaults (its namespace,
/// say), into another output directory. As with `kubectl apply -f` on a
/// kustomization directory, the fix is the command for projects.
fn project_file(doc: &Document) -> Option<Diagnostic> {
    let kind = doc.value.get("kind")?.as_str()?;
    let api = doc
        .value
        .get("apiVersion")
        .and_then(serde_json::Value::as_str);
    if kind != "Project" || !api.is_some_and(|a| a.starts_with("trainc.dev/")) {
        return None;
    }
    let name = &doc.file.shown;
    Some(
        Diagnostic::new(format!("{name} is a project file, not a definition"))
            .at(doc.locate("/kind"))
            .hint(format!(
                "a project found among the definitions is not applied: to build it, pass `--project {name}` and no paths (or run trainc in its directory); else leave its directory out of the paths"
            )),
    )
}

/// The same job (namespace + name) defined twice would write the same files.
fn duplicates(
    valid: &[(&Document, TrainingJob)],
    defaults: &Defaults,
    diags: &mut Vec<Diagnostic>,
) {
    let mut seen: BTreeMap<(String, String), &Document> = BTreeMap::new();
    // Report the later definition (by file name, then position), whatever
    // order the files were given in.
    let mut ordered: Vec<&(&Document, TrainingJob)> = valid.iter().collect();
    ordered.sort_by_key(|(doc, _)| {
        let pos = doc.spans.get("").map(|p| (p.value.line, p.value.column));
        (doc.file.name.clone(), pos)
    });
    for (doc, def) in ordered {
        let key = (namespace_of(def, defaults), def.metadata.name.clone());
        if let Some(first) = seen.get(&key) {
            let mut d = Diagnostic::new(format!("job `{}/{}` is defined twice", key.0, key.1))
                .path("metadata.name")
                .at(doc.locate("/metadata/name"))
                .hint("give each job its own name or namespace");
            if let Some(loc) = first.locate("/metadata/name") {
                d = d.related("first defined here", loc);
            }
            diags.push(d);
        } else {
            seen.insert(key, doc);
        }
    }
}

/// Two jobs whose generated objects share a name (job `a` with volume `z-data`
/// and job `a-z` with volume `data` both claim `a-z-data`) would overwrite
/// each other in the cluster.
fn collisions(
    valid: &[(&Document, TrainingJob)],
    defaults: &Defaults,
    diags: &mut Vec<Diagnostic>,
) {
    let mut ordered: Vec<&(&Document, TrainingJob)> = valid.iter().collect();
    ordered.sort_by_key(|(doc, _)| {
        let pos = doc.spans.get("").map(|p| (p.value.line, p.value.column));
        (doc.file.name.clone(), pos)
    });
    let mut owners: BTreeMap<(&'static str, Option<String>, String), &Document> = BTreeMap::new();
    for (doc, def) in ordered {
        let mut reported = false;
        for g in rules::generated(def, defaults) {
            let key = (g.kind, g.namespace.clone(), g.name.clone());
            match owners.get(&key) {
                Some(first) if !std::ptr::eq(*first, *doc) && !reported => {
                    let shown = match &g.namespace {
                        Some(ns) => format!("{ns}/{}", g.name),
                        None => g.name.clone(),
                    };
                    let mut d = Diagnostic::new(format!(
                        "this job generates {} `{shown}`, which another job generates too",
                        g.kind
                    ))
                    .path("metadata.name")
                    .at(doc.locate("/metadata/name"))
                    .hint("rename the job or the volume so generated names differ");
                    if let Some(loc) = first.locate("/metadata/name") {
                        d = d.related("the other job", loc);
                    }
                    diags.push(d);
                    reported = true;
                }
                Some(_) => {}
                None => {
                    owners.insert(key, doc);
                }
            }
        }
    }
}
