//! doctest output (`doctest`): the XML reporter (`-r=xml`) and the console reporter (default,
//! or `-s` to list passing assertions too).
//!
//! Ids are test case names, prefixed `suite::` when the test case is in a named test suite; a
//! test case with subcases also gives one id per leaf subcase path, `case/subcase/subcase`, like
//! the junit reporter names them. Only test cases are counted for the totals, as doctest counts
//! them.

use kiln_schema::TestStatus;

use crate::cxx::{
    CaseTree, ConsoleCases, ConsoleTotals, Framework, Marks, Reports, finish_totals, fold,
};
use crate::util::{Collector, Re, add_summary, count};
use crate::xml::{XmlEvent, attr, walk};
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

/// Reads doctest output (through [`CxxParser`](crate::cxx::CxxParser)): the console line by
/// line, XML reports in it whole.
#[derive(Default)]
pub(crate) struct Doctest {
    block: Option<Block>,
    /// Every console test case, counted once each at the end.
    console_cases: ConsoleCases,
    console_totals: Option<ConsoleTotals>,
    xml_summary: Option<Summary>,
}

impl Doctest {
    fn end_block(&mut self, out: &mut Collector) {
        let Some(block) = self.block.take() else {
            return;
        };
        let Some(case) = block.case else {
            return;
        };
        let id = case_id(
            block.suite.as_deref(),
            &crate::normalize::normalize_test_id(&case),
        );
        let path =
            (!block.subcases.is_empty()).then(|| format!("{id}/{}", block.subcases.join("/")));
        self.console_cases
            .end_block(out, id, path.as_deref(), block.status);
    }

    fn xml_document(&mut self, out: &mut Collector, text: &str) {
        let mut suite: Option<String> = None;
        let mut tree = CaseTree::default();
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
                        tree.open_case(id, skipped.then_some(TestStatus::Skip));
                    }
                }
                "SubCase" if !empty => {
                    tree.open_branch(attr(attrs, "name").unwrap_or("").to_owned());
                }
                "Expression" if attr(attrs, "success") == Some("false") => {
                    tree.failed(Marks::All);
                }
                "Exception" => tree.threw(Marks::All),
                "OverallResultsAsserts" => {
                    tree.set_status(match attr(attrs, "test_case_success") {
                        Some("true") => TestStatus::Pass,
                        _ => TestStatus::Fail,
                    });
                }
                "OverallResultsTestCases" => {
                    let get = |key: &str| attr(attrs, key).map_or(0, count);
                    tree.set_totals(Summary {
                        passed: get("successes"),
                        failed: get("failures"),
                        skipped: get("skipped"),
                        errors: 0,
                    });
                }
                _ => {}
            },
            XmlEvent::End { name } => match name {
                "SubCase" => tree.close_branch(out),
                "TestCase" => tree.close_case(out),
                "TestSuite" => suite = None,
                _ => {}
            },
        });
        tree.end_report(out, problems, &mut self.xml_summary);
    }
}

impl Framework for Doctest {
    const REPORTS: Reports = Reports::Xml(ROOTS);

    fn console_line(&mut self, out: &mut Collector, line: &str) {
        if RULE.is_match(line) {
            self.end_block(out);
            self.block = Some(Block {
                in_header: true,
                ..Block::default()
            });
            return;
        }
        if let Some(caps) = TOTALS.captures(line) {
            self.end_block(out);
            let totals = &mut self
                .console_totals
                .get_or_insert_with(ConsoleTotals::default)
                .summary;
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
        fold(&mut block.status, found);
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
        for re in [&RULE, &SUITE, &CASE, &ASSERTION, &TOTALS] {
            assert!(re.compiles());
        }
    }
}
