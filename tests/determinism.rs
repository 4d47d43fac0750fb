//! Same input, same bytes: whatever the order of input files, the directory
//! the project sits in, the time zone or the locale.

mod common;

use std::path::Path;

use common::{read_tree, run, stderr, trainc};

/// A project with three jobs in three files, the third on `jobset`.
fn project(dir: &Path) {
    common::copy_tree(&common::example("mnist").join("jobs"), &dir.join("jobs"));
    common::copy_tree(&common::example("mnist").join("train"), &dir.join("train"));
    common::copy_tree(
        &common::example("mnist-cpu").join("jobs"),
        &dir.join("jobs"),
    );
    let third = std::fs::read_to_string(common::example("mnist-cpu").join("jobs/mnist-cpu.yaml"))
        .expect("read")
        .replace("name: mnist-cpu", "name: a-first-job")
        .replace("\nspec:\n", "\nspec:\n  target: jobset\n");
    std::fs::write(dir.join("jobs/zz-last-file.yaml"), third).expect("write");
}

#[test]
fn output_does_not_depend_on_input_order_location_time_zone_or_locale() {
    let a = tempfile::tempdir().expect("tempdir");
    project(a.path());
    let o = run(
        a.path(),
        &["build", "jobs", "-o", "out", "--build-output", "images"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let reference = read_tree(&a.path().join("out"));
    let reference_images = read_tree(&a.path().join("images"));
    assert_eq!(
        reference_images.len(),
        5,
        "a Dockerfile, three TensorBoard Dockerfiles and the bake file"
    );
    assert_eq!(
        reference
            .keys()
            .filter(|k| k.ends_with("kustomization.yaml"))
            .count(),
        4
    );

    // Files named one by one, in reverse order, from another directory,
    // under another time zone and locale.
    let b = tempfile::tempdir().expect("tempdir");
    let nested = b.path().join("some/deeper/place");
    std::fs::create_dir_all(&nested).expect("mkdir");
    project(&nested);
    let mut files: Vec<String> = std::fs::read_dir(nested.join("jobs"))
        .expect("list")
        .map(|e| format!("jobs/{}", e.expect("entry").file_name().to_string_lossy()))
        .collect();
    files.sort();
    files.reverse();
    let mut cmd = trainc();
    cmd.current_dir(&nested)
        .arg("build")
        .args(&files)
        .args(["-o", "out", "--build-output", "images"])
        .env("TZ", "Pacific/Kiritimati")
        .env("LC_ALL", "tr_TR.UTF-8")
        .env("LANG", "tr_TR.UTF-8");
    let o = cmd.output().expect("runs");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(read_tree(&nested.join("out")), reference);
    assert_eq!(read_tree(&nested.join("images")), reference_images);
}

#[test]
fn repeated_builds_give_identical_bytes() {
    let (_a, first) = common::build_example("mnist");
    let (_b, second) = common::build_example("mnist");
    assert_eq!(first, second);
    for target in ["jobset", "tfjob"] {
        let (_a, first) = common::build_example_for("kitchen-sink", target);
        let (_b, second) = common::build_example_for("kitchen-sink", target);
        assert_eq!(first, second, "{target}");
    }
    for target in ["kubernetes", "jobset", "pytorchjob"] {
        let (_a, first) = common::build_example_for("pytorch-gpu", target);
        let (_b, second) = common::build_example_for("pytorch-gpu", target);
        assert_eq!(first, second, "{target}");
    }
}
