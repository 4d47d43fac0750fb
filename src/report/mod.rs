//! Presentation for tools: findings and command results as versioned JSON,
//! GitHub Actions workflow commands, and SARIF 2.1.0 for code scanning. Not a
//! pipeline stage: the commands in [`crate::cli`] hand their results here.
//!
//! Every JSON document is an object whose first key is `version`
//! ([`VERSION`]) and whose last key is `findings`, one shape for every
//! command (docs/formats.md is the contract). A change that removes or
//! renames a key, or changes what one means, bumps [`VERSION`]; new keys do
//! not.

pub mod github;
pub mod rules;
pub mod sarif;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::diagnostic::{Diagnostic, Severity};
use crate::plan::Op;

/// The version of the JSON documents' shapes.
pub const VERSION: u64 = 1;

/// One finding as tools see it, the same in every command's JSON.
#[derive(Serialize)]
pub struct Finding<'a> {
    pub severity: &'static str,
    /// A stable id of the kind of finding (see [`rules`]), as in SARIF.
    pub rule: &'static str,
    pub message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<&'a str>,
}

impl<'a> Finding<'a> {
    pub fn of(d: &'a Diagnostic) -> Self {
        Finding {
            severity: severity(d.severity),
            rule: rules::of(d).id,
            message: &d.message,
            path: d.path.as_deref(),
            file: d.location.as_ref().map(|l| l.file.shown.as_str()),
            line: d.location.as_ref().map(|l| l.pos.line),
            column: d.location.as_ref().map(|l| l.pos.column),
            hint: d.hint.as_deref(),
        }
    }
}

pub fn severity(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
    }
}

/// The findings as a JSON array.
pub fn findings(diags: &[Diagnostic]) -> Value {
    Value::Array(
        diags
            .iter()
            .map(|d| serde_json::to_value(Finding::of(d)).unwrap_or_default())
            .collect(),
    )
}

/// A command's JSON document: `version`, the command's own keys (an
/// object; anything else is left out), then `findings`. Pretty-printed,
/// one trailing newline.
pub fn json(body: Value, diags: &[Diagnostic]) -> String {
    let mut doc = Map::new();
    doc.insert("version".to_owned(), VERSION.into());
    if let Value::Object(fields) = body {
        doc.extend(fields);
    }
    doc.insert("findings".to_owned(), findings(diags));
    let mut s = serde_json::to_string_pretty(&Value::Object(doc))
        .unwrap_or_else(|_| format!("{{\"version\": {VERSION}, \"findings\": []}}"));
    s.push('\n');
    s
}

/// A generated file that `build` would change: what `build --check`
/// annotates.
#[derive(Debug, Clone)]
pub struct Stale {
    pub op: Op,
    /// From the working directory, `/`-separated.
    pub path: String,
}

impl Stale {
    /// What a build would do to it, in words.
    pub fn message(&self) -> String {
        let what = match self.op {
            Op::Create => "would create",
            Op::Update => "would update",
            Op::Delete => "would delete",
            Op::Unchanged => "would leave",
        };
        format!(
            "{} is stale: `trainc build` {what} it; run `trainc build` and commit the result",
            self.path
        )
    }
}

/// The name of an operation in JSON.
pub fn op_name(op: Op) -> &'static str {
    match op {
        Op::Create => "create",
        Op::Update => "update",
        Op::Delete => "delete",
        Op::Unchanged => "unchanged",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_lead_with_the_version_and_end_with_the_findings() {
        let text = json(
            serde_json::json!({"jobs": 2, "more": [1]}),
            &[Diagnostic::warning("w").hint("h")],
        );
        assert_eq!(
            text,
            "{\n  \"version\": 1,\n  \"jobs\": 2,\n  \"more\": [\n    1\n  ],\n  \"findings\": [\n    {\n      \"severity\": \"warning\",\n      \"rule\": \"trainc/command\",\n      \"message\": \"w\",\n      \"hint\": \"h\"\n    }\n  ]\n}\n"
        );
    }
}
