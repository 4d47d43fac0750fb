//! Names of generated objects. Validation and compilation both call these, so
//! the length checks measure exactly the names that will be written.

/// Hex digits of the Job spec hash in Job names (`mnist-worker-0-7f3a9c`).
pub const HASH_LEN: usize = 6;

/// Longest name of a Service, a Job or a Deployment: a DNS-1035 label (Service
/// names become DNS labels; a Job name becomes a label value on its pods).
pub const LABEL_MAX: usize = 63;
/// Longest name of a ConfigMap, PersistentVolume or claim: a DNS-1123 subdomain.
pub const SUBDOMAIN_MAX: usize = 253;

/// Where the cluster-spec ConfigMap is mounted in every task: a path, but
/// reserved like a name, so validation and the pod builder share it.
pub const CLUSTER_SPEC_MOUNT: &str = "/etc/trainc";

/// Stable name of a task: its headless Service, and the stem of its Job's name.
pub fn task(job: &str, role: &str, index: u32) -> String {
    format!("{job}-{role}-{index}")
}

/// A task's Job: the stable task name plus a hash of the Job's own spec, so a
/// changed pod template creates a new Job instead of patching an immutable one.
pub fn task_job(job: &str, role: &str, index: u32, hash: &str) -> String {
    format!("{}-{hash}", task(job, role, index))
}

pub fn cluster_spec(job: &str) -> String {
    format!("{job}-cluster-spec")
}

pub fn tensorboard(job: &str) -> String {
    format!("{job}-tensorboard")
}

pub fn claim(job: &str, volume: &str) -> String {
    format!("{job}-{volume}")
}

/// PersistentVolumes are cluster-scoped, so their name carries the namespace.
pub fn volume(namespace: &str, job: &str, volume: &str) -> String {
    format!("{namespace}-{job}-{volume}")
}
