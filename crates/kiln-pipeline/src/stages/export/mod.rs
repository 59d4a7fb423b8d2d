//! `export`: the Parquet release, its dataset card and `release.json`.
//!
//! A release's main split holds the validated instances no other release published (polars
//! joins against the keys of every other release); its frozen splits hold the same rows in
//! every release ([`frozen`]); the card describes all of it ([`card`]).

mod card;
mod frozen;

use std::collections::{BTreeMap, BTreeSet};

use kiln_core::Event;
use kiln_core::config::{ExportSettings, Node, NodeKind, NodeSettings, Pipeline};
use kiln_schema::{
    EnvironmentRecord, InstanceId, PlatformLabel, ReleaseInstance, ValidationRecord,
    ValidationStatus, Verdict, rows_by_id,
};
use kiln_store::CardMeta;
use kiln_store::analytics::Published;

use crate::error::PipelineError;
use crate::release::{RELEASE_FILE, ReleaseFile, ReleaseManifest, ReleaseSplit};
use crate::stages::context::{StageContext, StageOutcome, finish, started};

pub(crate) async fn export(
    cx: &StageContext<'_>,
    settings: &ExportSettings,
) -> Result<StageOutcome, PipelineError> {
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
    started(cx, validations.len(), 0);
    let mut rows: Vec<ReleaseInstance> = Vec::new();
    for validation in validations
        .into_iter()
        .filter(|v| v.status == ValidationStatus::Validated)
    {
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
            version: candidate
                .version
                .clone()
                .or_else(|| environment.project_version.clone()),
            license: environment.license.clone(),
            // Tests the harness parser cannot read go apart, so that it grades the rest.
            FAIL_TO_PASS: graded(&validation.FAIL_TO_PASS, &validation.harness_unread, true),
            PASS_TO_PASS: graded(&validation.PASS_TO_PASS, &validation.harness_unread, true),
            FAIL_TO_PASS_UNGRADED: graded(
                &validation.FAIL_TO_PASS,
                &validation.harness_unread,
                false,
            ),
            PASS_TO_PASS_UNGRADED: graded(
                &validation.PASS_TO_PASS,
                &validation.harness_unread,
                false,
            ),
            setup_commands: environment.setup_commands.clone(),
            parser: environment.parser.clone(),
            parser_script: environment.parser_script.clone(),
            language: environment.language.clone(),
            platform: platforms.get(id).cloned().unwrap_or_else(|| "linux".into()),
            dockerfile: environment.dockerfile.clone(),
            launch_seconds: environment.total_seconds,
            validate_seconds: validation.total_seconds,
            run_id: cx.run.run_id().to_string(),
        });
    }
    let tag = release_tag(cx.pipeline, cx.node, cx.run.run_id());
    let dataset_dir = cx.pipeline.dataset.root.join(&cx.pipeline.dataset.name);
    let releases_dir = dataset_dir.join("releases");
    let release_dir = releases_dir.join(&tag);
    // An export cut short between putting the old release aside and the new one in place.
    kiln_store::recover_replaced(&release_dir)?;
    // A release of this tag written by an earlier run keeps the rows this run does not have
    // (a second refresh of a month adds to its release); this run's rows replace theirs.
    // Told to, the export replaces the release with this run's rows alone.
    if !cx.options.allow_fewer_rows {
        let fresh: BTreeSet<InstanceId> = rows.iter().map(|r| r.instance_id.clone()).collect();
        let mut kept = 0;
        for shard in kiln_store::analytics::split_shards(&release_dir, &settings.split)? {
            for row in kiln_store::read_parquet::<ReleaseInstance>(&shard)? {
                if !fresh.contains(&row.instance_id) {
                    rows.push(row);
                    kept += 1;
                }
            }
        }
        if kept > 0 {
            cx.reporter.report(Event::Note {
                message: format!(
                    "export: release {tag} keeps {kept} row(s) of earlier runs that this run did not make \
                     (--allow-fewer-rows replaces the release with this run's rows alone)"
                ),
            });
        }
    }
    rows.sort_by(|a, b| a.instance_id.cmp(&b.instance_id));
    // Rows another release published (by id, or by repository and pull request) stay out.
    let published = Published::except(&releases_dir, &tag, &settings.split)?;
    let deduped = kiln_store::analytics::dedupe(&rows, &published, &tag)?;
    let mut keep = deduped.keep.iter().peekable();
    let rows: Vec<ReleaseInstance> = rows
        .into_iter()
        .enumerate()
        .filter_map(|(i, row)| keep.next_if(|k| **k == i).map(|_| row))
        .collect();
    if !deduped.duplicates.is_empty() {
        cx.reporter.report(Event::Note {
            message: format!(
                "export: {} validated instance(s) left out as duplicates (of a published row, a backport of one, or twice here; see {}/{RELEASE_FILE})",
                deduped.duplicates.len(),
                release_dir.display()
            ),
        });
    }
    let rows = publish_images(cx, &settings.image_registry, rows).await?;
    let per_shard = usize::try_from(settings.rows_per_shard).unwrap_or(10_000);
    let mut split_rows: Vec<(String, Vec<ReleaseInstance>)> = Vec::new();
    let mut frozen_records = BTreeMap::new();
    let mut draws = Vec::new();
    for split in &settings.frozen {
        let place = frozen::Place {
            dataset_dir: &dataset_dir,
            tag: &tag,
            current: &release_dir,
            main_split: &settings.split,
            fresh: &rows,
        };
        let (frozen_rows, record, draw) = frozen::frozen_split(split, &place)?;
        frozen_records.insert(split.name.clone(), record);
        split_rows.push((split.name.clone(), frozen_rows));
        draws.extend(draw);
    }
    split_rows.insert(0, (settings.split.clone(), rows));
    check_release_images(cx, &split_rows).await?;
    // The release is written whole beside the one it replaces, then put in its place: readers
    // and a crash see the old release or the new one, never a mixture of their shards.
    let staging = releases_dir.join(format!(".{tag}.staging"));
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(|e| PipelineError::Host {
            what: format!("remove the unfinished release {}", staging.display()),
            message: e.to_string(),
        })?;
    }
    let mut splits = BTreeMap::new();
    for (name, rows) in &split_rows {
        let written = kiln_store::write_release(&staging, name, rows, per_shard)?;
        let files = written
            .iter()
            .map(|path| {
                let relative = path.strip_prefix(&staging).unwrap_or(path);
                ReleaseFile::read(&staging, &relative.to_string_lossy())
            })
            .collect::<Result<Vec<_>, _>>()?;
        splits.insert(
            name.clone(),
            ReleaseSplit {
                rows: rows.len(),
                files,
                stats: kiln_store::analytics::split_stats(&staging, name)?,
            },
        );
    }
    let main_rows = &split_rows[0].1;
    let mut images: Vec<String> = split_rows
        .iter()
        .flat_map(|(_, rows)| rows.iter().map(|r| r.image.clone()))
        .filter(|i| !i.is_empty())
        .collect();
    images.sort();
    images.dedup();
    let mut manifest = ReleaseManifest {
        dataset: cx.pipeline.dataset.name.clone(),
        tag: tag.clone(),
        kiln_version: env!("CARGO_PKG_VERSION").to_string(),
        schema_version: kiln_schema::SCHEMA_VERSION,
        run_id: cx.run.run_id().to_string(),
        config_hash: cx.run.info().config_hash.clone(),
        exported_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        main_split: settings.split.clone(),
        splits,
        frozen: frozen_records,
        duplicates: deduped.duplicates,
        images,
        image_registry: (!settings.image_registry.is_empty())
            .then(|| settings.image_registry.clone()),
        license: settings.license.clone(),
        funnel: crate::summary::funnel(cx.pipeline, cx.run)?,
        files: Vec::new(),
    };
    let intro = format!(
        "Task instances built and validated by kiln: each row is a repository at a base commit, a gold patch, \
         a test patch, and the tests that go from failing to passing (`FAIL_TO_PASS`) or stay passing \
         (`PASS_TO_PASS`) in the environment image named in `image`. `{}` holds the instances this release \
         publishes first; an instance is never in the `{}` split of two releases.\n",
        settings.split, settings.split
    );
    let mut extra = harness_paragraph(&manifest, main_rows);
    extra.push_str(&write_lm_answers(cx, &staging, main_rows)?);
    let counts: Vec<(String, usize)> = split_rows
        .iter()
        .map(|(n, rows)| (n.clone(), rows.len()))
        .collect();
    let meta = CardMeta {
        name: &cx.pipeline.dataset.name,
        license: &settings.license,
        lists: &[(
            "tags",
            vec![
                "code".to_string(),
                "swe-bench".to_string(),
                "kiln".to_string(),
            ],
        )],
    };
    kiln_store::write_dataset_card(
        &staging,
        &meta,
        &counts,
        &card::body(&manifest, &intro, &extra),
    )?;
    for extra_file in ["README.md", LM_ANSWERS] {
        if staging.join(extra_file).exists() {
            manifest
                .files
                .push(ReleaseFile::read(&staging, extra_file)?);
        }
    }
    let text = serde_json::to_string_pretty(&manifest)
        .map_err(|e| PipelineError::Internal(format!("the release manifest: {e}")))?;
    kiln_store::write_atomic(&staging.join(RELEASE_FILE), text.as_bytes())?;
    kiln_store::replace_dir(&staging, &release_dir)?;
    // A new draw of a frozen split is kept only now that the release holding it is in place.
    for draw in &draws {
        frozen::keep_draw(&dataset_dir, draw)?;
    }
    let mut table = cx.table::<ReleaseInstance>()?;
    table.reset()?;
    // The release's place, for summaries (`kiln run` and `kiln refresh` print it).
    let state = BTreeMap::from([(
        crate::release::RELEASE_DIR_STATE.to_string(),
        serde_json::Value::String(release_dir.to_string_lossy().into_owned()),
    )]);
    table.append_with_state(main_rows, state)?;
    let items: BTreeSet<InstanceId> = main_rows.iter().map(|r| r.instance_id.clone()).collect();
    let mut outcome = finish(cx, &mut table, &items, main_rows.len() as u64, 0, |r| {
        r.language.clone()
    })?;
    outcome.release_dir = Some(release_dir);
    Ok(outcome)
}

/// Checks, before anything is written, that every row of every split names an image the engine
/// has, with the digest the row recorded: a release never names an image that does not exist.
async fn check_release_images(
    cx: &StageContext<'_>,
    split_rows: &[(String, Vec<ReleaseInstance>)],
) -> Result<(), PipelineError> {
    let Some(runtime) = &cx.runtime else {
        return Err(PipelineError::NoEngine(cx.node.name.clone()));
    };
    let rows: Vec<ReleaseInstance> = split_rows
        .iter()
        .flat_map(|(_, rows)| rows.iter().cloned())
        .collect();
    let checks = crate::ops::images::check_images(runtime.as_ref(), &rows, false).await?;
    let problems: Vec<String> = checks.iter().filter_map(|c| c.problem()).collect();
    if problems.is_empty() {
        return Ok(());
    }
    Err(PipelineError::Input {
        what: format!(
            "the environment images of {} release row(s)",
            problems.len()
        ),
        message: format!(
            "a release must name images that exist with the digest its rows recorded; nothing was written:\n  {}\n\
             build them again (`kiln stage launch --only ID --force`, then validate) or leave the rows out",
            problems.join("\n  ")
        ),
    })
}

/// With an image registry: names every row's image `<registry>/<local image>` and gives the
/// local image that name too, so the release evaluates on this machine before `kiln push`
/// publishes the images.
async fn publish_images(
    cx: &StageContext<'_>,
    registry: &str,
    mut rows: Vec<ReleaseInstance>,
) -> Result<Vec<ReleaseInstance>, PipelineError> {
    if registry.is_empty() {
        return Ok(rows);
    }
    let Some(runtime) = &cx.runtime else {
        return Err(PipelineError::NoEngine(cx.node.name.clone()));
    };
    for row in &mut rows {
        if row.image.is_empty() || row.image.starts_with(&format!("{registry}/")) {
            continue;
        }
        let published = format!("{registry}/{}", row.image);
        match runtime.tag_image(&row.image, &published).await {
            Ok(()) => {}
            Err(kiln_core::RuntimeError::ImageNotFound(image)) => {
                return Err(PipelineError::Input {
                    what: format!("the environment image {image} of {}", row.instance_id),
                    message: format!(
                        "it is not on this engine, so it cannot be named {published}; build it again \
                         (`kiln stage launch --only {} --force`) or export without image_registry",
                        row.instance_id
                    ),
                });
            }
            Err(e) => return Err(e.into()),
        }
        row.image = published;
    }
    Ok(rows)
}

/// The card's paragraph on the SWE-bench harness: how many rows it evaluates unchanged, how to
/// run it, and why the others cannot be.
/// The tests of `list` the harness reads (`read`), or those it cannot (`!read`), by
/// validation's `unread`.
fn graded(list: &[String], unread: &[String], read: bool) -> kiln_schema::TestList {
    list.iter()
        .filter(|id| unread.contains(id) != read)
        .cloned()
        .collect()
}

fn harness_paragraph(manifest: &ReleaseManifest, rows: &[ReleaseInstance]) -> String {
    let ready = rows.iter().filter(|r| r.harness_note.is_empty()).count();
    let shards: Vec<String> = manifest
        .splits
        .get(&manifest.main_split)
        .map(|s| s.files.iter().map(|f| format!("`{}`", f.path)).collect())
        .unwrap_or_default();
    let mut text = format!(
        "\n{ready} of {} rows are evaluable unchanged by the official SWE-bench harness (`pip install \
         swebench`, 5.x): each names its environment image (`image`), its `eval_script`, a `log_parser` \
         from the harness's `PARSER_REGISTRY` that reads the test output as kiln did (checked on kiln's own \
         runs), and `eval_type`. With the images present locally, the harness takes one shard per call \
         (`python -m swebench.harness.run_evaluation -d <shard> -p <predictions> -id <run>`); the shards \
         are {}. The columns SWE-bench publishes have its names and types: every one a string, \
         `FAIL_TO_PASS` and `PASS_TO_PASS` a JSON list in a string (`json.loads(row[\"FAIL_TO_PASS\"])`). \
         SWE-bench-Live's code reads the image as `docker_image`: rename `image` for it. A test kiln \
         validated whose id the row's `log_parser` cannot read at all (a line break or runs of spaces in \
         its parameters) is listed in `FAIL_TO_PASS_UNGRADED` or `PASS_TO_PASS_UNGRADED` instead, so \
         that the harness grades the row on the tests it reads; `kiln evaluate` grades all of them.\n",
        rows.len(),
        shards.join(", ")
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

/// The release tag: the configured one, else the month of the crawl window when the source
/// crawls one calendar month (a monthly run publishes that month), else the run's month.
fn release_tag(pipeline: &Pipeline, node: &Node, run_id: &str) -> String {
    if let NodeSettings::Export(export) = &node.settings
        && !export.tag.is_empty()
    {
        return export.tag.clone();
    }
    if let Some(NodeSettings::Crawl(crawl)) = pipeline.source_of(node).map(|n| &n.settings)
        && let Some(month) = crawl.month()
    {
        return month;
    }
    release_month(run_id)
}

/// The release directory each export stage of `pipeline` writes in the run `run_id`
/// (`<root>/<dataset>/releases/<tag>`), by stage name.
#[must_use]
pub fn release_dirs(pipeline: &Pipeline, run_id: &str) -> Vec<(String, std::path::PathBuf)> {
    let releases = pipeline
        .dataset
        .root
        .join(&pipeline.dataset.name)
        .join("releases");
    pipeline
        .nodes
        .iter()
        .filter(|n| matches!(n.settings, NodeSettings::Export(_)))
        .map(|n| {
            (
                n.name.clone(),
                releases.join(release_tag(pipeline, n, run_id)),
            )
        })
        .collect()
}

/// `YYYY-MM` of a run id (`YYYYMMDD-HHMMSS`).
fn release_month(run_id: &str) -> String {
    match (run_id.get(..4), run_id.get(4..6)) {
        (Some(year), Some(month))
            if year
                .bytes()
                .chain(month.bytes())
                .all(|b| b.is_ascii_digit()) =>
        {
            format!("{year}-{month}")
        }
        _ => run_id.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::{graded, release_month};

    #[test]
    fn release_tag_is_the_run_month() {
        assert_eq!(release_month("20261202-154751"), "2026-12");
        assert_eq!(release_month("custom"), "custom");
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
