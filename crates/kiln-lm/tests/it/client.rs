//! `OpenAiClient` against the fake endpoint and against the shapes of real servers' answers.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kiln_core::lm::{ChatMessage, ChatRequest, LanguageModel, LmError};
use kiln_lm::OpenAiClient;
use kiln_lm::prompts::filter_request;
use kiln_testkit::fake_lm::{FakeLm, FakeLmOptions, LmReply};
use kiln_testkit::http::{Reply, Server};
use serde_json::{Value, json};

use crate::{CLEAR_BUG, candidate, client, lm_settings};

fn request() -> ChatRequest {
    filter_request(
        &candidate("acme__calc-7", CLEAR_BUG),
        "fake-judge-1",
        &lm_settings("http://unused"),
        0,
    )
}

fn ok_reply() -> LmReply {
    LmReply::json(&json!({"label": "ok", "reason": "clear", "flags": []}))
}

#[tokio::test]
async fn an_answer_carries_content_usage_and_the_exact_request() {
    let fake = FakeLm::scripted(vec![], ok_reply()).unwrap();
    let answer = client(&lm_settings(&fake.url()))
        .chat(&request())
        .await
        .unwrap();
    assert_eq!(answer.attempts, 1);
    assert!(answer.structured);
    assert_eq!(answer.model.as_deref(), Some("fake-judge-1"));
    assert!(answer.content.unwrap_or_default().contains("\"ok\""));
    let usage = answer.usage.unwrap();
    assert!(
        usage.prompt_tokens > 100 && usage.completion_tokens > 0,
        "{usage:?}"
    );
    let sent = &fake.chat_requests()[0];
    assert_eq!(sent.body, answer.request_body);
    assert_eq!(sent.body["response_format"]["type"], "json_schema");
    assert_eq!(sent.body["response_format"]["json_schema"]["strict"], true);
    assert_eq!(sent.body["max_tokens"], 256);
    assert_eq!(sent.body["temperature"], 0.0);
    assert!(
        !sent.headers.contains_key("authorization"),
        "no key configured, none sent"
    );
}

#[tokio::test]
async fn a_429_is_retried_after_the_wait_it_names() {
    let fake = FakeLm::scripted(vec![LmReply::rate_limited(1)], ok_reply()).unwrap();
    let answer = client(&lm_settings(&fake.url()))
        .chat(&request())
        .await
        .unwrap();
    assert_eq!(answer.attempts, 2);
    let requests = fake.chat_requests();
    assert_eq!(requests.len(), 2);
    let waited = requests[1].at.duration_since(requests[0].at);
    assert!(
        waited >= Duration::from_millis(950),
        "retry-after: 1 was not honoured: {waited:?}"
    );
}

#[tokio::test]
async fn server_errors_are_retried_then_reported_with_the_body_message() {
    let fake = FakeLm::scripted(vec![LmReply::server_error()], ok_reply()).unwrap();
    let answer = client(&lm_settings(&fake.url()))
        .chat(&request())
        .await
        .unwrap();
    assert_eq!(answer.attempts, 2);

    let failing = FakeLm::scripted(vec![], LmReply::server_error()).unwrap();
    let error = client(&lm_settings(&failing.url()))
        .chat(&request())
        .await
        .unwrap_err();
    match &error {
        LmError::Status {
            status, attempts, ..
        } => assert_eq!((*status, *attempts), (500, 3)),
        other => panic!("{other:?}"),
    }
    assert!(
        error.to_string().contains("The server had an error"),
        "{error}"
    );
    assert_eq!(failing.chat_requests().len(), 3, "one try and two retries");
}

#[tokio::test]
async fn a_slow_server_times_out_on_every_attempt() {
    let fake = FakeLm::scripted(
        vec![],
        LmReply::Slow(Duration::from_secs(3), Box::new(ok_reply())),
    )
    .unwrap();
    let mut settings = lm_settings(&fake.url());
    settings.timeout = Duration::from_millis(300);
    settings.retries = 1;
    let error = client(&settings).chat(&request()).await.unwrap_err();
    assert!(
        matches!(error, LmError::Timeout { attempts: 2, .. }),
        "{error:?}"
    );
    assert_eq!(fake.chat_requests().len(), 2);
}

#[tokio::test]
async fn a_dripping_answer_times_out_on_every_attempt() {
    // Headers at once, then one byte per 100 ms: the timeout bounds the whole answer.
    let drip = Reply::Drip {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        body: vec![b' '; 1000].into(),
        every: Duration::from_millis(100),
    };
    let fake = FakeLm::scripted(vec![], LmReply::Raw(drip)).unwrap();
    let mut settings = lm_settings(&fake.url());
    settings.timeout = Duration::from_millis(500);
    settings.retries = 1;
    let started = std::time::Instant::now();
    let error = client(&settings).chat(&request()).await.unwrap_err();
    let took = started.elapsed();
    assert!(
        matches!(error, LmError::Timeout { attempts: 2, .. }),
        "{error:?}"
    );
    assert!(error.to_string().len() < 300, "{error}");
    // Two tries of 0.5 s and the backoff between them.
    assert!(took < Duration::from_secs(10), "{took:?}");
}

#[tokio::test]
async fn a_dropped_connection_is_retried() {
    let fake = FakeLm::scripted(vec![LmReply::Drop], ok_reply()).unwrap();
    let answer = client(&lm_settings(&fake.url()))
        .chat(&request())
        .await
        .unwrap();
    assert_eq!(answer.attempts, 2);
    let nobody = FakeLm::scripted(vec![], LmReply::Drop).unwrap();
    let error = client(&lm_settings(&nobody.url()))
        .chat(&request())
        .await
        .unwrap_err();
    assert!(
        matches!(error, LmError::Unreachable { attempts: 3, .. }),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_server_without_json_schema_gets_plain_requests_from_then_on() {
    let options = FakeLmOptions {
        json_schema: false,
        ..FakeLmOptions::default()
    };
    let fake = FakeLm::start(options, |_| ok_reply()).unwrap();
    let client = client(&lm_settings(&fake.url()));
    let first = client.chat(&request()).await.unwrap();
    assert_eq!(first.attempts, 2);
    assert!(!first.structured);
    let second = client.chat(&request()).await.unwrap();
    assert_eq!(second.attempts, 1, "the refusal is remembered");
    let requests = fake.chat_requests();
    assert!(requests[0].body.get("response_format").is_some());
    assert!(requests[1].body.get("response_format").is_none());
    assert!(requests[2].body.get("response_format").is_none());
}

#[tokio::test]
async fn a_model_that_refuses_max_tokens_gets_max_completion_tokens() {
    let fake = FakeLm::start(FakeLmOptions::default(), |call| {
        if call.body.get("max_tokens").is_some() {
            LmReply::Raw(Reply::json(
                400,
                &json!({"error": {"message": "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.", "type": "invalid_request_error", "param": "max_tokens", "code": "unsupported_parameter"}}),
            ))
        } else {
            ok_reply()
        }
    })
    .unwrap();
    let answer = client(&lm_settings(&fake.url()))
        .chat(&request())
        .await
        .unwrap();
    assert_eq!(answer.attempts, 2);
    assert_eq!(answer.request_body["max_completion_tokens"], 256);
}

#[tokio::test]
async fn a_body_that_is_no_completion_is_malformed_with_its_usage_kept() {
    let fake = FakeLm::scripted(
        vec![
            LmReply::Raw(Reply::bytes(200, "<html>gateway says hi</html>")),
            LmReply::Raw(Reply::json(
                200,
                &json!({"id": "x", "object": "chat.completion", "choices": [], "usage": {"prompt_tokens": 40, "completion_tokens": 2, "total_tokens": 42}}),
            )),
        ],
        ok_reply(),
    )
    .unwrap();
    let client = client(&lm_settings(&fake.url()));
    let html = client.chat(&request()).await.unwrap_err();
    assert!(html.to_string().contains("not JSON"), "{html}");
    let empty = client.chat(&request()).await.unwrap_err();
    assert!(empty.to_string().contains("no choices"), "{empty}");
    assert_eq!(empty.usage().map(|u| u.prompt_tokens), Some(40));
}

#[tokio::test]
async fn the_key_is_sent_as_bearer_and_never_shown() {
    const RIGHT: &str = "sk-right-0123456789";
    const WRONG: &str = "sk-wrong-secret-9876543210";
    let options = FakeLmOptions {
        api_key: Some(RIGHT.into()),
        ..FakeLmOptions::default()
    };
    let fake = FakeLm::start(options, |_| ok_reply()).unwrap();
    let settings = lm_settings(&fake.url());
    let good = OpenAiClient::with_api_key(&settings, Some(RIGHT.into())).unwrap();
    good.chat(&request()).await.unwrap();
    assert_eq!(
        fake.chat_requests()[0]
            .headers
            .get("authorization")
            .map(String::as_str),
        Some(format!("Bearer {RIGHT}").as_str())
    );
    let bad = OpenAiClient::with_api_key(&settings, Some(WRONG.into())).unwrap();
    let error = bad.chat(&request()).await.unwrap_err();
    let shown = format!("{error} {error:?} {bad:?}");
    assert!(!shown.contains(WRONG), "{shown}");
    assert!(shown.contains("<redacted>"), "{shown}");
    assert!(matches!(error, LmError::Status { status: 401, .. }));
}

#[tokio::test]
async fn no_more_requests_are_in_flight_than_the_cap() {
    let in_flight = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let (now, peak) = (Arc::clone(&in_flight), Arc::clone(&most));
    // The script runs while the request is open, so counting there counts open requests.
    let fake = FakeLm::start(FakeLmOptions::default(), move |_| {
        let current = now.fetch_add(1, Ordering::SeqCst) + 1;
        peak.fetch_max(current, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(150));
        now.fetch_sub(1, Ordering::SeqCst);
        ok_reply()
    })
    .unwrap();
    let mut settings = lm_settings(&fake.url());
    settings.max_in_flight = 2;
    let client = client(&settings);
    let asks: Vec<_> = (0..6)
        .map(|_| {
            let client = Arc::clone(&client);
            tokio::spawn(async move { client.chat(&request()).await })
        })
        .collect();
    for ask in asks {
        ask.await.unwrap().unwrap();
    }
    assert_eq!(most.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn models_are_listed() {
    let fake = FakeLm::scripted(vec![], ok_reply()).unwrap();
    let models = client(&lm_settings(&fake.url())).models().await.unwrap();
    assert_eq!(models, ["fake-judge-1"]);
}

/// Serves each recorded answer of a real server and checks what the client reads from it.
#[tokio::test]
async fn the_answers_of_real_servers_are_read() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/answers");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(files.len() >= 9, "{files:?}");
    for file in files {
        let case: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        let status = u16::try_from(case["status"].as_u64().unwrap()).unwrap();
        let mut reply = Reply::json(status, &case["body"]);
        for (name, value) in case["headers"].as_object().into_iter().flatten() {
            reply = reply.with_header(name, value.as_str().unwrap_or_default());
        }
        let server = Server::start(move |_request, _base: &str| reply.clone()).unwrap();
        let mut settings = lm_settings(&format!("{}/v1", server.url()));
        settings.retries = 0;
        let result = client(&settings).chat(&request()).await;
        let expect = &case["expect"];
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        if status == 200 {
            let answer = result.unwrap_or_else(|e| panic!("{name}: {e}"));
            let usage = answer.usage.unwrap();
            assert_eq!(
                usage.prompt_tokens,
                expect["prompt_tokens"].as_u64().unwrap(),
                "{name}"
            );
            assert_eq!(
                usage.completion_tokens,
                expect["completion_tokens"].as_u64().unwrap(),
                "{name}"
            );
            if let Some(label) = expect["content_label"].as_str() {
                let read = kiln_lm::prompts::parse_filter_answer(
                    answer.content.as_deref().unwrap_or_default(),
                );
                assert_eq!(read.map(|a| a.label), Ok(label.to_string()), "{name}");
            }
            if let Some(refusal) = expect["refusal"].as_str() {
                assert_eq!(answer.refusal.as_deref(), Some(refusal), "{name}");
                assert_eq!(answer.content, None, "{name}");
            }
            if let Some(model) = expect["model"].as_str() {
                assert_eq!(answer.model.as_deref(), Some(model), "{name}");
            }
        } else {
            let error = result.unwrap_err();
            let fragment = expect["message_contains"].as_str().unwrap();
            assert!(
                matches!(error, LmError::Status { status: s, .. } if s == status),
                "{name}: {error:?}"
            );
            assert!(error.to_string().contains(fragment), "{name}: {error}");
        }
    }
}

#[test]
fn a_request_message_serialises_as_the_api_wants() {
    let message = serde_json::to_value(ChatMessage::user("hi")).unwrap();
    assert_eq!(message, json!({"role": "user", "content": "hi"}));
}

fn tool_request() -> ChatRequest {
    ChatRequest {
        model: "fake-judge-1".into(),
        messages: vec![
            ChatMessage::system("You build repositories."),
            ChatMessage::user("list the files"),
        ],
        temperature: 0.0,
        max_tokens: 256,
        schema: None,
        sample: 0,
        tools: vec![kiln_core::lm::ToolSpec {
            name: "run".into(),
            description: "runs a shell command".into(),
            parameters: json!({"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}),
        }],
        tool_choice: Some("required".into()),
        replay_key: None,
    }
}

#[tokio::test]
async fn tool_calls_go_out_and_come_back_and_the_conversation_goes_on() {
    let fake = FakeLm::start(FakeLmOptions::default(), |call| {
        if call.messages.iter().any(|(role, _)| role == "tool") {
            LmReply::Content("done".into())
        } else {
            LmReply::call("run", json!({"command": "ls"}))
        }
    })
    .unwrap();
    let client = client(&lm_settings(&fake.url()));
    let mut request = tool_request();
    let first = client.chat(&request).await.unwrap();
    assert_eq!(first.tool_calls.len(), 1, "{first:?}");
    let call = first.tool_calls[0].clone();
    assert_eq!(call.function.name, "run");
    assert_eq!(
        serde_json::from_str::<Value>(&call.function.arguments).unwrap(),
        json!({"command": "ls"})
    );
    let sent = &fake.chat_requests()[0].body;
    assert_eq!(sent["tools"][0]["type"], "function");
    assert_eq!(sent["tools"][0]["function"]["name"], "run");
    assert_eq!(sent["tool_choice"], "required");
    request
        .messages
        .push(ChatMessage::assistant("", vec![call.clone()]));
    request.messages.push(ChatMessage::tool(&call.id, "a.txt"));
    let second = client.chat(&request).await.unwrap();
    assert_eq!(second.content.as_deref(), Some("done"));
    let sent = &fake.chat_requests()[1].body;
    assert_eq!(sent["messages"][2]["tool_calls"][0]["id"], call.id.as_str());
    assert_eq!(sent["messages"][3]["role"], "tool");
    assert_eq!(sent["messages"][3]["tool_call_id"], call.id.as_str());
}

#[tokio::test]
async fn a_server_without_tools_is_asked_for_a_json_action_and_it_becomes_the_call() {
    let options = FakeLmOptions {
        tools: false,
        ..FakeLmOptions::default()
    };
    let fake = FakeLm::start(options, |call| {
        if call.messages[0].1.contains("\"tool\"") {
            LmReply::Content(
                "```json\n{\"tool\": \"run\", \"arguments\": {\"command\": \"ls\"}}\n```".into(),
            )
        } else {
            LmReply::Content("no instructions to act on".into())
        }
    })
    .unwrap();
    let client = client(&lm_settings(&fake.url()));
    let answer = client.chat(&tool_request()).await.unwrap();
    assert_eq!(
        answer.attempts, 2,
        "the 400 about tools, then the plain request"
    );
    assert_eq!(answer.tool_calls.len(), 1, "{answer:?}");
    assert_eq!(answer.tool_calls[0].function.name, "run");
    let again = client.chat(&tool_request()).await.unwrap();
    assert_eq!(again.attempts, 1, "the refusal is remembered");
    let requests = fake.chat_requests();
    assert!(requests[0].body.get("tools").is_some());
    assert!(requests[1].body.get("tools").is_none());
    assert!(requests[2].body.get("tools").is_none());
}

/// An endpoint that answers with more than any chat completion holds (50 MB) is refused after
/// 8 MiB, not asked again, and the error quotes none of it.
#[tokio::test]
async fn an_answer_past_the_size_cap_is_refused_unread() {
    let huge = format!(
        "{{\"id\": \"x\", \"object\": \"chat.completion\", \"choices\": [{{\"index\": 0, \"message\": {{\"role\": \"assistant\", \"content\": \"{}\"}}, \"finish_reason\": \"stop\"}}]}}",
        "y".repeat(50 << 20)
    );
    let fake = FakeLm::scripted(vec![], LmReply::Raw(Reply::bytes(200, huge))).unwrap();
    let error = client(&lm_settings(&fake.url()))
        .chat(&request())
        .await
        .unwrap_err();
    assert!(
        matches!(&error, LmError::Malformed { attempts: 1, .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(message.contains("larger than 8 MiB"), "{message}");
    assert!(message.len() < 300, "{} bytes", message.len());
    assert_eq!(fake.chat_requests().len(), 1);
}
