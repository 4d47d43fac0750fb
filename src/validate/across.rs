//! The rules across definition documents, each once, in one function:
//! [`check`]. A full build runs it over every document it validated and
//! reports what it finds at the documents ([`super::validate_all`]); the
//! build cache runs it over the summaries it keeps of the files it did not
//! compile again, and leaves whatever it finds to the full build, which
//! reports it. So a rule added to [`check`] holds for both.

use std::collections::HashMap;

use crate::diagnostic::Diagnostic;
use crate::limits::{MAX_OUTPUT_BYTES, mib};
use crate::source::Location;

/// A definition document as the rules across documents see it.
#[derive(Debug, Clone)]
pub struct Doc<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    /// The objects it generates.
    pub claims: Vec<Claim<'a>>,
    /// The least output it makes (see [`super::floor`]).
    pub floor: u64,
    /// Where its `metadata.name` is written, where findings about it point;
    /// `None` for the build cache's summaries.
    pub at: Option<Location>,
}

/// The rules across documents, over `docs` in the order findings are
/// reported (by file name, then position): a job defined twice, the output
/// budget of all documents together, and (only when nothing else was found,
/// `clean`: a document that failed its own checks may claim anything) an
/// object two jobs generate.
pub fn check(docs: &[Doc], clean: bool) -> Vec<Diagnostic> {
    let mut found = Vec::new();
    let keys = docs.iter().map(|d| (d.namespace, d.name));
    for (first, again) in defined_twice(keys) {
        let d = &docs[again];
        let mut finding =
            Diagnostic::new(format!("job `{}/{}` is defined twice", d.namespace, d.name))
                .path("metadata.name")
                .at(d.at.clone())
                .hint("give each job its own name or namespace");
        if let Some(loc) = docs[first].at.clone() {
            finding = finding.related("first defined here", loc);
        }
        found.push(finding);
    }
    if let Some(total) = over_budget(docs.iter().map(|d| d.floor)) {
        found.push(
            Diagnostic::new(format!(
                "the {} jobs make at least {} of manifests together, over the {} limit for a build's output",
                docs.len(),
                mib(total),
                mib(MAX_OUTPUT_BYTES)
            ))
            .hint("split the definitions into projects with their own output directories"),
        );
    }
    if !(clean && found.is_empty()) {
        return found;
    }
    for same in same_objects(docs.iter().map(|d| d.claims.iter().copied())) {
        let d = &docs[same.again];
        let claim = &d.claims[same.claim];
        let shown = match claim.namespace {
            Some(ns) => format!("{ns}/{}", claim.name),
            None => claim.name.to_owned(),
        };
        let mut finding = Diagnostic::new(format!(
            "this job generates {} `{shown}`, which another job generates too",
            claim.kind
        ))
        .path("metadata.name")
        .at(d.at.clone())
        .hint("rename the job or the volume so generated names differ");
        if let Some(loc) = docs[same.first].at.clone() {
            finding = finding.related("the other job", loc);
        }
        found.push(finding);
    }
    found
}

/// Jobs defined twice: for each document (by its namespace and name, in the
/// order findings are reported) that defines a job an earlier one defines,
/// the index of that earlier one and its own.
fn defined_twice<'a>(jobs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<(usize, usize)> {
    let mut first: HashMap<(&str, &str), usize> = HashMap::new();
    let mut found = Vec::new();
    for (i, job) in jobs.into_iter().enumerate() {
        match first.get(&job) {
            Some(&f) => found.push((f, i)),
            None => {
                first.insert(job, i);
            }
        }
    }
    found
}

/// An object two jobs generate (job `a` with volume `z-data` and job `a-z`
/// with volume `data` both claim `a-z-data`): they would overwrite each
/// other in the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SameObject {
    /// The document that generates it first.
    first: usize,
    /// The later one, and which of its claims it is.
    again: usize,
    claim: usize,
}

/// An object a job generates, as two jobs could both claim it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Claim<'a> {
    pub kind: &'a str,
    /// `None` for cluster-scoped objects.
    pub namespace: Option<&'a str>,
    pub name: &'a str,
}

/// Objects two documents generate, given each document's claims in the
/// order findings are reported: at most one finding per document, at its
/// first claim that an earlier document holds.
fn same_objects<'a, C>(claims: impl IntoIterator<Item = C>) -> Vec<SameObject>
where
    C: IntoIterator<Item = Claim<'a>>,
{
    let mut owners: HashMap<Claim<'a>, usize> = HashMap::new();
    let mut found = Vec::new();
    for (doc, claims) in claims.into_iter().enumerate() {
        let mut reported = false;
        for (claim, key) in claims.into_iter().enumerate() {
            match owners.get(&key) {
                Some(&first) if first != doc && !reported => {
                    found.push(SameObject {
                        first,
                        again: doc,
                        claim,
                    });
                    reported = true;
                }
                Some(_) => {}
                None => {
                    owners.insert(key, doc);
                }
            }
        }
    }
    found
}

/// The least output of all documents together (see [`super::floor`]) when
/// it passes the output limit while none passes it alone (a document
/// that does is refused on its own, at its replicas).
fn over_budget(floors: impl IntoIterator<Item = u64>) -> Option<u64> {
    let mut total = 0u64;
    for floor in floors {
        if floor > MAX_OUTPUT_BYTES {
            return None;
        }
        total = total.saturating_add(floor);
    }
    (total > MAX_OUTPUT_BYTES).then_some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_later_definition_of_a_job_is_the_one_found() {
        let jobs = [
            ("ml", "a"),
            ("ml", "b"),
            ("other", "a"),
            ("ml", "a"),
            ("ml", "a"),
        ];
        assert_eq!(defined_twice(jobs), [(0, 3), (0, 4)]);
    }

    #[test]
    fn a_shared_object_is_found_once_per_document() {
        let claim = |kind, namespace, name| Claim {
            kind,
            namespace,
            name,
        };
        let pv = |n| claim("PersistentVolume", None, n);
        let svc = |n| claim("Service", Some("ml"), n);
        let claims = vec![
            vec![pv("a-z-data"), svc("a")],
            vec![svc("b")],
            vec![pv("x"), pv("a-z-data"), svc("a")],
            // A document may claim one object twice: that is no conflict.
            vec![pv("y"), pv("y")],
        ];
        assert_eq!(
            same_objects(claims),
            [SameObject {
                first: 0,
                again: 2,
                claim: 1
            }]
        );
    }

    #[test]
    fn the_budget_of_all_documents_is_found_when_none_passes_alone() {
        let half = MAX_OUTPUT_BYTES / 2 + 1;
        assert_eq!(over_budget([half, half]), Some(2 * half));
        assert_eq!(over_budget([half, 1]), None);
        assert_eq!(over_budget([MAX_OUTPUT_BYTES + 1, half]), None);
    }
}
