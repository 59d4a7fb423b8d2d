//! Which tests a Jest or Vitest run covers: the directories of the files the instance's test
//! patch touches, as the SWE-bench harness's JavaScript specs select them (a whole prettier
//! suite is thousands of snapshot files and several minutes per run, run four times per
//! instance). Mocha runs the touched directories in place of the files its script names, when
//! no config of its own names spec files (positional files add to a config's `spec` rather
//! than replace it).
//!
//! Directories, not files: a touched snapshot (`__snapshots__/x.spec.js.snap`) or fixture
//! stands for the tests beside it, and a directory that exists at the base commit selects the
//! same tests in the baseline as after the test patch adds a file to it.

use std::path::Path;

use crate::plan::TestScope;
use crate::shell::quote;
use crate::steps::TestCommand;

/// What follows the runner's own arguments in a jest (or react-scripts) command: where the
/// arguments that leave tests out go ([`leave_out`]).
pub const JEST_REPORT: &str = " --ci --json";
/// The same in a vitest command.
pub const VITEST_REPORT: &str = " --reporter=json";
/// The same in a mocha command.
pub const MOCHA_REPORT: &str = " --reporter json";

/// Test files above which `auto` runs only the touched directories.
pub const AUTO_FILES: usize = 300;

/// Whether `name` is a JavaScript or TypeScript test file by the runners' default patterns
/// (`*.test.*`, `*.spec.*`) or lives in a `__tests__` directory.
fn is_test_file(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    is_script(name)
        && (name.contains(".test.")
            || name.contains(".spec.")
            || path.split('/').any(|part| part == "__tests__"))
}

/// Test files in the checkout at `root` (`node_modules` and hidden directories left out).
#[must_use]
pub fn suite_files(root: &Path) -> usize {
    count_files(root, is_test_file)
}

/// Files under `dir` whose path `keep` takes (`node_modules` and hidden directories left out).
fn count_files(dir: &Path, keep: fn(&str) -> bool) -> usize {
    let mut count = 0;
    let mut stack = vec![dir.to_path_buf()];
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
                Ok(t) if t.is_file() && keep(&entry.path().to_string_lossy()) => count += 1,
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

/// The part of a mocha spec before its first glob character, without quotes and `./`:
/// `'test/**/*.js'` → `test/`.
fn static_prefix(spec: &str) -> (String, &str) {
    let spec = spec.trim_matches(['\'', '"']);
    let spec = spec.strip_prefix("./").unwrap_or(spec);
    let cut = spec.find(['*', '?', '{', '[']).unwrap_or(spec.len());
    let prefix = match spec[..cut].rfind('/') {
        Some(at) if cut < spec.len() => &spec[..=at],
        _ => &spec[..cut],
    };
    (prefix.to_string(), &spec[prefix.len()..])
}

/// What to pass a mocha run for `scope` in place of the script's spec arguments `specs`, and
/// the row's description; `None` runs what the script runs. Each spec (a directory, a file or
/// a glob) gives way to the touched directories under it, a glob keeping its pattern below
/// them (`test/**/*.js` → `test/unit/**/*.js`); a touched file under no spec is not a test of
/// this run. `config_spec`: mocha's config names spec files of its own.
#[must_use]
pub fn mocha_selection(
    root: &Path,
    scope: TestScope,
    test_files: &[String],
    specs: &[String],
    config_spec: bool,
) -> Option<(Vec<String>, String)> {
    if scope == TestScope::All || config_spec || specs.is_empty() {
        return None;
    }
    let prefixes: Vec<(String, String)> = specs
        .iter()
        .map(|s| {
            let (prefix, rest) = static_prefix(s);
            (prefix, rest.to_string())
        })
        .collect();
    let mut args: Vec<String> = Vec::new();
    for file in test_files.iter().filter(|f| is_script(f)) {
        for (prefix, rest) in &prefixes {
            let file_spec =
                rest.is_empty() && !prefix.ends_with('/') && !root.join(prefix).is_dir();
            if file_spec {
                // A file the script names: it stays as it is when touched.
                if file == prefix && !args.contains(prefix) {
                    args.push(prefix.clone());
                }
                continue;
            }
            let prefix_dir = if prefix.is_empty() || prefix.ends_with('/') {
                prefix.clone()
            } else {
                format!("{prefix}/")
            };
            if !file.starts_with(&prefix_dir) {
                continue;
            }
            let mut parts: Vec<&str> = file.split('/').collect();
            parts.pop();
            while parts.len() > prefix_dir.matches('/').count()
                && !root.join(parts.join("/")).is_dir()
            {
                parts.pop();
            }
            let dir = if parts.is_empty() {
                String::new()
            } else {
                format!("{}/", parts.join("/"))
            };
            let arg = format!("{dir}{rest}");
            if !args.contains(&arg) {
                args.push(arg);
            }
        }
    }
    let same = |spec: &str| {
        let (prefix, rest) = static_prefix(spec);
        format!("{prefix}{rest}").trim_end_matches('/').to_string()
    };
    let unchanged: Vec<String> = specs.iter().map(|s| same(s)).collect();
    let narrowed: Vec<String> = args.iter().map(|a| same(a)).collect();
    if args.is_empty()
        || (narrowed.iter().all(|a| unchanged.contains(a)) && args.len() == specs.len())
    {
        return None;
    }
    if scope == TestScope::Auto {
        let suite: usize = prefixes
            .iter()
            .map(|(prefix, _)| count_files(&root.join(prefix), is_script))
            .sum();
        if suite <= AUTO_FILES {
            return None;
        }
    }
    let why = match scope {
        TestScope::Auto => format!("more than {AUTO_FILES} files under the script's specs"),
        _ => "test_scope = \"touched\"".into(),
    };
    let described = format!("touched: {} ({why})", args.join(" "));
    let quoted = args.iter().map(|a| crate::shell::quote(a)).collect();
    Some((quoted, described))
}

/// Whether `path` is a JavaScript or TypeScript file.
fn is_script(path: &str) -> bool {
    [".js", ".jsx", ".ts", ".tsx", ".mjs", ".cjs", ".mts", ".cts"]
        .iter()
        .any(|ext| path.ends_with(ext))
}

/// Node's ways of leaving tests out, by the runner whose report the parser reads: jest and
/// vitest skip the tests whose full name (describe titles and title, space-joined) a
/// `--testNamePattern` with a negative lookahead excludes; mocha skips those its `--grep`
/// matches under `--invert`, and for a failed `before` hook (`"before each" hook for "x"`) the
/// whole suite it guards, whose tests the report does not name (mocha runs no hook of a suite
/// left with no test; a sibling suite whose title begins with the same words goes too). A
/// failed `after` hook is not left out: the tests it follows ran. `None` when the command
/// already selects tests by name, or a root hook failed (every test would go).
#[must_use]
pub fn leave_out(
    command: &TestCommand,
    parser: &str,
    tests: &[String],
    _reported: &[&str],
) -> Option<(TestCommand, Vec<String>)> {
    let selects = |flags: &[&str]| flags.iter().any(|flag| command.run.contains(flag));
    let mut left = Vec::new();
    let (anchor, words) = match parser {
        "jest-json" | "vitest-json" => {
            if selects(&[" -t ", " -t=", " --testNamePattern"]) {
                return None;
            }
            let names: Vec<String> = tests
                .iter()
                .map(|id| {
                    let titles = id
                        .split_once("::")
                        .map_or(id.as_str(), |(_, titles)| titles);
                    regex_escape(&titles.replace(" › ", " "))
                })
                .collect();
            left.extend(tests.iter().cloned());
            let pattern = format!("^(?!(?:{})$)", names.join("|"));
            let anchor = if parser == "jest-json" {
                JEST_REPORT
            } else {
                VITEST_REPORT
            };
            (anchor, format!(" --testNamePattern {}", quote(&pattern)))
        }
        "mocha-json" => {
            if selects(&[" -g ", " --grep", " -f ", " --fgrep", " -i ", " --invert"]) {
                return None;
            }
            let mut alternatives = Vec::new();
            for id in tests {
                let title = mocha_title(id);
                match hooked_suite(title) {
                    Some((_, false)) => continue,
                    Some(("", true)) => return None,
                    Some((suite, true)) => alternatives.push(format!("{} ", regex_escape(suite))),
                    None => alternatives.push(format!("{}$", regex_escape(title))),
                }
                left.push(id.clone());
            }
            if alternatives.is_empty() {
                return None;
            }
            let pattern = format!("^(?:{})", alternatives.join("|"));
            (
                MOCHA_REPORT,
                format!(" --grep {} --invert", quote(&pattern)),
            )
        }
        _ => return None,
    };
    let at = command.run.find(anchor)?;
    let mut command = command.clone();
    command.run.insert_str(at, &words);
    Some((command, left))
}

/// The full title in a mocha id: ids are `<file>::<full title>` when the report names the
/// file (a path, or a script at the root: `test.js`).
fn mocha_title(id: &str) -> &str {
    const SCRIPTS: [&str; 7] = [".js", ".mjs", ".cjs", ".ts", ".mts", ".cts", ".coffee"];
    match id.split_once("::") {
        Some((file, title)) if file.contains('/') || SCRIPTS.iter().any(|e| file.ends_with(e)) => {
            title
        }
        _ => id,
    }
}

/// The full title of the suite a mocha hook's full title names (`<suite> "before each" hook
/// for "x"`; mocha 7 on: `"before each" hook: name for "x"`), and whether the hook runs before
/// the tests, when it is a hook's.
fn hooked_suite(full_title: &str) -> Option<(&str, bool)> {
    [
        ("\"before each\" hook", true),
        ("\"before all\" hook", true),
        ("\"after each\" hook", false),
        ("\"after all\" hook", false),
    ]
    .iter()
    .filter_map(|(hook, before)| full_title.find(hook).map(|at| (at, *before)))
    .min()
    .map(|(at, before)| (full_title[..at].trim_end(), before))
}

/// `text` as a JavaScript regular expression that matches it literally.
fn regex_escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\^$.|?*+()[]{}/".contains(c) {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
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

    #[test]
    fn mocha_runs_the_touched_directories_in_place_of_the_scripts_specs() {
        let root = checkout(&[
            "test/app.js",
            "test/acceptance/auth.js",
            "test/unit/deep/x.spec.js",
            "test/support/env.js",
            "lib/index.js",
        ]);
        let run = |files: &[&str], specs: &[&str], config: bool| {
            mocha_selection(
                root.path(),
                TestScope::Touched,
                &files.iter().map(|f| (*f).to_string()).collect::<Vec<_>>(),
                &specs.iter().map(|f| (*f).to_string()).collect::<Vec<_>>(),
                config,
            )
            .map(|(args, _)| args)
        };
        // express's shape: two directories; a file of the first runs it alone.
        assert_eq!(
            run(&["test/app.js"], &["test/", "test/acceptance/"], false),
            Some(vec!["test/".to_string()])
        );
        assert_eq!(
            run(
                &["test/acceptance/auth.js"],
                &["test/", "test/acceptance/"],
                false
            ),
            Some(vec!["test/acceptance/".to_string()])
        );
        // A glob keeps its pattern below the touched directory; a directory the patch adds
        // is the nearest that exists.
        assert_eq!(
            run(
                &["test/unit/deep/new/y.spec.js"],
                &["'test/**/*.spec.js'"],
                false
            ),
            Some(vec!["'test/unit/deep/**/*.spec.js'".to_string()])
        );
        // The same files as the script, a spec of mocha's config, no spec on the command
        // line, a touched file under no spec, the whole scope: what the script runs.
        assert_eq!(run(&["test/app.js"], &["test"], false), None);
        assert_eq!(run(&["test/app.js"], &["./test/"], false), None);
        assert_eq!(
            run(&["test/app.js"], &["test", "test/unit"], false),
            Some(vec!["test/".to_string()])
        );
        assert_eq!(
            run(&["test/app.js"], &["test/app.js", "test/unit"], false),
            Some(vec!["test/app.js".to_string()])
        );
        assert_eq!(run(&["test/app.js"], &["test/"], true), None);
        assert_eq!(run(&["test/app.js"], &[], false), None);
        assert_eq!(run(&["lib/index.js"], &["test/"], false), None);
        assert_eq!(
            mocha_selection(
                root.path(),
                TestScope::All,
                &["test/app.js".to_string()],
                &["test/".to_string(), "test/acceptance/".to_string()],
                false
            ),
            None
        );
        // A spec at the root: a file there selects the same.
        assert_eq!(run(&["a.spec.js"], &["'**/*.spec.js'"], false), None);
        // auto: only a large suite is narrowed.
        assert_eq!(
            mocha_selection(
                root.path(),
                TestScope::Auto,
                &["test/app.js".to_string()],
                &["test/".to_string(), "test/acceptance/".to_string()],
                false
            ),
            None
        );
    }

    #[test]
    fn mocha_leaves_out_failed_tests_and_the_suites_of_failed_hooks() {
        let command = TestCommand::plain(format!("npx mocha --require x{MOCHA_REPORT} 2>&1"));
        let tests = [
            "/testbed/test/a.js::Client fetches (v1.2)".to_string(),
            "test.js::Root fetches".to_string(),
            "Plugins: installed \"before each\" hook for \"keeps semver\"".to_string(),
            "Plugins: cleanup \"after all\" hook".to_string(),
        ];
        let (narrowed, left) = leave_out(&command, "mocha-json", &tests, &[]).unwrap();
        assert_eq!(
            narrowed.run,
            "npx mocha --require x --grep '^(?:Client fetches \\(v1\\.2\\)$|Root fetches$|Plugins: installed )' \
             --invert --reporter json 2>&1"
        );
        // The tests an after hook follows ran: it is not left out.
        assert_eq!(left, tests[..3]);
        // A root hook guards every test; a command that already selects by name keeps it.
        let root = ["\"before all\" hook for \"x\"".to_string()];
        assert_eq!(leave_out(&command, "mocha-json", &root, &[]), None);
        let grep = TestCommand::plain(format!("npx mocha --grep fast{MOCHA_REPORT} 2>&1"));
        assert_eq!(leave_out(&grep, "mocha-json", &tests, &[]), None);
        assert_eq!(leave_out(&command, "mocha-json", &tests[3..], &[]), None);
        assert_eq!(
            hooked_suite("A b \"after all\" hook: stop for \"c\""),
            Some(("A b", false))
        );
        assert_eq!(hooked_suite("A b \"c\""), None);
    }

    #[test]
    fn jest_and_vitest_leave_out_tests_by_their_full_names() {
        let tests = ["src/a.test.js::api › fetch › gets [1]".to_string()];
        let jest = TestCommand::plain(format!(
            "npx jest src{JEST_REPORT} --outputFile=/tmp/kiln-jest.json 2>&1"
        ));
        assert_eq!(
            leave_out(&jest, "jest-json", &tests, &[]).unwrap().0.run,
            "npx jest src --testNamePattern '^(?!(?:api fetch gets \\[1\\])$)' --ci --json \
             --outputFile=/tmp/kiln-jest.json 2>&1"
        );
        let vitest = TestCommand::plain(format!("npx vitest run{VITEST_REPORT} 2>&1"));
        assert!(
            leave_out(&vitest, "vitest-json", &tests, &[])
                .unwrap()
                .0
                .run
                .starts_with("npx vitest run --testNamePattern '^(?!(?:api fetch gets")
        );
        let named = TestCommand::plain(format!("npx jest -t slow{JEST_REPORT} 2>&1"));
        assert_eq!(leave_out(&named, "jest-json", &tests, &[]), None);
        assert_eq!(leave_out(&jest, "tap", &tests, &[]), None);
    }
}
