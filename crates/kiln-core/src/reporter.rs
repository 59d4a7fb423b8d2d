//! Progress events. Libraries emit them; only the CLI draws them (progress bars, JSON lines).

/// What a stage or item is doing.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A stage starts; `total` items are to be processed, `done` were finished by an earlier try.
    StageStarted {
        /// Stage name.
        stage: String,
        /// Items to process in all.
        total: u64,
        /// Items already finished (resume).
        done: u64,
    },
    /// An item starts.
    ItemStarted {
        /// Stage name.
        stage: String,
        /// Instance id.
        item: String,
    },
    /// A step inside an item (a command, a run).
    ItemStep {
        /// Stage name.
        stage: String,
        /// Instance id.
        item: String,
        /// What it does now.
        step: String,
    },
    /// An item finished with an outcome (`built`, `failed: build`, `validated`, ...).
    ItemFinished {
        /// Stage name.
        stage: String,
        /// Instance id.
        item: String,
        /// Outcome, short.
        outcome: String,
        /// Wall seconds.
        seconds: f64,
    },
    /// A stage finished.
    StageFinished {
        /// Stage name.
        stage: String,
        /// Rows written by this stage in all.
        rows: u64,
        /// Wall seconds.
        seconds: f64,
    },
    /// Free-form information worth showing.
    Note {
        /// The message.
        message: String,
    },
}

/// Receives progress events. Implementations must be cheap and never block for long.
pub trait Reporter: Send + Sync {
    /// Handles one event.
    fn report(&self, event: Event);
}

/// A reporter that drops every event.
#[derive(Debug, Default, Clone, Copy)]
pub struct NullReporter;

impl Reporter for NullReporter {
    fn report(&self, _event: Event) {}
}
