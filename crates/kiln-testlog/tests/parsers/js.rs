//! JSON reports captured from jest 30.5, vitest 3 and mocha 11 on small projects: see
//! `tests/data/{jest,vitest,mocha}-json/`.

use crate::check::{assert_summary, check};

const JEST: &str = "
    pass /tmp/jsproj/__tests__/math.test.js::math › adds numbers
    fail /tmp/jsproj/__tests__/math.test.js::math › fails to add
    skip /tmp/jsproj/__tests__/math.test.js::math › skipped one
    skip /tmp/jsproj/__tests__/math.test.js::math › write more tests
    pass /tmp/jsproj/__tests__/math.test.js::math › nested > group › doubles 1 - to 1
    fail /tmp/jsproj/__tests__/math.test.js::math › nested > group › doubles 2 - to 3
    pass /tmp/jsproj/__tests__/math.test.js::top level passes
    error /tmp/jsproj/__tests__/broken.test.js
";

#[test]
fn jest_json() {
    let parsed = check(
        "jest-json",
        include_str!("../data/jest-json/mixed.json"),
        JEST,
    );
    assert_summary(&parsed, [3, 2, 2, 1]);
}

#[test]
fn jest_json_with_stderr_around_it() {
    let parsed = check(
        "jest-json",
        include_str!("../data/jest-json/with_stderr.log"),
        JEST,
    );
    assert_summary(&parsed, [3, 2, 2, 1]);
}

#[test]
fn vitest_json() {
    let parsed = check(
        "vitest-json",
        include_str!("../data/vitest-json/mixed.json"),
        "pass /tmp/jsproj/vt/math.test.js::math › adds numbers
         fail /tmp/jsproj/vt/math.test.js::math › fails to add
         skip /tmp/jsproj/vt/math.test.js::math › skipped one
         skip /tmp/jsproj/vt/math.test.js::math › write more tests
         pass /tmp/jsproj/vt/math.test.js::math › nested › doubles 1 - to 1
         fail /tmp/jsproj/vt/math.test.js::math › nested › doubles 2 - to 3
         pass /tmp/jsproj/vt/math.test.js::top level passes",
    );
    assert_summary(&parsed, [3, 2, 2, 0]);
}

#[test]
fn mocha_json() {
    let parsed = check(
        "mocha-json",
        include_str!("../data/mocha-json/mixed.json"),
        r#"pass /tmp/jsproj/test/spec.js::root level test
         pass /tmp/jsproj/test/spec.js::Array #indexOf() should return -1 when not present
         fail /tmp/jsproj/test/spec.js::Array #indexOf() should fail - on purpose
         error /tmp/jsproj/test/spec.js::Array with a failing hook "before all" hook for "never runs"
         skip /tmp/jsproj/test/spec.js::Array #indexOf() is pending
         skip /tmp/jsproj/test/spec.js::Array #indexOf() has no body yet"#,
    );
    assert_summary(&parsed, [2, 2, 2, 0]);
}
