//! GoogleTest output (`gtest`): the console text (`[       OK ] Suite.Test (0 ms)`), also as
//! printed under `ctest -V` (each line prefixed `N: `), and `--gtest_output=json` reports.
//!
//! Ids are `Suite.Test` as `--gtest_filter` takes them (`Nums/ParamTest.IsEven/1`), in both forms.
//! JSON reports are found by their first line `{` and last line `}` (how googletest writes them);
//! only the lines of such a document are held in memory, the text around them streams. The
//! lines are read through [`crate::cxx::CxxParser`], which the other C++ parsers share.

use kiln_schema::TestStatus;
use serde_json::Value;

use crate::cxx::{Framework, Reports};
use crate::util::{Collector, Re, add_summary, count};
use crate::{parsed::ParsedLog, parsed::Summary};

/// A ctest `-V` prefix: `12: [ RUN      ] ...`.
static CTEST_PREFIX: Re = Re::new(r"^\d+: ");
static RUN: Re = Re::new(r"^\[ RUN      \] (.+?)\s*$");
/// `[  FAILED  ] Nums/ParamTest.IsEven/1, where GetParam() = 3 (0 ms)`; the timing is required,
/// which leaves out the list of failed tests googletest repeats at the end.
static RESULT: Re = Re::new(
    r"^\[\s+(OK|FAILED|SKIPPED)\s+\] (.+?)(?:, where (?:GetParam\(\)|TypeParam) = .*)? \(\d+ ms\)\s*$",
);
static DISABLED: Re = Re::new(r"^\[ DISABLED \] (\S+)\s*$");
static PASSED_TOTAL: Re = Re::new(r"^\[  PASSED  \] (\d+) tests?\.\s*$");
static LISTED_TOTAL: Re = Re::new(r"^\[\s+(FAILED|SKIPPED)\s+\] (\d+) tests?, listed below:\s*$");
static DISABLED_TOTAL: Re = Re::new(r"^\s*YOU HAVE (\d+) DISABLED TESTS?\s*$");
/// `[==========] Running 5 tests from 2 test suites.` starts a test binary.
static BINARY_START: Re = Re::new(r"^\[==========\] Running \d+ tests?");

/// Reads googletest output: its console lines, and its JSON reports through [`CxxParser`](crate::cxx::CxxParser).
#[derive(Default)]
pub(crate) struct Gtest {
    /// The test that started (`[ RUN      ]`) and has no result yet.
    running: Option<String>,
    summary: Option<Summary>,
}

impl Gtest {
    fn crashed(&mut self, out: &mut Collector) {
        if let Some(test) = self.running.take() {
            // The binary stopped (crash, abort, timeout) while this test ran.
            out.problems.push(format!("test {test} never finished"));
            out.record(&test, TestStatus::Error);
        }
    }

    fn totals(&mut self) -> &mut Summary {
        self.summary.get_or_insert_with(Summary::default)
    }

    fn text_line(&mut self, out: &mut Collector, line: &str) {
        if let Some(caps) = RESULT.captures(line) {
            let status = match &caps[1] {
                "OK" => TestStatus::Pass,
                "FAILED" => TestStatus::Fail,
                _ => TestStatus::Skip,
            };
            self.running = None;
            out.record(&caps[2], status);
        } else if let Some(caps) = RUN.captures(line) {
            self.crashed(out);
            self.running = Some(caps[1].to_owned());
        } else if let Some(caps) = DISABLED.captures(line) {
            out.record(&caps[1], TestStatus::Skip);
        } else if let Some(caps) = PASSED_TOTAL.captures(line) {
            let n = count(&caps[1]);
            let totals = self.totals();
            totals.passed = totals.passed.saturating_add(n);
        } else if let Some(caps) = LISTED_TOTAL.captures(line) {
            let n = count(&caps[2]);
            let is_failed = &caps[1] == "FAILED";
            let totals = self.totals();
            let field = if is_failed {
                &mut totals.failed
            } else {
                &mut totals.skipped
            };
            *field = field.saturating_add(n);
        } else if let Some(caps) = DISABLED_TOTAL.captures(line) {
            let n = count(&caps[1]);
            let totals = self.totals();
            totals.skipped = totals.skipped.saturating_add(n);
        } else if BINARY_START.is_match(line) {
            self.crashed(out);
        }
    }

    /// Reads one `--gtest_output=json` document.
    fn json_document(&mut self, out: &mut Collector, text: &str) {
        let Ok(report) = serde_json::from_str::<Value>(text) else {
            // Braces that a test printed are not a report; a report that breaks off is.
            if text.contains("\"testsuites\"") {
                out.problems
                    .push("gtest json report is not well formed (truncated?)".to_owned());
            }
            return;
        };
        let Some(suites) = report.get("testsuites").and_then(Value::as_array) else {
            return;
        };
        let mut skipped_by_result = 0u64;
        for case in suites
            .iter()
            .filter_map(|suite| suite.get("testsuite").and_then(Value::as_array))
            .flatten()
        {
            let field = |key: &str| case.get(key).and_then(Value::as_str).unwrap_or("");
            let failed = case
                .get("failures")
                .and_then(Value::as_array)
                .is_some_and(|failures| !failures.is_empty());
            let status = if field("status") == "NOTRUN" || field("result") == "SUPPRESSED" {
                TestStatus::Skip
            } else if field("result") == "SKIPPED" {
                skipped_by_result += 1;
                TestStatus::Skip
            } else if failed {
                TestStatus::Fail
            } else {
                TestStatus::Pass
            };
            let suite = field("classname");
            let name = field("name");
            out.record(&format!("{suite}.{name}"), status);
        }
        let number = |key: &str| report.get(key).and_then(Value::as_u64).unwrap_or(0);
        let (failed, errors, disabled) = (number("failures"), number("errors"), number("disabled"));
        // googletest's totals count skipped tests among the passed ones; only the per-test
        // results tell them apart.
        let skipped = disabled.saturating_add(skipped_by_result);
        let summary = Summary {
            passed: number("tests")
                .saturating_sub(failed)
                .saturating_sub(errors)
                .saturating_sub(skipped),
            failed,
            skipped,
            errors,
        };
        add_summary(self.totals(), &summary);
    }
}

impl Framework for Gtest {
    const REPORTS: Reports = Reports::JsonBraces;

    fn console_line(&mut self, out: &mut Collector, line: &str) {
        let line = match CTEST_PREFIX.captures(line) {
            Some(caps) => &line[caps.get(0).map_or(0, |m| m.end())..],
            None => line,
        };
        self.text_line(out, line);
    }

    fn report(&mut self, out: &mut Collector, text: &str) {
        self.json_document(out, text);
    }

    fn finish(mut self, mut out: Collector) -> ParsedLog {
        self.crashed(&mut out);
        out.finish(self.summary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_compile() {
        for re in [
            &CTEST_PREFIX,
            &RUN,
            &RESULT,
            &DISABLED,
            &PASSED_TOTAL,
            &LISTED_TOTAL,
            &DISABLED_TOTAL,
            &BINARY_START,
        ] {
            assert!(re.compiles());
        }
    }
}
