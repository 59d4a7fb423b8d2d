//! The same fix under two pull requests: a backport (or a cherry-pick into another branch)
//! resolves the same issue with the same change, and makes an identical task. Such rows share
//! a repository, a linked issue and the fingerprint of their gold patch, which ignores what a
//! backport changes: line numbers, `index` lines and the context around the changed lines.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use arrow::array::{Array, AsArray};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use sha2::{Digest, Sha256};

use crate::error::StoreError;

/// A repository (lowercase), one issue it links, and its gold patch's fingerprint.
pub(crate) type FixKey = (String, String, String);

/// The fingerprint of a diff: the files it names and its added and removed lines (trailing
/// whitespace dropped), in order; hunk headers, context and `index` lines left out.
#[must_use]
pub fn patch_fingerprint(patch: &str) -> String {
    let mut hash = Sha256::new();
    for line in patch.lines() {
        let kept = line.starts_with("diff --git ")
            || ((line.starts_with('+') || line.starts_with('-'))
                && !line.starts_with("+++")
                && !line.starts_with("---"));
        if kept {
            hash.update(line.trim_end().as_bytes());
            hash.update(b"\n");
        }
    }
    format!("{:x}", hash.finalize())
}

/// The fix keys of a row: one per linked issue; none without an issue or a patch.
pub(crate) fn fix_keys(repo: &str, issues: &[String], patch: &str) -> Vec<FixKey> {
    if patch.trim().is_empty() {
        return Vec::new();
    }
    let fingerprint = patch_fingerprint(patch);
    issues
        .iter()
        .filter(|issue| !issue.trim().is_empty())
        .map(|issue| {
            (
                repo.to_ascii_lowercase(),
                issue.trim().to_string(),
                fingerprint.clone(),
            )
        })
        .collect()
}

/// The fix keys of every row of `shards`, each with the row's instance id. Shards of any
/// schema version are read; one without `issue_numbers` (written before kiln recorded them)
/// adds nothing.
pub(crate) fn published_fixes(shards: &[PathBuf]) -> Result<HashMap<FixKey, String>, StoreError> {
    let mut fixes = HashMap::new();
    for shard in shards {
        read_shard(shard, &mut fixes)?;
    }
    Ok(fixes)
}

fn read_shard(path: &Path, fixes: &mut HashMap<FixKey, String>) -> Result<(), StoreError> {
    let file = File::open(path).map_err(|e| StoreError::io("open", path, e))?;
    let parquet_err = |source| StoreError::Parquet {
        path: path.to_path_buf(),
        source,
    };
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(parquet_err)?;
    let wanted = ["instance_id", "repo", "issue_numbers", "patch"];
    let schema = builder.schema().clone();
    if wanted.iter().any(|c| schema.field_with_name(c).is_err()) {
        return Ok(());
    }
    let mask = ProjectionMask::columns(builder.parquet_schema(), wanted.iter().copied());
    let reader = builder.with_projection(mask).build().map_err(parquet_err)?;
    for batch in reader {
        let batch = batch.map_err(|e| StoreError::Parquet {
            path: path.to_path_buf(),
            source: e.into(),
        })?;
        let (Some(ids), Some(repos), Some(issues), Some(patches)) = (
            batch
                .column_by_name("instance_id")
                .and_then(|c| c.as_string_opt::<i32>()),
            batch
                .column_by_name("repo")
                .and_then(|c| c.as_string_opt::<i32>()),
            batch
                .column_by_name("issue_numbers")
                .and_then(|c| c.as_list_opt::<i32>()),
            batch
                .column_by_name("patch")
                .and_then(|c| c.as_string_opt::<i32>()),
        ) else {
            continue;
        };
        for row in 0..batch.num_rows() {
            if issues.is_null(row) {
                continue;
            }
            let linked = issues.value(row);
            let Some(linked) = linked.as_string_opt::<i32>() else {
                continue;
            };
            let linked: Vec<String> = linked.iter().flatten().map(str::to_string).collect();
            for key in fix_keys(repos.value(row), &linked, patches.value(row)) {
                fixes
                    .entry(key)
                    .or_insert_with(|| ids.value(row).to_string());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backport_of_a_fix_has_its_fingerprint_and_another_fix_does_not() {
        let main = "diff --git a/src/x.py b/src/x.py\nindex 1111111..2222222 100644\n--- a/src/x.py\n+++ b/src/x.py\n@@ -10,7 +10,7 @@ def f():\n     a = 1\n-    return a\n+    return a + 1\n     # end\n";
        // The same change on a release branch: other line numbers, index and context.
        let backport = "diff --git a/src/x.py b/src/x.py\nindex 3333333..4444444 100644\n--- a/src/x.py\n+++ b/src/x.py\n@@ -42,6 +42,6 @@ def f():\n     b = 2\n-    return a\n+    return a + 1   \n";
        let other = "diff --git a/src/x.py b/src/x.py\n--- a/src/x.py\n+++ b/src/x.py\n@@ -10,7 +10,7 @@\n-    return a\n+    return a + 2\n";
        assert_eq!(patch_fingerprint(main), patch_fingerprint(backport));
        assert_ne!(patch_fingerprint(main), patch_fingerprint(other));
        let keys = fix_keys("Owner/Repo", &["12".into(), " ".into()], main);
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].0, "owner/repo");
        assert!(fix_keys("o/r", &["12".into()], "").is_empty());
        assert!(fix_keys("o/r", &[], main).is_empty());
    }
}
