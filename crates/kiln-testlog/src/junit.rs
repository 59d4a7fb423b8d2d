//! Generic JUnit XML (`junit-xml`): surefire, gradle, ctest `--output-junit`, pytest `--junitxml`,
//! jest-junit, cargo-nextest, googletest `--gtest_output=xml`; several documents may be concatenated.
//!
//! Ids are `classname::name`, or `name` alone when the classname is empty or equal to the name
//! (ctest and pytest collection errors do that).

use kiln_schema::TestStatus;

use crate::util::{Collector, count};
use crate::xml::{Attrs, XmlEvent, attr, walk};
use crate::{parsed::ParsedLog, parsed::Summary};

struct Suite {
    totals: Option<Summary>,
    has_child_suite: bool,
}

struct Case {
    id: String,
    status: Option<TestStatus>,
    /// pytest's expected failure: a pass that the suite totals count as skipped.
    xfail: bool,
}

impl Case {
    fn record(self, out: &mut Collector, default: TestStatus) {
        let status = self.status.unwrap_or(default);
        if self.xfail && status == TestStatus::Pass {
            out.record_counted_as(&self.id, status, TestStatus::Skip);
        } else {
            out.record(&self.id, status);
        }
    }
}

/// Totals printed on a `<testsuite>`; `None` when it prints none.
fn suite_totals(attrs: &Attrs) -> Option<Summary> {
    let tests = count(attr(attrs, "tests")?);
    let get = |key: &str| attr(attrs, key).map_or(0, count);
    let failed = get("failures");
    let errors = get("errors");
    // `skipped` is the usual name; older tools wrote `skip`; googletest adds `disabled`.
    let skipped = get("skipped")
        .saturating_add(get("skip"))
        .saturating_add(get("disabled"));
    Some(Summary {
        passed: tests
            .saturating_sub(failed)
            .saturating_sub(errors)
            .saturating_sub(skipped),
        failed,
        skipped,
        errors,
    })
}

fn case_id(attrs: &Attrs) -> String {
    let name = attr(attrs, "name").unwrap_or("");
    match attr(attrs, "classname") {
        Some(class) if !class.is_empty() && class != name => format!("{class}::{name}"),
        _ => name.to_owned(),
    }
}

/// Status a `<testcase>` has before its children are read: googletest and ctest mark tests that
/// did not run with attributes rather than (only) a `<skipped>` child.
fn initial_status(attrs: &Attrs) -> Option<TestStatus> {
    let not_run = matches!(
        attr(attrs, "status"),
        Some("notrun" | "disabled" | "skipped")
    ) || matches!(attr(attrs, "result"), Some("skipped" | "suppressed"));
    not_run.then_some(TestStatus::Skip)
}

fn child_status(name: &str, attrs: &Attrs) -> Option<TestStatus> {
    Some(match name {
        "failure" => TestStatus::Fail,
        "error" => TestStatus::Error,
        // pytest reports an expected failure as skipped with this type; it counts as a pass.
        "skipped" if attr(attrs, "type") == Some("pytest.xfail") => TestStatus::Pass,
        "skipped" => TestStatus::Skip,
        // surefire's flakyFailure/rerunFailure describe earlier attempts; the outcome is decided
        // by `failure`/`error` alone.
        _ => return None,
    })
}

pub(crate) fn parse(log: &str) -> ParsedLog {
    let mut out = Collector::default();
    let mut suites: Vec<Suite> = Vec::new();
    let mut summary: Option<Summary> = None;
    let mut case: Option<Case> = None;
    let mut add_totals = |totals: Option<Summary>| {
        if let Some(t) = totals {
            let s = summary.get_or_insert_with(Summary::default);
            s.passed = s.passed.saturating_add(t.passed);
            s.failed = s.failed.saturating_add(t.failed);
            s.skipped = s.skipped.saturating_add(t.skipped);
            s.errors = s.errors.saturating_add(t.errors);
        }
    };
    let problems = walk(
        log,
        &["testsuites", "testsuite"],
        &mut |event| match event {
            XmlEvent::Start { name, attrs, empty } => match name {
                "testsuite" => {
                    if let Some(parent) = suites.last_mut() {
                        parent.has_child_suite = true;
                    }
                    let suite = Suite {
                        totals: suite_totals(attrs),
                        has_child_suite: false,
                    };
                    if empty {
                        add_totals(suite.totals);
                    } else {
                        suites.push(suite);
                    }
                }
                "testcase" => {
                    let new = Case {
                        id: case_id(attrs),
                        status: initial_status(attrs),
                        xfail: false,
                    };
                    if empty {
                        new.record(&mut out, TestStatus::Pass);
                    } else {
                        case = Some(new);
                    }
                }
                other => {
                    if let (Some(case), Some(status)) = (case.as_mut(), child_status(other, attrs))
                    {
                        case.xfail |= attr(attrs, "type") == Some("pytest.xfail");
                        let worse = match case.status {
                            Some(TestStatus::Fail | TestStatus::Error) => {
                                matches!(status, TestStatus::Error)
                            }
                            _ => true,
                        };
                        if worse {
                            case.status = Some(status);
                        }
                    }
                }
            },
            XmlEvent::End { name } => match name {
                "testcase" => {
                    if let Some(done) = case.take() {
                        done.record(&mut out, TestStatus::Pass);
                    }
                }
                "testsuite" => {
                    if let Some(suite) = suites.pop()
                        && !suite.has_child_suite
                    {
                        add_totals(suite.totals);
                    }
                }
                _ => {}
            },
        },
    );
    if let Some(open) = case.take() {
        // The document broke off inside this test case: it did not finish.
        open.record(&mut out, TestStatus::Error);
    }
    out.problems.extend(problems);
    out.finish(summary)
}
