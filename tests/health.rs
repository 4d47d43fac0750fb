//! The health checks shipped in docs/gitops/, run by real interpreters
//! against recorded statuses. No controller runs here, so each side is
//! rebuilt as its controller runs it:
//!
//! - Argo CD: the Lua scripts of `argocd-health.yaml`, in Lua 5.1 (Argo CD
//!   uses gopher-lua, a Lua 5.1 VM) with only the libraries argocd-cm
//!   scripts get, the object converted as Argo CD converts it, and the
//!   returned table read as Argo CD reads it (`util/lua/lua.go`).
//! - Flux: the CEL expressions of `flux-health-checks.yaml`, parsed without
//!   type checks and evaluated with the object's top-level fields as the
//!   variables, in kustomize-controller's order (`fluxcd/pkg`,
//!   `runtime/cel/status_evaluator.go`).
//!
//! Each file in tests/fixtures/health/ is a whole JobSet, PyTorchJob or
//! TFJob as the API server returns it, with the expected results in its
//! annotations:
//! `test.trainc.dev/argocd` (and `-message`) and `test.trainc.dev/flux`.

mod common;
#[path = "common/crd.rs"]
mod crd;

use std::collections::BTreeMap;
use std::fs;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use common::root;
use mlua::{HookTriggers, Lua, LuaOptions, StdLib, VmState};
use serde_json::{Value, json};

const ARGOCD_FILE: &str = "docs/gitops/argocd-health.yaml";
const FLUX_FILE: &str = "docs/gitops/flux-health-checks.yaml";
const FIXTURES: &str = "tests/fixtures/health";
const ARGOCD_KEY_PREFIX: &str = "resource.customizations.health.";

/// The custom kinds trainc's `jobset`, `pytorchjob` and `tfjob` targets
/// write, as (apiVersion, kind): the order of Flux's entries, and of Argo
/// CD's keys once sorted.
const KINDS: [(&str, &str); 3] = [
    ("jobset.x-k8s.io/v1alpha2", "JobSet"),
    ("kubeflow.org/v1", "PyTorchJob"),
    ("kubeflow.org/v1", "TFJob"),
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

fn yaml(path: &str) -> Value {
    let text = fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// `jobset.x-k8s.io/v1alpha2` → `jobset.x-k8s.io`.
fn group(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

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

/// The Lua scripts of the argocd-cm fragment, by `group/kind`.
fn argocd_scripts() -> BTreeMap<String, String> {
    let cm = yaml(ARGOCD_FILE);
    let data = cm["data"].as_object().expect("data");
    data.iter()
        .map(|(key, script)| {
            let target = key
                .strip_prefix(ARGOCD_KEY_PREFIX)
                .unwrap_or_else(|| panic!("{ARGOCD_FILE}: {key} is not a health check"));
            // `<group>_<kind>`: the group may not contain `_`.
            let (group, kind) = target.split_once('_').expect("<group>_<kind>");
            (
                format!("{group}/{kind}"),
                script.as_str().expect("a script").to_owned(),
            )
        })
        .collect()
}

fn argocd_script_for(
    scripts: &BTreeMap<String, String>,
    (api_version, kind): (&str, &str),
) -> String {
    scripts
        .get(&format!("{}/{kind}", group(api_version)))
        .unwrap_or_else(|| panic!("{ARGOCD_FILE}: no health check for {api_version} {kind}"))
        .clone()
}

/// A health status as Argo CD takes it from a script.
#[derive(Debug, PartialEq)]
struct ArgoHealth {
    status: String,
    message: String,
}

/// The statuses Argo CD accepts (`isValidHealthStatusCode`).
const ARGO_STATUSES: [&str; 6] = [
    "Healthy",
    "Progressing",
    "Degraded",
    "Suspended",
    "Missing",
    "Unknown",
];

/// Runs a health script on `obj` as Argo CD runs an argocd-cm script
/// (`useOpenLibs` unset): Lua 5.1 with the base, `package` and `table`
/// libraries, no global `os` but a `require("os")` that gives `time` and
/// `date` only, no `string`, `math`, `io`, `debug` or `coroutine`; `obj`
/// and an empty `actionParams` as globals. Argo CD stops a script after one
/// second; here a budget of instructions stands in for that. An error in
/// the script is an `Err`, which Argo CD reports as Unknown and logs.
fn argo_health(name: &str, script: &str, obj: &Value) -> Result<ArgoHealth, String> {
    let lua = Lua::new_with(
        StdLib::PACKAGE | StdLib::TABLE | StdLib::OS,
        LuaOptions::default(),
    )
    .map_err(|e| e.to_string())?;
    sandbox_like_argocd(&lua).map_err(|e| e.to_string())?;
    let globals = lua.globals();
    let decoded = decode_value(&lua, obj).map_err(|e| e.to_string())?;
    globals.set("obj", decoded).map_err(|e| e.to_string())?;
    let params = lua.create_table().map_err(|e| e.to_string())?;
    globals
        .set("actionParams", params)
        .map_err(|e| e.to_string())?;

    let steps = AtomicU32::new(0);
    lua.set_hook(
        HookTriggers::new().every_nth_instruction(10_000),
        move |_, _| {
            if steps.fetch_add(1, Ordering::Relaxed) > 1_000 {
                Err(mlua::Error::runtime(
                    "timeout: ran for 10 million instructions",
                ))
            } else {
                Ok(VmState::Continue)
            }
        },
    )
    .map_err(|e| e.to_string())?;

    let returned: mlua::MultiValue = lua
        .load(script)
        .set_name(format!("={name}"))
        .eval()
        .map_err(|e| e.to_string())?;
    // Argo CD reads the top of the stack: the last value returned.
    let last = returned.into_iter().last().unwrap_or(mlua::Value::Nil);
    read_result(last)
}

/// gopher-lua's base library has no `coroutine` (C Lua 5.1 opens it with
/// the base library), and Argo CD's safe `os` is only reachable through
/// `require("os")`.
fn sandbox_like_argocd(lua: &Lua) -> mlua::Result<()> {
    let globals = lua.globals();
    let os: mlua::Table = globals.get("os")?;
    let safe_os = lua.create_table()?;
    safe_os.set("time", os.get::<mlua::Function>("time")?)?;
    safe_os.set("date", os.get::<mlua::Function>("date")?)?;
    let loader = lua.create_function(move |_, ()| Ok(safe_os.clone()))?;
    let package: mlua::Table = globals.get("package")?;
    package.get::<mlua::Table>("preload")?.set("os", loader)?;
    package.get::<mlua::Table>("loaded")?.set("os", mlua::Nil)?;
    globals.set("os", mlua::Nil)?;
    globals.set("coroutine", mlua::Nil)?;
    Ok(())
}

/// The object as Argo CD hands it to Lua (`decodeValue`): objects become
/// tables, arrays tables filled 1, 2, ... with `Append`, which skips nil,
/// so a JSON null disappears from an array; null elsewhere is nil, so the
/// key is absent; numbers are Lua numbers. No metatables.
fn decode_value(lua: &Lua, value: &Value) -> mlua::Result<mlua::Value> {
    Ok(match value {
        Value::Null => mlua::Value::Nil,
        Value::Bool(b) => mlua::Value::Boolean(*b),
        Value::Number(n) => mlua::Value::Number(n.as_f64().unwrap_or(f64::NAN)),
        Value::String(s) => mlua::Value::String(lua.create_string(s)?),
        Value::Array(items) => {
            let table = lua.create_table()?;
            for item in items {
                let v = decode_value(lua, item)?;
                if !v.is_nil() {
                    table.raw_push(v)?;
                }
            }
            mlua::Value::Table(table)
        }
        Value::Object(fields) => {
            let table = lua.create_table()?;
            for (k, v) in fields {
                table.raw_set(k.as_str(), decode_value(lua, v)?)?;
            }
            mlua::Value::Table(table)
        }
    })
}

/// The script's result as Argo CD reads it (`ExecuteHealthLua`): nil is an
/// empty health; a table is JSON-encoded and decoded into
/// `{status, message}`, where a table without string keys (`{}`, an array)
/// or a field of another type gives an empty health, and a status Argo CD
/// does not know gives Unknown; anything else is an error.
fn read_result(value: mlua::Value) -> Result<ArgoHealth, String> {
    let empty = ArgoHealth {
        status: String::new(),
        message: String::new(),
    };
    let table = match value {
        mlua::Value::Nil => return Ok(empty),
        mlua::Value::Table(t) => t,
        other => {
            return Err(format!(
                "expect table output from Lua script, not {}",
                other.type_name()
            ));
        }
    };
    // gopher-json encodes a table without string keys (`{}`, an array) as a
    // JSON array, which does not decode into `{status, message}`.
    let mut has_string_key = false;
    for pair in table.pairs::<mlua::Value, mlua::Value>() {
        let (k, _) = pair.map_err(|e| e.to_string())?;
        has_string_key |= k.is_string();
    }
    if !has_string_key {
        return Ok(empty);
    }
    // A field of another type is a decoding error too.
    let field = |name: &str| match table.raw_get::<mlua::Value>(name) {
        Ok(mlua::Value::Nil) => Some(String::new()),
        Ok(mlua::Value::String(s)) => Some(s.to_string_lossy()),
        _ => None,
    };
    let (Some(status), Some(message)) = (field("status"), field("message")) else {
        return Ok(empty);
    };
    if !ARGO_STATUSES.contains(&status.as_str()) {
        return Ok(ArgoHealth {
            status: "Unknown".to_owned(),
            message: "Lua returned an invalid health status".to_owned(),
        });
    }
    Ok(ArgoHealth { status, message })
}

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

/// What kstatus makes of an object (the statuses `wait` knows; Terminating
/// and NotFound do not arise here).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Flux {
    InProgress,
    Failed,
    Current,
    /// An expression failed to evaluate. Flux keeps polling: not terminal.
    Unknown,
}

impl Flux {
    fn parse(s: &str) -> Option<Flux> {
        Some(match s {
            "InProgress" => Flux::InProgress,
            "Failed" => Flux::Failed,
            "Current" => Flux::Current,
            "Unknown" => Flux::Unknown,
            _ => return None,
        })
    }
}

/// One `spec.healthCheckExprs` entry.
struct FluxCheck {
    api_version: String,
    kind: String,
    in_progress: Option<String>,
    failed: Option<String>,
    current: String,
}

fn flux_checks() -> Vec<FluxCheck> {
    let ks = yaml(FLUX_FILE);
    let exprs = ks["spec"]["healthCheckExprs"]
        .as_array()
        .expect("healthCheckExprs");
    exprs
        .iter()
        .map(|e| {
            let text = |key: &str| e[key].as_str().map(str::to_owned);
            FluxCheck {
                api_version: text("apiVersion").expect("apiVersion"),
                kind: text("kind").expect("kind: set it, or Flux < 2.9 refuses the entry"),
                in_progress: text("inProgress"),
                failed: text("failed"),
                current: text("current").expect("current is required"),
            }
        })
        .collect()
}

/// Flux matches an entry by group and kind; the version is not compared.
fn flux_check_for<'a>(checks: &'a [FluxCheck], (api_version, kind): (&str, &str)) -> &'a FluxCheck {
    checks
        .iter()
        .find(|c| group(&c.api_version) == group(api_version) && c.kind == kind)
        .unwrap_or_else(|| {
            panic!("{FLUX_FILE}: no healthCheckExprs entry for {api_version} {kind}")
        })
}

/// The CEL environment of Flux's expressions: the standard macros and
/// functions, optionals, and the strings and encoders extensions. (Flux
/// also has `sets`, which cel-rust lacks; the shipped expressions use none
/// of these extensions.)
fn flux_env() -> Arc<cel::Env> {
    let mut env = cel::Env::stdlib();
    env.add_extension(cel::extensions::strings)
        .expect("strings extension");
    env.add_extension(cel::extensions::encoders)
        .expect("encoders extension");
    Arc::new(env)
}

/// JSON as Kubernetes' unstructured objects hold it, which is what cel-go
/// sees in Flux: whole numbers are `int` (int64). cel-rust's own
/// conversion makes non-negative ones `uint`, on which `x + 1` fails.
fn to_cel(value: &Value) -> cel::Value {
    match value {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => cel::Value::Int(i),
            None => cel::Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => cel::Value::from(s.as_str()),
        Value::Array(items) => cel::Value::from(items.iter().map(to_cel).collect::<Vec<_>>()),
        Value::Object(fields) => {
            let map: std::collections::HashMap<String, cel::Value> =
                fields.iter().map(|(k, v)| (k.clone(), to_cel(v))).collect();
            cel::Value::from(map)
        }
    }
}

/// Evaluates one expression against `obj` as Flux does: parsed, not type
/// checked; every top-level field of the object a variable (there is no
/// `self`); a result other than a boolean is an error.
fn eval(expr: &str, obj: &Value) -> Result<bool, String> {
    let env = flux_env();
    let program = env.compile(expr).map_err(|e| format!("parse: {e}"))?;
    let mut ctx = cel::Context::with_env(Arc::clone(&env));
    for (name, value) in obj.as_object().expect("an object") {
        ctx.add_variable_from_value(name.as_str(), to_cel(value));
    }
    match program.execute(&ctx) {
        Ok(cel::Value::Bool(b)) => Ok(b),
        Ok(other) => Err(format!("not a boolean: {other:?}")),
        Err(e) => Err(e.to_string()),
    }
}

/// kustomize-controller's status of an object with custom health checks:
/// InProgress while `status.observedGeneration` (when an integer) differs
/// from `metadata.generation`; then `inProgress`, `failed`, `current` in
/// that order, the first true one decides; none true is InProgress. An
/// evaluation error stops there and makes the status Unknown: it hides the
/// expressions after it.
fn flux_status(check: &FluxCheck, obj: &Value) -> (Flux, Option<String>) {
    if let (Some(observed), Some(generation)) = (
        obj["status"]["observedGeneration"].as_i64(),
        obj["metadata"]["generation"].as_i64(),
    ) && observed != generation
    {
        return (Flux::InProgress, None);
    }
    for (expr, status) in [
        (&check.in_progress, Flux::InProgress),
        (&check.failed, Flux::Failed),
        (&Some(check.current.clone()), Flux::Current),
    ] {
        let Some(expr) = expr else { continue };
        match eval(expr, obj) {
            Err(e) => return (Flux::Unknown, Some(e)),
            Ok(true) => return (status, None),
            Ok(false) => {}
        }
    }
    (Flux::InProgress, None)
}

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
