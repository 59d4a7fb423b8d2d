//! `kiln push`: a release to the Hugging Face Hub and its images to their registry.

use std::path::Path;
use std::sync::Arc;

use kiln_core::Reporter;

use super::Context;
use crate::cli::PushArgs;
use crate::common::{connect, print_json};
use crate::exit;
use crate::failure::Failure;

/// Pushes the release the arguments name.
pub async fn run(args: PushArgs, cx: &Context) -> Result<u8, Failure> {
    push_release(
        &args.release,
        &args.repo,
        args.private,
        args.dry_run,
        args.harbor,
        &cx.reporter,
        cx.json,
    )
    .await?;
    Ok(exit::OK)
}

/// `kiln push`: the release at `release` to the Hub repository `repo` (with its Harbor tasks
/// when `harbor`), its images to their registry; prints what was sent.
pub async fn push_release(
    release: &Path,
    repo: &str,
    private: bool,
    dry_run: bool,
    harbor: bool,
    reporter: &Arc<dyn Reporter>,
    json: bool,
) -> Result<(), Failure> {
    let options = kiln_pipeline::ops::publish::PushOptions {
        repo: repo.to_string(),
        endpoint: kiln_hub::endpoint_from_env(),
        token: kiln_hub::token_from_env(),
        private,
        dry_run,
        harbor,
    };
    if !dry_run && options.token.is_none() {
        return Err(Failure::new(
            exit::USAGE,
            "failed to push: no token; set HF_TOKEN to a Hugging Face token with write access",
        ));
    }
    let manifest = kiln_pipeline::release::ReleaseManifest::read(release)?;
    let engine = if !dry_run && manifest.image_registry.is_some() {
        Some(connect(reporter).await?)
    } else {
        None
    };
    let report = kiln_pipeline::ops::publish::push(release, &options, engine, reporter).await?;
    if json {
        return print_json(&serde_json::to_value(&report).unwrap_or_default());
    }
    let verb = if dry_run { "would push" } else { "pushed" };
    for (image, digest) in &report.images {
        println!(
            "{verb} image {image}{}",
            digest
                .as_ref()
                .map(|d| format!(" ({d})"))
                .unwrap_or_default()
        );
    }
    let bytes: u64 = report.files.iter().map(|(_, b)| b).sum();
    println!(
        "{verb} release {} to {}/datasets/{repo}: {} files, {bytes} bytes",
        report.tag,
        options.endpoint,
        report.files.len()
    );
    for image in &report.images_skipped {
        println!("  image {image} left alone: it is not named in the release's registry");
    }
    if dry_run {
        for (path, size) in &report.files {
            println!("  {path} ({size} bytes)");
        }
        return Ok(());
    }
    for path in &report.deleted {
        println!("  deleted {path} (an earlier push of the release had it)");
    }
    match (&report.commit, &report.commit_url) {
        (Some(commit), url) => println!(
            "  commit {commit}{}: {} sent, {} already on the Hub, {} unchanged",
            url.as_ref().map(|u| format!(" ({u})")).unwrap_or_default(),
            report.sent.len(),
            report.already_stored.len(),
            report.unchanged.len()
        ),
        (None, _) => println!("  the Hub holds this release already: no commit made"),
    }
    Ok(())
}
