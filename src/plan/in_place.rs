//! Changes the API server refuses to make in place. Most objects trainc
//! writes either take any change (ConfigMaps, Services, Deployments) or
//! carry the run's hash in their names, so an edit replaces them (Jobs,
//! JobSets, TFJobs). Claims and PersistentVolumes keep their names across
//! edits (a run re-created mounts the same data) and their specs are mostly
//! fixed once created:
//!
//! - a PersistentVolumeClaim's spec cannot change but for a larger size
//!   (`spec is immutable after creation except resources.requests`), never
//!   a smaller one, and a larger one only for a claim of a storage class
//!   that allows expansion: a claim of no class (`storageClassName: ""`, a
//!   static volume) is refused by the `PersistentVolumeClaimResize`
//!   admission plugin;
//! - a PersistentVolume's source (the NFS export, the CSI driver, handle,
//!   attributes and secret references) cannot change; its capacity, access
//!   modes and mount options can.
//!
//! Written anyway, such an edit would reach the repository and fail every
//! sync after it. So the plan compares a claim or PersistentVolume it is
//! about to replace with the one in the output directory and refuses the
//! change, located at the committed file, with the way out: keep the
//! volume as it was, or give it a new name (a new claim and PersistentVolume,
//! and the run restarts to mount it).

use std::sync::Arc;

use serde_json::Value;

use crate::diagnostic::Diagnostic;
use crate::emit;
use crate::load;
use crate::source::SourceFile;

/// The spec fields of a PersistentVolume that may change in place; every
/// other one is (part of) its source.
const PV_MUTABLE: &[&str] = &[
    "accessModes",
    "capacity",
    "claimRef",
    "mountOptions",
    "nodeAffinity",
    "persistentVolumeReclaimPolicy",
    "storageClassName",
    "volumeAttributesClassName",
    "volumeMode",
];

/// Why replacing `old` (the file at `shown` in the output directory) by
/// `new` would be refused by the API server, if it would.
pub fn refused(shown: &str, old: &[u8], new: &[u8]) -> Option<Diagnostic> {
    let kind = kind_of(new)?;
    if kind_of(old) != Some(kind) {
        return None;
    }
    let file = Arc::new(SourceFile::new(shown, std::str::from_utf8(old).ok()?));
    let old_doc = load::parse(&file).ok()?.into_iter().next()?;
    let new_value: Value = serde_saphyr::from_str(std::str::from_utf8(new).ok()?).ok()?;
    let (old_spec, new_spec) = (&old_doc.value["spec"], &new_value["spec"]);
    let found = match kind {
        Kind::Claim => claim(old_spec, new_spec),
        Kind::Volume => volume(old_spec, new_spec),
    }?;
    let source = emit::parse_header(new)
        .flatten()
        .unwrap_or("the definition");
    Some(
        Diagnostic::new(found.message)
            .at(old_doc.locate(&found.pointer))
            .hint(format!(
                "{}keep the volume as the committed output has it, or give it a new name in {source}: trainc then writes a new claim (and PersistentVolume), and the run restarts to mount it",
                found.hint
            )),
    )
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Claim,
    Volume,
}

/// The kind of a generated file, when it is a claim or a PersistentVolume:
/// its `kind:` line, which the emitter writes at the top level.
fn kind_of(bytes: &[u8]) -> Option<Kind> {
    let text = std::str::from_utf8(bytes).ok()?;
    text.lines().find_map(|l| match l {
        "kind: PersistentVolumeClaim" => Some(Kind::Claim),
        "kind: PersistentVolume" => Some(Kind::Volume),
        _ => None,
    })
}

struct Found {
    message: String,
    /// Where in the committed file: a JSON pointer.
    pointer: String,
    /// A first sentence of the hint, ending in a space, or nothing.
    hint: String,
}

fn size(spec: &Value) -> Option<&str> {
    spec["resources"]["requests"]["storage"].as_str()
}

fn claim(old: &Value, new: &Value) -> Option<Found> {
    let without_size = |spec: &Value| {
        let mut spec = spec.clone();
        if let Some(requests) = spec
            .pointer_mut("/resources/requests")
            .and_then(Value::as_object_mut)
        {
            requests.remove("storage");
        }
        spec
    };
    if let Some(field) = changed_field(&without_size(old), &without_size(new), &[]) {
        return Some(Found {
            message: format!(
                "the claim's `spec.{field}` would change; Kubernetes keeps a claim's spec as it was created, but for a larger size"
            ),
            pointer: format!("/spec/{field}"),
            hint: String::new(),
        });
    }
    let (from, to) = (size(old)?, size(new)?);
    let (a, b) = (
        crate::quantity::parse(from).ok()?,
        crate::quantity::parse(to).ok()?,
    );
    let pointer = "/spec/resources/requests/storage".to_owned();
    if b < a {
        return Some(Found {
            message: format!(
                "the claim's size would shrink from {from} to {to}; Kubernetes never makes a claim smaller"
            ),
            pointer,
            hint: String::new(),
        });
    }
    let class = new["storageClassName"].as_str();
    (b > a && class == Some("")).then(|| Found {
        message: format!(
            "the claim's size would grow from {from} to {to}, but it has no storage class (its volume is static); Kubernetes resizes only a claim of a class that allows expansion"
        ),
        pointer,
        hint: "the size of a static volume only describes it: ".to_owned(),
    })
}

fn volume(old: &Value, new: &Value) -> Option<Found> {
    let field = changed_field(old, new, PV_MUTABLE)?;
    Some(Found {
        message: format!(
            "the PersistentVolume's source (`spec.{field}`) would change; Kubernetes keeps a PersistentVolume's source as it was created"
        ),
        pointer: format!("/spec/{field}"),
        hint: String::new(),
    })
}

/// The first key (in order) of either spec whose values differ, skipping
/// `except`.
fn changed_field(old: &Value, new: &Value, except: &[&str]) -> Option<String> {
    let empty = serde_json::Map::new();
    let (o, n) = (
        old.as_object().unwrap_or(&empty),
        new.as_object().unwrap_or(&empty),
    );
    let mut keys: Vec<&String> = o.keys().chain(n.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| !except.contains(&k.as_str()))
        .find(|k| o.get(*k) != n.get(*k))
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim_file(size: &str, class: &str, mode: &str) -> Vec<u8> {
        format!(
            "# Code generated by trainc from jobs/a.yaml. DO NOT EDIT.\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: a-data\nspec:\n  accessModes:\n  - {mode}\n  resources:\n    requests:\n      storage: {size}\n  storageClassName: \"{class}\"\n"
        )
        .into_bytes()
    }

    fn volume_file(server: &str, size: &str) -> Vec<u8> {
        format!(
            "# Code generated by trainc from jobs/a.yaml. DO NOT EDIT.\napiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: ml.a.data\nspec:\n  capacity:\n    storage: {size}\n  nfs:\n    path: /data\n    server: {server}\n"
        )
        .into_bytes()
    }

    #[test]
    fn a_static_claim_keeps_its_size() {
        let d = refused(
            "out/c.yaml",
            &claim_file("5Gi", "", "ReadWriteMany"),
            &claim_file("10Gi", "", "ReadWriteMany"),
        )
        .expect("refused");
        let text = crate::diagnostic::render_text(&[d], false);
        assert!(text.contains("out/c.yaml:11:16"), "{text}");
        assert!(text.contains("from 5Gi to 10Gi"), "{text}");
        assert!(text.contains("new name in jobs/a.yaml"), "{text}");
    }

    #[test]
    fn a_claim_of_a_class_grows_and_never_shrinks() {
        let grow = refused(
            "c.yaml",
            &claim_file("5Gi", "fast", "ReadWriteOnce"),
            &claim_file("6000Mi", "fast", "ReadWriteOnce"),
        );
        assert!(grow.is_none());
        let shrink = refused(
            "c.yaml",
            &claim_file("5Gi", "fast", "ReadWriteOnce"),
            &claim_file("4Gi", "fast", "ReadWriteOnce"),
        );
        assert!(shrink.is_some());
        // The same size, written another way, is no change.
        assert!(
            refused(
                "c.yaml",
                &claim_file("1Gi", "", "ReadWriteOnce"),
                &claim_file("1024Mi", "", "ReadWriteOnce"),
            )
            .is_none()
        );
    }

    #[test]
    fn a_claim_keeps_the_rest_of_its_spec() {
        let d = refused(
            "c.yaml",
            &claim_file("5Gi", "", "ReadWriteOnce"),
            &claim_file("5Gi", "", "ReadWriteMany"),
        )
        .expect("refused");
        assert!(d.message.contains("spec.accessModes"), "{}", d.message);
    }

    #[test]
    fn a_volume_keeps_its_source_and_takes_a_new_capacity() {
        assert!(
            refused(
                "v.yaml",
                &volume_file("a", "5Gi"),
                &volume_file("a", "10Gi")
            )
            .is_none()
        );
        let d =
            refused("v.yaml", &volume_file("a", "5Gi"), &volume_file("b", "5Gi")).expect("refused");
        assert!(d.message.contains("spec.nfs"), "{}", d.message);
        // Another kind of file, or a file that turned into another kind, is
        // not compared.
        assert!(
            refused(
                "v.yaml",
                &volume_file("a", "5Gi"),
                &claim_file("5Gi", "", "x")
            )
            .is_none()
        );
    }
}
