//! Golden tests of compiled output. Snapshots live in tests/snapshots and are
//! reviewed like code: `cargo insta review` after an intended change.

mod common;

use std::collections::BTreeMap;

fn render(tree: &BTreeMap<String, Vec<u8>>) -> String {
    let mut s = String::new();
    for (path, bytes) in tree {
        s.push_str(&format!("=== {path}\n"));
        s.push_str(&String::from_utf8_lossy(bytes));
    }
    s
}

#[test]
fn mnist() {
    let (dir, tree) = common::build_example("mnist");
    insta::assert_snapshot!(render(&tree));
    // The build specs, beside the manifests.
    let build = common::read_tree(&dir.path().join("build"));
    insta::assert_snapshot!("mnist_build", render(&build));
}

/// The bundled JobSet variant of the example: its second project file.
#[test]
fn mnist_jobset() {
    let dir = common::scratch_example("mnist");
    let o = common::run(dir.path(), &["build", "--project", "trainc.jobset.yaml"]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    insta::assert_snapshot!(render(&common::read_tree(
        &dir.path().join("deploy-jobset")
    )));
}

#[test]
fn mnist_cpu() {
    let (_dir, tree) = common::build_example("mnist-cpu");
    insta::assert_snapshot!(render(&tree));
}

/// TF1 flags under the operator: host names are the operator's Services,
/// the task index comes from its pod label.
#[test]
fn mnist_cpu_tfjob() {
    let (_dir, tree) = common::build_example_for("mnist-cpu", "tfjob");
    insta::assert_snapshot!(render(&tree));
}

#[test]
fn kitchen_sink() {
    let (_dir, tree) = common::build_example("kitchen-sink");
    insta::assert_snapshot!(render(&tree));
}

#[test]
fn kitchen_sink_jobset() {
    let (_dir, tree) = common::build_example_for("kitchen-sink", "jobset");
    insta::assert_snapshot!(render(&tree));
}

#[test]
fn kitchen_sink_tfjob() {
    let (_dir, tree) = common::build_example_for("kitchen-sink", "tfjob");
    insta::assert_snapshot!(render(&tree));
}

/// Patches and raw affinities (tests/fixtures/patches): the patched pod
/// templates of every role.
#[test]
fn patches() {
    let (_dir, tree) = common::build_example("patches");
    insta::assert_snapshot!(render(&tree));
}

#[test]
fn patches_jobset() {
    let (_dir, tree) = common::build_example_for("patches", "jobset");
    insta::assert_snapshot!(render(&tree));
}

#[test]
fn patches_tfjob() {
    let (_dir, tree) = common::build_example_for("patches", "tfjob");
    insta::assert_snapshot!(render(&tree));
}
