//! JUnit XML reports produced by real tools (pytest 9.2, jest-junit, googletest 1.12, Catch2 2.13,
//! doctest 2.4, ctest 3.x) plus one hand-written surefire sample: see `tests/data/junit-xml/`.

use crate::check::check;

#[test]
fn pytest_junitxml() {
    // pytest writes XPASS (non-strict) as a plain pass in JUnit XML; only `-rA` text shows it.
    let parsed = check(
        "junit-xml",
        include_str!("../data/junit-xml/pytest_junit.xml"),
        "        pass tests.test_basic.TestGroup::test_method
        pass tests.test_basic.TestGroup::test_method_param[1]
        fail tests.test_basic.TestGroup::test_method_param[2]
        fail tests.test_basic::test_fail
        error tests.test_basic::test_fixture_error
        pass tests.test_basic::test_param[[nested]]
        fail tests.test_basic::test_param[a b]
        fail tests.test_basic::test_param[a] - b]
        pass tests.test_basic::test_param[x - y]
        pass tests.test_basic::test_pass
        skip tests.test_basic::test_skip_inline
        skip tests.test_basic::test_skip_mark
        error tests.test_basic::test_teardown_error
        pass tests.test_basic::test_tmp_param[<tmp>/data.txt]
        pass tests.test_basic::test_xfail
        pass tests.test_basic::test_xpass
        error tests.test_collect_error
        skip tests.test_module_skip",
    );
    assert!(parsed.is_consistent(), "{:?}", parsed.problems);
}

#[test]
fn jest_junit() {
    // jest-junit writes `test.todo` as a plain test case, so it reads as a pass.
    let parsed = check(
        "junit-xml",
        include_str!("../data/junit-xml/jest_junit.xml"),
        "        pass math adds numbers
        fail math fails to add
        pass math nested > group doubles 1 - to 1
        fail math nested > group doubles 2 - to 3
        skip math skipped one
        pass math write more tests
        pass top level passes",
    );
    // jest-junit puts the top-level test in the `math` suite without counting it there.
    assert_eq!(parsed.problems, ["summary says 3 passed but 4 parsed"]);
}

#[test]
fn gtest_xml() {
    let parsed = check(
        "junit-xml",
        include_str!("../data/junit-xml/gtest.xml"),
        "        pass MathTest::Adds
        skip MathTest::DISABLED_Off
        fail MathTest::Fails
        skip MathTest::Skipped
        pass Nums/ParamTest::IsEven/0
        fail Nums/ParamTest::IsEven/1",
    );
    assert!(parsed.is_consistent(), "{:?}", parsed.problems);
}

#[test]
fn ctest_output_junit() {
    let parsed = check(
        "junit-xml",
        include_str!("../data/junit-xml/ctest_junit.xml"),
        "        pass always_passes
        fail catch_all
        skip disabled_one
        fail doctest_all
        fail gtest_all
        skip skipped_by_code
        fail times_out",
    );
    assert!(parsed.is_consistent(), "{:?}", parsed.problems);
}

#[test]
fn catch2_and_doctest_concatenated() {
    let log = format!(
        "{}\nsome log line between reports\n{}",
        include_str!("../data/junit-xml/catch2_junit.xml"),
        include_str!("../data/junit-xml/doctest_junit.xml")
    );
    let parsed = check(
        "junit-xml",
        &log,
        "pass /tmp/cxx/dt.cpp::adds numbers
         fail /tmp/cxx/dt.cpp::fails to add
         pass /tmp/cxx/dt.cpp::in suite
         fail /tmp/cxx/dt.cpp::with subcases/bad
         pass /tmp/cxx/dt.cpp::with subcases/ok
         pass c2.global::adds numbers
         fail c2.global::fails to add
         pass c2.global::has sections/first ok
         fail c2.global::has sections/second bad
         fail c2.global::may fail
         error c2.global::throws",
    );
    // Both tools count differently from the cases they write: Catch2 writes a `[!mayfail]` test
    // with a `<failure>` but counts it as passed; doctest counts a test with subcases once.
    assert_eq!(
        parsed.problems,
        [
            "summary says 6 passed but 5 parsed",
            "summary says 4 failed but 5 parsed"
        ]
    );
}

#[test]
fn synthetic_surefire_with_reruns() {
    let parsed = check(
        "junit-xml",
        include_str!("../data/junit-xml/SYNTHETIC_surefire_hand_written.xml"),
        "pass com.example.CalcTest::adds
         fail com.example.CalcTest::fails
         pass com.example.CalcTest::flaky
         error com.example.CalcTest::throws
         skip com.example.CalcTest::ignored",
    );
    assert!(parsed.is_consistent(), "{:?}", parsed.problems);
}

#[test]
fn truncated_document_is_reported() {
    let xml = include_str!("../data/junit-xml/gtest.xml");
    let cut = &xml[..xml.len() / 2];
    let parsed = kiln_testlog::parse("junit-xml", cut).expect("known");
    assert!(!parsed.is_consistent());
}
