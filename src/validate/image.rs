//! Rules about where a job's image comes from: `image`, or `build` inputs
//! that exist on disk, and a framework version the preset knows; every
//! image reference and Dockerfile path checked against its grammar
//! ([`crate::grammar`]), with a warning for references that can change
//! under the same name.

use std::path::{Component, Path};

use super::Context;
use crate::grammar::{REFERENCE_HINT, dockerfile_path_error, name_error, reference_error};
use crate::load::Findings;
use crate::model::definition::RoleKind;
use crate::model::definition::TrainingJob;
use crate::model::job::{image_name, split_reference};

pub(super) fn check(cx: &mut Findings, def: &TrainingJob, vcx: &Context) {
    let spec = &def.spec;
    let Some(preset) = vcx.library.preset(def.framework_name()) else {
        cx.error(
            "/spec/framework",
            format!("no preset for framework `{}`", def.framework_name()),
            "add `presets/<framework>.yaml` to the project's library",
        );
        return;
    };
    if let Some(v) = &spec.framework_version
        && !preset.versions.contains_key(v)
    {
        let known: Vec<&str> = preset.versions.keys().map(String::as_str).collect();
        cx.error(
            "/spec/frameworkVersion",
            format!("the {} preset has no version {v}", preset.framework),
            format!(
                "use one of {}, or add `{v}` to `versions` in the library's presets/{}.yaml",
                known.join(", "),
                preset.framework
            ),
        );
    }
    let every_role_has_image = RoleKind::ALL.iter().all(|k| {
        k.of(&spec.roles)
            .is_none_or(|r| r.replicas == 0 || r.image.is_some())
    });
    match (&spec.image, &spec.build) {
        (Some(_), Some(_)) => cx.error_at_key(
            "/spec/build",
            "a job takes `image` or `build`, not both",
            "keep `build` to have trainc build the image, or `image` to use a ready one",
        ),
        (None, None) if !every_role_has_image => cx.error_at_key(
            "/spec",
            "a job needs an `image` or `build` inputs",
            "add `image: registry.example.com/ml/mnist:1.0`, or `build: {context: ., entrypoint: train.py, repository: …}`",
        ),
        _ => {}
    }
    references(cx, def);
    let Some(build) = &spec.build else {
        return;
    };
    for (field, value) in [
        ("entrypoint", Some(&build.entrypoint)),
        ("requirements", build.requirements.as_ref()),
    ] {
        if let Some(why) = value.and_then(|v| dockerfile_path_error(v)) {
            cx.error(
                &format!("/spec/build/{field}"),
                why,
                "it is written into the Dockerfile (`COPY`, `CMD [\"…\"]`): use letters, digits, '_', '.', '-' and '/'",
            );
        }
    }
    // Relative to the definition file, as a Dockerfile's COPY is to its context.
    let def_dir = vcx
        .root
        .join(&cx.doc.file.name)
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let context = def_dir.join(&build.context);
    if !context.is_dir() {
        cx.error(
            "/spec/build/context",
            format!("build context `{}` is not a directory", build.context),
            "give a directory relative to the definition file",
        );
        return;
    }
    if let Some(why) = outside_repository(&build.context, &context, vcx.top) {
        cx.error(
            "/spec/build/context",
            why,
            "a build context is sent whole to the image builder (`COPY . .`): it must lie inside the repository (the directory holding `.git`, else the project root), also through symlinks",
        );
        return;
    }
    unsettled(cx, &build.context, &context, vcx);
    for (field, value) in [
        ("entrypoint", Some(&build.entrypoint)),
        ("requirements", build.requirements.as_ref()),
    ] {
        let Some(value) = value else { continue };
        let at = format!("/spec/build/{field}");
        let p = Path::new(value);
        if p.components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
        {
            cx.error(
                &at,
                format!("`{value}` must lie inside the build context"),
                "give a path relative to `build.context`, without `..`",
            );
        } else if !context.join(p).is_file() {
            cx.error(
                &at,
                format!(
                    "`{value}` is not a file in the build context `{}`",
                    build.context
                ),
                "paths in `build` other than `context` are relative to the context",
            );
        }
    }
}

/// Why the build context `context` (as `written`) lies outside the
/// repository `top`, as it resolves: a committed symlink to
/// `~/.docker` would otherwise ship the runner's files in the image.
fn outside_repository(written: &str, context: &Path, top: &Path) -> Option<String> {
    let real = context.canonicalize().ok()?;
    let top = top.canonicalize().unwrap_or_else(|_| top.to_path_buf());
    if real.starts_with(&top) {
        return None;
    }
    let lexical = crate::paths::clean(context);
    Some(if lexical.starts_with(&top) {
        format!(
            "build context `{written}` resolves to `{}`, outside the repository",
            crate::emit::comment_safe(&real.to_string_lossy())
        )
    } else {
        format!("build context `{written}` lies outside the repository")
    })
}

/// A context that holds `.git` or a directory trainc writes would give the
/// image a new tag with every commit or build, and the run would start
/// again each time. Each such entry is its own finding, so that one run
/// names them all.
fn unsettled(cx: &mut Findings, written: &str, context: &Path, vcx: &Context) {
    const AT: &str = "/spec/build/context";
    // The file to edit, from the project root as the definitions are named.
    let def_dir = Path::new(&cx.doc.file.name)
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let ignore = crate::paths::normalize(&def_dir.join(written).join(".dockerignore"));
    for entry in crate::image::unsettled(context, vcx.generated) {
        match entry {
            crate::image::Unsettled::Git(rel) => cx.error(
                AT,
                format!(
                    "the build context includes `{rel}`, which changes with every commit: so would the image tag, and the run would start again each time"
                ),
                format!("add a line `{rel}` to {ignore}"),
            ),
            crate::image::Unsettled::Written(rel, what) => cx.error(
                AT,
                format!(
                    "the build context includes the {what} `{rel}`, which every build rewrites: the image tag would never settle"
                ),
                format!("add a line `{rel}` to {ignore}"),
            ),
            crate::image::Unsettled::Within(dir, what) => cx.error(
                AT,
                format!(
                    "the build context lies inside the {what} `{}`, which every build rewrites: the image tag would never settle",
                    crate::paths::display_name(vcx.root, &dir)
                ),
                "point `build.context` at a directory that trainc does not write",
            ),
        }
    }
}

/// Every image reference of a definition, held to the reference grammar:
/// the base image lands in the Dockerfile's `FROM` line, where `ubuntu\`
/// would continue the line into the next instruction, and the others in
/// pod templates, where the kubelet would fail to pull them only at run
/// time.
/// Every image reference a definition writes, with its JSON pointer.
fn image_fields(def: &TrainingJob) -> Vec<(String, &str)> {
    let spec = &def.spec;
    let mut refs: Vec<(String, &str)> = Vec::new();
    refs.extend(spec.image.as_deref().map(|i| ("/spec/image".to_owned(), i)));
    for k in RoleKind::ALL {
        if let Some(i) = k.of(&spec.roles).and_then(|r| r.image.as_deref()) {
            refs.push((format!("/spec/roles/{}/image", k.as_str()), i));
        }
    }
    if let Some(i) = spec.tensorboard.as_ref().and_then(|t| t.image.as_deref()) {
        refs.push(("/spec/tensorboard/image".to_owned(), i));
    }
    if let Some(i) = spec.build.as_ref().and_then(|b| b.base_image.as_deref()) {
        refs.push(("/spec/build/baseImage".to_owned(), i));
    }
    refs
}

/// Why a valid reference can name different images over time, if it can.
pub fn mutable(image: &str) -> Option<&'static str> {
    match split_reference(image) {
        (_, _, Some(_)) => None,
        (_, None, None) => Some("has no tag, so it means `latest`"),
        (_, Some("latest"), None) => Some("is tagged `latest`"),
        _ => None,
    }
}

fn references(cx: &mut Findings, def: &TrainingJob) {
    let spec = &def.spec;
    for (at, r) in image_fields(def) {
        if let Some(why) = reference_error(r) {
            cx.error(&at, why, REFERENCE_HINT);
        } else if let Some(why) = mutable(r) {
            // `ubuntu` or `:latest` today is another image tomorrow: the run
            // would change without its definition changing.
            let name = image_name(r);
            cx.warning(
                &at,
                format!("image `{r}` {why}: it can point at another image at any time"),
                format!("pin a tag (`{name}:1.2.3`) or a digest (`{name}@sha256:…`)"),
            );
        }
    }
    if let Some(b) = &spec.build
        && let Some(why) = name_error(&b.repository)
    {
        cx.error("/spec/build/repository", why, REFERENCE_HINT);
    }
    if let Some(r) = spec
        .tensorboard
        .as_ref()
        .and_then(|t| t.repository.as_deref())
        && let Some(why) = name_error(r)
    {
        cx.error("/spec/tensorboard/repository", why, REFERENCE_HINT);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_split_as_the_grammar_says() {
        assert_eq!(split_reference("ubuntu"), ("ubuntu", None, None));
        assert_eq!(
            split_reference("registry:5000/ml/x"),
            ("registry:5000/ml/x", None, None)
        );
        assert_eq!(
            split_reference("registry:5000/ml/x:1.0@sha256:ab"),
            ("registry:5000/ml/x", Some("1.0"), Some("sha256:ab"))
        );
    }

    #[test]
    fn only_untagged_and_latest_are_mutable() {
        assert!(mutable("ubuntu").is_some());
        assert!(mutable("ubuntu:latest").is_some());
        assert!(mutable("registry:5000/ubuntu").is_some());
        assert!(mutable("ubuntu:24.04").is_none());
        assert!(mutable("ubuntu@sha256:0123").is_none());
        assert!(mutable("ubuntu:latest@sha256:0123").is_none());
    }
}
