//! Where the findings about one document go.

use super::Document;
use crate::diagnostic::Diagnostic;

/// Where the findings about one document go, each located by a JSON
/// pointer into it. Validation's rules, and those that live with a target
/// or a framework (`compile::<module>::check`), report through this.
pub struct Findings<'a> {
    pub doc: &'a Document,
    pub out: Vec<Diagnostic>,
}

impl<'a> Findings<'a> {
    pub fn new(doc: &'a Document) -> Self {
        Self {
            doc,
            out: Vec::new(),
        }
    }

    pub fn error(&mut self, pointer: &str, message: impl Into<String>, hint: impl Into<String>) {
        self.push(Diagnostic::new(message), pointer, false, hint.into());
    }

    pub fn warning(&mut self, pointer: &str, message: impl Into<String>, hint: impl Into<String>) {
        self.push(Diagnostic::warning(message), pointer, false, hint.into());
    }

    pub fn warning_at_key(
        &mut self,
        pointer: &str,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) {
        self.push(Diagnostic::warning(message), pointer, true, hint.into());
    }

    pub fn error_at_key(
        &mut self,
        pointer: &str,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) {
        self.push(Diagnostic::new(message), pointer, true, hint.into());
    }

    /// A finding about the value at `pointer`, located at the value or, for
    /// a finding about the field itself, at its key; an empty hint is none.
    fn push(&mut self, d: Diagnostic, pointer: &str, at_key: bool, hint: String) {
        let at = if at_key {
            self.doc.locate_key(pointer)
        } else {
            self.doc.locate(pointer)
        };
        let d = d.path(self.doc.dotted(pointer)).at(at);
        self.out
            .push(if hint.is_empty() { d } else { d.hint(hint) });
    }
}
