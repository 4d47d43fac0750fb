//! Two things a build needs that the sources cannot say themselves:
//!
//! - the `Target` enum, generated from the definition schema's
//!   `$defs/target` (see [`targets`]): the schema is the one list of
//!   target names, so a new target is its module, its registration in
//!   `src/compile/target/mod.rs` and its name in the schema;
//! - the commit trainc is built from, for `trainc --version`.
//!
//! Sets `TRAINC_COMMIT` (a short hash, `-dirty` appended when the sources
//! of the binary differ from it) and `TRAINC_COMMIT_DATE` (YYYY-MM-DD, the
//! commit's date) for the crate, from, in order:
//!
//! 1. the environment variable `TRAINC_BUILD_COMMIT`, for builds from a
//!    source archive (an sdist, a tarball), where there is no repository;
//! 2. git, when the package directory is itself a checkout (`.git` beside
//!    Cargo.toml: never the commit of some repository the sources happen
//!    to be unpacked in).
//!
//! Neither: the variables are not set and the version names no commit.
//! Nothing here reaches the generated files; the build cache keys on the
//! binary itself, so it is unaffected too.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The paths the binary is compiled from: a change to one of them may make
/// the tree dirty or clean again.
const SOURCES: &[&str] = &[
    "src",
    "library",
    "schema",
    "build.rs",
    "Cargo.toml",
    "Cargo.lock",
];

fn main() {
    targets();
    println!("cargo::rerun-if-env-changed=TRAINC_BUILD_COMMIT");
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    if let Some(commit) = std::env::var("TRAINC_BUILD_COMMIT")
        .ok()
        .map(|c| c.trim().to_owned())
        .filter(|c| !c.is_empty())
    {
        // Only what a commit name can hold: the value ends up in --version.
        if commit
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
        {
            println!("cargo::rustc-env=TRAINC_COMMIT={commit}");
        } else {
            println!("cargo::warning=TRAINC_BUILD_COMMIT={commit:?} ignored: not a commit name");
        }
        return;
    }
    if !manifest_dir.join(".git").exists() {
        return;
    }
    for source in SOURCES {
        println!("cargo::rerun-if-changed={source}");
    }
    watch_head(&manifest_dir);
    let Some(commit) = git(&manifest_dir, &["rev-parse", "--short=7", "HEAD"]) else {
        return;
    };
    let mut status = vec!["status", "--porcelain", "--"];
    status.extend(SOURCES);
    let dirty = git(&manifest_dir, &status).is_some_and(|s| !s.is_empty());
    let suffix = if dirty { "-dirty" } else { "" };
    println!("cargo::rustc-env=TRAINC_COMMIT={commit}{suffix}");
    if let Some(date) = git(
        &manifest_dir,
        &["log", "-1", "--format=%cd", "--date=short", "HEAD"],
    ) {
        println!("cargo::rustc-env=TRAINC_COMMIT_DATE={date}");
    }
}

/// The schema whose `$defs/target` lists the targets.
const SCHEMA: &str = "schema/trainingjob.schema.json";

/// Writes `$OUT_DIR/target.rs`: `enum Target`, one variant per name in the
/// schema's `$defs/target/enum` (`pytorchjob` → `Pytorchjob`), in the
/// schema's order, with `Target::ALL` and `Target::as_str`. A name that
/// is not lower-case letters, digits and inner `-` fails the build: the
/// embedded schema is the program's own.
fn targets() {
    println!("cargo::rerun-if-changed={SCHEMA}");
    let text = std::fs::read_to_string(SCHEMA).expect("the definition schema is readable");
    let schema: serde_json::Value =
        serde_json::from_str(&text).expect("the definition schema is JSON");
    let names: Vec<&str> = schema
        .pointer("/$defs/target/enum")
        .and_then(serde_json::Value::as_array)
        .expect("the definition schema has `$defs/target/enum`")
        .iter()
        .map(|n| n.as_str().expect("a target name is a string"))
        .collect();
    let mut variants = String::new();
    let mut all = String::new();
    let mut arms = String::new();
    for name in &names {
        let ok = name.starts_with(|c: char| c.is_ascii_lowercase())
            && !name.ends_with('-')
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        assert!(
            ok,
            "target name {name:?} in {SCHEMA}: use lower-case letters, digits and inner '-'"
        );
        let variant: String = name
            .split('-')
            .map(|part| {
                let mut chars = part.chars();
                chars.next().map_or_else(String::new, |first| {
                    first.to_ascii_uppercase().to_string() + chars.as_str()
                })
            })
            .collect();
        let module = name.replace('-', "_");
        variants.push_str(&format!(
            "    /// `{name}`: compiled by [`crate::compile::target::{module}`].\n    #[serde(rename = \"{name}\")]\n    {variant},\n"
        ));
        all.push_str(&format!("Target::{variant}, "));
        arms.push_str(&format!("            Target::{variant} => \"{name}\",\n"));
    }
    let code = format!(
        "/// A backend a definition compiles to: the definition schema's\n\
         /// `$defs/target`, generated by build.rs. What each asks of compile,\n\
         /// validation and `diff` is its entry in `compile::target::BACKENDS`.\n\
         #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]\n\
         pub enum Target {{\n{variants}}}\n\n\
         impl Target {{\n    \
         /// Every target, in the schema's order.\n    \
         pub const ALL: [Target; {count}] = [{all}];\n\n    \
         /// The name definitions and the command line use.\n    \
         pub fn as_str(self) -> &'static str {{\n        match self {{\n{arms}        }}\n    }}\n}}\n",
        count = names.len(),
    );
    let out =
        PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("target.rs");
    // Written only when it changes, so that an unchanged schema recompiles nothing.
    if std::fs::read_to_string(&out).ok().as_deref() != Some(code.as_str()) {
        std::fs::write(&out, code).expect("OUT_DIR is writable");
    }
}

/// Reruns this script when HEAD moves, and only then: every rerun
/// recompiles the crate. Watched: HEAD itself (a checkout), its reflog (a
/// commit, a reset), the branch's loose ref and `packed-refs`, each where
/// it exists (cargo reruns a script on every build for a path that does
/// not). Not the refs directory: commits on other branches, in other
/// worktrees, change it.
fn watch_head(dir: &Path) {
    let path = |args: &[&str]| git(dir, args).map(|p| dir.join(p));
    let Some(git_dir) = path(&["rev-parse", "--git-dir"]) else {
        return;
    };
    let common = path(&["rev-parse", "--git-common-dir"]).unwrap_or_else(|| git_dir.clone());
    let mut watched = vec![
        git_dir.join("HEAD"),
        git_dir.join("logs/HEAD"),
        common.join("packed-refs"),
    ];
    if let Some(branch) = git(dir, &["symbolic-ref", "--quiet", "HEAD"]) {
        watched.push(common.join(branch));
    }
    for p in watched.iter().filter(|p| p.exists()) {
        println!("cargo::rerun-if-changed={}", p.display());
    }
}

/// A git command's trimmed output, or `None` when git is missing or fails.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}
