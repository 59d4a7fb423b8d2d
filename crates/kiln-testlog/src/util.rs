//! Shared helpers: lazily compiled regexes, the status collector and the summary cross-check.

use kiln_schema::{TestStatus, TestStatuses};

use crate::normalize::normalize_test_id;
pub(crate) use crate::parsed::worst;
use crate::parsed::{ParsedLog, Summary, severity};
pub(crate) use crate::text::{Re, count, strip_ansi};

/// Accumulates statuses and counts every report (not every distinct id) so that the totals a
/// framework prints can be compared with what was parsed.
#[derive(Debug, Default)]
pub(crate) struct Collector {
    pub(crate) statuses: TestStatuses,
    pub(crate) events: Summary,
    pub(crate) problems: Vec<String>,
    /// Ids whose failure the log puts down to a missing network ([`ParsedLog::offline`]).
    pub(crate) offline: std::collections::BTreeSet<String>,
}

impl Collector {
    /// Marks `raw_id` (recorded as failing) as failing for want of a network.
    pub(crate) fn record_offline(&mut self, raw_id: &str) {
        let id = normalize_test_id(raw_id);
        if !id.is_empty() {
            self.offline.insert(id);
        }
    }

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
            offline: self.offline,
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

/// Adds every count of `other` to `summary`.
pub(crate) fn add_summary(summary: &mut Summary, other: &Summary) {
    summary.passed = summary.passed.saturating_add(other.passed);
    summary.failed = summary.failed.saturating_add(other.failed);
    summary.skipped = summary.skipped.saturating_add(other.skipped);
    summary.errors = summary.errors.saturating_add(other.errors);
}
