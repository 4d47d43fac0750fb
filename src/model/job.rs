//! The validated job that the compile stage consumes: every default applied,
//! every choice made. Built only from definitions that passed validation.

use std::collections::BTreeMap;

use std::path::PathBuf;

use k8s_openapi::api::core::v1::Affinity;
use serde::Serialize;

use crate::model::definition::{self as def, HyperparameterStyle, RoleKind, Strategy, Target};
use crate::model::preset::Preset;
use crate::model::project::Defaults;

pub const DEFAULT_NAMESPACE: &str = "default";
pub const DEFAULT_GPU_RESOURCE: &str = "nvidia.com/gpu";
pub const DEFAULT_BACKOFF_LIMIT: i32 = 3;
/// What a run's policy defaults to on its target, for its framework
/// (`compile::target::Backend::run_defaults`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunDefaults {
    /// The restart policy of the tasks' pods.
    pub restart_policy: &'static str,
    /// How often a failed run is started again.
    pub backoff_limit: i32,
}
pub const DEFAULT_ACCESS_MODE: &str = "ReadWriteMany";
/// The UID and GID the generated Dockerfile creates, and pods run as.
pub const DEFAULT_UID: i64 = 10001;
/// TensorBoard's requests and limits unless its definition says otherwise:
/// it mostly waits, but reading large event files takes memory.
pub const TENSORBOARD_CPU: &str = "100m";
pub const TENSORBOARD_CPU_LIMIT: &str = "1";
pub const TENSORBOARD_MEMORY: &str = "1Gi";
/// Where tasks may connect besides their run and DNS, by default: HTTPS,
/// for object storage and dataset and model hubs.
pub const DEFAULT_EGRESS_PORT: u16 = 443;
/// Who may reach a `LoadBalancer` TensorBoard unless the definition says:
/// the private address ranges (RFC 1918), never the internet.
pub const PRIVATE_RANGES: [&str; 3] = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"];

#[derive(Debug, Clone)]
pub struct Job {
    /// Source file, as shown in generated-file headers.
    pub source: String,
    pub name: String,
    pub namespace: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub target: Target,
    /// `major.minor`, from the definition or the preset's default.
    pub framework_version: String,
    /// What the framework makes of the roles.
    pub framework: Framework,
    /// Set when the image is built from source; the roles without an image of
    /// their own then get the built image (see [`crate::image`]).
    pub build: Option<BuildInputs>,
    pub image_pull_policy: Option<String>,
    /// Secrets every pod of the job pulls its image with (tasks and
    /// TensorBoard, whose built image lives beside the job's).
    pub image_pull_secrets: Vec<String>,
    /// `(name, value)`, sorted by name.
    pub hyperparameters: Vec<(String, String)>,
    pub hyperparameter_flags: bool,
    pub hyperparameter_env: bool,
    pub gpu_resource_name: String,
    /// Roles with at least one replica, in the order chief, ps, worker, evaluator.
    pub roles: Vec<Role>,
    pub storage: Vec<Volume>,
    pub shm_size: Option<String>,
    pub tensorboard: Option<TensorBoard>,
    pub run_policy: RunPolicy,
    pub service_account_name: Option<String>,
    pub security: Security,
    /// `None` when the definition opts out of NetworkPolicies.
    pub network_policy: Option<NetworkPolicy>,
    /// `spec.patches`, in order (see [`crate::compile::patch`]).
    pub patches: Vec<Patch>,
}

/// The framework of a job and its framework-specific settings: the seam
/// between the shared pipeline and `compile::tensorflow` /
/// `compile::pytorch`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Framework {
    Tensorflow(Tensorflow),
    Pytorch(Pytorch),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tensorflow {
    pub strategy: Strategy,
    /// Whether trainc writes `TF_CONFIG`.
    pub tf_config: bool,
    /// Whether tasks get TensorFlow 1.x cluster flags.
    pub legacy_flags: bool,
}

/// Serialize: part of the run identity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pytorch {
    /// Processes `torchrun` starts on each node (the `worker` role's pods).
    pub nproc_per_node: u32,
    /// c10d rendezvous; `None`: static. Left out of the identity when
    /// `None`, so that a static run keeps its name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub elastic: Option<Elastic>,
}

/// `torchrun`'s elastic launch, defaults applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Elastic {
    pub min_nodes: u32,
    pub max_nodes: u32,
    /// `--max-restarts`: how often a node's processes restart, every
    /// node's together, before its `torchrun` fails.
    pub max_restarts: u32,
}

/// `torchrun`'s own restarts of a node's processes unless the definition
/// says: a few, as a Job's `backoffLimit` has.
pub const DEFAULT_MAX_RESTARTS: u32 = 3;

impl Framework {
    pub fn kind(&self) -> def::Framework {
        match self {
            Self::Tensorflow(_) => def::Framework::Tensorflow,
            Self::Pytorch(_) => def::Framework::Pytorch,
        }
    }

    pub fn strategy(&self) -> Strategy {
        match self {
            Self::Tensorflow(t) => t.strategy,
            Self::Pytorch(_) => Strategy::DataParallel,
        }
    }

    pub fn tensorflow(&self) -> Option<&Tensorflow> {
        match self {
            Self::Tensorflow(t) => Some(t),
            Self::Pytorch(_) => None,
        }
    }
}

/// One of `spec.patches`. Serialize: part of the run identity, since it
/// reaches every pod of its roles.
#[derive(Debug, Clone, Serialize)]
pub struct Patch {
    /// Empty: every role.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<RoleKind>,
    pub change: Change,
}

/// What a patch does. Objects' keys are sorted: reordering the keys of a
/// patch changes neither what it does nor the run.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Change {
    /// A strategic-merge patch: a partial pod template.
    Strategic(serde_json::Value),
    /// RFC 6902 operations.
    Json(Vec<serde_json::Value>),
}

impl Patch {
    /// Whether the patch changes the pods of `kind`.
    pub fn applies_to(&self, kind: RoleKind) -> bool {
        self.roles.is_empty() || self.roles.contains(&kind)
    }
}

/// The pods' security settings, every default applied. Serialize: part of
/// the run identity, since it reaches every pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Security {
    /// `None`: the image's user (`runAsUser: image`), and then its group,
    /// and no `fsGroup` unless the definition gives them.
    pub run_as_user: Option<i64>,
    pub run_as_group: Option<i64>,
    pub fs_group: Option<i64>,
    pub run_as_non_root: bool,
    pub allow_privilege_escalation: bool,
    pub read_only_root_filesystem: bool,
    pub privileged: bool,
    /// Added after dropping ALL.
    pub add_capabilities: Vec<String>,
    /// `RuntimeDefault`, `Localhost` or `Unconfined`.
    pub seccomp: String,
    pub seccomp_localhost_profile: Option<String>,
    pub automount_service_account_token: bool,
}

impl Security {
    /// The `restricted` defaults, with a definition's relaxations applied.
    pub fn resolve(s: &def::Security, service_account: Option<&str>) -> Self {
        let seccomp = s.seccomp_profile.as_ref();
        let explicit = match s.run_as_user {
            Some(def::RunAsUser::Id(id)) => Some(id),
            _ => None,
        };
        // With the image's user, its group too, and no volume group
        // unless the definition names one.
        let default = (s.run_as_user != Some(def::RunAsUser::Image)).then_some(DEFAULT_UID);
        Self {
            run_as_user: match s.run_as_user {
                None => Some(DEFAULT_UID),
                Some(def::RunAsUser::Id(id)) => Some(id),
                Some(def::RunAsUser::Image) => None,
            },
            // The group and the volumes' group follow an explicit user:
            // `runAsUser: 1000` alone runs as 1000:1000, not 1000:10001.
            run_as_group: s.run_as_group.or(explicit).or(default),
            fs_group: s.fs_group.or(s.run_as_group).or(explicit).or(default),
            run_as_non_root: s.run_as_non_root.unwrap_or(true),
            allow_privilege_escalation: s.allow_privilege_escalation.unwrap_or(false),
            read_only_root_filesystem: s.read_only_root_filesystem.unwrap_or(true),
            privileged: s.privileged.unwrap_or(false),
            add_capabilities: s.capabilities.add.clone(),
            seccomp: seccomp.map_or_else(|| "RuntimeDefault".to_owned(), |p| p.type_.clone()),
            seccomp_localhost_profile: seccomp.and_then(|p| p.localhost_profile.clone()),
            // A named service account is there to be used: its token is
            // mounted unless the definition says otherwise.
            automount_service_account_token: s
                .automount_service_account_token
                .unwrap_or(service_account.is_some()),
        }
    }

    /// What trainc's own pods (TensorBoard) run with: the defaults, always.
    pub fn restricted() -> Self {
        Self::resolve(&def::Security::default(), None)
    }
}

/// A run's NetworkPolicy: ingress only from the run; egress to the run, to
/// DNS and to these rules.
#[derive(Debug, Clone)]
pub struct NetworkPolicy {
    pub egress: Vec<def::EgressRule>,
}

/// `spec.build`, resolved: paths absolute, base image chosen.
#[derive(Debug, Clone)]
pub struct BuildInputs {
    /// The context directory, absolute.
    pub context: PathBuf,
    /// The context as written in generated files: relative to the project root.
    pub context_shown: String,
    pub entrypoint: String,
    pub requirements: Option<String>,
    pub repository: String,
    pub base_image: String,
    pub python: String,
    pub workdir: String,
    /// Where the definition sets `build.context`, for errors found while
    /// hashing it.
    pub at: Option<crate::source::Location>,
}

/// Serialize: every field reaches the pod template, so all of it is part of
/// the run identity ([`crate::compile::identity`]).
#[derive(Debug, Clone, Serialize)]
pub struct Role {
    pub kind: RoleKind,
    pub replicas: u32,
    /// Empty until [`crate::image`] fills it when the job builds its image
    /// and the role has none of its own.
    pub image: String,
    pub command: Vec<String>,
    pub args: Vec<String>,
    /// Job-wide variables overridden by the role's own.
    pub env: BTreeMap<String, EnvValue>,
    /// The job's `envFrom`, then the role's. New fields from here on are
    /// left out of the identity while unused, so that definitions without
    /// them keep their run names.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env_from: Vec<def::EnvFrom>,
    pub port: u16,
    pub cpu: Option<String>,
    pub memory: Option<String>,
    pub gpu: u32,
    pub node_selector: BTreeMap<String, String>,
    /// The role's own, then the GPU toleration trainc adds.
    pub tolerations: Vec<def::Toleration>,
    /// Pod-template labels and annotations of this role, over the job's.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Over [`Job::image_pull_policy`]; `None` where it says the same.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<String>,
    /// Over [`RunPolicy::priority_class_name`]; `None` where it says the same.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topology: Option<Topology>,
    /// Skipped when absent, so that runs without one keep their names.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    /// This role's security when `roles.<role>.security` makes it differ
    /// from the job's. Skipped when absent, as below.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub security: Option<Security>,
    /// Limits above the requests; `None`: no CPU limit, memory's is the
    /// request. Skipped when absent, as above.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_limit: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_limit: Option<String>,
}

impl Role {
    /// What this role's pods run with: its own security, else the job's.
    pub fn security<'a>(&'a self, job: &'a Job) -> &'a Security {
        self.security.as_ref().unwrap_or(&job.security)
    }

    /// The pull policy of the role's container.
    pub fn pull_policy<'a>(&'a self, job: &'a Job) -> Option<&'a str> {
        self.image_pull_policy
            .as_deref()
            .or(job.image_pull_policy.as_deref())
    }

    /// The priority class of the role's pods.
    pub fn priority_class<'a>(&'a self, job: &'a Job) -> Option<&'a str> {
        self.priority_class_name
            .as_deref()
            .or(job.run_policy.priority_class_name.as_deref())
    }
}

/// A variable's value in a task. Serialized untagged, so a literal weighs
/// in the run identity exactly as the plain string it used to be.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum EnvValue {
    Literal(String),
    /// Resolved by the kubelet when the pod starts: the output names the
    /// source, never its value.
    From(EnvSource),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum EnvSource {
    SecretKeyRef(def::KeyRef),
    ConfigMapKeyRef(def::KeyRef),
    FieldRef(def::FieldRef),
    #[serde(rename_all = "camelCase")]
    ResourceFieldRef {
        resource: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        divisor: Option<String>,
    },
}

impl EnvValue {
    fn resolve(v: &def::EnvValue) -> Self {
        let s = match v {
            def::EnvValue::Scalar(s) => return Self::Literal(s.render()),
            def::EnvValue::From(s) => s,
        };
        // Validation makes sure exactly one source is set.
        let source = if let Some(r) = &s.secret_key_ref {
            EnvSource::SecretKeyRef(r.clone())
        } else if let Some(r) = &s.config_map_key_ref {
            EnvSource::ConfigMapKeyRef(r.clone())
        } else if let Some(r) = &s.field_ref {
            EnvSource::FieldRef(r.clone())
        } else if let Some(r) = &s.resource_field_ref {
            EnvSource::ResourceFieldRef {
                resource: r.resource.clone(),
                divisor: r.divisor.as_ref().map(def::Scalar::render),
            }
        } else {
            return Self::Literal(String::new());
        };
        Self::From(source)
    }

    /// The value, when it is written in the definition.
    pub fn literal(&self) -> Option<&str> {
        match self {
            Self::Literal(s) => Some(s),
            Self::From(_) => None,
        }
    }
}

/// Where a role's pods go relative to each other: spread evenly over the
/// domains of a topology, or packed into one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Topology {
    pub pack: bool,
    /// The node label that names a domain (`kubernetes.io/hostname`, ...).
    pub key: String,
    /// Refuse to schedule rather than settle for less.
    pub required: bool,
}

/// The node label of a topology named in a definition: `node`, `zone`, or
/// a label key as written.
pub fn topology_key(name: &str) -> &str {
    match name {
        "node" => "kubernetes.io/hostname",
        "zone" => "topology.kubernetes.io/zone",
        key => key,
    }
}

#[derive(Debug, Clone)]
pub struct Volume {
    pub name: String,
    pub mount_path: String,
    /// Always set for ConfigMap and Secret volumes, which are read-only.
    pub read_only: bool,
    pub source: VolumeSource,
    /// The roles whose pods mount the volume, sorted; empty when every role
    /// does (also when the definition lists every role the job has).
    pub roles: Vec<RoleKind>,
}

impl Volume {
    /// Whether the pods of `role` mount this volume.
    pub fn mounted_by(&self, role: RoleKind) -> bool {
        self.roles.is_empty() || self.roles.contains(&role)
    }
}

#[derive(Debug, Clone)]
pub enum VolumeSource {
    /// A PersistentVolume trainc writes (an NFS export or a CSI volume) and a
    /// claim bound to it by labels.
    Pv {
        source: PvSource,
        mount_options: Vec<String>,
        size: String,
        access_mode: String,
    },
    /// A claim that already exists in the namespace.
    ExistingClaim(String),
    /// A claim for a volume that already exists, chosen by its labels or its
    /// name; `storage_class` is the class the volume has (`None`: none).
    Bind {
        selector: Option<def::Selector>,
        volume_name: Option<String>,
        storage_class: Option<String>,
        size: String,
        access_mode: String,
    },
    /// A claim provisioned by a storage class (the cluster default when `None`).
    Dynamic {
        storage_class: Option<String>,
        size: String,
        access_mode: String,
    },
    /// Scratch space of one pod.
    EmptyDir(EmptyDir),
    ConfigMap(Projection),
    Secret(Projection),
}

impl VolumeSource {
    /// Whether the pod mounts a PersistentVolumeClaim, which other pods (and
    /// TensorBoard) can mount too.
    pub fn is_claim(&self) -> bool {
        !matches!(
            self,
            Self::EmptyDir(_) | Self::ConfigMap(_) | Self::Secret(_)
        )
    }
}

/// Where a PersistentVolume trainc writes keeps its data.
#[derive(Debug, Clone)]
pub enum PvSource {
    Nfs { server: String, path: String },
    Csi(Csi),
}

#[derive(Debug, Clone)]
pub struct Csi {
    pub driver: String,
    pub volume_handle: String,
    pub volume_attributes: BTreeMap<String, String>,
    pub fs_type: Option<String>,
    pub node_stage_secret: Option<SecretRef>,
    pub node_publish_secret: Option<SecretRef>,
}

/// A Secret by name and namespace (the job's unless the definition says).
#[derive(Debug, Clone)]
pub struct SecretRef {
    pub name: String,
    pub namespace: String,
}

/// Serialize, like the other pod-only sources: part of the run identity.
#[derive(Debug, Clone, Serialize)]
pub struct EmptyDir {
    /// `None` for the node's disk, `Memory` for tmpfs.
    pub medium: Option<String>,
    pub size_limit: Option<String>,
}

/// A ConfigMap or Secret volume.
#[derive(Debug, Clone, Serialize)]
pub struct Projection {
    pub name: String,
    pub items: Vec<KeyToPath>,
    pub default_mode: Option<i32>,
    pub optional: Option<bool>,
}

#[derive(Debug, Clone, Serialize)]
pub struct KeyToPath {
    pub key: String,
    pub path: String,
    pub mode: Option<i32>,
}

#[derive(Debug, Clone)]
pub struct TensorBoard {
    pub log_dir: String,
    pub service_type: String,
    /// Empty until [`crate::image`] fills it when trainc builds the image.
    pub image: String,
    /// Set when the definition names no image: trainc writes a build spec.
    pub build: Option<TensorBoardBuild>,
    pub port: u16,
    pub cpu: String,
    pub memory: String,
    pub cpu_limit: String,
    pub memory_limit: String,
    pub load_balancer_source_ranges: Vec<String>,
    /// On its Service only.
    pub service_annotations: BTreeMap<String, String>,
    /// After the flags trainc sets.
    pub args: Vec<String>,
}

/// The TensorBoard image trainc writes a build spec for.
#[derive(Debug, Clone)]
pub struct TensorBoardBuild {
    pub repository: String,
    pub base_image: String,
    pub package: String,
}

/// Serialize: part of the run identity, like [`Role`].
#[derive(Debug, Clone, Serialize)]
pub struct RunPolicy {
    pub backoff_limit: i32,
    pub active_deadline_seconds: Option<i64>,
    pub restart_policy: String,
    pub ttl_seconds_after_finished: Option<i32>,
    pub scheduler_name: Option<String>,
    pub priority_class_name: Option<String>,
    pub queue: Option<String>,
    /// Left out when unset, so that runs named before it keep their names.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub volcano_queue: Option<String>,
}

/// The namespace a definition lands in.
pub fn namespace_of(def: &def::TrainingJob, defaults: &Defaults) -> String {
    def.metadata
        .namespace
        .clone()
        .or_else(|| defaults.namespace.clone())
        .unwrap_or_else(|| DEFAULT_NAMESPACE.to_owned())
}

/// The target a definition compiles to.
pub fn target_of(def: &def::TrainingJob, defaults: &Defaults) -> Target {
    def.spec
        .target
        .or(defaults.target)
        .unwrap_or(Target::Kubernetes)
}

fn scalar_map(m: &BTreeMap<String, def::Scalar>) -> impl Iterator<Item = (String, String)> + '_ {
    m.iter().map(|(k, v)| (k.clone(), v.render()))
}

/// Applies project defaults and built-in defaults. This is the one place
/// defaults live.
/// The resolved job. `root` is the project root, which `source` is relative
/// to; `preset` is the framework's preset; `run_defaults` what its target
/// makes of a run's policy.
pub fn resolve(
    def: &def::TrainingJob,
    defaults: &Defaults,
    source: &str,
    root: &std::path::Path,
    preset: &Preset,
    run_defaults: RunDefaults,
) -> Job {
    let spec = &def.spec;
    let version = spec
        .framework_version
        .clone()
        .unwrap_or_else(|| preset.default_version.clone());
    let images = preset.images(Some(&version));
    let gpus = RoleKind::ALL.iter().any(|k| {
        k.of(&spec.roles)
            .is_some_and(|r| r.replicas > 0 && r.resources.gpu.unwrap_or(0) > 0)
    });
    let build = spec.build.as_ref().map(|b| {
        let dir = std::path::Path::new(source)
            .parent()
            .map(|p| p.join(&b.context))
            .unwrap_or_else(|| PathBuf::from(&b.context));
        BuildInputs {
            context: root.join(&dir),
            context_shown: crate::paths::normalize(&dir),
            entrypoint: b.entrypoint.clone(),
            requirements: b.requirements.clone(),
            repository: b.repository.clone(),
            base_image: b.base_image.clone().unwrap_or_else(|| {
                images
                    .map(|i| if gpus { i.gpu.clone() } else { i.cpu.clone() })
                    .unwrap_or_default()
            }),
            python: preset.python.clone(),
            workdir: preset.workdir.clone(),
            at: None,
        }
    });
    let default_command = build
        .as_ref()
        .map(|b| vec![b.python.clone(), format!("{}/{}", b.workdir, b.entrypoint)])
        .unwrap_or_default();
    let mut labels = defaults.labels.clone();
    labels.extend(def.metadata.labels.clone());
    let mut annotations = defaults.annotations.clone();
    annotations.extend(def.metadata.annotations.clone());
    let styles = spec
        .hyperparameters_as
        .clone()
        .unwrap_or_else(|| vec![HyperparameterStyle::Flags]);
    let gpu_resource_name = spec
        .gpu_resource_name
        .clone()
        .or_else(|| defaults.gpu_resource_name.clone())
        .unwrap_or_else(|| DEFAULT_GPU_RESOURCE.to_owned());
    let roles: Vec<Role> = RoleKind::ALL
        .into_iter()
        .filter_map(|kind| {
            let r = kind.of(&spec.roles)?;
            (r.replicas > 0).then(|| {
                let env: BTreeMap<String, EnvValue> = spec
                    .env
                    .iter()
                    .chain(&r.env)
                    .map(|(k, v)| (k.clone(), EnvValue::resolve(v)))
                    .collect();
                let mut tolerations = r.tolerations.clone();
                let gpu = r.resources.gpu.unwrap_or(0);
                // The taint GPU node pools commonly carry, keyed by the
                // resource: without it, GPU tasks stay pending there.
                if gpu > 0
                    && spec.gpu_toleration != Some(false)
                    && !tolerations
                        .iter()
                        .any(|t| t.key.as_deref() == Some(gpu_resource_name.as_str()))
                {
                    tolerations.push(def::Toleration {
                        key: Some(gpu_resource_name.clone()),
                        operator: Some("Exists".to_owned()),
                        value: None,
                        effect: Some("NoSchedule".to_owned()),
                        toleration_seconds: None,
                    });
                }
                let topology = match (&r.spread, &r.pack) {
                    (Some(s), _) => Some(Topology {
                        pack: false,
                        key: topology_key(&s.across).to_owned(),
                        required: s.required,
                    }),
                    (None, Some(p)) => Some(Topology {
                        pack: true,
                        key: topology_key(&p.within).to_owned(),
                        required: p.required,
                    }),
                    (None, None) => None,
                };
                Role {
                    kind,
                    replicas: r.replicas,
                    image: r
                        .image
                        .clone()
                        .or_else(|| spec.image.clone())
                        .unwrap_or_default(),
                    command: r.command.clone().unwrap_or_else(|| {
                        if spec.command.is_empty() {
                            default_command.clone()
                        } else {
                            spec.command.clone()
                        }
                    }),
                    args: r.args.clone().unwrap_or_else(|| spec.args.clone()),
                    env,
                    port: r.port.unwrap_or(preset.port),
                    cpu: r.resources.cpu.as_ref().map(def::Scalar::render),
                    memory: r.resources.memory.as_ref().map(def::Scalar::render),
                    gpu,
                    node_selector: r.node_selector.clone(),
                    tolerations,
                    env_from: spec.env_from.iter().chain(&r.env_from).cloned().collect(),
                    labels: r.labels.clone(),
                    annotations: r.annotations.clone(),
                    image_pull_policy: r
                        .image_pull_policy
                        .clone()
                        .filter(|p| Some(p) != spec.image_pull_policy.as_ref()),
                    priority_class_name: r
                        .priority_class_name
                        .clone()
                        .filter(|p| Some(p) != spec.run_policy.priority_class_name.as_ref()),
                    topology,
                    // Validation has deserialized it already.
                    affinity: r
                        .affinity
                        .as_ref()
                        .and_then(|a| serde_json::from_value(a.clone()).ok()),
                    security: r.security.as_ref().map(|own| {
                        Security::resolve(
                            &spec.security.under(own),
                            spec.service_account_name.as_deref(),
                        )
                    }),
                    cpu_limit: r.resources.cpu_limit.as_ref().map(def::Scalar::render),
                    // The request is the limit unless another is given.
                    memory_limit: r
                        .resources
                        .memory_limit
                        .as_ref()
                        .map(def::Scalar::render)
                        .filter(|l| {
                            Some(l)
                                != r.resources
                                    .memory
                                    .as_ref()
                                    .map(def::Scalar::render)
                                    .as_ref()
                        }),
                }
            })
        })
        .collect();
    let namespace = namespace_of(def, defaults);
    let storage = spec
        .storage
        .iter()
        .map(|v| resolve_volume(v, &namespace, &roles))
        .collect();
    let rp = &spec.run_policy;
    let target = target_of(def, defaults);
    Job {
        source: source.to_owned(),
        name: def.metadata.name.clone(),
        namespace,
        labels,
        annotations,
        target,
        framework_version: version.clone(),
        framework: match def.framework() {
            def::Framework::Tensorflow => {
                let cluster = spec.cluster_spec();
                Framework::Tensorflow(Tensorflow {
                    strategy: spec.strategy.unwrap_or(Strategy::ParameterServer),
                    tf_config: cluster.tf_config,
                    legacy_flags: cluster.legacy_flags,
                })
            }
            def::Framework::Pytorch => Framework::Pytorch(Pytorch {
                nproc_per_node: spec
                    .torchrun
                    .as_ref()
                    .and_then(|t| t.nproc_per_node)
                    .or_else(|| roles.iter().map(|r| r.gpu).find(|g| *g > 0))
                    .unwrap_or(1),
                elastic: spec.elastic().map(|e| {
                    let nodes = RoleKind::Worker.of(&spec.roles).map_or(0, |w| w.replicas);
                    Elastic {
                        min_nodes: e.min_nodes,
                        max_nodes: e.max_nodes.unwrap_or(nodes),
                        max_restarts: e.max_restarts.unwrap_or(DEFAULT_MAX_RESTARTS),
                    }
                }),
            }),
        },
        build,
        image_pull_policy: spec.image_pull_policy.clone(),
        image_pull_secrets: spec.image_pull_secrets.clone(),
        hyperparameters: scalar_map(&spec.hyperparameters).collect(),
        hyperparameter_flags: styles.contains(&HyperparameterStyle::Flags),
        hyperparameter_env: styles.contains(&HyperparameterStyle::Env),
        gpu_resource_name,
        roles,
        storage,
        shm_size: spec
            .shm_size
            .as_ref()
            .map(def::Scalar::render)
            .or_else(|| preset.shm_size.clone()),
        tensorboard: spec.tensorboard.as_ref().filter(|t| t.enabled).map(|t| {
            let r = &t.resources;
            let cpu = r.cpu.as_ref().map(def::Scalar::render);
            let memory = r.memory.as_ref().map(def::Scalar::render);
            TensorBoard {
                log_dir: t.log_dir.clone(),
                service_type: t.service.clone().unwrap_or_else(|| "ClusterIP".to_owned()),
                image: t.image.clone().unwrap_or_default(),
                build: t.image.is_none().then(|| TensorBoardBuild {
                    repository: tensorboard_repository(spec, t),
                    base_image: preset.tensorboard.base_image.clone(),
                    package: preset.tensorboard.package.clone(),
                }),
                port: t.port.unwrap_or(preset.tensorboard.port),
                cpu_limit: r
                    .cpu_limit
                    .as_ref()
                    .map(def::Scalar::render)
                    .or_else(|| cpu.clone())
                    .unwrap_or_else(|| TENSORBOARD_CPU_LIMIT.to_owned()),
                memory_limit: r
                    .memory_limit
                    .as_ref()
                    .map(def::Scalar::render)
                    .or_else(|| memory.clone())
                    .unwrap_or_else(|| TENSORBOARD_MEMORY.to_owned()),
                cpu: cpu.unwrap_or_else(|| TENSORBOARD_CPU.to_owned()),
                memory: memory.unwrap_or_else(|| TENSORBOARD_MEMORY.to_owned()),
                load_balancer_source_ranges: if t.load_balancer_source_ranges.is_empty() {
                    PRIVATE_RANGES.map(str::to_owned).to_vec()
                } else {
                    t.load_balancer_source_ranges.clone()
                },
                service_annotations: t.service_annotations.clone(),
                args: t.args.clone(),
            }
        }),
        run_policy: RunPolicy {
            backoff_limit: rp.backoff_limit.unwrap_or(run_defaults.backoff_limit),
            active_deadline_seconds: rp.active_deadline_seconds,
            restart_policy: rp
                .restart_policy
                .clone()
                .unwrap_or_else(|| run_defaults.restart_policy.to_owned()),
            ttl_seconds_after_finished: rp.ttl_seconds_after_finished,
            scheduler_name: rp.scheduler_name.clone(),
            priority_class_name: rp.priority_class_name.clone(),
            queue: rp.queue.clone(),
            volcano_queue: rp.volcano_queue.clone(),
        },
        service_account_name: spec.service_account_name.clone(),
        security: Security::resolve(&spec.security, spec.service_account_name.as_deref()),
        network_policy: spec.security.network_policy.enabled.then(|| NetworkPolicy {
            egress: spec
                .security
                .network_policy
                .egress
                .clone()
                .unwrap_or_else(|| {
                    vec![def::EgressRule {
                        ports: vec![DEFAULT_EGRESS_PORT],
                        ..def::EgressRule::default()
                    }]
                }),
        }),
        patches: spec.patches.iter().filter_map(patch).collect(),
    }
}

fn resolve_volume(v: &def::Volume, namespace: &str, roles: &[Role]) -> Volume {
    let size = v.size.as_ref().map(def::Scalar::render).unwrap_or_default();
    let access_mode = v
        .access_mode
        .clone()
        .unwrap_or_else(|| DEFAULT_ACCESS_MODE.to_owned());
    let secret = |r: &Option<def::SecretRef>| {
        r.as_ref().map(|r| SecretRef {
            name: r.name.clone(),
            namespace: r.namespace.clone().unwrap_or_else(|| namespace.to_owned()),
        })
    };
    let mut read_only = v.read_only;
    let source = if let Some(nfs) = &v.nfs {
        VolumeSource::Pv {
            source: PvSource::Nfs {
                server: nfs.server.clone(),
                path: nfs.path.clone(),
            },
            mount_options: nfs.mount_options.clone(),
            size,
            access_mode,
        }
    } else if let Some(csi) = &v.csi {
        VolumeSource::Pv {
            source: PvSource::Csi(Csi {
                driver: csi.driver.clone(),
                volume_handle: csi.volume_handle.clone(),
                volume_attributes: csi.volume_attributes.clone(),
                fs_type: csi.fs_type.clone(),
                node_stage_secret: secret(&csi.node_stage_secret_ref),
                node_publish_secret: secret(&csi.node_publish_secret_ref),
            }),
            mount_options: csi.mount_options.clone(),
            size,
            access_mode,
        }
    } else if let Some(claim) = &v.existing_claim {
        VolumeSource::ExistingClaim(claim.clone())
    } else if v.selector.is_some() || v.volume_name.is_some() {
        VolumeSource::Bind {
            selector: v.selector.clone(),
            volume_name: v.volume_name.clone(),
            storage_class: v.storage_class.clone(),
            size,
            access_mode,
        }
    } else if let Some(e) = &v.empty_dir {
        VolumeSource::EmptyDir(EmptyDir {
            // `""` is the node's disk, as when the field is left out.
            medium: e.medium.clone().filter(|m| !m.is_empty()),
            size_limit: e.size_limit.as_ref().map(def::Scalar::render),
        })
    } else if let Some(c) = &v.config_map {
        read_only = true;
        VolumeSource::ConfigMap(projection(c))
    } else if let Some(s) = &v.secret {
        read_only = true;
        VolumeSource::Secret(projection(s))
    } else {
        VolumeSource::Dynamic {
            storage_class: v.storage_class.clone(),
            size,
            access_mode,
        }
    };
    let mut mounting: Vec<RoleKind> = v.roles.clone();
    mounting.sort();
    mounting.dedup();
    // Listing every role the job has is the same pods as listing none.
    if roles.iter().all(|r| mounting.contains(&r.kind)) {
        mounting.clear();
    }
    Volume {
        name: v.name.clone(),
        mount_path: v.mount_path.clone(),
        read_only,
        source,
        roles: mounting,
    }
}

/// A file mode as validated: a whole number from 0 to 0777.
fn mode(n: &serde_json::Number) -> Option<i32> {
    n.as_i64().and_then(|m| i32::try_from(m).ok())
}

fn projection(p: &def::Projection) -> Projection {
    Projection {
        name: p.name.clone(),
        items: p
            .items
            .iter()
            .map(|i| KeyToPath {
                key: i.key.clone(),
                path: i.path.clone(),
                mode: i.mode.as_ref().and_then(mode),
            })
            .collect(),
        default_mode: p.default_mode.as_ref().and_then(mode),
        optional: p.optional,
    }
}

/// A patch as the compiler applies it. Validation makes sure it has one of
/// `strategic` and `json`, and known roles.
fn patch(p: &def::Patch) -> Option<Patch> {
    let sorted = |v: &serde_json::Value| {
        let mut v = v.clone();
        v.sort_all_objects();
        v
    };
    let change = match (&p.strategic, &p.json) {
        (Some(s), None) => Change::Strategic(sorted(s)),
        (None, Some(ops)) => Change::Json(ops.iter().map(sorted).collect()),
        _ => return None,
    };
    // In a fixed order, so that `[ps, worker]` and `[worker, ps]` are one run.
    let mut roles: Vec<RoleKind> = p.roles.iter().filter_map(|r| RoleKind::parse(r)).collect();
    roles.sort();
    Some(Patch { roles, change })
}

/// Where the TensorBoard image trainc builds goes: the definition's
/// `repository`, else beside the job's own image, `<repository>-tensorboard`.
fn tensorboard_repository(spec: &def::Spec, tb: &def::TensorBoard) -> String {
    if let Some(r) = &tb.repository {
        return r.clone();
    }
    let image = spec
        .build
        .as_ref()
        .map(|b| b.repository.as_str())
        .or_else(|| {
            spec.image.as_deref().or_else(|| {
                RoleKind::ALL
                    .iter()
                    .find_map(|k| k.of(&spec.roles).and_then(|r| r.image.as_deref()))
            })
        });
    // Validation makes sure every job has an image or a build.
    format!("{}-tensorboard", image.map(image_name).unwrap_or_default())
}

/// An image reference split as the distribution reference grammar does:
/// `(name, tag, digest)`. The tag follows the last `:` after the last `/`,
/// so a registry's port is not taken for one.
pub fn split_reference(image: &str) -> (&str, Option<&str>, Option<&str>) {
    let (rest, digest) = match image.split_once('@') {
        Some((r, d)) => (r, Some(d)),
        None => (image, None),
    };
    let slash = rest.rfind('/').map_or(0, |i| i + 1);
    match rest[slash..].rfind(':') {
        Some(i) => (&rest[..slash + i], Some(&rest[slash + i + 1..]), digest),
        None => (rest, None, digest),
    }
}

/// An image reference without its tag and digest.
pub fn image_name(image: &str) -> &str {
    split_reference(image).0
}

/// `HP_` plus the name upper-cased, with anything but letters and digits as `_`.
pub fn hyperparameter_env_name(name: &str) -> String {
    let mut s = String::from("HP_");
    s.extend(name.chars().map(|c| {
        if c.is_ascii_alphanumeric() {
            c.to_ascii_uppercase()
        } else {
            '_'
        }
    }));
    s
}

/// Every `env` map of a definition with its JSON pointer: the job's, then
/// each role's.
pub fn env_scopes(def: &def::TrainingJob) -> Vec<(String, &BTreeMap<String, def::EnvValue>)> {
    let spec = &def.spec;
    let mut scopes = vec![("/spec/env".to_owned(), &spec.env)];
    for kind in RoleKind::ALL {
        if let Some(r) = kind.of(&spec.roles) {
            scopes.push((format!("/spec/roles/{}/env", kind.as_str()), &r.env));
        }
    }
    scopes
}
