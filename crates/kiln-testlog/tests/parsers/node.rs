//! Text logs of node's test runner (node 20.20, TAP and spec reporters) and mocha 11's spec
//! reporter, captured on small projects with every outcome: see `tests/data/node-test/` and
//! `tests/data/mocha-spec/`.

use crate::check::{assert_summary, check};

/// The tests of `nt/basic.test.js` as both node reporters name them.
const NODE: &str = "
    pass top passes
    fail top fails
    skip skipped
    skip todo one
    fail suite a
    pass suite a > inner passes
    fail suite a > inner fails
    pass suite a > deeper
    pass suite a > deeper > deep passes
";

#[test]
fn node_test_tap_reporter() {
    let parsed = check("node-test", include_str!("../data/node-test/tap.log"), NODE);
    assert_summary(&parsed, [3, 2, 2, 0]);
}

#[test]
fn node_test_default_reporter_without_tty_is_tap() {
    let parsed = check(
        "node-test",
        include_str!("../data/node-test/default_non_tty.log"),
        NODE,
    );
    assert_summary(&parsed, [3, 2, 2, 0]);
}

#[test]
fn node_test_spec_reporter() {
    // The spec reporter repeats failures at the end without their suites; they are not new tests.
    let parsed = check(
        "node-test",
        include_str!("../data/node-test/spec.log"),
        NODE,
    );
    assert_summary(&parsed, [3, 2, 2, 0]);
}

#[test]
fn mocha_spec_reporter() {
    let parsed = check(
        "mocha-spec",
        include_str!("../data/mocha-spec/mixed.log"),
        r#"pass root level test
         pass Array #indexOf() should return -1 when not present
         fail Array #indexOf() should fail - on purpose
         error Array with a failing hook "before all" hook for "never runs"
         skip Array #indexOf() is pending
         skip Array #indexOf() has no body yet"#,
    );
    assert_summary(&parsed, [2, 2, 2, 0]);
}

#[test]
fn node_test_spec_runs_after_a_failure_list_are_read() {
    let log = include_str!("../data/node-test/spec.log");
    let twice = format!("{log}{}", log.replace("suite a", "suite b"));
    let parsed = kiln_testlog::parse("node-test", &twice).expect("known");
    assert_eq!(
        parsed.statuses.get("suite b > inner fails"),
        Some(&kiln_schema::TestStatus::Fail)
    );
    assert_eq!(parsed.statuses.len(), 14, "{:?}", parsed.statuses.keys());
    assert!(parsed.is_consistent(), "{:?}", parsed.problems);
}
