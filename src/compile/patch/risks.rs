//! What a patch changes in a pod template that a reviewer of the
//! definition should see: settings that let the pods reach more, or run
//! something else, than the definition says, and that Pod Security does
//! not look at (what it does look at is [`super::pod_security_changes`]'s).
//! Each is a warning, located at the part of the patch that wrote it;
//! the template is compared before and after each patch.

use serde_json::Value;

use super::Segment;

/// A change one patch made: where in the pod template, why it matters,
/// and how to get the same properly.
#[derive(Debug)]
pub(super) struct Risk {
    pub path: Vec<Segment>,
    pub message: String,
    pub hint: String,
}

/// Every [`Risk`] of a patch that turned `before` into `after`; `program`
/// is the container that runs the program.
pub(super) fn changes(program: &str, before: &Value, after: &Value) -> Vec<Risk> {
    let mut out = Vec::new();
    service_account(before, after, &mut out);
    node_name(before, after, &mut out);
    tolerations(before, after, &mut out);
    runtime_class(before, after, &mut out);
    program_changes(program, before, after, &mut out);
    name_resolution(before, after, &mut out);
    out
}

fn at(keys: &[&str]) -> Vec<Segment> {
    keys.iter().map(|k| Segment::Key((*k).to_owned())).collect()
}

/// `spec.<field>` as the patch left it, when it changed it.
fn changed<'a>(before: &Value, after: &'a Value, field: &str) -> Option<&'a Value> {
    let now = &after["spec"][field];
    (before["spec"][field] != *now).then_some(now)
}

/// The account whose token a pod mounts: Kubernetes' `default` when the
/// pod names none.
fn account(t: &Value) -> &str {
    t["spec"]["serviceAccountName"]
        .as_str()
        .filter(|s| !s.is_empty())
        .unwrap_or("default")
}

/// A service-account token: trainc mounts one only for a job that names
/// its account in `serviceAccountName` (and leaves
/// `security.automountServiceAccountToken` on).
fn service_account(before: &Value, after: &Value, out: &mut Vec<Risk>) {
    let sa = account(after);
    const HINT: &str = "a job that calls the Kubernetes API names its account in `spec.serviceAccountName`, and trainc mounts that account's token (`spec.security.automountServiceAccountToken` turns it off)";
    for field in ["serviceAccountName", "serviceAccount"] {
        if changed(before, after, field).is_some_and(|v| !v.is_null()) {
            out.push(Risk {
                path: at(&["spec", field]),
                message: format!(
                    "this patch makes the pods run as service account `{sa}`: the program gets that account's permissions wherever its token is mounted"
                ),
                hint: HINT.into(),
            });
        }
    }
    // Left out, Kubernetes mounts the token unless the account says not to.
    let off = |t: &Value| t["spec"]["automountServiceAccountToken"] == false;
    if off(before) && !off(after) {
        out.push(Risk {
            path: at(&["spec", "automountServiceAccountToken"]),
            message: format!(
                "this patch mounts the token of service account `{sa}` in the pods (`automountServiceAccountToken` is no longer `false`): the program can call the Kubernetes API as that account"
            ),
            hint: HINT.into(),
        });
    }
    let volumes = |t: &Value| t["spec"]["volumes"].as_array().cloned().unwrap_or_default();
    let was = volumes(before);
    for (i, v) in volumes(after).iter().enumerate() {
        let token = v["projected"]["sources"]
            .as_array()
            .is_some_and(|s| s.iter().any(|s| s.get("serviceAccountToken").is_some()));
        if token && !was.contains(v) {
            out.push(Risk {
                path: vec![
                    Segment::Key("spec".into()),
                    Segment::Key("volumes".into()),
                    Segment::Index(i),
                ],
                message: format!(
                    "this patch mounts a token of service account `{sa}` in the pods (the projected `serviceAccountToken` of volume `{}`): the program can act as that account towards the API server, or whatever trusts the token's audience",
                    v["name"].as_str().unwrap_or_default()
                ),
                hint: format!(
                    "{HINT}; a token for another audience (Vault, a cloud's workload identity) should belong to an account made for it"
                ),
            });
        }
    }
}

fn node_name(before: &Value, after: &Value, out: &mut Vec<Risk>) {
    let Some(node) = changed(before, after, "nodeName").and_then(Value::as_str) else {
        return;
    };
    out.push(Risk {
        path: at(&["spec", "nodeName"]),
        message: format!(
            "this patch sets `spec.nodeName: {node}`: the pods skip the scheduler and go to that node whatever its taints, cordon and free resources, and whatever the role's node selector, affinity and `runPolicy.schedulerName` say"
        ),
        hint: "choose nodes with the role's `nodeSelector` (`kubernetes.io/hostname: <node>`) or `affinity`, which the scheduler honours".into(),
    });
}

/// What tolerating every taint of `effect` (every effect for none) lets
/// the pods do: the message's end. Shared with the roles' `tolerations`.
pub fn every_taint(effect: Option<&str>) -> String {
    let (which, then) = match effect.filter(|e| !e.is_empty()) {
        None => (
            "every taint".to_owned(),
            "they may be scheduled onto control-plane and other reserved nodes, and stay on nodes that are not ready or unreachable",
        ),
        Some("NoExecute") => (
            "every `NoExecute` taint".to_owned(),
            "they stay on nodes that are not ready or unreachable, and on nodes tainted to be emptied",
        ),
        Some(e) => (
            format!("every `{e}` taint"),
            "they may be scheduled onto control-plane and other reserved nodes",
        ),
    };
    format!("{which} (`operator: Exists` without a `key`): {then}")
}

/// How to tolerate taints properly.
pub const TOLERATE_BY_KEY: &str = "tolerate the taints of the nodes meant for training by `key` (e.g. `{key: nvidia.com/gpu, operator: Exists}`), in the role's `tolerations`";

/// Whether a toleration (`key`, `operator`) tolerates every taint.
pub fn tolerates_all(key: Option<&str>, operator: Option<&str>) -> bool {
    operator == Some("Exists") && key.is_none_or(str::is_empty)
}

fn tolerations(before: &Value, after: &Value, out: &mut Vec<Risk>) {
    let list = |t: &Value| {
        t["spec"]["tolerations"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let was = list(before);
    for (i, t) in list(after).iter().enumerate() {
        if tolerates_all(t["key"].as_str(), t["operator"].as_str()) && !was.contains(t) {
            out.push(Risk {
                path: vec![
                    Segment::Key("spec".into()),
                    Segment::Key("tolerations".into()),
                    Segment::Index(i),
                ],
                message: format!(
                    "this patch makes the pods tolerate {}",
                    every_taint(t["effect"].as_str())
                ),
                hint: TOLERATE_BY_KEY.into(),
            });
        }
    }
}

fn runtime_class(before: &Value, after: &Value, out: &mut Vec<Risk>) {
    let Some(class) = changed(before, after, "runtimeClassName").and_then(Value::as_str) else {
        return;
    };
    out.push(Risk {
        path: at(&["spec", "runtimeClassName"]),
        message: format!(
            "this patch sets `spec.runtimeClassName: {class}`: the pods run under the runtime that RuntimeClass names, which may isolate them less than the cluster's default, and whose node selector and tolerations are added to them; Pod Security does not look at it"
        ),
        hint: "keep it only for a RuntimeClass the cluster's admins provide for training (gVisor, Kata, the NVIDIA runtime); otherwise remove it: the default runtime needs none".into(),
    });
}

/// The image, command and arguments of the container that runs the
/// program: the definition says what runs, not a patch. (A PyTorch job's
/// command is `torchrun`'s, which a patch may not change at all.)
fn program_changes(program: &str, before: &Value, after: &Value, out: &mut Vec<Risk>) {
    let find = |t: &Value| {
        t["spec"]["containers"]
            .as_array()?
            .iter()
            .enumerate()
            .find(|(_, c)| c["name"] == program)
            .map(|(i, c)| (i, c.clone()))
    };
    let (Some((_, was)), Some((i, now))) = (find(before), find(after)) else {
        return;
    };
    let path = |field: &str| {
        vec![
            Segment::Key("spec".into()),
            Segment::Key("containers".into()),
            Segment::Index(i),
            Segment::Key(field.into()),
        ]
    };
    if was["image"] != now["image"] {
        out.push(Risk {
            path: path("image"),
            message: format!(
                "this patch replaces the image of the `{program}` container, which runs the program: the pods run `{}`, which neither the image rules (a pinned tag) nor the build specs see",
                now["image"].as_str().unwrap_or_default()
            ),
            hint: "set the image in the definition: `spec.image`, the role's `image`, or `spec.build`".into(),
        });
    }
    for (field, what, hint) in [
        (
            "command",
            "command",
            "set the program in the definition: `command` (or the role's), or `build.entrypoint`",
        ),
        (
            "args",
            "arguments",
            "set the arguments in the definition: `args`, or the role's `args`",
        ),
    ] {
        if was[field] != now[field] {
            out.push(Risk {
                path: path(field),
                message: format!(
                    "this patch changes the {what} of the `{program}` container, which runs the program: the pods run something other than the definition shows"
                ),
                hint: hint.into(),
            });
        }
    }
}

/// DNS settings and host aliases: the names the tasks use (object
/// storage, dataset hosts, each other's) may then lead elsewhere.
fn name_resolution(before: &Value, after: &Value, out: &mut Vec<Risk>) {
    for (field, hint) in [
        (
            "dnsPolicy",
            "leave name resolution to the cluster's DNS, configured for every pod rather than in one job's patch",
        ),
        (
            "dnsConfig",
            "leave name resolution to the cluster's DNS, configured for every pod rather than in one job's patch",
        ),
        (
            "hostAliases",
            "add the name to the cluster's DNS (a record, or a Service of type `ExternalName`) rather than to each pod's /etc/hosts",
        ),
    ] {
        if changed(before, after, field).is_some_and(|v| !v.is_null()) {
            out.push(Risk {
                path: at(&["spec", field]),
                message: format!(
                    "this patch changes how the pods resolve names (`spec.{field}`): the names the tasks use (object storage, dataset hosts, each other's) may lead to other addresses than the cluster's DNS gives"
                ),
                hint: hint.into(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn template(spec: Value) -> Value {
        json!({"spec": spec})
    }

    fn messages(before: &Value, after: &Value) -> Vec<String> {
        changes("tensorflow", before, after)
            .into_iter()
            .map(|r| r.message)
            .collect()
    }

    #[test]
    fn an_unchanged_template_has_no_risks() {
        let t = template(json!({
            "automountServiceAccountToken": false,
            "containers": [{"name": "tensorflow", "image": "a", "args": ["x"]}],
            "tolerations": [{"operator": "Exists"}],
        }));
        assert!(changes("tensorflow", &t, &t).is_empty());
    }

    #[test]
    fn each_risk_is_found_where_the_patch_wrote_it() {
        let before = template(json!({
            "automountServiceAccountToken": false,
            "containers": [{"name": "side"}, {"name": "tensorflow", "image": "a", "args": ["x"]}],
        }));
        let after = template(json!({
            "containers": [{"name": "side"}, {"name": "tensorflow", "image": "b", "args": ["x"]}],
            "nodeName": "n1",
            "tolerations": [{"key": "gpu", "operator": "Exists"}, {"operator": "Exists", "effect": "NoExecute"}],
            "runtimeClassName": "runc",
            "hostAliases": [{"ip": "10.0.0.1", "hostnames": ["s3"]}],
            "volumes": [{"name": "t", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}],
        }));
        let found: Vec<String> = changes("tensorflow", &before, &after)
            .iter()
            .map(|r| super::super::dotted(&r.path))
            .collect();
        assert_eq!(
            found,
            [
                "spec.automountServiceAccountToken",
                "spec.volumes[0]",
                "spec.nodeName",
                "spec.tolerations[1]",
                "spec.runtimeClassName",
                "spec.containers[1].image",
                "spec.hostAliases",
            ]
        );
        let m = messages(&before, &after);
        assert!(m[0].contains("service account `default`"), "{m:?}");
        assert!(m[3].contains("every `NoExecute` taint"), "{m:?}");
    }

    #[test]
    fn a_token_trainc_mounts_already_is_no_risk() {
        let before = template(
            json!({"serviceAccountName": "trainer", "automountServiceAccountToken": true}),
        );
        let after =
            template(json!({"serviceAccountName": "admin", "automountServiceAccountToken": true}));
        assert_eq!(
            messages(&before, &after),
            [
                "this patch makes the pods run as service account `admin`: the program gets that account's permissions wherever its token is mounted"
            ]
        );
        assert!(messages(&after, &after).is_empty());
    }
}
