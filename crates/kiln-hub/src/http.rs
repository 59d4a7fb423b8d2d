//! How kiln reads the Hub's answers: every body within a cap and a deadline, the Hub's error
//! message quoted short, `Link` headers, and origins (the token goes to the Hub's own origin
//! only).

use std::time::Duration;

use kiln_core::net::quote;
use serde_json::Value;

/// Content type of the LFS batch API.
pub(crate) const LFS_JSON: &str = "application/vnd.git-lfs+json";

/// The largest API answer kiln reads (a tree listing page of 1,000 entries is about 300 KB).
pub(crate) const MAX_ANSWER_BYTES: usize = 32 << 20;
/// How much of an error answer kiln reads: the message is cut to a line anyway.
pub(crate) const MAX_ERROR_BYTES: usize = 64 << 10;
/// The longest pause between two reads of an answer.
pub(crate) const READ_TIMEOUT: Duration = Duration::from_secs(120);
/// The longest an API answer's body may take to arrive once its headers came: a server that
/// drips bytes slower than this allows is given up, not waited on for the whole request timeout.
pub(crate) const BODY_DEADLINE: Duration = Duration::from_secs(120);

/// `scheme://host[:port]` of a URL.
pub(crate) fn origin(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    let end = url[after_scheme..]
        .find('/')
        .map_or(url.len(), |i| after_scheme + i);
    &url[..end]
}

/// Whether two URLs share scheme, host and port.
pub(crate) fn same_origin(url: &str, endpoint: &str) -> bool {
    origin(url).eq_ignore_ascii_case(origin(endpoint))
}

/// The `rel="next"` address of a `Link` header.
pub(crate) fn next_link(header: &str) -> Option<String> {
    header.split(',').find_map(|part| {
        let (target, params) = part.split_once(';')?;
        params
            .split(';')
            .any(|p| p.trim() == "rel=\"next\"")
            .then(|| {
                target
                    .trim()
                    .trim_start_matches('<')
                    .trim_end_matches('>')
                    .to_string()
            })
    })
}

/// An answer body read up to a cap.
pub(crate) enum Body {
    /// All of it.
    Whole(Vec<u8>),
    /// The first `cap` bytes; more followed.
    Cut(Vec<u8>),
}

/// Reads `response`'s body up to `cap` bytes, within `deadline`; the error says what
/// went wrong (a dropped connection, the deadline).
pub(crate) async fn read_capped(
    mut response: reqwest::Response,
    cap: usize,
    deadline: Duration,
) -> Result<Body, String> {
    let read = async {
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| {
            format!(
                "the answer broke off: {}",
                kiln_core::net::error_chain(&e.without_url())
            )
        })? {
            let room = cap - bytes.len();
            if chunk.len() > room {
                bytes.extend_from_slice(&chunk[..room]);
                return Ok(Body::Cut(bytes));
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(Body::Whole(bytes))
    };
    match tokio::time::timeout(deadline, read).await {
        Ok(body) => body,
        Err(_) => Err(format!(
            "the answer did not arrive within {:.0} s of its headers",
            deadline.as_secs_f64()
        )),
    }
}

/// The text of an error answer, at most [`MAX_ERROR_BYTES`] of it (what arrived, if it broke
/// off).
pub(crate) async fn error_body(response: reqwest::Response) -> String {
    match read_capped(response, MAX_ERROR_BYTES, BODY_DEADLINE).await {
        Ok(Body::Whole(bytes) | Body::Cut(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(message) => message,
    }
}

/// The Hub's error message from an answer body (`{"error": "..."}`), on one line and cut by
/// [`quote`].
pub(crate) fn hub_message(body: &str) -> String {
    let text = serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v.get("error").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_else(|| body.to_string());
    quote(&text.split_whitespace().collect::<Vec<_>>().join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_and_links() {
        assert!(same_origin("https://hf.co/a?x=1", "https://hf.co"));
        assert!(!same_origin("https://s3.example/a", "https://hf.co"));
        assert!(!same_origin("http://hf.co:81/a", "http://hf.co"));
        assert_eq!(
            next_link(r#"<https://hf.co/api/x?cursor=abc>; rel="next""#).as_deref(),
            Some("https://hf.co/api/x?cursor=abc")
        );
        assert_eq!(next_link(r#"<https://hf.co/p1>; rel="prev""#), None);
    }
}
