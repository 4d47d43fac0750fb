//! Paths: how they are named in messages and in generated files (relative,
//! with `/` separators on every platform, so that nothing trainc prints or
//! writes depends on where the repository is checked out), and where they
//! resolve, for telling whether one lies inside another.

use std::path::{Component, Path, PathBuf};

/// A directory as messages name it: relative below the working directory,
/// absolute elsewhere (`../../../tmp/x` helps nobody).
pub fn shown_dir(cwd: &Path, dir: &Path) -> String {
    let s = display_name(cwd, dir);
    if s.is_empty() {
        ".".to_owned()
    } else if s.starts_with("../") {
        dir.to_string_lossy().into_owned()
    } else {
        s
    }
}

/// [`shown_dir`] in a project whose `root` holds the working directory: a
/// directory of the project is named relative to the working directory
/// even above it (`../deploy` when trainc runs in `jobs/`), as git names
/// paths; any other outside it, absolutely.
pub fn shown_dir_in(root: &Path, cwd: &Path, dir: &Path) -> String {
    let s = display_name(cwd, dir);
    let inside = |p: &Path| {
        let d = display_name(root, p);
        !d.starts_with("..") && !d.starts_with('/')
    };
    if s.starts_with("../") && cwd.starts_with(root) && inside(dir) {
        s
    } else {
        shown_dir(cwd, dir)
    }
}

/// A file or directory as messages name it: relative to the working
/// directory (`.` for itself), climbing out with `..`.
pub fn shown_path(cwd: &Path, path: &Path) -> String {
    let s = display_name(cwd, path);
    if s.is_empty() { ".".to_owned() } else { s }
}

/// A relative path cleaned lexically and `/`-separated: `jobs/../train` →
/// `train`, `jobs/./x` → `jobs/x`, nothing → `.`. Leading `..` stay.
pub fn normalize(path: &Path) -> String {
    use std::path::Component;
    let mut parts: Vec<String> = Vec::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir if parts.last().is_some_and(|p| p != "..") => {
                parts.pop();
            }
            other => parts.push(other.as_os_str().to_string_lossy().into_owned()),
        }
    }
    if parts.is_empty() {
        ".".to_owned()
    } else {
        parts.join("/")
    }
}

/// How a path is shown to users and in generated headers: relative to the
/// project root when it lies below it, with `/` separators on every platform.
pub fn display_name(root: &Path, path: &Path) -> String {
    use std::path::Component;
    // Most paths are below the root: what follows it, without collecting
    // both paths' components (every build names every definition file).
    if let Ok(rest) = path.strip_prefix(root) {
        let mut out = String::with_capacity(rest.as_os_str().len());
        for c in rest
            .components()
            .filter(|c| !matches!(c, Component::CurDir))
        {
            if !out.is_empty() {
                out.push('/');
            }
            out.push_str(&c.as_os_str().to_string_lossy());
        }
        return out;
    }
    // Outside the root the path climbs out with `..`, so it still does not
    // depend on where the repository is checked out.
    let normal = |p: &Path| -> Vec<String> {
        p.components()
            .filter(|c| !matches!(c, Component::CurDir))
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect()
    };
    let (root_parts, parts) = (normal(root), normal(path));
    let common = root_parts
        .iter()
        .zip(&parts)
        .take_while(|(a, b)| a == b)
        .count();
    if common == 0 && !root_parts.is_empty() {
        return path.to_string_lossy().into_owned();
    }
    let (root, path) = (root_parts, parts);
    let mut parts: Vec<String> = vec!["..".to_owned(); root.len() - common];
    parts.extend(path[common..].iter().cloned());
    parts.join("/")
}

/// `path` cleaned lexically: `.` dropped, `..` taking one component off.
pub fn clean(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// `path` with symlinks resolved as far as it exists, and cleaned
/// lexically beyond: where it is, for telling whether one lies in another.
pub fn real(path: &Path) -> PathBuf {
    let mut existing = path;
    let mut rest = Vec::new();
    loop {
        if let Ok(r) = existing.canonicalize() {
            let mut out = r;
            for c in rest.iter().rev() {
                match c {
                    Component::ParentDir => {
                        out.pop();
                    }
                    Component::Normal(n) => out.push(n),
                    _ => {}
                }
            }
            return out;
        }
        match (existing.parent(), existing.components().next_back()) {
            (Some(parent), Some(last)) => {
                rest.push(last);
                existing = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// The top of the repository that holds `root`: the nearest directory with a
/// `.git` entry, else `root` itself (see [`crate::project::Project::top`]).
pub fn repository_top(root: &Path) -> PathBuf {
    root.ancestors()
        .find(|d| d.join(".git").symlink_metadata().is_ok())
        .unwrap_or(root)
        .to_path_buf()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_normalize_lexically() {
        assert_eq!(normalize(Path::new("jobs/../train")), "train");
        assert_eq!(normalize(Path::new("./jobs/./x")), "jobs/x");
        assert_eq!(normalize(Path::new("../a/../../b")), "../../b");
        assert_eq!(normalize(Path::new("jobs/..")), ".");
    }

    #[test]
    fn display_names_are_relative_to_the_root() {
        let root = Path::new("/repo/ml");
        assert_eq!(
            display_name(root, Path::new("/repo/ml/jobs/a.yaml")),
            "jobs/a.yaml"
        );
        assert_eq!(
            display_name(root, Path::new("/repo/shared/b.yaml")),
            "../shared/b.yaml"
        );
        assert_eq!(display_name(root, Path::new("/repo/ml")), "");
        assert_eq!(display_name(Path::new("/"), Path::new("/x/y")), "x/y");
        // `.` components count for nothing, below the root or not.
        for (root, path) in [
            ("/repo/ml", "/repo/ml/./jobs//a.yaml"),
            ("./ml", "ml/jobs/a.yaml"),
            ("ml", "./ml/jobs/a.yaml"),
            (".", "./jobs/a.yaml"),
            (".", "jobs/a.yaml"),
        ] {
            assert_eq!(
                display_name(Path::new(root), Path::new(path)),
                "jobs/a.yaml",
                "{root} {path}"
            );
        }
    }

    #[test]
    fn real_resolves_symlinks_and_dots_beyond_what_exists() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        std::fs::create_dir(base.join("a")).unwrap();
        std::os::unix::fs::symlink(base.join("a"), base.join("link")).unwrap();
        assert_eq!(real(&base.join("link/x/../y")), base.join("a/y"));
        assert_eq!(real(&base.join("link/..")), base);
        assert_eq!(
            real(&base.join("new/../../z")),
            base.parent().unwrap().join("z")
        );
    }
}
