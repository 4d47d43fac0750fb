//! The security of what trainc generates, judged by checkers it does not
//! share code with: every pod template of every target against the Pod
//! Security Standards (tests/common/pss.rs, written from their text),
//! checkov on the bundled examples, and the TensorBoard image's build spec
//! against the program its Deployment runs, installed for real.

mod common;
#[path = "common/pss.rs"]
mod pss;

use std::fs;
use std::path::Path;
use std::process::Command;

use common::{run, stderr, tool};
use serde_json::Value;

fn documents(deploy: &Path) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for (path, bytes) in common::read_tree(deploy) {
        let text = String::from_utf8(bytes).expect("utf-8");
        let v: Value = serde_saphyr::from_str(&text).expect("yaml");
        out.push((path, v));
    }
    out
}

#[test]
fn every_pod_template_of_every_target_is_restricted() {
    for (label, _dir, deploy) in common::every_build() {
        let mut templates = 0;
        for (path, doc) in documents(&deploy) {
            for (at, metadata, spec) in pss::pod_templates(&doc) {
                templates += 1;
                let annotations = metadata.and_then(|m| m.get("annotations"));
                let found = pss::restricted(spec, annotations);
                assert!(found.is_empty(), "{label}: {path}{at}: {found:?}");
                // No API token unless a service account is named for it.
                let named = spec.get("serviceAccountName").is_some();
                assert_eq!(
                    spec.get("automountServiceAccountToken"),
                    Some(&Value::Bool(named && !path.contains("tensorboard"))),
                    "{label}: {path}{at}"
                );
            }
        }
        assert!(templates >= 2, "{label}: {templates} pod templates");
    }
}

#[test]
fn every_run_and_tensorboard_gets_a_network_policy_that_selects_its_pods() {
    for (label, _dir, deploy) in common::every_build() {
        let docs = documents(&deploy);
        let policies: Vec<&Value> = docs
            .iter()
            .map(|(_, d)| d)
            .filter(|d| d["kind"] == "NetworkPolicy")
            .collect();
        for (path, doc) in &docs {
            for (at, metadata, _) in pss::pod_templates(doc) {
                let labels = &metadata.expect("metadata")["labels"];
                let selected = policies.iter().any(|p| {
                    p["spec"]["podSelector"]["matchLabels"]
                        .as_object()
                        .expect("matchLabels")
                        .iter()
                        .all(|(k, v)| &labels[k] == v)
                });
                assert!(selected, "{label}: {path}{at} has no NetworkPolicy");
            }
        }
    }
}

#[test]
fn a_relaxed_definition_says_which_profile_it_still_meets() {
    let dir = common::scratch_example_for("mnist-cpu", "kubernetes");
    let def = dir.path().join("jobs/mnist-cpu.yaml");
    let text = fs::read_to_string(&def).expect("read");
    fs::write(
        &def,
        format!(
            "{text}\n  security:\n    allowPrivilegeEscalation: true\n    capabilities: {{add: [IPC_LOCK]}}\n"
        ),
    )
    .expect("write");
    let o = run(dir.path(), &["validate"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("warning: spec.security.capabilities.add: the pods of job `mnist-cpu` meet the Pod Security `privileged` profile, not `restricted`: adds IPC_LOCK; allows privilege escalation"),
        "{err}"
    );
    assert!(err.contains("--> jobs/mnist-cpu.yaml:"), "{err}");
    let o = run(dir.path(), &["build"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // The independent checker agrees with what validation said.
    let mut seen = 0;
    for (path, doc) in documents(&dir.path().join("deploy")) {
        for (_, _, spec) in pss::pod_templates(&doc) {
            if path.contains("tensorboard") {
                assert!(pss::restricted(spec, None).is_empty(), "{path}");
                continue;
            }
            seen += 1;
            assert_eq!(
                pss::baseline(spec, None),
                ["Capabilities: tensorflow adds IPC_LOCK"]
            );
            assert!(
                pss::restricted(spec, None)
                    .contains(&"Privilege Escalation: tensorflow".to_owned())
            );
        }
    }
    assert_eq!(seen, 3);
}

#[test]
fn security_settings_the_cluster_would_refuse_are_located_errors() {
    let dir = common::scratch_example_for("mnist-cpu", "kubernetes");
    let def = dir.path().join("jobs/mnist-cpu.yaml");
    let text = fs::read_to_string(&def).expect("read");
    for (security, message) in [
        (
            "{runAsUser: 0}",
            "spec.security.runAsUser: UID 0 is root, but `runAsNonRoot` is true",
        ),
        (
            "{privileged: true}",
            "spec.security.privileged: a privileged container can always escalate",
        ),
        (
            "{capabilities: {add: [SYS_ADMIN]}}",
            "spec.security.capabilities.add[0]: SYS_ADMIN allows privilege escalation",
        ),
        (
            "{seccompProfile: {type: Localhost}}",
            "spec.security.seccompProfile.type: a `Localhost` seccomp profile needs `localhostProfile`",
        ),
        (
            "{networkPolicy: {egress: [{except: [10.0.0.0/8]}]}}",
            "spec.security.networkPolicy.egress[0].except: `except` carves addresses out of `cidr`",
        ),
    ] {
        fs::write(&def, format!("{text}\n  security: {security}\n")).expect("write");
        let o = run(dir.path(), &["build"]);
        assert_eq!(o.status.code(), Some(2), "{security}");
        let err = stderr(&o);
        assert!(err.contains(message), "{security}: {err}");
        assert!(err.contains("--> jobs/mnist-cpu.yaml:"), "{err}");
        assert!(!dir.path().join("deploy").exists(), "nothing written");
    }
}

#[test]
fn mutable_image_references_are_warned_about_and_digests_accepted() {
    let dir = common::scratch_example_for("mnist-cpu", "kubernetes");
    let def = dir.path().join("jobs/mnist-cpu.yaml");
    let text = fs::read_to_string(&def).expect("read");
    fs::write(
        &def,
        text.replace("image: registry.example.com/ml/mnist:1.0", "image: ubuntu"),
    )
    .expect("write");
    let o = run(dir.path(), &["validate"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("warning: spec.image: image `ubuntu` has no tag, so it means `latest`: it can point at another image at any time"),
        "{}",
        stderr(&o)
    );
    assert!(
        stderr(&o).contains("help: pin a tag (`ubuntu:1.2.3`) or a digest (`ubuntu@sha256:…`)")
    );
    let o = run(dir.path(), &["validate", "--format", "json"]);
    let v: Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["findings"][0]["severity"], "warning");
    assert_eq!(v["findings"][0]["path"], "spec.image");

    let digest = format!("ubuntu:24.04@sha256:{}", "0".repeat(64));
    fs::write(
        &def,
        text.replace("registry.example.com/ml/mnist:1.0", &digest),
    )
    .expect("write");
    let o = run(dir.path(), &["build"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));
    let job = fs::read_to_string(
        dir.path()
            .join("deploy/ml/mnist-cpu/job-mnist-cpu-worker-0.yaml"),
    )
    .expect("job");
    let job: Value = serde_saphyr::from_str(&job).expect("yaml");
    assert_eq!(
        job["spec"]["template"]["spec"]["containers"][0]["image"],
        digest.as_str()
    );
}

/// checkov's Kubernetes checks on the bundled examples: at most three
/// failures per pod template, each one a documented choice (docs/output.md,
/// Security), and none on the pods themselves (a NetworkPolicy selects
/// each).
#[test]
fn checkov_finds_only_the_documented_choices() {
    let Some(checkov) = tool("TRAINC_CHECKOV", "checkov") else {
        return;
    };
    const DOCUMENTED: [&str; 3] = ["CKV_K8S_11", "CKV_K8S_15", "CKV_K8S_43"];
    let docs = fs::read_to_string(common::root().join("docs/output.md")).expect("docs");
    for id in DOCUMENTED {
        assert!(docs.contains(id), "docs/output.md explains {id}");
    }
    // checkov reads pod templates in Jobs, not in JobSets: mnist-cpu,
    // whose own target is `jobset`, is checked as plain Jobs.
    for example in ["mnist", "mnist-cpu"] {
        let (_dir, deploy) = common::build_variant(example, common::Variant::Target("kubernetes"));
        let o = Command::new(&checkov)
            .args([
                "--framework",
                "kubernetes",
                "--quiet",
                "--compact",
                "-o",
                "json",
            ])
            // checkov skips directories whose path has a hidden component,
            // as temporary directories do: point it at `.` from inside.
            .args(["-d", "."])
            .current_dir(&deploy)
            .env("BC_SKIP_MAPPING", "TRUE")
            .env("CHECKOV_RUN_SCA_PACKAGE_SCAN_V2", "false")
            .output()
            .expect("checkov runs");
        let v: Value = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
        let report = if v.is_array() { &v[0] } else { &v };
        // With nothing failed, `--quiet` prints the summary alone.
        let summary = report.get("summary").unwrap_or(report);
        assert_eq!(summary["parsing_errors"], 0, "{example}");
        assert!(
            summary["passed"].as_u64().unwrap_or(0) > 100,
            "{example}: checkov checked the objects: {summary}"
        );
        let mut by_resource: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        let failed = report["results"]["failed_checks"].as_array();
        for f in failed.into_iter().flatten() {
            by_resource
                .entry(f["resource"].as_str().unwrap_or("").to_owned())
                .or_default()
                .push(f["check_id"].as_str().unwrap_or("").to_owned());
        }
        for (resource, ids) in &by_resource {
            assert!(ids.len() <= 3, "{example}: {resource}: {ids:?}");
            for id in ids {
                assert!(
                    DOCUMENTED.contains(&id.as_str()),
                    "{example}: {resource}: {id} is not a documented choice"
                );
            }
        }
    }
}

/// The TensorBoard Deployment runs `tensorboard`; the image trainc writes a
/// build spec for must have it. Installs exactly what the Dockerfile
/// installs, into a cache under target/, and runs the program.
#[test]
fn the_tensorboard_image_installs_the_program_its_deployment_runs() {
    let (dir, _) = common::build_example("mnist");
    let deployment = fs::read_to_string(
        dir.path()
            .join("deploy/ml/mnist/deployment-mnist-tensorboard.yaml"),
    )
    .expect("deployment");
    let doc: Value = serde_saphyr::from_str(&deployment).expect("yaml");
    let container = &doc["spec"]["template"]["spec"]["containers"][0];
    let program = container["command"][0].as_str().expect("command");
    let dockerfile = fs::read_to_string(dir.path().join("build/ml/mnist/tensorboard.Dockerfile"))
        .expect("dockerfile");
    // The image the Deployment runs is the one the bake file builds.
    let bake = fs::read_to_string(dir.path().join("build/docker-bake.hcl")).expect("bake");
    let image = container["image"].as_str().expect("image");
    assert!(
        bake.contains(&format!("tags       = [\"{image}\"]")),
        "{bake}"
    );
    let requirements: Vec<&str> = dockerfile
        .lines()
        .find_map(|l| l.split_once("pip install --no-cache-dir "))
        .map(|(_, r)| r.split_whitespace().collect())
        .expect("a pip install line");
    assert!(
        requirements.iter().all(|r| r.contains("==")),
        "pinned: {requirements:?}"
    );
    if std::env::var_os("TRAINC_REQUIRE_TOOLS").is_none() {
        eprintln!("skipping the install: run `bash tests/run.sh`");
        return;
    }
    let key: String = requirements.join("_").replace(['=', '.'], "-");
    let venv = common::root()
        .join("target/tools")
        .join(format!("tb-{key}"));
    let bin = venv.join("bin");
    if !bin.join(program).is_file() {
        let ok = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .expect("python3 runs")
            .success()
            && Command::new(bin.join("pip"))
                .args(["install", "--quiet", "--disable-pip-version-check"])
                .args(&requirements)
                .status()
                .expect("pip runs")
                .success();
        assert!(ok, "installing {requirements:?}");
    }
    let o = Command::new(bin.join(program))
        .arg("--version_tb")
        .output()
        .unwrap_or_else(|e| panic!("{program} is not what {requirements:?} installs: {e}"));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let version = requirements[0].rsplit("==").next().expect("version");
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), version);
}

/// The security context of the pods of `role` in a build of `dir`.
fn pod_security(dir: &Path, role: &str) -> Vec<Value> {
    let mut found = Vec::new();
    for (path, doc) in documents(&dir.join("deploy")) {
        if !path.contains(&format!("-{role}-")) {
            continue;
        }
        for (_, _, spec) in pss::pod_templates(&doc) {
            found.push(spec["securityContext"].clone());
        }
    }
    assert!(!found.is_empty(), "no {role} pods");
    found
}

/// Running as an image's own user: `runAsUser: image` keeps `restricted`
/// (non-root, no fixed UID, a volume group only when given); a numeric
/// `runAsUser` alone brings its group and volume group with it; one role
/// relaxed on its own (a parameter server as the image's root), the
/// others still `restricted`, and validation says which pods meet what.
#[test]
fn the_image_s_own_user_and_one_role_relaxed() {
    let dir = common::scratch_example_for("mnist-cpu", "kubernetes");
    let def = dir.path().join("jobs/mnist-cpu.yaml");
    let text = fs::read_to_string(&def).expect("read");
    let with = |extra: &str| fs::write(&def, format!("{text}{extra}")).expect("write");

    with("  security: {runAsUser: image}\n");
    let o = run(dir.path(), &["build"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).is_empty(), "still restricted: {}", stderr(&o));
    for sc in pod_security(dir.path(), "worker") {
        assert_eq!(
            sc,
            serde_json::json!({"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}})
        );
    }
    for (_, doc) in documents(&dir.path().join("deploy")) {
        for (_, metadata, spec) in pss::pod_templates(&doc) {
            let annotations = metadata.and_then(|m| m.get("annotations"));
            assert!(pss::restricted(spec, annotations).is_empty());
        }
    }
    with("  security: {runAsUser: image, fsGroup: 2000}\n");
    assert!(run(dir.path(), &["build"]).status.success());
    let sc = &pod_security(dir.path(), "worker")[0];
    assert_eq!(sc["fsGroup"], 2000);
    assert_eq!(sc["fsGroupChangePolicy"], "OnRootMismatch");
    assert!(sc.get("runAsUser").is_none());

    with("  security: {runAsUser: 1000}\n");
    assert!(run(dir.path(), &["build"]).status.success());
    let sc = &pod_security(dir.path(), "worker")[0];
    assert_eq!(
        (&sc["runAsUser"], &sc["runAsGroup"], &sc["fsGroup"]),
        (&1000.into(), &1000.into(), &1000.into())
    );

    // The parameter servers as the image's root, the workers untouched.
    let relaxed = text.replace(
        "    ps:     {replicas: 1, resources: {cpu: 500m, memory: 1Gi}}",
        "    ps:\n      replicas: 1\n      resources: {cpu: 500m, memory: 1Gi}\n      security: {runAsUser: 0, runAsNonRoot: false}",
    );
    assert_ne!(relaxed, text);
    fs::write(&def, &relaxed).expect("write");
    let o = run(dir.path(), &["build"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("warning: spec.roles.ps.security.runAsNonRoot: the `ps` pods of job `mnist-cpu` meet the Pod Security `baseline` profile, not `restricted`"),
        "{err}"
    );
    let ps = &pod_security(dir.path(), "ps")[0];
    assert_eq!(
        (&ps["runAsUser"], &ps["runAsNonRoot"]),
        (&0.into(), &false.into())
    );
    let worker = &pod_security(dir.path(), "worker")[0];
    assert_eq!(
        (&worker["runAsUser"], &worker["runAsNonRoot"]),
        (&10001.into(), &true.into())
    );

    // The NetworkPolicy is the run's.
    fs::write(
        &def,
        relaxed.replace(
            "runAsNonRoot: false}",
            "runAsNonRoot: false, networkPolicy: {enabled: false}}",
        ),
    )
    .expect("write");
    let o = run(dir.path(), &["validate"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("error: spec.roles.ps.security.networkPolicy: the NetworkPolicy is the run's, not a role's"),
        "{}",
        stderr(&o)
    );
}
