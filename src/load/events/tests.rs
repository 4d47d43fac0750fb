//! The event reader against serde-saphyr: the same value and positions
//! for whatever it reads.

use std::sync::Arc;

use super::*;
use crate::source::SourceFile;

// The fuzz suite's generator: the same cases on every machine.
#[allow(dead_code)]
#[path = "../../../tests/fuzz/rng.rs"]
mod rng;
use rng::Rng;

/// Words a YAML reader may take for something other than text, or
/// refuse, and the shapes of definitions' values.
const WORDS: &[&str] = &[
    "",
    "~",
    "null",
    "Null",
    "true",
    "True",
    "FALSE",
    "yes",
    "on",
    "no",
    "y",
    "n",
    "0",
    "00",
    "01",
    "-1",
    "+1",
    "-0",
    "1_0",
    "0x1F",
    "0X1f",
    "0o7",
    "0b1",
    "1e3",
    "1E3",
    "1.",
    ".5",
    "1.5",
    "0.5",
    "0.001",
    "00.5",
    "1.5e3",
    "1e999",
    "inf",
    ".inf",
    "-.inf",
    "nan",
    ".NaN",
    "Infinity",
    "8Gi",
    "500m",
    "2x",
    "9e",
    "1:20",
    "2001-01-01",
    "<<",
    "=",
    "-",
    "--",
    "---",
    "---x",
    "...",
    "? x",
    "- x",
    ":x",
    "x:",
    "a #b",
    "#x",
    "'q'",
    "\"d\"",
    "\"\\t\"",
    "'it''s'",
    "|",
    ">",
    "|-\n  a\n  b",
    "[a]",
    "[]",
    "{}",
    "{a: 1}",
    "{a: 1, a: 2}",
    "*a",
    "&a x",
    "!!str 1",
    "!!int 1",
    "!x y",
    "${HOME}",
    "é",
    "训练",
    "a\tb",
    "/app/x.py",
    "18446744073709551616",
    "18446744073709551615",
    "9223372036854775808",
    "1.7976931348623157e309",
    "3.14159265358979323846264338327950288",
    "registry.io/a:1.0",
    "--lr=0.1",
    "a: b",
    "x # y",
    "\"unterminated",
    "-01",
    "+0",
    "1_000",
    "-1_0",
    "a_b",
    "_x",
    "x_1",
    "1_a",
    "0x_1",
    "./x",
    "../x",
    "-.5",
    "+.inf",
    "-.Inf",
    ".NAN",
    "1.0",
    "-1.5",
    "1.50",
    "10.0.0.0/8",
    "1.2.3",
    "12e",
    "1e",
    "e1",
    "-inf",
    "+nan",
    "0.0",
    "-0.0",
    "9223372036854775807",
    "-9223372036854775808",
    "-9223372036854775809",
    "$patch",
];

/// Whether this reader took `text`; panics unless what it read is what
/// serde-saphyr reads, value and every position.
fn agrees(text: &str) -> bool {
    let Some(ours) = parse(text) else {
        return false;
    };
    let file = Arc::new(SourceFile {
        name: "t.yaml".into(),
        text: text.to_owned(),
        shown: "t.yaml".into(),
    });
    let theirs = super::super::parse_with_saphyr(&file)
        .unwrap_or_else(|d| panic!("serde-saphyr refuses what was read: {d:?}\n{text}"));
    assert_eq!(ours.len(), theirs.len(), "documents of\n{text}");
    for ((v, s), (tv, ts)) in ours.iter().zip(&theirs) {
        assert_eq!(v, tv, "value of\n{text}");
        assert!(s == ts, "positions of\n{text}\n{s:#?}\n{ts:#?}");
    }
    true
}

fn yaml_files() -> Vec<(String, String)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    for dir in ["examples", "tests", "library", "docs"] {
        for e in walkdir::WalkDir::new(root.join(dir)).sort_by_file_name() {
            let Ok(e) = e else { continue };
            let p = e.path();
            if e.file_type().is_file()
                && p.extension().is_some_and(|x| x == "yaml" || x == "yml")
                && let Ok(text) = std::fs::read_to_string(p)
            {
                out.push((p.display().to_string(), text));
            }
        }
    }
    out
}

/// One random edit of a line-based kind: a value, key or item replaced
/// by a word, a line doubled, dropped, re-indented or commented, a
/// document marker, an anchor, line ends in CRLF.
fn mutate(rng: &mut Rng, text: &str) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    if lines.is_empty() {
        return WORDS[rng.below(WORDS.len())].to_owned();
    }
    for _ in 0..1 + rng.below(3) {
        let i = rng.below(lines.len());
        let word = WORDS[rng.below(WORDS.len())];
        let line = lines[i].clone();
        lines[i] = match rng.below(10) {
            0..=2 => match line.split_once(": ") {
                Some((k, _)) => format!("{k}: {word}"),
                None => format!("{line}{word}"),
            },
            3 => match line.split_once("- ") {
                Some((k, _)) => format!("{k}- {word}"),
                None => line,
            },
            4 => match line.split_once(':') {
                Some((k, v)) => {
                    let indent = k.len() - k.trim_start().len();
                    format!("{}{word}:{v}", &k[..indent])
                }
                None => line,
            },
            5 => {
                lines.insert(i, line.clone());
                line
            }
            6 => format!(" {line}"),
            7 => format!("{line} # {word}"),
            8 => format!("---\n{line}"),
            _ => match line.split_once(": ") {
                Some((k, v)) => format!("{k}: &a {v}\n{k}x: *a"),
                None => line,
            },
        };
    }
    let text = lines.join("\n") + "\n";
    if rng.below(20) == 0 {
        text.replace('\n', "\r\n")
    } else {
        text
    }
}

#[test]
fn every_yaml_file_of_the_repository_reads_as_serde_saphyr_reads_it() {
    let files = yaml_files();
    assert!(files.len() > 100, "{}", files.len());
    let taken = files.iter().filter(|(_, t)| agrees(t)).count();
    // Definitions, projects and manifests are what it is for.
    assert!(taken * 10 > files.len() * 8, "{taken} of {}", files.len());
    for name in [
        "examples/mnist/jobs/mnist.yaml",
        "examples/pytorch/jobs/digits.yaml",
    ] {
        let (_, text) = files
            .iter()
            .find(|(p, _)| p.ends_with(name))
            .unwrap_or_else(|| panic!("{name}"));
        assert!(parse(text).is_some(), "{name}");
    }
}

/// Every YAML file of the repository, edited at random: whatever this
/// reader takes, serde-saphyr reads the same; the rest it leaves.
/// `TRAINC_LOAD_FUZZ_EDITS` edits each file more times (12).
#[test]
fn edited_files_read_as_serde_saphyr_reads_them() {
    let mut rng = Rng::new(0x7472_6169_6e63);
    let (mut taken, mut cases) = (0, 0);
    let edits = std::env::var("TRAINC_LOAD_FUZZ_EDITS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(12);
    for (_, text) in yaml_files() {
        for _ in 0..edits {
            let edited = mutate(&mut rng, &text);
            cases += 1;
            if agrees(&edited) {
                taken += 1;
            }
        }
    }
    // Enough of both kinds to mean something.
    assert!(
        taken * 4 > cases && taken * 10 < cases * 9,
        "{taken} of {cases}"
    );
}

/// Each word alone, as a value, a key and an item, in block and flow
/// style.
#[test]
fn every_word_reads_as_serde_saphyr_reads_it() {
    for w in WORDS {
        for text in [
            format!("{w}\n"),
            format!("k: {w}\n"),
            format!("{w}: v\n"),
            format!("- {w}\n"),
            format!("m: {{k: {w}}}\n"),
            format!("l: [{w}, x]\n"),
            format!("a:\n  b:\n    - c: {w}\n"),
        ] {
            agrees(&text);
        }
    }
    assert!(agrees("k: 8Gi\nl: [1, 0.5, true, /x, a b]\n"));
    for refused in [
        "k: null\n",
        "k: &a 1\n",
        "k: !!str 1\n",
        "!!str k: v\n",
        "k: !x {a: 1}\n",
        "- ! [a]\n",
        "true: 1\n",
        "a: 1\na: 2\n",
    ] {
        assert!(parse(refused).is_none(), "{refused}");
    }
}
