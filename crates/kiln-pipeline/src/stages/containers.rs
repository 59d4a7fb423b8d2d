//! What the stages that run containers (launch, validate) share: the items still to do, one
//! request per item with its log directory, the engine only when there is work, bounded
//! concurrency with each row appended as its item finishes, and the containers' removal
//! waited for before the stage ends.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

use kiln_core::{ContainerRuntime, Removals, Reporter};
use kiln_schema::{InstanceId, Row};
use kiln_store::StageTable;

use super::context::{StageContext, for_each_item, plan, started, wait_for_removals};
use crate::error::PipelineError;

/// Where an item's logs go: the directory, and how the row names it.
pub(super) struct ItemLogs {
    /// The directory.
    pub dir: PathBuf,
    /// The directory relative to the run, as rows record it.
    pub label: String,
}

/// What [`run`] did.
pub(super) struct Ran {
    /// Items processed by this invocation.
    pub processed: u64,
    /// Items skipped because they already had rows.
    pub skipped: u64,
}

/// Runs the items of `items` that have no row yet: `request` makes each one's request (`None`
/// leaves it out; an error stops the stage before any item runs), `work` runs it with the
/// engine and makes its row.
pub(super) async fn run<R, Q, F, Fut>(
    cx: &StageContext<'_>,
    table: &mut StageTable<R>,
    items: Vec<InstanceId>,
    concurrency: i64,
    mut request: impl FnMut(&InstanceId, ItemLogs, &Removals) -> Result<Option<Q>, PipelineError>,
    work: F,
    outcome_of: impl Fn(&R) -> String,
) -> Result<Ran, PipelineError>
where
    R: Row,
    Q: Send + Sync + 'static,
    F: Fn(Arc<dyn ContainerRuntime>, Arc<Q>, Arc<dyn Reporter>) -> Fut,
    Fut: Future<Output = Result<R, PipelineError>> + Send + 'static,
{
    let (todo, skipped) = plan(cx, table, items.clone())?;
    // What this invocation covers: with `--only`, the named items, not the whole input.
    started(
        cx,
        todo.len() + usize::try_from(skipped).unwrap_or(0),
        skipped,
    );
    if todo.is_empty() {
        return Ok(Ran {
            processed: 0,
            skipped,
        });
    }
    let runtime = cx.runtime()?;
    let removals = Removals::default();
    let mut requests: BTreeMap<InstanceId, Arc<Q>> = BTreeMap::new();
    for id in &todo {
        let (dir, label) = cx.log_dir(id)?;
        if let Some(made) = request(id, ItemLogs { dir, label }, &removals)? {
            requests.insert(id.clone(), Arc::new(made));
        }
    }
    let todo: Vec<InstanceId> = todo
        .into_iter()
        .filter(|id| requests.contains_key(id))
        .collect();
    let concurrency = cx
        .options
        .concurrency
        .unwrap_or(usize::try_from(concurrency).unwrap_or(1));
    let processed = for_each_item(
        cx,
        table,
        todo,
        concurrency,
        |id| {
            let request = requests.get(&id).map(Arc::clone);
            let runtime = Arc::clone(&runtime);
            let reporter = Arc::clone(&cx.reporter);
            let future = request.map(|request| work(runtime, request, reporter));
            async move {
                match future {
                    Some(future) => future.await,
                    None => Err(PipelineError::Internal(format!("no request for {id}"))),
                }
            }
        },
        outcome_of,
    )
    .await;
    wait_for_removals(cx, &removals).await;
    Ok(Ran {
        processed: processed?,
        skipped,
    })
}
