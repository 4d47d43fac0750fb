//! Golden tests of compiled output. Snapshots live in tests/snapshots and are
//! reviewed like code: `cargo insta review` after an intended change.

mod common;

use std::collections::BTreeMap;

fn render(tree: &BTreeMap<String, Vec<u8>>) -> String {
    let mut s = String::new();
    for (path, bytes) in tree {
        let text = String::from_utf8_lossy(bytes);
        if path.ends_with(".yaml") {
            no_folded_scalars(path, &text);
        }
        s.push_str(&format!("=== {path}\n"));
        s.push_str(&text);
    }
    s
}

/// Long strings are one line and multi-line ones literal blocks, never
/// folded (`>`, `>-`): a host more in `--worker_hosts=…` must be a
/// one-line change in review, not a rewrapped paragraph (docs/output.md).
fn no_folded_scalars(path: &str, text: &str) {
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_end();
        let indicator = line
            .rsplit_once(": ")
            .map(|(_, v)| v)
            .or_else(|| line.trim_start().strip_prefix("- "));
        let folded = indicator
            .and_then(|v| v.strip_prefix('>'))
            .is_some_and(|rest| {
                rest.chars()
                    .all(|c| c == '-' || c == '+' || c.is_ascii_digit())
            });
        assert!(!folded, "{path}:{}: a folded scalar: {line}", i + 1);
    }
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

/// TF1 parameter servers and workers on the example's own target, JobSet:
/// the run ends when every worker has, and the parameter servers stop.
#[test]
fn mnist_cpu() {
    let (_dir, tree) = common::build_example("mnist-cpu");
    insta::assert_snapshot!(render(&tree));
}

/// TF1 flags on plain Jobs, each task's index written out.
#[test]
fn mnist_cpu_kubernetes() {
    let (_dir, tree) = common::build_example_for("mnist-cpu", "kubernetes");
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

/// The project's own objects listed in the root kustomization, and kept.
#[test]
fn resources() {
    let (_dir, tree) = common::build_example("resources");
    insta::assert_snapshot!(render(&tree));
}

#[test]
fn resources_jobset() {
    let (_dir, tree) = common::build_example_for("resources", "jobset");
    insta::assert_snapshot!(render(&tree));
}

#[test]
fn resources_tfjob() {
    let (_dir, tree) = common::build_example_for("resources", "tfjob");
    insta::assert_snapshot!(render(&tree));
}

/// One set of definitions, three outputs: the project's own (plain Jobs,
/// GPU workers) and two variants made by merge patches in trainc.yaml.
#[test]
fn variants() {
    let (dir, tree) = common::build_example("variants");
    insta::assert_snapshot!(render(&tree));
    let build = common::read_tree(&dir.path().join("build"));
    insta::assert_snapshot!("variants_build", render(&build));
}

/// `cpu`: no GPUs, so the CPU base image and build specs of its own; JobSets.
#[test]
fn variants_cpu() {
    let (dir, _) = common::build_example("variants");
    insta::assert_snapshot!(render(&common::read_tree(&dir.path().join("deploy-cpu"))));
    let build = common::read_tree(&dir.path().join("build-cpu"));
    insta::assert_snapshot!("variants_cpu_build", render(&build));
}

/// `staging`: one job patched alone (namespace, queue, hyperparameters),
/// every job one worker; TFJobs, from the project's own images.
#[test]
fn variants_staging() {
    let (dir, _) = common::build_example("variants");
    assert!(!dir.path().join("build-staging").exists());
    insta::assert_snapshot!(render(&common::read_tree(
        &dir.path().join("deploy-staging")
    )));
}

#[test]
fn kitchen_sink_tfjob() {
    let (_dir, tree) = common::build_example_for("kitchen-sink", "tfjob");
    insta::assert_snapshot!(render(&tree));
}

/// The collective strategy (workers only): the example's second project.
#[test]
fn mnist_collective() {
    let (_dir, deploy) =
        common::build_variant("mnist", common::Variant::Project("trainc.collective.yaml"));
    insta::assert_snapshot!(render(&common::read_tree(&deploy)));
}

/// JobSet: without a chief, the run succeeds when every worker has.
#[test]
fn mnist_collective_jobset() {
    let (_dir, deploy) = common::build_variant(
        "mnist",
        common::Variant::ProjectFor("trainc.collective.yaml", "jobset"),
    );
    insta::assert_snapshot!(render(&common::read_tree(&deploy)));
}

/// TFJob: no `successPolicy`, so the operator's default ends the run with
/// worker 0.
#[test]
fn mnist_collective_tfjob() {
    let (_dir, deploy) = common::build_variant(
        "mnist",
        common::Variant::ProjectFor("trainc.collective.yaml", "tfjob"),
    );
    insta::assert_snapshot!(render(&common::read_tree(&deploy)));
}

/// PyTorch DDP on plain Kubernetes: one Indexed Job of nodes, each running
/// `torchrun` with static rendezvous at node 0.
#[test]
fn pytorch() {
    let (_dir, tree) = common::build_example("pytorch");
    insta::assert_snapshot!(render(&tree));
}

/// JobSet: one replicated Job whose Indexed Job runs every node; restarts
/// every node together.
#[test]
fn pytorch_jobset() {
    let (_dir, deploy) =
        common::build_variant("pytorch", common::Variant::Project("trainc.jobset.yaml"));
    insta::assert_snapshot!(render(&common::read_tree(&deploy)));
}

/// PyTorchJob: Master and Worker replicas; the operator passes the
/// rendezvous to `torchrun`.
#[test]
fn pytorch_pytorchjob() {
    let (_dir, deploy) = common::build_variant(
        "pytorch",
        common::Variant::Project("trainc.pytorchjob.yaml"),
    );
    insta::assert_snapshot!(render(&common::read_tree(&deploy)));
}

/// TrainJob (Kubeflow Trainer v2): the program in the TrainJob's
/// `trainer`, every pod setting and the whole-run restart in the run's own
/// TrainingRuntime; `torchrun` reads the launch from the torch plugin.
#[test]
fn pytorch_trainjob() {
    let (_dir, deploy) =
        common::build_variant("pytorch", common::Variant::Project("trainc.trainjob.yaml"));
    insta::assert_snapshot!(render(&common::read_tree(&deploy)));
}

/// GPU nodes: a process per GPU, a module as the program, hyperparameters
/// as flags and variables, spread over nodes.
#[test]
fn pytorch_gpu() {
    let (_dir, tree) = common::build_example("pytorch-gpu");
    insta::assert_snapshot!(render(&tree));
}

#[test]
fn pytorch_gpu_pytorchjob() {
    let (_dir, tree) = common::build_example_for("pytorch-gpu", "pytorchjob");
    insta::assert_snapshot!(render(&tree));
}

/// Elastic PyTorch (c10d rendezvous at node 0's host name, nodes restarting
/// alone `OnFailure` up to `backoffLimit` times): one Indexed Job that
/// succeeds with node 0, and the rendezvous Service selecting node 0.
#[test]
fn pytorch_elastic() {
    let (_dir, tree) = common::build_example("pytorch-elastic");
    insta::assert_snapshot!(render(&tree));
}

/// The same Job inside a JobSet that does not restart the run itself.
#[test]
fn pytorch_elastic_jobset() {
    let (_dir, tree) = common::build_example_for("pytorch-elastic", "jobset");
    insta::assert_snapshot!(render(&tree));
}

/// A PyTorchJob with the `elasticPolicy` of the same rendezvous.
#[test]
fn pytorch_elastic_pytorchjob() {
    let (_dir, tree) = common::build_example_for("pytorch-elastic", "pytorchjob");
    insta::assert_snapshot!(render(&tree));
}

/// Every kind of volume: claims that select a volume, NFS with mount
/// options, CSI volumes, emptyDir, ConfigMap and Secret volumes, and
/// volumes that only some roles mount.
#[test]
fn storage() {
    let (_dir, tree) = common::build_example("storage");
    insta::assert_snapshot!(render(&tree));
}

#[test]
fn storage_jobset() {
    let (_dir, tree) = common::build_example_for("storage", "jobset");
    insta::assert_snapshot!(render(&tree));
}

#[test]
fn storage_tfjob() {
    let (_dir, tree) = common::build_example_for("storage", "tfjob");
    insta::assert_snapshot!(render(&tree));
}

/// Pod settings (issue 11, items 4–6): environment from Secrets,
/// ConfigMaps and the pod, envFrom, pull secrets, per-role metadata, pull
/// policy and priority, spread and pack, the GPU toleration, TensorBoard's
/// Service annotations and flags.
#[test]
fn pod_settings() {
    let (_dir, tree) = common::build_example("pod-settings");
    insta::assert_snapshot!(render(&tree));
}

#[test]
fn pod_settings_jobset() {
    let (_dir, tree) = common::build_example_for("pod-settings", "jobset");
    insta::assert_snapshot!(render(&tree));
}

#[test]
fn pod_settings_tfjob() {
    let (_dir, tree) = common::build_example_for("pod-settings", "tfjob");
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
