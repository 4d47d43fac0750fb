//! The Pod Security Standards, `baseline` and `restricted` (Kubernetes
//! v1.33 and later), as a checker of pod specs, written from the published
//! control tables and not from trainc's code: it knows nothing of what
//! trainc generates, and finds pod templates anywhere in an object.

use serde_json::Value;

/// Capabilities `baseline` allows a container to add.
const BASELINE_CAPS: &[&str] = &[
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];
/// Volume types `restricted` allows.
const RESTRICTED_VOLUMES: &[&str] = &[
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
];
const SAFE_SYSCTLS: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
];

fn containers(spec: &Value) -> Vec<&Value> {
    ["containers", "initContainers", "ephemeralContainers"]
        .iter()
        .filter_map(|k| spec.get(*k).and_then(Value::as_array))
        .flatten()
        .collect()
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter().try_fold(v, |v, k| v.get(*k))?.as_str()
}

/// Every `baseline` violation of a pod spec, by control name.
pub fn baseline(spec: &Value, annotations: Option<&Value>) -> Vec<String> {
    let mut out = Vec::new();
    for ns in ["hostNetwork", "hostPID", "hostIPC"] {
        if spec.get(ns) == Some(&Value::Bool(true)) {
            out.push(format!("Host Namespaces: {ns}"));
        }
    }
    if let Some(vols) = spec.get("volumes").and_then(Value::as_array) {
        for v in vols {
            if v.get("hostPath").is_some() {
                out.push("HostPath Volumes".into());
            }
        }
    }
    let pod_sc = spec.get("securityContext");
    if let Some(t) = pod_sc.and_then(|s| str_at(s, &["seccompProfile", "type"]))
        && t == "Unconfined"
    {
        out.push("Seccomp: pod Unconfined".into());
    }
    if let Some(sysctls) = pod_sc
        .and_then(|s| s.get("sysctls"))
        .and_then(Value::as_array)
    {
        for s in sysctls {
            let name = s.get("name").and_then(Value::as_str).unwrap_or("");
            if !SAFE_SYSCTLS.contains(&name) {
                out.push(format!("Sysctls: {name}"));
            }
        }
    }
    for sc in
        std::iter::once(pod_sc).chain(containers(spec).iter().map(|c| c.get("securityContext")))
    {
        let Some(sc) = sc else { continue };
        if let Some(t) = str_at(sc, &["seLinuxOptions", "type"])
            && ![
                "",
                "container_t",
                "container_init_t",
                "container_kvm_t",
                "container_engine_t",
            ]
            .contains(&t)
        {
            out.push(format!("SELinux: type {t}"));
        }
        for k in ["user", "role"] {
            if str_at(sc, &["seLinuxOptions", k]).is_some_and(|v| !v.is_empty()) {
                out.push(format!("SELinux: {k}"));
            }
        }
        if let Some(t) = str_at(sc, &["appArmorProfile", "type"])
            && !["RuntimeDefault", "Localhost"].contains(&t)
        {
            out.push(format!("AppArmor: {t}"));
        }
    }
    if let Some(a) = annotations.and_then(Value::as_object) {
        for (k, v) in a {
            if k.starts_with("container.apparmor.security.beta.kubernetes.io/")
                && !(v == "runtime/default"
                    || v.as_str().is_some_and(|s| s.starts_with("localhost/")))
            {
                out.push(format!("AppArmor: {k}"));
            }
        }
    }
    for c in containers(spec) {
        let name = c.get("name").and_then(Value::as_str).unwrap_or("?");
        let sc = c.get("securityContext");
        if sc.and_then(|s| s.get("privileged")) == Some(&Value::Bool(true)) {
            out.push(format!("Privileged Containers: {name}"));
        }
        if let Some(add) = sc
            .and_then(|s| s.get("capabilities"))
            .and_then(|c| c.get("add"))
            .and_then(Value::as_array)
        {
            for cap in add {
                let cap = cap.as_str().unwrap_or("");
                if !BASELINE_CAPS.contains(&cap) {
                    out.push(format!("Capabilities: {name} adds {cap}"));
                }
            }
        }
        if let Some(ports) = c.get("ports").and_then(Value::as_array) {
            for p in ports {
                if p.get("hostPort")
                    .and_then(Value::as_i64)
                    .is_some_and(|h| h != 0)
                {
                    out.push(format!("Host Ports: {name}"));
                }
            }
        }
        if sc
            .and_then(|s| str_at(s, &["procMount"]))
            .is_some_and(|p| p != "Default")
        {
            out.push(format!("/proc Mount Type: {name}"));
        }
        if sc.and_then(|s| str_at(s, &["seccompProfile", "type"])) == Some("Unconfined") {
            out.push(format!("Seccomp: {name} Unconfined"));
        }
    }
    out
}

/// Every `restricted` violation of a pod spec: baseline's and its own.
pub fn restricted(spec: &Value, annotations: Option<&Value>) -> Vec<String> {
    let mut out = baseline(spec, annotations);
    if let Some(vols) = spec.get("volumes").and_then(Value::as_array) {
        for v in vols {
            let kind = v
                .as_object()
                .and_then(|o| o.keys().find(|k| *k != "name"))
                .map_or("", String::as_str);
            if !RESTRICTED_VOLUMES.contains(&kind) {
                out.push(format!("Volume Types: {kind}"));
            }
        }
    }
    let pod_sc = spec.get("securityContext");
    let pod_non_root = pod_sc
        .and_then(|s| s.get("runAsNonRoot"))
        .and_then(Value::as_bool);
    let pod_seccomp = pod_sc.and_then(|s| str_at(s, &["seccompProfile", "type"]));
    if pod_non_root == Some(false) {
        out.push("Running as Non-root: pod sets runAsNonRoot false".into());
    }
    if pod_sc
        .and_then(|s| s.get("runAsUser"))
        .and_then(Value::as_i64)
        == Some(0)
    {
        out.push("Running as Non-root user: pod runAsUser 0".into());
    }
    for c in containers(spec) {
        let name = c.get("name").and_then(Value::as_str).unwrap_or("?");
        let sc = c.get("securityContext");
        if sc.and_then(|s| s.get("allowPrivilegeEscalation")) != Some(&Value::Bool(false)) {
            out.push(format!("Privilege Escalation: {name}"));
        }
        match sc
            .and_then(|s| s.get("runAsNonRoot"))
            .and_then(Value::as_bool)
        {
            Some(false) => out.push(format!("Running as Non-root: {name} sets false")),
            None if pod_non_root != Some(true) => {
                out.push(format!("Running as Non-root: {name} unset"));
            }
            _ => {}
        }
        if sc.and_then(|s| s.get("runAsUser")).and_then(Value::as_i64) == Some(0) {
            out.push(format!("Running as Non-root user: {name} runAsUser 0"));
        }
        let seccomp = sc
            .and_then(|s| str_at(s, &["seccompProfile", "type"]))
            .or(pod_seccomp);
        if !matches!(seccomp, Some("RuntimeDefault" | "Localhost")) {
            out.push(format!("Seccomp: {name} {seccomp:?}"));
        }
        let caps = sc.and_then(|s| s.get("capabilities"));
        let drops_all = caps
            .and_then(|c| c.get("drop"))
            .and_then(Value::as_array)
            .is_some_and(|d| d.iter().any(|x| x == "ALL"));
        if !drops_all {
            out.push(format!("Capabilities: {name} does not drop ALL"));
        }
        if let Some(add) = caps.and_then(|c| c.get("add")).and_then(Value::as_array) {
            for cap in add {
                if cap != "NET_BIND_SERVICE" {
                    out.push(format!("Capabilities: {name} adds {cap}"));
                }
            }
        }
    }
    out
}

/// Every pod template in an object (Jobs, Deployments, JobSets, TFJobs,
/// anything with a `template` holding a pod spec): `(where, metadata, spec)`.
pub fn pod_templates(v: &Value) -> Vec<(String, Option<&Value>, &Value)> {
    fn walk<'a>(v: &'a Value, at: String, out: &mut Vec<(String, Option<&'a Value>, &'a Value)>) {
        match v {
            Value::Object(o) => {
                if let Some(spec) = o.get("spec")
                    && spec.get("containers").is_some()
                {
                    out.push((at.clone(), o.get("metadata"), spec));
                }
                for (k, child) in o {
                    walk(child, format!("{at}.{k}"), out);
                }
            }
            Value::Array(a) => {
                for (i, child) in a.iter().enumerate() {
                    walk(child, format!("{at}[{i}]"), out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(v, String::new(), &mut out);
    out
}
