//! SARIF 2.1.0 (OASIS), the log format GitHub code scanning uploads: one run
//! of the `trainc` driver, its rules ([`super::rules`]), one result per
//! finding and per stale file. `tests/formats.rs` validates the output
//! against the OASIS JSON Schema.

use serde_json::{Map, Value, json};

use super::{Stale, rules};
use crate::diagnostic::{Diagnostic, Severity};
use crate::source::Location;

pub const SCHEMA: &str =
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json";

/// What relative URIs are relative to: the working directory trainc ran in,
/// which code scanning takes as the repository's root.
pub const BASE: &str = "%SRCROOT%";

/// A path from the working directory as a URI reference: bytes other than
/// unreserved characters and `/` percent-encoded; absolute paths as `file:`
/// URIs.
pub fn uri(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    if path.starts_with('/') {
        out.push_str("file://");
    }
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn artifact(path: &str) -> Value {
    if path.starts_with('/') {
        json!({"uri": uri(path)})
    } else {
        json!({"uri": uri(path), "uriBaseId": BASE})
    }
}

fn physical(at: &Location) -> Value {
    json!({
        "artifactLocation": artifact(&at.file.shown),
        "region": {"startLine": at.pos.line.max(1), "startColumn": at.pos.column.max(1)},
    })
}

fn level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
    }
}

fn result(rule: &rules::Rule, level: &str, text: String) -> Map<String, Value> {
    let mut r = Map::new();
    r.insert("ruleId".to_owned(), rule.id.into());
    r.insert("ruleIndex".to_owned(), rules::index(rule).into());
    r.insert("level".to_owned(), level.into());
    r.insert("message".to_owned(), json!({"text": text}));
    r
}

fn finding(d: &Diagnostic) -> Value {
    let mut text = d.title();
    if let Some(h) = &d.hint {
        text.push_str("\nhelp: ");
        text.push_str(h);
    }
    let mut r = result(rules::of(d), level(d.severity), text);
    if let Some(at) = &d.location {
        r.insert(
            "locations".to_owned(),
            json!([{"physicalLocation": physical(at)}]),
        );
    }
    if !d.related.is_empty() {
        let related: Vec<Value> = d
            .related
            .iter()
            .enumerate()
            .map(|(i, (label, at))| {
                json!({"id": i + 1, "physicalLocation": physical(at), "message": {"text": label}})
            })
            .collect();
        r.insert("relatedLocations".to_owned(), Value::Array(related));
    }
    Value::Object(r)
}

fn stale(s: &Stale) -> Value {
    let mut r = result(&rules::STALE, "error", s.message());
    r.insert(
        "locations".to_owned(),
        json!([{"physicalLocation": {"artifactLocation": artifact(&s.path)}}]),
    );
    Value::Object(r)
}

/// The log, pretty-printed, one trailing newline.
pub fn render(diags: &[Diagnostic], stale_files: &[Stale], notes: &[String]) -> String {
    let rules: Vec<Value> = rules::ALL
        .iter()
        .map(|r| {
            json!({
                "id": r.id,
                "name": r.name,
                "shortDescription": {"text": r.short},
                "fullDescription": {"text": r.full},
                "defaultConfiguration": {"level": if **r == rules::RUN_CHANGE { "note" } else { "error" }},
            })
        })
        .collect();
    let mut driver = Map::new();
    driver.insert("name".to_owned(), "trainc".into());
    driver.insert("version".to_owned(), env!("CARGO_PKG_VERSION").into());
    // Cargo.toml's homepage or repository, when the package names one.
    let info = [env!("CARGO_PKG_HOMEPAGE"), env!("CARGO_PKG_REPOSITORY")]
        .into_iter()
        .find(|u| !u.is_empty());
    if let Some(u) = info {
        driver.insert("informationUri".to_owned(), u.into());
    }
    driver.insert("rules".to_owned(), Value::Array(rules));
    let results: Vec<Value> = diags
        .iter()
        .map(finding)
        .chain(stale_files.iter().map(stale))
        .chain(
            notes
                .iter()
                .map(|n| Value::Object(result(&rules::RUN_CHANGE, "note", n.clone()))),
        )
        .collect();
    let log = json!({
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": driver},
            "originalUriBaseIds": {BASE: {"description": {"text": "The working directory trainc ran in (the repository's root in CI)."}}},
            // Columns count characters, as in the text output.
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    });
    let mut s = serde_json::to_string_pretty(&log).unwrap_or_default();
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_become_uri_references() {
        assert_eq!(uri("jobs/a b%.yaml"), "jobs/a%20b%25.yaml");
        assert_eq!(uri("../jobs/ü.yaml"), "../jobs/%C3%BC.yaml");
        assert_eq!(uri("/abs/x,y"), "file:///abs/x%2Cy");
    }
}
