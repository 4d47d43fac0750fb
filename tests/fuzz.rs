//! Fuzzing: seeded, deterministic mutations of the bundled examples and
//! fixtures, on every target, run through the CLI entry point in this
//! process (load → validate → compile → emit → plan/write, and `validate`,
//! `diff`, `build --check`). Each command line is checked for: no panic, no
//! hang (a watchdog), an exit code its command may have, no change to the
//! project after a failed or read-only command, and a successful build that
//! a second build reproduces byte for byte (see `case::Runner::check`).
//!
//! A bounded run is part of the test suite; a long run and the handling of
//! findings are described in docs/development.md ("Fuzzing").
//! Every finding is kept as a case in `tests/fixtures/fuzz/` and replayed
//! below.

#[path = "fuzz/case.rs"]
mod case;
#[path = "fuzz/mutate.rs"]
mod mutate;
#[path = "fuzz/rng.rs"]
mod rng;

use std::collections::BTreeMap;
use std::time::Instant;

use case::{Case, Mode, Runner, Step, Verdict};
use mutate::Vocab;
use rng::Rng;

/// Cases in the bounded run of the test suite.
const CASES: u64 = 3000;
/// Its seed: fixed, so that the suite is reproducible.
const SEED: u64 = 0x7472_6169_6e63;
/// One case in this many also runs the cross-checks between commands (see
/// `Runner::thorough`); recorded cases always do.
const THOROUGH_EVERY: u64 = 4;
/// One case in this many also runs through the built binary, which must
/// exit as the in-process run did.
const BINARY_EVERY: u64 = 250;

/// A project to mutate: its definitions and project files.
struct Base {
    dir: &'static str,
    definitions: &'static [&'static str],
    projects: &'static [&'static str],
}

const BASES: &[Base] = &[
    Base {
        dir: "examples/mnist",
        definitions: &["jobs/mnist.yaml"],
        projects: &["trainc.yaml", "trainc.jobset.yaml"],
    },
    Base {
        dir: "examples/mnist-cpu",
        definitions: &["jobs/mnist-cpu.yaml"],
        projects: &["trainc.yaml"],
    },
    Base {
        dir: "tests/fixtures/kitchen-sink",
        definitions: &["jobs/resnet.yaml"],
        projects: &["trainc.yaml"],
    },
    Base {
        dir: "tests/fixtures/storage",
        definitions: &["jobs/nas.yaml"],
        projects: &["trainc.yaml"],
    },
    // Variants: mutated patches go through the merge and its locations.
    Base {
        dir: "tests/fixtures/variants",
        definitions: &["jobs/mnist.yaml", "jobs/resnet.yaml"],
        projects: &["trainc.yaml"],
    },
    Base {
        dir: "tests/fixtures/patches",
        definitions: &["jobs/bert.yaml"],
        projects: &["trainc.yaml"],
    },
    // PyTorch: the other framework's rules, its targets, torchrun.
    Base {
        dir: "examples/pytorch",
        definitions: &["jobs/digits.yaml"],
        projects: &["trainc.yaml", "trainc.pytorchjob.yaml"],
    },
    Base {
        dir: "tests/fixtures/pytorch-gpu",
        definitions: &["jobs/llm.yaml"],
        projects: &["trainc.yaml"],
    },
];

const TARGETS: &[&str] = &["kubernetes", "jobset", "tfjob", "pytorchjob"];

/// File names worth a definition: YAML 1.1 line breaks, bidirectional
/// overrides, spaces, leading dashes, long names, other extensions.
const FILE_NAMES: &[&str] = &[
    "jobs/a b.yaml",
    "jobs/é.yaml",
    "jobs/-x.yaml",
    "jobs/--help.yaml",
    "jobs/x.yml",
    "jobs/x.YAML",
    "jobs/.hidden.yaml",
    "jobs/mnist\u{2028}images: [{name: x, newName: evil}]\u{2028}#.yaml",
    "jobs/n\u{0085}x.yaml",
    "jobs/\u{202E}lmay.yaml",
    "jobs/tab\there.yaml",
    "jobs/new\nline.yaml",
    "jobs/quote\"'.yaml",
    "jobs/deep/er/still/x.yaml",
    "jobs/xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx.yaml",
];

/// Directories a project file may name for `output` or `buildOutput`, a
/// variant's among them: most lead out of the repository, into the other
/// team's output planted beside every case (see `case::plant`).
const PLACES: &[&str] = &[
    "../victim/deploy",
    "../victim/build",
    "../victim",
    "deploy/../../victim/deploy",
    "..",
    "/",
    "out",
];

/// Patches of the pod template a definition may carry: amplification,
/// duplicate and ephemeral containers, settings past the scheduler and
/// the Pod Security profile.
const POD_PATCHES: &[&str] = &[
    "    - json: [{op: copy, from: /spec/containers/0, path: /spec/initContainers/-}, {op: copy, from: /spec/initContainers, path: /spec/ephemeralContainers}]",
    "    - json: [{op: copy, from: /spec/containers/0, path: /spec/containers/-}]",
    "    - json: [{op: add, path: /spec/ephemeralContainers, value: [{name: x, image: busybox}]}]",
    "    - json: [{op: add, path: /spec/nodeName, value: node-1}]",
    "    - strategic: {spec: {hostNetwork: true, dnsPolicy: None}}",
    "    - strategic: {spec: {containers: [{name: tensorflow, securityContext: {privileged: true}}]}}",
    "    - strategic: {spec: {containers: [{name: pytorch, image: evil.example.com/x:1}]}}",
];

/// Merge patches of a variant: another namespace or target, and build
/// contexts out of the repository.
const VARIANT_PATCHES: &[&str] = &[
    "{spec: {roles: {worker: {replicas: 1}}}}",
    "{metadata: {namespace: kube-system}}",
    "{spec: {target: jobset}}",
    "{spec: {build: {context: ../../victim/train}}}",
    "{spec: {build: {context: /}}}",
];

/// `text` with the top-level `key` set to `value`: its line replaced, or
/// one appended.
fn set_key(text: &str, key: &str, value: &str) -> String {
    let prefix = format!("{key}:");
    let mut found = false;
    let mut out: Vec<String> = text
        .lines()
        .map(|l| {
            if l.starts_with(&prefix) {
                found = true;
                format!("{key}: {value}")
            } else {
                l.to_owned()
            }
        })
        .collect();
    if !found {
        out.push(format!("{key}: {value}"));
    }
    out.join("\n") + "\n"
}

fn text(files: &BTreeMap<String, Vec<u8>>, path: &str) -> String {
    String::from_utf8(files.get(path).cloned().unwrap_or_default()).unwrap_or_default()
}

/// Inserts `line` right after the first line equal to `after`, else appends
/// both.
fn insert_after(text: &str, after: &str, line: &str) -> String {
    match text.find(&format!("\n{after}\n")) {
        Some(i) => {
            let at = i + after.len() + 2;
            format!("{}{line}\n{}", &text[..at], &text[at..])
        }
        None => format!("{text}{after}\n{line}\n"),
    }
}

/// Everything the generator draws from.
struct Corpus {
    files: Vec<BTreeMap<String, Vec<u8>>>,
    vocab: Vocab,
    texts: Vec<String>,
}

impl Corpus {
    fn new() -> Self {
        let files: Vec<_> = BASES.iter().map(|b| case::base_files(b.dir)).collect();
        let mut texts = Vec::new();
        for (b, f) in BASES.iter().zip(&files) {
            for p in b.definitions.iter().chain(b.projects) {
                texts.push(text(f, p));
            }
        }
        let seeds: Vec<&str> = texts.iter().map(String::as_str).collect();
        let vocab = Vocab::new(
            &[
                include_str!("../schema/trainingjob.schema.json"),
                include_str!("../schema/project.schema.json"),
            ],
            &seeds,
        );
        Corpus {
            files,
            vocab,
            texts,
        }
    }

    /// The case of one seed: a base and target variant, maybe a build of it
    /// (so there is an output tree to protect), mutations, then a command.
    fn generate(&self, seed: u64) -> Case {
        let mut rng = Rng::new(seed);
        let bi = rng.below(BASES.len());
        let base = &BASES[bi];
        let files = &self.files[bi];
        let mut steps = Vec::new();
        let def = *rng.pick(base.definitions);
        let project = if rng.chance(75) {
            base.projects[0]
        } else {
            *rng.pick(base.projects)
        };
        let mut def_text = text(files, def);
        let mut project_text = text(files, project);
        // The target: the project's default, the definition's own, or none.
        match rng.below(3) {
            0 => {}
            1 => {
                let t = rng.pick(TARGETS);
                def_text = insert_after(&def_text, "spec:", &format!("  target: {t}"));
                steps.push(Step::write(def, def_text.clone().into_bytes()));
            }
            _ => {
                let t = rng.pick(TARGETS);
                project_text = insert_after(&project_text, "defaults:", &format!("  target: {t}"));
                steps.push(Step::write(project, project_text.clone().into_bytes()));
            }
        }
        // The project's own templates (`library:`), which the image stage
        // renders with the definition's values.
        let template = rng.chance(8);
        if template {
            let name = *rng.pick(&["Dockerfile.j2", "tensorboard.Dockerfile.j2"]);
            let builtin = std::fs::read_to_string(
                std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("library/templates")
                    .join(name),
            )
            .expect("a built-in template");
            let n = rng.small(3);
            let m = mutate::mutate_template(&mut rng, &builtin, &self.vocab, n);
            steps.push(Step::write(&format!("lib/templates/{name}"), m));
            project_text.push_str("library: lib\n");
            steps.push(Step::write(project, project_text.clone().into_bytes()));
        }
        let mut inputs: Vec<&str> = Vec::new();
        if project != "trainc.yaml" {
            inputs.extend(["--project", project]);
        }
        if rng.chance(10) {
            inputs.extend(["-o", "out"]);
            if rng.chance(40) {
                inputs.extend(["--build-output", "bo"]);
            }
        }
        let built = rng.chance(65);
        if built {
            let mut args = vec!["build"];
            args.extend(&inputs);
            steps.push(Step::run(&args));
        }
        // Mutations: mostly the definition, sometimes the project file.
        let others: Vec<&str> = self.texts.iter().map(String::as_str).collect();
        let n = rng.small(5);
        let gentle = rng.chance(40);
        let which = rng.below(20);
        // A template is rendered only for valid definitions: mostly leave
        // them alone then.
        let which = if template && rng.chance(70) {
            99
        } else {
            which
        };
        if which < 16 || which == 19 {
            let m = mutate::mutate(
                &mut rng,
                def_text.as_bytes(),
                &self.vocab,
                &others,
                n,
                gentle,
            );
            steps.push(Step::write(def, m));
        }
        if (16..20).contains(&which) {
            let m = mutate::mutate(
                &mut rng,
                project_text.as_bytes(),
                &self.vocab,
                &others,
                n,
                gentle,
            );
            steps.push(Step::write(project, m));
        }
        // Changes to the set of files.
        match rng.below(40) {
            0 | 1 => {
                // The definition under another name.
                let content = match steps.last() {
                    Some(Step::Write { path, .. }) if path == def => steps.pop(),
                    _ => None,
                };
                let (text, hex) = match content {
                    Some(Step::Write { text, hex, .. }) => (text, hex),
                    _ => (Some(def_text.clone()), None),
                };
                steps.push(Step::Remove {
                    path: def.to_owned(),
                });
                steps.push(Step::Write {
                    path: (*rng.pick(FILE_NAMES)).to_owned(),
                    text,
                    hex,
                });
            }
            2 => {
                // A second definition: another seed, or the same job again.
                let other = rng.pick(&self.texts).clone();
                steps.push(Step::write("jobs/other.yaml", other.into_bytes()));
            }
            3 => steps.push(Step::write(def, Vec::new())),
            4 => steps.push(Step::write("jobs/empty.yaml", b"# nothing\n".to_vec())),
            5 => steps.push(Step::Remove {
                path: project.to_owned(),
            }),
            6 if built => {
                // Something in the output directory that trainc did not write.
                let at = if inputs.contains(&"-o") {
                    "out"
                } else if project == "trainc.jobset.yaml" {
                    "deploy-jobset"
                } else {
                    "deploy"
                };
                let what = rng.pick(&[
                    "# Code generated by trainc from jobs/x.yaml. DO NOT EDIT.\nkind: Foreign\n",
                    "# Code generated by trainc. DO NOT EDIT.\napiVersion: v1\nkind: ConfigMap\n",
                    "hand-written\n",
                    "",
                ]);
                steps.push(Step::write(
                    &format!("{at}/ml/stray.yaml"),
                    what.as_bytes().to_vec(),
                ));
            }
            7 | 8 => {
                // A directory the project file names, mostly outside.
                let key = *rng.pick(&["output", "buildOutput"]);
                let place: &&str = rng.pick(PLACES);
                let text = set_key(&project_text, key, place);
                steps.push(Step::write(project, text.into_bytes()));
            }
            9 if !project_text.contains("\nvariants:") => {
                // A variant of its own cluster, maybe writing outside,
                // with a merge patch.
                let text = format!(
                    "{project_text}variants:\n  v:\n    output: {}\n    cluster: v\n    patches:\n      - patch: {}\n",
                    rng.pick(&["deploy-v", "../victim/deploy", "out-v"]),
                    rng.pick(VARIANT_PATCHES),
                );
                steps.push(Step::write(project, text.into_bytes()));
            }
            10 => {
                // A patch of the pod template.
                let text = insert_after(
                    &def_text,
                    "spec:",
                    &format!("  patches:\n{}", rng.pick(POD_PATCHES)),
                );
                steps.push(Step::write(def, text.into_bytes()));
            }
            _ => {}
        }
        // The command under test.
        let mut args: Vec<&str> = Vec::new();
        if rng.chance(5) {
            args.extend(["--color", *rng.pick(&["always", "never"])]);
        }
        match rng.below(20) {
            0..=8 => {
                args.push("build");
                if rng.chance(20) {
                    args.push("--no-cache");
                }
                if rng.chance(15) {
                    args.extend(["--format", "json"]);
                }
                if rng.chance(10) {
                    args.push("-v");
                }
            }
            9..=12 => {
                args.push("validate");
                if rng.chance(25) {
                    args.extend(["--format", "json"]);
                }
                // `validate` writes nothing: no output directories.
                inputs.retain(|a| !matches!(*a, "-o" | "out" | "--build-output" | "bo"));
            }
            13..=15 => args.extend(["build", "--check"]),
            _ => {
                args.push("diff");
                args.extend(["--format", *rng.pick(&["text", "markdown", "json"])]);
                if rng.chance(25) {
                    args.push("--stat");
                }
            }
        }
        args.extend(&inputs);
        if rng.chance(8) {
            args.push(if rng.chance(50) { "jobs" } else { def });
        }
        steps.push(Step::run(&args));
        // Sometimes a second edit and build: what changes between two
        // builds (renamed runs, pruned files) rather than from nothing.
        if rng.chance(6) {
            let current = steps.iter().rev().find_map(|s| match s {
                Step::Write {
                    path,
                    text: Some(t),
                    ..
                } if path == def => Some(t.clone()),
                _ => None,
            });
            let removed = steps
                .iter()
                .any(|s| matches!(s, Step::Remove { path } if path == def));
            let current = current.unwrap_or(def_text);
            if !removed {
                let n = rng.small(2);
                let m = mutate::mutate(&mut rng, current.as_bytes(), &self.vocab, &others, n, true);
                steps.push(Step::write(def, m));
                let mut again = vec!["build"];
                again.extend(&inputs);
                steps.push(Step::run(&again));
            }
        }
        Case {
            note: String::new(),
            base: base.dir.to_owned(),
            steps,
            expect: None,
        }
    }
}

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    let v = v.trim();
    match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => v.parse().ok(),
    }
}

/// The bounded run: `TRAINC_FUZZ_CASES` cases (default [`CASES`]) from
/// `TRAINC_FUZZ_SEED` (default [`SEED`]), or only case `TRAINC_FUZZ_CASE`. The first failure is
/// minimised and written to `target/tmp/fuzz-failures/`;
/// `TRAINC_FUZZ_KEEP_GOING=1` records every distinct failure instead.
#[test]
fn fuzz() {
    let cases = env_u64("TRAINC_FUZZ_CASES").unwrap_or(CASES);
    let seed = env_u64("TRAINC_FUZZ_SEED").unwrap_or(SEED);
    let only = env_u64("TRAINC_FUZZ_CASE");
    let keep_going = std::env::var_os("TRAINC_FUZZ_KEEP_GOING").is_some_and(|v| v == "1");
    // As large a stack as `main` gets: trainc runs on the main thread.
    let worker = std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(move || {
            let _ = std::fs::remove_dir_all(case::cache_dir());
            let corpus = Corpus::new();
            let mut runner = Runner::new(Mode::InProcess, "");
            let mut binary = Runner::new(Mode::Binary, "");
            let started = Instant::now();
            let mut passed = 0u64;
            let mut outcomes: BTreeMap<String, u64> = BTreeMap::new();
            let mut skipped: BTreeMap<String, u64> = BTreeMap::new();
            let mut found: Vec<(String, String)> = Vec::new();
            let mut seen_kinds = Vec::new();
            if let Ok(file) = std::env::var("TRAINC_FUZZ_REPLAY") {
                let json = std::fs::read_to_string(&file).expect("read TRAINC_FUZZ_REPLAY");
                let case: Case = serde_json::from_str(&json).expect("a case");
                runner.label = format!("TRAINC_FUZZ_REPLAY={file}");
                return match runner.run(&case) {
                    Verdict::Fail(f) => vec![(runner.label.clone(), f.to_string())],
                    Verdict::Skipped(why) => vec![(runner.label.clone(), format!("skipped: {why}"))],
                    Verdict::Pass(_) => Vec::new(),
                };
            }
            let range = match only {
                Some(i) => i..i + 1,
                None => 0..cases,
            };
            for i in range {
                let case_seed = rng::case_seed(seed, i);
                let case = corpus.generate(case_seed);
                if only.is_some() {
                    eprintln!("{}", serde_json::to_string_pretty(&case).expect("json"));
                }
                let label = format!("TRAINC_FUZZ_SEED={seed:#x} TRAINC_FUZZ_CASE={i}");
                runner.label.clone_from(&label);
                runner.thorough = i % THOROUGH_EVERY == 0;
                match runner.run(&case) {
                    Verdict::Pass(last) => {
                        passed += 1;
                        *outcomes.entry(last).or_default() += 1;
                    }
                    Verdict::Skipped(why) => {
                        let what = why.split(' ').take(2).collect::<Vec<_>>().join(" ");
                        *skipped.entry(what).or_default() += 1;
                    }
                    Verdict::Fail(f) => {
                        let key = format!("{}: {}", f.kind, f.detail.lines().next().unwrap_or(""));
                        if keep_going && seen_kinds.contains(&key) {
                            continue;
                        }
                        seen_kinds.push(key);
                        let mut small = case::minimise(&mut runner, &case, f.kind, 400);
                        small.note = format!("{f}\nfound by {label}");
                        let file = case::record(&small, &format!("seed-{seed:x}-case-{i}"));
                        found.push((label.clone(), format!("{f}\n  minimised case: {}", file.display())));
                        if !keep_going {
                            break;
                        }
                    }
                }
                if i % BINARY_EVERY == 0 && found.is_empty() {
                    binary.label = format!("{label} (binary)");
                    let a = runner.codes(&case);
                    let b = binary.codes(&case);
                    if a != b {
                        let file = case::record(&case, &format!("seed-{seed:x}-case-{i}-binary"));
                        found.push((
                            label.clone(),
                            format!(
                                "exit codes in process {a:?}, of the binary {b:?}\n  case: {}",
                                file.display()
                            ),
                        ));
                        if !keep_going {
                            break;
                        }
                    }
                }
            }
            eprintln!(
                "fuzz: seed {seed:#x}: {passed} passed, {} failed, {} skipped as they would leave the scratch directory ({skipped:?}), in {:.1?}",
                found.len(),
                skipped.values().sum::<u64>(),
                started.elapsed()
            );
            eprintln!("fuzz: commands under test and their exit codes: {outcomes:?}");
            found
        })
        .expect("spawn the fuzz worker");
    let found = worker.join().expect("the fuzz harness itself panicked");
    assert!(
        found.is_empty(),
        "fuzzing found {} failure(s):\n{}\n\nReplay one with the variables shown and `cargo test --test fuzz fuzz`; keep it as a regression case in tests/fixtures/fuzz/ (see docs/development.md, \"Fuzzing\").",
        found.len(),
        found
            .iter()
            .map(|(l, f)| format!("- {l}: {f}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Replays one recorded case; it must pass every property.
fn replay(name: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/fuzz")
        .join(format!("{name}.json"));
    let json = std::fs::read_to_string(&path).expect("read the case");
    let case: Case = serde_json::from_str(&json).expect("a case");
    let name = name.to_owned();
    let worker = std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(move || {
            let mut runner = Runner::new(Mode::InProcess, &format!("recorded case {name}"));
            match runner.run(&case) {
                Verdict::Pass(_) => Ok(()),
                Verdict::Skipped(why) => Err(format!("skipped: {why}")),
                Verdict::Fail(f) => Err(f.to_string()),
            }
        })
        .expect("spawn");
    if let Err(e) = worker.join().expect("the harness panicked") {
        panic!("{}: {e}", path.display());
    }
}

/// One test per file of tests/fixtures/fuzz/ (`name.json` → `name`); a case
/// that still fails is `#[ignore = "why"]` until it is fixed.
macro_rules! recorded {
    ($($(#[$meta:meta])* $name:ident,)*) => {
        $(
            $(#[$meta])*
            #[test]
            fn $name() {
                replay(stringify!($name));
            }
        )*
        const RECORDED: &[&str] = &[$(stringify!($name)),*];
    };
}

recorded! {
    template_loop_runs_out_of_fuel,
    template_string_of_10_gb_runs_out_of_fuel,
    template_join_of_10_gb_runs_out_of_fuel,
    template_header_line_longer_than_the_sniff,
    output_directory_name_too_long,
    variant_output_outside_the_repository,
}

#[test]
fn every_recorded_case_is_replayed() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fuzz");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    let mut listed: Vec<String> = RECORDED.iter().map(|n| format!("{n}.json")).collect();
    listed.sort();
    assert_eq!(
        files,
        listed,
        "list every file of {} in `recorded!`",
        dir.display()
    );
}

#[test]
fn generation_is_deterministic() {
    let corpus = Corpus::new();
    for i in 0..50 {
        let s = rng::case_seed(SEED, i);
        assert_eq!(corpus.generate(s), corpus.generate(s));
    }
}
