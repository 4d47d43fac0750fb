//! Stage 3 (compile): custom resources that k8s-openapi does not know,
//! limited to the fields trainc writes: the `custom_resource!` macro a
//! target declares its run object with (JobSet's is in `target/jobset.rs`), and
//! the Kubeflow Training Operator v1's TFJob and PyTorchJob
//! (`kubeflow.org/v1`, v1.9), which share their replica specs. Field names
//! and shapes follow the CRDs in `shared/crds/`; `tests/crd.rs` checks every
//! generated object against them. Fields are declared in alphabetical order,
//! after `apiVersion` and `kind`, so the YAML reads like k8s-openapi's.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;

/// A custom resource of `metadata` and `spec`, serialized as k8s-openapi
/// serializes its objects: `apiVersion` and `kind` first, from the type.
macro_rules! custom_resource {
    ($(#[$doc:meta])* $ty:ident($spec:ty), $group:literal, $version:literal, $kind:literal, $plural:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone)]
        pub struct $ty {
            pub metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
            pub spec: $spec,
        }

        impl k8s_openapi::Resource for $ty {
            const API_VERSION: &'static str = concat!($group, "/", $version);
            const GROUP: &'static str = $group;
            const KIND: &'static str = $kind;
            const VERSION: &'static str = $version;
            const URL_PATH_SEGMENT: &'static str = $plural;
            type Scope = k8s_openapi::NamespaceResourceScope;
        }

        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                use k8s_openapi::Resource;
                $crate::compile::crd::type_meta(s, Self::API_VERSION, Self::KIND, &self.metadata, &self.spec)
            }
        }

        impl From<$ty> for $crate::compile::Object {
            fn from(o: $ty) -> Self {
                $crate::compile::Object::Custom(Box::new(o))
            }
        }
    };
}

/// What compile and validation ask of a custom resource beyond its fields:
/// a target declares the type with [`custom_resource!`] and implements this.
pub trait CustomResource: Boxed {
    /// Its pod templates, which a definition's patches are checked against.
    fn templates(&self) -> Vec<&PodTemplateSpec>;
}

/// What every custom resource has by being `Clone` and `Serialize`, for
/// holding one as a `dyn` [`CustomResource`] in [`super::Object`].
pub trait Boxed: std::fmt::Debug + Send + Sync {
    fn clone_box(&self) -> Box<dyn CustomResource>;
    /// The object as JSON, in its fields' order: what the emitter writes.
    fn to_json(&self) -> Result<serde_json::Value, serde_json::Error>;
}

impl<T: CustomResource + Clone + Serialize + 'static> Boxed for T {
    fn clone_box(&self) -> Box<dyn CustomResource> {
        Box::new(self.clone())
    }

    fn to_json(&self) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::to_value(self)
    }
}

impl Clone for Box<dyn CustomResource> {
    fn clone(&self) -> Self {
        self.clone_box()
    }
}

impl Serialize for dyn CustomResource {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_json()
            .map_err(serde::ser::Error::custom)?
            .serialize(s)
    }
}

/// A target's own custom resources are declared with it in its module.
pub(crate) use custom_resource;

/// Serializes `apiVersion` and `kind` from the type, as k8s-openapi does.
pub(crate) fn type_meta<S: serde::Serializer, T>(
    s: S,
    api_version: &str,
    kind: &str,
    metadata: &ObjectMeta,
    spec: &T,
) -> Result<S::Ok, S::Error>
where
    T: Serialize,
{
    use serde::ser::SerializeStruct;
    let mut st = s.serialize_struct("Object", 4)?;
    st.serialize_field("apiVersion", api_version)?;
    st.serialize_field("kind", kind)?;
    st.serialize_field("metadata", metadata)?;
    st.serialize_field("spec", spec)?;
    st.end()
}

custom_resource!(
    /// A Kubeflow TFJob: the Training Operator creates a pod and a Service per
    /// task and injects `TF_CONFIG`.
    TfJob(TfJobSpec), "kubeflow.org", "v1", "TFJob", "tfjobs"
);

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TfJobSpec {
    pub run_policy: KubeflowRunPolicy,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub success_policy: Option<&'static str>,
    /// By replica type: `Chief`, `Evaluator`, `PS`, `Worker`.
    pub tf_replica_specs: BTreeMap<&'static str, ReplicaSpec>,
}

custom_resource!(
    /// A Kubeflow PyTorchJob: the Training Operator creates a pod and a
    /// Service per replica and passes the rendezvous to `torchrun` in
    /// `PET_*` variables.
    PyTorchJob(PyTorchJobSpec), "kubeflow.org", "v1", "PyTorchJob", "pytorchjobs"
);

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PyTorchJobSpec {
    /// `torchrun`'s processes per node, as the operator's `PET_NPROC_PER_NODE`.
    pub nproc_per_node: String,
    /// By replica type: `Master`, `Worker`.
    pub pytorch_replica_specs: BTreeMap<&'static str, ReplicaSpec>,
    pub run_policy: KubeflowRunPolicy,
    /// An elastic run's: the operator then passes c10d rendezvous in
    /// `PET_RDZV_*` and `PET_NNODES=min:max`, and the run succeeds when
    /// any worker has.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub elastic_policy: Option<ElasticPolicy>,
}

/// A PyTorchJob's `elasticPolicy`, as much of it as trainc writes.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ElasticPolicy {
    pub min_replicas: i32,
    pub max_replicas: i32,
    pub max_restarts: i32,
    pub rdzv_backend: &'static str,
    pub rdzv_id: String,
    pub rdzv_port: i32,
}

/// `runPolicy` of the Kubeflow v1 jobs (TFJob, PyTorchJob).
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeflowRunPolicy {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backoff_limit: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clean_pod_policy: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduling_policy: Option<SchedulingPolicy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<i32>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SchedulingPolicy {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_available: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority_class: Option<String>,
    /// Volcano's queue, which the operator gives the PodGroup; only when
    /// the definition asks for it (`runPolicy.volcanoQueue`), never Kueue's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaSpec {
    pub replicas: i32,
    pub restart_policy: String,
    pub template: PodTemplateSpec,
}

impl CustomResource for TfJob {
    fn templates(&self) -> Vec<&PodTemplateSpec> {
        self.spec
            .tf_replica_specs
            .values()
            .map(|r| &r.template)
            .collect()
    }
}

impl CustomResource for PyTorchJob {
    fn templates(&self) -> Vec<&PodTemplateSpec> {
        let specs = self.spec.pytorch_replica_specs.values();
        specs.map(|r| &r.template).collect()
    }
}

/// The pods of a Kubeflow operator's replica specs (a TFJob's
/// `tfReplicaSpecs`, a PyTorchJob's `pytorchReplicaSpecs`), as a file holds
/// them: each spec's `replicas` (1 when unset), with its pod template.
pub fn replica_pods(specs: &serde_json::Value) -> Vec<(u64, super::PodRequests<'_>)> {
    let specs = specs.as_object().into_iter().flat_map(|m| m.values());
    specs
        .map(|rs| {
            (
                rs["replicas"].as_u64().unwrap_or(1),
                super::PodRequests::Spec(&rs["template"]["spec"]),
            )
        })
        .collect()
}
