//! Where a task's index comes from, for the pod templates that write it
//! into variables and flags ([`super::pod`], [`super::tensorflow`],
//! [`super::pytorch`]).

/// The variable holding a task's index where the pod template is shared by
/// several tasks and the index comes from the pod's metadata at run time.
pub const INDEX_VAR: &str = "TRAINC_TASK_INDEX";

/// Where a task's index comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Index {
    /// One pod template per task: the index is written out, and
    /// [`INDEX_VAR`] holds it too.
    Fixed(u32),
    /// One pod template for several tasks: the index is the value of this
    /// pod label, read into [`INDEX_VAR`] through the downward API and
    /// expanded by Kubernetes where `$(TRAINC_TASK_INDEX)` appears in other
    /// variables and in arguments.
    Label(&'static str),
    /// [`Index::Label`], from this pod annotation: the Job controller's
    /// `batch.kubernetes.io/job-completion-index`, which every pod of an
    /// Indexed Job carries, while the label of that name needs the
    /// `PodIndexLabel` feature (on by default only from Kubernetes 1.28).
    Annotation(&'static str),
}

impl Index {
    /// The index as it appears in variables and flags.
    pub fn render(self) -> String {
        match self {
            Index::Fixed(i) => i.to_string(),
            Index::Label(_) | Index::Annotation(_) => format!("$({INDEX_VAR})"),
        }
    }
}
