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

#[test]
fn mnist_cpu() {
    let (_dir, tree) = common::build_example("mnist-cpu");
    insta::assert_snapshot!(render(&tree));
}

#[test]
fn kitchen_sink() {
    let (_dir, tree) = common::build_example("kitchen-sink");
    insta::assert_snapshot!(render(&tree));
}
