//! A YAML document as a JSON value plus the source position of every node.
//!
//! JSON Schema validation and the typed model both work on `serde_json::Value`,
//! and both report problems as JSON paths. Keeping a path → position index beside
//! the value lets every later stage point back at the exact line and column
//! without carrying spans through the typed model.

use std::collections::HashMap;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use serde_saphyr::Spanned;

use crate::source::Pos;

/// One YAML node with its children, each child carrying its position.
#[derive(Debug)]
pub(crate) enum Node {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Str(String),
    Seq(Vec<Spanned<Node>>),
    Map(Vec<(Spanned<Key>, Spanned<Node>)>),
}

/// A mapping key. YAML allows any scalar as a key; JSON wants strings, so
/// scalars are spelled as text and anything else is refused with a position.
#[derive(Debug)]
pub(crate) struct Key(pub String);

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a YAML value")
    }
    fn visit_unit<E>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_none<E>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
        d.deserialize_any(NodeVisitor)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Node, E> {
        Ok(Node::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Node, E> {
        Ok(Node::Int(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Node, E> {
        Ok(Node::UInt(v))
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Node, E> {
        i64::try_from(v)
            .map(Node::Int)
            .map_err(|_| E::custom("integer out of range"))
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Node, E> {
        u64::try_from(v)
            .map(Node::UInt)
            .map_err(|_| E::custom("integer out of range"))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Node, E> {
        Ok(Node::Float(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Node, E> {
        Ok(Node::Str(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Node, E> {
        Ok(Node::Str(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Spanned<Node>>()? {
            items.push(item);
        }
        Ok(Node::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<Spanned<Key>>()? {
            let value = map.next_value::<Spanned<Node>>()?;
            entries.push((key, value));
        }
        Ok(Node::Map(entries))
    }
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(KeyVisitor)
    }
}

struct KeyVisitor;

impl Visitor<'_> for KeyVisitor {
    type Value = Key;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a scalar mapping key")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Key, E> {
        Ok(Key(v.to_string()))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Key, E> {
        Ok(Key(v.to_string()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Key, E> {
        Ok(Key(v.to_string()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Key, E> {
        Ok(Key(v.to_string()))
    }
    fn visit_str<E>(self, v: &str) -> Result<Key, E> {
        Ok(Key(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Key, E> {
        Ok(Key(v))
    }
    fn visit_unit<E>(self) -> Result<Key, E> {
        Ok(Key("null".to_owned()))
    }
}

/// Where a node sits in its file: the key that names it (for mapping values)
/// and the value itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodePos {
    pub key: Option<Pos>,
    pub value: Pos,
    /// Where the value's text is: `value` itself, except for an alias
    /// (`*x`), whose text is at its anchor.
    pub text: Pos,
}

/// JSON pointer (`/spec/roles/worker/replicas`) → position of that node.
///
/// A build holds one entry per node of every definition until they are
/// resolved, so the positions are kept packed ([`Packed`]): at 5,000
/// definitions that is most of the memory of the loaded documents.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SpanIndex {
    map: HashMap<Box<str>, PackedNode>,
}

/// A [`Pos`] in 32-bit fields. A definition file is far smaller than 4 GiB
/// (`limits`), so nothing is lost; `u32::MAX` in `byte` is "unknown".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Packed {
    line: u32,
    column: u32,
    byte: u32,
    len: u32,
}

impl From<Pos> for Packed {
    fn from(p: Pos) -> Self {
        let small = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        Packed {
            line: small(p.line),
            column: small(p.column),
            byte: p.byte.map_or(u32::MAX, small),
            len: small(p.len),
        }
    }
}

impl From<Packed> for Pos {
    fn from(p: Packed) -> Self {
        Pos {
            line: p.line as usize,
            column: p.column as usize,
            byte: (p.byte != u32::MAX).then_some(p.byte as usize),
            len: p.len as usize,
        }
    }
}

/// A [`NodePos`], packed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PackedNode {
    key: Option<Packed>,
    value: Packed,
    text: Packed,
}

impl From<NodePos> for PackedNode {
    fn from(n: NodePos) -> Self {
        PackedNode {
            key: n.key.map(Packed::from),
            value: n.value.into(),
            text: n.text.into(),
        }
    }
}

impl From<PackedNode> for NodePos {
    fn from(n: PackedNode) -> Self {
        NodePos {
            key: n.key.map(Pos::from),
            value: n.value.into(),
            text: n.text.into(),
        }
    }
}

impl SpanIndex {
    pub(super) fn insert(&mut self, pointer: String, pos: NodePos) {
        self.map.insert(pointer.into_boxed_str(), pos.into());
    }

    pub fn get(&self, pointer: &str) -> Option<NodePos> {
        self.map.get(pointer).map(|&p| p.into())
    }

    /// Forgets the node at `pointer` and everything below it.
    pub fn remove_subtree(&mut self, pointer: &str) {
        self.map.retain(|p, _| {
            !(&**p == pointer || p.strip_prefix(pointer).is_some_and(|r| r.starts_with('/')))
        });
    }

    /// Copies the positions of the node at `from` in `other` and of
    /// everything below it, as the node at `to` here.
    pub fn graft(&mut self, to: &str, other: &SpanIndex, from: &str) {
        for (p, pos) in &other.map {
            let rest = if &**p == from {
                Some("")
            } else {
                p.strip_prefix(from).filter(|r| r.starts_with('/'))
            };
            if let Some(rest) = rest {
                self.map
                    .insert(format!("{to}{rest}").into_boxed_str(), *pos);
            }
        }
    }

    /// Copies the position of the node at `from` in `other` alone, as the
    /// node at `to` here.
    pub fn graft_node(&mut self, to: &str, other: &SpanIndex, from: &str) {
        if let Some(pos) = other.map.get(from) {
            self.map.insert(to.into(), *pos);
        }
    }

    /// The position of the node at `pointer`, or of its nearest ancestor that
    /// exists (a missing required field is reported at its parent).
    pub fn nearest(&self, pointer: &str) -> Option<NodePos> {
        let mut p = pointer;
        loop {
            if let Some(&pos) = self.map.get(p) {
                return Some(pos.into());
            }
            match p.rfind('/') {
                Some(i) => p = &p[..i],
                None => return None,
            }
        }
    }
}

fn to_pos(loc: serde_saphyr::Location) -> Pos {
    let span = loc.span();
    Pos {
        line: usize::try_from(loc.line()).unwrap_or(usize::MAX),
        column: usize::try_from(loc.column()).unwrap_or(usize::MAX),
        byte: span.byte_offset().and_then(|b| usize::try_from(b).ok()),
        len: span
            .byte_len()
            .and_then(|b| usize::try_from(b).ok())
            .unwrap_or(0),
    }
}

/// Converts a spanned tree to a JSON value, filling `index`. Duplicate keys never
/// reach here: the parser is configured to refuse them.
pub(crate) fn into_json(root: Spanned<Node>, index: &mut SpanIndex) -> Value {
    let pos = NodePos {
        key: None,
        value: to_pos(root.referenced),
        text: to_pos(root.defined),
    };
    index.insert(String::new(), pos);
    convert(root.value, &mut String::new(), index)
}

/// `pointer` is the node's own, as a buffer its children's are built in and
/// taken off again: one allocation per node, the index's key.
fn convert(node: Node, pointer: &mut String, index: &mut SpanIndex) -> Value {
    use std::fmt::Write as _;
    match node {
        Node::Null => Value::Null,
        Node::Bool(b) => Value::Bool(b),
        Node::Int(i) => Value::Number(i.into()),
        Node::UInt(u) => Value::Number(u.into()),
        // Non-finite floats are refused by the parser options; map any that slip
        // through to null so the schema reports a type error instead of a panic.
        Node::Float(f) => Number::from_f64(f).map_or(Value::Null, Value::Number),
        Node::Str(s) => Value::String(s),
        Node::Seq(items) => {
            let mut out = Vec::with_capacity(items.len());
            let len = pointer.len();
            for (i, item) in items.into_iter().enumerate() {
                // Writing into a String cannot fail.
                let _ = write!(pointer, "/{i}");
                index.insert(
                    pointer.clone(),
                    NodePos {
                        key: None,
                        value: to_pos(item.referenced),
                        text: to_pos(item.defined),
                    },
                );
                out.push(convert(item.value, pointer, index));
                pointer.truncate(len);
            }
            Value::Array(out)
        }
        Node::Map(entries) => {
            let mut out = Map::new();
            let len = pointer.len();
            for (key, value) in entries {
                pointer.push('/');
                push_segment(pointer, &key.value.0);
                let pos = NodePos {
                    key: Some(to_pos(key.referenced)),
                    value: to_pos(value.referenced),
                    text: to_pos(value.defined),
                };
                index.insert(pointer.clone(), pos);
                let v = convert(value.value, pointer, index);
                pointer.truncate(len);
                out.insert(key.value.0, v);
            }
            Value::Object(out)
        }
    }
}

/// [`pointer_segment`](crate::source::pointer_segment), appended to `pointer`.
pub(super) fn push_segment(pointer: &mut String, key: &str) {
    for c in key.chars() {
        match c {
            '~' => pointer.push_str("~0"),
            '/' => pointer.push_str("~1"),
            c => pointer.push(c),
        }
    }
}
