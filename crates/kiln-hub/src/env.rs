//! Where the Hub is and which token to send, from the environment variables the official client
//! reads.

/// The Hub's address when `HF_ENDPOINT` names none.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// The token from the environment: `HF_TOKEN`, else `HUGGING_FACE_HUB_TOKEN` (the names the
/// official client reads).
#[must_use]
pub fn token_from_env() -> Option<String> {
    ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"]
        .iter()
        .find_map(|name| std::env::var(name).ok().filter(|v| !v.trim().is_empty()))
}

/// The Hub's address from `HF_ENDPOINT`, else [`DEFAULT_ENDPOINT`].
#[must_use]
pub fn endpoint_from_env() -> String {
    std::env::var("HF_ENDPOINT")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string())
}
