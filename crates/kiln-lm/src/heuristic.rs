//! The heuristic judge: deterministic verdicts without an LM.
//!
//! Checks run in a fixed order and the first that fails names the label. The first group is
//! structural ([`structural_verdict`]): a task without tests, without a fix, with a huge fix or
//! without an issue text is no task whatever an LM would say, so the LM judge is not asked about
//! it. The second group reads the issue text for what the LM judge would otherwise weigh: too
//! short to act on, the solution spelled out, a feature request or a question with no defect in
//! it.

use kiln_core::config::FilterSettings;
use kiln_schema::{Candidate, CandidateStatus, Verdict};

/// Name recorded in `Verdict::judge` by the heuristic judge.
pub const HEURISTIC_JUDGE: &str = "heuristic";

/// Words of ordinary text an issue needs besides its links to be more than a pointer elsewhere.
const MIN_WORDS_BESIDES_LINKS: usize = 6;

/// Phrases of a request for something new.
const FEATURE_PHRASES: &[&str] = &[
    "feature request",
    "[feature]",
    "feature:",
    "it would be nice",
    "it would be great",
    "would be nice if",
    "would be great if",
    "would be nice to",
    "please add",
    "add support for",
    "support for",
    "proposal:",
    "enhancement",
    "i'd like to be able",
    "i would like to be able",
    "could you add",
];

/// Phrases of a question.
const QUESTION_PHRASES: &[&str] = &[
    "how do i",
    "how can i",
    "how to ",
    "is it possible",
    "is there a way",
    "[question]",
    "question:",
    "what is the best way",
    "what's the best way",
];

/// Words that say something is broken: an issue with one of them reports a defect, whatever
/// else it asks for.
const DEFECT_WORDS: &[&str] = &[
    "bug",
    "error",
    "exception",
    "traceback",
    "crash",
    "fail",
    "incorrect",
    "wrong",
    "broken",
    "unexpected",
    "regression",
    "doesn't work",
    "does not work",
    "not working",
    "raise",
    "throw",
    "instead of",
    "should be",
    "should not",
    "shouldn't",
    "segfault",
    "panic",
];

/// A verdict of the heuristic judge.
fn verdict(candidate: &Candidate, keep: bool, label: &str, reason: String) -> Verdict {
    Verdict {
        instance_id: candidate.instance_id.clone(),
        keep,
        label: label.to_string(),
        reason,
        judge: HEURISTIC_JUDGE.to_string(),
        prompt_tokens: None,
        completion_tokens: None,
        cost_usd: None,
        flags: Vec::new(),
        votes: Vec::new(),
        raw_answers: Vec::new(),
        answer_keys: Vec::new(),
        fallback: None,
    }
}

/// Judges one candidate without an LM.
#[must_use]
pub fn heuristic_verdict(candidate: &Candidate, settings: &FilterSettings) -> Verdict {
    structural_verdict(candidate, settings).unwrap_or_else(|| content_verdict(candidate, settings))
}

/// The verdict on a candidate that is no task at all (an unreadable row, no tests, no fix, a
/// fix above `max_patch_lines`, no issue text or only links), or `None` when it is a task an
/// LM could judge.
#[must_use]
pub fn structural_verdict(candidate: &Candidate, settings: &FilterSettings) -> Option<Verdict> {
    let statement = candidate.problem_statement.trim();
    let reject = |label: &str, reason: String| Some(verdict(candidate, false, label, reason));
    if candidate.status != CandidateStatus::Ok {
        return reject("invalid", "the task row could not be read".into());
    }
    if candidate.test_patch.trim().is_empty() {
        return reject(
            "no-test-patch",
            "the pull request changes no test file".into(),
        );
    }
    if candidate.patch.trim().is_empty() {
        return reject(
            "no-gold-patch",
            "the pull request changes only test files".into(),
        );
    }
    let changed = changed_lines(&candidate.patch);
    if changed > usize::try_from(settings.max_patch_lines).unwrap_or(usize::MAX) {
        return reject(
            "patch-too-large",
            format!(
                "the gold patch changes {changed} lines, more than max_patch_lines ({})",
                settings.max_patch_lines
            ),
        );
    }
    if statement.is_empty() {
        return reject("empty-issue", "the issue has no text".into());
    }
    let (links, words) = links_and_words(statement);
    if links > 0 && words < MIN_WORDS_BESIDES_LINKS {
        return reject(
            "link-only",
            format!(
                "the issue is {links} link(s) or image(s) and {words} word(s) besides; its substance is elsewhere"
            ),
        );
    }
    None
}

/// The checks on the issue text that the LM judge replaces.
fn content_verdict(candidate: &Candidate, settings: &FilterSettings) -> Verdict {
    let statement = candidate.problem_statement.trim();
    let min = usize::try_from(settings.min_problem_chars).unwrap_or(0);
    if statement.chars().count() < min {
        return verdict(
            candidate,
            false,
            "vague",
            format!("the problem statement is shorter than {min} characters"),
        );
    }
    if let Some(reason) = solution_in_issue(statement, &candidate.patch) {
        return verdict(candidate, false, "solution-in-issue", reason);
    }
    let lower = statement.to_lowercase();
    let defect = DEFECT_WORDS.iter().find(|w| lower.contains(*w));
    if defect.is_none() {
        if let Some(phrase) = FEATURE_PHRASES.iter().find(|p| lower.contains(*p)) {
            return verdict(
                candidate,
                false,
                "feature-request",
                format!("the issue asks for something new (\"{phrase}\") and reports no defect"),
            );
        }
        if let Some(phrase) = QUESTION_PHRASES.iter().find(|p| lower.contains(*p)) {
            return verdict(
                candidate,
                false,
                "question",
                format!("the issue is a question (\"{phrase}\") and reports no defect"),
            );
        }
    }
    verdict(
        candidate,
        true,
        "ok",
        "has a gold patch, a test patch and a problem statement that reports a defect".into(),
    )
}

/// Lines a unified diff adds or removes (file headers not counted).
fn changed_lines(patch: &str) -> usize {
    patch
        .lines()
        .filter(|l| {
            (l.starts_with('+') && !l.starts_with("+++ "))
                || (l.starts_with('-') && !l.starts_with("--- "))
        })
        .count()
}

/// Links (URLs, Markdown links and images) in a text, and the words of two or more letters
/// besides them.
fn links_and_words(text: &str) -> (usize, usize) {
    let mut links = 0;
    let mut words = 0;
    for token in text.split_whitespace() {
        let is_link = token.contains("http://")
            || token.contains("https://")
            || token.contains("](")
            || token.starts_with("![");
        if is_link {
            links += 1;
        } else if token.chars().filter(|c| c.is_alphabetic()).count() >= 2 {
            words += 1;
        }
    }
    (links, words)
}

/// Why the issue gives the fix away, if it does: it carries a diff, or most of the substantial
/// lines the gold patch adds appear in it word for word.
fn solution_in_issue(statement: &str, patch: &str) -> Option<String> {
    let has_diff = statement.lines().any(|l| {
        let l = l.trim_start();
        l.starts_with("diff --git ")
            || l.starts_with("@@ -")
            || l.starts_with("```diff")
            || l.starts_with("```patch")
    });
    if has_diff {
        return Some("the issue contains a patch".into());
    }
    let added: Vec<&str> = patch
        .lines()
        .filter(|l| l.starts_with('+') && !l.starts_with("+++ "))
        .map(|l| l[1..].trim())
        // Short lines (`}`, `return x`, `else:`) appear in any text about code.
        .filter(|l| l.chars().count() >= 15)
        .collect();
    let quoted = added.iter().filter(|l| statement.contains(**l)).count();
    (quoted >= 2 && quoted * 2 >= added.len()).then(|| {
        format!(
            "{quoted} of the {} substantial lines the gold patch adds are in the issue word for word",
            added.len()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_lines_skip_file_headers() {
        let patch =
            "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-old\n+new\n+more\n context\n";
        assert_eq!(changed_lines(patch), 3);
    }

    #[test]
    fn links_are_told_from_words() {
        assert_eq!(
            links_and_words("Crash\n\nhttps://gist.github.com/x ![img](https://i.imgur.com/a.png)"),
            (2, 1)
        );
        assert_eq!(links_and_words("a b c real words here"), (0, 3));
    }
}
