//! Environment reuse across the commits of a repository (`[stages.<launch>] reuse = true`): the
//! environments built so far per repository, and turns so that its instances launch one after
//! another along a few chains ([`lanes`]), oldest first. `kiln_launch` picks the nearest
//! ancestor's.

use std::collections::BTreeMap;
use std::sync::Arc;

use kiln_core::config::NodeKind;
use kiln_core::{ContainerRuntime, Reporter};
use kiln_launch::LaunchRequest;
use kiln_schema::{Candidate, EnvironmentRecord, FailureClass, InstanceId, TestStatus};

use super::context::StageContext;

/// The turn of one chain of a repository.
type Turn = Arc<tokio::sync::Mutex<()>>;

/// What `reuse` shares between the launches of a stage: the built environments per repository
/// (this run's, and earlier runs' of the dataset) and a turn per chain of a repository
/// ([`lanes`]), so that the instances of a chain launch one after another, oldest first.
#[derive(Clone)]
pub(super) struct Reuse {
    built: Arc<std::sync::Mutex<BTreeMap<String, Vec<kiln_launch::ReuseSource>>>>,
    turns: Arc<std::sync::Mutex<BTreeMap<(String, usize), Turn>>>,
    /// The chain of each instance (0 when not listed).
    lanes: Arc<BTreeMap<InstanceId, usize>>,
    /// Reused launches so far, for `verify_reuse`.
    reused: Arc<std::sync::atomic::AtomicU64>,
}

impl Reuse {
    /// The built environments of this run's rows and of earlier runs' launch stages (a run
    /// whose table cannot be read is passed over).
    pub(super) fn new(
        cx: &StageContext<'_>,
        rows: &[EnvironmentRecord],
        candidates: &BTreeMap<InstanceId, Candidate>,
        lanes: BTreeMap<InstanceId, usize>,
    ) -> Self {
        let reuse = Self {
            built: Arc::default(),
            turns: Arc::default(),
            lanes: Arc::new(lanes),
            reused: Arc::default(),
        };
        let mut known: Vec<(EnvironmentRecord, Option<Candidate>)> = rows
            .iter()
            .map(|r| (r.clone(), candidates.get(&r.instance_id).cloned()))
            .collect();
        // A shard also starts from the environments of the split run's earlier merged runs.
        for run in cx.other_runs().unwrap_or_default() {
            let (Ok(launched), Ok(tasks)) = (
                crate::summary::rows::<EnvironmentRecord>(cx.pipeline, &run, NodeKind::Launch),
                crate::summary::rows::<Candidate>(cx.pipeline, &run, NodeKind::Ingest),
            ) else {
                continue;
            };
            let tasks = kiln_schema::rows_by_id(tasks);
            known.extend(launched.into_iter().map(|r| {
                let task = tasks.get(&r.instance_id).cloned();
                (r, task)
            }));
        }
        for (row, candidate) in known {
            if let Some(candidate) = candidate {
                reuse.built(&candidate, &row);
            }
        }
        reuse
    }

    /// Waits for the turn of `candidate`'s chain; the turn ends when the guard is dropped.
    pub(super) async fn turn(&self, candidate: &Candidate) -> tokio::sync::OwnedMutexGuard<()> {
        let lane = self.lanes.get(&candidate.instance_id).copied().unwrap_or(0);
        let lock = {
            let mut turns = self
                .turns
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            Arc::clone(turns.entry((candidate.repo.clone(), lane)).or_default())
        };
        lock.lock_owned().await
    }

    /// The environments of `repo` built so far.
    pub(super) fn sources(&self, repo: &str) -> Vec<kiln_launch::ReuseSource> {
        self.built
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(repo)
            .cloned()
            .unwrap_or_default()
    }

    /// Records `row` as a source when it built an image with a known digest by its rules'
    /// plan alone. An environment a repair, a recipe or the agent built holds what those
    /// installed, which a launch from it would inherit without listing: its row's Dockerfile,
    /// built cold from the steps it lists, would then lack them.
    pub(super) fn built(&self, candidate: &Candidate, row: &EnvironmentRecord) {
        let by_rules = matches!(row.built_by, None | Some(kiln_schema::BuiltBy::Rules));
        let (Some(image), true) = (
            row.image_digest.clone(),
            row.status == kiln_schema::EnvironmentStatus::Built && by_rules,
        ) else {
            return;
        };
        self.built
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(candidate.repo.clone())
            .or_default()
            .push(kiln_launch::ReuseSource {
                instance_id: row.instance_id.to_string(),
                image,
                base_commit: candidate.base_commit.clone(),
                plan: row.plan.clone(),
                base_image: row.base_image.clone(),
                setup_commands: row.setup_commands.clone(),
                cutoff: row.dependency_cutoff.clone(),
            });
    }

    /// With `verify_reuse = every`, launches every `every`th reused instance cold as well (the
    /// first one included, so that a run with any reuse checks some; its image tagged
    /// `<tag>.reuse-check`) and writes the comparison of the two baselines into
    /// `row.reuse_check`. When they differ and the cold launch built, the cold launch is the
    /// row (its image under the row's tag): what the Dockerfile rebuilds is the cold one, so
    /// reuse changes no result it was checked on. Otherwise the check's image is removed.
    ///
    /// # Errors
    /// As [`kiln_launch::launch`].
    pub(super) async fn verify(
        &self,
        runtime: Arc<dyn ContainerRuntime>,
        request: &LaunchRequest,
        row: &mut EnvironmentRecord,
        reporter: &dyn Reporter,
        every: i64,
    ) -> Result<(), kiln_launch::LaunchError> {
        let Ok(every) = u64::try_from(every) else {
            return Ok(());
        };
        if every == 0 || row.reused_from.is_none() {
            return Ok(());
        }
        let n = self
            .reused
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if !n.is_multiple_of(every) {
            return Ok(());
        }
        let mut cold = request.clone();
        cold.settings.reuse = false;
        cold.reuse.clear();
        cold.image_tag = format!("{}.reuse-check", request.image_tag);
        cold.log_dir = request.log_dir.join("reuse-check");
        cold.log_dir_label = format!("{}/reuse-check", request.log_dir_label);
        let mut checked = kiln_launch::launch(Arc::clone(&runtime), &cold, reporter).await?;
        let difference = difference(&row.baseline, &checked);
        let check = format!(
            "{} (cold launch {:.1} s, reused {:.1} s)",
            difference.as_deref().unwrap_or("same"),
            checked.total_seconds,
            row.total_seconds
        );
        if checked.image.is_some() && difference.is_some() {
            runtime
                .tag_image(&cold.image_tag, &request.image_tag)
                .await?;
            runtime.remove_image(&cold.image_tag).await?;
            checked.image = Some(request.image_tag.clone());
            checked.version_reason.push_str(&format!(
                "; reuse: the launch from {}'s environment had another baseline (reuse_check); this is the cold launch's",
                row.reused_from.as_deref().unwrap_or_default()
            ));
            checked.reuse_check = Some(format!("{check}; the cold launch is kept"));
            *row = checked;
            return Ok(());
        }
        if checked.image.is_some() {
            runtime.remove_image(&cold.image_tag).await?;
        }
        row.reuse_check = Some(check);
        Ok(())
    }
}

/// Instances per chain below which a repository's instances are not split further.
pub(super) const CHAIN: usize = 4;

/// The chain of each instance of `order` (the launch order): a repository's instances take
/// turns along `n / CHAIN` chains, at least one and at most `concurrency`, dealt in order
/// (the first instance to the first chain, the second to the second, ...). Each chain launches
/// one instance at a time, so that its next one finds the environment of the one before
/// built; the chains run at once, so that a dataset of one repository keeps the stage's
/// concurrency. The first instance of each chain launches cold.
pub(super) fn lanes(
    order: &[InstanceId],
    candidates: &BTreeMap<InstanceId, Candidate>,
    concurrency: usize,
) -> BTreeMap<InstanceId, usize> {
    let mut by_repo: BTreeMap<&str, Vec<&InstanceId>> = BTreeMap::new();
    for id in order {
        if let Some(c) = candidates.get(id) {
            by_repo.entry(&c.repo).or_default().push(id);
        }
    }
    let mut out = BTreeMap::new();
    for ids in by_repo.values() {
        let chains = (ids.len() / CHAIN).clamp(1, concurrency.max(1));
        for (rank, id) in ids.iter().enumerate() {
            out.insert((*id).clone(), rank % chains);
        }
    }
    out
}

/// The launch order with `reuse`: within a repository, oldest base commit first, so that every
/// instance finds the environments of its ancestors built (a commit is never started from a
/// newer one's, so an instance launched before its ancestor is launched cold, not wrongly).
/// The committer dates come from the repository's mirror, which the launches fetch anyway; it
/// is fetched here only for repositories with more than one instance in `pending`. Where the
/// dates cannot be read (the mirror cannot be fetched, a commit is missing), and between
/// repositories, the order is by creation time (`created_at`), then id.
pub(super) fn launch_order(
    items: &[InstanceId],
    pending: &[InstanceId],
    candidates: &BTreeMap<InstanceId, Commit>,
    mirrors: &kiln_git::MirrorCache,
    clone_url_template: &str,
    reporter: &dyn Reporter,
) -> Vec<InstanceId> {
    let mut by_repo: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for id in pending {
        if let Some(c) = candidates.get(id) {
            by_repo.entry(&c.repo).or_default().push(&c.base_commit);
        }
    }
    let mut dates: BTreeMap<(&str, &str), i64> = BTreeMap::new();
    for (repo, mut commits) in by_repo {
        commits.sort_unstable();
        commits.dedup();
        if commits.len() < 2 {
            continue;
        }
        reporter.report(kiln_core::Event::Note {
            message: format!(
                "reuse: ordering {} commits of {repo} by date (fetching its mirror)",
                commits.len()
            ),
        });
        let url = kiln_github::clone_url(clone_url_template, repo);
        let mirror = match mirrors.update(repo, &url, &commits) {
            Ok((mirror, _missing)) => mirror,
            Err(e) => {
                reporter.report(kiln_core::Event::Note {
                    message: format!(
                        "reuse: {repo} launches in creation order: its mirror could not be \
                         fetched ({e})"
                    ),
                });
                continue;
            }
        };
        let read: Vec<(&str, i64)> = commits
            .iter()
            .filter_map(|commit| {
                Some((
                    *commit,
                    seconds(&kiln_git::commit_date(&mirror, commit).ok()?)?,
                ))
            })
            .collect();
        // Dates for only some of them would mix two clocks in one repository.
        if read.len() == commits.len() {
            dates.extend(read.into_iter().map(|(commit, at)| ((repo, commit), at)));
        }
    }
    let key = |id: &InstanceId| {
        let Some(c) = candidates.get(id) else {
            return (None, id.clone());
        };
        let at = dates
            .get(&(c.repo.as_str(), c.base_commit.as_str()))
            .copied()
            .or_else(|| seconds(&c.created_at));
        (at, id.clone())
    };
    let mut ordered = items.to_vec();
    ordered.sort_by_cached_key(key);
    ordered
}

/// What [`launch_order`] reads of a candidate.
pub(super) struct Commit {
    repo: String,
    base_commit: String,
    created_at: String,
}

impl Commit {
    pub(super) fn of(candidate: &Candidate) -> Self {
        Self {
            repo: candidate.repo.clone(),
            base_commit: candidate.base_commit.clone(),
            created_at: candidate.created_at.clone(),
        }
    }
}

/// Seconds since the epoch of an RFC 3339 time.
fn seconds(text: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(text.trim())
        .ok()
        .map(|t| t.timestamp())
}

/// How the cold launch's baseline differs from the reused one's: `differs: ` and each test
/// whose status differs (`id: reused → cold`, `missing` where a side lacks it), or why the
/// cold launch did not build; `None` when they are the same.
fn difference(reused: &BTreeMap<String, TestStatus>, cold: &EnvironmentRecord) -> Option<String> {
    if cold.status != kiln_schema::EnvironmentStatus::Built {
        return Some(format!(
            "differs: the cold launch did not build ({})",
            cold.failure_class.map_or("unknown", FailureClass::as_str)
        ));
    }
    let shown = |s: Option<&TestStatus>| s.map_or("missing", |s| s.as_str());
    let differing: Vec<String> = reused
        .keys()
        .chain(cold.baseline.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .filter(|id| reused.get(*id) != cold.baseline.get(*id))
        .map(|id| {
            format!(
                "{id}: {} → {}",
                shown(reused.get(id)),
                shown(cold.baseline.get(id))
            )
        })
        .collect();
    (!differing.is_empty()).then(|| format!("differs: {}", differing.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_environments_the_rules_built_alone_are_sources() {
        let reuse = Reuse {
            built: Arc::default(),
            turns: Arc::default(),
            lanes: Arc::default(),
            reused: Arc::default(),
        };
        for (n, by) in [
            kiln_schema::BuiltBy::Agent,
            kiln_schema::BuiltBy::Recipe,
            kiln_schema::BuiltBy::Repair,
            kiln_schema::BuiltBy::Rules,
        ]
        .into_iter()
        .enumerate()
        {
            let id = InstanceId::new(&format!("o__r-{n}")).unwrap();
            let mut candidate = Candidate::new(id.clone());
            candidate.repo = "o/r".into();
            let mut row = EnvironmentRecord::new(id);
            row.status = kiln_schema::EnvironmentStatus::Built;
            row.image_digest = Some(format!("sha256:{n}"));
            row.built_by = Some(by);
            reuse.built(&candidate, &row);
        }
        let sources: Vec<String> = reuse
            .sources("o/r")
            .into_iter()
            .map(|s| s.instance_id)
            .collect();
        assert_eq!(sources, ["o__r-3"]);
    }

    #[test]
    fn a_repositorys_instances_take_turns_along_chains_of_at_least_four() {
        let mut candidates = BTreeMap::new();
        let mut order = Vec::new();
        for (repo, n) in [("o/big", 10), ("o/pair", 2)] {
            for i in 0..n {
                let id = InstanceId::new(&format!("{}-{i}", repo.replace('/', "__"))).unwrap();
                let mut c = Candidate::new(id.clone());
                c.repo = repo.into();
                candidates.insert(id.clone(), c);
                order.push(id);
            }
        }
        let lanes = lanes(&order, &candidates, 8);
        let of = |id: &str| lanes[&InstanceId::new(id).unwrap()];
        // 10 instances: two chains, dealt in order; 2 instances: one chain.
        let big: Vec<usize> = (0..10).map(|i| of(&format!("o__big-{i}"))).collect();
        assert_eq!(big, [0, 1, 0, 1, 0, 1, 0, 1, 0, 1]);
        assert_eq!((of("o__pair-0"), of("o__pair-1")), (0, 0));
        // Never more chains than launches at once.
        let one = super::lanes(&order, &candidates, 1);
        assert!(one.values().all(|lane| *lane == 0));
    }

    #[test]
    fn baselines_are_compared_test_by_test() {
        let statuses = |pairs: &[(&str, TestStatus)]| -> BTreeMap<String, TestStatus> {
            pairs.iter().map(|(k, v)| ((*k).to_string(), *v)).collect()
        };
        let mut cold = EnvironmentRecord::new(InstanceId::new("o__r-1").unwrap());
        cold.status = kiln_schema::EnvironmentStatus::Built;
        cold.baseline = statuses(&[("a", TestStatus::Pass), ("b", TestStatus::Fail)]);
        assert_eq!(difference(&cold.baseline.clone(), &cold), None);
        let reused = statuses(&[("a", TestStatus::Fail), ("c", TestStatus::Pass)]);
        assert_eq!(
            difference(&reused, &cold).as_deref(),
            Some("differs: a: fail → pass, b: missing → fail, c: pass → missing")
        );
        cold.status = kiln_schema::EnvironmentStatus::Failed;
        cold.failure_class = Some(FailureClass::Build);
        assert_eq!(
            difference(&reused, &cold).as_deref(),
            Some("differs: the cold launch did not build (build)")
        );
    }
}
