//! Names of generated objects. Validation and compilation both call these, so
//! the length checks measure exactly the names that will be written.

/// Hex digits of the run hash in run names (`mnist-8b16ab`).
pub const HASH_LEN: usize = 6;

/// Longest name of a Service, a Job or a Deployment: a DNS-1035 label (Service
/// names become DNS labels; a Job name becomes a label value on its pods).
pub const LABEL_MAX: usize = 63;
/// Longest name of a ConfigMap, PersistentVolume or claim: a DNS-1123 subdomain.
pub const SUBDOMAIN_MAX: usize = 253;

/// Where the cluster-spec ConfigMap is mounted in every task: a path, but
/// reserved like a name, so validation and the pod builder share it.
pub const CLUSTER_SPEC_MOUNT: &str = "/etc/trainc";

/// A training run: the job name plus a hash of everything that reaches the
/// run's pods (see [`crate::compile::identity`]). Every object of the run is
/// named after it, so a changed run is a new set of objects.
pub fn run(job: &str, hash: &str) -> String {
    format!("{job}-{hash}")
}

/// A task of a run: `<run>-<role>-<index>` (its Job and pod host name on the
/// `kubernetes` target, its pod and Service under the Kubeflow operators).
/// With the job name in place of the run, the stem of its file name.
pub fn task(run: &str, role: &str, index: u32) -> String {
    format!("{run}-{role}-{index}")
}

/// The host name JobSet gives the one pod of Job `index` of a replicated
/// Job: `<jobset>-<replicatedJob>-<jobIndex>-<completionIndex>`.
pub fn jobset_pod(run: &str, role: &str, index: u32) -> String {
    format!("{}-0", task(run, role, index))
}

/// The one Job of a role whose tasks are the indexes of an Indexed Job
/// (PyTorch's nodes on `kubernetes`): `<run>-<role>`. Its pods' host names
/// are [`task`]s.
pub fn role_job(run: &str, role: &str) -> String {
    format!("{run}-{role}")
}

/// The host name JobSet gives pod `index` of the one Job of a replicated
/// Job whose Job runs several indexes (PyTorch's nodes on `jobset`).
pub fn jobset_indexed_pod(run: &str, role: &str, index: u32) -> String {
    format!("{}-{index}", task(run, role, 0))
}

/// The cluster-spec ConfigMap of a run (with the job name: its file stem).
pub fn cluster_spec(run: &str) -> String {
    format!("{run}-cluster-spec")
}

pub fn tensorboard(job: &str) -> String {
    format!("{job}-tensorboard")
}

pub fn claim(job: &str, volume: &str) -> String {
    format!("{job}-{volume}")
}

/// PersistentVolumes are cluster-scoped, so their name carries the
/// namespace: `<namespace>.<job>.<volume>`. Dots, which no DNS label holds,
/// keep it unambiguous: with `-`, namespace `ml-team`'s job `x` and
/// namespace `ml`'s job `team-x` would write one PersistentVolume, and two
/// GitOps applications would fight over it.
pub fn volume(namespace: &str, job: &str, volume: &str) -> String {
    format!("{namespace}.{job}.{volume}")
}

/// The file stem of [`volume`]'s PersistentVolume, in the job's own
/// directory: `persistentvolume-<namespace>-<job>-<volume>.yaml`.
pub fn volume_file(namespace: &str, job: &str, volume: &str) -> String {
    format!("{namespace}-{job}-{volume}")
}
