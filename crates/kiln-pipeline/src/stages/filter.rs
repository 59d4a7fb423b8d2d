//! `filter`: the judge's verdict on each candidate.

use std::collections::BTreeSet;
use std::sync::Arc;

use kiln_core::config::FilterSettings;
use kiln_schema::{CandidateStatus, InstanceId, Verdict};

use super::context::{
    StageContext, StageOutcome, finish, judge_with_lm, judge_without_lm, plan, started,
};
use crate::error::PipelineError;

pub(crate) async fn filter(
    cx: &StageContext<'_>,
    settings: &FilterSettings,
) -> Result<StageOutcome, PipelineError> {
    // Only candidates are judged: error rows (unreadable task lines) and pull requests the
    // crawl dropped are not tasks.
    let mut candidates = cx.candidates()?;
    candidates.retain(|c| c.status == CandidateStatus::Ok);
    let mut table = cx.table::<Verdict>()?;
    let items: Vec<InstanceId> = candidates.iter().map(|c| c.instance_id.clone()).collect();
    let (todo, skipped) = plan(cx, &mut table, items.clone())?;
    // What this invocation covers: with `--only`, the named items, not the whole input.
    started(
        cx,
        todo.len() + usize::try_from(skipped).unwrap_or(0),
        skipped,
    );
    let outcome_of = |v: &Verdict| {
        if v.keep {
            "kept".to_string()
        } else {
            format!("dropped:{}", v.label)
        }
    };
    let processed = match (&settings.lm, settings.judge.as_str()) {
        (Some(lm), "lm") => {
            let shared = Arc::new(settings.clone());
            let judge = move |candidate, asker: Arc<kiln_lm::Asker>| {
                let settings = Arc::clone(&shared);
                async move { kiln_lm::lm_verdict(&candidate, &settings, &asker).await }
            };
            judge_with_lm(cx, &mut table, candidates, todo, lm, judge, outcome_of).await?
        }
        _ => judge_without_lm(&mut table, &candidates, todo, |c| {
            kiln_lm::heuristic_verdict(c, settings)
        })?,
    };
    let items: BTreeSet<InstanceId> = items.into_iter().collect();
    finish(cx, &mut table, &items, processed, skipped, outcome_of)
}
