//! The project found from any directory inside it (issue 11 item 10).

mod common;

use std::fs;
use std::path::Path;

use common::{read_tree, run, scratch_example, stderr, stdout};

/// A scratch copy of an example inside a repository of its own, so the
/// search for `trainc.yaml` stops at it whatever lies above.
fn repository(example: &str) -> tempfile::TempDir {
    let dir = scratch_example(example);
    fs::create_dir(dir.path().join(".git")).expect("mkdir .git");
    dir
}

fn trees(root: &Path) -> Vec<std::collections::BTreeMap<String, Vec<u8>>> {
    ["deploy", "build"]
        .iter()
        .map(|d| read_tree(&root.join(d)))
        .collect()
}

/// The same bytes wherever in the project trainc runs; status lines name
/// the directories from where it runs.
#[test]
fn builds_the_same_bytes_from_any_subdirectory() {
    let dir = repository("mnist");
    let o = run(dir.path(), &["build"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let at_root = trees(dir.path());
    for sub in ["jobs", "train", "deploy-nested/deeper"] {
        fs::remove_dir_all(dir.path().join("deploy")).expect("rm deploy");
        fs::remove_dir_all(dir.path().join("build")).expect("rm build");
        let cwd = dir.path().join(sub);
        fs::create_dir_all(&cwd).expect("mkdir");
        let o = run(&cwd, &["build"]);
        assert!(o.status.success(), "{sub}: {}", stderr(&o));
        let up = "../".repeat(sub.split('/').count());
        assert_eq!(
            stdout(&o),
            format!(
                "updated {up}deploy: 15 created, 0 updated, 0 deleted, 0 unchanged\n\
                 updated {up}build: 3 created, 0 updated, 0 deleted, 0 unchanged\n"
            ),
            "{sub}"
        );
        assert!(at_root == trees(dir.path()), "{sub}: other bytes");
        let o = run(&cwd, &["build", "--check"]);
        assert_eq!(
            stdout(&o),
            format!("{up}deploy and {up}build are up to date (15 and 3 files)\n")
        );
        let o = run(&cwd, &["diff"]);
        assert_eq!(stdout(&o), "no changes (18 unchanged)\n");
        assert_eq!(o.status.code(), Some(0));
    }
}

/// Paths on the command line are relative to the working directory, and
/// so are the file names in messages.
#[test]
fn paths_and_messages_are_relative_to_the_working_directory() {
    let dir = repository("mnist");
    let jobs = dir.path().join("jobs");
    let o = run(&jobs, &["validate", "mnist.yaml"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "1 job valid\n");
    let text = fs::read_to_string(jobs.join("mnist.yaml")).expect("read");
    fs::write(
        jobs.join("mnist.yaml"),
        text.replace("ps:     {replicas: 2", "ps:     {replicas: -1"),
    )
    .expect("write");
    let o = run(&dir.path().join("train"), &["validate"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("  --> ../jobs/mnist.yaml:24:24\n"),
        "{}",
        stderr(&o)
    );
    let o = run(&dir.path().join("train"), &["validate", "--format", "json"]);
    assert!(
        stdout(&o).contains("\"file\": \"../jobs/mnist.yaml\""),
        "{}",
        stdout(&o)
    );
    // Defaults of the project found apply: the namespace comes from it.
    fs::write(
        jobs.join("mnist.yaml"),
        text.replace("  namespace: ml\n", ""),
    )
    .expect("write");
    let o = run(&jobs, &["build"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(dir.path().join("deploy/ml/mnist").is_dir());
}

/// `trainc build resnet.yaml` inside `jobs/` finds the project, so it
/// would build into the project's output; the partial-sources guard says
/// which project, and nothing is written.
#[test]
fn a_file_built_in_a_subdirectory_is_refused_naming_the_project() {
    let dir = repository("mnist-cpu");
    let jobs = dir.path().join("jobs");
    let text = fs::read_to_string(jobs.join("mnist-cpu.yaml")).expect("read");
    fs::write(
        jobs.join("resnet.yaml"),
        text.replace("name: mnist-cpu", "name: resnet"),
    )
    .expect("write");
    let o = run(&jobs, &["build", "resnet.yaml"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o),
        "error: the paths given are not the sources of the project ../trainc.yaml (leaves out 1 definition file of the project's sources); building them into ../deploy would prune the other jobs\n \
         |\n \
         = help: run without paths to build the whole project, or pass `-o DIR` to build only these paths into another directory; `trainc validate PATH…` checks a subset\n\
         \n\
         error: aborting due to 1 previous error\n"
    );
    assert!(!jobs.join("deploy").exists());
    assert!(!dir.path().join("deploy").exists());
    // Both files are the project's sources.
    let o = run(&jobs, &["build", "mnist-cpu.yaml", "resnet.yaml"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(dir.path().join("deploy/ml/resnet").is_dir());
    assert!(!jobs.join("deploy").exists());
}

/// The search stops at the top of the repository: a `trainc.yaml` above
/// it (planted in a shared directory, say) is never read. Without a
/// project file the working directory is the root, as before.
#[test]
fn never_reads_a_project_file_above_the_repository() {
    let top = tempfile::tempdir().expect("tempdir");
    fs::write(
        top.path().join("trainc.yaml"),
        "apiVersion: trainc.dev/v1alpha1\nkind: Project\nsources: [repo]\noutput: planted\n",
    )
    .expect("write");
    for git_is_a_file in [false, true] {
        let repo = top.path().join("repo");
        let _ = fs::remove_dir_all(&repo);
        let work = repo.join("work");
        common::copy_tree(
            &common::example("mnist-cpu").join("jobs"),
            &work.join("jobs"),
        );
        if git_is_a_file {
            // A worktree's `.git` is a file.
            fs::write(repo.join(".git"), "gitdir: /elsewhere\n").expect("write");
        } else {
            fs::create_dir(repo.join(".git")).expect("mkdir");
        }
        let o = run(&work, &["build"]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(
            stdout(&o),
            "updated deploy: 12 created, 0 updated, 0 deleted, 0 unchanged\n\
             updated build: 2 created, 0 updated, 0 deleted, 0 unchanged\n"
        );
        assert!(work.join("deploy/default/mnist-cpu").is_dir());
        assert!(!top.path().join("planted").exists());
        // In `jobs/` itself there is no `jobs/` to read.
        let o = run(&work.join("jobs"), &["validate"]);
        assert_eq!(o.status.code(), Some(2));
        assert!(stderr(&o).contains("no project here"), "{}", stderr(&o));
    }
    // A `trainc.yaml` at the top of the repository is found.
    let repo = top.path().join("repo");
    fs::write(
        repo.join("trainc.yaml"),
        "apiVersion: trainc.dev/v1alpha1\nkind: Project\nsources: [work/jobs]\noutput: out\n",
    )
    .expect("write");
    let o = run(&repo.join("work/jobs"), &["build"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(repo.join("out/default/mnist-cpu").is_dir());
}

/// The output of a build that went where it should not have (into
/// `jobs/deploy/`, by a build run inside `jobs/` without a project file)
/// is never read as definitions: it is refused by name, once per output
/// directory, and nothing is written.
#[test]
fn generated_manifests_among_the_definitions_are_refused() {
    let dir = scratch_example("mnist-cpu");
    let jobs = dir.path().join("jobs");
    fs::remove_file(dir.path().join("trainc.yaml")).expect("rm");
    fs::create_dir(dir.path().join(".git")).expect("mkdir");
    let o = run(&jobs, &["build", "mnist-cpu.yaml"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(jobs.join("deploy/kustomization.yaml").is_file());
    let o = run(dir.path(), &["build"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o),
        "error: jobs/deploy is the output of a trainc build (12 generated files), not definitions\n \
         --> jobs/deploy/kustomization.yaml:1:1\n  \
         |\n\
         1 | # Code generated by trainc. DO NOT EDIT.\n  \
         | ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n  \
         |\n  \
         = help: delete the directory (a build run where it should not have been?), or keep it out of the definitions; trainc never reads its own output as definitions\n\
         \n\
         error: aborting due to 1 previous error\n"
    );
    assert!(!dir.path().join("deploy").exists());
}

/// The `resources` fixture with its quota directory moved out of the
/// output directory, beside the project file, where a directory may lie.
fn resources_outside() -> tempfile::TempDir {
    let dir = scratch_example("resources");
    fs::rename(
        dir.path().join("cluster/platform"),
        dir.path().join("platform"),
    )
    .expect("move");
    let project = dir.path().join("trainc.yaml");
    let text = fs::read_to_string(&project).expect("read");
    fs::write(
        &project,
        text.replace("  - cluster/platform\n", "  - platform\n"),
    )
    .expect("write");
    dir
}

/// Kustomize renders the objects listed in `resources` with trainc's, as
/// Argo CD and Flux will: a file in the output directory and a directory
/// elsewhere in the project.
#[test]
fn kustomize_renders_the_listed_resources() {
    let Some(kubectl) = common::tool("TRAINC_KUBECTL", "kubectl") else {
        return;
    };
    let dir = resources_outside();
    let o = run(dir.path(), &["build"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stderr(&o), "", "nothing unlisted");
    let root = fs::read_to_string(dir.path().join("cluster/kustomization.yaml")).expect("read");
    assert!(
        root.ends_with("resources:\n- ml/train\n- ../platform\n- namespace.yaml\n"),
        "{root}"
    );
    let o = std::process::Command::new(kubectl)
        .arg("kustomize")
        .arg(dir.path().join("cluster"))
        .output()
        .expect("kubectl runs");
    assert!(o.status.success(), "{}", stderr(&o));
    let rendered = stdout(&o);
    for kind in [
        "Namespace",
        "ResourceQuota",
        "Job",
        "Service",
        "NetworkPolicy",
    ] {
        assert!(
            rendered.contains(&format!("\nkind: {kind}\n")),
            "{kind} missing:\n{rendered}"
        );
    }
}

/// YAML in the output directory that nothing lists is named in a warning,
/// on stderr (and in the JSON of `--format json`); the build goes on.
#[test]
fn unlisted_yaml_in_the_output_directory_is_warned_about() {
    let dir = resources_outside();
    let out = dir.path().join("cluster");
    fs::create_dir_all(out.join("team")).expect("mkdir");
    fs::write(out.join("team/role.yaml"), "kind: Role\n").expect("write");
    fs::write(out.join("notes.yml"), "x: 1\n").expect("write");
    fs::write(out.join(".hidden.yaml"), "x: 1\n").expect("write");
    fs::write(out.join("README.md"), "mine\n").expect("write");
    let warning = "warning: cluster holds YAML files that trainc did not write and that its kustomization.yaml does not list: cluster/notes.yml, cluster/team/role.yaml; Argo CD and Flux will not sync them\n \
                   |\n \
                   = help: list each file, or a directory holding it with its own kustomization.yaml, under `resources` in trainc.yaml; or move it out of the output directory\n\n";
    let o = run(dir.path(), &["build"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stderr(&o), warning);
    let o = run(dir.path(), &["diff"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(stderr(&o), warning);
    let o = run(dir.path(), &["validate"]);
    assert_eq!(stderr(&o), warning);
    let o = run(dir.path(), &["build", "--no-cache", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("json");
    assert_eq!(v["findings"][0]["severity"], "warning");
    let o = run(dir.path(), &["diff", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("json");
    assert_eq!(v["findings"][0]["severity"], "warning", "{v}");
    // Listed, or in a listed directory: no warning.
    fs::write(
        out.join("team/kustomization.yaml"),
        "resources: [role.yaml]\n",
    )
    .expect("write");
    let project = dir.path().join("trainc.yaml");
    let text = fs::read_to_string(&project).expect("read");
    fs::write(
        &project,
        text.replace(
            "  - platform\n",
            "  - platform\n  - cluster/team\n  - cluster/notes.yml\n",
        ),
    )
    .expect("write");
    let o = run(dir.path(), &["build"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stderr(&o), "");
    let root = fs::read_to_string(out.join("kustomization.yaml")).expect("read");
    assert!(
        root.ends_with("- ml/train\n- ../platform\n- namespace.yaml\n- notes.yml\n- team\n"),
        "{root}"
    );
}

/// A resource that goes away fails the next build, cache or not; `-o`
/// elsewhere lists none.
#[test]
fn resources_are_checked_on_every_build_and_only_for_the_projects_output() {
    let dir = resources_outside();
    let o = run(dir.path(), &["build"]);
    assert!(o.status.success(), "{}", stderr(&o));
    fs::remove_file(dir.path().join("platform/kustomization.yaml")).expect("rm");
    let o = run(dir.path(), &["build", "-v"]);
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    assert!(
        stderr(&o).contains(
            "error: resources[0]: `platform` is a directory without a kustomization.yaml\n"
        ),
        "{}",
        stderr(&o)
    );
    let o = run(dir.path(), &["build", "-o", "elsewhere"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let root = fs::read_to_string(dir.path().join("elsewhere/kustomization.yaml")).expect("read");
    assert!(root.ends_with("resources:\n- ml/train\n"), "{root}");
}

/// Kustomize cleans a `resources` entry lexically (`l/../..` climbs from
/// where `l` is written, not from where it links to) before the file system
/// resolves it: trainc checks that path, the one it writes, so a committed
/// symlink cannot smuggle another team's directory into the output.
#[test]
fn resources_are_checked_as_kustomize_reads_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let project = dir.path().join("p");
    common::copy_tree(resources_outside().path(), &project);
    // Another team's directory beside the project.
    fs::create_dir_all(dir.path().join("platform")).expect("mkdir");
    fs::write(
        dir.path().join("platform/kustomization.yaml"),
        "resources: [secret.yaml]\n",
    )
    .expect("write");
    fs::create_dir_all(project.join("x/y")).expect("mkdir");
    std::os::unix::fs::symlink("x/y", project.join("l")).expect("symlink");
    let file = project.join("trainc.yaml");
    let text = fs::read_to_string(&file).expect("read");
    // Through the link it resolves to the project's own `platform`; as
    // written, to the other team's.
    fs::write(
        &file,
        text.replace("  - platform\n", "  - l/../../platform\n"),
    )
    .expect("write");
    let before = common::read_tree(dir.path());
    let o = run(&project, &["build"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o)
            .contains("error: resources[0]: `l/../../platform` lies outside the project root\n"),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("Kustomize reads `..` lexically"));
    assert_eq!(common::read_tree(dir.path()), before, "nothing written");
    // As written it is the project's own directory: listed as written.
    fs::write(&file, text.replace("  - platform\n", "  - l/../platform\n")).expect("write");
    let o = run(&project, &["build"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let root = fs::read_to_string(project.join("cluster/kustomization.yaml")).expect("read");
    assert!(root.contains("\n- ../platform\n"), "{root}");
}

/// A listed directory is trusted as Kustomize runs it: a kustomization
/// that includes trainc's output, names a remote base, or generates or
/// patches objects is warned about, located at its `resources` entry, on
/// every build (cached or not); one that lists files of its own is not.
#[test]
fn listed_kustomizations_that_do_more_than_list_are_warned_about() {
    let dir = resources_outside();
    let kustomization = dir.path().join("platform/kustomization.yaml");
    let o = run(dir.path(), &["build"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stderr(&o), "", "a plain list of files");
    fs::create_dir_all(dir.path().join("platform/team")).expect("mkdir");
    fs::write(
        dir.path().join("platform/team/kustomization.yaml"),
        "resources:\n- ../../cluster/ml\n- github.com/org/repo//base?ref=v1\n",
    )
    .expect("write");
    fs::write(
        &kustomization,
        "resources: [quota.yaml, team]\npatches:\n- path: privileged.yaml\nnamespace: kube-system\n",
    )
    .expect("write");
    let o = run(dir.path(), &["build"]);
    assert!(o.status.success(), "warnings only: {}", stderr(&o));
    let err = stderr(&o);
    for why in [
        "warning: resources[0]: `platform/kustomization.yaml` uses `patches`, which makes or changes objects in ways its files do not show\n  --> trainc.yaml:10:5",
        "warning: resources[0]: `platform/team/kustomization.yaml` includes `../../cluster/ml`, which holds trainc's output for namespace `ml` (`cluster/ml`): it can rename, move or patch trainc's objects\n",
        "warning: resources[0]: `platform/team/kustomization.yaml` names the remote base `github.com/org/repo//base?ref=v1`, which Argo CD and Flux fetch when they sync; nothing in the repository shows what it holds\n",
    ] {
        assert!(err.contains(why), "{why}\n---\n{err}");
    }
    assert!(
        err.contains("`--deny-warnings` makes this an error"),
        "{err}"
    );
    let before = common::read_tree(dir.path());
    let o = run(dir.path(), &["build", "--deny-warnings"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(common::read_tree(dir.path()), before, "nothing written");
    // The cache does not hide them, and an edit of a nested kustomization
    // is seen.
    let o = run(dir.path(), &["build"]);
    assert_eq!(stderr(&o).matches("warning: ").count(), 3, "{}", stderr(&o));
    fs::write(
        dir.path().join("platform/team/kustomization.yaml"),
        "resources: []\n",
    )
    .expect("write");
    let o = run(dir.path(), &["build"]);
    assert_eq!(stderr(&o).matches("warning: ").count(), 1, "{}", stderr(&o));
}

/// `trainc build` where there is nothing at all: no project file here or
/// above, no `jobs/`, no paths. The way to start is said.
#[test]
fn an_empty_directory_says_to_start_a_project() {
    let dir = tempfile::tempdir().expect("tempdir");
    for cmd in [&["build"][..], &["validate"], &["diff"]] {
        let o = common::run(dir.path(), cmd);
        assert_eq!(o.status.code(), Some(2), "{cmd:?}");
        let err = common::stderr(&o);
        assert!(
            err.contains("error: no project here: no trainc.yaml in this directory or above, and no `jobs` directory"),
            "{err}"
        );
        assert!(err.contains("help: run `trainc init`"), "{err}");
    }
}
