//! Stage 3 (compile), shared by every target and by TensorBoard: the
//! security context of trainc's pods, the scratch volumes a non-root
//! process on a read-only image needs, and the Pod Security profile a job's
//! settings meet (which validation reports).
//!
//! By default every pod passes the Pod Security Standards `restricted`
//! profile: a numeric non-root UID (the one the generated Dockerfile
//! creates), no privilege escalation, every capability dropped, the
//! runtime's seccomp profile, and no service-account token.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Capabilities, EmptyDirVolumeSource, PodSecurityContext, SeccompProfile, SecurityContext,
    Volume, VolumeMount,
};

use crate::model::job::Security;

const HOME_VOLUME: &str = "trainc-home";
const TMP_VOLUME: &str = "trainc-tmp";
/// `HOME` of every container: stock framework images run as root and expect
/// a writable home, which UID 10001 has nowhere on their filesystem.
pub const HOME: &str = "/home/trainer";

pub fn pod(s: &Security) -> PodSecurityContext {
    PodSecurityContext {
        run_as_non_root: Some(s.run_as_non_root),
        run_as_user: s.run_as_user,
        run_as_group: s.run_as_group,
        fs_group: s.fs_group,
        // Without it the kubelet chowns every file of every volume at each
        // pod start: minutes on a large dataset.
        fs_group_change_policy: s.fs_group.map(|_| "OnRootMismatch".to_owned()),
        seccomp_profile: Some(SeccompProfile {
            type_: s.seccomp.clone(),
            localhost_profile: s.seccomp_localhost_profile.clone(),
        }),
        ..PodSecurityContext::default()
    }
}

pub fn container(s: &Security) -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(s.allow_privilege_escalation),
        privileged: s.privileged.then_some(true),
        read_only_root_filesystem: Some(s.read_only_root_filesystem),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".to_owned()]),
            add: Some(s.add_capabilities.clone()).filter(|a| !a.is_empty()),
        }),
        ..SecurityContext::default()
    }
}

/// Writable `HOME` and `/tmp` on `emptyDir`s, so that programs that cache
/// in the home directory or write temporary files work with a read-only
/// image and a UID the image does not know.
pub fn scratch() -> (Vec<Volume>, Vec<VolumeMount>) {
    let volumes = [HOME_VOLUME, TMP_VOLUME]
        .map(|name| Volume {
            name: name.to_owned(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Volume::default()
        })
        .to_vec();
    let mounts = [(HOME_VOLUME, HOME), (TMP_VOLUME, "/tmp")]
        .map(|(name, path)| VolumeMount {
            name: name.to_owned(),
            mount_path: path.to_owned(),
            ..VolumeMount::default()
        })
        .to_vec();
    (volumes, mounts)
}

/// The variables that point programs at the scratch home: the home itself
/// and the XDG cache and config directories, under which pip, Keras'
/// successors, PyTorch hub, Hugging Face and Matplotlib keep their files.
pub fn scratch_env() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("HOME".to_owned(), HOME.to_owned()),
        ("XDG_CACHE_HOME".to_owned(), format!("{HOME}/.cache")),
        ("XDG_CONFIG_HOME".to_owned(), format!("{HOME}/.config")),
    ])
}

/// A Pod Security Standards profile, from most to least strict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Profile {
    Restricted,
    Baseline,
    Privileged,
}

impl Profile {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Restricted => "restricted",
            Self::Baseline => "baseline",
            Self::Privileged => "privileged",
        }
    }
}

/// Capabilities `baseline` allows a container to add: the container
/// runtimes' default set.
const BASELINE_CAPABILITIES: [&str; 13] = [
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

/// One setting that keeps a job's pods out of a profile: the definition's
/// field (under `spec.security`), and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relaxation {
    pub field: &'static str,
    pub profile: Profile,
    pub reason: String,
}

/// The strictest profile the settings meet, and every setting that keeps
/// them from a stricter one. Only the controls trainc's settings can touch
/// are checked: the rest (host namespaces, host paths, volume types) trainc
/// never generates.
pub fn profile(s: &Security) -> (Profile, Vec<Relaxation>) {
    let mut found = Vec::new();
    let mut note = |field, profile, reason: String| {
        found.push(Relaxation {
            field,
            profile,
            reason,
        })
    };
    if s.privileged {
        note(
            "privileged",
            Profile::Privileged,
            "a privileged container".to_owned(),
        );
    }
    let beyond_baseline: Vec<&str> = s
        .add_capabilities
        .iter()
        .map(String::as_str)
        .filter(|c| !BASELINE_CAPABILITIES.contains(c))
        .collect();
    if !beyond_baseline.is_empty() {
        note(
            "capabilities.add",
            Profile::Privileged,
            format!("adds {}", beyond_baseline.join(", ")),
        );
    } else {
        let beyond_restricted: Vec<&str> = s
            .add_capabilities
            .iter()
            .map(String::as_str)
            .filter(|c| *c != "NET_BIND_SERVICE")
            .collect();
        if !beyond_restricted.is_empty() {
            note(
                "capabilities.add",
                Profile::Baseline,
                format!(
                    "adds {} (restricted allows only NET_BIND_SERVICE)",
                    beyond_restricted.join(", ")
                ),
            );
        }
    }
    match s.seccomp.as_str() {
        "RuntimeDefault" | "Localhost" => {}
        other => note(
            "seccompProfile.type",
            Profile::Privileged,
            format!("seccomp profile `{other}`"),
        ),
    }
    if s.allow_privilege_escalation {
        note(
            "allowPrivilegeEscalation",
            Profile::Baseline,
            "allows privilege escalation".to_owned(),
        );
    }
    if !s.run_as_non_root {
        note(
            "runAsNonRoot",
            Profile::Baseline,
            "may run as root".to_owned(),
        );
    }
    if s.run_as_user == Some(0) {
        note("runAsUser", Profile::Baseline, "runs as UID 0".to_owned());
    }
    let level = found
        .iter()
        .map(|r| r.profile)
        .max()
        .unwrap_or(Profile::Restricted);
    (level, found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_restricted() {
        assert_eq!(
            profile(&Security::restricted()),
            (Profile::Restricted, vec![])
        );
    }

    #[test]
    fn each_relaxation_names_its_profile() {
        let mut s = Security::restricted();
        s.add_capabilities = vec!["NET_BIND_SERVICE".into()];
        assert_eq!(profile(&s).0, Profile::Restricted);
        s.add_capabilities = vec!["CHOWN".into()];
        assert_eq!(profile(&s).0, Profile::Baseline);
        s.add_capabilities = vec!["IPC_LOCK".into()];
        assert_eq!(profile(&s).0, Profile::Privileged);
        let mut s = Security::restricted();
        s.allow_privilege_escalation = true;
        assert_eq!(profile(&s).0, Profile::Baseline);
        s.seccomp = "Unconfined".into();
        let (level, why) = profile(&s);
        assert_eq!(level, Profile::Privileged);
        assert_eq!(why.len(), 2);
        let mut s = Security::restricted();
        s.run_as_non_root = false;
        s.run_as_user = Some(0);
        assert_eq!(profile(&s).0, Profile::Baseline);
    }
}
