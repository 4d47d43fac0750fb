//! `.dockerignore` as BuildKit reads it: patterns relative to the context
//! root (unlike `.gitignore`, `foo` matches only `./foo`), `*` and `?` within
//! one path segment, `**` across segments, `!` to re-include, last match wins,
//! and a pattern matching a directory excludes everything below it.

use globset::{GlobBuilder, GlobMatcher};

pub struct DockerIgnore {
    rules: Vec<(GlobMatcher, bool)>,
}

impl DockerIgnore {
    /// Parses the file's text. Lines that are not valid patterns are errors
    /// (as they are for BuildKit), returned as `(line, message)`.
    pub fn parse(text: &str) -> Result<Self, (usize, String)> {
        let mut rules = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (negate, pattern) = match line.strip_prefix('!') {
                Some(rest) => (true, rest.trim()),
                None => (false, line),
            };
            let pattern =
                crate::load::normalize(std::path::Path::new(pattern.trim_start_matches('/')));
            // `*` stops at `/`, as in Go's filepath.Match.
            let glob = GlobBuilder::new(&pattern)
                .literal_separator(true)
                .build()
                .map(|g| g.compile_matcher())
                .map_err(|e| (i + 1, e.to_string()))?;
            rules.push((glob, negate));
        }
        Ok(Self { rules })
    }

    /// Whether everything below the directory `rel` is left out: it is, and
    /// no `!` pattern could bring part of it back. Such a directory need not
    /// be walked.
    pub fn excludes_all_below(&self, rel: &str) -> bool {
        self.rules.iter().all(|(_, negate)| !negate) && self.excludes(rel)
    }

    /// Whether the `/`-separated relative path is left out of the context.
    pub fn excludes(&self, rel: &str) -> bool {
        let mut excluded = false;
        for (glob, negate) in &self.rules {
            // The path itself or any directory above it.
            let hit = glob.is_match(rel)
                || rel
                    .match_indices('/')
                    .any(|(i, _)| glob.is_match(&rel[..i]));
            if hit {
                excluded = !negate;
            }
        }
        excluded
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_follow_buildkit() {
        let d = DockerIgnore::parse(
            "# comment\n*.md\n!README.md\ndata\n**/__pycache__\n/secrets/*.key\n",
        )
        .unwrap();
        assert!(d.excludes("NOTES.md"));
        assert!(!d.excludes("README.md"));
        // Root-relative, unlike .gitignore.
        assert!(!d.excludes("docs/NOTES.md"));
        assert!(d.excludes("data/train.csv"));
        assert!(!d.excludes("src/data"));
        assert!(d.excludes("a/b/__pycache__/x.pyc"));
        assert!(d.excludes("secrets/id.key"));
        // A `!` pattern may bring back something anywhere: walk everything.
        assert!(!d.excludes_all_below("data"));
        let d = DockerIgnore::parse(".git\ndata\n").unwrap();
        assert!(d.excludes_all_below(".git"));
        assert!(!d.excludes_all_below("src"));
        assert!(!d.excludes("mnist.py"));
    }
}
