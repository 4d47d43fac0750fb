//! The output-format version of each target follows its rendering.
//!
//! A run's name hashes the resolved definition and the target's format
//! version, not the rendered objects (`compile::identity`). So when a release
//! renders a run's objects differently, it must bump the target's `FORMAT`,
//! or the changed Jobs, JobSets and TFJobs would keep their names and fail to
//! apply (their pod templates are immutable). This test fingerprints the run
//! objects of a fixed definition per target: every fingerprint ever shipped
//! belongs to exactly one format version, and a new one needs a new version.

mod common;

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
];

/// The same for a PyTorch run, by target: a second history, since the
/// rows above fingerprint the TensorFlow run alone. Append, never edit.
const PYTORCH_HISTORY: &[(&str, u32, &str)] = &[
    // PyTorch arrives (issue 12).
    ("kubernetes", 2, "992704cf348eb30a"),
    ("jobset", 2, "ee2c12549b264785"),
    ("pytorchjob", 1, "f91d2f092f13c3e9"),
];

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

fn fingerprint(target: &str, definition: &str) -> String {
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
    let mut hash = Sha256::new();
    for (path, bytes) in common::read_tree(&dir.path().join("deploy")) {
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let Some(run) = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("trainc.dev/run: "))
            .map(str::to_owned)
        else {
            continue;
        };
        // The run's name hashes the format itself: leave it out.
        hash.update(path.as_bytes());
        hash.update(text.replace(&run, "RUN").as_bytes());
    }
    hash.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn each_rendering_of_a_run_has_its_own_format_version() {
    let mut new = Vec::new();
    let runs = Target::ALL
        .into_iter()
        .filter(|t| *t != Target::Pytorchjob)
        .map(|t| (t, DEFINITION, HISTORY, "HISTORY"))
        .chain(
            Target::ALL
                .into_iter()
                .filter(|t| *t != Target::Tfjob)
                .map(|t| (t, PYTORCH_DEFINITION, PYTORCH_HISTORY, "PYTORCH_HISTORY")),
        );
    for (target, definition, history, history_name) in runs {
        let name = target.as_str();
        let format = trainc::compile::format(target);
        let print = fingerprint(name, definition);
        let rows: Vec<&(&str, u32, &str)> = history.iter().filter(|r| r.0 == name).collect();
        for a in &rows {
            for b in &rows {
                assert!(
                    a == b || (a.1 != b.1 && a.2 != b.2),
                    "{name}: each format version has one fingerprint and each fingerprint one version: {a:?} {b:?}"
                );
            }
        }
        match rows.iter().find(|r| r.2 == print) {
            Some(row) => assert_eq!(
                row.1, format,
                "{name}: this rendering shipped as format {}, but src/compile/{name}.rs says {format}",
                row.1
            ),
            None => {
                let next = rows.iter().map(|r| r.1).max().unwrap_or(0) + 1;
                new.push(format!(
                    "{name}: the objects of a run render differently now. Bump FORMAT in \
                     src/compile/{name}.rs to {next} and append (\"{name}\", {next}, \"{print}\") \
                     to {history_name} in tests/format.rs, so that every run is re-created under a new name."
                ));
            }
        }
    }
    assert!(new.is_empty(), "{}", new.join("\n"));
}
