//! JSON reports captured from jest 30.5 (29.7 with the network off), vitest 3 and mocha 11 (10.8)
//! on small projects: see `tests/data/{jest,vitest,mocha}-json/`.

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

/// Captured from jest 29.7 and mocha 10.8 on Node 20 in a container with the network off, as
/// validation runs tests (`tests/data/{jest,mocha}-json/network_off.log`): an HTTP get of a
/// name (`getaddrinfo EAI_AGAIN`), a `fetch` of one (undici's `TypeError: fetch failed`, the
/// reason only in its `cause`), a connect to an address (`connect ENETUNREACH`), a DNS lookup,
/// and an assertion comparing the same words. Jest keeps the error's fields in
/// `failureDetails` but drops `fetch`'s cause, so that failure is not told apart there; mocha
/// keeps the cause.
#[test]
fn failures_for_want_of_a_network_are_told_apart() {
    let jest = check(
        "jest-json",
        include_str!("../data/jest-json/network_off.log"),
        "
        fail /testbed/test/net.test.js::remote data › downloads a file
        fail /testbed/test/net.test.js::remote data › fetches with fetch
        fail /testbed/test/net.test.js::remote data › connects to an address
        fail /testbed/test/net.test.js::remote data › resolves a name
        fail /testbed/test/net.test.js::local › compares messages
        pass /testbed/test/net.test.js::local › adds
        ",
    );
    assert_summary(&jest, [1, 5, 0, 0]);
    assert_eq!(
        jest.offline.iter().collect::<Vec<_>>(),
        [
            "/testbed/test/net.test.js::remote data › connects to an address",
            "/testbed/test/net.test.js::remote data › downloads a file",
            "/testbed/test/net.test.js::remote data › resolves a name",
        ]
    );
    let mocha = check(
        "mocha-json",
        include_str!("../data/mocha-json/network_off.log"),
        "
        fail /testbed/test/net.spec.js::remote data downloads a file
        fail /testbed/test/net.spec.js::remote data fetches with fetch
        fail /testbed/test/net.spec.js::remote data connects to an address
        fail /testbed/test/net.spec.js::remote data resolves a name
        fail /testbed/test/net.spec.js::local compares messages
        pass /testbed/test/net.spec.js::local adds
        ",
    );
    assert_summary(&mocha, [1, 5, 0, 0]);
    assert_eq!(
        mocha.offline.iter().collect::<Vec<_>>(),
        [
            "/testbed/test/net.spec.js::remote data connects to an address",
            "/testbed/test/net.spec.js::remote data downloads a file",
            "/testbed/test/net.spec.js::remote data fetches with fetch",
            "/testbed/test/net.spec.js::remote data resolves a name",
        ]
    );
    // Ids made relative to the checkout keep their mark.
    let relative = mocha.relative_to("/testbed");
    assert!(
        relative
            .offline
            .contains("test/net.spec.js::remote data downloads a file")
    );
}
