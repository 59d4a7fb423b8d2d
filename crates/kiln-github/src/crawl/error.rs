//! Why a crawl could not go on.

/// Why a crawl (or one repository of it) could not go on.
#[derive(Debug, thiserror::Error)]
pub enum CrawlError {
    /// No token to authenticate with.
    #[error("find a GitHub token: none of the variables named in `token_env` is set")]
    NoToken,
    /// GitHub answered 401 for a token.
    #[error("use the GitHub token in ${env}: GitHub rejected it ({message})")]
    TokenRejected {
        /// The environment variable holding the token.
        env: String,
        /// GitHub's message.
        message: String,
    },
    /// Connection failures or timeouts that outlasted the retries.
    #[error("reach GitHub: {0}")]
    Transport(String),
    /// An error status that is not retried, or that outlasted the retries.
    #[error("get an answer from GitHub (HTTP {status}): {message}")]
    Http {
        /// The status.
        status: u16,
        /// GitHub's message.
        message: String,
    },
    /// The GraphQL answer carried errors.
    #[error("run a GitHub query: {0}")]
    GraphQl(String),
    /// A repository (or object) does not exist or is not visible to the token.
    #[error("find {0}")]
    NotFound(String),
    /// An answer did not have the expected shape.
    #[error("read GitHub's answer to {what}: {message}")]
    Answer {
        /// Which request.
        what: String,
        /// What was wrong.
        message: String,
    },
    /// An answer kiln will not take: a body past the size cap, a wait past the ceiling.
    #[error("accept GitHub's answer: {0}")]
    Refused(String),
    /// A paged listing went past its budget of pages, entries or bytes
    /// (`ListingBudget`).
    #[error("page through {what}: it goes past its budget of {budget} (at page {page})")]
    OverBudget {
        /// The listing, as a noun phrase.
        what: String,
        /// The budget it went past: `100 pages`, `10000 entries`, `256 MiB of answers`.
        budget: String,
        /// The page being read when it did.
        page: u64,
    },
    /// The client could not be set up from the settings.
    #[error("set up the GitHub client: {0}")]
    Config(String),
    /// The repository mirror could not be cloned or fetched.
    #[error(transparent)]
    Git(#[from] kiln_git::GitError),
}

impl CrawlError {
    /// Whether the error stops the whole crawl (no token works), rather than one repository.
    #[must_use]
    pub fn is_fatal(&self) -> bool {
        matches!(
            self,
            Self::NoToken | Self::TokenRejected { .. } | Self::Config(_) | Self::Refused(_)
        )
    }
}
