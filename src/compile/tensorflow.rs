//! Stage 3 (compile), framework TensorFlow: the cluster spec of a run (which
//! task is where) as `TF_CONFIG`, as TensorFlow 1.x flags and as files; and,
//! for validation, what each strategy asks of the roles.
//!
//! Targets differ in how a task is addressed (a pod per Job, a Job per
//! replica of a JobSet, a pod the operator names) and in whether a task's
//! index is known when its pod template is rendered; they pass host names
//! and an [`Index`], and this module writes what TensorFlow reads.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::compile::index::Index;
use crate::load::Findings;
use crate::model::Job;
use crate::model::definition::RoleKind;
use crate::model::definition::{Strategy, TrainingJob};

/// Host lists by task type, in the order TensorFlow expects.
#[derive(Debug, Clone)]
pub struct ClusterSpec {
    hosts: Vec<(RoleKind, Vec<String>)>,
    /// What every task's `TF_CONFIG` and flags repeat, written once per
    /// run rather than once per task: the cluster as JSON, and the
    /// `--ps_hosts` and `--worker_hosts` flags.
    cluster_json: String,
    host_flags: [String; 2],
}

impl ClusterSpec {
    /// Every task with a server, addressed by `host(role, index, port)`.
    /// The evaluator is not part of the cluster (TensorFlow never connects
    /// to it).
    pub fn with_hosts(job: &Job, host: impl Fn(RoleKind, u32, u16) -> String) -> Self {
        Self::build(job, false, host)
    }

    /// The cluster as the Kubeflow Training Operator writes it into its own
    /// `TF_CONFIG`: the evaluator listed too.
    pub fn with_evaluator(job: &Job, host: impl Fn(RoleKind, u32, u16) -> String) -> Self {
        Self::build(job, true, host)
    }

    fn build(job: &Job, evaluator: bool, host: impl Fn(RoleKind, u32, u16) -> String) -> Self {
        let hosts = job
            .roles
            .iter()
            .filter(|r| evaluator || r.kind != RoleKind::Evaluator)
            .map(|r| {
                let hosts = (0..r.replicas).map(|i| host(r.kind, i, r.port)).collect();
                (r.kind, hosts)
            })
            .collect();
        Self::from_hosts(hosts)
    }

    fn from_hosts(hosts: Vec<(RoleKind, Vec<String>)>) -> Self {
        let mut spec = Self {
            hosts,
            cluster_json: String::new(),
            host_flags: [String::new(), String::new()],
        };
        spec.cluster_json = spec.cluster().to_string();
        spec.host_flags = [
            format!("--ps_hosts={}", spec.hosts(RoleKind::Ps).join(",")),
            format!("--worker_hosts={}", spec.hosts(RoleKind::Worker).join(",")),
        ];
        spec
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
    pub fn files(&self) -> BTreeMap<String, String> {
        let mut data = BTreeMap::new();
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

    /// `TF_CONFIG` of one task, exactly as TensorFlow reads it (once
    /// Kubernetes has expanded a label-borne index).
    pub fn tf_config(&self, kind: RoleKind, index: Index) -> String {
        // Written out rather than through `json!`, since a label-borne index
        // is a `$(VAR)` reference, not a JSON number, until Kubernetes
        // expands it. The bytes are the same as serde_json's.
        let task_type = Value::String(kind.as_str().to_owned());
        format!(
            "{{\"cluster\":{},\"task\":{{\"type\":{task_type},\"index\":{}}}}}",
            self.cluster_json,
            index.render()
        )
    }

    /// `--ps_hosts`, `--worker_hosts`, `--job_name`, `--task_index` for
    /// TensorFlow 1.x programs.
    pub fn legacy_flags(&self, kind: RoleKind, index: Index) -> Vec<String> {
        let [ps, workers] = &self.host_flags;
        vec![
            ps.clone(),
            workers.clone(),
            format!("--job_name={}", kind.as_str()),
            format!("--task_index={}", index.render()),
        ]
    }
}

/// What TensorFlow adds to one task's arguments: the TF1 cluster flags, on
/// request.
pub fn args(job: &Job, kind: RoleKind, index: Index, cluster: &ClusterSpec) -> Vec<String> {
    if job.framework.tensorflow().is_some_and(|t| t.legacy_flags) {
        cluster.legacy_flags(kind, index)
    } else {
        Vec::new()
    }
}

/// What TensorFlow adds to one task's environment: `TF_CONFIG`, unless the
/// definition turned it off or the target's operator injects its own.
pub fn env(
    job: &Job,
    kind: RoleKind,
    index: Index,
    cluster: &ClusterSpec,
    target_sets_tf_config: bool,
) -> Vec<(String, String)> {
    if job.framework.tensorflow().is_some_and(|t| t.tf_config) && target_sets_tf_config {
        vec![("TF_CONFIG".to_owned(), cluster.tf_config(kind, index))]
    } else {
        Vec::new()
    }
}

/// How many tasks of a role a strategy allows: `(role, at least, at most)`.
/// Parameter-server training, in the TF1 layout (ps + workers) and the TF2
/// one (a chief coordinating ps + workers), needs both kinds of server; the
/// collective strategy has workers only, one of which (or the chief) saves.
pub fn layout(strategy: Strategy) -> [(RoleKind, u32, u32); 4] {
    let ps = match strategy {
        Strategy::ParameterServer => (1, u32::MAX),
        Strategy::MultiWorkerMirrored | Strategy::DataParallel => (0, 0),
    };
    [
        (RoleKind::Chief, 0, 1),
        (RoleKind::Ps, ps.0, ps.1),
        (RoleKind::Worker, 1, u32::MAX),
        (RoleKind::Evaluator, 0, 1),
    ]
}

/// The first way `count` breaks the strategy's layout, as a message.
pub fn layout_error(strategy: Strategy, count: impl Fn(RoleKind) -> u32) -> Option<String> {
    layout(strategy).into_iter().find_map(|(kind, min, max)| {
        let n = count(kind);
        let what = kind.as_str();
        (n < min)
            .then(|| {
                format!(
                    "{} training needs at least one {what} task",
                    strategy.as_str()
                )
            })
            .or_else(|| {
                (n > max).then(|| match max {
                    0 => format!("{} training has no {what} tasks", strategy.as_str()),
                    _ => format!("{} training has at most one {what} task", strategy.as_str()),
                })
            })
    })
}

/// What a strategy asks of a definition's roles and cluster-spec options.
pub(crate) fn check(cx: &mut Findings, def: &TrainingJob) {
    let spec = &def.spec;
    let strategy = spec.strategy.unwrap_or(Strategy::ParameterServer);
    let replicas = |kind: RoleKind| kind.of(&spec.roles).map_or(0, |r| r.replicas);
    for (kind, min, max) in layout(strategy) {
        let role = kind.as_str();
        let n = replicas(kind);
        let at = format!("/spec/roles/{role}/replicas");
        if n < min {
            let what = if kind == RoleKind::Ps {
                "parameter server"
            } else {
                role
            };
            let pointer = if kind.of(&spec.roles).is_some() {
                at
            } else {
                "/spec/roles".to_owned()
            };
            let mut hint = format!("set `spec.roles.{role}.replicas` to 1 or more");
            if kind == RoleKind::Ps {
                hint.push_str(
                    ", or `strategy: multi-worker-mirrored` to train with workers only (TensorFlow's collective strategy)",
                );
            }
            cx.error_at_key(
                &pointer,
                format!(
                    "the {} strategy needs at least one {what}",
                    strategy.as_str()
                ),
                hint,
            );
        } else if n > max {
            match kind {
                RoleKind::Chief => cx.error(
                    &at,
                    "a job has at most one chief",
                    "set `replicas: 1`; use `worker` for more tasks",
                ),
                RoleKind::Evaluator => {
                    cx.error(&at, "TensorFlow runs at most one evaluator", "set `replicas: 1`")
                }
                RoleKind::Ps | RoleKind::Worker => cx.error_at_key(
                    &format!("/spec/roles/{role}"),
                    format!("the {} strategy has no {role} tasks", strategy.as_str()),
                    "remove the role: every worker holds a copy of the variables, kept in step by all-reduce; for parameter servers use `strategy: parameter-server`",
                ),
            }
        }
    }
    if strategy == Strategy::MultiWorkerMirrored && spec.cluster_spec().legacy_flags {
        cx.error(
            "/spec/clusterSpec/legacyFlags",
            "TensorFlow 1 cluster flags (`--ps_hosts`, `--worker_hosts`, …) describe parameter-server training",
            "remove `legacyFlags`: `MultiWorkerMirroredStrategy` reads the cluster from `TF_CONFIG`",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ClusterSpec {
        ClusterSpec::from_hosts(vec![
            (RoleKind::Ps, vec!["p0:1".into()]),
            (RoleKind::Worker, vec!["w0:1".into(), "w1:1".into()]),
        ])
    }

    #[test]
    fn tf_config_is_what_serde_json_writes() {
        let fixed = spec().tf_config(RoleKind::Worker, Index::Fixed(1));
        let expected = json!({"cluster": spec().cluster(), "task": {"type": "worker", "index": 1}});
        assert_eq!(fixed, expected.to_string());
    }

    #[test]
    fn a_label_index_is_a_variable_reference() {
        let c = spec().tf_config(RoleKind::Ps, Index::Label("x"));
        assert!(
            c.ends_with(r#""task":{"type":"ps","index":$(TRAINC_TASK_INDEX)}}"#),
            "{c}"
        );
        let flags = spec().legacy_flags(RoleKind::Ps, Index::Label("x"));
        assert_eq!(flags[3], "--task_index=$(TRAINC_TASK_INDEX)");
    }
}
