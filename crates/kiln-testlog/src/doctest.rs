//! doctest output (`doctest`): the XML reporter (`-r=xml`) and the console reporter (default,
//! or `-s` to list passing assertions too).
//!
//! Ids are test case names, prefixed `suite::` when the test case is in a named test suite; a
//! test case with subcases also gives one id per leaf subcase path, `case/subcase/subcase`, like
//! the junit reporter names them. Only test cases are counted for the totals, as doctest counts
//! them.

use std::collections::BTreeMap;

use kiln_schema::TestStatus;

use crate::lines::LineParser;
use crate::util::{Collector, Re, add_summary, count, strip_ansi, worst};
use crate::xml::{DocumentLines, XmlEvent, attr, walk};
use crate::{parsed::ParsedLog, parsed::Summary};

const ROOTS: &[&str] = &["doctest"];

/// Separates console blocks.
static RULE: Re = Re::new(r"^={20,}$");
static SUITE: Re = Re::new(r"^TEST SUITE: (.*)$");
static CASE: Re = Re::new(r"^TEST CASE:\s+(.*)$");
/// `/path/dt.cpp:4: ERROR: CHECK( ... ) is NOT correct!`, `SUCCESS:`, `FATAL ERROR:`.
static ASSERTION: Re = Re::new(r"^.+:\d+: (ERROR|FATAL ERROR|SUCCESS): (.*)$");
/// `[doctest] test cases: 4 | 2 passed | 2 failed | 1 skipped` (older versions pad the numbers).
static TOTALS: Re = Re::new(
    r"^\[doctest\] test cases:\s*(\d+)\s*\|\s*(\d+) passed\s*\|\s*(\d+) failed\s*\|\s*(?:(\d+) skipped)?",
);

/// A console block: the test case and subcases it reports, and what its assertions said.
#[derive(Default)]
struct Block {
    suite: Option<String>,
    case: Option<String>,
    subcases: Vec<String>,
    /// Still reading the header (until the first blank line).
    in_header: bool,
    status: Option<TestStatus>,
}

fn case_id(suite: Option<&str>, case: &str) -> String {
    match suite {
        Some(suite) if !suite.is_empty() => format!("{suite}::{case}"),
        _ => case.to_owned(),
    }
}

/// Reads doctest output line by line; XML reports in it are collected and read whole.
pub(crate) struct Doctest {
    out: Collector,
    block: Option<Block>,
    /// Worst status of every console test case, counted once each at the end.
    console_cases: BTreeMap<String, TestStatus>,
    console_totals: Option<Summary>,
    documents: DocumentLines,
    xml_summary: Option<Summary>,
}

impl Default for Doctest {
    fn default() -> Self {
        Self {
            out: Collector::default(),
            block: None,
            console_cases: BTreeMap::new(),
            console_totals: None,
            documents: DocumentLines::new(ROOTS),
            xml_summary: None,
        }
    }
}

impl Doctest {
    fn end_block(&mut self) {
        let Some(block) = self.block.take() else {
            return;
        };
        let Some(case) = block.case else {
            return;
        };
        // A block without a failed assertion only appears under `-s`, for a passing run.
        let status = block.status.unwrap_or(TestStatus::Pass);
        let id = case_id(
            block.suite.as_deref(),
            &crate::normalize::normalize_test_id(&case),
        );
        if !block.subcases.is_empty() {
            let path = format!("{id}/{}", block.subcases.join("/"));
            self.out.record_uncounted(&path, status);
        }
        self.console_cases
            .entry(id)
            .and_modify(|old| *old = worst(*old, status))
            .or_insert(status);
    }

    fn console_line(&mut self, line: &str) {
        if RULE.is_match(line) {
            self.end_block();
            self.block = Some(Block {
                in_header: true,
                ..Block::default()
            });
            return;
        }
        if let Some(caps) = TOTALS.captures(line) {
            self.end_block();
            let totals = self.console_totals.get_or_insert_with(Summary::default);
            let get = |at: usize| caps.get(at).map_or(0, |m| count(m.as_str()));
            add_summary(
                totals,
                &Summary {
                    passed: get(2),
                    failed: get(3),
                    skipped: get(4),
                    errors: 0,
                },
            );
            return;
        }
        let Some(block) = self.block.as_mut() else {
            return;
        };
        if block.in_header {
            if line.trim().is_empty() {
                block.in_header = block.case.is_none();
            } else if let Some(caps) = SUITE.captures(line) {
                block.suite = Some(caps[1].trim().to_owned());
            } else if let Some(caps) = CASE.captures(line) {
                block.case = Some(caps[1].trim().to_owned());
            } else if block.case.is_some() {
                block.subcases.push(line.trim().to_owned());
            }
            return;
        }
        let found = if let Some(caps) = ASSERTION.captures(line) {
            match &caps[1] {
                "SUCCESS" => TestStatus::Pass,
                _ if caps[2].contains("THREW exception") => TestStatus::Error,
                _ => TestStatus::Fail,
            }
        } else if line.trim() == "crashed:" || line.contains("TEST CASE FAILED!") {
            // A crash (signal) ends the test case without a failed check.
            TestStatus::Error
        } else {
            return;
        };
        block.status = Some(block.status.map_or(found, |old| worst(old, found)));
    }

    fn xml_document(&mut self, text: &str) {
        let mut suite: Option<String> = None;
        // (id, status, threw).
        let mut case: Option<(String, Option<TestStatus>, bool)> = None;
        // Open subcases: (name, has a child subcase, failed, threw).
        let mut subcases: Vec<(String, bool, bool, bool)> = Vec::new();
        let mut totals: Option<Summary> = None;
        let out = &mut self.out;
        let problems = walk(text, ROOTS, &mut |event| match event {
            XmlEvent::Start { name, attrs, empty } => match name {
                "TestSuite" => suite = attr(attrs, "name").map(str::to_owned),
                "TestCase" => {
                    let id = case_id(suite.as_deref(), attr(attrs, "name").unwrap_or(""));
                    let skipped = attr(attrs, "skipped") == Some("true");
                    if empty {
                        let status = if skipped {
                            TestStatus::Skip
                        } else {
                            TestStatus::Pass
                        };
                        out.record(&id, status);
                    } else {
                        let status = skipped.then_some(TestStatus::Skip);
                        case = Some((id, status, false));
                        subcases.clear();
                    }
                }
                "SubCase" if !empty => {
                    if let Some(parent) = subcases.last_mut() {
                        parent.1 = true;
                    }
                    let name = attr(attrs, "name").unwrap_or("").to_owned();
                    subcases.push((name, false, false, false));
                }
                "Expression" if attr(attrs, "success") == Some("false") => {
                    for subcase in &mut subcases {
                        subcase.2 = true;
                    }
                }
                "Exception" => {
                    if let Some(case) = case.as_mut() {
                        case.2 = true;
                    }
                    for subcase in &mut subcases {
                        subcase.3 = true;
                    }
                }
                "OverallResultsAsserts" => {
                    if let Some(case) = case.as_mut() {
                        case.1 = Some(match attr(attrs, "test_case_success") {
                            Some("true") => TestStatus::Pass,
                            _ => TestStatus::Fail,
                        });
                    }
                }
                "OverallResultsTestCases" => {
                    let get = |key: &str| attr(attrs, key).map_or(0, count);
                    totals = Some(Summary {
                        passed: get("successes"),
                        failed: get("failures"),
                        skipped: get("skipped"),
                        errors: 0,
                    });
                }
                _ => {}
            },
            XmlEvent::End { name } => match name {
                "SubCase" => {
                    if let (Some((id, ..)), Some(&(_, has_child, failed, threw))) =
                        (&case, subcases.last())
                        && !has_child
                    {
                        let mut path = id.clone();
                        for (subcase, ..) in &subcases {
                            path.push('/');
                            path.push_str(subcase);
                        }
                        let status = if threw {
                            TestStatus::Error
                        } else if failed {
                            TestStatus::Fail
                        } else {
                            TestStatus::Pass
                        };
                        out.record_uncounted(&path, status);
                    }
                    subcases.pop();
                }
                "TestCase" => {
                    if let Some((id, status, threw)) = case.take() {
                        match (status, threw) {
                            // doctest counts a test case that threw among the failed ones.
                            (Some(TestStatus::Fail) | None, true) => {
                                out.record_counted_as(&id, TestStatus::Error, TestStatus::Fail);
                            }
                            (Some(status), _) => out.record(&id, status),
                            (None, false) => out.record(&id, TestStatus::Pass),
                        }
                    }
                }
                "TestSuite" => suite = None,
                _ => {}
            },
        });
        if let Some((id, ..)) = case.take() {
            // The report broke off inside this test case.
            out.record(&id, TestStatus::Error);
        }
        out.problems.extend(problems);
        if let Some(totals) = totals {
            add_summary(
                self.xml_summary.get_or_insert_with(Summary::default),
                &totals,
            );
        }
    }
}

impl LineParser for Doctest {
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
        match (self.xml_summary, self.console_totals) {
            (xml, None) => out.finish(xml),
            (xml, Some(console)) => {
                if console.failed != console_failed {
                    out.problems.push(format!(
                        "summary says {} failed but {console_failed} parsed",
                        console.failed
                    ));
                }
                let mut summary = xml.unwrap_or_default();
                add_summary(&mut summary, &console);
                let mut parsed = out.finish(None);
                parsed.summary = Some(summary);
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
        for re in [&RULE, &SUITE, &CASE, &ASSERTION, &TOTALS] {
            assert!(re.compiles());
        }
    }
}
