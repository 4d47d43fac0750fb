//! The Dockerfile of a job, rendered from the library's template.

use minijinja::{Environment, UndefinedBehavior, context};

use crate::emit;
use crate::model::Job;
use crate::model::job::BuildInputs;

pub const TEMPLATE: &str = "Dockerfile.j2";

/// Where a job's Dockerfile goes in the build-spec tree.
pub fn path(namespace: &str, job: &str) -> String {
    format!("{}/Dockerfile", emit::job_dir(namespace, job))
}

/// Renders the Dockerfile. With `for_hash`, the parts that only say where
/// files are (the header's definition path, the bake file's path) are left
/// empty: comments do not change an image, and moving a definition or the
/// build directory must not change its tag.
pub fn render(
    template: &str,
    job: &Job,
    b: &BuildInputs,
    bake: &str,
    for_hash: bool,
) -> Result<String, String> {
    let mut env = Environment::new();
    // A typo in a user's template is an error, not an empty string.
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    let syntax = minijinja::syntax::SyntaxConfig::builder()
        .keep_trailing_newline(true)
        .trim_blocks(true)
        .lstrip_blocks(true)
        .build()
        .map_err(|e| e.to_string())?;
    env.set_syntax(syntax);
    env.add_template(TEMPLATE, template)
        .map_err(|e| format!("template {TEMPLATE}: {e}"))?;
    let requirements_name = b
        .requirements
        .as_deref()
        .and_then(|r| r.rsplit('/').next())
        .unwrap_or_default();
    let header = if for_hash {
        String::new()
    } else {
        emit::header(Some(&job.source))
    };
    let bake = if for_hash { "" } else { bake };
    env.get_template(TEMPLATE)
        .and_then(|t| {
            t.render(context! {
                header => header.trim_end(),
                bake_file => bake,
                base_image => &b.base_image,
                workdir => &b.workdir,
                python => &b.python,
                entrypoint => &b.entrypoint,
                requirements => &b.requirements,
                requirements_name => requirements_name,
                job => &job.name,
                namespace => &job.namespace,
                framework_version => &job.framework_version,
            })
        })
        .map_err(|e| format!("template {TEMPLATE}: {e}"))
        .and_then(|text| {
            // The header is how pruning knows the file is trainc's.
            if for_hash || emit::is_generated(text.as_bytes()) {
                Ok(text)
            } else {
                Err(format!(
                    "template {TEMPLATE} must start with `{{{{ header }}}}`, the generated-file header"
                ))
            }
        })
}
