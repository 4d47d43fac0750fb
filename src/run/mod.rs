//! `trainc run --local`: every task of one job as a local process, with the
//! cluster spec, environment, arguments and hyperparameters the cluster would
//! give it. Hosts become 127.0.0.1 on free ports, mount paths become
//! directories under a work directory, and the image's code directory
//! becomes the build context. What runs is what the manifests describe.

mod supervise;

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::compile::index::{INDEX_VAR, Index};
use crate::compile::pod;
use crate::compile::pytorch::{self, Launch, Rank};
use crate::compile::tensorflow::{self, ClusterSpec};
use crate::diagnostic::Diagnostic;
use crate::model::Job;
use crate::model::definition::RoleKind;
use crate::model::definition::Strategy;
use crate::model::job::{EnvValue, Framework, Role};
use crate::names;

pub use supervise::{Outcome, supervise};

/// One task, ready to start.
#[derive(Debug, Clone)]
pub struct Task {
    /// `worker-1`: the prefix of its output lines.
    pub name: String,
    pub kind: RoleKind,
    /// Whether the run is over once this task and every other decisive
    /// one have exited (see [`decisive`]).
    pub decisive: bool,
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    /// The local port the task's server will listen on: a TensorFlow
    /// task's own, or node 0's rendezvous. trainc says when they all do.
    pub listens: Option<u16>,
}

/// Where and with what the tasks run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Where mount paths point: `--workdir` (created if missing), else
    /// [`fresh_workdir`].
    pub workdir: PathBuf,
    /// The interpreter for `python` commands.
    pub python: PathBuf,
}

/// What the user changed in the job for the local run.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `--set name=value`: hyperparameters to override or add.
    pub set: Vec<(String, String)>,
    /// `--replicas role=n`.
    pub replicas: Vec<(RoleKind, u32)>,
}

/// A work directory of this run's own, for when `--workdir` is not given:
/// `trainc-run-<namespace>-<job>-XXXXXX` in the system's temporary
/// directory, made anew with a random suffix and mode 0700. Never one that
/// exists: in a directory everyone can write, a name anyone can guess could
/// already be another user's directory, or a symlink to elsewhere that the
/// tasks would write through. Kept after the run, for the user to inspect.
pub fn fresh_workdir(job: &Job) -> Result<PathBuf, Diagnostic> {
    use std::os::unix::fs::PermissionsExt as _;
    let base = std::env::temp_dir();
    tempfile::Builder::new()
        .prefix(&format!("trainc-run-{}-{}-", job.namespace, job.name))
        // `mkdir` with this mode fails on any existing entry, a symlink
        // included; the umask can only narrow it.
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in(&base)
        .map(tempfile::TempDir::keep)
        .map_err(|e| {
            Diagnostic::new(format!(
                "cannot create a work directory in {}: {e}",
                base.display()
            ))
            .hint("set TMPDIR to a directory you can write, or pass `--workdir DIR`")
        })
}

/// Applies the overrides to the job, in place.
pub fn apply_overrides(job: &mut Job, opts: &Overrides) -> Result<(), Diagnostic> {
    use crate::limits::MAX_REPLICAS;
    use crate::load::MAX_STRING_BYTES;
    // The definition's limits: a flag is no way around them.
    for (kind, n) in &opts.replicas {
        if *n > MAX_REPLICAS {
            return Err(Diagnostic::new(format!(
                "--replicas {}={n}: a role has at most {MAX_REPLICAS} replicas",
                kind.as_str()
            ))
            .hint("the same limit as `replicas` in a definition"));
        }
    }
    for (name, value) in &opts.set {
        if name.len().max(value.len()) > MAX_STRING_BYTES {
            return Err(Diagnostic::new(format!(
                "--set: a name or value over the {MAX_STRING_BYTES}-byte limit for one string"
            ))
            .hint("the same limit as for a string in a definition"));
        }
    }
    for (name, value) in &opts.set {
        match job.hyperparameters.iter_mut().find(|(k, _)| k == name) {
            Some((_, v)) => v.clone_from(value),
            None => job.hyperparameters.push((name.clone(), value.clone())),
        }
    }
    job.hyperparameters.sort();
    for (kind, n) in &opts.replicas {
        match job.roles.iter_mut().find(|r| r.kind == *kind) {
            Some(role) => role.replicas = *n,
            None => {
                return Err(Diagnostic::new(format!(
                    "--replicas {}={n}: the job has no {} role",
                    kind.as_str(),
                    kind.as_str()
                ))
                .hint("only roles the definition has can be resized locally"));
            }
        }
    }
    job.roles.retain(|r| r.replicas > 0);
    // The definition's rules, again, for the resized job.
    let count = |k: RoleKind| {
        job.roles
            .iter()
            .find(|r| r.kind == k)
            .map_or(0, |r| r.replicas)
    };
    if let Some(e) = tensorflow::layout_error(job.framework.strategy(), count) {
        return Err(Diagnostic::new(format!("--replicas: {e}"))
            .hint("the same rules apply as in the definition"));
    }
    Ok(())
}

/// Whether any task runs `python`, which then has to be there, with
/// TensorFlow, before anything starts.
pub fn uses_python(job: &Job) -> bool {
    job.roles.iter().any(|r| {
        r.command
            .first()
            .is_some_and(|c| c == "python" || c == "python3")
    })
}

/// Free ports on 127.0.0.1, all held until every one is chosen so that no
/// two tasks get the same. (Another program could take one before the task
/// binds it; TensorFlow then fails loudly.)
fn free_ports(n: usize) -> Result<Vec<u16>, Diagnostic> {
    let listeners = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Diagnostic::new(format!("cannot find a free local port: {e}")))?;
    listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Diagnostic::new(format!("cannot find a free local port: {e}")))
}

/// Container paths and the local directories standing in for them, longest
/// first so that nested mounts map to the deepest one.
fn path_map(job: &Job, workdir: &Path) -> Vec<(String, PathBuf)> {
    let mut map: Vec<(String, PathBuf)> = job
        .storage
        .iter()
        .map(|v| {
            (
                v.mount_path.trim_end_matches('/').to_owned(),
                workdir.join("volumes").join(&v.name),
            )
        })
        .collect();
    map.push((
        names::CLUSTER_SPEC_MOUNT.to_owned(),
        workdir.join("cluster-spec"),
    ));
    if let Some(b) = &job.build {
        map.push((
            b.workdir.trim_end_matches('/').to_owned(),
            b.context.clone(),
        ));
    }
    map.sort_by_key(|(from, _)| std::cmp::Reverse(from.len()));
    map
}

/// Rewrites container paths in one argument or variable: a path standing
/// alone (`/data/logs`) or as a flag's value (`--log_dir=/data/logs`).
fn map_value(value: &str, map: &[(String, PathBuf)]) -> String {
    let (prefix, path) = match value.split_once('=') {
        Some((flag, rest)) if flag.starts_with('-') => (format!("{flag}="), rest),
        _ => (String::new(), value),
    };
    for (from, to) in map {
        if let Some(rest) = path.strip_prefix(from.as_str())
            && (rest.is_empty() || rest.starts_with('/'))
        {
            return format!("{prefix}{}{rest}", to.display());
        }
    }
    value.to_owned()
}

/// Every task of the job as a local process.
pub fn tasks(job: &Job, opts: &Options) -> Result<Vec<Task>, Diagnostic> {
    let map = path_map(job, &opts.workdir);
    for (_, dir) in &map {
        if !dir.starts_with(&opts.workdir) {
            continue; // the build context: the user's code, not ours to create
        }
        std::fs::create_dir_all(dir)
            .map_err(|e| Diagnostic::new(format!("cannot create {}: {e}", dir.display())))?;
    }
    match &job.framework {
        Framework::Tensorflow(_) => tensorflow_tasks(job, opts, &map),
        Framework::Pytorch(p) => pytorch_tasks(job, opts, &map, p.nproc_per_node),
    }
}

/// TensorFlow: a process per task, each with a server on its own port.
fn tensorflow_tasks(
    job: &Job,
    opts: &Options,
    map: &[(String, PathBuf)],
) -> Result<Vec<Task>, Diagnostic> {
    let count: u32 = job
        .roles
        .iter()
        .filter(|r| r.kind != RoleKind::Evaluator)
        .map(|r| r.replicas)
        .sum();
    let ports = free_ports(count as usize)?;
    let mut assigned = BTreeMap::new();
    let mut next = ports.iter();
    for role in job.roles.iter().filter(|r| r.kind != RoleKind::Evaluator) {
        for i in 0..role.replicas {
            let port = next
                .next()
                .copied()
                .ok_or_else(|| Diagnostic::new("internal error: too few ports"))?;
            assigned.insert((role.kind, i), port);
        }
    }
    let cluster = ClusterSpec::with_hosts(job, |kind, i, _| {
        format!(
            "127.0.0.1:{}",
            assigned.get(&(kind, i)).copied().unwrap_or(0)
        )
    });
    let spec_dir = opts.workdir.join("cluster-spec");
    for (name, text) in cluster.files() {
        std::fs::write(spec_dir.join(&name), text).map_err(|e| {
            Diagnostic::new(format!(
                "cannot write {}: {e}",
                spec_dir.join(&name).display()
            ))
        })?;
    }
    let mut out = Vec::new();
    for role in &job.roles {
        let (program, command_args) = program(role, opts, map)?;
        for i in 0..role.replicas {
            let index = Index::Fixed(i);
            let mut args = command_args.clone();
            args.extend(
                pod::args(job, role, tensorflow::args(job, role.kind, index, &cluster))
                    .iter()
                    .map(|a| map_value(a, map)),
            );
            let env = tensorflow::env(job, role.kind, index, &cluster, true);
            let env = local_env(job, role, i, env, map);
            out.push(Task {
                name: format!("{}-{i}", role.kind.as_str()),
                kind: role.kind,
                decisive: decisive(job, role.kind, i),
                program: program.clone(),
                args: expand_all(args, &env),
                env,
                listens: assigned.get(&(role.kind, i)).copied(),
            });
        }
    }
    Ok(out)
}

/// PyTorch: what `torchrun` would start on every node, started directly: a
/// process per rank, with the variables `torchrun` gives it and node 0's
/// rendezvous on a free local port. (Starting `torchrun` itself would need
/// one that works: Debian's PyTorch 1.13 has one that fails at start.)
fn pytorch_tasks(
    job: &Job,
    opts: &Options,
    map: &[(String, PathBuf)],
    nproc_per_node: u32,
) -> Result<Vec<Task>, Diagnostic> {
    let Some(role) = job.roles.iter().find(|r| r.kind == RoleKind::Worker) else {
        return Ok(Vec::new());
    };
    let port = free_ports(1)?
        .first()
        .copied()
        .ok_or_else(|| Diagnostic::new("internal error: too few ports"))?;
    let launch = Launch {
        nnodes: role.replicas,
        nproc_per_node,
        rendezvous: None,
    };
    let (program, command_args) = program(role, opts, map)?;
    let mut out = Vec::new();
    for node in 0..role.replicas {
        for local in 0..nproc_per_node {
            let mut args = command_args.clone();
            args.extend(
                pod::args(job, role, Vec::new())
                    .iter()
                    .map(|a| map_value(a, map)),
            );
            let mut env = pytorch::rank_env(&launch, Rank { node, local }, ("127.0.0.1", port));
            // As `torchrun` does, so that P processes of a node do not each
            // start a thread per core.
            if nproc_per_node > 1
                && !role.env.contains_key(pytorch::OMP_THREADS)
                && std::env::var_os(pytorch::OMP_THREADS).is_none()
            {
                env.push((pytorch::OMP_THREADS.to_owned(), "1".to_owned()));
            }
            let env = local_env(job, role, node, env, map);
            out.push(Task {
                name: if nproc_per_node == 1 {
                    format!("{}-{node}", role.kind.as_str())
                } else {
                    format!("{}-{node}.{local}", role.kind.as_str())
                },
                kind: role.kind,
                // Every rank takes part in every step: the run is over
                // when all of them are.
                decisive: true,
                program: program.clone(),
                args: expand_all(args, &env),
                env,
                // Rank 0 holds the rendezvous (the TCP store).
                listens: (node == 0 && local == 0).then_some(port),
            });
        }
    }
    Ok(out)
}

/// The program a role's tasks run, and its own arguments, paths mapped.
fn program(
    role: &Role,
    opts: &Options,
    map: &[(String, PathBuf)],
) -> Result<(PathBuf, Vec<String>), Diagnostic> {
    let Some((program, command_args)) = role.command.split_first() else {
        return Err(Diagnostic::new(format!(
            "the {} role has no command to run locally",
            role.kind.as_str()
        ))
        .hint("set `command` in the definition, or use `build` with an `entrypoint`"));
    };
    let program = if matches!(program.as_str(), "python" | "python3") {
        opts.python.clone()
    } else {
        PathBuf::from(map_value(program, map))
    };
    Ok((
        program,
        command_args.iter().map(|a| map_value(a, map)).collect(),
    ))
}

/// A task's environment as the cluster would give it, with the framework's
/// variables (`TF_CONFIG` is kept as is: its hosts are local already).
/// With the task's index in [`INDEX_VAR`], and `$(VAR)` expanded as the
/// kubelet expands it, in the pod's order ([`pod`]'s `env`): the index,
/// then the variables read from elsewhere, then those with a value, each
/// by name; a value expands only what comes before it.
fn local_env(
    job: &Job,
    role: &Role,
    index: u32,
    framework: Vec<(String, String)>,
    map: &[(String, PathBuf)],
) -> BTreeMap<String, String> {
    let mut env = BTreeMap::from([(INDEX_VAR.to_owned(), index.to_string())]);
    let (references, values): (Vec<_>, Vec<_>) = pod::env_vars(job, role, framework)
        .into_iter()
        .partition(|(_, v)| matches!(v, EnvValue::From(_)));
    for (k, _) in references {
        // What the kubelet would read from a Secret, a ConfigMap or the
        // pod, trainc's own environment stands in for; unset, the task
        // inherits nothing ([`notes`] says so).
        if let Ok(v) = std::env::var(&k) {
            env.insert(k, map_value(&v, map));
        }
    }
    for (k, v) in values {
        let EnvValue::Literal(v) = v else { continue };
        let v = if k == "TF_CONFIG" {
            v
        } else {
            map_value(&v, map)
        };
        let v = expand(&v, &env);
        env.insert(k, v);
    }
    env
}

fn expand_all(args: Vec<String>, env: &BTreeMap<String, String>) -> Vec<String> {
    args.iter().map(|a| expand(a, env)).collect()
}

/// `$(VAR)` replaced by VAR's value, as Kubernetes expands a container's
/// command, arguments and variables: `$$` is one `$`; a name not in `env`,
/// or a `$(` never closed, stays as written.
fn expand(s: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(open) = after.strip_prefix('(')
            && let Some(close) = open.find(')')
        {
            let name = &open[..close];
            match env.get(name) {
                Some(value) => out.push_str(value),
                None => {
                    out.push_str("$(");
                    out.push_str(name);
                    out.push(')');
                }
            }
            rest = &open[close + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// The tasks whose end is the end of training, as the cluster's run policy
/// has it: the chief when there is one; else, for the collective strategy,
/// worker 0 (which saves the model), and for parameter-server training
/// (the TF1 layout, whose workers are peers) every worker.
fn decisive(job: &Job, kind: RoleKind, index: u32) -> bool {
    let chief = job.roles.iter().any(|r| r.kind == RoleKind::Chief);
    match (chief, kind, job.framework.strategy()) {
        (true, kind, _) => kind == RoleKind::Chief,
        (false, RoleKind::Worker, Strategy::MultiWorkerMirrored) => index == 0,
        (false, kind, _) => kind == RoleKind::Worker,
    }
}

/// What the cluster would give the tasks and a local run cannot: variables
/// whose values come from Secrets, ConfigMaps or the pod and are not set in
/// trainc's environment, and `envFrom` sources. One line each, for stdout
/// before the tasks start.
pub fn notes(job: &Job, is_set: impl Fn(&str) -> bool) -> Vec<String> {
    let mut unset: Vec<&str> = job
        .roles
        .iter()
        .flat_map(|r| &r.env)
        .filter(|(k, v)| v.literal().is_none() && !is_set(k))
        .map(|(k, _)| k.as_str())
        .collect();
    unset.sort_unstable();
    unset.dedup();
    let mut sources: Vec<String> = job
        .roles
        .iter()
        .flat_map(|r| &r.env_from)
        .map(|e| {
            let (kind, name) = match (&e.secret_ref, &e.config_map_ref) {
                (Some(r), _) => ("Secret", r.name.as_str()),
                (None, Some(r)) => ("ConfigMap", r.name.as_str()),
                (None, None) => ("", ""),
            };
            match &e.prefix {
                Some(p) => format!("{kind} `{name}` (prefix `{p}`)"),
                None => format!("{kind} `{name}`"),
            }
        })
        .collect();
    sources.sort_unstable();
    sources.dedup();
    let mut out = Vec::new();
    if !unset.is_empty() {
        out.push(format!(
            "note: not set locally: {} (the cluster reads {} from a Secret, a ConfigMap or the pod); set {} in trainc's environment to pass {} on",
            unset.join(", "),
            if unset.len() == 1 { "it" } else { "them" },
            if unset.len() == 1 { "it" } else { "them" },
            if unset.len() == 1 { "it" } else { "them" },
        ));
    }
    if !sources.is_empty() {
        out.push(format!(
            "note: envFrom is not resolved locally: {}; the tasks see only trainc's own environment",
            sources.join(", ")
        ));
    }
    out
}

/// What the preflight check does, said before it starts: importing the
/// framework takes seconds.
pub fn preflight_status(python: &Path, job: &Job) -> String {
    let name = match job.framework {
        Framework::Tensorflow(_) => "TensorFlow",
        Framework::Pytorch(_) => "PyTorch",
    };
    format!(
        "checking the Python environment: importing {name} with `{}`",
        python.display()
    )
}

/// Checks that `python` runs and has the job's framework, before starting
/// anything.
pub fn preflight(python: &Path, job: &Job) -> Result<(), Diagnostic> {
    let shown = python.display();
    let version = &job.framework_version;
    let (module, name, install) = match job.framework {
        Framework::Tensorflow(_) => (
            "tensorflow",
            "TensorFlow",
            format!("tensorflow-cpu=={version}.*"),
        ),
        Framework::Pytorch(_) => ("torch", "PyTorch", format!("torch=={version}.*")),
    };
    let out = Command::new(python)
        .args(["-c", &format!("import {module}; print({module}.__version__)")])
        .env("TF_CPP_MIN_LOG_LEVEL", "3")
        .output()
        .map_err(|e| {
            Diagnostic::new(format!("cannot run the Python interpreter `{shown}`: {e}")).hint(
                format!("install Python 3, or pass `--python` with the interpreter of a virtual environment that has {name}"),
            )
        })?;
    if !out.status.success() {
        return Err(Diagnostic::new(format!(
            "{name} is not installed for `{shown}`"
        ))
        .hint(format!(
            "install it with `{shown} -m pip install {install}` and the job's requirements, or pass `--python` with another interpreter"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_expand_as_the_kubelet_expands_them() {
        let env = BTreeMap::from([
            ("TRAINC_TASK_INDEX".to_owned(), "3".to_owned()),
            ("EMPTY".to_owned(), String::new()),
        ]);
        for (written, expanded) in [
            ("--shard=$(TRAINC_TASK_INDEX)", "--shard=3"),
            ("$(TRAINC_TASK_INDEX)-$(TRAINC_TASK_INDEX)", "3-3"),
            ("a$(EMPTY)b", "ab"),
            ("$(UNSET) stays", "$(UNSET) stays"),
            (
                "$$(TRAINC_TASK_INDEX) is escaped",
                "$(TRAINC_TASK_INDEX) is escaped",
            ),
            ("$$", "$"),
            ("$x and $", "$x and $"),
            ("$(never closed", "$(never closed"),
            ("ünïcode $(TRAINC_TASK_INDEX)", "ünïcode 3"),
        ] {
            assert_eq!(expand(written, &env), expanded, "{written}");
        }
    }

    #[test]
    fn container_paths_map_to_local_directories() {
        let map = vec![
            ("/data/logs".to_owned(), PathBuf::from("/w/logs")),
            ("/data".to_owned(), PathBuf::from("/w/data")),
            ("/app".to_owned(), PathBuf::from("/src/train")),
        ];
        assert_eq!(map_value("/app/mnist.py", &map), "/src/train/mnist.py");
        assert_eq!(
            map_value("--model_dir=/data/model", &map),
            "--model_dir=/w/data/model"
        );
        assert_eq!(map_value("/data/logs/x", &map), "/w/logs/x");
        assert_eq!(map_value("/database", &map), "/database");
        assert_eq!(map_value("--epochs=5", &map), "--epochs=5");
        assert_eq!(map_value("a=/data", &map), "a=/data");
    }
}
