//! Stage 1 (load): the common definition read straight from the YAML
//! parser's events into a JSON value and its span index, without
//! serde-saphyr's deserializer.
//!
//! serde-saphyr spends about two thirds of a definition's parse above its
//! parser, granit-parser (its event layer, budgets, anchors, tags and the
//! typeless `deserialize_any`), which a cold build of 1,000 definitions pays
//! 1,000 times. This reader drives the same parser with the same options
//! and builds the same value and positions for the documents definitions
//! are made of: mappings, sequences, quoted and block strings, and plain
//! scalars whose type is plain to see. Anything else, and every error, is
//! `None`, and [`super::parse`] reads the file with serde-saphyr as before:
//! an anchor, an alias, a tag, a merge key, a null, a duplicate key, a plain
//! scalar that is not obviously a string, a boolean, an integer or a
//! decimal, a nesting or a size near a budget. So the messages, the
//! budgets and the rules for what is refused stay serde-saphyr's alone, and
//! what this reader returns is what serde-saphyr returns: `tests` checks
//! that, value and every position, on every YAML file of the repository and
//! on generated documents.

use granit_parser::{Event, ScalarStyle, Span};
use serde_json::{Map, Number, Value};

use super::node::{NodePos, SpanIndex, push_segment};
use crate::source::Pos;

/// Past these, serde-saphyr's budgets (or the parser's own limits) decide.
const MAX_BYTES: usize = 1 << 20;
const MAX_DEPTH: usize = super::MAX_DEPTH / 2;
const MAX_DOCUMENTS: usize = 100;
/// Nodes of all documents: well under serde-saphyr's `max_nodes` (250,000),
/// which a megabyte of `[1,1,…]` would pass.
const MAX_NODES: usize = 50_000;

/// The documents of `text` with their span indexes, or `None` when
/// serde-saphyr must read it.
pub(super) fn parse(text: &str) -> Option<Vec<(Value, SpanIndex)>> {
    if text.len() > MAX_BYTES {
        return None;
    }
    // serde-saphyr's parser options for trainc's budget: the parser's
    // defaults (its nesting limit is above `MAX_DEPTH` + 1), no comments.
    let options = granit_parser::options! { emit_comments: false };
    let mut events = granit_parser::Parser::new_from_str_with_options(text, options);
    let mut next = || match events.next() {
        Some(Ok(e)) => Some(e),
        // An error, or a parser that stops short: serde-saphyr says why.
        Some(Err(_)) | None => None,
    };
    if !matches!(next()?.0, Event::StreamStart) {
        return None;
    }
    let mut docs = Vec::new();
    let mut nodes = 0;
    loop {
        match next()?.0 {
            Event::StreamEnd => return Some(docs),
            Event::DocumentStart(_, None) if docs.len() < MAX_DOCUMENTS => {}
            _ => return None,
        }
        let mut index = SpanIndex::default();
        let (first, span) = next()?;
        let root_pos = pos(&span);
        index.insert(
            String::new(),
            NodePos {
                key: None,
                value: root_pos,
                text: root_pos,
            },
        );
        let mut reader = Reader {
            next: &mut next,
            index: &mut index,
            pointer: String::new(),
            nodes,
        };
        let value = reader.node(first, 0)?;
        nodes = reader.nodes;
        if !matches!(next()?.0, Event::DocumentEnd) {
            return None;
        }
        docs.push((value, index));
    }
}

struct Reader<'a, F> {
    next: &'a mut F,
    index: &'a mut SpanIndex,
    /// The JSON pointer of the node being read.
    pointer: String,
    /// Nodes read so far, in every document.
    nodes: usize,
}

impl<'input, F: FnMut() -> Option<(Event<'input>, Span)>> Reader<'_, F> {
    /// The node that `first` starts, its position already indexed.
    fn node(&mut self, first: Event<'input>, depth: usize) -> Option<Value> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return None;
        }
        match first {
            Event::Scalar(text, style, 0, None) => scalar(&text, style),
            Event::SequenceStart(_, 0, None) if depth < MAX_DEPTH => self.sequence(depth + 1),
            Event::MappingStart(_, 0, None) if depth < MAX_DEPTH => self.mapping(depth + 1),
            _ => None,
        }
    }

    fn sequence(&mut self, depth: usize) -> Option<Value> {
        use std::fmt::Write as _;
        let mut items = Vec::new();
        let len = self.pointer.len();
        loop {
            let (event, span) = (self.next)()?;
            if matches!(event, Event::SequenceEnd) {
                return Some(Value::Array(items));
            }
            // Writing into a String cannot fail.
            let _ = write!(self.pointer, "/{}", items.len());
            let at = pos(&span);
            self.index.insert(
                self.pointer.clone(),
                NodePos {
                    key: None,
                    value: at,
                    text: at,
                },
            );
            items.push(self.node(event, depth)?);
            self.pointer.truncate(len);
        }
    }

    fn mapping(&mut self, depth: usize) -> Option<Value> {
        let mut entries = Map::new();
        let len = self.pointer.len();
        loop {
            let (event, key_span) = (self.next)()?;
            let key = match event {
                Event::MappingEnd => return Some(Value::Object(entries)),
                Event::Scalar(text, style, 0, None) => key(text.into_owned(), style)?,
                _ => return None,
            };
            if entries.contains_key(&key) {
                return None;
            }
            let (event, span) = (self.next)()?;
            self.pointer.push('/');
            push_segment(&mut self.pointer, &key);
            let at = pos(&span);
            self.index.insert(
                self.pointer.clone(),
                NodePos {
                    key: Some(pos(&key_span)),
                    value: at,
                    text: at,
                },
            );
            let value = self.node(event, depth)?;
            self.pointer.truncate(len);
            entries.insert(key, value);
        }
    }
}

/// A position as serde-saphyr's `Location` gives it: line from 1, column
/// from 1, the span in bytes.
fn pos(span: &Span) -> Pos {
    let byte = span.start.byte_offset();
    Pos {
        line: span.start.line(),
        column: span.start.col() + 1,
        byte,
        len: match (byte, span.end.byte_offset()) {
            (Some(start), Some(end)) => end.saturating_sub(start),
            _ => 0,
        },
    }
}

/// A mapping key as text: any quoted or block scalar, and a plain one that
/// is a string (a plain `true` or `1` key is spelled by serde-saphyr).
fn key(text: String, style: ScalarStyle) -> Option<String> {
    match style {
        ScalarStyle::Plain => matches!(scalar(&text, style)?, Value::String(_)).then_some(text),
        _ => Some(text),
    }
}

/// A scalar's value under YAML 1.2's core schema as serde-saphyr resolves
/// it with trainc's options (strict booleans, no legacy octal, no property
/// interpolation), when that is plain to see; `None` otherwise.
///
/// serde-saphyr tries, in order: null (`~`, `null`, empty), a boolean, an
/// integer (decimal, or after `0x`, `0o`, `0b`, with a sign), a float
/// (`.inf`, `.nan`, or what Rust's `f64` parser reads and is finite), and
/// takes anything else for a string. So text that Rust's float parser
/// refuses, with no radix prefix and no digits run together with `_`, is a
/// string whatever its first character; of the numbers only decimal
/// integers and `1.5`-shaped floats are taken here.
fn scalar(text: &str, style: ScalarStyle) -> Option<Value> {
    if style != ScalarStyle::Plain {
        return Some(Value::String(text.to_owned()));
    }
    match text {
        "true" | "True" | "TRUE" => return Some(Value::Bool(true)),
        "false" | "False" | "FALSE" => return Some(Value::Bool(false)),
        // Null, merge keys and `${…}` (which serde-saphyr can be told to
        // expand) are left to serde-saphyr.
        "" | "~" | "null" | "Null" | "NULL" | "<<" => return None,
        _ if text.contains('$') => return None,
        _ => {}
    }
    let b = text.as_bytes();
    if b.iter().all(u8::is_ascii_digit) {
        // Leading zeros, and integers past u64, are serde-saphyr's.
        return if b[0] != b'0' || b.len() == 1 {
            text.parse::<u64>().ok().map(|n| Value::Number(n.into()))
        } else {
            None
        };
    }
    if let Some(digits) = text.strip_prefix('-')
        && !digits.is_empty()
        && digits.bytes().all(|c| c.is_ascii_digit())
    {
        return if !digits.starts_with('0') || digits.len() == 1 {
            text.parse::<i64>().ok().map(|n| Value::Number(n.into()))
        } else {
            None
        };
    }
    let unsigned = text.strip_prefix(['+', '-']).unwrap_or(text);
    let radix = unsigned.len() > 1
        && unsigned.starts_with('0')
        && matches!(
            unsigned.as_bytes()[1],
            b'x' | b'X' | b'o' | b'O' | b'b' | b'B'
        );
    // What an integer parser that skips `_` might read (`1_000`, `-1_0e3`).
    let underscored = text.contains('_')
        && unsigned
            .bytes()
            .all(|c| c.is_ascii_digit() || matches!(c, b'_' | b'.' | b'e' | b'E' | b'+' | b'-'));
    let non_finite = [".inf", ".nan"]
        .iter()
        .any(|w| unsigned.eq_ignore_ascii_case(w));
    if radix || underscored || non_finite {
        return None;
    }
    match text.parse::<f64>() {
        // `1.5`, the only spelling of a float taken here.
        Ok(f) => {
            let (whole, fraction) = text.split_once('.')?;
            let digits = |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit());
            (digits(whole) && digits(fraction) && (whole == "0" || !whole.starts_with('0')))
                .then(|| Number::from_f64(f).map(Value::Number))
                .flatten()
        }
        Err(_) => Some(Value::String(text.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::source::SourceFile;

    /// Words a YAML reader may take for something other than text, or
    /// refuse, and the shapes of definitions' values.
    const WORDS: &[&str] = &[
        "",
        "~",
        "null",
        "Null",
        "true",
        "True",
        "FALSE",
        "yes",
        "on",
        "no",
        "y",
        "n",
        "0",
        "00",
        "01",
        "-1",
        "+1",
        "-0",
        "1_0",
        "0x1F",
        "0X1f",
        "0o7",
        "0b1",
        "1e3",
        "1E3",
        "1.",
        ".5",
        "1.5",
        "0.5",
        "0.001",
        "00.5",
        "1.5e3",
        "1e999",
        "inf",
        ".inf",
        "-.inf",
        "nan",
        ".NaN",
        "Infinity",
        "8Gi",
        "500m",
        "2x",
        "9e",
        "1:20",
        "2001-01-01",
        "<<",
        "=",
        "-",
        "--",
        "---",
        "---x",
        "...",
        "? x",
        "- x",
        ":x",
        "x:",
        "a #b",
        "#x",
        "'q'",
        "\"d\"",
        "\"\\t\"",
        "'it''s'",
        "|",
        ">",
        "|-\n  a\n  b",
        "[a]",
        "[]",
        "{}",
        "{a: 1}",
        "{a: 1, a: 2}",
        "*a",
        "&a x",
        "!!str 1",
        "!!int 1",
        "!x y",
        "${HOME}",
        "é",
        "训练",
        "a\tb",
        "/app/x.py",
        "18446744073709551616",
        "18446744073709551615",
        "9223372036854775808",
        "1.7976931348623157e309",
        "3.14159265358979323846264338327950288",
        "registry.io/a:1.0",
        "--lr=0.1",
        "a: b",
        "x # y",
        "\"unterminated",
        "-01",
        "+0",
        "1_000",
        "-1_0",
        "a_b",
        "_x",
        "x_1",
        "1_a",
        "0x_1",
        "./x",
        "../x",
        "-.5",
        "+.inf",
        "-.Inf",
        ".NAN",
        "1.0",
        "-1.5",
        "1.50",
        "10.0.0.0/8",
        "1.2.3",
        "12e",
        "1e",
        "e1",
        "-inf",
        "+nan",
        "0.0",
        "-0.0",
        "9223372036854775807",
        "-9223372036854775808",
        "-9223372036854775809",
        "$patch",
    ];

    /// SplitMix64, seeded: the same cases on every machine.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }

        fn below(&mut self, n: usize) -> usize {
            usize::try_from(self.next() % n as u64).unwrap_or(0)
        }
    }

    /// Whether this reader took `text`; panics unless what it read is what
    /// serde-saphyr reads, value and every position.
    fn agrees(text: &str) -> bool {
        let Some(ours) = parse(text) else {
            return false;
        };
        let file = Arc::new(SourceFile {
            name: "t.yaml".into(),
            text: text.to_owned(),
            shown: "t.yaml".into(),
        });
        let theirs = super::super::parse_with_saphyr(&file)
            .unwrap_or_else(|d| panic!("serde-saphyr refuses what was read: {d:?}\n{text}"));
        assert_eq!(ours.len(), theirs.len(), "documents of\n{text}");
        for ((v, s), (tv, ts)) in ours.iter().zip(&theirs) {
            assert_eq!(v, tv, "value of\n{text}");
            assert!(s == ts, "positions of\n{text}\n{s:#?}\n{ts:#?}");
        }
        true
    }

    fn yaml_files() -> Vec<(String, String)> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut out = Vec::new();
        for dir in ["examples", "tests", "library", "docs"] {
            for e in walkdir::WalkDir::new(root.join(dir)).sort_by_file_name() {
                let Ok(e) = e else { continue };
                let p = e.path();
                if e.file_type().is_file()
                    && p.extension().is_some_and(|x| x == "yaml" || x == "yml")
                    && let Ok(text) = std::fs::read_to_string(p)
                {
                    out.push((p.display().to_string(), text));
                }
            }
        }
        out
    }

    /// One random edit of a line-based kind: a value, key or item replaced
    /// by a word, a line doubled, dropped, re-indented or commented, a
    /// document marker, an anchor, line ends in CRLF.
    fn mutate(rng: &mut Rng, text: &str) -> String {
        let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
        if lines.is_empty() {
            return WORDS[rng.below(WORDS.len())].to_owned();
        }
        for _ in 0..1 + rng.below(3) {
            let i = rng.below(lines.len());
            let word = WORDS[rng.below(WORDS.len())];
            let line = lines[i].clone();
            lines[i] = match rng.below(10) {
                0..=2 => match line.split_once(": ") {
                    Some((k, _)) => format!("{k}: {word}"),
                    None => format!("{line}{word}"),
                },
                3 => match line.split_once("- ") {
                    Some((k, _)) => format!("{k}- {word}"),
                    None => line,
                },
                4 => match line.split_once(':') {
                    Some((k, v)) => {
                        let indent = k.len() - k.trim_start().len();
                        format!("{}{word}:{v}", &k[..indent])
                    }
                    None => line,
                },
                5 => {
                    lines.insert(i, line.clone());
                    line
                }
                6 => format!(" {line}"),
                7 => format!("{line} # {word}"),
                8 => format!("---\n{line}"),
                _ => match line.split_once(": ") {
                    Some((k, v)) => format!("{k}: &a {v}\n{k}x: *a"),
                    None => line,
                },
            };
        }
        let text = lines.join("\n") + "\n";
        if rng.below(20) == 0 {
            text.replace('\n', "\r\n")
        } else {
            text
        }
    }

    #[test]
    fn every_yaml_file_of_the_repository_reads_as_serde_saphyr_reads_it() {
        let files = yaml_files();
        assert!(files.len() > 100, "{}", files.len());
        let taken = files.iter().filter(|(_, t)| agrees(t)).count();
        // Definitions, projects and manifests are what it is for.
        assert!(taken * 10 > files.len() * 8, "{taken} of {}", files.len());
        for name in [
            "examples/mnist/jobs/mnist.yaml",
            "examples/pytorch/jobs/digits.yaml",
        ] {
            let (_, text) = files
                .iter()
                .find(|(p, _)| p.ends_with(name))
                .unwrap_or_else(|| panic!("{name}"));
            assert!(parse(text).is_some(), "{name}");
        }
    }

    /// Every YAML file of the repository, edited at random: whatever this
    /// reader takes, serde-saphyr reads the same; the rest it leaves.
    /// `TRAINC_LOAD_FUZZ_EDITS` edits each file more times (12).
    #[test]
    fn edited_files_read_as_serde_saphyr_reads_them() {
        let mut rng = Rng(0x7472_6169_6e63);
        let (mut taken, mut cases) = (0, 0);
        let edits = std::env::var("TRAINC_LOAD_FUZZ_EDITS")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(12);
        for (_, text) in yaml_files() {
            for _ in 0..edits {
                let edited = mutate(&mut rng, &text);
                cases += 1;
                if agrees(&edited) {
                    taken += 1;
                }
            }
        }
        // Enough of both kinds to mean something.
        assert!(
            taken * 4 > cases && taken * 10 < cases * 9,
            "{taken} of {cases}"
        );
    }

    /// Each word alone, as a value, a key and an item, in block and flow
    /// style.
    #[test]
    fn every_word_reads_as_serde_saphyr_reads_it() {
        for w in WORDS {
            for text in [
                format!("{w}\n"),
                format!("k: {w}\n"),
                format!("{w}: v\n"),
                format!("- {w}\n"),
                format!("m: {{k: {w}}}\n"),
                format!("l: [{w}, x]\n"),
                format!("a:\n  b:\n    - c: {w}\n"),
            ] {
                agrees(&text);
            }
        }
        assert!(agrees("k: 8Gi\nl: [1, 0.5, true, /x, a b]\n"));
        for refused in [
            "k: null\n",
            "k: &a 1\n",
            "k: !!str 1\n",
            "true: 1\n",
            "a: 1\na: 2\n",
        ] {
            assert!(parse(refused).is_none(), "{refused}");
        }
    }
}
