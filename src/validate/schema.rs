//! JSON Schema validation of a raw document, with findings mapped back to the
//! YAML source.

use std::sync::{LazyLock, OnceLock};

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::{ValidationError, Validator};
use serde_json::Value;

use crate::diagnostic::Diagnostic;
use crate::load::{Document, pointer_segment};
use crate::suggest::did_you_mean;
use crate::validate::quick::{self, Quick, Verdict};

/// The project-file schema.
pub use crate::model::schema::PROJECT as PROJECT_SCHEMA;
/// The definition schema, exactly as shipped in `schema/`; `trainc schema`
/// prints these bytes.
pub use crate::model::schema::TRAINING_JOB as TRAINING_JOB_SCHEMA;

/// A schema: what the quick check reads of it, and its JSON parsed whole
/// and its compiled validator, only for a document [`Quick`] does not find
/// valid (the error mapper reads the JSON for field names, "did you mean"
/// and `patternErrorMessage` hints) and, for the definition schema, for a
/// definition with patches or an affinity ([`Kube`](crate::model::schema::Kube) reads Kubernetes'
/// definitions from it).
pub struct Schema {
    quick: Quick,
    /// The schema parsed whole, on first use.
    json: fn() -> &'static Value,
    validator: OnceLock<Validator>,
}

/// The definition schema, Kubernetes' pod template included: what a
/// definition with patches or an affinity is checked against.
pub static TRAINING_JOB: LazyLock<Schema> = LazyLock::new(|| {
    Schema::new(
        TRAINING_JOB_SCHEMA,
        None,
        crate::model::schema::training_job,
    )
});
/// The definition schema without the Kubernetes definitions (`io.k8s.…`),
/// for every other definition: the pod template is most of the schema and
/// of the time it takes to compile (a few milliseconds at every start).
static TRAINING_JOB_LEAN: LazyLock<Schema> =
    LazyLock::new(|| Schema::new(TRAINING_JOB_SCHEMA, Some(KUBERNETES), || &LEAN_JSON));
static LEAN_JSON: LazyLock<Value> = LazyLock::new(|| lean(TRAINING_JOB_SCHEMA));
pub static PROJECT: LazyLock<Schema> =
    LazyLock::new(|| Schema::new(PROJECT_SCHEMA, None, || &PROJECT_JSON));
static PROJECT_JSON: LazyLock<Value> = LazyLock::new(|| parse(PROJECT_SCHEMA));

/// Reads the root of the schema most definitions are checked against, so
/// that it can be done on a spare thread while the definitions load,
/// rather than by the first document's check while the others wait for it.
pub fn warm() {
    LazyLock::force(&TRAINING_JOB_LEAN);
}

/// The prefix of the Kubernetes definitions' names in `$defs`.
const KUBERNETES: &str = "io.k8s.";

/// Panics only if an embedded schema is broken, which the test suite rules
/// out; it never depends on user input.
#[allow(clippy::expect_used)]
fn parse(text: &str) -> Value {
    serde_json::from_str(text).expect("embedded schema is JSON")
}

/// The schema in `text` without the Kubernetes definitions; what referred
/// to them accepts anything. They are nine tenths of its bytes and are not
/// read at all: their generator (tests/k8s_schema.rs) writes them last in
/// `$defs`, which closes the schema, and they are cut off as a tail.
fn lean(text: &str) -> Value {
    let mut schema = match quick::tail(text, KUBERNETES) {
        Some(end) => parse(&format!("{}\n  }}\n}}\n", &text[..end])),
        None => parse(text),
    };
    quick::cut(&mut schema, &format!("#/$defs/{KUBERNETES}"));
    schema
}

/// The schema a definition is checked against: with the pod template only
/// where the definition has patches or an affinity, the fields that refer
/// to it.
pub fn training_job(doc: &Document) -> &'static Schema {
    let spec = &doc.value["spec"];
    let roles = spec["roles"].as_object();
    let kubernetes = spec.get("patches").is_some()
        || roles.is_some_and(|r| r.values().any(|role| role.get("affinity").is_some()));
    if kubernetes {
        &TRAINING_JOB
    } else {
        &TRAINING_JOB_LEAN
    }
}

impl Schema {
    /// The schema in `text`, of which only the root is read now; `whole`
    /// gives all of it, parsed when the error mapper or
    /// [`Kube`](crate::model::schema::Kube) first needs it. `cut`: see
    /// [`Quick::lazy`].
    fn new(text: &'static str, cut: Option<&str>, whole: fn() -> &'static Value) -> Self {
        let quick = Quick::lazy(text, cut).unwrap_or_else(|| Quick::new(whole().clone()));
        Self {
            quick,
            json: whole,
            validator: OnceLock::new(),
        }
    }

    /// The schema parsed whole.
    fn json(&self) -> &'static Value {
        (self.json)()
    }

    /// The compiled validator. Panics only if the embedded schema is
    /// broken, which the test suite rules out; it never depends on user
    /// input.
    #[allow(clippy::expect_used)]
    fn validator(&self) -> &Validator {
        self.validator.get_or_init(|| {
            jsonschema::draft202012::new(self.json()).expect("embedded schema compiles")
        })
    }

    /// What the quick check knows of `value`, without compiling the
    /// validator.
    pub fn quick(&self, value: &Value) -> Verdict {
        self.quick.verdict(value)
    }

    /// Whether the compiled validator finds `value` valid.
    #[cfg(test)]
    fn is_valid(&self, value: &Value) -> bool {
        self.validator().is_valid(value)
    }

    /// Every schema violation of `doc`, located in its source file.
    pub fn check(&self, doc: &Document) -> Vec<Diagnostic> {
        if self.quick(&doc.value) == Verdict::Valid {
            return Vec::new();
        }
        let errors: Vec<ValidationError> = self.validator().iter_errors(&doc.value).collect();
        // A misspelt required field shows up twice: as an unknown field and as
        // a missing one. The "did you mean" finding says it all.
        let misspelt: Vec<(String, String)> = errors
            .iter()
            .filter_map(|e| match e.kind() {
                ValidationErrorKind::AdditionalProperties { unexpected } => {
                    let known = self.known_fields(e);
                    Some(unexpected.iter().filter_map(move |k| {
                        did_you_mean(k, known.iter().copied())
                            .map(|s| (e.instance_path().as_str().to_owned(), s.to_owned()))
                    }))
                }
                _ => None,
            })
            .flatten()
            .collect();
        errors
            .iter()
            .filter(|e| match e.kind() {
                ValidationErrorKind::Required { property } => !misspelt.iter().any(|(p, s)| {
                    p == e.instance_path().as_str() && Some(s.as_str()) == property.as_str()
                }),
                _ => true,
            })
            .flat_map(|e| self.describe(doc, e))
            .collect()
    }

    /// The property names the schema object holding `e`'s keyword declares.
    fn known_fields(&self, e: &ValidationError) -> Vec<&str> {
        let schema_path = e.schema_path().as_str();
        schema_path
            .rfind('/')
            .and_then(|i| self.json().pointer(&schema_path[..i]))
            .and_then(|s| s.get("properties"))
            .and_then(Value::as_object)
            .map(|p| p.keys().map(String::as_str).collect())
            .unwrap_or_default()
    }

    fn describe(&self, doc: &Document, e: &ValidationError) -> Vec<Diagnostic> {
        let pointer = e.instance_path().as_str().to_owned();
        let schema_path = e.schema_path().as_str();
        // The schema object that holds the failing keyword.
        let subschema = schema_path
            .rfind('/')
            .and_then(|i| self.json().pointer(&schema_path[..i]));
        let path = doc.dotted(&pointer);
        let instance = e.instance();
        let diag = |msg: String| Diagnostic::new(msg).path(path.clone());
        match e.kind() {
            ValidationErrorKind::AdditionalProperties { unexpected } => {
                let known = self.known_fields(e);
                unexpected
                    .iter()
                    .map(|key| {
                        let child = format!("{pointer}/{}", pointer_segment(key));
                        let hint = match did_you_mean(key, known.iter().copied()) {
                            Some(s) => format!("did you mean `{s}`?"),
                            None if known.is_empty() => "remove this field".to_owned(),
                            None => format!("expected one of {}", list(known.iter().copied())),
                        };
                        diag(format!("unknown field `{key}`"))
                            .at(doc.locate_key(&child))
                            .hint(hint)
                    })
                    .collect()
            }
            ValidationErrorKind::Required { property } => {
                let name = property.as_str().unwrap_or_default();
                vec![
                    diag(format!("missing required field `{name}`"))
                        .at(doc.locate_key(&pointer))
                        .hint(format!("add `{name}:` here")),
                ]
            }
            ValidationErrorKind::Type { kind } => {
                let expected = match kind {
                    TypeKind::Single(t) => t.to_string(),
                    // `null` is allowed where it deletes a field in a patch,
                    // which is not what a mistyped value means.
                    TypeKind::Multiple(ts) => ts
                        .iter()
                        .map(|t| t.to_string())
                        .filter(|t| t != "null")
                        .collect::<Vec<_>>()
                        .join(" or "),
                };
                let mut d = diag(format!(
                    "expected {expected}, found {} {}",
                    type_name(instance),
                    short(instance)
                ))
                .at(doc.locate(&pointer));
                if expected == "integer" && instance.is_number() {
                    d = d.hint("use a whole number");
                } else if expected.contains("string") && instance.is_null() {
                    d = d.hint("give a value or remove the field");
                }
                vec![d]
            }
            ValidationErrorKind::Enum { options } => {
                let opts: Vec<&str> = options
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let hint = match instance
                    .as_str()
                    .and_then(|s| did_you_mean(s, opts.iter().copied()))
                {
                    Some(s) => format!("did you mean `{s}`?"),
                    None => format!("expected one of {}", list(opts.iter().copied())),
                };
                // The strategies are per framework (the schema's `if`).
                let hint = if pointer == "/spec/strategy" {
                    let framework = doc.value["spec"]["framework"]
                        .as_str()
                        .unwrap_or("tensorflow");
                    format!("{hint} for a `{framework}` job")
                } else {
                    hint
                };
                vec![
                    diag(format!("{} is not a supported value", short(instance)))
                        .at(doc.locate(&pointer))
                        .hint(hint),
                ]
            }
            ValidationErrorKind::Not { .. } => {
                // `tensorflowOnly` / `pytorchOnly`: a field of the other
                // framework.
                let holder = subschema.and_then(|h| match h.as_str() {
                    Some(r) => r.strip_prefix('#').and_then(|r| self.json().pointer(r)),
                    None => Some(h),
                });
                let Some(owner) = holder
                    .and_then(|h| h.get("x-framework"))
                    .and_then(Value::as_str)
                else {
                    return vec![diag(e.to_string()).at(doc.locate(&pointer))];
                };
                let key = pointer.rsplit('/').next().unwrap_or_default();
                let role = pointer.starts_with("/spec/roles/");
                let (message, hint) = match owner {
                    "tensorflow" if role => (
                        format!("`{key}` is a TensorFlow role: a PyTorch job's nodes are its `worker` tasks"),
                        "remove it; `torchrun` starts `torchrun.nprocPerNode` processes on every worker node".to_owned(),
                    ),
                    "tensorflow" => (
                        format!("`{key}` is TensorFlow's: a PyTorch job's processes learn the cluster from `torchrun`"),
                        "remove it".to_owned(),
                    ),
                    _ => (
                        format!("`{key}` is PyTorch's, and this is a TensorFlow job"),
                        "set `framework: pytorch`, or remove it".to_owned(),
                    ),
                };
                vec![diag(message).at(doc.locate_key(&pointer)).hint(hint)]
            }
            ValidationErrorKind::Constant { expected_value } => vec![
                diag(format!(
                    "expected {}, found {}",
                    short(expected_value),
                    short(instance)
                ))
                .at(doc.locate(&pointer))
                .hint(format!("write {}", short(expected_value))),
            ],
            ValidationErrorKind::Minimum { limit } => vec![
                diag(format!("{} is less than {limit}", short(instance))).at(doc.locate(&pointer)),
            ],
            ValidationErrorKind::Maximum { limit } => {
                // `0644`, meant as octal, read as 644.
                let text = doc.source_text(&pointer).unwrap_or_default();
                vec![
                    match super::rules::legacy_octal(text) {
                        Some(hint) => diag(format!(
                            "`{text}` is the decimal {} in YAML 1.2, greater than {limit}",
                            text.trim_start_matches(['+', '0'])
                        ))
                        .hint(hint),
                        None => diag(format!("{} is greater than {limit}", short(instance))),
                    }
                    .at(doc.locate(&pointer)),
                ]
            }
            ValidationErrorKind::MaxLength { limit } => vec![
                diag(format!(
                    "{} is longer than {limit} characters",
                    short(instance)
                ))
                .at(doc.locate(&pointer))
                .hint(format!("shorten it to at most {limit} characters")),
            ],
            ValidationErrorKind::MinLength { .. } => {
                vec![diag("must not be empty".to_owned()).at(doc.locate(&pointer))]
            }
            ValidationErrorKind::MinItems { limit } => vec![
                diag(format!(
                    "needs at least {limit} item{}",
                    if *limit == 1 { "" } else { "s" }
                ))
                .at(doc.locate(&pointer)),
            ],
            ValidationErrorKind::MinProperties { .. } => vec![
                diag("must not be empty".to_owned())
                    .at(doc.locate(&pointer))
                    .hint(subschema_keys_hint(subschema)),
            ],
            ValidationErrorKind::MaxItems { limit } => vec![
                diag(format!("has more than {limit} items"))
                    .at(doc.locate(&pointer))
                    .hint(format!("keep it to {limit} at most")),
            ],
            ValidationErrorKind::UniqueItems => {
                vec![diag("lists the same item twice".to_owned()).at(doc.locate(&pointer))]
            }
            ValidationErrorKind::Pattern { .. } => {
                let hint = subschema
                    .and_then(|s| s.get("patternErrorMessage"))
                    .and_then(Value::as_str)
                    .unwrap_or("see `trainc schema` for the accepted form");
                vec![
                    diag(format!("{} is not valid here", short(instance)))
                        .at(doc.locate(&pointer))
                        .hint(hint),
                ]
            }
            ValidationErrorKind::PropertyNames { error } => {
                // The inner error is about the key itself: point at the key.
                let key = error.instance().as_str().unwrap_or_default();
                let child = format!("{pointer}/{}", pointer_segment(key));
                let hint = self
                    .json()
                    .pointer(
                        error
                            .schema_path()
                            .as_str()
                            .rsplit_once('/')
                            .map_or("", |p| p.0),
                    )
                    .and_then(|s| s.get("patternErrorMessage"))
                    .and_then(Value::as_str)
                    .unwrap_or("rename this key");
                vec![
                    diag(format!("`{key}` is not a valid name here"))
                        .at(doc.locate_key(&child))
                        .hint(hint),
                ]
            }
            _ => vec![diag(e.to_string()).at(doc.locate(&pointer))],
        }
    }
}

fn subschema_keys_hint(subschema: Option<&Value>) -> String {
    let keys: Vec<&str> = subschema
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object)
        .map(|p| p.keys().map(String::as_str).collect())
        .unwrap_or_default();
    format!("add one of {}", list(keys.into_iter()))
}

fn list<'a>(items: impl Iterator<Item = &'a str>) -> String {
    items
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// A value as shown in a message: scalars in full (shortened when long),
/// collections by kind.
pub fn short(v: &Value) -> String {
    match v {
        Value::String(s) if s.chars().count() > 40 => {
            format!("`{}…`", s.chars().take(40).collect::<String>())
        }
        Value::String(s) => format!("`{s}`"),
        Value::Array(_) | Value::Object(_) => String::new(),
        other => format!("`{other}`"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Map;

    /// The lean schema, its tail cut off unread, is the whole one parsed
    /// and then cut: its Kubernetes definitions gone, every object that refers to
    /// one emptied, nothing else changed.
    #[test]
    fn the_lean_schema_is_the_whole_one_cut() {
        fn cut(v: &mut Value) -> usize {
            match v {
                Value::Object(o) => {
                    let refers = o
                        .get("$ref")
                        .and_then(Value::as_str)
                        .is_some_and(|r| r.starts_with("#/$defs/io.k8s."));
                    if refers {
                        o.clear();
                        1
                    } else {
                        o.values_mut().map(cut).sum()
                    }
                }
                Value::Array(a) => a.iter_mut().map(cut).sum(),
                _ => 0,
            }
        }
        let mut whole = parse(TRAINING_JOB_SCHEMA);
        let defs = whole["$defs"].as_object_mut().expect("$defs");
        let all = defs.len();
        defs.retain(|name, _| !name.starts_with("io.k8s."));
        assert!(defs.len() < all && !defs.is_empty());
        assert!(cut(&mut whole) > 0);
        assert_eq!(*TRAINING_JOB_LEAN.json(), whole);
        let text = serde_json::to_string(TRAINING_JOB_LEAN.json()).expect("json");
        assert!(!text.contains("io.k8s."));
    }

    /// The quick check reads each embedded schema from its layout, one
    /// definition at a time, and what it reads is the schema parsed whole:
    /// no definition lost, split wrongly or left uncut.
    #[test]
    fn the_quick_check_reads_each_schema_as_parsed_whole() {
        for (text, cut, whole) in [
            (TRAINING_JOB_SCHEMA, None, parse(TRAINING_JOB_SCHEMA)),
            (
                TRAINING_JOB_SCHEMA,
                Some(KUBERNETES),
                lean(TRAINING_JOB_SCHEMA),
            ),
            (PROJECT_SCHEMA, None, parse(PROJECT_SCHEMA)),
        ] {
            let lazy = Quick::lazy(text, cut).expect("laid out as Quick::lazy reads it");
            let defs = whole["$defs"].as_object().map_or(0, Map::len);
            assert!(defs > 0);
            assert_eq!(lazy.whole(), whole, "{cut:?}");
        }
        // Laid out otherwise, it says so rather than guess.
        for text in [
            "{\n  \"a\": 1,\n  \"$defs\": {\n    \"x\": 1,\n    \"x\": 2\n  }\n}\n",
            "{\n  \"a\": 1,\n  \"$defs\": {\n    \"x\\u0041\": 1\n  }\n}\n",
            "{\n  \"a\": 1,\n  \"$defs\": {\n    \"x\": 1\n  }\n",
            "{\n  \"a\": 1,\n  \"$defs\": {\n  \"x\": 1\n  }\n}\n",
            // `$defs` not last: what follows is no definition.
            "{\n  \"a\": 1,\n  \"$defs\": {\n    \"x\": {}\n  },\n  \"properties\": {\n    \"n\": {\"type\": \"integer\"}\n  }\n}\n",
            // An entry not closed by a comma.
            "{\n  \"a\": 1,\n  \"$defs\": {\n    \"x\": 1\n    \"y\": 2\n  }\n}\n",
        ] {
            assert!(Quick::lazy(text, None).is_none(), "{text}");
        }
        // A definition that is not JSON leaves what refers to it unsure.
        let text = "{\n  \"$ref\": \"#/$defs/x\",\n  \"$defs\": {\n    \"x\": {]\n  }\n}\n";
        let lazy = Quick::lazy(text, None).expect("laid out");
        assert_eq!(lazy.verdict(&Value::Null), Verdict::Unsure);
    }

    /// Every document among the fixtures and examples, mutated at every
    /// node in the ways definitions go wrong.
    fn documents() -> Vec<Value> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut docs = Vec::new();
        for dir in ["examples", "tests"] {
            for entry in walkdir::WalkDir::new(root.join(dir)).sort_by_file_name() {
                let Ok(entry) = entry else { continue };
                let path = entry.path();
                let yaml = path.extension().is_some_and(|e| e == "yaml" || e == "yml");
                if !yaml {
                    continue;
                }
                let name = path.display().to_string();
                let Ok(file) = crate::load::read(path, name) else {
                    continue;
                };
                for doc in crate::load::parse(&file).unwrap_or_default() {
                    if !docs.contains(&doc.value) {
                        docs.push(doc.value);
                    }
                }
            }
        }
        docs
    }

    /// Values that break the keywords the schemas use: types, lengths,
    /// patterns, ranges, enumerations, uniqueness.
    fn replacements() -> Vec<Value> {
        use serde_json::json;
        vec![
            json!(null),
            json!(true),
            json!(0),
            json!(-1),
            json!(1),
            json!(2.5),
            json!(3.0),
            json!(1e12),
            json!(u64::MAX),
            json!(65536),
            json!(""),
            json!("a"),
            json!("A b"),
            json!("-x-"),
            json!("x".repeat(300)),
            json!("\u{e9}t\u{e9}"),
            json!("a\rb"),
            json!("1.2"),
            json!("10.0.0.0/8"),
            json!([]),
            json!(["a", "a"]),
            json!([1, 1.0]),
            json!({}),
            json!({"bogus": 1}),
        ]
    }

    /// `doc` changed at one place each way: a node replaced, a key dropped
    /// or added, a list's first item repeated.
    fn mutations(doc: &Value) -> Vec<Value> {
        fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
            match v {
                Value::Object(m) => {
                    for (k, c) in m {
                        pointers(
                            c,
                            format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")),
                            out,
                        );
                    }
                }
                Value::Array(a) => {
                    for (i, c) in a.iter().enumerate() {
                        pointers(c, format!("{at}/{i}"), out);
                    }
                }
                _ => {}
            }
            out.push(at);
        }
        let mut at = Vec::new();
        pointers(doc, String::new(), &mut at);
        let mut out = Vec::new();
        for p in &at {
            let mut changed = |f: &dyn Fn(&mut Value)| {
                let mut d = doc.clone();
                if let Some(v) = d.pointer_mut(p) {
                    f(v);
                    out.push(d);
                }
            };
            for r in replacements() {
                if !p.is_empty() {
                    changed(&|v| *v = r.clone());
                }
            }
            match doc.pointer(p) {
                Some(Value::Object(m)) => {
                    for k in m.keys() {
                        changed(&|v| {
                            v.as_object_mut().map(|m| m.shift_remove(k));
                        });
                    }
                    changed(&|v| {
                        v.as_object_mut()
                            .map(|m| m.insert("bogus".into(), Value::Null));
                    });
                }
                Some(Value::Array(a)) if !a.is_empty() => changed(&|v| {
                    if let Some(a) = v.as_array_mut() {
                        a.push(a[0].clone());
                    }
                }),
                _ => {}
            }
        }
        out
    }

    /// The quick check is never wrong: what it calls valid the compiled
    /// validator finds valid, what it calls invalid it finds invalid. And
    /// it decides most documents, or it would save nothing.
    #[test]
    fn the_quick_check_agrees_with_the_compiled_validator() {
        let docs = documents();
        assert!(docs.len() > 50, "{} documents", docs.len());
        let counts = crate::par::map(&docs, |doc| {
            let mut seen = [0usize; 3];
            let schemas: &[&Schema] = match doc["kind"].as_str() {
                Some("Project") => &[&PROJECT],
                _ => &[&TRAINING_JOB_LEAN, &TRAINING_JOB],
            };
            for m in std::iter::once(doc.clone()).chain(mutations(doc)) {
                for schema in schemas {
                    let quick = schema.quick(&m);
                    let valid = schema.is_valid(&m);
                    seen[quick as usize] += 1;
                    assert!(
                        quick == Verdict::Unsure || (quick == Verdict::Valid) == valid,
                        "quick says {quick:?}, the validator {valid}, of {m:#}"
                    );
                }
            }
            seen
        });
        let seen = counts
            .iter()
            .fold([0; 3], |a, c| [a[0] + c[0], a[1] + c[1], a[2] + c[2]]);
        let [valid, invalid, unsure] = seen;
        assert!(
            valid > 1000 && invalid > 10 * unsure,
            "valid {valid}, invalid {invalid}, unsure {unsure}"
        );
    }

    /// Each pattern of the schemas matches as `jsonschema` matches it, on
    /// strings drawn from what names, images, paths and addresses are made
    /// of (a fixed seed, so every run checks the same strings).
    #[test]
    fn the_quick_check_matches_patterns_as_the_validator_does() {
        let mut all = TRAINING_JOB_LEAN.quick.patterns();
        all.extend(PROJECT.quick.patterns());
        all.sort_unstable();
        all.dedup();
        assert!(all.len() >= 10, "{all:?}");
        const ALPHABET: &[u8] = b"aAzZ09-._/:~ @\t\\$^[]{}()*+?|,=%#!\"'";
        let mut state: u64 = 0x853c_49e6_748f_ea9b;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut decided = [0usize; 2];
        for p in &all {
            let schema = serde_json::json!({ "pattern": p });
            let quick = Quick::new(schema.clone());
            let validator = jsonschema::draft202012::new(&schema).expect("pattern compiles");
            for i in 0..2_000 {
                // Every other string from the characters most patterns
                // accept, so that as many match as do not.
                let alphabet = if i % 2 == 0 { &ALPHABET[..9] } else { ALPHABET };
                let len = (next() % 24) as usize;
                let text: String = (0..len)
                    .map(|_| char::from(alphabet[(next() % alphabet.len() as u64) as usize]))
                    .collect();
                let value = Value::String(text);
                let verdict = quick.verdict(&value);
                if verdict != Verdict::Unsure {
                    decided[usize::from(verdict == Verdict::Valid)] += 1;
                    assert_eq!(
                        verdict == Verdict::Valid,
                        validator.is_valid(&value),
                        "{p} against {value}"
                    );
                }
            }
        }
        let [invalid, valid] = decided;
        assert!(
            valid > all.len() * 100 && invalid > all.len() * 500,
            "valid {valid}, invalid {invalid}"
        );
    }

    /// Every example's definitions and project file are decided without
    /// compiling: a keyword the quick check does not know, added to the
    /// schema, would send every build to the compiler again.
    #[test]
    fn the_examples_are_decided_without_compiling() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
        let mut decided = 0;
        for entry in walkdir::WalkDir::new(root) {
            let entry = entry.expect("examples");
            if entry.path().extension().is_none_or(|e| e != "yaml") {
                continue;
            }
            let name = entry.path().display().to_string();
            let file = crate::load::read(entry.path(), name.clone()).expect("example");
            for doc in crate::load::parse(&file).expect("example") {
                let schema = match doc.value["kind"].as_str() {
                    Some("Project") => &*PROJECT,
                    Some("TrainingJob") => training_job(&doc),
                    _ => continue,
                };
                if std::ptr::eq(schema, &*TRAINING_JOB) {
                    continue; // patches or an affinity: Kubernetes' schema
                }
                assert_eq!(schema.quick(&doc.value), Verdict::Valid, "{name}");
                decided += 1;
            }
        }
        assert!(decided >= 4, "{decided}");
    }

    #[test]
    fn embedded_schemas_are_valid_draft_2020_12() {
        for schema in [&*TRAINING_JOB, &*TRAINING_JOB_LEAN, &*PROJECT] {
            assert_eq!(
                schema.json()["$schema"],
                "https://json-schema.org/draft/2020-12/schema"
            );
            assert!(jsonschema::meta::is_valid(schema.json()));
        }
    }
}
