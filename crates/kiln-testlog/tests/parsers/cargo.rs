//! `cargo test` logs captured from cargo 1.9x on a crate with a lib, a bin, an integration test
//! and doctests: see `tests/data/cargo/`.

use crate::check::{assert_summary, check};

const LIB_AND_BIN: &str = "
    pass foo::lib::tests::adds
    fail foo::lib::tests::fails
    skip foo::lib::tests::ignored_plain
    skip foo::lib::tests::ignored_reason
    pass foo::lib::tests::panics
    pass foo::lib::tests::prints
    pass foo::bin::tests::bin_test
";

#[test]
fn no_fail_fast_runs_every_binary() {
    let expected = format!(
        "{LIB_AND_BIN}
        pass integration::test::it_adds
        fail integration::test::it_fails
        pass foo::doc::src/lib.rs - add
        fail foo::doc::src/lib.rs - add#2
        skip foo::doc::src/lib.rs - sub
        pass foo::doc::src/lib.rs - sub#2 - compile fail"
    );
    let parsed = check(
        "cargo",
        include_str!("../data/cargo/workspace_no_fail_fast.log"),
        &expected,
    );
    assert_summary(&parsed, [7, 3, 3, 0]);
}

#[test]
fn stops_at_first_failing_binary() {
    let parsed = check(
        "cargo",
        include_str!("../data/cargo/stops_at_first_failure.log"),
        "pass foo::lib::tests::adds
         fail foo::lib::tests::fails
         skip foo::lib::tests::ignored_plain
         skip foo::lib::tests::ignored_reason
         pass foo::lib::tests::panics
         pass foo::lib::tests::prints",
    );
    assert_summary(&parsed, [3, 1, 2, 0]);
}
