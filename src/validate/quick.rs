//! Stage 2, JSON Schema: whether a document is certainly valid against an
//! embedded schema, decided without compiling it.
//!
//! Compiling a schema with `jsonschema` costs a few milliseconds at every
//! start that checks a document: the project file on every build, and an
//! edited definition on every build after an edit, where it was most of what
//! the edit cost (see docs/development.md). Nearly every document is valid,
//! and for a valid one the compiled validator only says so. This reads the
//! keywords trainc's schemas use straight off their JSON.
//!
//! It answers in three values. `jsonschema` stays the authority: anything
//! but [`Verdict::Valid`] (a violation, or a keyword, value or pattern this
//! does not decide exactly) sends the document to the compiled validator,
//! which then says what is wrong. So this may only ever be unsure where it
//! could be wrong, never wrong: a `Valid` it gave an invalid document would
//! let it through. The tests in `schema.rs` hold it to `jsonschema` on every
//! fixture and example and on thousands of mutations of them.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock, PoisonError, RwLock};

use regex_lite::Regex;
use serde_json::{Map, Number, Value};

/// What is known of an instance against a schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Valid,
    Invalid,
    /// Not decided here: the compiled validator must look.
    Unsure,
}

use Verdict::{Invalid, Unsure, Valid};

impl Verdict {
    fn of(b: bool) -> Self {
        if b { Valid } else { Invalid }
    }

    fn not(self) -> Self {
        match self {
            Valid => Invalid,
            Invalid => Valid,
            Unsure => Unsure,
        }
    }
}

/// Past this many nested schemas the answer is [`Verdict::Unsure`]: a
/// reference cycle that consumes no instance must not recurse forever.
const DEPTH: usize = 128;

/// Keywords that constrain nothing (annotations, and `$defs`, which only
/// holds what `$ref` names). Any other keyword not decided below makes the
/// answer [`Verdict::Unsure`].
const ANNOTATIONS: &[&str] = &[
    "$comment",
    "$defs",
    "default",
    "deprecated",
    "description",
    "examples",
    "readOnly",
    "title",
    "writeOnly",
    // trainc's own: the hint shown when `pattern` fails.
    "patternErrorMessage",
];

/// A schema as the quick check reads it: its root, and its `$defs` each
/// parsed the first time a `$ref` names it.
///
/// An edited definition's build checks it against the definition schema,
/// and reading all of that schema was about half of what any edit paid
/// once, whatever it changed (see docs/development.md). A definition
/// reaches only the definitions its fields name; the rest stay text.
pub struct Quick {
    /// The schema without `$defs`.
    root: Value,
    defs: HashMap<String, Def>,
    /// `$ref`s that begin with this accept anything ([`cut`]).
    cut: Option<String>,
    /// Each pattern, compiled the first time a string is matched against
    /// it; `None` where it cannot be. Shared, with its matching caches, by
    /// the threads that check documents.
    patterns: RwLock<HashMap<String, Option<Arc<Regex>>>>,
}

/// One entry of `$defs`: its JSON text, and the value parsed from it
/// (`None` if the text is not JSON, which leaves a reference to it
/// unsure).
struct Def {
    text: &'static str,
    value: OnceLock<Option<Value>>,
}

/// Where the embedded schemas' `$defs` begins; see [`Quick::lazy`].
const DEFS: &str = ",\n  \"$defs\": {\n";
/// What begins each entry of `$defs` in the embedded schemas.
const ENTRY: &str = "\n    \"";

impl Quick {
    /// The quick check of `schema`, parsed whole.
    pub fn new(mut schema: Value) -> Self {
        let defs = match schema.as_object_mut().and_then(|o| o.shift_remove("$defs")) {
            Some(Value::Object(defs)) => defs
                .into_iter()
                .map(|(name, v)| {
                    let def = Def {
                        text: "",
                        value: OnceLock::from(Some(v)),
                    };
                    (name, def)
                })
                .collect(),
            Some(other) => {
                // Not an object: put back, where `$ref`s find nothing.
                if let Some(o) = schema.as_object_mut() {
                    o.insert("$defs".to_owned(), other);
                }
                HashMap::new()
            }
            None => HashMap::new(),
        };
        Self {
            root: schema,
            defs,
            cut: None,
            patterns: RwLock::default(),
        }
    }

    /// The quick check of the schema in `text`, which only parses its root
    /// now. `cut` names a prefix of definitions that are left out, and
    /// every `$ref` to one accepts anything (see [`cut`]).
    ///
    /// It relies on how the embedded schemas are laid out: `$defs` last in
    /// the root, each entry on a line of its own indented by four spaces,
    /// the ones `cut` names after all the others (tests/k8s_schema.rs
    /// writes them so, and the tests in schema.rs hold every definition
    /// found to the schema parsed whole). `None` where `$defs` is laid out
    /// otherwise: then the schema must be parsed whole.
    pub fn lazy(text: &'static str, cut: Option<&str>) -> Option<Self> {
        let Some(at) = memchr::memmem::find(text.as_bytes(), DEFS.as_bytes()) else {
            // No definitions, or laid out otherwise: read whole, the cut
            // leaves what it names unreached.
            let mut root: Value = serde_json::from_str(text).ok()?;
            if let Some(prefix) = cut {
                self::cut(&mut root, &format!("#/$defs/{prefix}"));
            }
            return Some(Self::new(root));
        };
        let mut root: Value = serde_json::from_str(&format!("{}\n}}", &text[..at])).ok()?;
        let mut body = text[at + DEFS.len()..]
            .trim_end()
            .strip_suffix("\n  }\n}")?;
        if let Some(end) = cut.and_then(|prefix| tail(body, prefix)) {
            body = &body[..end];
        }
        let mut defs = HashMap::new();
        // Each entry begins a line at four spaces with its quoted name, and
        // every other line is deeper or closes an entry. A line less
        // indented means `$defs` is not last: what follows would be taken
        // for definitions.
        let mut starts = vec![0];
        for newline in memchr::memchr_iter(b'\n', body.as_bytes()) {
            match body.as_bytes().get(newline + 1..newline + 6) {
                Some(b"    \"") => starts.push(newline + 1),
                Some([b' ', b' ', b' ', b' ', _]) => {}
                _ => return None,
            }
        }
        for (i, &start) in starts.iter().enumerate() {
            let end = starts.get(i + 1).map_or(body.len(), |&next| next - 1);
            let entry = body[start..end].strip_prefix(&ENTRY[1..])?;
            // Every entry but the last ends with a comma.
            let entry = match entry.strip_suffix(',') {
                Some(entry) if i + 1 < starts.len() => entry,
                None if i + 1 == starts.len() => entry,
                _ => return None,
            };
            let (name, text) = entry.split_once("\": ")?;
            // A name with an escape would need decoding.
            if name.contains(['\\', '"']) {
                return None;
            }
            let def = Def {
                text,
                value: OnceLock::new(),
            };
            if defs.insert(name.to_owned(), def).is_some() {
                return None;
            }
        }
        let cut = cut.map(|prefix| format!("#/$defs/{prefix}"));
        if let Some(prefix) = &cut {
            cut_in(&mut root, &text[..at], prefix);
        }
        Some(Self {
            root,
            defs,
            cut,
            patterns: RwLock::default(),
        })
    }

    /// The patterns of the schema, sorted.
    #[cfg(test)]
    pub fn patterns(&self) -> Vec<String> {
        fn collect(v: &Value, out: &mut Vec<String>) {
            match v {
                Value::Object(m) => {
                    if let Some(Value::String(p)) = m.get("pattern") {
                        out.push(p.clone());
                    }
                    m.values().for_each(|v| collect(v, out));
                }
                Value::Array(a) => a.iter().for_each(|v| collect(v, out)),
                _ => {}
            }
        }
        let mut all = Vec::new();
        collect(&self.root, &mut all);
        for name in self.defs.keys() {
            if let Some(def) = self.def(name) {
                collect(def, &mut all);
            }
        }
        all.sort_unstable();
        all.dedup();
        all
    }

    /// The schema as the quick check reads it: the root with every
    /// definition parsed and put back in `$defs`, for the tests to compare
    /// with the schema parsed whole.
    #[cfg(test)]
    pub fn whole(&self) -> Value {
        let mut root = self.root.clone();
        if !self.defs.is_empty() {
            let mut names: Vec<&String> = self.defs.keys().collect();
            names.sort_unstable();
            let defs: Map<String, Value> = names
                .into_iter()
                .map(|n| (n.clone(), self.def(n).cloned().unwrap_or(Value::Null)))
                .collect();
            if let Some(o) = root.as_object_mut() {
                o.insert("$defs".to_owned(), Value::Object(defs));
            }
        }
        root
    }

    /// Whether `instance` is valid against the schema.
    pub fn verdict(&self, instance: &Value) -> Verdict {
        Eval { quick: self }.schema(&self.root, instance, 0)
    }

    /// The definition `name`, parsed (and cut) the first time it is asked
    /// for.
    fn def(&self, name: &str) -> Option<&Value> {
        let def = self.defs.get(name)?;
        def.value
            .get_or_init(|| {
                let mut v: Value = serde_json::from_str(def.text).ok()?;
                if let Some(prefix) = &self.cut {
                    cut_in(&mut v, def.text, prefix);
                }
                Some(v)
            })
            .as_ref()
    }

    /// `pattern` compiled for ASCII text, or `None` where it cannot be.
    fn regex(&self, pattern: &str) -> Option<Arc<Regex>> {
        // The map is whole after any panic: every insert is one call.
        let known = self.patterns.read().unwrap_or_else(PoisonError::into_inner);
        if let Some(compiled) = known.get(pattern) {
            return compiled.clone();
        }
        drop(known);
        // Only printable ASCII is matched (see `string`): there ECMA-262's
        // classes and Rust's ASCII classes agree.
        let compiled = portable(pattern)
            .then(|| Regex::new(pattern).ok())
            .flatten()
            .map(Arc::new);
        self.patterns
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(pattern.to_owned())
            .or_insert(compiled)
            .clone()
    }
}

/// Where the entries of `$defs` named with `prefix` begin in `text` (at the
/// comma before the first), which the embedded schemas write last. Never
/// read: found with SIMD, as they are nine tenths of the definition schema.
pub fn tail(text: &str, prefix: &str) -> Option<usize> {
    memchr::memmem::find(text.as_bytes(), format!(",{ENTRY}{prefix}").as_bytes())
}

/// [`cut`] of `schema`, parsed from `text`: only where the text names
/// `prefix` at all, since most definitions refer to no Kubernetes one and
/// walking them was a visible part of an edit's cost.
fn cut_in(schema: &mut Value, text: &str, prefix: &str) {
    if memchr::memmem::find(text.as_bytes(), prefix.as_bytes()).is_some() {
        cut(schema, prefix);
    }
}

/// Empties every object of `schema` whose `$ref` begins with `prefix`, so
/// that it accepts anything.
pub fn cut(schema: &mut Value, prefix: &str) {
    match schema {
        Value::Object(o) => {
            let refers = o
                .get("$ref")
                .and_then(Value::as_str)
                .is_some_and(|r| r.starts_with(prefix));
            if refers {
                o.clear();
            } else {
                o.values_mut().for_each(|v| cut(v, prefix));
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|v| cut(v, prefix)),
        _ => {}
    }
}

/// Whether `pattern` uses only syntax ECMA-262 and `regex-lite` read
/// alike: literals, classes, groups, alternation, anchors, quantifiers and
/// the escapes below. `regex-lite` also reads class set operations (`&&`,
/// `--`, `~~`), nested and POSIX classes (`[[`, `[:`), flags (`(?`),
/// `{,n}` and escapes such as `\A` and `\z`, where ECMA-262 reads
/// literals or fails; it reads `]` first in a class as a literal, where
/// ECMA-262 reads `[]` as matching nothing and `[^]` as anything; ECMA-262
/// has escapes it lacks.
fn portable(pattern: &str) -> bool {
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('d' | 'D' | 'w' | 'W' | 's' | 'S') => {}
                Some(c) if ".-/\\^$*+?()[]{}|".contains(c) => {}
                _ => return false,
            }
        }
    }
    !["&&", "--", "~~", "[[", "[:", "[]", "[^]", "(?", "{,"]
        .iter()
        .any(|s| pattern.contains(s))
        && pattern.is_ascii()
}

/// The longest array whose items are compared pairwise for `uniqueItems`.
const UNIQUE: usize = 64;

struct Eval<'a> {
    quick: &'a Quick,
}

impl Eval<'_> {
    fn schema(&self, schema: &Value, instance: &Value, depth: usize) -> Verdict {
        if depth > DEPTH {
            return Unsure;
        }
        let map = match schema {
            Value::Bool(b) => return Verdict::of(*b),
            Value::Object(map) => map,
            _ => return Unsure,
        };
        all(map
            .iter()
            .map(|(keyword, value)| self.keyword(map, keyword, value, instance, depth)))
    }

    fn keyword(
        &self,
        map: &Map<String, Value>,
        keyword: &str,
        value: &Value,
        instance: &Value,
        depth: usize,
    ) -> Verdict {
        let depth = depth + 1;
        match keyword {
            "$ref" => match value.as_str().and_then(|r| self.definition(r)) {
                Some(target) => self.schema(target, instance, depth),
                None => Unsure,
            },
            "type" => type_verdict(value, instance),
            "enum" => match value {
                Value::Array(options) => any(options.iter().map(|o| equal(o, instance, 0))),
                _ => Unsure,
            },
            "const" => equal(value, instance, 0),
            "not" => self.schema(value, instance, depth).not(),
            "if" => match self.schema(value, instance, depth) {
                Valid => map
                    .get("then")
                    .map_or(Valid, |s| self.schema(s, instance, depth)),
                Invalid => map
                    .get("else")
                    .map_or(Valid, |s| self.schema(s, instance, depth)),
                Unsure => Unsure,
            },
            // Evaluated with `if`; without one they do nothing.
            "then" | "else" => Valid,
            "properties"
            | "additionalProperties"
            | "required"
            | "minProperties"
            | "maxProperties"
            | "propertyNames" => match instance {
                Value::Object(object) => self.object(map, keyword, value, object, depth),
                _ => Valid,
            },
            "items" | "minItems" | "maxItems" | "uniqueItems" => match instance {
                Value::Array(items) => self.array(keyword, value, items, depth),
                _ => Valid,
            },
            "minLength" | "maxLength" | "pattern" => match instance {
                Value::String(s) => self.string(keyword, value, s),
                _ => Valid,
            },
            "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => {
                match (instance, value) {
                    (Value::Number(n), Value::Number(bound)) => {
                        match (keyword, compare(n, bound)) {
                            (_, None) => Unsure,
                            ("minimum", Some(o)) => Verdict::of(o != Ordering::Less),
                            ("maximum", Some(o)) => Verdict::of(o != Ordering::Greater),
                            ("exclusiveMinimum", Some(o)) => Verdict::of(o == Ordering::Greater),
                            (_, Some(o)) => Verdict::of(o == Ordering::Less),
                        }
                    }
                    (Value::Number(_), _) => Unsure,
                    _ => Valid,
                }
            }
            k if ANNOTATIONS.contains(&k) || k.starts_with("x-") => Valid,
            // Below the root, `$id` moves the base `$ref`s resolve against
            // and `$schema` may change the dialect.
            "$id" | "$schema"
                if self
                    .quick
                    .root
                    .as_object()
                    .is_some_and(|r| std::ptr::eq(r, map)) =>
            {
                Valid
            }
            _ => Unsure,
        }
    }

    /// The schema a local reference names: `#/$defs/<name>`, the only kind
    /// trainc's schemas use.
    fn definition(&self, reference: &str) -> Option<&Value> {
        let name = reference.strip_prefix("#/$defs/")?;
        // An escaped or percent-encoded name would need decoding.
        if name.contains(['~', '/', '%']) {
            return None;
        }
        self.quick.def(name)
    }

    fn object(
        &self,
        map: &Map<String, Value>,
        keyword: &str,
        value: &Value,
        object: &Map<String, Value>,
        depth: usize,
    ) -> Verdict {
        match (keyword, value) {
            ("properties", Value::Object(properties)) => all(properties
                .iter()
                .filter_map(|(name, s)| Some((s, object.get(name)?)))
                .map(|(s, v)| self.schema(s, v, depth))),
            ("additionalProperties", schema) => {
                if map.contains_key("patternProperties") {
                    return Unsure;
                }
                let declared = match map.get("properties") {
                    None => None,
                    Some(Value::Object(p)) => Some(p),
                    Some(_) => return Unsure,
                };
                all(object
                    .iter()
                    .filter(|(name, _)| !declared.is_some_and(|p| p.contains_key(*name)))
                    .map(|(_, v)| self.schema(schema, v, depth)))
            }
            ("required", Value::Array(names)) => all(names.iter().map(|n| match n {
                Value::String(n) => Verdict::of(object.contains_key(n)),
                _ => Unsure,
            })),
            ("minProperties", bound) => count(bound, object.len(), Ordering::Less),
            ("maxProperties", bound) => count(bound, object.len(), Ordering::Greater),
            ("propertyNames", schema) => all(object
                .keys()
                .map(|k| self.schema(schema, &Value::String(k.clone()), depth))),
            _ => Unsure,
        }
    }

    fn array(&self, keyword: &str, value: &Value, items: &[Value], depth: usize) -> Verdict {
        match (keyword, value) {
            // An array of schemas is the older drafts' tuple form.
            ("items", Value::Array(_)) => Unsure,
            ("items", schema) => all(items.iter().map(|v| self.schema(schema, v, depth))),
            ("minItems", bound) => count(bound, items.len(), Ordering::Less),
            ("maxItems", bound) => count(bound, items.len(), Ordering::Greater),
            ("uniqueItems", Value::Bool(false)) => Valid,
            // Pairs are compared one by one: a long array is left to the
            // compiled validator, which hashes.
            ("uniqueItems", Value::Bool(true)) if items.len() > UNIQUE => Unsure,
            // Two equal items fail it; items unsure of each other leave it
            // unsure.
            ("uniqueItems", Value::Bool(true)) => all(items
                .iter()
                .enumerate()
                .flat_map(|(i, a)| items[i + 1..].iter().map(move |b| equal(a, b, 0).not()))),
            _ => Unsure,
        }
    }

    fn string(&self, keyword: &str, value: &Value, s: &str) -> Verdict {
        match keyword {
            // Lengths count code points, as JSON Schema does.
            "minLength" => count(value, s.chars().count(), Ordering::Less),
            "maxLength" => count(value, s.chars().count(), Ordering::Greater),
            _ => match value.as_str().and_then(|p| self.quick.regex(p)).as_deref() {
                // Beyond printable ASCII, ECMA-262's classes, `.` and line
                // terminators are not Rust's: the compiled validator
                // decides.
                Some(re) if s.bytes().all(|b| (b' '..=b'~').contains(&b)) => {
                    Verdict::of(re.is_match(s))
                }
                _ => Unsure,
            },
        }
    }
}

/// Every verdict holds (Kleene's "and": one certain failure decides, and
/// the verdicts after it are not worked out).
fn all(verdicts: impl Iterator<Item = Verdict>) -> Verdict {
    let mut out = Valid;
    for v in verdicts {
        match v {
            Invalid => return Invalid,
            Unsure => out = Unsure,
            Valid => {}
        }
    }
    out
}

/// One verdict holds (Kleene's "or").
fn any(verdicts: impl Iterator<Item = Verdict>) -> Verdict {
    let mut out = Invalid;
    for v in verdicts {
        match v {
            Valid => return Valid,
            Unsure => out = Unsure,
            Invalid => {}
        }
    }
    out
}

/// A count against a bound that must be a non-negative integer: invalid
/// when the count is on the `fails` side of it.
fn count(bound: &Value, n: usize, fails: Ordering) -> Verdict {
    match bound.as_u64() {
        Some(bound) => Verdict::of((n as u64).cmp(&bound) != fails),
        None => Unsure,
    }
}

fn type_verdict(types: &Value, instance: &Value) -> Verdict {
    match types {
        Value::String(t) => is_type(t, instance),
        Value::Array(ts) => any(ts.iter().map(|t| match t {
            Value::String(t) => is_type(t, instance),
            _ => Unsure,
        })),
        _ => Unsure,
    }
}

fn is_type(name: &str, instance: &Value) -> Verdict {
    match (name, instance) {
        ("null", v) => Verdict::of(v.is_null()),
        ("boolean", v) => Verdict::of(v.is_boolean()),
        ("string", v) => Verdict::of(v.is_string()),
        ("array", v) => Verdict::of(v.is_array()),
        ("object", v) => Verdict::of(v.is_object()),
        ("number", v) => Verdict::of(v.is_number()),
        // A float with no fraction is an integer to JSON Schema; whether a
        // given validator agrees is left to it.
        ("integer", Value::Number(n)) if n.is_f64() => Unsure,
        ("integer", v) => Verdict::of(v.is_i64() || v.is_u64()),
        _ => Unsure,
    }
}

/// The largest magnitude below which every integer is a double exactly.
const EXACT: f64 = 9_007_199_254_740_992.0;

/// `a` against `b`, where that is exact: two integers, or doubles and
/// integers that doubles hold exactly.
fn compare(a: &Number, b: &Number) -> Option<Ordering> {
    let int = |n: &Number| {
        n.as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
    };
    if let (Some(x), Some(y)) = (int(a), int(b)) {
        return Some(x.cmp(&y));
    }
    let (x, y) = (a.as_f64()?, b.as_f64()?);
    if x.abs() >= EXACT || y.abs() >= EXACT {
        return None;
    }
    x.partial_cmp(&y)
}

/// JSON equality as JSON Schema has it (numbers by value).
fn equal(a: &Value, b: &Value, depth: usize) -> Verdict {
    if depth > DEPTH {
        return Unsure;
    }
    let depth = depth + 1;
    match (a, b) {
        (Value::Null, Value::Null) => Valid,
        (Value::Bool(x), Value::Bool(y)) => Verdict::of(x == y),
        (Value::String(x), Value::String(y)) => Verdict::of(x == y),
        (Value::Number(x), Value::Number(y)) => match compare(x, y) {
            Some(o) => Verdict::of(o == Ordering::Equal),
            None => Unsure,
        },
        (Value::Array(x), Value::Array(y)) => {
            if x.len() != y.len() {
                return Invalid;
            }
            all(x.iter().zip(y).map(|(x, y)| equal(x, y, depth)))
        }
        (Value::Object(x), Value::Object(y)) => {
            if x.len() != y.len() {
                return Invalid;
            }
            all(x.iter().map(|(k, x)| match y.get(k) {
                Some(y) => equal(x, y, depth),
                None => Invalid,
            }))
        }
        _ => Invalid,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn verdict(schema: Value, instance: Value) -> Verdict {
        Quick::new(schema).verdict(&instance)
    }

    /// Syntax `regex-lite` reads otherwise than ECMA-262 is left to the
    /// compiled validator.
    #[test]
    fn patterns_read_otherwise_are_unsure() {
        // Each of these `regex-lite` compiles, and reads otherwise.
        for (pattern, text) in [("^[]a]$", "]a"), ("^[^]a]$", "b"), ("^[a[:digit:]]$", "1")] {
            let schema = json!({ "pattern": pattern });
            assert_eq!(verdict(schema, json!(text)), Unsure, "{pattern}");
        }
        assert_eq!(verdict(json!({"pattern": "^[a-z]$"}), json!("a")), Valid);
    }

    #[test]
    fn decides_the_keywords_it_knows() {
        let s = json!({
            "type": "object",
            "required": ["name"],
            "additionalProperties": false,
            "properties": {
                "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 5},
                "n": {"type": "integer", "minimum": 1, "maximum": 3},
                "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true}
            }
        });
        assert_eq!(verdict(s.clone(), json!({"name": "abc", "n": 2})), Valid);
        assert_eq!(verdict(s.clone(), json!({"n": 2})), Invalid);
        assert_eq!(verdict(s.clone(), json!({"name": "ABC"})), Invalid);
        assert_eq!(verdict(s.clone(), json!({"name": "abcdef"})), Invalid);
        assert_eq!(verdict(s.clone(), json!({"name": "a", "n": 4})), Invalid);
        assert_eq!(verdict(s.clone(), json!({"name": "a", "x": 1})), Invalid);
        assert_eq!(
            verdict(s.clone(), json!({"name": "a", "tags": ["x", "x"]})),
            Invalid
        );
        assert_eq!(verdict(s, json!({"name": "a", "tags": ["x", "y"]})), Valid);
    }

    #[test]
    fn is_unsure_rather_than_wrong() {
        // Beyond ASCII, a pattern is left to the compiled validator.
        let s = json!({"pattern": "^\\S+$"});
        assert_eq!(verdict(s.clone(), json!("ab")), Valid);
        assert_eq!(verdict(s.clone(), json!("a\u{feff}b")), Unsure);
        assert_eq!(verdict(s, json!("a\rb")), Unsure);
        // Syntax the two engines read differently.
        for p in [
            "^\\A",
            "[[:alpha:]]",
            "[a&&b]",
            "(?i)a",
            "a{,2}",
            "\\cA",
            "é",
        ] {
            assert_eq!(verdict(json!({ "pattern": p }), json!("a")), Unsure, "{p}");
        }
        // A float with no fraction, against "integer".
        assert_eq!(verdict(json!({"type": "integer"}), json!(2.0)), Unsure);
        // Numbers beyond what doubles hold exactly.
        assert_eq!(verdict(json!({"maximum": 1.5}), json!(u64::MAX)), Unsure);
        // Keywords it does not decide.
        assert_eq!(verdict(json!({"format": "email"}), json!("x")), Unsure);
        assert_eq!(verdict(json!({"oneOf": [true]}), json!(1)), Unsure);
        // A certain failure decides even beside an unsure keyword.
        assert_eq!(
            verdict(json!({"format": "email", "type": "number"}), json!("x")),
            Invalid
        );
    }

    #[test]
    fn negation_never_turns_unsure_into_certain() {
        let s = json!({"not": {"type": "integer"}});
        assert_eq!(verdict(s.clone(), json!(2.0)), Unsure);
        assert_eq!(verdict(s.clone(), json!(2)), Invalid);
        assert_eq!(verdict(s, json!("2")), Valid);
        let s = json!({"if": {"type": "integer"}, "then": {"minimum": 5}, "else": false});
        assert_eq!(verdict(s.clone(), json!(7)), Valid);
        assert_eq!(verdict(s.clone(), json!(3)), Invalid);
        assert_eq!(verdict(s.clone(), json!("x")), Invalid);
        assert_eq!(verdict(s, json!(7.0)), Unsure);
    }

    #[test]
    fn numbers_are_equal_by_value() {
        assert_eq!(equal(&json!(1), &json!(1.0), 0), Valid);
        assert_eq!(
            equal(&json!([1, {"a": 2}]), &json!([1.0, {"a": 2}]), 0),
            Valid
        );
        assert_eq!(equal(&json!(1), &json!(true), 0), Invalid);
        assert_eq!(
            verdict(json!({"uniqueItems": true}), json!([1, 1.0])),
            Invalid
        );
        assert_eq!(verdict(json!({"enum": [1, "a"]}), json!(1.0)), Valid);
    }

    #[test]
    fn references_resolve_locally_and_cycles_end() {
        let s = json!({
            "$defs": {"a": {"$ref": "#/$defs/a"}, "n": {"type": "number"}},
            "properties": {"x": {"$ref": "#/$defs/n"}, "y": {"$ref": "#/$defs/a"}}
        });
        assert_eq!(verdict(s.clone(), json!({"x": 1})), Valid);
        assert_eq!(verdict(s.clone(), json!({"x": "1"})), Invalid);
        assert_eq!(verdict(s.clone(), json!({"y": 1})), Unsure);
        assert_eq!(verdict(json!({"$ref": "other.json"}), json!(1)), Unsure);
    }
}
