//! Limits on what a definition can make trainc do, checked in the stages
//! they concern: the size of one file and of one string when loading
//! ([`crate::load`]), the replicas of a role by the schema and again for
//! `run --local --replicas`, a job's tasks times its settings after
//! validation ([`crate::validate`]), and the bytes of a build's output while
//! rendering and before anything is written ([`crate::pipeline`]).
//!
//! Each limit is far above real use and far below what exhausts a CI
//! runner: without them a 4 MB definition (one long argument, 1,000 workers)
//! made 4 GB of manifests and took 8 GB of memory.

use crate::diagnostic::Diagnostic;

/// The most replicas of one role: the schema's `maximum` for `replicas`
/// (a test keeps the two equal), applied to `run --local --replicas` too.
pub const MAX_REPLICAS: u32 = 1000;

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
    fn output_limit() {
        let max = MAX_OUTPUT_BYTES;
        assert!(check_output(max, 3, true, max).is_ok());
        let e = check_output(max + 1, 3, true, max).unwrap_err();
        assert!(e.message.contains("256.0 MiB in 3 files"), "{}", e.message);
        assert!(e.message.contains("nothing was written"), "{}", e.message);
    }
}
