//! `swebench::GRADE_AWK`, the awk port of the harness's parsers and grading that Harbor
//! verifiers run, reads every captured log in `tests/data/` (as the harness sees it: through the
//! output filter or the id script where kiln's parser has one) to exactly the status map of the
//! Rust ports in `swebench.rs`, on the host's mawk and on gawk and busybox awk where they are
//! installed; and it grades as the harness does.

use std::collections::BTreeMap;
use std::path::Path;

use kiln_testlog::swebench::{
    GRADE_AWK, GRADED_PARSERS, HarnessStatuses, harness_log, harness_parse, harness_parsers,
    harness_passed, id_script,
};

use crate::check::{other_awks, run_script};

/// The harness's view of `log` of kiln parser `parser`: the output with the filter's lines, or
/// followed by the id script's lines (run here with the host's awk or node), as validation
/// reads a run.
fn harness_view(parser: &str, log: &str) -> String {
    match id_script(parser) {
        Some(script) => format!("{log}\n{}", run_script("", &script, log)),
        None => harness_log(parser, log).into_owned(),
    }
}

/// Writes `text` to a file in `dir` and returns its path.
fn file(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

/// Runs the grader with `shim` (another awk, or none) over `view`; returns its exit code and
/// what it printed.
fn grade(shim: &str, vars: &[(&str, &str)], view: &str) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let program = file(dir.path(), "grade.awk", GRADE_AWK);
    let input = file(dir.path(), "view.log", view);
    let assignments: String = vars
        .iter()
        .map(|(k, v)| format!(" -v {k}={}", quote(v)))
        .collect();
    let script = format!(
        "{shim}LC_ALL=C awk{assignments} -f {} {}; echo \"exit $?\"",
        quote(&program),
        quote(&input)
    );
    let printed = run_script("", &script, "");
    let (body, code) = printed
        .trim_end()
        .rsplit_once("exit ")
        .unwrap_or_else(|| panic!("no exit line: {printed}"));
    (code.parse().unwrap(), body.to_string())
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The grader's status map of `view` read by `parser`.
fn dumped(shim: &str, parser: &str, view: &str) -> HarnessStatuses {
    let (code, printed) = grade(shim, &[("parser", parser), ("dump", "1")], view);
    assert_eq!(code, 0, "{printed}");
    printed
        .lines()
        .map(|line| {
            let (status, id) = line.split_once('\t').unwrap_or((line, ""));
            (id.to_string(), status.to_string())
        })
        .collect()
}

/// Every log of `tests/data/<dir>`.
fn logs(dir: &str) -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(dir);
    let mut found: Vec<(String, String)> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&path).unwrap())
        })
        .collect();
    found.sort();
    found
}

/// Logs written for the grader's edge cases, per harness parser: whitespace Python splits on,
/// colour codes, skip summaries, `go test` names with parentheses, TAP numbers.
fn edge_logs() -> Vec<(&'static str, String)> {
    vec![
        (
            "parse_log_pytest_v2",
            "\x1b[32mPASSED\x1b[0m t.py::a[1 / 2]\nFAILED t.py::b - assert 1 - 2\n\
             SKIPPED [2] t.py:3: no numpy\nt.py::c\tPASSED\nt.py::d[x\u{a0}y] XFAIL\n\
             XFAIL t.py::e\nERROR t.py::f\r\nPASSED\nweird line endsPASSED\n"
                .into(),
        ),
        (
            "parse_log_pytest",
            "PASSED t.py::a[1 / 2]\nFAILED t.py::b - assert - x\nSKIPPED [1] t.py:1: r\n\
             PASSED\u{2003}t.py::wide\nERROR\n"
                .into(),
        ),
        (
            "parse_log_cargo",
            "test a::b ... ok\n  test c ... FAILED  \ntest d ... ignored\ntest e f ... ok\n\
             test\u{a0}g ... ok\ntests h ... ok\ntest i ...ok\n"
                .into(),
        ),
        (
            "parse_log_jest_json",
            "[PASSED] a b  c\n  [FAILED] d\n[PASSED]e\n[PASSED] \n[PASSED]\u{a0}f\u{a0}g\n\
             [SKIPPED] h\n[PASSED] unicode ✓ é\n"
                .into(),
        ),
        (
            "parse_log_gotest",
            "--- PASS: TestA (0.00s)\n    --- FAIL: TestA/sub (x) (0.01s)\n\
             --- SKIP: TestB ()\n--- SKIP: TestC () (1s)\n--- PASS: TestD (a)b\n--- PASS:  (1s)\n"
                .into(),
        ),
        (
            "parse_log_tap",
            "ok 1 adds\nnot ok 12 divides by zero\nok 3  two spaces\nok x nope\nok 4\nnot ok 5 # SKIP\n"
                .into(),
        ),
    ]
}

#[test]
fn the_grader_reads_every_log_as_the_rust_ports_do() {
    let mut cases: Vec<(String, &'static str, String)> = Vec::new();
    for kiln in kiln_testlog::parser_names() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data")
            .join(kiln);
        if harness_parsers(kiln).is_empty() || !dir.is_dir() {
            continue;
        }
        for (name, log) in logs(kiln) {
            let view = harness_view(kiln, &log);
            for parser in harness_parsers(kiln) {
                cases.push((format!("{kiln}/{name}"), parser, view.clone()));
            }
        }
    }
    for (parser, log) in edge_logs() {
        cases.push((format!("edge cases of {parser}"), parser, log));
    }
    // Every harness parser kiln names is ported, and each reads at least one log.
    for parser in GRADED_PARSERS {
        assert!(
            cases.iter().any(|(_, p, _)| *p == parser),
            "{parser} has no log"
        );
    }
    for shim in other_awks() {
        for (name, parser, view) in &cases {
            let want = harness_parse(parser, view).unwrap();
            let got = dumped(&shim, parser, view);
            assert_eq!(got, want, "{name} read by {parser} with {shim:?}");
        }
    }
}

#[test]
fn every_parser_kiln_names_is_graded() {
    for kiln in kiln_testlog::parser_names() {
        for parser in harness_parsers(kiln) {
            assert!(GRADED_PARSERS.contains(parser), "{parser}");
        }
    }
}

/// Grades `view` with `fail_to_pass` and `pass_to_pass`; returns the exit code and report.
fn graded(
    parser: &str,
    view: &str,
    exit_code: &str,
    fail_to_pass: &[&str],
    pass_to_pass: &[&str],
) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let list = |ids: &[&str]| ids.iter().map(|id| format!("{id}\n")).collect::<String>();
    let f2p = file(dir.path(), "FAIL_TO_PASS", &list(fail_to_pass));
    let p2p = file(dir.path(), "PASS_TO_PASS", &list(pass_to_pass));
    grade(
        "",
        &[
            ("parser", parser),
            ("exit_code", exit_code),
            ("fail_to_pass", &f2p),
            ("pass_to_pass", &p2p),
        ],
        view,
    )
}

#[test]
fn a_run_resolves_only_when_every_listed_test_passed() {
    let view = "PASSED t.py::fixed[1 / 2]\nPASSED t.py::kept\nXFAIL t.py::expected\n\
                FAILED t.py::other - boom\nSKIPPED t.py::skipped\n";
    let v2 = "parse_log_pytest_v2";
    let (code, report) = graded(v2, view, "1", &["t.py::fixed[1 / 2]"], &["t.py::kept"]);
    assert_eq!(code, 0, "{report}");
    assert!(
        report.contains("resolved: all 2 listed test(s) passed"),
        "{report}"
    );
    assert!(
        report.contains("FAIL_TO_PASS PASSED: t.py::fixed[1 / 2]"),
        "{report}"
    );
    // XFAIL counts as passed, as in the harness.
    assert_eq!(graded(v2, view, "1", &["t.py::expected"], &[]).0, 0);
    // A failing, skipped or absent listed test: not resolved, naming it.
    for (f2p, p2p, shown) in [
        (
            &["t.py::other"][..],
            &[][..],
            "FAIL_TO_PASS FAILED: t.py::other",
        ),
        (
            &["t.py::fixed[1 / 2]"],
            &["t.py::skipped"],
            "PASS_TO_PASS SKIPPED: t.py::skipped",
        ),
        (&["t.py::gone"], &[], "FAIL_TO_PASS not found: t.py::gone"),
    ] {
        let (code, report) = graded(v2, view, "1", f2p, p2p);
        assert_eq!(code, 1, "{report}");
        assert!(report.contains(shown), "{report}");
        assert!(report.contains("not resolved: 1 of"), "{report}");
    }
    // No FAIL_TO_PASS test: never resolved.
    let (code, report) = graded(v2, view, "0", &[], &["t.py::kept"]);
    assert_eq!(code, 1, "{report}");
    // A non-zero exit with no failure read is an invalid run (a patch printing its own PASSED
    // lines), as the harness's get_logs_eval has it; with a failure read, the exit code is
    // explained.
    let passing = "PASSED t.py::fixed\nPASSED t.py::kept\n";
    let (code, report) = graded(v2, passing, "2", &["t.py::fixed"], &["t.py::kept"]);
    assert_eq!(code, 1, "{report}");
    assert!(report.contains("an invalid run"), "{report}");
    assert_eq!(
        graded(v2, passing, "0", &["t.py::fixed"], &["t.py::kept"]).0,
        0
    );
    // An unknown parser or a missing list grades nothing.
    assert_eq!(
        graded("parse_log_nonsense", view, "0", &["t.py::kept"], &[]).0,
        1
    );
    let (code, report) = grade(
        "",
        &[
            ("parser", v2),
            ("exit_code", "0"),
            ("fail_to_pass", "/nonexistent/list"),
            ("pass_to_pass", "/nonexistent/list"),
        ],
        view,
    );
    assert_eq!(code, 1, "{report}");
    assert!(report.contains("cannot read the test lists"), "{report}");
}

/// An id cut inside its parameters resolves by prefix when every key it begins agrees on
/// passing, exactly as `harness_passed` decides.
#[test]
fn truncated_ids_resolve_as_the_harness_resolves_them() {
    let view = "PASSED t.py::f[a b]\nPASSED t.py::f[a c]\nPASSED t.py::g[x1]\nFAILED t.py::g[x2]\n";
    let v1 = "parse_log_pytest";
    let map = harness_parse(v1, view).unwrap();
    let ids = ["t.py::f[a", "t.py::g[x", "t.py::h[", "t.py::f"];
    let verdicts: BTreeMap<&str, bool> = ids
        .iter()
        .map(|id| (*id, graded(v1, view, "1", &[id], &[]).0 == 0))
        .collect();
    let want: BTreeMap<&str, bool> = ids
        .iter()
        .map(|id| (*id, harness_passed(id, &map)))
        .collect();
    assert_eq!(verdicts, want);
    assert!(verdicts["t.py::f[a"]);
}
