//! Stage 3: a validated job → typed Kubernetes objects, one module per target.
//!
//! Targets share the pieces that do not depend on the backend (labels, the
//! run identity, pod templates, storage, TensorBoard) and the framework's
//! module (`tensorflow`: the cluster spec; `pytorch`: `torchrun` and its
//! rendezvous); a new target is one more module that assembles them
//! differently.

pub mod crd;
pub mod family;
pub mod identity;
pub mod index;
mod meta;
pub mod network;
pub mod patch;
pub mod pod;
pub mod pytorch;
pub mod security;
pub mod storage;
pub mod target;
pub mod tensorboard;
pub mod tensorflow;

use k8s_openapi::Resource;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job as BatchJob;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolume, PersistentVolumeClaim, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use serde::Serialize;

pub use family::{Family, Tasks};
pub use meta::{FORMAT as FORMAT_ANNOTATION, RUN as RUN_LABEL};
pub use tensorflow::ClusterSpec;

use crate::model::Job;
use crate::model::definition::{Framework, RoleKind, Target};

/// A typed Kubernetes object of any kind trainc generates. Serializes as the
/// object itself.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Object {
    ConfigMap(Box<ConfigMap>),
    Deployment(Box<Deployment>),
    Job(Box<BatchJob>),
    NetworkPolicy(Box<NetworkPolicy>),
    PersistentVolume(Box<PersistentVolume>),
    PersistentVolumeClaim(Box<PersistentVolumeClaim>),
    Service(Box<Service>),
    /// A target's run object ([`crd::CustomResource`]).
    Custom(Box<dyn crd::CustomResource>),
}

macro_rules! object_from {
    ($($kind:path => $variant:ident),* $(,)?) => {$(
        impl From<$kind> for Object {
            fn from(o: $kind) -> Self {
                Object::$variant(Box::new(o))
            }
        }
    )*};
}

object_from! {
    ConfigMap => ConfigMap,
    Deployment => Deployment,
    BatchJob => Job,
    NetworkPolicy => NetworkPolicy,
    PersistentVolume => PersistentVolume,
    PersistentVolumeClaim => PersistentVolumeClaim,
    Service => Service,
}

/// One generated object, ready to be written.
#[derive(Debug, Clone)]
pub struct Manifest {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub namespace: Option<String>,
    /// `metadata.name`; for Jobs it carries the spec hash.
    pub name: String,
    /// The name the file is called after. For Jobs this is the stable task
    /// name without the hash, so a changed Job reads as a change, not as a
    /// deletion plus an addition.
    pub file_stem: String,
    pub object: Object,
}

impl Manifest {
    fn new<T: Resource + Into<Object>>(
        object: T,
        name: &str,
        file_stem: &str,
        namespaced: bool,
        namespace: &str,
    ) -> Self {
        Self {
            api_version: T::API_VERSION,
            kind: T::KIND,
            namespace: namespaced.then(|| namespace.to_owned()),
            name: name.to_owned(),
            file_stem: file_stem.to_owned(),
            object: object.into(),
        }
    }

    /// `job-mnist-worker-0.yaml`: kind and stable name.
    pub fn file_name(&self) -> String {
        format!("{}-{}.yaml", self.kind.to_ascii_lowercase(), self.file_stem)
    }
}

/// All objects of one job, in a stable order.
#[derive(Debug, Clone)]
pub struct CompiledJob {
    pub namespace: String,
    pub name: String,
    pub source: String,
    pub manifests: Vec<Manifest>,
    /// Tasks rendered from one template each (with [`Tasks::Families`]).
    pub families: Vec<Family>,
}

/// The output-format version of a target's runs (see [`identity`]).
pub fn format(target: Target) -> u32 {
    target::backend(target).format
}

/// One training run of a job: what every target compiles.
#[derive(Debug)]
pub struct Run<'a> {
    pub job: &'a Job,
    /// `<job>-<hash>`: see [`identity`].
    pub name: String,
    /// The run's cluster-spec ConfigMap.
    pub cluster_spec: String,
}

impl<'a> Run<'a> {
    pub fn of(job: &'a Job) -> Result<Self, String> {
        let name = identity::run_name(job)?;
        Ok(Self {
            job,
            cluster_spec: crate::names::cluster_spec(&name),
            name,
        })
    }

    /// The cluster spec as files, for review and for programs that read it
    /// from `/etc/trainc` rather than `TF_CONFIG`. Named after the run, like
    /// the tasks that mount it.
    fn cluster_spec_config_map(&self, cluster: &ClusterSpec) -> Manifest {
        let job = self.job;
        let cm = ConfigMap {
            metadata: meta::object(
                job,
                &self.cluster_spec,
                true,
                meta::labels(job, {
                    let mut l = meta::selector(job, "cluster-spec");
                    l.extend(meta::run_selector(&self.name));
                    l
                }),
            ),
            data: Some(cluster.files()),
            ..ConfigMap::default()
        };
        let stem = crate::names::cluster_spec(&job.name);
        Manifest::new(cm, &self.cluster_spec, &stem, true, &job.namespace)
    }
}

/// A run's own objects, with the tasks written as families.
#[derive(Debug, Default)]
pub struct Objects {
    pub manifests: Vec<Manifest>,
    /// A role's tasks rendered from one template (see [`Family`]).
    pub families: Vec<Family>,
}

impl From<Vec<Manifest>> for Objects {
    fn from(manifests: Vec<Manifest>) -> Self {
        Self {
            manifests,
            families: Vec::new(),
        }
    }
}

/// An object a run creates, for the name length and collision checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    pub kind: &'static str,
    pub name: String,
    /// The longest the name may be.
    pub limit: usize,
}

impl Named {
    pub fn new(kind: &'static str, name: String, limit: usize) -> Self {
        Self { kind, name, limit }
    }
}

/// The objects a run creates, given its framework, its name and its roles
/// with their replicas.
pub type NamesOf = fn(Framework, &str, &[(RoleKind, u32)]) -> Vec<Named>;

/// The pods of a run object, as a file holds it: how many it runs at once,
/// each with what one of them requests.
pub type PodsOf = fn(&serde_json::Value) -> Vec<(u64, PodRequests<'_>)>;

/// Where a run object says what one of its pods requests.
#[derive(Debug, Clone, Copy)]
pub enum PodRequests<'a> {
    /// A pod spec: its containers' and init containers' resources.
    Spec(&'a serde_json::Value),
    /// One container's `resources`, where the object holds no pod spec (a
    /// TrainJob's `trainer.resourcesPerNode`).
    Resources(&'a serde_json::Value),
}

/// The run's own objects, as its target writes them, every task's object
/// compiled.
pub fn run_objects(run: &Run) -> Result<Vec<Manifest>, patch::Finding> {
    Ok(objects(run, Tasks::Each)?.manifests)
}

fn objects(run: &Run, tasks: Tasks) -> Result<Objects, patch::Finding> {
    (target::backend(run.job.target).compile)(run, tasks)
}

pub fn compile(job: &Job, tasks: Tasks) -> Result<CompiledJob, String> {
    let run = Run::of(job)?;
    let Objects {
        mut manifests,
        families,
    } = objects(&run, tasks)
        // Validation has applied the patches already (`patch::check`): only a
        // `test` of what the image stage fills in could fail here.
        .map_err(|f| format!("a patch failed at build time: {f}"))?;
    manifests.extend(network::run_policy(&run));
    manifests.extend(storage::manifests(job));
    manifests.extend(tensorboard::manifests(job));
    manifests.sort_by_cached_key(Manifest::file_name);
    Ok(CompiledJob {
        namespace: job.namespace.clone(),
        name: job.name.clone(),
        source: job.source.clone(),
        manifests,
        families,
    })
}
