//! Run directories: `datasets/<dataset>/runs/<run-id>/`.

use std::collections::BTreeMap;
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use kiln_schema::{InstanceId, Row};
use serde::{Deserialize, Serialize};

use crate::atomic::write_atomic;
use crate::names::check_component;
use crate::stage::now_rfc3339;
use crate::{error::StoreError, lock::RunLock, stage::StageTable, stage::Status};

/// File name of the run description inside a run directory.
pub const RUN_FILE: &str = "run.json";

/// Contents of `run.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    /// The run id (`YYYYMMDD-HHMMSS`, UTC, with `-N` appended on collision).
    pub run_id: String,
    /// Dataset name.
    pub dataset: String,
    /// Hash of the configuration.
    pub config_hash: String,
    /// The configuration file as given (TOML text).
    pub config: String,
    /// Start time (RFC 3339, UTC).
    pub started_at: String,
    /// Whether every stage has finished.
    pub status: Status,
    /// The shard of a split run this run does (`kiln run --shard`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<RunShard>,
    /// The shard runs `kiln merge` joined into this run (their directories).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged_from: Vec<PathBuf>,
}

/// Which shard of a split run a run does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunShard {
    /// From 0.
    pub index: u32,
    /// How many shards.
    pub count: u32,
}

/// A run directory `<dataset_root>/<dataset>/runs/<run-id>/`.
#[derive(Debug, Clone)]
pub struct RunStore {
    dir: PathBuf,
    info: RunInfo,
}

/// The current UTC time as `YYYYMMDD-HHMMSS`, the form of run ids (also used to name
/// evaluation directories).
#[must_use]
pub fn time_id() -> String {
    chrono::Utc::now().format("%Y%m%d-%H%M%S").to_string()
}

/// The directory holding the runs of a dataset.
#[must_use]
pub fn runs_dir(dataset_root: &Path, dataset: &str) -> PathBuf {
    dataset_root.join(dataset).join("runs")
}

/// Sort key of a run id: the timestamp, then the numeric collision suffix.
fn run_sort_key(id: &str) -> (String, u64) {
    let base: String = id.chars().take(15).collect();
    let suffix = id
        .get(15..)
        .and_then(|s| s.strip_prefix('-'))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (base, suffix)
}

/// The ids of every run of `dataset` (directories holding a `run.json`), oldest first.
pub fn run_ids(dataset_root: &Path, dataset: &str) -> Result<Vec<String>, StoreError> {
    let dir = runs_dir(dataset_root, dataset);
    let entries = match fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(StoreError::io("list", &dir, e)),
    };
    let mut ids = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| StoreError::io("list", &dir, e))?;
        let Ok(id) = entry.file_name().into_string() else {
            continue;
        };
        if entry.path().join(RUN_FILE).is_file() {
            ids.push(id);
        }
    }
    ids.sort_by_key(|id| run_sort_key(id));
    Ok(ids)
}

/// The id of the most recent run of `dataset` (the greatest id among directories holding a
/// `run.json`), if any.
pub fn latest(dataset_root: &Path, dataset: &str) -> Result<Option<String>, StoreError> {
    Ok(run_ids(dataset_root, dataset)?.pop())
}

impl RunStore {
    /// Creates a new run directory and its `run.json` (status `incomplete`).
    ///
    /// With `run_id` `None`, the id is the current UTC time `YYYYMMDD-HHMMSS`, with `-2`, `-3`,
    /// ... appended if a run with that id exists; the directory creation itself claims the id,
    /// so concurrent creators get distinct ids. A given `run_id` that exists is an error.
    pub fn create(
        dataset_root: &Path,
        dataset: &str,
        run_id: Option<&str>,
        config_text: &str,
        config_hash: &str,
    ) -> Result<Self, StoreError> {
        check_component(dataset_root, "dataset name", dataset)?;
        let runs = runs_dir(dataset_root, dataset);
        fs::create_dir_all(&runs).map_err(|e| StoreError::io("create directory", &runs, e))?;
        let (run_id, dir) = match run_id {
            Some(id) => {
                check_component(&runs, "run id", id)?;
                let dir = runs.join(id);
                fs::create_dir(&dir)
                    .map_err(|e| StoreError::io("create run directory", &dir, e))?;
                (id.to_string(), dir)
            }
            None => {
                let base = time_id();
                let mut n = 1u32;
                loop {
                    let id = if n == 1 {
                        base.clone()
                    } else {
                        format!("{base}-{n}")
                    };
                    let dir = runs.join(&id);
                    match fs::create_dir(&dir) {
                        Ok(()) => break (id, dir),
                        Err(e) if e.kind() == ErrorKind::AlreadyExists && n < 10_000 => n += 1,
                        Err(e) => return Err(StoreError::io("create run directory", &dir, e)),
                    }
                }
            }
        };
        let info = RunInfo {
            run_id,
            dataset: dataset.to_string(),
            config_hash: config_hash.to_string(),
            config: config_text.to_string(),
            started_at: now_rfc3339(),
            status: Status::Incomplete,
            shard: None,
            merged_from: Vec::new(),
        };
        let store = Self { dir, info };
        store.write_info()?;
        Ok(store)
    }

    /// Opens an existing run.
    pub fn open(dataset_root: &Path, dataset: &str, run_id: &str) -> Result<Self, StoreError> {
        check_component(dataset_root, "dataset name", dataset)?;
        let runs = runs_dir(dataset_root, dataset);
        check_component(&runs, "run id", run_id)?;
        Self::open_dir(&runs.join(run_id))
    }

    /// Opens the run in directory `dir`.
    pub fn open_dir(dir: &Path) -> Result<Self, StoreError> {
        let path = dir.join(RUN_FILE);
        let text = fs::read(&path).map_err(|e| StoreError::io("read", &path, e))?;
        let info =
            serde_json::from_slice(&text).map_err(|source| StoreError::Json { path, source })?;
        Ok(Self {
            dir: dir.to_path_buf(),
            info,
        })
    }

    fn write_info(&self) -> Result<(), StoreError> {
        let path = self.dir.join(RUN_FILE);
        let mut text =
            serde_json::to_vec_pretty(&self.info).map_err(|source| StoreError::Json {
                path: path.clone(),
                source,
            })?;
        text.push(b'\n');
        write_atomic(&path, &text)
    }

    /// The run directory.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The run id.
    #[must_use]
    pub fn run_id(&self) -> &str {
        &self.info.run_id
    }

    /// Contents of `run.json`.
    #[must_use]
    pub fn info(&self) -> &RunInfo {
        &self.info
    }

    /// Takes the run's [`RunLock`].
    pub fn lock(&self) -> Result<RunLock, StoreError> {
        RunLock::acquire(&self.dir)
    }

    /// Directory of a stage's table, `<run>/<stage>/` (not created).
    pub fn stage_dir(&self, stage: &str) -> Result<PathBuf, StoreError> {
        check_component(&self.dir, "stage name", stage)?;
        if stage == "logs" {
            return Err(StoreError::invalid(
                &self.dir,
                "stage name \"logs\" is reserved",
            ));
        }
        Ok(self.dir.join(stage))
    }

    /// Directory of the raw logs of one item in one stage, `<run>/logs/<stem>/<stage>/` (not
    /// created), where `<stem>` is the id's [`InstanceId::file_stem`]: the id itself when it is
    /// a plain lowercase name, and never the same for two ids.
    pub fn log_dir(&self, instance_id: &InstanceId, stage: &str) -> Result<PathBuf, StoreError> {
        let logs = self.dir.join("logs");
        check_component(&logs, "stage name", stage)?;
        Ok(logs.join(instance_id.file_stem()).join(stage))
    }

    /// Opens (creating if needed) the table of `stage`; see [`StageTable::open`]. Hold the run
    /// lock while writing to it.
    pub fn stage<R: Row>(
        &self,
        stage: &str,
        config_hash: &str,
        input_hashes: BTreeMap<String, String>,
    ) -> Result<StageTable<R>, StoreError> {
        StageTable::open(&self.stage_dir(stage)?, stage, config_hash, input_hashes)
    }

    /// Records in `run.json` the shard this run does.
    pub fn set_shard(&mut self, shard: RunShard) -> Result<(), StoreError> {
        self.info.shard = Some(shard);
        self.write_info()
    }

    /// Records in `run.json` the shard runs merged into this one.
    pub fn set_merged_from(&mut self, runs: Vec<PathBuf>) -> Result<(), StoreError> {
        self.info.merged_from = runs;
        self.write_info()
    }

    /// Sets the run's status in `run.json`.
    pub fn set_status(&mut self, status: Status) -> Result<(), StoreError> {
        self.info.status = status;
        self.write_info()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_sort_by_time_then_suffix() {
        let mut ids = vec![
            "20240102-000000",
            "20240101-120000-10",
            "20240101-120000",
            "20240101-120000-2",
            "20231231-235959-3",
        ];
        ids.sort_by_key(|id| run_sort_key(id));
        assert_eq!(
            ids,
            [
                "20231231-235959-3",
                "20240101-120000",
                "20240101-120000-2",
                "20240101-120000-10",
                "20240102-000000",
            ]
        );
    }
}
