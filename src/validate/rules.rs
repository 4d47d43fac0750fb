//! Semantic rules: what the schema cannot say. Each rule reads the typed
//! definition and reports findings located through the document's spans.

use std::collections::BTreeMap;

use crate::compile;
use crate::compile::tensorflow::INDEX_VAR;
use crate::diagnostic::Diagnostic;
use crate::load::{Document, pointer_segment};
use crate::model::definition::HyperparameterStyle;
use crate::model::definition::Target;
use crate::model::definition::{Scalar, Toleration, TrainingJob, Volume};
use crate::model::job::{RoleKind, hyperparameter_env_name, namespace_of, target_of};
use crate::model::project::Defaults;
use crate::names;
use crate::quantity;

/// Names trainc passes itself; a hyperparameter of the same name would give the
/// program the flag twice.
const LEGACY_FLAGS: [&str; 4] = ["ps_hosts", "worker_hosts", "job_name", "task_index"];
/// Label prefixes trainc owns; user labels under them would break selectors.
const RESERVED_LABEL_PREFIXES: [&str; 2] = ["app.kubernetes.io/", "trainc.dev/"];

/// Where findings of one document go. Rules that depend on the target live
/// with the target (`compile::<target>::check`) and report through this.
pub(crate) struct Ctx<'a> {
    pub(crate) doc: &'a Document,
    pub(crate) out: Vec<Diagnostic>,
}

impl Ctx<'_> {
    pub(crate) fn error(
        &mut self,
        pointer: &str,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) {
        let hint = hint.into();
        let mut d = Diagnostic::new(message)
            .path(self.doc.dotted(pointer))
            .at(self.doc.locate(pointer));
        if !hint.is_empty() {
            d = d.hint(hint);
        }
        self.out.push(d);
    }

    pub(crate) fn warning(
        &mut self,
        pointer: &str,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) {
        self.out.push(
            Diagnostic::warning(message)
                .path(self.doc.dotted(pointer))
                .at(self.doc.locate(pointer))
                .hint(hint),
        );
    }

    pub(crate) fn error_at_key(
        &mut self,
        pointer: &str,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) {
        self.out.push(
            Diagnostic::new(message)
                .path(self.doc.dotted(pointer))
                .at(self.doc.locate_key(pointer))
                .hint(hint),
        );
    }
}

/// Runs every rule on one schema-valid definition.
pub fn check(doc: &Document, def: &TrainingJob, vcx: &super::Context) -> Vec<Diagnostic> {
    let defaults = vcx.defaults;
    let mut cx = Ctx {
        doc,
        out: Vec::new(),
    };
    super::image::check(&mut cx, def, vcx);
    roles(&mut cx, def);
    scheduling(&mut cx, def);
    quantities(&mut cx, def);
    storage(&mut cx, def);
    tensorboard(&mut cx, def);
    super::security::check(&mut cx, def);
    super::patches::check(&mut cx, def);
    access_modes(&mut cx, def);
    environment(&mut cx, def, target_of(def, defaults));
    labels(&mut cx, def);
    generated_names(&mut cx, def, defaults);
    match target_of(def, defaults) {
        Target::Kubernetes => {}
        Target::Jobset => compile::jobset::check(&mut cx, def),
        Target::Tfjob => compile::tfjob::check(&mut cx, def),
    }
    cx.out
}

fn replicas(def: &TrainingJob, kind: RoleKind) -> u32 {
    kind.of(&def.spec.roles).map_or(0, |r| r.replicas)
}

fn roles(cx: &mut Ctx, def: &TrainingJob) {
    // Parameter-server training, in both the TF1 layout (ps + workers) and the
    // TF2 layout (a chief coordinating ps + workers), needs both kinds of task.
    for (kind, what) in [
        (RoleKind::Ps, "parameter server"),
        (RoleKind::Worker, "worker"),
    ] {
        if replicas(def, kind) == 0 {
            let role = kind.as_str();
            let pointer = if kind.of(&def.spec.roles).is_some() {
                format!("/spec/roles/{role}/replicas")
            } else {
                "/spec/roles".to_owned()
            };
            cx.error_at_key(
                &pointer,
                format!("the parameter-server strategy needs at least one {what}"),
                format!("set `spec.roles.{role}.replicas` to 1 or more"),
            );
        }
    }
    if replicas(def, RoleKind::Chief) > 1 {
        cx.error(
            "/spec/roles/chief/replicas",
            "a job has at most one chief",
            "set `replicas: 1`; use `worker` for more tasks",
        );
    }
    if replicas(def, RoleKind::Evaluator) > 1 {
        cx.error(
            "/spec/roles/evaluator/replicas",
            "TensorFlow runs at most one evaluator",
            "set `replicas: 1`",
        );
    }
}

/// Node selectors and tolerations, held to the rules the API server applies,
/// so a bad one fails here and not at sync time.
fn scheduling(cx: &mut Ctx, def: &TrainingJob) {
    for kind in RoleKind::ALL {
        let Some(role) = kind.of(&def.spec.roles) else {
            continue;
        };
        let base = format!("/spec/roles/{}", kind.as_str());
        for (k, v) in &role.node_selector {
            let at = format!("{base}/nodeSelector/{}", pointer_segment(k));
            if !key_ok(k) {
                cx.error_at_key(
                    &at,
                    format!("`{k}` is not a valid node label key"),
                    "use an optional DNS prefix and '/', then up to 63 letters, digits, '-', '_' or '.'",
                );
            }
            if !(v.is_empty() || label_name_ok(v)) {
                cx.error(
                    &at,
                    format!("`{v}` is not a valid node label value"),
                    "use up to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit",
                );
            }
        }
        for (i, t) in role.tolerations.iter().enumerate() {
            toleration(cx, &format!("{base}/tolerations/{i}"), t);
        }
    }
}

fn toleration(cx: &mut Ctx, at: &str, t: &Toleration) {
    let exists = t.operator.as_deref() == Some("Exists");
    let key = t.key.as_deref().unwrap_or("");
    if key.is_empty() && !exists {
        cx.error(
            at,
            "a toleration without a key must use `operator: Exists`",
            "set `key`, or `operator: Exists` to tolerate every taint",
        );
    } else if !key.is_empty() && !key_ok(key) {
        cx.error(
            &format!("{at}/key"),
            format!("`{key}` is not a valid taint key"),
            "use an optional DNS prefix and '/', then up to 63 letters, digits, '-', '_' or '.'",
        );
    }
    match t.value.as_deref() {
        Some(v) if exists && !v.is_empty() => cx.error(
            &format!("{at}/value"),
            "a toleration with `operator: Exists` takes no value",
            "remove `value`, or use `operator: Equal`",
        ),
        Some(v) if !v.is_empty() && !label_name_ok(v) => cx.error(
            &format!("{at}/value"),
            format!("`{v}` is not a valid taint value"),
            "use up to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit",
        ),
        _ => {}
    }
    if t.toleration_seconds.is_some() && t.effect.as_deref() != Some("NoExecute") {
        cx.error(
            &format!("{at}/tolerationSeconds"),
            "`tolerationSeconds` only applies to `effect: NoExecute`",
            "set `effect: NoExecute`, or remove `tolerationSeconds`",
        );
    }
}

fn check_quantity(cx: &mut Ctx, pointer: &str, q: &Scalar, what: &str) {
    match quantity::parse(&q.render()) {
        Err(e) => cx.error(
            pointer,
            e,
            format!(
                "write {what} as a Kubernetes quantity, e.g. {}",
                example(what)
            ),
        ),
        Ok(v) if v <= 0.0 => cx.error(
            pointer,
            format!("{what} must be greater than zero"),
            format!("e.g. {}", example(what)),
        ),
        Ok(_) => {}
    }
}

fn example(what: &str) -> &'static str {
    match what {
        "cpu" => "`500m` or `2`",
        _ => "`512Mi` or `8Gi`",
    }
}

fn quantities(cx: &mut Ctx, def: &TrainingJob) {
    for kind in RoleKind::ALL {
        let Some(r) = kind.of(&def.spec.roles) else {
            continue;
        };
        let base = format!("/spec/roles/{}/resources", kind.as_str());
        if let Some(q) = &r.resources.cpu {
            check_quantity(cx, &format!("{base}/cpu"), q, "cpu");
        }
        if let Some(q) = &r.resources.memory {
            check_quantity(cx, &format!("{base}/memory"), q, "memory");
        }
    }
    for (i, v) in def.spec.storage.iter().enumerate() {
        if let Some(q) = &v.size {
            check_quantity(cx, &format!("/spec/storage/{i}/size"), q, "size");
        }
    }
    if let Some(q) = &def.spec.shm_size {
        check_quantity(cx, "/spec/shmSize", q, "shmSize");
    }
}

fn storage(cx: &mut Ctx, def: &TrainingJob) {
    let mut names: BTreeMap<&str, usize> = BTreeMap::new();
    let mut mounts: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, v) in def.spec.storage.iter().enumerate() {
        let at = format!("/spec/storage/{i}");
        if let Some(first) = names.insert(&v.name, i) {
            cx.error(
                &format!("{at}/name"),
                format!(
                    "volume name `{}` is already used by spec.storage[{first}]",
                    v.name
                ),
                "give every volume its own name",
            );
        }
        if v.name.starts_with("trainc-") {
            cx.error(
                &format!("{at}/name"),
                format!(
                    "volume name `{}` uses the reserved prefix `trainc-`",
                    v.name
                ),
                "trainc names its own pod volumes `trainc-*`; pick another name",
            );
        }
        let mount = v.mount_path.trim_end_matches('/');
        let mount = if mount.is_empty() { "/" } else { mount };
        if mount == "/" {
            cx.error(
                &format!("{at}/mountPath"),
                "a volume cannot be mounted at `/`",
                "mount it at a directory such as `/data`",
            );
        }
        if let Some(first) = mounts.insert(mount, i) {
            cx.error(
                &format!("{at}/mountPath"),
                format!("mount path `{mount}` is already used by spec.storage[{first}]"),
                "mount every volume at its own path",
            );
        }
        if mount == names::CLUSTER_SPEC_MOUNT
            || (def.spec.shm_size.is_some() && mount == "/dev/shm")
        {
            cx.error(
                &format!("{at}/mountPath"),
                format!("mount path `{mount}` is reserved by trainc"),
                format!(
                    "`{}` holds the cluster spec and `/dev/shm` the shared-memory volume",
                    names::CLUSTER_SPEC_MOUNT
                ),
            );
        }
        let sources = [
            ("nfs", v.nfs.is_some()),
            ("existingClaim", v.existing_claim.is_some()),
            ("storageClass", v.storage_class.is_some()),
        ];
        let given: Vec<&str> = sources.iter().filter(|s| s.1).map(|s| s.0).collect();
        if given.len() > 1 {
            cx.error_at_key(
                &format!("{at}/{}", given[1]),
                format!("a volume takes one of `nfs`, `existingClaim` or `storageClass`, found `{}` and `{}`", given[0], given[1]),
                "keep the one that says where the data lives",
            );
        }
        if v.existing_claim.is_some() {
            if v.size.is_some() {
                cx.error_at_key(
                    &format!("{at}/size"),
                    "`size` has no effect on an existing claim",
                    "remove `size`; the claim's own size applies",
                );
            }
            if v.access_mode.is_some() {
                cx.error_at_key(
                    &format!("{at}/accessMode"),
                    "`accessMode` has no effect on an existing claim",
                    "remove `accessMode`; the claim's own access modes apply",
                );
            }
        } else if v.size.is_none() {
            cx.error_at_key(
                &at,
                format!("volume `{}` needs a `size`", v.name),
                "add e.g. `size: 10Gi`",
            );
        }
    }
}

/// Whether `path` is `mount` or lies below it.
fn lies_on(path: &str, mount: &str) -> bool {
    let mount = mount.trim_end_matches('/');
    path == mount || path.starts_with(&format!("{mount}/")) || mount.is_empty()
}

/// The volume the TensorBoard log directory lies on: the deepest mount
/// containing it, as in the container's view of nested mounts.
fn log_volume(def: &TrainingJob) -> Option<(usize, &Volume)> {
    let tb = def.spec.tensorboard.as_ref().filter(|t| t.enabled)?;
    def.spec
        .storage
        .iter()
        .enumerate()
        .filter(|(_, v)| lies_on(&tb.log_dir, &v.mount_path))
        .max_by_key(|(_, v)| v.mount_path.trim_end_matches('/').len())
}

fn tensorboard(cx: &mut Ctx, def: &TrainingJob) {
    let Some(tb) = def.spec.tensorboard.as_ref().filter(|t| t.enabled) else {
        return;
    };
    match log_volume(def) {
        None => {
            let mounts: Vec<String> = def
                .spec
                .storage
                .iter()
                .map(|v| format!("`{}`", v.mount_path))
                .collect();
            let hint = if mounts.is_empty() {
                "add a shared volume under `spec.storage`, so training and TensorBoard see the same files".to_owned()
            } else {
                format!(
                    "put the log directory below a mounted volume: {}",
                    mounts.join(", ")
                )
            };
            cx.error(
                "/spec/tensorboard/logDir",
                format!("log directory `{}` is not on a mounted volume", tb.log_dir),
                hint,
            );
        }
        Some((i, v)) if v.read_only || v.access_mode.as_deref() == Some("ReadOnlyMany") => {
            cx.error(
                "/spec/tensorboard/logDir",
                format!(
                    "log directory `{}` is on volume `{}`, which training cannot write to",
                    tb.log_dir, v.name
                ),
                format!(
                    "the tasks write the logs TensorBoard reads; make spec.storage[{i}] writable or put the logs on another volume"
                ),
            );
        }
        Some(_) => {}
    }
}

/// Every task mounts every volume (TensorBoard mounts the one holding its
/// logs), and tasks land on different nodes: a single-node access mode would
/// leave all but the first pod waiting on a Multi-Attach error.
fn access_modes(cx: &mut Ctx, def: &TrainingJob) {
    let tasks: u32 = RoleKind::ALL.iter().map(|k| replicas(def, *k)).sum();
    let log = log_volume(def).map(|(i, _)| i);
    for (i, v) in def.spec.storage.iter().enumerate() {
        let mode = v.access_mode.as_deref().unwrap_or("ReadWriteMany");
        if !matches!(mode, "ReadWriteOnce" | "ReadWriteOncePod") {
            continue;
        }
        let pods = tasks + u32::from(log == Some(i));
        if pods > 1 {
            cx.error(
                &format!("/spec/storage/{i}/accessMode"),
                format!(
                    "volume `{}` is {mode}, but {pods} pods mount it",
                    v.name
                ),
                "every task mounts every volume, on different nodes; use `ReadWriteMany` (NFS, CephFS, a cloud file store) or `ReadOnlyMany` for shared input",
            );
        }
    }
}

/// Every `env` map of a definition with its JSON pointer: the job's, then
/// each role's.
pub(crate) fn env_scopes(def: &TrainingJob) -> Vec<(String, &BTreeMap<String, Scalar>)> {
    let spec = &def.spec;
    let mut scopes = vec![("/spec/env".to_owned(), &spec.env)];
    for kind in RoleKind::ALL {
        if let Some(r) = kind.of(&spec.roles) {
            scopes.push((format!("/spec/roles/{}/env", kind.as_str()), &r.env));
        }
    }
    scopes
}

fn environment(cx: &mut Ctx, def: &TrainingJob, target: Target) {
    let spec = &def.spec;
    let scopes = env_scopes(def);
    for (at, env) in &scopes {
        if env.contains_key(INDEX_VAR) {
            cx.error_at_key(
                &format!("{at}/{INDEX_VAR}"),
                format!("`{INDEX_VAR}` is set by trainc"),
                format!("trainc defines it where a task reads its index from a pod label; refer to it as `$({INDEX_VAR})` instead"),
            );
        }
    }
    // On `tfjob` the operator writes `TF_CONFIG`: its own rule says so.
    if spec.cluster_spec.tf_config && target != Target::Tfjob {
        for (at, env) in scopes {
            if env.contains_key("TF_CONFIG") {
                cx.error_at_key(
                    &format!("{at}/TF_CONFIG"),
                    "`TF_CONFIG` is derived by trainc",
                    "remove it, or set `spec.clusterSpec.tfConfig: false` to manage it yourself",
                );
            }
        }
    }
    let styles = spec.hyperparameters_as.as_deref();
    let as_flags = styles.is_none_or(|s| s.contains(&HyperparameterStyle::Flags));
    let as_env = styles.is_some_and(|s| s.contains(&HyperparameterStyle::Env));
    if as_env {
        let mut seen: BTreeMap<String, &str> = BTreeMap::new();
        for name in spec.hyperparameters.keys() {
            let var = hyperparameter_env_name(name);
            if let Some(first) = seen.insert(var.clone(), name) {
                cx.error_at_key(
                    &format!("/spec/hyperparameters/{}", pointer_segment(name)),
                    format!("hyperparameters `{first}` and `{name}` both become `{var}`"),
                    "rename one of them",
                );
            }
        }
    }
    if as_flags && spec.cluster_spec.legacy_flags {
        for name in LEGACY_FLAGS {
            if spec.hyperparameters.contains_key(name) {
                cx.error_at_key(
                    &format!("/spec/hyperparameters/{name}"),
                    format!("hyperparameter `{name}` clashes with the cluster flag `--{name}`"),
                    "rename the hyperparameter, or turn off `spec.clusterSpec.legacyFlags`",
                );
            }
        }
    }
}

fn label_name_ok(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

fn subdomain_ok(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|part| {
            let b = part.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        })
}

/// A label or annotation key: `[prefix/]name`.
fn key_ok(key: &str) -> bool {
    match key.split_once('/') {
        Some((prefix, name)) => subdomain_ok(prefix) && label_name_ok(name),
        None => label_name_ok(key),
    }
}

fn labels(cx: &mut Ctx, def: &TrainingJob) {
    let found = check_labels(
        cx.doc,
        "/metadata",
        &def.metadata.labels,
        &def.metadata.annotations,
    );
    cx.out.extend(found);
}

/// Label and annotation keys and values under `base` (`/metadata` in a
/// definition, `/defaults` in the project file): valid for Kubernetes, and
/// clear of the prefixes trainc sets itself.
pub fn check_labels(
    doc: &Document,
    base: &str,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
) -> Vec<Diagnostic> {
    let mut cx = Ctx {
        doc,
        out: Vec::new(),
    };
    for (field, map, values_are_labels) in [
        ("labels", labels, true),
        ("annotations", annotations, false),
    ] {
        for (k, v) in map {
            let at = format!("{base}/{field}/{}", pointer_segment(k));
            if !key_ok(k) {
                cx.error_at_key(
                    &at,
                    format!("`{k}` is not a valid {} key", &field[..field.len() - 1]),
                    "use an optional DNS prefix and '/', then up to 63 letters, digits, '-', '_' or '.'",
                );
            } else if RESERVED_LABEL_PREFIXES.iter().any(|p| k.starts_with(p)) {
                cx.error_at_key(
                    &at,
                    format!("`{k}` is set by trainc"),
                    "trainc sets the `app.kubernetes.io/*` and `trainc.dev/*` keys itself; use another prefix",
                );
            }
            if values_are_labels && !(v.is_empty() || label_name_ok(v)) {
                cx.error(
                    &at,
                    format!("`{v}` is not a valid label value"),
                    "use up to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit",
                );
            }
        }
    }
    cx.out
}

/// An object a job will generate, named as the compiler will name it (Jobs
/// with a placeholder hash of the real length).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Generated {
    pub kind: &'static str,
    /// `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    pub name: String,
    pub limit: usize,
}

/// Every object name a definition produces, built by the same functions the
/// compiler uses, with a run hash of the real length.
pub fn generated(def: &TrainingJob, defaults: &Defaults) -> Vec<Generated> {
    let job = &def.metadata.name;
    let ns = namespace_of(def, defaults);
    let run = names::run(job, &"x".repeat(names::HASH_LEN));
    let roles: Vec<(RoleKind, u32)> = RoleKind::ALL
        .into_iter()
        .map(|k| (k, replicas(def, k)))
        .filter(|(_, n)| *n > 0)
        .collect();
    let mut out = Vec::new();
    let mut add = |kind: &'static str, namespaced: bool, name: String, limit: usize| {
        out.push(Generated {
            kind,
            namespace: namespaced.then(|| ns.clone()),
            name,
            limit,
        });
    };
    let by_target = match target_of(def, defaults) {
        Target::Kubernetes => compile::kubernetes::generated(&run, &roles),
        Target::Jobset => compile::jobset::generated(&run, &roles),
        Target::Tfjob => compile::tfjob::generated(&run, &roles),
    };
    for (kind, name, limit) in by_target {
        add(kind, true, name, limit);
    }
    if def.spec.tensorboard.as_ref().is_some_and(|t| t.enabled) {
        add("Service", true, names::tensorboard(job), names::LABEL_MAX);
        add(
            "Deployment",
            true,
            names::tensorboard(job),
            names::LABEL_MAX,
        );
    }
    add(
        "ConfigMap",
        true,
        names::cluster_spec(&run),
        names::SUBDOMAIN_MAX,
    );
    for v in &def.spec.storage {
        if v.existing_claim.is_none() {
            add(
                "PersistentVolumeClaim",
                true,
                names::claim(job, &v.name),
                names::SUBDOMAIN_MAX,
            );
        }
        if v.nfs.is_some() {
            add(
                "PersistentVolume",
                false,
                names::volume(&ns, job, &v.name),
                names::SUBDOMAIN_MAX,
            );
        }
    }
    out
}

/// Every generated name must fit its kind's limit; the one furthest over is
/// reported, with the length `metadata.name` must shrink to.
fn generated_names(cx: &mut Ctx, def: &TrainingJob, defaults: &Defaults) {
    let job = &def.metadata.name;
    let worst = generated(def, defaults)
        .into_iter()
        .filter(|g| g.name.len() > g.limit)
        .max_by_key(|g| (g.name.len() - g.limit, g.name.clone()));
    if let Some(g) = worst {
        let over = g.name.len() - g.limit;
        let max = job.len().saturating_sub(over);
        cx.error(
            "/metadata/name",
            format!(
                "generated {} name `{}` is {} characters, over the {}-character limit",
                g.kind,
                g.name,
                g.name.len(),
                g.limit
            ),
            if max > 0 {
                format!("shorten `metadata.name` to at most {max} characters")
            } else {
                "shorten the names that make it up".to_owned()
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_keys() {
        assert!(key_ok("team"));
        assert!(key_ok("example.com/team"));
        assert!(!key_ok("Example.com/team"));
        assert!(!key_ok("-team"));
        assert!(!key_ok(&"a".repeat(64)));
    }

    #[test]
    fn log_dir_on_volume() {
        assert!(lies_on("/data/logs", "/data"));
        assert!(lies_on("/data", "/data/"));
        assert!(!lies_on("/database/logs", "/data"));
    }
}
