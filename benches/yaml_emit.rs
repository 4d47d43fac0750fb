//! The YAML emitter alone (`src/emit/yaml.rs`) against the serializer it
//! replaced, serde-saphyr 2.1's with trainc's former options, on the files
//! `trainc build` writes for `examples/mnist` (read back as JSON values):
//! time per pass over every file, and the bytes each pass writes.
//!
//! cargo bench --bench yaml_emit -- [--passes N]
//!
//! Without `--bench` (as `cargo test --all-targets` runs it) it makes one
//! pass, checks that both serializers agree and times nothing.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

const TRAINC: &str = env!("CARGO_BIN_EXE_trainc");
const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/mnist");

fn saphyr(v: &Value) -> String {
    let mut o = serde_saphyr::SerializerOptions::default();
    o.indent_step = 2;
    o.prefer_block_scalars = true;
    o.folded_wrap_chars = usize::MAX;
    serde_saphyr::to_string_with_options(v, o).expect("serde-saphyr serializes")
}

fn ours(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    trainc::emit::yaml::to_writer(&mut out, v).expect("serializes");
    out
}

/// The documents of every YAML file `trainc build` writes for the example.
fn documents() -> Vec<Value> {
    let scratch = tempfile::tempdir().expect("temporary directory");
    let out = scratch.path().join("out");
    let status = Command::new(TRAINC)
        .current_dir(EXAMPLE)
        .env("TRAINC_CACHE_DIR", scratch.path().join("cache"))
        .args(["build", "jobs", "-o"])
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("trainc runs");
    assert!(status.success(), "trainc build failed");
    let mut docs = Vec::new();
    collect(&out, &mut docs);
    assert!(!docs.is_empty());
    docs
}

fn collect(dir: &Path, docs: &mut Vec<Value>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("readable")
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect(&path, docs);
        } else if path.extension().is_some_and(|e| e == "yaml") {
            let text = std::fs::read_to_string(&path).expect("UTF-8");
            docs.push(serde_saphyr::from_str(&text).expect("YAML"));
        }
    }
}

fn time(passes: usize, mut pass: impl FnMut() -> usize) -> (Duration, usize) {
    let mut best = Duration::MAX;
    let mut bytes = 0;
    for _ in 0..passes {
        let start = Instant::now();
        bytes = pass();
        best = best.min(start.elapsed());
    }
    (best, bytes)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let bench = args.iter().any(|a| a == "--bench");
    let passes = args
        .iter()
        .position(|a| a == "--passes")
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or(200);
    let docs = documents();
    for d in &docs {
        assert_eq!(ours(d), saphyr(d).into_bytes(), "the serializers disagree");
    }
    if !bench {
        println!(
            "yaml_emit: {} documents, serializers agree (smoke run, nothing timed)",
            docs.len()
        );
        return;
    }
    let (theirs, bytes) = time(passes, || docs.iter().map(|d| saphyr(d).len()).sum());
    let (mine, _) = time(passes, || docs.iter().map(|d| ours(d).len()).sum());
    println!(
        "{} documents, {} bytes a pass; best of {passes} passes:\n  serde-saphyr {:>8.1} µs\n  trainc       {:>8.1} µs ({:.1}× faster)",
        docs.len(),
        bytes,
        theirs.as_secs_f64() * 1e6,
        mine.as_secs_f64() * 1e6,
        theirs.as_secs_f64() / mine.as_secs_f64(),
    );
}
