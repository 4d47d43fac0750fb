//! Kubeflow's PyTorchJob and TFJob, and JobSet: replica specs, each a pod
//! template, become roles.

use serde_json::{Map, Value, json};

use super::pod::{self, Pod};
use super::{Imported, Notes, definition};
use crate::diagnostic::Diagnostic;

/// Kueue's queue label: `runPolicy.queue`.
const QUEUE_LABEL: &str = "kueue.x-k8s.io/queue-name";

/// One role as read: its name in the definition, its tasks, its pod.
pub(crate) struct Read {
    pub role: &'static str,
    pub replicas: u64,
    pub pod: Pod,
    /// The notes of its pod template, `<role>` still to be named.
    pub notes: Notes,
}

/// A PyTorchJob or TFJob.
pub(crate) fn import(shown: &str, doc: &Value) -> Imported {
    let kind = doc["kind"].as_str().unwrap_or_default().to_owned();
    let pytorch = kind == "PyTorchJob";
    let specs_key = if pytorch {
        "pytorchReplicaSpecs"
    } else {
        "tfReplicaSpecs"
    };
    let mut notes = Notes::default();
    let mut roles: Vec<Read> = Vec::new();
    let elastic = doc["spec"]["elasticPolicy"].as_object().filter(|_| pytorch);
    let mut restart_policy = None;
    let specs = doc["spec"][specs_key]
        .as_object()
        .cloned()
        .unwrap_or_default();
    // Node 0 first: the chief (TensorFlow) or the master (PyTorch).
    let order = ["Chief", "Master", "PS", "Worker", "Evaluator"];
    let mut names: Vec<&String> = specs.keys().collect();
    names.sort_by_key(|n| order.iter().position(|o| o == n).unwrap_or(order.len()));
    for name in names {
        let spec = &specs[name];
        let at = format!("spec.{specs_key}.{name}");
        let replicas = spec["replicas"].as_u64().unwrap_or(1);
        let role = match (pytorch, name.as_str()) {
            (true, "Master" | "Worker") => "worker",
            (false, "Chief" | "Master") => "chief",
            (false, "PS") => "ps",
            (false, "Worker") => "worker",
            (false, "Evaluator") => "evaluator",
            _ => {
                notes.left_out(at, format!("no role of a {kind} is named `{name}`"));
                continue;
            }
        };
        if pytorch && name == "Master" {
            notes.changed(
                format!("{at}.replicas"),
                Some("roles.worker.replicas"),
                "the master is node 0 of the workers: trainc's PyTorch runs are workers only, node 0 the rendezvous",
            );
        } else {
            notes.kept(format!("{at}.replicas"), format!("roles.{role}.replicas"));
        }
        if let Some(p) = spec["restartPolicy"].as_str() {
            let why = if elastic.is_some() {
                if p == "OnFailure" {
                    notes.kept(format!("{at}.restartPolicy"), "runPolicy.restartPolicy");
                    restart_policy = Some(p.to_owned());
                    None
                } else {
                    Some(format!(
                        "an elastic run's nodes restart `OnFailure`, in place, and rejoin; `{p}` is not trainc's"
                    ))
                }
            } else if pytorch {
                Some(format!(
                    "`{p}` restarts one node in place, which a static rendezvous cannot take: a failed node fails the run (`target: jobset` restarts the whole run)"
                ))
            } else {
                Some(format!(
                    "`{p}` restarts one task in place; trainc restarts the whole run, `runPolicy.backoffLimit` times"
                ))
            };
            if let Some(why) = why {
                notes.changed(format!("{at}.restartPolicy"), None, why);
            }
        }
        // A PyTorch master and workers are one role: one pod template.
        if let Some(existing) = roles.iter_mut().find(|r| r.role == role) {
            existing.replicas += replicas;
            if specs
                .get("Master")
                .is_some_and(|m| m["template"] != spec["template"])
            {
                notes.left_out(
                    format!("{at}.template"),
                    "differs from the master's: trainc's nodes share one pod template, the master's",
                );
            }
            continue;
        }
        let mut pod_notes = Notes::default();
        let pod = pod::read(&spec["template"], &format!("{at}.template"), &mut pod_notes);
        roles.push(Read {
            role,
            replicas,
            pod,
            notes: pod_notes,
        });
    }
    let mut spec = framework(pytorch);
    if !pytorch && !roles.iter().any(|r| r.role == "ps") {
        spec.insert("strategy".to_owned(), "multi-worker-mirrored".into());
    }
    spec.insert(
        "target".to_owned(),
        if pytorch { "pytorchjob" } else { "tfjob" }.into(),
    );
    notes.changed(
        "kind",
        Some("spec.target"),
        format!(
            "trainc writes the {kind} (`target: {}`) from the definition",
            if pytorch { "pytorchjob" } else { "tfjob" }
        ),
    );
    let mut run_policy = Map::new();
    run_policy_of(
        &doc["spec"]["runPolicy"],
        "spec.runPolicy",
        &mut run_policy,
        &mut notes,
    );
    if let Some(p) = restart_policy {
        run_policy.insert("restartPolicy".to_owned(), p.into());
    }
    if let Some(policy) = elastic {
        let nodes = roles.iter().map(|r| r.replicas).sum();
        spec.insert(
            "torchrun".to_owned(),
            elastic_policy(policy, nodes, &mut notes),
        );
    } else if pytorch && run_policy.remove("backoffLimit").is_some() {
        notes.0.retain(|n| n.from != "spec.runPolicy.backoffLimit");
        notes.left_out(
            "spec.runPolicy.backoffLimit",
            "the operator restarts one node at a time, and a node restarted alone waits for its peers forever; `target: jobset` restarts every node together, `runPolicy.backoffLimit` times",
        );
    }
    finish(shown, &kind, doc, spec, run_policy, roles, notes, pytorch)
}

/// A PyTorchJob's `elasticPolicy` as `torchrun.elastic` (in a `torchrun`
/// object of its own, which the command's `--nproc-per-node` joins): the
/// node counts and restarts; trainc's own rendezvous for the rest.
fn elastic_policy(policy: &Map<String, Value>, nodes: u64, notes: &mut Notes) -> Value {
    let at = "spec.elasticPolicy";
    let mut elastic = Map::new();
    // The operator makes each count the other when one is missing, and
    // both the workers' when neither is there.
    let min = policy
        .get("minReplicas")
        .or_else(|| policy.get("maxReplicas"));
    let max = policy
        .get("maxReplicas")
        .or_else(|| policy.get("minReplicas"));
    elastic.insert(
        "minNodes".to_owned(),
        min.cloned().unwrap_or_else(|| nodes.into()),
    );
    if let Some(max) = max.filter(|m| m.as_u64() != Some(nodes)) {
        elastic.insert("maxNodes".to_owned(), max.clone());
    }
    for (key, to) in [
        ("minReplicas", "torchrun.elastic.minNodes"),
        ("maxReplicas", "torchrun.elastic.maxNodes"),
        ("maxRestarts", "torchrun.elastic.maxRestarts"),
    ] {
        if let Some(v) = policy.get(key) {
            notes.kept(format!("{at}.{key}"), to);
            if key == "maxRestarts" {
                elastic.insert("maxRestarts".to_owned(), v.clone());
            }
        }
    }
    let mut torchrun = Map::new();
    if let Some(n) = policy.get("nProcPerNode") {
        notes.kept(format!("{at}.nProcPerNode"), "torchrun.nprocPerNode");
        torchrun.insert("nprocPerNode".to_owned(), n.clone());
    }
    for (key, v) in policy {
        let why = match key.as_str() {
            "minReplicas" | "maxReplicas" | "maxRestarts" | "nProcPerNode" => continue,
            "rdzvBackend" if v == "c10d" => {
                notes.kept(format!("{at}.{key}"), "torchrun.elastic");
                continue;
            }
            "rdzvBackend" => {
                "trainc runs c10d rendezvous, hosted by node 0's `torchrun`: no etcd server is needed"
            }
            "rdzvHost" | "rdzvPort" | "rdzvId" => {
                "trainc writes it: node 0's host name and `roles.worker.port`, the run's name as the id"
            }
            "rdzvConf" | "standalone" => "trainc's c10d rendezvous takes no other settings",
            "metrics" => {
                "trainc writes no HorizontalPodAutoscaler: scale the PyTorchJob (its scale subresource) up to `maxNodes`"
            }
            _ => "not a field trainc knows",
        };
        notes.changed(format!("{at}.{key}"), None, why);
    }
    torchrun.insert("elastic".to_owned(), Value::Object(elastic));
    Value::Object(torchrun)
}

/// A JobSet: each replicated Job a role, by name.
pub(crate) fn import_jobset(shown: &str, doc: &Value) -> Result<Imported, Diagnostic> {
    let mut notes = Notes::default();
    let mut roles = Vec::new();
    let mut pytorch = false;
    for (i, rj) in doc["spec"]["replicatedJobs"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let at = format!("spec.replicatedJobs[{i}]");
        let name = rj["name"].as_str().unwrap_or_default();
        let role = match name {
            "chief" | "master" => "chief",
            "ps" => "ps",
            "worker" | "workers" | "node" | "nodes" => "worker",
            "evaluator" => "evaluator",
            other => {
                return Err(Diagnostic::new(format!(
                    "{shown}: replicated Job `{other}` of JobSet {} names no role trainc knows",
                    doc["metadata"]["name"].as_str().unwrap_or_default()
                ))
                .hint("name the replicated Jobs `chief`, `ps`, `worker` or `evaluator` (or `node` for PyTorch's), as trainc's JobSets do"));
            }
        };
        let job = &rj["template"]["spec"];
        let replicas =
            rj["replicas"].as_u64().unwrap_or(1) * job["parallelism"].as_u64().unwrap_or(1);
        notes.kept(format!("{at}.replicas"), format!("roles.{role}.replicas"));
        let mut pod_notes = Notes::default();
        let pod = pod::read(
            &job["template"],
            &format!("{at}.template.spec.template"),
            &mut pod_notes,
        );
        let launcher = |v: &Value| {
            v.as_str()
                .is_some_and(|s| s == "torchrun" || s == "torch.distributed.run")
        };
        pytorch |= pod
            .job
            .get("command")
            .and_then(Value::as_array)
            .is_some_and(|c| c.iter().any(launcher));
        roles.push(Read {
            role,
            replicas,
            pod,
            notes: pod_notes,
        });
    }
    let mut spec = framework(pytorch);
    spec.insert("target".to_owned(), "jobset".into());
    let mut run_policy = Map::new();
    if let Some(n) = doc["spec"]["failurePolicy"]["maxRestarts"].as_u64() {
        notes.kept("spec.failurePolicy.maxRestarts", "runPolicy.backoffLimit");
        run_policy.insert("backoffLimit".to_owned(), n.into());
    }
    for key in ["successPolicy", "network", "startupPolicy"] {
        if doc["spec"].get(key).is_some() {
            notes.changed(
                format!("spec.{key}"),
                None,
                "trainc writes it from the roles and the framework",
            );
        }
    }
    Ok(finish(
        shown, "JobSet", doc, spec, run_policy, roles, notes, pytorch,
    ))
}

/// A definition's `spec`, begun with its framework.
fn framework(pytorch: bool) -> Map<String, Value> {
    let mut spec = Map::new();
    spec.insert(
        "framework".to_owned(),
        if pytorch { "pytorch" } else { "tensorflow" }.into(),
    );
    spec
}

/// A Kubeflow `runPolicy`.
fn run_policy_of(rp: &Value, at: &str, out: &mut Map<String, Value>, notes: &mut Notes) {
    for key in [
        "backoffLimit",
        "activeDeadlineSeconds",
        "ttlSecondsAfterFinished",
    ] {
        if let Some(v) = rp.get(key).filter(|v| !v.is_null()) {
            notes.kept(format!("{at}.{key}"), format!("runPolicy.{key}"));
            out.insert(key.to_owned(), v.clone());
        }
    }
    if let Some(p) = rp["cleanPodPolicy"].as_str() {
        notes.changed(
            format!("{at}.cleanPodPolicy"),
            None,
            format!("`{p}`: trainc's run objects keep their pods as the operator's default does; the next run is a new object"),
        );
    }
    if let Some(q) = rp["schedulingPolicy"]["queue"].as_str() {
        notes.kept(
            format!("{at}.schedulingPolicy.queue"),
            "runPolicy.volcanoQueue",
        );
        out.insert("volcanoQueue".to_owned(), q.into());
    }
    if let Some(p) = rp["schedulingPolicy"]["priorityClass"].as_str() {
        notes.kept(
            format!("{at}.schedulingPolicy.priorityClass"),
            "runPolicy.priorityClassName",
        );
        out.insert("priorityClassName".to_owned(), p.into());
    }
    if rp.get("suspend").is_some() {
        notes.left_out(
            format!("{at}.suspend"),
            "Kueue suspends and admits the run (`runPolicy.queue`)",
        );
    }
}

/// The definition of roles read from any of the kinds above.
#[allow(clippy::too_many_arguments)]
pub(crate) fn finish(
    shown: &str,
    kind: &str,
    doc: &Value,
    mut spec: Map<String, Value>,
    mut run_policy: Map<String, Value>,
    roles: Vec<Read>,
    mut notes: Notes,
    pytorch: bool,
) -> Imported {
    let name = doc["metadata"]["name"]
        .as_str()
        .unwrap_or("imported")
        .to_owned();
    let namespace = doc["metadata"]["namespace"].as_str().map(str::to_owned);
    notes.kept("metadata.name", "metadata.name");
    if namespace.is_some() {
        notes.kept("metadata.namespace", "metadata.namespace");
    }
    let mut meta = Map::new();
    if let Some(labels) = doc["metadata"]["labels"].as_object() {
        let mut kept = Map::new();
        for (k, v) in labels {
            if k == QUEUE_LABEL {
                notes.kept(format!("metadata.labels.{k}"), "runPolicy.queue");
                run_policy.insert("queue".to_owned(), v.clone());
            } else {
                notes.kept(
                    format!("metadata.labels.{k}"),
                    format!("metadata.labels.{k}"),
                );
                kept.insert(k.clone(), v.clone());
            }
        }
        if !kept.is_empty() {
            meta.insert("labels".to_owned(), Value::Object(kept));
        }
    }
    if let Some(a) = doc["metadata"]["annotations"].as_object() {
        for k in a.keys() {
            notes.kept(
                format!("metadata.annotations.{k}"),
                format!("metadata.annotations.{k}"),
            );
        }
        meta.insert("annotations".to_owned(), Value::Object(a.clone()));
    }
    let mut role_map = Map::new();
    let mut job: Map<String, Value> = Map::new();
    for (i, mut r) in roles.into_iter().enumerate() {
        for n in &mut r.notes.0 {
            if let Some(to) = &mut n.to {
                *to = to.replace("<role>", r.role);
            }
        }
        notes.0.extend(r.notes.0);
        let mut role = Map::new();
        role.insert("replicas".to_owned(), r.replicas.into());
        role.extend(r.pod.role);
        // The first role read sets the job's settings; another role's
        // differing ones are its own where a role can have them.
        for (k, v) in r.pod.job {
            match job.get(&k) {
                None if i == 0 => {
                    job.insert(k, v);
                }
                Some(same) if *same == v => {}
                _ if ["image", "command", "args", "env", "envFrom", "imagePullPolicy"].contains(&k.as_str()) => {
                    role.insert(k, v);
                }
                _ => notes.left_out(
                    format!("roles.{}.{k}", r.role),
                    format!("differs from the first role's: a definition has one `{k}` per job, and keeps the first"),
                ),
            }
        }
        run_policy.extend(r.pod.run_policy);
        role_map.insert(r.role.to_owned(), Value::Object(role));
    }
    if pytorch {
        torchrun(&mut job, &mut notes);
    }
    // In the order the definition reference lists them.
    for key in [
        "image",
        "imagePullPolicy",
        "command",
        "args",
        "env",
        "envFrom",
        "imagePullSecrets",
        "gpuResourceName",
        "torchrun",
    ] {
        // An elastic policy's `torchrun` joins the command's, in this order.
        let v = match (spec.shift_remove(key), job.remove(key)) {
            (Some(Value::Object(mut ours)), Some(Value::Object(theirs))) => {
                ours.extend(theirs);
                Value::Object(ours)
            }
            (_, Some(v)) | (Some(v), None) => v,
            (None, None) => continue,
        };
        spec.insert(key.to_owned(), v);
    }
    spec.insert("roles".to_owned(), Value::Object(role_map));
    for key in ["storage", "shmSize", "serviceAccountName"] {
        if let Some(v) = job.remove(key) {
            spec.insert(key.to_owned(), v);
        }
    }
    if !run_policy.is_empty() {
        spec.insert("runPolicy".to_owned(), Value::Object(run_policy));
    }
    notes.changed(
        "securityContext",
        Some("security"),
        "trainc runs every pod under the `restricted` Pod Security profile (non-root as UID 10001, no privilege escalation, all capabilities dropped, RuntimeDefault seccomp); an image whose own user is not root runs as it with `security.runAsUser: image`, one that must run as root needs `runAsUser: 0`, `runAsNonRoot: false` and a namespace that allows it",
    );
    let ns = namespace.as_deref();
    Imported {
        source: shown.to_owned(),
        kind: kind.to_owned(),
        definition: definition(&name, ns, meta, spec),
        name,
        namespace,
        notes: notes.0,
    }
}

/// A PyTorch command that starts `torchrun` itself (`torchrun --nproc_per_node=8
/// train.py`, `python -m torch.distributed.run …`): trainc starts it, so the
/// definition names the program, and the processes per node.
fn torchrun(job: &mut Map<String, Value>, notes: &mut Notes) {
    let Some(command) = job.get("command").and_then(Value::as_array).cloned() else {
        return;
    };
    let words: Vec<String> = command
        .iter()
        .filter_map(|w| w.as_str().map(str::to_owned))
        .collect();
    let start = match words.as_slice() {
        [first, ..] if first == "torchrun" => 1,
        [py, m, module, ..]
            if py.starts_with("python")
                && m == "-m"
                && (module == "torch.distributed.run" || module == "torch.distributed.launch") =>
        {
            3
        }
        _ => {
            notes.changed(
                "command",
                Some("command"),
                "trainc starts the program under `torchrun`, with the run's rendezvous",
            );
            return;
        }
    };
    let mut rest = words[start..].iter().peekable();
    let mut nproc = None;
    while let Some(w) = rest.peek() {
        if !w.starts_with("--") {
            break;
        }
        let w = rest.next().cloned().unwrap_or_default();
        let (flag, value) = match w.split_once('=') {
            Some((f, v)) => (f.to_owned(), Some(v.to_owned())),
            None if w == "--standalone" || w == "--no-python" || w == "--no_python" => {
                (w.clone(), None)
            }
            None => (w.clone(), rest.next().cloned()),
        };
        match flag.replace('_', "-").as_str() {
            "--nproc-per-node" => nproc = value.and_then(|v| v.parse::<u64>().ok()),
            other => notes.changed(
                format!("command: {other}"),
                None,
                "trainc starts `torchrun` with the run's own rendezvous and node count",
            ),
        }
    }
    let program: Vec<Value> = match rest.next() {
        Some(p) if p.ends_with(".py") => vec!["python".into(), p.clone().into()],
        Some(p) if p == "-m" => match rest.next() {
            Some(m) => vec!["python".into(), "-m".into(), m.clone().into()],
            None => return,
        },
        Some(p) => vec![p.clone().into()],
        None => return,
    };
    let extra: Vec<Value> = rest.cloned().map(Value::from).collect();
    notes.changed(
        "command",
        Some("command"),
        "`torchrun` and its flags are trainc's: the definition names the program it starts",
    );
    job.insert("command".to_owned(), Value::Array(program));
    if !extra.is_empty() {
        let mut args = extra;
        args.extend(
            job.get("args")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
        );
        job.insert("args".to_owned(), Value::Array(args));
    }
    if let Some(n) = nproc {
        notes.kept("command: --nproc-per-node", "torchrun.nprocPerNode");
        job.insert("torchrun".to_owned(), json!({"nprocPerNode": n}));
    }
}
