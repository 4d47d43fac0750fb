//! trainc's YAML emitter (`src/emit/yaml.rs`) against real parsers and the
//! serializer it replaced.
//!
//! Thousands of random documents, their strings drawn from what YAML
//! readers are touchy about (numbers in every base and spelling, YAML 1.1
//! booleans and timestamps, indicators, quotes, line breaks of every kind,
//! controls, BOM, edge spaces, multi-line text). Each document must
//! 1. be byte for byte what serde-saphyr 2.1's serializer writes with the
//!    options trainc used (generated files must not change), and
//! 2. read back as the same value with serde-saphyr's parser (YAML 1.2) and,
//!    for a batch, with PyYAML's safe loaders, pure Python and libyaml
//!    (YAML 1.1: `yes`, `on`, `0755`, `1_000`, `12:30` must stay strings).
//!
//! `TRAINC_PYYAML` names a Python with PyYAML (`tests/run.sh` sets it); the
//! PyYAML part is skipped without it unless `TRAINC_REQUIRE_TOOLS` is set.

mod common;
// The fuzz suite's generator: the same sequence on every machine.
#[allow(dead_code)]
#[path = "fuzz/rng.rs"]
mod rng;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde::Serialize;
use serde_json::{Map, Number, Value, json};

use rng::Rng;

/// The emitter's output for `v`, without a header.
fn ours<T: Serialize + ?Sized>(v: &T) -> String {
    let mut out = Vec::new();
    trainc::emit::yaml::to_writer(&mut out, v).expect("serializes");
    String::from_utf8(out).expect("UTF-8")
}

/// serde-saphyr's output with the options `trainc::emit` used to pass it.
fn saphyr<T: Serialize>(v: &T) -> String {
    let mut o = serde_saphyr::SerializerOptions::default();
    o.indent_step = 2;
    o.prefer_block_scalars = true;
    o.folded_wrap_chars = usize::MAX;
    serde_saphyr::to_string_with_options(v, o).expect("serde-saphyr serializes")
}

/// Whole strings some reader resolves to something else, or that are
/// syntax: each must come back as the same string.
const WORDS: &[&str] = &[
    "",
    "~",
    "null",
    "Null",
    "NULL",
    "true",
    "True",
    "FALSE",
    "yes",
    "Yes",
    "NO",
    "no",
    "on",
    "On",
    "off",
    "OFF",
    "y",
    "Y",
    "n",
    "N",
    "nan",
    "NaN",
    ".nan",
    ".NaN",
    "inf",
    "-inf",
    "+inf",
    ".inf",
    "-.inf",
    "+.Inf",
    "0",
    "-0",
    "+0",
    "01",
    "0755",
    "0o7",
    "0O17",
    "0x1F",
    "0X1f",
    "-0x1F",
    "+0b101",
    "0b",
    "0x",
    "0o",
    "0b1_0",
    "0x_1",
    "1_000",
    "1__0",
    "_1",
    "1_",
    "1e3",
    "1E3",
    "1e+3",
    "1.5e-3",
    ".5",
    "5.",
    "1.2.3",
    "-.5",
    "+.5e1",
    "12:30",
    "1:20:30",
    "0:30",
    "-1:30",
    "1:60",
    "190:20:30.15",
    "1:2:3.",
    "2001-12-14",
    "2001-1-1",
    "2001-12-14t21:59:43.10-05:00",
    "2001-12-14 21:59:43.10 -5",
    "2001-12-14 21:59:43.10 Z",
    "2001-12-14T1:2:3,5+05:30",
    "2001-12-14 1:2:3 +1:3",
    "20011-12-14",
    "<<",
    "=",
    "-",
    "--",
    "---",
    "--- x",
    "---x",
    "...",
    "... x",
    "...x",
    "?",
    "? x",
    "?x",
    "- x",
    "-x",
    ":",
    ":x",
    "x:",
    "x: y",
    "x:y",
    "x :",
    "#",
    "#x",
    "x #y",
    "x#y",
    ".",
    ",",
    "[",
    "]",
    "{}",
    "[]",
    "&a",
    "*a",
    "!tag",
    "!!str",
    "|",
    ">",
    "'",
    "\"",
    "%YAML",
    "@x",
    "`x",
    "\\",
    "\\n",
    "a'b",
    "a\"b",
    " x",
    "x ",
    "\tx",
    "x\t",
    "\n",
    "\n\n",
    "x\n",
    "x\n\n",
    "\nx",
    "  x\ny",
    "x\n  y\n",
    " \n",
    "\r",
    "x\r\ny",
    "\u{85}",
    "x\u{2028}y",
    "\u{2029}",
    "\u{FEFF}x",
    "\u{FFFE}",
    "\u{FFFF}",
    "\u{0}",
    "\u{7F}",
    "\u{9F}",
    "\u{1B}",
    "é",
    "训练",
    "\u{A0}x\u{A0}",
    "x\u{3000}#y",
    "x:\u{3000}",
    "\u{1F600}",
    "\u{E000}",
    "a\tb",
    "a\t\nb",
];

/// Characters strings are built from.
const ALPHABET: &[char] = &[
    '0',
    '1',
    '7',
    '9',
    '.',
    'e',
    'E',
    '-',
    '+',
    ':',
    '#',
    '\'',
    '"',
    '!',
    '&',
    '*',
    '|',
    '>',
    '%',
    '@',
    '`',
    '{',
    '}',
    '[',
    ']',
    ',',
    ' ',
    ' ',
    '\t',
    '\n',
    '\n',
    '\r',
    'a',
    'x',
    'o',
    'b',
    'n',
    'y',
    '_',
    'T',
    'Z',
    '?',
    '~',
    '=',
    '<',
    '\\',
    '/',
    '\u{85}',
    '\u{2028}',
    '\u{2029}',
    '\u{FEFF}',
    '\u{0}',
    '\u{7}',
    '\u{1B}',
    '\u{7F}',
    '\u{9F}',
    '\u{A0}',
    'é',
    '训',
    '\u{3000}',
    '\u{FFFE}',
    '\u{1F600}',
];

/// Characters numbers, times and dates are built from.
const NUMERIC: &[char] = &[
    '0', '1', '2', '5', '6', '9', '_', ':', '.', 'e', 'E', '+', '-', 'x', 'o', 'b', 'T', 't', ' ',
    ',', 'Z', 'a', 'f',
];

fn word(rng: &mut Rng, alphabet: &[char], max: usize) -> String {
    let len = rng.below(max + 1);
    (0..len).map(|_| *rng.pick(alphabet)).collect()
}

fn string(rng: &mut Rng) -> String {
    match rng.below(12) {
        0..=2 => (*rng.pick(WORDS)).to_owned(),
        3..=4 => word(rng, ALPHABET, 10),
        5..=6 => {
            // Number-like: often a digit first, then digits and separators.
            let mut s = String::new();
            if rng.chance(30) {
                s.push(*rng.pick(&['+', '-', '.', '_']));
            }
            s.push(*rng.pick(&['0', '1', '2', '9']));
            s + &word(rng, NUMERIC, 8)
        }
        7 => {
            // Date and time shapes.
            let mut s = format!(
                "{:04}-{}-{}",
                rng.below(10_000),
                rng.below(13),
                rng.below(32)
            );
            if rng.chance(70) {
                s.push(*rng.pick(&['T', 't', ' ', '\t']));
                s += &format!("{}:{:02}:{}", rng.below(24), rng.below(60), rng.below(60));
                s += &word(rng, &['.', ',', '1', ' ', 'Z', '+', '-', ':', '0', '5'], 6);
            }
            s
        }
        8..=9 => {
            // Multi-line text: indented lines, blank lines, trailing breaks.
            let lines = 1 + rng.below(4);
            let mut s = String::new();
            for i in 0..lines {
                if i > 0 {
                    s.push('\n');
                }
                if rng.chance(30) {
                    s += &" ".repeat(1 + rng.below(3));
                }
                if rng.chance(80) {
                    s += &word(rng, ALPHABET, 8).replace('\n', "");
                }
            }
            s + &"\n".repeat(rng.below(4))
        }
        10 => "\n".repeat(1 + rng.below(3)),
        _ => format!("{}{}", rng.pick(WORDS), word(rng, ALPHABET, 4)),
    }
}

fn key(rng: &mut Rng) -> String {
    if rng.chance(1) {
        // Past YAML's 1,024-character limit for an implicit key.
        return "k".repeat(1020 + rng.below(10)) + &string(rng);
    }
    if rng.chance(40) {
        return (*rng.pick(&["name", "image", "app.kubernetes.io/name", "a-b_c.d", "x"]))
            .to_owned();
    }
    string(rng)
}

fn scalar(rng: &mut Rng) -> Value {
    match rng.below(10) {
        0 => Value::Null,
        1 => Value::Bool(rng.chance(50)),
        2 => json!(rng.next_u64() as i64),
        3 => json!(rng.below(100) as i64 - 50),
        4 => json!(rng.next_u64()),
        5 => {
            let f = *rng.pick(&[
                0.0,
                -0.0,
                0.1,
                1.0,
                -2.5,
                1e20,
                1e-7,
                123_456.789,
                f64::MAX,
                f64::MIN_POSITIVE,
                5e-324,
            ]);
            Value::Number(Number::from_f64(f).expect("finite"))
        }
        _ => Value::String(string(rng)),
    }
}

fn value(rng: &mut Rng, depth: usize) -> Value {
    if depth == 0 {
        return scalar(rng);
    }
    match rng.below(10) {
        0..=2 => {
            let n = rng.below(5);
            Value::Array((0..n).map(|_| value(rng, depth - 1)).collect())
        }
        3..=5 => map(rng, depth - 1),
        _ => scalar(rng),
    }
}

fn map(rng: &mut Rng, depth: usize) -> Value {
    let n = rng.below(5);
    let mut m = Map::new();
    for _ in 0..n {
        m.insert(key(rng), value(rng, depth));
    }
    Value::Object(m)
}

/// The documents every check runs on: a mapping at the root, as trainc
/// writes, and now and then something else.
fn documents(count: usize) -> Vec<Value> {
    let seed = std::env::var("TRAINC_YAML_FUZZ_SEED")
        .ok()
        .and_then(|n| n.parse().ok());
    let mut rng = Rng::new(seed.unwrap_or(0x7472_6169_6E63));
    (0..count)
        .map(|i| match i % 20 {
            0 => value(&mut rng, 3),
            _ => map(&mut rng, 4),
        })
        .collect()
}

/// Where two texts first differ, for a readable failure.
fn first_difference(a: &str, b: &str) -> String {
    let at = a
        .char_indices()
        .zip(b.chars())
        .find(|((_, x), y)| x != y)
        .map_or(a.len().min(b.len()), |((i, _), _)| i);
    format!(
        "first difference at byte {at}:\n ours: {:?}\n theirs: {:?}",
        &a[at.saturating_sub(40)..(at + 40).min(a.len())],
        b.get(at.saturating_sub(40)..(at + 40).min(b.len()))
            .unwrap_or(b),
    )
}

/// Whether `v` holds a multi-line string whose first non-empty line starts
/// with a tab: the one place the emitter departs from serde-saphyr (see
/// [`a_literal_block_led_by_a_tab_gets_an_indentation_indicator`]).
fn has_tab_led_lines(v: &Value) -> bool {
    match v {
        Value::String(s) => {
            s.contains('\n')
                && s.split('\n')
                    .find(|l| !l.is_empty())
                    .is_some_and(|l| l.starts_with('\t'))
        }
        Value::Array(a) => a.iter().any(has_tab_led_lines),
        Value::Object(m) => m
            .iter()
            .any(|(k, v)| has_tab_led_lines(&Value::String(k.clone())) || has_tab_led_lines(v)),
        _ => false,
    }
}

/// Whether `v` holds a string led by `---` and something other than white
/// space (`---x`): the emitter quotes it, serde-saphyr does not (see
/// [`a_string_led_by_three_dashes_never_starts_a_line`]).
fn has_dash_led_strings(v: &Value) -> bool {
    match v {
        Value::String(s) => s
            .strip_prefix("---")
            .and_then(|r| r.chars().next())
            .is_some_and(|c| !c.is_ascii_whitespace()),
        Value::Array(a) => a.iter().any(has_dash_led_strings),
        Value::Object(m) => m.iter().any(|(k, v)| {
            has_dash_led_strings(&Value::String(k.clone())) || has_dash_led_strings(v)
        }),
        _ => false,
    }
}

/// What the Kubernetes multi-document splitter (apimachinery's
/// `YAMLReader`, used by `kubectl apply -f` and Helm) takes for a document
/// separator or rejects as a broken one: any line that starts with `---`.
fn splits(yaml: &str) -> bool {
    yaml.lines().any(|l| l.starts_with("---"))
}

/// `yaml` without the indentation indicators of its block scalars' headers.
fn without_indicators(yaml: &str) -> String {
    yaml.replace("|2-\n", "|-\n")
        .replace("|2+\n", "|+\n")
        .replace("|2\n", "|\n")
}

/// How many random documents: `TRAINC_YAML_FUZZ_CASES`, for a longer run.
fn cases(default: usize) -> usize {
    std::env::var("TRAINC_YAML_FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

#[test]
fn random_documents_match_serde_saphyr_byte_for_byte_and_read_back() {
    for (i, v) in documents(cases(4000)).iter().enumerate() {
        let y = ours(v);
        assert!(!splits(&y), "document {i}\n{y}");
        let theirs = saphyr(v);
        let (a, b) = if has_tab_led_lines(v) {
            (without_indicators(&y), without_indicators(&theirs))
        } else {
            (y.clone(), theirs.clone())
        };
        assert!(
            a == b || has_dash_led_strings(v),
            "document {i}: {}\n{v:#}\n--- ours\n{y}--- serde-saphyr\n{theirs}",
            first_difference(&a, &b)
        );
        let back: Value =
            serde_saphyr::from_str(&y).unwrap_or_else(|e| panic!("document {i}: {e}\n{y}"));
        assert_eq!(back, *v, "document {i} reads back\n{y}");
    }
}

/// Each word alone, as a value, a key and an item, at several depths.
#[test]
fn every_word_matches_and_reads_back() {
    for w in WORDS {
        let v = json!({
            "v": w, *w: w, "l": [w, [w], {*w: [w]}],
            "m": {"n": {*w: {"o": w}}},
        });
        let y = ours(&v);
        assert!(!splits(&y), "{w:?}\n{y}");
        if !has_tab_led_lines(&v) && !has_dash_led_strings(&v) {
            assert_eq!(y, saphyr(&v), "{w:?}");
        }
        assert_eq!(
            serde_saphyr::from_str::<Value>(&y).unwrap(),
            v,
            "{w:?}\n{y}"
        );
    }
}

/// Reads a JSON list of YAML texts from stdin with PyYAML's safe loaders
/// (pure Python and, when built, libyaml, which must agree) and prints the
/// documents as a JSON list; a date, bytes or a non-string key fails.
const LOAD: &str = r#"
docs = []
for i, text in enumerate(json.load(sys.stdin)):
    try:
        doc = yaml.load(text, Loader=yaml.SafeLoader)
        if getattr(yaml, "CSafeLoader", None):
            fast = yaml.load(text, Loader=yaml.CSafeLoader)
            if fast != doc:
                sys.exit(f"document {i}: libyaml reads {fast!r}, PyYAML {doc!r}")
    except yaml.YAMLError as e:
        sys.exit(f"document {i}: {e}\n{text}")
    docs.append(plain(doc, f"document {i}"))
json.dump(docs, sys.stdout)
"#;

/// What PyYAML reads from each of `texts`.
fn pyyaml_read(python: &PathBuf, texts: &[String]) -> Vec<Value> {
    use std::io::Write as _;
    let mut child = Command::new(python)
        .args(["-c", &format!("{}{LOAD}", common::PYYAML_PLAIN)])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python runs");
    let input = serde_json::to_vec(texts).expect("JSON");
    let mut stdin = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let o = child.wait_with_output().expect("python runs");
    writer.join().expect("writer").expect("stdin written");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("JSON")
}

/// PyYAML (YAML 1.1) reads what serde-saphyr (YAML 1.2) reads: the words
/// and a batch of random documents.
#[test]
fn pyyaml_reads_every_document_back() {
    let Some(python) = common::pyyaml() else {
        return;
    };
    let mut docs = documents(cases(4000) / 4);
    docs.extend(WORDS.iter().map(|w| json!({"v": w, *w: [w, {*w: w}]})));
    let texts: Vec<String> = docs.iter().map(ours).collect();
    let back = pyyaml_read(&python, &texts);
    assert_eq!(back.len(), docs.len());
    for ((v, b), y) in docs.iter().zip(&back).zip(&texts) {
        assert_eq!(b, v, "PyYAML reads\n{y}");
    }
}

#[derive(Serialize)]
enum Choice {
    Unit,
    #[serde(rename = "yes")]
    Renamed,
    Newtype(Value),
}

#[derive(Serialize)]
struct Typed {
    plain: Choice,
    renamed: Choice,
    wrapped: Choice,
    list: Vec<Choice>,
    nested: Choice,
    none: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    skipped: Option<u8>,
    small: f32,
    wide: i128,
    huge: u128,
    letter: char,
    tuple: (u8, &'static str),
    unit: (),
    bytes: Bytes,
    bytes_list: Vec<Bytes>,
    ints: BTreeMap<i64, bool>,
    bools: BTreeMap<bool, u8>,
}

struct Bytes(&'static [u8]);

impl Serialize for Bytes {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(self.0)
    }
}

/// What serde's data model has beyond JSON: enum variants, `Option`, wide
/// integers, `f32`, `char`, tuples, bytes, non-string scalar keys.
#[test]
fn typed_values_match_serde_saphyr() {
    let nested = json!({"a": [1, {"b": "2"}], "c": {}, "d": [], "e": "x\n  y\n"});
    let v = Typed {
        plain: Choice::Unit,
        renamed: Choice::Renamed,
        wrapped: Choice::Newtype(json!("on")),
        list: vec![
            Choice::Unit,
            Choice::Newtype(json!([1, 2])),
            Choice::Newtype(nested.clone()),
            Choice::Newtype(json!("l1\nl2")),
            Choice::Newtype(json!({})),
        ],
        nested: Choice::Newtype(nested.clone()),
        none: None,
        skipped: None,
        small: 0.1,
        wide: i128::MIN,
        huge: u128::MAX,
        letter: '#',
        tuple: (7, "08"),
        unit: (),
        bytes: Bytes(b"\x00\xffhello"),
        bytes_list: vec![Bytes(b""), Bytes(b"ab")],
        ints: BTreeMap::from([(-1, true), (2, false)]),
        bools: BTreeMap::from([(true, 1)]),
    };
    assert_eq!(ours(&v), saphyr(&v));
    for root in [
        Choice::Newtype(nested.clone()),
        Choice::Newtype(json!([1, [2, {"x": []}]])),
        Choice::Newtype(json!("text\n")),
        Choice::Unit,
    ] {
        assert_eq!(ours(&root), saphyr(&root));
    }
    for root in [
        json!([]),
        json!({}),
        json!("x"),
        json!(null),
        json!([[[]], [{}]]),
    ] {
        assert_eq!(ours(&root), saphyr(&root));
    }
    assert_eq!(ours(&Bytes(b"xyz")), saphyr(&Bytes(b"xyz")));
}

#[derive(Serialize)]
enum Unsupported {
    Tuple(u8, u8),
    Struct { a: u8 },
}

/// What the emitter does not write is an error, never a panic.
#[test]
fn unsupported_values_are_errors() {
    let mut out = Vec::new();
    let tuple_key = BTreeMap::from([((1, 2), 3)]);
    let e = trainc::emit::yaml::to_writer(&mut out, &tuple_key).unwrap_err();
    assert_eq!(
        e.to_string(),
        "trainc writes only scalars as YAML mapping keys"
    );
    let e = trainc::emit::yaml::to_writer(&mut out, &Unsupported::Tuple(1, 2)).unwrap_err();
    assert!(e.to_string().contains("Unsupported::Tuple"), "{e}");
    let e = trainc::emit::yaml::to_writer(&mut out, &[Unsupported::Struct { a: 1 }]).unwrap_err();
    assert!(e.to_string().contains("Unsupported::Struct"), "{e}");
    let e = trainc::emit::to_yaml("# h\n", &tuple_key).unwrap_err();
    assert_eq!(e, "trainc writes only scalars as YAML mapping keys");
}

/// A literal block whose first non-empty line starts with a tab: serde-saphyr
/// writes `|-` and lets the reader find the indentation, which YAML 1.2
/// allows but libyaml and its ports (PyYAML's `CSafeLoader`, the Go YAML
/// that kubectl, kustomize and Argo CD read manifests with) reject: "found
/// a tab character where an indentation space is expected". The emitter
/// gives such a block an indentation indicator, as it does a block led by
/// spaces; every other byte is serde-saphyr's.
#[test]
fn a_literal_block_led_by_a_tab_gets_an_indentation_indicator() {
    for (s, header) in [("\tx\ny", "|2-"), ("\n\tx\n", "|2"), ("\t\n\n", "|2+")] {
        let v = json!({"k": s, "l": [s]});
        let y = ours(&v);
        let body = format!("k: {header}\n");
        assert!(y.starts_with(&body), "{y}");
        assert_eq!(
            y,
            saphyr(&v).replace(&header.replace('2', ""), header),
            "{s:?}"
        );
        assert_eq!(serde_saphyr::from_str::<Value>(&y).unwrap(), v, "{y}");
        if let Some(python) = common::pyyaml() {
            assert_eq!(pyyaml_read(&python, std::slice::from_ref(&y)), [v], "{y}");
        }
    }
}

/// Whether a line of YAML opens a folded block scalar (`>`, `>-`, `>+`,
/// with or without an indentation indicator) as a value or list item.
fn opens_folded_block(line: &str) -> bool {
    let line = line.trim_end();
    let Some(at) = line.rfind(": >").map(|i| i + 2).or_else(|| {
        let item = line.trim_start();
        item.starts_with("- >").then(|| line.len() - item.len() + 2)
    }) else {
        return false;
    };
    line[at + 1..]
        .chars()
        .all(|c| c == '-' || c == '+' || c.is_ascii_digit())
}

/// A long single-line string stays one line at any length and depth (a
/// diff of one host more is a one-line change); a string with line
/// breaks is a literal block. Both read back as the same string, by
/// serde-saphyr and by PyYAML.
#[test]
fn long_strings_are_one_line_and_multi_line_strings_literal_blocks() {
    // A shell command of 300 characters: words and spaces.
    let words = "python /app/train.py --worker_hosts=w-0.ml.svc:2222,w-1.ml.svc:2222 --lr=0.1 ";
    let prefix = |len: usize| words.chars().cycle().take(len).collect::<String>();
    let long = prefix(299) + "x";
    assert_eq!(long.chars().count(), 300);
    assert!(long.contains(' ') && !long.starts_with(' ') && !long.ends_with(' '));
    let lines = format!("set -e\n{long}\n  indented: {{x}}\n# not a comment\nlast");
    assert_eq!(lines.lines().count(), 5);
    let v = json!({
        "long": long,
        "lines": lines,
        "lines_nl": format!("{lines}\n"),
        "deep": {"a": [{"b": [long, lines]}]},
    });
    let y =
        String::from_utf8(trainc::emit::to_yaml(&trainc::emit::header(None), &v).unwrap()).unwrap();
    assert!(y.contains(&format!("\nlong: {long}\n")), "{y}");
    assert!(y.contains(&format!("\n    - {long}\n")), "{y}");
    assert!(y.contains("\nlines: |-\n  set -e\n"), "{y}");
    assert!(y.contains("\nlines_nl: |\n  set -e\n"), "{y}");
    assert!(
        y.contains(&format!("\n    - |-\n      set -e\n      {long}\n")),
        "{y}"
    );
    assert!(!y.lines().any(opens_folded_block), "{y}");
    let back: serde_json::Value = serde_saphyr::from_str(&y).unwrap();
    assert_eq!(back, v, "{y}");
    if let Some(python) = common::pyyaml() {
        assert_eq!(pyyaml_read(&python, std::slice::from_ref(&y)), [v], "{y}");
    }

    // Past every width a wrap could have (serde-saphyr folds past 80 by
    // default), at every indentation.
    for len in (60..=320).step_by(7) {
        let s = prefix(len).trim().to_owned();
        let v = json!({"k": s, "l": [[s]], "m": {"n": {"o": s}}});
        let y = String::from_utf8(trainc::emit::to_yaml("", &v).unwrap()).unwrap();
        assert_eq!(y.lines().count(), 6, "{y}");
        assert!(y.lines().all(|l| !opens_folded_block(l)), "{y}");
        assert_eq!(serde_saphyr::from_str::<serde_json::Value>(&y).unwrap(), v);
    }
}

#[test]
fn folded_block_openers_are_recognised() {
    for l in ["a: >", "a: >-", "  a: >+", "- >-", "    - >2-", "  - a: >"] {
        assert!(opens_folded_block(l), "{l}");
    }
    for l in ["a: '>'", "a: x > y", "- --x>1", "a: |-", "- |", "a: >x"] {
        assert!(!opens_folded_block(l), "{l}");
    }
}

/// A string led by `---` is quoted wherever it goes: a root key written
/// plain would start a line with `---`, which the Kubernetes splitter takes
/// for a document separator (`---#x: 1` would be split in two) or refuses
/// (`---x: 1`, "invalid Yaml document separator"), though YAML readers take
/// it for text.
#[test]
fn a_string_led_by_three_dashes_never_starts_a_line() {
    let v = json!({"---x": "---x", "---#x": ["---#x"], "---": "--- x", "...x": "---\tx"});
    let y = ours(&v);
    assert!(!splits(&y), "{y}");
    assert!(y.contains("\"---x\": \"---x\"\n"), "{y}");
    assert!(y.contains("\"---#x\":\n- \"---#x\"\n"), "{y}");
    // Not a marker, so plain as before.
    assert!(y.contains("\n...x: "), "{y}");
    assert_eq!(serde_saphyr::from_str::<Value>(&y).unwrap(), v, "{y}");
    if let Some(python) = common::pyyaml() {
        assert_eq!(pyyaml_read(&python, std::slice::from_ref(&y)), [v], "{y}");
    }
}

/// A variant label past YAML's 1,024-character limit for an implicit key
/// is an explicit `? label` entry, as a long mapping key is, at the root,
/// as a mapping value and as a sequence item.
#[test]
fn a_long_variant_label_is_an_explicit_key() {
    struct Labelled(&'static str, Value);
    impl Serialize for Labelled {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_newtype_variant("Labelled", 0, self.0, &self.1)
        }
    }
    let label: &'static str = Box::leak("v".repeat(1100).into_boxed_str());
    let inner = json!({"a": [1, "b"]});
    for (shape, expect) in [
        (json!(null), json!({label: inner})),
        (json!({"k": null}), json!({"k": {label: inner}})),
        (json!([null]), json!([{label: inner}])),
    ] {
        // The variant where `shape` holds a null.
        let y = match &shape {
            Value::Null => ours(&Labelled(label, inner.clone())),
            Value::Object(_) => ours(&BTreeMap::from([("k", Labelled(label, inner.clone()))])),
            _ => ours(&[Labelled(label, inner.clone())]),
        };
        assert!(y.contains(&format!("? {label}\n")), "{y}");
        assert_eq!(serde_saphyr::from_str::<Value>(&y).unwrap(), expect, "{y}");
        if let Some(python) = common::pyyaml() {
            assert_eq!(
                pyyaml_read(&python, std::slice::from_ref(&y)),
                [expect],
                "{y}"
            );
        }
    }
}
