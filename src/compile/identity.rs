//! Stage 3 (compile): the identity of a training run.
//!
//! A run is every task of one job, started together and finished together.
//! Its name is the job name plus a short hash of everything that reaches
//! the run's pods or its run object (`mnist-8b16ab`), and every object of
//! the run (Jobs, the headless Service, the JobSet or TFJob, the
//! cluster-spec ConfigMap) is named after it. Any change that needs a pod
//! re-created therefore renames the whole run: the GitOps controller creates
//! the new run and prunes the old one, and no task of an old run ever shares
//! a DNS name or a selector with a task of the new one.
//!
//! The hash is computed from the resolved job, not from the rendered
//! objects (the names appear inside them), plus the target's output-format
//! version, which a release bumps whenever it renders a run's objects
//! differently.

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::compile::storage;
use crate::model::Job;
use crate::model::job::{Patch, Role, RunPolicy, Security};
use crate::names;

/// What the run identity is computed from. Every field of [`Job`] is named
/// in [`run_hash`], so a new field cannot be left out by accident.
#[derive(Serialize)]
struct Inputs<'a> {
    target: &'static str,
    format: u32,
    namespace: &'a str,
    name: &'a str,
    labels: &'a std::collections::BTreeMap<String, String>,
    annotations: &'a std::collections::BTreeMap<String, String>,
    image_pull_policy: Option<&'a str>,
    hyperparameters: &'a [(String, String)],
    hyperparameter_flags: bool,
    hyperparameter_env: bool,
    tf_config: bool,
    legacy_flags: bool,
    gpu_resource_name: &'a str,
    roles: &'a [Role],
    /// `(volume, mount path, read-only, claim)`: what a pod sees of storage.
    mounts: Vec<(&'a str, &'a str, bool, String)>,
    shm_size: Option<&'a str>,
    run_policy: &'a RunPolicy,
    service_account_name: Option<&'a str>,
    security: &'a Security,
    /// Skipped when empty, so that runs without patches keep their names.
    #[serde(skip_serializing_if = "<[Patch]>::is_empty")]
    patches: &'a [Patch],
}

/// The hex digest of a run's inputs, [`names::HASH_LEN`] digits long.
pub fn run_hash(job: &Job) -> Result<String, String> {
    // Destructured without `..`: adding a field to `Job` fails to compile
    // here until someone decides whether it belongs to the run.
    let Job {
        // Where the definition lives: moving a file must not retrain.
        source: _,
        name,
        namespace,
        labels,
        annotations,
        target,
        // Reaches pods only through the image, which is hashed itself.
        framework_version: _,
        build: _,
        image_pull_policy,
        hyperparameters,
        hyperparameter_flags,
        hyperparameter_env,
        tf_config,
        legacy_flags,
        gpu_resource_name,
        roles,
        storage: volumes,
        shm_size,
        // TensorBoard watches a run from outside it.
        tensorboard: _,
        run_policy,
        service_account_name,
        security,
        // A NetworkPolicy is changed in place; the pods stay.
        network_policy: _,
        patches,
    } = job;
    let inputs = Inputs {
        target: target.as_str(),
        format: super::format(*target),
        namespace,
        name,
        labels,
        annotations,
        image_pull_policy: image_pull_policy.as_deref(),
        hyperparameters,
        hyperparameter_flags: *hyperparameter_flags,
        hyperparameter_env: *hyperparameter_env,
        tf_config: *tf_config,
        legacy_flags: *legacy_flags,
        gpu_resource_name,
        roles,
        mounts: volumes
            .iter()
            .map(|v| {
                (
                    v.name.as_str(),
                    v.mount_path.as_str(),
                    v.read_only,
                    storage::claim_name(job, v),
                )
            })
            .collect(),
        shm_size: shm_size.as_deref(),
        run_policy,
        service_account_name: service_account_name.as_deref(),
        security,
        patches,
    };
    // JSON of borrowed, ordered fields and sorted maps: equal jobs give
    // equal bytes.
    let bytes = serde_json::to_vec(&inputs).map_err(|e| e.to_string())?;
    let digest = Sha256::digest(&bytes);
    let mut hex = String::with_capacity(names::HASH_LEN);
    for b in digest.iter().take(names::HASH_LEN.div_ceil(2)) {
        hex.push_str(&format!("{b:02x}"));
    }
    hex.truncate(names::HASH_LEN);
    Ok(hex)
}

/// The run's name: `<job>-<hash>`.
pub fn run_name(job: &Job) -> Result<String, String> {
    Ok(names::run(&job.name, &run_hash(job)?))
}
