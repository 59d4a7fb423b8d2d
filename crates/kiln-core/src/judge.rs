//! Whether a change to a file changes what judges the tests: the one answer to that question,
//! asked of a gold patch's effect (validate), of what an environment left in the checkout
//! (launch, and every validation run), and of each command of the launch agent or a recipe.
//!
//! The question is asked of *effects*: a path and its content before and after, as git's trees
//! or the container's files give them, never of the text that made the change (a diff's headers,
//! a command's words). What judges the tests:
//! - a test file (the rule that splits a pull request into patch and test patch,
//!   [`crate::paths`]);
//! - a file whose name alone makes it test configuration: `conftest.py` at any depth,
//!   `pytest.ini`, `jest.config.*`, `.mocharc*`, `vitest.config.*`, `*.pth`,
//!   `sitecustomize.py`, Cargo's `.cargo/config.toml` (a test runner wrapper), ...
//!   ([`is_test_configuration`]);
//! - the test settings of a manifest shared by code and tests, compared as documents before and
//!   after: INI sections with their continuation lines (`setup.cfg`'s `[tool:pytest]` and
//!   `pytest11` entry points, `tox.ini`'s `[pytest]` and `[testenv*]` commands),
//!   `pyproject.toml`'s `[tool.pytest*]` and `pytest11` entry points, `setup.py`'s `pytest11`
//!   lines, `package.json`'s `jest`/`mocha`/`ava`/`vitest`/`c8`/`nyc` keys and test scripts,
//!   Cargo's `[[test]]`, `[lib] test`/`harness`/`doctest`, `autotests`, `[profile.test]` and
//!   dev-dependencies, CMake's `add_test`/`enable_testing`/`include(CTest)`/test discovery and
//!   whatever names `BUILD_TESTING` ([`test_settings`]). Re-indenting or re-ordering a document
//!   changes none of them.

use std::collections::BTreeMap;

/// What a path holds on one side of a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Content<'a> {
    /// A regular file and its bytes.
    File(&'a [u8]),
    /// A symbolic link and its target.
    Symlink(&'a str),
    /// Something else (a submodule's commit, a directory): no document to compare.
    Other,
}

/// A path and what it holds before and after a change (`None`: absent on that side).
#[derive(Debug, Clone, Copy)]
pub struct FileChange<'a> {
    /// The path, relative to the repository root, `/`-separated.
    pub path: &'a str,
    /// Before the change.
    pub before: Option<Content<'a>>,
    /// After the change.
    pub after: Option<Content<'a>>,
}

/// File names (lower-cased) that configure a test runner or the interpreter the tests run in.
const CONFIG_NAMES: &[&str] = &[
    "conftest.py",
    "pytest.ini",
    ".pytest.ini",
    "pytest.toml",
    ".pytest.toml",
    "sitecustomize.py",
    "usercustomize.py",
    "noxfile.py",
    "karma.conf.js",
    "jasmine.json",
    ".nycrc",
    ".nycrc.json",
    ".nycrc.yml",
    ".c8rc",
    ".c8rc.json",
    "phpunit.xml",
    "phpunit.xml.dist",
    "ctesttestfile.cmake",
    "ava.config.js",
    ".taprc",
];

/// Name prefixes (lower-cased) of test runner configuration files (`jest.config.ts`,
/// `.mocharc.yml`).
const CONFIG_PREFIXES: &[&str] = &[
    "jest.config.",
    "jest.setup.",
    "vitest.config.",
    "vitest.workspace.",
    "vitest.setup.",
    ".mocharc",
    "karma.conf.",
    "playwright.config.",
    "cypress.config.",
    "ava.config.",
];

/// Extensions (lower-cased) whose files configure the interpreter: a `.pth` file in a site
/// directory runs its `import` lines at every start.
const CONFIG_EXTENSIONS: &[&str] = &["pth"];

/// Environment variables that configure a test runner whatever their value.
const TEST_VARIABLES: &[&str] = &[
    "PYTEST_ADDOPTS",
    "PYTEST_PLUGINS",
    "LD_PRELOAD",
    "JEST_CONFIG",
    "MOCHA_OPTIONS",
];

/// Options of Node's `NODE_OPTIONS` that load code into every process (the rest, such as
/// `--openssl-legacy-provider` or `--max-old-space-size`, only tune it).
const NODE_LOADERS: &[&str] = &[
    "--require",
    "-r",
    "--import",
    "--loader",
    "--experimental-loader",
];

fn file_name(path: &str) -> String {
    path.rsplit('/').next().unwrap_or(path).to_ascii_lowercase()
}

/// Whether the path alone makes a file test configuration (a runner's config file, a
/// `conftest.py` at any depth, a `.pth` file, `sitecustomize.py`, Cargo's `.cargo/config*`).
#[must_use]
pub fn is_test_configuration(path: &str) -> bool {
    let name = file_name(path);
    let extension = name.rsplit_once('.').map_or("", |(_, e)| e);
    let lower = path.to_ascii_lowercase();
    CONFIG_NAMES.contains(&name.as_str())
        || CONFIG_PREFIXES.iter().any(|p| name.starts_with(p))
        || CONFIG_EXTENSIONS.contains(&extension)
        || lower == ".cargo/config"
        || lower == ".cargo/config.toml"
        || lower.ends_with("/.cargo/config")
        || lower.ends_with("/.cargo/config.toml")
}

/// Whether setting the environment variable `name` to `value` configures the tests
/// (`PYTEST_ADDOPTS`, a Cargo target runner, `NODE_OPTIONS` that loads a module, ...).
#[must_use]
pub fn is_test_variable(name: &str, value: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    if upper == "NODE_OPTIONS" || upper == "NPM_CONFIG_NODE_OPTIONS" {
        return value.split_whitespace().any(|word| {
            NODE_LOADERS
                .iter()
                .any(|l| word == *l || word.starts_with(&format!("{l}=")))
        });
    }
    TEST_VARIABLES.contains(&upper.as_str())
        || (upper.starts_with("CARGO_TARGET_") && upper.ends_with("_RUNNER"))
}

/// The kinds of shared manifests whose test settings are compared as documents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Manifest {
    SetupCfg,
    ToxIni,
    Pyproject,
    SetupPy,
    PackageJson,
    CargoToml,
    Cmake,
}

fn manifest(path: &str) -> Option<Manifest> {
    let name = file_name(path);
    Some(match name.as_str() {
        "setup.cfg" => Manifest::SetupCfg,
        "tox.ini" => Manifest::ToxIni,
        "pyproject.toml" => Manifest::Pyproject,
        "setup.py" => Manifest::SetupPy,
        "package.json" => Manifest::PackageJson,
        "cargo.toml" => Manifest::CargoToml,
        "cmakelists.txt" => Manifest::Cmake,
        _ if name.ends_with(".cmake") => Manifest::Cmake,
        _ => return None,
    })
}

/// Whether `path` is a manifest shared by code and tests whose test settings [`judge`]
/// compares (`setup.cfg`, `pyproject.toml`, `package.json`, `Cargo.toml`, CMake files, ...).
#[must_use]
pub fn is_shared_manifest(path: &str) -> bool {
    manifest(path).is_some()
}

/// Why changing this file changes what judges the tests, or `None` when it does not.
/// `language` is the repository's (as its rows name it; empty when unknown).
#[must_use]
pub fn judge(change: &FileChange<'_>, language: &str) -> Option<String> {
    let path = change.path;
    if change.before == change.after {
        return None;
    }
    if is_test_configuration(path) {
        return Some(format!("the test configuration {path}"));
    }
    if crate::paths::is_test_path(path, language) {
        return Some(format!("the test file {path}"));
    }
    let kind = manifest(path)?;
    let text = |side: Option<Content<'_>>| -> Result<String, &'static str> {
        match side {
            None => Ok(String::new()),
            Some(Content::File(bytes)) => Ok(String::from_utf8_lossy(bytes).into_owned()),
            Some(Content::Symlink(_) | Content::Other) => Err("not a regular file"),
        }
    };
    let (before, after) = match (text(change.before), text(change.after)) {
        (Ok(before), Ok(after)) => (before, after),
        // A manifest that becomes (or stops being) a link or a directory: what the runner reads
        // is no longer the document it was.
        _ => {
            return Some(format!(
                "the test settings of {path}: it is no longer the same kind of file"
            ));
        }
    };
    let settings = |text: &str| test_settings(kind, text);
    match (settings(&before), settings(&after)) {
        (Ok(old), Ok(new)) => differing(&old, &new)
            .map(|key| format!("a test setting in {path} (`{}`)", crate::shown(&key))),
        (Ok(_), Err(why)) => Some(format!(
            "the test settings of {path}: after the change it cannot be read ({why})"
        )),
        // Unreadable before: the lines that name a test setting decide, as words.
        (Err(_), _) => {
            let old = keyword_lines(kind, &before);
            let new = keyword_lines(kind, &after);
            differing(&old, &new)
                .map(|key| format!("a test setting in {path} (`{}`)", crate::shown(&key)))
        }
    }
}

/// The first key whose value differs between two setting maps.
fn differing(old: &BTreeMap<String, String>, new: &BTreeMap<String, String>) -> Option<String> {
    old.iter()
        .find(|(k, v)| new.get(*k) != Some(v))
        .map(|(k, _)| k.clone())
        .or_else(|| new.keys().find(|k| !old.contains_key(*k)).cloned())
}

/// The test settings a manifest holds, as a map from a key (`[tool:pytest] addopts`) to its
/// value with whitespace normalised; an error when the document cannot be read.
fn test_settings(kind: Manifest, text: &str) -> Result<BTreeMap<String, String>, String> {
    match kind {
        Manifest::SetupCfg => Ok(ini_settings(text, |section, key| {
            matches!(section, "tool:pytest" | "pytest")
                || (section == "options.entry_points" && key == "pytest11")
        })),
        Manifest::ToxIni => Ok(ini_settings(text, |section, key| {
            section == "pytest"
                || (section.starts_with("testenv")
                    && matches!(key, "commands" | "commands_pre" | "setenv"))
        })),
        Manifest::Pyproject => toml_settings(
            text,
            &[
                &["tool", "pytest"],
                &["project", "entry-points", "pytest11"],
                &["tool", "poetry", "plugins", "pytest11"],
            ],
        ),
        Manifest::CargoToml => {
            let mut settings = toml_settings(
                text,
                &[
                    &["test"],
                    &["lib", "test"],
                    &["lib", "harness"],
                    &["lib", "doctest"],
                    &["package", "autotests"],
                    &["profile", "test"],
                    &["dev-dependencies"],
                    &["dev_dependencies"],
                ],
            )?;
            // Platform-specific dev-dependencies: `[target.'cfg(unix)'.dev-dependencies]`.
            if let Ok(root) = text.parse::<toml::Table>()
                && let Some(toml::Value::Table(targets)) = root.get("target")
            {
                for (target, value) in targets {
                    for key in ["dev-dependencies", "dev_dependencies"] {
                        if let Some(deps) = value.get(key) {
                            settings.insert(format!("target.{target}.{key}"), deps.to_string());
                        }
                    }
                }
            }
            Ok(settings)
        }
        Manifest::PackageJson => json_settings(text),
        Manifest::SetupPy => Ok(keyword_lines(kind, text)),
        Manifest::Cmake => Ok(cmake_settings(text)),
    }
}

/// The settings of the INI sections and keys `wanted` picks, continuation lines included, as
/// Python's `configparser` (setuptools) and `iniconfig` (pytest) read them: a line that starts
/// with whitespace continues the value above it; `#` and `;` start whole-line comments.
fn ini_settings(text: &str, wanted: impl Fn(&str, &str) -> bool) -> BTreeMap<String, String> {
    let mut settings = BTreeMap::new();
    let mut section = String::new();
    let mut key: Option<String> = None;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with(';') {
            continue;
        }
        let continues = line.starts_with([' ', '\t']);
        if continues && let Some(key) = &key {
            if let Some(value) = settings.get_mut(key) {
                let value: &mut String = value;
                value.push('\n');
                value.push_str(&words(trimmed));
            }
            continue;
        }
        if let Some(name) = trimmed
            .strip_prefix('[')
            .and_then(|rest| rest.strip_suffix(']'))
        {
            section = name.trim().to_ascii_lowercase();
            key = None;
            // A section that is there, even empty, is a setting: pytest reads an empty
            // `[tool:pytest]` as the place its configuration lives (the rootdir).
            if wanted(&section, "") {
                settings.insert(format!("[{section}]"), String::new());
            }
            continue;
        }
        let (name, value) = match trimmed.find(['=', ':']) {
            Some(at) => (&trimmed[..at], &trimmed[at + 1..]),
            None => (trimmed, ""),
        };
        let name = name.trim().to_ascii_lowercase();
        if wanted(&section, &name) {
            let full = format!("[{section}] {name}");
            settings.insert(full.clone(), words(value.trim()));
            key = Some(full);
        } else {
            key = None;
        }
    }
    settings
}

/// The values at `paths` of a TOML document, rendered canonically.
fn toml_settings(text: &str, paths: &[&[&str]]) -> Result<BTreeMap<String, String>, String> {
    let root: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| e.message().chars().take(200).collect::<String>())?;
    let mut settings = BTreeMap::new();
    for path in paths {
        let Some((first, rest)) = path.split_first() else {
            continue;
        };
        let mut value = root.get(*first);
        for key in rest {
            value = value.and_then(|v| v.get(*key));
        }
        if let Some(value) = value {
            settings.insert(path.join("."), value.to_string());
        }
    }
    Ok(settings)
}

/// `package.json`'s test runner keys and test scripts.
fn json_settings(text: &str) -> Result<BTreeMap<String, String>, String> {
    let root: serde_json::Value = if text.trim().is_empty() {
        serde_json::Value::Object(serde_json::Map::new())
    } else {
        serde_json::from_str(text).map_err(|e| e.to_string())?
    };
    let mut settings = BTreeMap::new();
    for key in ["jest", "mocha", "ava", "vitest", "c8", "nyc", "tap"] {
        if let Some(value) = root.get(key) {
            settings.insert(key.to_string(), value.to_string());
        }
    }
    for script in ["test", "pretest", "posttest"] {
        if let Some(value) = root.get("scripts").and_then(|s| s.get(script)) {
            settings.insert(format!("scripts.{script}"), value.to_string());
        }
    }
    Ok(settings)
}

/// Words that mark a test setting in a line, per manifest, for documents that cannot be read
/// as their format (or, for `setup.py`, that are programs).
fn keywords(kind: Manifest) -> &'static [&'static str] {
    match kind {
        Manifest::SetupCfg => &[
            "[tool:pytest]",
            "[pytest]",
            "addopts",
            "testpaths",
            "pytest11",
        ],
        Manifest::ToxIni => &["[pytest]", "[testenv", "addopts", "testpaths", "commands"],
        Manifest::Pyproject => &["[tool.pytest", "addopts", "testpaths", "pytest11"],
        Manifest::SetupPy => &["pytest11"],
        Manifest::PackageJson => &[
            "\"jest\"",
            "\"mocha\"",
            "\"ava\"",
            "\"vitest\"",
            "\"test\":",
        ],
        Manifest::CargoToml => &["[dev-dependencies", "[[test]]", "harness"],
        Manifest::Cmake => &["enable_testing", "add_test", "build_testing", "ctest"],
    }
}

/// The lines of `text` that name one of the manifest's test keywords, counted (whitespace
/// normalised, so that re-indenting changes nothing).
fn keyword_lines(kind: Manifest, text: &str) -> BTreeMap<String, String> {
    let keys = keywords(kind);
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for line in text.lines() {
        let lower = line.to_ascii_lowercase();
        if keys.iter().any(|k| lower.contains(&k.to_ascii_lowercase())) {
            *counts.entry(words(line)).or_default() += 1;
        }
    }
    counts
        .into_iter()
        .map(|(line, n)| (line, n.to_string()))
        .collect()
}

/// CMake commands that define or steer tests.
const CMAKE_TEST_COMMANDS: &[&str] = &[
    "enable_testing",
    "add_test",
    "set_tests_properties",
    "gtest_discover_tests",
    "gtest_add_tests",
    "catch_discover_tests",
    "doctest_discover_tests",
];

/// The invocations of CMake's test commands, `include(CTest)`, `set_property(TEST ...)` and
/// any command whose arguments name `BUILD_TESTING` or `CTEST_`, each with its arguments'
/// words normalised, counted.
fn cmake_settings(text: &str) -> BTreeMap<String, String> {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for (name, arguments) in cmake_commands(text) {
        let upper = arguments.to_ascii_uppercase();
        let first = upper.split_whitespace().next().unwrap_or_default();
        let wanted = CMAKE_TEST_COMMANDS.contains(&name.as_str())
            || (name == "include" && first == "CTEST")
            || (name == "set_property" && first == "TEST")
            || upper.contains("BUILD_TESTING")
            || upper.contains("CTEST_");
        if wanted {
            *counts.entry(format!("{name}({arguments})")).or_default() += 1;
        }
    }
    counts
        .into_iter()
        .map(|(call, n)| (call, n.to_string()))
        .collect()
}

/// The command invocations of a CMake file: the lower-cased name and the arguments' words,
/// with comments dropped and parentheses balanced across lines.
fn cmake_commands(text: &str) -> Vec<(String, String)> {
    let mut commands = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '#' {
            // A bracket comment `#[[ ... ]]` or a line comment.
            if chars.get(i + 1) == Some(&'[') && chars.get(i + 2) == Some(&'[') {
                let rest: String = chars[i..].iter().collect();
                i += rest.find("]]").map_or(chars.len(), |end| end + 2);
            } else {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let name: String = chars[start..i].iter().collect();
            let mut j = i;
            while j < chars.len() && (chars[j] == ' ' || chars[j] == '\t') {
                j += 1;
            }
            if chars.get(j) != Some(&'(') {
                continue;
            }
            let mut depth = 0usize;
            let mut arguments = String::new();
            let mut in_quote = false;
            while j < chars.len() {
                let ch = chars[j];
                if in_quote {
                    if ch == '\\' {
                        arguments.push(ch);
                        j += 1;
                        if let Some(&next) = chars.get(j) {
                            arguments.push(next);
                        }
                    } else {
                        if ch == '"' {
                            in_quote = false;
                        }
                        arguments.push(ch);
                    }
                } else if ch == '"' {
                    in_quote = true;
                    arguments.push(ch);
                } else if ch == '#' {
                    while j < chars.len() && chars[j] != '\n' {
                        j += 1;
                    }
                    arguments.push(' ');
                    continue;
                } else if ch == '(' {
                    depth += 1;
                    if depth > 1 {
                        arguments.push(ch);
                    }
                } else if ch == ')' {
                    depth -= 1;
                    if depth == 0 {
                        j += 1;
                        break;
                    }
                    arguments.push(ch);
                } else {
                    arguments.push(ch);
                }
                j += 1;
            }
            commands.push((name.to_ascii_lowercase(), words(&arguments)));
            i = j;
            continue;
        }
        i += 1;
    }
    commands
}

/// `text` with runs of whitespace made one space, trimmed.
fn words(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Whether a changed line is blank or a comment in a file named `path`.
#[must_use]
pub fn is_comment_or_blank(line: &str, path: &str) -> bool {
    let line = line.trim();
    if line.is_empty() {
        return true;
    }
    let name = file_name(path);
    let extension = name.rsplit_once('.').map_or("", |(_, e)| e);
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

/// Whether `path` is documentation: changing it alone changes no code.
#[must_use]
pub fn is_documentation(path: &str) -> bool {
    let name = file_name(path);
    let extension = name.rsplit_once('.').map_or("", |(_, e)| e);
    ["md", "rst", "adoc"].contains(&extension)
}

/// Whether a change changes code: a file whose added or removed lines are not all blank or
/// comments, and is not documentation. A change with no line to compare (a binary file, a
/// link, an empty file added, a mode change) counts as code.
#[must_use]
pub fn changes_code(change: &FileChange<'_>) -> bool {
    if is_documentation(change.path) {
        return false;
    }
    let lines = |side: Option<Content<'_>>| -> Option<Vec<String>> {
        match side {
            None => Some(Vec::new()),
            Some(Content::File(bytes)) => std::str::from_utf8(bytes)
                .ok()
                .map(|text| text.lines().map(str::to_string).collect()),
            Some(Content::Symlink(_) | Content::Other) => None,
        }
    };
    let (Some(before), Some(after)) = (lines(change.before), lines(change.after)) else {
        return true;
    };
    let mut remaining: BTreeMap<&str, isize> = BTreeMap::new();
    for line in &before {
        *remaining.entry(line.as_str()).or_default() += 1;
    }
    for line in &after {
        *remaining.entry(line.as_str()).or_default() -= 1;
    }
    let changed: Vec<&str> = remaining
        .iter()
        .filter(|(_, n)| **n != 0)
        .map(|(line, _)| *line)
        .collect();
    changed.is_empty() || changed.iter().any(|l| !is_comment_or_blank(l, change.path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(before: &str, after: &str, path: &str) -> Option<String> {
        fn side(text: &str) -> Option<Content<'_>> {
            (!text.is_empty()).then_some(Content::File(text.as_bytes()))
        }
        let (before, after) = (side(before), side(after));
        judge(
            &FileChange {
                path,
                before,
                after,
            },
            "python",
        )
    }

    #[test]
    fn names_alone_make_test_configuration_at_any_depth() {
        for path in [
            "conftest.py",
            "tests/unit/conftest.py",
            "pkg/sub/CONFTEST.PY",
            "pytest.ini",
            "jest.config.mjs",
            ".mocharc.yml",
            "vitest.config.ts",
            "site-packages/evil.pth",
            "sitecustomize.py",
            "lib/usercustomize.py",
            ".cargo/config.toml",
            "crates/x/.cargo/config",
        ] {
            assert!(is_test_configuration(path), "{path}");
        }
        for path in [
            "setup.cfg",
            "src/config.py",
            "cargo/config.toml",
            "paths.txt",
        ] {
            assert!(!is_test_configuration(path), "{path}");
        }
    }

    #[test]
    fn a_continuation_line_under_addopts_is_a_test_setting() {
        let before = "[metadata]\nname = x\n\n[tool:pytest]\naddopts =\n    -ra\n    --strict\n";
        let after = "[metadata]\nname = x\n\n[tool:pytest]\naddopts =\n    -ra\n    --strict\n    -p pkg._forcepass\n";
        let why = file(before, after, "setup.cfg");
        assert!(
            why.as_deref()
                .is_some_and(|w| w.contains("[tool:pytest] addopts")),
            "{why:?}"
        );
        // The metadata section's continuation lines are not test settings.
        let before = "[metadata]\nclassifiers =\n    A\n[tool:pytest]\naddopts = -ra\n";
        let after = "[metadata]\nclassifiers =\n    A\n    B\n[tool:pytest]\naddopts = -ra\n";
        assert_eq!(file(before, after, "setup.cfg"), None);
        // Re-indenting changes nothing.
        let after = "[metadata]\nclassifiers =\n    A\n[tool:pytest]\naddopts =   -ra\n";
        assert_eq!(file(before, after, "setup.cfg"), None);
    }

    #[test]
    fn entry_points_and_documents_of_every_manifest() {
        let plugin = "[options.entry_points]\npytest11 =\n    force = pkg.force\n";
        assert!(file("", plugin, "setup.cfg").is_some());
        let toml_before = "[project]\nname = \"x\"\n";
        let toml_after =
            "[project]\nname = \"x\"\n[project.entry-points.pytest11]\nforce = \"pkg.force\"\n";
        assert!(file(toml_before, toml_after, "pyproject.toml").is_some());
        let pytest_table = "[tool.pytest.ini_options]\naddopts = \"-q\"\n";
        assert!(file(toml_before, pytest_table, "pyproject.toml").is_some());
        let deps = "[project]\nname = \"x\"\ndependencies = [\"attrs\"]\n";
        assert_eq!(file(toml_before, deps, "pyproject.toml"), None);
        // An inner line of package.json's "jest" block.
        let jest_before =
            "{\n  \"name\": \"x\",\n  \"jest\": {\n    \"testMatch\": [\"**/*.test.js\"]\n  }\n}\n";
        let jest_after =
            "{\n  \"name\": \"x\",\n  \"jest\": {\n    \"testMatch\": [\"**/none\"]\n  }\n}\n";
        assert!(
            file(jest_before, jest_after, "package.json").is_some_and(|w| w.contains("`jest`"))
        );
        let bump = jest_before.replace("\"x\"", "\"y\"");
        assert_eq!(file(jest_before, &bump, "package.json"), None);
        // An inner line of a Cargo [[test]] table.
        let cargo_before = "[package]\nname = \"x\"\n\n[[test]]\nname = \"it\"\nharness = true\n";
        let cargo_after = "[package]\nname = \"x\"\n\n[[test]]\nname = \"it\"\nharness = false\n";
        assert!(file(cargo_before, cargo_after, "Cargo.toml").is_some());
        let version = cargo_before.replace("name = \"x\"", "name = \"x\"\nversion = \"2.0.0\"");
        assert_eq!(file(cargo_before, &version, "Cargo.toml"), None);
        // CMake: a test added; an option re-aligned is no change.
        let cmake =
            "project(x)\noption(X_Tests \"Build the tests when BUILD_TESTING is on.\" ON)\n";
        let aligned = "project(x)\noption(X_Tests   \"Build the tests when BUILD_TESTING is on.\" ON)\noption(X_Legacy \"Legacy.\" OFF)\n";
        assert_eq!(file(cmake, aligned, "CMakeLists.txt"), None);
        let test_added = format!("{cmake}enable_testing()\nadd_test(NAME all\n  COMMAND t)\n");
        assert!(file(cmake, &test_added, "CMakeLists.txt").is_some());
        let commented = format!("{cmake}# add_test(NAME all COMMAND t)\n");
        assert_eq!(file(cmake, &commented, "CMakeLists.txt"), None);
        // setup.py: only the pytest11 entry point lines.
        assert!(
            file(
                "setup(name='x')\n",
                "setup(name='x', entry_points={'pytest11': ['f = pkg.f']})\n",
                "setup.py"
            )
            .is_some()
        );
        assert_eq!(
            file(
                "setup(name='x')\n",
                "setup(name='x', version='2')\n",
                "setup.py"
            ),
            None
        );
    }

    #[test]
    fn manifests_that_stop_parsing_or_stop_being_files_judge() {
        let before = "{\"name\": \"x\", \"scripts\": {\"test\": \"jest\"}}";
        assert!(file(before, "{\"name\": ", "package.json").is_some());
        let link = judge(
            &FileChange {
                path: "setup.cfg",
                before: Some(Content::File(b"[tool:pytest]\n")),
                after: Some(Content::Symlink("other.cfg")),
            },
            "python",
        );
        assert!(link.is_some());
        assert!(file("x = 1\n", "x = 2\n", "tests/test_x.py").is_some());
        assert_eq!(file("x = 1\n", "x = 2\n", "src/x.py"), None);
    }

    #[test]
    fn variables_that_configure_tests() {
        for (name, value) in [
            ("PYTEST_ADDOPTS", "-p force"),
            ("NODE_OPTIONS", "--require ./force.js"),
            (
                "NODE_OPTIONS",
                "--import=./force.mjs --max-old-space-size=4096",
            ),
            ("CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER", "./pass"),
            ("LD_PRELOAD", "/tmp/x.so"),
        ] {
            assert!(is_test_variable(name, value), "{name}={value}");
        }
        for (name, value) in [
            ("RUSTFLAGS", "-A warnings"),
            ("PATH", "/usr/bin"),
            ("DJANGO_SETTINGS_MODULE", "tests.settings"),
            ("NODE_OPTIONS", "--openssl-legacy-provider"),
        ] {
            assert!(!is_test_variable(name, value), "{name}={value}");
        }
    }

    #[test]
    fn code_is_told_from_comments_and_documentation() {
        let change = |path, before: &'static str, after: &'static str| FileChange {
            path,
            before: Some(Content::File(before.as_bytes())),
            after: Some(Content::File(after.as_bytes())),
        };
        assert!(changes_code(&change("src/x.py", "x = 1\n", "x = 2\n")));
        assert!(!changes_code(&change(
            "src/x.py",
            "x = 1\n",
            "# note\nx = 1\n\n"
        )));
        assert!(!changes_code(&change("README.md", "a\n", "b\n")));
        // An empty module added (a package's __init__.py) is code.
        assert!(changes_code(&FileChange {
            path: "src/pkg/__init__.py",
            before: None,
            after: Some(Content::File(b"")),
        }));
        // A line moved is no change of lines, but still a change: code.
        assert!(changes_code(&change(
            "src/x.py",
            "a = 1\nb = 2\n",
            "b = 2\na = 1\n"
        )));
    }
}
