//! The demo's release exported as Harbor tasks and run by Harbor itself (`harbor` 0.25.0 from
//! PyPI, through `scripts/harbor-check.sh`) on the real engine: the oracle agent scores reward 1
//! on every task and the nop agent 0, one trial per task. A release whose tasks are broken
//! fails the check. `kiln push --harbor` publishes the tasks to the fake Hub, byte for byte, and
//! a push without it leaves them alone.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use kiln_schema::ReleaseInstance;
use kiln_testkit::hub::FakeHub;

use crate::{containers_with_label, kiln, run, tempdir, text, workspace_root};

const HF_TOKEN: &str = "hf_e2e_harbor";
const REPO: &str = "kiln-e2e/harbor";

/// Runs `scripts/harbor-check.sh` on `release` with Harbor's jobs under `work`.
fn harbor_check(release: &Path, work: &Path) -> std::process::Output {
    run(Command::new("bash")
        .arg(workspace_root().join("scripts/harbor-check.sh"))
        .arg(release)
        .arg("--work")
        .arg(work))
}

/// Every trial of the jobs of `agent` under `work`: task name to reward (None: no reward).
fn rewards(work: &Path, agent: &str) -> BTreeMap<String, Option<f64>> {
    let mut found = BTreeMap::new();
    let jobs = std::fs::read_dir(work.join("jobs")).unwrap();
    for job in jobs.map(|j| j.unwrap().path()) {
        let is_agent = job
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(&format!("{agent}-")));
        if !is_agent {
            continue;
        }
        for trial in std::fs::read_dir(&job).unwrap().map(|t| t.unwrap().path()) {
            let Ok(text) = std::fs::read_to_string(trial.join("result.json")) else {
                continue;
            };
            let result: serde_json::Value = serde_json::from_str(&text).unwrap();
            let reward = result["verifier_result"]["rewards"]["reward"].as_f64();
            found.insert(result["task_name"].as_str().unwrap().to_string(), reward);
        }
    }
    found
}

fn push(release: &Path, hub: &FakeHub, extra: &[&str]) -> std::process::Output {
    run(kiln()
        .env("HF_ENDPOINT", hub.url())
        .env("HF_TOKEN", HF_TOKEN)
        .arg("push")
        .arg("--release")
        .arg(release)
        .args(["--repo", REPO])
        .args(extra))
}

/// Copies a directory tree (files and directories only, modes kept).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().map(|e| e.unwrap()) {
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Exports the latest run of the fixtures config in `dir` (dataset `dataset`, the export stage
/// last in the file) again, as Harbor tasks too; returns the release directory.
pub(crate) fn export_harbor_tasks(dir: &Path, dataset: &str) -> PathBuf {
    let config = dir.join("pipeline.toml");
    let mut text_of_config = std::fs::read_to_string(&config).unwrap();
    assert!(
        text_of_config
            .trim_end()
            .ends_with("\"launch\", \"validate\"]"),
        "the export stage is not last: {text_of_config}"
    );
    text_of_config.push_str("formats = [\"parquet\", \"harbor\"]\n");
    std::fs::write(&config, text_of_config).unwrap();
    let export = run(kiln()
        .arg("--config")
        .arg(&config)
        .args(["stage", "export"]));
    assert!(export.status.success(), "{}", text(&export));
    crate::release_dir(dir, dataset)
}

/// Runs `scripts/harbor-check.sh` on `release` (jobs under `work`) and asserts that it passed
/// with one trial per task of `ids`, oracle reward 1 and nop reward 0 on every one, read from
/// Harbor's own results as well as from the script's lines, and that nothing of it is left on
/// the engine.
pub(crate) fn check_with_harbor(release: &Path, work: &Path, ids: &[&str]) {
    let check = harbor_check(release, work);
    assert!(check.status.success(), "{}", text(&check));
    let printed = String::from_utf8_lossy(&check.stdout);
    let n = ids.len();
    for line in [
        format!("ok   release.json lists {n} task(s), harbor/ holds {n}"),
        format!("ok   harbor lint --ignore shared-verifier passes on {n} task(s)"),
        format!("ok   {n} of {n} task image(s) are on the engine as their rows recorded"),
        format!("ok   oracle: {n} trial(s) for {n} task(s)"),
        format!("ok   oracle: reward 1 on {n} of {n} task(s)"),
        format!("ok   nop: {n} trial(s) for {n} task(s)"),
        format!("ok   nop: reward 0 on {n} of {n} task(s)"),
        "harbor-check: passed in ".to_string(),
    ] {
        assert!(printed.contains(&line), "{line}: {}", text(&check));
    }
    for (agent, reward) in [("oracle", 1.0), ("nop", 0.0)] {
        let found = rewards(work, agent);
        let want: BTreeMap<String, Option<f64>> = ids
            .iter()
            .map(|id| ((*id).to_string(), Some(reward)))
            .collect();
        assert_eq!(found, want, "{agent}");
    }
    let left = containers_with_label("kiln.harbor-check");
    assert!(left.is_empty(), "containers left behind: {left:?}");
}

#[test]
fn harbor_runs_the_demo_release_oracle_1_and_nop_0_on_every_task() {
    let _demo = crate::demo_lock();
    let tmp = tempdir();
    let dir = tmp.path().join("demo");
    let demo = run(kiln().args(["--json", "demo", "--dir"]).arg(&dir));
    assert!(demo.status.success(), "{}", text(&demo));

    // The release also keeps a row an earlier run made, whose run is gone (as a second refresh
    // of a month keeps the first one's rows): its task has no `built_by`, and timeouts from the
    // row's whole validation time.
    let release = crate::release_dir(&dir, "demo");
    let rows: Vec<ReleaseInstance> =
        kiln_store::read_parquet(&release.join("data/test-00000-of-00001.parquet")).unwrap();
    let mut kept = rows.clone();
    kept.push(ReleaseInstance {
        instance_id: kiln_schema::InstanceId::new("kiln-demo__earlier-9").unwrap(),
        pull_number: Some("9".into()),
        // Another issue: the same fix of the same issue would be a backport, left out.
        issue_numbers: vec!["8".into()],
        run_id: "20200101-000000".into(),
        ..rows[0].clone()
    });
    kiln_store::write_release(&release, "test", &kept, 10_000).unwrap();

    let release = export_harbor_tasks(&dir, "demo");
    let ids = [
        "kiln-demo__calc-2",
        "kiln-demo__earlier-9",
        "kiln-demo__textwrap2-3",
    ];
    let manifest = kiln_pipeline::release::ReleaseManifest::read(&release).unwrap();
    let tasks = manifest.harbor.clone().unwrap();
    assert_eq!(tasks.tasks, ids);
    assert!(tasks.left_out.is_empty(), "{:?}", tasks.left_out);
    let card = std::fs::read_to_string(release.join("README.md")).unwrap();
    assert!(card.contains("3 row(s) are also Harbor tasks"), "{card}");
    let task_toml = |id: &str| -> toml::Table {
        std::fs::read_to_string(release.join("harbor").join(id).join("task.toml"))
            .unwrap()
            .parse()
            .unwrap()
    };
    for row in &rows {
        let task = task_toml(row.instance_id.as_str());
        let meta = &task["metadata"];
        assert_eq!(meta["built_by"].as_str(), Some("rules"), "{task:#?}");
        assert_eq!(meta["image_digest"].as_str(), row.image_digest.as_deref());
        assert_eq!(
            meta["fail_to_pass_count"].as_integer(),
            Some(row.FAIL_TO_PASS.len() as i64)
        );
        assert!(
            meta["test_seconds_from"]
                .as_str()
                .is_some_and(|s| s.contains("gold patch")),
            "{task:#?}"
        );
        assert_eq!(
            task["environment"]["docker_image"].as_str(),
            Some(row.image.as_str())
        );
        // The quality signals, as the release row has them.
        assert_eq!(meta["repeats"].as_integer(), Some(row.repeats));
        assert_eq!(
            meta["identical_runs_after"].as_integer(),
            Some(row.identical_runs_after)
        );
        assert_eq!(meta["solution_leak"].as_bool(), Some(row.solution_leak));
        assert_eq!(
            meta["difficulty"].as_str(),
            row.difficulty.map(kiln_schema::Difficulty::as_str)
        );
        assert_eq!(meta["filter_judge"].as_str(), Some("heuristic"));
        let verifier = task["verifier"]["timeout_sec"].as_float().unwrap();
        assert!((600.0..3600.0).contains(&verifier), "{task:#?}");
    }
    let earlier = task_toml("kiln-demo__earlier-9");
    assert!(
        earlier["metadata"].get("built_by").is_none(),
        "{earlier:#?}"
    );
    assert_eq!(
        earlier["metadata"]["test_seconds"].as_float(),
        Some((rows[0].validate_seconds * 100.0).round() / 100.0)
    );

    // Harbor's own CLI on the tasks: lint, images, then the oracle and nop agents.
    check_with_harbor(&release, &tmp.path().join("harbor"), &ids);

    // A release whose tasks are broken fails: a test list naming a test that never runs
    // (the oracle scores 0), and a task without its verifier, which Harbor skips silently.
    let broken = tmp.path().join("broken");
    copy_tree(&release, &broken);
    std::fs::write(
        broken.join("harbor/kiln-demo__calc-2/tests/FAIL_TO_PASS.txt"),
        "tests/test_ops.py::test_never_written\n",
    )
    .unwrap();
    std::fs::remove_file(broken.join("harbor/kiln-demo__textwrap2-3/tests/test.sh")).unwrap();
    let failed = harbor_check(&broken, &tmp.path().join("harbor-broken"));
    assert_eq!(failed.status.code(), Some(1), "{}", text(&failed));
    let printed = String::from_utf8_lossy(&failed.stdout);
    for line in [
        "FAIL oracle: 2 trial(s) for 3 task(s)",
        "FAIL oracle: reward 1 on 1 of 3 task(s)",
        "kiln-demo__textwrap2-3: no trial (Harbor skipped the task)",
        "FAIL_TO_PASS not found: tests/test_ops.py::test_never_written",
        "harbor-check: FAILED in ",
    ] {
        assert!(printed.contains(line), "{line}: {}", text(&failed));
    }
    let left = containers_with_label("kiln.harbor-check");
    assert!(left.is_empty(), "containers left behind: {left:?}");

    push_sends_the_tasks_only_when_asked(&release, &tasks.files);
}

/// `kiln push` leaves the tasks out unless `--harbor` asks for them, then sends every one as
/// the release lists it; a later push without `--harbor` deletes none of them.
fn push_sends_the_tasks_only_when_asked(
    release: &Path,
    files: &[kiln_pipeline::release::ReleaseFile],
) {
    let hub = FakeHub::start(&[HF_TOKEN]).unwrap();
    let on_hub = |path: &str| PathBuf::from("releases/2024-09").join(path);
    let harbor_on_hub = |hub: &FakeHub| -> Vec<String> {
        hub.files(REPO)
            .into_keys()
            .filter(|p| p.starts_with("releases/2024-09/harbor/"))
            .collect()
    };
    let plain = push(release, &hub, &[]);
    assert!(plain.status.success(), "{}", text(&plain));
    assert!(harbor_on_hub(&hub).is_empty());
    let with_tasks = push(release, &hub, &["--harbor"]);
    assert!(with_tasks.status.success(), "{}", text(&with_tasks));
    let stored = hub.files(REPO);
    assert_eq!(harbor_on_hub(&hub).len(), files.len());
    for file in files {
        let local = std::fs::read(release.join(&file.path)).unwrap();
        let path = on_hub(&file.path).to_string_lossy().into_owned();
        assert_eq!(stored.get(&path), Some(&local), "{path}");
    }
    assert!(hub.problems().is_empty(), "{:#?}", hub.problems());
    let again = push(release, &hub, &[]);
    assert!(again.status.success(), "{}", text(&again));
    assert_eq!(harbor_on_hub(&hub).len(), files.len());
}
