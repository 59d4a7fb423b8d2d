//! What an environment did to the repository's checkout, read from the engine.
//!
//! The invariant it keeps: what the tests see of the repository is the commit, plus the test
//! patch (plus the gold patch); the environment adds dependencies, never judges. Every check
//! reads the container's files as the engine hands them out (its archive and its list of
//! changes), so no command run in the container, and no tool inside it, can change what kiln
//! sees:
//! - [`scan`]: the whole checkout, streamed, against the commit's tree: the tracked files that
//!   differ or are gone, and the untracked files the environment added (launch, before the
//!   environment image is committed);
//! - [`Watch`]: what one command changed (the launch agent's and a recipe's commands): the
//!   files the test patch touches, the checkout's test configuration and shared manifests, and
//!   the paths the engine reports as new;
//! - [`check_run`]: a validation run's container after its patches and rebuild commands,
//!   against the tree the patches left on the host.
//!
//! Whether a change matters to the tests is [`crate::judge`]'s answer.

mod scan;
mod tree;
mod watch;

pub use scan::{Refusal, Scan, is_added_test_configuration, judge_scan, scan};
pub use tree::{Found, Tracked, Tree, blob_oid, read};
pub use watch::{Expected, Observed, Watch, check_run};
