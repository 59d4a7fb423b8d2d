//! The validate stage's rules on the real engine: one kiln-testkit fixture per rule (flaky tests,
//! pass-to-fail, a fake-passing run, a patch that only applies with fuzz, tests new in the test
//! patch), run with `kiln run` and checked row by row; then, when the binary has `kiln evaluate`,
//! the release is evaluated with the gold patches and with empty ones.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use kiln_schema::ValidationRecord;

use crate::{ca_bundle, containers_with_label, kiln, run, tempdir, text};

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_string()).collect()
}

/// The tests of the flaky fixture that fail or error by a coin flip in every run.
const FAIRNESS: [&str; 5] = [
    "tests/test_fairness.py::test_roll_is_fair[20]",
    "tests/test_fairness.py::test_roll_is_fair[2]",
    "tests/test_fairness.py::test_roll_is_fair[4]",
    "tests/test_fairness.py::test_roll_is_fair[6]",
    "tests/test_fairness.py::test_roll_is_fair[8]",
];

/// Labels of the runs of one side (`before:1`, ...) in a row's `runs` map.
fn side_runs<'r>(
    row: &'r ValidationRecord,
    side: &str,
) -> Vec<(&'r String, &'r BTreeMap<String, String>)> {
    row.runs
        .iter()
        .filter(|(label, _)| label.starts_with(&format!("{side}:")))
        .collect()
}

/// Whether a test's status differs between the repeats of one side, from the row's own
/// `run_statuses` (`absent` when not in the log).
fn unstable(row: &ValidationRecord, test: &str) -> bool {
    ["before", "after"].iter().any(|side| {
        let seen: BTreeSet<Option<_>> = row
            .run_statuses
            .iter()
            .filter(|(label, _)| label.starts_with(&format!("{side}:")))
            .map(|(_, statuses)| statuses.get(test).copied())
            .collect();
        seen.len() > 1
    })
}

fn check_flaky(row: &ValidationRecord) {
    let id = &row.instance_id;
    assert_eq!(row.status.as_str(), "validated", "{id}: {row:#?}");
    assert_eq!(
        row.FAIL_TO_PASS,
        ["tests/test_notation.py::test_parse_negative_modifier"],
        "{id}"
    );
    assert_eq!(
        row.fail_to_pass_classes,
        BTreeMap::from([(
            "tests/test_notation.py::test_parse_negative_modifier".to_string(),
            "f2p".to_string()
        )]),
        "{id}"
    );
    assert_eq!(
        row.PASS_TO_PASS,
        strings(&[
            "tests/test_notation.py::test_parse_modifier",
            "tests/test_notation.py::test_parse_simple",
            "tests/test_roll.py::test_roll_in_range",
            "tests/test_roll.py::test_roll_rejects_zero_sides",
        ]),
        "{id}"
    );
    // With 3 + 3 runs, all five coin-flip tests staying stable has probability 16^-5.
    assert!(!row.flaky.is_empty(), "{id}: nothing flaky: {row:#?}");
    for test in FAIRNESS {
        assert!(!row.FAIL_TO_PASS.iter().any(|t| t == test), "{id}: {test}");
        assert!(!row.PASS_TO_PASS.iter().any(|t| t == test), "{id}: {test}");
        // Exactly the unstable ones are recorded, each with its status in all six runs.
        assert_eq!(
            row.flaky.contains_key(test),
            unstable(row, test),
            "{id}: {test}: {row:#?}"
        );
        if let Some(runs) = row.flaky.get(test) {
            assert_eq!(runs.len(), 6, "{id}: {test}: {runs:?}");
            assert!(
                runs.values().all(|s| s == "fail" || s == "error"),
                "{id}: {test}: {runs:?}"
            );
        }
    }
    let flaky: Vec<&String> = row.flaky.keys().collect();
    assert!(
        flaky.iter().all(|t| FAIRNESS.contains(&t.as_str())),
        "{id}: unexpected flaky tests {flaky:?}"
    );
}

fn check_pass_to_fail(row: &ValidationRecord) {
    let id = &row.instance_id;
    assert_eq!(row.status.as_str(), "rejected", "{id}: {row:#?}");
    assert_eq!(
        row.failure_class.map(kiln_schema::FailureClass::as_str),
        Some("pass-to-fail"),
        "{id}: {row:#?}"
    );
    assert_eq!(
        row.pass_to_fail,
        strings(&[
            "tests/test_format.py::test_format_length",
            "tests/test_format.py::test_format_length_rounds",
        ]),
        "{id}"
    );
}

fn check_fake_pass(row: &ValidationRecord) {
    let id = &row.instance_id;
    assert_eq!(row.status.as_str(), "rejected", "{id}: {row:#?}");
    assert_eq!(
        row.failure_class.map(kiln_schema::FailureClass::as_str),
        Some("invalid-run"),
        "{id}: {row:#?}"
    );
    let reason = row.reason.as_deref().unwrap_or_default();
    assert!(
        reason.contains("run after:") && !reason.contains("before:"),
        "{id}: the after side is the invalid one: {reason}"
    );
    // The before side is consistent: the new test fails and the command exits 1. No test
    // passes after the fix in the first runs, so no repeat could make one FAIL_TO_PASS: the
    // repeats are not run, and the reason says so.
    let before = side_runs(row, "before");
    let after = side_runs(row, "after");
    assert_eq!((before.len(), after.len()), (1, 1), "{id}: {:#?}", row.runs);
    assert!(
        reason.contains("stopped after the first run of each side"),
        "{id}: {reason}"
    );
    for (label, run) in before {
        assert_eq!(run["exit_code"], "1", "{id} {label}: {run:?}");
        assert_eq!(run["failed"], "1", "{id} {label}: {run:?}");
        assert_eq!(
            row.run_statuses[label]
                .get("tests/test_case.py::test_title_case_collapses_whitespace")
                .map(|s| s.as_str()),
            Some("fail"),
            "{id} {label}"
        );
    }
    // The after side exits 3 with nothing failing in its log.
    for (label, run) in after {
        assert_eq!(run["exit_code"], "3", "{id} {label}: {run:?}");
        assert_eq!(
            (run["failed"].as_str(), run["errors"].as_str()),
            ("0", "0"),
            "{id} {label}"
        );
    }
    assert!(row.FAIL_TO_PASS.is_empty(), "{id}: {row:#?}");
}

fn check_fuzz(row: &ValidationRecord) {
    let id = &row.instance_id;
    assert_eq!(row.status.as_str(), "validated", "{id}: {row:#?}");
    assert_eq!(
        row.FAIL_TO_PASS,
        ["tests/test_parser.py::test_semicolon_comments"],
        "{id}"
    );
    assert_eq!(
        row.PASS_TO_PASS,
        strings(&[
            "tests/test_parser.py::test_hash_comments",
            "tests/test_parser.py::test_sections",
            "tests/test_parser.py::test_value_with_equals",
            "tests/test_writer.py::test_round_trip",
        ]),
        "{id}"
    );
    let after = side_runs(row, "after");
    assert_eq!(after.len(), 3, "{id}: {:#?}", row.runs);
    for (label, run) in after {
        assert_eq!(
            run["patch_methods"], "test:git-apply,gold:patch-fuzz",
            "{id} {label}"
        );
    }
    for (label, run) in side_runs(row, "before") {
        assert_eq!(run["patch_methods"], "test:git-apply", "{id} {label}");
    }
    assert!(row.flaky.is_empty(), "{id}: {:?}", row.flaky);
}

fn check_n2p(row: &ValidationRecord) {
    let id = &row.instance_id;
    let new_tests = strings(&[
        "tests/test_rgb_to_hex.py::test_rgb_to_hex",
        "tests/test_rgb_to_hex.py::test_rgb_to_hex_rejects_out_of_range[-1]",
        "tests/test_rgb_to_hex.py::test_rgb_to_hex_rejects_out_of_range[256]",
    ]);
    assert_eq!(row.status.as_str(), "validated", "{id}: {row:#?}");
    assert_eq!(row.FAIL_TO_PASS, new_tests, "{id}: {row:#?}");
    let classes: BTreeMap<String, String> = new_tests
        .iter()
        .map(|t| (t.clone(), "n2p".to_string()))
        .collect();
    assert_eq!(row.fail_to_pass_classes, classes, "{id}");
    // The older tests ran and passed before the fix too: they are PASS_TO_PASS, not tests
    // "absent before" because a collection error stopped the session.
    assert_eq!(
        row.PASS_TO_PASS,
        strings(&[
            "tests/test_hex_to_rgb.py::test_hex_to_rgb",
            "tests/test_hex_to_rgb.py::test_hex_to_rgb_rejects_garbage",
            "tests/test_hex_to_rgb.py::test_hex_to_rgb_short",
            "tests/test_mix.py::test_mix_halfway",
        ]),
        "{id}: {row:#?}"
    );
}

/// A per-case check; it panics with a message when the row breaks the case's rule.
type Check = fn(&ValidationRecord);

/// The release directory of the dataset (there is one).
fn release_dir(dir: &Path) -> PathBuf {
    crate::release_dir(dir, "vc")
}

/// Whether the binary has `kiln evaluate` (it arrived after the validate stage).
fn has_evaluate() -> bool {
    let output = run(kiln().args(["evaluate", "--help"]));
    output.status.success()
}

/// Runs `kiln --json evaluate` with one prediction per task and returns the resolution of
/// every evaluated instance.
fn evaluate(
    dir: &Path,
    name: &str,
    tasks: &[serde_json::Value],
    gold: bool,
) -> BTreeMap<String, String> {
    let predictions = dir.join(format!("{name}.jsonl"));
    let lines: String = tasks
        .iter()
        .map(|task| {
            let patch = if gold {
                task["patch"].clone()
            } else {
                "".into()
            };
            let line = serde_json::json!({
                "instance_id": task["instance_id"],
                "model_name_or_path": name,
                "model_patch": patch,
            });
            format!("{line}\n")
        })
        .collect();
    std::fs::write(&predictions, lines).unwrap();
    let mut command = kiln();
    command
        .args(["--json", "evaluate", "--dataset"])
        .arg(release_dir(dir))
        .arg("--predictions")
        .arg(&predictions)
        .arg("--output")
        .arg(dir.join(format!("evaluation-{name}")));
    let output = run(&mut command);
    assert!(output.status.success(), "{}", text(&output));
    let report: serde_json::Value =
        serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{e}\n{}", text(&output)));
    report["instances"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|i| {
            (
                i["instance_id"].as_str().unwrap_or_default().to_string(),
                i["resolution"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[test]
fn validation_rules_hold_on_their_fixtures_and_gold_patches_resolve() {
    let tmp = tempdir();
    let dir = tmp.path().join("vc");
    let layout = kiln_testkit::write_validation_cases(&dir).unwrap();
    let config = dir.join("pipeline.toml");
    std::fs::write(
        &config,
        kiln_demo::config_text("vc", ca_bundle().as_deref(), 3, false),
    )
    .unwrap();

    let output = run(kiln().args(["--json", "run", "--config"]).arg(&config));
    assert!(output.status.success(), "{}", text(&output));
    let report: serde_json::Value =
        serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{e}\n{}", text(&output)));
    let run_dir = PathBuf::from(report["run_dir"].as_str().unwrap_or_default());
    let rows: Vec<ValidationRecord> = kiln_store::read_rows(&run_dir.join("validate")).unwrap();
    let by_id: BTreeMap<&str, &ValidationRecord> =
        rows.iter().map(|r| (r.instance_id.as_str(), r)).collect();
    let ids: Vec<&str> = by_id.keys().copied().collect();
    assert_eq!(
        ids,
        [
            "kiln-vc__colorkit-15",
            "kiln-vc__dice-11",
            "kiln-vc__inikit-14",
            "kiln-vc__strutil-13",
            "kiln-vc__units-12",
        ],
        "every case launches and is validated once"
    );
    assert_eq!(layout.instances.len(), ids.len());

    // Check every case before failing, so one run reports all broken rules at once.
    let checks: [(&str, Check); 5] = [
        ("kiln-vc__dice-11", check_flaky),
        ("kiln-vc__units-12", check_pass_to_fail),
        ("kiln-vc__strutil-13", check_fake_pass),
        ("kiln-vc__inikit-14", check_fuzz),
        ("kiln-vc__colorkit-15", check_n2p),
    ];
    let mut failures = Vec::new();
    for (id, check) in checks {
        let row = by_id[id];
        if let Err(panic) = std::panic::catch_unwind(|| check(row)) {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_string()))
                .unwrap_or_default();
            failures.push(format!("{id}: {message}"));
        }
    }

    let run_id = run_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let left = containers_with_label(&format!("kiln.run=vc/{run_id}"));
    assert!(left.is_empty(), "containers left behind: {left:?}");

    // Evaluation reads the release, which holds whatever validated; it runs even when a case
    // above failed, so that its own result is reported too.
    if has_evaluate() {
        let tasks: Vec<serde_json::Value> = std::fs::read_to_string(&layout.tasks_file)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let validated: BTreeSet<String> = rows
            .iter()
            .filter(|r| r.status.as_str() == "validated")
            .map(|r| r.instance_id.to_string())
            .collect();
        let gold = evaluate(&dir, "gold", &tasks, true);
        let evaluated: BTreeSet<String> = gold.keys().cloned().collect();
        assert_eq!(
            evaluated, validated,
            "the release holds the validated cases"
        );
        for (id, resolution) in &gold {
            if resolution != "resolved" {
                failures.push(format!("{id}: the gold patch is {resolution}"));
            }
        }
        let empty = evaluate(&dir, "empty", &tasks, false);
        assert_eq!(empty.keys().cloned().collect::<BTreeSet<_>>(), validated);
        for (id, resolution) in &empty {
            if resolution == "resolved" || resolution == "partial" {
                failures.push(format!("{id}: an empty patch is {resolution}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
