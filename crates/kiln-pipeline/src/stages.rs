//! One function per stage kind: read inputs from the run store, process the items still
//! missing, append rows as they finish.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use kiln_core::config::{Node, NodeKind, NodeSettings, Pipeline};
use kiln_core::runtime::{LABEL_MANAGED, LABEL_RUN};
use kiln_core::{ContainerRuntime, Event, Reporter};
use kiln_schema::{
    Candidate, EnvironmentRecord, PlatformLabel, ReleaseInstance, Row, ValidationRecord, Verdict,
};
use kiln_store::{RunStore, StageTable};
use tokio::task::JoinSet;

use crate::{PipelineError, RunOptions};

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
}

pub(crate) struct StageContext<'a> {
    pub pipeline: &'a Pipeline,
    pub run: &'a RunStore,
    pub node: &'a Node,
    pub reporter: Arc<dyn Reporter>,
    pub runtime: Option<Arc<dyn ContainerRuntime>>,
    pub options: &'a RunOptions,
    pub run_label: String,
}

impl StageContext<'_> {
    fn input(&self, kind: NodeKind) -> Option<&Node> {
        self.pipeline.input_of_kind(self.node, kind)
    }

    /// Rows of the input of `kind`; an input that never ran is an error naming it.
    fn input_rows<R: Row>(&self, kind: NodeKind) -> Result<Option<Vec<R>>, PipelineError> {
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

    fn candidates(&self) -> Result<Vec<Candidate>, PipelineError> {
        Ok(self
            .input_rows::<Candidate>(NodeKind::Ingest)?
            .unwrap_or_default())
    }

    /// Opens this stage's table. A table made with other settings is started over.
    fn table<R: Row>(&self) -> Result<StageTable<R>, PipelineError> {
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

    fn runtime(&self) -> Result<Arc<dyn ContainerRuntime>, PipelineError> {
        self.runtime
            .clone()
            .ok_or_else(|| PipelineError::NoEngine(self.node.name.clone()))
    }

    fn labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (LABEL_MANAGED.to_string(), "1".to_string()),
            (LABEL_RUN.to_string(), self.run_label.clone()),
        ])
    }

    fn log_dir(&self, instance_id: &str) -> Result<(PathBuf, String), PipelineError> {
        let dir = self.run.log_dir(instance_id, &self.node.name)?;
        let label = format!("logs/{instance_id}/{}", self.node.name);
        Ok((dir, label))
    }
}

/// Decides which of `items` to process, after dropping rows `--force` asks to redo.
fn plan<R: Row>(
    cx: &StageContext<'_>,
    table: &mut StageTable<R>,
    items: Vec<String>,
) -> Result<(Vec<String>, u64), PipelineError> {
    let wanted: Vec<String> = match &cx.options.only {
        Some(only) => items.into_iter().filter(|i| only.contains(i)).collect(),
        None => items,
    };
    if cx.options.force {
        if cx.options.only.is_some() {
            let keys: BTreeSet<String> = wanted.iter().cloned().collect();
            table.remove_keys(&keys)?;
        } else {
            table.reset()?;
        }
    }
    let done = table.keys()?;
    let skipped = wanted.iter().filter(|i| done.contains(*i)).count() as u64;
    let todo = wanted.into_iter().filter(|i| !done.contains(i)).collect();
    Ok((todo, skipped))
}

/// Marks the table complete when every item has a row, compacts it, and builds the outcome.
fn finish<R: Row>(
    cx: &StageContext<'_>,
    table: &mut StageTable<R>,
    items: &BTreeSet<String>,
    processed: u64,
    skipped: u64,
    count: impl Fn(&R) -> String,
) -> Result<StageOutcome, PipelineError> {
    let rows = table.rows()?;
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for row in &rows {
        *counts.entry(count(row)).or_default() += 1;
    }
    let keys: BTreeSet<String> = rows.iter().map(|r| r.key().to_string()).collect();
    let complete = items.iter().all(|i| keys.contains(i));
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
    })
}

fn started(cx: &StageContext<'_>, total: usize, done: u64) {
    cx.reporter.report(Event::StageStarted {
        stage: cx.node.name.clone(),
        total: total as u64,
        done,
    });
}

/// Processes `todo` with bounded concurrency, appending each row as soon as its item finishes.
async fn for_each_item<R, F, Fut>(
    cx: &StageContext<'_>,
    table: &mut StageTable<R>,
    todo: Vec<String>,
    concurrency: usize,
    work: F,
    outcome_of: impl Fn(&R) -> String,
) -> Result<u64, PipelineError>
where
    R: Row,
    F: Fn(String) -> Fut,
    Fut: Future<Output = Result<R, PipelineError>> + Send + 'static,
{
    let mut pending = todo.into_iter();
    let mut running: JoinSet<(String, f64, Result<R, PipelineError>)> = JoinSet::new();
    let mut processed = 0;
    let spawn = |running: &mut JoinSet<_>, item: String| {
        cx.reporter.report(Event::ItemStarted {
            stage: cx.node.name.clone(),
            item: item.clone(),
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
    while let Some(joined) = running.join_next().await {
        let (item, seconds, result) =
            joined.map_err(|e| PipelineError::Internal(format!("a worker task failed: {e}")))?;
        // An infrastructure error stops the stage; dropping `running` aborts the other items,
        // whose sessions then remove their containers.
        let row = result?;
        table.append(std::slice::from_ref(&row))?;
        processed += 1;
        cx.reporter.report(Event::ItemFinished {
            stage: cx.node.name.clone(),
            item,
            outcome: outcome_of(&row),
            seconds,
        });
        if let Some(next) = pending.next() {
            spawn(&mut running, next);
        }
    }
    Ok(processed)
}

pub(crate) fn ingest(cx: &StageContext<'_>) -> Result<StageOutcome, PipelineError> {
    let NodeSettings::Ingest(settings) = &cx.node.settings else {
        return Err(PipelineError::Internal(
            "wrong settings for an ingest node".into(),
        ));
    };
    let mut table = cx.table::<Candidate>()?;
    let mut rows = kiln_github::read_task_file(&settings.path).map_err(
        |kiln_github::IngestError::Read { path, source }| PipelineError::Input {
            what: format!("the task file {}", path.display()),
            message: source.to_string(),
        },
    )?;
    if !settings.instances.is_empty() {
        rows.retain(|r| settings.instances.contains(&r.instance_id));
    }
    // Duplicate ids in a task file: the first wins, the others become error rows so nothing is
    // silently dropped.
    let mut seen = BTreeSet::new();
    for row in &mut rows {
        if !seen.insert(row.instance_id.clone()) {
            row.error = Some(format!(
                "{}: duplicate instance_id {}",
                row.origin, row.instance_id
            ));
            row.status = "error".into();
            row.instance_id = format!("duplicate-{}", row.origin.replace([':', '/'], "-"));
        }
    }
    let items: Vec<String> = rows.iter().map(|r| r.instance_id.clone()).collect();
    started(cx, items.len(), 0);
    let (todo, skipped) = plan(cx, &mut table, items.clone())?;
    let todo: BTreeSet<String> = todo.into_iter().collect();
    let new_rows: Vec<Candidate> = rows
        .into_iter()
        .filter(|r| todo.contains(&r.instance_id))
        .collect();
    if !new_rows.is_empty() {
        table.append(&new_rows)?;
    }
    for row in new_rows.iter().filter(|r| r.status != "ok") {
        cx.reporter.report(Event::Note {
            message: row.error.clone().unwrap_or_default(),
        });
    }
    let items: BTreeSet<String> = items.into_iter().collect();
    finish(
        cx,
        &mut table,
        &items,
        new_rows.len() as u64,
        skipped,
        |r| r.status.clone(),
    )
}

pub(crate) fn filter(cx: &StageContext<'_>) -> Result<StageOutcome, PipelineError> {
    let NodeSettings::Filter(settings) = &cx.node.settings else {
        return Err(PipelineError::Internal(
            "wrong settings for a filter node".into(),
        ));
    };
    let candidates = cx.candidates()?;
    let mut table = cx.table::<Verdict>()?;
    let items: Vec<String> = candidates.iter().map(|c| c.instance_id.clone()).collect();
    started(cx, items.len(), 0);
    let (todo, skipped) = plan(cx, &mut table, items.clone())?;
    let todo: BTreeSet<String> = todo.into_iter().collect();
    let min = usize::try_from(settings.min_problem_chars).unwrap_or(0);
    let rows: Vec<Verdict> = candidates
        .iter()
        .filter(|c| todo.contains(&c.instance_id))
        .map(|c| kiln_lm::heuristic_verdict(c, min))
        .collect();
    if !rows.is_empty() {
        table.append(&rows)?;
    }
    let items: BTreeSet<String> = items.into_iter().collect();
    finish(cx, &mut table, &items, rows.len() as u64, skipped, |v| {
        if v.keep {
            "kept".into()
        } else {
            format!("dropped:{}", v.label)
        }
    })
}

pub(crate) fn split(cx: &StageContext<'_>) -> Result<StageOutcome, PipelineError> {
    let candidates = kept_candidates(cx)?;
    let mut table = cx.table::<PlatformLabel>()?;
    let items: Vec<String> = candidates.iter().map(|c| c.instance_id.clone()).collect();
    started(cx, items.len(), 0);
    let (todo, skipped) = plan(cx, &mut table, items.clone())?;
    let todo: BTreeSet<String> = todo.into_iter().collect();
    let rows: Vec<PlatformLabel> = candidates
        .iter()
        .filter(|c| todo.contains(&c.instance_id))
        .map(kiln_lm::keyword_platform)
        .collect();
    if !rows.is_empty() {
        table.append(&rows)?;
    }
    let items: BTreeSet<String> = items.into_iter().collect();
    finish(cx, &mut table, &items, rows.len() as u64, skipped, |p| {
        p.platform.clone()
    })
}

/// Candidates that read correctly and that the filter input (if any) kept.
fn kept_candidates(cx: &StageContext<'_>) -> Result<Vec<Candidate>, PipelineError> {
    let mut candidates = cx.candidates()?;
    candidates.retain(|c| c.status == "ok");
    if let Some(verdicts) = cx.input_rows::<Verdict>(NodeKind::Filter)? {
        let kept: BTreeSet<String> = verdicts
            .into_iter()
            .filter(|v| v.keep)
            .map(|v| v.instance_id)
            .collect();
        candidates.retain(|c| kept.contains(&c.instance_id));
    }
    Ok(candidates)
}

pub(crate) async fn launch(cx: &StageContext<'_>) -> Result<StageOutcome, PipelineError> {
    let NodeSettings::Launch(settings) = &cx.node.settings else {
        return Err(PipelineError::Internal(
            "wrong settings for a launch node".into(),
        ));
    };
    let mut candidates = kept_candidates(cx)?;
    if let (Some(labels), Some(NodeSettings::Split(split))) = (
        cx.input_rows::<PlatformLabel>(NodeKind::Split)?,
        cx.input(NodeKind::Split).map(|n| &n.settings),
    ) {
        let keep: BTreeSet<String> = labels
            .into_iter()
            .filter(|l| split.keep.contains(&l.platform))
            .map(|l| l.instance_id)
            .collect();
        candidates.retain(|c| keep.contains(&c.instance_id));
    }
    let Some(NodeSettings::Ingest(source)) = cx.input(NodeKind::Ingest).map(|n| &n.settings) else {
        return Err(PipelineError::Internal("launch has no ingest input".into()));
    };
    let mut table = cx.table::<EnvironmentRecord>()?;
    let items: Vec<String> = candidates.iter().map(|c| c.instance_id.clone()).collect();
    let (todo, skipped) = plan(cx, &mut table, items.clone())?;
    started(cx, items.len(), skipped);
    let runtime = cx.runtime()?;
    let ca_bundle = match &cx.pipeline.docker.ca_bundle {
        Some(path) if !todo.is_empty() => Some(Arc::new(std::fs::read(path).map_err(|e| {
            PipelineError::Input {
                what: format!("the CA bundle {}", path.display()),
                message: e.to_string(),
            }
        })?)),
        _ => None,
    };
    let by_id: BTreeMap<String, Candidate> = candidates
        .into_iter()
        .map(|c| (c.instance_id.clone(), c))
        .collect();
    let cache_dir = cx.pipeline.dataset.root.join(".cache").join("git");
    let concurrency = cx
        .options
        .concurrency
        .unwrap_or(usize::try_from(settings.concurrency).unwrap_or(1));
    let reporter = Arc::clone(&cx.reporter);
    let removals = kiln_core::Removals::default();
    let mut requests = BTreeMap::new();
    for id in &todo {
        let Some(candidate) = by_id.get(id) else {
            continue;
        };
        let (log_dir, log_dir_label) = cx.log_dir(id)?;
        requests.insert(
            id.clone(),
            kiln_launch::LaunchRequest {
                candidate: candidate.clone(),
                clone_url: kiln_github::clone_url(&source.clone_url, &candidate.repo),
                cache_dir: cache_dir.clone(),
                log_dir,
                log_dir_label,
                ca_bundle: ca_bundle.clone(),
                image_tag: image_tag(
                    &cx.pipeline.docker.image_prefix,
                    &cx.pipeline.dataset.name,
                    id,
                ),
                labels: cx.labels(),
                settings: settings.clone(),
                docker: cx.pipeline.docker.clone(),
                stage: cx.node.name.clone(),
                removals: removals.clone(),
            },
        );
    }
    let requests = Arc::new(requests);
    let processed = for_each_item(
        cx,
        &mut table,
        todo,
        concurrency,
        |id| {
            let runtime = Arc::clone(&runtime);
            let reporter = Arc::clone(&reporter);
            let requests = Arc::clone(&requests);
            async move {
                let Some(request) = requests.get(&id) else {
                    return Err(PipelineError::Internal(format!("no request for {id}")));
                };
                kiln_launch::launch(runtime, request, reporter.as_ref())
                    .await
                    .map_err(|kiln_launch::LaunchError::Engine(e)| PipelineError::Engine(e))
            }
        },
        environment_outcome,
    )
    .await;
    wait_for_removals(cx, &removals).await;
    let processed = processed?;
    let items: BTreeSet<String> = items.into_iter().collect();
    finish(
        cx,
        &mut table,
        &items,
        processed,
        skipped,
        environment_outcome,
    )
}

/// Waits for the containers a stage handed to background removal. One that could not be removed
/// keeps the run label, and the next run of the same id removes it; the stage's rows stand.
async fn wait_for_removals(cx: &StageContext<'_>, removals: &kiln_core::Removals) {
    for e in removals.wait().await {
        cx.reporter.report(Event::Note {
            message: format!(
                "{}: a container was not removed (the next run of this id removes it): {e}",
                cx.node.name
            ),
        });
    }
}

fn environment_outcome(row: &EnvironmentRecord) -> String {
    match &row.failure_class {
        None => row.status.clone(),
        Some(class) => format!("{}:{class}", row.status),
    }
}

fn validation_outcome(row: &ValidationRecord) -> String {
    match &row.failure_class {
        None => row.status.clone(),
        Some(class) => format!("{}:{class}", row.status),
    }
}

/// Image tag of an instance's environment: `<prefix>/<dataset>:<instance id>`, lowercased, as
/// Docker requires.
fn image_tag(prefix: &str, dataset: &str, instance_id: &str) -> String {
    let clean = |s: &str| -> String {
        s.to_ascii_lowercase()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "._-".contains(c) {
                    c
                } else {
                    '-'
                }
            })
            .collect()
    };
    let mut tag = clean(instance_id);
    tag.truncate(128);
    format!("{}/{}:{tag}", clean(prefix), clean(dataset))
}

pub(crate) async fn validate(cx: &StageContext<'_>) -> Result<StageOutcome, PipelineError> {
    let NodeSettings::Validate(settings) = &cx.node.settings else {
        return Err(PipelineError::Internal(
            "wrong settings for a validate node".into(),
        ));
    };
    let candidates: BTreeMap<String, Candidate> = cx
        .candidates()?
        .into_iter()
        .map(|c| (c.instance_id.clone(), c))
        .collect();
    let environments: Vec<EnvironmentRecord> = cx
        .input_rows::<EnvironmentRecord>(NodeKind::Launch)?
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.status == "built" && candidates.contains_key(&e.instance_id))
        .collect();
    let mut table = cx.table::<ValidationRecord>()?;
    let items: Vec<String> = environments.iter().map(|e| e.instance_id.clone()).collect();
    let (todo, skipped) = plan(cx, &mut table, items.clone())?;
    started(cx, items.len(), skipped);
    let runtime = if todo.is_empty() {
        None
    } else {
        Some(cx.runtime()?)
    };
    let removals = kiln_core::Removals::default();
    let mut requests = BTreeMap::new();
    for environment in environments {
        let id = environment.instance_id.clone();
        if !todo.contains(&id) {
            continue;
        }
        let Some(candidate) = candidates.get(&id) else {
            continue;
        };
        let (log_dir, log_dir_label) = cx.log_dir(&id)?;
        requests.insert(
            id,
            kiln_validate::ValidateRequest {
                candidate: candidate.clone(),
                environment,
                log_dir,
                log_dir_label,
                labels: cx.labels(),
                settings: settings.clone(),
                docker: cx.pipeline.docker.clone(),
                stage: cx.node.name.clone(),
                removals: removals.clone(),
            },
        );
    }
    let requests = Arc::new(requests);
    let reporter = Arc::clone(&cx.reporter);
    let concurrency = cx
        .options
        .concurrency
        .unwrap_or(usize::try_from(settings.concurrency).unwrap_or(1));
    let processed = match runtime {
        None => Ok(0),
        Some(runtime) => {
            for_each_item(
                cx,
                &mut table,
                todo,
                concurrency,
                |id| {
                    let runtime = Arc::clone(&runtime);
                    let reporter = Arc::clone(&reporter);
                    let requests = Arc::clone(&requests);
                    async move {
                        let Some(request) = requests.get(&id) else {
                            return Err(PipelineError::Internal(format!("no request for {id}")));
                        };
                        kiln_validate::validate(runtime, request, reporter.as_ref())
                            .await
                            .map_err(|kiln_validate::ValidateError::Engine(e)| {
                                PipelineError::Engine(e)
                            })
                    }
                },
                validation_outcome,
            )
            .await
        }
    };
    wait_for_removals(cx, &removals).await;
    let processed = processed?;
    let items: BTreeSet<String> = items.into_iter().collect();
    finish(
        cx,
        &mut table,
        &items,
        processed,
        skipped,
        validation_outcome,
    )
}

pub(crate) fn export(cx: &StageContext<'_>) -> Result<StageOutcome, PipelineError> {
    let NodeSettings::Export(settings) = &cx.node.settings else {
        return Err(PipelineError::Internal(
            "wrong settings for an export node".into(),
        ));
    };
    let candidates: BTreeMap<String, Candidate> = cx
        .candidates()?
        .into_iter()
        .map(|c| (c.instance_id.clone(), c))
        .collect();
    let environments: BTreeMap<String, EnvironmentRecord> = cx
        .input_rows::<EnvironmentRecord>(NodeKind::Launch)?
        .unwrap_or_default()
        .into_iter()
        .map(|e| (e.instance_id.clone(), e))
        .collect();
    let platforms: BTreeMap<String, String> = cx
        .input_rows::<PlatformLabel>(NodeKind::Split)?
        .unwrap_or_default()
        .into_iter()
        .map(|p| (p.instance_id, p.platform))
        .collect();
    let validations = cx
        .input_rows::<ValidationRecord>(NodeKind::Validate)?
        .unwrap_or_default();
    started(cx, validations.len(), 0);
    let mut rows: Vec<ReleaseInstance> = Vec::new();
    for validation in validations.into_iter().filter(|v| v.status == "validated") {
        let id = &validation.instance_id;
        let (Some(candidate), Some(environment)) = (candidates.get(id), environments.get(id))
        else {
            continue;
        };
        rows.push(ReleaseInstance {
            instance_id: id.clone(),
            repo: candidate.repo.clone(),
            pull_number: candidate.pull_number.map(|n| n.to_string()),
            base_commit: candidate.base_commit.clone(),
            patch: candidate.patch.clone(),
            test_patch: candidate.test_patch.clone(),
            problem_statement: candidate.problem_statement.clone(),
            hints_text: candidate.hints_text.clone(),
            created_at: candidate.created_at.clone(),
            version: candidate.version.clone(),
            FAIL_TO_PASS: validation.FAIL_TO_PASS.clone(),
            PASS_TO_PASS: validation.PASS_TO_PASS.clone(),
            image: environment.image.clone().unwrap_or_default(),
            setup_commands: environment.setup_commands.clone(),
            rebuild_commands: environment.rebuild_commands.clone(),
            test_command: environment.test_command.clone(),
            parser: environment.parser.clone(),
            language: environment.language.clone(),
            platform: platforms.get(id).cloned().unwrap_or_else(|| "linux".into()),
            dockerfile: environment.dockerfile.clone(),
            launch_seconds: environment.total_seconds,
            validate_seconds: validation.total_seconds,
            run_id: cx.run.run_id().to_string(),
        });
    }
    rows.sort_by(|a, b| a.instance_id.cmp(&b.instance_id));
    let tag = if settings.tag.is_empty() {
        release_month(cx.run.run_id())
    } else {
        settings.tag.clone()
    };
    let release_dir = cx
        .pipeline
        .dataset
        .root
        .join(&cx.pipeline.dataset.name)
        .join("releases")
        .join(&tag);
    let per_shard = usize::try_from(settings.rows_per_shard).unwrap_or(10_000);
    kiln_store::write_release(&release_dir, &settings.split, &rows, per_shard)?;
    let card = format!(
        "Task instances built and validated by kiln (run `{}`): each row is a repository at a base commit, \
         a gold patch, a test patch, and the tests that go from failing to passing (`FAIL_TO_PASS`) or stay \
         passing (`PASS_TO_PASS`) in the environment image named in `image`.\n",
        cx.run.run_id()
    );
    kiln_store::write_dataset_card(
        &release_dir,
        &cx.pipeline.dataset.name,
        &[(settings.split.clone(), rows.len())],
        &card,
    )?;
    let mut table = cx.table::<ReleaseInstance>()?;
    table.reset()?;
    if !rows.is_empty() {
        table.append(&rows)?;
    }
    let items: BTreeSet<String> = rows.iter().map(|r| r.instance_id.clone()).collect();
    let mut outcome = finish(cx, &mut table, &items, rows.len() as u64, 0, |r| {
        r.language.clone()
    })?;
    outcome.release_dir = Some(release_dir);
    Ok(outcome)
}

/// `YYYY-MM` of a run id (`YYYYMMDD-HHMMSS`).
fn release_month(run_id: &str) -> String {
    if run_id.len() >= 6 && run_id[..6].chars().all(|c| c.is_ascii_digit()) {
        format!("{}-{}", &run_id[..4], &run_id[4..6])
    } else {
        run_id.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_tags_are_valid_docker_references() {
        assert_eq!(
            image_tag("kiln-env", "Demo", "kiln-demo__calc-1"),
            "kiln-env/demo:kiln-demo__calc-1"
        );
        assert_eq!(
            image_tag("kiln-env", "d", "Owner__Repo-7"),
            "kiln-env/d:owner__repo-7"
        );
    }

    #[test]
    fn release_tag_is_the_run_month() {
        assert_eq!(release_month("20261202-154751"), "2026-12");
        assert_eq!(release_month("custom"), "custom");
    }
}
