//! Labels, annotations and object metadata shared by every generated object.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::model::Job;
use crate::model::job::RoleKind;

pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const NAME: &str = "app.kubernetes.io/name";
pub const COMPONENT: &str = "app.kubernetes.io/component";
pub const JOB: &str = "trainc.dev/job";
pub const ROLE: &str = "trainc.dev/role";
pub const TASK_INDEX: &str = "trainc.dev/task-index";
pub const SOURCE: &str = "trainc.dev/source";

/// Labels that select one job's objects of one component.
pub fn selector(job: &Job, component: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (JOB.to_owned(), job.name.clone()),
        (COMPONENT.to_owned(), component.to_owned()),
    ])
}

/// Labels that select exactly one task's pod, whichever Job (hash) runs it.
pub fn task_selector(job: &Job, role: RoleKind, index: u32) -> BTreeMap<String, String> {
    let mut l = selector(job, role.as_str());
    l.insert(ROLE.to_owned(), role.as_str().to_owned());
    l.insert(TASK_INDEX.to_owned(), index.to_string());
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
