//! What decides a launch: a command run with its failure kept as a row, and the baseline run:
//! the container committed, the tests run, their output read as the row says
//! ([`crate::output`]) and judged. The launch loop and the launch agent share them, so an agent's build is
//! held to the rules' contract.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kiln_core::session::tail;
use kiln_core::{ContainerSpec, ExecOutcome, RuntimeError, Session};
use kiln_schema::{EnvironmentRecord, FailureClass, TestStatus};
use kiln_testlog::ParsedLog;

use crate::environment::{self, Known};
use crate::request::LaunchRequest;

/// How a launch attempt ended, before it is written as a row.
pub(crate) struct Failure {
    pub(crate) class: FailureClass,
    pub(crate) command: Option<String>,
    pub(crate) log_tail: String,
    /// The lines of the whole log that name the error ([`crate::classify::deciding_errors`]).
    pub(crate) error_lines: Vec<String>,
}

impl Failure {
    pub(crate) fn new(class: FailureClass, command: Option<&str>, log: &str) -> Self {
        Self {
            class,
            command: command.map(str::to_string),
            log_tail: tail(log, 40),
            error_lines: crate::classify::deciding_errors(log),
        }
    }
}

/// Runs `command` in the session. A container the command itself stopped is a failure of the
/// item (of `class`, or `disk` when it wrote past the container's bound); every other engine
/// error stays an error, which stops the stage.
pub(crate) async fn run_or_fail(
    session: &mut Session,
    command: &str,
    timeout: Duration,
    class: FailureClass,
) -> Result<Result<ExecOutcome, Failure>, RuntimeError> {
    // The baseline's report is parsed whole, with the room validation gives it; a setup
    // command's output only feeds repair signatures and the log tail.
    let cap = if class == FailureClass::TestRun {
        kiln_core::session::TEST_OUTPUT_CAP
    } else {
        1 << 20
    };
    match session.run_capped(command, timeout, cap).await {
        Ok(outcome) => Ok(Ok(outcome)),
        Err(e @ RuntimeError::ContainerStopped { .. }) => Ok(Err(Failure::new(
            class,
            Some(command),
            &format!("failed to {e}"),
        ))),
        Err(e @ RuntimeError::DiskExceeded { .. }) => Ok(Err(Failure::new(
            FailureClass::Disk,
            Some(command),
            &format!("failed to {e}"),
        ))),
        Err(e) => Err(e),
    }
}

/// Judges the baseline run from its outcome and its output as read
/// ([`crate::output::read_output`]), and writes the statuses into the record; `Some` when the
/// run does not count as a working build.
fn judge_tests(
    outcome: &ExecOutcome,
    parsed: Result<ParsedLog, String>,
    record: &mut EnvironmentRecord,
    min_pass_ratio: f64,
) -> Option<Failure> {
    let command = Some(record.test_command.as_str());
    if outcome.timed_out {
        return Some(Failure::new(
            FailureClass::Timeout,
            command,
            &outcome.output,
        ));
    }
    if outcome.oom_killed {
        return Some(Failure::new(FailureClass::Oom, command, &outcome.output));
    }
    let parsed = match parsed {
        Ok(parsed) => parsed,
        Err(why) => {
            let mut log = tail(&outcome.output, 30);
            log.push_str(&format!("\n[kiln] {why}"));
            return Some(Failure::new(FailureClass::TestRun, command, &log));
        }
    };
    record.baseline = parsed.statuses.clone();
    let passed = parsed.count(TestStatus::Pass);
    let failed = parsed.count(TestStatus::Fail) + parsed.count(TestStatus::Error);
    record.baseline_passed = i64::try_from(passed).unwrap_or(i64::MAX);
    record.baseline_failed = i64::try_from(failed).unwrap_or(i64::MAX);
    if parsed.statuses.is_empty() {
        // pytest exits 5 when it collected nothing.
        let class = if outcome.exit_code == 5 {
            FailureClass::NoTests
        } else {
            FailureClass::TestRun
        };
        return Some(Failure::new(class, command, &outcome.output));
    }
    let ran = passed + failed;
    let ratio = if ran == 0 {
        0.0
    } else {
        passed as f64 / ran as f64
    };
    if ratio < min_pass_ratio {
        let mut log = outcome.output.clone();
        log.push_str(&format!(
            "\n[kiln] {passed} of {ran} tests passed, below the required share of {min_pass_ratio}"
        ));
        return Some(Failure::new(FailureClass::TestsFailing, command, &log));
    }
    None
}

/// Where a baseline run's image goes, where its tests run and how the run is judged.
pub(crate) struct BaselineRun<'a> {
    request: &'a LaunchRequest,
    /// The image's labels.
    labels: BTreeMap<String, String>,
    /// The spec of the launch's container (the tests and a parser script run from the image
    /// with it, on the tests' network).
    spec: &'a ContainerSpec,
    /// Log of a parser script's run.
    parser_log: PathBuf,
    /// The commit's tree and what may change in it: the container's checkout is checked
    /// against it before the commit.
    known: &'a Known,
}

impl<'a> BaselineRun<'a> {
    /// The baseline run of `request`, whose setup ran in a container made from `spec` on a
    /// checkout `known` describes.
    pub(crate) fn new(
        request: &'a LaunchRequest,
        spec: &'a ContainerSpec,
        known: &'a Known,
    ) -> Self {
        Self {
            request,
            labels: request.image_labels(),
            spec,
            parser_log: request.log_dir.join("parser.log"),
            known,
        }
    }
}

/// Checks what the environment left in the checkout ([`crate::environment`]), then commits the
/// container to the environment image, runs the record's test command in a
/// container of its own from that image, on the tests' network (none unless the stage names
/// the repository), and judges it: nothing the tests write reaches the image or the setup
/// container, and the tests run as validation will run them. The failure, if any, and the
/// run's outcome when it finished; when built, the record has its statuses, its image and its
/// Dockerfile. The image of a run that does not count is left to the caller.
///
/// # Errors
/// Engine failures only.
pub(crate) async fn baseline(
    session: &mut Session,
    run: &BaselineRun<'_>,
    record: &mut EnvironmentRecord,
) -> Result<Baseline, RuntimeError> {
    let settings = &run.request.settings;
    // Before the commit: an environment that changed the checkout is no environment, whoever
    // built it, and nothing of it becomes an image.
    let runtime = Arc::clone(session.runtime());
    let files = match environment::check(runtime.as_ref(), session.id(), run.known).await? {
        Ok(files) => files,
        Err((class, reason)) => {
            session.note(&format!(
                "# kiln: the checkout check refused the environment: {reason}"
            ));
            return Ok(Baseline::stopped(Failure::new(class, None, &reason)));
        }
    };
    let image_id = session.commit(&run.request.image_tag, &run.labels).await?;
    // By the id the commit gave, as validation will run it: a tag can move meanwhile.
    let image = ContainerSpec {
        image: if image_id.is_empty() {
            run.request.image_tag.clone()
        } else {
            image_id.clone()
        },
        network: run.request.test_network(),
        ..run.spec.clone()
    };
    let mut tests = session.sibling(&image).await?;
    tests.set_phase(kiln_core::CpuPhase::Baseline);
    let cpu = tests.charged();
    tests.note(&format!(
        "# baseline tests, network {}",
        image.network.as_str()
    ));
    let result = run_or_fail(
        &mut tests,
        &record.test_command,
        settings.test_timeout,
        FailureClass::TestRun,
    )
    .await;
    tests.close_later(&run.request.removals);
    let outcome = match result? {
        Ok(outcome) => outcome,
        Err(failure) => return Ok(Baseline::stopped(failure)),
    };
    record.test_seconds = outcome.duration.as_secs_f64();
    let parsed = crate::output::read_output(
        &runtime,
        record,
        &image,
        &outcome,
        &run.parser_log,
        cpu.as_ref().map(|(ledger, phase)| (ledger, *phase)),
    )
    .await?;
    let offline = parsed
        .as_ref()
        .map(|parsed| parsed.offline.iter().cloned().collect())
        .unwrap_or_default();
    let failure = judge_tests(&outcome, parsed, record, settings.min_pass_ratio);
    if failure.is_none() {
        record.environment_files = files;
        record.image = Some(run.request.image_tag.clone());
        record.image_digest = Some(image_id).filter(|id| !id.is_empty());
        record.dockerfile = Some(crate::dockerfile::dockerfile(record));
    }
    Ok(Baseline {
        failure,
        outcome: Some(outcome),
        offline,
    })
}

/// What a baseline run gave.
pub(crate) struct Baseline {
    /// Why the run does not count as a working build, if it does not.
    pub(crate) failure: Option<Failure>,
    /// The run's outcome, when it finished (`None`: the checkout check refused the
    /// environment, or the run stopped its container).
    pub(crate) outcome: Option<ExecOutcome>,
    /// The tests the parser read as failed for want of a network
    /// ([`kiln_testlog::ParsedLog::offline`]), sorted.
    pub(crate) offline: Vec<String>,
}

impl Baseline {
    fn stopped(failure: Failure) -> Self {
        Self {
            failure: Some(failure),
            outcome: None,
            offline: Vec::new(),
        }
    }
}
