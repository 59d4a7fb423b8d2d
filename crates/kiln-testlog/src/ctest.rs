//! CTest's text output (`ctest`, `ctest -V`, `ctest --output-on-failure`, `-j N`):
//! `1/7 Test #1: name ......   Passed    0.01 sec` per test, then
//! `33% tests passed, 4 tests failed out of 6` and the lists of tests that did not run.
//!
//! Ids are the CTest test names. Test output that `-V` prints in between (prefixed `N: `) is
//! not read.

use kiln_schema::TestStatus;

use crate::cxx::{Framework, Reports};
use crate::util::{Collector, Re, count};
use crate::{parsed::ParsedLog, parsed::Summary};

/// `1/7 Test #1: name .....   Passed    0.01 sec`; long names leave fewer (or no) dots.
static RESULT: Re =
    Re::new(r"^\s*\d+/\d+ Test\s+#\d+: (.+?)(?: \.+|\s)\s*(\S.*?)\s+[\d.]+ sec\s*$");
static TOTALS: Re = Re::new(r"^\d+% tests passed, (\d+) tests? failed out of (\d+)\s*$");
/// An entry of `The following tests did not run:`: `  5 - name (Skipped)`.
static NOT_RUN_ENTRY: Re = Re::new(r"^\s*\d+ - .+ \((Skipped|Disabled)\)\s*$");

/// Maps the verdict after the dots to a status; `None` for text that is not a verdict.
fn status_of(verdict: &str) -> Option<(TestStatus, TestStatus)> {
    let verdict = verdict.trim_start_matches('*');
    // (status, the category CTest counts it in)
    Some(if verdict.starts_with("Passed") {
        (TestStatus::Pass, TestStatus::Pass)
    } else if verdict.starts_with("Not Run (Disabled)") || verdict.starts_with("Skipped") {
        (TestStatus::Skip, TestStatus::Skip)
    } else if verdict.starts_with("Not Run") {
        // The test could not start (missing executable, failed fixture): it has no verdict of
        // its own, but CTest counts it as failed.
        (TestStatus::Error, TestStatus::Fail)
    } else if verdict.starts_with("Failed")
        || verdict.starts_with("Timeout")
        || verdict.starts_with("Exception")
    {
        // A crash (`Exception: SegFault`) or a timeout is the test failing.
        (TestStatus::Fail, TestStatus::Fail)
    } else {
        return None;
    })
}

/// Reads CTest output line by line (through [`CxxParser`](crate::cxx::CxxParser)).
#[derive(Default)]
pub(crate) struct Ctest {
    /// `(failed, out of)` of every totals line.
    totals: Option<(u64, u64)>,
    /// Tests listed under `The following tests did not run:` as (skipped by code, disabled).
    not_run: (u64, u64),
}

impl Framework for Ctest {
    const REPORTS: Reports = Reports::None;

    fn console_line(&mut self, out: &mut Collector, line: &str) {
        if let Some(caps) = RESULT.captures(line) {
            if let Some((status, counted_as)) = status_of(&caps[2]) {
                out.record_counted_as(&caps[1], status, counted_as);
            }
        } else if let Some(caps) = TOTALS.captures(line) {
            let (failed, total) = self.totals.get_or_insert((0, 0));
            *failed = failed.saturating_add(count(&caps[1]));
            *total = total.saturating_add(count(&caps[2]));
        } else if let Some(caps) = NOT_RUN_ENTRY.captures(line) {
            if &caps[1] == "Skipped" {
                self.not_run.0 += 1;
            } else {
                self.not_run.1 += 1;
            }
        }
    }

    fn finish(self, out: Collector) -> ParsedLog {
        // CTest leaves disabled tests out of the total and counts tests skipped by their return
        // code among the passed ones in the percentage; both are in the not-run list.
        let summary = self.totals.map(|(failed, total)| {
            let (skipped_by_code, disabled) = self.not_run;
            Summary {
                passed: total.saturating_sub(failed).saturating_sub(skipped_by_code),
                failed,
                skipped: skipped_by_code.saturating_add(disabled),
                errors: 0,
            }
        });
        out.finish(summary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_compile() {
        for re in [&RESULT, &TOTALS, &NOT_RUN_ENTRY] {
            assert!(re.compiles());
        }
    }

    #[test]
    fn verdicts() {
        let line = "7/7 Test #7: times_out ........................***Timeout   1.00 sec";
        let caps = RESULT.captures(line).expect("matches");
        assert_eq!(&caps[1], "times_out");
        assert_eq!(&caps[2], "***Timeout");
        let line = "1/1 Test #1: a_very_long_test_name_that_fills_the_line   Passed    0.00 sec";
        let caps = RESULT.captures(line).expect("matches");
        assert_eq!(&caps[1], "a_very_long_test_name_that_fills_the_line");
        let line = "3/9 Test #3: crash ....***Exception: SegFault  0.01 sec";
        let caps = RESULT.captures(line).expect("matches");
        assert_eq!(
            status_of(&caps[2]),
            Some((TestStatus::Fail, TestStatus::Fail))
        );
    }
}
