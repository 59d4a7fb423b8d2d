//! Shared helpers: lazily compiled regexes, the status collector and the summary cross-check.

use std::borrow::Cow;
use std::sync::OnceLock;

use kiln_schema::{TestStatus, TestStatuses};
use regex::{Captures, Regex};

use crate::{ParsedLog, Summary, normalize_test_id};

/// A regex compiled on first use.
///
/// Patterns are constants of this crate, so a compile failure is a programming error; instead of
/// panicking in library code, a pattern that does not compile never matches, and the real-log tests
/// (which exercise every pattern) fail loudly.
pub(crate) struct Re {
    pattern: &'static str,
    cell: OnceLock<Option<Regex>>,
}

impl Re {
    pub(crate) const fn new(pattern: &'static str) -> Self {
        Self {
            pattern,
            cell: OnceLock::new(),
        }
    }

    fn get(&self) -> Option<&Regex> {
        self.cell
            .get_or_init(|| Regex::new(self.pattern).ok())
            .as_ref()
    }

    pub(crate) fn captures<'h>(&self, haystack: &'h str) -> Option<Captures<'h>> {
        self.get()?.captures(haystack)
    }

    pub(crate) fn is_match(&self, haystack: &str) -> bool {
        self.get().is_some_and(|re| re.is_match(haystack))
    }

    pub(crate) fn replace_all<'h>(&self, haystack: &'h str, replacement: &str) -> Cow<'h, str> {
        match self.get() {
            Some(re) => re.replace_all(haystack, replacement),
            None => Cow::Borrowed(haystack),
        }
    }

    #[cfg(test)]
    pub(crate) fn compiles(&self) -> bool {
        self.get().is_some()
    }
}

/// Severity used when the same test id is reported more than once in a log (a pass followed by a
/// teardown error, or a test run by two invocations): the worst report wins, so a test that ever
/// broke is never recorded as a pass.
fn severity(status: TestStatus) -> u8 {
    match status {
        TestStatus::Skip => 0,
        TestStatus::Pass => 1,
        TestStatus::Fail => 2,
        TestStatus::Error => 3,
    }
}

/// Accumulates statuses and counts every report (not every distinct id) so that the totals a
/// framework prints can be compared with what was parsed.
#[derive(Debug, Default)]
pub(crate) struct Collector {
    pub(crate) statuses: TestStatuses,
    pub(crate) events: Summary,
    pub(crate) problems: Vec<String>,
}

impl Collector {
    /// Records one report of `raw_id`; the id is normalised here so every parser agrees.
    pub(crate) fn record(&mut self, raw_id: &str, status: TestStatus) {
        self.record_n(raw_id, status, 1);
    }

    /// Records `raw_id` with `status` but counts the report as `counted_as`, for frameworks whose
    /// totals file a test under another heading (pytest's JUnit XML counts an xfail as skipped).
    pub(crate) fn record_counted_as(
        &mut self,
        raw_id: &str,
        status: TestStatus,
        counted_as: TestStatus,
    ) {
        let before = self.events;
        self.record(raw_id, status);
        if self.events != before {
            self.events = before;
            add(&mut self.events, counted_as, 1);
        }
    }

    /// Records `raw_id` without counting the report, for ids the framework's totals do not count
    /// (suites, sections and subtests that a parent test already stands for).
    pub(crate) fn record_uncounted(&mut self, raw_id: &str, status: TestStatus) {
        let before = self.events;
        self.record(raw_id, status);
        self.events = before;
    }

    /// Records one id that stands for `count` reports (pytest's `SKIPPED [3] file:line`).
    pub(crate) fn record_n(&mut self, raw_id: &str, status: TestStatus, count: u64) {
        let id = normalize_test_id(raw_id);
        if id.is_empty() {
            return;
        }
        add(&mut self.events, status, count);
        self.statuses
            .entry(id)
            .and_modify(|old| {
                if severity(status) > severity(*old) {
                    *old = status;
                }
            })
            .or_insert(status);
    }

    /// Builds the result, comparing `summary` (if the framework printed one) with the reports seen.
    pub(crate) fn finish(mut self, summary: Option<Summary>) -> ParsedLog {
        if let Some(summary) = summary {
            self.problems.extend(cross_check(&summary, &self.events));
        }
        ParsedLog {
            statuses: self.statuses,
            summary,
            problems: self.problems,
        }
    }
}

/// Adds `count` to the field of `summary` that matches `status`.
pub(crate) fn add(summary: &mut Summary, status: TestStatus, count: u64) {
    let field = match status {
        TestStatus::Pass => &mut summary.passed,
        TestStatus::Fail => &mut summary.failed,
        TestStatus::Skip => &mut summary.skipped,
        TestStatus::Error => &mut summary.errors,
    };
    *field = field.saturating_add(count);
}

/// One message per category where the printed totals and the parsed reports disagree.
pub(crate) fn cross_check(printed: &Summary, parsed: &Summary) -> Vec<String> {
    let pairs = [
        ("passed", printed.passed, parsed.passed),
        ("failed", printed.failed, parsed.failed),
        ("skipped", printed.skipped, parsed.skipped),
        ("errors", printed.errors, parsed.errors),
    ];
    pairs
        .iter()
        .filter(|(_, printed, parsed)| printed != parsed)
        .map(|(name, printed, parsed)| format!("summary says {printed} {name} but {parsed} parsed"))
        .collect()
}

/// Removes ANSI escape sequences (colours, cursor moves, OSC hyperlinks).
pub(crate) fn strip_ansi(text: &str) -> Cow<'_, str> {
    static ANSI: Re =
        Re::new(r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])");
    if text.contains('\x1b') {
        ANSI.replace_all(text, "")
    } else {
        Cow::Borrowed(text)
    }
}

/// Parses a decimal count, saturating on absurd values instead of failing.
pub(crate) fn count(text: &str) -> u64 {
    text.trim().parse().unwrap_or(u64::MAX)
}

/// Adds every count of `other` to `summary`.
pub(crate) fn add_summary(summary: &mut Summary, other: &Summary) {
    summary.passed = summary.passed.saturating_add(other.passed);
    summary.failed = summary.failed.saturating_add(other.failed);
    summary.skipped = summary.skipped.saturating_add(other.skipped);
    summary.errors = summary.errors.saturating_add(other.errors);
}

/// The worse of two statuses, by the order of [`severity`].
pub(crate) fn worst(a: TestStatus, b: TestStatus) -> TestStatus {
    if severity(b) > severity(a) { b } else { a }
}
