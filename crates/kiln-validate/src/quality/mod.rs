//! Quality signals of an instance, each a pure function of what validation has at hand, for
//! the validation table, the release row and the Harbor task's metadata.
//!
//! - [`identical_runs`]: how many repeated runs of a side gave the statuses of its first run.

mod runs;

pub use runs::identical_runs;
