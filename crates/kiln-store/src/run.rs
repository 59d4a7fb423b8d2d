//! Run directories: `datasets/<dataset>/runs/<run-id>/`.

use std::collections::BTreeMap;
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use kiln_schema::{InstanceId, Row};
use serde::{Deserialize, Serialize};

use crate::atomic::{sync_dir, write_atomic};
use crate::names::check_component;
use crate::stage::now_rfc3339;
use crate::{error::StoreError, lock::RunLock, stage::StageTable, stage::Status};

/// File name of the run description inside a run directory.
pub const RUN_FILE: &str = "run.json";

/// Prefix of the directories under `runs/` where a run is written before it exists as one
/// ([`RunStore::create_staged`]). A run id never starts with a dot, so [`run_ids`],
/// [`latest`] and everything that looks for runs through them pass a staged run by.
pub const STAGED_PREFIX: &str = ".staged-";

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

/// The ids of every run of `dataset` (directories holding a `run.json`), oldest first. Names
/// starting with a dot are not run ids: a staged run ([`STAGED_PREFIX`]) is no run until it is
/// published.
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
        if !id.starts_with('.') && entry.path().join(RUN_FILE).is_file() {
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

/// Claims a fresh run id under `runs` by creating its directory: the current UTC time
/// `YYYYMMDD-HHMMSS`, with `-2`, `-3`, ... appended if a run with that id exists. The
/// directory creation itself claims the id, so concurrent creators get distinct ids.
fn claim_id(runs: &Path) -> Result<(String, PathBuf), StoreError> {
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
            Ok(()) => return Ok((id, dir)),
            Err(e) if e.kind() == ErrorKind::AlreadyExists && n < 10_000 => n += 1,
            Err(e) => return Err(StoreError::io("create run directory", &dir, e)),
        }
    }
}

/// Removes what writers of `dataset`'s runs killed midway left, which no listing takes for a
/// run: staged runs ([`RunStore::create_staged`]) never published, and run directories claimed
/// (by [`RunStore::create`] or [`RunStore::publish`]) whose `run.json` was never written: empty,
/// or holding only the temporary file of a `run.json` not yet renamed into place. Call it
/// holding the dataset's [`crate::DatasetLock`], which every creator of a run holds while it
/// creates one: such a directory found then belongs to a dead process. Returns how many were
/// removed.
pub fn remove_unfinished(dataset_root: &Path, dataset: &str) -> Result<usize, StoreError> {
    check_component(dataset_root, "dataset name", dataset)?;
    let dir = runs_dir(dataset_root, dataset);
    let entries = match fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(StoreError::io("list", &dir, e)),
    };
    let mut removed = 0;
    for entry in entries {
        let entry = entry.map_err(|e| StoreError::io("list", &dir, e))?;
        let path = entry.path();
        let staged = entry
            .file_name()
            .to_string_lossy()
            .starts_with(STAGED_PREFIX);
        if !staged && !never_written(&path)? {
            continue;
        }
        tracing::info!(path = %path.display(), "removing a run a killed process left unfinished");
        fs::remove_dir_all(&path).map_err(|e| StoreError::io("remove", &path, e))?;
        removed += 1;
    }
    if removed > 0 {
        sync_dir(&dir)?;
    }
    Ok(removed)
}

/// Whether `path` is a run directory claimed and never written: a directory with no
/// `run.json`, holding nothing but temporary files of one.
fn never_written(path: &Path) -> Result<bool, StoreError> {
    if !path.is_dir() || path.join(RUN_FILE).exists() {
        return Ok(false);
    }
    let entries = fs::read_dir(path).map_err(|e| StoreError::io("list", path, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| StoreError::io("list", path, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !(crate::atomic::is_temp_name(&name) && name.starts_with(&format!(".{RUN_FILE}"))) {
            return Ok(false);
        }
    }
    Ok(true)
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
            None => claim_id(&runs)?,
        };
        Self::init(dir, run_id, dataset, config_text, config_hash)
    }

    /// Creates a staged run: a run written where nothing takes it for one until
    /// [`publish`](Self::publish) renames it into place under a fresh id, whole. Its directory
    /// is `runs/.staged-<time>-<pid>` (see [`STAGED_PREFIX`]), which [`run_ids`] and
    /// [`latest`] pass by; its `run_id` is that name until it is published.
    ///
    /// Write it holding the dataset's [`crate::DatasetLock`] (so that [`remove_unfinished`] takes
    /// a staged run it finds for a dead process's), and without its [`RunLock`]: nothing else
    /// can find it, and a lock file would be published with it.
    pub fn create_staged(
        dataset_root: &Path,
        dataset: &str,
        config_text: &str,
        config_hash: &str,
    ) -> Result<Self, StoreError> {
        check_component(dataset_root, "dataset name", dataset)?;
        let runs = runs_dir(dataset_root, dataset);
        fs::create_dir_all(&runs).map_err(|e| StoreError::io("create directory", &runs, e))?;
        let base = format!("{STAGED_PREFIX}{}-{}", time_id(), std::process::id());
        let mut n = 1u32;
        let (name, dir) = loop {
            let name = if n == 1 {
                base.clone()
            } else {
                format!("{base}-{n}")
            };
            let dir = runs.join(&name);
            match fs::create_dir(&dir) {
                Ok(()) => break (name, dir),
                Err(e) if e.kind() == ErrorKind::AlreadyExists && n < 10_000 => n += 1,
                Err(e) => return Err(StoreError::io("create run directory", &dir, e)),
            }
        };
        Self::init(dir, name, dataset, config_text, config_hash)
    }

    /// Publishes a staged run ([`create_staged`](Self::create_staged)): it becomes the run with
    /// a fresh id (as [`create`](Self::create) gives one) in one rename, so that a reader, or a
    /// process killed at any instant, sees no run or the whole one.
    ///
    /// The id is claimed by creating its (empty) directory, `run.json` in the staged directory
    /// is given the id, and the staged directory is renamed over the claimed one, which POSIX
    /// `rename` does atomically for an empty directory. A crash before the rename leaves the
    /// staged run (for [`remove_unfinished`]) and at most an empty directory, which is no run.
    ///
    /// # Errors
    /// When this run is not a staged one, or the file system fails.
    pub fn publish(mut self) -> Result<Self, StoreError> {
        let staged = self.dir.clone();
        let is_staged = staged
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with(STAGED_PREFIX));
        if !is_staged {
            return Err(StoreError::invalid(&staged, "not a staged run"));
        }
        let runs = crate::atomic::parent(&staged).to_path_buf();
        let (run_id, claimed) = claim_id(&runs)?;
        self.info.run_id.clone_from(&run_id);
        let renamed = self.write_info().and_then(|()| {
            crate::crash::before_write();
            fs::rename(&staged, &claimed)
                .map_err(|e| StoreError::io("publish the staged run as", &claimed, e))
        });
        if let Err(e) = renamed {
            let _ = fs::remove_dir(&claimed);
            return Err(e);
        }
        sync_dir(&runs)?;
        self.dir = claimed;
        Ok(self)
    }

    fn init(
        dir: PathBuf,
        run_id: String,
        dataset: &str,
        config_text: &str,
        config_hash: &str,
    ) -> Result<Self, StoreError> {
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
