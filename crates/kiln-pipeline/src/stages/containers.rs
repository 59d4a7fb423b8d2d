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
    let floor = u64::try_from(cx.pipeline.docker.min_free_bytes).unwrap_or(0);
    if let Some((root, free)) = below_floor(runtime.as_ref(), floor).await? {
        return Err(PipelineError::Host {
            what: format!("start stage `{}`", cx.node.name),
            message: format!(
                "the engine's data root {root} has {} free, under [docker] min_free ({}); make room \
                 (`kiln gc`, `docker system prune`) or lower min_free",
                gigabytes(free),
                gigabytes(floor)
            ),
        });
    }
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
            let room = wait_for_room(
                Arc::clone(&runtime),
                floor,
                Arc::clone(&reporter),
                cx.node.name.clone(),
                ROOM_POLL,
            );
            let future = request.map(|request| work(runtime, request, reporter));
            async move {
                room.await?;
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

/// How often a stage waiting for disk space looks again.
const ROOM_POLL: std::time::Duration = std::time::Duration::from_secs(30);

/// `bytes` in gigabytes, for messages.
fn gigabytes(bytes: u64) -> String {
    format!("{:.1} GB", bytes as f64 / 1e9)
}

/// The engine's data root and its free bytes when they are under `floor` (never when the floor
/// is 0 or the engine cannot tell).
async fn below_floor(
    runtime: &dyn ContainerRuntime,
    floor: u64,
) -> Result<Option<(String, u64)>, PipelineError> {
    if floor == 0 {
        return Ok(None);
    }
    Ok(runtime
        .free_bytes()
        .await?
        .filter(|(_, free)| *free < floor))
}

/// Waits, before an item starts, until the engine's data root has `floor` bytes free again,
/// saying once that the stage waits and why.
pub(super) async fn wait_for_room(
    runtime: Arc<dyn ContainerRuntime>,
    floor: u64,
    reporter: Arc<dyn Reporter>,
    stage: String,
    poll: std::time::Duration,
) -> Result<(), PipelineError> {
    let mut said = false;
    while let Some((root, free)) = below_floor(runtime.as_ref(), floor).await? {
        if !said {
            reporter.report(kiln_core::Event::Note {
                message: format!(
                    "{stage}: waiting before the next item: the engine's data root {root} has {} free, \
                     under [docker] min_free ({}); make room (`kiln gc`, `docker system prune`)",
                    gigabytes(free),
                    gigabytes(floor)
                ),
            });
            said = true;
        }
        tokio::time::sleep(poll).await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use kiln_core::{Event, Reporter};
    use kiln_testkit::runtime::ScriptedRuntime;

    use super::*;

    #[derive(Default)]
    struct Notes(Mutex<Vec<String>>);

    impl Reporter for Notes {
        fn report(&self, event: Event) {
            if let Event::Note { message } = event {
                self.0
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(message);
            }
        }
    }

    #[tokio::test]
    async fn an_item_waits_while_the_data_root_is_under_the_floor_and_goes_on_once_it_is_not() {
        let runtime = Arc::new(ScriptedRuntime::new());
        runtime.set_free_bytes(Some(1 << 30));
        let notes = Arc::new(Notes::default());
        let engine: Arc<dyn ContainerRuntime> = runtime.clone();
        let waiting = tokio::spawn(wait_for_room(
            engine,
            2 << 30,
            notes.clone(),
            "launch".into(),
            std::time::Duration::from_millis(10),
        ));
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        assert!(!waiting.is_finished(), "it went on under the floor");
        runtime.set_free_bytes(Some(3 << 30));
        let waited = tokio::time::timeout(std::time::Duration::from_secs(5), waiting).await;
        assert!(matches!(waited, Ok(Ok(Ok(())))), "{waited:?}");
        let notes = notes
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        assert_eq!(notes.len(), 1, "said once: {notes:?}");
        assert!(
            notes[0].contains("/var/lib/docker has 1.1 GB free, under [docker] min_free (2.1 GB)"),
            "{notes:?}"
        );
    }
}
