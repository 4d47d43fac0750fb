//! Stage 5 (report): what a build would change, for people and tools: the
//! training runs that start again and what they request before and after
//! (`cost`), a per-resource summary with the changed field paths, then
//! unified diffs per file.

mod cost;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use anstyle::{AnsiColor, Style};
use serde::Serialize;
use serde_json::Value;
use similar::TextDiff;

use crate::compile::{FORMAT_ANNOTATION, RUN_LABEL};
use crate::emit::KUSTOMIZATION;
use crate::plan::{Change, Op, Plan};

pub use cost::{Cost, Requests};

/// Why a run starts again when neither its target nor trainc's format
/// changed, and the old definition is not known.
const CHANGED: &str = "the definition or its image changed";

/// How many changed fields a re-run's reason names; the rest are counted
/// (every one is in the JSON report).
const REASON_FIELDS: usize = 3;

/// Diffs longer than this many lines are folded in Markdown reports.
const FOLD_LINES: usize = 40;

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// What the output is compared with, when not the directory on disk:
    /// `diff --base REF`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base: Option<BaseRef>,
    pub create: usize,
    pub update: usize,
    pub delete: usize,
    pub unchanged: usize,
    /// Training runs that start, start again or stop: what costs GPU hours.
    pub runs: Vec<RunChange>,
    /// What the runs of `runs` request together, before and after.
    pub total: Cost,
    pub changes: Vec<Entry>,
}

/// The commit a report compares with, as the user named it and in full.
#[derive(Debug, Clone, Serialize)]
pub struct BaseRef {
    #[serde(rename = "ref")]
    pub reference: String,
    pub commit: String,
}

impl BaseRef {
    /// `origin/main (4f2c1a9)`.
    pub fn shown(&self) -> String {
        let short: String = self.commit.chars().take(7).collect();
        format!("{} ({short})", self.reference)
    }
}

/// A training run the change starts, starts again, or stops. A run is named
/// by its identity (`mnist-8b16ab`), which changes whenever anything that
/// reaches its pods does; see `compile::identity`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunChange {
    /// `rerun` (the old run is deleted and a new one trains from the
    /// start), `start` (a new job) or `stop` (a removed job).
    pub op: &'static str,
    /// `<namespace>/<job>`.
    pub job: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new: Option<String>,
    /// Why, for re-runs: the definition, the target, or trainc's output
    /// format changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The fields of the definition (and of the project file) that changed,
    /// when the old definition is known (`--base`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<FieldChange>,
    /// The output directory, when a build writes several (a project with
    /// variants): the same job runs in each.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// What the run requests, by the old files and by the new: nothing
    /// before a start, nothing after a stop.
    #[serde(flatten)]
    pub cost: Cost,
}

impl RunChange {
    /// `ml/mnist`, or `ml/mnist in deploy-cpu` when the build writes
    /// several output directories.
    fn label(&self) -> String {
        match &self.output {
            Some(out) => format!("{} in {out}", self.job),
            None => self.job.clone(),
        }
    }

    /// `re-run ml/mnist: mnist-4e20cf → mnist-8b16ab (the definition or its image changed)`.
    pub fn line(&self) -> String {
        let name = |n: &Option<String>| n.clone().unwrap_or_default();
        let job = self.label();
        match self.op {
            "rerun" => format!(
                "re-run {}: {} → {}, every task starts again ({})",
                job,
                name(&self.old),
                name(&self.new),
                self.reason.as_deref().unwrap_or(CHANGED)
            ),
            "start" => format!("start {}: {}", job, name(&self.new)),
            _ => format!("stop {}: {} is deleted", job, name(&self.old)),
        }
    }
}

/// What one side (old or new) of a job directory says about its run.
#[derive(Debug, Default)]
struct RunSide {
    names: BTreeSet<String>,
    /// Kind of the run object (`Job`, `JobSet`, `TFJob`): the target.
    kind: Option<String>,
    format: Option<String>,
    /// What its run objects request. Every run object of a run that starts,
    /// starts again or stops is a pending change, since each carries the
    /// run's name, so the pending files of a directory hold them all.
    requests: Requests,
}

impl RunSide {
    /// Objects of a run carry its name as a label; Jobs written before runs
    /// had names carry their own name instead.
    fn add(&mut self, doc: &Value) {
        let meta = &doc["metadata"];
        let labels = &meta["labels"];
        let kind = doc["kind"].as_str().unwrap_or_default();
        let run = match labels[RUN_LABEL].as_str() {
            Some(run) => run,
            None if kind == "Job" && labels["trainc.dev/job"].is_string() => {
                meta["name"].as_str().unwrap_or_default()
            }
            None => return,
        };
        self.names.insert(run.to_owned());
        if crate::compile::target::BACKENDS
            .iter()
            .any(|b| b.pods_kind() == kind)
        {
            self.requests.add(&cost::of_run_object(doc));
            self.kind = Some(kind.to_owned());
            self.format = Some(
                meta["annotations"][FORMAT_ANNOTATION]
                    .as_str()
                    .unwrap_or("0")
                    .to_owned(),
            );
        }
    }

    fn shown(&self) -> Option<String> {
        match self.names.len() {
            0 => None,
            1 => self.names.first().cloned(),
            n => Some(format!(
                "{} and {} more",
                self.names.first().cloned().unwrap_or_default(),
                n - 1
            )),
        }
    }
}

fn target_of_kind(kind: &str) -> &str {
    let registered = crate::compile::target::BACKENDS
        .iter()
        .find(|b| b.run_object.is_some_and(|o| o.kind == kind));
    registered.map_or("kubernetes", |b| b.target.as_str())
}

/// The runs whose names differ between the old and the new files of their
/// job directory.
fn runs(sides: BTreeMap<String, (RunSide, RunSide)>) -> Vec<RunChange> {
    let mut out = Vec::new();
    for (job, (old, new)) in sides {
        if old.names == new.names {
            continue;
        }
        let (op, reason) = match (old.names.is_empty(), new.names.is_empty()) {
            (true, _) => ("start", None),
            (_, true) => ("stop", None),
            _ => {
                let (ok, nk) = (
                    old.kind.as_deref().unwrap_or_default(),
                    new.kind.as_deref().unwrap_or_default(),
                );
                let reason = if ok != nk {
                    format!(
                        "the target changed: {} → {}",
                        target_of_kind(ok),
                        target_of_kind(nk)
                    )
                } else if old.format != new.format {
                    format!(
                        "this trainc renders `{}` runs in a new format: {} → {}",
                        target_of_kind(nk),
                        old.format.as_deref().unwrap_or("0"),
                        new.format.as_deref().unwrap_or("0")
                    )
                } else {
                    CHANGED.to_owned()
                };
                ("rerun", Some(reason))
            }
        };
        out.push(RunChange {
            op,
            job,
            old: old.shown(),
            new: new.shown(),
            reason,
            fields: Vec::new(),
            output: None,
            cost: Cost {
                before: old.requests,
                after: new.requests,
            },
        });
    }
    out
}

/// One changed file and the resource it holds.
#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    pub op: &'static str,
    /// Path inside the output directory.
    pub path: String,
    /// `Job`, `Service`, …; `Kustomization` for kustomization files; `File`
    /// for anything that does not parse (a leftover temporary file).
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The stable name (for Jobs, without the spec hash).
    pub name: String,
    /// Changed leaf fields, for updates.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<FieldChange>,
    /// Unified diff of the file (left out of `build --check --base`'s
    /// report, which names the fields).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub diff: String,
    /// The directory of the file inside the output, to find its run.
    #[serde(skip)]
    dir: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldChange {
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new: Option<String>,
}

impl Entry {
    /// `Job ml/mnist-worker-0`, or `PersistentVolume ml.mnist.data`.
    pub fn resource(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }

    fn is_resource(&self) -> bool {
        self.kind != "Kustomization" && self.kind != "File"
    }
}

fn op_name(op: Op) -> &'static str {
    match op {
        Op::Create => "create",
        Op::Update => "update",
        Op::Delete => "delete",
        Op::Unchanged => "unchanged",
    }
}

fn parse(bytes: &[u8]) -> Option<Value> {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| serde_saphyr::from_str::<Value>(s).ok())
}

/// The changes of one plan; paths are shown below `shown`, the directory as
/// messages name it, so they read (and apply) from the working directory.
pub fn report(plan: &Plan, shown: &str) -> Report {
    let mut sides: BTreeMap<String, (RunSide, RunSide)> = BTreeMap::new();
    let changes = plan
        .pending()
        .map(|c| {
            let (e, old, new) = entry(c, shown);
            if let Some((dir, _)) = c.path.rsplit_once('/') {
                let side = sides.entry(dir.to_owned()).or_default();
                if let Some(old) = &old {
                    side.0.add(old);
                }
                if let Some(new) = &new {
                    side.1.add(new);
                }
            }
            e
        })
        .collect();
    let runs = runs(sides);
    let mut total = Cost::default();
    for r in &runs {
        total.add(&r.cost);
    }
    Report {
        base: None,
        create: plan.count(Op::Create),
        update: plan.count(Op::Update),
        delete: plan.count(Op::Delete),
        unchanged: plan.count(Op::Unchanged),
        runs,
        total,
        changes,
    }
}

impl Report {
    /// Names, in each re-run's reason, the fields of its definition that
    /// changed (`hyperparameters.lr: 2e-5 → 1e-5`), by `<namespace>/<job>`.
    /// A change of target or of trainc's format stays the reason: it
    /// renames the run whatever the fields say. A run that starts again
    /// with no field changed was rebuilt: an input of its image changed.
    pub fn explain(&mut self, changed: &BTreeMap<String, Vec<FieldChange>>) {
        for r in self.runs.iter_mut().filter(|r| r.op == "rerun") {
            let Some(fields) = changed.get(&r.job) else {
                continue;
            };
            r.fields = fields.clone();
            if r.reason.as_deref() != Some(CHANGED) {
                continue;
            }
            r.reason = Some(if fields.is_empty() {
                "no field of its definition changed: an input of its image did".to_owned()
            } else {
                let mut named: Vec<String> =
                    fields.iter().take(REASON_FIELDS).map(field_line).collect();
                if fields.len() > REASON_FIELDS {
                    named.push(format!("{} more", fields.len() - REASON_FIELDS));
                }
                named.join(", ")
            });
        }
    }

    /// One report for several output directories (manifests, build specs).
    pub fn merge(reports: impl IntoIterator<Item = Report>) -> Report {
        let mut all = Report {
            base: None,
            create: 0,
            update: 0,
            delete: 0,
            unchanged: 0,
            runs: Vec::new(),
            total: Cost::default(),
            changes: Vec::new(),
        };
        for r in reports {
            all.create += r.create;
            all.update += r.update;
            all.delete += r.delete;
            all.unchanged += r.unchanged;
            all.runs.extend(r.runs);
            all.total.add(&r.total);
            all.changes.extend(r.changes);
        }
        all
    }
}

/// One change as reported, with its old and new documents parsed.
fn entry(c: &Change, shown: &str) -> (Entry, Option<Value>, Option<Value>) {
    let shown_path = if shown == "." {
        c.path.clone()
    } else {
        format!("{shown}/{}", c.path)
    };
    let old_text = c
        .old
        .as_deref()
        .map(String::from_utf8_lossy)
        .unwrap_or_default();
    let new_text = String::from_utf8_lossy(&c.new);
    let old = c.old.as_deref().and_then(parse);
    let new = (c.op != Op::Delete).then(|| parse(&c.new)).flatten();
    let doc = new.as_ref().or(old.as_ref());
    let file = c.path.rsplit('/').next().unwrap_or(&c.path);
    let (kind, namespace, name) = match doc {
        _ if file == KUSTOMIZATION => {
            let dir = c.path.rsplit_once('/').map_or(".", |p| p.0);
            ("Kustomization".to_owned(), None, dir.to_owned())
        }
        Some(v) if v.get("kind").is_some() => {
            let kind = v["kind"].as_str().unwrap_or_default().to_owned();
            let stem = file.strip_suffix(".yaml").unwrap_or(file);
            let name = stem
                .strip_prefix(&format!("{}-", kind.to_ascii_lowercase()))
                .unwrap_or(stem)
                .to_owned();
            let ns = v["metadata"]["namespace"].as_str().map(str::to_owned);
            (kind, ns, name)
        }
        _ => ("File".to_owned(), None, shown_path.clone()),
    };
    let fields = match (c.op, &old, &new) {
        // Only resources have fields; a Dockerfile or bake file is text.
        (Op::Update, Some(o), Some(n)) if o.get("kind").is_some() => {
            let mut out = Vec::new();
            changed_fields("", o, n, &mut out);
            out
        }
        _ => Vec::new(),
    };
    let diff = TextDiff::from_lines(old_text.as_ref(), new_text.as_ref())
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{shown_path}"), &format!("b/{shown_path}"))
        .to_string();
    let e = Entry {
        op: op_name(c.op),
        path: shown_path.clone(),
        kind,
        namespace,
        name,
        fields,
        diff,
        dir: c
            .path
            .rsplit_once('/')
            .map(|p| p.0.to_owned())
            .unwrap_or_default(),
    };
    (e, old, new)
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// A value as shown in a field change: scalars plainly, collections as JSON.
fn show(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The leaf paths where `old` and `new` differ, in document order.
pub fn changed_fields(path: &str, old: &Value, new: &Value, out: &mut Vec<FieldChange>) {
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, va) in a {
                match b.get(k) {
                    Some(vb) => changed_fields(&join(path, k), va, vb, out),
                    None => out.push(FieldChange {
                        path: join(path, k),
                        old: Some(show(va)),
                        new: None,
                    }),
                }
            }
            for (k, vb) in b {
                if !a.contains_key(k) {
                    out.push(FieldChange {
                        path: join(path, k),
                        old: None,
                        new: Some(show(vb)),
                    });
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            for i in 0..a.len().max(b.len()) {
                let p = format!("{path}[{i}]");
                match (a.get(i), b.get(i)) {
                    (Some(va), Some(vb)) => changed_fields(&p, va, vb, out),
                    (va, vb) => out.push(FieldChange {
                        path: p,
                        old: va.map(show),
                        new: vb.map(show),
                    }),
                }
            }
        }
        // JSON held in a string (`TF_CONFIG`, `cluster.json`): compare the
        // structure, so the change reads `…value.cluster.worker[2]: added …`.
        (Value::String(a), Value::String(b)) if a != b && embedded_json(a, b).is_some() => {
            if let Some((ja, jb)) = embedded_json(a, b) {
                changed_fields(path, &ja, &jb, out);
            }
        }
        (a, b) if a != b => out.push(FieldChange {
            path: path.to_owned(),
            old: Some(show(a)),
            new: Some(show(b)),
        }),
        _ => {}
    }
}

/// Both strings as JSON collections, if both are.
fn embedded_json(a: &str, b: &str) -> Option<(Value, Value)> {
    let parse = |s: &str| {
        let t = s.trim_start();
        (t.starts_with('{') || t.starts_with('['))
            .then(|| serde_json::from_str::<Value>(s).ok())
            .flatten()
    };
    Some((parse(a)?, parse(b)?))
}

/// Values longer than this are not repeated in summaries; the file diff
/// below shows them.
const SHORT: usize = 60;

fn field_line(f: &FieldChange) -> String {
    let long = |v: &Option<String>| {
        v.as_ref()
            .is_some_and(|s| s.len() > SHORT || s.contains('\n'))
    };
    if long(&f.old) || long(&f.new) {
        let what = match (&f.old, &f.new) {
            (None, _) => "added",
            (_, None) => "removed",
            _ => "changed",
        };
        return format!("{}: {what}", f.path);
    }
    match (&f.old, &f.new) {
        (Some(o), Some(n)) => format!("{}: {o} → {n}", f.path),
        (None, Some(n)) => format!("{}: added {n}", f.path),
        (Some(o), None) => format!("{}: removed {o}", f.path),
        (None, None) => f.path.clone(),
    }
}

/// The fields of an entry worth showing a person: a field whose change is
/// only the run's new name is said once, by the re-run line.
fn shown_fields<'a>(r: &Report, e: &'a Entry) -> (Vec<&'a FieldChange>, bool) {
    let rerun = r
        .runs
        .iter()
        .find(|x| x.op == "rerun" && x.job == e.dir)
        .and_then(|x| Some((x.old.as_deref()?, x.new.as_deref()?)));
    let Some((old_run, new_run)) = rerun else {
        return (e.fields.iter().collect(), false);
    };
    let renamed = |f: &&FieldChange| match (&f.old, &f.new) {
        (Some(o), Some(n)) => o.replace(old_run, new_run) == *n,
        _ => false,
    };
    let kept: Vec<&FieldChange> = e.fields.iter().filter(|f| !renamed(f)).collect();
    let any_renamed = kept.len() < e.fields.len();
    (kept, any_renamed)
}

/// `1 training run starts again, 1 starts:`.
fn runs_heading(r: &Report) -> String {
    let count = |op: &str| r.runs.iter().filter(|x| x.op == op).count();
    let mut parts = Vec::new();
    match count("rerun") {
        0 => {}
        1 => parts.push("1 training run starts again".to_owned()),
        n => parts.push(format!("{n} training runs start again")),
    }
    for (op, one, many) in [("start", "starts", "start"), ("stop", "stops", "stop")] {
        match (count(op), parts.is_empty()) {
            (0, _) => {}
            (1, true) => parts.push(format!("1 training run {one}")),
            (n, true) => parts.push(format!("{n} training runs {many}")),
            (n, false) => parts.push(format!("{n} {}", if n == 1 { one } else { many })),
        }
    }
    format!("{}:", parts.join(", "))
}

fn totals(r: &Report) -> String {
    format!(
        "{} to create, {} to update, {} to delete, {} unchanged",
        r.create, r.update, r.delete, r.unchanged
    )
}

/// Plain text for a terminal; `styled` adds colour (stripped by the caller
/// when stdout is not a terminal).
pub fn render_text(r: &Report, styled: bool, stat: bool) -> String {
    let paint = |style: Style, s: &str| {
        if styled {
            format!("{style}{s}{style:#}")
        } else {
            s.to_owned()
        }
    };
    let green = AnsiColor::Green.on_default();
    let red = AnsiColor::Red.on_default();
    let yellow = AnsiColor::Yellow.on_default();
    let cyan = AnsiColor::Cyan.on_default();
    let mut out = String::new();
    if let Some(base) = &r.base {
        let _ = writeln!(out, "against {}:", base.shown());
    }
    if r.changes.is_empty() {
        let _ = writeln!(out, "no changes ({} unchanged)", r.unchanged);
        return out;
    }
    if !r.runs.is_empty() {
        let _ = writeln!(out, "{}", paint(Style::new().bold(), &runs_heading(r)));
        for run in &r.runs {
            let style = if run.op == "stop" { red } else { yellow };
            let _ = writeln!(out, "  {}", paint(style, &run.line()));
        }
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "{}",
            paint(Style::new().bold(), "Resources requested, before → after:")
        );
        for run in &r.runs {
            let _ = writeln!(out, "  {}: {}", run.label(), cost::line(&run.cost));
        }
        if r.runs.len() > 1 {
            let _ = writeln!(out, "  total: {}", cost::line(&r.total));
        }
        let _ = writeln!(out);
    }
    for e in r
        .changes
        .iter()
        .filter(|e| e.is_resource() || e.kind == "File")
    {
        let (sign, style) = match e.op {
            "create" => ('+', green),
            "delete" => ('-', red),
            _ => ('~', yellow),
        };
        let _ = writeln!(out, "{}", paint(style, &format!("{sign} {}", e.resource())));
        let (fields, renamed) = shown_fields(r, e);
        if renamed {
            let _ = writeln!(out, "    renamed with the run");
        }
        for f in fields {
            let _ = writeln!(out, "    {}", field_line(f));
        }
    }
    let _ = writeln!(out, "\n{}", totals(r));
    if stat {
        return out;
    }
    for e in &r.changes {
        let _ = writeln!(out);
        for line in e.diff.lines() {
            let style = if line.starts_with("+++") || line.starts_with("---") {
                Style::new().bold()
            } else if line.starts_with('+') {
                green
            } else if line.starts_with('-') {
                red
            } else if line.starts_with("@@") {
                cyan
            } else {
                Style::new()
            };
            let _ = writeln!(out, "{}", paint(style, line));
        }
    }
    out
}

/// A report to paste into a pull request: a summary table, then one fenced
/// `diff` block per file, long ones folded in `<details>`.
pub fn render_markdown(r: &Report, stat: bool) -> String {
    let mut out = String::new();
    match &r.base {
        Some(base) => {
            let _ = writeln!(out, "### trainc diff against `{}`\n", base.shown());
        }
        None => {
            let _ = writeln!(out, "### trainc diff\n");
        }
    }
    if r.changes.is_empty() {
        let _ = writeln!(out, "No changes ({} files unchanged).", r.unchanged);
        return out;
    }
    if !r.runs.is_empty() {
        let _ = writeln!(out, "**{}**\n", runs_heading(r));
        cost_table(r, &mut out);
        for run in &r.runs {
            let _ = writeln!(out, "- {}", run.line().replace('`', "'"));
        }
        let _ = writeln!(out);
    }
    let _ = writeln!(out, "{}.\n", totals(r));
    let _ = writeln!(out, "| | resource | changed fields |\n|---|---|---|");
    for e in r
        .changes
        .iter()
        .filter(|e| e.is_resource() || e.kind == "File")
    {
        let (kept, renamed) = shown_fields(r, e);
        let fields: Vec<String> = renamed
            .then(|| "renamed with the run".to_owned())
            .into_iter()
            .chain(
                kept.iter()
                    .map(|f| format!("`{}`", field_line(f).replace('|', "\\|").replace('`', "'"))),
            )
            .collect();
        let sign = match e.op {
            "create" => "+",
            "delete" => "−",
            _ => "~",
        };
        let _ = writeln!(
            out,
            "| {sign} | `{}` | {} |",
            e.resource(),
            fields.join("<br>")
        );
    }
    if stat {
        return out;
    }
    for e in &r.changes {
        let lines = e.diff.lines().count();
        let block = format!("```diff\n{}```\n", e.diff);
        if lines > FOLD_LINES {
            let _ = writeln!(
                out,
                "\n<details><summary><code>{}</code> ({lines} lines)</summary>\n\n{block}\n</details>",
                e.path
            );
        } else {
            let _ = writeln!(out, "\n`{}`\n\n{block}", e.path);
        }
    }
    out
}

/// The cost of the change, leading the Markdown report: one row per run
/// that starts, starts again or stops, and the total when there are several.
fn cost_table(r: &Report, out: &mut String) {
    let _ = writeln!(
        out,
        "| run | tasks | GPUs | CPU | memory | starts again? |\n|---|---|---|---|---|---|"
    );
    let row = |out: &mut String, name: &str, c: &Cost, again: &str| {
        let cells = cost::cells(c);
        let mut gpus = cells.gpus;
        for (resource, cell) in &cells.other {
            let _ = write!(gpus, "<br>`{resource}`: {cell}");
        }
        let _ = writeln!(
            out,
            "| {name} | {} | {gpus} | {} | {} | {again} |",
            cells.tasks, cells.cpu, cells.memory
        );
    };
    for run in &r.runs {
        let again = match run.op {
            "rerun" => "yes",
            "start" => "new run",
            _ => "no, it stops",
        };
        row(
            out,
            &format!("`{}`", run.label().replace('`', "'")),
            &run.cost,
            again,
        );
    }
    if r.runs.len() > 1 {
        let count = |op: &str| r.runs.iter().filter(|x| x.op == op).count();
        let again: Vec<String> = [
            (count("rerun"), "re-run", "re-runs"),
            (count("start"), "new", "new"),
            (count("stop"), "stopped", "stopped"),
        ]
        .into_iter()
        .filter(|(n, ..)| *n > 0)
        .map(|(n, one, many)| format!("{n} {}", if n == 1 { one } else { many }))
        .collect();
        row(out, "**total**", &r.total, &again.join(", "));
    }
    let _ = writeln!(out);
}

/// The report for tools: the JSON document of every command (see
/// [`crate::report::json`]), the report's keys between `version` and the
/// warnings under `findings`.
pub fn render_json(r: &Report, warnings: &[crate::diagnostic::Diagnostic]) -> String {
    crate::report::json(serde_json::to_value(r).unwrap_or_default(), warnings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn field_paths_name_the_changed_leaves() {
        let old = json!({"spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}}], "gone": 1}});
        let new = json!({"spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "2"}}}], "added": [1]}});
        let mut out = Vec::new();
        changed_fields("", &old, &new, &mut out);
        let lines: Vec<String> = out.iter().map(field_line).collect();
        assert_eq!(
            lines,
            [
                "spec.containers[0].resources.limits.nvidia.com/gpu: 1 → 2",
                "spec.gone: removed 1",
                "spec.added: added [1]",
            ]
        );
    }

    #[test]
    fn json_inside_strings_is_compared_by_structure() {
        let old = json!({"value": r#"{"cluster":{"worker":["a:1"]},"task":{"index":0}}"#});
        let new = json!({"value": r#"{"cluster":{"worker":["a:1","b:1"]},"task":{"index":0}}"#});
        let mut out = Vec::new();
        changed_fields("", &old, &new, &mut out);
        let lines: Vec<String> = out.iter().map(field_line).collect();
        assert_eq!(lines, ["value.cluster.worker[1]: added b:1"]);
    }

    fn side(docs: &[Value]) -> RunSide {
        let mut s = RunSide::default();
        for d in docs {
            s.add(d);
        }
        s
    }

    fn job(name: &str, run: Option<&str>, format: Option<&str>) -> Value {
        let mut labels = json!({"trainc.dev/job": "mnist"});
        if let Some(run) = run {
            labels["trainc.dev/run"] = json!(run);
        }
        let mut v = json!({"kind": "Job", "metadata": {"name": name, "labels": labels}});
        if let Some(f) = format {
            v["metadata"]["annotations"] = json!({"trainc.dev/format": f});
        }
        v
    }

    #[test]
    fn runs_say_why_they_start_again() {
        let old = side(&[job("mnist-aaaaaa-ps-0", Some("mnist-aaaaaa"), Some("1"))]);
        let new = side(&[job("mnist-bbbbbb-ps-0", Some("mnist-bbbbbb"), Some("1"))]);
        let r = runs(BTreeMap::from([("ml/mnist".to_owned(), (old, new))]));
        assert_eq!(
            r[0].line(),
            "re-run ml/mnist: mnist-aaaaaa → mnist-bbbbbb, every task starts again (the definition or its image changed)"
        );
        // Output of a trainc from before runs had names: Jobs named by task.
        let old = side(&[
            job("mnist-ps-0-4e20cf", None, None),
            job("mnist-worker-0-24e4da", None, None),
        ]);
        let new = side(&[job("mnist-bbbbbb-ps-0", Some("mnist-bbbbbb"), Some("1"))]);
        let r = runs(BTreeMap::from([("ml/mnist".to_owned(), (old, new))]));
        assert_eq!(
            r[0].line(),
            "re-run ml/mnist: mnist-ps-0-4e20cf and 1 more → mnist-bbbbbb, every task starts again (this trainc renders `kubernetes` runs in a new format: 0 → 1)"
        );
        let mut jobset = job("mnist-cccccc", Some("mnist-cccccc"), Some("1"));
        jobset["kind"] = json!("JobSet");
        let old = side(&[job("mnist-aaaaaa-ps-0", Some("mnist-aaaaaa"), Some("1"))]);
        let r = runs(BTreeMap::from([(
            "ml/mnist".to_owned(),
            (old, side(&[jobset])),
        )]));
        assert_eq!(
            r[0].reason.as_deref(),
            Some("the target changed: kubernetes → jobset")
        );
        let mut pytorchjob = job("digits-dddddd", Some("digits-dddddd"), Some("1"));
        pytorchjob["kind"] = json!("PyTorchJob");
        let mut jobset = job("digits-eeeeee", Some("digits-eeeeee"), Some("1"));
        jobset["kind"] = json!("JobSet");
        let r = runs(BTreeMap::from([(
            "ml/digits".to_owned(),
            (side(&[pytorchjob]), side(&[jobset])),
        )]));
        assert_eq!(
            r[0].reason.as_deref(),
            Some("the target changed: pytorchjob → jobset")
        );
        // Unchanged names are no run change; a job that appears or goes is.
        let same = || side(&[job("mnist-aaaaaa-ps-0", Some("mnist-aaaaaa"), Some("1"))]);
        assert!(runs(BTreeMap::from([("a".to_owned(), (same(), same()))])).is_empty());
        let r = runs(BTreeMap::from([
            ("a".to_owned(), (RunSide::default(), same())),
            ("b".to_owned(), (same(), RunSide::default())),
        ]));
        assert_eq!(r[0].line(), "start a: mnist-aaaaaa");
        assert_eq!(r[1].line(), "stop b: mnist-aaaaaa is deleted");
    }

    #[test]
    fn the_markdown_report_leads_with_the_cost() {
        let requests = |tasks, gpu: (&str, u64)| Requests {
            tasks,
            gpus: if gpu.0.ends_with("/gpu") { gpu.1 } else { 0 },
            cpu_millicores: tasks * 500,
            memory_bytes: tasks << 30,
            extended: BTreeMap::from([(gpu.0.to_owned(), gpu.1)]),
        };
        let run = |op, job: &str, output: Option<&str>, before, after| RunChange {
            op,
            job: job.to_owned(),
            old: Some(format!("{job}-old")),
            new: Some(format!("{job}-new")),
            reason: (op == "rerun").then(|| "the definition or its image changed".to_owned()),
            fields: Vec::new(),
            output: output.map(str::to_owned),
            cost: Cost { before, after },
        };
        let mut report = Report::merge([Report {
            base: None,
            create: 0,
            update: 1,
            delete: 0,
            unchanged: 0,
            runs: vec![
                run(
                    "rerun",
                    "ml/a",
                    Some("deploy-cpu"),
                    requests(2, ("nvidia.com/gpu", 2)),
                    requests(4, ("nvidia.com/gpu", 8)),
                ),
                run(
                    "start",
                    "ml/b",
                    None,
                    Requests::default(),
                    requests(1, ("gpu.intel.com/i915", 1)),
                ),
            ],
            total: Cost::default(),
            changes: Vec::new(),
        }]);
        // `report` sums the runs; here the merged parts had no total.
        for r in report.runs.clone() {
            report.total.add(&r.cost);
        }
        report.changes.push(Entry {
            op: "update",
            path: "deploy/ml/a/x.yaml".into(),
            kind: "ConfigMap".into(),
            namespace: Some("ml".into()),
            name: "x".into(),
            fields: Vec::new(),
            diff: String::new(),
            dir: "ml/a".into(),
        });
        let md = render_markdown(&report, true);
        let table = md
            .split("\n\n")
            .nth(2)
            .expect("the table follows the heading");
        assert_eq!(
            table,
            "| run | tasks | GPUs | CPU | memory | starts again? |\n\
             |---|---|---|---|---|---|\n\
             | `ml/a in deploy-cpu` | 2 → 4 (+2) | 2 → 8 (+6) | 1 → 2 (+1) | 2Gi → 4Gi (+2Gi) | yes |\n\
             | `ml/b` | 0 → 1 (+1) | 0<br>`gpu.intel.com/i915`: 0 → 1 (+1) | 0 → 500m (+500m) | 0 → 1Gi (+1Gi) | new run |\n\
             | **total** | 2 → 5 (+3) | 2 → 8 (+6)<br>`gpu.intel.com/i915`: 0 → 1 (+1) | 1 → 2.5 (+1.5) | 2Gi → 5Gi (+3Gi) | 1 re-run, 1 new |"
        );
        let text = render_text(&report, false, true);
        assert!(
            text.contains(
                "Resources requested, before → after:\n  \
                 ml/a in deploy-cpu: 2 → 4 tasks (+2), 2 → 8 GPUs (+6), 1 → 2 CPU (+1), 2Gi → 4Gi memory (+2Gi)\n  \
                 ml/b: 0 → 1 task (+1), 0 GPUs, 0 → 500m CPU (+500m), 0 → 1Gi memory (+1Gi), 0 → 1 gpu.intel.com/i915 (+1)\n  \
                 total: 2 → 5 tasks (+3), 2 → 8 GPUs (+6), 1 → 2.5 CPU (+1.5), 2Gi → 5Gi memory (+3Gi), 0 → 1 gpu.intel.com/i915 (+1)\n\n"
            ),
            "{text}"
        );
        let json: Value = serde_json::from_str(&render_json(&report, &[])).expect("json");
        assert_eq!(json["runs"][0]["after"]["gpus"], 8);
        assert_eq!(json["runs"][1]["before"]["tasks"], 0);
        assert_eq!(json["total"]["after"]["cpuMillicores"], 2500);
        assert_eq!(json["total"]["after"]["extended"]["gpu.intel.com/i915"], 1);
    }

    #[test]
    fn long_values_are_left_to_the_file_diff() {
        let f = FieldChange {
            path: "data.x".into(),
            old: Some("a".repeat(80)),
            new: Some("b".into()),
        };
        assert_eq!(field_line(&f), "data.x: changed");
    }
}
