//! `go test` logs captured from go 1.19 on a module with passing, failing, skipped, nested and
//! parallel subtests, a package without tests and a package that does not build: see
//! `tests/data/go-test/` and `tests/data/go-test-json/` (`network_off.log`: go 1.24).

use crate::check::check;

const MIXED: &str = "
    pass example.com/goproj/calc::TestAdd
    fail example.com/goproj/calc::TestAddFails
    skip example.com/goproj/calc::TestSkipped
    fail example.com/goproj/calc::TestTable
    pass example.com/goproj/calc::TestTable/one_plus_one
    pass example.com/goproj/calc::TestTable/zero/zero
    fail example.com/goproj/calc::TestTable/wrong_sum
    pass example.com/goproj/calc::TestParallel
    pass example.com/goproj/calc::TestParallel/a
    pass example.com/goproj/calc::TestParallel/b
    pass example.com/goproj/calc::ExampleAdd
    pass example.com/goproj/strs::TestRev
    pass example.com/goproj/strs::TestNested
    pass example.com/goproj/strs::TestNested/level1
    skip example.com/goproj/strs::TestNested/level1/level2_skip
    pass example.com/goproj/strs::TestNested/level1/level2_ok
    error example.com/goproj/broken
";

#[test]
fn json_mixed_packages() {
    let parsed = check(
        "go-test-json",
        include_str!("../data/go-test-json/mixed.json"),
        MIXED,
    );
    assert!(parsed.is_consistent(), "{:?}", parsed.problems);
}

#[test]
fn verbose_text_mixed_packages() {
    let parsed = check(
        "go-test",
        include_str!("../data/go-test/verbose_mixed.log"),
        MIXED,
    );
    assert!(parsed.is_consistent(), "{:?}", parsed.problems);
}

#[test]
fn plain_text_lists_failures_only() {
    check(
        "go-test",
        include_str!("../data/go-test/plain.log"),
        "fail example.com/goproj/calc::TestAddFails
         fail example.com/goproj/calc::TestTable
         fail example.com/goproj/calc::TestTable/wrong_sum
         error example.com/goproj/broken",
    );
}

#[test]
fn truncated_json_reports_unfinished_tests() {
    let log = include_str!("../data/go-test-json/mixed.json");
    let cut = &log[..log
        .find("\"Test\":\"TestTable/wrong_sum\"")
        .expect("in log")];
    let cut = &cut[..cut.rfind('\n').expect("line")];
    let parsed = kiln_testlog::parse("go-test-json", cut).expect("known");
    assert_eq!(parsed.problems, ["3 tests started but never finished"]);
    assert_eq!(
        parsed.statuses.get("example.com/goproj/calc::TestTable"),
        Some(&kiln_schema::TestStatus::Error)
    );
}

/// Captured from go 1.24 (`go test -json -count=1 ./...`) in a container with the network off,
/// as validation runs tests: an HTTP get of a name, a dial of an address and a lookup (Go's
/// resolver fails dialling its name server: `connect: network is unreachable`), and a test
/// whose `%q` message quotes `no such host`.
#[test]
fn failures_for_want_of_a_network_are_told_apart() {
    let parsed = check(
        "go-test-json",
        include_str!("../data/go-test-json/network_off.log"),
        "
        pass example.org/netcap::TestAdds
        fail example.org/netcap::TestComparesMessages
        fail example.org/netcap::TestConnectsToAnAddress
        fail example.org/netcap::TestDownloadsAFile
        fail example.org/netcap::TestResolvesAName
        ",
    );
    assert_eq!(
        parsed.offline.iter().collect::<Vec<_>>(),
        [
            "example.org/netcap::TestConnectsToAnAddress",
            "example.org/netcap::TestDownloadsAFile",
            "example.org/netcap::TestResolvesAName",
        ]
    );
}
