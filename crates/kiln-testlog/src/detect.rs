//! Content-based detection of the parser that reads a log.

use crate::util::{Re, strip_ansi};

static PYTEST_SESSION: Re =
    Re::new(r"(?m)^=+ (?:test session starts|short test summary info|FAILURES|ERRORS) =+\s*$");
static PYTEST_TOTALS: Re = Re::new(
    r"(?m)^=+ .*\b(?:passed|failed|error|errors|skipped|no tests ran)\b.* in [\d.]+s.*=+\s*$",
);
static PYTEST_XDIST: Re = Re::new(r"(?m)^\[gw\d+\] \[\s*\d+%\] (?:PASSED|FAILED|ERROR|SKIPPED)");
static GO_JSON: Re = Re::new(r#"(?m)^\{"Time":"[^"]*","Action":"#);
static GO_TEXT: Re = Re::new(
    r"(?m)^(?:\s*--- (?:PASS|FAIL|SKIP): \S.* \([\d.]+s\)|(?:ok|FAIL)\s+\S+\s+(?:[\d.]+s|\(cached\))|=== RUN\s+Test)",
);
static CARGO: Re = Re::new(
    r"(?m)^(?:test result: (?:ok|FAILED)\. \d+ passed; \d+ failed;|\s*Running (?:unittests )?\S+ \(.*deps/|\s*Doc-tests \S+$)",
);
static UNITTEST: Re =
    Re::new(r"(?m)^(?:Ran \d+ tests? in [\d.]+s$|\w+ \([\w.]+\) \.\.\. (?:ok|FAIL|ERROR|skipped))");
static JUNIT: Re = Re::new(r"<testsuite[\s>]");
static CTEST: Re =
    Re::new(r"(?m)^(?:\s*\d+/\d+ Test\s+#\d+: |\d+% tests passed, \d+ tests? failed out of \d+)");
static GTEST: Re = Re::new(
    r#"(?m)^(?:\d+: )?\[(?:==========\] Running \d+ tests?|       OK \] \S)|"status": "(?:RUN|NOTRUN)""#,
);
static CATCH2: Re = Re::new(
    r"(?m)<Catch(?:2TestRun)?[\s>]|^(?:test cases: \d+ \||All tests passed \(\d+ assertions? in)|is a Catch2? v\d",
);
static DOCTEST: Re = Re::new(r"\[doctest\] (?:test cases:|doctest version)|<doctest[\s>]");
static NODE_TEST: Re =
    Re::new(r"(?m)^(?:ℹ (?:tests|suites) \d+$|# (?:suites|cancelled) \d+$|\s+duration_ms: )");
static MOCHA_SPEC: Re = Re::new(r"(?m)^\s+\d+ passing \(\d+\w*\)\s*$");
static TAP: Re = Re::new(r"(?m)^(?:TAP version 1[34]\s*$|1\.\.\d+\b)");
static TAP_RESULT: Re = Re::new(r"(?m)^\s*(?:not )?ok \d+\b");

/// Parsers that recognise `log`, most specific first.
pub(crate) fn candidates(log: &str) -> Vec<&'static str> {
    let text = strip_ansi(log);
    let text = text.as_ref();
    let mut found = Vec::new();
    if GO_JSON.is_match(text) {
        found.push("go-test-json");
    }
    if text.contains("\"numTotalTestSuites\"") && text.contains("\"testResults\"") {
        // Only jest reports suites that failed to run as a separate count.
        if text.contains("\"numRuntimeErrorTestSuites\"") {
            found.push("jest-json");
        } else {
            found.push("vitest-json");
        }
    }
    if text.contains("\"stats\"") && text.contains("\"fullTitle\"") {
        found.push("mocha-json");
    }
    if JUNIT.is_match(text) && text.contains("<testcase") {
        found.push("junit-xml");
    }
    // CTest's verbose output holds the output of the googletest, Catch2 or doctest binaries it
    // runs, so it goes before them.
    if CTEST.is_match(text) {
        found.push("ctest");
    }
    if GTEST.is_match(text) {
        found.push("gtest");
    }
    if CATCH2.is_match(text) {
        found.push("catch2");
    }
    if DOCTEST.is_match(text) {
        found.push("doctest");
    }
    // node's TAP is TAP with additions, so node goes first.
    if NODE_TEST.is_match(text) {
        found.push("node-test");
    }
    if MOCHA_SPEC.is_match(text) {
        found.push("mocha-spec");
    }
    if TAP.is_match(text) && TAP_RESULT.is_match(text) {
        found.push("tap");
    }
    if PYTEST_SESSION.is_match(text) || PYTEST_TOTALS.is_match(text) || PYTEST_XDIST.is_match(text)
    {
        found.push("pytest");
    }
    if CARGO.is_match(text) {
        found.push("cargo");
    }
    if UNITTEST.is_match(text) {
        found.push("unittest");
    }
    if GO_TEXT.is_match(text) {
        found.push("go-test");
    }
    found
}

/// Maps a test command such as `pytest -rA tests/` to a parser name.
pub(crate) fn command_to_parser(command: &str) -> Option<&'static str> {
    let words: Vec<&str> = command.split_whitespace().collect();
    let has = |word: &str| {
        words
            .iter()
            .any(|w| *w == word || w.ends_with(&format!("/{word}")))
    };
    let json = command.contains("json");
    if has("pytest") || has("py.test") || command.contains("-m pytest") {
        return Some("pytest");
    }
    if has("go") && has("test") {
        return Some(if has("-json") {
            "go-test-json"
        } else {
            "go-test"
        });
    }
    if has("cargo") && has("test") {
        return Some("cargo");
    }
    if has("jest") && json {
        return Some("jest-json");
    }
    if has("vitest") && json {
        return Some("vitest-json");
    }
    if has("mocha") && json {
        return Some("mocha-json");
    }
    if has("mocha") {
        return Some("mocha-spec");
    }
    if has("node") && has("--test") {
        return Some("node-test");
    }
    if has("ctest") {
        return Some("ctest");
    }
    if command.contains("--gtest") {
        return Some("gtest");
    }
    if command.contains("doctest") {
        return Some("doctest");
    }
    if has("prove") || has("tape") {
        return Some("tap");
    }
    if command.contains("unittest") || command.contains("manage.py test") || has("runtests.py") {
        return Some("unittest");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_compile() {
        for re in [
            &PYTEST_SESSION,
            &PYTEST_TOTALS,
            &PYTEST_XDIST,
            &GO_JSON,
            &GO_TEXT,
            &CARGO,
            &UNITTEST,
            &JUNIT,
            &CTEST,
            &GTEST,
            &CATCH2,
            &DOCTEST,
            &NODE_TEST,
            &MOCHA_SPEC,
            &TAP,
            &TAP_RESULT,
        ] {
            assert!(re.compiles());
        }
    }

    #[test]
    fn commands() {
        assert_eq!(
            command_to_parser("go test -json ./..."),
            Some("go-test-json")
        );
        assert_eq!(command_to_parser("go test -v ./..."), Some("go-test"));
        assert_eq!(
            command_to_parser("cargo test --no-fail-fast"),
            Some("cargo")
        );
        assert_eq!(command_to_parser("npx jest --json"), Some("jest-json"));
        assert_eq!(
            command_to_parser("./tests/runtests.py -v 2"),
            Some("unittest")
        );
        assert_eq!(command_to_parser("node --test"), Some("node-test"));
        assert_eq!(command_to_parser("npx mocha test/"), Some("mocha-spec"));
        assert_eq!(
            command_to_parser("npx mocha --reporter json"),
            Some("mocha-json")
        );
        assert_eq!(
            command_to_parser("ctest --output-on-failure"),
            Some("ctest")
        );
        assert_eq!(
            command_to_parser("./build/unit --gtest_brief=1"),
            Some("gtest")
        );
        assert_eq!(command_to_parser("prove -v t/"), Some("tap"));
        assert_eq!(command_to_parser("make check"), None);
    }
}
