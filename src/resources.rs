//! Before stage 4: the project's `resources`, objects of the user's own that
//! the root `kustomization.yaml` lists beside trainc's jobs, so that a
//! GitOps controller syncing the output directory syncs them too.
//!
//! What may be listed follows from Kustomize and from ownership. Kustomize
//! loads a directory only through its `kustomization.yaml`, and a file only
//! from inside the kustomization's own directory (its default load
//! restrictor), so a directory may lie anywhere in the project and a file
//! only inside the output directory. trainc prunes what it generated, so
//! nothing it writes may be listed: the result would vanish or change under
//! the user. And what trainc reads (definitions, the library) or writes
//! elsewhere (build directories) is no resource either. Also: warns about
//! YAML in the output directory that nothing lists, which a controller
//! would silently not sync.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

mod audit;

use crate::diagnostic::Diagnostic;
use crate::emit;
use crate::model::project::Resource;
use crate::paths::{clean, real};
use crate::project::Project;

/// The names Kustomize looks for in a directory.
const KUSTOMIZATION_NAMES: [&str; 3] = ["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// `to` relative to the directory `from`, both absolute and clean,
/// `/`-separated; `None` when not UTF-8.
fn relative(from: &Path, to: &Path) -> Option<String> {
    let from: Vec<_> = from.components().collect();
    let to: Vec<_> = to.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<&str> = vec![".."; from.len() - common];
    for c in &to[common..] {
        parts.push(c.as_os_str().to_str()?);
    }
    Some(if parts.is_empty() {
        ".".to_owned()
    } else {
        parts.join("/")
    })
}

/// What the checks of [`entries`] read of one resource, for the build
/// cache's key: where it resolves, what it is, and for a directory which
/// kustomization file it holds and whether trainc wrote that.
pub fn print(path: &Path) -> Vec<u8> {
    // As [`entries`] reads it: cleaned lexically first.
    let path = &clean(path);
    let mut out = real(path).as_os_str().as_encoded_bytes().to_vec();
    out.push(0);
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => {
            out.push(b'd');
            if let Some(k) = KUSTOMIZATION_NAMES
                .iter()
                .map(|n| path.join(n))
                .find(|k| k.is_file())
            {
                out.extend(k.as_os_str().as_encoded_bytes());
                out.push(if generated(&k) { b'g' } else { b'u' });
                // What the audit reads decides its warnings.
                for (file, bytes) in audit::audit(path, "", &[]).read {
                    out.extend(file.as_os_str().as_encoded_bytes());
                    out.push(0);
                    out.extend((bytes.len() as u64).to_le_bytes());
                    out.extend(bytes);
                }
            }
        }
        Ok(m) if m.is_file() => out.extend([b'f', if generated(path) { b'g' } else { b'u' }]),
        Ok(_) => out.push(b'o'),
        Err(_) => out.push(b'-'),
    }
    out
}

/// How `path` relates to the directory `dir`, both resolved: `is`,
/// `contains` or `lies in`; `None` when apart.
fn relation(path: &Path, dir: &Path) -> Option<&'static str> {
    if path == dir {
        Some("is")
    } else if dir.starts_with(path) {
        Some("contains")
    } else if path.starts_with(dir) {
        Some("lies in")
    } else {
        None
    }
}

/// Whether the first bytes of the file at `path` are trainc's header.
fn generated(path: &Path) -> bool {
    use std::io::Read as _;
    let Ok((file, meta)) = crate::plan::open_nofollow(path) else {
        return false;
    };
    if !meta.is_file() {
        return false;
    }
    let mut head = Vec::new();
    let _ = file.take(crate::plan::SNIFF as u64).read_to_end(&mut head);
    emit::is_generated(&head)
}

/// What the root kustomization lists besides the jobs, and the warnings
/// about what listing it trusts (see [`audit`]).
#[derive(Debug, Default)]
pub struct Listed {
    /// Relative to the output directory, sorted, without duplicates.
    pub entries: Vec<String>,
    pub warnings: Vec<Diagnostic>,
}

/// The entries of the root kustomization for `list`, relative to `output`,
/// sorted and without duplicates, with the warnings of [`audit`]; or every
/// reason one cannot be listed, located in the project file. `namespaces`
/// are those trainc generates in `output`; `others` every other directory
/// trainc writes for the project (build directories, other output
/// directories).
pub fn entries(
    project: &Project,
    list: &[Resource],
    output: &Path,
    namespaces: &BTreeSet<&str>,
    others: &[(&Path, &str)],
) -> Result<Listed, Vec<Diagnostic>> {
    let out_clean = clean(output);
    let out_real = real(output);
    let out_shown = project.shown_dir(output);
    // What trainc reads: (where it resolves, as messages name it, what).
    let mut read: Vec<(PathBuf, String, &str)> = project
        .sources
        .iter()
        .map(|s| (real(s), project.shown(s), "definitions"))
        .collect();
    if let Some(l) = &project.library {
        read.push((real(l), project.shown(l), "library files"));
    }
    let mut found = Vec::new();
    let mut warnings = Vec::new();
    let mut entries = BTreeSet::new();
    let trainc = trainc_dirs(&out_real, &out_shown, namespaces, others, project);
    for r in list {
        let at = project.doc.as_ref().and_then(|d| d.locate(&r.pointer));
        let path = project
            .doc
            .as_ref()
            .map(|d| d.dotted(&r.pointer))
            .unwrap_or_default();
        let written = &r.written;
        let refuse = |why: String, hint: &str| {
            Diagnostic::new(why)
                .path(path.clone())
                .at(at.clone())
                .hint(hint.to_owned())
        };
        // Kustomize cleans an entry lexically (`l/../x` is `x`, whatever
        // `l` links to) before the file system resolves it: every check
        // is of that path, the one the kustomization is given.
        let lexical = clean(&r.path);
        if !lexical.starts_with(&project.root) {
            found.push(refuse(
                format!("`{written}` lies outside the project root"),
                "list only files and directories inside the project root; Kustomize reads `..` lexically, before it follows symlinks",
            ));
            continue;
        }
        let meta = match std::fs::metadata(&lexical) {
            Ok(m) => m,
            Err(e) => {
                found.push(refuse(
                    format!("cannot read `{written}`: {e}"),
                    "list files and directories that exist, relative to the project file",
                ));
                continue;
            }
        };
        // Through symlinks too: Kustomize follows them.
        if let Err(d) =
            crate::load::inside_root(&project.root, &lexical, &format!("`{written}`"), "")
        {
            found.push(refuse(
                d.message,
                "list only files and directories inside the project root, also through symlinks",
            ));
            continue;
        }
        let here = real(&lexical);
        let inside_output = here.starts_with(&out_real) && here != out_real;
        let why = if let Some(how) = relation(&here, &out_real).filter(|h| *h != "lies in") {
            Some((
                match how {
                    "is" => format!("`{written}` is the output directory itself"),
                    _ => format!("`{written}` contains the output directory `{out_shown}`"),
                },
                "the root kustomization lists the jobs trainc generates itself; list the files and directories of your own",
            ))
        } else if let Some((how, d, what)) = others
            .iter()
            .find_map(|(d, what)| Some((relation(&here, &real(d))?, d, what)))
        {
            Some((
                match how {
                    "is" => format!("`{written}` is the {what}, which trainc writes"),
                    how => format!(
                        "`{written}` {how} the {what} `{}`, which trainc writes",
                        project.shown_dir(d)
                    ),
                },
                "list only files and directories of your own; trainc prunes what it generated",
            ))
        } else if let Some((how, shown, kind)) = read
            .iter()
            .filter(|_| !inside_output)
            .find_map(|(s, shown, kind)| Some((relation(&here, s)?, shown, kind)))
        {
            Some((
                match how {
                    "is" => format!("`{written}` is where trainc reads {kind}"),
                    how => format!("`{written}` {how} `{shown}`, where trainc reads {kind}"),
                },
                "keep resources apart from the definitions: trainc would read their YAML as definitions",
            ))
        } else if let Some(first) = inside_output
            .then(|| here.strip_prefix(&out_real).ok())
            .flatten()
            .and_then(|rel| rel.components().next())
            .and_then(|c| c.as_os_str().to_str())
            .filter(|c| namespaces.contains(c) || *c == emit::KUSTOMIZATION)
        {
            Some((
                if first == emit::KUSTOMIZATION {
                    format!("`{written}` is the root kustomization trainc writes")
                } else {
                    format!(
                        "`{written}` lies in `{out_shown}/{first}`, the directory trainc generates for namespace `{first}`"
                    )
                },
                "put files of your own beside trainc's directories in the output directory, or in a directory of their own",
            ))
        } else if meta.is_dir() {
            match KUSTOMIZATION_NAMES
                .iter()
                .map(|n| lexical.join(n))
                .find(|k| k.is_file())
            {
                None => Some((
                    format!("`{written}` is a directory without a kustomization.yaml"),
                    "Kustomize reads a directory only through its kustomization.yaml: add one that lists the directory's files",
                )),
                Some(k) if generated(&k) => Some((
                    format!("`{written}` holds a kustomization.yaml trainc generated"),
                    "list only files and directories of your own; trainc prunes what it generated",
                )),
                Some(_) => {
                    let audit = audit::audit(&lexical, written, &trainc);
                    warnings.extend(audit.reasons.into_iter().map(|why| {
                        Diagnostic::warning(why)
                            .path(path.clone())
                            .at(at.clone())
                            .hint("Kustomize runs a listed directory's kustomization.yaml over everything it includes: keep it to files of your own, or review it as you would code (docs/output.md); `--deny-warnings` makes this an error")
                    }));
                    None
                }
            }
        } else if !meta.is_file() {
            Some((
                format!("`{written}` is neither a regular file nor a directory"),
                "list files and directories",
            ))
        } else if !inside_output {
            Some((
                format!("`{written}` is a file outside the output directory `{out_shown}`"),
                "Kustomize loads no file from outside the kustomization's directory (its load restrictor): move the file into the output directory, or into a directory with its own kustomization.yaml and list the directory",
            ))
        } else if generated(&lexical) {
            Some((
                format!("`{written}` is a file trainc generated"),
                "list only files of your own; trainc prunes what it generated",
            ))
        } else {
            None
        };
        if let Some((why, hint)) = why {
            found.push(refuse(why, hint));
            continue;
        }
        match relative(&out_clean, &lexical) {
            Some(rel) => {
                entries.insert(rel);
            }
            None => found.push(refuse(
                format!("`{written}` is not a UTF-8 path"),
                "rename it: the kustomization names it in YAML",
            )),
        }
    }
    if found.is_empty() {
        Ok(Listed {
            entries: entries.into_iter().collect(),
            warnings,
        })
    } else {
        Err(found)
    }
}

/// What trainc writes, resolved, with how [`audit`] names it: the output
/// directory's namespace directories and root kustomization, and every
/// other directory trainc writes for the project.
fn trainc_dirs(
    out_real: &Path,
    out_shown: &str,
    namespaces: &BTreeSet<&str>,
    others: &[(&Path, &str)],
    project: &Project,
) -> Vec<(PathBuf, String)> {
    let mut dirs: Vec<(PathBuf, String)> = namespaces
        .iter()
        .map(|ns| {
            (
                out_real.join(ns),
                format!("trainc's output for namespace `{ns}` (`{out_shown}/{ns}`)"),
            )
        })
        .collect();
    dirs.push((
        out_real.join(emit::KUSTOMIZATION),
        format!("trainc's root kustomization (`{out_shown}`)"),
    ));
    for (d, what) in others {
        dirs.push((real(d), format!("the {what} `{}`", project.shown_dir(d))));
    }
    dirs
}

/// Hidden files and these are not reported as unlisted: they are no
/// resources a controller would expect to sync.
fn yaml(name: &str) -> bool {
    !name.starts_with('.')
        && (name.ends_with(".yaml") || name.ends_with(".yml"))
        && !KUSTOMIZATION_NAMES.contains(&name)
}

/// A warning naming the YAML files in `output` that are not trainc's and
/// that neither an entry of the root kustomization (`entries`, relative to
/// `output`) nor a directory listed there includes: a controller syncing
/// the output directory does not see them. Hidden directories are not
/// looked into, nor are symlinks followed.
pub fn unlisted(output: &Path, shown: &str, entries: &[String]) -> Option<Diagnostic> {
    unlisted_known(output, shown, entries, None)
}

/// Whether a file (its path below the output, its `lstat`) is known to be
/// trainc's.
pub type Known<'a> = dyn Fn(&str, &std::fs::Metadata) -> bool + 'a;

/// [`unlisted`], with `known` telling (from a file's path and `lstat`)
/// the files known to be trainc's without reading them: the build cache's
/// snapshot vouches for them.
pub fn unlisted_known(
    output: &Path,
    shown: &str,
    entries: &[String],
    known: Option<&Known<'_>>,
) -> Option<Diagnostic> {
    if !output.is_dir() {
        return None;
    }
    let mut found = Vec::new();
    unlisted_below(output, output, entries, known, &mut found);
    unlisted_warning(shown, &found)
}

/// The unlisted-files check of the output at `output`, whose root
/// kustomization lists `entries` besides the jobs, as a plan's walk runs it
/// ([`crate::plan::merge`]).
pub struct UnlistedCheck<'a> {
    pub output: &'a Path,
    pub entries: &'a [String],
}

impl crate::plan::merge::Unlisted for UnlistedCheck<'_> {
    fn entry(&self, rel: &str, path: &Path, symlink: bool, owned: bool) -> bool {
        unlisted_entry(rel, path, symlink, self.entries, || owned)
    }

    fn below(&self, dir: &Path, found: &mut Vec<String>) {
        unlisted_below(self.output, dir, self.entries, None, found);
    }
}

/// Whether the entry at `rel` below the output (`path` on disk; a file,
/// a symlink or another kind of entry, not a directory) is a YAML file
/// that [`unlisted`] names; `vouched` says, when asked, whether the build
/// cache knows it for trainc's.
pub fn unlisted_entry(
    rel: &str,
    path: &Path,
    symlink: bool,
    entries: &[String],
    vouched: impl FnOnce() -> bool,
) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    if !yaml(name) {
        return false;
    }
    let listed = entries.iter().any(|e| {
        rel == e
            || rel
                .strip_prefix(e.as_str())
                .is_some_and(|r| r.starts_with('/'))
    });
    if listed {
        return false;
    }
    // trainc's own, current or to be pruned.
    let owned = vouched()
        || matches!(
            crate::plan::read_owned(path, rel),
            Ok(crate::plan::Found::Owned(_) | crate::plan::Found::TooLarge(_))
        )
        || (symlink && generated(path));
    !owned
}

/// Adds to `found` the YAML files below `dir` (`output` or a directory in
/// it) that [`unlisted`] names, in walk order.
pub fn unlisted_below(
    output: &Path,
    dir: &Path,
    entries: &[String],
    known: Option<&Known<'_>>,
    found: &mut Vec<String>,
) {
    let walk = walkdir::WalkDir::new(dir)
        .follow_links(false)
        .sort_by_file_name()
        .min_depth(1)
        .into_iter()
        .filter_entry(|e| !e.file_name().to_string_lossy().starts_with('.'));
    for e in walk.flatten() {
        if e.file_type().is_dir() || e.file_name().to_str().is_none_or(|n| !yaml(n)) {
            continue;
        }
        let Some(rel) = e
            .path()
            .strip_prefix(output)
            .ok()
            .and_then(|r| r.to_str())
            .map(|r| r.replace('\\', "/"))
        else {
            continue;
        };
        let vouched = || known.is_some_and(|k| e.metadata().is_ok_and(|m| k(&rel, &m)));
        if unlisted_entry(&rel, e.path(), e.path_is_symlink(), entries, vouched) {
            found.push(rel);
        }
    }
}

/// The warning naming the `found` files of [`unlisted`], if any.
pub fn unlisted_warning(shown: &str, found: &[String]) -> Option<Diagnostic> {
    if found.is_empty() {
        return None;
    }
    let n = found.len();
    let mut names: Vec<String> = found
        .iter()
        .take(5)
        .map(|f| format!("{shown}/{f}"))
        .collect();
    if n > 5 {
        names.push(format!("and {} more", n - 5));
    }
    let (files, it) = if n == 1 {
        ("a YAML file", "it")
    } else {
        ("YAML files", "them")
    };
    Some(
        Diagnostic::warning(format!(
            "{shown} holds {files} that trainc did not write and that its kustomization.yaml does not list: {}; Argo CD and Flux will not sync {it}",
            names.join(", ")
        ))
        .hint("list each file, or a directory holding it with its own kustomization.yaml, under `resources` in trainc.yaml; or move it out of the output directory"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_climb_out_lexically() {
        let p = |s: &str| PathBuf::from(s);
        assert_eq!(
            relative(&p("/r/deploy"), &p("/r/deploy/a.yaml")).as_deref(),
            Some("a.yaml")
        );
        assert_eq!(
            relative(&p("/r/deploy"), &p("/r/platform")).as_deref(),
            Some("../platform")
        );
        assert_eq!(
            relative(&p("/r/gitops/deploy"), &p("/r/platform/x")).as_deref(),
            Some("../../platform/x")
        );
        assert_eq!(clean(&p("/r/deploy/../x/./y")), p("/r/x/y"));
    }
}
