//! The crate-level API: names, errors, detection and batch parsing.

use kiln_testlog::{detect, parse, parse_many, parse_reader, parser_names, parser_streams};

#[test]
fn unknown_parser_lists_known_names() {
    let err = parse("nope", "").expect_err("unknown name");
    let message = err.to_string();
    assert!(message.contains("`nope`"), "{message}");
    for name in parser_names() {
        assert!(message.contains(name), "{message} lacks {name}");
    }
}

#[test]
fn every_name_parses_empty_input() {
    for name in parser_names() {
        let parsed = parse(name, "").expect("listed names are known");
        assert!(parsed.statuses.is_empty(), "{name}");
    }
}

#[test]
fn detects_pytest() {
    for log in [
        include_str!("../data/pytest/ra_full.log"),
        include_str!("../data/pytest/xdist_verbose_only.log"),
        include_str!("../data/pytest/ra_quiet.log"),
    ] {
        assert_eq!(detect(log, None), Some("pytest"));
    }
    assert_eq!(detect("nothing here", None), None);
    assert_eq!(detect("nothing here", Some("pytest")), Some("pytest"));
    assert_eq!(
        detect("nothing here", Some("python -m pytest -rA tests/")),
        Some("pytest")
    );
}

#[test]
fn parse_many_keeps_order() {
    let log = include_str!("../data/pytest/ra_full.log");
    let results = parse_many(&[("pytest", log), ("nope", log), ("pytest", "")]);
    assert_eq!(results.len(), 3);
    assert_eq!(results[0].as_ref().map(|p| p.statuses.len()).ok(), Some(18));
    assert!(results[1].is_err());
    assert_eq!(results[2].as_ref().map(|p| p.statuses.len()).ok(), Some(0));
}

#[test]
fn detects_every_captured_format() {
    let cases = [
        (
            "cargo",
            include_str!("../data/cargo/workspace_no_fail_fast.log"),
        ),
        (
            "go-test-json",
            include_str!("../data/go-test-json/mixed.json"),
        ),
        ("go-test", include_str!("../data/go-test/verbose_mixed.log")),
        ("go-test", include_str!("../data/go-test/plain.log")),
        (
            "junit-xml",
            include_str!("../data/junit-xml/pytest_junit.xml"),
        ),
        (
            "junit-xml",
            include_str!("../data/junit-xml/ctest_junit.xml"),
        ),
        (
            "jest-json",
            include_str!("../data/jest-json/with_stderr.log"),
        ),
        (
            "vitest-json",
            include_str!("../data/vitest-json/mixed.json"),
        ),
        ("mocha-json", include_str!("../data/mocha-json/mixed.json")),
        (
            "unittest",
            include_str!("../data/unittest/py310_verbose.log"),
        ),
        (
            "unittest",
            include_str!("../data/unittest/py311_verbose.log"),
        ),
        ("ctest", include_str!("../data/ctest/mixed.log")),
        ("ctest", include_str!("../data/ctest/verbose.log")),
        ("gtest", include_str!("../data/gtest/mixed.log")),
        ("gtest", include_str!("../data/gtest/mixed.json")),
        ("catch2", include_str!("../data/catch2/mixed.xml")),
        ("catch2", include_str!("../data/catch2/console.log")),
        ("catch2", include_str!("../data/catch2/console_success.log")),
        ("doctest", include_str!("../data/doctest/mixed.xml")),
        ("doctest", include_str!("../data/doctest/console.log")),
        (
            "doctest",
            include_str!("../data/doctest/console_success.log"),
        ),
        ("node-test", include_str!("../data/node-test/tap.log")),
        ("node-test", include_str!("../data/node-test/spec.log")),
        (
            "node-test",
            include_str!("../data/node-test/default_non_tty.log"),
        ),
        ("mocha-spec", include_str!("../data/mocha-spec/mixed.log")),
        ("tap", include_str!("../data/tap/perl_subtests.tap")),
        ("tap", include_str!("../data/tap/prove_verbose.log")),
    ];
    for (want, log) in cases {
        assert_eq!(
            detect(log, None),
            Some(want),
            "{}",
            &log[..log.len().min(200)]
        );
    }
}

/// A small deterministic generator (xorshift), so the fuzz test needs no extra crate.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n as u64).unwrap_or(0)
    }
}

/// Every parser survives arbitrary input: random slices and splices of real logs, random bytes
/// and tokens that parsers look for. Bounded by a time budget.
#[test]
fn no_panic_on_arbitrary_input() {
    let seeds = [
        include_str!("../data/pytest/ra_full.log"),
        include_str!("../data/pytest/xdist_verbose.log"),
        include_str!("../data/cargo/workspace_no_fail_fast.log"),
        include_str!("../data/go-test-json/mixed.json"),
        include_str!("../data/go-test/verbose_mixed.log"),
        include_str!("../data/junit-xml/pytest_junit.xml"),
        include_str!("../data/junit-xml/SYNTHETIC_surefire_hand_written.xml"),
        include_str!("../data/jest-json/mixed.json"),
        include_str!("../data/mocha-json/mixed.json"),
        include_str!("../data/unittest/py310_verbose.log"),
        include_str!("../data/ctest/verbose.log"),
        include_str!("../data/gtest/mixed.log"),
        include_str!("../data/gtest/mixed.json"),
        include_str!("../data/catch2/mixed.xml"),
        include_str!("../data/catch2/console_success.log"),
        include_str!("../data/doctest/mixed.xml"),
        include_str!("../data/doctest/console_success.log"),
        include_str!("../data/node-test/tap.log"),
        include_str!("../data/node-test/spec.log"),
        include_str!("../data/mocha-spec/mixed.log"),
        include_str!("../data/tap/prove_verbose.log"),
    ];
    let tokens = [
        "PASSED ",
        "FAILED ",
        "SKIPPED [",
        " - ",
        "[",
        "]",
        "::",
        "\n",
        "\x1b[31m",
        "<?xml ",
        "<testsuite tests=\"9\">",
        "<testcase name=\"a\">",
        "</testcase>",
        "{\"Action\":",
        "{",
        "}",
        "\"",
        " ... ",
        "ok",
        "test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured",
        "--- FAIL: ",
        " (0.00s)",
        "Running unittests src/lib.rs (x/deps/a-1f)",
        "Doc-tests a",
        " (line 3)",
        "Ran 3 tests in 0.1s",
        "FAILED (failures=1)",
        "é",
        "\u{0}",
        "ERROR: t (m.C)",
        "=== 1 passed in 0.1s ===",
        "    ",
        "ok 1 - ",
        "not ok 2 ",
        "# Subtest: x",
        " # SKIP",
        "  ---",
        "  ...",
        "1..3",
        "▶ ",
        "✔ ",
        "✖ ",
        "1) ",
        "2 passing (3ms)",
        "1/2 Test #1: a ....   Passed    0.01 sec",
        "50% tests passed, 1 tests failed out of 2",
        "[ RUN      ] A.b",
        "[       OK ] A.b (0 ms)",
        "{\n",
        "\n}\n",
        "-------------------------------------------------------------------------------",
        "===============================================================================",
        "TEST CASE:  x",
        "<Catch>",
        "<TestCase name=\"t\">",
        "<Section name=\"s\">",
        "</Section>",
        "<doctest>",
        "<SubCase name=\"s\">",
        "test cases: 2 | 1 passed | 1 failed",
    ];
    let started = std::time::Instant::now();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut cases = 0u32;
    while started.elapsed() < std::time::Duration::from_secs(3) && cases < 4000 {
        cases += 1;
        let mut input = String::new();
        for _ in 0..rng.below(8) + 1 {
            match rng.below(3) {
                0 => {
                    let seed = seeds[rng.below(seeds.len())];
                    let a = rng.below(seed.len() + 1);
                    let b = (a + rng.below(400)).min(seed.len());
                    if let Some(slice) = seed.get(a..b) {
                        input.push_str(slice);
                    }
                }
                1 => input.push_str(tokens[rng.below(tokens.len())]),
                _ => {
                    for _ in 0..rng.below(20) {
                        input.push(
                            char::from_u32(u32::try_from(rng.below(0x250)).unwrap_or(0))
                                .unwrap_or('?'),
                        );
                    }
                }
            }
        }
        for name in parser_names() {
            let parsed = parse(name, &input).expect("listed names are known");
            // Deterministic: the same input gives the same output.
            assert_eq!(parse(name, &input).expect("known"), parsed);
            // Streaming reads the same lines; a tiny buffer splits lines across reads.
            let reader = std::io::BufReader::with_capacity(7, input.as_bytes());
            let streamed = parse_reader(name, reader).expect("reading from memory");
            assert_eq!(streamed, parsed, "{name} streamed differs on {input:?}");
        }
        let _ = detect(&input, None);
    }
    assert!(cases > 50, "only {cases} cases ran");
}

#[test]
fn parse_reader_matches_parse_on_every_captured_log() {
    let logs = [
        ("pytest", include_str!("../data/pytest/ra_full.log")),
        (
            "cargo",
            include_str!("../data/cargo/workspace_no_fail_fast.log"),
        ),
        (
            "go-test-json",
            include_str!("../data/go-test-json/mixed.json"),
        ),
        ("junit-xml", include_str!("../data/junit-xml/gtest.xml")),
        ("ctest", include_str!("../data/ctest/verbose.log")),
        ("gtest", include_str!("../data/gtest/mixed.json")),
        ("catch2", include_str!("../data/catch2/mixed.xml")),
        ("doctest", include_str!("../data/doctest/console.log")),
        ("node-test", include_str!("../data/node-test/spec.log")),
        ("tap", include_str!("../data/tap/prove_verbose.log")),
    ];
    for (name, log) in logs {
        let streamed = parse_reader(name, log.as_bytes()).expect("reading from memory");
        assert_eq!(streamed, parse(name, log).expect("known"), "{name}");
        assert!(!streamed.statuses.is_empty(), "{name}");
    }
    assert!(parse_reader("nope", &b""[..]).is_err());
}

#[test]
fn line_oriented_parsers_stream() {
    for name in parser_names() {
        let streams = parser_streams(name).expect("known");
        let document = matches!(
            *name,
            "junit-xml" | "jest-json" | "vitest-json" | "mocha-json"
        );
        assert_eq!(streams, !document, "{name}");
    }
}

#[test]
fn ids_are_made_relative_to_the_checkout() {
    let log = include_str!("../data/jest-json/mixed.json");
    let absolute = parse("jest-json", log).expect("a known parser");
    let relative = parse("jest-json", log)
        .expect("a known parser")
        .relative_to("/tmp/jsproj/");
    assert_eq!(absolute.statuses.len(), relative.statuses.len());
    for (id, status) in &absolute.statuses {
        let rest = id
            .strip_prefix("/tmp/jsproj/")
            .unwrap_or_else(|| panic!("{id} is not under the checkout"));
        assert_eq!(relative.statuses.get(rest), Some(status), "{rest}");
    }
    assert!(
        relative
            .statuses
            .contains_key("__tests__/math.test.js::math › adds numbers"),
        "{:?}",
        relative.statuses.keys()
    );
    // Another root leaves the ids alone.
    assert_eq!(
        parse("jest-json", log)
            .expect("a known parser")
            .relative_to("/testbed")
            .statuses,
        absolute.statuses
    );
}
