//! What a gold patch may change, checked before any run: code, not the tests that judge it.
//!
//! A task set from the wild (someone else's task file, a crawl of hostile pull requests) can
//! carry a gold patch that makes tests pass by editing the tests or their configuration: a
//! `conftest.py` hook that turns every failed report into a pass validates with any number of
//! FAIL_TO_PASS tests. Such a row is rejected before a container starts:
//! - `gold-edits-tests`: the gold patch touches a file the test patch touches, a test file (the
//!   rule that splits a pull request into patch and test patch, [`kiln_core::paths`]), a test
//!   configuration file (`conftest.py`, `pytest.ini`, `jest.config.*`, `.mocharc*`, ...), or a
//!   test setting in a shared manifest (`[tool:pytest]`/`[tool.pytest…]`, `addopts`, Cargo's
//!   `[dev-dependencies]` and `[[test]]`, a `jest`/`mocha` key or `test` script of
//!   `package.json`, CMake's `enable_testing`/`add_test`/`BUILD_TESTING`);
//! - `gold-without-code`: every line it changes is blank, a comment, or in a documentation file.

use kiln_schema::FailureClass;

/// File names (the last path component, lower-cased) that configure a test runner.
const TEST_CONFIG_NAMES: &[&str] = &[
    "conftest.py",
    "pytest.ini",
    ".pytest.ini",
    "noxfile.py",
    "karma.conf.js",
    "jasmine.json",
    ".nycrc",
    ".nycrc.json",
    "phpunit.xml",
    "phpunit.xml.dist",
    "ctesttestfile.cmake",
    "ava.config.js",
];

/// Name prefixes of test runner configuration files (`jest.config.ts`, `.mocharc.yml`).
const TEST_CONFIG_PREFIXES: &[&str] = &[
    "jest.config.",
    "jest.setup.",
    "vitest.config.",
    "vitest.workspace.",
    ".mocharc",
    "karma.conf.",
    "playwright.config.",
    "cypress.config.",
    "ava.config.",
];

/// Manifests shared by code and tests: a changed line naming one of these is a test setting.
const TEST_SETTINGS: &[(&str, &[&str])] = &[
    (
        "setup.cfg",
        &[
            "[tool:pytest]",
            "[pytest]",
            "addopts",
            "testpaths",
            "python_files",
        ],
    ),
    (
        "tox.ini",
        &["[pytest]", "[testenv", "addopts", "testpaths", "commands"],
    ),
    (
        "pyproject.toml",
        &[
            "[tool.pytest",
            "addopts",
            "testpaths",
            "python_files",
            "python_functions",
        ],
    ),
    ("cargo.toml", &["[dev-dependencies", "[[test]]", "harness"]),
    (
        "package.json",
        &[
            "\"jest\"",
            "\"mocha\"",
            "\"ava\"",
            "\"vitest\"",
            "\"test\":",
            "\"c8\"",
            "\"nyc\"",
        ],
    ),
    (
        "cmakelists.txt",
        &["enable_testing", "add_test", "build_testing", "ctest"],
    ),
];

/// Extensions of documentation files: changing them alone changes no code.
const DOC_EXTENSIONS: &[&str] = &["md", "rst", "adoc"];

/// One file of a patch: its path and the lines it adds or removes (without the `+`/`-`).
struct FileChange<'a> {
    path: String,
    lines: Vec<&'a str>,
    /// The same lines, with whether each is added.
    signed: Vec<(bool, &'a str)>,
}

/// The files of a git diff and their changed lines. Header lines (`---`/`+++`) are told from
/// changed lines by position: they come before a file's first hunk.
fn file_changes(patch: &str) -> Vec<FileChange<'_>> {
    let mut files: Vec<FileChange<'_>> = Vec::new();
    let mut in_hunk = false;
    for line in patch.lines() {
        if line.starts_with("diff --git ") {
            in_hunk = false;
            let path = kiln_core::diff::changed_files(line)
                .into_iter()
                .next()
                .and_then(|f| f.new.or(f.old))
                .unwrap_or_default();
            files.push(FileChange {
                path,
                lines: Vec::new(),
                signed: Vec::new(),
            });
        } else if line.starts_with("@@") {
            in_hunk = true;
        } else if in_hunk
            && let Some(file) = files.last_mut()
            && let Some(changed) = line.strip_prefix(['+', '-'])
        {
            file.lines.push(changed);
            file.signed.push((line.starts_with('+'), changed));
        }
    }
    files
}

/// Every path a patch touches, on both sides of a rename.
fn touched(patch: &str) -> Vec<String> {
    kiln_core::diff::changed_files(patch)
        .into_iter()
        .flat_map(|f| [f.old, f.new])
        .flatten()
        .collect()
}

fn file_name(path: &str) -> String {
    path.rsplit('/').next().unwrap_or(path).to_ascii_lowercase()
}

fn extension(path: &str) -> String {
    file_name(path)
        .rsplit_once('.')
        .map(|(_, e)| e.to_string())
        .unwrap_or_default()
}

/// Whether `path` configures a test runner by its name alone.
fn is_test_config(path: &str) -> bool {
    let name = file_name(path);
    TEST_CONFIG_NAMES.contains(&name.as_str())
        || TEST_CONFIG_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// The test setting a changed line of a shared manifest names, if any. A line that is only
/// re-indented or re-aligned (the same words removed and added) changes no setting.
fn test_setting<'a>(change: &FileChange<'a>) -> Option<&'a str> {
    let name = file_name(&change.path);
    let (_, keys) = TEST_SETTINGS.iter().find(|(n, _)| *n == name)?;
    let words = |line: &str| line.split_whitespace().collect::<Vec<_>>().join(" ");
    let added: std::collections::BTreeSet<String> = change
        .signed
        .iter()
        .filter(|(plus, _)| *plus)
        .map(|(_, l)| words(l))
        .collect();
    let removed: std::collections::BTreeSet<String> = change
        .signed
        .iter()
        .filter(|(plus, _)| !*plus)
        .map(|(_, l)| words(l))
        .collect();
    change
        .signed
        .iter()
        .find(|(plus, line)| {
            let other = if *plus { &removed } else { &added };
            let lower = line.to_ascii_lowercase();
            !other.contains(&words(line))
                && keys.iter().any(|k| lower.contains(&k.to_ascii_lowercase()))
        })
        .map(|(_, line)| *line)
}

/// Whether a changed line is blank or a comment in a file with this extension.
fn is_comment_or_blank(line: &str, extension: &str) -> bool {
    let line = line.trim();
    if line.is_empty() {
        return true;
    }
    let hash = [
        "py", "sh", "bash", "rb", "toml", "yml", "yaml", "cfg", "ini", "pl", "r", "cmake", "txt",
    ];
    let slashes = [
        "c", "cc", "cpp", "cxx", "h", "hh", "hpp", "js", "jsx", "ts", "tsx", "mjs", "cjs", "rs",
        "go", "java", "kt", "scala", "cs", "swift", "php", "dart",
    ];
    if hash.contains(&extension) {
        return line.starts_with('#');
    }
    if slashes.contains(&extension) {
        return line.starts_with("//")
            || line.starts_with("/*")
            || line.starts_with('*')
            || line.ends_with("*/");
    }
    false
}

/// Why the gold patch may not be used, as a failure class and a reason; `None` when it only
/// changes code. `language` is the repository's (as the environment row names it).
#[must_use]
pub fn check(patch: &str, test_patch: &str, language: &str) -> Option<(FailureClass, String)> {
    let test_files = touched(test_patch);
    let edits_tests = |reason: String| Some((FailureClass::GoldEditsTests, reason));
    for path in touched(patch) {
        if test_files.contains(&path) {
            return edits_tests(format!(
                "the gold patch edits {path}, which the test patch edits too"
            ));
        }
        if kiln_core::paths::is_test_path(&path, language) {
            return edits_tests(format!("the gold patch edits the test file {path}"));
        }
        if is_test_config(&path) {
            return edits_tests(format!(
                "the gold patch edits the test configuration {path}"
            ));
        }
    }
    let changes = file_changes(patch);
    for change in &changes {
        if let Some(line) = test_setting(change) {
            return edits_tests(format!(
                "the gold patch changes a test setting in {}: `{}`",
                change.path,
                line.trim().chars().take(120).collect::<String>()
            ));
        }
    }
    let code = changes.iter().any(|change| {
        let ext = extension(&change.path);
        !DOC_EXTENSIONS.contains(&ext.as_str())
            && (change.lines.is_empty()
                || change
                    .lines
                    .iter()
                    .any(|line| !is_comment_or_blank(line, &ext)))
    });
    if !changes.is_empty() && !code {
        return Some((
            FailureClass::GoldWithoutCode,
            "the gold patch changes no code: only comments, blank lines or documentation".into(),
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn diff(path: &str, body: &str) -> String {
        format!("diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1,2 +1,2 @@\n{body}")
    }

    const CODE: &str = " def f():\n-    return 1\n+    return 2\n";
    const TEST: &str = "diff --git a/tests/test_x.py b/tests/test_x.py\n--- a/tests/test_x.py\n+++ b/tests/test_x.py\n@@ -1 +1,2 @@\n+def test_x():\n+    assert f() == 2\n";

    #[test]
    fn code_changes_pass() {
        assert_eq!(check(&diff("src/x.py", CODE), TEST, "python"), None);
        // A changelog beside the code, a renamed module, a package.json dependency bump.
        let mixed = format!(
            "{}{}{}",
            diff("CHANGELOG.md", "+- fixed f\n"),
            diff("src/x.py", CODE),
            diff(
                "package.json",
                "-    \"left-pad\": \"1.0.0\"\n+    \"left-pad\": \"1.0.1\"\n"
            )
        );
        assert_eq!(check(&mixed, TEST, "javascript"), None);
        // Test options only re-aligned beside a new option of the library's own.
        let aligned = format!(
            "{}{}",
            diff("src/x.py", CODE),
            diff(
                "CMakeLists.txt",
                "-option(JSON_BuildTests \"Build the unit tests when BUILD_TESTING is enabled.\" ON)\n+option(JSON_BuildTests          \"Build the unit tests when BUILD_TESTING is enabled.\" ON)\n+option(JSON_Legacy \"Legacy comparison.\" OFF)\n"
            )
        );
        assert_eq!(check(&aligned, TEST, "cpp"), None);
        // A removed line that starts with `--` (SQL, Lua) is a change, not a header.
        let sql = diff("src/q.sql", "--- old comment\n+select 2;\n");
        assert_eq!(check(&sql, TEST, "python"), None);
    }

    #[test]
    fn gold_patches_that_edit_tests_or_their_configuration_are_refused() {
        let conftest = diff(
            "conftest.py",
            "+import pytest\n+@pytest.hookimpl(hookwrapper=True)\n+def pytest_runtest_makereport(item, call):\n+    outcome = yield\n+    outcome.get_result().outcome = 'passed'\n",
        );
        let cases = [
            (conftest.clone(), "conftest.py"),
            (
                diff("tests/test_x.py", CODE),
                "which the test patch edits too",
            ),
            (diff("tests/helpers.py", CODE), "test file tests/helpers.py"),
            (
                diff("jest.config.js", "+  testMatch: []\n"),
                "jest.config.js",
            ),
            (diff(".mocharc.yml", "+bail: false\n"), ".mocharc.yml"),
            (
                diff(
                    "setup.cfg",
                    " [tool:pytest]\n-addopts = -x\n+addopts = -p no:x\n",
                ),
                "test setting in setup.cfg",
            ),
            (
                diff(
                    "pyproject.toml",
                    "+[tool.pytest.ini_options]\n+addopts = \"-k not_x\"\n",
                ),
                "pyproject.toml",
            ),
            (
                diff("Cargo.toml", "+[dev-dependencies]\n+mock = \"1\"\n"),
                "Cargo.toml",
            ),
            (
                diff(
                    "package.json",
                    "-    \"test\": \"jest\",\n+    \"test\": \"true\",\n",
                ),
                "package.json",
            ),
            (
                diff("CMakeLists.txt", "-add_test(NAME all COMMAND t)\n"),
                "CMakeLists.txt",
            ),
        ];
        for (gold, expected) in cases {
            let got = check(&format!("{}{gold}", diff("src/x.py", CODE)), TEST, "python");
            match got {
                Some((FailureClass::GoldEditsTests, reason)) => {
                    assert!(reason.contains(expected), "{reason} / {expected}");
                }
                other => panic!("{expected}: {other:?}"),
            }
        }
    }

    #[test]
    fn gold_patches_without_code_are_refused() {
        for gold in [
            diff("src/x.py", "-# old\n+# new comment\n+\n"),
            diff("src/x.rs", "+// explains\n+/* and more\n+ * here */\n"),
            diff("README.md", "+fixed\n"),
        ] {
            assert!(
                matches!(
                    check(&gold, TEST, "python"),
                    Some((FailureClass::GoldWithoutCode, _))
                ),
                "{gold}"
            );
        }
    }
}
