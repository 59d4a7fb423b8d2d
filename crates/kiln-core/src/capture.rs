//! Capped capture of a command's output: the head and the tail are kept, the middle dropped.

use std::collections::VecDeque;

/// Accumulates a byte stream keeping at most `cap` bytes: the first `cap / 2` bytes and the last
/// `cap - cap / 2` bytes. Test failures are usually reported at the end of a log and the command
/// that failed at its start, so both ends matter more than the middle.
#[derive(Debug, Clone)]
pub struct HeadTail {
    head_cap: usize,
    tail_cap: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: usize,
}

impl HeadTail {
    /// An empty capture that keeps at most `cap` bytes.
    #[must_use]
    pub fn new(cap: usize) -> Self {
        let head_cap = cap / 2;
        Self {
            head_cap,
            tail_cap: cap - head_cap,
            head: Vec::new(),
            tail: VecDeque::new(),
            total: 0,
        }
    }

    /// An empty capture that keeps the first `head_cap` and the last `tail_cap` bytes.
    #[must_use]
    pub fn with_caps(head_cap: usize, tail_cap: usize) -> Self {
        Self {
            head_cap,
            tail_cap,
            head: Vec::new(),
            tail: VecDeque::new(),
            total: 0,
        }
    }

    /// Appends a chunk.
    pub fn push(&mut self, mut chunk: &[u8]) {
        self.total += chunk.len();
        if self.head.len() < self.head_cap {
            let n = chunk.len().min(self.head_cap - self.head.len());
            self.head.extend_from_slice(&chunk[..n]);
            chunk = &chunk[n..];
        }
        if self.tail_cap == 0 || chunk.is_empty() {
            return;
        }
        // Only the last `tail_cap` bytes of a large chunk can survive, so skip the rest at once.
        if chunk.len() >= self.tail_cap {
            self.tail.clear();
            self.tail.extend(&chunk[chunk.len() - self.tail_cap..]);
            return;
        }
        let overflow = (self.tail.len() + chunk.len()).saturating_sub(self.tail_cap);
        self.tail.drain(..overflow);
        self.tail.extend(chunk);
    }

    /// Total bytes pushed, kept or not.
    #[must_use]
    pub fn total(&self) -> usize {
        self.total
    }

    /// Bytes dropped from the middle.
    #[must_use]
    pub fn omitted(&self) -> usize {
        self.total - self.head.len() - self.tail.len()
    }

    /// The kept text, decoded as lossy UTF-8, with a marker line where bytes were dropped, and
    /// whether any were.
    #[must_use]
    pub fn finish(self) -> (String, bool) {
        let omitted = self.omitted();
        let mut bytes = self.head;
        if omitted > 0 {
            // Start the marker on its own line even when the head ends mid-line.
            if bytes.last().is_some_and(|b| *b != b'\n') {
                bytes.push(b'\n');
            }
            bytes.extend_from_slice(format!("... [{omitted} bytes omitted] ...\n").as_bytes());
        }
        bytes.extend(self.tail);
        (String::from_utf8_lossy(&bytes).into_owned(), omitted > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::HeadTail;

    fn capture(cap: usize, chunks: &[&[u8]]) -> (String, bool) {
        let mut c = HeadTail::new(cap);
        for chunk in chunks {
            c.push(chunk);
        }
        c.finish()
    }

    #[test]
    fn under_the_cap_everything_is_kept() {
        assert_eq!(
            capture(10, &[b"abc", b"defg", b"hij"]),
            ("abcdefghij".to_string(), false)
        );
        assert_eq!(capture(10, &[]), (String::new(), false));
    }

    #[test]
    fn over_the_cap_head_and_tail_are_kept_with_a_marker() {
        let (text, truncated) = capture(6, &[b"abcd", b"efgh", b"ij", b"klmn"]);
        assert!(truncated);
        assert_eq!(text, "abc\n... [8 bytes omitted] ...\nlmn");
    }

    #[test]
    fn one_big_chunk_is_split_the_same_way() {
        let (text, truncated) = capture(4, &[b"0123456789"]);
        assert!(truncated);
        assert_eq!(text, "01\n... [6 bytes omitted] ...\n89");
    }

    #[test]
    fn byte_at_a_time_matches_one_chunk() {
        let data: Vec<u8> = (0..200u8).map(|i| b'a' + i % 26).collect();
        let mut one = HeadTail::new(37);
        one.push(&data);
        let mut many = HeadTail::new(37);
        for b in &data {
            many.push(std::slice::from_ref(b));
        }
        assert_eq!(one.total(), 200);
        assert_eq!(one.finish(), many.finish());
    }

    #[test]
    fn odd_cap_gives_the_extra_byte_to_the_tail() {
        let (text, _) = capture(5, &[b"abcdefghij"]);
        assert_eq!(text, "ab\n... [5 bytes omitted] ...\nhij");
    }

    #[test]
    fn zero_cap_keeps_only_the_marker() {
        assert_eq!(
            capture(0, &[b"abc"]),
            ("... [3 bytes omitted] ...\n".to_string(), true)
        );
    }

    #[test]
    fn split_utf8_is_decoded_lossily() {
        let (text, truncated) = capture(100, &["é".as_bytes()[..1].as_ref(), b"x"]);
        assert!(!truncated);
        assert_eq!(text, "\u{fffd}x");
    }
}
