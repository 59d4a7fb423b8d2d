//! The heuristic judge over realistic issue texts (tests/data/issues): every label, with its
//! reason.

use std::path::Path;

use kiln_lm::heuristic_verdict;
use kiln_schema::Candidate;

use crate::{candidate, filter_settings};

fn issue(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/issues")
        .join(format!("{name}.md"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Judges `subject` and checks keep, label and the reason (a fragment of it).
fn check(subject: &Candidate, max_patch_lines: i64, keep: bool, label: &str, reason: &str) {
    let mut settings = filter_settings(None);
    settings.max_patch_lines = max_patch_lines;
    let verdict = heuristic_verdict(subject, &settings);
    assert_eq!(
        (verdict.keep, verdict.label.as_str()),
        (keep, label),
        "{}: {verdict:?}",
        subject.instance_id
    );
    assert!(
        verdict.reason.contains(reason),
        "{}: reason {:?} lacks {reason:?}",
        subject.instance_id,
        verdict.reason
    );
    assert_eq!(verdict.judge, "heuristic");
    assert!(verdict.votes.is_empty() && verdict.fallback.is_none());
}

fn from_file(name: &str) -> Candidate {
    candidate(&format!("acme__calc-{name}"), &issue(name))
}

#[test]
fn issue_texts_get_their_labels_and_reasons() {
    let cases = [
        (
            "crash-with-traceback",
            true,
            "ok",
            "problem statement that reports a defect",
        ),
        (
            "link-only",
            false,
            "link-only",
            "the issue is 1 link(s) or image(s) and 4 word(s) besides",
        ),
        (
            "screenshot-only",
            false,
            "link-only",
            "2 link(s) or image(s) and 3 word(s) besides",
        ),
        (
            "too-short",
            false,
            "vague",
            "the problem statement is shorter than 20 characters",
        ),
        (
            "feature-request",
            false,
            "feature-request",
            "asks for something new (\"feature request\") and reports no defect",
        ),
        (
            "question",
            false,
            "question",
            "the issue is a question (\"how do i\") and reports no defect",
        ),
        ("feature-with-defect", true, "ok", "reports a defect"),
        (
            "patch-in-issue",
            false,
            "solution-in-issue",
            "the issue contains a patch",
        ),
    ];
    for (name, keep, label, reason) in cases {
        check(&from_file(name), 2000, keep, label, reason);
    }
}

#[test]
fn a_fix_quoted_in_the_issue_gives_the_solution_away() {
    let mut subject = from_file("fix-quoted");
    subject.patch =
        "diff --git a/calc/ops.py b/calc/ops.py\n--- a/calc/ops.py\n+++ b/calc/ops.py\n\
@@ -1,2 +1,4 @@\n def divide(numerator, denominator):\n\
+    if denominator == 0:\n\
+        raise ZeroDivisionError(\"denominator must not be zero\")\n\
+    return numerator / denominator\n"
            .into();
    check(
        &subject,
        2000,
        false,
        "solution-in-issue",
        "3 of the 3 substantial lines the gold patch adds are in the issue word for word",
    );
    // The same issue with another fix is a fair task.
    let mut other = from_file("fix-quoted");
    other.patch = "--- a/calc/ops.py\n+++ b/calc/ops.py\n@@ -1 +1,3 @@\n+    _require_nonzero(denominator, \"denominator\")\n".into();
    check(&other, 2000, true, "ok", "reports a defect");
}

#[test]
fn structural_problems_come_first() {
    let report = issue("crash-with-traceback");
    let mut unreadable = candidate("acme__calc-1", &report);
    unreadable.status = kiln_schema::CandidateStatus::Error;
    check(&unreadable, 2000, false, "invalid", "could not be read");
    let mut no_tests = candidate("acme__calc-2", &report);
    no_tests.test_patch = "  \n".into();
    check(
        &no_tests,
        2000,
        false,
        "no-test-patch",
        "changes no test file",
    );
    let mut no_fix = candidate("acme__calc-3", &report);
    no_fix.patch.clear();
    check(
        &no_fix,
        2000,
        false,
        "no-gold-patch",
        "changes only test files",
    );
    let mut huge = candidate("acme__calc-4", &report);
    huge.patch = format!(
        "--- a/gen.py\n+++ b/gen.py\n@@ -1,30 +1,30 @@\n{}{}",
        "-old = 1\n".repeat(30),
        "+new = 2\n".repeat(30)
    );
    check(
        &huge,
        50,
        false,
        "patch-too-large",
        "the gold patch changes 60 lines, more than max_patch_lines (50)",
    );
    check(&huge, 60, true, "ok", "reports a defect");
    let empty = candidate("acme__calc-5", " \n\t");
    check(&empty, 2000, false, "empty-issue", "the issue has no text");
}
