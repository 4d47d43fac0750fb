//! "Did you mean" suggestions for misspelt names.

/// The candidate closest to `input`, if it is close enough to be a likely typo.
pub fn did_you_mean<'a>(input: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let lower = input.to_ascii_lowercase();
    candidates
        .map(|c| (strsim::jaro_winkler(&lower, &c.to_ascii_lowercase()), c))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0).then_with(|| b.1.cmp(a.1)))
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_names_only() {
        let c = ["replicas", "resources", "image"];
        assert_eq!(did_you_mean("replica", c.into_iter()), Some("replicas"));
        assert_eq!(did_you_mean("Replicas", c.into_iter()), Some("replicas"));
        assert_eq!(did_you_mean("resource", c.into_iter()), Some("resources"));
        assert_eq!(did_you_mean("zzz", c.into_iter()), None);
    }
}
