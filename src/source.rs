//! Input files and positions inside them.

use std::sync::Arc;

/// A loaded input file.
#[derive(Debug)]
pub struct SourceFile {
    /// The path as generated files name it (headers, the
    /// `trainc.dev/source` annotation): relative to the project root, with
    /// `/` separators, so it is the same on every machine and wherever in
    /// the project trainc runs.
    pub name: String,
    pub text: String,
    /// The path as messages name it: relative to the working directory, so
    /// that it can be opened from there (`../jobs/a.yaml` when trainc runs
    /// in a subdirectory of the project). The same as `name` when trainc
    /// runs at the project root.
    pub shown: String,
}

impl SourceFile {
    /// A file named the same in messages and in generated files.
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Self {
        let name = name.into();
        Self {
            shown: name.clone(),
            name,
            text: text.into(),
        }
    }
}

/// A position in a source file: 1-based line and column, and, when known, the
/// byte range of the node for underlining.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pos {
    pub line: usize,
    pub column: usize,
    pub byte: Option<usize>,
    pub len: usize,
}

/// A position together with the file it belongs to.
#[derive(Debug, Clone)]
pub struct Location {
    pub file: Arc<SourceFile>,
    pub pos: Pos,
}

impl Location {
    pub fn new(file: &Arc<SourceFile>, pos: Pos) -> Self {
        Self {
            file: Arc::clone(file),
            pos,
        }
    }

    /// The byte range to underline, clamped to the file and never empty, so
    /// the renderer always has something to point its caret at.
    pub fn byte_range(&self) -> std::ops::Range<usize> {
        let text = &self.file.text;
        let start = self
            .pos
            .byte
            .unwrap_or_else(|| byte_of(text, self.pos.line, self.pos.column))
            .min(text.len());
        let mut start = start;
        while !text.is_char_boundary(start) {
            start -= 1;
        }
        let mut end = (start + self.pos.len.max(1)).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        // Never underline past the end of the line the caret starts on.
        if let Some(nl) = text[start..end].find('\n') {
            end = start + nl.max(1).min(end - start);
            while !text.is_char_boundary(end) {
                end += 1;
            }
        }
        start..end
    }
}

/// Byte offset of a 1-based line and (character) column.
fn byte_of(text: &str, line: usize, column: usize) -> usize {
    let mut offset = 0;
    for (i, l) in text.split_inclusive('\n').enumerate() {
        if i + 1 == line {
            return offset
                + l.char_indices()
                    .nth(column.saturating_sub(1))
                    .map_or(l.len(), |(b, _)| b);
        }
        offset += l.len();
    }
    text.len()
}

/// Escapes a key for use as one JSON-pointer segment (RFC 6901).
pub fn pointer_segment(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_range_stays_on_char_boundaries() {
        let file = std::sync::Arc::new(SourceFile::new("t", "ab\u{fffd}c\n\u{e9}"));
        for byte in 0..file.text.len() + 2 {
            for len in 0..6 {
                let loc = Location::new(
                    &file,
                    Pos {
                        line: 1,
                        column: 1,
                        byte: Some(byte),
                        len,
                    },
                );
                let r = loc.byte_range();
                assert!(file.text.get(r.clone()).is_some(), "{byte} {len} {r:?}");
            }
        }
    }

    #[test]
    fn byte_of_counts_characters_not_bytes() {
        let text = "a: é\nbc: 1\n";
        assert_eq!(byte_of(text, 2, 5), 6 + 4);
        assert_eq!(byte_of(text, 1, 4), 3);
        assert_eq!(byte_of(text, 9, 1), text.len());
    }
}
