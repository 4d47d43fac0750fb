//! `.dockerignore` as BuildKit reads it, so that the files hashed into an
//! image tag are exactly the files the builder receives. The rules are
//! Docker's own (moby/patternmatcher and its `ignorefile` reader, applied
//! the way BuildKit's context walk applies them), not a shell's and not
//! `.gitignore`'s, and differ from both in ways a repository could use to
//! change an image without changing its tag:
//!
//! - `#` starts a comment only in the first column. Other lines are trimmed,
//!   cleaned like a path (`./a/../b/` is `b`), and lose one leading `/`.
//! - Patterns are relative to the context root. `*` and `?` stay within a
//!   path segment, `[...]` is a class (`^` negates it; `!` is a character in
//!   it), `\` escapes; `{a,b}` is the text `{a,b}`.
//! - `**` is any number of directories (`a/**/b`). A pattern that starts
//!   with it and has no other wildcard (`**/x`, `**x`) matches the end of
//!   the path as text; one that ends with it and has none before (`a/**`),
//!   the start.
//! - Any other pattern with a wildcard, a class or an escape is translated
//!   into a regular expression as Docker translates it, which leaves `^` (an
//!   anchor) and `|` (an alternation) as they are.
//! - Rules are applied to each directory on the way down, a directory left
//!   out leaves out what is below it, `!` brings back, and the last rule
//!   that applies wins, with BuildKit's shortcuts: a rule that matched a
//!   directory holds for everything below it, and a directory left out is
//!   not even walked unless a `!` rule could bring back part of it.
//!
//! Lines that Docker refuses (the build fails) are refused. So are a few it
//! accepts but reads through its regular-expression translation (`\d`,
//! `{2}`, `*` inside `[...]`): their meaning there is an accident of the
//! translation.

use std::iter::Peekable;
use std::str::Chars;

use regex_lite::Regex;

pub struct DockerIgnore {
    rules: Vec<Rule>,
    /// Where a `!` rule could bring something back, for deciding whether a
    /// directory left out is walked: `None` if any `!` rule has a wildcard
    /// (other than a trailing `/*` or `/**`), and BuildKit walks them all;
    /// else each `!` rule's path without that ending, followed by `/`.
    exceptions: Option<Vec<String>>,
}

struct Rule {
    /// `!pattern`: brings back what earlier rules left out.
    negate: bool,
    matcher: Matcher,
}

/// How patternmatcher matches a pattern, chosen from its text.
enum Matcher {
    /// No wildcard and no escape: the path is the pattern.
    Exact(String),
    /// `**` at the end and nothing special before: the path starts with this.
    Prefix(String),
    /// `**` at the start and nothing special after: the path ends with this,
    /// or is this without its leading `/`.
    Suffix(String),
    Regex(Regex),
}

/// What a build does with a path.
#[derive(PartialEq)]
enum Verdict {
    Sent,
    LeftOut,
    /// Left out with everything below it: BuildKit does not walk it.
    NotWalked,
}

/// Docker reads the file with Go's line scanner, whose buffer is 64 KiB: a
/// longer line fails the build.
const MAX_LINE_BYTES: usize = 64 * 1024;

impl DockerIgnore {
    /// Parses the file's text. Lines that are not valid patterns are errors
    /// (as they are for BuildKit), returned as `(line, message)`.
    pub fn parse(text: &str) -> Result<Self, (usize, String)> {
        let mut rules = Vec::new();
        let mut exceptions = Some(Vec::new());
        for (i, raw) in lines(text).enumerate() {
            if raw.len() >= MAX_LINE_BYTES {
                return Err((
                    i + 1,
                    "the line is 64 KiB or longer, which Docker refuses".into(),
                ));
            }
            let line = raw.strip_suffix('\r').unwrap_or(raw);
            // A byte-order mark is dropped from the first line only.
            let line = match i {
                0 => line.strip_prefix('\u{feff}').unwrap_or(line),
                _ => line,
            };
            let Some((negate, pattern)) = pattern_of(line).map_err(|e| (i + 1, e))? else {
                continue;
            };
            let matcher = Matcher::compile(&pattern)
                .map_err(|e| (i + 1, format!("`{}`: {e}", line.trim())))?;
            if negate {
                // BuildKit's test, on the text (`a/*` and `a/**` mean `a`).
                let path = pattern.strip_suffix("/**").unwrap_or(&pattern);
                let path = path.strip_suffix("/*").unwrap_or(path);
                match &mut exceptions {
                    Some(paths) if !path.contains(['*', '[', ']', '?', '^', '\\']) => {
                        paths.push(format!("{path}/"));
                    }
                    _ => exceptions = None,
                }
            }
            rules.push(Rule { negate, matcher });
        }
        Ok(Self { rules, exceptions })
    }

    /// Whether BuildKit leaves out the directory `rel` with everything below
    /// it, without walking it. Such a directory need not be walked here
    /// either.
    pub fn excludes_all_below(&self, rel: &str) -> bool {
        self.verdict(rel) == Verdict::NotWalked
    }

    /// Whether the `/`-separated relative path is left out of the context.
    pub fn excludes(&self, rel: &str) -> bool {
        self.verdict(rel) != Verdict::Sent
    }

    /// The rules applied to each directory from the top down to `rel`, as
    /// BuildKit's walk applies them.
    fn verdict(&self, rel: &str) -> Verdict {
        let ends = rel.match_indices('/').map(|(i, _)| i).chain([rel.len()]);
        let mut parent: Option<Vec<bool>> = None;
        let mut verdict = Verdict::Sent;
        for end in ends {
            let path = &rel[..end];
            let (left_out, matched) = self.step(path, parent.as_deref());
            if left_out && self.not_walked(path) {
                return Verdict::NotWalked;
            }
            verdict = if left_out {
                Verdict::LeftOut
            } else {
                Verdict::Sent
            };
            parent = Some(matched);
        }
        verdict
    }

    /// Whether `path` is left out, and which rules matched it or a directory
    /// above it, given those of its parent (`None` at the top), as
    /// patternmatcher's `MatchesUsingParentResults` decides.
    fn step(&self, path: &str, parent: Option<&[bool]>) -> (bool, Vec<bool>) {
        let mut left_out = false;
        let matched = self
            .rules
            .iter()
            .enumerate()
            .map(|(i, rule)| {
                // A rule that matched the parent holds without a look. Any
                // other is looked at only if it could change the verdict so
                // far, and one not looked at counts as not matching, for
                // the paths below too: BuildKit's shortcut, which decides
                // what is sent (`a`, `!a/b`, `a` sends `a/b`).
                let hit = parent.is_some_and(|p| p[i])
                    || (rule.negate == left_out && rule.matcher.matches(path));
                if hit {
                    left_out = !rule.negate;
                }
                hit
            })
            .collect();
        (left_out, matched)
    }

    /// Whether BuildKit skips the directory `dir`, which it leaves out: no
    /// `!` rule has a wildcard, and none names a path inside it.
    fn not_walked(&self, dir: &str) -> bool {
        self.exceptions.as_ref().is_some_and(|paths| {
            let inside = format!("{dir}/");
            !paths.iter().any(|p| p.starts_with(&inside))
        })
    }
}

/// The lines of `text` as Go's line scanner splits them (the `\r` of a
/// `\r\n` still on them): no empty line after a final `\n`.
fn lines(text: &str) -> impl Iterator<Item = &str> {
    let body = text.strip_suffix('\n').unwrap_or(text);
    (!text.is_empty())
        .then(|| body.split('\n'))
        .into_iter()
        .flatten()
}

/// The pattern of one line and whether it starts with `!`, or `None` for a
/// comment or a blank line: the line as Docker's ignore-file reader passes
/// it on (trimmed, the part after any `!` trimmed and cleaned, one leading
/// `/` dropped), then as patternmatcher reads that (trimmed and cleaned
/// again, the `!` taken off).
fn pattern_of(line: &str) -> Result<Option<(bool, String)>, String> {
    if line.starts_with('#') {
        return Ok(None);
    }
    let line = line.trim();
    let (bang, path) = match line.strip_prefix('!') {
        Some(rest) => ("!", rest.trim()),
        None => ("", line),
    };
    let path = match path {
        "" => String::new(),
        _ => clean(path),
    };
    let path = match path.strip_prefix('/') {
        Some(rest) if !rest.is_empty() => rest,
        _ => &path,
    };
    let passed = format!("{bang}{path}");
    let passed = passed.trim();
    if passed.is_empty() {
        return Ok(None);
    }
    let pattern = clean(passed);
    match pattern.strip_prefix('!') {
        Some("") => Err(format!(
            "`{line}` has no pattern after the `!`, which Docker refuses"
        )),
        Some(rest) => Ok(Some((true, rest.to_owned()))),
        None => Ok(Some((false, pattern))),
    }
}

/// `path` as Go's `filepath.Clean` writes it on Linux: no empty or `.`
/// segments, `..` applied lexically, `.` for nothing.
fn clean(path: &str) -> String {
    let rooted = path.starts_with('/');
    let mut segments: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." if segments.last().is_some_and(|s| *s != "..") => {
                segments.pop();
            }
            ".." if rooted => {}
            s => segments.push(s),
        }
    }
    match (rooted, segments.join("/")) {
        (true, joined) => format!("/{joined}"),
        (false, joined) if joined.is_empty() => ".".to_owned(),
        (false, joined) => joined,
    }
}

impl Matcher {
    /// The matcher of a pattern (without its `!`), as patternmatcher builds
    /// it. The syntax checked is Go's `filepath.Match`'s, all of it (Docker
    /// checks the part a match against `.` reaches, and its regular
    /// expression fails on most of the rest); where that syntax and the
    /// regular expression would disagree, the pattern is refused.
    fn compile(pattern: &str) -> Result<Self, String> {
        if pattern.starts_with('\u{feff}') {
            return Err("it starts with an invisible byte-order mark (U+FEFF), which Docker's matcher skips in some places and not in others; delete it".into());
        }
        #[derive(PartialEq)]
        enum Kind {
            Exact,
            Prefix,
            Suffix,
            Regex,
        }
        let mut kind = Kind::Exact;
        let mut re = String::from("^");
        let mut chars = pattern.chars().peekable();
        let mut first = true;
        let mut counted = false;
        while let Some(c) = chars.next() {
            match c {
                '*' if chars.next_if_eq(&'*').is_some() => {
                    chars.next_if_eq(&'/');
                    let last = chars.peek().is_none();
                    if last && kind == Kind::Exact {
                        kind = Kind::Prefix;
                    } else {
                        re.push_str(if last { ".*" } else { "(?:.*/)?" });
                        kind = Kind::Regex;
                    }
                    if first {
                        kind = Kind::Suffix;
                    }
                }
                '*' => {
                    re.push_str("[^/]*");
                    kind = Kind::Regex;
                }
                '?' => {
                    re.push_str("[^/]");
                    kind = Kind::Regex;
                }
                '\\' => {
                    let c = chars.next().ok_or("a `\\` at the end escapes nothing")?;
                    literal(&mut re, escaped(c)?);
                    kind = Kind::Regex;
                }
                '[' => {
                    class(&mut chars, &mut re)?;
                    kind = Kind::Regex;
                }
                ']' => {
                    literal(&mut re, c);
                    kind = Kind::Regex;
                }
                // Left as they are by Docker's translation, which escapes
                // only `$().+`: an anchor and an alternation.
                '^' | '|' => re.push(c),
                // Refused below if the pattern becomes a regular expression.
                '{' if counts(chars.clone()) => counted = true,
                c => literal(&mut re, c),
            }
            first = false;
        }
        Ok(match kind {
            Kind::Exact => Self::Exact(pattern.to_owned()),
            Kind::Prefix => Self::Prefix(pattern[..pattern.len() - 2].to_owned()),
            Kind::Suffix => Self::Suffix(pattern[2..].to_owned()),
            Kind::Regex if counted => {
                return Err("a `{` before a count (`{2}`, `{1,3}`) repeats what is before it to Docker's matcher; write `\\{` for the character".into());
            }
            Kind::Regex => {
                re.push('$');
                Self::Regex(Regex::new(&re).map_err(|e| e.to_string())?)
            }
        })
    }

    fn matches(&self, path: &str) -> bool {
        match self {
            Self::Exact(p) => path == p,
            Self::Prefix(p) => path.starts_with(p.as_str()),
            Self::Suffix(s) => {
                path.ends_with(s.as_str()) || s.strip_prefix('/').is_some_and(|s| path == s)
            }
            Self::Regex(re) => re.is_match(path),
        }
    }
}

/// Whether what follows a `{` makes it a repeat count to Go's regular
/// expressions (`{2}`, `{2,}`, `{2,5}`, numbers without a leading zero);
/// else it is the character `{`.
fn counts(mut rest: Peekable<Chars>) -> bool {
    let number = |rest: &mut Peekable<Chars>| match rest.next_if(char::is_ascii_digit) {
        Some('0') if rest.peek().is_some_and(char::is_ascii_digit) => false,
        Some(_) => {
            while rest.next_if(char::is_ascii_digit).is_some() {}
            true
        }
        None => false,
    };
    number(&mut rest)
        && (rest.next_if_eq(&',').is_none() || rest.peek() == Some(&'}') || number(&mut rest))
        && rest.next_if_eq(&'}').is_some()
}

/// A `[...]` class after its `[`, onto `re`: `^` first negates it, then
/// characters and ranges `a-z` up to the `]` that closes it.
fn class(chars: &mut Peekable<Chars>, re: &mut String) -> Result<(), String> {
    use std::fmt::Write as _;
    re.push('[');
    if chars.next_if_eq(&'^').is_some() {
        re.push('^');
    }
    let mut first = true;
    while first || chars.next_if_eq(&']').is_none() {
        first = false;
        let lo = class_char(chars)?;
        let hi = match chars.next_if_eq(&'-') {
            Some(_) => class_char(chars)?,
            None => lo,
        };
        if hi < lo {
            return Err(format!("the range `{lo}-{hi}` runs backwards"));
        }
        // Writing into a String cannot fail.
        let _ = write!(re, "\\x{{{:X}}}-\\x{{{:X}}}", u32::from(lo), u32::from(hi));
    }
    re.push(']');
    Ok(())
}

/// One character of a `[...]` class, or the end of a range.
fn class_char(chars: &mut Peekable<Chars>) -> Result<char, String> {
    match chars.next() {
        None => Err("a `[` is not closed by `]`".into()),
        Some(c @ ('-' | ']')) => Err(format!(
            "a `{c}` inside `[...]` that neither ends it nor makes a range; escape it as `\\{c}`"
        )),
        Some('\\') => {
            let c = chars.next().ok_or("a `[` is not closed by `]`")?;
            escaped(c)
        }
        // Docker's translation turns `*` and `?` into wildcards and `[`
        // into the start of a class, even here.
        Some(c @ ('[' | '*' | '?')) => Err(format!(
            "a `{c}` inside `[...]` is not the character `{c}` to Docker's matcher; write `\\{c}`"
        )),
        Some(c) => Ok(c),
    }
}

/// The character `\c` stands for. Docker hands the escape to a regular
/// expression, where only punctuation stands for itself: `\d` is a digit,
/// `\b` a word boundary, and `\é` an error.
fn escaped(c: char) -> Result<char, String> {
    if c.is_ascii() && !c.is_ascii_alphanumeric() {
        Ok(c)
    } else {
        Err(format!(
            "`\\{c}` is not the character `{c}` to Docker's matcher; write `{c}` without the `\\`"
        ))
    }
}

/// `c`, matched as itself.
fn literal(re: &mut String, c: char) {
    re.push_str(&regex_lite::escape(c.encode_utf8(&mut [0; 4])));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `.dockerignore` `text` leaves out `left_out` and sends `sent`.
    fn verdicts(text: &str, left_out: &[&str], sent: &[&str]) {
        let d = DockerIgnore::parse(text).unwrap_or_else(|e| panic!("{text:?}: {e:?}"));
        for path in left_out {
            assert!(d.excludes(path), "{text:?} leaves out {path:?}");
        }
        for path in sent {
            assert!(!d.excludes(path), "{text:?} sends {path:?}");
        }
    }

    /// One pattern at a time: Docker's documented examples, then the cases
    /// read from its matcher, the ones where a shell's glob (globset, which
    /// this replaced) says otherwise first.
    #[test]
    fn patterns_mean_what_they_mean_to_docker() {
        // (pattern, paths left out, paths sent)
        let table: &[(&str, &[&str], &[&str])] = &[
            // Docker's documentation.
            (
                "*/temp*",
                &["somedir/temporary.txt", "somedir/temp"],
                &["temp", "a/b/temp"],
            ),
            (
                "*/*/temp*",
                &["somedir/subdir/temporary.txt"],
                &["somedir/temp"],
            ),
            ("temp?", &["tempa", "tempb"], &["temp", "tempab"]),
            ("**/*.go", &["main.go", "a/b/main.go"], &["main.go2"]),
            (
                "/foo/bar",
                &["foo/bar", "foo/bar/baz"],
                &["bar", "x/foo/bar"],
            ),
            ("foo/bar", &["foo/bar"], &["x/foo/bar"]),
            // Where a shell's glob differs: braces are text, `!` in a
            // class is a character, `**` at the start matches text.
            ("{a,b}", &["{a,b}"], &["a", "b"]),
            ("*.{md,txt}", &["x.{md,txt}"], &["x.md"]),
            ("[!x]", &["!", "x"], &["a"]),
            ("[!x]*.py", &["xa.py"], &["ab.py"]),
            ("**file", &["file", "dir/file", "dir/xfile"], &["filex"]),
            ("a/**", &["a/b", "a/b/c"], &["a", "ab"]),
            ("a**", &["a", "abc/d"], &["b"]),
            ("^*.txt", &["a.txt"], &[]),
            ("a^b*", &[], &["a^bc", "abc"]),
            ("a^b", &["a^b"], &[]),
            // Docker's translation leaves `|` and `{` to the regular
            // expression, but only in a pattern that becomes one.
            ("a*|b", &["ab", "xb", "x/b"], &["ba", "c"]),
            ("a|b", &["a|b"], &["a"]),
            ("a\\|b*", &["a|bc"], &["a"]),
            ("x{2}", &["x{2}"], &["xx"]),
            ("x\\{2}*", &["x{2}"], &["xx"]),
            ("*{a,b}", &["x{a,b}"], &["a"]),
            // The rest of the matcher.
            ("**", &["file", "dir/file"], &[]),
            ("**/", &["file"], &[]),
            ("**/**", &["dir/file"], &[]),
            ("**/dir", &["dir", "dir/file", "a/dir/f"], &["xdir"]),
            ("**/dir2/*", &["dir/dir2/file", "dir2/file"], &["dir/dir2"]),
            ("**/file*.txt", &["dir/dir/file.txt", "file2.txt"], &[]),
            ("**/**/*.txt2", &[], &["dir/dir/file.txt"]),
            (
                "a**/*.txt",
                &["a/file.txt", "a/dir/dir/file.txt", "ax.txt"],
                &[],
            ),
            ("a/*.txt", &["a/file.txt"], &["a/dir/file.txt"]),
            ("a/**/b", &["a/b", "a/x/y/b"], &["a/xb"]),
            ("a[b-d]e", &["ace"], &["ae", "aae"]),
            ("a[^b-d]e", &["aze", "a/e"], &["ace"]),
            ("a[\\]]b", &["a]b"], &[]),
            ("a[\\*]b", &["a*b"], &["axb"]),
            (".*", &[".foo"], &["foo"]),
            ("abc.def", &["abc.def"], &["abcZdef"]),
            ("abc?def", &["abcZdef"], &["abcdef", "abc/def"]),
            ("a\\\\", &["a\\"], &[]),
            ("a\\*b", &["a*b"], &["axb"]),
            ("a\\_b*", &["a_b"], &[]),
            ("a(b)c/def", &["a(b)c/def"], &["a(b)c/xyz"]),
            ("a.|)$(}+{bc", &["a.|)$(}+{bc"], &[]),
            ("$HOME*", &["$HOME"], &["HOME"]),
            ("a]", &["a]"], &[]),
            (
                "dist/*.whl",
                &["dist/proxy.py-2.4.0+g08-py3-none-any.whl"],
                &[],
            ),
            // Newlines in names: `**` spans no line break, `*` does.
            ("a/**/b", &[], &["a/x\ny/b"]),
            ("a*", &["a\nb"], &[]),
            // Reading: trimmed, cleaned, `#` only in the first column.
            ("  data/  ", &["data/x"], &[]),
            ("./a/../b/", &["b"], &["a/b"]),
            ("foo /.", &["foo"], &["foo "]),
            ("# comment", &[], &["# comment"]),
            (" # not a comment", &["# not a comment"], &[]),
        ];
        for (pattern, left_out, sent) in table {
            verdicts(pattern, left_out, sent);
        }
    }

    /// Several lines: `!` brings back, the last rule that applies wins, a
    /// directory left out leaves out what is below it, with BuildKit's
    /// shortcuts.
    #[test]
    fn rules_apply_as_buildkit_applies_them() {
        verdicts(
            "*.md\n!README.md\n",
            &["NOTES.md"],
            &["README.md", "docs/NOTES.md"],
        );
        verdicts(
            "*.md\n!README*.md\nREADME-secret.md\n",
            &["README-secret.md", "x.md"],
            &["README.md"],
        );
        verdicts(
            "*.md\nREADME-secret.md\n!README*.md\n",
            &[],
            &["README-secret.md"],
        );
        verdicts("docs\n!docs/README.md\n", &["docs/x"], &["docs/README.md"]);
        verdicts(
            "**\n!util/docker/web\n",
            &["util/x"],
            &["util/docker/web/foo"],
        );
        verdicts(
            "**\n!util/docker/web\nutil/docker/web/foo\n",
            &["util/docker/web/foo"],
            &["util/docker/web/bar"],
        );
        // The third line is not looked at for `a` (it cannot change the
        // verdict there), so it does not hold below it: `a/b` is sent.
        verdicts("a\n!a/b\na\n", &["a/c"], &["a/b"]);
        // A directory left out with no `!` rule inside it is not walked.
        let d = DockerIgnore::parse(".git\ndata\n!other\n").unwrap();
        assert!(d.excludes_all_below(".git"));
        assert!(d.excludes_all_below("data"));
        assert!(!d.excludes_all_below("src"));
        assert!(!d.excludes("mnist.py"));
        let d = DockerIgnore::parse("data\n!data/keep\n").unwrap();
        assert!(!d.excludes_all_below("data"));
        assert!(d.excludes("data/x") && !d.excludes("data/keep/x"));
        let d = DockerIgnore::parse("data\n!data/*\n").unwrap();
        assert!(!d.excludes_all_below("data"));
        assert!(!d.excludes("data/x"));
        // A `!` rule with a wildcard may bring back anything: all is walked.
        let d = DockerIgnore::parse("data\n!**/keep\n").unwrap();
        assert!(!d.excludes_all_below("data"));
        assert!(d.excludes("data/x") && !d.excludes("data/keep"));
    }

    /// Lines Docker refuses, and the few it reads through its regular
    /// expressions, are errors on their line.
    #[test]
    fn bad_lines_are_refused_on_their_line() {
        for (text, wanted) in [
            ("ok\ndata/[abc\n", "`data/[abc`: a `[` is not closed by `]`"),
            ("[", "not closed"),
            ("a[]b", "a `]` inside `[...]`"),
            ("[]a]", "a `]` inside `[...]`"),
            ("[-a]", "a `-` inside `[...]`"),
            ("[a-]", "a `]` inside `[...]`"),
            ("[a-b-c]", "a `-` inside `[...]`"),
            ("[z-a]", "the range `z-a` runs backwards"),
            ("a\\", "escapes nothing"),
            ("!", "no pattern after the `!`"),
            ("! ", "no pattern after the `!`"),
            ("!/", "no pattern after the `!`"),
            ("\\d", "`\\d` is not the character `d`"),
            ("[\\w]", "`\\w` is not the character `w`"),
            ("a\\é", "`\\é` is not the character `é`"),
            ("[*]", "a `*` inside `[...]`"),
            ("[?]", "a `?` inside `[...]`"),
            ("[[]", "a `[` inside `[...]`"),
            ("x{2}*", "a `{` before a count"),
            ("?{1,}", "a `{` before a count"),
            ("x\n\u{feff}a", "byte-order mark"),
        ] {
            let line = text.lines().count();
            match DockerIgnore::parse(text) {
                Ok(_) => panic!("{text:?} was accepted"),
                Err((n, e)) => assert!(n == line && e.contains(wanted), "{text:?}: {n}: {e}"),
            }
        }
        let long = format!("ok\n{}\n", "a".repeat(MAX_LINE_BYTES));
        assert_eq!(DockerIgnore::parse(&long).err().map(|e| e.0), Some(2));
        assert!(DockerIgnore::parse(&"a".repeat(MAX_LINE_BYTES - 1)).is_ok());
        // A byte-order mark starting the file is not part of the pattern.
        verdicts("\u{feff}data\r\n", &["data"], &[]);
    }
}
