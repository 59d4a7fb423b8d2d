//! Validation cases: one fixture repository per rule of the validate stage (DESIGN.md,
//! "validate: what FAIL_TO_PASS means here"), each built like the demo fixtures (real git
//! history, real `git diff` patches) from `fixtures/vc-*`.

use std::path::Path;

use crate::error::TestkitError;
use crate::fixtures::{Fixture, Outcome};
use crate::repos::{DemoLayout, build_repo, write_set};

/// The validation cases, in task file order.
static CASES: &[Fixture] = &[
    Fixture {
        dir: "vc-flaky",
        owner: "kiln-vc",
        name: "dice",
        pr: 11,
        issue: 10,
        first_day: 3,
        messages: [
            "Add roll()",
            "Add dice notation",
            "Add a README",
            "Read negative modifiers in dice notation\n\nFixes #10.",
        ],
        later_message: "Release 0.2.0",
        problem_statement: "parse() rejects negative modifiers\n\n\
`parse(\"2d6-1\")` raises `ValueError: not dice notation`; it should return `(2, 6, -1)`.\n",
        hints_text: "",
        version: "0.1",
        fail_to_pass: &["tests/test_notation.py::test_parse_negative_modifier"],
        pass_to_pass: &[
            "tests/test_notation.py::test_parse_modifier",
            "tests/test_notation.py::test_parse_simple",
            "tests/test_roll.py::test_roll_in_range",
            "tests/test_roll.py::test_roll_rejects_zero_sides",
        ],
        outcome: Outcome::Validated,
    },
    Fixture {
        dir: "vc-passfail",
        owner: "kiln-vc",
        name: "units",
        pr: 12,
        issue: 11,
        first_day: 10,
        messages: [
            "Add length conversions",
            "Add format_length()",
            "Add a README",
            "Support inches\n\nFixes #11.",
        ],
        later_message: "Release 0.2.0",
        problem_statement: "Inches are not supported\n\n\
`convert(1, \"in\", \"cm\")` raises `KeyError: 'in'`.\n",
        hints_text: "",
        version: "0.1",
        fail_to_pass: &["tests/test_length.py::test_inches_to_centimetres"],
        pass_to_pass: &[
            "tests/test_format.py::test_format_length",
            "tests/test_format.py::test_format_length_rounds",
            "tests/test_length.py::test_feet_to_metres",
            "tests/test_length.py::test_metres_to_centimetres",
        ],
        outcome: Outcome::Rejected("pass-to-fail"),
    },
    Fixture {
        dir: "vc-fakepass",
        owner: "kiln-vc",
        name: "strutil",
        pr: 13,
        issue: 12,
        first_day: 17,
        messages: [
            "Add title_case()",
            "Add squeeze()",
            "Add a README",
            "Split words on any whitespace in title_case\n\nFixes #12.",
        ],
        later_message: "Release 0.2.0",
        problem_statement: "title_case keeps runs of spaces\n\n\
`title_case(\"hello   big\\tworld\")` returns `\"Hello   Big\\tworld\"`; it should return \
`\"Hello Big World\"`.\n",
        hints_text: "",
        version: "0.1",
        fail_to_pass: &["tests/test_case.py::test_title_case_collapses_whitespace"],
        pass_to_pass: &[
            "tests/test_case.py::test_title_case",
            "tests/test_case.py::test_title_case_keeps_inner_capitals",
            "tests/test_trim.py::test_squeeze",
        ],
        outcome: Outcome::Rejected("invalid-run"),
    },
    Fixture {
        dir: "vc-fuzz",
        owner: "kiln-vc",
        name: "inikit",
        pr: 14,
        issue: 13,
        first_day: 24,
        messages: [
            "Add parse()",
            "Add dump()",
            "Add a README",
            "Treat ';' as a comment marker\n\nFixes #13.",
        ],
        later_message: "Release 0.1.1",
        problem_statement: "Semicolon comments are read as keys\n\n\
`parse(\"; a comment\\nkey = value\\n\")` gives `{\"\": {\"; a comment\": \"\", \"key\": \
\"value\"}}`; `;` starts a comment in INI files.\n",
        hints_text: "",
        version: "0.1",
        fail_to_pass: &["tests/test_parser.py::test_semicolon_comments"],
        pass_to_pass: &[
            "tests/test_parser.py::test_hash_comments",
            "tests/test_parser.py::test_sections",
            "tests/test_parser.py::test_value_with_equals",
            "tests/test_writer.py::test_round_trip",
        ],
        outcome: Outcome::Validated,
    },
    Fixture {
        dir: "vc-n2p",
        owner: "kiln-vc",
        name: "colorkit",
        pr: 15,
        issue: 14,
        first_day: 5,
        messages: [
            "Add hex_to_rgb()",
            "Add mix()",
            "Add a README",
            "Add rgb_to_hex()\n\nFixes #14.",
        ],
        later_message: "Release 0.2.0",
        problem_statement: "No way back from RGB to hex\n\n\
There is `hex_to_rgb`, but no `rgb_to_hex`: `rgb_to_hex((255, 128, 0))` should give \
`\"#ff8000\"`, and components outside 0-255 should raise `ValueError`.\n",
        hints_text: "",
        version: "0.1",
        fail_to_pass: &[
            "tests/test_rgb_to_hex.py::test_rgb_to_hex",
            "tests/test_rgb_to_hex.py::test_rgb_to_hex_rejects_out_of_range[-1]",
            "tests/test_rgb_to_hex.py::test_rgb_to_hex_rejects_out_of_range[256]",
        ],
        pass_to_pass: &[
            "tests/test_hex_to_rgb.py::test_hex_to_rgb",
            "tests/test_hex_to_rgb.py::test_hex_to_rgb_rejects_garbage",
            "tests/test_hex_to_rgb.py::test_hex_to_rgb_short",
            "tests/test_mix.py::test_mix_halfway",
        ],
        outcome: Outcome::Validated,
    },
];

/// The fixture whose gold patch is rewritten by [`as_if_from_another_revision`].
const FUZZ_CASE: &str = "vc-fuzz";

/// Lines the author's revision had above the patched code that the base does not: every hunk of
/// the rewritten patch starts this many lines too far down.
const FUZZ_LINE_SHIFT: u64 = 3;

/// A context line of the real diff (the hunk's last, so `patch --fuzz=1` and up may ignore it)
/// and how it read in the author's revision.
const FUZZ_CONTEXT: (&str, &str) = (
    "            # A section header: the keys that follow belong to it.",
    "            # Section header: later keys belong to it.",
);

/// Blob ids for the rewritten `index` line. They name no object in the fixture repository
/// (whose few blobs are all known), so `git apply --3way` has no preimage to merge against.
const FUZZ_INDEX: &str = "index 0badc0d..0ddba11";

/// Writes the validation cases: fixture repositories under `dir/repos/kiln-vc/<name>/` and the
/// task file `dir/tasks.jsonl`, with the same history shape as [`crate::write_demo`].
///
/// The instances, in task file order, and what validation (with `repeats` of 3 or more) must
/// make of them:
/// 1. `kiln-vc__dice-11` (flaky): validated with FAIL_TO_PASS exactly
///    `tests/test_notation.py::test_parse_negative_modifier`. The test patch adds five cases of
///    `tests/test_fairness.py::test_roll_is_fair[2|4|6|8|20]` that fail or error by a coin flip
///    in every run and never pass; every one whose status changes between the repeats of a side
///    is in `flaky` and in neither list. At least one does with probability 1 - 16^-5. Because
///    they never pass, a run of lucky flips cannot change the lists.
/// 2. `kiln-vc__units-12` (pass-to-fail): the gold patch makes the new inches test pass but
///    changes `format_length`, so `tests/test_format.py::test_format_length` and
///    `tests/test_format.py::test_format_length_rounds` go from pass to fail: rejected with
///    `pass-to-fail`.
/// 3. `kiln-vc__strutil-13` (fake pass): the gold patch's fixed function, when first called,
///    ends the test run with exit code 3, with no failing test in the log: rejected with
///    `invalid-run` because of the `after` runs (the `before` runs are consistent: one failing
///    test, exit code 1).
/// 4. `kiln-vc__inikit-14` (fuzz): the gold patch reads as if written against another revision:
///    its hunk starts [`FUZZ_LINE_SHIFT`] lines too low, its last context line differs from the
///    base, and its `index` line names blobs that do not exist. `git apply` and
///    `git apply --3way` fail, `patch --fuzz=5 -p1` applies it: validated with
///    `tests/test_parser.py::test_semicolon_comments` as FAIL_TO_PASS, every `after` run
///    recording `gold:patch-fuzz`.
/// 5. `kiln-vc__colorkit-15` (n2p): the test patch adds the module `tests/test_rgb_to_hex.py`,
///    which imports a function only the gold patch adds, so it errors at collection before the
///    fix and its three tests are absent there: validated with those tests as FAIL_TO_PASS of
///    class `n2p`, and the four older tests as PASS_TO_PASS. (pytest stops the whole session at a
///    collection error unless run with `--continue-on-collection-errors`, so the older tests only
///    come out as PASS_TO_PASS when the `before` run goes on past the error.)
///
/// [`DemoLayout::instances`] gives the lists; the cases' extra facts (flaky ids, classes, patch
/// methods, the tests going pass to fail) are stated above and checked by the system tests.
///
/// `dir` is created if needed; it must not already hold `tasks.jsonl` or `repos/`.
///
/// # Errors
/// [`TestkitError`] when a target already exists, a file cannot be written, or git fails.
pub fn write_validation_cases(dir: &Path) -> Result<DemoLayout, TestkitError> {
    write_set(dir, CASES, |case, repo_dir| {
        let mut built = build_repo(case, repo_dir)?;
        if case.dir == FUZZ_CASE {
            built.patch =
                as_if_from_another_revision(&built.patch).map_err(|what| TestkitError::Io {
                    path: repo_dir.to_path_buf(),
                    source: std::io::Error::new(std::io::ErrorKind::InvalidData, what),
                })?;
        }
        Ok(built)
    })
}

/// Rewrites a real `git diff` so that it reads as if made against a slightly different revision
/// of the file: every hunk header moves down by [`FUZZ_LINE_SHIFT`] lines, the context line
/// [`FUZZ_CONTEXT`]`.0` becomes [`FUZZ_CONTEXT`]`.1`, and the `index` line names the blobs of
/// [`FUZZ_INDEX`]. Exact context (`git apply`) and a 3-way merge (no preimage blob) then both
/// fail, and only a fuzzy `patch` finds where the hunk goes.
///
/// Fails (with a description) when the diff does not have the expected shape, so that a change
/// to the fixture cannot silently make the patch apply exactly.
fn as_if_from_another_revision(patch: &str) -> Result<String, String> {
    let mut out = String::with_capacity(patch.len());
    let (mut indexes, mut hunks, mut contexts) = (0, 0, 0);
    for line in patch.split_inclusive('\n') {
        let (body, newline) = match line.strip_suffix('\n') {
            Some(body) => (body, "\n"),
            None => (line, ""),
        };
        if let Some(rest) = body.strip_prefix("index ") {
            // `index <old>..<new>[ <mode>]`: keep the mode, replace the blob ids.
            let mode = rest.split_once(' ').map(|(_, mode)| mode);
            out.push_str(FUZZ_INDEX);
            if let Some(mode) = mode {
                out.push(' ');
                out.push_str(mode);
            }
            indexes += 1;
        } else if body.starts_with("@@ ") {
            out.push_str(&shift_hunk_header(body)?);
            hunks += 1;
        } else if body.strip_prefix(' ') == Some(FUZZ_CONTEXT.0) {
            out.push(' ');
            out.push_str(FUZZ_CONTEXT.1);
            contexts += 1;
        } else {
            out.push_str(body);
        }
        out.push_str(newline);
    }
    if indexes == 0 || hunks == 0 || contexts != 1 {
        return Err(format!(
            "the {FUZZ_CASE} gold patch has {indexes} index line(s), {hunks} hunk(s) and \
             {contexts} copies of the context line to change; expected at least one, at least \
             one and exactly one"
        ));
    }
    Ok(out)
}

/// `@@ -a,b +c,d @@ tail` with `a` and `c` moved down by [`FUZZ_LINE_SHIFT`].
fn shift_hunk_header(header: &str) -> Result<String, String> {
    let bad = || format!("unexpected hunk header {header:?}");
    let rest = header.strip_prefix("@@ ").ok_or_else(bad)?;
    let (ranges, tail) = rest.split_once(" @@").ok_or_else(bad)?;
    let (old, new) = ranges.split_once(' ').ok_or_else(bad)?;
    let shift = |range: &str, sign: char| -> Result<String, String> {
        let range = range.strip_prefix(sign).ok_or_else(bad)?;
        let (start, len) = match range.split_once(',') {
            Some((start, len)) => (start, Some(len)),
            None => (range, None),
        };
        let start: u64 = start.parse().map_err(|_| bad())?;
        let start = start + FUZZ_LINE_SHIFT;
        Ok(match len {
            Some(len) => format!("{sign}{start},{len}"),
            None => format!("{sign}{start}"),
        })
    };
    Ok(format!(
        "@@ {} {} @@{tail}",
        shift(old, '-')?,
        shift(new, '+')?
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_case_has_every_step() {
        for case in CASES {
            for step in ["initial", "second", "base", "fix", "later"] {
                assert!(
                    case.files(step).next().is_some(),
                    "{} has no {step} files",
                    case.dir
                );
            }
        }
    }

    #[test]
    fn fuzz_rewrite_moves_hunks_and_changes_one_context_line() {
        let diff = format!(
            "diff --git a/x.py b/x.py\nindex 1234567..89abcde 100644\n--- a/x.py\n+++ b/x.py\n\
             @@ -8,7 +8,7 @@ def parse(text):\n a\n-b\n+c\n {}\n",
            FUZZ_CONTEXT.0
        );
        let rewritten = as_if_from_another_revision(&diff);
        assert_eq!(
            rewritten.as_deref(),
            Ok(format!(
                "diff --git a/x.py b/x.py\n{FUZZ_INDEX} 100644\n--- a/x.py\n+++ b/x.py\n\
                 @@ -11,7 +11,7 @@ def parse(text):\n a\n-b\n+c\n {}\n",
                FUZZ_CONTEXT.1
            )
            .as_str())
        );
        assert_eq!(
            shift_hunk_header("@@ -1 +1,2 @@").as_deref(),
            Ok("@@ -4 +4,2 @@")
        );
        // A diff without the context line to change is refused, not passed on unchanged.
        assert!(as_if_from_another_revision("index 1..2 100644\n@@ -1 +1 @@\n-a\n+b\n").is_err());
    }
}
