//! Before stage 5: the directories `build`, `build --check` and `diff` may
//! plan into.
//!
//! A plan reads, writes and prunes below its root (only what trainc owns,
//! see [`crate::plan::owned`]). A root that holds more than trainc's output
//! (`/`, a home directory, the project, the definitions) would let a build
//! prune the output of every other project below it, and a root inside the
//! definitions would feed the next build its own manifests. Such a directory
//! is refused before anything is read or written, whether it comes from
//! `-o`, `--build-output` or the project file.

use std::path::{Path, PathBuf};

use crate::diagnostic::Diagnostic;
use crate::paths::{clean, real};
use crate::project::Project;
use crate::source::Location;

/// A directory a command would plan into, and where it was set.
pub struct Dest<'a> {
    pub path: &'a Path,
    /// `-o` or `--build-output` when given on the command line.
    pub flag: Option<&'static str>,
    /// Where the project file sets it, as a JSON pointer without the
    /// leading `/`: `output`, `buildOutput`, `variants/cpu/output`.
    pub key: &'a str,
    /// How messages call it: `output directory`, `build directory`,
    /// `output directory of variant `cpu``.
    pub what: &'a str,
    /// The project's own `output` or `buildOutput`: the one definitions are
    /// never read from (the output is skipped when definitions are found;
    /// the build directory holds no YAML), so it may lie among them, as
    /// with `sources: [.]`.
    pub own: bool,
}

/// Refuses, with every reason at once, directories that are not trainc's to
/// prune: the root directory; the home directory or one that contains it;
/// the project root or one that contains it; one that is or contains a
/// directory of definitions (the project's `sources`, the paths given, the
/// `library`), or lies inside one, unless it is the project's own (see
/// [`Dest::own`]); one whose path holds characters that cannot be
/// written into a generated file safely (it is named in the bake file and
/// the Dockerfiles). Also refuses two directories that contain one another.
/// Paths are compared as they resolve: symlinks and `..` followed.
pub fn check(
    project: &Project,
    cwd: &Path,
    paths: &[PathBuf],
    dests: &[Dest],
) -> Result<(), Vec<Diagnostic>> {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute());
    check_with_home(project, cwd, paths, dests, home.as_deref())
}

/// [`check`], with the home directory given.
fn check_with_home(
    project: &Project,
    cwd: &Path,
    paths: &[PathBuf],
    dests: &[Dest],
    home: Option<&Path>,
) -> Result<(), Vec<Diagnostic>> {
    let home = home.map(real);
    let root = real(&project.root);
    let top = real(&project.top());
    // What a build reads: (where it resolves, as given, what it holds).
    let mut sources: Vec<(PathBuf, PathBuf, &str)> = Vec::new();
    for s in project
        .sources
        .iter()
        .cloned()
        .chain(paths.iter().map(|p| cwd.join(p)))
    {
        sources.push((real(&s), s, "definitions"));
    }
    if let Some(l) = &project.library {
        sources.push((real(l), l.clone(), "library files"));
    }
    // The directories of the project's variants, which `-o` elsewhere must
    // keep out of.
    let mut variants: Vec<(&Path, String)> = Vec::new();
    for v in &project.variants {
        variants.push((
            &v.output,
            format!("output directory of variant `{}`", v.name),
        ));
        if let Some(b) = &v.build_output {
            variants.push((b, format!("build directory of variant `{}`", v.name)));
        }
    }
    let mut found = Vec::new();
    for d in dests {
        let at = real(d.path);
        let shown = project.shown_dir(d.path);
        let named = |p: &Path| project.shown_dir(p);
        // As messages name it, and as generated files do (from the root).
        let written = crate::paths::display_name(&project.root, d.path);
        let outside_repo = d.flag.is_none() && !at.starts_with(&top);
        let outside_why = outside(d.path, &at, &top, cwd);
        let why = if let Some(c) = shown
            .chars()
            .chain(written.chars())
            .find(|&c| crate::emit::unsafe_in_comment(c))
        {
            Some(format!(
                "its path holds `{}`, which cannot be written safely into the generated files that name it",
                c.escape_default()
            ))
        } else if at.parent().is_none() {
            Some("it is the root directory".to_owned())
        } else if home.as_deref() == Some(at.as_path()) {
            Some("it is your home directory".to_owned())
        } else if let Some(h) = home.as_deref().filter(|h| h.starts_with(&at)) {
            Some(format!("it contains your home directory `{}`", h.display()))
        } else if at == root {
            Some("it is the project root".to_owned())
        } else if root.starts_with(&at) {
            Some(match named(&project.root).as_str() {
                "." => "it contains the project root, the working directory".to_owned(),
                r => format!("it contains the project root `{r}`"),
            })
        } else if outside_repo {
            Some(outside_why.clone())
        } else if let Some((r, s, kind)) = sources.iter().find(|(r, ..)| r.starts_with(&at)) {
            Some(if *r == at {
                format!("trainc reads {kind} there")
            } else {
                format!("it contains {kind}: `{}`", named(s))
            })
        } else if d.own {
            None
        } else if let Some((v, what)) = variants.iter().find(|(v, _)| {
            let v = real(v);
            v.starts_with(&at) || at.starts_with(&v)
        }) {
            // Another build of the project writes and prunes there.
            Some(format!(
                "it is, contains or lies in `{}`, the {what}",
                named(v)
            ))
        } else {
            sources
                .iter()
                .find(|(r, ..)| at.starts_with(r))
                .map(|(_, s, kind)| {
                    format!(
                        "it lies inside `{}`, where trainc reads {kind}; the next build would read the files it writes there",
                        named(s)
                    )
                })
        };
        if let Some(why) = why {
            // This reason, and not an earlier one, is that it lies outside.
            let outside_repo = outside_repo && why == outside_why;
            // Outside the root, as the project file has it, not absolute.
            let shown = if outside_repo { &written } else { &shown };
            let shown = crate::emit::comment_safe(shown);
            found.push(
                Diagnostic::new(format!(
                    "refusing to use `{shown}` as the {}: {why}",
                    d.what
                ))
                .at(d.flag.is_none().then(|| locate(project, d.key)).flatten())
                .hint(if outside_repo {
                    outside_hint(d)
                } else {
                    hint(d)
                }),
            );
        }
    }
    if found.is_empty() {
        let reals: Vec<PathBuf> = dests.iter().map(|d| real(d.path)).collect();
        for (i, a) in dests.iter().enumerate() {
            for (j, b) in dests.iter().enumerate().skip(i + 1) {
                let (x, y) = (&reals[i], &reals[j]);
                if !(x.starts_with(y) || y.starts_with(x)) {
                    continue;
                }
                let message = if dests.len() == 2 && (i, j) == (0, 1) {
                    "the output and build directories must not contain one another".to_owned()
                } else {
                    format!(
                        "the {} `{}` and the {} `{}` must not contain one another",
                        a.what,
                        project.shown_dir(a.path),
                        b.what,
                        project.shown_dir(b.path)
                    )
                };
                found
                    .push(Diagnostic::new(message).hint(
                        "each directory is pruned on its own; pass directories side by side",
                    ));
            }
        }
    }
    if found.is_empty() { Ok(()) } else { Err(found) }
}

/// Why a directory the repository's content names lies outside the
/// repository: as written, or through a symlink on its way.
fn outside(given: &Path, at: &Path, top: &Path, cwd: &Path) -> String {
    let top = crate::paths::shown_path(cwd, top);
    if clean(given) == at {
        format!("it lies outside the repository `{top}`")
    } else {
        format!(
            "it resolves to `{}`, outside the repository `{top}`",
            crate::emit::comment_safe(&at.to_string_lossy())
        )
    }
}

/// The hint for [`outside`]: the repository names no directory elsewhere;
/// the command line may.
fn outside_hint(d: &Dest) -> String {
    let flag = if d.key.ends_with("buildOutput") {
        "--build-output"
    } else {
        "-o"
    };
    format!(
        "a pull request could otherwise make trainc write and prune another project's files: `{}` in the project file (and any symlink on its way) must stay inside the repository (the directory holding `.git`, else the project root); to write elsewhere, pass `{flag} DIR` on the command line",
        d.key.replace('/', ".")
    )
}

fn hint(d: &Dest) -> String {
    let field = d.key.rsplit('/').next().unwrap_or(d.key);
    let base = if field == "output" { "deploy" } else { "build" };
    let example = match d.key.strip_prefix("variants/") {
        Some(rest) => format!("{base}-{}", rest.split('/').next().unwrap_or_default()),
        None => base.to_owned(),
    };
    let how = match d.flag {
        Some(flag) => format!("pass `{flag}` a directory of its own, e.g. `{flag} {base}`"),
        None => format!(
            "set `{}` in the project file to a directory of its own, e.g. `{field}: {example}`",
            d.key.replace('/', ".")
        ),
    };
    format!(
        "{how}; trainc prunes the generated files it no longer writes below the {}, so it must hold nothing but trainc's output",
        d.what
    )
}

/// Where the project file sets `key`, for pointing at it.
fn locate(project: &Project, key: &str) -> Option<Location> {
    project.doc.as_ref()?.locate(&format!("/{key}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `/`, a home directory and one that holds it are refused without
    /// being looked at (an integration test could not try them safely).
    #[test]
    fn the_root_and_homes_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let home = root.join("home/me");
        std::fs::create_dir_all(&home).unwrap();
        let project = Project {
            root: root.join("p"),
            cwd: root.join("p"),
            file: None,
            sources: vec![root.join("p/jobs")],
            output: root.join("p/deploy"),
            build_output: root.join("p/build"),
            own_output: true,
            library: None,
            resources: Vec::new(),
            cluster: None,
            variants: Vec::new(),
            defaults: Default::default(),
            deny_warnings: false,
            text: None,
            doc: None,
        };
        let refused = |path: &Path| {
            let dests = [Dest {
                path,
                flag: Some("-o"),
                key: "output",
                what: "output directory",
                own: false,
            }];
            check_with_home(&project, &root.join("p"), &[], &dests, Some(&home))
                .err()
                .map(|d| d[0].title())
        };
        let it = |p: &str, why: &str| {
            Some(format!(
                "refusing to use `{p}` as the output directory: {why}"
            ))
        };
        assert_eq!(refused(Path::new("/")), it("/", "it is the root directory"));
        assert_eq!(
            refused(Path::new("/tmp/..")),
            it("/tmp/..", "it is the root directory")
        );
        let shown = |p: &Path| p.display().to_string();
        assert_eq!(
            refused(&home),
            it(&shown(&home), "it is your home directory")
        );
        assert_eq!(
            refused(&root.join("home")),
            it(
                &shown(&root.join("home")),
                &format!("it contains your home directory `{}`", home.display())
            )
        );
        assert_eq!(refused(&root.join("p/deploy")), None);
        assert_eq!(refused(&home.join("out")), None, "below the home is fine");
    }
}
