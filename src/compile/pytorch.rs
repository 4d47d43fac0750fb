//! Stage 3 (compile), framework PyTorch: `torchrun` starting the processes
//! of each node, with static rendezvous at node 0; the environment every
//! process sees, on every target and in `trainc run --local`; and, for
//! validation, what PyTorch asks of a definition.
//!
//! A PyTorch job's nodes are the `worker` role's tasks. Each runs
//! `torchrun --nnodes=N --nproc-per-node=P --node-rank=<i>
//! --master-addr=<node 0> --master-port=<port> <program>`, which starts P
//! processes and gives each the variables of [`rank_env`]. Static
//! rendezvous knows no membership changes: a node that restarts alone waits
//! for peers that are gone, so a run restarts every node together (JobSet)
//! or fails as a whole (plain Jobs, PyTorchJob), never one node at a time.
//!
//! An elastic run (`torchrun.elastic`) uses c10d rendezvous instead:
//! `--nnodes=MIN:MAX --rdzv-backend=c10d --rdzv-endpoint=<node 0's host
//! name>:<port> --rdzv-id=<run>`. Node 0's `torchrun` hosts the rendezvous
//! store because the endpoint is its own host name (`torchrun` compares
//! the two); the other nodes reach it through a Service of that name
//! (the operator's on `pytorchjob`, trainc's on the targets without one).
//! Membership may change: a node that restarts alone rejoins, and the
//! others restart their processes with it, so its pod may restart in place.

use crate::compile::Run;
use crate::compile::index::Index;
use crate::load::Findings;
use crate::model::definition::RoleKind;
use crate::model::definition::{Target, TrainingJob};
use crate::model::job::env_scopes;
use crate::model::job::{Elastic, Framework, Role};

/// The program that starts a node's processes.
pub const LAUNCHER: &str = "torchrun";
/// The container port's name on the targets without an operator: node 0's
/// rendezvous store listens on it.
pub const PORT_NAME: &str = "rendezvous";

/// The variables `torchrun` sets in every process it starts (see
/// [`rank_env`]); a definition setting one would be overridden or would
/// mislead.
pub const RESERVED_ENV: [&str; 14] = [
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
    "ROLE_RANK",
    "ROLE_WORLD_SIZE",
    "ROLE_NAME",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RESTART_COUNT",
    "TORCHELASTIC_MAX_RESTARTS",
    "TORCHELASTIC_RUN_ID",
];

/// Set to 1 by `torchrun` when it starts several processes per node and
/// the environment does not set it.
pub const OMP_THREADS: &str = "OMP_NUM_THREADS";

/// How `torchrun` is started on each node of a run.
#[derive(Debug, Clone)]
pub struct Launch {
    pub nnodes: u32,
    pub nproc_per_node: u32,
    /// Where the nodes meet; `None` where the operator passes the whole
    /// launch (rendezvous and processes per node) in `PET_*` variables,
    /// which `torchrun` reads as its flags' defaults.
    pub rendezvous: Option<Rendezvous>,
}

/// How a run's nodes find each other.
#[derive(Debug, Clone)]
pub enum Rendezvous {
    /// At node 0's address and port, each node with the rank of its index.
    Static { master: String, port: u16 },
    /// c10d, hosted by node 0's `torchrun` at `host:port`, where `host` is
    /// node 0's host name; ranks are handed out as nodes join.
    Elastic {
        host: String,
        port: u16,
        id: String,
        elastic: Elastic,
    },
}

impl Launch {
    /// The elastic launch, when the nodes meet at a c10d rendezvous.
    pub fn elastic(&self) -> Option<&Elastic> {
        match &self.rendezvous {
            Some(Rendezvous::Elastic { elastic, .. }) => Some(elastic),
            _ => None,
        }
    }

    /// The container command of node `index`: `torchrun`, its flags, then
    /// the program. A `python` command becomes `torchrun`'s script (run by
    /// the interpreter `torchrun` runs under, the image's); anything else
    /// runs as is (`--no-python`).
    pub fn command(&self, program: &[String], index: Index) -> Vec<String> {
        let mut c = vec![LAUNCHER.to_owned()];
        match &self.rendezvous {
            None => {}
            Some(Rendezvous::Static { master, port }) => {
                c.push(format!("--nnodes={}", self.nnodes));
                c.push(format!("--nproc-per-node={}", self.nproc_per_node));
                c.push(format!("--node-rank={}", index.render()));
                c.push(format!("--master-addr={master}"));
                c.push(format!("--master-port={port}"));
            }
            Some(Rendezvous::Elastic {
                host,
                port,
                id,
                elastic,
            }) => {
                c.push(format!(
                    "--nnodes={}:{}",
                    elastic.min_nodes, elastic.max_nodes
                ));
                c.push(format!("--nproc-per-node={}", self.nproc_per_node));
                c.push("--rdzv-backend=c10d".to_owned());
                c.push(format!("--rdzv-endpoint={host}:{port}"));
                c.push(format!("--rdzv-id={id}"));
                c.push(format!("--max-restarts={}", elastic.max_restarts));
            }
        }
        c.extend(script(program));
        c
    }
}

/// A run's nodes (the `worker` role) and `torchrun`'s launch, with the
/// rendezvous at node 0, whose pod's host name is `host(run, role, 0)`:
/// static, at its name under the run's headless Service (`master(host)`),
/// or elastic, at the host name itself. `None` for jobs of other
/// frameworks, or without workers (which validation refuses).
pub fn nodes<'a>(
    run: &Run<'a>,
    host: fn(&str, &str, u32) -> String,
    master: impl Fn(&str) -> String,
) -> Option<(&'a Role, Launch)> {
    let job = run.job;
    let Framework::Pytorch(p) = &job.framework else {
        return None;
    };
    let role = job.roles.iter().find(|r| r.kind == RoleKind::Worker)?;
    let node_zero = host(&run.name, role.kind.as_str(), 0);
    let rendezvous = match &p.elastic {
        Some(elastic) => Rendezvous::Elastic {
            host: node_zero,
            port: role.port,
            id: run.name.clone(),
            elastic: elastic.clone(),
        },
        None => Rendezvous::Static {
            master: master(&node_zero),
            port: role.port,
        },
    };
    let launch = Launch {
        nnodes: role.replicas,
        nproc_per_node: p.nproc_per_node,
        rendezvous: Some(rendezvous),
    };
    Some((role, launch))
}

/// `torchrun`'s positional part for a program's command.
fn script(program: &[String]) -> Vec<String> {
    match program {
        [python, rest @ ..] if is_python(python) => match rest {
            [m, module, args @ ..] if m == "-m" => {
                let mut out = vec!["--module".to_owned(), module.clone()];
                out.extend(args.iter().cloned());
                out
            }
            [script, ..] if !script.starts_with('-') => rest.to_vec(),
            _ => no_python(program),
        },
        _ => no_python(program),
    }
}

fn no_python(program: &[String]) -> Vec<String> {
    let mut out = vec!["--no-python".to_owned()];
    out.extend(program.iter().cloned());
    out
}

fn is_python(program: &str) -> bool {
    matches!(program, "python" | "python3")
}

/// One process of a run: which node, which of its processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rank {
    pub node: u32,
    pub local: u32,
}

/// The variables `torchrun` gives process `rank` under static rendezvous
/// at `master`: what the program sees on every target, and what
/// `trainc run --local` sets when it starts the processes itself.
pub fn rank_env(launch: &Launch, rank: Rank, master: (&str, u16)) -> Vec<(String, String)> {
    let world = launch.nnodes * launch.nproc_per_node;
    let global = rank.node * launch.nproc_per_node + rank.local;
    [
        ("RANK", global.to_string()),
        ("LOCAL_RANK", rank.local.to_string()),
        ("WORLD_SIZE", world.to_string()),
        ("LOCAL_WORLD_SIZE", launch.nproc_per_node.to_string()),
        ("GROUP_RANK", rank.node.to_string()),
        ("GROUP_WORLD_SIZE", launch.nnodes.to_string()),
        ("ROLE_RANK", global.to_string()),
        ("ROLE_WORLD_SIZE", world.to_string()),
        ("ROLE_NAME", "default".to_owned()),
        ("MASTER_ADDR", master.0.to_owned()),
        ("MASTER_PORT", master.1.to_string()),
        ("TORCHELASTIC_RESTART_COUNT", "0".to_owned()),
        ("TORCHELASTIC_MAX_RESTARTS", "0".to_owned()),
        ("TORCHELASTIC_RUN_ID", "none".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

/// What a target can do with a PyTorch run's nodes (from its registration,
/// `compile::target::Backend`).
#[derive(Debug, Clone, Copy)]
pub struct Nodes {
    pub target: Target,
    /// It restarts every node of a run together.
    pub restarts_whole_runs: bool,
    /// Something can add nodes to a running run.
    pub scales_nodes: bool,
}

/// What PyTorch asks of a definition (the schema has refused TensorFlow's
/// roles and fields already).
pub(crate) fn check(cx: &mut Findings, def: &TrainingJob, target: Nodes) {
    let spec = &def.spec;
    match RoleKind::Worker.of(&spec.roles) {
        None => cx.error_at_key(
            "/spec/roles",
            "a PyTorch job needs `worker` tasks: its nodes",
            "add `worker: {replicas: <nodes>}`; `torchrun` starts `nprocPerNode` processes on each",
        ),
        Some(w) if w.replicas == 0 => cx.error(
            "/spec/roles/worker/replicas",
            "a PyTorch job needs at least one node",
            "set `replicas` to the number of nodes, 1 or more",
        ),
        Some(w) => {
            let gpus = w.resources.gpu.unwrap_or(0);
            let nproc = spec.torchrun.as_ref().and_then(|t| t.nproc_per_node);
            if let Some(n) = nproc
                && gpus > 0
                && n > gpus
            {
                cx.error(
                    "/spec/torchrun/nprocPerNode",
                    format!("{n} processes per node, but each node has {gpus} GPUs"),
                    "DDP gives each process a GPU of its own: leave `nprocPerNode` out to start one per GPU",
                );
            }
        }
    }
    for (at, command) in commands(def) {
        match command.first().map(String::as_str) {
            Some(LAUNCHER) => cx.error(
                &format!("{at}/0"),
                "trainc starts `torchrun` itself, with the run's rendezvous",
                "set `command` to the program `torchrun` starts, e.g. `[python, /app/train.py]`",
            ),
            Some(_) => {}
            None => cx.error_at_key(
                &at,
                "`torchrun` needs a program to start",
                "give the program as `command`",
            ),
        }
    }
    if spec.build.is_none()
        && spec.command.is_empty()
        && RoleKind::Worker
            .of(&spec.roles)
            .is_some_and(|w| w.command.is_none())
    {
        cx.error_at_key(
            if spec.image.is_some() {
                "/spec/image"
            } else {
                "/spec/roles/worker"
            },
            "`torchrun` needs a program to start, and the image's own entrypoint cannot be wrapped",
            "set `command`, e.g. `[python, /app/train.py]`, or use `build` with an `entrypoint`",
        );
    }
    for (at, env) in env_scopes(def) {
        for name in RESERVED_ENV {
            if env.contains_key(name) {
                cx.error_at_key(
                    &format!("{at}/{name}"),
                    format!("`torchrun` sets `{name}` in every process"),
                    "remove it; the table of what each process sees is in docs/pytorch.md",
                );
            }
        }
    }
    if let Some(elastic) = spec.elastic() {
        check_elastic(cx, def, elastic, target);
        return;
    }
    let rp = &spec.run_policy;
    if rp.restart_policy.as_deref() == Some("OnFailure") {
        cx.error(
            "/spec/runPolicy/restartPolicy",
            "a PyTorch node restarted alone cannot rejoin a static rendezvous: its peers are gone",
            "set `torchrun.elastic: {minNodes: <n>}` (c10d rendezvous, which a restarted node rejoins), or remove `restartPolicy` and use `backoffLimit` on the `jobset` target, which restarts every node together",
        );
    }
    if let Some(n) = rp.backoff_limit
        && n > 0
        && !target.restarts_whole_runs
    {
        cx.error(
            "/spec/runPolicy/backoffLimit",
            format!(
                "the `{}` target cannot restart every node of a PyTorch run together, and a node restarted alone waits for its peers forever",
                target.target.as_str()
            ),
            "set `torchrun.elastic: {minNodes: <n>}` (c10d rendezvous, which a restarted node rejoins), remove `backoffLimit` (a failure then fails the run), or use the `jobset` target, which restarts every node together up to `backoffLimit` times",
        );
    }
}

/// What elastic training asks: node counts around the nodes trainc starts.
/// (Whether the target runs it at all is the target's own check.)
fn check_elastic(
    cx: &mut Findings,
    def: &TrainingJob,
    elastic: &crate::model::definition::Elastic,
    target: Nodes,
) {
    let Some(nodes) = RoleKind::Worker.of(&def.spec.roles).map(|w| w.replicas) else {
        return;
    };
    if elastic.min_nodes > nodes {
        cx.error(
            "/spec/torchrun/elastic/minNodes",
            format!(
                "{} nodes at least, but the run starts {nodes}",
                elastic.min_nodes
            ),
            format!(
                "set `minNodes` to {nodes} or fewer, or start more nodes (`roles.worker.replicas`)"
            ),
        );
    }
    match elastic.max_nodes {
        Some(max) if max < nodes => cx.error(
            "/spec/torchrun/elastic/maxNodes",
            format!("{max} nodes at most, but the run starts {nodes}"),
            format!("set `maxNodes` to {nodes} or more, or leave it out (it defaults to `roles.worker.replicas`)"),
        ),
        Some(max) if max > nodes && !target.scales_nodes => cx.error(
            "/spec/torchrun/elastic/maxNodes",
            format!(
                "up to {max} nodes, but on `{}` a run has the {nodes} nodes it starts: nothing adds more",
                target.target.as_str()
            ),
            "leave `maxNodes` out, or use the `pytorchjob` target, whose PyTorchJob can be scaled up to it",
        ),
        _ => {}
    }
}

/// The commands a definition sets, by pointer (the job's, the worker's).
fn commands(def: &TrainingJob) -> Vec<(String, &Vec<String>)> {
    let mut out = Vec::new();
    if !def.spec.command.is_empty() {
        out.push(("/spec/command".to_owned(), &def.spec.command));
    }
    if let Some(c) = RoleKind::Worker
        .of(&def.spec.roles)
        .and_then(|w| w.command.as_ref())
    {
        out.push(("/spec/roles/worker/command".to_owned(), c));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn programs_become_torchruns_script() {
        assert_eq!(
            script(&strings(&["python", "/app/train.py", "--x"])),
            strings(&["/app/train.py", "--x"])
        );
        assert_eq!(
            script(&strings(&["python3", "-m", "pkg.train", "--x"])),
            strings(&["--module", "pkg.train", "--x"])
        );
        assert_eq!(
            script(&strings(&["python", "-u", "train.py"])),
            strings(&["--no-python", "python", "-u", "train.py"])
        );
        assert_eq!(
            script(&strings(&["/bin/train"])),
            strings(&["--no-python", "/bin/train"])
        );
    }

    #[test]
    fn an_elastic_launch_meets_at_node_zero_s_host_name_whatever_the_index() {
        let launch = Launch {
            nnodes: 3,
            nproc_per_node: 2,
            rendezvous: Some(Rendezvous::Elastic {
                host: "r-worker-0".to_owned(),
                port: 29500,
                id: "r".to_owned(),
                elastic: Elastic {
                    min_nodes: 2,
                    max_nodes: 3,
                    max_restarts: 1,
                },
            }),
        };
        // No `--node-rank`: c10d hands out ranks as nodes join.
        let expected = strings(&[
            "torchrun",
            "--nnodes=2:3",
            "--nproc-per-node=2",
            "--rdzv-backend=c10d",
            "--rdzv-endpoint=r-worker-0:29500",
            "--rdzv-id=r",
            "--max-restarts=1",
            "/app/train.py",
        ]);
        let program = strings(&["python", "/app/train.py"]);
        assert_eq!(launch.command(&program, Index::Fixed(1)), expected);
        assert_eq!(launch.elastic().map(|e| e.min_nodes), Some(2));
    }

    #[test]
    fn ranks_count_node_by_node() {
        let launch = Launch {
            nnodes: 2,
            nproc_per_node: 4,
            rendezvous: None,
        };
        let env = rank_env(&launch, Rank { node: 1, local: 2 }, ("h", 1));
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("RANK"), Some("6"));
        assert_eq!(get("LOCAL_RANK"), Some("2"));
        assert_eq!(get("WORLD_SIZE"), Some("8"));
        assert_eq!(get("GROUP_RANK"), Some("1"));
        assert_eq!(env.len(), RESERVED_ENV.len());
    }
}
