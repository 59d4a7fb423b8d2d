//! `cargo test` logs captured from cargo 1.9x on a crate with a lib, a bin, an integration test
//! and doctests: see `tests/data/cargo/`.

use crate::check::{assert_summary, check};

const LIB_AND_BIN: &str = "
    pass tests::adds
    fail tests::fails
    skip tests::ignored_plain
    skip tests::ignored_reason
    pass tests::panics
    pass tests::prints
    pass tests::bin_test
";

#[test]
fn no_fail_fast_runs_every_binary() {
    let expected = format!(
        "{LIB_AND_BIN}
        pass it_adds
        fail it_fails
        pass src/lib.rs - add
        fail src/lib.rs - add#2
        skip src/lib.rs - sub
        pass src/lib.rs - sub#2 - compile fail"
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
        "pass tests::adds
         fail tests::fails
         skip tests::ignored_plain
         skip tests::ignored_reason
         pass tests::panics
         pass tests::prints",
    );
    assert_summary(&parsed, [3, 1, 2, 0]);
}

/// `tests::same_name` is printed by the library's unit tests and by `tests/other.rs`: only that
/// name is qualified by its binary, the others keep the names libtest printed.
#[test]
fn a_name_two_binaries_print_is_qualified_by_binary() {
    check(
        "cargo",
        include_str!("../data/cargo/same_name_two_binaries.log"),
        "pass tests::only_in_lib
         pass dup::lib::tests::same_name
         pass only_here
         fail other::test::tests::same_name",
    );
}
