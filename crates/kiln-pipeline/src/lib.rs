//! Runs the DAG: opens or resumes a run, executes stages in order, bounds concurrency, and
//! writes each finished item as soon as it finishes so that a crash loses at most the items in
//! flight.
//!
//! Stage crates never see each other: this crate reads a stage's inputs from the run store,
//! calls the stage crate for each item, and appends the rows it returns.

pub mod deploy;
pub mod error;
pub mod evaluate;
pub mod gc;
pub mod images;
mod labels;
pub mod merge;
pub mod options;
pub mod publish;
pub mod rebuild;
pub mod release;
pub mod report;
pub mod runner;
pub mod shards;
mod stages;
pub mod status;
pub mod summary;

pub use error::PipelineError;
pub use kiln_lm::Spent;
pub use labels::dataset_label;
pub use merge::{MergeOutcome, merge};
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
