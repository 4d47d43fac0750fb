//! Stage 1: files and directories → YAML documents that remember their source.

mod events;
mod findings;
mod node;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use serde_saphyr::{DuplicateKeyPolicy, Spanned};

pub use findings::Findings;
pub use node::{NodePos, SpanIndex};

use crate::diagnostic::Diagnostic;
use crate::paths::shown_path;
use crate::source::{Location, Pos, SourceFile, pointer_segment};

/// Larger inputs are refused before parsing: no hand-written definition comes
/// near this, and it bounds the memory a hostile file can make us use.
pub const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// The longest string (value or key) a definition may hold, in bytes. Real
/// values are far shorter: the longest are inline scripts
/// (`command: [sh, -c, …]`) and annotations of a few KiB, and Linux refuses
/// a single program argument over 128 KiB (`MAX_ARG_STRLEN`) anyway. Every
/// task's manifest carries the job's strings, so this bounds what one
/// string can be multiplied into; [`crate::validate`] bounds the product.
pub const MAX_STRING_BYTES: usize = 64 * 1024;

/// The deepest real definition nests about eight levels; the margin is wide
/// while keeping the recursive deserializer far from the stack's end.
const MAX_DEPTH: usize = 32;

/// One YAML document of an input file.
#[derive(Debug, Clone)]
pub struct Document {
    pub file: Arc<SourceFile>,
    pub value: Value,
    /// Where the values that came from `file` are.
    pub spans: SpanIndex,
    /// Where the values that came from other files are: those a variant's
    /// merge patch in the project file set (see [`Document::merge_patch`]).
    /// A pointer is in `spans` or in one of these, never in two.
    pub patched: Vec<Patched>,
}

/// Values of a [`Document`] that another file set, and where they are
/// there.
#[derive(Debug, Clone)]
pub struct Patched {
    pub file: Arc<SourceFile>,
    pub spans: SpanIndex,
}

impl Document {
    /// The file and position of the node at `pointer` exactly.
    fn position(&self, pointer: &str) -> Option<(&Arc<SourceFile>, NodePos)> {
        self.patched
            .iter()
            .find_map(|p| Some((&p.file, p.spans.get(pointer)?)))
            .or_else(|| Some((&self.file, self.spans.get(pointer)?)))
    }

    /// The file and position of the node at `pointer`, or of its nearest
    /// ancestor that exists (a missing required field is reported at its
    /// parent).
    fn nearest(&self, pointer: &str) -> Option<(&Arc<SourceFile>, NodePos)> {
        let mut p = pointer;
        loop {
            if let Some(found) = self.position(p) {
                return Some(found);
            }
            p = &p[..p.rfind('/')?];
        }
    }

    /// Where the value at `pointer` is (or its nearest existing ancestor):
    /// in the definition, or in the project file when a patch set it.
    pub fn locate(&self, pointer: &str) -> Option<Location> {
        self.nearest(pointer)
            .map(|(file, p)| Location::new(file, p.value))
    }

    /// Applies an RFC 7386 JSON merge patch: a mapping merges into a
    /// mapping key by key, `null` deletes, any other value (a list too)
    /// replaces. `patch` is the value at `from` in `source` (a document of
    /// the project file), so that every value it sets is located there;
    /// values it does not touch stay located here.
    pub fn merge_patch(&mut self, patch: &Value, source: &Document, from: &str) {
        let slot = match self
            .patched
            .iter()
            .position(|p| Arc::ptr_eq(&p.file, &source.file))
        {
            Some(i) => i,
            None => {
                self.patched.push(Patched {
                    file: Arc::clone(&source.file),
                    spans: SpanIndex::default(),
                });
                self.patched.len() - 1
            }
        };
        let mut at = String::new();
        let mut value = std::mem::take(&mut self.value);
        merge(&mut value, patch, &mut at, from, self, slot, &source.spans);
        self.value = value;
    }

    /// Forgets where the node at `pointer` and below came from.
    fn forget(&mut self, pointer: &str) {
        self.spans.remove_subtree(pointer);
        for p in &mut self.patched {
            p.spans.remove_subtree(pointer);
        }
    }

    /// The document as the typed model, once the schema has accepted it. The
    /// schema cannot tell `2.0` from `2` (JSON Schema counts both as
    /// integers), so that one mismatch is the user's and is reported as such;
    /// any other is a trainc bug, still located rather than a panic.
    pub fn typed<T: serde::de::DeserializeOwned>(&self) -> Result<T, Diagnostic> {
        from_value(&self.value).map_err(|e| {
            let pointer: String = e
                .path()
                .iter()
                .filter_map(|seg| match seg {
                    serde_path_to_error::Segment::Seq { index } => Some(format!("/{index}")),
                    serde_path_to_error::Segment::Map { key } => {
                        Some(format!("/{}", pointer_segment(key)))
                    }
                    _ => None,
                })
                .collect();
            let found = self.value.pointer(&pointer);
            match found {
                Some(Value::Number(n)) if n.is_f64() => {
                    Diagnostic::new(format!("expected a whole number, found `{n}`"))
                        .at(self.locate(&pointer))
                        .path(self.dotted(&pointer))
                        .hint("write whole numbers without a decimal point, e.g. `2`, not `2.0`")
                }
                _ => Diagnostic::new(format!(
                    "internal error: schema and model disagree{}: {}",
                    if pointer.is_empty() {
                        String::new()
                    } else {
                        format!(" at `{}`", self.dotted(&pointer))
                    },
                    e.inner()
                ))
                .at(self.locate(&pointer))
                .hint("please report this with the definition that triggers it"),
            }
        })
    }

    /// The source text of the scalar at `pointer`, exactly as written.
    pub fn source_text(&self, pointer: &str) -> Option<&str> {
        let (file, pos) = self.position(pointer)?;
        let start = pos.text.byte?;
        file.text.get(start..start.checked_add(pos.text.len)?)
    }

    /// The field at `pointer` as users write paths: `/spec/storage/0/name` →
    /// `spec.storage[0].name`. Only array positions get brackets, so a map
    /// key that is a number (a hyperparameter named `0`) stays a key.
    pub fn dotted(&self, pointer: &str) -> String {
        let mut out = String::new();
        let mut at = Some(&self.value);
        for seg in pointer.split('/').skip(1) {
            let key = seg.replace("~1", "/").replace("~0", "~");
            match at {
                Some(Value::Array(items)) => {
                    out.push_str(&format!("[{key}]"));
                    at = key.parse::<usize>().ok().and_then(|i| items.get(i));
                }
                other => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(&key);
                    at = match other {
                        Some(Value::Object(m)) => m.get(&key),
                        _ => None,
                    };
                }
            }
        }
        out
    }

    /// Where the key naming the value at `pointer` is, falling back to the value.
    pub fn locate_key(&self, pointer: &str) -> Option<Location> {
        self.nearest(pointer)
            .map(|(file, p)| Location::new(file, p.key.unwrap_or(p.value)))
    }
}

/// One step of [`Document::merge_patch`]: `patch` (at `from` in the patch's
/// file, whose positions are `spans`) into `target` (at `at` in `doc`).
fn merge(
    target: &mut Value,
    patch: &Value,
    at: &mut String,
    from: &str,
    doc: &mut Document,
    slot: usize,
    spans: &SpanIndex,
) {
    let Value::Object(entries) = patch else {
        doc.forget(at);
        doc.patched[slot].spans.graft(at, spans, from);
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        // A mapping where there was none: it comes from the patch.
        doc.forget(at);
        doc.patched[slot].spans.graft_node(at, spans, from);
        *target = Value::Object(serde_json::Map::new());
    }
    let Value::Object(map) = target else {
        return;
    };
    for (key, value) in entries {
        let len = at.len();
        at.push('/');
        at.push_str(&pointer_segment(key));
        let child_from = format!("{from}/{}", pointer_segment(key));
        if value.is_null() {
            map.remove(key);
            doc.forget(at);
        } else {
            let child = map.entry(key.clone()).or_insert(Value::Null);
            merge(child, value, at, &child_from, doc, slot, spans);
        }
        at.truncate(len);
    }
}

/// Parser limits. Definitions are small and shallow; anything beyond these is
/// an accident or an attack (alias bombs, deep nesting) and is refused with a
/// message instead of exhausting memory or the stack.
fn options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_depth: MAX_DEPTH,
            max_nodes: 250_000,
            max_documents: 10_000,
            max_aliases: 1_000,
            max_anchors: 1_000,
            max_total_scalar_bytes: 8 * 1024 * 1024,
        },
        duplicate_keys: DuplicateKeyPolicy::Error,
        // YAML 1.2, as editors read it: `n`, `on`, `yes` are strings, so a
        // hyperparameter named `n` stays `n`.
        strict_booleans: true,
        with_snippet: false,
    }
}

/// `T` from `value`, and where in it the first mismatch is when it is not one.
///
/// The path is tracked only on the way to an error: tracking it wraps every
/// step of the deserializer in code that only this stage runs, about 30 KB
/// that the first definition a process reads fetches into a cold cache
/// (see "Code an edit runs once" in docs/development.md). The same value
/// read again with tracking fails at the same place.
pub fn from_value<T: serde::de::DeserializeOwned>(
    value: &Value,
) -> Result<T, serde_path_to_error::Error<serde_json::Error>> {
    T::deserialize(value).or_else(|_| serde_path_to_error::deserialize(value))
}

/// Parses every document of `file`.
pub fn parse(file: &Arc<SourceFile>) -> Result<Vec<Document>, Diagnostic> {
    let read = match events::parse(&file.text) {
        // That reader takes no tagged node.
        Some(read) => read,
        None => {
            refuse_tags(file)?;
            parse_with_saphyr(file)?
        }
    };
    let docs: Vec<Document> = read
        .into_iter()
        .map(|(value, spans)| Document {
            file: Arc::clone(file),
            value,
            spans,
            patched: Vec::new(),
        })
        .collect();
    for doc in &docs {
        if let Some(d) = long_string(doc) {
            return Err(d);
        }
    }
    Ok(docs)
}

/// An explicit YAML tag, wherever it is, is an error at the tag: serde-saphyr
/// would decode a `!!binary` value from base64, which is all a reviewer of
/// the file sees, and ignore a tag it does not know.
fn refuse_tags(file: &Arc<SourceFile>) -> Result<(), Diagnostic> {
    match events::first_tag(&file.text) {
        None => Ok(()),
        Some((tag, pos)) => Err(Diagnostic::new(format!("YAML tag `{tag}` is not allowed"))
            .at(Some(Location::new(file, pos)))
            .hint("write the value plainly, without a tag: trainc reads none, so that what a reviewer reads is what trainc reads")),
    }
}

/// Every document of `file` as serde-saphyr reads it: what [`events`] does
/// not read itself, and every error, with serde-saphyr's message.
fn parse_with_saphyr(file: &Arc<SourceFile>) -> Result<Vec<(Value, SpanIndex)>, Diagnostic> {
    let roots: Vec<Spanned<node::Node>> = serde_saphyr::from_multiple_with_options(
        &file.text,
        options(),
    )
    .map_err(|e| {
        let pos = e.location().map(|l| Pos {
            line: usize::try_from(l.line()).unwrap_or(usize::MAX),
            column: usize::try_from(l.column()).unwrap_or(usize::MAX),
            byte: l.span().byte_offset().and_then(|b| usize::try_from(b).ok()),
            len: 1,
        });
        let message = match &e {
            serde_saphyr::Error::Budget { breach, .. } => budget_message(breach),
            _ => yaml_message(&e.without_snippet().to_string()),
        };
        let hint = if message.starts_with("duplicate key") {
            "remove one of the two; YAML would silently keep only one"
        } else if message.contains("too many")
            || message.contains("nested")
            || message.contains("limit")
        {
            "definitions are small and shallow; this input is refused to protect memory and stack"
        } else {
            "fix the YAML syntax at the caret"
        };
        Diagnostic::new(format!("invalid YAML: {message}"))
            .at(pos.map(|p| Location::new(file, p)))
            .hint(hint)
    })?;
    Ok(roots
        .into_iter()
        .map(|root| {
            let mut spans = SpanIndex::default();
            let value = node::into_json(root, &mut spans);
            (value, spans)
        })
        .collect())
}

/// The first string (value or mapping key) longer than [`MAX_STRING_BYTES`],
/// as aliases expand it, located.
fn long_string(doc: &Document) -> Option<Diagnostic> {
    /// `(pointer, length, is a key)` of the first one found.
    fn walk(v: &Value, pointer: &mut String) -> Option<(String, usize, bool)> {
        match v {
            Value::String(s) if s.len() > MAX_STRING_BYTES => {
                Some((pointer.clone(), s.len(), false))
            }
            Value::Array(items) => items.iter().enumerate().find_map(|(i, item)| {
                let len = pointer.len();
                pointer.push_str(&format!("/{i}"));
                let found = walk(item, pointer);
                pointer.truncate(len);
                found
            }),
            Value::Object(map) => map.iter().find_map(|(k, item)| {
                let len = pointer.len();
                pointer.push('/');
                pointer.push_str(&pointer_segment(k));
                let found = if k.len() > MAX_STRING_BYTES {
                    Some((pointer.clone(), k.len(), true))
                } else {
                    walk(item, pointer)
                };
                pointer.truncate(len);
                found
            }),
            _ => None,
        }
    }
    let (pointer, len, key) = walk(&doc.value, &mut String::new())?;
    let what = if key { "a key" } else { "a string" };
    // The path without the long key itself, and itself cut short: its
    // other keys may be long too.
    let parent = if key {
        pointer.rfind('/').map_or("", |i| &pointer[..i])
    } else {
        &pointer
    };
    let mut path = doc.dotted(parent);
    if let Some((cut, _)) = path.char_indices().nth(120) {
        path.truncate(cut);
        path.push('…');
    }
    Some(
        Diagnostic::new(format!(
            "{what} of {len} bytes, over the {MAX_STRING_BYTES}-byte limit for one string"
        ))
        .path(path)
        .at(if key {
            doc.locate_key(&pointer)
        } else {
            doc.locate(&pointer)
        })
        .hint("definitions hold settings, not data: put long scripts and data into the image or on a volume"),
    )
}

fn budget_message(breach: &serde_saphyr::budget::BudgetBreach) -> String {
    use serde_saphyr::budget::BudgetBreach as B;
    match breach {
        B::Depth { .. } => breach_message("Depth"),
        B::Aliases { .. } => breach_message("Aliases"),
        B::Anchors { .. } => breach_message("Anchors"),
        B::Nodes { .. } => breach_message("Nodes"),
        B::Events { .. } => breach_message("Events"),
        B::Documents { .. } => breach_message("Documents"),
        other => format!("input limit exceeded ({other:?})"),
    }
}

/// One wording per budget, whether the breach arrives typed or as text.
fn breach_message(kind: &str) -> String {
    match kind {
        "Depth" => format!("nested more than {MAX_DEPTH} levels deep"),
        "Aliases" | "Anchors" => "too many anchors or aliases".to_owned(),
        "Nodes" | "Events" => "too many YAML nodes (an alias bomb?)".to_owned(),
        "Documents" => "too many documents in one file".to_owned(),
        other => format!("input limit exceeded ({other})"),
    }
}

/// The parser's message without what the diagnostic already shows (the
/// position) or what only makes sense to a Rust caller (option names).
fn yaml_message(raw: &str) -> String {
    let line = raw.lines().next().unwrap_or_default().trim();
    let line = line.find(" at line ").map_or(line, |i| &line[..i]);
    if let Some(rest) = line.strip_prefix("duplicate mapping key: ") {
        let key = rest
            .split(", set DuplicateKeyPolicy")
            .next()
            .unwrap_or(rest);
        return format!("duplicate key `{key}`");
    }
    if let Some(rest) = line.strip_prefix("budget breached: ") {
        let kind = rest.split([' ', '{']).next().unwrap_or(rest);
        return breach_message(kind);
    }
    line.to_owned()
}

/// Reads one file, refusing oversized and non-UTF-8 input with a diagnostic,
/// and anything but a regular file (see [`open_regular`]). `name` is how
/// both messages and generated files name it.
pub fn read(path: &Path, name: String) -> Result<Arc<SourceFile>, Diagnostic> {
    read_as(path, name.clone(), name)
}

/// [`read`], for a file that messages name `shown` (from the working
/// directory) and generated files `name` (from the project root).
pub fn read_as(path: &Path, name: String, shown: String) -> Result<Arc<SourceFile>, Diagnostic> {
    let (file, len) = open_regular(path, &shown)?;
    let cannot = |e: std::io::Error| Diagnostic::new(format!("cannot read {shown}: {e}"));
    let too_big = |len: u64| {
        Diagnostic::new(format!(
            "{shown} is {len} bytes, over the {MAX_FILE_BYTES}-byte limit for a definition"
        ))
        .hint("split the file; a definition file is meant to be written by hand")
    };
    if len > MAX_FILE_BYTES {
        return Err(too_big(len));
    }
    let bytes = read_capped(file, len).map_err(cannot)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(too_big(bytes.len() as u64));
    }
    match String::from_utf8(bytes) {
        Ok(text) => Ok(Arc::new(SourceFile { name, text, shown })),
        Err(e) => {
            // Show the line with the bad byte, decoded lossily for display.
            let at = e.utf8_error().valid_up_to();
            let text = String::from_utf8_lossy(e.as_bytes()).into_owned();
            let valid = &text[..at.min(text.len())];
            let line = valid.matches('\n').count() + 1;
            let column = valid.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            let file = Arc::new(SourceFile { name, text, shown });
            Err(Diagnostic::new("file is not UTF-8")
                .at(Some(Location::new(
                    &file,
                    Pos {
                        line,
                        column,
                        byte: Some(at),
                        len: 1,
                    },
                )))
                .hint("save the file as UTF-8"))
        }
    }
}

/// The bytes of `file`, opened by [`open_regular`] at `len` bytes, up to
/// one past [`MAX_FILE_BYTES`]: the size can change after it was checked,
/// and more than the limit is never read. The buffer is sized to the file:
/// `take` hides the size from `read_to_end`, which then reads 32 bytes, 32,
/// 64, … (seven reads for a definition where two do, and every build reads
/// every definition).
pub fn read_capped(file: std::fs::File, len: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    let len = len.min(MAX_FILE_BYTES);
    let mut bytes = Vec::with_capacity(usize::try_from(len).map_or(0, |n| n + 1));
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Opens `path` for reading if it is a regular file, and refuses anything
/// else by name: opening a FIFO blocks until someone writes to it (a CI job
/// would hang), a device can be endless, and neither is a definition. The
/// type is checked before opening, so a device is never opened, and again
/// on the open file, so a file swapped in between is caught too; the open
/// itself does not wait (`O_NONBLOCK`, which regular files ignore). Gives
/// the open file and its size then.
pub fn open_regular(path: &Path, name: &str) -> Result<(std::fs::File, u64), Diagnostic> {
    use rustix::fs::{Mode, OFlags};
    let cannot = |e: std::io::Error| Diagnostic::new(format!("cannot read {name}: {e}"));
    let meta = std::fs::metadata(path).map_err(cannot)?;
    if !meta.is_file() {
        return Err(not_regular(name, meta.file_type()));
    }
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
    )
    .map_err(|e| cannot(e.into()))?;
    let file = std::fs::File::from(fd);
    let meta = file.metadata().map_err(cannot)?;
    if meta.is_file() {
        Ok((file, meta.len()))
    } else {
        Err(not_regular(name, meta.file_type()))
    }
}

/// What a file that is not a regular file is, in words.
fn kind_of(t: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt as _;
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a named pipe (FIFO)"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_block_device() || t.is_char_device() {
        "a device"
    } else {
        "not a regular file"
    }
}

/// The refusal of an input that is not a regular file. It names the path
/// and never shows content: nothing has been read.
pub fn not_regular(name: &str, t: std::fs::FileType) -> Diagnostic {
    let what = kind_of(t);
    let what = if what.starts_with("not") {
        what.to_owned()
    } else {
        format!("{what}, not a regular file")
    };
    Diagnostic::new(format!("{name} is {what}")).hint(if t.is_dir() {
        "names ending in `.yaml` or `.yml` are read as definition files; rename the directory"
    } else {
        "trainc reads definitions, project and library files only from regular files; remove it, or rename it so that it does not end in `.yaml` or `.yml`"
    })
}

/// `path` resolved (symlinks followed), when that lies inside `root`
/// (canonical); else a refusal naming it. A link in a repository may point
/// anywhere on the machine that runs trainc, such as a credentials file or
/// `/proc/self/environ`, and a refused file is never read, so no message
/// can show its content. `what` says what the path is for the message.
pub fn inside_root(
    root: &Path,
    path: &Path,
    shown: &str,
    what: &str,
) -> Result<PathBuf, Diagnostic> {
    let real = path
        .canonicalize()
        .map_err(|e| Diagnostic::new(format!("cannot read {shown}: {e}")))?;
    if real.starts_with(root) {
        return Ok(real);
    }
    let what = if what.is_empty() {
        String::new()
    } else {
        format!("{what} ")
    };
    let message = if real != path {
        format!(
            "{what}{shown} resolves to {}, outside the project root",
            real.display()
        )
    } else {
        format!("{what}{shown} lies outside the project root")
    };
    Err(Diagnostic::new(message).hint(
        "trainc reads only files inside the project root (the directory of trainc.yaml, else the working directory), also through symlinks; copy the file in, or run trainc from a directory that holds it",
    ))
}

/// Expands the given paths into the YAML files they hold, sorted, without
/// duplicates. Directories are walked recursively, following symlinks (walkdir
/// stops loops); hidden entries and the `exclude`d paths (the output
/// directory, the project file) are skipped, also when reached through a
/// symlink.
///
/// What is read must be a regular file inside `root`: a given path or a
/// symlink met in the walk that resolves outside it, and a `*.yaml` or
/// `*.yml` entry that is a directory, FIFO, socket or device, are refused
/// by name, all of them in one report, before anything is opened.
///
/// `typed`: the paths are the command line's, the user's own choice, not
/// the repository's (`sources`): one outside `root` is read, and the links
/// in a directory it names may lead anywhere inside that directory too.
///
/// Messages name paths from `cwd`, the working directory.
pub fn discover(
    root: &Path,
    cwd: &Path,
    paths: &[PathBuf],
    exclude: &[PathBuf],
    typed: bool,
) -> Result<Vec<PathBuf>, Vec<Diagnostic>> {
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    let root = root.as_path();
    // Canonical once, up front: walking a canonical root yields canonical
    // entries, so skipping is a comparison, not a readlink per component.
    let exclude: Vec<PathBuf> = exclude
        .iter()
        .filter_map(|p| p.canonicalize().ok())
        .collect();
    let mut files = Vec::new();
    let mut refused = Vec::new();
    for given in paths {
        let shown = shown_path(cwd, given);
        let path = match given.canonicalize() {
            Ok(p) => p,
            Err(e) => {
                refused.push(Diagnostic::new(format!("cannot read {shown}: {e}")).hint(
                    "pass existing files or directories, or list them under `sources` in trainc.yaml",
                ));
                continue;
            }
        };
        // Where the links met in the walk may lead: the project root, and
        // a path the user typed that lies outside it.
        // Only a path typed outside the root: one typed inside that a
        // link of the repository leads out of is the repository's doing.
        let typed_outside = typed && !crate::paths::clean(&cwd.join(given)).starts_with(root);
        let own = (typed_outside && !path.starts_with(root)).then(|| path.clone());
        if own.is_none()
            && let Err(d) = inside_root(root, given, &shown, "")
        {
            refused.push(d);
            continue;
        }
        match std::fs::metadata(&path) {
            Ok(m) if m.is_file() => {
                files.push(path);
                continue;
            }
            Ok(m) if m.is_dir() => {}
            Ok(m) => {
                refused.push(not_regular(&shown, m.file_type()));
                continue;
            }
            Err(e) => {
                refused.push(Diagnostic::new(format!("cannot read {shown}: {e}")));
                continue;
            }
        }
        // Symlinked definitions are read (walkdir stops loops); only the
        // output directory is never followed.
        let mut walker = walkdir::WalkDir::new(&path)
            .follow_links(true)
            .sort_by_file_name()
            .into_iter()
            .filter_entry(|e| {
                if e.depth() == 0 {
                    return true;
                }
                if e.file_name().to_string_lossy().starts_with('.') {
                    return false;
                }
                // A link's path is not its target's: resolve links only, so
                // the common case stays a comparison.
                let excluded = |p: &Path| exclude.iter().any(|x| x == p);
                if e.path_is_symlink() {
                    !e.path().canonicalize().is_ok_and(|t| excluded(&t))
                } else {
                    !excluded(e.path())
                }
            });
        while let Some(entry) = walker.next() {
            let entry = match entry {
                Ok(e) => e,
                Err(e) => {
                    refused.push(Diagnostic::new(format!("cannot walk {shown}: {e}")));
                    continue;
                }
            };
            let p = entry.path();
            let t = entry.file_type();
            let yaml = p.extension().is_some_and(|x| x == "yaml" || x == "yml");
            // The walk starts inside the root, so only a link can lead out;
            // one that would not be read (`notes.txt`) does not matter.
            if entry.path_is_symlink()
                && (yaml || t.is_dir())
                && !own
                    .as_deref()
                    .is_some_and(|o| p.canonicalize().is_ok_and(|r| r.starts_with(o)))
                && let Err(d) = inside_root(root, p, &shown_path(cwd, p), "")
            {
                refused.push(d);
                if t.is_dir() {
                    walker.skip_current_dir();
                }
                continue;
            }
            if !yaml || entry.depth() == 0 {
                continue;
            }
            if t.is_file() {
                files.push(p.to_path_buf());
            } else {
                refused.push(not_regular(&shown_path(cwd, p), t));
                if t.is_dir() {
                    walker.skip_current_dir();
                }
            }
        }
    }
    if !refused.is_empty() {
        crate::diagnostic::normalize(&mut refused);
        return Err(refused);
    }
    files.sort();
    files.dedup();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> Result<Vec<Document>, Diagnostic> {
        parse(&Arc::new(SourceFile::new("t.yaml", text)))
    }

    #[test]
    fn spans_point_at_keys_and_values() {
        let docs = doc("a:\n  b: [1, 2]\n  c: x\n").unwrap();
        let d = &docs[0];
        let c = d.spans.get("/a/c").unwrap();
        assert_eq!((c.key.unwrap().line, c.key.unwrap().column), (3, 3));
        assert_eq!((c.value.line, c.value.column), (3, 6));
        let b1 = d.spans.get("/a/b/1").unwrap();
        assert_eq!((b1.value.line, b1.value.column), (2, 10));
        assert_eq!(d.value["a"]["b"][1], 2);
    }

    #[test]
    fn scalars_keep_their_source_text() {
        let d = &doc("hp: {lr: 0.00010, v: 2.10, n: 1e-3}\nx:\n  y: 1.50 # c\n").unwrap()[0];
        assert_eq!(d.source_text("/hp/lr"), Some("0.00010"));
        assert_eq!(d.source_text("/hp/v"), Some("2.10"));
        assert_eq!(d.source_text("/hp/n"), Some("1e-3"));
        assert_eq!(d.source_text("/x/y"), Some("1.50"));
        let d = &doc("a: &x 0.50\nb: *x\n").unwrap()[0];
        assert_eq!(d.source_text("/a"), Some("0.50"));
        assert_eq!(d.source_text("/b"), Some("0.50"));
    }

    #[test]
    fn dotted_paths_bracket_array_positions_only() {
        let d = &doc("spec:\n  storage: [{name: x}]\n  hp: {\"0\": 1, a/b: 2}\n").unwrap()[0];
        assert_eq!(d.dotted("/spec/storage/0/name"), "spec.storage[0].name");
        assert_eq!(d.dotted("/spec/hp/0"), "spec.hp.0");
        assert_eq!(d.dotted("/spec/hp/a~1b"), "spec.hp.a/b");
        assert_eq!(d.dotted(""), "");
    }

    #[test]
    fn whole_numbers_written_as_floats_are_located() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct T {
            n: Vec<u32>,
        }
        let d = &doc("n: [1, 2.0]\n").unwrap()[0];
        let e = d.typed::<T>().unwrap_err();
        assert_eq!(e.message, "expected a whole number, found `2.0`");
        assert_eq!(e.path.as_deref(), Some("n[1]"));
        let pos = e.location.unwrap().pos;
        assert_eq!((pos.line, pos.column), (1, 8));
    }

    #[test]
    fn yaml_1_2_booleans_only() {
        let d = &doc("n: on\ny: yes\nt: true\n").unwrap()[0];
        assert_eq!(
            d.value,
            serde_json::json!({"n": "on", "y": "yes", "t": true})
        );
    }

    #[test]
    fn several_documents_per_file() {
        let docs = doc("a: 1\n---\nb: 2\n").unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[1].spans.get("/b").unwrap().value.line, 3);
    }

    #[test]
    fn duplicate_keys_are_refused() {
        let e = doc("a: 1\na: 2\n").unwrap_err();
        assert!(e.message.contains("duplicate"), "{}", e.message);
        assert_eq!(e.location.unwrap().pos.line, 2);
    }

    /// Any explicit tag is refused at the tag, whichever reader would have
    /// read the file: the event reader (a plain definition) or
    /// serde-saphyr (one with an anchor, a null, or over the event
    /// reader's size).
    #[test]
    fn tags_are_refused_at_the_tag() {
        let big = format!(
            "pad: '{}'\nimage: !!binary ZXZpbA==\n",
            "x".repeat(events::MAX_BYTES)
        );
        for (text, tag, line, column) in [
            ("image: !!binary ZXZpbA==\n", "!!binary", 1, 8),
            ("a: 1\nimage: !!str 1.0\n", "!!str", 2, 8),
            ("x: &a 1\ny: ~\nimage: !custom v\n", "!custom", 3, 8),
            ("k: ! 12\n", "!", 1, 4),
            (
                "k: !<tag:yaml.org,2002:str> 1\n",
                "!<tag:yaml.org,2002:str>",
                1,
                4,
            ),
            ("!!str key: v\n", "!!str", 1, 1),
            ("env: !!map\n  A: b\n", "!!map", 1, 6),
            ("l:\n  - !!binary |\n    ZXZpbA==\n", "!!binary", 2, 5),
            ("%TAG !e! tag:e.com,2000:\n---\nk: !e!x v\n", "!e!x", 3, 4),
            ("a: 1\n---\nb: [x, !!int 2]\n", "!!int", 3, 8),
            (big.as_str(), "!!binary", 2, 8),
        ] {
            let e = doc(text).unwrap_err();
            assert_eq!(
                e.message,
                format!("YAML tag `{tag}` is not allowed"),
                "{text:.60}"
            );
            let pos = e.location.unwrap().pos;
            assert_eq!(
                (pos.line, pos.column, pos.len),
                (line, column, tag.len()),
                "{text:.60}"
            );
            assert!(e.hint.unwrap().contains("without a tag"));
        }
        // A `!` that is not a tag is text.
        let d = &doc("cmd: [sh, -c, 'echo hi!']\nx: a!b\n").unwrap()[0];
        assert_eq!(d.value["x"], "a!b");
        assert_eq!(events::first_tag("k: 'it!'\n# !!str\n"), None);
    }

    #[test]
    fn alias_bomb_is_refused_not_expanded() {
        let mut y = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..12 {
            let p = i - 1;
            y.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        assert!(doc(&y).is_err());
    }

    #[test]
    fn deep_nesting_is_refused_not_crashed_on() {
        let y = "[".repeat(10_000);
        assert!(doc(&y).is_err());
        let y = format!("{}1{}", "[".repeat(100), "]".repeat(100));
        assert!(doc(&y).is_err());
    }
}
