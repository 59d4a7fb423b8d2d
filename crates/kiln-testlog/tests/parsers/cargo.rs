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

/// Every captured log, and one of edge cases (colour codes, `\r\n`, old cargo's `Running` lines,
/// bins, benches, examples, `- should panic`, doctests, names no parser reads).
const LOGS: &[(&str, &str)] = &[
    (
        "workspace_no_fail_fast",
        include_str!("../data/cargo/workspace_no_fail_fast.log"),
    ),
    (
        "stops_at_first_failure",
        include_str!("../data/cargo/stops_at_first_failure.log"),
    ),
    (
        "include_ignored",
        include_str!("../data/cargo/include_ignored.log"),
    ),
    (
        "same_name_two_binaries",
        include_str!("../data/cargo/same_name_two_binaries.log"),
    ),
    (
        "harness_edges",
        include_str!("../data/cargo/harness_edges.log"),
    ),
];

#[test]
fn the_edge_log_is_read_as_kiln_names_its_tests() {
    check(
        "cargo",
        include_str!("../data/cargo/harness_edges.log"),
        "pass tests::colored
         pass foo::lib::tests::dup
         pass tests::panics
         skip tests::slow
         fail foo::bin::tests::dup
         pass tool::bin::tests::dup
         pass it::test::dup_top
         pass a ... b
         pass speed::bench::dup_top
         fail demo::example::dup_top
         pass old::dup_top
         skip my-crate-not-hex::tests::dup
         pass crlf::line
         pass foo::doc::src/lib.rs - add
         fail src/lib.rs - add#2 - compile fail
         pass not_a_doctest
         fail src/lib.rs - sub
         pass src/lib.rs - sub#2
         pass src/lib.rs - div - compile
         fail src/lib.rs - div#2 - compile
         fail bar::doc::src/lib.rs - add
         pass src/lib.rs - mul",
    );
}

/// The awk filter kiln's eval scripts pipe `cargo test` output through prints what
/// `harness_log` says it prints, on the host's awk (Debian's mawk here, as in the images) and on
/// gawk and busybox where they are installed; through it, the harness's parsers grade every
/// test kiln names as kiln does.
#[test]
fn the_output_filter_makes_the_harness_read_kiln_ids() {
    use kiln_testlog::swebench::{OUTPUT_FILTER, harness_log, harness_parse, output_filter};

    let filter = output_filter("cargo").expect("cargo has an output filter");
    assert!(output_filter("pytest").is_none());
    // Traced by `set -x` inside the harness's markers, the program must read as no result.
    for parser in ["parse_log_cargo", "parse_log_jest_json"] {
        assert_eq!(harness_parse(parser, &filter), Some(Default::default()));
    }
    for (name, log) in LOGS {
        let expected = harness_log("cargo", log);
        // `awk` in the function is the host's default; other awks stand in through a function
        // of the same name.
        for shim in crate::check::other_awks() {
            let printed =
                crate::check::run_script(&shim, &format!("{filter}\n{OUTPUT_FILTER}"), log);
            assert_eq!(printed, expected, "{name} through {shim:?}");
        }
        // `parse_log_cargo` reads every id but doctests' (they hold spaces), and
        // `parse_log_jest_json` every id, as kiln reads them.
        let kiln = kiln_testlog::parse("cargo", log).unwrap();
        let cargo = harness_parse("parse_log_cargo", &expected).expect("ported");
        let lines = harness_parse("parse_log_jest_json", &expected).expect("ported");
        for (id, status) in &kiln.statuses {
            let want = match status.as_str() {
                "pass" => Some("PASSED"),
                "fail" => Some("FAILED"),
                _ => None,
            };
            assert_eq!(lines.get(id).map(String::as_str), want, "{name}: {id}");
            if !id.contains(' ') {
                assert_eq!(cargo.get(id).map(String::as_str), want, "{name}: {id}");
            }
        }
    }
}

/// Captured from cargo 1.85 in a container with the network off, as validation runs tests: a
/// connect to a name (`failed to lookup address information`), a connect to an address
/// (`Network is unreachable`), a lookup, and an assertion whose values hold the same words.
#[test]
fn failures_for_want_of_a_network_are_told_apart() {
    let parsed = check(
        "cargo",
        include_str!("../data/cargo/network_off.log"),
        "
        pass tests::adds
        fail tests::compares_messages
        fail tests::connects_to_an_address
        fail tests::downloads_a_file
        fail tests::resolves_a_name
        ",
    );
    assert_summary(&parsed, [1, 4, 0, 0]);
    assert_eq!(
        parsed.offline.iter().collect::<Vec<_>>(),
        [
            "tests::connects_to_an_address",
            "tests::downloads_a_file",
            "tests::resolves_a_name"
        ]
    );
}

/// Before Rust 1.73 the panic message was quoted on the `panicked at` line itself.
#[test]
fn an_old_panic_line_names_a_missing_network_too() {
    let log = "running 2 tests
test net::fetches ... FAILED
test net::compares ... FAILED

failures:

---- net::fetches stdout ----
thread 'net::fetches' panicked at 'called `Result::unwrap()` on an `Err` value: Os { code: 101, kind: NetworkUnreachable, message: \"Network is unreachable\" }', src/net.rs:9:44
note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace

---- net::compares stdout ----
thread 'net::compares' panicked at 'assertion failed: `(left == right)`
  left: `\"Network is unreachable\"`,
 right: `\"\"`', src/net.rs:14:9


failures:
    net::compares
    net::fetches

test result: FAILED. 0 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s
";
    let parsed = check("cargo", log, "fail net::compares\nfail net::fetches");
    assert_eq!(parsed.offline.iter().collect::<Vec<_>>(), ["net::fetches"]);
}
