//! The pod of one task: container, environment, arguments, resources, volumes.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ConfigMapVolumeSource, Container, ContainerPort, EmptyDirVolumeSource, EnvVar, PodSpec,
    PodTemplateSpec, ResourceRequirements, Toleration, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::compile::cluster_spec::ClusterSpec;
use crate::compile::{meta, storage};
use crate::model::Job;
use crate::model::job::{Role, hyperparameter_env_name};
use crate::names;

pub const CONTAINER: &str = "tensorflow";
pub const PORT_NAME: &str = "tf";
const CLUSTER_SPEC_VOLUME: &str = "trainc-cluster-spec";
const SHM_VOLUME: &str = "trainc-shm";

/// Program arguments: the role's own, then hyperparameters, then the TF1
/// cluster flags, so user flags come first as in a hand-written command.
pub fn args(job: &Job, role: &Role, index: u32, cluster: &ClusterSpec) -> Vec<String> {
    let mut a = role.args.clone();
    if job.hyperparameter_flags {
        a.extend(
            job.hyperparameters
                .iter()
                .map(|(k, v)| format!("--{k}={v}")),
        );
    }
    if job.legacy_flags {
        a.extend(cluster.legacy_flags(role.kind, index));
    }
    a
}

/// The task's environment, sorted by name.
pub fn env_vars(
    job: &Job,
    role: &Role,
    index: u32,
    cluster: &ClusterSpec,
) -> BTreeMap<String, String> {
    let mut vars: BTreeMap<String, String> = BTreeMap::new();
    if job.hyperparameter_env {
        for (k, v) in &job.hyperparameters {
            vars.insert(hyperparameter_env_name(k), v.clone());
        }
    }
    vars.extend(role.env.clone());
    if job.tf_config {
        vars.insert("TF_CONFIG".to_owned(), cluster.tf_config(role.kind, index));
    }
    vars
}

fn env(job: &Job, role: &Role, index: u32, cluster: &ClusterSpec) -> Vec<EnvVar> {
    env_vars(job, role, index, cluster)
        .into_iter()
        .map(|(name, value)| EnvVar {
            name,
            value: Some(value),
            ..EnvVar::default()
        })
        .collect()
}

fn resources(job: &Job, role: &Role) -> Option<ResourceRequirements> {
    let mut requests = BTreeMap::new();
    let mut limits = BTreeMap::new();
    if let Some(cpu) = &role.cpu {
        requests.insert("cpu".to_owned(), Quantity(cpu.clone()));
    }
    if let Some(memory) = &role.memory {
        // A memory limit equal to the request keeps one task's leak from
        // evicting its neighbours; CPU stays unlimited to avoid throttling.
        requests.insert("memory".to_owned(), Quantity(memory.clone()));
        limits.insert("memory".to_owned(), Quantity(memory.clone()));
    }
    if role.gpu > 0 {
        limits.insert(
            job.gpu_resource_name.clone(),
            Quantity(role.gpu.to_string()),
        );
    }
    (!requests.is_empty() || !limits.is_empty()).then(|| ResourceRequirements {
        requests: (!requests.is_empty()).then_some(requests),
        limits: (!limits.is_empty()).then_some(limits),
        ..ResourceRequirements::default()
    })
}

fn tolerations(role: &Role) -> Option<Vec<Toleration>> {
    (!role.tolerations.is_empty()).then(|| {
        role.tolerations
            .iter()
            .map(|t| Toleration {
                key: t.key.clone(),
                operator: t.operator.clone(),
                value: t.value.clone(),
                effect: t.effect.clone(),
                toleration_seconds: t.toleration_seconds,
            })
            .collect()
    })
}

/// The pod template of task `index` of `role`.
pub fn task_template(job: &Job, role: &Role, index: u32, cluster: &ClusterSpec) -> PodTemplateSpec {
    let mut mounts = storage::mounts(job);
    let mut volumes = storage::pod_volumes(job);
    mounts.push(VolumeMount {
        name: CLUSTER_SPEC_VOLUME.to_owned(),
        mount_path: names::CLUSTER_SPEC_MOUNT.to_owned(),
        read_only: Some(true),
        ..VolumeMount::default()
    });
    volumes.push(Volume {
        name: CLUSTER_SPEC_VOLUME.to_owned(),
        config_map: Some(ConfigMapVolumeSource {
            name: names::cluster_spec(&job.name),
            ..ConfigMapVolumeSource::default()
        }),
        ..Volume::default()
    });
    if let Some(size) = &job.shm_size {
        mounts.push(VolumeMount {
            name: SHM_VOLUME.to_owned(),
            mount_path: "/dev/shm".to_owned(),
            ..VolumeMount::default()
        });
        volumes.push(Volume {
            name: SHM_VOLUME.to_owned(),
            empty_dir: Some(EmptyDirVolumeSource {
                medium: Some("Memory".to_owned()),
                size_limit: Some(Quantity(size.clone())),
            }),
            ..Volume::default()
        });
    }
    let container = Container {
        name: CONTAINER.to_owned(),
        image: Some(role.image.clone()),
        image_pull_policy: job.image_pull_policy.clone(),
        command: (!role.command.is_empty()).then(|| role.command.clone()),
        args: Some(args(job, role, index, cluster)).filter(|a| !a.is_empty()),
        env: Some(env(job, role, index, cluster)).filter(|e| !e.is_empty()),
        ports: Some(vec![ContainerPort {
            name: Some(PORT_NAME.to_owned()),
            container_port: i32::from(role.port),
            ..ContainerPort::default()
        }]),
        resources: resources(job, role),
        volume_mounts: Some(mounts),
        ..Container::default()
    };
    let rp = &job.run_policy;
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(meta::labels(
                job,
                meta::task_selector(job, role.kind, index),
            )),
            // The user's annotations only: the source path would put the file
            // name into the Job hash, and moving a file must not retrain.
            annotations: Some(job.annotations.clone()).filter(|a| !a.is_empty()),
            ..ObjectMeta::default()
        }),
        spec: Some(PodSpec {
            containers: vec![container],
            restart_policy: Some(rp.restart_policy.clone()),
            scheduler_name: rp.scheduler_name.clone(),
            priority_class_name: rp.priority_class_name.clone(),
            service_account_name: job.service_account_name.clone(),
            node_selector: (!role.node_selector.is_empty()).then(|| role.node_selector.clone()),
            tolerations: tolerations(role),
            volumes: Some(volumes),
            ..PodSpec::default()
        }),
    }
}
