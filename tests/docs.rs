//! The shell examples of README.md and docs/*.md, run as a new user would
//! run them, so that the docs and the tool keep agreeing.
//!
//! Every fenced block whose info string is `console` is a session: `$ `
//! lines are commands (a trailing `\` continues one), each followed by what
//! it prints, stdout and stderr together as a terminal shows them. In the
//! expected output `[..]` matches any text within a line and `...` on a line
//! of its own any number of lines (snapbox's wildcards, as in trycmd).
//! `$ echo $?` checks the exit code of the command before it. The commands
//! are `trainc …` (the binary under test) and `cd DIR`.
//!
//! Each session runs where it makes sense, named in [`EXAMPLES`]: a scratch
//! copy of an example project or an empty directory, set up by the steps
//! the doc describes in prose ("after lowering `worker.replicas` to 1"), or
//! the directory the previous session of the same doc left. The table lists
//! the sessions in document order with each one's first line, so that a new,
//! moved or rewritten example fails here until it has its place.
//!
//! A block that shows a `$ trainc` command but cannot be reproduced (a
//! training's accuracy, timings, the user's machine) is marked in the doc by
//! an `<!-- illustrative: why -->` line right before its fence; any other
//! block with a `$ trainc` line that is not a `console` block is an error,
//! so nothing shown as a command's output escapes the check unmarked.

mod common;

use std::fs;
use std::io::{Read as _, Seek as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{root, scratch_example};

/// Where a session starts.
enum Sandbox {
    /// A fresh scratch copy of `examples/<name>`, without output.
    Example(&'static str),
    /// A fresh empty directory.
    Empty,
    /// The directory (and working directory) the previous session of the
    /// same doc left.
    Same,
}

/// What the doc says happened before the session.
enum Step {
    /// Replace the one occurrence of `from` in `file` by `to`.
    Edit(&'static str, &'static str, &'static str),
    /// Write `file`.
    Write(&'static str, &'static str),
    /// Copy `from` to `to`, replacing `from_text` by `to_text` once.
    CopyEdit(&'static str, &'static str, &'static str, &'static str),
    /// Run trainc with these arguments, which must succeed; its output is
    /// not shown in the doc.
    Trainc(&'static [&'static str]),
    /// Move `from` to `to`.
    Move(&'static str, &'static str),
}

struct Example {
    doc: &'static str,
    /// The session's first line, as the doc shows it.
    first: &'static str,
    sandbox: Sandbox,
    before: &'static [Step],
}

use Sandbox::{Empty, Example as Scratch, Same};
use Step::{CopyEdit, Edit, Move, Trainc, Write};

const LOWER_WORKERS: Step = Edit(
    "jobs/mnist.yaml",
    "worker: {replicas: 2,",
    "worker: {replicas: 1,",
);

/// A second definition, so that one path is a part of the project.
const RESNET: Step = CopyEdit(
    "jobs/mnist.yaml",
    "jobs/resnet.yaml",
    "name: mnist",
    "name: resnet",
);

/// A small project of one team in a repository of several (the `.git`
/// marks the repository's top), for "Several projects in one repository".
const TEAM_PROJECT: &str =
    "apiVersion: trainc.dev/v1alpha1\nkind: Project\ndefaults: {namespace: ml}\n";

/// A job of such a project, named `$name`, its definition ending with
/// `$more` (a volume).
macro_rules! team_job {
    ($name:literal, $more:literal) => {
        concat!(
            "apiVersion: trainc.dev/v1alpha1\nkind: TrainingJob\nmetadata: {name: ",
            $name,
            "}\nspec:\n  framework: pytorch\n  image: registry.example.com/ml/",
            $name,
            ":1.0\n  command: [python, /app/train.py]\n  roles:\n    worker: {replicas: 2}\n",
            $more
        )
    };
}

/// Every `console` block, in document order (docs in the order of
/// [`docs`]).
const EXAMPLES: &[Example] = &[
    // The walkthrough: the starter, a misspelt field, then the build.
    Example {
        doc: "README.md",
        first: "$ trainc init",
        sandbox: Empty,
        before: &[],
    },
    Example {
        doc: "README.md",
        first: "$ trainc validate",
        sandbox: Same,
        before: &[Edit(
            "jobs/mnist.yaml",
            "    worker:\n      replicas: 2",
            "    worker:\n      replica: 2",
        )],
    },
    Example {
        doc: "README.md",
        first: "$ trainc build",
        sandbox: Same,
        before: &[Edit(
            "jobs/mnist.yaml",
            "    worker:\n      replica: 2",
            "    worker:\n      replicas: 2",
        )],
    },
    // "when the last job drops `build`"
    Example {
        doc: "docs/images.md",
        first: "$ trainc build",
        sandbox: Scratch("mnist"),
        before: &[
            Trainc(&["build"]),
            Edit(
                "jobs/mnist.yaml",
                "  build:                       # trainc writes build/ml/mnist/Dockerfile
    context: ../train
    entrypoint: mnist.py
    requirements: requirements.txt
    repository: registry.example.com/ml/mnist
",
                "  image: registry.example.com/ml/mnist:1.0\n",
            ),
        ],
    },
    Example {
        doc: "docs/images.md",
        first: "$ trainc build",
        sandbox: Scratch("mnist"),
        before: &[],
    },
    // "A code change in the example"
    // "The MNIST example with `context: ..`"
    Example {
        doc: "docs/images.md",
        first: "$ trainc build",
        sandbox: Scratch("mnist"),
        before: &[
            Write(".git/HEAD", "ref: refs/heads/main\n"),
            Edit("jobs/mnist.yaml", "context: ../train", "context: .."),
            Edit(
                "jobs/mnist.yaml",
                "entrypoint: mnist.py",
                "entrypoint: train/mnist.py",
            ),
            Edit(
                "jobs/mnist.yaml",
                "requirements: requirements.txt",
                "requirements: train/requirements.txt",
            ),
        ],
    },
    Example {
        doc: "docs/images.md",
        first: "$ trainc diff --stat",
        sandbox: Scratch("mnist"),
        before: &[
            Trainc(&["build"]),
            Edit(
                "train/mnist.py",
                "import argparse\n",
                "import argparse  # a code change\n",
            ),
        ],
    },
    // "A variable that is not defined (a typo)"
    Example {
        doc: "docs/images.md",
        first: "$ trainc build",
        sandbox: Scratch("mnist"),
        before: &[
            Edit(
                "trainc.yaml",
                "output: deploy\n",
                "output: deploy\nlibrary: lib\n",
            ),
            Write(
                "lib/templates/Dockerfile.j2",
                "{{ header }}\nFROM {{ base_imag }}\n",
            ),
        ],
    },
    // "Why a build compiled": a generated file edited by hand.
    Example {
        doc: "docs/output.md",
        first: "$ trainc build -v",
        sandbox: Scratch("mnist"),
        before: &[
            Trainc(&["build"]),
            Edit(
                "deploy/ml/mnist/kustomization.yaml",
                "resources:\n",
                "resources: # edited\n",
            ),
        ],
    },
    // "Removed jobs and tasks"
    Example {
        doc: "docs/output.md",
        first: "$ trainc build",
        sandbox: Scratch("mnist"),
        before: &[Trainc(&["build"]), LOWER_WORKERS],
    },
    // "Claims and PersistentVolumes keep their names": a static volume's
    // new size.
    Example {
        doc: "docs/output.md",
        first: "$ trainc build",
        sandbox: Scratch("mnist"),
        before: &[
            Trainc(&["build"]),
            Edit("jobs/mnist.yaml", "size: 5Gi", "size: 10Gi"),
        ],
    },
    // Variants: the project file the doc shows.
    Example {
        doc: "docs/project.md",
        first: "$ trainc build",
        sandbox: Scratch("mnist"),
        before: &[Write(
            "trainc.yaml",
            "apiVersion: trainc.dev/v1alpha1
kind: Project
sources: [jobs]
output: deploy
defaults:
  namespace: ml
variants:
  cpu:
    output: deploy-cpu
    buildOutput: build-cpu
    cluster: cpu
    patches:
      - patch:
          spec:
            roles: {worker: {resources: {gpu: 0}}}
            tensorboard: {service: ClusterIP, loadBalancerSourceRanges: null}
",
        )],
    },
    // "Run in a subdirectory"
    Example {
        doc: "docs/project.md",
        first: "$ cd jobs",
        sandbox: Scratch("mnist"),
        before: &[],
    },
    Example {
        doc: "docs/project.md",
        first: "$ trainc build resnet.yaml",
        sandbox: Same,
        before: &[RESNET],
    },
    // "Several projects in one repository": two teams' projects with the
    // same job and volume, then a job moved from one project to another.
    Example {
        doc: "docs/project.md",
        first: "$ trainc build --workspace",
        sandbox: Empty,
        before: &[
            Write(".git/HEAD", "ref: refs/heads/main\n"),
            Write("teams/b/trainc.yaml", TEAM_PROJECT),
            Write(
                "teams/b/jobs/mnist.yaml",
                team_job!(
                    "mnist",
                    "  storage:\n    - {name: data, mountPath: /data, size: 5Gi, nfs: {server: nas.example.com, path: /data}}\n"
                ),
            ),
            Write("teams/c/trainc.yaml", TEAM_PROJECT),
            Write(
                "teams/c/jobs/mnist.yaml",
                team_job!(
                    "mnist",
                    "  storage:\n    - {name: data, mountPath: /data, size: 5Gi, nfs: {server: nas.example.com, path: /data}}\n"
                ),
            ),
        ],
    },
    Example {
        doc: "docs/project.md",
        first: "$ cd teams/a",
        sandbox: Empty,
        before: &[
            Write(".git/HEAD", "ref: refs/heads/main\n"),
            Write("teams/a/trainc.yaml", TEAM_PROJECT),
            Write("teams/a/jobs/digits.yaml", team_job!("digits", "")),
            Write("teams/a/jobs/other.yaml", team_job!("other", "")),
            Trainc(&["build", "--project", "teams/a/trainc.yaml"]),
            Write("teams/d/trainc.yaml", TEAM_PROJECT),
            Move("teams/a/jobs/digits.yaml", "teams/d/jobs/digits.yaml"),
        ],
    },
    // "Building part of a project"
    Example {
        doc: "docs/project.md",
        first: "$ trainc build jobs/mnist.yaml",
        sandbox: Scratch("mnist"),
        before: &[RESNET],
    },
    Example {
        doc: "docs/project.md",
        first: "$ trainc validate",
        sandbox: Scratch("mnist"),
        before: &[],
    },
    Example {
        doc: "docs/project.md",
        first: "$ trainc build",
        sandbox: Same,
        before: &[],
    },
    // "After lowering `worker.replicas` from 2 to 1"
    Example {
        doc: "docs/project.md",
        first: "$ trainc build",
        sandbox: Scratch("mnist"),
        before: &[Trainc(&["build"]), LOWER_WORKERS],
    },
    // `build --check` and `diff`: the same change, not built yet.
    Example {
        doc: "docs/project.md",
        first: "$ trainc build --check",
        sandbox: Scratch("mnist"),
        before: &[Trainc(&["build"]), LOWER_WORKERS],
    },
    Example {
        doc: "docs/project.md",
        first: "$ trainc diff --stat",
        sandbox: Same,
        before: &[],
    },
    Example {
        doc: "docs/project.md",
        first: "$ trainc init",
        sandbox: Empty,
        before: &[],
    },
    Example {
        doc: "docs/project.md",
        first: "$ trainc init --target pytorchjob",
        sandbox: Empty,
        before: &[],
    },
    Example {
        doc: "docs/project.md",
        first: "$ trainc manpages man",
        sandbox: Empty,
        before: &[],
    },
    // "with `ps.replicas: -1` and `replica` misspelt in the MNIST example"
    Example {
        doc: "docs/project.md",
        first: "$ trainc validate",
        sandbox: Scratch("mnist"),
        before: &[
            Edit(
                "jobs/mnist.yaml",
                "ps:     {replicas: 2,",
                "ps:     {replicas: -1,",
            ),
            Edit(
                "jobs/mnist.yaml",
                "worker: {replicas: 2,",
                "worker: {replica: 2,",
            ),
        ],
    },
];

/// The documents whose examples are checked, in this order.
fn docs() -> Vec<String> {
    let mut docs = vec!["README.md".to_owned()];
    let mut more: Vec<String> = fs::read_dir(root().join("docs"))
        .expect("docs/")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    more.sort();
    docs.extend(more);
    docs
}

/// A fenced block of a Markdown file.
struct Block {
    /// 1-based line of the opening fence.
    line: usize,
    info: String,
    /// The lines inside, without the fence's indentation.
    body: Vec<String>,
    /// The last non-blank line before the fence.
    before: String,
}

fn blocks(text: &str) -> Vec<Block> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let trimmed = lines[i].trim_start();
        let indent = lines[i].len() - trimmed.len();
        let Some(info) = trimmed.strip_prefix("```") else {
            i += 1;
            continue;
        };
        let before = lines[..i]
            .iter()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map_or("", |l| l.trim())
            .to_owned();
        let mut body = Vec::new();
        let mut j = i + 1;
        while j < lines.len() && lines[j].trim() != "```" {
            let l = lines[j];
            // Strip the fence's indentation, no more.
            let cut = l.len() - l.trim_start().len();
            body.push(l[cut.min(indent)..].to_owned());
            j += 1;
        }
        out.push(Block {
            line: i + 1,
            info: info.trim().to_owned(),
            body,
            before,
        });
        i = j + 1;
    }
    out
}

/// One `$ command` of a session and the output shown after it.
struct Cmd {
    line: String,
    expected: String,
}

fn session(body: &[String]) -> Result<Vec<Cmd>, String> {
    let mut cmds: Vec<Cmd> = Vec::new();
    let mut lines = body.iter();
    while let Some(l) = lines.next() {
        if let Some(cmd) = l.strip_prefix("$ ") {
            let mut cmd = cmd.to_owned();
            while cmd.ends_with('\\') {
                cmd.pop();
                let next = lines.next().ok_or("a `\\` ends the block")?;
                cmd.push(' ');
                cmd.push_str(next.trim());
            }
            cmds.push(Cmd {
                line: cmd,
                expected: String::new(),
            });
        } else {
            let last = cmds
                .last_mut()
                .ok_or_else(|| format!("output before the first `$` line: {l}"))?;
            last.expected.push_str(l);
            last.expected.push('\n');
        }
    }
    Ok(cmds)
}

/// Shell words: whitespace-separated, with '…' and "…" quoting; no
/// expansion, redirection or pipes.
fn words(line: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut word: Option<String> = None;
    let mut quote: Option<char> = None;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.get_or_insert_default().push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                word.get_or_insert_default();
            }
            (None, c) if c.is_whitespace() => out.extend(word.take()),
            (None, '|' | '>' | '<' | '$' | '`' | ';' | '&' | '~' | '*') => {
                return Err(format!(
                    "`{line}`: `{c}` needs a shell, which this test has not"
                ));
            }
            (None, c) => word.get_or_insert_default().push(c),
        }
    }
    if quote.is_some() {
        return Err(format!("`{line}`: unclosed quote"));
    }
    out.extend(word);
    Ok(out)
}

/// Runs `trainc args` in `cwd`: exit code, and stdout and stderr
/// interleaved as a terminal would show them.
fn trainc(cwd: &Path, cache: &Path, args: &[String]) -> (i32, String) {
    let mut file = tempfile::tempfile().expect("tempfile");
    let status = Command::new(env!("CARGO_BIN_EXE_trainc"))
        .args(args)
        .current_dir(cwd)
        .env("TRAINC_CACHE_DIR", cache)
        .env_remove("NO_COLOR")
        .stdin(Stdio::null())
        .stdout(file.try_clone().expect("dup"))
        .stderr(file.try_clone().expect("dup"))
        .status()
        .expect("trainc runs");
    let mut out = String::new();
    file.rewind().expect("rewind");
    file.read_to_string(&mut out).expect("UTF-8 output");
    (status.code().unwrap_or(-1), out)
}

/// A session's directory: the project, where the commands run, and a build
/// cache of its own outside the project.
struct Place {
    _dir: tempfile::TempDir,
    project: PathBuf,
    cwd: PathBuf,
    cache: tempfile::TempDir,
}

fn prepare(sandbox: &Sandbox, before: &[Step], last: Option<Place>) -> Result<Place, String> {
    let place = match sandbox {
        Same => last.ok_or("`Same` on a doc's first session")?,
        Scratch(name) => {
            let dir = scratch_example(name);
            let project = dir.path().to_path_buf();
            Place {
                cwd: project.clone(),
                project,
                _dir: dir,
                cache: tempfile::tempdir().expect("tempdir"),
            }
        }
        Empty => {
            let dir = tempfile::tempdir().expect("tempdir");
            let project = dir.path().to_path_buf();
            Place {
                cwd: project.clone(),
                project,
                _dir: dir,
                cache: tempfile::tempdir().expect("tempdir"),
            }
        }
    };
    let p = &place.project;
    let replace_once =
        |text: &str, from: &str, to: &str, file: &str| match text.matches(from).count() {
            1 => Ok(text.replacen(from, to, 1)),
            n => Err(format!(
                "set-up: `{from}` occurs {n} times in {file}, not once"
            )),
        };
    for step in before {
        match step {
            Edit(file, from, to) => {
                let text = fs::read_to_string(p.join(file)).map_err(|e| format!("{file}: {e}"))?;
                fs::write(p.join(file), replace_once(&text, from, to, file)?)
                    .map_err(|e| format!("{file}: {e}"))?;
            }
            Write(file, text) => {
                let path = p.join(file);
                fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
                fs::write(&path, text).map_err(|e| format!("{file}: {e}"))?;
            }
            CopyEdit(from, to, a, b) => {
                let text = fs::read_to_string(p.join(from)).map_err(|e| format!("{from}: {e}"))?;
                fs::write(p.join(to), replace_once(&text, a, b, from)?)
                    .map_err(|e| format!("{to}: {e}"))?;
            }
            Move(from, to) => {
                let to_path = p.join(to);
                fs::create_dir_all(to_path.parent().expect("parent")).expect("mkdir");
                fs::rename(p.join(from), &to_path).map_err(|e| format!("{from}: {e}"))?;
            }
            Trainc(args) => {
                let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
                let (code, out) = trainc(p, place.cache.path(), &args);
                if code != 0 {
                    return Err(format!("set-up `trainc {}` failed:\n{out}", args.join(" ")));
                }
            }
        }
    }
    Ok(place)
}

/// Runs one session; `Err` says what differs.
fn run(block: &Block, place: &mut Place) -> Result<(), String> {
    let mut last_code: Option<i32> = None;
    let mut failures = Vec::new();
    for cmd in session(&block.body)? {
        if cmd.line.trim() == "echo $?" {
            let shown = cmd.expected.trim();
            match last_code {
                Some(code) if shown == code.to_string() => {}
                code => failures.push(format!(
                    "`$ echo $?` shows {shown}, the command before exited {code:?}"
                )),
            }
            continue;
        }
        let words = words(&cmd.line)?;
        match words
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .as_slice()
        {
            ["cd", dir] => {
                place.cwd = place.cwd.join(dir);
                if !cmd.expected.is_empty() {
                    failures.push(format!("`$ {}` prints nothing", cmd.line));
                }
            }
            ["trainc", args @ ..] => {
                let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
                let (code, out) = trainc(&place.cwd, place.cache.path(), &args);
                last_code = Some(code);
                if let Err(e) = snapbox::Assert::new()
                    .palette(snapbox::report::Palette::plain())
                    .try_eq(
                        Some(&format!("`$ {}`", cmd.line)),
                        snapbox::Data::text(out),
                        snapbox::Data::text(cmd.expected.clone()),
                    )
                {
                    failures.push(format!("`$ {}` (exit {code}):\n{e}", cmd.line));
                }
            }
            _ => failures.push(format!(
                "`$ {}`: the commands are `trainc`, `cd` and `echo $?`",
                cmd.line
            )),
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n"))
    }
}

#[test]
fn the_docs_shell_examples_print_what_they_show() {
    let mut failures: Vec<String> = Vec::new();
    let mut examples = EXAMPLES.iter().peekable();
    for doc in docs() {
        let text = fs::read_to_string(root().join(&doc)).expect("read doc");
        let mut last: Option<Place> = None;
        for block in blocks(&text) {
            let at = format!("{doc}:{}", block.line);
            if block.info != "console" {
                let shows_command = block
                    .body
                    .iter()
                    .any(|l| l.starts_with("$ ") && l.contains("trainc"));
                if shows_command && !block.before.starts_with("<!-- illustrative:") {
                    failures.push(format!(
                        "{at}: a block with a `$ trainc` line is a ```console block (checked here: add it to EXAMPLES) or is marked `<!-- illustrative: why -->` on the line before its fence"
                    ));
                }
                continue;
            }
            let Some(example) = examples.next_if(|e| e.doc == doc) else {
                failures.push(format!(
                    "{at}: a console block that EXAMPLES does not list (it expects {}); add it in document order",
                    examples
                        .peek()
                        .map_or("nothing more".to_owned(), |e| format!("{} `{}`", e.doc, e.first))
                ));
                continue;
            };
            let first = block.body.first().map_or("", String::as_str);
            if first != example.first {
                failures.push(format!(
                    "{at}: the block starts `{first}`, EXAMPLES expects `{}` here",
                    example.first
                ));
                continue;
            }
            let outcome =
                prepare(&example.sandbox, example.before, last.take()).and_then(|mut place| {
                    let r = run(&block, &mut place);
                    last = Some(place);
                    r
                });
            if let Err(e) = outcome {
                failures.push(format!("{at}:\n{e}"));
            }
        }
    }
    for e in examples {
        failures.push(format!(
            "EXAMPLES lists {} `{}`, which that doc does not have (in that order)",
            e.doc, e.first
        ));
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n\n"));
}
