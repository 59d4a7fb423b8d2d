//! Fixture projects beyond Python: one small library per ecosystem kiln builds (Rust, Node, Go,
//! C, Java), each with a real bug, the pull request that fixed it and a test patch, written by
//! [`write_ecosystems`] in the same layout as the demo.
//!
//! The expected lists are the ids kiln-testlog's parsers give for each tool's real output (the
//! crate's integration test runs the tools that are installed and compares).

use std::path::Path;

use crate::error::TestkitError;
use crate::fixtures::{Fixture, Outcome};
use crate::repos::{DemoLayout, build_repo_with, write_set};

/// Owner of every ecosystem fixture repository.
const OWNER: &str = "kiln-eco";

/// The ecosystem fixtures, in instance order.
static ECOSYSTEMS: &[Fixture] = &[
    Fixture {
        dir: "eco-rust",
        owner: OWNER,
        name: "runlength",
        pr: 11,
        issue: 10,
        first_day: 3,
        messages: [
            "Add run-length encode()",
            "Add decode() with errors for malformed input",
            "Add a README",
            "Read multi-digit run lengths in decode()\n\nFixes #10.",
        ],
        later_message: "Release 0.1.1",
        problem_statement: "decode() cannot read what encode() writes for long runs\n\n\
`encode(\"aaaaaaaaaaaa\")` gives `\"12a\"`, but `decode(\"12a\")` gives `\"aa\"`: every digit is \
taken as a run length of its own instead of being part of one decimal number. Round-tripping \
any text with a run of ten or more characters loses characters.\n",
        hints_text: "The count is overwritten by each digit rather than accumulated.\n",
        version: "0.1",
        fail_to_pass: &["decodes_multi_digit_counts", "round_trips_long_runs"],
        pass_to_pass: &[
            "decodes_runs",
            "encodes_empty_text",
            "encodes_runs",
            "encodes_single_characters",
            "rejects_missing_count",
            "rejects_trailing_count",
            "tests::errors_name_the_character",
            "tests::runs_are_counted_in_decimal",
        ],
        outcome: Outcome::Validated,
    },
    Fixture {
        dir: "eco-node",
        owner: OWNER,
        name: "durations",
        pr: 12,
        issue: 11,
        first_day: 10,
        messages: [
            "Add parse() for durations such as 1h30m",
            "Add format()",
            "Add a README",
            "Read the ms unit in parse()\n\nFixes #11.",
        ],
        later_message: "Release 1.0.1",
        problem_statement: "parse() rejects milliseconds\n\n\
`parse(\"500ms\")` throws `invalid duration \"500ms\" at offset 4` although `ms` is a \
documented unit, and `format()` writes it: `parse(format(1500))` throws for `\"1s500ms\"`.\n",
        hints_text: "The unit alternation tries `m` before `ms`.\n",
        version: "1.0",
        fail_to_pass: &[
            "test/format.test.js::format › round-trips 1500 through parse",
            "test/format.test.js::format › round-trips 3723004 through parse",
            "test/parse.test.js::parse › reads milliseconds",
        ],
        pass_to_pass: &[
            "test/format.test.js::format › formats hours and minutes",
            "test/format.test.js::format › formats zero",
            "test/format.test.js::format › rejects negative numbers",
            "test/parse.test.js::parse › reads hours and minutes",
            "test/parse.test.js::parse › reads seconds",
            "test/parse.test.js::parse › rejects garbage",
        ],
        outcome: Outcome::Validated,
    },
    Fixture {
        dir: "eco-go",
        owner: OWNER,
        name: "semver",
        pr: 13,
        issue: 12,
        first_day: 17,
        messages: [
            "Add Parse()",
            "Add Compare()",
            "Add a README",
            "Compare version components as numbers\n\nFixes #12.",
        ],
        later_message: "Release v0.2.1",
        problem_statement: "Compare orders 1.10.0 before 1.9.0\n\n\
`Compare(Parse(\"1.10.0\"), Parse(\"1.9.0\"))` returns -1: components are compared as \
strings. Also, `Parse(\"1.02.0\").String()` gives `1.02.0` instead of `1.2.0`.\n",
        hints_text: "",
        version: "0.2",
        fail_to_pass: &[
            "github.com/kiln-eco/semver::TestCompare",
            "github.com/kiln-eco/semver::TestCompare/1.10.0_vs_1.9.0",
            "github.com/kiln-eco/semver::TestCompare/1.2.9_vs_1.2.10",
            "github.com/kiln-eco/semver::TestParseLeadingZeros",
        ],
        pass_to_pass: &[
            "github.com/kiln-eco/semver::TestCompare/1.2.3_vs_1.2.3",
            "github.com/kiln-eco/semver::TestCompare/1.2.3_vs_1.2.4",
            "github.com/kiln-eco/semver::TestCompare/2.0.0_vs_1.9.9",
            "github.com/kiln-eco/semver::TestParse",
            "github.com/kiln-eco/semver::TestParseRejects",
        ],
        outcome: Outcome::Validated,
    },
    Fixture {
        dir: "eco-c",
        owner: OWNER,
        name: "ringbuf",
        pr: 14,
        issue: 13,
        first_day: 24,
        messages: [
            "Add a fixed-capacity ring buffer",
            "Add ringbuf_peek()",
            "Add a README",
            "Wrap the head index at the capacity\n\nFixes #13.",
        ],
        later_message: "Release 0.1.1",
        problem_statement: "ringbuf_pop returns items out of order\n\n\
After filling a buffer of capacity 3 with 1, 2, 3, popping gives 1, 2 and then 1 again \
instead of 3. Interleaving pushes and pops goes wrong the same way.\n",
        hints_text: "The head index is reduced modulo the length instead of the capacity.\n",
        version: "0.1",
        fail_to_pass: &["ringbuf.fifo_after_wrap", "ringbuf.interleaved"],
        pass_to_pass: &[
            "ringbuf.empty",
            "ringbuf.full",
            "ringbuf.peek",
            "ringbuf.push_pop",
            "ringbuf.wraparound",
        ],
        outcome: Outcome::Validated,
    },
    Fixture {
        dir: "eco-java",
        owner: OWNER,
        name: "csvline",
        pr: 15,
        issue: 14,
        first_day: 5,
        messages: [
            "Add CsvLine.split()",
            "Add CsvLine.join()",
            "Add a README",
            "Read doubled quotes in quoted fields\n\nFixes #14.",
        ],
        later_message: "Release 1.0.1",
        problem_statement: "split() does not undo join() for fields with quotes\n\n\
`CsvLine.join` doubles a quote inside a quoted field, as RFC 4180 says, but `CsvLine.split` \
treats the doubled quote as the end and restart of quoting and drops both quotes: \
`split(\"\\\"say \\\"\\\"hi\\\"\\\"\\\",x\")` gives `[say hi, x]` instead of `[say \"hi\", x]`.\n",
        hints_text: "",
        version: "1.0",
        fail_to_pass: &[
            "dev.kilneco.csvline.CsvLineTest::unescapesDoubledQuotes",
            "dev.kilneco.csvline.JoinTest::roundTripsQuotes",
        ],
        pass_to_pass: &[
            "dev.kilneco.csvline.CsvLineTest::keepsCommasInQuotes",
            "dev.kilneco.csvline.CsvLineTest::keepsEmptyFields",
            "dev.kilneco.csvline.CsvLineTest::splitsPlainFields",
            "dev.kilneco.csvline.JoinTest::joinsPlainFields",
            "dev.kilneco.csvline.JoinTest::quotesCommas",
            "dev.kilneco.csvline.JoinTest::roundTripsCommas",
        ],
        outcome: Outcome::Validated,
    },
];

/// Whether a changed path is a test file in any of the fixtures' ecosystems: under a `tests`,
/// `test` or `__tests__` directory (Rust integration tests, C tests, Java's `src/test`, Node),
/// or named `*_test.go`, `*.test.js` or `*.spec.js`.
fn is_test_path(path: &str) -> bool {
    let mut parts = path.split('/');
    let file = parts.next_back().unwrap_or_default();
    parts.any(|dir| matches!(dir, "tests" | "test" | "__tests__"))
        || file.ends_with("_test.go")
        || file.ends_with(".test.js")
        || file.ends_with(".spec.js")
}

/// Writes the ecosystem fixtures: repositories under `dir/repos/kiln-eco/<name>/` and the task
/// file `dir/tasks.jsonl`, with the same history shape as [`crate::write_demo`] (three commits to
/// the base, the fix merged from a pull request branch, one later commit).
///
/// The instances, in task file order (all validate):
/// 1. `kiln-eco__runlength-11`: a Rust crate without dependencies (committed `Cargo.lock`),
///    unit tests in `src/lib.rs` and integration tests in `tests/`; cargo parser ids.
/// 2. `kiln-eco__durations-12`: a Node package tested with jest 29 from a committed
///    `package-lock.json` (`npm ci`), including `test.each` cases and a test that fetches from a
///    host (it fails for want of a network, in neither list); jest-json ids.
/// 3. `kiln-eco__semver-13`: a Go module without dependencies, table tests with subtests (the
///    parent test is F2P too); go-test-json ids.
/// 4. `kiln-eco__ringbuf-14`: a C99 library built with CMake, one CTest test per case, where the
///    test patch also edits `tests/CMakeLists.txt`; ctest ids.
/// 5. `kiln-eco__csvline-15`: a Maven project whose only dependency is JUnit 4.13.2 (Debian
///    packages it, so it builds without Maven Central); surefire JUnit XML ids.
///
/// `dir` is created if needed; it must not already hold `tasks.jsonl` or `repos/`.
///
/// # Errors
/// [`TestkitError`] when a target already exists, a file cannot be written, or git fails.
pub fn write_ecosystems(dir: &Path) -> Result<DemoLayout, TestkitError> {
    write_set(dir, ECOSYSTEMS, |fixture, repo_dir| {
        build_repo_with(fixture, repo_dir, is_test_path)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_paths_are_classified_per_ecosystem() {
        assert!(is_test_path("tests/decode.rs"));
        assert!(is_test_path("semver_test.go"));
        assert!(is_test_path("pkg/sub/x_test.go"));
        assert!(is_test_path("test/parse.test.js"));
        assert!(is_test_path("lib/parse.spec.js"));
        assert!(is_test_path("src/__tests__/a.js"));
        assert!(is_test_path("tests/CMakeLists.txt"));
        assert!(is_test_path(
            "src/test/java/dev/kilneco/csvline/JoinTest.java"
        ));
        assert!(!is_test_path("src/lib.rs"));
        assert!(!is_test_path("semver.go"));
        assert!(!is_test_path("index.js"));
        assert!(!is_test_path("src/ringbuf.c"));
        assert!(!is_test_path(
            "src/main/java/dev/kilneco/csvline/CsvLine.java"
        ));
        assert!(!is_test_path("src/testing.rs"));
    }

    #[test]
    fn every_fixture_has_every_step_and_sorted_lists() {
        for fixture in ECOSYSTEMS {
            assert_eq!(fixture.owner, OWNER);
            for step in ["initial", "second", "base", "fix", "later"] {
                assert!(
                    fixture.files(step).next().is_some(),
                    "{} has no {step} files",
                    fixture.dir
                );
            }
            // The task file states the lists as written; keep them sorted like the public ones.
            for list in [fixture.fail_to_pass, fixture.pass_to_pass] {
                let mut sorted = list.to_vec();
                sorted.sort_unstable();
                assert_eq!(sorted, list, "{}", fixture.dir);
            }
        }
    }
}
