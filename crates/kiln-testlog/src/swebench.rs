//! The SWE-bench harness's own log parsers (`swebench.harness.log_parsers`, release 5.0.2),
//! ported line for line, so that kiln can tell, before it writes a release, whether the official
//! harness will read a test run the way kiln did.
//!
//! A release row names one of these in `log_parser`; the harness looks it up in its
//! `PARSER_REGISTRY` and grades the run with it. The ports keep the originals' quirks (pytest's
//! ids are cut at the first whitespace by `parse_log_pytest`, cargo's `ignored` is not recorded,
//! and so on): agreeing with the harness is the point, not reading the log well.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;

/// The harness's statuses (`swebench.harness.constants.TestStatus`).
pub const HARNESS_STATUSES: [&str; 5] = ["FAILED", "PASSED", "SKIPPED", "ERROR", "XFAIL"];

/// A status map as the harness builds it: test id to one of [`HARNESS_STATUSES`] (or, for the
/// pytest parsers, whatever word the line started with).
pub type HarnessStatuses = BTreeMap<String, String>;

/// The harness parsers that may read the output of kiln's parser `kiln_parser`, best first.
/// Empty when the harness has none for that format.
#[must_use]
pub fn harness_parsers(kiln_parser: &str) -> &'static [&'static str] {
    match kiln_parser {
        // v2 keeps parametrised ids with spaces whole; v1 cuts them at the first space.
        "pytest" => &["parse_log_pytest_v2", "parse_log_pytest"],
        // Through kiln's output filter (see `cargo_ids.awk`): `parse_log_cargo` reads the ids
        // of tests, `parse_log_jest_json` (a `[PASSED] <id>` line reader) those of doctests too.
        "cargo" => &["parse_log_cargo", "parse_log_jest_json"],
        "go-test" => &["parse_log_gotest"],
        // `parse_log_tap` keeps the ` - ` before a description in its ids; the lines of
        // [`id_script`] carry kiln's ids.
        "tap" => &["parse_log_tap", "parse_log_jest_json"],
        // node's TAP nests subtests and its spec reporter prints no ids `parse_log_tap` reads;
        // the lines of [`id_script`] carry kiln's.
        "node-test" => &["parse_log_jest_json"],
        // A parser script's lines, printed after the test output by the eval script; for the
        // formats of [`id_script`], its lines.
        "status-lines" | "jest-json" | "vitest-json" | "mocha-json" | "ctest" | "go-test-json"
        | "junit-xml" => &["parse_log_jest_json"],
        _ => &[],
    }
}

/// For a kiln parser whose ids no harness parser reads from the output as it is, a `sh` script
/// (the shape of a parser script of the launch agent) that reads the test output on its
/// standard input and prints `[PASSED] <id>` or `[FAILED] <id>` for every test that ran, under
/// kiln's ids, which `parse_log_jest_json` reads: node reads the JSON reports of jest, vitest
/// and mocha (node is in every image that runs them), awk (in every Debian image) TAP, `node --test`'s
/// TAP and spec reporters, CTest
/// and `go test -json` events and JUnit XML reports. The scripts port this crate's readers of those formats;
/// validation runs the script in a fresh container of the environment image and grades the
/// harness's view on what it printed there, so a case the port reads differently costs the row
/// its harness parser, never a wrong grade. The script always exits 0 (a missing interpreter
/// prints no id): in an eval script, whose `pipefail` would otherwise hand the script's failure
/// to the harness as the test command's exit code. `None` for other parsers.
#[must_use]
pub fn id_script(kiln_parser: &str) -> Option<String> {
    const STATUS_AWK: &str = include_str!("status_ids.awk");
    let awk = |program: &str| format!("awk '\n{STATUS_AWK}{program}'");
    let command = match kiln_parser {
        "jest-json" | "vitest-json" | "mocha-json" => {
            let mode = if kiln_parser == "mocha-json" {
                "mocha"
            } else {
                "jest"
            };
            format!("node -e '\n{}' {mode}", include_str!("report_ids.js"))
        }
        "tap" => awk(include_str!("tap_ids.awk")),
        "node-test" => awk(concat!(
            include_str!("node_ids.awk"),
            include_str!("tap_ids.awk")
        )),
        "ctest" => awk(include_str!("ctest_ids.awk")),
        "go-test-json" => awk(include_str!("go_json_ids.awk")),
        "junit-xml" => awk(include_str!("junit_ids.awk")),
        _ => return None,
    };
    Some(format!("{command} || true\n"))
}

/// The shell function an eval script pipes the test output through when [`output_filter`] has
/// one for the row's kiln parser.
pub const OUTPUT_FILTER: &str = "kiln_test_ids";

/// For a kiln parser whose ids the harness parser does not read as the tool printed them, the
/// definition of the shell function [`OUTPUT_FILTER`]: it prints the output, then lines the
/// harness parser reads as kiln's ids (for `cargo`: see `cargo_ids.awk`). `None` when the
/// harness reads the output as it is.
#[must_use]
pub fn output_filter(kiln_parser: &str) -> Option<String> {
    output_filter_command(kiln_parser).map(|command| format!("{OUTPUT_FILTER}() {{\n{command}\n}}"))
}

/// The `sh` command in the body of [`output_filter`]: it reads the test output on its standard
/// input and prints it, then the lines the harness parser reads as kiln's ids.
#[must_use]
pub fn output_filter_command(kiln_parser: &str) -> Option<String> {
    match kiln_parser {
        "cargo" => Some(format!("awk '\n{}'", crate::cargo::IDS_AWK)),
        _ => None,
    }
}

/// The harness parsers [`GRADE_AWK`] ports: every one [`harness_parsers`] names.
pub const GRADED_PARSERS: [&str; 6] = [
    "parse_log_pytest",
    "parse_log_pytest_v2",
    "parse_log_cargo",
    "parse_log_jest_json",
    "parse_log_gotest",
    "parse_log_tap",
];

/// An awk program (POSIX awk: Debian's mawk, gawk, busybox awk; run it under `LC_ALL=C`) that
/// grades one run as the SWE-bench harness does, for a verifier in an image that may have no
/// Python: the harness parser `-v parser` (one of [`GRADED_PARSERS`], ported from this
/// module's ports) reads the harness's view of the test output (its input), and the run
/// resolves when every test of the files `-v fail_to_pass` and `-v pass_to_pass` (one id a
/// line) is read as passed, at least one FAIL_TO_PASS test is listed, and `-v exit_code` does
/// not contradict the statuses read ([`harness_exit_code_agrees`]). It prints each listed
/// test's verdict and exits 0 when the run resolves, else 1; with `-v dump=1` it prints the
/// status map instead (`STATUS<tab>id` lines, in the order tests were first read).
pub const GRADE_AWK: &str = include_str!("harness_grade.awk");

/// The test output `log` of kiln parser `kiln_parser` as the harness parses it: with the lines
/// the [`output_filter`] appends, when that parser has one.
#[must_use]
pub fn harness_log<'a>(kiln_parser: &str, log: &'a str) -> Cow<'a, str> {
    match kiln_parser {
        "cargo" => {
            let mut text = log.to_string();
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&crate::cargo::echoed_ids(log));
            Cow::Owned(text)
        }
        _ => Cow::Borrowed(log),
    }
}

/// Runs the harness parser `name` over `log`; `None` when `name` is not one ported here.
#[must_use]
pub fn harness_parse(name: &str, log: &str) -> Option<HarnessStatuses> {
    Some(match name {
        "parse_log_pytest" => pytest_v1(log),
        "parse_log_pytest_v2" => pytest_v2(log),
        "parse_log_cargo" => cargo(log),
        "parse_log_jest_json" => jest_json(log),
        "parse_log_gotest" => gotest(log),
        "parse_log_tap" => tap(log),
        _ => return None,
    })
}

/// `_is_skip_summary`: pytest's `SKIPPED [N] path:line: reason`, where `[N]` is no test.
fn is_skip_summary(status: &str, name: &str) -> bool {
    static COUNT: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^\[\d+\]$").expect("regex"));
    status == "SKIPPED" && COUNT.is_match(name)
}

fn starts_with_status(line: &str) -> bool {
    HARNESS_STATUSES.iter().any(|s| line.starts_with(s))
}

/// Python's `str.split()`: runs of whitespace, none at the ends.
fn py_split(line: &str) -> Vec<&str> {
    line.split(|c: char| c.is_whitespace() || ('\x1c'..='\x1f').contains(&c))
        .filter(|s| !s.is_empty())
        .collect()
}

/// `parse_log_pytest`.
fn pytest_v1(log: &str) -> HarnessStatuses {
    let mut map = HarnessStatuses::new();
    for line in log.split('\n') {
        if !starts_with_status(line) {
            continue;
        }
        let line = if line.starts_with("FAILED") {
            line.replace(" - ", " ")
        } else {
            line.to_string()
        };
        let words = py_split(&line);
        if words.len() <= 1 || is_skip_summary(words[0], words[1]) {
            continue;
        }
        map.insert(words[1].to_string(), words[0].to_string());
    }
    map
}

/// `parse_log_pytest_v2`.
fn pytest_v2(log: &str) -> HarnessStatuses {
    static COLOUR: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\[(\d+)m").expect("regex"));
    let mut map = HarnessStatuses::new();
    for line in log.split('\n') {
        let line = COLOUR.replace_all(line, "");
        let line: String = line
            .chars()
            .filter(|c| !('\x01'..'\x20').contains(c))
            .collect();
        if starts_with_status(&line) {
            let line = if line.starts_with("FAILED") {
                line.split(" - ").next().unwrap_or_default()
            } else {
                &line
            };
            let words = py_split(line);
            if words.len() >= 2 && !is_skip_summary(words[0], words[1]) {
                map.insert(words[1..].join(" "), words[0].to_string());
            }
        } else if HARNESS_STATUSES.iter().any(|s| line.ends_with(s)) {
            let words = py_split(&line);
            if let [name @ .., status] = words.as_slice()
                && !name.is_empty()
            {
                map.insert(name.join(" "), (*status).to_string());
            }
        }
    }
    map
}

/// The shape of the harness's regex parsers: each stripped line that `line` matches gives a test
/// (capture group `name`) and a status read from its capture groups (`None`: not recorded).
fn by_line(
    log: &str,
    line: &Regex,
    name: usize,
    status: impl Fn(&regex::Captures<'_>) -> Option<&'static str>,
) -> HarnessStatuses {
    let mut map = HarnessStatuses::new();
    for text in log.split('\n') {
        if let Some(m) = line.captures(text.trim())
            && let Some(status) = status(&m)
        {
            map.insert(m[name].to_string(), status.to_string());
        }
    }
    map
}

/// `parse_log_cargo`.
fn cargo(log: &str) -> HarnessStatuses {
    static LINE: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^test\s+(\S+)\s+\.\.\.\s+(\w+)$").expect("regex"));
    by_line(log, &LINE, 1, |m| match &m[2] {
        "ok" => Some("PASSED"),
        "FAILED" => Some("FAILED"),
        _ => None,
    })
}

/// `parse_log_jest_json`: `[PASSED] <id>` and `[FAILED] <id>` lines (the harness expects jest's
/// JSON report turned into them; kiln's cargo output filter prints them too).
fn jest_json(log: &str) -> HarnessStatuses {
    static LINE: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^\[(PASSED|FAILED)\]\s(.+)$").expect("regex"));
    by_line(log, &LINE, 2, |m| {
        Some(if &m[1] == "PASSED" {
            "PASSED"
        } else {
            "FAILED"
        })
    })
}

/// `parse_log_gotest`.
fn gotest(log: &str) -> HarnessStatuses {
    static LINE: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^--- (PASS|FAIL|SKIP): (.+) \((.+)\)$").expect("regex"));
    by_line(log, &LINE, 2, |m| {
        Some(match &m[1] {
            "PASS" => "PASSED",
            "FAIL" => "FAILED",
            _ => "SKIPPED",
        })
    })
}

/// `parse_log_tap`.
fn tap(log: &str) -> HarnessStatuses {
    static LINE: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^(ok|not ok) (\d+) (.+)$").expect("regex"));
    by_line(log, &LINE, 3, |m| {
        Some(if &m[1] == "ok" { "PASSED" } else { "FAILED" })
    })
}

/// The harness's `_resolve_case`: the status-map key for `case`, exact or, for an id cut inside
/// its parameters (more `[` than `]`), the first key it begins when all such keys agree on
/// passing.
fn resolve<'a>(case: &str, map: &'a HarnessStatuses) -> Option<&'a str> {
    if let Some((key, _)) = map.get_key_value(case) {
        return Some(key);
    }
    if case.matches('[').count() > case.matches(']').count() {
        let matches: Vec<(&String, &String)> =
            map.iter().filter(|(k, _)| k.starts_with(case)).collect();
        let passing = |s: &str| s == "PASSED" || s == "XFAIL";
        let first = matches.first()?;
        if matches.iter().all(|(_, s)| passing(s) == passing(first.1)) {
            return Some(first.0);
        }
    }
    None
}

/// Whether the harness finds `case` in `map` at all, whatever its status.
#[must_use]
pub fn harness_reads(case: &str, map: &HarnessStatuses) -> bool {
    resolve(case, map).is_some()
}

/// The harness's `test_passed`: PASSED or XFAIL.
#[must_use]
pub fn harness_passed(case: &str, map: &HarnessStatuses) -> bool {
    resolve(case, map).is_some_and(|k| matches!(map[k].as_str(), "PASSED" | "XFAIL"))
}

/// The harness's `test_maintained` (PASS_TO_PASS): passed, or skipped.
#[must_use]
pub fn harness_maintained(case: &str, map: &HarnessStatuses) -> bool {
    harness_passed(case, map) || resolve(case, map).is_some_and(|k| map[k] == "SKIPPED")
}

/// The harness's check of the run against the test command's exit code: a non-zero exit with a
/// status map that records no failure or error is an invalid run (`get_logs_eval`).
#[must_use]
pub fn harness_exit_code_agrees(exit_code: i64, map: &HarnessStatuses) -> bool {
    exit_code == 0
        || map.is_empty()
        || map
            .values()
            .any(|s| s.as_str() == "FAILED" || s.as_str() == "ERROR")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get<'a>(map: &'a HarnessStatuses, id: &str) -> Option<&'a str> {
        map.get(id).map(String::as_str)
    }

    const PYTEST: &str = "\
tests/test_calc.py::test_add PASSED                                      [ 50%]
=========================== short test summary info ============================
PASSED tests/test_calc.py::test_add
PASSED tests/test_calc.py::test_div[1 / 2]
FAILED tests/test_calc.py::test_mul - assert 6 == 5
SKIPPED [1] tests/test_calc.py:12: no numpy
ERROR    calc:calc.py:3 a captured log line
";

    #[test]
    fn pytest_v1_cuts_ids_at_whitespace() {
        let map = pytest_v1(PYTEST);
        assert_eq!(get(&map, "tests/test_calc.py::test_add"), Some("PASSED"));
        assert_eq!(get(&map, "tests/test_calc.py::test_div[1"), Some("PASSED"));
        assert_eq!(get(&map, "tests/test_calc.py::test_mul"), Some("FAILED"));
        // The skip summary is no test; the captured log line is taken at face value, as there.
        assert!(!map.keys().any(|k| k.starts_with('[')));
        assert_eq!(get(&map, "calc:calc.py:3"), Some("ERROR"));
    }

    #[test]
    fn pytest_v2_keeps_spaces_and_reads_verbose_lines() {
        let map = pytest_v2(PYTEST);
        assert_eq!(
            get(&map, "tests/test_calc.py::test_div[1 / 2]"),
            Some("PASSED")
        );
        assert_eq!(get(&map, "tests/test_calc.py::test_mul"), Some("FAILED"));
        assert!(harness_passed("tests/test_calc.py::test_add", &map));
        let verbose = pytest_v2("tests/t.py::test_x PASSED\n\x1b[32mPASSED\x1b[0m tests/t.py::y\n");
        assert_eq!(get(&verbose, "tests/t.py::test_x"), Some("PASSED"));
        assert_eq!(get(&verbose, "tests/t.py::y"), Some("PASSED"));
    }

    #[test]
    fn cargo_gotest_and_tap_lines() {
        let map = cargo("test parse::works ... ok\ntest a::b ... FAILED\ntest c ... ignored\n");
        assert_eq!(get(&map, "parse::works"), Some("PASSED"));
        assert_eq!(get(&map, "a::b"), Some("FAILED"));
        assert_eq!(get(&map, "c"), None);
        let map = gotest("    --- PASS: TestA/sub (0.00s)\n--- SKIP: TestB (0.01s)\n");
        assert_eq!(get(&map, "TestA/sub"), Some("PASSED"));
        assert_eq!(get(&map, "TestB"), Some("SKIPPED"));
        let map = tap("ok 1 adds\nnot ok 2 divides by zero\n");
        assert_eq!(get(&map, "adds"), Some("PASSED"));
        assert_eq!(get(&map, "divides by zero"), Some("FAILED"));
    }

    #[test]
    fn truncated_ids_resolve_by_prefix_when_they_agree() {
        let map = pytest_v1("PASSED t.py::f[a b]\nPASSED t.py::f[a c]\n");
        // v1 read both as `t.py::f[a`; a published id cut the same way resolves.
        assert!(harness_passed("t.py::f[a", &map));
        let mixed: HarnessStatuses = [
            ("t.py::g[x1]".to_string(), "PASSED".to_string()),
            ("t.py::g[x2]".to_string(), "FAILED".to_string()),
        ]
        .into();
        assert!(!harness_passed("t.py::g[x", &mixed));
        assert!(!harness_passed("t.py::h", &mixed));
    }

    #[test]
    fn exit_code_check_and_maintained() {
        let map: HarnessStatuses = [("a".to_string(), "SKIPPED".to_string())].into();
        assert!(harness_maintained("a", &map));
        assert!(!harness_passed("a", &map));
        assert!(!harness_exit_code_agrees(1, &map));
        assert!(harness_exit_code_agrees(0, &map));
        let failing: HarnessStatuses = [("b".to_string(), "FAILED".to_string())].into();
        assert!(harness_exit_code_agrees(1, &failing));
    }

    #[test]
    fn every_kiln_format_names_only_ported_parsers() {
        for kiln in crate::parser_names() {
            for name in harness_parsers(kiln) {
                assert!(harness_parse(name, "").is_some(), "{name} is not ported");
            }
        }
    }
}
