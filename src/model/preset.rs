//! A framework's preset: what its jobs get unless their definition says
//! otherwise. The data only; [`crate::library`] loads presets, the built-in
//! ones and a project's own.

use std::collections::BTreeMap;

use serde::Deserialize;

/// What a framework's jobs get unless their definition says otherwise.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Preset {
    pub framework: String,
    pub default_version: String,
    pub port: u16,
    pub python: String,
    pub workdir: String,
    /// The size of the memory-backed `/dev/shm` every task gets unless its
    /// definition says (`shmSize`); `None`: none.
    #[serde(default)]
    pub shm_size: Option<String>,
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
