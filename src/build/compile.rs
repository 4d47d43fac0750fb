//! Every build's compile, with what the build cache knows or with nothing
//! ([`compile`]), and what each output directory should hold ([`Dest`]).
//!
//! With nothing known, every definition file is compiled, each job's files
//! handed to the stagers as they are rendered, and the rules across files
//! run over the documents, their findings located. With something known,
//! only the definition files whose results the record does not know (whose
//! bytes changed, that are new, or that had warnings, which must be shown
//! again) are compiled, and the rules across files (duplicate jobs,
//! generated names two jobs share, the output budget, variants' `job:`
//! names and images, the root kustomization's resources, the output limit)
//! run over every file's record and the new summaries, through the
//! functions the build that knows nothing runs. Either way each directory
//! should hold each file of each job, compiled or known (vouched for by the
//! directory's snapshot), and the files every job shares (the root
//! `kustomization.yaml`, `docker-bake.hcl`), rendered from every job.
//! [`plan()`] plans a directory by the walk every build plans with
//! ([`crate::plan::merge`]). Any finding, any doubt, and any file of an
//! unchanged job that is not as recorded ends a build that knew something
//! ([`Stop::Recompile`]): it runs again knowing nothing, and reports or
//! rewrites as it always does.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};

use crate::cache::files::{BuildRecord, JobRecord, PartRecord, SourceRecord};
use crate::cache::key::source_hash;
use crate::cache::{self, State};
use crate::emit;
use crate::image::{BAKE_FILE, ImageBuild};
use crate::pipeline::{self, Compiled, Set, Sources, Summary};
use crate::plan::merge::{self, Want};
use crate::plan::snapshot::{self, Entry};
use crate::plan::stream::Sink;
use crate::plan::{self, Plan};

/// The records of the definition files `compiled` read, from what they
/// made, and whether they can be kept for the next build: not when a
/// warning is about no definition file, which only a build compiling
/// every file shows again. `None`: what `compiled` made does not add up.
fn records(sets: &[Set], compiled: &Compiled) -> Option<(Vec<SourceRecord>, bool)> {
    let sources = &compiled.read.sources;
    let by_name: HashMap<&str, usize> = sources
        .iter()
        .enumerate()
        .map(|(i, (_, f))| (f.name.as_str(), i))
        .collect();
    let mut out: Vec<SourceRecord> = sources
        .iter()
        .map(|(path, f)| SourceRecord {
            path: path.clone(),
            hash: source_hash(&f.text),
            warned: false,
            parts: vec![PartRecord::default(); compiled.parts.len()],
        })
        .collect();
    let mut keep = true;
    for w in &compiled.warnings {
        match w
            .location
            .as_ref()
            .and_then(|l| by_name.get(l.file.name.as_str()))
        {
            Some(i) => out[*i].warned = true,
            None => keep = false,
        }
    }
    for (k, part) in compiled.parts.iter().enumerate() {
        for s in &part.summaries {
            let i = *by_name.get(s.source.as_str())?;
            out[i].parts[k].docs.push(s.clone());
        }
        let set = part
            .set
            .and_then(|i| Some((sets.get(i)?, compiled.outputs.get(i)?)));
        for j in &part.jobs {
            let i = *by_name.get(j.source.as_str())?;
            let mut files = Vec::new();
            if let Some((_, output)) = set {
                let dir = format!("{}/", emit::job_dir(&j.namespace, &j.name));
                let kept = output.manifests.range(dir.clone()..).map(|(r, _)| r);
                let streamed = output.streamed.range(dir.clone()..).map(|(r, _)| r);
                for rel in kept.take_while(|r| r.starts_with(&dir)) {
                    files.push(rel.clone());
                }
                for rel in streamed.take_while(|r| r.starts_with(&dir)) {
                    files.push(rel.clone());
                }
                files.sort();
            }
            out[i].parts[k].jobs.push(JobRecord {
                namespace: j.namespace.clone(),
                name: j.name.clone(),
                images: j.images.clone(),
                files,
            });
        }
        if let Some((set, output)) = set
            && set.build_output.is_some()
        {
            for b in &part.builds {
                let i = *by_name.get(b.source.as_str())?;
                output.builds.get(&b.path)?;
                out[i].parts[k].builds.push(BuildRecord {
                    target: b.target.clone(),
                    source: b.source.clone(),
                    context: b.context.clone(),
                    path: b.path.clone(),
                    image: b.image.clone(),
                });
            }
        }
    }
    Some((out, keep))
}

/// A directory an incremental build writes, and what it should hold.
#[derive(Debug)]
pub struct Dest {
    pub dir: PathBuf,
    /// The set (an index into the build's sets) it belongs to.
    pub set: usize,
    /// Build specs, not manifests.
    pub builds: bool,
    /// Every file, in walk order ([`snapshot::walk_cmp`]) as the snapshot
    /// is: one walk compares them all with the directory.
    want: Vec<(String, Want)>,
    /// The snapshot the last build took of it.
    recorded: Option<Vec<Entry>>,
}

/// An incremental build, compiled and ready to be planned.
#[derive(Debug)]
pub struct Incremental {
    /// For each set, in order: its manifests, then its build specs when it
    /// writes them and there are any, or were.
    pub dests: Vec<Dest>,
    /// Each set's root kustomization entries besides the jobs.
    pub extra: Vec<Vec<String>>,
    /// Findings about the files compiled, which did not stop the build.
    pub warnings: Vec<crate::diagnostic::Diagnostic>,
    pub read: pipeline::Read,
    pub state: State,
    /// Jobs compiled, of all the jobs (of the definitions as written).
    pub compiled: usize,
    pub jobs: usize,
    /// The bytes of the files compiled, for the output limit.
    pub bytes: u64,
    /// Each definition file compiled again or dropped, by its name, and
    /// why, in path order.
    pub dirty: Vec<(String, Dirty)>,
    /// The last build printed warnings, which this one shows again.
    pub warned: bool,
}

/// Why a build stopped before planning.
#[derive(Debug)]
pub enum Stop {
    /// What the record knows cannot make this build, and why: the build
    /// that knows nothing runs instead.
    Recompile(String),
    /// Findings that stop the build.
    Findings(Vec<crate::diagnostic::Diagnostic>),
}

/// Why a definition file's result is not taken from the record, as
/// `build -v` says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dirty {
    /// No record of it: a new file, or one renamed or moved.
    New,
    /// Its bytes are not those the record is of.
    Changed,
    /// The last build warned about it: compiled again, so that the
    /// warnings are shown again.
    Warned,
    /// It is gone: its jobs go with it.
    Removed,
}

impl std::fmt::Display for Dirty {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Dirty::New => "is new",
            Dirty::Changed => "changed",
            Dirty::Warned => "had warnings, which every build shows",
            Dirty::Removed => "was removed",
        })
    }
}

impl Incremental {
    /// Why this build compiles what it does, for `build -v`: which
    /// definition files changed; `None`: none did (the output may have).
    pub fn why(&self) -> Option<String> {
        let changed: Vec<&(String, Dirty)> = self
            .dirty
            .iter()
            .filter(|(_, d)| *d != Dirty::Warned)
            .collect();
        match changed.as_slice() {
            [] if self.warned => {
                Some("the last build had warnings, which every build shows".into())
            }
            [] => None,
            [(name, dirty)] => Some(format!("{name} {dirty}")),
            many => Some(format!("{} definition files changed", many.len())),
        }
    }
}

/// How messages name a definition file.
fn shown(req: &cache::Request, path: &Path) -> String {
    crate::paths::shown_path(req.cwd, path)
}

/// Compiles what `known` does not know and takes the rest from it: the
/// definition files that changed since the recorded build, or, when the
/// record knows nothing (`None`), every file, each job's files handed to
/// `sink` as they are rendered. Then what every directory should hold.
pub fn compile(
    req: &cache::Request,
    known: Option<cache::Known>,
    sets: &[Set],
    sink: Option<&dyn Sink>,
) -> Result<Incremental, Stop> {
    match known {
        Some(known) => compile_changed(req, known, sets).map_err(Stop::Recompile),
        None => compile_all(req, sets, sink),
    }
}

/// [`compile`] with nothing known: every definition file compiled, the
/// rules across files run over the documents and their findings located.
fn compile_all(
    req: &cache::Request,
    sets: &[Set],
    sink: Option<&dyn Sink>,
) -> Result<Incremental, Stop> {
    let mut compiled = pipeline::desired_into(req.project, req.cwd, req.paths, sets, sink)
        .map_err(Stop::Findings)?;
    let internal = |why: String| {
        Stop::Findings(vec![crate::diagnostic::Diagnostic::new(format!(
            "internal error: {why}"
        ))])
    };
    let (fresh, keep) = records(sets, &compiled)
        .ok_or_else(|| internal("a result of no definition file".into()))?;
    let compiled_jobs: usize = fresh.iter().map(|r| r.parts[0].jobs.len()).sum();
    let Wants {
        all,
        dests,
        extras,
        bytes,
        jobs,
        hashes,
    } = wants(req, sets, &mut compiled, None, Vec::new(), fresh).map_err(internal)?;
    Ok(Incremental {
        dests,
        extra: extras,
        warnings: compiled.warnings,
        read: compiled.read,
        state: State {
            sources: keep.then_some(all),
            hashes,
            walked: HashMap::new(),
            unchanged: false,
        },
        compiled: compiled_jobs,
        jobs,
        bytes,
        dirty: Vec::new(),
        warned: false,
    })
}

/// [`compile`] of the definition files that changed since the build
/// `known` records; or why it cannot.
fn compile_changed(
    req: &cache::Request,
    known: cache::Known,
    sets: &[Set],
) -> Result<Incremental, String> {
    let cache::Known {
        records: recorded,
        outputs,
        contexts,
        warned,
        sources,
        hashes,
        library,
    } = known;
    let library = &library;
    let project = req.project;
    let mut old: HashMap<PathBuf, SourceRecord> =
        recorded.into_iter().map(|r| (r.path.clone(), r)).collect();
    let mut kept: Vec<SourceRecord> = Vec::new();
    let mut compile: Sources = Vec::new();
    let mut reasons: Vec<(&Path, String, Dirty)> = Vec::new();
    for ((path, file), hash) in sources.iter().zip(&hashes) {
        let dirty = match old.remove(path) {
            Some(r) if r.hash == *hash && !r.warned => {
                kept.push(r);
                continue;
            }
            Some(r) if r.hash == *hash => Dirty::Warned,
            Some(_) => Dirty::Changed,
            None => Dirty::New,
        };
        reasons.push((path, file.shown.clone(), dirty));
        compile.push((path.clone(), file.clone()));
    }
    let removed: Vec<&PathBuf> = old.keys().collect();
    for path in &removed {
        reasons.push((path, shown(req, path), Dirty::Removed));
    }
    reasons.sort_by(|a, b| a.0.cmp(b.0));
    let dirty: Vec<_> = reasons.into_iter().map(|(_, name, d)| (name, d)).collect();
    let mut compiled = pipeline::desired_some(project, library, compile, sets)
        .map_err(|_| "a definition that changed has findings; the build will report them")?;
    let fresh = match records(sets, &compiled) {
        Some((fresh, true)) => fresh,
        _ => {
            return Err(
                "a warning is about no definition file; only a full build shows it again".into(),
            );
        }
    };
    let parts = compiled.parts.len();
    if kept.iter().any(|r| r.parts.len() != parts) {
        return Err("the record is of other sets".into());
    }
    let compiled_jobs: usize = fresh.iter().map(|r| r.parts[0].jobs.len()).sum();
    let Wants {
        all,
        dests,
        extras,
        bytes,
        jobs,
        hashes,
    } = wants(req, sets, &mut compiled, Some(outputs), kept, fresh)?;
    let unchanged = dirty.is_empty() && !warned;
    let mut contexts: Vec<_> = contexts;
    contexts.append(&mut compiled.read.contexts);
    contexts.sort();
    contexts.dedup();
    Ok(Incremental {
        dests,
        extra: extras,
        warnings: compiled.warnings,
        read: pipeline::Read {
            sources,
            library: library.digest().to_owned(),
            contexts,
        },
        state: State {
            sources: Some(all),
            hashes,
            walked: HashMap::new(),
            unchanged,
        },
        compiled: compiled_jobs,
        jobs,
        bytes,
        dirty,
        warned,
    })
}

/// What a build's directories should hold.
struct Wants {
    /// Every definition file's record, in path order.
    all: Vec<SourceRecord>,
    dests: Vec<Dest>,
    /// Each set's root kustomization entries besides the jobs.
    extras: Vec<Vec<String>>,
    /// The bytes compiled.
    bytes: u64,
    /// The jobs of the definitions as written.
    jobs: usize,
    /// The hash of each file taken as it was rendered, by directory.
    hashes: HashMap<PathBuf, HashMap<String, String>>,
}

/// The index in `compiled.parts` of set `set`'s part.
fn part_of(compiled: &Compiled, set: usize) -> Result<usize, String> {
    compiled
        .parts
        .iter()
        .position(|p| p.set == Some(set))
        .ok_or_else(|| "internal: a set without its part".to_owned())
}

/// The root kustomization's entries of `set` besides its jobs, whose
/// namespaces are `namespaces`.
fn extra_of(
    project: &crate::project::Project,
    set: &Set,
    namespaces: &BTreeSet<&str>,
) -> Result<Vec<String>, String> {
    let build_output = set.build_output.unwrap_or(&project.build_output);
    let findings = || "the project's resources have findings; the build will report them".into();
    let listed =
        pipeline::extra_resources_in(project, set.output, build_output, set.resources, namespaces)
            .map_err(|_| findings())?;
    if listed.warnings.is_empty() {
        Ok(listed.entries)
    } else {
        Err(findings())
    }
}

/// The snapshot the last build took of `dir`, taken out of `outputs`.
fn take_recorded(outputs: &mut [(PathBuf, Option<Vec<Entry>>)], dir: &Path) -> Option<Vec<Entry>> {
    outputs
        .iter_mut()
        .find(|(d, _)| d == dir)
        .and_then(|(_, e)| e.take())
}

/// What every directory should hold: every file of every job, those of the
/// unchanged jobs known from their records, and the files every job shares
/// rendered from them.
fn wants(
    req: &cache::Request,
    sets: &[Set],
    compiled: &mut Compiled,
    mut outputs: Option<Vec<(PathBuf, Option<Vec<Entry>>)>>,
    kept: Vec<SourceRecord>,
    fresh: Vec<SourceRecord>,
) -> Result<Wants, String> {
    let project = req.project;
    // Every file compiled: the pipeline ran the rules across files over
    // the documents, and checked the output's size.
    let everything = outputs.is_none();
    let dirty_paths: HashSet<PathBuf> = fresh.iter().map(|r| r.path.clone()).collect();
    let mut all: Vec<SourceRecord> = kept.into_iter().chain(fresh).collect();
    all.sort_by(|a, b| a.path.cmp(&b.path));
    let jobs: usize = all.iter().map(|r| r.parts[0].jobs.len()).sum();

    if !everything {
        across_files(req, sets, compiled, &all)?;
    }

    // Each set's directories, from the records and what was compiled.
    let mut dests = Vec::new();
    let mut extras = Vec::new();
    let mut recorded = |dir: &Path| {
        outputs
            .as_mut()
            .and_then(|outputs| take_recorded(outputs, dir))
    };
    let mut total = 0u64;
    let mut hashes: HashMap<PathBuf, HashMap<String, String>> = HashMap::new();
    for (i, set) in sets.iter().enumerate() {
        let k = part_of(compiled, i)?;
        let output = &mut compiled.outputs[i];
        // The files every job shares are rendered below, from every job.
        output.manifests.remove(emit::KUSTOMIZATION);
        output.builds.remove(BAKE_FILE);
        let taken = hashes.entry(set.output.to_path_buf()).or_default();
        let mut want = Vec::new();
        let mut dirs = Vec::new();
        let mut namespaces = BTreeSet::new();
        for r in &all {
            let fresh = dirty_paths.contains(&r.path);
            for j in &r.parts[k].jobs {
                // From the record, which only this user can write, but which
                // lands in the root kustomization: held to trainc's layout.
                if !plan::layout_dir(&j.namespace) || !plan::layout_dir(&j.name) {
                    return Err("the record is damaged".into());
                }
                dirs.push(emit::job_dir(&j.namespace, &j.name));
                namespaces.insert(j.namespace.as_str());
                for rel in &j.files {
                    let w = if !fresh {
                        Want::Known
                    } else if let Some(bytes) = output.manifests.remove(rel) {
                        total += bytes.len() as u64;
                        Want::Bytes(bytes)
                    } else {
                        let t = output
                            .streamed
                            .remove(rel)
                            .ok_or("internal: a file went missing")?;
                        total += t.len;
                        if let Some(hash) = &t.hash {
                            taken.insert(rel.clone(), hash.clone());
                        }
                        Want::Taken(t.hash)
                    };
                    want.push((rel.clone(), w));
                }
            }
        }
        if !output.manifests.is_empty() || !output.streamed.is_empty() {
            return Err("internal: a file of no job".into());
        }
        let extra = if everything {
            output.extra.clone()
        } else {
            extra_of(project, set, &namespaces)?
        };
        let ordered = want.iter().any(|(rel, _)| emit::applied_first(rel));
        let root = emit::assemble(Vec::new(), &dirs, &extra, ordered)?;
        extras.push(extra);
        for (rel, bytes) in root {
            total += bytes.len() as u64;
            want.push((rel, Want::Bytes(bytes)));
        }
        dests.push(Dest {
            dir: set.output.to_path_buf(),
            set: i,
            builds: false,
            want: in_walk_order(want)?,
            recorded: recorded(set.output),
        });
        let Some(dir) = set.build_output else {
            continue;
        };
        let mut want = Vec::new();
        let mut builds = Vec::new();
        for r in &all {
            let fresh = dirty_paths.contains(&r.path);
            for b in &r.parts[k].builds {
                let w = if fresh {
                    let bytes = output
                        .builds
                        .remove(&b.path)
                        .ok_or("internal: a Dockerfile went missing")?;
                    total += bytes.len() as u64;
                    Want::Bytes(bytes)
                } else {
                    Want::Known
                };
                want.push((b.path.clone(), w));
                builds.push(ImageBuild {
                    target: b.target.clone(),
                    source: b.source.clone(),
                    context: b.context.clone(),
                    path: b.path.clone(),
                    image: b.image.clone(),
                    dockerfile: Vec::new(),
                });
            }
        }
        if !output.builds.is_empty() {
            return Err("internal: a Dockerfile of no job".into());
        }
        if !builds.is_empty() {
            builds.sort_by(|a, b| a.target.cmp(&b.target));
            let bake = crate::image::bake_file(&builds, &project.root, dir);
            total += bake.len() as u64;
            want.push((BAKE_FILE.to_owned(), Want::Bytes(bake)));
        }
        if !want.is_empty() || dir.is_dir() {
            dests.push(Dest {
                dir: dir.to_path_buf(),
                set: i,
                builds: true,
                want: in_walk_order(want)?,
                recorded: recorded(dir),
            });
        }
    }
    // What is taken from the record is counted as it is planned.
    crate::limits::check_output(total, 0, true, crate::limits::MAX_OUTPUT_BYTES)
        .map_err(|_| "the output passes the limit; the build will report it")?;
    Ok(Wants {
        all,
        dests,
        extras,
        bytes: total,
        jobs,
        hashes,
    })
}

/// The files of a directory in walk order; two jobs never share one.
fn in_walk_order(mut want: Vec<(String, Want)>) -> Result<Vec<(String, Want)>, String> {
    want.sort_by(|a, b| snapshot::walk_cmp(&a.0, &b.0));
    if want.windows(2).any(|w| w[0].0 == w[1].0) {
        return Err("internal: two jobs write the same file".into());
    }
    Ok(want)
}

/// The rules across definition files ([`crate::validate::across::check`])
/// and across outputs ([`pipeline::across_sets`]), the functions the full
/// build runs, over every file's records: any finding ends the incremental
/// build, and the full build reports it.
fn across_files(
    req: &cache::Request,
    sets: &[Set],
    compiled: &Compiled,
    all: &[SourceRecord],
) -> Result<(), String> {
    use crate::validate::across;
    let project = req.project;
    let docs = |k: usize| all.iter().flat_map(move |r| &r.parts[k].docs);
    for k in 0..compiled.parts.len() {
        if docs(k).next().is_none() {
            return Err("there are no jobs; the build will report it".into());
        }
        let summaries: Vec<across::Doc> = docs(k).map(Summary::across).collect();
        if let Some(found) = across::check(&summaries, true).first() {
            return Err(format!("{}; the build will report it", found.message));
        }
    }
    // Each variant set's `job:` names, of the definitions as written.
    let complete = pipeline::complete(project, req.cwd, req.paths);
    let names: BTreeSet<&str> = docs(0).map(|d| d.name.as_str()).collect();
    for v in sets.iter().filter_map(|s| s.variant) {
        if complete && crate::variant::unknown_jobs(v, &names).next().is_some() {
            return Err(format!(
                "a patch of variant `{}` names no definition; the build will report it",
                v.name
            ));
        }
    }
    let images = |k: usize| -> BTreeSet<String> {
        all.iter()
            .flat_map(|r| &r.parts[k].jobs)
            .flat_map(|j| j.images.iter().cloned())
            .collect()
    };
    let parts = (0..sets.len())
        .map(|i| part_of(compiled, i))
        .collect::<Result<Vec<usize>, String>>()?;
    let set_images: Vec<BTreeSet<String>> = parts.iter().map(|&k| images(k)).collect();
    let facts: Vec<pipeline::SetFacts> = parts
        .iter()
        .zip(&set_images)
        .map(|(&k, images)| pipeline::SetFacts {
            docs: docs(k).collect(),
            images,
        })
        .collect();
    if let Some(found) = pipeline::across_sets(project, sets, &images(0), &facts, true).first() {
        return Err(format!("{}; the build will report it", found.message));
    }
    Ok(())
}

/// A directory planned by [`plan()`].
#[derive(Debug)]
pub struct Planned {
    /// Of the files not taken as they were rendered (their stager planned
    /// those).
    pub plan: Plan,
    /// The YAML files the unlisted-files check names, in walk order.
    pub unlisted: Vec<String>,
    /// The bytes of the files taken from the record.
    pub known: u64,
    /// What the plan refuses.
    pub refused: Vec<crate::diagnostic::Diagnostic>,
}

/// The plan of `dest` (`shown` as messages name it) by the walk every
/// build plans with ([`crate::plan::merge`]), which reads no file of an
/// unchanged job whose signature is as recorded, and leaves alone the
/// files `staged` as they were rendered. Runs the unlisted-files check
/// when `unlisted` gives the root kustomization's other entries. With
/// `keep`, leaves in `state` what the walk saw, from which the record of
/// the build is made without walking again.
pub fn plan(
    dest: Dest,
    shown: &str,
    unlisted: Option<&[String]>,
    staged: HashSet<String>,
    (state, keep): (&mut State, bool),
) -> Result<Planned, merge::Stopped> {
    let check = unlisted.map(|entries| crate::resources::UnlistedCheck {
        output: &dest.dir,
        entries,
    });
    let merged = merge::plan(merge::Wanted {
        root: &dest.dir,
        shown,
        want: dest.want,
        recorded: dest.recorded,
        unlisted: check.as_ref().map(|c| c as &dyn merge::Unlisted),
        staged,
    })?;
    state.unchanged &= merged.as_recorded;
    if keep {
        state.walked.insert(dest.dir.clone(), merged.entries);
    }
    Ok(Planned {
        plan: Plan {
            root: dest.dir,
            changes: merged.changes,
            kept: merged.kept,
        },
        unlisted: merged.unlisted,
        known: merged.known,
        refused: merged.refused,
    })
}
