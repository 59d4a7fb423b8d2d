//! Crashes and re-runs: a SIGKILL in the middle of launch loses and duplicates nothing, and a
//! forced re-run of one instance rewrites only that instance's rows.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kiln_schema::{EnvironmentRecord, Row, ValidationRecord};

use crate::{
    ca_bundle, containers_with_label, dangling_images_with_label, kiln, run, tempdir, text,
};

/// Writes the demo fixtures (crawled from the demo's fake GitHub, which lives as long as the
/// returned demo) with a config of their own dataset name, so this test's images and containers
/// never mix with another test's.
pub(crate) fn prepare(dir: &Path, dataset: &str) -> (kiln_demo::Demo, PathBuf) {
    let demo = kiln_demo::prepare(dir, ca_bundle().as_deref(), 1).unwrap();
    let text = std::fs::read_to_string(&demo.config_path).unwrap_or_default();
    let text = text.replace("name = \"demo\"", &format!("name = \"{dataset}\""));
    std::fs::write(&demo.config_path, text).unwrap();
    let config = demo.config_path.clone();
    (demo, config)
}

/// `kiln` with the demo's GitHub token in its environment.
pub(crate) fn kiln_with_token(demo: &kiln_demo::Demo) -> std::process::Command {
    let mut command = kiln();
    command.env(kiln_demo::DEMO_TOKEN_ENV, &demo.token);
    command
}

/// The only run directory of a dataset.
pub(crate) fn only_run(dir: &Path, dataset: &str) -> PathBuf {
    let runs = dir.join("datasets").join(dataset).join("runs");
    let entries: Vec<PathBuf> = std::fs::read_dir(&runs)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        entries.len(),
        1,
        "expected exactly one run in {}: {entries:?}",
        runs.display()
    );
    entries.into_iter().next().unwrap_or_default()
}

pub(crate) fn manifest_rows(stage_dir: &Path) -> u64 {
    std::fs::read_to_string(stage_dir.join("manifest.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|m| m["rows"].as_u64())
        .unwrap_or(0)
}

pub(crate) fn rows<R: Row>(stage_dir: &Path) -> Vec<R> {
    kiln_store::read_rows::<R>(stage_dir).unwrap()
}

pub(crate) fn assert_unique<R: Row>(rows: &[R]) {
    let mut keys: Vec<&str> = rows.iter().map(Row::key).collect();
    keys.sort_unstable();
    let before = keys.len();
    keys.dedup();
    assert_eq!(keys.len(), before, "duplicate rows: {keys:?}");
}

#[test]
fn sigkill_during_launch_loses_nothing_and_force_rewrites_one_instance() {
    let tmp = tempdir();
    let dir = tmp.path().join("fixtures");
    let (demo, config) = prepare(&dir, "crash");

    // One item at a time, so that the kill lands with finished rows and an item in flight.
    let mut child = kiln_with_token(&demo)
        .args(["run", "--concurrency", "1", "--config"])
        .arg(&config)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(900);
    let launch_dir = loop {
        let found = std::fs::read_dir(dir.join("datasets/crash/runs"))
            .ok()
            .and_then(|mut d| d.next())
            .and_then(Result::ok)
            .map(|e| e.path().join("launch"));
        if let Some(launch) = found.filter(|l| manifest_rows(l) >= 1) {
            break launch;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("kiln exited ({status}) before the kill");
        }
        assert!(Instant::now() < deadline, "launch never wrote a row");
        std::thread::sleep(Duration::from_millis(100));
    };
    child.kill().unwrap();
    let _ = child.wait();

    let before: Vec<EnvironmentRecord> = rows(&launch_dir);
    assert!(
        !before.is_empty() && before.len() < 4,
        "the kill must land mid-stage: {} rows",
        before.len()
    );
    let run_dir = only_run(&dir, "crash");
    let run_id = run_dir
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let manifest = std::fs::read_to_string(launch_dir.join("manifest.json")).unwrap_or_default();
    assert!(manifest.contains("\"incomplete\""), "{manifest}");

    // The re-run resumes the same run: nothing before the kill is redone, nothing is lost.
    let output = run(kiln_with_token(&demo)
        .args(["run", "--config"])
        .arg(&config));
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(
        only_run(&dir, "crash"),
        run_dir,
        "the re-run must resume, not start over"
    );
    let after: Vec<EnvironmentRecord> = rows(&launch_dir);
    assert_eq!(after.len(), 4, "one launch row per candidate");
    assert_unique(&after);
    for row in &before {
        let same = after.iter().find(|r| r.instance_id == row.instance_id);
        assert_eq!(
            same,
            Some(row),
            "a row written before the kill changed or vanished"
        );
    }
    let left = containers_with_label(&format!("kiln.run=crash/{run_id}"));
    assert!(left.is_empty(), "containers left behind: {left:?}");
    // Nor images: a Dockerfile check cut off by the kill leaves its finished steps' images.
    let dataset = std::path::absolute(dir.join("datasets/crash")).unwrap_or_default();
    let left = dangling_images_with_label(&format!("kiln.dataset={}", dataset.display()));
    assert!(left.is_empty(), "images left behind: {left:?}");

    // Re-validate one instance: only its row changes.
    let validate_dir = run_dir.join("validate");
    let validations: Vec<ValidationRecord> = rows(&validate_dir);
    assert_eq!(validations.len(), 3, "built instances are validated");
    let target = "kiln-demo__calc-2";
    // Not quiet: the JSON event stream says the stage covers the one named instance.
    let output = run(std::process::Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args([
            "--json", "stage", "validate", "--only", target, "--force", "--config",
        ])
        .arg(&config));
    assert!(output.status.success(), "{}", text(&output));
    let started: Vec<serde_json::Value> = String::from_utf8_lossy(&output.stderr)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["event"] == "stage-started")
        .collect();
    assert_eq!(
        started,
        [serde_json::json!({"event": "stage-started", "stage": "validate", "total": 1, "done": 0})],
        "{}",
        text(&output)
    );
    let revalidated: Vec<ValidationRecord> = rows(&validate_dir);
    assert_eq!(revalidated.len(), 3);
    assert_unique(&revalidated);
    for row in &validations {
        let now = revalidated
            .iter()
            .find(|r| r.instance_id == row.instance_id);
        let Some(now) = now else {
            panic!("{} vanished", row.instance_id);
        };
        if row.instance_id == target {
            assert_ne!(
                now.total_seconds, row.total_seconds,
                "the row was not rewritten"
            );
            assert_eq!(now.FAIL_TO_PASS, row.FAIL_TO_PASS);
            assert_eq!(now.status.as_str(), "validated");
        } else {
            assert_eq!(now, row, "another instance's row changed");
        }
    }
    // A typo in `--only` is an error naming the id, and changes nothing.
    let output = run(kiln()
        .args([
            "stage",
            "validate",
            "--only",
            "kiln-demo__calc-99",
            "--force",
            "--config",
        ])
        .arg(&config));
    assert_eq!(output.status.code(), Some(6), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("kiln-demo__calc-99") && stderr.contains("no such candidate"),
        "{stderr}"
    );
    assert_eq!(rows::<ValidationRecord>(&validate_dir).len(), 3);
    let status = run(kiln().args(["--json", "status", "--config"]).arg(&config));
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap_or_default();
    assert_eq!(status["status"], "complete", "{status:#}");
    let left = containers_with_label(&format!("kiln.run=crash/{run_id}"));
    assert!(left.is_empty(), "containers left behind: {left:?}");
}
