//! Stage 3 (compile), shared by every target: the pod of one task
//! (container, environment, arguments, resources, volumes). A target says
//! how the task is placed ([`Placement`]); the framework module says what
//! the program is told about the cluster.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ConfigMapVolumeSource, Container, ContainerPort, EmptyDirVolumeSource, EnvVar, EnvVarSource,
    ObjectFieldSelector, PodSpec, PodTemplateSpec, ResourceRequirements, Toleration, Volume,
    VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::compile::tensorflow::{self, ClusterSpec, INDEX_VAR, Index};
use crate::compile::{meta, patch, security, storage};
use crate::model::Job;
use crate::model::job::{Role, hyperparameter_env_name};

pub const CONTAINER: &str = "tensorflow";
/// The container port's name, unless the target's operator wants another.
pub const PORT_NAME: &str = "tf";
pub const CLUSTER_SPEC_VOLUME: &str = "trainc-cluster-spec";
const SHM_VOLUME: &str = "trainc-shm";

/// What differs between targets in the pod of one task.
#[derive(Debug, Clone)]
pub struct Placement<'a> {
    pub role: &'a Role,
    pub index: Index,
    /// The run's name: its pods carry it as the `trainc.dev/run` label.
    pub run: &'a str,
    /// The run's cluster-spec ConfigMap, mounted at `/etc/trainc`.
    pub cluster_spec: &'a str,
    /// `(hostname, subdomain)` where the target names the pod itself.
    pub hostname: Option<(String, String)>,
    pub port_name: &'static str,
    /// `None` where the operator sets it from its replica spec.
    pub restart_policy: Option<String>,
    /// Whether trainc writes `TF_CONFIG`; an operator may inject its own.
    pub sets_tf_config: bool,
}

/// Program arguments: the role's own, then hyperparameters, then the
/// framework's (TF1 cluster flags), so user flags come first as in a
/// hand-written command.
pub fn args(job: &Job, role: &Role, index: Index, cluster: &ClusterSpec) -> Vec<String> {
    let mut a = role.args.clone();
    if job.hyperparameter_flags {
        a.extend(
            job.hyperparameters
                .iter()
                .map(|(k, v)| format!("--{k}={v}")),
        );
    }
    a.extend(tensorflow::args(job, role.kind, index, cluster));
    a
}

/// The task's environment by name: hyperparameters, the job's and role's
/// variables, then the framework's, which nothing overrides.
fn values(
    job: &Job,
    role: &Role,
    index: Index,
    cluster: &ClusterSpec,
    sets_tf_config: bool,
) -> BTreeMap<String, String> {
    let mut vars: BTreeMap<String, String> = BTreeMap::new();
    if job.hyperparameter_env {
        for (k, v) in &job.hyperparameters {
            vars.insert(hyperparameter_env_name(k), v.clone());
        }
    }
    vars.extend(role.env.clone());
    vars.extend(tensorflow::env(
        job,
        role.kind,
        index,
        cluster,
        sets_tf_config,
    ));
    vars
}

/// The environment of task `index` with every value written out: what
/// `trainc run --local` gives a process.
pub fn env_vars(
    job: &Job,
    role: &Role,
    index: u32,
    cluster: &ClusterSpec,
) -> BTreeMap<String, String> {
    values(job, role, Index::Fixed(index), cluster, true)
}

/// The container's `env`: a label-borne index first (Kubernetes expands
/// `$(VAR)` only from variables defined earlier), then every variable
/// sorted by name, the scratch home's among them unless the definition
/// sets its own.
fn env(job: &Job, p: &Placement, cluster: &ClusterSpec) -> Vec<EnvVar> {
    let mut out = Vec::new();
    if let Index::Label(label) = p.index {
        out.push(EnvVar {
            name: INDEX_VAR.to_owned(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    field_path: format!("metadata.labels['{label}']"),
                    ..ObjectFieldSelector::default()
                }),
                ..EnvVarSource::default()
            }),
            ..EnvVar::default()
        });
    }
    let mut vars = security::scratch_env();
    vars.extend(values(job, p.role, p.index, cluster, p.sets_tf_config));
    out.extend(vars.into_iter().map(|(name, value)| EnvVar {
        name,
        value: Some(value),
        ..EnvVar::default()
    }));
    out
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

/// The pod template of one task (or, with a label-borne index, of every
/// task of a role), the job's patches applied (see [`patch`]).
pub fn task_template(
    job: &Job,
    p: &Placement,
    cluster: &ClusterSpec,
) -> Result<PodTemplateSpec, patch::Finding> {
    let role = p.role;
    let mut mounts = storage::mounts(job);
    let mut volumes = storage::pod_volumes(job);
    let (scratch_volumes, scratch_mounts) = security::scratch();
    mounts.extend(scratch_mounts);
    volumes.extend(scratch_volumes);
    mounts.push(VolumeMount {
        name: CLUSTER_SPEC_VOLUME.to_owned(),
        mount_path: crate::names::CLUSTER_SPEC_MOUNT.to_owned(),
        read_only: Some(true),
        ..VolumeMount::default()
    });
    volumes.push(Volume {
        name: CLUSTER_SPEC_VOLUME.to_owned(),
        config_map: Some(ConfigMapVolumeSource {
            name: p.cluster_spec.to_owned(),
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
        args: Some(args(job, role, p.index, cluster)).filter(|a| !a.is_empty()),
        env: Some(env(job, p, cluster)).filter(|e| !e.is_empty()),
        ports: Some(vec![ContainerPort {
            name: Some(p.port_name.to_owned()),
            container_port: i32::from(role.port),
            ..ContainerPort::default()
        }]),
        resources: resources(job, role),
        security_context: Some(security::container(&job.security)),
        volume_mounts: Some(mounts),
        ..Container::default()
    };
    let rp = &job.run_policy;
    let index = match p.index {
        Index::Fixed(i) => Some(i),
        Index::Label(_) => None,
    };
    let (hostname, subdomain) = p.hostname.clone().unzip();
    let template = PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(meta::labels(
                job,
                meta::task_selector(job, p.run, role.kind, index),
            )),
            // The user's annotations only: the source path would put the file
            // name into the pod template, and moving a file must not retrain.
            annotations: Some(job.annotations.clone()).filter(|a| !a.is_empty()),
            ..ObjectMeta::default()
        }),
        spec: Some(PodSpec {
            containers: vec![container],
            hostname,
            subdomain,
            restart_policy: p.restart_policy.clone(),
            scheduler_name: rp.scheduler_name.clone(),
            priority_class_name: rp.priority_class_name.clone(),
            service_account_name: job.service_account_name.clone(),
            automount_service_account_token: Some(job.security.automount_service_account_token),
            security_context: Some(security::pod(&job.security)),
            node_selector: (!role.node_selector.is_empty()).then(|| role.node_selector.clone()),
            tolerations: tolerations(role),
            affinity: role.affinity.clone(),
            volumes: Some(volumes),
            ..PodSpec::default()
        }),
    };
    patch::apply(job, role.kind, template)
}
