//! Patches merge as Kustomize merges them: the fixture's patches, applied
//! by trainc, give the same pod templates as the fixture built without them
//! and patched by `kubectl kustomize` (Kustomize's strategic merge and its
//! JSON patch), on the `kubernetes` target.
//!
//! Where the two differ on purpose, the fixture stays clear: Kustomize also
//! merges some lists by `name` that Kubernetes replaces (`resources.claims`,
//! `dnsConfig.options`, `sysctls`, probe headers), and knows none of the
//! `$retainKeys`, `$setElementOrder` and `$deleteFromPrimitiveList`
//! directives; trainc follows Kubernetes there (see the unit tests of
//! `src/compile/patch/smp.rs`).

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::process::Command;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use serde_json::{Value, json};

const DEFINITION: &str = "jobs/bert.yaml";

/// Job files of a build: file name → the Job.
fn jobs(tree: &BTreeMap<String, Vec<u8>>) -> BTreeMap<String, Value> {
    tree.iter()
        .filter(|(p, _)| p.rsplit('/').next().is_some_and(|f| f.starts_with("job-")))
        .map(|(p, b)| {
            let text = String::from_utf8(b.clone()).expect("utf-8");
            let v: Value = serde_saphyr::from_str(&text).expect("yaml");
            (p.rsplit('/').next().unwrap_or_default().to_owned(), v)
        })
        .collect()
}

/// A pod template as k8s-openapi writes it, the run's name replaced: the
/// form both sides are compared in.
fn canonical(template: &Value, run: &str, as_run: &str) -> Value {
    let typed: PodTemplateSpec = serde_json::from_value(template.clone()).expect("a pod template");
    let text = serde_json::to_string(&typed).expect("serializes");
    serde_json::from_str(&text.replace(run, as_run)).expect("JSON")
}

fn run_of(job: &Value) -> String {
    job["metadata"]["labels"]["trainc.dev/run"]
        .as_str()
        .expect("run label")
        .to_owned()
}

#[test]
fn trainc_patches_as_kustomize_does() {
    let Some(kubectl) = common::tool("TRAINC_KUBECTL", "kubectl") else {
        return;
    };
    let (_patched_dir, patched) = common::build_example("patches");
    let patched = jobs(&patched);

    // The same job without its patches, which close the definition.
    let dir = common::scratch_example("patches");
    let file = dir.path().join(DEFINITION);
    let text = fs::read_to_string(&file).expect("read");
    let definition: Value = serde_saphyr::from_str(&text).expect("yaml");
    let patches = definition["spec"]["patches"]
        .as_array()
        .expect("the fixture has patches")
        .clone();
    let cut = text
        .find("\n  patches:\n")
        .expect("patches close the definition");
    fs::write(&file, &text[..=cut]).expect("write");
    let o = common::run(dir.path(), &["build"]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let bare = jobs(&common::read_tree(&dir.path().join("deploy")));
    assert_eq!(
        bare.keys().collect::<Vec<_>>(),
        patched.keys().collect::<Vec<_>>()
    );

    // A kustomization of the bare Jobs with the fixture's patches, in order.
    let kz = dir.path().join("kustomize");
    fs::create_dir(&kz).expect("mkdir");
    let mut resources = Vec::new();
    let mut kz_patches = Vec::new();
    for (file, job) in &bare {
        fs::write(kz.join(file), serde_json::to_string(job).expect("json")).expect("write");
        resources.push(json!(file));
        let name = job["metadata"]["name"].as_str().expect("name");
        let role = job["metadata"]["labels"]["trainc.dev/role"]
            .as_str()
            .expect("role");
        for p in &patches {
            let applies = p["roles"]
                .as_array()
                .is_none_or(|r| r.iter().any(|x| x == role));
            if !applies {
                continue;
            }
            let patch = if let Some(s) = p.get("strategic") {
                json!({
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "metadata": {"name": name},
                    "spec": {"template": s},
                })
            } else {
                let ops: Vec<Value> = p["json"]
                    .as_array()
                    .expect("json")
                    .iter()
                    .map(|op| {
                        let mut op = op.clone();
                        for member in ["path", "from"] {
                            if let Some(at) = op[member].as_str() {
                                op[member] = json!(format!("/spec/template{at}"));
                            }
                        }
                        op
                    })
                    .collect();
                Value::Array(ops)
            };
            kz_patches.push(json!({
                "target": {"kind": "Job", "name": name},
                "patch": serde_json::to_string(&patch).expect("json"),
            }));
        }
    }
    let kustomization = json!({
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": resources,
        "patches": kz_patches,
    });
    fs::write(
        kz.join("kustomization.yaml"),
        serde_json::to_string_pretty(&kustomization).expect("json"),
    )
    .expect("write");
    let out = Command::new(kubectl)
        .arg("kustomize")
        .arg(&kz)
        .output()
        .expect("kubectl runs");
    assert!(
        out.status.success(),
        "kubectl kustomize: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let built: Vec<Value> =
        serde_saphyr::from_multiple(&String::from_utf8_lossy(&out.stdout)).expect("yaml");
    assert_eq!(built.len(), patched.len());
    for job in &built {
        let name = job["metadata"]["name"].as_str().expect("name");
        let (file, _) = bare
            .iter()
            .find(|(_, b)| b["metadata"]["name"] == name)
            .expect("a bare Job");
        let ours = &patched[file];
        let (from, to) = (run_of(job), run_of(ours));
        assert_eq!(
            canonical(&job["spec"]["template"], &from, &to),
            canonical(&ours["spec"]["template"], &to, &to),
            "{file}: trainc's patched pod template differs from Kustomize's"
        );
    }
}

/// The run name of the fixture's job, built from `edit`ed text.
fn run_name(edit: impl Fn(&str) -> String) -> String {
    let dir = common::scratch_example("patches");
    let file = dir.path().join(DEFINITION);
    let text = fs::read_to_string(&file).expect("read");
    fs::write(&file, edit(&text)).expect("write");
    let o = common::run(dir.path(), &["build"]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let tree = jobs(&common::read_tree(&dir.path().join("deploy")));
    run_of(tree.values().next().expect("a Job"))
}

/// Patches and affinities reach the pods, so they are part of the run's
/// identity; the order of a patch's keys is not.
#[test]
fn patches_and_affinities_name_the_run() {
    let base = run_name(str::to_owned);
    let changed_patch = run_name(|t| t.replace("--ps_strategy=greedy", "--ps_strategy=round"));
    let changed_affinity = run_name(|t| t.replace("weight: 100", "weight: 90"));
    let reordered = run_name(|t| {
        t.replace(
            "periodSeconds: 10\n                failureThreshold: 30",
            "failureThreshold: 30\n                periodSeconds: 10",
        )
    });
    assert_ne!(base, changed_patch);
    assert_ne!(base, changed_affinity);
    assert_ne!(changed_patch, changed_affinity);
    assert_eq!(base, reordered);
}
