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
#[track_caller]
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
#[track_caller]
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

/// Runs `script` under `sh` with `log` on its standard input; `shim` comes first (an `awk`
/// function standing in for another awk).
#[track_caller]
pub fn run_script(shim: &str, script: &str, log: &str) -> String {
    let mut child = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{shim}{script}"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("sh");
    let mut stdin = child.stdin.take().expect("stdin");
    std::io::Write::write_all(&mut stdin, log.as_bytes()).expect("write the log");
    drop(stdin);
    let out = child.wait_with_output().expect("run the script");
    assert!(
        out.status.success(),
        "the script failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// The host's awk (an empty shim) and the other awks installed here (gawk, busybox), each as
/// a shell function named `awk`.
pub fn other_awks() -> Vec<String> {
    let mut shims = vec![String::new()];
    for (tool, args) in [("gawk", ""), ("busybox", "awk")] {
        let found = std::process::Command::new(tool)
            .args(args.split_whitespace())
            .arg("BEGIN {}")
            .output()
            .is_ok_and(|o| o.status.success());
        if found {
            shims.push(format!("awk() {{ {tool} {args} \"$@\"; }}\n"));
        }
    }
    shims
}
