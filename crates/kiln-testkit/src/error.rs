//! The error of building fixtures.

use std::path::PathBuf;

/// Errors from building fixtures.
#[derive(Debug, thiserror::Error)]
pub enum TestkitError {
    /// A file or directory could not be written or read.
    #[error("read or write {}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying IO error.
        #[source]
        source: std::io::Error,
    },
    /// The target already exists; fixtures are never written over existing files.
    #[error("write {}: it already exists", path.display())]
    AlreadyExists {
        /// The existing path.
        path: PathBuf,
    },
    /// `git` could not be started (not installed, not on `PATH`).
    #[error("start git: {source}")]
    GitSpawn {
        /// The underlying IO error.
        #[source]
        source: std::io::Error,
    },
    /// A `git` command failed.
    #[error("run `git {args}` in {}: {stderr}", repo.display())]
    Git {
        /// The arguments passed to git.
        args: String,
        /// The repository it ran in.
        repo: PathBuf,
        /// What git printed on standard error.
        stderr: String,
    },
    /// A task row could not be serialized.
    #[error("serialize a task: {0}")]
    Json(#[from] serde_json::Error),
}
