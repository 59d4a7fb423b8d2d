//! `ingest`: candidates from a SWE-bench or Multi-SWE-bench task file.

use std::collections::{BTreeMap, BTreeSet};

use kiln_core::Event;
use kiln_core::config::IngestSettings;
use kiln_schema::{Candidate, CandidateStatus, InstanceId};

use super::context::{StageContext, StageOutcome, finish, plan, started};
use crate::error::PipelineError;
use crate::shards;

pub(crate) fn ingest(
    cx: &StageContext<'_>,
    settings: &IngestSettings,
) -> Result<StageOutcome, PipelineError> {
    let mut table = cx.table::<Candidate>()?;
    let mut rows = if settings
        .path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("parquet"))
    {
        // A task file as the Hub publishes it, read into JSON objects by the store (the
        // crate that links Parquet), then taken as the JSONL reader takes lines.
        let objects =
            kiln_store::read_parquet_objects(&settings.path).map_err(|e| PipelineError::Input {
                what: format!("the task file {}", settings.path.display()),
                message: e.to_string(),
            })?;
        let name = settings.path.file_name().map_or_else(
            || settings.path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        kiln_github::read_task_objects(&name, objects)
    } else {
        kiln_github::read_task_file(&settings.path).map_err(
            |kiln_github::IngestError::Read { path, source }| PipelineError::Input {
                what: format!("the task file {}", path.display()),
                message: source.to_string(),
            },
        )?
    };
    if !settings.instances.is_empty() {
        rows.retain(|r| {
            settings
                .instances
                .iter()
                .any(|i| r.instance_id == i.as_str())
        });
    }
    // Duplicate ids in a task file: the first wins, the others become error rows so nothing is
    // silently dropped.
    let mut seen = BTreeSet::new();
    for (index, row) in rows.iter_mut().enumerate() {
        if !seen.insert(row.instance_id.clone()) {
            row.error = Some(format!(
                "{}: duplicate instance_id {}",
                row.origin, row.instance_id
            ));
            row.status = CandidateStatus::Error;
            row.instance_id = InstanceId::new(&format!(
                "duplicate-{}",
                row.origin.replace([':', '/'], "-")
            ))
            .unwrap_or_else(|_| InstanceId::placeholder("duplicate-entry", index));
        }
    }
    if let Some(shard) = &cx.pipeline.shard {
        // A split run keeps the repositories the plan gives this shard; a row without a
        // repository (an unreadable line) stays with shard 0, so it is kept exactly once.
        let mut repositories: BTreeMap<String, u64> = BTreeMap::new();
        for row in rows.iter().filter(|r| !r.repo.is_empty()) {
            *repositories.entry(row.repo.clone()).or_default() += 1;
        }
        let plan = shards::plan(cx.pipeline, shard, &repositories)?;
        shards::record_plan(&cx.node.name, &mut table, &plan)?;
        rows.retain(|r| plan.shard_of(&r.repo).unwrap_or(0) == shard.id.index);
    }
    let items: Vec<InstanceId> = rows.iter().map(|r| r.instance_id.clone()).collect();
    started(cx, items.len(), 0);
    let (todo, skipped) = plan(cx, &mut table, items.clone())?;
    let todo: BTreeSet<InstanceId> = todo.into_iter().collect();
    let new_rows: Vec<Candidate> = rows
        .into_iter()
        .filter(|r| todo.contains(&r.instance_id))
        .collect();
    if !new_rows.is_empty() {
        table.append(&new_rows)?;
    }
    for row in new_rows.iter().filter(|r| r.status != CandidateStatus::Ok) {
        cx.reporter.report(Event::Note {
            message: row.error.clone().unwrap_or_default(),
        });
    }
    let items: BTreeSet<InstanceId> = items.into_iter().collect();
    finish(
        cx,
        &mut table,
        &items,
        new_rows.len() as u64,
        skipped,
        |r| r.status.to_string(),
    )
}
