//! Stage 3 (compile), target `jobset`: one JobSet (`jobset.x-k8s.io/v1alpha2`)
//! per run, one replicated Job per role.
//!
//! The JobSet controller gives the run what plain Jobs cannot: it succeeds
//! when the chief does (without a chief, when every worker has) and then
//! deletes the Jobs still running (the parameter servers); a failed task
//! fails its Job, and the controller re-creates every Job of the run
//! together, up to `runPolicy.backoffLimit` times; Kueue admits the JobSet
//! as one Workload. Tasks share one pod template per role and read their
//! index from the `jobset.sigs.k8s.io/job-index` label (see
//! [`Index::Label`]).
//!
//! A PyTorch run is one replicated Job of one Indexed Job whose indexes are
//! the nodes (`<run>-worker-0-<i>`); the JobSet succeeds when every node
//! has, and restarts every node together when one fails. An elastic run's
//! nodes restart alone instead, as on `kubernetes`: the Job restarts them
//! up to `backoffLimit` times in all and succeeds with node 0, and the
//! JobSet fails with the Job.

use k8s_openapi::api::batch::v1::{JobSpec, JobTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use serde_json::Value;

use crate::compile::crd;
use crate::compile::index::Index;
use crate::compile::patch::Finding;
use crate::compile::pod::Program;
use crate::compile::target::kubernetes::{self, COMPLETION_INDEX};
use crate::compile::tensorflow::ClusterSpec;
use crate::compile::{Manifest, Named, Run, meta, pod};
use crate::load::Findings;
use crate::model::definition::RoleKind;
use crate::model::definition::{Framework as FrameworkKind, TrainingJob};
use crate::model::job::Framework;
use crate::names;

/// Output-format version of this target (see [`crate::compile::target::kubernetes::FORMAT`]).
/// 3: restarts with `BlockingRecreate`.
/// 4: a PyTorch node's rank read from the completion-index annotation.
pub const FORMAT: u32 = 4;

/// The label JobSet puts on every pod of Job `i` of a replicated Job.
pub const JOB_INDEX_LABEL: &str = "jobset.sigs.k8s.io/job-index";
const KUEUE_QUEUE_LABEL: &str = "kueue.x-k8s.io/queue-name";

pub fn compile(run: &Run) -> Result<Vec<Manifest>, Finding> {
    match &run.job.framework {
        Framework::Tensorflow(_) => tensorflow(run),
        Framework::Pytorch(_) => pytorch(run),
    }
}

fn tensorflow(run: &Run) -> Result<Vec<Manifest>, Finding> {
    let job = run.job;
    let rp = &job.run_policy;
    // JobSet's headless Service is named after the JobSet (the `subdomain`
    // of every pod), and each Job's one pod is named `<job>-0`.
    let cluster = ClusterSpec::with_hosts(job, |kind, i, port| {
        format!(
            "{}.{}.{}.svc:{port}",
            names::jobset_pod(&run.name, kind.as_str(), i),
            run.name,
            job.namespace
        )
    });
    let replicated_jobs = job
        .roles
        .iter()
        .map(|role| {
            let placement = pod::Placement {
                role,
                index: Index::Label(JOB_INDEX_LABEL),
                run: &run.name,
                hostname: None,
                subdomain: None,
                port_name: pod::PORT_NAME,
                restart_policy: Some(rp.restart_policy.clone()),
                program: Program::Tensorflow {
                    cluster: &cluster,
                    config_map: &run.cluster_spec,
                    sets_tf_config: true,
                },
            };
            Ok(replicated_job(
                run,
                role.kind,
                i32::try_from(role.replicas).unwrap_or(i32::MAX),
                JobSpec {
                    // A failed pod fails its Job at once, and the JobSet
                    // restarts the whole run: a task never restarts alone.
                    backoff_limit: Some(0),
                    completions: Some(1),
                    parallelism: Some(1),
                    completion_mode: Some("Indexed".to_owned()),
                    active_deadline_seconds: rp.active_deadline_seconds,
                    // A replacement pod only once the old one is gone: the
                    // two would share a host name.
                    pod_replacement_policy: Some("Failed".to_owned()),
                    template: pod::task_template(job, &placement)?,
                    ..JobSpec::default()
                },
            ))
        })
        .collect::<Result<_, Finding>>()?;
    let has_chief = job.roles.iter().any(|r| r.kind == RoleKind::Chief);
    let success = if has_chief {
        RoleKind::Chief
    } else {
        RoleKind::Worker
    };
    Ok(vec![
        run.cluster_spec_config_map(&cluster),
        jobset(run, replicated_jobs, success),
    ])
}

/// A PyTorch run: one replicated Job whose one Indexed Job runs every node.
fn pytorch(run: &Run) -> Result<Vec<Manifest>, Finding> {
    let job = run.job;
    let rp = &job.run_policy;
    let Some((role, launch)) =
        crate::compile::pytorch::nodes(run, names::jobset_indexed_pod, |node_zero| {
            format!("{node_zero}.{}.{}.svc", run.name, job.namespace)
        })
    else {
        return Ok(Vec::new());
    };
    let elastic = launch.elastic().is_some();
    let placement = pod::Placement {
        role,
        index: Index::Annotation(COMPLETION_INDEX),
        run: &run.name,
        hostname: None,
        subdomain: None,
        port_name: pod::port_name(job),
        restart_policy: Some(rp.restart_policy.clone()),
        program: Program::Pytorch(&launch),
    };
    let nodes = i32::try_from(role.replicas).unwrap_or(i32::MAX);
    let replicated = replicated_job(
        run,
        role.kind,
        1,
        JobSpec {
            // Static: a failed node fails the Job at once, and the JobSet
            // restarts every node together. Elastic: the Job restarts the
            // node alone, and it rejoins.
            backoff_limit: Some(if elastic { rp.backoff_limit } else { 0 }),
            success_policy: elastic.then(kubernetes::node_zero_succeeded),
            completions: Some(nodes),
            parallelism: Some(nodes),
            completion_mode: Some("Indexed".to_owned()),
            active_deadline_seconds: rp.active_deadline_seconds,
            pod_replacement_policy: Some("Failed".to_owned()),
            template: pod::task_template(job, &placement)?,
            ..JobSpec::default()
        },
    );
    if !elastic {
        return Ok(vec![jobset(run, vec![replicated], role.kind)]);
    }
    let mut spec = spec(run, vec![replicated], role.kind.as_str());
    // The Job has restarted the nodes already: the run fails with it.
    if let Some(policy) = &mut spec.failure_policy {
        policy.max_restarts = Some(0);
    }
    Ok(vec![
        jobset_of(run, spec),
        kubernetes::rendezvous_service(run, names::jobset_indexed_pod, role.port),
    ])
}

/// A replicated Job of a role's tasks, labelled as they are.
fn replicated_job(run: &Run, kind: RoleKind, replicas: i32, spec: JobSpec) -> ReplicatedJob {
    let job = run.job;
    ReplicatedJob {
        name: kind.as_str().to_owned(),
        replicas,
        template: JobTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(meta::labels(
                    job,
                    meta::task_selector(job, &run.name, kind, None),
                )),
                ..ObjectMeta::default()
            }),
            spec: Some(spec),
        },
    }
}

/// The run's JobSet: restarted as a whole, done when every Job of
/// `success` is.
fn jobset(run: &Run, replicated_jobs: Vec<ReplicatedJob>, success: RoleKind) -> Manifest {
    jobset_of(run, spec(run, replicated_jobs, success.as_str()))
}

/// The run's JobSet of `spec`, labelled as the run (and the Kueue queue's).
fn jobset_of(run: &Run, spec: JobSetSpec) -> Manifest {
    let job = run.job;
    let mut labels = meta::labels(job, meta::run_labels(job, &run.name));
    if let Some(queue) = &job.run_policy.queue {
        labels.insert(KUEUE_QUEUE_LABEL.to_owned(), queue.clone());
    }
    let jobset = JobSet {
        metadata: meta::run_object(job, &run.name, labels),
        spec,
    };
    Manifest::new(jobset, &run.name, &job.name, true, &job.namespace)
}

/// A run's JobSet spec: restarted as a whole (`BlockingRecreate`, up to
/// `backoffLimit` times), done when every Job of the replicated Job
/// `success` is. Also the template of the `trainjob` target's runtime.
pub(crate) fn spec(run: &Run, replicated_jobs: Vec<ReplicatedJob>, success: &str) -> JobSetSpec {
    let rp = &run.job.run_policy;
    JobSetSpec {
        failure_policy: Some(FailurePolicy {
            max_restarts: Some(rp.backoff_limit),
            // With `Recreate`, old tasks still in DNS could reach the
            // new attempt's servers.
            restart_strategy: "BlockingRecreate",
            rules: if rp.active_deadline_seconds.is_some() {
                // A deadline bounds the run: restarting would start the
                // clock again.
                vec![FailurePolicyRule {
                    action: "FailJobSet",
                    name: "deadline",
                    on_job_failure_reasons: vec!["DeadlineExceeded"],
                }]
            } else {
                Vec::new()
            },
        }),
        network: Some(Network {
            enable_dns_hostnames: true,
            publish_not_ready_addresses: true,
        }),
        replicated_jobs,
        success_policy: Some(SuccessPolicy {
            operator: "All",
            target_replicated_jobs: vec![success.to_owned()],
        }),
        ttl_seconds_after_finished: rp.ttl_seconds_after_finished,
    }
}

/// What this target cannot express, located in the definition. (An
/// elastic PyTorch run's nodes restart alone: PyTorch's own check.)
pub(crate) fn check(cx: &mut Findings, def: &TrainingJob) {
    if def.spec.run_policy.restart_policy.as_deref() == Some("OnFailure")
        && def.spec.elastic().is_none()
    {
        cx.error(
            "/spec/runPolicy/restartPolicy",
            "the `jobset` target restarts a run as a whole, but `restartPolicy: OnFailure` restarts one task alone",
            "remove `restartPolicy`: on `jobset` a failed task fails its Job, and the JobSet re-creates every task together, up to `runPolicy.backoffLimit` times",
        );
    }
}

/// Names this target generates for a job (see
/// [`crate::compile::target::kubernetes::generated`]).
pub fn generated(framework: FrameworkKind, run: &str, roles: &[(RoleKind, u32)]) -> Vec<Named> {
    let mut out = vec![Named::new("JobSet", run.to_owned(), names::LABEL_MAX)];
    if framework == FrameworkKind::Pytorch {
        for (kind, replicas) in roles {
            out.extend(last_node_pod(run, kind.as_str(), *replicas));
        }
        return out;
    }
    for (kind, replicas) in roles {
        if let Some(last) = replicas.checked_sub(1) {
            // The role's last pod, with the 5 random characters the Job
            // controller appends, must be a DNS label: JobSet's webhook
            // refuses the JobSet otherwise.
            out.push(Named::new(
                "Pod",
                format!("{}-xxxxx", names::jobset_pod(run, kind.as_str(), last)),
                names::LABEL_MAX,
            ));
        }
    }
    out
}

/// The pod of the last of `nodes` nodes of an Indexed Job that replicated
/// Job `replicated` runs once, with the Job controller's 5 random
/// characters: JobSet's webhook refuses a JobSet whose pod names would not
/// be DNS labels.
pub(crate) fn last_node_pod(run: &str, replicated: &str, nodes: u32) -> Option<Named> {
    let last = nodes.checked_sub(1)?;
    Some(Named::new(
        "Pod",
        format!("{}-xxxxx", names::jobset_indexed_pod(run, replicated, last)),
        names::LABEL_MAX,
    ))
}

/// The pods a JobSet, as a file holds it, runs at once: each replicated
/// Job's `replicas` (1 when unset) times the pods its Job runs at once.
pub fn pods(jobset: &Value) -> Vec<(u64, crate::compile::PodRequests<'_>)> {
    let replicated = jobset["spec"]["replicatedJobs"].as_array();
    replicated
        .into_iter()
        .flatten()
        .map(|rj| {
            let job = &rj["template"]["spec"];
            let replicas = rj["replicas"].as_u64().unwrap_or(1);
            (
                replicas.saturating_mul(crate::compile::target::kubernetes::job_pods(job)),
                crate::compile::PodRequests::Spec(&job["template"]["spec"]),
            )
        })
        .collect()
}

// The JobSet custom resource, limited to the fields trainc writes (the CRD
// in shared/crds/; `tests/crd.rs` checks every generated object against it).

crd::custom_resource!(
    /// A JobSet: a group of Jobs that start, succeed, fail and restart together.
    JobSet(JobSetSpec), "jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets"
);

impl crd::CustomResource for JobSet {
    fn templates(&self) -> Vec<&k8s_openapi::api::core::v1::PodTemplateSpec> {
        self.spec.templates()
    }
}

impl JobSetSpec {
    /// The pod templates of its replicated Jobs.
    pub fn templates(&self) -> Vec<&k8s_openapi::api::core::v1::PodTemplateSpec> {
        let jobs = self.replicated_jobs.iter();
        jobs.filter_map(|r| r.template.spec.as_ref())
            .map(|s| &s.template)
            .collect()
    }
}

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
