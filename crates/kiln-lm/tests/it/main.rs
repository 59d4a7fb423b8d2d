//! Integration tests of kiln-lm: the client against the fake endpoint and against the shapes of
//! real servers' answers, the judges over realistic issue texts, replay, budget and fallbacks.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a panic is how a test fails"
)]
mod client;
mod heuristic;
mod judge;
mod platform;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kiln_core::config::{FilterSettings, LmSettings, Price, SplitSettings};
use kiln_lm::{AnswerStore, Asker, OpenAiClient};
use kiln_schema::Candidate;

/// `[lm]` settings for a fake at `url`: one retry, short timeout.
pub fn lm_settings(url: &str) -> LmSettings {
    LmSettings {
        base_url: url.to_string(),
        model: "fake-judge-1".into(),
        api_key_env: "KILN_TEST_NO_SUCH_KEY".into(),
        timeout: Duration::from_secs(5),
        retries: 2,
        max_in_flight: 4,
        temperature: 0.0,
        max_tokens: 256,
        json_schema: true,
        max_cost_usd: None,
        prices: BTreeMap::from([(
            "fake-judge-1".to_string(),
            Price {
                prompt: 1.0,
                completion: 4.0,
            },
        )]),
    }
}

/// A client for the settings, with retries after 10 ms instead of seconds.
pub fn client(settings: &LmSettings) -> Arc<OpenAiClient> {
    Arc::new(
        OpenAiClient::with_api_key(settings, None)
            .unwrap()
            .with_backoff(Duration::from_millis(10)),
    )
}

/// An asker over a fresh run directory.
pub fn asker(settings: &LmSettings, run: &std::path::Path, replay: bool) -> Asker {
    let store = AnswerStore::open(run).unwrap();
    Asker::new(client(settings), store, "filter", settings, replay).unwrap()
}

/// Filter settings with the LM judge when `lm` is given, the heuristic otherwise.
pub fn filter_settings(lm: Option<LmSettings>) -> FilterSettings {
    FilterSettings {
        judge: if lm.is_some() { "lm" } else { "heuristic" }.into(),
        min_problem_chars: 20,
        max_patch_lines: 2000,
        votes: 1,
        models: lm.iter().map(|l| l.model.clone()).collect(),
        drop_flags: vec![],
        lm,
    }
}

/// Split settings that ask `lm` where the platform keywords are mixed.
pub fn split_settings(lm: LmSettings) -> SplitSettings {
    SplitSettings {
        keep: vec!["linux".into()],
        judge: "lm".into(),
        model: Some(lm.model.clone()),
        lm: Some(lm),
    }
}

/// A candidate with the usual parts; the tests change what they need.
pub fn candidate(id: &str, statement: &str) -> Candidate {
    Candidate {
        status: kiln_schema::CandidateStatus::Ok,
        error: None,
        repo: "acme/calc".into(),
        pull_number: Some(7),
        base_commit: "0123456789abcdef".into(),
        patch: "diff --git a/calc/ops.py b/calc/ops.py\n--- a/calc/ops.py\n+++ b/calc/ops.py\n@@ -1,2 +1,2 @@\n def divide(a, b):\n-    return a // b\n+    return a / b\n".into(),
        test_patch: "diff --git a/tests/test_ops.py b/tests/test_ops.py\n--- a/tests/test_ops.py\n+++ b/tests/test_ops.py\n@@ -1,2 +1,4 @@\n+def test_divide():\n+    assert divide(7, 2) == 3.5\n".into(),
        problem_statement: statement.into(),
        hints_text: String::new(),
        created_at: "2024-03-01T00:00:00Z".into(),
        version: None,
        language: Some("python".into()),
        given_fail_to_pass: vec![],
        given_pass_to_pass: vec![],
        origin: "tasks.jsonl:1".into(),
        ..Candidate::new(kiln_schema::InstanceId::new(id).unwrap())
    }
}

/// A problem statement any judge keeps.
pub const CLEAR_BUG: &str = "divide() truncates the quotient\n\n`divide(7, 2)` returns `3`, but \
dividing should give the true quotient `3.5`. The docs say divide() is true division.";
