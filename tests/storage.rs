//! Storage and the run identity: what the pods see of a volume renames the
//! run, what only the claim or the PersistentVolume holds does not.

mod common;

use common::{read_tree, run, scratch_example, stderr};

/// Builds the storage fixture with `changes` applied to its definition;
/// returns the run name and the output tree.
fn build_with(changes: &[(&str, &str)]) -> (String, std::collections::BTreeMap<String, Vec<u8>>) {
    let dir = scratch_example("storage");
    let def = dir.path().join("jobs/nas.yaml");
    let mut text = std::fs::read_to_string(&def).expect("read");
    for (from, to) in changes {
        assert!(text.contains(from), "{from}");
        text = text.replace(from, to);
    }
    std::fs::write(&def, text).expect("write");
    let o = run(dir.path(), &["build"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let tree = read_tree(&dir.path().join("deploy"));
    let chief = String::from_utf8_lossy(&tree["ml/nas/job-nas-chief-0.yaml"]).into_owned();
    let name = chief
        .lines()
        .find_map(|l| l.trim().strip_prefix("trainc.dev/run: "))
        .expect("run label")
        .to_owned();
    (name, tree)
}

#[test]
fn claim_and_volume_fields_keep_the_run() {
    let (base, before) = build_with(&[]);
    for (change, file) in [
        (
            ("[vers=4.0, nolock, noresvport]", "[vers=4.1]"),
            "ml/nas/persistentvolume-ml-nas-logs.yaml",
        ),
        (
            ("vers: \"3\"", "vers: \"4.0\""),
            "ml/nas/persistentvolume-ml-nas-datasets.yaml",
        ),
        (
            ("{train: mnist}", "{train: mnist-v2}"),
            "ml/nas/persistentvolumeclaim-nas-training-data.yaml",
        ),
        (
            ("volumeName: models-pv", "volumeName: models-pv-2"),
            "ml/nas/persistentvolumeclaim-nas-models.yaml",
        ),
    ] {
        let (name, after) = build_with(&[change]);
        assert_eq!(name, base, "{change:?} changes no pod");
        assert_ne!(before[file], after[file], "{change:?} changes {file}");
    }
}

#[test]
fn what_the_pods_see_renames_the_run() {
    let (base, _) = build_with(&[]);
    for change in [
        ("defaultMode: 0o444", "defaultMode: 0o440"),
        (
            "{medium: Memory, sizeLimit: 1Gi}",
            "{medium: Memory, sizeLimit: 2Gi}",
        ),
        ("name: storage-credentials", "name: other-credentials"),
        ("roles: [worker]", "roles: [worker, chief]"),
    ] {
        let (name, _) = build_with(&[change]);
        assert_ne!(name, base, "{change:?} changes the pods");
    }
}

/// The order of `roles` is not the pods' business, and listing every role
/// the job has is the same as listing none.
#[test]
fn roles_name_a_set_of_pods() {
    let (base, before) = build_with(&[]);
    let (name, after) = build_with(&[(
        "roles: [chief, worker, evaluator]",
        "roles: [evaluator, worker, chief]",
    )]);
    assert_eq!((&name, &after), (&base, &before));
    let (every, _) = build_with(&[(
        "roles: [chief, worker, evaluator]",
        "roles: [chief, ps, worker, evaluator]",
    )]);
    let (none, _) = build_with(&[("      roles: [chief, worker, evaluator]\n", "")]);
    assert_eq!(every, none);
    assert_ne!(every, base);
}

/// An edit the API server would refuse to make in place stops `build` and
/// `diff` (exit 2, nothing written), located at the committed file: a
/// static claim's size, a claim's spec, a PersistentVolume's source. The
/// edits it takes pass: a PersistentVolume's capacity and mount options, a
/// larger claim of a storage class. tests/cluster.rs shows the API server
/// refusing the same edits.
#[test]
fn edits_kubernetes_refuses_in_place_stop_the_build() {
    for (from, to, refused) in [
        (
            "size: 100Gi",
            "size: 200Gi",
            Some("persistentvolumeclaim-nas-logs.yaml:"),
        ),
        (
            "size: 10Gi\n      selector",
            "size: 5Gi\n      selector",
            Some("would shrink from 10Gi to 5Gi"),
        ),
        (
            "volumeName: models-pv",
            "volumeName: models-pv-2",
            Some("`spec.volumeName` would change"),
        ),
        (
            "path: /exports/logs",
            "path: /exports/logs-2",
            Some("persistentvolume-ml-nas-logs.yaml:"),
        ),
        ("size: 50Gi", "size: 60Gi", None),
        ("[vers=4.0, nolock, noresvport]", "[vers=4.1]", None),
    ] {
        let dir = scratch_example("storage");
        let def = dir.path().join("jobs/nas.yaml");
        let original = std::fs::read_to_string(&def).expect("read");
        let o = run(dir.path(), &["build"]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(original.contains(from), "{from}");
        std::fs::write(&def, original.replace(from, to)).expect("write");
        let before = read_tree(&dir.path().join("deploy"));
        for command in ["build", "diff"] {
            let o = run(dir.path(), &[command]);
            match refused {
                Some(message) => {
                    assert_eq!(o.status.code(), Some(2), "{command} {to}: {}", stderr(&o));
                    assert!(stderr(&o).contains(message), "{to}: {}", stderr(&o));
                    assert!(
                        stderr(&o).contains("new name in jobs/nas.yaml"),
                        "{}",
                        stderr(&o)
                    );
                }
                None => assert_ne!(o.status.code(), Some(2), "{to}: {}", stderr(&o)),
            }
        }
        if refused.is_some() {
            assert_eq!(
                read_tree(&dir.path().join("deploy")),
                before,
                "{to}: nothing written"
            );
        }
    }
}
