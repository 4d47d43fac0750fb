//! Stage 5 (report): what a change costs. The tasks, GPUs, CPU and memory a
//! run requests, read back from its run objects (Jobs, JobSets, TFJobs,
//! PyTorchJobs) as the files hold them, so `diff` can say before → after
//! from the committed YAML and the new.
//!
//! The rules, as the scheduler counts:
//! - tasks are the pods that run at once, as each target reads its own
//!   objects (`pods` in `compile/target/mod.rs`): a Job's `parallelism` (1 when
//!   unset, no more than `completions`), a JobSet's replicated Job that many
//!   times `replicas`, a TFJob's or PyTorchJob's replica spec `replicas`
//!   (1 when unset);
//! - a container requests its `requests`, and its `limits` for what it has
//!   no request of (Kubernetes copies such limits to requests: trainc puts
//!   GPUs in limits only);
//! - a pod requests the larger of its containers and sidecars (init
//!   containers with `restartPolicy: Always`) together, and of each other
//!   init container with the sidecars started before it;
//! - GPUs are extended resources whose name ends in `/gpu` (`nvidia.com/gpu`,
//!   `amd.com/gpu`); any other extended resource (`gpu.intel.com/i915`, a
//!   MIG slice, an RDMA device) is counted under its own name, never as a
//!   GPU; native resources other than CPU and memory are left out.
//!
//! A quantity that does not parse counts as nothing: the files were written
//! by trainc, which validated them, or edited by hand, which `diff` reports
//! anyway.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;
use serde_json::Value;

use crate::compile::PodRequests;
use crate::quantity;

/// What a run requests while every task runs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Requests {
    /// Pods that run at once.
    pub tasks: u64,
    /// Extended resources named `*/gpu`, summed.
    pub gpus: u64,
    pub cpu_millicores: u64,
    pub memory_bytes: u64,
    /// Every extended resource by name, GPUs included.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub extended: BTreeMap<String, u64>,
}

impl Requests {
    pub fn add(&mut self, other: &Requests) {
        self.tasks = self.tasks.saturating_add(other.tasks);
        self.gpus = self.gpus.saturating_add(other.gpus);
        self.cpu_millicores = self.cpu_millicores.saturating_add(other.cpu_millicores);
        self.memory_bytes = self.memory_bytes.saturating_add(other.memory_bytes);
        for (name, n) in &other.extended {
            let e = self.extended.entry(name.clone()).or_default();
            *e = e.saturating_add(*n);
        }
    }

    /// Resource by resource, the larger of the two (not the tasks).
    fn max(&mut self, other: &Requests) {
        self.cpu_millicores = self.cpu_millicores.max(other.cpu_millicores);
        self.memory_bytes = self.memory_bytes.max(other.memory_bytes);
        for (name, n) in &other.extended {
            let e = self.extended.entry(name.clone()).or_default();
            *e = (*e).max(*n);
        }
    }

    fn times(&self, n: u64) -> Requests {
        Requests {
            tasks: self.tasks.saturating_mul(n),
            gpus: self.gpus.saturating_mul(n),
            cpu_millicores: self.cpu_millicores.saturating_mul(n),
            memory_bytes: self.memory_bytes.saturating_mul(n),
            extended: self
                .extended
                .iter()
                .map(|(k, v)| (k.clone(), v.saturating_mul(n)))
                .collect(),
        }
    }
}

/// Before and after, of one run or of all.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Cost {
    pub before: Requests,
    pub after: Requests,
}

impl Cost {
    pub fn add(&mut self, other: &Cost) {
        self.before.add(&other.before);
        self.after.add(&other.after);
    }
}

/// What an object that holds a run's pod templates requests (each
/// target's `pods`, `compile::target::Backend`); nothing for other kinds.
pub fn of_run_object(doc: &Value) -> Requests {
    let kind = doc["kind"].as_str().unwrap_or_default();
    let mut out = Requests::default();
    let backends = crate::compile::target::BACKENDS.iter();
    if let Some(b) = backends.into_iter().find(|b| b.pods_kind() == kind) {
        for (pods, requests) in (b.pods)(doc) {
            let one = match requests {
                PodRequests::Spec(spec) => pod(spec),
                PodRequests::Resources(resources) => {
                    pod(&serde_json::json!({"containers": [{"resources": resources}]}))
                }
            };
            out.add(&one.times(pods));
        }
    }
    out
}

/// One pod's effective request (see the module docs), as one task.
fn pod(spec: &Value) -> Requests {
    let containers = |key: &str| spec[key].as_array().cloned().unwrap_or_default();
    let mut running = Requests::default();
    for c in containers("containers") {
        running.add(&container(&c));
    }
    let mut sidecars = Requests::default();
    let mut init = Requests::default();
    for c in containers("initContainers") {
        let r = container(&c);
        if c["restartPolicy"] == "Always" {
            sidecars.add(&r);
            running.add(&r);
            init.max(&sidecars);
        } else {
            let mut with_sidecars = r;
            with_sidecars.add(&sidecars);
            init.max(&with_sidecars);
        }
    }
    running.max(&init);
    running.tasks = 1;
    running.gpus = running
        .extended
        .iter()
        .filter(|(name, _)| name.ends_with("/gpu"))
        .fold(0u64, |sum, (_, n)| sum.saturating_add(*n));
    running
}

/// What one container requests.
fn container(c: &Value) -> Requests {
    let resources = &c["resources"];
    let mut named: BTreeMap<&str, &Value> = BTreeMap::new();
    for key in ["limits", "requests"] {
        // Requests last: a request wins over the limit it defaults from.
        for (name, q) in resources[key].as_object().into_iter().flatten() {
            named.insert(name, q);
        }
    }
    let mut out = Requests::default();
    for (name, q) in named {
        let Some(q) = amount(q) else { continue };
        match name {
            "cpu" => out.cpu_millicores = units(q, 1e3),
            "memory" => out.memory_bytes = units(q, 1.0),
            _ if is_extended(name) => {
                out.extended.insert(name.to_owned(), units(q, 1.0));
            }
            _ => {}
        }
    }
    out
}

fn amount(q: &Value) -> Option<f64> {
    match q {
        Value::String(s) => quantity::parse(s).ok(),
        Value::Number(n) => n.as_f64(),
        _ => None,
    }
}

/// An extended resource: a name with a domain outside `kubernetes.io`
/// (native resources are `cpu`, `memory`, `hugepages-2Mi`, or carry the
/// `kubernetes.io` domain).
fn is_extended(name: &str) -> bool {
    match name.split_once('/') {
        Some((domain, _)) => domain != "kubernetes.io" && !domain.ends_with(".kubernetes.io"),
        None => false,
    }
}

/// `q` times `scale` as a whole number, rounded up as Kubernetes rounds a
/// quantity to its unit (`0.0001` CPU is `1m`); the float's own error
/// (`0.1 × 1000 = 100.00000000000001`) is not a fraction to round up.
fn units(q: f64, scale: f64) -> u64 {
    let x = q * scale;
    if x.is_nan() || x <= 0.0 {
        return 0;
    }
    let nearest = x.round();
    let whole = if (x - nearest).abs() <= 1e-9 * nearest.max(1.0) {
        nearest
    } else {
        x.ceil()
    };
    // `as` saturates at u64::MAX, infinity included.
    whole as u64
}

/// CPU in cores (`24`, `13.5`), below one core in millicores (`250m`):
/// both are quantities Kubernetes reads, and the shorter to read.
pub fn cpu(millicores: u64) -> String {
    let (cores, milli) = (millicores / 1000, millicores % 1000);
    match (cores, milli) {
        (_, 0) => cores.to_string(),
        (0, _) => format!("{milli}m"),
        _ => format!("{cores}.{}", format!("{milli:03}").trim_end_matches('0')),
    }
}

const BINARY: [(&str, u64); 5] = [
    ("Ei", 1 << 60),
    ("Pi", 1 << 50),
    ("Ti", 1 << 40),
    ("Gi", 1 << 30),
    ("Mi", 1 << 20),
];
const DECIMAL: [(&str, u64); 5] = [
    ("E", 1_000_000_000_000_000_000),
    ("P", 1_000_000_000_000_000),
    ("T", 1_000_000_000_000),
    ("G", 1_000_000_000),
    ("M", 1_000_000),
];

/// Memory in the largest unit that divides it (`68Gi`, `1536Mi`, `2G`),
/// binary first; a sum of binary and decimal amounts that no unit of a
/// mebibyte or more divides is rounded to two decimals (`~2.86Gi`).
pub fn memory(bytes: u64) -> String {
    if bytes == 0 {
        return "0".to_owned();
    }
    for (suffix, unit) in BINARY.iter().chain(DECIMAL.iter()) {
        if bytes.is_multiple_of(*unit) {
            return format!("{}{suffix}", bytes / unit);
        }
    }
    match bytes {
        b if b < 1 << 10 => b.to_string(),
        b if b < 1 << 20 && b.is_multiple_of(1024) => format!("{}Ki", b / 1024),
        b if b < 1 << 20 => format!("~{:.2}Ki", b as f64 / 1024.0),
        b if b < 1 << 30 => format!("~{:.2}Mi", b as f64 / f64::from(1u32 << 20)),
        b => format!("~{:.2}Gi", b as f64 / f64::from(1u32 << 30)),
    }
}

/// A change of one amount, `4 → 8 (+4)`, or the amount when it stays.
fn change(before: u64, after: u64, show: fn(u64) -> String) -> String {
    if before == after {
        return show(after);
    }
    let delta = if after > before {
        format!("+{}", show(after - before))
    } else {
        format!("-{}", show(before - after))
    };
    format!("{} → {} ({delta})", show(before), show(after))
}

fn plain(n: u64) -> String {
    n.to_string()
}

/// The amounts of a cost, each as `before → after (delta)` without its
/// unit: tasks, GPUs, CPU, memory, and the other extended resources by
/// name (those either side requests).
pub struct Cells {
    pub tasks: String,
    pub gpus: String,
    pub cpu: String,
    pub memory: String,
    pub other: Vec<(String, String)>,
}

pub fn cells(c: &Cost) -> Cells {
    let (b, a) = (&c.before, &c.after);
    let mut names: Vec<&String> = b.extended.keys().chain(a.extended.keys()).collect();
    names.sort();
    names.dedup();
    let other = names
        .into_iter()
        .filter(|n| !n.ends_with("/gpu"))
        .map(|n| {
            let get = |r: &Requests| r.extended.get(n).copied().unwrap_or_default();
            (n.clone(), change(get(b), get(a), plain))
        })
        .collect();
    Cells {
        tasks: change(b.tasks, a.tasks, plain),
        gpus: change(b.gpus, a.gpus, plain),
        cpu: change(b.cpu_millicores, a.cpu_millicores, cpu),
        memory: change(b.memory_bytes, a.memory_bytes, memory),
        other,
    }
}

/// `4 → 8 tasks (+4), 4 → 8 GPUs (+4), 12 → 24 CPU (+12), 34Gi → 68Gi memory (+34Gi)`.
pub fn line(c: &Cost) -> String {
    let cells = cells(c);
    // The unit goes after the amounts and before the delta.
    let with_unit = |cell: &str, one: &str, many: &str, plural_of: u64| {
        let unit = if plural_of == 1 { one } else { many };
        match cell.split_once(" (") {
            Some((amounts, delta)) => format!("{amounts} {unit} ({delta}"),
            None => format!("{cell} {unit}"),
        }
    };
    let mut out = String::new();
    let _ = write!(
        out,
        "{}, {}, {}, {}",
        with_unit(
            &cells.tasks,
            "task",
            "tasks",
            c.after.tasks.max(c.before.tasks)
        ),
        with_unit(&cells.gpus, "GPU", "GPUs", c.after.gpus.max(c.before.gpus)),
        with_unit(&cells.cpu, "CPU", "CPU", 0),
        with_unit(&cells.memory, "memory", "memory", 0),
    );
    for (name, cell) in &cells.other {
        let _ = write!(out, ", {}", with_unit(cell, name, name, 0));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn container_with(requests: Value, limits: Value) -> Value {
        json!({"name": "c", "resources": {"requests": requests, "limits": limits}})
    }

    #[test]
    fn limits_stand_for_missing_requests() {
        let c = container_with(
            json!({"cpu": "4", "memory": "8Gi"}),
            json!({"memory": "16Gi", "nvidia.com/gpu": "2", "ephemeral-storage": "1Gi"}),
        );
        let r = pod(&json!({"containers": [c]}));
        assert_eq!(r.tasks, 1);
        assert_eq!(r.cpu_millicores, 4000);
        assert_eq!(r.memory_bytes, 8 << 30, "the request, not the limit");
        assert_eq!(r.gpus, 2);
        assert_eq!(r.extended, BTreeMap::from([("nvidia.com/gpu".into(), 2)]));
    }

    #[test]
    fn init_containers_count_as_kubernetes_counts_them() {
        let c = |cpu: &str| container_with(json!({"cpu": cpu}), json!({}));
        // Containers together: 1 + 1 = 2; the largest init container: 3.
        let r =
            pod(&json!({"containers": [c("1"), c("1")], "initContainers": [c("3"), c("500m")]}));
        assert_eq!(r.cpu_millicores, 3000);
        // A sidecar runs beside the containers and the init containers after it.
        let mut sidecar = c("1");
        sidecar["restartPolicy"] = json!("Always");
        let r = pod(&json!({"containers": [c("2")], "initContainers": [sidecar.clone()]}));
        assert_eq!(r.cpu_millicores, 3000);
        let r = pod(&json!({"containers": [c("1")], "initContainers": [sidecar, c("3")]}));
        assert_eq!(
            r.cpu_millicores, 4000,
            "the init container with the sidecar before it"
        );
    }

    #[test]
    fn gpus_are_extended_resources_named_gpu() {
        let c = container_with(
            json!({}),
            json!({"amd.com/gpu": "1", "gpu.intel.com/i915": "2", "hugepages-2Mi": "1Gi",
                   "kubernetes.io/thing": "1", "example.com/gpu": "3"}),
        );
        let r = pod(&json!({"containers": [c]}));
        assert_eq!(r.gpus, 4);
        assert_eq!(
            r.extended.keys().collect::<Vec<_>>(),
            ["amd.com/gpu", "example.com/gpu", "gpu.intel.com/i915"]
        );
    }

    fn with_pod(cpu: &str, gpu: u64) -> Value {
        json!({"spec": {"containers": [container_with(json!({"cpu": cpu, "memory": "2Gi"}), json!({"nvidia.com/gpu": gpu.to_string()}))]}})
    }

    #[test]
    fn every_target_counts_its_pods() {
        // kubernetes, TensorFlow: a Job per task.
        let job = json!({"kind": "Job", "spec": {"template": with_pod("4", 1)}});
        let r = of_run_object(&job);
        assert_eq!((r.tasks, r.gpus, r.cpu_millicores), (1, 1, 4000));
        // kubernetes, PyTorch: an Indexed Job of nodes.
        let indexed = json!({"kind": "Job", "spec": {"completions": 4, "parallelism": 4, "template": with_pod("8", 2)}});
        let r = of_run_object(&indexed);
        assert_eq!((r.tasks, r.gpus, r.memory_bytes), (4, 8, 8 << 30));
        let at_most = json!({"kind": "Job", "spec": {"completions": 2, "parallelism": 5, "template": with_pod("1", 0)}});
        assert_eq!(of_run_object(&at_most).tasks, 2);
        // jobset: replicated Jobs, replicas × parallelism.
        let jobset = json!({"kind": "JobSet", "spec": {"replicatedJobs": [
            {"name": "ps", "replicas": 2, "template": {"spec": {"template": with_pod("1", 0)}}},
            {"name": "worker", "replicas": 1, "template": {"spec": {"parallelism": 3, "completions": 3, "template": with_pod("4", 1)}}},
        ]}});
        let r = of_run_object(&jobset);
        assert_eq!((r.tasks, r.gpus, r.cpu_millicores), (5, 3, 14000));
        // tfjob and pytorchjob: replica specs, 1 when unset.
        let tfjob = json!({"kind": "TFJob", "spec": {"tfReplicaSpecs": {
            "Chief": {"template": with_pod("1", 0)},
            "Worker": {"replicas": 3, "template": with_pod("500m", 1)},
        }}});
        let r = of_run_object(&tfjob);
        assert_eq!((r.tasks, r.gpus, r.cpu_millicores), (4, 3, 2500));
        let pytorchjob = json!({"kind": "PyTorchJob", "spec": {"pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "template": with_pod("8", 8)},
            "Worker": {"replicas": 3, "template": with_pod("8", 8)},
        }}});
        let r = of_run_object(&pytorchjob);
        assert_eq!((r.tasks, r.gpus, r.memory_bytes), (4, 32, 8 << 30));
        // A TrainJob: `numNodes` pods of `resourcesPerNode`, a request
        // defaulting from its limit as in a pod.
        let trainjob = json!({"kind": "TrainJob", "spec": {"trainer": {
            "numNodes": 3,
            "resourcesPerNode": {"limits": {"cpu": "4", "nvidia.com/gpu": "2"}, "requests": {"memory": "1Gi"}},
        }}});
        let r = of_run_object(&trainjob);
        assert_eq!(
            (r.tasks, r.gpus, r.cpu_millicores, r.memory_bytes),
            (3, 6, 12_000, 3 << 30)
        );
        // Its runtime holds the pods' template, not what they request.
        let runtime = json!({"kind": "TrainingRuntime", "spec": {}});
        assert_eq!(of_run_object(&runtime), Requests::default());
        // Anything else costs nothing here.
        let deployment =
            json!({"kind": "Deployment", "spec": {"replicas": 1, "template": with_pod("1", 0)}});
        assert_eq!(of_run_object(&deployment), Requests::default());
    }

    #[test]
    fn quantities_round_as_kubernetes_rounds() {
        assert_eq!(units(quantity::parse("100m").unwrap(), 1e3), 100);
        assert_eq!(units(quantity::parse("0.1").unwrap(), 1e3), 100);
        assert_eq!(units(quantity::parse("0.0001").unwrap(), 1e3), 1);
        assert_eq!(units(quantity::parse("1.5Gi").unwrap(), 1.0), 3 << 29);
        assert_eq!(units(quantity::parse("-1").unwrap(), 1.0), 0);
        assert_eq!(units(f64::INFINITY, 1.0), u64::MAX);
        assert_eq!(units(f64::NAN, 1.0), 0);
        // Bad or missing values count as nothing.
        let c = container_with(json!({"cpu": "lots", "memory": ["8Gi"]}), json!({}));
        assert_eq!(container(&c), Requests::default());
    }

    #[test]
    fn amounts_print_in_kubernetes_units() {
        assert_eq!(cpu(24000), "24");
        assert_eq!(cpu(1500), "1.5");
        assert_eq!(cpu(13_505), "13.505");
        assert_eq!(cpu(250), "250m");
        assert_eq!(cpu(0), "0");
        assert_eq!(memory(68 << 30), "68Gi");
        assert_eq!(memory(1536 << 20), "1536Mi");
        assert_eq!(memory(2 << 40), "2Ti");
        assert_eq!(memory(2_000_000_000), "2G");
        assert_eq!(memory((1 << 30) + 2_000_000_000), "~2.86Gi");
        assert_eq!(memory(512), "512");
        assert_eq!(memory(0), "0");
    }

    #[test]
    fn a_line_says_before_after_and_the_difference() {
        let r = |tasks, gpus, cpu, mem: u64| Requests {
            tasks,
            gpus,
            cpu_millicores: cpu,
            memory_bytes: mem,
            extended: BTreeMap::new(),
        };
        let c = Cost {
            before: r(4, 4, 12000, 34 << 30),
            after: r(8, 8, 24000, 68 << 30),
        };
        assert_eq!(
            line(&c),
            "4 → 8 tasks (+4), 4 → 8 GPUs (+4), 12 → 24 CPU (+12), 34Gi → 68Gi memory (+34Gi)"
        );
        let c = Cost {
            before: r(2, 1, 1500, 3 << 30),
            after: r(1, 1, 1000, 3 << 30),
        };
        assert_eq!(
            line(&c),
            "2 → 1 tasks (-1), 1 GPU, 1.5 → 1 CPU (-500m), 3Gi memory"
        );
        let mut other = Cost {
            after: r(1, 0, 0, 0),
            ..Cost::default()
        };
        other.after.extended.insert("gpu.intel.com/i915".into(), 2);
        assert_eq!(
            line(&other),
            "0 → 1 task (+1), 0 GPUs, 0 CPU, 0 memory, 0 → 2 gpu.intel.com/i915 (+2)"
        );
        let mut total = c.clone();
        total.add(&other);
        assert_eq!(total.after.tasks, 2);
        assert_eq!(total.after.extended["gpu.intel.com/i915"], 2);
    }
}
