//! Starting the tasks, relaying their output line by line with a prefix,
//! deciding when training is over, and making sure no process outlives the
//! run: not on success, not on failure, not on Ctrl-C.

use std::io::{BufRead as _, BufReader, Read, Write as _};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process_group};

use super::Task;
use crate::diagnostic::Diagnostic;

/// How long the other tasks get to exit on their own once training is over
/// (parameter servers that watch for the end), before they are stopped.
const GRACE: Duration = Duration::from_secs(15);
/// Between SIGTERM and SIGKILL.
const TERM_WAIT: Duration = Duration::from_secs(5);
const POLL: Duration = Duration::from_millis(50);

struct Running {
    task: Task,
    child: Child,
    status: Option<ExitStatus>,
    relays: Vec<thread::JoinHandle<()>>,
}

/// How a run ended.
#[derive(Debug)]
pub struct Outcome {
    /// The training's exit code.
    pub code: i32,
    /// Every task started, in order, with how it ended (`None`: it could
    /// not be waited for).
    pub tasks: Vec<(String, Option<ExitStatus>)>,
}

/// Runs the tasks to the end. The training's exit code is 0 once every
/// decisive task (see `Task::decisive`) has exited successfully. A task
/// failing before that ends the run with its code. Ctrl-C stops everything
/// and returns 130. `all_to_stderr` relays the tasks' stdout to stderr too,
/// leaving stdout to trainc's own report.
pub fn supervise(
    tasks: Vec<Task>,
    workdir: &std::path::Path,
    all_to_stderr: bool,
) -> Result<Outcome, Diagnostic> {
    let interrupted = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&interrupted))
            .map_err(|e| Diagnostic::new(format!("cannot handle signals: {e}")))?;
    }
    let mut running: Vec<Running> = Vec::new();
    for task in tasks {
        match start(&task, workdir, all_to_stderr) {
            Ok((child, relays)) => running.push(Running {
                task,
                child,
                status: None,
                relays,
            }),
            Err(e) => {
                stop(&mut running);
                return Err(Diagnostic::new(format!(
                    "cannot start {} (`{}`): {e}",
                    task.name,
                    task.program.display()
                ))
                .hint(
                    "check the role's `command`; locally it runs on this machine, not in the image",
                ));
            }
        }
    }
    let mut servers = Servers::new(&running);
    let mut outcome = loop {
        if interrupted.load(Ordering::Relaxed) {
            note("interrupted; stopping every task");
            break 130;
        }
        reap(&mut running);
        servers.look(&running);
        if let Some(failed) = running
            .iter()
            .find(|r| r.status.is_some_and(|s| !s.success()))
        {
            note(&format!(
                "{} failed; stopping the other tasks",
                failed.task.name
            ));
            break code(failed.status);
        }
        let done = running
            .iter()
            .filter(|r| r.task.decisive)
            .all(|r| r.status.is_some());
        if done {
            break 0;
        }
        thread::sleep(POLL);
    };
    if outcome == 0 && running.iter().any(|r| r.status.is_none()) {
        // Let the servers notice the end and leave by themselves.
        note(&format!(
            "training is over; waiting up to {} s for {} to exit on their own",
            GRACE.as_secs(),
            still_running(&running)
        ));
        let until = Instant::now() + GRACE;
        while Instant::now() < until && running.iter().any(|r| r.status.is_none()) {
            if interrupted.load(Ordering::Relaxed) {
                note("interrupted; stopping every task");
                outcome = 130;
                break;
            }
            thread::sleep(POLL);
            reap(&mut running);
        }
        if outcome == 0 && running.iter().any(|r| r.status.is_none()) {
            note(&format!(
                "{} still running after {} s; stopping them",
                still_running(&running),
                GRACE.as_secs()
            ));
        }
    }
    stop(&mut running);
    for r in &mut running {
        for relay in r.relays.drain(..) {
            let _ = relay.join();
        }
    }
    Ok(Outcome {
        code: outcome,
        tasks: running
            .into_iter()
            .map(|r| (r.task.name, r.status))
            .collect(),
    })
}

/// The tasks still running, for a note: `ps-0, worker-1`.
fn still_running(running: &[Running]) -> String {
    running
        .iter()
        .filter(|r| r.status.is_none())
        .map(|r| r.task.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The tasks' servers (`Task::listens`) trainc waits to see listening, so
/// that the seconds a framework takes to start are not silent: one note
/// when the wait starts and one when every server accepts connections.
/// Looking is a TCP connection to 127.0.0.1, closed at once; it never holds
/// up the run, and a task that exits first is no longer waited for.
struct Servers {
    /// Index into the running tasks, and the port.
    pending: Vec<(usize, u16)>,
    since: Instant,
    /// A server exited before it listened: "every server" is no longer true.
    lost: bool,
}

impl Servers {
    fn new(running: &[Running]) -> Servers {
        let pending: Vec<(usize, u16)> = running
            .iter()
            .enumerate()
            .filter_map(|(i, r)| r.task.listens.map(|p| (i, p)))
            .collect();
        if !pending.is_empty() {
            note(&format!(
                "waiting for the servers to listen: {}",
                pending
                    .iter()
                    .map(|&(i, port)| format!("{} on port {port}", running[i].task.name))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        Servers {
            pending,
            since: Instant::now(),
            lost: false,
        }
    }

    fn look(&mut self, running: &[Running]) {
        if self.pending.is_empty() {
            return;
        }
        let lost = &mut self.lost;
        self.pending.retain(|&(i, port)| {
            if running[i].status.is_some() {
                *lost = true;
                return false;
            }
            let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
            TcpStream::connect_timeout(&addr, POLL).is_err()
        });
        if self.pending.is_empty() && !self.lost {
            note(&format!(
                "every server is listening, {:.1} s after the start",
                self.since.elapsed().as_secs_f64()
            ));
        }
    }
}

/// Notes the tasks that have exited since the last look.
fn reap(running: &mut [Running]) {
    for r in running {
        if r.status.is_none()
            && let Ok(Some(status)) = r.child.try_wait()
        {
            note(&format!("{} exited: {}", r.task.name, describe(status)));
            r.status = Some(status);
        }
    }
}

fn start(
    task: &Task,
    workdir: &std::path::Path,
    all_to_stderr: bool,
) -> std::io::Result<(Child, Vec<thread::JoinHandle<()>>)> {
    let mut child = Command::new(&task.program)
        .args(&task.args)
        .envs(&task.env)
        .current_dir(workdir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group: one signal reaches whatever the task
        // started, and the terminal's Ctrl-C reaches trainc, which decides.
        .process_group(0)
        .spawn()?;
    let mut relays = Vec::new();
    if let Some(out) = child.stdout.take() {
        relays.push(relay(out, task.name.clone(), all_to_stderr));
    }
    if let Some(err) = child.stderr.take() {
        relays.push(relay(err, task.name.clone(), true));
    }
    Ok((child, relays))
}

/// Copies a stream line by line, each line prefixed with `[name] `.
fn relay(
    stream: impl Read + Send + 'static,
    name: String,
    to_stderr: bool,
) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let mut reader = BufReader::new(stream);
        let mut line = Vec::new();
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let text = String::from_utf8_lossy(&line);
                    let text = text.trim_end_matches(['\n', '\r']);
                    // One write per line: lines of different tasks never mix.
                    let out = format!("[{name}] {text}\n");
                    let _ = if to_stderr {
                        std::io::stderr().lock().write_all(out.as_bytes())
                    } else {
                        std::io::stdout().lock().write_all(out.as_bytes())
                    };
                }
            }
        }
    })
}

/// SIGTERM to every task still running (its whole process group), SIGKILL
/// to those still there after [`TERM_WAIT`], and reaps them all.
fn stop(running: &mut [Running]) {
    let alive = |r: &mut Running| r.status.is_none() && r.child.try_wait().ok().flatten().is_none();
    for r in running.iter_mut() {
        if alive(r) {
            signal(r, Signal::TERM);
        }
    }
    let until = Instant::now() + TERM_WAIT;
    while Instant::now() < until && running.iter_mut().any(alive) {
        thread::sleep(POLL);
    }
    for r in running.iter_mut() {
        if alive(r) {
            note(&format!("{} did not stop; killing it", r.task.name));
            signal(r, Signal::KILL);
        }
        if r.status.is_none() {
            r.status = r.child.wait().ok();
        }
    }
    // Anything the tasks left in their groups goes too.
    for r in running.iter() {
        signal(r, Signal::KILL);
    }
}

fn signal(r: &Running, sig: Signal) {
    if let Some(pid) = i32::try_from(r.child.id()).ok().and_then(Pid::from_raw) {
        let _ = kill_process_group(pid, sig);
    }
}

fn code(status: Option<ExitStatus>) -> i32 {
    use std::os::unix::process::ExitStatusExt as _;
    match status {
        Some(s) => s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0)),
        None => 1,
    }
}

fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt as _;
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exit code {c}"),
        (None, Some(s)) => format!("signal {s}"),
        _ => "unknown status".to_owned(),
    }
}

fn note(message: &str) {
    let _ = writeln!(std::io::stderr().lock(), "trainc: {message}");
}
