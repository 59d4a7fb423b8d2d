//! Which repositories a shard works on: the plan of a split run.
//!
//! A split run's source stage (ingest, or a crawl of listed repositories) groups its items by
//! repository, so that environment reuse and recipes stay inside one shard, and deals the
//! repositories to the shards largest estimated cost first, each to the least loaded shard
//! (LPT). The estimate is the repository's item count times its seconds per item in the
//! dataset's earlier runs (launch plus validate), the median of the known repositories where a
//! repository is new, one second where nothing is known.
//!
//! Shards start at different times and earlier runs keep finishing, so two shards computing the
//! plan themselves could disagree. The first shard to get there writes it to
//! `<root>/<dataset>/shards/of-<N>/plan-<fingerprint>.json` (created once, never replaced:
//! written aside and hard-linked into place), and every shard, and every restart of one, reads
//! that file. The fingerprint covers the shard count and the repositories with their item
//! counts, so a task file that changed gets a plan of its own.
//!
//! A crawl that discovers its repositories cannot know them in advance: it deals each one by a
//! stable hash of its name ([`kiln_core::config::repository_shard`]).

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use kiln_core::config::{NodeKind, Pipeline, Shard, hex_sha256, shard_set_dir};
use kiln_schema::{EnvironmentRecord, ValidationRecord};
use serde::{Deserialize, Serialize};

use crate::error::PipelineError;

/// Earlier runs read for cost estimates (the latest ones).
const COST_RUNS: usize = 12;

/// The manifest state key under which a shard's source stage records the plan it followed.
pub(crate) const PLAN_STATE: &str = "shard_plan";

/// One repository in a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedRepository {
    /// `owner/name`.
    pub repo: String,
    /// Its items in the source.
    pub items: u64,
    /// Estimated seconds of launch and validate per item.
    pub seconds_per_item: f64,
    /// Whether the estimate came from earlier runs of this repository.
    pub measured: bool,
    /// The shard it goes to.
    pub shard: u32,
}

/// One shard's share of a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedShard {
    /// The shard.
    pub index: u32,
    /// How many repositories it has.
    pub repositories: u64,
    /// How many items.
    pub items: u64,
    /// Estimated seconds of launch and validate.
    pub estimated_seconds: f64,
}

/// A split run's plan: every repository's shard.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// The fingerprint of what was planned (count, repositories and item counts).
    pub fingerprint: String,
    /// How many shards.
    pub count: u32,
    /// When the first shard wrote it.
    pub created_at: String,
    /// Every shard's share.
    pub shards: Vec<PlannedShard>,
    /// Every repository, largest cost first.
    pub repositories: Vec<PlannedRepository>,
}

impl Plan {
    /// The shard of `repo` (`None`: not in the plan).
    #[must_use]
    pub fn shard_of(&self, repo: &str) -> Option<u32> {
        self.repositories
            .iter()
            .find(|r| r.repo.eq_ignore_ascii_case(repo))
            .map(|r| r.shard)
    }
}

/// The plan of `shard`'s split for `repositories` (`owner/name` to item count): read from the
/// shared root when a shard wrote it, else made and written.
///
/// # Errors
/// When the shared root cannot be read or written, or a plan there cannot be read.
pub(crate) fn plan(
    pipeline: &Pipeline,
    shard: &Shard,
    repositories: &BTreeMap<String, u64>,
) -> Result<Plan, PipelineError> {
    let count = shard.id.count;
    let mut canonical = format!("kiln shard plan\ncount {count}\n");
    for (repo, items) in repositories {
        canonical.push_str(&format!("{} {items}\n", repo.to_ascii_lowercase()));
    }
    let fingerprint = hex_sha256(canonical.as_bytes())[..16].to_string();
    let dir = shard_set_dir(&shard.home, &pipeline.dataset.name, count);
    let path = dir.join(format!("plan-{fingerprint}.json"));
    if let Some(plan) = read_plan(&path)? {
        return Ok(plan);
    }
    let costs = seconds_per_item(pipeline, &shard.home)?;
    let plan = deal(fingerprint, count, repositories, &costs);
    let host = |e: std::io::Error, what: &str, at: &Path| PipelineError::Host {
        what: format!("{what} {}", at.display()),
        message: e.to_string(),
    };
    std::fs::create_dir_all(&dir).map_err(|e| host(e, "create the shard directory", &dir))?;
    let aside = dir.join(format!(
        ".plan-{}-{}.json",
        plan.fingerprint,
        std::process::id()
    ));
    let mut text =
        serde_json::to_vec_pretty(&plan).map_err(|e| PipelineError::Internal(e.to_string()))?;
    text.push(b'\n');
    kiln_store::write_atomic(&aside, &text)?;
    // A hard link never replaces: the shard that links first wrote the plan every shard follows.
    let linked = std::fs::hard_link(&aside, &path);
    let _ = std::fs::remove_file(&aside);
    match linked {
        Ok(()) => Ok(plan),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => read_plan(&path)?.ok_or_else(|| {
            PipelineError::Internal(format!("{} vanished after it was written", path.display()))
        }),
        Err(e) => Err(host(e, "write the shard plan", &path)),
    }
}

fn read_plan(path: &Path) -> Result<Option<Plan>, PipelineError> {
    match std::fs::read(path) {
        Ok(text) => serde_json::from_slice(&text)
            .map(Some)
            .map_err(|e| PipelineError::Input {
                what: format!("the shard plan {}", path.display()),
                message: e.to_string(),
            }),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(PipelineError::Input {
            what: format!("the shard plan {}", path.display()),
            message: e.to_string(),
        }),
    }
}

/// The plans of the split into `count` shards under `root`, newest first.
#[must_use]
pub fn plans(root: &Path, dataset: &str, count: u32) -> Vec<(PathBuf, Plan)> {
    let dir = shard_set_dir(root, dataset, count);
    let mut found: Vec<(std::time::SystemTime, PathBuf, Plan)> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("plan-") && n.ends_with(".json"))
        })
        .filter_map(|p| {
            let plan = read_plan(&p).ok().flatten()?;
            let modified = std::fs::metadata(&p).and_then(|m| m.modified()).ok()?;
            Some((modified, p, plan))
        })
        .collect();
    found.sort_by_key(|f| std::cmp::Reverse(f.0));
    found.into_iter().map(|(_, p, plan)| (p, plan)).collect()
}

/// Numbers following `prefix` in the names of `dir`'s entries, in order (`of-4` → 4, `2` → 2).
fn numbered(dir: &Path, prefix: &str) -> Vec<u32> {
    let mut found: Vec<u32> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.strip_prefix(prefix)?.parse().ok())
        .collect();
    found.sort_unstable();
    found
}

/// The shard counts of the splits of dataset `name` under the shared root `home`
/// (`shards/of-<count>/`), smallest first.
#[must_use]
pub fn splits(home: &Path, name: &str) -> Vec<u32> {
    numbered(&home.join(name).join("shards"), "of-")
}

/// The pipeline as each shard of each split of its dataset ran it: one per shard directory under
/// the shared root (`shards/of-<count>/<index>/`), in order.
#[must_use]
pub fn shard_pipelines(pipeline: &Pipeline) -> Vec<Pipeline> {
    let home = pipeline.home_root();
    let name = &pipeline.dataset.name;
    let mut out = Vec::new();
    for count in splits(home, name) {
        for index in numbered(&shard_set_dir(home, name, count), "") {
            if let Ok(id) = kiln_core::config::ShardId::new(index, count) {
                out.push(pipeline.for_shard(id));
            }
        }
    }
    out
}

/// Deals the repositories to `count` shards, largest estimated cost first, each to the least
/// loaded shard (the lowest index among equals); equal costs go in name order, so the plan is
/// the same wherever it is made from the same figures.
fn deal(
    fingerprint: String,
    count: u32,
    repositories: &BTreeMap<String, u64>,
    costs: &BTreeMap<String, f64>,
) -> Plan {
    let mut known: Vec<f64> = costs.values().copied().collect();
    known.sort_by(f64::total_cmp);
    let fallback = known.get(known.len() / 2).copied().unwrap_or(1.0);
    let mut planned: Vec<PlannedRepository> = repositories
        .iter()
        .map(|(repo, items)| {
            let measured = costs.get(&repo.to_ascii_lowercase()).copied();
            PlannedRepository {
                repo: repo.clone(),
                items: *items,
                seconds_per_item: measured.unwrap_or(fallback),
                measured: measured.is_some(),
                shard: 0,
            }
        })
        .collect();
    let cost = |r: &PlannedRepository| r.items as f64 * r.seconds_per_item;
    planned.sort_by(|a, b| {
        cost(b)
            .total_cmp(&cost(a))
            .then_with(|| a.repo.cmp(&b.repo))
    });
    let mut shards: Vec<PlannedShard> = (0..count)
        .map(|index| PlannedShard {
            index,
            repositories: 0,
            items: 0,
            estimated_seconds: 0.0,
        })
        .collect();
    for repo in &mut planned {
        let Some(least) = shards.iter_mut().min_by(|a, b| {
            a.estimated_seconds
                .total_cmp(&b.estimated_seconds)
                .then(a.index.cmp(&b.index))
        }) else {
            break;
        };
        repo.shard = least.index;
        least.repositories += 1;
        least.items += repo.items;
        least.estimated_seconds += cost(repo);
    }
    Plan {
        fingerprint,
        count,
        created_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        shards,
        repositories: planned,
    }
}

/// Seconds of launch plus validate per item, by lowercase repository, over the latest earlier
/// runs of the dataset under `home` (the shared root, where merged runs live).
fn seconds_per_item(
    pipeline: &Pipeline,
    home: &Path,
) -> Result<BTreeMap<String, f64>, PipelineError> {
    let name = &pipeline.dataset.name;
    let ids = kiln_store::run_ids(home, name)?;
    let stages = |kind: NodeKind| -> Vec<&str> {
        pipeline
            .nodes
            .iter()
            .filter(|n| n.kind == kind)
            .map(|n| n.name.as_str())
            .collect()
    };
    // Per instance: its repository and seconds, the latest run's figure winning.
    let mut instances: BTreeMap<String, (String, f64, f64)> = BTreeMap::new();
    for id in ids.iter().rev().take(COST_RUNS).rev() {
        let run = kiln_store::runs_dir(home, name).join(id);
        for stage in stages(NodeKind::Launch) {
            let dir = run.join(stage);
            if !dir.join(kiln_store::MANIFEST).is_file() {
                continue;
            }
            for row in kiln_store::read_rows::<EnvironmentRecord>(&dir)? {
                let entry = instances.entry(row.instance_id.to_string()).or_default();
                entry.0 = row.repo.to_ascii_lowercase();
                entry.1 = row.total_seconds;
            }
        }
        for stage in stages(NodeKind::Validate) {
            let dir = run.join(stage);
            if !dir.join(kiln_store::MANIFEST).is_file() {
                continue;
            }
            for row in kiln_store::read_rows::<ValidationRecord>(&dir)? {
                if let Some(entry) = instances.get_mut(row.instance_id.as_str()) {
                    entry.2 = row.total_seconds;
                }
            }
        }
    }
    let mut sums: BTreeMap<String, (f64, u32)> = BTreeMap::new();
    for (repo, launch, validate) in instances.into_values() {
        let sum = sums.entry(repo).or_default();
        sum.0 += launch + validate;
        sum.1 += 1;
    }
    Ok(sums
        .into_iter()
        .map(|(repo, (seconds, n))| (repo, seconds / f64::from(n)))
        .collect())
}

/// Records in the source stage's manifest the plan its rows follow; a table that followed
/// another plan (its task file changed under a shard) is an error, not a mix of two plans.
pub(crate) fn record_plan<R: kiln_schema::Row>(
    stage: &str,
    table: &mut kiln_store::StageTable<R>,
    plan: &Plan,
) -> Result<(), PipelineError> {
    match table.state().get(PLAN_STATE).and_then(|v| v.as_str()) {
        Some(recorded) if recorded == plan.fingerprint => Ok(()),
        Some(recorded) => Err(PipelineError::Input {
            what: format!("the items of stage {stage}"),
            message: format!(
                "this shard's rows follow the plan {recorded}, but its source now plans as {}: \
                 the task file or repository list changed since the shard started; start the \
                 shards over with `kiln run --new --shard ...`",
                plan.fingerprint
            ),
        }),
        None => Ok(table.append_with_state(
            &[],
            BTreeMap::from([(PLAN_STATE.to_string(), serde_json::json!(plan.fingerprint))]),
        )?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repos(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
        pairs.iter().map(|(r, n)| ((*r).to_string(), *n)).collect()
    }

    #[test]
    fn repositories_are_dealt_largest_cost_first_to_the_least_loaded_shard() {
        let costs = BTreeMap::from([
            ("o/slow".to_string(), 600.0),
            ("o/fast".to_string(), 10.0),
            ("o/mid".to_string(), 60.0),
        ]);
        let plan = deal(
            "f".into(),
            3,
            &repos(&[
                ("o/slow", 1),
                ("o/fast", 30),
                ("o/mid", 4),
                ("o/new", 2),
                ("o/other", 1),
            ]),
            &costs,
        );
        let shard = |r: &str| plan.shard_of(r).unwrap();
        // slow 600, fast 300, mid 240, new 2 x median 60 = 120, other 60.
        assert_eq!(shard("o/slow"), 0);
        assert_eq!(shard("o/fast"), 1);
        assert_eq!(shard("o/mid"), 2);
        assert_eq!(shard("o/new"), 2, "goes to the least loaded (240 < 300)");
        assert_eq!(shard("o/other"), 1, "300 < 360");
        assert!(
            !plan
                .repositories
                .iter()
                .find(|r| r.repo == "o/new")
                .unwrap()
                .measured
        );
        let items: u64 = plan.shards.iter().map(|s| s.items).sum();
        assert_eq!(items, 38);
        assert_eq!(plan.shards[0].estimated_seconds, 600.0);
    }

    #[test]
    fn equal_costs_go_round_in_name_order_and_every_shard_gets_one() {
        let plan = deal(
            "f".into(),
            4,
            &repos(&[("d/d", 1), ("a/a", 1), ("c/c", 1), ("b/b", 1)]),
            &BTreeMap::new(),
        );
        let order: Vec<(String, u32)> = plan
            .repositories
            .iter()
            .map(|r| (r.repo.clone(), r.shard))
            .collect();
        assert_eq!(
            order,
            [("a/a", 0), ("b/b", 1), ("c/c", 2), ("d/d", 3)].map(|(r, s)| (r.to_string(), s))
        );
    }
}
