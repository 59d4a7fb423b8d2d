//! The errors that stop a stage or a run.

use kiln_core::RuntimeError;
use kiln_store::StoreError;

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
    /// One item's dependency step failed while its package registry did not answer from the
    /// container. The item is deferred: [`for_each_item`](crate::stages) goes on with the
    /// others and then stops the stage with [`PipelineError::Deferred`].
    #[error(
        "build {item}: its package registry {url} does not answer from the container ({error})"
    )]
    RegistryDown {
        /// The item.
        item: String,
        /// The registry address asked.
        url: String,
        /// What the request reported.
        error: String,
    },
    /// A stage ran every item it could and deferred these, whose registries did not answer.
    #[error(
        "finish stage `{stage}`: {} item(s) were deferred, without rows, because a package registry did not answer from the containers ({}); once it answers, `kiln run` or `kiln stage {stage}` builds them: {}",
        items.len(), reasons.join("; "), items.join(", ")
    )]
    Deferred {
        /// The stage.
        stage: String,
        /// The deferred items.
        items: Vec<String>,
        /// Each registry that did not answer, with its error (once each).
        reasons: Vec<String>,
    },
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
    /// `--only` named instances the run does not hold.
    #[error(
        "find {} in the run: `{source_stage}` has no such candidate ({} of its {candidates} rows matched)",
        unknown.join(", "), known
    )]
    UnknownItems {
        /// The named ids the run does not hold.
        unknown: Vec<String>,
        /// The source stage whose rows were searched.
        source_stage: String,
        /// How many named ids it does hold.
        known: usize,
        /// How many candidates it holds.
        candidates: usize,
    },
    /// No run exists yet.
    #[error("find a run of dataset `{dataset}` under {}; start one with `kiln run`", root.display())]
    NoRun {
        /// The dataset's name.
        dataset: String,
        /// The directory runs were looked for in (`<root>/<dataset>/runs`).
        root: std::path::PathBuf,
    },
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
    /// `kiln merge` found shards it cannot join: each problem names its shard, run or item.
    #[error("merge the {count} shards: {}", problems.join("; "))]
    Merge {
        /// How many shards were to be merged.
        count: u32,
        /// Every problem found.
        problems: Vec<String>,
        /// Whether every problem is a shard still at work (or not started): waiting may end
        /// them, where another config, another plan or an item in two shards never ends.
        unfinished_only: bool,
    },
    /// A new run of every item would do again what the shards of a split run of this config
    /// hold: they wait for `kiln merge`, whose run `kiln run` then finishes.
    #[error(
        "start a run of dataset `{dataset}`: the shards of its split run of this config are not merged ({}); `kiln merge --shards {count}` joins them into the run `kiln run` then finishes, and `kiln run --new` does every item here instead",
        shards.join(", ")
    )]
    Unmerged {
        /// The dataset's name.
        dataset: String,
        /// How many shards the split has.
        count: u32,
        /// Each shard run no merged run holds, as `shard I/N (run ID)`.
        shards: Vec<String>,
    },
    /// A broken promise inside kiln (a worker task panicked, settings of the wrong kind).
    #[error("finish: an internal error (a bug in kiln): {0}")]
    Internal(String),
}
