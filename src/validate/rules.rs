//! Semantic rules: what the schema cannot say. Each rule reads the typed
//! definition and reports findings located through the document's spans.

use std::collections::BTreeMap;

use crate::compile;
use crate::compile::index::INDEX_VAR;
use crate::diagnostic::Diagnostic;
use crate::load::{Document, Findings};
use crate::model::definition::RoleKind;
use crate::model::definition::{
    EnvFrom, EnvSource, EnvValue, Projection, Scalar, Selector, Toleration, TrainingJob, Volume,
    VolumeKind,
};
use crate::model::definition::{Framework, HyperparameterStyle, Target};
use crate::model::job::{env_scopes, hyperparameter_env_name, namespace_of, target_of};
use crate::model::project::Defaults;
use crate::names;
use crate::quantity;
use crate::source::pointer_segment;

/// Names trainc passes itself; a hyperparameter of the same name would give the
/// program the flag twice.
const LEGACY_FLAGS: [&str; 4] = ["ps_hosts", "worker_hosts", "job_name", "task_index"];
/// Label prefixes trainc owns; user labels under them would break selectors.
const RESERVED_LABEL_PREFIXES: [&str; 2] = ["app.kubernetes.io/", "trainc.dev/"];

/// Runs every rule on one schema-valid definition.
pub fn check(doc: &Document, def: &TrainingJob, vcx: &super::Context) -> Vec<Diagnostic> {
    let defaults = vcx.defaults;
    let mut cx = Findings::new(doc);
    super::image::check(&mut cx, def, vcx);
    match def.framework() {
        Framework::Tensorflow => compile::tensorflow::check(&mut cx, def),
        Framework::Pytorch => {
            let target = compile::target::backend(target_of(def, defaults));
            compile::pytorch::check(
                &mut cx,
                def,
                compile::pytorch::Nodes {
                    target: target.target,
                    restarts_whole_runs: target.restarts_whole_runs,
                    scales_nodes: target.scales_nodes,
                },
            );
        }
    }
    target_framework(&mut cx, def, defaults);
    scheduling(&mut cx, def);
    quantities(&mut cx, def);
    storage(&mut cx, def);
    tensorboard(&mut cx, def);
    working_against_the_user(&mut cx, def, target_of(def, defaults));
    output_paths(&mut cx, def);
    volcano(&mut cx, def, target_of(def, defaults));
    super::security::check(&mut cx, def, defaults);
    super::patches::check(&mut cx, def);
    access_modes(&mut cx, def);
    environment(&mut cx, def, target_of(def, defaults));
    env_sources(&mut cx, def);
    labels(&mut cx, def);
    pod_settings(&mut cx, def);
    generated_names(&mut cx, def, defaults);
    (compile::target::backend(target_of(def, defaults)).check)(&mut cx, def);
    cx.out
}

/// An operator's target runs its own framework only.
fn target_framework(cx: &mut Findings, def: &TrainingJob, defaults: &Defaults) {
    let target = target_of(def, defaults);
    let framework = def.framework();
    let backend = compile::target::backend(target);
    let Some(runs) = backend.framework.filter(|f| *f != framework) else {
        return;
    };
    let other = compile::target::BACKENDS
        .iter()
        .find(|b| b.framework == Some(framework))
        .map_or("", |b| b.target.as_str());
    let mut message = format!(
        "the `{}` target runs {} jobs, and this is a {} job",
        target.as_str(),
        runs.display(),
        framework.display()
    );
    if let Some(why) = backend.why_one_framework {
        message.push_str(&format!(": {why}"));
    }
    let hint = format!("use `target: {other}`, `jobset` or `kubernetes`");
    if def.spec.target.is_some() {
        cx.error("/spec/target", message, hint);
    } else {
        let at = if def.spec.framework.is_some() {
            "/spec/framework"
        } else {
            "/spec"
        };
        cx.error_at_key(
            at,
            format!("{message} (the target is the project's `defaults.target`)"),
            format!("set `spec.target` in this definition: {hint}"),
        );
    }
}

fn replicas(def: &TrainingJob, kind: RoleKind) -> u32 {
    kind.of(&def.spec.roles).map_or(0, |r| r.replicas)
}

/// Node selectors and tolerations, held to the rules the API server applies,
/// so a bad one fails here and not at sync time.
fn scheduling(cx: &mut Findings, def: &TrainingJob) {
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

fn toleration(cx: &mut Findings, at: &str, t: &Toleration) {
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
    if compile::patch::risks::tolerates_all(t.key.as_deref(), t.operator.as_deref()) {
        cx.warning(
            at,
            format!(
                "the role's pods tolerate {}",
                compile::patch::risks::every_taint(t.effect.as_deref())
            ),
            compile::patch::risks::TOLERATE_BY_KEY,
        );
    }
    if t.toleration_seconds.is_some() && t.effect.as_deref() != Some("NoExecute") {
        cx.error(
            &format!("{at}/tolerationSeconds"),
            "`tolerationSeconds` only applies to `effect: NoExecute`",
            "set `effect: NoExecute`, or remove `tolerationSeconds`",
        );
    }
}

fn check_quantity(cx: &mut Findings, pointer: &str, q: &Scalar, what: &str) {
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

/// A limit below its request, which the API server refuses: of a role's
/// resources or TensorBoard's, below `base`, as `(cpu, cpuLimit)` and
/// `(memory, memoryLimit)`.
pub(super) fn limits_at_least_requests(
    cx: &mut Findings,
    base: &str,
    pairs: [(&Option<Scalar>, &Option<Scalar>); 2],
) {
    for ((request, limit), field) in pairs.into_iter().zip(["cpuLimit", "memoryLimit"]) {
        let (Some(request), Some(limit)) = (request, limit) else {
            continue;
        };
        if let (Ok(rq), Ok(lm)) = (
            quantity::parse(&request.render()),
            quantity::parse(&limit.render()),
        ) && lm < rq
        {
            cx.error(
                &format!("{base}/{field}"),
                format!(
                    "limit {} is below the request {}",
                    limit.render(),
                    request.render()
                ),
                "a limit must be at least the request",
            );
        }
    }
}

fn example(what: &str) -> &'static str {
    match what {
        "cpu" => "`500m` or `2`",
        _ => "`512Mi` or `8Gi`",
    }
}

fn quantities(cx: &mut Findings, def: &TrainingJob) {
    for kind in RoleKind::ALL {
        let Some(r) = kind.of(&def.spec.roles) else {
            continue;
        };
        let base = format!("/spec/roles/{}/resources", kind.as_str());
        let res = &r.resources;
        for (q, field, what) in [
            (&res.cpu, "cpu", "cpu"),
            (&res.memory, "memory", "memory"),
            (&res.cpu_limit, "cpuLimit", "cpu"),
            (&res.memory_limit, "memoryLimit", "memory"),
        ] {
            if let Some(q) = q {
                check_quantity(cx, &format!("{base}/{field}"), q, what);
            }
        }
        limits_at_least_requests(
            cx,
            &base,
            [(&res.cpu, &res.cpu_limit), (&res.memory, &res.memory_limit)],
        );
    }
    for (i, v) in def.spec.storage.iter().enumerate() {
        if let Some(q) = &v.size {
            check_quantity(cx, &format!("/spec/storage/{i}/size"), q, "size");
        }
        if let Some(q) = v.empty_dir.as_ref().and_then(|e| e.size_limit.as_ref()) {
            check_quantity(
                cx,
                &format!("/spec/storage/{i}/emptyDir/sizeLimit"),
                q,
                "sizeLimit",
            );
        }
    }
    if let Some(q) = &def.spec.shm_size {
        check_quantity(cx, "/spec/shmSize", q, "shmSize");
    }
}

fn storage(cx: &mut Findings, def: &TrainingJob) {
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
        sources(cx, &at, v);
        let kind = v.kind();
        for (field, given) in [
            ("size", v.size.is_some()),
            ("accessMode", v.access_mode.is_some()),
        ] {
            if given && !kind.writes_claim() {
                let hint = match (kind, field) {
                    (VolumeKind::ExistingClaim, "size") => {
                        "remove `size`; the claim's own size applies"
                    }
                    (VolumeKind::ExistingClaim, _) => {
                        "remove `accessMode`; the claim's own access modes apply"
                    }
                    (VolumeKind::EmptyDir, "size") => {
                        "remove `size`; `emptyDir.sizeLimit` bounds what a pod may write there"
                    }
                    _ => "trainc writes no claim for this volume; remove the field",
                };
                cx.error_at_key(
                    &format!("{at}/{field}"),
                    format!("`{field}` has no effect on {}", kind.describe()),
                    hint,
                );
            }
        }
        if kind.writes_claim() && v.size.is_none() {
            cx.error_at_key(
                &at,
                format!("volume `{}` needs a `size`", v.name),
                "add e.g. `size: 10Gi`",
            );
        }
        if kind == VolumeKind::EmptyDir && v.read_only {
            cx.error_at_key(
                &format!("{at}/readOnly"),
                "a read-only emptyDir volume is always empty",
                "remove `readOnly`",
            );
        }
        if let Some(sel) = &v.selector {
            selector(cx, &format!("{at}/selector"), sel);
        }
        for (field, p) in [("configMap", &v.config_map), ("secret", &v.secret)] {
            if let Some(p) = p {
                projection(cx, &format!("{at}/{field}"), p);
            }
        }
        mounting_roles(cx, def, &at, v);
    }
}

/// The source fields a volume gives: exactly one source, except that
/// `selector`, `volumeName` and `storageClass` together describe one claim.
fn sources(cx: &mut Findings, at: &str, v: &Volume) {
    let given: Vec<&str> = [
        ("nfs", v.nfs.is_some()),
        ("csi", v.csi.is_some()),
        ("existingClaim", v.existing_claim.is_some()),
        ("selector", v.selector.is_some()),
        ("volumeName", v.volume_name.is_some()),
        ("emptyDir", v.empty_dir.is_some()),
        ("configMap", v.config_map.is_some()),
        ("secret", v.secret.is_some()),
        ("storageClass", v.storage_class.is_some()),
    ]
    .into_iter()
    .filter(|s| s.1)
    .map(|s| s.0)
    .collect();
    let claim = ["selector", "volumeName", "storageClass"];
    for (i, second) in given.iter().enumerate() {
        let clash = given[..i]
            .iter()
            .find(|first| !(claim.contains(first) && claim.contains(second)));
        if let Some(first) = clash {
            cx.error_at_key(
                &format!("{at}/{second}"),
                format!("a volume has one source, found `{first}` and `{second}`"),
                "keep the one that says where the data lives: `nfs`, `csi`, `existingClaim`, `selector` and/or `volumeName` (with `storageClass` if the volume has one), `emptyDir`, `configMap`, `secret`, or `storageClass` alone for a dynamic claim",
            );
            return;
        }
    }
}

const LABEL_KEY_HINT: &str =
    "use an optional DNS prefix and '/', then up to 63 letters, digits, '-', '_' or '.'";
const LABEL_VALUE_HINT: &str =
    "use up to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit";

/// A label selector, held to the rules the API server applies.
fn selector(cx: &mut Findings, at: &str, sel: &Selector) {
    for (k, v) in &sel.match_labels {
        let here = format!("{at}/matchLabels/{}", pointer_segment(k));
        if !key_ok(k) {
            cx.error_at_key(
                &here,
                format!("`{k}` is not a valid label key"),
                LABEL_KEY_HINT,
            );
        }
        if !(v.is_empty() || label_name_ok(v)) {
            cx.error(
                &here,
                format!("`{v}` is not a valid label value"),
                LABEL_VALUE_HINT,
            );
        }
    }
    for (j, r) in sel.match_expressions.iter().enumerate() {
        let here = format!("{at}/matchExpressions/{j}");
        if !key_ok(&r.key) {
            cx.error(
                &format!("{here}/key"),
                format!("`{}` is not a valid label key", r.key),
                LABEL_KEY_HINT,
            );
        }
        let takes_values = matches!(r.operator.as_str(), "In" | "NotIn");
        if takes_values && r.values.is_empty() {
            cx.error(
                &format!("{here}/operator"),
                format!("operator `{}` needs at least one value", r.operator),
                "list them under `values`, or use `Exists`",
            );
        } else if !takes_values && !r.values.is_empty() {
            cx.error_at_key(
                &format!("{here}/values"),
                format!("operator `{}` takes no values", r.operator),
                "remove `values`, or use `In` or `NotIn`",
            );
        }
        for (n, v) in r.values.iter().enumerate() {
            if !(v.is_empty() || label_name_ok(v)) {
                cx.error(
                    &format!("{here}/values/{n}"),
                    format!("`{v}` is not a valid label value"),
                    LABEL_VALUE_HINT,
                );
            }
        }
    }
}

/// A ConfigMap or Secret volume: file paths that stay below the mount, and
/// modes written unambiguously.
fn projection(cx: &mut Findings, at: &str, p: &Projection) {
    if let Some(m) = &p.default_mode {
        file_mode(cx, &format!("{at}/defaultMode"), m);
    }
    let mut paths: BTreeMap<&str, usize> = BTreeMap::new();
    for (j, item) in p.items.iter().enumerate() {
        let here = format!("{at}/items/{j}");
        let path = item.path.as_str();
        if path.starts_with('/') || path.starts_with("..") || path.split('/').any(|s| s == "..") {
            cx.error(
                &format!("{here}/path"),
                format!("`{path}` leaves the volume"),
                "give a relative path without `..`, such as `config/app.json`",
            );
        }
        if let Some(first) = paths.insert(path, j) {
            cx.error(
                &format!("{here}/path"),
                format!("path `{path}` is already used by items[{first}]"),
                "give every key its own path",
            );
        }
        if let Some(m) = &item.mode {
            file_mode(cx, &format!("{here}/mode"), m);
        }
    }
}

/// How YAML 1.1 writes an octal number (`0440`), if `text` is one. kubectl
/// reads that as octal, YAML 1.2 (and trainc) as a decimal with a leading
/// zero, so it is refused rather than guessed.
pub(crate) fn legacy_octal(text: &str) -> Option<String> {
    let digits = text.strip_prefix('+').unwrap_or(text);
    let rest = digits.strip_prefix('0')?;
    if rest.is_empty() || !rest.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let octal = i64::from_str_radix(rest, 8).ok();
    Some(match octal {
        Some(n) => format!("write `0o{rest}` for octal, or the decimal `{n}`"),
        None => format!("`{text}` is no octal number either; write octal with `0o`, e.g. `0o644`"),
    })
}

fn file_mode(cx: &mut Findings, pointer: &str, n: &serde_json::Number) {
    let text = cx.doc.source_text(pointer).unwrap_or_default().to_owned();
    if let Some(hint) = legacy_octal(&text) {
        cx.error(
            pointer,
            format!(
                "`{text}` is ambiguous: YAML 1.1 (kubectl) reads it as octal, YAML 1.2 as decimal"
            ),
            hint,
        );
    } else if n.as_i64().is_none() {
        cx.error(
            pointer,
            format!("file mode `{text}` is not a whole number"),
            "write octal as `0o644`, or a decimal such as `420`",
        );
    }
}

/// `roles`: each role once, and one that has tasks.
fn mounting_roles(cx: &mut Findings, def: &TrainingJob, at: &str, v: &Volume) {
    let mut seen = Vec::new();
    for (j, kind) in v.roles.iter().enumerate() {
        let here = format!("{at}/roles/{j}");
        let role = kind.as_str();
        if seen.contains(kind) {
            cx.error(
                &here,
                format!("role `{role}` is listed twice"),
                "list each role once",
            );
            continue;
        }
        seen.push(*kind);
        if replicas(def, *kind) == 0 {
            cx.error(
                &here,
                format!("the job has no {role} tasks to mount volume `{}`", v.name),
                format!("remove `{role}` here, or give `spec.roles.{role}` replicas"),
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

/// Settings that validate, and work against a GitOps workflow or the user:
/// warnings.
fn working_against_the_user(cx: &mut Findings, def: &TrainingJob, target: Target) {
    let spec = &def.spec;
    // On `trainjob` its target refuses it, with Trainer's reason.
    if spec.run_policy.ttl_seconds_after_finished.is_some() && target != Target::Trainjob {
        cx.warning(
            "/spec/runPolicy/ttlSecondsAfterFinished",
            "a run object deleted by its TTL is in the output still: Argo CD's self-heal or Flux's next reconciliation creates it again, and the run trains again",
            "remove `ttlSecondsAfterFinished`, and let a new run (or removing the job) prune the old one; see docs/output.md",
        );
    }
    for kind in RoleKind::ALL {
        let Some(role) = kind.of(&spec.roles) else {
            continue;
        };
        let r = &role.resources;
        if r.gpu.unwrap_or(0) > 0 && (r.cpu.is_none() || r.memory.is_none()) {
            let mut why = Vec::new();
            if r.cpu.is_none() {
                why.push("without a CPU request the scheduler may place its pods where too little CPU is left to feed the GPUs");
            }
            if r.memory.is_none() {
                why.push(
                    "without memory, no limit keeps one task from starving the others on its node",
                );
            }
            cx.warning(
                &format!("/spec/roles/{}/resources", kind.as_str()),
                format!(
                    "the {} role asks for GPUs but no {}: {}",
                    kind.as_str(),
                    if why.len() == 2 {
                        "CPU or memory"
                    } else if r.cpu.is_none() {
                        "CPU"
                    } else {
                        "memory"
                    },
                    why.join("; ")
                ),
                "set `cpu` and `memory` beside `gpu`: what one task needs, as requests",
            );
        }
    }
    // Where trainc can tell: a TensorFlow 1 program (`--ps_hosts`, `--job_name`)
    // ends its parameter servers in `server.join()`, which never returns.
    if target == Target::Kubernetes
        && def.framework() == Framework::Tensorflow
        && spec.cluster_spec().legacy_flags
        && replicas(def, RoleKind::Ps) > 0
        && spec.run_policy.active_deadline_seconds.is_none()
    {
        cx.warning_at_key(
            "/spec/roles/ps",
            "on plain Jobs nothing ends these parameter servers: a TensorFlow 1 server blocks in `server.join()` for good, so their Jobs run on, holding their nodes, after training is over",
            "use the `jobset` or `tfjob` target, which stop them when the workers are done, or set `runPolicy.activeDeadlineSeconds` to bound the run",
        );
    }
    if let Some(tb) = spec.tensorboard.as_ref().filter(|t| t.enabled)
        && tb.image.is_none()
        && tb.repository.is_none()
        && spec.build.is_none()
        && let Some(image) = spec.image.as_deref().filter(|i| is_stock(i))
    {
        cx.warning_at_key(
            "/spec/tensorboard",
            format!("trainc builds a TensorBoard image and pushes it beside `image:`, as `{}-tensorboard`: beside a public image of someone else's, where you cannot push", crate::model::job::image_name(image)),
            "set `tensorboard.repository` to a repository you push to, or `tensorboard.image` to a TensorBoard image that exists",
        );
    }
}

/// `runPolicy.volcanoQueue` names the queue of a Volcano PodGroup, which
/// only the Kubeflow Training Operator makes.
fn volcano(cx: &mut Findings, def: &TrainingJob, target: Target) {
    if def.spec.run_policy.volcano_queue.is_some() && !compile::target::backend(target).volcano_gang
    {
        cx.error(
            "/spec/runPolicy/volcanoQueue",
            format!("the `{}` target makes no Volcano PodGroup: nothing would read a Volcano queue", target.as_str()),
            "remove `volcanoQueue`: a Kueue queue (`runPolicy.queue`) admits a JobSet or TrainJob run as a whole; Volcano gangs are the `tfjob` and `pytorchjob` targets' (with the operator's `--gang-scheduler-name=volcano`)",
        );
    }
}

/// Flag names that say a program writes where they point, as far as trainc
/// can tell from a name.
const OUTPUT_FLAGS: [&str; 9] = [
    "out",
    "save",
    "checkpoint",
    "ckpt",
    "model_dir",
    "log_dir",
    "logdir",
    "export",
    "dump",
];

/// A program argument that names, by its flag, a place to write below a
/// path no volume is mounted at, while the root file system is read-only:
/// the program fails when it first writes there. Only where trainc can
/// tell: `--<flag>=/<path>` or `--<flag> /<path>` with an output-like flag
/// name, and no patch that could mount something.
fn output_paths(cx: &mut Findings, def: &TrainingJob) {
    let spec = &def.spec;
    if !spec.security.read_only_root_filesystem.unwrap_or(true) || !spec.patches.is_empty() {
        return;
    }
    let mut scopes = vec![("/spec/args".to_owned(), &spec.args, None)];
    for kind in RoleKind::ALL {
        if let Some(args) = kind.of(&spec.roles).and_then(|r| r.args.as_ref()) {
            scopes.push((
                format!("/spec/roles/{}/args", kind.as_str()),
                args,
                Some(kind),
            ));
        }
    }
    for (at, args, only) in scopes {
        for (i, arg) in args.iter().enumerate() {
            let Some((flag, path)) = output_flag(arg, args.get(i + 1)) else {
                continue;
            };
            // The roles that run with these arguments: the role's own, or
            // every role that does not set its own `args`.
            let roles: Vec<RoleKind> = RoleKind::ALL
                .into_iter()
                .filter(|k| {
                    k.of(&spec.roles).is_some_and(|r| match only {
                        Some(o) => o == *k,
                        None => r.args.is_none(),
                    })
                })
                .collect();
            let unmounted: Vec<&str> = roles
                .iter()
                .filter(|k| !writable(spec, **k, path))
                .map(|k| k.as_str())
                .collect();
            if unmounted.is_empty() {
                continue;
            }
            let target = if arg.contains('=') { i } else { i + 1 };
            cx.warning(
                &format!("{at}/{target}"),
                format!(
                    "`{flag}` points the program at `{path}`, where no volume is mounted in the {} pods, and their root file system is read-only: writing there fails",
                    unmounted.join(", ")
                ),
                "put it below a volume of `spec.storage` (or `/tmp`, emptied with the pod), or set `security.readOnlyRootFilesystem: false`",
            );
        }
    }
}

/// `(flag, path)` of an output-like flag with an absolute path.
fn output_flag<'a>(arg: &'a str, next: Option<&'a String>) -> Option<(&'a str, &'a str)> {
    let (flag, path) = match arg.split_once('=') {
        Some((flag, value)) => (flag, value),
        None => (arg, next.map(String::as_str)?),
    };
    let name = flag.strip_prefix("--").or_else(|| flag.strip_prefix('-'))?;
    let name = name.to_ascii_lowercase().replace('-', "_");
    (path.starts_with('/') && OUTPUT_FLAGS.iter().any(|o| name.contains(o))).then_some((flag, path))
}

/// Whether a pod of `kind` can write at `path`: below a writable volume it
/// mounts, the scratch `/tmp` and home, or `/dev/shm`.
fn writable(spec: &crate::model::definition::Spec, kind: RoleKind, path: &str) -> bool {
    let below = |mount: &str| {
        let mount = mount.trim_end_matches('/');
        path == mount || path.starts_with(&format!("{mount}/"))
    };
    let scratch = ["/tmp", compile::security::HOME, "/dev/shm"];
    scratch.iter().any(|m| below(m))
        || spec.storage.iter().any(|v| {
            // ConfigMap and Secret volumes are read-only whatever they say.
            let writable = !v.read_only && v.config_map.is_none() && v.secret.is_none();
            writable && (v.roles.is_empty() || v.roles.contains(&kind)) && below(&v.mount_path)
        })
}

/// Whether `image` names no registry, so that it comes from the public
/// default one, as `tensorflow/tensorflow:2.21.0` does: a stock image,
/// whose repository's neighbours belong to its publisher. (An image with
/// a registry of its own is taken for the user's.)
fn is_stock(image: &str) -> bool {
    let name = crate::model::job::image_name(image);
    match name.split_once('/') {
        None => true,
        Some((first, _)) => !first.contains(['.', ':']) && first != "localhost",
    }
}

fn tensorboard(cx: &mut Findings, def: &TrainingJob) {
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
        Some((i, v)) if !v.kind().is_claim() => {
            cx.error(
                "/spec/tensorboard/logDir",
                format!(
                    "log directory `{}` is on volume `{}`, {} that TensorBoard cannot mount",
                    tb.log_dir,
                    v.name,
                    v.kind().describe()
                ),
                format!(
                    "TensorBoard runs in a pod of its own; put the logs on a volume backed by a claim (`nfs`, `csi`, `existingClaim`, `selector`, `volumeName` or a dynamic claim) instead of spec.storage[{i}]"
                ),
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

/// The tasks of the roles that mount a volume (every role, unless it says)
/// and TensorBoard, for the volume holding its logs, land on different
/// nodes: a single-node access mode would leave all but the first pod
/// waiting on a Multi-Attach error.
fn access_modes(cx: &mut Findings, def: &TrainingJob) {
    let log = log_volume(def).map(|(i, _)| i);
    for (i, v) in def.spec.storage.iter().enumerate() {
        if !v.kind().writes_claim() {
            continue;
        }
        let mode = v.access_mode.as_deref().unwrap_or("ReadWriteMany");
        if !matches!(mode, "ReadWriteOnce" | "ReadWriteOncePod") {
            continue;
        }
        let tasks: u32 = RoleKind::ALL
            .iter()
            .filter(|k| v.roles.is_empty() || v.roles.contains(k))
            .map(|k| replicas(def, *k))
            .sum();
        let tensorboard = log == Some(i);
        let pods = tasks + u32::from(tensorboard);
        if pods > 1 {
            cx.error(
                &format!("/spec/storage/{i}/accessMode"),
                format!(
                    "volume `{}` is {mode}, but {pods} pods mount it",
                    v.name
                ),
                format!(
                    "the pods that mount a volume run on different nodes{}; use `ReadWriteMany` (NFS, CephFS, a cloud file store), `ReadOnlyMany` for shared input, or `roles` to mount it in one task only",
                    if tensorboard {
                        ", and TensorBoard mounts the one holding its logs"
                    } else {
                        ""
                    }
                ),
            );
        }
    }
}

fn environment(cx: &mut Findings, def: &TrainingJob, target: Target) {
    let spec = &def.spec;
    let scopes = env_scopes(def);
    for (at, env) in &scopes {
        if env.contains_key(INDEX_VAR) {
            cx.error_at_key(
                &format!("{at}/{INDEX_VAR}"),
                format!("`{INDEX_VAR}` is set by trainc"),
                format!("trainc defines it in every task, first: refer to it as `$({INDEX_VAR})` in other variables and in `args`"),
            );
        }
    }
    // Where the operator writes `TF_CONFIG` (`tfjob`), its own rule says so.
    let tensorflow = def.framework() == Framework::Tensorflow;
    if tensorflow
        && spec.cluster_spec().tf_config
        && !compile::target::backend(target).writes_tf_config
    {
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
    if tensorflow && as_flags && spec.cluster_spec().legacy_flags {
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

/// The fields the API server lets a variable read from its pod, besides a
/// subscripted label or annotation.
const ENV_FIELD_PATHS: [&str; 9] = [
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
];
/// Divisors the API server accepts, by resource (compared as written).
const CPU_DIVISORS: [&str; 2] = ["1m", "1"];
const BYTE_DIVISORS: [&str; 13] = [
    "1", "1k", "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei",
];

/// Whether a downward-API field path is one a variable may read.
fn field_path_ok(path: &str) -> bool {
    let subscript = |prefix: &str| {
        path.strip_prefix(prefix)
            .and_then(|rest| rest.strip_prefix("['"))
            .and_then(|rest| rest.strip_suffix("']"))
    };
    if ENV_FIELD_PATHS.contains(&path) {
        true
    } else if let Some(key) = subscript("metadata.labels") {
        key_ok(key)
    } else if let Some(key) = subscript("metadata.annotations") {
        // Annotation keys are checked case-insensitively.
        key_ok(&key.to_ascii_lowercase())
    } else {
        false
    }
}

/// Variables whose value comes from elsewhere, and `envFrom`: what the
/// schema cannot say, as the API server would say it at sync time.
fn env_sources(cx: &mut Findings, def: &TrainingJob) {
    for (at, env) in env_scopes(def) {
        for (name, value) in env {
            let EnvValue::From(source) = value else {
                continue;
            };
            env_source(cx, &format!("{at}/{}", pointer_segment(name)), source);
        }
    }
    let mut lists = vec![("/spec/envFrom".to_owned(), &def.spec.env_from)];
    for kind in RoleKind::ALL {
        if let Some(r) = kind.of(&def.spec.roles) {
            lists.push((
                format!("/spec/roles/{}/envFrom", kind.as_str()),
                &r.env_from,
            ));
        }
    }
    for (at, list) in lists {
        for (i, item) in list.iter().enumerate() {
            env_from(cx, &format!("{at}/{i}"), item);
        }
    }
}

fn env_source(cx: &mut Findings, at: &str, s: &EnvSource) {
    let given: Vec<&str> = [
        ("secretKeyRef", s.secret_key_ref.is_some()),
        ("configMapKeyRef", s.config_map_key_ref.is_some()),
        ("fieldRef", s.field_ref.is_some()),
        ("resourceFieldRef", s.resource_field_ref.is_some()),
    ]
    .iter()
    .filter(|g| g.1)
    .map(|g| g.0)
    .collect();
    if let [first, second, ..] = given[..] {
        cx.error_at_key(
            &format!("{at}/{second}"),
            format!("a variable takes its value from one source, found `{first}` and `{second}`"),
            "keep one; use another variable for the other",
        );
    }
    for (field, r) in [
        ("secretKeyRef", &s.secret_key_ref),
        ("configMapKeyRef", &s.config_map_key_ref),
    ] {
        if let Some(r) = r
            && (r.key == "." || r.key.starts_with(".."))
        {
            cx.error(
                &format!("{at}/{field}/key"),
                format!("`{}` is not a valid key", r.key),
                "a key may not be `.` or start with `..`",
            );
        }
    }
    if let Some(f) = &s.field_ref
        && !field_path_ok(&f.field_path)
    {
        cx.error(
            &format!("{at}/fieldRef/fieldPath"),
            format!("`{}` is not a field a variable can read", f.field_path),
            format!(
                "use one of {}, `metadata.labels['<key>']` or `metadata.annotations['<key>']`",
                ENV_FIELD_PATHS
                    .iter()
                    .map(|p| format!("`{p}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
    }
    if let Some(r) = &s.resource_field_ref
        && let Some(d) = &r.divisor
    {
        let d = d.render();
        let (allowed, what): (&[&str], &str) = if r.resource.ends_with(".cpu") {
            (&CPU_DIVISORS, "CPU")
        } else {
            (&BYTE_DIVISORS, "memory and ephemeral storage")
        };
        if !allowed.contains(&d.as_str()) {
            cx.error(
                &format!("{at}/resourceFieldRef/divisor"),
                format!("`{d}` is not a divisor for `{}`", r.resource),
                format!(
                    "for {what}, use one of {}",
                    allowed
                        .iter()
                        .map(|p| format!("`{p}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            );
        }
    }
}

fn env_from(cx: &mut Findings, at: &str, e: &EnvFrom) {
    match (&e.secret_ref, &e.config_map_ref) {
        (Some(_), Some(_)) => cx.error_at_key(
            &format!("{at}/configMapRef"),
            "an `envFrom` item takes one of `secretRef` and `configMapRef`, found both",
            "list the ConfigMap as an item of its own",
        ),
        (None, None) => cx.error_at_key(
            at,
            "an `envFrom` item needs `secretRef` or `configMapRef`",
            "add `secretRef: {name: ...}` or `configMapRef: {name: ...}`",
        ),
        _ => {}
    }
}

/// Per-role pod settings and TensorBoard's own: labels and annotations as
/// the API server checks them, clear of trainc's keys; one placement rule
/// per role; TensorBoard flags that trainc does not set itself.
fn pod_settings(cx: &mut Findings, def: &TrainingJob) {
    for kind in RoleKind::ALL {
        let Some(role) = kind.of(&def.spec.roles) else {
            continue;
        };
        let base = format!("/spec/roles/{}", kind.as_str());
        check_map(cx, &format!("{base}/labels"), &role.labels, "label");
        check_map(
            cx,
            &format!("{base}/annotations"),
            &role.annotations,
            "annotation",
        );
        if role.spread.is_some() && role.pack.is_some() {
            cx.error_at_key(
                &format!("{base}/pack"),
                "a role's tasks are either spread or packed, not both",
                "keep `spread` to place them apart, or `pack` to place them together",
            );
        }
        for (at, name) in [
            (
                format!("{base}/spread/across"),
                role.spread.as_ref().map(|s| &s.across),
            ),
            (
                format!("{base}/pack/within"),
                role.pack.as_ref().map(|p| &p.within),
            ),
        ] {
            if let Some(name) = name
                && !matches!(name.as_str(), "node" | "zone")
                && !key_ok(name)
            {
                cx.error(
                    &at,
                    format!("`{name}` is neither `node`, `zone` nor a node label key"),
                    "use `node`, `zone`, or a label key such as `topology.kubernetes.io/region`",
                );
            }
        }
    }
    let Some(tb) = def.spec.tensorboard.as_ref().filter(|t| t.enabled) else {
        return;
    };
    check_map(
        cx,
        "/spec/tensorboard/serviceAnnotations",
        &tb.service_annotations,
        "annotation",
    );
    for (i, arg) in tb.args.iter().enumerate() {
        if let Some(own) = compile::tensorboard::clashing_flag(arg) {
            let written = arg.split_once('=').map_or(arg.as_str(), |(f, _)| f);
            cx.error(
                &format!("/spec/tensorboard/args/{i}"),
                if written == format!("--{own}") {
                    format!("`{written}` is set by trainc")
                } else {
                    format!("`{written}` clashes with `--{own}`, which trainc sets")
                },
                match own {
                    "logdir" => "set the log directory with `tensorboard.logDir`",
                    "port" => "set the port with `tensorboard.port`",
                    _ => "TensorBoard listens on every address, for its Service and probes",
                },
            );
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

fn labels(cx: &mut Findings, def: &TrainingJob) {
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
    let mut cx = Findings::new(doc);
    check_map(&mut cx, &format!("{base}/labels"), labels, "label");
    check_map(
        &mut cx,
        &format!("{base}/annotations"),
        annotations,
        "annotation",
    );
    cx.out
}

/// The labels or annotations (`what`) of the map at `at`.
fn check_map(cx: &mut Findings, at: &str, map: &BTreeMap<String, String>, what: &str) {
    for (k, v) in map {
        let at = format!("{at}/{}", pointer_segment(k));
        if !key_ok(k) {
            cx.error_at_key(
                &at,
                format!("`{k}` is not a valid {what} key"),
                "use an optional DNS prefix and '/', then up to 63 letters, digits, '-', '_' or '.'",
            );
        } else if RESERVED_LABEL_PREFIXES.iter().any(|p| k.starts_with(p)) {
            cx.error_at_key(
                &at,
                format!("`{k}` is set by trainc"),
                "trainc sets the `app.kubernetes.io/*` and `trainc.dev/*` keys itself; use another prefix",
            );
        }
        if what == "label" && !(v.is_empty() || label_name_ok(v)) {
            cx.error(
                &at,
                format!("`{v}` is not a valid label value"),
                "use up to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit",
            );
        }
    }
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
    let framework = def.framework();
    let by_target =
        (compile::target::backend(target_of(def, defaults)).generated)(framework, &run, &roles);
    for compile::Named { kind, name, limit } in by_target {
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
    if framework == Framework::Tensorflow {
        add(
            "ConfigMap",
            true,
            names::cluster_spec(&run),
            names::SUBDOMAIN_MAX,
        );
    }
    for v in &def.spec.storage {
        if v.kind().writes_claim() {
            add(
                "PersistentVolumeClaim",
                true,
                names::claim(job, &v.name),
                names::SUBDOMAIN_MAX,
            );
        }
        if matches!(v.kind(), VolumeKind::Nfs | VolumeKind::Csi) {
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
fn generated_names(cx: &mut Findings, def: &TrainingJob, defaults: &Defaults) {
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
    fn yaml_1_1_octals_are_recognised() {
        assert_eq!(
            legacy_octal("0440").as_deref(),
            Some("write `0o440` for octal, or the decimal `288`")
        );
        assert!(legacy_octal("0o440").is_none());
        assert!(legacy_octal("288").is_none());
        assert!(legacy_octal("0").is_none());
        assert!(legacy_octal("0x1ff").is_none());
        assert!(legacy_octal("089").is_some_and(|h| h.contains("no octal")));
    }

    #[test]
    fn env_field_paths() {
        assert!(field_path_ok("metadata.name"));
        assert!(field_path_ok("status.podIPs"));
        assert!(field_path_ok("metadata.labels['trainc.dev/run']"));
        assert!(field_path_ok("metadata.annotations['Example.com/Owner']"));
        assert!(!field_path_ok("metadata.labels['Example.com/x']"));
        assert!(!field_path_ok("metadata.labels"));
        assert!(!field_path_ok("metadata.labels['a'"));
        assert!(!field_path_ok("status.phase"));
    }

    #[test]
    fn tensorboard_flags_trainc_sets() {
        use compile::tensorboard::clashing_flag;
        assert_eq!(clashing_flag("--port=1"), Some("port"));
        assert_eq!(clashing_flag("-port"), Some("port"));
        assert_eq!(clashing_flag("--host"), Some("bind_all"));
        assert_eq!(clashing_flag("--nobind_all"), Some("bind_all"));
        assert_eq!(clashing_flag("--logdir_spec=a:/b"), Some("logdir"));
        assert_eq!(clashing_flag("--reload_interval=5"), None);
        assert_eq!(clashing_flag("--portal"), None);
        assert_eq!(clashing_flag("port"), None);
    }

    #[test]
    fn log_dir_on_volume() {
        assert!(lies_on("/data/logs", "/data"));
        assert!(lies_on("/data", "/data/"));
        assert!(!lies_on("/database/logs", "/data"));
    }
}
