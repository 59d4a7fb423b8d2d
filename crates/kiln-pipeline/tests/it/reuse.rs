//! Environment reuse through the launch stage, on a scripted engine.

use std::sync::Arc;

use kiln_core::config::Pipeline;
use kiln_pipeline::RunOptions;
use kiln_schema::EnvironmentRecord;

/// Two tasks of the demo's calc repository under `dir`, the later one's base commit a
/// descendant of the earlier one's (`kiln-demo__calc-2` and `kiln-demo__calc-9`), the later one
/// created first; a config with `reuse = true` and `verify_reuse = 1`.
fn two_commits(dir: &std::path::Path) -> Pipeline {
    let layout = kiln_testkit::write_demo(&dir.join("fixtures")).unwrap();
    let text = std::fs::read_to_string(&layout.tasks_file).unwrap();
    let mut earlier: serde_json::Value = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|t| t["instance_id"] == "kiln-demo__calc-2")
        .unwrap();
    let repo = layout.repos_dir.join("kiln-demo/calc");
    let head = std::process::Command::new("git")
        .arg("-C")
        .arg(&repo)
        .args(["rev-parse", "main"])
        .output()
        .unwrap();
    let mut later = earlier.clone();
    later["instance_id"] = "kiln-demo__calc-9".into();
    later["base_commit"] = String::from_utf8_lossy(&head.stdout).trim().into();
    // The later commit's task was created first (and comes first in the file): launch orders
    // a repository's instances by the date of their base commits, not by creation time.
    later["created_at"] = "2024-01-01T00:00:00Z".into();
    earlier["created_at"] = "2030-01-01T00:00:00Z".into();
    let tasks = dir.join("tasks.jsonl");
    std::fs::write(&tasks, format!("{later}\n{earlier}\n")).unwrap();
    let config = format!(
        "[dataset]\nname = \"reuse\"\nroot = \"datasets\"\n\
         [sources.tasks]\nkind = \"ingest\"\npath = {tasks:?}\nclone_url = \"{repos}/{{owner}}/{{name}}\"\n\
         [stages.launch]\nkind = \"launch\"\ninputs = [\"tasks\"]\nreuse = true\nverify_reuse = 1\nconcurrency = 2\n",
        repos = layout.repos_dir.display(),
    );
    let path = dir.join("pipeline.toml");
    std::fs::write(&path, config).unwrap();
    Pipeline::load(&path).unwrap()
}

/// The reused launch's delta script moves the earlier environment's checkout to the later
/// commit, as git does in a real container.
fn moves_the_checkout(runtime: &kiln_testkit::runtime::ScriptedRuntime, dir: &std::path::Path) {
    let tasks = std::fs::read_to_string(dir.join("tasks.jsonl")).unwrap();
    let commit = |id: &str| -> String {
        tasks
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|t| t["instance_id"] == id)
            .and_then(|t| t["base_commit"].as_str().map(str::to_string))
            .unwrap()
    };
    let repo = dir.join("fixtures").join("repos").join("kiln-demo/calc");
    let answer = kiln_testkit::runtime::Answer::ok()
        .moves_checkout(
            &repo,
            "/testbed",
            &commit("kiln-demo__calc-2"),
            &commit("kiln-demo__calc-9"),
        )
        .unwrap();
    runtime
        .script(kiln_testkit::runtime::Script::contains("git index-pack --stdin").answer(answer));
}

/// The calc tests' pytest report, `test_add` passing and `test_other` ending as `other`.
fn calc_tests(other: &str) -> kiln_testkit::runtime::Answer {
    kiln_testkit::runtime::Answer::pytest(&[
        ("tests/test_calc.py::test_add", "PASSED"),
        ("tests/test_calc.py::test_other", other),
    ])
}

/// Runs `pipeline` on `runtime`: the launch rows by instance id, and the launch stage's
/// directory.
async fn launch_rows(
    pipeline: &Pipeline,
    runtime: &Arc<kiln_testkit::runtime::ScriptedRuntime>,
) -> (
    std::collections::BTreeMap<String, EnvironmentRecord>,
    std::path::PathBuf,
) {
    let mut runner = crate::faults::open(pipeline, runtime);
    runner.run_all(&RunOptions::default()).await.unwrap();
    let stage = runner.run_dir().join("launch");
    let rows: Vec<EnvironmentRecord> = kiln_store::read_rows(&stage).unwrap();
    let by_id = rows
        .into_iter()
        .map(|r| (r.instance_id.to_string(), r))
        .collect();
    (by_id, stage)
}

/// `reuse = true` through the launch stage: two tasks of one repository, the later one's base
/// commit a descendant of the earlier one's. They launch oldest base commit first whatever the
/// task file's order and the tasks' creation times, and the later one starts from the earlier
/// one's environment; `verify_reuse = 1` launches it cold as well and finds the same baseline.
#[tokio::test]
async fn with_reuse_a_later_commit_of_a_repository_starts_from_the_earlier_environment() {
    use kiln_testkit::runtime::{Script, ScriptedRuntime};
    let tmp = tempfile::tempdir().unwrap();
    let pipeline = two_commits(tmp.path());
    let runtime = Arc::new(ScriptedRuntime::new());
    moves_the_checkout(&runtime, tmp.path());
    runtime.script(Script::contains("-m pytest").answer(calc_tests("FAILED")));
    let (by_id, stage) = launch_rows(&pipeline, &runtime).await;
    let first = &by_id["kiln-demo__calc-2"];
    let second = &by_id["kiln-demo__calc-9"];
    assert_eq!(first.status.as_str(), "built", "{first:?}");
    assert_eq!(second.status.as_str(), "built", "{second:?}");
    assert_eq!(first.reused_from, None);
    assert_eq!(second.reused_from.as_deref(), Some("kiln-demo__calc-2"));
    // verify_reuse = 1: the reused one was launched cold too, with the same baseline, and the
    // check's image is gone.
    let check = second.reuse_check.as_deref().unwrap_or_default();
    assert!(check.starts_with("same (cold launch "), "{check}");
    assert_eq!(first.reuse_check, None);
    let manifest = kiln_store::Manifest::read(&stage).unwrap();
    for (figure, value) in [
        ("reuse.reused", 1.0),
        ("reuse.checked", 1.0),
        ("reuse.agreed", 1.0),
    ] {
        assert_eq!(manifest.stats.get(figure), Some(&value), "{figure}");
    }
    let check_tag = format!("{}.reuse-check", second.image.clone().unwrap());
    assert!(
        runtime.image(&check_tag).is_none(),
        "{check_tag} left behind"
    );
    // The later one's setup container came from the earlier one's committed image.
    let source = first.image_digest.clone().unwrap();
    assert!(
        runtime.containers().iter().any(|c| c.spec.image == source
            && c.commands()
                .iter()
                .any(|s| s.contains("git reset -q --hard"))),
        "no container from {source}"
    );
}

/// When the cold launch of `verify_reuse` ends its baseline otherwise than the reused one, the
/// row becomes the cold launch: its image under the row's tag, no `reused_from`, the check
/// saying what differed; the agreement figure counts it as not agreed.
#[tokio::test]
async fn a_reused_launch_whose_baseline_differs_from_a_cold_one_gives_way_to_it() {
    use kiln_testkit::runtime::{Script, ScriptedRuntime};
    let tmp = tempfile::tempdir().unwrap();
    let pipeline = two_commits(tmp.path());
    let runtime = Arc::new(ScriptedRuntime::new());
    moves_the_checkout(&runtime, tmp.path());
    // In the environment reused from the earlier commit (its checkout moved by git), a test
    // passes that fails everywhere else.
    runtime.script(
        Script::contains("-m pytest")
            .after("git index-pack")
            .answer(calc_tests("PASSED")),
    );
    runtime.script(Script::contains("-m pytest").answer(calc_tests("FAILED")));
    let (by_id, stage) = launch_rows(&pipeline, &runtime).await;
    let second = &by_id["kiln-demo__calc-9"];
    assert_eq!(second.status.as_str(), "built", "{second:?}");
    assert_eq!(second.reused_from, None);
    let check = second.reuse_check.as_deref().unwrap_or_default();
    assert!(
        check.starts_with("differs: tests/test_calc.py::test_other: pass → fail")
            && check.ends_with("the cold launch is kept"),
        "{check}"
    );
    assert_eq!(
        second.baseline.get("tests/test_calc.py::test_other"),
        Some(&kiln_schema::TestStatus::Fail)
    );
    // The row's tag names the cold launch's image; the check's own tag is gone.
    let tag = second.image.clone().unwrap();
    assert_eq!(
        runtime.image(&tag).map(|i| i.id),
        second.image_digest.clone()
    );
    assert!(runtime.image(&format!("{tag}.reuse-check")).is_none());
    let manifest = kiln_store::Manifest::read(&stage).unwrap();
    for (figure, value) in [
        ("reuse.reused", 0.0),
        ("reuse.checked", 1.0),
        ("reuse.agreed", 0.0),
    ] {
        assert_eq!(manifest.stats.get(figure), Some(&value), "{figure}");
    }
}
