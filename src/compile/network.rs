//! Stage 3 (compile), shared by every target: the NetworkPolicies of a job.
//!
//! A parameter server's gRPC port accepts any caller, and collective
//! libraries (NCCL, gloo) open ports of their own choosing. So the run's
//! policy admits every TCP port, but only from the run's own pods, and lets
//! the tasks reach the run, DNS, and the egress rules of the definition.
//! TensorBoard gets a policy of its own: its port, from anywhere (the
//! Service type and `loadBalancerSourceRanges` decide who gets that far).

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::{
    IPBlock, NetworkPolicy, NetworkPolicyEgressRule, NetworkPolicyIngressRule, NetworkPolicyPeer,
    NetworkPolicyPort, NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::compile::{Manifest, Run, meta};
use crate::model::Job;
use crate::model::definition::EgressRule;

fn selector(labels: BTreeMap<String, String>) -> LabelSelector {
    LabelSelector {
        match_labels: Some(labels),
        ..LabelSelector::default()
    }
}

fn port(protocol: &str, number: Option<u16>) -> NetworkPolicyPort {
    NetworkPolicyPort {
        protocol: Some(protocol.to_owned()),
        port: number.map(|n| IntOrString::Int(i32::from(n))),
        ..NetworkPolicyPort::default()
    }
}

/// DNS on port 53, to any address: cluster DNS may be a Service, a
/// node-local cache on a link-local address, or outside the cluster.
fn dns() -> NetworkPolicyEgressRule {
    NetworkPolicyEgressRule {
        ports: Some(vec![port("UDP", Some(53)), port("TCP", Some(53))]),
        to: None,
    }
}

fn egress(rule: &EgressRule) -> NetworkPolicyEgressRule {
    NetworkPolicyEgressRule {
        ports: Some(
            rule.ports
                .iter()
                .map(|p| port("TCP", Some(*p)))
                .collect::<Vec<_>>(),
        )
        .filter(|p| !p.is_empty()),
        to: rule.cidr.as_ref().map(|cidr| {
            vec![NetworkPolicyPeer {
                ip_block: Some(IPBlock {
                    cidr: cidr.clone(),
                    except: Some(rule.except.clone()).filter(|e| !e.is_empty()),
                }),
                ..NetworkPolicyPeer::default()
            }]
        }),
    }
}

/// The run's policy, named after the run like its other objects.
pub fn run_policy(run: &Run) -> Option<Manifest> {
    let job = run.job;
    let policy = job.network_policy.as_ref()?;
    let peers = || {
        Some(vec![NetworkPolicyPeer {
            pod_selector: Some(selector(meta::run_selector(&run.name))),
            ..NetworkPolicyPeer::default()
        }])
    };
    let any_tcp = || Some(vec![port("TCP", None)]);
    let mut egress_rules = vec![
        NetworkPolicyEgressRule {
            ports: any_tcp(),
            to: peers(),
        },
        dns(),
    ];
    egress_rules.extend(policy.egress.iter().map(egress));
    let np = NetworkPolicy {
        metadata: meta::object(
            job,
            &run.name,
            true,
            meta::labels(job, meta::run_labels(job, &run.name)),
        ),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(selector(meta::run_selector(&run.name))),
            policy_types: Some(vec!["Ingress".to_owned(), "Egress".to_owned()]),
            ingress: Some(vec![NetworkPolicyIngressRule {
                from: peers(),
                ports: any_tcp(),
            }]),
            egress: Some(egress_rules),
        }),
    };
    Some(Manifest::new(
        np,
        &run.name,
        &job.name,
        true,
        &job.namespace,
    ))
}

/// TensorBoard's policy: its HTTP port in, DNS out, nothing else.
pub fn tensorboard_policy(
    job: &Job,
    name: &str,
    selector_labels: BTreeMap<String, String>,
    tb_port: u16,
) -> Option<Manifest> {
    job.network_policy.as_ref()?;
    let np = NetworkPolicy {
        metadata: meta::object(job, name, true, meta::labels(job, selector_labels.clone())),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(selector(selector_labels)),
            policy_types: Some(vec!["Ingress".to_owned(), "Egress".to_owned()]),
            ingress: Some(vec![NetworkPolicyIngressRule {
                from: None,
                ports: Some(vec![port("TCP", Some(tb_port))]),
            }]),
            egress: Some(vec![dns()]),
        }),
    };
    Some(Manifest::new(np, name, name, true, &job.namespace))
}
