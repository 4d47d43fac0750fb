//! The grammars of what trainc writes where another program parses it:
//! image references (the distribution reference grammar that Docker,
//! containerd and the kubelet parse) and paths in a Dockerfile. Rules
//! (`validate`) and the library's presets are both checked against them.

use crate::model::job::split_reference;

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
