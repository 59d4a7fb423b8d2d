//! Shell quoting: how typed values become words of the POSIX shell commands they are rendered
//! into. Nothing here parses shell text back.

/// Quotes `text` for a POSIX shell: as it is when it holds only characters no shell treats
/// specially, else in single quotes.
#[must_use]
pub fn quote(text: &str) -> String {
    if !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:@,+".contains(c))
    {
        return text.to_string();
    }
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// Words quoted and joined by single spaces.
#[must_use]
pub fn join<S: AsRef<str>>(words: &[S]) -> String {
    words
        .iter()
        .map(|w| quote(w.as_ref()))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    #[test]
    fn plain_words_stay_and_the_rest_is_single_quoted() {
        assert_eq!(super::quote("pytest>=7"), "'pytest>=7'");
        assert_eq!(super::quote("-e"), "-e");
        assert_eq!(super::quote(""), "''");
        assert_eq!(super::quote("it's"), "'it'\\''s'");
        assert_eq!(super::join(&["a", "b c"]), "a 'b c'");
    }
}
