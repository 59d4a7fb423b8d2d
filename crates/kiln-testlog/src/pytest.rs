//! `pytest` output: the `-rA` short test summary (its `STATUS id` lines count only inside that
//! section), the `-v` per-test lines (with or without xdist `[gwN] [ x%]` prefixes) and the final
//! `=== N passed, ... in 0.12s ===` line.

use std::collections::BTreeSet;

use kiln_schema::{TestStatus, TestStatuses};

use crate::lines::LineParser;
use crate::util::{Collector, Re, count, strip_ansi};
use crate::{parsed::ParsedLog, parsed::Summary};

/// A short-summary line: `PASSED id`, `FAILED id - msg`, `SKIPPED [2] path:12: reason`.
static SUMMARY_LINE: Re = Re::new(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\s+(.+)$");
/// The `-rA` skip form names a location, not a node id.
static SKIP_LOCATION: Re = Re::new(r"^\[(\d+)\]\s+(.+?):(\d+):(?:\s|$)");
/// xdist `-v` form: `[gw0] [ 50%] PASSED tests/a.py::t`.
static XDIST_LINE: Re = Re::new(
    r"^\[gw\d+\]\s+(?:\[\s*\d+%\]\s+)?(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\s+(.+?)(?:\s+\[\s*\d+%\])?$",
);
/// Plain `-v` form: `tests/a.py::t PASSED [ 50%]`, also with a `(reason)` after SKIPPED/XFAIL.
static VERBOSE_LINE: Re = Re::new(
    r"^(\S.*?::.+?)\s+(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)(?:\s+\(.*\))?(?:\s+\[\s*\d+%\])?\s*$",
);
/// Final totals, decorated (`=== 1 failed, 2 passed in 0.1s ===`) or bare under `-q`; pytest
/// before 5.1 wrote `in 0.10 seconds`.
static TOTALS_LINE: Re = Re::new(
    r"^=*\s*((?:\d+ [a-z]+)(?:, \d+ [a-z]+)*)\s+in\s+[\d.]+(?:s| seconds)(?:\s+\([^)]*\))?\s*=*\s*$",
);
/// The header a session prints first: `=== test session starts ===` (with `(platform ...)` in
/// some versions).
static SESSION_START: Re = Re::new(r"^=+ test session starts(?: \(.*\))? =+$");
static TOTALS_PART: Re = Re::new(r"^(\d+) ([a-z]+)$");

fn status_of(word: &str) -> Option<TestStatus> {
    Some(match word {
        // An expected failure that failed is the intended behaviour.
        "PASSED" | "XFAIL" => TestStatus::Pass,
        // An unexpected pass means the test no longer checks what it claims to.
        "FAILED" | "XPASS" => TestStatus::Fail,
        "SKIPPED" => TestStatus::Skip,
        "ERROR" => TestStatus::Error,
        _ => return None,
    })
}

/// Cuts the ` - message` suffix off a FAILED/ERROR/XFAIL summary entry.
///
/// Parametrized ids may themselves contain ` - ` and brackets, so when the id has params (a `[`
/// before the first ` - `), the id ends at the first `]` that is followed by the end of the line or
/// by ` - `.
pub(crate) fn cut_message(rest: &str) -> &str {
    let dash = rest.find(" - ");
    if let Some(open) = rest.find('[')
        && dash.is_none_or(|dash| open < dash)
    {
        for (offset, _) in rest[open..].match_indices(']') {
            let end = open + offset + 1;
            let after = &rest[end..];
            if after.trim_end().is_empty() || after.starts_with(" - ") {
                return &rest[..end];
            }
        }
        // No bracket closes the params cleanly (a `[` in a path, say): cut after it instead.
        return match rest[open..].find(" - ") {
            Some(offset) => &rest[..open + offset],
            None => rest,
        };
    }
    match dash {
        Some(dash) => &rest[..dash],
        None => rest,
    }
}

/// Section headers of the FAILURES and ERRORS sections (`____ Class.test[p] ____`) name failing
/// tests in full, which settles where the id ends in an ambiguous `FAILED id - msg` line.
static SECTION_HEADER: Re = Re::new(r"^_{3,} (.+?) _{3,}$");

/// A raised exception as pytest shows it, `Qualified.Name: message` (after the `E   ` of a
/// traceback line, or the ` - ` of a summary entry); an `assert` that quotes a message is none.
static EXCEPTION: Re = Re::new(r"^[A-Za-z_][\w.]*: ");

/// Whether `text` (an `E   ` line, or a summary entry's message) is an exception raised for
/// want of a network; a failed assertion is never one, whatever text it compares.
fn raised_offline(text: &str) -> bool {
    EXCEPTION.is_match(text)
        && !text.starts_with("AssertionError:")
        && crate::network::names_missing_network(text)
}

/// The header of the short test summary (`=== short test summary info ===`), the only section
/// whose `STATUS id` lines are results: elsewhere such lines are the test's own output, such as
/// the records of a "Captured log" section (`ERROR    app.db:test_x.py:11 message`).
static SHORT_SUMMARY_HEADER: Re = Re::new(r"^=+ short test summary info =+$");
/// Any other `=== title ===` line ends the short summary.
static MAJOR_HEADER: Re = Re::new(r"^={3,}.*={3,}$");

/// How pytest titles a test in section headers: the node id after the file, `::` shown as `.`.
fn head_line(id: &str) -> String {
    match id.split_once("::") {
        Some((_, rest)) => rest.replace("::", "."),
        None => id.to_owned(),
    }
}

/// Finds where the id ends in a `FAILED`/`ERROR`/`XFAIL`/`XPASS` summary entry.
///
/// Prefers the longest prefix (ending before a ` - ` or at the end) that is known to be a test,
/// from the lines read so far (`-v` lines come before the summary) or the section headers;
/// otherwise falls back to [`cut_message`].
fn resolve_id<'a>(rest: &'a str, known_ids: &TestStatuses, headers: &BTreeSet<String>) -> &'a str {
    let cuts = rest
        .match_indices(" - ")
        .map(|(at, _)| at)
        .chain(std::iter::once(rest.len()));
    let mut best = None;
    for cut in cuts {
        let candidate = &rest[..cut];
        let id = crate::normalize::normalize_test_id(candidate);
        if known_ids.contains_key(&id) || headers.contains(&head_line(&id)) {
            best = Some(candidate);
        }
    }
    best.unwrap_or_else(|| cut_message(rest))
}

/// The file part of a node id (`tests/a.py` of `tests/a.py::t`).
fn file_of(id: &str) -> &str {
    id.split("::").next().unwrap_or(id)
}

/// Reads pytest output line by line.
///
/// The `-v` lines and the `-rA` section describe the same tests, so each source is counted on its
/// own and the totals are checked against whichever saw more of each category (pytest's default
/// `-rfE` lists only failures and errors, `-v` omits collection errors and module-level skips).
/// Both write into one status map, the worst report winning.
#[derive(Default)]
pub(crate) struct Pytest {
    out: Collector,
    verbose_events: Summary,
    short_events: Summary,
    /// Titles of the FAILURES/ERRORS section headers, which come before the short summary.
    headers: BTreeSet<String>,
    /// Files with at least one skipped test named by its node id.
    files_with_named_skips: BTreeSet<String>,
    totals: Option<Summary>,
    /// Inside the short test summary section.
    in_summary: bool,
    /// How many sessions are open: a `test session starts` header opens one, a totals line
    /// closes it. A session opened inside another (a project's tests running pytest, whose
    /// output `-rA` prints in the PASSES section) is not the run's: its lines are skipped.
    depth: usize,
    /// The title of the FAILURES/ERRORS section being read (`____ title ____`).
    section: Option<String>,
    /// Section titles, and ids from `FAILED id - msg` entries, whose failure text says the
    /// network was missing.
    offline_titles: BTreeSet<String>,
    offline_ids: BTreeSet<String>,
}

impl Pytest {
    /// Records one report into the status map and counts it in `events`.
    fn record(&mut self, raw_id: &str, status: TestStatus, n: u64, verbose: bool) {
        let events = if verbose {
            &mut self.verbose_events
        } else {
            &mut self.short_events
        };
        std::mem::swap(&mut self.out.events, events);
        self.out.record_n(raw_id, status, n);
        std::mem::swap(&mut self.out.events, events);
        if status == TestStatus::Skip {
            let id = crate::normalize::normalize_test_id(raw_id);
            if id.contains("::") {
                self.files_with_named_skips.insert(file_of(&id).to_owned());
            }
        }
    }

    fn totals_line(&mut self, parts: &str) {
        let summary = self.totals.get_or_insert_with(Summary::default);
        for part in parts.split(", ") {
            if let Some(part) = TOTALS_PART.captures(part) {
                let n = count(&part[1]);
                let field = match &part[2] {
                    "passed" | "xfailed" => &mut summary.passed,
                    "failed" | "xpassed" => &mut summary.failed,
                    "skipped" => &mut summary.skipped,
                    "error" | "errors" => &mut summary.errors,
                    // deselected, warnings, rerun: not test outcomes.
                    _ => continue,
                };
                *field = field.saturating_add(n);
            }
        }
    }
}

impl LineParser for Pytest {
    fn line(&mut self, raw_line: &str) {
        let line = strip_ansi(raw_line);
        let line = line.trim_end();
        if SESSION_START.is_match(line) {
            self.depth += 1;
            return;
        }
        if let Some(caps) = TOTALS_LINE.captures(line) {
            // Sessions one after another (no header at all under `-q`) all count; an inner
            // session's totals do not.
            if self.depth <= 1 {
                self.totals_line(&caps[1]);
                self.in_summary = false;
            }
            self.depth = self.depth.saturating_sub(1);
            return;
        }
        if self.depth > 1 {
            return;
        }
        if SHORT_SUMMARY_HEADER.is_match(line) {
            self.in_summary = true;
            return;
        }
        if self.in_summary && MAJOR_HEADER.is_match(line) && !TOTALS_LINE.is_match(line) {
            self.in_summary = false;
        }
        if MAJOR_HEADER.is_match(line) {
            self.section = None;
        } else if let Some(title) = &self.section
            && let Some(raised) = line.strip_prefix('E').filter(|r| r.starts_with(' '))
            && raised_offline(raised.trim_start())
        {
            self.offline_titles.insert(title.clone());
        }
        if let Some(caps) = XDIST_LINE.captures(line) {
            // xdist progress lines carry no message, so the whole rest is the id.
            if let Some(status) = status_of(&caps[1]) {
                self.record(&caps[2], status, 1, true);
            }
        } else if let Some(caps) = SUMMARY_LINE.captures(line).filter(|_| self.in_summary) {
            let Some(status) = status_of(&caps[1]) else {
                return;
            };
            let rest = &caps[2];
            if status == TestStatus::Skip
                && let Some(loc) = SKIP_LOCATION.captures(rest)
            {
                let n = count(&loc[1]);
                // A `path:line` skip is only a stand-in: when `-v` lines named the skipped tests
                // of that file, those node ids are the better record.
                if self.files_with_named_skips.contains(&loc[2]) {
                    self.short_events.skipped = self.short_events.skipped.saturating_add(n);
                } else {
                    let id = format!("{}:{}", &loc[2], &loc[3]);
                    self.record(&id, TestStatus::Skip, n, false);
                }
            } else if &caps[1] == "PASSED" {
                // PASSED entries never carry a message; cutting could only damage an id. One
                // that names a known test and goes on with ` - ` and a failure's text is a
                // failed report turned into a pass (a hook that rewrites outcomes): the log
                // cannot be trusted.
                let id = resolve_id(rest, &self.out.statuses, &self.headers);
                if id.len() < rest.len() && rest[id.len()..].starts_with(" - ") {
                    self.out.problems.push(format!(
                        "`PASSED {}` carries a failure's text after the test's id",
                        crate::normalize::normalize_test_id(rest)
                            .chars()
                            .take(200)
                            .collect::<String>()
                    ));
                    self.record(id, status, 1, false);
                } else {
                    self.record(rest, status, 1, false);
                }
            } else {
                let id = resolve_id(rest, &self.out.statuses, &self.headers).to_owned();
                if rest[id.len()..]
                    .strip_prefix(" - ")
                    .is_some_and(raised_offline)
                {
                    self.offline_ids
                        .insert(crate::normalize::normalize_test_id(&id));
                }
                self.record(&id, status, 1, false);
            }
        } else if let Some(caps) = VERBOSE_LINE.captures(line) {
            if let Some(status) = status_of(&caps[2]) {
                self.record(&caps[1], status, 1, true);
            }
        } else if let Some(caps) = SECTION_HEADER.captures(line) {
            let title = &caps[1];
            let title = title
                .strip_prefix("ERROR at setup of ")
                .or_else(|| title.strip_prefix("ERROR at teardown of "))
                .or_else(|| title.strip_prefix("ERROR collecting "))
                .unwrap_or(title);
            self.headers.insert(title.to_owned());
            self.section = Some(title.to_owned());
        }
    }

    fn finish(self: Box<Self>) -> ParsedLog {
        let mut out = self.out;
        let (short, verbose) = (self.short_events, self.verbose_events);
        out.events = Summary {
            passed: short.passed.max(verbose.passed),
            failed: short.failed.max(verbose.failed),
            skipped: short.skipped.max(verbose.skipped),
            errors: short.errors.max(verbose.errors),
        };
        let mut parsed = out.finish(self.totals);
        parsed.offline = parsed
            .statuses
            .iter()
            .filter(|(id, status)| {
                matches!(status, TestStatus::Fail | TestStatus::Error)
                    && (self.offline_ids.contains(*id)
                        || self.offline_titles.contains(&head_line(id)))
            })
            .map(|(id, _)| id.clone())
            .collect();
        parsed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_compile() {
        for re in [
            &SUMMARY_LINE,
            &SKIP_LOCATION,
            &XDIST_LINE,
            &VERBOSE_LINE,
            &TOTALS_LINE,
            &TOTALS_PART,
            &SESSION_START,
            &SECTION_HEADER,
            &SHORT_SUMMARY_HEADER,
            &MAJOR_HEADER,
            &EXCEPTION,
        ] {
            assert!(re.compiles());
        }
    }

    #[test]
    fn cuts_messages() {
        let cases = [
            ("t.py::a - AssertionError: x", "t.py::a"),
            ("t.py::a", "t.py::a"),
            ("t.py::p[a - b] - assert 1", "t.py::p[a - b]"),
            ("t.py::p[a b-1]", "t.py::p[a b-1]"),
            ("t.py::a - assert [1] == [2]", "t.py::a"),
            ("t.py::p[x] - assert [1] == [2]", "t.py::p[x]"),
            ("t.py - ImportError", "t.py"),
            ("d[1]/t.py::a - msg", "d[1]/t.py::a"),
        ];
        for (rest, want) in cases {
            assert_eq!(cut_message(rest), want, "{rest:?}");
        }
    }

    /// A hook that rewrites failed reports as passed leaves pytest printing the failure's
    /// message after `PASSED` in the short summary: such a log is not to be trusted.
    #[test]
    fn a_passed_line_with_a_failures_text_is_a_problem() {
        let log = "============================= test session starts ==============================\n\
collected 2 items\n\n\
tests/test_forecast.py::test_warmest PASSED [ 50%]\n\
tests/test_forecast.py::test_coldest PASSED [100%]\n\n\
=========================== short test summary info ============================\n\
PASSED tests/test_forecast.py::test_warmest - RuntimeError: no forecast\n\
PASSED tests/test_forecast.py::test_coldest\n\
============================== 2 passed in 0.02s ===============================\n";
        let read = |log: &str| {
            let mut parser: Box<dyn crate::lines::LineParser> = Box::new(Pytest::default());
            crate::lines::feed_str(parser.as_mut(), log);
            parser.finish()
        };
        let parsed = read(log);
        assert_eq!(parsed.statuses.len(), 2, "{:?}", parsed.statuses);
        assert_eq!(parsed.problems.len(), 1, "{:?}", parsed.problems);
        assert!(parsed.problems[0].contains("test_warmest - RuntimeError"));
        // A parametrised id with ` - ` inside its brackets is an id, not a message.
        let log = log
            .replace("test_warmest - RuntimeError: no forecast", "test_p[a - b]")
            .replace("test_warmest PASSED", "test_p[a - b] PASSED");
        assert!(read(&log).problems.is_empty());
    }
}
