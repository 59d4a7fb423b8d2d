//! TAP 13/14 (`tap`), as printed by Perl's Test::More and `prove -v`, node's test runner and
//! other TAP producers, with indented subtests; [`crate::node`] reuses it for `node --test`.
//!
//! Ids are the test descriptions, subtests joined to their parent with ` > ` (`group a > deeper >
//! deep fails`); a test without a description is `#<number>`. Under `prove -v`, the `t/x.t ..`
//! header of each script prefixes its ids (`t/x.t::first passes`).
//!
//! A subtest's results come before the line of the test that holds them (`    ok 1 - inner`
//! then `not ok 5 - group a`), so they wait, one list per nesting level, until that line names
//! their parent; memory is bounded by the size of the largest open subtest.

use kiln_schema::TestStatus;

use crate::lines::LineParser;
use crate::util::{Collector, Re, add, count, strip_ansi};
use crate::{parsed::ParsedLog, parsed::Summary};

/// `ok 1 - description # SKIP reason`, after the indentation.
static RESULT: Re = Re::new(r"^(not ok|ok)\b(?:\s+(\d+))?(?:\s*-(?:\s|$))?\s*(.*)$");
/// A `# SKIP`/`# TODO` directive; `\#` in a description is an escaped hash, not a directive.
static DIRECTIVE: Re = Re::new(r"(?i)(?:^|[^\\])#\s*(skip\S*|todo)\b");
/// `1..N`, optionally with a `# SKIP` reason.
static PLAN: Re = Re::new(r"^1\.\.(\d+)\b");
/// `# Subtest: name` (TAP 14 and Test::More) announces the subtest whose results follow.
static SUBTEST: Re = Re::new(r"^#\s*Subtest:\s*(.*)$");
/// `prove -v` names each script before its TAP: `t/basic.t .. `.
static PROVE_HEADER: Re = Re::new(r"^(\S+) \.{2,}\s*$");
/// node's totals: `# tests 7`, or `ℹ tests 7` under the spec reporter.
static NODE_TOTAL: Re =
    Re::new(r"^(?:#|ℹ)\s+(tests|suites|pass|fail|cancelled|skipped|todo)\s+(\d+)\s*$");

/// Separator between a parent test and its subtests in ids.
pub(crate) const PATH_SEPARATOR: &str = " > ";

/// Results of one nesting level waiting for the line of their parent.
#[derive(Default)]
struct Level {
    /// Name announced by `# Subtest:` for the subtest that runs at this level.
    announced: Option<String>,
    /// (id relative to the parent, status).
    results: Vec<(String, TestStatus)>,
    plan: Option<u64>,
    /// Results read at this level since its plan was reset.
    ran: u64,
}

/// Totals node prints after a run.
#[derive(Default, Clone, Copy)]
pub(crate) struct NodeTotals {
    pub(crate) tests: u64,
    pub(crate) suites: u64,
    pub(crate) summary: Summary,
    pub(crate) seen: bool,
}

impl NodeTotals {
    /// Reads a `# pass 3` / `ℹ pass 3` line; false when `line` is not one.
    pub(crate) fn read(&mut self, line: &str) -> bool {
        let Some(caps) = NODE_TOTAL.captures(line) else {
            return false;
        };
        let n = count(&caps[2]);
        let field = match &caps[1] {
            "tests" => &mut self.tests,
            "suites" => &mut self.suites,
            "pass" => &mut self.summary.passed,
            "fail" => &mut self.summary.failed,
            // A cancelled test was stopped by its parent's failure or a timeout: it did not run
            // to a verdict of its own.
            "cancelled" => &mut self.summary.errors,
            // A todo test's outcome is not held against the suite.
            _ => &mut self.summary.skipped,
        };
        *field = field.saturating_add(n);
        self.seen = true;
        true
    }
}

/// Reads TAP line by line.
pub(crate) struct Tap {
    out: Collector,
    /// Levels by depth (4 spaces each); `levels[0]` holds the last top-level test and its subtree
    /// until the next top-level line, so a YAML block after it can still amend it.
    levels: Vec<Level>,
    /// Depth of the result whose YAML block (`---` ... `...`) is being read, if any.
    yaml: Option<usize>,
    /// The script `prove -v` named last.
    file: Option<String>,
    /// Reports counted for the cross-check with node's totals.
    events: Summary,
    /// Whether the last result can still be recounted by its YAML block.
    last_counted: Option<TestStatus>,
    /// node's `--test` TAP: YAML marks suites and cancelled tests, and totals follow the run.
    node: bool,
    pub(crate) totals: NodeTotals,
}

impl Tap {
    /// A generic TAP reader, or one that knows node's additions when `node` is set.
    pub(crate) fn new(node: bool) -> Self {
        Self {
            out: Collector::default(),
            levels: vec![Level::default()],
            yaml: None,
            file: None,
            events: Summary::default(),
            last_counted: None,
            node,
            totals: NodeTotals::default(),
        }
    }

    fn level(&mut self, depth: usize) -> &mut Level {
        if self.levels.len() <= depth {
            self.levels.resize_with(depth + 1, Level::default);
        }
        &mut self.levels[depth]
    }

    /// Records the top-level results held so far.
    fn flush_top(&mut self) {
        let results = std::mem::take(&mut self.levels[0].results);
        for (id, status) in results {
            match &self.file {
                Some(file) => self.out.record_uncounted(&format!("{file}::{id}"), status),
                None => self.out.record_uncounted(&id, status),
            }
        }
    }

    /// Ends a TAP stream (a new script, a new `TAP version`, the end of the log): results of
    /// subtests whose parent never printed its line are kept under their announced names, and a
    /// top-level plan that was not met is reported.
    fn end_stream(&mut self) {
        let mut orphans = false;
        for depth in (1..self.levels.len()).rev() {
            if self.levels[depth].results.is_empty() {
                continue;
            }
            orphans = true;
            let level = std::mem::take(&mut self.levels[depth]);
            let parent = level.announced.unwrap_or_else(|| "?".to_owned());
            let moved = level
                .results
                .into_iter()
                .map(|(id, status)| (format!("{parent}{PATH_SEPARATOR}{id}"), status));
            self.levels[depth - 1].results.extend(moved);
        }
        if orphans {
            self.out
                .problems
                .push("subtest results without their parent's result (log truncated?)".to_owned());
        }
        self.flush_top();
        let top = &self.levels[0];
        if let Some(plan) = top.plan
            && plan != top.ran
        {
            let file = self
                .file
                .as_deref()
                .map_or(String::new(), |f| format!("{f}: "));
            self.out.problems.push(format!(
                "{file}plan says {plan} tests but {} reported",
                top.ran
            ));
        }
        self.levels.truncate(1);
        self.levels[0] = Level::default();
    }

    fn result(&mut self, depth: usize, ok: bool, number: Option<&str>, rest: &str) {
        let (description, directive) = match DIRECTIVE.captures(rest) {
            Some(caps) => {
                // The match may start with the character before `#`, which can be wider than a
                // byte; `#` itself is ASCII, so its offset is a character boundary.
                let cut = caps
                    .get(0)
                    .map_or(0, |m| m.start() + m.as_str().find('#').unwrap_or(0));
                (rest[..cut].trim(), Some(caps[1].to_ascii_lowercase()))
            }
            None => (rest.trim(), None),
        };
        let status = match directive.as_deref() {
            // A todo's outcome is expected to be wrong either way, and a skip did not run.
            Some(_) => TestStatus::Skip,
            None if ok => TestStatus::Pass,
            None => TestStatus::Fail,
        };
        let name = if description.is_empty() {
            format!("#{}", number.unwrap_or("?"))
        } else {
            description.replace("\\#", "#")
        };
        if depth == 0 {
            self.flush_top();
        }
        // Deeper levels than our children's belong to a subtest that never closed.
        while self.levels.len() > depth + 2 {
            let level = self.levels.pop().unwrap_or_default();
            if !level.results.is_empty() {
                self.out
                    .problems
                    .push("subtest results without their parent's result".to_owned());
                let parent = level.announced.unwrap_or_else(|| "?".to_owned());
                let moved = level
                    .results
                    .into_iter()
                    .map(|(id, status)| (format!("{parent}{PATH_SEPARATOR}{id}"), status));
                self.level(depth + 1).results.extend(moved);
            }
        }
        let children = if self.levels.len() > depth + 1 {
            std::mem::take(&mut self.levels[depth + 1])
        } else {
            Level::default()
        };
        let level = self.level(depth);
        level.ran = level.ran.saturating_add(1);
        level.results.extend(
            children
                .results
                .into_iter()
                .map(|(id, status)| (format!("{name}{PATH_SEPARATOR}{id}"), status)),
        );
        // The test itself goes last, so that its YAML block can amend it.
        level.results.push((name, status));
        add(&mut self.events, status, 1);
        self.last_counted = Some(status);
        self.yaml = None;
    }

    /// Reads a line inside a YAML block: node marks suites (which its totals do not count) and
    /// tests cancelled by their parent.
    fn yaml_line(&mut self, depth: usize, text: &str) {
        if !self.node {
            return;
        }
        if text == "type: 'suite'" {
            if let Some(status) = self.last_counted.take() {
                sub(&mut self.events, status);
            }
        } else if text == "failureType: 'cancelledByParent'"
            && let Some(last) = self
                .levels
                .get_mut(depth)
                .and_then(|l| l.results.last_mut())
        {
            last.1 = TestStatus::Error;
            if let Some(status) = self.last_counted.take() {
                sub(&mut self.events, status);
                add(&mut self.events, TestStatus::Error, 1);
                self.last_counted = Some(TestStatus::Error);
            }
        }
    }

    /// Ends the stream and returns what was collected, with the reports counted for a
    /// cross-check.
    pub(crate) fn into_parts(mut self) -> (Collector, Summary) {
        self.end_stream();
        (self.out, self.events)
    }
}

fn sub(summary: &mut Summary, status: TestStatus) {
    let field = match status {
        TestStatus::Pass => &mut summary.passed,
        TestStatus::Fail => &mut summary.failed,
        TestStatus::Skip => &mut summary.skipped,
        TestStatus::Error => &mut summary.errors,
    };
    *field = field.saturating_sub(1);
}

impl LineParser for Tap {
    fn line(&mut self, raw_line: &str) {
        let line = strip_ansi(raw_line);
        let line = line.trim_end();
        let text = line.trim_start_matches(' ');
        let indent = line.len() - text.len();
        let text = text.trim_start();
        if let Some(depth) = self.yaml {
            if text == "..." {
                self.yaml = None;
            } else {
                self.yaml_line(depth, text);
            }
            return;
        }
        let depth = indent / 4;
        if text == "---" {
            self.yaml = Some(depth);
        } else if self.file.is_some() && indent == 0 && text == "ok" {
            // `prove -v` ends each script that passed with its own bare verdict `ok`; Test::More
            // numbers every result, so a bare `ok` is not one.
            self.end_stream();
        } else if let Some(caps) = RESULT.captures(text) {
            let number = caps.get(2).map(|m| m.as_str());
            self.result(depth, &caps[1] == "ok", number, &caps[3]);
        } else if let Some(caps) = SUBTEST.captures(text) {
            let name = caps[1].trim().to_owned();
            self.level(depth + 1).announced = Some(name);
        } else if let Some(caps) = PLAN.captures(text) {
            let plan = count(&caps[1]);
            let level = self.level(depth);
            level.plan = Some(plan);
        } else if text.starts_with("TAP version") && indent == 0 {
            self.end_stream();
        } else if let Some(reason) = text.strip_prefix("Bail out!") {
            self.out
                .problems
                .push(format!("bailed out:{}", reason.trim_end()));
        } else if self.node && indent == 0 && self.totals.read(text) {
            // Totals are read by `totals`.
        } else if !self.node
            && indent == 0
            && let Some(caps) = PROVE_HEADER.captures(text)
        {
            self.end_stream();
            self.file = Some(caps[1].to_owned());
        }
    }

    fn finish(self: Box<Self>) -> ParsedLog {
        let (out, _) = self.into_parts();
        out.finish(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_compile() {
        for re in [
            &RESULT,
            &DIRECTIVE,
            &PLAN,
            &SUBTEST,
            &PROVE_HEADER,
            &NODE_TOTAL,
        ] {
            assert!(re.compiles());
        }
    }
}
