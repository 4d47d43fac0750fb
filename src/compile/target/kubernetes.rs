//! Stage 3 (compile), target `kubernetes`: plain Jobs and one headless
//! Service per run, no operator needed.
//!
//! Every task is a Job of one pod named `<run>-<role>-<i>`, whose pod takes
//! that name as its host name under the run's headless Service, so its DNS
//! name is `<run>-<role>-<i>.<run>.<namespace>.svc`. The run name carries a
//! hash of the whole run ([`crate::compile::identity`]): a changed definition is a
//! new set of Jobs, a new Service and new DNS names, and the old run is
//! pruned as a whole. Kubernetes itself knows nothing of a TensorFlow run:
//! each Job restarts and finishes on its own, and parameter servers never
//! finish.
//!
//! A PyTorch run's nodes are the indexes of one Indexed Job,
//! `<run>-worker`, whose pods are named `<run>-worker-<i>` under the same
//! Service. The Job succeeds when every node has, and any node's failure
//! fails it at once and stops the others: static rendezvous cannot take a
//! node back alone (see [`crate::compile::pytorch`]). An elastic run's
//! nodes restart alone and rejoin, up to `backoffLimit` times in all, and
//! the Job succeeds when node 0 has; a second Service, named after node 0's
//! host name, is the rendezvous endpoint ([`rendezvous_service`]).

use k8s_openapi::api::batch::v1::{
    Job as BatchJob, JobSpec, PodFailurePolicy, PodFailurePolicyOnExitCodesRequirement,
    PodFailurePolicyRule, SuccessPolicy, SuccessPolicyRule,
};
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use serde_json::Value;

use crate::compile::family::{self, Family, Tasks};
use crate::compile::index::Index;
use crate::compile::patch::Finding;
use crate::compile::pod::Program;
use crate::compile::tensorflow::ClusterSpec;
use crate::compile::{Manifest, Named, Objects, PodRequests, Run, meta, pod};
use crate::model::definition::Framework as FrameworkKind;
use crate::model::definition::RoleKind;
use crate::model::job::{Framework, Role};
use crate::names;

/// Output-format version of this target: bump it whenever a release renders
/// a run's objects differently, so that every run gets a new name.
/// 3: a PyTorch node's rank read from the completion-index annotation.
/// 4: `TRAINC_TASK_INDEX` in every TensorFlow task, so that a definition's
/// `$(TRAINC_TASK_INDEX)` expands.
pub const FORMAT: u32 = 4;

const KUEUE_QUEUE_LABEL: &str = "kueue.x-k8s.io/queue-name";
/// The annotation the Job controller puts on every pod of an Indexed Job:
/// its completion index (see [`Index::Annotation`]).
pub const COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";

pub fn compile(run: &Run, tasks: Tasks) -> Result<Objects, Finding> {
    match &run.job.framework {
        Framework::Tensorflow(_) => tensorflow(run, tasks),
        Framework::Pytorch(_) => pytorch(run).map(Objects::from),
    }
}

fn tensorflow(run: &Run, tasks: Tasks) -> Result<Objects, Finding> {
    let job = run.job;
    let cluster = ClusterSpec::with_hosts(job, |kind, i, port| {
        format!(
            "{}.{}.{}.svc:{port}",
            names::task(&run.name, kind.as_str(), i),
            run.name,
            job.namespace
        )
    });
    let mut out = vec![run.cluster_spec_config_map(&cluster), service(run)];
    let mut families = Vec::new();
    for role in &job.roles {
        if tasks == Tasks::Families
            && role.replicas >= family::MIN_TASKS
            && let Some(f) = family(run, role, &cluster)?
        {
            families.push(f);
            continue;
        }
        for index in 0..role.replicas {
            out.push(task_job(run, role, index, &cluster)?);
        }
    }
    Ok(Objects {
        manifests: out,
        families,
    })
}

/// The role's tasks as one [`Family`]; `None` when the sentinel's Job does
/// not compile (a patch's `test` of what holds the index, which validation
/// refuses where a role has more than one task), so that each task is
/// compiled alone and a failure is the one of the task it is.
fn family(run: &Run, role: &Role, cluster: &ClusterSpec) -> Result<Option<Family>, Finding> {
    let first = task_job(run, role, 0, cluster)?;
    let Ok(template) = task_job(run, role, family::SENTINEL, cluster) else {
        return Ok(None);
    };
    Ok(Some(Family {
        first,
        template,
        others: 1..role.replicas,
    }))
}

/// The run's headless Service: the DNS domain of its pods, which set it as
/// their `subdomain`. It exists only for DNS, so it lists no ports.
fn service(run: &Run) -> Manifest {
    let job = run.job;
    let svc = Service {
        metadata: meta::object(
            job,
            &run.name,
            true,
            meta::labels(job, meta::run_labels(job, &run.name)),
        ),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".to_owned()),
            // Tasks must find each other before any is ready, or a parameter
            // server and a worker wait on each other forever.
            publish_not_ready_addresses: Some(true),
            selector: Some(meta::run_selector(&run.name)),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    };
    Manifest::new(svc, &run.name, &job.name, true, &job.namespace)
}

fn task_job(
    run: &Run,
    role: &Role,
    index: u32,
    cluster: &ClusterSpec,
) -> Result<Manifest, Finding> {
    let job = run.job;
    let rp = &job.run_policy;
    let name = names::task(&run.name, role.kind.as_str(), index);
    let placement = pod::Placement {
        role,
        index: Index::Fixed(index),
        run: &run.name,
        // The evaluator serves no one, but a host name costs nothing and
        // keeps every task alike.
        hostname: Some(name.clone()),
        subdomain: Some(run.name.clone()),
        port_name: pod::PORT_NAME,
        restart_policy: Some(rp.restart_policy.clone()),
        program: Program::Tensorflow {
            cluster,
            config_map: &run.cluster_spec,
            sets_tf_config: true,
        },
    };
    let spec = JobSpec {
        backoff_limit: Some(rp.backoff_limit),
        active_deadline_seconds: rp.active_deadline_seconds,
        // Off unless asked for: a GitOps controller re-creates a deleted Job,
        // which would then train again.
        ttl_seconds_after_finished: rp.ttl_seconds_after_finished,
        // A replacement pod only once the old one is gone: the two would
        // share a host name, and a terminating pod stays in DNS.
        pod_replacement_policy: Some("Failed".to_owned()),
        template: pod::task_template(job, &placement)?,
        ..JobSpec::default()
    };
    let stem = names::task(&job.name, role.kind.as_str(), index);
    Ok(batch_job(run, role, Some(index), &name, &stem, spec))
}

/// A Job of the run: the tasks' labels (and the Kueue queue's) on it.
fn batch_job(
    run: &Run,
    role: &Role,
    index: Option<u32>,
    name: &str,
    stem: &str,
    spec: JobSpec,
) -> Manifest {
    let job = run.job;
    let mut labels = meta::labels(job, meta::task_selector(job, &run.name, role.kind, index));
    if let Some(queue) = &job.run_policy.queue {
        labels.insert(KUEUE_QUEUE_LABEL.to_owned(), queue.clone());
    }
    let batch = BatchJob {
        metadata: meta::run_object(job, name, labels),
        spec: Some(spec),
        ..BatchJob::default()
    };
    Manifest::new(batch, name, stem, true, &job.namespace)
}

/// A PyTorch run: the Service and one Indexed Job of every node (and an
/// elastic run's rendezvous Service).
fn pytorch(run: &Run) -> Result<Vec<Manifest>, Finding> {
    let job = run.job;
    let rp = &job.run_policy;
    let mut out = vec![service(run)];
    let Some((role, launch)) = crate::compile::pytorch::nodes(run, names::task, |node_zero| {
        format!("{node_zero}.{}.{}.svc", run.name, job.namespace)
    }) else {
        return Ok(out);
    };
    let elastic = launch.elastic().is_some();
    if elastic {
        out.push(rendezvous_service(run, names::task, role.port));
    }
    let name = names::role_job(&run.name, role.kind.as_str());
    let placement = pod::Placement {
        role,
        index: Index::Annotation(COMPLETION_INDEX),
        run: &run.name,
        // The Job controller names each pod `<job>-<index>`.
        hostname: None,
        subdomain: Some(run.name.clone()),
        port_name: pod::port_name(job),
        restart_policy: Some(rp.restart_policy.clone()),
        program: Program::Pytorch(&launch),
    };
    let nodes = i32::try_from(role.replicas).unwrap_or(i32::MAX);
    let spec = JobSpec {
        completion_mode: Some("Indexed".to_owned()),
        completions: Some(nodes),
        parallelism: Some(nodes),
        // Static: 0 unless the definition says (and validation refuses
        // more), as a node replaced alone would wait for its peers forever.
        // Elastic: the node restarts of the whole run.
        backoff_limit: Some(rp.backoff_limit),
        pod_failure_policy: (!elastic).then(fail_on_any_node),
        success_policy: elastic.then(node_zero_succeeded),
        active_deadline_seconds: rp.active_deadline_seconds,
        ttl_seconds_after_finished: rp.ttl_seconds_after_finished,
        pod_replacement_policy: Some("Failed".to_owned()),
        template: pod::task_template(job, &placement)?,
        ..JobSpec::default()
    };
    let stem = names::role_job(&job.name, role.kind.as_str());
    out.push(batch_job(run, role, None, &name, &stem, spec));
    Ok(out)
}

/// A static run's failure: said outright, and named in the Job's failure
/// condition, a rank that fails fails the run, and the Job controller
/// stops the others.
fn fail_on_any_node() -> PodFailurePolicy {
    PodFailurePolicy {
        rules: vec![PodFailurePolicyRule {
            action: "FailJob".to_owned(),
            on_exit_codes: Some(PodFailurePolicyOnExitCodesRequirement {
                container_name: Some(FrameworkKind::Pytorch.as_str().to_owned()),
                operator: "NotIn".to_owned(),
                values: vec![0],
            }),
            ..PodFailurePolicyRule::default()
        }],
    }
}

/// An elastic run's success: node 0's `torchrun` hosts the rendezvous and
/// leaves only after every node's has finished (its exit barrier), so its
/// success is the run's. A node that rejoined after the others finished
/// would otherwise wait for a rendezvous that never comes, and fail.
pub(crate) fn node_zero_succeeded() -> SuccessPolicy {
    SuccessPolicy {
        rules: vec![SuccessPolicyRule {
            succeeded_indexes: Some("0".to_owned()),
            succeeded_count: None,
        }],
    }
}

/// An elastic run's rendezvous endpoint: a headless Service named after
/// node 0's host name, `host(run, "worker", 0)`, selecting node 0's pod by
/// its completion index. Every node resolves the name to node 0, and node
/// 0's `torchrun`, finding the endpoint is its own host name, hosts the
/// store. Published before the pod is ready, as the run's own Service is.
pub(crate) fn rendezvous_service(
    run: &Run,
    host: fn(&str, &str, u32) -> String,
    port: u16,
) -> Manifest {
    let job = run.job;
    let worker = RoleKind::Worker.as_str();
    let name = host(&run.name, worker, 0);
    let mut selector = meta::run_selector(&run.name);
    selector.insert(COMPLETION_INDEX.to_owned(), "0".to_owned());
    let svc = Service {
        metadata: meta::object(
            job,
            &name,
            true,
            meta::labels(job, meta::run_labels(job, &run.name)),
        ),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".to_owned()),
            publish_not_ready_addresses: Some(true),
            selector: Some(selector),
            ports: Some(vec![ServicePort {
                name: Some(crate::compile::pytorch::PORT_NAME.to_owned()),
                port: i32::from(port),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    };
    Manifest::new(
        svc,
        &name,
        &host(&job.name, worker, 0),
        true,
        &job.namespace,
    )
}

/// Names this target generates for a job, for validation's length and
/// collision checks: `(kind, name, limit)`, with `run` a placeholder of the
/// run name's length.
pub fn generated(framework: FrameworkKind, run: &str, roles: &[(RoleKind, u32)]) -> Vec<Named> {
    let mut out = vec![Named::new("Service", run.to_owned(), names::LABEL_MAX)];
    if framework == FrameworkKind::Pytorch {
        for (kind, replicas) in roles {
            out.push(Named::new(
                "Job",
                names::role_job(run, kind.as_str()),
                names::LABEL_MAX,
            ));
            if let Some(last) = replicas.checked_sub(1) {
                // The host name of the last node's pod.
                out.push(Named::new(
                    "Pod",
                    names::task(run, kind.as_str(), last),
                    names::LABEL_MAX,
                ));
            }
        }
        return out;
    }
    for (kind, replicas) in roles {
        for i in 0..*replicas {
            // The Job name is also its pod's host name: a DNS label.
            out.push(Named::new(
                "Job",
                names::task(run, kind.as_str(), i),
                names::LABEL_MAX,
            ));
        }
    }
    out
}

/// The pods a Job, as a file holds it, runs at once: its `parallelism` (1
/// when unset), no more than its `completions`; with its pod template.
pub fn pods(job: &Value) -> Vec<(u64, PodRequests<'_>)> {
    let spec = &job["spec"]["template"]["spec"];
    vec![(job_pods(&job["spec"]), PodRequests::Spec(spec))]
}

/// How many pods a Job spec runs at once.
pub fn job_pods(spec: &Value) -> u64 {
    let parallelism = spec["parallelism"].as_u64().unwrap_or(1);
    match spec["completions"].as_u64() {
        Some(c) => parallelism.min(c),
        None => parallelism,
    }
}
