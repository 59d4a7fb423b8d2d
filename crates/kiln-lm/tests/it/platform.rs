//! The OS split: keywords first, the LM only where they are mixed.

use kiln_lm::lm_platform;
use kiln_testkit::fake_lm::{FakeLm, LmReply};
use serde_json::json;

use crate::{asker, candidate, lm_settings, split_settings};

#[tokio::test]
async fn the_lm_is_asked_only_where_the_keywords_are_mixed() {
    let fake = FakeLm::scripted(
        vec![LmReply::json(
            &json!({"platform": "windows", "reason": "The fix only changes the registry lookup."}),
        )],
        LmReply::json(&json!({"platform": "linux", "reason": "cross-platform"})),
    )
    .unwrap();
    let lm = lm_settings(&fake.url());
    let settings = split_settings(lm.clone());
    let run = tempfile::tempdir().unwrap();
    let asker = asker(&lm, run.path(), true);

    // No platform word: linux, nobody asked.
    let plain = lm_platform(
        &candidate("acme__calc-1", "divide() truncates"),
        &settings,
        &asker,
    )
    .await
    .unwrap();
    assert_eq!(
        (plain.platform.as_str(), plain.keyword_evidence.as_str()),
        ("linux", "none")
    );
    // The statement and the patch both name Windows: clear, nobody asked.
    let mut clear = candidate("acme__calc-2", "Paths break on Windows");
    clear.patch = "+if sys.platform == 'win32':\n+    sep = '\\\\'\n".into();
    let clear = lm_platform(&clear, &settings, &asker).await.unwrap();
    assert_eq!(
        (clear.platform.as_str(), clear.keyword_evidence.as_str()),
        ("windows", "clear")
    );
    assert_eq!(clear.labeller, "keyword");
    assert!(fake.requests().is_empty());

    // Windows only in the patch: mixed, the LM decides and both are kept.
    let mut mixed = candidate("acme__calc-3", "Config lookup ignores the user's settings");
    mixed.patch = "+    value = winreg.QueryValue(registry, key)\n".into();
    let mixed = lm_platform(&mixed, &settings, &asker).await.unwrap();
    assert_eq!(fake.chat_requests().len(), 1);
    assert_eq!(mixed.keyword_evidence, "mixed");
    assert_eq!(mixed.platform, "windows");
    assert_eq!(mixed.labeller, "fake-judge-1");
    assert_eq!(mixed.evidence, ["patch: registry"]);
    assert_eq!(
        mixed.reason.as_deref(),
        Some("The fix only changes the registry lookup.")
    );
    assert!(
        mixed
            .raw_answer
            .as_deref()
            .is_some_and(|r| r.contains("windows"))
    );
    assert_eq!(mixed.answer_keys.len(), 1);
    assert!(mixed.prompt_tokens.is_some() && mixed.cost_usd.is_some());
    let prompt = fake.chat_requests()[0].body["messages"][1]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        prompt.contains("Platform keywords found: patch: registry"),
        "{prompt}"
    );
}

#[tokio::test]
async fn an_unusable_answer_leaves_the_keyword_label() {
    let fake =
        FakeLm::scripted(vec![], LmReply::Content("It depends on the user.".into())).unwrap();
    let lm = lm_settings(&fake.url());
    let run = tempfile::tempdir().unwrap();
    let mut mixed = candidate("acme__calc-3", "Crash on Linux and on Windows alike");
    mixed.patch = "+    return a / b\n".into();
    let label = lm_platform(
        &mixed,
        &split_settings(lm.clone()),
        &asker(&lm, run.path(), true),
    )
    .await
    .unwrap();
    assert_eq!(
        (label.platform.as_str(), label.labeller.as_str()),
        ("linux", "keyword")
    );
    assert_eq!(
        label.fallback.as_deref(),
        Some(
            "no usable LM answer (fake-judge-1: the answer holds no JSON object: It depends on the user.)"
        )
    );
    assert_eq!(label.raw_answer.as_deref(), Some("It depends on the user."));
}
