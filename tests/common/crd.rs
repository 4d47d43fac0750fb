//! Custom resources checked against their CustomResourceDefinitions the way
//! the API server checks them on create, with tools nobody here wrote: the
//! `jsonschema` crate validates, the `cel` crate evaluates the CEL rules.
//!
//! What is ours is the glue: [`to_json_schema`] turns a CRD's structural
//! `openAPIV3Schema` into a JSON Schema (2020-12) with the API server's
//! semantics, [`apply_defaults`] applies the schema's defaults as the server
//! does before validating, and [`check_cel`] binds `self` at every node that
//! carries `x-kubernetes-validations`.
//!
//! Deliberately stricter than the server in two places: unknown fields are
//! errors (the server prunes them silently: for generated output that is a
//! bug all the same), and `null` is an error where the schema is not
//! `nullable` (the server drops such nulls).
//!
//! Not covered: formats other than int32/int64 (the server checks few), CEL
//! property-name escaping (`__dash__` and the like: no rule in the CRDs here
//! needs it), the cost budget of CEL rules, and the Kubernetes CEL libraries
//! beyond the standard one (the rules here use none). A rule that needs any
//! of these fails loudly (it does not compile or errors), it never passes by
//! accident.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use jsonschema::error::ValidationErrorKind;
use jsonschema::paths::{Location, LocationSegment};
use jsonschema::{Keyword, PatternOptions, ValidationError, Validator};
use serde_json::{Map, Value, json};

/// The CRDs beside the repository (`<repo>/../shared/crds`, as in CI).
pub fn crd_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/crds")
}

/// The custom keyword for `x-kubernetes-list-type: map`; its value is the
/// list of `x-kubernetes-list-map-keys`.
pub const LIST_MAP_KEYS: &str = "x-trainc-list-map-keys";

/// Schema keywords that carry no constraint, or whose constraint is applied
/// outside the JSON Schema (defaults, CEL rules).
const ANNOTATIONS: &[&str] = &[
    "description",
    "title",
    "example",
    "externalDocs",
    "default",
    "x-kubernetes-map-type",
    "x-kubernetes-validations",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-int-or-string",
    "x-kubernetes-embedded-resource",
    "nullable",
];

/// Keywords whose meaning is the same in OpenAPI v3.0 and JSON Schema 2020-12.
const VALUE_KEYWORDS: &[&str] = &[
    "type",
    "enum",
    "pattern",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "multipleOf",
    "required",
    "uniqueItems",
    "minimum",
    "maximum",
];

/// Converts a CRD's structural `openAPIV3Schema` into a JSON Schema 2020-12
/// document for the `jsonschema` crate, with the API server's semantics:
///
/// - an object node (one with `type: object` or `properties`) that has no
///   `additionalProperties` and no `x-kubernetes-preserve-unknown-fields:
///   true` admits only its `properties` (`additionalProperties: false`), and
///   none at all when it has none — except the root `metadata`, the
///   ObjectMeta the server validates itself, which is free-form here but for
///   `name`, `generateName`, `namespace` (strings) and `labels`,
///   `annotations` (string maps);
/// - `x-kubernetes-preserve-unknown-fields: true` keeps the node open;
///   `x-kubernetes-int-or-string` admits an integer or a string;
///   `x-kubernetes-embedded-resource` admits (and requires) `apiVersion` and
///   `kind`, and an ObjectMeta `metadata`; `nullable: true` admits `null`;
/// - `x-kubernetes-list-type: set` → `uniqueItems`; `map` → the tuple of the
///   `x-kubernetes-list-map-keys` is unique ([`LIST_MAP_KEYS`], checked by
///   [`validator`]'s custom keyword);
/// - `format: int32`/`int64` bound the value; other formats are ignored;
/// - OpenAPI v3.0's boolean `exclusiveMinimum`/`exclusiveMaximum` become the
///   2020-12 numeric ones;
/// - inside `anyOf`/`allOf`/`oneOf`/`not` (value validations only, in a
///   structural schema) nodes are not closed.
///
/// Any keyword it does not know is an error, so that a constraint is never
/// dropped silently.
pub fn to_json_schema(openapi: &Value) -> Result<Value, String> {
    let mut out = node(openapi, "", true)?;
    let root = out
        .as_object_mut()
        .ok_or("the root schema is not an object")?;
    // The server admits apiVersion, kind and metadata at the root of every
    // object, and validates metadata itself.
    let props = root
        .entry("properties")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or("root properties is not an object")?;
    props
        .entry("apiVersion")
        .or_insert_with(|| json!({"type": "string"}));
    props
        .entry("kind")
        .or_insert_with(|| json!({"type": "string"}));
    props.insert("metadata".into(), object_meta());
    root.insert(
        "$schema".into(),
        json!("https://json-schema.org/draft/2020-12/schema"),
    );
    Ok(out)
}

/// ObjectMeta as far as this check goes: the server validates the rest.
fn object_meta() -> Value {
    let string_map = json!({"type": "object", "additionalProperties": {"type": "string"}});
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "generateName": {"type": "string"},
            "namespace": {"type": "string"},
            "labels": string_map,
            "annotations": string_map,
        },
    })
}

fn node(s: &Value, at: &str, structural: bool) -> Result<Value, String> {
    let s = s
        .as_object()
        .ok_or_else(|| format!("{at}: a schema must be an object"))?;
    let flag = |k: &str| s.get(k) == Some(&Value::Bool(true));
    let mut out = Map::new();
    let mut all_of = Vec::new();
    for (k, v) in s {
        let here = format!("{at}/{k}");
        match k.as_str() {
            k if ANNOTATIONS.contains(&k) => {}
            k if VALUE_KEYWORDS.contains(&k) => {
                out.insert(k.into(), v.clone());
            }
            "exclusiveMinimum" | "exclusiveMaximum" => {
                // OpenAPI v3.0: a boolean that makes minimum/maximum exclusive.
                let bound = if k == "exclusiveMinimum" {
                    "minimum"
                } else {
                    "maximum"
                };
                match v {
                    Value::Bool(false) => {}
                    Value::Bool(true) => {
                        let b = s
                            .get(bound)
                            .ok_or_else(|| format!("{here} without `{bound}`"))?;
                        all_of.push(json!({ k: b }));
                    }
                    _ => return Err(format!("{here}: expected a boolean")),
                }
            }
            "format" => match v.as_str() {
                Some("int32") => all_of.push(json!({
                    "minimum": i32::MIN, "maximum": i32::MAX,
                })),
                Some("int64") => all_of.push(json!({
                    "minimum": i64::MIN, "maximum": i64::MAX,
                })),
                _ => {}
            },
            "properties" => {
                let props = v
                    .as_object()
                    .ok_or_else(|| format!("{here}: expected an object"))?;
                let mut converted = Map::new();
                for (name, child) in props {
                    converted.insert(
                        name.clone(),
                        node(child, &format!("{here}/{name}"), structural)?,
                    );
                }
                out.insert(k.into(), Value::Object(converted));
            }
            "items" => {
                if !v.is_object() {
                    return Err(format!("{here}: only a single items schema is structural"));
                }
                out.insert(k.into(), node(v, &here, structural)?);
            }
            "additionalProperties" => {
                let converted = match v {
                    Value::Bool(_) => v.clone(),
                    _ => node(v, &here, structural)?,
                };
                out.insert(k.into(), converted);
            }
            "allOf" | "anyOf" | "oneOf" => {
                let branches = v
                    .as_array()
                    .ok_or_else(|| format!("{here}: expected an array"))?;
                let converted = branches
                    .iter()
                    .enumerate()
                    .map(|(i, b)| node(b, &format!("{here}/{i}"), false))
                    .collect::<Result<Vec<_>, _>>()?;
                if k == "allOf" {
                    all_of.extend(converted);
                } else {
                    out.insert(k.into(), Value::Array(converted));
                }
            }
            "not" => {
                out.insert(k.into(), node(v, &here, false)?);
            }
            "x-kubernetes-list-type" => match v.as_str() {
                Some("atomic") => {}
                Some("set") => {
                    out.insert("uniqueItems".into(), Value::Bool(true));
                }
                Some("map") => {
                    let keys = s
                        .get("x-kubernetes-list-map-keys")
                        .and_then(Value::as_array)
                        .filter(|keys| !keys.is_empty() && keys.iter().all(Value::is_string))
                        .ok_or_else(|| format!("{here}: `map` needs x-kubernetes-list-map-keys"))?;
                    out.insert(LIST_MAP_KEYS.into(), Value::Array(keys.clone()));
                }
                _ => return Err(format!("{here}: unknown list type {v}")),
            },
            other => return Err(format!("{at}: unsupported schema keyword `{other}`")),
        }
    }
    if flag("x-kubernetes-int-or-string") {
        out.insert("type".into(), json!(["integer", "string"]));
    }
    if flag("x-kubernetes-embedded-resource") {
        let props = out
            .entry("properties")
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .ok_or_else(|| format!("{at}/properties: expected an object"))?;
        props
            .entry("apiVersion")
            .or_insert_with(|| json!({"type": "string", "minLength": 1}));
        props
            .entry("kind")
            .or_insert_with(|| json!({"type": "string", "minLength": 1}));
        props.entry("metadata").or_insert_with(object_meta);
        let required = out
            .entry("required")
            .or_insert_with(|| json!([]))
            .as_array_mut()
            .ok_or_else(|| format!("{at}/required: expected an array"))?;
        for k in ["apiVersion", "kind"] {
            if !required.iter().any(|r| r == k) {
                required.push(json!(k));
            }
        }
    }
    let is_object =
        s.get("type").and_then(Value::as_str) == Some("object") || s.contains_key("properties");
    if structural
        && is_object
        && !flag("x-kubernetes-preserve-unknown-fields")
        && !s.contains_key("additionalProperties")
    {
        // The server prunes what the schema does not name; for generated
        // output an unknown field is a bug, so it is an error here.
        out.insert("additionalProperties".into(), Value::Bool(false));
    }
    if !all_of.is_empty() {
        out.insert("allOf".into(), Value::Array(all_of));
    }
    let out = Value::Object(out);
    Ok(if flag("nullable") {
        json!({"anyOf": [{"type": "null"}, out]})
    } else {
        out
    })
}

/// `x-kubernetes-list-type: map`: no two items have the same key tuple (a
/// missing key counts as `null`).
struct ListMapKeys(Vec<String>);

impl ListMapKeys {
    fn duplicate(&self, instance: &Value) -> Option<String> {
        let items = instance.as_array()?;
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        for (i, item) in items.iter().enumerate() {
            let tuple: Map<String, Value> = self
                .0
                .iter()
                .map(|k| (k.clone(), item.get(k).cloned().unwrap_or(Value::Null)))
                .collect();
            let key = Value::Object(tuple).to_string();
            if let Some(first) = seen.insert(key.clone(), i) {
                return Some(format!(
                    "items [{first}] and [{i}] have the same list-map key {key}"
                ));
            }
        }
        None
    }
}

impl<'i> Keyword<'i> for ListMapKeys {
    fn validate(&self, instance: &'i Value) -> Result<(), ValidationError<'i>> {
        match self.duplicate(instance) {
            Some(message) => Err(ValidationError::custom(message)),
            None => Ok(()),
        }
    }

    fn is_valid(&self, instance: &'i Value) -> bool {
        self.duplicate(instance).is_none()
    }
}

fn list_map_keys_factory<'a>(
    _parent: &'a Map<String, Value>,
    value: &'a Value,
    _path: Location,
) -> Result<Box<dyn for<'i> Keyword<'i>>, ValidationError<'a>> {
    let keys = value
        .as_array()
        .map(|keys| {
            keys.iter()
                .filter_map(|k| k.as_str().map(str::to_owned))
                .collect()
        })
        .ok_or_else(|| ValidationError::schema("list-map keys must be an array of strings"))?;
    Ok(Box::new(ListMapKeys(keys)))
}

/// Compiles a schema from [`to_json_schema`]: draft 2020-12, patterns with
/// the `regex` crate (RE2 syntax, as Go's regexp), the list-map keyword.
pub fn validator(schema: &Value) -> Result<Validator, String> {
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .with_pattern_options(PatternOptions::regex())
        .should_validate_formats(false)
        .with_keyword(LIST_MAP_KEYS, list_map_keys_factory)
        .build(schema)
        .map_err(|e| e.to_string())
}

/// Applies the structural schema's `default`s to `value`, top-down, as the
/// server does before it validates: an absent property with a default gets
/// it, then everything present (defaults included) is defaulted in turn.
pub fn apply_defaults(schema: &Value, value: &mut Value) {
    match value {
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            if let Some(props) = props {
                for (k, ps) in props {
                    if !map.contains_key(k)
                        && let Some(d) = ps.get("default")
                    {
                        map.insert(k.clone(), d.clone());
                    }
                    if let Some(child) = map.get_mut(k) {
                        apply_defaults(ps, child);
                    }
                }
            }
            if let Some(ap) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                for (k, child) in map.iter_mut() {
                    if !props.is_some_and(|p| p.contains_key(k)) {
                        apply_defaults(ap, child);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for item in items {
                    apply_defaults(s, item);
                }
            }
        }
        _ => {}
    }
}

/// A value as CEL sees it. Integers become `int` (`serde_json` would give
/// cel's own conversion a `uint` for every non-negative one, and `uint` never
/// equals the `int` literals the rules compare with), except those beyond
/// `i64`, which the server would not accept anyway.
pub fn to_cel(v: &Value) -> cel::Value {
    match v {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => cel::Value::Int(i),
            (None, Some(u)) => cel::Value::UInt(u),
            _ => cel::Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => cel::Value::String(Arc::new(s.clone())),
        Value::Array(a) => cel::Value::List(Arc::new(a.iter().map(to_cel).collect())),
        Value::Object(m) => {
            let map: HashMap<String, cel::Value> =
                m.iter().map(|(k, v)| (k.clone(), to_cel(v))).collect();
            cel::Value::from(map)
        }
    }
}

/// A CEL rule that did not hold.
#[derive(Debug, Clone)]
pub struct CelFailure {
    /// Field path of the node (plus the rule's `fieldPath`), e.g.
    /// `spec.replicatedJobs[0]`.
    pub path: String,
    pub rule: String,
    pub message: String,
}

impl std::fmt::Display for CelFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = if self.path.is_empty() {
            "<root>"
        } else {
            &self.path
        };
        write!(f, "{at}: {} (CEL rule `{}`)", self.message, self.rule)
    }
}

/// What [`check_cel`] did.
#[derive(Debug, Default)]
pub struct CelReport {
    pub failures: Vec<CelFailure>,
    /// Rules evaluated (and passed or failed).
    pub evaluated: usize,
    /// Transition rules (they reference `oldSelf`): not evaluated on create.
    pub transition: usize,
}

/// Evaluates every `x-kubernetes-validations` rule of the structural schema
/// on `value` as on create: at each node present in `value` (not null), with
/// `self` bound to the value there. Rules that reference `oldSelf` are
/// transition rules and are skipped. A rule that does not compile, errors
/// or does not return `true` is a failure.
pub fn check_cel(schema: &Value, value: &Value) -> CelReport {
    let mut report = CelReport::default();
    cel_walk(schema, value, "", &mut report);
    report
}

fn cel_walk(schema: &Value, value: &Value, path: &str, report: &mut CelReport) {
    if value.is_null() {
        return;
    }
    let rules = schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array);
    for r in rules.into_iter().flatten() {
        cel_rule(r, value, path, report);
    }
    match value {
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let extra = schema.get("additionalProperties").filter(|a| a.is_object());
            for (k, child) in map {
                if let Some(ps) = props.and_then(|p| p.get(k)) {
                    cel_walk(ps, child, &field(path, k), report);
                } else if let Some(ap) = extra {
                    cel_walk(ap, child, &field(path, k), report);
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    cel_walk(s, item, &format!("{path}[{i}]"), report);
                }
            }
        }
        _ => {}
    }
}

fn cel_rule(r: &Value, value: &Value, path: &str, report: &mut CelReport) {
    let rule = r.get("rule").and_then(Value::as_str).unwrap_or_default();
    let at = format!(
        "{path}{}",
        r.get("fieldPath").and_then(Value::as_str).unwrap_or("")
    );
    let message = r
        .get("message")
        .and_then(Value::as_str)
        .map_or_else(|| format!("failed rule: {rule}"), str::to_owned);
    let mut fail = |message: String| {
        report.failures.push(CelFailure {
            path: at.clone(),
            rule: rule.to_owned(),
            message,
        });
    };
    let program = match cel::Program::compile(rule) {
        Ok(p) => p,
        Err(e) => {
            fail(format!("{message} [the rule does not compile: {e}]"));
            return;
        }
    };
    if program.references().has_variable("oldSelf") {
        report.transition += 1;
        return;
    }
    report.evaluated += 1;
    let mut context = cel::Context::default();
    context.add_variable_from_value("self", to_cel(value));
    match program.execute(&context) {
        Ok(cel::Value::Bool(true)) => {}
        Ok(cel::Value::Bool(false)) => {
            // The server prefers messageExpression when it evaluates to a
            // string.
            let custom = r
                .get("messageExpression")
                .and_then(Value::as_str)
                .and_then(|m| cel::Program::compile(m).ok())
                .and_then(|p| p.execute(&context).ok());
            match custom {
                Some(cel::Value::String(s)) => fail(s.to_string()),
                _ => fail(message),
            }
        }
        Ok(other) => fail(format!(
            "{message} [the rule returned {other:?}, not a bool]"
        )),
        Err(e) => fail(format!("{message} [the rule errored: {e}]")),
    }
}

/// `path.name`, or `path[name]` when `name` is not an identifier (map keys
/// such as label names).
fn field(path: &str, name: &str) -> String {
    let ident = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    match (path.is_empty(), ident) {
        (_, false) => format!("{path}[{name}]"),
        (true, true) => name.to_owned(),
        (false, true) => format!("{path}.{name}"),
    }
}

/// A JSON pointer into `root` as a Kubernetes field path
/// (`spec.replicatedJobs[0].name`).
pub fn field_path(root: &Value, location: &Location) -> String {
    let mut cur = Some(root);
    let mut out = String::new();
    for seg in location.iter() {
        let name = match seg {
            LocationSegment::Property(p) => p.into_owned(),
            LocationSegment::Index(i) => i.to_string(),
        };
        cur = match cur {
            Some(Value::Array(items)) => {
                let _ = write!(out, "[{name}]");
                name.parse::<usize>().ok().and_then(|i| items.get(i))
            }
            Some(Value::Object(map)) => {
                out = field(&out, &name);
                map.get(&name)
            }
            _ => {
                out = field(&out, &name);
                None
            }
        };
    }
    out
}

/// Every schema error of `value` under `validator`, as `path: message`;
/// an unknown field is reported at its own path.
pub fn schema_errors(validator: &Validator, value: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for e in validator.iter_errors(value) {
        let path = field_path(value, e.instance_path());
        let unexpected: Vec<String> = match e.kind() {
            ValidationErrorKind::AdditionalProperties { unexpected } => unexpected.clone(),
            // `additionalProperties: false` without `properties` reports the
            // object, with its first member only.
            ValidationErrorKind::FalseSchema
                if e.schema_path().as_str().ends_with("/additionalProperties") =>
            {
                value
                    .pointer(e.instance_path().as_str())
                    .and_then(Value::as_object)
                    .map(|m| m.keys().cloned().collect())
                    .unwrap_or_default()
            }
            _ => Vec::new(),
        };
        if !unexpected.is_empty() {
            for name in &unexpected {
                out.push(format!(
                    "{}: unknown field (not in the CRD's schema; the API server would prune it)",
                    field(&path, name)
                ));
            }
            continue;
        }
        let mut message = e.to_string();
        if message.len() > 300 {
            let mut cut = 300;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
            message.push('…');
        }
        let at = if path.is_empty() { "<root>" } else { &path };
        out.push(format!("{at}: {message}"));
    }
    out
}

/// One served version of a CRD, ready to validate objects.
pub struct Served {
    pub file: String,
    pub api_version: String,
    pub kind: String,
    pub storage: bool,
    /// The version's `openAPIV3Schema`, as written.
    pub openapi: Value,
    pub validator: Validator,
}

/// What [`Crds::validate`] found for one object.
#[derive(Debug, Default)]
pub struct Checked {
    pub errors: Vec<String>,
    pub cel_evaluated: usize,
    pub cel_transition: usize,
}

/// The served versions of every CRD in a directory.
pub struct Crds {
    pub served: Vec<Served>,
    /// Every group the CRDs define, served or not.
    pub groups: BTreeSet<String>,
}

/// Every document of a YAML file (comments and empty documents skipped).
pub fn yaml_documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

/// The API groups the CRDs in `dir` define: objects of these groups are
/// custom resources, which kubernetes-validate does not know.
pub fn groups(dir: &Path) -> BTreeSet<String> {
    crd_files(dir)
        .unwrap_or_else(|e| panic!("{e}"))
        .iter()
        .flat_map(|p| yaml_documents(p))
        .filter(|d| d["kind"] == "CustomResourceDefinition")
        .filter_map(|d| d["spec"]["group"].as_str().map(str::to_owned))
        .collect()
}

fn crd_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| {
            format!(
                "{}: {e} (the CRDs are expected in ../shared/crds beside the repository)",
                dir.display()
            )
        })?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    files.retain(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"));
    files.sort();
    Ok(files)
}

impl Crds {
    /// Loads every `*.yaml` CRD in `dir` and compiles a validator for each
    /// served version.
    pub fn load(dir: &Path) -> Result<Crds, String> {
        let files = crd_files(dir)?;
        let mut crds = Crds {
            served: Vec::new(),
            groups: BTreeSet::new(),
        };
        for path in &files {
            let file = path.file_name().unwrap().to_string_lossy().into_owned();
            for doc in yaml_documents(path) {
                if doc["kind"] != "CustomResourceDefinition" {
                    continue;
                }
                let spec = &doc["spec"];
                let group = spec["group"]
                    .as_str()
                    .ok_or_else(|| format!("{file}: no spec.group"))?;
                let kind = spec["names"]["kind"]
                    .as_str()
                    .ok_or_else(|| format!("{file}: no spec.names.kind"))?;
                crds.groups.insert(group.to_owned());
                for v in spec["versions"].as_array().into_iter().flatten() {
                    let name = v["name"].as_str().unwrap_or_default();
                    if v["served"] != true {
                        continue;
                    }
                    let openapi = v["schema"]["openAPIV3Schema"].clone();
                    let schema =
                        to_json_schema(&openapi).map_err(|e| format!("{file} {name}: {e}"))?;
                    let validator =
                        validator(&schema).map_err(|e| format!("{file} {name}: {e}"))?;
                    crds.served.push(Served {
                        file: file.clone(),
                        api_version: format!("{group}/{name}"),
                        kind: kind.to_owned(),
                        storage: v["storage"] == true,
                        openapi,
                        validator,
                    });
                }
            }
        }
        Ok(crds)
    }

    /// Whether objects of this apiVersion are custom resources of these CRDs
    /// (served or not).
    pub fn is_custom(&self, api_version: &str) -> bool {
        api_version
            .split_once('/')
            .is_some_and(|(group, _)| self.groups.contains(group))
    }

    pub fn find(&self, api_version: &str, kind: &str) -> Option<&Served> {
        self.served
            .iter()
            .find(|s| s.api_version == api_version && s.kind == kind)
    }

    /// Validates one object as the API server would on create: defaults,
    /// then the schema, then the CEL rules (on the defaulted object).
    pub fn validate(&self, object: &Value) -> Checked {
        let api_version = object["apiVersion"].as_str().unwrap_or_default();
        let kind = object["kind"].as_str().unwrap_or_default();
        let Some(served) = self.find(api_version, kind) else {
            return Checked {
                errors: vec![format!(
                    "<root>: no CRD serves kind {kind:?} in apiVersion {api_version:?}"
                )],
                ..Checked::default()
            };
        };
        let mut object = object.clone();
        apply_defaults(&served.openapi, &mut object);
        let mut errors = schema_errors(&served.validator, &object);
        let cel = check_cel(&served.openapi, &object);
        errors.extend(cel.failures.iter().map(ToString::to_string));
        Checked {
            errors,
            cel_evaluated: cel.evaluated,
            cel_transition: cel.transition,
        }
    }
}
