//! What the API server refuses in a pod template beyond its schema, for the
//! rules a patch can break and one pass over the template can check (from
//! Kubernetes 1.33's `ValidatePodTemplateSpec` and the container and volume
//! validation it calls): no ephemeral containers in a template; a name of
//! its own for each container and init container, and for each volume; one
//! source per volume; mounts and devices of volumes the pod has, one mount
//! per path; a name of its own for each port of a container; no probes or
//! lifecycle hooks on an init container that is not a sidecar.
//!
//! Before these, a patch could add a second `tensorflow` container beside
//! trainc's, or a volume source beside the one trainc wrote, and the
//! definition passed validation with manifests the cluster refuses.

use std::collections::BTreeSet;

use serde_json::Value;

use super::Segment;

/// A rule of the API server that a pod template breaks: where, what, and
/// how to fix it.
#[derive(Debug)]
pub struct Refusal {
    pub path: Vec<Segment>,
    pub message: String,
    pub hint: String,
}

/// The first rule `template` (a pod template as JSON) breaks, in the order
/// Kubernetes checks them.
pub fn refusal(template: &Value) -> Option<Refusal> {
    let spec = &template["spec"];
    ephemeral(spec)
        .or_else(|| container_names(spec))
        .or_else(|| volumes(spec))
        .or_else(|| containers(spec))
}

/// `spec.<list>[i].<rest>`, a number in `rest` a list position.
fn at(list: &str, i: usize, rest: &[&str]) -> Vec<Segment> {
    let mut path = vec![
        Segment::Key("spec".into()),
        Segment::Key(list.into()),
        Segment::Index(i),
    ];
    path.extend(rest.iter().map(|k| match k.parse() {
        Ok(j) => Segment::Index(j),
        Err(_) => Segment::Key((*k).into()),
    }));
    path
}

fn items<'a>(v: &'a Value, field: &str) -> impl Iterator<Item = (usize, &'a Value)> {
    v[field].as_array().into_iter().flatten().enumerate()
}

fn name(v: &Value) -> &str {
    v["name"].as_str().unwrap_or_default()
}

/// The containers and then the init containers: `(list, index, container)`.
fn containers_of(spec: &Value) -> impl Iterator<Item = (&'static str, usize, &Value)> {
    ["containers", "initContainers"]
        .into_iter()
        .flat_map(move |list| items(spec, list).map(move |(i, c)| (list, i, c)))
}

/// Ephemeral containers are added to running pods, never in a template.
fn ephemeral(spec: &Value) -> Option<Refusal> {
    let any = spec["ephemeralContainers"]
        .as_array()
        .is_some_and(|a| !a.is_empty());
    any.then(|| Refusal {
        path: vec![
            Segment::Key("spec".into()),
            Segment::Key("ephemeralContainers".into()),
        ],
        message: "a pod template cannot have ephemeral containers".into(),
        hint: "Kubernetes adds them to running pods only (`kubectl debug`): add a container or an init container instead".into(),
    })
}

/// Containers and init containers share one set of names.
fn container_names(spec: &Value) -> Option<Refusal> {
    let mut seen = BTreeSet::new();
    containers_of(spec).find_map(|(list, i, c)| {
        let n = name(c);
        (!seen.insert(n)).then(|| Refusal {
            path: at(list, i, &["name"]),
            message: format!(
                "another container is already named `{n}`: containers and init containers each need a name of their own"
            ),
            hint: "rename one of them; to change a container trainc writes, such as `tensorflow`, patch it by its name".into(),
        })
    })
}

/// A name of its own for each volume, and exactly one source.
fn volumes(spec: &Value) -> Option<Refusal> {
    let mut seen = BTreeSet::new();
    items(spec, "volumes").find_map(|(i, v)| {
        let n = name(v);
        if !seen.insert(n) {
            return Some(Refusal {
                path: at("volumes", i, &["name"]),
                message: format!("another volume is already named `{n}`: each volume needs a name of its own"),
                hint: "rename one of them; a strategic patch changes a volume by its name".into(),
            });
        }
        let sources: Vec<String> = v
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, x)| *k != "name" && !x.is_null())
            .map(|(k, _)| format!("`{k}`"))
            .collect();
        let message = match sources.len() {
            1 => return None,
            0 => format!("the volume `{n}` has no source"),
            _ => format!(
                "the volume `{n}` has {} sources ({}), and a volume has one",
                sources.len(),
                sources.join(", ")
            ),
        };
        Some(Refusal {
            path: at("volumes", i, &[]),
            message,
            hint: "a strategic patch merges into the volume of its name: to change its source, set the old one to `null`, or give the volume `$patch: replace`".into(),
        })
    })
}

/// What each container refers to and names: the volumes it mounts (one
/// mount per path) or uses as devices, its ports; and what an init
/// container may not have.
fn containers(spec: &Value) -> Option<Refusal> {
    let volumes: BTreeSet<&str> = items(spec, "volumes").map(|(_, v)| name(v)).collect();
    containers_of(spec).find_map(|(list, i, c)| {
        let container = name(c);
        let refusal = |rest: &[&str], message: String, hint: &str| Refusal {
            path: at(list, i, rest),
            message,
            hint: hint.into(),
        };
        let mut paths = BTreeSet::new();
        for (j, m) in items(c, "volumeMounts") {
            let (index, volume) = (j.to_string(), name(m));
            if !volumes.contains(volume) {
                return Some(refusal(
                    &["volumeMounts", &index, "name"],
                    format!("the container `{container}` mounts the volume `{volume}`, which the pod does not have"),
                    "add the volume to `spec.volumes`, or mount one that is there",
                ));
            }
            let path = m["mountPath"].as_str().unwrap_or_default();
            if !paths.insert(path) {
                return Some(refusal(
                    &["volumeMounts", &index, "mountPath"],
                    format!("the container `{container}` mounts two volumes at `{path}`"),
                    "mount each volume at a path of its own",
                ));
            }
        }
        for (j, d) in items(c, "volumeDevices") {
            let volume = name(d);
            if !volumes.contains(volume) {
                return Some(refusal(
                    &["volumeDevices", &j.to_string(), "name"],
                    format!("the container `{container}` uses the volume `{volume}` as a device, which the pod does not have"),
                    "add the volume to `spec.volumes`, or use one that is there",
                ));
            }
        }
        let mut ports = BTreeSet::new();
        for (j, p) in items(c, "ports") {
            let port = name(p);
            if !port.is_empty() && !ports.insert(port) {
                return Some(refusal(
                    &["ports", &j.to_string(), "name"],
                    format!("the container `{container}` has two ports named `{port}`"),
                    "give each port a name of its own",
                ));
            }
        }
        let sidecar = c["restartPolicy"] == "Always";
        if list == "initContainers" && !sidecar {
            let field = ["lifecycle", "livenessProbe", "readinessProbe", "startupProbe"]
                .into_iter()
                .find(|f| !c[*f].is_null())?;
            return Some(refusal(
                &[field],
                format!("the init container `{container}` has a `{field}`, which only a sidecar (`restartPolicy: Always`) may have"),
                "remove it (a copy of a container takes its probes along), or make the init container a sidecar with `restartPolicy: Always`",
            ));
        }
        None
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::compile::patch::dotted;

    /// What is refused, and where, in `spec`.
    fn refused(spec: Value) -> Option<(String, String)> {
        refusal(&json!({ "spec": spec })).map(|r| (dotted(&r.path), r.message))
    }

    fn container(name: &str) -> Value {
        json!({"name": name, "image": "x"})
    }

    #[test]
    fn a_valid_template_passes() {
        let spec = json!({
            "containers": [{
                "name": "tensorflow", "image": "x",
                "ports": [{"name": "tfjob-port", "containerPort": 2222}, {"containerPort": 1}, {"containerPort": 2}],
                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                "startupProbe": {"tcpSocket": {"port": 2222}}
            }],
            "initContainers": [
                container("setup"),
                {"name": "proxy", "image": "x", "restartPolicy": "Always", "readinessProbe": {}}
            ],
            "volumes": [{"name": "data", "emptyDir": {}}],
            "ephemeralContainers": []
        });
        assert!(refused(spec).is_none());
    }

    #[test]
    fn names_are_unique_across_containers_and_init_containers() {
        let (at, message) = refused(json!({
            "containers": [container("tensorflow")],
            "initContainers": [container("setup"), container("tensorflow")]
        }))
        .expect("refused");
        assert_eq!(at, "spec.initContainers[1].name");
        assert!(message.contains("`tensorflow`"), "{message}");
        let twice = json!({"containers": [container("a"), container("a")]});
        assert_eq!(
            refused(twice).expect("refused").0,
            "spec.containers[1].name"
        );
    }

    #[test]
    fn ephemeral_containers_are_refused() {
        let spec = json!({"containers": [container("a")], "ephemeralContainers": [container("b")]});
        assert_eq!(
            refused(spec).expect("refused").0,
            "spec.ephemeralContainers"
        );
    }

    #[test]
    fn volumes_have_a_name_of_their_own_and_one_source() {
        let c = [container("a")];
        for (volumes, at, said) in [
            (
                json!([{"name": "v", "emptyDir": {}}, {"name": "v", "emptyDir": {}}]),
                "spec.volumes[1].name",
                "another volume is already named `v`",
            ),
            (
                json!([{"name": "v", "emptyDir": {}, "hostPath": {"path": "/"}}]),
                "spec.volumes[0]",
                "2 sources (`emptyDir`, `hostPath`)",
            ),
            (json!([{"name": "v"}]), "spec.volumes[0]", "no source"),
        ] {
            let (found, message) =
                refused(json!({"containers": c, "volumes": volumes})).expect("refused");
            assert_eq!(found, at);
            assert!(message.contains(said), "{message}");
        }
    }

    #[test]
    fn containers_refer_to_what_the_pod_has() {
        let volumes = json!([{"name": "data", "emptyDir": {}}]);
        for (c, at) in [
            (
                json!({"name": "a", "volumeMounts": [{"name": "nope", "mountPath": "/x"}]}),
                "spec.containers[0].volumeMounts[0].name",
            ),
            (
                json!({"name": "a", "volumeMounts": [
                    {"name": "data", "mountPath": "/x"}, {"name": "data", "mountPath": "/x"}
                ]}),
                "spec.containers[0].volumeMounts[1].mountPath",
            ),
            (
                json!({"name": "a", "volumeDevices": [{"name": "nope", "devicePath": "/dev/x"}]}),
                "spec.containers[0].volumeDevices[0].name",
            ),
            (
                json!({"name": "a", "ports": [
                    {"name": "p", "containerPort": 1}, {"name": "p", "containerPort": 2}
                ]}),
                "spec.containers[0].ports[1].name",
            ),
        ] {
            let spec = json!({"containers": [c], "volumes": volumes});
            assert_eq!(refused(spec).expect("refused").0, at);
        }
    }

    #[test]
    fn init_containers_take_no_probes_unless_sidecars() {
        let init =
            json!({"name": "copy", "image": "x", "startupProbe": {"tcpSocket": {"port": 1}}});
        let spec = json!({"containers": [container("a")], "initContainers": [init]});
        let (at, message) = refused(spec).expect("refused");
        assert_eq!(at, "spec.initContainers[0].startupProbe");
        assert!(message.contains("sidecar"), "{message}");
    }
}
