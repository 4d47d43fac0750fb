//! Generated manifests checked by tools nobody here wrote: `kubectl kustomize`
//! renders the tree the way Argo CD and Flux will, and `kubernetes-validate`
//! checks every object against the Kubernetes 1.33 OpenAPI schema, strictly
//! (unknown fields are errors).
//!
//! The outputs of the `jobset` and `tfjob` targets go through both too:
//! kustomize renders every file, custom resources included; kubernetes-validate
//! knows no CRD (it warns and passes), so it gets the built-in kinds only, and
//! tests/crd.rs checks the custom resources against their CRDs.
//!
//! `tests/run.sh` installs kubernetes-validate and sets `TRAINC_REQUIRE_TOOLS`,
//! so in CI a missing tool fails the test; a bare `cargo test` skips it with a
//! note instead.

mod common;
#[path = "common/crd.rs"]
mod crd;

use std::path::{Path, PathBuf};

use common::tool;
use std::process::Command;

fn manifests(tree: &Path) -> Vec<PathBuf> {
    walkdir::WalkDir::new(tree)
        .sort_by_file_name()
        .into_iter()
        .map(|e| e.expect("walk").into_path())
        .filter(|p| p.is_file() && p.file_name().is_some_and(|n| n != "kustomization.yaml"))
        .collect()
}

#[test]
fn kubectl_kustomize_renders_every_manifest() {
    let Some(kubectl) = tool("TRAINC_KUBECTL", "kubectl") else {
        return;
    };
    for (example, _dir, deploy) in common::every_build() {
        let o = Command::new(&kubectl)
            .arg("kustomize")
            .arg(&deploy)
            .output()
            .expect("kubectl runs");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let rendered = String::from_utf8_lossy(&o.stdout);
        let kinds = rendered.lines().filter(|l| l.starts_with("kind: ")).count();
        // And the files of the project's own directories the root
        // kustomization lists from outside the output (`resources`).
        let root: serde_json::Value = serde_saphyr::from_str(
            &std::fs::read_to_string(deploy.join("kustomization.yaml")).expect("read"),
        )
        .expect("yaml");
        let outside: usize = root["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .filter_map(|r| r.as_str().filter(|r| r.starts_with("../")))
            .map(|r| manifests(&deploy.join(r)).len())
            .sum();
        assert_eq!(
            kinds,
            manifests(&deploy).len() + outside,
            "{example}: every file reaches the cluster"
        );
    }
}

#[test]
fn kubernetes_validate_accepts_every_manifest() {
    let Some(validator) = tool("TRAINC_KUBERNETES_VALIDATE", "kubernetes-validate") else {
        return;
    };
    let custom_groups = crd::groups(&crd::crd_dir());
    for (example, _dir, deploy) in common::every_build() {
        // Custom resources are tests/crd.rs's: kubernetes-validate has no
        // schema for them and would only warn.
        let files: Vec<PathBuf> = manifests(&deploy)
            .into_iter()
            .filter(|f| {
                crd::yaml_documents(f).iter().all(|d| {
                    let api_version = d["apiVersion"].as_str().unwrap_or_default();
                    !api_version
                        .split_once('/')
                        .is_some_and(|(group, _)| custom_groups.contains(group))
                })
            })
            .collect();
        assert!(!files.is_empty(), "{example}: no built-in kind to validate");
        let o = Command::new(&validator)
            .args(["--strict", "--kubernetes-version", "1.33.0", "--quiet"])
            .args(&files)
            .output()
            .expect("kubernetes-validate runs");
        let out = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(o.status.success(), "{example}:\n{out}");
        // An object it has no schema for passes with a warning: none may.
        assert!(
            !out.contains("Couldn't find schema"),
            "{example}: not validated:\n{out}"
        );
    }
}
