//! Generic TAP from Perl 5.36's Test::More 1.302190 (raw, and under `prove -v` with stderr
//! interleaved), with a skip, a todo, an unnamed test and nested subtests: see `tests/data/tap/`.
//! node's TAP is in `node.rs`.

use crate::check::check;

#[test]
fn perl_test_more_with_subtests() {
    let parsed = check(
        "tap",
        include_str!("../data/tap/perl_subtests.tap"),
        "pass first passes
         fail second fails
         skip #3
         skip todo fails
         fail group a
         pass group a > inner passes
         fail group a > deeper
         pass group a > deeper > deep passes
         fail group a > deeper > deep fails
         pass #6",
    );
    assert!(parsed.is_consistent(), "{:?}", parsed.problems);
    assert_eq!(parsed.summary, None);
}

#[test]
fn prove_verbose_prefixes_scripts() {
    let parsed = check(
        "tap",
        include_str!("../data/tap/prove_verbose.log"),
        "pass t/basic.t::first passes
         fail t/basic.t::second fails
         skip t/basic.t::#3
         skip t/basic.t::todo fails
         fail t/basic.t::group a
         pass t/basic.t::group a > inner passes
         fail t/basic.t::group a > deeper
         pass t/basic.t::group a > deeper > deep passes
         fail t/basic.t::group a > deeper > deep fails
         pass t/basic.t::#6
         pass t/other.t::other passes
         pass t/other.t::first passes",
    );
    assert!(parsed.is_consistent(), "{:?}", parsed.problems);
}

#[test]
fn node_tap_reads_as_generic_tap() {
    check(
        "tap",
        include_str!("../data/node-test/tap.log"),
        "pass top passes
         fail top fails
         skip skipped
         skip todo one
         fail suite a
         pass suite a > inner passes
         fail suite a > inner fails
         pass suite a > deeper
         pass suite a > deeper > deep passes",
    );
}

#[test]
fn truncated_subtest_and_unmet_plan_are_reported() {
    let log = include_str!("../data/tap/perl_subtests.tap");
    let cut = &log[..log.find("    not ok 2 - deeper").expect("in log")];
    let parsed = kiln_testlog::parse("tap", cut).expect("known");
    assert_eq!(
        parsed.statuses.get("group a > deeper > deep fails"),
        Some(&kiln_schema::TestStatus::Fail)
    );
    assert_eq!(
        parsed.problems,
        [
            "subtest results without their parent's result (log truncated?)",
            "plan says 6 tests but 4 reported"
        ]
    );
}

#[test]
fn directive_after_a_wide_character_is_read() {
    // The character before `#` is two bytes wide; the description ends where `#` starts.
    check(
        "tap",
        "1..2\nok 1 - caf\u{00e9}# skip no network\nok 2 - \u{0179}\\# literal\n",
        "skip caf\u{00e9}
         pass \u{0179}# literal",
    );
}

/// jasmine 3.6.3 under kiln's reporter (`kiln_launch::JASMINE_REPORTER`): full spec
/// names, a `#` escaped, a pending spec, and a failing `afterAll` reported as its suite.
#[test]
fn jasmine_through_kilns_reporter() {
    let parsed = check(
        "tap",
        include_str!("../data/tap/jasmine_kiln_reporter.log"),
        "pass Broken suite passes
         fail Broken suite (suite)
         skip New pending one
         pass New nested deep spec
         pass New list_tasks_non_gfm should pass
         fail New unicode # punctuation should pass",
    );
    assert!(parsed.is_consistent(), "{:?}", parsed.problems);
}
