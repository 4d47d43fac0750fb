//! Stage 3 (compile), target `pytorchjob`: one Kubeflow PyTorchJob
//! (`kubeflow.org/v1`, Training Operator v1.9) per run.
//!
//! Node 0 is the `Master` replica and the other nodes are `Worker`
//! replicas, all from one pod template. The operator creates a pod and a
//! Service per replica and passes the rendezvous to `torchrun` in `PET_*`
//! variables (`PET_NNODES`, `PET_NODE_RANK`, `PET_MASTER_ADDR`,
//! `PET_MASTER_PORT`, and `PET_NPROC_PER_NODE` from `nprocPerNode`), so
//! trainc's command is `torchrun` and the program alone. The run succeeds
//! with the master; a failed node fails it (see [`crate::compile::pytorch`]
//! for why no node restarts alone), and `cleanPodPolicy: Running` then
//! stops the others.

use std::collections::BTreeMap;

use crate::compile::crd::{
    KubeflowRunPolicy, PyTorchJob, PyTorchJobSpec, ReplicaSpec, SchedulingPolicy,
};
use crate::compile::patch::Finding;
use crate::compile::pod::{Index, Program};
use crate::compile::pytorch::Launch;
use crate::compile::{Manifest, Run, meta, pod};
use crate::model::job::{Framework, RoleKind};
use crate::names;

/// Output-format version of this target (see [`super::kubernetes::FORMAT`]).
pub const FORMAT: u32 = 1;

/// The port the operator reads from the `pytorch` container for its
/// Services and `PET_MASTER_PORT`.
pub const PORT_NAME: &str = "pytorchjob-port";
const KUEUE_QUEUE_LABEL: &str = "kueue.x-k8s.io/queue-name";

pub fn compile(run: &Run) -> Result<Vec<Manifest>, Finding> {
    let job = run.job;
    let rp = &job.run_policy;
    // Validation allows this target for PyTorch jobs with workers only.
    let (Framework::Pytorch(p), Some(role)) = (
        &job.framework,
        job.roles.iter().find(|r| r.kind == RoleKind::Worker),
    ) else {
        return Ok(Vec::new());
    };
    let launch = Launch {
        nnodes: role.replicas,
        nproc_per_node: p.nproc_per_node,
        rendezvous: None,
    };
    let placement = pod::Placement {
        role,
        // The operator says which node a pod is.
        index: Index::Env("PET_NODE_RANK"),
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
        replicas: i32::try_from(n).unwrap_or(i32::MAX),
        restart_policy: rp.restart_policy.clone(),
        template: template.clone(),
    };
    replicas.insert("Master", spec(1));
    if role.replicas > 1 {
        replicas.insert("Worker", spec(role.replicas - 1));
    }
    let mut labels = meta::labels(job, meta::run_labels(job, &run.name));
    if let Some(queue) = &rp.queue {
        labels.insert(KUEUE_QUEUE_LABEL.to_owned(), queue.clone());
    }
    let pytorchjob = PyTorchJob {
        metadata: meta::run_object(job, &run.name, labels),
        spec: PyTorchJobSpec {
            nproc_per_node: p.nproc_per_node.to_string(),
            pytorch_replica_specs: replicas,
            run_policy: KubeflowRunPolicy {
                active_deadline_seconds: rp.active_deadline_seconds,
                backoff_limit: Some(rp.backoff_limit),
                clean_pod_policy: Some("Running"),
                scheduling_policy: Some(SchedulingPolicy {
                    // Every node at once, or none: a gang.
                    min_available: Some(i32::try_from(role.replicas).unwrap_or(i32::MAX)),
                    priority_class: rp.priority_class_name.clone(),
                    queue: rp.queue.clone(),
                }),
                ttl_seconds_after_finished: rp.ttl_seconds_after_finished,
            },
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

/// Names this target generates for a job (see
/// [`super::kubernetes::generated`]).
pub fn generated(run: &str, roles: &[(RoleKind, u32)]) -> Vec<(&'static str, String, usize)> {
    let mut out = vec![
        ("PyTorchJob", run.to_owned(), names::LABEL_MAX),
        ("Service", names::task(run, "master", 0), names::LABEL_MAX),
    ];
    for (_, replicas) in roles {
        // The operator's pod and Service of the last worker (node N-1 is
        // worker N-2).
        if let Some(last) = replicas.checked_sub(2) {
            out.push((
                "Service",
                names::task(run, "worker", last),
                names::LABEL_MAX,
            ));
        }
    }
    out
}
