//! `kiln push`: a release to a Hugging Face Hub dataset repository in one commit, and its
//! environment images to the registry the release names.
//!
//! Layout on the Hub: each release under `releases/<tag>/` as it is on disk (shards, card,
//! `release.json`, LM answers), and a root `README.md` whose `configs` make
//! `load_dataset("ns/name")` give every release's main split together (no instance is in two
//! releases) with the frozen splits of the latest release, and `load_dataset("ns/name", "<tag>")`
//! one release. Pushing the same release again sends nothing and makes no commit; a push cut off
//! after some uploads sends only what the Hub does not hold yet.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use kiln_core::{ContainerRuntime, Event, Reporter};
use kiln_hub::{CommitPlan, Content, Hub, Outcome, Upload};

use crate::error::PipelineError;
use crate::release::{RELEASE_FILE, ReleaseFile, ReleaseManifest};

/// Where and how to push.
#[derive(Clone)]
pub struct PushOptions {
    /// `namespace/name` of the dataset repository.
    pub repo: String,
    /// The Hub's address.
    pub endpoint: String,
    /// The token (`HF_TOKEN`); never printed.
    pub token: Option<String>,
    /// Create the repository private.
    pub private: bool,
    /// Say what would be pushed, push nothing, reach no server.
    pub dry_run: bool,
    /// Send the release's Harbor tasks (`harbor/`) too. Without it they are neither sent nor
    /// deleted on the Hub.
    pub harbor: bool,
}

impl std::fmt::Debug for PushOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushOptions")
            .field("repo", &self.repo)
            .field("endpoint", &self.endpoint)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("private", &self.private)
            .field("dry_run", &self.dry_run)
            .field("harbor", &self.harbor)
            .finish()
    }
}

/// What a push did (or, dry, would do).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct PushReport {
    /// The release's tag.
    pub tag: String,
    /// Files of the commit: path in the repository and size.
    pub files: Vec<(String, u64)>,
    /// Images pushed to the registry, with the digest it reported.
    pub images: Vec<(String, Option<String>)>,
    /// The commit made (`None`: dry run, or nothing changed).
    pub commit: Option<String>,
    /// Its address.
    pub commit_url: Option<String>,
    /// LFS files sent.
    pub sent: Vec<String>,
    /// LFS files the Hub held already.
    pub already_stored: Vec<String>,
    /// Files equal to the Hub's, left out of the commit.
    pub unchanged: Vec<String>,
    /// Files of an earlier push of the release that it no longer has, deleted.
    pub deleted: Vec<String>,
    /// Images the release names that are not in its registry (rows made before the registry
    /// was set), left alone.
    pub images_skipped: Vec<String>,
}

fn hub_error(e: kiln_hub::HubError) -> PipelineError {
    PipelineError::Publish(e.to_string())
}

/// Checks that every file `release.json` lists (the Harbor tasks' too, with `harbor`) is there
/// with its size and hash: a release edited after its export is not pushed.
fn verify(
    release_dir: &Path,
    manifest: &ReleaseManifest,
    harbor: bool,
) -> Result<(), PipelineError> {
    let invalid = |message: String| PipelineError::Input {
        what: release_dir.join(RELEASE_FILE).display().to_string(),
        message,
    };
    let tag_ok = !manifest.tag.is_empty()
        && !manifest.tag.starts_with('.')
        && manifest
            .tag
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if !tag_ok {
        return Err(invalid(format!("{:?} is not a release tag", manifest.tag)));
    }
    if harbor && manifest.harbor.is_none() {
        return Err(invalid(
            "the release has no Harbor tasks; export it with `formats = [\"parquet\", \"harbor\"]` in its export stage".into(),
        ));
    }
    let harbor_files = if harbor {
        manifest.harbor_files()
    } else {
        Vec::new()
    };
    for listed in manifest.all_files().into_iter().chain(harbor_files) {
        if !kiln_hub::valid_path(Path::new(&listed.path)) {
            return Err(invalid(format!(
                "{:?} is not a path inside the release",
                listed.path
            )));
        }
        let found = ReleaseFile::read(release_dir, &listed.path)?;
        if &found != listed {
            return Err(PipelineError::Input {
                what: release_dir.join(&listed.path).display().to_string(),
                message: format!(
                    "it is not the file the export wrote ({} bytes, sha256 {} listed in {RELEASE_FILE}; found {} bytes, sha256 {}); export the release again",
                    listed.bytes, listed.sha256, found.bytes, found.sha256
                ),
            });
        }
    }
    Ok(())
}

/// Quotes a string for YAML.
fn yaml(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// The repository's root card: a config per release with the splits it holds, and a default
/// config joining every release's main split with the latest release's frozen splits.
/// `releases` maps each tag to its splits (the Hub's, and this release's).
#[must_use]
pub fn root_card(
    manifest: &ReleaseManifest,
    releases: &BTreeMap<String, BTreeSet<String>>,
) -> String {
    let main = &manifest.main_split;
    let latest = releases
        .keys()
        .next_back()
        .cloned()
        .unwrap_or_else(|| manifest.tag.clone());
    let frozen: Vec<&String> = releases
        .get(&latest)
        .map(|splits| splits.iter().filter(|s| *s != main).collect())
        .unwrap_or_default();
    let mut card = String::from("---\n");
    let _ = writeln!(card, "pretty_name: {}", yaml(&manifest.dataset));
    if !manifest.license.is_empty() {
        let _ = writeln!(card, "license: {}", yaml(&manifest.license));
    }
    card.push_str("tags:\n- \"code\"\n- \"swe-bench\"\n- \"kiln\"\nconfigs:\n");
    card.push_str("- config_name: default\n  data_files:\n");
    let split_line = |card: &mut String, split: &str, path: String| {
        let _ = writeln!(card, "  - split: {split}\n    path: {}", yaml(&path));
    };
    split_line(&mut card, main, format!("releases/*/data/{main}-*"));
    for split in &frozen {
        split_line(
            &mut card,
            split,
            format!("releases/{latest}/data/{split}-*"),
        );
    }
    for (tag, splits) in releases {
        let _ = writeln!(card, "- config_name: {}\n  data_files:", yaml(tag));
        for split in splits {
            split_line(&mut card, split, format!("releases/{tag}/data/{split}-*"));
        }
    }
    card.push_str("---\n\n");
    let _ = writeln!(card, "# {}\n", manifest.dataset);
    let _ = writeln!(
        card,
        "Task instances built and validated by kiln, published as releases under `releases/<tag>/`, \
         each with its own card. The default config's `{main}` split holds every release's new instances \
         together (an instance is published in one release only){}; a config named after a release holds \
         that release alone.\n",
        if frozen.is_empty() {
            String::new()
        } else {
            format!(
                ", and {} the frozen splits of release {latest}",
                frozen
                    .iter()
                    .map(|s| format!("`{s}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    );
    card.push_str("```python\nimport datasets\n");
    let _ = writeln!(
        card,
        "everything = datasets.load_dataset(\"<this repository>\", split=\"{main}\")\none_release = datasets.load_dataset(\"<this repository>\", \"{latest}\", split=\"{main}\")\n```\n"
    );
    card.push_str("| release | card |\n|---|---|\n");
    for tag in releases.keys().rev() {
        let _ = writeln!(
            card,
            "| {tag} | [releases/{tag}/README.md](releases/{tag}/README.md) |"
        );
    }
    card
}

/// The split of a shard path (`data/lite-00000-of-00001.parquet` is `lite`).
fn shard_split(path: &str) -> Option<&str> {
    let name = path.strip_prefix("data/")?.strip_suffix(".parquet")?;
    let (head, _) = name.rsplit_once("-of-")?;
    head.rsplit_once('-').map(|(split, _)| split)
}

/// Pushes the release at `release_dir`: its images to their registry (when it names one), then
/// every file and the root card to the Hub in one commit.
///
/// # Errors
/// When the release is incomplete or edited, an image cannot be pushed, or the Hub refuses.
pub async fn push(
    release_dir: &Path,
    options: &PushOptions,
    runtime: Option<Arc<dyn ContainerRuntime>>,
    reporter: &Arc<dyn Reporter>,
) -> Result<PushReport, PipelineError> {
    let manifest = ReleaseManifest::read(release_dir)?;
    verify(release_dir, &manifest, options.harbor)?;
    let note = |message: String| reporter.report(Event::Note { message });
    let prefix = format!("releases/{}", manifest.tag);
    let mut uploads = release_uploads(release_dir, &manifest, &prefix, options.harbor);
    let own_splits: BTreeSet<String> = manifest.splits.keys().cloned().collect();
    let hub = Hub::new(&options.endpoint, options.token.clone()).map_err(hub_error)?;
    let OnHub {
        mut releases,
        files: on_hub,
        parent,
    } = if options.dry_run {
        // No server is asked: the releases next to this one stand in for the Hub's.
        OnHub::beside(release_dir)?
    } else {
        // Cards first: a card the Hub would not read stops the push before anything is sent.
        validate_release_card(&hub, release_dir, &prefix).await?;
        if hub
            .create_dataset_repo(&options.repo, options.private)
            .await
            .map_err(hub_error)?
        {
            note(format!("created the dataset repository {}", options.repo));
        }
        OnHub::read(&hub, &options.repo).await?
    };
    releases.insert(manifest.tag.clone(), own_splits);
    let card = root_card(&manifest, &releases);
    uploads.push(Upload {
        path_in_repo: "README.md".into(),
        content: Content::Bytes(card.clone().into_bytes()),
    });
    let delete = left_behind(on_hub, &uploads, &prefix, options.harbor);
    let (images, images_skipped) = registry_images(&manifest);
    let mut report = PushReport {
        tag: manifest.tag.clone(),
        files: upload_sizes(&uploads),
        deleted: delete.clone(),
        images_skipped,
        ..PushReport::default()
    };
    if options.dry_run {
        report.images = images.into_iter().map(|i| (i, None)).collect();
        return Ok(report);
    }
    hub.validate_card(&card)
        .await
        .map_err(|e| PipelineError::Publish(format!("have the Hub accept the root card: {e}")))?;
    report.images = push_images(runtime, images, &note).await?;
    let (summary, description) = commit_message(&manifest);
    let plan = CommitPlan {
        summary: &summary,
        description: &description,
        delete,
        parent: parent.as_deref(),
    };
    let outcome = commit(&hub, &options.repo, &plan, uploads, &note).await?;
    report.commit = outcome.commit;
    report.commit_url = outcome.commit_url;
    report.sent = outcome.sent;
    report.already_stored = outcome.already_stored;
    report.unchanged = outcome.unchanged;
    Ok(report)
}

/// The release's files as uploads under `prefix` (`releases/<tag>`): every file
/// `release.json` lists (with `harbor`, its Harbor tasks' too), then `release.json` itself.
fn release_uploads(
    release_dir: &Path,
    manifest: &ReleaseManifest,
    prefix: &str,
    harbor: bool,
) -> Vec<Upload> {
    let harbor_files = if harbor {
        manifest.harbor_files()
    } else {
        Vec::new()
    };
    manifest
        .all_files()
        .into_iter()
        .chain(harbor_files)
        .map(|f| f.path.clone())
        .chain([RELEASE_FILE.to_string()])
        .map(|path| Upload {
            path_in_repo: format!("{prefix}/{path}"),
            content: Content::File(release_dir.join(&path)),
        })
        .collect()
}

/// Has the Hub check the release's own card (`README.md`), which a push sends as it is.
async fn validate_release_card(
    hub: &Hub,
    release_dir: &Path,
    prefix: &str,
) -> Result<(), PipelineError> {
    let release_card = std::fs::read_to_string(release_dir.join("README.md")).map_err(|e| {
        PipelineError::Input {
            what: release_dir.join("README.md").display().to_string(),
            message: e.to_string(),
        }
    })?;
    hub.validate_card(&release_card).await.map_err(|e| {
        PipelineError::Publish(format!("have the Hub accept the card of {prefix}: {e}"))
    })
}

/// What the dataset repository holds before the push.
struct OnHub {
    /// Each release's tag and the splits it has shards of.
    releases: BTreeMap<String, BTreeSet<String>>,
    /// The paths of the files under `releases/`.
    files: Vec<String>,
    /// The commit the push builds on (`None` in a dry run).
    parent: Option<String>,
}

impl OnHub {
    /// What a dry run takes the Hub to hold: the releases on disk beside `release_dir`.
    fn beside(release_dir: &Path) -> Result<Self, PipelineError> {
        let mut releases = BTreeMap::new();
        if let Some(dir) = release_dir.parent() {
            for tag in kiln_store::analytics::release_tags(dir)? {
                if let Ok(other) = ReleaseManifest::read(&dir.join(&tag)) {
                    releases.insert(tag, other.splits.keys().cloned().collect());
                }
            }
        }
        Ok(Self {
            releases,
            files: Vec::new(),
            parent: None,
        })
    }

    /// What the head of `repo`'s `main` holds under `releases/`, and that head.
    async fn read(hub: &Hub, repo: &str) -> Result<Self, PipelineError> {
        let head = hub.head_commit(repo, "main").await.map_err(hub_error)?;
        let mut releases: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut files = Vec::new();
        for entry in hub
            .list_tree(repo, &head, "releases", true)
            .await
            .map_err(hub_error)?
        {
            if entry.kind != "file" {
                continue;
            }
            let Some((tag, path)) = entry
                .path
                .strip_prefix("releases/")
                .and_then(|p| p.split_once('/'))
            else {
                continue;
            };
            if let Some(split) = shard_split(path) {
                releases
                    .entry(tag.to_string())
                    .or_default()
                    .insert(split.to_string());
            }
            files.push(entry.path.clone());
        }
        Ok(Self {
            releases,
            files,
            parent: Some(head),
        })
    }
}

/// What an earlier push of this release left that it no longer has (a shard of a split that
/// now has fewer shards, a frozen split dropped, a task no longer in it): deleted in the same
/// commit, or the default config would read those rows too. A push without `harbor` leaves the
/// Hub's Harbor tasks of the release alone.
fn left_behind(on_hub: Vec<String>, uploads: &[Upload], prefix: &str, harbor: bool) -> Vec<String> {
    let sending: BTreeSet<&str> = uploads.iter().map(|u| u.path_in_repo.as_str()).collect();
    let harbor_dir = format!("{prefix}/{}/", crate::release::HARBOR_DIR);
    on_hub
        .into_iter()
        .filter(|p| p.starts_with(&format!("{prefix}/")) && !sending.contains(p.as_str()))
        .filter(|p| harbor || !p.starts_with(&harbor_dir))
        .collect()
}

/// Each upload's path in the repository and size.
fn upload_sizes(uploads: &[Upload]) -> Vec<(String, u64)> {
    uploads
        .iter()
        .map(|u| {
            let size = match &u.content {
                Content::Bytes(b) => b.len() as u64,
                Content::File(p) => std::fs::metadata(p).map(|m| m.len()).unwrap_or(0),
            };
            (u.path_in_repo.clone(), size)
        })
        .collect()
}

/// The images the release names in its registry, which a push sends, and the others, left
/// alone: a row made before `image_registry` was set names a local image, which must not go
/// to whatever registry its name implies.
fn registry_images(manifest: &ReleaseManifest) -> (Vec<String>, Vec<String>) {
    let mut images = Vec::new();
    let mut skipped = Vec::new();
    if let Some(registry) = &manifest.image_registry {
        for image in &manifest.images {
            if image.starts_with(&format!("{registry}/")) {
                images.push(image.clone());
            } else {
                skipped.push(image.clone());
            }
        }
    }
    (images, skipped)
}

/// Pushes `images` to their registry with the engine, one at a time, saying which; returns
/// each with the digest the registry reported.
async fn push_images(
    runtime: Option<Arc<dyn ContainerRuntime>>,
    images: Vec<String>,
    note: &(dyn Fn(String) + Sync),
) -> Result<Vec<(String, Option<String>)>, PipelineError> {
    let mut pushed = Vec::new();
    if images.is_empty() {
        return Ok(pushed);
    }
    let Some(runtime) = runtime else {
        return Err(PipelineError::NoEngine("push".into()));
    };
    for image in images {
        note(format!("pushing image {image}"));
        let digest = runtime.push_image(&image, &mut |_| {}).await.map_err(|e| {
            PipelineError::Publish(format!(
                "push the environment image {image} to its registry: {e}"
            ))
        })?;
        pushed.push((image, digest));
    }
    Ok(pushed)
}

/// The commit's summary and description: the release, its splits' row counts, and the run,
/// kiln and schema versions that made it.
fn commit_message(manifest: &ReleaseManifest) -> (String, String) {
    let rows: Vec<String> = manifest
        .splits
        .iter()
        .map(|(name, split)| format!("{name}: {} rows", split.rows))
        .collect();
    let summary = format!("kiln release {}", manifest.tag);
    let description = format!(
        "{} (run {}, kiln {}, schema version {}).",
        rows.join(", "),
        manifest.run_id,
        manifest.kiln_version,
        manifest.schema_version
    );
    (summary, description)
}

/// Makes the commit on `repo`'s `main`, passing on the Hub's progress lines; a commit that
/// landed meanwhile (the Hub's 412 on `plan`'s parent) is said plainly, with what to do.
async fn commit(
    hub: &Hub,
    repo: &str,
    plan: &CommitPlan<'_>,
    uploads: Vec<Upload>,
    note: &(dyn Fn(String) + Sync),
) -> Result<Outcome, PipelineError> {
    hub.upload(repo, "main", plan, uploads, &|line: &str| {
        note(line.to_string());
    })
    .await
    .map_err(|e| match e {
        kiln_hub::HubError::Status { status: 412, .. } => PipelineError::Publish(format!(
            "commit to {repo}: another commit landed while kiln prepared this one; run the push again"
        )),
        other => hub_error(other),
    })
}

#[cfg(test)]
mod tests {
    use kiln_hub::{Content, Upload};

    use super::{left_behind, shard_split};

    #[test]
    fn shard_paths_name_their_split() {
        assert_eq!(
            shard_split("data/test-00000-of-00002.parquet"),
            Some("test")
        );
        assert_eq!(
            shard_split("data/lite_v2-00001-of-00002.parquet"),
            Some("lite_v2")
        );
        assert_eq!(shard_split("README.md"), None);
    }

    #[test]
    fn files_of_this_release_the_push_no_longer_sends_are_deleted() {
        let uploads: Vec<Upload> = [
            "releases/2026-11/data/test-00000-of-00001.parquet",
            "README.md",
        ]
        .map(|path| Upload {
            path_in_repo: path.into(),
            content: Content::Bytes(Vec::new()),
        })
        .into();
        let on_hub: Vec<String> = [
            "releases/2026-11/data/test-00000-of-00001.parquet",
            "releases/2026-11/data/test-00001-of-00002.parquet",
            "releases/2026-11/data/lite-00000-of-00001.parquet",
            "releases/2026-10/data/test-00000-of-00001.parquet",
            "releases/2026-110/data/test-00000-of-00001.parquet",
        ]
        .map(String::from)
        .into();
        assert_eq!(
            left_behind(on_hub.clone(), &uploads, "releases/2026-11", false),
            [
                "releases/2026-11/data/test-00001-of-00002.parquet",
                "releases/2026-11/data/lite-00000-of-00001.parquet",
            ]
        );
        // Harbor tasks on the Hub go only when a push sends the release's tasks.
        let mut with_tasks = on_hub;
        with_tasks.push("releases/2026-11/harbor/a__b-1/task.toml".into());
        assert_eq!(
            left_behind(with_tasks.clone(), &uploads, "releases/2026-11", false).len(),
            2
        );
        assert_eq!(
            left_behind(with_tasks, &uploads, "releases/2026-11", true).last(),
            Some(&"releases/2026-11/harbor/a__b-1/task.toml".to_string())
        );
    }
}
