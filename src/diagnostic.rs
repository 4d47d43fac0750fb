//! Findings about the input, rendered like rustc's; [`crate::report`]
//! renders them for tools.

use std::fmt::Write as _;

use annotate_snippets::{AnnotationKind, Group, Level, Renderer, Snippet};

use crate::source::Location;

/// Whether a finding stops the command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Severity {
    #[default]
    Error,
    /// Reported, but the command goes on (a mutable image tag, pods that
    /// meet a weaker Pod Security profile on purpose).
    Warning,
}

/// One problem found in the input.
#[derive(Debug, Clone)]
pub struct Diagnostic {
    pub severity: Severity,
    /// Dotted path of the offending field (`spec.roles.worker.replicas`), when
    /// the problem is about one field.
    pub path: Option<String>,
    pub message: String,
    pub location: Option<Location>,
    pub hint: Option<String>,
    /// Secondary places worth showing, such as the first of two duplicates.
    pub related: Vec<(String, Location)>,
}

impl Diagnostic {
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            severity: Severity::Error,
            path: None,
            message: message.into(),
            location: None,
            hint: None,
            related: Vec::new(),
        }
    }

    /// A finding that does not stop the command.
    pub fn warning(message: impl Into<String>) -> Self {
        Self {
            severity: Severity::Warning,
            ..Self::new(message)
        }
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    #[must_use]
    pub fn at(mut self, location: Option<Location>) -> Self {
        self.location = location;
        self
    }

    #[must_use]
    pub fn path(mut self, path: impl Into<String>) -> Self {
        // The document itself has no field path.
        self.path = Some(path.into()).filter(|p| !p.is_empty());
        self
    }

    #[must_use]
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    #[must_use]
    pub fn related(mut self, label: impl Into<String>, location: Location) -> Self {
        self.related.push((label.into(), location));
        self
    }

    /// The headline: `spec.roles.worker.replicas: -1 is less than 0`.
    pub fn title(&self) -> String {
        match &self.path {
            Some(p) if !p.is_empty() => format!("{p}: {}", self.message),
            _ => self.message.clone(),
        }
    }

    /// Sort key that orders findings by file, then position, then text, so the
    /// report is the same whatever order rules ran in.
    fn sort_key(&self) -> (String, usize, usize, String) {
        match &self.location {
            Some(l) => (l.file.name.clone(), l.pos.line, l.pos.column, self.title()),
            None => (String::new(), 0, 0, self.title()),
        }
    }
}

/// Sorts and de-duplicates findings.
pub fn normalize(diags: &mut Vec<Diagnostic>) {
    diags.sort_by_key(Diagnostic::sort_key);
    diags.dedup_by(|a, b| a.sort_key() == b.sort_key());
}

/// Renders findings as rustc does. `styled` adds ANSI colour.
pub fn render_text(diags: &[Diagnostic], styled: bool) -> String {
    let renderer = if styled {
        Renderer::styled()
    } else {
        Renderer::plain()
    };
    let mut out = String::new();
    for d in diags {
        let title = d.title();
        let level = match d.severity {
            Severity::Error => Level::ERROR,
            Severity::Warning => Level::WARNING,
        };
        let mut group = Group::with_title(level.primary_title(&title));
        if let Some(loc) = &d.location {
            let mut snippet = Snippet::source(loc.file.text.as_str())
                .path(loc.file.shown.as_str())
                .fold(true)
                .annotation(AnnotationKind::Primary.span(loc.byte_range()));
            for (label, rel) in &d.related {
                if std::sync::Arc::ptr_eq(&rel.file, &loc.file) {
                    snippet = snippet.annotation(
                        AnnotationKind::Context
                            .span(rel.byte_range())
                            .label(label.as_str()),
                    );
                }
            }
            group = group.element(snippet);
        }
        if let Some(h) = &d.hint {
            group = group.element(Level::HELP.message(h.as_str()));
        }
        let mut report = vec![group];
        for (label, rel) in &d.related {
            let same = d
                .location
                .as_ref()
                .is_some_and(|l| std::sync::Arc::ptr_eq(&l.file, &rel.file));
            if !same {
                report.push(
                    Group::with_title(Level::NOTE.secondary_title(label.as_str())).element(
                        Snippet::source(rel.file.text.as_str())
                            .path(rel.file.shown.as_str())
                            .fold(true)
                            .annotation(AnnotationKind::Context.span(rel.byte_range())),
                    ),
                );
            }
        }
        let _ = writeln!(out, "{}\n", renderer.render(&report));
    }
    let n = diags.iter().filter(|d| d.is_error()).count();
    if n > 0 {
        let summary = if n == 1 {
            "aborting due to 1 previous error".to_owned()
        } else {
            format!("aborting due to {n} previous errors")
        };
        let _ = writeln!(
            out,
            "{}",
            renderer.render(&[Group::with_title(Level::ERROR.primary_title(&summary))])
        );
    }
    out
}

/// `1 file`, `2 files`: a count in a message.
pub fn plural(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}
