//! Stage 2: JSON Schema and semantic rules. Nothing downstream ever sees an
//! invalid definition: [`validate`] returns resolved jobs or every finding.

pub mod across;
mod budget;
mod image;
mod patches;

pub mod rules;
pub mod schema;
mod security;

use std::path::Path;

use crate::diagnostic::{self, Diagnostic};
use crate::library::Library;
use crate::load::Document;
use crate::model::definition::TrainingJob;
use crate::model::job::{self, Job, namespace_of};
use crate::model::project::Defaults;

pub use budget::floor;

/// Validates every document and resolves the valid ones. Findings from all
/// documents are gathered, so one run reports everything.
/// What validation needs besides the documents.
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

/// The resolved jobs and the warnings about them.
pub fn validate(
    docs: &[Document],
    cx: &Context,
) -> Result<(Vec<Job>, Vec<Diagnostic>), Vec<Diagnostic>> {
    validate_all(docs, cx).map(|v| (v.jobs, v.warnings))
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

/// What one document's own checks made of it.
struct Checked {
    errors: Vec<Diagnostic>,
    warnings: Vec<Diagnostic>,
    /// Only without errors.
    valid: Option<Valid>,
}

/// A document that passed its own checks, with what the rules across
/// documents need of it, worked out beside the checks.
struct Valid {
    /// Boxed: a definition is some kilobytes, and a thousand of them moved
    /// from the workers' results into `valid` is memory touched twice.
    def: Box<TrainingJob>,
    /// Its job's namespace, the project's default when it names none.
    namespace: String,
    tasks: budget::Tasks,
    generated: Vec<rules::Generated>,
}

/// [`validate`], also returning the facts the rules across documents used.
///
/// Each document's own checks (schema, typing, the semantic rules) and then
/// each valid job's resolution run on every core, one document at a time;
/// the results are gathered in document order, so the findings are the
/// same whatever the scheduling. The rules across documents (duplicates,
/// the output budget, shared generated names) run after, on one thread.
pub fn validate_all(docs: &[Document], cx: &Context) -> Result<Validated, Vec<Diagnostic>> {
    let defaults = cx.defaults;
    let mut diags = Vec::new();
    let mut warnings = Vec::new();
    let mut valid: Vec<(&Document, Valid)> = Vec::new();
    for (doc, checked) in docs.iter().zip(crate::par::map(docs, |doc| check(doc, cx))) {
        diags.extend(checked.errors);
        warnings.extend(checked.warnings);
        valid.extend(checked.valid.map(|v| (doc, v)));
    }
    budget::check(
        valid.iter().map(|(doc, v)| (*doc, &v.tasks)),
        false,
        &mut diags,
    );
    let clean = diags.is_empty();
    diags.extend(across::check(&across_docs(&valid), clean));
    if !diags.is_empty() {
        // Warnings too: a user fixing errors sees everything at once.
        diags.extend(warnings);
        diagnostic::normalize(&mut diags);
        return Err(diags);
    }
    let resolved = crate::par::map(&valid, |(doc, v)| {
        // `check` has made sure the preset exists.
        let preset = cx.library.preset(v.def.framework_name())?;
        let target = crate::compile::target::backend(job::target_of(&v.def, defaults));
        let run_defaults = target.run_defaults(v.def.framework());
        let mut job = job::resolve(
            &v.def,
            defaults,
            &doc.file.name,
            cx.root,
            preset,
            run_defaults,
        );
        if let Some(b) = &mut job.build {
            // Hashing the context finds what validation cannot (its size).
            b.at = doc.locate("/spec/build/context");
        }
        // Patches are checked by applying them to the pod templates, which
        // only a resolved job has.
        let (applied, grown) = patches::applied(doc, &job);
        let (warned, found): (Vec<Diagnostic>, Vec<Diagnostic>) =
            applied.into_iter().partition(|d| !d.is_error());
        Some((job, warned, found, grown))
    });
    let mut jobs = Vec::with_capacity(resolved.len());
    let mut patched = false;
    for (r, (_, v)) in resolved.into_iter().zip(valid.iter_mut()) {
        let (job, warned, found, grown) = r.ok_or_else(|| {
            vec![Diagnostic::new(
                "internal error: a validated job has no preset",
            )]
        })?;
        jobs.push(job);
        warnings.extend(warned);
        diags.extend(found);
        patched |= grown.iter().any(|(_, b)| *b > 0);
        budget::add_patches(&mut v.tasks, &grown);
    }
    // The budget again, with what the patches add to each task's pod.
    if diags.is_empty() && patched {
        budget::check(
            valid.iter().map(|(doc, v)| (*doc, &v.tasks)),
            true,
            &mut diags,
        );
        let clean = diags.is_empty();
        diags.extend(across::check(&across_docs(&valid), clean));
    }
    if !diags.is_empty() {
        diags.extend(warnings);
        diagnostic::normalize(&mut diags);
        return Err(diags);
    }
    diagnostic::normalize(&mut warnings);
    jobs.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    let facts = valid
        .into_iter()
        .map(|(doc, v)| Facts {
            source: doc.file.name.clone(),
            namespace: v.namespace,
            floor: budget::floor_of(&v.tasks),
            name: v.def.metadata.name,
            generated: v.generated,
        })
        .collect();
    Ok(Validated {
        jobs,
        warnings,
        facts,
    })
}

/// One document's own checks, and what the rules across documents need of
/// it if it passes them.
fn check(doc: &Document, cx: &Context) -> Checked {
    let failed = |errors| Checked {
        errors,
        warnings: Vec::new(),
        valid: None,
    };
    if let Some(d) = project_file(doc) {
        return failed(vec![d]);
    }
    let found = schema::training_job(doc).check(doc);
    if !found.is_empty() {
        return failed(found);
    }
    let mut def = match doc.typed::<TrainingJob>() {
        Ok(def) => Box::new(def),
        Err(d) => return failed(vec![d]),
    };
    def.keep_written(|p| doc.source_text(p).map(str::to_owned));
    let (errors, warnings): (Vec<Diagnostic>, Vec<Diagnostic>) = rules::check(doc, &def, cx)
        .into_iter()
        .partition(Diagnostic::is_error);
    let valid = errors.is_empty().then(|| Valid {
        namespace: namespace_of(&def, cx.defaults),
        tasks: budget::per_task(doc, &def),
        generated: rules::generated(&def, cx.defaults),
        def,
    });
    Checked {
        errors,
        warnings,
        valid,
    }
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
/// ([`across::check`]), in the order their findings are reported: by file
/// name, then position, whatever order the files were given in.
fn across_docs<'a>(valid: &'a [(&'a Document, Valid)]) -> Vec<across::Doc<'a>> {
    let mut ordered: Vec<&(&Document, Valid)> = valid.iter().collect();
    ordered.sort_by_key(|(doc, _)| {
        let pos = doc.spans.get("").map(|p| (p.value.line, p.value.column));
        (doc.file.name.clone(), pos)
    });
    ordered
        .into_iter()
        .map(|(doc, v)| across::Doc {
            namespace: &v.namespace,
            name: &v.def.metadata.name,
            claims: v
                .generated
                .iter()
                .map(|g| across::Claim {
                    kind: g.kind,
                    namespace: g.namespace.as_deref(),
                    name: &g.name,
                })
                .collect(),
            floor: budget::floor_of(&v.tasks),
            at: doc.locate("/metadata/name"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::source::SourceFile;

    fn definition(name: &str, replicas: &str) -> String {
        format!(
            "apiVersion: trainc.dev/v1alpha1\nkind: TrainingJob\nmetadata:\n  name: {name}\nspec:\n  framework: tensorflow\n  strategy: parameter-server\n  image: registry.example.com/ml/mnist:1.0\n  command: [python, /app/train.py]\n  roles:\n    ps: {{replicas: 1}}\n    worker: {{replicas: {replicas}}}\n  storage:\n    - {{name: data, mountPath: /data, size: 5Gi, nfs: {{server: nas.example.com, path: /data}}}}\n  tensorboard: {{logDir: /data/logs}}\n"
        )
    }

    fn docs(texts: &[String]) -> Vec<Document> {
        texts
            .iter()
            .enumerate()
            .flat_map(|(i, t)| {
                let file = Arc::new(SourceFile::new(format!("jobs/{i:03}.yaml"), t.as_str()));
                crate::load::parse(&file).expect("test definitions parse")
            })
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
        let all = docs(&texts);
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
        let all = docs(&texts);
        let valid = validate_all(&all, &cx).expect("valid definitions");
        assert_eq!(valid.facts.len(), all.len());
        for (doc, facts) in all.iter().zip(&valid.facts) {
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
