//! Split runs without an engine: the demo's task file through ingest and filter as four shards,
//! each repository in exactly one shard, merged into one run that holds every item once; and
//! what `kiln merge` refuses (a missing shard, an item in two shards, another config), every
//! problem named with its shard and item, nothing written.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use kiln_core::NullReporter;
use kiln_core::config::{Pipeline, ShardId};
use kiln_pipeline::{PipelineError, RunOptions, RunSelection, Runner};
use kiln_schema::{Candidate, Row as _, Verdict};
use kiln_store::Status;

fn pipeline(dir: &Path, extra: &str) -> Pipeline {
    let layout = kiln_testkit::write_demo(&dir.join("fixtures")).unwrap();
    let text = format!(
        "[dataset]\nname = \"split\"\nroot = \"datasets\"\n\
         [sources.tasks]\nkind = \"ingest\"\npath = {tasks:?}\nclone_url = \"{repos}/{{owner}}/{{name}}\"\n\
         [stages.filter]\nkind = \"filter\"\ninputs = [\"tasks\"]\njudge = \"heuristic\"\n{extra}",
        tasks = layout.tasks_file,
        repos = layout.repos_dir.display(),
    );
    let path = dir.join("pipeline.toml");
    std::fs::write(&path, &text).unwrap();
    Pipeline::load(&path).unwrap()
}

async fn run(pipeline: &Pipeline) {
    let mut runner = Runner::open(
        pipeline.clone(),
        &RunSelection::ResumeOrNew,
        Arc::new(NullReporter),
        None,
    )
    .unwrap();
    runner.run_all(&RunOptions::default()).await.unwrap();
}

fn shard(pipeline: &Pipeline, index: u32) -> Pipeline {
    pipeline.for_shard(ShardId { index, count: 4 })
}

fn shard_run_dir(pipeline: &Pipeline, index: u32) -> std::path::PathBuf {
    let p = shard(pipeline, index);
    let id = kiln_store::latest(&p.dataset.root, "split")
        .unwrap()
        .unwrap();
    kiln_store::runs_dir(&p.dataset.root, "split").join(id)
}

fn problems(error: PipelineError) -> (Vec<String>, bool) {
    match error {
        PipelineError::Merge {
            problems,
            unfinished_only,
            ..
        } => (problems, unfinished_only),
        other => panic!("expected a merge error, got {other}"),
    }
}

#[tokio::test]
async fn four_shards_hold_each_repository_once_and_merge_into_the_whole_run() {
    let tmp = tempfile::tempdir().unwrap();
    let whole = pipeline(tmp.path(), "");
    run(&whole).await;
    let unsharded = kiln_store::runs_dir(&whole.dataset.root, "split").join(
        kiln_store::latest(&whole.dataset.root, "split")
            .unwrap()
            .unwrap(),
    );
    let all: Vec<Candidate> = kiln_store::read_rows(&unsharded.join("tasks")).unwrap();

    // Not started yet: waiting could mend that.
    let (missing, unfinished_only) = problems(kiln_pipeline::merge(&whole, 4).unwrap_err());
    assert_eq!(missing.len(), 4, "{missing:?}");
    assert!(unfinished_only);
    assert!(
        missing[2].starts_with("shard 2/4: no run under"),
        "{missing:?}"
    );

    for index in 0..4 {
        run(&shard(&whole, index)).await;
    }
    let mut repos_by_shard: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for index in 0..4 {
        let dir = shard_run_dir(&whole, index);
        let info = kiln_store::RunStore::open_dir(&dir).unwrap().info().clone();
        assert_eq!(
            info.status,
            Status::Complete,
            "a shard is done without export"
        );
        assert_eq!(info.shard, Some(kiln_store::RunShard { index, count: 4 }));
        let rows: Vec<Candidate> = kiln_store::read_rows(&dir.join("tasks")).unwrap();
        assert!(!rows.is_empty(), "shard {index} got no repository");
        for row in rows {
            repos_by_shard
                .entry(row.repo.clone())
                .or_default()
                .push(index);
        }
    }
    for (repo, shards) in &repos_by_shard {
        shards
            .windows(2)
            .for_each(|w| assert_eq!(w[0], w[1], "{repo} split over shards"));
    }
    let plans = kiln_pipeline::shards::plans(&whole.dataset.root, "split", 4);
    assert_eq!(
        plans.len(),
        1,
        "every shard followed the plan the first one wrote"
    );

    let outcome = kiln_pipeline::merge(&whole, 4).unwrap();
    assert!(!outcome.export_left);
    let merged: Vec<Candidate> = kiln_store::read_rows(&outcome.run_dir.join("tasks")).unwrap();
    let keys = |rows: &[Candidate]| {
        let mut k: Vec<String> = rows.iter().map(|r| r.key().to_string()).collect();
        k.sort();
        k
    };
    assert_eq!(keys(&merged), keys(&all), "every item exactly once");
    let verdicts: Vec<Verdict> = kiln_store::read_rows(&outcome.run_dir.join("filter")).unwrap();
    let whole_verdicts: Vec<Verdict> = kiln_store::read_rows(&unsharded.join("filter")).unwrap();
    let by_key = |rows: Vec<Verdict>| -> BTreeMap<String, bool> {
        rows.into_iter()
            .map(|v| (v.key().to_string(), v.keep))
            .collect()
    };
    assert_eq!(by_key(verdicts), by_key(whole_verdicts));
    let info = kiln_store::RunStore::open_dir(&outcome.run_dir)
        .unwrap()
        .info()
        .clone();
    assert_eq!(info.merged_from.len(), 4);
    assert_eq!(info.status, Status::Complete);
    let manifest = kiln_store::Manifest::read(&outcome.run_dir.join("filter")).unwrap();
    assert_eq!(manifest.status, Status::Complete);
    assert_eq!(manifest.rows, all.len() as u64);

    // An unsharded resume of the merged run finds every item done.
    let mut runner = Runner::open(
        whole.clone(),
        &RunSelection::Id(outcome.run_id.clone()),
        Arc::new(NullReporter),
        None,
    )
    .unwrap();
    let outcomes = runner.run_all(&RunOptions::default()).await.unwrap();
    assert!(
        outcomes.iter().all(|o| o.processed == 0 && o.complete),
        "{outcomes:?}"
    );
}

#[tokio::test]
async fn merge_names_a_missing_shard_an_item_in_two_shards_and_another_config() {
    let tmp = tempfile::tempdir().unwrap();
    let whole = pipeline(tmp.path(), "");
    for index in 0..4 {
        run(&shard(&whole, index)).await;
    }
    // An item of shard 0 written into shard 1 as well (its ingest and filter tables).
    let first = shard_run_dir(&whole, 0);
    let second = shard_run_dir(&whole, 1);
    let row: Candidate = kiln_store::read_rows::<Candidate>(&first.join("tasks"))
        .unwrap()
        .remove(0);
    let twice = row.instance_id.to_string();
    {
        let run = kiln_store::RunStore::open_dir(&second).unwrap();
        let manifest = kiln_store::Manifest::read(&second.join("tasks")).unwrap();
        let mut table = run
            .stage::<Candidate>("tasks", &manifest.config_hash, BTreeMap::new())
            .unwrap();
        table.append(&[row]).unwrap();
        let counts = table.manifest().counts.clone();
        table.set_complete(true, counts).unwrap();
    }
    // Shard 2 ran another config; shard 3 never ran.
    std::fs::remove_dir_all(kiln_core::config::shard_root(
        &whole.dataset.root,
        "split",
        ShardId { index: 2, count: 4 },
    ))
    .unwrap();
    let other = pipeline(&tmp.path().join("other"), "# another config\n");
    let mut other = other.clone();
    other.dataset.root = whole.dataset.root.clone();
    run(&shard(&other, 2)).await;
    std::fs::remove_dir_all(kiln_core::config::shard_root(
        &whole.dataset.root,
        "split",
        ShardId { index: 3, count: 4 },
    ))
    .unwrap();

    let runs_before = kiln_store::run_ids(&whole.dataset.root, "split").unwrap();
    let (found, unfinished_only) = problems(kiln_pipeline::merge(&whole, 4).unwrap_err());
    assert!(!unfinished_only, "another config is not mended by waiting");
    let text = found.join("\n");
    assert!(text.contains("shard 3/4: no run under"), "{text}");
    assert!(
        text.contains("shard 2/4 (run ") && text.contains("made with another config"),
        "{text}"
    );
    assert_eq!(
        kiln_store::run_ids(&whole.dataset.root, "split").unwrap(),
        runs_before,
        "nothing was merged"
    );

    // With shards 2 and 3 run again with this config, only the item in two shards remains.
    std::fs::remove_dir_all(kiln_core::config::shard_root(
        &whole.dataset.root,
        "split",
        ShardId { index: 2, count: 4 },
    ))
    .unwrap();
    run(&shard(&whole, 2)).await;
    run(&shard(&whole, 3)).await;
    let (found, _) = problems(kiln_pipeline::merge(&whole, 4).unwrap_err());
    assert_eq!(
        found,
        [format!(
            "item {twice} is in shard 0/4 and shard 1/4 (stage tasks)"
        )]
    );
}
