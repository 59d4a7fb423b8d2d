//! [`OpenAiClient`]: the [`LanguageModel`] on the OpenAI-compatible chat-completions API.
//!
//! One client serves every stage of a process, so its cap on requests in flight holds across
//! them. What real servers do that the client has to live with:
//! - 429 and 5xx answers, often with `retry-after` (seconds or an HTTP date) or OpenAI's
//!   `retry-after-ms`: retried with backoff, honouring the header;
//! - servers without `response_format` `json_schema` (older llama.cpp, some proxies) answer 400:
//!   the request is sent again without it, and the prompt's own JSON instructions carry on;
//! - newer OpenAI models refuse `max_tokens` (they want `max_completion_tokens`) and any
//!   `temperature` but the default: the request is adapted once, after the 400 says so;
//! - extra fields everywhere (vLLM's `stop_reason`, llama.cpp's `timings`, OpenAI's
//!   `refusal`), `content` as a list of parts, error bodies as `{"error": {...}}`, as vLLM's
//!   top-level `{"object": "error", ...}`, or as plain text.
//!
//! The adaptations are remembered per model, so the next request goes out right the first time.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use kiln_core::config::LmSettings;
use kiln_core::lm::{
    ChatAnswer, ChatMessage, ChatRequest, LanguageModel, LmError, Role, ToolCall, Usage,
};
use reqwest::header::{HeaderMap, RETRY_AFTER};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

/// Longest wait between two attempts, whatever `retry-after` says: a server asking for an hour
/// is better answered with a failure the user sees than with a stage that hangs.
const MAX_WAIT: Duration = Duration::from_secs(60);

/// How a model's requests are shaped, learnt from the endpoint's 400 answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Shape {
    /// `response_format` was refused: send none.
    no_schema: bool,
    /// `max_tokens` was refused: send `max_completion_tokens`.
    completion_tokens_param: bool,
    /// `temperature` was refused: send none (the model's default).
    no_temperature: bool,
    /// `tools` were refused: describe them in the prompt and read a JSON action from the answer.
    no_tools: bool,
}

impl Shape {
    /// The shape after a 400 that names what the endpoint refused, or `None` when the error
    /// names nothing this client can change (or the change was made already).
    fn adapted(self, error: &ErrorBody, sent_schema: bool, sent_tools: bool) -> Option<Self> {
        let message = error.message.to_ascii_lowercase();
        let param = error.param.as_deref().unwrap_or_default();
        let mut next = self;
        if sent_tools
            && !self.no_tools
            && (param.starts_with("tool")
                || message.contains("tool")
                || message.contains("function"))
        {
            next.no_tools = true;
        } else if sent_schema
            && !self.no_schema
            && (param.starts_with("response_format")
                || message.contains("response_format")
                || message.contains("json_schema"))
        {
            next.no_schema = true;
        } else if !self.completion_tokens_param
            && (param == "max_tokens" || message.contains("max_completion_tokens"))
        {
            next.completion_tokens_param = true;
        } else if !self.no_temperature
            && (param == "temperature" || message.contains("temperature"))
        {
            next.no_temperature = true;
        }
        (next != self).then_some(next)
    }
}

/// The API key, kept out of `Debug` output.
struct ApiKey(String);

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// A chat-completions client for one endpoint.
#[derive(Debug)]
pub struct OpenAiClient {
    http: reqwest::Client,
    url: String,
    endpoint: String,
    api_key: Option<ApiKey>,
    retries: u32,
    timeout: Duration,
    backoff: Duration,
    in_flight: Arc<Semaphore>,
    send_schema: bool,
    shapes: Mutex<BTreeMap<String, Shape>>,
}

impl OpenAiClient {
    /// A client for the `[lm]` settings, with the key read from the environment variable they
    /// name (unset or empty: no key is sent).
    ///
    /// # Errors
    /// When the HTTP client or the TLS roots cannot be set up.
    pub fn new(settings: &LmSettings) -> Result<Self, LmError> {
        let key = std::env::var(&settings.api_key_env)
            .ok()
            .filter(|k| !k.trim().is_empty());
        Self::with_api_key(settings, key)
    }

    /// A client with the key given (tests, or keys from elsewhere than the environment).
    ///
    /// # Errors
    /// When the HTTP client or the TLS roots cannot be set up.
    pub fn with_api_key(settings: &LmSettings, api_key: Option<String>) -> Result<Self, LmError> {
        let endpoint = settings.base_url.trim_end_matches('/').to_string();
        // reqwest builds a TLS setup even for plain-HTTP endpoints, and without a crypto
        // provider of its own it would panic: it always gets this one.
        let http = reqwest::Client::builder()
            .timeout(settings.timeout)
            .connect_timeout(settings.timeout.min(Duration::from_secs(30)))
            .user_agent(concat!("kiln/", env!("CARGO_PKG_VERSION")))
            .tls_backend_preconfigured(
                kiln_core::net::client_tls_config(endpoint.starts_with("https://"))
                    .map_err(LmError::Setup)?,
            )
            .build()
            .map_err(|e| LmError::Setup(format!("build the HTTP client: {e}")))?;
        Ok(Self {
            http,
            url: format!("{endpoint}/chat/completions"),
            endpoint,
            api_key: api_key.map(|k| ApiKey(k.trim().to_string())),
            retries: u32::try_from(settings.retries).unwrap_or(0),
            timeout: settings.timeout,
            backoff: Duration::from_secs(1),
            in_flight: Arc::new(Semaphore::new(
                usize::try_from(settings.max_in_flight).unwrap_or(1).max(1),
            )),
            send_schema: settings.json_schema,
            shapes: Mutex::new(BTreeMap::new()),
        })
    }

    /// Sets the first wait between retries when the server names none (doubling after each
    /// retry, up to 30 s); tests shorten it.
    #[must_use]
    pub fn with_backoff(mut self, first: Duration) -> Self {
        self.backoff = first;
        self
    }

    /// The model ids the endpoint lists (`GET <base_url>/models`), for picking a model when the
    /// user names none.
    ///
    /// # Errors
    /// When the endpoint cannot be reached or answers with an error or no list.
    pub async fn models(&self) -> Result<Vec<String>, LmError> {
        let mut request = self.http.get(format!("{}/models", self.endpoint));
        if let Some(ApiKey(key)) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let unreachable = |e: reqwest::Error| LmError::Unreachable {
            endpoint: self.endpoint.clone(),
            message: self.redact(&kiln_core::net::error_chain(&e)),
            attempts: 1,
        };
        let response = request.send().await.map_err(unreachable)?;
        let status = response.status().as_u16();
        let bytes = match read_capped(response).await {
            Ok(bytes) => bytes,
            Err(SendError::Transport(e)) => return Err(unreachable(e)),
            Err(SendError::TooLarge) => {
                return Err(LmError::Malformed {
                    endpoint: self.endpoint.clone(),
                    message: format!(
                        "the model list is larger than {} MiB",
                        MAX_ANSWER_BYTES >> 20
                    ),
                    usage: None,
                    attempts: 1,
                });
            }
        };
        if status != 200 {
            return Err(LmError::Status {
                endpoint: self.endpoint.clone(),
                status,
                message: self.redact(&ErrorBody::parse(&bytes).message),
                attempts: 1,
            });
        }
        let body: Value = serde_json::from_slice(&bytes).unwrap_or_default();
        let ids: Vec<String> = body
            .get("data")
            .and_then(Value::as_array)
            .map(|models| {
                models
                    .iter()
                    .filter_map(|m| m.get("id").and_then(Value::as_str))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        if ids.is_empty() {
            return Err(LmError::Malformed {
                endpoint: self.endpoint.clone(),
                message: "the model list is empty or not a list".into(),
                usage: None,
                attempts: 1,
            });
        }
        Ok(ids)
    }

    fn shape(&self, model: &str) -> Shape {
        let shape = self
            .shapes
            .lock()
            .map(|s| s.get(model).copied().unwrap_or_default())
            .unwrap_or_default();
        Shape {
            no_schema: shape.no_schema || !self.send_schema,
            ..shape
        }
    }

    fn remember(&self, model: &str, shape: Shape) {
        if let Ok(mut shapes) = self.shapes.lock() {
            shapes.insert(model.to_string(), shape);
        }
    }

    /// Replaces the key wherever a server echoed it, so that no message kiln keeps holds it.
    fn redact(&self, text: &str) -> String {
        match &self.api_key {
            Some(ApiKey(key)) if key.len() >= 4 => text.replace(key.as_str(), "<redacted>"),
            _ => text.to_string(),
        }
    }

    async fn send(&self, body: &Value) -> Result<(u16, HeaderMap, Vec<u8>), SendError> {
        // The permit is held for the HTTP exchange only, not for the waits between retries.
        let _permit = self.in_flight.acquire().await.ok();
        let mut request = self.http.post(&self.url).json(body);
        if let Some(ApiKey(key)) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.map_err(SendError::Transport)?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let bytes = read_capped(response).await?;
        Ok((status, headers, bytes))
    }

    fn wait_before(&self, retry: u32, headers: Option<&HeaderMap>) -> Duration {
        let told = headers.and_then(retry_after);
        let doubling = self
            .backoff
            .saturating_mul(2u32.saturating_pow(retry))
            .min(Duration::from_secs(30));
        told.unwrap_or(doubling).min(MAX_WAIT)
    }
}

/// The largest answer kiln reads from an endpoint: a chat completion of the longest context
/// any model has is a few megabytes.
pub const MAX_ANSWER_BYTES: usize = 8 << 20;

/// How one exchange failed.
enum SendError {
    /// The transport (retried).
    Transport(reqwest::Error),
    /// The answer passed [`MAX_ANSWER_BYTES`] (not retried).
    TooLarge,
}

/// An answer's body, read chunk by chunk up to [`MAX_ANSWER_BYTES`].
async fn read_capped(mut response: reqwest::Response) -> Result<Vec<u8>, SendError> {
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(SendError::Transport)? {
        if bytes.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(SendError::TooLarge);
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

#[async_trait]
impl LanguageModel for OpenAiClient {
    fn endpoint(&self) -> String {
        self.endpoint.clone()
    }

    async fn chat(&self, request: &ChatRequest) -> Result<ChatAnswer, LmError> {
        let mut shape = self.shape(&request.model);
        let mut attempts = 0u32;
        let mut retries = 0u32;
        loop {
            let sent_schema = request.schema.is_some() && !shape.no_schema;
            let sent_tools = !request.tools.is_empty() && !shape.no_tools;
            let body = wire_body(request, shape);
            attempts += 1;
            let (status, headers, bytes) = match self.send(&body).await {
                Ok(answer) => answer,
                // A server that sends more than any chat completion holds is not asked again.
                Err(SendError::TooLarge) => {
                    return Err(LmError::Malformed {
                        endpoint: self.endpoint.clone(),
                        message: format!(
                            "the answer is larger than {} MiB",
                            MAX_ANSWER_BYTES >> 20
                        ),
                        usage: None,
                        attempts,
                    });
                }
                Err(SendError::Transport(e)) => {
                    if retries < self.retries {
                        tokio::time::sleep(self.wait_before(retries, None)).await;
                        retries += 1;
                        continue;
                    }
                    return Err(if e.is_timeout() {
                        LmError::Timeout {
                            endpoint: self.endpoint.clone(),
                            timeout: self.timeout,
                            attempts,
                        }
                    } else {
                        LmError::Unreachable {
                            endpoint: self.endpoint.clone(),
                            message: self.redact(&kiln_core::net::error_chain(&e)),
                            attempts,
                        }
                    });
                }
            };
            if status == 200 {
                let json_actions = !request.tools.is_empty() && shape.no_tools;
                return parse_answer(&bytes, body, sent_schema, json_actions, attempts).map_err(
                    |(message, usage)| LmError::Malformed {
                        endpoint: self.endpoint.clone(),
                        message: self.redact(&message),
                        usage,
                        attempts,
                    },
                );
            }
            let error = ErrorBody::parse(&bytes);
            if matches!(status, 400 | 422)
                && let Some(next) = shape.adapted(&error, sent_schema, sent_tools)
            {
                tracing::info!(
                    endpoint = %self.endpoint, model = %request.model, message = %self.redact(&error.message),
                    "the endpoint refused a request parameter; sending the request again without it"
                );
                shape = next;
                self.remember(&request.model, shape);
                continue;
            }
            let transient = matches!(status, 408 | 409 | 429) || status >= 500;
            if transient && retries < self.retries {
                tokio::time::sleep(self.wait_before(retries, Some(&headers))).await;
                retries += 1;
                continue;
            }
            return Err(LmError::Status {
                endpoint: self.endpoint.clone(),
                status,
                message: self.redact(&error.message),
                attempts,
            });
        }
    }
}

/// The JSON body of a request in the given shape.
fn wire_body(request: &ChatRequest, shape: Shape) -> Value {
    let messages = if !request.tools.is_empty() && shape.no_tools {
        json!(actions_in_text(request))
    } else {
        json!(request.messages)
    };
    let mut body = json!({
        "model": request.model,
        "messages": messages,
    });
    if !request.tools.is_empty() && !shape.no_tools {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.parameters}})
            })
            .collect();
        body["tools"] = json!(tools);
        if let Some(choice) = &request.tool_choice {
            body["tool_choice"] = json!(choice);
        }
    }
    if !shape.no_temperature {
        body["temperature"] = json!(request.temperature);
    }
    let tokens_param = if shape.completion_tokens_param {
        "max_completion_tokens"
    } else {
        "max_tokens"
    };
    body[tokens_param] = json!(request.max_tokens);
    if let Some(schema) = &request.schema
        && !shape.no_schema
    {
        body["response_format"] = json!({
            "type": "json_schema",
            "json_schema": {"name": schema.name, "schema": schema.schema, "strict": true},
        });
    }
    body
}

/// The conversation for an endpoint that takes no tools: the tools described in a system
/// message with the answer's form (one JSON action), earlier calls as that JSON in the
/// assistant's text, and their results as user messages.
fn actions_in_text(request: &ChatRequest) -> Vec<ChatMessage> {
    let tools: Vec<Value> = request
        .tools
        .iter()
        .map(|t| json!({"name": t.name, "description": t.description, "parameters": t.parameters}))
        .collect();
    let mut out = vec![ChatMessage::system(format!(
        "You act by calling tools. Answer with exactly one JSON object and nothing else: \
         {{\"tool\": <tool name>, \"arguments\": <object matching the tool's parameters>}}. \
         The tools:\n{}",
        serde_json::to_string_pretty(&tools).unwrap_or_default()
    ))];
    let mut names = BTreeMap::new();
    for message in &request.messages {
        match message.role {
            Role::Assistant if !message.tool_calls.is_empty() => {
                for call in &message.tool_calls {
                    names.insert(call.id.clone(), call.function.name.clone());
                }
                let actions: Vec<String> = message
                    .tool_calls
                    .iter()
                    .map(|c| {
                        json!({"tool": c.function.name,
                            "arguments": serde_json::from_str::<Value>(&c.function.arguments).unwrap_or(Value::Null)})
                        .to_string()
                    })
                    .collect();
                out.push(ChatMessage::assistant(actions.join("\n"), Vec::new()));
            }
            Role::Tool => {
                let id = message.tool_call_id.clone().unwrap_or_default();
                let name = names.get(&id).map_or("the tool", String::as_str);
                out.push(ChatMessage::user(format!(
                    "Result of {name}:\n{}",
                    message.content
                )));
            }
            _ => out.push(ChatMessage {
                tool_calls: Vec::new(),
                tool_call_id: None,
                ..message.clone()
            }),
        }
    }
    out
}

/// The JSON action of an answer given as text (`{"tool": .., "arguments": {..}}`, possibly in a
/// code fence), as a tool call.
fn action_in_text(text: &str) -> Option<ToolCall> {
    let trimmed = text.trim();
    let body = trimmed
        .strip_prefix("```json")
        .or_else(|| trimmed.strip_prefix("```"))
        .and_then(|rest| rest.trim_end().strip_suffix("```"))
        .unwrap_or(trimmed);
    let start = body.find('{')?;
    let end = body.rfind('}')?;
    let value: Value = serde_json::from_str(body.get(start..=end)?).ok()?;
    let name = value.get("tool")?.as_str()?;
    let arguments = value.get("arguments").cloned().unwrap_or_else(|| json!({}));
    Some(ToolCall::new("call_text_1", name, &arguments))
}

/// Reads a chat completion; on failure, what is wrong and the usage the body reported anyway.
/// With `json_actions`, the endpoint was asked for one JSON action in the text instead of tool
/// calls, and that action is read as the answer's call.
fn parse_answer(
    bytes: &[u8],
    request_body: Value,
    structured: bool,
    json_actions: bool,
    attempts: u32,
) -> Result<ChatAnswer, (String, Option<Usage>)> {
    let body: Value = serde_json::from_slice(bytes).map_err(|e| {
        (
            format!(
                "the body is not JSON ({e}): {}",
                first_chars(&String::from_utf8_lossy(bytes), 200)
            ),
            None,
        )
    })?;
    let usage = usage_of(&body);
    if body.get("error").is_some_and(|e| !e.is_null()) {
        let error = ErrorBody::parse(bytes);
        return Err((
            format!("the body is an error although HTTP 200: {}", error.message),
            usage,
        ));
    }
    let Some(choice) = body
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
    else {
        return Err(("the body has no choices".into(), usage));
    };
    let message = choice.get("message").unwrap_or(&Value::Null);
    let content = match message.get("content") {
        Some(Value::String(text)) => Some(text.clone()),
        // Some servers send content as a list of parts, as in requests.
        Some(Value::Array(parts)) => Some(
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<String>(),
        ),
        _ => None,
    };
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
    let mut tool_calls: Vec<ToolCall> = match message.get("tool_calls") {
        Some(Value::Array(calls)) => calls
            .iter()
            .filter_map(|c| serde_json::from_value::<ToolCall>(c.clone()).ok())
            .collect(),
        _ => Vec::new(),
    };
    if tool_calls.is_empty() && json_actions {
        tool_calls.extend(content.as_deref().and_then(action_in_text));
    }
    Ok(ChatAnswer {
        id: text(body.get("id")),
        model: text(body.get("model")),
        content,
        refusal: text(message.get("refusal")),
        tool_calls,
        finish_reason: text(choice.get("finish_reason")),
        usage,
        structured,
        attempts,
        request_body,
        response_body: body,
        cost_usd: None,
        replayed: false,
    })
}

fn usage_of(body: &Value) -> Option<Usage> {
    let usage = body.get("usage")?;
    let count = |key: &str| usage.get(key).and_then(Value::as_u64);
    let prompt_tokens = count("prompt_tokens");
    let completion_tokens = count("completion_tokens");
    if prompt_tokens.is_none() && completion_tokens.is_none() {
        return None;
    }
    Some(Usage {
        prompt_tokens: prompt_tokens.unwrap_or(0),
        completion_tokens: completion_tokens.unwrap_or(0),
    })
}

/// The parts of an error body kiln uses.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct ErrorBody {
    message: String,
    param: Option<String>,
}

impl ErrorBody {
    fn parse(bytes: &[u8]) -> Self {
        let text = String::from_utf8_lossy(bytes);
        let Ok(body) = serde_json::from_str::<Value>(&text) else {
            let message = if text.trim().is_empty() {
                "(empty body)".to_string()
            } else {
                first_chars(text.trim(), 300)
            };
            return Self {
                message,
                param: None,
            };
        };
        // `{"error": {"message", "type", "param", "code"}}` (OpenAI and most servers),
        // `{"error": "text"}` (some proxies), or vLLM's `{"object": "error", "message", ...}`.
        let error = match body.get("error") {
            Some(Value::String(message)) => {
                return Self {
                    message: first_chars(message, 300),
                    param: None,
                };
            }
            Some(error @ Value::Object(_)) => error,
            _ => &body,
        };
        let message = error.get("message").and_then(Value::as_str).map_or_else(
            || first_chars(&body.to_string(), 300),
            |m| first_chars(m, 300),
        );
        Self {
            message,
            param: error
                .get("param")
                .and_then(Value::as_str)
                .map(str::to_string),
        }
    }
}

/// The wait a response asks for: `retry-after-ms` (OpenAI), else `retry-after` in seconds or
/// as an HTTP date.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let header = |name| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.trim().parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let value = header(RETRY_AFTER.as_str())?.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds));
    }
    let date = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let wait = date.signed_duration_since(chrono::Utc::now());
    Some(wait.to_std().unwrap_or(Duration::ZERO))
}

fn first_chars(text: &str, n: usize) -> String {
    let mut out: String = text.chars().take(n).collect();
    if text.chars().count() > n {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_of_every_shape_give_their_message() {
        let openai = br#"{"error": {"message": "Rate limit reached", "type": "requests", "param": null, "code": "rate_limit_exceeded"}}"#;
        assert_eq!(ErrorBody::parse(openai).message, "Rate limit reached");
        let vllm = br#"{"object": "error", "message": "max_tokens is too large", "type": "BadRequestError", "param": null, "code": 400}"#;
        assert_eq!(ErrorBody::parse(vllm).message, "max_tokens is too large");
        let proxy = br#"{"error": "upstream unavailable"}"#;
        assert_eq!(ErrorBody::parse(proxy).message, "upstream unavailable");
        assert_eq!(
            ErrorBody::parse(b"<html>Bad Gateway</html>").message,
            "<html>Bad Gateway</html>"
        );
        assert_eq!(ErrorBody::parse(b"").message, "(empty body)");
        let param = br#"{"error": {"message": "Unsupported parameter", "param": "max_tokens"}}"#;
        assert_eq!(ErrorBody::parse(param).param.as_deref(), Some("max_tokens"));
    }

    #[test]
    fn a_refused_parameter_changes_the_shape_once() {
        let schema = ErrorBody {
            message: "response_format json_schema is not supported".into(),
            param: None,
        };
        let shape = Shape::default().adapted(&schema, true, false);
        assert_eq!(
            shape,
            Some(Shape {
                no_schema: true,
                ..Shape::default()
            })
        );
        assert_eq!(shape.and_then(|s| s.adapted(&schema, false, false)), None);
        let tokens = ErrorBody {
            message: "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.".into(),
            param: Some("max_tokens".into()),
        };
        let shape = Shape::default().adapted(&tokens, true, false);
        assert!(shape.is_some_and(|s| s.completion_tokens_param && !s.no_schema));
        let unrelated = ErrorBody {
            message: "messages must not be empty".into(),
            param: Some("messages".into()),
        };
        assert_eq!(Shape::default().adapted(&unrelated, true, false), None);
    }

    #[test]
    fn retry_after_reads_seconds_milliseconds_and_dates() {
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", "2".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert("retry-after-ms", "250".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(250)));
        let mut dated = HeaderMap::new();
        let soon = chrono::Utc::now() + chrono::Duration::seconds(30);
        dated.insert(
            "retry-after",
            soon.format("%a, %d %b %Y %H:%M:%S GMT")
                .to_string()
                .parse()
                .unwrap(),
        );
        let wait = retry_after(&dated).unwrap_or_default();
        assert!(
            wait > Duration::from_secs(25) && wait <= Duration::from_secs(30),
            "{wait:?}"
        );
        assert_eq!(retry_after(&HeaderMap::new()), None);
    }

    #[test]
    fn content_parts_and_missing_usage_are_read() {
        let body = br#"{"id": "x", "choices": [{"index": 0, "message": {"role": "assistant", "content": [{"type": "text", "text": "{\"a\":"}, {"type": "text", "text": "1}"}]}, "finish_reason": "stop"}]}"#;
        let answer = parse_answer(body, json!({}), true, false, 1).unwrap();
        assert_eq!(answer.content.as_deref(), Some("{\"a\":1}"));
        assert_eq!(answer.usage, None);
        let no_choices = br#"{"id": "x", "choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 0, "total_tokens": 7}}"#;
        let (message, usage) = parse_answer(no_choices, json!({}), true, false, 1).unwrap_err();
        assert!(message.contains("no choices"), "{message}");
        assert_eq!(
            usage,
            Some(Usage {
                prompt_tokens: 7,
                completion_tokens: 0
            })
        );
    }

    #[test]
    fn tool_calls_are_read_and_a_server_without_tools_gets_json_actions() {
        // OpenAI's shape: content null, tool_calls with arguments as a JSON string.
        let body = br#"{"id": "c", "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": [{"id": "call_abc", "type": "function", "function": {"name": "run", "arguments": "{\"command\": \"ls\"}"}}]}, "finish_reason": "tool_calls"}]}"#;
        let answer = parse_answer(body, json!({}), false, false, 1).unwrap();
        assert_eq!(answer.tool_calls.len(), 1);
        assert_eq!(answer.tool_calls[0].id, "call_abc");
        assert_eq!(answer.tool_calls[0].function.name, "run");
        // Without tools, the action comes as text, possibly fenced.
        let text = br#"{"id": "c", "choices": [{"index": 0, "message": {"role": "assistant", "content": "```json\n{\"tool\": \"read_file\", \"arguments\": {\"path\": \"setup.py\"}}\n```"}, "finish_reason": "stop"}]}"#;
        let answer = parse_answer(text, json!({}), false, true, 1).unwrap();
        assert_eq!(answer.tool_calls[0].function.name, "read_file");
        assert_eq!(
            serde_json::from_str::<Value>(&answer.tool_calls[0].function.arguments).unwrap(),
            json!({"path": "setup.py"})
        );
        // vLLM without --enable-auto-tool-choice.
        let refused = ErrorBody {
            message: "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set".into(),
            param: None,
        };
        assert_eq!(
            Shape::default().adapted(&refused, false, true),
            Some(Shape {
                no_tools: true,
                ..Shape::default()
            })
        );
        assert_eq!(Shape::default().adapted(&refused, false, false), None);
    }

    #[test]
    fn without_tools_the_conversation_carries_the_actions_as_text() {
        use kiln_core::lm::ToolSpec;
        let request = ChatRequest {
            model: "m".into(),
            messages: vec![
                ChatMessage::system("build it"),
                ChatMessage::user("the repository"),
                ChatMessage::assistant(
                    "",
                    vec![ToolCall::new("call_1", "run", &json!({"command": "make"}))],
                ),
                ChatMessage::tool("call_1", "exit 2"),
            ],
            temperature: 0.0,
            max_tokens: 100,
            schema: None,
            sample: 0,
            tools: vec![ToolSpec {
                name: "run".into(),
                description: "runs a shell command".into(),
                parameters: json!({"type": "object", "properties": {"command": {"type": "string"}}}),
            }],
            tool_choice: Some("required".into()),
            replay_key: None,
        };
        let with_tools = wire_body(&request, Shape::default());
        assert_eq!(with_tools["tools"][0]["function"]["name"], "run");
        assert_eq!(with_tools["tool_choice"], "required");
        assert_eq!(with_tools["messages"][3]["role"], "tool");
        let without = wire_body(
            &request,
            Shape {
                no_tools: true,
                ..Shape::default()
            },
        );
        assert!(without.get("tools").is_none());
        let messages = without["messages"].as_array().cloned().unwrap_or_default();
        assert!(
            messages[0]["content"]
                .as_str()
                .is_some_and(|c| c.contains("\"tool\"") && c.contains("runs a shell command"))
        );
        assert_eq!(messages[3]["role"], "assistant");
        assert_eq!(
            messages[3]["content"],
            json!({"tool": "run", "arguments": {"command": "make"}}).to_string()
        );
        assert_eq!(messages[4]["role"], "user");
        assert_eq!(messages[4]["content"], "Result of run:\nexit 2");
        assert!(messages.iter().all(|m| m.get("tool_calls").is_none()));
    }
}
