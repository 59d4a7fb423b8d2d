//! The validation rules of DESIGN.md as a pure function of the runs' parsed statuses.

use std::collections::{BTreeMap, BTreeSet};

use kiln_schema::{FailureClass, TestStatus, TestStatuses};

/// Which patches a run had.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Side {
    /// Base commit alone (optional, for classification).
    Base,
    /// Base commit + test patch.
    Before,
    /// Base commit + test patch + gold patch.
    After,
}

impl Side {
    /// `base`, `before` or `after`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Base => "base",
            Self::Before => "before",
            Self::After => "after",
        }
    }
}

/// What one test run produced.
#[derive(Debug, Clone, PartialEq)]
pub struct RunResult {
    /// Which side.
    pub side: Side,
    /// 1-based repeat number.
    pub repeat: usize,
    /// Exit code of the test command.
    pub exit_code: i64,
    /// Parsed statuses.
    pub statuses: TestStatuses,
    /// Problems the parser found (summary disagreeing with the parsed tests).
    pub parse_problems: Vec<String>,
}

impl RunResult {
    /// `before:1`, `after:3`, ...
    #[must_use]
    pub fn label(&self) -> String {
        format!("{}:{}", self.side.as_str(), self.repeat)
    }

    /// Why this run cannot be trusted, if it cannot: a non-zero exit with no failing test parsed
    /// (a crash, or a patch that prints fake PASSED lines), a zero exit with failing tests
    /// parsed, or a summary that disagrees with the parsed tests.
    #[must_use]
    pub fn invalid_reason(&self) -> Option<String> {
        let failing = self
            .statuses
            .values()
            .any(|s| matches!(s, TestStatus::Fail | TestStatus::Error));
        if self.exit_code != 0 && !failing {
            return Some(format!(
                "run {} exited {} but no failing test was parsed",
                self.label(),
                self.exit_code
            ));
        }
        if self.exit_code == 0 && failing {
            return Some(format!(
                "run {} exited 0 but failing tests were parsed",
                self.label()
            ));
        }
        self.parse_problems
            .first()
            .map(|p| format!("run {}: the test log does not add up: {p}", self.label()))
    }
}

/// The verdict on one instance.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Decision {
    /// `None` when the instance is validated, else why it is rejected.
    pub rejection: Option<(FailureClass, String)>,
    /// FAIL_TO_PASS, sorted.
    pub fail_to_pass: Vec<String>,
    /// Class of each FAIL_TO_PASS test: `f2p`, `e2p`, `s2p` or `n2p`.
    pub classes: BTreeMap<String, String>,
    /// PASS_TO_PASS, sorted.
    pub pass_to_pass: Vec<String>,
    /// Tests going from a stable pass to a stable fail or error.
    pub pass_to_fail: Vec<String>,
    /// Flaky tests with their status in every run (`absent` when not in the log).
    pub flaky: BTreeMap<String, BTreeMap<String, String>>,
}

/// Whether some test of `runs` could still be FAIL_TO_PASS: one that passes in the first run
/// with the gold patch and does not pass in the first run without it. FAIL_TO_PASS asks that
/// in every run, so when no test does it in the first runs, more runs cannot make one.
#[must_use]
pub fn may_fail_to_pass(runs: &[RunResult]) -> bool {
    let first = |side: Side| {
        runs.iter()
            .filter(|r| r.side == side)
            .min_by_key(|r| r.repeat)
    };
    let (Some(before), Some(after)) = (first(Side::Before), first(Side::After)) else {
        return true;
    };
    after.statuses.iter().any(|(test, status)| {
        *status == TestStatus::Pass && before.statuses.get(test) != Some(&TestStatus::Pass)
    })
}

/// Applies the rules to the runs of both sides (each side repeated one or more times).
#[must_use]
pub fn decide(runs: &[RunResult]) -> Decision {
    let mut decision = Decision::default();
    if let Some(reason) = runs.iter().find_map(RunResult::invalid_reason) {
        decision.rejection = Some((FailureClass::InvalidRun, reason));
        return decision;
    }
    let tests: BTreeSet<&String> = runs.iter().flat_map(|r| r.statuses.keys()).collect();
    let stable = |side: Side, test: &str| -> Result<Option<TestStatus>, ()> {
        let mut seen: Option<Option<TestStatus>> = None;
        for run in runs.iter().filter(|r| r.side == side) {
            let status = run.statuses.get(test).copied();
            match seen {
                None => seen = Some(status),
                Some(previous) if previous != status => return Err(()),
                Some(_) => {}
            }
        }
        Ok(seen.flatten())
    };
    let mut dropped_flaky_candidates = 0usize;
    for test in tests {
        let sides = (
            stable(Side::Base, test),
            stable(Side::Before, test),
            stable(Side::After, test),
        );
        let (base, before, after) = match sides {
            (Ok(base), Ok(before), Ok(after)) => (base, before, after),
            _ => {
                let statuses = runs
                    .iter()
                    .map(|r| {
                        (
                            r.label(),
                            r.statuses
                                .get(test)
                                .map_or("absent", |s| s.as_str())
                                .to_string(),
                        )
                    })
                    .collect();
                decision.flaky.insert(test.clone(), statuses);
                // Would it have counted as FAIL_TO_PASS? Then flakiness cost us the instance.
                if runs.iter().any(|r| {
                    r.side == Side::After && r.statuses.get(test) == Some(&TestStatus::Pass)
                }) {
                    dropped_flaky_candidates += 1;
                }
                continue;
            }
        };
        // With a base run, a test that passes on the untouched base and fails after the gold
        // patch is a regression too, even when the test patch made it absent or skipped.
        let regressed_from_base = base == Some(TestStatus::Pass)
            && before != Some(TestStatus::Pass)
            && matches!(after, Some(TestStatus::Fail | TestStatus::Error));
        if regressed_from_base {
            decision.pass_to_fail.push(test.clone());
            continue;
        }
        match (before, after) {
            (Some(TestStatus::Pass), Some(TestStatus::Pass)) => {
                decision.pass_to_pass.push(test.clone())
            }
            (Some(TestStatus::Pass), Some(TestStatus::Fail | TestStatus::Error)) => {
                decision.pass_to_fail.push(test.clone());
            }
            (before, Some(TestStatus::Pass)) => {
                let class = match before {
                    None => "n2p",
                    Some(TestStatus::Fail) => "f2p",
                    Some(TestStatus::Error) => "e2p",
                    // (pass, pass) is matched above, so only a skip reaches this arm.
                    Some(TestStatus::Skip | TestStatus::Pass) => "s2p",
                };
                decision.fail_to_pass.push(test.clone());
                decision.classes.insert(test.clone(), class.to_string());
            }
            _ => {}
        }
    }
    decision.rejection = if !decision.pass_to_fail.is_empty() {
        Some((
            FailureClass::PassToFail,
            format!(
                "{} test(s) pass before the gold patch and fail after it: {}",
                decision.pass_to_fail.len(),
                preview(&decision.pass_to_fail)
            ),
        ))
    } else if decision.fail_to_pass.is_empty() && dropped_flaky_candidates > 0 {
        Some((
            FailureClass::Flaky,
            format!("every test the gold patch makes pass is flaky ({dropped_flaky_candidates})"),
        ))
    } else if decision.fail_to_pass.is_empty() {
        Some((
            FailureClass::NoFailToPass,
            "no test fails with the test patch alone and passes with the gold patch".to_string(),
        ))
    } else {
        None
    };
    decision
}

/// The first five of `tests`, and how many more there are.
pub(crate) fn preview(tests: &[String]) -> String {
    let mut text = tests.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
    if tests.len() > 5 {
        text.push_str(&format!(", and {} more", tests.len() - 5));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(
        side: Side,
        repeat: usize,
        exit_code: i64,
        statuses: &[(&str, TestStatus)],
    ) -> RunResult {
        RunResult {
            side,
            repeat,
            exit_code,
            statuses: statuses
                .iter()
                .map(|(k, v)| ((*k).to_string(), *v))
                .collect(),
            parse_problems: vec![],
        }
    }
    use Side::{After, Before};
    use TestStatus::{Error, Fail, Pass, Skip};

    #[test]
    fn a_test_may_become_fail_to_pass_only_if_it_passes_after_and_not_before_in_the_first_runs() {
        let run = |side, repeat, statuses: &[(&str, TestStatus)]| RunResult {
            side,
            repeat,
            exit_code: 1,
            statuses: statuses
                .iter()
                .map(|(t, s)| ((*t).to_string(), *s))
                .collect(),
            parse_problems: Vec::new(),
        };
        use TestStatus::{Fail, Pass, Skip};
        let before = run(Side::Before, 1, &[("a", Pass), ("b", Fail)]);
        assert!(!may_fail_to_pass(&[
            before.clone(),
            run(Side::After, 1, &[("a", Pass), ("b", Fail)]),
        ]));
        // Fixed, skipped before, or new after (absent before): each may be.
        for after in [
            run(Side::After, 1, &[("a", Pass), ("b", Pass)]),
            run(Side::After, 1, &[("a", Pass), ("c", Pass)]),
        ] {
            assert!(may_fail_to_pass(&[before.clone(), after]));
        }
        assert!(may_fail_to_pass(&[
            run(Side::Before, 1, &[("a", Skip)]),
            run(Side::After, 1, &[("a", Pass)]),
        ]));
        // Only the first runs count; a side without runs leaves everything open.
        assert!(!may_fail_to_pass(&[
            before.clone(),
            run(Side::After, 1, &[("b", Fail)]),
            run(Side::After, 2, &[("b", Pass)]),
        ]));
        assert!(may_fail_to_pass(&[before]));
    }

    #[test]
    fn classes_and_lists() {
        let runs = [
            run(
                Before,
                1,
                1,
                &[("a", Fail), ("b", Pass), ("c", Skip), ("e", Error)],
            ),
            run(
                After,
                1,
                0,
                &[
                    ("a", Pass),
                    ("b", Pass),
                    ("c", Pass),
                    ("d", Pass),
                    ("e", Pass),
                ],
            ),
        ];
        let d = decide(&runs);
        assert_eq!(d.rejection, None);
        assert_eq!(d.fail_to_pass, ["a", "c", "d", "e"]);
        assert_eq!(d.pass_to_pass, ["b"]);
        let classes: Vec<&str> = d.classes.values().map(String::as_str).collect();
        assert_eq!(classes, ["f2p", "s2p", "n2p", "e2p"]);
    }

    #[test]
    fn pass_to_fail_rejects() {
        let runs = [
            run(Before, 1, 1, &[("a", Fail), ("b", Pass)]),
            run(After, 1, 1, &[("a", Pass), ("b", Fail)]),
        ];
        let d = decide(&runs);
        assert_eq!(d.rejection.map(|r| r.0), Some(FailureClass::PassToFail));
        assert_eq!(d.pass_to_fail, ["b"]);
    }

    #[test]
    fn exit_code_contradicting_statuses_is_invalid() {
        // A patch printing fake PASSED lines while the command fails.
        let runs = [
            run(Before, 1, 1, &[("a", Fail)]),
            run(After, 1, 2, &[("a", Pass)]),
        ];
        let d = decide(&runs);
        assert_eq!(d.rejection.map(|r| r.0), Some(FailureClass::InvalidRun));
    }

    #[test]
    fn flaky_tests_are_dropped_and_recorded() {
        let runs = [
            run(Before, 1, 1, &[("a", Fail), ("t", Pass)]),
            run(Before, 2, 1, &[("a", Fail), ("t", Fail)]),
            run(After, 1, 0, &[("a", Pass), ("t", Pass)]),
            run(After, 2, 0, &[("a", Pass), ("t", Pass)]),
        ];
        let d = decide(&runs);
        assert_eq!(d.fail_to_pass, ["a"]);
        assert!(d.pass_to_pass.is_empty());
        assert_eq!(d.flaky["t"]["before:2"], "fail");
        assert_eq!(d.rejection, None);
    }

    #[test]
    fn a_base_run_catches_regressions_hidden_by_the_test_patch() {
        // The test patch skips `old`; the gold patch breaks it; only the base run shows it passed.
        let runs = [
            run(Side::Base, 1, 0, &[("old", Pass)]),
            run(Before, 1, 1, &[("old", Skip), ("new", Fail)]),
            run(After, 1, 1, &[("old", Fail), ("new", Pass)]),
        ];
        let d = decide(&runs);
        assert_eq!(d.pass_to_fail, ["old"]);
        assert_eq!(d.rejection.map(|r| r.0), Some(FailureClass::PassToFail));
    }

    #[test]
    fn nothing_fixed_is_rejected() {
        let runs = [
            run(Before, 1, 1, &[("a", Fail)]),
            run(After, 1, 1, &[("a", Fail)]),
        ];
        assert_eq!(
            decide(&runs).rejection.map(|r| r.0),
            Some(FailureClass::NoFailToPass)
        );
    }
}
