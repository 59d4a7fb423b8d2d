//! Hex digests: the config's hash and the settings hashes that notice config changes, and the
//! language model's replay keys.

use sha2::{Digest, Sha256};

/// Lowercase hex SHA-256 of bytes.
#[must_use]
pub fn hex_sha256(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Lowercase hex of bytes (a digest).
#[must_use]
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}
