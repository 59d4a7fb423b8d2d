//! The Hub's vocabulary, shared by every handler: ids and hashes as git and LFS compute them,
//! error answers, byte ranges and URL escapes.

use serde_json::json;
use sha2::{Digest as _, Sha256};

use crate::http::Reply;

/// Content type of the LFS batch API.
pub(super) const LFS_JSON: &str = "application/vnd.git-lfs+json";

/// Lowercase hexadecimal of `bytes`.
pub(super) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// SHA-256 of `bytes`, in hexadecimal (the oid of an LFS object).
pub(super) fn sha256(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Git's blob id of `bytes` (what the Hub reports as the `oid` of a file kept in git).
pub(super) fn git_blob(bytes: &[u8]) -> String {
    let mut data = format!("blob {}\0", bytes.len()).into_bytes();
    data.extend_from_slice(bytes);
    sha1(&data)
}

/// SHA-1, for git blob and commit ids.
pub(super) fn sha1(data: &[u8]) -> String {
    hex(&sha1::Sha1::digest(data))
}

/// The pointer file git keeps for an LFS object.
pub(super) fn pointer(oid: &str, size: u64) -> Vec<u8> {
    format!("version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize {size}\n")
        .into_bytes()
}

/// An error answer in the Hub's shape, `{"error": message}`.
pub(super) fn error(status: u16, message: &str) -> Reply {
    Reply::json(status, &json!({"error": message}))
}

/// The Hub's answer for a repository that does not exist or that the caller may not see.
pub(super) fn repo_not_found(repo: &str) -> Reply {
    error(404, &format!("Repository not found: {repo}")).with_header("x-error-code", "RepoNotFound")
}

/// `bytes=a-b`, `bytes=a-` and `bytes=-n` of a body of `total` bytes, inclusive.
pub(super) fn parse_range(header: &str, total: usize) -> Option<(usize, usize)> {
    let spec = header.strip_prefix("bytes=")?;
    let (start, end) = spec.split_once('-')?;
    if total == 0 {
        return None;
    }
    let (start, end) = match (start.parse::<usize>().ok(), end.parse::<usize>().ok()) {
        (Some(s), Some(e)) => (s, e.min(total - 1)),
        (Some(s), None) => (s, total - 1),
        (None, Some(n)) => (total.saturating_sub(n), total - 1),
        (None, None) => return None,
    };
    (start <= end).then_some((start, end))
}

/// `text` with `%XX` escapes decoded; a malformed escape is kept as it is.
pub(super) fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = bytes.get(i + 1..i + 3)
            && let Ok(b) = u8::from_str_radix(&String::from_utf8_lossy(hex), 16)
        {
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Standard base64, as commit lines and preupload samples carry it.
pub(super) fn base64_decode(text: &str) -> Result<Vec<u8>, ()> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_ids_ranges_and_escapes() {
        // `printf 'hello\n' | git hash-object --stdin`
        assert_eq!(
            git_blob(b"hello\n"),
            "ce013625030ba8dba906f756967f9e9ca394464a"
        );
        assert_eq!(base64_decode("aGVsbG8K").unwrap_or_default(), b"hello\n");
        assert_eq!(parse_range("bytes=2-4", 10), Some((2, 4)));
        assert_eq!(parse_range("bytes=-3", 10), Some((7, 9)));
        assert_eq!(parse_range("bytes=8-", 10), Some((8, 9)));
        assert_eq!(percent_decode("a%2Fb%20c"), "a/b c");
        assert_eq!(percent_decode("%é%"), "%é%");
    }
}
