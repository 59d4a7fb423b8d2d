//! `export`: the Parquet release, its dataset card and `release.json`.
//!
//! A release's main split holds the validated instances no other release published (polars
//! joins against the keys of every other release); its frozen splits hold the same rows in
//! every release ([`frozen`]); the card describes all of it ([`card`]).

mod card;
mod frozen;
mod harbor;
mod rows;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use kiln_core::Event;
use kiln_core::config::{ExportFormat, ExportSettings, Node, NodeKind, NodeSettings, Pipeline};
use kiln_schema::{InstanceId, PlatformLabel, ReleaseInstance, Verdict};
use kiln_store::CardMeta;
use kiln_store::analytics::{Duplicate, Published};

use crate::error::PipelineError;
use crate::release::{FrozenRecord, RELEASE_FILE, ReleaseFile, ReleaseManifest, ReleaseSplit};
use crate::stages::context::{StageContext, StageOutcome, finish};

/// Exports the release: this run's validated rows (with those of earlier runs of the tag that
/// it does not replace), less what other releases published, with its frozen splits, its card
/// and `release.json`, written beside the release it replaces and then put in its place.
pub(crate) async fn export(
    cx: &StageContext<'_>,
    settings: &ExportSettings,
) -> Result<StageOutcome, PipelineError> {
    let rows = rows::validated_rows(cx)?;
    let place = ReleasePlace::of(cx);
    // An export cut short between putting the old release aside and the new one in place.
    kiln_store::recover_replaced(&place.release_dir)?;
    let rows = keep_earlier_rows(cx, settings, &place, rows)?;
    let (rows, duplicates) = leave_out_duplicates(cx, settings, &place, rows)?;
    let rows = publish_images(cx, &settings.image_registry, rows).await?;
    let Splits {
        rows: split_rows,
        frozen: frozen_records,
        draws,
    } = release_splits(settings, &place, rows)?;
    check_release_images(cx, &split_rows).await?;
    // The release is written whole beside the one it replaces, then put in its place: readers
    // and a crash see the old release or the new one, never a mixture of their shards.
    let staging = clear_staging(&place)?;
    let written = Written {
        split_rows: &split_rows,
        frozen: frozen_records,
        duplicates,
    };
    write_release(cx, settings, &place, &staging, written)?;
    kiln_store::replace_dir(&staging, &place.release_dir)?;
    // A new draw of a frozen split is kept only now that the release holding it is in place.
    for draw in &draws {
        frozen::keep_draw(&place.dataset_dir, draw)?;
    }
    record_main_rows(cx, place.release_dir, &split_rows[0].1)
}

/// Where a release goes on disk.
struct ReleasePlace {
    /// The release's tag ([`release_tag`]).
    tag: String,
    /// `<root>/<dataset>`, where frozen splits keep their draws.
    dataset_dir: PathBuf,
    /// `<root>/<dataset>/releases`, every release of the dataset.
    releases_dir: PathBuf,
    /// `<releases_dir>/<tag>`, this release.
    release_dir: PathBuf,
}

impl ReleasePlace {
    /// The place of the release the stage of `cx` exports in its run.
    fn of(cx: &StageContext<'_>) -> Self {
        let tag = release_tag(cx.pipeline, cx.node, cx.run.run_id());
        let dataset_dir = cx.pipeline.dataset.root.join(&cx.pipeline.dataset.name);
        let releases_dir = dataset_dir.join("releases");
        let release_dir = releases_dir.join(&tag);
        Self {
            tag,
            dataset_dir,
            releases_dir,
            release_dir,
        }
    }
}

/// Adds to `rows` those of the release of this tag an earlier run wrote that this run does
/// not have (a second refresh of a month adds to its release), and says how many it kept.
///
/// This run's rows replace theirs; with `--allow-fewer-rows` the export replaces the release
/// with this run's rows alone, and `rows` come back as they are.
fn keep_earlier_rows(
    cx: &StageContext<'_>,
    settings: &ExportSettings,
    place: &ReleasePlace,
    mut rows: Vec<ReleaseInstance>,
) -> Result<Vec<ReleaseInstance>, PipelineError> {
    if cx.options.allow_fewer_rows {
        return Ok(rows);
    }
    let fresh: BTreeSet<InstanceId> = rows.iter().map(|r| r.instance_id.clone()).collect();
    let mut kept = 0;
    for shard in kiln_store::analytics::split_shards(&place.release_dir, &settings.split)? {
        for row in kiln_store::read_parquet::<ReleaseInstance>(&shard)? {
            if !fresh.contains(&row.instance_id) {
                rows.push(row);
                kept += 1;
            }
        }
    }
    if kept > 0 {
        let tag = &place.tag;
        cx.reporter.report(Event::Note {
            message: format!(
                "export: release {tag} keeps {kept} row(s) of earlier runs that this run did not make \
                 (--allow-fewer-rows replaces the release with this run's rows alone)"
            ),
        });
    }
    Ok(rows)
}

/// Sorts `rows` by instance id and leaves out those another release published (by id, or by
/// repository and pull request) and the second of two here, saying how many went; returns the
/// rows kept and what was left out, which `release.json` records.
fn leave_out_duplicates(
    cx: &StageContext<'_>,
    settings: &ExportSettings,
    place: &ReleasePlace,
    mut rows: Vec<ReleaseInstance>,
) -> Result<(Vec<ReleaseInstance>, Vec<Duplicate>), PipelineError> {
    rows.sort_by(|a, b| a.instance_id.cmp(&b.instance_id));
    let published = Published::except(&place.releases_dir, &place.tag, &settings.split)?;
    let deduped = kiln_store::analytics::dedupe(&rows, &published, &place.tag)?;
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
                place.release_dir.display()
            ),
        });
    }
    Ok((rows, deduped.duplicates))
}

/// The splits of a release, the main split first, and what its frozen splits leave to record.
struct Splits {
    /// Each split's name and rows.
    rows: Vec<(String, Vec<ReleaseInstance>)>,
    /// How each frozen split was chosen, for `release.json`.
    frozen: BTreeMap<String, FrozenRecord>,
    /// New draws of frozen splits, kept once the release is in place.
    draws: Vec<frozen::PendingDraw>,
}

/// The release's splits: the main split of `rows`, then each frozen split the settings name,
/// made of the rows first published of its instances ([`frozen::frozen_split`]).
fn release_splits(
    settings: &ExportSettings,
    place: &ReleasePlace,
    rows: Vec<ReleaseInstance>,
) -> Result<Splits, PipelineError> {
    let mut split_rows: Vec<(String, Vec<ReleaseInstance>)> = Vec::new();
    let mut frozen_records = BTreeMap::new();
    let mut draws = Vec::new();
    for split in &settings.frozen {
        let frozen_place = frozen::Place {
            dataset_dir: &place.dataset_dir,
            tag: &place.tag,
            current: &place.release_dir,
            main_split: &settings.split,
            fresh: &rows,
        };
        let (frozen_rows, record, draw) = frozen::frozen_split(split, &frozen_place)?;
        frozen_records.insert(split.name.clone(), record);
        split_rows.push((split.name.clone(), frozen_rows));
        draws.extend(draw);
    }
    split_rows.insert(0, (settings.split.clone(), rows));
    Ok(Splits {
        rows: split_rows,
        frozen: frozen_records,
        draws,
    })
}

/// The empty directory the release is written in before it replaces the old one
/// (`releases/.<tag>.staging`): what an export cut short left there is removed first.
fn clear_staging(place: &ReleasePlace) -> Result<PathBuf, PipelineError> {
    let staging = place.releases_dir.join(format!(".{}.staging", place.tag));
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(|e| PipelineError::Host {
            what: format!("remove the unfinished release {}", staging.display()),
            message: e.to_string(),
        })?;
    }
    Ok(staging)
}

/// What [`write_release`] writes besides the place and settings: the splits' rows and what
/// `release.json` records about how they were chosen.
struct Written<'a> {
    /// Each split's name and rows, the main split first.
    split_rows: &'a [(String, Vec<ReleaseInstance>)],
    /// How each frozen split was chosen.
    frozen: BTreeMap<String, FrozenRecord>,
    /// The validated instances left out as duplicates.
    duplicates: Vec<Duplicate>,
}

/// Writes the whole release into `staging`: every split's shards, the LM answers and the card,
/// then, last, `release.json`, which lists them all with their sizes and hashes.
fn write_release(
    cx: &StageContext<'_>,
    settings: &ExportSettings,
    place: &ReleasePlace,
    staging: &Path,
    written: Written<'_>,
) -> Result<(), PipelineError> {
    let per_shard = usize::try_from(settings.rows_per_shard).unwrap_or(10_000);
    let splits = write_splits(staging, written.split_rows, per_shard)?;
    let mut manifest = ReleaseManifest {
        dataset: cx.pipeline.dataset.name.clone(),
        tag: place.tag.clone(),
        kiln_version: env!("CARGO_PKG_VERSION").to_string(),
        schema_version: kiln_schema::SCHEMA_VERSION,
        run_id: cx.run.run_id().to_string(),
        config_hash: cx.run.info().config_hash.clone(),
        exported_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        main_split: settings.split.clone(),
        splits,
        frozen: written.frozen,
        duplicates: written.duplicates,
        images: release_images(written.split_rows),
        image_registry: (!settings.image_registry.is_empty())
            .then(|| settings.image_registry.clone()),
        license: settings.license.clone(),
        funnel: crate::summary::funnel(cx.pipeline, cx.run)?,
        files: Vec::new(),
        harbor: None,
    };
    if settings.writes(ExportFormat::Harbor) {
        manifest.harbor = Some(write_harbor_tasks(
            cx,
            settings,
            place,
            staging,
            written.split_rows,
        )?);
    }
    write_card(cx, settings, staging, &manifest, written.split_rows)?;
    for extra_file in ["README.md", LM_ANSWERS] {
        if staging.join(extra_file).exists() {
            manifest.files.push(ReleaseFile::read(staging, extra_file)?);
        }
    }
    let text = serde_json::to_string_pretty(&manifest)
        .map_err(|e| PipelineError::Internal(format!("the release manifest: {e}")))?;
    kiln_store::write_atomic(&staging.join(RELEASE_FILE), text.as_bytes())?;
    Ok(())
}

/// Writes the Harbor tasks of every split's rows into `staging` ([`harbor`]), saying how many
/// rows are not tasks.
fn write_harbor_tasks(
    cx: &StageContext<'_>,
    settings: &ExportSettings,
    place: &ReleasePlace,
    staging: &Path,
    split_rows: &[(String, Vec<ReleaseInstance>)],
) -> Result<crate::release::HarborTasks, PipelineError> {
    let facts = harbor::facts(cx, split_rows);
    let release = harbor::Release {
        dataset: &cx.pipeline.dataset.name,
        tag: &place.tag,
        hints: settings.harbor_hints,
    };
    let tasks = harbor::write_tasks(staging, split_rows, &facts, &release)?;
    if !tasks.left_out.is_empty() {
        cx.reporter.report(Event::Note {
            message: format!(
                "export: {} row(s) are not Harbor tasks (the card and {RELEASE_FILE} say why)",
                tasks.left_out.len()
            ),
        });
    }
    Ok(tasks)
}

/// Writes each split's Parquet shards into `staging` (`per_shard` rows at most each) and
/// returns, by split, its row count, its files as `release.json` lists them, and its figures.
fn write_splits(
    staging: &Path,
    split_rows: &[(String, Vec<ReleaseInstance>)],
    per_shard: usize,
) -> Result<BTreeMap<String, ReleaseSplit>, PipelineError> {
    let mut splits = BTreeMap::new();
    for (name, rows) in split_rows {
        let written = kiln_store::write_release(staging, name, rows, per_shard)?;
        let files = written
            .iter()
            .map(|path| {
                let relative = path.strip_prefix(staging).unwrap_or(path);
                ReleaseFile::read(staging, &relative.to_string_lossy())
            })
            .collect::<Result<Vec<_>, _>>()?;
        splits.insert(
            name.clone(),
            ReleaseSplit {
                rows: rows.len(),
                files,
                stats: kiln_store::analytics::split_stats(staging, name)?,
            },
        );
    }
    Ok(splits)
}

/// The images the rows of every split name, sorted and once each.
fn release_images(split_rows: &[(String, Vec<ReleaseInstance>)]) -> Vec<String> {
    let mut images: Vec<String> = split_rows
        .iter()
        .flat_map(|(_, rows)| rows.iter().map(|r| r.image.clone()))
        .filter(|i| !i.is_empty())
        .collect();
    images.sort();
    images.dedup();
    images
}

/// Writes the release's dataset card (`README.md`) into `staging`, and the LM answers behind
/// its main split's rows, which the card's body describes with the harness and the splits.
fn write_card(
    cx: &StageContext<'_>,
    settings: &ExportSettings,
    staging: &Path,
    manifest: &ReleaseManifest,
    split_rows: &[(String, Vec<ReleaseInstance>)],
) -> Result<(), PipelineError> {
    let main_rows = &split_rows[0].1;
    let intro = format!(
        "Task instances built and validated by kiln: each row is a repository at a base commit, a gold patch, \
         a test patch, and the tests that go from failing to passing (`FAIL_TO_PASS`) or stay passing \
         (`PASS_TO_PASS`) in the environment image named in `image`. `{}` holds the instances this release \
         publishes first; an instance is never in the `{}` split of two releases.\n",
        settings.split, settings.split
    );
    let mut extra = harness_paragraph(manifest, main_rows);
    if let Some(tasks) = &manifest.harbor {
        extra.push_str(&harbor::card_paragraph(tasks));
    }
    extra.push_str(&write_lm_answers(cx, staging, main_rows)?);
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
        staging,
        &meta,
        &counts,
        &card::body(manifest, main_rows, &intro, &extra),
    )?;
    Ok(())
}

/// Makes the export's table hold the release's main split (the run's summaries read it), with
/// the release's directory in its state (`kiln run` and `kiln refresh` print it), and finishes
/// the stage over those rows.
fn record_main_rows(
    cx: &StageContext<'_>,
    release_dir: PathBuf,
    main_rows: &[ReleaseInstance],
) -> Result<StageOutcome, PipelineError> {
    let mut table = cx.table::<ReleaseInstance>()?;
    table.reset()?;
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
    use super::release_month;

    #[test]
    fn release_tag_is_the_run_month() {
        assert_eq!(release_month("20261202-154751"), "2026-12");
        assert_eq!(release_month("custom"), "custom");
    }
}
