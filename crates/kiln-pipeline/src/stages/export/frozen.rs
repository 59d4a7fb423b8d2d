//! Frozen splits: splits whose rows, once chosen, are the same in every later release.
//!
//! A `sample` split is drawn once, from the first release that has rows: the `size` instances
//! whose SHA-256 of `<seed>:<instance_id>` is smallest (independent of row order, the same on
//! every machine). The draw is kept in `<root>/<dataset>/frozen/<split>.json`; a later export
//! reads it and never draws again. An `ids` split lists its instances in a file the user keeps.
//! Either way, each instance's row is the one first published: the row this release's frozen
//! split already holds (an export of the same tag again), else the previous release's row of
//! the same frozen split, else the row of the release whose main split first held it, else this
//! export's own. A new draw is kept only once the release that holds it is in place.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use kiln_core::config::{FrozenChoice, FrozenSplit};
use kiln_schema::{InstanceId, ReleaseInstance};
use kiln_store::analytics::{release_tags, split_shards};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::error::PipelineError;
use crate::release::{FrozenRecord, frozen_dir};

/// A sample split's draw, as kept in `frozen/<split>.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Draw {
    split: String,
    size: i64,
    seed: i64,
    /// The release the draw was made from.
    drawn_in: String,
    instance_ids: Vec<String>,
}

/// The `size` instances of `rows` ranked first by SHA-256 of `<seed>:<instance_id>`, sorted by id.
fn draw(rows: &[ReleaseInstance], size: i64, seed: i64) -> Vec<String> {
    let mut ranked: Vec<(String, &str)> = rows
        .iter()
        .map(|r| {
            let digest = Sha256::digest(format!("{seed}:{}", r.instance_id).as_bytes());
            (kiln_core::config::hex(&digest), r.instance_id.as_str())
        })
        .collect();
    ranked.sort();
    let mut ids: Vec<String> = ranked
        .into_iter()
        .take(usize::try_from(size).unwrap_or(0))
        .map(|(_, id)| id.to_string())
        .collect();
    ids.sort();
    ids
}

/// Ids of a list file: one per line, blank lines and `#` comments ignored.
fn read_ids(path: &Path) -> Result<Vec<String>, PipelineError> {
    let text = std::fs::read_to_string(path).map_err(|e| PipelineError::Input {
        what: format!("the frozen split's id list {}", path.display()),
        message: e.to_string(),
    })?;
    let mut seen = BTreeSet::new();
    Ok(text
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty() && seen.insert(l.to_string()))
        .map(str::to_string)
        .collect())
}

/// A new draw, to keep once the release that holds it is in place ([`keep_draw`]).
pub(super) struct PendingDraw(Draw);

/// Keeps a new draw in `<dataset>/frozen/<split>.json`.
///
/// # Errors
/// When the file cannot be written.
pub(super) fn keep_draw(dataset_dir: &Path, draw: &PendingDraw) -> Result<(), PipelineError> {
    let dir = frozen_dir(dataset_dir);
    let path = dir.join(format!("{}.json", draw.0.split));
    std::fs::create_dir_all(&dir).map_err(|e| PipelineError::Input {
        what: dir.display().to_string(),
        message: e.to_string(),
    })?;
    let text = serde_json::to_string_pretty(&draw.0)
        .map_err(|e| PipelineError::Internal(e.to_string()))?;
    kiln_store::write_atomic(&path, text.as_bytes())?;
    Ok(())
}

/// The instances of a sample split: the kept draw, or a new one from `fresh` (none when it is
/// empty: the split is drawn from the first release with rows).
fn sample_ids(
    dataset_dir: &Path,
    split: &str,
    size: i64,
    seed: i64,
    tag: &str,
    fresh: &[ReleaseInstance],
) -> Result<(Vec<String>, String, Option<PendingDraw>), PipelineError> {
    let path = frozen_dir(dataset_dir).join(format!("{split}.json"));
    let input_error = |message: String| PipelineError::Input {
        what: path.display().to_string(),
        message,
    };
    let described = |ids: &[String], drawn_in: &str| {
        let mut text =
            format!("a sample of {size} drawn with seed {seed} in release {drawn_in}, kept since");
        if (ids.len() as i64) < size {
            text.push_str(&format!(
                " ({} instances: all that release {drawn_in} had)",
                ids.len()
            ));
        }
        text
    };
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let kept: Draw = serde_json::from_str(&text).map_err(|e| input_error(e.to_string()))?;
            if kept.size != size || kept.seed != seed {
                return Err(input_error(format!(
                    "the frozen split `{split}` was drawn in {} with sample = {}, seed = {}, and the config now says \
                     sample = {size}, seed = {seed}; a frozen split never changes: restore those values, or \
                     name a new split (delete this file only to draw `{split}` anew)",
                    kept.drawn_in, kept.size, kept.seed
                )));
            }
            let choice = described(&kept.instance_ids, &kept.drawn_in);
            Ok((kept.instance_ids, choice, None))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if fresh.is_empty() {
                return Ok((
                    Vec::new(),
                    format!(
                        "a sample of {size} with seed {seed}, drawn from the first release with rows"
                    ),
                    None,
                ));
            }
            let ids = draw(fresh, size, seed);
            let choice = described(&ids, tag);
            let pending = PendingDraw(Draw {
                split: split.to_string(),
                size,
                seed,
                drawn_in: tag.to_string(),
                instance_ids: ids.clone(),
            });
            Ok((ids, choice, Some(pending)))
        }
        Err(e) => Err(input_error(e.to_string())),
    }
}

/// Reads every row of split `split` of a release.
fn split_rows(release_dir: &Path, split: &str) -> Result<Vec<ReleaseInstance>, PipelineError> {
    let mut rows = Vec::new();
    for shard in split_shards(release_dir, split)? {
        rows.extend(kiln_store::read_parquet::<ReleaseInstance>(&shard)?);
    }
    Ok(rows)
}

/// What the export needs to know to build a frozen split.
pub(super) struct Place<'a> {
    /// `<root>/<dataset>`.
    pub dataset_dir: &'a Path,
    /// This release's tag.
    pub tag: &'a str,
    /// This release as it is on disk before the export replaces it (it may not exist).
    pub current: &'a Path,
    /// The main split's name.
    pub main_split: &'a str,
    /// This release's main split rows (deduplicated).
    pub fresh: &'a [ReleaseInstance],
}

/// The rows and record of one frozen split of the release being exported.
///
/// # Errors
/// When the list file or an earlier release cannot be read, or a sample's settings changed.
pub(super) fn frozen_split(
    split: &FrozenSplit,
    place: &Place<'_>,
) -> Result<(Vec<ReleaseInstance>, FrozenRecord, Option<PendingDraw>), PipelineError> {
    let (ids, choice, pending) = match &split.choice {
        FrozenChoice::Sample { size, seed } => sample_ids(
            place.dataset_dir,
            &split.name,
            *size,
            *seed,
            place.tag,
            place.fresh,
        )?,
        FrozenChoice::Ids { path } => (
            read_ids(path)?,
            // The file's name only: the card is public, the machine's paths are not.
            format!(
                "the instances listed in {}",
                path.file_name().map_or_else(
                    || path.display().to_string(),
                    |n| n.to_string_lossy().into_owned()
                )
            ),
            None,
        ),
    };
    let releases_dir = place.dataset_dir.join("releases");
    let earlier: Vec<String> = release_tags(&releases_dir)?
        .into_iter()
        .filter(|t| t.as_str() < place.tag)
        .collect();
    let wanted: BTreeSet<&str> = ids.iter().map(String::as_str).collect();
    let mut found: BTreeMap<InstanceId, ReleaseInstance> = BTreeMap::new();
    let take = |rows: Vec<ReleaseInstance>, found: &mut BTreeMap<InstanceId, ReleaseInstance>| {
        for row in rows {
            if wanted.contains(row.instance_id.as_str()) && !found.contains_key(&row.instance_id) {
                found.insert(row.instance_id.clone(), row);
            }
        }
    };
    // This release's own frozen rows (an export of the same tag again), then the previous
    // release that has this frozen split: their rows, as published.
    take(split_rows(place.current, &split.name)?, &mut found);
    for tag in earlier.iter().rev() {
        let dir = releases_dir.join(tag);
        if !split_shards(&dir, &split.name)?.is_empty() {
            take(split_rows(&dir, &split.name)?, &mut found);
            break;
        }
    }
    // Then the release whose main split first published each remaining instance.
    for tag in &earlier {
        if found.len() == wanted.len() {
            break;
        }
        take(
            split_rows(&releases_dir.join(tag), place.main_split)?,
            &mut found,
        );
    }
    let fresh_wanted = place
        .fresh
        .iter()
        .filter(|r| wanted.contains(r.instance_id.as_str()))
        .cloned()
        .collect();
    take(fresh_wanted, &mut found);
    let mut rows = Vec::new();
    let mut not_published = Vec::new();
    for id in &ids {
        match found.remove(id.as_str()) {
            Some(row) => rows.push(row),
            None => not_published.push(id.clone()),
        }
    }
    Ok((
        rows,
        FrozenRecord {
            choice,
            instance_ids: ids,
            not_published,
        },
        pending,
    ))
}

#[cfg(test)]
mod tests {
    use super::draw;
    use kiln_schema::ReleaseInstance;

    fn row(id: &str) -> ReleaseInstance {
        ReleaseInstance {
            ..ReleaseInstance::new(kiln_schema::InstanceId::new(id).unwrap())
        }
    }

    #[test]
    fn a_draw_depends_on_the_seed_and_the_ids_not_their_order() {
        let rows: Vec<ReleaseInstance> = (0..40).map(|i| row(&format!("o__r-{i}"))).collect();
        let mut reversed = rows.clone();
        reversed.reverse();
        let a = draw(&rows, 5, 7);
        assert_eq!(a.len(), 5);
        assert_eq!(a, draw(&reversed, 5, 7));
        assert_ne!(a, draw(&rows, 5, 8));
        assert!(a.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(draw(&rows[..3], 5, 7).len(), 3);
    }
}
