//! Python `unittest` and Django test-runner output at verbosity 2:
//! `test_x (mod.Class) ... ok` (before Python 3.11) and `test_x (mod.Class.test_x) ... ok` (3.11+).
//!
//! Ids are `mod.Class.test_x` in both forms, the name `python -m unittest` accepts.

use kiln_schema::TestStatus;

use crate::lines::LineParser;
use crate::util::{Collector, Re, add, count, strip_ansi};
use crate::{parsed::ParsedLog, parsed::Summary};

/// A test header: `test_x (mod.Class)` or `test_x (mod.Class.test_x)`, then the rest of the line.
static HEADER: Re = Re::new(r"^\s*(\w+) \(([A-Za-z_][\w.]*)\)((?: \([^)]*\))?)(.*)$");
/// The outcome after ` ... `.
static OUTCOME: Re = Re::new(
    r"^\s*\.\.\.\s*(ok|FAIL|ERROR|skipped(?: .*)?|expected failure|unexpected success)\s*$",
);
/// A docstring line standing in for the header: `First docstring line. ... ok`.
static TRAILING_OUTCOME: Re =
    Re::new(r" \.\.\. (ok|FAIL|ERROR|skipped(?: .*)?|expected failure|unexpected success)\s*$");
/// Detail sections, one per failure or error (subtest failures included).
static SECTION: Re = Re::new(r"^(FAIL|ERROR): (\w+) \(([A-Za-z_][\w.]*)\)");
static RAN: Re = Re::new(r"^Ran (\d+) tests? in ");
static VERDICT: Re = Re::new(r"^(OK|FAILED)(?: \((.*)\))?\s*$");

fn test_id(name: &str, paren: &str) -> String {
    // 3.11+ already names the method inside the parentheses.
    if paren.ends_with(&format!(".{name}")) {
        paren.to_owned()
    } else {
        format!("{paren}.{name}")
    }
}

fn outcome(word: &str) -> TestStatus {
    match word {
        "ok" | "expected failure" => TestStatus::Pass,
        "FAIL" | "unexpected success" => TestStatus::Fail,
        "ERROR" => TestStatus::Error,
        _ => TestStatus::Skip,
    }
}

/// Reads unittest output line by line.
#[derive(Default)]
pub(crate) struct Unittest {
    out: Collector,
    /// The test whose header was read and whose outcome is still to come.
    current: Option<String>,
    /// Failures and errors are counted from the detail sections when there are any: unittest
    /// counts each failing subtest, and old Pythons print no outcome on the line of such a test.
    section_events: Summary,
    unexpected_successes: u64,
    ran: Option<u64>,
    summary: Option<Summary>,
}

impl LineParser for Unittest {
    fn line(&mut self, raw_line: &str) {
        let line = strip_ansi(raw_line);
        let mut rest: &str = line.trim_end();
        if let Some(caps) = SECTION.captures(rest) {
            let status = if &caps[1] == "FAIL" {
                TestStatus::Fail
            } else {
                TestStatus::Error
            };
            add(&mut self.section_events, status, 1);
            self.out
                .record_uncounted(&test_id(&caps[2], &caps[3]), status);
            return;
        }
        if let Some(caps) = RAN.captures(rest) {
            self.ran = Some(count(&caps[1]));
            return;
        }
        if let (Some(total), Some(caps)) = (self.ran, VERDICT.captures(rest)) {
            self.summary = Some(verdict_summary(
                total,
                caps.get(2).map_or("", |m| m.as_str()),
            ));
            return;
        }
        // One line may hold several headers when a test printed no outcome (3.10 subtests).
        let mut guard = 0;
        while let Some(caps) = HEADER.captures(rest) {
            guard += 1;
            if guard > 64 {
                break;
            }
            let is_subtest = !caps[3].is_empty();
            let id = test_id(&caps[1], &caps[2]);
            let tail = caps.get(4).map_or("", |m| m.as_str());
            if let Some(result) = OUTCOME.captures(tail) {
                let status = outcome(&result[1]);
                if status == TestStatus::Fail && &result[1] == "unexpected success" {
                    self.unexpected_successes += 1;
                }
                if is_subtest {
                    // A failing subtest fails its test; the section counts it.
                    self.out.record_uncounted(&id, status);
                } else {
                    self.out.record(&id, status);
                }
                self.current = None;
                rest = "";
            } else if let Some(after) = tail.trim_start().strip_prefix("...") {
                self.current = Some(id);
                rest = after;
            } else {
                self.current = Some(id);
                rest = "";
            }
        }
        if let (Some(id), Some(result)) = (self.current.as_ref(), TRAILING_OUTCOME.captures(rest)) {
            let status = outcome(&result[1]);
            if &result[1] == "unexpected success" {
                self.unexpected_successes += 1;
            }
            self.out.record(id, status);
            self.current = None;
        } else if let (Some(id), Some(result)) = (self.current.as_ref(), OUTCOME.captures(rest)) {
            self.out.record(id, outcome(&result[1]));
            self.current = None;
        }
    }

    fn finish(self: Box<Self>) -> ParsedLog {
        let mut out = self.out;
        if self.section_events != Summary::default() {
            out.events.failed = self
                .section_events
                .failed
                .saturating_add(self.unexpected_successes);
            out.events.errors = self.section_events.errors;
        }
        out.finish(self.summary)
    }
}

/// Totals from `Ran N tests` and `FAILED (failures=1, errors=2, skipped=3, ...)`.
fn verdict_summary(total: u64, details: &str) -> Summary {
    let mut summary = Summary::default();
    let mut unexpected = 0u64;
    for part in details.split(", ") {
        let Some((key, value)) = part.split_once('=') else {
            continue;
        };
        let value = count(value);
        match key.trim() {
            "failures" => summary.failed = value,
            "errors" => summary.errors = value,
            "skipped" => summary.skipped = value,
            "unexpected successes" => unexpected = value,
            _ => {}
        }
    }
    summary.passed = total
        .saturating_sub(summary.failed)
        .saturating_sub(summary.errors)
        .saturating_sub(summary.skipped)
        .saturating_sub(unexpected);
    summary.failed = summary.failed.saturating_add(unexpected);
    summary
}
