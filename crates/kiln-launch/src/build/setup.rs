//! The setup phase of an attempt: the plan's steps in turn, each failure matched against its
//! ecosystem's repair rules (each rule tried at most once), the repair applied to the steps
//! still to run; where no rule helps, the recipe and the agent take over.

use std::time::Instant;

use kiln_core::{CpuPhase, Session};
use kiln_schema::{EnvironmentRecord, FailureClass};

use super::work::{Attempt, Attempted, Work, short};
use crate::classify::classify_setup;
use crate::debian::Suite;
use crate::ecosystems;
use crate::fallback::{Stopped, fall_back};
use crate::package_index;
use crate::repair::{self, Failed, Failing, Repair};
use crate::request::LaunchRequest;
use crate::steps::Step;
use crate::verify::{Failure, run_or_fail};

/// Notes the plan's first steps, which the system layer the container started from ran, as
/// done: they are in the row, not run again.
pub(super) fn skip_layered(
    session: &mut Session,
    record: &mut EnvironmentRecord,
    work: &mut Work,
    layered: Option<(&str, usize)>,
) {
    let Some((tag, count)) = layered else {
        return;
    };
    for done in work.queue.drain(..count) {
        let command = done.render();
        session.note(&format!(
            "# in the system layer {tag} (not run again): {}",
            short(&command)
        ));
        record.setup_commands.push(command);
    }
}

/// Names in the row the hinted packages of `setup`'s [`Step::AptHints`] steps that are not
/// installed in the container, as dpkg says once setup is done.
///
/// # Errors
/// Engine failures only.
pub(super) async fn note_skipped_hints(
    session: &mut Session,
    record: &mut EnvironmentRecord,
    setup: &[Step],
) -> Result<(), kiln_core::RuntimeError> {
    for check in setup.iter().filter_map(Step::hints_check) {
        let outcome = session
            .run(&check, std::time::Duration::from_secs(60))
            .await?;
        let skipped = Step::skipped_hints(&outcome.output);
        if !skipped.is_empty() {
            record.version_reason.push_str(&format!(
                "; hint packages not installed (not in the suite, or failing to install): {}",
                skipped.join(" ")
            ));
        }
    }
    Ok(())
}

/// Runs the setup steps of `work` in turn, repairing what the rules know; `Ok(None)` when every
/// step ran, else how the attempt ended (a failure no rule, recipe or agent mended, a restart
/// on another interpreter, a registry that did not answer).
///
/// # Errors
/// Engine failures only.
pub(super) async fn run_setup(
    session: &mut Session,
    request: &LaunchRequest,
    record: &mut EnvironmentRecord,
    attempted: Attempted<'_>,
    work: &mut Work,
    step: &(dyn Fn(&str) + Sync),
) -> Result<Option<Attempt>, kiln_core::RuntimeError> {
    let rules = ecosystems::rules(attempted.ecosystem);
    let started = Instant::now();
    let mut skipped = 0;
    let end = loop {
        let Some(setup_step) = work.queue.pop_front() else {
            break None;
        };
        let command = setup_step.render();
        if let Some((source, changed)) = attempted.reused.and_then(|r| r.skip)
            && source.setup_commands.contains(&command)
            && setup_step.unaffected_by(changed)
        {
            session.note(&format!(
                "# reuse: not run again ({}'s environment ran it; none of its inputs changed): {}",
                source.instance_id,
                short(&command)
            ));
            record.setup_commands.push(command);
            skipped += 1;
            continue;
        }
        step(short(&command));
        session.set_phase(if work.rebuild.contains(&setup_step) {
            CpuPhase::Compile
        } else {
            CpuPhase::Setup
        });
        let outcome = match run_or_fail(
            session,
            &command,
            request.settings.command_timeout,
            FailureClass::Build,
        )
        .await?
        {
            Ok(outcome) => outcome,
            Err(failure) => break Some(Attempt::Done(Some(failure))),
        };
        if outcome.exit_code == 0 {
            work.note_repair_output(record, &outcome.output);
            record.setup_commands.push(command);
            continue;
        }
        let class = classify_setup(&outcome);
        if class == FailureClass::DependencyResolution
            && let Some(down) =
                package_index::unanswered(session, ecosystems::package_index(attempted.ecosystem))
                    .await?
        {
            break Some(Attempt::RegistryDown(down));
        }
        let failed = Failed {
            failing: Failing::Step(&setup_step),
            output: &outcome.output,
        };
        let found = work
            .may_repair(&outcome)
            .then(|| repair::find(&failed, &work.context, &rules, &work.tried))
            .flatten();
        let Some((rule, repair, matched)) = found else {
            record.setup_seconds = started.elapsed().as_secs_f64();
            let stopped = Stopped {
                failure: Failure::new(class, Some(&command), &outcome.output),
                plan: &attempted.plan.name,
                language: attempted.plan.language,
                remaining: work.queue.iter().map(Step::render).collect(),
                spec: attempted.spec,
                known: attempted.known,
                tried: None,
            };
            // The agent's commands, whatever they build, are setup.
            session.set_phase(CpuPhase::Setup);
            let end = fall_back(session, request, record, stopped, step).await?;
            break Some(Attempt::Done(end));
        };
        work.record_repair(session, record, rule, &repair, &matched);
        if let Some(suite) = apply_repair(session, record, work, setup_step, repair) {
            let ca_bundle = request.ca_bundle.as_deref().map(Vec::as_slice);
            let image = ecosystems::interpreter_image(attempted.ecosystem, suite, ca_bundle);
            break Some(Attempt::Restart(suite, image));
        }
    };
    record.setup_seconds = started.elapsed().as_secs_f64();
    session.set_phase(CpuPhase::Setup);
    if end.is_none() {
        note_skipped_hints(session, record, &attempted.plan.setup).await?;
    }
    if end.is_none()
        && skipped > 0
        && let Some((source, _)) = attempted.reused.and_then(|r| r.skip)
    {
        record.version_reason.push_str(&format!(
            "; reuse: {skipped} setup step(s) not run again ({}'s environment ran them and none of their inputs changed)",
            source.instance_id
        ));
    }
    Ok(end)
}

/// Applies a setup-phase repair to the steps still to run; `Some` when it restarts the launch
/// on another interpreter.
pub(super) fn apply_repair(
    session: &mut Session,
    record: &mut EnvironmentRecord,
    work: &mut Work,
    failed: Step,
    repair: Repair,
) -> Option<Suite> {
    match repair {
        Repair::Env(name, value) => {
            record.environment.insert(name, value);
            session.set_env(&record.environment);
            work.queue.push_front(failed);
        }
        Repair::Before(steps) => {
            work.queue.push_front(failed);
            for step in steps.into_iter().rev() {
                work.queue.push_front(step);
            }
        }
        Repair::Replace(steps) => {
            for step in steps.into_iter().rev() {
                work.queue.push_front(step);
            }
        }
        Repair::ReplaceWithRebuild { steps, rebuild } => {
            for step in steps.into_iter().rev() {
                work.queue.push_front(step);
            }
            work.rebuild.extend(rebuild);
        }
        Repair::Tests(test) => {
            work.test.set(test, record);
            work.queue.push_front(failed);
        }
        Repair::Retarget {
            step, test, scope, ..
        } => {
            for rebuild in &mut work.rebuild {
                if *rebuild == failed {
                    *rebuild = step.clone();
                }
            }
            work.test.set(test, record);
            if let Some(scope) = scope {
                record.test_scope = scope;
            }
            work.queue.push_front(step);
        }
        Repair::Interpreter(suite) => return Some(suite),
        Repair::Skip(step) => work.rebuild.retain(|s| *s != step),
        Repair::DropCutoff(step) => {
            record.dependency_cutoff = None;
            work.queue.push_front(step);
        }
    }
    record.rebuild_commands = work.rebuild.iter().map(Step::render).collect();
    None
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use kiln_core::{ContainerRuntime, ContainerSpec};
    use kiln_testkit::runtime::ScriptedRuntime;

    use super::*;
    use crate::plan::testutil::plan_of;

    async fn session(dir: &std::path::Path) -> Session {
        let runtime = Arc::new(ScriptedRuntime::new());
        runtime.add_image("img");
        let runtime: Arc<dyn ContainerRuntime> = runtime;
        let spec = ContainerSpec {
            image: "img".into(),
            ..ContainerSpec::default()
        };
        Session::start(runtime, &spec, &dir.join("launch.log"))
            .await
            .unwrap()
    }

    fn record_and_work() -> (EnvironmentRecord, Work) {
        let plan = plan_of(
            crate::ecosystems::python::plan,
            &[(
                "setup.py",
                "from setuptools import setup\nsetup(name='x')\n",
            )],
            None,
        )
        .unwrap();
        let mut record = EnvironmentRecord::new(kiln_schema::InstanceId::new("o__r-1").unwrap());
        let work = Work::new(&plan, &mut record);
        (record, work)
    }

    #[tokio::test]
    async fn a_variable_repair_is_set_for_every_later_command_and_the_step_runs_again() {
        let tmp = tempfile::tempdir().unwrap();
        let mut session = session(tmp.path()).await;
        let (mut record, mut work) = record_and_work();
        let failed = Step::Shell("make".into());
        let queued = work.queue.len();
        let restart = apply_repair(
            &mut session,
            &mut record,
            &mut work,
            failed.clone(),
            Repair::Env("CFLAGS".into(), "-O0".into()),
        );
        assert_eq!(restart, None);
        assert_eq!(
            record.environment.get("CFLAGS").map(String::as_str),
            Some("-O0")
        );
        assert_eq!(work.queue.len(), queued + 1);
        assert_eq!(work.queue.front(), Some(&failed));
        let _ = session.close().await;
    }

    #[tokio::test]
    async fn an_interpreter_repair_asks_to_start_over_and_a_skip_drops_the_rebuild_step() {
        let tmp = tempfile::tempdir().unwrap();
        let mut session = session(tmp.path()).await;
        let (mut record, mut work) = record_and_work();
        let restart = apply_repair(
            &mut session,
            &mut record,
            &mut work,
            Step::Shell("make".into()),
            Repair::Interpreter(Suite::Bullseye),
        );
        assert_eq!(restart, Some(Suite::Bullseye));
        let rebuild = Step::Shell("npm run build".into());
        work.rebuild.push(rebuild.clone());
        apply_repair(
            &mut session,
            &mut record,
            &mut work,
            rebuild.clone(),
            Repair::Skip(rebuild.clone()),
        );
        assert!(!work.rebuild.contains(&rebuild));
        assert!(!record.rebuild_commands.contains(&rebuild.render()));
        let _ = session.close().await;
    }

    #[tokio::test]
    async fn the_system_layers_steps_are_in_the_row_and_not_run() {
        let tmp = tempfile::tempdir().unwrap();
        let mut session = session(tmp.path()).await;
        let (mut record, mut work) = record_and_work();
        let first = work.queue.front().map(Step::render).unwrap();
        let queued = work.queue.len();
        skip_layered(
            &mut session,
            &mut record,
            &mut work,
            Some(("kiln/layer:abc", 1)),
        );
        assert_eq!(work.queue.len(), queued - 1);
        assert_eq!(record.setup_commands, [first]);
        skip_layered(&mut session, &mut record, &mut work, None);
        assert_eq!(work.queue.len(), queued - 1);
        let _ = session.close().await;
    }
}
