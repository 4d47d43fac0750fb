//! Stage 2: rules about what a job exposes and trusts: its pods' security
//! settings and the Pod Security profile they meet, AppArmor annotations,
//! TensorBoard's exposure, NetworkPolicy egress, the namespace it goes to
//! and the Secrets its CSI volumes read. Image references are `image`'s;
//! what patches change is [`crate::compile::patch`]'s.

use crate::compile::security::{self, Profile};
use crate::load::Findings;
use crate::model::definition::RoleKind;
use crate::model::definition::TrainingJob;
use crate::model::job::{Security, namespace_of};
use crate::model::project::Defaults;
use crate::source::pointer_segment;

/// The annotation that sets a container's AppArmor profile, before the
/// container's name.
const APPARMOR: &str = "container.apparmor.security.beta.kubernetes.io/";

pub(super) fn check(cx: &mut Findings, def: &TrainingJob, defaults: &Defaults) {
    settings(cx, def);
    apparmor(cx, def);
    tensorboard(cx, def);
    egress(cx, def);
    namespace(cx, def, defaults);
    csi_secrets(cx, def, defaults);
}

/// The job's security settings, then each role's own over them: what the
/// API server or the kubelet refuses, and the profile the pods still meet.
fn settings(cx: &mut Findings, def: &TrainingJob) {
    let account = def.spec.service_account_name.as_deref();
    let job = &def.spec.security;
    settings_of(
        cx,
        job,
        &Security::resolve(job, account),
        "/spec/security",
        format!("the pods of job `{}`", def.metadata.name),
    );
    for kind in RoleKind::ALL {
        let Some(own) = kind.of(&def.spec.roles).and_then(|r| r.security.as_ref()) else {
            continue;
        };
        let base = format!("/spec/roles/{}/security", kind.as_str());
        if cx
            .doc
            .value
            .pointer(&format!("{base}/networkPolicy"))
            .is_some()
        {
            cx.error_at_key(
                &format!("{base}/networkPolicy"),
                "the NetworkPolicy is the run's, not a role's",
                "set it in `spec.security.networkPolicy`",
            );
        }
        let merged = job.under(own);
        settings_of(
            cx,
            &merged,
            &Security::resolve(&merged, account),
            &base,
            format!(
                "the `{}` pods of job `{}`",
                kind.as_str(),
                def.metadata.name
            ),
        );
    }
}

/// [`settings`] of one set of settings, reported below `base`.
fn settings_of(
    cx: &mut Findings,
    s: &crate::model::definition::Security,
    resolved: &Security,
    base: &str,
    who: String,
) {
    if resolved.run_as_user == Some(0) && resolved.run_as_non_root {
        cx.error(
            &format!("{base}/runAsUser"),
            "UID 0 is root, but `runAsNonRoot` is true: the kubelet would refuse to start the pods",
            "set `runAsNonRoot: false` as well, or pick a non-zero UID",
        );
    }
    let escalation = !resolved.allow_privilege_escalation;
    if resolved.privileged && escalation {
        cx.error(
            &format!("{base}/privileged"),
            "a privileged container can always escalate privileges, and the API server refuses `allowPrivilegeEscalation: false` with it",
            "set `allowPrivilegeEscalation: true` as well",
        );
    }
    if let Some(i) = resolved
        .add_capabilities
        .iter()
        .position(|c| c == "SYS_ADMIN")
        && escalation
    {
        cx.error(
            &format!("{base}/capabilities/add/{i}"),
            "SYS_ADMIN allows privilege escalation, and the API server refuses `allowPrivilegeEscalation: false` with it",
            "set `allowPrivilegeEscalation: true` as well",
        );
    }
    if let Some(p) = &s.seccomp_profile {
        match (p.type_.as_str(), &p.localhost_profile) {
            ("Localhost", None) => cx.error(
                &format!("{base}/seccompProfile/type"),
                "a `Localhost` seccomp profile needs `localhostProfile`",
                "name the profile file, relative to the kubelet's seccomp directory",
            ),
            (t, Some(_)) if t != "Localhost" => cx.error(
                &format!("{base}/seccompProfile/localhostProfile"),
                format!("`localhostProfile` applies only to type `Localhost`, not `{t}`"),
                "remove `localhostProfile`, or set `type: Localhost`",
            ),
            _ => {}
        }
    }
    let (level, why) = security::profile(resolved);
    if level == Profile::Restricted {
        return;
    }
    let reasons: Vec<String> = why.iter().map(|r| r.reason.clone()).collect();
    let first = why
        .iter()
        .find(|r| r.profile == level)
        .map_or("", |r| r.field);
    let pointer = format!("{base}/{}", first.replace('.', "/"));
    cx.warning(
        &pointer,
        format!(
            "{who} meet the Pod Security `{}` profile, not `restricted`: {}",
            level.as_str(),
            reasons.join("; ")
        ),
        format!(
            "a namespace that enforces `restricted` rejects them; label it `pod-security.kubernetes.io/enforce: {}` if that is intended",
            level.as_str()
        ),
    );
}

fn tensorboard(cx: &mut Findings, def: &TrainingJob) {
    let Some(tb) = def.spec.tensorboard.as_ref().filter(|t| t.enabled) else {
        return;
    };
    if tb.image.is_some() && tb.repository.is_some() {
        cx.error_at_key(
            "/spec/tensorboard/repository",
            "`repository` is where trainc pushes the TensorBoard image it builds, but `image` names a ready one",
            "keep one of the two",
        );
    }
    let load_balancer = tb.service.as_deref() == Some("LoadBalancer");
    if !load_balancer && !tb.load_balancer_source_ranges.is_empty() {
        cx.error_at_key(
            "/spec/tensorboard/loadBalancerSourceRanges",
            "source ranges apply only to `service: LoadBalancer`",
            "remove them, or set `service: LoadBalancer`",
        );
    }
    let r = &tb.resources;
    super::rules::limits_at_least_requests(
        cx,
        "/spec/tensorboard/resources",
        [(&r.cpu, &r.cpu_limit), (&r.memory, &r.memory_limit)],
    );
}

/// AppArmor turned off by an annotation: on every pod of the job (the
/// definition's `metadata.annotations`, which TensorBoard's pod gets too),
/// or on one role's (its `annotations`, which reach no other pod).
fn apparmor(cx: &mut Findings, def: &TrainingJob) {
    let tensorboard = def.spec.tensorboard.as_ref().is_some_and(|t| t.enabled);
    let job = if tensorboard {
        "every pod of the job (TensorBoard's too)".to_owned()
    } else {
        "every pod of the job".to_owned()
    };
    let mut maps = vec![(
        "/metadata/annotations".to_owned(),
        &def.metadata.annotations,
        job,
    )];
    for kind in RoleKind::ALL {
        if let Some(role) = kind.of(&def.spec.roles) {
            maps.push((
                format!("/spec/roles/{}/annotations", kind.as_str()),
                &role.annotations,
                format!("the pods of role `{}`", kind.as_str()),
            ));
        }
    }
    for (at, annotations, pods) in maps {
        for (key, value) in annotations {
            let Some(container) = key.strip_prefix(APPARMOR) else {
                continue;
            };
            if value != "unconfined" {
                continue;
            }
            cx.warning(
                &format!("{at}/{}", pointer_segment(key)),
                format!(
                    "container `{container}` runs without AppArmor (`unconfined`) in {pods}: they meet the Pod Security `privileged` profile only, and a namespace that enforces `baseline` or `restricted` rejects them"
                ),
                "leave AppArmor on (remove the annotation), or name a profile the nodes load (`localhost/<profile>`); a role's `annotations` reach only that role's pods",
            );
        }
    }
}

fn egress(cx: &mut Findings, def: &TrainingJob) {
    let policy = &def.spec.security.network_policy;
    if !policy.enabled {
        let tensorboard = def.spec.tensorboard.as_ref().is_some_and(|t| t.enabled);
        let ports = if tensorboard {
            "the tasks' ports and TensorBoard's"
        } else {
            "the tasks' ports"
        };
        cx.warning(
            "/spec/security/networkPolicy/enabled",
            format!("trainc writes no NetworkPolicy for this job: unless the cluster's own policies cover the namespace, any pod can reach {ports} (the training frameworks' servers ask no caller who it is), and the tasks can reach anything"),
            "keep trainc's policies (remove `enabled: false`) and allow what the tasks need in `egress`",
        );
    }
    let Some(rules) = &policy.egress else {
        return;
    };
    for (i, rule) in rules.iter().enumerate() {
        let at = format!("/spec/security/networkPolicy/egress/{i}");
        if rule.cidr.is_none() && !rule.except.is_empty() {
            cx.error(
                &format!("{at}/except"),
                "`except` carves addresses out of `cidr`, and this rule has none",
                "add `cidr: 0.0.0.0/0` to allow every address but these",
            );
            continue;
        }
        // No `ports`: every port; no `cidr`, or a prefix of length 0:
        // every address.
        let everywhere = rule
            .cidr
            .as_deref()
            .is_none_or(|c| c.split_once('/').is_some_and(|(_, len)| len == "0"));
        if !rule.ports.is_empty() || !everywhere {
            continue;
        }
        let (pointer, whom) = match (&rule.cidr, rule.except.is_empty()) {
            (None, _) => (
                at,
                "every address (the cluster's pods and the cloud's metadata endpoint included)",
            ),
            (Some(_), true) => (format!("{at}/cidr"), "every address"),
            (Some(_), false) => (format!("{at}/cidr"), "every address but `except`"),
        };
        cx.warning(
            &pointer,
            format!("this rule lets the tasks reach {whom} on every port: the run's NetworkPolicy no longer limits where they can send data"),
            "list the ports the tasks need (`ports: [443]`) and, where you can, the addresses (`cidr`)",
        );
    }
}

/// The namespaces Kubernetes keeps for itself: `kube-system`,
/// `kube-public`, `kube-node-lease`, and any other of the `kube-` prefix.
fn system_namespace(namespace: &str) -> bool {
    namespace.starts_with("kube-")
}

/// A job in a namespace Kubernetes keeps for itself.
fn namespace(cx: &mut Findings, def: &TrainingJob, defaults: &Defaults) {
    let ns = namespace_of(def, defaults);
    if !system_namespace(&ns) {
        return;
    }
    let message = format!(
        "job `{}` goes to namespace `{ns}`, which Kubernetes keeps for itself: policies often exempt it (Pod Security, admission webhooks), and its Secrets and service accounts are the cluster's own, within reach of the job's pods",
        def.metadata.name
    );
    let hint = "run training in a namespace of its own, e.g. `ml`";
    if def.metadata.namespace.is_some() {
        cx.warning("/metadata/namespace", message, hint);
    } else {
        cx.warning_at_key(
            "/metadata",
            format!("{message} (the namespace is the project's `defaults.namespace`)"),
            format!("{hint}: set `metadata.namespace`, or the project's `defaults.namespace`"),
        );
    }
}

/// A CSI volume's Secret in another namespace than the job's: the
/// PersistentVolume is cluster-scoped, so nothing limits which namespace
/// its driver reads the Secret from for the job's pods.
fn csi_secrets(cx: &mut Findings, def: &TrainingJob, defaults: &Defaults) {
    let ns = namespace_of(def, defaults);
    for (i, v) in def.spec.storage.iter().enumerate() {
        let Some(csi) = &v.csi else { continue };
        for (field, secret) in [
            ("nodeStageSecretRef", &csi.node_stage_secret_ref),
            ("nodePublishSecretRef", &csi.node_publish_secret_ref),
        ] {
            let Some((name, theirs)) = secret
                .as_ref()
                .and_then(|s| Some((&s.name, s.namespace.as_deref()?)))
            else {
                continue;
            };
            if theirs == ns {
                continue;
            }
            cx.warning(
                &format!("/spec/storage/{i}/csi/{field}/namespace"),
                format!(
                    "the CSI driver reads the Secret `{name}` from namespace `{theirs}`, not the job's (`{ns}`): the PersistentVolume is cluster-wide, so a definition can put another namespace's credentials to use for its pods"
                ),
                "keep the Secret in the job's namespace and leave `namespace` out; sharing another namespace's Secret is for its owners to do",
            );
        }
    }
}
