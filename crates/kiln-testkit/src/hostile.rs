//! Hostile cases: fixture repositories written the way an attacker would write a pull request
//! against kiln itself, from `fixtures/hc-*`, built like the demo fixtures.

use std::path::Path;

use crate::error::TestkitError;
use crate::fixtures::{Fixture, Outcome};
use crate::repos::{DemoLayout, build_repo, write_set};

/// The hostile cases, in task file order.
static CASES: &[Fixture] = &[
    Fixture {
        dir: "hc-forged",
        owner: "kiln-hc",
        name: "forgery",
        pr: 21,
        issue: 20,
        first_day: 2,
        messages: [
            "Add double() and triple()",
            "Add shift()",
            "Add a README",
            "Fix triple()\n\nFixes #20.",
        ],
        later_message: "Release 0.1.1",
        problem_statement: "triple() doubles\n\n`triple(2)` returns 4; it should return 6.\n",
        hints_text: "",
        version: "0.1",
        fail_to_pass: &["tests/test_scale.py::test_triple"],
        pass_to_pass: &["tests/test_scale.py::test_double"],
        outcome: Outcome::Rejected("no-fail-to-pass"),
    },
    Fixture {
        dir: "hc-loud",
        owner: "kiln-hc",
        name: "loud",
        pr: 22,
        issue: 21,
        first_day: 9,
        messages: [
            "Add count_words()",
            "Add count_lines()",
            "Add a README",
            "Split words on any whitespace\n\nFixes #21.",
        ],
        later_message: "Release 0.1.1",
        problem_statement: "count_words counts empty words\n\n\
`count_words(\" a\\tb  c\\n\")` returns 5; it should return 3.\n",
        hints_text: "",
        version: "0.1",
        fail_to_pass: &["tests/test_count.py::test_count_words_on_any_whitespace"],
        pass_to_pass: &[
            "tests/test_count.py::test_count_words",
            "tests/test_lines.py::test_count_lines",
        ],
        outcome: Outcome::Validated,
    },
];

/// The sandbox case: what a test run may reach (no network) and write (a bounded disk).
static SANDBOX: &[Fixture] = &[Fixture {
    dir: "hc-sandbox",
    owner: "kiln-hc",
    name: "sandbox",
    pr: 23,
    issue: 22,
    first_day: 16,
    messages: [
        "Add pad_left()",
        "Check where the tests run",
        "Add a README",
        "Keep text longer than the width\n\nFixes #22.",
    ],
    later_message: "Release 0.1.1",
    problem_statement: "pad_left cuts longer text\n\n\
`pad_left(\"1234\", 2)` returns \"34\"; it should return \"1234\".\n",
    hints_text: "",
    version: "0.1",
    fail_to_pass: &["tests/test_left.py::test_pad_left_keeps_longer_text"],
    pass_to_pass: &[
        "tests/test_left.py::test_pad_left",
        "tests/test_sandbox.py::test_only_loopback",
    ],
    outcome: Outcome::ValidateFailed("disk"),
}];

/// Writes the sandbox case like [`write_hostile_cases`]: `kiln-hc__sandbox-23`, whose base
/// has a test that passes only where the network is loopback alone
/// (`tests/test_sandbox.py::test_only_loopback`: launch's baseline run must show it passing),
/// and whose test patch's `tests/conftest.py` writes 4 GiB into the container after every
/// run: with a disk bound below that (`[docker] disk`), validation must end `disk`.
///
/// # Errors
/// As [`write_hostile_cases`].
pub fn write_sandbox_case(dir: &Path) -> Result<DemoLayout, TestkitError> {
    write_set(dir, SANDBOX, build_repo)
}

/// Writes the hostile cases: fixture repositories under `dir/repos/kiln-hc/<name>/` and the
/// task file `dir/tasks.jsonl`, with the same history shape as [`crate::write_demo`].
///
/// The instances, in task file order, and what kiln must make of them:
/// 1. `kiln-hc__forgery-21` (forged validation): the gold patch only edits a docstring, so the
///    new `tests/test_scale.py::test_triple` fails on both sides. The test patch's
///    `tests/conftest.py` searches every process's command line for a runner secret and the
///    gold patch, and on the side it takes for the gold side prints pytest summary lines saying
///    both tests passed, then an end marker with exit code 0, then exits 1. Validation must
///    reject the instance with `no-fail-to-pass`: nothing the code under test prints or reads
///    may decide a run.
/// 2. `kiln-hc__loud-22` (2 GiB of output): a real fix; the test patch's `tests/conftest.py`
///    writes 2 GiB after every test run's report. Validation must still validate it (with the
///    lists of [`DemoLayout::instances`]), and every log file kiln writes must stay within its
///    cap.
///
/// `dir` is created if needed; it must not already hold `tasks.jsonl` or `repos/`.
///
/// # Errors
/// [`TestkitError`] when a target already exists, a file cannot be written, or git fails.
pub fn write_hostile_cases(dir: &Path) -> Result<DemoLayout, TestkitError> {
    write_set(dir, CASES, build_repo)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_case_has_every_step() {
        for case in CASES.iter().chain(SANDBOX) {
            for step in ["initial", "second", "base", "fix", "later"] {
                assert!(
                    case.files(step).next().is_some(),
                    "{} has no {step} files",
                    case.dir
                );
            }
        }
    }
}
