//! Incremental builds: what each definition file made in the last build,
//! so that a build after an edit compiles only the files that changed.
//!
//! A record keeps, per definition file, the hash of its bytes and what it
//! made for each set the build resolved (the definitions as written, then
//! each variant's): its documents as the rules across files see them
//! ([`pipeline::Summary`]), its jobs with the hash and size of every file
//! they wrote, and the images its build specs build. Everything else a
//! job's files depend on (trainc itself, the project file, the library,
//! the output directories, the paths asked for) is the record's global key
//! ([`super::Request::global_key`]); the build contexts are checked against
//! their prints as the no-op path checks them.
//!
//! A later build reads and hashes every definition file, compiles only those
//! whose bytes changed (or that are new, or had warnings, which must be
//! shown again), and takes the other files' output from the record: their
//! files are vouched for by the output directory's snapshot (`lstat`
//! signatures, as the no-op path does).
//!
//! Most edits leave every job where it was (same names, images and build
//! specs): such a build *patches* ([`Wanted::Patch`]). Each directory is
//! checked against its snapshot by the walk a no-op build makes, and only
//! the compiled jobs' files are planned; the unchanged files' records stay
//! undecoded and are written back as they were read, and the rules across
//! files read their documents in place. Its cost follows the jobs edited,
//! not the size of the project. Any other change is *walked*
//! ([`Wanted::Walk`]): the files shared by every job (the root
//! `kustomization.yaml`, `docker-bake.hcl`) are rendered again from the
//! records, every file is planned, and the rules across files (duplicate
//! jobs, generated names two jobs share, the output budget, variants'
//! `job:` names and images, the root kustomization's resources, the output
//! limit) are checked over the records and the new summaries. A patch that
//! finds a directory not as recorded is walked instead. Any finding, any
//! doubt, and any file of an unchanged job that is not as recorded ends the
//! attempt: the full build then runs, and reports or rewrites as it always
//! does.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};

use super::codec::{Body, FilePiece, PartSum, Piece};
use super::key::source_hash;
use super::snapshot::{self, Entry, Kind, Sig};
use crate::emit;
use crate::image::{BAKE_FILE, ImageBuild};
use crate::load;
use crate::pipeline::{self, Compiled, Set, Sources, Summary};
use crate::plan::{self, Change, Found, Op, Plan};

/// FxHash, as rustc uses it: the maps of an incremental build hold a few
/// thousand short keys of the project's own, where SipHash was a visible
/// part of an edit's cost (hash flooding is no concern for a local build).
#[derive(Default, Clone, Copy)]
struct Fx(u64);

impl Fx {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl std::hash::Hasher for Fx {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(c);
            self.add(u64::from_le_bytes(word));
        }
        for &b in chunks.remainder() {
            self.add(u64::from(b));
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type FxMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<Fx>>;
type FxSet<K> = HashSet<K, std::hash::BuildHasherDefault<Fx>>;

/// What one definition file made in the last build.
#[derive(Debug, Clone)]
pub struct SourceRecord {
    pub path: PathBuf,
    /// [`source_hash`] of its bytes.
    pub hash: String,
    /// Findings that did not stop the build were about it: it is compiled
    /// by every build, so that they are shown every time.
    pub warned: bool,
    /// One per set resolved ([`Compiled::parts`]); empty while `body`
    /// holds them undecoded.
    pub parts: Vec<PartRecord>,
    /// The parts as a record holds them ([`super::codec::decode_parts`]): decoded
    /// only for the files that changed, written back as they were read.
    pub body: Option<super::codec::Body>,
    /// Of a record read: its place in the record's list. A piece of the
    /// record whose records are all still at their places, with their
    /// bodies, is named again and not written.
    pub at: Option<usize>,
}

impl SourceRecord {
    /// The stand-in for the record at place `at` of a piece not read: it
    /// names the piece again, and holds nothing else ([`Body::Unread`]).
    pub fn stand_in(at: usize) -> Self {
        Self {
            path: PathBuf::new(),
            hash: String::new(),
            warned: false,
            parts: Vec::new(),
            body: Some(Body::Unread),
            at: Some(at),
        }
    }
}

/// What a definition file made for one set.
#[derive(Debug, Clone, Default)]
pub struct PartRecord {
    pub docs: Vec<Summary>,
    pub jobs: Vec<JobRecord>,
    /// The images its jobs build, as the bake file names them; only where
    /// the set writes build specs.
    pub builds: Vec<BuildRecord>,
}

#[derive(Debug, Clone)]
pub struct JobRecord {
    pub namespace: String,
    pub name: String,
    /// The images the build specs build for it.
    pub images: Vec<String>,
    /// Its files in the set's output directory. Their hashes and sizes are
    /// the snapshot's: a build records the hash of what it meant to write.
    pub files: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct BuildRecord {
    pub target: String,
    pub source: String,
    pub context: String,
    /// The Dockerfile, in the build directory (its hash and size are the
    /// snapshot's).
    pub path: String,
    pub image: String,
}

/// The per-file part of a record.
#[derive(Debug, Clone)]
pub struct Files {
    /// [`super::Request::global_key`] of the build.
    pub global: String,
    /// In path order.
    pub sources: Vec<SourceRecord>,
    /// The pieces that held `sources` when read; none in a build's own.
    pub pieces: Vec<FilePiece>,
    /// One per set.
    pub sums: Vec<PartSum>,
}

/// What a build leaves for the next: the per-file records (`None` when a
/// warning was about no definition file, so that only a full build can
/// show it again), and the content hash of every file it meant each
/// directory to hold.
#[derive(Debug, Default)]
pub struct State {
    pub(super) sources: Option<Vec<SourceRecord>>,
    pub(super) hashes: HashMap<PathBuf, HashMap<String, String>>,
    /// Of an incremental build: each directory as [`plan()`] walked it
    /// (`None`: not there), before anything was written; the record is
    /// made from it and the plan, without another walk.
    pub(super) walked: HashMap<PathBuf, Option<Vec<Entry>>>,
    /// The key of the inputs, when it is known already.
    pub(super) key: Option<String>,
    /// Of an incremental build that patches: the record it read, for the
    /// directories found as that record says ([`super::codec::Reuse`]).
    pub(super) base: Option<Base>,
    /// Of an incremental build: the pieces that held the definition files'
    /// records it read ([`Files::pieces`]).
    pub(super) pieces: Vec<FilePiece>,
    /// What the rules across files need of each set ([`Files::sums`]).
    pub(super) sums: Vec<PartSum>,
}

/// Of a record read, each directory's snapshot as read ([`AsRead`]), and
/// which entries of each have changed since it was read.
#[derive(Debug, Default)]
pub(super) struct Base {
    pub dirs: HashMap<PathBuf, AsRead>,
    pub moved: HashMap<PathBuf, Vec<usize>>,
}

/// What a record read says of one directory's snapshot beside its entries:
/// all of it gone when a walk plans the directory anew.
#[derive(Debug, Default)]
pub(super) struct AsRead {
    /// The pieces that hold it ([`super::codec::Reuse`]).
    pub pieces: Option<Vec<super::codec::Piece>>,
    /// Whether it holds no racy entry ([`snapshot::after`]).
    pub calm: bool,
    /// Its census ([`snapshot::Census`]), adjusted when entries are
    /// hashed again.
    pub census: Option<snapshot::Census>,
}

impl State {
    /// The state of a build that compiled every definition file into
    /// `compiled`, for `sets`. Hashes every file once; the record of the
    /// build needs the hashes anyway.
    pub fn of(sets: &[Set], compiled: &Compiled) -> Self {
        let mut hashes = HashMap::new();
        for (set, out) in sets.iter().zip(&compiled.outputs) {
            let mut manifests = hash_tree(&out.manifests);
            // Hashed as they were staged.
            for (rel, taken) in &out.streamed {
                if let Some(hash) = &taken.hash {
                    manifests.insert(rel.clone(), hash.clone());
                }
            }
            hashes.insert(set.output.to_path_buf(), manifests);
            if let Some(b) = set.build_output {
                hashes.insert(b.to_path_buf(), hash_tree(&out.builds));
            }
        }
        let sources = records(sets, compiled);
        let sums = sources
            .as_deref()
            .map(|s| sums_of(s, compiled.parts.len()))
            .unwrap_or_default();
        Self {
            sources,
            hashes,
            walked: HashMap::new(),
            key: None,
            base: None,
            pieces: Vec::new(),
            sums,
        }
    }
}

/// What the rules across files need of each of `parts` sets, over the
/// decoded `records`.
fn sums_of(records: &[SourceRecord], parts: usize) -> Vec<PartSum> {
    (0..parts)
        .map(|k| {
            let docs = records
                .iter()
                .filter_map(|r| r.parts.get(k))
                .flat_map(|p| &p.docs);
            let mut sum = PartSum::default();
            let mut namespaces = BTreeSet::new();
            for d in docs {
                sum.docs += 1;
                sum.budget = sum.budget.saturating_add(d.floor);
                namespaces.insert(d.namespace.as_str());
            }
            sum.namespaces = namespaces.into_iter().map(str::to_owned).collect();
            sum
        })
        .collect()
}

fn hash_tree(tree: &emit::Tree) -> HashMap<String, String> {
    let all: Vec<(&String, &Vec<u8>)> = tree.iter().collect();
    crate::par::map(&all, |(rel, bytes)| {
        ((*rel).clone(), snapshot::content_hash(bytes))
    })
    .into_iter()
    .collect()
}

/// The records of the definition files `compiled` read, from what they
/// made. `None`
/// when a warning is about no definition file.
fn records(sets: &[Set], compiled: &Compiled) -> Option<Vec<SourceRecord>> {
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
            body: None,
            at: None,
        })
        .collect();
    for w in &compiled.warnings {
        let i = w
            .location
            .as_ref()
            .and_then(|l| by_name.get(l.file.name.as_str()))?;
        out[*i].warned = true;
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
    Some(out)
}

/// A file a directory should hold.
#[derive(Debug)]
enum Want {
    /// As the last build wrote it: the hash its snapshot records.
    Known,
    /// Compiled by this build.
    Bytes(Vec<u8>),
}

/// A directory an incremental build writes, and what it should hold.
#[derive(Debug)]
pub struct Dest {
    pub dir: PathBuf,
    /// The set (an index into the build's sets) it belongs to.
    pub set: usize,
    /// Build specs, not manifests.
    pub builds: bool,
    want: Wanted,
    /// The snapshot the last build took of it.
    recorded: Option<Vec<Entry>>,
}

/// What a directory should hold, and how [`plan()`] finds out.
#[derive(Debug)]
enum Wanted {
    /// Every file, in walk order ([`snapshot::walk_cmp`]) as the snapshot
    /// is: one walk compares them all with the directory.
    Walk(Vec<(String, Want)>),
    /// Only the files of the jobs that changed, which left every job where
    /// it was (see [`patched`]): the directory is checked against its
    /// snapshot, the walk a no-op build makes, and only these files are
    /// planned; every other file is as the last build left it.
    Patch {
        /// The files of the jobs compiled, with their bytes.
        write: Vec<(String, Vec<u8>)>,
        /// The files the same jobs made in the last build.
        was: Vec<String>,
    },
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
    bytes: u64,
    /// Which definition files changed; `None`: none did (the output did).
    pub why: Option<String>,
    /// Whether its directories are patched ([`Wanted::Patch`]): planning
    /// them fails when one is not as its snapshot says, and the build is
    /// then tried again without patching ([`super::Cache::incremental`]).
    pub patched: bool,
}

/// How messages name a definition file.
fn shown(req: &super::Request, path: &Path) -> String {
    load::shown_path(req.cwd, path)
}

/// Compiles the definition files that changed since the build recorded in
/// `files` and takes the others from it; or says why it cannot. `record`
/// holds the last build's contexts and snapshots. `patch`: the output may
/// be patched ([`patched`]) when the edit leaves every job where it was;
/// false when the output is known to differ from its snapshot.
pub(super) fn compile(
    req: &super::Request,
    record: super::Record,
    files: super::codec::FilesRef,
    fetch: &mut dyn FnMut(&Piece) -> Option<Vec<u8>>,
    inputs: super::Inputs,
    sets: &[Set],
    patch: bool,
) -> Result<Incremental, String> {
    let super::Inputs {
        sources,
        hashes,
        library,
        key,
    } = inputs;
    let library = &library;
    let project = req.project;
    let global = req
        .global_key(library.digest())
        .ok_or("the trainc executable cannot be inspected")?;
    if files.global != global {
        return Err("the project, library or trainc changed".into());
    }
    // The records in the record's order, found by a hash of their path's
    // bytes (hashing a `Path` walks its components: a visible part of an
    // edit at 5,000 files). The record's checksum, not `Fx`: paths that
    // differ in one digit collide under `Fx`, and they cannot under the
    // checksum; it is also a fifth of SipHash's cost. A path found under
    // another's hash is new, and that record removed: the build is walked,
    // or runs in full.
    let by_bytes = |p: &Path| super::codec::checksum(p.as_os_str().as_encoded_bytes());
    let damaged = |_| "the record is damaged";
    // Where each piece's records start in the record's list.
    let mut starts = Vec::with_capacity(files.pieces.len());
    let mut total = 0usize;
    for p in &files.pieces {
        starts.push(total);
        total = total
            .checked_add(p.piece.items)
            .ok_or("the record is damaged")?;
    }
    // A piece is read only when the files at its places are not the ones
    // its records are of, byte for byte: when none of them changed, its
    // records are neither read nor written again. A 64-bit digest, as
    // the record's checksums are: of SHA-256 hashes, which no edit
    // steers.
    let in_place = total == sources.len();
    let mut unread = Vec::new();
    let mut skip = vec![false; if in_place { total } else { 0 }];
    let mut old: Vec<Option<SourceRecord>> = Vec::new();
    for (k, p) in files.pieces.iter().enumerate() {
        let places = starts[k]..starts[k] + p.piece.items;
        let same = in_place && {
            let found = sources[places.clone()]
                .iter()
                .zip(&hashes[places.clone()])
                .map(|((path, _), hash)| (path.as_path(), hash.as_str(), false));
            super::codec::digest(found) == p.digest
        };
        if same {
            skip[places].fill(true);
            unread.push(k);
        } else {
            let read = super::codec::decode_piece(p, starts[k], fetch).map_err(damaged)?;
            old.extend(read.into_iter().map(Some));
        }
    }
    // The records of the pieces not read, read after all: a build that
    // walks, or an edit whose jobs claim other objects, looks at every one.
    let read_unread = |fetch: &mut dyn FnMut(&Piece) -> Option<Vec<u8>>| {
        let mut out = Vec::new();
        for &k in &unread {
            let p = &files.pieces[k];
            out.extend(super::codec::decode_piece(p, starts[k], fetch).map_err(damaged)?);
        }
        Ok::<_, String>(out)
    };
    let mut at: FxMap<u64, usize> = FxMap::default();
    at.reserve(old.len());
    for (i, r) in old.iter().enumerate() {
        if let Some(r) = r
            && at.insert(by_bytes(&r.path), i).is_some()
        {
            return Err("two records' paths hash alike".into());
        }
    }
    let mut kept: Vec<SourceRecord> = Vec::new();
    // The records of the files compiled again.
    let mut was: Vec<SourceRecord> = Vec::new();
    // Where each of `kept` and `was` stood in the record: a patched edit
    // writes its record in the same order.
    let (mut kept_at, mut was_at) = (Vec::new(), Vec::new());
    let mut dirty: Sources = Vec::new();
    let mut changed: Vec<String> = Vec::new();
    let mut added = false;
    for (n, ((path, file), hash)) in sources.iter().zip(&hashes).enumerate() {
        if skip.get(n) == Some(&true) {
            continue;
        }
        let found = at.get(&by_bytes(path)).and_then(|&i| {
            let r = old.get_mut(i)?.take_if(|r| r.path == *path)?;
            Some((r.at?, r))
        });
        match found {
            Some((i, r)) if r.hash == *hash && !r.warned => {
                kept.push(r);
                kept_at.push(i);
            }
            Some((i, r)) => {
                if r.hash != *hash {
                    changed.push(format!("{} changed", file.shown));
                }
                was.push(decoded(r)?);
                was_at.push(i);
                dirty.push((path.clone(), file.clone()));
            }
            None => {
                changed.push(format!("{} is new", file.shown));
                added = true;
                dirty.push((path.clone(), file.clone()));
            }
        }
    }
    let mut removed: Vec<&PathBuf> = old.iter().flatten().map(|r| &r.path).collect();
    removed.sort();
    for path in &removed {
        changed.push(format!("{} was removed", shown(req, path)));
    }
    let why = match changed.as_slice() {
        [] => None,
        [one] => Some(one.clone()),
        many => Some(format!("{} definition files changed", many.len())),
    };
    let mut compiled = pipeline::desired_some(project, library, dirty, sets)
        .map_err(|_| "a definition that changed has findings; the build will report them")?;
    let fresh = records(sets, &compiled)
        .ok_or("a warning is about no definition file; only a full build shows it again")?;
    let parts = compiled.parts.len();
    let parts_of = |r: &SourceRecord| match &r.body {
        Some(body) => super::codec::count_parts(body).ok(),
        None => Some(r.parts.len()),
    };
    if files.sums.len() != parts || kept.iter().any(|r| parts_of(r) != Some(parts)) {
        return Err("the record is of other sets".into());
    }
    let compiled_jobs: usize = fresh.iter().map(|r| r.parts[0].jobs.len()).sum();
    let same_places = patch
        && !added
        && removed.is_empty()
        && fresh.len() == was.len()
        && fresh.iter().zip(&was).all(|(f, w)| same_jobs(f, w));
    let base = same_places.then(|| {
        let mut pieces = record.pieces.into_iter();
        let mut calm = record.calm.iter();
        let mut census = record.census.iter();
        let dirs = record.outputs.iter().map(|(dir, _)| {
            let read = AsRead {
                pieces: pieces.next().flatten(),
                calm: calm.next().copied().unwrap_or(false),
                census: census.next().cloned().flatten(),
            };
            (dir.clone(), read)
        });
        Base {
            dirs: dirs.collect(),
            moved: HashMap::new(),
        }
    });
    let (all, dests, extras, bytes, jobs, sums) = if same_places {
        let (dests, extras, bytes, jobs, sums) = patched(
            req,
            sets,
            &mut compiled,
            record.outputs,
            Across {
                kept: &kept,
                fresh: &fresh,
                was: &was,
                sums: &files.sums,
                unread: &mut || read_unread(fetch),
            },
        )?;
        let order = Order {
            kept: kept_at,
            fresh: was_at,
            unread: unread
                .iter()
                .map(|&k| starts[k]..starts[k] + files.pieces[k].piece.items)
                .collect(),
        };
        (order.apply(kept, fresh)?, dests, extras, bytes, jobs, sums)
    } else {
        let mut kept = kept;
        kept.extend(read_unread(fetch)?);
        let kept = kept
            .into_iter()
            .map(decoded)
            .collect::<Result<Vec<_>, String>>()?;
        let (all, dests, extras, bytes, jobs) =
            walked(req, sets, &mut compiled, record.outputs, kept, fresh)?;
        let sums = sums_of(&all, parts);
        (all, dests, extras, bytes, jobs, sums)
    };
    let mut contexts: Vec<_> = record.contexts;
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
            hashes: HashMap::new(),
            walked: HashMap::new(),
            key: Some(key),
            base,
            pieces: files.pieces,
            sums,
        },
        compiled: compiled_jobs,
        jobs,
        bytes,
        why,
        patched: same_places,
    })
}

/// `r` with its parts decoded.
fn decoded(mut r: SourceRecord) -> Result<SourceRecord, String> {
    if let Some(body) = &r.body {
        r.parts = super::codec::decode_parts(body).map_err(|_| "the record is damaged")?;
    }
    Ok(r)
}

/// Whether a file compiled again made the same jobs, with the same images
/// and build specs, for every set as it did before: then only those jobs'
/// files can change, and the root kustomization and the bake file cannot.
fn same_jobs(fresh: &SourceRecord, was: &SourceRecord) -> bool {
    fresh.path == was.path
        && fresh.parts.len() == was.parts.len()
        && fresh.parts.iter().zip(&was.parts).all(|(f, w)| {
            f.jobs.len() == w.jobs.len()
                && f.jobs.iter().zip(&w.jobs).all(|(a, b)| {
                    a.namespace == b.namespace && a.name == b.name && a.images == b.images
                })
                && f.builds.len() == w.builds.len()
                && f.builds.iter().zip(&w.builds).all(|(a, b)| {
                    (&a.target, &a.source, &a.context, &a.path, &a.image)
                        == (&b.target, &b.source, &b.context, &b.path, &b.image)
                })
        })
}

/// What a build's directories should hold: every file's record, the
/// directories, each set's root kustomization entries besides the jobs,
/// the bytes compiled, and the number of jobs.
type Wants = (Vec<SourceRecord>, Vec<Dest>, Vec<Vec<String>>, u64, usize);

/// [`Wants`] but the records, which a patched edit orders apart ([`Order`]),
/// and what the rules across files need of each set.
type Patched = (Vec<Dest>, Vec<Vec<String>>, u64, usize, Vec<PartSum>);

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
    project: &crate::load::project::Project,
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

/// An edit that leaves every job where it was (see [`same_jobs`]): each
/// directory is to hold what it holds, but the files of the jobs compiled.
/// Nothing per file of the other jobs is decoded, compared or planned: the
/// rules across files read their documents from the record undecoded,
/// and [`plan()`] checks each directory against its snapshot before it
/// trusts it.
fn patched(
    req: &super::Request,
    sets: &[Set],
    compiled: &mut Compiled,
    mut outputs: Vec<(PathBuf, Option<Vec<Entry>>)>,
    across: Across,
) -> Result<Patched, String> {
    let project = req.project;
    let (fresh, was) = (across.fresh, across.was);
    let (namespaces, jobs, sums) = across_patched(compiled, across)?;
    let mut recorded = |dir: &Path| take_recorded(&mut outputs, dir);
    let mut dests = Vec::new();
    let mut extras = Vec::new();
    let mut bytes = 0u64;
    for (i, set) in sets.iter().enumerate() {
        let k = part_of(compiled, i)?;
        let output = &mut compiled.outputs[i];
        let mut write = Vec::new();
        for j in fresh.iter().flat_map(|r| &r.parts[k].jobs) {
            for rel in &j.files {
                let b = output
                    .manifests
                    .remove(rel)
                    .ok_or("internal: a file went missing")?;
                bytes += b.len() as u64;
                write.push((rel.clone(), b));
            }
        }
        if !output.manifests.is_empty() {
            return Err("internal: a file of no job".into());
        }
        let was_files = was
            .iter()
            .flat_map(|r| &r.parts[k].jobs)
            .flat_map(|j| j.files.iter().cloned())
            .collect();
        let namespaces = namespaces[k].iter().map(String::as_str).collect();
        extras.push(extra_of(project, set, &namespaces)?);
        dests.push(Dest {
            dir: set.output.to_path_buf(),
            set: i,
            builds: false,
            want: Wanted::Patch {
                write,
                was: was_files,
            },
            recorded: recorded(set.output),
        });
        let Some(dir) = set.build_output else {
            continue;
        };
        let mut write = Vec::new();
        for b in fresh.iter().flat_map(|r| &r.parts[k].builds) {
            let d = output
                .builds
                .remove(&b.path)
                .ok_or("internal: a Dockerfile went missing")?;
            bytes += d.len() as u64;
            write.push((b.path.clone(), d));
        }
        if !output.builds.is_empty() {
            return Err("internal: a Dockerfile of no job".into());
        }
        let was_files: Vec<String> = was
            .iter()
            .flat_map(|r| &r.parts[k].builds)
            .map(|b| b.path.clone())
            .collect();
        // A directory the last build left is checked even when the edited
        // jobs write nothing there: its files may have gone since.
        let rec = recorded(dir);
        if !write.is_empty() || rec.is_some() || dir.is_dir() {
            dests.push(Dest {
                dir: dir.to_path_buf(),
                set: i,
                builds: true,
                want: Wanted::Patch {
                    write,
                    was: was_files,
                },
                recorded: rec,
            });
        }
    }
    Ok((dests, extras, bytes, jobs, sums))
}

/// Where the records of a patched edit go: its definition files are the
/// record's, so each record is put back where it was read (sorting 5,000
/// records by path again was a visible part of an edit's cost), and the
/// places of the pieces not read hold stand-ins that name them again.
struct Order {
    /// The record's index of each kept record, and of each compiled one.
    kept: Vec<usize>,
    fresh: Vec<usize>,
    /// The places of the pieces not read.
    unread: Vec<std::ops::Range<usize>>,
}

impl Order {
    /// Every record in its place. One pass over places that start as
    /// stand-ins: building them one by one, then moving every record into
    /// its slot, was most of what an edit of one file in 5,000 paid for
    /// the files it did not change.
    fn apply(
        self,
        kept: Vec<SourceRecord>,
        fresh: Vec<SourceRecord>,
    ) -> Result<Vec<SourceRecord>, String> {
        let stand_ins: usize = self.unread.iter().map(ExactSizeIterator::len).sum();
        let len = kept.len() + fresh.len() + stand_ins;
        let mut all: Vec<SourceRecord> = (0..len).map(SourceRecord::stand_in).collect();
        let mut placed = vec![false; len];
        let mut place = |i: usize| match placed.get_mut(i) {
            Some(p @ false) => {
                *p = true;
                Ok(())
            }
            _ => Err("internal: two records in one place".to_owned()),
        };
        for i in self.unread.into_iter().flatten() {
            place(i)?;
        }
        let records = self
            .kept
            .into_iter()
            .zip(kept)
            .chain(self.fresh.into_iter().zip(fresh));
        for (i, r) in records {
            place(i)?;
            all[i] = r;
        }
        if placed.contains(&false) {
            return Err("internal: a record has no place".into());
        }
        Ok(all)
    }
}

/// Any other build: every file of every directory is planned, those of
/// the unchanged jobs from their records.
fn walked(
    req: &super::Request,
    sets: &[Set],
    compiled: &mut Compiled,
    mut outputs: Vec<(PathBuf, Option<Vec<Entry>>)>,
    kept: Vec<SourceRecord>,
    fresh: Vec<SourceRecord>,
) -> Result<Wants, String> {
    let project = req.project;
    let dirty_paths: FxSet<PathBuf> = fresh.iter().map(|r| r.path.clone()).collect();
    let mut all: Vec<SourceRecord> = kept.into_iter().chain(fresh).collect();
    all.sort_by(|a, b| a.path.cmp(&b.path));
    let jobs: usize = all.iter().map(|r| r.parts[0].jobs.len()).sum();

    across_files(req, sets, compiled, &all, &dirty_paths)?;

    // Each set's directories, from the records and what was compiled.
    let mut dests = Vec::new();
    let mut extras = Vec::new();
    let mut recorded = |dir: &Path| take_recorded(&mut outputs, dir);
    let mut total = 0u64;
    for (i, set) in sets.iter().enumerate() {
        let k = part_of(compiled, i)?;
        let output = &mut compiled.outputs[i];
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
                    let w = if fresh {
                        let bytes = output
                            .manifests
                            .remove(rel)
                            .ok_or("internal: a file went missing")?;
                        total += bytes.len() as u64;
                        Want::Bytes(bytes)
                    } else {
                        Want::Known
                    };
                    want.push((rel.clone(), w));
                }
            }
        }
        if !output.manifests.is_empty() {
            return Err("internal: a file of no job".into());
        }
        let extra = extra_of(project, set, &namespaces)?;
        let root = emit::assemble(Vec::new(), &dirs, &extra)?;
        extras.push(extra);
        for (rel, bytes) in root {
            total += bytes.len() as u64;
            want.push((rel, Want::Bytes(bytes)));
        }
        dests.push(Dest {
            dir: set.output.to_path_buf(),
            set: i,
            builds: false,
            want: Wanted::Walk(in_walk_order(want)?),
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
                want: Wanted::Walk(in_walk_order(want)?),
                recorded: recorded(dir),
            });
        }
    }
    // What is taken from the record is counted as it is planned.
    crate::limits::check_output(total, 0, true, crate::limits::MAX_OUTPUT_BYTES)
        .map_err(|_| "the output passes the limit; the build will report it")?;
    Ok((all, dests, extras, total, jobs))
}

/// Each set's namespaces, the number of jobs, and what to record of each
/// set ([`PartSum`]).
type Sums = (Vec<BTreeSet<String>>, usize, Vec<PartSum>);

/// What the rules across files of a patched edit look at: the records of
/// the files kept that were read, of the files compiled (`fresh`) and of
/// what they were (`was`), the sums of the last build, and a way to read
/// the records of the pieces that were not.
struct Across<'a> {
    kept: &'a [SourceRecord],
    fresh: &'a [SourceRecord],
    was: &'a [SourceRecord],
    sums: &'a [PartSum],
    unread: &'a mut dyn FnMut() -> Result<Vec<SourceRecord>, String>,
}

/// The rules across files for a patched edit, and each set's namespaces,
/// the number of jobs, and the sums to record. The last build found no two
/// documents in conflict, no two jobs claiming one object, and the output
/// within its budget: when the edited files' documents have the names and
/// claims they had, only the budget can have changed, and it is the last
/// build's with what was compiled in place of what was; no other record is
/// looked at. Otherwise every other file's documents are, read in place.
fn across_patched(compiled: &Compiled, across: Across) -> Result<Sums, String> {
    let Across {
        kept,
        fresh,
        was,
        sums,
        unread,
    } = across;
    let mut namespaces = Vec::new();
    let mut new_sums = Vec::new();
    let mut jobs = 0;
    let mut others: Option<Vec<SourceRecord>> = None;
    for k in 0..compiled.parts.len() {
        let mut names = FxSet::default();
        let mut claims: FxMap<String, usize> = FxMap::default();
        let mut budget = 0u64;
        let mut docs = 0usize;
        let mut spaces = BTreeSet::new();
        let claimed = |r: &[SourceRecord]| -> Vec<Vec<(String, Option<String>, String)>> {
            r.iter()
                .flat_map(|r| &r.parts[k].docs)
                .map(|d| d.claims.clone())
                .collect()
        };
        let named = |r: &[SourceRecord]| -> Vec<(String, String)> {
            r.iter()
                .flat_map(|r| &r.parts[k].docs)
                .map(|d| (d.namespace.clone(), d.name.clone()))
                .collect()
        };
        let new_claims = claimed(fresh) != claimed(was);
        let key = |buf: &mut String, kind: &str, namespace: Option<&str>, name: &str| {
            buf.clear();
            buf.push_str(kind);
            buf.push('\0');
            match namespace {
                Some(n) => buf.push_str(n),
                None => buf.push('\u{1}'),
            }
            buf.push('\0');
            buf.push_str(name);
        };
        let mut buf = String::new();
        for (i, d) in fresh.iter().flat_map(|r| &r.parts[k].docs).enumerate() {
            if !names.insert((d.namespace.as_str(), d.name.as_str())) {
                return Err(format!(
                    "job `{}/{}` is defined twice; the build will report it",
                    d.namespace, d.name
                ));
            }
            for (kind, namespace, name) in &d.claims {
                key(&mut buf, kind, namespace.as_deref(), name);
                if claims
                    .insert(buf.clone(), i)
                    .is_some_and(|first| first != i)
                {
                    return Err(
                        "two jobs generate the same object; the build will report it".into(),
                    );
                }
            }
            budget = budget.saturating_add(d.floor);
            docs += 1;
            if !spaces.contains(&d.namespace) {
                spaces.insert(d.namespace.clone());
            }
        }
        // Other files' documents, read in place: their floors and
        // namespaces, and whether one is in conflict with what was compiled.
        let scan = |records: &[SourceRecord],
                    budget: &mut u64,
                    docs: &mut usize,
                    spaces: &mut BTreeSet<String>|
         -> Result<(), String> {
            for r in records {
                let body = r.body.as_deref().ok_or("internal: a record decoded")?;
                let mut claim_buf = String::new();
                let hit = super::codec::scan_docs(
                    body,
                    k,
                    new_claims,
                    |d| {
                        *budget = budget.saturating_add(d.floor);
                        *docs += 1;
                        if !spaces.contains(d.namespace) {
                            spaces.insert(d.namespace.to_owned());
                        }
                        names.contains(&(d.namespace, d.name))
                    },
                    |kind, namespace, name| {
                        key(&mut claim_buf, kind, namespace, name);
                        claims.contains_key(claim_buf.as_str())
                    },
                )
                .map_err(|_| "the record is damaged")?;
                if hit {
                    return Err(
                        "a job that changed and another generate the same object; the build will report it"
                            .into(),
                    );
                }
            }
            Ok(())
        };
        let sum = sums
            .get(k)
            .filter(|_| !new_claims && named(fresh) == named(was));
        if let Some(sum) = sum {
            let compiled_only = (budget, docs, spaces.clone());
            let floors = |r: &[SourceRecord]| -> u64 {
                r.iter()
                    .flat_map(|r| &r.parts[k].docs)
                    .fold(0u64, |n, d| n.saturating_add(d.floor))
            };
            budget = sum
                .budget
                .checked_sub(floors(was))
                .and_then(|b| b.checked_add(floors(fresh)))
                .ok_or("the record is damaged")?;
            docs = sum.docs;
            spaces.extend(sum.namespaces.iter().cloned());
            // The tests build in debug: every sum taken is checked against
            // the records.
            if cfg!(debug_assertions) {
                let others = match &mut others {
                    Some(o) => &*o,
                    None => &*others.insert(unread()?),
                };
                let (mut b, mut d, mut sp) = compiled_only;
                scan(kept, &mut b, &mut d, &mut sp)?;
                scan(others, &mut b, &mut d, &mut sp)?;
                debug_assert_eq!(
                    (b, d, &sp),
                    (budget, docs, &spaces),
                    "the sums are not the records'"
                );
            }
        } else {
            let others = match &mut others {
                Some(o) => &*o,
                None => &*others.insert(unread()?),
            };
            scan(kept, &mut budget, &mut docs, &mut spaces)?;
            scan(others, &mut budget, &mut docs, &mut spaces)?;
        }
        if docs == 0 {
            return Err("there are no jobs; the build will report it".into());
        }
        if budget > crate::limits::MAX_OUTPUT_BYTES {
            return Err("the jobs pass the output budget; the build will report it".into());
        }
        if k == 0 {
            jobs = docs;
        }
        new_sums.push(PartSum {
            docs,
            budget,
            namespaces: spaces.iter().cloned().collect(),
        });
        namespaces.push(spaces);
    }
    Ok((namespaces, jobs, new_sums))
}

/// The files of a directory in walk order; two jobs never share one.
fn in_walk_order(mut want: Vec<(String, Want)>) -> Result<Vec<(String, Want)>, String> {
    want.sort_by(|a, b| snapshot::walk_cmp(&a.0, &b.0));
    if want.windows(2).any(|w| w[0].0 == w[1].0) {
        return Err("internal: two jobs write the same file".into());
    }
    Ok(want)
}

/// The rules across definition files, over every file's records: any
/// finding ends the incremental build, and the full build reports it.
fn across_files(
    req: &super::Request,
    sets: &[Set],
    compiled: &Compiled,
    all: &[SourceRecord],
    dirty: &FxSet<PathBuf>,
) -> Result<(), String> {
    let project = req.project;
    let parts = compiled.parts.len();
    let complete = pipeline::complete(project, req.cwd, req.paths);
    let images = |k: usize| -> BTreeSet<&str> {
        all.iter()
            .flat_map(|r| &r.parts[k].jobs)
            .flat_map(|j| &j.images)
            .map(String::as_str)
            .collect()
    };
    for k in 0..parts {
        if all.iter().all(|r| r.parts[k].docs.is_empty()) {
            return Err("there are no jobs; the build will report it".into());
        }
        // The last build found no two unchanged documents in conflict: only
        // the compiled ones can be, with each other or with the others.
        let mut names = FxSet::default();
        let mut claims: FxMap<&(String, Option<String>, String), usize> = FxMap::default();
        let mut budget = 0u64;
        let compiled_docs = all
            .iter()
            .filter(|r| dirty.contains(&r.path))
            .flat_map(|r| &r.parts[k].docs);
        for (i, d) in compiled_docs.enumerate() {
            if !names.insert((&d.namespace, &d.name)) {
                return Err(format!(
                    "job `{}/{}` is defined twice; the build will report it",
                    d.namespace, d.name
                ));
            }
            for c in &d.claims {
                if claims.insert(c, i).is_some_and(|first| first != i) {
                    return Err(
                        "two jobs generate the same object; the build will report it".into(),
                    );
                }
            }
        }
        for r in all {
            let fresh = dirty.contains(&r.path);
            for d in &r.parts[k].docs {
                budget = budget.saturating_add(d.floor);
                if fresh {
                    continue;
                }
                if names.contains(&(&d.namespace, &d.name)) {
                    return Err(format!(
                        "job `{}/{}` is defined twice; the build will report it",
                        d.namespace, d.name
                    ));
                }
                if d.claims.iter().any(|c| claims.contains_key(c)) {
                    return Err(
                        "two jobs generate the same object; the build will report it".into(),
                    );
                }
            }
        }
        if budget > crate::limits::MAX_OUTPUT_BYTES {
            return Err("the jobs pass the output budget; the build will report it".into());
        }
    }
    // Each variant set: its `job:` names (of the definitions as written),
    // and the images it uses without build specs of its own.
    for (i, set) in sets.iter().enumerate() {
        let Some(v) = set.variant else { continue };
        let k = part_of(compiled, i)?;
        if complete {
            let names: HashSet<&str> = all
                .iter()
                .flat_map(|r| &r.parts[0].docs)
                .map(|d| d.name.as_str())
                .collect();
            if v.patches
                .iter()
                .filter_map(|p| p.job.as_deref())
                .any(|j| !names.contains(j))
            {
                return Err(format!(
                    "a patch of variant `{}` names no definition; the build will report it",
                    v.name
                ));
            }
        }
        if v.build_output.is_none() && !images(k).is_subset(&images(0)) {
            return Err(format!(
                "variant `{}` uses images the project's build specs do not build; the build will report it",
                v.name
            ));
        }
    }
    if sets.len() > 1 {
        let jobs = (0..sets.len())
            .map(|i| {
                let k = part_of(compiled, i)?;
                Ok(all.iter().flat_map(|r| &r.parts[k].docs).collect())
            })
            .collect::<Result<Vec<_>, String>>()?;
        if !pipeline::shared_jobs(project, sets, &jobs).is_empty() {
            return Err(
                "two outputs synced to one cluster build the same job; the build will report it"
                    .into(),
            );
        }
    }
    Ok(())
}

impl Incremental {
    /// Whether the output, with `known` bytes taken from the record (as
    /// [`plan()`] counts them), stays within the output limit.
    pub fn within_limit(&self, known: u64) -> Result<(), String> {
        crate::limits::check_output(
            self.bytes.saturating_add(known),
            0,
            true,
            crate::limits::MAX_OUTPUT_BYTES,
        )
        .map_err(|_| "the output passes the limit; the build will report it".to_owned())
    }
}

/// A directory planned by [`plan()`].
#[derive(Debug)]
pub struct Planned {
    pub plan: Plan,
    /// The YAML files the unlisted-files check names, in walk order.
    pub unlisted: Vec<String>,
    /// The bytes of the files taken from the record.
    pub known: u64,
}

/// The plan of `dest` (`shown` as messages name it), as [`plan::plan`]
/// would make it; or why the full build must make it. One walk of the
/// directory, the walk a no-op build's check makes, does it all: it checks
/// the files of unchanged jobs against the snapshot (reading none whose
/// signature is as recorded: an unchanged file carries no bytes in the
/// plan), compares the files that changed (reading them, for the diff),
/// finds what to prune, runs the unlisted-files check when `unlisted`
/// gives the root kustomization's other entries, and leaves in `state`
/// what it saw, from which the record of the build is made without
/// walking again.
pub fn plan(
    dest: Dest,
    shown: &str,
    unlisted: Option<&[String]>,
    state: &mut State,
) -> Result<Planned, String> {
    let root = dest.dir;
    let want = match dest.want {
        Wanted::Walk(want) => want,
        Wanted::Patch { write, was } => {
            return patch(root, dest.recorded, write, &was, shown, unlisted, state);
        }
    };
    // What the walk records is not the record's list.
    if let Some(base) = &mut state.base {
        base.dirs.remove(&root);
    }
    let recorded = dest.recorded.unwrap_or_default();
    let p = Planner {
        root: &root,
        shown,
        changes: Vec::with_capacity(want.len()),
        want: want.into_iter().peekable(),
        checked: plan::Checked::new(),
        entries: Vec::with_capacity(recorded.len() + 16),
        recorded: recorded.into_iter().peekable(),
        unlisted,
        found: Vec::new(),
        known: 0,
        failed: None,
    };
    // Both callbacks add to what the walk found, in walk order.
    let cell = std::cell::RefCell::new(p);
    let walked = snapshot::walk(
        &root,
        |rel, kind, sig| {
            let mut p = cell.borrow_mut();
            match p.entry(rel, kind, sig) {
                Ok(()) => Ok(true),
                Err(why) => {
                    p.failed = Some(why);
                    Ok(false)
                }
            }
        },
        |rel| {
            // Hidden directories are not looked into; others, which no
            // plan enters, only by the unlisted-files check.
            let mut p = cell.borrow_mut();
            let name = rel.rsplit('/').next().unwrap_or(rel);
            if let Some(entries) = p.unlisted
                && !name.starts_with('.')
            {
                crate::resources::unlisted_below(
                    &root,
                    &root.join(rel),
                    entries,
                    None,
                    &mut p.found,
                );
            }
            Ok(())
        },
    );
    let mut p = cell.into_inner();
    let present = match walked {
        Ok(present) => present,
        Err(e) => {
            return Err(p
                .failed
                .take()
                .unwrap_or_else(|| format!("{shown} cannot be walked: {e}")));
        }
    };
    p.absent_until(None)?;
    let Planner {
        mut changes,
        entries,
        found,
        known,
        ..
    } = p;
    changes.sort_by(|a, b| a.path.cmp(&b.path));
    state
        .walked
        .insert(root.clone(), present.then_some(entries));
    Ok(Planned {
        plan: Plan {
            root,
            changes,
            kept: 0,
            fresh: false,
        },
        unlisted: found,
        known,
    })
}

/// The plan of a directory of [`Wanted::Patch`]: the directory must be as
/// its snapshot says (else the full build runs), and then only the files
/// of the jobs compiled are compared, read or pruned. The files trainc
/// wrote are those whose snapshot has their whole hash; they count as
/// kept, but for the compiled jobs' own.
fn patch(
    root: PathBuf,
    recorded: Option<Vec<Entry>>,
    mut write: Vec<(String, Vec<u8>)>,
    was: &[String],
    shown: &str,
    unlisted: Option<&[String]>,
    state: &mut State,
) -> Result<Planned, String> {
    let mark = snapshot::mark();
    let mut skipped = Vec::new();
    let entries = match snapshot::verify_listing(&root, recorded.as_deref(), mark, &mut skipped) {
        snapshot::Verdict::Same => recorded,
        snapshot::Verdict::Refreshed(now, moved) => {
            // Changed from the list the record holds where hashed again;
            // and the census, which counts what the signatures say (a file
            // just written has none yet), follows them.
            if let Some(base) = &mut state.base {
                if let Some(read) = base.dirs.get_mut(&root) {
                    read.census = read.census.take().and_then(|c| {
                        let (was, now) = (recorded.as_deref()?, now.as_deref()?);
                        let touched: Vec<(usize, Option<u64>)> = moved
                            .iter()
                            .map(|&i| Some((i, snapshot::owned(was.get(i)?).map(|f| f.sig.size))))
                            .collect::<Option<_>>()?;
                        super::adjusted(&c, &touched, now)
                    });
                }
                base.moved.insert(root.clone(), moved);
            }
            now
        }
        snapshot::Verdict::Differs(why) => {
            return Err(format!("{shown} changed since the last build: {why}"));
        }
    };
    let present = entries.is_some();
    let entries = entries.unwrap_or_default();
    let find = |rel: &str| {
        entries
            .binary_search_by(|e| snapshot::walk_cmp(&e.path, rel))
            .ok()
            .map(|i| &entries[i])
    };
    let owned = snapshot::owned;
    // trainc's own files counted (they are kept, but for the compiled
    // jobs'), the others put to the unlisted-files check, and the
    // directories the walk does not enter looked into where the walk met
    // them: from the census the record keeps when the entries are the
    // record's, without a pass over them all.
    let as_read = state.base.as_ref().and_then(|b| b.dirs.get(&root));
    let census = match as_read.and_then(|d| d.census.as_ref()) {
        Some(c) => {
            // The tests build in debug: every census taken is checked
            // against a count.
            debug_assert_eq!(
                *c,
                snapshot::Census::of(&entries),
                "the census is not the entries'"
            );
            c.clone()
        }
        None => snapshot::Census::of(&entries),
    };
    let mut kept = census.owned;
    let mut known = census.bytes;
    let mut found = Vec::new();
    if let Some(list) = unlisted {
        let mut skipped = skipped
            .into_iter()
            .filter(|d| !d.rsplit('/').next().unwrap_or(d).starts_with('.'))
            .peekable();
        let below = |dir: &str, found: &mut Vec<String>| {
            crate::resources::unlisted_below(&root, &root.join(dir), list, None, found);
        };
        for e in census.foreign.iter().filter_map(|&i| entries.get(i)) {
            while let Some(d) = skipped.next_if(|d| snapshot::walk_cmp(d, &e.path).is_lt()) {
                below(&d, &mut found);
            }
            if crate::resources::unlisted_entry(
                &e.path,
                &root.join(&e.path),
                e.kind == Kind::Symlink,
                list,
                || false,
            ) {
                found.push(e.path.clone());
            }
        }
        for d in skipped {
            below(&d, &mut found);
        }
    }
    let was: FxSet<&str> = was.iter().map(String::as_str).collect();
    for f in was.iter().filter_map(|rel| find(rel)).filter_map(owned) {
        kept -= 1;
        known -= f.sig.size;
    }
    write.sort_by(|a, b| a.0.cmp(&b.0));
    let written: FxSet<String> = write.iter().map(|(rel, _)| rel.clone()).collect();
    let mut changes = Vec::new();
    let mut checked = plan::Checked::new();
    for (rel, new) in write {
        let now = find(&rel).and_then(owned).map(|f| f.hash.as_str());
        if now.is_some() && !was.contains(rel.as_str()) {
            return Err("internal: a file of a job that changed is another's".into());
        }
        if now == Some(snapshot::content_hash(&new).as_str()) {
            kept += 1;
            continue;
        }
        let change = plan::plan_file(&root, shown, rel, new, &mut checked)
            .map_err(|d| format!("{}; the build will report it", d.message))?;
        changes.push(change);
    }
    let mut gone: Vec<&str> = was
        .iter()
        .copied()
        .filter(|rel| !written.contains(*rel))
        .collect();
    gone.sort_unstable();
    for rel in gone {
        if find(rel).is_none_or(|e| e.kind != Kind::File) {
            continue;
        }
        let path = root.join(rel);
        match plan::read_owned(&path, rel) {
            Ok(Found::Owned(old)) => changes.push(Change {
                path: rel.to_owned(),
                op: Op::Delete,
                old: Some(old),
                new: Vec::new(),
            }),
            Ok(_) => {}
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        }
    }
    changes.sort_by(|a, b| a.path.cmp(&b.path));
    state
        .walked
        .insert(root.clone(), present.then_some(entries));
    Ok(Planned {
        plan: Plan {
            root,
            changes,
            kept,
            fresh: false,
        },
        unlisted: found,
        known,
    })
}

/// The state of [`plan()`]'s walk: the snapshot and the wanted files, both
/// in walk order, are merged with the entries as the walk meets them.
struct Planner<'a> {
    root: &'a Path,
    shown: &'a str,
    recorded: std::iter::Peekable<std::vec::IntoIter<Entry>>,
    want: std::iter::Peekable<std::vec::IntoIter<(String, Want)>>,
    changes: Vec<Change>,
    checked: plan::Checked,
    /// What the walk saw, as a snapshot.
    entries: Vec<Entry>,
    unlisted: Option<&'a [String]>,
    found: Vec<String>,
    known: u64,
    failed: Option<String>,
}

impl Planner<'_> {
    /// The recorded entry at `rel`, if any; those before it are passed.
    fn recorded(&mut self, rel: &str) -> Option<Entry> {
        while let Some(e) = self.recorded.peek() {
            match snapshot::walk_cmp(&e.path, rel) {
                std::cmp::Ordering::Less => {
                    self.recorded.next();
                }
                std::cmp::Ordering::Equal => return self.recorded.next(),
                std::cmp::Ordering::Greater => return None,
            }
        }
        None
    }

    fn changed(&self, rel: &str, what: &str) -> String {
        format!("{} changed since the last build: {rel} {what}", self.shown)
    }

    /// Plans the wanted files that come before `rel` in walk order (all of
    /// them, for `None`): the walk did not meet them, so they are not there.
    fn absent_until(&mut self, rel: Option<&str>) -> Result<(), String> {
        while let Some((path, want)) = self.want.next_if(|(p, _)| {
            rel.is_none_or(|r| snapshot::walk_cmp(p, r) == std::cmp::Ordering::Less)
        }) {
            match want {
                Want::Known => return Err(self.changed(&path, "is gone")),
                Want::Bytes(new) => {
                    let change =
                        plan::plan_file(self.root, self.shown, path, new, &mut self.checked)
                            .map_err(|d| format!("{}; the build will report it", d.message))?;
                    self.changes.push(change);
                }
            }
        }
        Ok(())
    }

    /// One entry of the walk.
    fn entry(&mut self, rel: &str, kind: Kind, sig: Option<Sig>) -> Result<(), String> {
        self.absent_until(Some(rel))?;
        // The recorded entry's path is this entry's: no copy of it.
        let (path, recorded) = match self.recorded(rel) {
            Some(e) => (e.path, e.file),
            None => (rel.to_owned(), None),
        };
        let wanted = self.want.next_if(|(p, _)| p == rel);
        let (Kind::File, Some(sig)) = (kind, sig) else {
            // Not a file: a wanted file there is refused, as a plan refuses
            // it (or, of an unchanged job, taken for changed).
            match wanted {
                Some((path, Want::Known)) => return Err(self.changed(&path, "changed type")),
                Some((path, Want::Bytes(new))) => {
                    let change =
                        plan::plan_file(self.root, self.shown, path, new, &mut self.checked)
                            .map_err(|d| format!("{}; the build will report it", d.message))?;
                    self.changes.push(change);
                }
                None => {}
            }
            if let Some(entries) = self.unlisted
                && kind != Kind::Dir
                && crate::resources::unlisted_entry(
                    rel,
                    &self.root.join(rel),
                    kind == Kind::Symlink,
                    entries,
                    || false,
                )
            {
                self.found.push(rel.to_owned());
            }
            self.entries.push(Entry {
                path,
                kind,
                file: None,
            });
            return Ok(());
        };
        let vouched = recorded
            .as_ref()
            .filter(|f| !f.racy && f.sig == sig)
            .map(|f| f.hash.as_str());
        let unchanged = |path: String| Change {
            path,
            op: Op::Unchanged,
            old: None,
            new: Vec::new(),
        };
        // The hash of the file as it is now, and whether trainc owns it:
        // `None` when it is not known yet.
        let (hash, owned) = match wanted {
            Some((path, Want::Known)) => {
                let Some(want) = &recorded else {
                    return Err("the record lacks a file of an unchanged job".into());
                };
                let now = match vouched {
                    Some(h) => Some(h.to_owned()),
                    None => snapshot::file_hash(rel, &self.root.join(rel))
                        .ok()
                        .filter(|(_, owned)| *owned)
                        .map(|(h, _)| h),
                };
                if now.as_deref() != Some(want.hash.as_str()) || want.hash.starts_with("head:") {
                    return Err(self.changed(&path, "was edited"));
                }
                self.known += want.sig.size;
                self.changes.push(unchanged(path));
                (want.hash.clone(), Some(true))
            }
            Some((path, Want::Bytes(new))) => {
                let hash = snapshot::content_hash(&new);
                if vouched == Some(hash.as_str()) {
                    self.changes.push(unchanged(path));
                    (hash, Some(true))
                } else {
                    let change =
                        plan::plan_file(self.root, self.shown, path, new, &mut self.checked)
                            .map_err(|d| format!("{}; the build will report it", d.message))?;
                    let hash = match &change.old {
                        Some(old) => snapshot::content_hash(old),
                        None => hash,
                    };
                    self.changes.push(change);
                    (hash, Some(true))
                }
            }
            None => {
                // What is left is pruned when trainc owns it, as
                // `plan::plan` prunes.
                let name = rel.rsplit('/').next().unwrap_or(rel);
                let temp = plan::is_temp(name);
                let path = self.root.join(rel);
                match vouched {
                    Some(h) if !temp && h.starts_with("head:") => (h.to_owned(), None),
                    _ => match plan::read_owned(&path, rel) {
                        Ok(Found::Owned(old)) => {
                            let hash = snapshot::content_hash(&old);
                            self.changes.push(Change {
                                path: rel.to_owned(),
                                op: Op::Delete,
                                old: Some(old),
                                new: Vec::new(),
                            });
                            (hash, Some(true))
                        }
                        Ok(Found::Foreign(head)) | Ok(Found::TooLarge(head)) if temp => {
                            self.changes.push(Change {
                                path: rel.to_owned(),
                                op: Op::Delete,
                                old: None,
                                new: Vec::new(),
                            });
                            (format!("head:{}", snapshot::content_hash(&head)), None)
                        }
                        Ok(Found::Foreign(head)) => (
                            format!("head:{}", snapshot::content_hash(&head)),
                            Some(false),
                        ),
                        Ok(Found::TooLarge(head)) => (
                            format!("head:{}", snapshot::content_hash(&head)),
                            Some(true),
                        ),
                        Err(_) if temp => {
                            self.changes.push(Change {
                                path: rel.to_owned(),
                                op: Op::Delete,
                                old: None,
                                new: Vec::new(),
                            });
                            ("head:".to_owned(), None)
                        }
                        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
                    },
                }
            }
        };
        if let Some(entries) = self.unlisted
            && crate::resources::unlisted_entry(rel, &self.root.join(rel), false, entries, || {
                owned == Some(true)
            })
        {
            self.found.push(rel.to_owned());
        }
        self.entries.push(Entry {
            path,
            kind,
            file: Some(snapshot::FileState {
                sig,
                hash,
                racy: false,
            }),
        });
        Ok(())
    }
}
