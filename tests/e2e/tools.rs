//! `kiln parse` and `kiln repairs`: what a user runs to see why a run was judged as it was.

use crate::{kiln, run, text};

fn data(path: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../kiln-testlog/tests/data")
        .join(path)
}

#[test]
fn parse_reads_a_log_as_validation_does() {
    let log = data("pytest/ra_captured_logs.log");
    let output = run(kiln().args(["--json", "parse"]).arg(&log));
    assert!(output.status.success(), "{}", text(&output));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap_or_default();
    assert_eq!(report["parser"], "pytest", "detected");
    assert_eq!(report["consistent"], true);
    assert_eq!(report["counts"]["pass"], 4);
    assert_eq!(
        report["statuses"]["tests/test_logs.py::test_fails_and_logs"],
        "fail"
    );
    // A log cut before its end no longer agrees with the totals it printed.
    let tmp = crate::tempdir();
    let full = std::fs::read_to_string(&log).unwrap_or_default();
    let cut: String = full
        .lines()
        .filter(|l| !l.starts_with("PASSED tests/test_logs.py::test_param"))
        .map(|l| format!("{l}\n"))
        .collect();
    let cut_path = tmp.path().join("cut.log");
    std::fs::write(&cut_path, cut).unwrap();
    let output = run(kiln().args(["parse", "--parser", "pytest"]).arg(&cut_path));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("inconsistent: validation would reject"),
        "{stdout}"
    );
    let output = run(kiln().args(["parse", "--parser", "nosuch"]).arg(&cut_path));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(String::from_utf8_lossy(&output.stderr).contains("kiln knows: "));
}

#[test]
fn repairs_lists_the_rules() {
    let output = run(kiln().args(["--json", "repairs"]));
    assert!(output.status.success(), "{}", text(&output));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap_or_default();
    let names: Vec<&str> = report["rules"]
        .as_array()
        .map(|r| r.iter().filter_map(|r| r["name"].as_str()).collect())
        .unwrap_or_default();
    for name in [
        "python-editable-backend",
        "python-test-requirements",
        "missing-header",
        "pkg-config",
    ] {
        assert!(names.contains(&name), "{name} in {names:?}");
    }
    let output = run(kiln().arg("repairs"));
    assert!(String::from_utf8_lossy(&output.stdout).contains("signature: "));
}

/// Every command that prints ends quietly when its reader went away (`kiln repairs | head -1`):
/// exit 0 or 141 (what a shell reports for SIGPIPE), no panic text. The pipe's read end is
/// closed before kiln starts, so every write meets the closed pipe.
#[test]
fn commands_end_quietly_on_a_closed_pipe() {
    let log = data("pytest/ra_captured_logs.log");
    let log = log.to_string_lossy().to_string();
    // The checked-in pipeline, with the task file it names.
    let tmp = crate::tempdir();
    std::fs::copy(
        crate::workspace_root().join("pipeline.toml"),
        tmp.path().join("pipeline.toml"),
    )
    .unwrap();
    std::fs::write(tmp.path().join("tasks.jsonl"), "").unwrap();
    let config = tmp.path().join("pipeline.toml");
    let config = config.to_string_lossy().to_string();
    let cases: Vec<Vec<&str>> = vec![
        vec!["--help"],
        vec!["repairs"],
        vec!["--json", "repairs"],
        vec!["parse", &log],
        vec!["--json", "parse", &log],
        vec!["--config", &config, "check"],
        vec!["--config", &config, "graph"],
        vec!["--config", &config, "recipes"],
    ];
    for args in cases {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let output = kiln()
            .args(&args)
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            matches!(output.status.code(), Some(0 | 141)),
            "kiln {args:?}: {:?}\n{stderr}",
            output.status
        );
        assert!(
            !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
            "kiln {args:?}: {stderr}"
        );
    }
}

/// Under `--json` an error is a JSON line on stderr with the exit code, as progress is.
#[test]
fn errors_under_json_are_a_json_line_with_the_exit_code() {
    let tmp = crate::tempdir();
    let output = run(kiln()
        .args(["--json", "status", "--config"])
        .arg(tmp.path().join("missing.toml")));
    let code = output.status.code();
    assert!(matches!(code, Some(2..=6)), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let last = stderr.lines().last().unwrap_or_default();
    let error: serde_json::Value = serde_json::from_str(last)
        .unwrap_or_else(|e| panic!("{e}: the error is not a JSON line: {stderr}"));
    assert_eq!(error["event"], "error");
    assert_eq!(error["exit_code"].as_i64(), code.map(i64::from));
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.contains("missing.toml")),
        "{error}"
    );
}

/// `--color always` paints even through a pipe, `--color never` (and the default on a pipe)
/// does not.
#[test]
fn color_is_chosen_by_the_flag_and_off_on_a_pipe_by_default() {
    let missing = |extra: &[&str]| {
        let output = run(kiln()
            .args(["status", "--config", "/nonexistent/pipeline.toml"])
            .args(extra));
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    assert!(missing(&["--color", "always"]).starts_with("\u{1b}[1;31merror:"));
    assert!(missing(&["--color", "never"]).starts_with("error:"));
    assert!(missing(&[]).starts_with("error:"));
}
