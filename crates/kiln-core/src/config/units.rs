//! Durations and memory sizes as a config writes them (`"90s"`, `"1h30m"`, `"4g"`), and their
//! limits.

use std::time::Duration;

use toml::de::DeValue;

use super::read::{FromValue, cut};

/// The longest duration any setting takes: a week. Longer ones are typos, and timeouts are
/// added and multiplied when containers are planned, which must not overflow.
pub const MAX_DURATION: Duration = Duration::from_secs(7 * 24 * 3600);

/// The largest memory limit a container may get (1 TiB).
pub const MAX_MEMORY_BYTES: i64 = 1 << 40;

/// The smallest memory limit the Docker engine accepts (6 MiB).
pub const MIN_MEMORY_BYTES: i64 = 6 << 20;

/// Parses `"90s"`, `"30m"`, `"2h"`, `"1h30m"`, at most [`MAX_DURATION`].
///
/// # Errors
/// A message saying what form is expected, or that the duration is out of range.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || {
        format!(
            "\"{}\" is not a duration; use a number with s, m or h, such as \"90s\" or \"30m\"",
            cut(text)
        )
    };
    let too_long = || {
        format!(
            "\"{}\" is longer than the longest duration allowed, 7 days (\"168h\")",
            cut(text)
        )
    };
    let mut total = 0u64;
    let mut number = String::new();
    let mut any = false;
    for c in text.trim().chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            _ => return Err(bad()),
        };
        if number.is_empty() {
            return Err(bad());
        }
        // Digits past u64 are a duration far over the limit, not a malformed one.
        let n: u64 = number.parse().map_err(|_| too_long())?;
        total = n
            .checked_mul(unit)
            .and_then(|s| total.checked_add(s))
            .ok_or_else(too_long)?;
        number.clear();
        any = true;
    }
    if !number.is_empty() || !any || total == 0 {
        return Err(bad());
    }
    let duration = Duration::from_secs(total);
    if duration > MAX_DURATION {
        return Err(too_long());
    }
    Ok(duration)
}

/// Parses `"512m"`, `"4g"`, `"1024k"` or a plain byte count into bytes, at most 1 TiB
/// ([`MAX_MEMORY_BYTES`]).
///
/// # Errors
/// A message saying what form is expected, or that the size is out of range.
pub fn parse_size(text: &str) -> Result<i64, String> {
    let t = text.trim().to_ascii_lowercase();
    let t = t.strip_suffix('b').unwrap_or(&t);
    let (digits, shift) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 10),
        Some('m') => (&t[..t.len() - 1], 20),
        Some('g') => (&t[..t.len() - 1], 30),
        _ => (t, 0),
    };
    let bad = || {
        format!(
            "\"{}\" is not a size; use a number with k, m or g, such as \"4g\"",
            cut(text)
        )
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return Err(bad());
    }
    let bytes = digits
        .parse::<i64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .filter(|n| *n <= MAX_MEMORY_BYTES);
    match bytes {
        Some(n) if n >= MIN_MEMORY_BYTES => Ok(n),
        Some(0) => Err(bad()),
        _ => Err(format!(
            "\"{}\" is out of range: a size between 6m and 1024g",
            cut(text)
        )),
    }
}

/// A duration key: a string that [`parse_duration`] reads.
impl FromValue for Duration {
    fn from_value(value: &DeValue<'_>) -> Result<Self, String> {
        match value.as_str() {
            Some(text) => parse_duration(text),
            None => Err("expected a duration string such as \"90s\", \"30m\" or \"2h\"".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use toml::de::DeTable;

    use super::*;
    use crate::config::read::Keys;

    #[test]
    fn durations_and_sizes_parse() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("10").is_err());
        assert_eq!(parse_size("4g"), Ok(4 << 30));
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert!(parse_size("lots").is_err());
        assert_eq!(parse_duration("168h"), Ok(MAX_DURATION));
    }

    #[test]
    fn a_duration_key_is_a_string_that_parses() {
        let (root, _) = DeTable::parse_recoverable("a = \"90s\"\nb = 90\nc = \"soon\"\n");
        let root = root.into_inner();
        let mut keys = Keys::new(&root, "", 0);
        let mut read = |key: &str| keys.get(key).map(|v| Duration::from_value(v.get_ref()));
        assert_eq!(read("a"), Some(Ok(Duration::from_secs(90))));
        assert_eq!(
            read("b"),
            Some(Err(
                "expected a duration string such as \"90s\", \"30m\" or \"2h\"".into()
            ))
        );
        assert_eq!(read("c"), Some(parse_duration("soon")));
    }
}
