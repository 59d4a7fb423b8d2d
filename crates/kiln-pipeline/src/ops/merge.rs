//! `kiln merge`: the shard runs of a split run joined into one run of the dataset, every item
//! exactly once, ready for export.
//!
//! Everything is checked before anything is written: every shard has a run, made with this
//! config, finished (export aside: shards leave it to the merged run), following one plan, and
//! no item is in two shards. Every problem is reported with its shard, run and item; nothing
//! is merged while one remains. The merged run is a new run under the shared dataset root whose
//! stage tables hold the shards' rows, logs and LM answers, marked `merged_from` in `run.json`;
//! its export is left to do, so `kiln run` resumes it and writes the release as for any run.
//!
//! The merged run is written staged ([`RunStore::create_staged`]), where no listing of runs
//! sees it, and published by one rename once every table is complete: a merge killed at any
//! point leaves no merged run or a finished one, never a half-merged run that `kiln run` would
//! resume as an ordinary run and fill by launching and validating the shards' items again on
//! one machine. The next merge removes what a killed one left staged. Until a merge is
//! published, `kiln run` refuses to start a run of the items the shards hold
//! ([`unmerged_shards`]).

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use kiln_core::config::{Node, NodeKind, Pipeline, ShardId, shard_root};
use kiln_schema::{Candidate, EnvironmentRecord, PlatformLabel, Row, ValidationRecord, Verdict};
use kiln_store::{DatasetLock, Manifest, RunLock, RunStore, Status};

use crate::error::PipelineError;
use crate::shards::PLAN_STATE;

/// Duplicated items listed one by one before the rest are counted.
const DUPLICATES_SHOWN: usize = 20;

/// What `kiln merge` made.
#[derive(Debug, Clone)]
pub struct MergeOutcome {
    /// The merged run's id.
    pub run_id: String,
    /// Its directory.
    pub run_dir: PathBuf,
    /// The shard runs merged, in shard order.
    pub shards: Vec<PathBuf>,
    /// Rows of each merged stage, in pipeline order.
    pub stages: Vec<(String, u64)>,
    /// Whether the merged run still has stages to run (its export).
    pub export_left: bool,
}

/// One shard's run, opened and locked for the merge.
struct ShardRun {
    id: ShardId,
    run: RunStore,
    _lock: RunLock,
}

/// Merges the `count` shards of `pipeline`'s dataset (under its shared root) into a new run.
///
/// # Errors
/// [`PipelineError::Merge`] with every problem found (a missing, running or unfinished shard,
/// another config, another plan, an item in two shards); store errors.
pub fn merge(pipeline: &Pipeline, count: u32) -> Result<MergeOutcome, PipelineError> {
    ShardId::new(0, count).map_err(|message| PipelineError::Input {
        what: "the shard count".into(),
        message,
    })?;
    let home = pipeline.home_root().to_path_buf();
    let name = &pipeline.dataset.name;
    let stages: Vec<&Node> = pipeline
        .nodes
        .iter()
        .filter(|n| n.kind != NodeKind::Export)
        .collect();
    // Shards not there yet (waiting may end these) and what no waiting ends.
    let mut problems = Vec::new();
    let mut permanent = Vec::new();
    let mut shards = Vec::new();
    for index in 0..count {
        let id = ShardId { index, count };
        let root = shard_root(&home, name, id);
        let Some(run_id) = kiln_store::latest(&root, name)? else {
            problems.push(format!(
                "shard {id}: no run under {} (it never started: `kiln run --shard {id}`)",
                kiln_store::runs_dir(&root, name).display()
            ));
            continue;
        };
        let run = RunStore::open(&root, name, &run_id)?;
        let lock = match run.lock() {
            Ok(lock) => lock,
            Err(e) => {
                problems.push(format!(
                    "shard {id} (run {run_id}): still running or locked ({e})"
                ));
                continue;
            }
        };
        if run.info().config_hash != pipeline.hash {
            permanent.push(format!(
                "shard {id} (run {run_id}): made with another config (hash {}, this config's is {}); \
                 merge with the config the shards ran",
                short(&run.info().config_hash),
                short(&pipeline.hash)
            ));
            continue;
        }
        let unfinished: Vec<String> = stages
            .iter()
            .filter_map(|node| {
                let manifest = Manifest::read(&run.dir().join(&node.name)).ok();
                match manifest {
                    Some(m) if m.status == Status::Complete => None,
                    Some(m) => Some(format!(
                        "{} has {} rows and is not finished",
                        node.name, m.rows
                    )),
                    None => Some(format!("{} has not started", node.name)),
                }
            })
            .collect();
        if !unfinished.is_empty() {
            problems.push(format!(
                "shard {id} (run {run_id}): incomplete: {}; resume it with `kiln run --shard {id}`",
                unfinished.join(", ")
            ));
            continue;
        }
        shards.push(ShardRun {
            id,
            run,
            _lock: lock,
        });
    }
    if problems.is_empty() && permanent.is_empty() {
        check_plans(pipeline, &shards, &mut permanent);
        check_duplicates(&stages, &shards, &mut permanent)?;
    }
    let unfinished_only = permanent.is_empty();
    problems.extend(permanent);
    if !problems.is_empty() {
        return Err(PipelineError::Merge {
            count,
            unfinished_only,
            problems,
        });
    }

    // Every staged run (or claimed run directory with no `run.json`) found under the dataset
    // lock is a killed process's: nothing took it for a run, and it goes.
    let _dataset_lock = DatasetLock::acquire(&home, name)?;
    kiln_store::remove_unfinished(&home, name)?;
    // No run lock: the staged run is this process's alone until it is published, and a lock
    // file in it would be published with it.
    let mut run = RunStore::create_staged(&home, name, &pipeline.text, &pipeline.hash)?;
    let export_left = pipeline.nodes.iter().any(|n| n.kind == NodeKind::Export);
    let shard_dirs: Vec<PathBuf> = shards.iter().map(|s| s.run.dir().to_path_buf()).collect();
    let merged_stages = match write_merged(&mut run, &stages, &shards, &shard_dirs, export_left) {
        Ok(stages) => stages,
        Err(e) => {
            // Not published, so no run: what was written goes now rather than at the next merge.
            let _ = std::fs::remove_dir_all(run.dir());
            return Err(e);
        }
    };
    let run = run.publish()?;
    Ok(MergeOutcome {
        run_id: run.run_id().to_string(),
        run_dir: run.dir().to_path_buf(),
        shards: shard_dirs,
        stages: merged_stages,
        export_left,
    })
}

/// Writes the shards' tables, logs, LM answers and spending into the staged run, then its
/// `run.json`: everything but the publication. Returns the rows of each stage.
fn write_merged(
    run: &mut RunStore,
    stages: &[&Node],
    shards: &[ShardRun],
    shard_dirs: &[PathBuf],
    export_left: bool,
) -> Result<Vec<(String, u64)>, PipelineError> {
    let mut merged_stages = Vec::new();
    for node in stages {
        let rows = match node.kind {
            NodeKind::Ingest | NodeKind::Crawl => merge_stage::<Candidate>(run, node, shards)?,
            NodeKind::Filter => merge_stage::<Verdict>(run, node, shards)?,
            NodeKind::Split => merge_stage::<PlatformLabel>(run, node, shards)?,
            NodeKind::Launch => merge_stage::<EnvironmentRecord>(run, node, shards)?,
            NodeKind::Validate => merge_stage::<ValidationRecord>(run, node, shards)?,
            NodeKind::Export => continue,
        };
        merged_stages.push((node.name.clone(), rows));
    }
    for shard in shards {
        copy_tree(&shard.run.dir().join("logs"), &run.dir().join("logs"))?;
        copy_tree(
            &shard.run.dir().join(kiln_lm::LM_DIR).join("answers"),
            &run.dir().join(kiln_lm::LM_DIR).join("answers"),
        )?;
    }
    merge_spent(run, shards)?;
    run.set_merged_from(shard_dirs.to_vec())?;
    if !export_left {
        run.set_status(Status::Complete)?;
    }
    Ok(merged_stages)
}

/// The latest runs of the shards of `pipeline`'s split runs that were made with its config and
/// that no run of the dataset holds (`merged_from`), by shard: items a split run is doing or
/// has done, which wait for `kiln merge` rather than for a new run to do them again.
///
/// # Errors
/// When a runs directory or a `run.json` cannot be read.
pub fn unmerged_shards(pipeline: &Pipeline) -> Result<Vec<(ShardId, String)>, PipelineError> {
    let home = pipeline.home_root();
    let name = &pipeline.dataset.name;
    let mut merged = Vec::new();
    for id in kiln_store::run_ids(home, name)? {
        merged.extend(RunStore::open(home, name, &id)?.info().merged_from.clone());
    }
    let mut unmerged = Vec::new();
    for shard in crate::shards::shard_pipelines(pipeline) {
        let (Some(split), root) = (&shard.shard, &shard.dataset.root) else {
            continue;
        };
        let Some(run_id) = kiln_store::latest(root, name)? else {
            continue;
        };
        if RunStore::open(root, name, &run_id)?.info().config_hash != pipeline.hash {
            continue;
        }
        // Compared by what the shared root holds, so that a dataset directory that moved still
        // knows its merged shards.
        let relative = shard_root(Path::new(""), name, split.id)
            .join(name)
            .join("runs")
            .join(&run_id);
        if !merged.iter().any(|dir| dir.ends_with(&relative)) {
            unmerged.push((split.id, run_id));
        }
    }
    Ok(unmerged)
}

fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

/// Every shard's source must have followed the same plan: shards that planned apart (a task
/// file edited between their starts) could hold an item twice or not at all.
fn check_plans(pipeline: &Pipeline, shards: &[ShardRun], problems: &mut Vec<String>) {
    for source in pipeline.nodes.iter().filter(|n| n.kind.is_source()) {
        let mut plans: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for shard in shards {
            let plan = Manifest::read(&shard.run.dir().join(&source.name))
                .ok()
                .and_then(|m| {
                    m.state
                        .get(PLAN_STATE)
                        .and_then(|v| v.as_str())
                        .map(str::to_string)
                })
                .unwrap_or_else(|| "by repository hash".into());
            plans.entry(plan).or_default().push(shard.id.to_string());
        }
        if plans.len() > 1 {
            problems.push(format!(
                "source `{}`: the shards followed different plans ({}); start them over with \
                 `kiln run --new --shard ...`",
                source.name,
                plans
                    .iter()
                    .map(|(plan, ids)| format!("{plan}: shards {}", ids.join(", ")))
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
    }
}

fn check_duplicates(
    stages: &[&Node],
    shards: &[ShardRun],
    problems: &mut Vec<String>,
) -> Result<(), PipelineError> {
    // An item two shards hold is in two shards' tables at every stage it reached: it is
    // reported at the first.
    let mut reported = std::collections::BTreeSet::new();
    for node in stages {
        let mut owner: BTreeMap<String, ShardId> = BTreeMap::new();
        let mut duplicates = Vec::new();
        for shard in shards {
            for key in kiln_store::read_keys(&shard.run.dir().join(&node.name))? {
                if let Some(first) = owner.get(&key) {
                    if !reported.insert(key.clone()) {
                        continue;
                    }
                    duplicates.push(format!(
                        "item {key} is in shard {first} and shard {} (stage {})",
                        shard.id, node.name
                    ));
                } else {
                    owner.insert(key, shard.id);
                }
            }
        }
        let more = duplicates.len().saturating_sub(DUPLICATES_SHOWN);
        problems.extend(duplicates.into_iter().take(DUPLICATES_SHOWN));
        if more > 0 {
            problems.push(format!(
                "{more} more item(s) of stage {} are in two shards",
                node.name
            ));
        }
    }
    Ok(())
}

/// Writes the merged table of one stage: every shard's rows, their counts and figures summed,
/// their resumption state joined (a crawl's window is the narrowest, so nothing counts as
/// crawled that one shard did not finish).
fn merge_stage<R: Row>(
    run: &RunStore,
    node: &Node,
    shards: &[ShardRun],
) -> Result<u64, PipelineError> {
    let mut table = run.stage::<R>(&node.name, &node.settings_hash(), BTreeMap::new())?;
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    let mut stats: BTreeMap<String, f64> = BTreeMap::new();
    let mut state: BTreeMap<String, serde_json::Value> = BTreeMap::new();
    for shard in shards {
        let dir = shard.run.dir().join(&node.name);
        let manifest = Manifest::read(&dir)?;
        let rows = kiln_store::read_rows::<R>(&dir)?;
        if !rows.is_empty() {
            table.append(&rows)?;
        }
        for (k, v) in manifest.counts {
            *counts.entry(k).or_default() += v;
        }
        for (k, v) in manifest.stats {
            *stats.entry(k).or_default() += v;
        }
        for (key, value) in manifest.state {
            let keep_new = match (state.get(&key), key.as_str()) {
                (None, _) => true,
                (Some(old), "window") => until(&value) < until(old),
                _ => false,
            };
            if keep_new {
                state.insert(key, value);
            }
        }
    }
    if !state.is_empty() {
        table.append_with_state(&[], state)?;
    }
    table.set_stats(stats)?;
    table.set_complete(true, counts)?;
    table.compact()?;
    Ok(table.manifest().rows)
}

fn until(window: &serde_json::Value) -> String {
    window
        .get("until")
        .and_then(|u| u.as_str())
        .unwrap_or_default()
        .to_string()
}

/// What the shards paid their LM endpoint, summed into the merged run's ledger.
fn merge_spent(run: &RunStore, shards: &[ShardRun]) -> Result<(), PipelineError> {
    let mut total = kiln_lm::Spent::default();
    let mut any = false;
    for shard in shards {
        if let Some(spent) = kiln_lm::read_spent(shard.run.dir())? {
            any = true;
            total.requests += spent.requests;
            total.prompt_tokens += spent.prompt_tokens;
            total.completion_tokens += spent.completion_tokens;
            total.cost_usd += spent.cost_usd;
        }
    }
    if any {
        kiln_lm::AnswerStore::open(run.dir())?.save_spent(&total)?;
    }
    Ok(())
}

/// Copies the files under `from` into `to` (hard links where the file system allows), keeping
/// what `to` holds; a missing `from` copies nothing.
fn copy_tree(from: &Path, to: &Path) -> Result<(), PipelineError> {
    let host = |what: &str, at: &Path, e: std::io::Error| PipelineError::Host {
        what: format!("{what} {}", at.display()),
        message: e.to_string(),
    };
    let entries = match std::fs::read_dir(from) {
        Ok(entries) => entries,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(host("read", from, e)),
    };
    std::fs::create_dir_all(to).map_err(|e| host("create", to, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| host("read", from, e))?;
        let source = entry.path();
        let target = to.join(entry.file_name());
        let kind = entry.file_type().map_err(|e| host("read", &source, e))?;
        if kind.is_dir() {
            copy_tree(&source, &target)?;
        } else if kind.is_file()
            && !target.exists()
            && std::fs::hard_link(&source, &target).is_err()
        {
            std::fs::copy(&source, &target).map_err(|e| host("copy", &source, e))?;
        }
    }
    Ok(())
}
