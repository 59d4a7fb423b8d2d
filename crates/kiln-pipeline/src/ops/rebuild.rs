//! `kiln check-images --rebuild`: every row's Dockerfile rebuilds into an environment whose
//! tests end as the row says. A published image can vanish from every registry; the Dockerfile
//! is the promise that it can be made again, and this keeps that promise honest.
//!
//! Per row: the repository at its base commit (through the dataset's mirror cache and the
//! config's clone URL) is the build context, as the Dockerfile's header says; the image is built
//! under a scratch tag; then the row is evaluated in it twice, as `kiln evaluate` would with the
//! image swapped: with no patch (the baseline: every FAIL_TO_PASS test fails, every
//! PASS_TO_PASS test passes) and with the gold patch (resolved). The scratch image is removed.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kiln_core::config::{NodeSettings, Pipeline};
use kiln_core::runtime::{LABEL_MANAGED, LABEL_SCRATCH};
use kiln_core::{ContainerRuntime, ImageBuild, NetworkMode, RuntimeError};
use kiln_schema::ReleaseInstance;
use kiln_validate::{EvaluateRequest, Resolution};
use serde::Serialize;

use crate::error::PipelineError;

/// What rebuilding one row's environment showed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RebuildVerdict {
    /// Rebuilt; the baseline and the gold patch end as the row says.
    Reproduced,
    /// Rebuilt, but a test ends otherwise than the row says.
    Differs,
    /// The Dockerfile did not build.
    BuildFailed,
    /// The repository could not be cloned at the base commit.
    NoSource,
    /// The row has no Dockerfile.
    NoDockerfile,
}

impl RebuildVerdict {
    /// Whether the environment was made again as the row says.
    #[must_use]
    pub fn is_good(self) -> bool {
        self == Self::Reproduced
    }
}

/// The rebuild of one row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RebuildCheck {
    /// The row.
    pub instance_id: String,
    /// The outcome.
    pub verdict: RebuildVerdict,
    /// What differed or failed, in words (empty when reproduced).
    pub detail: String,
    /// Wall seconds of clone, build and both evaluations.
    pub seconds: f64,
}

/// Rebuilds every row's environment from its Dockerfile and checks its tests; logs go under
/// `log_dir/<id>/`.
///
/// # Errors
/// When the config has no source to clone from, or the engine fails.
pub async fn rebuild_release(
    pipeline: &Pipeline,
    runtime: Arc<dyn ContainerRuntime>,
    rows: &[ReleaseInstance],
    timeout: Duration,
    log_dir: &Path,
) -> Result<Vec<RebuildCheck>, PipelineError> {
    let template = pipeline
        .nodes
        .iter()
        .find_map(|n| match &n.settings {
            NodeSettings::Ingest(s) => Some(s.clone_url.clone()),
            NodeSettings::Crawl(s) => Some(s.clone_url.clone()),
            _ => None,
        })
        .ok_or_else(|| PipelineError::Input {
            what: format!("the sources of {}", pipeline.path.display()),
            message: "--rebuild clones each row's repository with a source's clone_url, and the \
                      config declares no source"
                .into(),
        })?;
    let cache = pipeline.home_root().join(".cache").join("git");
    let mut checks = Vec::with_capacity(rows.len());
    for row in rows {
        let started = Instant::now();
        let check = |verdict, detail: String| RebuildCheck {
            instance_id: row.instance_id.to_string(),
            verdict,
            detail,
            seconds: started.elapsed().as_secs_f64(),
        };
        let Some(dockerfile) = &row.dockerfile else {
            checks.push(check(RebuildVerdict::NoDockerfile, String::new()));
            continue;
        };
        let url = kiln_github::clone_url(&template, &row.repo);
        let (context, submodules) =
            match checkout_tar(&cache, &row.repo, &url, &row.base_commit).await {
                Ok(checkout) => checkout,
                Err(why) => {
                    checks.push(check(RebuildVerdict::NoSource, why));
                    continue;
                }
            };
        // What the checkout lacked explains a failure.
        let failed = |verdict, detail: String| match &submodules {
            Some(missing) => check(verdict, format!("{missing}; {detail}")),
            None => check(verdict, detail),
        };
        let tag = format!("{}-rebuilt", row.image);
        let build = ImageBuild {
            tag: tag.clone(),
            dockerfile: dockerfile.clone(),
            context: Vec::new(),
            context_archive: context,
            labels: BTreeMap::from([
                (LABEL_MANAGED.to_string(), "1".to_string()),
                (LABEL_SCRATCH.to_string(), "1".to_string()),
            ]),
        };
        let mut sink = |_: &[u8]| {};
        match runtime.build_image(&build, &mut sink).await {
            Ok(()) => {}
            Err(RuntimeError::Build { message, .. }) => {
                checks.push(failed(
                    RebuildVerdict::BuildFailed,
                    kiln_core::session::tail(&message, 5),
                ));
                continue;
            }
            Err(other) => return Err(other.into()),
        }
        let outcome = evaluate_both(pipeline, &runtime, row, &tag, timeout, log_dir).await;
        let _ = runtime.remove_image(&tag).await;
        let problems = outcome?;
        checks.push(if problems.is_empty() {
            check(RebuildVerdict::Reproduced, String::new())
        } else {
            failed(RebuildVerdict::Differs, problems.join("; "))
        });
    }
    Ok(checks)
}

/// The repository at `commit` packed as the Dockerfile's build context (`testbed/`), and why
/// its submodules are missing when they could not be fetched.
async fn checkout_tar(
    cache: &Path,
    repo: &str,
    url: &str,
    commit: &str,
) -> Result<(Vec<u8>, Option<String>), String> {
    let (cache, repo, url, commit) = (
        cache.to_path_buf(),
        repo.to_string(),
        url.to_string(),
        commit.to_string(),
    );
    tokio::task::spawn_blocking(move || {
        // As launch checks it out: with its submodules where they can be fetched.
        kiln_launch::packed_checkout(
            &cache,
            &repo,
            &url,
            &commit,
            kiln_launch::dockerfile::CONTEXT_DIR,
        )
        .map(|packed| (packed.tar, packed.submodules))
    })
    .await
    .unwrap_or_else(|e| Err(format!("the checkout task failed: {e}")))
}

/// Evaluates `row` in image `tag` with no patch and with its gold patch; what ended otherwise
/// than the row says.
async fn evaluate_both(
    pipeline: &Pipeline,
    runtime: &Arc<dyn ContainerRuntime>,
    row: &ReleaseInstance,
    tag: &str,
    timeout: Duration,
    log_dir: &Path,
) -> Result<Vec<String>, PipelineError> {
    let instance = ReleaseInstance {
        image: tag.to_string(),
        image_digest: None,
        ..row.clone()
    };
    let mut problems = Vec::new();
    for (side, patch) in [("baseline", String::new()), ("gold", row.patch.clone())] {
        let request = EvaluateRequest {
            instance: instance.clone(),
            model_patch: Some(patch),
            docker: pipeline.docker.clone(),
            network: NetworkMode::None,
            timeout,
            log_dir: log_dir.join(row.instance_id.file_stem()).join(side),
            labels: BTreeMap::from([(LABEL_MANAGED.to_string(), "1".to_string())]),
        };
        let evaluation = kiln_validate::evaluate(Arc::clone(runtime), &request).await?;
        let reason = evaluation.reason.clone().unwrap_or_default();
        match side {
            "gold" if evaluation.resolution != Resolution::Resolved => problems.push(format!(
                "the gold patch does not resolve it ({:?}{}{})",
                evaluation.resolution,
                if reason.is_empty() { "" } else { ": " },
                reason
            )),
            "baseline" => {
                let passed = &evaluation.fail_to_pass_passed;
                let broken = &evaluation.pass_to_pass_failed;
                if !passed.is_empty() {
                    problems.push(format!(
                        "without the fix {} FAIL_TO_PASS test(s) pass, e.g. {}",
                        passed.len(),
                        passed[0]
                    ));
                }
                if !broken.is_empty() {
                    problems.push(format!(
                        "without the fix {} PASS_TO_PASS test(s) fail, e.g. {}",
                        broken.len(),
                        broken[0]
                    ));
                }
                if evaluation.resolution == Resolution::PatchApplyFailure
                    || evaluation.resolution == Resolution::InfraFailure
                {
                    problems.push(format!("the baseline run failed: {reason}"));
                }
            }
            _ => {}
        }
    }
    Ok(problems)
}
