//! The error type of every fallible operation in this crate.

use std::path::PathBuf;

/// A row could not be converted to or from Arrow. Wrapped in [`StoreError::Convert`] together
/// with the file it concerns.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    /// A row did not serialise to a JSON object.
    #[error("serialise a row of table {table} to a JSON object: {message}")]
    NotAnObject {
        /// Table name.
        table: &'static str,
        /// What went wrong.
        message: String,
    },
    /// A value did not fit its column type.
    #[error("store column {column} of row {key:?} in table {table}: {message}")]
    BadValue {
        /// Table name.
        table: &'static str,
        /// Key of the row (`instance_id`).
        key: String,
        /// Column name.
        column: &'static str,
        /// What was wrong with the value.
        message: String,
    },
    /// A column of the Arrow data is missing or has the wrong type.
    #[error("read column {column} of table {table}: {message}")]
    BadColumn {
        /// Table name.
        table: &'static str,
        /// Column name.
        column: String,
        /// What was wrong.
        message: String,
    },
    /// A row read back from Arrow did not deserialise into the row type.
    #[error("rebuild row {index} of table {table}: {message}")]
    BadRow {
        /// Table name.
        table: &'static str,
        /// Index of the row in its batch.
        index: usize,
        /// The serde error.
        message: String,
    },
    /// Arrow refused to build the batch.
    #[error("build a batch of table {table}: {source}")]
    Arrow {
        /// Table name.
        table: &'static str,
        /// The Arrow error.
        #[source]
        source: arrow::error::ArrowError,
    },
}

/// Error of a storage operation. Every variant names the file or directory concerned.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A filesystem operation failed.
    #[error("{op} {}: {source}", path.display())]
    Io {
        /// What was being done (`read`, `create`, `rename`, ...).
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A JSON file (manifest, `run.json`) could not be parsed or written.
    #[error("read or write the JSON file {}: {source}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },
    /// The Parquet library failed to read or write a file.
    #[error("read or write the Parquet file {}: {source}", path.display())]
    Parquet {
        /// The file.
        path: PathBuf,
        /// The Parquet error.
        #[source]
        source: parquet::errors::ParquetError,
    },
    /// Arrow failed on data of a file.
    #[error("convert the Arrow data of {}: {source}", path.display())]
    Arrow {
        /// The file.
        path: PathBuf,
        /// The Arrow error.
        #[source]
        source: arrow::error::ArrowError,
    },
    /// Rows could not be converted to or from Arrow.
    #[error("convert the rows of {}: {source}", path.display())]
    Convert {
        /// The file being written or read.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: ConvertError,
    },
    /// A file was written with another schema version than this build of kiln reads.
    #[error(
        "read {}: it has schema version {found}, this kiln reads version {expected}; re-run the stage that wrote it or use a matching kiln",
        path.display()
    )]
    SchemaVersion {
        /// The file.
        path: PathBuf,
        /// The version found in the file (`none` when the file carries no version).
        found: String,
        /// The version this build reads.
        expected: u32,
    },
    /// A file holds another table than the one asked for.
    #[error("read {}: it holds table {found:?}, expected {expected:?}", path.display())]
    TableMismatch {
        /// The file.
        path: PathBuf,
        /// Table found.
        found: String,
        /// Table expected.
        expected: String,
    },
    /// Another live process holds the run's or the dataset's lock.
    #[error("lock {}: process {pid} holds it; wait for it to finish or stop it", path.display())]
    Locked {
        /// The lock file.
        path: PathBuf,
        /// Process id of the holder.
        pid: u32,
    },
    /// Rows with a key already in the table were appended.
    #[error("append to {}: row key {key:?} is already in the table (remove it first)", path.display())]
    DuplicateKey {
        /// The stage directory.
        path: PathBuf,
        /// The duplicated key.
        key: String,
    },
    /// A stage table whose config or input hashes changed was written to before being reset.
    #[error(
        "write to {}: the stage's output is stale (config or inputs changed); reset it first",
        path.display()
    )]
    Stale {
        /// The stage directory.
        path: PathBuf,
    },
    /// Something else was wrong: a bad name, a malformed file, an existing run.
    #[error("use {}: {message}", path.display())]
    Invalid {
        /// The file or directory.
        path: PathBuf,
        /// What was wrong.
        message: String,
    },
}

impl StoreError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            op,
            path: path.into(),
            source,
        }
    }

    pub(crate) fn invalid(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Self::Invalid {
            path: path.into(),
            message: message.into(),
        }
    }

    /// Whether this is an IO error of kind `NotFound`.
    #[must_use]
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }
}
