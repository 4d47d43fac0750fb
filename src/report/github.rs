//! GitHub Actions workflow commands (`::error file=…,line=…,col=…::message`):
//! a job's log turns them into annotations on the pull request's lines.
//!
//! The line is built as the Actions toolkit (`@actions/core`'s `error()` and
//! `warning()`) builds it, so that `tests/formats.rs` can compare the two byte
//! for byte: properties in the order title, file, line, col; empty ones left
//! out; the message and the properties escaped by the toolkit's rules.

use std::fmt::Write as _;

use super::{Stale, rules};
use crate::diagnostic::{Diagnostic, Severity};

/// The message part of a command: `%`, CR and LF escaped.
pub fn escape_data(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '%' => out.push_str("%25"),
            '\r' => out.push_str("%0D"),
            '\n' => out.push_str("%0A"),
            c => out.push(c),
        }
    }
    out
}

/// A property's value: as data, and `:` and `,`, which would end it.
pub fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// The properties of an annotation.
#[derive(Debug, Default)]
pub struct Properties<'a> {
    pub title: Option<&'a str>,
    pub file: Option<&'a str>,
    pub line: Option<usize>,
    pub col: Option<usize>,
}

/// One workflow command, with its newline.
pub fn command(name: &str, props: &Properties, message: &str) -> String {
    let mut parts = Vec::new();
    if let Some(t) = props.title.filter(|t| !t.is_empty()) {
        parts.push(format!("title={}", escape_property(t)));
    }
    if let Some(f) = props.file.filter(|f| !f.is_empty()) {
        parts.push(format!("file={}", escape_property(f)));
    }
    // The toolkit leaves out falsy values: a 0 line or column too.
    if let Some(l) = props.line.filter(|&l| l > 0) {
        parts.push(format!("line={l}"));
    }
    if let Some(c) = props.col.filter(|&c| c > 0) {
        parts.push(format!("col={c}"));
    }
    let props = if parts.is_empty() {
        String::new()
    } else {
        format!(" {}", parts.join(","))
    };
    format!("::{name}{props}::{}\n", escape_data(message))
}

/// A finding's text: the headline, then its help and related places on
/// lines of their own.
pub fn message(d: &Diagnostic) -> String {
    let mut m = d.title();
    if let Some(h) = &d.hint {
        let _ = write!(m, "\nhelp: {h}");
    }
    for (label, at) in &d.related {
        let _ = write!(
            m,
            "\nnote: {label}: {}:{}:{}",
            at.file.shown, at.pos.line, at.pos.column
        );
    }
    m
}

/// One command per finding, then one per stale file.
pub fn render(diags: &[Diagnostic], stale: &[Stale], notes: &[String]) -> String {
    let mut out = String::new();
    for d in diags {
        let name = match d.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        let props = Properties {
            title: Some(rules::of(d).short),
            file: d.location.as_ref().map(|l| l.file.shown.as_str()),
            line: d.location.as_ref().map(|l| l.pos.line),
            col: d.location.as_ref().map(|l| l.pos.column),
        };
        out.push_str(&command(name, &props, &message(d)));
    }
    for s in stale {
        let props = Properties {
            title: Some(rules::STALE.short),
            file: Some(&s.path),
            ..Properties::default()
        };
        out.push_str(&command("error", &props, &s.message()));
    }
    for n in notes {
        let props = Properties {
            title: Some(rules::RUN_CHANGE.short),
            ..Properties::default()
        };
        out.push_str(&command("notice", &props, n));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_escape_what_would_end_them() {
        let props = Properties {
            title: Some("a: b, c"),
            file: Some("jobs/50%,x:y.yaml"),
            line: Some(3),
            col: Some(0),
        };
        assert_eq!(
            command("error", &props, "100% wrong\r\nhelp: a, b: c"),
            "::error title=a%3A b%2C c,file=jobs/50%25%2Cx%3Ay.yaml,line=3::100%25 wrong%0D%0Ahelp: a, b: c\n"
        );
        assert_eq!(
            command("warning", &Properties::default(), "m"),
            "::warning::m\n"
        );
    }
}
