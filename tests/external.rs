//! Generated manifests checked by tools nobody here wrote: `kubectl kustomize`
//! renders the tree the way Argo CD and Flux will, and `kubernetes-validate`
//! checks every object against the Kubernetes 1.33 OpenAPI schema, strictly
//! (unknown fields are errors).
//!
//! `tests/run.sh` installs kubernetes-validate and sets `TRAINC_REQUIRE_TOOLS`,
//! so in CI a missing tool fails the test; a bare `cargo test` skips it with a
//! note instead.

mod common;

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
    for example in ["mnist", "mnist-cpu", "kitchen-sink"] {
        let (dir, _) = common::build_example(example);
        let deploy = dir.path().join("deploy");
        let o = Command::new(&kubectl)
            .arg("kustomize")
            .arg(&deploy)
            .output()
            .expect("kubectl runs");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let rendered = String::from_utf8_lossy(&o.stdout);
        let kinds = rendered.lines().filter(|l| l.starts_with("kind: ")).count();
        assert_eq!(
            kinds,
            manifests(&deploy).len(),
            "{example}: every file reaches the cluster"
        );
    }
}

#[test]
fn kubernetes_validate_accepts_every_manifest() {
    let Some(validator) = tool("TRAINC_KUBERNETES_VALIDATE", "kubernetes-validate") else {
        return;
    };
    for example in ["mnist", "mnist-cpu", "kitchen-sink"] {
        let (dir, _) = common::build_example(example);
        let files = manifests(&dir.path().join("deploy"));
        let o = Command::new(&validator)
            .args(["--strict", "--kubernetes-version", "1.33.0", "--quiet"])
            .args(&files)
            .output()
            .expect("kubernetes-validate runs");
        assert!(
            o.status.success(),
            "{example}:\n{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }
}
