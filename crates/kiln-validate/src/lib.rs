//! The validate stage: which tests the gold patch fixes, measured on fresh containers.
//!
//! Each instance is run on both sides, `before` (base + test patch) and `after` (base + test
//! patch + gold patch), each side `repeats` times, every run in a fresh container from the
//! launch image with the network off by default. The rules of [`decide`] then give
//! FAIL_TO_PASS, PASS_TO_PASS, flaky tests and the reasons for rejection.

pub mod decide;
pub mod patch;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kiln_core::config::{DockerSettings, ValidateSettings};
use kiln_core::runtime::Limits;
use kiln_core::{
    ContainerRuntime, ContainerSpec, Event, NetworkMode, Reporter, RuntimeError, Session,
};
use kiln_schema::{Candidate, EnvironmentRecord, FailureClass, TestStatus, ValidationRecord};

pub use decide::{Decision, RunResult, Side, decide};

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
}

/// An infrastructure failure that stops the stage.
#[derive(Debug, thiserror::Error)]
pub enum ValidateError {
    /// The engine went away.
    #[error(transparent)]
    Engine(#[from] RuntimeError),
}

/// Where patches are put inside the container.
const PATCH_DIR: &str = "/tmp/kiln";

/// Validates one instance.
///
/// # Errors
/// [`ValidateError::Engine`] when the engine cannot be reached; every other failure is a row.
pub async fn validate(
    runtime: Arc<dyn ContainerRuntime>,
    request: &ValidateRequest,
    reporter: &dyn Reporter,
) -> Result<ValidationRecord, ValidateError> {
    let started = Instant::now();
    let env = &request.environment;
    let network = if request.settings.network == "bridge"
        || request
            .settings
            .network_repos
            .iter()
            .any(|r| r == &env.repo)
    {
        NetworkMode::Bridge
    } else {
        NetworkMode::None
    };
    let repeats = usize::try_from(request.settings.repeats)
        .unwrap_or(1)
        .max(1);
    let mut record = ValidationRecord {
        instance_id: env.instance_id.clone(),
        status: "failed".into(),
        failure_class: None,
        reason: None,
        FAIL_TO_PASS: Vec::new(),
        PASS_TO_PASS: Vec::new(),
        fail_to_pass_classes: BTreeMap::new(),
        flaky: BTreeMap::new(),
        pass_to_fail: Vec::new(),
        repeats: i64::try_from(repeats).unwrap_or(1),
        network: network.as_str().into(),
        runs: BTreeMap::new(),
        run_statuses: BTreeMap::new(),
        test_seconds: 0.0,
        total_seconds: 0.0,
        log_dir: request.log_dir_label.clone(),
    };
    let Some(image) = env.image.clone() else {
        record.failure_class = Some(FailureClass::Infra.as_str().into());
        record.reason = Some("the environment has no image".into());
        return Ok(record);
    };

    let mut runs = Vec::new();
    // Interleave the sides so that a slow drift of the machine affects both equally.
    for repeat in 1..=repeats {
        for side in [Side::Before, Side::After] {
            reporter.report(Event::ItemStep {
                stage: request.stage.clone(),
                item: env.instance_id.clone(),
                step: format!("{} run {repeat}/{repeats}", side.as_str()),
            });
            let run =
                match one_run(Arc::clone(&runtime), request, &image, network, side, repeat).await {
                    Ok(run) => run,
                    Err(RunFailure::Engine(RuntimeError::Unreachable { endpoint, message })) => {
                        return Err(ValidateError::Engine(RuntimeError::Unreachable {
                            endpoint,
                            message,
                        }));
                    }
                    Err(RunFailure::Engine(other)) => {
                        record.failure_class = Some(FailureClass::Infra.as_str().into());
                        record.reason = Some(other.to_string());
                        record.total_seconds = started.elapsed().as_secs_f64();
                        return Ok(record);
                    }
                    Err(RunFailure::Item(class, reason)) => {
                        record.failure_class = Some(class.as_str().into());
                        record.reason = Some(reason);
                        record.total_seconds = started.elapsed().as_secs_f64();
                        return Ok(record);
                    }
                };
            record.test_seconds += run.seconds;
            record.runs.insert(run.result.label(), run.summary());
            record
                .run_statuses
                .insert(run.result.label(), run.result.statuses.clone());
            runs.push(run.result);
        }
    }

    let decision = decide(&runs);
    record.FAIL_TO_PASS = decision.fail_to_pass;
    record.PASS_TO_PASS = decision.pass_to_pass;
    record.fail_to_pass_classes = decision.classes;
    record.flaky = decision.flaky;
    record.pass_to_fail = decision.pass_to_fail;
    match decision.rejection {
        None => record.status = "validated".into(),
        Some((class, reason)) => {
            record.status = "rejected".into();
            record.failure_class = Some(class.as_str().into());
            record.reason = Some(reason);
        }
    }
    record.total_seconds = started.elapsed().as_secs_f64();
    Ok(record)
}

/// One finished run with its bookkeeping.
struct Run {
    result: RunResult,
    seconds: f64,
    patch_methods: Vec<String>,
}

impl Run {
    fn summary(&self) -> BTreeMap<String, String> {
        let count = |s: TestStatus| {
            self.result
                .statuses
                .values()
                .filter(|v| **v == s)
                .count()
                .to_string()
        };
        BTreeMap::from([
            ("exit_code".to_string(), self.result.exit_code.to_string()),
            ("passed".to_string(), count(TestStatus::Pass)),
            ("failed".to_string(), count(TestStatus::Fail)),
            ("errors".to_string(), count(TestStatus::Error)),
            ("skipped".to_string(), count(TestStatus::Skip)),
            ("patch_methods".to_string(), self.patch_methods.join(",")),
            ("seconds".to_string(), format!("{:.2}", self.seconds)),
        ])
    }
}

enum RunFailure {
    Engine(RuntimeError),
    Item(FailureClass, String),
}

impl From<RuntimeError> for RunFailure {
    fn from(e: RuntimeError) -> Self {
        Self::Engine(e)
    }
}

async fn one_run(
    runtime: Arc<dyn ContainerRuntime>,
    request: &ValidateRequest,
    image: &str,
    network: NetworkMode,
    side: Side,
    repeat: usize,
) -> Result<Run, RunFailure> {
    let env = &request.environment;
    let timeout = request.settings.test_timeout;
    let spec = ContainerSpec {
        image: image.to_string(),
        env: Vec::new(),
        labels: request.labels.clone(),
        limits: Limits {
            memory_bytes: request.docker.memory_bytes,
            cpus: request.docker.cpus,
            pids: request.docker.pids,
        },
        network,
        workdir: Some("/testbed".into()),
        max_lifetime: timeout * 2 + Duration::from_secs(600),
    };
    let log = request
        .log_dir
        .join(format!("{}-{repeat}.log", side.as_str()));
    let mut session = Session::start(runtime, &spec, &log).await?;
    let result = run_in(&mut session, request, side, repeat, timeout).await;
    let closed = session.close().await;
    let run = result?;
    closed?;
    let _ = env;
    Ok(run)
}

async fn run_in(
    session: &mut Session,
    request: &ValidateRequest,
    side: Side,
    repeat: usize,
    timeout: Duration,
) -> Result<Run, RunFailure> {
    let mut patches = vec![("test", request.candidate.test_patch.as_str())];
    if side == Side::After {
        patches.push(("gold", request.candidate.patch.as_str()));
    }
    let mut patch_methods = Vec::new();
    for (name, text) in patches {
        if text.trim().is_empty() {
            continue;
        }
        let path = format!("{PATCH_DIR}/{name}.patch");
        session.write_file(&path, text.as_bytes()).await?;
        match patch::apply(session, &path).await? {
            Some(method) => patch_methods.push(format!("{name}:{}", method.as_str())),
            None => {
                return Err(RunFailure::Item(
                    FailureClass::PatchApply,
                    format!(
                        "the {name} patch applies with none of git apply, git apply --3way, patch --fuzz"
                    ),
                ));
            }
        }
    }
    for command in &request.environment.rebuild_commands {
        let outcome = session.run(command, timeout).await?;
        if outcome.exit_code != 0 {
            return Err(RunFailure::Item(
                FailureClass::Build,
                format!(
                    "rebuild command `{command}` exited {} on the {} side",
                    outcome.exit_code,
                    side.as_str()
                ),
            ));
        }
    }
    let outcome = session
        .run(&request.environment.test_command, timeout)
        .await?;
    if outcome.timed_out {
        return Err(RunFailure::Item(
            FailureClass::Timeout,
            format!(
                "the {} run {repeat} ran past {}s",
                side.as_str(),
                timeout.as_secs()
            ),
        ));
    }
    if outcome.oom_killed {
        return Err(RunFailure::Item(
            FailureClass::Oom,
            format!("the {} run {repeat} ran out of memory", side.as_str()),
        ));
    }
    let parsed = kiln_testlog::parse(&request.environment.parser, &outcome.output)
        .map_err(|e| RunFailure::Item(FailureClass::TestRun, e.to_string()))?;
    Ok(Run {
        result: RunResult {
            side,
            repeat,
            exit_code: outcome.exit_code,
            statuses: parsed.statuses.clone(),
            parse_problems: parsed.problems.clone(),
        },
        seconds: outcome.duration.as_secs_f64(),
        patch_methods,
    })
}
