//! The Kubernetes part of schema/trainingjob.schema.json: the pod template
//! (`spec.patches[].strategic`) and everything it refers to, affinity among
//! it (`spec.roles.<role>.affinity`), as `$defs` named `io.k8s.…`.
//!
//! They are generated from k8s-openapi's own JSON Schemas (its `schemars`
//! feature, a dev-dependency only: the binary reads the committed file), then
//! made fit for patches:
//! - no `required`: a patch names only what it changes; the fields are kept
//!   as `x-trainc-required`, which trainc checks in the patched template
//!   (k8s-openapi reads a missing required field as its default);
//! - every type also admits `null`, which deletes a field in a strategic
//!   patch (the convention of Kubernetes' published JSON Schemas);
//! - objects refuse unknown fields (`additionalProperties: false`), so
//!   editors and validation catch a misspelt field, but admit keys starting
//!   with `$`, the strategic-merge directives, which validation checks;
//! - int-or-string and quantity fields say so with a type;
//! - lists that a strategic patch merges item by item carry Kubernetes'
//!   `x-kubernetes-patch-strategy` and `x-kubernetes-patch-merge-key`, which
//!   k8s-openapi leaves out and trainc's merge reads ([`PATCH_STRATEGIES`]).
//!
//! Descriptions are kept: they are editors' hover documentation, and cost
//! nothing to definitions that use neither patches nor affinity (see
//! `src/validate/schema.rs`).
//!
//! The test fails when the committed defs differ from what k8s-openapi
//! generates; `TRAINC_BLESS=1 cargo test --test k8s_schema` rewrites them.

mod common;

use std::fmt::Write as _;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use serde_json::{Map, Value, json};

const SCHEMA: &str = "schema/trainingjob.schema.json";
const PREFIX: &str = "io.k8s.";

/// `(definition, field, patch strategy, merge key)` of every list in the pod
/// template that a strategic patch does not simply replace: Kubernetes
/// v1.33's `x-kubernetes-patch-strategy` and `x-kubernetes-patch-merge-key`
/// (from the Go types' `patchStrategy` and `patchMergeKey` tags). Checked
/// against the published OpenAPI definitions when kubernetes-validate is
/// installed (see [`patch_strategies_are_kubernetes_own`]).
const PATCH_STRATEGIES: &[(&str, &str, &str, Option<&str>)] = &[
    ("io.k8s.api.core.v1.Container", "env", "merge", Some("name")),
    (
        "io.k8s.api.core.v1.Container",
        "ports",
        "merge",
        Some("containerPort"),
    ),
    (
        "io.k8s.api.core.v1.Container",
        "volumeDevices",
        "merge",
        Some("devicePath"),
    ),
    (
        "io.k8s.api.core.v1.Container",
        "volumeMounts",
        "merge",
        Some("mountPath"),
    ),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        "env",
        "merge",
        Some("name"),
    ),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        "ports",
        "merge",
        Some("containerPort"),
    ),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        "volumeDevices",
        "merge",
        Some("devicePath"),
    ),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        "volumeMounts",
        "merge",
        Some("mountPath"),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "containers",
        "merge",
        Some("name"),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "ephemeralContainers",
        "merge",
        Some("name"),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "hostAliases",
        "merge",
        Some("ip"),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "imagePullSecrets",
        "merge",
        Some("name"),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "initContainers",
        "merge",
        Some("name"),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "resourceClaims",
        "merge,retainKeys",
        Some("name"),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "schedulingGates",
        "merge",
        Some("name"),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "topologySpreadConstraints",
        "merge",
        Some("topologyKey"),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "volumes",
        "merge,retainKeys",
        Some("name"),
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        "finalizers",
        "merge",
        None,
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        "ownerReferences",
        "merge",
        Some("uid"),
    ),
];

/// The pod template's definitions, as committed.
fn generate() -> Vec<(String, Value)> {
    let mut generator = schemars::generate::SchemaSettings::draft2020_12().into_generator();
    let root = generator.subschema_for::<PodTemplateSpec>();
    assert_eq!(
        root.as_value(),
        &json!({"$ref": "#/$defs/io.k8s.api.core.v1.PodTemplateSpec"})
    );
    let mut defs: Vec<(String, Value)> = generator.take_definitions(true).into_iter().collect();
    defs.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, def) in &mut defs {
        assert!(name.starts_with(PREFIX), "{name}");
        if def.get("x-kubernetes-int-or-string") == Some(&json!(true)) {
            // Quantities are numbers or strings (`cpu: 0.5`, `memory: 1Gi`),
            // other int-or-string fields integers or names (`port: http`).
            let number = if name.ends_with(".Quantity") {
                "number"
            } else {
                "integer"
            };
            def["type"] = json!([number, "string"]);
        }
        for_patches(def);
        if let Some(props) = def.get_mut("properties").and_then(Value::as_object_mut) {
            for &(owner, field, strategy, key) in PATCH_STRATEGIES {
                if owner != name {
                    continue;
                }
                let prop = props
                    .get_mut(field)
                    .and_then(Value::as_object_mut)
                    .unwrap_or_else(|| panic!("{owner} has no field {field}"));
                assert_eq!(prop["type"], json!(["array", "null"]), "{owner}.{field}");
                prop.insert("x-kubernetes-patch-strategy".into(), json!(strategy));
                if let Some(key) = key {
                    prop.insert("x-kubernetes-patch-merge-key".into(), json!(key));
                }
            }
        }
    }
    for &(owner, _, _, _) in PATCH_STRATEGIES {
        assert!(
            defs.iter().any(|(n, _)| n == owner),
            "{owner} is not generated"
        );
    }
    defs
}

/// The changes the module documentation lists, on one schema and below.
fn for_patches(v: &mut Value) {
    let Some(o) = v.as_object_mut() else { return };
    if let Some(required) = o.remove("required") {
        o.insert("x-trainc-required".into(), required);
    }
    match o.get_mut("type") {
        Some(Value::String(t)) => {
            let t = std::mem::take(t);
            o.insert("type".into(), json!([t, "null"]));
        }
        Some(Value::Array(ts)) if !ts.contains(&json!("null")) => ts.push(json!("null")),
        _ => {}
    }
    if o.contains_key("properties") && !o.contains_key("additionalProperties") {
        o.insert("additionalProperties".into(), json!(false));
        o.insert("patternProperties".into(), json!({"^\\$": true}));
    }
    if let Some(props) = o.get_mut("properties").and_then(Value::as_object_mut) {
        props.values_mut().for_each(for_patches);
    }
    for key in ["items", "additionalProperties"] {
        if let Some(s) = o.get_mut(key) {
            for_patches(s);
        }
    }
}

/// JSON as the hand-written part of the schema is laid out: two spaces,
/// lists of scalars on one line.
fn render(v: &Value, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent + 2);
    match v {
        Value::Object(o) if !o.is_empty() => {
            out.push_str("{\n");
            for (i, (k, v)) in o.iter().enumerate() {
                let _ = write!(out, "{pad}{}: ", Value::String(k.clone()));
                render(v, indent + 2, out);
                out.push_str(if i + 1 < o.len() { ",\n" } else { "\n" });
            }
            let _ = write!(out, "{}}}", " ".repeat(indent));
        }
        Value::Array(a) if a.iter().any(|x| x.is_object() || x.is_array()) => {
            out.push_str("[\n");
            for (i, x) in a.iter().enumerate() {
                out.push_str(&pad);
                render(x, indent + 2, out);
                out.push_str(if i + 1 < a.len() { ",\n" } else { "\n" });
            }
            let _ = write!(out, "{}]", " ".repeat(indent));
        }
        Value::Array(a) => {
            let items: Vec<String> = a.iter().map(Value::to_string).collect();
            let _ = write!(out, "[{}]", items.join(", "));
        }
        other => out.push_str(&other.to_string()),
    }
}

/// The schema file with `defs` as the `io.k8s.…` definitions, which close
/// `$defs`, one entry per line at four spaces. trainc reads the schema
/// without them by cutting this tail off (`lean` in src/validate/schema.rs).
fn with_defs(text: &str, defs: &[(String, Value)]) -> String {
    let committed: Value = serde_json::from_str(text).expect("the schema is JSON");
    let names: Vec<&String> = committed["$defs"]
        .as_object()
        .expect("$defs")
        .keys()
        .collect();
    if let Some(first) = names.iter().position(|n| n.starts_with(PREFIX)) {
        let stray: Vec<&&String> = names[first..]
            .iter()
            .filter(|n| !n.starts_with(PREFIX))
            .collect();
        assert!(
            stray.is_empty(),
            "{SCHEMA}: keep trainc's own $defs before the generated `io.k8s.` ones, found {stray:?} among them"
        );
    }
    let end = text
        .find(",\n    \"io.k8s.")
        .or_else(|| text.rfind("\n  }\n}"))
        .expect("the schema ends with $defs");
    let mut out = text[..end].to_owned();
    for (name, def) in defs {
        let _ = write!(out, ",\n    {}: ", Value::String(name.clone()));
        render(def, 4, &mut out);
    }
    out.push_str("\n  }\n}\n");
    out
}

#[test]
fn kubernetes_defs_are_generated_from_k8s_openapi() {
    let path = common::root().join(SCHEMA);
    let text = std::fs::read_to_string(&path).expect("read the schema");
    let expected = with_defs(&text, &generate());
    if text == expected {
        return;
    }
    if std::env::var_os("TRAINC_BLESS").is_some() {
        std::fs::write(&path, &expected).expect("write the schema");
        return;
    }
    let first = text
        .lines()
        .zip(expected.lines())
        .position(|(a, b)| a != b)
        .map_or(text.lines().count().min(expected.lines().count()), |i| i);
    panic!(
        "{SCHEMA} differs from the generated Kubernetes definitions from line {}; \
         regenerate them with `TRAINC_BLESS=1 cargo test --test k8s_schema` and review the diff",
        first + 1
    );
}

/// The merge strategies above are the ones Kubernetes publishes, for every
/// definition the pod template reaches: read from the v1.33 OpenAPI
/// definitions that kubernetes-validate ships (installed by tests/run.sh).
#[test]
fn patch_strategies_are_kubernetes_own() {
    let Some(published) = published_definitions() else {
        return;
    };
    let defs = &published["$defs"];
    let mut found = Vec::new();
    for (name, _) in generate() {
        let Some(props) = defs[&name]["properties"].as_object() else {
            continue;
        };
        for (field, s) in props {
            if let Some(strategy) = s["x-kubernetes-patch-strategy"].as_str() {
                found.push((
                    name.clone(),
                    field.clone(),
                    strategy.to_owned(),
                    s["x-kubernetes-patch-merge-key"]
                        .as_str()
                        .map(str::to_owned),
                ));
            }
        }
    }
    found.sort();
    let mut ours: Vec<(String, String, String, Option<String>)> = PATCH_STRATEGIES
        .iter()
        .map(|(d, f, s, k)| {
            (
                (*d).to_owned(),
                (*f).to_owned(),
                (*s).to_owned(),
                k.map(str::to_owned),
            )
        })
        .collect();
    ours.sort();
    assert_eq!(ours, found);
}

fn published_definitions() -> Option<Value> {
    let lib = common::root().join("target/tools/venv/lib");
    let file = std::fs::read_dir(&lib)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| {
            e.path().join(
                "site-packages/kubernetes_validate/kubernetes-json-schema/v1.33.0-local/_definitions.json",
            )
        })
        .find(|p| p.is_file());
    let Some(file) = file else {
        assert!(
            std::env::var_os("TRAINC_REQUIRE_TOOLS").is_none(),
            "kubernetes-validate is required; `bash tests/run.sh` installs it"
        );
        eprintln!("skipping: kubernetes-validate's definitions not found");
        return None;
    };
    let text = std::fs::read_to_string(file).expect("read the definitions");
    Some(serde_json::from_str(&text).expect("definitions are JSON"))
}

/// What the post-processing promises, on the result.
#[test]
fn defs_fit_patches() {
    let defs: Map<String, Value> = generate().into_iter().collect();
    let container = &defs["io.k8s.api.core.v1.Container"];
    assert!(container.get("required").is_none());
    assert_eq!(container["x-trainc-required"], json!(["name"]));
    assert_eq!(container["type"], json!(["object", "null"]));
    assert_eq!(container["additionalProperties"], json!(false));
    assert_eq!(
        container["properties"]["env"]["x-kubernetes-patch-merge-key"],
        json!("name")
    );
    assert_eq!(
        defs["io.k8s.apimachinery.pkg.api.resource.Quantity"]["type"],
        json!(["number", "string", "null"])
    );
    assert_eq!(
        defs["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]["type"],
        json!(["integer", "string", "null"])
    );
    // Maps stay maps: labels take any key.
    let labels = &defs["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]["properties"]["labels"];
    assert_eq!(
        labels["additionalProperties"]["type"],
        json!(["string", "null"])
    );
}
