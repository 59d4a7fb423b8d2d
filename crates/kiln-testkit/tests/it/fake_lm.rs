//! The fake LM endpoint answers what the official `openai` Python client expects.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kiln_testkit::fake_lm::{FakeLm, FakeLmOptions, LmReply};
use serde_json::json;

const KEY: &str = "sk-kiln-fake-0123456789";

/// The openai client must be installed (scripts/test.sh installs it, as CI's machine has none):
/// this check is the proof that the fake speaks the real API, so it fails rather than skips.
#[test]
fn the_official_openai_client_accepts_the_fake() {
    let import = Command::new("python3")
        .args(["-c", "import openai"])
        .output()
        .unwrap();
    assert!(
        import.status.success(),
        "python3 cannot import openai; install it with `python3 -m pip install openai` \
         (scripts/test.sh does): {}",
        String::from_utf8_lossy(&import.stderr)
    );
    let rate_limited = Arc::new(Mutex::new(BTreeSet::new()));
    let options = FakeLmOptions {
        api_key: Some(KEY.into()),
        ..FakeLmOptions::default()
    };
    let fake = FakeLm::start(options, move |call| {
        let ok = LmReply::json(&json!({"label": "ok", "reason": "clear"}));
        match call.user_text() {
            "rate-limit-once" => {
                let mut seen = rate_limited.lock().unwrap();
                if seen.insert(call.user_text().to_string()) {
                    LmReply::rate_limited(1)
                } else {
                    ok
                }
            }
            "server-error" => LmReply::server_error(),
            "slow" => LmReply::Slow(Duration::from_secs(3), Box::new(ok)),
            "refuse" => LmReply::Refusal("I can't help with that.".into()),
            "call-run" if call.messages.len() == 1 => {
                LmReply::call("run", json!({"command": "ls"}))
            }
            _ => ok,
        }
    })
    .unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/openai_client_check.py");
    let output = Command::new("python3")
        .arg(&script)
        .env("FAKE_LM_URL", fake.url())
        .env("FAKE_LM_KEY", KEY)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the openai client check failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("checks passed"), "{stdout}");
    eprintln!("{}", stdout.trim());

    // What the client sent, as the fake recorded it.
    let chats = fake.chat_requests();
    let first = &chats[0];
    assert_eq!(
        first.headers.get("authorization").map(String::as_str),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert!(
        first
            .headers
            .get("user-agent")
            .is_some_and(|ua| ua.starts_with("OpenAI/Python")),
        "{:?}",
        first.headers
    );
    assert_eq!(first.body["response_format"]["type"], "json_schema");
    assert_eq!(first.body["max_tokens"], 64);
    let rate_limited: Vec<_> = chats
        .iter()
        .filter(|r| r.body["messages"][1]["content"] == "rate-limit-once")
        .collect();
    assert_eq!(rate_limited.len(), 2, "the 429 was retried once");
    assert!(rate_limited[1].at.duration_since(rate_limited[0].at) >= Duration::from_millis(900));
}

#[test]
fn scripted_replies_come_in_order_and_every_request_is_logged() {
    let fake = FakeLm::scripted(
        vec![LmReply::server_error(), LmReply::Content("first".into())],
        LmReply::Content("later".into()),
    )
    .unwrap();
    // A plain HTTP/1.1 exchange: the body, then a line with the status code.
    let post = |body: &serde_json::Value| {
        use std::io::{Read as _, Write as _};
        let authority = fake
            .url()
            .trim_start_matches("http://")
            .trim_end_matches("/v1")
            .to_string();
        let mut stream = std::net::TcpStream::connect(&authority).unwrap();
        let body = body.to_string();
        write!(
            stream,
            "POST /v1/chat/completions HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let status = response.split(' ').nth(1).unwrap_or_default().to_string();
        let payload = response
            .split("\r\n\r\n")
            .nth(1)
            .unwrap_or_default()
            .to_string();
        format!("{payload}\n{status}")
    };
    let body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    let first = post(&body);
    assert!(first.ends_with("\n500"), "{first}");
    assert!(first.contains("\"type\":\"server_error\""), "{first}");
    let second = post(&body);
    assert!(second.contains("\"content\":\"first\""), "{second}");
    assert!(second.contains("\"total_tokens\""), "{second}");
    assert!(post(&body).contains("\"content\":\"later\""));
    let missing_model = post(&json!({"messages": [{"role": "user", "content": "hi"}]}));
    assert!(missing_model.ends_with("\n400"), "{missing_model}");
    assert_eq!(fake.chat_requests().len(), 4);
    assert_eq!(fake.chat_requests()[3].body["messages"][0]["content"], "hi");
}
