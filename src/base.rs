//! The other side of a review: `diff --base REF` and `build --check --base
//! REF` compare the output of the working tree with the output at a git
//! commit, the pull request's base. That output is the one committed there,
//! or, when the base has none, the one its definitions build into. The
//! runs that start again say which fields of their definitions changed.
//!
//! The base's files are checked out of git into a private temporary
//! directory through an index of its own, so the repository, its index and
//! its work tree are never touched; git itself is the one program that
//! reads a commit's tree the way users expect (filters, symlinks, the
//! object store's every format).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::build::{self, Directory, Mode, Targets};
use crate::diagnostic::Diagnostic;
use crate::diff::FieldChange;
use crate::emit::Tree;
use crate::plan::{self, Op, Plan};
use crate::project::Project;
use crate::{load, pipeline};

/// A commit's files, checked out below a temporary directory that is
/// removed when this is dropped.
pub struct Base {
    /// The reference as the user gave it (`origin/main`).
    pub reference: String,
    /// The commit it names, in full.
    pub commit: String,
    /// The repository's top in the working tree.
    top: PathBuf,
    /// Holds `tree/` (the commit's files, as they lie below the top) and
    /// the index git checked them out through.
    dir: tempfile::TempDir,
}

impl Base {
    /// Checks out, at `reference`, the files below each of `within` (the
    /// project root and the directories it writes) of the repository that
    /// holds `root`.
    pub fn checkout(root: &Path, reference: &str, within: &[&Path]) -> Result<Base, Diagnostic> {
        let top = git(root, &["rev-parse", "--show-toplevel"], None)?;
        let top = PathBuf::from(top.trim_end_matches('\n'));
        let commit = git(
            &top,
            &[
                "rev-parse",
                "--verify",
                "--quiet",
                "--end-of-options",
                &format!("{reference}^{{commit}}"),
            ],
            None,
        )
        .map_err(|_| {
            Diagnostic::new(format!("`{reference}` names no commit of this repository"))
                .hint("give `--base` a branch, tag or commit: `--base origin/main` in a pull request's CI (check out with `fetch-depth: 0`)")
        })?;
        let commit = commit.trim().to_owned();
        let dir = tempfile::Builder::new()
            .prefix("trainc-base-")
            .tempdir()
            .map_err(|e| Diagnostic::new(format!("cannot make a temporary directory: {e}")))?;
        let index = dir.path().join("index");
        let tree = dir.path().join("tree");
        // The repository's top, as trainc finds it (`paths::repository_top`):
        // what the base's content may make trainc read or write stays below
        // it, as in the working tree.
        std::fs::create_dir_all(tree.join(".git"))
            .map_err(|e| Diagnostic::new(format!("cannot make a temporary directory: {e}")))?;
        let mut specs: Vec<String> = Vec::new();
        for w in within {
            let Ok(rel) = crate::paths::real(w)
                .strip_prefix(&top)
                .map(Path::to_path_buf)
            else {
                continue;
            };
            let rel = crate::paths::normalize(&rel);
            specs.push(if rel.is_empty() { ".".to_owned() } else { rel });
        }
        let base = Base {
            reference: reference.to_owned(),
            commit,
            top,
            dir,
        };
        if specs.is_empty() {
            return Ok(base);
        }
        let at =
            |args: &[&str], input: Option<&[u8]>| git_with_index(&base.top, &index, args, input);
        at(&["read-tree", &base.commit], None)?;
        let mut args = vec!["ls-files", "-z", "--"];
        args.extend(specs.iter().map(String::as_str));
        let files = at(&args, None)?;
        let prefix = format!("--prefix={}/", tree.display());
        at(
            &["checkout-index", "--force", "-z", "--stdin", &prefix],
            Some(files.as_bytes()),
        )?;
        Ok(base)
    }

    /// Where `path` of the working tree lies in the base's tree, if it lies
    /// in the repository.
    pub fn at(&self, path: &Path) -> Option<PathBuf> {
        let rel = crate::paths::real(path)
            .strip_prefix(&self.top)
            .ok()?
            .to_path_buf();
        Some(self.dir.path().join("tree").join(rel))
    }

    /// How reports name the base.
    pub fn named(&self) -> crate::diff::BaseRef {
        crate::diff::BaseRef {
            reference: self.reference.clone(),
            commit: self.commit.clone(),
        }
    }
}

/// Runs git in `dir`, its standard output as text, or why it failed.
fn git(dir: &Path, args: &[&str], input: Option<&[u8]>) -> Result<String, Diagnostic> {
    run_git(Command::new("git").current_dir(dir).args(args), input)
}

/// [`git`] with an index of trainc's own, so the repository's is untouched.
fn git_with_index(
    dir: &Path,
    index: &Path,
    args: &[&str],
    input: Option<&[u8]>,
) -> Result<String, Diagnostic> {
    run_git(
        Command::new("git")
            .current_dir(dir)
            .env("GIT_INDEX_FILE", index)
            .args(args),
        input,
    )
}

fn run_git(cmd: &mut Command, input: Option<&[u8]>) -> Result<String, Diagnostic> {
    let shown = format!(
        "git {}",
        cmd.get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    );
    let cannot = |why: String| {
        Diagnostic::new(format!("`{shown}` failed: {why}"))
            .hint("`--base` reads the base commit with git: run trainc inside the repository, with git on the PATH")
    };
    let mut child = cmd
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| cannot(e.to_string()))?;
    if let (Some(bytes), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin.write_all(bytes).map_err(|e| cannot(e.to_string()))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| cannot(e.to_string()))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(cannot(err.trim().to_owned()));
    }
    String::from_utf8(out.stdout).map_err(|_| cannot("its output is not UTF-8".to_owned()))
}

/// What the base's side of the comparison is.
pub enum Old {
    /// The output committed at the base: its directories as they lie there.
    Committed,
    /// The base has no output: its definitions, built into the base's tree.
    Built(Box<Targets>),
    /// The base has no definitions of the project either: every run starts.
    Absent,
}

/// The working tree's output against the base's.
pub struct Compared {
    /// Each directory against what is on disk: what `build --check` reports.
    pub on_disk: Vec<Directory>,
    /// Each directory against the base's.
    pub against_base: Vec<Directory>,
    /// Findings of the working tree's build that did not stop it.
    pub warnings: Vec<Diagnostic>,
    /// The fields of each job's definition (and of the project file) that
    /// differ from the base, by `<namespace>/<job>`.
    pub changed: BTreeMap<String, Vec<FieldChange>>,
}

/// A build of the base's definitions, which shows nothing and denies
/// nothing: its findings are said once, as the base's.
struct Quiet;

impl build::Report for Quiet {
    type Error = Vec<Diagnostic>;
    fn cache(&mut self, _: &str) {}
    fn warnings(&mut self, _: &[Diagnostic]) -> Result<(), Self::Error> {
        Ok(())
    }
    fn fail(&self, findings: Vec<Diagnostic>) -> Self::Error {
        findings
    }
}

/// Builds the working tree (`targets`, from `cwd`) without writing, and
/// plans its output against the base's (`old`); `base_project` is the
/// base's project, when it has one, for the fields that changed.
pub fn compare<R: build::Report>(
    cwd: &Path,
    targets: &Targets,
    base: &Base,
    old: Old,
    base_project: Option<&Project>,
    report: &mut R,
) -> Result<Compared, R::Error> {
    let refused = |findings: Vec<Diagnostic>, report: &R| {
        let mut out = vec![
            Diagnostic::new(format!(
                "the definitions at {} do not build",
                base.named().shown()
            ))
            .hint("the comparison needs the base's output: commit it there, or fix what follows on the base branch"),
        ];
        out.extend(findings);
        report.fail(out)
    };
    if let Old::Built(base_targets) = &old {
        let root = base_targets.project.cwd.clone();
        build::run(&root, base_targets, &[], Mode::Write, true, &mut Quiet)
            .map_err(|f| refused(f, report))?;
    }
    // Without the build cache every file is planned, so the plans hold the
    // whole output, not only what the cache could not vouch for.
    let built = build::run(cwd, targets, &[], Mode::Diff, true, report)?;
    let mut against_base = Vec::new();
    for d in &built.dirs {
        let tree = output_of(&d.plan).map_err(|e| report.fail(vec![e]))?;
        let old_dir = match &old {
            Old::Absent => None,
            _ => base.at(&d.plan.root),
        };
        let plan = match old_dir {
            Some(dir) => plan::plan(&dir, &d.shown, tree).map_err(|f| report.fail(f))?,
            None => created(&d.plan.root, tree),
        };
        against_base.push(Directory {
            plan,
            shown: d.shown.clone(),
            label_runs: d.label_runs,
        });
    }
    let changed = match base_project {
        Some(old) => changed_fields(old, &targets.project),
        None => BTreeMap::new(),
    };
    Ok(Compared {
        on_disk: built.dirs,
        against_base,
        warnings: built.warnings,
        changed,
    })
}

/// The files a directory holds once its plan (of a build without the
/// cache) is carried out.
fn output_of(plan: &Plan) -> Result<Tree, Diagnostic> {
    let mut tree = Tree::new();
    for c in &plan.changes {
        match c.op {
            Op::Create | Op::Update => {
                tree.insert(c.path.clone(), c.new.clone());
            }
            Op::Unchanged => {
                let path = plan.root.join(&c.path);
                let bytes = std::fs::read(&path)
                    .map_err(|e| Diagnostic::new(format!("cannot read {}: {e}", path.display())))?;
                tree.insert(c.path.clone(), bytes);
            }
            Op::Delete => {}
        }
    }
    Ok(tree)
}

/// A plan that creates every file of `tree`: the base had nothing.
fn created(root: &Path, tree: Tree) -> Plan {
    Plan {
        root: root.to_path_buf(),
        changes: tree
            .into_iter()
            .map(|(path, new)| plan::Change {
                path,
                op: Op::Create,
                old: None,
                new,
            })
            .collect(),
        kept: 0,
    }
}

/// The fields that differ between the base's definitions and the working
/// tree's, by job, each job's followed by the project file's.
fn changed_fields(old: &Project, new: &Project) -> BTreeMap<String, Vec<FieldChange>> {
    let (before, after) = (definitions(old), definitions(new));
    let mut project = Vec::new();
    if let (Some(o), Some(n)) = (&old.doc, &new.doc) {
        let name = new
            .file
            .as_deref()
            .and_then(Path::file_name)
            .map_or("trainc.yaml".to_owned(), |f| {
                f.to_string_lossy().into_owned()
            });
        let mut fields = Vec::new();
        crate::diff::changed_fields("", &o.value, &n.value, &mut fields);
        project.extend(fields.into_iter().map(|f| FieldChange {
            path: format!("{} ({name})", f.path),
            ..f
        }));
    }
    let mut out = BTreeMap::new();
    for (job, n) in &after {
        let Some(o) = before.get(job) else { continue };
        let mut fields = Vec::new();
        crate::diff::changed_fields("", o, n, &mut fields);
        for f in &mut fields {
            if let Some(rest) = f.path.strip_prefix("spec.") {
                f.path = rest.to_owned();
            }
        }
        // What watches or guards a run from outside it never restarts it.
        fields.retain(|f| {
            !["tensorboard", "networkPolicy"]
                .iter()
                .any(|k| f.path == *k || f.path.starts_with(&format!("{k}.")))
        });
        fields.extend(project.iter().cloned());
        out.insert(job.clone(), fields);
    }
    out
}

/// Each definition of a project as written, by `<namespace>/<job>`, without
/// `apiVersion` and `kind`. What does not read or parse is left out: the
/// build reports it.
fn definitions(project: &Project) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    let Ok(files) = pipeline::files(project, &project.cwd, &[]) else {
        return out;
    };
    for path in files {
        let name = crate::paths::display_name(&project.root, &path);
        let Ok(file) = load::read(&path, name) else {
            continue;
        };
        let Ok(docs) = load::parse(&file) else {
            continue;
        };
        for doc in docs {
            let Value::Object(mut map) = doc.value else {
                continue;
            };
            if map.get("kind").and_then(Value::as_str) != Some("TrainingJob") {
                continue;
            }
            let meta = &map["metadata"];
            let Some(job) = meta["name"].as_str() else {
                continue;
            };
            let namespace = meta["namespace"]
                .as_str()
                .map(str::to_owned)
                .or_else(|| project.defaults.namespace.clone())
                .unwrap_or_else(|| crate::model::job::DEFAULT_NAMESPACE.to_owned());
            let key = format!("{namespace}/{job}");
            map.remove("apiVersion");
            map.remove("kind");
            out.insert(key, Value::Object(map));
        }
    }
    out
}
