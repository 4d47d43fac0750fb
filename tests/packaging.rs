//! trainc as users install it: the Python wheel that `tests/run.sh` builds
//! with maturin (`TRAINC_WHEEL_DIR`), installed into a fresh virtual
//! environment, and the README's pre-commit snippets run by the real
//! pre-commit (`TRAINC_PRE_COMMIT`) against a repository holding the MNIST
//! example, the `language: python` one installing trainc from that wheel as
//! it would from the package index. Also `trainc --version`.
//!
//! The wheel is what a release uploads (docs/releasing.md), but for the
//! platform it is built on and in cargo's dev profile: what is tested here
//! is its layout and metadata and what pip and pre-commit make of it.

mod common;

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{root, scratch_example};
use serde_json::Value;

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The wheel of this version in `TRAINC_WHEEL_DIR`, and the directory.
fn wheel() -> Option<(PathBuf, PathBuf)> {
    let Some(dir) = std::env::var_os("TRAINC_WHEEL_DIR").map(PathBuf::from) else {
        assert!(
            std::env::var_os("TRAINC_REQUIRE_TOOLS").is_none(),
            "TRAINC_WHEEL_DIR is required; `bash tests/run.sh` builds the wheel"
        );
        eprintln!(
            "skipping: TRAINC_WHEEL_DIR not set (run `bash tests/run.sh` to build the wheel)"
        );
        return None;
    };
    let prefix = format!("trainc-{VERSION}-py3-none-");
    let wheels: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            name.starts_with(&prefix) && name.ends_with(".whl")
        })
        .collect();
    let [wheel] = wheels.as_slice() else {
        panic!(
            "expected one {prefix}<platform>.whl in {}, found {wheels:?}",
            dir.display()
        );
    };
    Some((wheel.clone(), dir))
}

fn python3() -> Option<PathBuf> {
    common::tool("TRAINC_PYTHON3", "python3")
}

fn ok(o: &Output, what: &str) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "{what} failed ({}):\n{text}", o.status);
    text
}

fn run(cmd: &mut Command, what: &str) -> String {
    ok(
        &cmd.output().unwrap_or_else(|e| panic!("{what}: {e}")),
        what,
    )
}

/// A fresh virtual environment with the wheel installed, offline.
fn venv_with_wheel(python: &Path, wheel: &Path) -> tempfile::TempDir {
    let venv = tempfile::tempdir().expect("tempdir");
    run(
        Command::new(python).args(["-m", "venv"]).arg(venv.path()),
        "python3 -m venv",
    );
    run(
        Command::new(venv.path().join("bin/pip"))
            .args([
                "install",
                "--no-index",
                "--disable-pip-version-check",
                "--quiet",
            ])
            .arg(wheel),
        "pip install <wheel>",
    );
    venv
}

/// The wheel holds the binary and the package's metadata, nothing else:
/// no Python code, no sources.
#[test]
fn the_wheel_holds_only_the_binary_and_its_metadata() {
    let (Some((wheel, _)), Some(python)) = (wheel(), python3()) else {
        return;
    };
    let names = run(
        Command::new(&python)
            .args([
                "-c",
                "import sys, zipfile; print('\\n'.join(zipfile.ZipFile(sys.argv[1]).namelist()))",
            ])
            .arg(&wheel),
        "list the wheel",
    );
    let data = format!("trainc-{VERSION}.data/");
    let info = format!("trainc-{VERSION}.dist-info/");
    let mut names: Vec<&str> = names.lines().collect();
    names.sort_unstable();
    assert!(
        names.contains(&format!("{data}scripts/trainc").as_str()),
        "{names:?}"
    );
    for n in &names {
        assert!(
            *n == format!("{data}scripts/trainc") || n.starts_with(&info),
            "unexpected file in the wheel: {n}"
        );
    }
    let metadata = run(
        Command::new(&python)
            .args([
                "-c",
                "import sys, zipfile; print(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]).decode())",
            ])
            .arg(&wheel)
            .arg(format!("{info}METADATA")),
        "read METADATA",
    );
    for field in [
        "Name: trainc\n".to_owned(),
        format!("Version: {VERSION}\n"),
        "License-Expression: Apache-2.0\n".to_owned(),
        "Requires-Python: >=3.8\n".to_owned(),
    ] {
        assert!(
            metadata.contains(&field),
            "METADATA lacks {field:?}:\n{metadata}"
        );
    }
}

/// `pip install` of the wheel into a fresh environment gives a working
/// `trainc` on the environment's PATH: it reports this version and
/// validates and builds the example.
#[test]
fn the_installed_wheel_runs() {
    let (Some((wheel, _)), Some(python)) = (wheel(), python3()) else {
        return;
    };
    let venv = venv_with_wheel(&python, &wheel);
    let trainc = venv.path().join("bin/trainc");
    let cache = tempfile::tempdir().expect("tempdir");
    let version = run(Command::new(&trainc).arg("-V"), "trainc -V");
    assert!(
        version.starts_with(&format!("trainc {VERSION}")),
        "{version}"
    );
    let project = scratch_example("mnist");
    for args in [&["validate"][..], &["build"], &["build", "--check"]] {
        run(
            Command::new(&trainc)
                .args(args)
                .current_dir(project.path())
                .env("TRAINC_CACHE_DIR", cache.path()),
            &format!("trainc {}", args.join(" ")),
        );
    }
}

/// The README's `.pre-commit-config.yaml` snippets, by the language of
/// their hooks: `python` (from the package index) and `system`.
fn readme_snippet(language: &str) -> String {
    let readme = fs::read_to_string(root().join("README.md")).expect("read");
    let mut found = Vec::new();
    let mut rest = readme.as_str();
    while let Some(at) = rest.find("```yaml\n# .pre-commit-config.yaml") {
        let start = at + "```yaml\n".len();
        let len = rest[start..].find("```").expect("closed");
        let snippet = &rest[start..start + len];
        if snippet.contains(&format!("language: {language}\n")) {
            found.push(snippet.to_owned());
        }
        rest = &rest[start + len..];
    }
    let [snippet] = found.as_slice() else {
        panic!(
            "README.md has {} `language: {language}` snippets",
            found.len()
        );
    };
    snippet.clone()
}

/// Both snippets are `repo: local` hooks with the ids, commands and file
/// rules of the shipped manifest; the `python` one pins this version.
#[test]
fn readme_snippets_are_the_shipped_hooks_as_local_hooks() {
    let shipped: Value = serde_saphyr::from_str(
        &fs::read_to_string(root().join(".pre-commit-hooks.yaml")).expect("read"),
    )
    .expect("manifest parses");
    let shipped = shipped.as_array().expect("a list of hooks");
    for language in ["python", "system"] {
        let config: Value = serde_saphyr::from_str(&readme_snippet(language)).expect("parses");
        let repos = config["repos"].as_array().expect("repos");
        assert_eq!(repos.len(), 1, "{language}");
        assert_eq!(repos[0]["repo"], "local", "{language}");
        let hooks = repos[0]["hooks"].as_array().expect("hooks");
        assert_eq!(hooks.len(), shipped.len(), "{language}");
        for (hook, ship) in hooks.iter().zip(shipped) {
            for key in ["id", "entry", "files", "always_run", "pass_filenames"] {
                assert_eq!(hook[key], ship[key], "{language} {}: {key}", ship["id"]);
            }
            assert_eq!(hook["language"], language);
            let deps = &hook["additional_dependencies"];
            if language == "python" {
                assert_eq!(
                    deps,
                    &serde_json::json!([format!("trainc=={VERSION}")]),
                    "the README pins trainc=={VERSION}, Cargo.toml's version"
                );
            } else {
                assert!(deps.is_null(), "{deps}");
            }
        }
    }
}

/// Every `trainc==` pin in the docs is this version.
#[test]
fn docs_pin_this_version() {
    for path in [
        "README.md",
        "docs/gitops.md",
        "docs/gitops/github-actions.yaml",
    ] {
        let text = fs::read_to_string(root().join(path)).expect("read");
        let pins: Vec<&str> = text
            .match_indices("trainc==")
            .map(|(at, _)| {
                let rest = &text[at + "trainc==".len()..];
                let end = rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '.'))
                    .unwrap_or(rest.len());
                &rest[..end]
            })
            .collect();
        assert!(!pins.is_empty(), "{path} pins no version");
        for pin in pins {
            assert_eq!(
                pin, VERSION,
                "{path} pins trainc=={pin}, not Cargo.toml's version"
            );
        }
    }
}

/// A git repository holding the MNIST example with its output built and
/// committed, and the given `.pre-commit-config.yaml`.
fn repository(trainc: &Path, config: &str, env: &[(&str, OsString)]) -> tempfile::TempDir {
    let repo = scratch_example("mnist");
    let git = |args: &[&str]| {
        run(
            Command::new("git")
                .args([
                    "-c",
                    "user.name=trainc",
                    "-c",
                    "user.email=trainc@example.com",
                ])
                .args([
                    "-c",
                    "commit.gpgsign=false",
                    "-c",
                    "core.hooksPath=/dev/null",
                ])
                .args(args)
                .current_dir(repo.path()),
            &format!("git {}", args.join(" ")),
        )
    };
    git(&["init", "--quiet"]);
    fs::write(repo.path().join(".pre-commit-config.yaml"), config).expect("write");
    run(
        Command::new(trainc)
            .arg("build")
            .current_dir(repo.path())
            .envs(env.iter().map(|(k, v)| (k, v))),
        "trainc build",
    );
    git(&["add", "--all"]);
    git(&["commit", "--quiet", "--message", "definitions and output"]);
    repo
}

/// Runs the hooks of the repository's `.pre-commit-config.yaml`, as on a
/// commit of what is staged (`all` false) or on every file.
fn pre_commit(pre_commit: &Path, repo: &Path, all: bool, env: &[(&str, OsString)]) -> Output {
    let mut cmd = Command::new(pre_commit);
    cmd.arg("run").arg("--color=never").current_dir(repo);
    if all {
        cmd.arg("--all-files");
    }
    cmd.envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .expect("pre-commit runs")
}

/// The hooks pass on current output; after a definition changes without a
/// rebuild, `trainc-validate` passes and `trainc-check` fails with its
/// message, which names the stale directory and the fix.
fn hooks_guard_the_output(tool: &Path, repo: &Path, env: &[(&str, OsString)]) {
    let o = pre_commit(tool, repo, true, env);
    let text = ok(&o, "pre-commit run --all-files on current output");
    for name in ["trainc validate", "trainc build --check"] {
        assert!(
            text.lines()
                .any(|l| l.starts_with(name) && l.ends_with("Passed")),
            "{name} did not pass:\n{text}"
        );
    }

    let definition = repo.join("jobs/mnist.yaml");
    let text = fs::read_to_string(&definition).expect("read");
    assert!(text.contains("learning_rate: 0.001"));
    fs::write(
        &definition,
        text.replace("learning_rate: 0.001", "learning_rate: 0.002"),
    )
    .expect("write");
    run(
        Command::new("git")
            .args(["add", "jobs/mnist.yaml"])
            .current_dir(repo),
        "git add",
    );
    let o = pre_commit(tool, repo, false, env);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("trainc validate") && l.ends_with("Passed")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("trainc build --check") && l.ends_with("Failed")),
        "{text}"
    );
    assert!(text.contains("- exit code: 1"), "{text}");
    assert!(text.contains("deploy is stale"), "{text}");
    assert!(text.contains("run `trainc build`"), "{text}");
}

/// The Python interpreter pre-commit runs on, from its script's `#!` line:
/// its virtualenv holds the wheels virtualenv seeds new environments with.
fn seed_wheels(pre_commit: &Path) -> PathBuf {
    let script = fs::read_to_string(pre_commit).expect("read pre-commit");
    let python = script
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("#!"))
        .expect("pre-commit is a script with a #! line")
        .trim();
    let dir = run(
        Command::new(python).args([
            "-c",
            "from virtualenv.seed.wheels.embed import BUNDLE_FOLDER; print(BUNDLE_FOLDER)",
        ]),
        "find virtualenv's wheels",
    );
    PathBuf::from(dir.trim())
}

/// The README's `language: python` snippet as written: pre-commit installs
/// `trainc==<version>` into an environment of its own, here from the wheel
/// (`PIP_NO_INDEX`, `PIP_FIND_LINKS`) instead of the package index, and the
/// hooks guard the example's output.
#[test]
fn readme_python_hooks_install_the_wheel_and_guard_the_output() {
    let (Some((wheel, wheel_dir)), Some(python), Some(tool)) = (
        wheel(),
        python3(),
        common::tool("TRAINC_PRE_COMMIT", "pre-commit"),
    ) else {
        return;
    };
    let venv = venv_with_wheel(&python, &wheel);
    let home = tempfile::tempdir().expect("tempdir");
    let cache = tempfile::tempdir().expect("tempdir");
    // pre-commit installs a placeholder package for `repo: local`, built
    // with setuptools, which the index would serve: offline, the wheels
    // virtualenv carries serve it.
    let mut links = wheel_dir.into_os_string();
    links.push(" ");
    links.push(seed_wheels(&tool));
    let env = [
        ("PRE_COMMIT_HOME", home.path().into()),
        ("PIP_NO_INDEX", "1".into()),
        ("PIP_FIND_LINKS", links),
        ("PIP_DISABLE_PIP_VERSION_CHECK", "1".into()),
        ("TRAINC_CACHE_DIR", cache.path().into()),
    ];
    let repo = repository(
        &venv.path().join("bin/trainc"),
        &readme_snippet("python"),
        &env,
    );
    hooks_guard_the_output(&tool, repo.path(), &env);
    // The hooks ran the trainc pre-commit installed, not another one.
    let installed: Vec<PathBuf> = walk(home.path())
        .into_iter()
        .filter(|p| p.ends_with("bin/trainc"))
        .collect();
    assert_eq!(installed.len(), 1, "{installed:?}");
}

/// The README's `language: system` snippet: the trainc on PATH, here the
/// one the wheel installed.
#[test]
fn readme_system_hooks_use_the_trainc_on_path() {
    let (Some((wheel, _)), Some(python), Some(tool)) = (
        wheel(),
        python3(),
        common::tool("TRAINC_PRE_COMMIT", "pre-commit"),
    ) else {
        return;
    };
    let venv = venv_with_wheel(&python, &wheel);
    let home = tempfile::tempdir().expect("tempdir");
    let cache = tempfile::tempdir().expect("tempdir");
    let mut path = OsString::from(venv.path().join("bin"));
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    let env = [
        ("PRE_COMMIT_HOME", home.path().into()),
        ("PATH", path),
        ("TRAINC_CACHE_DIR", cache.path().into()),
    ];
    let repo = repository(
        &venv.path().join("bin/trainc"),
        &readme_snippet("system"),
        &env,
    );
    hooks_guard_the_output(&tool, repo.path(), &env);
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(Result::ok)
        .map(|e| e.into_path())
        .collect()
}

/// `-V` is one line, the version and the commit when the build knew it;
/// `--version` adds the commit, the Kubernetes API version and the custom
/// resources' API versions (tests/cmd/version.trycmd shows it whole).
#[test]
fn version_names_the_commit_and_the_kubernetes_api() {
    let dir = tempfile::tempdir().expect("tempdir");
    let short = common::stdout(&common::run(dir.path(), &["-V"]));
    let long = common::stdout(&common::run(dir.path(), &["--version"]));
    assert_eq!(short.lines().count(), 1, "{short}");
    assert_eq!(long.lines().next(), short.lines().next());
    let commit = option_env!("TRAINC_COMMIT");
    match (commit, option_env!("TRAINC_COMMIT_DATE")) {
        (Some(c), Some(d)) => assert_eq!(short, format!("trainc {VERSION} ({c} {d})\n")),
        (Some(c), None) => assert_eq!(short, format!("trainc {VERSION} ({c})\n")),
        _ => assert_eq!(short, format!("trainc {VERSION}\n")),
    }
    assert!(
        long.contains(&format!("\ncommit: {}\n", commit.unwrap_or("unknown"))),
        "{long}"
    );
    for line in [
        "kubernetes: 1.33",
        "JobSet: jobset.x-k8s.io/v1alpha2",
        "TFJob: kubeflow.org/v1",
        "PyTorchJob: kubeflow.org/v1",
    ] {
        assert!(long.lines().any(|l| l == line), "{line} missing:\n{long}");
    }

    // Built from this checkout (CI's clone, a developer's tree) without an
    // override: the commit is the checkout's HEAD.
    if root().join(".git").exists() && std::env::var_os("TRAINC_BUILD_COMMIT").is_none() {
        let head = Command::new("git")
            .args(["rev-parse", "--short=7", "HEAD"])
            .current_dir(root())
            .output()
            .expect("git runs");
        let head = String::from_utf8_lossy(&head.stdout).trim().to_owned();
        let commit = commit.expect("a build from a git checkout records its commit");
        assert!(commit.starts_with(&head), "{commit} is not HEAD {head}");
    }
}
