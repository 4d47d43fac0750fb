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
use crate::model::definition::RoleKind;
use crate::model::definition::Strategy;
use crate::model::job::{
    EmptyDir, Framework, Patch, Projection, Pytorch, Role, RunPolicy, Security, VolumeSource,
};
use crate::names;

/// What the run identity is computed from. Every field of [`Job`] is named
/// in [`run_hash`], so a new field cannot be left out by accident.
#[derive(Serialize)]
struct Inputs<'a> {
    target: &'static str,
    format: u32,
    /// Left out for the default, so that runs named before there was a
    /// choice keep their names.
    #[serde(skip_serializing_if = "Option::is_none")]
    strategy: Option<&'static str>,
    namespace: &'a str,
    name: &'a str,
    labels: &'a std::collections::BTreeMap<String, String>,
    annotations: &'a std::collections::BTreeMap<String, String>,
    image_pull_policy: Option<&'a str>,
    /// Left out while empty: definitions without it keep their run names.
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    image_pull_secrets: &'a [String],
    hyperparameters: &'a [(String, String)],
    hyperparameter_flags: bool,
    hyperparameter_env: bool,
    /// TensorFlow's; `false` for other frameworks.
    tf_config: bool,
    legacy_flags: bool,
    /// Left out for TensorFlow, so that its runs keep their names.
    #[serde(skip_serializing_if = "Option::is_none")]
    pytorch: Option<&'a Pytorch>,
    gpu_resource_name: &'a str,
    roles: &'a [Role],
    /// What a pod sees of storage.
    mounts: Vec<Mount<'a>>,
    shm_size: Option<&'a str>,
    run_policy: &'a RunPolicy,
    service_account_name: Option<&'a str>,
    security: &'a Security,
    /// Skipped when empty, so that runs without patches keep their names.
    #[serde(skip_serializing_if = "<[Patch]>::is_empty")]
    patches: &'a [Patch],
}

/// One volume as the pods see it. A claim that every role mounts keeps the
/// form it had before pod-only volumes and per-role mounts existed, an
/// array `(volume, mount path, read-only, claim)`, so that definitions using
/// neither keep their run names.
///
/// What stays out: everything that lives in the claim or the PersistentVolume
/// rather than in the pod (size, access mode, storage class, selector,
/// `volumeName`, the NFS export, the CSI driver, handle, attributes, secret
/// references and mount options). Those objects carry no run hash and keep
/// their names, so a re-created run would mount the same claim anyway.
/// Kubernetes refuses to change most of it in place (a PersistentVolume's
/// source; a claim's spec but for a larger size), and the way out, a new
/// volume `name`, renames the claim, which is hashed. Mount options can
/// change in place: they apply when a node next mounts the volume (a task's
/// pod re-created elsewhere, the next run), and restarting a training for
/// them stays the user's choice rather than a side effect of the edit.
#[derive(Serialize)]
#[serde(untagged)]
enum Mount<'a> {
    Claim(&'a str, &'a str, bool, String),
    /// A pod-only volume, or one that only some roles mount.
    Other(&'a str, &'a str, bool, Option<String>, Extra<'a>),
}

#[derive(Serialize)]
struct Extra<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<PodSource<'a>>,
    /// Sorted; empty when every role mounts the volume.
    #[serde(skip_serializing_if = "<[RoleKind]>::is_empty")]
    roles: &'a [RoleKind],
}

/// The sources that live in the pod template itself.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
enum PodSource<'a> {
    EmptyDir(&'a EmptyDir),
    ConfigMap(&'a Projection),
    Secret(&'a Projection),
}

fn mount<'a>(job: &Job, v: &'a crate::model::job::Volume) -> Mount<'a> {
    let claim = storage::claim_name(job, v);
    let source = match &v.source {
        VolumeSource::EmptyDir(e) => Some(PodSource::EmptyDir(e)),
        VolumeSource::ConfigMap(p) => Some(PodSource::ConfigMap(p)),
        VolumeSource::Secret(p) => Some(PodSource::Secret(p)),
        _ => None,
    };
    match claim {
        Some(claim) if v.roles.is_empty() => {
            Mount::Claim(&v.name, &v.mount_path, v.read_only, claim)
        }
        claim => Mount::Other(
            &v.name,
            &v.mount_path,
            v.read_only,
            claim,
            Extra {
                source,
                roles: &v.roles,
            },
        ),
    }
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
        // The tasks and their cluster spec follow from the roles; the run
        // object (a TFJob's success policy) from the strategy; PyTorch's
        // processes per node reach `torchrun`'s command.
        framework,
        build: _,
        image_pull_policy,
        image_pull_secrets,
        hyperparameters,
        hyperparameter_flags,
        hyperparameter_env,
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
        strategy: (framework.strategy() != Strategy::ParameterServer)
            .then(|| framework.strategy().as_str()),
        namespace,
        name,
        labels,
        annotations,
        image_pull_policy: image_pull_policy.as_deref(),
        image_pull_secrets,
        hyperparameters,
        hyperparameter_flags: *hyperparameter_flags,
        hyperparameter_env: *hyperparameter_env,
        tf_config: framework.tensorflow().is_some_and(|t| t.tf_config),
        legacy_flags: framework.tensorflow().is_some_and(|t| t.legacy_flags),
        pytorch: match framework {
            Framework::Pytorch(p) => Some(p),
            Framework::Tensorflow(_) => None,
        },
        gpu_resource_name,
        roles,
        mounts: volumes.iter().map(|v| mount(job, v)).collect(),
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
