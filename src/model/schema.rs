//! The JSON Schemas the model mirrors, as shipped (`schema/`): their text,
//! the definition schema parsed once per process, and a reader of the
//! Kubernetes definitions in it ([`Kube`]), which validation and the
//! patches of `compile` both read.

use std::sync::LazyLock;

use serde_json::Value;

pub const TRAINING_JOB: &str = include_str!("../../schema/trainingjob.schema.json");
pub const PROJECT: &str = include_str!("../../schema/project.schema.json");

/// Panics only if an embedded schema is broken, which the test suite rules
/// out; it never depends on user input.
#[allow(clippy::expect_used)]
static TRAINING_JOB_JSON: LazyLock<Value> =
    LazyLock::new(|| serde_json::from_str(TRAINING_JOB).expect("embedded schema is JSON"));

/// The definition schema, parsed whole (on first use).
pub fn training_job() -> &'static Value {
    &TRAINING_JOB_JSON
}

/// A place in the Kubernetes definitions of the definition schema: what a
/// pod-template field is, for checking patches field by field and for
/// merging them as Kubernetes does (the lists merged item by item carry
/// Kubernetes' `x-kubernetes-patch-strategy` and `-merge-key`).
#[derive(Debug, Clone, Copy)]
pub struct Kube(&'static Value);

/// What a field name is in an object of the Kubernetes schema.
#[derive(Debug, Clone, Copy)]
pub enum Field {
    Known(Kube),
    /// Not a field of this object.
    Unknown,
    /// Not described: any value (a free-form object, or below a scalar).
    Any,
}

/// How a strategic patch merges a list (Kubernetes' patch strategy).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListMerge<'a> {
    /// The patch replaces the list (the default).
    Replace,
    /// Items with the same value of the key merge; others are added.
    ByKey(&'a str),
    /// A set of scalars: the patch's are added.
    Set,
}

impl Kube {
    /// A definition by its short name: `Container`, `PodTemplateSpec`,
    /// `Affinity` (core/v1), `ObjectMeta` (meta/v1).
    pub fn def(name: &str) -> Option<Self> {
        let defs = &training_job()["$defs"];
        [
            "io.k8s.api.core.v1.",
            "io.k8s.apimachinery.pkg.apis.meta.v1.",
        ]
        .iter()
        .find_map(|p| defs.get(format!("{p}{name}")))
        .map(Self)
    }

    /// The pod template, which patches change.
    pub fn pod_template() -> Option<Self> {
        Self::def("PodTemplateSpec")
    }

    /// The schema itself, `$ref`s followed.
    fn resolved(self) -> &'static Value {
        let mut v = self.0;
        // A bound keeps a cycle of references from looping.
        for _ in 0..8 {
            let Some(r) = v.get("$ref").and_then(Value::as_str) else {
                break;
            };
            match r.strip_prefix('#').and_then(|p| training_job().pointer(p)) {
                Some(t) => v = t,
                None => break,
            }
        }
        v
    }

    /// The definition's short name (`Container`), for messages.
    pub fn name(self) -> Option<&'static str> {
        let target = self.resolved();
        training_job()["$defs"]
            .as_object()?
            .iter()
            .find(|(_, v)| std::ptr::eq(*v, target))
            .and_then(|(k, _)| k.rsplit('.').next())
    }

    /// The field `name` of this object, or the value type of this map.
    pub fn field(self, name: &str) -> Field {
        let s = self.resolved();
        if let Some(p) = s.get("properties").and_then(|p| p.get(name)) {
            return Field::Known(Self(p));
        }
        match s.get("additionalProperties") {
            Some(v @ Value::Object(_)) => Field::Known(Self(v)),
            Some(Value::Bool(false)) => Field::Unknown,
            _ => Field::Any,
        }
    }

    /// The fields an object declares, for "did you mean".
    pub fn field_names(self) -> Vec<&'static str> {
        self.resolved()
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.keys().map(String::as_str).collect())
            .unwrap_or_default()
    }

    /// The fields Kubernetes requires of this object (which a patch may
    /// leave out, but not the patched template).
    pub fn required(self) -> Vec<&'static str> {
        self.resolved()
            .get("x-trainc-required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    }

    /// Whether this is an object with named fields (not a map).
    pub fn is_object(self) -> bool {
        self.resolved().get("properties").is_some()
    }

    /// Whether values here may be lists.
    pub fn is_list(self) -> bool {
        self.types().contains(&"array")
    }

    /// Whether values here are strings, numbers or booleans only: nothing
    /// is below them.
    pub fn is_scalar(self) -> bool {
        let types = self.types();
        !types.is_empty() && types.iter().all(|t| !matches!(*t, "object" | "array"))
    }

    /// The JSON types allowed here (empty: any).
    pub fn types(self) -> Vec<&'static str> {
        match self.resolved().get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        }
    }

    /// The items of this list.
    pub fn items(self) -> Option<Self> {
        self.resolved().get("items").map(Self)
    }

    /// How a strategic patch merges this list field.
    pub fn list_merge(self) -> ListMerge<'static> {
        let strategy = self
            .0
            .get("x-kubernetes-patch-strategy")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !strategy.split(',').any(|s| s == "merge") {
            return ListMerge::Replace;
        }
        match self
            .0
            .get("x-kubernetes-patch-merge-key")
            .and_then(Value::as_str)
        {
            Some(key) => ListMerge::ByKey(key),
            None => ListMerge::Set,
        }
    }
}
