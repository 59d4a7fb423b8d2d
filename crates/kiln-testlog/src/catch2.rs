//! Catch2 output (`catch2`): the XML reporter (`-r xml`, v2 `<Catch>` and v3 `<Catch2TestRun>`)
//! and the console reporter (default, or `-s` to list passing assertions too).
//!
//! Ids are test case names; a test case with sections also gives one id per leaf section path,
//! `case/section/subsection`, like the junit reporter names them. Only test cases are counted
//! for the totals, as Catch2 counts them.

use std::collections::BTreeMap;

use kiln_schema::TestStatus;

use crate::lines::LineParser;
use crate::util::{Collector, Re, count, strip_ansi, worst};
use crate::xml::{DocumentLines, XmlEvent, attr, walk};
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
enum Console {
    /// Between blocks.
    Idle,
    /// Inside a header: the case name, then its sections.
    Header(Vec<String>),
    /// Reading the results of `path` (case name first).
    Block(Vec<String>, Option<TestStatus>),
}

/// Reads Catch2 output line by line; XML reports in it are collected and read whole.
pub(crate) struct Catch2 {
    out: Collector,
    console: Console,
    /// Worst status of every test case seen in the console, counted once each at the end.
    console_cases: BTreeMap<String, TestStatus>,
    /// Console totals: (summary, test cases that failed as expected).
    console_totals: Option<(Summary, u64)>,
    documents: DocumentLines,
    xml_summary: Option<Summary>,
}

impl Default for Catch2 {
    fn default() -> Self {
        Self {
            out: Collector::default(),
            console: Console::Idle,
            console_cases: BTreeMap::new(),
            console_totals: None,
            documents: DocumentLines::new(ROOTS),
            xml_summary: None,
        }
    }
}

impl Catch2 {
    fn end_block(&mut self) {
        let Console::Block(path, status) = std::mem::replace(&mut self.console, Console::Idle)
        else {
            return;
        };
        // A block without a failed assertion only appears under `-s`, for a passing run.
        let status = status.unwrap_or(TestStatus::Pass);
        let Some(case) = path.first() else {
            return;
        };
        let case = crate::normalize::normalize_test_id(case);
        if path.len() > 1 {
            self.out.record_uncounted(&path.join("/"), status);
        }
        self.console_cases
            .entry(case)
            .and_modify(|old| *old = worst(*old, status))
            .or_insert(status);
    }

    fn console_line(&mut self, line: &str) {
        if RULE.is_match(line) {
            match std::mem::replace(&mut self.console, Console::Idle) {
                Console::Header(path) => self.console = Console::Block(path, None),
                other => {
                    self.console = other;
                    self.end_block();
                    self.console = Console::Header(Vec::new());
                }
            }
            return;
        }
        if DOUBLE_RULE.is_match(line) {
            self.end_block();
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
                    *status = Some(status.map_or(found, |old| worst(old, found)));
                }
            }
            Console::Idle => {
                if let Some(caps) = CASE_TOTALS.captures(line) {
                    self.console_totals = Some(console_totals(&caps[2]));
                } else if let Some(caps) = ALL_PASSED.captures(line) {
                    let summary = Summary {
                        passed: count(&caps[1]),
                        ..Summary::default()
                    };
                    self.console_totals = Some((summary, 0));
                }
            }
        }
    }

    fn xml_document(&mut self, text: &str) {
        let mut case: Option<(String, Option<TestStatus>, bool)> = None;
        // Open sections: (name, has a child section, failed, threw).
        let mut sections: Vec<(String, bool, bool, bool)> = Vec::new();
        let mut root_totals: Option<Summary> = None;
        let out = &mut self.out;
        let problems = walk(text, ROOTS, &mut |event| match event {
            XmlEvent::Start { name, attrs, empty } => match name {
                "TestCase" => {
                    case = Some((attr(attrs, "name").unwrap_or("").to_owned(), None, false));
                    sections.clear();
                }
                "Section" if !empty => {
                    if let Some(parent) = sections.last_mut() {
                        parent.1 = true;
                    }
                    let name = attr(attrs, "name").unwrap_or("").to_owned();
                    sections.push((name, false, false, false));
                }
                "Exception" | "FatalErrorCondition" => {
                    if let Some(case) = case.as_mut() {
                        case.2 = true;
                    }
                    if let Some(section) = sections.last_mut() {
                        section.3 = true;
                    }
                }
                "OverallResults" => {
                    let failures = attr(attrs, "failures").map_or(0, count);
                    if let Some(section) = sections.last_mut()
                        && failures > 0
                    {
                        section.2 = true;
                    }
                }
                "OverallResult" => {
                    if let Some(case) = case.as_mut() {
                        let skipped = attr(attrs, "skips").map_or(0, count) > 0;
                        case.1 = Some(match attr(attrs, "success") {
                            Some("true") if skipped => TestStatus::Skip,
                            Some("true") => TestStatus::Pass,
                            _ => TestStatus::Fail,
                        });
                    }
                }
                "OverallResultsCases" => {
                    let get = |key: &str| attr(attrs, key).map_or(0, count);
                    // The root's totals come last and cover every group.
                    root_totals = Some(Summary {
                        passed: get("successes").saturating_add(get("expectedFailures")),
                        failed: get("failures"),
                        skipped: get("skips"),
                        errors: 0,
                    });
                }
                _ => {}
            },
            XmlEvent::End { name } => match name {
                "Section" => {
                    if let (Some((case_name, ..)), Some(section)) = (&case, sections.last()) {
                        let (_, has_child, failed, threw) = *section;
                        if !has_child {
                            let mut id = case_name.clone();
                            for (section, ..) in &sections {
                                id.push('/');
                                id.push_str(section);
                            }
                            let status = if threw {
                                TestStatus::Error
                            } else if failed {
                                TestStatus::Fail
                            } else {
                                TestStatus::Pass
                            };
                            out.record_uncounted(&id, status);
                        }
                    }
                    sections.pop();
                }
                "TestCase" => {
                    if let Some((name, status, threw)) = case.take() {
                        record_case(out, &name, status, threw);
                    }
                }
                _ => {}
            },
        });
        if let Some((name, _, _)) = case.take() {
            // The report broke off inside this test case.
            out.record(&name, TestStatus::Error);
        }
        out.problems.extend(problems);
        if let Some(totals) = root_totals {
            let summary = self.xml_summary.get_or_insert_with(Summary::default);
            crate::util::add_summary(summary, &totals);
        }
    }
}

/// Records an XML test case; Catch2 counts a test case that threw among the failed ones.
fn record_case(out: &mut Collector, name: &str, status: Option<TestStatus>, threw: bool) {
    match (status, threw) {
        (Some(TestStatus::Fail) | None, true) => {
            out.record_counted_as(name, TestStatus::Error, TestStatus::Fail);
        }
        (Some(status), _) => out.record(name, status),
        (None, false) => out.record(name, TestStatus::Pass),
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

impl LineParser for Catch2 {
    fn line(&mut self, raw_line: &str) {
        if let Some(document) = self.documents.line(raw_line) {
            self.xml_document(&document);
            return;
        }
        let line = strip_ansi(raw_line);
        self.console_line(line.trim_end());
    }

    fn finish(mut self: Box<Self>) -> ParsedLog {
        if let Some(document) = self.documents.finish() {
            self.xml_document(&document);
        }
        self.end_block();
        let mut out = self.out;
        // The console names only failing test cases unless run with `-s`, so only failures can
        // be compared with its totals.
        let mut console_failed = 0u64;
        for (case, status) in self.console_cases {
            if matches!(status, TestStatus::Fail | TestStatus::Error) {
                console_failed += 1;
            }
            out.record_uncounted(&case, status);
        }
        let mut summary = self.xml_summary;
        if let Some((totals, expected_failures)) = self.console_totals {
            let printed = totals.failed.saturating_add(expected_failures);
            if printed != console_failed {
                out.problems.push(format!(
                    "summary says {printed} failed but {console_failed} parsed"
                ));
            }
            if expected_failures > 0 {
                out.problems.push(format!(
                    "{expected_failures} test cases failed as expected; the console does not say \
                     which, so they read as failed"
                ));
            }
            let sum = summary.get_or_insert_with(Summary::default);
            crate::util::add_summary(sum, &totals);
        }
        match (self.xml_summary, self.console_totals) {
            (Some(xml), None) => out.finish(Some(xml)),
            _ => {
                let mut parsed = out.finish(None);
                parsed.summary = summary;
                parsed
            }
        }
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
