//! `diff --base REF` and `build --check --base REF` in real git
//! repositories: a base branch and a pull request's branch, with the
//! output committed at the base or not, and the repository left as it was.

mod common;

use std::fs;
use std::path::Path;

use common::{commit_all, edit, git, pull_request, run, stderr, stdout};
use serde_json::Value;

/// The pull request of most tests: a smaller learning rate and one more
/// CPU per node for the PyTorch example's job `ml/digits`.
fn tune(dir: &Path) {
    let def = dir.join("jobs/digits.yaml");
    edit(&def, "learning_rate: 0.05", "learning_rate: 0.02");
    edit(&def, "cpu: \"2\"", "cpu: \"3\"");
}

/// The re-run line of `ml/digits`, its run names masked.
fn rerun_line(text: &str) -> String {
    let line = text
        .lines()
        .find(|l| l.contains("re-run ml/digits"))
        .unwrap_or_else(|| panic!("no re-run of ml/digits in:\n{text}"));
    let words: Vec<String> = line
        .split(' ')
        .map(|w| {
            let name = w.trim_end_matches(',');
            match name.strip_prefix("digits-") {
                Some(hash) if hash.len() == 6 => w.replace(hash, "HASH"),
                _ => w.to_owned(),
            }
        })
        .collect();
    words.join(" ").trim().to_owned()
}

const TUNED: &str = "re-run ml/digits: digits-HASH → digits-HASH, every task starts again \
     (hyperparameters.learning_rate: 0.05 → 0.02, roles.worker.resources.cpu: 2 → 3)";

/// The repository's state that `--base` must not touch: the work tree's
/// status, the index, the branches and HEAD.
fn state(dir: &Path) -> (String, Vec<u8>, String) {
    (
        git(dir, &["status", "--porcelain", "--untracked-files=all"]),
        fs::read(dir.join(".git/index")).expect("index"),
        git(dir, &["show-ref", "--head"]),
    )
}

#[test]
fn a_pull_request_s_diff_names_the_runs_it_restarts_and_the_fields_why() {
    let dir = pull_request("pytorch", true);
    tune(dir.path());
    assert!(run(dir.path(), &["build"]).status.success());
    commit_all(dir.path(), "tune");
    let before = state(dir.path());

    // The output is committed: against the directory on disk, nothing.
    let o = run(dir.path(), &["diff"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));

    let o = run(dir.path(), &["diff", "--base", "main"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.starts_with("against main ("), "{text}");
    assert_eq!(rerun_line(&text), TUNED);
    assert!(
        text.contains("ml/digits: 2 tasks, 0 GPUs, 4 → 6 CPU (+2), 8Gi memory"),
        "{text}"
    );
    assert!(
        text.contains("resources.requests.cpu: 2 → 3"),
        "the manifests' fields too: {text}"
    );

    let o = run(
        dir.path(),
        &["diff", "--base", "main", "--format", "markdown"],
    );
    assert_eq!(o.status.code(), Some(1));
    let md = stdout(&o);
    assert!(md.starts_with("### trainc diff against `main ("), "{md}");
    assert!(md.contains("- re-run ml/digits: "), "{md}");
    assert!(
        md.contains("hyperparameters.learning_rate: 0.05 → 0.02"),
        "{md}"
    );

    let o = run(dir.path(), &["diff", "--base", "main", "--format", "json"]);
    assert_eq!(o.status.code(), Some(1));
    let doc: Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(doc["base"]["ref"], "main");
    let commit = git(dir.path(), &["rev-parse", "main"]);
    assert_eq!(doc["base"]["commit"], commit.trim());
    let run_change = &doc["runs"][0];
    assert_eq!(run_change["op"], "rerun");
    assert_eq!(
        run_change["fields"],
        serde_json::json!([
            {"path": "hyperparameters.learning_rate", "old": "0.05", "new": "0.02"},
            {"path": "roles.worker.resources.cpu", "old": "2", "new": "3"},
        ])
    );
    assert_eq!(state(dir.path()), before, "the repository is as it was");
}

/// A base without output: its definitions are built, in a directory of
/// trainc's own, and the pull request's output is compared with that.
#[test]
fn a_base_without_output_is_built_from_its_definitions() {
    let dir = pull_request("pytorch", false);
    tune(dir.path());
    let before = state(dir.path());
    let o = run(dir.path(), &["diff", "--base", "main", "--stat"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(rerun_line(&stdout(&o)), TUNED);
    assert_eq!(state(dir.path()), before);
    assert!(!dir.path().join("deploy").exists(), "nothing written");

    // The same pull request against a base with its output committed says
    // the same: the base's build is the one `trainc build` makes.
    let committed = pull_request("pytorch", true);
    tune(committed.path());
    let o2 = run(committed.path(), &["diff", "--base", "main", "--stat"]);
    let mask = |o: &std::process::Output| {
        stdout(o)
            .lines()
            .skip(1)
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(mask(&o), mask(&o2));
}

#[test]
fn runs_start_and_stop_against_the_base() {
    let dir = pull_request("pytorch", true);
    edit(
        &dir.path().join("jobs/digits.yaml"),
        "name: digits\n",
        "name: letters\n",
    );
    let o = run(dir.path(), &["diff", "--base", "main", "--stat"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("start ml/letters: letters-"), "{text}");
    assert!(text.contains("stop ml/digits: digits-"), "{text}");

    // A project the base does not have yet: every run starts.
    let repo = tempfile::tempdir().expect("tempdir");
    git(repo.path(), &["init", "--quiet", "--initial-branch=main"]);
    fs::write(repo.path().join("README"), "the base\n").expect("write");
    commit_all(repo.path(), "the base");
    git(repo.path(), &["checkout", "--quiet", "-b", "pr"]);
    let project = repo.path().join("training");
    common::copy_tree(&common::example("pytorch"), &project);
    for out in ["deploy", "build"] {
        let _ = fs::remove_dir_all(project.join(out));
    }
    let o = run(&project, &["diff", "--base", "main", "--stat"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("start ml/digits: digits-"), "{text}");
    assert!(!text.contains("stop "), "{text}");
}

/// A run renamed by its image alone (a file of the build context changed)
/// says so, rather than naming no field.
#[test]
fn a_run_restarted_by_its_image_says_so() {
    let dir = pull_request("pytorch", true);
    let program = dir.path().join("train/train.py");
    let mut text = fs::read_to_string(&program).expect("read");
    text.push_str("# tuned\n");
    fs::write(&program, text).expect("write");
    let o = run(dir.path(), &["diff", "--base", "main", "--stat"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        rerun_line(&stdout(&o)).ends_with(
            "every task starts again (no field of its definition changed: an input of its image did)"
        ),
        "{}",
        stdout(&o)
    );
}

/// `build --check --base`: the check is the usual one (exit 1 for stale
/// output), and the report adds the runs the pull request changes.
#[test]
fn build_check_adds_the_runs_against_the_base() {
    let dir = pull_request("pytorch", true);
    tune(dir.path());
    let o = run(dir.path(), &["build", "--check", "--base", "main"]);
    assert_eq!(o.status.code(), Some(1), "stale: {}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("deploy is stale"), "{text}");
    assert_eq!(rerun_line(&text), TUNED);

    assert!(run(dir.path(), &["build"]).status.success());
    let o = run(dir.path(), &["build", "--check", "--base", "main"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.starts_with("deploy and build are up to date"),
        "{text}"
    );
    assert_eq!(rerun_line(&text), TUNED);

    let o = run(
        dir.path(),
        &["build", "--check", "--base", "main", "--format", "json"],
    );
    assert_eq!(o.status.code(), Some(0));
    let doc: Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(doc["current"], true);
    let against = &doc["against_base"];
    assert_eq!(against["base"]["ref"], "main");
    assert_eq!(against["runs"][0]["op"], "rerun");
    assert!(
        against["changes"]
            .as_array()
            .expect("changes")
            .iter()
            .all(|c| c.get("diff").is_none()),
        "{against}"
    );
}

#[test]
fn the_base_must_be_a_commit_of_the_project_s_repository() {
    let dir = pull_request("pytorch", true);
    let o = run(dir.path(), &["diff", "--base", "no-such-branch"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("`no-such-branch` names no commit of this repository"),
        "{}",
        stderr(&o)
    );
    let o = run(dir.path(), &["diff", "--base", "main", "jobs"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("`--base` compares whole projects"),
        "{}",
        stderr(&o)
    );
    // `--base` goes with `--check`: a build writes, it does not compare.
    let o = run(dir.path(), &["build", "--base", "main"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--check"), "{}", stderr(&o));

    let outside = common::scratch_example("pytorch");
    let o = run(outside.path(), &["diff", "--base", "main"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("`--base` reads the base commit with git"),
        "{}",
        stderr(&o)
    );

    // A base whose definitions do not build, and that has no output.
    let broken = pull_request("pytorch", false);
    git(broken.path(), &["checkout", "--quiet", "main"]);
    edit(
        &broken.path().join("jobs/digits.yaml"),
        "replicas: 2",
        "replicas: -2",
    );
    commit_all(broken.path(), "broken");
    git(broken.path(), &["checkout", "--quiet", "pr"]);
    let o = run(broken.path(), &["diff", "--base", "main"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("the definitions at main (") && stderr(&o).contains("do not build"),
        "{}",
        stderr(&o)
    );
}
