//! The Dockerfile of a job, rendered from the library's template.

use std::sync::OnceLock;

use minijinja::{Environment, UndefinedBehavior, context};

use crate::emit;
use crate::model::Job;
use crate::model::job::{BuildInputs, TensorBoardBuild};

pub const TEMPLATE: &str = "Dockerfile.j2";

/// The work one rendering may do, in minijinja's fuel (about one unit per
/// instruction, or per 64 bytes of output and values made): a project's
/// template is the repository's, so a loop of 10^10 iterations or a string
/// of 10 GB must end in an error, not a hung CI job. The built-in templates
/// use fewer than 50; this bounds a render to about 0.05 s (debug build) and
/// 16 MB, under the largest file a build reads back as its own.
pub const TEMPLATE_FUEL: u64 = 250_000;
const _: () = assert!(TEMPLATE_FUEL * 64 < crate::plan::MAX_FILE);
pub const TENSORBOARD_TEMPLATE: &str = "tensorboard.Dockerfile.j2";

/// Where a job's Dockerfile goes in the build-spec tree.
pub fn path(namespace: &str, job: &str) -> String {
    format!("{}/Dockerfile", emit::job_dir(namespace, job))
}

/// Where the Dockerfile of a job's TensorBoard image goes, beside the
/// job's own.
pub fn tensorboard_path(namespace: &str, job: &str) -> String {
    format!("{}/tensorboard.Dockerfile", emit::job_dir(namespace, job))
}

/// A library template, compiled at most once per build and rendered for
/// every job. A template that does not compile keeps its error, which each
/// job's rendering reports as it did when every job compiled its own.
pub struct Template<'a> {
    name: &'static str,
    source: &'a str,
    /// Compiled when a job first renders it: the build after an edit
    /// prepares the edited jobs only, which mostly build no image.
    env: OnceLock<Result<Environment<'a>, String>>,
}

impl<'a> Template<'a> {
    pub fn new(name: &'static str, source: &'a str) -> Template<'a> {
        Template {
            name,
            source,
            env: OnceLock::new(),
        }
    }

    /// Renders the Dockerfile. With `for_hash`, the parts that only say
    /// where files are (the header's definition path, the bake file's path)
    /// are left empty: comments do not change an image, and moving a
    /// definition or the build directory must not change its tag.
    pub fn render(
        &self,
        job: &Job,
        b: &BuildInputs,
        bake: &str,
        for_hash: bool,
    ) -> Result<String, String> {
        let requirements_name = b
            .requirements
            .as_deref()
            .and_then(|r| r.rsplit('/').next())
            .unwrap_or_default();
        self.render_with(job, bake, for_hash, |header, bake| {
            context! {
                header => header,
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
            }
        })
    }

    /// Renders the Dockerfile of the TensorBoard image trainc builds for a
    /// job that names none.
    pub fn render_tensorboard(
        &self,
        job: &Job,
        tb: &TensorBoardBuild,
        bake: &str,
        for_hash: bool,
    ) -> Result<String, String> {
        self.render_with(job, bake, for_hash, |header, bake| {
            context! {
                header => header,
                bake_file => bake,
                base_image => &tb.base_image,
                package => &tb.package,
                job => &job.name,
                namespace => &job.namespace,
            }
        })
    }

    fn render_with(
        &self,
        job: &Job,
        bake: &str,
        for_hash: bool,
        values: impl FnOnce(&str, &str) -> minijinja::Value,
    ) -> Result<String, String> {
        let name = self.name;
        let env = self
            .env
            .get_or_init(|| environment(self.name, self.source))
            .as_ref()
            .map_err(Clone::clone)?;
        let header = if for_hash {
            String::new()
        } else {
            emit::header(Some(&job.source))
        };
        let bake = if for_hash { "" } else { bake };
        env.get_template(name)
            .and_then(|t| t.render(values(header.trim_end(), bake)))
            .map_err(|e| format!("template {name}: {e}"))
            .and_then(|text| {
                // The header is how pruning knows the file is trainc's: on a
                // line of its own, or the next build, which reads only a
                // file's first bytes, finds no header and refuses to
                // overwrite it.
                if for_hash || text.starts_with(&header) {
                    Ok(text)
                } else {
                    Err(format!(
                        "template {name} must start with `{{{{ header }}}}` on a line of its own, the generated-file header"
                    ))
                }
            })
    }
}

/// The environment holding the one template `name`. Fuel is counted per
/// rendering, so sharing it across jobs bounds each job as before.
fn environment<'a>(name: &'static str, template: &'a str) -> Result<Environment<'a>, String> {
    let mut env = Environment::new();
    env.set_fuel(Some(TEMPLATE_FUEL));
    // A typo in a user's template is an error, not an empty string.
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    let syntax = minijinja::syntax::SyntaxConfig::builder()
        .keep_trailing_newline(true)
        .trim_blocks(true)
        .lstrip_blocks(true)
        .build()
        .map_err(|e| e.to_string())?;
    env.set_syntax(syntax);
    env.add_template(name, template)
        .map_err(|e| format!("template {name}: {e}"))?;
    Ok(env)
}
