//! Deterministic parsers from test-runner logs to per-test statuses.
//!
//! kiln runs test suites in containers and must know, per test, whether it passed. This crate turns
//! the text a runner printed into a [`ParsedLog`]: normalised test ids mapped to
//! [`TestStatus`], the totals the runner printed (if any), and the problems found when those totals
//! disagree with what was parsed (a truncated or garbled log).
//!
//! **Invariant:** this crate does no IO (no files, network or processes); [`parse_reader`] only
//! reads the reader its caller opened. Every parser is a pure function of its input text, never
//! panics, and gives the same output for the same input.
//!
//! Parser names are stable strings stored in datasets; [`parser_names`] lists them, [`parse`] runs
//! one, [`parse_reader`] runs one over a reader with bounded memory (see Streaming), [`detect`]
//! guesses one from a log's content, [`parse_many`] parses a batch in parallel.
//!
//! # Test ids
//!
//! Every id goes through [`normalize_test_id`]: ANSI codes, surrounding whitespace and a trailing
//! timing suffix are removed, and run-specific temporary directories become `<tmp>`.
//! When a log reports the same id more than once, the worst status wins
//! (error > fail > pass > skip), so a pass followed by a teardown error is an error.
//!
//! # Catalogue
//!
//! ## `pytest`
//! Reads `pytest -rA` output: the "short test summary info" lines (`PASSED id`, `FAILED id - msg`,
//! `ERROR id - msg`, `SKIPPED [n] path:line: reason`, `XFAIL id`, `XPASS id`), the `-v` per-test
//! lines (`id PASSED [ 50%]`, and the xdist form `[gw0] [ 50%] PASSED id`), and the final totals line
//! (`=== 1 failed, 2 passed, 1 skipped in 0.12s ===`, or bare under `-q`).
//! Status mapping: PASSED and XFAIL → pass; FAILED and XPASS → fail; SKIPPED → skip; ERROR → error
//! (a collection error `ERROR tests/t.py - ImportError` gives the file itself status error).
//! Totals: xfailed count as passed, xpassed as failed; deselected, warnings and reruns are ignored.
//! Limits: `-rA` names skipped tests by `path:line` (one id for all tests skipped at that line);
//! when `-v` lines name the skipped tests of that file, those node ids are used instead. The
//! ` - message` suffix is cut at the first ` - ` after the closing `]` of the params when the id is
//! parametrized, so a param containing `] - ` is cut short. Lines printed by tests themselves that
//! look like result lines are taken at face value. A failing test whose traceback (`E   X: msg`
//! in its FAILURES/ERRORS section) or summary message is an exception naming a missing network
//! ([`network::names_missing_network`]) is listed in [`ParsedLog::offline`].
//!
//! ## `unittest`
//! Python `unittest` / Django runner at verbosity 2: `test_x (mod.Class) ... ok` (before 3.11) and
//! `test_x (mod.Class.test_x) ... ok` (3.11+), including a docstring line standing in for the
//! outcome line and several headers on one line (3.10 subtests). Ids: `mod.Class.test_x`.
//! Mapping: ok and `expected failure` → pass; FAIL and `unexpected success` → fail; ERROR → error;
//! `skipped '...'` → skip; a failing subtest fails its test. The `FAIL:`/`ERROR:` detail sections
//! also set statuses. Totals from `Ran N tests` and `FAILED (failures=.., errors=.., skipped=..)`.
//! Limits: an import error is recorded under unittest's own `unittest.loader._FailedTest.<module>`;
//! a test with several failing subtests makes the totals disagree (unittest counts each).
//!
//! ## `go-test-json` and `go-test`
//! `go test -json` events (test2json), and the `-v` or plain text (`--- PASS: TestX (0.00s)` and
//! the `ok`/`FAIL` package lines). Ids: `<package>::<TestName>/<subtest>` in both. Mapping: pass,
//! fail, skip; a package that fails without a failing test (build failure, TestMain, panic before
//! tests) is recorded as the package id with status error. In JSON, results of tests that never
//! had a `run` event are ignored (test2json mistakes a test's own `--- FAIL:` output for a result),
//! and tests that started but never finished (timeout, crash) are errors with a problem noted.
//! In text, results need the ` (0.00s)` timing, which rejects printed look-alikes. Go prints no
//! totals, so there is no cross-check. Limits: text results after the last package line (a
//! truncated log) are kept without a package and reported. In JSON, a failed test whose output
//! names a missing network outside double quotes (Go's `dial tcp: lookup h on ...: connect:
//! network is unreachable`; not a `%q` of it) is listed in [`ParsedLog::offline`]; the text form
//! is not read for it.
//!
//! ## `cargo`
//! libtest text from `cargo test`, several binaries and doctests in one log. Ids are the names
//! libtest prints (`tests::t`, doctests `src/lib.rs - add` with the `(line N)` replaced by a rank,
//! `add`, `add#2`, so edits above an example do not rename it). Only a name that two binaries
//! both print is qualified by its target from the `Running` lines: `foo::lib::tests::t`,
//! `foo::bin::..`, `<test>::test::..`, `<bench>::bench::..`, `<ex>::example::..`, `foo::doc::..`.
//! Mapping: ok and bench → pass, FAILED → fail, ignored → skip. Totals: every `test result:` line
//! summed. Limits: old cargo (`Running target/debug/deps/foo-hash`) qualifies colliding names by
//! artifact only;
//! a compile error yields no tests (no totals to contradict). A failed test whose panic message
//! (the line after `panicked at ...:`, or quoted on it before Rust 1.73) names a missing network,
//! and is not an `assertion`, is listed in [`ParsedLog::offline`].
//!
//! ## `junit-xml`
//! Generic JUnit XML: surefire, gradle, ctest `--output-junit`, pytest `--junitxml`, jest-junit,
//! nextest, googletest and Catch2/doctest junit reporters. Several documents may be concatenated
//! with text between them; each `<?xml` starts a new one and a broken one is reported without
//! hiding the others. Ids: `classname::name`, or `name` when the classname is empty or equals the
//! name. Mapping: `<failure>` → fail, `<error>` → error, `<skipped>` (or googletest/ctest
//! `status="notrun"`/`result="skipped|suppressed"`) → skip, otherwise pass; pytest's
//! `<skipped type="pytest.xfail">` → pass; surefire `flakyFailure`/`rerunFailure` do not change
//! the outcome. A case cut off by the end of a document → error. Totals: the `tests`,
//! `failures`, `errors`, `skipped` attributes of innermost `<testsuite>`s. Limits: pytest writes
//! XPASS as a pass; jest-junit writes `test.todo` as a pass; Catch2 counts `[!mayfail]` failures
//! as passed and doctest counts a test with subcases once, so their totals disagree.
//!
//! ## `jest-json`, `vitest-json` and `mocha-json`
//! `jest --json` and `vitest --reporter=json` (same layout), found anywhere in the log.
//! Ids: `<file>::<describe> › <describe> › <title>`. Mapping: passed → pass, failed → fail,
//! pending/skipped/todo/disabled → skip; a file that failed before any test ran → the file id with
//! status error. Totals: `numPassedTests`, `numFailedTests`, pending + todo,
//! `numRuntimeErrorTestSuites`.
//! `mocha --reporter json`: ids `<file>::<full title>` (mocha only gives the space-joined title);
//! passes → pass, failures → fail (a failing `"before all" hook` → error), pending → skip; totals
//! from `stats`. Absolute file paths are kept as printed; [`ParsedLog::relative_to`] makes them
//! relative to the checkout, as kiln's stages do. A failed test whose thrown error is Node's
//! failure to resolve or reach a host (the error's `syscall` and `code`, its `cause`, or the first
//! line of its message; never a matcher's or an `AssertionError`) is listed in
//! [`ParsedLog::offline`]. Jest drops an error's `cause`, so its `fetch failed` is not told apart.
//!
//! ## `node-test` and `mocha-spec`
//! `node --test` with the TAP reporter (node 20's default without a TTY) or the spec reporter
//! (`✔ name (1.2ms)`, `▶ suite`); both give the same ids: names of suites and tests with
//! subtests joined with ` > ` (`suite a > deeper > deep passes`); parents are ids too.
//! Mapping: ok/✔ → pass, not ok/✖ → fail, `# SKIP`/﹣ and `# TODO` → skip, a test cancelled by
//! its parent (`failureType: 'cancelledByParent'`) → error. Totals: `# pass`, `# fail`,
//! `# skipped` + `# todo`, `# cancelled` (or `ℹ ...`); suites (YAML `type: 'suite'`) are not
//! counted, as node does not count them. Limits: the spec reporter prints a suite and a test with
//! subtests alike, so when their number differs from `suites N` the totals are kept but not
//! compared; the `✖ failing tests:` list at the end is skipped (each entry follows a
//! `test at file:line` line).
//! `mocha-spec`: mocha's default reporter. Ids are mocha's full titles (suite titles and test
//! title joined with a space), which is `mocha-json`'s id without its file. Structure comes from
//! indentation (a non-result line opens a suite). Mapping: ✔/✓ → pass, `N) title` → fail (a
//! failing `"before all" hook` → error), `- title` → skip. Totals from `N passing`, `N failing`,
//! `N pending`. Limits: console output of tests printed with indentation reads as a suite title;
//! after the totals, the failure details are skipped until the next passing test.
//!
//! ## `tap`
//! TAP 13/14 (Perl's Test::More, `prove -v`, node, other producers) with subtests indented by
//! four spaces. Ids: descriptions (`# SKIP`/`# TODO` directives cut off), subtests joined to
//! their parent with ` > `; a test without a description is `#<number>`; under `prove -v` each
//! script's `t/x.t ..` header prefixes its ids (`t/x.t::name`). Mapping: ok → pass, not ok →
//! fail, `# SKIP` and `# TODO` → skip (a todo's outcome is expected to be wrong). No totals;
//! instead a top-level plan (`1..N`) not met, subtest results without their parent's line (a
//! truncated log) and `Bail out!` are reported as problems. Limits: two tests with the same
//! description in one script share an id.
//!
//! ## `ctest`
//! CTest's text output, also with `-V` or `--output-on-failure` (the test output in between is
//! not read). Ids: test names. Mapping: Passed → pass; Failed, Timeout and Exception (a crash) →
//! fail; Skipped and Not Run (Disabled) → skip; Not Run (could not start) → error, counted as
//! failed as CTest does. Totals: `N% tests passed, M tests failed out of T` with the
//! `did not run` list: disabled tests are outside T, and tests skipped by their return code count
//! as passed in CTest's percentage, so passed = T − M − skipped-by-code.
//!
//! ## `gtest`
//! GoogleTest console output (`[       OK ] Suite.Test (0 ms)`, `[  FAILED  ]`, `[  SKIPPED ]`,
//! `[ DISABLED ]`), also inside `ctest -V` (`N: ` prefixes), and `--gtest_output=json` reports
//! (found by their lone `{` and `}` lines). Ids: `Suite.Test` as `--gtest_filter` takes them,
//! value-parametrized `Nums/ParamTest.IsEven/1` (the `, where GetParam() = 3` is cut off).
//! Mapping: OK → pass, FAILED → fail, SKIPPED and DISABLED → skip; a test that started
//! (`[ RUN      ]`) without a result → error (crash or timeout), with a problem noted.
//! Totals: `[  PASSED  ] N tests.`, `[  FAILED  ] N tests, listed below:`, `[  SKIPPED ] N
//! tests, ...` and `YOU HAVE N DISABLED TESTS` (counted as skipped); in JSON `failures`,
//! `errors`, `disabled`. Limits: googletest's JSON totals count skipped tests among passed ones,
//! so that split comes from the per-test results.
//!
//! ## `catch2` and `doctest`
//! XML reporters (Catch2 `-r xml`, v2 `<Catch>` and v3 `<Catch2TestRun>`; doctest `-r=xml`) and
//! console reporters (default, or `-s`). XML reports among console text are collected from the
//! line that opens them to the line that closes their root and read whole; the rest streams.
//! Ids: test case names (doctest: `suite::case` in a named test suite), plus one id per leaf
//! section or subcase, `case/section/subsection`. Mapping: a failed assertion → fail, an
//! unexpected exception or a crash → error (counted as failed, as both tools do), a Catch2
//! `[!mayfail]` case that failed → pass (XML), doctest `skipped="true"` → skip. Totals: test
//! cases only (`OverallResultsCases`, `OverallResultsTestCases`, `test cases: 5 | 1 passed |
//! 3 failed | 1 failed as expected`, `[doctest] test cases: ...`). Limits: the consoles name only
//! failing test cases unless run with `-s`, so only failures are compared with their totals;
//! the Catch2 console does not say which cases failed as expected, so they read as failed and a
//! problem says how many; long names that the console wraps are cut at the wrap.
//!
//! ## `status-lines`
//! `[PASSED] id`, `[FAILED] id`, `[SKIPPED] id` and `[ERROR] id` lines, one per test, with an
//! optional `[TOTALS] passed=N failed=N skipped=N errors=N` line: what a parser script written at
//! launch prints for a framework no parser here reads ([`status_lines`]). Every other line is
//! ignored. Totals: the `[TOTALS]` line, compared with the lines. Limits: not detected from
//! content; named by the row that has the script.
//!
//! # Streaming
//! [`parse_reader`] reads a log from any [`BufRead`] (the caller opens the file: this crate still
//! does no IO of its own) and gives the same result as [`parse`] on the same bytes. Line-oriented
//! parsers ([`parser_streams`]: `pytest`, `unittest`, `go-test`, `go-test-json`, `cargo`, `tap`,
//! `node-test`, `mocha-spec`, `ctest`, `gtest`, `catch2`, `doctest`, `status-lines`) hold one
//! line at a time plus per-test state, so memory grows with the number of distinct tests, not with the size of the
//! log; lines are cut at 1 MiB so a log without line breaks cannot defeat that. The XML reports
//! inside `catch2`/`doctest` logs and googletest's JSON reports are held while they are read.
//! `junit-xml`, `jest-json`, `vitest-json` and `mocha-json` parse one JSON or XML document and
//! read the whole text first.
//!
//! # The SWE-bench harness's parsers
//! [`swebench`] holds ports of the official harness's own parsers (`PARSER_REGISTRY` of
//! `swebench` 5.0.2: `parse_log_pytest`, `parse_log_pytest_v2`, `parse_log_cargo`,
//! `parse_log_gotest`, `parse_log_tap`), quirks included, and its grading of one test
//! (`harness_passed`, `harness_maintained`), so that validation can tell which of them reads a
//! run as kiln did. Formats without a harness parser have none
//! ([`swebench::harness_parsers`] is empty).

pub mod agree;
mod cargo;
mod catch2;
mod ctest;
mod cxx;
mod doctest;
mod go;
mod gtest;
mod js;
mod junit;
mod lines;
pub mod network;
mod node;
mod normalize;
mod parsed;
mod pytest;
pub mod status_lines;
pub mod swebench;
mod tap;
mod text;
mod unittest;
mod util;
mod xml;

use std::io::BufRead;

use rayon::prelude::*;

use crate::lines::LineParser;

pub use normalize::normalize_test_id;
pub use parsed::{ParsedLog, Summary};

/// The parser name given to [`parse`] is not one of [`parser_names`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("find the test-log parser `{name}` (known: {known})", known = PARSER_NAMES.join(", "))]
pub struct UnknownParser {
    /// The name that was asked for.
    pub name: String,
}

/// Stable parser names, in the order [`detect`] tries them.
const PARSER_NAMES: &[&str] = &[
    "pytest",
    "cargo",
    "go-test-json",
    "go-test",
    "junit-xml",
    "jest-json",
    "vitest-json",
    "mocha-json",
    "unittest",
    "node-test",
    "mocha-spec",
    "tap",
    "ctest",
    "gtest",
    "catch2",
    "doctest",
    "status-lines",
];

/// Why [`read_log`] could not read a log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadLogError {
    /// The parser asked for does not exist.
    #[error(transparent)]
    UnknownParser(#[from] UnknownParser),
    /// No parser was named and none recognises the log.
    #[error("read the log: no parser recognises its format; name one (known: {})", PARSER_NAMES.join(", "))]
    Unrecognised,
}

/// Reads a log as launch and validate read it: with `parser`, or with the parser [`detect`]
/// finds. Returns the parser's name and what it read.
///
/// # Errors
/// [`ReadLogError::UnknownParser`] for a name that is no parser, [`ReadLogError::Unrecognised`]
/// when no name is given and no parser recognises the log.
pub fn read_log(
    log: &str,
    parser: Option<&str>,
) -> Result<(&'static str, ParsedLog), ReadLogError> {
    let name = match parser {
        Some(name) => PARSER_NAMES
            .iter()
            .copied()
            .find(|known| *known == name)
            .ok_or_else(|| UnknownParser {
                name: name.to_string(),
            })?,
        None => detect(log, None).ok_or(ReadLogError::Unrecognised)?,
    };
    Ok((name, parse(name, log)?))
}

/// Names of every parser, as stored in datasets.
#[must_use]
pub fn parser_names() -> &'static [&'static str] {
    PARSER_NAMES
}

/// How a parser reads its input.
enum Engine {
    /// Line by line, keeping only per-test state: streams from a reader.
    Lines(fn() -> Box<dyn LineParser>),
    /// The whole text at once (JSON and XML documents).
    Text(fn(&str) -> ParsedLog),
}

fn engine(parser: &str) -> Result<Engine, UnknownParser> {
    Ok(match parser {
        "pytest" => Engine::Lines(|| Box::new(pytest::Pytest::default())),
        "cargo" => Engine::Lines(|| Box::new(cargo::Cargo::default())),
        "go-test-json" => Engine::Lines(|| Box::new(go::GoJson::default())),
        "go-test" => Engine::Lines(|| Box::new(go::GoText::default())),
        "junit-xml" => Engine::Text(junit::parse),
        "jest-json" | "vitest-json" => Engine::Text(js::parse_jest),
        "mocha-json" => Engine::Text(js::parse_mocha),
        "unittest" => Engine::Lines(|| Box::new(unittest::Unittest::default())),
        "mocha-spec" => Engine::Lines(|| Box::new(node::MochaSpec::default())),
        "node-test" => Engine::Lines(|| Box::new(node::NodeTest::default())),
        "tap" => Engine::Lines(|| Box::new(tap::Tap::new(false))),
        "ctest" => Engine::Lines(|| Box::new(cxx::CxxParser::<ctest::Ctest>::default())),
        "gtest" => Engine::Lines(|| Box::new(cxx::CxxParser::<gtest::Gtest>::default())),
        "catch2" => Engine::Lines(|| Box::new(cxx::CxxParser::<catch2::Catch2>::default())),
        "doctest" => Engine::Lines(|| Box::new(cxx::CxxParser::<doctest::Doctest>::default())),
        "status-lines" => Engine::Lines(|| Box::new(status_lines::StatusLines::default())),
        _ => {
            return Err(UnknownParser {
                name: parser.to_owned(),
            });
        }
    })
}

/// Parses `log` with the parser called `parser`.
///
/// # Errors
/// [`UnknownParser`] when `parser` is not one of [`parser_names`].
pub fn parse(parser: &str, log: &str) -> Result<ParsedLog, UnknownParser> {
    Ok(match engine(parser)? {
        Engine::Lines(new) => {
            let mut machine = new();
            lines::feed_str(machine.as_mut(), log);
            machine.finish()
        }
        Engine::Text(parse_text) => parse_text(log),
    })
}

/// Parses the log read from `reader` with the parser called `parser`, giving the same result as
/// [`parse`] on the same bytes (invalid UTF-8 is replaced with U+FFFD).
///
/// Line-oriented parsers (see [`parser_streams`]) read one line at a time and keep only per-test
/// state, so memory grows with the number of distinct tests, not with the size of the log. Parsers
/// of JSON and XML documents read the whole text first.
///
/// # Errors
/// [`ParseError::UnknownParser`] when `parser` is not one of [`parser_names`], and
/// [`ParseError::Read`] when reading fails.
pub fn parse_reader(parser: &str, reader: impl BufRead) -> Result<ParsedLog, ParseError> {
    match engine(parser)? {
        Engine::Lines(new) => {
            let mut machine = new();
            lines::feed_reader(machine.as_mut(), reader).map_err(ParseError::Read)?;
            Ok(machine.finish())
        }
        Engine::Text(parse_text) => {
            let mut bytes = Vec::new();
            let mut reader = reader;
            reader.read_to_end(&mut bytes).map_err(ParseError::Read)?;
            Ok(parse_text(&String::from_utf8_lossy(&bytes)))
        }
    }
}

/// Whether the parser called `parser` streams (reads line by line with memory bounded by the
/// number of tests) in [`parse_reader`]; `false` for parsers that read whole JSON or XML
/// documents.
///
/// # Errors
/// [`UnknownParser`] when `parser` is not one of [`parser_names`].
pub fn parser_streams(parser: &str) -> Result<bool, UnknownParser> {
    Ok(matches!(engine(parser)?, Engine::Lines(_)))
}

/// Why [`parse_reader`] failed.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// The parser name is not one of [`parser_names`].
    #[error(transparent)]
    UnknownParser(#[from] UnknownParser),
    /// Reading the log failed.
    #[error("read the test log")]
    Read(#[source] std::io::Error),
}

/// Parses many `(parser, log)` pairs in parallel; results are in input order.
#[must_use]
pub fn parse_many(jobs: &[(&str, &str)]) -> Vec<Result<ParsedLog, UnknownParser>> {
    jobs.par_iter()
        .map(|(parser, log)| parse(parser, log))
        .collect()
}

/// Guesses which parser reads `log`, from its content.
///
/// `hint` may be a parser name or the test command that produced the log; it breaks ties between
/// parsers that both recognise the log, and is used when the content is not recognised at all.
#[must_use]
pub fn detect(log: &str, hint: Option<&str>) -> Option<&'static str> {
    let hinted = hint.and_then(hint_to_parser);
    let candidates = detect::candidates(log);
    if let Some(hinted) = hinted
        && candidates.contains(&hinted)
    {
        return Some(hinted);
    }
    candidates.first().copied().or(hinted)
}

/// Maps a parser name or a test command to a parser name.
fn hint_to_parser(hint: &str) -> Option<&'static str> {
    let hint = hint.trim();
    if let Some(name) = PARSER_NAMES.iter().find(|name| **name == hint) {
        return Some(name);
    }
    detect::command_to_parser(hint)
}

mod detect;
