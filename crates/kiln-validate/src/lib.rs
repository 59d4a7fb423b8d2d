//! The validate stage: which tests the gold patch fixes, measured on fresh containers.
//!
//! Each instance is run on both sides, `before` (base + test patch) and `after` (base + test
//! patch + gold patch), each side `repeats` times, every run in a fresh container from the
//! launch image with the network off by default. The rules of [`decide`] then give
//! FAIL_TO_PASS, PASS_TO_PASS, flaky tests and the reasons for rejection.

pub mod agreement;
pub mod decide;
pub mod evaluate;
pub mod gold;
pub mod harness;
pub mod run;

/// How validation applies a patch (the chain is kiln-core's: the host applies it too).
pub use kiln_core::apply as patch;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use kiln_core::config::{DockerSettings, ValidateSettings};
use kiln_core::{ContainerRuntime, Event, Removals, Reporter, RuntimeError};
use kiln_schema::{
    Candidate, EnvironmentRecord, FailureClass, TestStatus, ValidationRecord, ValidationStatus,
};

pub use decide::{Decision, RunResult, Side, decide};
pub use evaluate::{EvaluateRequest, Evaluation, Resolution, evaluate};
pub use run::{RunFailure, RunOutput, RunSpec, have_or_pull, run_tests};

/// Everything validation needs for one instance.
#[derive(Debug, Clone)]
pub struct ValidateRequest {
    /// The candidate (patches).
    pub candidate: Candidate,
    /// Its built environment.
    pub environment: EnvironmentRecord,
    /// Directory for this instance's validation logs.
    pub log_dir: PathBuf,
    /// Log directory as recorded in the row.
    pub log_dir_label: String,
    /// Labels for the containers.
    pub labels: BTreeMap<String, String>,
    /// Stage settings.
    pub settings: ValidateSettings,
    /// Container limits.
    pub docker: DockerSettings,
    /// Stage name, for progress events.
    pub stage: String,
    /// Where the containers' removals go: the next run need not wait for the last one's, the
    /// stage waits for all of them at its end.
    pub removals: Removals,
    /// Where the repository's history is: the patches are applied on the host first, to judge
    /// the gold patch by what it changes and to know what every run must hold.
    pub source: gold::Source,
}

/// An infrastructure failure that stops the stage; it is never written as a row.
#[derive(Debug, thiserror::Error)]
pub enum ValidateError {
    /// The engine went away or failed.
    #[error(transparent)]
    Engine(#[from] RuntimeError),
}

/// Validates one instance.
///
/// # Errors
/// [`ValidateError::Engine`] when the engine cannot be reached or fails; every failure of the
/// instance is a row.
pub async fn validate(
    runtime: Arc<dyn ContainerRuntime>,
    request: &ValidateRequest,
    reporter: &dyn Reporter,
) -> Result<ValidationRecord, ValidateError> {
    let started = Instant::now();
    let env = &request.environment;
    let network = request.settings.tests.for_repo(&env.repo);
    let repeats = usize::try_from(request.settings.repeats)
        .unwrap_or(1)
        .max(1);
    let mut record = ValidationRecord {
        instance_id: env.instance_id.clone(),
        status: ValidationStatus::Failed,
        failure_class: None,
        reason: None,
        FAIL_TO_PASS: Vec::new(),
        PASS_TO_PASS: Vec::new(),
        fail_to_pass_classes: BTreeMap::new(),
        flaky: BTreeMap::new(),
        pass_to_fail: Vec::new(),
        agreement: None,
        agreement_by_meaning: None,
        given_missing: Vec::new(),
        given_extra: Vec::new(),
        pass_to_pass_agreement: None,
        log_parser: None,
        log_parser_reason: None,
        harness_unread: Vec::new(),
        needs_network: Vec::new(),
        repeats: i64::try_from(repeats).unwrap_or(1),
        network: network.as_str().into(),
        runs: BTreeMap::new(),
        run_statuses: BTreeMap::new(),
        test_seconds: 0.0,
        total_seconds: 0.0,
        log_dir: request.log_dir_label.clone(),
    };
    let Some(tag) = env.image.clone() else {
        record.failure_class = Some(FailureClass::Infra);
        record.reason = Some("the environment has no image".into());
        return Ok(record);
    };
    // The image launch committed, by its id: a tag another dataset of the same name (or a
    // later launch) moved cannot change what runs here.
    let image = env.image_digest.clone().unwrap_or_else(|| tag.clone());
    // A gold patch that edits the tests judging it proves nothing, whatever the runs say. It is
    // judged by what it changes, applied on the host to the base commit.
    let effect = {
        let (source, candidate, language) = (
            request.source.clone(),
            request.candidate.clone(),
            env.language.clone(),
        );
        tokio::task::spawn_blocking(move || {
            gold::examine(
                &source,
                &candidate.repo,
                &candidate.base_commit,
                &candidate.test_patch,
                &candidate.patch,
                &language,
            )
        })
        .await
        .map_err(|e| ValidateError::Engine(RuntimeError::engine("examine the gold patch", e)))?
    };
    let effect = match effect {
        Ok(effect) => effect,
        Err((class, reason)) => {
            record.status = if matches!(
                class,
                FailureClass::GoldEditsTests | FailureClass::GoldWithoutCode
            ) {
                ValidationStatus::Rejected
            } else {
                ValidationStatus::Failed
            };
            record.failure_class = Some(class);
            record.reason = Some(reason);
            record.total_seconds = started.elapsed().as_secs_f64();
            return Ok(record);
        }
    };

    if !run::have_or_pull(runtime.as_ref(), &image, &tag).await? {
        record.failure_class = Some(FailureClass::Infra);
        record.reason = Some(format!(
            "the environment image {} is gone from the engine (and from its registry, if it names \
             one){}; launch the instance again (kiln stage <launch> --only {} --force)",
            tag,
            if image == tag {
                String::new()
            } else {
                format!(" (launch committed it as {image})")
            },
            env.instance_id
        ));
        return Ok(record);
    }
    let mut runs = Vec::new();
    let mut harness_maps = Vec::new();
    let mut offline = std::collections::BTreeSet::new();
    // Interleave the sides so that a slow drift of the machine affects both equally.
    for repeat in 1..=repeats {
        let base = (repeat == 1 && request.settings.base_run).then_some(Side::Base);
        for side in base.into_iter().chain([Side::Before, Side::After]) {
            reporter.report(Event::ItemStep {
                stage: request.stage.clone(),
                item: env.instance_id.to_string(),
                step: format!("{} run {repeat}/{repeats}", side.as_str()),
            });
            let patches = patches_of(side, &request.candidate);
            let spec = RunSpec {
                image: &image,
                patches,
                rebuild: &env.rebuild_commands,
                test_command: &env.test_command,
                parser: &env.parser,
                parser_script: env.parser_script.as_deref(),
                docker: &request.docker,
                network,
                timeout: request.settings.test_timeout,
                log: request
                    .log_dir
                    .join(format!("{}-{repeat}.log", side.as_str())),
                labels: &request.labels,
                removals: Some(&request.removals),
                harness_view: true,
                expected: Some({
                    let side = gold::side(&effect, &patches_of(side, &request.candidate));
                    kiln_core::checkout::Expected {
                        tree: &side.tree,
                        patched: &side.patched,
                        language: &env.language,
                    }
                }),
            };
            let output = match run_tests(Arc::clone(&runtime), &spec).await {
                Ok(output) => output,
                // The engine's failure is no result: the stage stops and a re-run retries.
                Err(RunFailure::Engine(e)) => return Err(ValidateError::Engine(e)),
                // New tests often use API the gold patch adds, so the test patch alone does
                // not compile: its tests are then absent before the fix (n2p), as in
                // Multi-SWE-bench. Only the `before` side may fail to build.
                Err(RunFailure::Item(FailureClass::Build, reason)) if side == Side::Before => {
                    let result = RunResult {
                        side,
                        repeat,
                        exit_code: 0,
                        statuses: kiln_schema::TestStatuses::new(),
                        parse_problems: Vec::new(),
                    };
                    record.runs.insert(
                        result.label(),
                        BTreeMap::from([("build".to_string(), format!("failed: {reason}"))]),
                    );
                    record
                        .run_statuses
                        .insert(result.label(), result.statuses.clone());
                    runs.push(result);
                    continue;
                }
                Err(RunFailure::Item(class, reason)) => {
                    record.failure_class = Some(class);
                    record.reason = Some(format!("{} run {repeat}: {reason}", side.as_str()));
                    record.total_seconds = started.elapsed().as_secs_f64();
                    return Ok(record);
                }
            };
            let result = RunResult {
                side,
                repeat,
                exit_code: output.exit_code,
                statuses: output.statuses.clone(),
                parse_problems: output.parse_problems.clone(),
            };
            record.test_seconds += output.test_seconds;
            offline.extend(output.offline.iter().cloned());
            record.runs.insert(result.label(), run_summary(&output));
            record.run_statuses.insert(result.label(), output.statuses);
            harness_maps.push((side, output.exit_code, output.harness));
            runs.push(result);
        }
    }

    let decision = decide(&runs);
    // A test that failed for want of a network in some run and is in neither list says
    // nothing about the patch; the row names it.
    record.needs_network = offline
        .into_iter()
        .filter(|t| {
            decision.fail_to_pass.binary_search(t).is_err()
                && decision.pass_to_pass.binary_search(t).is_err()
        })
        .collect();
    record.FAIL_TO_PASS = decision.fail_to_pass;
    record.PASS_TO_PASS = decision.pass_to_pass;
    record.fail_to_pass_classes = decision.classes;
    record.flaky = decision.flaky;
    record.pass_to_fail = decision.pass_to_fail;
    let candidate = &request.candidate;
    if let Some(agreement) = agreement::compare(&candidate.given_fail_to_pass, &record.FAIL_TO_PASS)
    {
        record.agreement = Some(agreement.exact);
        record.agreement_by_meaning = Some(agreement.by_meaning);
        record.given_missing = agreement.missing;
        record.given_extra = agreement.extra;
    }
    record.pass_to_pass_agreement =
        agreement::compare(&candidate.given_pass_to_pass, &record.PASS_TO_PASS)
            .map(|a| a.by_meaning);
    match decision.rejection {
        None => {
            record.status = ValidationStatus::Validated;
            let harness_runs: Vec<harness::HarnessRun<'_>> = harness_maps
                .iter()
                .map(|(side, exit_code, maps)| harness::HarnessRun {
                    side: *side,
                    exit_code: *exit_code,
                    maps,
                })
                .collect();
            match harness::choose_log_parser(
                &env.parser,
                &harness_runs,
                &record.FAIL_TO_PASS,
                &record.PASS_TO_PASS,
            ) {
                Ok(choice) => {
                    record.log_parser = Some(choice.parser.to_string());
                    record.harness_unread = choice.unread;
                }
                Err(reason) => record.log_parser_reason = Some(reason),
            }
        }
        Some((class, mut reason)) => {
            if class == FailureClass::NoFailToPass && !record.needs_network.is_empty() {
                reason.push_str(&format!(
                    "; {} test(s) failed for want of a network (needs-network; the tests ran with network `{}`): {}",
                    record.needs_network.len(),
                    record.network,
                    decide::preview(&record.needs_network)
                ));
            }
            record.status = ValidationStatus::Rejected;
            record.failure_class = Some(class);
            record.reason = Some(reason);
        }
    }
    record.total_seconds = started.elapsed().as_secs_f64();
    Ok(record)
}

/// The patches a side's runs apply, by name.
fn patches_of(side: Side, candidate: &Candidate) -> Vec<(&'static str, &str)> {
    match side {
        Side::Base => vec![],
        Side::Before => vec![("test", candidate.test_patch.as_str())],
        Side::After => vec![
            ("test", candidate.test_patch.as_str()),
            ("gold", candidate.patch.as_str()),
        ],
    }
}

/// A run's summary for the `runs` column.
fn run_summary(output: &RunOutput) -> BTreeMap<String, String> {
    let count = |s: TestStatus| {
        output
            .statuses
            .values()
            .filter(|v| **v == s)
            .count()
            .to_string()
    };
    BTreeMap::from([
        ("exit_code".to_string(), output.exit_code.to_string()),
        ("passed".to_string(), count(TestStatus::Pass)),
        ("failed".to_string(), count(TestStatus::Fail)),
        ("errors".to_string(), count(TestStatus::Error)),
        ("skipped".to_string(), count(TestStatus::Skip)),
        ("patch_methods".to_string(), output.patch_methods.join(",")),
        ("seconds".to_string(), format!("{:.2}", output.test_seconds)),
    ])
}
