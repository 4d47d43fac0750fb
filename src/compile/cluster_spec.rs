//! The cluster spec: which task is where, as `TF_CONFIG` and as TF1 flags.

use serde_json::{Map, Value, json};

use crate::model::Job;
use crate::model::job::RoleKind;
use crate::names;

/// Host lists by task type, in the order TensorFlow expects.
#[derive(Debug, Clone)]
pub struct ClusterSpec {
    hosts: Vec<(RoleKind, Vec<String>)>,
}

impl ClusterSpec {
    /// Every task with a server gets a stable DNS name from its headless
    /// Service: `<job>-<role>-<i>.<namespace>.svc:<port>`. The evaluator is
    /// not part of the cluster (TensorFlow never connects to it).
    pub fn of(job: &Job) -> Self {
        Self::with_hosts(job, |kind, i, port| {
            format!(
                "{}.{}.svc:{port}",
                names::task(&job.name, kind.as_str(), i),
                job.namespace
            )
        })
    }

    /// The same layout with other host names: `host(role, index, port)`.
    /// `trainc run --local` puts every task on 127.0.0.1.
    pub fn with_hosts(job: &Job, host: impl Fn(RoleKind, u32, u16) -> String) -> Self {
        let hosts = job
            .roles
            .iter()
            .filter(|r| r.kind != RoleKind::Evaluator)
            .map(|r| {
                let hosts = (0..r.replicas).map(|i| host(r.kind, i, r.port)).collect();
                (r.kind, hosts)
            })
            .collect();
        Self { hosts }
    }

    pub fn hosts(&self, kind: RoleKind) -> &[String] {
        self.hosts
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(&[], |(_, h)| h.as_slice())
    }

    /// `{"ps": [...], "worker": [...]}`.
    pub fn cluster(&self) -> Value {
        let mut m = Map::new();
        for (kind, hosts) in &self.hosts {
            m.insert(kind.as_str().to_owned(), json!(hosts));
        }
        Value::Object(m)
    }

    /// The files of the cluster-spec ConfigMap (mounted at `/etc/trainc`):
    /// `cluster.json` and one `<role>_hosts` list per role.
    pub fn files(&self) -> std::collections::BTreeMap<String, String> {
        let mut data = std::collections::BTreeMap::new();
        let mut pretty = serde_json::to_string_pretty(&self.cluster()).unwrap_or_default();
        pretty.push('\n');
        data.insert("cluster.json".to_owned(), pretty);
        for (kind, hosts) in &self.hosts {
            if !hosts.is_empty() {
                data.insert(format!("{}_hosts", kind.as_str()), hosts.join(","));
            }
        }
        data
    }

    /// `TF_CONFIG` of one task, exactly as TensorFlow reads it.
    pub fn tf_config(&self, kind: RoleKind, index: u32) -> String {
        json!({
            "cluster": self.cluster(),
            "task": {"type": kind.as_str(), "index": index},
        })
        .to_string()
    }

    /// `--ps_hosts`, `--worker_hosts`, `--job_name`, `--task_index` for
    /// TensorFlow 1.x programs.
    pub fn legacy_flags(&self, kind: RoleKind, index: u32) -> Vec<String> {
        vec![
            format!("--ps_hosts={}", self.hosts(RoleKind::Ps).join(",")),
            format!("--worker_hosts={}", self.hosts(RoleKind::Worker).join(",")),
            format!("--job_name={}", kind.as_str()),
            format!("--task_index={index}"),
        ]
    }
}
