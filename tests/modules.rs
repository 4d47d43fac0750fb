//! The modules' layering: no module of `src/` imports one that imports it
//! back, directly or through others (ARCHITECTURE.md lists the layers).
//! A circle means two concerns that cannot be read, tested or changed
//! apart; this test names the one it finds, with the lines that make it.
//!
//! Read from the source text: every `crate::name` path and every name in a
//! `use crate::{…}` group outside comments and `#[cfg(test)]` modules.
//! Submodules count as their top-level module.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Top-level module → the modules it uses → one line that does.
type Graph = BTreeMap<String, BTreeMap<String, String>>;

fn top_module(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(name, "lib" | "main")).then(|| name.to_owned())
}

/// The code of a file without its unit tests: they may reach anywhere.
fn without_tests(text: &str) -> &str {
    match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    }
}

/// The modules named by `crate::x` paths in `code`.
fn used(code: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    // `use crate::{a, b::{c, d}}` may span lines: join each group first.
    let mut joined = String::new();
    let mut depth = 0usize;
    for line in code.lines() {
        let t = line.trim();
        if t.starts_with("//") {
            continue;
        }
        joined.push_str(t);
        depth += t.matches('{').count();
        depth = depth.saturating_sub(t.matches('}').count());
        if depth == 0 || !joined.starts_with("use crate::{") {
            let statement = std::mem::take(&mut joined);
            depth = 0;
            for name in names(&statement) {
                out.push((name, statement.clone()));
            }
        } else {
            joined.push(' ');
        }
    }
    out
}

fn names(statement: &str) -> BTreeSet<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
            .collect()
    };
    let mut found = BTreeSet::new();
    for (i, _) in statement.match_indices("crate::") {
        let rest = &statement[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level entries of the group: split at depth-0 commas.
            let mut depth = 0;
            let mut start = 0;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        found.insert(ident(group[start..j].trim()));
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        found.insert(ident(group[start..j].trim()));
                        start = j + 1;
                    }
                    _ => {}
                }
            }
        } else {
            found.insert(ident(rest));
        }
    }
    found.remove("");
    found
}

fn graph() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph = Graph::new();
    for entry in walkdir::WalkDir::new(&src).sort_by_file_name() {
        let entry = entry.unwrap();
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "rs") || path.ends_with("tests.rs") {
            continue;
        }
        let Some(from) = top_module(&src, path) else {
            continue;
        };
        let text = std::fs::read_to_string(path).unwrap();
        let edges = graph.entry(from.clone()).or_default();
        for (to, line) in used(without_tests(&text)) {
            if to != from {
                let shown = format!("{}: {line}", path.strip_prefix(&src).unwrap().display());
                edges.entry(to).or_insert(shown);
            }
        }
    }
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    for edges in graph.values_mut() {
        edges.retain(|to, _| modules.contains(to));
    }
    graph
}

/// A circle in `graph`, as the modules along it, if there is one.
fn circle(graph: &Graph) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Seen {
        Open,
        Done,
    }
    fn visit(
        graph: &Graph,
        module: &str,
        seen: &mut BTreeMap<String, Seen>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        seen.insert(module.to_owned(), Seen::Open);
        path.push(module.to_owned());
        for to in graph[module].keys() {
            match seen.get(to) {
                Some(Seen::Open) => {
                    let start = path.iter().position(|m| m == to).unwrap();
                    let mut c = path[start..].to_vec();
                    c.push(to.clone());
                    return Some(c);
                }
                Some(Seen::Done) => {}
                None => {
                    if let Some(c) = visit(graph, to, seen, path) {
                        return Some(c);
                    }
                }
            }
        }
        path.pop();
        seen.insert(module.to_owned(), Seen::Done);
        None
    }
    let mut seen = BTreeMap::new();
    for module in graph.keys() {
        if !seen.contains_key(module)
            && let Some(c) = visit(graph, module, &mut seen, &mut Vec::new())
        {
            return Some(c);
        }
    }
    None
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let graph = graph();
    assert!(graph.len() > 20, "modules found: {:?}", graph.keys());
    if let Some(c) = circle(&graph) {
        let lines: Vec<String> = c
            .windows(2)
            .map(|w| format!("  {} -> {}  ({})", w[0], w[1], graph[&w[0]][&w[1]]))
            .collect();
        panic!("modules in a circle:\n{}", lines.join("\n"));
    }
}

#[test]
fn the_reader_sees_grouped_and_multi_line_imports() {
    let code = "use crate::{a, b::{c, d}};\nuse crate::{\n    e::F,\n    g,\n};\n// crate::h\nlet x = crate::i::j();\n";
    let found: BTreeSet<String> = used(code).into_iter().map(|(m, _)| m).collect();
    let want: BTreeSet<String> = ["a", "b", "e", "g", "i"].map(String::from).into();
    assert_eq!(found, want);
    let mut g = Graph::new();
    for (from, to) in [("a", "b"), ("b", "c"), ("c", "a")] {
        g.entry(from.into())
            .or_default()
            .insert(to.into(), String::new());
    }
    assert_eq!(circle(&g).unwrap(), ["a", "b", "c", "a"]);
    g.get_mut("c").unwrap().clear();
    assert_eq!(circle(&g), None);
}
