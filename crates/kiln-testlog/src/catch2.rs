//! Catch2 output (`catch2`): the XML reporter (`-r xml`, v2 `<Catch>` and v3 `<Catch2TestRun>`)
//! and the console reporter (default, or `-s` to list passing assertions too).
//!
//! Ids are test case names; a test case with sections also gives one id per leaf section path,
//! `case/section/subsection`, like the junit reporter names them. Only test cases are counted
//! for the totals, as Catch2 counts them.

use kiln_schema::TestStatus;

use crate::cxx::{
    CaseTree, ConsoleCases, ConsoleTotals, Framework, Marks, Reports, finish_totals, fold,
};
use crate::util::{Collector, Re, count};
use crate::xml::{XmlEvent, attr, walk};
use crate::{parsed::ParsedLog, parsed::Summary};

const ROOTS: &[&str] = &["Catch", "Catch2TestRun"];

/// Frames a console test case header: a line of dashes above and below the case name and its
/// indented sections.
static RULE: Re = Re::new(r"^-{20,}$");
/// Ends the console results, before the totals.
static DOUBLE_RULE: Re = Re::new(r"^={20,}$");
/// `/path/c2.cpp:4: FAILED:`, `...: PASSED:`, `...: SKIPPED:` (v3).
static ASSERTION: Re = Re::new(r"^.+:\d+: (FAILED|PASSED|SKIPPED):");
/// `test cases: 5 | 1 passed | 3 failed | 1 failed as expected`.
static CASE_TOTALS: Re = Re::new(r"^(?i:test cases):\s*(\d+)((?:\s*\|\s*\d+ [a-z ]+)*)\s*$");
static TOTALS_PART: Re = Re::new(r"^\s*(\d+) ([a-z ]+?)\s*$");
/// `All tests passed (6 assertions in 2 test cases)`.
static ALL_PASSED: Re = Re::new(r"^All tests passed \(\d+ assertions? in (\d+) test cases?\)");

/// Console state while reading one header or one block of results.
#[derive(Default)]
enum Console {
    /// Between blocks.
    #[default]
    Idle,
    /// Inside a header: the case name, then its sections.
    Header(Vec<String>),
    /// Reading the results of `path` (case name first).
    Block(Vec<String>, Option<TestStatus>),
}

/// Reads Catch2 output (through [`CxxParser`](crate::cxx::CxxParser)): the console line by
/// line, XML reports in it whole.
#[derive(Default)]
pub(crate) struct Catch2 {
    console: Console,
    /// Every test case seen in the console, counted once each at the end.
    console_cases: ConsoleCases,
    console_totals: Option<ConsoleTotals>,
    xml_summary: Option<Summary>,
}

impl Catch2 {
    fn end_block(&mut self, out: &mut Collector) {
        let Console::Block(path, status) = std::mem::replace(&mut self.console, Console::Idle)
        else {
            return;
        };
        let Some(case) = path.first() else {
            return;
        };
        let case = crate::normalize::normalize_test_id(case);
        let sections = (path.len() > 1).then(|| path.join("/"));
        self.console_cases
            .end_block(out, case, sections.as_deref(), status);
    }

    fn xml_document(&mut self, out: &mut Collector, text: &str) {
        let mut tree = CaseTree::default();
        let problems = walk(text, ROOTS, &mut |event| match event {
            XmlEvent::Start { name, attrs, empty } => match name {
                "TestCase" => {
                    tree.open_case(attr(attrs, "name").unwrap_or("").to_owned(), None);
                }
                "Section" if !empty => {
                    tree.open_branch(attr(attrs, "name").unwrap_or("").to_owned());
                }
                "Exception" | "FatalErrorCondition" => tree.threw(Marks::Innermost),
                "OverallResults" if attr(attrs, "failures").map_or(0, count) > 0 => {
                    tree.failed(Marks::Innermost);
                }
                "OverallResult" => {
                    let skipped = attr(attrs, "skips").map_or(0, count) > 0;
                    tree.set_status(match attr(attrs, "success") {
                        Some("true") if skipped => TestStatus::Skip,
                        Some("true") => TestStatus::Pass,
                        _ => TestStatus::Fail,
                    });
                }
                "OverallResultsCases" => {
                    let get = |key: &str| attr(attrs, key).map_or(0, count);
                    // The root's totals come last and cover every group.
                    tree.set_totals(Summary {
                        passed: get("successes").saturating_add(get("expectedFailures")),
                        failed: get("failures"),
                        skipped: get("skips"),
                        errors: 0,
                    });
                }
                _ => {}
            },
            XmlEvent::End { name } => match name {
                "Section" => tree.close_branch(out),
                "TestCase" => tree.close_case(out),
                _ => {}
            },
        });
        tree.end_report(out, problems, &mut self.xml_summary);
    }
}

/// Reads the parts after `test cases: N`: `| 1 passed | 3 failed | 1 failed as expected`.
fn console_totals(parts: &str) -> (Summary, u64) {
    let mut summary = Summary::default();
    let mut expected_failures = 0;
    for part in parts.split('|') {
        let Some(caps) = TOTALS_PART.captures(part) else {
            continue;
        };
        let n = count(&caps[1]);
        match &caps[2] {
            "passed" => summary.passed = summary.passed.saturating_add(n),
            "failed" => summary.failed = summary.failed.saturating_add(n),
            "failed as expected" => expected_failures = n,
            "skipped" => summary.skipped = summary.skipped.saturating_add(n),
            _ => {}
        }
    }
    // A test that failed as expected is a pass.
    summary.passed = summary.passed.saturating_add(expected_failures);
    (summary, expected_failures)
}

impl Framework for Catch2 {
    const REPORTS: Reports = Reports::Xml(ROOTS);

    fn console_line(&mut self, out: &mut Collector, line: &str) {
        if RULE.is_match(line) {
            match std::mem::replace(&mut self.console, Console::Idle) {
                Console::Header(path) => self.console = Console::Block(path, None),
                other => {
                    self.console = other;
                    self.end_block(out);
                    self.console = Console::Header(Vec::new());
                }
            }
            return;
        }
        if DOUBLE_RULE.is_match(line) {
            self.end_block(out);
            return;
        }
        match &mut self.console {
            Console::Header(path) => {
                let name = line.trim();
                if !name.is_empty() {
                    path.push(name.to_owned());
                }
            }
            Console::Block(_, status) => {
                let found = if let Some(caps) = ASSERTION.captures(line) {
                    match &caps[1] {
                        "FAILED" => Some(TestStatus::Fail),
                        "PASSED" => Some(TestStatus::Pass),
                        _ => Some(TestStatus::Skip),
                    }
                } else if line.starts_with("due to unexpected exception")
                    || line.starts_with("due to a fatal error condition")
                {
                    // The test did not fail a check: it threw or crashed.
                    Some(TestStatus::Error)
                } else {
                    None
                };
                if let Some(found) = found {
                    fold(status, found);
                }
            }
            Console::Idle => {
                if let Some(caps) = CASE_TOTALS.captures(line) {
                    let (summary, failed_as_expected) = console_totals(&caps[2]);
                    self.console_totals = Some(ConsoleTotals {
                        summary,
                        failed_as_expected,
                    });
                } else if let Some(caps) = ALL_PASSED.captures(line) {
                    let summary = Summary {
                        passed: count(&caps[1]),
                        ..Summary::default()
                    };
                    self.console_totals = Some(ConsoleTotals {
                        summary,
                        failed_as_expected: 0,
                    });
                }
            }
        }
    }

    fn report(&mut self, out: &mut Collector, text: &str) {
        self.xml_document(out, text);
    }

    fn finish(mut self, mut out: Collector) -> ParsedLog {
        self.end_block(&mut out);
        let console_failed = self.console_cases.record(&mut out);
        finish_totals(out, console_failed, self.xml_summary, self.console_totals)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_compile() {
        for re in [
            &RULE,
            &DOUBLE_RULE,
            &ASSERTION,
            &CASE_TOTALS,
            &TOTALS_PART,
            &ALL_PASSED,
        ] {
            assert!(re.compiles());
        }
    }

    #[test]
    fn totals() {
        let (summary, expected) = console_totals(" | 1 passed | 3 failed | 1 failed as expected");
        assert_eq!(expected, 1);
        assert_eq!(
            summary,
            Summary {
                passed: 2,
                failed: 3,
                skipped: 0,
                errors: 0
            }
        );
    }
}
