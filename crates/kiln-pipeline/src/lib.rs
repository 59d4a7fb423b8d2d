//! Runs the DAG: opens or resumes a run, executes stages in order, bounds concurrency, and
//! writes each finished item as soon as it finishes so that a crash loses at most the items in
//! flight.
//!
//! Stage crates never see each other: this crate reads a stage's inputs from the run store,
//! calls the stage crate for each item, and appends the rows it returns.

pub mod demo;
pub mod evaluate;
pub mod publish;
pub mod release;
pub mod report;
mod stages;
pub mod summary;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use kiln_core::config::{NodeSettings, Pipeline};
use kiln_core::runtime::LABEL_DATASET;
use kiln_core::{ContainerRuntime, Event, LanguageModel, Reporter, RuntimeError};
use kiln_store::{DatasetLock, Manifest, RunLock, RunStore, Status, StoreError};

pub use kiln_lm::Spent;
pub use stages::StageOutcome;
pub use summary::{InstanceState, InstanceSummary, instance_summaries};

/// Errors that stop a stage or a run (a failing repository is a row, never one of these).
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// The run store failed (disk full, permissions, corrupt manifest).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The container engine failed or cannot be reached. The items in flight are left
    /// undone (never written as rows), so a re-run retries them.
    #[error(transparent)]
    Engine(#[from] RuntimeError),
    /// The host could not hold a stage's work (a full or read-only disk outside the run
    /// store, such as the mirror cache or a temporary checkout).
    #[error("{what}: {message}")]
    Host {
        /// What kiln was doing, as a verb phrase.
        what: String,
        /// The error.
        message: String,
    },
    /// An input file (task file, CA bundle, release, predictions) could not be read.
    #[error("read {what}: {message}")]
    Input {
        /// Which file, in words.
        what: String,
        /// What went wrong.
        message: String,
    },
    /// No stage of that name is declared.
    #[error("find stage `{name}`; the config declares: {known}")]
    UnknownStage {
        /// The name asked for.
        name: String,
        /// Declared names.
        known: String,
    },
    /// A stage needs its inputs to have run first.
    #[error(
        "run stage `{stage}`: its input `{input}` has no rows yet; run `kiln run` or `kiln stage {input}` first"
    )]
    MissingInput {
        /// The stage.
        stage: String,
        /// The input without rows.
        input: String,
    },
    /// No run exists yet.
    #[error("find a run of dataset `{0}`; start one with `kiln run`")]
    NoRun(String),
    /// A stage needs a container engine but none was given.
    #[error("run stage `{0}`: it needs a Docker engine")]
    NoEngine(String),
    /// A stage's judge is `lm` but no language model was given.
    #[error("run stage `{0}`: its judge is \"lm\" but no LM client was set up")]
    NoLanguageModel(String),
    /// The run's LM answers or spending could not be read or written.
    #[error(transparent)]
    Answers(#[from] kiln_lm::Error),
    /// A push to the Hugging Face Hub or an image registry failed.
    #[error("publish the release: {0}")]
    Publish(String),
    /// The LM client could not be set up.
    #[error(transparent)]
    LmSetup(#[from] kiln_core::LmError),
    /// A broken promise inside kiln (a worker task panicked, settings of the wrong kind).
    #[error("finish: an internal error (a bug in kiln): {0}")]
    Internal(String),
}

/// Which run to work on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunSelection {
    /// The latest run if it is incomplete and made with the same config, else a new one.
    ResumeOrNew,
    /// Always a new run.
    New,
    /// The latest run, which must exist.
    Latest,
    /// A run by id.
    Id(String),
}

/// Per-invocation options (runtime knobs, not config).
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Only these instance ids.
    pub only: Option<BTreeSet<String>>,
    /// Redo items that already have rows (with `only`: just those; without: the whole stage).
    pub force: bool,
    /// Override the concurrency of launch and validate.
    pub concurrency: Option<usize>,
    /// Let an export replace a release of its tag with this run's rows alone. By default the
    /// release keeps the rows of earlier runs that this run did not make: a run that lost
    /// instances to an outage must not shrink a published release, and a second refresh of a
    /// month adds to its release.
    pub allow_fewer_rows: bool,
    /// Values for the environment variables a config names (`token_env`), used before the
    /// process environment: a program embedding kiln (or the demo) hands tokens over without
    /// putting them in the environment.
    pub secrets: Secrets,
}

/// Named secrets ([`RunOptions::secrets`]); their values never appear in `Debug` output.
#[derive(Clone, Default)]
pub struct Secrets(BTreeMap<String, String>);

impl Secrets {
    /// Sets the value of variable `name`.
    pub fn insert(&mut self, name: &str, value: &str) {
        self.0.insert(name.to_string(), value.to_string());
    }

    /// The value of `name`: the one set here, else the process environment's (empty counts as
    /// unset).
    #[must_use]
    pub fn get(&self, name: &str) -> Option<String> {
        self.0
            .get(name)
            .cloned()
            .or_else(|| std::env::var(name).ok())
            .filter(|v| !v.trim().is_empty())
    }
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.keys().map(|k| format!("{k}=<redacted>")))
            .finish()
    }
}

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
        let latest = kiln_store::latest(&root, &name)?;
        let run = match (selection, latest) {
            (RunSelection::Id(id), _) => RunStore::open(&root, &name, id)?,
            (RunSelection::Latest, Some(id)) => RunStore::open(&root, &name, &id)?,
            (RunSelection::Latest, None) => return Err(PipelineError::NoRun(name)),
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
                    RunStore::create(&root, &name, None, &pipeline.text, &pipeline.hash)?
                }
            }
            (RunSelection::ResumeOrNew | RunSelection::New, _) => {
                RunStore::create(&root, &name, None, &pipeline.text, &pipeline.hash)?
            }
        };
        let lock = run.lock()?;
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
        let names: Vec<String> = self.pipeline.nodes.iter().map(|n| n.name.clone()).collect();
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
        let outcome = self.stage(name, options).await?;
        // A single-stage re-run can leave the run incomplete again (e.g. `--force` reopened it).
        let all_complete = self
            .stage_manifests()
            .iter()
            .all(|(_, m)| m.as_ref().is_some_and(|m| m.status == Status::Complete));
        self.run.set_status(if all_complete {
            Status::Complete
        } else {
            Status::Incomplete
        })?;
        Ok(outcome)
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

/// The label value that marks the containers and images of the pipeline's dataset (see
/// [`Runner::dataset_label`]).
#[must_use]
pub fn dataset_label(pipeline: &Pipeline) -> String {
    let dir = pipeline.dataset.root.join(&pipeline.dataset.name);
    std::path::absolute(&dir)
        .unwrap_or(dir)
        .to_string_lossy()
        .into_owned()
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
