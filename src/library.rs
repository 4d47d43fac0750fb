//! The preset and template library: built into the binary from `library/`,
//! so trainc works from any directory, and overridable per project by name
//! (`library:` in trainc.yaml names a directory with the same layout).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use sha2::{Digest as _, Sha256};

use crate::diagnostic::Diagnostic;
use crate::load;

/// Built-in presets, by name (the framework they are for).
const PRESETS: [(&str, &str); 1] = [(
    "tensorflow",
    include_str!("../library/presets/tensorflow.yaml"),
)];
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

/// What a framework's jobs get unless their definition says otherwise.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Preset {
    pub framework: String,
    pub default_version: String,
    pub port: u16,
    pub python: String,
    pub workdir: String,
    pub tensorboard: TensorBoardPreset,
    pub versions: BTreeMap<String, BaseImages>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TensorBoardPreset {
    pub port: u16,
    /// The base of the TensorBoard image trainc writes a build spec for.
    pub base_image: String,
    /// The pip requirement that provides the `tensorboard` program, pinned.
    pub package: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaseImages {
    pub cpu: String,
    pub gpu: String,
}

impl Preset {
    /// The base images of `version` (the default version when `None`).
    pub fn images(&self, version: Option<&str>) -> Option<&BaseImages> {
        self.versions.get(version.unwrap_or(&self.default_version))
    }
}

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
    pub fn load(dir: Option<&Path>, root: &Path) -> Result<Self, Vec<Diagnostic>> {
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
                        load::display_name(root, dir)
                    ))
                    .hint("create it, or remove `library` from trainc.yaml to use the built-in presets and templates"),
                ]);
            }
            for (sub, ext) in [(PRESETS_DIR, Some("yaml")), (TEMPLATES_DIR, None)] {
                for path in files(&dir.join(sub)) {
                    let Some(name) = path.file_name().map(|n| n.to_string_lossy().into_owned())
                    else {
                        continue;
                    };
                    let shown = load::display_name(root, &path);
                    let text = std::fs::read_to_string(&path)
                        .map_err(|e| vec![Diagnostic::new(format!("cannot read {shown}: {e}"))])?;
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
        Self::load(None, Path::new("."))
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

/// Regular files directly in `dir`, sorted; none when it is missing.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    out.sort();
    out
}

fn parse_preset(shown: &str, text: String) -> Result<Preset, Diagnostic> {
    let file = std::sync::Arc::new(crate::source::SourceFile {
        name: shown.to_owned(),
        text,
    });
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
    if preset.images(None).is_none() {
        return Err(Diagnostic::new(format!(
            "{shown}: `defaultVersion` {} is not among `versions`",
            preset.default_version
        ))
        .at(doc.locate("/defaultVersion")));
    }
    Ok(preset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_library_loads() {
        let lib = Library::builtin().unwrap();
        let tf = lib.preset("tensorflow").unwrap();
        assert_eq!(tf.port, 2222);
        assert!(tf.images(None).unwrap().gpu.ends_with("-gpu"));
        assert!(lib.template("Dockerfile.j2").is_some());
    }
}
