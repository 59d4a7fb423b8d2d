//! Storage of kiln: crash-safe stage tables in Parquet, run directories and dataset releases.
//!
//! Layout on disk:
//!
//! ```text
//! datasets/<dataset>/dataset.lock          DatasetLock: held by the one process using the dataset
//! datasets/<dataset>/runs/.staged-<time>-<pid>/   RunStore::create_staged: a run being written, no run yet
//! datasets/<dataset>/runs/<run-id>/
//!     run.json                      RunStore: config snapshot and hash, start time, status
//!     run.lock                      RunLock: pid of the process writing the run
//!     <stage>/manifest.json         StageTable: schema version, hashes, status, parts, counts
//!     <stage>/part-NNNNN.parquet    StageTable: rows, one part per append
//!     logs/<instance_id>/<stage>/   raw logs (RunStore::log_dir)
//! datasets/<dataset>/releases/<YYYY-MM>/
//!     data/<split>-NNNNN-of-NNNNN.parquet   write_release
//!     README.md                             write_dataset_card
//! ```
//!
//! Rows are any [`kiln_schema::Row`]; their column list decides the Arrow schema
//! ([`arrow_schema`]). Strings are stored as plain `Utf8` so pyarrow and Hugging Face `datasets`
//! read and filter the files; nested values (`Json` columns) are stored as JSON text. Every
//! Parquet file carries [`kiln_schema::SCHEMA_VERSION`] and the table name in its key-value
//! metadata, and reading a file of another version fails with [`StoreError::SchemaVersion`].
//!
//! Crash safety: every file is written under a temporary name, fsynced and renamed
//! ([`write_atomic`]). A stage's `manifest.json` is its commit point: parts exist once listed, and
//! unlisted parts are crash leftovers, deleted by [`StageTable::open`]. A process may be killed
//! at any instant without losing a row whose [`StageTable::append`] returned, and without storing
//! a row twice. One process writes a run at a time, enforced by [`RunLock`].

pub mod analytics;
mod atomic;
mod convert;
mod crash;
mod error;
mod fixes;
mod foreign;
mod lock;
mod names;
mod release;
mod run;
mod stage;

pub use atomic::{recover_replaced, replace_dir, sync_dir, write_atomic};
pub use convert::{
    META_SCHEMA_VERSION, META_TABLE, arrow_schema, batch_to_rows, read_parquet, rows_to_batch,
    table_schema, write_parquet,
};
pub use crash::CRASH_AT_WRITE;
#[cfg(feature = "crash-points")]
pub use crash::writes;
pub use error::{ConvertError, StoreError};
pub use fixes::patch_fingerprint;
pub use foreign::read_parquet_objects;
pub use lock::{DATASET_LOCK_FILE, DatasetLock, LOCK_FILE, RunLock, process_alive};
pub use release::{CardMeta, release_split_rows, shard_name, write_dataset_card, write_release};
pub use run::{
    RUN_FILE, RunInfo, RunShard, RunStore, STAGED_PREFIX, latest, remove_unfinished, run_ids,
    runs_dir, time_id,
};
pub use stage::{MANIFEST, Manifest, StageTable, Status, read_keys, read_rows};
