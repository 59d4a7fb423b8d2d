//! Evaluation of a predicted patch against a released instance (SWE-bench's harness job).
//!
//! One run in a fresh container from the instance's image: the test patch, then the predicted
//! patch, the rebuild commands, the test command. The instance is resolved when every
//! FAIL_TO_PASS test passes and no PASS_TO_PASS test fails; a PASS_TO_PASS test missing from the
//! log does not count against the patch (it is reported). A run whose exit code contradicts its
//! parsed statuses (a patch printing fake PASSED lines) resolves nothing.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kiln_core::config::DockerSettings;
use kiln_core::{ContainerRuntime, NetworkMode, RuntimeError};
use kiln_schema::{FailureClass, ReleaseInstance, TestStatus};
use serde::Serialize;

use crate::decide::{RunResult, Side};
use crate::run::{RunFailure, RunSpec, run_tests};

/// How a prediction fared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Resolution {
    /// Every FAIL_TO_PASS test passes and no PASS_TO_PASS test fails.
    Resolved,
    /// Some but not all FAIL_TO_PASS tests pass, and no PASS_TO_PASS test fails.
    Partial,
    /// Anything else the patch is answerable for: tests still failing, a broken build, a
    /// timeout, an invalid run, no prediction.
    Unresolved,
    /// The predicted patch applies with none of the methods.
    PatchApplyFailure,
    /// The instance's image is missing; the result says nothing about the patch.
    InfraFailure,
}

impl Resolution {
    /// The kebab-case name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Resolved => "resolved",
            Self::Partial => "partial",
            Self::Unresolved => "unresolved",
            Self::PatchApplyFailure => "patch-apply-failure",
            Self::InfraFailure => "infra-failure",
        }
    }
}

/// One instance to evaluate.
#[derive(Debug, Clone)]
pub struct EvaluateRequest {
    /// The released instance.
    pub instance: ReleaseInstance,
    /// The predicted patch; `None` when the predictions do not name the instance.
    pub model_patch: Option<String>,
    /// Container limits.
    pub docker: DockerSettings,
    /// Network of the test container.
    pub network: NetworkMode,
    /// Timeout of the test command.
    pub timeout: Duration,
    /// Directory for the run's log.
    pub log_dir: PathBuf,
    /// Container labels.
    pub labels: BTreeMap<String, String>,
}

/// The report of one instance.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Evaluation {
    /// Instance id.
    pub instance_id: String,
    /// The verdict.
    pub resolution: Resolution,
    /// Why, when not resolved.
    pub reason: Option<String>,
    /// FAIL_TO_PASS tests that pass.
    pub fail_to_pass_passed: Vec<String>,
    /// FAIL_TO_PASS tests that do not pass (failing, erroring, skipped or absent).
    pub fail_to_pass_failed: Vec<String>,
    /// PASS_TO_PASS tests that fail or error.
    pub pass_to_pass_failed: Vec<String>,
    /// PASS_TO_PASS tests not in the log (not counted against the patch).
    pub pass_to_pass_missing: Vec<String>,
    /// How each patch applied.
    pub patch_methods: Vec<String>,
    /// Exit code of the test command, when it ran.
    pub exit_code: Option<i64>,
    /// Wall seconds.
    pub seconds: f64,
}

/// Evaluates one prediction.
///
/// # Errors
/// An engine that cannot be reached or fails; every failure of the prediction (and a missing
/// image) is part of the [`Evaluation`].
pub async fn evaluate(
    runtime: Arc<dyn ContainerRuntime>,
    request: &EvaluateRequest,
) -> Result<Evaluation, RuntimeError> {
    let started = Instant::now();
    let instance = &request.instance;
    let mut evaluation = Evaluation {
        instance_id: instance.instance_id.to_string(),
        resolution: Resolution::Unresolved,
        reason: None,
        fail_to_pass_passed: Vec::new(),
        fail_to_pass_failed: fail_to_pass(instance),
        pass_to_pass_failed: Vec::new(),
        pass_to_pass_missing: Vec::new(),
        patch_methods: Vec::new(),
        exit_code: None,
        seconds: 0.0,
    };
    let Some(model_patch) = request.model_patch.as_deref() else {
        evaluation.reason = Some("no prediction for this instance".into());
        return Ok(evaluation);
    };
    // The image the row recorded, by its digest where it has one (pulled from the registry its
    // name is on, when the engine lacks it).
    let image = instance
        .image_digest
        .clone()
        .unwrap_or_else(|| instance.image.clone());
    if !crate::run::have_or_pull(runtime.as_ref(), &image, &instance.image).await? {
        evaluation.resolution = Resolution::InfraFailure;
        evaluation.reason = Some(format!(
            "the environment image {} is not on the engine{}, nor on a registry its name is on",
            instance.image,
            if image == instance.image {
                String::new()
            } else {
                format!(" as the recorded {image}")
            }
        ));
        evaluation.seconds = started.elapsed().as_secs_f64();
        return Ok(evaluation);
    }
    let test_command = instance.test_command();
    let spec = RunSpec {
        image: &image,
        patches: vec![
            ("test", instance.test_patch.as_str()),
            ("model", model_patch),
        ],
        rebuild: &instance.rebuild_cmds,
        test_command: &test_command,
        parser: &instance.parser,
        parser_script: instance.parser_script.as_deref(),
        docker: &request.docker,
        network: request.network,
        timeout: request.timeout,
        log: request.log_dir.join("evaluate.log"),
        labels: &request.labels,
        removals: None,
        harness_view: false,
        expected: None,
        cpu: None,
    };
    let result = run_tests(runtime, &spec).await;
    evaluation.seconds = started.elapsed().as_secs_f64();
    let output = match result {
        Ok(output) => output,
        // A release naming an image this engine does not have says nothing about the patch;
        // every other engine failure stops the evaluation, as it stops a stage.
        Err(RunFailure::Engine(e @ RuntimeError::ImageNotFound(_))) => {
            evaluation.resolution = Resolution::InfraFailure;
            evaluation.reason = Some(format!("failed to {e}"));
            return Ok(evaluation);
        }
        Err(RunFailure::Engine(e)) => return Err(e),
        Err(RunFailure::Item(FailureClass::PatchApply, reason)) => {
            evaluation.resolution = Resolution::PatchApplyFailure;
            evaluation.reason = Some(reason);
            return Ok(evaluation);
        }
        Err(RunFailure::Item(class, reason)) => {
            evaluation.reason = Some(format!("{class}: {reason}"));
            return Ok(evaluation);
        }
    };
    evaluation.exit_code = Some(output.exit_code);
    evaluation.patch_methods.clone_from(&output.patch_methods);
    let run = RunResult {
        side: Side::After,
        repeat: 1,
        exit_code: output.exit_code,
        statuses: output.statuses,
        parse_problems: output.parse_problems,
    };
    let status = |test: &String| run.statuses.get(test).copied();
    let (passed, failed): (Vec<String>, Vec<String>) = fail_to_pass(instance)
        .into_iter()
        .partition(|t| status(t) == Some(TestStatus::Pass));
    evaluation.fail_to_pass_passed = passed;
    evaluation.fail_to_pass_failed = failed;
    // kiln reads every test, the ones the harness cannot read too.
    for test in instance
        .PASS_TO_PASS
        .iter()
        .chain(instance.PASS_TO_PASS_UNGRADED.iter())
    {
        match status(test) {
            Some(TestStatus::Fail | TestStatus::Error) => {
                evaluation.pass_to_pass_failed.push(test.clone())
            }
            None => evaluation.pass_to_pass_missing.push(test.clone()),
            Some(TestStatus::Pass | TestStatus::Skip) => {}
        }
    }
    if let Some(reason) = run.invalid_reason() {
        evaluation.reason = Some(reason);
        return Ok(evaluation);
    }
    let p2p_intact = evaluation.pass_to_pass_failed.is_empty();
    evaluation.resolution = match (
        evaluation.fail_to_pass_failed.is_empty(),
        evaluation.fail_to_pass_passed.is_empty(),
    ) {
        (true, _) if p2p_intact => Resolution::Resolved,
        (false, false) if p2p_intact => Resolution::Partial,
        _ => Resolution::Unresolved,
    };
    if evaluation.resolution != Resolution::Resolved {
        evaluation.reason = Some(format!(
            "{} of {} FAIL_TO_PASS pass; {} PASS_TO_PASS fail",
            evaluation.fail_to_pass_passed.len(),
            evaluation.fail_to_pass_passed.len() + evaluation.fail_to_pass_failed.len(),
            evaluation.pass_to_pass_failed.len()
        ));
    }
    Ok(evaluation)
}

/// Every FAIL_TO_PASS test of a release row: those the harness grades and those it cannot read.
fn fail_to_pass(instance: &ReleaseInstance) -> Vec<String> {
    instance
        .FAIL_TO_PASS
        .iter()
        .chain(instance.FAIL_TO_PASS_UNGRADED.iter())
        .cloned()
        .collect()
}
