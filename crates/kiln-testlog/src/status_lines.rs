//! `status-lines`: one `[STATUS] id` line per test, as printed by a parser script that a launch
//! wrote for a framework no library parser reads (the script runs on the captured test output
//! and prints these lines), and by kiln's own output filters.
//!
//! Lines: `[PASSED] id`, `[FAILED] id`, `[SKIPPED] id`, `[ERROR] id`, exactly one space after the
//! bracket, and at most one `[TOTALS] passed=N failed=N skipped=N errors=N` line with the totals
//! the framework printed (a key left out counts as 0). `[PASSED]` and `[FAILED]` lines are what
//! the SWE-bench harness's `parse_log_jest_json` reads, so a release row whose output goes through
//! the script is graded by the harness unchanged. Every other line is ignored.

use kiln_schema::TestStatus;

use crate::lines::LineParser;
use crate::parsed::{ParsedLog, Summary};
use crate::util::Collector;

/// The line a parser script prints for one test with `status`.
#[must_use]
pub fn line(status: TestStatus, id: &str) -> String {
    let tag = match status {
        TestStatus::Pass => "PASSED",
        TestStatus::Fail => "FAILED",
        TestStatus::Skip => "SKIPPED",
        TestStatus::Error => "ERROR",
    };
    format!("[{tag}] {id}")
}

/// Why the statuses a parser script printed cannot be trusted for a run that exited with
/// `exit_code`, or `None` when they agree with it: there must be statuses, the totals the script
/// read (if any) must add up, exit code 0 must come with no failing test and any other exit code
/// with at least one, unless no test ran at all.
#[must_use]
pub fn contradiction(parsed: &ParsedLog, exit_code: i64) -> Option<String> {
    if parsed.statuses.is_empty() {
        // A run that failed before any test ran (a compile error) has nothing to list.
        return (exit_code == 0).then(|| {
            "the test command exited 0 but the parser script printed no status lines".into()
        });
    }
    if !parsed.problems.is_empty() {
        return Some(format!(
            "the parser script's lines disagree with its totals: {}",
            parsed.problems.join("; ")
        ));
    }
    let failing = parsed.count(TestStatus::Fail) + parsed.count(TestStatus::Error);
    match (exit_code, failing) {
        (0, 0) => None,
        (0, n) => Some(format!(
            "the test command exited 0 but the parser script reads {n} failing tests"
        )),
        (code, 0) => Some(format!(
            "the test command exited {code} but the parser script reads no failing test"
        )),
        _ => None,
    }
}

#[derive(Default)]
pub(crate) struct StatusLines {
    out: Collector,
    totals: Option<Summary>,
    problems: Vec<String>,
}

impl StatusLines {
    fn totals(&mut self, rest: &str) {
        if self.totals.is_some() {
            self.problems
                .push("more than one [TOTALS] line; the first one counts".into());
            return;
        }
        let mut totals = Summary::default();
        for pair in rest.split_whitespace() {
            let parsed = pair
                .split_once('=')
                .and_then(|(key, value)| Some((key, value.parse::<u64>().ok()?)));
            let field = match parsed {
                Some(("passed", n)) => (&mut totals.passed, n),
                Some(("failed", n)) => (&mut totals.failed, n),
                Some(("skipped", n)) => (&mut totals.skipped, n),
                Some(("errors", n)) => (&mut totals.errors, n),
                _ => {
                    self.problems
                        .push(format!("[TOTALS] line has an unreadable part `{pair}`"));
                    continue;
                }
            };
            *field.0 = field.1;
        }
        self.totals = Some(totals);
    }
}

impl LineParser for StatusLines {
    fn line(&mut self, line: &str) {
        let Some(rest) = line.strip_prefix('[') else {
            return;
        };
        let Some((tag, id)) = rest.split_once("] ") else {
            return;
        };
        let status = match tag {
            "PASSED" => TestStatus::Pass,
            "FAILED" => TestStatus::Fail,
            "SKIPPED" => TestStatus::Skip,
            "ERROR" => TestStatus::Error,
            "TOTALS" => return self.totals(id),
            _ => return,
        };
        self.out.record(id, status);
    }

    fn finish(self: Box<Self>) -> ParsedLog {
        let mut parsed = self.out.finish(self.totals);
        parsed.problems.extend(self.problems);
        parsed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(log: &str) -> ParsedLog {
        let mut parser: Box<dyn LineParser> = Box::new(StatusLines::default());
        crate::lines::feed_str(parser.as_mut(), log);
        parser.finish()
    }

    #[test]
    fn reads_every_status_and_ignores_other_lines() {
        let parsed = parse(
            "collected 4\n[PASSED] a::one\n[FAILED] a::two\n[SKIPPED] b three\n[ERROR] c\n\
             [PASSED]no-space\n [PASSED] indented\n[WEIRD] x\n",
        );
        let got: Vec<(&str, TestStatus)> = parsed
            .statuses
            .iter()
            .map(|(id, s)| (id.as_str(), *s))
            .collect();
        assert_eq!(
            got,
            [
                ("a::one", TestStatus::Pass),
                ("a::two", TestStatus::Fail),
                ("b three", TestStatus::Skip),
                ("c", TestStatus::Error),
            ]
        );
        assert!(parsed.summary.is_none());
        assert!(parsed.is_consistent());
    }

    #[test]
    fn totals_are_compared_with_the_lines() {
        let agree = parse("[PASSED] a\n[FAILED] b\n[TOTALS] passed=1 failed=1\n");
        assert!(agree.is_consistent(), "{:?}", agree.problems);
        let disagree = parse("[PASSED] a\n[TOTALS] passed=2 failed=0 skipped=0 errors=0\n");
        assert_eq!(
            disagree.problems,
            ["summary says 2 passed but 1 parsed".to_string()]
        );
        let garbled = parse("[PASSED] a\n[TOTALS] passed=1 lots\n");
        assert!(!garbled.is_consistent());
    }

    #[test]
    fn statuses_must_agree_with_the_exit_code() {
        let passing = parse("[PASSED] a\n[PASSED] b\n");
        let failing = parse("[PASSED] a\n[FAILED] b\n");
        assert_eq!(contradiction(&passing, 0), None);
        assert_eq!(contradiction(&failing, 1), None);
        assert!(contradiction(&passing, 1).unwrap().contains("exited 1"));
        assert!(contradiction(&failing, 0).unwrap().contains("1 failing"));
        assert!(contradiction(&parse("nothing\n"), 0).is_some());
        assert_eq!(contradiction(&parse("error[E0425]\n"), 101), None);
        let bad_totals = parse("[PASSED] a\n[TOTALS] passed=3\n");
        assert!(contradiction(&bad_totals, 0).unwrap().contains("totals"));
    }

    #[test]
    fn the_line_helper_round_trips() {
        let log = [
            line(TestStatus::Pass, "t 1"),
            line(TestStatus::Error, "t 2"),
        ]
        .join("\n");
        let parsed = parse(&log);
        assert_eq!(parsed.statuses.get("t 1"), Some(&TestStatus::Pass));
        assert_eq!(parsed.statuses.get("t 2"), Some(&TestStatus::Error));
    }
}
