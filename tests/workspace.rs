//! Several projects in one repository: `--workspace` runs a command on
//! every one, the rules across them refuse two outputs for one cluster
//! writing the same object, a build says so before it prunes a job another
//! project now builds; and within a project, variants that build some jobs,
//! or a project of variants only.

mod common;

use std::fs;
use std::path::Path;

use common::{copy_tree, edit, example, git, run, stderr, stdout};
use serde_json::Value;

/// A repository with the PyTorch example in `teams/a` and the MNIST one in
/// `teams/b`, each a project of its own, without output.
fn repository() -> tempfile::TempDir {
    let repo = tempfile::tempdir().expect("tempdir");
    git(repo.path(), &["init", "--quiet", "--initial-branch=main"]);
    for (name, dir) in [("pytorch", "teams/a"), ("mnist", "teams/b")] {
        add_project(repo.path(), name, dir);
    }
    repo
}

/// Copies an example's project file, definitions and programs to `dir`.
fn add_project(repo: &Path, name: &str, dir: &str) {
    let to = repo.join(dir);
    fs::create_dir_all(&to).expect("mkdir");
    for entry in fs::read_dir(example(name)).expect("example") {
        let entry = entry.expect("entry");
        let n = entry.file_name().to_string_lossy().into_owned();
        if n.starts_with("deploy")
            || n.starts_with("build")
            || n.starts_with("trainc.") && n != "trainc.yaml"
        {
            continue;
        }
        if entry.file_type().expect("type").is_dir() {
            copy_tree(&entry.path(), &to.join(&n));
        } else {
            fs::copy(entry.path(), to.join(&n)).expect("copy");
        }
    }
}

#[test]
fn one_command_checks_and_builds_every_project() {
    let repo = repository();
    let top = repo.path();
    // Without `--workspace`, the top has no project of its own.
    let o = run(top, &["build", "--check"]);
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));

    let o = run(top, &["validate", "--workspace"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "teams/a/trainc.yaml:\n1 job valid\nteams/b/trainc.yaml:\n1 job valid\n"
    );
    let o = run(top, &["build", "--workspace"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(top.join("teams/a/deploy/kustomization.yaml").is_file());
    assert!(top.join("teams/b/deploy/kustomization.yaml").is_file());
    let o = run(top, &["build", "--check", "--workspace"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));

    // Stale output in one sub-project fails the check from the top.
    edit(
        &top.join("teams/b/jobs/mnist.yaml"),
        "replicas: 2",
        "replicas: 3",
    );
    let o = run(top, &["build", "--check", "--workspace"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains("teams/a/deploy and teams/a/build are up to date"),
        "{text}"
    );
    assert!(text.contains("teams/b/deploy is stale"), "{text}");

    let o = run(
        top,
        &["build", "--check", "--workspace", "--format", "json"],
    );
    assert_eq!(o.status.code(), Some(1));
    let doc: Value = serde_json::from_slice(&o.stdout).expect("one JSON object");
    let projects = doc["projects"].as_array().expect("projects");
    assert_eq!(projects.len(), 2);
    assert_eq!(projects[0]["project"], "teams/a/trainc.yaml");
    assert_eq!(projects[0]["current"], true);
    assert_eq!(projects[1]["current"], false);

    let o = run(top, &["diff", "--workspace", "--stat"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains("re-run ml/mnist"), "{}", stdout(&o));

    // From a sub-directory too: the repository is the workspace.
    let o = run(&top.join("teams/a"), &["build", "--check", "--workspace"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("teams/b/deploy is stale"),
        "{}",
        stdout(&o)
    );

    // `--workspace` takes no paths, project or output of its own.
    let o = run(top, &["build", "--workspace", "-o", "out"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("takes no `-o`"), "{}", stderr(&o));
    let o = run(top, &["build", "--workspace", "teams/a/jobs"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn a_workspace_file_lists_the_projects() {
    let repo = repository();
    let top = repo.path();
    let file = top.join("trainc-workspace.yaml");
    fs::write(
        &file,
        "apiVersion: trainc.dev/v1alpha1\nkind: Workspace\nprojects: [teams/a]\n",
    )
    .expect("write");
    let o = run(top, &["validate", "--workspace"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "teams/a/trainc.yaml:\n1 job valid\n");

    fs::write(
        &file,
        "apiVersion: trainc.dev/v1alpha1\nkind: Workspace\nprojects: [teams/a, teams/c, ../elsewhere]\n",
    )
    .expect("write");
    let o = run(top, &["validate", "--workspace"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains("projects[1]: project `teams/c` cannot be used: no project file at teams/c"),
        "{err}"
    );
    assert!(err.contains("trainc-workspace.yaml:3:"), "{err}");
    assert!(
        err.contains("project `../elsewhere` cannot be used: it lies outside the repository"),
        "{err}"
    );
    fs::write(
        &file,
        "apiVersion: trainc.dev/v1alpha1\nkind: Workspace\nproject: [a]\n",
    )
    .expect("write");
    let o = run(top, &["validate", "--workspace"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("unknown field `project`"),
        "{}",
        stderr(&o)
    );
}

/// Two projects whose outputs are synced to one cluster may not write one
/// PersistentVolume: refused with both places, nothing written. Given
/// different clusters, they may.
#[test]
fn one_object_written_by_two_projects_for_one_cluster_is_refused() {
    let repo = repository();
    let top = repo.path();
    add_project(top, "mnist", "teams/c");
    let o = run(top, &["build", "--workspace"]);
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    let err = stderr(&o);
    assert!(
        err.contains(
            "error: PersistentVolume `ml.mnist.data` is written by teams/b/deploy (project teams/b/trainc.yaml) and by teams/c/deploy (project teams/c/trainc.yaml), which are synced to one cluster"
        ),
        "{err}"
    );
    assert!(err.contains("--> teams/c/jobs/mnist.yaml:"), "{err}");
    assert!(err.contains("--> teams/b/jobs/mnist.yaml:"), "{err}");
    for p in ["a", "b", "c"] {
        assert!(
            !top.join(format!("teams/{p}/deploy")).exists(),
            "nothing written"
        );
    }

    fs::write(
        top.join("teams/c/trainc.yaml"),
        fs::read_to_string(top.join("teams/c/trainc.yaml")).expect("read") + "cluster: other\n",
    )
    .expect("write");
    let o = run(top, &["build", "--workspace"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// A job moved from one project to another: the build of the first says,
/// before it prunes the job's output, which project builds it now; with
/// `--deny-warnings` it writes nothing.
#[test]
fn a_build_says_so_before_it_prunes_a_job_another_project_now_builds() {
    let repo = repository();
    let top = repo.path();
    let a = top.join("teams/a");
    let d = top.join("teams/d");
    fs::create_dir_all(d.join("jobs")).expect("mkdir");
    copy_tree(&a.join("train"), &d.join("train"));
    fs::copy(a.join("trainc.yaml"), d.join("trainc.yaml")).expect("copy");
    let digits = fs::read_to_string(a.join("jobs/digits.yaml")).expect("read");
    fs::write(
        a.join("jobs/other.yaml"),
        digits.replace("name: digits\n", "name: other\n"),
    )
    .expect("write");
    assert!(run(&a, &["build"]).status.success());
    fs::rename(a.join("jobs/digits.yaml"), d.join("jobs/digits.yaml")).expect("move");

    let o = run(&a, &["build", "--deny-warnings"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(a.join("deploy/ml/digits").is_dir(), "nothing pruned");
    let o = run(&a, &["build"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("warning: deploy/ml/digits is pruned, and job `ml/digits` is now built into ../d/deploy (project ../d/trainc.yaml)"),
        "{err}"
    );
    assert!(err.contains("--> ../d/jobs/digits.yaml:"), "{err}");
    assert!(!a.join("deploy/ml/digits").exists());
}

/// A variant builds the jobs it names; a project of variants only builds
/// no output of the definitions as written.
#[test]
fn variants_build_the_jobs_they_name_and_may_be_all_there_is() {
    let dir = common::scratch_example("mnist-cpu");
    let p = dir.path();
    let def = fs::read_to_string(p.join("jobs/mnist-cpu.yaml")).expect("read");
    fs::write(
        p.join("jobs/second.yaml"),
        def.replace("name: mnist-cpu", "name: second"),
    )
    .expect("write");
    let project = p.join("trainc.yaml");
    let base = fs::read_to_string(&project).expect("read");
    let with = |extra: &str| fs::write(&project, format!("{base}{extra}")).expect("write");
    with(
        "ownOutput: false\nvariants:\n  staging:\n    output: deploy-staging\n    buildOutput: build-staging\n    cluster: staging\n  prod:\n    output: deploy-prod\n    buildOutput: build-prod\n    cluster: prod\n    jobs: [second]\n",
    );
    let o = run(p, &["build"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        !p.join("deploy").exists(),
        "no output of the definitions as written"
    );
    let jobs = |dir: &str| -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(p.join(dir).join("ml"))
            .expect("jobs")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    assert_eq!(jobs("deploy-staging"), ["mnist-cpu", "second"]);
    assert_eq!(jobs("deploy-prod"), ["second"]);
    let o = run(p, &["build", "--check"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));

    // A name that is no job's is a typo, located.
    with(
        "ownOutput: false\nvariants:\n  prod:\n    output: deploy-prod\n    buildOutput: build-prod\n    jobs: [secnd]\n",
    );
    let o = run(p, &["build"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains("variants.prod.jobs[0]: no definition is named `secnd`"),
        "{err}"
    );
    assert!(err.contains("did you mean `second`?"), "{err}");
    // Variants only, and none: nothing to build.
    with("ownOutput: false\n");
    let o = run(p, &["build"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("`ownOutput: false` with no variants: nothing would be built"),
        "{}",
        stderr(&o)
    );
}
