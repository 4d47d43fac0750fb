//! Target `kubernetes`: plain Jobs and Services, no operator needed.
//!
//! Per task one headless Service (stable DNS, what `TF_CONFIG` names) and one
//! Job whose name carries a hash of its own spec. A Job's pod template is
//! immutable: when the definition changes, the hash changes, so the GitOps
//! controller creates a new Job and prunes the old one instead of failing to
//! patch it. Services, DNS names and `TF_CONFIG` stay the same.

use k8s_openapi::api::batch::v1::{Job as BatchJob, JobSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use sha2::{Digest, Sha256};

use crate::compile::cluster_spec::ClusterSpec;
use crate::compile::{Manifest, meta, pod, storage, tensorboard};
use crate::model::Job;
use crate::model::job::{Role, RoleKind};
use crate::names;

const KUEUE_QUEUE_LABEL: &str = "kueue.x-k8s.io/queue-name";

pub fn compile(job: &Job) -> Result<Vec<Manifest>, String> {
    let cluster = ClusterSpec::of(job);
    let mut out = vec![cluster_spec_config_map(job, &cluster)];
    for role in &job.roles {
        for index in 0..role.replicas {
            if role.kind != RoleKind::Evaluator {
                out.push(task_service(job, role, index));
            }
            out.push(task_job(job, role, index, &cluster)?);
        }
    }
    out.extend(storage::manifests(job));
    out.extend(tensorboard::manifests(job));
    Ok(out)
}

/// The cluster spec, for review and for programs that read it from
/// `/etc/trainc` rather than `TF_CONFIG`.
fn cluster_spec_config_map(job: &Job, cluster: &ClusterSpec) -> Manifest {
    let name = names::cluster_spec(&job.name);
    let data = cluster.files();
    let cm = ConfigMap {
        metadata: meta::object(
            job,
            &name,
            true,
            meta::labels(job, meta::selector(job, "cluster-spec")),
        ),
        data: Some(data),
        ..ConfigMap::default()
    };
    Manifest::new(cm, &name, &name, true, &job.namespace)
}

fn task_service(job: &Job, role: &Role, index: u32) -> Manifest {
    let name = names::task(&job.name, role.kind.as_str(), index);
    let selector = meta::task_selector(job, role.kind, index);
    let port = i32::from(role.port);
    let svc = Service {
        metadata: meta::object(job, &name, true, meta::labels(job, selector.clone())),
        spec: Some(ServiceSpec {
            // Headless: the name resolves straight to the pod.
            cluster_ip: Some("None".to_owned()),
            // Tasks must find each other before any is ready, or a parameter
            // server and a worker wait on each other forever.
            publish_not_ready_addresses: Some(true),
            selector: Some(selector),
            ports: Some(vec![ServicePort {
                name: Some(pod::PORT_NAME.to_owned()),
                port,
                target_port: Some(IntOrString::Int(port)),
                protocol: Some("TCP".to_owned()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    };
    Manifest::new(svc, &name, &name, true, &job.namespace)
}

/// Short content hash of what a Job cannot change in place: its spec, and
/// its Kueue queue (Kueue refuses to move an admitted Job to another queue).
/// The same inputs always give the same name.
fn spec_hash(spec: &JobSpec, queue: Option<&str>) -> Result<String, String> {
    // JSON of the typed spec: field order is fixed by the type, maps are
    // sorted, so equal specs give equal bytes.
    let mut bytes = serde_json::to_vec(spec).map_err(|e| e.to_string())?;
    if let Some(queue) = queue {
        // Appended only when set, so Jobs without a queue keep their names.
        bytes.extend_from_slice(b"\nqueue=");
        bytes.extend_from_slice(queue.as_bytes());
    }
    let digest = Sha256::digest(&bytes);
    Ok(digest
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>()
        .chars()
        .take(names::HASH_LEN)
        .collect())
}

fn task_job(job: &Job, role: &Role, index: u32, cluster: &ClusterSpec) -> Result<Manifest, String> {
    let rp = &job.run_policy;
    let spec = JobSpec {
        backoff_limit: Some(rp.backoff_limit),
        active_deadline_seconds: rp.active_deadline_seconds,
        // Off unless asked for: a GitOps controller re-creates a deleted Job,
        // which would then train again.
        ttl_seconds_after_finished: rp.ttl_seconds_after_finished,
        template: pod::task_template(job, role, index, cluster),
        ..JobSpec::default()
    };
    let stable = names::task(&job.name, role.kind.as_str(), index);
    let name = names::task_job(
        &job.name,
        role.kind.as_str(),
        index,
        &spec_hash(&spec, rp.queue.as_deref())?,
    );
    let mut labels = meta::labels(job, meta::task_selector(job, role.kind, index));
    if let Some(queue) = &rp.queue {
        labels.insert(KUEUE_QUEUE_LABEL.to_owned(), queue.clone());
    }
    let batch = BatchJob {
        metadata: meta::object(job, &name, true, labels),
        spec: Some(spec),
        ..BatchJob::default()
    };
    Ok(Manifest::new(batch, &name, &stable, true, &job.namespace))
}
