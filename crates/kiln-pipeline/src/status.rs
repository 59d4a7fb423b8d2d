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
