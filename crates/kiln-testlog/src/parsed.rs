//! What parsing a log gives: per-test statuses, the totals the framework printed, and the
//! problems found; and which of two statuses of one id is kept.

use std::collections::{BTreeMap, BTreeSet};

use kiln_schema::{TestStatus, TestStatuses};

/// Result of parsing one log.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ParsedLog {
    /// Normalised test id -> status.
    pub statuses: TestStatuses,
    /// Totals the framework printed, if any.
    pub summary: Option<Summary>,
    /// Disagreements found while parsing, e.g. "summary says 3 passed but 2 parsed": the log is
    /// truncated or garbled.
    pub problems: Vec<String>,
    /// Failing tests whose failure the log puts down to a missing network (a host that could
    /// not be resolved or reached: [`crate::network::names_missing_network`]). Only parsers
    /// that can tie a failure's text to its test fill it (`pytest`, `jest-json`, `vitest-json`,
    /// `mocha-json`, `cargo`, `go-test-json`).
    pub offline: BTreeSet<String>,
}

impl ParsedLog {
    /// True when nothing contradicts the parsed statuses (no problems were found).
    #[must_use]
    pub fn is_consistent(&self) -> bool {
        self.problems.is_empty()
    }

    /// Number of distinct tests with each status (`pass`, `fail`, `skip`, `error`), zeros
    /// included.
    #[must_use]
    pub fn counts(&self) -> BTreeMap<&'static str, usize> {
        [
            TestStatus::Pass,
            TestStatus::Fail,
            TestStatus::Skip,
            TestStatus::Error,
        ]
        .into_iter()
        .map(|s| (s.as_str(), self.count(s)))
        .collect()
    }

    /// Number of distinct tests with status `status`.
    #[must_use]
    pub fn count(&self, status: TestStatus) -> usize {
        self.statuses.values().filter(|s| **s == status).count()
    }

    /// The same log with ids that start with the directory `root` made relative to it
    /// (`/testbed/test/a.test.js::t` → `test/a.test.js::t`): JavaScript runners print absolute
    /// file paths, and ids relative to the repository match other datasets' lists and do not
    /// depend on where the repository was checked out. Should two ids meet, the worst status
    /// is kept.
    #[must_use]
    pub fn relative_to(mut self, root: &str) -> Self {
        let prefix = format!("{}/", root.trim_end_matches('/'));
        if !self.statuses.keys().any(|id| id.starts_with(&prefix)) {
            return self;
        }
        let mut statuses = TestStatuses::new();
        for (id, status) in std::mem::take(&mut self.statuses) {
            let id = match id.strip_prefix(&prefix) {
                Some(rest) => rest.to_string(),
                None => id,
            };
            statuses
                .entry(id)
                .and_modify(|kept| *kept = worst(*kept, status))
                .or_insert(status);
        }
        self.statuses = statuses;
        self.offline = std::mem::take(&mut self.offline)
            .into_iter()
            .map(|id| match id.strip_prefix(&prefix) {
                Some(rest) => rest.to_string(),
                None => id,
            })
            .collect();
        self
    }
}

/// Totals a framework printed at the end of a run.
///
/// Counts are of reports, as the framework counts them: a test that passes and then errors in
/// teardown counts once as passed and once as an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Summary {
    /// Tests that passed (including expected failures).
    pub passed: u64,
    /// Tests that failed (including unexpected passes).
    pub failed: u64,
    /// Tests that were skipped or ignored.
    pub skipped: u64,
    /// Tests, fixtures or files that errored.
    pub errors: u64,
}

/// Severity used when the same test id is reported more than once in a log (a pass followed by a
/// teardown error, or a test run by two invocations): the worst report wins, so a test that ever
/// broke is never recorded as a pass.
pub(crate) fn severity(status: TestStatus) -> u8 {
    match status {
        TestStatus::Skip => 0,
        TestStatus::Pass => 1,
        TestStatus::Fail => 2,
        TestStatus::Error => 3,
    }
}

/// The worse of two statuses, by the order of [`severity`].
pub(crate) fn worst(a: TestStatus, b: TestStatus) -> TestStatus {
    if severity(b) > severity(a) { b } else { a }
}
