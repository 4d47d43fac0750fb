//! The output-format version of each target follows its rendering.
//!
//! A run's name hashes the resolved definition and the target's format
//! version, not the rendered objects (`compile::identity`). So when a release
//! renders a run's objects differently, it must bump the target's `FORMAT`,
//! or the changed Jobs, JobSets and TFJobs would keep their names and fail to
//! apply (their pod templates are immutable). This test fingerprints the run
//! objects of a fixed definition per target twice: their bytes and the
//! objects they parse to. Every byte fingerprint ever shipped belongs to
//! exactly one format version, and each version has one object fingerprint:
//! new objects need a new version. New bytes of the same objects (a change
//! of YAML style, issue 13) do not: the API server gets the same objects, so
//! bumping would only rename every run and restart its training for nothing.
//! Such bytes get a row of their own under the version they render.

mod common;

use serde_json::Value;
use sha2::{Digest, Sha256};
use trainc::model::definition::Target;

/// `(target, format, fingerprint)`: append a row, never edit one.
const HISTORY: &[(&str, u32, &str)] = &[
    ("kubernetes", 1, "b9f79fd000fc0fee"),
    ("jobset", 1, "6d4315ba94c2a8f6"),
    ("tfjob", 1, "1e1c6154b04a1df6"),
    // Pod security contexts, scratch HOME and /tmp, no token (issue 10).
    ("kubernetes", 2, "b1e8658e916addcd"),
    ("jobset", 2, "178ad6eafaec65c2"),
    ("tfjob", 2, "26f6c5d1df125ac7"),
    // Long single-line strings on one line, not folded `>-` (issue 13):
    // same objects as the rows above, see OBJECTS.
    ("kubernetes", 2, "4cdc54495a877219"),
    ("jobset", 2, "2538c8be7ea09d86"),
    ("tfjob", 2, "f60ee637366a5c39"),
    // What the real controllers found (issue 35): JobSet restarts with
    // BlockingRecreate; the Kubeflow operators get no Volcano queue.
    ("jobset", 3, "23fbd8a3836984db"),
    ("tfjob", 3, "979b83c06cab25d9"),
    // Issue 37: a PyTorch node's rank read from the completion-index
    // annotation; the TensorFlow run renders as before, under a new name.
    ("kubernetes", 3, "7787c1ad0ac2e6b1"),
    ("jobset", 4, "31ff098ea7e21f6a"),
    // Issue 37: `TRAINC_TASK_INDEX` in every task, so that a definition's
    // `$(TRAINC_TASK_INDEX)` expands on `kubernetes` too.
    ("kubernetes", 4, "ab4c626d1294e2ad"),
];

/// `(target, format, objects)`: what the run objects of format version
/// `format` parse to (see [`fingerprints`]), one row per version, appended
/// with it, never edited. Recorded from format 2 on (issue 13); the
/// versions before it render only in HISTORY.
const OBJECTS: &[(&str, u32, &str)] = &[
    ("kubernetes", 2, "561915267ef61904"),
    ("jobset", 2, "ee69ec95cb3616df"),
    ("tfjob", 2, "a2ead45c0c45fdeb"),
    ("jobset", 3, "2a7eff6b9b2213fe"),
    ("tfjob", 3, "934dd290511cf1ac"),
    ("kubernetes", 3, "7a287e3fed8cb834"),
    ("jobset", 4, "431ff5a5f330b4ba"),
    ("kubernetes", 4, "808a21ce172d1e42"),
];

/// The same for the PyTorch run. Append, never edit.
const PYTORCH_OBJECTS: &[(&str, u32, &str)] = &[
    ("kubernetes", 2, "2aff50da74efec9d"),
    ("jobset", 2, "31a4105797b4d521"),
    ("pytorchjob", 1, "742aeb55480de394"),
    ("jobset", 3, "c19fc63e47821334"),
    ("pytorchjob", 2, "a4bab33ed67c879f"),
    ("kubernetes", 3, "861b76d033870f83"),
    ("jobset", 4, "330e5f96c805fba2"),
    ("kubernetes", 4, "9bdfaa86db48f577"),
];

/// The same for a PyTorch run, by target: a second history, since the
/// rows above fingerprint the TensorFlow run alone. Append, never edit.
const PYTORCH_HISTORY: &[(&str, u32, &str)] = &[
    // PyTorch arrives (issue 12).
    ("kubernetes", 2, "992704cf348eb30a"),
    ("jobset", 2, "ee2c12549b264785"),
    ("pytorchjob", 1, "f91d2f092f13c3e9"),
    // Issue 35: BlockingRecreate; a PyTorchJob of workers only, which the
    // operator adds no init container to.
    ("jobset", 3, "66db275310c31ebc"),
    ("pytorchjob", 2, "c3a743eca2c93e24"),
    // Issue 37: the rank read from the completion-index annotation.
    ("kubernetes", 3, "b89f8ef0036b185b"),
    ("jobset", 4, "29ff313ad04fb567"),
    // Issue 37: the TensorFlow tasks' `TRAINC_TASK_INDEX`; the PyTorch run
    // renders as before, under a new name.
    ("kubernetes", 4, "25346ca7b3fc418d"),
];

/// The same for the `trainjob` target, whose run the PyTorch definition
/// cannot make (it sets a port and a TTL, which Trainer v2 cannot honour).
/// Append, never edit.
const TRAINJOB_HISTORY: &[(&str, u32, &str)] = &[
    // Kubeflow Trainer v2 arrives (issue 37).
    ("trainjob", 1, "2de97118f646aae5"),
];

/// The same for the `trainjob` target. Append, never edit.
const TRAINJOB_OBJECTS: &[(&str, u32, &str)] = &[("trainjob", 1, "f710ecaf232aee7d")];

/// Never edit: every field trainc can put into a run's objects.
const DEFINITION: &str = r#"apiVersion: trainc.dev/v1alpha1
kind: TrainingJob
metadata:
  name: fixed
  namespace: format
  labels: {team: t}
  annotations: {note: n}
spec:
  image: registry.example.com/fixed:1
  imagePullPolicy: IfNotPresent
  command: [python, /app/train.py]
  args: [--a=1]
  env: {A: "1"}
  hyperparameters: {lr: 0.1}
  hyperparametersAs: [flags, env]
  clusterSpec: {legacyFlags: true}
  shmSize: 1Gi
  serviceAccountName: trainer
  roles:
    chief: {replicas: 1, resources: {cpu: "1", memory: 1Gi}}
    ps: {replicas: 1, resources: {cpu: "1", memory: 1Gi}, port: 2223}
    worker:
      replicas: 2
      resources: {cpu: "2", memory: 2Gi, gpu: 1}
      nodeSelector: {pool: gpu}
      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
    evaluator: {replicas: 1}
  storage:
    - {name: data, mountPath: /data, size: 1Gi, nfs: {server: nas, path: /d}}
    - {name: ckpt, mountPath: /ckpt, existingClaim: ckpt}
  runPolicy:
    backoffLimit: 2
    activeDeadlineSeconds: 3600
    restartPolicy: Never
    ttlSecondsAfterFinished: 60
    schedulerName: s
    priorityClassName: p
    queue: q
"#;

/// Never edit: every field trainc can put into a PyTorch run's objects.
const PYTORCH_DEFINITION: &str = r#"apiVersion: trainc.dev/v1alpha1
kind: TrainingJob
metadata:
  name: fixed
  namespace: format
  labels: {team: t}
  annotations: {note: n}
spec:
  framework: pytorch
  image: registry.example.com/fixed:1
  imagePullPolicy: IfNotPresent
  command: [python, /app/train.py]
  args: [--a=1]
  env: {A: "1"}
  hyperparameters: {lr: 0.1}
  hyperparametersAs: [flags, env]
  torchrun: {nprocPerNode: 2}
  shmSize: 1Gi
  serviceAccountName: trainer
  roles:
    worker:
      replicas: 3
      port: 29400
      resources: {cpu: "2", memory: 2Gi, gpu: 2}
      nodeSelector: {pool: gpu}
      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
  storage:
    - {name: data, mountPath: /data, size: 1Gi, nfs: {server: nas, path: /d}}
    - {name: ckpt, mountPath: /ckpt, existingClaim: ckpt}
  runPolicy:
    activeDeadlineSeconds: 3600
    restartPolicy: Never
    ttlSecondsAfterFinished: 60
    schedulerName: s
    priorityClassName: p
    queue: q
"#;

/// Every field trainc can put into a `trainjob` run's objects: the PyTorch
/// definition less what Trainer v2 cannot honour (a port of its own, a
/// TTL). Never edit.
fn trainjob_definition() -> String {
    PYTORCH_DEFINITION
        .replace("      port: 29400\n", "")
        .replace("    ttlSecondsAfterFinished: 60\n", "")
}

/// The run objects' files of `definition` built for `target`, each with
/// the run's name replaced (the name hashes the format itself).
fn run_files(target: &str, definition: &str) -> Vec<(String, String)> {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("jobs")).expect("mkdir");
    std::fs::write(dir.path().join("jobs/fixed.yaml"), definition).expect("write");
    std::fs::write(
        dir.path().join("trainc.yaml"),
        format!("apiVersion: trainc.dev/v1alpha1\nkind: Project\ndefaults: {{target: {target}}}\n"),
    )
    .expect("write");
    let o = common::run(dir.path(), &["build"]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let mut files = Vec::new();
    for (path, bytes) in common::read_tree(&dir.path().join("deploy")) {
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let Some(run) = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("trainc.dev/run: "))
            .map(str::to_owned)
        else {
            continue;
        };
        files.push((path, text.replace(&run, "RUN")));
    }
    files
}

/// `value` with the keys of every mapping sorted: the object, not the
/// order it was written in.
fn sorted(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
        v => v,
    }
}

fn short(hash: Sha256) -> String {
    hash.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `(bytes, objects)`: the fingerprint of the run files' bytes, and of the
/// objects they parse to (as JSON, keys sorted).
fn fingerprints(target: &str, definition: &str) -> (String, String) {
    let mut bytes = Sha256::new();
    let mut objects = Sha256::new();
    for (path, text) in run_files(target, definition) {
        bytes.update(path.as_bytes());
        bytes.update(text.as_bytes());
        let value: Value =
            serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}\n{text}"));
        objects.update(path.as_bytes());
        objects.update([0]);
        objects.update(
            serde_json::to_string(&sorted(value))
                .expect("json")
                .as_bytes(),
        );
        objects.update([0]);
    }
    (short(bytes), short(objects))
}

#[test]
fn each_rendering_of_a_run_has_its_own_format_version() {
    let mut new = Vec::new();
    let trainjob = trainjob_definition();
    let runs = Target::ALL
        .into_iter()
        .filter(|t| !matches!(t, Target::Pytorchjob | Target::Trainjob))
        .map(|t| (t, DEFINITION, (HISTORY, "HISTORY"), (OBJECTS, "OBJECTS")))
        .chain(
            Target::ALL
                .into_iter()
                .filter(|t| !matches!(t, Target::Tfjob | Target::Trainjob))
                .map(|t| {
                    (
                        t,
                        PYTORCH_DEFINITION,
                        (PYTORCH_HISTORY, "PYTORCH_HISTORY"),
                        (PYTORCH_OBJECTS, "PYTORCH_OBJECTS"),
                    )
                }),
        )
        .chain([(
            Target::Trainjob,
            trainjob.as_str(),
            (TRAINJOB_HISTORY, "TRAINJOB_HISTORY"),
            (TRAINJOB_OBJECTS, "TRAINJOB_OBJECTS"),
        )]);
    for (target, definition, (history, history_name), (objects_history, objects_name)) in runs {
        let name = target.as_str();
        let format = trainc::compile::format(target);
        let (print, objects) = fingerprints(name, definition);
        let rows: Vec<_> = history.iter().filter(|r| r.0 == name).collect();
        for a in &rows {
            for b in &rows {
                assert!(
                    a == b || a.2 != b.2,
                    "{name}: each fingerprint belongs to one format version: {a:?} {b:?}"
                );
            }
        }
        let object_rows: Vec<_> = objects_history.iter().filter(|r| r.0 == name).collect();
        for a in &object_rows {
            for b in &object_rows {
                assert!(
                    a == b || a.1 != b.1,
                    "{name}: each format version has one object fingerprint: {a:?} {b:?}"
                );
            }
        }
        let next = rows.iter().map(|r| r.1).max().unwrap_or(0) + 1;
        let bytes_row = rows.iter().find(|r| r.2 == print);
        let objects_row = object_rows.iter().find(|r| r.1 == format);
        match (bytes_row, objects_row) {
            (Some(row), _) if row.1 != format => new.push(format!(
                "{name}: this rendering shipped as format {}, but src/compile/{name}.rs says {format}",
                row.1
            )),
            (_, Some(row)) if row.2 != objects => new.push(format!(
                "{name}: the objects of a run are not those of format {format} any more. Bump \
                 FORMAT in src/compile/{name}.rs to {next}, append (\"{name}\", {next}, \"{print}\") \
                 to {history_name} and (\"{name}\", {next}, \"{objects}\") to {objects_name} in \
                 tests/format.rs, so that every run is re-created under a new name."
            )),
            (bytes_row, None) => new.push(format!(
                "{name}: format {format} has no object fingerprint: append (\"{name}\", {format}, \
                 \"{objects}\") to {objects_name}{} in tests/format.rs.",
                if bytes_row.is_none() {
                    format!(" and (\"{name}\", {format}, \"{print}\") to {history_name}")
                } else {
                    String::new()
                }
            )),
            (None, Some(_)) => new.push(format!(
                "{name}: the bytes of a run changed but not its objects: no new format version, \
                 append (\"{name}\", {format}, \"{print}\") to {history_name} in tests/format.rs."
            )),
            (Some(_), Some(_)) => {}
        }
    }
    assert!(new.is_empty(), "{}", new.join("\n"));
}
