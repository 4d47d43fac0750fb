//! The examples and exit codes of each command, written once and shown twice:
//! at the end of `--help` (clap's `after_help`) and as the EXAMPLES and EXIT
//! STATUS sections of the man pages (`manpages.rs`).

use clap::builder::StyledStr;
use clap::builder::styling::Styles;

/// What the help and the man page of one command say after its options.
pub struct Page {
    /// `(what it does, the command line)`; every line must work as shown
    /// (`tests/shell.rs` runs them).
    pub examples: &'static [(&'static str, &'static str)],
    /// `(code, when)`.
    pub exit: &'static [(&'static str, &'static str)],
}

impl Page {
    /// The text clap prints after the options, headed and styled like clap's
    /// own sections (so `--color never` and pipes lose the styles alike).
    pub fn after_help(&self) -> StyledStr {
        let styles = Styles::default();
        let (header, literal) = (styles.get_header(), styles.get_literal());
        let mut text = format!("{header}Examples:{header:#}\n");
        for (what, command) in self.examples {
            text.push_str(&format!("  # {what}\n  {literal}{command}{literal:#}\n"));
        }
        text.push_str(&format!("\n{header}Exit codes:{header:#}\n"));
        for (code, when) in self.exit {
            text.push_str(&format!("  {literal}{code:<3}{literal:#} {when}\n"));
        }
        StyledStr::from(text.trim_end().to_owned())
    }
}

/// The page of a command by its name (`""` for `trainc` itself).
pub fn page(command: &str) -> Option<&'static Page> {
    Some(match command {
        "" => &TRAINC,
        "validate" => &VALIDATE,
        "build" => &BUILD,
        "diff" => &DIFF,
        "run" => &RUN,
        "import" => &IMPORT,
        "schema" => &SCHEMA,
        "init" => &INIT,
        "completions" => &COMPLETIONS,
        "manpages" => &MANPAGES,
        _ => return None,
    })
}

const USAGE: (&str, &str) = (
    "2",
    "a usage error: an unknown command or flag, an invalid value",
);

pub const TRAINC: Page = Page {
    examples: &[
        ("Start a project in the working directory", "trainc init"),
        ("Check every definition of the project", "trainc validate"),
        ("Compile them into deploy/", "trainc build"),
        ("What a change would do to the cluster", "trainc diff"),
    ],
    exit: &[
        ("0", "success"),
        (
            "1",
            "`build --check`: the output is stale; `diff`: there are changes",
        ),
        ("2", "invalid definitions, a usage error or any other error"),
        ("N", "`run --local`: the training's exit status"),
    ],
};

pub const VALIDATE: Page = Page {
    examples: &[
        (
            "Check the definitions of the nearest trainc.yaml",
            "trainc validate",
        ),
        (
            "Check one file; the findings as JSON on stdout",
            "trainc validate jobs/mnist.yaml --format json",
        ),
    ],
    exit: &[
        ("0", "every definition is valid"),
        (
            "2",
            "a definition is invalid, has warnings with --deny-warnings, a usage error or any other error",
        ),
    ],
};

pub const BUILD: Page = Page {
    examples: &[
        (
            "Compile the project of the nearest trainc.yaml",
            "trainc build",
        ),
        (
            "In CI: fail when the committed output is stale, or on any warning",
            "trainc build --check --deny-warnings",
        ),
        (
            "The same, also naming the runs a pull request restarts",
            "trainc build --check --base origin/main",
        ),
        (
            "Compile even if the build cache says nothing changed",
            "trainc build --no-cache -v",
        ),
    ],
    exit: &[
        ("0", "written, or already up to date"),
        ("1", "with --check: the output is stale"),
        (
            "2",
            "invalid definitions, warnings with --deny-warnings, a refused file, a usage error or any other error",
        ),
    ],
};

pub const DIFF: Page = Page {
    examples: &[
        ("What `trainc build` would change", "trainc diff"),
        ("Only the per-resource summary", "trainc diff --stat"),
        (
            "A pull request's report: what it changes against its base branch",
            "trainc diff --base origin/main --format markdown > diff.md",
        ),
    ],
    exit: &[
        ("0", "no changes"),
        ("1", "`trainc build` would change files"),
        (
            "2",
            "invalid definitions, warnings with --deny-warnings, a usage error or any other error",
        ),
    ],
};

pub const IMPORT: Page = Page {
    examples: &[(
        "A Kubeflow PyTorchJob into a new project here, with what could not be kept",
        "trainc import pytorchjob.yaml",
    )],
    exit: &[
        ("0", "written"),
        (
            "2",
            "a file it cannot read, a definition that would not validate, a file in the way, a usage error",
        ),
    ],
};

pub const RUN: Page = Page {
    examples: &[
        (
            "Train with a Python environment that has the job's framework",
            "trainc run --local jobs/mnist.yaml --python .venv/bin/python",
        ),
        (
            "A quicker run: one parameter server, fewer epochs",
            "trainc run --local jobs/mnist.yaml --replicas ps=1 --set epochs=1",
        ),
    ],
    exit: &[
        ("N", "the training's exit status"),
        ("130", "stopped by Ctrl-C"),
        (
            "2",
            "invalid definitions, a usage error or any other error of trainc's",
        ),
    ],
};

pub const SCHEMA: Page = Page {
    examples: &[
        (
            "Refresh the schema that editors check definitions with",
            "trainc schema > schema/trainingjob.schema.json",
        ),
        ("The schema of trainc.yaml", "trainc schema project"),
    ],
    exit: &[("0", "printed"), USAGE],
};

pub const INIT: Page = Page {
    examples: &[
        ("A starter project in the working directory", "trainc init"),
        (
            "In a new directory, for the JobSet controller",
            "trainc init ml --name resnet --namespace ml --target jobset",
        ),
    ],
    exit: &[
        ("0", "written"),
        (
            "2",
            "a file exists (without --force), a path is a symlink, the starter would be invalid, a file cannot be written, or a usage error",
        ),
    ],
};

pub const COMPLETIONS: Page = Page {
    examples: &[
        (
            "bash, in this session (add the line to ~/.bashrc to keep it)",
            "source <(trainc completions bash)",
        ),
        (
            "zsh, with `fpath+=(~/.zfunc)` before `compinit` in ~/.zshrc",
            "trainc completions zsh > ~/.zfunc/_trainc",
        ),
        (
            "fish",
            "trainc completions fish > ~/.config/fish/completions/trainc.fish",
        ),
        (
            "PowerShell, in this session (add the line to $PROFILE to keep it)",
            "trainc completions powershell | Out-String | Invoke-Expression",
        ),
    ],
    exit: &[("0", "printed"), USAGE],
};

pub const MANPAGES: Page = Page {
    examples: &[
        (
            "For you alone (man looks there when ~/.local/bin is on PATH)",
            "trainc manpages ~/.local/share/man/man1",
        ),
        (
            "For everyone",
            "sudo trainc manpages /usr/local/share/man/man1",
        ),
    ],
    exit: &[
        ("0", "written"),
        (
            "2",
            "the directory cannot be created or a page cannot be written, or a usage error",
        ),
    ],
};
