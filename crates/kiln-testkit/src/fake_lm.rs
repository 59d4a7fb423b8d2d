//! A fake OpenAI-compatible LM endpoint on the loopback server ([`crate::http`]).
//!
//! It speaks the chat-completions API as OpenAI documents it: `POST /v1/chat/completions` (and
//! `/chat/completions`, as proxies mounted without `/v1` do), `GET /v1/models`, completions with
//! `id`, `object`, `created`, `model`, `choices` and `usage`, and errors as
//! `{"error": {"message", "type", "param", "code"}}` with 401, 404, 429 (`retry-after`) and 500.
//! Each test scripts the answers ([`FakeLm::start`] with a closure over the [`ChatCall`], or
//! [`FakeLm::scripted`] with a list), and every request is recorded ([`FakeLm::requests`]), so a
//! test can assert how many requests kiln made and what they said.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};

use crate::TestkitError;
use crate::http::{Reply, Request, Server};

/// What the fake answers to one chat request.
#[derive(Debug, Clone)]
pub enum LmReply {
    /// A completion with this content; `usage` is counted from the request and the content.
    Content(String),
    /// A completion with this content and these token counts.
    ContentWithUsage {
        /// The answer text.
        content: String,
        /// Reported prompt tokens.
        prompt_tokens: u64,
        /// Reported completion tokens.
        completion_tokens: u64,
    },
    /// A completion cut off at `max_tokens` (`finish_reason: "length"`).
    Truncated(String),
    /// A refusal: `content` null, `refusal` set, as structured outputs report it.
    Refusal(String),
    /// Tool calls: `content` null, `tool_calls` with each `(name, arguments)`, numbered
    /// `call_<request>_<n>`, and `finish_reason: "tool_calls"`, as OpenAI answers.
    ToolCalls(Vec<(String, Value)>),
    /// An error in OpenAI's shape.
    Error {
        /// HTTP status.
        status: u16,
        /// `error.type` (`rate_limit_exceeded`'s type is `requests`, a 500's `server_error`).
        kind: String,
        /// `error.code`.
        code: Option<String>,
        /// `error.message`.
        message: String,
        /// A `retry-after` header, if any.
        retry_after: Option<String>,
    },
    /// The reply, after a delay (a slow server; a client's timeout may fire first).
    Slow(Duration, Box<LmReply>),
    /// The connection is closed without an answer.
    Drop,
    /// Any HTTP reply (a body that is not a completion, a proxy's HTML error page).
    Raw(Reply),
}

impl LmReply {
    /// One tool call.
    #[must_use]
    pub fn call(name: &str, arguments: Value) -> Self {
        Self::ToolCalls(vec![(name.to_string(), arguments)])
    }

    /// A completion whose content is `value` as compact JSON.
    #[must_use]
    pub fn json(value: &Value) -> Self {
        Self::Content(value.to_string())
    }

    /// A 429 with `retry-after: <seconds>`, worded as OpenAI words its rate limits.
    #[must_use]
    pub fn rate_limited(seconds: u64) -> Self {
        Self::Error {
            status: 429,
            kind: "requests".into(),
            code: Some("rate_limit_exceeded".into()),
            message: format!(
                "Rate limit reached for requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in {seconds}s."
            ),
            retry_after: Some(seconds.to_string()),
        }
    }

    /// A 500 as OpenAI words it.
    #[must_use]
    pub fn server_error() -> Self {
        Self::Error {
            status: 500,
            kind: "server_error".into(),
            code: None,
            message: "The server had an error while processing your request. Sorry about that!"
                .into(),
            retry_after: None,
        }
    }
}

/// One chat request, as the script sees it.
#[derive(Debug, Clone)]
pub struct ChatCall {
    /// 0 for the first chat request the fake received, 1 for the next, ...
    pub index: usize,
    /// `model`.
    pub model: String,
    /// `(role, content)` of each message.
    pub messages: Vec<(String, String)>,
    /// `response_format`, if sent.
    pub response_format: Option<Value>,
    /// Names of the tools offered (`tools[].function.name`).
    pub tools: Vec<String>,
    /// The whole body.
    pub body: Value,
}

impl ChatCall {
    /// The content of the last user message.
    #[must_use]
    pub fn user_text(&self) -> &str {
        self.messages
            .iter()
            .rev()
            .find(|(role, _)| role == "user")
            .map_or("", |(_, content)| content.as_str())
    }
}

/// One request as the fake received it.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    /// `GET`, `POST`.
    pub method: String,
    /// The path.
    pub path: String,
    /// Headers, names lowercased.
    pub headers: BTreeMap<String, String>,
    /// The body as JSON (null when it is not JSON).
    pub body: Value,
    /// When it arrived.
    pub at: Instant,
}

impl RecordedRequest {
    /// Whether it asked for a chat completion.
    #[must_use]
    pub fn is_chat(&self) -> bool {
        self.method == "POST" && self.path.ends_with("/chat/completions")
    }
}

/// A script runs while its request is open and may run for several requests at once, so a
/// script that keeps state keeps it behind its own lock.
type Script = Box<dyn Fn(&ChatCall) -> LmReply + Send + Sync>;

struct State {
    script: Script,
    log: Mutex<Vec<RecordedRequest>>,
    models: Vec<String>,
    api_key: Option<String>,
    json_schema: bool,
    tools: bool,
}

/// Options of a fake endpoint.
#[derive(Debug, Clone)]
pub struct FakeLmOptions {
    /// Models `GET /v1/models` lists.
    pub models: Vec<String>,
    /// The key requests must carry as `Authorization: Bearer <key>` (`None`: no key needed).
    pub api_key: Option<String>,
    /// Whether `response_format` `json_schema` is accepted; `false` answers it with a 400 as
    /// servers without structured output do.
    pub json_schema: bool,
    /// Whether `tools` are accepted; `false` answers them with the 400 vLLM gives when started
    /// without `--enable-auto-tool-choice`.
    pub tools: bool,
}

impl Default for FakeLmOptions {
    fn default() -> Self {
        Self {
            models: vec!["fake-judge-1".into()],
            api_key: None,
            json_schema: true,
            tools: true,
        }
    }
}

/// A running fake endpoint; dropping it stops it.
pub struct FakeLm {
    server: Server,
    state: Arc<State>,
}

impl FakeLm {
    /// Starts a fake that answers every chat request with `script`.
    ///
    /// # Errors
    /// When the server cannot start.
    pub fn start(
        options: FakeLmOptions,
        script: impl Fn(&ChatCall) -> LmReply + Send + Sync + 'static,
    ) -> Result<Self, TestkitError> {
        let state = Arc::new(State {
            script: Box::new(script),
            log: Mutex::new(Vec::new()),
            models: options.models,
            api_key: options.api_key,
            json_schema: options.json_schema,
            tools: options.tools,
        });
        let shared = Arc::clone(&state);
        let server = Server::start(move |request: Request, _base: &str| handle(&shared, request))?;
        Ok(Self { server, state })
    }

    /// Starts a fake that gives `replies` in order, then `then` to every later request.
    ///
    /// # Errors
    /// When the server cannot start.
    pub fn scripted(replies: Vec<LmReply>, then: LmReply) -> Result<Self, TestkitError> {
        let queue: Mutex<VecDeque<LmReply>> = Mutex::new(replies.into());
        Self::start(FakeLmOptions::default(), move |_| {
            queue
                .lock()
                .ok()
                .and_then(|mut q| q.pop_front())
                .unwrap_or_else(|| then.clone())
        })
    }

    /// The base URL clients are given: `http://127.0.0.1:PORT/v1`.
    #[must_use]
    pub fn url(&self) -> String {
        format!("{}/v1", self.server.url())
    }

    /// Every request received, in order.
    #[must_use]
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.state.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// The chat-completion requests received, in order.
    #[must_use]
    pub fn chat_requests(&self) -> Vec<RecordedRequest> {
        self.requests()
            .into_iter()
            .filter(RecordedRequest::is_chat)
            .collect()
    }
}

fn error(status: u16, kind: &str, param: Option<&str>, code: Option<&str>, message: &str) -> Reply {
    Reply::json(
        status,
        &json!({"error": {"message": message, "type": kind, "param": param, "code": code}}),
    )
}

fn handle(state: &State, request: Request) -> Reply {
    let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
    if let Ok(mut log) = state.log.lock() {
        log.push(RecordedRequest {
            method: request.method.clone(),
            path: request.path.clone(),
            headers: request.headers.clone(),
            body: body.clone(),
            at: Instant::now(),
        });
    }
    if let Some(expected) = &state.api_key {
        let given = request
            .header("authorization")
            .and_then(|h| h.strip_prefix("Bearer "))
            .unwrap_or_default();
        if given != expected {
            // The key given is echoed whole, as some proxies do (OpenAI masks most of it), so
            // that a client's redaction is put to the test.
            let message = if given.is_empty() {
                "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).".to_string()
            } else {
                format!(
                    "Incorrect API key provided: {given}. You can find your API key at https://platform.openai.com/account/api-keys."
                )
            };
            return error(
                401,
                "invalid_request_error",
                None,
                Some("invalid_api_key"),
                &message,
            );
        }
    }
    let path = request.path.as_str();
    match (request.method.as_str(), path) {
        ("GET", "/v1/models" | "/models") => {
            let data: Vec<Value> = state
                .models
                .iter()
                .map(|id| json!({"id": id, "object": "model", "created": 1_700_000_000, "owned_by": "kiln-testkit"}))
                .collect();
            Reply::json(200, &json!({"object": "list", "data": data}))
        }
        ("POST", "/v1/chat/completions" | "/chat/completions") => chat(state, &body),
        _ => error(
            404,
            "invalid_request_error",
            None,
            Some("unknown_url"),
            &format!(
                "Unknown request URL: {} {path}. Please check the URL for typos.",
                request.method
            ),
        ),
    }
}

fn chat(state: &State, body: &Value) -> Reply {
    let Some(model) = body.get("model").and_then(Value::as_str) else {
        return error(
            400,
            "invalid_request_error",
            Some("model"),
            None,
            "you must provide a model parameter",
        );
    };
    let messages: Vec<(String, String)> = body
        .get("messages")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .map(|m| {
                    let text = |k: &str| {
                        m.get(k)
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string()
                    };
                    (text("role"), text("content"))
                })
                .collect()
        })
        .unwrap_or_default();
    if messages.is_empty() {
        return error(
            400,
            "invalid_request_error",
            Some("messages"),
            Some("empty_array"),
            "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.",
        );
    }
    let response_format = body.get("response_format").cloned();
    let wants_schema = response_format
        .as_ref()
        .and_then(|f| f.get("type"))
        .and_then(Value::as_str)
        == Some("json_schema");
    if wants_schema && !state.json_schema {
        return error(
            400,
            "invalid_request_error",
            Some("response_format"),
            None,
            "response_format of type 'json_schema' is not supported by this server",
        );
    }
    let tools: Vec<String> = body
        .get("tools")
        .and_then(Value::as_array)
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t.pointer("/function/name").and_then(Value::as_str))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    if !tools.is_empty() && !state.tools {
        return error(
            400,
            "BadRequestError",
            None,
            None,
            "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set",
        );
    }
    // This request is already in the log, so the ones before it are one fewer.
    let index = state
        .log
        .lock()
        .map(|l| l.iter().filter(|r| r.is_chat()).count().saturating_sub(1))
        .unwrap_or(0);
    let call = ChatCall {
        index,
        model: model.to_string(),
        messages,
        response_format,
        tools,
        body: body.clone(),
    };
    let reply = (state.script)(&call);
    render(&call, reply)
}

/// Tokens as a rough count (four characters a token), so that usage grows with the text.
fn tokens(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(4)
}

fn completion(call: &ChatCall, message: Value, finish_reason: &str, usage: (u64, u64)) -> Reply {
    let created = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    Reply::json(
        200,
        &json!({
            "id": format!("chatcmpl-kiln{:06}", call.index),
            "object": "chat.completion",
            "created": created,
            "model": call.model,
            "system_fingerprint": "fp_kiln_fake",
            "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish_reason}],
            "usage": {"prompt_tokens": usage.0, "completion_tokens": usage.1, "total_tokens": usage.0 + usage.1},
        }),
    )
}

fn render(call: &ChatCall, reply: LmReply) -> Reply {
    let prompt_tokens: u64 = call.messages.iter().map(|(_, c)| tokens(c) + 4).sum();
    let assistant =
        |content: &str| json!({"role": "assistant", "content": content, "refusal": null});
    match reply {
        LmReply::Content(content) => {
            let usage = (prompt_tokens, tokens(&content));
            completion(call, assistant(&content), "stop", usage)
        }
        LmReply::ContentWithUsage {
            content,
            prompt_tokens,
            completion_tokens,
        } => completion(
            call,
            assistant(&content),
            "stop",
            (prompt_tokens, completion_tokens),
        ),
        LmReply::Truncated(content) => {
            let usage = (prompt_tokens, tokens(&content));
            completion(call, assistant(&content), "length", usage)
        }
        LmReply::Refusal(refusal) => {
            let usage = (prompt_tokens, tokens(&refusal));
            let message = json!({"role": "assistant", "content": null, "refusal": refusal});
            completion(call, message, "stop", usage)
        }
        LmReply::ToolCalls(calls) => {
            let calls: Vec<Value> = calls
                .iter()
                .enumerate()
                .map(|(n, (name, arguments))| {
                    json!({"id": format!("call_{}_{n}", call.index), "type": "function",
                        "function": {"name": name, "arguments": arguments.to_string()}})
                })
                .collect();
            let usage = (prompt_tokens, tokens(&json!(calls).to_string()));
            let message =
                json!({"role": "assistant", "content": null, "refusal": null, "tool_calls": calls});
            completion(call, message, "tool_calls", usage)
        }
        LmReply::Error {
            status,
            kind,
            code,
            message,
            retry_after,
        } => {
            let reply = error(status, &kind, None, code.as_deref(), &message);
            match retry_after {
                Some(seconds) => reply.with_header("retry-after", seconds),
                None => reply,
            }
        }
        LmReply::Slow(delay, inner) => render(call, *inner).delayed(delay),
        LmReply::Drop => Reply::Drop,
        LmReply::Raw(reply) => reply,
    }
}
