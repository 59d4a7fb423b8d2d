//! The runner: opens or resumes a run, runs its stages in order, and closes it.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use kiln_core::config::{NodeKind, NodeSettings, Pipeline};
use kiln_core::runtime::LABEL_DATASET;
use kiln_core::{ContainerRuntime, Event, LanguageModel, Reporter};
use kiln_store::{DatasetLock, Manifest, RunLock, RunStore, Status};

use crate::error::PipelineError;
use crate::labels::dataset_label;
use crate::options::{RunOptions, RunSelection, Secrets};
use crate::stages::{self, StageOutcome};
use crate::status::stage_manifests;

/// An opened run, locked for this process: its dataset's lock is held while the runner lives.
pub struct Runner {
    pipeline: Pipeline,
    run: RunStore,
    reporter: Arc<dyn Reporter>,
    runtime: Option<Arc<dyn ContainerRuntime>>,
    lm: Option<Arc<dyn LanguageModel>>,
    _lock: RunLock,
    _dataset_lock: DatasetLock,
}

impl Runner {
    /// Takes the dataset's lock, then opens (or creates) a run of the pipeline's dataset and
    /// takes its lock. The dataset lock comes first, so that two invocations started at the
    /// same instant cannot both choose to create a run; it is held until the runner is dropped.
    ///
    /// # Errors
    /// When the run store cannot be read or written, the dataset is locked by a live process,
    /// or no run exists for [`RunSelection::Latest`].
    pub fn open(
        pipeline: Pipeline,
        selection: &RunSelection,
        reporter: Arc<dyn Reporter>,
        runtime: Option<Arc<dyn ContainerRuntime>>,
    ) -> Result<Self, PipelineError> {
        let root = pipeline.dataset.root.clone();
        let name = pipeline.dataset.name.clone();
        let dataset_lock = DatasetLock::acquire(&root, &name)?;
        // What a process killed while it created a run left is no run: it goes before the
        // latest run is chosen, so that a resume finds the one run there is.
        kiln_store::remove_unfinished(&root, &name)?;
        let latest = kiln_store::latest(&root, &name)?;
        let run = match (selection, latest) {
            (RunSelection::Id(id), _) => RunStore::open(&root, &name, id)?,
            (RunSelection::Latest, Some(id)) => RunStore::open(&root, &name, &id)?,
            (RunSelection::Latest, None) => {
                return Err(PipelineError::NoRun {
                    dataset: name,
                    root: kiln_store::runs_dir(&root, &pipeline.dataset.name),
                });
            }
            (RunSelection::ResumeOrNew, Some(id)) => {
                let run = RunStore::open(&root, &name, &id)?;
                if run.info().status == Status::Incomplete
                    && run.info().config_hash == pipeline.hash
                {
                    reporter.report(Event::Note {
                        message: format!("resuming run {id}"),
                    });
                    run
                } else {
                    check_merged(&pipeline)?;
                    RunStore::create(&root, &name, None, &pipeline.text, &pipeline.hash)?
                }
            }
            (RunSelection::ResumeOrNew, None) => {
                check_merged(&pipeline)?;
                RunStore::create(&root, &name, None, &pipeline.text, &pipeline.hash)?
            }
            (RunSelection::New, _) => {
                RunStore::create(&root, &name, None, &pipeline.text, &pipeline.hash)?
            }
        };
        let lock = run.lock()?;
        let mut run = run;
        if let Some(shard) = &pipeline.shard
            && run.info().shard.is_none()
        {
            run.set_shard(kiln_store::RunShard {
                index: shard.id.index,
                count: shard.id.count,
            })?;
        }
        Ok(Self {
            pipeline,
            run,
            reporter,
            runtime,
            lm: None,
            _lock: lock,
            _dataset_lock: dataset_lock,
        })
    }

    /// Gives the stages whose judge is `lm` the model to ask (the CLI builds
    /// `kiln_lm::OpenAiClient` from `[lm]`; tests may give any implementation).
    #[must_use]
    pub fn with_language_model(mut self, lm: Arc<dyn LanguageModel>) -> Self {
        self.lm = Some(lm);
        self
    }

    /// The run directory.
    #[must_use]
    pub fn run_dir(&self) -> PathBuf {
        self.run.dir().to_path_buf()
    }

    /// The run id.
    #[must_use]
    pub fn run_id(&self) -> &str {
        self.run.run_id()
    }

    /// The label value that marks this run's containers (`<dataset>/<run-id>`).
    #[must_use]
    pub fn run_label(&self) -> String {
        format!("{}/{}", self.pipeline.dataset.name, self.run.run_id())
    }

    /// The label value that marks the containers and images of this dataset: its directory,
    /// absolute, so that datasets of one name under different roots stay apart.
    #[must_use]
    pub fn dataset_label(&self) -> String {
        dataset_label(&self.pipeline)
    }

    /// Removes what dead processes of this dataset left behind: containers of any of its runs
    /// (killed, or from a run that the next invocation did not resume), untagged images (an
    /// instance committed again, its old image's tag moved on) and scratch images. Only this
    /// process can own the dataset's containers now (it holds the dataset lock), so all of
    /// them are leftovers. Returns how many containers and images were removed.
    ///
    /// # Errors
    /// When the engine fails.
    pub async fn remove_leftovers(&self) -> Result<(usize, usize), PipelineError> {
        match &self.runtime {
            Some(runtime) => {
                let label = self.dataset_label();
                let containers = runtime.remove_labelled(LABEL_DATASET, &label).await?;
                let images = runtime
                    .remove_leftover_images(LABEL_DATASET, &label)
                    .await?;
                if containers + images > 0 {
                    self.reporter.report(Event::Note {
                        message: format!(
                            "removed {containers} container(s) and {images} image(s) left by earlier runs"
                        ),
                    });
                }
                Ok((containers, images))
            }
            None => Ok((0, 0)),
        }
    }

    /// Runs every stage in order; marks the run complete when every stage is.
    ///
    /// # Errors
    /// The first stage-stopping error.
    pub async fn run_all(
        &mut self,
        options: &RunOptions,
    ) -> Result<Vec<StageOutcome>, PipelineError> {
        self.remove_leftovers().await?;
        let names: Vec<String> = self
            .stages_to_run()
            .into_iter()
            .map(|n| n.name.clone())
            .collect();
        let mut outcomes = Vec::new();
        for name in names {
            outcomes.push(self.stage(&name, options).await?);
        }
        if outcomes.iter().all(|o| o.complete) {
            self.run.set_status(Status::Complete)?;
        }
        Ok(outcomes)
    }

    /// Runs one stage, reading its inputs from the run store.
    ///
    /// # Errors
    /// Unknown stage, missing inputs, store or engine failures.
    pub async fn run_stage(
        &mut self,
        name: &str,
        options: &RunOptions,
    ) -> Result<StageOutcome, PipelineError> {
        self.remove_leftovers().await?;
        // Until the stage has finished, the run is not complete: a stage interrupted here (a
        // kill, an engine gone, `--force` having dropped rows) leaves the run for the next
        // `kiln run` to resume, not to start over.
        let before = self.run.info().status;
        self.run.set_status(Status::Incomplete)?;
        let outcome = match self.stage(name, options).await {
            Ok(outcome) => outcome,
            // Refused before it touched anything: the run is as it was.
            Err(
                e @ (PipelineError::UnknownStage { .. }
                | PipelineError::UnknownItems { .. }
                | PipelineError::MissingInput { .. }),
            ) => {
                self.run.set_status(before)?;
                return Err(e);
            }
            Err(e) => return Err(e),
        };
        // A single-stage re-run can leave the run incomplete again (e.g. `--force` reopened it).
        let ours: BTreeSet<String> = self
            .stages_to_run()
            .into_iter()
            .map(|n| n.name.clone())
            .collect();
        let all_complete = self
            .stage_manifests()
            .iter()
            .filter(|(name, _)| ours.contains(name))
            .all(|(_, m)| m.as_ref().is_some_and(|m| m.status == Status::Complete));
        self.run.set_status(if all_complete {
            Status::Complete
        } else {
            Status::Incomplete
        })?;
        Ok(outcome)
    }

    /// The stages this run does: every one, except that a shard leaves export to the run
    /// `kiln merge` makes of all the shards.
    fn stages_to_run(&self) -> Vec<&kiln_core::config::Node> {
        self.pipeline
            .nodes
            .iter()
            .filter(|n| self.pipeline.shard.is_none() || n.kind != NodeKind::Export)
            .collect()
    }

    async fn stage(
        &mut self,
        name: &str,
        options: &RunOptions,
    ) -> Result<StageOutcome, PipelineError> {
        let Some(node) = self.pipeline.node(name).cloned() else {
            return Err(PipelineError::UnknownStage {
                name: name.to_string(),
                known: self
                    .pipeline
                    .nodes
                    .iter()
                    .map(|n| n.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        };
        if let Some(shard) = &self.pipeline.shard
            && node.kind == NodeKind::Export
        {
            return Err(PipelineError::Input {
                what: format!("the stages of shard {}", shard.id),
                message: format!(
                    "`{name}` exports a release, which a shard does not: export the run `kiln \
                     merge --shards {}` makes of all the shards",
                    shard.id.count
                ),
            });
        }
        let started = Instant::now();
        let cx = stages::StageContext {
            pipeline: &self.pipeline,
            run: &self.run,
            node: &node,
            reporter: Arc::clone(&self.reporter),
            runtime: self.runtime.clone(),
            lm: self.lm.clone(),
            options,
            run_label: self.run_label(),
            started,
        };
        // An id `--only` names that the run does not hold would make the stage do nothing and
        // succeed; a typo must say so.
        if let (Some(only), Some(source)) = (&options.only, self.pipeline.source_of(&node)) {
            let candidates = cx.candidates()?;
            let held: BTreeSet<&kiln_schema::InstanceId> =
                candidates.iter().map(|c| &c.instance_id).collect();
            let unknown: Vec<String> = only
                .iter()
                .filter(|id| !held.contains(id))
                .map(ToString::to_string)
                .collect();
            if !unknown.is_empty() {
                return Err(PipelineError::UnknownItems {
                    known: only.len() - unknown.len(),
                    unknown,
                    source_stage: source.name.clone(),
                    candidates: candidates.len(),
                });
            }
        }
        let outcome = match &node.settings {
            NodeSettings::Ingest(settings) => stages::ingest(&cx, settings)?,
            NodeSettings::Crawl(settings) => stages::crawl(&cx, settings).await?,
            NodeSettings::Filter(settings) => stages::filter(&cx, settings).await?,
            NodeSettings::Split(settings) => stages::split(&cx, settings).await?,
            NodeSettings::Launch(settings) => stages::launch(&cx, settings).await?,
            NodeSettings::Validate(settings) => stages::validate(&cx, settings).await?,
            NodeSettings::Export(settings) => stages::export(&cx, settings).await?,
        };
        self.reporter.report(Event::StageFinished {
            stage: name.to_string(),
            rows: outcome.rows,
            seconds: started.elapsed().as_secs_f64(),
        });
        Ok(outcome)
    }

    /// The manifest of every stage of this run (`None` where the stage has not started).
    #[must_use]
    pub fn stage_manifests(&self) -> Vec<(String, Option<Manifest>)> {
        stage_manifests(&self.pipeline, &self.run)
    }

    /// The pipeline.
    #[must_use]
    pub fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }
}

/// Refuses a new unsharded run while shards of a split run of the same config wait for
/// `kiln merge` ([`crate::ops::merge::unmerged_shards`]): such a run would launch and validate
/// every item the shards did, again, on one machine (as after a merge killed before it
/// published its run). `kiln run --new` asks for that run all the same.
fn check_merged(pipeline: &Pipeline) -> Result<(), PipelineError> {
    if pipeline.shard.is_some() {
        return Ok(());
    }
    let unmerged = crate::ops::merge::unmerged_shards(pipeline)?;
    let Some((first, _)) = unmerged.first() else {
        return Ok(());
    };
    Err(PipelineError::Unmerged {
        dataset: pipeline.dataset.name.clone(),
        count: first.count,
        shards: unmerged
            .iter()
            .map(|(shard, run)| format!("shard {shard} (run {run})"))
            .collect(),
    })
}

/// The LM client the pipeline's stages need (all of them, or only `stage`), built from `[lm]`
/// with the key of the variable `api_key_env` names, taken from `secrets` (which fall back to
/// the process environment); `None` when none of the stages asks.
///
/// # Errors
/// When the client cannot be set up (no trusted root certificates for an `https` endpoint).
pub fn language_model(
    pipeline: &Pipeline,
    stage: Option<&str>,
    secrets: &Secrets,
) -> Result<Option<Arc<dyn LanguageModel>>, PipelineError> {
    let needed = pipeline
        .nodes
        .iter()
        .filter(|n| stage.is_none_or(|s| n.name == s))
        .any(kiln_core::config::Node::uses_lm);
    match &pipeline.lm {
        Some(lm) if needed => Ok(Some(Arc::new(kiln_lm::OpenAiClient::with_api_key(
            lm,
            secrets.get(&lm.api_key_env),
        )?))),
        _ => Ok(None),
    }
}
