//! The project: `trainc.yaml` (optional), where definitions are, where output
//! goes, and the defaults every job gets.

use std::path::{Path, PathBuf};

use crate::diagnostic::Diagnostic;
use crate::load::{self, Document};
use crate::model::project::{Defaults, ProjectFile};
use crate::validate::schema;

pub const PROJECT_FILE: &str = "trainc.yaml";
pub const DEFAULT_SOURCES: &str = "jobs";
pub const DEFAULT_OUTPUT: &str = "deploy";
pub const DEFAULT_BUILD_OUTPUT: &str = "build";

#[derive(Debug, Clone)]
pub struct Project {
    /// Directory that paths in headers and messages are relative to: the
    /// project file's directory, else the working directory.
    pub root: PathBuf,
    pub file: Option<PathBuf>,
    pub sources: Vec<PathBuf>,
    pub output: PathBuf,
    /// Where container build specs go: outside `output`.
    pub build_output: PathBuf,
    /// The project's library directory, overriding built-in presets and
    /// templates by name.
    pub library: Option<PathBuf>,
    pub defaults: Defaults,
    /// The project file as read, for the build cache's key.
    pub text: Option<String>,
}

impl Project {
    /// Finds and reads the project. `explicit` is `--project FILE`; without
    /// it, `trainc.yaml` in `cwd` is used when present.
    pub fn discover(cwd: &Path, explicit: Option<&Path>) -> Result<Self, Vec<Diagnostic>> {
        let file = match explicit {
            Some(p) => Some(cwd.join(p)),
            // Anything by that name, so that a FIFO or a dangling link is
            // reported rather than silently not the project file.
            None => Some(cwd.join(PROJECT_FILE)).filter(|p| p.symlink_metadata().is_ok()),
        };
        let Some(file) = file else {
            return Ok(Self {
                root: cwd.to_path_buf(),
                file: None,
                sources: vec![cwd.join(DEFAULT_SOURCES)],
                output: cwd.join(DEFAULT_OUTPUT),
                build_output: cwd.join(DEFAULT_BUILD_OUTPUT),
                library: None,
                defaults: Defaults::default(),
                text: None,
            });
        };
        let root = file
            .parent()
            .map_or_else(|| cwd.to_path_buf(), Path::to_path_buf);
        let root = root.canonicalize().unwrap_or(root);
        let shown = load::display_name(cwd, &file);
        // A `trainc.yaml` linked to a file elsewhere would be read, and its
        // text shown in errors: it must lie in the directory it names as root.
        load::inside_root(&root, &file, &shown, "project file").map_err(|d| vec![d])?;
        let source = load::read(&file, shown).map_err(|d| vec![d])?;
        let docs = load::parse(&source).map_err(|d| vec![d])?;
        let doc = match docs.as_slice() {
            [doc] => doc,
            _ => {
                return Err(vec![
                    Diagnostic::new(format!(
                        "{} must hold exactly one YAML document, found {}",
                        source.name,
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
        if overlap(&output, &build_output) {
            return Err(vec![
                Diagnostic::new("`output` and `buildOutput` must not contain one another")
                    .at(doc_location(&docs, "/buildOutput"))
                    .hint("each directory is pruned on its own; keep them side by side, e.g. `deploy` and `build`"),
            ]);
        }
        Ok(Self {
            root,
            file: Some(file),
            sources,
            output,
            build_output,
            library,
            defaults: pf.defaults,
            text: Some(source.text.clone()),
        })
    }
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
        crate::library::Library::load(self.library.as_deref(), &self.root)
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
