//! The failures of a launch that stop the stage: the engine's and the host's, never the
//! repository's (those are rows).

use kiln_core::RuntimeError;

/// An infrastructure failure that stops the stage: it says nothing about the repository, so
/// it is never written as a row, and a re-run retries the item.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The engine went away or failed.
    #[error(transparent)]
    Engine(#[from] RuntimeError),
    /// A dependency step failed while the ecosystem's package registry did not answer from
    /// the container: an outage or a missing route, not the repository's fault.
    #[error("reach the package registry {url} from the container ({error})")]
    RegistryDown {
        /// The registry address asked.
        url: String,
        /// What the request reported.
        error: String,
    },
    /// The host could not hold the work (a full or read-only disk).
    #[error("{what}: {message}")]
    Host {
        /// What kiln was doing, as a verb phrase.
        what: String,
        /// The error.
        message: String,
    },
}

impl LaunchError {
    pub(crate) fn host(what: &str, message: impl std::fmt::Display) -> Self {
        Self::Host {
            what: what.to_string(),
            message: message.to_string(),
        }
    }
}
