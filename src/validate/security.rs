//! Stage 2: rules about what a job exposes and trusts: its pods' security
//! settings and the Pod Security profile they meet, TensorBoard's exposure,
//! and NetworkPolicy egress. Image references are `image`'s.

use super::rules::Ctx;
use crate::compile::security::{self, Profile};
use crate::model::definition::TrainingJob;
use crate::model::job::Security;
use crate::quantity;

pub(super) fn check(cx: &mut Ctx, def: &TrainingJob) {
    settings(cx, def);
    tensorboard(cx, def);
    egress(cx, def);
}

/// Combinations the API server or the kubelet refuses, then the profile
/// the pods still meet when the definition relaxes something.
fn settings(cx: &mut Ctx, def: &TrainingJob) {
    let s = &def.spec.security;
    let resolved = Security::resolve(s, def.spec.service_account_name.as_deref());
    if resolved.run_as_user == 0 && resolved.run_as_non_root {
        cx.error(
            "/spec/security/runAsUser",
            "UID 0 is root, but `runAsNonRoot` is true: the kubelet would refuse to start the pods",
            "set `runAsNonRoot: false` as well, or pick a non-zero UID",
        );
    }
    let escalation = !resolved.allow_privilege_escalation;
    if resolved.privileged && escalation {
        cx.error(
            "/spec/security/privileged",
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
            &format!("/spec/security/capabilities/add/{i}"),
            "SYS_ADMIN allows privilege escalation, and the API server refuses `allowPrivilegeEscalation: false` with it",
            "set `allowPrivilegeEscalation: true` as well",
        );
    }
    if let Some(p) = &s.seccomp_profile {
        match (p.type_.as_str(), &p.localhost_profile) {
            ("Localhost", None) => cx.error(
                "/spec/security/seccompProfile/type",
                "a `Localhost` seccomp profile needs `localhostProfile`",
                "name the profile file, relative to the kubelet's seccomp directory",
            ),
            (t, Some(_)) if t != "Localhost" => cx.error(
                "/spec/security/seccompProfile/localhostProfile",
                format!("`localhostProfile` applies only to type `Localhost`, not `{t}`"),
                "remove `localhostProfile`, or set `type: Localhost`",
            ),
            _ => {}
        }
    }
    let (level, why) = security::profile(&resolved);
    if level == Profile::Restricted {
        return;
    }
    let reasons: Vec<String> = why.iter().map(|r| r.reason.clone()).collect();
    let first = why
        .iter()
        .find(|r| r.profile == level)
        .map_or("", |r| r.field);
    let pointer = format!("/spec/security/{}", first.replace('.', "/"));
    cx.warning(
        &pointer,
        format!(
            "the pods of job `{}` meet the Pod Security `{}` profile, not `restricted`: {}",
            def.metadata.name,
            level.as_str(),
            reasons.join("; ")
        ),
        format!(
            "a namespace that enforces `restricted` rejects them; label it `pod-security.kubernetes.io/enforce: {}` if that is intended",
            level.as_str()
        ),
    );
}

fn tensorboard(cx: &mut Ctx, def: &TrainingJob) {
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
    for (request, limit, field) in [
        (&r.cpu, &r.cpu_limit, "cpuLimit"),
        (&r.memory, &r.memory_limit, "memoryLimit"),
    ] {
        let (Some(request), Some(limit)) = (request, limit) else {
            continue;
        };
        if let (Ok(rq), Ok(lm)) = (
            quantity::parse(&request.render()),
            quantity::parse(&limit.render()),
        ) && lm < rq
        {
            cx.error(
                &format!("/spec/tensorboard/resources/{field}"),
                format!(
                    "limit {} is below the request {}",
                    limit.render(),
                    request.render()
                ),
                "a limit must be at least the request",
            );
        }
    }
}

fn egress(cx: &mut Ctx, def: &TrainingJob) {
    let Some(rules) = &def.spec.security.network_policy.egress else {
        return;
    };
    for (i, rule) in rules.iter().enumerate() {
        if rule.cidr.is_none() && !rule.except.is_empty() {
            cx.error(
                &format!("/spec/security/networkPolicy/egress/{i}/except"),
                "`except` carves addresses out of `cidr`, and this rule has none",
                "add `cidr: 0.0.0.0/0` to allow every address but these",
            );
        }
    }
}
