//! The shared `check` helper of the data-driven tests.

use kiln_testlog::{ParsedLog, Summary, parse};

/// Renders statuses as the compact text the tests compare: one `status id` line per test, sorted
/// by id.
pub fn render(parsed: &ParsedLog) -> String {
    parsed
        .statuses
        .iter()
        .map(|(id, status)| format!("{} {id}", status.as_str()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Parses `log` with `parser` and compares the statuses with `expected`, a text of `status id`
/// lines (order, indentation and blank lines do not matter). Returns the parse for further checks.
pub fn check(parser: &str, log: &str, expected: &str) -> ParsedLog {
    let parsed = parse(parser, log).unwrap();
    let mut want: Vec<(String, String)> = expected
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (status, id) = l.split_once(' ').unwrap_or((l, ""));
            assert!(
                ["pass", "fail", "skip", "error"].contains(&status),
                "bad expected line {l:?}"
            );
            (id.to_owned(), status.to_owned())
        })
        .collect();
    want.sort();
    let want = want
        .iter()
        .map(|(id, status)| format!("{status} {id}"))
        .collect::<Vec<_>>()
        .join("\n");
    let got = render(&parsed);
    assert_eq!(
        got, want,
        "parser {parser}: statuses differ\n--- got\n{got}\n--- want\n{want}"
    );
    parsed
}

/// Asserts that the log agrees with the totals it printed, and that they are `summary`.
pub fn assert_summary(parsed: &ParsedLog, summary: [u64; 4]) {
    assert!(parsed.is_consistent(), "problems: {:?}", parsed.problems);
    let [passed, failed, skipped, errors] = summary;
    assert_eq!(
        parsed.summary,
        Some(Summary {
            passed,
            failed,
            skipped,
            errors
        })
    );
}
