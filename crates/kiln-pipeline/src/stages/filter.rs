//! `filter`: the judge's verdict on each candidate.

use std::collections::BTreeSet;

use kiln_core::config::NodeSettings;
use kiln_schema::Verdict;

use super::{StageContext, StageOutcome, finish, plan, started};
use crate::PipelineError;

pub(crate) fn filter(cx: &StageContext<'_>) -> Result<StageOutcome, PipelineError> {
    let NodeSettings::Filter(settings) = &cx.node.settings else {
        return Err(PipelineError::Internal(
            "wrong settings for a filter node".into(),
        ));
    };
    // Only candidates are judged: error rows (unreadable task lines) and pull requests the
    // crawl dropped are not tasks.
    let mut candidates = cx.candidates()?;
    candidates.retain(|c| c.status == "ok");
    let mut table = cx.table::<Verdict>()?;
    let items: Vec<String> = candidates.iter().map(|c| c.instance_id.clone()).collect();
    started(cx, items.len(), 0);
    let (todo, skipped) = plan(cx, &mut table, items.clone())?;
    let todo: BTreeSet<String> = todo.into_iter().collect();
    let min = usize::try_from(settings.min_problem_chars).unwrap_or(0);
    let rows: Vec<Verdict> = candidates
        .iter()
        .filter(|c| todo.contains(&c.instance_id))
        .map(|c| kiln_lm::heuristic_verdict(c, min))
        .collect();
    if !rows.is_empty() {
        table.append(&rows)?;
    }
    let items: BTreeSet<String> = items.into_iter().collect();
    finish(cx, &mut table, &items, rows.len() as u64, skipped, |v| {
        if v.keep {
            "kept".into()
        } else {
            format!("dropped:{}", v.label)
        }
    })
}
