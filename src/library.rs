//! The preset and template library: built into the binary from `library/`,
//! so trainc works from any directory, and overridable per project by name
//! (`library:` in trainc.yaml names a directory with the same layout).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

use crate::diagnostic::Diagnostic;
use crate::load;
use crate::model::preset::Preset;

/// Built-in presets, by name (the framework they are for).
const PRESETS: [(&str, &str); 2] = [
    ("pytorch", include_str!("../library/presets/pytorch.yaml")),
    (
        "tensorflow",
        include_str!("../library/presets/tensorflow.yaml"),
    ),
];
/// Built-in templates, by file name.
const TEMPLATES: [(&str, &str); 2] = [
    (
        "Dockerfile.j2",
        include_str!("../library/templates/Dockerfile.j2"),
    ),
    (
        "tensorboard.Dockerfile.j2",
        include_str!("../library/templates/tensorboard.Dockerfile.j2"),
    ),
];

/// Presets and templates, the project's own in front of the built-in ones.
#[derive(Debug, Clone)]
pub struct Library {
    presets: BTreeMap<String, Preset>,
    templates: BTreeMap<String, String>,
    /// A hash of the override files as read (see [`Library::digest`]).
    digest: String,
}

impl Library {
    /// The built-in library, overridden by `dir` (`presets/*.yaml`,
    /// `templates/*`) when given.
    /// Messages name files from `cwd`, the working directory.
    pub fn load(dir: Option<&Path>, root: &Path, cwd: &Path) -> Result<Self, Vec<Diagnostic>> {
        let mut sources: BTreeMap<String, (String, String)> = PRESETS
            .iter()
            .map(|(n, t)| {
                (
                    (*n).to_owned(),
                    (format!("library/presets/{n}.yaml"), (*t).to_owned()),
                )
            })
            .collect();
        let mut templates: BTreeMap<String, String> = TEMPLATES
            .iter()
            .map(|(n, t)| ((*n).to_owned(), (*t).to_owned()))
            .collect();
        let mut digest = Sha256::new();
        if let Some(dir) = dir {
            if !dir.is_dir() {
                return Err(vec![
                    Diagnostic::new(format!(
                        "library directory {} does not exist",
                        crate::paths::shown_path(cwd, dir)
                    ))
                    .hint("create it, or remove `library` from trainc.yaml to use the built-in presets and templates"),
                ]);
            }
            let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
            let shown = crate::paths::shown_path(cwd, dir);
            load::inside_root(&root, dir, &shown, "library directory").map_err(|d| vec![d])?;
            let mut diags = Vec::new();
            for (sub, ext) in [(PRESETS_DIR, Some("yaml")), (TEMPLATES_DIR, None)] {
                for path in files(&dir.join(sub), ext, &root, cwd, &mut diags) {
                    let Some(name) = path.file_name().map(|n| n.to_string_lossy().into_owned())
                    else {
                        continue;
                    };
                    let shown = crate::paths::shown_path(cwd, &path);
                    // As definitions are read: size, encoding and file type
                    // checked, and nothing but a regular file opened.
                    let text = match load::read(&path, shown.clone()) {
                        Ok(f) => f.text.clone(),
                        Err(d) => {
                            diags.push(d);
                            continue;
                        }
                    };
                    for field in [path.as_os_str().as_encoded_bytes(), text.as_bytes()] {
                        digest.update((field.len() as u64).to_le_bytes());
                        digest.update(field);
                    }
                    match ext {
                        Some(ext) => {
                            if let Some(stem) = name.strip_suffix(&format!(".{ext}")) {
                                sources.insert(stem.to_owned(), (shown, text));
                            }
                        }
                        None => {
                            templates.insert(name, text);
                        }
                    }
                }
            }
            if !diags.is_empty() {
                return Err(diags);
            }
        }
        let mut presets = BTreeMap::new();
        let mut diags = Vec::new();
        for (name, (shown, text)) in sources {
            match parse_preset(&shown, text) {
                Ok(p) => {
                    presets.insert(name, p);
                }
                Err(d) => diags.push(d),
            }
        }
        if diags.is_empty() {
            let digest = digest
                .finalize()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            Ok(Self {
                presets,
                templates,
                digest,
            })
        } else {
            Err(diags)
        }
    }

    /// The built-in library alone.
    pub fn builtin() -> Result<Self, Vec<Diagnostic>> {
        Self::load(None, Path::new("."), Path::new("."))
    }

    /// A hash of every override file read, with its path: equal digests
    /// mean an equal library, since the built-in part comes with the binary.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    pub fn preset(&self, framework: &str) -> Option<&Preset> {
        self.presets.get(framework)
    }

    pub fn template(&self, name: &str) -> Option<&str> {
        self.templates.get(name).map(String::as_str)
    }
}

const PRESETS_DIR: &str = "presets";
const TEMPLATES_DIR: &str = "templates";

/// The files directly in `dir` that the library reads, sorted; none when it
/// is missing. Those ending in `.{ext}` (every file without `ext`) must be
/// regular files inside `root` (canonical), also through symlinks: anything
/// else is refused into `diags`, unread. Subdirectories are no templates
/// and are skipped.
fn files(
    dir: &Path,
    ext: Option<&str>,
    root: &Path,
    cwd: &Path,
    diags: &mut Vec<Diagnostic>,
) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| ext.is_none_or(|x| p.extension().is_some_and(|e| e == x)))
        .collect();
    out.sort();
    out.retain(|p| {
        let shown = crate::paths::shown_path(cwd, p);
        // Not only links: `presets/` itself may be one.
        if let Err(d) = load::inside_root(root, p, &shown, "library file") {
            diags.push(d);
            return false;
        }
        match std::fs::metadata(p) {
            Ok(m) if m.is_file() => true,
            Ok(m) if m.is_dir() && ext.is_none() => false,
            Ok(m) => {
                diags.push(load::not_regular(&shown, m.file_type()));
                false
            }
            Err(e) => {
                diags.push(Diagnostic::new(format!("cannot read {shown}: {e}")));
                false
            }
        }
    });
    out
}

fn parse_preset(shown: &str, text: String) -> Result<Preset, Diagnostic> {
    let file = std::sync::Arc::new(crate::source::SourceFile::new(shown, text));
    let docs = load::parse(&file)?;
    let [doc] = docs.as_slice() else {
        return Err(Diagnostic::new(format!(
            "{shown} must hold exactly one YAML document"
        )));
    };
    let preset: Preset = doc.typed().map_err(|d| {
        // Any mismatch here is the preset's, not trainc's.
        Diagnostic {
            message: d.message.replace(
                "internal error: schema and model disagree",
                "invalid preset",
            ),
            ..d
        }
        .hint("compare with the built-in presets in trainc's library/presets/")
    })?;
    dockerfile_values(doc, &preset)?;
    if preset.images(None).is_none() {
        return Err(Diagnostic::new(format!(
            "{shown}: `defaultVersion` {} is not among `versions`",
            preset.default_version
        ))
        .at(doc.locate("/defaultVersion")));
    }
    Ok(preset)
}

/// The preset's values that the Dockerfile template writes out (`FROM`,
/// `WORKDIR`, `CMD`) must fit the grammar they land in, as a definition's
/// must: a project's library is as much the repository's as its
/// definitions.
fn dockerfile_values(doc: &load::Document, preset: &Preset) -> Result<(), Diagnostic> {
    use crate::grammar::{REFERENCE_HINT, dockerfile_path_error, reference_error};
    let at = |pointer: &str, why: String, hint: &str| {
        Err(Diagnostic::new(why)
            .path(doc.dotted(pointer))
            .at(doc.locate(pointer))
            .hint(hint.to_owned()))
    };
    let path_hint = "it is written into the Dockerfile (`WORKDIR`, `CMD [\"…\"]`): use letters, digits, '_', '.', '-' and '/'";
    if let Some(why) = dockerfile_path_error(&preset.python) {
        return at("/python", why, path_hint);
    }
    if let Some(why) = dockerfile_path_error(&preset.workdir) {
        return at("/workdir", why, path_hint);
    }
    if !preset.workdir.starts_with('/') {
        return at(
            "/workdir",
            format!("`{}` is not an absolute path", preset.workdir),
            "give the directory in the image where the code goes, e.g. `/app`",
        );
    }
    if let Some(why) = reference_error(&preset.tensorboard.base_image) {
        return at("/tensorboard/baseImage", why, REFERENCE_HINT);
    }
    if !pinned_requirement(&preset.tensorboard.package) {
        return at(
            "/tensorboard/package",
            format!(
                "`{}` is not a pinned pip requirement",
                preset.tensorboard.package
            ),
            "write `name==version`, e.g. `tensorboard==2.21.0`: it is written into `RUN pip install`, and an unpinned package would change the image under the same tag",
        );
    }
    for (version, images) in &preset.versions {
        for (variant, image) in [("cpu", &images.cpu), ("gpu", &images.gpu)] {
            if let Some(why) = reference_error(image) {
                let pointer = format!(
                    "/versions/{}/{variant}",
                    crate::source::pointer_segment(version)
                );
                return at(&pointer, why, REFERENCE_HINT);
            }
        }
    }
    Ok(())
}

/// `name==version`, in the characters package names and versions use: a
/// shell word that pins exactly one release.
fn pinned_requirement(s: &str) -> bool {
    let ok = |part: &str, extra: &[char]| {
        !part.is_empty()
            && part
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c) || extra.contains(&c))
    };
    s.split_once("==")
        .is_some_and(|(name, version)| ok(name, &[]) && ok(version, &['+', '!']))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensorboard_packages_are_pinned_shell_words() {
        assert!(pinned_requirement("tensorboard==2.21.0"));
        for bad in [
            "tensorboard",
            "tensorboard>=2",
            "x==1 && curl evil",
            "x==1\nRUN",
            "==1",
        ] {
            assert!(!pinned_requirement(bad), "{bad}");
        }
    }

    #[test]
    fn builtin_library_loads() {
        let lib = Library::builtin().unwrap();
        let tf = lib.preset("tensorflow").unwrap();
        assert_eq!(tf.port, 2222);
        assert!(tf.images(None).unwrap().gpu.ends_with("-gpu"));
        assert!(lib.template("Dockerfile.j2").is_some());
    }
}
