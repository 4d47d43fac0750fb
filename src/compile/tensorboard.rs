//! TensorBoard: a Deployment reading the log directory from the shared
//! volume, and a Service in front of it.

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, HTTPGetAction, PodSpec, PodTemplateSpec, Probe, Service, ServicePort,
    ServiceSpec, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::compile::{Manifest, meta, storage};
use crate::model::Job;
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
    let (mounts, volumes) = match volume {
        Some(v) => (
            vec![VolumeMount {
                name: v.name.clone(),
                mount_path: v.mount_path.clone(),
                read_only: Some(true),
                ..VolumeMount::default()
            }],
            storage::pod_volumes(job)
                .into_iter()
                .filter(|pv| pv.name == v.name)
                .collect::<Vec<Volume>>(),
        ),
        None => (Vec::new(), Vec::new()),
    };
    let port = i32::from(tb.port);
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
                    annotations: Some(job.annotations.clone()).filter(|a| !a.is_empty()),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: COMPONENT.to_owned(),
                        image: Some(tb.image.clone()),
                        command: Some(vec!["tensorboard".to_owned()]),
                        args: Some(vec![
                            format!("--logdir={}", tb.log_dir),
                            "--bind_all".to_owned(),
                            format!("--port={port}"),
                        ]),
                        ports: Some(vec![ContainerPort {
                            name: Some("http".to_owned()),
                            container_port: port,
                            ..ContainerPort::default()
                        }]),
                        readiness_probe: Some(Probe {
                            http_get: Some(HTTPGetAction {
                                path: Some("/".to_owned()),
                                port: IntOrString::String("http".to_owned()),
                                ..HTTPGetAction::default()
                            }),
                            ..Probe::default()
                        }),
                        volume_mounts: Some(mounts).filter(|m| !m.is_empty()),
                        ..Container::default()
                    }],
                    service_account_name: job.service_account_name.clone(),
                    volumes: Some(volumes).filter(|v| !v.is_empty()),
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    };
    let service = Service {
        metadata: meta::object(job, &name, true, labels),
        spec: Some(ServiceSpec {
            type_: Some(tb.service_type.clone()),
            selector: Some(selector),
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
    vec![
        Manifest::new(deployment, &name, &name, true, &job.namespace),
        Manifest::new(service, &name, &name, true, &job.namespace),
    ]
}
