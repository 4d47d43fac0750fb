//! Stage 3 (compile), target `tfjob`: one Kubeflow TFJob (`kubeflow.org/v1`,
//! Training Operator v1.9) per run.
//!
//! The operator creates a pod and a headless Service per task, named
//! `<run>-<role>-<i>`, and injects `TF_CONFIG` itself, so trainc writes none;
//! the legacy flags, when asked for, are derived from the same names and
//! read the task index from the operator's `replica-index` pod label. On
//! success `cleanPodPolicy: Running` deletes the pods still running (the
//! parameter servers).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::compile::crd::{KubeflowRunPolicy, ReplicaSpec, SchedulingPolicy, TfJob, TfJobSpec};
use crate::compile::index::Index;
use crate::compile::patch::Finding;
use crate::compile::pod::Program;
use crate::compile::tensorflow::ClusterSpec;
use crate::compile::{Manifest, Named, Run, meta, pod};
use crate::load::Findings;
use crate::model::definition::RoleKind;
use crate::model::definition::{Strategy, TrainingJob};
use crate::model::job::env_scopes;
use crate::names;

/// Output-format version of this target (see [`crate::compile::target::kubernetes::FORMAT`]).
/// 3: no Volcano queue in `schedulingPolicy`.
pub const FORMAT: u32 = 3;

/// The port the operator reads from the `tensorflow` container (which is
/// [`pod::container`]) for its Services and `TF_CONFIG`.
pub const PORT_NAME: &str = "tfjob-port";
/// The label the operator puts on every pod: the task's index.
pub const REPLICA_INDEX_LABEL: &str = "training.kubeflow.org/replica-index";
const KUEUE_QUEUE_LABEL: &str = "kueue.x-k8s.io/queue-name";

/// The replica type as the TFJob API spells it.
fn replica_type(kind: RoleKind) -> &'static str {
    match kind {
        RoleKind::Chief => "Chief",
        RoleKind::Ps => "PS",
        RoleKind::Worker => "Worker",
        RoleKind::Evaluator => "Evaluator",
    }
}

pub fn compile(run: &Run) -> Result<Vec<Manifest>, Finding> {
    let job = run.job;
    let rp = &job.run_policy;
    // The operator's Service names, as in its `TF_CONFIG`, which lists the
    // evaluator too.
    let cluster = ClusterSpec::with_evaluator(job, |kind, i, port| {
        format!(
            "{}.{}.svc:{port}",
            names::task(&run.name, kind.as_str(), i),
            job.namespace
        )
    });
    let mut replicas = BTreeMap::new();
    for role in &job.roles {
        let placement = pod::Placement {
            role,
            index: Index::Label(REPLICA_INDEX_LABEL),
            run: &run.name,
            hostname: None,
            subdomain: None,
            port_name: PORT_NAME,
            restart_policy: None,
            program: Program::Tensorflow {
                cluster: &cluster,
                config_map: &run.cluster_spec,
                sets_tf_config: false,
            },
        };
        replicas.insert(
            replica_type(role.kind),
            ReplicaSpec {
                replicas: i32::try_from(role.replicas).unwrap_or(i32::MAX),
                restart_policy: rp.restart_policy.clone(),
                template: pod::task_template(job, &placement)?,
            },
        );
    }
    let tasks: u32 = job.roles.iter().map(|r| r.replicas).sum();
    let has_chief = job.roles.iter().any(|r| r.kind == RoleKind::Chief);
    let mut labels = meta::labels(job, meta::run_labels(job, &run.name));
    if let Some(queue) = &rp.queue {
        labels.insert(KUEUE_QUEUE_LABEL.to_owned(), queue.clone());
    }
    let tfjob = TfJob {
        metadata: meta::run_object(job, &run.name, labels),
        spec: TfJobSpec {
            run_policy: KubeflowRunPolicy {
                active_deadline_seconds: rp.active_deadline_seconds,
                backoff_limit: Some(rp.backoff_limit),
                clean_pod_policy: Some("Running"),
                scheduling_policy: Some(SchedulingPolicy {
                    // Every task at once, or none: a gang. Kueue's queue is
                    // its label: this `queue` is Volcano's, which the
                    // operator hands its PodGroup, written only when asked.
                    min_available: Some(i32::try_from(tasks).unwrap_or(i32::MAX)),
                    priority_class: rp.priority_class_name.clone(),
                    queue: rp.volcano_queue.clone(),
                }),
                ttl_seconds_after_finished: rp.ttl_seconds_after_finished,
            },
            // The operator's default ends the run with the chief, else with
            // worker 0: right for the collective strategy, where worker 0
            // saves. Parameter-server workers without a chief (the TF1
            // layout) are peers: the run is done when every one is.
            success_policy: (!has_chief && job.framework.strategy() == Strategy::ParameterServer)
                .then_some("AllWorkers"),
            tf_replica_specs: replicas,
        },
    };
    Ok(vec![
        run.cluster_spec_config_map(&cluster),
        Manifest::new(tfjob, &run.name, &job.name, true, &job.namespace),
    ])
}

/// What this target cannot express, located in the definition.
pub(crate) fn check(cx: &mut Findings, def: &TrainingJob) {
    let spec = &def.spec;
    if !spec.cluster_spec().tf_config {
        cx.error(
            "/spec/clusterSpec/tfConfig",
            "the Training Operator always sets `TF_CONFIG` in a TFJob's pods",
            "remove `tfConfig: false`, or use the `kubernetes` or `jobset` target to manage `TF_CONFIG` yourself",
        );
    }
    for (at, env) in env_scopes(def) {
        if env.contains_key("TF_CONFIG") {
            cx.error_at_key(
                &format!("{at}/TF_CONFIG"),
                "the Training Operator sets `TF_CONFIG` in a TFJob's pods, over this one",
                "remove it; the operator's `TF_CONFIG` names its own Services",
            );
        }
    }
}

/// Names this target generates for a job (see
/// [`crate::compile::target::kubernetes::generated`]).
pub fn generated(run: &str, roles: &[(RoleKind, u32)]) -> Vec<Named> {
    let mut out = vec![Named::new("TFJob", run.to_owned(), names::LABEL_MAX)];
    for (kind, replicas) in roles {
        if let Some(last) = replicas.checked_sub(1) {
            // The operator's pod and Service of the role's last task.
            out.push(Named::new(
                "Service",
                names::task(run, kind.as_str(), last),
                names::LABEL_MAX,
            ));
        }
    }
    out
}

/// The pods a TFJob, as a file holds it, runs: each replica spec's
/// `replicas` (1 when unset).
pub fn pods(tfjob: &Value) -> Vec<(u64, crate::compile::PodRequests<'_>)> {
    crate::compile::crd::replica_pods(&tfjob["spec"]["tfReplicaSpecs"])
}
