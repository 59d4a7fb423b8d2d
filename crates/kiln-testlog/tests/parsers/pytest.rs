//! `pytest` logs captured from pytest 9.2 (`pytest -rA --tb=short -p no:cacheprovider`) on a small
//! project with every outcome: see `tests/data/pytest/`.

use crate::check::{assert_summary, check};

/// The tests of `tests/test_basic.py`, as every complete log of that project reports them.
const BASIC: &str = "
    pass tests/test_basic.py::test_pass
    fail tests/test_basic.py::test_fail
    error tests/test_basic.py::test_fixture_error
    error tests/test_basic.py::test_teardown_error
    pass tests/test_basic.py::test_xfail
    fail tests/test_basic.py::test_xpass
    fail tests/test_basic.py::test_param[a b]
    pass tests/test_basic.py::test_param[x - y]
    pass tests/test_basic.py::test_param[[nested]]
    fail tests/test_basic.py::test_param[a] - b]
    pass tests/test_basic.py::TestGroup::test_method
    pass tests/test_basic.py::TestGroup::test_method_param[1]
    fail tests/test_basic.py::TestGroup::test_method_param[2]
";

#[test]
fn ra_full_run() {
    let expected = format!(
        "{BASIC}
        pass tests/test_basic.py::test_tmp_param[<tmp>/data.txt]
        skip tests/test_basic.py:27
        skip tests/test_basic.py:32
        skip tests/test_module_skip.py:2
        error tests/test_collect_error.py"
    );
    let parsed = check(
        "pytest",
        include_str!("../data/pytest/ra_full.log"),
        &expected,
    );
    assert_summary(&parsed, [8, 5, 3, 3]);
}

#[test]
fn ra_interrupted_by_collection_error() {
    let parsed = check(
        "pytest",
        include_str!("../data/pytest/ra_mixed.log"),
        "skip tests/test_module_skip.py:2
         error tests/test_collect_error.py",
    );
    assert_summary(&parsed, [0, 0, 1, 1]);
}

#[test]
fn ra_with_colour() {
    let expected = format!(
        "{BASIC}
        pass tests/test_basic.py::test_tmp_param[<tmp>/data.txt]
        skip tests/test_basic.py:27
        skip tests/test_basic.py:32"
    );
    let parsed = check(
        "pytest",
        include_str!("../data/pytest/ra_color.log"),
        &expected,
    );
    assert_summary(&parsed, [8, 5, 2, 2]);
}

#[test]
fn ra_quiet_bare_totals() {
    let expected = format!(
        "{BASIC}
        pass tests/test_basic.py::test_tmp_param[<tmp>/data.txt]
        skip tests/test_basic.py:27
        skip tests/test_basic.py:32"
    );
    let parsed = check(
        "pytest",
        include_str!("../data/pytest/ra_quiet.log"),
        &expected,
    );
    assert_summary(&parsed, [8, 5, 2, 2]);
}

#[test]
fn verbose_without_ra_names_skips() {
    // Without -rA the default `-rfE` summary lists only failures and errors; the `-v` lines name
    // everything else. The module-level skip appears in neither, which the cross-check reports.
    let expected = format!(
        "{BASIC}
        pass tests/test_basic.py::test_tmp_param[<tmp>/data.txt]
        skip tests/test_basic.py::test_skip_mark
        skip tests/test_basic.py::test_skip_inline
        error tests/test_collect_error.py"
    );
    let parsed = check(
        "pytest",
        include_str!("../data/pytest/verbose_only.log"),
        &expected,
    );
    assert_eq!(parsed.problems, ["summary says 3 skipped but 2 parsed"]);
}

#[test]
fn xdist_verbose_with_ra() {
    let expected = format!(
        "{BASIC}
        skip tests/test_basic.py::test_skip_mark
        skip tests/test_basic.py::test_skip_inline
        skip tests/test_module_skip.py:2
        error tests/test_collect_error.py"
    );
    let parsed = check(
        "pytest",
        include_str!("../data/pytest/xdist_verbose.log"),
        &expected,
    );
    assert_summary(&parsed, [7, 5, 3, 3]);
}

#[test]
fn xdist_verbose_only() {
    let expected = format!(
        "{BASIC}
        skip tests/test_basic.py::test_skip_mark
        skip tests/test_basic.py::test_skip_inline"
    );
    let parsed = check(
        "pytest",
        include_str!("../data/pytest/xdist_verbose_only.log"),
        &expected,
    );
    assert_summary(&parsed, [7, 5, 2, 2]);
}

#[test]
fn truncated_log_is_inconsistent() {
    let log = include_str!("../data/pytest/ra_full.log");
    // Drop the first PASSED line, as a log cut by a buffer limit might.
    let garbled = log.replacen("PASSED tests/test_basic.py::test_pass\n", "", 1);
    let parsed = kiln_testlog::parse("pytest", &garbled).expect("known parser");
    assert_eq!(parsed.problems, ["summary says 8 passed but 7 parsed"]);
    assert!(!parsed.is_consistent());
}

/// Tests that log at ERROR and WARNING level: pytest prints their records under "Captured log"
/// (`ERROR    app.db:test_logs.py:11 message`), which must not be read as results.
const CAPTURED_LOGS: &str = "
    pass tests/test_logs.py::test_passes_but_logs_an_error
    fail tests/test_logs.py::test_fails_and_logs
    pass tests/test_logs.py::test_param[1]
    pass tests/test_logs.py::test_param[2]
    error tests/test_logs.py::test_error_in_fixture
    pass tests/test_logs.py::test_expected_failure
";

#[test]
fn captured_log_records_are_not_results() {
    // -rA alone: the skips are known only by location.
    let expected = format!(
        "{CAPTURED_LOGS}
        skip tests/test_logs.py:15
        skip tests/test_logs.py:20"
    );
    let parsed = check(
        "pytest",
        include_str!("../data/pytest/ra_captured_logs.log"),
        &expected,
    );
    assert_summary(&parsed, [4, 1, 2, 1]);
}

#[test]
fn with_verbose_lines_skips_get_their_test_ids() {
    let expected = format!(
        "{CAPTURED_LOGS}
        skip tests/test_logs.py::test_skipped_by_mark
        skip tests/test_logs.py::test_skipped_inside"
    );
    let parsed = check(
        "pytest",
        include_str!("../data/pytest/ra_verbose_captured_logs.log"),
        &expected,
    );
    assert_summary(&parsed, [4, 1, 2, 1]);
}

/// pytest before 5.1 wrote its totals `in 1.95 seconds`, and with `-o console_output_style=classic`
/// (what kiln's test command asks for, so that the SWE-bench harness's `parse_log_pytest_v2` reads
/// the verbose lines) no `[ 50%]` follows the status. The shape of pytest 3.5.1 on a real project.
#[test]
fn old_pytest_classic_verbose_lines_and_totals_in_seconds() {
    let log = "\
============================= test session starts ==============================
platform linux -- Python 3.9.2, pytest-3.5.1, py-1.7.0, pluggy-0.6.0 -- /opt/kiln/venv/bin/python
rootdir: /testbed, inifile: pytest.ini
collecting ... collected 3 items

pkg/tests/test_misc.py::test_min PASSED
pkg/tests/test_misc.py::test_max FAILED
pkg/tests/test_misc.py::test_slow SKIPPED

=================================== FAILURES ===================================
___________________________________ test_max ___________________________________
E   assert 1 == 2
================ 1 failed, 1 passed, 1 skipped in 1.95 seconds =================
";
    let parsed = check(
        "pytest",
        log,
        "pass pkg/tests/test_misc.py::test_min
         fail pkg/tests/test_misc.py::test_max
         skip pkg/tests/test_misc.py::test_slow",
    );
    assert_summary(&parsed, [1, 1, 1, 0]);
    let map = kiln_testlog::swebench::harness_parse("parse_log_pytest_v2", log).unwrap_or_default();
    assert_eq!(
        map.get("pkg/tests/test_misc.py::test_min")
            .map(String::as_str),
        Some("PASSED")
    );
}

/// A project whose own tests run inner pytest sessions (`pytester`, in-process and in a
/// subprocess): `-rA` prints their whole output, totals and short summaries included, in the
/// outer session's PASSES section. Only the outermost session counts.
#[test]
fn inner_sessions_of_pytester_are_not_the_outer_runs_tests() {
    let parsed = check(
        "pytest",
        include_str!("../data/pytest/nested_sessions.log"),
        "pass tests/test_nested.py::test_inner_session_passes
         pass tests/test_nested.py::test_inner_session_with_a_failure
         pass tests/test_nested.py::test_plain
         fail tests/test_nested.py::test_outer_fails",
    );
    assert_summary(&parsed, [3, 1, 0, 0]);
}

/// Captured from pytest 6.2.5 on Python 3.9 in a container with the network off, as validation
/// runs tests: a URL fetch (`gaierror` chained into `URLError`), a connect to an address
/// (`OSError: [Errno 101] Network is unreachable`), and an assertion that merely compares the
/// same words. The summary's messages are cut to the terminal's width; the FAILURES section
/// says why each test failed.
#[test]
fn failures_for_want_of_a_network_are_told_apart() {
    let parsed = check(
        "pytest",
        include_str!("../data/pytest/network_off.log"),
        "
        fail tests/test_data.py::test_download
        fail tests/test_data.py::TestCache::test_remote[v1]
        fail tests/test_data.py::test_math
        pass tests/test_data.py::test_local
        ",
    );
    assert!(parsed.is_consistent(), "{:?}", parsed.problems);
    assert_eq!(
        parsed.offline.iter().collect::<Vec<_>>(),
        [
            "tests/test_data.py::TestCache::test_remote[v1]",
            "tests/test_data.py::test_download"
        ]
    );
}
