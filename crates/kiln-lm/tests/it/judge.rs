//! The LM filter against the scripted fake: verdicts, votes, fallbacks, replay and the budget.

use std::time::Duration;

use kiln_lm::{Asked, lm_verdict};
use kiln_testkit::fake_lm::{FakeLm, FakeLmOptions, LmReply};
use serde_json::json;

use crate::{CLEAR_BUG, asker, candidate, filter_settings, lm_settings};

/// The LM verdict on a clear bug report, in a fresh run.
async fn judge_clear_bug(settings: &kiln_core::config::FilterSettings) -> kiln_schema::Verdict {
    let lm = settings.lm.clone().unwrap();
    let run = tempfile::tempdir().unwrap();
    lm_verdict(
        &candidate("acme__calc-7", CLEAR_BUG),
        settings,
        &asker(&lm, run.path(), true),
    )
    .await
    .unwrap()
}

fn answer(label: &str, reason: &str, flags: &[&str]) -> LmReply {
    LmReply::json(&json!({"label": label, "reason": reason, "flags": flags}))
}

#[tokio::test]
async fn three_votes_keep_by_majority_and_record_each_vote() {
    let fake = FakeLm::scripted(
        vec![
            answer("ok", "States the wrong and the right result.", &[]),
            answer("vague", "Which division is meant?", &["image-only"]),
            answer("ok", "Clear expected value.", &["network-access"]),
        ],
        LmReply::server_error(),
    )
    .unwrap();
    let lm = lm_settings(&fake.url());
    let mut settings = filter_settings(Some(lm.clone()));
    settings.votes = 3;
    settings.lm.as_mut().unwrap().temperature = 0.7;
    let run = tempfile::tempdir().unwrap();
    let asker = asker(&lm, run.path(), true);
    let verdict = lm_verdict(&candidate("acme__calc-7", CLEAR_BUG), &settings, &asker)
        .await
        .unwrap();
    assert!(verdict.keep, "{verdict:?}");
    assert_eq!(verdict.label, "ok");
    assert_eq!(verdict.judge, "fake-judge-1");
    assert_eq!(
        verdict.reason,
        "States the wrong and the right result. (votes: ok 2, vague 1)"
    );
    assert_eq!(
        verdict.votes,
        [
            "fake-judge-1: ok",
            "fake-judge-1: vague",
            "fake-judge-1: ok"
        ]
    );
    assert!(
        verdict.flags.is_empty(),
        "one vote of three is no majority for a flag"
    );
    assert_eq!(verdict.answer_keys.len(), 3);
    assert_eq!(verdict.raw_answers.len(), 3);
    assert!(verdict.raw_answers[1].contains("Which division"));
    assert_eq!(verdict.fallback, None);
    // Tokens are the sum of the three answers' usage, and the cost follows the price table.
    let requests = fake.chat_requests();
    assert_eq!(requests.len(), 3);
    let prompt = verdict.prompt_tokens.unwrap();
    let completion = verdict.completion_tokens.unwrap();
    assert!(prompt > 300 && completion > 10, "{verdict:?}");
    let expected = (prompt as f64 * 1.0 + completion as f64 * 4.0) / 1e6;
    assert!((verdict.cost_usd.unwrap() - expected).abs() < 1e-12);
    let stats = asker.stats();
    assert_eq!((stats.requests, stats.answers, stats.replayed), (3, 3, 0));
}

#[tokio::test]
async fn several_models_vote_in_turn_and_flags_need_half_the_votes() {
    let fake = FakeLm::start(FakeLmOptions::default(), |call| {
        if call.model == "judge-a" {
            answer("ok", "fine", &["image-only"])
        } else {
            answer("ok", "fine too", &["image-only", "network-access"])
        }
    })
    .unwrap();
    let lm = lm_settings(&fake.url());
    let mut settings = filter_settings(Some(lm.clone()));
    settings.models = vec!["judge-a".into(), "judge-b".into()];
    settings.votes = 2;
    settings.drop_flags = vec!["image-only".into()];
    let verdict = judge_clear_bug(&settings).await;
    let models: Vec<String> = fake
        .chat_requests()
        .iter()
        .map(|r| r.body["model"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(models, ["judge-a", "judge-b"]);
    assert_eq!(verdict.judge, "judge-a+judge-b");
    assert_eq!(verdict.flags, ["image-only", "network-access"]);
    assert!(!verdict.keep, "image-only is a drop flag: {verdict:?}");
    assert_eq!(verdict.label, "flagged");
    assert!(
        verdict
            .reason
            .starts_with("flagged image-only (drop_flags)"),
        "{}",
        verdict.reason
    );
}

/// Every way an answer can be unusable falls back to the heuristic judge, says why, and keeps
/// the tokens the endpoint reported.
#[tokio::test]
async fn unusable_answers_fall_back_to_the_heuristic_with_the_reason() {
    let cases: Vec<(LmReply, &str)> = vec![
        (
            LmReply::ContentWithUsage {
                content: "I think this task is fine.".into(),
                prompt_tokens: 1200,
                completion_tokens: 9,
            },
            "the answer holds no JSON object: I think this task is fine.",
        ),
        (
            LmReply::Refusal("I can't help with that.".into()),
            "the model refused: I can't help with that.",
        ),
        (
            LmReply::Truncated("{\"label\": \"ok\", \"reas".into()),
            "(the answer was cut off at max_tokens)",
        ),
        (
            LmReply::json(&json!({"label": "maybe", "reason": "?"})),
            "the answer's label \"maybe\" is not one of the classes",
        ),
        (
            LmReply::Raw(kiln_testkit::http::Reply::json(
                200,
                &json!({"id": "x", "object": "chat.completion", "choices": [], "usage": {"prompt_tokens": 700, "completion_tokens": 0, "total_tokens": 700}}),
            )),
            "the body has no choices",
        ),
        (LmReply::server_error(), "HTTP 500: The server had an error"),
        (
            LmReply::Slow(Duration::from_secs(3), Box::new(answer("ok", "late", &[]))),
            "within 0.3s (3 attempts)",
        ),
    ];
    for (reply, why) in cases {
        let fake = FakeLm::scripted(vec![], reply.clone()).unwrap();
        let mut lm = lm_settings(&fake.url());
        lm.timeout = Duration::from_millis(300);
        let verdict = judge_clear_bug(&filter_settings(Some(lm))).await;
        assert_eq!(verdict.judge, "heuristic", "{reply:?}");
        assert!(verdict.keep, "the heuristic keeps a clear bug: {verdict:?}");
        let fallback = verdict.fallback.clone().unwrap_or_default();
        assert!(
            fallback.starts_with("no usable LM answer (fake-judge-1: ") && fallback.contains(why),
            "{reply:?}: {fallback}"
        );
        assert_eq!(verdict.votes.len(), 1);
        assert!(verdict.votes[0].starts_with("fake-judge-1: unusable: "));
        assert_eq!(verdict.answer_keys.len(), 1);
        match reply {
            LmReply::ContentWithUsage { .. } => {
                assert_eq!(verdict.prompt_tokens, Some(1200));
                assert_eq!(verdict.completion_tokens, Some(9));
                assert_eq!(verdict.raw_answers, ["I think this task is fine."]);
            }
            // No usable body, but the usage it reported is counted.
            LmReply::Raw(_) => assert_eq!(verdict.prompt_tokens, Some(700)),
            _ => {}
        }
    }
}

#[tokio::test]
async fn a_429_with_retry_after_still_gives_the_lm_verdict() {
    let fake = FakeLm::scripted(
        vec![
            LmReply::rate_limited(1),
            answer("solution-leak", "The issue has the fix.", &[]),
        ],
        LmReply::server_error(),
    )
    .unwrap();
    let lm = lm_settings(&fake.url());
    let run = tempfile::tempdir().unwrap();
    let asker = asker(&lm, run.path(), true);
    let verdict = lm_verdict(
        &candidate("acme__calc-7", CLEAR_BUG),
        &filter_settings(Some(lm.clone())),
        &asker,
    )
    .await
    .unwrap();
    assert_eq!(
        (verdict.keep, verdict.label.as_str()),
        (false, "solution-leak")
    );
    assert_eq!(verdict.fallback, None);
    assert_eq!(asker.stats().requests, 2);
    let requests = fake.chat_requests();
    assert!(requests[1].at.duration_since(requests[0].at) >= Duration::from_millis(950));
}

#[tokio::test]
async fn candidates_that_are_no_task_are_not_asked_about() {
    let fake = FakeLm::scripted(vec![], answer("ok", "fine", &[])).unwrap();
    let lm = lm_settings(&fake.url());
    let run = tempfile::tempdir().unwrap();
    let mut no_tests = candidate("acme__calc-8", CLEAR_BUG);
    no_tests.test_patch.clear();
    let verdict = lm_verdict(
        &no_tests,
        &filter_settings(Some(lm.clone())),
        &asker(&lm, run.path(), true),
    )
    .await
    .unwrap();
    assert_eq!(verdict.label, "no-test-patch");
    assert_eq!(verdict.fallback, None);
    assert!(fake.requests().is_empty());
}

#[tokio::test]
async fn stored_answers_are_replayed_and_forcing_asks_again() {
    let fake = FakeLm::scripted(vec![], answer("vague", "No expected output.", &[])).unwrap();
    let lm = lm_settings(&fake.url());
    let settings = filter_settings(Some(lm.clone()));
    let run = tempfile::tempdir().unwrap();
    let subject = candidate("acme__calc-7", CLEAR_BUG);
    let first = lm_verdict(&subject, &settings, &asker(&lm, run.path(), true))
        .await
        .unwrap();
    assert_eq!(fake.chat_requests().len(), 1);
    let replaying = asker(&lm, run.path(), true);
    let replayed = lm_verdict(&subject, &settings, &replaying).await.unwrap();
    assert_eq!(replayed, first, "a replay gives the same row");
    assert_eq!(fake.chat_requests().len(), 1, "a replay asks nobody");
    assert_eq!(
        (replaying.stats().requests, replaying.stats().replayed),
        (0, 1)
    );
    let forced = asker(&lm, run.path(), false);
    lm_verdict(&subject, &settings, &forced).await.unwrap();
    assert_eq!(fake.chat_requests().len(), 2, "forcing asks again");
    assert_eq!(forced.stats().requests, 1);
    // The stored record holds the request as sent and the answer as received.
    let store = kiln_lm::AnswerStore::open(run.path()).unwrap();
    let record = store.load(&first.answer_keys[0]).unwrap().unwrap();
    assert_eq!(record.request, fake.chat_requests()[1].body);
    assert_eq!(record.response["object"], "chat.completion");
    assert_eq!(record.instance_id, "acme__calc-7");
    let spent = store.spent().unwrap();
    assert_eq!(spent.requests, 2);
}

#[tokio::test]
async fn a_failed_answer_is_not_replayed() {
    let fake = FakeLm::scripted(
        vec![
            LmReply::server_error(),
            LmReply::server_error(),
            LmReply::server_error(),
        ],
        answer("ok", "fine", &[]),
    )
    .unwrap();
    let lm = lm_settings(&fake.url());
    let settings = filter_settings(Some(lm.clone()));
    let run = tempfile::tempdir().unwrap();
    let subject = candidate("acme__calc-7", CLEAR_BUG);
    let failed = lm_verdict(&subject, &settings, &asker(&lm, run.path(), true))
        .await
        .unwrap();
    assert!(failed.fallback.is_some());
    let again = lm_verdict(&subject, &settings, &asker(&lm, run.path(), true))
        .await
        .unwrap();
    assert_eq!(again.fallback, None, "{again:?}");
    assert_eq!(fake.chat_requests().len(), 4);
}

/// The budget is checked before each request against its worst case, so the run never spends
/// past it; the rows that could not be asked fall back, saying so.
#[tokio::test]
async fn the_budget_stops_asking_instead_of_overspending() {
    let fake = FakeLm::scripted(vec![], answer("ok", "fine", &[])).unwrap();
    let mut lm = lm_settings(&fake.url());
    // One request's worst case (half its 2,400 prompt bytes as tokens, 256 completion tokens,
    // at $1 and $4 per million) is about $0.0022, while it really costs about $0.0007: the
    // budget lets the first requests through and stops before the fourth.
    lm.max_cost_usd = Some(0.0032);
    let settings = filter_settings(Some(lm.clone()));
    let run = tempfile::tempdir().unwrap();
    let asker = asker(&lm, run.path(), true);
    let mut verdicts = Vec::new();
    for i in 0..4 {
        let subject = candidate(
            &format!("acme__calc-{i}"),
            &format!("{CLEAR_BUG} (case {i})"),
        );
        verdicts.push(lm_verdict(&subject, &settings, &asker).await.unwrap());
    }
    let asked = fake.chat_requests().len();
    assert!((1..4).contains(&asked), "{asked} requests");
    let stopped: Vec<_> = verdicts.iter().filter(|v| v.fallback.is_some()).collect();
    assert_eq!(stopped.len(), 4 - asked);
    for verdict in &stopped {
        let why = verdict.fallback.as_deref().unwrap_or_default();
        assert!(
            why.starts_with("the run's budget of $0.0032 was reached"),
            "{why}"
        );
        assert_eq!(verdict.judge, "heuristic");
        assert!(verdict.answer_keys.is_empty());
    }
    let spent = kiln_lm::read_spent(run.path()).unwrap().unwrap();
    assert!(
        spent.cost_usd > 0.0 && spent.cost_usd <= 0.0032,
        "{spent:?}"
    );
    assert_eq!(asker.stats().over_budget, u64::try_from(4 - asked).unwrap());
    // A later asker of the same run starts from what was spent: nothing more fits.
    let later = crate::asker(&lm, run.path(), true);
    let request = kiln_lm::prompts::filter_request(
        &candidate("acme__calc-9", "another clear bug report, long enough"),
        "fake-judge-1",
        &lm,
        0,
    );
    let refused = later.ask("acme__calc-9", &request).await.unwrap();
    assert!(matches!(refused, Asked::OverBudget { .. }), "{refused:?}");
}

/// Answers that settle at once are all booked in the run's ledger (its file is written in the
/// order the totals grow).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_answers_are_all_counted_in_the_ledger() {
    let fake = FakeLm::scripted(vec![], answer("ok", "fine", &[])).unwrap();
    let mut lm = lm_settings(&fake.url());
    lm.max_in_flight = 8;
    let run = tempfile::tempdir().unwrap();
    let asker = std::sync::Arc::new(asker(&lm, run.path(), true));
    let asks: Vec<_> = (0..24)
        .map(|i| {
            let (asker, lm) = (std::sync::Arc::clone(&asker), lm.clone());
            tokio::spawn(async move {
                let subject = candidate(&format!("acme__calc-{i}"), &format!("{CLEAR_BUG} #{i}"));
                let request = kiln_lm::prompts::filter_request(&subject, "fake-judge-1", &lm, 0);
                asker
                    .ask(subject.instance_id.as_str(), &request)
                    .await
                    .unwrap()
            })
        })
        .collect();
    for ask in asks {
        ask.await.unwrap();
    }
    let spent = kiln_lm::read_spent(run.path()).unwrap().unwrap();
    assert_eq!(spent.requests, 24);
    assert_eq!(asker.stats().requests, 24);
    assert_eq!(spent.prompt_tokens, asker.stats().prompt_tokens);
}
