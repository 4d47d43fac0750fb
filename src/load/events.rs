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
//! on generated documents. A tagged node, never read here, makes
//! [`super::parse`] look for the first tag with [`first_tag`] and refuse
//! the file, before serde-saphyr would decode or drop the tag.

use granit_parser::{Event, ScalarStyle, Span};
use serde_json::{Map, Number, Value};

use super::node::{NodePos, SpanIndex, push_segment};
use crate::source::Pos;

/// Past these, serde-saphyr's budgets (or the parser's own limits) decide.
pub(super) const MAX_BYTES: usize = 1 << 20;
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

/// The first explicit tag of `text` (`!!binary`, `!!str`, `!custom`, a
/// lone `!`) as written, and where it is, if the parser reaches one before
/// an error. Only text with a `!` can hold one, and most definitions have
/// none: those are not parsed again.
pub(super) fn first_tag(text: &str) -> Option<(String, Pos)> {
    memchr::memchr(b'!', text.as_bytes())?;
    let options = granit_parser::options! { emit_comments: false };
    granit_parser::Parser::new_from_str_with_options(text, options)
        .map_while(Result::ok)
        .find_map(|(event, span)| {
            let tag = event.tag()?;
            let at = span
                .tag_span()
                .or_else(|| span.tag_start().map(Span::empty))
                .unwrap_or(span);
            let written = at.slice(text).map_or_else(
                || format!("{}{}", tag.original_handle(), tag.suffix()),
                str::to_owned,
            );
            Some((written, pos(&at)))
        })
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
mod tests;
