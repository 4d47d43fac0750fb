//! Malformed input never panics: every mutation of a real definition either
//! compiles or yields findings that point inside the file.

use std::sync::Arc;

use trainc::model::project::Defaults;
use trainc::source::SourceFile;
use trainc::{diagnostic, pipeline, validate};

const SEED: &str = include_str!("../examples/mnist/jobs/mnist.yaml");

/// Runs the whole in-memory pipeline and renders any findings.
fn check(text: String) {
    let file = Arc::new(SourceFile::new("mutant.yaml", text));
    let diags = match validate::validate(
        std::slice::from_ref(&file),
        &validate::Context {
            defaults: &Defaults::default(),
            library: &trainc::library::Library::builtin().expect("builtin library"),
            root: std::path::Path::new("."),
            top: std::path::Path::new("."),
            generated: &[],
        },
    ) {
        Err(d) => d,
        Ok((jobs, _warnings)) => {
            assert!(pipeline::render(&jobs).is_ok());
            return;
        }
    };
    assert!(!diags.is_empty());
    for d in &diags {
        if let Some(loc) = &d.location {
            assert!(loc.pos.line >= 1, "{}", d.title());
            assert!(loc.byte_range().end <= file.text.len());
        }
    }
    let _ = diagnostic::render_text(&diags, false);
    let _ = trainc::report::json(serde_json::Value::Null, &diags);
    let _ = trainc::report::github::render(&diags, &[], &[]);
    let _ = trainc::report::sarif::render(&diags, &[], &[]);
}

#[test]
fn deleting_any_line_never_panics() {
    let lines: Vec<&str> = SEED.lines().collect();
    for i in 0..lines.len() {
        let mut m = lines.clone();
        m.remove(i);
        check(m.join("\n"));
    }
}

#[test]
fn inserting_yaml_punctuation_anywhere_never_panics() {
    let inserts = [
        ":", "[", "]", "{", "- ", "&a ", "*a", "\"", "'", "\t", "#", "é", "\n  ", "0", "-1", "~",
    ];
    let boundaries: Vec<usize> = (0..=SEED.len())
        .filter(|i| SEED.is_char_boundary(*i))
        .collect();
    // Every seventh position keeps the test fast while still hitting every
    // kind of token; the positions are fixed, so failures reproduce.
    for &at in boundaries.iter().step_by(7) {
        for ins in inserts {
            let mut m = String::with_capacity(SEED.len() + ins.len());
            m.push_str(&SEED[..at]);
            m.push_str(ins);
            m.push_str(&SEED[at..]);
            check(m);
        }
    }
}

#[test]
fn truncating_anywhere_never_panics() {
    for at in (0..=SEED.len()).filter(|i| SEED.is_char_boundary(*i)) {
        check(SEED[..at].to_owned());
    }
}
