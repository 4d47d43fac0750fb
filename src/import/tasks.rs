//! A TensorFlow cluster made by hand (the layout of the project's first
//! origin document): a Deployment or Job per role or per task, each pod
//! told its place by `--job_name` and `--task_index`, Services in front.
//! The roles become a definition for plain Jobs, the flags trainc's own
//! (`clusterSpec.legacyFlags`).

use serde_json::{Map, Value, json};

use super::kubeflow::{Read, finish};
use super::{Imported, Notes, pod};
use crate::diagnostic::Diagnostic;

/// The flags trainc writes itself with `clusterSpec.legacyFlags`.
const CLUSTER_FLAGS: [&str; 4] = ["--ps_hosts", "--worker_hosts", "--job_name", "--task_index"];

/// The role a pod's arguments give it: `--job_name=ps`.
fn role_of(template: &Value) -> Option<&'static str> {
    let c = &template["spec"]["containers"][0];
    let words = c["args"]
        .as_array()
        .into_iter()
        .chain(c["command"].as_array())
        .flatten();
    for w in words.filter_map(Value::as_str) {
        match w.strip_prefix("--job_name=") {
            Some("ps") => return Some("ps"),
            Some("worker") => return Some("worker"),
            Some("chief" | "master") => return Some("chief"),
            Some("evaluator") => return Some("evaluator"),
            _ => {}
        }
    }
    None
}

pub(crate) fn import(shown: &str, objects: &[&Value]) -> Result<Imported, Diagnostic> {
    let mut notes = Notes::default();
    let mut roles: Vec<Read> = Vec::new();
    let mut names = Vec::new();
    for (i, o) in objects.iter().enumerate() {
        let kind = o["kind"].as_str().unwrap_or_default();
        let at = format!(
            "{kind} {}",
            o["metadata"]["name"].as_str().unwrap_or_default()
        );
        if kind == "Service" {
            notes.changed(
                at,
                None,
                "trainc writes the run's headless Service, which names every task",
            );
            continue;
        }
        let template = &o["spec"]["template"];
        let Some(role) = role_of(template) else {
            return Err(Diagnostic::new(format!(
                "{shown}: {at} (document {}) has no `--job_name=` argument: trainc cannot tell its role",
                i + 1
            ))
            .hint("import the Deployments or Jobs of a TensorFlow cluster whose pods are started with `--job_name=ps|worker --task_index=N`"));
        };
        names.push(
            o["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        );
        let replicas = o["spec"]["replicas"].as_u64().unwrap_or(1);
        if kind == "Deployment" {
            notes.changed(
                format!("{at}.kind"),
                Some("target: kubernetes"),
                "trainc runs each task as a Job: a task that finishes is done, not started again",
            );
        }
        notes.kept(
            format!("{at}.spec.replicas"),
            format!("roles.{role}.replicas"),
        );
        if let Some(r) = roles.iter_mut().find(|r| r.role == role) {
            r.replicas += replicas;
            continue;
        }
        let mut pod_notes = Notes::default();
        let mut pod = pod::read(template, &format!("{at}.spec.template"), &mut pod_notes);
        // The cluster flags are trainc's to write, per task.
        for key in ["args", "command"] {
            if let Some(list) = pod.job.get(key).and_then(Value::as_array).cloned() {
                let kept: Vec<Value> = list
                    .into_iter()
                    .filter(|w| {
                        !w.as_str()
                            .is_some_and(|s| CLUSTER_FLAGS.iter().any(|f| s.starts_with(f)))
                    })
                    .collect();
                pod.job.insert(key.to_owned(), Value::Array(kept));
            }
        }
        pod_notes.changed(
            format!("{at}: --ps_hosts, --worker_hosts, --job_name, --task_index"),
            Some("clusterSpec.legacyFlags"),
            "trainc passes each task its own, from the roles",
        );
        roles.push(Read {
            role,
            replicas,
            pod,
            notes: pod_notes,
        });
    }
    let order = ["chief", "ps", "worker", "evaluator"];
    roles.sort_by_key(|r| order.iter().position(|o| *o == r.role));
    let name = common_name(&names);
    let doc = json!({"metadata": {"name": name}});
    let mut spec = Map::new();
    spec.insert("framework".to_owned(), "tensorflow".into());
    spec.insert("target".to_owned(), "kubernetes".into());
    spec.insert("clusterSpec".to_owned(), json!({"legacyFlags": true}));
    let mut imported = finish(
        shown,
        "Deployment",
        &doc,
        spec,
        Map::new(),
        roles,
        notes,
        false,
    );
    imported.namespace = objects
        .iter()
        .find_map(|o| o["metadata"]["namespace"].as_str())
        .map(str::to_owned);
    if let Some(ns) = &imported.namespace {
        imported.definition["metadata"]["namespace"] = ns.clone().into();
    }
    Ok(imported)
}

/// The name the objects share: `tf-ps0`, `tf-worker0` → `tf`.
fn common_name(names: &[String]) -> String {
    let Some(first) = names.first() else {
        return "imported".to_owned();
    };
    let mut prefix = first.as_str();
    for n in names {
        while !n.starts_with(prefix) {
            prefix = &prefix[..prefix.len() - 1];
        }
    }
    let trimmed = prefix.trim_end_matches(|c: char| c == '-' || c.is_ascii_digit());
    if trimmed.is_empty() {
        "imported".to_owned()
    } else {
        trimmed.to_owned()
    }
}
