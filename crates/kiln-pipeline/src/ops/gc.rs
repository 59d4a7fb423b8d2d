//! `kiln gc`: the dataset's environment images that nothing refers to any more.
//!
//! An image of the dataset (labelled with its directory, [`crate::dataset_label`]) stays when
//! a release of the dataset names it (by name or digest), or when it is the environment of a
//! run in progress or of one of the `keep_last` most recent runs; every other goes. Images of
//! datasets whose directory no longer exists (a deleted checkout, a test's temporary dataset)
//! are orphans, listed and removed with `orphans`. The shards of a split run build under
//! labels of their own directories: their images are the dataset's too, kept while a release,
//! a merged run or the shard's own run (in progress or recent) names them.
//!
//! `orphans` also clears kiln's own images that belong to no dataset and that nothing can use:
//! a base image (`kiln/<name>:<version>-<hash>`) that a newer build of the same name and
//! version replaced (a new kiln, another CA bundle), when no image is made from it and no kept
//! row names it; and an untagged kiln image no image is made from (what a failed or killed
//! Dockerfile build left). A system layer of cold launches (`kiln/layer:<hash>`, shared by
//! datasets) goes with the last image made from it, and with `orphans` when none is.
//!
//! No image goes that a container or a build in progress may stand on ([`InUse`]): the engine
//! is shared, and another dataset's launch may be building while `kiln gc --orphans` runs.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use kiln_core::config::{NodeKind, Pipeline};
use kiln_core::runtime::{LABEL_DATASET, LABEL_MANAGED};
use kiln_core::{ContainerInfo, ContainerRuntime, ImageInfo};
use kiln_schema::{EnvironmentRecord, ReleaseInstance};
use serde::Serialize;

use crate::error::PipelineError;

/// One image `kiln gc` removes, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Garbage {
    /// The image's id.
    pub id: String,
    /// Its names (empty for an untagged image).
    pub tags: Vec<String>,
    /// Bytes on disk (layers it shares with other images counted in full).
    pub size: i64,
    /// Why it goes: `unreferenced` (this dataset), `orphan` (a dataset directory that is
    /// gone), `superseded` (a base image a newer build replaced), `leftover` (an untagged
    /// image of a failed build) or `layer` (a system layer of cold launches no image that
    /// stays is made from).
    pub reason: &'static str,
    /// The dataset directory of its label (empty for kiln's own images).
    pub dataset: String,
}

/// What `kiln gc` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct GcPlan {
    /// Images to remove.
    pub remove: Vec<Garbage>,
    /// Images of the dataset that stay.
    pub kept: usize,
    /// Runs whose environments were kept (in progress, or among the most recent).
    pub kept_runs: Vec<String>,
    /// Images nothing refers to that stay all the same: a container or a build in progress
    /// may stand on them ([`InUse`]).
    pub in_use: usize,
    /// Bytes the removal frees: the layers of the images that go, and of the untagged images
    /// they were made from that nothing else is made from, which the engine removes with
    /// them; `None` when the engine cannot list its images' parents.
    pub freed: Option<i64>,
}

impl GcPlan {
    /// Bytes the removal frees at most: each image's size in full, the layers it shares
    /// counted once for every image.
    #[must_use]
    pub fn bytes(&self) -> i64 {
        self.remove.iter().map(|g| g.size).sum()
    }
}

/// Bytes that removing the names of `removed` (image ids) frees, on an engine holding `all`.
///
/// The engine deletes an image once it has no name and no image is made from it, then does the
/// same for its parent; a parent that has a name, or another child, stays. Each image that
/// goes frees its own layer: its size less its parent's.
fn freed_bytes(all: &[ImageInfo], removed: &BTreeSet<&str>) -> i64 {
    let by_id: BTreeMap<&str, &ImageInfo> = all.iter().map(|i| (i.id.as_str(), i)).collect();
    let mut children: BTreeMap<&str, usize> = BTreeMap::new();
    for image in all {
        *children.entry(image.parent.as_str()).or_default() += 1;
    }
    let unnamed = |image: &ImageInfo| image.tags.is_empty() || removed.contains(image.id.as_str());
    let own = |image: &ImageInfo| {
        let parent = by_id.get(image.parent.as_str()).map_or(0, |p| p.size);
        (image.size - parent).max(0)
    };
    let mut gone: BTreeSet<&str> = BTreeSet::new();
    let mut freed = 0;
    for id in removed {
        let mut next = by_id.get(id).copied();
        while let Some(image) = next {
            let childless = children.get(image.id.as_str()).copied().unwrap_or(0) == 0;
            if !unnamed(image) || !childless || !gone.insert(image.id.as_str()) {
                break;
            }
            freed += own(image);
            next = by_id.get(image.parent.as_str()).copied();
            if let Some(parent) = next
                && let Some(count) = children.get_mut(parent.id.as_str())
            {
                *count -= 1;
            }
        }
    }
    freed
}

/// How long after it was made an image that is not the dataset's own stays by default: see
/// [`InUse`].
pub const DEFAULT_MIN_AGE: Duration = Duration::from_secs(60 * 60);

/// What may stand on an image right now, by what the engine says: `kiln gc` removes none of it.
///
/// The engine shows no build of its classic builder in progress; it shows its containers. A
/// build runs each step in a container made from the image of the step before, commits it to
/// the step's image (an untagged image of kiln's labels, nothing made from it yet), removes the
/// container, and makes the next step's container from that image. So an image stays when:
/// - a container, running or not, of any owner, was made from it: a step (or a launch) runs
///   on it (and the engine refuses to delete an image under a running container, so removing
///   it would fail gc as well);
/// - it was made from the image of a container that exists: it may be that container's commit,
///   which the next step starts from once the builder has removed the container (a large tree
///   takes a while);
/// - it is not the dataset's own and is younger than `min_age`: between a step's commit and
///   the next step's container, nothing on the engine says that a build stands on the step's
///   image, for an instant or, on a loaded engine, longer; only its age tells it from what a
///   killed build left. The images `--orphans` removes and the shared system layers are what
///   another process on the engine may be building on; the dataset's own are accounted for by
///   its runs and releases.
///
/// Images something is made from (the earlier steps of a build in progress) stay anyway: the
/// rules that remove untagged and superseded images pass them by. Ages are the engine's
/// creation times against this host's clock: an engine whose clock runs behind this host's by
/// more than `min_age` shortens it.
struct InUse {
    /// Images containers were made from, each with the dataset label (`None` for a container
    /// of no dataset: a build's step, another program's) and the creation time of those
    /// containers.
    under_containers: BTreeMap<String, Vec<(Option<String>, i64)>>,
    /// Seconds since the Unix epoch: an image made later is young.
    young_since: i64,
}

impl InUse {
    fn new(containers: &[ContainerInfo], min_age: Duration, now: i64) -> Self {
        Self {
            under_containers: containers.iter().filter(|c| !c.image.is_empty()).fold(
                BTreeMap::new(),
                |mut by_image, c| {
                    by_image
                        .entry(c.image.clone())
                        .or_insert_with(Vec::new)
                        .push((c.labels.get(LABEL_DATASET).cloned(), c.created));
                    by_image
                },
            ),
            young_since: now.saturating_sub(i64::try_from(min_age.as_secs()).unwrap_or(i64::MAX)),
        }
    }

    /// Whether something may stand on `image`; `own` says it is the dataset's own (its age
    /// then does not count).
    fn holds(&self, image: &ImageInfo, own: bool) -> bool {
        self.under_containers.contains_key(&image.id)
            || self.may_be_a_commit(image)
            || (!own && image.created > self.young_since)
    }

    /// Whether `image` may be the commit of a container that exists: it was made from that
    /// container's image, after the container was created (a commit comes after its
    /// container; a time the engine does not give counts as earlier). An image of a dataset is
    /// the commit of that dataset's containers (or of a build's step, which carries no
    /// dataset), never of another dataset's: a container another run left on a shared base
    /// image does not keep every image made from that base, nor does one made after the image.
    fn may_be_a_commit(&self, image: &ImageInfo) -> bool {
        let Some(containers) = self.under_containers.get(&image.parent) else {
            return false;
        };
        let own = image.labels.get(LABEL_DATASET);
        containers.iter().any(|(dataset, created)| {
            *created <= image.created
                && match own {
                    Some(own) => dataset.as_ref().is_none_or(|d| d == own),
                    None => true,
                }
        })
    }
}

/// Images and digests the dataset's releases name.
fn released(pipeline: &Pipeline) -> Result<BTreeSet<String>, PipelineError> {
    let releases = pipeline
        .dataset
        .root
        .join(&pipeline.dataset.name)
        .join("releases");
    let mut names = BTreeSet::new();
    let Ok(entries) = std::fs::read_dir(&releases) else {
        return Ok(names);
    };
    for entry in entries.flatten() {
        let dir = entry.path();
        // Staging and replaced releases (`.<tag>.staging`) are not releases.
        if entry.file_name().to_string_lossy().starts_with('.') || !dir.join("data").is_dir() {
            continue;
        }
        let rows: Vec<ReleaseInstance> = crate::ops::evaluate::read_dataset(&dir)?;
        for row in rows {
            names.insert(row.image);
            names.extend(row.image_digest);
            // Its Dockerfile builds from this base: `check-images --rebuild` needs it.
            names.extend(row.dockerfile.as_deref().and_then(kiln_launch::base_image));
        }
    }
    Ok(names)
}

/// Images and digests of the environments of the runs that keep theirs: runs in progress and
/// the `keep_last` most recent ones.
fn kept_by_runs(
    pipeline: &Pipeline,
    keep_last: usize,
) -> Result<(BTreeSet<String>, Vec<String>), PipelineError> {
    let ids = kiln_store::run_ids(&pipeline.dataset.root, &pipeline.dataset.name)?;
    let recent: BTreeSet<&String> = ids.iter().rev().take(keep_last).collect();
    let mut names = BTreeSet::new();
    let mut kept = Vec::new();
    for id in &ids {
        let run = kiln_store::RunStore::open(&pipeline.dataset.root, &pipeline.dataset.name, id)?;
        if run.info().status == kiln_store::Status::Complete && !recent.contains(id) {
            continue;
        }
        let rows: Vec<EnvironmentRecord> = crate::summary::rows(pipeline, &run, NodeKind::Launch)
            .map_err(|e| PipelineError::Input {
            what: format!("the environments of run {id}"),
            message: format!("{e}; kiln gc removes nothing it cannot account for"),
        })?;
        for row in rows {
            names.extend(row.image);
            names.extend(row.image_digest);
            if !row.base_image.is_empty() {
                names.insert(row.base_image);
            }
        }
        kept.push(id.clone());
    }
    Ok((names, kept))
}

/// Finds what `kiln gc` removes: the dataset's images nothing refers to, and with `orphans`
/// the images of every dataset whose directory is gone; never an image a container or a build
/// in progress may stand on, nor one not the dataset's own younger than `min_age` ([`InUse`]).
///
/// # Errors
/// When a release or a kept run cannot be read, or the engine fails.
pub async fn plan(
    pipeline: &Pipeline,
    runtime: &dyn ContainerRuntime,
    keep_last: usize,
    orphans: bool,
    min_age: Duration,
) -> Result<GcPlan, PipelineError> {
    let references = References::of(pipeline, keep_last)?;
    let images_seen = runtime.list_images(LABEL_DATASET, "").await?;
    let (mut remove, kept) = labelled_garbage(&images_seen, &references, orphans);
    // Every image, the intermediate ones of builds included, when the engine can list them.
    let all = runtime.list_all_images().await?;
    let own = runtime.list_images(LABEL_MANAGED, "").await?;
    if orphans {
        let everything: &[ImageInfo] = all.as_deref().unwrap_or(&[]);
        remove.extend(unused_kiln_images(
            &own,
            &images_seen,
            everything,
            &references,
        ));
    }
    let listed: Vec<&ImageInfo> = images_seen
        .iter()
        .chain(&own)
        .chain(all.as_deref().unwrap_or(&[]))
        .collect();
    // Listed after the images: a container made since from an image listed is seen.
    let in_use = InUse::new(
        &runtime.list_containers().await?,
        min_age,
        chrono::Utc::now().timestamp(),
    );
    let standing = Standing::new(listed, in_use);
    let candidates = remove.len();
    remove.retain(|g| !standing.stays(g));
    let mut in_use = candidates - remove.len();
    let (layers, layers_in_use) = layer_garbage(&own, &remove, orphans, &references, &standing);
    in_use += layers_in_use;
    remove.sort_by(|a, b| (a.reason, &a.tags).cmp(&(b.reason, &b.tags)));
    // After the images made from them: the engine removes an image only with its children.
    remove.extend(layers);
    let freed = all.as_ref().map(|all| {
        let removed: BTreeSet<&str> = remove.iter().map(|g| g.id.as_str()).collect();
        freed_bytes(all, &removed)
    });
    Ok(GcPlan {
        remove,
        kept,
        kept_runs: references.kept_runs,
        in_use,
        freed,
    })
}

/// What keeps an image: the names and digests the dataset's releases, and the kept runs of the
/// dataset and of its shards, give.
struct References {
    /// The dataset labels of the dataset and of its shards: their images are the dataset's.
    labels: BTreeSet<String>,
    /// Image names, ids and digests named.
    named: BTreeSet<String>,
    /// Runs whose environments are kept (a shard's named with its shard).
    kept_runs: Vec<String>,
}

impl References {
    /// What the releases and the kept runs of `pipeline` (its shards' included) name.
    fn of(pipeline: &Pipeline, keep_last: usize) -> Result<Self, PipelineError> {
        let mut pipelines = vec![pipeline.clone()];
        pipelines.extend(crate::shards::shard_pipelines(pipeline));
        let labels: BTreeSet<String> = pipelines.iter().map(crate::labels::dataset_label).collect();
        let mut named = released(pipeline)?;
        let mut kept_runs = Vec::new();
        for each in &pipelines {
            let (by_runs, kept) = kept_by_runs(each, keep_last)?;
            named.extend(by_runs);
            kept_runs.extend(kept.into_iter().map(|id| match &each.shard {
                Some(shard) => format!("{id} (shard {})", shard.id),
                None => id,
            }));
        }
        Ok(Self {
            labels,
            named,
            kept_runs,
        })
    }

    /// Whether `image` is named, by id or by one of its names.
    fn names(&self, image: &ImageInfo) -> bool {
        self.named.contains(&image.id) || image.tags.iter().any(|t| self.named.contains(t))
    }
}

/// The images with a dataset label that go: the dataset's own that nothing names
/// (`unreferenced`) and, with `orphans`, those of datasets whose directory is gone (`orphan`);
/// with the number of the dataset's own that stay.
fn labelled_garbage(
    images: &[ImageInfo],
    references: &References,
    orphans: bool,
) -> (Vec<Garbage>, usize) {
    let mut remove = Vec::new();
    let mut kept = 0;
    for image in images.iter().cloned() {
        let dataset = image.labels.get(LABEL_DATASET).cloned().unwrap_or_default();
        let reason = if references.labels.contains(&dataset) {
            if references.names(&image) {
                kept += 1;
                continue;
            }
            "unreferenced"
        } else if orphans && !dataset.is_empty() && !Path::new(&dataset).exists() {
            "orphan"
        } else {
            continue;
        };
        remove.push(Garbage {
            id: image.id,
            tags: image.tags,
            size: image.size,
            reason,
            dataset,
        });
    }
    (remove, kept)
}

/// Kiln's own images (`own`) of no dataset that nothing can use: untagged ones (`leftover`)
/// and base images a newer build of their name and version replaced (`superseded`), when no
/// image listed is made from them and nothing names them.
fn unused_kiln_images(
    own: &[ImageInfo],
    images_seen: &[ImageInfo],
    everything: &[ImageInfo],
    references: &References,
) -> Vec<Garbage> {
    let parents: BTreeSet<&str> = images_seen
        .iter()
        .chain(own)
        .chain(everything)
        .map(|i| i.parent.as_str())
        .filter(|p| !p.is_empty())
        .collect();
    let mut newest: BTreeMap<&str, &ImageInfo> = BTreeMap::new();
    for image in own {
        for family in image.tags.iter().filter_map(|t| base_family(t)) {
            let entry = newest.entry(family).or_insert(image);
            if image.created > entry.created {
                *entry = image;
            }
        }
    }
    let mut remove = Vec::new();
    for image in own {
        if image.labels.contains_key(LABEL_DATASET)
            || parents.contains(image.id.as_str())
            || references.names(image)
        {
            continue;
        }
        let reason = if image.tags.is_empty() {
            "leftover"
        } else if image
            .tags
            .iter()
            .all(|t| base_family(t).is_some_and(|family| newest[family].id != image.id))
        {
            "superseded"
        } else {
            continue;
        };
        remove.push(Garbage {
            id: image.id.clone(),
            tags: image.tags.clone(),
            size: image.size,
            reason,
            dataset: String::new(),
        });
    }
    remove
}

/// The images the engine listed, and what may stand on them now.
struct Standing<'a> {
    /// Every image listed: the dataset's, kiln's own, and all when the engine lists them.
    listed: Vec<&'a ImageInfo>,
    /// The same, by id.
    by_id: BTreeMap<&'a str, &'a ImageInfo>,
    /// What containers and builds in progress may stand on.
    in_use: InUse,
}

impl<'a> Standing<'a> {
    /// What stands on the images `listed`, by `in_use`.
    fn new(listed: Vec<&'a ImageInfo>, in_use: InUse) -> Self {
        let by_id = listed.iter().map(|i| (i.id.as_str(), *i)).collect();
        Self {
            listed,
            by_id,
            in_use,
        }
    }

    /// Whether `garbage` stays because something may stand on it (the dataset's own
    /// unreferenced images regardless of their age).
    fn stays(&self, garbage: &Garbage) -> bool {
        self.by_id
            .get(garbage.id.as_str())
            .is_some_and(|image| self.in_use.holds(image, garbage.reason == "unreferenced"))
    }
}

/// The system layers of cold launches that go (`layer`): a layer goes with the last image made
/// from it (none stays, `going` being what goes); with `orphans`, one nothing is made from goes
/// too (without, it may be a layer a launch in progress has just made). Returns them, and how
/// many would go but something may stand on.
fn layer_garbage(
    own: &[ImageInfo],
    going: &[Garbage],
    orphans: bool,
    references: &References,
    standing: &Standing<'_>,
) -> (Vec<Garbage>, usize) {
    let going: BTreeSet<&str> = going.iter().map(|g| g.id.as_str()).collect();
    let mut layers = Vec::new();
    let mut layers_in_use = 0;
    for layer in own.iter().filter(|i| is_layer(i)) {
        let mut children = standing
            .listed
            .iter()
            .filter(|i| i.parent == layer.id)
            .peekable();
        let made = children.peek().is_some();
        let staying = children.any(|child| !going.contains(child.id.as_str()));
        if (made || orphans) && !staying && !references.names(layer) {
            let garbage = Garbage {
                id: layer.id.clone(),
                tags: layer.tags.clone(),
                size: layer.size,
                reason: "layer",
                dataset: String::new(),
            };
            if standing.stays(&garbage) {
                layers_in_use += 1;
            } else {
                layers.push(garbage);
            }
        }
    }
    (layers, layers_in_use)
}

/// Whether `image` is a system layer of cold launches ([`kiln_launch::LAYER_PREFIX`]).
fn is_layer(image: &ImageInfo) -> bool {
    image
        .tags
        .iter()
        .any(|t| t.starts_with(kiln_launch::LAYER_PREFIX))
}

/// `kiln/<name>:<version>` of a base image's tag `kiln/<name>:<version>-<hash8>`: the images
/// of one family differ only in what the hash covers (the Dockerfile, the CA bundle, labels).
fn base_family(tag: &str) -> Option<&str> {
    let (family, hash) = tag.rsplit_once('-')?;
    let base = tag.starts_with("kiln/") && family.contains(':');
    (base && hash.len() == 8 && hash.bytes().all(|b| b.is_ascii_hexdigit())).then_some(family)
}

/// Removes what [`plan`] found: by name (every name of an image), or by id when it has none.
///
/// # Errors
/// When the engine fails.
pub async fn remove(runtime: &dyn ContainerRuntime, plan: &GcPlan) -> Result<(), PipelineError> {
    for garbage in &plan.remove {
        if garbage.tags.is_empty() {
            runtime.remove_image(&garbage.id).await?;
        }
        for tag in &garbage.tags {
            runtime.remove_image(tag).await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::time::Duration;

    use std::collections::BTreeMap;

    use kiln_core::runtime::LABEL_DATASET;
    use kiln_core::{ContainerInfo, ImageInfo};

    use super::{InUse, freed_bytes};

    #[test]
    fn what_a_container_or_a_build_in_progress_may_stand_on_stays() {
        let container = |image: &str, running| ContainerInfo {
            id: format!("c-{image}"),
            image: image.into(),
            running,
            ..ContainerInfo::default()
        };
        let now = 1_000_000;
        let in_use = InUse::new(
            &[container("step2", true), container("base", false)],
            Duration::from_secs(600),
            now,
        );
        let image = |id: &str, parent: &str, created| ImageInfo {
            id: id.into(),
            parent: parent.into(),
            created,
            ..ImageInfo::default()
        };
        // A step runs on it; a stopped container of it counts as well.
        assert!(in_use.holds(&image("step2", "step1", 0), true));
        assert!(in_use.holds(&image("base", "", 0), true));
        // Made from the image of a container: it may be that container's commit.
        assert!(in_use.holds(&image("step3", "base", 0), true));
        // Young: another process's build may be about to start a step from it, unless it is
        // the dataset's own.
        assert!(in_use.holds(&image("fresh", "other", now - 599), false));
        assert!(!in_use.holds(&image("fresh", "other", now - 599), true));
        // Old, and under no container: it goes.
        assert!(!in_use.holds(&image("old", "other", now - 601), false));
        assert!(!in_use.holds(&image("root", "", 0), false));
        // With no grace, only the containers count.
        let no_grace = InUse::new(&[], Duration::ZERO, now);
        assert!(!no_grace.holds(&image("fresh", "other", now - 1), false));
    }

    #[test]
    fn a_datasets_image_is_held_only_by_a_container_that_could_have_made_it() {
        let of_dataset = |id: &str, image: &str, dataset: Option<&str>| ContainerInfo {
            id: id.into(),
            image: image.into(),
            running: false,
            labels: dataset
                .map(|d| BTreeMap::from([(LABEL_DATASET.to_string(), d.to_string())]))
                .unwrap_or_default(),
            created: 0,
        };
        let env = |dataset: &str| ImageInfo {
            id: format!("env-{dataset}"),
            parent: "python".into(),
            labels: BTreeMap::from([(LABEL_DATASET.to_string(), dataset.to_string())]),
            ..ImageInfo::default()
        };
        let now = 1_000_000;
        // Another dataset's run left a container on the shared base: it made none of ours.
        let other = InUse::new(
            &[of_dataset("left", "python", Some("/data/other"))],
            Duration::ZERO,
            now,
        );
        assert!(!other.holds(&env("/data/demo"), true));
        assert!(other.holds(&env("/data/other"), true));
        // An image of no dataset (a base, a build's step) made from that image may be its
        // commit all the same.
        let base_step = ImageInfo {
            id: "step".into(),
            parent: "python".into(),
            ..ImageInfo::default()
        };
        assert!(other.holds(&base_step, false));
        // A container of no dataset (a build's step, another program's) may have made anything
        // made after it was created, and nothing made before.
        let unlabelled = InUse::new(&[of_dataset("step", "python", None)], Duration::ZERO, now);
        assert!(unlabelled.holds(&env("/data/demo"), true));
        let later = ContainerInfo {
            created: 2_000,
            ..of_dataset("step", "python", None)
        };
        let made_at = |created| ImageInfo {
            created,
            ..env("/data/demo")
        };
        let in_use = InUse::new(&[later], Duration::ZERO, now);
        assert!(!in_use.holds(&made_at(1_999), true));
        assert!(in_use.holds(&made_at(2_000), true));
        assert!(in_use.holds(&made_at(2_500), true));
    }

    fn image(id: &str, parent: &str, size: i64, tagged: bool) -> ImageInfo {
        ImageInfo {
            id: id.into(),
            parent: parent.into(),
            size,
            tags: if tagged {
                vec![format!("t:{id}")]
            } else {
                Vec::new()
            },
            ..ImageInfo::default()
        }
    }

    #[test]
    fn an_image_frees_its_own_layer_and_the_unnamed_steps_only_it_was_made_from() {
        // base <- step1 <- step2 <- env: removing env's name frees the three layers above base.
        let chain = vec![
            image("base", "", 100, true),
            image("step1", "base", 150, false),
            image("step2", "step1", 180, false),
            image("env", "step2", 200, true),
        ];
        let removed = |ids: &[&'static str]| ids.iter().copied().collect::<BTreeSet<&str>>();
        assert_eq!(freed_bytes(&chain, &removed(&["env"])), 100);
        // Another image made from step1 keeps it (and base).
        let mut shared = chain.clone();
        shared.push(image("other", "step1", 170, true));
        assert_eq!(freed_bytes(&shared, &removed(&["env"])), 50);
        // A removed image another image is made from only loses its name.
        assert_eq!(freed_bytes(&shared, &removed(&["base"])), 0);
        // Removed together, a child and its parent both go, in either order.
        assert_eq!(freed_bytes(&shared, &removed(&["other", "env"])), 120);
        assert_eq!(
            freed_bytes(&shared, &removed(&["env", "other", "base"])),
            220
        );
    }
}
