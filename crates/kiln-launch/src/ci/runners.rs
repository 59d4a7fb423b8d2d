//! The commands of a repository's task runners, read like its CI's: the recipes of a
//! Makefile's test targets (and of the targets they depend on), tox's `commands` and
//! `commands_pre`, and the `session.run`/`session.install` calls of nox sessions. Projects
//! often keep the real test command there and have CI call `make test`, `tox` or `nox`.
//!
//! Nothing is run or expanded: make variables, tox substitutions other than the usual
//! placeholders and nox arguments that are not string literals stay out (a command holding
//! `$(VAR)` is no candidate for anything that needs a literal value, as a CI expression).

use std::collections::BTreeMap;

use super::lines::shell_lines;

/// Makefile targets whose recipes are how a project tests.
const TEST_TARGETS: &[&str] = &[
    "test",
    "tests",
    "check",
    "ci",
    "test-all",
    "test-unit",
    "unit-test",
    "unittest",
];

/// The recipe lines of the Makefile `text`'s test targets (in [`TEST_TARGETS`] order), then of
/// the targets those depend on (two levels, in the order they are named), one logical line each: continuations joined, the `@`, `-` and `+` prefixes
/// taken off, `$$` as the shell sees it.
pub(super) fn makefile_commands(text: &str) -> Vec<String> {
    // target -> (prerequisites, recipe lines)
    let mut rules: BTreeMap<String, (Vec<String>, Vec<String>)> = BTreeMap::new();
    let mut current: Vec<String> = Vec::new();
    for line in text.lines() {
        if let Some(recipe) = line.strip_prefix('\t') {
            for target in &current {
                if let Some(rule) = rules.get_mut(target) {
                    rule.1.push(recipe.to_string());
                }
            }
            continue;
        }
        current.clear();
        let trimmed = line.trim_end();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with(' ') {
            continue;
        }
        // `targets: prerequisites`, not `VAR := value` or `VAR ::= value`.
        let Some((targets, rest)) = trimmed.split_once(':') else {
            continue;
        };
        if rest.starts_with('=') || rest.starts_with(":=") || targets.contains(['=', '$']) {
            continue;
        }
        let (prerequisites, inline) = match rest.split_once(';') {
            Some((p, r)) => (p, Some(r.trim())),
            None => (rest, None),
        };
        let prerequisites: Vec<String> = prerequisites
            .split_whitespace()
            .filter(|p| !p.contains('$'))
            .map(str::to_string)
            .collect();
        for target in targets.split_whitespace() {
            let rule = rules.entry(target.to_string()).or_default();
            rule.0.extend(prerequisites.iter().cloned());
            if let Some(inline) = inline.filter(|r| !r.is_empty()) {
                rule.1.push(inline.to_string());
            }
            current.push(target.to_string());
        }
    }
    let mut wanted: Vec<String> = Vec::new();
    let mut level: Vec<String> = TEST_TARGETS
        .iter()
        .filter(|t| rules.contains_key(**t))
        .map(|t| (*t).to_string())
        .collect();
    for _ in 0..3 {
        let mut next = Vec::new();
        for target in level {
            if wanted.contains(&target) {
                continue;
            }
            if let Some((prerequisites, _)) = rules.get(&target) {
                next.extend(
                    prerequisites
                        .iter()
                        .filter(|p| rules.contains_key(*p))
                        .cloned(),
                );
            }
            wanted.push(target);
        }
        level = next;
    }
    let mut out = Vec::new();
    for target in &wanted {
        let lines: Vec<&str> = rules[target].1.iter().map(String::as_str).collect();
        for command in shell_lines(&lines) {
            let command = command.trim_start_matches(['@', '-', '+', ' ']);
            if !command.is_empty() {
                out.push(command.replace("$$", "$"));
            }
        }
    }
    out
}

/// The `commands` and `commands_pre` of every `[testenv]` section of the tox.ini `text`, one
/// command a line, with `{posargs}` dropped (or its default kept), `{envpython}` as `python`,
/// `{toxinidir}` as `.` and tox's `-` (ignore the exit code) taken off.
pub(super) fn tox_commands(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_testenv = false;
    let mut in_commands = false;
    let mut lines: Vec<String> = Vec::new();
    let flush = |lines: &mut Vec<String>, out: &mut Vec<String>| {
        let raw: Vec<&str> = lines.iter().map(String::as_str).collect();
        for command in shell_lines(&raw) {
            let command = tox_substitute(command.trim_start_matches(['-', ' ']));
            if !command.is_empty() {
                out.push(command);
            }
        }
        lines.clear();
    };
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            flush(&mut lines, &mut out);
            in_commands = false;
            let name = trimmed.trim_matches(['[', ']']).trim();
            in_testenv = name == "testenv" || name.starts_with("testenv:");
            continue;
        }
        if !in_testenv || trimmed.starts_with('#') || trimmed.starts_with(';') {
            continue;
        }
        let continued = line.starts_with([' ', '\t']);
        if continued && in_commands {
            lines.push(trimmed.to_string());
            continue;
        }
        flush(&mut lines, &mut out);
        in_commands = false;
        if let Some((key, value)) = trimmed.split_once('=')
            && matches!(key.trim(), "commands" | "commands_pre")
        {
            in_commands = true;
            if !value.trim().is_empty() {
                lines.push(value.trim().to_string());
            }
        }
    }
    flush(&mut lines, &mut out);
    out
}

/// A tox command with the usual substitutions made (see [`tox_commands`]).
fn tox_substitute(command: &str) -> String {
    let mut out = String::new();
    let mut rest = command;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let Some(end) = rest[start..].find('}') else {
            out.push_str(&rest[start..]);
            return out.trim().to_string();
        };
        let inner = &rest[start + 1..start + end];
        match inner.split_once(':') {
            _ if inner == "posargs" => {}
            Some(("posargs", default)) => out.push_str(default),
            _ if inner == "envpython" => out.push_str("python"),
            _ if inner == "toxinidir" => out.push('.'),
            _ => out.push_str(&rest[start..=start + end]),
        }
        rest = &rest[start + end + 1..];
    }
    out.push_str(rest);
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The `session.run(...)` and `session.install(...)` calls of the noxfile `text` as commands
/// (`pytest -x tests`, `pip install pytest mock`): their string-literal positional arguments,
/// in order. A call with any other positional argument (`*session.posargs`, a variable) gives
/// its literals up to that argument.
pub(super) fn nox_commands(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (call, prefix) in [("session.run(", ""), ("session.install(", "pip install ")] {
        let mut rest = text;
        while let Some(at) = rest.find(call) {
            rest = &rest[at + call.len()..];
            let Some(args) = call_arguments(rest) else {
                break;
            };
            let mut words = Vec::new();
            for arg in &args {
                match string_literal(arg) {
                    Some(word) => words.push(word),
                    None if arg.contains('=') && !arg.starts_with('*') => {}
                    None => break,
                }
            }
            if !words.is_empty() {
                out.push(format!("{prefix}{}", words.join(" ")));
            }
        }
    }
    out
}

/// The top-level arguments of a call whose text starts after its `(`, split at commas outside
/// brackets and strings; `None` when the call is not closed.
fn call_arguments(text: &str) -> Option<Vec<String>> {
    let mut args = Vec::new();
    let mut current = String::new();
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in text.chars() {
        if let Some(q) = quote {
            current.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '"' | '\'' => {
                quote = Some(c);
                current.push(c);
            }
            '(' | '[' | '{' => {
                depth += 1;
                current.push(c);
            }
            ')' if depth == 0 => {
                let last = current.trim();
                if !last.is_empty() {
                    args.push(last.to_string());
                }
                return Some(args);
            }
            ')' | ']' | '}' => {
                depth = depth.saturating_sub(1);
                current.push(c);
            }
            ',' if depth == 0 => args.push(std::mem::take(&mut current).trim().to_string()),
            '#' if depth == 0 => {}
            _ => current.push(c),
        }
    }
    None
}

/// The value of a plain Python string literal (`"x"`, `'x'`; no prefix, no escapes).
fn string_literal(arg: &str) -> Option<String> {
    let arg = arg.trim();
    for quote in ['"', '\''] {
        if let Some(inner) = arg.strip_prefix(quote).and_then(|a| a.strip_suffix(quote))
            && !inner.contains([quote, '\\'])
        {
            return Some(inner.to_string());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_makefiles_test_targets_and_their_prerequisites_give_their_recipes() {
        let makefile = "CARGO ?= cargo\nFEATURES := full\n\n.PHONY: test lint\n\
            test: unit doc\n\t@echo testing\n\nunit:\n\t-cargo test --workspace \\\n\t\t--features full\n\
            doc: ; cargo test --doc\n\nlint:\n\tcargo clippy\n\nrelease:\n\tcargo publish\n\
            check:\n\tfor f in $$(ls); do echo $$f; done\n";
        assert_eq!(
            makefile_commands(makefile),
            [
                "echo testing",
                "for f in $(ls); do echo $f; done",
                "cargo test --workspace --features full",
                "cargo test --doc",
            ]
        );
        assert!(makefile_commands("all:\n\tmake build\n").is_empty());
    }

    #[test]
    fn tox_commands_come_with_the_usual_substitutions() {
        let tox = "[tox]\nenvlist = py39\n\n[testenv]\ndeps = pytest\n\
            commands_pre = pip install -e .[test]\n\
            commands =\n    {envpython} -m pytest {posargs:tests} -p no:cacheprovider\n    - coverage report\n\
            setenv = CI=1\n\n[testenv:docs]\ncommands = sphinx-build docs {toxinidir}/build {posargs}\n\n\
            [flake8]\ncommands = not a test env\n";
        assert_eq!(
            tox_commands(tox),
            [
                "pip install -e .[test]",
                "python -m pytest tests -p no:cacheprovider",
                "coverage report",
                "sphinx-build docs ./build",
            ]
        );
    }

    #[test]
    fn nox_sessions_give_their_run_and_install_calls() {
        let noxfile = "import nox\n\n@nox.session(python=[\"3.9\"])\ndef tests(session):\n    \
            session.install(\"pytest\", 'hypothesis>=6', \"-e\", \".\")\n    \
            session.run(\n        \"pytest\",\n        \"-x\",  # stop early\n        *session.posargs,\n        \"tests\",\n        env={\"CI\": \"1\"},\n    )\n    \
            session.run(\"python\", \"-m\", \"mypy\", external=True)\n    session.run(cmd)\n";
        assert_eq!(
            nox_commands(noxfile),
            [
                "pytest -x",
                "python -m mypy",
                "pip install pytest hypothesis>=6 -e .",
            ]
        );
    }
}
