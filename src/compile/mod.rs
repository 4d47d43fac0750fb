//! Stage 3: a validated job → typed Kubernetes objects, one module per target.
//!
//! Targets share the pieces that do not depend on the backend (labels, the
//! cluster spec, pod templates, storage, TensorBoard); a new target is one more
//! module that assembles them differently.

pub mod cluster_spec;
mod kubernetes;
mod meta;
pub mod pod;
mod storage;
mod tensorboard;

use k8s_openapi::Resource;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job as BatchJob;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolume, PersistentVolumeClaim, Service};
use serde::Serialize;

pub use cluster_spec::ClusterSpec;

use crate::model::Job;
use crate::model::definition::Target;

/// A typed Kubernetes object of any kind trainc generates. Serializes as the
/// object itself.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Object {
    ConfigMap(Box<ConfigMap>),
    Deployment(Box<Deployment>),
    Job(Box<BatchJob>),
    PersistentVolume(Box<PersistentVolume>),
    PersistentVolumeClaim(Box<PersistentVolumeClaim>),
    Service(Box<Service>),
}

macro_rules! object_from {
    ($($kind:ident => $variant:ident),* $(,)?) => {$(
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
}

pub fn compile(job: &Job) -> Result<CompiledJob, String> {
    let mut manifests = match job.target {
        Target::Kubernetes => kubernetes::compile(job)?,
    };
    manifests.sort_by_cached_key(Manifest::file_name);
    Ok(CompiledJob {
        namespace: job.namespace.clone(),
        name: job.name.clone(),
        source: job.source.clone(),
        manifests,
    })
}
