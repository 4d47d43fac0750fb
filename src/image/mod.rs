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

use crate::diagnostic::Diagnostic;
use crate::emit::Tree;
use crate::library::Library;
use crate::load;
use crate::model::Job;

pub use bake::BAKE_FILE;
pub use context::ContextPrint;

/// Hex digits of the content hash in image tags.
pub const TAG_LEN: usize = 12;

/// One image to build.
#[derive(Debug, Clone)]
pub struct ImageBuild {
    pub namespace: String,
    pub job: String,
    /// The definition, for the generated-file header.
    pub source: String,
    /// Build context relative to the project root.
    pub context: String,
    /// `<repository>:<tag>`.
    pub image: String,
    pub dockerfile: Vec<u8>,
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
    let template = library.template(dockerfile::TEMPLATE).ok_or_else(|| {
        vec![Diagnostic::new(format!(
            "the library has no template `{}`",
            dockerfile::TEMPLATE
        ))]
    })?;
    let out_shown = load::display_name(root, build_output);
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
            let text = dockerfile::render(template, job, b, &bake_shown, false)
                .map_err(|e| fail(e, template_hint()))?;
            let neutral = dockerfile::render(template, job, b, &bake_shown, true)
                .map_err(|e| fail(e, template_hint()))?;
            let probes: Vec<String> = std::iter::once(&b.entrypoint)
                .chain(&b.requirements)
                .cloned()
                .collect();
            let (hash, print) = context::hash(&b.context, neutral.as_bytes(), &probes, generated)
                .map_err(|e| {
                fail(
                    e,
                    format!(
                        "check `spec.build` in {}, and the context's .dockerignore",
                        job.source
                    ),
                )
            })?;
            let build = ImageBuild {
                namespace: job.namespace.clone(),
                job: job.name.clone(),
                source: job.source.clone(),
                context: b.context_shown.clone(),
                image: format!("{}:{}", b.repository, &hash[..TAG_LEN]),
                dockerfile: text.into_bytes(),
            };
            Ok(Some((build, print)))
        },
    );
    let mut builds = Vec::new();
    let mut prints = Vec::new();
    let mut diags = Vec::new();
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
    let mut tree = Tree::new();
    if builds.is_empty() {
        return Ok((tree, prints));
    }
    for b in &builds {
        tree.insert(dockerfile::path(&b.namespace, &b.job), b.dockerfile.clone());
    }
    tree.insert(
        BAKE_FILE.to_owned(),
        bake::render(&builds, &out_shown).into_bytes(),
    );
    Ok((tree, prints))
}
