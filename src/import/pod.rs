//! A pod template, read into a role of a definition and the settings of the
//! job around it, each field with its [`Note`](super::Note).

use serde_json::{Map, Value, json};

use super::Notes;

/// Labels trainc sets on every pod itself: not the user's to carry over.
const OWN_LABELS: [&str; 2] = ["app.kubernetes.io/managed-by", "app.kubernetes.io/name"];

/// What one pod template says.
#[derive(Default)]
pub(crate) struct Pod {
    /// The role's own fields (`resources`, `nodeSelector`, …).
    pub role: Map<String, Value>,
    /// Fields of the job (`image`, `command`, `env`, `storage`, …), which
    /// the first role read sets and the others override where they differ.
    pub job: Map<String, Value>,
    /// `runPolicy` fields the pod carries (`schedulerName`).
    pub run_policy: Map<String, Value>,
    /// The GPUs each task asks for.
    pub gpus: u64,
}

/// Reads the pod template at `at` (a dotted path, for the notes).
pub(crate) fn read(template: &Value, at: &str, notes: &mut Notes) -> Pod {
    let mut pod = Pod::default();
    let meta = &template["metadata"];
    labels(meta, at, &mut pod, notes);
    let spec = &template["spec"];
    let sp = format!("{at}.spec");
    let containers = spec["containers"].as_array().cloned().unwrap_or_default();
    if let Some(c) = containers.first() {
        container(c, &format!("{sp}.containers[0]"), &mut pod, notes);
    }
    for (i, _) in containers.iter().enumerate().skip(1) {
        notes.left_out(
            format!("{sp}.containers[{i}]"),
            "a second container: a strategic-merge patch of the role's pod template (`spec.patches`) adds it",
        );
    }
    if spec.get("initContainers").is_some() {
        notes.left_out(
            format!("{sp}.initContainers"),
            "init containers: a patch of the pod template (`spec.patches`) adds them",
        );
    }
    volumes(spec, &containers, &sp, &mut pod, notes);
    scheduling(spec, &sp, &mut pod, notes);
    for (key, why) in [
        (
            "hostNetwork",
            "the `restricted` Pod Security profile forbids it",
        ),
        (
            "hostPID",
            "the `restricted` Pod Security profile forbids it",
        ),
        (
            "hostIPC",
            "the `restricted` Pod Security profile forbids it",
        ),
        (
            "securityContext",
            "trainc writes the `restricted` profile's pod settings; `spec.security` changes them (`runAsUser`, `fsGroup`)",
        ),
        (
            "restartPolicy",
            "trainc restarts the whole run (`runPolicy.backoffLimit`), never one task in place",
        ),
    ] {
        if let Some(v) = spec.get(key)
            && !v.is_null()
        {
            if key.starts_with("host") && v == &Value::Bool(false) {
                continue;
            }
            if key.starts_with("host") {
                notes.left_out(format!("{sp}.{key}"), why);
            } else {
                notes.changed(format!("{sp}.{key}"), None, why);
            }
        }
    }
    pod
}

fn labels(meta: &Value, at: &str, pod: &mut Pod, notes: &mut Notes) {
    if let Some(labels) = meta["labels"].as_object() {
        let mut kept = Map::new();
        for (k, v) in labels {
            let from = format!("{at}.metadata.labels.{k}");
            if OWN_LABELS.contains(&k.as_str()) || k.starts_with("trainc.dev/") {
                notes.changed(from, None, "trainc sets this label itself");
            } else {
                notes.kept(from, format!("roles.<role>.labels.{k}"));
                kept.insert(k.clone(), v.clone());
            }
        }
        if !kept.is_empty() {
            pod.role.insert("labels".to_owned(), Value::Object(kept));
        }
    }
    if let Some(annotations) = meta["annotations"].as_object() {
        for k in annotations.keys() {
            notes.kept(
                format!("{at}.metadata.annotations.{k}"),
                format!("roles.<role>.annotations.{k}"),
            );
        }
        pod.role
            .insert("annotations".to_owned(), Value::Object(annotations.clone()));
    }
}

fn container(c: &Value, at: &str, pod: &mut Pod, notes: &mut Notes) {
    if let Some(image) = c["image"].as_str() {
        notes.kept(format!("{at}.image"), "image");
        pod.job.insert("image".to_owned(), image.into());
    }
    if c.get("name").is_some() {
        notes.changed(
            format!("{at}.name"),
            None,
            "trainc names the container after the role",
        );
    }
    if let Some(p) = c["imagePullPolicy"].as_str() {
        notes.kept(format!("{at}.imagePullPolicy"), "imagePullPolicy");
        pod.job.insert("imagePullPolicy".to_owned(), p.into());
    }
    for key in ["command", "args"] {
        if let Some(list) = c[key].as_array() {
            notes.kept(format!("{at}.{key}"), key);
            pod.job.insert(key.to_owned(), Value::Array(list.clone()));
        }
    }
    env(c, at, pod, notes);
    resources(c, at, pod, notes);
    if c.get("ports").is_some() {
        notes.changed(
            format!("{at}.ports"),
            Some("roles.<role>.port"),
            "trainc declares the role's port (`port`, default 2222 for TensorFlow, 29500 for PyTorch's node 0)",
        );
        if let Some(port) = c["ports"][0]["containerPort"].as_u64() {
            pod.role.insert("port".to_owned(), port.into());
        }
    }
    for key in [
        "workingDir",
        "lifecycle",
        "livenessProbe",
        "readinessProbe",
        "startupProbe",
    ] {
        if c.get(key).is_some() {
            notes.left_out(
                format!("{at}.{key}"),
                "a strategic-merge patch of the role's pod template (`spec.patches`) sets it",
            );
        }
    }
    if c.get("securityContext").is_some() {
        notes.changed(
            format!("{at}.securityContext"),
            None,
            "trainc writes the `restricted` profile's container settings; `spec.security` changes them",
        );
    }
}

fn env(c: &Value, at: &str, pod: &mut Pod, notes: &mut Notes) {
    let mut vars = Map::new();
    for (i, e) in c["env"].as_array().into_iter().flatten().enumerate() {
        let Some(name) = e["name"].as_str() else {
            continue;
        };
        let from = format!("{at}.env[{i}]");
        if let Some(v) = e.get("value") {
            vars.insert(name.to_owned(), v.clone());
            notes.kept(from, format!("env.{name}"));
        } else if let Some(source) = e["valueFrom"].as_object() {
            vars.insert(name.to_owned(), Value::Object(source.clone()));
            notes.kept(from, format!("env.{name}"));
        }
    }
    if !vars.is_empty() {
        pod.job.insert("env".to_owned(), Value::Object(vars));
    }
    if let Some(from) = c["envFrom"].as_array() {
        notes.kept(format!("{at}.envFrom"), "envFrom");
        pod.job
            .insert("envFrom".to_owned(), Value::Array(from.clone()));
    }
}

/// A quantity as the definition writes it: a string.
fn quantity(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn resources(c: &Value, at: &str, pod: &mut Pod, notes: &mut Notes) {
    let r = &c["resources"];
    let mut out = Map::new();
    let requests = r["requests"].as_object().cloned().unwrap_or_default();
    let limits = r["limits"].as_object().cloned().unwrap_or_default();
    for key in ["cpu", "memory"] {
        if let Some(q) = requests.get(key).and_then(quantity) {
            notes.kept(
                format!("{at}.resources.requests.{key}"),
                format!("roles.<role>.resources.{key}"),
            );
            out.insert(key.to_owned(), q.into());
        }
    }
    let gpu_name = limits
        .keys()
        .chain(requests.keys())
        .find(|k| k.ends_with("/gpu"))
        .cloned();
    if let Some(name) = &gpu_name {
        let n = limits
            .get(name)
            .or_else(|| requests.get(name))
            .and_then(quantity)
            .and_then(|q| q.parse::<u64>().ok())
            .unwrap_or(0);
        pod.gpus = n;
        out.insert("gpu".to_owned(), n.into());
        let from = if limits.contains_key(name) {
            "limits"
        } else {
            "requests"
        };
        notes.kept(
            format!("{at}.resources.{from}.{name}"),
            "roles.<role>.resources.gpu",
        );
        if name != "nvidia.com/gpu" {
            notes.kept(format!("{at}.resources.{from}.{name}"), "gpuResourceName");
            pod.job
                .insert("gpuResourceName".to_owned(), name.clone().into());
        }
    }
    let mut own_limits = Map::new();
    for key in ["cpu", "memory"] {
        let Some(limit) = limits.get(key).and_then(quantity) else {
            continue;
        };
        let from = format!("{at}.resources.limits.{key}");
        let request = requests.get(key).and_then(quantity);
        if key == "memory" && request.as_deref() == Some(limit.as_str()) {
            // trainc's own: a memory limit equal to the request.
            notes.kept(from, "roles.<role>.resources.memory");
        } else {
            notes.kept(from, format!("roles.<role>.resources.{key}Limit"));
            own_limits.insert(format!("{key}Limit"), limit.into());
        }
    }
    if requests.get("memory").is_some() && !limits.contains_key("memory") {
        notes.changed(
            format!("{at}.resources.requests.memory"),
            Some("roles.<role>.resources.memory"),
            "trainc also limits memory to the request (a leaking task is stopped, not its neighbours)",
        );
    }
    out.extend(own_limits);
    for (k, _) in requests.iter().chain(limits.iter()) {
        if k != "cpu" && k != "memory" && Some(k) != gpu_name.as_ref() {
            notes.left_out(
                format!("{at}.resources.{k}"),
                "another resource: a patch of the role's pod template (`spec.patches`) asks for it",
            );
        }
    }
    if !out.is_empty() {
        pod.role.insert("resources".to_owned(), Value::Object(out));
    }
}

fn volumes(spec: &Value, containers: &[Value], at: &str, pod: &mut Pod, notes: &mut Notes) {
    let mounts: Vec<&Value> = containers
        .first()
        .and_then(|c| c["volumeMounts"].as_array())
        .map(|m| m.iter().collect())
        .unwrap_or_default();
    let mut storage = Vec::new();
    for (i, v) in spec["volumes"].as_array().into_iter().flatten().enumerate() {
        let from = format!("{at}.volumes[{i}]");
        let Some(name) = v["name"].as_str() else {
            continue;
        };
        let mount = mounts.iter().find(|m| m["name"].as_str() == Some(name));
        let Some(mount) = mount else {
            notes.left_out(from, "mounted by no container");
            continue;
        };
        let path = mount["mountPath"].as_str().unwrap_or_default();
        let read_only = mount["readOnly"].as_bool().unwrap_or(false);
        let mut entry = json!({"name": name, "mountPath": path});
        if read_only {
            entry["readOnly"] = true.into();
        }
        if let Some(claim) = v["persistentVolumeClaim"]["claimName"].as_str() {
            entry["existingClaim"] = claim.into();
            notes.kept(
                from,
                format!("storage[{}] (existingClaim {claim})", storage.len()),
            );
        } else if let Some(e) = v.get("emptyDir") {
            if e["medium"].as_str() == Some("Memory") && path == "/dev/shm" {
                let size = e["sizeLimit"].as_str().unwrap_or("1Gi");
                pod.job.insert("shmSize".to_owned(), size.into());
                notes.kept(from, "shmSize");
                continue;
            }
            entry["emptyDir"] = e.clone();
            notes.kept(from, format!("storage[{}] (emptyDir)", storage.len()));
        } else if let Some(cm) = v["configMap"]["name"].as_str() {
            entry["configMap"] = json!({"name": cm});
            notes.kept(from, format!("storage[{}] (configMap)", storage.len()));
        } else if let Some(s) = v["secret"]["secretName"].as_str() {
            entry["secret"] = json!({"name": s});
            notes.kept(from, format!("storage[{}] (secret)", storage.len()));
        } else {
            notes.left_out(
                from,
                "a volume of another kind: a patch of the pod template (`spec.patches`) adds it",
            );
            continue;
        }
        storage.push(entry);
    }
    if !storage.is_empty() {
        pod.job.insert("storage".to_owned(), Value::Array(storage));
    }
}

fn scheduling(spec: &Value, at: &str, pod: &mut Pod, notes: &mut Notes) {
    if let Some(sel) = spec["nodeSelector"].as_object() {
        notes.kept(format!("{at}.nodeSelector"), "roles.<role>.nodeSelector");
        pod.role
            .insert("nodeSelector".to_owned(), Value::Object(sel.clone()));
    }
    let mut tolerations = Vec::new();
    for (i, t) in spec["tolerations"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let from = format!("{at}.tolerations[{i}]");
        if t["key"].as_str().is_some_and(|k| k.ends_with("/gpu")) {
            notes.changed(
                from,
                None,
                "trainc tolerates the GPU taint itself for roles with GPUs (`gpuToleration`)",
            );
            continue;
        }
        notes.kept(
            from,
            format!("roles.<role>.tolerations[{}]", tolerations.len()),
        );
        tolerations.push(t.clone());
    }
    if !tolerations.is_empty() {
        pod.role
            .insert("tolerations".to_owned(), Value::Array(tolerations));
    }
    if spec.get("affinity").is_some() {
        notes.left_out(
            format!("{at}.affinity"),
            "trainc writes affinity from `roles.<role>.affinity`, `spread` and `pack`; any other, a patch",
        );
    }
    if let Some(p) = spec["priorityClassName"].as_str() {
        notes.kept(
            format!("{at}.priorityClassName"),
            "roles.<role>.priorityClassName",
        );
        pod.role.insert("priorityClassName".to_owned(), p.into());
    }
    if let Some(s) = spec["schedulerName"].as_str() {
        notes.kept(format!("{at}.schedulerName"), "runPolicy.schedulerName");
        pod.run_policy.insert("schedulerName".to_owned(), s.into());
    }
    if let Some(sa) = spec["serviceAccountName"].as_str() {
        notes.kept(format!("{at}.serviceAccountName"), "serviceAccountName");
        pod.job.insert("serviceAccountName".to_owned(), sa.into());
    }
    if let Some(secrets) = spec["imagePullSecrets"].as_array() {
        let names: Vec<Value> = secrets
            .iter()
            .filter_map(|s| s["name"].as_str())
            .map(Value::from)
            .collect();
        notes.kept(format!("{at}.imagePullSecrets"), "imagePullSecrets");
        pod.job
            .insert("imagePullSecrets".to_owned(), Value::Array(names));
    }
}
