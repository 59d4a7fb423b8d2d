//! Analytics over releases, with polars: which rows of a new export were published already
//! (joins against the keys of every earlier release), and the statistics of a split that the
//! dataset card and the run report show (group-bys and distributions over the release shards).
//!
//! polars only reads here. The shards people download are written by arrow-rs
//! ([`crate::release::write_release`]): polars' eager Parquet writer stores strings as `string_view`, which
//! pyarrow cannot filter.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::path::{Path, PathBuf};

use kiln_schema::ReleaseInstance;
use polars::prelude::*;

use crate::error::StoreError;
use crate::fixes::{FixKey, fix_keys, published_fixes};
use crate::release::is_shard_of;

/// A polars failure while reading `path`.
fn polars_error(path: &Path, e: &PolarsError) -> StoreError {
    StoreError::invalid(path, format!("polars failed to read it: {e}"))
}

/// The shard files of `split` in the release at `release_dir`, in name order.
pub fn split_shards(release_dir: &Path, split: &str) -> Result<Vec<PathBuf>, StoreError> {
    let data = release_dir.join("data");
    let entries = match fs::read_dir(&data) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(StoreError::io("list", &data, e)),
    };
    let mut shards = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| StoreError::io("list", &data, e))?;
        if entry
            .file_name()
            .to_str()
            .is_some_and(|name| is_shard_of(name, split))
        {
            shards.push(entry.path());
        }
    }
    shards.sort();
    Ok(shards)
}

/// Release tags under `releases_dir` (directory names), sorted; monthly tags (`YYYY-MM`) sort
/// by time.
pub fn release_tags(releases_dir: &Path) -> Result<Vec<String>, StoreError> {
    let entries = match fs::read_dir(releases_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(StoreError::io("list", releases_dir, e)),
    };
    let mut tags = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| StoreError::io("list", releases_dir, e))?;
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if let (true, Some(name)) = (is_dir, entry.file_name().to_str())
            && !name.starts_with('.')
        {
            tags.push(name.to_string());
        }
    }
    tags.sort();
    Ok(tags)
}

/// Reads the named columns of every shard into one frame, with a `release` column holding
/// `tag`. Shards of any schema version are read (only these columns are needed).
fn read_columns(shards: &[PathBuf], columns: &[&str], tag: &str) -> Result<DataFrame, StoreError> {
    let mut out: Option<DataFrame> = None;
    for shard in shards {
        let file = File::open(shard).map_err(|e| StoreError::io("open", shard, e))?;
        let mut frame = ParquetReader::new(file)
            .with_columns(Some(columns.iter().map(|c| (*c).to_string()).collect()))
            .finish()
            .map_err(|e| polars_error(shard, &e))?;
        let height = frame.height();
        frame
            .with_column(Column::new("release".into(), vec![tag; height]))
            .map_err(|e| polars_error(shard, &e))?;
        out = Some(match out {
            None => frame,
            Some(mut all) => {
                all.vstack_mut(&frame)
                    .map_err(|e| polars_error(shard, &e))?;
                all
            }
        });
    }
    Ok(out.unwrap_or_else(|| empty_keys(columns)))
}

/// An empty frame of string columns `columns` plus `release`.
fn empty_keys(columns: &[&str]) -> DataFrame {
    let mut cols: Vec<Column> = columns
        .iter()
        .map(|c| Column::new_empty((*c).into(), &DataType::String))
        .collect();
    cols.push(Column::new_empty("release".into(), &DataType::String));
    DataFrame::new_infer_height(cols).unwrap_or_default()
}

const KEY_COLUMNS: [&str; 3] = ["instance_id", "repo", "pull_number"];

/// The keys (instance id, repository, pull request number) of the rows published in releases,
/// each with the tag of the release that holds it, and their fixes (repository, linked issue,
/// gold patch fingerprint) with the release and instance that hold each.
#[derive(Debug, Clone)]
pub struct Published {
    frame: DataFrame,
    fixes: std::collections::HashMap<FixKey, (String, String)>,
}

impl Published {
    /// The keys of split `split` of every release under `releases_dir` but `tag`: whichever
    /// release published an instance first, no other may publish it again (a month refreshed
    /// again after later months were released checks those too).
    ///
    /// # Errors
    /// When a release directory or shard cannot be read.
    pub fn except(releases_dir: &Path, tag: &str, split: &str) -> Result<Self, StoreError> {
        let mut frame = empty_keys(&KEY_COLUMNS);
        let mut fixes = std::collections::HashMap::new();
        for other in release_tags(releases_dir)?
            .iter()
            .filter(|t| t.as_str() != tag)
        {
            let shards = split_shards(&releases_dir.join(other), split)?;
            let keys = read_columns(&shards, &KEY_COLUMNS, other)?;
            frame
                .vstack_mut(&keys)
                .map_err(|e| polars_error(&releases_dir.join(other), &e))?;
            for (key, id) in published_fixes(&shards)? {
                fixes.entry(key).or_insert_with(|| (other.clone(), id));
            }
        }
        Ok(Self { frame, fixes })
    }

    /// Rows published.
    #[must_use]
    pub fn len(&self) -> usize {
        self.frame.height()
    }

    /// Whether nothing was published.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.frame.height() == 0
    }
}

/// Why a row of an export was left out.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Duplicate {
    /// The row's instance id.
    pub instance_id: String,
    /// `instance_id` (another release has the same id), `pull_request` (another release has
    /// the same repository and pull request under another id), `same-fix` (another release has
    /// a row of the same repository that links the same issue and whose gold patch has the
    /// same fingerprint: a backport), or `repeated` (this export has the id, the pull request
    /// or the fix twice; the first in id order is kept).
    pub key: String,
    /// The release holding the row it duplicates (this release's tag for `repeated`).
    pub release: String,
    /// The instance id of the row it duplicates.
    pub duplicates: String,
}

/// The result of [`dedupe`]: indices of the rows to keep, in their order, and the others.
#[derive(Debug, Clone, Default)]
pub struct Deduped {
    /// Indices into the rows given, ascending.
    pub keep: Vec<usize>,
    /// Rows left out, with the reason.
    pub duplicates: Vec<Duplicate>,
}

/// Leaves out the rows already published: by instance id, then by repository and pull request
/// number (a renamed repository or a second source naming the same pull request differently),
/// then the second of two rows of this export with one id or one pull request. `tag` names
/// this release in `repeated` records.
///
/// # Errors
/// When a polars join fails (a bug, not an input problem).
pub fn dedupe(
    rows: &[ReleaseInstance],
    published: &Published,
    tag: &str,
) -> Result<Deduped, StoreError> {
    let here = Path::new(tag);
    let index: Vec<u32> = (0..u32::try_from(rows.len()).unwrap_or(u32::MAX)).collect();
    let fresh = DataFrame::new_infer_height(vec![
        Column::new("row".into(), index),
        Column::new(
            "instance_id".into(),
            rows.iter()
                .map(|r| r.instance_id.as_str())
                .collect::<Vec<_>>(),
        ),
        Column::new(
            "repo".into(),
            rows.iter().map(|r| r.repo.as_str()).collect::<Vec<_>>(),
        ),
        Column::new(
            "pull_number".into(),
            rows.iter()
                .map(|r| r.pull_number.as_deref())
                .collect::<Vec<_>>(),
        ),
    ])
    .map_err(|e| polars_error(here, &e))?;
    let mut dropped: BTreeMap<usize, Duplicate> = BTreeMap::new();
    if !published.is_empty() {
        let by_id = fresh
            .join(
                &published.frame,
                ["instance_id"],
                ["instance_id"],
                JoinArgs::new(JoinType::Inner),
                None,
            )
            .map_err(|e| polars_error(here, &e))?;
        for (row, release, other) in triples(&by_id, "release", "instance_id")? {
            dropped.entry(row).or_insert(Duplicate {
                instance_id: rows[row].instance_id.to_string(),
                key: "instance_id".into(),
                release,
                duplicates: other,
            });
        }
        // Null pull numbers never match (polars joins do not equate nulls by default).
        let by_pull = fresh
            .join(
                &published.frame,
                ["repo", "pull_number"],
                ["repo", "pull_number"],
                JoinArgs::new(JoinType::Inner),
                None,
            )
            .map_err(|e| polars_error(here, &e))?;
        for (row, release, other) in triples(&by_pull, "release", "instance_id_right")? {
            dropped.entry(row).or_insert(Duplicate {
                instance_id: rows[row].instance_id.to_string(),
                key: "pull_request".into(),
                release,
                duplicates: other,
            });
        }
    }
    // The same fix as a published row: a backport published under another pull request.
    for (i, row) in rows.iter().enumerate() {
        if dropped.contains_key(&i) {
            continue;
        }
        let found = fix_keys(&row.repo, &row.issue_numbers, &row.patch)
            .iter()
            .find_map(|key| published.fixes.get(key).cloned());
        if let Some((release, other)) = found {
            dropped.insert(
                i,
                Duplicate {
                    instance_id: row.instance_id.to_string(),
                    key: "same-fix".into(),
                    release,
                    duplicates: other,
                },
            );
        }
    }
    let mut seen: BTreeMap<(&str, &str), &str> = BTreeMap::new();
    let mut fixes: BTreeMap<FixKey, &str> = BTreeMap::new();
    let mut ids: BTreeSet<&str> = BTreeSet::new();
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_by(|a, b| rows[*a].instance_id.cmp(&rows[*b].instance_id));
    for i in order {
        if dropped.contains_key(&i) {
            continue;
        }
        let row = &rows[i];
        let id = row.instance_id.as_str();
        if !ids.insert(id) {
            dropped.insert(i, repeated(row, tag, id));
            continue;
        }
        if let Some(pull) = row.pull_number.as_deref() {
            if let Some(first) = seen.get(&(row.repo.as_str(), pull)) {
                dropped.insert(i, repeated(row, tag, first));
                continue;
            }
            seen.insert((row.repo.as_str(), pull), id);
        }
        let keys = fix_keys(&row.repo, &row.issue_numbers, &row.patch);
        if let Some(first) = keys.iter().find_map(|key| fixes.get(key)) {
            dropped.insert(i, repeated(row, tag, first));
            continue;
        }
        for key in keys {
            fixes.insert(key, id);
        }
    }
    Ok(Deduped {
        keep: (0..rows.len())
            .filter(|i| !dropped.contains_key(i))
            .collect(),
        duplicates: dropped.into_values().collect(),
    })
}

/// A row left out as the second of this export's rows with one id, pull request or fix.
fn repeated(row: &ReleaseInstance, tag: &str, first: &str) -> Duplicate {
    Duplicate {
        instance_id: row.instance_id.to_string(),
        key: "repeated".into(),
        release: tag.to_string(),
        duplicates: first.to_string(),
    }
}

/// `(row, release, other id)` of each row of a join of the fresh keys with published ones.
fn triples(
    joined: &DataFrame,
    release: &str,
    other: &str,
) -> Result<Vec<(usize, String, String)>, StoreError> {
    let here = Path::new("join");
    let get = |name: &str| joined.column(name).map_err(|e| polars_error(here, &e));
    let rows = get("row")?;
    let rows = rows.u32().map_err(|e| polars_error(here, &e))?;
    let releases = get(release)?;
    let releases = releases.str().map_err(|e| polars_error(here, &e))?;
    let others = get(other)?;
    let others = others.str().map_err(|e| polars_error(here, &e))?;
    Ok(rows
        .iter()
        .zip(releases.iter())
        .zip(others.iter())
        .filter_map(|((row, release), other)| {
            Some((
                usize::try_from(row?).ok()?,
                release.unwrap_or_default().to_string(),
                other.unwrap_or_default().to_string(),
            ))
        })
        .collect())
}

/// Minimum, median, mean and maximum of a column (all 0 for no rows).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Distribution {
    /// Smallest value.
    pub min: f64,
    /// Median.
    pub median: f64,
    /// Mean.
    pub mean: f64,
    /// Largest value.
    pub max: f64,
}

impl Distribution {
    fn of(series: &Series) -> Self {
        let get = |s: PolarsResult<Scalar>| {
            s.ok()
                .and_then(|s| s.value().extract::<f64>())
                .unwrap_or(0.0)
        };
        Self {
            min: get(series.min_reduce()),
            median: series.median().unwrap_or(0.0),
            mean: series.mean().unwrap_or(0.0),
            max: get(series.max_reduce()),
        }
    }
}

/// What a split of a release holds, for the dataset card and the run report.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SplitStats {
    /// Rows.
    pub rows: usize,
    /// Distinct repositories.
    pub repositories: usize,
    /// Rows per language, most first (ties by name).
    pub by_language: Vec<(String, u64)>,
    /// Rows per repository, most first (ties by name).
    pub by_repo: Vec<(String, u64)>,
    /// Rows per month of `created_at` (`YYYY-MM`), in month order.
    pub by_month: Vec<(String, u64)>,
    /// FAIL_TO_PASS tests per row.
    pub fail_to_pass: Distribution,
    /// PASS_TO_PASS tests per row.
    pub pass_to_pass: Distribution,
    /// Lines the gold patch adds or removes.
    pub patch_lines: Distribution,
    /// Launch seconds per row.
    pub launch_seconds: Distribution,
    /// Validation seconds per row.
    pub validate_seconds: Distribution,
}

const STAT_COLUMNS: [&str; 8] = [
    "language",
    "repo",
    "created_at",
    "FAIL_TO_PASS",
    "PASS_TO_PASS",
    "patch",
    "launch_seconds",
    "validate_seconds",
];

/// Lines a unified diff adds or removes (file headers excluded).
fn changed_lines(patch: &str) -> u32 {
    let n = patch
        .lines()
        .filter(|l| {
            (l.starts_with('+') && !l.starts_with("+++"))
                || (l.starts_with('-') && !l.starts_with("---"))
        })
        .count();
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The statistics of split `split` of the release at `release_dir`, read from its shards.
///
/// # Errors
/// When a shard cannot be read or lacks a column.
pub fn split_stats(release_dir: &Path, split: &str) -> Result<SplitStats, StoreError> {
    let shards = split_shards(release_dir, split)?;
    if shards.is_empty() {
        return Ok(SplitStats::default());
    }
    let frame = read_columns(&shards, &STAT_COLUMNS, "")?;
    stats_of(&frame).map_err(|e| polars_error(release_dir, &e))
}

fn stats_of(frame: &DataFrame) -> PolarsResult<SplitStats> {
    // Test lists are JSON text since schema version 9, `list<string>` before.
    let list_lengths = |name: &str| -> PolarsResult<Series> {
        let column = frame.column(name)?;
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        let lengths: Vec<u32> = if column.dtype() == &DataType::String {
            column
                .str()?
                .iter()
                .map(|text| {
                    let ids = text.and_then(|t| serde_json::from_str::<Vec<String>>(t).ok());
                    ids.map_or(0, |ids| count(ids.len()))
                })
                .collect()
        } else {
            let lists = column.list()?.clone();
            lists
                .iter()
                .map(|l| l.map_or(0, |a| count(a.len())))
                .collect()
        };
        Ok(Series::new(name.into(), lengths))
    };
    let patch_lines: Vec<u32> = frame
        .column("patch")?
        .str()?
        .iter()
        .map(|p| p.map_or(0, changed_lines))
        .collect();
    let months: Vec<String> = frame
        .column("created_at")?
        .str()?
        .iter()
        .map(|c| c.unwrap_or_default().chars().take(7).collect())
        .collect();
    let counts = |series: &Series, by_count: bool| -> PolarsResult<Vec<(String, u64)>> {
        let counted = series.value_counts(false, false, "count".into(), false)?;
        let values = counted.column(series.name())?.str()?.clone();
        let numbers = counted.column("count")?.cast(&DataType::UInt64)?;
        let numbers = numbers.u64()?.clone();
        let mut out: Vec<(String, u64)> = values
            .iter()
            .zip(numbers.iter())
            .map(|(v, n)| (v.unwrap_or_default().to_string(), n.unwrap_or(0)))
            .collect();
        if by_count {
            out.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        } else {
            out.sort();
        }
        Ok(out)
    };
    let by_repo = counts(frame.column("repo")?.as_materialized_series(), true)?;
    Ok(SplitStats {
        rows: frame.height(),
        repositories: by_repo.len(),
        by_language: counts(frame.column("language")?.as_materialized_series(), true)?,
        by_repo,
        by_month: counts(&Series::new("month".into(), months), false)?,
        fail_to_pass: Distribution::of(&list_lengths("FAIL_TO_PASS")?),
        pass_to_pass: Distribution::of(&list_lengths("PASS_TO_PASS")?),
        patch_lines: Distribution::of(&Series::new("patch_lines".into(), patch_lines)),
        launch_seconds: Distribution::of(frame.column("launch_seconds")?.as_materialized_series()),
        validate_seconds: Distribution::of(
            frame.column("validate_seconds")?.as_materialized_series(),
        ),
    })
}

/// Instance ids of split `split` of a release, read with polars (any schema version).
///
/// # Errors
/// When a shard cannot be read.
pub fn split_ids(release_dir: &Path, split: &str) -> Result<BTreeSet<String>, StoreError> {
    let shards = split_shards(release_dir, split)?;
    let frame = read_columns(&shards, &["instance_id"], "")?;
    let ids = frame
        .column("instance_id")
        .and_then(|c| c.str().cloned())
        .map_err(|e| polars_error(release_dir, &e))?;
    Ok(ids.iter().flatten().map(str::to_string).collect())
}

#[cfg(test)]
mod tests {
    use super::changed_lines;

    #[test]
    fn changed_lines_leave_out_file_headers() {
        let patch = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-a\n+b\n c\n";
        assert_eq!(changed_lines(patch), 2);
        assert_eq!(changed_lines(""), 0);
    }
}
