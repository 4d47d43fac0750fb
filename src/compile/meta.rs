//! Stage 3 (compile), shared by every target: labels, annotations and object
//! metadata.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::model::Job;
use crate::model::definition::RoleKind;

pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const NAME: &str = "app.kubernetes.io/name";
pub const COMPONENT: &str = "app.kubernetes.io/component";
pub const JOB: &str = "trainc.dev/job";
pub const ROLE: &str = "trainc.dev/role";
pub const TASK_INDEX: &str = "trainc.dev/task-index";
pub const RUN: &str = "trainc.dev/run";
/// The output-format version of a run object, so that `diff` can tell a
/// re-run caused by a new trainc release from one caused by a definition.
pub const FORMAT: &str = "trainc.dev/format";
pub const SOURCE: &str = "trainc.dev/source";

/// Labels that select one job's objects of one component.
pub fn selector(job: &Job, component: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (JOB.to_owned(), job.name.clone()),
        (COMPONENT.to_owned(), component.to_owned()),
    ])
}

/// Labels of the pods of one run.
pub fn run_selector(run: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(RUN.to_owned(), run.to_owned())])
}

/// The selector labels of an object that stands for a whole run (its
/// headless Service, its JobSet or TFJob).
pub fn run_labels(job: &Job, run: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (JOB.to_owned(), job.name.clone()),
        (RUN.to_owned(), run.to_owned()),
    ])
}

/// Labels of a task's pod: its run, role and, where one pod template is one
/// task, its index.
pub fn task_selector(
    job: &Job,
    run: &str,
    role: RoleKind,
    index: Option<u32>,
) -> BTreeMap<String, String> {
    let mut l = selector(job, role.as_str());
    l.insert(RUN.to_owned(), run.to_owned());
    l.insert(ROLE.to_owned(), role.as_str().to_owned());
    if let Some(index) = index {
        l.insert(TASK_INDEX.to_owned(), index.to_string());
    }
    l
}

/// Every label of an object: the user's, then trainc's recommended set, then
/// the selector labels. trainc's keys are reserved by validation, so the
/// order only matters for readability.
pub fn labels(job: &Job, selector: BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut l = job.labels.clone();
    l.insert(NAME.to_owned(), job.name.clone());
    l.insert(MANAGED_BY.to_owned(), "trainc".to_owned());
    l.extend(selector);
    l
}

pub fn annotations(job: &Job) -> BTreeMap<String, String> {
    let mut a = job.annotations.clone();
    a.insert(SOURCE.to_owned(), job.source.clone());
    a
}

/// The metadata of a run object (a Job, JobSet or TFJob): its annotations
/// also say which output format rendered it.
pub fn run_object(job: &Job, name: &str, labels: BTreeMap<String, String>) -> ObjectMeta {
    let mut m = object(job, name, true, labels);
    if let Some(a) = &mut m.annotations {
        a.insert(FORMAT.to_owned(), super::format(job.target).to_string());
    }
    m
}

pub fn object(
    job: &Job,
    name: &str,
    namespaced: bool,
    labels: BTreeMap<String, String>,
) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: namespaced.then(|| job.namespace.clone()),
        labels: Some(labels),
        annotations: Some(annotations(job)),
        ..ObjectMeta::default()
    }
}
