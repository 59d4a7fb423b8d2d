//! `export`: the Parquet release and its dataset card.

use std::collections::{BTreeMap, BTreeSet};

use kiln_core::config::{NodeKind, NodeSettings};
use kiln_schema::{Candidate, EnvironmentRecord, PlatformLabel, ReleaseInstance, ValidationRecord};

use super::{StageContext, StageOutcome, finish, started};
use crate::PipelineError;

pub(crate) fn export(cx: &StageContext<'_>) -> Result<StageOutcome, PipelineError> {
    let NodeSettings::Export(settings) = &cx.node.settings else {
        return Err(PipelineError::Internal(
            "wrong settings for an export node".into(),
        ));
    };
    let candidates: BTreeMap<String, Candidate> = cx
        .candidates()?
        .into_iter()
        .map(|c| (c.instance_id.clone(), c))
        .collect();
    let environments: BTreeMap<String, EnvironmentRecord> = cx
        .input_rows::<EnvironmentRecord>(NodeKind::Launch)?
        .unwrap_or_default()
        .into_iter()
        .map(|e| (e.instance_id.clone(), e))
        .collect();
    let platforms: BTreeMap<String, String> = cx
        .input_rows::<PlatformLabel>(NodeKind::Split)?
        .unwrap_or_default()
        .into_iter()
        .map(|p| (p.instance_id, p.platform))
        .collect();
    let validations = cx
        .input_rows::<ValidationRecord>(NodeKind::Validate)?
        .unwrap_or_default();
    started(cx, validations.len(), 0);
    let mut rows: Vec<ReleaseInstance> = Vec::new();
    for validation in validations.into_iter().filter(|v| v.status == "validated") {
        let id = &validation.instance_id;
        let (Some(candidate), Some(environment)) = (candidates.get(id), environments.get(id))
        else {
            continue;
        };
        rows.push(ReleaseInstance {
            instance_id: id.clone(),
            repo: candidate.repo.clone(),
            pull_number: candidate.pull_number.map(|n| n.to_string()),
            base_commit: candidate.base_commit.clone(),
            patch: candidate.patch.clone(),
            test_patch: candidate.test_patch.clone(),
            problem_statement: candidate.problem_statement.clone(),
            hints_text: candidate.hints_text.clone(),
            created_at: candidate.created_at.clone(),
            version: candidate.version.clone(),
            FAIL_TO_PASS: validation.FAIL_TO_PASS.clone(),
            PASS_TO_PASS: validation.PASS_TO_PASS.clone(),
            image: environment.image.clone().unwrap_or_default(),
            setup_commands: environment.setup_commands.clone(),
            rebuild_commands: environment.rebuild_commands.clone(),
            test_command: environment.test_command.clone(),
            parser: environment.parser.clone(),
            language: environment.language.clone(),
            platform: platforms.get(id).cloned().unwrap_or_else(|| "linux".into()),
            dockerfile: environment.dockerfile.clone(),
            launch_seconds: environment.total_seconds,
            validate_seconds: validation.total_seconds,
            run_id: cx.run.run_id().to_string(),
        });
    }
    rows.sort_by(|a, b| a.instance_id.cmp(&b.instance_id));
    let tag = if settings.tag.is_empty() {
        release_month(cx.run.run_id())
    } else {
        settings.tag.clone()
    };
    let release_dir = cx
        .pipeline
        .dataset
        .root
        .join(&cx.pipeline.dataset.name)
        .join("releases")
        .join(&tag);
    let per_shard = usize::try_from(settings.rows_per_shard).unwrap_or(10_000);
    kiln_store::write_release(&release_dir, &settings.split, &rows, per_shard)?;
    let card = format!(
        "Task instances built and validated by kiln (run `{}`): each row is a repository at a base commit, \
         a gold patch, a test patch, and the tests that go from failing to passing (`FAIL_TO_PASS`) or stay \
         passing (`PASS_TO_PASS`) in the environment image named in `image`.\n",
        cx.run.run_id()
    );
    kiln_store::write_dataset_card(
        &release_dir,
        &cx.pipeline.dataset.name,
        &[(settings.split.clone(), rows.len())],
        &card,
    )?;
    let mut table = cx.table::<ReleaseInstance>()?;
    table.reset()?;
    if !rows.is_empty() {
        table.append(&rows)?;
    }
    let items: BTreeSet<String> = rows.iter().map(|r| r.instance_id.clone()).collect();
    let mut outcome = finish(cx, &mut table, &items, rows.len() as u64, 0, |r| {
        r.language.clone()
    })?;
    outcome.release_dir = Some(release_dir);
    Ok(outcome)
}

/// `YYYY-MM` of a run id (`YYYYMMDD-HHMMSS`).
fn release_month(run_id: &str) -> String {
    if run_id.len() >= 6 && run_id[..6].chars().all(|c| c.is_ascii_digit()) {
        format!("{}-{}", &run_id[..4], &run_id[4..6])
    } else {
        run_id.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::release_month;

    #[test]
    fn release_tag_is_the_run_month() {
        assert_eq!(release_month("20261202-154751"), "2026-12");
        assert_eq!(release_month("custom"), "custom");
    }
}
