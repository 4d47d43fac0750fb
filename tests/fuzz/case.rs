//! A fuzz case and the runner that executes it and checks the properties.
//!
//! A case is a scratch project (a copy of a bundled example or fixture),
//! then steps: files written or removed, and trainc command lines run in
//! the project. Generated cases and recorded regression cases
//! (`tests/fixtures/fuzz/*.json`) are the same thing and run the same way.

use std::collections::{BTreeMap, HashMap};
use std::io::Write as _;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Mutex, Once, OnceLock};
use std::time::{Duration, Instant};

use clap::Parser as _;
use serde::{Deserialize, Serialize};
use trainc::cli::{self, Cli, Status};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    /// What the case found, and where it came from.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
    /// The project copied into the scratch directory, relative to the
    /// repository: `examples/mnist`, `tests/fixtures/kitchen-sink`, …
    pub base: String,
    pub steps: Vec<Step>,
    /// For a recorded case, the exit code of each command line in order:
    /// what keeps it testing what it was recorded for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<Vec<u8>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
pub enum Step {
    /// A file's new content: `text` when it is UTF-8, else `hex`.
    Write {
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hex: Option<String>,
    },
    Remove {
        path: String,
    },
    /// A trainc command line, without the program name.
    Run {
        args: Vec<String>,
    },
}

impl Step {
    pub fn write(path: &str, bytes: Vec<u8>) -> Step {
        match String::from_utf8(bytes) {
            Ok(text) => Step::Write {
                path: path.to_owned(),
                text: Some(text),
                hex: None,
            },
            Err(e) => Step::Write {
                path: path.to_owned(),
                text: None,
                hex: Some(e.as_bytes().iter().map(|b| format!("{b:02x}")).collect()),
            },
        }
    }

    pub fn run(args: &[&str]) -> Step {
        Step::Run {
            args: args.iter().map(|&a| a.to_owned()).collect(),
        }
    }
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// A directory's entries, as `lstat` and the bytes see them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    Dir,
    File(Vec<u8>),
    Link(PathBuf),
    Other,
}

pub type Snapshot = BTreeMap<PathBuf, Entry>;

pub fn snapshot(dir: &Path) -> Snapshot {
    let mut out = BTreeMap::new();
    for e in walkdir::WalkDir::new(dir).min_depth(1).sort_by_file_name() {
        let Ok(e) = e else { continue };
        let rel = e.path().strip_prefix(dir).expect("below").to_path_buf();
        let t = e.file_type();
        let entry = if t.is_dir() {
            Entry::Dir
        } else if t.is_symlink() {
            Entry::Link(std::fs::read_link(e.path()).unwrap_or_default())
        } else if t.is_file() {
            Entry::File(std::fs::read(e.path()).unwrap_or_default())
        } else {
            Entry::Other
        };
        out.insert(rel, entry);
    }
    out
}

/// The first few differences, for a failure message.
fn changes(before: &Snapshot, after: &Snapshot) -> String {
    let mut out = Vec::new();
    for (p, e) in after {
        match before.get(p) {
            None => out.push(format!("created {}", p.display())),
            Some(b) if b != e => out.push(format!("changed {}", p.display())),
            _ => {}
        }
    }
    for p in before.keys() {
        if !after.contains_key(p) {
            out.push(format!("deleted {}", p.display()));
        }
    }
    let n = out.len();
    out.truncate(6);
    if n > 6 {
        out.push(format!("and {} more", n - 6));
    }
    out.join(", ")
}

fn restore(dir: &Path, snap: &Snapshot) {
    for (p, e) in snap {
        let to = dir.join(p);
        match e {
            Entry::Dir => std::fs::create_dir_all(&to).expect("mkdir"),
            Entry::File(b) => std::fs::write(&to, b).expect("write"),
            Entry::Link(t) => std::os::unix::fs::symlink(t, &to).expect("symlink"),
            Entry::Other => {}
        }
    }
}

/// How a failure is classified: the minimiser keeps a reduction only when
/// the failure stays of the same kind.
#[derive(Debug, Clone)]
pub struct Failure {
    pub kind: &'static str,
    pub detail: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.kind, self.detail)
    }
}

fn failure(kind: &'static str, detail: impl Into<String>) -> Failure {
    Failure {
        kind,
        detail: detail.into(),
    }
}

pub enum Verdict {
    /// With the last command's kind and exit code, for statistics.
    Pass(String),
    /// The case would make trainc read or write outside its scratch
    /// directory; not run.
    Skipped(String),
    Fail(Failure),
}

/// What one command line did.
struct Outcome {
    code: u8,
    /// Rendered diagnostics, when it failed.
    diagnostics: Option<(usize, String)>,
    panic: Option<String>,
    stdout: String,
    /// Something wrong with what it printed.
    problem: Option<String>,
}

/// How command lines are executed: in this process (fast, and a panic is
/// caught with its message), or by the built binary (slow, but exactly
/// what users run).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    InProcess,
    Binary,
}

/// In-process runs change the working directory and file descriptors 1 and
/// 2, which are the process's: one at a time, whichever test asks.
static EXEC: Mutex<()> = Mutex::new(());
static IN_EXEC: AtomicBool = AtomicBool::new(false);
static PANIC: Mutex<Option<String>> = Mutex::new(None);

/// What is running now, watched by the watchdog.
struct Current {
    label: String,
    case: String,
    started: Instant,
}
static CURRENT: Mutex<Option<Current>> = Mutex::new(None);
/// The process's stderr as it was before any run redirected it.
static REAL_STDERR: AtomicI32 = AtomicI32::new(2);
/// The scratch directories of live runners, which the watchdog removes: the
/// process ends without running destructors.
static ROOTS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
/// The trainc process running now, in [`Mode::Binary`]; 0 when none.
static CHILD: AtomicI32 = AtomicI32::new(0);

pub fn timeout() -> Duration {
    Duration::from_secs(
        std::env::var("TRAINC_FUZZ_TIMEOUT")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(60),
    )
}

/// `TRAINC_FUZZ_VERBOSE=1`: every command line, its time, exit code and
/// first finding, on stderr.
fn verbose() -> bool {
    static V: OnceLock<bool> = OnceLock::new();
    *V.get_or_init(|| std::env::var_os("TRAINC_FUZZ_VERBOSE").is_some_and(|v| v == "1"))
}

pub fn failures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fuzz-failures")
}

pub fn cache_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fuzz-cache")
}

/// Once per process: the panic hook that records instead of printing while
/// a case runs, the cache directory, and the watchdog. A hung case cannot be
/// cancelled, and it holds the lock every other case needs, so the watchdog
/// records it and ends the process.
fn init() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if IN_EXEC.load(Ordering::SeqCst) {
                let mut p = PANIC.lock().unwrap_or_else(|e| e.into_inner());
                p.get_or_insert_with(|| info.to_string());
            } else {
                previous(info);
            }
        }));
        // SAFETY: set before the first in-process run, under `EXEC`; trainc
        // reads it with `std::env`, which takes the same lock as this.
        unsafe { std::env::set_var("TRAINC_CACHE_DIR", cache_dir()) };
        // SAFETY: duplicates a descriptor; before any redirection.
        REAL_STDERR.store(unsafe { libc::dup(2) }, Ordering::SeqCst);
        let limit = timeout();
        std::thread::spawn(move || {
            loop {
                std::thread::sleep(Duration::from_millis(200));
                let cur = CURRENT.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(c) = cur.as_ref()
                    && c.started.elapsed() > limit
                {
                    let _ = std::fs::create_dir_all(failures_dir());
                    let file = failures_dir().join("hang.json");
                    let _ = std::fs::write(&file, &c.case);
                    let msg = format!(
                        "\nfuzz: {} did not finish within {}s (hang); the case is in {}\n{}\n",
                        c.label,
                        limit.as_secs(),
                        file.display(),
                        c.case
                    );
                    // The hung run holds the locks of stdout and stderr and
                    // has them redirected: write to the terminal's stderr
                    // directly, and leave without running exit handlers,
                    // which would wait for those locks.
                    let fd = REAL_STDERR.load(Ordering::SeqCst);
                    let mut rest = msg.as_bytes();
                    while !rest.is_empty() {
                        // SAFETY: writes a live buffer to a descriptor we own.
                        let n = unsafe { libc::write(fd, rest.as_ptr().cast(), rest.len()) };
                        let Ok(n) = usize::try_from(n) else { break };
                        if n == 0 {
                            break;
                        }
                        rest = &rest[n..];
                    }
                    for root in ROOTS.lock().unwrap_or_else(|e| e.into_inner()).iter() {
                        let _ = std::fs::remove_dir_all(root);
                    }
                    let child = CHILD.load(Ordering::SeqCst);
                    // SAFETY: kills the hung trainc process we started, if
                    // any, and ends this one at once, as intended.
                    unsafe {
                        if child > 0 {
                            libc::kill(child, libc::SIGKILL);
                        }
                        libc::_exit(101)
                    };
                }
            }
        });
    });
}

/// Files standing in for stdout and stderr during in-process runs.
fn capture_files() -> &'static Mutex<(std::fs::File, std::fs::File)> {
    static FILES: OnceLock<Mutex<(std::fs::File, std::fs::File)>> = OnceLock::new();
    FILES.get_or_init(|| {
        Mutex::new((
            tempfile::tempfile().expect("stdout file"),
            tempfile::tempfile().expect("stderr file"),
        ))
    })
}

/// What a file descriptor received, emptied for the next run.
fn drain(f: &mut std::fs::File) -> String {
    use std::io::{Read as _, Seek as _};
    let mut out = Vec::new();
    let _ = f.seek(std::io::SeekFrom::Start(0));
    let _ = f.read_to_end(&mut out);
    let _ = f.set_len(0);
    let _ = f.seek(std::io::SeekFrom::Start(0));
    String::from_utf8_lossy(&out).into_owned()
}

/// Where each diagnostic points must lie inside its file, on character
/// boundaries: the renderer slices the text there.
fn misplaced(diags: &[trainc::diagnostic::Diagnostic]) -> Option<String> {
    let locations = diags
        .iter()
        .flat_map(|d| d.location.iter().chain(d.related.iter().map(|(_, l)| l)));
    for l in locations {
        let r = l.byte_range();
        if l.pos.line == 0 || l.file.text.get(r.clone()).is_none() {
            return Some(format!(
                "{}:{}:{} (bytes {r:?} of {})",
                l.file.name,
                l.pos.line,
                l.pos.column,
                l.file.text.len()
            ));
        }
    }
    None
}

/// Runs trainc in this process, as `main` does and with what `main` would
/// print on failure, capturing stdout and stderr.
fn exec_in_process(dir: &Path, args: &[String]) -> Outcome {
    let _lock = EXEC.lock().unwrap_or_else(|e| e.into_inner());
    init();
    std::env::set_current_dir(dir).expect("cd into the case");
    let cli =
        match Cli::try_parse_from(std::iter::once("trainc".to_owned()).chain(args.iter().cloned()))
        {
            Ok(c) => c,
            Err(e) => {
                return Outcome {
                    code: u8::try_from(e.exit_code()).unwrap_or(255),
                    diagnostics: Some((1, e.to_string())),
                    panic: None,
                    stdout: String::new(),
                    problem: None,
                };
            }
        };
    let color = cli.color;
    let mut files = capture_files().lock().unwrap_or_else(|e| e.into_inner());
    // Held so that the test harness, printing from other threads, waits
    // instead of writing into the capture; trainc writes from this thread
    // (the locks are reentrant).
    let out_lock = std::io::stdout().lock();
    let err_lock = std::io::stderr().lock();
    let _ = std::io::stdout().flush();
    use std::os::fd::AsRawFd as _;
    let (out_fd, err_fd) = (files.0.as_raw_fd(), files.1.as_raw_fd());
    // SAFETY: plain descriptor juggling on fds 1 and 2, restored below.
    let saved = unsafe {
        let saved = (libc::dup(1), libc::dup(2));
        libc::dup2(out_fd, 1);
        libc::dup2(err_fd, 2);
        saved
    };
    *PANIC.lock().unwrap_or_else(|e| e.into_inner()) = None;
    IN_EXEC.store(true, Ordering::SeqCst);
    let result = catch_unwind(AssertUnwindSafe(|| match cli::run(cli) {
        Ok(Status::Ok) => (0, None, None),
        Ok(Status::Changes) => (1, None, None),
        Ok(Status::Exit(c)) => (c, None, None),
        Err(f) => {
            let problem = misplaced(&f.diagnostics);
            let text = trainc::diagnostic::render_text(&f.diagnostics, true);
            cli::report(&f, color);
            (2, Some((f.diagnostics.len(), text)), problem)
        }
    }));
    IN_EXEC.store(false, Ordering::SeqCst);
    let _ = std::io::stdout().flush();
    // SAFETY: restores the descriptors saved above.
    unsafe {
        libc::dup2(saved.0, 1);
        libc::dup2(saved.1, 2);
        libc::close(saved.0);
        libc::close(saved.1);
    }
    drop((out_lock, err_lock));
    let stdout = drain(&mut files.0);
    drain(&mut files.1);
    let panic = PANIC.lock().unwrap_or_else(|e| e.into_inner()).take();
    match result {
        Ok((code, diagnostics, problem)) => Outcome {
            code,
            diagnostics,
            panic: None,
            stdout,
            problem,
        },
        Err(_) => Outcome {
            code: 101,
            diagnostics: None,
            panic: Some(panic.unwrap_or_else(|| "panic without a message".to_owned())),
            stdout,
            problem: None,
        },
    }
}

fn exec_binary(dir: &Path, args: &[String]) -> Outcome {
    init();
    let running = std::process::Command::new(env!("CARGO_BIN_EXE_trainc"))
        .current_dir(dir)
        .args(args)
        .env("TRAINC_CACHE_DIR", cache_dir())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("trainc starts");
    CHILD.store(i32::try_from(running.id()).unwrap_or(0), Ordering::SeqCst);
    let child = running.wait_with_output().expect("trainc ends");
    CHILD.store(0, Ordering::SeqCst);
    let stderr = String::from_utf8_lossy(&child.stderr).into_owned();
    let status = child.status;
    let code = status
        .code()
        .map_or(255, |c| u8::try_from(c).unwrap_or(255));
    let panicked = code == 101 || stderr.contains("panicked at");
    Outcome {
        code,
        diagnostics: (code == 2).then(|| (usize::from(!stderr.is_empty()), stderr.clone())),
        panic: panicked.then_some(stderr),
        stdout: String::from_utf8_lossy(&child.stdout).into_owned(),
        problem: None,
    }
}

/// The subcommand and what it may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Build,
    Check,
    Diff,
    Validate,
    Other,
}

fn kind(args: &[String]) -> Kind {
    let sub = args.iter().find(|a| {
        matches!(
            a.as_str(),
            "build" | "diff" | "validate" | "run" | "schema" | "init"
        )
    });
    match sub.map(String::as_str) {
        Some("build") if args.iter().any(|a| a == "--check") => Kind::Check,
        Some("build") => Kind::Build,
        Some("diff") => Kind::Diff,
        Some("validate") => Kind::Validate,
        _ => Kind::Other,
    }
}

/// The same inputs and outputs as `args`, as another command: `build` from a
/// `diff`, `build --check` from a `build`. Output-format flags are dropped.
fn derive(args: &[String], to: Kind, extra: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    let mut it = args.iter();
    let mut sub = false;
    while let Some(a) = it.next() {
        match a.as_str() {
            "build" | "diff" | "validate" if !sub => {
                sub = true;
                out.push(
                    match to {
                        Kind::Validate => "validate",
                        Kind::Diff => "diff",
                        _ => "build",
                    }
                    .to_owned(),
                );
            }
            "--format" => {
                it.next();
            }
            "--check" | "--stat" | "--no-cache" | "-v" | "--verbose" => {}
            _ => out.push(a.clone()),
        }
    }
    if to == Kind::Check {
        out.push("--check".to_owned());
    }
    out.extend(extra.iter().map(|&e| e.to_owned()));
    out
}

/// Lexically, without touching the file system: the scratch directory holds
/// no symbolic links, so this is where a path leads.
fn normal(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// Why running `args` in `dir` could read outside it, if it could: a
/// mutated project file whose `sources` (or `library`) is `/` would read the
/// whole file system. Those cases are not run. Writes are not skipped: an
/// output or build directory, and a build context, that the project names
/// outside the repository are trainc's to refuse, and [`Runner::check`]
/// checks that nothing beside the project changes.
fn escapes(dir: &Path, args: &[String], memo: &mut Sandbox) -> Option<String> {
    let explicit = args
        .windows(2)
        .find(|w| w[0] == "--project")
        .map_or(PathBuf::from("trainc.yaml"), |w| PathBuf::from(&w[1]));
    let inside = |p: &Path| normal(&dir.join(p)).starts_with(dir);
    // Whether the project's paths stay inside depends only on the project
    // file's text and place.
    if let Ok(text) = std::fs::read_to_string(dir.join(&explicit)) {
        let key = (explicit.clone(), text);
        let verdict = memo.projects.entry(key).or_insert_with(|| {
            let project = catch_unwind(|| trainc::project::Project::discover(dir, Some(&explicit)));
            let Ok(Ok(p)) = project else { return None };
            let paths = p.sources.iter().chain(p.library.iter());
            for path in paths {
                if !inside(path) {
                    return Some(format!("project path {}", path.display()));
                }
            }
            None
        });
        if verdict.is_some() {
            return verdict.clone();
        }
    }
    None
}

/// The files of a base project, without any output of a build.
pub fn base_files(base: &str) -> BTreeMap<String, Vec<u8>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(base);
    let mut out = BTreeMap::new();
    let walker = walkdir::WalkDir::new(&root)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| {
            let n = e.file_name().to_string_lossy();
            e.depth() != 1 || !(n.starts_with("deploy") || n.starts_with("build"))
        });
    for e in walker {
        let e = e.expect("walk the base");
        if e.file_type().is_file() {
            let rel = e.path().strip_prefix(&root).expect("below");
            out.insert(
                rel.to_string_lossy().into_owned(),
                std::fs::read(e.path()).expect("read the base"),
            );
        }
    }
    assert!(!out.is_empty(), "no base project at {base}");
    out
}

/// What [`escapes`] found out before, by file text.
#[derive(Default)]
struct Sandbox {
    /// By project file (path, text): why it leads outside, if it does.
    projects: HashMap<(PathBuf, String), Option<String>>,
}

/// The name of a case's project directory in its scratch directory; beside
/// it lies [`VICTIM`].
const PROJECT: &str = "p";

/// Another team's output beside the project, which no command may touch:
/// the generated files a mutated `output: ../victim/deploy` would prune.
const VICTIM: &str = "victim";

/// Makes `case` (a new scratch directory) hold an empty project directory
/// and [`VICTIM`]; returns the project directory.
fn plant(case: &Path) -> PathBuf {
    let victim = case.join(VICTIM);
    let files = [
        (
            "deploy/kustomization.yaml",
            "# Code generated by trainc. DO NOT EDIT.\napiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- ml/x\n",
        ),
        (
            "deploy/ml/x/job-x-worker-0.yaml",
            "# Code generated by trainc from jobs/x.yaml. DO NOT EDIT.\napiVersion: batch/v1\nkind: Job\n",
        ),
        (
            "build/docker-bake.hcl",
            "# Code generated by trainc. DO NOT EDIT.\ngroup \"default\" {}\n",
        ),
        ("train/secret.txt", "credentials\n"),
    ];
    for (path, text) in files {
        let at = victim.join(path);
        std::fs::create_dir_all(at.parent().expect("parent")).expect("mkdir");
        std::fs::write(at, text).expect("write");
    }
    let dir = case.join(PROJECT);
    std::fs::create_dir_all(&dir).expect("case dir");
    dir.canonicalize().expect("canonical")
}

/// What lies beside the project directory `dir`: [`VICTIM`]'s files, and
/// the names of every other entry.
fn beside(dir: &Path) -> Snapshot {
    let case = dir.parent().expect("a case directory");
    let mut out = snapshot(&case.join(VICTIM));
    for e in std::fs::read_dir(case).into_iter().flatten().flatten() {
        if e.file_name() != PROJECT && e.file_name() != VICTIM {
            out.insert(PathBuf::from("..").join(e.file_name()), Entry::Other);
        }
    }
    out
}

/// Runs cases in scratch directories below `root`.
pub struct Runner {
    root: tempfile::TempDir,
    bases: HashMap<String, BTreeMap<String, Vec<u8>>>,
    /// The directory as a prefix of steps left it (steps that every case of
    /// a variant shares: the base build), so it runs once.
    memo: HashMap<String, Snapshot>,
    sandbox: Sandbox,
    /// Also check that `build --check` agrees after a successful build, and
    /// that a `build` agrees with `diff` and `build --check`.
    pub thorough: bool,
    next: usize,
    pub mode: Mode,
    pub label: String,
}

impl Runner {
    pub fn new(mode: Mode, label: &str) -> Self {
        let runner = Runner {
            // On tmpfs when there is one: a build ends with `syncfs`,
            // which on a disk costs more than the rest of a case.
            root: tempfile::Builder::new()
                .prefix("trainc-fuzz")
                .tempdir_in(if Path::new("/dev/shm").is_dir() {
                    PathBuf::from("/dev/shm")
                } else {
                    std::env::temp_dir()
                })
                .expect("scratch root"),
            bases: HashMap::new(),
            memo: HashMap::new(),
            sandbox: Sandbox::default(),
            thorough: true,
            next: 0,
            mode,
            label: label.to_owned(),
        };
        ROOTS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(runner.root.path().to_path_buf());
        runner
    }
}

impl Runner {
    fn exec(&self, dir: &Path, args: &[String], case: &Case) -> Outcome {
        *CURRENT.lock().unwrap_or_else(|e| e.into_inner()) = Some(Current {
            label: format!("{} (`trainc {}`)", self.label, args.join(" ")),
            case: serde_json::to_string_pretty(case).unwrap_or_default(),
            started: Instant::now(),
        });
        let t = Instant::now();
        let o = match self.mode {
            Mode::InProcess => exec_in_process(dir, args),
            Mode::Binary => exec_binary(dir, args),
        };
        if verbose() {
            eprintln!(
                "fuzz: {:>5} ms  exit {}  trainc {}  {}",
                t.elapsed().as_millis(),
                o.code,
                args.join(" "),
                o.diagnostics
                    .as_ref()
                    .map(|d| d.1.lines().next().unwrap_or("").to_owned())
                    .unwrap_or_default()
            );
        }
        *CURRENT.lock().unwrap_or_else(|e| e.into_inner()) = None;
        o
    }

    /// Runs every step and checks every command line. The scratch directory
    /// is removed afterwards.
    pub fn run(&mut self, case: &Case) -> Verdict {
        self.next += 1;
        let scratch = self.root.path().join(format!("c{}", self.next));
        let dir = plant(&scratch);
        let verdict = self.run_in(&dir, case);
        let _ = std::fs::remove_dir_all(&scratch);
        verdict
    }

    /// Runs the case and returns each command line's exit code, for
    /// comparing one mode with another.
    pub fn codes(&mut self, case: &Case) -> Vec<u8> {
        self.next += 1;
        let scratch = self.root.path().join(format!("c{}", self.next));
        let dir = plant(&scratch);
        let files = self.base(&case.base).clone();
        write_files(&dir, &files);
        let mut codes = Vec::new();
        for step in &case.steps {
            match step {
                Step::Run { args } => {
                    if escapes(&dir, args, &mut self.sandbox).is_some() {
                        break;
                    }
                    codes.push(self.exec(&dir, args, case).code);
                }
                other => apply(&dir, other),
            }
        }
        let _ = std::fs::remove_dir_all(&scratch);
        codes
    }

    fn base(&mut self, base: &str) -> &BTreeMap<String, Vec<u8>> {
        self.bases
            .entry(base.to_owned())
            .or_insert_with(|| base_files(base))
    }

    fn run_in(&mut self, dir: &Path, case: &Case) -> Verdict {
        for s in &case.steps {
            if let Step::Write { path, .. } | Step::Remove { path } = s {
                let p = Path::new(path);
                assert!(
                    !p.is_absolute() && p.components().all(|c| matches!(c, Component::Normal(_))),
                    "a case may only write inside its directory: {path}"
                );
            }
        }
        let memo_key =
            |upto: usize| serde_json::to_string(&(&case.base, &case.steps[..=upto])).expect("json");
        // The longest prefix already seen (never the last step: that is
        // the one under test).
        let mut start = 0;
        let last = case.steps.len().saturating_sub(1);
        for k in (0..last).rev() {
            if matches!(case.steps[k], Step::Run { .. })
                && let Some(snap) = self.memo.get(&memo_key(k))
            {
                restore(dir, snap);
                start = k + 1;
                break;
            }
        }
        if start == 0 {
            let files = self.base(&case.base).clone();
            write_files(dir, &files);
        }
        let mut last_outcome = String::new();
        let mut codes = Vec::new();
        for (k, step) in case.steps.iter().enumerate().skip(start) {
            let Step::Run { args } = step else {
                apply(dir, step);
                continue;
            };
            if self.sandbox.projects.len() > 4096 {
                self.sandbox = Sandbox::default();
            }
            if let Some(why) = escapes(dir, args, &mut self.sandbox) {
                return Verdict::Skipped(why);
            }
            match self.check(dir, args, case, true) {
                Ok(code) => {
                    last_outcome = format!("{:?} {code}", kind(args));
                    codes.push(code);
                }
                Err(f) => {
                    return Verdict::Fail(failure(
                        f.kind,
                        format!("step {k} (`trainc {}`): {}", args.join(" "), f.detail),
                    ));
                }
            }
            if k < last {
                if self.memo.len() > 512 {
                    self.memo.clear();
                }
                self.memo.insert(memo_key(k), snapshot(dir));
            }
        }
        if let Some(expect) = &case.expect
            && start == 0
            && *expect != codes
        {
            return Verdict::Fail(failure(
                "unexpected exit codes",
                format!("expected {expect:?}, got {codes:?}"),
            ));
        }
        Verdict::Pass(last_outcome)
    }

    /// Runs one command line and checks the properties:
    /// - no panic, and an exit code its command may have (`build` and
    ///   `validate`: 0 or 2; `build --check` and `diff`: 0, 1 or 2);
    /// - exit 2 comes with at least one diagnostic;
    /// - nothing in the project changes unless a `build` succeeds;
    /// - after a successful build, every YAML file it wrote parses, and the
    ///   build is a fixed point: again with and without the cache, nothing
    ///   changes, and `build --check` agrees;
    /// - `diff` and `build --check` agree with what a `build` then does.
    ///
    /// `follow` runs the second builds; they are not followed themselves.
    fn check(&self, dir: &Path, args: &[String], case: &Case, follow: bool) -> Result<u8, Failure> {
        let kind = kind(args);
        let before = snapshot(dir);
        let around = beside(dir);
        let o = self.exec(dir, args, case);
        let now = beside(dir);
        if now != around {
            return Err(failure(
                "wrote outside the project",
                format!("exit {}: {}", o.code, changes(&around, &now)),
            ));
        }
        if let Some(p) = o.panic {
            return Err(failure("panic", p));
        }
        let allowed: &[u8] = match kind {
            Kind::Build | Kind::Validate => &[0, 2],
            Kind::Check | Kind::Diff => &[0, 1, 2],
            Kind::Other => &[0, 1, 2],
        };
        if !allowed.contains(&o.code) {
            return Err(failure("exit code", format!("exit {}", o.code)));
        }
        if o.code == 2 && o.diagnostics.as_ref().is_none_or(|(n, _)| *n == 0) {
            return Err(failure("no diagnostic", "exit 2 without a finding"));
        }
        if let Some(p) = o.problem {
            return Err(failure("misplaced diagnostic", p));
        }
        // `--format json` and `sarif` print one JSON document, findings
        // or not.
        let json = args
            .windows(2)
            .any(|w| w[0] == "--format" && (w[1] == "json" || w[1] == "sarif"));
        if json && let Err(e) = serde_json::from_str::<serde_json::Value>(&o.stdout) {
            return Err(failure(
                "not JSON",
                format!(
                    "{e} in stdout: {}",
                    o.stdout.chars().take(300).collect::<String>()
                ),
            ));
        }
        let after = snapshot(dir);
        let wrote = before != after;
        if wrote && !(kind == Kind::Build && o.code == 0) {
            let what = if o.code == 0 {
                "wrote in a read-only command"
            } else {
                "wrote on failure"
            };
            let first = o
                .diagnostics
                .as_ref()
                .map(|(_, t)| t.lines().next().unwrap_or_default().to_owned())
                .unwrap_or_default();
            return Err(failure(
                what,
                format!("exit {}: {} ({first})", o.code, changes(&before, &after)),
            ));
        }
        if !follow {
            return Ok(o.code);
        }
        match kind {
            Kind::Build if o.code == 0 => {
                for (p, e) in &after {
                    let Entry::File(bytes) = e else { continue };
                    if before.get(p) == Some(e) {
                        continue;
                    }
                    // Dockerfiles render the project's own templates as
                    // written; the manifests are all trainc's.
                    if p.extension().is_none_or(|x| x != "yaml") {
                        continue;
                    }
                    let text = String::from_utf8_lossy(bytes);
                    // Line breaks of YAML 1.1 and other readers, a BOM,
                    // control characters: written escaped or not at all.
                    if let Some(c) = text.chars().find(|&c| {
                        (c.is_control() && c != '\n' && c != '\t')
                            || matches!(c, '\u{2028}' | '\u{2029}' | '\u{FEFF}')
                    }) {
                        return Err(failure(
                            "unsafe character in output",
                            format!("{c:?} in {}", p.display()),
                        ));
                    }
                    // As costly as the build: in thorough runs only.
                    if !self.thorough {
                        continue;
                    }
                    if let Err(err) = serde_saphyr::from_multiple::<serde_json::Value>(&text) {
                        return Err(failure(
                            "unparsable output",
                            format!("{}: {err}", p.display()),
                        ));
                    }
                }
                // Compiled again, not answered by the cache: the same bytes.
                let again = derive(args, Kind::Build, &["--no-cache"]);
                let code = self.check(dir, &again, case, false)?;
                let now = snapshot(dir);
                if code != 0 || now != after {
                    return Err(failure(
                        "not a fixed point",
                        format!(
                            "`trainc {}` then exits {code} and changes {}",
                            again.join(" "),
                            changes(&after, &now)
                        ),
                    ));
                }
                if !self.thorough {
                    return Ok(o.code);
                }
                let check = derive(args, Kind::Check, &[]);
                let code = self.check(dir, &check, case, false)?;
                if code != 0 {
                    return Err(failure(
                        "check disagrees",
                        format!(
                            "`trainc {}` exits {code} right after a build",
                            check.join(" ")
                        ),
                    ));
                }
            }
            Kind::Check | Kind::Diff if self.thorough => {
                let build = derive(args, Kind::Build, &[]);
                let code = self.check(dir, &build, case, false)?;
                let now = snapshot(dir);
                let expected = match o.code {
                    0 => code == 0 && now == after,
                    1 => code == 0 && now != after,
                    _ => code == 2,
                };
                if !expected {
                    return Err(failure(
                        "check disagrees",
                        format!(
                            "exit {} but `trainc {}` then exits {code} and changes {}",
                            o.code,
                            build.join(" "),
                            if now == after {
                                "nothing".to_owned()
                            } else {
                                changes(&after, &now)
                            }
                        ),
                    ));
                }
            }
            _ => {}
        }
        Ok(o.code)
    }
}

fn write_files(dir: &Path, files: &BTreeMap<String, Vec<u8>>) {
    for (p, bytes) in files {
        let to = dir.join(p);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(&to, bytes).expect("write");
    }
}

fn apply(dir: &Path, step: &Step) {
    match step {
        Step::Write { path, text, hex } => {
            let to = dir.join(path);
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent).expect("mkdir");
            }
            let bytes = match (text, hex) {
                (Some(t), _) => t.clone().into_bytes(),
                (None, Some(h)) => unhex(h),
                (None, None) => Vec::new(),
            };
            std::fs::write(&to, bytes).expect("write");
        }
        Step::Remove { path } => {
            let p = dir.join(path);
            let _ = std::fs::remove_file(&p).or_else(|_| std::fs::remove_dir_all(&p));
        }
        Step::Run { .. } => {}
    }
}

/// The case with fewer steps, fewer lines and fewer characters, failing the
/// same way. Greedy, bounded by `budget` runs.
pub fn minimise(runner: &mut Runner, case: &Case, kind: &str, budget: usize) -> Case {
    let mut best = case.clone();
    let mut left = budget;
    let mut fails = |runner: &mut Runner, c: &Case| -> bool {
        if left == 0 {
            return false;
        }
        left -= 1;
        matches!(runner.run(c), Verdict::Fail(f) if f.kind == kind)
    };
    // Whole steps, except the last (the command that fails).
    let mut i = 0;
    while i + 1 < best.steps.len() {
        let mut c = best.clone();
        c.steps.remove(i);
        if fails(runner, &c) {
            best = c;
        } else {
            i += 1;
        }
    }
    // Arguments of the last command.
    if let Some(Step::Run { args }) = best.steps.last().cloned() {
        for a in (1..args.len()).rev() {
            let mut c = best.clone();
            if let Some(Step::Run { args }) = c.steps.last_mut()
                && a < args.len()
            {
                let removed = args.remove(a);
                if removed.starts_with("--") && a < args.len() && !args[a].starts_with('-') {
                    args.remove(a);
                }
            }
            if fails(runner, &c) {
                best = c;
            }
        }
    }
    // Chunks of lines, then of characters, of every file written.
    for s in 0..best.steps.len() {
        for unit in [Unit::Line, Unit::Char] {
            let Step::Write {
                text: Some(text), ..
            } = &best.steps[s]
            else {
                continue;
            };
            let pieces = unit.split(text);
            let mut pieces: Vec<String> = pieces;
            let mut chunk = pieces.len().div_ceil(2).max(1);
            loop {
                let mut at = 0;
                while at < pieces.len() {
                    let mut p = pieces.clone();
                    p.drain(at..(at + chunk).min(pieces.len()));
                    let mut c = best.clone();
                    if let Step::Write { text, .. } = &mut c.steps[s] {
                        *text = Some(p.concat());
                    }
                    if fails(runner, &c) {
                        best = c;
                        pieces = p;
                    } else {
                        at += chunk;
                    }
                }
                if chunk == 1 {
                    break;
                }
                chunk = chunk.div_ceil(2);
            }
        }
    }
    best
}

#[derive(Clone, Copy)]
enum Unit {
    Line,
    Char,
}

impl Unit {
    fn split(self, text: &str) -> Vec<String> {
        match self {
            Unit::Line => text.split_inclusive('\n').map(str::to_owned).collect(),
            Unit::Char => text.chars().map(String::from).collect(),
        }
    }
}

/// Writes a failing case where a developer finds it, and says how to keep it.
pub fn record(case: &Case, name: &str) -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let d = failures_dir();
        std::fs::create_dir_all(&d).expect("failures dir");
        d
    });
    let file = dir.join(format!("{name}.json"));
    let mut json = serde_json::to_string_pretty(case).expect("json");
    json.push('\n');
    std::fs::write(&file, json).expect("record the case");
    file
}
