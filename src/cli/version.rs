//! `trainc -V` and `trainc --version` (presentation only): the version, the
//! commit the binary was built from when `build.rs` knew it, and the API
//! versions of what trainc writes, so that a bug report or a CI log says
//! which manifests to expect.
//!
//! ```text
//! $ trainc -V
//! trainc 0.1.0 (4968d65 2026-11-24)
//! $ trainc --version
//! trainc 0.1.0 (4968d65 2026-11-24)
//! commit: 4968d65
//! commit-date: 2026-11-24
//! kubernetes: 1.33
//! JobSet: jobset.x-k8s.io/v1alpha2
//! TFJob: kubeflow.org/v1
//! PyTorchJob: kubeflow.org/v1
//! ```

use std::sync::LazyLock;

use crate::compile::target::BACKENDS;

/// The Kubernetes minor version whose API the generated objects follow:
/// k8s-openapi's version feature in Cargo.toml (`v1_33`), which a test
/// ties to this constant.
pub const KUBERNETES: &str = "1.33";

/// Set by build.rs: a short hash, `-dirty` when the sources differed.
const COMMIT: Option<&str> = option_env!("TRAINC_COMMIT");
const COMMIT_DATE: Option<&str> = option_env!("TRAINC_COMMIT_DATE");

/// `-V`: the version and, when known, the commit and its date.
pub fn short() -> &'static str {
    static SHORT: LazyLock<String> = LazyLock::new(|| {
        let version = env!("CARGO_PKG_VERSION");
        match (COMMIT, COMMIT_DATE) {
            (Some(c), Some(d)) => format!("{version} ({c} {d})"),
            (Some(c), None) => format!("{version} ({c})"),
            _ => version.to_owned(),
        }
    });
    &SHORT
}

/// `--version`: the short form, then one `key: value` line each.
pub fn long() -> &'static str {
    static LONG: LazyLock<String> = LazyLock::new(|| {
        let mut lines = vec![
            short().to_owned(),
            format!("commit: {}", COMMIT.unwrap_or("unknown")),
        ];
        if let Some(date) = COMMIT_DATE {
            lines.push(format!("commit-date: {date}"));
        }
        lines.push(format!("kubernetes: {KUBERNETES}"));
        for run in BACKENDS.iter().filter_map(|b| b.run_object) {
            lines.push(format!("{}: {}", run.kind, run.api_version));
        }
        lines.join("\n")
    });
    &LONG
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every k8s-openapi dependency in Cargo.toml (the binary's and the
    /// tests') enables the feature of [`KUBERNETES`] and no other.
    #[test]
    fn kubernetes_version_is_the_k8s_openapi_feature() {
        let manifest = include_str!("../../Cargo.toml");
        let feature = format!("\"v{}\"", KUBERNETES.replace('.', "_"));
        let deps: Vec<&str> = manifest
            .lines()
            .filter(|l| l.starts_with("k8s-openapi ="))
            .collect();
        assert_eq!(deps.len(), 2, "{deps:?}");
        for dep in deps {
            assert!(dep.contains(&feature), "{dep} lacks {feature}");
            assert_eq!(dep.matches("\"v1_").count(), 1, "{dep}");
        }
    }

    #[test]
    fn long_version_starts_with_the_short_one() {
        let long = long();
        assert_eq!(long.lines().next(), Some(short()));
        assert!(long.contains("\nkubernetes: 1.33\n"), "{long}");
        assert!(
            long.ends_with("\nTrainJob: trainer.kubeflow.org/v1alpha1"),
            "{long}"
        );
    }
}
