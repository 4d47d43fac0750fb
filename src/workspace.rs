//! Several projects in one repository: which they are, and the rules
//! across them.
//!
//! The projects are those a workspace file at the repository's top lists
//! (`trainc-workspace.yaml`, `projects: [DIR or FILE, …]`), else every
//! `trainc.yaml` below the top, hidden directories left out. `--workspace`
//! runs a command on each, after the rules across them: no two outputs
//! synced to one cluster may write the same job, or the same cluster-scoped
//! object (a PersistentVolume), since two GitOps applications would fight
//! over it. A build that is about to prune a job another project of the
//! repository now defines says so ([`moved`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::diagnostic::Diagnostic;
use crate::model::job::VolumeSource;
use crate::project::Project;
use crate::source::Location;
use crate::{load, names, pipeline};

/// The workspace file's name, at the repository's top.
pub const FILE: &str = "trainc-workspace.yaml";

/// The project file's name.
const PROJECT: &str = "trainc.yaml";

/// The projects of a repository.
#[derive(Debug)]
pub struct Workspace {
    pub top: PathBuf,
    /// The workspace file, when the top has one.
    pub file: Option<PathBuf>,
    /// Each project's file, in path order; none when the repository has
    /// no project file (its one project is the defaults').
    pub projects: Vec<PathBuf>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct WorkspaceFile {
    #[allow(dead_code)]
    api_version: ApiVersion,
    #[allow(dead_code)]
    kind: Kind,
    projects: Vec<String>,
}

#[derive(Debug, Deserialize)]
enum ApiVersion {
    #[serde(rename = "trainc.dev/v1alpha1")]
    V1alpha1,
}

#[derive(Debug, Deserialize)]
enum Kind {
    Workspace,
}

/// The projects of the repository that holds `cwd`.
pub fn discover(cwd: &Path) -> Result<Workspace, Vec<Diagnostic>> {
    let top = crate::paths::repository_top(cwd);
    let file = top.join(FILE);
    let (file, projects) = if file.symlink_metadata().is_ok() {
        let projects = listed(&top, &file, cwd)?;
        (Some(file), projects)
    } else {
        (None, found(&top))
    };
    Ok(Workspace {
        top,
        file,
        projects,
    })
}

/// Every `trainc.yaml` below `top`, in path order, through no symlinked
/// directory and no hidden one (`.git`).
fn found(top: &Path) -> Vec<PathBuf> {
    walkdir::WalkDir::new(top)
        .follow_links(false)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| e.depth() == 0 || !e.file_name().to_string_lossy().starts_with('.'))
        .filter_map(Result::ok)
        .filter(|e| e.file_name() == PROJECT && !e.file_type().is_dir())
        .map(walkdir::DirEntry::into_path)
        .collect()
}

/// The projects the workspace file lists: each a directory holding a
/// `trainc.yaml` or a project file, inside the repository.
fn listed(top: &Path, file: &Path, cwd: &Path) -> Result<Vec<PathBuf>, Vec<Diagnostic>> {
    let name = crate::paths::shown_path(cwd, file);
    let source = load::read(file, name.clone()).map_err(|d| vec![d])?;
    let docs = load::parse(&source).map_err(|d| vec![d])?;
    let [doc] = docs.as_slice() else {
        return Err(vec![
            Diagnostic::new(format!("{name} holds {} documents, not one", docs.len()))
                .hint("a workspace file is one document: `apiVersion: trainc.dev/v1alpha1`, `kind: Workspace`, `projects: [DIR, …]`"),
        ]);
    };
    let parsed: WorkspaceFile = doc.typed().map_err(|d| vec![d])?;
    let real_top = crate::paths::real(top);
    let mut out = Vec::new();
    let mut found = Vec::new();
    for (i, entry) in parsed.projects.iter().enumerate() {
        let pointer = format!("/projects/{i}");
        let path = top.join(entry);
        let path = if path.is_dir() {
            path.join(PROJECT)
        } else {
            path
        };
        let inside = crate::paths::real(&path).starts_with(&real_top);
        if !inside || !path.is_file() {
            let why = if inside {
                format!(
                    "no project file at {}",
                    crate::paths::shown_path(cwd, &path)
                )
            } else {
                "it lies outside the repository".to_owned()
            };
            found.push(
                Diagnostic::new(format!("project `{entry}` cannot be used: {why}"))
                    .path(doc.dotted(&pointer))
                    .at(doc.locate(&pointer))
                    .hint("list the directory of a project (which holds its trainc.yaml) or its project file, from the repository's top"),
            );
            continue;
        }
        if !out.contains(&path) {
            out.push(path);
        }
    }
    if found.is_empty() {
        Ok(out)
    } else {
        Err(found)
    }
}

/// One output directory of a project, and what it writes that only one
/// output synced to a cluster may write.
struct Output<'a> {
    project: &'a Project,
    /// How messages name it: `teams/vision/deploy`.
    dir: String,
    cluster: Option<String>,
    /// `(namespace, job)` → the definition file, from the project root.
    jobs: BTreeMap<(String, String), String>,
    /// Cluster-scoped object (`PersistentVolume <name>`) → its job.
    cluster_scoped: BTreeMap<String, (String, String)>,
}

/// The rules across the projects of a workspace: no job, and no
/// cluster-scoped object, written by two projects' outputs synced to one
/// cluster. Each finding is located at the later project's definition and
/// names the earlier one's. Projects whose definitions do not resolve are
/// left out: their own build reports them.
pub fn across(projects: &[Project]) -> Vec<Diagnostic> {
    let mut outputs = Vec::new();
    for project in projects {
        outputs.extend(outputs_of(project));
    }
    let mut found = Vec::new();
    for (j, later) in outputs.iter().enumerate() {
        for earlier in &outputs[..j] {
            if std::ptr::eq(earlier.project, later.project) || earlier.cluster != later.cluster {
                continue;
            }
            if let Some(d) = conflict(earlier, later) {
                found.push(d);
            }
        }
    }
    found
}

/// What two outputs of different projects, synced to one cluster, both
/// write: a cluster-scoped object first (the sharper finding), else a job.
fn conflict(earlier: &Output, later: &Output) -> Option<Diagnostic> {
    let (what, job) = match later
        .cluster_scoped
        .iter()
        .find(|(name, _)| earlier.cluster_scoped.contains_key(*name))
    {
        Some((name, job)) => (name.clone(), job.clone()),
        None => {
            let (key, _) = later
                .jobs
                .iter()
                .find(|(key, _)| earlier.jobs.contains_key(*key))?;
            (format!("job `{}/{}`", key.0, key.1), key.clone())
        }
    };
    let at = |o: &Output| -> Option<Location> {
        let source = o.jobs.get(&job)?;
        locate_job(o.project, source, &job.1)
    };
    let shown = |o: &Output| {
        let file = o.project.file.as_deref().unwrap_or(&o.project.root);
        format!("{} (project {})", o.dir, o.project.shown(file))
    };
    let mut d = Diagnostic::new(format!(
        "{what} is written by {} and by {}, which are synced to one cluster: two GitOps applications would fight over it",
        shown(earlier),
        shown(later),
    ))
    .at(at(later))
    .hint("keep each job in one project, or move one project's jobs to another namespace; when the outputs are synced to different clusters, say which: `cluster: <name>` in each project file");
    if let Some(loc) = at(earlier) {
        d = d.related("also written from here", loc);
    }
    Some(d)
}

/// Where `metadata.name` of job `name` is written in `source` (from the
/// project root): read again, on this error path only.
fn locate_job(project: &Project, source: &str, name: &str) -> Option<Location> {
    let path = project.root.join(source);
    let shown = crate::paths::shown_path(&project.cwd, &path);
    let file = load::read(&path, shown).ok()?;
    let docs = load::parse(&file).ok()?;
    docs.iter()
        .find(|d| d.value["metadata"]["name"].as_str() == Some(name))
        .and_then(|d| d.locate("/metadata/name"))
}

/// Each output directory of `project` (its own, then its variants'),
/// with the jobs and cluster-scoped objects it writes.
fn outputs_of(project: &Project) -> Vec<Output<'_>> {
    let which: Vec<Option<&crate::model::project::Variant>> = std::iter::once(None)
        .chain(project.variants.iter().map(Some))
        .collect();
    let Ok(resolved) = pipeline::check_sets(project, &project.cwd, &[], &which) else {
        return Vec::new();
    };
    which
        .iter()
        .zip(resolved.jobs)
        .filter(|(variant, _)| variant.is_some() || project.own_output)
        .map(|(variant, jobs)| {
            let (dir, cluster) = match variant {
                Some(v) => (
                    &v.output,
                    v.cluster.clone().or_else(|| project.cluster.clone()),
                ),
                None => (&project.output, project.cluster.clone()),
            };
            let mut out = Output {
                project,
                dir: crate::paths::shown_path(&project.cwd, dir),
                cluster,
                jobs: BTreeMap::new(),
                cluster_scoped: BTreeMap::new(),
            };
            for job in &jobs {
                let key = (job.namespace.clone(), job.name.clone());
                for v in &job.storage {
                    if matches!(v.source, VolumeSource::Pv { .. }) {
                        let name = names::volume(&job.namespace, &job.name, &v.name);
                        out.cluster_scoped
                            .insert(format!("PersistentVolume `{name}`"), key.clone());
                    }
                }
                out.jobs.insert(key, job.source.clone());
            }
            out
        })
        .collect()
}

/// Warnings for the jobs a build is about to prune from `project`'s output
/// (every file of `<namespace>/<job>/` deleted) that another project of
/// the repository now defines: the job moved. When both outputs are synced
/// to one cluster, its run stops with this output's sync and starts again
/// from the other's. Only a build that prunes a whole job directory looks
/// at the other projects.
pub fn moved<'a>(
    project: &Project,
    plans: impl IntoIterator<Item = (&'a crate::plan::Plan, &'a str)>,
) -> Vec<Diagnostic> {
    use crate::plan::Op;
    let mut gone: BTreeMap<(String, String), String> = BTreeMap::new();
    for (plan, shown) in plans {
        let mut deleted = std::collections::BTreeSet::new();
        let mut staying = std::collections::BTreeSet::new();
        for c in &plan.changes {
            let mut parts = c.path.splitn(3, '/');
            let (Some(ns), Some(job), Some(_)) = (parts.next(), parts.next(), parts.next()) else {
                continue;
            };
            let key = (ns.to_owned(), job.to_owned());
            if c.op == Op::Delete {
                deleted.insert(key);
            } else {
                staying.insert(key);
            }
        }
        for key in deleted.difference(&staying) {
            let dir = format!("{shown}/{}/{}", key.0, key.1);
            gone.entry(key.clone()).or_insert(dir);
        }
    }
    if gone.is_empty() {
        return Vec::new();
    }
    let Ok(workspace) = discover(&project.cwd) else {
        return Vec::new();
    };
    let own = project.file.as_deref().map(crate::paths::real);
    let mut found = Vec::new();
    for file in &workspace.projects {
        if own.as_deref() == Some(crate::paths::real(file).as_path()) {
            continue;
        }
        let Ok(other) = Project::discover(&project.cwd, Some(file)) else {
            continue;
        };
        for output in outputs_of(&other) {
            for (key, source) in &output.jobs {
                let Some(dir) = gone.remove(key) else {
                    continue;
                };
                let d = Diagnostic::warning(format!(
                    "{dir} is pruned, and job `{}/{}` is now built into {} (project {}): when both are synced to one cluster, its run stops here and starts again from there",
                    key.0,
                    key.1,
                    output.dir,
                    other.shown(file),
                ))
                .at(locate_job(&other, source, &key.1))
                .hint("commit both outputs in one change, so that one sync moves the job; if the job did not move, remove it from one of the projects");
                found.push(d);
            }
        }
    }
    found
}
