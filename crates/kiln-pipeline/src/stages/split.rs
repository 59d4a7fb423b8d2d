//! `split`: the platform each kept candidate needs.

use std::collections::BTreeSet;

use kiln_schema::PlatformLabel;

use super::{StageContext, StageOutcome, finish, kept_candidates, plan, started};
use crate::PipelineError;

pub(crate) fn split(cx: &StageContext<'_>) -> Result<StageOutcome, PipelineError> {
    let candidates = kept_candidates(cx)?;
    let mut table = cx.table::<PlatformLabel>()?;
    let items: Vec<String> = candidates.iter().map(|c| c.instance_id.clone()).collect();
    started(cx, items.len(), 0);
    let (todo, skipped) = plan(cx, &mut table, items.clone())?;
    let todo: BTreeSet<String> = todo.into_iter().collect();
    let rows: Vec<PlatformLabel> = candidates
        .iter()
        .filter(|c| todo.contains(&c.instance_id))
        .map(kiln_lm::keyword_platform)
        .collect();
    if !rows.is_empty() {
        table.append(&rows)?;
    }
    let items: BTreeSet<String> = items.into_iter().collect();
    finish(cx, &mut table, &items, rows.len() as u64, skipped, |p| {
        p.platform.clone()
    })
}
