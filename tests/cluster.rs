//! trainc's output on a real control plane: a Kubernetes 1.34 API server
//! with the PodSecurity admission plugin, the controller manager (Job,
//! EndpointSlice, garbage collector and PersistentVolume controllers), the
//! scheduler, kwok's fake nodes, and the JobSet controller and Kubeflow
//! training-operator, all built from source and started by
//! `tests/cluster/cluster.sh` (docs/development.md, "The cluster tests").
//! Nothing here re-implements a controller: every behaviour asserted is
//! what the real components did with what `trainc build` wrote, applied
//! as a user would (`kubectl apply --server-side -k`).
//!
//! kwok plays each pod: it runs, then succeeds; a pod labelled
//! `trainc.test/outcome: fail` fails, one labelled `running` keeps running
//! (tests/cluster/kwok/kwok.yaml). The tests set those labels by editing
//! the generated files, never by changing trainc.
//!
//! `tests/run.sh` starts the cluster once and sets
//! `TRAINC_CLUSTER_KUBECONFIG`; without it the tests are skipped (failed
//! under `TRAINC_REQUIRE_TOOLS`). Each test works in namespaces of its own.

mod common;
#[path = "common/health.rs"]
mod health;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::{run, scratch_example, stderr};
use serde_json::Value;

/// The control plane `tests/run.sh` started, and the kubectl to reach it.
struct Cluster {
    kubectl: PathBuf,
    kubeconfig: PathBuf,
}

/// The cluster, or `None` (skip) when none was started outside CI.
fn cluster() -> Option<Cluster> {
    let kubeconfig = std::env::var_os("TRAINC_CLUSTER_KUBECONFIG").map(PathBuf::from);
    let kubectl = common::tool("TRAINC_KUBECTL", "kubectl");
    match (kubeconfig, kubectl) {
        (Some(kubeconfig), Some(kubectl)) if kubeconfig.is_file() => Some(Cluster {
            kubectl,
            kubeconfig,
        }),
        _ => {
            assert!(
                std::env::var_os("TRAINC_REQUIRE_TOOLS").is_none(),
                "the cluster tests need a control plane: `bash tests/cluster/test.sh`, or `bash tests/run.sh`, starts one"
            );
            eprintln!("skipping: no control plane (TRAINC_CLUSTER_KUBECONFIG is not set)");
            None
        }
    }
}

/// How long a controller may take to do what a test waits for: far more
/// than it needs on an idle machine (seconds), for a loaded CI runner.
const PATIENCE: Duration = Duration::from_secs(180);

impl Cluster {
    fn kubectl(&self, args: &[&str]) -> Output {
        Command::new(&self.kubectl)
            .env("KUBECONFIG", &self.kubeconfig)
            .args(args)
            .output()
            .expect("kubectl runs")
    }

    /// `kubectl ARGS`, which must succeed; its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let o = self.kubectl(args);
        assert!(o.status.success(), "kubectl {args:?}: {}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// `kubectl get ARGS -o json`.
    fn get(&self, args: &[&str]) -> Value {
        let mut all = vec!["get"];
        all.extend(args);
        all.extend(["-o", "json"]);
        serde_json::from_str(&self.ok(&all)).expect("JSON from kubectl")
    }

    /// A new namespace `<base>-<process id>` (a run of the tests may
    /// follow another on the same cluster) that enforces (and warns and
    /// audits) the `restricted` Pod Security profile, as docs/output.md
    /// recommends.
    fn restricted_namespace(&self, base: &str) -> String {
        let name = format!("{base}-{}", std::process::id());
        self.ok(&["create", "namespace", &name]);
        self.ok(&[
            "label",
            "namespace",
            &name,
            "pod-security.kubernetes.io/enforce=restricted",
            "pod-security.kubernetes.io/warn=restricted",
            "pod-security.kubernetes.io/audit=restricted",
        ]);
        name
    }

    /// Waits until `probe` gives a value; panics with `what` and the last
    /// state `describe` gives after [`PATIENCE`].
    fn wait<T>(
        &self,
        what: &str,
        mut probe: impl FnMut() -> Option<T>,
        describe: impl Fn() -> String,
    ) -> T {
        let start = Instant::now();
        loop {
            if let Some(v) = probe() {
                return v;
            }
            assert!(
                start.elapsed() < PATIENCE,
                "timed out waiting for {what}:\n{}",
                describe()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// Everything of the namespace a failure message should show.
    fn state(&self, ns: &str) -> String {
        let get = self.kubectl(&[
            "get",
            "-n",
            ns,
            "trainjobs,jobsets,tfjobs,pytorchjobs,jobs,pods,pvc,pv",
            "-o",
            "wide",
        ]);
        let events = self.kubectl(&["get", "events", "-n", ns, "--sort-by=.lastTimestamp"]);
        format!(
            "{}{}\n{}",
            String::from_utf8_lossy(&get.stdout),
            stderr(&get),
            String::from_utf8_lossy(&events.stdout)
        )
    }

    /// Applies an output directory as a user would, with server-side
    /// apply: it must succeed with no warning (a warning from the
    /// PodSecurity `warn` label would say a pod will be refused).
    fn apply(&self, deploy: &Path) {
        let o = self.kubectl(&[
            "apply",
            "--server-side",
            "-k",
            deploy.to_str().expect("UTF-8"),
        ]);
        assert!(o.status.success(), "apply: {}", stderr(&o));
        // kubectl always asks kustomize for its `legacy` order, and says
        // so where a kustomization orders its kinds itself (trainc's do
        // where a TrainingRuntime must come before its TrainJob): not a
        // warning about an object.
        let err = stderr(&o);
        let warned: Vec<&str> = err
            .lines()
            .filter(|l| l.contains("Warning"))
            .filter(|l| !l.contains("Sorting order is set both in 'kustomization.yaml'"))
            .collect();
        assert!(warned.is_empty(), "apply warned:\n{err}");
    }

    /// Pods a controller tried to create and the API server refused,
    /// from the namespace's events (`FailedCreate`, `FailedCreatePod`).
    fn refused_pods(&self, ns: &str) -> Vec<String> {
        let events = self.get(&["events", "-n", ns]);
        events["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| {
                e["reason"]
                    .as_str()
                    .is_some_and(|r| r.starts_with("FailedCreate"))
            })
            .map(|e| e["message"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// Every pod a controller tried to create in `ns` was admitted.
    fn assert_admitted(&self, ns: &str) {
        assert_eq!(
            self.refused_pods(ns),
            Vec::<String>::new(),
            "{}",
            self.state(ns)
        );
    }

    /// The condition `kind` of the run object, when it is `True`.
    fn condition(&self, ns: &str, resource: &str, name: &str, kind: &str) -> Option<Value> {
        let o = self.get(&["-n", ns, resource, name]);
        o["status"]["conditions"]
            .as_array()?
            .iter()
            .any(|c| c["type"] == kind && c["status"] == "True")
            .then_some(o)
    }

    /// The pods of a role of a job that are still running.
    fn running(&self, ns: &str, role: &str) -> usize {
        let pods = self.get(&[
            "pods",
            "-n",
            ns,
            "-l",
            &format!("trainc.dev/role={role}"),
            "--field-selector",
            "status.phase=Running",
        ]);
        pods["items"].as_array().map_or(0, Vec::len)
    }

    /// The pods of a role that are alive (not being deleted): each one's
    /// UID, phase and the restarts of its containers.
    fn pods_of(&self, ns: &str, role: &str) -> Vec<(String, String, u64)> {
        let pods = self.get(&["pods", "-n", ns, "-l", &format!("trainc.dev/role={role}")]);
        pods["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
            .map(|p| {
                let restarts = p["status"]["containerStatuses"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|s| s["restartCount"].as_u64())
                    .sum();
                (
                    p["metadata"]["uid"].as_str().unwrap_or_default().to_owned(),
                    p["status"]["phase"].as_str().unwrap_or_default().to_owned(),
                    restarts,
                )
            })
            .collect()
    }

    /// A PersistentVolume for the dynamically provisioned claim `claim` of
    /// namespace `ns`, which no provisioner here would make: the test
    /// stands in for the storage class, not for a controller; the
    /// PersistentVolume controller binds them. Its access modes are the
    /// claim's (`ReadWriteMany`), as a provisioner makes them: the
    /// controller looks for a claim's volume among those with the fewest
    /// modes first, so a volume with more would lose the claim to any
    /// unreserved `ReadWriteMany` volume another test has out at the
    /// time (the upgrade test's, whose claim it then took).
    fn provision(&self, ns: &str, claim: &str) {
        let pv = serde_json::json!({
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": format!("{ns}-{claim}")},
            "spec": {
                "capacity": {"storage": "100Gi"},
                "accessModes": ["ReadWriteMany"],
                "storageClassName": "",
                "claimRef": {"namespace": ns, "name": claim},
                "nfs": {"server": "nas.example.com", "path": "/data"},
            },
        });
        let file = tempfile::NamedTempFile::new().expect("temp file");
        fs::write(file.path(), pv.to_string()).expect("write");
        self.ok(&["apply", "-f", file.path().to_str().expect("UTF-8")]);
    }
}

/// An example, moved to namespace `ns` and built for `target`: the
/// project directory, with the output in `deploy/`.
fn built(example: &str, target: &str, ns: &str) -> tempfile::TempDir {
    let dir = scratch_example(example);
    for file in ["trainc.yaml".to_owned()].into_iter().chain(
        fs::read_dir(dir.path().join("jobs"))
            .expect("jobs")
            .map(|e| format!("jobs/{}", e.expect("entry").file_name().to_string_lossy())),
    ) {
        let path = dir.path().join(&file);
        let text = fs::read_to_string(&path).expect("read");
        let text = text.replace("namespace: ml", &format!("namespace: {ns}"));
        let text = if file == "trainc.yaml" {
            // The project's own target, if it has one, gives way.
            let own: String = text
                .lines()
                .filter(|l| !l.starts_with("  target: "))
                .map(|l| format!("{l}\n"))
                .collect();
            own.replace("defaults:\n", &format!("defaults:\n  target: {target}\n"))
        } else {
            text
        };
        fs::write(&path, text).expect("write");
    }
    let o = run(dir.path(), &["build"]);
    assert!(o.status.success(), "build: {}", stderr(&o));
    dir
}

/// Sets what kwok does with the pods of `role`: edits every generated file
/// so that each object and pod template labelled with the role carries
/// `trainc.test/outcome: OUTCOME` too.
fn outcome(deploy: &Path, role: &str, outcome: &str) {
    label_role(deploy, role, "trainc.test/outcome", outcome);
}

/// Adds the label `key: value` beside `trainc.dev/role: ROLE` in every
/// generated file: to the role's objects and pod templates.
fn label_role(deploy: &Path, role: &str, key: &str, value: &str) {
    let marker = format!("trainc.dev/role: {role}");
    for e in walkdir::WalkDir::new(deploy) {
        let e = e.expect("walk");
        if !e.file_type().is_file() {
            continue;
        }
        let text = fs::read_to_string(e.path()).expect("read");
        if !text.contains(&marker) {
            continue;
        }
        let mut out = String::new();
        for line in text.lines() {
            out.push_str(line);
            out.push('\n');
            if line.trim() == marker {
                let indent = &line[..line.len() - line.trim_start().len()];
                out.push_str(&format!("{indent}{key}: \"{value}\"\n"));
            }
        }
        fs::write(e.path(), out).expect("write");
    }
}

/// The one generated file below `deploy` whose name starts with `prefix`.
fn generated_file(deploy: &Path, prefix: &str) -> std::path::PathBuf {
    let found: Vec<_> = walkdir::WalkDir::new(deploy)
        .into_iter()
        .map(|e| e.expect("walk").into_path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
        })
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one {prefix}… in {}: {found:?}",
        deploy.display()
    );
    found.into_iter().next().expect("one")
}

/// The run object's name: the one object of `resource` in the namespace.
fn run_name(cluster: &Cluster, ns: &str, resource: &str) -> String {
    let list = cluster.get(&[
        "-n",
        ns,
        resource,
        "-l",
        "app.kubernetes.io/managed-by=trainc",
    ]);
    let items = list["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "one {resource} in {ns}");
    items[0]["metadata"]["name"]
        .as_str()
        .expect("name")
        .to_owned()
}

/// What the health checks of docs/gitops/ say of a live run object:
/// Argo CD's status and Flux's.
fn health_of(obj: &Value) -> (String, String) {
    let (argo, message) = health::argo(obj).expect("the Argo CD script runs");
    let (flux, error) = health::flux(obj);
    assert_eq!(error, None, "the Flux check evaluates: {message}");
    (argo, flux)
}

/// Argo CD and Flux both call the live run object healthy.
fn assert_healthy(live: &Value) {
    assert_eq!(
        health_of(live),
        ("Healthy".to_owned(), "Current".to_owned()),
        "{live}"
    );
}

/// On `jobset` and `tfjob` a TensorFlow run ends when its chief does: the
/// run object reaches its success condition, the parameter servers, which
/// never end by themselves, are stopped, and the health checks of
/// docs/gitops/ say Healthy (Argo CD) and Current (Flux) of the live
/// object. Every pod is admitted in a namespace that enforces `restricted`.
#[test]
fn tensorflow_runs_end_with_their_chief() {
    let Some(c) = cluster() else { return };
    for (target, resource, done) in [
        ("jobset", "jobsets.jobset.x-k8s.io", "Completed"),
        ("tfjob", "tfjobs.kubeflow.org", "Succeeded"),
    ] {
        let ns = c.restricted_namespace(&format!("tf-{target}"));
        let dir = built("mnist", target, &ns);
        let deploy = dir.path().join("deploy");
        ends_and_stops_its_parameter_servers(&c, &ns, &deploy, resource, done);
    }
}

/// With parameter servers that never exit, the run in `deploy` applied
/// reaches `done`, the health checks call it healthy, its parameter
/// servers are stopped, and every pod was admitted.
fn ends_and_stops_its_parameter_servers(
    c: &Cluster,
    ns: &str,
    deploy: &Path,
    resource: &str,
    done: &str,
) {
    outcome(deploy, "ps", "running");
    c.apply(deploy);
    let name = run_name(c, ns, resource);
    let live = c.wait(
        &format!("{resource} {ns}/{name} to be {done}"),
        || c.condition(ns, resource, &name, done),
        || c.state(ns),
    );
    assert_healthy(&live);
    c.wait(
        &format!("the parameter servers of {ns}/{name} to stop"),
        || (c.running(ns, "ps") == 0).then_some(()),
        || c.state(ns),
    );
    c.assert_admitted(ns);
}

/// Trainer (and Kueue, which manages TrainJobs here) refuses a TrainJob
/// whose runtime does not exist yet, and kustomize's own order puts
/// `TrainJob` before `TrainingRuntime`: the output's kustomizations order
/// the runtime first, so one `kubectl apply -k` on a fresh namespace
/// creates both. Without that order the same apply is refused, by
/// whichever of the two webhooks answers first. (Each case has a namespace
/// of its own: a refused apply still creates the objects after the
/// refused one, the runtime among them.)
#[test]
fn a_trainjob_run_applies_in_one_go_its_runtime_first() {
    let Some(c) = cluster() else { return };
    let ns = c.restricted_namespace("trainjob-order");
    c.provision(&ns, "digits-data");
    let dir = built("pytorch", "trainjob", &ns);
    c.apply(&dir.path().join("deploy"));
    run_name(&c, &ns, "trainjobs.trainer.kubeflow.org");

    let ns = c.restricted_namespace("trainjob-unordered");
    c.provision(&ns, "digits-data");
    let dir = built("pytorch", "trainjob", &ns);
    let unordered = tempfile::tempdir().expect("tempdir");
    common::copy_tree(&dir.path().join("deploy"), unordered.path());
    for e in walkdir::WalkDir::new(unordered.path()) {
        let path = e.expect("walk").into_path();
        if path.file_name().is_some_and(|n| n == "kustomization.yaml") {
            let text = fs::read_to_string(&path).expect("read");
            let at = text
                .find("sortOptions:")
                .expect("trainc orders this output");
            fs::write(&path, &text[..at]).expect("write");
        }
    }
    let o = c.kubectl(&[
        "apply",
        "--server-side",
        "-k",
        unordered.path().to_str().expect("UTF-8"),
    ]);
    assert!(!o.status.success(), "applied without its order");
    let err = stderr(&o);
    let trainer = "specified trainingRuntime must be created before the TrainJob is created";
    let kueue = [
        "vtrainjob.kb.io",
        "denied the request: runtime '",
        "' not found",
    ];
    assert!(
        err.contains(trainer) || kueue.iter().all(|part| err.contains(part)),
        "{err}"
    );
}

/// The bundled mnist-cpu example (TensorFlow 1: parameter servers that
/// never exit, workers, no chief) ends on its own target: the JobSet
/// succeeds when every worker has, stops the parameter servers, and the
/// health checks say Healthy and Current. (On `kubernetes` it would not:
/// see the next test.)
#[test]
fn the_mnist_cpu_example_ends_on_its_own_target() {
    let Some(c) = cluster() else { return };
    let project = fs::read_to_string(common::example("mnist-cpu").join("trainc.yaml"))
        .expect("read the example's project file");
    assert!(project.contains("\n  target: jobset\n"), "{project}");
    let ns = c.restricted_namespace("mnist-cpu");
    c.provision(&ns, "mnist-cpu-data");
    let dir = built("mnist-cpu", "jobset", &ns);
    let deploy = dir.path().join("deploy");
    ends_and_stops_its_parameter_servers(&c, &ns, &deploy, "jobsets.jobset.x-k8s.io", "Completed");
}

/// On `kubernetes` a run is plain Jobs, as docs/output.md says: the chief
/// and workers complete, and the parameter servers, which TensorFlow never
/// ends, keep running until someone deletes them.
#[test]
fn on_plain_jobs_parameter_servers_keep_running() {
    let Some(c) = cluster() else { return };
    let ns = &c.restricted_namespace("tf-kubernetes");
    let dir = built("mnist", "kubernetes", ns);
    let deploy = dir.path().join("deploy");
    outcome(&deploy, "ps", "running");
    c.apply(&deploy);
    let complete = |role: &str| {
        let jobs = c.get(&["jobs", "-n", ns, "-l", &format!("trainc.dev/role={role}")]);
        let items = jobs["items"].as_array().cloned().unwrap_or_default();
        !items.is_empty()
            && items.iter().all(|j| {
                j["status"]["conditions"].as_array().is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c["type"] == "Complete" && c["status"] == "True")
                })
            })
    };
    c.wait(
        "the chief's and the workers' Jobs to complete",
        || (complete("chief") && complete("worker")).then_some(()),
        || c.state(ns),
    );
    assert_eq!(c.running(ns, "ps"), 2, "{}", c.state(ns));
    c.assert_admitted(ns);
}

/// A PyTorch run (static rendezvous at node 0) ends when every node has,
/// on every target. On `pytorchjob` every pod is admitted under
/// `restricted`: the PyTorchJob has no `Master`, so the operator adds no
/// `init-pytorch` container (which sets no security context, and which the
/// API server refused here while trainc wrote a `Master`).
#[test]
fn pytorch_runs_end_when_every_node_has() {
    let Some(c) = cluster() else { return };
    for (target, resource, done) in [
        ("kubernetes", "jobs", "Complete"),
        ("jobset", "jobsets.jobset.x-k8s.io", "Completed"),
        ("pytorchjob", "pytorchjobs.kubeflow.org", "Succeeded"),
        ("trainjob", "trainjobs.trainer.kubeflow.org", "Complete"),
    ] {
        let ns = c.restricted_namespace(&format!("pt-{target}"));
        c.provision(&ns, "digits-data");
        let dir = built("pytorch", target, &ns);
        c.apply(&dir.path().join("deploy"));
        let name = run_name(&c, &ns, resource);
        let live = c.wait(
            &format!("{resource} {ns}/{name} to be {done}"),
            || c.condition(&ns, resource, &name, done),
            || c.state(&ns),
        );
        if target != "kubernetes" {
            assert_healthy(&live);
        }
        c.assert_admitted(&ns);
    }
}

/// The names every task is told (TF_CONFIG's cluster, `--ps_hosts` and
/// the rest, from the cluster-spec ConfigMap) exist: each
/// `<host>.<service>.<namespace>.svc` is an endpoint with that host name in
/// the EndpointSlices of the run's headless Service, made by the real
/// EndpointSlice controller from the pods kwok gave addresses.
#[test]
fn the_cluster_spec_names_resolve_to_the_run_s_pods() {
    let Some(c) = cluster() else { return };
    for target in ["kubernetes", "jobset", "tfjob"] {
        let ns = c.restricted_namespace(&format!("dns-{target}"));
        let dir = built("mnist", target, &ns);
        let deploy = dir.path().join("deploy");
        for role in ["chief", "ps", "worker"] {
            outcome(&deploy, role, "running");
        }
        c.apply(&deploy);
        let spec = c.get(&[
            "configmaps",
            "-n",
            &ns,
            "-l",
            "app.kubernetes.io/component=cluster-spec",
        ]);
        let cluster_json = spec["items"][0]["data"]["cluster.json"]
            .as_str()
            .expect("cluster.json");
        let hosts: Vec<String> = serde_json::from_str::<Value>(cluster_json)
            .expect("JSON")
            .as_object()
            .expect("roles")
            .values()
            .flat_map(|v| v.as_array().cloned().unwrap_or_default())
            .map(|h| h.as_str().expect("host").to_owned())
            .collect();
        assert_eq!(hosts.len(), 5, "{hosts:?}");
        // TF_CONFIG, as each task's container gets it (written by trainc, or
        // on `tfjob` injected by the operator), lists the same hosts.
        let from_tf_config = c.wait(
            &format!("the tasks of {ns} to start"),
            || {
                let pods = c.get(&["pods", "-n", &ns, "-l", "trainc.dev/role"]);
                let mut seen = std::collections::BTreeSet::new();
                let mut tasks = 0;
                for pod in pods["items"].as_array()? {
                    let env = pod["spec"]["containers"][0]["env"].as_array()?;
                    // TensorBoard's pod has none.
                    let Some(tf_config) = env.iter().find(|e| e["name"] == "TF_CONFIG") else {
                        continue;
                    };
                    // On `jobset` the task's own index is a variable the
                    // kubelet expands; the cluster is the same for every
                    // index.
                    let text = tf_config["value"]
                        .as_str()
                        .expect("TF_CONFIG is a value")
                        .replace("$(TRAINC_TASK_INDEX)", "0");
                    let tf_config: Value = serde_json::from_str(&text).expect("TF_CONFIG is JSON");
                    tasks += 1;
                    for role in tf_config["cluster"].as_object()?.values() {
                        seen.extend(
                            role.as_array()?
                                .iter()
                                .filter_map(|h| h.as_str().map(str::to_owned)),
                        );
                    }
                }
                (tasks == 5).then_some(seen)
            },
            || c.state(&ns),
        );
        let hosts_set: std::collections::BTreeSet<String> = hosts.iter().cloned().collect();
        assert_eq!(
            from_tf_config, hosts_set,
            "{target}: TF_CONFIG and the cluster spec"
        );
        for host in &hosts {
            let name = host.split(':').next().expect("name");
            c.wait(
                &format!("{name} among the endpoints of its Service"),
                || resolves(&c, &ns, name).then_some(()),
                || c.state(&ns),
            );
        }
    }
}

/// A failed worker restarts the whole JobSet run (`failurePolicy`, up to
/// `runPolicy.backoffLimit` times), each attempt starting only once the
/// previous one's pods are gone (`BlockingRecreate`); then the run fails,
/// and the health checks say Degraded (Argo CD) and Failed (Flux). For
/// TensorFlow and PyTorch alike.
///
/// On `trainjob` the same JobSet, made by Kubeflow Trainer from the run's
/// own TrainingRuntime, restarts the run as a whole; the TrainJob then
/// fails, and the health checks say so of it.
#[test]
fn a_failed_worker_restarts_the_jobset_run_then_fails_it() {
    let Some(c) = cluster() else { return };
    for (example, target) in [
        ("mnist", "jobset"),
        ("pytorch", "jobset"),
        ("pytorch", "trainjob"),
    ] {
        a_failed_worker_restarts_the_jobset_run(&c, example, target);
    }
}

fn a_failed_worker_restarts_the_jobset_run(c: &Cluster, example: &str, target: &str) {
    let ns = &c.restricted_namespace(&format!("fail-{target}-{example}"));
    if example == "pytorch" {
        c.provision(ns, "digits-data");
    }
    let dir = built(example, target, ns);
    let deploy = dir.path().join("deploy");
    // The chief works on while a worker fails: the run cannot succeed.
    outcome(&deploy, "chief", "running");
    outcome(&deploy, "ps", "running");
    outcome(&deploy, "worker", "fail");
    c.apply(&deploy);
    let name = run_name(c, ns, "jobsets.jobset.x-k8s.io");
    let mut attempts = std::collections::BTreeSet::new();
    let failed = c.wait(
        &format!("JobSet {ns}/{name} to fail"),
        || {
            // Every pod still alive belongs to one attempt.
            let pods = c.get(&[
                "pods",
                "-n",
                ns,
                "-l",
                &format!("jobset.sigs.k8s.io/jobset-name={name}"),
            ]);
            let alive: std::collections::BTreeSet<String> = pods["items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| matches!(p["status"]["phase"].as_str(), Some("Running" | "Pending")))
                .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
                .filter_map(|p| {
                    p["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"]
                        .as_str()
                        .map(str::to_owned)
                })
                .collect();
            assert!(
                alive.len() <= 1,
                "pods of attempts {alive:?} alive together:\n{}",
                c.state(ns)
            );
            attempts.extend(alive);
            c.condition(ns, "jobsets.jobset.x-k8s.io", &name, "Failed")
        },
        || c.state(ns),
    );
    assert_eq!(
        failed["status"]["restarts"], 3,
        "maxRestarts is the example's backoffLimit: {failed}"
    );
    assert!(attempts.len() >= 2, "attempts seen: {attempts:?}");
    let failed = if target == "trainjob" {
        let resource = "trainjobs.trainer.kubeflow.org";
        c.wait(
            &format!("TrainJob {ns}/{name} to fail"),
            || c.condition(ns, resource, &name, "Failed"),
            || c.state(ns),
        )
    } else {
        failed
    };
    assert_eq!(
        health_of(&failed),
        ("Degraded".to_owned(), "Failed".to_owned()),
        "{failed}"
    );
    c.assert_admitted(ns);
}

/// A failed TensorFlow task restarts in place and alone, as docs/output.md
/// says of `kubernetes` and `tfjob` (`restartPolicy: OnFailure`): the
/// worker's container restarts in the same pod while the chief and the
/// parameter servers keep theirs. Past `backoffLimit` restarts, on
/// `kubernetes` the worker's Job fails alone and the others go on; on
/// `tfjob` the TFJob fails, its running pods are deleted (`cleanPodPolicy:
/// Running`), and the health checks say Degraded and Failed.
#[test]
fn a_failed_tensorflow_task_restarts_alone_then_fails() {
    let Some(c) = cluster() else { return };
    for target in ["kubernetes", "tfjob"] {
        let ns = &c.restricted_namespace(&format!("restart-{target}"));
        let dir = built("mnist", target, ns);
        let deploy = dir.path().join("deploy");
        outcome(&deploy, "chief", "running");
        outcome(&deploy, "ps", "running");
        outcome(&deploy, "worker", "fail");
        // Slow enough for the test to see a worker between restarts.
        label_role(&deploy, "worker", "trainc.test/run-for", "3s");
        c.apply(&deploy);
        let others = || {
            let mut uids: Vec<String> = ["chief", "ps"]
                .iter()
                .flat_map(|role| c.pods_of(ns, role))
                .filter(|(_, phase, _)| phase == "Running")
                .map(|(uid, _, _)| uid)
                .collect();
            uids.sort();
            uids
        };
        let before = c.wait(
            &format!("the chief and the parameter servers of {ns} to run"),
            || Some(others()).filter(|u| u.len() == 3),
            || c.state(ns),
        );
        // A worker's container restarts in its own pod, which keeps running.
        c.wait(
            &format!("a worker of {ns} to restart in place"),
            || {
                c.pods_of(ns, "worker")
                    .iter()
                    .any(|(_, phase, restarts)| phase == "Running" && *restarts > 0)
                    .then_some(())
            },
            || c.state(ns),
        );
        if target == "kubernetes" {
            let failed = |j: &Value| {
                j["status"]["conditions"].as_array().is_some_and(|cs| {
                    cs.iter().any(|c| {
                        c["type"] == "Failed"
                            && c["status"] == "True"
                            && c["reason"] == "BackoffLimitExceeded"
                    })
                })
            };
            c.wait(
                &format!("the workers' Jobs of {ns} to fail"),
                || {
                    let jobs = c.get(&["jobs", "-n", ns, "-l", "trainc.dev/role=worker"]);
                    let items = jobs["items"].as_array()?;
                    (items.len() == 2 && items.iter().all(failed)).then_some(())
                },
                || c.state(ns),
            );
            assert_eq!(
                others(),
                before,
                "the chief and the parameter servers go on in their pods\n{}",
                c.state(ns)
            );
        } else {
            let resource = "tfjobs.kubeflow.org";
            let name = run_name(&c, ns, resource);
            // The chief and the parameter servers were never re-created
            // (once the run has failed, the operator deletes them).
            let now = others();
            assert!(
                now.iter().all(|uid| before.contains(uid)),
                "{before:?} → {now:?}\n{}",
                c.state(ns)
            );
            let failed = c.wait(
                &format!("TFJob {ns}/{name} to fail"),
                || c.condition(ns, resource, &name, "Failed"),
                || c.state(ns),
            );
            assert_eq!(
                health_of(&failed),
                ("Degraded".to_owned(), "Failed".to_owned()),
                "{failed}"
            );
            c.wait(
                &format!("the running pods of {ns} to be deleted"),
                || {
                    ["chief", "ps", "worker"]
                        .iter()
                        .all(|role| c.pods_of(ns, role).is_empty())
                        .then_some(())
                },
                || c.state(ns),
            );
        }
        c.assert_admitted(ns);
    }
}

/// A failed PyTorch node fails the run at once where nothing restarts a
/// static rendezvous as a whole (docs/pytorch.md): on `kubernetes` the
/// Indexed Job fails (`podFailurePolicy` `FailJob`, no retry), on
/// `pytorchjob` the PyTorchJob fails (`restartPolicy: Never`, `backoffLimit:
/// 0`) and the health checks say Degraded and Failed.
#[test]
fn a_failed_pytorch_node_fails_the_run() {
    let Some(c) = cluster() else { return };
    for (target, resource) in [
        ("kubernetes", "jobs"),
        ("pytorchjob", "pytorchjobs.kubeflow.org"),
    ] {
        let ns = &c.restricted_namespace(&format!("pt-fail-{target}"));
        c.provision(ns, "digits-data");
        let dir = built("pytorch", target, ns);
        let deploy = dir.path().join("deploy");
        outcome(&deploy, "worker", "fail");
        c.apply(&deploy);
        let name = run_name(&c, ns, resource);
        let failed = c.wait(
            &format!("{resource} {ns}/{name} to fail"),
            || c.condition(ns, resource, &name, "Failed"),
            || c.state(ns),
        );
        // Not `BackoffLimitExceeded`: no node was retried.
        assert_run_failed(target, &failed, "PodFailurePolicy");
        c.assert_admitted(ns);
    }
}

/// The Running pods of an elastic run's nodes, once all three are, with
/// the rendezvous endpoint their `torchrun` is given.
fn elastic_nodes(c: &Cluster, ns: &str) -> (Vec<Value>, String) {
    c.wait(
        &format!("the three nodes of {ns} to run"),
        || {
            let pods = c.get(&["pods", "-n", ns, "-l", "trainc.dev/role=worker"]);
            let pods: Vec<Value> = pods["items"]
                .as_array()?
                .iter()
                .filter(|p| p["status"]["phase"] == "Running")
                .cloned()
                .collect();
            let endpoint = pods.first()?["spec"]["containers"][0]["command"]
                .as_array()?
                .iter()
                .find_map(|a| a.as_str()?.strip_prefix("--rdzv-endpoint="))?
                .to_owned();
            (pods.len() == 3).then_some((pods, endpoint))
        },
        || c.state(ns),
    )
}

/// A node's index: its completion index (plain Jobs, JobSet), or its
/// replica index (the Training Operator's pods).
fn node_index(pod: &Value) -> Option<&str> {
    let labels = &pod["metadata"]["labels"];
    labels["batch.kubernetes.io/job-completion-index"]
        .as_str()
        .or_else(|| labels["training.kubeflow.org/replica-index"].as_str())
}

/// An elastic run (tests/fixtures/pytorch-elastic: three nodes, two
/// enough) on each target that runs one. Every node's `torchrun` meets at
/// `<node 0's host name>:29500`, and the real EndpointSlice controller
/// makes node 0's pod, and it alone, the endpoint of the Service of that
/// name: trainc's on `kubernetes` and `jobset`, the operator's per-pod one
/// on `pytorchjob`, where the operator passes the same rendezvous in
/// `PET_*` too. Node 0's `torchrun` leaves last (its exit barrier waits
/// for every node's), so the run ends when node 0 has, the other nodes
/// still running: the Job by its `successPolicy`, which the JobSet
/// follows, and the PyTorchJob by the operator's elastic rule.
#[test]
fn an_elastic_run_meets_at_node_zero_and_ends_with_it() {
    let Some(c) = cluster() else { return };
    for (target, resource, done) in [
        ("kubernetes", "jobs", "Complete"),
        ("jobset", "jobsets.jobset.x-k8s.io", "Completed"),
        ("pytorchjob", "pytorchjobs.kubeflow.org", "Succeeded"),
    ] {
        let ns = c.restricted_namespace(&format!("elastic-{target}"));
        c.provision(&ns, "elastic-ckpt");
        let dir = built("pytorch-elastic", target, &ns);
        let deploy = dir.path().join("deploy");
        outcome(&deploy, "worker", "running");
        c.apply(&deploy);
        let (pods, endpoint) = elastic_nodes(&c, &ns);
        let node_zero = pods
            .iter()
            .find(|p| node_index(p) == Some("0"))
            .and_then(|p| p["metadata"]["name"].as_str())
            .expect("node 0's pod")
            .to_owned();
        let host = endpoint.strip_suffix(":29500").expect("the worker port");
        // The host name every node is given is node 0's own.
        let hostname = pods
            .iter()
            .find(|p| p["metadata"]["name"] == node_zero.as_str())
            .and_then(|p| {
                p["spec"]["hostname"]
                    .as_str()
                    .or(p["metadata"]["name"].as_str())
            })
            .expect("host name");
        assert_eq!(host, hostname, "{target}");
        c.wait(
            &format!("node 0 ({node_zero}) as the one endpoint of Service {host}"),
            || {
                let slices = c.get(&[
                    "endpointslices",
                    "-n",
                    &ns,
                    "-l",
                    &format!("kubernetes.io/service-name={host}"),
                ]);
                let targets: Vec<&str> = slices["items"]
                    .as_array()?
                    .iter()
                    .flat_map(|s| s["endpoints"].as_array().into_iter().flatten())
                    .filter_map(|e| e["targetRef"]["name"].as_str())
                    .collect();
                (targets == [node_zero.as_str()]).then_some(())
            },
            || c.state(&ns),
        );
        if target == "pytorchjob" {
            for pod in &pods {
                let env = pod["spec"]["containers"][0]["env"].as_array().expect("env");
                let value = |name: &str| {
                    env.iter()
                        .find(|e| e["name"] == name)
                        .and_then(|e| e["value"].as_str())
                };
                assert_eq!(value("PET_RDZV_ENDPOINT"), Some(endpoint.as_str()), "{pod}");
                assert_eq!(value("PET_RDZV_BACKEND"), Some("c10d"), "{pod}");
                assert_eq!(value("PET_NNODES"), Some("2:3"), "{pod}");
            }
        }
        // Node 0 ends; the others run on.
        c.ok(&[
            "label",
            "pod",
            "-n",
            &ns,
            &node_zero,
            "trainc.test/outcome=node-zero-ends",
            "--overwrite",
        ]);
        let name = run_name(&c, &ns, resource);
        let live = c.wait(
            &format!("{resource} {ns}/{name} to be {done} with node 0"),
            || c.condition(&ns, resource, &name, done),
            || c.state(&ns),
        );
        if target == "kubernetes" {
            assert_eq!(live["status"]["succeeded"], 1, "{live}");
        } else {
            assert_healthy(&live);
        }
        c.assert_admitted(&ns);
    }
}

/// An elastic node restarts alone and in place: its pod restarts
/// `OnFailure` (kwok restarts the containers as a kubelet would), and the
/// real controllers count every node's restarts against the run's
/// `backoffLimit` (6), failing it past that: the Job with
/// `BackoffLimitExceeded` (a static run fails at the first failure, by
/// `PodFailurePolicy`), the JobSet with its Job, the PyTorchJob by the
/// operator's count of its pods' restarts.
#[test]
fn an_elastic_node_restarts_in_place_up_to_the_backoff_limit() {
    let Some(c) = cluster() else { return };
    for (target, resource) in [
        ("kubernetes", "jobs"),
        ("jobset", "jobsets.jobset.x-k8s.io"),
        ("pytorchjob", "pytorchjobs.kubeflow.org"),
    ] {
        let ns = c.restricted_namespace(&format!("elastic-fail-{target}"));
        c.provision(&ns, "elastic-ckpt");
        let dir = built("pytorch-elastic", target, &ns);
        let deploy = dir.path().join("deploy");
        outcome(&deploy, "worker", "fail");
        c.apply(&deploy);
        // A container restarted in its pod.
        c.wait(
            &format!("a node of {ns} to restart in place"),
            || {
                let pods = c.get(&["pods", "-n", &ns, "-l", "trainc.dev/role=worker"]);
                pods["items"]
                    .as_array()?
                    .iter()
                    .any(|p| {
                        p["status"]["phase"] == "Running"
                            && p["status"]["containerStatuses"][0]["restartCount"]
                                .as_u64()
                                .is_some_and(|n| n > 0)
                    })
                    .then_some(())
            },
            || c.state(&ns),
        );
        let name = run_name(&c, &ns, resource);
        let failed = c.wait(
            &format!("{resource} {ns}/{name} to fail past its backoff limit"),
            || c.condition(&ns, resource, &name, "Failed"),
            || c.state(&ns),
        );
        assert_run_failed(target, &failed, "BackoffLimitExceeded");
        c.assert_admitted(&ns);
    }
}

/// A failed PyTorch run: a Job failed for `job_reason` (its one Failed
/// condition's), or a run object that its health check calls Degraded.
fn assert_run_failed(target: &str, failed: &Value, job_reason: &str) {
    if target == "kubernetes" {
        let reasons: Vec<&Value> = failed["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["type"] == "Failed")
            .map(|c| &c["reason"])
            .collect();
        assert_eq!(reasons, [&Value::from(job_reason)], "{failed}");
    } else {
        assert_eq!(
            health_of(failed),
            ("Degraded".to_owned(), "Failed".to_owned()),
            "{failed}"
        );
    }
}

/// Whether `host` (`<pod>.<service>.<ns>.svc`, or `<service>.<ns>.svc`) is
/// an endpoint of the Service's EndpointSlices: the pod by its host name,
/// or any address of the Service.
fn resolves(c: &Cluster, ns: &str, host: &str) -> bool {
    let parts: Vec<&str> = host.split('.').collect();
    let (hostname, service) = match parts.as_slice() {
        [h, s, n, "svc"] if *n == ns => (Some(*h), *s),
        [s, n, "svc"] if *n == ns => (None, *s),
        _ => panic!("{host} is no name of a Service in {ns}"),
    };
    let slices = c.get(&[
        "endpointslices",
        "-n",
        ns,
        "-l",
        &format!("kubernetes.io/service-name={service}"),
    ]);
    slices["items"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["endpoints"].as_array().cloned().unwrap_or_default())
        .any(|e| hostname.is_none_or(|h| e["hostname"] == h) && e["addresses"][0].is_string())
}

/// Every PyTorch node's `--master-addr` (node 0) is an endpoint of a
/// Service, on every target: the run's headless Service, or on
/// `pytorchjob` the Service the operator makes for worker 0.
#[test]
fn node_zero_s_address_resolves_on_every_target() {
    let Some(c) = cluster() else { return };
    for target in ["kubernetes", "jobset", "pytorchjob", "trainjob"] {
        let ns = c.restricted_namespace(&format!("rdzv-{target}"));
        c.provision(&ns, "digits-data");
        let dir = built("pytorch", target, &ns);
        let deploy = dir.path().join("deploy");
        outcome(&deploy, "worker", "running");
        c.apply(&deploy);
        let master = c.wait(
            &format!("the nodes of {ns} to start"),
            || {
                let pods = c.get(&["pods", "-n", &ns, "-l", "trainc.dev/role=worker"]);
                let args: Vec<String> = pods["items"]
                    .as_array()?
                    .iter()
                    .filter(|p| p["status"]["phase"] == "Running")
                    .flat_map(|p| {
                        p["spec"]["containers"][0]["args"]
                            .as_array()
                            .cloned()
                            .unwrap_or_default()
                    })
                    .chain(pods["items"].as_array()?.iter().flat_map(|p| {
                        p["spec"]["containers"][0]["command"]
                            .as_array()
                            .cloned()
                            .unwrap_or_default()
                    }))
                    .filter_map(|a| a.as_str().map(str::to_owned))
                    .collect();
                // On `trainjob`, Trainer's torch plugin passes it in
                // `PET_MASTER_ADDR` (`<pod>.<service>`, in the namespace).
                let pet = pods["items"].as_array()?.iter().find_map(|p| {
                    let env = p["spec"]["containers"][0]["env"].as_array()?;
                    let addr = env.iter().find(|e| e["name"] == "PET_MASTER_ADDR")?;
                    Some(format!("{}.{ns}.svc", addr["value"].as_str()?))
                });
                args.iter()
                    .find_map(|a| a.strip_prefix("--master-addr=").map(str::to_owned))
                    .or(pet)
            },
            || c.state(&ns),
        );
        c.wait(
            &format!("{master} among the endpoints of its Service"),
            || resolves(&c, &ns, &master).then_some(()),
            || c.state(&ns),
        );
    }
}

/// Each node's rank is where its pod template reads it from: on every pod
/// the real Job, JobSet and Training Operator controllers made, the label
/// or annotation that `TRAINC_TASK_INDEX`'s field reference names is there,
/// and the nodes' values are 0 to n-1, each once. (kwok runs no container,
/// so no kubelet resolves the reference; this shows what it would read.)
/// The completion index is read from the Job controller's annotation, which
/// every pod of an Indexed Job carries: the label of that name needs the
/// `PodIndexLabel` feature gate.
#[test]
fn each_node_s_rank_is_on_its_pod() {
    let Some(c) = cluster() else { return };
    for target in ["kubernetes", "jobset", "pytorchjob", "trainjob"] {
        let ns = c.restricted_namespace(&format!("rank-{target}"));
        c.provision(&ns, "digits-data");
        let dir = built("pytorch", target, &ns);
        let deploy = dir.path().join("deploy");
        outcome(&deploy, "worker", "running");
        c.apply(&deploy);
        let ranks = c.wait(
            &format!("the nodes of {ns} to start"),
            || {
                let pods = c.get(&["pods", "-n", &ns, "-l", "trainc.dev/role=worker"]);
                let pods = pods["items"].as_array()?;
                let mut ranks = Vec::new();
                for pod in pods {
                    let env = pod["spec"]["containers"][0]["env"].as_array()?;
                    let var = env.iter().find(|e| e["name"] == "TRAINC_TASK_INDEX")?;
                    let path = var["valueFrom"]["fieldRef"]["fieldPath"].as_str()?;
                    let (field, key) = path
                        .strip_prefix("metadata.")?
                        .strip_suffix("']")?
                        .split_once("['")?;
                    assert!(
                        target == "pytorchjob" || field == "annotations",
                        "{target}: the rank is read from {path}"
                    );
                    if target == "trainjob" {
                        // The torch plugin's `PET_NODE_RANK`, which
                        // `torchrun` takes as its node rank, reads the same.
                        let pet = env.iter().find(|e| e["name"] == "PET_NODE_RANK")?;
                        assert_eq!(
                            pet["valueFrom"]["fieldRef"]["fieldPath"], path,
                            "{target}: PET_NODE_RANK and TRAINC_TASK_INDEX"
                        );
                    }
                    let value = pod["metadata"][field][key].as_str().unwrap_or_else(|| {
                        panic!("{target}: a pod has no {path}: {}", pod["metadata"])
                    });
                    ranks.push(value.parse::<u32>().expect("a rank is a number"));
                }
                // The example's two nodes.
                (ranks.len() == 2).then_some(ranks)
            },
            || c.state(&ns),
        );
        let mut sorted = ranks.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, [0, 1], "{target}: the nodes' ranks");
    }
}

/// An object as kubectl names it: `<kind>/<name>`, the kind in lower case.
fn kind_name(o: &Value) -> String {
    format!(
        "{}/{}",
        o["kind"].as_str().unwrap_or_default().to_lowercase(),
        o["metadata"]["name"].as_str().unwrap_or_default()
    )
}

/// The objects of the output in the namespace that trainc manages, as
/// `<kind>/<name>` (lower-case kind), and the UIDs of their pods.
fn live(c: &Cluster, ns: &str) -> (std::collections::BTreeSet<String>, Vec<String>) {
    let objects = c.get(&[
        "-n",
        ns,
        "jobs,jobsets.jobset.x-k8s.io,tfjobs.kubeflow.org,services,configmaps,deployments,networkpolicies,persistentvolumeclaims",
        "-l",
        "app.kubernetes.io/managed-by=trainc",
    ]);
    let names = objects["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|o| o["metadata"]["ownerReferences"].is_null())
        .map(kind_name)
        .collect();
    let pods = c.get(&["pods", "-n", ns, "-l", "trainc.dev/role"]);
    let uids = pods["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .map(|p| p["metadata"]["uid"].as_str().unwrap_or_default().to_owned())
        .collect();
    (names, uids)
}

/// What a GitOps controller does with a new output: apply it, and prune
/// the objects of the namespace it no longer holds (as Argo CD's and
/// Flux's prune do; `kubectl apply --prune` does not work with
/// server-side apply).
fn sync(c: &Cluster, ns: &str, deploy: &Path) {
    let (before, _) = live(c, ns);
    c.apply(deploy);
    let out = c.ok(&["kustomize", deploy.to_str().expect("UTF-8")]);
    let wanted: std::collections::BTreeSet<String> = serde_saphyr::from_multiple::<Value>(&out)
        .expect("YAML")
        .iter()
        .map(kind_name)
        .collect();
    for gone in before.difference(&wanted) {
        c.ok(&["delete", "-n", ns, gone, "--wait=false"]);
    }
}

/// GitOps updates: build, sync, edit the definition, build, sync again
/// (apply and prune). No edit makes the API server refuse a changed
/// immutable field; the edits `trainc diff` says start the run again (a
/// hyperparameter, a parameter server's resources) replace every pod of
/// the run, and the one it says does not (a TensorBoard setting) keeps
/// them.
#[test]
fn edits_restart_exactly_the_runs_diff_names() {
    let Some(c) = cluster() else { return };
    for target in ["kubernetes", "jobset", "tfjob"] {
        let ns = c.restricted_namespace(&format!("edit-{target}"));
        let dir = built("mnist", target, &ns);
        let deploy = dir.path().join("deploy");
        let label_all = || {
            for role in ["chief", "ps", "worker"] {
                outcome(&deploy, role, "running");
            }
        };
        label_all();
        sync(&c, &ns, &deploy);
        let pods = |c: &Cluster| {
            c.wait(
                &format!("the five tasks of {ns} to run"),
                || {
                    let (_, uids) = live(c, &ns);
                    (uids.len() == 5 && c.running(&ns, "ps") == 2).then_some(uids)
                },
                || c.state(&ns),
            )
        };
        let mut running = pods(&c);
        let definition = dir.path().join("jobs/mnist.yaml");
        static_size_is_refused(&c, &ns, dir.path());
        for (what, from, to, restarts) in [
            (
                "a TensorBoard setting",
                "service: LoadBalancer",
                "service: ClusterIP",
                false,
            ),
            (
                "a hyperparameter",
                "learning_rate: 0.001",
                "learning_rate: 0.002",
                true,
            ),
            // The way to another size of a static volume: a new volume.
            (
                "a volume's name",
                "- name: data\n",
                "- name: data-v2\n",
                true,
            ),
            (
                "a parameter server's CPU",
                "ps:     {replicas: 2, resources: {cpu: \"1\"",
                "ps:     {replicas: 2, resources: {cpu: \"2\"",
                true,
            ),
        ] {
            let text = fs::read_to_string(&definition).expect("read");
            assert!(text.contains(from), "{from}");
            let text = text.replace(from, to);
            // A LoadBalancer's source ranges go with it.
            let text = if to == "service: ClusterIP" {
                text.replace("    loadBalancerSourceRanges: [10.0.0.0/8]\n", "")
            } else {
                text
            };
            fs::write(&definition, text).expect("write");
            // `trainc diff` against the output as it is (labels and all):
            // the build below rewrites the files trainc owns.
            let o = run(dir.path(), &["diff", "--format", "json"]);
            assert_eq!(o.status.code(), Some(1), "{what}: {}", stderr(&o));
            let report: Value = serde_json::from_slice(&o.stdout).expect("JSON");
            let reruns = report["runs"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|r| r["op"] == "rerun")
                .count();
            assert_eq!(reruns, usize::from(restarts), "{what}: {report}");
            let o = run(dir.path(), &["build"]);
            assert!(o.status.success(), "{what}: {}", stderr(&o));
            label_all();
            sync(&c, &ns, &deploy);
            if restarts {
                c.wait(
                    &format!("every pod of {ns} replaced after {what}"),
                    || {
                        let (_, uids) = live(&c, &ns);
                        (uids.len() == 5 && uids.iter().all(|u| !running.contains(u))).then_some(())
                    },
                    || c.state(&ns),
                );
                running = pods(&c);
            } else {
                let (_, uids) = live(&c, &ns);
                assert_eq!(
                    uids,
                    running,
                    "{what}: the run's pods are kept\n{}",
                    c.state(&ns)
                );
            }
        }
    }
}

/// A static volume's size (the mnist example's NFS share) cannot change:
/// `trainc diff` and `build` refuse the edit, and the API server, given
/// the claim it would have written, refuses it too.
fn static_size_is_refused(c: &Cluster, ns: &str, project: &Path) {
    let definition = project.join("jobs/mnist.yaml");
    let text = fs::read_to_string(&definition).expect("read");
    assert!(text.contains("size: 5Gi"));
    fs::write(&definition, text.replace("size: 5Gi", "size: 10Gi")).expect("write");
    for command in ["diff", "build"] {
        let o = run(project, &[command]);
        assert_eq!(o.status.code(), Some(2), "{command}: {}", stderr(&o));
        assert!(stderr(&o).contains("no storage class"), "{}", stderr(&o));
    }
    fs::write(&definition, text).expect("write");
    let claim = generated_file(&project.join("deploy"), "persistentvolumeclaim-mnist-data.");
    c.wait(
        &format!("the claim of {ns} to be bound"),
        || {
            let claim = c.get(&["-n", ns, "persistentvolumeclaim", "mnist-data"]);
            (claim["status"]["phase"] == "Bound").then_some(())
        },
        || c.state(ns),
    );
    let edited = tempfile::NamedTempFile::new().expect("temp file");
    let yaml = fs::read_to_string(&claim).expect("read");
    assert!(yaml.contains("storage: 5Gi"), "{yaml}");
    fs::write(edited.path(), yaml.replace("storage: 5Gi", "storage: 10Gi")).expect("write");
    let o = c.kubectl(&[
        "apply",
        "--server-side",
        "-f",
        edited.path().to_str().expect("UTF-8"),
    ]);
    assert!(!o.status.success(), "the API server resized a static claim");
    assert!(
        stderr(&o).contains("only dynamically provisioned pvc can be resized"),
        "{}",
        stderr(&o)
    );
}

/// Kueue admits a JobSet run as one Workload: its pods start together,
/// once the whole run fits the ClusterQueue's quota; a run that does not
/// fit waits as a whole, with no pod, until the other is gone.
#[test]
fn kueue_admits_a_jobset_run_as_a_whole() {
    let Some(c) = cluster() else { return };
    let ns = c.restricted_namespace("kueue");
    // Room for one MNIST run (11 CPUs, 22 GiB, 2 GPUs), not two.
    let queues = serde_json::json!([
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": ns}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": ns},
         "spec": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                  "resourceGroups": [{"coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                    "flavors": [{"name": ns, "resources": [
                        {"name": "cpu", "nominalQuota": "12"},
                        {"name": "memory", "nominalQuota": "30Gi"},
                        {"name": "nvidia.com/gpu", "nominalQuota": "2"}]}]}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
         "metadata": {"name": "training", "namespace": ns}, "spec": {"clusterQueue": ns}},
    ]);
    for q in queues.as_array().expect("queues") {
        let file = tempfile::NamedTempFile::new().expect("temp file");
        fs::write(file.path(), q.to_string()).expect("write");
        c.ok(&[
            "apply",
            "--server-side",
            "-f",
            file.path().to_str().expect("UTF-8"),
        ]);
    }
    let dir = scratch_example("mnist");
    let definition = dir.path().join("jobs/mnist.yaml");
    let text = fs::read_to_string(&definition)
        .expect("read")
        .replace("namespace: ml", &format!("namespace: {ns}"))
        .replace(
            "spec:\n",
            "spec:\n  target: jobset\n  runPolicy: {queue: training}\n",
        );
    fs::write(&definition, &text).expect("write");
    // A second run of the same shape, which does not fit beside the first.
    fs::write(
        dir.path().join("jobs/second.yaml"),
        text.replace("  name: mnist\n", "  name: second\n"),
    )
    .expect("write");
    let project = dir.path().join("trainc.yaml");
    let p = fs::read_to_string(&project)
        .expect("read")
        .replace("namespace: ml", &format!("namespace: {ns}"));
    fs::write(&project, p).expect("write");
    let o = run(dir.path(), &["build"]);
    assert!(o.status.success(), "build: {}", stderr(&o));
    let deploy = dir.path().join("deploy");
    for role in ["chief", "ps", "worker"] {
        outcome(&deploy, role, "running");
    }
    c.apply(&deploy);
    let pods_of = |job: &str| {
        let pods = c.get(&[
            "pods",
            "-n",
            &ns,
            "-l",
            &format!("trainc.dev/job={job},trainc.dev/role"),
        ]);
        pods["items"].as_array().map_or(0, Vec::len)
    };
    let admitted = |job: &str| {
        let w = c.get(&["workloads.kueue.x-k8s.io", "-n", &ns]);
        w["items"].as_array().into_iter().flatten().any(|w| {
            w["metadata"]["ownerReferences"][0]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with(&format!("{job}-")))
                && w["status"]["conditions"].as_array().is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c["type"] == "Admitted" && c["status"] == "True")
                })
        })
    };
    // One run is admitted, whole; the other waits, whole.
    let first = c.wait(
        "one run to be admitted with all its pods",
        || match (admitted("mnist"), admitted("second")) {
            (true, false) if pods_of("mnist") == 5 => Some("mnist"),
            (false, true) if pods_of("second") == 5 => Some("second"),
            _ => None,
        },
        || c.state(&ns),
    );
    let other = if first == "mnist" { "second" } else { "mnist" };
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        !admitted(other),
        "{other} admitted beside {first}:\n{}",
        c.state(&ns)
    );
    assert_eq!(
        pods_of(other),
        0,
        "{other} has pods before admission:\n{}",
        c.state(&ns)
    );
    // The first goes; the other starts, whole.
    c.ok(&[
        "delete",
        "-n",
        &ns,
        "jobsets.jobset.x-k8s.io",
        "-l",
        &format!("trainc.dev/job={first}"),
    ]);
    c.wait(
        &format!("{other} to be admitted with all its pods"),
        || (admitted(other) && pods_of(other) == 5).then_some(()),
        || c.state(&ns),
    );
}

/// Every string value of `key` anywhere in the YAML documents `yaml`.
fn names_of(yaml: &str, key: &str) -> std::collections::BTreeSet<String> {
    fn walk(v: &Value, key: &str, out: &mut std::collections::BTreeSet<String>) {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    match v.as_str() {
                        Some(s) if k == key => {
                            out.insert(s.to_owned());
                        }
                        _ => walk(v, key, out),
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|v| walk(v, key, out)),
            _ => {}
        }
    }
    let mut out = std::collections::BTreeSet::new();
    for doc in serde_saphyr::from_multiple::<Value>(yaml).expect("YAML") {
        walk(&doc, key, &mut out);
    }
    out
}

/// Every fixture's output (each for its own target) applies with no error
/// and no warning into namespaces that enforce `restricted`, and every pod
/// its controllers create is admitted: kitchen-sink (every feature at
/// once), storage, pod settings, patches, PyTorch on GPUs, resources,
/// variants (the project's own output), and the TensorFlow 1 example
/// (the other examples run in the tests above).
#[test]
fn every_fixture_applies_and_its_pods_are_admitted() {
    let Some(c) = cluster() else { return };
    for fixture in [
        "kitchen-sink",
        "storage",
        "pod-settings",
        "patches",
        "pytorch-gpu",
        "resources",
        "variants",
        "mnist-cpu",
    ] {
        let dir = scratch_example(fixture);
        let o = run(dir.path(), &["build", "-o", "out"]);
        assert!(o.status.success(), "{fixture}: {}", stderr(&o));
        let out = dir.path().join("out");
        let rendered = c.ok(&["kustomize", out.to_str().expect("UTF-8")]);
        let namespaces: std::collections::BTreeSet<String> =
            serde_saphyr::from_multiple::<Value>(&rendered)
                .expect("YAML")
                .iter()
                .filter_map(|o| o["metadata"]["namespace"].as_str().map(str::to_owned))
                .collect();
        for ns in &namespaces {
            // Fixtures share namespaces (`ml`), never objects.
            if c.kubectl(&["get", "namespace", ns]).status.success() {
                continue;
            }
            c.ok(&["create", "namespace", ns]);
            c.ok(&[
                "label",
                "namespace",
                ns,
                "pod-security.kubernetes.io/enforce=restricted",
                "pod-security.kubernetes.io/warn=restricted",
            ]);
        }
        // What a cluster provides and a definition only names: its
        // PriorityClasses.
        for class in names_of(&rendered, "priorityClassName") {
            if !c
                .kubectl(&["get", "priorityclass", &class])
                .status
                .success()
            {
                c.ok(&["create", "priorityclass", &class, "--value=1000"]);
            }
        }
        c.apply(&out);
        // The controllers have had their chance to create the pods (runs
        // with a `runPolicy.queue` stay suspended: Kueue has no such queue
        // here), or the API server to refuse them.
        for ns in &namespaces {
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(20) {
                let pods = c.get(&["pods", "-n", ns, "-l", "trainc.dev/role"]);
                if pods["items"].as_array().is_some_and(|p| !p.is_empty())
                    || !c.refused_pods(ns).is_empty()
                {
                    break;
                }
                std::thread::sleep(Duration::from_millis(500));
            }
            c.assert_admitted(ns);
        }
    }
}

/// A PersistentVolume trainc writes is reserved for its own claim: a claim
/// of no class in another namespace that selects the volume's labels, made
/// while the volume waits for its claim, does not take it (it did, before the volume had a `claimRef`: a
/// test's dynamic claim took another test's NFS volume here), and the
/// run's claim binds to it once applied.
#[test]
fn a_persistent_volume_is_reserved_for_its_claim() {
    let Some(c) = cluster() else { return };
    let ns = &c.restricted_namespace("reserved");
    let other = &c.restricted_namespace("other-team");
    let dir = built("mnist", "kubernetes", ns);
    let volume = generated_file(&dir.path().join("deploy"), "persistentvolume-");
    c.ok(&[
        "apply",
        "--server-side",
        "-f",
        volume.to_str().expect("UTF-8"),
    ]);
    let claim = serde_json::json!({
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "anything", "namespace": other},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "resources": {"requests": {"storage": "1Gi"}},
            // Labels are no secret: any namespace can select this volume.
            // The selector also keeps the claim off the volumes of the
            // tests running beside this one.
            "selector": {"matchLabels": {"trainc.dev/namespace": ns}},
        },
    });
    let file = tempfile::NamedTempFile::new().expect("temp file");
    fs::write(file.path(), claim.to_string()).expect("write");
    c.ok(&["apply", "-f", file.path().to_str().expect("UTF-8")]);
    // The PersistentVolume controller binds a claim as soon as it sees it.
    std::thread::sleep(Duration::from_secs(5));
    let pv_name = format!("{ns}.mnist.data");
    let pv = c.get(&["persistentvolume", &pv_name]);
    assert_ne!(
        pv["spec"]["claimRef"]["namespace"].as_str(),
        Some(other.as_str()),
        "another namespace's claim took the volume: {pv}"
    );
    c.apply(&dir.path().join("deploy"));
    c.wait(
        &format!("claim {ns}/mnist-data to bind to {pv_name}"),
        || {
            let claim = c.get(&["-n", ns, "persistentvolumeclaim", "mnist-data"]);
            (claim["status"]["phase"] == "Bound" && claim["spec"]["volumeName"] == pv_name.as_str())
                .then_some(())
        },
        || c.state(ns),
    );
    let stranger = c.get(&["-n", other, "persistentvolumeclaim", "anything"]);
    assert_eq!(stranger["status"]["phase"], "Pending", "{stranger}");
    c.ok(&["delete", "-n", other, "persistentvolumeclaim", "anything"]);
}

/// Output of a trainc from before PersistentVolumes had a `claimRef`,
/// synced and bound, then the output of this one applied over it: the
/// API server takes the reservation without a conflict (the PersistentVolume
/// controller owns the rest of `claimRef`, which Kubernetes merges field by
/// field), and the claim stays bound to its volume.
#[test]
fn an_upgrade_reserves_a_bound_volume_in_place() {
    let Some(c) = cluster() else { return };
    let ns = &c.restricted_namespace("upgrade-pv");
    let dir = built("mnist", "kubernetes", ns);
    let deploy = dir.path().join("deploy");
    let volume = generated_file(&deploy, "persistentvolume-");
    let current = fs::read_to_string(&volume).expect("read");
    let reservation = format!("  claimRef:\n    name: mnist-data\n    namespace: {ns}\n");
    assert!(current.contains(&reservation), "{current}");
    fs::write(&volume, current.replace(&reservation, "")).expect("write");
    c.apply(&deploy);
    let bound = || {
        let claim = c.get(&["-n", ns, "persistentvolumeclaim", "mnist-data"]);
        (claim["status"]["phase"] == "Bound").then(|| claim["spec"]["volumeName"].clone())
    };
    let before = c.wait(&format!("claim {ns}/mnist-data to bind"), bound, || {
        c.state(ns)
    });
    fs::write(&volume, &current).expect("write");
    c.apply(&deploy);
    assert_eq!(bound(), Some(before), "{}", c.state(ns));
}
