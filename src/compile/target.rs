//! Every target, registered once: what validation, compile and `diff` ask
//! of a target. A target is its module under `compile/`, its variant of
//! [`Target`] (with the schema's `target` enums), and one entry in
//! [`BACKENDS`].

use super::patch::Finding;
use super::{NamesOf, Objects, Run, Tasks};
use super::{jobset, kubernetes, pytorchjob, tfjob};
use crate::load::Findings;
use crate::model::definition::{Framework, Target, TrainingJob};

/// What trainc asks of one target.
pub struct Backend {
    pub target: Target,
    /// The output-format version of its runs (see [`super::identity`]).
    pub format: u32,
    /// The one framework it runs; `None`: any.
    pub framework: Option<Framework>,
    /// The kind of the one object a run is, when a run is one object (an
    /// operator's custom resource): how `diff` tells a run's target.
    pub run_kind: Option<&'static str>,
    /// The run's own objects (storage, TensorBoard and NetworkPolicies are
    /// added for every target by [`super::compile`]); a target that writes
    /// one object per task may return a role's tasks as a [`Family`] when
    /// asked for [`Tasks::Families`].
    pub compile: fn(&Run, Tasks) -> Result<Objects, Finding>,
    /// What the target cannot express of a definition, as located errors.
    pub check: fn(&mut Findings, &TrainingJob),
    /// The objects a run named `run` with `roles` creates, for the name
    /// length and collision checks.
    pub generated: NamesOf,
}

/// In the order of [`Target::ALL`].
pub const BACKENDS: [Backend; Target::ALL.len()] = [
    Backend {
        target: Target::Kubernetes,
        format: kubernetes::FORMAT,
        framework: None,
        run_kind: None,
        compile: kubernetes::compile,
        check: |_, _| {},
        generated: kubernetes::generated,
    },
    Backend {
        target: Target::Jobset,
        format: jobset::FORMAT,
        framework: None,
        run_kind: Some("JobSet"),
        compile: |run, _| jobset::compile(run).map(Objects::from),
        check: jobset::check,
        generated: jobset::generated,
    },
    Backend {
        target: Target::Tfjob,
        format: tfjob::FORMAT,
        framework: Some(Framework::Tensorflow),
        run_kind: Some("TFJob"),
        compile: |run, _| tfjob::compile(run).map(Objects::from),
        check: tfjob::check,
        generated: |_, run, roles| tfjob::generated(run, roles),
    },
    Backend {
        target: Target::Pytorchjob,
        format: pytorchjob::FORMAT,
        framework: Some(Framework::Pytorch),
        run_kind: Some("PyTorchJob"),
        compile: |run, _| pytorchjob::compile(run).map(Objects::from),
        check: |_, _| {},
        generated: |_, run, roles| pytorchjob::generated(run, roles),
    },
];

/// The registration of `target`.
pub fn backend(target: Target) -> &'static Backend {
    &BACKENDS[target as usize]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_target_is_registered_in_its_place() {
        for (i, t) in Target::ALL.into_iter().enumerate() {
            assert_eq!(BACKENDS[i].target, t);
            assert_eq!(backend(t).target, t);
        }
    }
}
