//! Elastic PyTorch (`torchrun.elastic`), shown by the real `torchrun`: the
//! command trainc writes into every node's pod, started three times on this
//! machine with Debian's PyTorch (`TRAINC_TORCH_PYTHON`), as three nodes.
//! A node killed mid-run leaves the others training on (at least
//! `minNodes` remain), its restart rejoins them, and the run ends with
//! every node succeeding: what a pod restarted `OnFailure` does in a
//! cluster, where kwok runs no container (tests/cluster.rs shows the
//! controllers' side).

mod common;

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The command and arguments of the `pytorch` container of the elastic
/// fixture's Job, as built for the `kubernetes` target, and node 0's host
/// name (the Job's pod of index 0).
fn built_command() -> (Vec<String>, String) {
    let (_dir, tree) = common::build_example("pytorch-elastic");
    let (_, job) = tree
        .iter()
        .find(|(path, _)| path.ends_with("/job-elastic-worker.yaml"))
        .expect("the Job of the nodes");
    let job: Value =
        serde_saphyr::from_str(std::str::from_utf8(job).expect("UTF-8")).expect("YAML");
    let container = &job["spec"]["template"]["spec"]["containers"][0];
    let words = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|w| w.as_str().map(str::to_owned))
            .collect()
    };
    let mut command = words(&container["command"]);
    command.extend(words(&container["args"]));
    let node_zero = format!("{}-0", job["metadata"]["name"].as_str().expect("name"));
    (command, node_zero)
}

/// The pod's command, to run here: `torchrun` as the module it is, the
/// rendezvous at a free local port instead of node 0's Service (every
/// node on this machine: the first to start hosts the store), the
/// fixture's program for `/app/train.py`. And what Debian's PyTorch 1.13
/// on Python 3.11 needs: flags spelled with underscores (recent releases
/// take both spellings) and explicit output redirects (its parser of the
/// default, `0`, fails there); and shorter waits, so that the test takes
/// a minute: the agents look at their processes every second, and a
/// rendezvous with at least `minNodes` waits 3 s, not 30, for more.
fn local_command(pod: &[String], node_zero: &str, python: &Path, port: u16) -> Command {
    let program =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pytorch-elastic/train/train.py");
    let mut words = pod.iter();
    assert_eq!(
        words.next().map(String::as_str),
        Some("torchrun"),
        "{pod:?}"
    );
    let mut c = Command::new(python);
    c.args(["-m", "torch.distributed.run"]);
    let mut endpoint = None;
    for w in words.by_ref() {
        let Some((flag, value)) = w.split_once('=').filter(|_| w.starts_with("--")) else {
            assert_eq!(w, "/app/train.py", "{pod:?}");
            break;
        };
        let value = if flag == "--rdzv-endpoint" {
            endpoint = Some(value.to_owned());
            format!("127.0.0.1:{port}")
        } else {
            value.to_owned()
        };
        let flag = flag.trim_start_matches("--").replace('-', "_");
        c.arg(format!("--{flag}={value}"));
    }
    assert_eq!(
        endpoint,
        Some(format!("{node_zero}:29500")),
        "the rendezvous is node 0's host name: {pod:?}"
    );
    c.args([
        "--monitor_interval=1",
        "--rdzv_conf=last_call_timeout=3",
        "-r",
        "1",
        "-t",
        "1",
    ]);
    c.arg(program).args(words);
    c
}

/// One node: its `torchrun` in a process group of its own (so that it
/// dies with the processes it started), its output in a file.
struct Node {
    child: Child,
    log: PathBuf,
}

impl Node {
    fn start(mut command: Command, log: PathBuf) -> Self {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .expect("log");
        let child = command
            .env("STEPS", "100")
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("log"))
            .stderr(file)
            .process_group(0)
            .spawn()
            .expect("torchrun starts");
        Self { child, log }
    }

    fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// What a node lost with its pod does: every process gone at once.
    fn kill(&mut self) {
        let group = i32::try_from(self.child.id()).expect("pid");
        // SAFETY: kill(2) on a process group of our own child.
        unsafe { libc::kill(-group, libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.kill();
        }
    }
}

/// Waits until `until` holds, failing with every node's output after
/// `limit`.
fn wait(what: &str, nodes: &[Node], limit: Duration, until: impl Fn() -> bool) {
    let start = Instant::now();
    while !until() {
        if start.elapsed() > limit {
            let logs: Vec<String> = nodes.iter().map(Node::output).collect();
            panic!("{what}: not within {limit:?}\n{}", logs.join("\n----\n"));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The lines a node's processes printed (`torchrun` prefixes them with
/// the process's name, `[default0]:`).
fn said(node: &Node) -> Vec<String> {
    node.output()
        .lines()
        .filter_map(|l| l.split_once("]:").map(|(_, said)| said.to_owned()))
        .filter(|l| l.starts_with("start ") || l.starts_with("done "))
        .collect()
}

#[test]
fn a_node_lost_mid_run_leaves_the_others_training_and_rejoins() {
    let Some(python) = common::tool("TRAINC_TORCH_PYTHON", "python-with-torch") else {
        return;
    };
    let (pod, node_zero) = built_command();
    // `--nnodes=2:3`: three nodes start, two suffice; `--max-restarts=2`.
    assert!(pod.contains(&"--nnodes=2:3".to_owned()), "{pod:?}");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let logs = tempfile::tempdir().expect("tempdir");
    let node = |i: usize| {
        Node::start(
            local_command(&pod, &node_zero, &python, port),
            logs.path().join(format!("node-{i}.log")),
        )
    };
    let minute = Duration::from_secs(60);
    // Node 0 first, as in a cluster only node 0 hosts the store.
    let mut nodes = vec![node(0)];
    wait("node 0 hosts the rendezvous", &nodes, minute, || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    nodes.push(node(1));
    nodes.push(node(2));
    wait("three nodes train", &nodes, 2 * minute, || {
        nodes
            .iter()
            .all(|n| said(n).iter().any(|l| l.contains("world=3 restart=0")))
    });

    // Node 2 is lost: the others' collective fails, their `torchrun`
    // restarts their processes (the first of `--max-restarts`), and they
    // train on as two.
    nodes[2].kill();
    wait("two nodes train on", &nodes, 2 * minute, || {
        nodes[..2]
            .iter()
            .all(|n| said(n).iter().any(|l| l.contains("world=2 restart=1")))
    });

    // Node 2 restarts (`OnFailure`) and rejoins: every node's processes
    // start again as three. `torchrun` does not count a node joining as a
    // failure, but a node whose process fails first (its peer's was
    // restarted for the newcomer) counts one more: every node ends within
    // its `--max-restarts=2`, the survivors with one or two.
    nodes[2] = node(2);
    let start = Instant::now();
    for n in &mut nodes {
        while matches!(n.child.try_wait(), Ok(None)) && start.elapsed() < 3 * minute {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    let outputs: Vec<String> = nodes.iter().map(Node::output).collect();
    let all = outputs.join("\n----\n");
    for n in &mut nodes {
        let status = n.child.try_wait().expect("wait");
        assert!(status.is_some_and(|s| s.success()), "{status:?}\n{all}");
    }
    for (i, n) in nodes.iter().enumerate() {
        let lines = said(n);
        let restarts: &[&str] = if i == 2 { &["0", "1"] } else { &["1", "2"] };
        let done = lines
            .last()
            .and_then(|l| l.strip_prefix("done "))
            .and_then(|l| l.split_once(" world=3 restart="))
            .map(|(_, restart)| restart);
        assert!(
            done.is_some_and(|r| restarts.contains(&r)),
            "node {i}: {lines:?}\n{all}"
        );
    }
}
