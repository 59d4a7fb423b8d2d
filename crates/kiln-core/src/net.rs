//! What kiln's HTTP clients (the LM endpoint, the Hugging Face Hub, GitHub) share: the TLS
//! setup, error messages that name every cause, and the bounded quote of a server's answer in
//! them.

use std::sync::Arc;

/// A rustls client configuration on the ring provider that trusts the system's root
/// certificates (`/etc/ssl/certs`, or `SSL_CERT_FILE`), so a TLS-inspecting proxy's CA is
/// trusted as the host's own tools trust it. Only HTTP/1.1 is offered (reqwest is built
/// without HTTP/2). `need_roots`: an empty store is an error (an `https` endpoint).
///
/// # Errors
/// When no root certificate is found and one is needed, or rustls refuses the setup; the
/// message reads after "failed to".
pub fn client_tls_config(need_roots: bool) -> Result<rustls::ClientConfig, String> {
    let mut roots = rustls::RootCertStore::empty();
    let found = rustls_native_certs::load_native_certs();
    for cert in found.certs {
        // One unreadable certificate in the system store must not cost the others.
        let _ = roots.add(cert);
    }
    if need_roots && roots.is_empty() {
        let errors: Vec<String> = found.errors.iter().map(ToString::to_string).collect();
        return Err(format!(
            "find trusted root certificates in the system store (install ca-certificates, or set SSL_CERT_FILE): {}",
            errors.join("; ")
        ));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("configure TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// An error with its sources, as one line (reqwest's own message says only "error sending
/// request").
#[must_use]
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Bytes of a server's answer an error or log message quotes from its start ([`quote`]).
pub const QUOTE_HEAD: usize = 1024;

/// Bytes of a server's answer an error or log message quotes from its end ([`quote`]).
pub const QUOTE_TAIL: usize = 512;

/// What a server sent (a body, a JSON value, a header, a message inside an answer) as an error
/// or log message may quote it: whole when it is short, else its first [`QUOTE_HEAD`] and last
/// [`QUOTE_TAIL`] bytes around the number of bytes left out. Control characters (line breaks
/// among them) become spaces, so that the quote stays on one line and cannot drive a terminal.
///
/// The text is formatted into the quote piece by piece, so a JSON value of many megabytes is
/// never written out whole: the quote holds at most its head and twice its tail at any time.
#[must_use]
pub fn quote(answer: &dyn std::fmt::Display) -> String {
    use std::fmt::Write as _;
    let mut excerpt = Excerpt::default();
    // Writing into an `Excerpt` never fails; a `Display` that fails leaves what it wrote.
    let _ = write!(excerpt, "{answer}");
    excerpt.finish()
}

/// The head and the running tail of a text written piece by piece ([`quote`]).
#[derive(Default)]
struct Excerpt {
    head: String,
    /// Whether the head is complete (what comes next goes to the tail).
    head_full: bool,
    /// The latest bytes after the head; trimmed to [`QUOTE_TAIL`] once it holds twice that.
    tail: String,
    /// Bytes written after the head.
    after_head: usize,
}

impl std::fmt::Write for Excerpt {
    fn write_str(&mut self, mut text: &str) -> std::fmt::Result {
        if !self.head_full {
            let take = char_floor(text, QUOTE_HEAD - self.head.len());
            self.head.push_str(&text[..take]);
            text = &text[take..];
            self.head_full = !text.is_empty() || self.head.len() == QUOTE_HEAD;
        }
        self.after_head += text.len();
        if text.len() >= QUOTE_TAIL {
            // Only the end of a long piece can be in the tail.
            self.tail.clear();
            let start = char_ceil(text, text.len() - QUOTE_TAIL);
            self.tail.push_str(&text[start..]);
        } else {
            self.tail.push_str(text);
            if self.tail.len() >= 2 * QUOTE_TAIL {
                let start = char_ceil(&self.tail, self.tail.len() - QUOTE_TAIL);
                self.tail.drain(..start);
            }
        }
        Ok(())
    }
}

impl Excerpt {
    fn finish(mut self) -> String {
        let start = char_ceil(&self.tail, self.tail.len().saturating_sub(QUOTE_TAIL));
        let tail = &self.tail[start..];
        let left_out = self.after_head - tail.len();
        if left_out > 0 {
            self.head
                .push_str(&format!(" … ({left_out} bytes left out) … "));
        }
        self.head.push_str(tail);
        self.head
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect()
    }
}

/// The largest char boundary of `text` at or before `at`.
fn char_floor(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// The smallest char boundary of `text` at or after `at`.
fn char_ceil(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_answers_are_quoted_whole_on_one_line() {
        assert_eq!(quote(&"Not Found"), "Not Found");
        assert_eq!(quote(&"a\nb\r\n\u{1b}[31mc"), "a b   [31mc");
        let exact = "x".repeat(QUOTE_HEAD + QUOTE_TAIL);
        assert_eq!(quote(&exact), exact);
    }

    #[test]
    fn long_answers_keep_their_head_and_tail_and_say_what_was_left_out() {
        let long = format!(
            "{}{}{}",
            "h".repeat(QUOTE_HEAD),
            "m".repeat(30 << 20),
            "t".repeat(QUOTE_TAIL)
        );
        let quoted = quote(&long);
        assert_eq!(
            quoted,
            format!(
                "{} … ({} bytes left out) … {}",
                "h".repeat(QUOTE_HEAD),
                30 << 20,
                "t".repeat(QUOTE_TAIL)
            )
        );
        // Written in many small pieces (a JSON value's `Display`), the result is the same.
        let value = serde_json::json!({"padding": "p".repeat(1 << 20), "end": "done"});
        let quoted = quote(&value);
        let whole = value.to_string();
        assert!(quoted.starts_with(&whole[..QUOTE_HEAD]), "{quoted}");
        assert!(
            quoted.ends_with(&whole[whole.len() - QUOTE_TAIL..]),
            "{quoted}"
        );
        let left_out = whole.len() - QUOTE_HEAD - QUOTE_TAIL;
        assert!(quoted.contains(&format!("({left_out} bytes left out)")));
        assert!(quoted.len() < QUOTE_HEAD + QUOTE_TAIL + 64);
    }

    #[test]
    fn cuts_fall_between_characters() {
        // Three-byte characters: neither cut falls on a byte offset the limits name.
        let long = "€".repeat(10_000);
        let quoted = quote(&long);
        let (head, rest) = quoted.split_once(" … (").unwrap_or_default();
        let (left_out, tail) = rest.split_once(" bytes left out) … ").unwrap_or_default();
        assert!(head.chars().all(|c| c == '€') && head.len() <= QUOTE_HEAD);
        assert!(tail.chars().all(|c| c == '€') && tail.len() <= QUOTE_TAIL);
        assert_eq!(
            head.len() + tail.len() + left_out.parse::<usize>().unwrap_or_default(),
            long.len()
        );
    }
}
