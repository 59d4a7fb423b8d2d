//! Quality signals of an instance, each a pure function of what validation has at hand, for
//! the validation table, the release row and the Harbor task's metadata.
//!
//! - [`identical_runs`]: how many repeated runs of a side gave the statuses of its first run.
//! - [`solution_leak`]: whether the problem statement or the hints show the fix's code.
//! - [`DifficultyMeasures`]: a difficulty band from the gold patch's size and FAIL_TO_PASS.
//! - [`tests_collected`]: how many of the tests the test patch's files define (by the runner's
//!   [`Listing`] where it has one) the runs reported.

mod code;
mod collected;
mod difficulty;
mod leak;
mod listing;
mod patch;
mod runs;

pub use collected::{Collected, LISTED_MISSING, counted, tests_collected};
pub use difficulty::{BOUNDS, DifficultyMeasures, EASY_UP_TO, HARD_FROM};
pub use leak::{LONG_LINE_CHARS, MIN_LINE_CHARS, MIN_NAME_CHARS, SolutionLeak, solution_leak};
pub use listing::Listing;
pub use runs::identical_runs;
