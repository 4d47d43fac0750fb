//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The binary, with a build cache of its own under target/, never the
/// user's.
pub fn trainc() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_trainc"));
    c.env("TRAINC_CACHE_DIR", cache_dir());
    c
}

pub fn cache_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cache")
}

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A bundled example, or a test fixture project from tests/fixtures.
pub fn example(name: &str) -> PathBuf {
    let bundled = root().join("examples").join(name);
    if bundled.exists() {
        bundled
    } else {
        root().join("tests/fixtures").join(name)
    }
}

/// Runs trainc in `cwd` and returns its output.
pub fn run(cwd: &Path, args: &[&str]) -> Output {
    trainc()
        .current_dir(cwd)
        .args(args)
        .output()
        .expect("trainc runs")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Every file below `dir`: relative path → bytes.
pub fn read_tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    if !dir.exists() {
        return out;
    }
    for e in walkdir::WalkDir::new(dir).sort_by_file_name() {
        let e = e.expect("walk");
        if e.file_type().is_file() {
            let rel = e.path().strip_prefix(dir).expect("prefix");
            let rel = rel.to_string_lossy().replace('\\', "/");
            out.insert(rel, std::fs::read(e.path()).expect("read"));
        }
    }
    out
}

/// Copies a directory tree (test fixtures only: no symlinks).
pub fn copy_tree(from: &Path, to: &Path) {
    for e in walkdir::WalkDir::new(from) {
        let e = e.expect("walk");
        let target = to.join(e.path().strip_prefix(from).expect("prefix"));
        if e.file_type().is_dir() {
            std::fs::create_dir_all(&target).expect("mkdir");
        } else {
            std::fs::copy(e.path(), &target).expect("copy");
        }
    }
}

/// A scratch copy of an example project, without any output.
pub fn scratch_example(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let from = example(name);
    for e in std::fs::read_dir(&from).expect("read example") {
        let e = e.expect("entry");
        let file_name = e.file_name();
        // Outputs of a build in the source tree (`deploy`, `deploy-jobset`,
        // `build`) are not part of the example.
        let n = file_name.to_string_lossy();
        if n.starts_with("deploy") || n.starts_with("build") {
            continue;
        }
        let to = dir.path().join(&file_name);
        if e.file_type().expect("type").is_dir() {
            copy_tree(&e.path(), &to);
        } else {
            std::fs::copy(e.path(), &to).expect("copy");
        }
    }
    dir
}

/// Builds an example into a fresh directory and returns the tree of its
/// output directory.
pub fn build_example(name: &str) -> (tempfile::TempDir, BTreeMap<String, Vec<u8>>) {
    let dir = scratch_example(name);
    let o = run(dir.path(), &["build"]);
    assert!(o.status.success(), "build failed: {}", stderr(&o));
    let tree = read_tree(&output_of(dir.path()));
    (dir, tree)
}

/// The output directory of the project in `dir`.
pub fn output_of(dir: &Path) -> PathBuf {
    dir.join(project_output(&dir.join("trainc.yaml")))
}

/// Builds an example for another target (see [`build_variant`]) and
/// returns the output tree.
pub fn build_example_for(
    name: &str,
    target: &'static str,
) -> (tempfile::TempDir, BTreeMap<String, Vec<u8>>) {
    let (dir, output) = build_variant(name, Variant::Target(target));
    let tree = read_tree(&output);
    (dir, tree)
}

/// The tool, or `None` (skip) when it is missing outside CI.
pub fn tool(env: &str, name: &str) -> Option<PathBuf> {
    let candidates = std::env::var_os(env).map(PathBuf::from).into_iter().chain(
        std::env::var_os("PATH").into_iter().flat_map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join(name))
                .collect::<Vec<_>>()
        }),
    );
    for c in candidates {
        if c.is_file() {
            return Some(c);
        }
    }
    assert!(
        std::env::var_os("TRAINC_REQUIRE_TOOLS").is_none(),
        "{name} is required (set {env} or put it on PATH); `bash tests/run.sh` installs it"
    );
    eprintln!("skipping: {name} not found (run `bash tests/run.sh` to install it)");
    None
}

/// How a project is built for a target other than its own.
#[derive(Debug, Clone, Copy)]
pub enum Variant {
    /// `trainc build --project FILE`, a project file shipped beside
    /// `trainc.yaml`.
    Project(&'static str),
    /// Every job built for this target: `defaults.target` in the project
    /// file, and any `target:` a definition sets replaced.
    Target(&'static str),
    /// As `Target`, for the project file named first.
    ProjectFor(&'static str, &'static str),
    /// `trainc build` as the project stands, and the output directory of
    /// one of its variants, whose jobs are of this target.
    Output(&'static str, &'static str),
}

/// The builds whose output holds custom resources (JobSets, TFJobs,
/// PyTorchJobs, TrainJobs and their TrainingRuntimes); checked
/// by tests/crd.rs against the CRDs and by tests/external.rs with kubectl and
/// kubernetes-validate.
pub const CRD_BUILDS: &[(&str, Variant)] = &[
    ("mnist", Variant::Project("trainc.jobset.yaml")),
    ("mnist", Variant::Target("tfjob")),
    ("mnist-cpu", Variant::Target("jobset")),
    ("mnist-cpu", Variant::Target("tfjob")),
    ("kitchen-sink", Variant::Target("jobset")),
    ("kitchen-sink", Variant::Target("tfjob")),
    (
        "mnist",
        Variant::ProjectFor("trainc.collective.yaml", "jobset"),
    ),
    (
        "mnist",
        Variant::ProjectFor("trainc.collective.yaml", "tfjob"),
    ),
    ("storage", Variant::Target("jobset")),
    ("storage", Variant::Target("tfjob")),
    ("pod-settings", Variant::Target("jobset")),
    ("pod-settings", Variant::Target("tfjob")),
    ("resources", Variant::Target("jobset")),
    ("resources", Variant::Target("tfjob")),
    ("variants", Variant::Output("deploy-cpu", "jobset")),
    ("variants", Variant::Output("deploy-staging", "tfjob")),
    ("patches", Variant::Target("jobset")),
    ("patches", Variant::Target("tfjob")),
    ("pytorch", Variant::Project("trainc.jobset.yaml")),
    ("pytorch", Variant::Target("pytorchjob")),
    ("pytorch-gpu", Variant::Target("jobset")),
    ("pytorch-gpu", Variant::Target("pytorchjob")),
    ("pytorch", Variant::Project("trainc.trainjob.yaml")),
    ("pytorch-elastic", Variant::Target("jobset")),
    ("pytorch-elastic", Variant::Target("pytorchjob")),
];

/// The `output:` of a project file (`deploy` when it has none).
pub fn project_output(project: &Path) -> String {
    let text = std::fs::read_to_string(project).expect("read project");
    let value: serde_json::Value = serde_saphyr::from_str(&text).expect("project parses");
    value["output"].as_str().unwrap_or("deploy").to_owned()
}

/// Builds an example as `variant` says, into a fresh directory; returns it
/// and the output directory.
pub fn build_variant(name: &str, variant: Variant) -> (tempfile::TempDir, PathBuf) {
    let dir = scratch_example(name);
    if let Variant::Output(output, _) = variant {
        let o = run(dir.path(), &["build"]);
        assert!(o.status.success(), "{name}: build failed: {}", stderr(&o));
        let output = dir.path().join(output);
        return (dir, output);
    }
    let project = match variant {
        Variant::Output(..) => unreachable!("built above"),
        Variant::Project(file) => file,
        Variant::Target(target) => retarget(name, dir.path(), "trainc.yaml", target),
        Variant::ProjectFor(file, target) => retarget(name, dir.path(), file, target),
    };
    let output = dir.path().join(project_output(&dir.path().join(project)));
    let o = run(dir.path(), &["build", "--project", project]);
    assert!(
        o.status.success(),
        "{name} {variant:?}: build failed: {}",
        stderr(&o)
    );
    (dir, output)
}

/// An example in a fresh directory, as [`scratch_example`], with every job
/// of its project file made to compile for `target`.
pub fn scratch_example_for(name: &str, target: &'static str) -> tempfile::TempDir {
    let dir = scratch_example(name);
    retarget(name, dir.path(), "trainc.yaml", target);
    dir
}

/// Rewrites project file `file` in `dir`, and the definitions of its
/// sources, so that every job compiles for `target`; returns `file`.
fn retarget(name: &str, dir: &Path, file: &'static str, target: &str) -> &'static str {
    let project = dir.join(file);
    let text = std::fs::read_to_string(&project).expect("read project");
    let mut found = 0;
    let mut out = String::new();
    for line in text.lines() {
        // The project's own target, if it has one, gives way.
        if line.starts_with("  target: ") {
            continue;
        }
        out.push_str(line);
        out.push('\n');
        if line == "defaults:" {
            found += 1;
            out.push_str(&format!("  target: {target}\n"));
        }
    }
    assert_eq!(found, 1, "{name}: {file} has one `defaults:` block");
    std::fs::write(&project, &out).expect("write project");
    let value: serde_json::Value = serde_saphyr::from_str(&out).expect("project parses");
    let sources: Vec<String> = match value["sources"].as_array() {
        Some(s) => s
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
        None => vec!["jobs".to_owned()],
    };
    // A definition's own `target:` wins over the default.
    for e in sources
        .iter()
        .flat_map(|s| walkdir::WalkDir::new(dir.join(s)))
    {
        let e = e.expect("walk");
        if !e.file_type().is_file() {
            continue;
        }
        let text = std::fs::read_to_string(e.path()).expect("read definition");
        let replaced: String = text
            .lines()
            .map(|l| {
                if l.starts_with("  target: ") {
                    format!("  target: {target}\n")
                } else {
                    format!("{l}\n")
                }
            })
            .collect();
        std::fs::write(e.path(), replaced).expect("write definition");
    }
    file
}

/// Every build the external checks judge: the examples and the fixture for
/// their own targets, then for the custom-resource targets. Label,
/// directory (kept alive), output directory.
#[allow(dead_code)]
pub fn every_build() -> Vec<(String, tempfile::TempDir, PathBuf)> {
    let mut out = Vec::new();
    for example in [
        "mnist",
        "mnist-cpu",
        "kitchen-sink",
        "storage",
        "pod-settings",
        "resources",
        "variants",
        "patches",
        "pytorch",
        "pytorch-gpu",
        "pytorch-elastic",
    ] {
        let (dir, _) = build_example(example);
        let deploy = output_of(dir.path());
        out.push((example.to_owned(), dir, deploy));
    }
    {
        let (dir, deploy) = build_variant("mnist", Variant::Project("trainc.collective.yaml"));
        out.push(("mnist collective".to_owned(), dir, deploy));
    }
    for &(example, variant) in CRD_BUILDS {
        let (dir, deploy) = build_variant(example, variant);
        out.push((format!("{example} {variant:?}"), dir, deploy));
    }
    out
}

/// A Python with PyYAML, or `None` (skip) outside CI.
pub fn pyyaml() -> Option<PathBuf> {
    let candidates = std::env::var_os("TRAINC_PYYAML")
        .map(PathBuf::from)
        .into_iter()
        .chain([root().join("target/tools/venv/bin/python")]);
    for python in candidates {
        let ok = Command::new(&python)
            .args(["-c", "import yaml"])
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return Some(python);
        }
    }
    assert!(
        std::env::var_os("TRAINC_REQUIRE_TOOLS").is_none(),
        "PyYAML is required (set TRAINC_PYYAML to a Python that has it); `bash tests/run.sh` installs it"
    );
    eprintln!("skipping: no Python with PyYAML (run `bash tests/run.sh` to install it)");
    None
}

/// Python that turns what PyYAML loaded into plain JSON values, `plain(v,
/// where)`, failing on any key that is not a string and any value JSON does
/// not have (a date, bytes): the start of the PyYAML scripts of the tests.
pub const PYYAML_PLAIN: &str = r#"
import json, sys, yaml
def plain(v, where):
    if isinstance(v, dict):
        for k in v:
            if not isinstance(k, str):
                sys.exit(f"{where}: key {k!r} is a {type(k).__name__}")
        return {k: plain(x, where) for k, x in v.items()}
    if isinstance(v, list):
        return [plain(x, where) for x in v]
    if v is None or isinstance(v, (str, bool, int, float)):
        return v
    sys.exit(f"{where}: {v!r} is a {type(v).__name__}")
"#;

/// Runs git in `dir` as a test's own user, whatever the machine's git
/// configuration says; panics when git fails.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "trainc tests")
        .env("GIT_AUTHOR_EMAIL", "tests@trainc.invalid")
        .env("GIT_COMMITTER_NAME", "trainc tests")
        .env("GIT_COMMITTER_EMAIL", "tests@trainc.invalid")
        .output()
        .expect("git runs");
    assert!(o.status.success(), "git {}: {}", args.join(" "), stderr(&o));
    stdout(&o)
}

/// A git repository holding a scratch copy of an example, committed on
/// `main` (with its output built and committed when `with_output`), and
/// checked out on a new branch `pr`: a pull request about to be made.
pub fn pull_request(name: &str, with_output: bool) -> tempfile::TempDir {
    let dir = scratch_example(name);
    git(dir.path(), &["init", "--quiet", "--initial-branch=main"]);
    if with_output {
        let o = run(dir.path(), &["build"]);
        assert!(o.status.success(), "build failed: {}", stderr(&o));
    }
    commit_all(dir.path(), "the base");
    git(dir.path(), &["checkout", "--quiet", "-b", "pr"]);
    dir
}

/// Commits every file of the work tree.
pub fn commit_all(dir: &Path, message: &str) {
    git(dir, &["add", "--all"]);
    git(dir, &["commit", "--quiet", "--allow-empty", "-m", message]);
}

/// Replaces `from` by `to` in a file, which must hold it.
pub fn edit(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).expect("read");
    assert!(text.contains(from), "{} holds no {from:?}", path.display());
    std::fs::write(path, text.replacen(from, to, 1)).expect("write");
}

/// The PyTorch example's pull request of the tests of `--base`: a smaller
/// learning rate, built and committed on `pr`.
pub fn tuned_pull_request() -> tempfile::TempDir {
    let dir = pull_request("pytorch", true);
    edit(
        &dir.path().join("jobs/digits.yaml"),
        "learning_rate: 0.05",
        "learning_rate: 0.02",
    );
    let o = run(dir.path(), &["build"]);
    assert!(o.status.success(), "build failed: {}", stderr(&o));
    commit_all(dir.path(), "tune");
    dir
}
