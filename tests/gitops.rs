//! The GitOps glue shipped as documentation: the pre-commit hooks, the CI
//! recipe, and the Argo CD and Flux objects. No controller runs here, so the
//! files are parsed and held to what makes them work with trainc's output:
//! the synced path is the project's output root, pruning is on, nothing
//! forces re-creation, and every command they run behaves as they expect.

mod common;

use std::fs;
use std::path::Path;

use common::{root, run, scratch_example, stderr, stdout};
use serde_json::Value;

fn yaml_docs(path: &str) -> Vec<Value> {
    let text = fs::read_to_string(root().join(path)).expect("read");
    serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn one(path: &str) -> Value {
    let mut docs = yaml_docs(path);
    assert_eq!(docs.len(), 1, "{path}");
    docs.remove(0)
}

/// The example project's `output`: the directory controllers must sync.
fn output_dir() -> String {
    let project = one("examples/mnist/trainc.yaml");
    project["output"].as_str().expect("output").to_owned()
}

/// The `.pre-commit-config.yaml` snippets of a Markdown file: the YAML
/// blocks whose first line is a `# .pre-commit-config.yaml` comment.
fn config_snippets(path: &str) -> Vec<String> {
    let text = fs::read_to_string(root().join(path)).expect("read");
    let mut out = Vec::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("```yaml\n# .pre-commit-config.yaml") {
        let start = at + "```yaml\n".len();
        let len = rest[start..].find("```").expect("closed");
        out.push(rest[start..start + len].to_owned());
        rest = &rest[start + len..];
    }
    out
}

/// Every file in docs/gitops/ appears in docs/gitops.md byte for byte, so
/// the page never drifts from the files the tests check.
#[test]
fn the_gitops_page_shows_the_checked_files() {
    let page = fs::read_to_string(root().join("docs/gitops.md")).expect("read");
    let mut files: Vec<String> = fs::read_dir(root().join("docs/gitops"))
        .expect("docs/gitops")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "argocd-application.yaml",
            "argocd-health.yaml",
            "flux-health-checks.yaml",
            "flux-kustomization.yaml",
            "github-actions.yaml",
        ],
        "a new file in docs/gitops/ needs its checks here"
    );
    for f in files {
        let text = fs::read_to_string(root().join("docs/gitops").join(&f)).expect("read");
        assert!(
            page.contains(&format!("```yaml\n{text}```")),
            "docs/gitops.md does not include docs/gitops/{f} verbatim"
        );
    }
}

#[test]
fn argo_cd_application_syncs_the_output_root_with_pruning() {
    let app = one("docs/gitops/argocd-application.yaml");
    assert_eq!(app["apiVersion"], "argoproj.io/v1alpha1");
    assert_eq!(app["kind"], "Application");
    assert_eq!(app["spec"]["source"]["path"], output_dir().as_str());
    assert_eq!(app["spec"]["syncPolicy"]["automated"]["prune"], true);
    let options = app["spec"]["syncPolicy"]["syncOptions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for o in options {
        let o = o.as_str().expect("string option");
        // Replace/Force re-create Jobs on every sync: finished training reruns.
        assert!(
            !o.contains("Replace=true") && !o.contains("Force=true"),
            "{o}"
        );
    }
}

#[test]
fn flux_kustomization_applies_the_output_root_with_pruning() {
    let docs = yaml_docs("docs/gitops/flux-kustomization.yaml");
    let [repo, ks] = docs.as_slice() else {
        panic!("expected a GitRepository and a Kustomization");
    };
    assert_eq!(repo["apiVersion"], "source.toolkit.fluxcd.io/v1");
    assert_eq!(repo["kind"], "GitRepository");
    assert_eq!(ks["apiVersion"], "kustomize.toolkit.fluxcd.io/v1");
    assert_eq!(ks["kind"], "Kustomization");
    assert_eq!(ks["spec"]["path"], format!("./{}", output_dir()).as_str());
    assert_eq!(ks["spec"]["prune"], true);
    assert_ne!(ks["spec"]["force"], true);
    assert_eq!(ks["spec"]["sourceRef"]["kind"], "GitRepository");
    assert_eq!(ks["spec"]["sourceRef"]["name"], repo["metadata"]["name"]);
    assert_eq!(ks["metadata"]["namespace"], repo["metadata"]["namespace"]);
}

/// The Argo CD health checks are a fragment of argocd-cm, the only place
/// Argo CD reads them, and every key is a health check for one group and
/// kind (`resource.customizations.health.<group>_<kind>`; Argo CD splits
/// at the first `_`, so a group may not contain one). tests/health.rs runs
/// the scripts.
#[test]
fn argo_cd_health_checks_are_an_argocd_cm_fragment() {
    let cm = one("docs/gitops/argocd-health.yaml");
    assert_eq!(cm["apiVersion"], "v1");
    assert_eq!(cm["kind"], "ConfigMap");
    assert_eq!(cm["metadata"]["name"], "argocd-cm");
    assert_eq!(cm["metadata"]["namespace"], "argocd");
    assert_eq!(
        cm["metadata"]["labels"]["app.kubernetes.io/part-of"],
        "argocd"
    );
    let data = cm["data"].as_object().expect("data");
    assert!(!data.is_empty());
    for (key, script) in data {
        let target = key
            .strip_prefix("resource.customizations.health.")
            .unwrap_or_else(|| panic!("{key}: not a health check"));
        let (group, kind) = target.split_once('_').expect("<group>_<kind>");
        assert!(
            group.contains('.') && !kind.is_empty() && !kind.contains('_'),
            "{key}"
        );
        assert!(
            script.as_str().is_some_and(|s| s.contains("return")),
            "{key}"
        );
    }
}

/// The Flux health checks come as a Kustomization that replaces the
/// example's: the same source, path and pruning, with `wait: true`, without
/// which Flux never evaluates the expressions. tests/health.rs evaluates
/// them.
#[test]
fn flux_health_checks_replace_the_example_kustomization() {
    let example = yaml_docs("docs/gitops/flux-kustomization.yaml").remove(1);
    let ks = one("docs/gitops/flux-health-checks.yaml");
    for field in ["apiVersion", "kind", "metadata"] {
        assert_eq!(ks[field], example[field], "{field}");
    }
    for field in ["interval", "sourceRef", "path", "prune", "timeout"] {
        assert_eq!(ks["spec"][field], example["spec"][field], "spec.{field}");
    }
    assert_ne!(ks["spec"]["force"], true);
    assert_eq!(ks["spec"]["wait"], true);
    let exprs = ks["spec"]["healthCheckExprs"]
        .as_array()
        .expect("healthCheckExprs");
    assert!(!exprs.is_empty());
    for e in exprs {
        let entry = e.as_object().expect("an entry");
        for key in entry.keys() {
            assert!(
                ["apiVersion", "kind", "current", "inProgress", "failed"].contains(&key.as_str()),
                "{key}"
            );
        }
        assert!(e["apiVersion"].as_str().is_some_and(|v| v.contains('/')));
        assert!(e["kind"].is_string(), "set kind: Flux < 2.9 needs it");
        assert!(e["current"].is_string(), "current is required");
    }
}

/// The hooks' entries, run as pre-commit runs them (no file arguments), in
/// a project: validate passes, check passes on current output and fails
/// with exit 1 on stale output.
#[test]
fn pre_commit_hooks_run_the_commands_they_promise() {
    let hooks = one(".pre-commit-hooks.yaml");
    let hooks = hooks.as_array().expect("a list of hooks");
    let entry = |id: &str| -> Vec<String> {
        let hook = hooks
            .iter()
            .find(|h| h["id"] == id)
            .unwrap_or_else(|| panic!("hook {id}"));
        assert_eq!(hook["language"], "rust", "{id}");
        assert_eq!(hook["pass_filenames"], false, "{id}");
        let words: Vec<String> = hook["entry"]
            .as_str()
            .expect("entry")
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        assert_eq!(words[0], "trainc", "{id}");
        words[1..].to_vec()
    };
    fn args(w: &[String]) -> Vec<&str> {
        w.iter().map(String::as_str).collect()
    }
    let validate = entry("trainc-validate");
    let check = entry("trainc-check");
    assert_eq!(
        hooks.iter().find(|h| h["id"] == "trainc-check").unwrap()["always_run"],
        true
    );

    let dir = scratch_example("mnist");
    let o = run(dir.path(), &args(&validate));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(run(dir.path(), &args(&check)).status.code(), Some(1));
    assert!(run(dir.path(), &["build"]).status.success());
    assert_eq!(run(dir.path(), &args(&check)).status.code(), Some(0));
}

/// The README has two snippets (`repo: local` hooks: tests/packaging.rs
/// runs them); docs/gitops.md pins this repository's hook manifest to a
/// commit, never to a tag: one that exists, holding the hooks it names.
#[test]
fn gitops_page_pins_the_shipped_hooks_to_a_commit() {
    assert_eq!(config_snippets("README.md").len(), 2);
    let snippets = config_snippets("docs/gitops.md");
    let [snippet] = snippets.as_slice() else {
        panic!("docs/gitops.md: expected one snippet, found {snippets:?}");
    };
    let config: Value = serde_saphyr::from_str(snippet).expect("snippet parses");
    let repo = &config["repos"][0];
    let rev = repo["rev"].as_str().expect("rev");
    assert!(
        rev.len() == 40 && rev.bytes().all(|b| b.is_ascii_hexdigit()),
        "rev {rev} is not a full commit hash"
    );
    let used: Vec<&Value> = repo["hooks"]
        .as_array()
        .expect("hooks")
        .iter()
        .map(|h| &h["id"])
        .collect();
    assert_eq!(used, ["trainc-validate", "trainc-check"]);

    // The commit is one of this repository's, and its manifest has the
    // hooks. A shallow clone may lack it: then only the form is checked.
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(root())
            .output()
            .expect("git runs")
    };
    if !root().join(".git").exists()
        || String::from_utf8_lossy(&git(&["rev-parse", "--is-shallow-repository"]).stdout).trim()
            != "false"
    {
        eprintln!("skipping the commit check: not a full git clone");
        return;
    }
    let manifest = git(&["show", &format!("{rev}:.pre-commit-hooks.yaml")]);
    assert!(manifest.status.success(), "{}", stderr(&manifest));
    let manifest: Value =
        serde_saphyr::from_str(&String::from_utf8_lossy(&manifest.stdout)).expect("parses");
    let ids: Vec<&Value> = manifest
        .as_array()
        .expect("list")
        .iter()
        .map(|h| &h["id"])
        .collect();
    for id in used {
        assert!(ids.contains(&id), "{id} is not a hook at {rev}");
    }
}

/// The CI job validates, publishes the Markdown diff against the base
/// branch, and fails on stale output; the diff step tolerates exit 1
/// ("changes") but not 2. Every step that calls trainc runs here, as
/// written, on a pull request of a real repository: `origin/main` its base,
/// the job summary and the step outputs files, as on a runner. (Checking
/// out and installing the wheel are GitHub's and pipx's; the binary under
/// test stands in for the installed one.)
#[test]
fn ci_recipe_runs_on_a_pull_request() {
    let wf = one("docs/gitops/github-actions.yaml");
    let steps = wf["jobs"]["manifests"]["steps"].as_array().expect("steps");
    assert_eq!(steps[0]["with"]["fetch-depth"], 0, "the base's commits");
    let runs: Vec<&str> = steps.iter().filter_map(|s| s["run"].as_str()).collect();
    let has = |cmd: &str| runs.iter().any(|r| r.contains(cmd));
    assert!(has("trainc validate --workspace --format github"));
    assert!(has(
        "trainc diff --workspace --base \"$BASE\" --format markdown"
    ));
    assert!(has("test \"$status\" -le 1"));
    assert!(
        runs.last().expect("steps").trim() == "trainc build --check --workspace --format github"
    );

    let dir = common::tuned_pull_request();
    common::git(
        dir.path(),
        &["update-ref", "refs/remotes/origin/main", "main"],
    );
    let bin = Path::new(env!("CARGO_BIN_EXE_trainc"))
        .parent()
        .expect("bin dir")
        .to_path_buf();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let github = tempfile::tempdir().expect("tempdir");
    let summary = github.path().join("summary.md");
    let outputs = github.path().join("outputs");
    for step in steps {
        let Some(script) = step["run"].as_str() else {
            continue;
        };
        if !script.contains("trainc ") || script.contains("pipx install") {
            continue;
        }
        let mut cmd = std::process::Command::new("bash");
        // GitHub's `run:` shell: `bash -e {0}`.
        cmd.args(["--noprofile", "--norc", "-eo", "pipefail", "-c", script])
            .current_dir(dir.path())
            .env("PATH", &path)
            .env("TRAINC_CACHE_DIR", common::cache_dir())
            .env("GITHUB_STEP_SUMMARY", &summary)
            .env("GITHUB_OUTPUT", &outputs);
        if let Some(env) = step["env"].as_object() {
            for (k, v) in env {
                let v = v.as_str().expect("a string");
                cmd.env(k, v.replace("${{ github.base_ref }}", "main"));
            }
        }
        let o = cmd.output().expect("bash runs");
        assert!(
            o.status.success(),
            "step {:?}: {}{}",
            step["name"],
            stdout(&o),
            stderr(&o)
        );
    }
    let published = fs::read_to_string(&summary).expect("the job summary");
    assert!(
        published.starts_with("## Project `trainc.yaml`\n\n### trainc diff against `origin/main ("),
        "{published}"
    );
    assert!(
        published.contains("every task starts again (hyperparameters.learning_rate: 0.05 → 0.02)"),
        "{published}"
    );
    assert_eq!(
        fs::read_to_string(&outputs).expect("the step outputs"),
        "status=1\n"
    );
}

/// pre-commit's own checks of the hooks manifest and of every
/// `.pre-commit-config.yaml` snippet in the README and docs/gitops.md.
#[test]
fn pre_commit_accepts_the_manifest_and_the_snippets() {
    let Some(pre_commit) = common::tool("TRAINC_PRE_COMMIT", "pre-commit") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let mut files = vec![("validate-manifest", root().join(".pre-commit-hooks.yaml"))];
    let snippets = [
        config_snippets("README.md"),
        config_snippets("docs/gitops.md"),
    ]
    .concat();
    assert_eq!(snippets.len(), 3);
    for (i, snippet) in snippets.iter().enumerate() {
        let config = dir.path().join(format!("config-{i}.yaml"));
        fs::write(&config, snippet).expect("write");
        files.push(("validate-config", config));
    }
    for (cmd, file) in files {
        let o = std::process::Command::new(&pre_commit)
            .arg(cmd)
            .arg(&file)
            .output()
            .expect("pre-commit runs");
        assert!(
            o.status.success(),
            "pre-commit {cmd} {}: {}{}",
            file.display(),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }
}
