//! The values of the ACK/arena TFJob Helm chart (the layout of the
//! project's third origin document): `workers`, `workerImage`, `ps`,
//! `psImage`, `gpuCount`, … become a definition for the `tfjob` target.

use serde_json::{Map, Value};

use super::{Imported, Notes, definition};

/// Keys only the chart's values have.
pub(crate) fn is_values(doc: &Value) -> bool {
    doc.get("workerImage").is_some()
        || doc.get("psImage").is_some()
        || doc.get("gpuCount").is_some()
}

pub(crate) fn import(shown: &str, values: &Value) -> Imported {
    let mut notes = Notes::default();
    let name = values["name"].as_str().unwrap_or("tfjob").to_owned();
    if values.get("name").is_some() {
        notes.kept("name", "metadata.name");
    } else {
        notes.changed(
            "(release name)",
            Some("metadata.name"),
            "the chart names the job after its release: `tfjob` here, rename it",
        );
    }
    let gpus = values["gpuCount"].as_u64().unwrap_or(0);
    let mut roles = Map::new();
    let mut image: Option<String> = None;
    for (role, count, img, cpu, memory, gpu) in [
        (
            "chief",
            "chief",
            "workerImage",
            "chiefCPU",
            "chiefMemory",
            None,
        ),
        ("ps", "ps", "psImage", "psCPU", "psMemory", Some("psGPU")),
        (
            "worker",
            "workers",
            "workerImage",
            "workerCPU",
            "workerMemory",
            None,
        ),
        (
            "evaluator",
            "evaluator",
            "evaluatorImage",
            "evaluatorCPU",
            "evaluatorMemory",
            None,
        ),
    ] {
        let replicas = values[count].as_u64().unwrap_or(0);
        if values.get(count).is_some() {
            notes.kept(count, format!("roles.{role}.replicas"));
        }
        if replicas == 0 {
            continue;
        }
        let mut r = Map::new();
        r.insert("replicas".to_owned(), replicas.into());
        let mut res = Map::new();
        for (key, field) in [(cpu, "cpu"), (memory, "memory")] {
            if let Some(v) = values.get(key).filter(|v| !v.is_null()) {
                notes.kept(key, format!("roles.{role}.resources.{field}"));
                let q = match v {
                    Value::String(s) => s.replace(' ', ""),
                    other => other.to_string(),
                };
                res.insert(field.to_owned(), q.into());
            }
        }
        let role_gpus = match gpu {
            Some(k) => values[k].as_u64().unwrap_or(0),
            None if role == "worker" => gpus,
            None => 0,
        };
        if role_gpus > 0 {
            res.insert("gpu".to_owned(), role_gpus.into());
        }
        if !res.is_empty() {
            r.insert("resources".to_owned(), Value::Object(res));
        }
        if let Some(i) = values[img].as_str() {
            notes.kept(img, format!("image (roles.{role}.image where it differs)"));
            match &image {
                None => image = Some(i.to_owned()),
                Some(first) if first != i => {
                    r.insert("image".to_owned(), i.into());
                }
                _ => {}
            }
        }
        roles.insert(role.to_owned(), Value::Object(r));
    }
    if values.get("gpuCount").is_some() {
        notes.kept("gpuCount", "roles.worker.resources.gpu");
    }
    let mut spec = Map::new();
    spec.insert("framework".to_owned(), "tensorflow".into());
    if !roles.contains_key("ps") {
        spec.insert("strategy".to_owned(), "multi-worker-mirrored".into());
    }
    spec.insert("target".to_owned(), "tfjob".into());
    if let Some(i) = image.or_else(|| values["image"].as_str().map(str::to_owned)) {
        spec.insert("image".to_owned(), i.into());
    }
    if let Some(c) = values["command"].as_str() {
        notes.changed("command", Some("command"), "the chart runs it through `sh -c`; the definition splits it into words at spaces: check quoting");
        let words: Vec<Value> = c.split_whitespace().map(Value::from).collect();
        spec.insert("command".to_owned(), Value::Array(words));
    }
    spec.insert("roles".to_owned(), Value::Object(roles));
    for (key, why) in [
        (
            "useHostNetwork",
            "the `restricted` Pod Security profile forbids the host's network",
        ),
        (
            "useHostPID",
            "the `restricted` Pod Security profile forbids the host's PIDs",
        ),
        (
            "useHostIPC",
            "the `restricted` Pod Security profile forbids the host's IPC; `shmSize` gives the processes shared memory",
        ),
        (
            "privileged",
            "the `restricted` Pod Security profile forbids privileged containers",
        ),
    ] {
        if values[key].as_bool() == Some(true) {
            notes.left_out(key, why);
        } else if values.get(key).is_some() {
            notes.kept(key, "security (the `restricted` profile)");
        }
    }
    let mut meta = Map::new();
    if let Some(a) = values["annotations"].as_object().filter(|a| !a.is_empty()) {
        notes.kept("annotations", "metadata.annotations");
        meta.insert("annotations".to_owned(), Value::Object(a.clone()));
    }
    let known = [
        "name",
        "gpuCount",
        "chief",
        "ps",
        "workers",
        "evaluator",
        "workerImage",
        "psImage",
        "evaluatorImage",
        "image",
        "command",
        "chiefCPU",
        "chiefMemory",
        "psCPU",
        "psMemory",
        "psGPU",
        "workerCPU",
        "workerMemory",
        "evaluatorCPU",
        "evaluatorMemory",
        "useHostNetwork",
        "useHostPID",
        "useHostIPC",
        "privileged",
        "annotations",
    ];
    for key in values
        .as_object()
        .map(|m| m.keys().cloned().collect::<Vec<_>>())
        .unwrap_or_default()
    {
        if !known.contains(&key.as_str()) {
            notes.left_out(key, "a value of the chart trainc does not read: set its equivalent in the definition by hand");
        }
    }
    notes.changed(
        "securityContext",
        Some("security"),
        "trainc runs every pod under the `restricted` Pod Security profile",
    );
    Imported {
        source: shown.to_owned(),
        kind: "TFJob chart values".to_owned(),
        definition: definition(&name, None, meta, spec),
        name,
        namespace: None,
        notes: notes.0,
    }
}
