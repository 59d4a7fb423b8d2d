//! `validate`: FAIL_TO_PASS and PASS_TO_PASS of each built environment.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use kiln_core::config::{NodeKind, NodeSettings};
use kiln_schema::{Candidate, EnvironmentRecord, ValidationRecord};

use super::{StageContext, StageOutcome, finish, for_each_item, plan, started, wait_for_removals};
use crate::PipelineError;

pub(crate) async fn validate(cx: &StageContext<'_>) -> Result<StageOutcome, PipelineError> {
    let NodeSettings::Validate(settings) = &cx.node.settings else {
        return Err(PipelineError::Internal(
            "wrong settings for a validate node".into(),
        ));
    };
    let candidates: BTreeMap<String, Candidate> = cx
        .candidates()?
        .into_iter()
        .map(|c| (c.instance_id.clone(), c))
        .collect();
    let environments: Vec<EnvironmentRecord> = cx
        .input_rows::<EnvironmentRecord>(NodeKind::Launch)?
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.status == "built" && candidates.contains_key(&e.instance_id))
        .collect();
    let environments = cx.usable_ids(environments, |e| &e.instance_id);
    let mut table = cx.table::<ValidationRecord>()?;
    let items: Vec<String> = environments
        .iter()
        .map(|(_, e)| e.instance_id.clone())
        .collect();
    let (todo, skipped) = plan(cx, &mut table, items.clone())?;
    started(cx, items.len(), skipped);
    let runtime = if todo.is_empty() {
        None
    } else {
        Some(cx.runtime()?)
    };
    let removals = kiln_core::Removals::default();
    let mut requests = BTreeMap::new();
    for (instance_id, environment) in environments {
        let id = environment.instance_id.clone();
        if !todo.contains(&id) {
            continue;
        }
        let Some(candidate) = candidates.get(&id) else {
            continue;
        };
        let (log_dir, log_dir_label) = cx.log_dir(&instance_id)?;
        requests.insert(
            id,
            kiln_validate::ValidateRequest {
                candidate: candidate.clone(),
                environment,
                log_dir,
                log_dir_label,
                labels: cx.labels(),
                settings: settings.clone(),
                docker: cx.pipeline.docker.clone(),
                stage: cx.node.name.clone(),
                removals: removals.clone(),
            },
        );
    }
    let requests = Arc::new(requests);
    let reporter = Arc::clone(&cx.reporter);
    let concurrency = cx
        .options
        .concurrency
        .unwrap_or(usize::try_from(settings.concurrency).unwrap_or(1));
    let processed = match runtime {
        None => Ok(0),
        Some(runtime) => {
            for_each_item(
                cx,
                &mut table,
                todo,
                concurrency,
                |id| {
                    let runtime = Arc::clone(&runtime);
                    let reporter = Arc::clone(&reporter);
                    let requests = Arc::clone(&requests);
                    async move {
                        let Some(request) = requests.get(&id) else {
                            return Err(PipelineError::Internal(format!("no request for {id}")));
                        };
                        kiln_validate::validate(runtime, request, reporter.as_ref())
                            .await
                            .map_err(|kiln_validate::ValidateError::Engine(e)| {
                                PipelineError::Engine(e)
                            })
                    }
                },
                validation_outcome,
            )
            .await
        }
    };
    wait_for_removals(cx, &removals).await;
    let processed = processed?;
    let items: BTreeSet<String> = items.into_iter().collect();
    let mut stats = agreement_stats(&table.rows()?);
    if let Some(wall) = table.manifest().stats.get(super::WALL_SECONDS) {
        stats.insert(super::WALL_SECONDS.to_string(), *wall);
    }
    table.set_stats(stats)?;
    finish(
        cx,
        &mut table,
        &items,
        processed,
        skipped,
        validation_outcome,
    )
}

/// How the stage's FAIL_TO_PASS lists agree with the published ones: how many could be
/// compared, and how many of those relate in each way, as strings and by meaning.
fn agreement_stats(rows: &[ValidationRecord]) -> BTreeMap<String, f64> {
    let mut stats = BTreeMap::new();
    for row in rows {
        let (Some(exact), Some(by_meaning)) = (&row.agreement, &row.agreement_by_meaning) else {
            continue;
        };
        *stats.entry("agreement.compared".to_string()).or_insert(0.0) += 1.0;
        *stats.entry(format!("agreement.{exact}")).or_insert(0.0) += 1.0;
        *stats
            .entry(format!("agreement.by_meaning.{by_meaning}"))
            .or_insert(0.0) += 1.0;
    }
    stats
}

fn validation_outcome(row: &ValidationRecord) -> String {
    match &row.failure_class {
        None => row.status.clone(),
        Some(class) => format!("{}:{class}", row.status),
    }
}
