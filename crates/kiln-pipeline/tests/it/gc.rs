//! `kiln gc` on a scripted engine: exactly the images nothing refers to are listed, and only
//! they are removed.

use std::collections::BTreeMap;
use std::sync::Arc;

use kiln_core::config::Pipeline;
use kiln_core::runtime::LABEL_DATASET;
use kiln_pipeline::ops::gc::DEFAULT_MIN_AGE;
use kiln_schema::{EnvironmentRecord, EnvironmentStatus, InstanceId, ReleaseInstance};
use kiln_store::RunStore;
use kiln_testkit::runtime::ScriptedRuntime;

fn labelled(dataset: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(LABEL_DATASET.to_string(), dataset.to_string())])
}

/// A config of dataset `gc` under `dir/datasets`, with an ingest source and a launch stage.
fn gc_pipeline(dir: &std::path::Path) -> Pipeline {
    let root = dir.join("datasets");
    let config = dir.join("pipeline.toml");
    std::fs::write(
        &config,
        format!(
            "[dataset]\nname = \"gc\"\nroot = {root:?}\n\
             [sources.tasks]\nkind = \"ingest\"\npath = \"tasks.jsonl\"\n\
             [stages.launch]\nkind = \"launch\"\ninputs = [\"tasks\"]\n"
        ),
    )
    .unwrap();
    Pipeline::load(&config).unwrap()
}

#[tokio::test]
async fn gc_removes_exactly_the_images_no_release_or_kept_run_names_and_orphans_on_request() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("datasets");
    let pipeline = gc_pipeline(tmp.path());
    let ours = kiln_pipeline::dataset_label(&pipeline);
    let elsewhere = tmp.path().join("another-checkout");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let runtime = Arc::new(ScriptedRuntime::new());
    for tag in [
        "env:released",
        "env:in-progress",
        "env:old-run",
        "env:unnamed",
    ] {
        runtime.add_image_with(tag, labelled(&ours), Vec::new());
    }
    runtime.add_image_with("env:orphan", labelled("/nonexistent/kiln/ds"), Vec::new());
    runtime.add_image_with(
        "env:other-dataset",
        labelled(&elsewhere.display().to_string()),
        Vec::new(),
    );
    runtime.add_image("kiln/python:3.11-bookworm");

    // A release names one image (by name), an old complete run another, a run in progress a
    // third (by digest).
    let release = root.join("gc/releases/2024-09");
    let row = ReleaseInstance {
        image: "env:released".into(),
        ..ReleaseInstance::new(InstanceId::new("o__r-1").unwrap())
    };
    kiln_store::write_release(&release, "test", &[row], 100).unwrap();
    let node = pipeline.node("launch").unwrap();
    let environment = |tag: &str, digest: Option<String>| EnvironmentRecord {
        status: EnvironmentStatus::Built,
        image: Some(tag.into()),
        image_digest: digest,
        ..EnvironmentRecord::new(InstanceId::new("o__r-2").unwrap())
    };
    let mut old =
        kiln_store::RunStore::create(&root, "gc", Some("20240901-000000"), "", "h").unwrap();
    old.stage::<EnvironmentRecord>("launch", &node.settings_hash(), BTreeMap::new())
        .unwrap()
        .append(&[environment("env:old-run", None)])
        .unwrap();
    old.set_status(kiln_store::Status::Complete).unwrap();
    let in_progress_id = runtime.image("env:in-progress").map(|i| i.id);
    let newer =
        kiln_store::RunStore::create(&root, "gc", Some("20240902-000000"), "", "h").unwrap();
    newer
        .stage::<EnvironmentRecord>("launch", &node.settings_hash(), BTreeMap::new())
        .unwrap()
        .append(&[environment("env:moved-on", in_progress_id)])
        .unwrap();

    // Keeping the last run only (the one in progress): the old run's image and the unnamed
    // one go; with --orphans, the image of the vanished dataset too; never another dataset's.
    let plan = kiln_pipeline::ops::gc::plan(&pipeline, runtime.as_ref(), 1, false, DEFAULT_MIN_AGE)
        .await
        .unwrap();
    let tags = |plan: &kiln_pipeline::ops::gc::GcPlan| -> Vec<String> {
        plan.remove.iter().flat_map(|g| g.tags.clone()).collect()
    };
    assert_eq!(tags(&plan), ["env:old-run", "env:unnamed"]);
    assert_eq!(plan.kept, 2);
    assert_eq!(plan.kept_runs, ["20240902-000000"]);
    // Keeping two runs keeps the old run's image as well.
    let keep_two =
        kiln_pipeline::ops::gc::plan(&pipeline, runtime.as_ref(), 2, false, DEFAULT_MIN_AGE)
            .await
            .unwrap();
    assert_eq!(tags(&keep_two), ["env:unnamed"]);
    let with_orphans =
        kiln_pipeline::ops::gc::plan(&pipeline, runtime.as_ref(), 1, true, DEFAULT_MIN_AGE)
            .await
            .unwrap();
    assert_eq!(
        tags(&with_orphans),
        ["env:orphan", "env:old-run", "env:unnamed"]
    );

    kiln_pipeline::ops::gc::remove(runtime.as_ref(), &with_orphans)
        .await
        .unwrap();
    for gone in ["env:old-run", "env:unnamed", "env:orphan"] {
        assert!(runtime.image(gone).is_none(), "{gone} stayed");
    }
    for kept in [
        "env:released",
        "env:in-progress",
        "env:other-dataset",
        "kiln/python:3.11-bookworm",
    ] {
        assert!(runtime.image(kept).is_some(), "{kept} was removed");
    }
}

#[tokio::test]
async fn gc_counts_the_images_of_a_split_runs_shards_as_the_datasets() {
    let tmp = tempfile::tempdir().unwrap();
    let pipeline = gc_pipeline(tmp.path());
    let shard = pipeline.for_shard(kiln_core::config::ShardId { index: 1, count: 2 });
    let shard_label = kiln_pipeline::dataset_label(&shard);
    assert_ne!(shard_label, kiln_pipeline::dataset_label(&pipeline));
    let runtime = Arc::new(ScriptedRuntime::new());
    runtime.add_image_with("env:shard-in-progress", labelled(&shard_label), Vec::new());
    runtime.add_image_with("env:shard-unnamed", labelled(&shard_label), Vec::new());
    let node = pipeline.node("launch").unwrap();
    let run =
        kiln_store::RunStore::create(&shard.dataset.root, "gc", Some("20240903-000000"), "", "h")
            .unwrap();
    run.stage::<EnvironmentRecord>("launch", &node.settings_hash(), BTreeMap::new())
        .unwrap()
        .append(&[EnvironmentRecord {
            status: EnvironmentStatus::Built,
            image: Some("env:shard-in-progress".into()),
            ..EnvironmentRecord::new(InstanceId::new("o__r-3").unwrap())
        }])
        .unwrap();

    let plan = kiln_pipeline::ops::gc::plan(&pipeline, runtime.as_ref(), 0, false, DEFAULT_MIN_AGE)
        .await
        .unwrap();
    let tags: Vec<String> = plan.remove.iter().flat_map(|g| g.tags.clone()).collect();
    assert_eq!(tags, ["env:shard-unnamed"]);
    assert_eq!(plan.kept, 1);
    assert_eq!(plan.kept_runs, ["20240903-000000 (shard 1/2)"]);
}

#[tokio::test]
async fn gc_orphans_clear_replaced_base_images_and_failed_builds_nothing_uses() {
    use kiln_core::ContainerRuntime as _;
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("datasets");
    let pipeline = gc_pipeline(tmp.path());
    let elsewhere = tmp.path().join("another-checkout");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let runtime = Arc::new(ScriptedRuntime::new());
    let kiln_image = |name: &str| {
        BTreeMap::from([
            (
                kiln_core::runtime::LABEL_MANAGED.to_string(),
                "1".to_string(),
            ),
            ("kiln.image".to_string(), name.to_string()),
        ])
    };
    // Oldest first: each family's last one is its newest build.
    for tag in [
        "kiln/python:3.11-aaaaaaaa",
        "kiln/python:3.9-cccccccc",
        "kiln/node:20-eeeeeeee",
        "kiln/python:3.11-bbbbbbbb",
        "kiln/python:3.9-dddddddd",
        "kiln/node:20-ffffffff",
    ] {
        runtime.add_image_with(tag, kiln_image("x"), Vec::new());
    }
    // A failed build's step image: untagged (its tag moved on), kiln's, of no dataset.
    runtime.add_image_with("kiln-it/step:1", kiln_image("x"), Vec::new());
    let leftover = runtime.image("kiln-it/step:1").unwrap().id;
    runtime.add_image_with("kiln-it/step:1", kiln_image("x"), Vec::new());
    // Another dataset's environment was made from the replaced 3.9 base.
    let container = runtime
        .create(&kiln_core::ContainerSpec {
            image: "kiln/python:3.9-cccccccc".into(),
            ..kiln_core::ContainerSpec::default()
        })
        .await
        .unwrap();
    runtime
        .commit(
            &container,
            "env:other-dataset",
            &labelled(&elsewhere.display().to_string()),
            &[],
        )
        .await
        .unwrap();
    // The run in progress has a row built on the replaced node base.
    let node = pipeline.node("launch").unwrap();
    RunStore::create(&root, "gc", Some("20240902-000000"), "", "h")
        .unwrap()
        .stage::<EnvironmentRecord>("launch", &node.settings_hash(), BTreeMap::new())
        .unwrap()
        .append(&[EnvironmentRecord {
            status: EnvironmentStatus::Built,
            image: Some("env:gone".into()),
            base_image: "kiln/node:20-eeeeeeee".into(),
            ..EnvironmentRecord::new(InstanceId::new("o__r-4").unwrap())
        }])
        .unwrap();

    let plan = kiln_pipeline::ops::gc::plan(&pipeline, runtime.as_ref(), 1, false, DEFAULT_MIN_AGE)
        .await
        .unwrap();
    assert!(plan.remove.is_empty(), "{:?}", plan.remove);
    let plan = kiln_pipeline::ops::gc::plan(&pipeline, runtime.as_ref(), 1, true, DEFAULT_MIN_AGE)
        .await
        .unwrap();
    let listed: Vec<(&str, String)> = plan
        .remove
        .iter()
        .map(|g| {
            (
                g.reason,
                g.tags.first().cloned().unwrap_or_else(|| g.id.clone()),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [
            ("leftover", leftover.clone()),
            ("superseded", "kiln/python:3.11-aaaaaaaa".to_string()),
        ]
    );
    // Each is a layer of its own (1 MiB on the scripted engine) that nothing is made from.
    assert_eq!(plan.freed, Some(2 << 20));
    kiln_pipeline::ops::gc::remove(runtime.as_ref(), &plan)
        .await
        .unwrap();
    assert!(runtime.image("kiln/python:3.11-aaaaaaaa").is_none());
    for kept in [
        "kiln/python:3.11-bbbbbbbb",
        "kiln/python:3.9-cccccccc",
        "kiln/python:3.9-dddddddd",
        "kiln/node:20-eeeeeeee",
        "kiln-it/step:1",
        "env:other-dataset",
    ] {
        assert!(runtime.image(kept).is_some(), "{kept} was removed");
    }
}

#[tokio::test]
async fn a_system_layer_goes_with_the_last_image_made_from_it() {
    use kiln_core::ContainerRuntime as _;
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("datasets");
    let pipeline = gc_pipeline(tmp.path());
    let ours = kiln_pipeline::dataset_label(&pipeline);
    let runtime = Arc::new(ScriptedRuntime::new());
    let managed = BTreeMap::from([(
        kiln_core::runtime::LABEL_MANAGED.to_string(),
        "1".to_string(),
    )]);
    runtime.add_image_with("kiln/python:3.11-aaaaaaaa", managed.clone(), Vec::new());
    // Commits `tag` from a container of `from`, as launch commits a layer or an environment.
    let commit = async |from: &str, tag: &str, labels: &BTreeMap<String, String>| {
        let container = runtime
            .create(&kiln_core::ContainerSpec {
                image: from.into(),
                ..kiln_core::ContainerSpec::default()
            })
            .await
            .unwrap();
        runtime.commit(&container, tag, labels, &[]).await.unwrap();
        runtime.remove(&container).await.unwrap();
    };
    let mut environment = labelled(&ours);
    environment.extend(managed.clone());
    let base = "kiln/python:3.11-aaaaaaaa";
    // Layer 1 holds only the old run's environment; layer 2 also the one of the run in
    // progress; layer 3 no environment at all (its launch failed).
    for layer in ["kiln/layer:1111", "kiln/layer:2222", "kiln/layer:3333"] {
        commit(base, layer, &managed).await;
    }
    commit("kiln/layer:1111", "env:old-run", &environment).await;
    commit("kiln/layer:2222", "env:old-run-2", &environment).await;
    commit("kiln/layer:2222", "env:in-progress", &environment).await;
    let node = pipeline.node("launch").unwrap();
    let environment_row = |tag: &str| EnvironmentRecord {
        status: EnvironmentStatus::Built,
        image: Some(tag.into()),
        ..EnvironmentRecord::new(InstanceId::new("o__r-5").unwrap())
    };
    RunStore::create(&root, "gc", Some("20240902-000000"), "", "h")
        .unwrap()
        .stage::<EnvironmentRecord>("launch", &node.settings_hash(), BTreeMap::new())
        .unwrap()
        .append(&[environment_row("env:in-progress")])
        .unwrap();

    let listed = |plan: &kiln_pipeline::ops::gc::GcPlan| -> Vec<(&'static str, String)> {
        plan.remove
            .iter()
            .map(|g| (g.reason, g.tags.join(",")))
            .collect()
    };
    let plan = kiln_pipeline::ops::gc::plan(&pipeline, runtime.as_ref(), 1, false, DEFAULT_MIN_AGE)
        .await
        .unwrap();
    assert_eq!(
        listed(&plan),
        [
            ("unreferenced", "env:old-run".to_string()),
            ("unreferenced", "env:old-run-2".to_string()),
            ("layer", "kiln/layer:1111".to_string()),
        ]
    );
    let with_orphans =
        kiln_pipeline::ops::gc::plan(&pipeline, runtime.as_ref(), 1, true, DEFAULT_MIN_AGE)
            .await
            .unwrap();
    assert_eq!(
        listed(&with_orphans)[2..],
        [
            ("layer", "kiln/layer:1111".to_string()),
            ("layer", "kiln/layer:3333".to_string()),
        ]
    );
    kiln_pipeline::ops::gc::remove(runtime.as_ref(), &with_orphans)
        .await
        .unwrap();
    for gone in ["kiln/layer:1111", "kiln/layer:3333", "env:old-run"] {
        assert!(runtime.image(gone).is_none(), "{gone} stayed");
    }
    for kept in ["kiln/layer:2222", "env:in-progress", base] {
        assert!(runtime.image(kept).is_some(), "{kept} was removed");
    }
}

/// Removes a test's containers and images (by its label) when dropped, so that a failing test
/// leaves nothing on the engine. It uses the docker CLI because drop cannot await.
struct EngineCleanup(String);

impl Drop for EngineCleanup {
    fn drop(&mut self) {
        let filter = format!("label={}", self.0);
        let listed = |args: &[&str]| -> Vec<String> {
            std::process::Command::new("docker")
                .args(args)
                .args(["--filter", &filter])
                .output()
                .map(|o| {
                    String::from_utf8_lossy(&o.stdout)
                        .split_whitespace()
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default()
        };
        let containers = listed(&["ps", "-aq"]);
        if !containers.is_empty() {
            let _ = std::process::Command::new("docker")
                .args(["rm", "-f", "-v"])
                .args(&containers)
                .output();
        }
        let images = listed(&["image", "ls", "-aq"]);
        if !images.is_empty() {
            let _ = std::process::Command::new("docker")
                .args(["rmi", "-f"])
                .args(&images)
                .output();
        }
    }
}

/// The step images a classic build's log names (` ---> <12 hex>`), in order.
fn step_images(log: &str) -> Vec<String> {
    log.lines()
        .filter_map(|l| l.trim().strip_prefix("---> "))
        .map(str::trim)
        .filter(|id| id.len() == 12 && id.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(str::to_string)
        .collect()
}

/// On the real engine: a build in progress (a base image's: kiln's, of no dataset) runs its
/// last step in a container made from the untagged image of the step before. `gc --orphans`
/// leaves that image (and the earlier steps) while the build stands on it; once the build is
/// cut off and its container gone, the image is a leftover that `gc --orphans` removes, after
/// `min_age` (here none; by default a young one stays).
#[tokio::test]
async fn gc_orphans_leaves_the_step_image_a_build_in_progress_stands_on() {
    use kiln_core::ContainerRuntime as _;
    use std::time::{Duration, Instant};
    let tmp = tempfile::tempdir().unwrap();
    let pipeline = gc_pipeline(tmp.path());
    let runtime = Arc::new(
        kiln_docker::DockerRuntime::connect()
            .await
            .expect("this test needs a Docker engine (scripts/docker-engine.sh start)"),
    );
    let marker = format!("gc-building-{}", std::process::id());
    let _cleanup = EngineCleanup(format!("kiln.it={marker}"));
    let build = kiln_core::ImageBuild {
        tag: format!("kiln-it/{marker}:1"),
        dockerfile: format!("FROM debian:bookworm\nRUN echo {marker} > /marker\nRUN sleep 600\n"),
        labels: BTreeMap::from([("kiln.it".to_string(), marker.clone())]),
        ..kiln_core::ImageBuild::default()
    };
    let log = Arc::new(std::sync::Mutex::new(String::new()));
    let building = {
        let (runtime, log) = (Arc::clone(&runtime), Arc::clone(&log));
        tokio::spawn(async move {
            let mut sink = |b: &[u8]| log.lock().unwrap().push_str(&String::from_utf8_lossy(b));
            runtime.build_image(&build, &mut sink).await
        })
    };
    // Until the last step runs, in a container made from the step image before it.
    let deadline = Instant::now() + Duration::from_secs(180);
    let (steps, tip) = loop {
        assert!(!building.is_finished(), "{}", log.lock().unwrap());
        assert!(Instant::now() < deadline, "{}", log.lock().unwrap());
        let text = log.lock().unwrap().clone();
        if let Some((before, _)) = text.split_once("RUN sleep 600") {
            let short = step_images(before).pop().unwrap();
            let tip = runtime.image_id(&short).await.unwrap().unwrap();
            let containers = runtime.list_containers().await.unwrap();
            if containers.iter().any(|c| c.image == tip && c.running) {
                // The build's own images (not the one it starts FROM), intermediate ones
                // included: they carry its labels.
                let steps: Vec<String> = runtime
                    .list_all_images()
                    .await
                    .unwrap()
                    .unwrap()
                    .into_iter()
                    .filter(|i| i.labels.get("kiln.it") == Some(&marker))
                    .map(|i| i.id)
                    .collect();
                assert!(steps.contains(&tip), "{tip} is not the build's: {steps:?}");
                break (steps, tip);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(steps.len() >= 2, "{}", log.lock().unwrap());
    let ours = |plan: &kiln_pipeline::ops::gc::GcPlan| -> Vec<(String, &'static str)> {
        plan.remove
            .iter()
            .filter(|g| steps.contains(&g.id))
            .map(|g| (g.id.clone(), g.reason))
            .collect()
    };

    let plan = kiln_pipeline::ops::gc::plan(&pipeline, runtime.as_ref(), 1, true, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(
        ours(&plan),
        [],
        "gc --orphans would remove what the build in progress stands on"
    );
    assert!(plan.in_use >= 1, "{plan:?}");
    assert!(!building.is_finished(), "{}", log.lock().unwrap());

    // Cut off (its client gone, as when kiln is killed): the engine removes the step's
    // container, and the step image is what a killed build leaves.
    building.abort();
    let _ = building.await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !runtime
        .list_labelled("kiln.it", &marker)
        .await
        .unwrap()
        .is_empty()
    {
        assert!(
            Instant::now() < deadline,
            "the cut-off step's container stays"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Young, it stays for the default age: a build could be about to start a step from it.
    let plan = kiln_pipeline::ops::gc::plan(&pipeline, runtime.as_ref(), 1, true, DEFAULT_MIN_AGE)
        .await
        .unwrap();
    assert_eq!(ours(&plan), []);
    let plan = kiln_pipeline::ops::gc::plan(&pipeline, runtime.as_ref(), 1, true, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(ours(&plan), [(tip.clone(), "leftover")]);
    // Only ours go: other garbage on a shared engine is not this test's to remove.
    let mine = kiln_pipeline::ops::gc::GcPlan {
        remove: plan
            .remove
            .into_iter()
            .filter(|g| steps.contains(&g.id))
            .collect(),
        ..kiln_pipeline::ops::gc::GcPlan::default()
    };
    kiln_pipeline::ops::gc::remove(runtime.as_ref(), &mine)
        .await
        .unwrap();
    // The engine removes the untagged steps below it with it.
    for id in &steps {
        assert!(!runtime.image_exists(id).await.unwrap(), "{id} stayed");
    }
}
