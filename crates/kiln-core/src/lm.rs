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
}

/// One message of a chat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Who says it.
    pub role: Role,
    /// What is said.
    pub content: String,
}

impl ChatMessage {
    /// A system message.
    #[must_use]
    pub fn system(content: impl Into<String>) -> Self {
        Self {
            role: Role::System,
            content: content.into(),
        }
    }

    /// A user message.
    #[must_use]
    pub fn user(content: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: content.into(),
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
}

impl ChatRequest {
    /// The replay key: SHA-256 over model, messages and parameters, in a fixed serialisation.
    /// Equal requests, and only those, share a key.
    #[must_use]
    pub fn key(&self) -> String {
        let canonical = serde_json::json!({
            "v": 1,
            "model": self.model,
            "messages": self.messages,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "schema": self.schema,
            "sample": self.sample,
        });
        hex_sha256(canonical.to_string().as_bytes())
    }

    /// Bytes of all message texts, for a conservative cost bound before asking.
    #[must_use]
    pub fn prompt_bytes(&self) -> usize {
        self.messages.iter().map(|m| m.content.len()).sum()
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
            Self::Setup(_) => 0,
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
        for other in [
            other_model,
            other_text,
            other_temperature,
            other_schema,
            request(1),
        ] {
            assert_ne!(base.key(), other.key(), "{other:?}");
        }
    }
}
