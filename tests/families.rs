//! A role's tasks rendered from one template (`compile::family`) are the
//! bytes of each task compiled and rendered alone, and a definition the
//! template cannot stand for is rendered task by task.

mod common;

use std::path::Path;

use trainc::compile::{self, Tasks};
use trainc::emit::{self, Files};
use trainc::model::Job;
use trainc::pipeline;

/// The example `mnist` with its roles' replicas and, where given, a line
/// added to its `spec`, as `jobs/<name>.yaml` in `dir`.
fn definition(dir: &Path, name: &str, replicas: [u32; 3], spec_line: &str) {
    let text = std::fs::read_to_string(common::example("mnist").join("jobs/mnist.yaml"))
        .expect("read the example")
        .replace("name: mnist", &format!("name: {name}"))
        .replace(
            "chief:  {replicas: 1",
            &format!("chief:  {{replicas: {}", replicas[0]),
        )
        .replace(
            "ps:     {replicas: 2",
            &format!("ps:     {{replicas: {}", replicas[1]),
        )
        .replace(
            "worker: {replicas: 2",
            &format!("worker: {{replicas: {}", replicas[2]),
        )
        .replace("\nspec:\n", &format!("\nspec:\n{spec_line}"));
    std::fs::write(dir.join(format!("jobs/{name}.yaml")), text).expect("write");
}

/// The project in `dir`, checked and with its images resolved.
fn jobs(dir: &Path) -> Vec<Job> {
    let project = trainc::project::Project::discover(dir, None).expect("project");
    let (mut jobs, _) = pipeline::check(&project, dir, &[]).expect("valid");
    pipeline::images(&project, &mut jobs, &project.build_output).expect("images");
    jobs
}

/// How many families a job has, its files rendered with them (`None` where
/// they do not stand for their tasks), and with every task compiled alone.
fn both(job: &Job) -> (usize, Option<Files>, Files) {
    let families = compile::compile(job, Tasks::Families).expect("compile");
    let each = compile::compile(job, Tasks::Each).expect("compile");
    assert!(
        each.families.is_empty(),
        "{}: no family task by task",
        job.name
    );
    let alone = emit::emit_job(&each)
        .expect("emit")
        .expect("task by task always renders");
    (
        families.families.len(),
        emit::emit_job(&families).expect("emit"),
        alone,
    )
}

#[test]
fn a_roles_tasks_from_one_template_are_each_task_compiled_alone() {
    let dir = common::scratch_example("mnist");
    // Indexes of one, two and three digits; roles under the family minimum;
    // a patch on every role; TF1 flags; the collective strategy, whose
    // worker 0 ends the run; the kitchen sink's every field on `kubernetes`.
    definition(dir.path(), "wide", [1, 3, 12], "");
    definition(dir.path(), "few", [1, 2, 2], "");
    definition(dir.path(), "hundred", [1, 2, 120], "");
    definition(
        dir.path(),
        "patched",
        [1, 4, 5],
        "  patches:\n    - strategic: {metadata: {annotations: {note: every-task}}}\n",
    );
    definition(
        dir.path(),
        "flags",
        [1, 3, 4],
        "  clusterSpec: {legacyFlags: true}\n",
    );
    let collective =
        std::fs::read_to_string(common::example("mnist").join("collective/mnist-collective.yaml"))
            .expect("read the collective example")
            .replace("worker: {replicas: 2", "worker: {replicas: 5");
    std::fs::write(dir.path().join("jobs/collective.yaml"), collective).expect("write");
    let sink = std::fs::read_to_string(
        common::root().join("tests/fixtures/kitchen-sink/jobs/resnet.yaml"),
    )
    .expect("read the kitchen sink")
    .replace("replicas: 3", "replicas: 10");
    std::fs::write(dir.path().join("jobs/resnet.yaml"), sink).expect("write");

    let mut families = std::collections::BTreeMap::new();
    for job in jobs(dir.path()) {
        let (count, from_template, alone) = both(&job);
        let from_template = from_template
            .unwrap_or_else(|| panic!("{}: its families render from their template", job.name));
        assert!(
            from_template == alone,
            "{}: a family renders other bytes than its tasks alone",
            job.name
        );
        families.insert(job.name.clone(), count);
    }
    let expected = [
        ("flags", 2),
        ("few", 0),
        ("mnist", 0),
        ("mnist-collective", 1),
        ("patched", 2),
        ("hundred", 1),
        ("resnet", 1),
        ("wide", 2),
    ];
    assert_eq!(
        families,
        expected
            .map(|(n, c)| (n.to_owned(), c))
            .into_iter()
            .collect(),
        "roles of three tasks or more are families"
    );
}

#[test]
fn a_definition_holding_the_sentinel_is_rendered_task_by_task() {
    let dir = common::scratch_example("mnist");
    let digits = compile::family::SENTINEL.to_string();
    definition(
        dir.path(),
        "digits",
        [1, 2, 4],
        &format!("  env: {{RUN_ID: \"{digits}\"}}\n"),
    );
    let job = jobs(dir.path())
        .into_iter()
        .find(|j| j.name == "digits")
        .expect("the job");
    let (count, from_template, alone) = both(&job);
    assert_eq!(count, 1, "the workers are a family");
    assert!(
        from_template.is_none(),
        "the sentinel's digits stand in the definition: no template"
    );

    // The build renders the tasks alone: each has its own index, and the
    // definition's digits as they are.
    let o = common::run(dir.path(), &["build"]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let out = common::read_tree(&common::output_of(dir.path()));
    for i in 0..4 {
        let name = format!("ml/digits/job-digits-worker-{i}.yaml");
        let text = String::from_utf8(out[&name].clone()).expect("UTF-8");
        assert!(text.contains(&format!(r#"\"index\":{i}}}}}""#)), "{name}");
        assert!(text.contains(&format!("task-index: \"{i}\"\n")), "{name}");
        assert!(text.contains(&format!("value: \"{digits}\"\n")), "{name}");
        assert_eq!(
            alone.iter().find(|(p, _)| *p == name).map(|(_, b)| b),
            Some(&out[&name])
        );
    }
}
