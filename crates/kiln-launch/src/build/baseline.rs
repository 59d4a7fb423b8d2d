//! The baseline phase of an attempt: the environment committed, its tests run in a container of
//! their own and judged; a failure the rules know adds setup steps or changes the test command
//! and the baseline runs again; where no rule helps, the recipe and the agent take over.

use std::sync::Arc;

use kiln_core::{RuntimeError, Session};
use kiln_schema::{BuiltBy, EnvironmentRecord, FailureClass};

use super::work::{Attempt, Attempted, Work, short};
use crate::ecosystems;
use crate::fallback::{Stopped, fall_back};
use crate::repair::{self, Failed, Failing, Repair};
use crate::request::LaunchRequest;
use crate::steps::{Step, TestCommand};
use crate::verify::{BaselineRun, Failure, baseline, run_or_fail};

/// Commits the environment and runs its baseline until it counts, a repair fails, or no rule
/// knows the failure (then the recipe and the agent are tried). The environment is committed
/// before the baseline run, so that nothing the tests write (temporary files, caches, files in
/// the checkout) reaches the image that validation starts every run from.
///
/// # Errors
/// Engine failures only.
pub(super) async fn run_baseline(
    session: &mut Session,
    request: &LaunchRequest,
    record: &mut EnvironmentRecord,
    attempted: Attempted<'_>,
    work: &mut Work,
    step: &(dyn Fn(&str) + Sync),
) -> Result<Attempt, RuntimeError> {
    let runtime = Arc::clone(session.runtime());
    let rules = ecosystems::rules(attempted.ecosystem);
    step("commit image");
    let baseline_run = BaselineRun::new(request, attempted.spec, attempted.known);
    let mut leaving_out = LeavingOut::NotTried;
    loop {
        step("baseline tests");
        let ran = baseline(session, &baseline_run, record).await?;
        // A narrowed command on trial that did not work here (a pytest before 3.5 has no
        // --deselect, a run that stopped, or one that lost what the whole one had) brings the
        // commands before it back. A narrowed run whose tests fail as the whole one's did is
        // that failure, for the rules to repair.
        if matches!(leaving_out, LeavingOut::OnTrial { .. })
            && let LeavingOut::OnTrial {
                command,
                whole,
                counted,
            } = std::mem::replace(&mut leaving_out, LeavingOut::Given)
            && let Some(failure) = &ran.failure
            && (counted || ran.outcome.is_none() || failure.class != FailureClass::TestsFailing)
        {
            session.note(&format!(
                "# kiln: the test command that leaves out the tests that need a network did \
                 not work ({}); the whole command again",
                failure.class.as_str()
            ));
            record.tests_left_out.clear();
            work.test.replace(command, whole, record);
            continue;
        }
        // Tests that failed for want of a network would cost every validation run their
        // timeouts again, and count against the build they say nothing about: the command
        // leaves them out, and the baseline runs again to show the narrowed command works.
        let narrowed = (leaving_out == LeavingOut::NotTried)
            .then(|| narrowed(&attempted, work, record, &ran))
            .flatten();
        if let Some((test, whole, left)) = narrowed {
            step("baseline without the tests that need a network");
            leaving_out = LeavingOut::OnTrial {
                command: work.test.command.clone(),
                whole: work.test.whole.clone(),
                counted: ran.failure.is_none(),
            };
            record.tests_left_out = left;
            work.test.replace(test, whole, record);
            continue;
        }
        let (failure, outcome) = match (ran.failure, ran.outcome) {
            (None, _) => {
                // The listing runs with what the tests run before them (services, the CI's
                // variables, the tests left out).
                record.collect_command = attempted.plan.collect.as_ref().map(|collect| {
                    TestCommand {
                        env: work.test.command.env.clone(),
                        prelude: work.test.command.prelude.clone(),
                        ..collect.clone()
                    }
                    .render()
                });
                record.built_by = Some(if record.repairs.is_empty() {
                    BuiltBy::Rules
                } else {
                    BuiltBy::Repair
                });
                return Ok(Attempt::Done(None));
            }
            (Some(failure), Some(outcome)) => (failure, outcome),
            (Some(stopped), None) => {
                // The run stopped its container, or the environment was refused before any
                // commit: there is no output to repair by.
                runtime.remove_image(&request.image_tag).await?;
                return Ok(Attempt::Done(Some(stopped)));
            }
        };
        let test = work.test.command.clone();
        let failed = Failed {
            failing: Failing::Tests(&test),
            output: &outcome.output,
        };
        let found = work
            .may_repair(&outcome)
            .then(|| repair::find(&failed, &work.context, &rules, &work.tried))
            .flatten();
        // Where no rule helps, or the repair a rule gave failed, the recipe and the agent take
        // over from the failure that stands, in the same container.
        let (stands, tried) = match found {
            None => (failure, None),
            Some((rule, repair, matched)) => {
                work.record_repair(session, record, rule, &repair, &matched);
                match apply_test_repair(session, request, record, work, repair, failure, step)
                    .await?
                {
                    Repaired::Again => continue,
                    Repaired::Failed(stands, why) => (
                        stands,
                        Some(format!(
                            "the repair rule {} was tried and did not help: {why}",
                            rule.name
                        )),
                    ),
                    Repaired::Stopped(stopped) => {
                        runtime.remove_image(&request.image_tag).await?;
                        return Ok(Attempt::Done(Some(stopped)));
                    }
                }
            }
        };
        // The image of a failed launch is no environment.
        runtime.remove_image(&request.image_tag).await?;
        let stopped = Stopped {
            failure: stands,
            plan: &attempted.plan.name,
            language: attempted.plan.language,
            remaining: Vec::new(),
            spec: attempted.spec,
            known: attempted.known,
            tried,
        };
        let end = fall_back(session, request, record, stopped, step).await?;
        return Ok(Attempt::Done(end));
    }
}

/// The test command and the whole suite's without the tests `ran` read as failed for want of
/// a network, and the tests left out, when the run is judged by its tests (it counted, or too
/// few passed) and the ecosystem's runner can leave them out.
fn narrowed(
    attempted: &Attempted<'_>,
    work: &Work,
    record: &EnvironmentRecord,
    ran: &crate::verify::Baseline,
) -> Option<(TestCommand, Option<TestCommand>, Vec<String>)> {
    let judged_by_its_tests = ran
        .failure
        .as_ref()
        .is_none_or(|failure| failure.class == FailureClass::TestsFailing);
    if !judged_by_its_tests {
        return None;
    }
    let reported: Vec<&str> = record.baseline.keys().map(String::as_str).collect();
    let leave_out = |command: &TestCommand| {
        ecosystems::leave_out(
            attempted.ecosystem,
            command,
            &record.parser,
            &ran.offline,
            &reported,
        )
    };
    let (test, left) = leave_out(&work.test.command)?;
    // The whole suite's command leaves them out too, where its runner can.
    let whole = work
        .test
        .whole
        .as_ref()
        .map(|whole| leave_out(whole).map_or_else(|| whole.clone(), |(whole, _)| whole));
    Some((test, whole, left))
}

/// Where a launch is with leaving out the tests that failed for want of a network.
#[derive(PartialEq)]
enum LeavingOut {
    /// The baseline has not shown any yet.
    NotTried,
    /// The command runs without them; the commands before come back if that run fails.
    OnTrial {
        /// The test command before.
        command: TestCommand,
        /// The whole suite's command before.
        whole: Option<TestCommand>,
        /// Whether the run before counted as a working build.
        counted: bool,
    },
    /// Done, or given up: at most once per launch.
    Given,
}

/// What one test-phase repair leads to.
enum Repaired {
    /// Run the baseline again.
    Again,
    /// The repair did not apply (a kind the test phase cannot apply, or a step that exited
    /// non-zero, said how): the baseline's failure stands, and the recipe and the agent may
    /// take over.
    Failed(Failure, String),
    /// A repair step timed out or was killed: the attempt ends with its failure, as a setup
    /// step's would.
    Stopped(Failure),
}

/// Applies a test-phase repair: setup steps that run before the next commit (the baseline ran
/// in a container of its own, so this one is still what was committed), an environment
/// variable the next commit carries, or another test command.
async fn apply_test_repair(
    session: &mut Session,
    request: &LaunchRequest,
    record: &mut EnvironmentRecord,
    work: &mut Work,
    repair: Repair,
    failure: Failure,
    step: &(dyn Fn(&str) + Sync),
) -> Result<Repaired, RuntimeError> {
    let steps = match repair {
        Repair::Before(steps) => steps,
        Repair::Tests(test) => {
            work.test.set(test, record);
            Vec::new()
        }
        // Set in the container the next commit makes the image of (the session's
        // environment goes into the image), so the tests, and validation, run with it.
        Repair::Env(name, value) => {
            record.environment.insert(name, value);
            session.set_env(&record.environment);
            Vec::new()
        }
        _ => {
            return Ok(Repaired::Failed(
                failure,
                "its repair does not apply in the test phase".into(),
            ));
        }
    };
    for setup_step in steps {
        let command = Step::render(&setup_step);
        step(short(&command));
        let outcome = match run_or_fail(
            session,
            &command,
            request.settings.command_timeout,
            FailureClass::Build,
        )
        .await?
        {
            Ok(outcome) => outcome,
            Err(stopped) => return Ok(Repaired::Stopped(stopped)),
        };
        if outcome.exit_code != 0 {
            let tail: Vec<&str> = outcome.output.lines().rev().take(5).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            return Ok(Repaired::Failed(
                failure,
                format!(
                    "`{}` exited {}:\n{}",
                    short(&command),
                    outcome.exit_code,
                    tail.join("\n")
                ),
            ));
        }
        work.note_repair_output(record, &outcome.output);
        record.setup_commands.push(command);
    }
    Ok(Repaired::Again)
}
