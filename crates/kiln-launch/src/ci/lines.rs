//! Shell lines as CI configurations and task runners write them.

/// Shell lines, continuations (`\` at the end) joined, comments (whole lines and the ends of
/// lines) and blank lines left out.
pub(super) fn shell_lines(lines: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in lines {
        let line = without_comment(line).trim();
        if let Some(head) = line.strip_suffix('\\') {
            current.push_str(head.trim_end());
            current.push(' ');
            continue;
        }
        current.push_str(line);
        let command = std::mem::take(&mut current);
        let command = command.trim();
        if !command.is_empty() && !command.starts_with('#') {
            out.push(command.to_string());
        }
    }
    let rest = current.trim();
    if !rest.is_empty() {
        out.push(rest.to_string());
    }
    out
}

/// `line` up to its shell comment: a `#` that starts a word outside quotes (`pip install -U pip
/// # to ensure version > 20` names one package, not six; `pkg#egg=x` and `"#"` are no comments).
fn without_comment(line: &str) -> &str {
    let mut quote = None;
    let mut previous = ' ';
    let mut escaped = false;
    for (at, c) in line.char_indices() {
        if escaped {
            // `\"` inside double quotes and `\#` outside stand for themselves.
            escaped = false;
            previous = 'x';
            continue;
        }
        match (quote, c) {
            (None | Some('"'), '\\') => escaped = true,
            (None, '#') if previous.is_whitespace() => return &line[..at],
            (None, '\'' | '"') => quote = Some(c),
            (Some(open), _) if c == open => quote = None,
            _ => {}
        }
        previous = c;
    }
    line
}

#[cfg(test)]
mod tests {
    use super::shell_lines;

    #[test]
    fn comments_end_a_line_only_where_the_shell_ends_it() {
        assert_eq!(
            shell_lines(&[
                "# a whole-line comment",
                "python -m pip install -U pip # to ensure version > 20 to have cache dir",
                "pip install 'git+https://example.org/x.git#egg=x' \\",
                "  \"a # b\" # ends here",
                "",
                "echo done#not-a-comment",
                "echo \"a \\\" # b\" \\# c # d",
            ]),
            [
                "python -m pip install -U pip",
                "pip install 'git+https://example.org/x.git#egg=x' \"a # b\"",
                "echo done#not-a-comment",
                "echo \"a \\\" # b\" \\# c",
            ]
        );
    }
}
