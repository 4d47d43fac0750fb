//! Every target, registered once: what validation, compile and `diff` ask
//! of a target. A target is its module here, its name in the
//! definition schema's `$defs/target` (from which build.rs generates
//! [`Target`]; the project schema refers to it), and one entry in
//! [`BACKENDS`], which must have one per name.

pub mod jobset;
pub mod kubernetes;
pub mod pytorchjob;
pub mod tfjob;
pub mod trainjob;

use super::crd;
use super::patch::Finding;
use super::{NamesOf, Objects, PodsOf, Run, Tasks};
use crate::load::Findings;
use crate::model::definition::{Framework, Target, TrainingJob};
use crate::model::job::{DEFAULT_BACKOFF_LIMIT, RunDefaults};

/// The kind and API version of a run object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunObject {
    pub kind: &'static str,
    pub api_version: &'static str,
}

impl RunObject {
    pub const fn of<T: k8s_openapi::Resource>() -> Self {
        Self {
            kind: T::KIND,
            api_version: T::API_VERSION,
        }
    }
}

/// What trainc asks of one target.
pub struct Backend {
    pub target: Target,
    /// The output-format version of its runs (see [`super::identity`]).
    pub format: u32,
    /// The one framework it runs; `None`: any.
    pub framework: Option<Framework>,
    /// Why it runs no other, where its run object's kind does not say.
    pub why_one_framework: Option<&'static str>,
    /// The one object a run is, when a run is one object (an operator's
    /// custom resource): how `diff` tells a run's target by its kind, and
    /// what `trainc version` lists.
    pub run_object: Option<RunObject>,
    /// The run's own objects (storage, TensorBoard and NetworkPolicies are
    /// added for every target by [`super::compile`]); a target that writes
    /// one object per task may return a role's tasks as a
    /// [`Family`](super::Family) when asked for [`Tasks::Families`].
    pub compile: fn(&Run, Tasks) -> Result<Objects, Finding>,
    /// What the target cannot express of a definition, as located errors.
    pub check: fn(&mut Findings, &TrainingJob),
    /// The objects a run named `run` with `roles` creates, for the name
    /// length and collision checks.
    pub generated: NamesOf,
    /// The pods one object of [`Backend::pods_kind`], as a file holds it,
    /// runs at once: what `diff` counts a run's cost by.
    pub pods: PodsOf,
    /// The restart policy of a TensorFlow task's pods unless the definition
    /// says: `OnFailure` where a task restarts in place, `Never` where the
    /// target restarts the whole run instead.
    pub task_restart: &'static str,
    /// Whether it restarts every node of a PyTorch run together. Where it
    /// cannot, a PyTorch run fails as a whole: `backoffLimit` is 0, and
    /// more is refused (a node restarted alone waits for its peers forever).
    pub restarts_whole_runs: bool,
    /// Whether something can add nodes to a running PyTorch run (the
    /// PyTorchJob's scale subresource), so that an elastic run's
    /// `maxNodes` may exceed the nodes it starts.
    pub scales_nodes: bool,
    /// Whether its operator writes `TF_CONFIG` into the pods itself.
    pub writes_tf_config: bool,
    /// Whether its operator gives a run's pods a Volcano PodGroup, whose
    /// queue `runPolicy.volcanoQueue` names.
    pub volcano_gang: bool,
}

impl Backend {
    /// The kind of its objects that hold a run's pod templates: the run
    /// object, else (plain Jobs) `Job`.
    pub fn pods_kind(&self) -> &'static str {
        use k8s_openapi::Resource as _;
        self.run_object
            .map_or(k8s_openapi::api::batch::v1::Job::KIND, |o| o.kind)
    }

    /// What a run's policy defaults to here. A PyTorch node's pod is
    /// restarted alone only under elastic rendezvous, where it rejoins its
    /// peers; static rendezvous needs every node to start again together
    /// (`compile::pytorch`).
    pub fn run_defaults(&self, def: &TrainingJob) -> RunDefaults {
        let pytorch = def.framework() == Framework::Pytorch;
        let elastic = def.spec.elastic().is_some();
        RunDefaults {
            restart_policy: match (pytorch, elastic) {
                (true, true) => "OnFailure",
                (true, false) => "Never",
                (false, _) => self.task_restart,
            },
            backoff_limit: if pytorch && !elastic && !self.restarts_whole_runs {
                0
            } else {
                DEFAULT_BACKOFF_LIMIT
            },
        }
    }
}

/// In the order of [`Target::ALL`].
pub const BACKENDS: [Backend; Target::ALL.len()] = [
    Backend {
        target: Target::Kubernetes,
        format: kubernetes::FORMAT,
        framework: None,
        why_one_framework: None,
        run_object: None,
        compile: kubernetes::compile,
        check: |_, _| {},
        generated: kubernetes::generated,
        pods: kubernetes::pods,
        task_restart: "OnFailure",
        restarts_whole_runs: false,
        scales_nodes: false,
        writes_tf_config: false,
        volcano_gang: false,
    },
    Backend {
        target: Target::Jobset,
        format: jobset::FORMAT,
        framework: None,
        why_one_framework: None,
        run_object: Some(RunObject::of::<jobset::JobSet>()),
        compile: |run, _| jobset::compile(run).map(Objects::from),
        check: jobset::check,
        generated: jobset::generated,
        pods: jobset::pods,
        task_restart: "Never",
        restarts_whole_runs: true,
        scales_nodes: false,
        writes_tf_config: false,
        volcano_gang: false,
    },
    Backend {
        target: Target::Tfjob,
        format: tfjob::FORMAT,
        framework: Some(Framework::Tensorflow),
        why_one_framework: None,
        run_object: Some(RunObject::of::<crd::TfJob>()),
        compile: |run, _| tfjob::compile(run).map(Objects::from),
        check: tfjob::check,
        generated: |_, run, roles| tfjob::generated(run, roles),
        pods: tfjob::pods,
        task_restart: "OnFailure",
        restarts_whole_runs: false,
        scales_nodes: false,
        writes_tf_config: true,
        volcano_gang: true,
    },
    Backend {
        target: Target::Pytorchjob,
        format: pytorchjob::FORMAT,
        framework: Some(Framework::Pytorch),
        why_one_framework: None,
        run_object: Some(RunObject::of::<crd::PyTorchJob>()),
        compile: |run, _| pytorchjob::compile(run).map(Objects::from),
        check: pytorchjob::check,
        generated: |_, run, roles| pytorchjob::generated(run, roles),
        pods: pytorchjob::pods,
        task_restart: "OnFailure",
        restarts_whole_runs: false,
        scales_nodes: true,
        writes_tf_config: false,
        volcano_gang: true,
    },
    Backend {
        target: Target::Trainjob,
        format: trainjob::FORMAT,
        framework: Some(Framework::Pytorch),
        why_one_framework: Some("Kubeflow Trainer v2 ships no TensorFlow runtime"),
        run_object: Some(RunObject::of::<trainjob::TrainJob>()),
        compile: |run, _| trainjob::compile(run).map(Objects::from),
        check: trainjob::check,
        generated: |_, run, roles| trainjob::generated(run, roles),
        pods: trainjob::pods,
        task_restart: "Never",
        restarts_whole_runs: true,
        scales_nodes: false,
        writes_tf_config: false,
        volcano_gang: false,
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
