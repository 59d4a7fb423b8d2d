//! Releases: Parquet shards named as Hugging Face's `push_to_hub` names them, and a dataset card.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use kiln_schema::Row;

use crate::atomic::{is_temp_name, sync_dir, write_atomic};
use crate::convert::write_parquet;
use crate::error::StoreError;

/// Checks a split name: Hugging Face requires `\w+`.
fn check_split(dir: &Path, split: &str) -> Result<(), StoreError> {
    if !split.is_empty() && split.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        Ok(())
    } else {
        Err(StoreError::invalid(
            dir,
            format!(
                "split name {split:?} must be non-empty and contain only ASCII letters, digits and _"
            ),
        ))
    }
}

/// Whether `name` is a shard file of `split`: `<split>-NNNNN-of-NNNNN.parquet`.
pub(crate) fn is_shard_of(name: &str, split: &str) -> bool {
    let Some(rest) = name
        .strip_prefix(split)
        .and_then(|r| r.strip_prefix('-'))
        .and_then(|r| r.strip_suffix(".parquet"))
    else {
        return false;
    };
    let Some((i, n)) = rest.split_once("-of-") else {
        return false;
    };
    let digits = |s: &str| s.len() >= 5 && s.bytes().all(|b| b.is_ascii_digit());
    digits(i) && digits(n)
}

/// File name of shard `i` of `n` of a split.
#[must_use]
pub fn shard_name(split: &str, i: usize, n: usize) -> String {
    format!("{split}-{i:05}-of-{n:05}.parquet")
}

/// Writes the rows of one split of a release as `data/<split>-NNNNN-of-NNNNN.parquet` under
/// `release_dir`, at most `rows_per_shard` rows per shard (at least one shard, even if empty).
///
/// Each shard is written atomically, by one worker per core; afterwards, shards of this split from an earlier write that
/// are not part of the new set are deleted. Returns the paths written, in order.
pub fn write_release<R: Row>(
    release_dir: &Path,
    split: &str,
    rows: &[R],
    rows_per_shard: usize,
) -> Result<Vec<PathBuf>, StoreError> {
    let data = release_dir.join("data");
    check_split(&data, split)?;
    fs::create_dir_all(&data).map_err(|e| StoreError::io("create directory", &data, e))?;
    let per = rows_per_shard.max(1);
    let n = rows.len().div_ceil(per).max(1);
    let written: Vec<PathBuf> = (0..n).map(|i| data.join(shard_name(split, i, n))).collect();
    // Shards are independent files: one worker per core writes them, each taking the next
    // shard, so memory holds at most one shard's columns per worker.
    let workers = std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .min(n);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<Result<(), StoreError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        if i >= n {
                            return Ok(());
                        }
                        let start = (i * per).min(rows.len());
                        let end = ((i + 1) * per).min(rows.len());
                        write_parquet(&written[i], &rows[start..end])?;
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(StoreError::invalid(&data, "a shard writer panicked")))
            })
            .collect()
    });
    for result in results {
        result?;
    }
    let entries = fs::read_dir(&data).map_err(|e| StoreError::io("list", &data, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| StoreError::io("list", &data, e))?;
        let path = entry.path();
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        let old_shard = is_shard_of(&name, split) && !written.contains(&path);
        let leftover = is_temp_name(&name) && name[1..].starts_with(&format!("{split}-"));
        if old_shard || leftover {
            fs::remove_file(&path).map_err(|e| StoreError::io("remove old shard", &path, e))?;
        }
    }
    sync_dir(&data)?;
    Ok(written)
}

/// Rows of `split` in the release at `release_dir`, summed over its shards' Parquet footers (no
/// row is read, and shards of any schema version count); `None` when the split has no shard.
pub fn release_split_rows(release_dir: &Path, split: &str) -> Result<Option<usize>, StoreError> {
    let data = release_dir.join("data");
    let entries = match fs::read_dir(&data) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StoreError::io("list", &data, e)),
    };
    let mut total: Option<usize> = None;
    for entry in entries {
        let entry = entry.map_err(|e| StoreError::io("list", &data, e))?;
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if is_shard_of(&name, split) {
            let rows = crate::convert::parquet_rows(&entry.path())?;
            total = Some(total.unwrap_or(0) + rows);
        }
    }
    Ok(total)
}

/// Quotes a string for YAML (JSON strings are valid YAML double-quoted scalars).
fn yaml_str(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// What a dataset card declares in its YAML front matter besides its splits.
#[derive(Debug, Clone, Default)]
pub struct CardMeta<'a> {
    /// `pretty_name`.
    pub name: &'a str,
    /// `license` (a Hugging Face licence id); empty leaves it out.
    pub license: &'a str,
    /// `task_categories`, `tags` and the like: extra `key: [values]` lines.
    pub lists: &'a [(&'a str, Vec<String>)],
}

/// Writes `README.md` of a release: YAML front matter (`pretty_name`, `license`, extra lists,
/// one `default` config with a `data/<split>-*` pattern per split), a title, a table of rows
/// per split, then `extra_markdown`. Returns the path written.
pub fn write_dataset_card(
    release_dir: &Path,
    meta: &CardMeta<'_>,
    splits: &[(String, usize)],
    extra_markdown: &str,
) -> Result<PathBuf, StoreError> {
    let path = release_dir.join("README.md");
    for (split, _) in splits {
        check_split(&path, split)?;
    }
    let mut card = String::new();
    card.push_str("---\n");
    let _ = writeln!(card, "pretty_name: {}", yaml_str(meta.name));
    if !meta.license.is_empty() {
        let _ = writeln!(card, "license: {}", yaml_str(meta.license));
    }
    for (key, values) in meta.lists {
        let _ = writeln!(card, "{key}:");
        for value in values {
            let _ = writeln!(card, "- {}", yaml_str(value));
        }
    }
    card.push_str("configs:\n- config_name: default\n  data_files:\n");
    for (split, _) in splits {
        let _ = writeln!(card, "  - split: {split}\n    path: data/{split}-*");
    }
    card.push_str("---\n\n");
    let _ = writeln!(card, "# {}\n", meta.name);
    card.push_str("## Splits\n\n| split | rows |\n|---|---:|\n");
    for (split, rows) in splits {
        let _ = writeln!(card, "| {split} | {rows} |");
    }
    if !extra_markdown.trim().is_empty() {
        card.push('\n');
        card.push_str(extra_markdown.trim_end());
        card.push('\n');
    }
    fs::create_dir_all(release_dir)
        .map_err(|e| StoreError::io("create directory", release_dir, e))?;
    write_atomic(&path, card.as_bytes())?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_names_and_matching() {
        assert_eq!(shard_name("train", 0, 3), "train-00000-of-00003.parquet");
        assert!(is_shard_of("train-00000-of-00003.parquet", "train"));
        assert!(is_shard_of("train-00012-of-00100.parquet", "train"));
        assert!(!is_shard_of("train_x-00000-of-00001.parquet", "train"));
        assert!(!is_shard_of("test-00000-of-00001.parquet", "train"));
        assert!(!is_shard_of("train-0-of-1.parquet", "train"));
        assert!(!is_shard_of("train-00000-of-00001.parquet.bak", "train"));
    }

    #[test]
    fn split_names() {
        let d = Path::new("d");
        assert!(check_split(d, "train").is_ok());
        assert!(check_split(d, "dev_2").is_ok());
        assert!(check_split(d, "a-b").is_err());
        assert!(check_split(d, "").is_err());
    }
}
