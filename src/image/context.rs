//! The files of a build context, as `docker build` would send them, and the
//! hash that makes them an image tag.

use std::fs;
use std::path::Path;

use sha2::{Digest as _, Sha256};

use super::dockerignore::DockerIgnore;

/// Hashes the rendered Dockerfile and every file of `context` that the
/// context's `.dockerignore` keeps: relative path, executable bit and bytes,
/// in sorted path order. No mtimes, owners or absolute paths, so the same
/// inputs give the same tag on any machine.
pub fn hash(context: &Path, dockerfile: &[u8], generated: &[&Path]) -> Result<String, String> {
    let mut h = Sha256::new();
    field(&mut h, b"Dockerfile");
    field(&mut h, dockerfile);
    let mut count = 0usize;
    visit(context, generated, |rel, path, ignored| {
        if ignored {
            return Ok(());
        }
        let bytes = fs::read(path).map_err(|e| format!("cannot read {rel}: {e}"))?;
        field(&mut h, rel.as_bytes());
        field(&mut h, if executable(path) { b"x" } else { b"-" });
        field(&mut h, &bytes);
        count += 1;
        Ok(())
    })?;
    field(&mut h, count.to_string().as_bytes());
    Ok(hex(&h.finalize()))
}

/// Everything about `context` that a build can observe: the `.dockerignore`,
/// what [`hash`] reads, and the paths of the ignored files too (validation
/// asks whether an entry point exists, ignored or not). Equal fingerprints
/// mean equal tags and equal validation results, so the build cache
/// ([`crate::cache`]) can skip a context that did not change.
pub fn fingerprint(context: &Path, generated: &[&Path]) -> Result<String, String> {
    let mut h = Sha256::new();
    match fs::read(context.join(".dockerignore")) {
        Ok(bytes) => field(&mut h, &bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => field(&mut h, b"-"),
        Err(e) => return Err(format!("cannot read .dockerignore: {e}")),
    }
    visit(context, generated, |rel, path, ignored| {
        field(&mut h, rel.as_bytes());
        if ignored {
            field(&mut h, b"i");
        } else {
            let bytes = fs::read(path).map_err(|e| format!("cannot read {rel}: {e}"))?;
            field(&mut h, if executable(path) { b"x" } else { b"-" });
            field(&mut h, &bytes);
        }
        Ok(())
    })?;
    Ok(hex(&h.finalize()))
}

/// Calls `each(relative path, path, ignored)` for every file of `context`,
/// in sorted path order. A context must leave out (by `.dockerignore`) the
/// `generated` directories and `.git`: they change whenever the tag does, or
/// with every commit, and the tag would never settle.
fn visit(
    context: &Path,
    generated: &[&Path],
    mut each: impl FnMut(&str, &Path, bool) -> Result<(), String>,
) -> Result<(), String> {
    let generated: Vec<std::path::PathBuf> = generated
        .iter()
        .filter_map(|g| g.canonicalize().ok())
        .collect();
    let context_real = context
        .canonicalize()
        .unwrap_or_else(|_| context.to_path_buf());
    let ignore = match fs::read_to_string(context.join(".dockerignore")) {
        Ok(text) => DockerIgnore::parse(&text)
            .map_err(|(line, e)| format!(".dockerignore line {line}: {e}"))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            DockerIgnore::parse("").map_err(|(_, e)| e)?
        }
        Err(e) => return Err(format!("cannot read .dockerignore: {e}")),
    };
    // Symlinks are visited as the file they point to, as the builder copies it.
    for entry in walkdir::WalkDir::new(context)
        .follow_links(true)
        .sort_by_file_name()
        .min_depth(1)
    {
        let entry = entry.map_err(|e| format!("cannot walk the build context: {e}"))?;
        if !entry.file_type().is_file() {
            continue;
        }
        let rel = entry
            .path()
            .strip_prefix(context)
            .map_err(|e| e.to_string())?
            .components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/");
        if ignore.excludes(&rel) {
            each(&rel, entry.path(), true)?;
            continue;
        }
        let unstable = rel == ".git"
            || rel.starts_with(".git/")
            || generated
                .iter()
                .any(|g| context_real.join(&rel).starts_with(g));
        if unstable {
            let top = rel.split('/').next().unwrap_or(&rel);
            return Err(format!(
                "the build context includes `{top}/`, which changes with every commit or build; add `{top}/` to the context's .dockerignore"
            ));
        }
        each(&rel, entry.path(), false)?;
    }
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Length-prefixed, so no two different inputs give the same byte stream.
fn field(h: &mut Sha256, bytes: &[u8]) {
    h.update((bytes.len() as u64).to_le_bytes());
    h.update(bytes);
}

#[cfg(unix)]
fn executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn executable(_: &Path) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_changes_the_hash_ignored_files_and_mtimes_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        fs::write(p.join("train.py"), "print(1)\n").unwrap();
        fs::write(p.join(".dockerignore"), "*.log\n").unwrap();
        let a = hash(p, b"FROM x", &[]).unwrap();
        fs::write(p.join("run.log"), "noise").unwrap();
        assert_eq!(hash(p, b"FROM x", &[]).unwrap(), a, "ignored file");
        fs::write(p.join("train.py"), "print(1)\n").unwrap();
        assert_eq!(hash(p, b"FROM x", &[]).unwrap(), a, "rewritten, same bytes");
        assert_ne!(hash(p, b"FROM y", &[]).unwrap(), a, "Dockerfile");
        fs::write(p.join("train.py"), "print(2)\n").unwrap();
        assert_ne!(hash(p, b"FROM x", &[]).unwrap(), a, "code");
        fs::create_dir(p.join("deploy")).unwrap();
        fs::write(p.join("deploy/x.yaml"), "x").unwrap();
        let e = hash(p, b"FROM x", &[&p.join("deploy")]).unwrap_err();
        assert!(
            e.contains("add `deploy/` to the context's .dockerignore"),
            "{e}"
        );
        fs::write(p.join(".dockerignore"), "*.log\ndeploy\n").unwrap();
        assert!(hash(p, b"FROM x", &[&p.join("deploy")]).is_ok());
    }
}
