//! Shards: one of N independent parts of a run, as `--shard I/N` or a cluster engine's array
//! index names it, and where its run lives under the shared dataset root.

use std::path::{Path, PathBuf};

use serde::Serialize;
use sha2::{Digest, Sha256};

/// Most shards a run can be split into.
pub const MAX_SHARDS: u32 = 10_000;

/// The environment variable `kiln deploy k8s` sets to the number of shards: a Kubernetes Indexed
/// Job gives each pod its index (`JOB_COMPLETION_INDEX`) but not the completion count.
pub const SHARD_COUNT_ENV: &str = "KILN_SHARD_COUNT";

/// One shard of a run: its index (from 0) among `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ShardId {
    /// From 0 to `count - 1`.
    pub index: u32,
    /// How many shards the run is split into.
    pub count: u32,
}

impl std::fmt::Display for ShardId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl ShardId {
    /// A shard, checked: `index < count <= MAX_SHARDS`.
    ///
    /// # Errors
    /// When the numbers do not name a shard.
    pub fn new(index: u32, count: u32) -> Result<Self, String> {
        if count == 0 || count > MAX_SHARDS {
            return Err(format!(
                "a run splits into 1 to {MAX_SHARDS} shards, not {count}"
            ));
        }
        if index >= count {
            return Err(format!(
                "shard index {index} is out of range: shards of {count} are numbered 0 to {}",
                count - 1
            ));
        }
        Ok(Self { index, count })
    }

    /// Reads `I/N` (`--shard 0/4`), or `auto`: the index and count a cluster engine gives the
    /// task, read through `env` (the process environment in the CLI): a Slurm array task
    /// (`SLURM_ARRAY_TASK_ID` counted from `SLURM_ARRAY_TASK_MIN`, `SLURM_ARRAY_TASK_COUNT`), else
    /// a Kubernetes Indexed Job's pod (`JOB_COMPLETION_INDEX`, with the count `kiln deploy k8s`
    /// writes into [`SHARD_COUNT_ENV`]).
    ///
    /// # Errors
    /// A spec that is neither, or `auto` outside an array task, each saying what was expected.
    pub fn parse(spec: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Self, String> {
        if spec.trim() == "auto" {
            return Self::from_engine(env);
        }
        let Some((index, count)) = spec.split_once('/') else {
            return Err(format!(
                "\"{spec}\" is not a shard: write INDEX/COUNT (e.g. 0/4, indices from 0) or auto"
            ));
        };
        let number = |text: &str, what: &str| {
            text.trim().parse::<u32>().map_err(|_| {
                format!("\"{spec}\" is not a shard: the {what} \"{text}\" is not a number")
            })
        };
        Self::new(number(index, "index")?, number(count, "count")?)
    }

    fn from_engine(env: &dyn Fn(&str) -> Option<String>) -> Result<Self, String> {
        let read = |name: &str| -> Result<Option<u32>, String> {
            match env(name).filter(|v| !v.trim().is_empty()) {
                None => Ok(None),
                Some(v) => v
                    .trim()
                    .parse::<u32>()
                    .map(Some)
                    .map_err(|_| format!("{name}=\"{v}\" is not a number")),
            }
        };
        if let Some(task) = read("SLURM_ARRAY_TASK_ID")? {
            let min = read("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
            let count = read("SLURM_ARRAY_TASK_COUNT")?.ok_or(
                "--shard auto: SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not",
            )?;
            let index = task.checked_sub(min).ok_or_else(|| {
                format!(
                    "--shard auto: SLURM_ARRAY_TASK_ID {task} is below SLURM_ARRAY_TASK_MIN {min}"
                )
            })?;
            // `--array=0-3%2` and `--array=1-4` count 4 tasks; a stepped or listed array
            // (`0-7:2`, `1,5`) does not number its tasks densely and cannot name shards.
            if let Some(max) = read("SLURM_ARRAY_TASK_MAX")?
                && max - min + 1 != count
            {
                return Err(format!(
                    "--shard auto: the Slurm array {min}-{max} holds {count} tasks, not one per \
                     index; submit it as --array=0-{}",
                    count.saturating_sub(1)
                ));
            }
            return Self::new(index, count).map_err(|e| format!("--shard auto: {e}"));
        }
        if let Some(index) = read("JOB_COMPLETION_INDEX")? {
            let count = read(SHARD_COUNT_ENV)?.ok_or_else(|| {
                format!(
                    "--shard auto: JOB_COMPLETION_INDEX is set but {SHARD_COUNT_ENV} is not (the \
                     Job kiln deploy k8s writes sets it to its completions)"
                )
            })?;
            return Self::new(index, count).map_err(|e| format!("--shard auto: {e}"));
        }
        Err(
            "--shard auto: neither SLURM_ARRAY_TASK_ID (a Slurm job array) nor \
             JOB_COMPLETION_INDEX (a Kubernetes Indexed Job) is set; give the shard as INDEX/COUNT"
                .into(),
        )
    }
}

/// A shard of a pipeline: which one, and the dataset root the shards share (where the merged
/// run and the releases go, and whose earlier runs every shard reads).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shard {
    /// Which shard.
    pub id: ShardId,
    /// The shared dataset root (`[dataset] root` of the config).
    pub home: PathBuf,
}

/// The directory of the shards of one split: `<root>/<dataset>/shards/of-<count>/`.
#[must_use]
pub fn shard_set_dir(root: &Path, dataset: &str, count: u32) -> PathBuf {
    root.join(dataset)
        .join("shards")
        .join(format!("of-{count}"))
}

/// The dataset root of one shard, `<root>/<dataset>/shards/of-<count>/<index>/`: its runs, locks,
/// caches and container labels are its own, so shards on one machine never touch each other's
/// work.
#[must_use]
pub fn shard_root(root: &Path, dataset: &str, id: ShardId) -> PathBuf {
    shard_set_dir(root, dataset, id.count).join(id.index.to_string())
}

/// The shard a repository a crawl discovers belongs to: a stable hash of its lowercase
/// `owner/name`, the same on every machine and in every month.
#[must_use]
pub fn repository_shard(repo: &str, count: u32) -> u32 {
    let digest = Sha256::digest(repo.to_ascii_lowercase().as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u32::try_from(u64::from_be_bytes(first) % u64::from(count.max(1))).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn a_shard_is_index_over_count_from_zero() {
        let none = env(&[]);
        assert_eq!(
            ShardId::parse("2/4", &none),
            Ok(ShardId { index: 2, count: 4 })
        );
        assert_eq!(
            ShardId::parse(" 0 / 1 ", &none),
            Ok(ShardId { index: 0, count: 1 })
        );
        for (spec, says) in [
            ("4/4", "numbered 0 to 3"),
            ("1/0", "1 to 10000 shards"),
            ("3", "INDEX/COUNT"),
            ("a/4", "the index \"a\""),
            ("1/-4", "the count \"-4\""),
        ] {
            let error = ShardId::parse(spec, &none).unwrap_err();
            assert!(error.contains(says), "{spec}: {error}");
        }
    }

    #[test]
    fn auto_reads_the_slurm_array_or_the_indexed_job() {
        let slurm = env(&[
            ("SLURM_ARRAY_TASK_ID", "3"),
            ("SLURM_ARRAY_TASK_MIN", "1"),
            ("SLURM_ARRAY_TASK_MAX", "4"),
            ("SLURM_ARRAY_TASK_COUNT", "4"),
        ]);
        assert_eq!(
            ShardId::parse("auto", &slurm),
            Ok(ShardId { index: 2, count: 4 })
        );
        let stepped = env(&[
            ("SLURM_ARRAY_TASK_ID", "2"),
            ("SLURM_ARRAY_TASK_MIN", "0"),
            ("SLURM_ARRAY_TASK_MAX", "6"),
            ("SLURM_ARRAY_TASK_COUNT", "4"),
        ]);
        assert!(
            ShardId::parse("auto", &stepped)
                .unwrap_err()
                .contains("--array=0-3")
        );
        let k8s = env(&[("JOB_COMPLETION_INDEX", "5"), (SHARD_COUNT_ENV, "8")]);
        assert_eq!(
            ShardId::parse("auto", &k8s),
            Ok(ShardId { index: 5, count: 8 })
        );
        let no_count = env(&[("JOB_COMPLETION_INDEX", "5")]);
        assert!(
            ShardId::parse("auto", &no_count)
                .unwrap_err()
                .contains(SHARD_COUNT_ENV)
        );
        assert!(
            ShardId::parse("auto", &env(&[]))
                .unwrap_err()
                .contains("neither")
        );
    }

    #[test]
    fn repositories_hash_to_the_same_shard_in_any_case() {
        let a = repository_shard("Owner/Repo", 7);
        assert_eq!(a, repository_shard("owner/repo", 7));
        assert!(a < 7);
        let spread: std::collections::BTreeSet<u32> = (0..64)
            .map(|i| repository_shard(&format!("o/r{i}"), 4))
            .collect();
        assert_eq!(
            spread.len(),
            4,
            "64 repositories land in every one of 4 shards"
        );
    }
}
