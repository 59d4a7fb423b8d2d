//! Lines of code as tokens: the names they hold and the names they define, across the
//! languages kiln builds, without parsing any of them.

/// Words that define the name after them.
pub(crate) const DEFINERS: &[&str] = &[
    "def",
    "class",
    "fn",
    "func",
    "function",
    "struct",
    "enum",
    "trait",
    "interface",
    "type",
    "const",
    "let",
    "var",
    "static",
];

/// The words of [`DEFINERS`] that open a function or a class: the scopes a change is in.
pub(crate) const SCOPE_DEFINERS: &[&str] = &["def", "fn", "func", "function", "class"];

/// Whether `c` can be part of a name.
pub(crate) fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The identifiers of a line of code, in order.
pub(crate) fn names(line: &str) -> Vec<String> {
    tokens(line)
        .into_iter()
        .filter(|t| t.starts_with(|c: char| c.is_alphabetic() || c == '_'))
        .map(str::to_string)
        .collect()
}

/// A line of code as identifiers and single punctuation characters, whitespace dropped.
pub(crate) fn tokens(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(c) = rest.chars().next() {
        let end = if is_name_char(c) {
            rest.find(|c: char| !is_name_char(c)).unwrap_or(rest.len())
        } else {
            c.len_utf8()
        };
        if !c.is_whitespace() {
            out.push(&rest[..end]);
        }
        rest = &rest[end..];
    }
    out
}

/// The names a line of code defines, each with the word that defines it (`def name`).
pub(crate) fn definitions(line: &str) -> Vec<(&str, &str)> {
    let tokens = tokens(line);
    tokens
        .windows(2)
        .filter(|pair| DEFINERS.contains(&pair[0]) && pair[1].starts_with(is_name_char))
        .map(|pair| (pair[0], pair[1]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definitions_are_a_definer_then_a_name() {
        assert_eq!(
            definitions("pub fn parse_strict(x: &str) -> Option<T>"),
            [("fn", "parse_strict")]
        );
        assert_eq!(definitions("async def run(self):"), [("def", "run")]);
        assert!(definitions("fn(x)").is_empty());
        assert_eq!(names("self.x_1 = ünï(2)"), ["self", "x_1", "ünï"]);
    }
}
