//! `go test` output: the `-json` event stream ("go-test-json") and the `-v` text ("go-test").
//!
//! Ids are `<package>::<TestName>/<subtest>` so that two packages with the same test name do not
//! collide, and both parsers give the same ids for the same run.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};

use kiln_schema::TestStatus;

use crate::lines::LineParser;
use crate::parsed::ParsedLog;
use crate::util::{Collector, Re, strip_ansi};

/// `--- PASS: TestX/sub (0.00s)`; the timing is required, which rejects output that a test printed
/// itself (`--- FAIL: whatever`).
static RESULT_LINE: Re =
    Re::new(r"^\s*--- (PASS|FAIL|SKIP): (.+) \((?:\d+(?:\.\d+)?s|[\d.]+ ?[a-zµ]+)\)\s*$");
/// Per-package verdicts: `ok  \tpkg\t0.01s`, `FAIL\tpkg [build failed]`, `?   \tpkg\t[no test files]`.
static PACKAGE_LINE: Re = Re::new(r"^(ok|FAIL|\?)\s+(\S+)(?:\s+(.*))?$");

fn status_of(word: &str) -> Option<TestStatus> {
    Some(match word {
        "PASS" | "pass" => TestStatus::Pass,
        "FAIL" | "fail" => TestStatus::Fail,
        "SKIP" | "skip" => TestStatus::Skip,
        _ => return None,
    })
}

fn qualify(package: &str, test: &str) -> String {
    format!("{package}::{test}")
}

/// Reads the `go test -v` text line by line.
///
/// Results are held until the package verdict line that follows them (go prints each package's
/// output in one block), and qualified with that package.
#[derive(Default)]
pub(crate) struct GoText {
    out: Collector,
    pending: Vec<(String, TestStatus)>,
}

impl LineParser for GoText {
    fn line(&mut self, raw_line: &str) {
        let line = strip_ansi(raw_line);
        let line = line.trim_end();
        if let Some(caps) = RESULT_LINE.captures(line) {
            if let Some(status) = status_of(&caps[1]) {
                self.pending.push((caps[2].to_owned(), status));
            }
        } else if let Some(caps) = PACKAGE_LINE.captures(line) {
            let package = &caps[2];
            let any_failed = self.pending.iter().any(|(_, s)| *s == TestStatus::Fail);
            for (test, status) in self.pending.drain(..) {
                self.out.record(&qualify(package, &test), status);
            }
            // A failed package without a failed test did not run its tests: a build failure,
            // a panic in TestMain or a timeout. The package itself carries the error.
            if &caps[1] == "FAIL" && !any_failed {
                self.out.record(package, TestStatus::Error);
            }
        }
    }

    fn finish(self: Box<Self>) -> ParsedLog {
        let mut out = self.out;
        if !self.pending.is_empty() {
            out.problems.push(format!(
                "{} results after the last package line have no package (log truncated?)",
                self.pending.len()
            ));
            for (test, status) in self.pending {
                out.record(&test, status);
            }
        }
        out.finish(None)
    }
}

/// Reads the `go test -json` event stream (test2json) line by line. Lines that are not JSON (the
/// compiler's build errors on stderr, a `FAIL pkg [build failed]` line) are read as text.
#[derive(Default)]
pub(crate) struct GoJson {
    out: Collector,
    /// Qualified ids of tests that had a `run` event, with whether a result followed.
    started: HashMap<String, bool>,
    failed_packages: BTreeSet<String>,
    packages_with_failed_tests: BTreeSet<String>,
    /// Qualified ids of tests whose output names a missing network.
    said_offline: BTreeSet<String>,
}

impl LineParser for GoJson {
    fn line(&mut self, raw_line: &str) {
        let line = raw_line.trim();
        if !line.starts_with('{') {
            let line = strip_ansi(line);
            if let Some(caps) = PACKAGE_LINE.captures(&line)
                && &caps[1] == "FAIL"
            {
                self.failed_packages.insert(caps[2].to_owned());
            }
            return;
        }
        let Ok(event) = serde_json::from_str::<Event<'_>>(line) else {
            return;
        };
        let Some(action) = event.action.as_deref() else {
            return;
        };
        let package = event
            .package
            .as_deref()
            .or(event.import_path.as_deref())
            .unwrap_or("");
        match (event.test.as_deref(), action) {
            (Some(test), "run") => {
                self.started.insert(qualify(package, test), false);
            }
            (Some(test), "output")
                if event.output.as_deref().is_some_and(names_missing_network) =>
            {
                self.said_offline.insert(qualify(package, test));
            }
            (Some(_), "output") => {}
            (Some(test), action) => {
                let Some(status) = status_of(action) else {
                    return;
                };
                let id = qualify(package, test);
                // test2json also turns a test's own output such as `--- FAIL: x` into events; a
                // real test always had a `run` event first (go prints `run` before any result).
                let any_run = !self.started.is_empty();
                match self.started.get_mut(&id) {
                    Some(done) => *done = true,
                    None if any_run => return,
                    None => {}
                }
                if status == TestStatus::Fail {
                    self.packages_with_failed_tests.insert(package.to_owned());
                }
                self.out.record(&id, status);
                if status == TestStatus::Fail && self.said_offline.contains(&id) {
                    self.out.record_offline(&id);
                }
            }
            (None, "fail" | "build-fail") => {
                self.failed_packages.insert(package.to_owned());
            }
            _ => {}
        }
    }

    fn finish(self: Box<Self>) -> ParsedLog {
        let mut out = self.out;
        let mut unfinished: Vec<&String> = self
            .started
            .iter()
            .filter(|(_, done)| !**done)
            .map(|(id, _)| id)
            .collect();
        unfinished.sort();
        if !unfinished.is_empty() {
            // A timeout or a crash ends the binary while tests run; they did not pass.
            out.problems.push(format!(
                "{} tests started but never finished",
                unfinished.len()
            ));
            for id in unfinished {
                out.record(id, TestStatus::Error);
            }
        }
        for package in self.failed_packages {
            if !package.is_empty() && !self.packages_with_failed_tests.contains(&package) {
                out.record(&package, TestStatus::Error);
            }
        }
        out.finish(None)
    }
}

/// The fields of a test2json event that matter here, borrowed from the line when unescaped.
#[derive(serde::Deserialize)]
struct Event<'a> {
    #[serde(rename = "Action", borrow)]
    action: Option<Cow<'a, str>>,
    #[serde(rename = "Package", borrow)]
    package: Option<Cow<'a, str>>,
    #[serde(rename = "ImportPath", borrow)]
    import_path: Option<Cow<'a, str>>,
    #[serde(rename = "Test", borrow)]
    test: Option<Cow<'a, str>>,
    #[serde(rename = "Output", borrow)]
    output: Option<Cow<'a, str>>,
}

/// Whether a line a Go test printed says a host could not be resolved or reached: Go's errors
/// (`dial tcp: lookup host on 10.0.0.2:53: ... connect: network is unreachable`) outside the
/// double-quoted strings of the line, where a `t.Errorf("got %q", ...)` would quote them.
fn names_missing_network(output: &str) -> bool {
    let mut unquoted = String::with_capacity(output.len());
    let mut quoted = false;
    let mut escaped = false;
    for c in output.chars() {
        match (quoted, escaped, c) {
            (true, true, _) => escaped = false,
            (true, false, '\\') => escaped = true,
            (_, false, '"') => quoted = !quoted,
            (false, _, c) => unquoted.push(c),
            (true, false, _) => {}
        }
    }
    crate::network::names_missing_network(&unquoted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_compile() {
        for re in [&RESULT_LINE, &PACKAGE_LINE] {
            assert!(re.compiles());
        }
    }

    #[test]
    fn a_missing_network_in_quotes_is_what_a_test_compared() {
        assert!(names_missing_network(
            "    x_test.go:12: Get \"http://h/f\": dial tcp: lookup h: no such host\n"
        ));
        assert!(!names_missing_network(
            "    x_test.go:34: got \"lookup h: no such host\", want \"x\"\n"
        ));
        assert!(!names_missing_network(
            "    x_test.go:34: got \"say \\\"lookup h: no such host\\\"\", want \"\"\n"
        ));
    }
}
