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
        let hosts = job
            .roles
            .iter()
            .filter(|r| r.kind != RoleKind::Evaluator)
            .map(|r| {
                let hosts = (0..r.replicas)
                    .map(|i| {
                        format!(
                            "{}.{}.svc:{}",
                            names::task(&job.name, r.kind.as_str(), i),
                            job.namespace,
                            r.port
                        )
                    })
                    .collect();
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
