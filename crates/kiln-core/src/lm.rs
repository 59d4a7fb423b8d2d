//! The language-model trait: what the filter and split stages need from an LM endpoint.
//!
//! `kiln-lm` implements it on the OpenAI-compatible chat-completions API (OpenAI, vLLM, Ollama,
//! llama.cpp's server and LiteLLM proxies all speak it). Stages hold an
//! `Arc<dyn LanguageModel>` and never see HTTP. The trait carries what makes an answer
//! reproducible and accountable: the exact request and response bodies, the token counts the
//! endpoint reported, and how many HTTP requests it took.

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::config::hash::hex_sha256;

/// Who says a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions.
    System,
    /// The question.
    User,
    /// An earlier answer.
    Assistant,
    /// What a tool call gave (`tool_call_id` names the call).
    Tool,
}

/// One message of a chat, as the chat-completions API writes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Who says it.
    pub role: Role,
    /// What is said.
    pub content: String,
    /// The tools an assistant message calls.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// The call a tool message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

/// A function call an assistant asks for (`tool_calls[i]` of the chat-completions API).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call's id, which the tool message answering it names.
    pub id: String,
    /// Always `function`.
    #[serde(rename = "type", default = "function_kind")]
    pub kind: String,
    /// The function and its arguments.
    pub function: FunctionCall,
}

fn function_kind() -> String {
    "function".into()
}

/// The function of a [`ToolCall`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionCall {
    /// The tool's name.
    pub name: String,
    /// Its arguments, a JSON object as text (as the API sends them).
    pub arguments: String,
}

impl ToolCall {
    /// A call of `name` with `arguments`.
    #[must_use]
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: &serde_json::Value,
    ) -> Self {
        Self {
            id: id.into(),
            kind: function_kind(),
            function: FunctionCall {
                name: name.into(),
                arguments: arguments.to_string(),
            },
        }
    }
}

/// A tool a request offers (`tools[i]` of the chat-completions API: a function with a JSON
/// Schema of its parameters).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The function's name (`[a-zA-Z0-9_-]`).
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// The JSON Schema of its arguments (an object).
    pub parameters: serde_json::Value,
}

impl ChatMessage {
    /// A system message.
    #[must_use]
    pub fn system(content: impl Into<String>) -> Self {
        Self {
            role: Role::System,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }

    /// A user message.
    #[must_use]
    pub fn user(content: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }

    /// An assistant message: what the model answered, with the calls it asked for.
    #[must_use]
    pub fn assistant(content: impl Into<String>, tool_calls: Vec<ToolCall>) -> Self {
        Self {
            role: Role::Assistant,
            content: content.into(),
            tool_calls,
            tool_call_id: None,
        }
    }

    /// A tool message: what the call `call_id` gave.
    #[must_use]
    pub fn tool(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            role: Role::Tool,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: Some(call_id.into()),
        }
    }
}

/// A JSON Schema the answer must follow (`response_format` of type `json_schema`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnswerSchema {
    /// Schema name (`[a-zA-Z0-9_-]`, as the API requires).
    pub name: String,
    /// The schema itself.
    pub schema: serde_json::Value,
}

/// One chat-completion request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// Model name, as the endpoint knows it.
    pub model: String,
    /// The conversation.
    pub messages: Vec<ChatMessage>,
    /// Sampling temperature.
    pub temperature: f64,
    /// Upper bound on completion tokens.
    pub max_tokens: u32,
    /// The answer's JSON Schema, when a structured answer is wanted.
    pub schema: Option<AnswerSchema>,
    /// Which sample of the same prompt this is (0 for the first vote). It is not sent: it only
    /// keeps the answers of repeated votes apart in the replay store.
    pub sample: u32,
    /// Tools the model may call (none: a plain answer).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolSpec>,
    /// `tool_choice`: `auto` (the API's default when tools are offered), `required` or `none`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<String>,
    /// Not sent. When set, the replay key is derived from the model and this text instead of
    /// the messages: the launch agent keys a turn by the actions taken so far and their exit
    /// codes, so that a re-run whose commands print other timings or download progress still
    /// replays.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_key: Option<String>,
}

impl ChatRequest {
    /// The replay key: SHA-256 over model, messages and parameters, in a fixed serialisation.
    /// Equal requests, and only those, share a key.
    #[must_use]
    pub fn key(&self) -> String {
        if let Some(replay_key) = &self.replay_key {
            let canonical = serde_json::json!({
                "v": "replay-key-1",
                "model": self.model,
                "key": replay_key,
                "sample": self.sample,
            });
            return hex_sha256(canonical.to_string().as_bytes());
        }
        let mut canonical = serde_json::json!({
            "v": 1,
            "model": self.model,
            "messages": self.messages,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "schema": self.schema,
            "sample": self.sample,
        });
        // Requests without tools keep the keys they always had, so earlier runs still replay.
        if !self.tools.is_empty() {
            canonical["tools"] = serde_json::json!(self.tools);
            canonical["tool_choice"] = serde_json::json!(self.tool_choice);
        }
        hex_sha256(canonical.to_string().as_bytes())
    }

    /// Bytes of all message texts (tool calls and tool schemas included), for a conservative
    /// cost bound before asking.
    #[must_use]
    pub fn prompt_bytes(&self) -> usize {
        let calls: usize = self
            .messages
            .iter()
            .flat_map(|m| &m.tool_calls)
            .map(|c| c.function.name.len() + c.function.arguments.len())
            .sum();
        let tools: usize = self
            .tools
            .iter()
            .map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len())
            .sum();
        self.messages.iter().map(|m| m.content.len()).sum::<usize>() + calls + tools
    }
}

/// Token counts an endpoint reported in `usage`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens of the prompt.
    pub prompt_tokens: u64,
    /// Tokens of the completion.
    pub completion_tokens: u64,
}

/// What the endpoint answered (HTTP 200 with a chat completion).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatAnswer {
    /// The completion id the endpoint gave.
    pub id: Option<String>,
    /// The model the endpoint says answered (may differ from the one asked: `gpt-4o-mini` is
    /// answered by `gpt-4o-mini-2024-07-18`).
    pub model: Option<String>,
    /// The text of the first choice.
    pub content: Option<String>,
    /// The model's refusal, when it declined (structured outputs report it apart from content).
    pub refusal: Option<String>,
    /// The tools the model called (from `tool_calls`, or from a JSON action in the content when
    /// the endpoint takes no tools).
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
    /// Why the completion ended (`stop`, `length`, ...).
    pub finish_reason: Option<String>,
    /// Token counts, when reported.
    pub usage: Option<Usage>,
    /// Whether the answer was asked with `response_format` `json_schema` (false after the
    /// endpoint refused it and the request was sent again without).
    pub structured: bool,
    /// HTTP requests this answer took (retries and the schema fallback included).
    pub attempts: u32,
    /// The request body as last sent.
    pub request_body: serde_json::Value,
    /// The response body as received.
    pub response_body: serde_json::Value,
    /// US dollars the answer cost at the config's price (none: no price, or not counted).
    #[serde(default)]
    pub cost_usd: Option<f64>,
    /// Whether the answer was replayed from the run's store instead of asked.
    #[serde(default)]
    pub replayed: bool,
}

/// Why no answer came. Messages read well after "failed to" and never contain the API key.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LmError {
    /// The client could not be set up (bad base URL, TLS roots).
    #[error("set up the LM client: {0}")]
    Setup(String),
    /// The endpoint could not be reached.
    #[error("reach the LM endpoint {endpoint} ({attempts} attempts): {message}")]
    Unreachable {
        /// Base URL, without credentials.
        endpoint: String,
        /// The connection error.
        message: String,
        /// HTTP requests tried.
        attempts: u32,
    },
    /// No answer within the timeout.
    #[error("get an answer from {endpoint} within {}s ({attempts} attempts)", timeout.as_secs_f64())]
    Timeout {
        /// Base URL, without credentials.
        endpoint: String,
        /// The per-request timeout.
        timeout: Duration,
        /// HTTP requests tried.
        attempts: u32,
    },
    /// The endpoint answered with an HTTP error.
    #[error("get an answer from {endpoint}: HTTP {status}: {message} ({attempts} attempts)")]
    Status {
        /// Base URL, without credentials.
        endpoint: String,
        /// HTTP status.
        status: u16,
        /// The error message of the body (`error.message`), or its first bytes.
        message: String,
        /// HTTP requests tried.
        attempts: u32,
    },
    /// The request was not sent: it could have taken the run past its budget.
    #[error("get an answer within the run's LM budget: ${spent:.4} of ${limit:.4} spent")]
    OverBudget {
        /// Dollars the run had spent.
        spent: f64,
        /// The budget.
        limit: f64,
    },
    /// An earlier failure, as the run's answer store recorded it.
    #[error("get an answer from {endpoint}: {message}")]
    Recorded {
        /// Base URL, without credentials.
        endpoint: String,
        /// The failure as recorded.
        message: String,
        /// HTTP requests it took.
        attempts: u32,
    },
    /// HTTP 200, but the body is not a chat completion.
    #[error("read the answer of {endpoint}: {message}")]
    Malformed {
        /// Base URL, without credentials.
        endpoint: String,
        /// What is wrong with the body.
        message: String,
        /// Token counts, if the body reported them anyway.
        usage: Option<Usage>,
        /// HTTP requests tried.
        attempts: u32,
    },
}

impl LmError {
    /// HTTP requests this failure took.
    #[must_use]
    pub fn attempts(&self) -> u32 {
        match self {
            Self::Setup(_) | Self::OverBudget { .. } => 0,
            Self::Recorded { attempts, .. } => *attempts,
            Self::Unreachable { attempts, .. }
            | Self::Timeout { attempts, .. }
            | Self::Status { attempts, .. }
            | Self::Malformed { attempts, .. } => *attempts,
        }
    }

    /// Token counts the endpoint reported although no answer could be used.
    #[must_use]
    pub fn usage(&self) -> Option<Usage> {
        match self {
            Self::Malformed { usage, .. } => *usage,
            _ => None,
        }
    }
}

/// A chat-completion endpoint.
#[async_trait]
pub trait LanguageModel: Send + Sync {
    /// Where answers come from (base URL without credentials), for rows and messages.
    fn endpoint(&self) -> String;
    /// Asks one question; retries, timeouts and the cap on requests in flight are the
    /// implementation's.
    async fn chat(&self, request: &ChatRequest) -> Result<ChatAnswer, LmError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(sample: u32) -> ChatRequest {
        ChatRequest {
            model: "m".into(),
            messages: vec![ChatMessage::system("judge"), ChatMessage::user("issue")],
            temperature: 0.0,
            max_tokens: 100,
            schema: None,
            sample,
            tools: Vec::new(),
            tool_choice: None,
            replay_key: None,
        }
    }

    #[test]
    fn keys_differ_with_any_part_of_the_request() {
        let base = request(0);
        assert_eq!(base.key(), request(0).key());
        assert_eq!(base.key().len(), 64);
        let mut other_model = base.clone();
        other_model.model = "n".into();
        let mut other_text = base.clone();
        other_text.messages[1].content.push('!');
        let mut other_temperature = base.clone();
        other_temperature.temperature = 0.5;
        let mut other_schema = base.clone();
        other_schema.schema = Some(AnswerSchema {
            name: "s".into(),
            schema: serde_json::json!({"type": "object"}),
        });
        let mut other_tools = base.clone();
        other_tools.tools = vec![ToolSpec {
            name: "run".into(),
            description: "runs a command".into(),
            parameters: serde_json::json!({"type": "object"}),
        }];
        let mut other_calls = base.clone();
        other_calls.messages.push(ChatMessage::assistant(
            "",
            vec![ToolCall::new(
                "call_1",
                "run",
                &serde_json::json!({"command": "ls"}),
            )],
        ));
        // A replay key stands for the messages: other text, same key; other key, other key.
        let mut keyed = base.clone();
        keyed.replay_key = Some("run ls -> 0".into());
        let mut keyed_text = keyed.clone();
        keyed_text.messages[1].content.push('!');
        assert_eq!(keyed.key(), keyed_text.key());
        let mut keyed_other = keyed.clone();
        keyed_other.replay_key = Some("run ls -> 1".into());
        assert_ne!(keyed.key(), keyed_other.key());
        assert_ne!(keyed.key(), base.key());
        for other in [
            other_model,
            other_text,
            other_temperature,
            other_schema,
            request(1),
            other_tools,
            other_calls,
        ] {
            assert_ne!(base.key(), other.key(), "{other:?}");
        }
    }

    #[test]
    fn a_request_without_tools_keeps_its_key_and_messages_their_wire_form() {
        // The key of a plain request as kiln computed it before tools existed.
        assert_eq!(
            request(0).key(),
            hex_sha256(
                serde_json::json!({
                    "v": 1, "model": "m",
                    "messages": [{"role": "system", "content": "judge"}, {"role": "user", "content": "issue"}],
                    "temperature": 0.0, "max_tokens": 100, "schema": null, "sample": 0,
                })
                .to_string()
                .as_bytes()
            )
        );
        let call = ChatMessage::assistant(
            "",
            vec![ToolCall::new(
                "call_1",
                "run",
                &serde_json::json!({"command": "ls"}),
            )],
        );
        assert_eq!(
            serde_json::to_value(&call).unwrap_or_default(),
            serde_json::json!({"role": "assistant", "content": "", "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "run", "arguments": "{\"command\":\"ls\"}"}}]})
        );
        assert_eq!(
            serde_json::to_value(ChatMessage::tool("call_1", "a\nb")).unwrap_or_default(),
            serde_json::json!({"role": "tool", "content": "a\nb", "tool_call_id": "call_1"})
        );
    }
}
