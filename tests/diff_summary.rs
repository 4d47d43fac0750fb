//! `trainc diff`'s resource summary: what the runs a change starts, starts
//! again or stops request, before → after, on every target, in text and
//! Markdown. Both sides are built by this trainc, so the snapshots change
//! only when the summary, the run names or the examples do.

mod common;

use std::fs;
use std::path::Path;

use common::{Variant, build_variant, run, scratch_example, stderr, stdout};

fn edit(dir: &Path, file: &str, from: &str, to: &str) {
    let path = dir.join(file);
    let text = fs::read_to_string(&path).expect("read");
    assert!(text.contains(from), "{file}: {from}");
    fs::write(&path, text.replace(from, to)).expect("write");
}

/// `trainc diff --stat` in text and Markdown, exit code 1 both times.
fn diff(dir: &Path, extra: &[&str]) -> (String, String) {
    let mut args = vec!["diff", "--stat"];
    args.extend_from_slice(extra);
    let o = run(dir, &args);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let text = stdout(&o);
    args.extend_from_slice(&["--format", "markdown"]);
    let o = run(dir, &args);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    (text, stdout(&o))
}

/// The reports up to the per-resource list, which the summary leads.
fn heads(dir: &Path, extra: &[&str]) -> String {
    let (text, md) = diff(dir, extra);
    let text_head = text
        .splitn(3, "\n\n")
        .take(2)
        .collect::<Vec<_>>()
        .join("\n\n");
    let md_head = md
        .split_once("\n| | resource |")
        .map_or(md.as_str(), |(head, _)| head);
    let command = ["trainc", "diff", "--stat"]
        .iter()
        .chain(extra)
        .copied()
        .collect::<Vec<_>>()
        .join(" ");
    format!("$ {command}\n{text_head}\n\n$ {command} --format markdown\n{md_head}")
}

const WORKERS: &str = "worker: {replicas: 2, resources: {cpu: \"4\", memory: 8Gi, gpu: 1}}";

/// The example of the issue: more workers, more GPUs each, on the
/// `kubernetes` target (a Job per task).
#[test]
fn more_workers_and_gpus() {
    let dir = scratch_example("mnist");
    assert!(run(dir.path(), &["build"]).status.success());
    edit(
        dir.path(),
        "jobs/mnist.yaml",
        WORKERS,
        "worker: {replicas: 4, resources: {cpu: \"4\", memory: 8Gi, gpu: 2}}",
    );
    let (text, md) = diff(dir.path(), &[]);
    insta::assert_snapshot!("more_workers_and_gpus_text", text);
    insta::assert_snapshot!("more_workers_and_gpus_markdown", md);

    let o = run(dir.path(), &["diff", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let cost = |side: &str| {
        let r = &v["runs"][0][side];
        (
            r["tasks"].as_u64(),
            r["gpus"].as_u64(),
            r["cpuMillicores"].as_u64(),
            r["memoryBytes"].as_u64(),
        )
    };
    // chief 1 CPU 2Gi, 2 ps 1 CPU 2Gi, workers 4 CPU 8Gi.
    assert_eq!(
        cost("before"),
        (Some(5), Some(2), Some(11_000), Some(22 << 30))
    );
    assert_eq!(
        cost("after"),
        (Some(7), Some(8), Some(19_000), Some(38 << 30))
    );
    assert_eq!(v["runs"][0]["after"]["extended"]["nvidia.com/gpu"], 8);
    assert_eq!(v["total"]["before"], v["runs"][0]["before"]);
    assert_eq!(v["total"]["after"], v["runs"][0]["after"]);
}

/// A new job starts a run, a removed one stops its own; the total adds
/// them up.
#[test]
fn a_run_starts_and_a_run_stops() {
    let dir = scratch_example("mnist");
    assert!(run(dir.path(), &["build"]).status.success());
    fs::remove_file(dir.path().join("jobs/mnist.yaml")).expect("remove");
    fs::copy(
        common::example("mnist-cpu").join("jobs/mnist-cpu.yaml"),
        dir.path().join("jobs/mnist-cpu.yaml"),
    )
    .expect("copy");
    insta::assert_snapshot!(heads(dir.path(), &[]));
    let o = run(dir.path(), &["diff", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    // In the order of their directories: ml/mnist, ml/mnist-cpu.
    assert_eq!(v["runs"][0]["op"], "stop");
    assert_eq!(v["runs"][0]["after"]["tasks"], 0);
    assert_eq!(v["runs"][1]["op"], "start");
    assert_eq!(v["runs"][1]["before"]["tasks"], 0);
    assert_eq!(v["total"]["before"]["tasks"], 5);
    assert_eq!(v["total"]["after"]["tasks"], 3);
}

/// Another target, same tasks: the run starts again at the same cost.
#[test]
fn a_new_target_costs_the_same() {
    let dir = scratch_example("mnist");
    assert!(run(dir.path(), &["build"]).status.success());
    edit(
        dir.path(),
        "jobs/mnist.yaml",
        "spec:\n",
        "spec:\n  target: jobset\n",
    );
    insta::assert_snapshot!(heads(dir.path(), &[]));
}

/// A JobSet: a replicated Job per role, its replicas × parallelism.
#[test]
fn jobset() {
    let (dir, _) = build_variant("mnist", Variant::Project("trainc.jobset.yaml"));
    edit(
        dir.path(),
        "jobs/mnist.yaml",
        WORKERS,
        "worker: {replicas: 3, resources: {cpu: 3500m, memory: 6Gi, gpu: 1}}",
    );
    insta::assert_snapshot!(heads(dir.path(), &["--project", "trainc.jobset.yaml"]));
}

/// A TFJob: replica specs.
#[test]
fn tfjob() {
    let (dir, _) = build_variant("mnist-cpu", Variant::Target("tfjob"));
    edit(
        dir.path(),
        "jobs/mnist-cpu.yaml",
        "ps:     {replicas: 1, resources: {cpu: 500m, memory: 1Gi}}",
        "ps:     {replicas: 2, resources: {cpu: 250m, memory: 1536Mi}}",
    );
    insta::assert_snapshot!(heads(dir.path(), &[]));
}

const NODES: &str = "worker: {replicas: 2, resources: {cpu: \"2\", memory: 4Gi}}";

/// PyTorch on `kubernetes`: one Indexed Job, its parallelism.
#[test]
fn pytorch_indexed_job() {
    let dir = scratch_example("pytorch");
    assert!(run(dir.path(), &["build"]).status.success());
    edit(
        dir.path(),
        "jobs/digits.yaml",
        NODES,
        "worker: {replicas: 3, resources: {cpu: \"2\", memory: 6Gi, gpu: 4}}",
    );
    insta::assert_snapshot!(heads(dir.path(), &[]));
}

/// A PyTorchJob: a Master and Worker replicas.
#[test]
fn pytorchjob() {
    let (dir, _) = build_variant("pytorch", Variant::Project("trainc.pytorchjob.yaml"));
    edit(
        dir.path(),
        "jobs/digits.yaml",
        NODES,
        "worker: {replicas: 1, resources: {cpu: \"2\", memory: 4Gi}}",
    );
    insta::assert_snapshot!(heads(dir.path(), &["--project", "trainc.pytorchjob.yaml"]));
}

/// A TrainJob: `numNodes` pods of `resourcesPerNode`; its runtime, renamed
/// with it, counts nothing.
#[test]
fn trainjob() {
    let (dir, _) = build_variant("pytorch", Variant::Project("trainc.trainjob.yaml"));
    edit(
        dir.path(),
        "jobs/digits.yaml",
        NODES,
        "worker: {replicas: 3, resources: {cpu: \"2\", memory: 6Gi, gpu: 4}}",
    );
    insta::assert_snapshot!(heads(dir.path(), &["--project", "trainc.trainjob.yaml"]));
}
