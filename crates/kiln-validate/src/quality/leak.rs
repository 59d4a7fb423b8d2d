//! Whether the problem statement or the hints already hold the fix: the gold patch's new code
//! found in the code the text shows (its fenced blocks and inline code spans), as SWE-Bench+
//! found for a third of the "solved" SWE-bench tasks.
//!
//! Two kinds of evidence, each a match on its own:
//! - **A line of the fix.** A line the gold patch adds outside documentation files (`.md`,
//!   `.rst`, `.adoc`, as kiln-core's `judge` knows them), whitespace collapsed, that is code
//!   (at least [`MIN_LINE_CHARS`] characters, a letter or digit in it, not a comment, not a line
//!   the patch also removes, which is moved or re-indented code rather than new code), equal to
//!   a line of the text's code, or inside one when it has at least [`LONG_LINE_CHARS`]
//!   characters (a trailing comment, a wrapped prefix). The text's lines are read without a
//!   leading diff `+` or an interpreter prompt (`>>> `, `... `).
//! - **A definition of a name the fix introduces.** A name in the added code lines that no
//!   removed or unchanged line of the patch holds, of at least [`MIN_NAME_CHARS`] characters and
//!   not a plain lower-case word (it has `_`, a digit or a capital), that the text's code
//!   defines (`def name`, `fn name`, `class Name`, `function name`, `const NAME`, ...). A text
//!   that only names the new function in a span asks for it; one that defines it shows its
//!   code.

use std::collections::BTreeSet;

use super::code::{DEFINERS, definitions, names};
use super::patch::{Change, read_patch};

/// Characters (whitespace collapsed) an added line needs to count: shorter ones (`}`,
/// `return None`, `else:`) appear in any text about code.
pub const MIN_LINE_CHARS: usize = 12;

/// Characters an added line needs to match inside a longer line of the text, not only equal
/// to one.
pub const LONG_LINE_CHARS: usize = 30;

/// Characters a name needs to count as one the fix introduces.
pub const MIN_NAME_CHARS: usize = 6;

/// Starts of a line that is only a comment (or a docstring's delimiter). `#` also takes C's
/// preprocessor lines and Rust's attributes, which rarely hold a fix on their own.
const COMMENT_STARTS: &[&str] = &["#", "//", "/*", "*", "<!--", "--", "\"\"\"", "'''"];

/// What [`solution_leak`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SolutionLeak {
    /// Whether the text shows any of the fix.
    pub leak: bool,
    /// The evidence, in the patch's order: each added line found (whitespace collapsed), then
    /// each definition found, as the text writes it (`def parse_strict`).
    pub matches: Vec<String>,
}

/// Whether `texts` (the problem statement, the hints) show the code that `patch` (the gold
/// patch) adds, and where: see the module's documentation for the rules.
#[must_use]
pub fn solution_leak(patch: &str, texts: &[&str]) -> SolutionLeak {
    let code: Vec<String> = texts.iter().flat_map(|t| code_of(t)).collect();
    if code.is_empty() {
        return SolutionLeak::default();
    }
    let new_code = NewCode::of(patch);
    let mut matches: Vec<String> = Vec::new();
    for line in &new_code.lines {
        let found = code
            .iter()
            .any(|c| c == line || (line.chars().count() >= LONG_LINE_CHARS && c.contains(line)));
        if found && !matches.contains(line) {
            matches.push(line.clone());
        }
    }
    for line in &code {
        for (definer, name) in definitions(line) {
            let shown = format!("{definer} {name}");
            if new_code.names.contains(name) && !matches.contains(&shown) {
                matches.push(shown);
            }
        }
    }
    SolutionLeak {
        leak: !matches.is_empty(),
        matches,
    }
}

/// What the gold patch adds: its code lines, and the names it introduces.
struct NewCode {
    /// Added code lines, whitespace collapsed, in order and once each.
    lines: Vec<String>,
    /// Names of the added code that no removed or unchanged line holds.
    names: BTreeSet<String>,
}

impl NewCode {
    fn of(patch: &str) -> Self {
        let hunks: Vec<_> = read_patch(patch)
            .into_iter()
            .filter(|f| !kiln_core::judge::is_documentation(&f.path))
            .flat_map(|f| f.hunks)
            .collect();
        let removed: BTreeSet<String> = hunks
            .iter()
            .flat_map(|h| h.of(Change::Removed))
            .map(|l| collapse(l))
            .collect();
        let old_names: BTreeSet<String> = hunks
            .iter()
            .flat_map(|h| h.lines.iter().filter(|(c, _)| *c != Change::Added))
            .flat_map(|(_, l)| names(l))
            .collect();
        let mut lines: Vec<String> = Vec::new();
        let mut new_names = BTreeSet::new();
        for line in hunks
            .iter()
            .flat_map(|h| h.of(Change::Added))
            .map(|l| collapse(l))
        {
            if is_comment(&line) || !line.chars().any(char::is_alphanumeric) {
                continue;
            }
            new_names.extend(
                names(&line)
                    .into_iter()
                    .filter(|n| is_distinctive(n) && !old_names.contains(n)),
            );
            if line.chars().count() >= MIN_LINE_CHARS
                && !removed.contains(&line)
                && !lines.contains(&line)
            {
                lines.push(line);
            }
        }
        Self {
            lines,
            names: new_names,
        }
    }
}

/// `line` with its whitespace trimmed and every run of it made one space.
fn collapse(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn is_comment(line: &str) -> bool {
    COMMENT_STARTS.iter().any(|start| line.starts_with(start))
}

/// A name specific enough to be the fix's own: long enough, and not a plain lower-case word.
fn is_distinctive(name: &str) -> bool {
    name.chars().count() >= MIN_NAME_CHARS
        && name
            .chars()
            .any(|c| c == '_' || c.is_ascii_digit() || c.is_uppercase())
        && !DEFINERS.contains(&name)
}

/// The code a Markdown text shows, a line per element, whitespace collapsed: the lines of its
/// fenced blocks (a leading diff `+` and interpreter prompts taken off) and its inline code
/// spans. Indented blocks are not read: in an issue, indentation is as often prose.
fn code_of(text: &str) -> Vec<String> {
    let mut code = Vec::new();
    let mut prose = String::new();
    // The fence that opened the block the line is in: its character and length.
    let mut fence: Option<(char, usize)> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        let marker = trimmed.chars().next().filter(|c| *c == '`' || *c == '~');
        let run = marker.map_or(0, |m| trimmed.chars().take_while(|c| *c == m).count());
        match (fence, marker) {
            (None, Some(m)) if run >= 3 => fence = Some((m, run)),
            (Some((m, n)), Some(c))
                if c == m && run >= n && trimmed.trim_start_matches(m).trim().is_empty() =>
            {
                fence = None;
            }
            (Some(_), _) => {
                let line = trimmed
                    .strip_prefix(">>> ")
                    .or_else(|| trimmed.strip_prefix("... "))
                    .or_else(|| trimmed.strip_prefix('+').filter(|l| !l.starts_with('+')))
                    .unwrap_or(trimmed);
                code.push(collapse(line));
            }
            (None, _) => {
                prose.push_str(line);
                prose.push('\n');
            }
        }
    }
    code.extend(inline_spans(&prose));
    code.retain(|l| !l.is_empty());
    code
}

/// The inline code spans of Markdown prose: a run of backticks up to the next run of the same
/// length, the content whitespace collapsed.
fn inline_spans(prose: &str) -> Vec<String> {
    let mut spans = Vec::new();
    let mut rest = prose;
    while let Some(start) = rest.find('`') {
        let after = &rest[start..];
        let width = after.chars().take_while(|c| *c == '`').count();
        let body = &after[width..];
        let mut search = 0;
        let mut close = None;
        while let Some(found) = body[search..].find('`') {
            let at = search + found;
            let run = body[at..].chars().take_while(|c| *c == '`').count();
            if run == width {
                close = Some(at);
                break;
            }
            search = at + run;
        }
        match close {
            Some(at) => {
                spans.push(collapse(&body[..at]));
                rest = &body[at + width..];
            }
            None => rest = body,
        }
    }
    spans
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A gold patch that moves a check into a new helper.
    const PATCH: &str = "diff --git a/src/calc/ops.py b/src/calc/ops.py\n--- a/src/calc/ops.py\n+++ b/src/calc/ops.py\n\
        @@ -1,6 +1,10 @@ import math\n \n+def _check_divisor(divisor):\n+    # A zero divisor is the caller's error.\n\
        +    if divisor == 0:\n+        raise ZeroDivisionError(\"divisor must not be zero\")\n+\n \n def divide(a, b):\n\
        -    return a / b\n+    _check_divisor(b)\n+    return a / b\n";

    fn leak(texts: &[&str]) -> SolutionLeak {
        solution_leak(PATCH, texts)
    }

    #[test]
    fn a_line_of_the_fix_in_a_code_block_or_span_is_a_leak() {
        let block = "divide(1, 0) returns inf.\n\nThis fixes it:\n\n```python\nif divisor == 0:\n    raise ZeroDivisionError(\"divisor must not be zero\")\n```\n";
        let found = leak(&[block]);
        assert!(found.leak);
        assert_eq!(
            found.matches,
            [
                "if divisor == 0:",
                "raise ZeroDivisionError(\"divisor must not be zero\")"
            ]
        );
        // `if divisor == 0:` is 16 characters: a line of its own.
        let found = leak(&["Add `if divisor == 0:` before the division."]);
        assert_eq!(found.matches, ["if divisor == 0:"]);
        // A diff in the hints, its lines marked with `+` and wrapped in a longer line.
        let hints =
            "~~~diff\n+        raise ZeroDivisionError(\"divisor must not be zero\")  # here\n~~~";
        let found = leak(&["divide(1, 0) returns inf", hints]);
        assert!(found.leak, "{found:?}");
        // A definition of the helper the fix introduces, with another body.
        let found = leak(&["```\n>>> def _check_divisor(d):\n...     assert d\n```"]);
        assert_eq!(found.matches, ["def _check_divisor"]);
    }

    #[test]
    fn text_without_the_fix_in_its_code_is_no_leak() {
        for text in [
            // The bug, with the old line (which the fix keeps): moved code is not new code.
            "```python\n>>> divide(1, 0)\ninf\n```\n`return a / b` should raise.",
            // The fix's line in prose, not in code.
            "It should say if divisor == 0: raise ZeroDivisionError(\"divisor must not be zero\").",
            // The new helper named, not defined; short lines and comments of the fix.
            "Please add `_check_divisor`, with `# A zero divisor is the caller's error.` and `return a / b`.",
            // An unclosed span and an empty statement.
            "A stray ` backtick: if divisor == 0:",
            "",
        ] {
            let found = leak(&[text]);
            assert_eq!(found, SolutionLeak::default(), "{text}");
        }
        // A line of the changelog is no line of the fix.
        let changelog = "diff --git a/CHANGELOG.md b/CHANGELOG.md\n--- a/CHANGELOG.md\n+++ b/CHANGELOG.md\n\
                         @@ -1 +1,2 @@\n # Changes\n+divide(1, 0) raises ZeroDivisionError\n";
        let text = "`divide(1, 0) raises ZeroDivisionError`";
        assert!(!solution_leak(changelog, &[text]).leak);
        assert!(solution_leak(&changelog.replace("CHANGELOG.md", "ops.py"), &[text]).leak);
    }

    #[test]
    fn markdown_code_is_read_from_fences_and_spans() {
        let text = "Run ``a `b` c`` and `x`.\n\n````\n```\ninner\n```\n````\nafter `y\nz`";
        assert_eq!(
            code_of(text),
            ["```", "inner", "```", "a `b` c", "x", "y z"]
        );
        assert!(is_distinctive("Tokenizer") && !is_distinctive("result"));
    }
}
