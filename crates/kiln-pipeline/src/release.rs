//! A release on disk: `release.json`, written by the export last (after the shards and the
//! card), says what the release holds: its splits and their files with hashes, the rows left out
//! as already published, the frozen splits, the images the rows name, the run's funnel, and how
//! the rows were made. `kiln push` and `kiln report` read it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kiln_store::analytics::{Duplicate, SplitStats};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::error::PipelineError;
use crate::summary::Funnel;

/// The export stage's state entry naming the release directory it wrote.
pub const RELEASE_DIR_STATE: &str = "release_dir";

/// File name of a release's manifest.
pub const RELEASE_FILE: &str = "release.json";

/// The directory of a release that holds its Harbor tasks, one `<instance_id>/` each.
pub const HARBOR_DIR: &str = "harbor";

/// The releases the export stages of a run wrote, as their manifests say.
#[must_use]
pub fn run_releases(
    pipeline: &kiln_core::config::Pipeline,
    run: &kiln_store::RunStore,
) -> Vec<PathBuf> {
    crate::status::stage_manifests(pipeline, run)
        .into_iter()
        .filter_map(|(_, manifest)| manifest)
        .filter_map(|m| {
            m.state
                .get(RELEASE_DIR_STATE)
                .and_then(|v| v.as_str())
                .map(PathBuf::from)
        })
        .collect()
}

/// Where the frozen split definitions of a dataset live: `<root>/<dataset>/frozen/`.
#[must_use]
pub fn frozen_dir(dataset_dir: &Path) -> PathBuf {
    dataset_dir.join("frozen")
}

/// One file of a release.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReleaseFile {
    /// Path relative to the release directory (`data/test-00000-of-00001.parquet`).
    pub path: String,
    /// Size in bytes.
    pub bytes: u64,
    /// SHA-256 of the contents, hex.
    pub sha256: String,
}

impl ReleaseFile {
    /// Describes the file at `release_dir/path`.
    ///
    /// # Errors
    /// When the file cannot be read.
    pub fn read(release_dir: &Path, path: &str) -> Result<Self, PipelineError> {
        let full = release_dir.join(path);
        let bytes = std::fs::read(&full).map_err(|e| PipelineError::Input {
            what: full.display().to_string(),
            message: e.to_string(),
        })?;
        Ok(Self {
            path: path.to_string(),
            bytes: bytes.len() as u64,
            sha256: kiln_core::config::hex(&Sha256::digest(&bytes)),
        })
    }
}

/// One split of a release.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReleaseSplit {
    /// Rows.
    pub rows: usize,
    /// Shards, in order.
    pub files: Vec<ReleaseFile>,
    /// What the split holds (polars over the shards).
    pub stats: SplitStats,
}

/// A frozen split as this release holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FrozenRecord {
    /// How it is chosen, in words (`sample of 50, seed 7, drawn in 2024-09`, `ids from
    /// verified.txt`).
    pub choice: String,
    /// Its instance ids, in order; empty until drawn.
    pub instance_ids: Vec<String>,
    /// Ids the list names that no release has published yet.
    pub not_published: Vec<String>,
}

/// `release.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReleaseManifest {
    /// Dataset name.
    pub dataset: String,
    /// Release tag (its directory name; `YYYY-MM` for monthly releases).
    pub tag: String,
    /// kiln's version.
    pub kiln_version: String,
    /// Schema version of the rows.
    pub schema_version: u32,
    /// The run that made the rows of the main split.
    pub run_id: String,
    /// Hash of that run's config.
    pub config_hash: String,
    /// When the export wrote the release (RFC 3339).
    pub exported_at: String,
    /// The release's own split (new instances); the others are frozen.
    pub main_split: String,
    /// Every split, by name.
    pub splits: BTreeMap<String, ReleaseSplit>,
    /// Frozen splits, by name.
    pub frozen: BTreeMap<String, FrozenRecord>,
    /// Validated instances left out because an earlier release (or this one) has them.
    pub duplicates: Vec<Duplicate>,
    /// The environment images the rows name, sorted.
    pub images: Vec<String>,
    /// Registry the images are published to, when the config names one.
    pub image_registry: Option<String>,
    /// The card's licence id (empty: none given).
    pub license: String,
    /// The run's funnel.
    pub funnel: Funnel,
    /// Other files of the release (card, LM answers), with hashes.
    pub files: Vec<ReleaseFile>,
    /// The Harbor tasks written beside the shards (`formats` lists `harbor`); absent
    /// otherwise. `kiln push --harbor` sends them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harbor: Option<HarborTasks>,
}

/// The Harbor task directories of a release, `harbor/<instance_id>/`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HarborTasks {
    /// The instances that are tasks, in order.
    pub tasks: Vec<String>,
    /// Rows of the release that are not, with the reason.
    pub left_out: BTreeMap<String, String>,
    /// Every file of every task, with its size and hash.
    pub files: Vec<ReleaseFile>,
}

impl ReleaseManifest {
    /// Reads `release.json` of the release at `dir`.
    ///
    /// # Errors
    /// When it is missing or malformed.
    pub fn read(dir: &Path) -> Result<Self, PipelineError> {
        let path = dir.join(RELEASE_FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| PipelineError::Input {
            what: format!(
                "{} (a release directory holds one; export writes it)",
                path.display()
            ),
            message: e.to_string(),
        })?;
        serde_json::from_str(&text).map_err(|e| PipelineError::Input {
            what: path.display().to_string(),
            message: e.to_string(),
        })
    }

    /// The files of the release's Harbor tasks (none when it has none).
    #[must_use]
    pub fn harbor_files(&self) -> Vec<&ReleaseFile> {
        self.harbor.iter().flat_map(|h| h.files.iter()).collect()
    }

    /// Every file of the release, shards first, `release.json` not included.
    #[must_use]
    pub fn all_files(&self) -> Vec<&ReleaseFile> {
        self.splits
            .values()
            .flat_map(|s| s.files.iter())
            .chain(self.files.iter())
            .collect()
    }
}
