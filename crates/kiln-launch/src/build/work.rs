//! What one attempt of a plan carries from step to step: the steps still to run, the rebuild
//! steps and the test command as repairs change them, the repairs tried, and how the attempt
//! ended.

use kiln_core::{ContainerSpec, Session};
use kiln_schema::EnvironmentRecord;

use super::reuse::Reused;
use crate::debian::Suite;
use crate::ecosystems::Ecosystem;
use crate::environment::Known;
use crate::plan::Plan;
use crate::repair::{self, Repair};
use crate::steps::{Step, TestCommand};
use crate::verify::Failure;

/// At most this many repairs in one launch: each costs a retry, and a repository that needs
/// more is better left failed with its log.
pub(super) const MAX_REPAIRS: usize = 6;

/// How one attempt of the plan ended.
pub(super) enum Attempt {
    /// A dependency step failed and the ecosystem's registry did not answer: the item is
    /// deferred (no row).
    RegistryDown(crate::package_index::Unanswered),
    /// Built (`None`) or failed.
    Done(Option<Failure>),
    /// A repair asked to start over on another Debian suite's interpreter, with the image of
    /// that interpreter (`None` when the ecosystem has no such images).
    Restart(Suite, Option<kiln_core::ImageBuild>),
}

/// What one attempt runs: the plan of an ecosystem in a container of `spec`, `reused` when
/// `spec`'s image is an earlier commit's environment.
#[derive(Clone, Copy)]
pub(super) struct Attempted<'a> {
    pub(super) ecosystem: Ecosystem,
    pub(super) plan: &'a Plan,
    pub(super) spec: &'a ContainerSpec,
    /// The commit's tree and the test patch's files.
    pub(super) known: &'a Known,
    /// The system layer `spec`'s image is, and how many of the plan's first steps it ran.
    pub(super) layered: Option<(&'a str, usize)>,
    pub(super) reused: Option<Reused<'a>>,
}

/// The steps and test command of one attempt, as repairs change them, and the repairs tried.
pub(super) struct Work {
    /// Setup steps still to run.
    pub(super) queue: std::collections::VecDeque<Step>,
    /// Steps to re-run after a source change.
    pub(super) rebuild: Vec<Step>,
    /// The test command.
    pub(super) test: TestCommandSlot,
    /// The rules tried so far, by name (each at most once).
    pub(super) tried: Vec<&'static str>,
    /// What the rules see of the plan; a repair that retargets the commands updates it.
    pub(super) context: crate::plan::RepairContext,
    /// The row's repairs from this index on may still gain what their commands report.
    pub(super) repaired_from: usize,
}

impl Work {
    /// The work of `plan`, its test command written into `record`.
    pub(super) fn new(plan: &Plan, record: &mut EnvironmentRecord) -> Self {
        // What an earlier attempt's baseline found goes with its commands.
        record.tests_left_out.clear();
        record.collect_command = None;
        Self {
            queue: plan.setup.iter().cloned().collect(),
            rebuild: plan.rebuild.clone(),
            test: TestCommandSlot::new(plan.test.clone(), plan.whole_test.clone(), record),
            tried: Vec::new(),
            context: plan.repair.clone(),
            repaired_from: record.repairs.len(),
        }
    }

    /// Whether another repair may be tried after a command that ended as `outcome` did (one
    /// killed by its timeout or the OOM killer is no signature to repair by).
    pub(super) fn may_repair(&self, outcome: &kiln_core::ExecOutcome) -> bool {
        !outcome.timed_out && !outcome.oom_killed && self.tried.len() < MAX_REPAIRS
    }

    /// Marks `rule` tried, and writes the repair into the row and the log.
    pub(super) fn record_repair(
        &mut self,
        session: &mut Session,
        record: &mut EnvironmentRecord,
        rule: &'static repair::Rule,
        repair: &Repair,
        matched: &str,
    ) {
        self.tried.push(rule.name);
        record.repairs.push(repair::describe(rule, repair, matched));
        session.note(&format!(
            "# kiln repair {}: {}",
            rule.name, rule.description
        ));
        if let Repair::Retarget { cargo, .. } = repair {
            self.context.cargo = Some(cargo.clone());
        }
    }

    /// Adds the `[kiln] ...` lines a repaired command printed (what it dropped, which package
    /// held a header) to the latest repair of the row.
    pub(super) fn note_repair_output(&self, record: &mut EnvironmentRecord, output: &str) {
        if record.repairs.len() <= self.repaired_from {
            return;
        }
        let notes: Vec<&str> = output
            .lines()
            .filter_map(|l| l.trim().strip_prefix("[kiln] "))
            .take(20)
            .collect();
        if let (false, Some(last)) = (notes.is_empty(), record.repairs.last_mut()) {
            last.push_str("; ");
            last.push_str(&notes.join("; "));
        }
    }
}

/// The test command of an attempt, kept typed for the repairs and rendered into the row
/// whenever it changes, with the whole suite's command where the plan narrowed the tests.
pub(super) struct TestCommandSlot {
    pub(super) command: TestCommand,
    /// The whole suite's command, while it still goes with `command`.
    pub(super) whole: Option<TestCommand>,
}

impl TestCommandSlot {
    fn new(
        command: TestCommand,
        whole: Option<TestCommand>,
        record: &mut EnvironmentRecord,
    ) -> Self {
        record.test_command = command.render();
        record.whole_test_command = whole.as_ref().map(TestCommand::render);
        Self { command, whole }
    }

    /// A repaired command; what the plan runs before the tests (services, the CI's variables)
    /// stays. The whole suite's command goes: what the repair changed may not hold for it.
    pub(super) fn set(&mut self, mut command: TestCommand, record: &mut EnvironmentRecord) {
        if command.prelude.is_empty() {
            command.prelude.clone_from(&self.command.prelude);
        }
        *self = Self::new(command, None, record);
    }

    /// Both commands, as they are to run from now on (tests left out of each, or the ones this
    /// attempt ran before).
    pub(super) fn replace(
        &mut self,
        command: TestCommand,
        whole: Option<TestCommand>,
        record: &mut EnvironmentRecord,
    ) {
        *self = Self::new(command, whole, record);
    }
}

/// The first 60 characters of a command, for progress lines.
pub(super) fn short(command: &str) -> &str {
    let end = command
        .char_indices()
        .nth(60)
        .map_or(command.len(), |(i, _)| i);
    &command[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::testutil::plan_of;

    fn python_plan() -> Plan {
        plan_of(
            crate::ecosystems::python::plan,
            &[(
                "setup.py",
                "from setuptools import setup\nsetup(name='x')\n",
            )],
            None,
        )
        .unwrap()
    }

    #[test]
    fn a_repaired_commands_notes_go_to_the_latest_repair_only() {
        let mut record = EnvironmentRecord::new(kiln_schema::InstanceId::new("o__r-1").unwrap());
        record.repairs.push("earlier".into());
        let work = Work::new(&python_plan(), &mut record);
        // No repair since the work began: nothing to note.
        work.note_repair_output(&mut record, "[kiln] dropped x\n");
        assert_eq!(record.repairs, ["earlier"]);
        record.repairs.push("pkg: installed y".into());
        work.note_repair_output(
            &mut record,
            "output\n  [kiln] dropped x\n[kiln] held by y\n",
        );
        assert_eq!(record.repairs[1], "pkg: installed y; dropped x; held by y");
    }

    #[test]
    fn a_repaired_test_command_keeps_the_plans_prelude_and_is_rendered_into_the_row() {
        let mut record = EnvironmentRecord::new(kiln_schema::InstanceId::new("o__r-1").unwrap());
        let mut plan = python_plan();
        plan.test.prelude = vec!["redis-server --daemonize yes".into()];
        let mut work = Work::new(&plan, &mut record);
        assert_eq!(record.test_command, plan.test.render());
        work.test.set(
            TestCommand::plain("python -m pytest -rA -p no:cacheprovider"),
            &mut record,
        );
        assert!(
            record.test_command.contains("redis-server"),
            "{}",
            record.test_command
        );
        assert!(record.test_command.contains("no:cacheprovider"));
    }

    #[test]
    fn no_repair_follows_a_kill_or_the_last_allowed_repair() {
        let mut record = EnvironmentRecord::new(kiln_schema::InstanceId::new("o__r-1").unwrap());
        let mut work = Work::new(&python_plan(), &mut record);
        let exited = kiln_core::ExecOutcome {
            exit_code: 1,
            output: String::new(),
            truncated: false,
            timed_out: false,
            oom_killed: false,
            duration: std::time::Duration::ZERO,
        };
        assert!(work.may_repair(&exited));
        let killed = kiln_core::ExecOutcome {
            timed_out: true,
            ..exited.clone()
        };
        assert!(!work.may_repair(&killed));
        work.tried = vec!["r"; MAX_REPAIRS];
        assert!(!work.may_repair(&exited));
    }
}
