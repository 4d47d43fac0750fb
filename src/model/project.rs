//! The project file (`trainc.yaml`), mirroring `schema/project.schema.json`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;
use serde_json::Value;

use crate::model::definition::Target;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProjectFile {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    pub sources: Option<Vec<String>>,
    pub output: Option<String>,
    pub build_output: Option<String>,
    /// `false`: only the variants are built.
    pub own_output: Option<bool>,
    /// The cluster `output` is synced to (see [`VariantFile::cluster`]).
    pub cluster: Option<String>,
    pub library: Option<String>,
    /// Files and directories of the user's own that the root
    /// kustomization lists beside trainc's jobs.
    #[serde(default)]
    pub resources: Vec<String>,
    /// Any warning fails `validate`, `build` and `diff`, as
    /// `--deny-warnings` does. The file is the repository's, so it can
    /// only make trainc stricter.
    #[serde(default)]
    pub deny_warnings: bool,
    #[serde(default)]
    pub defaults: Defaults,
    /// Variants of the definitions, each compiled into its own output
    /// directory; by name, so in name order.
    #[serde(default)]
    pub variants: BTreeMap<String, VariantFile>,
}

/// One variant: where it goes, and the merge patches that make it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VariantFile {
    pub output: String,
    pub build_output: Option<String>,
    /// The cluster the variant's output is synced to: outputs of different
    /// clusters may generate the same objects; outputs of one may not.
    pub cluster: Option<String>,
    #[serde(default)]
    pub resources: Vec<String>,
    /// The jobs it builds, by name; `None`: every one.
    pub jobs: Option<Vec<String>>,
    #[serde(default)]
    pub patches: Vec<PatchFile>,
}

/// A JSON merge patch for every definition, or for the jobs of one name.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatchFile {
    pub job: Option<String>,
    pub patch: serde_json::Value,
}

/// Values a definition gets when it does not set them.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Defaults {
    pub namespace: Option<String>,
    pub target: Option<Target>,
    pub gpu_resource_name: Option<String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

/// One entry of `resources` in the project file.
#[derive(Debug, Clone)]
pub struct Resource {
    /// Where it is (the project root joined with what was written).
    pub path: PathBuf,
    /// As written in the project file.
    pub written: String,
    /// Where the project file says it (`/resources/0`).
    pub pointer: String,
}

/// One variant of the project file.
#[derive(Debug, Clone)]
pub struct Variant {
    /// A DNS label, the key in `variants`.
    pub name: String,
    pub output: PathBuf,
    /// Where its build specs go; `None`: it builds no image of its own.
    pub build_output: Option<PathBuf>,
    /// The cluster its output is synced to; `None`: the project's.
    pub cluster: Option<String>,
    pub resources: Vec<Resource>,
    /// The jobs it builds, by `metadata.name`; `None`: every one.
    pub jobs: Option<Vec<String>>,
    pub patches: Vec<Patch>,
}

/// One merge patch of a variant.
#[derive(Debug, Clone)]
pub struct Patch {
    /// Only the definitions of this `metadata.name`; `None`: every one.
    pub job: Option<String>,
    pub value: Value,
    /// Where the patch is in the project file: `/variants/cpu/patches/0`.
    pub pointer: String,
}

impl Variant {
    /// Where the project file sets this variant's `key`.
    pub fn pointer(&self, key: &str) -> String {
        format!(
            "/variants/{}{}",
            crate::source::pointer_segment(&self.name),
            if key.is_empty() {
                String::new()
            } else {
                format!("/{key}")
            }
        )
    }
}
