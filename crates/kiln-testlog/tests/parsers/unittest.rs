//! `python -m unittest -v` logs captured from CPython 3.10 (old form) and 3.11 (qualified form):
//! see `tests/data/unittest/`.

use crate::check::{assert_summary, check};

const THINGS: &str = "
    pass pkg.test_things.TestOther.test_ok
    error pkg.test_things.TestThings.test_error
    pass pkg.test_things.TestThings.test_expected_failure
    fail pkg.test_things.TestThings.test_fail
    pass pkg.test_things.TestThings.test_ok
    skip pkg.test_things.TestThings.test_skip
    fail pkg.test_things.TestThings.test_subtests
    fail pkg.test_things.TestThings.test_unexpected_success
    pass pkg.test_things.TestThings.test_with_doc
    error unittest.loader._FailedTest.test_broken
";

#[test]
fn python_311_form() {
    let parsed = check(
        "unittest",
        include_str!("../data/unittest/py311_verbose.log"),
        THINGS,
    );
    assert_summary(&parsed, [4, 3, 1, 2]);
}

#[test]
fn python_310_form() {
    let parsed = check(
        "unittest",
        include_str!("../data/unittest/py310_verbose.log"),
        THINGS,
    );
    assert_summary(&parsed, [4, 3, 1, 2]);
}
