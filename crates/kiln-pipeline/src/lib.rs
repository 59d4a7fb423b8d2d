//! The pipeline: the DAG and what operates on its runs and releases.
//!
//! The DAG (`runner`, `stages`): opens or resumes a run, executes its stages in order, bounds
//! concurrency, and writes each finished item as soon as it finishes, so that a crash loses at
//! most the items in flight. Stage crates never see each other: this crate reads a stage's
//! inputs from the run store, calls the stage crate for each item, and appends the rows it
//! returns. Beside it, what the DAG and the operations share: `options`, `error`, `shards` (a
//! split run's plan, which the source stages follow), `status` (what a run holds), `summary`
//! (each instance's state across the stages) and `release` (a release's manifest).
//!
//! The operations (`ops`), each behind a `kiln` command: `gc`, `deploy`, `publish` (`kiln
//! push`), `rebuild` (`kiln check-images --rebuild`), `report`, `merge`, `images` (`kiln
//! check-images`), `evaluate`.

pub mod error;
mod labels;
pub mod ops;
pub mod options;
pub mod release;
pub mod runner;
pub mod shards;
mod stages;
pub mod status;
pub mod summary;

pub use error::PipelineError;
pub use kiln_lm::Spent;
pub use labels::dataset_label;
pub use ops::merge::{MergeOutcome, merge};
pub use options::{RunOptions, RunSelection, Secrets};
pub use runner::{Runner, language_model};
pub use stages::StageOutcome;
pub use stages::export::release_dirs;
pub use stages::launch::recipes_dir;
pub use status::{
    RunStatus, ShardProgress, ShardSetStatus, StageStatus, counts_line, lm_spent, open_run,
    run_status, shard_statuses, spent_line, stage_manifests, stats_line,
};
pub use summary::{InstanceState, InstanceSummary, instance_summaries};
