//! Base64 as GitHub writes it, and the opaque page cursors the fake hands out.

const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding (GitHub's cursors and node ids look like this).
#[must_use]
pub fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(BASE64[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Decodes [`base64_encode`]'s output.
#[must_use]
pub fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut buffer = 0u32;
    let mut bits = 0;
    for c in text.bytes().filter(|c| *c != b'=') {
        let value = u32::try_from(BASE64.iter().position(|b| *b == c)?).ok()?;
        buffer = (buffer << 6) | value;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(u8::try_from((buffer >> bits) & 0xff).ok()?);
        }
    }
    Some(out)
}

/// The cursor of the `position`-th result (1-based), as GitHub's `cursor:N` in base64.
pub(crate) fn cursor(position: usize) -> String {
    base64_encode(format!("cursor:{position}").as_bytes())
}

/// The position a cursor stands for.
pub(crate) fn decode_cursor(cursor: &str) -> Option<usize> {
    String::from_utf8(base64_decode(cursor)?)
        .ok()?
        .strip_prefix("cursor:")?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips_like_githubs_cursors() {
        assert_eq!(base64_encode(b"cursor:1"), "Y3Vyc29yOjE=");
        assert_eq!(base64_encode(b"cursor:100"), "Y3Vyc29yOjEwMA==");
        assert_eq!(decode_cursor("Y3Vyc29yOjEwMA=="), Some(100));
        assert_eq!(base64_decode(&base64_encode(b"ab")), Some(b"ab".to_vec()));
    }
}
