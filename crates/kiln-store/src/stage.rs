//! Stage tables: the crash-safe, append-only output of one pipeline stage.
//!
//! A stage table is a directory `<run>/<stage>/` with a `manifest.json` and Parquet parts
//! `part-NNNNN.parquet`. The manifest is the commit point: a part exists for readers only once
//! the manifest lists it, every file is written to a temporary name, fsynced and renamed, and
//! files not listed in the manifest are leftovers of a crash, deleted when the table is next
//! opened for writing.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use arrow::array::{BooleanArray, RecordBatch};
use kiln_schema::{Row, SCHEMA_VERSION};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::atomic::{is_temp_name, sync_dir, write_atomic};
use crate::convert::{read_batch, rows_to_batch, table_schema, write_batches};
use crate::{convert::batch_to_rows, error::StoreError};

/// File name of a stage manifest.
pub const MANIFEST: &str = "manifest.json";

/// Whether a stage (or run) has finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Work remains; a new process resumes it.
    Incomplete,
    /// Every item has a row.
    Complete,
}

/// Contents of `<stage>/manifest.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`SCHEMA_VERSION`] of the parts.
    pub schema_version: u32,
    /// Table name of the rows ([`Row::TABLE`]).
    pub table: String,
    /// Stage name (the directory name).
    pub stage: String,
    /// Whether the stage has finished.
    pub status: Status,
    /// Hash of the stage's configuration.
    pub config_hash: String,
    /// Content hash ([`StageTable::hash`]) of each input stage, by stage name.
    pub input_hashes: BTreeMap<String, String>,
    /// Part files holding the rows, in order.
    pub parts: Vec<String>,
    /// Number of rows in all parts.
    pub rows: u64,
    /// Free-form counters set by the stage (`kept`, `failed:build`, ...).
    pub counts: BTreeMap<String, u64>,
    /// Content hash of the rows, cached when the stage is marked complete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_hash: Option<String>,
    /// Figures the stage measured (`requests.graphql`, `cost_usd`, ...), set by
    /// [`StageTable::set_stats`].
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub stats: BTreeMap<String, f64>,
    /// A stage's own resumption state (a crawl's cursor per repository), committed together with
    /// the rows it belongs to by [`StageTable::append_with_state`].
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub state: BTreeMap<String, serde_json::Value>,
    /// Last change of the manifest (RFC 3339, UTC).
    pub updated_at: String,
}

impl Manifest {
    /// Reads and parses `<dir>/manifest.json`.
    pub fn read(dir: &Path) -> Result<Self, StoreError> {
        let path = dir.join(MANIFEST);
        let text = fs::read(&path).map_err(|e| StoreError::io("read", &path, e))?;
        serde_json::from_slice(&text).map_err(|source| StoreError::Json { path, source })
    }

    fn write(&mut self, dir: &Path) -> Result<(), StoreError> {
        self.updated_at = now_rfc3339();
        let path = dir.join(MANIFEST);
        let mut text = serde_json::to_vec_pretty(self).map_err(|source| StoreError::Json {
            path: path.clone(),
            source,
        })?;
        text.push(b'\n');
        write_atomic(&path, &text)
    }

    /// Checks that the manifest's schema version and table match `R`.
    fn check<R: Row>(&self, dir: &Path) -> Result<(), StoreError> {
        let path = dir.join(MANIFEST);
        if self.schema_version != SCHEMA_VERSION {
            return Err(StoreError::SchemaVersion {
                path,
                found: self.schema_version.to_string(),
                expected: SCHEMA_VERSION,
            });
        }
        if self.table != R::TABLE {
            return Err(StoreError::TableMismatch {
                path,
                found: self.table.clone(),
                expected: R::TABLE.to_string(),
            });
        }
        Ok(())
    }
}

pub(crate) fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Sets entries of a stage state; `null` removes one.
fn apply_state(
    target: &mut BTreeMap<String, serde_json::Value>,
    updates: BTreeMap<String, serde_json::Value>,
) {
    for (key, value) in updates {
        if value.is_null() {
            target.remove(&key);
        } else {
            target.insert(key, value);
        }
    }
}

/// Name of part number `n`.
fn part_name(n: u32) -> String {
    format!("part-{n:05}.parquet")
}

/// Number of a part file name, if it is one.
fn part_number(name: &str) -> Option<u32> {
    let digits = name.strip_prefix("part-")?.strip_suffix(".parquet")?;
    if digits.len() >= 5 && digits.bytes().all(|b| b.is_ascii_digit()) {
        digits.parse().ok()
    } else {
        None
    }
}

/// Reads the rows of all parts listed in `manifest`.
fn read_listed<R: Row>(dir: &Path, manifest: &Manifest) -> Result<Vec<R>, StoreError> {
    manifest.check::<R>(dir)?;
    let mut rows = Vec::with_capacity(usize::try_from(manifest.rows).unwrap_or(0));
    for part in &manifest.parts {
        let path = dir.join(part);
        let batch = read_batch(&path, R::TABLE)?;
        rows.extend(
            batch_to_rows::<R>(&batch).map_err(|source| StoreError::Convert { path, source })?,
        );
    }
    Ok(rows)
}

/// Reads every row of the stage table in `dir`, without writing anything.
///
/// Safe to call while another process appends: the manifest is read first and lists only
/// complete parts. If a listed part vanishes because the writer just rewrote it, the manifest is
/// read again.
pub fn read_rows<R: Row>(dir: &Path) -> Result<Vec<R>, StoreError> {
    let mut attempts = 0;
    loop {
        let manifest = Manifest::read(dir)?;
        match read_listed::<R>(dir, &manifest) {
            Err(e) if e.is_not_found() && attempts < 3 => attempts += 1,
            other => return other,
        }
    }
}

/// The keys (`instance_id`) of every row of the stage table in `dir`, reading only that column,
/// without writing anything.
pub fn read_keys(dir: &Path) -> Result<Vec<String>, StoreError> {
    let manifest = Manifest::read(dir)?;
    let mut keys = Vec::with_capacity(usize::try_from(manifest.rows).unwrap_or(0));
    for part in &manifest.parts {
        let path = dir.join(part);
        let batch =
            crate::convert::read_batch_columns(&path, &manifest.table, Some(&["instance_id"]))?;
        let column = batch
            .column_by_name("instance_id")
            .and_then(|c| c.as_any().downcast_ref::<arrow::array::StringArray>())
            .ok_or_else(|| StoreError::invalid(path.clone(), "no instance_id column of strings"))?;
        keys.extend(column.iter().flatten().map(str::to_string));
    }
    Ok(keys)
}

/// Content hash of rows: SHA-256 over the schema version, the table name and the JSON of every
/// row, sorted by key. It does not depend on how rows are split into parts.
fn content_hash<R: Row>(rows: &[R]) -> Result<String, serde_json::Error> {
    let mut lines = Vec::with_capacity(rows.len());
    for row in rows {
        lines.push((row.key().to_string(), serde_json::to_string(row)?));
    }
    lines.sort();
    let mut hasher = Sha256::new();
    hasher.update(format!("kiln-stage-v{SCHEMA_VERSION}\n{}\n", R::TABLE));
    for (_, line) in &lines {
        hasher.update(line.as_bytes());
        hasher.update(b"\n");
    }
    Ok(format!("{:x}", hasher.finalize()))
}

/// The output table of one stage of a run, open for writing.
///
/// Only one process may write a stage table at a time; hold the run's
/// [`RunLock`](crate::lock::RunLock) while a `StageTable` is open. Readers in other processes use
/// [`read_rows`].
///
/// Guarantees, for a process that may be killed at any instant:
/// - a row whose [`append`](Self::append) returned is never lost;
/// - no key is ever stored twice (appending an existing key is an error);
/// - a part listed in the manifest is complete; unlisted parts and temporary files are deleted
///   by [`open`](Self::open).
#[derive(Debug)]
pub struct StageTable<R: Row> {
    dir: PathBuf,
    manifest: Manifest,
    stale: bool,
    config_hash: String,
    input_hashes: BTreeMap<String, String>,
    next_part: u32,
    /// Key -> part holding it (empty while stale).
    index: BTreeMap<String, String>,
    _row: PhantomData<fn() -> R>,
}

impl<R: Row> StageTable<R> {
    /// Opens the stage table in `dir` (the stage's directory, named `stage`), creating the
    /// directory and an empty `incomplete` manifest if absent.
    ///
    /// Deletes part files the manifest does not list and temporary files left by a crash, then
    /// reads every listed part once to index the stored keys (which also checks that they are
    /// readable).
    /// If the existing manifest has another config hash, other input hashes, another schema
    /// version or another table, the table opens [stale](Self::is_stale): reading works only if
    /// the schema matches, writing fails until [`reset`](Self::reset).
    pub fn open(
        dir: &Path,
        stage: &str,
        config_hash: &str,
        input_hashes: BTreeMap<String, String>,
    ) -> Result<Self, StoreError> {
        fs::create_dir_all(dir).map_err(|e| StoreError::io("create directory", dir, e))?;
        let manifest_path = dir.join(MANIFEST);
        let (manifest, fresh) = match Manifest::read(dir) {
            Ok(m) => (m, false),
            Err(e) if e.is_not_found() => (
                Self::empty_manifest(stage, config_hash, &input_hashes),
                true,
            ),
            Err(e) => return Err(e),
        };
        let stale = !fresh
            && (manifest.config_hash != config_hash
                || manifest.input_hashes != input_hashes
                || manifest.schema_version != SCHEMA_VERSION
                || manifest.table != R::TABLE);
        let mut table = Self {
            dir: dir.to_path_buf(),
            next_part: 0,
            manifest,
            stale,
            config_hash: config_hash.to_string(),
            input_hashes,
            index: BTreeMap::new(),
            _row: PhantomData,
        };
        table.remove_orphans()?;
        if !stale {
            table.index = table.load_index()?;
        }
        if fresh {
            table.manifest.write(dir)?;
        } else if table.manifest.stage != stage {
            return Err(StoreError::invalid(
                manifest_path,
                format!(
                    "manifest is for stage {:?}, opened as {stage:?}",
                    table.manifest.stage
                ),
            ));
        }
        table.next_part = table
            .manifest
            .parts
            .iter()
            .filter_map(|p| part_number(p))
            .max()
            .map_or(0, |n| n + 1);
        Ok(table)
    }

    fn empty_manifest(
        stage: &str,
        config_hash: &str,
        input_hashes: &BTreeMap<String, String>,
    ) -> Manifest {
        Manifest {
            schema_version: SCHEMA_VERSION,
            table: R::TABLE.to_string(),
            stage: stage.to_string(),
            status: Status::Incomplete,
            config_hash: config_hash.to_string(),
            input_hashes: input_hashes.clone(),
            parts: Vec::new(),
            rows: 0,
            counts: BTreeMap::new(),
            content_hash: None,
            stats: BTreeMap::new(),
            state: BTreeMap::new(),
            updated_at: now_rfc3339(),
        }
    }

    /// Deletes files in the directory that are not listed: crash leftovers.
    fn remove_orphans(&self) -> Result<(), StoreError> {
        let listed: BTreeSet<&str> = self.manifest.parts.iter().map(String::as_str).collect();
        let entries = fs::read_dir(&self.dir).map_err(|e| StoreError::io("list", &self.dir, e))?;
        let mut removed = false;
        for entry in entries {
            let entry = entry.map_err(|e| StoreError::io("list", &self.dir, e))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let orphan_part = part_number(name).is_some() && !listed.contains(name);
            if orphan_part || is_temp_name(name) {
                let path = entry.path();
                tracing::info!(path = %path.display(), "removing file left by an interrupted write");
                fs::remove_file(&path).map_err(|e| StoreError::io("remove", &path, e))?;
                removed = true;
            }
        }
        if removed {
            sync_dir(&self.dir)?;
        }
        Ok(())
    }

    /// The stage directory.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The current manifest.
    #[must_use]
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Whether the stored rows were made with another config, other inputs or another schema
    /// than the ones this table was opened with.
    #[must_use]
    pub fn is_stale(&self) -> bool {
        self.stale
    }

    /// Whether the manifest says `complete` (and the table is not stale).
    #[must_use]
    pub fn is_complete(&self) -> bool {
        !self.stale && self.manifest.status == Status::Complete
    }

    fn ensure_fresh(&self) -> Result<(), StoreError> {
        if self.stale {
            Err(StoreError::Stale {
                path: self.dir.clone(),
            })
        } else {
            Ok(())
        }
    }

    /// Drops every row and starts over with the config and input hashes given to
    /// [`open`](Self::open); clears staleness. The manifest is switched first, then the old
    /// parts are deleted.
    pub fn reset(&mut self) -> Result<(), StoreError> {
        let stage = self.manifest.stage.clone();
        let old_parts = std::mem::take(&mut self.manifest.parts);
        self.manifest = Self::empty_manifest(&stage, &self.config_hash, &self.input_hashes);
        self.manifest.write(&self.dir)?;
        self.stale = false;
        self.index = BTreeMap::new();
        self.delete_parts(&old_parts)
    }

    /// Every row of every listed part, in append order.
    pub fn rows(&self) -> Result<Vec<R>, StoreError> {
        read_listed(&self.dir, &self.manifest)
    }

    /// Reads the key index (key -> part) from the listed parts.
    fn load_index(&self) -> Result<BTreeMap<String, String>, StoreError> {
        self.manifest.check::<R>(&self.dir)?;
        let mut index = BTreeMap::new();
        for part in &self.manifest.parts {
            let path = self.dir.join(part);
            let batch = read_batch(&path, R::TABLE)?;
            let rows = batch_to_rows::<R>(&batch)
                .map_err(|source| StoreError::Convert { path, source })?;
            for row in rows {
                index.insert(row.key().to_string(), part.clone());
            }
        }
        Ok(index)
    }

    /// Keys of the rows stored (the items this stage has finished).
    pub fn keys(&self) -> Result<BTreeSet<String>, StoreError> {
        if self.stale {
            return Ok(self.load_index()?.into_keys().collect());
        }
        Ok(self.index.keys().cloned().collect())
    }

    /// Whether a row with this key is stored.
    pub fn contains(&self, key: &str) -> Result<bool, StoreError> {
        if self.stale {
            return Ok(self.load_index()?.contains_key(key));
        }
        Ok(self.index.contains_key(key))
    }

    fn take_part_name(&mut self) -> String {
        let name = part_name(self.next_part);
        self.next_part += 1;
        name
    }

    /// Appends rows as a new part. When this returns, the rows are durable.
    ///
    /// Fails without writing anything if a key is already stored or repeated within `rows`, or
    /// if the table is stale. The stage goes back to `incomplete`. Appending no rows does
    /// nothing.
    pub fn append(&mut self, rows: &[R]) -> Result<(), StoreError> {
        self.append_with_state(rows, BTreeMap::new())
    }

    /// [`append`](Self::append), and in the same manifest commit, sets the given entries of the
    /// stage's [state](Manifest::state) (a `null` value removes an entry). After a crash either
    /// both the rows and the state are there, or neither is. With no rows, only the state is
    /// written (if it changes anything).
    pub fn append_with_state(
        &mut self,
        rows: &[R],
        state: BTreeMap<String, serde_json::Value>,
    ) -> Result<(), StoreError> {
        self.ensure_fresh()?;
        if rows.is_empty() {
            let mut manifest = self.manifest.clone();
            apply_state(&mut manifest.state, state);
            if manifest.state != self.manifest.state {
                self.commit(manifest)?;
            }
            return Ok(());
        }
        let mut new_keys = BTreeSet::new();
        for row in rows {
            let key = row.key();
            if self.index.contains_key(key) || !new_keys.insert(key.to_string()) {
                return Err(StoreError::DuplicateKey {
                    path: self.dir.clone(),
                    key: key.to_string(),
                });
            }
        }
        let name = self.take_part_name();
        let path = self.dir.join(&name);
        let batch = rows_to_batch(rows).map_err(|source| StoreError::Convert {
            path: path.clone(),
            source,
        })?;
        write_batches(&path, R::TABLE, batch.schema(), &[batch])?;
        let mut manifest = self.manifest.clone();
        apply_state(&mut manifest.state, state);
        manifest.parts.push(name.clone());
        manifest.rows += rows.len() as u64;
        manifest.status = Status::Incomplete;
        manifest.content_hash = None;
        self.commit(manifest)?;
        for key in new_keys {
            self.index.insert(key, name.clone());
        }
        Ok(())
    }

    /// Writes `manifest` as the new commit point and adopts it. On failure, the in-memory
    /// manifest is unchanged.
    fn commit(&mut self, mut manifest: Manifest) -> Result<(), StoreError> {
        manifest.write(&self.dir)?;
        self.manifest = manifest;
        Ok(())
    }

    /// Deletes part files that the manifest no longer lists.
    fn delete_parts(&self, parts: &[String]) -> Result<(), StoreError> {
        for part in parts {
            if self.manifest.parts.contains(part) {
                continue;
            }
            let path = self.dir.join(part);
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(StoreError::io("remove", &path, e)),
            }
        }
        sync_dir(&self.dir)
    }

    /// Removes the rows with these keys, so that their items are redone. Returns how many rows
    /// were removed.
    ///
    /// Only parts holding one of the keys are rewritten, under new names, keeping the other rows'
    /// values exactly; then the manifest is switched and the old parts deleted. The stage goes
    /// back to `incomplete` if anything was removed.
    pub fn remove_keys(&mut self, keys: &BTreeSet<String>) -> Result<usize, StoreError> {
        self.ensure_fresh()?;
        let affected: BTreeSet<String> = keys
            .iter()
            .filter_map(|k| self.index.get(k).cloned())
            .collect();
        if affected.is_empty() {
            return Ok(0);
        }
        let mut manifest = self.manifest.clone();
        let mut removed = 0usize;
        let mut replaced: Vec<String> = Vec::new();
        let mut moved: Vec<(String, String)> = Vec::new();
        for slot in &mut manifest.parts {
            if !affected.contains(slot) {
                continue;
            }
            let old = slot.clone();
            let path = self.dir.join(&old);
            let batch = read_batch(&path, R::TABLE)?;
            let rows = batch_to_rows::<R>(&batch).map_err(|source| StoreError::Convert {
                path: path.clone(),
                source,
            })?;
            let keep: BooleanArray = rows.iter().map(|r| Some(!keys.contains(r.key()))).collect();
            let kept = arrow::compute::filter_record_batch(&batch, &keep)
                .map_err(|source| StoreError::Arrow { path, source })?;
            removed += batch.num_rows() - kept.num_rows();
            replaced.push(old.clone());
            if kept.num_rows() == 0 {
                slot.clear();
                continue;
            }
            let name = part_name(self.next_part);
            self.next_part += 1;
            write_batches(&self.dir.join(&name), R::TABLE, kept.schema(), &[kept])?;
            for row in rows.iter().filter(|r| !keys.contains(r.key())) {
                moved.push((row.key().to_string(), name.clone()));
            }
            *slot = name;
        }
        manifest.parts.retain(|p| !p.is_empty());
        manifest.rows = manifest.rows.saturating_sub(removed as u64);
        manifest.status = Status::Incomplete;
        manifest.content_hash = None;
        self.commit(manifest)?;
        for key in keys {
            self.index.remove(key);
        }
        self.index.extend(moved);
        self.delete_parts(&replaced)?;
        Ok(removed)
    }

    /// Marks the stage complete or incomplete and replaces its counters. Marking it complete
    /// also caches the content hash in the manifest.
    pub fn set_complete(
        &mut self,
        complete: bool,
        counts: BTreeMap<String, u64>,
    ) -> Result<(), StoreError> {
        self.ensure_fresh()?;
        let mut manifest = self.manifest.clone();
        manifest.status = if complete {
            Status::Complete
        } else {
            Status::Incomplete
        };
        manifest.counts = counts;
        manifest.content_hash = if complete {
            Some(self.compute_hash()?)
        } else {
            None
        };
        self.commit(manifest)
    }

    /// Replaces the stage's measured figures ([`Manifest::stats`]).
    pub fn set_stats(&mut self, stats: BTreeMap<String, f64>) -> Result<(), StoreError> {
        self.ensure_fresh()?;
        let mut manifest = self.manifest.clone();
        manifest.stats = stats;
        self.commit(manifest)
    }

    /// The stage's resumption state ([`Manifest::state`]).
    #[must_use]
    pub fn state(&self) -> &BTreeMap<String, serde_json::Value> {
        &self.manifest.state
    }

    fn compute_hash(&self) -> Result<String, StoreError> {
        let rows = self.rows()?;
        content_hash(&rows).map_err(|source| StoreError::Json {
            path: self.dir.clone(),
            source,
        })
    }

    /// Content hash of the stored rows, for downstream stages' `input_hashes`.
    ///
    /// It depends on the rows only (sorted by key), not on how they are split into parts, so
    /// [`compact`](Self::compact) does not change it. Cached in the manifest once the stage is
    /// complete; otherwise computed by reading every part.
    pub fn hash(&self) -> Result<String, StoreError> {
        match &self.manifest.content_hash {
            Some(hash) if !self.stale => Ok(hash.clone()),
            _ => self.compute_hash(),
        }
    }

    /// Merges all parts into one (appends write one part each, so a finished stage may have
    /// many small parts). Rows keep their order and values; the content hash is unchanged.
    /// Does nothing with fewer than two parts.
    pub fn compact(&mut self) -> Result<(), StoreError> {
        self.ensure_fresh()?;
        if self.manifest.parts.len() < 2 {
            return Ok(());
        }
        let mut batches: Vec<RecordBatch> = Vec::with_capacity(self.manifest.parts.len());
        for part in &self.manifest.parts {
            batches.push(read_batch(&self.dir.join(part), R::TABLE)?);
        }
        let name = self.take_part_name();
        let path = self.dir.join(&name);
        let schema = std::sync::Arc::new(table_schema::<R>());
        let merged = arrow::compute::concat_batches(&schema, &batches).map_err(|source| {
            StoreError::Arrow {
                path: path.clone(),
                source,
            }
        })?;
        write_batches(&path, R::TABLE, schema, &[merged])?;
        let mut manifest = self.manifest.clone();
        let old = std::mem::replace(&mut manifest.parts, vec![name.clone()]);
        self.commit(manifest)?;
        self.index.values_mut().for_each(|p| p.clone_from(&name));
        self.delete_parts(&old)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_names() {
        assert_eq!(part_name(7), "part-00007.parquet");
        assert_eq!(part_name(123_456), "part-123456.parquet");
        assert_eq!(part_number("part-00007.parquet"), Some(7));
        assert_eq!(part_number("part-123456.parquet"), Some(123_456));
        assert_eq!(part_number("part-7.parquet"), None);
        assert_eq!(part_number("part-0000x.parquet"), None);
        assert_eq!(part_number("manifest.json"), None);
        assert_eq!(part_number(".part-00001.parquet.tmp-1-0"), None);
    }

    #[test]
    fn content_hash_ignores_order() -> Result<(), serde_json::Error> {
        let row = |id: &str| kiln_schema::PlatformLabel {
            instance_id: kiln_schema::InstanceId::new(id).unwrap(),
            platform: "linux".into(),
            evidence: vec![],
            labeller: "keyword".into(),
            keyword_evidence: "none".into(),
            reason: None,
            raw_answer: None,
            answer_keys: vec![],
            fallback: None,
            prompt_tokens: None,
            completion_tokens: None,
            cost_usd: None,
        };
        let a = content_hash(&[row("a"), row("b")])?;
        let b = content_hash(&[row("b"), row("a")])?;
        let c = content_hash(&[row("a")])?;
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(a.len(), 64);
        Ok(())
    }

    #[test]
    fn status_serialises_lowercase() {
        assert_eq!(
            serde_json::to_string(&Status::Incomplete).ok().as_deref(),
            Some("\"incomplete\"")
        );
        assert_eq!(
            serde_json::to_string(&Status::Complete).ok().as_deref(),
            Some("\"complete\"")
        );
    }
}
