//! C++ runners captured on one small project (googletest 1.12, Catch2 2.13.10, doctest 2.4.9,
//! CTest 3.25 running all three plus plain commands): see `tests/data/{ctest,gtest,catch2,doctest}/`.

use crate::check::{assert_summary, check};

const CTEST: &str = "
    fail gtest_all
    fail catch_all
    fail doctest_all
    pass always_passes
    skip skipped_by_code
    skip disabled_one
    fail times_out
";

#[test]
fn ctest_default_output() {
    let parsed = check("ctest", include_str!("../data/ctest/mixed.log"), CTEST);
    // `33% tests passed, 4 tests failed out of 6`: the disabled test is out of the total and the
    // one skipped by its return code counts as passed in the percentage.
    assert_summary(&parsed, [1, 4, 2, 0]);
}

#[test]
fn ctest_verbose_output_ignores_test_output() {
    let parsed = check("ctest", include_str!("../data/ctest/verbose.log"), CTEST);
    assert_summary(&parsed, [1, 4, 2, 0]);
}

const GTEST: &str = "
    pass MathTest.Adds
    fail MathTest.Fails
    skip MathTest.Skipped
    skip MathTest.DISABLED_Off
    pass Nums/ParamTest.IsEven/0
    fail Nums/ParamTest.IsEven/1
";

#[test]
fn gtest_console() {
    let parsed = check("gtest", include_str!("../data/gtest/mixed.log"), GTEST);
    assert_summary(&parsed, [2, 2, 2, 0]);
}

#[test]
fn gtest_json() {
    let parsed = check("gtest", include_str!("../data/gtest/mixed.json"), GTEST);
    assert_summary(&parsed, [2, 2, 2, 0]);
}

#[test]
fn gtest_inside_ctest_verbose() {
    let parsed = check("gtest", include_str!("../data/ctest/verbose.log"), GTEST);
    assert_summary(&parsed, [2, 2, 2, 0]);
}

#[test]
fn gtest_crash_is_an_error() {
    let log = include_str!("../data/gtest/mixed.log");
    let cut = &log[..log
        .find("[  FAILED  ] MathTest.Fails (0 ms)")
        .expect("in log")];
    let parsed = kiln_testlog::parse("gtest", cut).expect("known");
    assert_eq!(
        parsed.statuses.get("MathTest.Fails"),
        Some(&kiln_schema::TestStatus::Error)
    );
    assert_eq!(parsed.problems, ["test MathTest.Fails never finished"]);
}

#[test]
fn catch2_xml() {
    let parsed = check(
        "catch2",
        include_str!("../data/catch2/mixed.xml"),
        "pass adds numbers
         fail fails to add
         fail has sections
         pass has sections/first ok
         fail has sections/second bad
         pass may fail
         error throws",
    );
    assert_summary(&parsed, [2, 3, 0, 0]);
}

#[test]
fn catch2_console_names_failures_only() {
    let parsed = check(
        "catch2",
        include_str!("../data/catch2/console.log"),
        "fail fails to add
         fail has sections
         fail has sections/second bad
         fail may fail
         error throws",
    );
    assert_eq!(
        parsed.problems,
        ["1 test cases failed as expected; the console does not say which, so they read as failed"]
    );
}

#[test]
fn catch2_console_with_successes() {
    let parsed = check(
        "catch2",
        include_str!("../data/catch2/console_success.log"),
        "pass adds numbers
         fail fails to add
         fail has sections
         pass has sections/first ok
         fail has sections/second bad
         fail may fail
         error throws",
    );
    assert_eq!(parsed.problems.len(), 1, "{:?}", parsed.problems);
}

#[test]
fn doctest_xml() {
    let parsed = check(
        "doctest",
        include_str!("../data/doctest/mixed.xml"),
        "pass adds numbers
         fail fails to add
         skip skipped one
         pass suite a::in suite
         fail with subcases
         pass with subcases/ok
         fail with subcases/bad",
    );
    assert_summary(&parsed, [2, 2, 1, 0]);
}

#[test]
fn doctest_console_names_failures_only() {
    let parsed = check(
        "doctest",
        include_str!("../data/doctest/console.log"),
        "fail fails to add
         fail with subcases
         fail with subcases/bad",
    );
    assert!(parsed.is_consistent(), "{:?}", parsed.problems);
    assert_eq!(
        parsed.summary,
        Some(kiln_testlog::Summary {
            passed: 2,
            failed: 2,
            skipped: 1,
            errors: 0
        })
    );
}

#[test]
fn doctest_console_with_successes() {
    let parsed = check(
        "doctest",
        include_str!("../data/doctest/console_success.log"),
        "pass adds numbers
         fail fails to add
         pass suite a::in suite
         fail with subcases
         pass with subcases/ok
         fail with subcases/bad",
    );
    assert!(parsed.is_consistent(), "{:?}", parsed.problems);
}
