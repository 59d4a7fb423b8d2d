//! The rows of this run that a release publishes: one per validated instance, made of its
//! candidate, its environment and its validation.

use std::collections::BTreeMap;

use kiln_core::config::NodeKind;
use kiln_schema::{
    Candidate, EnvironmentRecord, InstanceId, PlatformLabel, ReleaseInstance, ValidationRecord,
    ValidationStatus, Verdict, rows_by_id,
};

use crate::error::PipelineError;
use crate::stages::context::{StageContext, started};

/// The release rows of this run's validated instances, in the order validation wrote them.
///
/// Reads the stage's inputs (candidates, environments, platform labels, validations) and the
/// run's filter verdicts, and says the stage started over every validation row; an instance
/// whose candidate or environment is missing has no row.
pub(super) fn validated_rows(cx: &StageContext<'_>) -> Result<Vec<ReleaseInstance>, PipelineError> {
    let candidates = rows_by_id(cx.candidates()?);
    let environments = rows_by_id(
        cx.input_rows::<EnvironmentRecord>(NodeKind::Launch)?
            .unwrap_or_default(),
    );
    let platforms: BTreeMap<InstanceId, String> = cx
        .input_rows::<PlatformLabel>(NodeKind::Split)?
        .unwrap_or_default()
        .into_iter()
        .map(|p| (p.instance_id, p.platform))
        .collect();
    let validations = cx
        .input_rows::<ValidationRecord>(NodeKind::Validate)?
        .unwrap_or_default();
    // The filter is no input of the export (the split stands between them): its verdicts are
    // read from the run.
    let verdicts = rows_by_id(crate::summary::rows::<Verdict>(
        cx.pipeline,
        cx.run,
        NodeKind::Filter,
    )?);
    started(cx, validations.len(), 0);
    let run_id = cx.run.run_id().to_string();
    let mut rows: Vec<ReleaseInstance> = Vec::new();
    for validation in validations
        .iter()
        .filter(|v| v.status == ValidationStatus::Validated)
    {
        let id = &validation.instance_id;
        let (Some(candidate), Some(environment)) = (candidates.get(id), environments.get(id))
        else {
            continue;
        };
        let platform = platforms.get(id).cloned().unwrap_or_else(|| "linux".into());
        let mut row = release_row(validation, candidate, environment, platform, &run_id);
        carry_verdict(&mut row, verdicts.get(id));
        rows.push(row);
    }
    Ok(rows)
}

/// One instance's release row: the SWE-bench columns (with the harness's `eval_script` and
/// `log_parser`), then what kiln adds about its environment, platform and run.
fn release_row(
    validation: &ValidationRecord,
    candidate: &Candidate,
    environment: &EnvironmentRecord,
    platform: String,
    run_id: &str,
) -> ReleaseInstance {
    ReleaseInstance {
        eval_script: kiln_validate::harness::eval_script(
            &candidate.base_commit,
            &candidate.test_patch,
            &environment.rebuild_commands,
            &environment.test_command,
            &environment.parser,
            environment.parser_script.as_deref(),
        ),
        log_parser: validation.log_parser.clone().unwrap_or_default(),
        eval_type: kiln_validate::harness::EVAL_TYPE.to_string(),
        environment_setup_commit: candidate.base_commit.clone(),
        image: environment.image.clone().unwrap_or_default(),
        image_digest: environment.image_digest.clone(),
        rebuild_cmds: environment.rebuild_commands.clone(),
        test_cmds: vec![environment.test_command.clone()],
        issue_numbers: candidate.issue_numbers.clone(),
        commit_urls: commit_urls(candidate),
        harness_note: harness_note(validation, environment),
        instance_id: validation.instance_id.clone(),
        repo: candidate.repo.clone(),
        pull_number: candidate.pull_number.map(|n| n.to_string()),
        base_commit: candidate.base_commit.clone(),
        patch: candidate.patch.clone(),
        test_patch: candidate.test_patch.clone(),
        problem_statement: candidate.problem_statement.clone(),
        hints_text: candidate.hints_text.clone(),
        created_at: candidate.created_at.clone(),
        version: candidate
            .version
            .clone()
            .or_else(|| environment.project_version.clone()),
        license: environment.license.clone(),
        // Tests the harness parser cannot read go apart, so that it grades the rest.
        FAIL_TO_PASS: graded(&validation.FAIL_TO_PASS, &validation.harness_unread, true),
        PASS_TO_PASS: graded(&validation.PASS_TO_PASS, &validation.harness_unread, true),
        FAIL_TO_PASS_UNGRADED: graded(&validation.FAIL_TO_PASS, &validation.harness_unread, false),
        PASS_TO_PASS_UNGRADED: graded(&validation.PASS_TO_PASS, &validation.harness_unread, false),
        setup_commands: environment.setup_commands.clone(),
        parser: environment.parser.clone(),
        parser_script: environment.parser_script.clone(),
        language: environment.language.clone(),
        platform,
        dockerfile: environment.dockerfile.clone(),
        launch_seconds: environment.total_seconds,
        validate_seconds: validation.total_seconds,
        repeats: validation.repeats,
        identical_runs_before: validation.identical_runs_before,
        identical_runs_after: validation.identical_runs_after,
        solution_leak: validation.solution_leak,
        solution_leak_matches: validation.solution_leak_matches.clone(),
        difficulty: validation.difficulty,
        difficulty_measures: validation.difficulty_measures.clone(),
        tests_defined: validation.tests_defined,
        tests_collected: validation.tests_collected,
        whole_suite: validation.whole_suite.clone(),
        broken_outside_scope: validation.broken_outside_scope.clone(),
        filter_judge: None,
        filter_label: None,
        filter_reason: None,
        filter_flags: Vec::new(),
        filter_fallback: None,
        run_id: run_id.to_string(),
    }
}

/// Puts the filter's verdict on the row (null columns when no filter judged it).
fn carry_verdict(row: &mut ReleaseInstance, verdict: Option<&Verdict>) {
    let Some(verdict) = verdict else {
        return;
    };
    row.filter_judge = Some(verdict.judge.clone());
    row.filter_label = Some(verdict.label.clone());
    row.filter_reason = Some(verdict.reason.clone());
    row.filter_flags = verdict.flags.clone();
    row.filter_fallback = verdict.fallback.clone();
}

/// Why the official SWE-bench harness cannot evaluate the row unchanged (empty when it can):
/// the environment has no image, or validation found no harness parser that reads its output.
fn harness_note(validation: &ValidationRecord, environment: &EnvironmentRecord) -> String {
    match (&validation.log_parser, &environment.image) {
        (_, None) => "the environment has no image".to_string(),
        (Some(_), Some(_)) => String::new(),
        (None, Some(_)) => validation
            .log_parser_reason
            .clone()
            .unwrap_or_else(|| "validated before kiln checked the SWE-bench harness".into()),
    }
}

/// The GitHub addresses of the pull request's head and merge commits, those the crawl knew.
fn commit_urls(candidate: &Candidate) -> Vec<String> {
    [&candidate.head_commit, &candidate.merge_commit]
        .into_iter()
        .flatten()
        .map(|sha| format!("https://github.com/{}/commit/{sha}", candidate.repo))
        .collect()
}

/// The tests of `list` the harness reads (`read`), or those it cannot (`!read`), by
/// validation's `unread`.
fn graded(list: &[String], unread: &[String], read: bool) -> kiln_schema::TestList {
    list.iter()
        .filter(|id| unread.contains(id) != read)
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use kiln_schema::{InstanceId, ReleaseInstance, Verdict};

    use super::{carry_verdict, graded};

    /// A kept LM verdict with a flag is on the row; a row no filter judged has none.
    #[test]
    fn the_filter_verdict_is_carried_when_there_is_one() {
        let id = InstanceId::new("o__r-1").unwrap();
        let verdict = Verdict {
            keep: true,
            label: "ok".into(),
            reason: "clear steps and expected output".into(),
            judge: "m1+m2".into(),
            flags: vec!["exact-string-assertions".into()],
            ..Verdict::new(id.clone())
        };
        let mut row = ReleaseInstance::new(id.clone());
        carry_verdict(&mut row, Some(&verdict));
        assert_eq!(row.filter_judge.as_deref(), Some("m1+m2"));
        assert_eq!(row.filter_label.as_deref(), Some("ok"));
        assert_eq!(
            row.filter_reason.as_deref(),
            Some("clear steps and expected output")
        );
        assert_eq!(row.filter_flags, ["exact-string-assertions"]);
        assert_eq!(row.filter_fallback, None);
        let mut unjudged = ReleaseInstance::new(id);
        carry_verdict(&mut unjudged, None);
        assert_eq!(
            (unjudged.filter_judge, unjudged.filter_flags),
            (None, Vec::<String>::new())
        );
    }

    #[test]
    fn tests_the_harness_cannot_read_are_listed_apart() {
        let list: Vec<String> = ["a", "b[x\ny]", "c"].map(String::from).to_vec();
        let unread = vec!["b[x\ny]".to_string()];
        assert_eq!(graded(&list, &unread, true).to_vec(), ["a", "c"]);
        assert_eq!(graded(&list, &unread, false).to_vec(), ["b[x\ny]"]);
        assert_eq!(graded(&list, &[], true).to_vec(), list);
    }
}
