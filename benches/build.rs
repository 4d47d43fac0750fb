//! What `trainc build` costs, next to the floors it is judged by (issue 36's
//! budgets), on tmpfs (`/dev/shm`) and on disk (`target/bench-scratch`):
//!
//! - cold: a build into an empty directory with an empty cache, against
//!   `cp -r` of the tree it produced (and `cp -r` + `sync`, since trainc makes
//!   its writes durable and `cp` does not);
//! - edits: on a built tree, reading every file of it back (`cat`), a
//!   cached no-op build, and `build --check`, `diff` and `build` after
//!   editing one definition, each timed right after the same command on
//!   the unedited tree (its floor);
//! - peak RSS of every trainc run (`wait4`'s `ru_maxrss`).
//!
//! No timed run deletes anything, and none follows a delete closely: every
//! timed run writes into a directory of its own (`cold-<run>`, `copy-<run>`),
//! and the scratch directory is removed only after the last timed run on
//! its file system. On an ext4 without a journal, creating files right after
//! deleting many is slowed several times over; a harness that removed each
//! output before the next run measured that, not trainc. Every timed run
//! starts after an untimed `sync`, so that none pays for another's dirty
//! pages, and every edit run starts from the same state: the definitions as
//! generated, built, and settled by an untimed no-op build.
//!
//! cargo bench --bench build -- [--jobs N] [--runs R] [--ps P]
//!     [--workers W] [--fs tmpfs|disk|all] [--phase cold|edits|all] [--pin CPU]
//!
//! With `--pin CPU` every timed process runs on that one CPU (trainc then
//! works on one thread).
//!
//! With `--dirty-mb N` it measures instead what a one-job build pays for N MB of
//! another program's unwritten data on the same file system (see `dirty`):
//! cargo bench --bench build -- --dirty-mb 512 [--runs R] [--dirty-dir DIR] [--bin PATH]

use std::collections::HashMap;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use std::{fs, io, thread};

const TRAINC: &str = env!("CARGO_BIN_EXE_trainc");
const DISK_ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/target/bench-scratch");

const PROJECT: &str = "\
apiVersion: trainc.dev/v1alpha1
kind: Project
sources: [jobs]
output: deploy
defaults:
  namespace: ml
";

// examples/mnist/jobs/mnist.yaml with NAME, PS and WORKERS to fill in.
const DEFINITION: &str = r#"apiVersion: trainc.dev/v1alpha1
kind: TrainingJob
metadata:
  name: NAME
  namespace: ml
spec:
  framework: tensorflow
  strategy: parameter-server
  image: registry.example.com/ml/mnist:1.0
  command: [python, /app/mnist_replica.py]
  hyperparameters: {epochs: 100, batch_size: 20, learning_rate: 0.001}
  clusterSpec:
    legacyFlags: true
  roles:
    ps:     {replicas: PS, resources: {cpu: "1", memory: 2Gi}}
    worker: {replicas: WORKERS, resources: {cpu: "4", memory: 8Gi, gpu: 1}}
  storage:
    - name: data
      mountPath: /data
      size: 5Gi
      nfs: {server: nas.example.com, path: /data}
  tensorboard: {logDir: /data/logs, service: LoadBalancer}
  target: kubernetes
"#;

/// An edit changes a hyperparameter, which is in every pod's arguments: the
/// job's files change, and no other job's. Same length, so that nothing but
/// the bytes tells the edit apart.
const EDIT_FROM: &str = "learning_rate: 0.001}";
const EDIT_TO: &str = "learning_rate: 0.002}";

// ---------------------------------------------------------------- arguments

#[derive(Clone, Copy, PartialEq, Eq)]
enum Which {
    First,
    Second,
    Both,
}

struct Args {
    jobs: usize,
    runs: usize,
    ps: usize,
    workers: usize,
    /// tmpfs, disk.
    fs: Which,
    /// cold, edits.
    phase: Which,
    /// Run by `cargo test`: one small run on one file system.
    smoke: bool,
    dirty: Dirty,
    /// The CPU every timed process is pinned to, if any (`--pin`).
    pin: Option<usize>,
}

/// `--dirty-mb` and its companions: the separate measurement of `dirty`.
#[derive(Default)]
struct Dirty {
    /// MB of unrelated unwritten data; 0: not this measurement.
    mb: usize,
    /// Where to build: a directory on the file system to measure.
    dir: Option<PathBuf>,
    /// The trainc binary to time, e.g. one built from another commit.
    bin: Option<PathBuf>,
}

const USAGE: &str = "usage: [--jobs N] [--runs R] [--ps P] [--workers W] \
                     [--fs tmpfs|disk|all] [--phase cold|edits|all] [--pin CPU] \
                     | --dirty-mb N [--runs R] [--dirty-dir DIR] [--bin PATH]";

fn parse_args() -> Args {
    let mut args = Args {
        jobs: 1000,
        runs: 7,
        ps: 2,
        workers: 8,
        fs: Which::Both,
        phase: Which::Both,
        smoke: false,
        dirty: Dirty::default(),
        pin: None,
    };
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs this
    // binary without it, and then a smoke run keeps the harness working
    // without making the test suite pay for a benchmark.
    if !std::env::args().any(|a| a == "--bench") {
        args.smoke = true;
        args.jobs = 3;
        args.runs = 1;
    }
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--bench" {
            continue;
        }
        let value = it
            .next()
            .unwrap_or_else(|| panic!("{flag} needs a value; {USAGE}"));
        let which = |first: &str, second: &str| match value.as_str() {
            v if v == first => Which::First,
            v if v == second => Which::Second,
            "all" => Which::Both,
            _ => panic!("{flag} {value:?}: one of {first}, {second}, all"),
        };
        let slot = match flag.as_str() {
            "--jobs" => &mut args.jobs,
            "--runs" => &mut args.runs,
            "--ps" => &mut args.ps,
            "--workers" => &mut args.workers,
            "--pin" => {
                let cpu = value
                    .parse()
                    .unwrap_or_else(|e| panic!("{flag} {value:?}: {e}"));
                assert!(cpu < libc::CPU_SETSIZE as usize, "--pin {cpu}: no such CPU");
                args.pin = Some(cpu);
                continue;
            }
            "--fs" => {
                args.fs = which("tmpfs", "disk");
                continue;
            }
            "--phase" => {
                args.phase = which("cold", "edits");
                continue;
            }
            "--dirty-mb" => &mut args.dirty.mb,
            "--dirty-dir" => {
                args.dirty.dir = Some(PathBuf::from(&value));
                continue;
            }
            "--bin" => {
                args.dirty.bin = Some(PathBuf::from(&value));
                continue;
            }
            other => panic!("unknown argument {other:?}; {USAGE}"),
        };
        *slot = value
            .parse()
            .unwrap_or_else(|e| panic!("{flag} {value:?}: {e}"));
    }
    assert!(
        args.jobs > 0 && args.runs > 0,
        "--jobs and --runs must be positive"
    );
    args
}

fn wants(which: Which, first: bool) -> bool {
    which == Which::Both || (which == Which::First) == first
}

// ------------------------------------------------------------ measurements

/// One timed process.
#[derive(Clone, Copy)]
struct Sample {
    wall: Duration,
    /// User + system time of the process.
    cpu: Duration,
    /// `ru_maxrss`, KiB on Linux.
    rss_kib: i64,
}

/// The samples of one measurement over the runs.
#[derive(Default)]
struct Series(Vec<Sample>);

impl Series {
    fn median_by(&self, f: impl Fn(&Sample) -> Duration) -> Duration {
        median_of(&self.0.iter().map(f).collect::<Vec<_>>())
    }

    fn median(&self) -> Duration {
        self.median_by(|s| s.wall)
    }

    fn cpu(&self) -> Duration {
        self.median_by(|s| s.cpu)
    }

    fn min(&self) -> Duration {
        self.0.iter().map(|s| s.wall).min().unwrap_or_default()
    }

    fn max(&self) -> Duration {
        self.0.iter().map(|s| s.wall).max().unwrap_or_default()
    }

    fn peak_rss_mib(&self) -> f64 {
        self.0.iter().map(|s| s.rss_kib).max().unwrap_or(0) as f64 / 1024.0
    }
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// The CPU every timed process runs on, when `--pin` names one.
static PIN: std::sync::OnceLock<usize> = std::sync::OnceLock::new();

/// Runs `cmd` to its end; its wall time, CPU time, peak RSS and exit code.
#[expect(clippy::zombie_processes, reason = "reaped by wait4, for its rusage")]
fn measure(cmd: &mut Command) -> (Sample, i32) {
    if let Some(&cpu) = PIN.get() {
        use std::os::unix::process::CommandExt as _;
        // SAFETY: between fork and exec only async-signal-safe calls are
        // made (sched_setaffinity), on a set built on this stack.
        unsafe {
            cmd.pre_exec(move || {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(cpu, &mut set);
                if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let start = Instant::now();
    let child = cmd.spawn().expect("cannot start a timed process");
    let pid = libc::pid_t::try_from(child.id()).expect("child pid does not fit pid_t");
    let mut status = 0;
    // SAFETY: rusage is plain old data, for which all zeroes is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // wait4 on this one pid: RUSAGE_CHILDREN would be the max over every child
    // reaped so far, including earlier runs and cp.
    loop {
        // SAFETY: pid is our own unreaped child; status and usage are valid for writes.
        let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if reaped == pid {
            break;
        }
        let err = io::Error::last_os_error();
        assert_eq!(
            err.kind(),
            io::ErrorKind::Interrupted,
            "wait4 failed: {err}"
        );
    }
    let wall = start.elapsed();
    assert!(
        libc::WIFEXITED(status),
        "{cmd:?} was killed (wait status {status:#x})"
    );
    let tv = |t: libc::timeval| {
        Duration::from_secs(u64::try_from(t.tv_sec).unwrap_or(0))
            + Duration::from_micros(u64::try_from(t.tv_usec).unwrap_or(0))
    };
    let sample = Sample {
        wall,
        cpu: tv(usage.ru_utime) + tv(usage.ru_stime),
        rss_kib: usage.ru_maxrss,
    };
    (sample, libc::WEXITSTATUS(status))
}

fn sync() {
    let status = Command::new("sync").status().expect("cannot run sync");
    assert!(status.success(), "sync failed: {status}");
}

/// The 1, 5 and 15 minute load averages.
fn load() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn fs_type(path: &Path) -> Option<&'static str> {
    let c_path = CString::new(path.as_os_str().as_bytes()).expect("path contains a NUL byte");
    // SAFETY: statfs is plain old data, for which all zeroes is a valid value.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: c_path is NUL-terminated and st is valid for writes.
    if unsafe { libc::statfs(c_path.as_ptr(), &mut st) } != 0 {
        return None;
    }
    Some(match st.f_type {
        libc::TMPFS_MAGIC => "tmpfs",
        libc::EXT4_SUPER_MAGIC => "ext4",
        libc::XFS_SUPER_MAGIC => "xfs",
        libc::BTRFS_SUPER_MAGIC => "btrfs",
        libc::OVERLAYFS_SUPER_MAGIC => "overlay",
        _ => "other",
    })
}

// ------------------------------------------------------------ the project

/// Removed on drop, after the last timed run on its file system (and on a
/// panic, so that a failed run leaves no scratch behind).
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
        sync();
    }
}

/// The generated project in a scratch directory.
struct Project {
    scratch: Scratch,
    /// Each definition's path and generated text.
    definitions: Vec<(PathBuf, String)>,
}

impl Project {
    fn generate(root: &Path, args: &Args) -> Project {
        let scratch = Scratch(root.join(format!("trainc-bench-{}", std::process::id())));
        let dir = &scratch.0;
        fs::create_dir_all(dir.join("jobs")).expect("cannot create the scratch directory");
        fs::write(dir.join("trainc.yaml"), PROJECT).expect("cannot write trainc.yaml");
        let definitions = (0..args.jobs)
            .map(|i| {
                let name = format!("job-{i:05}");
                let text = DEFINITION
                    .replace("NAME", &name)
                    .replace("WORKERS", &args.workers.to_string())
                    .replace("PS", &args.ps.to_string());
                let path = dir.join(format!("jobs/{name}.yaml"));
                fs::write(&path, &text).expect("cannot write a job definition");
                (path, text)
            })
            .collect();
        Project {
            scratch,
            definitions,
        }
    }

    fn dir(&self) -> &Path {
        &self.scratch.0
    }

    /// `trainc <args>` as a user runs it, into the project's own output
    /// directory, which the project file names `out` (rewritten, untimed,
    /// when it named another), with its cache in `cache`; it must exit with
    /// `code`. The project's own directory, not `-o`: only there does a
    /// build also look for YAML its kustomization does not list.
    fn trainc(&self, args: &[&str], out: &str, cache: &str, code: i32) -> Sample {
        let dir = self.dir();
        let project = PROJECT.replace("output: deploy", &format!("output: {out}"));
        let file = dir.join("trainc.yaml");
        if fs::read_to_string(&file).ok().as_deref() != Some(project.as_str()) {
            fs::write(&file, project).expect("cannot write trainc.yaml");
        }
        let (sample, got) = measure(
            Command::new(TRAINC)
                .current_dir(dir)
                .env("TRAINC_CACHE_DIR", dir.join(cache))
                .args(args)
                .stdout(Stdio::null()),
        );
        assert_eq!(
            got, code,
            "trainc {args:?} into {out} exited {got}, not {code}; its stderr is above"
        );
        sample
    }

    /// Edits `k` definitions spread over the project; their indices.
    fn edit(&self, k: usize) -> Vec<usize> {
        let n = self.definitions.len();
        let picked: Vec<usize> = (0..k).map(|i| i * n / k + n / (2 * k)).collect();
        for &i in &picked {
            let (path, text) = &self.definitions[i];
            assert!(
                text.contains(EDIT_FROM),
                "the definition has no {EDIT_FROM}"
            );
            fs::write(path, text.replace(EDIT_FROM, EDIT_TO)).expect("cannot edit a definition");
        }
        picked
    }

    fn restore(&self, edited: &[usize]) {
        for &i in edited {
            let (path, text) = &self.definitions[i];
            fs::write(path, text).expect("cannot restore a definition");
        }
    }
}

/// Every entry below `dir` with its inode, mtime and ctime: equal before and
/// after only if nothing was written, renamed or deleted.
type Stamps = HashMap<PathBuf, (bool, u64, i64, i64, i64, i64)>;

fn stamps(dir: &Path) -> Stamps {
    use std::os::unix::fs::MetadataExt as _;
    let mut out = HashMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d).expect("cannot read the output tree") {
            let path = entry.expect("cannot read an output entry").path();
            let m = fs::symlink_metadata(&path).expect("cannot stat an output entry");
            if m.is_dir() {
                stack.push(path.clone());
            }
            let stamp = (
                m.is_dir(),
                m.ino(),
                m.mtime(),
                m.mtime_nsec(),
                m.ctime(),
                m.ctime_nsec(),
            );
            out.insert(path, stamp);
        }
    }
    out
}

/// Files written, added or removed between two stamps.
fn files_changed(before: &Stamps, after: &Stamps) -> usize {
    let differs = |a: &Stamps, b: &Stamps| {
        a.iter()
            .filter(|(path, stamp)| !stamp.0 && b.get(*path) != Some(stamp))
            .count()
    };
    // Replaced files count once; removed ones only in the second sum.
    differs(after, before)
        + before
            .iter()
            .filter(|(path, stamp)| !stamp.0 && !after.contains_key(*path))
            .count()
}

fn count_files(stamps: &Stamps) -> usize {
    stamps.values().filter(|s| !s.0).count()
}

// ------------------------------------------------------------ the phases

/// Cold builds and the `cp -r` floor, interleaved so that both see the
/// same load.
struct Cold {
    files: usize,
    build: Series,
    cp: Series,
    cp_sync: Series,
}

fn cold_phase(project: &Project, args: &Args) -> Cold {
    let dir = project.dir();
    let mut cold = Cold {
        files: 0,
        build: Series::default(),
        cp: Series::default(),
        cp_sync: Series::default(),
    };
    for run in 0..args.runs {
        eprintln!("cold build and cp -r, run {} of {}", run + 1, args.runs);
        // A fresh output directory and a fresh cache: nothing to reuse.
        let out = format!("cold-{run}");
        sync();
        let sample = project.trainc(&["build"], &out, &format!("cache-{run}"), 0);
        cold.build.0.push(sample);

        // Every copy is of the first run's tree, into a new directory.
        sync();
        let (mut sample, code) = measure(Command::new("cp").current_dir(dir).args([
            "-r",
            "cold-0",
            &format!("copy-{run}"),
        ]));
        assert_eq!(code, 0, "cp -r failed");
        cold.cp.0.push(sample);
        let start = Instant::now();
        sync();
        sample.wall += start.elapsed();
        cold.cp_sync.0.push(sample);
    }
    let tree = stamps(&dir.join("cold-0"));
    cold.files = count_files(&tree);
    assert_eq!(
        count_files(&stamps(&dir.join("copy-0"))),
        cold.files,
        "cp -r copied a different number of files"
    );
    cold
}

/// One command timed twice in a row: on the settled tree (its floor: it
/// finds nothing to do) and, right after, on the edited one.
#[derive(Default)]
struct Paired {
    floor: Series,
    edited: Series,
}

/// `build --check`, `diff` and `build`, each timed on the settled tree and
/// then after editing the same definitions.
#[derive(Default)]
struct AfterEdit {
    check: Paired,
    diff: Paired,
    build: Paired,
    /// Files the build wrote (the last run's).
    written: usize,
}

/// Reading the tree back, the cached no-op, and what an edit costs, on one
/// output directory that every run brings back to the same state, untimed.
#[derive(Default)]
struct Edits {
    files: usize,
    read_back: Series,
    noop: Series,
    uncached: Series,
    one: AfterEdit,
}

const OUT: &str = "edited";
const CACHE: &str = "edited-cache";

/// Builds the current definitions, then lets a no-op build hash what that
/// build wrote (files written just before a cache record are hashed by the
/// next build, see src/cache/snapshot.rs), so that every timed run starts
/// from a settled cache.
fn settle(project: &Project) {
    project.trainc(&["build"], OUT, CACHE, 0);
    thread::sleep(Duration::from_millis(100));
    project.trainc(&["build"], OUT, CACHE, 0);
}

/// Times `build --check`, `diff` and `build` each on the settled tree and
/// then after editing `k` definitions, and brings the tree back to the
/// settled state after each.
///
/// Each command's floor is taken right before its edited run, not once per
/// run: on a virtual machine the CPU time of identical no-ops moves between
/// levels 15–35% apart that last for seconds (the host's other work, not
/// counted as steal), while consecutive runs mostly share a level. One edit
/// adds a millisecond or two to a floor of fifty, so it is told only as the
/// difference of neighbours.
fn after_edit(project: &Project, k: usize, into: &mut AfterEdit) {
    let out = project.dir().join(OUT);
    // Each command, its exit code after the edit, whether it writes the
    // output, and where its times go.
    let commands: [(&[&str], i32, bool, &mut Paired); 3] = [
        (&["build", "--check"], 1, false, &mut into.check),
        (&["diff"], 1, false, &mut into.diff),
        (&["build"], 0, true, &mut into.build),
    ];
    for (args, code, writes, pair) in commands {
        let before = stamps(&out);
        sync();
        pair.floor.0.push(project.trainc(args, OUT, CACHE, 0));
        assert!(
            stamps(&out) == before,
            "trainc {args:?} on the settled tree wrote, renamed or deleted a file"
        );
        let edited = project.edit(k);
        sync();
        pair.edited.0.push(project.trainc(args, OUT, CACHE, code));
        let written = files_changed(&before, &stamps(&out));
        if writes {
            into.written = written;
            assert!(written > 0, "editing {k} definitions changed no file");
        } else {
            assert_eq!(written, 0, "trainc {args:?} wrote into the output");
        }
        project.restore(&edited);
        if writes {
            settle(project);
        }
    }
}

fn edit_phase(project: &Project, args: &Args) -> Edits {
    let out = project.dir().join(OUT);
    let mut edits = Edits::default();
    settle(project);
    for run in 0..args.runs {
        eprintln!("no-op and edits, run {} of {}", run + 1, args.runs);
        let before = stamps(&out);
        sync();
        let (sample, code) = measure(Command::new("sh").current_dir(project.dir()).args([
            "-c",
            "find \"$0\" -type f -exec cat {} + >/dev/null",
            OUT,
        ]));
        assert_eq!(code, 0, "reading the tree back failed");
        edits.read_back.0.push(sample);
        sync();
        edits.noop.0.push(project.trainc(&["build"], OUT, CACHE, 0));
        sync();
        edits
            .uncached
            .0
            .push(project.trainc(&["build", "--no-cache"], OUT, CACHE, 0));
        assert!(
            stamps(&out) == before,
            "a no-op build wrote, renamed or deleted a file"
        );
        edits.files = count_files(&before);
        after_edit(project, 1, &mut edits.one);
    }
    edits
}

/// Everything measured on one file system.
struct FsResult {
    label: String,
    load: (String, String),
    cold: Option<Cold>,
    edits: Option<Edits>,
}

fn bench_on(label: String, root: &Path, args: &Args) -> FsResult {
    eprintln!("{label}: generating {} definitions", args.jobs);
    let load_before = load();
    let project = Project::generate(root, args);
    let cold = wants(args.phase, true).then(|| cold_phase(&project, args));
    let edits = wants(args.phase, false).then(|| edit_phase(&project, args));
    let load_after = load();
    drop(project); // the only deletes, after every timed run here
    FsResult {
        label,
        load: (load_before, load_after),
        cold,
        edits,
    }
}

// ------------------------------------------------------------ the report

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e3)
}

const LABEL: usize = 46;
const CELL: usize = 34;

fn header(results: &[FsResult]) {
    print!("{:<LABEL$}", "");
    for r in results {
        print!(" {:>CELL$}", r.label);
    }
    println!();
}

/// One line of wall times: `median (min-max) cpu`.
fn time_row(label: &str, results: &[FsResult], pick: impl Fn(&FsResult) -> Option<&Series>) {
    if results.iter().all(|r| pick(r).is_none()) {
        return; // a phase not run
    }
    print!("{label:<LABEL$}");
    for r in results {
        let cell = pick(r).map_or_else(
            || "-".to_string(),
            |s| {
                format!(
                    "{} ({}-{}) {}",
                    ms(s.median()),
                    ms(s.min()),
                    ms(s.max()),
                    ms(s.cpu())
                )
            },
        );
        print!(" {cell:>CELL$}");
    }
    println!();
}

/// One line of a figure per file system, with the goal it is held to:
/// `met` when `ok` says so.
fn goal_row(
    label: &str,
    results: &[FsResult],
    value: impl Fn(&FsResult) -> Option<f64>,
    unit: &str,
    goal: Option<(&str, &dyn Fn(f64) -> bool)>,
) {
    let ok = |v: f64| goal.is_none_or(|(_, ok)| ok(v));
    verdict_row(
        label,
        results,
        |r| {
            value(r).map(|v| {
                (
                    format!("{v:.2}{unit}"),
                    if ok(v) { "met" } else { "NOT met" },
                )
            })
        },
        goal.map(|(text, _)| text),
    );
}

/// One line: per file system the cell `cell` gives and its verdict, the
/// verdicts after `goal` when there is one; nothing for a phase not run.
fn verdict_row(
    label: &str,
    results: &[FsResult],
    cell: impl Fn(&FsResult) -> Option<(String, &'static str)>,
    goal: Option<&str>,
) {
    let cells: Vec<_> = results.iter().map(cell).collect();
    if cells.iter().all(Option::is_none) {
        return;
    }
    print!("{label:<LABEL$}");
    for c in &cells {
        let text = c.as_ref().map_or("-", |(text, _)| text.as_str());
        print!(" {text:>CELL$}");
    }
    match goal {
        Some(text) => {
            let verdicts: Vec<&str> = cells.iter().flatten().map(|(_, v)| *v).collect();
            println!("   goal {text}: {}", verdicts.join(", "));
        }
        None => println!(),
    }
}

type PickSeries = fn(&AfterEdit) -> &Paired;

fn print_report(args: &Args, results: &[FsResult]) {
    println!(
        "\ntrainc, {} jobs x ({} ps + {} workers), {} runs each; {} cores{}",
        args.jobs,
        args.ps,
        args.workers,
        args.runs,
        thread::available_parallelism().map_or(0, |n| n.get()),
        args.pin.map_or_else(String::new, |c| format!(
            ", every timed run on CPU {c} alone"
        ))
    );
    for r in results {
        let files = r
            .cold
            .as_ref()
            .map(|c| c.files)
            .or(r.edits.as_ref().map(|e| e.files))
            .unwrap_or(0);
        println!(
            "{}: {files} files; load average {} before, {} after",
            r.label, r.load.0, r.load.1
        );
    }

    println!("\nwall ms: median (min-max) and median user+sys CPU ms");
    header(results);
    fn cold(r: &FsResult) -> Option<&Cold> {
        r.cold.as_ref()
    }
    fn edits(r: &FsResult) -> Option<&Edits> {
        r.edits.as_ref()
    }
    time_row("cold build", results, |r| cold(r).map(|c| &c.build));
    time_row("cp -r", results, |r| cold(r).map(|c| &c.cp));
    time_row("cp -r + sync", results, |r| cold(r).map(|c| &c.cp_sync));
    time_row("read the tree back (cat)", results, |r| {
        edits(r).map(|e| &e.read_back)
    });
    time_row("no-op build (cached)", results, |r| {
        edits(r).map(|e| &e.noop)
    });
    time_row("no-op build --no-cache", results, |r| {
        edits(r).map(|e| &e.uncached)
    });
    let commands: [(&str, PickSeries); 3] = [
        ("build --check", |a| &a.check),
        ("diff", |a| &a.diff),
        ("build", |a| &a.build),
    ];
    for (name, series) in commands {
        time_row(&format!("1 edited: {name}"), results, |r| {
            edits(r).map(|e| &series(&e.one).edited)
        });
    }

    println!("\nratios of the medians above");
    header(results);
    let within = |limit: f64| move |v: f64| v <= limit;
    let cold_ratio = |floor: fn(&Cold) -> &Series| {
        move |r: &FsResult| cold(r).map(|c| secs(c.build.median()) / secs(floor(c).median()))
    };
    goal_row(
        "cold build / cp -r",
        results,
        cold_ratio(|c| &c.cp),
        "x",
        Some(("<= 1.3x", &within(1.3))),
    );
    goal_row(
        "cold build / (cp -r + sync)",
        results,
        cold_ratio(|c| &c.cp_sync),
        "x",
        None,
    );
    goal_row(
        "no-op / read the tree back",
        results,
        |r| edits(r).map(|e| secs(e.noop.median()) / secs(e.read_back.median())),
        "x",
        Some(("<= 1.2x", &within(1.2))),
    );
    for (name, series) in commands {
        goal_row(
            &format!("1 edited: {name} / no-op"),
            results,
            |r| edits(r).map(|e| secs(series(&e.one).edited.median()) / secs(e.noop.median())),
            "x",
            Some(("<= 1.5x", &within(1.5))),
        );
    }

    println!("\npeak RSS MiB (wait4 ru_maxrss, max over the runs)");
    header(results);
    let (rss_text, rss_limit) = match args.jobs {
        ..=5000 => ("<= 150 MiB up to 5,000 jobs", 150.0),
        _ => ("", 0.0),
    };
    let rss_ok = within(rss_limit);
    let rss_goal = (rss_limit > 0.0).then_some((rss_text, &rss_ok as &dyn Fn(f64) -> bool));
    goal_row(
        "cold build",
        results,
        |r| cold(r).map(|c| c.build.peak_rss_mib()),
        "",
        rss_goal,
    );
    goal_row(
        "1 edited: build",
        results,
        |r| edits(r).map(|e| e.one.build.edited.peak_rss_mib()),
        "",
        rss_goal,
    );
    goal_row(
        "no-op build (cached)",
        results,
        |r| edits(r).map(|e| e.noop.peak_rss_mib()),
        "",
        None,
    );

    if results.iter().all(|r| r.edits.is_none()) {
        return;
    }
    println!("\nfiles written by a build after the edit");
    header(results);
    print!("{:<LABEL$}", "1 edited");
    for r in results {
        let cell = edits(r).map_or_else(|| "-".into(), |e| e.one.written.to_string());
        print!(" {cell:>CELL$}");
    }
    println!();
}

fn main() {
    let args = parse_args();
    if let Some(cpu) = args.pin {
        let _ = PIN.set(cpu);
    }
    if args.dirty.mb > 0 {
        dirty(&args);
        return;
    }
    let mut places: Vec<(String, PathBuf)> = Vec::new();
    if wants(args.fs, true) {
        let shm = Path::new("/dev/shm");
        match fs_type(shm) {
            Some("tmpfs") => places.push(("tmpfs /dev/shm".into(), shm.into())),
            Some(other) => println!("note: skipping tmpfs, /dev/shm is {other}, not tmpfs"),
            None => println!("note: skipping tmpfs, /dev/shm is missing"),
        }
    }
    let disk = Path::new(DISK_ROOT);
    if wants(args.fs, false) {
        fs::create_dir_all(disk).expect("cannot create target/bench-scratch");
        let kind = fs_type(disk).unwrap_or("?");
        places.push((format!("disk ({kind}) target/"), disk.into()));
    }
    if args.smoke {
        places.truncate(1);
    }
    let results: Vec<FsResult> = places
        .into_iter()
        .map(|(label, root)| bench_on(label, &root, &args))
        .collect();
    let _ = fs::remove_dir(disk); // only if nothing else is in it
    print_report(&args, &results);
}

// ------------------------------------------------------------ other programs' unwritten data

/// A one-job build into a fresh directory, timed with and without `mb` MB
/// of another program's unwritten data on the same file system, in
/// alternation. A build that flushes the whole file system (`syncfs`) waits
/// for that data; one that flushes only its own files does not. The dirty
/// file is written just before the timed build and never synced; it is
/// deleted, and everything synced, after the build, outside the timing.
fn dirty(args: &Args) {
    let root = args
        .dirty
        .dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(DISK_ROOT));
    fs::create_dir_all(&root).expect("cannot create the scratch root");
    // Absolute: the builds run in the scratch directory.
    let bin = args.dirty.bin.as_deref().map_or_else(
        || PathBuf::from(TRAINC),
        |b| std::path::absolute(b).expect("cannot resolve --bin"),
    );
    let scratch = Scratch(root.join(format!("trainc-dirty-{}", std::process::id())));
    let dir = &scratch.0;
    fs::create_dir_all(dir.join("jobs")).expect("cannot create the scratch directory");
    fs::write(dir.join("trainc.yaml"), PROJECT).expect("cannot write trainc.yaml");
    let text = DEFINITION
        .replace("NAME", "job-00000")
        .replace("WORKERS", &args.workers.to_string())
        .replace("PS", &args.ps.to_string());
    fs::write(dir.join("jobs/job-00000.yaml"), text).expect("cannot write a job definition");
    let chunk = vec![0xa5u8; 1 << 20];
    let build = |out: &Path| {
        let start = Instant::now();
        let status = Command::new(&bin)
            .current_dir(dir)
            .env("TRAINC_CACHE_DIR", dir.join("cache"))
            .args(["build", "jobs", "-o"])
            .arg(out)
            .stdout(Stdio::null())
            .status()
            .expect("cannot start the trainc binary");
        let elapsed = start.elapsed();
        assert!(status.success(), "trainc build failed: {status}");
        elapsed
    };
    let (mut clean, mut loaded) = (Vec::new(), Vec::new());
    for run in 0..args.runs {
        for with in [false, true] {
            let out = dir.join(format!("out-{run}-{with}"));
            let junk = dir.join("unrelated.bin");
            sync();
            if with {
                let mut f = fs::File::create(&junk).expect("cannot create the dirty file");
                for _ in 0..args.dirty.mb {
                    io::Write::write_all(&mut f, &chunk).expect("cannot write the dirty file");
                }
            }
            let elapsed = build(&out);
            if with {
                loaded.push(elapsed);
                fs::remove_file(&junk).expect("cannot remove the dirty file");
            } else {
                clean.push(elapsed);
            }
        }
    }
    sync();
    let files = count_tree(&dir.join("out-0-false"));
    println!(
        "\none-job build ({files} files) into a fresh directory on {} ({}), {} runs; wall ms, medians (min-max)",
        root.display(),
        fs_type(&root).unwrap_or("?"),
        args.runs
    );
    let row = |label: &str, t: &[Duration]| {
        let min = t.iter().min().copied().unwrap_or_default();
        let max = t.iter().max().copied().unwrap_or_default();
        println!(
            "{label:<36} {:>9} ({}-{})",
            ms(median_of(t)),
            ms(min),
            ms(max)
        );
    };
    row("nothing else unwritten", &clean);
    row(
        &format!("{} MB of another file unwritten", args.dirty.mb),
        &loaded,
    );
    println!(
        "ratio {:.2}x; binary {}",
        median_of(&loaded).as_secs_f64() / median_of(&clean).as_secs_f64(),
        bin.display()
    );
}

fn count_tree(dir: &Path) -> usize {
    fs::read_dir(dir)
        .expect("cannot read the output tree")
        .map(|entry| {
            let entry = entry.expect("cannot read an output directory entry");
            let is_dir = entry
                .file_type()
                .expect("cannot stat an output entry")
                .is_dir();
            if is_dir { count_tree(&entry.path()) } else { 1 }
        })
        .sum()
}

fn median_of(times: &[Duration]) -> Duration {
    median(times.to_vec(), Duration::cmp, |a, b| (a + b) / 2).unwrap_or_default()
}

/// The middle of `values` (the mean of the middle two of an even count);
/// `None` for none.
fn median<T: Copy>(
    mut values: Vec<T>,
    cmp: impl Fn(&T, &T) -> std::cmp::Ordering,
    mean: impl Fn(T, T) -> T,
) -> Option<T> {
    values.sort_by(cmp);
    let mid = values.len() / 2;
    match values.len() {
        0 => None,
        n if n.is_multiple_of(2) => Some(mean(values[mid - 1], values[mid])),
        _ => Some(values[mid]),
    }
}
