//! Line-at-a-time parsing, shared by [`crate::parse`] (whole text) and [`crate::parse_reader`]
//! (streamed), so both give the same result for the same bytes.
//!
//! A log is split at `\n`, and one `\r` before it is dropped (`\r\n` endings). Lines longer than
//! [`MAX_LINE_BYTES`] are cut there: no result line is that long, and a log that is one giant line
//! (a minified report, binary junk) must not make the streamed path hold it whole.

use std::io::{self, BufRead};

use crate::parsed::ParsedLog;

/// Longest line a parser sees; the rest of a longer line is dropped.
pub(crate) const MAX_LINE_BYTES: usize = 1 << 20;

/// Bytes kept of a long line while streaming: enough to cut it at the same character boundary as
/// the whole-text path does (a UTF-8 character is at most 4 bytes).
const KEEP_BYTES: usize = MAX_LINE_BYTES + 4;

/// A parser that reads a log one line at a time and keeps only what it needs for the result
/// (statuses seen so far, counters), never the lines themselves.
pub(crate) trait LineParser {
    /// Reads one line, without its line ending.
    fn line(&mut self, line: &str);
    /// Builds the result once every line was read.
    fn finish(self: Box<Self>) -> ParsedLog;
}

/// Cuts `line` to at most [`MAX_LINE_BYTES`], at a character boundary.
fn cap(line: &str) -> &str {
    if line.len() <= MAX_LINE_BYTES {
        return line;
    }
    let mut end = MAX_LINE_BYTES;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    &line[..end]
}

/// Feeds every line of `text` to `parser`.
pub(crate) fn feed_str(parser: &mut dyn LineParser, text: &str) {
    let mut rest = text;
    while !rest.is_empty() {
        let (line, next) = match rest.find('\n') {
            Some(at) => (&rest[..at], &rest[at + 1..]),
            None => (rest, ""),
        };
        parser.line(cap(line.strip_suffix('\r').unwrap_or(line)));
        rest = next;
    }
}

/// Feeds every line of `reader` to `parser`, holding at most one (capped) line in memory.
/// Invalid UTF-8 is replaced with U+FFFD, line by line.
pub(crate) fn feed_reader(parser: &mut dyn LineParser, mut reader: impl BufRead) -> io::Result<()> {
    let mut line: Vec<u8> = Vec::new();
    let mut pending = false;
    loop {
        let buffer = match reader.fill_buf() {
            Ok(buffer) => buffer,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(err),
        };
        if buffer.is_empty() {
            break;
        }
        let newline = buffer.iter().position(|byte| *byte == b'\n');
        let chunk = newline.map_or(buffer, |at| &buffer[..at]);
        let room = KEEP_BYTES.saturating_sub(line.len());
        line.extend_from_slice(&chunk[..chunk.len().min(room)]);
        let used = newline.map_or(buffer.len(), |at| at + 1);
        reader.consume(used);
        pending = true;
        if newline.is_some() {
            emit(parser, &line);
            line.clear();
            pending = false;
        }
    }
    if pending {
        emit(parser, &line);
    }
    Ok(())
}

fn emit(parser: &mut dyn LineParser, bytes: &[u8]) {
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    let text = String::from_utf8_lossy(bytes);
    parser.line(cap(&text));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records the lines it is fed, to compare the two paths.
    #[derive(Default)]
    struct Lines(Vec<String>);

    impl LineParser for Lines {
        fn line(&mut self, line: &str) {
            self.0.push(line.to_owned());
        }
        fn finish(self: Box<Self>) -> ParsedLog {
            ParsedLog::default()
        }
    }

    fn both(text: &str) -> (Vec<String>, Vec<String>) {
        let mut whole = Lines::default();
        feed_str(&mut whole, text);
        let mut streamed = Lines::default();
        // A tiny buffer makes lines span many reads.
        let reader = io::BufReader::with_capacity(3, text.as_bytes());
        feed_reader(&mut streamed, reader).expect("reading from memory");
        (whole.0, streamed.0)
    }

    #[test]
    fn both_paths_split_alike() {
        let long = format!(
            "{}é{}\r\nnext",
            "x".repeat(MAX_LINE_BYTES - 1),
            "y".repeat(9)
        );
        for text in [
            "",
            "\n",
            "a",
            "a\n",
            "a\r\nb\r\n\r\n",
            "a\rb\n",
            "é\n\nü",
            long.as_str(),
        ] {
            let (whole, streamed) = both(text);
            assert_eq!(whole, streamed, "{:?}", &text[..text.len().min(40)]);
        }
        let (whole, _) = both(&long);
        assert_eq!(whole[0].len(), MAX_LINE_BYTES - 1);
        assert_eq!(whole[1], "next");
    }
}
