//! Stage 4 (emit): typed objects → YAML bytes, in one pass into one buffer.
//!
//! trainc's own `serde::Serializer`. It writes the bytes serde-saphyr 2.1
//! wrote with the options trainc used before (indentation 2, compact
//! sequences under keys, multi-line strings as literal blocks, no folding),
//! so generated files did not change when it replaced serde-saphyr's
//! serializer, and must not change now: `tests/yaml_emit.rs` fuzzes that
//! equality and the round trip through serde-saphyr's and PyYAML's parsers
//! (pure Python and libyaml); the goldens hold real output. What it adds is
//! speed: each scalar is classified by one pass over its bytes and written
//! straight into the output, where the general serializer allocated and
//! rescanned every scalar and key.
//!
//! Two departures, for readers serde-saphyr's output fails:
//! - a literal block whose first non-empty line starts with a tab gets an
//!   indentation indicator (`|2-`), as one led by spaces does. serde-saphyr
//!   writes `|-`, valid YAML 1.2 that libyaml and the Go YAML parsers
//!   (kubectl, kustomize, Argo CD) reject ("found a tab character where an
//!   indentation space is expected");
//! - a string that starts with `---` is quoted, where serde-saphyr writes
//!   `---x` plain: at the start of a line (a root key) the Kubernetes
//!   multi-document splitter (`kubectl apply -f`, Helm) takes any `---` for
//!   a document separator and rejects the line, or, with `---#x`, splits
//!   the document in two.
//!
//! The layout, for indentation 2:
//! - a mapping value that is a scalar follows `key: `; a non-empty mapping
//!   starts on the next line two columns deeper; a non-empty sequence starts
//!   on the next line with its dashes in the key's column;
//! - a sequence item that is a mapping or a sequence starts on the dash's
//!   line (`- key: v`, `- - x`), the rest two columns past the dash;
//! - empty collections are `{}` and `[]` where their value goes;
//! - a string with a line break is a literal block (`|`, `|-`, `|+`, with an
//!   indentation indicator when its first non-empty line starts with a space
//!   or a tab) unless it
//!   holds a character a block cannot (CR, NEL, LS, PS, BOM, controls);
//! - other strings are plain unless a YAML 1.2 *or* 1.1 reader would take
//!   them for something else (`yes`, `0o17`, `1:20`, `2001-01-01`, `~`) or
//!   their text would not survive as a plain scalar; then they are double
//!   quoted with YAML escapes (values `.`, `#` and `-` alone are
//!   single-quoted, keys double-quoted like the rest). Keys are quoted more
//!   eagerly: any `:` or flow indicator.
//! - a key (a variant label too) whose text as written, quotes and escapes
//!   included, is longer than 1,024 characters, past YAML's limit for an
//!   implicit key, is written as an explicit `? key` / `: value` entry.
//!
//! Not written (an error, where serde-saphyr writes tags, complex keys or
//! flow collections that trainc never produces): enum variants with more
//! than one field (tuple and struct variants) and keys that are not
//! scalars. serde-saphyr's own wrapper types (`FlowSeq`, `LitStr`, anchors,
//! comments) are not recognised: their newtype names are ignored.

use serde::ser::{self, Impossible, Serialize};

/// Why a value has no YAML text here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl ser::Error for Error {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        Error(msg.to_string())
    }
}

type Result<T = ()> = std::result::Result<T, Error>;

/// Appends the YAML document for `value` to `out`.
pub fn to_writer<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> Result {
    value.serialize(Node {
        out,
        slot: Slot::Root,
    })
}

/// Where the next node goes: what has been written just before it.
#[derive(Clone, Copy)]
enum Slot {
    /// The document's root, at the start of a line.
    Root,
    /// After `key:` (the key at column `col`). `compact`: a sequence value
    /// puts its dashes in the key's column; only a variant label at the
    /// root (not inside a mapping) indents them.
    Value { col: usize, compact: bool },
    /// After `- `, the dash at column `col`.
    Item { col: usize },
    /// After the `:` of an explicit `? key` entry, at column `col`.
    Explicit { col: usize },
}

impl Slot {
    /// What goes between the slot and a scalar on the same line.
    fn lead(self) -> &'static [u8] {
        match self {
            Slot::Value { .. } | Slot::Explicit { .. } => b" ",
            Slot::Root | Slot::Item { .. } => b"",
        }
    }

    /// The column of the node that owns the slot (a block scalar's body
    /// goes one level deeper).
    fn owner_col(self) -> usize {
        match self {
            Slot::Root => 0,
            Slot::Value { col, .. } | Slot::Item { col } | Slot::Explicit { col } => col,
        }
    }
}

const INDENT: usize = 2;
/// YAML's limit for an implicit key, in characters.
const SIMPLE_KEY_MAX: usize = 1024;

fn indent(out: &mut Vec<u8>, n: usize) {
    const SPACES: [u8; 64] = [b' '; 64];
    let mut n = n;
    while n > 0 {
        let k = n.min(SPACES.len());
        out.extend_from_slice(&SPACES[..k]);
        n -= k;
    }
}

/// Serializes one node into `out` at `slot`.
struct Node<'a> {
    out: &'a mut Vec<u8>,
    slot: Slot,
}

impl Node<'_> {
    fn scalar(self, text: &[u8]) -> Result {
        self.out.extend_from_slice(self.slot.lead());
        self.out.extend_from_slice(text);
        self.out.push(b'\n');
        Ok(())
    }

    fn string(self, s: &str) -> Result {
        let scan = Scan::of(s);
        if scan.newline && scan.block_safe {
            return self.literal_block(s);
        }
        self.out.extend_from_slice(self.slot.lead());
        if matches!(s, "." | "#" | "-") {
            self.out.push(b'\'');
            self.out.extend_from_slice(s.as_bytes());
            self.out.push(b'\'');
        } else if scan.plain_value(s) {
            self.out.extend_from_slice(s.as_bytes());
        } else {
            write_double_quoted(self.out, s);
        }
        self.out.push(b'\n');
        Ok(())
    }

    /// `|`, `|-` or `|+` (clip, strip, keep: whatever reproduces the
    /// trailing line breaks), with the indentation indicator when the first
    /// non-empty line starts with a space.
    fn literal_block(self, s: &str) -> Result {
        let out = self.out;
        out.extend_from_slice(self.slot.lead());
        let content = s.trim_end_matches('\n');
        let trailing = s.len() - content.len();
        out.push(b'|');
        let first = content.split('\n').find(|l| !l.is_empty()).unwrap_or("");
        if first.starts_with([' ', '\t']) {
            out.push(b'0' + INDENT as u8);
        }
        match trailing {
            0 => out.push(b'-'),
            1 if !content.is_empty() => {}
            _ => out.push(b'+'),
        }
        out.push(b'\n');
        if content.is_empty() {
            out.resize(out.len() + trailing, b'\n');
            return Ok(());
        }
        let col = self.slot.owner_col() + INDENT;
        for line in content.split('\n') {
            if !line.is_empty() {
                indent(out, col);
                out.extend_from_slice(line.as_bytes());
            }
            out.push(b'\n');
        }
        if trailing >= 2 {
            out.resize(out.len() + trailing - 1, b'\n');
        }
        Ok(())
    }

    fn integer(self, digits: &str) -> Result {
        self.scalar(digits.as_bytes())
    }
}

macro_rules! integers {
    ($($method:ident: $ty:ty),*) => {$(
        fn $method(self, v: $ty) -> Result {
            let mut buf = IntBuf::default();
            self.integer(buf.format(v))
        }
    )*};
}

/// Decimal digits of an integer without allocating.
struct IntBuf {
    bytes: [u8; 40],
}

impl Default for IntBuf {
    fn default() -> Self {
        IntBuf { bytes: [0; 40] }
    }
}

impl IntBuf {
    fn format<I: Into<Int>>(&mut self, v: I) -> &str {
        let (negative, mut n) = match v.into() {
            Int::Signed(v) => (v < 0, v.unsigned_abs()),
            Int::Unsigned(v) => (false, v),
        };
        let mut at = self.bytes.len();
        loop {
            at -= 1;
            self.bytes[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        if negative {
            at -= 1;
            self.bytes[at] = b'-';
        }
        std::str::from_utf8(&self.bytes[at..]).unwrap_or_default()
    }
}

enum Int {
    Signed(i128),
    Unsigned(u128),
}

macro_rules! int_like {
    ($($variant:ident: $($ty:ty),*;)*) => {$($(
        impl From<$ty> for Int {
            fn from(v: $ty) -> Self {
                Int::$variant(v.into())
            }
        }
    )*)*};
}
int_like! {
    Signed: i8, i16, i32, i64, i128;
    Unsigned: u8, u16, u32, u64, u128;
}

/// A float as YAML reads it back as a float: `.nan`, `.inf`, `-.inf`, or the
/// shortest round-trip digits with a `.` in the mantissa and a signed
/// exponent (`1.0`, `4.0e-6`, `1.0e+20`).
fn push_float<F: zmij::Float>(out: &mut Vec<u8>, f: F, nan: bool, inf: Option<bool>) {
    if nan {
        out.extend_from_slice(b".nan");
        return;
    }
    if let Some(positive) = inf {
        out.extend_from_slice(if positive { b".inf" } else { b"-.inf" });
        return;
    }
    let mut buf = zmij::Buffer::new();
    let s = buf.format_finite(f).as_bytes();
    match s.iter().position(|&b| b == b'e' || b == b'E') {
        Some(e) => {
            out.extend_from_slice(&s[..e]);
            if !s[..e].contains(&b'.') {
                out.extend_from_slice(b".0");
            }
            out.push(s[e]);
            if !matches!(s.get(e + 1), Some(b'+' | b'-')) {
                out.push(b'+');
            }
            out.extend_from_slice(&s[e + 1..]);
        }
        None => {
            out.extend_from_slice(s);
            if !s.contains(&b'.') {
                out.extend_from_slice(b".0");
            }
        }
    }
}

fn float_parts_f64(v: f64) -> (bool, Option<bool>) {
    (v.is_nan(), v.is_infinite().then_some(v.is_sign_positive()))
}

fn float_parts_f32(v: f32) -> (bool, Option<bool>) {
    (v.is_nan(), v.is_infinite().then_some(v.is_sign_positive()))
}

impl<'a> ser::Serializer for Node<'a> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Seq<'a>;
    type SerializeTuple = Seq<'a>;
    type SerializeTupleStruct = Seq<'a>;
    type SerializeTupleVariant = Impossible<(), Error>;
    type SerializeMap = Map<'a>;
    type SerializeStruct = Map<'a>;
    type SerializeStructVariant = Impossible<(), Error>;

    fn serialize_bool(self, v: bool) -> Result {
        self.scalar(if v { b"true" } else { b"false" })
    }

    integers!(
        serialize_i8: i8, serialize_i16: i16, serialize_i32: i32, serialize_i64: i64,
        serialize_i128: i128, serialize_u8: u8, serialize_u16: u16, serialize_u32: u32,
        serialize_u64: u64, serialize_u128: u128
    );

    fn serialize_f32(self, v: f32) -> Result {
        self.out.extend_from_slice(self.slot.lead());
        let (nan, inf) = float_parts_f32(v);
        push_float(self.out, v, nan, inf);
        self.out.push(b'\n');
        Ok(())
    }

    fn serialize_f64(self, v: f64) -> Result {
        self.out.extend_from_slice(self.slot.lead());
        let (nan, inf) = float_parts_f64(v);
        push_float(self.out, v, nan, inf);
        self.out.push(b'\n');
        Ok(())
    }

    fn serialize_char(self, v: char) -> Result {
        self.string(v.encode_utf8(&mut [0; 4]))
    }

    fn serialize_str(self, v: &str) -> Result {
        self.string(v)
    }

    /// At the root, a sequence of numbers; elsewhere a `!!binary` scalar.
    fn serialize_bytes(self, v: &[u8]) -> Result {
        if let Slot::Root = self.slot {
            let mut seq = self.serialize_seq(Some(v.len()))?;
            for b in v {
                ser::SerializeSeq::serialize_element(&mut seq, b)?;
            }
            return ser::SerializeSeq::end(seq);
        }
        self.out.extend_from_slice(self.slot.lead());
        self.out.extend_from_slice(b"!!binary ");
        push_base64(self.out, v);
        self.out.push(b'\n');
        Ok(())
    }

    fn serialize_none(self) -> Result {
        self.scalar(b"null")
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result {
        value.serialize(self)
    }

    fn serialize_unit(self) -> Result {
        self.scalar(b"null")
    }

    fn serialize_unit_struct(self, _name: &'static str) -> Result {
        self.scalar(b"null")
    }

    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result {
        self.string(variant)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result {
        value.serialize(self)
    }

    /// `Variant: value`, a one-entry mapping; at a mapping value it starts
    /// on the next line.
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result {
        let out = self.out;
        let (col, compact) = match self.slot {
            Slot::Root => (0, false),
            Slot::Item { col } => (col + INDENT, true),
            Slot::Value { col, .. } | Slot::Explicit { col } => {
                out.push(b'\n');
                indent(out, col + INDENT);
                (col + INDENT, true)
            }
        };
        let at = out.len();
        write_key_str(out, variant);
        let slot = close_key(out, at, col, compact);
        value.serialize(Node { out, slot })
    }

    fn serialize_seq(self, _len: Option<usize>) -> Result<Seq<'a>> {
        let (col, start) = match self.slot {
            Slot::Root => (0, Opening::LineStart),
            Slot::Value { col, compact } => {
                (if compact { col } else { col + INDENT }, Opening::Deferred)
            }
            Slot::Explicit { col } => (col, Opening::Deferred),
            Slot::Item { col } => (col + INDENT, Opening::Inline),
        };
        Ok(Seq {
            out: self.out,
            col,
            start,
            empty: true,
        })
    }

    fn serialize_tuple(self, len: usize) -> Result<Seq<'a>> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_struct(self, _name: &'static str, len: usize) -> Result<Seq<'a>> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_variant(
        self,
        name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant> {
        Err(Error(format!(
            "trainc does not write enum variants with several fields as YAML ({name}::{variant})"
        )))
    }

    fn serialize_map(self, len: Option<usize>) -> Result<Map<'a>> {
        let (col, start) = match self.slot {
            Slot::Root => (0, Opening::LineStart),
            Slot::Value { col, .. } => {
                // Known to have entries: the line breaks now; otherwise at the
                // first key, so that an empty mapping stays `key: {}`.
                if matches!(len, Some(n) if n > 0) {
                    self.out.push(b'\n');
                    (col + INDENT, Opening::Broken)
                } else {
                    (col + INDENT, Opening::Deferred)
                }
            }
            Slot::Item { col } => (col + INDENT, Opening::Inline),
            Slot::Explicit { col } => (col + INDENT, Opening::InlineAfterSpace),
        };
        Ok(Map {
            out: self.out,
            col,
            start,
            empty: true,
            value: None,
        })
    }

    fn serialize_struct(self, _name: &'static str, len: usize) -> Result<Map<'a>> {
        self.serialize_map(Some(len))
    }

    fn serialize_struct_variant(
        self,
        name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant> {
        Err(Error(format!(
            "trainc does not write enum variants with fields as YAML ({name}::{variant})"
        )))
    }
}

/// How a collection's first entry is placed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Opening {
    /// At the start of a line already (the root).
    LineStart,
    /// After `key:`: a line break before the first entry, or ` {}`/` []`.
    Deferred,
    /// After `key:` and a line break already written.
    Broken,
    /// Right after `- `: the first entry on the same line.
    Inline,
    /// Right after an explicit entry's `:`: a space, then the first entry.
    InlineAfterSpace,
}

impl Opening {
    /// Writes what goes before the first entry, whose line starts at `col`.
    fn open(self, out: &mut Vec<u8>, col: usize) {
        match self {
            Opening::LineStart | Opening::Broken => indent(out, col),
            Opening::Deferred => {
                out.push(b'\n');
                indent(out, col);
            }
            Opening::Inline => {}
            Opening::InlineAfterSpace => out.push(b' '),
        }
    }

    /// Writes an empty collection's `{}` or `[]` line.
    fn empty(self, out: &mut Vec<u8>, col: usize, marker: &[u8]) {
        match self {
            Opening::LineStart | Opening::Inline => {}
            Opening::Deferred | Opening::InlineAfterSpace => out.push(b' '),
            Opening::Broken => indent(out, col),
        }
        out.extend_from_slice(marker);
        out.push(b'\n');
    }
}

/// A block sequence; `col` is its dashes' column.
struct Seq<'a> {
    out: &'a mut Vec<u8>,
    col: usize,
    start: Opening,
    empty: bool,
}

impl ser::SerializeSeq for Seq<'_> {
    type Ok = ();
    type Error = Error;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result {
        if self.empty {
            self.start.open(self.out, self.col);
            self.empty = false;
        } else {
            indent(self.out, self.col);
        }
        self.out.extend_from_slice(b"- ");
        value.serialize(Node {
            out: self.out,
            slot: Slot::Item { col: self.col },
        })
    }

    fn end(self) -> Result {
        if self.empty {
            self.start.empty(self.out, self.col, b"[]");
        }
        Ok(())
    }
}

impl ser::SerializeTuple for Seq<'_> {
    type Ok = ();
    type Error = Error;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result {
        ser::SerializeSeq::serialize_element(self, value)
    }

    fn end(self) -> Result {
        ser::SerializeSeq::end(self)
    }
}

impl ser::SerializeTupleStruct for Seq<'_> {
    type Ok = ();
    type Error = Error;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result {
        ser::SerializeSeq::serialize_element(self, value)
    }

    fn end(self) -> Result {
        ser::SerializeSeq::end(self)
    }
}

/// A block mapping; `col` is its keys' column.
struct Map<'a> {
    out: &'a mut Vec<u8>,
    col: usize,
    start: Opening,
    empty: bool,
    /// Where the value of the key just written goes.
    value: Option<Slot>,
}

impl Map<'_> {
    fn open_entry(&mut self) {
        if self.empty {
            self.start.open(self.out, self.col);
            self.empty = false;
        } else {
            indent(self.out, self.col);
        }
    }

    /// After the key's text (written from `at`): `:`, or, past the length
    /// of an implicit key, the explicit form.
    fn close_key(&mut self, at: usize) {
        self.value = Some(close_key(self.out, at, self.col, true));
    }

    fn write_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result {
        let slot = self
            .value
            .take()
            .ok_or_else(|| Error("a mapping value came before its key".to_owned()))?;
        value.serialize(Node {
            out: self.out,
            slot,
        })
    }
}

impl ser::SerializeMap for Map<'_> {
    type Ok = ();
    type Error = Error;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result {
        self.open_entry();
        let at = self.out.len();
        key.serialize(Key { out: self.out })?;
        self.close_key(at);
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result {
        self.write_value(value)
    }

    fn end(self) -> Result {
        if self.empty {
            self.start.empty(self.out, self.col, b"{}");
        }
        Ok(())
    }
}

impl ser::SerializeStruct for Map<'_> {
    type Ok = ();
    type Error = Error;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result {
        self.open_entry();
        let at = self.out.len();
        write_key_str(self.out, key);
        self.close_key(at);
        self.write_value(value)
    }

    fn end(self) -> Result {
        ser::SerializeMap::end(self)
    }
}

/// Ends the key written at `at` (its column `col`): `key:`, or, past the
/// length YAML allows an implicit key, `? key` with the `:` on a line of
/// its own. Returns where the value goes.
fn close_key(out: &mut Vec<u8>, at: usize, col: usize, compact: bool) -> Slot {
    let text = &out[at..];
    let long = text.len() > SIMPLE_KEY_MAX
        && std::str::from_utf8(text).map_or(true, |t| t.chars().count() > SIMPLE_KEY_MAX);
    if long {
        out.insert(at, b' ');
        out.insert(at, b'?');
        out.push(b'\n');
        indent(out, col);
        out.push(b':');
        Slot::Explicit { col }
    } else {
        out.push(b':');
        Slot::Value { col, compact }
    }
}

fn write_key_str(out: &mut Vec<u8>, key: &str) {
    if word_key(key).unwrap_or_else(|| Scan::of(key).plain_key(key)) {
        out.extend_from_slice(key.as_bytes());
    } else {
        write_double_quoted(out, key);
    }
}

/// Whether a field name made of ASCII letters and digits after a letter
/// (`apiVersion`, `containerPort`: all of Kubernetes') is a plain key, without
/// a scan: it holds nothing [`Scan::of`] looks for and its edges are plain,
/// so only [`ambiguous`] can say no (`on`, `No`, `null`). `None` for any
/// other key.
fn word_key(key: &str) -> Option<bool> {
    let b = key.as_bytes();
    (b.first().is_some_and(u8::is_ascii_alphabetic) && b.iter().all(u8::is_ascii_alphanumeric))
        .then(|| !ambiguous(key))
}

/// Serializes a mapping key: a scalar, as text.
struct Key<'a> {
    out: &'a mut Vec<u8>,
}

fn non_scalar_key<T>() -> Result<T> {
    Err(Error(
        "trainc writes only scalars as YAML mapping keys".to_owned(),
    ))
}

macro_rules! key_integer {
    ($($method:ident: $ty:ty),*) => {$(
        fn $method(self, v: $ty) -> Result {
            let mut buf = IntBuf::default();
            self.out.extend_from_slice(buf.format(v).as_bytes());
            Ok(())
        }
    )*};
}

impl ser::Serializer for Key<'_> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Impossible<(), Error>;
    type SerializeTuple = Impossible<(), Error>;
    type SerializeTupleStruct = Impossible<(), Error>;
    type SerializeTupleVariant = Impossible<(), Error>;
    type SerializeMap = Impossible<(), Error>;
    type SerializeStruct = Impossible<(), Error>;
    type SerializeStructVariant = Impossible<(), Error>;

    fn serialize_bool(self, v: bool) -> Result {
        self.out
            .extend_from_slice(if v { b"true" } else { b"false" });
        Ok(())
    }

    key_integer!(
        serialize_i8: i8, serialize_i16: i16, serialize_i32: i32, serialize_i64: i64,
        serialize_i128: i128, serialize_u8: u8, serialize_u16: u16, serialize_u32: u32,
        serialize_u64: u64, serialize_u128: u128
    );

    fn serialize_f32(self, v: f32) -> Result {
        let (nan, inf) = float_parts_f32(v);
        push_float(self.out, v, nan, inf);
        Ok(())
    }

    fn serialize_f64(self, v: f64) -> Result {
        let (nan, inf) = float_parts_f64(v);
        push_float(self.out, v, nan, inf);
        Ok(())
    }

    fn serialize_char(self, v: char) -> Result {
        write_key_str(self.out, v.encode_utf8(&mut [0; 4]));
        Ok(())
    }

    fn serialize_str(self, v: &str) -> Result {
        write_key_str(self.out, v);
        Ok(())
    }

    fn serialize_bytes(self, _v: &[u8]) -> Result {
        non_scalar_key()
    }

    fn serialize_none(self) -> Result {
        self.out.extend_from_slice(b"null");
        Ok(())
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result {
        value.serialize(self)
    }

    fn serialize_unit(self) -> Result {
        self.out.extend_from_slice(b"null");
        Ok(())
    }

    fn serialize_unit_struct(self, _name: &'static str) -> Result {
        self.serialize_unit()
    }

    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result {
        self.serialize_str(variant)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result {
        non_scalar_key()
    }

    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq> {
        non_scalar_key()
    }

    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple> {
        non_scalar_key()
    }

    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct> {
        non_scalar_key()
    }

    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant> {
        non_scalar_key()
    }

    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap> {
        non_scalar_key()
    }

    fn serialize_struct(self, _name: &'static str, _len: usize) -> Result<Self::SerializeStruct> {
        non_scalar_key()
    }

    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant> {
        non_scalar_key()
    }
}

fn push_base64(out: &mut Vec<u8>, bytes: &[u8]) {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | (u32::from(b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]);
            } else {
                out.push(b'=');
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Scalar classification

/// What one pass over a string finds that decides its style.
#[derive(Default)]
struct Scan {
    /// A character no plain or single-quoted scalar can hold: a control
    /// (line breaks and tabs included), BOM, LS, PS, U+FFFE, U+FFFF.
    escape: bool,
    /// A `\n`.
    newline: bool,
    /// Every character may stand in a block scalar (see [`Scan::of`]).
    block_safe: bool,
    colon: bool,
    /// `: `, which ends a plain key.
    colon_space: bool,
    /// `,`, `[`, `]`, `{` or `}`.
    flow: bool,
    /// `#` after white space: a comment in a plain scalar.
    comment: bool,
}

// Byte classes, for the first pass over a string.
/// A control: `\t` and `\n` included, which a block scalar may hold.
const ESCAPE: u8 = 1;
const NEWLINE: u8 = 2;
/// A control a block scalar may not hold either.
const NOT_IN_BLOCK: u8 = 4;
const COLON: u8 = 8;
const FLOW: u8 = 16;
const HASH: u8 = 32;
/// Part of a non-ASCII character: looked at character by character.
const NON_ASCII: u8 = 64;
/// Needs an escape in a double-quoted scalar, or a closer look (non-ASCII).
const QUOTE: u8 = 128;

const CLASSES: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let c = i as u8;
        t[i] = match c {
            b'\n' => ESCAPE | NEWLINE | QUOTE,
            b'\t' => ESCAPE | QUOTE,
            0..=0x1F | 0x7F => ESCAPE | NOT_IN_BLOCK | QUOTE,
            b':' => COLON,
            b',' | b'[' | b']' | b'{' | b'}' => FLOW,
            b'#' => HASH,
            b'"' | b'\\' => QUOTE,
            0x80.. => NON_ASCII | QUOTE,
            _ => 0,
        };
        i += 1;
    }
    t
};

impl Scan {
    fn of(s: &str) -> Scan {
        let b = s.as_bytes();
        // One cheap pass over every byte; the rarer classes get a second look.
        let class = |c: &u8| CLASSES[usize::from(*c)];
        let mut chunks = b.chunks_exact(8);
        let mut classes = chunks.by_ref().fold(0, |acc, c| {
            acc | class(&c[0])
                | class(&c[1])
                | class(&c[2])
                | class(&c[3])
                | class(&c[4])
                | class(&c[5])
                | class(&c[6])
                | class(&c[7])
        });
        classes |= chunks.remainder().iter().fold(0, |acc, c| acc | class(c));
        let mut scan = Scan {
            escape: classes & ESCAPE != 0,
            newline: classes & NEWLINE != 0,
            block_safe: classes & NOT_IN_BLOCK == 0,
            colon: classes & COLON != 0,
            colon_space: classes & COLON != 0 && s.contains(": "),
            flow: classes & FLOW != 0,
            comment: false,
        };
        if classes & NON_ASCII != 0 {
            for ch in s.chars().filter(|c| !c.is_ascii()) {
                scan.escape |= needs_escape(ch);
                scan.block_safe &= block_char(ch);
            }
        }
        if classes & HASH != 0 {
            // `#` after white space (`char::is_whitespace`, as YAML readers
            // differ on which) starts a comment.
            scan.comment = s
                .match_indices('#')
                .any(|(i, _)| s[..i].chars().next_back().is_some_and(char::is_whitespace));
        }
        scan
    }

    /// Whether `s` (this scan's string) reads back as itself written plain
    /// as a block mapping value or sequence item.
    fn plain_value(&self, s: &str) -> bool {
        let unsafe_text = self.escape || self.comment || self.colon_space;
        // `x:` would be a key.
        let key_like = self.colon && s.trim_end().ends_with(':');
        !unsafe_text && !key_like && plain_edges(s) && !ambiguous(s)
    }

    /// Whether `s` reads back as itself written plain as a mapping key, in
    /// block or flow style: no `:` and no flow indicator at all.
    fn plain_key(&self, s: &str) -> bool {
        !self.escape
            && !self.comment
            && !self.colon
            && !self.flow
            && plain_edges(s)
            && !ambiguous(s)
    }
}

/// `s` has no white space at its ends, starts with no indicator and no
/// document marker.
fn plain_edges(s: &str) -> bool {
    let b = s.as_bytes();
    let (Some(&first), Some(&last)) = (b.first(), b.last()) else {
        return false;
    };
    if first.is_ascii_whitespace() || last.is_ascii_whitespace() {
        return false;
    }
    match first {
        b'-' | b'?' if b.get(1).is_none_or(u8::is_ascii_whitespace) => return false,
        b',' | b':' | b'[' | b']' | b'{' | b'}' | b'#' | b'&' | b'*' | b'!' | b'|' | b'>'
        | b'\'' | b'"' | b'%' | b'@' | b'`' => return false,
        _ => {}
    }
    // A line that starts with `---` ends the document for the Kubernetes
    // splitter (`kubectl apply -f`, Helm, Argo CD), whatever follows: quoted,
    // even where a YAML reader would take `---x` for text.
    !b.starts_with(b"---")
        && (!b.starts_with(b"...") || b.get(3).is_some_and(|c| !c.is_ascii_whitespace()))
}

fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{FEFF}' | '\u{2028}' | '\u{2029}' | '\u{FFFE}' | '\u{FFFF}'
        )
}

/// A non-ASCII character a block scalar may hold as it is: printable, and
/// not one of the line breaks YAML 1.1 readers see (NEL, LS, PS) or a BOM.
fn block_char(c: char) -> bool {
    matches!(c as u32, 0xA0..=0xD7FF | 0xE000..=0xFFFD | 0x10000..)
        && !matches!(c, '\u{2028}' | '\u{2029}' | '\u{FEFF}')
}

/// Whether a reader resolving plain scalars could read `s` as something
/// other than this string (or reject it): null, a boolean, a number, in
/// YAML 1.2 or in YAML 1.1, whose booleans (`yes`, `on`, `y`),
/// sexagesimals, timestamps and merge and value keys are more. Only asked about strings
/// without white space at their ends ([`plain_edges`] rules those out), so
/// it does not trim as YAML 1.1 readers do before matching a boolean.
fn ambiguous(s: &str) -> bool {
    let b = s.as_bytes();
    let Some(&first) = b.first() else {
        return true;
    };
    if first.is_ascii_digit() || matches!(first, b'+' | b'-' | b'.' | b'_') {
        if numeric(s) {
            return true;
        }
        if yaml_11_timestamp(b) {
            return true;
        }
    }
    // Every word below is at most five bytes and starts with one of these,
    // in either case.
    if b.len() > 5
        || !matches!(
            first.to_ascii_lowercase(),
            b'n' | b't' | b'f' | b'i' | b'+' | b'-' | b'~' | b'y' | b'o' | b'<' | b'='
        )
    {
        return false;
    }
    const WORDS: [&str; 8] = ["null", "true", "false", "nan", "inf", "+inf", "-inf", "~"];
    if WORDS.iter().any(|w| s.eq_ignore_ascii_case(w)) {
        return true;
    }
    yaml_11_bool(s) || s == "<<" || s == "="
}

fn yaml_11_bool(s: &str) -> bool {
    ["true", "yes", "y", "on", "false", "no", "n", "off"]
        .iter()
        .any(|w| s.eq_ignore_ascii_case(w))
}

fn strip_sign(s: &str) -> &str {
    s.strip_prefix(['+', '-']).unwrap_or(s)
}

/// Whether `s` has the syntax of a number, in YAML 1.2 or 1.1 (no value is
/// constructed: one that overflows is still a number to a resolver).
fn numeric(s: &str) -> bool {
    let unsigned = strip_sign(s);
    // Every spelling below starts, past one sign, with a digit, `.` or `_`
    // (command-line flags, `--x_y`, are common and stop here).
    if !unsigned
        .as_bytes()
        .first()
        .is_some_and(|c| c.is_ascii_digit() || matches!(c, b'.' | b'_'))
    {
        return false;
    }
    if unsigned.eq_ignore_ascii_case(".inf") || unsigned.eq_ignore_ascii_case(".nan") {
        return true;
    }
    if yaml_11_sexagesimal(s) {
        return true;
    }
    if let Some((radix, digits)) = radix_prefix(unsigned)
        && digit_run(digits, radix, false)
    {
        return true;
    }
    // Some YAML 1.1 readers drop every `_` before resolving.
    let without_underscores;
    let s = if s.contains('_') {
        without_underscores = s.replace('_', "");
        without_underscores.as_str()
    } else {
        s
    };
    let unsigned = strip_sign(s);
    if let Some((radix, digits)) = radix_prefix(unsigned) {
        // And some accept a sign after a lowercase `0b`/`0o`.
        let digits = if s.starts_with("0b") || s.starts_with("0o") {
            strip_sign(digits)
        } else {
            digits
        };
        return digit_run(digits, radix, true);
    }
    let mantissa = match unsigned.split_once(['e', 'E']) {
        Some((mantissa, exponent)) => {
            if !digit_run(strip_sign(exponent), 10, true) {
                return false;
            }
            mantissa
        }
        None => unsigned,
    };
    match mantissa.split_once('.') {
        None => digit_run(mantissa, 10, true),
        // Looser than YAML 1.2 (`1.`, dots in the fraction): a string
        // quoted for nothing costs two quotes, one read as a number its value.
        Some((whole, fraction)) => {
            (whole.is_empty() || digit_run(whole, 10, true))
                && fraction.bytes().all(|c| c.is_ascii_digit() || c == b'.')
        }
    }
}

fn radix_prefix(s: &str) -> Option<(u32, &str)> {
    let radix = match s.as_bytes() {
        [b'0', b'b' | b'B', ..] => 2,
        [b'0', b'o' | b'O', ..] => 8,
        [b'0', b'x' | b'X', ..] => 16,
        _ => return None,
    };
    Some((radix, &s[2..]))
}

/// Non-empty digits of `radix` and `_`; when `strict`, each `_` between two
/// digits.
fn digit_run(s: &str, radix: u32, strict: bool) -> bool {
    let b = s.as_bytes();
    let digit = |c: u8| char::from(c).is_digit(radix);
    !b.is_empty()
        && b.iter().enumerate().all(|(i, &c)| {
            digit(c)
                || (c == b'_'
                    && (!strict
                        || (i > 0 && digit(b[i - 1]) && b.get(i + 1).is_some_and(|&n| digit(n)))))
        })
}

/// YAML 1.1 base 60: `1:20`, `-1:30:00.5`.
fn yaml_11_sexagesimal(s: &str) -> bool {
    let unsigned = strip_sign(s);
    let (integer, fraction) = match unsigned.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (unsigned, None),
    };
    let Some((first, rest)) = integer.split_once(':') else {
        return false;
    };
    let Some(&lead) = first.as_bytes().first() else {
        return false;
    };
    lead.is_ascii_digit()
        && (fraction.is_some() || lead != b'0')
        && first.bytes().all(|c| c.is_ascii_digit() || c == b'_')
        && rest.split(':').all(|part| match part.as_bytes() {
            [d] => d.is_ascii_digit(),
            [t, u] => matches!(t, b'0'..=b'5') && u.is_ascii_digit(),
            _ => false,
        })
        && fraction.is_none_or(|f| f.bytes().all(|c| c.is_ascii_digit() || c == b'_'))
}

/// YAML 1.1 timestamp syntax, as lenient readers take it (single-digit
/// fields, `,` fractions); no calendar check.
fn yaml_11_timestamp(mut s: &[u8]) -> bool {
    fn digits(s: &mut &[u8], min: usize, max: usize) -> bool {
        let n = s.iter().take_while(|c| c.is_ascii_digit()).count();
        *s = &s[n..];
        (min..=max).contains(&n)
    }
    fn eat(s: &mut &[u8], c: u8) -> bool {
        let hit = s.first() == Some(&c);
        if hit {
            *s = &s[1..];
        }
        hit
    }
    fn blanks(s: &mut &[u8]) -> usize {
        let n = s.iter().take_while(|&&c| c == b' ' || c == b'\t').count();
        *s = &s[n..];
        n
    }
    if !(digits(&mut s, 4, 4)
        && eat(&mut s, b'-')
        && digits(&mut s, 1, 2)
        && eat(&mut s, b'-')
        && digits(&mut s, 1, 2))
    {
        return false;
    }
    if s.is_empty() {
        return true;
    }
    if !(eat(&mut s, b'T') || eat(&mut s, b't')) && blanks(&mut s) == 0 {
        return false;
    }
    if !(digits(&mut s, 1, 2)
        && eat(&mut s, b':')
        && digits(&mut s, 1, 2)
        && eat(&mut s, b':')
        && digits(&mut s, 1, 2))
    {
        return false;
    }
    if eat(&mut s, b'.') || eat(&mut s, b',') {
        digits(&mut s, 0, usize::MAX);
    }
    blanks(&mut s);
    if s.is_empty() || s == b"Z" {
        return true;
    }
    if !((eat(&mut s, b'+') || eat(&mut s, b'-')) && digits(&mut s, 1, 2)) {
        return false;
    }
    if eat(&mut s, b':') && !digits(&mut s, 2, 2) {
        return false;
    }
    s.is_empty()
}

/// `"…"` with YAML's escapes: named ones where YAML has them, `\xHH` for
/// other C0/C1 controls, `\uHHHH` for U+FFFE/U+FFFF.
fn write_double_quoted(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.push(b'"');
    let b = s.as_bytes();
    let mut plain_from = 0;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if CLASSES[c as usize] & QUOTE == 0 {
            i += 1;
            continue;
        }
        let (len, escape): (usize, Option<&[u8]>) = if c < 0x80 {
            let e: Option<&[u8]> = match c {
                b'\\' => Some(b"\\\\"),
                b'"' => Some(b"\\\""),
                0 => Some(b"\\0"),
                7 => Some(b"\\a"),
                8 => Some(b"\\b"),
                b'\t' => Some(b"\\t"),
                b'\n' => Some(b"\\n"),
                0x0B => Some(b"\\v"),
                0x0C => Some(b"\\f"),
                b'\r' => Some(b"\\r"),
                0x1B => Some(b"\\e"),
                0..=0x1F | 0x7F => Some(b""),
                _ => None,
            };
            (1, e)
        } else {
            let ch = s[i..].chars().next().unwrap_or('\u{FFFD}');
            let e: Option<&[u8]> = match ch {
                '\u{FEFF}' => Some(b"\\uFEFF"),
                '\u{0085}' => Some(b"\\N"),
                '\u{2028}' => Some(b"\\L"),
                '\u{2029}' => Some(b"\\P"),
                '\u{80}'..='\u{9F}' | '\u{FFFE}' | '\u{FFFF}' => Some(b""),
                _ => None,
            };
            (ch.len_utf8(), e)
        };
        if let Some(e) = escape {
            out.extend_from_slice(&b[plain_from..i]);
            if e.is_empty() {
                // A control without a name: by code point.
                let cp = s[i..].chars().next().map_or(0, u32::from);
                if cp <= 0xFF {
                    out.extend_from_slice(b"\\x");
                    out.push(HEX[(cp >> 4) as usize & 15]);
                    out.push(HEX[cp as usize & 15]);
                } else {
                    out.extend_from_slice(b"\\u");
                    for shift in [12, 8, 4, 0] {
                        out.push(HEX[(cp >> shift) as usize & 15]);
                    }
                }
            } else {
                out.extend_from_slice(e);
            }
            plain_from = i + len;
        }
        i += len;
    }
    out.extend_from_slice(&b[plain_from..]);
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shortcut for field names answers what the scan does, for every
    /// word of up to three characters and for YAML's reserved words in
    /// every case.
    #[test]
    fn a_word_key_is_classified_as_the_scan_classifies_it() {
        let chars: Vec<char> = ('a'..='z').chain('A'..='Z').chain('0'..='9').collect();
        let mut words: Vec<String> = Vec::new();
        for &a in &chars {
            words.push(a.to_string());
            for &b in &chars {
                words.push(format!("{a}{b}"));
                for &c in ['a', 'N', 'o', 'l', 'E', 's', 'f', '1', 'x'].iter() {
                    words.push(format!("{a}{b}{c}"));
                }
            }
        }
        for w in [
            "null",
            "true",
            "false",
            "yes",
            "no",
            "on",
            "off",
            "y",
            "n",
            "nan",
            "inf",
            "apiVersion",
        ] {
            words.push(w.to_owned());
            words.push(w.to_uppercase());
            let mut title = w.to_owned();
            title[..1].make_ascii_uppercase();
            words.push(title);
        }
        let mut checked = 0;
        for w in &words {
            if let Some(plain) = word_key(w) {
                assert_eq!(plain, Scan::of(w).plain_key(w), "{w}");
                checked += 1;
            }
        }
        assert!(checked > 30_000, "{checked}");
        assert_eq!(word_key("on"), Some(false));
        assert_eq!(word_key("containerPort"), Some(true));
        assert_eq!(word_key("1x"), None);
        assert_eq!(word_key("a-b"), None);
    }
}
