//! Stage 3 (compile): strategic-merge patches of a pod template, merged as
//! Kubernetes merges them, and the rules a patch must follow (which
//! validation reports before anything is merged).
//!
//! Maps merge key by key and `null` deletes a key. A list merges item by
//! item where Kubernetes gives it a merge key (`containers` by `name`,
//! `volumeMounts` by `mountPath`, …: [`Kube::list_merge`]); a list of
//! scalars with the `merge` strategy is a set; every other list is replaced.
//! Directives: `$patch: replace|delete|merge` on a map or a list item,
//! `$retainKeys`, `$setElementOrder/<list>` and
//! `$deleteFromPrimitiveList/<list>`.
//!
//! Merged lists are ordered as the API server orders them (and Kustomize,
//! which tests/patches.rs compares with): the patch's items in its order,
//! the others where they were; so an item the list lacked comes first.
//! New values are merged into nothing, so directives inside them apply too.

use serde_json::{Map, Value};

use crate::model::schema::{Field, Kube, ListMerge};
use crate::suggest::did_you_mean;

pub const PATCH: &str = "$patch";
pub const RETAIN_KEYS: &str = "$retainKeys";
pub const SET_ELEMENT_ORDER: &str = "$setElementOrder/";
pub const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList/";

/// A problem with a patch: where in it (a JSON pointer relative to the
/// patch), what, and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub at: String,
    pub message: String,
    pub hint: String,
}

impl Problem {
    fn new(at: &str, message: impl Into<String>, hint: impl Into<String>) -> Self {
        Self {
            at: at.to_owned(),
            message: message.into(),
            hint: hint.into(),
        }
    }
}

fn child(at: &str, key: &str) -> String {
    format!("{at}/{}", crate::source::pointer_segment(key))
}

fn field_schema(schema: Option<Kube>, key: &str) -> Option<Kube> {
    match schema?.field(key) {
        Field::Known(k) => Some(k),
        Field::Unknown | Field::Any => None,
    }
}

fn list_merge(schema: Option<Kube>) -> ListMerge<'static> {
    schema.map_or(ListMerge::Replace, Kube::list_merge)
}

/// Merges `patch` into `target`, the pod template as JSON.
pub fn merge(target: &mut Value, patch: &Value, schema: Option<Kube>) -> Result<(), Problem> {
    let merged = merge_value(Some(std::mem::take(target)), patch, schema, "")?;
    *target = merged.unwrap_or_else(|| Value::Object(Map::new()));
    Ok(())
}

/// The value `patch` makes of `orig` (a field's value, or nothing); `None`
/// deletes it.
fn merge_value(
    orig: Option<Value>,
    patch: &Value,
    schema: Option<Kube>,
    at: &str,
) -> Result<Option<Value>, Problem> {
    match patch {
        Value::Null => Ok(None),
        Value::Object(p) => {
            match p.get(PATCH).and_then(Value::as_str) {
                Some("delete") => return Ok(None),
                Some("replace") => {
                    let mut rest = p.clone();
                    rest.shift_remove(PATCH);
                    return merge_value(None, &Value::Object(rest), schema, at);
                }
                _ => {}
            }
            let orig = match orig {
                Some(Value::Object(o)) => o,
                _ => Map::new(),
            };
            merge_map(orig, p, schema, at).map(|m| Some(Value::Object(m)))
        }
        Value::Array(items) => {
            let how = list_merge(schema);
            let orig = match orig {
                Some(Value::Array(o)) if how != ListMerge::Replace => o,
                _ => Vec::new(),
            };
            let items_schema = schema.and_then(Kube::items);
            merge_list(orig, items, how, items_schema, at).map(|l| Some(Value::Array(l)))
        }
        scalar => Ok(Some(scalar.clone())),
    }
}

fn merge_map(
    mut orig: Map<String, Value>,
    patch: &Map<String, Value>,
    schema: Option<Kube>,
    at: &str,
) -> Result<Map<String, Value>, Problem> {
    if let Some(keep) = patch.get(RETAIN_KEYS) {
        let keep: Vec<&str> = keep
            .as_array()
            .map(|k| k.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if let Some(k) = patch
            .iter()
            .find(|(k, v)| !k.starts_with('$') && !v.is_null() && !keep.contains(&k.as_str()))
            .map(|(k, _)| k)
        {
            return Err(retain_problem(at, k));
        }
        orig.retain(|k, _| keep.contains(&k.as_str()));
    }
    for (key, values) in patch {
        let Some(list) = key.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) else {
            continue;
        };
        if let (Some(Value::Array(items)), Some(gone)) = (orig.get_mut(list), values.as_array()) {
            items.retain(|v| !gone.contains(v));
        }
    }
    for (key, value) in patch {
        if key.starts_with('$') {
            continue;
        }
        let before = orig.get(key).cloned();
        let order = patch.get(&format!("{SET_ELEMENT_ORDER}{key}"));
        let schema = field_schema(schema, key);
        let merged = merge_value(before.clone(), value, schema, &child(at, key))?;
        match merged {
            None => {
                orig.shift_remove(key);
            }
            Some(mut v) => {
                if let (Some(Value::Array(order)), Value::Array(items)) = (order, &mut v) {
                    let before = match &before {
                        Some(Value::Array(b)) => b.as_slice(),
                        _ => &[],
                    };
                    reorder(items, before, order, list_merge(schema));
                }
                orig.insert(key.clone(), v);
            }
        }
    }
    // An order for a list the patch does not change reorders it as it is.
    for (key, order) in patch {
        let Some(list) = key.strip_prefix(SET_ELEMENT_ORDER) else {
            continue;
        };
        if patch.contains_key(list) {
            continue;
        }
        let how = list_merge(field_schema(schema, list));
        if let (Some(Value::Array(items)), Some(order)) = (orig.get_mut(list), order.as_array()) {
            let before = items.clone();
            reorder(items, &before, order, how);
        }
    }
    Ok(orig)
}

fn merge_list(
    mut orig: Vec<Value>,
    patch: &[Value],
    how: ListMerge,
    items_schema: Option<Kube>,
    at: &str,
) -> Result<Vec<Value>, Problem> {
    let key = match how {
        ListMerge::Replace => {
            // Replaced: the patch's items, each merged into nothing.
            return patch
                .iter()
                .enumerate()
                .filter_map(|(i, v)| {
                    merge_value(None, v, items_schema, &format!("{at}/{i}")).transpose()
                })
                .collect();
        }
        ListMerge::Set => {
            let before = orig.clone();
            for v in patch {
                if !orig.contains(v) {
                    orig.push(v.clone());
                }
            }
            reorder(&mut orig, &before, patch, how);
            return Ok(orig);
        }
        ListMerge::ByKey(key) => key,
    };
    let directive = |v: &Value| v.get(PATCH).and_then(Value::as_str).map(str::to_owned);
    // Deletions and a replacement first: the rest merges into what is left.
    if patch
        .iter()
        .any(|v| directive(v).as_deref() == Some("replace"))
    {
        orig.clear();
    }
    let mut merging = Vec::new();
    for (i, item) in patch.iter().enumerate() {
        let item_at = format!("{at}/{i}");
        let Some(fields) = item.as_object() else {
            return Err(Problem::new(
                &item_at,
                format!("expected a mapping with `{key}`, the key this list is merged by"),
                "",
            ));
        };
        let d = directive(item);
        if d.as_deref() == Some("replace") && !fields.contains_key(key) {
            continue;
        }
        let Some(k) = fields.get(key) else {
            return Err(missing_key(&item_at, key));
        };
        if d.as_deref() == Some("delete") {
            orig.retain(|o| o.get(key) != Some(k));
        } else {
            merging.push((i, item, k));
        }
    }
    let before = orig.clone();
    for (i, item, k) in &merging {
        let item_at = format!("{at}/{i}");
        match orig.iter().position(|o| o.get(key) == Some(*k)) {
            Some(j) => {
                let o = std::mem::take(&mut orig[j]);
                match merge_value(Some(o), item, items_schema, &item_at)? {
                    Some(v) => orig[j] = v,
                    None => {
                        orig.remove(j);
                    }
                }
            }
            None => {
                if let Some(v) = merge_value(None, item, items_schema, &item_at)? {
                    orig.push(v);
                }
            }
        }
    }
    let order: Vec<Value> = merging.iter().map(|(_, item, _)| (*item).clone()).collect();
    reorder(&mut orig, &before, &order, how);
    Ok(orig)
}

/// Puts a merged list in order, as Kubernetes does: the items `order`
/// names (the patch's, or `$setElementOrder`'s) in its order, and the
/// others where they were relative to them in `before`, the list before
/// the patch. An item the list did not have comes before the items of
/// `before` that follow it.
fn reorder(items: &mut Vec<Value>, before: &[Value], order: &[Value], how: ListMerge) {
    let id = |v: &Value| match how {
        ListMerge::ByKey(key) => v.get(key).cloned(),
        ListMerge::Replace | ListMerge::Set => Some(v.clone()),
    };
    let rank = |v: &Value, list: &[Value]| {
        let i = id(v)?;
        list.iter().position(|o| id(o).as_ref() == Some(&i))
    };
    let (mut listed, rest): (Vec<Value>, Vec<Value>) = std::mem::take(items)
        .into_iter()
        .partition(|v| rank(v, order).is_some());
    listed.sort_by_key(|v| rank(v, order));
    let (mut l, mut r) = (rest.into_iter().peekable(), listed.into_iter().peekable());
    loop {
        let take_left = match (l.peek(), r.peek()) {
            (Some(a), Some(b)) => matches!(
                (rank(a, before), rank(b, before)),
                (Some(x), Some(y)) if x < y
            ),
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        let next = if take_left { l.next() } else { r.next() };
        items.extend(next);
    }
}

fn retain_problem(at: &str, key: &str) -> Problem {
    Problem::new(
        &child(at, RETAIN_KEYS),
        format!("`{RETAIN_KEYS}` leaves out `{key}`, which this patch sets"),
        format!("add `{key}` to the list: every field the patch sets is kept"),
    )
}

fn missing_key(at: &str, key: &str) -> Problem {
    Problem::new(
        at,
        format!("this item has no `{key}`, the key its list is merged by"),
        format!(
            "give the `{key}` of the item to change or add (`$patch: delete` with it deletes the item)"
        ),
    )
}

/// Every rule of a strategic patch that the schema cannot say, checked
/// before merging: directives and their values, the merge keys of list
/// items. Unknown fields and wrong types are the schema's.
pub fn problems(patch: &Value, schema: Option<Kube>) -> Vec<Problem> {
    let mut out = Vec::new();
    if patch.get(PATCH).and_then(Value::as_str) == Some("delete") {
        out.push(Problem::new(
            &child("", PATCH),
            "a patch cannot delete the pod template",
            "delete the fields to remove (`field: null`)",
        ));
    }
    check(patch, schema, "", &mut out);
    out
}

fn check(v: &Value, schema: Option<Kube>, at: &str, out: &mut Vec<Problem>) {
    match v {
        Value::Object(o) => {
            for (key, value) in o {
                if key.starts_with('$') {
                    directive(o, key, value, schema, at, out);
                } else {
                    check(value, field_schema(schema, key), &child(at, key), out);
                }
            }
        }
        Value::Array(items) => check_list(items, schema, at, out),
        _ => {}
    }
}

fn check_list(items: &[Value], schema: Option<Kube>, at: &str, out: &mut Vec<Problem>) {
    let items_schema = schema.and_then(Kube::items);
    let how = list_merge(schema);
    for (i, item) in items.iter().enumerate() {
        let item_at = format!("{at}/{i}");
        let d = item.get(PATCH);
        match (how, d) {
            (ListMerge::ByKey(key), d) => {
                let d = d.and_then(Value::as_str);
                if item.is_object() && item.get(key).is_none() && d != Some("replace") {
                    out.push(missing_key(&item_at, key));
                }
            }
            (_, Some(_)) => {
                let field = at.rsplit('/').next().unwrap_or_default();
                out.push(Problem::new(
                    &child(&item_at, PATCH),
                    format!("a strategic patch replaces `{field}` as a whole, so its items take no `{PATCH}`"),
                    "list every item the field should have; `$patch` items apply to lists merged by key, such as `containers`, `env` and `volumes`",
                ));
            }
            _ => {}
        }
        // A list item's own `$patch` is the list's business, checked above.
        if let Value::Object(o) = item {
            for (key, value) in o {
                if key == PATCH {
                    directive_value(value, &child(&item_at, key), out);
                } else if key.starts_with('$') {
                    directive(o, key, value, items_schema, &item_at, out);
                } else {
                    check(
                        value,
                        field_schema(items_schema, key),
                        &child(&item_at, key),
                        out,
                    );
                }
            }
        }
    }
}

fn directive_value(value: &Value, at: &str, out: &mut Vec<Problem>) {
    if !matches!(value.as_str(), Some("replace" | "delete" | "merge")) {
        out.push(Problem::new(
            at,
            format!("`{PATCH}` takes `replace`, `delete` or `merge`"),
            "`replace` takes this value as it is, `delete` removes it",
        ));
    }
}

/// A directive key of the map `o` at `at` (`schema` is the map's).
fn directive(
    o: &Map<String, Value>,
    key: &str,
    value: &Value,
    schema: Option<Kube>,
    at: &str,
    out: &mut Vec<Problem>,
) {
    let here = child(at, key);
    if key == PATCH {
        directive_value(value, &here, out);
        return;
    }
    if key == RETAIN_KEYS {
        let Some(keep) = value.as_array() else {
            out.push(Problem::new(
                &here,
                format!("`{RETAIN_KEYS}` takes a list of field names"),
                "",
            ));
            return;
        };
        for (i, k) in keep.iter().enumerate() {
            let name = k.as_str().unwrap_or_default();
            if let Some(s) = schema
                && matches!(s.field(name), Field::Unknown)
            {
                out.push(unknown_field(&format!("{here}/{i}"), name, s));
            }
        }
        let kept: Vec<&str> = keep.iter().filter_map(Value::as_str).collect();
        if let Some(k) = o
            .iter()
            .find(|(k, v)| !k.starts_with('$') && !v.is_null() && !kept.contains(&k.as_str()))
            .map(|(k, _)| k)
        {
            out.push(retain_problem(at, k));
        }
        return;
    }
    let (prefix, list) = match key
        .strip_prefix(SET_ELEMENT_ORDER)
        .map(|l| (SET_ELEMENT_ORDER, l))
        .or_else(|| {
            key.strip_prefix(DELETE_FROM_PRIMITIVE_LIST)
                .map(|l| (DELETE_FROM_PRIMITIVE_LIST, l))
        }) {
        Some(found) => found,
        None => {
            let known = [
                PATCH,
                RETAIN_KEYS,
                SET_ELEMENT_ORDER,
                DELETE_FROM_PRIMITIVE_LIST,
            ];
            let hint = match did_you_mean(key, known.into_iter()) {
                Some(s) => format!("did you mean `{s}`?"),
                None => format!(
                    "directives are `{PATCH}`, `{RETAIN_KEYS}`, `{SET_ELEMENT_ORDER}<list>` and `{DELETE_FROM_PRIMITIVE_LIST}<list>`"
                ),
            };
            out.push(Problem::new(
                &here,
                format!("unknown directive `{key}`"),
                hint,
            ));
            return;
        }
    };
    let field = match schema.map(|s| (s, s.field(list))) {
        Some((s, Field::Unknown)) => {
            out.push(unknown_field(&here, list, s));
            return;
        }
        Some((_, Field::Known(f))) if f.is_list() => Some(f),
        Some((_, Field::Known(_))) => {
            out.push(Problem::new(
                &here,
                format!("`{list}` is not a list"),
                format!("`{prefix}` names a list of this object"),
            ));
            return;
        }
        _ => None,
    };
    let Some(values) = value.as_array() else {
        out.push(Problem::new(&here, format!("`{key}` takes a list"), ""));
        return;
    };
    let how = list_merge(field);
    if prefix == DELETE_FROM_PRIMITIVE_LIST {
        if field.is_some() && how != ListMerge::Set {
            out.push(Problem::new(
                &here,
                format!("`{list}` is replaced as a whole by a strategic patch"),
                format!("`{DELETE_FROM_PRIMITIVE_LIST}` applies to lists merged as sets, such as `finalizers`; give `{list}` in full instead"),
            ));
        }
        return;
    }
    // `$setElementOrder`: the items of a list merged by key are given by
    // their key, and every item the patch has in the list is ordered.
    let id = |v: &Value| match how {
        ListMerge::ByKey(k) => v.get(k).cloned(),
        ListMerge::Replace | ListMerge::Set => Some(v.clone()),
    };
    if let ListMerge::ByKey(k) = how {
        for (i, v) in values.iter().enumerate() {
            if v.get(k).is_none() {
                out.push(Problem::new(
                    &format!("{here}/{i}"),
                    format!("this item has no `{k}`, the key `{list}` is merged by"),
                    format!("name each item by its `{k}` alone"),
                ));
            }
        }
    }
    let ordered: Vec<Value> = values.iter().filter_map(id).collect();
    if let Some(Value::Array(items)) = o.get(list) {
        for (i, item) in items.iter().enumerate() {
            let deleted = item.get(PATCH).and_then(Value::as_str) == Some("delete");
            if !deleted && id(item).is_some_and(|x| !ordered.contains(&x)) {
                out.push(Problem::new(
                    &format!("{}/{i}", child(at, list)),
                    format!("`{key}` does not list this item"),
                    "the order lists every item the patch has in the list",
                ));
            }
        }
    }
}

/// An unknown field of the Kubernetes object `schema`.
pub fn unknown_field(at: &str, name: &str, schema: Kube) -> Problem {
    let known = schema.field_names();
    let what = schema
        .name()
        .map_or_else(|| "this object".to_owned(), |n| format!("a {n}"));
    let hint = match did_you_mean(name, known.iter().copied()) {
        Some(s) => format!("did you mean `{s}`?"),
        None => format!(
            "{what} has {}",
            known
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    Problem::new(at, format!("{what} has no field `{name}`"), hint)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn merged(orig: Value, patch: Value) -> Value {
        let mut t = orig;
        merge(&mut t, &patch, Kube::pod_template()).expect("merges");
        t
    }

    fn pod(spec: Value) -> Value {
        json!({"metadata": {"labels": {"a": "1"}}, "spec": spec})
    }

    #[test]
    fn maps_merge_and_null_deletes() {
        let t = merged(
            json!({"metadata": {"labels": {"a": "1", "b": "2"}}}),
            json!({"metadata": {"labels": {"b": null, "c": "3"}, "annotations": {"x": "y"}}}),
        );
        assert_eq!(
            t,
            json!({"metadata": {"labels": {"a": "1", "c": "3"}, "annotations": {"x": "y"}}})
        );
    }

    #[test]
    fn lists_with_a_merge_key_merge_item_by_item_in_the_patch_order() {
        let t = merged(
            pod(json!({"containers": [
                {"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]},
                {"name": "b", "image": "b:1"}
            ]})),
            json!({"spec": {"containers": [
                {"name": "c", "image": "c:1"},
                {"name": "a", "image": "a:2", "env": [{"name": "Z", "value": "3"}, {"name": "X", "value": "9"}]}
            ]}}),
        );
        // As the API server orders them: the patch's items in its order,
        // the others after the patch's items they followed.
        assert_eq!(
            t["spec"]["containers"],
            json!([
                {"name": "c", "image": "c:1"},
                {"name": "a", "image": "a:2", "env": [{"name": "Z", "value": "3"}, {"name": "X", "value": "9"}, {"name": "Y", "value": "2"}]},
                {"name": "b", "image": "b:1"}
            ])
        );
        // An item added alone comes first.
        let t = merged(
            pod(json!({"containers": [{"name": "a"}, {"name": "b"}]})),
            json!({"spec": {"containers": [{"name": "c"}]}}),
        );
        assert_eq!(
            t["spec"]["containers"],
            json!([{"name": "c"}, {"name": "a"}, {"name": "b"}])
        );
    }

    #[test]
    fn other_lists_are_replaced() {
        let t = merged(
            pod(
                json!({"containers": [{"name": "a", "args": ["1", "2"]}], "tolerations": [{"key": "k"}]}),
            ),
            json!({"spec": {"containers": [{"name": "a", "args": ["3"]}], "tolerations": [{"key": "j"}]}}),
        );
        assert_eq!(t["spec"]["containers"][0]["args"], json!(["3"]));
        assert_eq!(t["spec"]["tolerations"], json!([{"key": "j"}]));
    }

    #[test]
    fn patch_directives_on_maps_and_items() {
        let t = merged(
            pod(json!({
                "containers": [{"name": "a", "resources": {"limits": {"cpu": "1"}, "requests": {"cpu": "1"}}}, {"name": "b"}],
                "volumes": [{"name": "v", "emptyDir": {}}, {"name": "w", "emptyDir": {}}],
                "securityContext": {"runAsUser": 1}
            })),
            json!({"spec": {
                "containers": [
                    {"name": "a", "resources": {"$patch": "replace", "limits": {"memory": "1Gi"}}},
                    {"name": "b", "$patch": "delete"}
                ],
                "volumes": [{"name": "w", "$patch": "delete"}],
                "securityContext": {"$patch": "delete"}
            }}),
        );
        assert_eq!(
            t["spec"],
            json!({
                "containers": [{"name": "a", "resources": {"limits": {"memory": "1Gi"}}}],
                "volumes": [{"name": "v", "emptyDir": {}}]
            })
        );
    }

    #[test]
    fn a_replace_item_replaces_the_list() {
        let t = merged(
            pod(json!({"volumes": [{"name": "v", "emptyDir": {}}]})),
            json!({"spec": {"volumes": [{"$patch": "replace"}, {"name": "w", "emptyDir": {}}]}}),
        );
        assert_eq!(t["spec"]["volumes"], json!([{"name": "w", "emptyDir": {}}]));
    }

    #[test]
    fn a_set_adds_what_it_lacks_and_deletes_on_request() {
        let t = merged(
            json!({"metadata": {"finalizers": ["a", "b", "c"]}}),
            json!({"metadata": {"finalizers": ["d", "a"], "$deleteFromPrimitiveList/finalizers": ["b"]}}),
        );
        // The patch's in its order, `c` after `a` as it was.
        assert_eq!(t["metadata"]["finalizers"], json!(["d", "a", "c"]));
    }

    #[test]
    fn retain_keys_clears_the_other_fields() {
        let t = merged(
            pod(json!({"volumes": [{"name": "v", "emptyDir": {}}]})),
            json!({"spec": {"volumes": [{"name": "v", "$retainKeys": ["name", "configMap"], "configMap": {"name": "c"}}]}}),
        );
        assert_eq!(
            t["spec"]["volumes"],
            json!([{"name": "v", "configMap": {"name": "c"}}])
        );
        let mut t = pod(json!({}));
        let e = merge(
            &mut t,
            &json!({"spec": {"$retainKeys": ["volumes"], "hostname": "h"}}),
            Kube::pod_template(),
        )
        .unwrap_err();
        assert_eq!(e.at, "/spec/$retainKeys");
    }

    #[test]
    fn set_element_order_orders_the_items_it_lists() {
        let t = merged(
            pod(json!({"containers": [{"name": "a"}, {"name": "b"}, {"name": "c"}]})),
            json!({"spec": {
                "$setElementOrder/containers": [{"name": "c"}, {"name": "a"}],
                "containers": [{"name": "c", "image": "x"}]
            }}),
        );
        // `b`, unlisted, stays before `c`, as it was.
        assert_eq!(
            t["spec"]["containers"],
            json!([{"name": "b"}, {"name": "c", "image": "x"}, {"name": "a"}])
        );
        let t = merged(
            pod(json!({"containers": [{"name": "a"}, {"name": "b"}]})),
            json!({"spec": {"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}]}}),
        );
        assert_eq!(
            t["spec"]["containers"],
            json!([{"name": "b"}, {"name": "a"}])
        );
    }

    #[test]
    fn new_values_take_directives_too() {
        let t = merged(
            pod(json!({"containers": [{"name": "a"}]})),
            json!({"spec": {"initContainers": [{"name": "i", "env": [{"name": "X", "$patch": "delete"}]}], "affinity": {"nodeAffinity": null}}}),
        );
        assert_eq!(
            t["spec"]["initContainers"],
            json!([{"name": "i", "env": []}])
        );
        assert_eq!(t["spec"]["affinity"], json!({}));
    }

    #[test]
    fn a_list_item_without_its_merge_key_is_refused() {
        let mut t = pod(json!({"containers": [{"name": "a"}]}));
        let patch = json!({"spec": {"containers": [{"image": "x"}]}});
        let e = merge(&mut t, &patch, Kube::pod_template()).unwrap_err();
        assert_eq!(e.at, "/spec/containers/0");
        let found = problems(&patch, Kube::pod_template());
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].at, "/spec/containers/0");
    }

    #[test]
    fn directives_are_checked() {
        let patch = json!({
            "$patch": "delete",
            "spec": {
                "$pach": "x",
                "securityContext": {"$patch": "remove"},
                "tolerations": [{"key": "k", "$patch": "delete"}],
                "$setElementOrder/containers": [{"image": "x"}],
                "$setElementOrder/hostname": [],
                "$deleteFromPrimitiveList/volumes": [],
                "$retainKeys": ["hostnme"],
                "containers": [{"name": "a"}]
            }
        });
        let found: Vec<(String, String)> = problems(&patch, Kube::pod_template())
            .into_iter()
            .map(|p| (p.at, p.message))
            .collect();
        let at: Vec<&str> = found.iter().map(|(a, _)| a.as_str()).collect();
        assert_eq!(
            at,
            [
                "/$patch",
                "/spec/$pach",
                "/spec/securityContext/$patch",
                "/spec/tolerations/0/$patch",
                "/spec/$setElementOrder~1containers/0",
                "/spec/containers/0",
                "/spec/$setElementOrder~1hostname",
                "/spec/$deleteFromPrimitiveList~1volumes",
                "/spec/$retainKeys/0",
                "/spec/$retainKeys",
            ],
            "{found:#?}"
        );
    }

    #[test]
    fn unknown_fields_suggest_the_closest() {
        let container = Kube::def("Container").expect("Container");
        let p = unknown_field("/x", "livenesProbe", container);
        assert_eq!(p.message, "a Container has no field `livenesProbe`");
        assert_eq!(p.hint, "did you mean `livenessProbe`?");
    }
}
