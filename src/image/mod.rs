//! Stage 3b, between validate and compile: jobs that give `build` inputs get
//! a rendered Dockerfile and an image tag that is a hash of everything the
//! image is built from. The roles without an image of their own then use
//! `<repository>:<tag>`, and the build specs go to their own tree, outside
//! the manifests that GitOps controllers sync.
//!
//! Only the build inputs reach the tag: a hyperparameter or replica change
//! rewrites manifests but never the image.

mod bake;
mod context;
mod dockerfile;
mod dockerignore;

use std::path::Path;

use sha2::Digest as _;

use crate::diagnostic::Diagnostic;
use crate::emit::Tree;
use crate::library::Library;
use crate::model::Job;

pub use bake::BAKE_FILE;
pub use context::{ContextPrint, Unsettled, unsettled};

/// Hex digits of the content hash in image tags.
pub const TAG_LEN: usize = 12;

/// One image to build.
#[derive(Debug, Clone)]
pub struct ImageBuild {
    /// The bake target: letters, digits, `-` and `_`.
    pub target: String,
    /// The definition, for the generated-file header.
    pub source: String,
    /// Build context relative to the project root.
    pub context: String,
    /// Where the Dockerfile goes, relative to the build-spec tree.
    pub path: String,
    /// `<repository>:<tag>`.
    pub image: String,
    pub dockerfile: Vec<u8>,
}

/// The first [`TAG_LEN`] hex digits of a SHA-256.
fn tag(digest: &[u8]) -> String {
    digest
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>()
        .chars()
        .take(TAG_LEN)
        .collect()
}

/// Renders and hashes every job's build, fills in the roles' images, and
/// returns the build-spec tree (relative to `build_output`), empty when no
/// job builds an image, and the prints of the contexts it read.
pub fn prepare(
    jobs: &mut [Job],
    library: &Library,
    root: &Path,
    build_output: &Path,
    generated: &[&Path],
) -> Result<(Tree, Vec<ContextPrint>), Vec<Diagnostic>> {
    let (builds, prints) = self::builds(jobs, library, root, build_output, generated)?;
    Ok((tree(&builds, root, build_output), prints))
}

/// The build-spec tree of `builds` (sorted by target) in `build_output`:
/// their Dockerfiles and the bake file, or nothing when there are none.
pub fn tree(builds: &[ImageBuild], root: &Path, build_output: &Path) -> Tree {
    let mut tree = Tree::new();
    if builds.is_empty() {
        return tree;
    }
    for b in builds {
        tree.insert(b.path.clone(), b.dockerfile.clone());
    }
    tree.insert(BAKE_FILE.to_owned(), bake_file(builds, root, build_output));
    tree
}

/// The bake file of `builds` (sorted by target) in `build_output`.
pub fn bake_file(builds: &[ImageBuild], root: &Path, build_output: &Path) -> Vec<u8> {
    let dockerfiles: Vec<String> = builds
        .iter()
        .map(|b| bake::dockerfile_from_context(root, &b.context, build_output, &b.path))
        .collect();
    bake::render(
        builds,
        &crate::paths::display_name(root, build_output),
        &dockerfiles,
    )
    .into_bytes()
}

/// [`prepare`]'s builds, sorted by target, and the prints of the contexts
/// it read.
pub fn builds(
    jobs: &mut [Job],
    library: &Library,
    root: &Path,
    build_output: &Path,
    generated: &[&Path],
) -> Result<(Vec<ImageBuild>, Vec<ContextPrint>), Vec<Diagnostic>> {
    let template = library.template(dockerfile::TEMPLATE).ok_or_else(|| {
        vec![Diagnostic::new(format!(
            "the library has no template `{}`",
            dockerfile::TEMPLATE
        ))]
    })?;
    let out_shown = crate::paths::display_name(root, build_output);
    // The path goes into comment lines of the Dockerfile and the bake file:
    // a line break would end the comment and start an instruction.
    if out_shown
        .chars()
        .any(|c| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}'))
    {
        return Err(vec![
            Diagnostic::new(format!(
                "the build directory `{}` cannot be named in a Dockerfile: its path holds a line break or control character",
                out_shown.escape_debug()
            ))
            .hint("rename it (`buildOutput` in trainc.yaml, or `--build-output`)"),
        ]);
    }
    let bake_shown = format!("{out_shown}/{BAKE_FILE}");
    let top = crate::paths::repository_top(root);
    let template = dockerfile::Template::new(dockerfile::TEMPLATE, template);
    let tb_template = library
        .template(dockerfile::TENSORBOARD_TEMPLATE)
        .map(|t| dockerfile::Template::new(dockerfile::TENSORBOARD_TEMPLATE, t));
    // Both images of every job are prepared on every core, from the jobs as
    // they were: neither sees the image the other fills in.
    let tensorboards = crate::par::map(jobs, |job| {
        tensorboard(job, tb_template.as_ref(), &out_shown, &bake_shown)
    });
    let results = crate::par::map(
        jobs,
        |job| -> Result<Option<(ImageBuild, ContextPrint)>, Diagnostic> {
            let Some(b) = &job.build else {
                return Ok(None);
            };
            let fail = |e: String, hint: String| {
                Diagnostic::new(format!(
                    "cannot prepare the image of {}/{}: {e}",
                    job.namespace, job.name
                ))
                .hint(hint)
            };
            let template_hint = || {
                "fix the Dockerfile template (the project's `library` directory, or trainc's library/templates/)".to_owned()
            };
            let text = template
                .render(job, b, &bake_shown, false)
                .map_err(|e| fail(e, template_hint()))?;
            let neutral = template
                .render(job, b, &bake_shown, true)
                .map_err(|e| fail(e, template_hint()))?;
            let probes: Vec<String> = std::iter::once(&b.entrypoint)
                .chain(&b.requirements)
                .cloned()
                .collect();
            let (hash, print) =
                context::hash(&b.context, neutral.as_bytes(), &probes, generated, &top).map_err(
                    |e| {
                        fail(
                            e,
                            format!(
                                "check `spec.build` in {}, and the context's .dockerignore: leave data and anything outside the repository out of the context",
                                job.source
                            ),
                        )
                        .at(b.at.clone())
                    },
                )?;
            let build = ImageBuild {
                target: format!("{}-{}", job.namespace, job.name),
                source: job.source.clone(),
                context: b.context_shown.clone(),
                path: dockerfile::path(&job.namespace, &job.name),
                image: format!("{}:{}", b.repository, &hash[..TAG_LEN]),
                dockerfile: text.into_bytes(),
            };
            Ok(Some((build, print)))
        },
    );
    let mut builds = Vec::new();
    let mut prints = Vec::new();
    let mut diags = Vec::new();
    for (job, r) in jobs.iter_mut().zip(tensorboards) {
        match r {
            Ok(Some(build)) => {
                if let Some(tb) = &mut job.tensorboard {
                    tb.image.clone_from(&build.image);
                }
                builds.push(build);
            }
            Ok(None) => {}
            Err(d) => diags.push(d),
        }
    }
    for (job, r) in jobs.iter_mut().zip(results) {
        match r {
            Ok(Some((build, print))) => {
                prints.push(print);
                for role in &mut job.roles {
                    if role.image.is_empty() {
                        role.image.clone_from(&build.image);
                    }
                }
                builds.push(build);
            }
            Ok(None) => {}
            Err(d) => diags.push(d),
        }
    }
    if !diags.is_empty() {
        return Err(diags);
    }
    prints.sort();
    prints.dedup();
    builds.sort_by(|a, b| a.target.cmp(&b.target));
    Ok((builds, prints))
}

/// The TensorBoard image of a job that names none: a Dockerfile from the
/// library's template, tagged by the hash of what it builds. Its context is
/// the job's build-spec directory: the Dockerfile copies nothing.
fn tensorboard(
    job: &Job,
    template: Option<&dockerfile::Template>,
    out_shown: &str,
    bake_shown: &str,
) -> Result<Option<ImageBuild>, Diagnostic> {
    let Some(b) = job.tensorboard.as_ref().and_then(|tb| tb.build.clone()) else {
        return Ok(None);
    };
    let fail = |e: String| {
        Diagnostic::new(format!(
            "cannot prepare the TensorBoard image of {}/{}: {e}",
            job.namespace, job.name
        ))
        .hint("fix the TensorBoard Dockerfile template (the project's `library` directory, or trainc's library/templates/)")
    };
    let template = template.ok_or_else(|| {
        fail(format!(
            "the library has no template `{}`",
            dockerfile::TENSORBOARD_TEMPLATE
        ))
    })?;
    let text = template
        .render_tensorboard(job, &b, bake_shown, false)
        .map_err(fail)?;
    let neutral = template
        .render_tensorboard(job, &b, bake_shown, true)
        .map_err(fail)?;
    let image = format!(
        "{}:{}",
        b.repository,
        tag(&sha2::Sha256::digest(neutral.as_bytes()))
    );
    let path = dockerfile::tensorboard_path(&job.namespace, &job.name);
    let context = format!(
        "{out_shown}/{}",
        crate::emit::job_dir(&job.namespace, &job.name)
    );
    let build = ImageBuild {
        target: format!("{}-{}-tensorboard", job.namespace, job.name),
        source: job.source.clone(),
        context,
        path,
        image,
        dockerfile: text.into_bytes(),
    };
    Ok(Some(build))
}
