//! The rules across definition documents, each once. A full build runs them
//! over every document it validated and reports what they find at the
//! documents ([`super::validate_all`], [`super::budget`]); the build cache's
//! incremental build runs the same functions over the summaries it keeps of
//! the files it did not compile again, and leaves whatever they find to the
//! full build, which reports it. So a rule added here holds for both.

use std::collections::HashMap;

use crate::limits::MAX_OUTPUT_BYTES;

/// Jobs defined twice: for each document (by its namespace and name, in the
/// order findings are reported) that defines a job an earlier one defines,
/// the index of that earlier one and its own.
pub fn defined_twice<'a>(
    jobs: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Vec<(usize, usize)> {
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
pub struct SameObject {
    /// The document that generates it first.
    pub first: usize,
    /// The later one, and which of its claims it is.
    pub again: usize,
    pub claim: usize,
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
pub fn same_objects<'a, C>(claims: impl IntoIterator<Item = C>) -> Vec<SameObject>
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
pub fn over_budget(floors: impl IntoIterator<Item = u64>) -> Option<u64> {
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
