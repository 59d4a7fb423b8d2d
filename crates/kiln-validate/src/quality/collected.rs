//! Whether the runs reported the tests the test patch's files define: an environment that
//! cannot import a test module (a missing optional package, a plugin that breaks collection)
//! loses that module's tests silently, and FAIL_TO_PASS and PASS_TO_PASS shrink with it.
//!
//! The tests a file defines are read from the file itself, as the patched commit holds it (no
//! container, no extra run): the names of test functions (Python `def test…` at module level or
//! in a class, not nested in a function; Go `func Test…(t *testing.T)`, not in a file under a
//! build constraint; Rust functions under a `#[…test]` attribute and no `#[cfg(…)]`, which may
//! leave them out of this build; JUnit methods under `@Test`) and the literal titles of
//! JavaScript and TypeScript `it(…)` / `test(…)` calls. Only the files of the row's language
//! count: a test patch that also edits another language's tests is not judged by a runner that
//! never reads them. A name is reported when some test id of the `after` runs holds it as a whole word (a
//! title: as a substring), so a parametrised `test_parse[a-1]`, a class method
//! `TestX::test_parse`, a subtest `TestParse/empty` and a nested `describe › it` title all
//! count for their definition.
//! Names the language builds at run time (template titles, `test.each`) are not read, so they
//! neither count nor go missing. Files of other languages (C and C++, whose suites are often
//! driven through CTest names unrelated to the source) define nothing here: the signal is then
//! absent, not zero.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;

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
    /// Python: `test…` functions at module level or methods of a class, not functions nested
    /// in a function; matched as whole words.
    Python,
    /// Rust: functions under a `#[…test]` attribute and no `#[cfg(…)]`; whole words.
    Rust,
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
static JAVA: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"@Test\b(?:\([^)]*\))?\s*(?:@\w+(?:\([^)]*\))?\s*)*(?:public\s+|protected\s+|private\s+)?(?:static\s+)?void\s+(\w+)\s*\(")
        .expect("regex")
});
/// `it('…')`, `test("…")`, not `it.skip`, `xit`, `obj.test(…)` or a template title.
static JS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?:^|[^.\w$])(?:it|test)\s*\(\s*(?:'((?:[^'\\\n]|\\.)*)'|"((?:[^"\\\n]|\\.)*)")"#)
        .expect("regex")
});

/// The syntax of `path`'s test definitions when it is a file of `language`'s.
fn syntax(language: &str, path: &str) -> Option<Syntax> {
    let extension = path.rsplit_once('.').map(|(_, e)| e)?;
    match (language, extension) {
        ("python", "py") => Some(Syntax::Python),
        ("go", "go") if path.ends_with("_test.go") => Some(Syntax::Names(&GO)),
        ("rust", "rs") => Some(Syntax::Rust),
        ("java" | "kotlin", "java") => Some(Syntax::Names(&JAVA)),
        (
            "javascript" | "typescript" | "js" | "ts",
            "js" | "jsx" | "mjs" | "cjs" | "ts" | "tsx" | "mts" | "cts",
        ) => Some(Syntax::Titles(&JS)),
        _ => None,
    }
}

/// What the test patch's files (`files`: path and content at the patched commit) define and
/// how much of it `reported` (the test ids the `after` runs gave) holds; `None` when the files
/// define no test kiln can read for `language`.
#[must_use]
pub fn tests_collected<'a>(
    language: &str,
    files: &[(String, Vec<u8>)],
    reported: impl IntoIterator<Item = &'a str>,
) -> Option<Collected> {
    let reported: Vec<&str> = reported.into_iter().collect();
    let mut defined = 0;
    let mut found = 0;
    let mut missing = Vec::new();
    for (path, content) in files {
        let Some(syntax) = syntax(language, path) else {
            continue;
        };
        let text = String::from_utf8_lossy(content);
        // A Go file under a build constraint (`//go:build integration`) is built only when the
        // constraint holds: what it defines says nothing of this run.
        if path.ends_with(".go")
            && text
                .lines()
                .any(|l| l.starts_with("//go:build") || l.starts_with("// +build"))
        {
            continue;
        }
        let names = definitions(&syntax, &text);
        for name in &names {
            defined += 1;
            let seen = match syntax {
                Syntax::Python | Syntax::Rust | Syntax::Names(_) => {
                    reported.iter().any(|id| holds_word(id, name))
                }
                Syntax::Titles(_) => reported.iter().any(|id| id.contains(name.as_str())),
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

/// The names (or titles) `text` defines, each once.
fn definitions(syntax: &Syntax, text: &str) -> BTreeSet<String> {
    match syntax {
        Syntax::Python => python_tests(text),
        Syntax::Rust => RUST
            .captures_iter(text)
            .filter(|c| {
                let gated =
                    |m: Option<regex::Match<'_>>| m.is_some_and(|m| m.as_str().contains("#[cfg("));
                !gated(c.get(1)) && !gated(c.get(2))
            })
            .filter_map(|c| c.get(3))
            .map(|m| m.as_str().to_string())
            .collect(),
        Syntax::Names(regex) => regex
            .captures_iter(text)
            .filter_map(|c| c.get(1))
            .map(|m| m.as_str().to_string())
            .collect(),
        Syntax::Titles(regex) => regex
            .captures_iter(text)
            .filter_map(|c| c.get(1).or_else(|| c.get(2)))
            .map(|m| unescape(m.as_str()))
            .filter(|title| !title.trim().is_empty())
            .collect(),
    }
}

/// The `test…` functions of a Python module that pytest collects: at module level (under an
/// `if` or `try` too) or methods of a class, not functions defined inside a function.
fn python_tests(text: &str) -> BTreeSet<String> {
    // The enclosing definitions of the current line: indentation, and whether a class.
    let mut enclosing: Vec<(usize, bool)> = Vec::new();
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let code = line.trim_start();
        if code.is_empty() || code.starts_with('#') {
            continue;
        }
        let indent = line.len() - code.len();
        while enclosing.last().is_some_and(|(at, _)| *at >= indent) {
            enclosing.pop();
        }
        if code.starts_with("class ") {
            enclosing.push((indent, true));
        } else if let Some(name) = PYTHON_DEF.captures(code).and_then(|c| c.get(1)) {
            if name.as_str().starts_with("test") && enclosing.last().is_none_or(|(_, class)| *class)
            {
                out.insert(name.as_str().to_string());
            }
            enclosing.push((indent, false));
        }
    }
    out
}

/// A JavaScript string literal's content without its escapes (`\'` → `'`).
fn unescape(literal: &str) -> String {
    let mut out = String::with_capacity(literal.len());
    let mut chars = literal.chars();
    while let Some(c) = chars.next() {
        match (c, chars.clone().next()) {
            ('\\', Some(next @ ('\'' | '"' | '\\'))) => {
                out.push(next);
                chars.next();
            }
            _ => out.push(c),
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
        let got = tests_collected("python", &files, ids).unwrap();
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
        assert!((tests_collected("python", &files, all).unwrap().share() - 1.0).abs() < 1e-9);
    }

    #[test]
    fn titles_names_and_attributes_of_each_language_are_read() {
        let js = file(
            "test/parse.test.ts",
            "describe('parse', () => {\n  it('reads \\'quoted\\' input', () => {});\n  test(\"empty\", async () => {});\n  it.skip('later', () => {});\n  xit('off', () => {});\n  it(`tpl ${x}`, () => {});\n  obj.test('no', 1);\n});\n",
        );
        let got = tests_collected(
            "typescript",
            std::slice::from_ref(&js),
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
            &[go],
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
        assert_eq!(tests_collected("go", &[tagged], ["x"]), None);

        let rust = file(
            "tests/parse.rs",
            "#[test]\nfn parses() {}\n\n#[tokio::test]\n#[ignore]\nasync fn fetches() {}\n\n#[cfg(windows)]\n#[test]\nfn on_windows() {}\n\n#[test]\n#[cfg(feature = \"serde\")]\nfn with_serde() {}\n\n#[cfg(test)]\nmod tests {}\nfn helper() {}\n",
        );
        // Tests a `#[cfg(...)]` may leave out of the build are not counted.
        let got = tests_collected("rust", &[rust], ["parse::parses", "parse::fetches"]).unwrap();
        assert_eq!((got.defined, got.reported), (2, 2));

        let java = file(
            "src/test/java/a/ParseTest.java",
            "class ParseTest {\n  @Test\n  public void parses() {}\n  @Test(expected = X.class)\n  @DisplayName(\"e\")\n  void fails() {}\n  void helper() {}\n}\n",
        );
        let got = tests_collected("java", &[java], ["a.ParseTest.parses"]).unwrap();
        assert_eq!((got.defined, got.reported), (2, 1));
    }

    #[test]
    fn files_of_another_language_or_without_tests_give_no_signal() {
        let files = [
            file("tests/test_x.py", "def test_x():\n    pass\n"),
            file("test/x.test.js", "it('x', () => {});\n"),
        ];
        // A Rust row whose test patch also edits Python and JavaScript tests.
        assert_eq!(tests_collected("rust", &files, ["x"]), None);
        // A C++ row: CTest names are not the source's.
        assert_eq!(
            tests_collected("cpp", &[file("tests/x.cpp", "TEST(A, B) {}\n")], ["A.B"]),
            None
        );
        assert_eq!(
            tests_collected(
                "python",
                &[file("tests/conftest.py", "def fixture():\n    pass\n")],
                ["x"]
            ),
            None
        );
    }
}
