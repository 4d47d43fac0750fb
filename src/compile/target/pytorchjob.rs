//! Stage 3 (compile), target `pytorchjob`: one Kubeflow PyTorchJob
//! (`kubeflow.org/v1`, Training Operator v1.9) per run.
//!
//! Every node is a `Worker` replica, from one pod template; there is no
//! `Master`. With a `Master` the operator adds an `init-pytorch` container
//! to every worker pod (an image of its own that waits for the master's
//! DNS name, 100 tries two seconds apart): it sets no security context, so
//! a namespace that enforces `restricted` refuses the pods (the cluster
//! tests saw it), and a master not ready within about 200 s fails the
//! whole run. Without one the operator adds nothing, and `torchrun` gets
//! its rendezvous from trainc as on the other targets: node 0 is worker 0,
//! reached through the Service the operator makes for it, and each node's
//! rank is its `training.kubeflow.org/replica-index` label. The run
//! succeeds when every node has (as on `kubernetes` and `jobset`); a failed
//! node fails it (see [`crate::compile::pytorch`] for why no node restarts
//! alone), and `cleanPodPolicy: Running` then stops the others.
//!
//! An elastic run has the PyTorchJob's `elasticPolicy` (the same c10d
//! rendezvous trainc passes `torchrun`, at worker 0's host name and
//! Service): the operator then counts the run done when any worker is
//! (each leaves only after all have finished), a worker whose pod restarts
//! in place (`OnFailure`) rejoins, up to `backoffLimit` restarts in all,
//! and the PyTorchJob's scale subresource can add workers up to
//! `maxNodes`.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::compile::crd::{
    ElasticPolicy, KubeflowRunPolicy, PyTorchJob, PyTorchJobSpec, ReplicaSpec, SchedulingPolicy,
};
use crate::compile::index::Index;
use crate::compile::patch::Finding;
use crate::compile::pod::Program;
use crate::compile::pytorch;
use crate::compile::{Manifest, Named, Run, meta, pod};
use crate::load::Findings;
use crate::model::definition::RoleKind;
use crate::model::definition::TrainingJob;
use crate::names;

/// Output-format version of this target (see [`crate::compile::target::kubernetes::FORMAT`]).
/// 2: workers only, with trainc's rendezvous; no Volcano queue.
pub const FORMAT: u32 = 2;

/// The pod label the operator sets to a replica's index: a node's rank.
const REPLICA_INDEX_LABEL: &str = "training.kubeflow.org/replica-index";

/// The port the operator reads from the `pytorch` container for its
/// Services and `PET_MASTER_PORT`.
pub const PORT_NAME: &str = "pytorchjob-port";
const KUEUE_QUEUE_LABEL: &str = "kueue.x-k8s.io/queue-name";

pub fn compile(run: &Run) -> Result<Vec<Manifest>, Finding> {
    let job = run.job;
    let rp = &job.run_policy;
    // Validation allows this target for PyTorch jobs with workers only.
    // Worker 0's Service, which the operator makes with the pod, is named
    // as the pod (the pod's host name).
    let Some((role, launch)) = pytorch::nodes(run, names::task, |node_zero| {
        format!("{node_zero}.{}.svc", job.namespace)
    }) else {
        return Ok(Vec::new());
    };
    let count = |n: u32| i32::try_from(n).unwrap_or(i32::MAX);
    let placement = pod::Placement {
        role,
        // The operator labels each pod with its replica's index.
        index: Index::Label(REPLICA_INDEX_LABEL),
        run: &run.name,
        hostname: None,
        subdomain: None,
        port_name: PORT_NAME,
        restart_policy: None,
        program: Program::Pytorch(&launch),
    };
    let template = pod::task_template(job, &placement)?;
    let mut replicas = BTreeMap::new();
    let spec = |n: u32| ReplicaSpec {
        replicas: count(n),
        restart_policy: rp.restart_policy.clone(),
        template: template.clone(),
    };
    replicas.insert("Worker", spec(role.replicas));
    let mut labels = meta::labels(job, meta::run_labels(job, &run.name));
    if let Some(queue) = &rp.queue {
        labels.insert(KUEUE_QUEUE_LABEL.to_owned(), queue.clone());
    }
    let pytorchjob = PyTorchJob {
        metadata: meta::run_object(job, &run.name, labels),
        spec: PyTorchJobSpec {
            nproc_per_node: launch.nproc_per_node.to_string(),
            pytorch_replica_specs: replicas,
            run_policy: KubeflowRunPolicy {
                active_deadline_seconds: rp.active_deadline_seconds,
                backoff_limit: Some(rp.backoff_limit),
                clean_pod_policy: Some("Running"),
                scheduling_policy: Some(SchedulingPolicy {
                    // Every node at once, or none: a gang (of the fewest
                    // nodes an elastic run trains on). Kueue's queue is
                    // its label above: this `queue` is Volcano's, which the
                    // operator hands its PodGroup, written only when asked.
                    min_available: Some(count(
                        launch.elastic().map_or(role.replicas, |e| e.min_nodes),
                    )),
                    priority_class: rp.priority_class_name.clone(),
                    queue: rp.volcano_queue.clone(),
                }),
                ttl_seconds_after_finished: rp.ttl_seconds_after_finished,
            },
            elastic_policy: launch.elastic().map(|e| ElasticPolicy {
                min_replicas: count(e.min_nodes),
                max_replicas: count(e.max_nodes),
                max_restarts: count(e.max_restarts),
                rdzv_backend: "c10d",
                rdzv_id: run.name.clone(),
                rdzv_port: i32::from(role.port),
            }),
        },
    };
    Ok(vec![Manifest::new(
        pytorchjob,
        &run.name,
        &job.name,
        true,
        &job.namespace,
    )])
}

/// What this target cannot express, located in the definition.
pub(crate) fn check(cx: &mut Findings, def: &TrainingJob) {
    let rp = &def.spec.run_policy;
    if def.spec.elastic().is_some()
        && rp.restart_policy.as_deref() == Some("Never")
        && rp.backoff_limit.is_none_or(|n| n > 0)
    {
        cx.error(
            "/spec/runPolicy/restartPolicy",
            "the Training Operator fails a PyTorchJob when one of its `Never` pods fails: no node would restart, whatever `backoffLimit` says",
            "remove `restartPolicy` (an elastic run's pods restart `OnFailure`), or set `backoffLimit: 0`",
        );
    }
}

/// Names this target generates for a job (see
/// [`crate::compile::target::kubernetes::generated`]).
pub fn generated(run: &str, roles: &[(RoleKind, u32)]) -> Vec<Named> {
    let mut out = vec![Named::new("PyTorchJob", run.to_owned(), names::LABEL_MAX)];
    for (_, replicas) in roles {
        // The operator's pod and Service of the last node.
        if let Some(last) = replicas.checked_sub(1) {
            out.push(Named::new(
                "Service",
                names::task(run, "worker", last),
                names::LABEL_MAX,
            ));
        }
    }
    out
}

/// The pods a PyTorchJob, as a file holds it, runs: each replica spec's
/// `replicas` (1 when unset).
pub fn pods(pytorchjob: &Value) -> Vec<(u64, crate::compile::PodRequests<'_>)> {
    crate::compile::crd::replica_pods(&pytorchjob["spec"]["pytorchReplicaSpecs"])
}
