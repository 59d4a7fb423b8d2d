//! Text output of JavaScript runners: `node --test` ("node-test", its TAP and spec reporters)
//! and mocha's default spec reporter ("mocha-spec").
//!
//! node-test ids are the test names, nested tests and suites joined with ` > ` (the same in both
//! reporters). mocha-spec ids are mocha's full titles (suite titles and the test title joined with
//! a space), the `fullTitle` of `mocha-json` without its file.

use kiln_schema::TestStatus;

use crate::lines::LineParser;
use crate::tap::{PATH_SEPARATOR, Tap};
use crate::util::{Collector, Re, add, add_summary, count, strip_ansi};
use crate::{parsed::ParsedLog, parsed::Summary};

/// A spec-reporter result: `✔ name (1.5ms)`, `✖ name (2ms)`, `﹣ name (0.1ms) # reason`,
/// `✔ name (0.1ms) # TODO`.
static NODE_SPEC_RESULT: Re =
    Re::new(r"^(✔|✖|﹣)\s+(.+?)(?:\s+\(\d+(?:\.\d+)?m?s\))?(?:\s+#\s*(.*))?$");
/// A spec-reporter suite, or a test with subtests, whose results follow indented.
static NODE_SPEC_PARENT: Re = Re::new(r"^▶\s+(.+)$");

/// Reads `node --test` output (TAP or spec reporter) line by line; every line goes to both
/// readers, as their lines never look alike.
pub(crate) struct NodeTest {
    tap: Tap,
    spec: Collector,
    /// Open spec parents: (indent, name).
    stack: Vec<(usize, String)>,
    /// `▶` parents closed so far; node's totals count suites apart from tests, but a test with
    /// subtests is printed the same way as a suite.
    spec_parents: u64,
    /// After `✖ failing tests:` node repeats the failures without their parents.
    in_failure_list: bool,
    /// The last line of the failure list was a `test at file:line` location.
    after_location: bool,
}

impl Default for NodeTest {
    fn default() -> Self {
        Self {
            tap: Tap::new(true),
            spec: Collector::default(),
            stack: Vec::new(),
            spec_parents: 0,
            in_failure_list: false,
            after_location: false,
        }
    }
}

impl NodeTest {
    fn path(&self, name: &str) -> String {
        let mut id = String::new();
        for (_, parent) in &self.stack {
            id.push_str(parent);
            id.push_str(PATH_SEPARATOR);
        }
        id.push_str(name);
        id
    }

    fn spec_line(&mut self, line: &str) {
        let text = line.trim_start();
        let indent = line.len() - text.len();
        if text == "✖ failing tests:" {
            self.in_failure_list = true;
            self.after_location = false;
            return;
        }
        if self.in_failure_list {
            // The list repeats each failure as `test at file:line` then `✖ name`; any other
            // result starts the next run of a log holding several.
            if text.starts_with("test at ") {
                self.after_location = true;
                return;
            }
            let repeated = self.after_location && text.starts_with('✖');
            let next_run =
                !repeated && (NODE_SPEC_PARENT.is_match(text) || NODE_SPEC_RESULT.is_match(text));
            if !next_run {
                self.after_location = false;
                return;
            }
            self.in_failure_list = false;
            self.stack.clear();
        }
        if let Some(caps) = NODE_SPEC_PARENT.captures(text) {
            self.stack.retain(|(at, _)| *at < indent);
            let name = crate::normalize::normalize_test_id(&caps[1]);
            self.stack.push((indent, name));
        } else if let Some(caps) = NODE_SPEC_RESULT.captures(text) {
            let todo = caps
                .get(3)
                .is_some_and(|m| m.as_str().to_ascii_uppercase().starts_with("TODO"));
            let status = match &caps[1] {
                _ if todo => TestStatus::Skip,
                "✔" => TestStatus::Pass,
                "✖" => TestStatus::Fail,
                _ => TestStatus::Skip,
            };
            let name = crate::normalize::normalize_test_id(&caps[2]);
            let closes_parent = self
                .stack
                .last()
                .is_some_and(|(at, parent)| *at == indent && *parent == name);
            if closes_parent {
                self.stack.pop();
                self.spec_parents = self.spec_parents.saturating_add(1);
                let id = self.path(&name);
                self.spec.record_uncounted(&id, status);
            } else {
                self.stack.retain(|(at, _)| *at < indent);
                let id = self.path(&name);
                self.spec.record(&id, status);
            }
        }
    }
}

impl LineParser for NodeTest {
    fn line(&mut self, raw_line: &str) {
        self.tap.line(raw_line);
        let line = strip_ansi(raw_line);
        self.spec_line(line.trim_end());
    }

    fn finish(self: Box<Self>) -> ParsedLog {
        let totals = self.tap.totals;
        let (mut out, tap_events) = self.tap.into_parts();
        let mut events = tap_events;
        add_summary(&mut events, &self.spec.events);
        for (id, status) in self.spec.statuses {
            out.record_uncounted(&id, status);
        }
        out.problems.extend(self.spec.problems);
        if !self.stack.is_empty() {
            out.problems.push(format!(
                "{} suites never finished (log truncated?)",
                self.stack.len()
            ));
        }
        if !totals.seen {
            return out.finish(None);
        }
        if self.spec_parents > 0 && self.spec_parents != totals.suites {
            // Some `▶` parents were tests, which node counts, and the spec reporter does not say
            // which: the totals cannot be compared.
            let mut parsed = out.finish(None);
            parsed.summary = Some(totals.summary);
            return parsed;
        }
        out.events = events;
        out.finish(Some(totals.summary))
    }
}

/// `✔ title`, `✓ title (12ms)` (older mocha), `√ title` (Windows).
static MOCHA_PASS: Re = Re::new(r"^(?:✔|✓|√)\s+(.+)$");
static MOCHA_FAIL: Re = Re::new(r"^\d+\)\s+(.+)$");
static MOCHA_PENDING: Re = Re::new(r"^-\s+(.+)$");
static MOCHA_TOTAL: Re = Re::new(r"^(\d+) (passing|pending|failing)(?: \(\d+\w*\))?$");

/// Reads mocha's spec reporter line by line.
///
/// Structure comes from indentation: a line that is not a result opens a suite at its indent,
/// and a result belongs to the suites indented less than it. Lines at column 0 are not mocha's
/// (tests' own console output); after the totals, the failure details are skipped until the next
/// passing test line.
#[derive(Default)]
pub(crate) struct MochaSpec {
    out: Collector,
    stack: Vec<(usize, String)>,
    in_details: bool,
    summary: Option<Summary>,
}

impl MochaSpec {
    fn full_title(&mut self, indent: usize, title: &str) -> String {
        self.stack.retain(|(at, _)| *at < indent);
        let mut id = String::new();
        for (_, suite) in &self.stack {
            id.push_str(suite);
            id.push(' ');
        }
        id.push_str(title);
        id
    }
}

impl LineParser for MochaSpec {
    fn line(&mut self, raw_line: &str) {
        let line = strip_ansi(raw_line);
        let line = line.trim_end();
        let text = line.trim_start();
        let indent = line.len() - text.len();
        if let Some(caps) = MOCHA_TOTAL.captures(text) {
            let summary = self.summary.get_or_insert_with(Summary::default);
            let n = count(&caps[1]);
            let status = match &caps[2] {
                "passing" => TestStatus::Pass,
                "failing" => TestStatus::Fail,
                _ => TestStatus::Skip,
            };
            add(summary, status, n);
            self.in_details = true;
            self.stack.clear();
            return;
        }
        if indent < 2 || text.is_empty() {
            return;
        }
        if let Some(caps) = MOCHA_PASS.captures(text) {
            // A passing test after the details starts another run.
            self.in_details = false;
            let id = self.full_title(indent, &caps[1]);
            self.out.record(&id, TestStatus::Pass);
        } else if self.in_details {
            // Failure details (`1) Suite`, diffs, stacks) repeat tests already read.
        } else if let Some(caps) = MOCHA_FAIL.captures(text) {
            let title = &caps[1];
            let id = self.full_title(indent, title);
            // A failing hook (`"before all" hook for "x"`) stops the tests it guards; mocha
            // counts it among the failures.
            if title.contains("\" hook") {
                self.out
                    .record_counted_as(&id, TestStatus::Error, TestStatus::Fail);
            } else {
                self.out.record(&id, TestStatus::Fail);
            }
        } else if let Some(caps) = MOCHA_PENDING.captures(text) {
            let id = self.full_title(indent, &caps[1]);
            self.out.record(&id, TestStatus::Skip);
        } else {
            self.stack.retain(|(at, _)| *at < indent);
            self.stack.push((indent, text.to_owned()));
        }
    }

    fn finish(self: Box<Self>) -> ParsedLog {
        self.out.finish(self.summary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_compile() {
        for re in [
            &NODE_SPEC_RESULT,
            &NODE_SPEC_PARENT,
            &MOCHA_PASS,
            &MOCHA_FAIL,
            &MOCHA_PENDING,
            &MOCHA_TOTAL,
        ] {
            assert!(re.compiles());
        }
    }
}
