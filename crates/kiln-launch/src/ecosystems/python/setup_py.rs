//! What a `setup.py` declares, read from its tokens without running it: the names of its extras
//! (`extras_require`), including the common indirections: a module-level dict
//! (`extras_require=EXTRAS`), `dict(tests=[...])`, keys added by `EXTRAS['tests'] = [...]`, and
//! `{**base, 'tests': ...}`.

/// One token of Python source: what extras detection needs.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    /// A name or keyword.
    Name(String),
    /// A string literal's value (escapes are not interpreted; extras names hold none).
    Str(String),
    /// One punctuation character.
    Punct(char),
    /// A newline outside brackets: the end of a logical line.
    Newline,
    /// Anything else (numbers, operators of more than one character).
    Other,
}

fn tokenize(text: &str) -> Vec<(Token, usize)> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut depth = 0usize;
    // Column of the first token of each logical line, to tell module-level statements.
    let mut line_start = true;
    let mut column = 0usize;
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            if depth == 0 {
                out.push((Token::Newline, 0));
            }
            line_start = true;
            column = 0;
            i += 1;
            continue;
        }
        if c == '#' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c == '\\' && chars.get(i + 1) == Some(&'\n') {
            i += 2;
            continue;
        }
        if c.is_whitespace() {
            if line_start {
                column += 1;
            }
            i += 1;
            continue;
        }
        let indent = if line_start { column } else { usize::MAX };
        line_start = false;
        // String literals, with prefixes (r, b, u, f and their pairs).
        let mut j = i;
        while j < chars.len() && j - i < 2 && "rRbBuUfF".contains(chars[j]) {
            j += 1;
        }
        if j < chars.len()
            && (chars[j] == '\'' || chars[j] == '"')
            && (j == i || !chars[i].is_alphanumeric() || j > i)
        {
            let quote = chars[j];
            let triple = chars.get(j + 1) == Some(&quote) && chars.get(j + 2) == Some(&quote);
            let mut k = if triple { j + 3 } else { j + 1 };
            let mut value = String::new();
            while k < chars.len() {
                if chars[k] == '\\' {
                    if let Some(next) = chars.get(k + 1) {
                        value.push(*next);
                    }
                    k += 2;
                    continue;
                }
                if triple {
                    if chars[k] == quote
                        && chars.get(k + 1) == Some(&quote)
                        && chars.get(k + 2) == Some(&quote)
                    {
                        k += 3;
                        break;
                    }
                } else if chars[k] == quote || chars[k] == '\n' {
                    k += 1;
                    break;
                }
                value.push(chars[k]);
                k += 1;
            }
            out.push((Token::Str(value), indent));
            i = k;
            continue;
        }
        if c.is_alphabetic() || c == '_' {
            let mut k = i;
            while k < chars.len() && (chars[k].is_alphanumeric() || chars[k] == '_') {
                k += 1;
            }
            out.push((Token::Name(chars[i..k].iter().collect()), indent));
            i = k;
            continue;
        }
        if "([{".contains(c) {
            depth += 1;
        } else if ")]}".contains(c) {
            depth = depth.saturating_sub(1);
        }
        if "()[]{}:,=*".contains(c) {
            // `==`, `**` and friends are not the one-character tokens looked for.
            let next = chars.get(i + 1).copied();
            if (c == '=' && next == Some('=')) || (c == '*' && next == Some('*')) {
                out.push((Token::Other, indent));
                i += 2;
                continue;
            }
            out.push((Token::Punct(c), indent));
        } else {
            out.push((Token::Other, indent));
        }
        i += 1;
    }
    out
}

/// The names of the extras a `setup.py` declares, in order of appearance, without repeats.
#[must_use]
pub fn extras(text: &str) -> Vec<String> {
    let tokens = tokenize(text);
    let plain: Vec<&Token> = tokens.iter().map(|(t, _)| t).collect();
    let mut names = Vec::new();
    for (at, token) in plain.iter().enumerate() {
        if **token == Token::Name("extras_require".into())
            && plain.get(at + 1) == Some(&&Token::Punct('='))
        {
            expression_keys(&tokens, at + 2, &mut names, 0);
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    names.retain(|n| seen.insert(n.clone()));
    names
}

/// The keys of the dict expression starting at token `at`: a literal, a `dict(...)` call, or a
/// name bound at module level (followed to its assignment and its subscript assignments).
fn expression_keys(tokens: &[(Token, usize)], at: usize, out: &mut Vec<String>, hops: usize) {
    if hops > 4 {
        return;
    }
    match tokens.get(at).map(|(t, _)| t) {
        Some(Token::Punct('{')) => dict_literal_keys(tokens, at, out, hops),
        Some(Token::Name(name))
            if name == "dict" && tokens.get(at + 1).map(|(t, _)| t) == Some(&Token::Punct('(')) =>
        {
            dict_call_keys(tokens, at + 1, out);
        }
        Some(Token::Name(name)) => {
            let name = name.clone();
            for (i, (token, indent)) in tokens.iter().enumerate() {
                if *token != Token::Name(name.clone()) || *indent != 0 {
                    continue;
                }
                match tokens.get(i + 1).map(|(t, _)| t) {
                    // NAME = <expression>
                    Some(Token::Punct('=')) => expression_keys(tokens, i + 2, out, hops + 1),
                    // NAME['key'] = ...
                    Some(Token::Punct('[')) => {
                        if let (
                            Some(Token::Str(key)),
                            Some(Token::Punct(']')),
                            Some(Token::Punct('=')),
                        ) = (
                            tokens.get(i + 2).map(|(t, _)| t),
                            tokens.get(i + 3).map(|(t, _)| t),
                            tokens.get(i + 4).map(|(t, _)| t),
                        ) {
                            out.push(key.clone());
                        }
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

/// Keys of `{ 'k': v, **other, ... }` starting at the `{`.
fn dict_literal_keys(tokens: &[(Token, usize)], open: usize, out: &mut Vec<String>, hops: usize) {
    let mut depth = 0usize;
    let mut i = open;
    let mut expect_key = true;
    while let Some((token, _)) = tokens.get(i) {
        match token {
            Token::Punct('{' | '[' | '(') => depth += 1,
            Token::Punct('}' | ']' | ')') => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return;
                }
            }
            Token::Punct(',') if depth == 1 => expect_key = true,
            Token::Str(key) if depth == 1 && expect_key => {
                if tokens.get(i + 1).map(|(t, _)| t) == Some(&Token::Punct(':')) {
                    out.push(key.clone());
                }
                expect_key = false;
            }
            Token::Other if depth == 1 && expect_key => {
                // `**name`: the other dict's keys are keys of this one too.
                if let Some(Token::Name(_)) = tokens.get(i + 1).map(|(t, _)| t) {
                    expression_keys(tokens, i + 1, out, hops + 1);
                }
                expect_key = false;
            }
            _ if depth == 1 => expect_key = false,
            _ => {}
        }
        i += 1;
    }
}

/// Keyword names of `dict(a=..., b=...)` starting at the `(`.
fn dict_call_keys(tokens: &[(Token, usize)], open: usize, out: &mut Vec<String>) {
    let mut depth = 0usize;
    let mut i = open;
    while let Some((token, _)) = tokens.get(i) {
        match token {
            Token::Punct('{' | '[' | '(') => depth += 1,
            Token::Punct('}' | ']' | ')') => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return;
                }
            }
            Token::Name(name)
                if depth == 1 && tokens.get(i + 1).map(|(t, _)| t) == Some(&Token::Punct('=')) =>
            {
                out.push(name.clone());
            }
            _ => {}
        }
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::extras;

    #[test]
    fn literal_and_indirect_extras() {
        assert_eq!(
            extras("setup(name='x', extras_require={'tests': ['pytest'], \"docs\": [] })"),
            ["tests", "docs"]
        );
        let module_dict = r#"
import os
EXTRAS_REQUIRE = {
    "tests": ["pytest>=6", "hypothesis"],  # the test tools
    'docs': ["sphinx"],
}
EXTRAS_REQUIRE["dev"] = EXTRAS_REQUIRE["tests"] + ["tox"]

def helper():
    EXTRAS_REQUIRE = {"not": []}

setup(
    name="pkg",
    extras_require=EXTRAS_REQUIRE,
)
"#;
        assert_eq!(extras(module_dict), ["tests", "docs", "dev"]);
        let call = "extras = dict(\n    testing=['pytest'],\n    speedups=['cchardet'],\n)\nsetup(extras_require=extras)";
        assert_eq!(extras(call), ["testing", "speedups"]);
        let merged =
            "base = {'all': []}\nsetup(extras_require={**base, 'test': ['x'], 'a' + 'b': []})";
        assert_eq!(extras(merged), ["all", "test"]);
        let strings = "setup(long_description='''extras_require={\"fake\": 1}''', extras_require={r'test': []})";
        assert_eq!(extras(strings), ["test"]);
        assert!(extras("setup(name='x')").is_empty());
    }
}
