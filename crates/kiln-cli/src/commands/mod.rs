//! One module per subcommand: each takes its arguments, calls the libraries and prints.

pub mod check;
pub mod check_images;
pub mod demo;
pub mod deploy;
pub mod evaluate;
pub mod gc;
pub mod merge;
pub mod parse;
pub mod push;
pub mod recipes;
pub mod repairs;
pub mod report;
pub mod run;
pub mod status;

use std::path::PathBuf;
use std::sync::Arc;

use kiln_core::Reporter;

/// What every command gets besides its own arguments.
pub struct Context {
    /// The pipeline config file (`--config`).
    pub config: PathBuf,
    /// `--json`: data as JSON on stdout.
    pub json: bool,
    /// Where progress goes.
    pub reporter: Arc<dyn Reporter>,
}
