//! Stage 3 (compile): JSON patches (RFC 6902) of a pod template, with JSON
//! pointers (RFC 6901), and the rules an operation must follow, which
//! validation reports before anything is applied: its members, and a path
//! that exists in the Kubernetes schema.

use serde_json::Value;

use super::Allowance;
use super::smp::{Problem, unknown_field};
use crate::model::schema::{Field, Kube};

/// One operation, as RFC 6902 defines them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Add,
    Remove,
    Replace,
    Move,
    Copy,
    Test,
}

impl Op {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "add" => Self::Add,
            "remove" => Self::Remove,
            "replace" => Self::Replace,
            "move" => Self::Move,
            "copy" => Self::Copy,
            "test" => Self::Test,
            _ => return None,
        })
    }

    fn takes_value(self) -> bool {
        matches!(self, Self::Add | Self::Replace | Self::Test)
    }

    fn takes_from(self) -> bool {
        matches!(self, Self::Move | Self::Copy)
    }
}

/// An operation's members, `value` absent and `value: null` told apart.
struct Operation<'a> {
    op: Op,
    path: Vec<String>,
    from: Option<Vec<String>>,
    value: Option<&'a Value>,
}

/// The reference tokens of a JSON pointer: `/a~1b/0` → `["a/b", "0"]`.
pub fn tokens(pointer: &str) -> Option<Vec<String>> {
    if pointer.is_empty() {
        return Some(Vec::new());
    }
    let rest = pointer.strip_prefix('/')?;
    rest.split('/')
        .map(|t| {
            // `~` is only ever `~0` or `~1`.
            let bad = t
                .match_indices('~')
                .any(|(i, _)| !matches!(t.as_bytes().get(i + 1), Some(b'0' | b'1')));
            (!bad).then(|| t.replace("~1", "/").replace("~0", "~"))
        })
        .collect()
}

/// The schema validated `op`, `path` and `from`; this reads them.
fn operation(v: &Value) -> Result<Operation<'_>, Problem> {
    let bad = |at: &str, message: &str| Problem {
        at: at.to_owned(),
        message: message.to_owned(),
        hint: String::new(),
    };
    let op = v
        .get("op")
        .and_then(Value::as_str)
        .and_then(Op::parse)
        .ok_or_else(|| bad("/op", "expected an operation"))?;
    let pointer = |key: &str| -> Result<Option<Vec<String>>, Problem> {
        match v.get(key) {
            None => Ok(None),
            Some(p) => p
                .as_str()
                .and_then(tokens)
                .map(Some)
                .ok_or_else(|| bad(&format!("/{key}"), "expected a JSON pointer")),
        }
    };
    Ok(Operation {
        op,
        path: pointer("path")?.ok_or_else(|| bad("", "no `path`"))?,
        from: pointer("from")?,
        value: v.get("value"),
    })
}

/// Applies `ops` to `doc`, in place: a failed operation leaves `doc`
/// part-way, for the caller to drop (a patch applies whole, or the
/// definition is refused). What each operation writes is charged to
/// `allowance` before it is written. A problem's place is relative to the
/// list of operations.
pub fn apply(doc: &mut Value, ops: &[Value], allowance: &mut Allowance) -> Result<(), Problem> {
    for (i, v) in ops.iter().enumerate() {
        let at = format!("/{i}");
        let o = operation(v).map_err(|mut p| {
            p.at = format!("{at}{}", p.at);
            p
        })?;
        let fail = |member: &str, message: String, hint: &str| Problem {
            at: format!("{at}/{member}"),
            message,
            hint: hint.to_owned(),
        };
        let name = v.get("op").and_then(Value::as_str).unwrap_or_default();
        // Charged before the value is cloned: a refused copy costs no more
        // than what was left.
        let charge = |allowance: &mut Allowance, value: &Value| {
            if allowance.charge(value) {
                return Ok(());
            }
            Err(Problem {
                at: at.clone(),
                message: super::too_much(&format!("this `{name}`")),
                hint: "each `copy` writes the whole value it copies again, each `add` and `replace` its `value`: copy less, or patch the fields themselves".into(),
            })
        };
        let shown = |t: &[String]| show(t);
        match o.op {
            Op::Add | Op::Replace | Op::Test => {
                let value = o.value.ok_or_else(|| fail("", "no `value`".into(), ""))?;
                match o.op {
                    Op::Add => {
                        charge(allowance, value)?;
                        add(doc, &o.path, value.clone()).map_err(|m| {
                            fail("path", m, "add to a mapping or a list that exists")
                        })?;
                    }
                    Op::Replace => {
                        let slot = get_mut(doc, &o.path).ok_or_else(|| {
                            fail(
                                "path",
                                format!("`{}` is not in the pod template", shown(&o.path)),
                                "`replace` changes a value that is there; use `add` to add one",
                            )
                        })?;
                        charge(allowance, value)?;
                        *slot = value.clone();
                    }
                    _ => {
                        let found = get(doc, &o.path).ok_or_else(|| {
                            fail(
                                "path",
                                format!("`{}` is not in the pod template", shown(&o.path)),
                                "`test` compares a value that is there",
                            )
                        })?;
                        if !equal(found, value) {
                            return Err(fail(
                                "value",
                                format!(
                                    "test failed: `{}` is {}",
                                    shown(&o.path),
                                    serde_json::to_string(found).unwrap_or_default()
                                ),
                                "the patch stops here: trainc generated something else than this test expects",
                            ));
                        }
                    }
                }
            }
            Op::Remove => {
                remove(doc, &o.path).ok_or_else(|| {
                    fail(
                        "path",
                        format!("`{}` is not in the pod template", shown(&o.path)),
                        "`remove` removes a value that is there",
                    )
                })?;
            }
            Op::Move | Op::Copy => {
                let from = o
                    .from
                    .as_deref()
                    .ok_or_else(|| fail("", "no `from`".into(), ""))?;
                if o.op == Op::Move && o.path.len() > from.len() && o.path.starts_with(from) {
                    return Err(fail(
                        "path",
                        format!("cannot move `{}` into itself", shown(from)),
                        "",
                    ));
                }
                let missing = || {
                    fail(
                        "from",
                        format!("`{}` is not in the pod template", shown(from)),
                        "",
                    )
                };
                // A move writes nothing new: the value changes places.
                let value = if o.op == Op::Move {
                    remove(doc, from).ok_or_else(missing)?
                } else {
                    let found = get(doc, from).ok_or_else(missing)?;
                    charge(allowance, found)?;
                    found.clone()
                };
                add(doc, &o.path, value).map_err(|m| fail("path", m, ""))?;
            }
        }
    }
    Ok(())
}

/// A pointer as written, from its tokens.
fn show(tokens: &[String]) -> String {
    tokens
        .iter()
        .map(|t| format!("/{}", crate::source::pointer_segment(t)))
        .collect()
}

/// A list index as RFC 6901 spells it: digits, no leading zero.
fn index(token: &str) -> Option<usize> {
    let ok = !token.is_empty()
        && token.bytes().all(|b| b.is_ascii_digit())
        && (token == "0" || !token.starts_with('0'));
    ok.then(|| token.parse().ok()).flatten()
}

fn get<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, t| match v {
        Value::Object(o) => o.get(t),
        Value::Array(a) => a.get(index(t)?),
        _ => None,
    })
}

fn get_mut<'a>(v: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    path.iter().try_fold(v, |v, t| match v {
        Value::Object(o) => o.get_mut(t),
        Value::Array(a) => a.get_mut(index(t)?),
        _ => None,
    })
}

fn add(doc: &mut Value, path: &[String], value: Value) -> Result<(), String> {
    let Some((last, parent)) = path.split_last() else {
        *doc = value;
        return Ok(());
    };
    let shown = show(parent);
    match get_mut(doc, parent) {
        Some(Value::Object(o)) => {
            o.insert(last.clone(), value);
            Ok(())
        }
        Some(Value::Array(a)) => {
            let i = if last == "-" {
                a.len()
            } else {
                index(last).ok_or_else(|| {
                    format!("`{last}` is not a position in the list `{shown}`: a number, or `-` for its end")
                })?
            };
            if i > a.len() {
                return Err(format!(
                    "the list `{shown}` has {} items: there is no position {i} to add at",
                    a.len()
                ));
            }
            a.insert(i, value);
            Ok(())
        }
        Some(_) => Err(format!("`{shown}` is neither a mapping nor a list")),
        None => Err(format!(
            "`{}` is not in the pod template, so nothing can be added in it",
            if shown.is_empty() { "/" } else { &shown }
        )),
    }
}

fn remove(doc: &mut Value, path: &[String]) -> Option<Value> {
    let (last, parent) = path.split_last()?;
    match get_mut(doc, parent)? {
        Value::Object(o) => o.shift_remove(last),
        Value::Array(a) => {
            let i = index(last)?;
            (i < a.len()).then(|| a.remove(i))
        }
        _ => None,
    }
}

/// JSON equality, numbers by value (`1` equals `1.0`).
fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| equal(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| equal(v, w)))
        }
        _ => a == b,
    }
}

/// Every rule of one operation that the schema cannot say: the members
/// its `op` takes, and a `path` (and `from`) into the pod template that the
/// Kubernetes schema knows, a `value` without unknown fields. Places are
/// relative to the operation.
pub fn problems(v: &Value, schema: Option<Kube>) -> Vec<Problem> {
    let mut out = Vec::new();
    let Ok(o) = operation(v) else {
        // The schema has reported it.
        return out;
    };
    let p = |at: &str, message: String, hint: &str| Problem {
        at: at.to_owned(),
        message,
        hint: hint.to_owned(),
    };
    let name = v.get("op").and_then(Value::as_str).unwrap_or_default();
    if o.op.takes_value() && o.value.is_none() {
        let what = if o.op == Op::Test {
            "the value to compare with"
        } else {
            "the value to write"
        };
        out.push(p(
            "",
            format!("`{name}` needs a `value`"),
            &format!("add `value:`, {what}"),
        ));
    }
    if !o.op.takes_value() && o.value.is_some() {
        out.push(p(
            "/value",
            format!("`{name}` takes no `value`"),
            "remove `value`",
        ));
    }
    if o.op.takes_from() && o.from.is_none() {
        out.push(p(
            "",
            format!("`{name}` needs a `from`"),
            "name where the value comes from",
        ));
    }
    if !o.op.takes_from() && o.from.is_some() {
        out.push(p(
            "/from",
            format!("`{name}` takes no `from`"),
            "`from` is for `move` and `copy`",
        ));
    }
    if o.path.is_empty() && o.op != Op::Test {
        out.push(p(
            "/path",
            "a JSON patch cannot replace the whole pod template".into(),
            "patch a field below `/metadata` or `/spec`",
        ));
    }
    let end_ok = matches!(o.op, Op::Add | Op::Move | Op::Copy);
    let target = resolve(&o.path, schema, end_ok).map_err(|mut e| {
        e.at = "/path".into();
        e
    });
    match target {
        Ok(s) => {
            if let (Some(value), Some(s)) = (o.value, s) {
                unknown_fields(value, s, "/value", &mut out);
            }
        }
        Err(e) => out.push(e),
    }
    if let Some(from) = &o.from
        && let Err(mut e) = resolve(from, schema, false)
    {
        e.at = "/from".into();
        out.push(e);
    }
    out
}

/// The schema at `path`, or what is wrong with the first token that leaves
/// it. `-` (the end of a list) may end the path where `end_ok`. Nothing is
/// below a value the schema gives no fields (a string, a quantity), nor
/// more than one key below one it does not describe: such paths reach
/// nothing valid, and they let copies nest without bound.
fn resolve(path: &[String], schema: Option<Kube>, end_ok: bool) -> Result<Option<Kube>, Problem> {
    let below = |i: usize| Problem {
        at: String::new(),
        message: format!(
            "`{}`: the pod template has nothing below `{}`",
            show(path),
            show(&path[..i])
        ),
        hint: "a path ends at a field of the pod template, an item of a list or a key of a map"
            .into(),
    };
    let mut s = schema;
    for (i, t) in path.iter().enumerate() {
        let Some(here) = s else {
            return if i == 0 { Ok(None) } else { Err(below(i)) };
        };
        if here.is_scalar() {
            return Err(below(i));
        }
        if here.is_list() && !here.is_object() {
            let last = i + 1 == path.len();
            if !(index(t).is_some() || (t == "-" && last && end_ok)) {
                let hint = if t == "-" {
                    "`-` (the end of a list) is where `add`, `move` and `copy` add".to_owned()
                } else {
                    "a list takes a position: `0`, `1`, …, or `-` for its end".to_owned()
                };
                return Err(Problem {
                    at: String::new(),
                    message: format!("`{t}` is not a position in the list `{}`", show(&path[..i])),
                    hint,
                });
            }
            s = here.items();
            continue;
        }
        s = match here.field(t) {
            Field::Known(k) => Some(k),
            Field::Any => None,
            Field::Unknown => {
                let mut p = unknown_field("", t, here);
                p.message = format!("`{}`: {}", show(&path[..=i]), p.message);
                return Err(p);
            }
        };
    }
    Ok(s)
}

/// Unknown fields (and strategic-merge directives, which mean nothing
/// here) in a value written at a place of schema `s`.
pub fn unknown_fields(v: &Value, s: Kube, at: &str, out: &mut Vec<Problem>) {
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                let here = format!("{at}/{}", crate::source::pointer_segment(k));
                if k.starts_with('$') && s.is_object() {
                    out.push(Problem {
                        at: here,
                        message: format!(
                            "`{k}` is a strategic-merge directive, which means nothing here"
                        ),
                        hint: "directives apply in `strategic` patches; remove it".into(),
                    });
                    continue;
                }
                match s.field(k) {
                    Field::Known(c) => unknown_fields(x, c, &here, out),
                    Field::Unknown => out.push(unknown_field(&here, k, s)),
                    Field::Any => {}
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = s.items() {
                for (i, x) in a.iter().enumerate() {
                    unknown_fields(x, items, &format!("{at}/{i}"), out);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc() -> Value {
        json!({"metadata": {"labels": {"a/b": "1"}}, "spec": {"containers": [{"name": "t", "args": ["x"]}]}})
    }

    #[test]
    fn pointers_unescape_and_refuse_bad_escapes() {
        assert_eq!(tokens(""), Some(vec![]));
        assert_eq!(
            tokens("/a~1b/~0c/0"),
            Some(vec!["a/b".into(), "~c".into(), "0".into()])
        );
        assert_eq!(tokens("a"), None);
        assert_eq!(tokens("/a~2"), None);
        assert_eq!(index("01"), None);
        assert_eq!(index("10"), Some(10));
    }

    fn allowance() -> Allowance {
        Allowance::new()
    }

    #[test]
    fn every_operation() {
        let mut d = doc();
        apply(
            &mut d,
            &[
                json!({"op": "test", "path": "/metadata/labels/a~1b", "value": "1"}),
                json!({"op": "add", "path": "/spec/containers/0/args/-", "value": "y"}),
                json!({"op": "add", "path": "/spec/containers/0/args/0", "value": "w"}),
                json!({"op": "replace", "path": "/spec/containers/0/name", "value": "u"}),
                json!({"op": "copy", "from": "/spec/containers/0", "path": "/spec/initContainers"}),
                json!({"op": "move", "from": "/metadata/labels", "path": "/metadata/annotations"}),
                json!({"op": "remove", "path": "/spec/containers/0/args/1"}),
                json!({"op": "test", "path": "/spec/initContainers/args/2", "value": "y"}),
            ],
            &mut allowance(),
        )
        .expect("applies");
        assert_eq!(
            d,
            json!({
                "metadata": {"annotations": {"a/b": "1"}},
                "spec": {
                    "containers": [{"name": "u", "args": ["w", "y"]}],
                    "initContainers": {"name": "u", "args": ["w", "x", "y"]}
                }
            })
        );
    }

    #[test]
    fn a_failed_operation_is_located() {
        let mut d = doc();
        let e = apply(
            &mut d,
            &[
                json!({"op": "add", "path": "/spec/hostname", "value": "h"}),
                json!({"op": "test", "path": "/spec/containers/0/name", "value": "x"}),
            ],
            &mut allowance(),
        )
        .unwrap_err();
        assert_eq!(e.at, "/1/value");
        assert_eq!(e.message, "test failed: `/spec/containers/0/name` is \"t\"");
        for (op, at) in [
            (json!({"op": "remove", "path": "/spec/nope"}), "/0/path"),
            (
                json!({"op": "add", "path": "/spec/containers/5", "value": {}}),
                "/0/path",
            ),
            (json!({"op": "add", "path": "/x/y", "value": 1}), "/0/path"),
            (
                json!({"op": "move", "from": "/spec", "path": "/spec/x"}),
                "/0/path",
            ),
            (
                json!({"op": "copy", "from": "/nope", "path": "/x"}),
                "/0/from",
            ),
        ] {
            assert_eq!(
                apply(&mut doc(), &[op], &mut allowance()).unwrap_err().at,
                at
            );
        }
    }

    /// Copies that double a list are refused at the operation that would
    /// pass the allowance, before it copies; a move copies nothing.
    #[test]
    fn copies_are_charged_before_they_are_made() {
        let long = "x".repeat(60_000);
        let mut d = json!({"spec": {"containers": [{"name": "t", "command": [long]}], "initContainers": []}});
        let mut ops = vec![
            json!({"op": "copy", "from": "/spec/containers/0", "path": "/spec/initContainers/-"}),
        ];
        ops.extend((0..30).map(|_| {
            json!({"op": "copy", "from": "/spec/initContainers", "path": "/spec/initContainers/-"})
        }));
        let mut a = allowance();
        let e = apply(&mut d, &ops, &mut a).unwrap_err();
        // 60 KB written twice, then 120, 240 and 480: the sixth copy (960 KB
        // more) would pass 1 MiB.
        assert_eq!(e.at, "/5");
        assert_eq!(
            e.message,
            "this `copy` would take what the patches write into one pod template past 1.0 MiB"
        );

        let mut a = allowance();
        let moves: Vec<Value> = (0..1000)
            .map(|_| json!({"op": "move", "from": "/spec/containers/0/command", "path": "/spec/containers/0/args"}))
            .flat_map(|m| [m, json!({"op": "move", "from": "/spec/containers/0/args", "path": "/spec/containers/0/command"})])
            .collect();
        let mut d =
            json!({"spec": {"containers": [{"name": "t", "command": ["x".repeat(60_000)]}]}});
        apply(&mut d, &moves, &mut a).expect("moves write nothing");
        assert_eq!(a.left(), crate::limits::MAX_PATCH_BYTES);
    }

    #[test]
    fn paths_and_values_are_checked_against_the_schema() {
        let s = Kube::pod_template();
        let at = |v: Value| -> Vec<(String, String)> {
            problems(&v, s)
                .into_iter()
                .map(|p| (p.at, p.hint))
                .collect()
        };
        assert!(at(json!({"op": "add", "path": "/spec/containers/-", "value": {"name": "x", "env": [{"name": "A"}]}})).is_empty());
        assert!(at(json!({"op": "add", "path": "/metadata/labels/any", "value": "x"})).is_empty());
        assert_eq!(
            at(json!({"op": "add", "path": "/spec/containers/0/livenesProbe", "value": {}})),
            [(
                "/path".to_owned(),
                "did you mean `livenessProbe`?".to_owned()
            )]
        );
        assert_eq!(
            at(json!({"op": "replace", "path": "/spec/containers/-/image", "value": "x"}))[0].0,
            "/path"
        );
        assert_eq!(
            at(
                json!({"op": "add", "path": "/spec/containers/-", "value": {"name": "x", "imag": "y", "$patch": "delete"}})
            ),
            [
                ("/value/imag".to_owned(), "did you mean `image`?".to_owned()),
                (
                    "/value/$patch".to_owned(),
                    "directives apply in `strategic` patches; remove it".to_owned()
                ),
            ]
        );
        assert_eq!(at(json!({"op": "remove", "path": "", "value": 1})).len(), 2);
        // Nothing is below a string: paths that went on made copies nest
        // ever deeper.
        assert_eq!(
            at(
                json!({"op": "copy", "from": "/metadata/annotations/a", "path": "/metadata/annotations/a/a"})
            ),
            [(
                "/path".to_owned(),
                "a path ends at a field of the pod template, an item of a list or a key of a map"
                    .to_owned()
            )]
        );
        assert!(at(json!({"op": "add", "path": "/spec/containers/0/resources/limits/cpu/x", "value": 1})).len() == 1);
        assert_eq!(at(json!({"op": "copy", "path": "/spec/hostname"}))[0].0, "");
    }
}
