//! Mutations of YAML files: structure-aware (lines as keys, values and
//! blocks; the parsed tree), YAML features (anchors, aliases, tags, deep
//! nesting, several documents) and raw bytes.

use serde_json::{Map, Value};

use super::rng::Rng;

/// Words worth trying: every key and enum value of the schemas (but the
/// Kubernetes pod template's, hundreds that would drown trainc's own; the
/// patches fixture brings the common ones), and the scalars of the seed
/// files. Mutations draw from it so that they reach past "unknown field"
/// into the rules.
pub struct Vocab {
    pub keys: Vec<String>,
    pub words: Vec<String>,
}

impl Vocab {
    pub fn new(schemas: &[&str], seeds: &[&str]) -> Self {
        let mut keys = Vec::new();
        let mut words = Vec::new();
        for s in schemas {
            let v: Value = serde_json::from_str(s).expect("schema is JSON");
            harvest_schema(&v, &mut keys, &mut words);
        }
        for s in seeds {
            for line in s.lines() {
                if let Some((k, v)) = key_value(line) {
                    keys.push(k.to_owned());
                    if !v.is_empty() {
                        words.push(v.to_owned());
                    }
                }
            }
        }
        keys.sort();
        keys.dedup();
        words.sort();
        words.dedup();
        Vocab { keys, words }
    }
}

fn harvest_schema(v: &Value, keys: &mut Vec<String>, words: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if k.starts_with("io.k8s.") {
                    continue;
                }
                match (k.as_str(), x) {
                    ("properties", Value::Object(p)) => keys.extend(p.keys().cloned()),
                    ("enum", Value::Array(e)) => words.extend(e.iter().filter_map(|w| match w {
                        Value::String(s) => Some(s.clone()),
                        _ => None,
                    })),
                    _ => {}
                }
                harvest_schema(x, keys, words);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| harvest_schema(x, keys, words)),
        _ => {}
    }
}

/// Strings that have broken parsers, emitters and renderers before: YAML
/// syntax, line breaks YAML 1.1 knows and 1.2 does not, bidirectional
/// overrides, control characters, lookalikes of the other types.
const STRINGS: &[&str] = &[
    "",
    " ",
    "\t",
    "-",
    "--",
    "--flag=1",
    ":",
    ": ",
    "#",
    " #x",
    "*",
    "&a",
    "!",
    "!!str",
    "|",
    ">",
    "?",
    "@",
    "`",
    "%",
    "\"",
    "'",
    "{",
    "}",
    "[",
    "]",
    ",",
    "---",
    "...",
    "null",
    "~",
    "true",
    "yes",
    "on",
    "NO",
    "0",
    "0.0",
    "1e3",
    "0x1F",
    ".inf",
    ".nan",
    "1Gi",
    "500m",
    "-1Gi",
    "1e400",
    "0.0000001",
    "é",
    "日本語",
    "\u{202E}evil\u{202C}",
    "\u{200F}",
    "\u{2028}",
    "a\u{2028}images: [{name: x, newName: evil}]\u{2028}#",
    "\u{2029}",
    "\u{0085}",
    "a\u{0085}b: c",
    "\u{0000}",
    "a\u{0000}b",
    "\u{FEFF}",
    "\u{1F600}",
    "e\u{0301}",
    "\u{FFFD}",
    "\u{007F}",
    "\u{001B}[31mred",
    "\r",
    "\n",
    "a\nb",
    "a\r\nkind: Secret",
    "\nkind: Secret\n",
    "$(HOME)",
    "${HOME}",
    "{{ x }}",
    "{% raw %}",
    "\\",
    "ubuntu\\",
    "a b",
    "A",
    "Z-",
    "-z",
    "a.b",
    "a_b",
    "x:y",
    "x@sha256:0",
    "ubuntu",
    "ubuntu:latest",
    "registry.example.com/a/b@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    "train.py",
    "requirements.txt",
    "nvidia.com/gpu",
    "kubernetes.io/x",
    "jobset",
    "tfjob",
    "kubernetes",
];

/// Large and odd numbers, as YAML text.
const NUMBERS: &[&str] = &[
    "0",
    "-0",
    "1",
    "-1",
    "2",
    "3",
    "7",
    "64",
    "65",
    "999",
    "1000",
    "1001",
    "65535",
    "65536",
    "2147483647",
    "2147483648",
    "-2147483649",
    "4294967296",
    "9007199254740991",
    "9007199254740992",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775809",
    "18446744073709551616",
    "123456789012345678901234567890",
    "1.5",
    "2.0",
    "-0.0",
    "1e3",
    "1e308",
    "1e309",
    "-1e-320",
    "4.9e-324",
    ".inf",
    "-.inf",
    ".nan",
    "0x10",
    "0o17",
    "0b11",
    "1_000",
    "007",
    "+1",
];

/// One edge-case string value.
pub fn edge_string(rng: &mut Rng, vocab: &Vocab) -> String {
    match rng.below(10) {
        0..=3 => (*rng.pick(STRINGS)).to_owned(),
        4 | 5 => rng.pick(&vocab.words).clone(),
        6 => {
            // Long strings, around the lengths limits are usually set at.
            let len = *rng.pick(&[62usize, 63, 64, 253, 254, 1000, 4096, 70_000]);
            let unit = *rng.pick(&["a", "é", "-", "\u{2028}", "ab/"]);
            unit.repeat(len.div_ceil(unit.chars().count()))
                .chars()
                .take(len)
                .collect()
        }
        7 => format!("{}{}", rng.pick(&vocab.words), rng.pick(STRINGS)),
        8 => format!("{}{}", rng.pick(STRINGS), rng.pick(&vocab.words)),
        _ => {
            let n = rng.range(1, 8);
            (0..n)
                .map(|_| char::from_u32(rng.below(0x3000) as u32).unwrap_or('x'))
                .collect()
        }
    }
}

/// An edge-case value rendered as YAML text, to replace a scalar in place.
/// `indent` is that of the line, for block scalars and block collections.
pub fn edge_yaml(rng: &mut Rng, vocab: &Vocab, indent: usize) -> String {
    let pad = " ".repeat(indent + 2);
    match rng.below(14) {
        0..=2 => (*rng.pick(NUMBERS)).to_owned(),
        3..=7 => {
            let s = edge_string(rng, vocab);
            render_string(rng, &s, indent)
        }
        8 => rng
            .pick(&[
                "null", "~", "", "true", "false", "[]", "{}", "[[]]", "{a: }",
            ])
            .to_string(),
        9 => format!("[{}]", rng.pick(&vocab.words)),
        10 => format!("{{{}: {}}}", rng.pick(&vocab.keys), rng.pick(&vocab.words)),
        11 => deep(rng),
        12 => {
            let tag = rng.pick(&[
                "!!str",
                "!!int",
                "!!float",
                "!!bool",
                "!!null",
                "!!binary",
                "!!map",
                "!!seq",
                "!!timestamp",
                "!custom",
                "!<tag:yaml.org,2002:str>",
                "!!python/object:os.system",
            ]);
            format!("{tag} {}", rng.pick(&vocab.words))
        }
        _ => format!(
            "\n{pad}{}: {}\n{pad}- x",
            rng.pick(&vocab.keys),
            rng.pick(NUMBERS)
        ),
    }
}

/// Flow collections nested past any sane depth (the loader caps depth).
fn deep(rng: &mut Rng) -> String {
    let depth = *rng.pick(&[8usize, 31, 32, 33, 100, 5000]);
    if rng.chance(50) {
        format!("{}x{}", "[".repeat(depth), "]".repeat(depth))
    } else {
        format!("{}x{}", "{a: ".repeat(depth), "}".repeat(depth))
    }
}

/// A string in one of YAML's five scalar styles; plain style may well
/// change the structure, which is the point.
fn render_string(rng: &mut Rng, s: &str, indent: usize) -> String {
    match rng.below(6) {
        0 => serde_json::to_string(s).expect("string"),
        1 => {
            // YAML's own escapes, which JSON lacks.
            let mut out = String::from('"');
            for c in s.chars() {
                match c {
                    '\u{2028}' => out.push_str("\\L"),
                    '\u{2029}' => out.push_str("\\P"),
                    '\u{0085}' => out.push_str("\\N"),
                    '\u{00A0}' => out.push_str("\\_"),
                    '\0' => out.push_str("\\0"),
                    '\u{7}' => out.push_str("\\a"),
                    '\u{1b}' => out.push_str("\\e"),
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    '\n' => out.push_str("\\n"),
                    c => out.push(c),
                }
            }
            out.push('"');
            out
        }
        2 => format!("'{}'", s.replace('\'', "''")),
        3 => {
            let pad = " ".repeat(indent + 2);
            let style = rng.pick(&["|", "|-", "|+", ">", ">-", "|2"]);
            let body: Vec<String> = s.split('\n').map(|l| format!("{pad}{l}")).collect();
            format!("{style}\n{}", body.join("\n"))
        }
        _ => s.to_owned(),
    }
}

/// `key: value` of a line (after indentation and any `- `), if it has one.
pub fn key_value(line: &str) -> Option<(&str, &str)> {
    let t = line
        .trim_start()
        .trim_start_matches("- ")
        .trim_end_matches(['\n', '\r']);
    if t.starts_with('#') {
        return None;
    }
    if let Some((k, v)) = t.split_once(": ") {
        return Some((k.trim(), v.trim()));
    }
    t.strip_suffix(':').map(|k| (k.trim(), ""))
}

fn indent_of(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

/// The block starting at line `i`: the line and every following line
/// indented deeper (a key with its value, a list item with its fields).
fn block(lines: &[String], i: usize) -> std::ops::Range<usize> {
    let ind = indent_of(&lines[i]);
    let mut end = i + 1;
    while end < lines.len() && (lines[end].trim().is_empty() || indent_of(&lines[end]) > ind) {
        end += 1;
    }
    i..end
}

fn split_lines(text: &str) -> Vec<String> {
    text.split_inclusive('\n').map(str::to_owned).collect()
}

fn with_newline(mut s: String) -> String {
    if !s.ends_with('\n') {
        s.push('\n');
    }
    s
}

/// One structure-aware mutation on the lines of `text`.
fn mutate_lines(rng: &mut Rng, text: &str, vocab: &Vocab, others: &[&str]) -> String {
    let mut lines = split_lines(text);
    if lines.is_empty() {
        return format!("{}: {}\n", rng.pick(&vocab.keys), edge_yaml(rng, vocab, 0));
    }
    let i = rng.below(lines.len());
    let b = block(&lines, i);
    match rng.below(12) {
        // Replace a value.
        0..=3 => {
            let line = lines[i].clone();
            let ind = indent_of(&line);
            let value = edge_yaml(rng, vocab, ind);
            let t = line.trim_start();
            lines[i] = if let Some((k, _)) = key_value(&line) {
                let dash = if t.starts_with("- ") { "- " } else { "" };
                format!("{}{dash}{k}: {value}\n", " ".repeat(ind))
            } else if t.starts_with("- ") {
                format!("{}- {value}\n", " ".repeat(ind))
            } else {
                format!("{}{value}\n", " ".repeat(ind))
            };
        }
        // Replace a key.
        4 => {
            if let Some((_, v)) = key_value(&lines[i]) {
                let ind = indent_of(&lines[i]);
                let dash = if lines[i].trim_start().starts_with("- ") {
                    "- "
                } else {
                    ""
                };
                let key = if rng.chance(70) {
                    rng.pick(&vocab.keys).clone()
                } else {
                    let s = edge_string(rng, vocab);
                    render_string(rng, &s, ind)
                };
                lines[i] = format!("{}{dash}{key}: {v}\n", " ".repeat(ind));
            }
        }
        // Delete a line or a block.
        5 => {
            if rng.chance(50) {
                lines.remove(i);
            } else {
                lines.drain(b);
            }
        }
        // Duplicate a block (duplicate key, extra list item) once or many times.
        6 => {
            let copy: Vec<String> = lines[b.clone()].to_vec();
            let times = *rng.pick(&[1usize, 1, 1, 2, 50, 1000]);
            let at = b.end;
            for _ in 0..times {
                lines.splice(at..at, copy.iter().cloned());
            }
        }
        // Swap two blocks.
        7 => {
            let j = rng.below(lines.len());
            let c = block(&lines, j);
            if b.end <= c.start || c.end <= b.start {
                let (first, second) = if b.start < c.start { (b, c) } else { (c, b) };
                let a: Vec<String> = lines[first.clone()].to_vec();
                let s: Vec<String> = lines[second.clone()].to_vec();
                lines.splice(second, a);
                lines.splice(first, s);
            }
        }
        // Insert a known key next to this line.
        8 => {
            let ind = indent_of(&lines[i]);
            let value = edge_yaml(rng, vocab, ind);
            let key = rng.pick(&vocab.keys).clone();
            lines.insert(i + 1, format!("{}{key}: {value}\n", " ".repeat(ind)));
        }
        // Re-indent.
        9 => {
            let l = lines[i].clone();
            lines[i] = match rng.below(4) {
                0 => format!(" {l}"),
                1 => l.strip_prefix(' ').unwrap_or(&l).to_owned(),
                2 => format!("\t{l}"),
                _ => l.trim_start().to_owned(),
            };
        }
        // A line from another seed.
        10 => {
            if let Some(other) = others.get(rng.below(others.len().max(1))) {
                let ol = split_lines(other);
                if !ol.is_empty() {
                    lines.insert(i, with_newline(rng.pick(&ol).clone()));
                }
            }
        }
        // Value → wrong type (list ⇄ map ⇄ scalar).
        _ => {
            if let Some((k, v)) = key_value(&lines[i]) {
                let ind = indent_of(&lines[i]);
                let wrapped = match rng.below(3) {
                    0 => format!("[{v}]"),
                    1 => format!("{{x: {v}}}"),
                    _ => format!("\n{}- {v}", " ".repeat(ind + 2)),
                };
                lines[i] = format!("{}{k}: {wrapped}\n", " ".repeat(ind));
            }
        }
    }
    lines.concat()
}

/// One mutation using YAML features the line mutations do not produce.
fn mutate_yaml_features(rng: &mut Rng, text: &str, vocab: &Vocab) -> String {
    let mut lines = split_lines(text);
    let kv: Vec<usize> = (0..lines.len())
        .filter(|&i| key_value(&lines[i]).is_some_and(|(_, v)| !v.is_empty()))
        .collect();
    match rng.below(9) {
        // Anchor one value, alias it somewhere else.
        0 | 1 if kv.len() >= 2 => {
            let a = *rng.pick(&kv);
            let b = *rng.pick(&kv);
            let name = rng.pick(&["a", "x", "\u{e9}", "a-b"]).to_string();
            if let Some((k, v)) = key_value(&lines[a]).map(|(k, v)| (k.to_owned(), v.to_owned())) {
                let ind = indent_of(&lines[a]);
                lines[a] = format!("{}{k}: &{name} {v}\n", " ".repeat(ind));
            }
            if let Some(k) = key_value(&lines[b]).map(|(k, _)| k.to_owned()) {
                let ind = indent_of(&lines[b]);
                lines[b] = format!("{}{k}: *{name}\n", " ".repeat(ind));
            }
        }
        // A merge key.
        2 if !kv.is_empty() => {
            let a = *rng.pick(&kv);
            let ind = indent_of(&lines[a]);
            lines.insert(
                a,
                format!("{}<<: {{{}: 1}}\n", " ".repeat(ind), rng.pick(&vocab.keys)),
            );
        }
        // An alias bomb: mostly small ones that expand to a few thousand
        // nodes, rarely one the parser's node budget must stop (which takes
        // seconds in a debug build).
        3 => {
            let levels = *rng.pick(&[2usize, 3, 3, 4, 4, 4, 4, 4, 4, 9]);
            let mut bomb = String::from("bomb0: &b0 [x, x, x, x, x, x, x, x, x, x]\n");
            for n in 1..levels {
                let p = n - 1;
                bomb.push_str(&format!(
                    "bomb{n}: &b{n} [*b{p}, *b{p}, *b{p}, *b{p}, *b{p}, *b{p}, *b{p}, *b{p}, *b{p}, *b{p}]\n"
                ));
            }
            lines.push(bomb);
        }
        // More aliases than the parser allows.
        8 if !kv.is_empty() && rng.chance(50) => {
            let a = *rng.pick(&kv);
            let ind = indent_of(&lines[a]);
            let aliases = vec!["*z"; 1001].join(", ");
            lines.insert(a, format!("{}zz: [&z 1, {aliases}]\n", " ".repeat(ind)));
        }
        // A tag on a value.
        4 if !kv.is_empty() => {
            let a = *rng.pick(&kv);
            let tag = rng.pick(&[
                "!!str", "!!int", "!!binary", "!!map", "!custom", "!!set", "!!omap",
            ]);
            if let Some((k, v)) = key_value(&lines[a]).map(|(k, v)| (k.to_owned(), v.to_owned())) {
                let ind = indent_of(&lines[a]);
                lines[a] = format!("{}{k}: {tag} {v}\n", " ".repeat(ind));
            }
        }
        // Several documents: a copy (duplicate job), an empty one, a directive.
        5 => {
            let doc = lines.concat();
            let extra = match rng.below(5) {
                0 => format!("---\n{doc}"),
                1 => "---\n".to_owned(),
                2 => "---\n...\n---\n~\n".to_owned(),
                3 => format!("---\n{}", doc.replacen("name: ", "name: x", 1)),
                _ => "--- 5\n".to_owned(),
            };
            if rng.chance(80) {
                lines.push(with_newline(String::new()));
                lines.push(extra);
            } else {
                lines.insert(0, extra);
            }
        }
        6 => {
            let head = rng.pick(&[
                "%YAML 1.1\n---\n",
                "%YAML 1.2\n---\n",
                "%TAG ! tag:x,2000:\n---\n",
                "\u{FEFF}",
                "---\n",
                "--- !!map\n",
            ]);
            lines.insert(0, (*head).to_owned());
        }
        // Whole-file line-ending changes.
        7 => {
            let eol: &&str = rng.pick(&["\r\n", "\r", "\u{2028}", "\u{0085}", "\n\n"]);
            return text.replace('\n', eol);
        }
        _ => {
            // A complex key, a key without value, a flow map.
            let what = rng.pick(&["? [a, b]\n: c\n", "? x\n", "{a: 1, a: 2}\n", "- x\n", "x\n"]);
            let at = rng.below(lines.len() + 1);
            lines.insert(at, (*what).to_owned());
        }
    }
    lines.concat()
}

/// All paths into a JSON value, for picking a node to mutate.
fn paths(v: &Value, at: &mut Vec<PathSeg>, out: &mut Vec<Vec<PathSeg>>) {
    out.push(at.clone());
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                at.push(PathSeg::Key(k.clone()));
                paths(x, at, out);
                at.pop();
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                at.push(PathSeg::Index(i));
                paths(x, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

#[derive(Clone)]
enum PathSeg {
    Key(String),
    Index(usize),
}

fn get_mut<'a>(v: &'a mut Value, path: &[PathSeg]) -> Option<&'a mut Value> {
    path.iter().try_fold(v, |v, seg| match (seg, v) {
        (PathSeg::Key(k), Value::Object(m)) => m.get_mut(k),
        (PathSeg::Index(i), Value::Array(a)) => a.get_mut(*i),
        _ => None,
    })
}

fn edge_value(rng: &mut Rng, vocab: &Vocab) -> Value {
    match rng.below(12) {
        0 => Value::from(*rng.pick(&[i64::MIN, -1, 0, 1, 2, 1000, 1001, 65536, i64::MAX])),
        1 => Value::from(*rng.pick(&[u64::MAX, 1 << 53, (1 << 53) + 1])),
        2 => Value::from(*rng.pick(&[0.5, -0.0, 1e308, 2.0, 1e-300])),
        3..=5 => Value::String(edge_string(rng, vocab)),
        6 => Value::String(rng.pick(&vocab.words).clone()),
        7 => Value::Bool(rng.chance(50)),
        8 => Value::Null,
        9 => Value::Array(vec![]),
        10 => Value::Object(Map::new()),
        _ => {
            let mut m = Map::new();
            m.insert(
                rng.pick(&vocab.keys).clone(),
                Value::String(rng.pick(&vocab.words).clone()),
            );
            Value::Object(m)
        }
    }
}

/// One mutation of the parsed tree, written back as YAML or JSON. `None`
/// when the text does not parse as one document.
fn mutate_tree(rng: &mut Rng, text: &str, vocab: &Vocab) -> Option<String> {
    let mut doc: Value = serde_saphyr::from_str(text).ok()?;
    let mut all = Vec::new();
    paths(&doc, &mut Vec::new(), &mut all);
    let path = rng.pick(&all).clone();
    let replacement = edge_value(rng, vocab);
    let op = rng.below(6);
    let other = rng.pick(&all).clone();
    let other_value = get_mut(&mut doc, &other).map(|v| v.clone());
    let node = get_mut(&mut doc, &path)?;
    match (op, node) {
        (0, node) => *node = replacement,
        (1, Value::Object(m)) if !m.is_empty() => {
            let k = m.keys().nth(rng.below(m.len()))?.clone();
            m.remove(&k);
        }
        (1, Value::Array(a)) if !a.is_empty() => {
            a.remove(rng.below(a.len()));
        }
        (2, Value::Array(a)) if !a.is_empty() => {
            let item = a[rng.below(a.len())].clone();
            let times = *rng.pick(&[1usize, 2, 63, 64, 65, 1000, 1001]);
            a.extend(std::iter::repeat_n(item, times));
        }
        (2, Value::Object(m)) => {
            m.insert(rng.pick(&vocab.keys).clone(), replacement);
        }
        (3, node) => *node = other_value?,
        (4, node) => *node = Value::Array(vec![node.clone()]),
        (_, node) => {
            let mut m = Map::new();
            m.insert(edge_string(rng, vocab), node.clone());
            *node = Value::Object(m);
        }
    }
    Some(if rng.chance(75) {
        serde_saphyr::to_string(&doc).ok()?
    } else {
        serde_json::to_string(&doc).ok()?
    })
}

/// One mutation that keeps the file valid YAML and every value of its type:
/// a string gets another string (quoted as needed), a number another
/// number. These reach validation's rules, compile and emit, where the
/// other mutations mostly stop at the parser or the schema.
fn mutate_gentle(rng: &mut Rng, text: &str, vocab: &Vocab) -> Option<String> {
    if rng.chance(70) {
        return gentle_line(rng, text, vocab);
    }
    let mut doc: Value = serde_saphyr::from_str(text).ok()?;
    let mut all = Vec::new();
    paths(&doc, &mut Vec::new(), &mut all);
    let leaves: Vec<Vec<PathSeg>> = all
        .into_iter()
        .filter(|p| {
            matches!(
                get_mut(&mut doc, p),
                Some(Value::String(_) | Value::Number(_) | Value::Bool(_))
            )
        })
        .collect();
    if leaves.is_empty() {
        return None;
    }
    let path = rng.pick(&leaves).clone();
    let node = get_mut(&mut doc, &path)?;
    *node = match node {
        Value::String(_) => Value::String(edge_string(rng, vocab)),
        Value::Number(n) if n.is_f64() => {
            Value::from(*rng.pick(&[0.0, -0.0, 1e-300, 0.5, 1e300, -1.0]))
        }
        Value::Number(_) => Value::from(*rng.pick(&[
            0i64,
            -1,
            1,
            2,
            7,
            63,
            64,
            65,
            999,
            1000,
            1001,
            65535,
            65536,
            i64::from(i32::MAX),
            i64::from(i32::MAX) + 1,
            1 << 53,
            i64::MAX,
            i64::MIN,
        ])),
        Value::Bool(b) => Value::Bool(!*b),
        _ => return None,
    };
    serde_saphyr::to_string(&doc).ok()
}

/// [`mutate_gentle`] on one `key: value` line with a plain scalar value,
/// keeping the rest of the file as written (comments, flow style).
fn gentle_line(rng: &mut Rng, text: &str, vocab: &Vocab) -> Option<String> {
    let mut lines = split_lines(text);
    let scalar =
        |v: &str| !v.is_empty() && !v.starts_with(['[', '{', '|', '>', '&', '*', '!', '#']);
    let candidates: Vec<usize> = (0..lines.len())
        .filter(|&i| key_value(&lines[i]).is_some_and(|(_, v)| scalar(v)))
        .collect();
    if candidates.is_empty() {
        return None;
    }
    let i = *rng.pick(&candidates);
    let line = lines[i].clone();
    let (k, v) = key_value(&line)?;
    // A trailing comment stays a comment.
    let v = v.split(" #").next().unwrap_or(v);
    let number = v.parse::<f64>().is_ok() && !v.starts_with('"');
    let new = if number {
        (*rng.pick(NUMBERS)).to_owned()
    } else {
        let s = edge_string(rng, vocab);
        if rng.chance(50) {
            serde_json::to_string(&s).ok()?
        } else {
            format!("'{}'", s.replace('\'', "''").replace('\n', "\n\n"))
        }
    };
    let ind = indent_of(&line);
    let dash = if line.trim_start().starts_with("- ") {
        "- "
    } else {
        ""
    };
    lines[i] = format!("{}{dash}{k}: {new}\n", " ".repeat(ind));
    Some(lines.concat())
}

/// One mutation of raw bytes.
fn mutate_bytes(rng: &mut Rng, bytes: &mut Vec<u8>) {
    const INTERESTING: &[&[u8]] = &[
        b"\0",
        b"\xff",
        b"\xc3",
        b"\xe2\x80\xa8",
        b"\xc2\x85",
        b"\xef\xbb\xbf",
        b"\r",
        b"\n",
        b":",
        b"- ",
        b"  ",
        b"\t",
        b"'",
        b"\"",
        b"&",
        b"*",
        b"!",
        b"{",
        b"[",
        b"#",
        b"|",
    ];
    let len = bytes.len();
    match rng.below(7) {
        0 if len > 0 => {
            let i = rng.below(len);
            bytes[i] ^= 1 << rng.below(8);
        }
        1 if len > 0 => {
            let i = rng.below(len);
            bytes[i] = rng.below(256) as u8;
        }
        2 => {
            let at = rng.below(len + 1);
            let ins = rng.pick(INTERESTING);
            bytes.splice(at..at, ins.iter().copied());
        }
        3 if len > 0 => {
            let at = rng.below(len);
            let n = rng.range(1, (len - at).min(64));
            bytes.drain(at..at + n);
        }
        4 if len > 0 => {
            let at = rng.below(len);
            let n = rng.range(1, (len - at).min(64));
            let copy: Vec<u8> = bytes[at..at + n].to_vec();
            let to = rng.below(len + 1);
            bytes.splice(to..to, copy);
        }
        5 => bytes.truncate(rng.below(len + 1)),
        _ => {
            let at = rng.below(len + 1);
            let n = rng.range(1, 8);
            let junk: Vec<u8> = (0..n).map(|_| rng.below(256) as u8).collect();
            bytes.splice(at..at, junk);
        }
    }
}

/// `count` stacked mutations of a file, each keeping it valid YAML with
/// every value of its type when `gentle`. `others` are the other seed files,
/// for splicing.
pub fn mutate(
    rng: &mut Rng,
    input: &[u8],
    vocab: &Vocab,
    others: &[&str],
    count: usize,
    gentle: bool,
) -> Vec<u8> {
    let mut bytes = input.to_vec();
    for _ in 0..count {
        if gentle {
            if let Some(t) = std::str::from_utf8(&bytes)
                .ok()
                .and_then(|t| mutate_gentle(rng, t, vocab))
            {
                bytes = t.into_bytes();
            }
            continue;
        }
        let text = match std::str::from_utf8(&bytes) {
            Ok(t) => t.to_owned(),
            Err(_) => {
                mutate_bytes(rng, &mut bytes);
                continue;
            }
        };
        bytes = match rng.below(20) {
            0..=8 => mutate_lines(rng, &text, vocab, others).into_bytes(),
            9..=13 => mutate_tree(rng, &text, vocab)
                .unwrap_or_else(|| mutate_lines(rng, &text, vocab, others))
                .into_bytes(),
            14..=16 => mutate_yaml_features(rng, &text, vocab).into_bytes(),
            _ => {
                mutate_bytes(rng, &mut bytes);
                bytes
            }
        };
    }
    bytes
}

/// Jinja that has hung, exhausted or crashed template engines: loops and
/// strings past any sane size, unbounded recursion, undefined names, broken
/// delimiters, arithmetic errors.
const JINJA: &[&str] = &[
    "{{ nothing }}",
    "{{ header }}",
    "{{ base_image }}",
    "{{ bake_file }}",
    "{{ entrypoint }}",
    "{{ requirements }}",
    "{{ workdir }}",
    "{{ python }}",
    "{{ package }}",
    "{% include \"Dockerfile.j2\" %}",
    "{% extends \"Dockerfile.j2\" %}",
    "{% raw %}",
    "{{",
    "}}",
    "{%",
    "{# ",
    "{{ 1 / 0 }}",
    "{{ 9223372036854775807 + 1 }}",
    "{{ 99999999999999999999999 * 99999999999 }}",
    "{{ header|upper }}",
    "{{ base_image ~ \"\\\\\" }}",
    "{{ \"\\u2028\" }}",
    "\\\n",
    "\u{2028}",
];

/// Jinja that asks for unbounded time or memory.
const JINJA_HEAVY: &[&str] = &[
    "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}",
    "{% for i in range(100000) %}{{ header }}{% endfor %}",
    "{{ \"x\" * 1000000000 }}",
    "{{ (\"x\" * 100000) * 100000 }}",
    "{% macro m(n) %}{{ m(n) }}{% endmacro %}{{ m(1) }}",
    "{{ range(100000)|map(\"string\")|join(\"x\" * 100000) }}",
];

/// `count` stacked mutations of a template of the library.
pub fn mutate_template(rng: &mut Rng, text: &str, vocab: &Vocab, count: usize) -> Vec<u8> {
    let mut t = text.to_owned();
    for _ in 0..count {
        t = match rng.below(10) {
            0..=5 => {
                // Mostly at the start of a line, where it is a statement of
                // its own; else anywhere.
                let at = if rng.chance(70) {
                    let starts: Vec<usize> = std::iter::once(0)
                        .chain(t.match_indices('\n').map(|(i, _)| i + 1))
                        .collect();
                    *rng.pick(&starts)
                } else {
                    (0..=t.len())
                        .filter(|&i| t.is_char_boundary(i))
                        .nth(rng.below(t.chars().count() + 1))
                        .unwrap_or(t.len())
                };
                let what = if rng.chance(30) {
                    rng.pick(JINJA_HEAVY)
                } else {
                    rng.pick(JINJA)
                };
                format!("{}{what}{}", &t[..at], &t[at..])
            }
            6..=8 => mutate_lines(rng, &t, vocab, &[]),
            _ => {
                let mut b = t.into_bytes();
                mutate_bytes(rng, &mut b);
                return b;
            }
        };
    }
    t.into_bytes()
}
