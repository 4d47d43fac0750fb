//! The build cache: a no-op build that compiles nothing, and never a
//! different answer than a build without it.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, SystemTime};

use common::{read_tree, scratch_example, stderr, stdout};

/// The mnist project, built once with a cache of its own.
struct Project {
    dir: tempfile::TempDir,
    cache: tempfile::TempDir,
}

impl Project {
    fn built() -> Self {
        let p = Self {
            dir: scratch_example("mnist"),
            cache: tempfile::tempdir().expect("tempdir"),
        };
        let o = p.run(&["build", "-v"]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(
            stderr(&o),
            "cache: compiling, because no record of an earlier build\n"
        );
        p
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn run(&self, args: &[&str]) -> Output {
        self.run_with_cache(self.cache.path(), args)
    }

    /// `run` with another cache directory.
    /// `args` run with the project's cache, then with none.
    fn both(&self, args: &[&str]) -> (Output, Output) {
        (self.run(args), self.run_with_cache("", args))
    }

    fn run_with_cache(&self, cache: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> Output {
        common::trainc()
            .current_dir(self.path())
            .env("TRAINC_CACHE_DIR", cache)
            .args(args)
            .output()
            .expect("trainc runs")
    }

    /// The records.
    fn records(&self) -> Vec<PathBuf> {
        let dir = self.cache.path().join("builds");
        let mut out: Vec<PathBuf> = fs::read_dir(dir)
            .map(|d| d.filter_map(Result::ok).map(|e| e.path()).collect())
            .unwrap_or_default();
        out.retain(|p| p.extension().is_some_and(|e| e == "rec"));
        out.sort();
        out
    }

    /// `build --check -v`, with and without the cache: the exit codes and
    /// reports must agree. Returns the cached run.
    fn check_agrees(&self) -> Output {
        let cached = self.run(&["build", "--check", "-v"]);
        let uncached = self.run(&["build", "--check", "--no-cache"]);
        assert_eq!(
            cached.status.code(),
            uncached.status.code(),
            "{}",
            stderr(&cached)
        );
        assert_eq!(stdout(&cached), stdout(&uncached));
        cached
    }

    fn edit(&self, file: &str, from: &str, to: &str) {
        let path = self.path().join(file);
        let text = fs::read_to_string(&path).expect("read");
        assert!(text.contains(from), "{from} in {file}");
        fs::write(&path, text.replacen(from, to, 1)).expect("write");
    }
}

const HIT: &str = "cache: the output is as the last build left it\n";

fn mtimes(dir: &Path) -> Vec<(PathBuf, SystemTime)> {
    walkdir::WalkDir::new(dir)
        .sort_by_file_name()
        .into_iter()
        .map(|e| {
            let e = e.expect("walk");
            (
                e.path().to_path_buf(),
                e.metadata().expect("stat").modified().expect("mtime"),
            )
        })
        .collect()
}

/// The lines of a run's stderr but the cache's own (`cache: …`), which
/// only a run with the cache prints.
fn findings(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| !l.starts_with("cache: "))
        .collect()
}

#[test]
fn a_second_build_is_answered_by_the_cache_and_writes_nothing() {
    let p = Project::built();
    assert_eq!(p.records().len(), 1);
    let before = (
        mtimes(&p.path().join("deploy")),
        mtimes(&p.path().join("build")),
    );
    for args in [&["build", "-v"][..], &["build", "--check", "-v"]] {
        let o = p.run(args);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(
            stdout(&o),
            "deploy and build are up to date (15 and 3 files)\n"
        );
        assert_eq!(stderr(&o), HIT, "{args:?}");
    }
    // The same output as a build without the cache, in every format.
    for args in [
        &["build", "--format", "json"][..],
        &["build", "--check", "--format", "json"],
    ] {
        let uncached = p.run(&[args, &["--no-cache"]].concat());
        assert_eq!(stdout(&p.run(args)), stdout(&uncached), "{args:?}");
    }
    let after = (
        mtimes(&p.path().join("deploy")),
        mtimes(&p.path().join("build")),
    );
    assert_eq!(before, after);

    // Without the cache: the same answer, by compiling, and no record.
    let o = p.run(&["build", "--no-cache", "-v"]);
    assert_eq!(
        stdout(&o),
        "deploy and build are up to date (15 and 3 files)\n"
    );
    assert_eq!(stderr(&o), "cache: compiling, because of --no-cache\n");
}

/// What is changed, how, and what `build -v` says.
type Change<'a> = (&'a str, &'a dyn Fn(&Project), &'a str);

/// Every kind of input change is seen, and each answer is the one a build
/// without the cache gives.
#[test]
fn every_input_is_part_of_the_key() {
    let p = Project::built();
    let changes: [Change; 5] = [
        (
            "a hyperparameter",
            &|p| {
                p.edit(
                    "jobs/mnist.yaml",
                    "learning_rate: 0.001",
                    "learning_rate: 0.01",
                )
            },
            "cache: re-rendering 1 job of 1, because jobs/mnist.yaml changed\n",
        ),
        (
            "the project's defaults",
            &|p| {
                p.edit(
                    "trainc.yaml",
                    "namespace: ml",
                    "namespace: ml\n  labels: {team: vision}",
                )
            },
            "cache: compiling, because the project, library or trainc changed\n",
        ),
        (
            "a new definition file",
            &|p| {
                fs::copy(
                    common::example("mnist-cpu").join("jobs/mnist-cpu.yaml"),
                    p.path().join("jobs/mnist-cpu.yaml"),
                )
                .map(drop)
                .expect("copy");
            },
            "cache: re-rendering 1 job of 2, because jobs/mnist-cpu.yaml is new\n",
        ),
        (
            "the training code",
            &|p| p.edit("train/mnist.py", "import", "import os  # noqa\nimport"),
            "cache: compiling, because the build context train changed\n",
        ),
        (
            "a library override",
            &|p| {
                p.edit(
                    "trainc.yaml",
                    "output: deploy",
                    "output: deploy\nlibrary: lib",
                );
                fs::create_dir_all(p.path().join("lib/templates")).expect("mkdir");
                let builtin = common::root().join("library/templates/Dockerfile.j2");
                let text = fs::read_to_string(builtin).expect("read");
                fs::write(
                    p.path().join("lib/templates/Dockerfile.j2"),
                    text.replacen("\n", "\n# our base image policy\n", 1),
                )
                .expect("write");
            },
            "cache: compiling, because the project, library or trainc changed\n",
        ),
    ];
    for (what, change, why) in changes {
        change(&p);
        let o = p.check_agrees();
        assert_eq!(o.status.code(), Some(1), "{what}: {}", stdout(&o));
        assert_eq!(stderr(&o), why, "{what}");
        let o = p.run(&["build"]);
        assert!(o.status.success(), "{what}: {}", stderr(&o));
        let o = p.check_agrees();
        assert_eq!(o.status.code(), Some(0), "{what}");
        assert_eq!(stderr(&o), HIT, "{what}");
    }
}

/// Files the context ignores are not part of the key: a `__pycache__`, or
/// `.git` in a context at the project root, changes with every run or commit.
#[test]
fn ignored_context_files_keep_the_output_current() {
    let p = Project::built();
    fs::write(p.path().join("train/README.md"), "notes\n").expect("write");
    fs::create_dir(p.path().join("train/__pycache__")).expect("mkdir");
    fs::write(p.path().join("train/__pycache__/mnist.pyc"), "").expect("write");
    let o = p.check_agrees();
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(stderr(&o), HIT);
}

/// A cache that overlaps an output directory or is reachable from a build
/// context would change what it records: it is not used there.
#[test]
fn a_cache_inside_the_output_or_a_context_is_not_used() {
    let p = Project::built();
    for (dir, why) in [
        (
            "deploy/.cache",
            "cache: compiling, because the cache directory and deploy overlap\n",
        ),
        (
            "train/.cache",
            "cache: compiling, because no record of an earlier build\ncache: not recorded, because the build context train reaches into the cache directory; leave it out in the context's .dockerignore\n",
        ),
        // Relative, and below an output directory that does not exist yet.
        (
            "new-out/.cache",
            "cache: compiling, because the cache directory and new-out overlap\n",
        ),
    ] {
        let args: &[&str] = if dir.starts_with("new-out") {
            &["build", "-v", "-o", "new-out"]
        } else {
            &["build", "-v"]
        };
        for _ in 0..2 {
            let o = p.run_with_cache(dir, args);
            assert!(o.status.success(), "{}", stderr(&o));
            assert_eq!(stderr(&o), why);
            assert!(!p.path().join(dir).exists(), "{dir}");
        }
    }
    // Named through an output directory, but not in it: used, and nothing
    // is created in the output.
    let dotted = "deploy/zz/../../.cache2";
    assert!(p.run_with_cache(dotted, &["build"]).status.success());
    assert_eq!(stderr(&p.run_with_cache(dotted, &["build", "-v"])), HIT);
    assert!(!p.path().join("deploy/zz").exists());
    assert!(p.path().join(".cache2/builds").is_dir());

    // Inside a context that leaves it out: used.
    let ignore = p.path().join("train/.dockerignore");
    let text = fs::read_to_string(&ignore).expect("read");
    fs::write(&ignore, format!("{text}.cache\n")).expect("write");
    assert!(
        p.run_with_cache("train/.cache", &["build"])
            .status
            .success()
    );
    assert_eq!(
        stderr(&p.run_with_cache("train/.cache", &["build", "-v"])),
        HIT
    );
    fs::remove_dir_all(p.path().join("train/.cache")).expect("rm");
    fs::write(&ignore, text).expect("write");
    assert!(p.run(&["build"]).status.success());
    // The cache's own directory as the output.
    let cache = p.cache.path().to_str().expect("UTF-8");
    let builds = format!("{cache}/builds");
    let o = p.run(&["build", "-v", "-o", &builds]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        format!("cache: compiling, because the cache directory and {builds} overlap\n")
    );

    // Through a symlink in the context, out of the repository: refused
    // (a context stays inside the repository, docs/output.md).
    std::os::unix::fs::symlink(p.cache.path(), p.path().join("train/cache")).expect("symlink");
    let o = p.run(&["build"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("outside the repository"),
        "{}",
        stderr(&o)
    );
    // Through a symlink to a cache inside the repository: the build would
    // take the records into the image (as it would any file there), so
    // none is written.
    fs::remove_file(p.path().join("train/cache")).expect("rm");
    fs::create_dir(p.path().join("cache")).expect("mkdir");
    std::os::unix::fs::symlink("../cache", p.path().join("train/cache")).expect("symlink");
    let inside = p.path().join("cache");
    assert!(p.run_with_cache(&inside, &["build"]).status.success());
    for _ in 0..2 {
        let o = p.run_with_cache(&inside, &["build", "-v"]);
        assert_eq!(
            stdout(&o),
            "deploy and build are up to date (15 and 3 files)\n"
        );
        assert!(
            stderr(&o).ends_with(
                "cache: not recorded, because the build context train reaches into the cache directory; leave it out in the context's .dockerignore\n"
            ),
            "{}",
            stderr(&o)
        );
    }
}

#[test]
fn a_reverted_edit_is_rebuilt_to_the_original() {
    let p = Project::built();
    let original = read_tree(&p.path().join("deploy"));
    p.edit(
        "jobs/mnist.yaml",
        "learning_rate: 0.001",
        "learning_rate: 0.01",
    );
    assert!(p.run(&["build"]).status.success());
    assert_ne!(read_tree(&p.path().join("deploy")), original);
    p.edit(
        "jobs/mnist.yaml",
        "learning_rate: 0.01",
        "learning_rate: 0.001",
    );
    let o = p.run(&["build", "-v"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).starts_with("updated deploy:"), "{}", stdout(&o));
    assert_eq!(read_tree(&p.path().join("deploy")), original);
}

/// Changes to the output are found however they are made: the same bytes
/// count with any timestamps, other bytes with any timestamps do not.
#[test]
fn output_edits_are_seen_even_with_size_and_mtime_kept() {
    let p = Project::built();
    let file = p.path().join("deploy/ml/mnist/kustomization.yaml");
    let old = fs::read_to_string(&file).expect("read");
    let mtime = fs::metadata(&file)
        .expect("stat")
        .modified()
        .expect("mtime");

    // Same size, same mtime, other bytes: only the ctime tells.
    std::thread::sleep(Duration::from_millis(20));
    fs::write(&file, old.replacen("ml", "mL", 1)).expect("write");
    fs::File::options()
        .write(true)
        .open(&file)
        .and_then(|f| f.set_modified(mtime))
        .expect("set mtime");
    let o = p.check_agrees();
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        "cache: compiling, because deploy changed since the last build: ml/mnist/kustomization.yaml was edited\n"
    );

    // The same bytes again, written anew: current, and the record is
    // refreshed so the next check need not hash the file.
    fs::write(&file, &old).expect("write");
    for _ in 0..2 {
        let o = p.check_agrees();
        assert_eq!(o.status.code(), Some(0));
        assert_eq!(stderr(&o), HIT);
    }

    // A generated file that would be pruned, a hand-written one, a missing
    // one, a symlink: each is a difference.
    let stray = p.path().join("deploy/ml/mnist/configmap-old.yaml");
    fs::write(
        &stray,
        "# Code generated by trainc from jobs/mnist.yaml. DO NOT EDIT.\napiVersion: v1\nkind: ConfigMap\n",
    )
    .expect("write");
    let o = p.check_agrees();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).ends_with("ml/mnist/configmap-old.yaml is new\n"),
        "{}",
        stderr(&o)
    );
    fs::remove_file(&stray).expect("rm");

    fs::write(p.path().join("deploy/NOTES.md"), "ours\n").expect("write");
    assert_eq!(p.check_agrees().status.code(), Some(0));
    assert!(p.run(&["build"]).status.success());
    assert_eq!(
        stderr(&p.check_agrees()),
        HIT,
        "the note is in the new record"
    );

    fs::remove_file(&file).expect("rm");
    let o = p.check_agrees();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).ends_with("ml/mnist/kustomization.yaml is gone\n"),
        "{}",
        stderr(&o)
    );
    assert!(p.run(&["build"]).status.success());

    let dir = p.path().join("deploy/ml/mnist");
    let moved = p.path().join("elsewhere");
    fs::rename(&dir, &moved).expect("mv");
    std::os::unix::fs::symlink(&moved, &dir).expect("symlink");
    let o = p.check_agrees();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn a_broken_or_unwritable_cache_never_fails_a_build() {
    let p = Project::built();
    let [record] = p.records().try_into().expect("one record");
    for (text, why) in [
        ("{not json", "the record is damaged"),
        (
            r#"{"format": 1, "key": "x"}"#,
            "the record is from another version of trainc",
        ),
    ] {
        fs::write(&record, text).expect("write");
        let o = p.run(&["build", "-v"]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(stderr(&o), format!("cache: compiling, because {why}\n"));
        assert_eq!(stderr(&p.run(&["build", "-v"])), HIT);
    }
    // A record cut short, with a byte changed or gone (read by the
    // incremental build an edit makes, hence the edit) is not believed:
    // the build compiles everything, as without the cache, and records
    // anew.
    let before = p.output();
    let mut rate = ["0.001", "0.002"];
    for damage in ["cut", "changed", "gone"] {
        let mut bytes = fs::read(&record).expect("read");
        match damage {
            "cut" => bytes.truncate(bytes.len() / 2),
            "gone" => bytes.clear(),
            _ => {
                let i = bytes.len() - 30;
                bytes[i] ^= 0x01;
            }
        }
        if bytes.is_empty() {
            fs::remove_file(&record).expect("rm");
        } else {
            fs::write(&record, &bytes).expect("write");
        }
        p.edit(
            "jobs/mnist.yaml",
            &format!("learning_rate: {}", rate[0]),
            &format!("learning_rate: {}", rate[1]),
        );
        rate.reverse();
        let o = p.run(&["build", "-v"]);
        assert!(o.status.success(), "{damage}: {}", stderr(&o));
        let why = if damage == "gone" {
            "no record of an earlier build"
        } else {
            "the record is damaged"
        };
        assert_eq!(
            stderr(&o),
            format!("cache: compiling, because {why}\n"),
            "{damage}"
        );
        assert_eq!(p.output(), p.fresh_output(), "{damage}");
        assert_eq!(stderr(&p.run(&["build", "-v"])), HIT, "{damage}");
        assert_eq!(
            p.records(),
            std::slice::from_ref(&record),
            "{damage}: the record is replaced"
        );
    }
    if rate[0] != "0.001" {
        p.edit(
            "jobs/mnist.yaml",
            "learning_rate: 0.002",
            "learning_rate: 0.001",
        );
    }
    assert!(p.run(&["build"]).status.success());
    assert_eq!(p.output(), before);

    // A cache directory that cannot be created: builds work, uncached.
    let file = p.cache.path().join("a-file");
    fs::write(&file, "").expect("write");
    for _ in 0..2 {
        let o = p.run_with_cache(file.join("cache"), &["build", "-v"]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(
            stdout(&o),
            "deploy and build are up to date (15 and 3 files)\n"
        );
        let err = stderr(&o);
        assert!(
            err.starts_with(
                "cache: compiling, because no record of an earlier build\ncache: not recorded, because cannot write "
            ),
            "{err}"
        );
    }

    // An empty TRAINC_CACHE_DIR turns the cache off.
    let o = p.run_with_cache("", &["build", "-v"]);
    assert!(o.status.success());
    assert_eq!(
        stderr(&o),
        "cache: compiling, because TRAINC_CACHE_DIR is empty, which turns it off\n"
    );
}

/// pre-commit builds its own trainc for the hook: it and the one on `PATH`
/// keep a record each, instead of evicting each other's.
#[test]
fn each_trainc_binary_has_its_own_record() {
    let p = Project::built();
    let bin = tempfile::tempdir().expect("tempdir");
    let hook = bin.path().join("trainc");
    fs::copy(env!("CARGO_BIN_EXE_trainc"), &hook).expect("copy");
    let run_hook = || {
        std::process::Command::new(&hook)
            .current_dir(p.path())
            .env("TRAINC_CACHE_DIR", p.cache.path())
            .args(["build", "--check", "-v"])
            .output()
            .expect("the copy runs")
    };
    let o = run_hook();
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        stderr(&o),
        "cache: compiling, because no record of an earlier build\n"
    );
    assert_eq!(p.records().len(), 2);
    for _ in 0..2 {
        assert_eq!(stderr(&run_hook()), HIT);
        assert_eq!(stderr(&p.run(&["build", "-v"])), HIT);
    }
}

/// `-o` elsewhere and the project's own output are separate records.
#[test]
fn each_output_directory_has_its_own_record() {
    let p = Project::built();
    assert!(p.run(&["build", "-o", "other"]).status.success());
    assert_eq!(p.records().len(), 2);
    assert_eq!(stderr(&p.run(&["build", "-v"])), HIT);
    let o = p.run(&["build", "-o", "other", "-v"]);
    assert_eq!(stdout(&o), "other is up to date (15 files)\n");
    assert_eq!(stderr(&o), HIT);
}

/// A bind mount is another name for a directory that resolving symlinks
/// cannot see: a cache mounted into a context is still not written. Needs
/// unprivileged user namespaces (`unshare -rm`); skipped without them.
#[test]
fn a_cache_bind_mounted_into_a_context_is_not_written() {
    let usable = std::process::Command::new("unshare")
        .args(["-rm", "true"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !usable {
        eprintln!("skipping: `unshare -rm` is not available here");
        return;
    }
    let p = Project::built();
    let outside = tempfile::tempdir().expect("tempdir");
    fs::create_dir(p.path().join("train/mnt")).expect("mkdir");
    let script = format!(
        "mount --bind '{}' train/mnt && '{}' build && '{}' build -v && '{}' build -v",
        outside.path().display(),
        env!("CARGO_BIN_EXE_trainc"),
        env!("CARGO_BIN_EXE_trainc"),
        env!("CARGO_BIN_EXE_trainc"),
    );
    let o = std::process::Command::new("unshare")
        .args(["-rm", "sh", "-c", &script])
        .current_dir(p.path())
        .env("TRAINC_CACHE_DIR", outside.path().join(".cache"))
        .output()
        .expect("unshare runs");
    assert!(o.status.success(), "{}", stderr(&o));
    let not_recorded = "cache: not recorded, because the build context train reaches into the cache directory; leave it out in the context's .dockerignore\n";
    let run = format!("cache: compiling, because no record of an earlier build\n{not_recorded}");
    assert_eq!(stderr(&o), run.repeat(2));
    // The tag settled: the last two builds found nothing to write.
    assert!(
        stdout(&o).ends_with(
            "deploy and build are up to date (15 and 3 files)\ndeploy and build are up to date (15 and 3 files)\n"
        ),
        "{}",
        stdout(&o)
    );
}

/// A records directory that is a symlink (left by someone, or pointing
/// into the repository) is neither written through nor swept: the old
/// record-like files where it points stay, and the build says why it kept
/// no record. The build itself is not affected.
#[test]
fn a_symlinked_records_directory_is_never_swept() {
    let dir = scratch_example("mnist");
    let cache = tempfile::tempdir().expect("tempdir");
    let victim = tempfile::tempdir().expect("tempdir");
    let old = SystemTime::now() - Duration::from_secs(90 * 24 * 3600);
    let names = ["0123456789abcdef0123456789abcdef.json", ".record-a1B2c3"];
    for name in names {
        let f = fs::File::create(victim.path().join(name)).expect("create");
        f.set_modified(old).expect("mtime");
    }
    std::os::unix::fs::symlink(victim.path(), cache.path().join("builds")).expect("symlink");
    for _ in 0..2 {
        let o = common::trainc()
            .current_dir(dir.path())
            .env("TRAINC_CACHE_DIR", cache.path())
            .args(["build", "-v"])
            .output()
            .expect("trainc runs");
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("cache: not recorded, because ")
                && stderr(&o).contains("the cache never writes through one"),
            "{}",
            stderr(&o)
        );
    }
    let mut left: Vec<String> = fs::read_dir(victim.path())
        .expect("read")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    let mut want = names.map(String::from).to_vec();
    want.sort();
    assert_eq!(left, want, "nothing swept");
}

// Incremental builds: after an edit, only the definition files that changed
// are compiled; the others' files are taken from the record. Every answer is
// the one a build without the cache gives, and every output the one a fresh
// build writes.

impl Project {
    /// The mnist project with `n` jobs, one per file (`jobs/mnist.yaml`
    /// and `jobs/job-1.yaml`…, each building its image), built once.
    fn many(n: usize) -> Self {
        let p = Self {
            dir: scratch_example("mnist"),
            cache: tempfile::tempdir().expect("tempdir"),
        };
        let text = fs::read_to_string(p.path().join("jobs/mnist.yaml")).expect("read");
        for i in 1..n {
            let copy = text.replacen("name: mnist\n", &format!("name: job-{i}\n"), 1);
            fs::write(p.path().join(format!("jobs/job-{i}.yaml")), copy).expect("write");
        }
        let o = p.run(&["build"]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(stderr(&p.run(&["build", "-v"])), HIT);
        p
    }

    /// Changes the learning rate of `jobs/<file>.yaml` from `from` to `to`
    /// and builds: the build succeeds and re-renders that file's one job of
    /// `jobs`.
    fn build_after_rate_edit(&self, file: &str, from: &str, to: &str, jobs: usize) {
        self.edit(
            &format!("jobs/{file}.yaml"),
            &format!("learning_rate: {from}"),
            &format!("learning_rate: {to}"),
        );
        let o = self.run(&["build", "-v"]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(
            stderr(&o),
            format!("cache: re-rendering 1 job of {jobs}, because jobs/{file}.yaml changed\n")
        );
    }

    /// `diff` with and without the cache (`diff` has no `--no-cache`; an
    /// empty `TRAINC_CACHE_DIR` turns it off): the same report, the same
    /// exit code. Returns the report.
    fn diff_agrees(&self, args: &[&str]) -> String {
        let args = [&["diff"][..], args].concat();
        let cached = self.run(&args);
        let uncached = self.run_with_cache("", &args);
        assert_eq!(cached.status.code(), uncached.status.code());
        assert_eq!(stdout(&cached), stdout(&uncached));
        assert_eq!(stderr(&cached), stderr(&uncached));
        stdout(&cached)
    }

    /// The output directories as a fresh build without the cache writes
    /// them, in a copy of the project without its output.
    fn fresh_output(&self) -> [std::collections::BTreeMap<String, Vec<u8>>; 2] {
        let copy = built_fresh(self.path(), &["jobs", "train"]);
        ["deploy", "build"].map(|d| read_tree(&copy.path().join(d)))
    }

    fn output(&self) -> [std::collections::BTreeMap<String, Vec<u8>>; 2] {
        ["deploy", "build"].map(|d| read_tree(&self.path().join(d)))
    }

    /// The files below `dir` whose mtime is not what `before` says, or
    /// that are new or gone.
    fn touched(&self, before: &[(PathBuf, SystemTime)], dir: &str) -> Vec<String> {
        let after = mtimes(&self.path().join(dir));
        let mut out: Vec<String> = after
            .iter()
            .filter(|e| !before.contains(e))
            .chain(before.iter().filter(|e| !after.iter().any(|a| a.0 == e.0)))
            .filter(|(p, _)| p.is_file() || !p.exists())
            .map(|(p, _)| {
                p.strip_prefix(self.path())
                    .expect("below")
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

/// One definition of several edited: `build --check`, `diff` and `build`
/// compile it alone, say so, and agree with a build without the cache; the
/// build rewrites only that job's files, and the output is what a fresh
/// build writes.
#[test]
fn an_edit_compiles_only_the_file_that_changed() {
    let p = Project::many(4);
    let before = mtimes(&p.path().join("deploy"));
    let build_before = mtimes(&p.path().join("build"));
    p.edit(
        "jobs/job-2.yaml",
        "learning_rate: 0.001",
        "learning_rate: 0.01",
    );
    let why = "cache: re-rendering 1 job of 4, because jobs/job-2.yaml changed\n";
    let o = p.check_agrees();
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stderr(&o), why);
    assert_eq!(
        stdout(&o),
        "deploy is stale: 0 created, 8 updated, 0 deleted, 49 unchanged\n\
         ~ deploy/ml/job-2/configmap-job-2-cluster-spec.yaml\n\
         ~ deploy/ml/job-2/job-job-2-chief-0.yaml\n\
         ~ deploy/ml/job-2/job-job-2-ps-0.yaml\n\
         ~ deploy/ml/job-2/job-job-2-ps-1.yaml\n\
         ~ deploy/ml/job-2/job-job-2-worker-0.yaml\n\
         ~ deploy/ml/job-2/job-job-2-worker-1.yaml\n\
         ~ deploy/ml/job-2/networkpolicy-job-2.yaml\n\
         ~ deploy/ml/job-2/service-job-2.yaml\n\
         build is up to date (9 files)\n\
         run `trainc build` and commit the result\n"
    );
    let report = p.diff_agrees(&[]);
    assert!(report.contains("re-run ml/job-2: "), "{report}");
    assert!(!report.contains("ml/job-1"), "{report}");
    assert_eq!(
        p.diff_agrees(&["--format", "json"]),
        stdout(&p.run_with_cache("", &["diff", "--format", "json"]))
    );

    let o = p.run(&["build", "-v"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stderr(&o), why);
    let touched = p.touched(&before, "deploy");
    assert!(!touched.is_empty());
    assert!(
        touched.iter().all(|t| t.starts_with("deploy/ml/job-2/")),
        "{touched:?}"
    );
    assert_eq!(p.touched(&build_before, "build"), Vec::<String>::new());
    assert_eq!(p.output(), p.fresh_output());
    // Recorded: the next build is a no-op again.
    assert_eq!(stderr(&p.check_agrees()), HIT);
    assert_eq!(stderr(&p.run(&["build", "-v"])), HIT);
}

/// Among hundreds of definition files, whose paths differ in a digit or
/// two, an edit still finds each file's record and patches: one job
/// re-rendered, the output a fresh build's, and the record it writes
/// serves the next edit and the next no-op.
#[test]
fn an_edit_among_hundreds_of_files_is_patched() {
    let p = Project::many(300);
    for (file, from, to) in [
        ("job-150", "0.001", "0.01"),
        ("job-15", "0.001", "0.01"),
        ("job-150", "0.01", "0.02"),
    ] {
        p.build_after_rate_edit(file, from, to, 300);
        assert_eq!(stderr(&p.run(&["build", "-v"])), HIT);
    }
    assert_eq!(p.output(), p.fresh_output());
}

/// An edit made once the last build's files are no longer racy, as in
/// everyday use: the record written after it vouches for the output like
/// any other. So does the record a no-op rewrites after hashing files
/// again (here: after a `touch`).
#[test]
fn a_record_after_a_settled_edit_vouches_for_the_output() {
    let p = Project::many(6);
    let settle = || std::thread::sleep(Duration::from_millis(120));
    settle();
    for [from, to] in [["0.001", "0.01"], ["0.01", "0.02"], ["0.02", "0.03"]] {
        p.build_after_rate_edit("job-3", from, to, 6);
        assert_eq!(p.output(), p.fresh_output());
        settle();
        assert_eq!(stderr(&p.check_agrees()), HIT);
    }
    let job = p.path().join("deploy/ml/job-1/service-job-1.yaml");
    fs::File::options()
        .append(true)
        .open(&job)
        .and_then(|f| f.set_modified(SystemTime::now()))
        .expect("touch");
    assert_eq!(stderr(&p.run(&["build", "-v"])), HIT);
    assert_eq!(stderr(&p.run(&["build", "-v"])), HIT);
    assert_eq!(p.output(), p.fresh_output());
}

/// Edits that change the files every job shares: a new job (a directory
/// in the root kustomization, an image in the bake file), a renamed job,
/// a definition file removed. Each is compiled alone, and the output is
/// what a fresh build writes.
#[test]
fn new_renamed_and_removed_jobs_update_the_shared_files() {
    let p = Project::many(3);
    let mnist = fs::read_to_string(p.path().join("jobs/mnist.yaml")).expect("read");
    let steps: [Change; 3] = [
        (
            "a new job",
            &|p| {
                let text = mnist.replacen("name: mnist\n", "name: added\n", 1);
                fs::write(p.path().join("jobs/added.yaml"), text).expect("write");
            },
            "cache: re-rendering 1 job of 4, because jobs/added.yaml is new\n",
        ),
        (
            "a renamed job",
            &|p| p.edit("jobs/job-1.yaml", "name: job-1\n", "name: renamed\n"),
            "cache: re-rendering 1 job of 4, because jobs/job-1.yaml changed\n",
        ),
        (
            "a removed definition",
            &|p| fs::remove_file(p.path().join("jobs/job-2.yaml")).expect("rm"),
            "cache: re-rendering 0 jobs of 3, because jobs/job-2.yaml was removed\n",
        ),
    ];
    for (what, step, why) in steps {
        step(&p);
        let o = p.check_agrees();
        assert_eq!(o.status.code(), Some(1), "{what}");
        assert_eq!(stderr(&o), why, "{what}");
        for shared in ["~ deploy/kustomization.yaml\n", "~ build/docker-bake.hcl\n"] {
            assert!(stdout(&o).contains(shared), "{what}: {}", stdout(&o));
        }
        p.diff_agrees(&[]);
        p.diff_agrees(&["--stat"]);
        let o = p.run(&["build", "-v"]);
        assert!(o.status.success(), "{what}: {}", stderr(&o));
        assert_eq!(stderr(&o), why, "{what}");
        assert_eq!(p.output(), p.fresh_output(), "{what}");
        assert_eq!(stderr(&p.check_agrees()), HIT, "{what}");
    }
    let root = String::from_utf8(p.output()[0]["kustomization.yaml"].clone()).expect("UTF-8");
    assert!(
        root.contains("- ml/added\n") && root.contains("- ml/renamed\n"),
        "{root}"
    );
    assert!(!root.contains("job-1") && !root.contains("job-2"), "{root}");
}

/// A job defined twice, in an edited file and in one the cache does not
/// read again: the same located error as without the cache, and nothing
/// written.
#[test]
fn a_duplicate_across_an_edited_and_an_unedited_file_is_found() {
    let p = Project::many(3);
    let before = p.output();
    p.edit("jobs/job-2.yaml", "name: job-2\n", "name: job-1\n");
    for args in [&["build", "-v"][..], &["build", "--check", "-v"], &["diff"]] {
        let (cached, uncached) = p.both(args);
        assert_eq!(cached.status.code(), Some(2), "{args:?}");
        let err = stderr(&cached);
        assert_eq!(findings(&err), findings(&stderr(&uncached)), "{args:?}");
        assert!(err.contains("job `ml/job-1` is defined twice"), "{err}");
        assert!(err.contains("jobs/job-2.yaml:"), "{err}");
        if args.contains(&"-v") {
            assert!(
                err.starts_with(
                    "cache: compiling, because job `ml/job-1` is defined twice; the build will report it\n"
                ),
                "{err}"
            );
        }
    }
    assert_eq!(p.output(), before, "nothing written");
}

/// A generated file of a job whose definition did not change, edited by
/// hand: found although its definition is not compiled again, and put
/// back by the build.
#[test]
fn a_hand_edit_to_an_unchanged_job_is_found() {
    let p = Project::many(3);
    let file = p.path().join("deploy/ml/job-1/kustomization.yaml");
    let old = fs::read_to_string(&file).expect("read");
    fs::write(
        &file,
        old.replacen("resources:", "resources:\n- extra.yaml", 1),
    )
    .expect("write");
    p.edit(
        "jobs/job-2.yaml",
        "learning_rate: 0.001",
        "learning_rate: 0.01",
    );
    let o = p.check_agrees();
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        "cache: compiling, because deploy changed since the last build: ml/job-1/kustomization.yaml was edited\n"
    );
    assert!(stdout(&o).contains("~ deploy/ml/job-1/kustomization.yaml\n"));
    p.diff_agrees(&[]);
    assert!(p.run(&["build"]).status.success());
    assert_eq!(fs::read_to_string(&file).expect("read"), old);
    assert_eq!(p.output(), p.fresh_output());
    assert_eq!(stderr(&p.check_agrees()), HIT);

    // Hand-edited alone, with no definition changed: the same.
    fs::write(
        &file,
        old.replacen("resources:", "resources:\n- extra.yaml", 1),
    )
    .expect("write");
    let o = p.check_agrees();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).ends_with("ml/job-1/kustomization.yaml was edited\n"),
        "{}",
        stderr(&o)
    );
}

/// A definition with warnings is compiled by every build, so that its
/// warnings are shown every time, as without the cache.
#[test]
fn warnings_are_shown_by_every_build() {
    let p = Project::many(3);
    let text = fs::read_to_string(p.path().join("jobs/job-1.yaml")).expect("read");
    let start = text.find("  build:").expect("build");
    let end = text.find("  args:").expect("args");
    let latest = format!(
        "{}  image: registry.example.com/ml/mnist:latest\n{}",
        &text[..start],
        &text[end..]
    );
    fs::write(p.path().join("jobs/job-1.yaml"), latest).expect("write");
    assert!(p.run(&["build"]).status.success());
    p.edit(
        "jobs/job-2.yaml",
        "learning_rate: 0.001",
        "learning_rate: 0.01",
    );
    for args in [&["build", "--check", "-v"][..], &["build", "-v"]] {
        let (cached, uncached) = p.both(args);
        assert_eq!(cached.status.code(), uncached.status.code(), "{args:?}");
        let err = stderr(&cached);
        let mut lines = err.lines();
        // Each file compiled, with why (`build -v`).
        assert_eq!(
            lines.by_ref().take(3).collect::<Vec<_>>(),
            [
                "cache: re-rendering 2 jobs of 3, because jobs/job-2.yaml changed",
                "cache:   jobs/job-1.yaml had warnings, which every build shows",
                "cache:   jobs/job-2.yaml changed",
            ]
        );
        assert_eq!(lines.collect::<Vec<_>>(), findings(&stderr(&uncached)));
        assert!(err.contains("is tagged `latest`"), "{err}");
    }
    assert_eq!(p.output(), p.fresh_output());
}

/// A build that warned is never vouched for without compiling: the next
/// build, with nothing changed, shows the same warnings as one without the
/// cache, and `--deny-warnings` (or `build --check --deny-warnings`) fails
/// on it, writing nothing. Without the warning, the cache answers again.
#[test]
fn a_build_with_nothing_changed_shows_the_warnings_again() {
    let p = Project::built();
    p.edit(
        "jobs/mnist.yaml",
        "  tensorboard:",
        "  security: {networkPolicy: {enabled: false}}\n  tensorboard:",
    );
    // Refused before anything is written, the cache left as it was.
    let before = (p.output(), p.records());
    let o = p.run(&["build", "--deny-warnings"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("1 warning denied by `--deny-warnings`"),
        "{}",
        stderr(&o)
    );
    assert_eq!((p.output(), p.records()), before);
    let first = p.run(&["build", "-v"]);
    assert!(first.status.success(), "{}", stderr(&first));
    assert!(
        stderr(&first).contains("spec.security.networkPolicy.enabled"),
        "{}",
        stderr(&first)
    );
    let written = p.output();
    for args in [&["build", "-v"][..], &["build", "--check", "-v"]] {
        let (cached, uncached) = p.both(args);
        assert!(cached.status.success(), "{}", stderr(&cached));
        let err = stderr(&cached);
        assert_eq!(
            err.lines().next(),
            Some(
                "cache: re-rendering 1 job of 1, because the last build had warnings, which every build shows"
            )
        );
        assert_eq!(findings(&err), findings(&stderr(&uncached)));
        assert_eq!(findings(&err), findings(&stderr(&first)));
        assert_eq!(stdout(&cached), stdout(&uncached));
    }
    for args in [
        &["build", "--deny-warnings"][..],
        &["build", "--check", "--deny-warnings"],
    ] {
        let (cached, uncached) = p.both(args);
        assert_eq!(cached.status.code(), Some(2), "{args:?}");
        assert_eq!(stderr(&cached), stderr(&uncached), "{args:?}");
    }
    assert_eq!(p.output(), written);
    p.edit(
        "jobs/mnist.yaml",
        "  security: {networkPolicy: {enabled: false}}\n",
        "",
    );
    assert!(p.run(&["build"]).status.success());
    assert_eq!(stderr(&p.run(&["build", "-v"])), HIT);
}

/// Variants: an edit recompiles its file for every variant; the project's
/// own output and each variant's are what a fresh build writes.
#[test]
fn variants_are_built_incrementally() {
    let dir = scratch_example("variants");
    let cache = tempfile::tempdir().expect("tempdir");
    let run = |args: &[&str]| {
        common::trainc()
            .current_dir(dir.path())
            .env("TRAINC_CACHE_DIR", cache.path())
            .args(args)
            .output()
            .expect("trainc runs")
    };
    let dirs = [
        "deploy",
        "build",
        "deploy-cpu",
        "build-cpu",
        "deploy-staging",
    ];
    let trees = |root: &Path| -> Vec<_> { dirs.iter().map(|d| read_tree(&root.join(d))).collect() };
    assert!(run(&["build"]).status.success());
    let path = dir.path().join("jobs/resnet.yaml");
    let text = fs::read_to_string(&path).expect("read");
    let edited = text.replacen("worker: {replicas: 2", "worker: {replicas: 3", 1);
    assert_ne!(edited, text);
    fs::write(&path, edited).expect("write");
    let o = run(&["build", "--check", "-v"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        "cache: re-rendering 1 job of 2, because jobs/resnet.yaml changed\n"
    );
    let uncached = common::trainc()
        .current_dir(dir.path())
        .env("TRAINC_CACHE_DIR", "")
        .args(["build", "--check"])
        .output()
        .expect("trainc runs");
    assert_eq!(stdout(&o), stdout(&uncached));
    let o = run(&["build", "-v"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        "cache: re-rendering 1 job of 2, because jobs/resnet.yaml changed\n"
    );
    let ours = trees(dir.path());
    let fresh = built_fresh(dir.path(), &["jobs", "train", "staging"]);
    assert_eq!(ours, trees(fresh.path()));
    assert_eq!(stderr(&run(&["build", "-v"])), HIT);
}

/// A YAML file of someone else's in the output, which the root
/// kustomization does not list, is warned about by an incremental build
/// as by a full one, although the files of unchanged jobs are not read:
/// beside a job's files (the directory is then not as recorded, and is
/// walked), and in a directory the snapshot does not look into (not one of
/// trainc's names: the patched build looks into it).
#[test]
fn unlisted_yaml_is_warned_about_by_incremental_builds() {
    for (dir, file) in [
        ("deploy/ml/job-1", "extra.yaml"),
        ("deploy/Notes", "extra.yaml"),
    ] {
        let p = Project::many(2);
        fs::create_dir_all(p.path().join(dir)).expect("mkdir");
        fs::write(p.path().join(dir).join(file), "kind: ConfigMap\n").expect("write");
        p.edit(
            "jobs/mnist.yaml",
            "learning_rate: 0.001",
            "learning_rate: 0.01",
        );
        for args in [&["build", "--check", "-v"][..], &["build", "-v"]] {
            let (cached, uncached) = p.both(args);
            assert_eq!(cached.status.code(), uncached.status.code(), "{args:?}");
            let err = stderr(&cached);
            assert!(
                err.starts_with(
                    "cache: re-rendering 1 job of 2, because jobs/mnist.yaml changed\n"
                ),
                "{err}"
            );
            assert!(err.contains(&format!("{dir}/{file}")), "{err}");
            assert_eq!(
                err.lines().skip(1).collect::<Vec<_>>(),
                stderr(&uncached).lines().skip(1).collect::<Vec<_>>()
            );
        }
    }
}

/// An edit that keeps every job where it was patches the output: files
/// added to and dropped from the edited job, nothing else touched, and
/// the output what a fresh build writes, `--check` and `diff` agreeing.
#[test]
fn an_edit_that_adds_and_drops_files_patches_only_its_job() {
    let p = Project::many(3);
    let why = "cache: re-rendering 1 job of 3, because jobs/job-2.yaml changed\n";
    for (from, to, sign) in [
        (
            "replicas: 2, resources: {cpu: \"4\"",
            "replicas: 4, resources: {cpu: \"4\"",
            "+",
        ),
        (
            "replicas: 4, resources: {cpu: \"4\"",
            "replicas: 1, resources: {cpu: \"4\"",
            "-",
        ),
    ] {
        let before = mtimes(&p.path().join("deploy"));
        p.edit("jobs/job-2.yaml", from, to);
        let o = p.check_agrees();
        assert_eq!(o.status.code(), Some(1));
        assert_eq!(stderr(&o), why);
        assert!(
            stdout(&o).contains(&format!("{sign} deploy/ml/job-2/job-job-2-worker-2.yaml\n")),
            "{}",
            stdout(&o)
        );
        p.diff_agrees(&[]);
        let o = p.run(&["build", "-v"]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(stderr(&o), why);
        let touched = p.touched(&before, "deploy");
        assert!(
            touched.iter().all(|t| t.starts_with("deploy/ml/job-2/")),
            "{touched:?}"
        );
        assert_eq!(p.output(), p.fresh_output());
        assert_eq!(stderr(&p.check_agrees()), HIT);
    }
}

/// The build directory removed by hand, then a job edited that writes
/// nothing there: the other jobs' Dockerfiles are found missing and written
/// again, as without the cache.
#[test]
fn a_removed_build_directory_is_found_by_an_edit_that_builds_nothing() {
    let p = Project::many(2);
    let mnist = fs::read_to_string(p.path().join("jobs/mnist.yaml")).expect("read");
    let start = mnist.find("  build:").expect("build");
    let end = mnist.find("  args:").expect("args");
    let cut = mnist.find("  tensorboard:").expect("tensorboard");
    let plain = format!(
        "{}  image: registry.example.com/ml/plain:1.0\n{}",
        &mnist[..start],
        &mnist[end..cut]
    )
    .replacen("name: mnist\n", "name: plain\n", 1);
    fs::write(p.path().join("jobs/plain.yaml"), plain).expect("write");
    assert!(p.run(&["build"]).status.success());
    fs::remove_dir_all(p.path().join("build")).expect("rm");
    p.edit(
        "jobs/plain.yaml",
        "learning_rate: 0.001",
        "learning_rate: 0.01",
    );
    let o = p.check_agrees();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stdout(&o).contains("+ build/docker-bake.hcl\n"),
        "{}",
        stdout(&o)
    );
    assert!(p.run(&["build"]).status.success());
    assert_eq!(p.output(), p.fresh_output());
    assert_eq!(stderr(&p.check_agrees()), HIT);
}

/// An edited job that comes to generate an object another job generates:
/// the patch reads the other job's documents from the record, finds it,
/// and the full build reports it, writing nothing. Also when the other
/// job's record is in a piece the edit would not read otherwise (130
/// files, the other one's last).
#[test]
fn a_generated_name_taken_by_an_edit_is_found() {
    for (n, file) in [(2, "job-1-x.yaml"), (130, "zz-other.yaml")] {
        a_generated_name_taken_by_an_edit_is_found_among(n, file);
    }
}

fn a_generated_name_taken_by_an_edit_is_found_among(n: usize, file: &str) {
    let p = Project::many(n);
    let mnist = fs::read_to_string(p.path().join("jobs/mnist.yaml")).expect("read");
    let other = mnist.replacen("name: mnist\n", "name: job-1-x\n", 1);
    fs::write(p.path().join("jobs").join(file), other).expect("write");
    assert!(p.run(&["build"]).status.success());
    let before = p.output();
    // job-1's volume `x-data` and job-1-x's `data` are one PersistentVolume.
    p.edit("jobs/job-1.yaml", "- name: data\n", "- name: x-data\n");
    for args in [&["build", "-v"][..], &["build", "--check", "-v"], &["diff"]] {
        let (cached, uncached) = p.both(args);
        assert_eq!(
            cached.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&cached)
        );
        let err = stderr(&cached);
        assert_eq!(findings(&err), findings(&stderr(&uncached)), "{args:?}");
        if args.contains(&"-v") {
            assert!(
                err.starts_with("cache: compiling, because this job generates PersistentVolumeClaim `ml/job-1-x-data`, which another job generates too; the build will report it\n"),
                "{err}"
            );
        }
    }
    assert_eq!(p.output(), before, "nothing written");
}

/// A copy of the project in `from` (its project file and the directories
/// `dirs`, without any output) built with `--no-cache`: what a build must
/// write whatever the cache says.
fn built_fresh(from: &Path, dirs: &[&str]) -> tempfile::TempDir {
    let copy = tempfile::tempdir().expect("tempdir");
    for d in dirs {
        common::copy_tree(&from.join(d), &copy.path().join(d));
    }
    fs::copy(from.join("trainc.yaml"), copy.path().join("trainc.yaml")).expect("copy");
    let o = common::trainc()
        .current_dir(copy.path())
        .args(["build", "--no-cache"])
        .output()
        .expect("trainc runs");
    assert!(o.status.success(), "{}", stderr(&o));
    copy
}
