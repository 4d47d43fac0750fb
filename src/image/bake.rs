//! `docker-bake.hcl`: every image to build, for `docker buildx bake` in CI.
//! HCL rather than JSON so that the file can carry the generated-file header
//! that marks it as trainc's (and lets pruning find it).

use std::fmt::Write as _;

use std::path::Path;

use super::ImageBuild;
use crate::emit;
use crate::paths::clean;

pub const BAKE_FILE: &str = "docker-bake.hcl";

/// Bake resolves `context` from the directory it runs in (the project root)
/// and `dockerfile` from the context, so both are written that way:
/// `dockerfiles` are each build's Dockerfile relative to its context (see
/// [`dockerfile_from_context`]).
pub fn render(builds: &[ImageBuild], out_shown: &str, dockerfiles: &[String]) -> String {
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
    for ((b, name), dockerfile) in builds.iter().zip(&names).zip(dockerfiles) {
        let _ = write!(
            s,
            "\ntarget \"{name}\" {{\n  context    = {}\n  dockerfile = {}\n  tags       = [{}]\n  labels = {{\n    \"dev.trainc.source\" = {}\n  }}\n}}\n",
            hcl(&b.context),
            hcl(dockerfile),
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

/// The Dockerfile at `path` in the build directory `build_output`, written
/// relative to the build context `context` (relative to `root`). Computed
/// from absolute paths: a context above the project root (`../shared/code`)
/// is climbed out of by the names of the directories on the way back, which
/// only the absolute paths know.
pub fn dockerfile_from_context(
    root: &Path,
    context: &str,
    build_output: &Path,
    path: &str,
) -> String {
    let from = clean(&root.join(context));
    let to = clean(&build_output.join(path));
    crate::paths::display_name(&from, &to)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_relative_to_the_context() {
        let root = Path::new("/repo/team/project");
        let build = root.join("build");
        let d = |context: &str, path: &str| dockerfile_from_context(root, context, &build, path);
        assert_eq!(
            d("jobs/train", "ml/mnist/Dockerfile"),
            "../../build/ml/mnist/Dockerfile"
        );
        assert_eq!(d(".", "x/Dockerfile"), "build/x/Dockerfile");
        assert_eq!(d("build/src", "x/D"), "../x/D");
        // Above the project root: back down through its name.
        assert_eq!(
            d("../shared/code", "ml/x/Dockerfile"),
            "../../project/build/ml/x/Dockerfile"
        );
        assert_eq!(
            d("../../code", "ml/x/Dockerfile"),
            "../team/project/build/ml/x/Dockerfile"
        );
    }

    #[test]
    fn hcl_strings_are_escaped() {
        assert_eq!(hcl("a\"b${c}"), "\"a\\\"b$${c}\"");
        assert_eq!(hcl("a\rb\u{2028}c\u{85}"), "\"a\\u000Db\\u2028c\\u0085\"");
    }
}
