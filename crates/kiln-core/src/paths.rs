//! Which files of a pull request are tests: the rule that splits a diff into the gold `patch`
//! and the `test_patch`.
//!
//! Case-insensitive, on the path alone (the content is not read), and aware of the repository's
//! main language where a name means a test in one ecosystem and code in another: `spec/` holds
//! RSpec and Jasmine suites in Ruby and JavaScript projects but a language specification in a
//! compiler written in C.

/// Directory names that hold tests in every ecosystem.
const TEST_DIRS: &[&str] = &[
    "test",
    "tests",
    "__tests__",
    "__snapshots__",
    "testing",
    "testdata",
    "test_data",
    "test-data",
    "testfixtures",
    "e2e",
    // Java, Kotlin and Scala keep tests in `src/test/` (above); Android in `src/androidTest/`,
    // Kotlin multiplatform in `src/commonTest/`, `src/jvmTest/` and the like.
    "androidtest",
    "commontest",
    "jvmtest",
    "jstest",
    "nativetest",
    "integrationtest",
    "integration-tests",
    "integration_tests",
    "unittests",
    "unit-tests",
    "unit_tests",
];

/// Directory names that hold tests in these languages only.
const SPEC_DIRS: &[&str] = &["spec", "specs", "__specs__"];
const SPEC_LANGUAGES: &[&str] = &[
    "ruby",
    "javascript",
    "typescript",
    "coffeescript",
    "crystal",
    "elixir",
    "vue",
];

/// File extensions of JavaScript-family sources (for `*.test.*` and `*.spec.*`).
const SCRIPT_EXTENSIONS: &[&str] = &[
    "js", "jsx", "ts", "tsx", "mjs", "cjs", "mts", "cts", "vue", "svelte", "coffee",
];

/// File extensions of C-family and JVM sources (for `*_test.*`, `test_*.*`, `*Test.*`).
const COMPILED_EXTENSIONS: &[&str] = &[
    "c", "cc", "cpp", "cxx", "h", "hh", "hpp", "m", "mm", "java", "kt", "kts", "scala", "groovy",
    "cs", "fs", "swift", "zig", "rs", "go", "py", "rb", "php", "ex", "exs", "erl", "hs", "ml",
    "lua", "dart", "r",
];

/// Whether `path` (as it appears in a diff, `/`-separated) is a test file of a repository whose
/// main language is `language` (GitHub's name, any case; empty when unknown).
#[must_use]
pub fn is_test_path(path: &str, language: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    let language = language.to_ascii_lowercase();
    let mut parts: Vec<&str> = lower.split('/').filter(|p| !p.is_empty()).collect();
    if parts.pop().is_none() {
        return false;
    }
    let spec_dirs = SPEC_LANGUAGES.contains(&language.as_str()) || language.is_empty();
    if parts
        .iter()
        .any(|dir| TEST_DIRS.contains(dir) || (spec_dirs && SPEC_DIRS.contains(dir)))
    {
        return true;
    }
    is_test_file_name(path.rsplit('/').next().unwrap_or(path), &language)
}

/// Whether a file name alone marks a test (`test_x.py`, `x_test.go`, `x.spec.ts`, `XTest.java`).
fn is_test_file_name(original: &str, language: &str) -> bool {
    let file = original.to_ascii_lowercase();
    let (stem, extension) = match file.rsplit_once('.') {
        Some((stem, ext)) => (stem, ext),
        None => (file.as_str(), ""),
    };
    if file == "conftest.py" {
        return true;
    }
    // `x.test.ts`, `x.spec.js`, `x.e2e-spec.ts`.
    if SCRIPT_EXTENSIONS.contains(&extension)
        && (stem.ends_with(".test")
            || stem.ends_with(".spec")
            || stem.ends_with("-spec")
            || stem.ends_with(".tests"))
    {
        return true;
    }
    if !COMPILED_EXTENSIONS.contains(&extension) && !SCRIPT_EXTENSIONS.contains(&extension) {
        return false;
    }
    if stem.starts_with("test_") || stem.ends_with("_test") || stem.ends_with("_tests") {
        return true;
    }
    // Ruby's `x_spec.rb`; Go and C never name code `*_spec`.
    if stem.ends_with("_spec") && (extension == "rb" || SPEC_LANGUAGES.contains(&language)) {
        return true;
    }
    // JVM and .NET conventions are case-sensitive in practice: `FooTest.java`, `FooTests.cs`,
    // `FooIT.java`, `TestFoo.java` (not `Testament.java`).
    let original_stem = original.rsplit_once('.').map_or(original, |(s, _)| s);
    let jvm = ["java", "kt", "kts", "scala", "groovy", "cs", "fs", "swift"].contains(&extension);
    jvm && (original_stem.ends_with("Test")
        || original_stem.ends_with("Tests")
        || original_stem.ends_with("IT")
        || original_stem.ends_with("Spec")
        || (original_stem.starts_with("Test")
            && original_stem[4..].starts_with(|c: char| c.is_ascii_uppercase())))
}

#[cfg(test)]
mod tests {
    use super::is_test_path;

    #[test]
    fn tests_are_recognised_across_ecosystems() {
        let tests = [
            ("tests/test_ops.py", "Python"),
            ("src/pkg/test_x.py", "Python"),
            ("pkg/x_test.py", "Python"),
            ("conftest.py", "Python"),
            ("Tests/Data/input.TXT", "Python"),
            ("pkg/parse_test.go", "Go"),
            ("internal/testdata/golden.json", "Go"),
            ("src/__tests__/a.js", "JavaScript"),
            ("src/__snapshots__/a.test.ts.snap", "TypeScript"),
            ("src/util.spec.ts", "TypeScript"),
            ("lib/util.test.mjs", "JavaScript"),
            ("spec/models/user_spec.rb", "Ruby"),
            ("test/unit/x_test.rb", "Ruby"),
            ("src/test/java/org/x/ParserTest.java", "Java"),
            ("core/src/main/java/org/x/ParserTests.java", "Java"),
            ("app/src/androidTest/java/A.kt", "Kotlin"),
            ("tests/builder/possible_values.rs", "Rust"),
            ("e2e/login.cy.js", "JavaScript"),
            ("unittests/foo_test.cc", "C++"),
        ];
        for (path, language) in tests {
            assert!(
                is_test_path(path, language),
                "{path} ({language}) is a test"
            );
        }
    }

    #[test]
    fn code_stays_code() {
        let code = [
            ("src/calc/ops.py", "Python"),
            ("src/calc/testing_utils.py", "Python"),
            ("README.md", "Python"),
            ("spec/grammar.md", "C"),
            ("doc/spec/lexer.c", "C"),
            ("src/contest.rs", "Rust"),
            ("src/latest.js", "JavaScript"),
            ("src/main/java/org/x/Testament.java", "Java"),
            ("src/main/java/org/x/Attest.java", "Java"),
            ("pkg/protest.go", "Go"),
            ("CHANGELOG.test", "Python"),
        ];
        for (path, language) in code {
            assert!(!is_test_path(path, language), "{path} ({language}) is code");
        }
    }
}
