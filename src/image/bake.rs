//! `docker-bake.hcl`: every image to build, for `docker buildx bake` in CI.
//! HCL rather than JSON so that the file can carry the generated-file header
//! that marks it as trainc's (and lets pruning find it).

use std::fmt::Write as _;

use super::ImageBuild;
use crate::emit;

pub const BAKE_FILE: &str = "docker-bake.hcl";

/// Bake resolves `context` from the directory it runs in (the project root)
/// and `dockerfile` from the context, so both are written that way.
pub fn render(builds: &[ImageBuild], out_shown: &str) -> String {
    let mut s = emit::header(None);
    let _ = writeln!(
        s,
        "# Build every image from the project root:\n#   docker buildx bake -f {out_shown}/{BAKE_FILE} --push\n"
    );
    let names: Vec<&str> = builds.iter().map(|b| b.target.as_str()).collect();
    let _ = writeln!(
        s,
        "group \"default\" {{\n  targets = [{}]\n}}",
        quoted(&names)
    );
    for (b, name) in builds.iter().zip(&names) {
        let file = format!("{out_shown}/{}", b.path);
        let _ = write!(
            s,
            "\ntarget \"{name}\" {{\n  context    = {}\n  dockerfile = {}\n  tags       = [{}]\n  labels = {{\n    \"dev.trainc.source\" = {}\n  }}\n}}\n",
            hcl(&b.context),
            hcl(&relative_to(&b.context, &file)),
            hcl(&b.image),
            hcl(&b.source),
        );
    }
    s
}

fn quoted(items: &[&str]) -> String {
    items.iter().map(|i| hcl(i)).collect::<Vec<_>>().join(", ")
}

/// An HCL string literal; `${` and `%{` would start templates. Control
/// characters, line separators and the like (a definition's file name may
/// hold any) are `\uNNNN` escapes.
fn hcl(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if emit::unsafe_in_comment(c) => {
                let _ = write!(out, "\\u{:04X}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.replace("${", "$${").replace("%{", "%%{") + "\""
}

/// `to`, written relative to the directory `from` (both relative to the
/// same root, normalized).
fn relative_to(from: &str, to: &str) -> String {
    let from: Vec<&str> = from.split('/').filter(|p| *p != ".").collect();
    let to_parts: Vec<&str> = to.split('/').collect();
    let common = from
        .iter()
        .zip(&to_parts)
        .take_while(|(a, b)| a == b)
        .count();
    let mut parts = vec![".."; from.len() - common];
    parts.extend(&to_parts[common..]);
    parts.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_relative_to_the_context() {
        assert_eq!(
            relative_to("jobs/train", "build/ml/mnist/Dockerfile"),
            "../../build/ml/mnist/Dockerfile"
        );
        assert_eq!(relative_to(".", "build/x/Dockerfile"), "build/x/Dockerfile");
        assert_eq!(relative_to("build/src", "build/x/D"), "../x/D");
    }

    #[test]
    fn hcl_strings_are_escaped() {
        assert_eq!(hcl("a\"b${c}"), "\"a\\\"b$${c}\"");
        assert_eq!(hcl("a\rb\u{2028}c\u{85}"), "\"a\\u000Db\\u2028c\\u0085\"");
    }
}
