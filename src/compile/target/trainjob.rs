//! Stage 3 (compile), target `trainjob`: one Kubeflow Trainer v2 TrainJob
//! (`trainer.kubeflow.org/v1alpha1`, Trainer v2.3) per run, and the
//! TrainingRuntime it runs on, named after the run.
//!
//! Trainer makes a JobSet from the runtime's template and the TrainJob's
//! `trainer`: one replicated Job `node`, one Indexed Job whose indexes are
//! the nodes (`<run>-node-0-<i>`), as on the `jobset` target. Its torch
//! plugin gives each node the launch in `PET_*` variables (`PET_NNODES`,
//! `PET_NPROC_PER_NODE`, `PET_NODE_RANK`, `PET_MASTER_ADDR`,
//! `PET_MASTER_PORT`), which `torchrun` reads as its flags' defaults, so
//! trainc starts `torchrun` without flags and every process sees what it
//! sees on the other targets.
//!
//! Why a runtime per run rather than Trainer's stock `torch-distributed`:
//! that one sets no failure policy, so JobSet restarts a failed node's Job
//! alone, which static rendezvous cannot take; and a runtime's failure and
//! success policies cannot be edited in place (JobSet's `self == oldSelf`
//! rules), so a runtime shared by runs could not follow one run's
//! `backoffLimit`. The run's own runtime carries everything about its pods
//! (security, volumes, scheduling, labels), restarts every node together
//! with `BlockingRecreate`, and changes only with the run's name. The
//! TrainJob says what runs: image, command, variables, resources, nodes.

use k8s_openapi::Resource as _;
use k8s_openapi::api::batch::v1::{JobSpec, JobTemplateSpec};
use k8s_openapi::api::core::v1::{EnvVar, PodTemplateSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use serde_json::Value;

use crate::compile::crd;
use crate::compile::index::Index;
use crate::compile::patch::Finding;
use crate::compile::pod::Program;
use crate::compile::pytorch::Launch;
use crate::compile::target::jobset::{JobSetSpec, ReplicatedJob};
use crate::compile::target::kubernetes::COMPLETION_INDEX;
use crate::compile::{Manifest, Named, PodRequests, Run, meta, pod};
use crate::load::Findings;
use crate::model::definition::{RoleKind, TrainingJob};
use crate::model::job::{Framework, Role};
use crate::names;

/// Output-format version of this target (see [`crate::compile::target::kubernetes::FORMAT`]).
pub const FORMAT: u32 = 1;

/// The container, and the replicated Job, Trainer sets the trainer's
/// image, command, arguments, variables and resources on.
pub const CONTAINER: &str = "node";
const REPLICATED_JOB: &str = "node";
/// The label that makes a replicated Job the one the TrainJob's `trainer`
/// and `numNodes` apply to.
const ANCESTOR_LABEL: &str = "trainer.kubeflow.org/trainjob-ancestor-step";
const KUEUE_QUEUE_LABEL: &str = "kueue.x-k8s.io/queue-name";
/// The port the torch plugin sets `PET_MASTER_PORT` to, whatever the pod
/// declares: node 0's rendezvous store listens on it.
pub const MASTER_PORT: u16 = 29500;
/// What the torch plugin sets in the `node` container; Trainer's webhook
/// refuses a TrainJob whose `trainer.env` sets one.
pub const PLUGIN_ENV: [&str; 5] = [
    "PET_NNODES",
    "PET_NPROC_PER_NODE",
    "PET_NODE_RANK",
    "PET_MASTER_ADDR",
    "PET_MASTER_PORT",
];

pub fn compile(run: &Run) -> Result<Vec<Manifest>, Finding> {
    let job = run.job;
    let (Framework::Pytorch(p), Some(role)) = (
        &job.framework,
        job.roles.iter().find(|r| r.kind == RoleKind::Worker),
    ) else {
        // Validation refuses TensorFlow here, and PyTorch without workers.
        return Ok(Vec::new());
    };
    let launch = Launch {
        nnodes: role.replicas,
        nproc_per_node: p.nproc_per_node,
        // The torch plugin's `PET_*` variables are the launch.
        rendezvous: None,
    };
    let placement = pod::Placement {
        role,
        index: Index::Annotation(COMPLETION_INDEX),
        run: &run.name,
        hostname: None,
        subdomain: None,
        port_name: pod::port_name(job),
        restart_policy: Some(job.run_policy.restart_policy.clone()),
        program: Program::Pytorch(&launch),
    };
    let (template, trainer) = split(pod::task_template(job, &placement)?, role, p.nproc_per_node);
    Ok(vec![runtime(run, role, template), trainjob(run, trainer)])
}

/// The pod template, without what the TrainJob's `trainer` sets on its
/// `node` container (image, command, arguments, variables, resources), and
/// that `trainer`. One place says each, so a reviewer reads the program in
/// the TrainJob and the pod's settings in the runtime.
fn split(
    mut template: PodTemplateSpec,
    role: &Role,
    nproc_per_node: u32,
) -> (PodTemplateSpec, Trainer) {
    let mut trainer = Trainer {
        args: None,
        command: None,
        env: None,
        image: None,
        num_nodes: i32::try_from(role.replicas).unwrap_or(i32::MAX),
        // Said outright: Trainer's default, `auto`, takes a CPU node's CPU
        // count.
        num_proc_per_node: i32::try_from(nproc_per_node).unwrap_or(i32::MAX),
        resources_per_node: None,
    };
    let containers = template
        .spec
        .iter_mut()
        .flat_map(|s| s.containers.iter_mut());
    if let Some(c) = containers.into_iter().find(|c| c.name == CONTAINER) {
        trainer.args = c.args.take();
        trainer.command = c.command.take();
        trainer.env = c.env.take();
        trainer.image = c.image.take();
        trainer.resources_per_node = c.resources.take();
    }
    (template, trainer)
}

/// The run's TrainingRuntime: a JobSet of one replicated Job `node`, which
/// restarts every node together and succeeds when every node has.
fn runtime(run: &Run, role: &Role, template: PodTemplateSpec) -> Manifest {
    let job = run.job;
    let rp = &job.run_policy;
    let nodes = i32::try_from(role.replicas).unwrap_or(i32::MAX);
    let mut labels = meta::labels(job, meta::task_selector(job, &run.name, role.kind, None));
    labels.insert(ANCESTOR_LABEL.to_owned(), "trainer".to_owned());
    let node = ReplicatedJob {
        name: REPLICATED_JOB.to_owned(),
        replicas: 1,
        template: JobTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(labels),
                ..ObjectMeta::default()
            }),
            spec: Some(JobSpec {
                // A failed node fails the Job at once, and the JobSet
                // restarts every node together.
                backoff_limit: Some(0),
                // Trainer sets both from `numNodes`; written here too so
                // the runtime reads as what runs.
                completions: Some(nodes),
                parallelism: Some(nodes),
                completion_mode: Some("Indexed".to_owned()),
                pod_replacement_policy: Some("Failed".to_owned()),
                template,
                ..JobSpec::default()
            }),
        },
    };
    let mut spec = super::jobset::spec(run, vec![node], REPLICATED_JOB);
    if rp.active_deadline_seconds.is_some() {
        // The TrainJob's deadline bounds the whole run, restarts included.
        if let Some(f) = &mut spec.failure_policy {
            f.rules.clear();
        }
    }
    let labels = meta::labels(job, meta::run_labels(job, &run.name));
    let mut metadata = meta::object(job, &run.name, true, labels);
    // Trainer's webhook refuses a TrainJob whose runtime does not exist
    // yet: Argo CD applies the runtime in an earlier wave.
    if let Some(a) = &mut metadata.annotations {
        a.insert(SYNC_WAVE.to_owned(), "-1".to_owned());
    }
    let runtime = TrainingRuntime {
        metadata,
        spec: TrainingRuntimeSpec {
            ml_policy: MlPolicy {
                num_nodes: nodes,
                torch: Torch {},
            },
            template: JobSetTemplate {
                // The JobSet Trainer makes takes its labels from here, not
                // from the TrainJob: the run's, so it is found as the
                // run's other objects are.
                metadata: ObjectMeta {
                    labels: Some(meta::labels(job, meta::run_labels(job, &run.name))),
                    ..ObjectMeta::default()
                },
                spec,
            },
        },
    };
    Manifest::new(runtime, &run.name, &job.name, true, &job.namespace)
}

/// Argo CD's sync wave: lower waves are applied, and healthy, first.
const SYNC_WAVE: &str = "argocd.argoproj.io/sync-wave";

fn trainjob(run: &Run, trainer: Trainer) -> Manifest {
    let job = run.job;
    let rp = &job.run_policy;
    let mut labels = meta::labels(job, meta::run_labels(job, &run.name));
    if let Some(queue) = &rp.queue {
        labels.insert(KUEUE_QUEUE_LABEL.to_owned(), queue.clone());
    }
    let trainjob = TrainJob {
        metadata: meta::run_object(job, &run.name, labels),
        spec: TrainJobSpec {
            active_deadline_seconds: rp.active_deadline_seconds,
            runtime_ref: RuntimeRef {
                api_group: TrainingRuntime::GROUP,
                kind: TrainingRuntime::KIND,
                name: run.name.clone(),
            },
            trainer,
        },
    };
    Manifest::new(trainjob, &run.name, &job.name, true, &job.namespace)
}

/// What this target cannot express, located in the definition.
pub(crate) fn check(cx: &mut Findings, def: &TrainingJob) {
    let spec = &def.spec;
    if spec.elastic().is_some() {
        cx.error_at_key(
            "/spec/torchrun/elastic",
            "Kubeflow Trainer v2.3 has no elastic training: its torch plugin passes `torchrun` a fixed node count and node 0 as a static master, and its API has no elastic policy",
            "remove `elastic`, or use the `kubernetes`, `jobset` or `pytorchjob` target, which run c10d rendezvous",
        );
    }
    for (at, env) in crate::model::job::env_scopes(def) {
        for name in PLUGIN_ENV {
            if env.contains_key(name) {
                cx.error_at_key(
                    &format!("{at}/{name}"),
                    format!("Kubeflow Trainer's torch plugin sets `{name}` on every node, and refuses a TrainJob that sets it"),
                    "remove it: `torchrun` reads the launch from the plugin's `PET_*` variables (docs/pytorch.md)",
                );
            }
        }
    }
    if spec.run_policy.ttl_seconds_after_finished.is_some() {
        cx.error(
            "/spec/runPolicy/ttlSecondsAfterFinished",
            "on `trainjob` the finished run's JobSet would be deleted under its TrainJob, and Trainer v2.3 makes it again from the runtime: the run would train again",
            "remove `ttlSecondsAfterFinished`: a finished run's objects go when the run is pruned (a new run, or the job removed)",
        );
    }
    if let Some(w) = RoleKind::Worker.of(&spec.roles)
        && let Some(port) = w.port
        && port != MASTER_PORT
    {
        cx.error(
            "/spec/roles/worker/port",
            format!("on `trainjob` node 0 listens on port {MASTER_PORT}: Kubeflow Trainer's torch plugin sets `PET_MASTER_PORT` to it, whatever the pod declares"),
            format!("remove `port`, or set it to {MASTER_PORT}"),
        );
    }
}

/// Names this target generates for a job (see
/// [`crate::compile::target::kubernetes::generated`]).
pub fn generated(run: &str, roles: &[(RoleKind, u32)]) -> Vec<Named> {
    let mut out = vec![
        Named::new("TrainJob", run.to_owned(), names::LABEL_MAX),
        Named::new("TrainingRuntime", run.to_owned(), names::LABEL_MAX),
    ];
    for (_, replicas) in roles {
        // Too long, the JobSet Trainer makes would be refused, and the
        // TrainJob would only say so in an event.
        out.extend(super::jobset::last_node_pod(run, REPLICATED_JOB, *replicas));
    }
    out
}

/// The pods a TrainJob, as a file holds it, runs at once: `numNodes` (1
/// when unset), each requesting `resourcesPerNode`.
pub fn pods(trainjob: &Value) -> Vec<(u64, PodRequests<'_>)> {
    let trainer = &trainjob["spec"]["trainer"];
    let nodes = trainer["numNodes"].as_u64().unwrap_or(1);
    vec![(nodes, PodRequests::Resources(&trainer["resourcesPerNode"]))]
}

// Trainer v2.3's custom resources, limited to the fields trainc writes (the
// CRDs in shared/crds/; `tests/crd.rs` checks every generated object
// against them).

crd::custom_resource!(
    /// A Kubeflow Trainer v2 TrainJob: a training run on a runtime.
    TrainJob(TrainJobSpec), "trainer.kubeflow.org", "v1alpha1", "TrainJob", "trainjobs"
);

impl crd::CustomResource for TrainJob {
    fn templates(&self) -> Vec<&PodTemplateSpec> {
        Vec::new()
    }
}

crd::custom_resource!(
    /// A Kubeflow Trainer v2 TrainingRuntime: the JobSet a TrainJob runs as.
    TrainingRuntime(TrainingRuntimeSpec), "trainer.kubeflow.org", "v1alpha1", "TrainingRuntime", "trainingruntimes"
);

impl crd::CustomResource for TrainingRuntime {
    fn templates(&self) -> Vec<&PodTemplateSpec> {
        self.spec.template.spec.templates()
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TrainJobSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<i64>,
    pub runtime_ref: RuntimeRef,
    pub trainer: Trainer,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeRef {
    pub api_group: &'static str,
    pub kind: &'static str,
    pub name: String,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Trainer {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<EnvVar>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    pub num_nodes: i32,
    pub num_proc_per_node: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources_per_node: Option<ResourceRequirements>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TrainingRuntimeSpec {
    pub ml_policy: MlPolicy,
    pub template: JobSetTemplate,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MlPolicy {
    pub num_nodes: i32,
    /// Present, empty: the torch plugin's `PET_*` variables.
    pub torch: Torch,
}

#[derive(Debug, Clone, Serialize)]
pub struct Torch {}

#[derive(Debug, Clone, Serialize)]
pub struct JobSetTemplate {
    pub metadata: ObjectMeta,
    pub spec: JobSetSpec,
}
