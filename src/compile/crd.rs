//! Stage 3 (compile): typed custom resources that k8s-openapi does not know,
//! limited to the fields trainc writes. Field names and shapes follow the
//! CRDs in `shared/crds/` (JobSet `jobset.x-k8s.io/v1alpha2`, TFJob and
//! PyTorchJob `kubeflow.org/v1` of the Training Operator v1.9); `tests/crd.rs` checks
//! every generated object against them. Fields are declared in alphabetical
//! order, after `apiVersion` and `kind`, so the YAML reads like k8s-openapi's.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::JobTemplateSpec;
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
            pub metadata: ObjectMeta,
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

        impl Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                use k8s_openapi::Resource;
                type_meta(s, Self::API_VERSION, Self::KIND, &self.metadata, &self.spec)
            }
        }
    };
}

/// Serializes `apiVersion` and `kind` from the type, as k8s-openapi does.
fn type_meta<S: serde::Serializer, T>(
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
    /// A JobSet: a group of Jobs that start, succeed, fail and restart together.
    JobSet(JobSetSpec), "jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets"
);

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobSetSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_policy: Option<FailurePolicy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<Network>,
    pub replicated_jobs: Vec<ReplicatedJob>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub success_policy: Option<SuccessPolicy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<i32>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FailurePolicy {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_restarts: Option<i32>,
    /// `BlockingRecreate`: a restart waits until every Job of the attempt
    /// is gone, so no old task runs beside the new run's.
    pub restart_strategy: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<FailurePolicyRule>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FailurePolicyRule {
    pub action: &'static str,
    pub name: &'static str,
    pub on_job_failure_reasons: Vec<&'static str>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Network {
    #[serde(rename = "enableDNSHostnames")]
    pub enable_dns_hostnames: bool,
    pub publish_not_ready_addresses: bool,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicatedJob {
    pub name: String,
    pub replicas: i32,
    pub template: JobTemplateSpec,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SuccessPolicy {
    pub operator: &'static str,
    pub target_replicated_jobs: Vec<String>,
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
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaSpec {
    pub replicas: i32,
    pub restart_policy: String,
    pub template: PodTemplateSpec,
}
