//! `trainc run --local` for real: the MNIST example trains as a chief, one
//! parameter server and two workers on 127.0.0.1, with TensorFlow from the
//! virtual environment `tests/run.sh` prepares (`TRAINC_TEST_PYTHON`).
//! Dataset: scikit-learn's bundled 8x8 digits (1,797 images; 360 held out).
//! So does the starter `trainc init` writes, with its bundled defaults, for
//! TensorFlow and for PyTorch (`TRAINC_TORCH_PYTHON`).

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

/// Asserts that `text` has each of `lines` (a line's start) in this order.
fn assert_in_order(text: &str, lines: &[&str]) {
    let mut rest = text.lines();
    for want in lines {
        assert!(
            rest.any(|l| l.starts_with(want)),
            "no line `{want}` after the ones before it in:\n{text}"
        );
    }
}

/// `trainc run --local` of `definition` with `python`, work directory
/// `<dir>/run`; asserts that it succeeded, that it said what it was doing
/// while nothing else did (checking the interpreter, then the tasks; waiting
/// for the servers until every one listens), and that each task ended on
/// its own, killed by no one. Returns stdout.
fn train(dir: &Path, definition: &str, args: &[&str], python: &Path, tasks: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_trainc"))
        .current_dir(dir)
        .args(["run", "--local", definition])
        .args(args)
        .arg("--python")
        .arg(python)
        .arg("--workdir")
        .arg(dir.join("run"))
        .output()
        .expect("trainc runs");
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("checking the Python environment: importing ")
            && lines[0].ends_with(&format!(" with `{}`", python.display())),
        "{out}"
    );
    assert!(
        lines[1].starts_with("running ")
            && lines[1].contains(&format!("{} tasks ({})", tasks.len(), tasks.join(", "))),
        "{out}"
    );
    // Before the first task exits: the servers listen until training ends.
    let notes: Vec<&str> = err.lines().filter(|l| l.starts_with("trainc: ")).collect();
    assert!(
        notes[0].starts_with("trainc: waiting for the servers to listen: ")
            && notes[1].starts_with("trainc: every server is listening, ")
            && notes[2].contains(" exited: "),
        "{err}"
    );
    for task in tasks {
        assert!(
            err.contains(&format!("trainc: {task} exited: exit code 0")),
            "{task}:\n{err}"
        );
    }
    assert!(!err.contains("killing"), "{err}");
    assert!(!err.contains("still running after"), "{err}");
    out
}

#[test]
fn mnist_trains_locally_to_the_end_and_leaves_no_process_behind() {
    let Some(python) = common::tool("TRAINC_TEST_PYTHON", "python-with-tensorflow") else {
        return;
    };
    let dir = scratch_example("mnist");
    let work = dir.path().join("run");
    // The servers end on their own, after the chief.
    let out = train(
        dir.path(),
        "jobs/mnist.yaml",
        &[
            "--replicas",
            "ps=1",
            "--set",
            "epochs=5",
            "--set",
            "batch_size=32",
            "--set",
            "learning_rate=0.01",
        ],
        &python,
        &["chief-0", "ps-0", "worker-0", "worker-1"],
    );
    assert!(out.contains("\nrunning ml/mnist locally: "), "{out}");
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

/// The collective strategy: two workers, no parameter servers, the seed-001
/// layout. Worker 0 saves; the run is over when it is, and worker 1 leaves
/// on its own.
#[test]
fn the_collective_strategy_trains_locally_with_workers_only() {
    let Some(python) = common::tool("TRAINC_TEST_PYTHON", "python-with-tensorflow") else {
        return;
    };
    let dir = scratch_example("mnist");
    let work = dir.path().join("run");
    let out = train(
        dir.path(),
        "collective/mnist-collective.yaml",
        &["--set", "epochs=5"],
        &python,
        &["worker-0", "worker-1"],
    );
    assert!(
        out.contains("\nrunning ml/mnist-collective locally: "),
        "{out}"
    );
    // Both copies of the model saw the same averaged gradients: they agree.
    let accuracy = |task: &str| -> f64 {
        out.lines()
            .filter_map(|l| l.strip_prefix(&format!("[{task}] epoch 5/5: ")))
            .find_map(|l| l.split("test accuracy ").nth(1))
            .and_then(|a| a.trim().parse().ok())
            .unwrap_or_else(|| panic!("no last-epoch line of {task}:\n{out}"))
    };
    assert_eq!(accuracy("worker-0"), accuracy("worker-1"), "{out}");
    assert!(accuracy("worker-0") >= 0.85, "{out}");
    let metrics = std::fs::read_to_string(work.join("volumes/data/model/metrics.json"))
        .expect("metrics.json on the local volume");
    assert!(metrics.contains("\"tasks\": 2"), "{metrics}");
    assert!(
        processes_mentioning(&work.display().to_string()).is_empty(),
        "tasks left running"
    );
}

/// PyTorch DDP with `gloo` on CPUs: two nodes of one process each, as
/// `torchrun` would start them, from Debian's PyTorch that `tests/run.sh`
/// unpacks (`TRAINC_TORCH_PYTHON`). Every rank finishes, the copies of the
/// model agree, and the model learns the generated digits.
#[test]
fn pytorch_ddp_trains_locally_on_two_nodes() {
    let Some(python) = common::tool("TRAINC_TORCH_PYTHON", "python-with-torch") else {
        return;
    };
    let dir = scratch_example("pytorch");
    let work = dir.path().join("run");
    let out = train(
        dir.path(),
        "jobs/digits.yaml",
        &["--set", "epochs=8"],
        &python,
        &["worker-0", "worker-1"],
    );
    assert!(out.contains("\nrunning ml/digits locally: "), "{out}");
    let accuracy = |rank: u32| -> f64 {
        let prefix = format!("[worker-{rank}] rank {rank} of 2 finished: test accuracy ");
        out.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|a| a.trim().parse().ok())
            .unwrap_or_else(|| panic!("rank {rank} did not finish:\n{out}"))
    };
    // DDP averaged the gradients: both copies are the same model.
    assert_eq!(accuracy(0), accuracy(1), "{out}");
    assert!(accuracy(0) >= 0.9, "{out}");
    let metrics = std::fs::read_to_string(work.join("volumes/data/model/metrics.json"))
        .expect("metrics.json on the local volume");
    assert!(metrics.contains("\"world_size\": 2"), "{metrics}");
    assert!(
        processes_mentioning(&work.display().to_string()).is_empty(),
        "ranks left running"
    );
}

/// `trainc init`'s starter for `framework`, run as written: the bundled
/// defaults, the program in `train/` found through the build context.
/// Returns the project directory and stdout.
fn init_and_train(framework: &str, python: &Path, tasks: &[&str]) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let o = run(dir.path(), &["init", "--framework", framework]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = train(dir.path(), "jobs/mnist.yaml", &[], python, tasks);
    assert!(out.contains("\nrunning default/mnist locally: "), "{out}");
    assert!(
        processes_mentioning(&dir.path().display().to_string()).is_empty(),
        "tasks left running"
    );
    (dir, out)
}

#[test]
fn the_tensorflow_starter_trains_locally_as_written() {
    let Some(python) = common::tool("TRAINC_TEST_PYTHON", "python-with-tensorflow") else {
        return;
    };
    // Parameter-server training with the chief TensorFlow 2 needs.
    let (dir, out) = init_and_train(
        "tensorflow",
        &python,
        &["chief-0", "ps-0", "worker-0", "worker-1"],
    );
    let accuracy: f64 = out
        .lines()
        .find_map(|l| l.strip_prefix("[chief-0] test accuracy: "))
        .and_then(|a| a.split(';').next()?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no accuracy line:\n{out}"));
    assert!(accuracy >= 0.8, "test accuracy {accuracy}");
    // The servers left on the chief's marker, within the grace period.
    for server in ["ps 0", "worker 0", "worker 1"] {
        assert!(
            out.contains(&format!("{server}: training finished, exiting")),
            "{out}"
        );
    }
    let model = dir.path().join("run/volumes/data/model");
    let metrics = std::fs::read_to_string(model.join("metrics.json")).expect("metrics.json");
    assert!(metrics.contains("\"epochs\": 5"), "{metrics}");
    assert!(model.join("ckpt-1.index").exists());
    assert!(
        std::fs::read_dir(dir.path().join("run/volumes/data/logs"))
            .expect("TensorBoard logs")
            .count()
            > 0
    );
}

#[test]
fn the_pytorch_starter_trains_locally_as_written() {
    let Some(python) = common::tool("TRAINC_TORCH_PYTHON", "python-with-torch") else {
        return;
    };
    let (dir, out) = init_and_train("pytorch", &python, &["worker-0", "worker-1"]);
    let accuracy = |rank: u32| -> f64 {
        let prefix = format!("[worker-{rank}] rank {rank} of 2 finished: test accuracy ");
        out.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|a| a.trim().parse().ok())
            .unwrap_or_else(|| panic!("rank {rank} did not finish:\n{out}"))
    };
    assert_eq!(accuracy(0), accuracy(1), "{out}");
    assert!(accuracy(0) >= 0.8, "{out}");
    let model = dir.path().join("run/volumes/data/model");
    let metrics = std::fs::read_to_string(model.join("metrics.json")).expect("metrics.json");
    assert!(metrics.contains("\"world_size\": 2"), "{metrics}");
    assert!(model.join("model.pt").exists());
}

/// Without PyTorch, a PyTorch job stops before anything starts.
#[test]
fn a_python_without_torch_is_a_clear_error() {
    let Some(python) = common::tool("TRAINC_TEST_PYTHON", "python-with-tensorflow") else {
        return;
    };
    let dir = scratch_example("pytorch");
    let o = Command::new(env!("CARGO_BIN_EXE_trainc"))
        .current_dir(dir.path())
        .args(["run", "--local", "jobs/digits.yaml", "--python"])
        .arg(&python)
        .output()
        .expect("trainc runs");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("PyTorch is not installed for"),
        "{}",
        stderr(&o)
    );
    assert!(
        stderr(&o).contains("pip install torch==2.9.*"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_python_without_tensorflow_is_a_clear_error() {
    let dir = scratch_example("mnist");
    let with_python = |python: &str| {
        run(
            dir.path(),
            &["run", "--local", "jobs/mnist.yaml", "--python", python],
        )
    };
    let o = with_python("/nonexistent/python3");
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stdout(&o),
        "checking the Python environment: importing TensorFlow with `/nonexistent/python3`\n"
    );
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
    let o = with_python("./python-without-tf");
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
        &[
            "run",
            "--local",
            "jobs/mnist.yaml",
            "--replicas",
            "evaluator=1",
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("the job has no evaluator role"),
        "{}",
        stderr(&o)
    );
}

fn set_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    let mut p = std::fs::metadata(path).expect("stat").permissions();
    p.set_mode(0o755);
    std::fs::set_permissions(path, p).expect("chmod");
}

/// A job whose tasks are shell scripts: the supervision without TensorFlow.
/// The chief runs `chief.sh`, every other task `server.sh`.
fn script_job(dir: &Path, chief: &str, server: &str) {
    std::fs::create_dir_all(dir.join("jobs")).expect("mkdir");
    for (name, body) in [("chief.sh", chief), ("server.sh", server)] {
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("write");
        set_executable(&path);
    }
    let d = dir.display();
    std::fs::write(
        dir.join("jobs/scripts.yaml"),
        format!(
            "apiVersion: trainc.dev/v1alpha1\nkind: TrainingJob\nmetadata: {{name: scripts, namespace: ml}}\n\
             spec:\n  image: example.com/none:1\n  storage: [{{name: data, mountPath: /data, size: 1Gi}}]\n\
             \x20 roles:\n\
             \x20   chief: {{replicas: 1, command: [{d}/chief.sh, /data/out]}}\n\
             \x20   ps: {{replicas: 1, command: [{d}/server.sh]}}\n\
             \x20   worker: {{replicas: 2, command: [{d}/server.sh]}}\n"
        ),
    )
    .expect("write");
}

#[test]
fn output_is_prefixed_paths_are_mapped_and_servers_are_stopped_after_the_chief() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The servers never exit on their own: trainc stops them after the grace period.
    script_job(
        dir.path(),
        "echo \"writing $1\"; echo done > \"$1\"; echo oops >&2",
        "echo up; sleep 1001",
    );
    let work = dir.path().join("w");
    let o = Command::new(env!("CARGO_BIN_EXE_trainc"))
        .current_dir(dir.path())
        .args(["run", "--local", "jobs/scripts.yaml", "--workdir"])
        .arg(&work)
        .output()
        .expect("trainc runs");
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    let mapped = work.join("volumes/data/out");
    assert!(
        out.contains(&format!("[chief-0] writing {}\n", mapped.display())),
        "{out}"
    );
    assert!(out.contains("[worker-1] up\n"), "{out}");
    assert!(err.contains("[chief-0] oops\n"), "{err}");
    assert_eq!(std::fs::read_to_string(&mapped).expect("written"), "done\n");
    // No Python: nothing to check first. The scripts never listen, so the
    // wait for the servers ends without a word when training does.
    assert!(
        out.starts_with("running ml/scripts locally: 4 tasks"),
        "{out}"
    );
    assert!(!err.contains("every server is listening"), "{err}");
    assert_in_order(
        &err,
        &[
            "trainc: waiting for the servers to listen: chief-0 on port ",
            "trainc: chief-0 exited: exit code 0",
            "trainc: training is over; waiting up to 15 s for ps-0, worker-0, worker-1 to exit on their own",
            "trainc: ps-0, worker-0, worker-1 still running after 15 s; stopping them",
        ],
    );
    assert!(processes_mentioning(&dir.path().display().to_string()).is_empty());
    assert!(processes_mentioning("sleep 1001").is_empty());
}

#[test]
fn a_failing_task_ends_the_run_with_its_status_and_ctrl_c_stops_everything() {
    let dir = tempfile::tempdir().expect("tempdir");
    script_job(
        dir.path(),
        "sleep 1002",
        "[ \"$TF_CONFIG\" ] && sleep 1; exit 3",
    );
    let o = Command::new(env!("CARGO_BIN_EXE_trainc"))
        .current_dir(dir.path())
        .args(["run", "--local", "jobs/scripts.yaml", "--workdir", "w"])
        .output()
        .expect("trainc runs");
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("failed; stopping the other tasks"),
        "{}",
        stderr(&o)
    );
    assert!(processes_mentioning(&dir.path().display().to_string()).is_empty());
    assert!(processes_mentioning("sleep 1002").is_empty());

    // Everything waits; SIGINT (Ctrl-C) to trainc alone stops every task.
    script_job(dir.path(), "sleep 1003", "sleep 1003");
    let mut child = Command::new(env!("CARGO_BIN_EXE_trainc"))
        .current_dir(dir.path())
        .args(["run", "--local", "jobs/scripts.yaml", "--workdir", "w"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let needle = dir.path().display().to_string();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    // Four on two looks in a row: a shell between its fork and its exec
    // (a task's script starting `sleep`) counts twice for a moment.
    let mut seen = Vec::new();
    let mut steady = 0;
    while steady < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
        seen = processes_mentioning(&needle);
        steady = if seen.len() == 4 { steady + 1 } else { 0 };
    }
    assert_eq!(seen.len(), 4, "all four tasks started: {seen:?}");
    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill");
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(130));
    assert!(
        processes_mentioning(&needle).is_empty(),
        "tasks left running"
    );
    assert!(
        processes_mentioning("sleep 1003").is_empty(),
        "their children too"
    );
}

/// Variables the cluster reads from Secrets, ConfigMaps or the pod: a local
/// run takes them from trainc's own environment, leaves the others unset
/// and says which, with `envFrom`, before any task starts.
#[test]
fn referenced_variables_come_from_trainc_s_environment_or_are_named_unset() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("jobs")).expect("mkdir");
    let script = dir.path().join("env.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\necho \"key=${WANDB_API_KEY-unset} pod=${POD_NAME-unset} data=${DATA_DIR-unset} level=$LOG_LEVEL\"\n",
    )
    .expect("write");
    set_executable(&script);
    std::fs::write(
        dir.path().join("jobs/refs.yaml"),
        format!(
            "apiVersion: trainc.dev/v1alpha1\nkind: TrainingJob\nmetadata: {{name: refs, namespace: ml}}\n\
             spec:\n  image: example.com/none:1\n  command: [{}]\n\
             \x20 storage: [{{name: data, mountPath: /data, size: 1Gi}}]\n\
             \x20 env:\n\
             \x20   LOG_LEVEL: info\n\
             \x20   WANDB_API_KEY: {{secretKeyRef: {{name: wandb, key: api-key}}}}\n\
             \x20   DATA_DIR: {{configMapKeyRef: {{name: paths, key: data}}}}\n\
             \x20 envFrom: [{{secretRef: {{name: s3}}, prefix: S3_}}]\n\
             \x20 roles:\n\
             \x20   ps: {{replicas: 1}}\n\
             \x20   worker:\n\
             \x20     replicas: 1\n\
             \x20     env: {{POD_NAME: {{fieldRef: {{fieldPath: metadata.name}}}}}}\n\
             \x20     envFrom: [{{configMapRef: {{name: tuning}}}}]\n",
            script.display()
        ),
    )
    .expect("write");
    let work = dir.path().join("w");
    let o = Command::new(env!("CARGO_BIN_EXE_trainc"))
        .current_dir(dir.path())
        .args(["run", "--local", "jobs/refs.yaml", "--workdir"])
        .arg(&work)
        .env("WANDB_API_KEY", "from-the-shell")
        .env("DATA_DIR", "/data/in")
        .env_remove("POD_NAME")
        .output()
        .expect("trainc runs");
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("running ml/refs locally: 2 tasks"),
        "{out}"
    );
    assert_eq!(
        lines[1],
        "note: not set locally: POD_NAME (the cluster reads it from a Secret, a ConfigMap or the pod); set it in trainc's environment to pass it on",
        "{out}"
    );
    assert_eq!(
        lines[2],
        "note: envFrom is not resolved locally: ConfigMap `tuning`, Secret `s3` (prefix `S3_`); the tasks see only trainc's own environment",
        "{out}"
    );
    // A value from trainc's environment is a value like any other: its
    // container paths map to the work directory.
    let data = work.join("volumes/data/in");
    for task in ["ps-0", "worker-0"] {
        assert!(
            out.contains(&format!(
                "[{task}] key=from-the-shell pod=unset data={} level=info\n",
                data.display()
            )),
            "{task}: {out}"
        );
    }
}

/// Without `--workdir`, the work directory is made anew in `$TMPDIR`, mode
/// 0700, under a name nobody can guess. What another user may have left at
/// the old name, `trainc-run-<namespace>-<job>-<pid>` (a symlink to
/// elsewhere, a directory of theirs holding one), is neither used nor
/// written through. The name is planted before trainc starts: `exec` keeps
/// the shell's pid.
#[test]
fn the_default_work_directory_is_new_and_private() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().expect("tempdir");
    script_job(dir.path(), "echo done > \"$1\"", "exit 0");
    let tmp = dir.path().join("tmp");
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&tmp).expect("mkdir");
    std::fs::create_dir(&elsewhere).expect("mkdir");
    let old = "\"$TMPDIR/trainc-run-ml-scripts-$$\"";
    for plant in [
        format!("ln -s \"$ELSEWHERE\" {old}"),
        format!(
            "mkdir -m 777 {old} && ln -s \"$ELSEWHERE\" {old}/volumes && ln -s \"$ELSEWHERE\" {old}/cluster-spec"
        ),
    ] {
        let o = Command::new("sh")
            .current_dir(dir.path())
            .arg("-c")
            .arg(format!(
                "{plant} && exec \"$TRAINC\" run --local jobs/scripts.yaml --format json"
            ))
            .env("TMPDIR", &tmp)
            .env("ELSEWHERE", &elsewhere)
            .env("TRAINC", env!("CARGO_BIN_EXE_trainc"))
            .output()
            .expect("sh runs");
        let (out, err) = (stdout(&o), stderr(&o));
        assert_eq!(o.status.code(), Some(0), "{plant}\n{out}\n{err}");
        assert_eq!(
            std::fs::read_dir(&elsewhere).expect("read").count(),
            0,
            "written through: {plant}"
        );
        let summary: serde_json::Value = serde_json::from_str(&out).expect("JSON");
        let work = Path::new(summary["workdir"].as_str().expect("workdir"));
        let name = work.file_name().expect("name").to_string_lossy();
        assert_eq!(work.parent(), Some(tmp.as_path()), "{out}");
        let suffix = name.strip_prefix("trainc-run-ml-scripts-").expect("prefix");
        assert!(
            suffix.len() == 6 && suffix.chars().all(|c| c.is_ascii_alphanumeric()),
            "{name}"
        );
        let meta = std::fs::symlink_metadata(work).expect("kept after the run");
        assert!(meta.is_dir());
        assert_eq!(meta.permissions().mode() & 0o7777, 0o700, "{name}");
        assert_eq!(
            std::fs::read_to_string(work.join("volumes/data/out")).expect("written"),
            "done\n"
        );
    }
}

/// `$(TRAINC_TASK_INDEX)` expands locally as on the cluster, where every
/// task defines it first: in `args`, and in variables, each task its own.
#[test]
fn the_task_index_expands_in_arguments_and_variables() {
    let dir = tempfile::tempdir().expect("tempdir");
    let task = dir.path().join("task.sh");
    std::fs::write(&task, "#!/bin/sh\necho \"$1 $SHARD $TRAINC_TASK_INDEX\"\n").expect("write");
    set_executable(&task);
    std::fs::create_dir_all(dir.path().join("jobs")).expect("mkdir");
    let t = task.display();
    std::fs::write(
        dir.path().join("jobs/shards.yaml"),
        format!(
            "apiVersion: trainc.dev/v1alpha1\nkind: TrainingJob\nmetadata: {{name: shards, namespace: ml}}\n\
             spec:\n  image: example.com/none:1\n  command: [{t}]\n\
             \x20 args: [--part=$(TRAINC_TASK_INDEX)]\n\
             \x20 env: {{SHARD: \"s-$(TRAINC_TASK_INDEX)\"}}\n\
             \x20 roles:\n\
             \x20   chief: {{replicas: 1}}\n\
             \x20   ps: {{replicas: 1}}\n\
             \x20   worker: {{replicas: 2}}\n"
        ),
    )
    .expect("write");
    let o = Command::new(env!("CARGO_BIN_EXE_trainc"))
        .current_dir(dir.path())
        .args(["run", "--local", "jobs/shards.yaml", "--workdir"])
        .arg(dir.path().join("w"))
        .output()
        .expect("trainc runs");
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    for line in [
        "[chief-0] --part=0 s-0 0\n",
        "[ps-0] --part=0 s-0 0\n",
        "[worker-0] --part=0 s-0 0\n",
        "[worker-1] --part=1 s-1 1\n",
    ] {
        assert!(out.contains(line), "{line:?} in:\n{out}");
    }
}
