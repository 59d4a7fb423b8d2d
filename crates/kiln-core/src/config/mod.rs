//! The pipeline config (`pipeline.toml`) and its compiler.
//!
//! Compiling happens before anything runs, in two passes like vector's topology: the raw TOML is
//! walked key by key into typed settings, and then the graph is checked (inputs exist, kinds fit,
//! no cycles). Every error of both passes is collected and reported at once, each with the file,
//! line, column and dotted key it concerns. Unknown keys are errors: a typo must not be silence.
//!
//! The modules form layers, and none imports one that imports it back: `read` (the key readers,
//! the error and requirement types) at the bottom imports no other; `units`, `hash` and each
//! table's compiler (`dataset`, `docker`, `lm`, `sources`, `stages`, each owning its keys) sit
//! above it; `node` and `pipeline` hold the compiled types; `compile`, the dispatcher, is on
//! top. This module only declares them and re-exports the public items.

mod compile;
mod dataset;
mod docker;
pub(crate) mod hash;
mod lm;
mod node;
mod pipeline;
mod read;
mod shard;
mod sources;
mod stages;
mod units;

pub use dataset::{DatasetSettings, is_dataset_name};
pub use docker::{DockerSettings, is_image_prefix};
pub use hash::{hex, hex_sha256};
pub use lm::{LmSettings, Price};
pub use node::{Node, NodeKind, NodeSettings};
pub use pipeline::Pipeline;
pub use read::{ConfigError, ConfigErrors, Need, Requirement};
pub use shard::{
    MAX_SHARDS, SHARD_COUNT_ENV, Shard, ShardId, repository_shard, shard_root, shard_set_dir,
};
pub use sources::{CrawlSettings, DiscoverSettings, IngestSettings, format_time};
pub use stages::{
    AgentSettings, ExportFormat, ExportSettings, FilterSettings, FrozenChoice, FrozenSplit,
    LaunchSettings, SplitSettings, TestNetwork, ValidateSettings,
};
pub use units::{MAX_DURATION, MAX_MEMORY_BYTES, MIN_MEMORY_BYTES, parse_duration, parse_size};
