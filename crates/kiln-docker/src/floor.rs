//! The engine's free-space floor: one task per runtime watches the bytes free on the engine's
//! data filesystem while the runtime's containers run, and when they fall under the floor
//! (`Limits::min_free_bytes`, the config's `[docker] min_free`) stops those of its containers
//! that are writing, most first.
//!
//! The disk bound (`disk`) walks writable layers, and a walk does not see every byte a
//! container takes: a file opened, unlinked and written is in no directory until its last
//! descriptor closes. Free space sees everything but not who wrote it, which the engine's
//! statistics tell: a container's block-I/O writes since the previous look (cgroup v2's
//! `io.stat` counts buffered writes as they are written back; v1's blkio only direct and
//! synchronous ones) and its pages written but not yet on disk (`dirty` and `writeback` on
//! v1, `file_dirty` and `file_writeback` on v2). Measured on Docker 20.10 on cgroup v1 with
//! overlay2 on ext4: blkio says nothing of a buffered writer, and its dirty pages hold what it
//! wrote in the last 30 s (the kernel's `dirty_expire_centisecs`), 1 to 2 GiB for `dd`; ext4
//! counts delayed-allocation blocks as used at once, so the free space falls as it writes.
//!
//! The writers (those that wrote [`MIN_WRITING`] or more lately) are stopped, most written
//! first, until what they wrote covers the shortfall, and the command running in each ends
//! with `RuntimeError::DiskExceeded` (`DiskBound::EngineFloor`). What they wrote is counted as
//! coming back for [`SETTLE`] (a killed writer's unlinked file is freed at once, a layer when
//! its stage removes the container), so that one writer's stop is not followed by others'
//! before its space returns. Only this runtime's containers are looked at, and only those the
//! engine lists as running with kiln's label: another program's containers, and another kiln
//! process's, are theirs to stop.
//!
//! Cost, measured here over 30 s with one container: over the floor, one `df` of the data
//! root each [`INTERVAL`], 0.3 % of a core; under it, with the list and the statistics,
//! 0.6 % of a core and as much of the engine's. A writer gets at most one interval (plus one
//! look) past the floor: 100 to 170 MiB at `dd`'s speed in the engine test.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bollard::Docker;
use bollard::models::ContainerStatsResponse;
use bollard::query_parameters::{
    KillContainerOptionsBuilder, ListContainersOptionsBuilder, StatsOptionsBuilder,
};
use futures_util::StreamExt;
use kiln_core::DiskBound;
use kiln_core::runtime::LABEL_MANAGED;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// Wait between two looks at the free space.
pub(crate) const INTERVAL: Duration = Duration::from_secs(1);
/// How long what a stopped container wrote is counted as coming back.
const SETTLE: Duration = Duration::from_secs(10);
/// The least a container must have written lately to be stopped under the floor: one that
/// wrote less (a test's logs, a small cache) did not take the disk, and stopping it would
/// blame an item for another program's writing, or for a run's earlier items.
const MIN_WRITING: u64 = 64 << 20;

/// The floor watch of one runtime's containers.
#[derive(Debug, Default)]
pub(crate) struct FloorWatch {
    shared: Arc<Shared>,
    task: Mutex<Option<JoinHandle<()>>>,
}

/// What the watch task and the runtime share.
#[derive(Debug, Default)]
struct Shared {
    /// The floor of every container watched, by id.
    floors: Mutex<HashMap<String, u64>>,
    /// Why the watch stopped each container it stopped.
    stopped: Mutex<HashMap<String, DiskBound>>,
    /// Wakes an idle watch when a container is added.
    added: Notify,
}

impl FloorWatch {
    /// Watches container `id` against `floor` free bytes, starting the runtime's watch task
    /// on the first call. Must be called inside a Tokio runtime.
    pub(crate) fn start(&self, docker: &Docker, id: &str, floor: u64) {
        if let Ok(mut floors) = self.shared.floors.lock() {
            floors.insert(id.to_string(), floor);
        }
        self.shared.added.notify_one();
        if let Ok(mut task) = self.task.lock()
            && task.is_none()
        {
            *task = Some(tokio::spawn(watch(
                docker.clone(),
                Arc::clone(&self.shared),
            )));
        }
    }

    /// Why the watch stopped container `id`, if it did.
    pub(crate) fn stopped(&self, id: &str) -> Option<DiskBound> {
        self.shared.stopped.lock().ok()?.get(id).cloned()
    }

    /// Forgets container `id`.
    pub(crate) fn stop(&self, id: &str) {
        if let Ok(mut floors) = self.shared.floors.lock() {
            floors.remove(id);
        }
        if let Ok(mut stopped) = self.shared.stopped.lock() {
            stopped.remove(id);
        }
    }
}

impl Drop for FloorWatch {
    fn drop(&mut self) {
        if let Ok(task) = self.task.get_mut()
            && let Some(task) = task.take()
        {
            task.abort();
        }
    }
}

/// The bytes available to unprivileged writers under `root`, as `df` reports them.
pub(crate) async fn available_bytes(root: &str) -> Option<u64> {
    let output = tokio::process::Command::new("df")
        .args(["-B1", "--output=avail", root])
        .output()
        .await
        .ok()?;
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .nth(1)
        .and_then(|l| l.trim().parse::<u64>().ok())
}

/// The engine's data root when it is a directory on this machine (a local engine): only then
/// does `df` here say anything about it.
pub(crate) fn local_root(root: Option<String>) -> Option<String> {
    root.filter(|root| std::path::Path::new(root).is_dir())
}

/// Watches the free space while containers are watched, stopping writers under the floor.
async fn watch(docker: Docker, shared: Arc<Shared>) {
    let root = loop {
        match docker.info().await {
            Ok(info) => match local_root(info.docker_root_dir) {
                Some(root) => break root,
                None => {
                    tracing::debug!(
                        "the engine's data root is not on this machine: no free-space floor"
                    );
                    return;
                }
            },
            // The engine may be busy; the floor waits for its answer.
            Err(_) => tokio::time::sleep(INTERVAL).await,
        }
    };
    // Each container's block-I/O writes at the previous look, kept while under the floor.
    let mut previous: HashMap<String, u64> = HashMap::new();
    // What stopped containers wrote, counted as coming back for a while.
    let mut settling: Vec<(Instant, u64)> = Vec::new();
    loop {
        let watched = shared.floors.lock().map(|f| f.len()).unwrap_or(0);
        if watched == 0 {
            previous.clear();
            shared.added.notified().await;
            continue;
        }
        tokio::time::sleep(INTERVAL).await;
        let Some(free) = available_bytes(&root).await else {
            continue;
        };
        let under: HashMap<String, u64> = shared
            .floors
            .lock()
            .map(|floors| {
                floors
                    .iter()
                    .filter(|(_, floor)| free < **floor)
                    .map(|(id, floor)| (id.clone(), *floor))
                    .collect()
            })
            .unwrap_or_default();
        let Some(floor) = under.values().max().copied() else {
            previous.clear();
            continue;
        };
        settling.retain(|(at, _)| at.elapsed() < SETTLE);
        let coming_back: u64 = settling.iter().map(|(_, bytes)| bytes).sum();
        let writers = writers(&docker, &under, &mut previous).await;
        let shortfall = (floor - free).saturating_sub(coming_back);
        for (id, writing) in choose(&writers, shortfall) {
            let bound = DiskBound::EngineFloor {
                root: root.clone(),
                free,
                floor: under.get(&id).copied().unwrap_or(floor),
                writing,
            };
            if let Ok(mut stopped) = shared.stopped.lock() {
                stopped.insert(id.clone(), bound);
            }
            tracing::warn!(
                container = %id.get(..12).unwrap_or(&id),
                free,
                floor,
                writing,
                "the engine's disk went under [docker] min_free; stopping the container writing \
                 the most"
            );
            let kill = KillContainerOptionsBuilder::new().signal("KILL").build();
            if let Err(e) = docker.kill_container(&id, Some(kill)).await {
                // Gone or stopped meanwhile: its end is not the floor's doing.
                tracing::warn!(container = %id, error = %e, "stop a container under the floor");
                if let Ok(mut stopped) = shared.stopped.lock() {
                    stopped.remove(&id);
                }
                continue;
            }
            settling.push((Instant::now(), writing));
        }
    }
}

/// What each of `watched` that runs with kiln's label wrote lately, by id: its block-I/O
/// writes since `previous` (none at the first look) and its pages not yet on disk. Updates
/// `previous` to this look.
async fn writers(
    docker: &Docker,
    watched: &HashMap<String, u64>,
    previous: &mut HashMap<String, u64>,
) -> Vec<(String, u64)> {
    let filters = HashMap::from([
        ("label", vec![LABEL_MANAGED.to_string()]),
        ("status", vec!["running".to_string()]),
    ]);
    let options = ListContainersOptionsBuilder::new()
        .filters(&filters)
        .build();
    let Ok(running) = docker.list_containers(Some(options)).await else {
        return Vec::new();
    };
    let ids: Vec<String> = running
        .into_iter()
        .filter_map(|c| c.id)
        .filter(|id| watched.contains_key(id))
        .collect();
    let looks = futures_util::future::join_all(ids.iter().map(|id| async move {
        let options = StatsOptionsBuilder::new()
            .stream(false)
            .one_shot(true)
            .build();
        let mut stats = docker.stats(id, Some(options));
        stats.next().await.and_then(Result::ok).map(|s| writes(&s))
    }))
    .await;
    let mut now = HashMap::new();
    let mut writers = Vec::new();
    for (id, look) in ids.into_iter().zip(looks) {
        let Some(look) = look else {
            continue;
        };
        let since = previous
            .get(&id)
            .map_or(0, |before| look.block.saturating_sub(*before));
        now.insert(id.clone(), look.block);
        writers.push((id, since.saturating_add(look.unwritten)));
    }
    *previous = now;
    writers
}

/// What a container's statistics say it wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Writes {
    /// Bytes its block I/O wrote since it started.
    block: u64,
    /// Bytes of its pages written but not yet on disk.
    unwritten: u64,
}

/// The writes in one-shot statistics, cgroup v1 or v2.
fn writes(stats: &ContainerStatsResponse) -> Writes {
    let block = stats
        .blkio_stats
        .as_ref()
        .and_then(|b| b.io_service_bytes_recursive.as_ref())
        .into_iter()
        .flatten()
        // "Write" on v1, "write" on v2.
        .filter(|e| {
            e.op.as_deref()
                .is_some_and(|op| op.eq_ignore_ascii_case("write"))
        })
        .filter_map(|e| e.value)
        .fold(0u64, u64::saturating_add);
    let memory = stats.memory_stats.as_ref().and_then(|m| m.stats.as_ref());
    // v1 names, then v2's; an engine reports one set.
    let unwritten = ["dirty", "writeback", "file_dirty", "file_writeback"]
        .iter()
        .filter_map(|key| memory.and_then(|m| m.get(*key)))
        .fold(0u64, |sum, bytes| sum.saturating_add(*bytes));
    Writes { block, unwritten }
}

/// The containers to stop and what each wrote lately: the writers, most written first, until
/// what they wrote covers `shortfall`. One that wrote under [`MIN_WRITING`] lately is never
/// chosen, and with no shortfall none is.
fn choose(writers: &[(String, u64)], shortfall: u64) -> Vec<(String, u64)> {
    let mut by_size: Vec<&(String, u64)> =
        writers.iter().filter(|(_, w)| *w >= MIN_WRITING).collect();
    by_size.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let mut covered = 0u64;
    let mut chosen = Vec::new();
    for (id, writing) in by_size {
        if covered >= shortfall {
            break;
        }
        chosen.push((id.clone(), *writing));
        covered = covered.saturating_add(*writing);
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::{MIN_WRITING, Writes, choose, writes};

    fn writers(sizes: &[(&str, u64)]) -> Vec<(String, u64)> {
        sizes
            .iter()
            .map(|(id, w)| ((*id).to_string(), *w))
            .collect()
    }

    fn ids(chosen: &[(String, u64)]) -> Vec<&str> {
        chosen.iter().map(|(id, _)| id.as_str()).collect()
    }

    #[test]
    fn the_largest_writer_is_stopped_first_and_alone_when_it_covers_the_shortfall() {
        let all = writers(&[("small", 80 << 20), ("big", 2 << 30), ("mid", 300 << 20)]);
        assert_eq!(ids(&choose(&all, 400 << 20)), ["big"]);
        assert_eq!(choose(&all, 1)[0].1, 2 << 30);
    }

    #[test]
    fn writers_are_added_largest_first_until_they_cover_the_shortfall() {
        let all = writers(&[("small", 80 << 20), ("big", 2 << 30), ("mid", 300 << 20)]);
        assert_eq!(ids(&choose(&all, (2 << 30) + 1)), ["big", "mid"]);
        assert_eq!(ids(&choose(&all, 10 << 30)), ["big", "mid", "small"]);
    }

    #[test]
    fn no_one_is_stopped_without_a_shortfall_or_without_writing() {
        let all = writers(&[("idle", 0), ("logs", 1 << 20), ("big", 2 << 30)]);
        assert!(choose(&all, 0).is_empty());
        // The idle container, and the one writing a little, are spared even when the writers
        // cannot cover the shortfall (another program took the rest).
        assert_eq!(ids(&choose(&all, 10 << 30)), ["big"]);
        assert!(choose(&writers(&[("idle", 0), ("logs", 1 << 20)]), 1 << 30).is_empty());
        assert!(choose(&[], 1 << 30).is_empty());
        assert_eq!(
            ids(&choose(&writers(&[("least", MIN_WRITING)]), 1)),
            ["least"]
        );
    }

    #[test]
    fn equal_writers_are_chosen_in_a_stable_order() {
        let all = writers(&[("b", 100 << 20), ("a", 100 << 20)]);
        assert_eq!(ids(&choose(&all, 1)), ["a"]);
    }

    /// Statistics as the engines answer them: Docker 20.10 on cgroup v1 (blkio empty for a
    /// buffered writer, as measured here), and on cgroup v2.
    #[test]
    fn writes_are_read_from_v1_and_v2_statistics() {
        let v1 = serde_json::json!({
            "blkio_stats": {"io_service_bytes_recursive": [
                {"major": 254, "minor": 0, "op": "Read", "value": 4096},
                {"major": 254, "minor": 0, "op": "Write", "value": 8192},
                {"major": 254, "minor": 0, "op": "Total", "value": 12288}
            ]},
            "memory_stats": {"stats": {
                "cache": 838_864_896u64, "dirty": 838_860_800u64, "writeback": 4096,
                "total_dirty": 838_860_800u64
            }}
        });
        let v2 = serde_json::json!({
            "blkio_stats": {"io_service_bytes_recursive": [
                {"major": 8, "minor": 0, "op": "read", "value": 1000},
                {"major": 8, "minor": 0, "op": "write", "value": 5000},
                {"major": 8, "minor": 16, "op": "write", "value": 7000}
            ]},
            "memory_stats": {"stats": {"file": 9000, "file_dirty": 300, "file_writeback": 20}}
        });
        let empty = serde_json::json!({"blkio_stats": {"io_service_bytes_recursive": null}});
        let read = |v: serde_json::Value| writes(&serde_json::from_value(v).unwrap());
        assert_eq!(
            read(v1),
            Writes {
                block: 8192,
                unwritten: 838_864_896
            }
        );
        assert_eq!(
            read(v2),
            Writes {
                block: 12000,
                unwritten: 320
            }
        );
        assert_eq!(
            read(empty),
            Writes {
                block: 0,
                unwritten: 0
            }
        );
    }
}
