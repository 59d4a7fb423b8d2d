//! `launch`: an environment image per kept candidate, built in Docker.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use kiln_core::config::{NodeKind, NodeSettings};
use kiln_schema::{Candidate, EnvironmentRecord, PlatformLabel};

use super::{
    StageContext, StageOutcome, finish, for_each_item, kept_candidates, plan, started,
    wait_for_removals,
};
use crate::PipelineError;

pub(crate) async fn launch(cx: &StageContext<'_>) -> Result<StageOutcome, PipelineError> {
    let NodeSettings::Launch(settings) = &cx.node.settings else {
        return Err(PipelineError::Internal(
            "wrong settings for a launch node".into(),
        ));
    };
    let mut candidates = kept_candidates(cx)?;
    if let (Some(labels), Some(NodeSettings::Split(split))) = (
        cx.input_rows::<PlatformLabel>(NodeKind::Split)?,
        cx.input(NodeKind::Split).map(|n| &n.settings),
    ) {
        let keep: BTreeSet<String> = labels
            .into_iter()
            .filter(|l| split.keep.contains(&l.platform))
            .map(|l| l.instance_id)
            .collect();
        candidates.retain(|c| keep.contains(&c.instance_id));
    }
    let Some(clone_url_template) = cx.clone_url_template().map(str::to_string) else {
        return Err(PipelineError::Internal("launch has no source input".into()));
    };
    let mut table = cx.table::<EnvironmentRecord>()?;
    let items: Vec<String> = candidates.iter().map(|c| c.instance_id.clone()).collect();
    let (todo, skipped) = plan(cx, &mut table, items.clone())?;
    started(cx, items.len(), skipped);
    let runtime = cx.runtime()?;
    let ca_bundle = match &cx.pipeline.docker.ca_bundle {
        Some(path) if !todo.is_empty() => Some(Arc::new(std::fs::read(path).map_err(|e| {
            PipelineError::Input {
                what: format!("the CA bundle {}", path.display()),
                message: e.to_string(),
            }
        })?)),
        _ => None,
    };
    let by_id: BTreeMap<String, Candidate> = candidates
        .into_iter()
        .map(|c| (c.instance_id.clone(), c))
        .collect();
    let cache_dir = cx.pipeline.dataset.root.join(".cache").join("git");
    let concurrency = cx
        .options
        .concurrency
        .unwrap_or(usize::try_from(settings.concurrency).unwrap_or(1));
    let reporter = Arc::clone(&cx.reporter);
    let removals = kiln_core::Removals::default();
    let mut requests = BTreeMap::new();
    for id in &todo {
        let Some(candidate) = by_id.get(id) else {
            continue;
        };
        let (log_dir, log_dir_label) = cx.log_dir(id)?;
        requests.insert(
            id.clone(),
            kiln_launch::LaunchRequest {
                candidate: candidate.clone(),
                clone_url: kiln_github::clone_url(&clone_url_template, &candidate.repo),
                cache_dir: cache_dir.clone(),
                log_dir,
                log_dir_label,
                ca_bundle: ca_bundle.clone(),
                image_tag: image_tag(
                    &cx.pipeline.docker.image_prefix,
                    &cx.pipeline.dataset.name,
                    id,
                ),
                labels: cx.labels(),
                settings: settings.clone(),
                docker: cx.pipeline.docker.clone(),
                stage: cx.node.name.clone(),
                removals: removals.clone(),
            },
        );
    }
    let requests = Arc::new(requests);
    let processed = for_each_item(
        cx,
        &mut table,
        todo,
        concurrency,
        |id| {
            let runtime = Arc::clone(&runtime);
            let reporter = Arc::clone(&reporter);
            let requests = Arc::clone(&requests);
            async move {
                let Some(request) = requests.get(&id) else {
                    return Err(PipelineError::Internal(format!("no request for {id}")));
                };
                kiln_launch::launch(runtime, request, reporter.as_ref())
                    .await
                    .map_err(|kiln_launch::LaunchError::Engine(e)| PipelineError::Engine(e))
            }
        },
        environment_outcome,
    )
    .await;
    wait_for_removals(cx, &removals).await;
    let processed = processed?;
    let items: BTreeSet<String> = items.into_iter().collect();
    finish(
        cx,
        &mut table,
        &items,
        processed,
        skipped,
        environment_outcome,
    )
}

fn environment_outcome(row: &EnvironmentRecord) -> String {
    match &row.failure_class {
        None => row.status.clone(),
        Some(class) => format!("{}:{class}", row.status),
    }
}

/// Image tag of an instance's environment: `<prefix>/<dataset>:<instance id>`, lowercased, as
/// Docker requires.
fn image_tag(prefix: &str, dataset: &str, instance_id: &str) -> String {
    let clean = |s: &str| -> String {
        s.to_ascii_lowercase()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "._-".contains(c) {
                    c
                } else {
                    '-'
                }
            })
            .collect()
    };
    let mut tag = clean(instance_id);
    tag.truncate(128);
    format!("{}/{}:{tag}", clean(prefix), clean(dataset))
}

#[cfg(test)]
mod tests {
    use super::image_tag;

    #[test]
    fn image_tags_are_valid_docker_references() {
        assert_eq!(
            image_tag("kiln-env", "Demo", "kiln-demo__calc-2"),
            "kiln-env/demo:kiln-demo__calc-2"
        );
        assert_eq!(
            image_tag("kiln-env", "d", "Owner__Repo-7"),
            "kiln-env/d:owner__repo-7"
        );
    }
}
