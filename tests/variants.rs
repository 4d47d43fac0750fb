//! Variants of one set of definitions (issue 11 item 11), through the CLI:
//! tests/fixtures/variants has the project's own output and two variants.
//! Their bytes are in the goldens; the errors in tests/cmd/project.trycmd.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use common::{read_tree, run, scratch_example, stderr, stdout};

const DIRS: [&str; 5] = [
    "deploy",
    "build",
    "deploy-cpu",
    "build-cpu",
    "deploy-staging",
];

fn trees(root: &Path) -> BTreeMap<&'static str, BTreeMap<String, Vec<u8>>> {
    DIRS.iter()
        .map(|d| (*d, read_tree(&root.join(d))))
        .collect()
}

/// Edits the project file of the copy in `dir`.
fn edit_project(dir: &Path, from: &str, to: &str) {
    let path = dir.join("trainc.yaml");
    let text = fs::read_to_string(&path).expect("read");
    assert!(text.contains(from), "{from}");
    fs::write(&path, text.replace(from, to)).expect("write");
}

#[test]
fn build_writes_every_variant_and_variant_restricts() {
    let dir = scratch_example("variants");
    let o = run(dir.path(), &["build"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "updated deploy: 15 created, 0 updated, 0 deleted, 0 unchanged\n\
         updated build: 2 created, 0 updated, 0 deleted, 0 unchanged\n\
         updated deploy-cpu: 9 created, 0 updated, 0 deleted, 0 unchanged\n\
         updated build-cpu: 2 created, 0 updated, 0 deleted, 0 unchanged\n\
         updated deploy-staging: 9 created, 0 updated, 0 deleted, 0 unchanged\n"
    );
    assert_eq!(stderr(&o), "");
    let o = run(dir.path(), &["build"]);
    assert_eq!(
        stdout(&o),
        "deploy, build, deploy-cpu, build-cpu and deploy-staging are up to date (15, 2, 9, 2 and 9 files)\n"
    );
    let o = run(dir.path(), &["validate"]);
    assert_eq!(
        stdout(&o),
        "2 jobs valid, as written and in variants cpu and staging\n"
    );
    let all = trees(dir.path());

    // Only the variants named are written.
    let only = scratch_example("variants");
    let o = run(
        only.path(),
        &["build", "--variant", "staging", "--variant", "cpu"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "updated deploy-cpu: 9 created, 0 updated, 0 deleted, 0 unchanged\n\
         updated build-cpu: 2 created, 0 updated, 0 deleted, 0 unchanged\n\
         updated deploy-staging: 9 created, 0 updated, 0 deleted, 0 unchanged\n"
    );
    assert!(!only.path().join("deploy").exists());
    assert!(!only.path().join("build").exists());
    for d in ["deploy-cpu", "build-cpu", "deploy-staging"] {
        assert!(
            read_tree(&only.path().join(d)) == all[d],
            "{d}: other bytes"
        );
    }
    let o = run(only.path(), &["validate", "--variant", "cpu"]);
    assert_eq!(stdout(&o), "2 jobs valid, as written and in variant cpu\n");

    // `-o` elsewhere builds the definitions alone.
    let o = run(dir.path(), &["build", "-o", "elsewhere"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "updated elsewhere: 15 created, 0 updated, 0 deleted, 0 unchanged\n"
    );
    assert!(read_tree(&dir.path().join("elsewhere")) == all["deploy"]);
    // And never into a variant's directory.
    let o = run(dir.path(), &["build", "-o", "deploy-cpu/x"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).starts_with("error: refusing to use `deploy-cpu/x` as the output directory: it is, contains or lies in `deploy-cpu`, the output directory of variant `cpu`\n"),
        "{}",
        stderr(&o)
    );
}

/// `build --check` fails on a stale variant alone, naming its files; `diff`
/// says in which output directory the run starts again.
#[test]
fn check_and_diff_cover_every_variant() {
    let dir = scratch_example("variants");
    assert!(run(dir.path(), &["build"]).status.success());
    edit_project(dir.path(), "epochs: 1,", "epochs: 2,");
    let o = run(dir.path(), &["build", "--check"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stdout(&o),
        "deploy is up to date (15 files)\n\
         build is up to date (2 files)\n\
         deploy-cpu is up to date (9 files)\n\
         build-cpu is up to date (2 files)\n\
         deploy-staging is stale: 0 created, 3 updated, 0 deleted, 6 unchanged\n\
         ~ deploy-staging/ml-staging/mnist/configmap-mnist-cluster-spec.yaml\n\
         ~ deploy-staging/ml-staging/mnist/networkpolicy-mnist.yaml\n\
         ~ deploy-staging/ml-staging/mnist/tfjob-mnist.yaml\n\
         run `trainc build` and commit the result\n"
    );
    // The other variants are current.
    let o = run(dir.path(), &["build", "--check", "--variant", "cpu"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        stdout(&o),
        "deploy-cpu and build-cpu are up to date (9 and 2 files)\n"
    );
    let o = run(dir.path(), &["diff", "--stat"]);
    assert_eq!(o.status.code(), Some(1));
    let text = stdout(&o);
    assert!(
        text.starts_with(
            "1 training run starts again:\n  re-run ml-staging/mnist in deploy-staging: mnist-"
        ),
        "{text}"
    );
    assert!(
        text.contains("spec.tfReplicaSpecs.Worker.template.spec.containers[0].args[0]: --epochs=1 → --epochs=2\n"),
        "{text}"
    );
    let o = run(dir.path(), &["diff", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("json");
    assert_eq!(v["runs"][0]["output"], "deploy-staging");
    assert_eq!(v["runs"][0]["job"], "ml-staging/mnist");
    // A change to the definitions reaches every output directory.
    let mnist = dir.path().join("jobs/mnist.yaml");
    let text = fs::read_to_string(&mnist).expect("read");
    fs::write(
        &mnist,
        text.replace("learning_rate: 0.001", "learning_rate: 0.01"),
    )
    .expect("write");
    let o = run(dir.path(), &["build"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for d in ["deploy", "deploy-cpu", "deploy-staging"] {
        assert!(out.contains(&format!("updated {d}: ")), "{out}");
    }
}

/// The output is a function of the declarations, not of their order: the
/// variants listed the other way round, and named on the command line the
/// other way round, give the same bytes.
#[test]
fn the_same_bytes_whatever_the_order() {
    let a = scratch_example("variants");
    assert!(run(a.path(), &["build"]).status.success());
    let b = scratch_example("variants");
    let path = b.path().join("trainc.yaml");
    let text = fs::read_to_string(&path).expect("read");
    let (head, rest) = text.split_once("  cpu:\n").expect("cpu");
    let (cpu, staging) = rest.split_once("  staging:\n").expect("staging");
    fs::write(&path, format!("{head}  staging:\n{staging}  cpu:\n{cpu}")).expect("write");
    let o = run(
        b.path(),
        &["build", "--variant", "staging", "--variant", "cpu"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(b.path(), &["build"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(trees(a.path()) == trees(b.path()), "other bytes");
    let check = |args: &[&str]| stdout(&run(b.path(), args));
    assert_eq!(
        check(&[
            "build",
            "--check",
            "--no-cache",
            "--variant",
            "cpu",
            "--variant",
            "staging"
        ]),
        check(&[
            "build",
            "--check",
            "--no-cache",
            "--variant",
            "staging",
            "--variant",
            "cpu"
        ]),
    );
}

fn set_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    let mut p = fs::metadata(path).expect("stat").permissions();
    p.set_mode(0o755);
    fs::set_permissions(path, p).expect("chmod");
}

/// `run --local --variant` runs the job as the variant makes it.
#[test]
fn a_variant_runs_locally() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    fs::create_dir_all(d.join("jobs")).expect("mkdir");
    for (name, body) in [
        ("chief.sh", "echo \"writing $1\"; echo done > \"$1\""),
        ("server.sh", "echo up; sleep 1001"),
    ] {
        fs::write(d.join(name), format!("#!/bin/sh\n{body}\n")).expect("write");
        set_executable(&d.join(name));
    }
    let shown = d.display();
    fs::write(
        d.join("jobs/scripts.yaml"),
        format!(
            "apiVersion: trainc.dev/v1alpha1\nkind: TrainingJob\nmetadata: {{name: scripts, namespace: ml}}\n\
             spec:\n  image: example.com/none:1\n  storage: [{{name: data, mountPath: /data, size: 1Gi}}]\n\
             \x20 roles:\n\
             \x20   chief: {{replicas: 1, command: [{shown}/chief.sh, /data/out]}}\n\
             \x20   ps: {{replicas: 1, command: [{shown}/server.sh]}}\n\
             \x20   worker: {{replicas: 2, command: [{shown}/server.sh]}}\n"
        ),
    )
    .expect("write");
    fs::write(
        d.join("trainc.yaml"),
        format!(
            "apiVersion: trainc.dev/v1alpha1\nkind: Project\nvariants:\n  small:\n    output: deploy-small\n    patches:\n\
             \x20     - patch: {{spec: {{roles: {{worker: {{replicas: 1}}, chief: {{command: [{shown}/chief.sh, /data/small]}}}}}}}}\n"
        ),
    )
    .expect("write");
    let work = d.join("w");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_trainc"))
        .current_dir(d)
        .args([
            "run",
            "--local",
            "jobs/scripts.yaml",
            "--variant",
            "small",
            "--workdir",
        ])
        .arg(&work)
        .output()
        .expect("trainc runs");
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(
        out.starts_with("running ml/scripts locally: 3 tasks (chief-0, ps-0, worker-0)"),
        "{out}"
    );
    assert_eq!(
        fs::read_to_string(work.join("volumes/data/small")).expect("written"),
        "done\n"
    );
    let o = run(
        d,
        &["run", "--local", "jobs/scripts.yaml", "--variant", "big"],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).starts_with("error: no variant named `big`\n"),
        "{}",
        stderr(&o)
    );
}

/// Outputs synced to one cluster may not build the same job: two GitOps
/// applications would fight over its objects. Refused with both places in
/// the project file, cached or not; a variant that names another cluster
/// (or moves its jobs to another namespace) is fine.
#[test]
fn outputs_of_one_cluster_build_each_job_once() {
    let dir = scratch_example("variants");
    let o = run(dir.path(), &["build"]);
    assert!(o.status.success(), "{}", stderr(&o));
    edit_project(dir.path(), "    cluster: cpu\n", "");
    let before = trees(dir.path());
    for args in [
        &["build"][..],
        &["build", "--no-cache"],
        &["build", "--check"],
        &["diff"],
    ] {
        let o = run(dir.path(), args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).starts_with(
                "error: job `ml/mnist` from jobs/mnist.yaml (and 1 more job) is built into the project's output and into variant `cpu`, which are synced to one cluster: two GitOps applications would fight over the objects named after it\n  --> trainc.yaml:"
            ),
            "{args:?}: {}",
            stderr(&o)
        );
        assert!(
            stderr(&o).contains("the project's output's directory"),
            "{}",
            stderr(&o)
        );
        assert!(stderr(&o).contains("`cluster: <name>`"), "{}", stderr(&o));
        assert_eq!(trees(dir.path()), before, "{args:?}: nothing written");
    }
    // The top-level `cluster` is shared by variants without their own.
    edit_project(
        dir.path(),
        "output: deploy\n",
        "output: deploy\ncluster: gpu\n",
    );
    let o = run(dir.path(), &["build"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    edit_project(
        dir.path(),
        "buildOutput: build-cpu\n",
        "buildOutput: build-cpu\n    cluster: cpu\n",
    );
    let o = run(dir.path(), &["build"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// A PersistentVolume is cluster-scoped: its name keeps namespace, job and
/// volume apart with dots, so namespace `ml-team`'s job `x` and namespace
/// `ml`'s job `team-x` write two volumes, not one.
#[test]
fn persistent_volume_names_are_unambiguous() {
    let dir = scratch_example("mnist");
    let def = dir.path().join("jobs/mnist.yaml");
    let text = fs::read_to_string(&def).expect("read");
    let mut names = Vec::new();
    for (ns, job) in [("ml-team", "x"), ("ml", "team-x")] {
        fs::write(
            &def,
            text.replace(
                "  name: mnist\n  namespace: ml\n",
                &format!("  name: {job}\n  namespace: {ns}\n"),
            ),
        )
        .expect("write");
        let o = run(dir.path(), &["build", "-o", "out"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let pv = fs::read_to_string(dir.path().join(format!(
            "out/{ns}/{job}/persistentvolume-{ns}-{job}-data.yaml"
        )))
        .expect("pv");
        let name = pv
            .lines()
            .find_map(|l| l.strip_prefix("  name: "))
            .expect("name")
            .to_owned();
        names.push(name);
    }
    assert_eq!(names, ["ml-team.x.data", "ml.team-x.data"]);
}
