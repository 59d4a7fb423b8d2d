//! What the agent may not do: anything that would let an environment pass validation without
//! running the instance's tests honestly. A refused action is not run; the agent is told why.
//!
//! The checks read the command text, so they are a guard against an agent taking a shortcut,
//! not a sandbox: validation itself never trusts the container (exit codes come from the
//! engine, the test patch is applied fresh, parser scripts run in a container of their own).

/// Lines that switch tests off in the common frameworks' configs and sources.
const DISABLING: &[&str] = &[
    "collect_ignore",
    "--deselect",
    "pytest.mark.skip",
    "pytestmark",
    "unittest.skip",
    "testPathIgnorePatterns",
    "modulePathIgnorePatterns",
    "it.skip(",
    "describe.skip(",
    "test.skip(",
    "xit(",
    "xdescribe(",
    "#[ignore]",
    "@Ignore",
    "@Disabled",
    "t.Skip(",
];

/// Words of a shell command that write, move or delete files.
const WRITES: &[&str] = &[
    "rm ",
    "mv ",
    "cp ",
    "sed -i",
    "perl -i",
    ">",
    "tee ",
    "truncate",
    "dd ",
    "ln ",
    "chmod ",
    "patch ",
    "git checkout",
    "git restore",
    "git rm",
    "git stash",
    "git apply",
    "git reset",
    "git mv",
    "unlink",
];

/// Endings and flags that make a test command succeed whatever the tests do, or run none.
const MASKING: &[(&str, &str)] = &[
    ("|| true", "`|| true` hides the tests' exit code"),
    ("|| :", "`|| :` hides the tests' exit code"),
    ("|| exit 0", "`|| exit 0` hides the tests' exit code"),
    ("exit 0", "`exit 0` replaces the tests' exit code"),
    ("set +e", "`set +e` hides failing commands"),
    (
        "--collect-only",
        "`--collect-only` collects tests without running them",
    ),
    ("--co ", "`--co` collects tests without running them"),
    (
        "--listTests",
        "`--listTests` lists tests without running them",
    ),
    (
        "--list-tests",
        "`--list-tests` lists tests without running them",
    ),
    ("--no-run", "`--no-run` compiles tests without running them"),
];

/// Why `command` is refused, or `None`: it may not write to a file the test patch touches, nor
/// write lines that switch tests off.
#[must_use]
pub(crate) fn check_command(command: &str, test_files: &[String]) -> Option<String> {
    let writes = WRITES.iter().any(|w| command.contains(w)) && !only_harmless_redirects(command);
    if !writes {
        return None;
    }
    if let Some(file) = test_files.iter().find(|f| mentions(command, f)) {
        return Some(format!(
            "refused: the command would change `{file}`, a file the instance's test patch \
             touches; the tests must run as the patch leaves them"
        ));
    }
    DISABLING
        .iter()
        .find(|marker| command.contains(*marker))
        .map(|marker| {
            format!(
                "refused: the command writes `{marker}`, which switches tests off; an \
                 environment must run the tests, not skip them"
            )
        })
}

/// Why writing `content` to `path` is refused, or `None`.
#[must_use]
pub(crate) fn check_write(path: &str, content: &str, test_files: &[String]) -> Option<String> {
    let relative = path
        .trim_start_matches(kiln_core::runtime::WORKDIR)
        .trim_start_matches('/');
    if let Some(file) = test_files.iter().find(|f| f.as_str() == relative) {
        return Some(format!(
            "refused: `{file}` is a file the instance's test patch touches; the tests must run \
             as the patch leaves them"
        ));
    }
    if let Some(marker) = DISABLING.iter().find(|m| content.contains(*m)) {
        return Some(format!(
            "refused: the file would hold `{marker}`, which switches tests off; an environment \
             must run the tests, not skip them"
        ));
    }
    MASKING
        .iter()
        .take(3)
        .find(|(text, _)| content.contains(text))
        .map(|(_, why)| format!("refused: {why}"))
}

/// Why `command` cannot be the test command, or `None`.
#[must_use]
pub(crate) fn check_test_command(command: &str) -> Option<String> {
    let flat = format!(
        "{} ",
        command.split_whitespace().collect::<Vec<_>>().join(" ")
    );
    if let Some((_, why)) = MASKING.iter().find(|(text, _)| flat.contains(text)) {
        return Some(format!("refused as the test command: {why}"));
    }
    if flat.trim_end().ends_with("; true") || flat.trim_end().ends_with("&& true") {
        return Some(
            "refused as the test command: a trailing `true` hides the tests' exit code".into(),
        );
    }
    DISABLING
        .iter()
        .find(|marker| flat.contains(*marker))
        .map(|marker| format!("refused as the test command: `{marker}` switches tests off"))
}

/// Commands whose exit status says nothing of the tests: as the last command of a test
/// command (or the last of its last pipeline), they replace the runner's status with their own.
const NEUTRAL: &[&str] = &[
    "true", ":", "false", "echo", "printf", "exit", "return", "cat", "tee", "sleep", "wait",
    "test", "[", "[[", "set", "export", "unset", "cd", "pwd", "rm", "touch", "mv", "cp", "ls",
    "wc", "head", "tail", "sort", "uniq", "grep", "egrep", "fgrep", "sed", "awk", "cut", "tr",
    "xargs", "wait", "kill", "trap", "eval",
];

/// Why the exit status of `command` would not be its test runner's own, or `None`. The status
/// of a shell command is that of the last pipeline it runs, and of a pipeline that of its last
/// command (unless `pipefail` is set before it): so the last command must be the runner, not a
/// command after it in a `;`, `&&`, `||` or newline list, nor a filter it pipes into. Groups,
/// subshells and `sh -c`/`bash -c` scripts are read the same way, inside.
#[must_use]
pub(crate) fn masked_status(command: &str) -> Option<String> {
    let (last, pipefail) = last_pipeline(command)?;
    let stages = split_top_level(&last, &["|"]);
    let status_stage = if pipefail {
        stages.first()?
    } else {
        stages.last()?
    };
    let (name, inner) = status_command(status_stage)?;
    if let Some(inner) = inner {
        return masked_status(&inner);
    }
    if NEUTRAL.contains(&name.as_str()) {
        let shown = status_stage.trim();
        return Some(format!(
            "refused as the test command: its exit status would be `{}`'s, not the test \
             runner's; end the command with the runner (kiln reads the runner's own status)",
            shorten(shown, 60)
        ));
    }
    None
}

/// The last pipeline of a shell list, and whether `set -o pipefail` (or `set -eo pipefail`)
/// ran at the top level before it.
fn last_pipeline(script: &str) -> Option<(String, bool)> {
    let parts = split_top_level(script, &[";", "\n", "&&", "||", "&"]);
    let parts: Vec<String> = parts
        .into_iter()
        .filter(|p| {
            let t = p.trim();
            !t.is_empty() && !t.starts_with('#')
        })
        .collect();
    let last = parts.last()?.clone();
    let pipefail = parts[..parts.len() - 1].iter().any(|p| {
        let words: Vec<&str> = p.split_whitespace().collect();
        words.first() == Some(&"set") && words.contains(&"pipefail")
    });
    Some((last, pipefail))
}

/// `script` cut at the operators `ops` that stand at its top level: outside quotes,
/// parentheses, braces, `$(...)` and backticks. Longer operators are tried first, so `||` is
/// never read as two pipes.
fn split_top_level(script: &str, ops: &[&str]) -> Vec<String> {
    let mut ops: Vec<&str> = ops.to_vec();
    ops.sort_by_key(|op| std::cmp::Reverse(op.len()));
    let chars: Vec<char> = script.chars().collect();
    let mut parts = Vec::new();
    let mut current = String::new();
    let (mut depth, mut braces) = (0usize, 0usize);
    let (mut single, mut double, mut backtick) = (false, false, false);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if single {
            single = c != '\'';
            current.push(c);
            i += 1;
            continue;
        }
        if c == '\\' {
            current.push(c);
            if let Some(&next) = chars.get(i + 1) {
                current.push(next);
            }
            i += 2;
            continue;
        }
        if double {
            double = c != '"';
            current.push(c);
            i += 1;
            continue;
        }
        if backtick {
            backtick = c != '`';
            current.push(c);
            i += 1;
            continue;
        }
        match c {
            '\'' => single = true,
            '"' => double = true,
            '`' => backtick = true,
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            '{' if current.trim().is_empty() || current.ends_with(char::is_whitespace) => {
                braces += 1;
            }
            '}' if braces > 0 => braces -= 1,
            _ => {}
        }
        if depth == 0 && braces == 0 && !single && !double && !backtick {
            let rest: String = chars[i..].iter().take(2).collect();
            // A `&` of a redirection (`2>&1`, `&>`) is no operator.
            let redirect = c == '&' && (current.ends_with('>') || chars.get(i + 1) == Some(&'>'));
            let pipe_redirect = c == '|' && current.ends_with('>');
            if let Some(op) = ops.iter().find(|op| rest.starts_with(**op))
                && !redirect
                && !pipe_redirect
            {
                parts.push(std::mem::take(&mut current));
                i += op.chars().count();
                continue;
            }
        }
        current.push(c);
        i += 1;
    }
    parts.push(current);
    parts
}

/// The command whose status a pipeline stage gives: its name (assignments, `exec`, `time`,
/// `command`, `env` and `timeout N` before it skipped), or the script inside a subshell, a
/// group or an `sh -c`/`bash -c` call.
fn status_command(stage: &str) -> Option<(String, Option<String>)> {
    let stage = stage.trim();
    if let Some(inner) = stage.strip_prefix('(') {
        let end = inner.rfind(')')?;
        return Some((String::new(), Some(inner[..end].to_string())));
    }
    if let Some(inner) = stage.strip_prefix('{') {
        let end = inner.rfind('}')?;
        return Some((String::new(), Some(inner[..end].to_string())));
    }
    let words = split_words(stage);
    let mut rest = words.as_slice();
    loop {
        match rest {
            [first, tail @ ..]
                if first.contains('=')
                    && !first.starts_with('=')
                    && first.split('=').next().is_some_and(|n| {
                        n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    }) =>
            {
                rest = tail;
            }
            [first, tail @ ..]
                if matches!(first.as_str(), "exec" | "time" | "command" | "env" | "nice") =>
            {
                rest = tail;
            }
            [first, _, tail @ ..] if first == "timeout" => rest = tail,
            _ => break,
        }
    }
    let name = rest.first()?.clone();
    let shell = matches!(
        name.as_str(),
        "sh" | "bash" | "dash" | "/bin/sh" | "/bin/bash"
    );
    if shell
        && let Some(at) = rest
            .iter()
            .position(|w| w == "-c" || w == "-ec" || w == "-ce")
    {
        return Some((name, rest.get(at + 1).cloned()));
    }
    Some((name.rsplit('/').next().unwrap_or(&name).to_string(), None))
}

/// The words of a simple command as the shell splits them (quotes removed, escapes kept
/// literal); enough to read a command's name and its `-c` script.
fn split_words(stage: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = stage.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    word.push(q);
                }
            }
            '"' => {
                in_word = true;
                while let Some(q) = chars.next() {
                    match q {
                        '"' => break,
                        '\\' => {
                            if let Some(n) = chars.next() {
                                word.push(n);
                            }
                        }
                        q => word.push(q),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(n) = chars.next() {
                    word.push(n);
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

/// `text` on one line, cut to `max` characters.
fn shorten(text: &str, max: usize) -> String {
    let line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line,
    }
}

/// Whether the only `>` in `command` send output to /dev/null or join the streams.
fn only_harmless_redirects(command: &str) -> bool {
    let stripped = command
        .replace("2>&1", "")
        .replace(">/dev/null", "")
        .replace("> /dev/null", "");
    let other_writes = WRITES
        .iter()
        .filter(|w| **w != ">")
        .any(|w| stripped.contains(w));
    !other_writes && !stripped.contains('>')
}

/// Whether `command` names `file` (its path relative to the checkout, with or without the
/// checkout's absolute path in front).
fn mentions(command: &str, file: &str) -> bool {
    command.match_indices(file).any(|(at, _)| {
        let before = command[..at].chars().next_back();
        let after = command[at + file.len()..].chars().next();
        let bounded =
            |c: Option<char>| c.is_none_or(|c| c.is_whitespace() || "'\"/;&|<>()=".contains(c));
        bounded(before) && bounded(after)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files() -> Vec<String> {
        vec!["tests/test_units.py".into(), "tests/conftest.py".into()]
    }

    #[test]
    fn commands_that_change_test_patch_files_are_refused() {
        for command in [
            "rm tests/test_units.py",
            "sed -i 's/assert/pass/' /testbed/tests/test_units.py",
            "echo '' > tests/conftest.py",
            "git checkout -- tests/test_units.py",
            "mv tests/test_units.py /tmp/",
        ] {
            let refused = check_command(command, &files());
            assert!(
                refused.as_ref().is_some_and(|r| r.contains("test patch")),
                "{command}: {refused:?}"
            );
        }
    }

    #[test]
    fn reading_test_files_and_ordinary_setup_pass() {
        for command in [
            "cat tests/test_units.py",
            "grep -n units tests/test_units.py 2>&1",
            "python -m pytest tests/test_units.py > /dev/null",
            "apt-get install -y jq",
            "pip install -e . > /tmp/pip.log",
            "rm -rf build/",
            "cp tests/test_units.py.orig /tmp/x",
        ] {
            let refused = check_command(command, &files());
            // The last one writes (`cp`) and names a different file: only an exact file counts.
            assert_eq!(refused, None, "{command}");
        }
    }

    #[test]
    fn lines_that_switch_tests_off_are_refused() {
        let refused = check_command("echo 'collect_ignore = [\"tests\"]' >> conftest.py", &[]);
        assert!(refused.is_some_and(|r| r.contains("collect_ignore")));
        let refused = check_write(
            "setup.cfg",
            "[tool:pytest]\naddopts = --deselect tests/a.py\n",
            &[],
        );
        assert!(refused.is_some_and(|r| r.contains("--deselect")));
        let refused = check_write(
            "/testbed/tests/test_units.py",
            "def test(): pass\n",
            &files(),
        );
        assert!(refused.is_some_and(|r| r.contains("test patch")));
        assert_eq!(
            check_write("units.cfg", "[units]\nsystem = metric\n", &files()),
            None
        );
        let refused = check_write(
            "package.json",
            "{\"scripts\": {\"test\": \"jest || true\"}}",
            &[],
        );
        assert!(refused.is_some_and(|r| r.contains("|| true")));
    }

    #[test]
    fn a_test_command_whose_status_is_not_the_runners_is_refused() {
        for command in [
            "pytest -rA tests; echo done",
            "pytest -rA || true",
            "pytest -rA | tee /tmp/log",
            "(pytest -rA; true)",
            "bash -c 'pytest -rA; exit 0'",
            "pytest -rA && echo ok",
            "pytest -rA\ntrue",
            "X=1 pytest || :",
            "{ pytest -rA; } ; cat /tmp/log",
            "pytest -rA | grep -v FAILED",
        ] {
            assert!(masked_status(command).is_some(), "{command}");
        }
        for command in [
            "cd tests && /opt/kiln/venv/bin/python runtests.py --verbosity 2 2>&1",
            "export X=1; pytest -rA",
            "set -o pipefail; pytest -rA | tee /tmp/log",
            "(cd tests && pytest -rA)",
            "bash -c 'cd pkg && pytest -rA'",
            "pytest -rA -k 'a or b; true'",
            "UNITS=metric timeout 600 python -m pytest -rA 2>&1",
            "npx jest --ci --json > /tmp/report.json 2>&1",
            "make test",
        ] {
            assert_eq!(masked_status(command), None, "{command}");
        }
    }

    #[test]
    fn test_commands_that_hide_failures_or_run_nothing_are_refused() {
        for command in [
            "pytest -rA || true",
            "pytest -rA; exit 0",
            "pytest   -rA ||   true",
            "pytest --collect-only -q",
            "cargo test --no-run",
            "npx jest --listTests",
            "pytest -rA; true",
        ] {
            assert!(check_test_command(command).is_some(), "{command}");
        }
        for command in [
            "pytest -rA tests",
            "UNITS=metric python -m pytest -rA -p no:cacheprovider",
            "npx jest --ci --json",
        ] {
            assert_eq!(check_test_command(command), None, "{command}");
        }
    }
}
