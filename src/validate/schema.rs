//! JSON Schema validation of a raw document, with findings mapped back to the
//! YAML source.

use std::sync::{LazyLock, OnceLock};

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::{ValidationError, Validator};
use serde_json::Value;

use crate::diagnostic::Diagnostic;
use crate::load::Document;
use crate::source::pointer_segment;
use crate::suggest::did_you_mean;

/// The project-file schema.
pub use crate::model::schema::PROJECT as PROJECT_SCHEMA;
/// The definition schema, exactly as shipped in `schema/`; `trainc schema`
/// prints these bytes.
pub use crate::model::schema::TRAINING_JOB as TRAINING_JOB_SCHEMA;

/// A schema: its JSON parsed whole (the error mapper reads it for field
/// names, "did you mean" and `patternErrorMessage` hints) and its validator,
/// each made on first use, once per process.
pub struct Schema {
    json: fn() -> &'static Value,
    validator: OnceLock<Validator>,
}

/// The definition schema, Kubernetes' pod template included: what a
/// definition with patches or an affinity is checked against.
pub static TRAINING_JOB: LazyLock<Schema> =
    LazyLock::new(|| Schema::new(crate::model::schema::training_job));
/// The definition schema without the Kubernetes definitions (`io.k8s.…`),
/// for every other definition: the pod template is most of the schema and
/// of the time it takes to compile (a few milliseconds at every start).
static TRAINING_JOB_LEAN: LazyLock<Schema> = LazyLock::new(|| Schema::new(|| &LEAN_JSON));
static LEAN_JSON: LazyLock<Value> = LazyLock::new(|| lean(TRAINING_JOB_SCHEMA));
pub static PROJECT: LazyLock<Schema> = LazyLock::new(|| Schema::new(|| &PROJECT_JSON));
static PROJECT_JSON: LazyLock<Value> = LazyLock::new(|| parse(PROJECT_SCHEMA));

/// Compiles the validator most definitions are checked against, so that
/// it can be done on a spare thread while the definitions load, rather
/// than by the first document's check while the others wait for it.
pub fn warm() {
    TRAINING_JOB_LEAN.validator();
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
    let tail = format!(",\n    \"{KUBERNETES}");
    let mut schema = match memchr::memmem::find(text.as_bytes(), tail.as_bytes()) {
        Some(end) => parse(&format!("{}\n  }}\n}}\n", &text[..end])),
        None => parse(text),
    };
    cut(&mut schema, &format!("#/$defs/{KUBERNETES}"));
    schema
}

/// Empties every object of `schema` whose `$ref` begins with `prefix`, so
/// that it accepts anything.
fn cut(schema: &mut Value, prefix: &str) {
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

/// Serves the project schema's references into the definition schema (the
/// target names, `$defs/target`) from the binary; nothing is fetched. The
/// lean definition schema holds every definition they can name.
struct Embedded;

impl jsonschema::Retrieve for Embedded {
    fn retrieve(
        &self,
        uri: &jsonschema::Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        if LEAN_JSON.get("$id").and_then(Value::as_str) == Some(uri.as_str()) {
            Ok(LEAN_JSON.clone())
        } else {
            Err(format!("{} is not one of trainc's schemas", uri.as_str()).into())
        }
    }
}

impl Schema {
    /// The schema that `whole` gives, parsed on first use.
    fn new(whole: fn() -> &'static Value) -> Self {
        Self {
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
            jsonschema::draft202012::options()
                .with_retriever(Embedded)
                .build(self.json())
                .expect("embedded schema compiles")
        })
    }

    /// Every schema violation of `doc`, located in its source file.
    pub fn check(&self, doc: &Document) -> Vec<Diagnostic> {
        // Most documents are valid: told at the first error, not collecting them.
        if self.validator().is_valid(&doc.value) {
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

    /// Where else a field named `key` belongs ([`elsewhere_in`]).
    fn elsewhere(&self, key: &str) -> Option<String> {
        elsewhere_in(self.json(), key)
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
                            None => match self.elsewhere(key) {
                                Some(at) if at.contains(".roles.worker.") => {
                                    format!("`{key}` belongs under a role, e.g. `{at}`")
                                }
                                Some(at) => format!("`{key}` belongs at `{at}`"),
                                None if known.is_empty() => "remove this field".to_owned(),
                                None => {
                                    format!("expected one of {}", list(known.iter().copied()))
                                }
                            },
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
                let shown = short(instance);
                let mut d = diag(format!(
                    "expected {expected}, found {}{}{shown}",
                    type_name(instance),
                    if shown.is_empty() { "" } else { " " }
                ))
                .at(doc.locate(&pointer));
                if expected == "integer" && instance.is_number() {
                    d = d.hint("use a whole number");
                } else if expected.contains("string") && instance.is_null() {
                    d = d.hint("give a value or remove the field");
                } else if pointer.ends_with("/env") && instance.is_array() {
                    d = d.hint(env_list_hint(instance));
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

/// How a Kubernetes `env` list (`- {name: A, value: x}`) is written here: a
/// mapping, with the list's first plain variable as the example.
fn env_list_hint(list: &Value) -> String {
    let first = list.as_array().and_then(|items| {
        items
            .iter()
            .find_map(|i| Some((i.get("name")?.as_str()?, i.get("value")?.as_str()?)))
    });
    let example = match first {
        Some((name, value)) => format!("`env: {{{name}: {value}}}`"),
        None => "`env: {NCCL_DEBUG: INFO}`".to_owned(),
    };
    format!(
        "variables are a mapping of name to value, not Kubernetes' list of `{{name, value}}`: {example}; a Secret's key is `NAME: {{secretKeyRef: {{name: …, key: …}}}}`"
    )
}

/// Where else the schema declares a field named `key`, as a dotted path
/// from the document's root: a field indented under the wrong parent
/// (`resources` under `spec`, for a role's). A role's place is preferred
/// (`worker`'s), then the shortest.
fn elsewhere_in(schema: &Value, key: &str) -> Option<String> {
    fn walk(
        root: &Value,
        node: &Value,
        path: &str,
        key: &str,
        depth: usize,
        found: &mut Vec<String>,
    ) {
        if depth > 8 {
            return;
        }
        let node = match node.get("$ref").and_then(Value::as_str) {
            Some(r) => match r.strip_prefix('#').and_then(|p| root.pointer(p)) {
                Some(n) => n,
                None => return,
            },
            None => node,
        };
        if let Some(props) = node.get("properties").and_then(Value::as_object) {
            for (name, sub) in props {
                let p = if path.is_empty() {
                    name.clone()
                } else {
                    format!("{path}.{name}")
                };
                if name == key {
                    found.push(p.clone());
                }
                // Patches are pod templates of Kubernetes', not trainc's.
                if name != "patches" {
                    walk(root, sub, &p, key, depth + 1, found);
                }
            }
        }
        for k in ["allOf", "anyOf", "oneOf"] {
            for sub in node.get(k).and_then(Value::as_array).into_iter().flatten() {
                walk(root, sub, path, key, depth + 1, found);
            }
        }
        for k in ["then", "else"] {
            if let Some(sub) = node.get(k) {
                walk(root, sub, path, key, depth + 1, found);
            }
        }
        if let Some(items) = node.get("items") {
            walk(root, items, &format!("{path}[]"), key, depth + 1, found);
        }
    }
    let mut found = Vec::new();
    walk(schema, schema, "", key, 0, &mut found);
    found.sort_by_key(|p| {
        (
            !p.contains(".roles.worker."),
            p.matches('.').count(),
            p.clone(),
        )
    });
    found.dedup();
    found.into_iter().next()
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
