//! `trainc import`: manifests of existing runs become definitions, and the
//! definitions, built, give back what the manifests said, field by field,
//! but for the differences docs/import.md documents.

mod common;

use std::fs;
use std::path::Path;

use common::{root, run, stderr, stdout};
use serde_json::json;
use serde_json::{Map, Value};

fn fixture(name: &str) -> std::path::PathBuf {
    root().join("tests/fixtures/import").join(name)
}

fn yaml(path: &Path) -> Vec<Value> {
    let text = fs::read_to_string(path).expect("read");
    serde_saphyr::from_multiple::<Value>(&text).expect("YAML")
}

/// Lists of named things (containers, variables, volumes, mounts, pull
/// secrets, tolerations) as maps by name, so that the comparison is of
/// what each holds, not of where trainc puts it in the list.
fn by_name(v: &Value) -> Value {
    match v {
        Value::Array(items)
            if !items.is_empty()
                && items
                    .iter()
                    .all(|i| i.get("name").is_some() || i.get("key").is_some()) =>
        {
            let mut m = Map::new();
            for i in items {
                let key = i
                    .get("name")
                    .or_else(|| i.get("key"))
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                m.insert(key.to_owned(), by_name(i));
            }
            Value::Object(m)
        }
        Value::Array(items) => Value::Array(items.iter().map(by_name).collect()),
        Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), by_name(v))).collect()),
        other => other.clone(),
    }
}

/// The fields where `built` differs from `original`, each `path: what`.
fn differences(original: &Value, built: &Value) -> Vec<String> {
    let mut fields = Vec::new();
    trainc::diff::changed_fields("", &by_name(original), &by_name(built), &mut fields);
    fields
        .iter()
        .map(|f| match (&f.old, &f.new) {
            (None, Some(_)) => format!("{}: added", f.path),
            (Some(_), None) => format!("{}: removed", f.path),
            _ => format!("{}: changed", f.path),
        })
        .collect()
}

/// Imports `file` into a new project, builds it, and returns the project.
fn import_and_build(file: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let o = run(
        dir.path(),
        &["import", fixture(file).to_str().expect("UTF-8")],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = run(dir.path(), &["build"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    dir
}

/// The one file of `kind` below `dir`.
fn built_object(dir: &Path, prefix: &str) -> Value {
    let mut found = Vec::new();
    for e in walkdir::WalkDir::new(dir.join("deploy")) {
        let e = e.expect("walk");
        if e.file_name().to_string_lossy().starts_with(prefix) {
            found.push(e.into_path());
        }
    }
    assert_eq!(found.len(), 1, "{found:?}");
    yaml(&found[0]).remove(0)
}

/// What trainc writes differently from the hand-written pod template, each
/// for a reason docs/import.md gives: its own labels; a claim mounted
/// read-only is read-only; `/dev/shm` under its own name; a writable home
/// and `/tmp` under the read-only root; `torchrun` with the run's
/// rendezvous; the task index and the home's variables; the GPU asked for by
/// its limit alone; the port; the `restricted` security settings; the
/// service account's token, which a named service account gets.
const PYTORCH_POD: &[&str] = &[
    "metadata.labels.app.kubernetes.io/component: added",
    "metadata.labels.app.kubernetes.io/managed-by: added",
    "metadata.labels.app.kubernetes.io/name: added",
    "metadata.labels.trainc.dev/job: added",
    "metadata.labels.trainc.dev/role: added",
    "metadata.labels.trainc.dev/run: added",
    "spec.volumes.datasets.persistentVolumeClaim.readOnly: added",
    "spec.volumes.dshm: removed",
    "spec.volumes.trainc-home: added",
    "spec.volumes.trainc-tmp: added",
    "spec.volumes.trainc-shm: added",
    "spec.containers.pytorch.command[1]: changed",
    "spec.containers.pytorch.command[2]: changed",
    "spec.containers.pytorch.command[3]: added",
    "spec.containers.pytorch.command[4]: added",
    "spec.containers.pytorch.command[5]: added",
    "spec.containers.pytorch.command[6]: added",
    "spec.containers.pytorch.env.TRAINC_TASK_INDEX: added",
    "spec.containers.pytorch.env.HOME: added",
    "spec.containers.pytorch.env.XDG_CACHE_HOME: added",
    "spec.containers.pytorch.env.XDG_CONFIG_HOME: added",
    "spec.containers.pytorch.resources.requests.nvidia.com/gpu: removed",
    "spec.containers.pytorch.volumeMounts.dshm: removed",
    "spec.containers.pytorch.volumeMounts.trainc-home: added",
    "spec.containers.pytorch.volumeMounts.trainc-tmp: added",
    "spec.containers.pytorch.volumeMounts.trainc-shm: added",
    "spec.containers.pytorch.ports: added",
    "spec.containers.pytorch.securityContext: added",
    "spec.automountServiceAccountToken: added",
    "spec.securityContext: added",
];

/// And around the pods: the run's name and labels, trainc's annotations;
/// no restart of one node (`backoffLimit` left out, the import says so);
/// the pods kept until the next run replaces the object; the gang of all
/// nodes; `torchrun`'s processes per node, which the operator reads.
const PYTORCH_JOB: &[&str] = &[
    "metadata.name: changed",
    "metadata.labels.app.kubernetes.io/managed-by: added",
    "metadata.labels.app.kubernetes.io/name: added",
    "metadata.labels.trainc.dev/job: added",
    "metadata.labels.trainc.dev/run: added",
    "metadata.annotations: added",
    "spec.runPolicy.backoffLimit: changed",
    "spec.runPolicy.cleanPodPolicy: changed",
    "spec.runPolicy.schedulingPolicy: added",
    "spec.nprocPerNode: added",
];

#[test]
fn the_hand_written_pytorchjob_comes_back_but_for_the_documented_differences() {
    let dir = import_and_build("llm-finetune.yaml");
    let original = yaml(&fixture("llm-finetune.yaml")).remove(0);
    let built = built_object(dir.path(), "pytorchjob-");
    // The master and the workers, one pod template, are node 0 and the
    // other nodes of one role.
    let workers = &built["spec"]["pytorchReplicaSpecs"];
    assert_eq!(workers["Worker"]["replicas"], 4);
    assert!(workers.get("Master").is_none());
    let found = differences(
        &original["spec"]["pytorchReplicaSpecs"]["Master"]["template"],
        &workers["Worker"]["template"],
    );
    assert_eq!(found, PYTORCH_POD, "{}", found.join("\n"));
    let without_pods = |v: &Value| {
        let mut v = v.clone();
        v["spec"]["pytorchReplicaSpecs"] = Value::Null;
        v
    };
    let found = differences(&without_pods(&original), &without_pods(&built));
    assert_eq!(found, PYTORCH_JOB, "{}", found.join("\n"));
    // The Kueue queue and the labels stay where Kueue and people look.
    assert_eq!(
        built["metadata"]["labels"]["kueue.x-k8s.io/queue-name"],
        "nlp-gpu"
    );
    assert_eq!(built["metadata"]["labels"]["team"], "nlp");
}

/// An elastic PyTorchJob stays elastic: its node counts, its restarts
/// (`torchrun`'s and each node's, in place) and its c10d rendezvous come
/// back in the PyTorchJob trainc writes, the rendezvous now named after
/// the run.
#[test]
fn an_elastic_pytorchjob_comes_back_elastic() {
    let dir = import_and_build("elastic.yaml");
    let definition = fs::read_to_string(dir.path().join("jobs/resnet-elastic.yaml")).expect("read");
    assert!(
        definition.contains("  torchrun:\n    elastic:\n      minNodes: 2\n      maxRestarts: 4\n    nprocPerNode: 1\n"),
        "{definition}"
    );
    let original = yaml(&fixture("elastic.yaml")).remove(0);
    let built = built_object(dir.path(), "pytorchjob-");
    let name = built["metadata"]["name"].as_str().expect("name");
    let mut policy = original["spec"]["elasticPolicy"].clone();
    policy["rdzvId"] = name.into();
    policy["rdzvPort"] = 29500.into();
    assert_eq!(built["spec"]["elasticPolicy"], policy);
    let worker = &built["spec"]["pytorchReplicaSpecs"]["Worker"];
    assert_eq!(worker["restartPolicy"], "OnFailure");
    assert_eq!(built["spec"]["runPolicy"]["backoffLimit"], 5);
    let command = &worker["template"]["spec"]["containers"][0]["command"];
    assert_eq!(
        command,
        &json!([
            "torchrun",
            "--nnodes=2:3",
            "--nproc-per-node=1",
            "--rdzv-backend=c10d",
            format!("--rdzv-endpoint={name}-worker-0:29500"),
            format!("--rdzv-id={name}"),
            "--max-restarts=4",
            "/app/train.py"
        ])
    );
}

/// A TFJob of the MNIST layout: every role's pod the same but for the same
/// kinds of difference, and the GPU toleration of the workers.
#[test]
fn a_tfjob_comes_back_but_for_the_documented_differences() {
    let dir = import_and_build("tfjob.yaml");
    let original = yaml(&fixture("tfjob.yaml")).remove(0);
    let built = built_object(dir.path(), "tfjob-");
    for role in ["Chief", "PS", "Worker"] {
        let mut expected = vec![
            "restartPolicy: changed",
            "template.spec.containers.tensorflow.env: added",
            "template.spec.containers.tensorflow.ports: added",
            "template.spec.containers.tensorflow.securityContext: added",
            "template.spec.containers.tensorflow.volumeMounts: added",
            "template.spec.automountServiceAccountToken: added",
            "template.spec.securityContext: added",
            "template.spec.volumes: added",
            "template.metadata: added",
        ];
        if role == "Worker" {
            expected.insert(7, "template.spec.tolerations: added");
        }
        let found = differences(
            &original["spec"]["tfReplicaSpecs"][role],
            &built["spec"]["tfReplicaSpecs"][role],
        );
        assert_eq!(found, expected, "{role}: {}", found.join("\n"));
        // The operator writes `TF_CONFIG`; trainc adds the task index.
        let env =
            &built["spec"]["tfReplicaSpecs"][role]["template"]["spec"]["containers"][0]["env"];
        assert_eq!(env[0]["name"], "TRAINC_TASK_INDEX", "{env}");
    }
    assert_eq!(built["spec"]["runPolicy"]["backoffLimit"], 2);
    assert_eq!(built["spec"]["runPolicy"]["activeDeadlineSeconds"], 86400);
}

/// The other layouts import, build, and keep what matters of them.
#[test]
fn jobsets_hand_made_clusters_and_chart_values_import_and_build() {
    let dir = import_and_build("jobset.yaml");
    let built = built_object(dir.path(), "jobset-");
    let job = &built["spec"]["replicatedJobs"][0]["template"]["spec"];
    assert_eq!(job["parallelism"], 2);
    assert_eq!(built["spec"]["failurePolicy"]["maxRestarts"], 2);

    let dir = import_and_build("seed-000.yaml");
    let def = yaml(&dir.path().join("jobs/tf.yaml")).remove(0);
    assert_eq!(def["spec"]["roles"]["ps"]["replicas"], 2);
    assert_eq!(def["spec"]["roles"]["worker"]["replicas"], 3);
    assert_eq!(def["spec"]["clusterSpec"], json!({"legacyFlags": true}));
    // The cluster flags are trainc's now, the program's own stay.
    assert_eq!(def["spec"]["args"], json!(["--train_steps=1000"]));
    let worker = built_object(dir.path(), "job-tf-worker-2");
    let args = worker["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
    assert!(
        args.contains("--task_index=2") && args.contains("--job_name=worker"),
        "{args}"
    );

    let dir = import_and_build("values.yaml");
    let def = yaml(&dir.path().join("jobs/tfjob.yaml")).remove(0);
    assert_eq!(
        def["spec"]["roles"]["worker"]["resources"],
        json!({"cpu": "4", "memory": "8Gi", "gpu": 1})
    );
    let report = fs::read_to_string(dir.path().join("jobs/tfjob.yaml")).expect("read");
    assert!(
        report.contains("# - left out  useHostIPC: the `restricted` Pod Security profile forbids"),
        "{report}"
    );
}

/// The report says what became of every field, in text and JSON; nothing
/// is written over an existing definition, nor when a definition would not
/// validate; what trainc cannot read is refused.
#[test]
fn the_report_and_the_refusals() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = fixture("llm-finetune.yaml");
    let o = run(
        dir.path(),
        &["import", file.to_str().expect("UTF-8"), "--format", "json"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc: Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(
        doc["files"],
        json!(["trainc.yaml", "jobs/llm-finetune.yaml"])
    );
    let notes = doc["jobs"][0]["notes"].as_array().expect("notes");
    let fate = |from: &str| {
        notes
            .iter()
            .find(|n| n["from"] == from)
            .map(|n| n["fate"].as_str().unwrap_or_default().to_owned())
            .unwrap_or_else(|| panic!("no note of {from}"))
    };
    assert_eq!(fate("metadata.labels.kueue.x-k8s.io/queue-name"), "kept");
    assert_eq!(fate("spec.runPolicy.backoffLimit"), "left-out");
    assert_eq!(fate("spec.pytorchReplicaSpecs.Master.replicas"), "changed");
    // Again: the files are there.
    let o = run(dir.path(), &["import", file.to_str().expect("UTF-8")]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("already exists"), "{}", stderr(&o));
    let o = run(
        dir.path(),
        &["import", file.to_str().expect("UTF-8"), "--force"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("imported PyTorchJob llm-finetune from "),
        "{}",
        stdout(&o)
    );

    let other = tempfile::tempdir().expect("tempdir");
    fs::write(
        other.path().join("cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
    )
    .expect("write");
    let o = run(other.path(), &["import", "cm.yaml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("document 1 is a ConfigMap, which `trainc import` does not read"),
        "{}",
        stderr(&o)
    );
    assert!(!other.path().join("trainc.yaml").exists());
}
