//! `trainc init`: a starter project whose definition validates as written
//! and whose program trains, in the cluster and with `trainc run --local`.
//! Not a pipeline stage: it writes the inputs the pipeline reads.

use std::collections::BTreeSet;
use std::fs;
use std::io::{self, Write as _};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use minijinja::{Environment, context};

use crate::diagnostic::Diagnostic;
use crate::model::definition::{Framework, Target};
use crate::model::project::Defaults;
use crate::project::PROJECT_FILE;
use crate::source::SourceFile;
use crate::validate;
use crate::validate::schema::TRAINING_JOB_SCHEMA;

const PROJECT_TEMPLATE: &str = include_str!("../library/init/trainc.yaml.j2");
const REQUIREMENTS: &str = include_str!("../library/init/requirements.txt");

/// A framework's starter: the definition (a template) and the program it
/// builds and runs (written as is).
struct Files {
    definition: &'static str,
    program: &'static str,
}

fn starter_files(framework: Framework) -> Files {
    match framework {
        Framework::Tensorflow => Files {
            definition: include_str!("../library/init/tensorflow.yaml.j2"),
            program: include_str!("../library/init/tensorflow/train.py"),
        },
        Framework::Pytorch => Files {
            definition: include_str!("../library/init/pytorch.yaml.j2"),
            program: include_str!("../library/init/pytorch/train.py"),
        },
    }
}

/// `--framework`: `tensorflow` or `pytorch`.
pub fn parse_framework(s: &str) -> Result<Framework, String> {
    [Framework::Tensorflow, Framework::Pytorch]
        .into_iter()
        .find(|f| f.as_str() == s)
        .ok_or_else(|| format!("unknown framework `{s}`: use tensorflow or pytorch"))
}

/// What a starter project is called and where it goes.
#[derive(Debug, Clone)]
pub struct Starter<'a> {
    pub name: &'a str,
    pub namespace: &'a str,
    /// The project's `defaults.target`.
    pub target: Target,
    /// The starter job's framework, and with it its program.
    pub framework: Framework,
}

/// What `init` writes, relative to the target directory.
pub fn files(s: &Starter) -> Result<Vec<(String, String)>, Diagnostic> {
    let env = Environment::new();
    let (name, namespace, target) = (s.name, s.namespace, s.target.as_str());
    let framework = s.framework.as_str();
    let starter = starter_files(s.framework);
    let render = |tpl: &str| {
        env.render_str(tpl, context! { name, namespace, target, framework })
            .map(|mut s| {
                if !s.ends_with('\n') {
                    s.push('\n');
                }
                s
            })
            .map_err(|e| Diagnostic::new(format!("internal error: starter template: {e}")))
    };
    Ok(vec![
        (PROJECT_FILE.to_owned(), render(PROJECT_TEMPLATE)?),
        (format!("jobs/{name}.yaml"), render(starter.definition)?),
        ("train/train.py".to_owned(), starter.program.to_owned()),
        ("train/requirements.txt".to_owned(), REQUIREMENTS.to_owned()),
        (
            "schema/trainingjob.schema.json".to_owned(),
            TRAINING_JOB_SCHEMA.to_owned(),
        ),
    ])
}

/// Writes the starter files, all or none, refusing to overwrite any unless
/// `force` and to write through a symlink at all ([`check`], [`write()`]).
/// Returns the paths written, relative to `dir`; messages name paths as
/// seen from `cwd`.
pub fn init(
    cwd: &Path,
    dir: &Path,
    starter: &Starter,
    force: bool,
) -> Result<Vec<String>, Vec<Diagnostic>> {
    use crate::compile::target::{BACKENDS, backend};
    let target = backend(starter.target);
    if let Some(runs) = target.framework.filter(|f| *f != starter.framework) {
        let other = BACKENDS
            .iter()
            .find(|b| b.framework == Some(starter.framework))
            .map_or("", |b| b.target.as_str());
        return Err(vec![
            Diagnostic::new(format!(
                "--target {}: that target runs {} jobs, and the starter is a {} job{}",
                starter.target.as_str(),
                runs.display(),
                starter.framework.display(),
                target
                    .why_one_framework
                    .map_or(String::new(), |why| format!(": {why}"))
            ))
            .hint(format!(
                "pass `--framework {}` for a {} starter, or `--target {other}`, `jobset` or `kubernetes`",
                runs.as_str(),
                runs.display()
            )),
        ]);
    }
    let files = files(starter).map_err(|d| vec![d])?;
    // The starter must validate as written; checking the rendered text also
    // refuses names that are not DNS labels (or that would escape `jobs/`)
    // before anything is written. The build context is checked on disk, so
    // the program goes into a scratch directory that stands in for `dir`.
    let stage = tempfile::tempdir().map_err(|e| {
        vec![Diagnostic::new(format!(
            "cannot create a temporary directory: {e}"
        ))]
    })?;
    let program: Vec<(String, String)> = files
        .iter()
        .filter(|(rel, _)| rel.starts_with("train/"))
        .cloned()
        .collect();
    let scratch = Root {
        dir: stage.path(),
        cwd,
    };
    write(&scratch, &check(&scratch, &program, false)?, &mut fill)?;
    // `jobs/../train` resolves only where `jobs` exists.
    std::fs::create_dir_all(stage.path().join("jobs")).map_err(|e| {
        vec![Diagnostic::new(format!(
            "cannot create a temporary directory: {e}"
        ))]
    })?;
    for (rel, text) in files.iter().filter(|(rel, _)| rel.starts_with("jobs/")) {
        let source = Arc::new(SourceFile::new(rel.clone(), text.clone()));
        let defaults = Defaults {
            namespace: Some(starter.namespace.to_owned()),
            target: Some(starter.target),
            ..Defaults::default()
        };
        let library = crate::library::Library::builtin()?;
        let cx = validate::Context {
            defaults: &defaults,
            library: &library,
            root: stage.path(),
            top: stage.path(),
            generated: &[],
        };
        validate::validate(std::slice::from_ref(&source), &cx).map_err(|mut d| {
            d.push(Diagnostic::new("`trainc init` would write an invalid starter").hint(
                "use `--name` and `--namespace` values that are DNS labels: lower-case letters, digits and '-'",
            ));
            d
        })?;
    }
    let root = Root { dir, cwd };
    write(&root, &check(&root, &files, force)?, &mut fill)
}

/// Writes `files` (relative path, text) below `dir` as the starter is
/// written: all or none, none over an existing file unless `force`, none
/// through a symlink. `trainc import` writes its definitions this way.
pub fn write_files(
    cwd: &Path,
    dir: &Path,
    files: &[(String, String)],
    force: bool,
) -> Result<Vec<String>, Vec<Diagnostic>> {
    let root = Root { dir, cwd };
    write(&root, &check(&root, files, force)?, &mut fill)
}

/// The directory the starter goes into, and the working directory that
/// messages name its paths from, as `wrote …` does.
struct Root<'a> {
    dir: &'a Path,
    cwd: &'a Path,
}

impl Root<'_> {
    fn show(&self, path: &Path) -> String {
        crate::paths::display_name(self.cwd, path)
    }
}

/// Writes a starter file's text into its temporary file.
fn fill(file: &mut fs::File, text: &str) -> io::Result<()> {
    file.write_all(text.as_bytes())
}

/// One starter file, checked against the disk.
#[derive(Debug)]
struct Planned<'f> {
    /// Relative to the target directory, `/`-separated.
    rel: &'f str,
    text: &'f str,
    /// A regular file is there, which `--force` replaces.
    replaces: bool,
}

/// What is at a path, its symlink not followed.
enum Entry {
    Missing,
    Dir,
    File,
    Symlink,
    /// A FIFO, socket or device.
    Other,
}

fn entry(path: &Path) -> io::Result<Entry> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Ok(Entry::Symlink),
        Ok(m) if m.is_dir() => Ok(Entry::Dir),
        Ok(m) if m.is_file() => Ok(Entry::File),
        Ok(_) => Ok(Entry::Other),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Entry::Missing),
        Err(e) => Err(e),
    }
}

/// Checks, before anything is written, every path below `dir` that
/// writing `files` would touch: the directories on the way must be real
/// directories or missing, each file a regular file (replaced only with
/// `force`) or missing. A symlink anywhere below `dir` is refused, even
/// with `force`: the repository `init` runs in may hold one, dangling or
/// not, that leads out of it. `dir` itself is the user's choice, and may be
/// one. Every problem is reported, each path once.
fn check<'f>(
    root: &Root,
    files: &'f [(String, String)],
    force: bool,
) -> Result<Vec<Planned<'f>>, Vec<Diagnostic>> {
    let mut problems = Vec::new();
    let mut reported = BTreeSet::new();
    let mut targets = Vec::new();
    for (rel, text) in files {
        let mut at = root.dir.to_path_buf();
        let mut parts = rel.split('/').peekable();
        let mut problem = None;
        let mut replaces = false;
        while let Some(part) = parts.next() {
            at.push(part);
            let last = parts.peek().is_none();
            let found = entry(&at).map_err(|e| {
                vec![Diagnostic::new(format!(
                    "cannot read {}: {e}",
                    root.show(&at)
                ))]
            })?;
            match (found, last) {
                (Entry::Missing, _) => break,
                (Entry::Dir, false) => continue,
                (Entry::Symlink, _) => problem = Some(symlink(&root.show(&at))),
                (Entry::File | Entry::Other, false) => {
                    problem = Some(
                        Diagnostic::new(format!("{} is not a directory", root.show(&at))).hint(
                            "`trainc init` writes into a directory of that name: move the file, or run `trainc init` in another directory",
                        ),
                    );
                }
                (Entry::File, true) if force => replaces = true,
                (Entry::File, true) => {
                    problem = Some(
                        Diagnostic::new(format!("{} already exists", root.show(&at))).hint(
                            "pass --force to overwrite it, or run `trainc init` in another directory",
                        ),
                    );
                }
                (Entry::Dir | Entry::Other, true) => {
                    problem = Some(
                        Diagnostic::new(format!("{} is not a regular file", root.show(&at)))
                            .hint("move it, or run `trainc init` in another directory"),
                    );
                }
            }
            break;
        }
        match problem {
            Some(p) if reported.insert(at) => problems.push(p),
            Some(_) => {}
            None => targets.push(Planned {
                rel,
                text,
                replaces,
            }),
        }
    }
    if problems.is_empty() {
        Ok(targets)
    } else {
        Err(problems)
    }
}

fn symlink(path: &str) -> Diagnostic {
    Diagnostic::new(format!(
        "{path} is a symlink; trainc never writes through symlinks"
    ))
    .hint("remove it (`--force` does not replace a symlink), or run `trainc init` in another directory")
}

/// What a failed [`write()`] takes back: the files it put in place that were
/// not there, and the directories it made, newest first. Replaced files
/// keep their new text: their old one is gone.
#[derive(Default)]
struct Undo {
    files: Vec<PathBuf>,
    dirs: Vec<PathBuf>,
    done: bool,
}

impl Drop for Undo {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        for file in self.files.iter().rev() {
            let _ = fs::remove_file(file);
        }
        for dir in self.dirs.iter().rev() {
            let _ = fs::remove_dir(dir);
        }
    }
}

/// Writes the checked `targets` below `dir`, all or nothing: each file's
/// text goes to a temporary file in its own directory first (`fill` writes
/// it), and only when every one is complete are they renamed into place.
/// A new file is renamed in only where nothing has appeared since the check
/// (`RENAME_NOREPLACE`, or a hard link); a replaced one is renamed over,
/// which replaces the directory entry and never follows it. The temporary
/// files are created with `O_CREAT|O_EXCL`, the directories with `mkdir`,
/// neither of which follows a symlink. On an error the temporary files, the
/// files put in place and the directories made are removed. Returns the
/// relative paths written, in order.
fn write(
    root: &Root,
    targets: &[Planned],
    fill: &mut dyn FnMut(&mut fs::File, &str) -> io::Result<()>,
) -> Result<Vec<String>, Vec<Diagnostic>> {
    let mut undo = Undo::default();
    make_root(root, &mut undo)?;
    let mut staged = Vec::with_capacity(targets.len());
    for target in targets {
        let path = root.dir.join(target.rel);
        let parent = make_parents(root, target.rel, &mut undo)?;
        let cannot = |e: io::Error| {
            vec![Diagnostic::new(format!(
                "cannot write {}: {e}",
                root.show(&path)
            ))]
        };
        let mut temp = tempfile::Builder::new()
            .prefix(".trainc-init-")
            .suffix(".tmp")
            // As `fs::write` would create it: the umask decides.
            .permissions(fs::Permissions::from_mode(0o666))
            .tempfile_in(&parent)
            .map_err(cannot)?;
        fill(temp.as_file_mut(), target.text).map_err(cannot)?;
        staged.push((temp, path, target.replaces));
    }
    // New files first: if one cannot go in, no old file has been replaced.
    staged.sort_by_key(|(_, _, replaces)| *replaces);
    for (temp, path, replaces) in staged {
        let placed = if replaces {
            temp.persist(&path)
        } else {
            temp.persist_noclobber(&path)
        };
        placed.map_err(|e| {
            vec![Diagnostic::new(format!(
                "cannot write {}: {}",
                root.show(&path),
                e.error
            ))]
        })?;
        if !replaces {
            undo.files.push(path);
        }
    }
    undo.done = true;
    Ok(targets.iter().map(|t| t.rel.to_owned()).collect())
}

/// Makes `dir` and its missing ancestors. The command line names it, so a
/// symlink on its way is followed.
fn make_root(root: &Root, undo: &mut Undo) -> Result<(), Vec<Diagnostic>> {
    let missing: Vec<&Path> = root.dir.ancestors().take_while(|p| !p.exists()).collect();
    for path in missing.into_iter().rev() {
        fs::create_dir(path).map_err(|e| {
            vec![Diagnostic::new(format!(
                "cannot create {}: {e}",
                root.show(path)
            ))]
        })?;
        undo.dirs.push(path.to_path_buf());
    }
    Ok(())
}

/// Makes the directories between `dir` and the file `rel`, each with
/// `mkdir`, which fails on anything already there but a directory, a
/// symlink included. Returns the file's directory.
fn make_parents(root: &Root, rel: &str, undo: &mut Undo) -> Result<PathBuf, Vec<Diagnostic>> {
    let mut at = root.dir.to_path_buf();
    let parents = rel.split('/').collect::<Vec<_>>();
    for part in &parents[..parents.len().saturating_sub(1)] {
        at.push(part);
        match fs::create_dir(&at) {
            Ok(()) => undo.dirs.push(at.clone()),
            Err(e)
                if e.kind() == io::ErrorKind::AlreadyExists
                    && matches!(entry(&at), Ok(Entry::Dir)) => {}
            Err(e) => {
                return Err(vec![Diagnostic::new(format!(
                    "cannot create {}: {e}",
                    root.show(&at)
                ))]);
            }
        }
    }
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn starter_files() -> Vec<(String, String)> {
        files(&Starter {
            name: "mnist",
            namespace: "default",
            target: Target::Kubernetes,
            framework: Framework::Tensorflow,
        })
        .expect("renders")
    }

    /// Every entry below `dir`, relative, sorted: what a run left behind.
    fn entries(dir: &Path) -> Vec<String> {
        let mut found: Vec<String> = walkdir::WalkDir::new(dir)
            .min_depth(1)
            .into_iter()
            .map(|e| {
                let e = e.expect("walk");
                e.path()
                    .strip_prefix(dir)
                    .expect("below")
                    .display()
                    .to_string()
            })
            .collect();
        found.sort();
        found
    }

    #[test]
    fn a_failure_on_the_second_file_leaves_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let files = starter_files();
        let root = Root {
            dir: dir.path(),
            cwd: dir.path(),
        };
        let planned = check(&root, &files, false).expect("nothing in the way");
        let mut calls = 0;
        let mut full_disk = |file: &mut fs::File, text: &str| {
            calls += 1;
            if calls == 2 {
                return Err(io::Error::other("no space left on device"));
            }
            fill(file, text)
        };
        let errors = write(&root, &planned, &mut full_disk).expect_err("fails");
        assert!(
            errors[0].message == "cannot write jobs/mnist.yaml: no space left on device",
            "{errors:?}"
        );
        assert_eq!(entries(dir.path()), Vec::<String>::new());
    }

    /// A symlink that appears after the check, where a new file goes: the
    /// rename refuses to replace it, and the files already in place and the
    /// directories made are taken back.
    #[test]
    fn a_symlink_that_appears_after_the_check_is_not_written_through() {
        let dir = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        let files = starter_files();
        let root = Root {
            dir: dir.path(),
            cwd: dir.path(),
        };
        let planned = check(&root, &files, false).expect("nothing in the way");
        fs::create_dir(dir.path().join("jobs")).expect("mkdir");
        std::os::unix::fs::symlink(
            outside.path().join("mnist.yaml"),
            dir.path().join("jobs/mnist.yaml"),
        )
        .expect("symlink");
        let errors = write(&root, &planned, &mut fill).expect_err("fails");
        assert!(
            errors[0]
                .message
                .starts_with("cannot write jobs/mnist.yaml: File exists"),
            "{errors:?}"
        );
        assert_eq!(entries(dir.path()), ["jobs", "jobs/mnist.yaml"]);
        assert_eq!(entries(outside.path()), Vec::<String>::new());
    }

    #[test]
    fn symlinks_are_refused_even_with_force_and_files_replaced_only_with_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let files = starter_files();
        fs::write(dir.path().join("trainc.yaml"), "mine").expect("write");
        std::os::unix::fs::symlink("/nonexistent", dir.path().join("train")).expect("symlink");
        fs::write(dir.path().join("schema"), "a file").expect("write");
        let root = Root {
            dir: dir.path(),
            cwd: dir.path(),
        };
        for force in [false, true] {
            let errors = check(&root, &files, force).expect_err("refused");
            let messages: Vec<String> = errors.iter().map(|d| d.message.clone()).collect();
            let mut want = vec![
                "train is a symlink; trainc never writes through symlinks",
                "schema is not a directory",
            ];
            if !force {
                want.insert(0, "trainc.yaml already exists");
            }
            assert_eq!(messages, want);
        }
        fs::remove_file(dir.path().join("train")).expect("rm");
        fs::remove_file(dir.path().join("schema")).expect("rm");
        let planned = check(&root, &files, true).expect("replaceable");
        assert!(planned[0].replaces && !planned[1].replaces);
        write(&root, &planned, &mut fill).expect("written");
        assert_eq!(
            fs::read_to_string(dir.path().join("trainc.yaml")).expect("read"),
            files[0].1
        );
    }
}
