//! Stage 3 (compile), shared by every target: `spec.patches`, the escape
//! hatch for what the definition format does not cover. Each patch is
//! applied in order to the pod template trainc generates for a task of its
//! roles ([`apply`], at the end of [`super::pod::task_template`]), writing
//! no more than an [`Allowance`] into it, after which the template must
//! still be a valid Kubernetes pod template (its schema, and what the API
//! server refuses beyond it: [`apiserver`]) and keep what trainc relies on
//! ([`invariants`]).
//!
//! Validation applies the patches once to every template of the job's
//! target ([`check`]), so that a patch that does not apply, breaks the pod
//! template or loosens its Pod Security is reported in the definition, and
//! the compiler never meets it.

mod apiserver;
pub mod json;
pub mod risks;
pub mod smp;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use serde_json::{Value, json};

use super::index::INDEX_VAR;
use super::pod::CLUSTER_SPEC_VOLUME;
use super::{Object, Run, meta};
use crate::limits::{MAX_PATCH_BYTES, mib};
use crate::model::Job;
use crate::model::definition::RoleKind;
use crate::model::job::Change;
use crate::model::schema::{Kube, ListMerge};
use crate::source::pointer_segment;

/// What applying a patch found: where in the definition (a JSON pointer
/// such as `/spec/patches/0/strategic/spec`), what, and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Finding {
    pub pointer: String,
    pub message: String,
    pub hint: String,
    /// Reported, but the build goes on (a patch that loosens Pod Security).
    pub warning: bool,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.pointer, self.message)
    }
}

/// What the patches may still write into one pod template, in bytes of
/// compact JSON ([`MAX_PATCH_BYTES`]). Each value a patch writes is
/// charged before it is written, so that no number of copies can grow a
/// template, or the work of patching it, past the bound.
#[derive(Debug)]
pub struct Allowance {
    left: u64,
}

impl Allowance {
    pub fn new() -> Self {
        Self {
            left: MAX_PATCH_BYTES,
        }
    }

    /// The bytes still allowed.
    pub fn left(&self) -> u64 {
        self.left
    }

    /// Charges the size of `v` if it fits, and says whether it did; no
    /// more of `v` is serialized than what was left.
    pub fn charge(&mut self, v: &Value) -> bool {
        let mut meter = Meter { left: self.left };
        let fits = serde_json::to_writer(&mut meter, v).is_ok();
        if fits {
            self.left = meter.left;
        }
        fits
    }
}

impl Default for Allowance {
    fn default() -> Self {
        Self::new()
    }
}

/// A sink that counts bytes down and fails past zero.
struct Meter {
    left: u64,
}

impl std::io::Write for Meter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = buf.len() as u64;
        if n > self.left {
            return Err(std::io::Error::other("over the allowance"));
        }
        self.left -= n;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The message for `what` (a patch or an operation), which the allowance
/// has no room for. The same for every role, whatever each had left, so
/// that it is reported once.
fn too_much(what: &str) -> String {
    format!(
        "{what} would take what the patches write into one pod template past {}",
        mib(MAX_PATCH_BYTES)
    )
}

/// Label prefixes whose labels trainc sets and relies on.
const RESERVED_LABELS: [&str; 2] = ["app.kubernetes.io/", "trainc.dev/"];
/// The volume types the `restricted` Pod Security profile allows.
const RESTRICTED_VOLUMES: [&str; 8] = [
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
];
/// The arguments TensorFlow 1.x's cluster flags start with.
const CLUSTER_FLAGS: [&str; 4] = [
    "--ps_hosts=",
    "--worker_hosts=",
    "--job_name=",
    "--task_index=",
];

/// The pod template of a task of `kind`, with the job's patches for it
/// applied.
pub fn apply(
    job: &Job,
    kind: RoleKind,
    template: PodTemplateSpec,
) -> Result<PodTemplateSpec, Finding> {
    apply_traced(job, kind, template, false)
        .map(|a| a.template)
        .map_err(|f| f.of_roles(&[kind]))
}

/// A pod template with the patches applied, and what applying them found.
struct Applied {
    template: PodTemplateSpec,
    /// About each patch, when applied thoroughly.
    warnings: Vec<Finding>,
    /// What the patches added to the template, as the output budget counts
    /// bytes ([`crate::limits::weight`]), when applied thoroughly.
    grown: u64,
}

impl Finding {
    /// The finding, saying which roles' pods it is about.
    fn of_roles(mut self, roles: &[RoleKind]) -> Self {
        let names: Vec<String> = roles.iter().map(|r| format!("`{}`", r.as_str())).collect();
        let s = if names.len() == 1 { "" } else { "s" };
        self.message = format!("{} (role{s} {})", self.message, names.join(", "));
        self
    }
}

/// [`apply`], and the warnings about each patch. `thorough` checks the
/// template after each patch, so that a finding names the patch that
/// caused it; else only after the last (the build, which validation has
/// run thoroughly: a job may have a thousand tasks and many patches).
fn apply_traced(
    job: &Job,
    kind: RoleKind,
    template: PodTemplateSpec,
    thorough: bool,
) -> Result<Applied, Finding> {
    let mine = || {
        job.patches
            .iter()
            .enumerate()
            .filter(|(_, p)| p.applies_to(kind))
    };
    if mine().next().is_none() {
        return Ok(Applied {
            template,
            warnings: Vec::new(),
            grown: 0,
        });
    }
    let internal = |e: serde_json::Error| Finding {
        pointer: "/spec/patches".into(),
        message: format!("internal error: {e}"),
        hint: String::new(),
        warning: false,
    };
    let original = serde_json::to_value(&template).map_err(internal)?;
    let mut current = original.clone();
    let mut typed = template;
    let mut warnings = Vec::new();
    let mut allowance = Allowance::new();
    let count = mine().count();
    for (n, (i, patch)) in mine().enumerate() {
        let before = if thorough {
            current.clone()
        } else {
            Value::Null
        };
        let error = |at: String, message: String, hint: String| Finding {
            pointer: format!("/spec/patches/{i}{at}"),
            message,
            hint,
            warning: false,
        };
        match &patch.change {
            Change::Strategic(p) => {
                // A strategic patch writes at most what it holds.
                if !allowance.charge(p) {
                    return Err(error(
                        "/strategic".into(),
                        too_much("this patch"),
                        "a strategic patch writes what it holds: make it smaller".into(),
                    ));
                }
                smp::merge(&mut current, p, Kube::pod_template())
                    .map_err(|e| error(format!("/strategic{}", e.at), e.message, e.hint))?
            }
            Change::Json(ops) => json::apply(&mut current, ops, &mut allowance)
                .map_err(|e| error(format!("/json{}", e.at), e.message, e.hint))?,
        }
        if !thorough && n + 1 < count {
            continue;
        }
        // The part of the patch that wrote `path` of the template `doc`.
        let wrote = |doc: &Value, path: &[Segment]| match &patch.change {
            Change::Strategic(p) => {
                format!("/strategic{}", locate(doc, path, p, Kube::pod_template()))
            }
            Change::Json(ops) => format!("/json{}", locate_op(path, ops)),
        };
        // Where the patched template `doc` is no longer one: at `path`,
        // `what`, and how to fix it.
        let refused = |doc: &Value, path: Vec<Segment>, what: String, hint: String| {
            let at = wrote(doc, &path);
            let field = dotted(&path);
            let place = if field.is_empty() {
                String::new()
            } else {
                format!(" at `{field}`")
            };
            error(
                at,
                format!("the pod template is no longer valid{place}: {what}"),
                hint,
            )
        };
        let invalid = |doc: &Value, path: Vec<Segment>, what: String| {
            refused(
                doc,
                path,
                what,
                "Kubernetes would refuse it: complete or correct what the patch writes there"
                    .into(),
            )
        };
        // k8s-openapi reads a missing required field as its default.
        if let Some(s) = Kube::pod_template()
            && let Some((path, field)) = missing(&current, s, &mut Vec::new())
        {
            return Err(invalid(&current, path, format!("missing field `{field}`")));
        }
        typed = crate::load::from_value(&current).map_err(|e| {
            let path: Vec<Segment> = e
                .path()
                .iter()
                .filter_map(|s| match s {
                    serde_path_to_error::Segment::Seq { index } => Some(Segment::Index(*index)),
                    serde_path_to_error::Segment::Map { key } => Some(Segment::Key(key.clone())),
                    _ => None,
                })
                .collect();
            invalid(&current, path, e.inner().to_string())
        })?;
        current = serde_json::to_value(&typed).map_err(internal)?;
        if let Some(r) = apiserver::refusal(&current) {
            return Err(refused(&current, r.path, r.message, r.hint));
        }
        if let Err((message, hint)) = invariants(job, &original, &current) {
            return Err(error(String::new(), message, hint));
        }
        if thorough {
            for r in risks::changes(super::pod::container(job), &before, &current) {
                warnings.push(Finding {
                    pointer: format!("/spec/patches/{i}{}", wrote(&current, &r.path)),
                    message: r.message,
                    hint: r.hint,
                    warning: true,
                });
            }
        }
        let changed = if thorough {
            pod_security_changes(&before, &current)
        } else {
            Vec::new()
        };
        if !changed.is_empty() {
            warnings.push(Finding {
                pointer: format!("/spec/patches/{i}"),
                message: format!(
                    "this patch changes what Pod Security checks ({}): the pods may no longer meet the `restricted` profile",
                    changed.join(", ")
                ),
                hint: "a patch relaxes on purpose, like `spec.security`: `restricted` wants every container to run as non-root, without privilege escalation, with every capability dropped and a seccomp profile, and no host namespaces, ports or paths".into(),
                warning: true,
            });
        }
    }
    let grown = if thorough {
        crate::limits::weight(&current).saturating_sub(crate::limits::weight(&original))
    } else {
        0
    };
    Ok(Applied {
        template: typed,
        warnings,
        grown,
    })
}

/// One step of a path into the pod template.
#[derive(Debug, Clone)]
enum Segment {
    Key(String),
    Index(usize),
}

/// The first field Kubernetes requires that `v` (of schema `s`) lacks: a
/// JSON pointer to the object that lacks it, and its name.
pub fn missing_required(v: &Value, s: Kube) -> Option<(String, String)> {
    let (path, field) = missing(v, s, &mut Vec::new())?;
    let at = path
        .iter()
        .map(|s| match s {
            Segment::Key(k) => format!("/{}", pointer_segment(k)),
            Segment::Index(i) => format!("/{i}"),
        })
        .collect();
    Some((at, field))
}

/// The first field Kubernetes requires that `v` (of schema `s`) lacks:
/// where, and which.
fn missing(v: &Value, s: Kube, path: &mut Vec<Segment>) -> Option<(Vec<Segment>, String)> {
    match v {
        Value::Object(o) => {
            if let Some(r) = s
                .required()
                .into_iter()
                .find(|r| o.get(*r).is_none_or(Value::is_null))
            {
                return Some((path.clone(), r.to_owned()));
            }
            for (k, x) in o {
                if let crate::model::schema::Field::Known(c) = s.field(k) {
                    path.push(Segment::Key(k.clone()));
                    let found = missing(x, c, path);
                    path.pop();
                    if found.is_some() {
                        return found;
                    }
                }
            }
            None
        }
        Value::Array(a) => {
            let items = s.items()?;
            for (i, x) in a.iter().enumerate() {
                path.push(Segment::Index(i));
                let found = missing(x, items, path);
                path.pop();
                if found.is_some() {
                    return found;
                }
            }
            None
        }
        _ => None,
    }
}

fn dotted(path: &[Segment]) -> String {
    let mut out = String::new();
    for s in path {
        match s {
            Segment::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Segment::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// The place in a strategic patch that wrote `path` of the merged
/// template `merged`: list items are found by their merge key. The deepest
/// place the patch has, relative to the patch.
fn locate(merged: &Value, path: &[Segment], patch: &Value, schema: Option<Kube>) -> String {
    let mut at = String::new();
    let (mut m, mut p, mut s) = (merged, patch, schema);
    for seg in path {
        let next = match seg {
            Segment::Key(k) => p.get(k).map(|pv| {
                let field = s.and_then(|s| match s.field(k) {
                    crate::model::schema::Field::Known(f) => Some(f),
                    _ => None,
                });
                (m.get(k), pv, field, pointer_segment(k))
            }),
            Segment::Index(i) => {
                let item = m.get(*i);
                let found = match s.map_or(ListMerge::Replace, Kube::list_merge) {
                    ListMerge::ByKey(key) => {
                        let k = item.and_then(|v| v.get(key));
                        p.as_array()
                            .and_then(|a| a.iter().position(|x| k.is_some() && x.get(key) == k))
                    }
                    _ => Some(*i),
                };
                found.and_then(|j| {
                    p.get(j)
                        .map(|pv| (item, pv, s.and_then(Kube::items), j.to_string()))
                })
            }
        };
        let Some((mv, pv, field, token)) = next else {
            break;
        };
        at.push('/');
        at.push_str(&token);
        p = pv;
        s = field;
        match mv {
            Some(v) => m = v,
            None => break,
        }
    }
    at
}

/// The operation of a JSON patch that wrote `path`: the last one whose
/// path leads there (or below it), else the first.
fn locate_op(path: &[Segment], ops: &[Value]) -> String {
    let wanted: String = path
        .iter()
        .map(|s| match s {
            Segment::Key(k) => format!("/{}", pointer_segment(k)),
            Segment::Index(i) => format!("/{i}"),
        })
        .collect();
    let found = ops.iter().rposition(|op| {
        op.get("path").and_then(Value::as_str).is_some_and(|p| {
            let p = p.strip_suffix("/-").unwrap_or(p);
            wanted == p
                || wanted.starts_with(&format!("{p}/"))
                || p.starts_with(&format!("{wanted}/"))
                || p.is_empty()
        })
    });
    let i = found.unwrap_or(0);
    // What the operation writes is its `value`.
    let member = if ops.get(i).and_then(|o| o.get("value")).is_some() {
        "/value"
    } else {
        ""
    };
    format!("/{i}{member}")
}

/// The program's container (see [`super::pod::container`]).
fn program<'a>(template: &'a Value, container: &str) -> Option<&'a Value> {
    template["spec"]["containers"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == container)
}

fn named<'a>(list: &'a Value, name: &str) -> Option<&'a Value> {
    list.as_array()?.iter().find(|v| v["name"] == name)
}

/// What trainc relies on in a task's pod, unchanged by the patches: the
/// `tensorflow` container, with its port, the cluster spec (`TF_CONFIG`,
/// the task index, the TF1 flags and the mounted ConfigMap); the labels
/// that select the run and its roles; the host name and subdomain that are
/// a task's DNS name; the restart policy that makes the run policy.
/// `(message, hint)` of the first broken.
fn invariants(job: &Job, original: &Value, patched: &Value) -> Result<(), (String, String)> {
    let container = super::pod::container(job);
    let Some(tf) = program(patched, container) else {
        return Err((
            format!("this patch removes the `{container}` container, which runs the program"),
            format!(
                "keep it: change it by its name, `{container}`, and add other containers beside it"
            ),
        ));
    };
    let reserved = |t: &Value| -> BTreeMap<String, Value> {
        t["metadata"]["labels"]
            .as_object()
            .map(|l| {
                l.iter()
                    .filter(|(k, _)| RESERVED_LABELS.iter().any(|p| k.starts_with(p)))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default()
    };
    let (before, after) = (reserved(original), reserved(patched));
    if let Some(k) = before
        .keys()
        .chain(after.keys())
        .find(|k| before.get(*k) != after.get(*k))
    {
        return Err((
            format!("this patch changes the label `{k}`, which trainc sets"),
            "the run's selectors and identity rest on the `app.kubernetes.io/*` and `trainc.dev/*` labels; give your own labels another prefix".into(),
        ));
    }
    for (field, why, hint) in [
        (
            "hostname",
            "a task's DNS name",
            "tasks find each other by these names",
        ),
        (
            "subdomain",
            "a task's DNS name",
            "tasks find each other by these names",
        ),
        (
            "restartPolicy",
            "the run policy",
            "set `spec.runPolicy.restartPolicy` instead",
        ),
    ] {
        if original["spec"][field] != patched["spec"][field] {
            return Err((
                format!("this patch changes `spec.{field}`, which trainc sets: it makes {why}"),
                hint.into(),
            ));
        }
    }
    let Some(tf_before) = program(original, container) else {
        return Ok(());
    };
    if job.framework.tensorflow().is_none() && tf_before["command"] != tf["command"] {
        return Err((
            format!("this patch changes the command of the `{container}` container: `torchrun` with the run's rendezvous"),
            "set the program in the definition (`command`, or `build.entrypoint`); trainc starts `torchrun` with it".into(),
        ));
    }
    for port in tf_before["ports"].as_array().into_iter().flatten() {
        let kept = tf["ports"]
            .as_array()
            .is_some_and(|ps| ps.iter().any(|p| p == port));
        if !kept {
            return Err((
                format!(
                    "this patch changes the port `{}` of the `{container}` container, which the cluster spec names",
                    port["name"].as_str().unwrap_or_default()
                ),
                "set the role's `port` instead".into(),
            ));
        }
    }
    for var in ["TF_CONFIG", INDEX_VAR] {
        if named(&tf_before["env"], var) != named(&tf["env"], var) {
            let hint = if var == "TF_CONFIG" {
                "trainc derives it from the cluster; set `spec.clusterSpec.tfConfig: false` to manage it yourself"
            } else {
                "it holds the task's index, which the cluster spec refers to"
            };
            return Err((
                format!("this patch changes the variable `{var}` of the `{container}` container"),
                hint.into(),
            ));
        }
    }
    if job.framework.tensorflow().is_some_and(|t| t.legacy_flags) {
        let args = |c: &Value| -> Vec<Value> {
            c["args"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter(|v| {
                            v.as_str()
                                .is_some_and(|s| CLUSTER_FLAGS.iter().any(|f| s.starts_with(f)))
                        })
                        .cloned()
                        .collect()
                })
                .unwrap_or_default()
        };
        if args(tf_before) != args(tf) {
            return Err((
                format!("this patch changes the cluster flags trainc passes to the `{container}` container (`spec.clusterSpec.legacyFlags`)"),
                "a strategic patch replaces `args` as a whole: set the arguments in the definition (`spec.args`, or the role's `args`), or insert them with a JSON patch".into(),
            ));
        }
    }
    let mount = |c: &Value| {
        c["volumeMounts"]
            .as_array()
            .and_then(|m| m.iter().find(|m| m["name"] == CLUSTER_SPEC_VOLUME))
            .cloned()
    };
    if named(&original["spec"]["volumes"], CLUSTER_SPEC_VOLUME)
        != named(&patched["spec"]["volumes"], CLUSTER_SPEC_VOLUME)
        || mount(tf_before) != mount(tf)
    {
        return Err((
            format!(
                "this patch changes the volume `{CLUSTER_SPEC_VOLUME}` or its mount, which hold the cluster spec"
            ),
            format!(
                "mount your own volumes under another name than `{CLUSTER_SPEC_VOLUME}` and another path than `{}`",
                crate::names::CLUSTER_SPEC_MOUNT
            ),
        ));
    }
    Ok(())
}

/// What the Pod Security Standards look at in a pod template, by the name
/// shown when it changes.
fn pod_security_view(t: &Value) -> BTreeMap<String, Value> {
    let spec = &t["spec"];
    let mut view = BTreeMap::new();
    for field in [
        "hostNetwork",
        "hostPID",
        "hostIPC",
        "hostUsers",
        "securityContext",
    ] {
        view.insert(format!("`spec.{field}`"), spec[field].clone());
    }
    // Volumes of the types `restricted` allows change nothing it checks.
    let sources: Vec<Value> = spec["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| {
            let kinds: Vec<&String> = v
                .as_object()?
                .keys()
                .filter(|k| *k != "name" && !RESTRICTED_VOLUMES.contains(&k.as_str()))
                .collect();
            (!kinds.is_empty()).then(|| json!([v["name"], kinds, v["hostPath"]]))
        })
        .collect();
    view.insert("the volume types".into(), Value::Array(sources));
    let annotations: Vec<(&String, &Value)> = t["metadata"]["annotations"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.contains("apparmor") || k.contains("seccomp"))
        .collect();
    view.insert(
        "the AppArmor and seccomp annotations".into(),
        json!(annotations),
    );
    // Every container of a name, whatever its list or place: two containers
    // that share a name (which Kubernetes refuses, see [`apiserver`]) must
    // not hide one's settings behind the other's.
    let mut containers: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        for c in spec[list].as_array().into_iter().flatten() {
            let ports: Vec<&Value> = c["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| &p["hostPort"])
                .collect();
            containers
                .entry(format!(
                    "container `{}`",
                    c["name"].as_str().unwrap_or_default()
                ))
                .or_default()
                .push(
                    json!({"securityContext": c["securityContext"], "hostPorts": ports})
                        .to_string(),
                );
        }
    }
    for (name, mut settings) in containers {
        settings.sort();
        view.insert(name, json!(settings));
    }
    view
}

/// The parts of [`pod_security_view`] that differ.
fn pod_security_changes(before: &Value, after: &Value) -> Vec<String> {
    let (b, a) = (pod_security_view(before), pod_security_view(after));
    let mut keys: Vec<&String> = b.keys().chain(a.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| b.get(*k) != a.get(*k))
        .cloned()
        .collect()
}

/// What applying a job's patches found ([`check`]).
#[derive(Debug, Default)]
pub struct Checked {
    pub findings: Vec<Finding>,
    /// What the patches add to a task's pod template, by role, as the
    /// output budget counts bytes ([`crate::limits::weight`]).
    pub grown: Vec<(RoleKind, u64)>,
}

/// Every finding of the job's patches, from applying them to each pod
/// template the job's target generates, as the build will, and what they
/// add to each role's pods. Errors and warnings about a patch are given
/// once, for all its roles.
pub fn check(job: &Job) -> Checked {
    if job.patches.is_empty() {
        return Checked::default();
    }
    let internal = |e: String| Checked {
        findings: vec![Finding {
            pointer: "/spec/patches".into(),
            message: format!("internal error: {e}"),
            hint: String::new(),
            warning: false,
        }],
        grown: Vec::new(),
    };
    // The templates without patches, under the run's real name: a `test`
    // operation sees what the build will patch.
    let name = match super::identity::run_name(job) {
        Ok(n) => n,
        Err(e) => return internal(e),
    };
    let bare = Job {
        patches: Vec::new(),
        ..job.clone()
    };
    let run = Run {
        job: &bare,
        cluster_spec: crate::names::cluster_spec(&name),
        name,
    };
    let manifests = super::run_objects(&run);
    let manifests = match manifests {
        Ok(m) => m,
        Err(e) => return internal(e.to_string()),
    };
    // Findings by (pointer, message) → roles, so that a patch of every role
    // is reported once.
    let mut found: BTreeMap<Finding, Vec<RoleKind>> = BTreeMap::new();
    // Thoroughly once per role; its other tasks' templates (on
    // `kubernetes`, one per task) differ only in the task's names and
    // index, which only a `test` operation can tell apart, so they are
    // checked where one applies.
    let tests = |kind: RoleKind| {
        job.patches.iter().any(|p| {
            p.applies_to(kind)
                && matches!(&p.change, Change::Json(ops) if ops.iter().any(|o| o["op"] == "test"))
        })
    };
    let mut seen: Vec<RoleKind> = Vec::new();
    let mut failed: Vec<RoleKind> = Vec::new();
    let mut grown: Vec<(RoleKind, u64)> = Vec::new();
    for m in &manifests {
        for template in templates(&m.object) {
            let kind = template
                .metadata
                .as_ref()
                .and_then(|m| m.labels.as_ref())
                .and_then(|l| l.get(meta::ROLE))
                .and_then(|r| RoleKind::parse(r));
            let Some(kind) = kind else { continue };
            let thorough = !seen.contains(&kind);
            if failed.contains(&kind) || (!thorough && !tests(kind)) {
                continue;
            }
            seen.push(kind);
            let findings = match apply_traced(job, kind, template.clone(), thorough) {
                Ok(applied) => {
                    if thorough {
                        grown.push((kind, applied.grown));
                    }
                    applied.warnings
                }
                Err(e) => {
                    // One error per role: the others would repeat it.
                    failed.push(kind);
                    vec![e]
                }
            };
            for f in findings {
                let roles = found.entry(f).or_default();
                if !roles.contains(&kind) {
                    roles.push(kind);
                }
            }
        }
    }
    let findings = found
        .into_iter()
        .map(|(f, mut roles)| {
            roles.sort();
            f.of_roles(&roles)
        })
        .collect();
    Checked { findings, grown }
}

/// The pod templates of a generated object.
fn templates(object: &Object) -> Vec<&PodTemplateSpec> {
    match object {
        Object::Job(j) => j.spec.iter().map(|s| &s.template).collect(),
        Object::Custom(c) => c.templates(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_patch_is_located_by_merge_key() {
        let merged = json!({"spec": {"containers": [
            {"name": "tensorflow"},
            {"name": "side", "livenessProbe": {"httpGet": {}}}
        ]}});
        let patch = json!({"spec": {"containers": [
            {"name": "side", "livenessProbe": {"httpGet": {"path": "/"}}}
        ]}});
        let path = [
            Segment::Key("spec".into()),
            Segment::Key("containers".into()),
            Segment::Index(1),
            Segment::Key("livenessProbe".into()),
            Segment::Key("httpGet".into()),
        ];
        assert_eq!(
            locate(&merged, &path, &patch, Kube::pod_template()),
            "/spec/containers/0/livenessProbe/httpGet"
        );
        let ops = [
            json!({"op": "add", "path": "/spec/containers/-", "value": {}}),
            json!({"op": "add", "path": "/spec/hostname", "value": "x"}),
        ];
        assert_eq!(
            locate_op(
                &[
                    Segment::Key("spec".into()),
                    Segment::Key("containers".into()),
                    Segment::Index(1)
                ],
                &ops
            ),
            "/0/value"
        );
    }

    #[test]
    fn pod_security_changes_name_what_changed() {
        let before = json!({"spec": {"containers": [{"name": "tensorflow", "image": "a"}]}});
        let after = json!({"spec": {
            "hostNetwork": true,
            "containers": [{"name": "tensorflow", "image": "b"}, {"name": "side"}],
            "volumes": [{"name": "h", "hostPath": {"path": "/"}}]
        }});
        assert_eq!(
            pod_security_changes(&before, &after),
            ["`spec.hostNetwork`", "container `side`", "the volume types"]
        );
        assert!(pod_security_changes(&before, &before).is_empty());
    }

    /// Two containers of one name, one privileged and one as before: the
    /// second does not hide the first.
    #[test]
    fn pod_security_sees_every_container_of_a_name() {
        let safe = json!({"allowPrivilegeEscalation": false});
        let before =
            json!({"spec": {"containers": [{"name": "tensorflow", "securityContext": safe}]}});
        let after = json!({"spec": {
            "containers": [{"name": "tensorflow", "securityContext": {"privileged": true}}],
            "initContainers": [{"name": "tensorflow", "securityContext": safe}]
        }});
        assert_eq!(
            pod_security_changes(&before, &after),
            ["container `tensorflow`"]
        );
        // Order and list do not matter, only the settings.
        let moved =
            json!({"spec": {"initContainers": [{"name": "tensorflow", "securityContext": safe}]}});
        assert!(pod_security_changes(&before, &moved).is_empty());
    }
}
