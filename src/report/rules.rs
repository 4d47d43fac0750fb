//! The kinds of finding, with ids that stay the same from release to
//! release: SARIF's `ruleId`, the `rule` of a JSON finding. Code scanning
//! tracks alerts by rule and location, so an id must never change meaning.
//!
//! Findings carry no codes of their own; the kind is derived here, in one
//! place, from what every finding has: whether it is about one field, about
//! a file, or about neither.

use crate::diagnostic::Diagnostic;

/// One kind of finding.
#[derive(Debug, PartialEq, Eq)]
pub struct Rule {
    pub id: &'static str,
    /// SARIF's `name`: PascalCase.
    pub name: &'static str,
    /// SARIF's `shortDescription`, and the title of a GitHub annotation.
    pub short: &'static str,
    pub full: &'static str,
}

/// A field of a definition, the project file or a preset: what the schema
/// or a semantic rule refuses or warns about.
pub const FIELD: Rule = Rule {
    id: "trainc/field",
    name: "Field",
    short: "Invalid or questionable field",
    full: "A field of a definition, of trainc.yaml or of a library preset breaks the schema or a semantic rule (an error), or works but is worth a second look (a warning, e.g. a mutable image tag). The finding names the field's dotted path and points at its value.",
};

/// A file as a whole: it does not parse, is not UTF-8, or is not what it
/// is used as.
pub const FILE: Rule = Rule {
    id: "trainc/file",
    name: "File",
    short: "Unusable input file",
    full: "An input file is not valid YAML or UTF-8, holds the wrong kind of document, or is otherwise unusable as a whole. The finding points at the place in the file where the problem is.",
};

/// No input file to point at: arguments, directories, the environment.
pub const COMMAND: Rule = Rule {
    id: "trainc/command",
    name: "Command",
    short: "Command cannot go on",
    full: "A problem that no single place in an input file shows: a path that cannot be read, an output directory trainc refuses to prune, conflicting arguments, an output over a limit. These findings have no location.",
};

/// A generated file that is not what `trainc build` would write
/// (`build --check`).
pub const STALE: Rule = Rule {
    id: "trainc/stale-output",
    name: "StaleOutput",
    short: "Stale generated file",
    full: "A file of the output or build directory is not what `trainc build` writes from the committed definitions: it would be created, updated or deleted. Run `trainc build` and commit the result.",
};

/// A training run that a pull request starts, starts again or stops
/// (`build --check --base`): a note for reviewers, not a problem.
pub const RUN_CHANGE: Rule = Rule {
    id: "trainc/run-change",
    name: "RunChange",
    short: "Training run starts, restarts or stops",
    full: "Compared with the base commit given to `--base`, a training run of the output starts, starts again from its first step (with the fields of its definition that changed), or stops. A note for reviewers: what the change costs in GPU hours.",
};

/// Every rule, in the order SARIF lists them (`ruleIndex`).
pub const ALL: [&Rule; 5] = [&FIELD, &FILE, &COMMAND, &STALE, &RUN_CHANGE];

/// The kind of a finding.
pub fn of(d: &Diagnostic) -> &'static Rule {
    if d.path.is_some() {
        &FIELD
    } else if d.location.is_some() {
        &FILE
    } else {
        &COMMAND
    }
}

/// Where a rule is in [`ALL`].
pub fn index(rule: &Rule) -> usize {
    ALL.iter().position(|r| *r == rule).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_stable() {
        let ids: Vec<&str> = ALL.iter().map(|r| r.id).collect();
        // Renaming one loses every open code-scanning alert of it.
        assert_eq!(
            ids,
            [
                "trainc/field",
                "trainc/file",
                "trainc/command",
                "trainc/stale-output",
                "trainc/run-change"
            ]
        );
        for (i, r) in ALL.iter().enumerate() {
            assert_eq!(index(r), i);
        }
    }

    #[test]
    fn the_kind_follows_what_the_finding_points_at() {
        assert_eq!(of(&Diagnostic::new("x")).id, "trainc/command");
        assert_eq!(of(&Diagnostic::new("x").path("spec.a")).id, "trainc/field");
    }
}
