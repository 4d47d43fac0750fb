//! What listing a directory under `resources` trusts. Kustomize does not
//! copy a listed directory: it runs its `kustomization.yaml`, which may
//! include other directories (trainc's own output among them), fetch remote
//! bases, and generate, patch or transform objects in ways its files do not
//! show. A pull request can change any of that without touching a
//! definition, so the build warns (and `--deny-warnings` refuses) when a
//! listed kustomization, or a local one it includes, does more than list
//! files of its own.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{KUSTOMIZATION_NAMES, clean};
use crate::paths::real;

/// The most kustomization files one listed directory's audit reads: far
/// more than a platform directory nests, and a bound on a loop of includes.
const MAX_FILES: usize = 64;

/// Fields of a kustomization that make or change objects in ways its
/// resource files do not show.
const CHANGING: [&str; 10] = [
    "patches",
    "patchesStrategicMerge",
    "patchesJson6902",
    "configMapGenerator",
    "secretGenerator",
    "generators",
    "transformers",
    "validators",
    "replacements",
    "helmCharts",
];

/// The fields of a kustomization that name other resources.
const INCLUDES: [&str; 3] = ["resources", "bases", "components"];

/// What one audit found: reasons to warn, and the bytes of every
/// kustomization file it read (for the build cache's key: a changed file
/// must be audited again).
#[derive(Debug, Default)]
pub struct Audit {
    pub reasons: Vec<String>,
    pub read: Vec<(PathBuf, Vec<u8>)>,
}

/// Audits the kustomization of the listed directory `dir` (lexically
/// clean) and the local ones it includes. `trainc` are the directories
/// trainc writes, resolved, with how messages name them: the output
/// directory's generated parts and every other directory of the project.
pub fn audit(dir: &Path, shown: &str, trainc: &[(PathBuf, String)]) -> Audit {
    let mut audit = Audit::default();
    let mut queue = vec![(dir.to_path_buf(), shown.to_owned())];
    let mut seen: Vec<PathBuf> = Vec::new();
    while let Some((dir, shown)) = queue.pop() {
        let here = real(&dir);
        if seen.contains(&here) {
            continue;
        }
        seen.push(here);
        if seen.len() > MAX_FILES {
            audit.reasons.push(format!(
                "`{shown}` is one of more than {MAX_FILES} kustomizations it includes; trainc stopped reading them"
            ));
            break;
        }
        let Some((file, bytes)) = read(&dir) else {
            continue;
        };
        let name = format!(
            "{shown}/{}",
            file.file_name().unwrap_or_default().to_string_lossy()
        );
        let value = std::str::from_utf8(&bytes)
            .ok()
            .and_then(|t| serde_saphyr::from_str::<Value>(t).ok());
        audit.read.push((file, bytes));
        let Some(Value::Object(k)) = value else {
            audit.reasons.push(format!(
                "`{name}` cannot be read as YAML, so trainc cannot tell what it does"
            ));
            continue;
        };
        for field in CHANGING.iter().filter(|f| k.contains_key(**f)) {
            audit.reasons.push(format!(
                "`{name}` uses `{field}`, which makes or changes objects in ways its files do not show"
            ));
        }
        for entry in INCLUDES
            .iter()
            .filter_map(|f| k.get(*f))
            .filter_map(Value::as_array)
            .flatten()
            .filter_map(Value::as_str)
        {
            if remote(entry) && !dir.join(entry).exists() {
                audit.reasons.push(format!(
                    "`{name}` names the remote base `{entry}`, which Argo CD and Flux fetch when they sync; nothing in the repository shows what it holds"
                ));
                continue;
            }
            let path = clean(&dir.join(entry));
            let resolved = real(&path);
            if let Some((_, what)) = trainc
                .iter()
                .find(|(t, _)| resolved.starts_with(t) || t.starts_with(&resolved))
            {
                audit.reasons.push(format!(
                    "`{name}` includes `{entry}`, which holds {what}: it can rename, move or patch trainc's objects"
                ));
            } else if written_by_trainc(&path) {
                audit.reasons.push(format!(
                    "`{name}` includes `{entry}`, which trainc generated: it can rename, move or patch trainc's objects"
                ));
            } else if path.is_dir() {
                queue.push((path, format!("{shown}/{entry}")));
            }
        }
    }
    audit
}

/// Whether `path` is a file trainc generated, or a directory whose
/// kustomization it generated: another project's or variant's output.
fn written_by_trainc(path: &Path) -> bool {
    let file = if path.is_dir() {
        match KUSTOMIZATION_NAMES
            .iter()
            .map(|n| path.join(n))
            .find(|k| k.is_file())
        {
            Some(k) => k,
            None => return false,
        }
    } else {
        path.to_path_buf()
    };
    super::generated(&file)
}

/// The kustomization file of `dir` and its bytes (at most a definition's
/// size, a regular file only), or `None` when it has none to read.
fn read(dir: &Path) -> Option<(PathBuf, Vec<u8>)> {
    let file = KUSTOMIZATION_NAMES
        .iter()
        .map(|n| dir.join(n))
        .find(|k| k.is_file())?;
    let (f, len) = crate::load::open_regular(&file, "kustomization").ok()?;
    if len > crate::load::MAX_FILE_BYTES {
        return Some((file, Vec::new()));
    }
    let bytes = crate::load::read_capped(f, len).ok()?;
    Some((file, bytes))
}

/// Whether a kustomization entry is fetched from elsewhere: a URL, an scp
/// form (`git@host:org/repo`), or Kustomize's remote form
/// (`github.com/org/repo//dir?ref=v1`).
fn remote(entry: &str) -> bool {
    entry.contains("://")
        || entry.starts_with("git@")
        || entry.contains("?ref=")
        || entry.contains("//")
        || entry
            .split('/')
            .next()
            .is_some_and(|host| host.contains('.') && !host.starts_with('.'))
            && entry.split('/').count() >= 3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_entries_are_told_from_local_ones() {
        for r in [
            "https://example.com/base.yaml",
            "github.com/org/repo//deploy?ref=v1",
            "git@example.com:org/repo",
            "example.com/org/repo",
        ] {
            assert!(remote(r), "{r}");
        }
        for l in ["base", "../platform", "quota.yaml", "team/v1.2/x", "./a"] {
            assert!(!remote(l), "{l}");
        }
    }
}
