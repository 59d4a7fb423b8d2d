//! Whether the runs reported the tests the test patch's files define: an environment that
//! cannot import a test module (a missing optional package, a plugin that breaks collection)
//! loses that module's tests silently, and FAIL_TO_PASS and PASS_TO_PASS shrink with it.
//!
//! The tests a file defines are read from the file itself, as the patched commit holds it (no
//! container, no extra run), in the test files of the row's language that its runner collects
//! (a test patch that also edits another language's tests is not judged by a runner that never
//! reads them; files under `testdata/`, `fixtures/`, `data/`, `resources/` and the like are
//! data):
//! - Python: `def test…` in `test*.py` / `*_test.py` modules (not `conftest.py`), at module level
//!   (not for a `unittest` runner) or in classes only, not nested in a function, not a
//!   `@fixture`, not in a triple-quoted string;
//! - Go: `func Test…(t *testing.T)` in `_test.go` files built here (no build constraint, no
//!   other OS's or architecture's suffix);
//! - Rust: functions under a `#[…test]` attribute, none under a `#[cfg(…)]` (on the function,
//!   a module or the crate), none in a raw string;
//! - Java: `@Test` methods without a `@DisplayName`;
//! - JavaScript and TypeScript: the literal titles of `it(…)` / `test(…)` calls.
//!
//! Comment lines are left out. A name is reported when a test id of the `after` runs holds it
//! as a whole word (a title: as a substring) in its test part, among the ids of the same file
//! where the runner names files (pytest, Jest, mocha): a parametrised `test_parse[a-1]`, a
//! class method `TestX::test_parse`, a subtest `TestParse/empty` and a nested `describe › it`
//! title all count for their definition, while an id that is a file alone (a module that
//! failed to import) counts for none. Names the language builds at run time (template titles,
//! `test.each`) are not read, so they neither count nor go missing. C and C++ files define
//! nothing here (their suites are often driven through CTest names unrelated to the source):
//! the signal is then absent, not zero.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;

use super::listing::{Listing, same_file};

/// At most this many missing names are kept in the row; the rest are counted.
pub const LISTED_MISSING: usize = 50;

/// What the test patch's files define and how much of it the runs reported.
#[derive(Debug, Clone, PartialEq)]
pub struct Collected {
    /// Test names defined (per file, a name once).
    pub defined: usize,
    /// Of those, the names some run reported.
    pub reported: usize,
    /// The names not reported, as `path::name`, at most [`LISTED_MISSING`].
    pub missing: Vec<String>,
}

impl Collected {
    /// The share of defined tests reported, in [0, 1].
    #[must_use]
    pub fn share(&self) -> f64 {
        if self.defined == 0 {
            return 1.0;
        }
        #[allow(clippy::cast_precision_loss)]
        let share = self.reported as f64 / self.defined as f64;
        share
    }
}

/// How a language writes its test definitions.
enum Syntax {
    /// Python: `test…` functions at module level (not for a `unittest` runner, which runs
    /// only `TestCase` methods) or methods of classes, not nested in a function, not fixtures,
    /// not inside a string; matched as whole words.
    Python { module_level: bool },
    /// Rust: functions under a `#[…test]` attribute and no `#[cfg(…)]`; whole words.
    Rust,
    /// Java: `@Test` methods without a `@DisplayName` (which names the test otherwise).
    Java,
    /// Names that are identifiers: matched as whole words.
    Names(&'static LazyLock<Regex>),
    /// Titles in string literals: matched as substrings.
    Titles(&'static LazyLock<Regex>),
}

static PYTHON_DEF: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(?:async[ \t]+)?def[ \t]+(\w+)[ \t]*\(").expect("regex"));
static GO: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?m)^func[ \t]+(Test\w*)[ \t]*\([ \t]*\w+[ \t]+\*testing\.T[ \t]*\)")
        .expect("regex")
});
/// A test function with the attributes around its `#[test]` (a `#[cfg(...)]` among them may
/// leave it out of the build on this platform or with these features).
static RUST: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"((?:#\[[^\]]*\]\s*)*)#\[(?:\w+::)*test\b[^\]]*\]\s*((?:#\[[^\]]*\]\s*)*)(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?(?:unsafe\s+)?fn\s+(\w+)",
    )
    .expect("regex")
});
/// A module under a `#[cfg(...)]`: what it holds may not be built.
static RUST_GATED_MOD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"#\[cfg\(([^\]]*)\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s")
        .expect("regex")
});
static JAVA: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"((?:@\w+(?:\([^)]*\))?\s*)*)@Test\b(?:\([^)]*\))?\s*((?:@\w+(?:\([^)]*\))?\s*)*)(?:public\s+|protected\s+|private\s+)?(?:static\s+)?void\s+(\w+)\s*\(")
        .expect("regex")
});
/// `it('…')`, `test("…")`, not `it.skip`, `xit`, `obj.test(…)` or a template title.
static JS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?:^|[^.\w$])(?:it|test)\s*\(\s*(?:'((?:[^'\\\n]|\\.)*)'|"((?:[^"\\\n]|\\.)*)")"#)
        .expect("regex")
});

/// Directories whose files are data for the tests, not tests the runner collects.
const DATA_DIRS: &[&str] = &[
    "testdata",
    "fixtures",
    "fixture",
    "__fixtures__",
    "__snapshots__",
    "snapshots",
    "resources",
    "data",
    "ui",
];

/// Go's file name suffixes for operating systems and architectures other than the runs'
/// (`linux`, `amd64`): such a file is not built here.
const GO_OTHER_TARGETS: &[&str] = &[
    "windows",
    "darwin",
    "freebsd",
    "netbsd",
    "openbsd",
    "dragonfly",
    "solaris",
    "illumos",
    "aix",
    "plan9",
    "js",
    "wasip1",
    "ios",
    "android",
    "hurd",
    "zos",
    "arm",
    "arm64",
    "386",
    "ppc64",
    "ppc64le",
    "mips",
    "mipsle",
    "mips64",
    "mips64le",
    "riscv64",
    "s390x",
    "wasm",
    "loong64",
];

/// The syntax of `path`'s test definitions when it is a test file of `language`'s that the
/// row's runner (read by `parser`) collects.
fn syntax(language: &str, parser: &str, path: &str) -> Option<Syntax> {
    let (dirs, name) = path.rsplit_once('/').unwrap_or(("", path));
    if dirs.split('/').any(|d| DATA_DIRS.contains(&d)) {
        return None;
    }
    let extension = name.rsplit_once('.').map(|(_, e)| e)?;
    match (language, extension) {
        ("python", "py") => {
            // pytest's and unittest's default module patterns.
            let module =
                (name.starts_with("test") || name.ends_with("_test.py")) && name != "conftest.py";
            module.then_some(Syntax::Python {
                module_level: parser != "unittest",
            })
        }
        ("go", "go") => {
            let stem = name.strip_suffix("_test.go")?;
            let other = stem
                .rsplit('_')
                .take(2)
                .any(|part| GO_OTHER_TARGETS.contains(&part));
            (!other).then_some(Syntax::Names(&GO))
        }
        ("rust", "rs") => Some(Syntax::Rust),
        ("java" | "kotlin", "java") => Some(Syntax::Java),
        (
            "javascript" | "typescript" | "js" | "ts",
            "js" | "jsx" | "mjs" | "cjs" | "ts" | "tsx" | "mts" | "cts",
        ) => Some(Syntax::Titles(&JS)),
        _ => None,
    }
}

/// Whether what `text` defines may not be built at all: a Go build constraint, a Rust crate
/// or module under a `#[cfg(...)]` other than `test`.
fn gated(syntax: &Syntax, text: &str) -> bool {
    match syntax {
        Syntax::Names(_) => text
            .lines()
            .any(|l| l.starts_with("//go:build") || l.starts_with("// +build")),
        Syntax::Rust => {
            text.contains("#![cfg(")
                || RUST_GATED_MOD
                    .captures_iter(text)
                    .any(|c| c.get(1).is_some_and(|m| m.as_str().trim() != "test"))
        }
        _ => false,
    }
}

/// Source file extensions a runner names a test's file with (`tests/a.py::t`).
const SOURCE_EXTENSIONS: &[&str] = &[
    ".py", ".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".mts", ".cts",
];

/// A reported id split into the file it names (when it names one, as pytest, Jest and mocha
/// ids do) and the test part; `None` for an id that is a file alone (a module that failed to
/// import, a suite that failed to run): no test of it ran.
fn split_id(id: &str) -> Option<(Option<&str>, &str)> {
    match id.split_once("::") {
        Some((file, test)) if SOURCE_EXTENSIONS.iter().any(|e| file.ends_with(e)) => {
            Some((Some(file), test))
        }
        None if SOURCE_EXTENSIONS.iter().any(|e| id.ends_with(e)) => None,
        _ => Some((None, id)),
    }
}

/// Whether the file at `path` is one whose tests [`tests_collected`] counts for a row of
/// `language` read by `parser` (a test module the runner collects, not data).
#[must_use]
pub fn counted(language: &str, parser: &str, path: &str) -> bool {
    syntax(language, parser, path).is_some()
}

/// What the test patch's files (`files`: path and content at the patched commit) define and
/// how much of it `reported` (the test ids the `after` runs gave, read by `parser`) holds;
/// `None` when the files define no test kiln can read for `language`. With the runner's
/// `listing` of the files, a file's tests are the ids it lists there, found among the reported
/// ids as they are; a file it could not collect, or every file without a listing, is read from
/// its text, its tests looked for by name among the ids of that file where the runner names
/// each test's file.
#[must_use]
pub fn tests_collected<'a>(
    language: &str,
    parser: &str,
    files: &[(String, Vec<u8>)],
    listing: Option<&Listing>,
    reported: impl IntoIterator<Item = &'a str>,
) -> Option<Collected> {
    let reported: Vec<&str> = reported.into_iter().collect();
    let exact: BTreeSet<&str> = reported.iter().copied().collect();
    let reported: Vec<(Option<&str>, &str)> = reported.into_iter().filter_map(split_id).collect();
    let names_files = reported.iter().any(|(file, _)| file.is_some());
    let mut defined = 0;
    let mut found = 0;
    let mut missing = Vec::new();
    for (path, content) in files {
        let Some(syntax) = syntax(language, parser, path) else {
            continue;
        };
        if let Some(listing) = listing.filter(|listing| !listing.errored(path)) {
            for id in listing.ids_of(path) {
                defined += 1;
                if exact.contains(id) {
                    found += 1;
                } else if missing.len() < LISTED_MISSING {
                    missing.push(id.to_string());
                }
            }
            continue;
        }
        let text = String::from_utf8_lossy(content);
        if gated(&syntax, &text) {
            continue;
        }
        let of_file: Vec<&str> = reported
            .iter()
            .filter(|(file, _)| !names_files || file.is_some_and(|f| same_file(f, path)))
            .map(|(_, test)| *test)
            .collect();
        for name in &definitions(&syntax, &text) {
            defined += 1;
            let seen = match syntax {
                Syntax::Titles(_) => of_file.iter().any(|test| test.contains(name.as_str())),
                _ => of_file.iter().any(|test| holds_word(test, name)),
            };
            if seen {
                found += 1;
            } else if missing.len() < LISTED_MISSING {
                missing.push(format!("{path}::{name}"));
            }
        }
    }
    (defined > 0).then_some(Collected {
        defined,
        reported: found,
        missing,
    })
}

/// `text` without its comment-only lines (`// it('old')`, `/* @Test */`, ` * …`): C-family
/// sources.
fn without_comment_lines(text: &str) -> String {
    text.lines()
        .filter(|line| {
            let code = line.trim_start();
            !(code.starts_with("//") || code.starts_with("/*") || code.starts_with('*'))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Rust source without the contents of its raw strings (`r#"…"#`, where a test's own fixture
/// may hold `#[test] fn …`).
fn without_raw_strings(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("r#") {
        let hashes = rest[at + 1..].chars().take_while(|c| *c == '#').count();
        let open = at + 1 + hashes;
        let word_before = rest[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_');
        if !rest[open..].starts_with('"') || word_before {
            out.push_str(&rest[..open]);
            rest = &rest[open..];
            continue;
        }
        out.push_str(&rest[..at]);
        let close = format!("\"{}", "#".repeat(hashes));
        match rest[open + 1..].find(&close) {
            Some(end) => rest = &rest[open + 1 + end + close.len()..],
            None => return out,
        }
    }
    out.push_str(rest);
    out
}

/// The names (or titles) `text` defines, each once.
fn definitions(syntax: &Syntax, text: &str) -> BTreeSet<String> {
    let attributed = |regex: &Regex, code: &str, excluded: &str| -> BTreeSet<String> {
        regex
            .captures_iter(code)
            .filter(|c| {
                let has =
                    |m: Option<regex::Match<'_>>| m.is_some_and(|m| m.as_str().contains(excluded));
                !has(c.get(1)) && !has(c.get(2))
            })
            .filter_map(|c| c.get(3))
            .map(|m| m.as_str().to_string())
            .collect()
    };
    match syntax {
        Syntax::Python { module_level } => python_tests(text, *module_level),
        Syntax::Rust => attributed(
            &RUST,
            &without_comment_lines(&without_raw_strings(text)),
            "#[cfg(",
        ),
        Syntax::Java => attributed(&JAVA, &without_comment_lines(text), "@DisplayName"),
        Syntax::Names(regex) => regex
            .captures_iter(&without_comment_lines(text))
            .filter_map(|c| c.get(1))
            .map(|m| m.as_str().to_string())
            .collect(),
        Syntax::Titles(regex) => regex
            .captures_iter(&without_comment_lines(text))
            .filter_map(|c| c.get(1).or_else(|| c.get(2)))
            .map(|m| unescape(m.as_str()))
            .filter(|title| !title.trim().is_empty())
            .collect(),
    }
}

/// The `test…` functions of a Python module its runner collects: at module level (under an
/// `if` or `try` too; not for `unittest`) or methods of classes (every enclosing block a
/// class), not functions defined inside a function, not `@fixture`s, not lines of a
/// triple-quoted string.
fn python_tests(text: &str, module_level: bool) -> BTreeSet<String> {
    const QUOTES: [&str; 2] = ["\"\"\"", "'''"];
    // The enclosing definitions of the current line: indentation, and whether a class.
    let mut enclosing: Vec<(usize, bool)> = Vec::new();
    let mut out = BTreeSet::new();
    let mut in_string: Option<&str> = None;
    let mut fixture = false;
    for line in text.lines() {
        let code = line.trim_start();
        if let Some(quote) = in_string {
            if code.matches(quote).count() % 2 == 1 {
                in_string = None;
            }
            continue;
        }
        if code.is_empty() || code.starts_with('#') {
            continue;
        }
        // A string that opens on this line and does not close on it.
        in_string = QUOTES
            .into_iter()
            .find(|quote| code.matches(quote).count() % 2 == 1);
        let indent = line.len() - code.len();
        while enclosing.last().is_some_and(|(at, _)| *at >= indent) {
            enclosing.pop();
        }
        if code.starts_with('@') {
            fixture |= code.contains("fixture");
            continue;
        }
        if code.starts_with("class ") {
            enclosing.push((indent, true));
        } else if let Some(name) = PYTHON_DEF.captures(code).and_then(|c| c.get(1)) {
            let place = if enclosing.is_empty() {
                module_level
            } else {
                enclosing.iter().all(|(_, class)| *class)
            };
            if name.as_str().starts_with("test") && place && !fixture {
                out.insert(name.as_str().to_string());
            }
            enclosing.push((indent, false));
        }
        fixture = false;
    }
    out
}

/// A JavaScript string literal's content without its escapes (`\'` → `'`, `\n`, `\u00e9`,
/// `\u{1F600}`, `\x41`).
fn unescape(literal: &str) -> String {
    let hex = |digits: &str| {
        u32::from_str_radix(digits, 16)
            .ok()
            .and_then(char::from_u32)
    };
    let mut out = String::with_capacity(literal.len());
    let mut chars = literal.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(next) = chars.next() else {
            out.push(c);
            break;
        };
        match next {
            'n' => out.push('\n'),
            't' => out.push('\t'),
            'r' => out.push('\r'),
            'u' if chars.peek() == Some(&'{') => {
                chars.next();
                let digits: String = chars.by_ref().take_while(|c| *c != '}').collect();
                out.extend(hex(&digits));
            }
            'u' => {
                let digits: String = chars.by_ref().take(4).collect();
                out.extend(hex(&digits));
            }
            'x' => {
                let digits: String = chars.by_ref().take(2).collect();
                out.extend(hex(&digits));
            }
            other => out.push(other),
        }
    }
    out
}

/// Whether `id` holds `name` with no identifier character on either side.
fn holds_word(id: &str, name: &str) -> bool {
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    id.match_indices(name).any(|(at, _)| {
        !word(id[..at].chars().next_back()) && !word(id[at + name.len()..].chars().next())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, text: &str) -> (String, Vec<u8>) {
        (path.to_string(), text.as_bytes().to_vec())
    }

    #[test]
    fn a_module_that_did_not_import_is_missing_and_parametrised_methods_count() {
        let files = [
            file(
                "tests/test_io.py",
                "import pytest\n\n@pytest.mark.parametrize('x', [1, 2])\ndef test_read(x):\n    pass\n\nclass TestWrite:\n    async def test_write(self):\n        def test(x):\n            return x\n        pass\n\nif True:\n    def test_guarded():\n        pass\n\ndef helper():\n    pass\n",
            ),
            file(
                "tests/test_plugin.py",
                "import plugin\n\ndef test_load():\n    pass\n\ndef test_unload():\n    pass\n",
            ),
            file("tests/data/sample.json", "{\"def test_x(\": 1}"),
        ];
        let ids = [
            "tests/test_io.py::test_read[1]",
            "tests/test_io.py::test_read[2]",
            "tests/test_io.py::TestWrite::test_write",
            "tests/test_io.py::test_guarded",
            "tests/test_io.py::test_read_more",
        ];
        // `test` nested in a method is no test; `test_guarded` under an `if` is.
        let got = tests_collected("python", "pytest", &files, None, ids).unwrap();
        assert_eq!((got.defined, got.reported), (5, 3));
        assert_eq!(
            got.missing,
            [
                "tests/test_plugin.py::test_load",
                "tests/test_plugin.py::test_unload"
            ]
        );
        assert!((got.share() - 0.6).abs() < 1e-9);
        // Every test reported: the whole share.
        let all = ids.iter().copied().chain([
            "tests/test_plugin.py::test_load",
            "tests/test_plugin.py::test_unload",
        ]);
        assert!(
            (tests_collected("python", "pytest", &files, None, all)
                .unwrap()
                .share()
                - 1.0)
                .abs()
                < 1e-9
        );
    }

    #[test]
    fn the_runners_listing_counts_the_files_it_collected_and_the_text_the_others() {
        let files = [
            // A subclass inherits its test methods: the text shows none, the runner lists two.
            file(
                "tests/test_io.py",
                "from base import Base\n\nclass TestIo(Base):\n    pass\n",
            ),
            file(
                "tests/test_plugin.py",
                "import plugin\n\ndef test_load():\n    pass\n",
            ),
        ];
        let listing = Listing::from_pytest(
            "tests/test_io.py::TestIo::test_read\ntests/test_io.py::TestIo::test_write\n\n\
             ERROR tests/test_plugin.py - ModuleNotFoundError: No module named 'plugin'\n\
             2 tests collected, 1 error in 0.1s\n",
        )
        .unwrap();
        let reported = ["tests/test_io.py::TestIo::test_read"];
        let got = tests_collected("python", "pytest", &files, Some(&listing), reported).unwrap();
        // Two listed (one reported), and the file that failed to collect read from its text.
        assert_eq!((got.defined, got.reported), (3, 1));
        assert_eq!(
            got.missing,
            [
                "tests/test_io.py::TestIo::test_write",
                "tests/test_plugin.py::test_load"
            ]
        );
        // From the text alone the subclass defines nothing.
        let text = tests_collected("python", "pytest", &files, None, reported).unwrap();
        assert_eq!((text.defined, text.reported), (1, 0));
    }

    #[test]
    fn titles_names_and_attributes_of_each_language_are_read() {
        let js = file(
            "test/parse.test.ts",
            "describe('parse', () => {\n  it('reads \\'quoted\\' input', () => {});\n  test(\"empty\", async () => {});\n  it.skip('later', () => {});\n  xit('off', () => {});\n  it(`tpl ${x}`, () => {});\n  obj.test('no', 1);\n});\n",
        );
        let got = tests_collected(
            "typescript",
            "jest-json",
            std::slice::from_ref(&js),
            None,
            ["test/parse.test.ts::parse › reads 'quoted' input"],
        )
        .unwrap();
        assert_eq!((got.defined, got.reported), (2, 1));
        assert_eq!(got.missing, ["test/parse.test.ts::empty"]);

        let go = file(
            "pkg/parse_test.go",
            "package pkg\n\nfunc TestParse(t *testing.T) {}\nfunc TestEmpty(t *testing.T) {}\nfunc BenchmarkParse(b *testing.B) {}\nfunc helper(t *testing.T) {}\n",
        );
        let got = tests_collected(
            "go",
            "go-test-json",
            &[go],
            None,
            [
                "example.com/m/pkg::TestParse/sub",
                "example.com/m/pkg::TestEmptyish",
            ],
        )
        .unwrap();
        assert_eq!((got.defined, got.reported), (2, 1));
        let tagged = file(
            "pkg/db_test.go",
            "//go:build integration\n\npackage pkg\n\nfunc TestDB(t *testing.T) {}\n",
        );
        assert_eq!(
            tests_collected("go", "go-test-json", &[tagged], None, ["x"]),
            None
        );

        let rust = file(
            "tests/parse.rs",
            "#[test]\nfn parses() {}\n\n#[tokio::test]\n#[ignore]\nasync fn fetches() {}\n\n#[cfg(windows)]\n#[test]\nfn on_windows() {}\n\n#[test]\n#[cfg(feature = \"serde\")]\nfn with_serde() {}\n\n#[cfg(test)]\nmod tests {}\nfn helper() {}\n",
        );
        // Tests a `#[cfg(...)]` may leave out of the build are not counted.
        let got = tests_collected(
            "rust",
            "cargo",
            &[rust],
            None,
            ["parse::parses", "parse::fetches"],
        )
        .unwrap();
        assert_eq!((got.defined, got.reported), (2, 2));

        let java = file(
            "src/test/java/a/ParseTest.java",
            "class ParseTest {\n  @Test\n  public void parses() {}\n  @Test(expected = X.class)\n  @DisplayName(\"e\")\n  void fails() {}\n  void helper() {}\n}\n",
        );
        // A `@DisplayName` names the test otherwise: it is not counted.
        let got =
            tests_collected("java", "junit-xml", &[java], None, ["a.ParseTest.parses"]).unwrap();
        assert_eq!((got.defined, got.reported), (1, 1));
    }

    #[test]
    fn files_of_another_language_or_without_tests_give_no_signal() {
        let files = [
            file("tests/test_x.py", "def test_x():\n    pass\n"),
            file("test/x.test.js", "it('x', () => {});\n"),
        ];
        // A Rust row whose test patch also edits Python and JavaScript tests.
        assert_eq!(tests_collected("rust", "cargo", &files, None, ["x"]), None);
        // A C++ row: CTest names are not the source's.
        assert_eq!(
            tests_collected(
                "cpp",
                "pytest",
                &[file("tests/x.cpp", "TEST(A, B) {}\n")],
                None,
                ["A.B"]
            ),
            None
        );
        assert_eq!(
            tests_collected(
                "python",
                "pytest",
                &[file("tests/conftest.py", "def fixture():\n    pass\n")],
                None,
                ["x"]
            ),
            None
        );
    }

    #[test]
    fn what_the_runner_does_not_collect_is_not_counted() {
        // Fixtures, a class inside a test, test source in a string, helpers and conftest.
        let module = file(
            "tests/test_app.py",
            "import pytest\n\n@pytest.fixture\ndef test_app():\n    return 1\n\nclass TestSkips:\n    def test_skip(self):\n        class Inner(TestCase):\n            def test_will_be_skipped(self):\n                pass\n\ndef test_plugin(pytester):\n    pytester.makepyfile(\"\"\"\ndef test_inner():\n    pass\n\"\"\")\n",
        );
        let conftest = file("tests/conftest.py", "def test_helper():\n    pass\n");
        let helper = file("tests/helpers.py", "def test_helper():\n    pass\n");
        let data = file(
            "tests/data/test_sample.py",
            "def test_sample():\n    pass\n",
        );
        let files = [module, conftest, helper, data];
        let got = tests_collected(
            "python",
            "pytest",
            &files,
            None,
            [
                "tests/test_app.py::TestSkips::test_skip",
                "tests/test_app.py::test_plugin",
            ],
        )
        .unwrap();
        assert_eq!((got.defined, got.reported), (2, 2), "{got:?}");
        // unittest runs TestCase methods only.
        let got = tests_collected(
            "python",
            "unittest",
            &files[..1],
            None,
            ["test_skip (tests.test_app.TestSkips)"],
        )
        .unwrap();
        assert_eq!((got.defined, got.reported), (1, 1), "{got:?}");

        let go = [
            file(
                "pkg/testdata/src/a/a_test.go",
                "package a\n\nfunc TestA(t *testing.T) {}\n",
            ),
            file(
                "pkg/path_windows_test.go",
                "package pkg\n\nfunc TestLong(t *testing.T) {}\n",
            ),
            file(
                "pkg/path_linux_test.go",
                "package pkg\n\n// func TestOld(t *testing.T) {}\nfunc TestShort(t *testing.T) {}\n",
            ),
        ];
        let got = tests_collected(
            "go",
            "go-test-json",
            &go,
            None,
            ["example.com/m/pkg::TestShort"],
        )
        .unwrap();
        assert_eq!((got.defined, got.reported), (1, 1));

        let rust = [
            file(
                "tests/serde.rs",
                "#![cfg(feature = \"serde\")]\n#[test]\nfn round_trip() {}\n",
            ),
            file(
                "src/path.rs",
                "#[cfg(windows)]\nmod tests {\n    #[test]\n    fn long_paths() {}\n}\n",
            ),
            file(
                "tests/check.rs",
                "#[test]\nfn checks() {\n    let fixture = r#\"\n#[test]\nfn inner() {}\n\"#;\n}\n",
            ),
        ];
        let got = tests_collected("rust", "cargo", &rust, None, ["check::checks"]).unwrap();
        assert_eq!((got.defined, got.reported), (1, 1), "{got:?}");

        let js = file(
            "test/a.test.js",
            "// it('old behaviour', () => {});\nit('caf\\u00e9 \\x41', () => {});\n",
        );
        let got = tests_collected(
            "javascript",
            "jest-json",
            &[js],
            None,
            ["test/a.test.js::café A"],
        )
        .unwrap();
        assert_eq!((got.defined, got.reported), (1, 1), "{got:?}");
    }

    #[test]
    fn a_module_reported_as_a_file_or_a_name_in_another_file_is_no_collected_test() {
        let files = [file("tests/test_load.py", "def test_load():\n    pass\n")];
        // pytest names a module that failed to import by its path alone.
        let got =
            tests_collected("python", "pytest", &files, None, ["tests/test_load.py"]).unwrap();
        assert_eq!((got.defined, got.reported), (1, 0));
        // The same name in another file is another test.
        let got = tests_collected(
            "python",
            "pytest",
            &files,
            None,
            ["tests/test_other.py::test_load"],
        )
        .unwrap();
        assert_eq!((got.defined, got.reported), (1, 0));
        // A runner that names absolute paths.
        let got = tests_collected(
            "python",
            "pytest",
            &files,
            None,
            ["/testbed/tests/test_load.py::test_load"],
        )
        .unwrap();
        assert_eq!((got.defined, got.reported), (1, 1));
    }
}
