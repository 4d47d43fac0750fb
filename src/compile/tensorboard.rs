//! Stage 3 (compile), shared by every target: TensorBoard, a Deployment
//! reading the log directory from the shared volume, a Service in front of
//! it, and its NetworkPolicy. It has no authentication, so a `LoadBalancer`
//! is always limited to source ranges, and the pod is as locked down as the
//! tasks', whatever they relax.

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EnvVar, HTTPGetAction, PodSpec, PodTemplateSpec, Probe,
    ResourceRequirements, Service, ServicePort, ServiceSpec, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::compile::{Manifest, meta, network, pod, security, storage};
use crate::model::Job;
use crate::model::job::{Security, TensorBoard};
use crate::names;

pub const COMPONENT: &str = "tensorboard";

pub fn manifests(job: &Job) -> Vec<Manifest> {
    let Some(tb) = &job.tensorboard else {
        return Vec::new();
    };
    let name = names::tensorboard(&job.name);
    let selector = meta::selector(job, COMPONENT);
    let labels = meta::labels(job, selector.clone());
    // Validation guarantees the log directory lies on one of the volumes; the
    // longest matching mount path is the one that holds it.
    let volume = job
        .storage
        .iter()
        .filter(|v| {
            let m = v.mount_path.trim_end_matches('/');
            tb.log_dir == m || tb.log_dir.starts_with(&format!("{m}/"))
        })
        .max_by_key(|v| v.mount_path.len());
    let (mut mounts, mut volumes) = match volume {
        Some(v) => (
            vec![VolumeMount {
                name: v.name.clone(),
                mount_path: v.mount_path.clone(),
                read_only: Some(true),
                ..VolumeMount::default()
            }],
            vec![storage::pod_volume(job, v)],
        ),
        None => (Vec::new(), Vec::new()),
    };
    // TensorBoard keeps its state in /tmp and HOME.
    let (scratch_volumes, scratch_mounts) = security::scratch();
    volumes.extend(scratch_volumes);
    mounts.extend(scratch_mounts);
    let restricted = Security::restricted();
    let port = i32::from(tb.port);
    let probe = |initial_delay_seconds: Option<i32>| Probe {
        http_get: Some(HTTPGetAction {
            path: Some("/".to_owned()),
            port: IntOrString::String("http".to_owned()),
            ..HTTPGetAction::default()
        }),
        initial_delay_seconds,
        ..Probe::default()
    };
    let deployment = Deployment {
        metadata: meta::object(job, &name, true, labels.clone()),
        spec: Some(DeploymentSpec {
            replicas: Some(1),
            selector: LabelSelector {
                match_labels: Some(selector.clone()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels.clone()),
                    // The job's annotations, never a role's: those are for
                    // that role's pods alone (an AppArmor one names its
                    // container).
                    annotations: Some(job.annotations.clone()).filter(|a| !a.is_empty()),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: COMPONENT.to_owned(),
                        image: Some(tb.image.clone()),
                        command: Some(vec![COMMAND.to_owned()]),
                        args: Some(args(tb)),
                        ports: Some(vec![ContainerPort {
                            name: Some("http".to_owned()),
                            container_port: port,
                            ..ContainerPort::default()
                        }]),
                        env: Some(
                            security::scratch_env()
                                .into_iter()
                                .map(|(name, value)| EnvVar {
                                    name,
                                    value: Some(value),
                                    ..EnvVar::default()
                                })
                                .collect(),
                        ),
                        image_pull_policy: job.image_pull_policy.clone(),
                        readiness_probe: Some(probe(None)),
                        // A TensorBoard that stops answering (a huge log
                        // directory can wedge it) is restarted.
                        liveness_probe: Some(probe(Some(30))),
                        resources: Some(resources(tb)),
                        security_context: Some(security::container(&restricted)),
                        volume_mounts: Some(mounts),
                        ..Container::default()
                    }],
                    // TensorBoard never calls the API server, whatever the
                    // tasks' service account is for.
                    automount_service_account_token: Some(false),
                    // The image trainc builds lives beside the job's, in
                    // the same registry.
                    image_pull_secrets: pod::image_pull_secrets(job),
                    security_context: Some(security::pod(&restricted)),
                    volumes: Some(volumes),
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    };
    let mut service_meta = meta::object(job, &name, true, labels);
    // Load-balancer settings belong to the Service alone: on every object
    // they would reach the pods, and with them the run's identity.
    if let Some(a) = &mut service_meta.annotations {
        a.extend(tb.service_annotations.clone());
    }
    let service = Service {
        metadata: service_meta,
        spec: Some(ServiceSpec {
            type_: Some(tb.service_type.clone()),
            load_balancer_source_ranges: Some(tb.load_balancer_source_ranges.clone())
                .filter(|r| !r.is_empty() && tb.service_type == "LoadBalancer"),
            selector: Some(selector.clone()),
            ports: Some(vec![ServicePort {
                name: Some("http".to_owned()),
                port,
                target_port: Some(IntOrString::String("http".to_owned())),
                protocol: Some("TCP".to_owned()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    };
    let mut out = vec![
        Manifest::new(deployment, &name, &name, true, &job.namespace),
        Manifest::new(service, &name, &name, true, &job.namespace),
    ];
    out.extend(network::tensorboard_policy(job, &name, selector, tb.port));
    out
}

/// The program the container runs: what the TensorBoard image must have.
pub const COMMAND: &str = "tensorboard";

/// Flags `tensorboard.args` may not give, each with the flag trainc sets
/// that it would repeat or undo: `--logdir_spec` replaces `--logdir`,
/// `--host` narrows `--bind_all`.
const OWN_FLAGS: [(&str, &str); 5] = [
    ("logdir", "logdir"),
    ("logdir_spec", "logdir"),
    ("port", "port"),
    ("bind_all", "bind_all"),
    ("host", "bind_all"),
];

/// The container's arguments: trainc's flags, then the definition's.
fn args(tb: &TensorBoard) -> Vec<String> {
    let mut a = vec![
        format!("--logdir={}", tb.log_dir),
        "--bind_all".to_owned(),
        format!("--port={}", tb.port),
    ];
    a.extend(tb.args.iter().cloned());
    a
}

/// The flag trainc sets that an argument repeats or undoes, if any:
/// `--port=1`, `--port 1`, `-port` and `--noport` (absl's negation) all
/// count.
pub fn clashing_flag(arg: &str) -> Option<&'static str> {
    let name = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-'))?;
    let name = name.split_once('=').map_or(name, |(n, _)| n);
    OWN_FLAGS
        .into_iter()
        .find(|(f, _)| name == *f || name.strip_prefix("no") == Some(*f))
        .map(|(_, own)| own)
}

fn resources(tb: &TensorBoard) -> ResourceRequirements {
    let q = |cpu: &str, memory: &str| {
        BTreeMap::from([
            ("cpu".to_owned(), Quantity(cpu.to_owned())),
            ("memory".to_owned(), Quantity(memory.to_owned())),
        ])
    };
    ResourceRequirements {
        requests: Some(q(&tb.cpu, &tb.memory)),
        limits: Some(q(&tb.cpu_limit, &tb.memory_limit)),
        ..ResourceRequirements::default()
    }
}
