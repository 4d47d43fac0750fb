//! Stage 2: rules about `spec.patches` (the escape hatch) and the roles'
//! `affinity` that the schema cannot say: the shape of a patch, the roles
//! it names, strategic-merge directives and merge keys, JSON-patch paths
//! into the Kubernetes schema, an affinity Kubernetes can read. What
//! applying the patches finds is [`applied`]'s, on the resolved job.

use k8s_openapi::api::core::v1::Affinity;
use serde_json::Value;

use crate::compile::patch::{self, json, smp};
use crate::diagnostic::Diagnostic;
use crate::load::Document;
use crate::load::Findings;
use crate::model::Job;
use crate::model::definition::RoleKind;
use crate::model::definition::TrainingJob;
use crate::model::schema::Kube;
use crate::source::pointer_segment;

pub(super) fn check(cx: &mut Findings, def: &TrainingJob) {
    for (i, p) in def.spec.patches.iter().enumerate() {
        let base = format!("/spec/patches/{i}");
        match (&p.strategic, &p.json) {
            (Some(_), Some(_)) => cx.error_at_key(
                &format!("{base}/json"),
                "a patch is `strategic` or `json`, not both",
                "make them two patches; they apply in order",
            ),
            (None, None) => cx.error_at_key(
                &base,
                "a patch needs `strategic` (a partial pod template) or `json` (RFC 6902 operations)",
                "e.g. `strategic: {spec: {terminationGracePeriodSeconds: 300}}`",
            ),
            _ => {}
        }
        for (j, r) in p.roles.iter().enumerate() {
            let defined = RoleKind::parse(r).is_some_and(|k| k.of(&def.spec.roles).is_some());
            if !defined {
                let roles: Vec<String> = RoleKind::ALL
                    .iter()
                    .filter(|k| k.of(&def.spec.roles).is_some())
                    .map(|k| format!("`{}`", k.as_str()))
                    .collect();
                cx.error(
                    &format!("{base}/roles/{j}"),
                    format!("this job has no `{r}` role"),
                    format!("its roles are {}", roles.join(", ")),
                );
            }
        }
        let schema = Kube::pod_template();
        if let Some(s) = &p.strategic {
            report(cx, &format!("{base}/strategic"), smp::problems(s, schema));
        }
        for (j, op) in p.json.iter().flatten().enumerate() {
            report(cx, &format!("{base}/json/{j}"), json::problems(op, schema));
        }
    }
    for kind in RoleKind::ALL {
        let Some(a) = kind.of(&def.spec.roles).and_then(|r| r.affinity.as_ref()) else {
            continue;
        };
        affinity(cx, &format!("/spec/roles/{}/affinity", kind.as_str()), a);
    }
}

fn report(cx: &mut Findings, base: &str, problems: Vec<smp::Problem>) {
    for p in problems {
        let pointer = format!("{base}{}", p.at);
        // A misspelt field or directive is shown at its name.
        let last = p.at.rsplit('/').next().unwrap_or_default();
        let pointer_value = matches!(last, "path" | "from");
        if !pointer_value && (last.starts_with('$') || p.message.contains("has no field")) {
            cx.error_at_key(&pointer, p.message, p.hint);
        } else {
            cx.error(&pointer, p.message, p.hint);
        }
    }
}

/// An affinity: no strategic-merge directives (it is a value, not a
/// patch), and one Kubernetes reads. Unknown fields and types are the
/// schema's; this finds the rest (a number out of range, a list item
/// that is `null`).
fn affinity(cx: &mut Findings, base: &str, a: &Value) {
    fn directives(v: &Value, at: &str, out: &mut Vec<String>) {
        match v {
            Value::Object(o) => {
                for (k, x) in o {
                    let here = format!("{at}/{}", pointer_segment(k));
                    if k.starts_with('$') {
                        out.push(here);
                    } else {
                        directives(x, &here, out);
                    }
                }
            }
            Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    directives(x, &format!("{at}/{i}"), out);
                }
            }
            _ => {}
        }
    }
    let mut found = Vec::new();
    directives(a, base, &mut found);
    for at in &found {
        cx.error_at_key(
            at,
            "strategic-merge directives apply in `spec.patches`, not in an affinity",
            "remove it: the affinity is set as written",
        );
    }
    if !found.is_empty() {
        return;
    }
    if let Some(s) = Kube::def("Affinity")
        && let Some((at, field)) = patch::missing_required(a, s)
    {
        cx.error_at_key(
            &format!("{base}{at}"),
            format!("missing field `{field}`, which Kubernetes requires"),
            format!("add `{field}:` here"),
        );
        return;
    }
    if let Err(e) = crate::load::from_value::<Affinity>(a) {
        let at: String = e
            .path()
            .iter()
            .filter_map(|s| match s {
                serde_path_to_error::Segment::Seq { index } => Some(format!("/{index}")),
                serde_path_to_error::Segment::Map { key } => {
                    Some(format!("/{}", pointer_segment(key)))
                }
                _ => None,
            })
            .collect();
        cx.error(
            &format!("{base}{at}"),
            format!("not a Kubernetes affinity: {}", e.inner()),
            "see `kubectl explain pod.spec.affinity`",
        );
    }
}

/// What applying the job's patches to its pod templates finds (see
/// [`patch::check`]), located in its definition, and what they add to each
/// role's pods, as the output budget counts bytes.
pub(super) fn applied(doc: &Document, job: &Job) -> (Vec<Diagnostic>, Vec<(RoleKind, u64)>) {
    let checked = patch::check(job);
    let diags = checked
        .findings
        .into_iter()
        .map(|f| {
            let d = if f.warning {
                Diagnostic::warning(f.message)
            } else {
                Diagnostic::new(f.message)
            };
            let d = d.path(doc.dotted(&f.pointer)).at(doc.locate(&f.pointer));
            if f.hint.is_empty() { d } else { d.hint(f.hint) }
        })
        .collect();
    (diags, checked.grown)
}
