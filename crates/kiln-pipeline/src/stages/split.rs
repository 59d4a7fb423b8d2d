//! `split`: the platform each kept candidate needs.

use std::collections::BTreeSet;
use std::sync::Arc;

use kiln_core::config::SplitSettings;
use kiln_schema::{InstanceId, PlatformLabel};

use super::context::{
    StageContext, StageOutcome, finish, judge_with_lm, judge_without_lm, kept_candidates, plan,
    started,
};
use crate::error::PipelineError;

pub(crate) async fn split(
    cx: &StageContext<'_>,
    settings: &SplitSettings,
) -> Result<StageOutcome, PipelineError> {
    let candidates = kept_candidates(cx)?;
    let mut table = cx.table::<PlatformLabel>()?;
    let items: Vec<InstanceId> = candidates.iter().map(|c| c.instance_id.clone()).collect();
    let (todo, skipped) = plan(cx, &mut table, items.clone())?;
    // What this invocation covers: with `--only`, the named items, not the whole input.
    started(
        cx,
        todo.len() + usize::try_from(skipped).unwrap_or(0),
        skipped,
    );
    let outcome_of = |p: &PlatformLabel| p.platform.clone();
    let processed = match (&settings.lm, settings.judge.as_str()) {
        (Some(lm), "lm") => {
            let shared = Arc::new(settings.clone());
            let judge = move |candidate, asker: Arc<kiln_lm::Asker>| {
                let settings = Arc::clone(&shared);
                async move { kiln_lm::lm_platform(&candidate, &settings, &asker).await }
            };
            judge_with_lm(cx, &mut table, candidates, todo, lm, judge, outcome_of).await?
        }
        _ => judge_without_lm(&mut table, &candidates, todo, kiln_lm::keyword_platform)?,
    };
    let items: BTreeSet<InstanceId> = items.into_iter().collect();
    finish(cx, &mut table, &items, processed, skipped, outcome_of)
}
