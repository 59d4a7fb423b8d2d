//! Judges that decide which candidates go on, and on which operating system they run.
//!
//! The default judges are deterministic and need no LM endpoint: [`heuristic_verdict`] keeps a
//! candidate that has a gold patch, a test patch and a problem statement long enough to act on;
//! [`keyword_platform`] labels a candidate Windows or macOS when its text carries strong
//! platform evidence, and Linux otherwise. An OpenAI-compatible LM client joins them later.

use kiln_schema::{Candidate, PlatformLabel, Verdict};

/// Name recorded in `Verdict::judge` by the heuristic judge.
pub const HEURISTIC_JUDGE: &str = "heuristic";

/// Judges one candidate without an LM.
#[must_use]
pub fn heuristic_verdict(candidate: &Candidate, min_problem_chars: usize) -> Verdict {
    let (keep, label, reason) = if candidate.status != "ok" {
        (
            false,
            "invalid",
            "the task row could not be read".to_string(),
        )
    } else if candidate.test_patch.trim().is_empty() {
        (
            false,
            "no-test-patch",
            "the pull request changes no test file".to_string(),
        )
    } else if candidate.patch.trim().is_empty() {
        (
            false,
            "no-gold-patch",
            "the pull request changes only test files".to_string(),
        )
    } else if candidate.problem_statement.trim().chars().count() < min_problem_chars {
        (
            false,
            "vague",
            format!("the problem statement is shorter than {min_problem_chars} characters"),
        )
    } else {
        (
            true,
            "ok",
            "has a gold patch, a test patch and a problem statement".to_string(),
        )
    };
    Verdict {
        instance_id: candidate.instance_id.clone(),
        keep,
        label: label.to_string(),
        reason,
        judge: HEURISTIC_JUDGE.to_string(),
        prompt_tokens: None,
        completion_tokens: None,
    }
}

/// Words that tie a task to Windows. They are matched as whole words, case-insensitively, in the
/// problem statement and the patches; paths such as `foo/windows.py` do not count on their own.
const WINDOWS_WORDS: &[&str] = &[
    "windows",
    "win32",
    "win64",
    "msvc",
    "powershell",
    "cmd.exe",
    "wsl",
    "dll",
    "registry",
    "mingw",
];
const MACOS_WORDS: &[&str] = &["macos", "darwin", "xcode", "osx", "homebrew", "cocoa"];

/// Labels the platform a candidate needs from keyword evidence.
///
/// A candidate is labelled Windows or macOS only when its problem statement names the platform
/// and the gold patch touches platform-specific code too; one mention in passing ("works on
/// Linux and Windows") is not enough to take a task away from Linux.
#[must_use]
pub fn keyword_platform(candidate: &Candidate) -> PlatformLabel {
    let statement = words(&candidate.problem_statement);
    let patch = words(&candidate.patch);
    let mut label = "linux";
    let mut evidence = Vec::new();
    for (platform, list) in [("windows", WINDOWS_WORDS), ("macos", MACOS_WORDS)] {
        let in_statement: Vec<&str> = list
            .iter()
            .copied()
            .filter(|w| statement.contains(&(*w).to_string()))
            .collect();
        let in_patch: Vec<&str> = list
            .iter()
            .copied()
            .filter(|w| patch.contains(&(*w).to_string()))
            .collect();
        if !in_statement.is_empty() && !in_patch.is_empty() {
            label = platform;
            evidence = in_statement
                .iter()
                .map(|w| format!("problem statement: {w}"))
                .chain(in_patch.iter().map(|w| format!("patch: {w}")))
                .collect();
            break;
        }
    }
    PlatformLabel {
        instance_id: candidate.instance_id.clone(),
        platform: label.to_string(),
        evidence,
        labeller: "keyword".to_string(),
    }
}

fn words(text: &str) -> Vec<String> {
    let mut out: Vec<String> = text
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '.'))
        .map(|w| w.trim_matches('.').to_ascii_lowercase())
        .filter(|w| !w.is_empty())
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(statement: &str, patch: &str, test_patch: &str) -> Candidate {
        Candidate {
            instance_id: "o__r-1".into(),
            status: "ok".into(),
            error: None,
            repo: "o/r".into(),
            pull_number: Some(1),
            base_commit: "abc".into(),
            patch: patch.into(),
            test_patch: test_patch.into(),
            problem_statement: statement.into(),
            hints_text: String::new(),
            created_at: "2024-01-01T00:00:00Z".into(),
            version: None,
            language: None,
            given_fail_to_pass: vec![],
            given_pass_to_pass: vec![],
            origin: "t.jsonl:1".into(),
            ..Candidate::default()
        }
    }

    #[test]
    fn heuristic_keeps_complete_candidates_and_says_why_not() {
        let ok = heuristic_verdict(
            &candidate("Division by zero crashes the parser", "+fix", "+test"),
            20,
        );
        assert!(ok.keep, "{ok:?}");
        let no_tests = heuristic_verdict(
            &candidate("Division by zero crashes the parser", "+fix", ""),
            20,
        );
        assert_eq!(
            (no_tests.keep, no_tests.label.as_str()),
            (false, "no-test-patch")
        );
        let vague = heuristic_verdict(&candidate("broken", "+fix", "+t"), 20);
        assert_eq!(vague.label, "vague");
    }

    #[test]
    fn platform_needs_evidence_in_statement_and_patch() {
        let passing = keyword_platform(&candidate(
            "Crash on Linux and Windows alike",
            "+x = 1",
            "+t",
        ));
        assert_eq!(passing.platform, "linux");
        let windows = keyword_platform(&candidate(
            "Path handling fails on Windows",
            "+if sys.platform == 'win32': sep = '\\\\'",
            "+t",
        ));
        assert_eq!(windows.platform, "windows");
        assert!(
            windows.evidence.iter().any(|e| e.contains("win32")),
            "{windows:?}"
        );
    }
}
