//! [`HubError`], the one error of the crate.

use std::path::PathBuf;

/// Errors talking to the Hub; messages read after "failed to".
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    /// The HTTP client could not be set up.
    #[error("set up the Hub client: {0}")]
    Setup(String),
    /// The Hub answered with an error status.
    #[error("{what}: the Hub answered {status}: {message}")]
    Status {
        /// What kiln asked, as a verb phrase.
        what: String,
        /// HTTP status.
        status: u16,
        /// The body of the answer, cut.
        message: String,
    },
    /// The Hub could not be reached, or the connection broke.
    #[error("{what}: {message}")]
    Transport {
        /// What kiln asked.
        what: String,
        /// The error with its causes.
        message: String,
    },
    /// The Hub answered something its API does not document.
    #[error("{what}: the answer is not what the Hub's API documents: {message}")]
    Protocol {
        /// What kiln asked.
        what: String,
        /// What was wrong.
        message: String,
    },
    /// A listing went past what kiln reads of one listing across its pages
    /// ([`ListingBudget`](crate::ListingBudget)).
    #[error("{what}: the listing goes past its budget of {budget} (at page {page})")]
    OverBudget {
        /// The listing.
        what: String,
        /// The budget it went past: `500000 entries`, `256 MiB of answers`.
        budget: String,
        /// The page being read when it did.
        page: usize,
    },
    /// A local file could not be read.
    #[error("read {}: {message}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        message: String,
    },
}
