//! The health checks trainc ships in docs/gitops/, evaluated by real
//! interpreters as each controller evaluates them:
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
//! tests/health.rs checks them against recorded objects; [`argo`] and
//! [`flux`] run them on any object, such as one read from a live cluster.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use mlua::{HookTriggers, Lua, LuaOptions, StdLib, VmState};
use serde_json::Value;

pub const ARGOCD_FILE: &str = "docs/gitops/argocd-health.yaml";
pub const FLUX_FILE: &str = "docs/gitops/flux-health-checks.yaml";
const ARGOCD_KEY_PREFIX: &str = "resource.customizations.health.";

/// A YAML file of the repository, by its path from the repository root.
pub fn yaml(path: &str) -> Value {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// `jobset.x-k8s.io/v1alpha2` → `jobset.x-k8s.io`.
pub fn group(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

/// The object's `(apiVersion, kind)`, or why it has none.
fn api_version_and_kind(obj: &Value) -> Result<(&str, &str), String> {
    match (obj["apiVersion"].as_str(), obj["kind"].as_str()) {
        (Some(api_version), Some(kind)) => Ok((api_version, kind)),
        _ => Err("the object has no string apiVersion and kind".to_owned()),
    }
}

// ---------------------------------------------------------------------------
// Argo CD

/// The Argo CD health of `obj` as `(status, message)`, the status one of
/// [`ARGO_STATUSES`] or empty when the script returns no health: the
/// script of argocd-health.yaml for its group and kind, run by
/// [`argo_health`]. This
/// is the evaluator tests/health.rs checks against recorded objects. An
/// `Err` is a script error (Argo CD would show Unknown) or an object
/// without apiVersion and kind; a kind the file has no script for panics.
pub fn argo(obj: &Value) -> Result<(String, String), String> {
    let (api_version, kind) = api_version_and_kind(obj)?;
    let script = argocd_script_for(&argocd_scripts(), (api_version, kind));
    let health = argo_health(kind, &script, obj)?;
    Ok((health.status, health.message))
}

/// The Lua scripts of the argocd-cm fragment, by `group/kind`.
pub fn argocd_scripts() -> BTreeMap<String, String> {
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

pub fn argocd_script_for(
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
pub struct ArgoHealth {
    pub status: String,
    pub message: String,
}

/// The statuses Argo CD accepts (`isValidHealthStatusCode`).
pub const ARGO_STATUSES: [&str; 6] = [
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
pub fn argo_health(name: &str, script: &str, obj: &Value) -> Result<ArgoHealth, String> {
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
pub fn sandbox_like_argocd(lua: &Lua) -> mlua::Result<()> {
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
pub fn decode_value(lua: &Lua, value: &Value) -> mlua::Result<mlua::Value> {
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
pub fn read_result(value: mlua::Value) -> Result<ArgoHealth, String> {
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

// ---------------------------------------------------------------------------
// Flux

/// The Flux status of `obj` (`"InProgress"`, `"Failed"`, `"Current"` or
/// `"Unknown"`, see [`Flux`]) and the evaluation error behind an Unknown:
/// the healthCheckExprs entry of flux-health-checks.yaml for its group and
/// kind, evaluated by [`flux_status`]. This is the evaluator
/// tests/health.rs checks against recorded objects. An object without
/// apiVersion and kind, or of a kind the file has no entry for, panics.
pub fn flux(obj: &Value) -> (String, Option<String>) {
    let kind = api_version_and_kind(obj).unwrap_or_else(|e| panic!("{e}: {obj}"));
    let (status, error) = flux_status(flux_check_for(&flux_checks(), kind), obj);
    (status.as_str().to_owned(), error)
}

/// What kstatus makes of an object (the statuses `wait` knows; Terminating
/// and NotFound do not arise here).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Flux {
    InProgress,
    Failed,
    Current,
    /// An expression failed to evaluate. Flux keeps polling: not terminal.
    Unknown,
}

impl Flux {
    const ALL: [Flux; 4] = [Flux::InProgress, Flux::Failed, Flux::Current, Flux::Unknown];

    /// The name kstatus (and `flux`) prints.
    pub fn as_str(self) -> &'static str {
        match self {
            Flux::InProgress => "InProgress",
            Flux::Failed => "Failed",
            Flux::Current => "Current",
            Flux::Unknown => "Unknown",
        }
    }

    pub fn parse(s: &str) -> Option<Flux> {
        Flux::ALL.into_iter().find(|f| f.as_str() == s)
    }
}

/// One `spec.healthCheckExprs` entry.
pub struct FluxCheck {
    pub api_version: String,
    pub kind: String,
    pub in_progress: Option<String>,
    pub failed: Option<String>,
    pub current: String,
}

pub fn flux_checks() -> Vec<FluxCheck> {
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
pub fn flux_check_for<'a>(
    checks: &'a [FluxCheck],
    (api_version, kind): (&str, &str),
) -> &'a FluxCheck {
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
pub fn flux_env() -> Arc<cel::Env> {
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
pub fn to_cel(value: &Value) -> cel::Value {
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
pub fn eval(expr: &str, obj: &Value) -> Result<bool, String> {
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
pub fn flux_status(check: &FluxCheck, obj: &Value) -> (Flux, Option<String>) {
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
