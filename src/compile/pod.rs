//! Stage 3 (compile), shared by every target: the pod of one task
//! (container, environment, arguments, resources, volumes). A target says
//! how the task is placed ([`Placement`]); the framework module says what
//! the program is told about the cluster ([`Program`]).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, ConfigMapEnvSource, ConfigMapKeySelector, ConfigMapVolumeSource, Container,
    ContainerPort, EmptyDirVolumeSource, EnvFromSource, EnvVar, EnvVarSource, LocalObjectReference,
    ObjectFieldSelector, PodAffinity, PodAffinityTerm, PodSpec, PodTemplateSpec,
    ResourceFieldSelector, ResourceRequirements, SecretEnvSource, SecretKeySelector, Toleration,
    TopologySpreadConstraint, Volume, VolumeMount, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use crate::compile::index::{INDEX_VAR, Index};
use crate::compile::tensorflow::{self, ClusterSpec};
use crate::compile::{meta, patch, pytorch, security, storage};
use crate::model::Job;
use crate::model::definition::{Framework, Target};
use crate::model::job::{EnvSource, EnvValue, Role, hyperparameter_env_name};

/// The container port's name, unless the target's operator wants another.
pub const PORT_NAME: &str = "tf";
pub const CLUSTER_SPEC_VOLUME: &str = "trainc-cluster-spec";
const SHM_VOLUME: &str = "trainc-shm";

/// The program's container: named after the framework, which is the name
/// the Kubeflow v1 operators look for; on `trainjob`, `node`, the one
/// Kubeflow Trainer sets the trainer's image, command and variables on.
pub fn container(job: &Job) -> &'static str {
    match job.target {
        Target::Trainjob => crate::compile::target::trainjob::CONTAINER,
        _ => job.framework.kind().as_str(),
    }
}

/// The container port's name on the targets without an operator.
pub fn port_name(job: &Job) -> &'static str {
    match job.framework.kind() {
        Framework::Tensorflow => PORT_NAME,
        Framework::Pytorch => pytorch::PORT_NAME,
    }
}

/// What the framework tells one task's program about the run.
#[derive(Debug, Clone, Copy)]
pub enum Program<'a> {
    Tensorflow {
        cluster: &'a ClusterSpec,
        /// The run's cluster-spec ConfigMap, mounted at `/etc/trainc`.
        config_map: &'a str,
        /// Whether trainc writes `TF_CONFIG`; an operator may inject its own.
        sets_tf_config: bool,
    },
    /// `torchrun` starts the program's processes on each node.
    Pytorch(&'a pytorch::Launch),
}

/// What differs between targets in the pod of one task.
#[derive(Debug, Clone)]
pub struct Placement<'a> {
    pub role: &'a Role,
    pub index: Index,
    /// The run's name: its pods carry it as the `trainc.dev/run` label.
    pub run: &'a str,
    /// Where the target names the pod itself.
    pub hostname: Option<String>,
    /// The headless Service whose DNS domain the pod joins.
    pub subdomain: Option<String>,
    pub port_name: &'static str,
    /// `None` where the operator sets it from its replica spec.
    pub restart_policy: Option<String>,
    pub program: Program<'a>,
}

/// Program arguments: the role's own, then hyperparameters, then the
/// framework's (TF1 cluster flags), so user flags come first as in a
/// hand-written command.
pub fn args(job: &Job, role: &Role, framework: Vec<String>) -> Vec<String> {
    let mut a = role.args.clone();
    if job.hyperparameter_flags {
        a.extend(
            job.hyperparameters
                .iter()
                .map(|(k, v)| format!("--{k}={v}")),
        );
    }
    a.extend(framework);
    a
}

/// The task's environment by name: hyperparameters, the job's and role's
/// variables, then the framework's, which nothing overrides. Values are
/// written out where the definition writes them: `trainc run --local`
/// starts a process with this, once it has looked up the references.
pub fn env_vars(
    job: &Job,
    role: &Role,
    framework: Vec<(String, String)>,
) -> BTreeMap<String, EnvValue> {
    let mut vars: BTreeMap<String, EnvValue> = BTreeMap::new();
    if job.hyperparameter_env {
        for (k, v) in &job.hyperparameters {
            vars.insert(hyperparameter_env_name(k), EnvValue::Literal(v.clone()));
        }
    }
    vars.extend(role.env.clone());
    vars.extend(
        framework
            .into_iter()
            .map(|(k, v)| (k, EnvValue::Literal(v))),
    );
    vars
}

impl Program<'_> {
    /// The container's command: the role's, or `torchrun` starting it.
    fn command(&self, role: &Role, index: Index) -> Vec<String> {
        match self {
            Program::Tensorflow { .. } => role.command.clone(),
            Program::Pytorch(launch) => launch.command(&role.command, index),
        }
    }

    fn args(&self, job: &Job, role: &Role, index: Index) -> Vec<String> {
        match self {
            Program::Tensorflow { cluster, .. } => tensorflow::args(job, role.kind, index, cluster),
            Program::Pytorch(_) => Vec::new(),
        }
    }

    fn env(&self, job: &Job, role: &Role, index: Index) -> Vec<(String, String)> {
        match self {
            Program::Tensorflow {
                cluster,
                sets_tf_config,
                ..
            } => tensorflow::env(job, role.kind, index, cluster, *sets_tf_config),
            Program::Pytorch(_) => Vec::new(),
        }
    }
}

/// A variable as the container spec writes it: its value, or where the
/// kubelet reads it from.
fn env_var(name: String, value: EnvValue) -> EnvVar {
    let source = match value {
        EnvValue::Literal(value) => {
            return EnvVar {
                name,
                value: Some(value),
                ..EnvVar::default()
            };
        }
        EnvValue::From(source) => source,
    };
    let value_from = match source {
        EnvSource::SecretKeyRef(r) => EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: r.name,
                key: r.key,
                optional: r.optional,
            }),
            ..EnvVarSource::default()
        },
        EnvSource::ConfigMapKeyRef(r) => EnvVarSource {
            config_map_key_ref: Some(ConfigMapKeySelector {
                name: r.name,
                key: r.key,
                optional: r.optional,
            }),
            ..EnvVarSource::default()
        },
        EnvSource::FieldRef(r) => EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: r.field_path,
                ..ObjectFieldSelector::default()
            }),
            ..EnvVarSource::default()
        },
        EnvSource::ResourceFieldRef { resource, divisor } => EnvVarSource {
            resource_field_ref: Some(ResourceFieldSelector {
                resource,
                divisor: divisor.map(Quantity),
                ..ResourceFieldSelector::default()
            }),
            ..EnvVarSource::default()
        },
    };
    EnvVar {
        name,
        value_from: Some(value_from),
        ..EnvVar::default()
    }
}

/// The container's `envFrom`: the job's, then the role's. Kubernetes gives
/// `env` precedence over it, so nothing here overrides trainc's variables.
fn env_from(role: &Role) -> Option<Vec<EnvFromSource>> {
    (!role.env_from.is_empty()).then(|| {
        role.env_from
            .iter()
            .map(|e| EnvFromSource {
                secret_ref: e.secret_ref.as_ref().map(|r| SecretEnvSource {
                    name: r.name.clone(),
                    optional: r.optional,
                }),
                config_map_ref: e.config_map_ref.as_ref().map(|r| ConfigMapEnvSource {
                    name: r.name.clone(),
                    optional: r.optional,
                }),
                prefix: e.prefix.clone(),
            })
            .collect()
    })
}

/// The container's `env`: the task's index first (Kubernetes expands `$(VAR)`
/// only from variables defined earlier), then the variables read from
/// elsewhere, then those with a value, each sorted by name, the scratch
/// home's among them unless the definition sets its own.
fn env(job: &Job, p: &Placement) -> Vec<EnvVar> {
    let mut out = vec![index_var(p.index)];
    let mut vars: BTreeMap<String, EnvValue> = security::scratch_env()
        .into_iter()
        .map(|(k, v)| (k, EnvValue::Literal(v)))
        .collect();
    vars.extend(env_vars(job, p.role, p.program.env(job, p.role, p.index)));
    // References before values, so that a value can use one
    // (`postgres://u:$(DB_PASSWORD)@db`); a reference expands nothing itself.
    let (references, literals): (Vec<_>, Vec<_>) = vars
        .into_iter()
        .partition(|(_, v)| matches!(v, EnvValue::From(_)));
    out.extend(
        references
            .into_iter()
            .chain(literals)
            .map(|(name, value)| env_var(name, value)),
    );
    out
}

/// [`INDEX_VAR`], on every target, so that `$(TRAINC_TASK_INDEX)` expands in
/// a definition's variables and arguments wherever it runs: written out
/// where the pod template is one task's, else read from the pod.
fn index_var(index: Index) -> EnvVar {
    let read = |field: &str, key: &str| EnvVarSource {
        field_ref: Some(ObjectFieldSelector {
            field_path: format!("metadata.{field}['{key}']"),
            ..ObjectFieldSelector::default()
        }),
        ..EnvVarSource::default()
    };
    let (value, value_from) = match index {
        Index::Fixed(i) => (Some(i.to_string()), None),
        Index::Label(key) => (None, Some(read("labels", key))),
        Index::Annotation(key) => (None, Some(read("annotations", key))),
    };
    EnvVar {
        name: INDEX_VAR.to_owned(),
        value,
        value_from,
    }
}

fn resources(job: &Job, role: &Role) -> Option<ResourceRequirements> {
    let mut requests = BTreeMap::new();
    let mut limits = BTreeMap::new();
    if let Some(cpu) = &role.cpu {
        requests.insert("cpu".to_owned(), Quantity(cpu.clone()));
    }
    // CPU stays unlimited unless the definition says, to avoid throttling.
    if let Some(limit) = &role.cpu_limit {
        limits.insert("cpu".to_owned(), Quantity(limit.clone()));
    }
    if let Some(memory) = &role.memory {
        // A memory limit equal to the request keeps one task's leak from
        // evicting its neighbours, unless the definition allows more.
        requests.insert("memory".to_owned(), Quantity(memory.clone()));
        limits.insert("memory".to_owned(), Quantity(memory.clone()));
    }
    if let Some(limit) = &role.memory_limit {
        limits.insert("memory".to_owned(), Quantity(limit.clone()));
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

/// `imagePullSecrets` of every pod of the job.
pub fn image_pull_secrets(job: &Job) -> Option<Vec<LocalObjectReference>> {
    (!job.image_pull_secrets.is_empty()).then(|| {
        job.image_pull_secrets
            .iter()
            .map(|name| LocalObjectReference { name: name.clone() })
            .collect()
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

/// Where the role's pods go relative to each other: a spread constraint or
/// a pod affinity over the run's pods of the same role.
fn topology(role: &Role, run: &str) -> (Option<Vec<TopologySpreadConstraint>>, Option<Affinity>) {
    let Some(t) = &role.topology else {
        return (None, None);
    };
    let selector = LabelSelector {
        match_labels: Some(BTreeMap::from([
            (meta::RUN.to_owned(), run.to_owned()),
            (meta::ROLE.to_owned(), role.kind.as_str().to_owned()),
        ])),
        ..LabelSelector::default()
    };
    if !t.pack {
        let spread = TopologySpreadConstraint {
            max_skew: 1,
            topology_key: t.key.clone(),
            when_unsatisfiable: if t.required {
                "DoNotSchedule"
            } else {
                "ScheduleAnyway"
            }
            .to_owned(),
            label_selector: Some(selector),
            ..TopologySpreadConstraint::default()
        };
        return (Some(vec![spread]), None);
    }
    let term = PodAffinityTerm {
        label_selector: Some(selector),
        topology_key: t.key.clone(),
        ..PodAffinityTerm::default()
    };
    let affinity = if t.required {
        PodAffinity {
            required_during_scheduling_ignored_during_execution: Some(vec![term]),
            ..PodAffinity::default()
        }
    } else {
        PodAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![
                WeightedPodAffinityTerm {
                    weight: 100,
                    pod_affinity_term: term,
                },
            ]),
            ..PodAffinity::default()
        }
    };
    (
        None,
        Some(Affinity {
            pod_affinity: Some(affinity),
            ..Affinity::default()
        }),
    )
}

/// The role's own `affinity` with `pack`'s pod-affinity term added to it:
/// the scheduler then honours both.
fn merge_affinity(own: Option<Affinity>, pack: Option<Affinity>) -> Option<Affinity> {
    let Some(pack) = pack.and_then(|p| p.pod_affinity) else {
        return own;
    };
    let mut affinity = own.unwrap_or_default();
    let into = affinity
        .pod_affinity
        .get_or_insert_with(PodAffinity::default);
    if let Some(terms) = pack.required_during_scheduling_ignored_during_execution {
        into.required_during_scheduling_ignored_during_execution
            .get_or_insert_with(Vec::new)
            .extend(terms);
    }
    if let Some(terms) = pack.preferred_during_scheduling_ignored_during_execution {
        into.preferred_during_scheduling_ignored_during_execution
            .get_or_insert_with(Vec::new)
            .extend(terms);
    }
    Some(affinity)
}

/// The pod template of one task (or, with a label-borne index, of every
/// task of a role), the job's patches applied (see [`patch`]).
pub fn task_template(job: &Job, p: &Placement) -> Result<PodTemplateSpec, patch::Finding> {
    let role = p.role;
    let mut mounts = storage::mounts(job, role.kind);
    let mut volumes = storage::pod_volumes(job, role.kind);
    let (scratch_volumes, scratch_mounts) = security::scratch();
    // A `Volume` is over a kilobyte, so a `Vec` of them starts with room for
    // one: room for the scratch, cluster-spec and shared-memory volumes at
    // once, rather than a copy of the whole list at each of their pushes.
    volumes.reserve_exact(scratch_volumes.len() + 2);
    mounts.reserve_exact(scratch_mounts.len() + 2);
    mounts.extend(scratch_mounts);
    volumes.extend(scratch_volumes);
    if let Program::Tensorflow { config_map, .. } = p.program {
        mounts.push(VolumeMount {
            name: CLUSTER_SPEC_VOLUME.to_owned(),
            mount_path: crate::names::CLUSTER_SPEC_MOUNT.to_owned(),
            read_only: Some(true),
            ..VolumeMount::default()
        });
        volumes.push(Volume {
            name: CLUSTER_SPEC_VOLUME.to_owned(),
            config_map: Some(ConfigMapVolumeSource {
                name: config_map.to_owned(),
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        });
    }
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
    let command = p.program.command(role, p.index);
    let container = Container {
        name: container(job).to_owned(),
        image: Some(role.image.clone()),
        image_pull_policy: role.pull_policy(job).map(str::to_owned),
        command: (!command.is_empty()).then_some(command),
        args: Some(args(job, role, p.program.args(job, role, p.index))).filter(|a| !a.is_empty()),
        env: Some(env(job, p)).filter(|e| !e.is_empty()),
        env_from: env_from(role),
        ports: Some(vec![ContainerPort {
            name: Some(p.port_name.to_owned()),
            container_port: i32::from(role.port),
            ..ContainerPort::default()
        }]),
        resources: resources(job, role),
        security_context: Some(security::container(role.security(job))),
        volume_mounts: Some(mounts),
        ..Container::default()
    };
    let rp = &job.run_policy;
    let index = match p.index {
        Index::Fixed(i) => Some(i),
        Index::Label(_) | Index::Annotation(_) => None,
    };
    let mut labels = meta::labels(job, meta::task_selector(job, p.run, role.kind, index));
    // Validation keeps the role's keys clear of trainc's.
    labels.extend(role.labels.clone());
    // The user's annotations only: the source path would put the file
    // name into the pod template, and moving a file must not retrain.
    let mut annotations = job.annotations.clone();
    annotations.extend(role.annotations.clone());
    let (topology_spread_constraints, pack) = topology(role, p.run);
    let template = PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(labels),
            annotations: Some(annotations).filter(|a| !a.is_empty()),
            ..ObjectMeta::default()
        }),
        spec: Some(PodSpec {
            containers: vec![container],
            hostname: p.hostname.clone(),
            subdomain: p.subdomain.clone(),
            restart_policy: p.restart_policy.clone(),
            scheduler_name: rp.scheduler_name.clone(),
            priority_class_name: role.priority_class(job).map(str::to_owned),
            service_account_name: job.service_account_name.clone(),
            automount_service_account_token: Some(
                role.security(job).automount_service_account_token,
            ),
            security_context: Some(security::pod(role.security(job))),
            node_selector: (!role.node_selector.is_empty()).then(|| role.node_selector.clone()),
            tolerations: tolerations(role),
            topology_spread_constraints,
            affinity: merge_affinity(role.affinity.clone(), pack),
            image_pull_secrets: image_pull_secrets(job),
            volumes: Some(volumes),
            ..PodSpec::default()
        }),
    };
    patch::apply(job, role.kind, template)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{NodeAffinity, NodeSelector};

    use super::*;

    fn term(key: &str) -> PodAffinityTerm {
        PodAffinityTerm {
            topology_key: key.to_owned(),
            ..PodAffinityTerm::default()
        }
    }

    #[test]
    fn pack_adds_its_term_to_the_roles_own_affinity() {
        let own = Affinity {
            node_affinity: Some(NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(NodeSelector::default()),
                ..NodeAffinity::default()
            }),
            pod_affinity: Some(PodAffinity {
                required_during_scheduling_ignored_during_execution: Some(vec![term("own")]),
                ..PodAffinity::default()
            }),
            ..Affinity::default()
        };
        let pack = Affinity {
            pod_affinity: Some(PodAffinity {
                required_during_scheduling_ignored_during_execution: Some(vec![term("pack")]),
                ..PodAffinity::default()
            }),
            ..Affinity::default()
        };
        let merged = merge_affinity(Some(own.clone()), Some(pack.clone())).expect("affinity");
        assert_eq!(merged.node_affinity, own.node_affinity);
        let keys: Vec<String> = merged
            .pod_affinity
            .and_then(|p| p.required_during_scheduling_ignored_during_execution)
            .unwrap_or_default()
            .into_iter()
            .map(|t| t.topology_key)
            .collect();
        assert_eq!(keys, ["own", "pack"]);
        assert_eq!(merge_affinity(None, Some(pack.clone())), Some(pack));
        assert_eq!(merge_affinity(Some(own.clone()), None), Some(own));
        assert_eq!(merge_affinity(None, None), None);
    }
}
