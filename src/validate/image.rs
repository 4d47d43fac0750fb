//! Rules about where a job's image comes from: `image`, or `build` inputs
//! that exist on disk, and a framework version the preset knows.

use std::path::{Component, Path};

use super::Context;
use super::rules::Ctx;
use crate::model::definition::TrainingJob;
use crate::model::job::RoleKind;

pub(super) fn check(cx: &mut Ctx, def: &TrainingJob, vcx: &Context) {
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
    let Some(build) = &spec.build else {
        return;
    };
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
