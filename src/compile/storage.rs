//! Volumes: NFS PersistentVolumes with claims bound by labels, existing
//! claims, and dynamically provisioned claims.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    NFSVolumeSource, PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeClaimVolumeSource, PersistentVolumeSpec, Volume, VolumeMount,
    VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::compile::{Manifest, meta};
use crate::model::Job;
use crate::model::job::{self, VolumeSource};
use crate::names;

pub const COMPONENT: &str = "storage";
const VOLUME_LABEL: &str = "trainc.dev/volume";
const NAMESPACE_LABEL: &str = "trainc.dev/namespace";

/// The claim a volume is mounted from.
pub fn claim_name(job: &Job, v: &job::Volume) -> String {
    match &v.source {
        VolumeSource::ExistingClaim(name) => name.clone(),
        _ => names::claim(&job.name, &v.name),
    }
}

pub fn mounts(job: &Job) -> Vec<VolumeMount> {
    job.storage
        .iter()
        .map(|v| VolumeMount {
            name: v.name.clone(),
            mount_path: v.mount_path.clone(),
            read_only: v.read_only.then_some(true),
            ..VolumeMount::default()
        })
        .collect()
}

pub fn pod_volumes(job: &Job) -> Vec<Volume> {
    job.storage
        .iter()
        .map(|v| Volume {
            name: v.name.clone(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim_name(job, v),
                read_only: v.read_only.then_some(true),
            }),
            ..Volume::default()
        })
        .collect()
}

/// Labels that tie an NFS PersistentVolume to exactly one claim. The PV is
/// cluster-scoped, so the namespace is part of them.
fn binding(job: &Job, v: &job::Volume) -> BTreeMap<String, String> {
    let mut l = meta::selector(job, COMPONENT);
    l.insert(NAMESPACE_LABEL.to_owned(), job.namespace.clone());
    l.insert(VOLUME_LABEL.to_owned(), v.name.clone());
    l
}

fn storage_request(size: &str) -> VolumeResourceRequirements {
    VolumeResourceRequirements {
        requests: Some(BTreeMap::from([(
            "storage".to_owned(),
            Quantity(size.to_owned()),
        )])),
        ..VolumeResourceRequirements::default()
    }
}

/// The PersistentVolumes and claims of a job.
pub fn manifests(job: &Job) -> Vec<Manifest> {
    let mut out = Vec::new();
    for v in &job.storage {
        let claim = names::claim(&job.name, &v.name);
        match &v.source {
            VolumeSource::ExistingClaim(_) => {}
            VolumeSource::Nfs {
                server,
                path,
                size,
                access_mode,
            } => {
                let pv_name = names::volume(&job.namespace, &job.name, &v.name);
                let pv = PersistentVolume {
                    metadata: meta::object(
                        job,
                        &pv_name,
                        false,
                        meta::labels(job, binding(job, v)),
                    ),
                    spec: Some(PersistentVolumeSpec {
                        capacity: Some(BTreeMap::from([(
                            "storage".to_owned(),
                            Quantity(size.clone()),
                        )])),
                        access_modes: Some(vec![access_mode.clone()]),
                        nfs: Some(NFSVolumeSource {
                            server: server.clone(),
                            path: path.clone(),
                            read_only: v.read_only.then_some(true),
                        }),
                        // Retain: deleting a job must never wipe the NAS.
                        persistent_volume_reclaim_policy: Some("Retain".to_owned()),
                        // Empty class: bind only to the claim below, never to
                        // a provisioner.
                        storage_class_name: Some(String::new()),
                        ..PersistentVolumeSpec::default()
                    }),
                    ..PersistentVolume::default()
                };
                out.push(Manifest::new(pv, &pv_name, &pv_name, false, &job.namespace));
                let pvc = PersistentVolumeClaim {
                    metadata: meta::object(
                        job,
                        &claim,
                        true,
                        meta::labels(job, meta::selector(job, COMPONENT)),
                    ),
                    spec: Some(PersistentVolumeClaimSpec {
                        access_modes: Some(vec![access_mode.clone()]),
                        resources: Some(storage_request(size)),
                        selector: Some(LabelSelector {
                            match_labels: Some(binding(job, v)),
                            ..LabelSelector::default()
                        }),
                        storage_class_name: Some(String::new()),
                        ..PersistentVolumeClaimSpec::default()
                    }),
                    ..PersistentVolumeClaim::default()
                };
                out.push(Manifest::new(pvc, &claim, &claim, true, &job.namespace));
            }
            VolumeSource::Dynamic {
                storage_class,
                size,
                access_mode,
            } => {
                let pvc = PersistentVolumeClaim {
                    metadata: meta::object(
                        job,
                        &claim,
                        true,
                        meta::labels(job, meta::selector(job, COMPONENT)),
                    ),
                    spec: Some(PersistentVolumeClaimSpec {
                        access_modes: Some(vec![access_mode.clone()]),
                        resources: Some(storage_request(size)),
                        storage_class_name: storage_class.clone(),
                        ..PersistentVolumeClaimSpec::default()
                    }),
                    ..PersistentVolumeClaim::default()
                };
                out.push(Manifest::new(pvc, &claim, &claim, true, &job.namespace));
            }
        }
    }
    out
}
