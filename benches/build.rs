//! Wall time and peak memory of `trainc build` over many generated jobs, next
//! to `cp -r` of the same output tree: the floor for writing those files. Also
//! a no-op rebuild and `build --check` of the finished tree, which must leave
//! every file as it was.
//!
//! trainc flushes its writes (`syncfs`) and `cp` does not, so the floor is
//! given both ways: `cp -r`, and `cp -r` followed by `sync`. Every timed run
//! starts after an untimed `sync`, so no run pays for another's dirty pages.
//!
//! cargo bench --bench build -- [--jobs N] [--runs R] [--ps P] [--workers W]
//!
//! With `--dirty-mb N` it measures instead what a small build pays for
//! other programs' unwritten data (see `dirty`):
//!
//! cargo bench --bench build -- --dirty-mb 512 [--runs R] [--dirty-dir DIR] [--bin PATH]

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use std::{fs, io};

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

struct Args {
    jobs: usize,
    runs: usize,
    ps: usize,
    workers: usize,
    dirty: Dirty,
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

fn parse_args() -> Args {
    let mut args = Args {
        jobs: 1000,
        runs: 5,
        ps: 2,
        workers: 8,
        dirty: Dirty::default(),
    };
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs this
    // binary without it, and then a smoke run keeps the harness working
    // without making the test suite pay for a benchmark.
    if !std::env::args().any(|a| a == "--bench") {
        args.jobs = 3;
        args.runs = 1;
    }
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let slot = match flag.as_str() {
            "--bench" => continue,
            "--dirty-mb" => &mut args.dirty.mb,
            "--dirty-dir" | "--bin" => {
                let value = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
                let slot = match flag.as_str() {
                    "--dirty-dir" => &mut args.dirty.dir,
                    _ => &mut args.dirty.bin,
                };
                *slot = Some(PathBuf::from(value));
                continue;
            }
            "--jobs" => &mut args.jobs,
            "--runs" => &mut args.runs,
            "--ps" => &mut args.ps,
            "--workers" => &mut args.workers,
            other => panic!(
                "unknown argument {other:?}; usage: [--jobs N] [--runs R] [--ps P] [--workers W] | --dirty-mb N [--runs R] [--dirty-dir DIR] [--bin PATH]"
            ),
        };
        let value = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
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

/// Removed on drop, so a failed run (panics unwind) leaves no scratch behind.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

struct Row {
    label: String,
    files: usize,
    build: Vec<Duration>,
    cp: Vec<Duration>,
    cp_sync: Vec<Duration>,
    noop: Vec<Duration>,
    check: Vec<Duration>,
    noop_uncached: Vec<Duration>,
    peak_rss_kib: i64,
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

fn sync() {
    let status = Command::new("sync").status().expect("cannot run sync");
    assert!(status.success(), "sync failed: {status}");
}

/// Runs `trainc build [flags] jobs -o <out>` in `dir`, with the build cache
/// in `dir`; returns wall time and max RSS (KiB).
#[expect(clippy::zombie_processes, reason = "reaped by wait4, for its rusage")]
fn run_trainc(dir: &Path, out: &Path, flags: &[&str]) -> (Duration, i64) {
    sync();
    let start = Instant::now();
    let child = Command::new(TRAINC)
        .current_dir(dir)
        .env("TRAINC_CACHE_DIR", dir.join("cache"))
        .arg("build")
        .args(flags)
        .args(["jobs", "-o"])
        .arg(out)
        .stdout(Stdio::null())
        .spawn()
        .expect("cannot start the trainc binary");
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
            "wait4 on trainc failed: {err}"
        );
    }
    let elapsed = start.elapsed();
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "trainc build failed (wait status {status:#x}); its stderr is above"
    );
    (elapsed, usage.ru_maxrss) // KiB on Linux
}

/// Every entry below `dir` with its inode, mtime and ctime: equal before and
/// after only if nothing was written, renamed or deleted.
fn stamps(dir: &Path) -> Vec<(PathBuf, u64, i64, i64, i64, i64)> {
    use std::os::unix::fs::MetadataExt as _;
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d).expect("cannot read the output tree") {
            let path = entry.expect("cannot read an output entry").path();
            let m = fs::symlink_metadata(&path).expect("cannot stat an output entry");
            if m.is_dir() {
                stack.push(path.clone());
            }
            out.push((
                path,
                m.ino(),
                m.mtime(),
                m.mtime_nsec(),
                m.ctime(),
                m.ctime_nsec(),
            ));
        }
    }
    out.sort();
    out
}

fn count_files(dir: &Path) -> usize {
    fs::read_dir(dir)
        .expect("cannot read the output tree")
        .map(|entry| {
            let entry = entry.expect("cannot read an output directory entry");
            let is_dir = entry
                .file_type()
                .expect("cannot stat an output entry")
                .is_dir();
            if is_dir {
                count_files(&entry.path())
            } else {
                1
            }
        })
        .sum()
}

fn bench_on(label: String, root: &Path, args: &Args) -> Row {
    let scratch = Scratch(root.join(format!("trainc-bench-{}", std::process::id())));
    let dir = &scratch.0;
    fs::create_dir_all(dir.join("jobs")).expect("cannot create the scratch directory");
    fs::write(dir.join("trainc.yaml"), PROJECT).expect("cannot write trainc.yaml");
    for i in 0..args.jobs {
        let name = format!("job-{i:05}");
        let text = DEFINITION
            .replace("NAME", &name)
            .replace("WORKERS", &args.workers.to_string())
            .replace("PS", &args.ps.to_string());
        fs::write(dir.join(format!("jobs/{name}.yaml")), text)
            .expect("cannot write a job definition");
    }

    // The first run's output is kept as the tree that cp copies.
    let source = dir.join("out-0");
    let mut build = Vec::new();
    let mut peak_rss_kib = 0;
    for run in 0..args.runs {
        let out = dir.join(format!("out-{run}"));
        fs::create_dir(&out).expect("cannot create an output directory");
        let (elapsed, rss) = run_trainc(dir, &out, &[]);
        build.push(elapsed);
        peak_rss_kib = peak_rss_kib.max(rss);
        if run > 0 {
            fs::remove_dir_all(&out).expect("cannot remove an output directory");
        }
    }
    let files = count_files(&source);

    // Nothing changed since: each must find every file current. The first
    // cached run may hash the files written just before the record was
    // taken (see src/cache/snapshot.rs), so it is timed with the rest.
    let times = |flags: &[&str]| -> Vec<Duration> {
        (0..args.runs)
            .map(|_| run_trainc(dir, &source, flags).0)
            .collect()
    };
    let before = stamps(&source);
    let noop = times(&[]);
    let check = times(&["--check"]);
    let noop_uncached = times(&["--no-cache"]);
    assert!(
        stamps(&source) == before,
        "a no-op build or a check wrote, renamed or deleted a file"
    );

    let mut cp = Vec::new();
    let mut cp_sync = Vec::new();
    let copy = dir.join("copy");
    for _ in 0..args.runs {
        sync();
        let start = Instant::now();
        let status = Command::new("cp")
            .arg("-r")
            .arg(&source)
            .arg(&copy)
            .status()
            .expect("cannot run cp");
        cp.push(start.elapsed());
        sync();
        cp_sync.push(start.elapsed());
        assert!(status.success(), "cp -r failed: {status}");
        fs::remove_dir_all(&copy).expect("cannot remove the copy");
    }
    Row {
        label,
        files,
        build,
        cp,
        cp_sync,
        noop,
        check,
        noop_uncached,
        peak_rss_kib,
    }
}

fn median(times: &[Duration]) -> Duration {
    let mut sorted = times.to_vec();
    sorted.sort();
    let mid = sorted.len() / 2;
    if sorted.len().is_multiple_of(2) {
        (sorted[mid - 1] + sorted[mid]) / 2
    } else {
        sorted[mid]
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e3)
}

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
    let bin = args
        .dirty
        .bin
        .clone()
        .unwrap_or_else(|| PathBuf::from(TRAINC));
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
    let files = count_files(&dir.join("out-0-false"));
    println!(
        "\none-job build ({files} files) into a fresh directory on {} ({}), {} runs; wall ms, medians (min-max)",
        root.display(),
        fs_type(&root).unwrap_or("?"),
        args.runs
    );
    let row = |label: &str, t: &[Duration]| {
        let min = t.iter().min().copied().unwrap_or_default();
        let max = t.iter().max().copied().unwrap_or_default();
        println!("{label:<36} {:>9} ({}-{})", ms(median(t)), ms(min), ms(max));
    };
    row("nothing else unwritten", &clean);
    row(
        &format!("{} MB of another file unwritten", args.dirty.mb),
        &loaded,
    );
    println!(
        "ratio {:.2}x; binary {}",
        median(&loaded).as_secs_f64() / median(&clean).as_secs_f64(),
        bin.display()
    );
}

fn main() {
    let args = parse_args();
    if args.dirty.mb > 0 {
        dirty(&args);
        return;
    }
    let mut rows = Vec::new();

    let shm = Path::new("/dev/shm");
    match fs_type(shm) {
        Some("tmpfs") => rows.push(bench_on("tmpfs /dev/shm".into(), shm, &args)),
        Some(other) => println!("note: skipping tmpfs, /dev/shm is {other}, not tmpfs"),
        None => println!("note: skipping tmpfs, /dev/shm is missing"),
    }
    let disk = Path::new(DISK_ROOT);
    fs::create_dir_all(disk).expect("cannot create target/bench-scratch");
    let kind = fs_type(disk).unwrap_or("?");
    rows.push(bench_on(format!("disk ({kind}) target/"), disk, &args));
    let _ = fs::remove_dir(disk); // only if nothing else is in it

    println!(
        "\ntrainc build, {} jobs x ({} ps + {} workers), {} runs each; wall ms, medians unless noted",
        args.jobs, args.ps, args.workers, args.runs
    );
    println!(
        "{:<22} {:>6} {:>10} {:>8} {:>8} {:>9} {:>9} {:>9} {:>8} {:>10} {:>9} {:>9} {:>8}",
        "filesystem",
        "files",
        "build med",
        "min",
        "max",
        "cp -r",
        "cp+sync",
        "build/cp",
        "no-op",
        "no-op/bld",
        "--check",
        "uncached",
        "RSS MiB"
    );
    for row in &rows {
        let (build, cp) = (median(&row.build), median(&row.cp));
        let min = row.build.iter().min().copied().unwrap_or_default();
        let max = row.build.iter().max().copied().unwrap_or_default();
        println!(
            "{:<22} {:>6} {:>10} {:>8} {:>8} {:>9} {:>9} {:>8.1}x {:>8} {:>9.2}x {:>9} {:>9} {:>8.1}",
            row.label,
            row.files,
            ms(build),
            ms(min),
            ms(max),
            ms(cp),
            ms(median(&row.cp_sync)),
            build.as_secs_f64() / cp.as_secs_f64(),
            ms(median(&row.noop)),
            median(&row.noop).as_secs_f64() / build.as_secs_f64(),
            ms(median(&row.check)),
            ms(median(&row.noop_uncached)),
            row.peak_rss_kib as f64 / 1024.0,
        );
    }
    println!(
        "no-op: `trainc build` again with nothing changed, answered by the build cache; --check: `trainc build --check` of the same tree; uncached: `trainc build --no-cache`, which compiles and compares every file"
    );
    println!("RSS MiB: peak max RSS of the trainc process over all runs (wait4)");
}
