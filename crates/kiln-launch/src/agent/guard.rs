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
