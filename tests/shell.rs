//! Completions, man pages and the examples of `--help`, each checked by the
//! program it is for: the completion scripts are loaded by bash, zsh and fish
//! and asked to complete real command lines; the man pages pass mandoc's
//! linter; every example of every `--help` parses, and those a shell can run
//! here run, in a fresh project, and succeed.
//!
//! `tests/run.sh` unpacks zsh, fish and mandoc (`TRAINC_ZSH`, `TRAINC_FISH`,
//! `TRAINC_MANDOC`) and sets `TRAINC_REQUIRE_TOOLS`; a bare `cargo test`
//! skips what it cannot find. PowerShell is not packaged for Debian: its
//! script is only generated.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use clap::Parser as _;
use common::{run, stdout, tool, trainc};

fn ok(o: &Output, what: &str) {
    assert!(
        o.status.success(),
        "{what}: {}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        stdout(o),
        common::stderr(o)
    );
}

fn script(shell: &str) -> String {
    let o = trainc().args(["completions", shell]).output().unwrap();
    ok(&o, shell);
    stdout(&o)
}

/// The commands `trainc --help` lists, but `help`.
fn commands() -> Vec<String> {
    let help = stdout(&trainc().arg("--help").output().unwrap());
    let section = help
        .split("Commands:\n")
        .nth(1)
        .expect("a Commands section")
        .split("\n\n")
        .next()
        .unwrap();
    section
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_owned)
        .collect()
}

/// The long flags in the Options section of `trainc COMMAND --help`.
fn flags(command: &str) -> Vec<String> {
    let help = stdout(&trainc().args([command, "--help"]).output().unwrap());
    let options = help.split("Options:\n").nth(1).unwrap();
    let options = options.split("Examples:").next().unwrap();
    let mut flags: Vec<String> = options
        .lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with('-'))
        .flat_map(|l| {
            l.split([' ', ','])
                .take_while(|w| w.is_empty() || w.starts_with('-'))
        })
        .filter(|w| w.starts_with("--"))
        .map(str::to_owned)
        .collect();
    flags.dedup();
    assert!(flags.contains(&"--help".to_owned()), "{flags:?}");
    flags
}

#[test]
fn every_command_has_examples_and_exit_codes() {
    let commands = commands();
    for c in [
        "validate",
        "build",
        "diff",
        "run",
        "schema",
        "init",
        "completions",
        "manpages",
    ] {
        assert!(
            commands.contains(&c.to_owned()),
            "{c} missing from {commands:?}"
        );
    }
    for command in std::iter::once("").chain(commands.iter().map(String::as_str)) {
        let args: Vec<&str> = [command, "--help"]
            .into_iter()
            .filter(|a| !a.is_empty())
            .collect();
        let help = stdout(&trainc().args(&args).output().unwrap());
        let examples = examples(&help);
        assert!(
            !examples.is_empty(),
            "`trainc {command} --help` shows no example"
        );
        for (_, line) in &examples {
            assert!(
                line.contains(&format!("trainc {command}")),
                "an example of `{command}` that does not use it: {line}"
            );
        }
        let codes = help
            .split("\nExit codes:\n")
            .nth(1)
            .unwrap_or_else(|| panic!("`trainc {command} --help` has no exit codes:\n{help}"));
        assert!(
            codes.lines().any(|l| l.trim_start().starts_with("2 ")),
            "{codes}"
        );
    }
}

/// `(what, command line)` of each example of a `--help` text.
fn examples(help: &str) -> Vec<(String, String)> {
    let Some(section) = help.split("\nExamples:\n").nth(1) else {
        return vec![];
    };
    let lines: Vec<&str> = section.split("\n\n").next().unwrap().lines().collect();
    lines
        .chunks(2)
        .map(|pair| {
            let what = pair[0].trim().strip_prefix("# ").expect("a comment line");
            (what.to_owned(), pair[1].trim().to_owned())
        })
        .collect()
}

/// The trainc command line inside an example: after `sudo` or `<(`, before
/// a redirection or a pipe.
fn argv(line: &str) -> Vec<String> {
    let start = line.find("trainc ").expect("an example runs trainc");
    line[start..]
        .split([')', '>', '|'])
        .next()
        .unwrap()
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// Every example parses; the ones a POSIX shell can run here run with bash,
/// exactly as printed, and succeed: `trainc --help`'s in order in an empty
/// directory, `init`'s each in an empty directory of its own, the others'
/// in a started and built project. `run --local`'s
/// train a model and `sudo` installs system-wide: they are only parsed.
#[test]
fn help_examples_work_as_shown() {
    let bin_dir = PathBuf::from(env!("CARGO_BIN_EXE_trainc"))
        .parent()
        .unwrap()
        .to_owned();
    let path = std::env::join_paths(
        std::iter::once(bin_dir).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap();
    let mut ran = 0;
    for command in std::iter::once(String::new()).chain(commands()) {
        let args: Vec<&str> = [command.as_str(), "--help"]
            .into_iter()
            .filter(|a| !a.is_empty())
            .collect();
        let help = stdout(&trainc().args(&args).output().unwrap());
        let scratch = tempfile::tempdir().unwrap();
        let home = scratch.path().join("home");
        // Where a zsh and a fish user keep completions: the directories exist.
        for d in [".zfunc", ".config/fish/completions"] {
            std::fs::create_dir_all(home.join(d)).unwrap();
        }
        let project = scratch.path().join("project");
        std::fs::create_dir(&project).unwrap();
        // `trainc --help` walks through a new project; `init`'s start one.
        if !command.is_empty() && command != "init" {
            ok(&run(&project, &["init"]), "trainc init");
            ok(&run(&project, &["build"]), "trainc build");
            // Committed, with the commit as a remote's branch: what
            // `--base origin/main` compares with in a pull request's CI.
            common::git(&project, &["init", "--quiet", "--initial-branch=main"]);
            common::commit_all(&project, "the project");
            common::git(
                &project,
                &["update-ref", "refs/remotes/origin/main", "main"],
            );
        }
        // What `import`'s example reads.
        if command == "import" {
            std::fs::copy(
                common::root().join("tests/fixtures/import/llm-finetune.yaml"),
                project.join("pytorchjob.yaml"),
            )
            .unwrap();
        }
        for (what, line) in examples(&help) {
            if let Err(e) = trainc::cli::Cli::try_parse_from(argv(&line)) {
                panic!("`{line}` ({what}) does not parse:\n{e}");
            }
            if line.starts_with("sudo ")
                || line.starts_with("trainc run ")
                || line.contains("Out-String")
            {
                continue;
            }
            let dir = if command == "init" {
                // Each starter in a directory of its own.
                let d = scratch.path().join(format!("init-{ran}"));
                std::fs::create_dir(&d).unwrap();
                d
            } else {
                project.clone()
            };
            let o = Command::new("bash")
                .args(["-euo", "pipefail", "-c", &line])
                .current_dir(&dir)
                .env("PATH", &path)
                .env("HOME", &home)
                .env("TRAINC_CACHE_DIR", common::cache_dir())
                .output()
                .unwrap();
            ok(&o, &format!("`{line}` ({what})"));
            ran += 1;
        }
    }
    assert!(ran >= 15, "only {ran} examples ran");
}

/// Completions offered by bash for a command line (the words so far, the
/// last one being completed), through the function the script registers
/// with `complete`, the way bash calls it on TAB.
fn bash_complete(bash: &Path, script: &Path, line: &str) -> Vec<String> {
    let driver = r#"
source "$1"
spec=$(complete -p trainc)
function=${spec##*-F }
function=${function%% *}
read -r -a COMP_WORDS <<< "$2"
[[ "$2" == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
COMP_LINE=$2
COMP_POINT=${#COMP_LINE}
prev=""
(( COMP_CWORD > 0 )) && prev=${COMP_WORDS[COMP_CWORD-1]}
"$function" trainc "${COMP_WORDS[COMP_CWORD]}" "$prev"
printf '%s\n' "${COMPREPLY[@]}"
"#;
    let o = Command::new(bash)
        .args(["--norc", "-c", driver, "driver"])
        .arg(script)
        .arg(line)
        .output()
        .unwrap();
    ok(&o, &format!("bash completing `{line}`"));
    let mut words: Vec<String> = stdout(&o).lines().map(|l| l.trim().to_owned()).collect();
    words.retain(|w| !w.is_empty());
    words
}

fn assert_offers(shell: &str, line: &str, got: &[String], expected: &[&str]) {
    for e in expected {
        assert!(
            got.iter().any(|g| g == e),
            "{shell} completing `{line}` does not offer `{e}`: {got:?}"
        );
    }
}

#[test]
fn bash_completes_commands_flags_and_values() {
    let Some(bash) = tool("TRAINC_BASH", "bash") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("trainc.bash");
    std::fs::write(&file, script("bash")).unwrap();
    let commands = commands();
    let got = bash_complete(&bash, &file, "trainc ");
    let expected: Vec<&str> = commands.iter().map(String::as_str).collect();
    assert_offers("bash", "trainc ", &got, &expected);
    assert_eq!(bash_complete(&bash, &file, "trainc bu"), ["build"]);
    for command in &commands {
        let line = format!("trainc {command} --");
        let got = bash_complete(&bash, &file, &line);
        let flags = flags(command);
        let expected: Vec<&str> = flags.iter().map(String::as_str).collect();
        assert_offers("bash", &line, &got, &expected);
    }
    let line = "trainc completions ";
    let got = bash_complete(&bash, &file, line);
    assert_offers("bash", line, &got, &["bash", "zsh", "fish", "powershell"]);
    let line = "trainc diff --format ";
    let got = bash_complete(&bash, &file, line);
    assert_offers("bash", line, &got, &["text", "markdown", "json"]);
}

#[test]
fn fish_completes_commands_flags_and_values() {
    let Some(fish) = tool("TRAINC_FISH", "fish") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("trainc.fish");
    std::fs::write(&file, script("fish")).unwrap();
    let complete = |line: &str| -> Vec<String> {
        let o = Command::new(&fish)
            .env("HOME", dir.path())
            .env("XDG_CONFIG_HOME", dir.path().join("config"))
            .env("XDG_DATA_HOME", dir.path().join("data"))
            .arg("--no-config")
            .arg("-c")
            .arg(format!("source {}; complete -C '{line}'", file.display()))
            .output()
            .unwrap();
        ok(&o, &format!("fish completing `{line}`"));
        // Each candidate is printed with its description after a tab.
        stdout(&o)
            .lines()
            .map(|l| l.split('\t').next().unwrap().to_owned())
            .collect()
    };
    let commands = commands();
    let expected: Vec<&str> = commands.iter().map(String::as_str).collect();
    assert_offers("fish", "trainc ", &complete("trainc "), &expected);
    assert_eq!(complete("trainc bu"), ["build"]);
    for command in &commands {
        let line = format!("trainc {command} --");
        let flags = flags(command);
        let expected: Vec<&str> = flags.iter().map(String::as_str).collect();
        assert_offers("fish", &line, &complete(&line), &expected);
    }
    let line = "trainc completions ";
    assert_offers(
        "fish",
        line,
        &complete(line),
        &["bash", "zsh", "fish", "powershell"],
    );
    let line = "trainc diff --format ";
    assert_offers("fish", line, &complete(line), &["text", "markdown", "json"]);
    let line = "trainc schema ";
    assert_offers("fish", line, &complete(line), &["definition", "project"]);
}

/// zsh completes only inside its line editor, so the test starts an
/// interactive zsh on a pseudo-terminal (zsh's own `zpty`), loads the script
/// the way users install it (a file `_trainc` in `$fpath`, then `compinit`),
/// types the line and TAB, and records what the completion system is given
/// to offer by wrapping `compadd`.
fn zsh_complete(zsh: &Path, dir: &Path, line: &str) -> Vec<String> {
    let out = dir.join("offered");
    let done = dir.join("done");
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_file(&done);
    let setup = dir.join("setup.zsh");
    std::fs::write(
        &setup,
        format!(
            r#"PS1='> '
fpath=({dir} $fpath)
autoload -Uz compinit && compinit -u -D
compadd() {{
  # Calls that only ask which words match are the completion system's own.
  if (( ${{@[(I)-[OAD]]}} )); then builtin compadd "$@"; return; fi
  local -a offered
  builtin compadd -O offered "$@"
  (( $#offered )) && print -rl -- $offered >> {out}
  builtin compadd "$@"
}}
trainc_test_done() {{ : >> {out}; : > {done} }}
comppostfuncs=(trainc_test_done)
"#,
            dir = dir.display(),
            out = out.display(),
            done = done.display(),
        ),
    )
    .unwrap();
    let driver = r#"
zmodload zsh/zpty || exit 3
zpty session "$1 -i"
zpty -w session "source $2"
zpty -w -n session "$3"$'\t'
for i in {1..200}; do [[ -e $4 ]] && break; sleep 0.05; done
zpty -d session
[[ -e $4 ]]
"#;
    let o = Command::new(zsh)
        .env("HOME", dir)
        .env("ZDOTDIR", dir)
        .args(["-c", driver, "driver"])
        .arg(zsh)
        .arg(&setup)
        .arg(line)
        .arg(&done)
        .output()
        .unwrap();
    ok(&o, &format!("zsh completing `{line}` (no answer in 10 s?)"));
    let mut words: Vec<String> = std::fs::read_to_string(&out)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect();
    words.sort();
    words.dedup();
    words
}

#[test]
fn zsh_completes_commands_flags_and_values() {
    let Some(zsh) = tool("TRAINC_ZSH", "zsh") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // An empty .zshrc: a new user's zsh would otherwise ask questions.
    std::fs::write(dir.path().join(".zshrc"), "").unwrap();
    std::fs::write(dir.path().join("_trainc"), script("zsh")).unwrap();
    let complete = |line: &str| zsh_complete(&zsh, dir.path(), line);
    let commands = commands();
    let expected: Vec<&str> = commands.iter().map(String::as_str).collect();
    assert_offers("zsh", "trainc ", &complete("trainc "), &expected);
    assert_eq!(complete("trainc bu"), ["build"]);
    for command in &commands {
        let line = format!("trainc {command} --");
        let flags = flags(command);
        let expected: Vec<&str> = flags.iter().map(String::as_str).collect();
        assert_offers("zsh", &line, &complete(&line), &expected);
    }
    let line = "trainc completions ";
    assert_offers(
        "zsh",
        line,
        &complete(line),
        &["bash", "zsh", "fish", "powershell"],
    );
    let line = "trainc diff --format ";
    assert_offers("zsh", line, &complete(line), &["text", "markdown", "json"]);
}

#[test]
fn powershell_script_registers_every_command() {
    let script = script("powershell");
    assert!(script.contains("Register-ArgumentCompleter -Native -CommandName 'trainc'"));
    for command in commands() {
        assert!(script.contains(&format!("'trainc;{command}'")), "{command}");
    }
}

/// One page per command, named as `man trainc-build` finds it, with the
/// command's options, exit codes and examples, free of mandoc's warnings;
/// the same bytes every time.
#[test]
fn man_pages_lint_clean_and_complete() {
    let dir = tempfile::tempdir().unwrap();
    let man1 = dir.path().join("share/man/man1");
    let o = run(dir.path(), &["manpages", "share/man/man1"]);
    ok(&o, "trainc manpages");
    let commands = commands();
    let mut expected: Vec<String> = std::iter::once("trainc.1".to_owned())
        .chain(commands.iter().map(|c| format!("trainc-{c}.1")))
        .collect();
    let reported: Vec<String> = stdout(&o).lines().map(str::to_owned).collect();
    assert_eq!(
        reported,
        expected
            .iter()
            .map(|f| format!("wrote share/man/man1/{f}"))
            .collect::<Vec<_>>()
    );
    let mut written: Vec<String> = std::fs::read_dir(&man1)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    written.sort();
    expected.sort();
    assert_eq!(written, expected);

    for command in std::iter::once("").chain(commands.iter().map(String::as_str)) {
        let (name, file) = if command.is_empty() {
            ("trainc".to_owned(), "trainc.1".to_owned())
        } else {
            (format!("trainc-{command}"), format!("trainc-{command}.1"))
        };
        let page = std::fs::read_to_string(man1.join(&file)).unwrap();
        assert!(
            page.contains(&format!(".TH {} 1 ", name.to_uppercase())),
            "{file}: {}",
            page.lines().find(|l| l.starts_with(".TH")).unwrap_or("")
        );
        for section in [
            "NAME",
            "SYNOPSIS",
            "DESCRIPTION",
            "OPTIONS",
            "\"EXIT STATUS\"",
            "EXAMPLES",
        ] {
            assert!(
                page.contains(&format!("\n.SH {section}\n")),
                "{file} has no {section}"
            );
        }
        // In roff a `-` is written `\-`.
        let flags = if command.is_empty() {
            vec![
                "--color".to_owned(),
                "--help".to_owned(),
                "--version".to_owned(),
            ]
        } else {
            flags(command)
        };
        for flag in flags {
            let roff = flag.replace('-', "\\-");
            assert!(
                page.contains(&format!("\\fB{roff}\\fR")),
                "{file} does not name {flag}"
            );
        }
        let help = if command.is_empty() {
            stdout(&trainc().arg("--help").output().unwrap())
        } else {
            stdout(&trainc().args([command, "--help"]).output().unwrap())
        };
        for (_, example) in examples(&help) {
            let roff = example.replace('\\', "\\\\").replace('-', "\\-");
            assert!(page.contains(&roff), "{file} lacks the example {example}");
        }
        if command.is_empty() {
            for c in &commands {
                assert!(
                    page.contains(&format!("trainc\\-{c}(1)")),
                    "trainc.1 does not list {c}"
                );
            }
        }
    }

    let again = tempfile::tempdir().unwrap();
    ok(&run(again.path(), &["manpages", "."]), "trainc manpages .");
    for f in &expected {
        assert_eq!(
            std::fs::read(man1.join(f)).unwrap(),
            std::fs::read(again.path().join(f)).unwrap(),
            "{f} differs between two runs"
        );
    }

    let Some(mandoc) = tool("TRAINC_MANDOC", "mandoc") else {
        return;
    };
    for f in &expected {
        let o = Command::new(&mandoc)
            .args(["-T", "lint", "-W", "warning"])
            .arg(man1.join(f))
            .output()
            .unwrap();
        assert!(
            o.status.success() && o.stdout.is_empty() && o.stderr.is_empty(),
            "mandoc -T lint {f}:\n{}{}",
            stdout(&o),
            common::stderr(&o)
        );
    }
}

/// `manpages` writes its pages and nothing else: other files in the
/// directory stay, a page that is a symbolic link is replaced, not written
/// through, and a directory that cannot be made is an error, exit 2.
#[test]
fn manpages_touch_only_their_own_files() {
    let dir = tempfile::tempdir().unwrap();
    let man1 = dir.path().join("man1");
    std::fs::create_dir(&man1).unwrap();
    std::fs::write(man1.join("git.1"), "other\n").unwrap();
    let elsewhere = dir.path().join("elsewhere.1");
    std::fs::write(&elsewhere, "keep\n").unwrap();
    std::os::unix::fs::symlink(&elsewhere, man1.join("trainc-build.1")).unwrap();
    std::fs::write(man1.join("trainc.1"), "an older page\n").unwrap();

    ok(&run(dir.path(), &["manpages", "man1"]), "trainc manpages");
    assert_eq!(
        std::fs::read_to_string(man1.join("git.1")).unwrap(),
        "other\n"
    );
    assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), "keep\n");
    let build = std::fs::symlink_metadata(man1.join("trainc-build.1")).unwrap();
    assert!(build.is_file());
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(build.permissions().mode() & 0o777, 0o644);
    assert!(
        std::fs::read_to_string(man1.join("trainc.1"))
            .unwrap()
            .starts_with(".ie")
    );
    let leftovers: Vec<_> = std::fs::read_dir(&man1)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| !n.starts_with("trainc") && n != "git.1")
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    let o = run(dir.path(), &["manpages", "elsewhere.1/man1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stdout(&o).is_empty());
    let err = common::stderr(&o);
    assert!(
        err.contains("error: cannot create elsewhere.1/man1: "),
        "{err}"
    );
}

/// A reader that has gone (`trainc completions bash | head -1`) is not a
/// panic: the script is generated in memory, and the failed write ignored.
#[test]
fn completions_survive_a_closed_pipe() {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let o = trainc()
        .args(["completions", "bash"])
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}: {}", o.status, common::stderr(&o));
    assert!(o.stderr.is_empty(), "{}", common::stderr(&o));
}
