//! Limits on what a definition can make trainc do, checked in the stages
//! they concern: the size of one file and of one string when loading
//! ([`crate::load`]), the replicas of a role by the schema and again for
//! `run --local --replicas`, what patches write into a pod template as
//! they apply ([`crate::compile::patch`]), a job's tasks times its settings
//! after validation, and again with what its patches add
//! ([`crate::validate`]), and the bytes of a build's output while
//! rendering and before anything is written ([`crate::pipeline`]).
//!
//! Each limit is far above real use and far below what exhausts a CI
//! runner: without them a 4 MB definition (one long argument, 1,000 workers)
//! made 4 GB of manifests and took 8 GB of memory.

use crate::diagnostic::Diagnostic;

/// The most replicas of one role: the schema's `maximum` for `replicas`
/// (a test keeps the two equal), applied to `run --local --replicas` too.
pub const MAX_REPLICAS: u32 = 1000;

/// The most bytes (as compact JSON) that a job's patches may write into
/// one pod template: every value an `add` or `replace` writes and every
/// value a `copy` duplicates, and each strategic patch whole, charged
/// before it is written. Without it a `copy` repeated 9,999 times made an
/// 831 KB definition take 2.5 minutes and 3.6 GB of memory before the
/// output limit refused it, and copies that double a list exhausted the
/// memory from a 4 KB one.
///
/// Sixteen strings at the string limit: real patches (a sidecar, a probe,
/// host aliases) write a few KiB, and the largest container trainc writes
/// (a command at the string limit and the `TF_CONFIG` of 2,001 tasks,
/// about 90 KiB) can be copied several times. A Job whose template grew by
/// more is near what the API server stores in one object (etcd's 1.5 MiB),
/// and the budget counts what patches add to every task: 256 tasks grown by
/// this much reach [`MAX_OUTPUT_BYTES`]. Patching one template costs at
/// most this much copying, however many operations there are.
pub const MAX_PATCH_BYTES: u64 = 16 * crate::load::MAX_STRING_BYTES as u64;

/// The most bytes a build writes: manifests and build specs together.
/// 1,000 jobs of 10 tasks (the benchmark in docs/development.md) come to
/// about 40 MB, so this leaves six times that; past it a repository of
/// generated YAML is beyond what Git hosts and GitOps controllers handle
/// well, and the build's memory (about twice its output) beyond a CI runner.
pub const MAX_OUTPUT_BYTES: u64 = 256 * 1024 * 1024;

/// Jobs are rendered in batches of about this many tasks, the output so far
/// checked after each: memory stays near the limit, however many jobs there
/// are, and a build that is over it stops early. Two of the largest jobs,
/// or about 400 of the benchmark's.
pub const RENDER_BATCH_TASKS: u64 = 2 * 2 * MAX_REPLICAS as u64;

/// `bytes` in MiB for messages: `300.5 MiB`.
pub fn mib(bytes: u64) -> String {
    let m = bytes as f64 / (1024.0 * 1024.0);
    format!("{m:.1} MiB")
}

/// The bytes a value holds as text, as the output budget counts them:
/// strings and keys by their length, other scalars as a few bytes.
/// Aliases count as often as they are used, as they are written out.
pub fn weight(v: &serde_json::Value) -> u64 {
    use serde_json::Value;
    match v {
        Value::String(s) => s.len() as u64,
        Value::Array(items) => items.iter().map(weight).sum(),
        Value::Object(map) => map.iter().map(|(k, v)| k.len() as u64 + weight(v)).sum(),
        Value::Null => 0,
        Value::Bool(_) | Value::Number(_) => 8,
    }
}

/// The refusal of a build whose output would pass `limit` (in trainc,
/// [`MAX_OUTPUT_BYTES`]). `complete` says whether `bytes` is the whole
/// output or what rendering had reached when it stopped.
pub fn check_output(
    bytes: u64,
    files: usize,
    complete: bool,
    limit: u64,
) -> Result<(), Diagnostic> {
    if bytes <= limit {
        return Ok(());
    }
    let amount = if complete {
        format!("{} in {files} files", mib(bytes))
    } else {
        format!("more than {} ({files} files rendered so far)", mib(bytes))
    };
    Err(Diagnostic::new(format!(
        "the build's output would be {amount}, over the {} limit; nothing was written",
        mib(limit)
    ))
    .hint(
        "on the `kubernetes` target every task is a Job of its own that repeats the job's settings: use fewer tasks or shorter settings, the `jobset` or `tfjob` target (one pod template per role), or split the definitions into projects with their own output directories",
    ))
}

/// Consecutive runs of `items` of about [`RENDER_BATCH_TASKS`] tasks each
/// (`tasks` of an item), at least one item per run.
pub fn batches<T>(items: &[T], tasks: impl Fn(&T) -> u64) -> Vec<&[T]> {
    let mut out = Vec::new();
    let (mut start, mut sum) = (0, 0u64);
    for (i, item) in items.iter().enumerate() {
        let n = tasks(item);
        if i > start && sum.saturating_add(n) > RENDER_BATCH_TASKS {
            out.push(&items[start..i]);
            (start, sum) = (i, 0);
        }
        sum = sum.saturating_add(n);
    }
    if start < items.len() {
        out.push(&items[start..]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_replicas_is_the_schema_maximum() {
        let schema: serde_json::Value =
            serde_json::from_str(crate::validate::schema::TRAINING_JOB_SCHEMA).unwrap();
        assert_eq!(
            schema.pointer("/$defs/role/properties/replicas/maximum"),
            Some(&serde_json::json!(MAX_REPLICAS))
        );
    }

    #[test]
    fn batches_cover_every_item_in_order() {
        let items: Vec<u64> = vec![1, 3000, 1000, 1000, 1000, 2001, 5];
        let b = batches(&items, |n| *n);
        assert_eq!(b.concat(), items);
        assert!(b.iter().all(|s| !s.is_empty()));
        assert!(
            b.iter()
                .all(|s| s.len() == 1 || s.iter().sum::<u64>() <= RENDER_BATCH_TASKS)
        );
        assert!(batches(&[] as &[u64], |n| *n).is_empty());
    }

    #[test]
    fn weight_counts_strings_and_keys() {
        let v = serde_json::json!({"ab": ["cde", 1, null], "f": {"g": true}});
        assert_eq!(weight(&v), 2 + 3 + 8 + 1 + 1 + 8);
    }

    #[test]
    fn output_limit() {
        let max = MAX_OUTPUT_BYTES;
        assert!(check_output(max, 3, true, max).is_ok());
        let e = check_output(max + 1, 3, true, max).unwrap_err();
        assert!(e.message.contains("256.0 MiB in 3 files"), "{}", e.message);
        assert!(e.message.contains("nothing was written"), "{}", e.message);
    }
}
