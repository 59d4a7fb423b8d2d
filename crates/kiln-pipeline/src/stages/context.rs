//! What the stages share: the stage context, the items still to do, bounded concurrency with
//! each row appended as its item finishes, the LM stages' judging, and the stage's outcome.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use kiln_core::config::{LmSettings, Node, NodeKind, NodeSettings, Pipeline};
use kiln_core::runtime::{LABEL_DATASET, LABEL_MANAGED, LABEL_RUN};
use kiln_core::{ContainerRuntime, Event, LanguageModel, Reporter};
use kiln_lm::{AnswerStore, Asker};
use kiln_schema::{Candidate, CandidateStatus, InstanceId, Row, Verdict};
use kiln_store::{RunStore, StageTable};
use tokio::task::JoinSet;

use crate::{error::PipelineError, options::RunOptions};

/// What a stage did.
#[derive(Debug, Clone, PartialEq)]
pub struct StageOutcome {
    /// Stage name.
    pub stage: String,
    /// Rows in its table after the run.
    pub rows: u64,
    /// Items processed by this invocation.
    pub processed: u64,
    /// Items skipped because they already had rows.
    pub skipped: u64,
    /// Whether every item of the stage has a row.
    pub complete: bool,
    /// Counters by outcome.
    pub counts: BTreeMap<String, u64>,
    /// For export: where the release was written.
    pub release_dir: Option<PathBuf>,
    /// Figures the stage measured (requests, tokens, cost), as stored in its manifest.
    pub stats: BTreeMap<String, f64>,
}

pub(crate) struct StageContext<'a> {
    pub pipeline: &'a Pipeline,
    pub run: &'a RunStore,
    pub node: &'a Node,
    pub reporter: Arc<dyn Reporter>,
    pub runtime: Option<Arc<dyn ContainerRuntime>>,
    pub lm: Option<Arc<dyn LanguageModel>>,
    pub options: &'a RunOptions,
    pub run_label: String,
    /// When this invocation of the stage started (its wall time goes into the manifest).
    pub started: Instant,
}

/// The manifest figure holding a stage's wall seconds, summed over the invocations that worked
/// on it (a resumed stage adds to it).
pub(crate) const WALL_SECONDS: &str = "wall_seconds";

impl StageContext<'_> {
    pub(crate) fn input(&self, kind: NodeKind) -> Option<&Node> {
        self.pipeline.input_of_kind(self.node, kind)
    }

    /// Rows of the input of `kind`; an input that never ran is an error naming it.
    pub(crate) fn input_rows<R: Row>(
        &self,
        kind: NodeKind,
    ) -> Result<Option<Vec<R>>, PipelineError> {
        let Some(input) = self.input(kind) else {
            return Ok(None);
        };
        let dir = self.run.stage_dir(&input.name)?;
        if !dir.join(kiln_store::MANIFEST).exists() {
            return Err(PipelineError::MissingInput {
                stage: self.node.name.clone(),
                input: input.name.clone(),
            });
        }
        Ok(Some(kiln_store::read_rows::<R>(&dir)?))
    }

    /// The candidates of this stage's source (task file or crawl), every status.
    pub(crate) fn candidates(&self) -> Result<Vec<Candidate>, PipelineError> {
        let Some(source) = self.pipeline.source_of(self.node) else {
            return Ok(Vec::new());
        };
        let dir = self.run.stage_dir(&source.name)?;
        if !dir.join(kiln_store::MANIFEST).exists() {
            return Err(PipelineError::MissingInput {
                stage: self.node.name.clone(),
                input: source.name.clone(),
            });
        }
        Ok(kiln_store::read_rows::<Candidate>(&dir)?)
    }

    /// The dataset's other runs, oldest first: those under its root and, for a shard, the
    /// merged runs under the shared root too (what earlier months of the split run made).
    ///
    /// # Errors
    /// When a runs directory or a run's `run.json` cannot be read.
    pub(crate) fn other_runs(&self) -> Result<Vec<RunStore>, PipelineError> {
        let name = &self.pipeline.dataset.name;
        let mut roots = vec![self.pipeline.home_root()];
        if self.pipeline.shard.is_some() {
            roots.push(self.pipeline.dataset.root.as_path());
        }
        let mut runs = Vec::new();
        for root in roots {
            for id in kiln_store::run_ids(root, name)? {
                let run = RunStore::open(root, name, &id)?;
                if run.dir() != self.run.dir() {
                    runs.push(run);
                }
            }
        }
        Ok(runs)
    }

    /// The mirror cache of the dataset's repositories (launch clones from it, validate applies
    /// the patches on the host from it).
    pub(crate) fn mirrors(&self) -> std::path::PathBuf {
        self.pipeline.dataset.root.join(".cache").join("git")
    }

    /// The clone URL template of this stage's source.
    pub(crate) fn clone_url_template(&self) -> Option<&str> {
        match self.pipeline.source_of(self.node).map(|n| &n.settings) {
            Some(NodeSettings::Ingest(s)) => Some(&s.clone_url),
            Some(NodeSettings::Crawl(s)) => Some(&s.clone_url),
            _ => None,
        }
    }

    /// Opens this stage's table. A table made with other settings is started over.
    pub(crate) fn table<R: Row>(&self) -> Result<StageTable<R>, PipelineError> {
        let mut table =
            self.run
                .stage::<R>(&self.node.name, &self.node.settings_hash(), BTreeMap::new())?;
        if table.is_stale() {
            self.reporter.report(Event::Note {
                message: format!(
                    "stage {}: settings changed since its rows were written; starting it over",
                    self.node.name
                ),
            });
            table.reset()?;
        }
        Ok(table)
    }

    pub(crate) fn runtime(&self) -> Result<Arc<dyn ContainerRuntime>, PipelineError> {
        self.runtime
            .clone()
            .ok_or_else(|| PipelineError::NoEngine(self.node.name.clone()))
    }

    /// The LM asker of this stage: answers stored in `<run>/lm/`, replayed unless the stage
    /// is forced (`--force` asks again, and only for the items it redoes).
    pub(crate) fn asker(&self, lm: &LmSettings) -> Result<Arc<Asker>, PipelineError> {
        let model = self
            .lm
            .clone()
            .ok_or_else(|| PipelineError::NoLanguageModel(self.node.name.clone()))?;
        let store = AnswerStore::open(self.run.dir())?;
        Ok(Arc::new(Asker::new(
            model,
            store,
            &self.node.name,
            lm,
            !self.options.force,
        )?))
    }

    /// Items judged by the LM at once: the endpoint's cap on requests in flight, unless the
    /// command line says otherwise.
    pub(crate) fn lm_concurrency(&self, lm: &LmSettings) -> usize {
        self.options
            .concurrency
            .unwrap_or_else(|| usize::try_from(lm.max_in_flight).unwrap_or(1))
    }

    pub(crate) fn labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (LABEL_MANAGED.to_string(), "1".to_string()),
            (LABEL_RUN.to_string(), self.run_label.clone()),
            (
                LABEL_DATASET.to_string(),
                crate::labels::dataset_label(self.pipeline),
            ),
        ])
    }

    pub(crate) fn log_dir(
        &self,
        instance_id: &InstanceId,
    ) -> Result<(PathBuf, String), PipelineError> {
        let dir = self.run.log_dir(instance_id, &self.node.name)?;
        let label = format!("logs/{}/{}", instance_id.file_stem(), self.node.name);
        Ok((dir, label))
    }
}

/// Decides which of `items` to process, after dropping rows `--force` asks to redo.
pub(crate) fn plan<R: Row>(
    cx: &StageContext<'_>,
    table: &mut StageTable<R>,
    items: Vec<InstanceId>,
) -> Result<(Vec<InstanceId>, u64), PipelineError> {
    let wanted = wanted(cx, items);
    if cx.options.force {
        if cx.options.only.is_some() {
            let keys: BTreeSet<String> = wanted.iter().map(ToString::to_string).collect();
            table.remove_keys(&keys)?;
        } else {
            table.reset()?;
        }
    }
    let done = table.keys()?;
    let skipped = wanted.iter().filter(|i| done.contains(i.as_str())).count() as u64;
    let todo = wanted
        .into_iter()
        .filter(|i| !done.contains(i.as_str()))
        .collect();
    Ok((todo, skipped))
}

/// The items of `items` that `--only` names (all without it).
fn wanted(cx: &StageContext<'_>, items: Vec<InstanceId>) -> Vec<InstanceId> {
    match &cx.options.only {
        Some(only) => items.into_iter().filter(|i| only.contains(i)).collect(),
        None => items,
    }
}

/// The items of `items` that [`plan`] will give to process, without changing the table: those
/// wanted and without a row (all wanted with `--force`).
pub(crate) fn pending<R: Row>(
    cx: &StageContext<'_>,
    table: &StageTable<R>,
    items: &[InstanceId],
) -> Result<Vec<InstanceId>, PipelineError> {
    let wanted = wanted(cx, items.to_vec());
    if cx.options.force {
        return Ok(wanted);
    }
    let done = table.keys()?;
    Ok(wanted
        .into_iter()
        .filter(|i| !done.contains(i.as_str()))
        .collect())
}

/// Judges the candidates in `todo` with a deterministic judge and appends their rows at once.
pub(crate) fn judge_without_lm<R: Row>(
    table: &mut StageTable<R>,
    candidates: &[Candidate],
    todo: Vec<InstanceId>,
    judge: impl Fn(&Candidate) -> R,
) -> Result<u64, PipelineError> {
    let todo: BTreeSet<InstanceId> = todo.into_iter().collect();
    let rows: Vec<R> = candidates
        .iter()
        .filter(|c| todo.contains(&c.instance_id))
        .map(judge)
        .collect();
    if !rows.is_empty() {
        table.append(&rows)?;
    }
    Ok(rows.len() as u64)
}

/// A row an LM judge writes.
pub(crate) trait LmRow {
    /// Whether the deterministic judge decided although the LM was configured.
    fn fell_back(&self) -> bool;
}

impl LmRow for Verdict {
    fn fell_back(&self) -> bool {
        self.fallback.is_some()
    }
}

impl LmRow for kiln_schema::PlatformLabel {
    fn fell_back(&self) -> bool {
        self.fallback.is_some()
    }
}

/// Judges `todo` with the LM, `judge` making each candidate's row, with bounded concurrency and
/// each row appended as it comes. What asking cost is added to the stage's figures whether or
/// not the stage succeeded: a request that was paid for stays counted.
pub(crate) async fn judge_with_lm<R, F, Fut>(
    cx: &StageContext<'_>,
    table: &mut StageTable<R>,
    candidates: Vec<Candidate>,
    todo: Vec<InstanceId>,
    lm: &LmSettings,
    judge: F,
    outcome_of: impl Fn(&R) -> String,
) -> Result<u64, PipelineError>
where
    R: Row + LmRow,
    F: Fn(Candidate, Arc<Asker>) -> Fut,
    Fut: Future<Output = Result<R, kiln_lm::Error>> + Send + 'static,
{
    let asker = cx.asker(lm)?;
    let by_id = kiln_schema::rows_by_id(candidates);
    let work = |id: InstanceId| {
        let future = by_id
            .get(&id)
            .map(|candidate| judge(candidate.clone(), Arc::clone(&asker)));
        async move {
            match future {
                Some(future) => Ok(future.await?),
                None => Err(PipelineError::Internal(format!(
                    "candidate {id} is not among the stage's inputs"
                ))),
            }
        }
    };
    let processed = for_each_item(cx, table, todo, cx.lm_concurrency(lm), work, outcome_of).await;
    let mut stats = table.manifest().stats.clone();
    asker.stats().add_to(&mut stats);
    let fallbacks = table.rows()?.iter().filter(|r| r.fell_back()).count();
    stats.insert("lm.fallback_rows".into(), fallbacks as f64);
    table.set_stats(stats)?;
    processed
}

/// Marks the table complete when every item has a row, compacts it, and builds the outcome.
pub(crate) fn finish<R: Row>(
    cx: &StageContext<'_>,
    table: &mut StageTable<R>,
    items: &BTreeSet<InstanceId>,
    processed: u64,
    skipped: u64,
    count: impl Fn(&R) -> String,
) -> Result<StageOutcome, PipelineError> {
    let mut stats = table.manifest().stats.clone();
    *stats.entry(WALL_SECONDS.to_string()).or_default() += cx.started.elapsed().as_secs_f64();
    table.set_stats(stats)?;
    let rows = table.rows()?;
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for row in &rows {
        *counts.entry(count(row)).or_default() += 1;
    }
    let keys: BTreeSet<String> = rows.iter().map(|r| r.key().to_string()).collect();
    let complete = items.iter().all(|i| keys.contains(i.as_str()));
    table.set_complete(complete, counts.clone())?;
    if complete {
        table.compact()?;
    }
    Ok(StageOutcome {
        stage: cx.node.name.clone(),
        rows: rows.len() as u64,
        processed,
        skipped,
        complete,
        counts,
        release_dir: None,
        stats: table.manifest().stats.clone(),
    })
}

pub(crate) fn started(cx: &StageContext<'_>, total: usize, done: u64) {
    cx.reporter.report(Event::StageStarted {
        stage: cx.node.name.clone(),
        total: total as u64,
        done,
    });
}

/// Processes `todo` with bounded concurrency, appending each row as soon as its item finishes.
pub(crate) async fn for_each_item<R, F, Fut>(
    cx: &StageContext<'_>,
    table: &mut StageTable<R>,
    todo: Vec<InstanceId>,
    concurrency: usize,
    work: F,
    outcome_of: impl Fn(&R) -> String,
) -> Result<u64, PipelineError>
where
    R: Row,
    F: Fn(InstanceId) -> Fut,
    Fut: Future<Output = Result<R, PipelineError>> + Send + 'static,
{
    let mut pending = todo.into_iter();
    let mut running: JoinSet<(InstanceId, f64, Result<R, PipelineError>)> = JoinSet::new();
    let mut processed = 0;
    let spawn = |running: &mut JoinSet<_>, item: InstanceId| {
        cx.reporter.report(Event::ItemStarted {
            stage: cx.node.name.clone(),
            item: item.to_string(),
        });
        let future = work(item.clone());
        running.spawn(async move {
            let started = Instant::now();
            let result = future.await;
            (item, started.elapsed().as_secs_f64(), result)
        });
    };
    for item in pending.by_ref().take(concurrency.max(1)) {
        spawn(&mut running, item);
    }
    let mut deferred: Vec<String> = Vec::new();
    let mut reasons: Vec<String> = Vec::new();
    while let Some(joined) = running.join_next().await {
        let (item, seconds, result) =
            joined.map_err(|e| PipelineError::Internal(format!("a worker task failed: {e}")))?;
        let outcome = match result {
            Ok(row) => {
                table.append(std::slice::from_ref(&row))?;
                processed += 1;
                outcome_of(&row)
            }
            // A registry that does not answer says nothing about the item: no row, and the
            // other items go on (another registry may answer); the stage stops at the end.
            Err(PipelineError::RegistryDown { url, error, .. }) => {
                deferred.push(item.to_string());
                let reason = format!("{url}: {error}");
                if !reasons.contains(&reason) {
                    reasons.push(reason);
                }
                "deferred: registry down".to_string()
            }
            // Any other infrastructure error stops the stage; dropping `running` aborts the
            // other items, whose sessions then remove their containers.
            Err(e) => return Err(e),
        };
        cx.reporter.report(Event::ItemFinished {
            stage: cx.node.name.clone(),
            item: item.to_string(),
            outcome,
            seconds,
        });
        if let Some(next) = pending.next() {
            spawn(&mut running, next);
        }
    }
    if !deferred.is_empty() {
        return Err(PipelineError::Deferred {
            stage: cx.node.name.clone(),
            items: deferred,
            reasons,
        });
    }
    Ok(processed)
}

/// Candidates that read correctly and that the filter input (if any) kept.
pub(crate) fn kept_candidates(cx: &StageContext<'_>) -> Result<Vec<Candidate>, PipelineError> {
    let mut candidates = cx.candidates()?;
    candidates.retain(|c| c.status == CandidateStatus::Ok);
    if let Some(verdicts) = cx.input_rows::<Verdict>(NodeKind::Filter)? {
        let kept: BTreeSet<InstanceId> = verdicts
            .into_iter()
            .filter(|v| v.keep)
            .map(|v| v.instance_id)
            .collect();
        candidates.retain(|c| kept.contains(&c.instance_id));
    }
    Ok(candidates)
}

/// Waits for the containers a stage handed to background removal. One that could not be removed
/// keeps the run label, and the next run of the same id removes it; the stage's rows stand.
pub(crate) async fn wait_for_removals(cx: &StageContext<'_>, removals: &kiln_core::Removals) {
    for e in removals.wait().await {
        cx.reporter.report(Event::Note {
            message: format!(
                "{}: a container was not removed (the next run of this id removes it): {e}",
                cx.node.name
            ),
        });
    }
}
