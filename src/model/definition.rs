//! The training definition as written, mirroring `schema/trainingjob.schema.json`.
//!
//! Only documents that passed the schema are deserialized into these types, so
//! a deserialization failure here is a schema/model mismatch, not user error.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::source::pointer_segment;

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TrainingJob {
    pub api_version: String,
    pub kind: String,
    pub metadata: Metadata,
    pub spec: Spec,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Metadata {
    pub name: String,
    pub namespace: Option<String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Framework {
    Tensorflow,
    Pytorch,
}

impl Framework {
    /// The framework's name, which is also its preset's.
    pub fn as_str(self) -> &'static str {
        match self {
            Framework::Tensorflow => "tensorflow",
            Framework::Pytorch => "pytorch",
        }
    }

    /// As the framework is named in messages.
    pub fn display(self) -> &'static str {
        match self {
            Framework::Tensorflow => "TensorFlow",
            Framework::Pytorch => "PyTorch",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// Parameter servers hold the variables; workers (and a TF2 chief, the
    /// coordinator) compute.
    ParameterServer,
    /// `MultiWorkerMirroredStrategy`: every worker holds a copy of the
    /// variables, kept in step by collective all-reduce; no parameter
    /// servers.
    MultiWorkerMirrored,
    /// PyTorch's distributed data parallelism, launched by `torchrun`: one
    /// process per GPU (or one per node), every one holding a copy of the
    /// model.
    DataParallel,
}

impl Strategy {
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::ParameterServer => "parameter-server",
            Strategy::MultiWorkerMirrored => "multi-worker-mirrored",
            Strategy::DataParallel => "data-parallel",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RoleKind {
    Chief,
    Ps,
    Worker,
    Evaluator,
}

impl RoleKind {
    pub const ALL: [RoleKind; 4] = [Self::Chief, Self::Ps, Self::Worker, Self::Evaluator];

    /// The task type as TensorFlow spells it in `TF_CONFIG`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Chief => "chief",
            Self::Ps => "ps",
            Self::Worker => "worker",
            Self::Evaluator => "evaluator",
        }
    }

    /// The role a name in a definition stands for.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }

    pub fn of(self, roles: &Roles) -> Option<&Role> {
        match self {
            Self::Chief => roles.chief.as_ref(),
            Self::Ps => roles.ps.as_ref(),
            Self::Worker => roles.worker.as_ref(),
            Self::Evaluator => roles.evaluator.as_ref(),
        }
    }
}

include!(concat!(env!("OUT_DIR"), "/target.rs"));

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum HyperparameterStyle {
    Flags,
    Env,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Spec {
    pub framework: Option<Framework>,
    pub strategy: Option<Strategy>,
    pub target: Option<Target>,
    pub framework_version: Option<String>,
    pub image: Option<String>,
    pub build: Option<Build>,
    pub image_pull_policy: Option<String>,
    #[serde(default)]
    pub command: Vec<String>,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, EnvValue>,
    #[serde(default)]
    pub env_from: Vec<EnvFrom>,
    #[serde(default)]
    pub hyperparameters: BTreeMap<String, Scalar>,
    pub hyperparameters_as: Option<Vec<HyperparameterStyle>>,
    /// TensorFlow's: how tasks learn the cluster.
    pub cluster_spec: Option<ClusterSpecOptions>,
    /// PyTorch's: how `torchrun` starts the processes of a node.
    pub torchrun: Option<Torchrun>,
    pub gpu_resource_name: Option<String>,
    /// Whether roles with GPUs tolerate the GPU taint without saying so.
    pub gpu_toleration: Option<bool>,
    #[serde(default)]
    pub image_pull_secrets: Vec<String>,
    pub roles: Roles,
    #[serde(default)]
    pub storage: Vec<Volume>,
    pub shm_size: Option<Scalar>,
    pub tensorboard: Option<TensorBoard>,
    #[serde(default)]
    pub run_policy: RunPolicy,
    pub service_account_name: Option<String>,
    #[serde(default)]
    pub security: Security,
    #[serde(default)]
    pub patches: Vec<Patch>,
}

impl Spec {
    /// `torchrun.elastic`, when set.
    pub fn elastic(&self) -> Option<&Elastic> {
        self.torchrun.as_ref().and_then(|t| t.elastic.as_ref())
    }

    /// `clusterSpec`, its defaults filled in.
    pub fn cluster_spec(&self) -> ClusterSpecOptions {
        self.cluster_spec.clone().unwrap_or_default()
    }
}

/// `spec.patches[]`: the escape hatch. Validation makes sure it holds one
/// of `strategic` and `json`, each checked against the Kubernetes schema.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Patch {
    /// Role names; empty: every role.
    #[serde(default)]
    pub roles: Vec<String>,
    /// A partial pod template.
    pub strategic: Option<Value>,
    /// RFC 6902 operations, kept as written: `value: null` and no `value`
    /// differ.
    pub json: Option<Vec<Value>>,
}

/// `spec.security`: relaxations of the `restricted` defaults, field by field.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Security {
    pub run_as_user: Option<RunAsUser>,
    pub run_as_group: Option<i64>,
    pub fs_group: Option<i64>,
    pub run_as_non_root: Option<bool>,
    pub allow_privilege_escalation: Option<bool>,
    pub read_only_root_filesystem: Option<bool>,
    pub privileged: Option<bool>,
    #[serde(default)]
    pub capabilities: Capabilities,
    pub seccomp_profile: Option<SeccompProfile>,
    pub automount_service_account_token: Option<bool>,
    #[serde(default)]
    pub network_policy: NetworkPolicy,
}

/// `runAsUser`: a UID, or `image` (the schema allows no other string).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunAsUser {
    Id(i64),
    /// The user the image declares.
    Image,
}

impl<'de> Deserialize<'de> for RunAsUser {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Id(i64),
            Name(String),
        }
        match Raw::deserialize(d)? {
            Raw::Id(id) => Ok(Self::Id(id)),
            Raw::Name(n) if n == "image" => Ok(Self::Image),
            Raw::Name(n) => Err(serde::de::Error::custom(format!(
                "expected a UID or `image`, found `{n}`"
            ))),
        }
    }
}

impl Security {
    /// `role`'s settings over `self`'s, field by field.
    pub fn under(&self, role: &Security) -> Security {
        Security {
            run_as_user: role.run_as_user.or(self.run_as_user),
            run_as_group: role.run_as_group.or(self.run_as_group),
            fs_group: role.fs_group.or(self.fs_group),
            run_as_non_root: role.run_as_non_root.or(self.run_as_non_root),
            allow_privilege_escalation: role
                .allow_privilege_escalation
                .or(self.allow_privilege_escalation),
            read_only_root_filesystem: role
                .read_only_root_filesystem
                .or(self.read_only_root_filesystem),
            privileged: role.privileged.or(self.privileged),
            capabilities: if role.capabilities.add.is_empty() {
                self.capabilities.clone()
            } else {
                role.capabilities.clone()
            },
            seccomp_profile: role
                .seccomp_profile
                .clone()
                .or_else(|| self.seccomp_profile.clone()),
            automount_service_account_token: role
                .automount_service_account_token
                .or(self.automount_service_account_token),
            network_policy: self.network_policy.clone(),
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Capabilities {
    #[serde(default)]
    pub add: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SeccompProfile {
    #[serde(rename = "type")]
    pub type_: String,
    pub localhost_profile: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkPolicy {
    #[serde(default = "yes")]
    pub enabled: bool,
    pub egress: Option<Vec<EgressRule>>,
}

impl Default for NetworkPolicy {
    fn default() -> Self {
        Self {
            enabled: true,
            egress: None,
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EgressRule {
    pub cidr: Option<String>,
    #[serde(default)]
    pub except: Vec<String>,
    #[serde(default)]
    pub ports: Vec<u16>,
}

/// A string, number or boolean; rendered without quotes. Numbers and
/// booleans are rendered as written once [`TrainingJob::keep_written`] has
/// run: YAML reads `version: 2.10` as the float 2.1, and `lr: 0.00001` would
/// print as `1e-5`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(transparent)]
pub struct Scalar(pub Value);

impl TrainingJob {
    pub fn framework(&self) -> Framework {
        self.spec.framework.unwrap_or(Framework::Tensorflow)
    }

    /// The framework's name, which is also its preset's.
    pub fn framework_name(&self) -> &'static str {
        self.framework().as_str()
    }

    /// Replaces every non-string scalar in a free-form slot (env,
    /// hyperparameters, quantities) by its source text, looked up by JSON
    /// pointer.
    pub fn keep_written(&mut self, text: impl Fn(&str) -> Option<String>) {
        let keep = |pointer: String, v: &mut Scalar| {
            if !v.0.is_string()
                && let Some(t) = text(&pointer)
            {
                v.0 = Value::String(t);
            }
        };
        let spec = &mut self.spec;
        for (k, v) in &mut spec.hyperparameters {
            keep(format!("/spec/hyperparameters/{}", pointer_segment(k)), v);
        }
        let keep_env = |base: &str, env: &mut BTreeMap<String, EnvValue>| {
            for (k, v) in env.iter_mut() {
                let at = format!("{base}/{}", pointer_segment(k));
                match v {
                    EnvValue::Scalar(v) => keep(at, v),
                    EnvValue::From(EnvSource {
                        resource_field_ref:
                            Some(ResourceFieldRef {
                                divisor: Some(d), ..
                            }),
                        ..
                    }) => keep(format!("{at}/resourceFieldRef/divisor"), d),
                    EnvValue::From(_) => {}
                }
            }
        };
        keep_env("/spec/env", &mut spec.env);
        if let Some(v) = &mut spec.shm_size {
            keep("/spec/shmSize".into(), v);
        }
        if let Some(tb) = &mut spec.tensorboard {
            let r = &mut tb.resources;
            for (field, v) in [
                ("cpu", &mut r.cpu),
                ("memory", &mut r.memory),
                ("cpuLimit", &mut r.cpu_limit),
                ("memoryLimit", &mut r.memory_limit),
            ] {
                if let Some(v) = v {
                    keep(format!("/spec/tensorboard/resources/{field}"), v);
                }
            }
        }
        for (i, vol) in spec.storage.iter_mut().enumerate() {
            if let Some(v) = &mut vol.size {
                keep(format!("/spec/storage/{i}/size"), v);
            }
            if let Some(v) = vol.empty_dir.as_mut().and_then(|e| e.size_limit.as_mut()) {
                keep(format!("/spec/storage/{i}/emptyDir/sizeLimit"), v);
            }
        }
        let roles = &mut spec.roles;
        for (name, role) in [
            ("chief", &mut roles.chief),
            ("ps", &mut roles.ps),
            ("worker", &mut roles.worker),
            ("evaluator", &mut roles.evaluator),
        ] {
            let Some(role) = role else { continue };
            let base = format!("/spec/roles/{name}");
            keep_env(&format!("{base}/env"), &mut role.env);
            if let Some(v) = &mut role.resources.cpu {
                keep(format!("{base}/resources/cpu"), v);
            }
            if let Some(v) = &mut role.resources.memory {
                keep(format!("{base}/resources/memory"), v);
            }
        }
    }
}

impl Scalar {
    pub fn render(&self) -> String {
        match &self.0 {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }
    }
}

/// Build inputs instead of an image.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Build {
    pub context: String,
    pub entrypoint: String,
    pub requirements: Option<String>,
    pub repository: String,
    pub base_image: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterSpecOptions {
    #[serde(default = "yes")]
    pub tf_config: bool,
    #[serde(default)]
    pub legacy_flags: bool,
}

impl Default for ClusterSpecOptions {
    fn default() -> Self {
        Self {
            tf_config: true,
            legacy_flags: false,
        }
    }
}

/// `spec.torchrun`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Torchrun {
    /// Processes per node; default: the node's GPUs, else 1.
    pub nproc_per_node: Option<u32>,
    /// c10d rendezvous instead of the static one.
    pub elastic: Option<Elastic>,
}

/// `spec.torchrun.elastic`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Elastic {
    pub min_nodes: u32,
    /// Default: the worker role's replicas.
    pub max_nodes: Option<u32>,
    pub max_restarts: Option<u32>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Roles {
    pub chief: Option<Role>,
    pub ps: Option<Role>,
    pub worker: Option<Role>,
    pub evaluator: Option<Role>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Role {
    pub replicas: u32,
    #[serde(default)]
    pub resources: Resources,
    pub image: Option<String>,
    pub command: Option<Vec<String>>,
    pub args: Option<Vec<String>>,
    #[serde(default)]
    pub env: BTreeMap<String, EnvValue>,
    #[serde(default)]
    pub env_from: Vec<EnvFrom>,
    pub port: Option<u16>,
    #[serde(default)]
    pub node_selector: BTreeMap<String, String>,
    #[serde(default)]
    pub tolerations: Vec<Toleration>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    pub image_pull_policy: Option<String>,
    pub priority_class_name: Option<String>,
    pub spread: Option<Spread>,
    pub pack: Option<Pack>,
    /// A Kubernetes `Affinity`, checked against its schema and type.
    pub affinity: Option<Value>,
    /// Over `spec.security`, field by field.
    pub security: Option<Security>,
}

/// `spread`: the role's tasks spread evenly over the domains of a topology.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spread {
    pub across: String,
    #[serde(default)]
    pub required: bool,
}

/// `pack`: the role's tasks kept together in one domain of a topology.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pack {
    pub within: String,
    #[serde(default)]
    pub required: bool,
}

/// A variable's value as written: a scalar, or a reference the kubelet
/// resolves when the pod starts. Untagged: the schema has already said
/// which one it is, and a reference is the only mapping.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum EnvValue {
    From(EnvSource),
    Scalar(Scalar),
}

/// Where a variable's value comes from: exactly one field is set
/// (validation says so, located).
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnvSource {
    pub secret_key_ref: Option<KeyRef>,
    pub config_map_key_ref: Option<KeyRef>,
    pub field_ref: Option<FieldRef>,
    pub resource_field_ref: Option<ResourceFieldRef>,
}

/// One key of a Secret or ConfigMap.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct KeyRef {
    pub name: String,
    pub key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FieldRef {
    pub field_path: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceFieldRef {
    pub resource: String,
    pub divisor: Option<Scalar>,
}

/// An `envFrom` item: every key of one Secret or ConfigMap (exactly one of
/// the two), optionally prefixed.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnvFrom {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<ObjectRef>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_map_ref: Option<ObjectRef>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ObjectRef {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Resources {
    pub cpu: Option<Scalar>,
    pub memory: Option<Scalar>,
    pub cpu_limit: Option<Scalar>,
    pub memory_limit: Option<Scalar>,
    pub gpu: Option<u32>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Toleration {
    pub key: Option<String>,
    pub operator: Option<String>,
    pub value: Option<String>,
    pub effect: Option<String>,
    pub toleration_seconds: Option<i64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Volume {
    pub name: String,
    pub mount_path: String,
    #[serde(default)]
    pub read_only: bool,
    pub size: Option<Scalar>,
    pub access_mode: Option<String>,
    pub nfs: Option<Nfs>,
    pub csi: Option<Csi>,
    pub existing_claim: Option<String>,
    pub selector: Option<Selector>,
    pub volume_name: Option<String>,
    pub storage_class: Option<String>,
    pub empty_dir: Option<EmptyDir>,
    pub config_map: Option<Projection>,
    pub secret: Option<Projection>,
    /// The roles whose pods mount the volume; empty: every role.
    #[serde(default)]
    pub roles: Vec<RoleKind>,
}

/// What a volume is, by the source it gives. Validation makes sure it
/// gives one; the order here is the one [`crate::model::job::resolve`]
/// follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VolumeKind {
    Nfs,
    Csi,
    ExistingClaim,
    /// A claim for a volume that exists: `selector` and/or `volumeName`.
    Bind,
    EmptyDir,
    ConfigMap,
    Secret,
    /// A dynamically provisioned claim.
    Dynamic,
}

impl VolumeKind {
    /// Whether trainc writes a claim for the volume (which `size` and
    /// `accessMode` then describe).
    pub fn writes_claim(self) -> bool {
        matches!(self, Self::Nfs | Self::Csi | Self::Bind | Self::Dynamic)
    }

    /// Whether the pods mount a claim, which TensorBoard's pod can mount too.
    pub fn is_claim(self) -> bool {
        self.writes_claim() || self == Self::ExistingClaim
    }

    /// As the volume is named in messages.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Nfs => "an NFS volume",
            Self::Csi => "a CSI volume",
            Self::ExistingClaim => "an existing claim",
            Self::Bind => "a claim for an existing volume",
            Self::EmptyDir => "an emptyDir volume",
            Self::ConfigMap => "a ConfigMap volume",
            Self::Secret => "a Secret volume",
            Self::Dynamic => "a dynamically provisioned claim",
        }
    }
}

impl Volume {
    pub fn kind(&self) -> VolumeKind {
        if self.nfs.is_some() {
            VolumeKind::Nfs
        } else if self.csi.is_some() {
            VolumeKind::Csi
        } else if self.existing_claim.is_some() {
            VolumeKind::ExistingClaim
        } else if self.selector.is_some() || self.volume_name.is_some() {
            VolumeKind::Bind
        } else if self.empty_dir.is_some() {
            VolumeKind::EmptyDir
        } else if self.config_map.is_some() {
            VolumeKind::ConfigMap
        } else if self.secret.is_some() {
            VolumeKind::Secret
        } else {
            VolumeKind::Dynamic
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Nfs {
    pub server: String,
    pub path: String,
    #[serde(default)]
    pub mount_options: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Csi {
    pub driver: String,
    pub volume_handle: String,
    #[serde(default)]
    pub volume_attributes: BTreeMap<String, String>,
    pub fs_type: Option<String>,
    #[serde(default)]
    pub mount_options: Vec<String>,
    pub node_stage_secret_ref: Option<SecretRef>,
    pub node_publish_secret_ref: Option<SecretRef>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretRef {
    pub name: String,
    pub namespace: Option<String>,
}

/// A label selector, as Kubernetes writes one.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Selector {
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
    #[serde(default)]
    pub match_expressions: Vec<SelectorRequirement>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SelectorRequirement {
    pub key: String,
    pub operator: String,
    #[serde(default)]
    pub values: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EmptyDir {
    pub medium: Option<String>,
    pub size_limit: Option<Scalar>,
}

/// A ConfigMap or Secret volume. Modes are numbers as the parser read them
/// (a YAML 1.1 octal such as `0440` arrives as the float 440.0, which the
/// rules refuse by its written form).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Projection {
    pub name: String,
    #[serde(default)]
    pub items: Vec<KeyToPath>,
    pub default_mode: Option<serde_json::Number>,
    pub optional: Option<bool>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyToPath {
    pub key: String,
    pub path: String,
    pub mode: Option<serde_json::Number>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TensorBoard {
    #[serde(default = "yes")]
    pub enabled: bool,
    pub log_dir: String,
    pub service: Option<String>,
    pub image: Option<String>,
    pub repository: Option<String>,
    pub port: Option<u16>,
    #[serde(default)]
    pub resources: TensorBoardResources,
    #[serde(default)]
    pub load_balancer_source_ranges: Vec<String>,
    #[serde(default)]
    pub service_annotations: BTreeMap<String, String>,
    #[serde(default)]
    pub args: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TensorBoardResources {
    pub cpu: Option<Scalar>,
    pub memory: Option<Scalar>,
    pub cpu_limit: Option<Scalar>,
    pub memory_limit: Option<Scalar>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunPolicy {
    pub backoff_limit: Option<i32>,
    pub active_deadline_seconds: Option<i64>,
    pub restart_policy: Option<String>,
    pub ttl_seconds_after_finished: Option<i32>,
    pub scheduler_name: Option<String>,
    pub priority_class_name: Option<String>,
    pub queue: Option<String>,
    pub volcano_queue: Option<String>,
}
