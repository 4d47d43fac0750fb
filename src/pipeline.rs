//! The stages wired together: what `validate` and `build` run.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::compile;
use crate::diagnostic::{self, Diagnostic};
use crate::emit::{self, Tree};
use crate::image::ContextPrint;
use crate::library::Library;
use crate::load::project::Project;
use crate::load::{self, Document};
use crate::model::Job;
use crate::source::SourceFile;
use crate::{limits, par, validate};

/// The definition files under `paths` (or the project's sources when empty),
/// never the output directory or the project file.
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
    let mut exclude = vec![project.output.clone()];
    exclude.extend(project.file.clone());
    let files = load::discover(&project.root, &roots, &exclude)?;
    if files.is_empty() {
        let shown: Vec<String> = roots
            .iter()
            .map(|r| load::display_name(&project.root, r))
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

/// Loads every document under `paths` (or the project's sources when empty).
/// Findings from all files are gathered before giving up.
pub fn load(
    project: &Project,
    cwd: &Path,
    paths: &[PathBuf],
) -> Result<(Sources, Vec<Document>), Vec<Diagnostic>> {
    let files = files(project, cwd, paths)?;
    // Files parse independently; results come back in file order.
    let parsed = par::map(&files, |path| {
        let name = load::display_name(&project.root, path);
        load::read(path, name).and_then(|f| Ok((path.clone(), load::parse(&f)?, f)))
    });
    let mut sources = Vec::with_capacity(files.len());
    let mut docs = Vec::new();
    let mut diags = Vec::new();
    for p in parsed {
        match p {
            Ok((path, d, file)) => {
                docs.extend(d);
                sources.push((path, file));
            }
            Err(d) => diags.push(d),
        }
    }
    if diags.is_empty() {
        Ok((sources, docs))
    } else {
        diagnostic::normalize(&mut diags);
        Err(diags)
    }
}

/// Validates and resolves; returns the jobs and the warnings about them.
pub fn check(
    project: &Project,
    cwd: &Path,
    paths: &[PathBuf],
) -> Result<(Vec<Job>, Vec<Diagnostic>), Vec<Diagnostic>> {
    let (sources, docs) = load(project, cwd, paths)?;
    let library = project.library()?;
    resolve(project, &library, &sources, &docs)
}

fn resolve(
    project: &Project,
    library: &Library,
    sources: &Sources,
    docs: &[Document],
) -> Result<(Vec<Job>, Vec<Diagnostic>), Vec<Diagnostic>> {
    let cx = validate::Context {
        defaults: &project.defaults,
        library,
        root: &project.root,
    };
    let (jobs, warnings) = validate::validate(docs, &cx)?;
    if jobs.is_empty() {
        // An empty tree would prune every generated file, and a GitOps
        // controller would then delete every job from the cluster.
        let names: Vec<&str> = sources.iter().map(|(_, f)| f.name.as_str()).collect();
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
    Ok((jobs, warnings))
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

/// The directories trainc writes: never part of what it hashes.
pub fn generated<'a>(project: &'a Project, build_output: &'a Path) -> [&'a Path; 3] {
    [
        project.output.as_path(),
        project.build_output.as_path(),
        build_output,
    ]
}

/// What a build compiled, and from what.
#[derive(Debug)]
pub struct Compiled {
    pub manifests: Tree,
    /// Empty without `build_output` or without jobs that build an image.
    pub builds: Tree,
    /// Everything read to get here, for the build cache.
    pub read: Read,
    /// Findings that did not stop the build.
    pub warnings: Vec<Diagnostic>,
}

/// The inputs a build read, each once: the definitions, the library and the
/// build contexts, as they were when they were compiled.
#[derive(Debug)]
pub struct Read {
    pub sources: Sources,
    pub library: String,
    pub contexts: Vec<ContextPrint>,
}

/// The manifest tree and the build-spec tree.
pub fn desired(
    project: &Project,
    cwd: &Path,
    paths: &[PathBuf],
    build_output: Option<&Path>,
) -> Result<Compiled, Vec<Diagnostic>> {
    let (sources, docs) = load(project, cwd, paths)?;
    // Loaded once, so validation and the image stage see the same library.
    let library = project.library()?;
    let (mut jobs, warnings) = resolve(project, &library, &sources, &docs)?;
    let out = build_output.unwrap_or(&project.build_output);
    let (builds, contexts) = crate::image::prepare(
        &mut jobs,
        &library,
        &project.root,
        out,
        &generated(project, out),
    )?;
    let manifests = render(&jobs)?;
    let builds = if build_output.is_some() {
        builds
    } else {
        Tree::new()
    };
    // What would be written, checked before anything is.
    let trees = [&manifests, &builds];
    let bytes = trees
        .iter()
        .flat_map(|t| t.values())
        .map(|b| b.len() as u64);
    let files = trees.iter().map(|t| t.len()).sum();
    limits::check_output(bytes.sum(), files, true, limits::MAX_OUTPUT_BYTES)
        .map_err(|d| vec![d])?;
    Ok(Compiled {
        manifests,
        builds,
        read: Read {
            sources,
            library: library.digest().to_owned(),
            contexts,
        },
        warnings,
    })
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
    let mut files = Vec::with_capacity(jobs.len());
    let (mut bytes, mut count) = (0u64, 0usize);
    let tasks = |j: &Job| j.roles.iter().map(|r| u64::from(r.replicas)).sum();
    for batch in limits::batches(jobs, tasks) {
        let rendered = par::map(batch, |job| {
            compile::compile(job).and_then(|c| emit::emit_job(&c))
        });
        for job_files in rendered {
            let job_files = job_files.map_err(internal)?;
            count += job_files.len();
            bytes += job_files.iter().map(|(_, b)| b.len() as u64).sum::<u64>();
            files.push(job_files);
        }
        limits::check_output(bytes, count, false, limit).map_err(|d| vec![d])?;
    }
    let dirs: Vec<String> = jobs
        .iter()
        .map(|j| emit::job_dir(&j.namespace, &j.name))
        .collect();
    emit::assemble(files, &dirs).map_err(internal)
}

fn internal(e: String) -> Vec<Diagnostic> {
    vec![Diagnostic::new(format!(
        "internal error: cannot serialize a manifest: {e}"
    ))]
}
