//! The output budget of each document: every task's manifest repeats its
//! job's settings, so a job's tasks times the size of those settings is what
//! it makes trainc write, at the least. Checked before anything is compiled,
//! so a definition that would make gigabytes is refused in milliseconds; the
//! exact output is checked again after rendering ([`crate::limits`]).

use crate::diagnostic::Diagnostic;
use crate::limits::{MAX_OUTPUT_BYTES, mib, weight};
use crate::load::Document;
use crate::model::definition::RoleKind;
use crate::model::definition::TrainingJob;

/// `(role, replicas, bytes per task)` for each role with tasks: see
/// [`per_task`].
pub(super) type Tasks = Vec<(RoleKind, u64, u64)>;

/// The settings of a task of each role: the document, less what reaches no
/// task's pod (the build inputs, which go to the Dockerfile; TensorBoard,
/// its own Deployment; an NFS or CSI volume and a claim's selector, the
/// PersistentVolume and the claim) and less the other roles (their own
/// settings, and the volumes only they mount). `(role, replicas, bytes per
/// task)` for roles with tasks. The patches are left out: they count by
/// what they add to the pods ([`add_patches`]), which only applying them
/// tells (a `copy` writes more than its own text).
pub(super) fn per_task(doc: &Document, def: &TrainingJob) -> Tasks {
    let at = |p: &str| doc.value.pointer(p).map_or(0, weight);
    let mut outside = 0u64;
    let mut only: Vec<(RoleKind, u64)> = Vec::new();
    for (i, v) in def.spec.storage.iter().enumerate() {
        let base = format!("/spec/storage/{i}");
        let claim_only: u64 = ["nfs", "csi", "selector"]
            .iter()
            .map(|f| at(&format!("{base}/{f}")))
            .sum();
        outside += claim_only;
        if !v.roles.is_empty() {
            let rest = at(&base).saturating_sub(claim_only);
            outside += rest;
            let mut roles = v.roles.clone();
            roles.sort();
            roles.dedup();
            only.extend(roles.into_iter().map(|k| (k, rest)));
        }
    }
    let roles: Vec<(RoleKind, u64, u64)> = RoleKind::ALL
        .into_iter()
        .filter_map(|k| {
            let n = u64::from(k.of(&def.spec.roles)?.replicas);
            Some((k, n, at(&format!("/spec/roles/{}", k.as_str()))))
        })
        .collect();
    let common = weight(&doc.value)
        .saturating_sub(at("/spec/build") + at("/spec/tensorboard") + at("/spec/patches") + outside)
        .saturating_sub(roles.iter().map(|(_, _, w)| w).sum());
    roles
        .into_iter()
        .filter(|(_, n, _)| *n > 0)
        .map(|(k, n, w)| {
            let mounts: u64 = only.iter().filter(|(r, _)| *r == k).map(|(_, b)| b).sum();
            (k, n, common + w + mounts)
        })
        .collect()
}

/// Adds to each role's settings what the patches add to its pods (`grown`,
/// role → bytes, measured by applying them).
pub(super) fn add_patches(roles: &mut Tasks, grown: &[(RoleKind, u64)]) {
    for (kind, _, w) in roles.iter_mut() {
        let more: u64 = grown
            .iter()
            .filter(|(k, _)| k == kind)
            .map(|(_, b)| b)
            .sum();
        *w = w.saturating_add(more);
    }
}

/// The least output one document makes, its patches not applied: its tasks
/// times their settings.
pub fn floor(doc: &Document, def: &TrainingJob) -> u64 {
    floor_of(&per_task(doc, def))
}

/// [`floor`] of a document's [`per_task`].
pub(super) fn floor_of(roles: &Tasks) -> u64 {
    roles.iter().map(|(_, n, w)| n.saturating_mul(*w)).sum()
}

/// Refuses the job if its tasks times their settings pass the output
/// limit, at the replicas of the role that weighs most (all jobs together
/// are a rule across documents: [`super::across::check`]). `roles`: its
/// [`per_task`], and `patched` if that includes what the patches add
/// ([`add_patches`]).
pub(super) fn check(doc: &Document, roles: &Tasks, patched: bool) -> Option<Diagnostic> {
    let settings = if patched {
        "settings each, with what the patches add to each pod,"
    } else {
        "settings each"
    };
    let floor = floor_of(roles);
    if floor <= MAX_OUTPUT_BYTES {
        return None;
    }
    let (kind, _, _) = roles.iter().max_by_key(|(_, n, w)| n.saturating_mul(*w))?;
    let tasks: u64 = roles.iter().map(|(_, n, _)| n).sum();
    let most = roles.iter().map(|(_, _, w)| *w).max().unwrap_or(0);
    let pointer = format!("/spec/roles/{}/replicas", kind.as_str());
    Some(
        Diagnostic::new(format!(
            "{tasks} tasks with up to {} KiB of {settings} make at least {} of manifests, over the {} limit for a build's output",
            most.div_ceil(1024),
            mib(floor),
            mib(MAX_OUTPUT_BYTES)
        ))
        .path(doc.dotted(&pointer))
        .at(doc.locate(&pointer))
        .hint(if patched {
            "every task's manifest repeats the job's settings and what its patches write into its pod (a `copy` writes the whole value again): copy less, shorten the settings, or run fewer tasks"
        } else {
            "every task's manifest repeats the job's settings (command, args, env, hyperparameters, labels, annotations): shorten them, e.g. put long scripts into the image, or run fewer tasks"
        }),
    )
}
