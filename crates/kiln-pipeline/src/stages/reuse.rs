//! Environment reuse across the commits of a repository (`[stages.<launch>] reuse = true`): the
//! environments built so far per repository, and a turn per repository so that its instances
//! launch one after another, oldest first. `kiln_launch` picks the nearest ancestor's.

use std::collections::BTreeMap;
use std::sync::Arc;

use kiln_core::config::NodeKind;
use kiln_schema::{Candidate, EnvironmentRecord, InstanceId};

use super::context::StageContext;

/// What `reuse` shares between the launches of a stage: the built environments per repository
/// (this run's, and earlier runs' of the dataset) and a turn per repository, so that its
/// instances launch one after another, oldest first.
#[derive(Clone)]
pub(super) struct Reuse {
    built: Arc<std::sync::Mutex<BTreeMap<String, Vec<kiln_launch::ReuseSource>>>>,
    turns: Arc<std::sync::Mutex<BTreeMap<String, Arc<tokio::sync::Mutex<()>>>>>,
}

impl Reuse {
    /// The built environments of this run's rows and of earlier runs' launch stages (a run
    /// whose table cannot be read is passed over).
    pub(super) fn new(
        cx: &StageContext<'_>,
        rows: &[EnvironmentRecord],
        candidates: &BTreeMap<InstanceId, Candidate>,
    ) -> Self {
        let reuse = Self {
            built: Arc::default(),
            turns: Arc::default(),
        };
        let mut known: Vec<(EnvironmentRecord, Option<Candidate>)> = rows
            .iter()
            .map(|r| (r.clone(), candidates.get(&r.instance_id).cloned()))
            .collect();
        let root = &cx.pipeline.dataset.root;
        let name = &cx.pipeline.dataset.name;
        for id in kiln_store::run_ids(root, name).unwrap_or_default() {
            if id == cx.run.run_id() {
                continue;
            }
            let Ok(run) = kiln_store::RunStore::open(root, name, &id) else {
                continue;
            };
            let (Ok(launched), Ok(tasks)) = (
                crate::summary::rows::<EnvironmentRecord>(cx.pipeline, &run, NodeKind::Launch),
                crate::summary::rows::<Candidate>(cx.pipeline, &run, NodeKind::Ingest),
            ) else {
                continue;
            };
            let tasks: BTreeMap<InstanceId, Candidate> = tasks
                .into_iter()
                .map(|c| (c.instance_id.clone(), c))
                .collect();
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

    /// Waits for the repository's turn; the turn ends when the guard is dropped.
    pub(super) async fn turn(&self, repo: &str) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = {
            let mut turns = self
                .turns
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            Arc::clone(turns.entry(repo.to_string()).or_default())
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

    /// Records `row` as a source when it built an image with a known digest.
    pub(super) fn built(&self, candidate: &Candidate, row: &EnvironmentRecord) {
        let (Some(image), true) = (
            row.image_digest.clone(),
            row.status == kiln_schema::EnvironmentStatus::Built,
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
            });
    }
}
