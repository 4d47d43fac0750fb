//! Stage 3 (compile), shared by every target: volumes. PersistentVolumes
//! (NFS or CSI) reserved for their claims (`claimRef`), with claims that
//! select them by labels, claims that select a
//! volume that already exists, existing claims, dynamically provisioned
//! claims, and the pod-only volumes (emptyDir, ConfigMap, Secret), each in
//! the pods of the roles that mount it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, ConfigMapVolumeSource, EmptyDirVolumeSource, KeyToPath,
    NFSVolumeSource, ObjectReference, PersistentVolume, PersistentVolumeClaim,
    PersistentVolumeClaimSpec, PersistentVolumeClaimVolumeSource, PersistentVolumeSpec,
    SecretReference, SecretVolumeSource, Volume, VolumeMount, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

use crate::compile::{Manifest, meta};
use crate::model::Job;
use crate::model::definition::RoleKind;
use crate::model::definition::Selector;
use crate::model::job::{self, Projection, PvSource, VolumeSource};
use crate::names;

pub const COMPONENT: &str = "storage";
const VOLUME_LABEL: &str = "trainc.dev/volume";
const NAMESPACE_LABEL: &str = "trainc.dev/namespace";

/// The claim a volume is mounted from; `None` for pod-only volumes.
pub fn claim_name(job: &Job, v: &job::Volume) -> Option<String> {
    match &v.source {
        VolumeSource::ExistingClaim(name) => Some(name.clone()),
        s if s.is_claim() => Some(names::claim(&job.name, &v.name)),
        _ => None,
    }
}

/// The mounts of the pods of `role`, in the order of `storage`.
pub fn mounts(job: &Job, role: RoleKind) -> Vec<VolumeMount> {
    job.storage
        .iter()
        .filter(|v| v.mounted_by(role))
        .map(|v| VolumeMount {
            name: v.name.clone(),
            mount_path: v.mount_path.clone(),
            read_only: v.read_only.then_some(true),
            ..VolumeMount::default()
        })
        .collect()
}

/// The pod volumes of the pods of `role`, in the order of `storage`.
pub fn pod_volumes(job: &Job, role: RoleKind) -> Vec<Volume> {
    job.storage
        .iter()
        .filter(|v| v.mounted_by(role))
        .map(|v| pod_volume(job, v))
        .collect()
}

fn items(p: &Projection) -> Option<Vec<KeyToPath>> {
    (!p.items.is_empty()).then(|| {
        p.items
            .iter()
            .map(|i| KeyToPath {
                key: i.key.clone(),
                path: i.path.clone(),
                mode: i.mode,
            })
            .collect()
    })
}

/// One volume as a pod refers to it: a claim, or the pod-only source itself.
/// Never an inline CSI volume: those need a driver that supports ephemeral
/// volumes, and the PersistentVolume trainc writes serves every driver.
pub fn pod_volume(job: &Job, v: &job::Volume) -> Volume {
    let mut out = Volume {
        name: v.name.clone(),
        ..Volume::default()
    };
    match &v.source {
        VolumeSource::EmptyDir(e) => {
            out.empty_dir = Some(EmptyDirVolumeSource {
                medium: e.medium.clone(),
                size_limit: e.size_limit.clone().map(Quantity),
            });
        }
        VolumeSource::ConfigMap(p) => {
            out.config_map = Some(ConfigMapVolumeSource {
                name: p.name.clone(),
                items: items(p),
                default_mode: p.default_mode,
                optional: p.optional,
            });
        }
        VolumeSource::Secret(p) => {
            out.secret = Some(SecretVolumeSource {
                secret_name: Some(p.name.clone()),
                items: items(p),
                default_mode: p.default_mode,
                optional: p.optional,
            });
        }
        _ => {
            out.persistent_volume_claim =
                claim_name(job, v).map(|claim_name| PersistentVolumeClaimVolumeSource {
                    claim_name,
                    read_only: v.read_only.then_some(true),
                });
        }
    }
    out
}

/// Labels that tie a PersistentVolume trainc writes to exactly one claim.
/// The PV is cluster-scoped, so the namespace is part of them.
fn binding(job: &Job, v: &job::Volume) -> BTreeMap<String, String> {
    let mut l = meta::selector(job, COMPONENT);
    l.insert(NAMESPACE_LABEL.to_owned(), job.namespace.clone());
    l.insert(VOLUME_LABEL.to_owned(), v.name.clone());
    l
}

/// A claim's spec with its access mode and size; each kind of claim adds
/// what finds its volume.
fn claim_spec(size: &str, access_mode: &str) -> PersistentVolumeClaimSpec {
    PersistentVolumeClaimSpec {
        access_modes: Some(vec![access_mode.to_owned()]),
        resources: Some(VolumeResourceRequirements {
            requests: Some(BTreeMap::from([(
                "storage".to_owned(),
                Quantity(size.to_owned()),
            )])),
            ..VolumeResourceRequirements::default()
        }),
        ..PersistentVolumeClaimSpec::default()
    }
}

fn label_selector(s: &Selector) -> LabelSelector {
    LabelSelector {
        match_labels: (!s.match_labels.is_empty()).then(|| s.match_labels.clone()),
        match_expressions: (!s.match_expressions.is_empty()).then(|| {
            s.match_expressions
                .iter()
                .map(|r| LabelSelectorRequirement {
                    key: r.key.clone(),
                    operator: r.operator.clone(),
                    values: (!r.values.is_empty()).then(|| r.values.clone()),
                })
                .collect()
        }),
    }
}

fn secret_ref(r: &job::SecretRef) -> SecretReference {
    SecretReference {
        name: Some(r.name.clone()),
        namespace: Some(r.namespace.clone()),
    }
}

/// The PersistentVolume of an NFS export or a CSI volume.
fn persistent_volume(
    job: &Job,
    v: &job::Volume,
    source: &PvSource,
    mount_options: &[String],
    size: &str,
    access_mode: &str,
) -> Manifest {
    let pv_name = names::volume(&job.namespace, &job.name, &v.name);
    let read_only = v.read_only.then_some(true);
    let mut spec = PersistentVolumeSpec {
        capacity: Some(BTreeMap::from([(
            "storage".to_owned(),
            Quantity(size.to_owned()),
        )])),
        access_modes: Some(vec![access_mode.to_owned()]),
        mount_options: (!mount_options.is_empty()).then(|| mount_options.to_vec()),
        // Retain: deleting a job must never wipe the file system.
        persistent_volume_reclaim_policy: Some("Retain".to_owned()),
        // Empty class: bind only to the claim below, never to a provisioner.
        storage_class_name: Some(String::new()),
        // Reserved for its claim: without it, any claim of no class (of any
        // namespace, or one left without a class where the cluster has no
        // default) that asks for no more could take the volume before its
        // own claim did, and mount the export. The claim's selector only
        // restricts the claim.
        claim_ref: Some(ObjectReference {
            namespace: Some(job.namespace.clone()),
            name: Some(names::claim(&job.name, &v.name)),
            ..ObjectReference::default()
        }),
        ..PersistentVolumeSpec::default()
    };
    match source {
        PvSource::Nfs { server, path } => {
            spec.nfs = Some(NFSVolumeSource {
                server: server.clone(),
                path: path.clone(),
                read_only,
            });
        }
        PvSource::Csi(c) => {
            spec.csi = Some(CSIPersistentVolumeSource {
                driver: c.driver.clone(),
                volume_handle: c.volume_handle.clone(),
                volume_attributes: (!c.volume_attributes.is_empty())
                    .then(|| c.volume_attributes.clone()),
                fs_type: c.fs_type.clone(),
                node_stage_secret_ref: c.node_stage_secret.as_ref().map(secret_ref),
                node_publish_secret_ref: c.node_publish_secret.as_ref().map(secret_ref),
                read_only,
                ..CSIPersistentVolumeSource::default()
            });
        }
    }
    let pv = PersistentVolume {
        metadata: meta::object(job, &pv_name, false, meta::labels(job, binding(job, v))),
        spec: Some(spec),
        ..PersistentVolume::default()
    };
    let stem = names::volume_file(&job.namespace, &job.name, &v.name);
    Manifest::new(pv, &pv_name, &stem, false, &job.namespace)
}

fn claim(job: &Job, name: &str, spec: PersistentVolumeClaimSpec) -> Manifest {
    let pvc = PersistentVolumeClaim {
        metadata: meta::object(
            job,
            name,
            true,
            meta::labels(job, meta::selector(job, COMPONENT)),
        ),
        spec: Some(spec),
        ..PersistentVolumeClaim::default()
    };
    Manifest::new(pvc, name, name, true, &job.namespace)
}

/// The PersistentVolumes and claims of a job.
pub fn manifests(job: &Job) -> Vec<Manifest> {
    let mut out = Vec::new();
    for v in &job.storage {
        let name = names::claim(&job.name, &v.name);
        match &v.source {
            VolumeSource::ExistingClaim(_)
            | VolumeSource::EmptyDir(_)
            | VolumeSource::ConfigMap(_)
            | VolumeSource::Secret(_) => {}
            VolumeSource::Pv {
                source,
                mount_options,
                size,
                access_mode,
            } => {
                out.push(persistent_volume(
                    job,
                    v,
                    source,
                    mount_options,
                    size,
                    access_mode,
                ));
                out.push(claim(
                    job,
                    &name,
                    PersistentVolumeClaimSpec {
                        selector: Some(LabelSelector {
                            match_labels: Some(binding(job, v)),
                            ..LabelSelector::default()
                        }),
                        storage_class_name: Some(String::new()),
                        ..claim_spec(size, access_mode)
                    },
                ));
            }
            VolumeSource::Bind {
                selector,
                volume_name,
                storage_class,
                size,
                access_mode,
            } => {
                out.push(claim(
                    job,
                    &name,
                    PersistentVolumeClaimSpec {
                        selector: selector.as_ref().map(label_selector),
                        volume_name: volume_name.clone(),
                        // An empty class, unless the volume has one: left
                        // out, the DefaultStorageClass admission plugin
                        // would write the cluster's default class in, and
                        // the claim would bind only to volumes of that
                        // class (or, with a volume name, never).
                        storage_class_name: Some(storage_class.clone().unwrap_or_default()),
                        ..claim_spec(size, access_mode)
                    },
                ));
            }
            VolumeSource::Dynamic {
                storage_class,
                size,
                access_mode,
            } => {
                out.push(claim(
                    job,
                    &name,
                    PersistentVolumeClaimSpec {
                        storage_class_name: storage_class.clone(),
                        ..claim_spec(size, access_mode)
                    },
                ));
            }
        }
    }
    out
}
