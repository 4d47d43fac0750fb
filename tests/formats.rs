//! Machine-readable output (docs/formats.md): the JSON document of every
//! command and its exit codes; `--format github` against the GitHub Actions
//! toolkit's own output (`@actions/core`, `TRAINC_ACTIONS_CORE`, run by
//! `node`); `--format sarif` against the OASIS SARIF 2.1.0 JSON Schema
//! (`TRAINC_SARIF_SCHEMA`, validated by Python's jsonschema,
//! `TRAINC_SARIF_PYTHON`).

mod common;

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};

use common::{run, scratch_example, stderr, stdout};
use serde_json::{Value, json};

fn json_of(o: &std::process::Output) -> Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", stdout(o), stderr(o)))
}

/// A project with a definition whose file name and messages need escaping
/// in workflow commands (`,`, `:`, `%`, a newline in the help), a warning,
/// and a duplicate (a finding with a related location). (A file that does
/// not parse is a finding of its own, `trainc/file`: loading stops there.)
fn broken() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::create_dir_all(dir.path().join("jobs")).expect("mkdir");
    fs::write(
        dir.path().join("jobs/a,b:50%.yaml"),
        "apiVersion: trainc.dev/v1alpha1\nkind: TrainingJob\nmetadata: {name: x, namespace: ml}\n\
         spec:\n  image: ubuntu\n  roles:\n    worker: {replica%s: 2}\n",
    )
    .expect("write");
    fs::write(
        dir.path().join("jobs/b.yaml"),
        "apiVersion: trainc.dev/v1alpha1\nkind: TrainingJob\nmetadata: {name: y, namespace: ml}\n\
         spec:\n  image: ubuntu\n  strategy: multi-worker-mirrored\n  roles:\n    worker: {replicas: 1}\n---\n\
         apiVersion: trainc.dev/v1alpha1\nkind: TrainingJob\nmetadata: {name: y, namespace: ml}\n\
         spec:\n  image: ubuntu:1\n  strategy: multi-worker-mirrored\n  roles:\n    worker: {replicas: 1}\n",
    )
    .expect("write");
    dir
}

/// `--format json` of `validate`: the findings, as `validate` finds them.
#[test]
fn validate_json_is_one_object_with_version_jobs_and_findings() {
    let dir = scratch_example("mnist");
    let o = run(dir.path(), &["validate", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        json_of(&o),
        json!({"version": 1, "jobs": 1, "variants": [], "findings": []})
    );
    assert_eq!(stderr(&o), "");

    let o = run(
        &common::root().join("tests/cmd/invalid.in"),
        &["validate", "--format", "json", "unknown-field.yaml"],
    );
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(stderr(&o), "");
    assert_eq!(
        json_of(&o),
        json!({"version": 1, "findings": [{
            "severity": "error",
            "rule": "trainc/field",
            "message": "unknown field `replica`",
            "path": "spec.roles.worker",
            "file": "unknown-field.yaml",
            "line": 10,
            "column": 14,
            "hint": "did you mean `replicas`?"
        }]})
    );
    // A finding about no file and no field.
    let o = run(dir.path(), &["validate", "--format", "json", "nowhere"]);
    assert_eq!(o.status.code(), Some(2));
    let v = json_of(&o);
    assert_eq!(v["version"], 1);
    assert_eq!(v["findings"][0]["rule"], "trainc/command", "{v}");
    assert_eq!(v["findings"][0].get("file"), None, "{v}");
}

/// `build`, `build --check`, their cached answers, and a failed build: one
/// shape, and the exit codes of the text output.
#[test]
fn build_json_lists_each_directory_and_check_its_stale_files() {
    let dir = scratch_example("mnist");
    let o = run(dir.path(), &["build", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stderr(&o), "");
    let v = json_of(&o);
    assert_eq!(v["version"], 1);
    assert_eq!((&v["check"], &v["current"]), (&json!(false), &json!(false)));
    let dirs = v["directories"].as_array().expect("directories");
    assert_eq!(dirs.len(), 2, "{v}");
    assert_eq!(dirs[0]["path"], "deploy");
    assert_eq!(dirs[1]["path"], "build");
    assert_eq!(
        dirs[1],
        json!({
            "path": "build",
            "current": false,
            "created": [
                "build/docker-bake.hcl",
                "build/ml/mnist/Dockerfile",
                "build/ml/mnist/tensorboard.Dockerfile"
            ],
            "updated": [],
            "deleted": [],
            "counts": {"created": 3, "updated": 0, "deleted": 0, "unchanged": 0}
        })
    );
    let created = dirs[0]["created"].as_array().expect("created");
    assert_eq!(dirs[0]["counts"]["created"], created.len());
    assert!(created.contains(&json!("deploy/ml/mnist/kustomization.yaml")));
    for f in created {
        assert!(dir.path().join(f.as_str().expect("path")).is_file(), "{f}");
    }
    assert_eq!(v["findings"], json!([]));

    // Current: from the cache and without it, the same document.
    let total = created.len();
    let current = json!({
        "version": 1,
        "check": false,
        "current": true,
        "directories": [
            {"path": "deploy", "current": true, "created": [], "updated": [], "deleted": [],
             "counts": {"created": 0, "updated": 0, "deleted": 0, "unchanged": total}},
            {"path": "build", "current": true, "created": [], "updated": [], "deleted": [],
             "counts": {"created": 0, "updated": 0, "deleted": 0, "unchanged": 3}}
        ],
        "findings": []
    });
    for args in [
        &["build", "--format", "json"][..],
        &["build", "--no-cache", "--format", "json"],
    ] {
        let o = run(dir.path(), args);
        assert_eq!(o.status.code(), Some(0));
        assert_eq!(json_of(&o), current, "{args:?}");
    }
    let mut check = current.clone();
    check["check"] = json!(true);
    let o = run(dir.path(), &["build", "--check", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(json_of(&o), check);

    // Stale: exit 1, each file with what a build would do.
    let def = dir.path().join("jobs/mnist.yaml");
    let text = fs::read_to_string(&def).expect("read");
    fs::write(
        &def,
        text.replace("worker: {replicas: 2", "worker: {replicas: 1"),
    )
    .expect("write");
    let o = run(dir.path(), &["build", "--check", "--format", "json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(stderr(&o), "");
    let v = json_of(&o);
    assert_eq!((&v["check"], &v["current"]), (&json!(true), &json!(false)));
    let deploy = &v["directories"][0];
    assert_eq!(deploy["current"], false);
    assert!(
        deploy["deleted"]
            .as_array()
            .expect("deleted")
            .contains(&json!("deploy/ml/mnist/job-mnist-worker-1.yaml")),
        "{v}"
    );
    assert_eq!(v["directories"][1]["current"], true);
    assert!(!text.is_empty());

    // A failed build: the same object, `version` and the findings only.
    fs::write(&def, "kind: [\n").expect("write");
    for args in [
        &["build", "--format", "json"][..],
        &["build", "--check", "--format", "json"],
    ] {
        let o = run(dir.path(), args);
        assert_eq!(o.status.code(), Some(2));
        let v = json_of(&o);
        assert_eq!(
            v.as_object().map(|m| m.keys().cloned().collect::<Vec<_>>()),
            Some(vec!["version".to_owned(), "findings".to_owned()])
        );
        assert_eq!(v["findings"][0]["severity"], "error");
        assert_eq!(v["findings"][0]["rule"], "trainc/file");
        assert_eq!(v["findings"][0]["file"], "jobs/mnist.yaml");
    }
}

#[test]
fn init_json_lists_the_files_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let o = run(dir.path(), &["init", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json_of(&o);
    assert_eq!(v["version"], 1);
    assert_eq!(v["findings"], json!([]));
    let files = v["files"].as_array().expect("files");
    assert!(files.contains(&json!("trainc.yaml")), "{v}");
    for f in files {
        assert!(dir.path().join(f.as_str().expect("path")).is_file(), "{f}");
    }
    // Again: refused, the file named in a finding.
    let o = run(dir.path(), &["init", "--format", "json"]);
    assert_eq!(o.status.code(), Some(2));
    let v = json_of(&o);
    assert_eq!(v["findings"][0]["severity"], "error", "{v}");
    assert!(
        v["findings"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("already exists")),
        "{v}"
    );
}

/// `run --local --format json`: the tasks' output on stderr, the summary
/// alone on stdout, the run's exit status as without it.
#[test]
fn run_json_summarises_the_tasks_and_keeps_stdout_for_itself() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("task.sh");
    fs::write(&script, "#!/bin/sh\necho hello\nexit ${1:-0}\n").expect("write");
    {
        use std::os::unix::fs::PermissionsExt as _;
        fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let job = |code: u8| {
        format!(
            "apiVersion: trainc.dev/v1alpha1\nkind: TrainingJob\nmetadata: {{name: scripts, namespace: ml}}\n\
             spec:\n  image: example.com/none:1\n  strategy: multi-worker-mirrored\n  roles:\n\
             \x20   worker: {{replicas: 2, command: [{}, \"{code}\"]}}\n",
            script.display()
        )
    };
    fs::create_dir_all(dir.path().join("jobs")).expect("mkdir");
    let work = dir.path().join("w");
    for code in [0u8, 3] {
        fs::write(dir.path().join("jobs/scripts.yaml"), job(code)).expect("write");
        let o = Command::new(env!("CARGO_BIN_EXE_trainc"))
            .current_dir(dir.path())
            .args([
                "run",
                "--local",
                "jobs/scripts.yaml",
                "--format",
                "json",
                "--workdir",
            ])
            .arg(&work)
            .output()
            .expect("trainc runs");
        assert_eq!(o.status.code(), Some(i32::from(code)), "{}", stderr(&o));
        let v = json_of(&o);
        assert_eq!(v["version"], 1);
        assert_eq!(v["job"], "ml/scripts");
        assert_eq!(v["exit"], code);
        assert_eq!(v["workdir"], work.display().to_string());
        assert_eq!(v["findings"], json!([]));
        let tasks = v["tasks"].as_array().expect("tasks");
        assert_eq!(tasks.len(), 2, "{v}");
        assert_eq!(tasks[0]["name"], "worker-0");
        if code == 0 {
            assert_eq!(tasks[0]["code"], 0, "{v}");
            assert_eq!(tasks[0]["signal"], Value::Null, "{v}");
        }
        assert!(tasks.iter().any(|t| t["code"] == code), "{v}");
        let err = stderr(&o);
        assert!(err.contains("running ml/scripts locally"), "{err}");
        assert!(err.contains("] hello\n"), "{err}");
    }
    // A refusal of trainc's: exit 2, the findings.
    let o = run(
        dir.path(),
        &[
            "run",
            "--local",
            "jobs/scripts.yaml",
            "--job",
            "nope",
            "--format",
            "json",
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(json_of(&o)["findings"][0]["message"], "no job named `nope`");
}

/// `diff --format json` is a document like the others.
#[test]
fn diff_json_has_the_version_and_findings() {
    let dir = scratch_example("mnist");
    let o = run(dir.path(), &["diff", "--format", "json"]);
    assert_eq!(o.status.code(), Some(1));
    let v = json_of(&o);
    let keys: Vec<&String> = v.as_object().expect("object").keys().collect();
    assert_eq!(
        keys,
        [
            "version",
            "create",
            "update",
            "delete",
            "unchanged",
            "runs",
            "total",
            "changes",
            "findings"
        ]
    );
}

/// What the toolkit prints for these annotations: each is
/// `[command, message, properties]`, as trainc's JSON describes them.
fn toolkit(core: &Path, calls: &Value) -> String {
    let script = format!(
        "import * as core from {};\n\
         const calls = JSON.parse(process.argv[1]);\n\
         for (const [cmd, message, props] of calls) core[cmd](message, props);\n",
        serde_json::to_string(&core.display().to_string()).expect("string")
    );
    let o = Command::new(common::tool("TRAINC_NODE", "node").expect("node"))
        .args(["--input-type=module", "-e", &script])
        .arg(calls.to_string())
        .stdin(Stdio::null())
        .output()
        .expect("node runs");
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o)
}

/// The title of each kind of finding's annotation (docs/formats.md).
fn title(rule: &str) -> &'static str {
    match rule {
        "trainc/field" => "Invalid or questionable field",
        "trainc/file" => "Unusable input file",
        "trainc/command" => "Command cannot go on",
        "trainc/stale-output" => "Stale generated file",
        "trainc/run-change" => "Training run starts, restarts or stops",
        r => panic!("unknown rule {r}"),
    }
}

/// The toolkit's call for a finding of trainc's JSON.
fn call(f: &Value) -> Value {
    let mut message = match f["path"].as_str() {
        Some(p) => format!("{p}: {}", f["message"].as_str().expect("message")),
        None => f["message"].as_str().expect("message").to_owned(),
    };
    if let Some(h) = f["hint"].as_str() {
        message.push_str("\nhelp: ");
        message.push_str(h);
    }
    let mut props = json!({"title": title(f["rule"].as_str().expect("rule"))});
    for (ours, theirs) in [
        ("file", "file"),
        ("line", "startLine"),
        ("column", "startColumn"),
    ] {
        if !f[ours].is_null() {
            props[theirs] = f[ours].clone();
        }
    }
    json!([f["severity"], message, props])
}

#[test]
fn github_annotations_are_the_toolkits_byte_for_byte() {
    let Some(core) = common::tool("TRAINC_ACTIONS_CORE", "core.js") else {
        return;
    };
    let dir = broken();
    let o = run(dir.path(), &["validate", "--format", "json"]);
    assert_eq!(o.status.code(), Some(2));
    let findings = json_of(&o)["findings"]
        .as_array()
        .expect("findings")
        .clone();
    // The cases that need escaping are there.
    let github = run(dir.path(), &["validate", "--format", "github"]);
    assert_eq!(github.status.code(), Some(2));
    let ours = stdout(&github);
    assert!(ours.contains("file=jobs/a%2Cb%3A50%25.yaml"), "{ours}");
    assert!(ours.contains("replica%25s"), "{ours}");
    assert!(ours.contains("%0Ahelp: "), "{ours}");
    assert!(ours.contains("::warning title="), "{ours}");
    // The text still goes to the log.
    assert!(
        stderr(&github).contains("error: aborting due to"),
        "{}",
        stderr(&github)
    );
    // Related places are notes of the message; the toolkit gets the same text.
    let mut calls: Vec<Value> = findings.iter().map(call).collect();
    for (c, line) in calls.iter_mut().zip(ours.lines()) {
        if line.contains("%0Anote: ") {
            let note = line
                .split("%0Anote: ")
                .skip(1)
                .collect::<Vec<_>>()
                .join("\nnote: ");
            let m = format!("{}\nnote: {note}", c[1].as_str().expect("message"));
            c[1] = json!(m);
        }
    }
    assert!(ours.contains("%0Anote: "), "a related place: {ours}");
    assert_eq!(ours, toolkit(&core, &Value::Array(calls)));

    // `build --check`: the stale files, one annotation each.
    let dir = scratch_example("mnist");
    assert!(run(dir.path(), &["build"]).status.success());
    fs::remove_file(dir.path().join("deploy/ml/mnist/service-mnist.yaml")).expect("rm");
    let edited = dir.path().join("deploy/ml/mnist/job-mnist-ps-0.yaml");
    let mut text = fs::read_to_string(&edited).expect("read");
    text.push_str("# mine\n");
    fs::write(&edited, text).expect("write");
    let o = run(dir.path(), &["build", "--check", "--format", "github"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("deploy is stale"), "{}", stderr(&o));
    let stale = |op: &str, path: &str| {
        json!(["error",
            format!("{path} is stale: `trainc build` would {op} it; run `trainc build` and commit the result"),
            {"title": title("trainc/stale-output"), "file": path}])
    };
    let expected = toolkit(
        &core,
        &json!([
            stale("update", "deploy/ml/mnist/job-mnist-ps-0.yaml"),
            stale("create", "deploy/ml/mnist/service-mnist.yaml"),
        ]),
    );
    assert_eq!(stdout(&o), expected);
    // Current: no annotation.
    assert!(run(dir.path(), &["build"]).status.success());
    let o = run(dir.path(), &["build", "--check", "--format", "github"]);
    assert_eq!((o.status.code(), stdout(&o)), (Some(0), String::new()));
}

/// `build --check --base`: each run the pull request starts, restarts or
/// stops is a notice, as the toolkit writes one, and a SARIF `note` of its
/// own rule, valid against the OASIS schema.
#[test]
fn build_check_against_a_base_notes_each_run() {
    let dir = common::tuned_pull_request();
    let check = |format: &str| {
        let o = run(
            dir.path(),
            &["build", "--check", "--base", "main", "--format", format],
        );
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        o
    };
    let json = json_of(&check("json"));
    assert_eq!(json["against_base"]["runs"][0]["op"], "rerun", "{json}");
    let github = check("github");
    let out = stdout(&github);
    let notices: Vec<&str> = out.lines().collect();
    assert_eq!(notices.len(), 1, "{}", stdout(&github));
    assert!(
        notices[0].contains("::against main (") && notices[0].contains("re-run ml/digits: digits-"),
        "{}",
        notices[0]
    );
    if let Some(core) = common::tool("TRAINC_ACTIONS_CORE", "core.js") {
        let (_, message) = notices[0].rsplit_once("::").expect("a message");
        let expected = toolkit(
            &core,
            &json!([["notice", message, {"title": title("trainc/run-change")}]]),
        );
        assert_eq!(out, expected);
    }
    let (Some(python), Some(schema)) = (
        common::tool("TRAINC_SARIF_PYTHON", "python3"),
        common::tool("TRAINC_SARIF_SCHEMA", "sarif-schema-2.1.0.json"),
    ) else {
        return;
    };
    let log = valid_sarif(&python, &schema, &check("sarif").stdout);
    let result = &log["runs"][0]["results"][0];
    assert_eq!(result["ruleId"], "trainc/run-change");
    assert_eq!(result["level"], "note");
}

/// Validates a SARIF log against the OASIS schema; returns it parsed.
fn valid_sarif(python: &Path, schema: &Path, log: &[u8]) -> Value {
    if let Err(e) = sarif_errors(python, schema, log) {
        panic!("{e}\n{}", String::from_utf8_lossy(log));
    }
    serde_json::from_slice(log).expect("json")
}

/// What the schema says about a log.
fn sarif_errors(python: &Path, schema: &Path, log: &[u8]) -> Result<(), String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("log.sarif");
    fs::write(&file, log).expect("write");
    let o = Command::new(python)
        .args([
            "-c",
            "import json, sys, jsonschema\n\
             schema = json.load(open(sys.argv[1]))\n\
             assert schema['id'] == 'https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json', schema['id']\n\
             cls = jsonschema.validators.validator_for(schema)\n\
             cls.check_schema(schema)\n\
             errors = list(cls(schema, format_checker=cls.FORMAT_CHECKER).iter_errors(json.load(open(sys.argv[2]))))\n\
             for e in errors: print(list(e.absolute_path), e.message)\n\
             sys.exit(1 if errors else 0)\n",
        ])
        .arg(schema)
        .arg(&file)
        .output()
        .expect("python runs");
    if o.status.success() {
        Ok(())
    } else {
        Err(format!("{}{}", stdout(&o), stderr(&o)))
    }
}

#[test]
fn sarif_logs_are_valid_against_the_oasis_schema() {
    let (Some(python), Some(schema)) = (
        common::tool("TRAINC_SARIF_PYTHON", "python3"),
        common::tool("TRAINC_SARIF_SCHEMA", "sarif-schema-2.1.0.json"),
    ) else {
        return;
    };
    // Errors, a warning, a related place, names that need encoding.
    let dir = broken();
    let o = run(dir.path(), &["validate", "--format", "sarif"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(stderr(&o), "");
    let log = valid_sarif(&python, &schema, &o.stdout);
    // The validator does refuse what the schema does not allow.
    let mut bad = log.clone();
    bad["runs"][0]["results"][0]["level"] = json!("fatal");
    let why = sarif_errors(&python, &schema, bad.to_string().as_bytes()).expect_err("refused");
    assert!(why.contains("'fatal' is not one of"), "{why}");
    assert_eq!(log["version"], "2.1.0");
    let runs = log["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 1);
    let driver = &runs[0]["tool"]["driver"];
    assert_eq!(driver["name"], "trainc");
    assert_eq!(driver["version"], env!("CARGO_PKG_VERSION"));
    let rules: Vec<&str> = driver["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .map(|r| r["id"].as_str().expect("id"))
        .collect();
    assert_eq!(
        rules,
        [
            "trainc/field",
            "trainc/file",
            "trainc/command",
            "trainc/stale-output",
            "trainc/run-change"
        ]
    );
    let results = runs[0]["results"].as_array().expect("results");
    let first = &results[0];
    assert_eq!(first["ruleId"], "trainc/field");
    assert_eq!(first["ruleIndex"], 0);
    assert_eq!(first["level"], "error");
    let at = &first["locations"][0]["physicalLocation"];
    assert_eq!(
        at["artifactLocation"],
        json!({"uri": "jobs/a%2Cb%3A50%25.yaml", "uriBaseId": "%SRCROOT%"})
    );
    assert_eq!(at["region"], json!({"startLine": 7, "startColumn": 14}));
    assert!(results.iter().any(|r| r["level"] == "warning"), "{log}");
    assert!(
        results.iter().any(|r| r["relatedLocations"].is_array()),
        "{log}"
    );

    // A failure with no location; a current and a stale check; a build with a warning.
    let o = run(
        dir.path(),
        &["build", "nowhere", "-o", "out", "--format", "sarif"],
    );
    assert_eq!(o.status.code(), Some(2));
    let log = valid_sarif(&python, &schema, &o.stdout);
    assert_eq!(log["runs"][0]["results"][0]["ruleId"], "trainc/command");
    let dir = scratch_example("mnist");
    assert!(run(dir.path(), &["build"]).status.success());
    let o = run(dir.path(), &["build", "--check", "--format", "sarif"]);
    assert_eq!(o.status.code(), Some(0));
    let log = valid_sarif(&python, &schema, &o.stdout);
    assert_eq!(log["runs"][0]["results"], json!([]));
    fs::remove_file(dir.path().join("deploy/ml/mnist/service-mnist.yaml")).expect("rm");
    let o = run(dir.path(), &["build", "--check", "--format", "sarif"]);
    assert_eq!(o.status.code(), Some(1));
    let log = valid_sarif(&python, &schema, &o.stdout);
    let result = &log["runs"][0]["results"][0];
    assert_eq!(result["ruleId"], "trainc/stale-output");
    assert_eq!(
        result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
        "deploy/ml/mnist/service-mnist.yaml"
    );
    // A build that goes on with a warning (a mutable image tag).
    let dir = tempfile::tempdir().expect("tempdir");
    fs::create_dir_all(dir.path().join("jobs")).expect("mkdir");
    fs::write(
        dir.path().join("jobs/w.yaml"),
        "apiVersion: trainc.dev/v1alpha1\nkind: TrainingJob\nmetadata: {name: w, namespace: ml}\n\
         spec:\n  image: ubuntu\n  strategy: multi-worker-mirrored\n  roles:\n    worker: {replicas: 1}\n",
    )
    .expect("write");
    let o = run(dir.path(), &["build", "--format", "sarif"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let log = valid_sarif(&python, &schema, &o.stdout);
    assert_eq!(log["runs"][0]["results"][0]["level"], "warning", "{log}");
}
