//! The stages wired together: what `validate` and `build` run.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::compile::{self, Tasks};
use crate::diagnostic::{self, Diagnostic};
use crate::emit::{self, Tree};
use crate::image::ContextPrint;
use crate::library::Library;
use crate::load;
use crate::model::Job;
use crate::model::project::{Resource, Variant};
use crate::plan::stream::{Sink, Taken};
use crate::project::Project;
use crate::source::SourceFile;
use crate::{limits, par, validate};

/// The definition files under `paths` (or the project's sources when empty),
/// never an output directory (the project's, its variants') or the project
/// file.
pub fn files(
    project: &Project,
    cwd: &Path,
    paths: &[PathBuf],
) -> Result<Vec<PathBuf>, Vec<Diagnostic>> {
    let roots: Vec<PathBuf> = if paths.is_empty() {
        project.sources.clone()
    } else {
        paths.iter().map(|p| cwd.join(p)).collect()
    };
    // Nothing here at all: no project file, no `jobs/`, no paths.
    if paths.is_empty() && project.file.is_none() && roots.iter().all(|r| !r.exists()) {
        return Err(vec![
            Diagnostic::new(format!(
                "no project here: no trainc.yaml in {} or above, and no `jobs` directory",
                match crate::paths::shown_dir(cwd, &project.root).as_str() {
                    "." => "this directory".to_owned(),
                    dir => dir.to_owned(),
                }
            ))
            .hint("run `trainc init` to start a project here, or pass definition files or directories"),
        ]);
    }
    let mut exclude = vec![project.output.clone()];
    exclude.extend(project.variants.iter().map(|v| v.output.clone()));
    exclude.extend(project.file.clone());
    let files = load::discover(&project.root, cwd, &roots, &exclude, !paths.is_empty())?;
    if files.is_empty() {
        let shown: Vec<String> = roots
            .iter()
            .map(|r| crate::paths::shown_path(cwd, r))
            .collect();
        return Err(vec![Diagnostic::new(format!("no definitions found in {}", shown.join(", "))).hint(
            "pass definition files or directories, or list them under `sources` in trainc.yaml (`trainc init` writes a starter)",
        )]);
    }
    Ok(files)
}

/// Every definition file read, in path order: what the build cache keys a
/// build by, so that the key is of the very bytes that were compiled.
pub type Sources = Vec<(PathBuf, Arc<SourceFile>)>;

/// Reads every definition file under `paths` (or the project's sources
/// when empty), refusing trainc's own output among them. Findings from all
/// files are gathered before giving up. The files are parsed one at a time
/// by validation ([`validate::validate_all`]), which drops each file's
/// documents when it is done with them.
pub fn load(project: &Project, cwd: &Path, paths: &[PathBuf]) -> Result<Sources, Vec<Diagnostic>> {
    let files = files(project, cwd, paths)?;
    // Results come back in file order. Validation's schema is compiled
    // meanwhile.
    let read = std::thread::scope(|s| {
        s.spawn(validate::schema::warm);
        par::map(&files, |path| {
            let name = crate::paths::display_name(&project.root, path);
            load::read_as(path, name, crate::paths::shown_path(cwd, path))
                .map(|f| (path.clone(), f))
        })
    });
    let mut sources = Vec::with_capacity(files.len());
    let mut diags = Vec::new();
    let mut generated = Vec::new();
    for r in read {
        match r {
            Ok((path, file)) if emit::is_generated(file.text.as_bytes()) => {
                generated.push((path, file));
            }
            Ok(source) => sources.push(source),
            Err(d) => diags.push(d),
        }
    }
    diags.extend(own_output(project, &generated));
    if diags.is_empty() {
        Ok(sources)
    } else {
        diagnostic::normalize(&mut diags);
        Err(diags)
    }
}

/// Refuses files trainc generated that were found among the definitions:
/// the output of a build into a directory among them (`trainc build
/// resnet.yaml` run inside `jobs/` without a project file writes
/// `jobs/deploy/`). Read as definitions, each manifest would be reported
/// as a broken one; they are named instead, an output directory (found by
/// its root `kustomization.yaml`) once for all its files.
fn own_output(project: &Project, found: &[(PathBuf, Arc<SourceFile>)]) -> Vec<Diagnostic> {
    let header = |f: &Arc<SourceFile>| {
        let len = f.text.find('\n').unwrap_or(f.text.len());
        Some(crate::source::Location::new(
            f,
            crate::source::Pos {
                line: 1,
                column: 1,
                byte: Some(0),
                len,
            },
        ))
    };
    // Output roots: directories whose root kustomization trainc wrote.
    let roots: Vec<(&Path, &Arc<SourceFile>)> = found
        .iter()
        .filter(|(p, f)| {
            p.file_name().is_some_and(|n| n == emit::KUSTOMIZATION)
                && emit::parse_header(f.text.as_bytes()) == Some(None)
        })
        .filter_map(|(p, f)| Some((p.parent()?, f)))
        .collect();
    let mut outputs: std::collections::BTreeMap<&Path, (usize, &Arc<SourceFile>)> =
        std::collections::BTreeMap::new();
    let mut out = Vec::new();
    for (path, file) in found {
        // The innermost output directory holding the file.
        let root = roots
            .iter()
            .filter(|(r, _)| path.starts_with(r))
            .max_by_key(|(r, _)| r.components().count());
        match root {
            Some((r, k)) => outputs.entry(r).or_insert((0, k)).0 += 1,
            None => out.push(
                Diagnostic::new(format!(
                    "{} was generated by trainc: it is output, not a definition",
                    file.shown
                ))
                .at(header(file))
                .hint("delete it, or keep it out of the definitions; trainc never reads its own output as definitions"),
            ),
        }
    }
    for (dir, (n, kustomization)) in outputs {
        let files = if n == 1 { "file" } else { "files" };
        out.push(
            Diagnostic::new(format!(
                "{} is the output of a trainc build ({n} generated {files}), not definitions",
                project.shown(dir)
            ))
            .at(header(kustomization))
            .hint("delete the directory (a build run where it should not have been?), or keep it out of the definitions; trainc never reads its own output as definitions"),
        );
    }
    out
}

/// Validates and resolves; returns the jobs and the warnings about them.
pub fn check(
    project: &Project,
    cwd: &Path,
    paths: &[PathBuf],
) -> Result<(Vec<Job>, Vec<Diagnostic>), Vec<Diagnostic>> {
    let sources = load(project, cwd, paths)?;
    let library = project.library()?;
    resolve(project, &library, &sources, None).map(|r| (r.jobs, r.warnings))
}

/// The jobs of each set asked for, in order, and the warnings about any.
#[derive(Debug)]
pub struct Resolved {
    pub jobs: Vec<Vec<Job>>,
    pub warnings: Vec<Diagnostic>,
}

/// [`check`] for the project's definitions as written (`None`) and for
/// variants, in the order of `which`: their jobs, and the warnings about
/// any. The definitions as written are always checked: they are the
/// project's own output, and what each variant is made from.
pub fn check_sets(
    project: &Project,
    cwd: &Path,
    paths: &[PathBuf],
    which: &[Option<&Variant>],
) -> Result<Resolved, Vec<Diagnostic>> {
    let sources = load(project, cwd, paths)?;
    let library = project.library()?;
    let complete = complete(project, cwd, paths);
    resolve_sets(project, &library, &sources, which, complete)
}

/// Whether `paths` yield all of the project's definitions: only then can a
/// variant's `job:` be told to name none.
pub fn complete(project: &Project, cwd: &Path, paths: &[PathBuf]) -> bool {
    paths.is_empty()
        || matches!(
            (files(project, cwd, paths), files(project, cwd, &[])),
            (Ok(a), Ok(b)) if a == b
        )
}

/// Resolves the definitions as written and, for each variant in `which`,
/// as patched. A finding that a variant's documents share with the
/// definitions as written (an error in a value no patch touched) is
/// reported once; one only a variant has says so, unless the patch that
/// causes it is what it points at.
fn resolve_sets(
    project: &Project,
    library: &Library,
    sources: &Sources,
    which: &[Option<&Variant>],
    complete: bool,
) -> Result<Resolved, Vec<Diagnostic>> {
    resolve_parts(project, library, sources, which, Scope::All { complete }).map(|r| Resolved {
        jobs: r.sets.into_iter().map(|s| s.jobs).collect(),
        warnings: r.warnings,
    })
}

/// What a compile covers: all of a build's definitions, or (for the build
/// cache) some of them, whose cross-file rules the cache checks itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// Every definition the build reads; `complete` when they are all of
    /// the project's.
    All { complete: bool },
    /// Some definition files: the rules across files are left to the caller
    /// (duplicates and collisions with the others, variants' `job:` names,
    /// the budget of all jobs, that there is a job at all, and the images a
    /// variant without build specs uses), and so are the shared files.
    Some,
}

/// A set's jobs and the summaries of its documents.
#[derive(Debug, Clone, Default)]
struct SetJobs {
    jobs: Vec<Job>,
    summaries: Vec<Summary>,
}

/// A set's jobs, the warnings about them and the summaries of its
/// documents.
struct ResolvedSet {
    jobs: Vec<Job>,
    warnings: Vec<Diagnostic>,
    summaries: Vec<Summary>,
}

/// Each set's jobs and the summaries of its documents, and the warnings
/// about any.
struct ResolvedParts {
    sets: Vec<SetJobs>,
    warnings: Vec<Diagnostic>,
}

/// [`resolve_sets`], also returning the summaries of each set's documents.
fn resolve_parts(
    project: &Project,
    library: &Library,
    sources: &Sources,
    which: &[Option<&Variant>],
    scope: Scope,
) -> Result<ResolvedParts, Vec<Diagnostic>> {
    let complete = scope == Scope::All { complete: true };
    let resolve_one = |patching: Option<&validate::Patching>| {
        if scope == Scope::Some {
            resolve_some(project, library, sources, patching)
        } else {
            resolve(project, library, sources, patching)
        }
    };
    type Key = (String, usize, usize, String);
    let key = |d: &Diagnostic| -> Key {
        match &d.location {
            Some(l) => (l.file.name.clone(), l.pos.line, l.pos.column, d.title()),
            None => (String::new(), 0, 0, d.title()),
        }
    };
    let mut errors = Vec::new();
    let mut warnings = Vec::new();
    let base = match resolve_one(None) {
        Ok(r) => {
            warnings.extend(r.warnings);
            Some(SetJobs {
                jobs: r.jobs,
                summaries: r.summaries,
            })
        }
        Err(d) => {
            errors.extend(d);
            None
        }
    };
    let seen: std::collections::HashSet<Key> = errors.iter().chain(&warnings).map(key).collect();
    let mut variants: Vec<&Variant> = which.iter().flatten().copied().collect();
    variants.sort_by(|a, b| a.name.cmp(&b.name));
    variants.dedup_by(|a, b| a.name == b.name);
    let mut resolved: Vec<(&str, SetJobs)> = Vec::new();
    if let Some(project_doc) = &project.doc {
        for v in variants {
            let patching = validate::Patching {
                variant: v,
                project: project_doc,
                complete,
            };
            let own = |d: Diagnostic| {
                if seen.contains(&key(&d)) {
                    return None;
                }
                let in_patch = d
                    .location
                    .as_ref()
                    .is_some_and(|l| Arc::ptr_eq(&l.file, &project_doc.file));
                Some(if in_patch {
                    d
                } else {
                    let message = format!("{} (in variant `{}`)", d.message, v.name);
                    Diagnostic { message, ..d }
                })
            };
            match resolve_one(Some(&patching)) {
                Ok(r) => {
                    warnings.extend(r.warnings.into_iter().filter_map(own));
                    let set = SetJobs {
                        jobs: r.jobs,
                        summaries: r.summaries,
                    };
                    resolved.push((&v.name, set));
                }
                Err(d) => errors.extend(d.into_iter().filter_map(own)),
            }
        }
    }
    if !errors.is_empty() {
        errors.extend(warnings);
        diagnostic::normalize(&mut errors);
        return Err(errors);
    }
    diagnostic::normalize(&mut warnings);
    let mut base = base.unwrap_or_default();
    fn name<'a>(w: &Option<&'a Variant>) -> Option<&'a str> {
        w.map(|v| v.name.as_str())
    }
    // Each set's jobs moved out at its last mention in `which`, cloned
    // before: a thousand jobs are worth not copying.
    let sets = which
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let again = which[i + 1..].iter().any(|o| name(o) == name(w));
            let found = match w {
                None => Some(&mut base),
                Some(v) => resolved
                    .iter_mut()
                    .find(|(n, _)| *n == v.name)
                    .map(|(_, set)| set),
            };
            found.map_or_else(Default::default, |set| {
                if again {
                    set.clone()
                } else {
                    std::mem::take(set)
                }
            })
        })
        .collect();
    Ok(ResolvedParts { sets, warnings })
}

/// [`resolve`] of some definition files: none may be all right, as the
/// others have jobs.
fn resolve_some(
    project: &Project,
    library: &Library,
    sources: &Sources,
    patching: Option<&validate::Patching>,
) -> Result<ResolvedSet, Vec<Diagnostic>> {
    let generated = project.written_dirs();
    let top = project.top();
    let cx = validate::Context {
        defaults: &project.defaults,
        library,
        root: &project.root,
        top: &top,
        generated: &generated,
    };
    let files: Vec<Arc<SourceFile>> = sources.iter().map(|(_, f)| Arc::clone(f)).collect();
    let valid = validate::validate_all(&files, patching, &cx)?;
    Ok(ResolvedSet {
        jobs: valid.jobs,
        warnings: valid.warnings,
        summaries: summarize(valid.facts),
    })
}

/// A definition document as the rules across documents see it (duplicate
/// jobs, object names two jobs generate, the output budget of all jobs):
/// what the build cache keeps of a definition file it does not read again.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Summary {
    /// The definition file, as generated files name it.
    pub source: String,
    pub namespace: String,
    pub name: String,
    /// The objects it generates: (kind, namespace, name).
    pub claims: Vec<(String, Option<String>, String)>,
    /// The least output it makes (see `validate::budget`).
    pub floor: u64,
}

impl Summary {
    /// The document as the rules across documents see it, with no
    /// location: what they find, the full build reports.
    pub fn across(&self) -> validate::across::Doc<'_> {
        validate::across::Doc {
            namespace: &self.namespace,
            name: &self.name,
            claims: self
                .claims
                .iter()
                .map(|(kind, namespace, name)| validate::across::Claim {
                    kind,
                    namespace: namespace.as_deref(),
                    name,
                })
                .collect(),
            floor: self.floor,
            at: None,
        }
    }
}

/// The summaries of the documents, from what validation found of them
/// (every document, when it passes).
fn summarize(facts: Vec<validate::Facts>) -> Vec<Summary> {
    facts
        .into_iter()
        .map(|f| Summary {
            source: f.source,
            namespace: f.namespace,
            name: f.name,
            claims: f
                .generated
                .into_iter()
                .map(|g| (g.kind.to_owned(), g.namespace, g.name))
                .collect(),
            floor: f.floor,
        })
        .collect()
}

fn resolve(
    project: &Project,
    library: &Library,
    sources: &Sources,
    patching: Option<&validate::Patching>,
) -> Result<ResolvedSet, Vec<Diagnostic>> {
    let resolved = resolve_some(project, library, sources, patching)?;
    if resolved.jobs.is_empty() {
        // An empty tree would prune every generated file, and a GitOps
        // controller would then delete every job from the cluster.
        let names: Vec<&str> = sources.iter().map(|(_, f)| f.shown.as_str()).collect();
        let which = match names.as_slice() {
            [one] => format!("{one} holds no documents"),
            [first @ .., last] if names.len() <= 5 => format!(
                "the definition files {} and {last} hold no documents",
                first.join(", ")
            ),
            _ => format!(
                "the {} definition files ({}, and {} more) hold no documents",
                names.len(),
                names.iter().take(3).copied().collect::<Vec<_>>().join(", "),
                names.len().saturating_sub(3)
            ),
        };
        return Err(vec![
            Diagnostic::new(format!("no training jobs found: {which}"))
                .hint("add a `kind: TrainingJob` document; to remove every job, delete the output directory by hand"),
        ]);
    }
    Ok(resolved)
}

/// Renders and hashes the jobs' image builds (see [`crate::image`]) and
/// fills in their images; returns the build-spec tree for `build_output`.
pub fn images(
    project: &Project,
    jobs: &mut [Job],
    build_output: &Path,
) -> Result<Tree, Vec<Diagnostic>> {
    let library = project.library()?;
    let (tree, _) = crate::image::prepare(
        jobs,
        &library,
        &project.root,
        build_output,
        &generated(project, build_output),
    )?;
    Ok(tree)
}

/// The directories trainc writes, every variant's too, whichever a build
/// writes: never part of what it hashes, so that no image tag depends on
/// which are built.
pub fn generated<'a>(project: &'a Project, build_output: &'a Path) -> Vec<&'a Path> {
    let mut dirs: Vec<&Path> = project.written_dirs().into_iter().map(|(d, _)| d).collect();
    dirs.push(build_output);
    dirs
}

/// One output directory a build writes: the project's own or a
/// variant's, with its build directory.
#[derive(Debug, Clone, Copy)]
pub struct Set<'a> {
    /// `None`: the definitions as written.
    pub variant: Option<&'a Variant>,
    pub output: &'a Path,
    /// Where its build specs are written; `None`: nowhere.
    pub build_output: Option<&'a Path>,
    /// What its root kustomization lists besides the jobs.
    pub resources: &'a [Resource],
}

/// What a build compiled for one [`Set`].
#[derive(Debug)]
pub struct Output {
    /// Its manifests, but those a [`Sink`] took.
    pub manifests: Tree,
    /// The manifests a [`Sink`] took.
    pub streamed: std::collections::BTreeMap<String, Taken>,
    /// Empty without `build_output` or without jobs that build an image.
    pub builds: Tree,
    /// The root kustomization's entries besides the jobs, relative to the
    /// output directory.
    pub extra: Vec<String>,
    /// How many jobs it holds.
    pub jobs: usize,
}

/// What a build compiled, and from what.
#[derive(Debug)]
pub struct Compiled {
    /// One per set, in order.
    pub outputs: Vec<Output>,
    /// Everything read to get here, for the build cache.
    pub read: Read,
    /// Findings that did not stop the build.
    pub warnings: Vec<Diagnostic>,
    /// What each definition file made, for the build cache's records: the
    /// definitions as written first, then as each set's variant patches
    /// them, in the order of the sets.
    pub parts: Vec<Part>,
}

/// The definitions as written, or as a variant patches them: their
/// documents and jobs, and which set's files they made.
#[derive(Debug, Default)]
pub struct Part {
    pub summaries: Vec<Summary>,
    pub jobs: Vec<JobInfo>,
    /// The images its build specs build, with the Dockerfiles left out
    /// (they are in the set's build-spec tree).
    pub builds: Vec<crate::image::ImageBuild>,
    /// The set (an index into [`Compiled::outputs`]) whose files these are;
    /// `None`: no set's (the definitions as written, when only variants are
    /// built).
    pub set: Option<usize>,
}

/// A job, as the build cache records it.
#[derive(Debug)]
pub struct JobInfo {
    /// The definition file, as generated files name it.
    pub source: String,
    pub namespace: String,
    pub name: String,
    /// The images the build specs build for it.
    pub images: Vec<String>,
}

/// The inputs a build read, each once: the definitions, the library and the
/// build contexts, as they were when they were compiled.
#[derive(Debug)]
pub struct Read {
    pub sources: Sources,
    pub library: String,
    pub contexts: Vec<ContextPrint>,
}

/// The manifest tree and the build-spec tree of each set, in order. The
/// definitions as written are compiled too, even when no set is theirs:
/// a variant without a build directory of its own may only use the images
/// their build specs build.
pub fn desired(
    project: &Project,
    cwd: &Path,
    paths: &[PathBuf],
    sets: &[Set],
) -> Result<Compiled, Vec<Diagnostic>> {
    desired_into(project, cwd, paths, sets, None)
}

/// [`desired`], the jobs' files of the sets a `sink` streams handed to it as
/// they are rendered rather than kept (see [`Output::streamed`]).
pub fn desired_into(
    project: &Project,
    cwd: &Path,
    paths: &[PathBuf],
    sets: &[Set],
    sink: Option<&dyn Sink>,
) -> Result<Compiled, Vec<Diagnostic>> {
    let sources = load(project, cwd, paths)?;
    // Loaded once, so validation and the image stage see the same library.
    let library = project.library()?;
    let complete = complete(project, cwd, paths);
    compile_sets(
        project,
        &library,
        sources,
        sets,
        Scope::All { complete },
        sink,
    )
}

/// [`desired`] without keeping the jobs' files: `trainc validate` needs
/// only that every job renders, and each file's size for the output limit,
/// not a large project's whole output in memory.
pub fn rendered(
    project: &Project,
    cwd: &Path,
    paths: &[PathBuf],
    sets: &[Set],
) -> Result<Compiled, Vec<Diagnostic>> {
    desired_into(project, cwd, paths, sets, Some(&Discard))
}

/// A [`Sink`] that keeps only the size of each file it is handed.
struct Discard;

impl Sink for Discard {
    fn streams(&self, _set: usize) -> bool {
        true
    }

    fn take(&self, _set: usize, files: Vec<(String, Vec<u8>)>) -> Vec<(String, Taken)> {
        let taken = |(name, bytes): (String, Vec<u8>)| {
            let len = bytes.len() as u64;
            (name, Taken { len, hash: None })
        };
        files.into_iter().map(taken).collect()
    }
}

/// [`desired`] of some of the definition files, already read, for the
/// build cache: each set's trees hold only these files' jobs (no root
/// kustomization, no bake file), and the rules across files (see
/// [`Scope::Some`]) and the output limit are left to the caller.
pub fn desired_some(
    project: &Project,
    library: &Library,
    sources: Sources,
    sets: &[Set],
) -> Result<Compiled, Vec<Diagnostic>> {
    let generated: Vec<Diagnostic> = sources
        .iter()
        .filter(|(_, f)| emit::is_generated(f.text.as_bytes()))
        .map(|(_, f)| Diagnostic::new(format!("{} was generated by trainc", f.shown)))
        .collect();
    if !generated.is_empty() {
        return Err(generated);
    }
    compile_sets(project, library, sources, sets, Scope::Some, None)
}

fn compile_sets(
    project: &Project,
    library: &Library,
    sources: Sources,
    sets: &[Set],
    scope: Scope,
    sink: Option<&dyn Sink>,
) -> Result<Compiled, Vec<Diagnostic>> {
    let all = scope != Scope::Some;
    let mut which: Vec<Option<&Variant>> = vec![None];
    which.extend(sets.iter().filter_map(|s| s.variant).map(Some));
    let ResolvedParts {
        sets: resolved,
        mut warnings,
    } = resolve_parts(project, library, &sources, &which, scope)?;
    let mut resolved = resolved.into_iter();
    let SetJobs {
        jobs: mut base,
        summaries: base_summaries,
    } = resolved.next().unwrap_or_default();
    // The project's own build directory names the images in the build
    // specs (and in their comments): the one this build writes, if it
    // writes the project's.
    let base_out = sets
        .iter()
        .find(|s| s.variant.is_none())
        .and_then(|s| s.build_output)
        .unwrap_or(&project.build_output);
    let base_prepared = prepare(project, library, &mut base, base_out)?;
    let mut contexts = base_prepared.prints.clone();
    let mut parts = vec![Part {
        summaries: base_summaries,
        jobs: job_infos(&base, &base_prepared.per_job),
        builds: base_prepared.builds.clone(),
        set: None,
    }];
    let mut outputs = Vec::with_capacity(sets.len());
    let mut diags = Vec::new();
    // The images each set builds, for the rules across sets.
    let mut images = vec![base_prepared.images.clone(); sets.len()];
    // The definitions' jobs are moved into the last set that writes them,
    // not copied.
    let mut base_sets = sets.iter().filter(|s| s.variant.is_none()).count();
    for (index, set) in sets.iter().enumerate() {
        let (jobs, builds) = match set.variant {
            None => {
                parts[0].set = Some(outputs.len());
                base_sets -= 1;
                let jobs = if base_sets == 0 {
                    std::mem::take(&mut base)
                } else {
                    base.clone()
                };
                (jobs, base_prepared.tree.clone())
            }
            Some(v) => {
                let SetJobs {
                    mut jobs,
                    summaries,
                } = resolved.next().unwrap_or_default();
                let out = v.build_output.as_deref().unwrap_or(&project.build_output);
                let prepared = prepare(project, library, &mut jobs, out)?;
                contexts.extend(prepared.prints);
                images[index] = prepared.images;
                parts.push(Part {
                    summaries,
                    jobs: job_infos(&jobs, &prepared.per_job),
                    builds: prepared.builds,
                    set: Some(outputs.len()),
                });
                (jobs, prepared.tree)
            }
        };
        let out = set.build_output.unwrap_or(&project.build_output);
        let extra = if all {
            match extra_resources(project, set.output, out, set.resources, &jobs) {
                Ok(listed) => {
                    warnings.extend(listed.warnings);
                    listed.entries
                }
                Err(d) => {
                    diags.extend(d);
                    continue;
                }
            }
        } else {
            Vec::new()
        };
        let sink = sink.filter(|s| s.streams(index)).map(|s| (s, index));
        let (mut manifests, streamed) = render_into(&jobs, &extra, limits::MAX_OUTPUT_BYTES, sink)?;
        let mut builds = if set.build_output.is_some() {
            builds
        } else {
            Tree::new()
        };
        if !all {
            // Made by the caller from every file's jobs.
            manifests.remove(emit::KUSTOMIZATION);
            builds.remove(crate::image::BAKE_FILE);
        }
        outputs.push(Output {
            manifests,
            streamed,
            builds,
            extra,
            jobs: jobs.len(),
        });
    }
    if all {
        let facts: Vec<SetFacts> = images
            .iter()
            .enumerate()
            .map(|(i, images)| SetFacts {
                docs: parts
                    .iter()
                    .filter(|p| p.set == Some(i))
                    .flat_map(|p| &p.summaries)
                    .collect(),
                images,
            })
            .collect();
        let clean = diags.is_empty();
        diags.extend(across_sets(
            project,
            sets,
            &base_prepared.images,
            &facts,
            clean,
        ));
    }
    if !diags.is_empty() {
        diagnostic::normalize(&mut diags);
        return Err(diags);
    }
    contexts.sort();
    contexts.dedup();
    if all {
        // What would be written, checked before anything is.
        let trees = outputs.iter().flat_map(|o| [&o.manifests, &o.builds]);
        let streamed = outputs.iter().flat_map(|o| o.streamed.values());
        let bytes = trees
            .clone()
            .flat_map(|t| t.values())
            .map(|b| b.len() as u64)
            .chain(streamed.clone().map(|t| t.len));
        let files = trees.map(|t| t.len()).sum::<usize>() + streamed.count();
        limits::check_output(bytes.sum(), files, true, limits::MAX_OUTPUT_BYTES)
            .map_err(|d| vec![d])?;
    }
    Ok(Compiled {
        outputs,
        read: Read {
            sources,
            library: library.digest().to_owned(),
            contexts,
        },
        warnings,
        parts,
    })
}

fn job_infos(jobs: &[Job], images: &[Vec<String>]) -> Vec<JobInfo> {
    jobs.iter()
        .zip(images)
        .map(|(j, images)| JobInfo {
            source: j.source.clone(),
            namespace: j.namespace.clone(),
            name: j.name.clone(),
            images: images.clone(),
        })
        .collect()
}

/// What [`prepare`] made of a set's jobs.
struct Prepared {
    /// The build-spec tree.
    tree: Tree,
    prints: Vec<ContextPrint>,
    /// The images it builds (those of roles that name none, and
    /// TensorBoard's), and each job's.
    images: std::collections::BTreeSet<String>,
    per_job: Vec<Vec<String>>,
    /// The builds, without their Dockerfiles.
    builds: Vec<crate::image::ImageBuild>,
}

/// [`crate::image::prepare`] into `out`, also returning the images it
/// builds (those of roles that name none, and TensorBoard's).
fn prepare(
    project: &Project,
    library: &Library,
    jobs: &mut [Job],
    out: &Path,
) -> Result<Prepared, Vec<Diagnostic>> {
    let unnamed: Vec<Vec<bool>> = jobs
        .iter()
        .map(|j| j.roles.iter().map(|r| r.image.is_empty()).collect())
        .collect();
    let (mut builds, prints) =
        crate::image::builds(jobs, library, &project.root, out, &generated(project, out))?;
    let tree = crate::image::tree(&builds, &project.root, out);
    for b in &mut builds {
        b.dockerfile = Vec::new();
    }
    let mut images = std::collections::BTreeSet::new();
    let mut per_job = Vec::with_capacity(jobs.len());
    for (job, unnamed) in jobs.iter().zip(&unnamed) {
        let mut own = std::collections::BTreeSet::new();
        for (role, built) in job.roles.iter().zip(unnamed) {
            if *built && job.build.is_some() {
                own.insert(role.image.clone());
            }
        }
        if let Some(tb) = &job.tensorboard
            && tb.build.is_some()
        {
            own.insert(tb.image.clone());
        }
        images.extend(own.iter().cloned());
        per_job.push(own.into_iter().collect());
    }
    Ok(Prepared {
        tree,
        prints,
        images,
        per_job,
        builds,
    })
}

/// What the rules across a build's sets see of one set.
pub struct SetFacts<'a> {
    /// Its documents.
    pub docs: Vec<&'a Summary>,
    /// The images its jobs build (see [`Prepared::images`]).
    pub images: &'a std::collections::BTreeSet<String>,
}

/// The rules across a build's sets, each once, for the full build and the
/// build cache alike: a variant without build specs of its own may only
/// use the images the project's build (`base`); and, when nothing else
/// was found (`clean`), no two outputs synced to one cluster may build the
/// same job. `facts` are in the order of `sets`.
pub fn across_sets(
    project: &Project,
    sets: &[Set],
    base: &std::collections::BTreeSet<String>,
    facts: &[SetFacts],
    clean: bool,
) -> Vec<Diagnostic> {
    // With `ownOutput: false` the project's own build specs are not
    // written: a variant's images are built by its own, or by none.
    let none = std::collections::BTreeSet::new();
    let base = if project.own_output { base } else { &none };
    let mut found: Vec<Diagnostic> = sets
        .iter()
        .zip(facts)
        .filter_map(|(set, f)| {
            let v = set.variant.filter(|v| v.build_output.is_none())?;
            foreign_images(project, v, f.images, base)
        })
        .collect();
    if clean && found.is_empty() && sets.len() > 1 {
        let jobs: Vec<&[&Summary]> = facts.iter().map(|f| f.docs.as_slice()).collect();
        found.extend(shared_jobs(project, sets, &jobs));
    }
    found
}

/// Jobs that two outputs synced to one cluster would both run. A job is
/// its namespace and name in a cluster: its TensorBoard, claims and
/// PersistentVolumes are named after it, its pods selected by it, and a
/// variant that changes nothing of a run writes the same Jobs. Two GitOps
/// applications syncing both outputs would fight over them. Each set's
/// jobs come as [`Summary`]s; `sets` are in the same order. One finding per
/// pair of outputs, located at the later one's `output` in the project
/// file, with the earlier one's.
fn shared_jobs(project: &Project, sets: &[Set], jobs: &[&[&Summary]]) -> Vec<Diagnostic> {
    let cluster = |s: &Set| -> Option<String> {
        s.variant
            .and_then(|v| v.cluster.clone())
            .or_else(|| project.cluster.clone())
    };
    let key = |s: &Set| match s.variant {
        Some(v) => v.pointer("output"),
        None => "/output".to_owned(),
    };
    let what = |s: &Set| match s.variant {
        Some(v) => format!("variant `{}`", v.name),
        None => "the project's output".to_owned(),
    };
    let mut found = Vec::new();
    for (j, later) in sets.iter().enumerate() {
        for (i, earlier) in sets.iter().enumerate().take(j) {
            if cluster(earlier) != cluster(later) {
                continue;
            }
            let first: std::collections::HashSet<(&str, &str)> = jobs[i]
                .iter()
                .map(|s| (s.namespace.as_str(), s.name.as_str()))
                .collect();
            let both: Vec<&Summary> = jobs[j]
                .iter()
                .copied()
                .filter(|s| first.contains(&(s.namespace.as_str(), s.name.as_str())))
                .collect();
            let Some(job) = both.first() else {
                continue;
            };
            let more = match both.len() - 1 {
                0 => String::new(),
                1 => " (and 1 more job)".to_owned(),
                n => format!(" (and {n} more jobs)"),
            };
            let doc = project.doc.as_ref();
            let mut d = Diagnostic::new(format!(
                "job `{}/{}` from {}{more} is built into {} and into {}, which are synced to one cluster: two GitOps applications would fight over the objects named after it",
                job.namespace,
                job.name,
                job.source,
                what(earlier),
                what(later),
            ))
            .at(doc.and_then(|d| d.locate_key(&key(later))))
            .hint(format!(
                "move the jobs of {} to another namespace (a patch of `metadata.namespace`); or, when its output is synced to another cluster, say which: `cluster: <name>` in the project file",
                what(later)
            ));
            if let Some(at) = doc.and_then(|d| d.locate_key(&key(earlier))) {
                d = d.related(format!("{}'s directory", what(earlier)), at);
            }
            found.push(d);
        }
    }
    found
}

/// A variant without a build directory of its own whose patches change
/// what an image is built from: nothing would build the image its
/// manifests name.
fn foreign_images(
    project: &Project,
    variant: &Variant,
    images: &std::collections::BTreeSet<String>,
    base: &std::collections::BTreeSet<String>,
) -> Option<Diagnostic> {
    let missing: Vec<&str> = images.difference(base).map(String::as_str).collect();
    let first = missing.first()?;
    let doc = project.doc.as_ref()?;
    let at = variant.pointer("");
    let more = match missing.len() {
        1 => String::new(),
        n => format!(" and {} more", n - 1),
    };
    let why = if project.own_output {
        "its patches change what they are built from"
    } else {
        "with `ownOutput: false` the project's own build specs are not written"
    };
    Some(
        Diagnostic::new(format!(
            "variant `{}` uses images that the project's build specs do not build ({first}{more}): {why}",
            variant.name
        ))
        .path(doc.dotted(&at))
        .at(doc.locate_key(&at))
        .hint(format!(
            "give the variant build specs of its own, e.g. `buildOutput: build-{}`, and build them as the project's are",
            variant.name
        )),
    )
}

/// The root kustomization's entries for `resources` in `output`, whose
/// build directory is `build_output`; checked against every other
/// directory trainc writes for the project.
pub fn extra_resources(
    project: &Project,
    output: &Path,
    build_output: &Path,
    resources: &[Resource],
    jobs: &[Job],
) -> Result<crate::resources::Listed, Vec<Diagnostic>> {
    let namespaces = jobs.iter().map(|j| j.namespace.as_str()).collect();
    extra_resources_in(project, output, build_output, resources, &namespaces)
}

/// [`extra_resources`] for jobs in `namespaces`.
pub fn extra_resources_in(
    project: &Project,
    output: &Path,
    build_output: &Path,
    resources: &[Resource],
    namespaces: &std::collections::BTreeSet<&str>,
) -> Result<crate::resources::Listed, Vec<Diagnostic>> {
    if resources.is_empty() {
        return Ok(Default::default());
    }
    let mut others: Vec<(&Path, String)> = project
        .written_dirs()
        .into_iter()
        .filter(|(d, _)| *d != output)
        .collect();
    if !others.iter().any(|(d, _)| *d == build_output) {
        others.push((build_output, "build directory".to_owned()));
    }
    let others: Vec<(&Path, &str)> = others.iter().map(|(d, w)| (*d, w.as_str())).collect();
    crate::resources::entries(project, resources, output, namespaces, &others)
}

/// Compiles valid jobs into the output tree, in memory. Jobs are
/// independent, so they compile and serialize on every core; the result is
/// assembled in a sorted map and does not depend on scheduling.
///
/// Jobs render in batches, and a build whose output passes the limit stops
/// at the first batch that takes it there (see [`limits::RENDER_BATCH_TASKS`]).
pub fn render(jobs: &[Job]) -> Result<Tree, Vec<Diagnostic>> {
    render_within(jobs, limits::MAX_OUTPUT_BYTES)
}

/// [`render`] with another output limit, for tests.
pub fn render_within(jobs: &[Job], limit: u64) -> Result<Tree, Vec<Diagnostic>> {
    render_with(jobs, &[], limit)
}

/// [`render_within`], the root kustomization also listing `extra`.
pub fn render_with(jobs: &[Job], extra: &[String], limit: u64) -> Result<Tree, Vec<Diagnostic>> {
    render_into(jobs, extra, limit, None).map(|(tree, _)| tree)
}

/// One job's files: in memory, or taken by a [`Sink`].
enum Rendered {
    Kept(emit::Files),
    Taken(Vec<(String, Taken)>),
}

/// [`render_with`], each job's files handed to `sink` (with the set's
/// index) as soon as they are rendered, on the thread that rendered them;
/// the tree then holds only the root kustomization, and the second map
/// says what the sink made of the rest.
fn render_into(
    jobs: &[Job],
    extra: &[String],
    limit: u64,
    sink: Option<(&dyn Sink, usize)>,
) -> Result<(Tree, std::collections::BTreeMap<String, Taken>), Vec<Diagnostic>> {
    let mut files = Vec::with_capacity(jobs.len());
    let mut taken = std::collections::BTreeMap::new();
    let (mut bytes, mut count) = (0u64, 0usize);
    let tasks = |j: &Job| j.roles.iter().map(|r| u64::from(r.replicas)).sum();
    for batch in limits::batches(jobs, tasks) {
        let rendered = par::map(batch, |job| {
            let files = render_job(job)?;
            Ok(match sink {
                Some((sink, set)) => Rendered::Taken(sink.take(set, files)),
                None => Rendered::Kept(files),
            })
        });
        for job_files in rendered {
            match job_files.map_err(internal)? {
                Rendered::Kept(job_files) => {
                    count += job_files.len();
                    bytes += job_files.iter().map(|(_, b)| b.len() as u64).sum::<u64>();
                    files.push(job_files);
                }
                Rendered::Taken(job_files) => {
                    count += job_files.len();
                    bytes += job_files.iter().map(|(_, t)| t.len).sum::<u64>();
                    taken.extend(job_files);
                }
            }
        }
        limits::check_output(bytes, count, false, limit).map_err(|d| vec![d])?;
    }
    let dirs: Vec<String> = jobs
        .iter()
        .map(|j| emit::job_dir(&j.namespace, &j.name))
        .collect();
    let ordered = taken.keys().any(|rel: &String| emit::applied_first(rel));
    let tree = emit::assemble(files, &dirs, extra, ordered).map_err(internal)?;
    Ok((tree, taken))
}

/// One job's files: its roles' tasks rendered as families where they are
/// one (see [`compile::family`]), each alone where they are not.
fn render_job(job: &Job) -> Result<emit::Files, String> {
    let each = || {
        emit::emit_job(&compile::compile(job, Tasks::Each)?)?
            .ok_or_else(|| "a job compiled task by task has no family".to_owned())
    };
    let compiled = compile::compile(job, Tasks::Families)?;
    match emit::emit_job(&compiled)? {
        Some(files) => {
            // Every test build compares the families with their tasks
            // compiled alone.
            if cfg!(debug_assertions) && !compiled.families.is_empty() {
                assert!(files == each()?, "a family renders as its tasks alone");
            }
            Ok(files)
        }
        None => each(),
    }
}

fn internal(e: String) -> Vec<Diagnostic> {
    vec![Diagnostic::new(format!(
        "internal error: cannot serialize a manifest: {e}"
    ))]
}
