//! Which pytest files a validation run covers: the test modules the instance's test patch
//! touches, as the SWE-bench harness and SWE-bench-Live select them (a whole sympy or astropy
//! suite is tens of thousands of tests and an hour on two cores, run five times per instance).
//!
//! Published PASS_TO_PASS lists cover the same files, so selected runs also agree with them.

use std::path::Path;

use crate::plan::{TestScope, glob_match};
use crate::shell::quote as shell_quote;
use crate::steps::TestCommand;

/// Test functions (`def test...` lines in test modules) above which `auto` runs only the
/// touched modules: astropy has about 7 200, sympy 9 000 to 11 000, pytest itself 3 000; most
/// projects a few hundred, where the whole suite costs little and also catches what the gold
/// patch breaks elsewhere.
pub const AUTO_TESTS: usize = 2000;

/// pytest's default `python_files`.
const DEFAULT_PATTERNS: &[&str] = &["test_*.py", "*_test.py"];

/// The files of `test_files` that pytest collects as test modules: their name matches the
/// project's `python_files` patterns (pytest's defaults when it sets none). Helpers, conftest
/// files and data files are left out: given explicitly, pytest would collect them as modules.
#[must_use]
pub fn test_modules(test_files: &[String], python_files: &[String]) -> Vec<String> {
    let patterns: Vec<&str> = if python_files.is_empty() {
        DEFAULT_PATTERNS.to_vec()
    } else {
        python_files
            .iter()
            .flat_map(|p| p.split_whitespace())
            .collect()
    };
    test_files
        .iter()
        .filter(|file| {
            let name = file.rsplit('/').next().unwrap_or(file);
            name.ends_with(".py")
                && name != "conftest.py"
                && patterns.iter().any(|p| glob_match(p, name))
        })
        .cloned()
        .collect()
}

/// The test command for `scope`, and the environment row's description of what it runs.
#[must_use]
pub fn scoped_command(
    command: &str,
    root: &Path,
    scope: TestScope,
    test_files: &[String],
    python_files: &[String],
) -> (String, String) {
    let modules = test_modules(test_files, python_files);
    if scope == TestScope::All || modules.is_empty() {
        return (command.to_string(), "all".into());
    }
    let suite = suite_size(root, python_files);
    if scope == TestScope::Auto && suite.tests <= AUTO_TESTS {
        return (command.to_string(), "all".into());
    }
    let why = match scope {
        TestScope::Auto => format!("about {} tests, more than {AUTO_TESTS}", suite.tests),
        _ => "test_scope = \"touched\"".into(),
    };
    (
        selected_command(command, &modules),
        format!(
            "touched: {} of {} test modules ({why})",
            modules.len(),
            suite.modules
        ),
    )
}

/// How large a suite is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SuiteSize {
    /// Test modules, by the name patterns.
    pub modules: usize,
    /// Lines of those modules that define a test function (`def test`, `async def test`).
    pub tests: usize,
}

/// The size of the suite in the checkout at `root`; hidden directories, virtual environments
/// and `node_modules` are not looked into.
#[must_use]
pub fn suite_size(root: &Path, python_files: &[String]) -> SuiteSize {
    let mut size = SuiteSize {
        modules: 0,
        tests: 0,
    };
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut names = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            match entry.file_type() {
                Ok(t)
                    if t.is_dir()
                        && !name.starts_with('.')
                        && !["node_modules", "venv", "__pycache__"].contains(&name.as_str()) =>
                {
                    stack.push(entry.path());
                }
                Ok(t) if t.is_file() => names.push(name),
                _ => {}
            }
        }
        for module in test_modules(&names, python_files) {
            size.modules += 1;
            let text = std::fs::read(dir.join(&module)).unwrap_or_default();
            size.tests += String::from_utf8_lossy(&text)
                .lines()
                .filter(|line| {
                    let line = line.trim_start();
                    let line = line.strip_prefix("async ").unwrap_or(line).trim_start();
                    line.starts_with("def test")
                })
                .count();
        }
    }
    size
}

/// `command` restricted to `modules`, as a shell command.
///
/// Each module that exists is passed to pytest. One that does not (the baseline run happens
/// before the test patch adds it) stands for its directory when that exists, so the baseline
/// still runs the neighbouring tests; when nothing is left pytest gets no path and runs the
/// whole suite, as it would have without a selection.
#[must_use]
pub fn selected_command(command: &str, modules: &[String]) -> String {
    if modules.is_empty() {
        return command.to_string();
    }
    let quoted: Vec<String> = modules.iter().map(|m| shell_quote(m)).collect();
    format!(
        "set -- && for f in {}; do if [ -e \"$f\" ]; then set -- \"$@\" \"$f\"; elif [ -d \"${{f%/*}}\" ] && [ \"${{f%/*}}\" != \"$f\" ]; then set -- \"$@\" \"${{f%/*}}\"; fi; done && {command} \"$@\"",
        quoted.join(" ")
    )
}

/// pytest's way of leaving tests out: each test's node id deselected (`--deselect`, pytest 3.5
/// on), and a module that failed to import (its id is the file's) not collected (`--ignore`),
/// through `PYTEST_ADDOPTS`, which every pytest the command starts reads whatever the
/// command's shape (a selection of modules, the CI's variables before it), added to what the
/// environment sets there already. pytest splits the variable as a shell would, so each option
/// is quoted. Deselected tests neither run nor set up their fixtures. `--deselect` takes every
/// id that starts with its value, so a test whose id begins another reported id
/// (`test_request` and `test_request_timeout`) is not left out.
#[must_use]
pub fn leave_out(
    command: &TestCommand,
    parser: &str,
    tests: &[String],
    reported: &[&str],
) -> Option<(TestCommand, Vec<String>)> {
    if parser != "pytest" {
        return None;
    }
    let mut left = Vec::new();
    let mut options = Vec::new();
    for id in tests {
        let option = if id.contains("::") {
            if reported
                .iter()
                .any(|other| other.len() > id.len() && other.starts_with(id.as_str()))
            {
                continue;
            }
            "deselect"
        } else {
            "ignore"
        };
        options.push(shell_quote(&format!("--{option}={id}")));
        left.push(id.clone());
    }
    if left.is_empty() {
        return None;
    }
    let mut command = command.clone();
    command.prelude.push(format!(
        "export PYTEST_ADDOPTS=\"${{PYTEST_ADDOPTS:+$PYTEST_ADDOPTS }}\"{}",
        shell_quote(&options.join(" "))
    ));
    Some((command, left))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn only_modules_pytest_collects_are_selected() {
        let files = strings(&[
            "astropy/modeling/tests/test_separable.py",
            "astropy/modeling/tests/conftest.py",
            "astropy/modeling/tests/data/spec.json",
            "tests/helpers.py",
            "pkg/core_test.py",
            "docs/test_notes.rst",
        ]);
        assert_eq!(
            test_modules(&files, &[]),
            [
                "astropy/modeling/tests/test_separable.py",
                "pkg/core_test.py"
            ]
        );
        // A project's own patterns replace the defaults.
        assert_eq!(
            test_modules(&files, &strings(&["helpers.py check_*.py"])),
            ["tests/helpers.py"]
        );
    }

    #[test]
    fn auto_selects_only_in_large_suites() {
        let touched = strings(&["pkg/tests/test_a.py"]);
        let small = crate::plan::testutil::tree(&[
            ("pkg/tests/test_a.py", "def test_one():\n    pass\n"),
            (
                "pkg/tests/test_b.py",
                "class TestX:\n    async def test_two(self): ...\n\ndef helper(): ...\n",
            ),
            (".venv/lib/test_c.py", "def test_three(): ...\n"),
        ]);
        assert_eq!(
            suite_size(small.path(), &[]),
            SuiteSize {
                modules: 2,
                tests: 2
            }
        );
        let (command, scope) =
            scoped_command("pytest", small.path(), TestScope::Auto, &touched, &[]);
        assert_eq!((command.as_str(), scope.as_str()), ("pytest", "all"));
        let (command, scope) =
            scoped_command("pytest", small.path(), TestScope::Touched, &touched, &[]);
        assert!(command.ends_with("pytest \"$@\""), "{command}");
        assert_eq!(
            scope,
            "touched: 1 of 2 test modules (test_scope = \"touched\")"
        );

        let many = "def test_x(): ...\n".repeat(AUTO_TESTS / 2 + 1);
        let files: Vec<(String, &str)> = (0..2)
            .map(|i| (format!("pkg/tests/test_{i}.py"), many.as_str()))
            .collect();
        let refs: Vec<(&str, &str)> = files.iter().map(|(p, t)| (p.as_str(), *t)).collect();
        let large = crate::plan::testutil::tree(&refs);
        let (command, scope) =
            scoped_command("pytest", large.path(), TestScope::Auto, &touched, &[]);
        assert!(
            command.contains("for f in pkg/tests/test_a.py;"),
            "{command}"
        );
        assert_eq!(
            scope,
            format!(
                "touched: 1 of 2 test modules (about {} tests, more than {AUTO_TESTS})",
                AUTO_TESTS + 2
            )
        );
        // `all`, or a test patch that touches no test module, keeps the whole suite.
        let (command, _) = scoped_command("pytest", large.path(), TestScope::All, &touched, &[]);
        assert_eq!(command, "pytest");
        let (command, _) = scoped_command(
            "pytest",
            large.path(),
            TestScope::Touched,
            &strings(&["pkg/tests/conftest.py"]),
            &[],
        );
        assert_eq!(command, "pytest");
    }

    /// Runs `command` with bash in `dir`; its standard output.
    fn run_in(dir: &Path, command: &str) -> String {
        let out = std::process::Command::new("bash")
            .arg("-c")
            .arg(command)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "{command}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    #[test]
    fn the_selected_command_keeps_existing_files_and_falls_back_to_their_directory() {
        let dir = crate::plan::testutil::tree(&[("pkg/tests/test_old.py", "")]);
        let command = selected_command(
            "printf '%s\\n' RUN",
            &strings(&[
                "pkg/tests/test_old.py",
                "pkg/tests/test_new.py",
                "gone/tests/test_x.py",
                "test_top's.py",
            ]),
        );
        assert_eq!(
            run_in(dir.path(), &command),
            "RUN\npkg/tests/test_old.py\npkg/tests\n"
        );
        // Nothing exists: no paths, so pytest would run everything.
        let empty = crate::plan::testutil::tree(&[]);
        assert_eq!(run_in(empty.path(), &command), "RUN\n");
        assert_eq!(selected_command("pytest", &[]), "pytest");
    }

    #[test]
    fn tests_left_out_reach_pytest_as_deselect_options_added_to_its_variable() {
        let tests = strings(&[
            "tests/test_fetch_at_import.py",
            "tests/test_net.py::test_download",
            "tests/test_net.py::test_mirror[it's a url]",
        ]);
        let command = TestCommand {
            prelude: vec!["export PYTEST_ADDOPTS=-x".into()],
            // pytest splits its variable as a shell does: print what it would read.
            ..TestCommand::plain(
                "python3 -c 'import os, shlex; print(*shlex.split(os.environ[\"PYTEST_ADDOPTS\"]), sep=\"\\n\")'",
            )
        };
        let reported: Vec<&str> = tests
            .iter()
            .map(String::as_str)
            .chain(["tests/test_net.py::test_ok"])
            .collect();
        let (narrowed, left) = leave_out(&command, "pytest", &tests, &reported).unwrap();
        assert_eq!(left, tests);
        let dir = crate::plan::testutil::tree(&[]);
        assert_eq!(
            run_in(dir.path(), &narrowed.render()),
            "-x\n--ignore=tests/test_fetch_at_import.py\n\
             --deselect=tests/test_net.py::test_download\n\
             --deselect=tests/test_net.py::test_mirror[it's a url]\n"
        );
        // Without a value before, nothing but the options.
        let (bare, _) = leave_out(
            &TestCommand::plain(command.run.clone()),
            "pytest",
            &tests[1..2],
            &reported,
        )
        .unwrap();
        assert_eq!(
            run_in(dir.path(), &bare.render()),
            "--deselect=tests/test_net.py::test_download\n"
        );
        // --deselect takes every id its value begins: a test that begins another stays.
        let prefix = strings(&[
            "tests/test_net.py::test_download",
            "tests/test_net.py::test_do",
        ]);
        let reported = [
            "tests/test_net.py::test_download",
            "tests/test_net.py::test_do",
            "tests/test_net.py::test_download_all",
        ];
        assert_eq!(leave_out(&command, "pytest", &prefix[1..], &reported), None);
        assert_eq!(leave_out(&command, "pytest", &prefix[..1], &reported), None);
        // Only pytest's parser has the way; no test, no change.
        assert_eq!(leave_out(&command, "django", &tests, &reported), None);
        assert_eq!(leave_out(&command, "pytest", &[], &reported), None);
    }
}
