//! Stage 2: JSON Schema and semantic rules. Nothing downstream ever sees an
//! invalid definition: [`validate`] returns resolved jobs or every finding.
//!
//! Each definition file goes through its stages on one core, alone: parsed,
//! patched by a variant, checked, resolved, and its documents dropped
//! before the next file is taken. Only what the rules across documents need
//! and the resolved job outlive it, so a large project's parsed documents
//! are never all in memory at once.

pub mod across;
mod budget;
mod image;
mod patches;

pub mod rules;
pub mod schema;
mod security;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use crate::diagnostic::{self, Diagnostic};
use crate::library::Library;
use crate::load::{self, Document};
use crate::model::definition::TrainingJob;
use crate::model::job::{self, Job, namespace_of};
use crate::model::project::{Defaults, Variant};
use crate::source::{Location, SourceFile};

pub use budget::floor;

/// What validation needs besides the definition files.
pub struct Context<'a> {
    pub defaults: &'a Defaults,
    pub library: &'a Library,
    /// The project root: document names are relative to it.
    pub root: &'a Path,
    /// The top of the repository ([`crate::project::Project::top`]):
    /// build contexts must resolve inside it.
    pub top: &'a Path,
    /// The directories trainc writes, with what each is: no build context
    /// may include them.
    pub generated: &'a [(&'a Path, String)],
}

/// A variant's merge patches, applied to each document after it is parsed
/// and before it is checked (see [`crate::variant`]).
#[derive(Debug, Clone, Copy)]
pub struct Patching<'a> {
    pub variant: &'a Variant,
    /// The project file, where the patches are written.
    pub project: &'a Document,
    /// Whether the files are all the project's definitions: only then is a
    /// patch whose `job:` names none of them a mistake.
    pub complete: bool,
}

/// The resolved jobs of the definition files, as written, and the
/// warnings about them.
pub fn validate(
    files: &[Arc<SourceFile>],
    cx: &Context,
) -> Result<(Vec<Job>, Vec<Diagnostic>), Vec<Diagnostic>> {
    validate_all(files, None, cx).map(|v| (v.jobs, v.warnings))
}

/// What [`validate_all`] found valid.
#[derive(Debug)]
pub struct Validated {
    /// Sorted by namespace and name.
    pub jobs: Vec<Job>,
    pub warnings: Vec<Diagnostic>,
    /// One per document, in their order: what the rules across documents
    /// saw of it.
    pub facts: Vec<Facts>,
}

/// A valid document as the rules across documents see it.
#[derive(Debug)]
pub struct Facts {
    /// The document's file, by its name.
    pub source: String,
    pub namespace: String,
    pub name: String,
    /// The objects it generates.
    pub generated: Vec<rules::Generated>,
    /// The least output it makes (see [`floor`]), with what its patches
    /// add to its pods.
    pub floor: u64,
}

/// What one definition file's documents made.
struct CheckedFile {
    /// Why the file does not parse; then it has no documents.
    unparsed: Option<Diagnostic>,
    /// The `metadata.name` of each `TrainingJob` document, as written:
    /// what a variant's `job:` names. Only when a [`Patching`] asks.
    names: Vec<String>,
    docs: Vec<Checked>,
}

/// What one document's own checks and resolution made of it.
struct Checked {
    /// Its own checks' findings, and its output budget's.
    errors: Vec<Diagnostic>,
    warnings: Vec<Diagnostic>,
    /// Only without errors of its own checks.
    valid: Option<Valid>,
}

/// A document that passed its own checks: what the rules across documents
/// need of it, and its job.
struct Valid {
    /// Its file's name.
    source: String,
    /// Where the document starts in it: the rules across documents report
    /// by file name, then position.
    start: Option<(usize, usize)>,
    /// Where its `metadata.name` is written.
    at: Option<Location>,
    /// Its job's namespace, the project's default when it names none.
    namespace: String,
    name: String,
    generated: Vec<rules::Generated>,
    /// The least output it makes, its patches not applied.
    floor: u64,
    /// `None` when its output budget already refuses it: nothing is built.
    resolved: Option<Resolved>,
}

/// A valid document's job, with what applying its patches found.
struct Resolved {
    job: Job,
    warnings: Vec<Diagnostic>,
    errors: Vec<Diagnostic>,
    /// Its output budget with what the patches add to its pods, when they
    /// add anything and that refuses it.
    budget: Option<Diagnostic>,
    /// Whether its patches add anything to its pods.
    patched: bool,
    /// The least output it makes, with what its patches add.
    floor: u64,
}

/// [`validate`] of the definition files as written or, with `patching`,
/// as a variant patches them; also returns the facts the rules across
/// documents used.
///
/// The files go through their stages on every core, one file at a time;
/// the results are gathered in file order, so the findings are the same
/// whatever the scheduling. A file that does not parse is all that is
/// reported: the rules across documents would miss its documents. The
/// rules across documents (duplicates, the output budget, shared generated
/// names) run after, on one thread: first as written, then, when nothing
/// was found and patches add to the pods, with what they add.
pub fn validate_all(
    files: &[Arc<SourceFile>],
    patching: Option<&Patching>,
    cx: &Context,
) -> Result<Validated, Vec<Diagnostic>> {
    let checked = crate::par::map(files, |file| check_file(file, patching, cx));
    let unparsed: Vec<Diagnostic> = checked.iter().filter_map(|f| f.unparsed.clone()).collect();
    if !unparsed.is_empty() {
        return Err(unparsed);
    }
    let mut diags = Vec::new();
    let mut warnings = Vec::new();
    let mut names = BTreeSet::new();
    let mut valid: Vec<Valid> = Vec::new();
    for file in checked {
        names.extend(file.names);
        for doc in file.docs {
            diags.extend(doc.errors);
            warnings.extend(doc.warnings);
            valid.extend(doc.valid);
        }
    }
    let unmatched = match patching {
        Some(p) if p.complete => {
            let names: BTreeSet<&str> = names.iter().map(String::as_str).collect();
            crate::variant::unmatched(p.variant, &names, p.project)
        }
        _ => Vec::new(),
    };
    let fail = |mut diags: Vec<Diagnostic>, warnings: Vec<Diagnostic>| {
        // Warnings too: a user fixing errors sees everything at once.
        diags.extend(unmatched.iter().cloned());
        diags.extend(warnings);
        diagnostic::normalize(&mut diags);
        Err(diags)
    };
    let clean = diags.is_empty();
    diags.extend(across::check(&across_docs(&valid, |v| v.floor), clean));
    if !diags.is_empty() {
        return fail(diags, warnings);
    }
    let mut patched = false;
    for v in &mut valid {
        let Some(r) = &mut v.resolved else {
            diags.push(Diagnostic::new(
                "internal error: a valid job was not resolved",
            ));
            continue;
        };
        warnings.append(&mut r.warnings);
        diags.append(&mut r.errors);
        patched |= r.patched;
    }
    let floor_patched = |v: &Valid| v.resolved.as_ref().map_or(v.floor, |r| r.floor);
    if diags.is_empty() && patched {
        diags.extend(
            valid
                .iter()
                .filter_map(|v| v.resolved.as_ref()?.budget.clone()),
        );
        let clean = diags.is_empty();
        diags.extend(across::check(&across_docs(&valid, floor_patched), clean));
    }
    if !diags.is_empty() || !unmatched.is_empty() {
        return fail(diags, warnings);
    }
    diagnostic::normalize(&mut warnings);
    let mut jobs = Vec::with_capacity(valid.len());
    let mut facts = Vec::with_capacity(valid.len());
    for v in valid {
        let floor = floor_patched(&v);
        facts.push(Facts {
            source: v.source,
            namespace: v.namespace,
            name: v.name,
            generated: v.generated,
            floor,
        });
        jobs.extend(v.resolved.map(|r| r.job));
    }
    jobs.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    Ok(Validated {
        jobs,
        warnings,
        facts,
    })
}

/// One definition file's stages: parsed, patched by `patching`, and each
/// document checked and resolved. Its documents are dropped on return.
fn check_file(file: &Arc<SourceFile>, patching: Option<&Patching>, cx: &Context) -> CheckedFile {
    let docs = match load::parse(file) {
        Ok(docs) => docs,
        Err(d) => {
            return CheckedFile {
                unparsed: Some(d),
                names: Vec::new(),
                docs: Vec::new(),
            };
        }
    };
    let (names, docs) = match patching {
        Some(p) => {
            let names = if p.complete {
                crate::variant::names(&docs)
            } else {
                Vec::new()
            };
            (names, crate::variant::apply(p.variant, docs, p.project))
        }
        None => (Vec::new(), docs),
    };
    CheckedFile {
        unparsed: None,
        names,
        docs: docs.iter().map(|doc| check(doc, cx)).collect(),
    }
}

/// One document's own checks, and, if it passes them, what the rules
/// across documents need of it and its resolved job.
fn check(doc: &Document, cx: &Context) -> Checked {
    let failed = |errors| Checked {
        errors,
        warnings: Vec::new(),
        valid: None,
    };
    if let Some(d) = project_file(doc).or_else(|| manifest(doc)) {
        return failed(vec![d]);
    }
    let found = schema::training_job(doc).check(doc);
    if !found.is_empty() {
        return failed(found);
    }
    let mut def = match doc.typed::<TrainingJob>() {
        Ok(def) => def,
        Err(d) => return failed(vec![d]),
    };
    def.keep_written(|p| doc.source_text(p).map(str::to_owned));
    let (mut errors, warnings): (Vec<Diagnostic>, Vec<Diagnostic>) = rules::check(doc, &def, cx)
        .into_iter()
        .partition(Diagnostic::is_error);
    if !errors.is_empty() {
        return Checked {
            errors,
            warnings,
            valid: None,
        };
    }
    let tasks = budget::per_task(doc, &def);
    let over = budget::check(doc, &tasks, false);
    let resolved = match over {
        Some(_) => None,
        None => match resolve(doc, &def, tasks.clone(), cx) {
            Ok(r) => Some(r),
            Err(d) => {
                errors.push(d);
                None
            }
        },
    };
    errors.extend(over);
    let valid = Valid {
        source: doc.file.name.clone(),
        start: doc.spans.get("").map(|p| (p.value.line, p.value.column)),
        at: doc.locate("/metadata/name"),
        namespace: namespace_of(&def, cx.defaults),
        generated: rules::generated(&def, cx.defaults),
        floor: budget::floor_of(&tasks),
        name: def.metadata.name,
        resolved,
    };
    Checked {
        errors,
        warnings,
        valid: Some(valid),
    }
}

/// A valid document's job, and what applying its patches to the job's pod
/// templates finds (they are checked that way, as only a resolved job has
/// pod templates) and adds to its output.
fn resolve(
    doc: &Document,
    def: &TrainingJob,
    mut tasks: budget::Tasks,
    cx: &Context,
) -> Result<Resolved, Diagnostic> {
    // `rules::check` has made sure the preset exists.
    let preset = cx
        .library
        .preset(def.framework_name())
        .ok_or_else(|| Diagnostic::new("internal error: a validated job has no preset"))?;
    let target = crate::compile::target::backend(job::target_of(def, cx.defaults));
    let run_defaults = target.run_defaults(def);
    let mut job = job::resolve(
        def,
        cx.defaults,
        &doc.file.name,
        cx.root,
        preset,
        run_defaults,
    );
    if let Some(b) = &mut job.build {
        // Hashing the context finds what validation cannot (its size).
        b.at = doc.locate("/spec/build/context");
    }
    let (applied, grown) = patches::applied(doc, &job);
    let (warnings, errors): (Vec<Diagnostic>, Vec<Diagnostic>) =
        applied.into_iter().partition(|d| !d.is_error());
    let patched = grown.iter().any(|(_, b)| *b > 0);
    budget::add_patches(&mut tasks, &grown);
    Ok(Resolved {
        job,
        warnings,
        errors,
        budget: patched.then(|| budget::check(doc, &tasks, true)).flatten(),
        patched,
        floor: budget::floor_of(&tasks),
    })
}

/// A Kubernetes manifest of a training run among the definitions (a
/// Kubeflow PyTorchJob or TFJob, a JobSet, a Job): the manifest a team
/// migrates from, left beside its definition or given by mistake. Said
/// once, by kind, with the command that turns it into a definition,
/// rather than as three schema errors.
fn manifest(doc: &Document) -> Option<Diagnostic> {
    let kind = doc.value.get("kind")?.as_str()?;
    let api = doc.value.get("apiVersion")?.as_str()?;
    if api.starts_with("trainc.dev/") {
        return None;
    }
    let what = match (api.split('/').next().unwrap_or_default(), kind) {
        ("kubeflow.org", "PyTorchJob" | "TFJob") => format!("a Kubeflow {kind}"),
        ("jobset.x-k8s.io", "JobSet") => "a JobSet".to_owned(),
        ("trainer.kubeflow.org", "TrainJob") => "a Kubeflow Trainer TrainJob".to_owned(),
        ("batch", "Job") => "a Kubernetes Job".to_owned(),
        _ => return None,
    };
    let name = &doc.file.shown;
    Some(
        Diagnostic::new(format!(
            "{name} holds {what} ({api}), not a trainc definition"
        ))
        .at(doc.locate("/kind"))
        .hint(format!(
            "`trainc import {name}` writes a definition from it, and says what it could not keep; then keep the manifest out of the definitions' directories"
        )),
    )
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

/// The valid documents as the rules across documents see them
/// ([`across::check`]), each with the least output `floor` says it makes,
/// in the order their findings are reported: by file name, then position,
/// whatever order the files were given in.
fn across_docs<'a>(valid: &'a [Valid], floor: impl Fn(&Valid) -> u64) -> Vec<across::Doc<'a>> {
    let mut ordered: Vec<&Valid> = valid.iter().collect();
    ordered.sort_by(|a, b| (&a.source, a.start).cmp(&(&b.source, b.start)));
    ordered
        .into_iter()
        .map(|v| across::Doc {
            namespace: &v.namespace,
            name: &v.name,
            claims: v
                .generated
                .iter()
                .map(|g| across::Claim {
                    kind: g.kind,
                    namespace: g.namespace.as_deref(),
                    name: &g.name,
                })
                .collect(),
            floor: floor(v),
            at: v.at.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn definition(name: &str, replicas: &str) -> String {
        format!(
            "apiVersion: trainc.dev/v1alpha1\nkind: TrainingJob\nmetadata:\n  name: {name}\nspec:\n  framework: tensorflow\n  strategy: parameter-server\n  image: registry.example.com/ml/mnist:1.0\n  command: [python, /app/train.py]\n  roles:\n    ps: {{replicas: 1}}\n    worker: {{replicas: {replicas}}}\n  storage:\n    - {{name: data, mountPath: /data, size: 5Gi, nfs: {{server: nas.example.com, path: /data}}}}\n  tensorboard: {{logDir: /data/logs}}\n"
        )
    }

    fn files(texts: &[String]) -> Vec<Arc<SourceFile>> {
        texts
            .iter()
            .enumerate()
            .map(|(i, t)| Arc::new(SourceFile::new(format!("jobs/{i:03}.yaml"), t.as_str())))
            .collect()
    }

    /// A project at `/project` with the built-in library and no defaults.
    fn context<'a>(library: &'a Library, defaults: &'a Defaults) -> Context<'a> {
        Context {
            defaults,
            library,
            root: Path::new("/project"),
            top: Path::new("/project"),
            generated: &[],
        }
    }

    fn messages(diags: &[Diagnostic]) -> Vec<String> {
        diags
            .iter()
            .map(|d| {
                let at = d
                    .location
                    .as_ref()
                    .map(|l| (l.file.name.clone(), l.pos.line));
                format!("{at:?} {}", d.title())
            })
            .collect()
    }

    /// Documents are checked on every core; what is found is what checking
    /// them one at a time finds, in the same order, and the rules across
    /// documents still see all of them.
    #[test]
    fn findings_do_not_depend_on_the_threads() {
        let (library, defaults) = (
            Library::builtin().expect("built-in library"),
            Defaults::default(),
        );
        let cx = context(&library, &defaults);
        // More documents than any machine has cores, every third one wrong
        // in its own way, and two that clash across files.
        let mut texts: Vec<String> = (0..60)
            .map(|i| match i % 3 {
                0 => definition(&format!("job-{i}"), "-1"),
                1 => definition(&format!("Job_{i}"), "2"),
                _ => definition(&format!("job-{i}"), "2"),
            })
            .collect();
        texts.push(definition("job-2", "3"));
        let all = files(&texts);
        let found = validate(&all, &cx).expect_err("the definitions are wrong");
        let mut one_by_one: Vec<Diagnostic> = all[..60]
            .iter()
            .flat_map(|d| match validate(std::slice::from_ref(d), &cx) {
                Ok((_, warnings)) => warnings,
                Err(d) => d,
            })
            .collect();
        diagnostic::normalize(&mut one_by_one);
        let dup = messages(&found)
            .into_iter()
            .filter(|m| m.contains("defined twice"))
            .count();
        assert_eq!(dup, 1, "{:#?}", messages(&found));
        let mut without_dup = found.clone();
        without_dup.retain(|d| !d.title().contains("defined twice"));
        assert_eq!(messages(&without_dup), messages(&one_by_one));
        assert_eq!(
            messages(&found),
            messages(&validate(&all, &cx).expect_err("the same run again")),
        );
    }

    /// A file that does not parse is all that is reported: the rules across
    /// documents would run without its documents, and a definition that
    /// parses but is wrong waits for the next run, as when parsing was a
    /// stage of its own.
    #[test]
    fn a_file_that_does_not_parse_is_all_that_is_reported() {
        let (library, defaults) = (
            Library::builtin().expect("built-in library"),
            Defaults::default(),
        );
        let cx = context(&library, &defaults);
        let texts = vec![
            definition("job-a", "-1"),
            "metadata: {name: [unclosed\n".to_owned(),
            definition("job-b", "2"),
        ];
        let found = validate(&files(&texts), &cx).expect_err("one file does not parse");
        assert_eq!(found.len(), 1, "{:#?}", messages(&found));
        let at = found[0].location.as_ref().map(|l| l.file.name.as_str());
        assert_eq!(at, Some("jobs/001.yaml"));
    }

    /// What the rules across documents saw of each document (the build
    /// cache's summaries) is what working it out alone gives.
    #[test]
    fn facts_are_each_documents_own() {
        let (library, defaults) = (
            Library::builtin().expect("built-in library"),
            Defaults::default(),
        );
        let cx = context(&library, &defaults);
        let texts: Vec<String> = (0..20)
            .map(|i| definition(&format!("job-{i}"), &(i % 5 + 1).to_string()))
            .collect();
        let all = files(&texts);
        let valid = validate_all(&all, None, &cx).expect("valid definitions");
        assert_eq!(valid.facts.len(), all.len());
        let docs: Vec<Document> = all
            .iter()
            .flat_map(|f| load::parse(f).expect("test definitions parse"))
            .collect();
        for (doc, facts) in docs.iter().zip(&valid.facts) {
            let mut def = doc.typed::<TrainingJob>().expect("typed");
            def.keep_written(|p| doc.source_text(p).map(str::to_owned));
            assert_eq!(facts.source, doc.file.name);
            assert_eq!(facts.name, def.metadata.name);
            assert_eq!(facts.namespace, namespace_of(&def, &defaults));
            assert_eq!(facts.floor, floor(doc, &def));
            let claims = |g: &[rules::Generated]| -> Vec<String> {
                g.iter()
                    .map(|g| format!("{} {:?} {}", g.kind, g.namespace, g.name))
                    .collect()
            };
            assert_eq!(
                claims(&facts.generated),
                claims(&rules::generated(&def, &defaults))
            );
        }
    }
}
