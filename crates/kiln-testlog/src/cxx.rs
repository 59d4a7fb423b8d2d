//! What the C++ test-log parsers (googletest, Catch2, doctest, CTest) share.
//!
//! [`CxxParser`] is the one [`LineParser`] of all four: it finds the whole reports a framework
//! embeds among its console lines (XML for Catch2 and doctest, JSON for googletest), hands every
//! console line to the framework without colours or trailing space, and at the end gives the
//! framework a report the log cut off before it asks for the result. Each framework
//! ([`Framework`]) only says what its lines and reports mean.
//!
//! Catch2 and doctest also read alike: their console prints blocks of a test case (and its
//! sections or subcases) whose assertions decide its status ([`fold`], [`ConsoleCases`]), their
//! XML reports nest sections or subcases in a test case ([`CaseTree`]), and their console totals
//! are compared with the failures the console names, since only failures are named unless
//! passing assertions are listed too ([`finish_totals`]).

use std::collections::BTreeMap;

use kiln_schema::TestStatus;

use crate::lines::LineParser;
use crate::parsed::{ParsedLog, Summary};
use crate::util::{Collector, add_summary, strip_ansi, worst};
use crate::xml::DocumentLines;

/// How a framework embeds whole reports among its console lines.
pub(crate) enum Reports {
    /// It embeds none (CTest).
    None,
    /// XML documents whose root element is one of these (Catch2, doctest). The line that
    /// completes a report is read as part of the report only.
    Xml(&'static [&'static str]),
    /// JSON documents from a line `{` to a line `}` (googletest). Every line, those of a report
    /// included, is also console text: a test that prints a lone `{` must not hide the results
    /// after it, and no line of a report looks like a result.
    JsonBraces,
}

/// One C++ framework's reading of its output; [`CxxParser`] makes it a [`LineParser`].
pub(crate) trait Framework: Default {
    /// The reports the framework embeds among its console lines.
    const REPORTS: Reports;

    /// Reads one console line, without ANSI colours and trailing white space.
    fn console_line(&mut self, out: &mut Collector, line: &str);

    /// Reads one embedded report whole, or what the log holds of one it cut off.
    fn report(&mut self, out: &mut Collector, text: &str) {
        let _ = (out, text);
    }

    /// Ends the log: records what is still open and builds the result with the totals read.
    fn finish(self, out: Collector) -> ParsedLog;
}

/// A C++ framework's parser: the statuses collected, the report being read, and the
/// framework's own state.
pub(crate) struct CxxParser<F> {
    out: Collector,
    reports: ReportLines,
    framework: F,
}

impl<F: Framework> Default for CxxParser<F> {
    fn default() -> Self {
        Self {
            out: Collector::default(),
            reports: ReportLines::new(&F::REPORTS),
            framework: F::default(),
        }
    }
}

impl<F: Framework> LineParser for CxxParser<F> {
    fn line(&mut self, raw_line: &str) {
        let (report, console) = self.reports.line(raw_line);
        if let Some(text) = report {
            self.framework.report(&mut self.out, &text);
        }
        if console {
            let line = strip_ansi(raw_line);
            self.framework.console_line(&mut self.out, line.trim_end());
        }
    }

    fn finish(mut self: Box<Self>) -> ParsedLog {
        if let Some(text) = self.reports.finish() {
            self.framework.report(&mut self.out, &text);
        }
        let Self { out, framework, .. } = *self;
        framework.finish(out)
    }
}

/// The report being collected from the lines of a log, as [`Reports`] says to find them.
enum ReportLines {
    /// The framework embeds no reports.
    None,
    /// XML reports.
    Xml(DocumentLines),
    /// The JSON report open since its `{` line, if one is.
    Json(Option<String>),
}

impl ReportLines {
    fn new(reports: &Reports) -> Self {
        match reports {
            Reports::None => Self::None,
            Reports::Xml(roots) => Self::Xml(DocumentLines::new(roots)),
            Reports::JsonBraces => Self::Json(None),
        }
    }

    /// Reads one line: the report it completes, if any, and whether the line is console text.
    fn line(&mut self, raw_line: &str) -> (Option<String>, bool) {
        match self {
            Self::None => (None, true),
            Self::Xml(documents) => match documents.line(raw_line) {
                Some(document) => (Some(document), false),
                None => (None, true),
            },
            Self::Json(open) => {
                let mut complete = None;
                if let Some(json) = open.as_mut() {
                    json.push_str(raw_line);
                    json.push('\n');
                    if raw_line.trim_end() == "}" {
                        complete = open.take();
                    }
                } else if raw_line.trim_end() == "{" {
                    *open = Some(String::from("{\n"));
                }
                (complete, true)
            }
        }
    }

    /// The report still open at the end of the log (cut off), if any.
    fn finish(&mut self) -> Option<String> {
        match self {
            Self::None => None,
            Self::Xml(documents) => documents.finish(),
            Self::Json(open) => open.take(),
        }
    }
}

/// Folds one assertion's `found` status into a console block's: the worst report wins.
pub(crate) fn fold(status: &mut Option<TestStatus>, found: TestStatus) {
    *status = Some(status.map_or(found, |old| worst(old, found)));
}

/// The test cases a console reporter printed, each with the worst status of its blocks: a test
/// case can be printed in several blocks (one per section or subcase run), and is counted once.
#[derive(Default)]
pub(crate) struct ConsoleCases(BTreeMap<String, TestStatus>);

impl ConsoleCases {
    /// Ends a console block of test case `case` (its id) whose assertions said `status`: a pass
    /// when none did, since a block without a failed assertion only appears when passing
    /// assertions are listed too, for a passing run. `path`, the block's section or subcase
    /// path, is recorded uncounted (the totals count test cases).
    pub(crate) fn end_block(
        &mut self,
        out: &mut Collector,
        case: String,
        path: Option<&str>,
        status: Option<TestStatus>,
    ) {
        let status = status.unwrap_or(TestStatus::Pass);
        if let Some(path) = path {
            out.record_uncounted(path, status);
        }
        self.0
            .entry(case)
            .and_modify(|old| *old = worst(*old, status))
            .or_insert(status);
    }

    /// Records every test case, uncounted (the totals are compared by failures alone), and
    /// returns how many failed or erred.
    pub(crate) fn record(self, out: &mut Collector) -> u64 {
        let mut failed = 0u64;
        for (case, status) in self.0 {
            if matches!(status, TestStatus::Fail | TestStatus::Error) {
                failed += 1;
            }
            out.record_uncounted(&case, status);
        }
        failed
    }
}

/// The totals a console reporter printed.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ConsoleTotals {
    /// The totals, a test case that failed as expected among the passed ones.
    pub(crate) summary: Summary,
    /// Test cases that failed as expected (Catch2's `[!mayfail]`): the console names them
    /// among the failed ones, but does not say which they are.
    pub(crate) failed_as_expected: u64,
}

/// Builds the result of a log read by a console reporter and an XML reporter. Without console
/// totals the XML totals are compared with the reports parsed. With them, the console names
/// only failing test cases unless passing assertions are listed too, so only failures are
/// compared (`console_failed`, the failing test cases it named), and the summary is the XML's
/// and the console's together.
pub(crate) fn finish_totals(
    mut out: Collector,
    console_failed: u64,
    xml: Option<Summary>,
    console: Option<ConsoleTotals>,
) -> ParsedLog {
    let Some(console) = console else {
        return out.finish(xml);
    };
    let printed = console
        .summary
        .failed
        .saturating_add(console.failed_as_expected);
    if printed != console_failed {
        out.problems.push(format!(
            "summary says {printed} failed but {console_failed} parsed"
        ));
    }
    let expected_failures = console.failed_as_expected;
    if expected_failures > 0 {
        out.problems.push(format!(
            "{expected_failures} test cases failed as expected; the console does not say \
             which, so they read as failed"
        ));
    }
    let mut summary = xml.unwrap_or_default();
    add_summary(&mut summary, &console.summary);
    let mut parsed = out.finish(None);
    parsed.summary = Some(summary);
    parsed
}

/// Which of a test case's open sections an event of an XML report marks.
pub(crate) enum Marks {
    /// The innermost, where the event happened (Catch2 reports per section).
    Innermost,
    /// Every open one (doctest reports per test case, so a failure fails each enclosing
    /// subcase).
    All,
}

/// One open section (Catch2) or subcase (doctest).
struct Branch {
    name: String,
    /// It holds a section of its own: only leaf paths get an id.
    has_child: bool,
    failed: bool,
    threw: bool,
}

/// The test case an XML report is inside, with its open sections or subcases: a test case
/// gets its own status (an error when it threw, counted as failed as both tools count it),
/// and each leaf section path `case/section/subsection` gets an id, uncounted, as the junit
/// reporters name them.
#[derive(Default)]
pub(crate) struct CaseTree {
    /// The open test case: its id, the status the report gave it, and whether it threw.
    case: Option<(String, Option<TestStatus>, bool)>,
    /// Open sections, outermost first.
    branches: Vec<Branch>,
    /// The report's totals, once it gave them.
    totals: Option<Summary>,
}

impl CaseTree {
    /// A test case starts: `id`, with the status known from its start (doctest's skipped ones).
    pub(crate) fn open_case(&mut self, id: String, status: Option<TestStatus>) {
        self.case = Some((id, status, false));
        self.branches.clear();
    }

    /// The report gives the open test case's status.
    pub(crate) fn set_status(&mut self, status: TestStatus) {
        if let Some(case) = self.case.as_mut() {
            case.1 = Some(status);
        }
    }

    /// A section or subcase starts inside the innermost open one.
    pub(crate) fn open_branch(&mut self, name: String) {
        if let Some(parent) = self.branches.last_mut() {
            parent.has_child = true;
        }
        self.branches.push(Branch {
            name,
            has_child: false,
            failed: false,
            threw: false,
        });
    }

    /// An assertion failed in the sections `marks` names.
    pub(crate) fn failed(&mut self, marks: Marks) {
        for branch in self.marked(marks) {
            branch.failed = true;
        }
    }

    /// The test case threw (or crashed), in the sections `marks` names.
    pub(crate) fn threw(&mut self, marks: Marks) {
        if let Some(case) = self.case.as_mut() {
            case.2 = true;
        }
        for branch in self.marked(marks) {
            branch.threw = true;
        }
    }

    fn marked(&mut self, marks: Marks) -> &mut [Branch] {
        let from = match marks {
            Marks::Innermost => self.branches.len().saturating_sub(1),
            Marks::All => 0,
        };
        &mut self.branches[from..]
    }

    /// The innermost section ends; a leaf gets its path's id.
    pub(crate) fn close_branch(&mut self, out: &mut Collector) {
        if let (Some((case, ..)), Some(branch)) = (&self.case, self.branches.last())
            && !branch.has_child
        {
            let mut id = case.clone();
            for branch in &self.branches {
                id.push('/');
                id.push_str(&branch.name);
            }
            let status = if branch.threw {
                TestStatus::Error
            } else if branch.failed {
                TestStatus::Fail
            } else {
                TestStatus::Pass
            };
            out.record_uncounted(&id, status);
        }
        self.branches.pop();
    }

    /// The test case ends: it is recorded with its status.
    pub(crate) fn close_case(&mut self, out: &mut Collector) {
        if let Some((id, status, threw)) = self.case.take() {
            match (status, threw) {
                // Both tools count a test case that threw among the failed ones.
                (Some(TestStatus::Fail) | None, true) => {
                    out.record_counted_as(&id, TestStatus::Error, TestStatus::Fail);
                }
                (Some(status), _) => out.record(&id, status),
                (None, false) => out.record(&id, TestStatus::Pass),
            }
        }
    }

    /// The report gives its totals (the root's come last and cover every group).
    pub(crate) fn set_totals(&mut self, totals: Summary) {
        self.totals = Some(totals);
    }

    /// The report ends: a test case it broke off in is an error, the walk's `problems` are
    /// kept, and its totals are added to `summary`.
    pub(crate) fn end_report(
        mut self,
        out: &mut Collector,
        problems: Vec<String>,
        summary: &mut Option<Summary>,
    ) {
        if let Some((id, ..)) = self.case.take() {
            // The report broke off inside this test case.
            out.record(&id, TestStatus::Error);
        }
        out.problems.extend(problems);
        if let Some(totals) = self.totals {
            add_summary(summary.get_or_insert_with(Summary::default), &totals);
        }
    }
}
