//! A run as `kiln status` shows it: the stages' manifests, what the LM cost, and the lines
//! that summarise them.

use std::collections::BTreeMap;
use std::path::PathBuf;

use kiln_core::config::Pipeline;
use kiln_store::{Manifest, RunStore};
use serde::Serialize;

use crate::error::PipelineError;
use crate::options::RunSelection;

/// The manifest of every stage of a run (`None` where the stage has not started).
#[must_use]
pub fn stage_manifests(pipeline: &Pipeline, run: &RunStore) -> Vec<(String, Option<Manifest>)> {
    pipeline
        .nodes
        .iter()
        .map(|n| {
            let manifest = run
                .stage_dir(&n.name)
                .ok()
                .and_then(|dir| Manifest::read(&dir).ok());
            (n.name.clone(), manifest)
        })
        .collect()
}

/// What a run has paid its LM endpoint over all stages and re-runs (`None`: it never asked).
///
/// # Errors
/// When the run's ledger exists but cannot be read.
pub fn lm_spent(run_dir: &std::path::Path) -> Result<Option<kiln_lm::Spent>, PipelineError> {
    Ok(kiln_lm::read_spent(run_dir)?)
}

/// The LM figures of a run's ledger as a stats line (`requests=3 prompt_tokens=...`).
#[must_use]
pub fn spent_line(spent: &kiln_lm::Spent) -> String {
    let stats = BTreeMap::from([
        ("requests".to_string(), spent.requests as f64),
        ("prompt_tokens".to_string(), spent.prompt_tokens as f64),
        (
            "completion_tokens".to_string(),
            spent.completion_tokens as f64,
        ),
        ("cost_usd".to_string(), spent.cost_usd),
    ]);
    stats_line(&stats)
}

/// A stage's measured figures, for summaries: `name=value`, integers without decimals.
#[must_use]
pub fn stats_line(stats: &BTreeMap<String, f64>) -> String {
    stats
        .iter()
        .map(|(k, v)| {
            if v.fract() == 0.0 && v.abs() < 1e15 {
                format!("{k}={v:.0}")
            } else {
                format!("{k}={v:.4}")
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Counts of one stage's rows by outcome, for summaries.
#[must_use]
pub fn counts_line(counts: &BTreeMap<String, u64>) -> String {
    counts
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Opens the run `selection` names (the latest unless an id is given) for reading.
///
/// # Errors
/// [`PipelineError::NoRun`] when the dataset has no run; store errors.
pub fn open_run(pipeline: &Pipeline, selection: &RunSelection) -> Result<RunStore, PipelineError> {
    let root = &pipeline.dataset.root;
    let name = &pipeline.dataset.name;
    let run_id = match selection {
        RunSelection::Id(id) => id.clone(),
        _ => kiln_store::latest(root, name)?.ok_or_else(|| PipelineError::NoRun {
            dataset: name.clone(),
            root: kiln_store::runs_dir(root, name),
        })?,
    };
    Ok(RunStore::open(root, name, &run_id)?)
}

/// One stage of [`RunStatus`].
#[derive(Debug, Clone, Serialize)]
pub struct StageStatus {
    /// The stage's name.
    pub stage: String,
    /// Its manifest; `None` when it has not started.
    pub manifest: Option<Manifest>,
}

/// Where a run stands.
#[derive(Debug, Clone, Serialize)]
pub struct RunStatus {
    /// The run's id.
    pub run_id: String,
    /// Its directory.
    pub run_dir: PathBuf,
    /// Whether it finished.
    pub status: kiln_store::Status,
    /// Every stage of the config, in order.
    pub stages: Vec<StageStatus>,
    /// What its LM requests cost (`None`: it asked none).
    pub lm: Option<kiln_lm::Spent>,
}

/// Where `run` stands.
///
/// # Errors
/// When the run's LM ledger exists but cannot be read.
pub fn run_status(pipeline: &Pipeline, run: &RunStore) -> Result<RunStatus, PipelineError> {
    Ok(RunStatus {
        run_id: run.run_id().to_string(),
        run_dir: run.dir().to_path_buf(),
        status: run.info().status,
        stages: stage_manifests(pipeline, run)
            .into_iter()
            .map(|(stage, manifest)| StageStatus { stage, manifest })
            .collect(),
        lm: lm_spent(run.dir())?,
    })
}

/// One shard of a split run as `kiln status --shards` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct ShardProgress {
    /// Which shard.
    pub shard: kiln_core::config::ShardId,
    /// Its latest run (`None`: it never started).
    pub run: Option<RunStatus>,
    /// When it last wrote a stage manifest (RFC 3339).
    pub updated_at: Option<String>,
    /// What its share of the plan was estimated to take, in seconds.
    pub estimated_seconds: Option<f64>,
}

impl ShardProgress {
    /// Whether its run finished every stage it does.
    #[must_use]
    pub fn finished(&self) -> bool {
        self.run
            .as_ref()
            .is_some_and(|r| r.status == kiln_store::Status::Complete)
    }

    /// How many of its stages finished.
    #[must_use]
    pub fn stages_finished(&self) -> usize {
        self.run.as_ref().map_or(0, |r| {
            r.stages
                .iter()
                .filter(|s| {
                    s.manifest
                        .as_ref()
                        .is_some_and(|m| m.status == kiln_store::Status::Complete)
                })
                .count()
        })
    }
}

/// The shards of one split (`shards/of-<count>/`) and where they stand together.
#[derive(Debug, Clone, Serialize)]
pub struct ShardSetStatus {
    /// How many shards.
    pub count: u32,
    /// Their directory.
    pub dir: PathBuf,
    /// Every shard, in order.
    pub shards: Vec<ShardProgress>,
    /// Rows over all shards per stage, and how many shards finished it.
    pub totals: Vec<(String, u64, u32)>,
    /// The unfinished shards, furthest behind first (fewest stages finished, then the oldest
    /// last write).
    pub stragglers: Vec<u32>,
}

/// Every split of the dataset under the shared root `root` (the config's when `None`).
///
/// # Errors
/// When a shard's run store cannot be read.
pub fn shard_statuses(
    pipeline: &Pipeline,
    root: Option<&std::path::Path>,
) -> Result<Vec<ShardSetStatus>, PipelineError> {
    let home = root.unwrap_or(pipeline.home_root());
    let name = &pipeline.dataset.name;
    let mut sets = Vec::new();
    for count in crate::shards::splits(home, name) {
        let estimates = crate::shards::plans(home, name, count)
            .into_iter()
            .next()
            .map(|(_, plan)| plan.shards)
            .unwrap_or_default();
        let mut shards = Vec::new();
        for index in 0..count {
            let shard = kiln_core::config::ShardId { index, count };
            let root = kiln_core::config::shard_root(home, name, shard);
            let run = match kiln_store::latest(&root, name)? {
                Some(id) => Some(run_status(pipeline, &RunStore::open(&root, name, &id)?)?),
                None => None,
            };
            let updated_at = run.as_ref().and_then(|r| {
                r.stages
                    .iter()
                    .filter_map(|s| s.manifest.as_ref().map(|m| m.updated_at.clone()))
                    .max()
            });
            shards.push(ShardProgress {
                shard,
                run,
                updated_at,
                estimated_seconds: estimates
                    .iter()
                    .find(|s| s.index == index)
                    .map(|s| s.estimated_seconds),
            });
        }
        let mut totals: Vec<(String, u64, u32)> = pipeline
            .nodes
            .iter()
            .filter(|n| n.kind != kiln_core::config::NodeKind::Export)
            .map(|n| (n.name.clone(), 0, 0))
            .collect();
        for shard in &shards {
            for stage in shard.run.iter().flat_map(|r| &r.stages) {
                if let (Some(total), Some(m)) = (
                    totals.iter_mut().find(|t| t.0 == stage.stage),
                    &stage.manifest,
                ) {
                    total.1 += m.rows;
                    total.2 += u32::from(m.status == kiln_store::Status::Complete);
                }
            }
        }
        let mut behind: Vec<&ShardProgress> = shards.iter().filter(|s| !s.finished()).collect();
        behind.sort_by(|a, b| {
            a.stages_finished()
                .cmp(&b.stages_finished())
                .then_with(|| a.updated_at.cmp(&b.updated_at))
        });
        sets.push(ShardSetStatus {
            count,
            dir: kiln_core::config::shard_set_dir(home, name, count),
            stragglers: behind.iter().map(|s| s.shard.index).collect(),
            shards,
            totals,
        });
    }
    Ok(sets)
}
