//! `kiln push`: a release to a Hugging Face Hub dataset repository in one commit, and its
//! environment images to the registry the release names.
//!
//! Layout on the Hub: each release under `releases/<tag>/` as it is on disk (shards, card,
//! `release.json`, LM answers), and a root `README.md` whose `configs` make
//! `load_dataset("ns/name")` give every release's main split together (no instance is in two
//! releases) with the frozen splits of the latest release, and `load_dataset("ns/name", "<tag>")`
//! one release. Pushing the same release again sends nothing and makes no commit; a push cut off
//! after some uploads sends only what the Hub does not hold yet.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use kiln_core::{ContainerRuntime, Event, Reporter};
use kiln_hub::{Content, Hub, Upload};

use crate::PipelineError;
use crate::release::{RELEASE_FILE, ReleaseFile, ReleaseManifest};

/// Where and how to push.
#[derive(Debug, Clone)]
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
}

fn hub_error(e: kiln_hub::HubError) -> PipelineError {
    PipelineError::Publish(e.to_string())
}

/// Checks that every file `release.json` lists is there with its size and hash: a release
/// edited after its export is not pushed.
fn verify(release_dir: &Path, manifest: &ReleaseManifest) -> Result<(), PipelineError> {
    for listed in manifest.all_files() {
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

/// The repository's root card: configs over every release, and what they hold.
#[must_use]
pub fn root_card(manifest: &ReleaseManifest, tags: &BTreeSet<String>) -> String {
    let latest = tags
        .iter()
        .next_back()
        .cloned()
        .unwrap_or_else(|| manifest.tag.clone());
    let main = &manifest.main_split;
    let frozen: Vec<&String> = manifest.frozen.keys().collect();
    let mut card = String::from("---\n");
    let _ = writeln!(card, "pretty_name: {}", yaml(&manifest.dataset));
    if !manifest.license.is_empty() {
        let _ = writeln!(card, "license: {}", yaml(&manifest.license));
    }
    card.push_str("tags:\n- \"code\"\n- \"swe-bench\"\n- \"kiln\"\nconfigs:\n");
    card.push_str("- config_name: default\n  data_files:\n");
    let _ = writeln!(
        card,
        "  - split: {main}\n    path: releases/*/data/{main}-*"
    );
    for split in &frozen {
        let _ = writeln!(
            card,
            "  - split: {split}\n    path: releases/{latest}/data/{split}-*"
        );
    }
    for tag in tags {
        let _ = writeln!(card, "- config_name: {}\n  data_files:", yaml(tag));
        let _ = writeln!(
            card,
            "  - split: {main}\n    path: releases/{tag}/data/{main}-*"
        );
        // The frozen splits of the release pushed now are known; other releases are assumed
        // to hold the same ones, as frozen splits are kept from release to release.
        for split in &frozen {
            let _ = writeln!(
                card,
                "  - split: {split}\n    path: releases/{tag}/data/{split}-*"
            );
        }
    }
    card.push_str("---\n\n");
    let _ = writeln!(card, "# {}\n", manifest.dataset);
    let _ = writeln!(
        card,
        "Task instances built and validated by kiln, published as monthly releases under `releases/<tag>/`, \
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
        "everything = datasets.load_dataset(\"<this repository>\", split=\"{main}\")\none_month = datasets.load_dataset(\"<this repository>\", \"{latest}\", split=\"{main}\")\n```\n"
    );
    card.push_str("| release | card |\n|---|---|\n");
    for tag in tags.iter().rev() {
        let _ = writeln!(
            card,
            "| {tag} | [releases/{tag}/README.md](releases/{tag}/README.md) |"
        );
    }
    card
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
    verify(release_dir, &manifest)?;
    let note = |message: String| reporter.report(Event::Note { message });
    let prefix = format!("releases/{}", manifest.tag);
    let mut uploads: Vec<Upload> = manifest
        .all_files()
        .into_iter()
        .map(|f| f.path.clone())
        .chain([RELEASE_FILE.to_string()])
        .map(|path| Upload {
            path_in_repo: format!("{prefix}/{path}"),
            content: Content::File(release_dir.join(&path)),
        })
        .collect();
    let hub = Hub::new(&options.endpoint, options.token.clone()).map_err(hub_error)?;
    let mut tags = BTreeSet::from([manifest.tag.clone()]);
    if options.dry_run {
        // No server is asked: the releases next to this one stand in for the Hub's.
        if let Some(dir) = release_dir.parent() {
            for tag in kiln_store::analytics::release_tags(dir)? {
                if dir.join(&tag).join(RELEASE_FILE).exists() {
                    tags.insert(tag);
                }
            }
        }
    } else {
        for entry in hub
            .list_tree(&options.repo, "main", "releases", false)
            .await
            .map_err(hub_error)?
        {
            if entry.kind == "directory"
                && let Some(tag) = entry.path.strip_prefix("releases/")
            {
                tags.insert(tag.to_string());
            }
        }
    }
    let card = root_card(&manifest, &tags);
    uploads.push(Upload {
        path_in_repo: "README.md".into(),
        content: Content::Bytes(card.clone().into_bytes()),
    });
    let mut report = PushReport {
        tag: manifest.tag.clone(),
        files: uploads
            .iter()
            .map(|u| {
                let size = match &u.content {
                    Content::Bytes(b) => b.len() as u64,
                    Content::File(p) => std::fs::metadata(p).map(|m| m.len()).unwrap_or(0),
                };
                (u.path_in_repo.clone(), size)
            })
            .collect(),
        ..PushReport::default()
    };
    if options.dry_run {
        report.images = manifest
            .image_registry
            .as_ref()
            .map(|_| manifest.images.iter().map(|i| (i.clone(), None)).collect())
            .unwrap_or_default();
        return Ok(report);
    }
    if manifest.image_registry.is_some() {
        let Some(runtime) = runtime else {
            return Err(PipelineError::NoEngine("push".into()));
        };
        for image in &manifest.images {
            note(format!("pushing image {image}"));
            let digest = runtime.push_image(image, &mut |_| {}).await.map_err(|e| {
                PipelineError::Publish(format!(
                    "push the environment image {image} to its registry: {e}"
                ))
            })?;
            report.images.push((image.clone(), digest));
        }
    }
    for card_path in ["README.md", &format!("{prefix}/README.md")] {
        let text = match uploads.iter().find(|u| u.path_in_repo == card_path) {
            Some(Upload {
                content: Content::Bytes(b),
                ..
            }) => String::from_utf8_lossy(b).into_owned(),
            Some(Upload {
                content: Content::File(p),
                ..
            }) => std::fs::read_to_string(p).unwrap_or_default(),
            None => continue,
        };
        hub.validate_card(&text).await.map_err(|e| {
            PipelineError::Publish(format!("have the Hub accept the card {card_path}: {e}"))
        })?;
    }
    if hub
        .create_dataset_repo(&options.repo, options.private)
        .await
        .map_err(hub_error)?
    {
        note(format!("created the dataset repository {}", options.repo));
    }
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
    let outcome = hub
        .upload(
            &options.repo,
            "main",
            uploads,
            &summary,
            &description,
            &|line: &str| note(line.to_string()),
        )
        .await
        .map_err(hub_error)?;
    report.commit = outcome.commit;
    report.commit_url = outcome.commit_url;
    report.sent = outcome.sent;
    report.already_stored = outcome.already_stored;
    report.unchanged = outcome.unchanged;
    Ok(report)
}
