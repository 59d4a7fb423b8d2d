//! `kiln merge` killed by SIGKILL before each of its writes: the dataset never has a half-merged
//! run, `kiln run` re-launches no shard's item, and the next merge holds every item once.
//!
//! The parent test counts the writes of a merge, then runs this test binary again as a child
//! that only merges ([`child_merge`]), built with kiln-store's `crash-points`, so that
//! `KILN_CRASH_AT_WRITE=N` kills it just before its Nth durable write: at the first, the last
//! (the publication) and writes between chosen by `KILN_FAULT_SEED` (fixed by default, so CI
//! is repeatable), as the end-to-end fault suite chooses its kill points.

use std::collections::BTreeSet;
use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use kiln_core::NullReporter;
use kiln_core::config::{Pipeline, ShardId};
use kiln_pipeline::{PipelineError, RunOptions, RunSelection, Runner};
use kiln_schema::{
    Candidate, CandidateStatus, EnvironmentRecord, EnvironmentStatus, Row, ValidationRecord,
    ValidationStatus,
};
use kiln_store::{Manifest, RunStore, Status};

use crate::engine::BrokenEngine;

/// The child's config file.
const CHILD_CONFIG: &str = "KILN_MERGE_CHILD_CONFIG";
/// Before the number of writes the child's merge made, in its output.
const WRITES_MARK: &str = "@@merge-writes@@ ";
const SHARDS: u32 = 4;
const DATASET: &str = "merged";
/// The stages the shards run (export is the merged run's).
const STAGES: [&str; 3] = ["tasks", "launch", "validate"];

fn pipeline(dir: &Path) -> Pipeline {
    let layout = kiln_testkit::write_demo(&dir.join("fixtures")).unwrap();
    let text = format!(
        "[dataset]\nname = \"{DATASET}\"\nroot = \"datasets\"\n\
         [sources.tasks]\nkind = \"ingest\"\npath = {tasks:?}\nclone_url = \"{repos}/{{owner}}/{{name}}\"\n\
         [stages.launch]\nkind = \"launch\"\ninputs = [\"tasks\"]\n\
         [stages.validate]\nkind = \"validate\"\ninputs = [\"tasks\", \"launch\"]\n\
         [stages.export]\nkind = \"export\"\ninputs = [\"tasks\", \"launch\", \"validate\"]\n",
        tasks = layout.tasks_file,
        repos = layout.repos_dir.display(),
    );
    let path = dir.join("pipeline.toml");
    std::fs::write(&path, &text).unwrap();
    Pipeline::load(&path).unwrap()
}

/// The child: one merge of the shards, killed wherever `KILN_CRASH_AT_WRITE` says.
#[test]
fn child_merge() {
    let Some(config) = std::env::var_os(CHILD_CONFIG) else {
        return;
    };
    let pipeline = Pipeline::load(Path::new(&config)).unwrap();
    let before = kiln_store::writes();
    kiln_pipeline::merge(&pipeline, SHARDS).unwrap();
    // libtest may have printed `test merge::child_merge ... ` without a newline: the marker
    // lets the parent find the count anyway.
    println!("{WRITES_MARK}{}", kiln_store::writes() - before);
}

/// Runs [`child_merge`], killed before write `crash_at` (1 and up); its output.
fn merge_in_child(config: &Path, crash_at: Option<u64>) -> std::process::Output {
    let mut child = Command::new(std::env::current_exe().unwrap());
    child
        .args(["--exact", "merge::child_merge", "--nocapture"])
        .args(["--test-threads=1"])
        .env(CHILD_CONFIG, config)
        .env_remove(kiln_store::CRASH_AT_WRITE);
    if let Some(point) = crash_at {
        child.env(kiln_store::CRASH_AT_WRITE, point.to_string());
    }
    child.output().unwrap()
}

/// Every shard's run, finished: ingest's rows from the runner, launch and validate rows as
/// working stages would have left them, and a log per item.
async fn finished_shards(whole: &Pipeline) -> BTreeSet<String> {
    let mut items = BTreeSet::new();
    for index in 0..SHARDS {
        let shard = whole.for_shard(ShardId {
            index,
            count: SHARDS,
        });
        let mut runner = Runner::open(
            shard.clone(),
            &RunSelection::ResumeOrNew,
            Arc::new(NullReporter),
            None,
        )
        .unwrap();
        runner
            .run_stage("tasks", &RunOptions::default())
            .await
            .unwrap();
        let mut run = RunStore::open_dir(&runner.run_dir()).unwrap();
        let ids: Vec<_> = kiln_store::read_rows::<Candidate>(&run.dir().join("tasks"))
            .unwrap()
            .into_iter()
            .filter(|c| c.status == CandidateStatus::Ok)
            .map(|c| c.instance_id)
            .collect();
        assert!(!ids.is_empty(), "shard {index} got no item");
        let launched: Vec<EnvironmentRecord> = ids
            .iter()
            .map(|id| EnvironmentRecord {
                image: Some(format!("kiln-env/{DATASET}:{}", id.file_stem())),
                status: EnvironmentStatus::Built,
                test_command: "pytest".into(),
                parser: "pytest".into(),
                ..EnvironmentRecord::new(id.clone())
            })
            .collect();
        let validated: Vec<ValidationRecord> = ids
            .iter()
            .map(|id| ValidationRecord {
                status: ValidationStatus::Validated,
                ..ValidationRecord::new(id.clone())
            })
            .collect();
        finish(&run, whole, "launch", &launched);
        finish(&run, whole, "validate", &validated);
        for id in &ids {
            let logs = run.log_dir(id, "launch").unwrap();
            std::fs::create_dir_all(&logs).unwrap();
            std::fs::write(logs.join("build.log"), format!("built {id}\n")).unwrap();
            items.insert(id.to_string());
        }
        run.set_status(Status::Complete).unwrap();
    }
    items
}

fn finish<R: Row>(run: &RunStore, pipeline: &Pipeline, stage: &str, rows: &[R]) {
    let node = pipeline.node(stage).unwrap();
    let mut table = run
        .stage::<R>(stage, &node.settings_hash(), Default::default())
        .unwrap();
    table.append(rows).unwrap();
    table.set_complete(true, Default::default()).unwrap();
}

/// The keys of a stage of `run`, failing on a key stored twice.
fn keys_once(run: &Path, stage: &str) -> BTreeSet<String> {
    let keys = kiln_store::read_keys(&run.join(stage)).unwrap();
    let once: BTreeSet<String> = keys.iter().cloned().collect();
    assert_eq!(once.len(), keys.len(), "{stage}: an item twice in {keys:?}");
    once
}

/// A merged run holds every stage of the shards, finished, with every item once, and the logs.
fn assert_merged_whole(run: &Path, items: &BTreeSet<String>) {
    for stage in STAGES {
        let manifest = Manifest::read(&run.join(stage)).unwrap();
        assert_eq!(manifest.status, Status::Complete, "{stage} of {run:?}");
        assert_eq!(&keys_once(run, stage), items, "{stage} of {run:?}");
    }
    let info = RunStore::open_dir(run).unwrap().info().clone();
    assert_eq!(info.merged_from.len(), SHARDS as usize);
    for item in items {
        assert!(
            run.join("logs")
                .join(item)
                .join("launch/build.log")
                .is_file(),
            "{item}'s log"
        );
    }
}

/// What `kiln run` does next: refuse while the shards are not merged, or resume the merged run
/// with nothing left to launch or validate. Never the shards' items again.
async fn kiln_run_relaunches_nothing(whole: &Pipeline, point: u64) {
    let engine = Arc::new(BrokenEngine::default());
    let runtime: Arc<dyn kiln_core::ContainerRuntime> = engine.clone();
    let opened = Runner::open(
        whole.clone(),
        &RunSelection::ResumeOrNew,
        Arc::new(NullReporter),
        Some(runtime),
    );
    let mut runner = match opened {
        Err(PipelineError::Unmerged { count, .. }) => {
            assert_eq!(count, SHARDS);
            return;
        }
        Err(other) => panic!("kill before write {point}: `kiln run` failed: {other}"),
        Ok(runner) => runner,
    };
    let run = RunStore::open_dir(&runner.run_dir()).unwrap();
    assert_eq!(
        run.info().merged_from.len(),
        SHARDS as usize,
        "kill before write {point}: `kiln run` opened run {} rather than the merged one",
        run.run_id()
    );
    for stage in ["launch", "validate"] {
        match runner.run_stage(stage, &RunOptions::default()).await {
            Ok(outcome) => assert_eq!(
                outcome.processed, 0,
                "kill before write {point}: `kiln run` redid {stage} for {} item(s)",
                outcome.processed
            ),
            Err(e) => panic!(
                "kill before write {point}: `kiln run` started {stage} again on run {} and \
                 asked the engine: {e}",
                run.run_id()
            ),
        }
    }
    assert_eq!(engine.failed_requests(), 0, "kill before write {point}");
}

/// A small deterministic generator (splitmix64) for the kill points.
struct Seeded(u64);

impl Seeded {
    /// `KILN_FAULT_SEED`, or a fixed seed.
    fn seed() -> u64 {
        std::env::var("KILN_FAULT_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(20_261_207)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n.max(1)
    }
}

/// The names under `runs` that are no run ids: staged runs.
fn staged(runs: &Path) -> Vec<String> {
    std::fs::read_dir(runs)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with('.'))
        .collect()
}

#[tokio::test]
async fn kill_9_at_seeded_writes_of_a_merge_never_leaves_a_half_merged_run() {
    let tmp = tempfile::tempdir().unwrap();
    let whole = pipeline(tmp.path());
    let items = finished_shards(&whole).await;
    let home = whole.dataset.root.clone();
    let runs = kiln_store::runs_dir(&home, DATASET);
    // The writes of one merge, undisturbed (counted in a process of its own: the other tests
    // of this one write too).
    let config = tmp.path().join("pipeline.toml");
    let reference = merge_in_child(&config, None);
    assert!(
        reference.status.success(),
        "{}",
        String::from_utf8_lossy(&reference.stderr)
    );
    let writes: u64 = String::from_utf8_lossy(&reference.stdout)
        .rsplit_once(WRITES_MARK)
        .and_then(|(_, n)| n.split_whitespace().next()?.parse().ok())
        .unwrap();
    let id = kiln_store::latest(&home, DATASET).unwrap().unwrap();
    assert_merged_whole(&runs.join(id), &items);
    std::fs::remove_dir_all(&runs).unwrap();
    assert!(writes >= 10, "a merge of {writes} writes");

    let seed = Seeded::seed();
    eprintln!("merge fault seed: {seed} (KILN_FAULT_SEED)");
    let mut seeded = Seeded(seed);
    let mut points: BTreeSet<u64> = (0..10).map(|_| 1 + seeded.below(writes)).collect();
    points.extend([1, writes]);
    for &point in &points {
        let output = merge_in_child(&config, Some(point));
        assert_eq!(
            output.status.signal(),
            Some(9),
            "the merge was to be killed before write {point} of {writes}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        // Nothing of the merged run shows: the merge was killed before it published it.
        assert_eq!(
            kiln_store::latest(&home, DATASET).unwrap(),
            None,
            "kill before write {point} of {writes}: a merged run shows"
        );
        // The kill landed in the merge's writing, which it left aside.
        assert!(
            !staged(&runs).is_empty(),
            "kill before write {point}: nothing was staged"
        );
        // `kiln run` takes no staged run for a run (and, holding the dataset lock, removes it:
        // it is a dead process's).
        kiln_run_relaunches_nothing(&whole, point).await;

        // The next merge finishes, every item once, and leaves no leftover of the killed one.
        let outcome = kiln_pipeline::merge(&whole, SHARDS).unwrap();
        assert_merged_whole(&outcome.run_dir, &items);
        assert_eq!(
            kiln_store::latest(&home, DATASET).unwrap().as_deref(),
            Some(outcome.run_id.as_str())
        );
        assert_eq!(
            staged(&runs),
            Vec::<String>::new(),
            "kill before write {point}"
        );
        // Merged and exported next: `kiln run` resumes it with only the export left.
        kiln_run_relaunches_nothing(&whole, point).await;
        // As before the kill, for the next point.
        std::fs::remove_dir_all(&runs).unwrap();
    }
    eprintln!("merge kills before writes {points:?} of {writes}");
    // Killed before a write it does not make, a merge publishes its run.
    let output = merge_in_child(&config, Some(writes + 1));
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let id = kiln_store::latest(&home, DATASET).unwrap().unwrap();
    assert_merged_whole(&runs.join(id), &items);
}
