//! Every custom resource trainc generates (JobSet, TFJob) checked against its
//! CRD in `../shared/crds/` as the API server would check it on create:
//! structural schema (unknown fields are errors), defaults, list-map keys,
//! int32/int64 ranges, and the CRD's CEL rules (`x-kubernetes-validations`).
//! The validation itself is done by the `jsonschema` and `cel` crates;
//! `common/crd.rs` converts the CRD schema and binds the values.
//!
//! Built-in kinds in the same outputs are checked by tests/external.rs
//! (kubernetes-validate, strict).

mod common;
#[path = "common/crd.rs"]
mod crd;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;

use serde_json::{Value, json};

use common::{CRD_BUILDS, Variant};
use crd::Crds;

fn crds() -> &'static Crds {
    static CRDS: OnceLock<Crds> = OnceLock::new();
    CRDS.get_or_init(|| Crds::load(&crd::crd_dir()).unwrap_or_else(|e| panic!("{e}")))
}

/// Every YAML document under `dir`, with its file's path relative to `dir`.
fn documents(dir: &Path) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for e in walkdir::WalkDir::new(dir).sort_by_file_name() {
        let e = e.expect("walk");
        let p = e.path();
        if !e.file_type().is_file() || p.extension().is_none_or(|x| x != "yaml") {
            continue;
        }
        let rel = p.strip_prefix(dir).expect("prefix").display().to_string();
        for doc in crd::yaml_documents(p) {
            out.push((rel.clone(), doc));
        }
    }
    out
}

/// The custom resources of one build, each validated; panics with every
/// finding of every object at once.
fn check_build(label: &str, deploy: &Path, counts: &mut BTreeMap<String, usize>) {
    let mut findings = Vec::new();
    let mut custom = 0;
    for (file, doc) in documents(deploy) {
        let api_version = doc["apiVersion"].as_str().unwrap_or_default();
        if !crds().is_custom(api_version) {
            continue;
        }
        custom += 1;
        let kind = doc["kind"].as_str().unwrap_or_default().to_owned();
        let checked = crds().validate(&doc);
        for e in &checked.errors {
            findings.push(format!("{label}: {file} ({kind}): {e}"));
        }
        *counts.entry(kind).or_default() += 1;
        *counts.entry("CEL rules evaluated".into()).or_default() += checked.cel_evaluated;
        *counts
            .entry("CEL transition rules skipped".into())
            .or_default() += checked.cel_transition;
    }
    assert!(custom > 0, "{label}: no custom resource in the output");
    assert!(
        findings.is_empty(),
        "{} finding(s):\n{}",
        findings.len(),
        findings.join("\n")
    );
}

#[test]
fn every_generated_custom_resource_matches_its_crd() {
    let mut counts = BTreeMap::new();
    for &(example, variant) in CRD_BUILDS {
        let label = format!("{example} {variant:?}");
        let (_dir, deploy) = common::build_variant(example, variant);
        let before = counts.clone();
        check_build(&label, &deploy, &mut counts);
        // The build produced the target's own kind.
        let expected = match variant {
            Variant::Project("trainc.trainjob.yaml") => "TrainJob",
            Variant::Project(_) => "JobSet",
            Variant::Target("jobset")
            | Variant::ProjectFor(_, "jobset")
            | Variant::Output(_, "jobset") => "JobSet",
            Variant::Target("tfjob")
            | Variant::ProjectFor(_, "tfjob")
            | Variant::Output(_, "tfjob") => "TFJob",
            Variant::Target("pytorchjob")
            | Variant::ProjectFor(_, "pytorchjob")
            | Variant::Output(_, "pytorchjob") => "PyTorchJob",
            Variant::Target("trainjob")
            | Variant::ProjectFor(_, "trainjob")
            | Variant::Output(_, "trainjob") => "TrainJob",
            Variant::Target(other) | Variant::ProjectFor(_, other) | Variant::Output(_, other) => {
                panic!("no custom kind for target {other}")
            }
        };
        assert!(
            counts.get(expected) > before.get(expected),
            "{label}: no {expected} in the output"
        );
    }
    eprintln!("checked: {counts:?}");
    assert!(counts.get("JobSet").is_some_and(|&n| n > 0), "{counts:?}");
    assert!(counts.get("TFJob").is_some_and(|&n| n > 0), "{counts:?}");
    assert!(
        counts.get("PyTorchJob").is_some_and(|&n| n > 0),
        "{counts:?}"
    );
    for kind in ["TrainJob", "TrainingRuntime"] {
        assert!(counts.get(kind).is_some_and(|&n| n > 0), "{counts:?}");
    }
    assert!(
        counts.get("CEL rules evaluated").is_some_and(|&n| n > 0),
        "{counts:?}"
    );
}

/// Every served version of every CRD converts and compiles (a keyword the
/// conversion does not know would be an error).
#[test]
fn every_crd_converts() {
    let served: Vec<_> = crds()
        .served
        .iter()
        .map(|s| format!("{} {} {}", s.file, s.api_version, s.kind))
        .collect();
    for want in [
        "jobset.x-k8s.io/v1alpha2 JobSet",
        "kubeflow.org/v1 TFJob",
        "kubeflow.org/v1 PyTorchJob",
        "trainer.kubeflow.org/v1alpha1 TrainJob",
        "trainer.kubeflow.org/v1alpha1 TrainingRuntime",
    ] {
        assert!(
            served.iter().any(|s| s.ends_with(want)),
            "{want} not served by the CRDs: {served:?}"
        );
    }
}

// Negative tests: the validator rejects what the server would, at the right
// path, on real output.

fn generated(example: &str, variant: Variant, kind: &str) -> Value {
    let (_dir, deploy) = common::build_variant(example, variant);
    let doc = documents(&deploy)
        .into_iter()
        .map(|(_, d)| d)
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in the output"));
    let checked = crds().validate(&doc);
    assert!(checked.errors.is_empty(), "{:?}", checked.errors);
    doc
}

fn jobset() -> Value {
    generated("mnist", Variant::Project("trainc.jobset.yaml"), "JobSet")
}

fn errors_of(doc: &Value) -> Vec<String> {
    crds().validate(doc).errors
}

#[test]
fn an_unknown_field_in_a_jobset_is_rejected_at_its_path() {
    let mut doc = jobset();
    doc["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
        .as_object_mut()
        .unwrap()
        .insert("bogus".into(), json!(1));
    let errors = errors_of(&doc);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with(
            "spec.replicatedJobs[0].template.spec.template.spec.containers[0].bogus: unknown field"
        ),
        "{errors:?}"
    );
}

#[test]
fn a_jobset_breaking_a_cel_rule_is_rejected() {
    let mut doc = jobset();
    doc["spec"]["startupPolicy"] = json!({"startupPolicyOrder": "InOrder"});
    doc["spec"]["replicatedJobs"][1]["dependsOn"] = json!([{"name": "chief", "status": "Ready"}]);
    let errors = errors_of(&doc);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with("spec: StartupPolicy and DependsOn APIs are mutually exclusive"),
        "{errors:?}"
    );
    // Either alone is fine.
    doc["spec"]["startupPolicy"] = json!({"startupPolicyOrder": "AnyOrder"});
    assert_eq!(errors_of(&doc), Vec::<String>::new());
}

#[test]
fn a_cel_rule_on_a_list_item_names_the_item() {
    let mut doc = jobset();
    doc["spec"]["volumeClaimPolicies"] = json!([
        {"templates": [{"metadata": {"name": "ok"}, "spec": {}}]},
        {"templates": [{"metadata": {"name": "scratch", "namespace": "elsewhere"}, "spec": {}}]},
    ]);
    let errors = errors_of(&doc);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with(
            "spec.volumeClaimPolicies[1]: namespace cannot be set for VolumeClaimPolicies templates"
        ),
        "{errors:?}"
    );
}

#[test]
fn schema_values_are_checked_in_a_jobset() {
    let mut doc = jobset();
    let container = &mut doc["spec"]["replicatedJobs"][2]["template"]["spec"]["template"]["spec"]["containers"]
        [0];
    // Quantities are int-or-string with a pattern; ports are int32.
    container["resources"]["requests"]["cpu"] = json!("lots");
    container["ports"][0]["containerPort"] = json!(4_294_967_296_u64);
    // Two containers of one name: list-map key `name`.
    let spec = &mut doc["spec"]["replicatedJobs"][2]["template"]["spec"]["template"]["spec"];
    let twin = spec["containers"][0].clone();
    spec["containers"].as_array_mut().unwrap().push(twin);
    // A required field missing.
    doc["spec"]["replicatedJobs"][0]
        .as_object_mut()
        .unwrap()
        .remove("template");
    let errors = errors_of(&doc).join("\n");
    for want in [
        "spec.replicatedJobs[2].template.spec.template.spec.containers[0].resources.requests.cpu: ",
        "spec.replicatedJobs[2].template.spec.template.spec.containers[0].ports[0].containerPort: ",
        "spec.replicatedJobs[2].template.spec.template.spec.containers: items [0] and [1] have the same list-map key {\"name\":\"tensorflow\"}",
        "spec.replicatedJobs[0]: \"template\" is a required property",
    ] {
        assert!(errors.contains(want), "missing {want:?} in:\n{errors}");
    }
}

#[test]
fn a_tfjob_with_an_unknown_field_or_a_wrong_type_is_rejected() {
    let mut doc = generated("mnist-cpu", Variant::Target("tfjob"), "TFJob");
    doc["spec"]["runPolicy"]["bogus"] = json!(true);
    doc["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = json!("two");
    let errors = errors_of(&doc).join("\n");
    for want in [
        "spec.runPolicy.bogus: unknown field",
        "spec.tfReplicaSpecs.Worker.replicas: \"two\" is not of type \"integer\"",
    ] {
        assert!(errors.contains(want), "missing {want:?} in:\n{errors}");
    }
}

/// Object nodes of `value` whose schema admits only named fields: (JSON
/// pointer, field path). The root `metadata` is ObjectMeta, free-form here.
fn closed_objects(
    schema: &Value,
    value: &Value,
    pointer: &str,
    path: &str,
    out: &mut Vec<(String, String)>,
) {
    let join = |name: &str| {
        if path.is_empty() {
            name.to_owned()
        } else {
            format!("{path}.{name}")
        }
    };
    match value {
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let open = schema.get("additionalProperties").is_some()
                || schema.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true));
            if !open && path != "metadata" {
                out.push((pointer.to_owned(), path.to_owned()));
            }
            for (k, child) in map {
                let child_schema = props
                    .and_then(|p| p.get(k))
                    .or_else(|| schema.get("additionalProperties").filter(|a| a.is_object()));
                if let Some(cs) = child_schema {
                    let escaped = k.replace('~', "~0").replace('/', "~1");
                    closed_objects(cs, child, &format!("{pointer}/{escaped}"), &join(k), out);
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    closed_objects(
                        s,
                        item,
                        &format!("{pointer}/{i}"),
                        &format!("{path}[{i}]"),
                        out,
                    );
                }
            }
        }
        _ => {}
    }
}

/// An unknown field injected into any object of a generated JobSet or TFJob
/// (container, volume, probe, policy...) is rejected at its own path: the
/// validator is closed everywhere trainc writes, not just where a test looked.
#[test]
fn an_unknown_field_anywhere_in_a_generated_resource_is_rejected() {
    for doc in [
        jobset(),
        generated("kitchen-sink", Variant::Target("jobset"), "JobSet"),
        generated("kitchen-sink", Variant::Target("tfjob"), "TFJob"),
    ] {
        let kind = doc["kind"].as_str().unwrap().to_owned();
        let served = crds()
            .find(doc["apiVersion"].as_str().unwrap(), &kind)
            .unwrap();
        let mut nodes = Vec::new();
        closed_objects(&served.openapi, &doc, "", "", &mut nodes);
        assert!(nodes.len() > 50, "{kind}: only {} objects", nodes.len());
        for (pointer, path) in &nodes {
            let mut bad = doc.clone();
            bad.pointer_mut(pointer)
                .and_then(Value::as_object_mut)
                .unwrap()
                .insert("bogusField".into(), json!(1));
            let want = if path.is_empty() {
                "bogusField".to_owned()
            } else {
                format!("{path}.bogusField")
            };
            let errors = errors_of(&bad);
            assert!(
                errors.len() == 1 && errors[0].starts_with(&format!("{want}: unknown field")),
                "{kind}: {want}: {errors:?}"
            );
        }
    }
}

/// The conversion and the CEL binding, on small schemas.
mod conversion {
    use super::crd;
    use serde_json::{Value, json};

    fn errors(openapi: Value, value: Value) -> Vec<String> {
        let schema = crd::to_json_schema(&openapi).expect("converts");
        let validator = crd::validator(&schema).expect("compiles");
        let mut value = value;
        crd::apply_defaults(&openapi, &mut value);
        let mut out = crd::schema_errors(&validator, &value);
        out.extend(
            crd::check_cel(&openapi, &value)
                .failures
                .iter()
                .map(ToString::to_string),
        );
        out
    }

    fn root(spec: Value) -> Value {
        json!({
            "type": "object",
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {"type": "object"},
                "spec": spec,
            },
        })
    }

    fn ok(openapi: Value, value: Value) {
        assert_eq!(errors(openapi, value), Vec::<String>::new());
    }

    fn fails(openapi: Value, value: Value, want: &str) {
        let errors = errors(openapi, value);
        assert!(
            errors.iter().any(|e| e.starts_with(want)),
            "want {want:?}, got {errors:?}"
        );
    }

    #[test]
    fn an_unknown_field_is_rejected() {
        let s = root(json!({"type": "object", "properties": {"a": {"type": "string"}}}));
        ok(s.clone(), json!({"spec": {"a": "x"}}));
        fails(
            s.clone(),
            json!({"spec": {"a": "x", "b": 1}}),
            "spec.b: unknown field",
        );
        fails(
            s,
            json!({"spec": {}, "status": {}}),
            "status: unknown field",
        );
    }

    #[test]
    fn an_object_without_properties_admits_no_fields_but_root_metadata_is_objectmeta() {
        let s = root(json!({"type": "object", "properties": {"empty": {"type": "object"}}}));
        ok(s.clone(), json!({"spec": {"empty": {}}}));
        fails(
            s.clone(),
            json!({"spec": {"empty": {"x": 1}}}),
            "spec.empty.x: unknown field",
        );
        ok(
            s.clone(),
            json!({"metadata": {"name": "n", "namespace": "ns", "labels": {"a.b/c": "d"},
                                "annotations": {"e": "f"}, "finalizers": ["x"]}}),
        );
        fails(
            s.clone(),
            json!({"metadata": {"labels": {"a.b/c": 1}}}),
            "metadata.labels[a.b/c]: 1 is not of type \"string\"",
        );
        fails(s, json!({"metadata": {"name": 7}}), "metadata.name: ");
    }

    #[test]
    fn preserve_unknown_fields_keeps_a_subtree_open() {
        let s = root(json!({
            "type": "object",
            "properties": {
                "open": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": true,
                    "properties": {"n": {"type": "integer"}},
                },
                "closed": {"type": "object", "properties": {"n": {"type": "integer"}}},
            },
        }));
        ok(
            s.clone(),
            json!({"spec": {"open": {"n": 1, "anything": {"deep": [1, "x"]}}}}),
        );
        // Named fields are still checked, and the subtree's siblings are not
        // opened.
        fails(
            s.clone(),
            json!({"spec": {"open": {"n": "one"}}}),
            "spec.open.n: ",
        );
        fails(
            s,
            json!({"spec": {"closed": {"anything": 1}}}),
            "spec.closed.anything: unknown field",
        );
    }

    #[test]
    fn int_or_string() {
        let s = root(json!({
            "type": "object",
            "properties": {"q": {
                "anyOf": [{"type": "integer"}, {"type": "string"}],
                "x-kubernetes-int-or-string": true,
                "pattern": "^[0-9]+m?$",
            }},
        }));
        ok(s.clone(), json!({"spec": {"q": 1}}));
        ok(s.clone(), json!({"spec": {"q": "500m"}}));
        fails(s.clone(), json!({"spec": {"q": "lots"}}), "spec.q: ");
        fails(s.clone(), json!({"spec": {"q": true}}), "spec.q: ");
        fails(s, json!({"spec": {"q": 1.5}}), "spec.q: ");
    }

    #[test]
    fn list_map_keys_are_unique() {
        let s = root(json!({
            "type": "object",
            "properties": {"ports": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"port": {"type": "integer"}, "protocol": {"type": "string", "default": "TCP"}},
                    "required": ["port"],
                },
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["port", "protocol"],
            }},
        }));
        ok(
            s.clone(),
            json!({"spec": {"ports": [{"port": 1}, {"port": 1, "protocol": "UDP"}, {"port": 2}]}}),
        );
        // The default fills in the key before the check, as on the server.
        fails(
            s,
            json!({"spec": {"ports": [{"port": 1}, {"port": 2}, {"port": 1, "protocol": "TCP"}]}}),
            "spec.ports: items [0] and [2] have the same list-map key {\"port\":1,\"protocol\":\"TCP\"}",
        );
    }

    #[test]
    fn list_sets_are_unique_and_atomic_lists_are_not() {
        let s = root(json!({
            "type": "object",
            "properties": {
                "set": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                "atomic": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "atomic"},
            },
        }));
        ok(
            s.clone(),
            json!({"spec": {"set": ["a", "b"], "atomic": ["a", "a"]}}),
        );
        fails(s, json!({"spec": {"set": ["a", "a"]}}), "spec.set: ");
    }

    #[test]
    fn integer_formats_bound_the_value() {
        let s = root(json!({
            "type": "object",
            "properties": {
                "i32": {"type": "integer", "format": "int32", "minimum": 0},
                "i64": {"type": "integer", "format": "int64"},
            },
        }));
        ok(
            s.clone(),
            json!({"spec": {"i32": 2_147_483_647, "i64": i64::MAX}}),
        );
        fails(
            s.clone(),
            json!({"spec": {"i32": 2_147_483_648_u64}}),
            "spec.i32: ",
        );
        fails(s.clone(), json!({"spec": {"i32": -1}}), "spec.i32: ");
        fails(s, json!({"spec": {"i64": u64::MAX}}), "spec.i64: ");
    }

    #[test]
    fn nullable_embedded_resources_and_exclusive_bounds() {
        let s = root(json!({
            "type": "object",
            "properties": {
                "maybe": {"type": "string", "nullable": true},
                "never": {"type": "string"},
                "positive": {"type": "number", "minimum": 0, "exclusiveMinimum": true},
                "object": {
                    "type": "object",
                    "x-kubernetes-embedded-resource": true,
                    "x-kubernetes-preserve-unknown-fields": true,
                },
            },
        }));
        ok(
            s.clone(),
            json!({"spec": {"maybe": null, "positive": 0.5,
                            "object": {"apiVersion": "v1", "kind": "ConfigMap",
                                       "metadata": {"name": "x"}, "data": {}}}}),
        );
        fails(s.clone(), json!({"spec": {"never": null}}), "spec.never: ");
        fails(
            s.clone(),
            json!({"spec": {"positive": 0}}),
            "spec.positive: ",
        );
        fails(
            s,
            json!({"spec": {"object": {"apiVersion": "v1"}}}),
            "spec.object: \"kind\" is a required property",
        );
    }

    #[test]
    fn an_unknown_keyword_is_an_error_not_ignored() {
        let s = root(
            json!({"type": "object", "properties": {"a": {"type": "string", "x-new-constraint": 1}}}),
        );
        let e = crd::to_json_schema(&s).unwrap_err();
        assert!(e.contains("x-new-constraint"), "{e}");
    }

    #[test]
    fn cel_binds_integers_as_int_and_skips_transition_rules() {
        let s = root(json!({
            "type": "object",
            "properties": {"replicas": {"type": "integer"}, "name": {"type": "string"}},
            "x-kubernetes-validations": [
                // With a `uint` bound, `1 == 1` would be false.
                {"rule": "self.replicas == 1 && self.replicas - 2 < 0", "message": "one replica"},
                {"rule": "self == oldSelf", "message": "immutable"},
                {"rule": "!has(self.name) || size(self.name) <= 3", "message": "short name"},
            ],
        }));
        ok(s.clone(), json!({"spec": {"replicas": 1}}));
        let openapi = s.clone();
        let report = crd::check_cel(&openapi, &json!({"spec": {"replicas": 1}}));
        assert_eq!((report.evaluated, report.transition), (2, 1));
        fails(
            s.clone(),
            json!({"spec": {"replicas": 2}}),
            "spec: one replica (CEL rule `self.replicas == 1",
        );
        fails(
            s.clone(),
            json!({"spec": {"replicas": 1, "name": "long"}}),
            "spec: short name",
        );
        // A rule that errors (no such field) fails too.
        fails(
            s,
            json!({"spec": {}}),
            "spec: one replica [the rule errored",
        );
    }

    #[test]
    fn cel_rules_run_on_list_items_and_map_values_with_their_paths() {
        let item = json!({
            "type": "object",
            "properties": {"n": {"type": "integer"}},
            "x-kubernetes-validations": [{"rule": "self.n >= 0", "message": "negative", "fieldPath": ".n"}],
        });
        let s = root(json!({
            "type": "object",
            "properties": {
                "list": {"type": "array", "items": item},
                "map": {"type": "object", "additionalProperties": item},
            },
        }));
        ok(
            s.clone(),
            json!({"spec": {"list": [{"n": 0}], "map": {"a": {"n": 1}}}}),
        );
        fails(
            s.clone(),
            json!({"spec": {"list": [{"n": 0}, {"n": -1}]}}),
            "spec.list[1].n: negative",
        );
        fails(
            s,
            json!({"spec": {"map": {"Worker": {"n": -1}}}}),
            "spec.map.Worker.n: negative",
        );
    }
}

/// `runPolicy.volcanoQueue`, the one way to a Volcano queue: on `tfjob` and
/// `pytorchjob` it is the `schedulingPolicy.queue` the operator gives its
/// PodGroup, valid against the CRD; the Kueue queue never goes there.
#[test]
fn a_volcano_queue_is_written_only_when_asked_for() {
    for (example, kind) in [("mnist-cpu", "TFJob"), ("pytorch", "PyTorchJob")] {
        let target = if kind == "TFJob" {
            "tfjob"
        } else {
            "pytorchjob"
        };
        let dir = common::scratch_example(example);
        let job = std::fs::read_dir(dir.path().join("jobs"))
            .expect("jobs")
            .map(|e| e.expect("entry").path())
            .find(|p| p.extension().is_some_and(|x| x == "yaml"))
            .expect("a definition");
        let text = std::fs::read_to_string(&job).expect("read");
        let text = text.replace(
            "spec:\n",
            &format!(
                "spec:\n  target: {target}\n  runPolicy: {{queue: team-a, volcanoQueue: gang}}\n"
            ),
        );
        // The example's own runPolicy, if any, gives way to the one above.
        let text = match text.find("\n  runPolicy:\n") {
            Some(at) => text[..at + 1].to_owned(),
            None => text,
        };
        std::fs::write(&job, text).expect("write");
        let o = common::run(dir.path(), &["build"]);
        assert!(o.status.success(), "{example}: {}", common::stderr(&o));
        let doc = documents(&dir.path().join("deploy"))
            .into_iter()
            .map(|(_, d)| d)
            .find(|d| d["kind"] == kind)
            .expect("the run object");
        let policy = &doc["spec"]["runPolicy"]["schedulingPolicy"];
        assert_eq!(policy["queue"], "gang", "{example}: {policy}");
        assert_eq!(
            doc["metadata"]["labels"]["kueue.x-k8s.io/queue-name"], "team-a",
            "{example}"
        );
        assert_eq!(errors_of(&doc), Vec::<String>::new(), "{example}");
    }
}
