//! Stage 3 (compile): the tasks of a role that are one object each, compiled
//! once for all of them.
//!
//! On `kubernetes` a TensorFlow task is a Job of its own, and the Jobs of a
//! role's tasks differ only where the task's index is written out in
//! decimal: the Job and host name (`<run>-worker-3`), the file name, the
//! task-index label, `--task_index=3`, the index in `TF_CONFIG`. Compiling
//! and rendering each of them was about half of a cold build's work. A
//! [`Family`] is compiled twice, for task 0 and for the index [`SENTINEL`];
//! the emit stage renders both, and when replacing every `SENTINEL` in the
//! second's file name and bytes by `0` gives exactly the first's, renders
//! every other task by replacing it by the task's index
//! ([`crate::emit`]). Otherwise (a definition or an image tag that holds the
//! sentinel's digits, a patch that tells tasks apart) each task is compiled
//! and rendered alone, as without families: the output is the same bytes
//! either way, which debug builds check on every build.
//!
//! Why the check is enough:
//! - The sentinel's ten digits are all different, so two of its occurrences
//!   never overlap, and one never straddles the index and the text beside
//!   it.
//! - An occurrence the compile did not write (from the definition, an image
//!   tag, a hash) stays the sentinel in task 0's rendering, where the
//!   replacement makes it `0`: the two differ in length, and the check fails.
//! - Where the compile writes the index, the emitter's choice of style does
//!   not depend on which digits stand there: the index alone (a label) is a
//!   number to quote whatever its digits, and every other string that holds
//!   it also holds letters or punctuation (`-worker-`, `--task_index=`,
//!   `"index":`) that no number, timestamp or sexagesimal can hold. No key
//!   holds it, so no key's length crosses the explicit-key limit.
//!
//! What the check cannot see is a compile that treats some index other than
//! 0 and the sentinel differently (`if index == 1`): none does, nothing
//! compiled from an index may, and the tests (`tests/families.rs`, and every
//! debug build) compare families with their tasks compiled alone.

use crate::compile::Manifest;

/// The index a family's template is compiled for: ten different digits, a
/// `u32`, and no index a definition can have (validation caps replicas far
/// below it).
pub const SENTINEL: u32 = 2_718_304_956;

/// Families only pay from this many tasks: two are compiled and rendered
/// either way.
pub const MIN_TASKS: u32 = 3;

/// How a target compiles tasks that are one object each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tasks {
    /// Every task's object compiled (what patches are checked against).
    Each,
    /// The tasks of a role with [`MIN_TASKS`] or more as a [`Family`].
    Families,
}

/// The tasks of one role, as the emit stage renders them.
#[derive(Debug, Clone)]
pub struct Family {
    /// Task 0's object, compiled and rendered as any other.
    pub first: Manifest,
    /// The object of a task whose index is [`SENTINEL`], file name included.
    pub template: Manifest,
    /// The role's other tasks.
    pub others: std::ops::Range<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sentinel_cannot_overlap_itself() {
        let digits = SENTINEL.to_string();
        assert_eq!(digits.len(), 10);
        let mut seen = digits.bytes().collect::<Vec<_>>();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 10, "every digit once: no border to overlap");
        assert!(
            u64::from(SENTINEL) > u64::from(crate::limits::MAX_REPLICAS),
            "no task has the sentinel's index"
        );
    }
}
