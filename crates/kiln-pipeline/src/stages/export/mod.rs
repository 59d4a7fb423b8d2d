//! `export`: the Parquet release and its dataset card.

use std::collections::{BTreeMap, BTreeSet};

use kiln_core::config::{NodeKind, NodeSettings};
use kiln_schema::{
    Candidate, EnvironmentRecord, PlatformLabel, ReleaseInstance, ValidationRecord, Verdict,
};

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
        let harness_note = match (&validation.log_parser, &environment.image) {
            (_, None) => "the environment has no image".to_string(),
            (Some(_), Some(_)) => String::new(),
            (None, Some(_)) => validation
                .log_parser_reason
                .clone()
                .unwrap_or_else(|| "validated before kiln checked the SWE-bench harness".into()),
        };
        let commit_urls = [&candidate.head_commit, &candidate.merge_commit]
            .into_iter()
            .flatten()
            .map(|sha| format!("https://github.com/{}/commit/{sha}", candidate.repo))
            .collect();
        rows.push(ReleaseInstance {
            eval_script: kiln_validate::harness::eval_script(
                &candidate.base_commit,
                &candidate.test_patch,
                &environment.rebuild_commands,
                &environment.test_command,
            ),
            log_parser: validation.log_parser.clone().unwrap_or_default(),
            eval_type: kiln_validate::harness::EVAL_TYPE.to_string(),
            environment_setup_commit: candidate.base_commit.clone(),
            docker_image: environment.image.clone().unwrap_or_default(),
            rebuild_cmds: environment.rebuild_commands.clone(),
            test_cmds: vec![environment.test_command.clone()],
            issue_numbers: candidate.issue_numbers.clone(),
            commit_urls,
            harness_note,
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
    if let Some(old) = kiln_store::release_split_rows(&release_dir, &settings.split)?
        && rows.len() < old
        && !cx.options.allow_fewer_rows
    {
        return Err(PipelineError::ReleaseShrinks {
            dir: release_dir.display().to_string(),
            split: settings.split.clone(),
            old,
            new: rows.len(),
        });
    }
    let per_shard = usize::try_from(settings.rows_per_shard).unwrap_or(10_000);
    kiln_store::write_release(&release_dir, &settings.split, &rows, per_shard)?;
    let mut card = format!(
        "Task instances built and validated by kiln (run `{}`): each row is a repository at a base commit, \
         a gold patch, a test patch, and the tests that go from failing to passing (`FAIL_TO_PASS`) or stay \
         passing (`PASS_TO_PASS`) in the environment image named in `image`.\n",
        cx.run.run_id()
    );
    card.push_str(&harness_paragraph(&rows, &settings.split));
    card.push_str(&write_lm_answers(cx, &release_dir, &rows)?);
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

/// The card's paragraph on the SWE-bench harness: how many rows it evaluates unchanged, how to
/// run it, and why the others cannot be.
fn harness_paragraph(rows: &[ReleaseInstance], split: &str) -> String {
    let ready = rows.iter().filter(|r| r.harness_note.is_empty()).count();
    let mut text = format!(
        "\n{ready} of {} rows are evaluable unchanged by the official SWE-bench harness (`pip install \
         swebench`, 5.x): each names its environment image (`image`), its `eval_script`, a `log_parser` \
         from the harness's `PARSER_REGISTRY` that reads the test output as kiln did (checked on kiln's own \
         runs), and `eval_type`. With the images present locally: `python -m \
         swebench.harness.run_evaluation -d data/{split}-00000-of-00001.parquet -p <predictions> -id <run>` (one shard per call).\n",
        rows.len()
    );
    let others: Vec<&ReleaseInstance> =
        rows.iter().filter(|r| !r.harness_note.is_empty()).collect();
    if !others.is_empty() {
        text.push_str("\nRows the harness cannot evaluate unchanged (`harness_note`):\n\n");
        for row in others {
            text.push_str(&format!("- `{}`: {}\n", row.instance_id, row.harness_note));
        }
    }
    text
}

/// File of a release that holds the LM answers behind its rows.
const LM_ANSWERS: &str = "lm-answers.jsonl";

/// Writes the LM answers that decided the filter and split of the released rows (one stored
/// record per line: the request as sent, the response as received, tokens and cost), so a
/// release says exactly which answers made it; returns the card's paragraph about them.
fn write_lm_answers(
    cx: &StageContext<'_>,
    release_dir: &std::path::Path,
    rows: &[ReleaseInstance],
) -> Result<String, PipelineError> {
    let released: BTreeSet<&str> = rows.iter().map(|r| r.instance_id.as_str()).collect();
    let mut keys: Vec<String> = Vec::new();
    for verdict in crate::summary::rows::<Verdict>(cx.pipeline, cx.run, NodeKind::Filter)? {
        if released.contains(verdict.instance_id.as_str()) {
            keys.extend(verdict.answer_keys);
        }
    }
    for label in crate::summary::rows::<PlatformLabel>(cx.pipeline, cx.run, NodeKind::Split)? {
        if released.contains(label.instance_id.as_str()) {
            keys.extend(label.answer_keys);
        }
    }
    keys.sort();
    keys.dedup();
    let answers = kiln_lm::read_answers(cx.run.dir(), &keys)?;
    let path = release_dir.join(LM_ANSWERS);
    if answers.is_empty() {
        // A release re-exported without an LM must not keep the answers of an earlier export.
        if path.exists() {
            std::fs::remove_file(&path).map_err(|e| PipelineError::Host {
                what: format!("remove the earlier LM answers {}", path.display()),
                message: e.to_string(),
            })?;
        }
        return Ok(String::new());
    }
    let mut text = String::new();
    for answer in &answers {
        text.push_str(&serde_json::to_string(answer).map_err(|e| {
            PipelineError::Internal(format!("an LM answer does not serialise: {e}"))
        })?);
        text.push('\n');
    }
    std::fs::create_dir_all(release_dir).map_err(|e| PipelineError::Input {
        what: release_dir.display().to_string(),
        message: e.to_string(),
    })?;
    kiln_store::write_atomic(&path, text.as_bytes())?;
    let tokens: u64 = answers
        .iter()
        .map(|a| a.prompt_tokens.unwrap_or(0) + a.completion_tokens.unwrap_or(0))
        .sum();
    let cost: f64 = answers.iter().filter_map(|a| a.cost_usd).sum();
    Ok(format!(
        "\nThe {} LM answers behind the filter and split of these rows ({tokens} tokens, ${cost:.4}) are in \
         `{LM_ANSWERS}`, one per line with the request as sent and the response as received.\n",
        answers.len()
    ))
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
