//! Judges that decide which candidates go on, and on which operating system they run.
//!
//! Without an LM: [`heuristic_verdict`] (structural checks, then the issue text read for
//! vagueness, a spelled-out solution, feature requests and questions) and [`keyword_platform`].
//! With one: [`OpenAiClient`] speaks the OpenAI-compatible chat-completions API and implements
//! `kiln_core::LanguageModel`; [`Asker`] wraps any such model with the run's replay store
//! ([`AnswerStore`]), the budget and the accounting; [`lm_verdict`] and [`lm_platform`] ask it
//! (prompts in [`prompts`]) and fall back to the deterministic judges, saying why, where no
//! usable answer comes.

mod asker;
mod client;
mod error;
mod heuristic;
mod judge;
mod platform;
pub mod prompts;
mod store;

pub use asker::{AskStats, Asked, Asker, AskingModel};
pub use client::OpenAiClient;
pub use error::Error;
pub use heuristic::{HEURISTIC_JUDGE, heuristic_verdict, structural_verdict};
pub use judge::lm_verdict;
pub use platform::{
    KEYWORD_LABELLER, KeywordEvidence, keyword_evidence, keyword_platform, lm_platform,
};
pub use store::{
    ANSWER_FORMAT, AnswerStore, LM_DIR, Spent, StoredAnswer, read_answers, read_spent,
};

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_core::config::FilterSettings;
    use kiln_schema::Candidate;

    fn settings(min_problem_chars: i64) -> FilterSettings {
        FilterSettings {
            judge: "heuristic".into(),
            min_problem_chars,
            max_patch_lines: 2000,
            votes: 1,
            models: vec![],
            drop_flags: vec![],
            lm: None,
        }
    }

    fn candidate(statement: &str, patch: &str, test_patch: &str) -> Candidate {
        Candidate {
            status: kiln_schema::CandidateStatus::Ok,
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
            ..Candidate::new(kiln_schema::InstanceId::new("o__r-1").unwrap())
        }
    }

    #[test]
    fn heuristic_keeps_complete_candidates_and_says_why_not() {
        let ok = heuristic_verdict(
            &candidate("Division by zero crashes the parser", "+fix", "+test"),
            &settings(20),
        );
        assert!(ok.keep, "{ok:?}");
        let no_tests = heuristic_verdict(
            &candidate("Division by zero crashes the parser", "+fix", ""),
            &settings(20),
        );
        assert_eq!(
            (no_tests.keep, no_tests.label.as_str()),
            (false, "no-test-patch")
        );
        let vague = heuristic_verdict(&candidate("broken", "+fix", "+t"), &settings(20));
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
        assert_eq!(windows.keyword_evidence, "clear");
        assert_eq!(passing.keyword_evidence, "mixed");
        let plain = keyword_platform(&candidate("Parser crash", "+x = 1", "+t"));
        assert_eq!(
            (plain.platform.as_str(), plain.keyword_evidence.as_str()),
            ("linux", "none")
        );
    }
}
