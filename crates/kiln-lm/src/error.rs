//! The crate's error type.

use std::path::{Path, PathBuf};

/// Errors of this crate: only the run's answer files can stop a stage; an endpoint that fails
/// is a fallback recorded in the row. Messages read well after "failed to".
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or directory of the answer store.
    #[error("{action} {}: {source}", path.display())]
    Io {
        /// What was being done (`read`, `write`, ...).
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// A stored answer or ledger that is not valid JSON.
    #[error("parse {}: {source}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
}

impl Error {
    pub(crate) fn io(action: &'static str, path: &Path, source: std::io::Error) -> Self {
        Self::Io {
            action,
            path: path.to_path_buf(),
            source,
        }
    }
}
