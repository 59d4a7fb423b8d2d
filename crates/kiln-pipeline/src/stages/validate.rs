//! `validate`: FAIL_TO_PASS and PASS_TO_PASS of each built environment.

use std::collections::{BTreeMap, BTreeSet};

use kiln_core::config::{NodeKind, ValidateSettings};
use kiln_core::runtime::LABEL_DATASET;
use kiln_schema::{EnvironmentRecord, EnvironmentStatus, InstanceId, ValidationRecord, rows_by_id};

use super::containers;
use super::context::{StageContext, StageOutcome, finish};
use crate::error::PipelineError;

pub(crate) async fn validate(
    cx: &StageContext<'_>,
    settings: &ValidateSettings,
) -> Result<StageOutcome, PipelineError> {
    let candidates = rows_by_id(cx.candidates()?);
    let environments = rows_by_id(
        cx.input_rows::<EnvironmentRecord>(NodeKind::Launch)?
            .unwrap_or_default()
            .into_iter()
            .filter(|e| {
                e.status == EnvironmentStatus::Built && candidates.contains_key(&e.instance_id)
            }),
    );
    let Some(clone_url_template) = cx.clone_url_template().map(str::to_string) else {
        return Err(PipelineError::Internal(
            "validate has no source input".into(),
        ));
    };
    let mirrors = cx.mirrors();
    let recipes = super::launch::recipes_dir(cx.pipeline);
    let mut table = cx.table::<ValidationRecord>()?;
    let items: Vec<InstanceId> = environments.keys().cloned().collect();
    let ran = containers::run(
        cx,
        &mut table,
        items.clone(),
        settings.concurrency,
        // The runs' containers go before the item's side images do: validate waits for them.
        |id, logs, _removals| {
            let (Some(environment), Some(candidate)) = (environments.get(id), candidates.get(id))
            else {
                return Ok(None);
            };
            Ok(Some(kiln_validate::ValidateRequest {
                candidate: candidate.clone(),
                environment: environment.clone(),
                log_dir: logs.dir,
                log_dir_label: logs.label,
                labels: cx.labels(),
                settings: settings.clone(),
                docker: cx.pipeline.docker.clone(),
                stage: cx.node.name.clone(),
                source: kiln_validate::gold::Source {
                    mirrors: mirrors.clone(),
                    clone_url: kiln_github::clone_url(&clone_url_template, &candidate.repo),
                },
            }))
        },
        |runtime, request, reporter| {
            let recipes = recipes.clone();
            async move {
                let row = kiln_validate::validate(runtime, &request, reporter.as_ref())
                    .await
                    .map_err(|kiln_validate::ValidateError::Engine(e)| PipelineError::Engine(e))?;
                settle_recipe(&recipes, &row, reporter.as_ref());
                Ok(row)
            }
        },
        validation_outcome,
    )
    .await?;
    // A run killed between a side's build and its removal left the side's image: scratch, of
    // this dataset, nobody's now.
    cx.runtime()?
        .remove_leftover_images(LABEL_DATASET, &crate::labels::dataset_label(cx.pipeline))
        .await?;
    let items: BTreeSet<InstanceId> = items.into_iter().collect();
    let mut stats = agreement_stats(&table.rows()?);
    if let Some(wall) = table.manifest().stats.get(super::context::WALL_SECONDS) {
        stats.insert(super::context::WALL_SECONDS.to_string(), *wall);
    }
    table.set_stats(stats)?;
    finish(
        cx,
        &mut table,
        &items,
        ran.processed,
        ran.skipped,
        validation_outcome,
    )
}

/// A recipe the launch agent learned from this instance becomes its repository's once the
/// instance validates, and is dropped when it does not: a recipe is written only after an
/// instance built with it validated. A validation that failed for the machine (no row) leaves
/// it waiting.
fn settle_recipe(
    recipes: &std::path::Path,
    row: &ValidationRecord,
    reporter: &dyn kiln_core::Reporter,
) {
    let id = row.instance_id.as_str();
    let settled = match row.status {
        kiln_schema::ValidationStatus::Validated => {
            kiln_launch::recipe::promote(recipes, id).map(|stored| {
                stored.map(|path| format!("the recipe {id} taught is stored in {}", path.display()))
            })
        }
        _ => kiln_launch::recipe::discard(recipes, id).map(|()| None),
    };
    match settled {
        Ok(Some(message)) => reporter.report(kiln_core::Event::Note { message }),
        Ok(None) => {}
        Err(e) => reporter.report(kiln_core::Event::Note {
            message: format!("the recipe of {id}: failed to {e}"),
        }),
    }
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
        None => row.status.to_string(),
        Some(class) => format!("{}:{class}", row.status),
    }
}
