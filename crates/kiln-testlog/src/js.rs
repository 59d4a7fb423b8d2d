//! JSON reports of JavaScript runners: `jest --json` ("jest-json"), `vitest --reporter=json`
//! ("vitest-json", the same layout) and `mocha --reporter json` ("mocha-json").
//!
//! Jest and vitest ids are `<file>::<describe> › <describe> › <title>` (jest's own separator);
//! mocha's JSON only has the space-joined full title, so mocha ids are `<file>::<full title>`.

use kiln_schema::TestStatus;
use serde_json::Value;

use crate::util::Collector;
use crate::{parsed::ParsedLog, parsed::Summary};

/// At most this many candidate objects are tried, so a log full of `{` lines stays linear-ish.
const MAX_ATTEMPTS: usize = 64;

/// Finds the first JSON object in `log` that has the key `key`. Runners print other text around
/// the report (warnings, console output on stderr), so the object may start on any line.
fn find_report(log: &str, key: &str) -> Option<Value> {
    let mut attempts = 0;
    let mut offset = 0;
    for line in log.split_inclusive('\n') {
        let start = offset + (line.len() - line.trim_start().len());
        offset += line.len();
        if !line.trim_start().starts_with('{') {
            continue;
        }
        attempts += 1;
        if attempts > MAX_ATTEMPTS {
            break;
        }
        let mut stream = serde_json::Deserializer::from_str(&log[start..]).into_iter::<Value>();
        if let Some(Ok(value)) = stream.next()
            && value.get(key).is_some()
        {
            return Some(value);
        }
    }
    None
}

fn number(value: &Value, key: &str) -> u64 {
    value.get(key).and_then(Value::as_u64).unwrap_or(0)
}

fn text<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or("")
}

/// Parses the jest/vitest JSON report.
pub(crate) fn parse_jest(log: &str) -> ParsedLog {
    let mut out = Collector::default();
    let Some(report) = find_report(log, "testResults") else {
        return out.finish(None);
    };
    let mut suite_errors = 0u64;
    for file in report
        .get("testResults")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let path = text(file, "name");
        let tests = file
            .get("assertionResults")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        if tests.is_empty() && text(file, "status") == "failed" {
            // The file failed before any test ran (syntax error, missing module): the file itself
            // carries the error.
            suite_errors += 1;
            out.record(path, TestStatus::Error);
            continue;
        }
        for test in tests {
            let mut titles: Vec<&str> = test
                .get("ancestorTitles")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            titles.push(text(test, "title"));
            let status = match text(test, "status") {
                "passed" => TestStatus::Pass,
                "failed" => TestStatus::Fail,
                // pending, skipped, todo, disabled, focused-out: did not run.
                _ => TestStatus::Skip,
            };
            let id = format!("{path}::{}", titles.join(" › "));
            out.record(&id, status);
            if status == TestStatus::Fail && jest_failed_offline(test) {
                out.record_offline(&id);
            }
        }
    }
    let summary = Summary {
        passed: number(&report, "numPassedTests"),
        failed: number(&report, "numFailedTests"),
        skipped: number(&report, "numPendingTests").saturating_add(number(&report, "numTodoTests")),
        errors: report
            .get("numRuntimeErrorTestSuites")
            .and_then(Value::as_u64)
            .unwrap_or(suite_errors),
    };
    out.finish(Some(summary))
}

/// Parses the mocha JSON report.
pub(crate) fn parse_mocha(log: &str) -> ParsedLog {
    let mut out = Collector::default();
    let Some(report) = find_report(log, "stats") else {
        return out.finish(None);
    };
    for (key, status) in [
        ("passes", TestStatus::Pass),
        ("failures", TestStatus::Fail),
        ("pending", TestStatus::Skip),
    ] {
        for test in report
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let title = text(test, "fullTitle");
            let id = match test.get("file").and_then(Value::as_str) {
                Some(file) => format!("{file}::{title}"),
                None => title.to_owned(),
            };
            // A failing hook (`"before all" hook for "x"`) stops the tests it guards; mocha
            // counts it among the failures.
            if status == TestStatus::Fail && text(test, "title").contains("\" hook") {
                out.record_counted_as(&id, TestStatus::Error, TestStatus::Fail);
            } else {
                out.record(&id, status);
            }
            if status == TestStatus::Fail && test.get("err").is_some_and(thrown_offline) {
                out.record_offline(&id);
            }
        }
    }
    let summary = report.get("stats").map(|stats| Summary {
        passed: number(stats, "passes"),
        failed: number(stats, "failures"),
        skipped: number(stats, "pending"),
        errors: 0,
    });
    out.finish(summary)
}

/// Whether a failed jest/vitest test failed for want of a network: one of its failures is an
/// error Node raised resolving or reaching a host (`failureDetails` keeps the error's own
/// fields: `syscall`, `code`), or, for runners that keep no details, the first line of its
/// message says so. A matcher's failure (`expect(...)`, with `matcherResult`) never counts:
/// its message may quote such text.
fn jest_failed_offline(test: &Value) -> bool {
    let details = test
        .get("failureDetails")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if details.iter().any(|d| d.get("matcherResult").is_some()) {
        return false;
    }
    details.iter().any(thrown_offline)
        || test
            .get("failureMessages")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .any(first_line_offline)
}

/// Whether an error object of a JSON report (Node's error fields: `syscall`, `code`, a
/// `cause`; or its `stack`/`message` text) is a failure to resolve or reach a host. Undici's
/// `fetch failed` says which only in its `cause`. An assertion's error never counts.
fn thrown_offline(err: &Value) -> bool {
    let resolving = matches!(
        (text(err, "syscall"), text(err, "code")),
        (
            "getaddrinfo" | "queryA" | "queryAaaa",
            "EAI_AGAIN" | "ENOTFOUND" | "EAI_NONAME" | "EAI_FAIL"
        ) | ("connect", "ENETUNREACH" | "EHOSTUNREACH")
    );
    let said = [text(err, "stack"), text(err, "message")]
        .into_iter()
        .any(first_line_offline);
    resolving || said || err.get("cause").is_some_and(thrown_offline)
}

/// Whether the first line of an error's text (`Error: getaddrinfo EAI_AGAIN host`) names a
/// missing network; an `AssertionError`'s (chai, `node:assert`) quotes what it compared.
fn first_line_offline(text: &str) -> bool {
    let first = text.lines().next().unwrap_or("");
    !first.trim_start().starts_with("AssertionError")
        && crate::network::names_missing_network(first)
}
