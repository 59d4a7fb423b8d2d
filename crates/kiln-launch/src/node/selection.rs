//! Which tests a Jest or Vitest run covers: the directories of the files the instance's test
//! patch touches, as the SWE-bench harness's JavaScript specs select them (a whole prettier
//! suite is thousands of snapshot files and several minutes per run, run four times per
//! instance). Mocha is left whole: its positional files add to the `spec` of its config
//! rather than replace it.
//!
//! Directories, not files: a touched snapshot (`__snapshots__/x.spec.js.snap`) or fixture
//! stands for the tests beside it, and a directory that exists at the base commit selects the
//! same tests in the baseline as after the test patch adds a file to it.

use std::path::Path;

use crate::plan::TestScope;

/// Test files above which `auto` runs only the touched directories.
pub const AUTO_FILES: usize = 300;

/// Whether `name` is a JavaScript or TypeScript test file by the runners' default patterns
/// (`*.test.*`, `*.spec.*`) or lives in a `__tests__` directory.
fn is_test_file(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    let script = [".js", ".jsx", ".ts", ".tsx", ".mjs", ".cjs", ".mts", ".cts"]
        .iter()
        .any(|ext| name.ends_with(ext));
    script
        && (name.contains(".test.")
            || name.contains(".spec.")
            || path.split('/').any(|part| part == "__tests__"))
}

/// Test files in the checkout at `root` (`node_modules` and hidden directories left out).
#[must_use]
pub fn suite_files(root: &Path) -> usize {
    let mut count = 0;
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            match entry.file_type() {
                Ok(t) if t.is_dir() && !name.starts_with('.') && name != "node_modules" => {
                    stack.push(entry.path());
                }
                Ok(t) if t.is_file() && is_test_file(&entry.path().to_string_lossy()) => {
                    count += 1;
                }
                _ => {}
            }
        }
    }
    count
}

/// The directories to run for `test_files`: each file's directory (a snapshot's, the one
/// above `__snapshots__`), or its nearest ancestor that exists under `root`; `None` when one
/// of them is the root itself (the whole suite) or no touched file is a test, a snapshot or a
/// fixture beside tests.
#[must_use]
pub fn touched_dirs(root: &Path, test_files: &[String]) -> Option<Vec<String>> {
    let mut dirs: Vec<String> = Vec::new();
    for file in test_files {
        let mut parts: Vec<&str> = file.split('/').collect();
        parts.pop();
        if parts.last() == Some(&"__snapshots__") {
            parts.pop();
        }
        while !parts.is_empty() && !root.join(parts.join("/")).is_dir() {
            parts.pop();
        }
        if parts.is_empty() {
            return None;
        }
        let dir = format!("{}/", parts.join("/"));
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    // Only directories that hold tests (at the base, or added by the patch) are worth a run.
    let tested = |dir: &String| {
        test_files
            .iter()
            .any(|f| f.starts_with(dir.as_str()) && is_test_file(f))
            || suite_files(&root.join(dir)) > 0
    };
    dirs.retain(tested);
    dirs.sort();
    // A directory inside another selected one adds nothing.
    let kept: Vec<String> = dirs
        .iter()
        .filter(|d| !dirs.iter().any(|o| o != *d && d.starts_with(o.as_str())))
        .cloned()
        .collect();
    (!kept.is_empty()).then_some(kept)
}

/// Jest reads its positional arguments as regular expressions over test paths.
fn jest_pattern(dir: &str) -> String {
    let mut out = String::with_capacity(dir.len());
    for c in dir.chars() {
        if "()[]{}+*?^$|\\".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// What to pass a Jest (`jest == true`) or Vitest run for `scope`, and the row's description
/// of what it runs; `None` runs what the script runs.
#[must_use]
pub fn selection(
    root: &Path,
    scope: TestScope,
    test_files: &[String],
    jest: bool,
) -> Option<(Vec<String>, String)> {
    if scope == TestScope::All {
        return None;
    }
    let dirs = touched_dirs(root, test_files)?;
    let suite = suite_files(root);
    if scope == TestScope::Auto && suite <= AUTO_FILES {
        return None;
    }
    let why = match scope {
        TestScope::Auto => format!("{suite} test files, more than {AUTO_FILES}"),
        _ => "test_scope = \"touched\"".into(),
    };
    let described = format!("touched: {} ({why})", dirs.join(" "));
    let args = dirs
        .iter()
        .map(|d| {
            let pattern = if jest { jest_pattern(d) } else { d.clone() };
            crate::shell::quote(&pattern)
        })
        .collect();
    Some((args, described))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checkout(files: &[&str]) -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        for file in files {
            let path = tmp.path().join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "").unwrap();
        }
        tmp
    }

    #[test]
    fn snapshots_fixtures_and_new_directories_select_the_tests_beside_them() {
        let root = checkout(&[
            "tests/format/js/arrows/jsfmt.spec.js",
            "tests/format/js/arrows/__snapshots__/jsfmt.spec.js.snap",
            "tests/format/js/arrows/curried.js",
            "tests/format/js/jsfmt.spec.js",
            "src/index.js",
            "docs/readme.md",
        ]);
        let touched = |files: &[&str]| {
            touched_dirs(
                root.path(),
                &files.iter().map(|f| (*f).to_string()).collect::<Vec<_>>(),
            )
        };
        // A snapshot and a fixture: their directory.
        assert_eq!(
            touched(&[
                "tests/format/js/arrows/__snapshots__/jsfmt.spec.js.snap",
                "tests/format/js/arrows/curried.js"
            ]),
            Some(vec!["tests/format/js/arrows/".to_string()])
        );
        // A directory the patch adds: the nearest one that exists, which holds tests.
        assert_eq!(
            touched(&["tests/format/js/chains/jsfmt.spec.js"]),
            Some(vec!["tests/format/js/".to_string()])
        );
        // A directory inside a selected one adds nothing.
        assert_eq!(
            touched(&[
                "tests/format/js/chains/jsfmt.spec.js",
                "tests/format/js/arrows/curried.js"
            ]),
            Some(vec!["tests/format/js/".to_string()])
        );
        // A file at the root, or only directories without tests: the whole suite.
        assert_eq!(touched(&["jest.config.js"]), None);
        assert_eq!(touched(&["docs/readme.md"]), None);
    }

    #[test]
    fn auto_selects_only_in_large_suites_and_jest_gets_patterns() {
        let mut files: Vec<String> = (0..=AUTO_FILES)
            .map(|n| format!("tests/t{n}/a.test.ts"))
            .collect();
        files.push("tests/(odd)+dir/b.test.ts".into());
        let refs: Vec<&str> = files.iter().map(String::as_str).collect();
        let large = checkout(&refs);
        let touched = vec!["tests/(odd)+dir/b.test.ts".to_string()];
        let (args, described) =
            selection(large.path(), TestScope::Auto, &touched, true).expect("a selection");
        assert_eq!(args, ["'tests/\\(odd\\)\\+dir/'"]);
        assert!(
            described.starts_with("touched: tests/(odd)+dir/ ("),
            "{described}"
        );
        let (vitest, _) = selection(large.path(), TestScope::Auto, &touched, false).unwrap();
        assert_eq!(vitest, ["'tests/(odd)+dir/'"]);
        assert_eq!(
            selection(large.path(), TestScope::All, &touched, true),
            None
        );

        let small = checkout(&["tests/a.test.ts", "tests/b.test.ts"]);
        let touched = vec!["tests/a.test.ts".to_string()];
        assert_eq!(
            selection(small.path(), TestScope::Auto, &touched, true),
            None
        );
        assert!(selection(small.path(), TestScope::Touched, &touched, true).is_some());
    }
}
