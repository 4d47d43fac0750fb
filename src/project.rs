//! The project: `trainc.yaml` (optional), where definitions are, where output
//! goes, and the defaults every job gets.

use std::path::{Path, PathBuf};

use crate::diagnostic::Diagnostic;
use crate::load::{self, Document};
use crate::model::project::{Defaults, Patch, ProjectFile, Resource, Variant};
use crate::validate::schema;

pub const PROJECT_FILE: &str = "trainc.yaml";
pub const DEFAULT_SOURCES: &str = "jobs";
pub const DEFAULT_OUTPUT: &str = "deploy";
pub const DEFAULT_BUILD_OUTPUT: &str = "build";

#[derive(Debug, Clone)]
pub struct Project {
    /// Directory that paths in generated files are relative to: the
    /// project file's directory, else the working directory.
    pub root: PathBuf,
    /// The working directory (canonical): paths in messages are relative
    /// to it.
    pub cwd: PathBuf,
    pub file: Option<PathBuf>,
    pub sources: Vec<PathBuf>,
    pub output: PathBuf,
    /// Where container build specs go: outside `output`.
    pub build_output: PathBuf,
    /// Whether the definitions as written are built into `output` (and
    /// `build_output`); `false`: only the variants are (`ownOutput`).
    pub own_output: bool,
    /// The project's library directory, overriding built-in presets and
    /// templates by name.
    pub library: Option<PathBuf>,
    /// What the root kustomization of `output` lists besides the jobs.
    pub resources: Vec<Resource>,
    /// The cluster `output` is synced to, when the project file says; a
    /// variant without a `cluster` of its own shares it.
    pub cluster: Option<String>,
    /// The variants of the definitions, in name order.
    pub variants: Vec<Variant>,
    pub defaults: Defaults,
    /// `denyWarnings`: any warning fails the command.
    pub deny_warnings: bool,
    /// The project file as read, for the build cache's key.
    pub text: Option<String>,
    /// The project file as parsed, for pointing at its settings.
    pub doc: Option<Document>,
}

impl Project {
    /// Finds and reads the project. `explicit` is `--project FILE`; without
    /// it, the nearest `trainc.yaml` (see [`find`]) is used, if any.
    pub fn discover(cwd: &Path, explicit: Option<&Path>) -> Result<Self, Vec<Diagnostic>> {
        let file = match explicit {
            Some(p) => Some(cwd.join(p)),
            None => find(cwd),
        };
        let Some(file) = file else {
            return Ok(Self {
                root: cwd.to_path_buf(),
                cwd: cwd.to_path_buf(),
                file: None,
                sources: vec![cwd.join(DEFAULT_SOURCES)],
                output: cwd.join(DEFAULT_OUTPUT),
                build_output: cwd.join(DEFAULT_BUILD_OUTPUT),
                own_output: true,
                library: None,
                resources: Vec::new(),
                cluster: None,
                variants: Vec::new(),
                defaults: Defaults::default(),
                deny_warnings: false,
                text: None,
                doc: None,
            });
        };
        let root = file
            .parent()
            .map_or_else(|| cwd.to_path_buf(), Path::to_path_buf);
        let root = root.canonicalize().unwrap_or(root);
        let shown = crate::paths::display_name(cwd, &file);
        // A `trainc.yaml` linked to a file elsewhere would be read, and its
        // text shown in errors: it must lie in the directory it names as root.
        load::inside_root(&root, &file, &shown, "project file").map_err(|d| vec![d])?;
        // The root is its directory.
        let name = file
            .file_name()
            .map_or_else(|| shown.clone(), |n| n.to_string_lossy().into_owned());
        let source = load::read_as(&file, name, shown).map_err(|d| vec![d])?;
        let docs = load::parse(&source).map_err(|d| vec![d])?;
        let doc = match docs.as_slice() {
            [doc] => doc,
            _ => {
                return Err(vec![
                    Diagnostic::new(format!(
                        "{} must hold exactly one YAML document, found {}",
                        source.shown,
                        docs.len()
                    ))
                    .hint("keep the project settings in one document"),
                ]);
            }
        };
        let pf = parse_project(doc)?;
        let sources = pf
            .sources
            .unwrap_or_else(|| vec![DEFAULT_SOURCES.to_owned()])
            .iter()
            .map(|s| root.join(s))
            .collect();
        let output = root.join(pf.output.as_deref().unwrap_or(DEFAULT_OUTPUT));
        let build_output = root.join(pf.build_output.as_deref().unwrap_or(DEFAULT_BUILD_OUTPUT));
        let library = pf.library.as_deref().map(|l| root.join(l));
        let resources = resources_at(&root, "/resources", &pf.resources);
        if overlap(&output, &build_output) {
            return Err(vec![
                Diagnostic::new("`output` and `buildOutput` must not contain one another")
                    .at(doc_location(&docs, "/buildOutput"))
                    .hint("each directory is pruned on its own; keep them side by side, e.g. `deploy` and `build`"),
            ]);
        }
        let variants: Vec<Variant> = pf
            .variants
            .into_iter()
            .map(|(name, v)| {
                let at = format!("/variants/{}", crate::source::pointer_segment(&name));
                Variant {
                    output: root.join(&v.output),
                    build_output: v.build_output.as_deref().map(|b| root.join(b)),
                    cluster: v.cluster,
                    resources: resources_at(&root, &format!("{at}/resources"), &v.resources),
                    jobs: v.jobs,
                    patches: v
                        .patches
                        .into_iter()
                        .enumerate()
                        .map(|(i, p)| Patch {
                            job: p.job,
                            value: p.patch,
                            pointer: format!("{at}/patches/{i}"),
                        })
                        .collect(),
                    name,
                }
            })
            .collect();
        let found = apart(doc, &output, &build_output, &variants);
        if !found.is_empty() {
            return Err(found);
        }
        let own_output = pf.own_output.unwrap_or(true);
        if !own_output && variants.is_empty() {
            return Err(vec![
                Diagnostic::new("`ownOutput: false` with no variants: nothing would be built")
                    .path("ownOutput")
                    .at(doc.locate("/ownOutput"))
                    .hint("add the variants to build under `variants`, or leave `ownOutput` out to build the definitions as written into `output`"),
            ]);
        }
        let doc = docs.into_iter().next();
        Ok(Self {
            root,
            cwd: cwd.to_path_buf(),
            file: Some(file),
            sources,
            output,
            build_output,
            own_output,
            library,
            resources,
            cluster: pf.cluster,
            defaults: pf.defaults,
            deny_warnings: pf.deny_warnings,
            variants,
            text: Some(source.text.clone()),
            doc,
        })
    }

    /// The variants named (all of them for none), in name order; or an
    /// error naming the unknown ones.
    pub fn select(&self, names: &[String]) -> Result<Vec<&Variant>, Vec<Diagnostic>> {
        let unknown: Vec<&String> = names
            .iter()
            .filter(|n| !self.variants.iter().any(|v| &v.name == *n))
            .collect();
        if let Some(first) = unknown.first() {
            let known: Vec<String> = self
                .variants
                .iter()
                .map(|v| format!("`{}`", v.name))
                .collect();
            let hint = if known.is_empty() {
                "the project file defines no `variants`".to_owned()
            } else {
                match crate::suggest::did_you_mean(
                    first,
                    self.variants.iter().map(|v| v.name.as_str()),
                ) {
                    Some(s) => format!(
                        "did you mean `{s}`? The project's variants are {}",
                        known.join(", ")
                    ),
                    None => format!("the project's variants are {}", known.join(", ")),
                }
            };
            let names: Vec<String> = unknown.iter().map(|n| format!("`{n}`")).collect();
            return Err(vec![
                Diagnostic::new(format!("no variant named {}", names.join(", "))).hint(hint),
            ]);
        }
        Ok(self
            .variants
            .iter()
            .filter(|v| names.is_empty() || names.contains(&v.name))
            .collect())
    }

    /// Every directory trainc writes for the project, as configured, and
    /// what it is: the output and build directories, then each variant's.
    pub fn written_dirs(&self) -> Vec<(&Path, String)> {
        let mut dirs = vec![
            (self.output.as_path(), "output directory".to_owned()),
            (self.build_output.as_path(), "build directory".to_owned()),
        ];
        for v in &self.variants {
            dirs.push((
                &v.output,
                format!("output directory of variant `{}`", v.name),
            ));
            if let Some(b) = &v.build_output {
                dirs.push((b, format!("build directory of variant `{}`", v.name)));
            }
        }
        dirs
    }

    /// How messages name the file or directory `path`: from the working
    /// directory.
    pub fn shown(&self, path: &Path) -> String {
        crate::paths::shown_path(&self.cwd, path)
    }

    /// How messages name a directory trainc writes (see
    /// [`crate::paths::shown_dir_in`]).
    pub fn shown_dir(&self, dir: &Path) -> String {
        crate::paths::shown_dir_in(&self.root, &self.cwd, dir)
    }

    /// The top of the repository the project lies in: the nearest
    /// directory at or above the project root that holds `.git` (a
    /// directory, or the file of a worktree or submodule), else the project
    /// root. Directories the repository's content names (`output`,
    /// `buildOutput`, build contexts) must resolve inside it; only the
    /// command line may point elsewhere.
    pub fn top(&self) -> PathBuf {
        crate::paths::repository_top(&self.root)
    }

    /// Whether the project file was found above the working directory,
    /// rather than in it or by `--project`.
    pub fn found_above(&self) -> bool {
        self.file.is_some() && self.root != self.cwd && self.cwd.starts_with(&self.root)
    }
}

/// The project file trainc uses without `--project`: `trainc.yaml` in the
/// working directory, else in the nearest parent directory that has one,
/// as cargo finds `Cargo.toml`. The search ends at the top of the
/// repository (the first directory holding `.git`, after looking there) or
/// at the file system's root: a `trainc.yaml` above the repository (one
/// planted in `/tmp`, say) is never read. Anything by that name counts, so
/// that a FIFO or a dangling link is reported rather than silently passed
/// over for one further up.
pub fn find(cwd: &Path) -> Option<PathBuf> {
    for dir in cwd.ancestors() {
        let file = dir.join(PROJECT_FILE);
        if file.symlink_metadata().is_ok() {
            return Some(file);
        }
        if dir.join(".git").symlink_metadata().is_ok() {
            return None;
        }
    }
    None
}

/// The `resources` at `pointer` in the project file.
fn resources_at(root: &Path, pointer: &str, list: &[String]) -> Vec<Resource> {
    list.iter()
        .enumerate()
        .map(|(i, r)| Resource {
            path: root.join(r),
            written: r.clone(),
            pointer: format!("{pointer}/{i}"),
        })
        .collect()
}

/// The longest file name Linux and macOS file systems take, in bytes.
const NAME_MAX: usize = 255;

/// Refuses, located at the later of the two, directories of the project
/// file that contain one another: each is pruned on its own; and names
/// too long to create.
fn apart(doc: &Document, output: &Path, build: &Path, variants: &[Variant]) -> Vec<Diagnostic> {
    let mut dirs: Vec<(&Path, String)> = Vec::new();
    for v in variants {
        dirs.push((&v.output, v.pointer("output")));
        if let Some(b) = &v.build_output {
            dirs.push((b, v.pointer("buildOutput")));
        }
    }
    let dotted = |p: &str| format!("`{}`", doc.dotted(p));
    let mut found = Vec::new();
    // A name no file system takes would fail the build halfway, after
    // other directories were written: refused before anything is.
    for (dir, at) in [
        (output, "/output".to_owned()),
        (build, "/buildOutput".to_owned()),
    ]
    .into_iter()
    .chain(dirs.iter().cloned())
    {
        if let Some(long) = dir
            .components()
            .map(|c| c.as_os_str().len())
            .find(|n| *n > NAME_MAX)
        {
            found.push(
                Diagnostic::new(format!(
                    "{} names a directory of {long} bytes, over the {NAME_MAX}-byte limit of file systems",
                    dotted(&at)
                ))
                .path(doc.dotted(&at))
                .at(doc.locate(&at))
                .hint("use a shorter directory name"),
            );
        }
    }
    for (i, (dir, at)) in dirs.iter().enumerate() {
        let earlier = [
            (output, "/output".to_owned()),
            (build, "/buildOutput".to_owned()),
        ]
        .into_iter()
        .chain(dirs[..i].iter().cloned());
        if let Some((_, other)) = earlier.into_iter().find(|(d, _)| overlap(d, dir)) {
            found.push(
                Diagnostic::new(format!(
                    "{} and {} must not contain one another",
                    dotted(&other),
                    dotted(at)
                ))
                .path(doc.dotted(at))
                .at(doc.locate(at))
                .hint("each directory is pruned on its own: give every variant directories of its own beside the project's, e.g. `deploy-cpu` and `build-cpu`"),
            );
        }
    }
    found
}

/// Whether one directory lies in the other (lexically, as written).
pub fn overlap(a: &Path, b: &Path) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

fn doc_location(docs: &[Document], pointer: &str) -> Option<crate::source::Location> {
    docs.first().and_then(|d| d.locate(pointer))
}

impl Project {
    /// The built-in library with the project's overrides.
    pub fn library(&self) -> Result<crate::library::Library, Vec<Diagnostic>> {
        crate::library::Library::load(self.library.as_deref(), &self.root, &self.cwd)
    }
}

fn parse_project(doc: &Document) -> Result<ProjectFile, Vec<Diagnostic>> {
    let found = schema::PROJECT.check(doc);
    if !found.is_empty() {
        return Err(found);
    }
    let pf: ProjectFile = doc.typed().map_err(|d| vec![d])?;
    let found = crate::validate::rules::check_labels(
        doc,
        "/defaults",
        &pf.defaults.labels,
        &pf.defaults.annotations,
    );
    if found.is_empty() { Ok(pf) } else { Err(found) }
}
