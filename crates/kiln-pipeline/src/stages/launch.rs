//! `launch`: an environment image per kept candidate, built in Docker.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use kiln_core::config::{LaunchSettings, NodeKind, NodeSettings};
use kiln_core::runtime::LABEL_DATASET;
use kiln_core::{ContainerRuntime, Removals, Reporter};
use kiln_lm::Asker;
use kiln_schema::{Candidate, EnvironmentRecord, InstanceId, PlatformLabel};
use kiln_store::StageTable;

use super::containers;
use super::context::{StageContext, StageOutcome, finish, kept_candidates};
use super::reuse::Reuse;
use crate::error::PipelineError;

/// Launches the kept candidates (those of the platforms the split keeps): an environment
/// image and row each, oldest first, with `reuse` starting from earlier environments of the
/// repository; then removes the images relaunches left untagged and records the stage's
/// figures.
pub(crate) async fn launch(
    cx: &StageContext<'_>,
    settings: &LaunchSettings,
) -> Result<StageOutcome, PipelineError> {
    let candidates = launch_candidates(cx)?;
    let Some(clone_url_template) = cx.clone_url_template().map(str::to_string) else {
        return Err(PipelineError::Internal("launch has no source input".into()));
    };
    let candidates = kiln_schema::rows_by_id(candidates);
    let mut table = cx.table::<EnvironmentRecord>()?;
    let cache_dir = cx.mirrors();
    let items = launch_items(cx, settings, &table, &candidates, &clone_url_template).await?;
    let reuse = settings.reuse.then(|| {
        let concurrency = usize::try_from(settings.concurrency).unwrap_or(1);
        let lanes = super::reuse::lanes(&items, &candidates, concurrency);
        Reuse::new(cx, &table.rows().unwrap_or_default(), &candidates, lanes)
    });
    let verify_every = settings.verify_reuse;
    // The agent's answers are stored in the run and replayed, within the run's LM budget.
    let asker = match &settings.agent {
        Some(agent) => Some(cx.asker(&agent.lm)?),
        None => None,
    };
    let mut requests = Requests {
        cx,
        settings,
        candidates: &candidates,
        clone_url_template,
        cache_dir,
        asker: asker.as_ref(),
        recipes: settings.recipes.then(|| recipes_dir(cx.pipeline)),
        ca_bundle: None,
    };
    let ran = containers::run(
        cx,
        &mut table,
        items.clone(),
        settings.concurrency,
        |id, logs, removals| requests.request(id, logs, removals),
        |runtime, request, reporter| {
            launch_item(runtime, request, reporter, reuse.clone(), verify_every)
        },
        environment_outcome,
    )
    .await?;
    // An instance launched again (after a kill between its commit and its row, or with
    // --force) moved its tag to the new image; the old one, untagged, is nobody's now.
    cx.runtime()?
        .remove_leftover_images(LABEL_DATASET, &crate::labels::dataset_label(cx.pipeline))
        .await?;
    if let Some(asker) = &asker {
        let mut stats = table.manifest().stats.clone();
        asker.stats().add_to(&mut stats);
        table.set_stats(stats)?;
    }
    if settings.reuse {
        add_reuse_figures(&mut table)?;
    }
    let items: BTreeSet<InstanceId> = items.into_iter().collect();
    finish(
        cx,
        &mut table,
        &items,
        ran.processed,
        ran.skipped,
        environment_outcome,
    )
}

/// The candidates the filter kept, less those whose platform the split (when the stage reads
/// one) does not keep.
fn launch_candidates(cx: &StageContext<'_>) -> Result<Vec<Candidate>, PipelineError> {
    let mut candidates = kept_candidates(cx)?;
    if let (Some(labels), Some(NodeSettings::Split(split))) = (
        cx.input_rows::<PlatformLabel>(NodeKind::Split)?,
        cx.input(NodeKind::Split).map(|n| &n.settings),
    ) {
        let keep: BTreeSet<InstanceId> = labels
            .into_iter()
            .filter(|l| split.keep.contains(&l.platform))
            .map(|l| l.instance_id)
            .collect();
        candidates.retain(|c| keep.contains(&c.instance_id));
    }
    Ok(candidates)
}

/// The instances in the order they launch: oldest first, so that with `reuse` an instance
/// finds its ancestors' environments built; with `reuse`, in the order
/// [`super::reuse::launch_order`] reads from the repositories' mirrors (off the async workers,
/// as it runs git).
async fn launch_items(
    cx: &StageContext<'_>,
    settings: &LaunchSettings,
    table: &StageTable<EnvironmentRecord>,
    candidates: &BTreeMap<InstanceId, Candidate>,
    clone_url_template: &str,
) -> Result<Vec<InstanceId>, PipelineError> {
    let mut items: Vec<InstanceId> = candidates.keys().cloned().collect();
    items.sort_by(|a, b| {
        let at = |id: &InstanceId| candidates.get(id).map(|c| c.created_at.as_str());
        at(a).cmp(&at(b)).then_with(|| a.cmp(b))
    });
    if !settings.reuse {
        return Ok(items);
    }
    let cache_dir = cx.mirrors();
    let pending = super::context::pending(cx, table, &items)?;
    let mirrors = kiln_git::MirrorCache::new(&cache_dir).map_err(|e| PipelineError::Host {
        what: format!("the mirror cache {}", cache_dir.display()),
        message: e.to_string(),
    })?;
    let (template, reporter) = (clone_url_template.to_string(), Arc::clone(&cx.reporter));
    // What the order reads of each candidate, not its patches.
    let known: BTreeMap<InstanceId, super::reuse::Commit> = candidates
        .iter()
        .map(|(id, c)| (id.clone(), super::reuse::Commit::of(c)))
        .collect();
    tokio::task::spawn_blocking(move || {
        super::reuse::launch_order(
            &items,
            &pending,
            &known,
            &mirrors,
            &template,
            reporter.as_ref(),
        )
    })
    .await
    .map_err(|e| PipelineError::Internal(format!("ordering the launches: {e}")))
}

/// What every item's launch request is made of: the stage's shared inputs, and the CA bundle,
/// read once and only when there is something to launch.
struct Requests<'a, 'cx> {
    /// The stage.
    cx: &'a StageContext<'cx>,
    /// Its settings, which every request carries.
    settings: &'a LaunchSettings,
    /// The candidates to launch, by id.
    candidates: &'a BTreeMap<InstanceId, Candidate>,
    /// The source's clone address template (`{repo}`, `{owner}`, `{name}` in it).
    clone_url_template: String,
    /// The repositories' mirror cache.
    cache_dir: PathBuf,
    /// The agent's model, when the stage has one.
    asker: Option<&'a Arc<Asker>>,
    /// The dataset's recipe directory, when the stage reads recipes.
    recipes: Option<PathBuf>,
    /// `None` until the first request; then the bundle, when the config names one.
    ca_bundle: Option<Option<Arc<Vec<u8>>>>,
}

impl Requests<'_, '_> {
    /// The launch request of `id` (`None` for an id that is not a candidate), its logs in
    /// `logs`, its containers' removal waited for through `removals`.
    fn request(
        &mut self,
        id: &InstanceId,
        logs: containers::ItemLogs,
        removals: &Removals,
    ) -> Result<Option<kiln_launch::LaunchRequest>, PipelineError> {
        let Some(candidate) = self.candidates.get(id) else {
            return Ok(None);
        };
        let cx = self.cx;
        Ok(Some(kiln_launch::LaunchRequest {
            candidate: candidate.clone(),
            clone_url: kiln_github::clone_url(&self.clone_url_template, &candidate.repo),
            cache_dir: self.cache_dir.clone(),
            log_dir: logs.dir,
            log_dir_label: logs.label,
            ca_bundle: self.ca_bundle()?,
            image_tag: image_tag(
                &cx.pipeline.docker.image_prefix,
                &cx.pipeline.dataset.name,
                &crate::labels::dataset_label(cx.pipeline),
                id,
            ),
            labels: cx.labels(),
            settings: self.settings.clone(),
            docker: cx.pipeline.docker.clone(),
            stage: cx.node.name.clone(),
            removals: removals.clone(),
            lm: self.asker.map(|asker| {
                kiln_launch::AgentModel(Arc::new(kiln_lm::AskingModel::new(
                    Arc::clone(asker),
                    id.as_str(),
                )))
            }),
            recipes: self.recipes.clone(),
            reuse: Vec::new(),
        }))
    }

    /// The CA bundle `[docker] ca_bundle` names, read on the first call.
    fn ca_bundle(&mut self) -> Result<Option<Arc<Vec<u8>>>, PipelineError> {
        if self.ca_bundle.is_none() {
            self.ca_bundle = Some(match &self.cx.pipeline.docker.ca_bundle {
                Some(path) => Some(Arc::new(std::fs::read(path).map_err(|e| {
                    PipelineError::Input {
                        what: format!("the CA bundle {}", path.display()),
                        message: e.to_string(),
                    }
                })?)),
                None => None,
            });
        }
        Ok(self.ca_bundle.clone().flatten())
    }
}

/// Launches one instance into its row; with `reuse`, in its chain's turn, from the
/// environments its repository has so far, checked against a cold launch every `verify_every`
/// reuses.
async fn launch_item(
    runtime: Arc<dyn ContainerRuntime>,
    request: Arc<kiln_launch::LaunchRequest>,
    reporter: Arc<dyn Reporter>,
    reuse: Option<Reuse>,
    verify_every: i64,
) -> Result<EnvironmentRecord, PipelineError> {
    // With `reuse`, the instances of one chain of a repository launch one at a time, each
    // given the environments built so far.
    let (_turn, request) = match &reuse {
        Some(reuse) => {
            let turn = reuse.turn(&request.candidate).await;
            let mut request = (*request).clone();
            // Never its own earlier environment: a forced launch starts over.
            let own = request.candidate.instance_id.as_str();
            request.reuse = reuse.sources(&request.candidate.repo);
            request.reuse.retain(|s| s.instance_id != own);
            (Some(turn), Arc::new(request))
        }
        None => (None, request),
    };
    let launched = async {
        let mut row =
            kiln_launch::launch(Arc::clone(&runtime), &request, reporter.as_ref()).await?;
        if let Some(reuse) = &reuse {
            // Checked first: a row the check replaced is the source for the next.
            reuse
                .verify(runtime, &request, &mut row, reporter.as_ref(), verify_every)
                .await?;
            reuse.built(&request.candidate, &row);
        }
        Ok(row)
    }
    .await;
    launched.map_err(|e| launch_error(&request.candidate.instance_id, e))
}

/// The stage's error for a launch that failed without a row: a registry outage names the item
/// (the resume builds it), the engine's and the host's failures stay what they are.
fn launch_error(item: &InstanceId, error: kiln_launch::LaunchError) -> PipelineError {
    match error {
        kiln_launch::LaunchError::Engine(e) => PipelineError::Engine(e),
        kiln_launch::LaunchError::RegistryDown { url, error } => PipelineError::RegistryDown {
            item: item.to_string(),
            url,
            error,
        },
        kiln_launch::LaunchError::Host { what, message } => PipelineError::Host { what, message },
    }
}

/// Adds to the stage's figures, over all its rows, how many started from another environment
/// (`reuse.reused`) and how the cold checks of `verify_reuse` agreed (`reuse.checked`,
/// `reuse.agreed`).
fn add_reuse_figures(table: &mut StageTable<EnvironmentRecord>) -> Result<(), PipelineError> {
    let rows = table.rows()?;
    let count =
        |keep: &dyn Fn(&EnvironmentRecord) -> bool| rows.iter().filter(|r| keep(r)).count() as f64;
    let mut stats = table.manifest().stats.clone();
    stats.insert("reuse.reused".into(), count(&|r| r.reused_from.is_some()));
    stats.insert("reuse.checked".into(), count(&|r| r.reuse_check.is_some()));
    stats.insert(
        "reuse.agreed".into(),
        count(&|r| {
            r.reuse_check
                .as_deref()
                .is_some_and(|c| c.starts_with("same "))
        }),
    );
    table.set_stats(stats)?;
    Ok(())
}

/// The dataset's recipe directory, `<root>/<dataset>/recipes`: one reviewable file per
/// repository, read by every run of the dataset (see `kiln_launch::recipe`).
#[must_use]
pub fn recipes_dir(pipeline: &kiln_core::config::Pipeline) -> std::path::PathBuf {
    pipeline
        .dataset
        .root
        .join(&pipeline.dataset.name)
        .join("recipes")
}

fn environment_outcome(row: &EnvironmentRecord) -> String {
    match &row.failure_class {
        None => row.status.to_string(),
        Some(class) => format!("{}:{class}", row.status),
    }
}

/// Image tag of an instance's environment: `<prefix>/<dataset>-<root>:<stem>`, where the prefix
/// is as the config gives it (checked there), `<root>` is 8 hex digits of the SHA-256 of the
/// dataset's directory (`dataset_dir`, absolute), and the dataset and the id are named by
/// [`kiln_schema::safe_name`] and [`InstanceId::file_stem`]: lowercase, as Docker requires, and
/// distinct for ids (and dataset names) that differ only in case or length, so that no instance
/// is ever validated in another's image, and two datasets of one name in different directories
/// (two checkouts, the test suite and a user's demo) never retag each other's images.
fn image_tag(prefix: &str, dataset: &str, dataset_dir: &str, instance_id: &InstanceId) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(dataset_dir.as_bytes());
    let root: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    format!(
        "{prefix}/{}-{root}:{}",
        kiln_schema::safe_name(dataset),
        instance_id.file_stem()
    )
}

#[cfg(test)]
mod tests {
    use kiln_schema::InstanceId;

    use super::image_tag;

    fn id(text: &str) -> InstanceId {
        InstanceId::new(text).unwrap()
    }

    #[test]
    fn image_tags_are_valid_docker_references_unique_per_dataset_directory() {
        assert_eq!(
            image_tag("kiln-env", "demo", "/a/demo", &id("kiln-demo__calc-2")),
            "kiln-env/demo-4b1e9bdd:kiln-demo__calc-2"
        );
        assert_ne!(
            image_tag("kiln-env", "demo", "/b/demo", &id("kiln-demo__calc-2")),
            image_tag("kiln-env", "demo", "/a/demo", &id("kiln-demo__calc-2")),
        );
        let tag = image_tag("kiln-env", "d", "/d", &id("Owner__Repo-7"));
        assert!(tag.starts_with("kiln-env/d-"), "{tag}");
        assert!(tag.contains(":owner__repo-7--"), "{tag}");
        let tag = image_tag("kiln-env", "Demo", "/Demo", &id("x-1"));
        assert!(tag.starts_with("kiln-env/demo--"), "{tag}");
    }

    #[test]
    fn ids_that_differ_only_in_case_get_different_images() {
        let tags: std::collections::BTreeSet<String> = ["Foo__bar-1", "foo__bar-1", "FOO__bar-1"]
            .iter()
            .map(|t| image_tag("kiln-env", "d", "/d", &id(t)))
            .collect();
        assert_eq!(tags.len(), 3, "{tags:?}");
        let long: std::collections::BTreeSet<String> = ["1", "2"]
            .iter()
            .map(|n| {
                image_tag(
                    "kiln-env",
                    "d",
                    "/d",
                    &id(&format!("{}{n}", "a".repeat(150))),
                )
            })
            .collect();
        assert_eq!(long.len(), 2, "{long:?}");
        for tag in &long {
            let (_, version) = tag.rsplit_once(':').unwrap_or_default();
            assert!(version.len() + ".dockerfile-check".len() <= 128, "{tag}");
        }
    }
}
