//! The health checks shipped in docs/gitops/, run by real interpreters
//! against recorded statuses. No controller runs here, so each side is
//! rebuilt as its controller runs it, in common/health.rs: Argo CD's Lua
//! scripts in gopher-lua's sandbox, Flux's CEL expressions in
//! kustomize-controller's order. tests/cluster.rs runs the same
//! interpreters on objects a live API server returns.
//!
//! Each file in tests/fixtures/health/ is a whole JobSet, PyTorchJob,
//! TFJob or TrainJob as the API server returns it, with the expected results in its
//! annotations:
//! `test.trainc.dev/argocd` (and `-message`) and `test.trainc.dev/flux`.

mod common;
#[path = "common/crd.rs"]
mod crd;
#[path = "common/health.rs"]
mod health;

use std::fs;

use common::root;
use health::{
    ARGO_STATUSES, Flux, argo_health, argocd_script_for, argocd_scripts, eval, flux_check_for,
    flux_checks, flux_env, flux_status, group, yaml,
};
use serde_json::{Value, json};

const FIXTURES: &str = "tests/fixtures/health";

/// The custom kinds trainc's `jobset`, `pytorchjob`, `tfjob` and
/// `trainjob` targets write, as (apiVersion, kind): the order of Flux's
/// entries, and of Argo CD's keys once sorted.
const KINDS: [(&str, &str); 4] = [
    ("jobset.x-k8s.io/v1alpha2", "JobSet"),
    ("kubeflow.org/v1", "PyTorchJob"),
    ("kubeflow.org/v1", "TFJob"),
    ("trainer.kubeflow.org/v1alpha1", "TrainJob"),
];

/// The states every kind has a fixture for (the file is `<kind>-<state>.yaml`).
const STATES: [&str; 8] = [
    "created",
    "queued",
    "suspended",
    "starting",
    "running",
    "restarting",
    "succeeded",
    "failed",
];

// ---------------------------------------------------------------------------
// Fixtures

struct Fixture {
    name: String,
    object: Value,
    argocd: String,
    argocd_message: String,
    flux: Flux,
}

impl Fixture {
    fn kind(&self) -> (&str, &str) {
        (
            self.object["apiVersion"].as_str().expect("apiVersion"),
            self.object["kind"].as_str().expect("kind"),
        )
    }
}

fn fixtures() -> Vec<Fixture> {
    let mut names: Vec<String> = fs::read_dir(root().join(FIXTURES))
        .expect("fixtures")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|name| {
            assert!(
                name.ends_with(".yaml"),
                "{FIXTURES}/{name}: not a .yaml file"
            );
            let object = yaml(&format!("{FIXTURES}/{name}"));
            let annotation = |key: &str| -> String {
                object["metadata"]["annotations"][key]
                    .as_str()
                    .unwrap_or_else(|| panic!("{name}: no annotation {key}"))
                    .to_owned()
            };
            let flux = annotation("test.trainc.dev/flux");
            Fixture {
                argocd: annotation("test.trainc.dev/argocd"),
                argocd_message: annotation("test.trainc.dev/argocd-message"),
                flux: Flux::parse(&flux).unwrap_or_else(|| panic!("{name}: Flux status {flux}")),
                object,
                name,
            }
        })
        .collect()
}

/// Every kind has a fixture for every state, named for its kind, and holds
/// an object of that kind.
#[test]
fn the_fixtures_cover_every_state_of_every_kind() {
    let fixtures = fixtures();
    for (api_version, kind) in KINDS {
        let prefix = kind.to_lowercase();
        for state in STATES {
            let name = format!("{prefix}-{state}.yaml");
            assert!(
                fixtures.iter().any(|f| f.name == name),
                "{FIXTURES}/{name} is missing"
            );
        }
        for f in fixtures
            .iter()
            .filter(|f| f.name.starts_with(&format!("{prefix}-")))
        {
            assert_eq!(f.kind(), (api_version, kind), "{}", f.name);
        }
    }
    for f in &fixtures {
        assert!(KINDS.contains(&f.kind()), "{}: unexpected kind", f.name);
    }
}

/// The fixtures are objects the API server would accept: each is checked
/// against its CRD in ../shared/crds/ as tests/crd.rs checks trainc's
/// output (unknown fields are errors, defaults applied, CEL rules run).
#[test]
fn the_fixtures_match_the_crds() {
    let crds = crd::Crds::load(&crd::crd_dir()).unwrap_or_else(|e| panic!("{e}"));
    let mut failures = Vec::new();
    for f in fixtures() {
        for e in crds.validate(&f.object).errors {
            failures.push(format!("{}: {e}", f.name));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// ---------------------------------------------------------------------------
// Argo CD

/// Each fixture gets the health its annotations expect, with a message. A
/// script error fails the test: Argo CD would show Unknown.
#[test]
fn every_fixture_gets_the_expected_argo_cd_health() {
    let scripts = argocd_scripts();
    let mut failures = Vec::new();
    for f in fixtures() {
        let script = argocd_script_for(&scripts, f.kind());
        match argo_health(f.kind().1, &script, &f.object) {
            Err(e) => failures.push(format!("{}: script error: {e}", f.name)),
            Ok(h) => {
                if h.status != f.argocd || h.message != f.argocd_message {
                    failures.push(format!(
                        "{}: got {} {:?}, expected {} {:?}",
                        f.name, h.status, h.message, f.argocd, f.argocd_message
                    ));
                }
                if h.message.is_empty() {
                    failures.push(format!("{}: empty message", f.name));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A script sees whatever the cluster holds: missing, empty, null or
/// mistyped fields must still give a status, never a Lua error (which Argo
/// CD turns into Unknown, the worst health an Application can have).
#[test]
fn argo_cd_scripts_never_fail_on_odd_objects() {
    let scripts = argocd_scripts();
    let odd_status = [
        json!(null),
        json!({}),
        json!("text"),
        json!({"conditions": null}),
        json!({"conditions": []}),
        json!({"conditions": "text"}),
        json!({"conditions": [null, 1, "x", {}, {"type": null}, {"type": "Failed"}]}),
        json!({"conditions": [{"type": "Failed", "status": "True"}]}),
        json!({"conditions": [{"type": "Completed", "status": "True", "message": 7}]}),
        json!({"conditions": [{"type": "RestartingJobSet", "status": "True"}], "restarts": "2"}),
        json!({"conditions": [{"type": "Restarting", "status": "True"}], "replicaStatuses": {"PS": null}}),
        json!({"conditions": [{"type": "Running", "status": "True"}], "replicaStatuses": {"PS": {"active": "1"}}}),
        json!({"conditions": [{"type": "Succeeded", "status": "True", "message": ""}], "replicaStatuses": {"Master": {"succeeded": 1}, "Worker": "x"}}),
        json!({"restarts": 2, "restartsCountTowardsMax": null, "replicatedJobsStatus": [null, {"ready": "1"}, 3]}),
        json!({"replicatedJobsStatus": {"name": "chief"}, "replicaStatuses": []}),
        json!({"terminalState": 1}),
    ];
    let odd_spec = [
        json!(null),
        json!("text"),
        json!({}),
        json!({"suspend": "yes", "runPolicy": "x", "replicatedJobs": "x", "tfReplicaSpecs": [1], "pytorchReplicaSpecs": "x"}),
        json!({"failurePolicy": "x", "replicatedJobs": [null, {"replicas": "2"}, 3], "pytorchReplicaSpecs": [null, 1]}),
        json!({"failurePolicy": {"maxRestarts": null}, "tfReplicaSpecs": {"PS": null, "Worker": {"replicas": null}}, "pytorchReplicaSpecs": {"Master": null, "Worker": {"replicas": "2"}}}),
        json!({"suspend": true, "runPolicy": {"suspend": true}}),
    ];
    let odd_metadata = [
        json!(null),
        json!({"labels": "x"}),
        json!({"labels": {"kueue.x-k8s.io/queue-name": 5}}),
    ];
    let mut failures = Vec::new();
    for (api_version, kind) in KINDS {
        let script = argocd_script_for(&scripts, (api_version, kind));
        let mut objects = vec![json!({"apiVersion": api_version, "kind": kind})];
        for status in &odd_status {
            for spec in &odd_spec {
                objects.push(json!({"apiVersion": api_version, "kind": kind, "spec": spec, "status": status}));
            }
        }
        for metadata in &odd_metadata {
            objects.push(json!({"apiVersion": api_version, "kind": kind, "metadata": metadata, "spec": {"suspend": true, "runPolicy": {"suspend": true}}}));
        }
        for obj in objects {
            match argo_health(kind, &script, &obj) {
                Ok(h) if ARGO_STATUSES.contains(&h.status.as_str()) && !h.message.is_empty() => {}
                other => failures.push(format!("{kind} {obj}: {other:?}")),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The scripts name no library an argocd-cm script lacks, even on a path
/// no fixture takes, and use no syntax newer than Lua 5.1 (gopher-lua
/// accepts `goto`, C Lua 5.1 does not). Comments are left out of the check.
#[test]
fn argo_cd_scripts_use_only_what_argocd_cm_scripts_get() {
    for (target, script) in argocd_scripts() {
        for line in script.lines() {
            let code = line.split("--").next().unwrap_or("");
            for word in [
                "string.",
                "math.",
                "os.",
                "io.",
                "debug.",
                "coroutine.",
                "goto",
                "require",
            ] {
                assert!(!code.contains(word), "{target}: `{word}` in {line:?}");
            }
            // A method call on a string needs the string library's metatable.
            assert!(
                !code.contains("\"):") && !code.contains("'):"),
                "{target}: {line:?}"
            );
        }
    }
}

/// The sandbox is as narrow as Argo CD's, and converts objects as Argo CD
/// does: otherwise the tests above would prove less than they claim.
#[test]
fn the_lua_sandbox_is_the_one_argocd_cm_scripts_get() {
    let probe = |script: &str| {
        argo_health(
            "probe",
            script,
            &json!({"a": [1, null, 3], "b": null, "c": 2}),
        )
    };
    for missing in ["string", "math", "io", "debug", "os", "coroutine"] {
        let h = probe(&format!(
            "return {{status = 'Healthy', message = tostring(type({missing}))}}"
        ))
        .expect("runs");
        assert_eq!(h.message, "nil", "{missing}");
    }
    assert!(probe("return {status = 'Healthy', message = ('x'):upper()}").is_err());
    let h = probe("local os = require('os'); return {status = 'Healthy', message = type(os.time()) .. type(os.getenv)}")
        .expect("runs");
    assert_eq!(h.message, "numbernil");
    // Nulls: dropped from arrays, absent elsewhere; integers print as such.
    let h = probe("return {status = 'Healthy', message = #obj.a .. ',' .. obj.a[2] .. ',' .. tostring(obj.b == nil) .. ',' .. tostring(obj.c) .. ',' .. tostring(getmetatable(obj.a))}")
        .expect("runs");
    assert_eq!(h.message, "2,3,true,2,nil");
    // What Argo CD makes of odd results.
    assert_eq!(probe("return nil").expect("runs").status, "");
    assert_eq!(probe("return {}").expect("runs").status, "");
    assert_eq!(
        probe("return {message = 'x'}").expect("runs").status,
        "Unknown"
    );
    assert_eq!(
        probe("return {status = 'Fine'}").expect("runs").status,
        "Unknown"
    );
    assert!(probe("return 1").is_err());
    assert!(probe("while true do end").is_err());
    assert!(probe("return obj.missing.field").is_err());
}

// ---------------------------------------------------------------------------
// Flux

/// Every expression parses: a parse error stalls the whole Kustomization
/// (reason InvalidCELExpression) before it applies anything.
#[test]
fn every_flux_expression_parses() {
    let env = flux_env();
    let checks = flux_checks();
    assert!(!checks.is_empty());
    for c in &checks {
        for expr in [&c.in_progress, &c.failed, &Some(c.current.clone())]
            .into_iter()
            .flatten()
        {
            if let Err(e) = env.compile(expr) {
                panic!("{} {}: {expr}: {e}", c.api_version, c.kind);
            }
        }
    }
}

/// Each fixture gets the status its annotation expects. Unknown is expected
/// only where the object has no `status` yet: the expressions cannot test
/// for a missing top-level field, so they fail to evaluate until the
/// controller first writes one.
#[test]
fn every_fixture_gets_the_expected_flux_status() {
    let checks = flux_checks();
    let mut failures = Vec::new();
    for f in fixtures() {
        let check = flux_check_for(&checks, f.kind());
        let (status, error) = flux_status(check, &f.object);
        if status != f.flux {
            failures.push(format!(
                "{}: got {status:?} ({}), expected {:?}",
                f.name,
                error.as_deref().unwrap_or("no error"),
                f.flux
            ));
        }
        if status == Flux::Unknown && f.object.get("status").is_some() {
            failures.push(format!(
                "{}: Unknown although the object has a status",
                f.name
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Both files cover exactly the kinds trainc writes, and each kind's
/// entries name the API version its target writes.
#[test]
fn both_tools_check_the_kinds_trainc_writes() {
    let scripts = argocd_scripts();
    let expected: Vec<String> = KINDS
        .iter()
        .map(|(v, k)| format!("{}/{k}", group(v)))
        .collect();
    assert_eq!(scripts.keys().cloned().collect::<Vec<_>>(), expected);
    let checks = flux_checks();
    let got: Vec<(&str, &str)> = checks
        .iter()
        .map(|c| (c.api_version.as_str(), c.kind.as_str()))
        .collect();
    assert_eq!(got, KINDS);
}

/// What each target writes, as applied: its custom object is of the kind
/// and API version both files check, and before the controller's first
/// status write it is Progressing in Argo CD (a script error would be
/// Unknown) and Unknown in Flux (no `status` to read yet).
#[test]
fn trainc_output_gets_a_health_from_both_tools() {
    let scripts = argocd_scripts();
    let checks = flux_checks();
    let builds = [
        ("mnist", common::Variant::Project("trainc.jobset.yaml")),
        ("pytorch", common::Variant::Target("pytorchjob")),
        ("mnist", common::Variant::Target("tfjob")),
        ("pytorch", common::Variant::Project("trainc.trainjob.yaml")),
    ];
    for ((example, variant), (api_version, kind)) in builds.into_iter().zip(KINDS) {
        let (_dir, deploy) = common::build_variant(example, variant);
        let objects: Vec<Value> = walkdir::WalkDir::new(&deploy)
            .sort_by_file_name()
            .into_iter()
            .map(|e| e.expect("walk").into_path())
            .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
            .flat_map(|p| crd::yaml_documents(&p))
            .filter(|d| d["kind"] == kind)
            .collect();
        assert!(!objects.is_empty(), "{example} {variant:?}: no {kind}");
        for obj in objects {
            assert_eq!(obj["apiVersion"], api_version, "{example} {variant:?}");
            let script = argocd_script_for(&scripts, (api_version, kind));
            let h = argo_health(kind, &script, &obj)
                .unwrap_or_else(|e| panic!("{example} {variant:?}: {e}"));
            assert_eq!(h.status, "Progressing", "{example} {variant:?}: {h:?}");
            let (status, _) = flux_status(flux_check_for(&checks, (api_version, kind)), &obj);
            assert_eq!(status, Flux::Unknown, "{example} {variant:?}");
        }
    }
}

/// The pitfalls docs/gitops.md describes, shown on this interpreter: they
/// are what the expressions are written around.
#[test]
fn the_cel_pitfalls_the_docs_describe() {
    let no_status = json!({"apiVersion": "v1", "kind": "X", "metadata": {"name": "x"}, "spec": {}});
    let empty = json!({"status": {"conditions": []}});
    // `has()` cannot test a top-level field: a parse error.
    assert!(flux_env().compile("has(status)").is_err());
    // A missing variable or key is an error, `has()` on a missing parent too.
    assert!(eval("status.conditions.size() > 0", &no_status).is_err());
    assert!(eval("has(status.conditions)", &no_status).is_err());
    assert!(eval("status.terminalState == 'Failed'", &empty).is_err());
    assert_eq!(eval("has(status.terminalState)", &empty), Ok(false));
    // `.all()` is true on an empty list.
    assert_eq!(
        eval(
            "status.conditions.filter(c, c.type == 'Failed').all(c, c.status == 'True')",
            &empty
        ),
        Ok(true)
    );
    assert_eq!(
        eval(
            "status.conditions.exists(c, c.type == 'Failed' && c.status == 'True')",
            &empty
        ),
        Ok(false)
    );
    // Integers are `int`, as in Flux.
    assert_eq!(
        eval("status.n + 1 == 3", &json!({"status": {"n": 2}})),
        Ok(true)
    );
}
