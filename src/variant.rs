//! Stage 1b, between load and validate: variants. A variant is the
//! project's definitions with the merge patches of `variants.<name>` in
//! `trainc.yaml` applied, in order, to each document (RFC 7386: mappings
//! merge, `null` deletes, anything else, lists too, replaces, as Helm
//! values do). The patched documents are then validated, resolved and
//! compiled like any others, into the variant's own output directory.
//!
//! Patching comes before validation, so a patch can do anything a
//! definition can, and a wrong value it sets is reported where the patch
//! sets it, in `trainc.yaml` (see [`crate::load::Document::merge_patch`]).

use std::collections::BTreeSet;

use serde_json::Value;

use crate::diagnostic::Diagnostic;
use crate::load::Document;
use crate::model::project::Variant;

/// The name a document's patches are chosen by: its `metadata.name` as
/// written.
fn name_of(doc: &Document) -> Option<&str> {
    doc.value.pointer("/metadata/name").and_then(Value::as_str)
}

/// The documents of `variant`: each mapping document with the variant's
/// patches applied in order, the patches located in `project`, the
/// project file. Other documents (empty ones, a list by mistake) are left
/// as they are, for validation to report.
pub fn apply(variant: &Variant, docs: Vec<Document>, project: &Document) -> Vec<Document> {
    docs.into_iter()
        .filter(|doc| selected(variant, doc))
        .map(|mut doc| {
            if !doc.value.is_object() {
                return doc;
            }
            let name = name_of(&doc).map(str::to_owned);
            for p in &variant.patches {
                if p.job.is_none() || p.job == name {
                    doc.merge_patch(&p.value, project, &format!("{}/patch", p.pointer));
                }
            }
            doc
        })
        .collect()
}

/// Whether `variant` builds the job of `doc`: every job, unless its `jobs`
/// names some. A document that is not a job stays, for validation.
fn selected(variant: &Variant, doc: &Document) -> bool {
    match (&variant.jobs, name_of(doc)) {
        (Some(jobs), Some(name)) => jobs.iter().any(|j| j == name),
        _ => true,
    }
}

/// The names a variant's `job:` may give: the `metadata.name` of each
/// `TrainingJob` among `docs`, as written.
pub fn names(docs: &[Document]) -> Vec<String> {
    docs.iter()
        .filter(|d| d.value.get("kind").and_then(Value::as_str) == Some("TrainingJob"))
        .filter_map(name_of)
        .map(str::to_owned)
        .collect()
}

/// A `job:` or an entry of `jobs` that names none of `names` (all the
/// project's definitions' [`names`]): a patch that silently applies to
/// nothing, or a job a variant silently leaves out, is a typo.
pub fn unmatched(variant: &Variant, names: &BTreeSet<&str>, project: &Document) -> Vec<Diagnostic> {
    let known: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    unknown_jobs(variant, names)
        .map(|(at, job)| {
            let hint = match crate::suggest::did_you_mean(job, names.iter().copied()) {
                Some(s) => format!("did you mean `{s}`?"),
                None => format!(
                    "`job` names a definition by its `metadata.name`; the project's are {}",
                    known.join(", ")
                ),
            };
            Diagnostic::new(format!("no definition is named `{job}`"))
                .path(project.dotted(&at))
                .at(project.locate(&at))
                .hint(hint)
        })
        .collect()
}

/// The job names of `variant` (a patch's `job:`, an entry of `jobs`) that
/// are none of `names` (the definitions' `metadata.name`s), each with where
/// the project file gives it: the one rule of [`unmatched`], which the
/// build cache runs over its summaries.
pub fn unknown_jobs<'a>(
    variant: &'a Variant,
    names: &'a BTreeSet<&str>,
) -> impl Iterator<Item = (String, &'a str)> {
    let patches = variant
        .patches
        .iter()
        .filter_map(|p| Some((format!("{}/job", p.pointer), p.job.as_deref()?)));
    let jobs = variant
        .jobs
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, j)| (format!("{}/{i}", variant.pointer("jobs")), j.as_str()));
    patches.chain(jobs).filter(|(_, job)| !names.contains(job))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::Arc;

    use super::*;
    use crate::model::project::Patch;
    use crate::source::SourceFile;

    fn doc(name: &str, text: &str) -> Document {
        let file = Arc::new(SourceFile::new(name, text));
        crate::load::parse(&file).unwrap().remove(0)
    }

    /// RFC 7386: mappings merge, null deletes, lists and scalars replace;
    /// what a patch sets is located in the project file, the rest stays
    /// where it was written.
    #[test]
    fn merge_patches_locate_what_they_set() {
        let project = doc(
            "trainc.yaml",
            "variants:\n  cpu:\n    patches:\n      - patch: {spec: {roles: {worker: {gpu: 0, tags: [c]}}, gone: null, new: {a: 1}}}\n",
        );
        let variant = Variant {
            name: "cpu".into(),
            output: PathBuf::from("deploy-cpu"),
            build_output: None,
            cluster: None,
            resources: Vec::new(),
            jobs: None,
            patches: vec![Patch {
                job: None,
                value: project
                    .value
                    .pointer("/variants/cpu/patches/0/patch")
                    .unwrap()
                    .clone(),
                pointer: "/variants/cpu/patches/0".into(),
            }],
        };
        let def = doc(
            "jobs/a.yaml",
            "metadata: {name: a}\nspec:\n  roles:\n    worker: {gpu: 1, cpu: 2, tags: [a, b]}\n  gone: {x: 1}\n",
        );
        let patched = apply(&variant, vec![def.clone()], &project).remove(0);
        assert_eq!(
            patched.value,
            serde_json::json!({"metadata": {"name": "a"}, "spec": {"roles": {"worker": {"gpu": 0, "cpu": 2, "tags": ["c"]}}, "new": {"a": 1}}})
        );
        let at = |p: &str| {
            let l = patched.locate(p).unwrap();
            (l.file.name.clone(), l.pos.line, l.pos.column)
        };
        assert_eq!(at("/spec/roles/worker/gpu"), ("trainc.yaml".into(), 4, 46));
        assert_eq!(
            at("/spec/roles/worker/tags/0"),
            ("trainc.yaml".into(), 4, 56)
        );
        assert_eq!(at("/spec/roles/worker/cpu"), ("jobs/a.yaml".into(), 4, 27));
        assert_eq!(at("/spec/roles/worker"), ("jobs/a.yaml".into(), 4, 13));
        assert_eq!(at("/spec/new/a"), ("trainc.yaml".into(), 4, 83));
        // A missing field under a new mapping: at the mapping, in the patch.
        assert_eq!(at("/spec/new/b"), ("trainc.yaml".into(), 4, 79));
        assert_eq!(patched.source_text("/spec/roles/worker/gpu"), Some("0"));
        let key = patched.locate_key("/spec/new").unwrap();
        assert_eq!(
            (key.file.name.as_str(), key.pos.column),
            ("trainc.yaml", 74)
        );
        // A patch for another job leaves the document alone.
        let mut other = variant.clone();
        other.patches[0].job = Some("b".into());
        let same = apply(&other, vec![def.clone()], &project).remove(0);
        assert_eq!(same.value, def.value);
        let names = names(std::slice::from_ref(&def));
        let known = names.iter().map(String::as_str).collect();
        let unmatched = unmatched(&other, &known, &project);
        assert_eq!(
            unmatched[0].title(),
            "variants.cpu.patches[0].job: no definition is named `b`"
        );
    }
}
