//! `trainc run --local` for real: the MNIST example trains as a chief, one
//! parameter server and two workers on 127.0.0.1, with TensorFlow from the
//! virtual environment `tests/run.sh` prepares (`TRAINC_TEST_PYTHON`).
//! Dataset: scikit-learn's bundled 8x8 digits (1,797 images; 360 held out).

mod common;

use std::path::Path;
use std::process::Command;

use common::{run, scratch_example, stderr, stdout};

/// Processes whose command line mentions `needle`.
fn processes_mentioning(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmdline.contains(needle) {
                found.push(cmdline);
            }
        }
    }
    found
}

#[test]
fn mnist_trains_locally_to_the_end_and_leaves_no_process_behind() {
    let Some(python) = common::tool("TRAINC_TEST_PYTHON", "python-with-tensorflow") else {
        return;
    };
    let dir = scratch_example("mnist");
    let work = dir.path().join("run");
    let o = Command::new(env!("CARGO_BIN_EXE_trainc"))
        .current_dir(dir.path())
        .args(["run", "--local", "jobs/mnist.yaml", "--replicas", "ps=1"])
        .args(["--set", "epochs=5", "--set", "batch_size=32", "--set", "learning_rate=0.01"])
        .arg("--python")
        .arg(&python)
        .arg("--workdir")
        .arg(&work)
        .output()
        .expect("trainc runs");
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(
        out.starts_with("running ml/mnist locally: 4 tasks (chief-0, ps-0, worker-0, worker-1)"),
        "{out}"
    );
    // Every task ran and ended on its own, the servers after the chief.
    for task in ["chief-0", "ps-0", "worker-0", "worker-1"] {
        assert!(
            err.contains(&format!("trainc: {task} exited: exit code 0")),
            "{task}:\n{err}"
        );
    }
    assert!(!err.contains("killing"), "{err}");
    let accuracy: f64 = out
        .lines()
        .find_map(|l| l.strip_prefix("[chief-0] test accuracy: "))
        .and_then(|a| a.trim().parse().ok())
        .unwrap_or_else(|| panic!("no accuracy line:\n{out}"));
    assert!(accuracy >= 0.85, "test accuracy {accuracy}");
    // The mount path /data became the work directory's volume.
    let metrics = std::fs::read_to_string(work.join("volumes/data/model/metrics.json"))
        .expect("metrics.json on the local volume");
    assert!(metrics.contains("\"test_accuracy\""), "{metrics}");
    assert!(
        std::fs::read_dir(work.join("volumes/data/logs"))
            .expect("TensorBoard logs")
            .count()
            > 0
    );
    assert!(
        processes_mentioning(&work.display().to_string()).is_empty(),
        "tasks left running"
    );
}

#[test]
fn a_python_without_tensorflow_is_a_clear_error() {
    let dir = scratch_example("mnist");
    let o = run(
        dir.path(),
        &["run", "--local", "jobs/mnist.yaml", "--python", "/nonexistent/python3"],
    );
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains("cannot run the Python interpreter `/nonexistent/python3`")
            && err.contains("pass `--python`"),
        "{err}"
    );
    // A real interpreter without TensorFlow.
    let fake = dir.path().join("python-without-tf");
    std::fs::write(&fake, "#!/bin/sh\nexit 1\n").expect("write");
    set_executable(&fake);
    let o = run(
        dir.path(),
        &["run", "--local", "jobs/mnist.yaml", "--python", "./python-without-tf"],
    );
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains("TensorFlow is not installed for")
            && err.contains("pip install tensorflow-cpu==2.21.*"),
        "{err}"
    );
}

#[test]
fn run_requires_local_and_a_single_job() {
    let dir = scratch_example("mnist");
    let o = run(dir.path(), &["run", "jobs/mnist.yaml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--local"), "{}", stderr(&o));
    let o = run(
        dir.path(),
        &["run", "--local", "jobs/mnist.yaml", "--replicas", "evaluator=1"],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("the job has no evaluator role"), "{}", stderr(&o));
}

fn set_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    let mut p = std::fs::metadata(path).expect("stat").permissions();
    p.set_mode(0o755);
    std::fs::set_permissions(path, p).expect("chmod");
}
