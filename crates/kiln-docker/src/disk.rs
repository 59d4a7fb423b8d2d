//! The disk bound of a container: a task per container asks the engine for the size of the
//! container's writable layer and stops the container once it is past its bound.
//!
//! The engine's own bound (`--storage-opt size=`) exists only on some storage drivers
//! (overlay2 on XFS with project quotas, btrfs, zfs); the common overlay2 on ext4 has none, so
//! kiln watches on every engine alike. The engine measures the layer by walking it, which costs
//! in proportion to its files (measured: 0.25 s for a layer of 31,800 files, a copy of a
//! `node_modules`): the watch waits 20 times as long as the last measurement took, at least
//! [`MIN_INTERVAL`] and at most [`MAX_INTERVAL`], so it takes about 5 % of a core or less
//! (more only for a layer whose walk takes over 3 s). A writer gets at most one interval (plus
//! one measurement) past the bound: 338 MiB written against a 200 MiB bound in the engine
//! test, at `dd`'s speed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bollard::Docker;
use bollard::query_parameters::{InspectContainerOptionsBuilder, KillContainerOptionsBuilder};
use tokio::task::JoinHandle;

/// Shortest wait between two measurements.
pub(crate) const MIN_INTERVAL: Duration = Duration::from_secs(1);
/// Longest wait between two measurements.
pub(crate) const MAX_INTERVAL: Duration = Duration::from_secs(60);

/// What the watch found: bytes written, and the bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Exceeded {
    pub(crate) written: i64,
    pub(crate) limit: i64,
}

/// The watches of one runtime's containers.
#[derive(Debug, Default)]
pub(crate) struct DiskWatches {
    tasks: Mutex<HashMap<String, JoinHandle<()>>>,
    exceeded: Arc<Mutex<HashMap<String, Exceeded>>>,
}

impl DiskWatches {
    /// Starts watching container `id` against `limit` bytes. Must be called inside a Tokio
    /// runtime.
    pub(crate) fn start(&self, docker: &Docker, id: &str, limit: i64) {
        let task = tokio::spawn(watch(
            docker.clone(),
            id.to_string(),
            limit,
            Arc::clone(&self.exceeded),
        ));
        if let Ok(mut tasks) = self.tasks.lock()
            && let Some(old) = tasks.insert(id.to_string(), task)
        {
            old.abort();
        }
    }

    /// Whether the watch stopped container `id` for writing past its bound.
    pub(crate) fn exceeded(&self, id: &str) -> Option<Exceeded> {
        self.exceeded.lock().ok()?.get(id).copied()
    }

    /// Ends the watch of container `id` and forgets it.
    pub(crate) fn stop(&self, id: &str) {
        if let Some(task) = self.tasks.lock().ok().and_then(|mut t| t.remove(id)) {
            task.abort();
        }
        if let Ok(mut exceeded) = self.exceeded.lock() {
            exceeded.remove(id);
        }
    }
}

impl Drop for DiskWatches {
    fn drop(&mut self) {
        if let Ok(tasks) = self.tasks.get_mut() {
            for (_, task) in tasks.drain() {
                task.abort();
            }
        }
    }
}

/// Measures the container until it stops, is removed, or writes past `limit`, which stops it.
async fn watch(
    docker: Docker,
    id: String,
    limit: i64,
    exceeded: Arc<Mutex<HashMap<String, Exceeded>>>,
) {
    let mut interval = MIN_INTERVAL;
    loop {
        tokio::time::sleep(interval).await;
        let started = Instant::now();
        let options = InspectContainerOptionsBuilder::new().size(true).build();
        let inspected = match docker.inspect_container(&id, Some(options)).await {
            Ok(inspected) => inspected,
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => return,
            // The engine may be busy or restarting; the next look decides.
            Err(_) => continue,
        };
        if !inspected.state.and_then(|s| s.running).unwrap_or(false) {
            return;
        }
        let written = inspected.size_rw.unwrap_or(0);
        if written > limit {
            if let Ok(mut exceeded) = exceeded.lock() {
                exceeded.insert(id.clone(), Exceeded { written, limit });
            }
            tracing::warn!(
                container = %id.get(..12).unwrap_or(&id),
                written,
                limit,
                "the container wrote past its disk bound; stopping it"
            );
            let kill = KillContainerOptionsBuilder::new().signal("KILL").build();
            if let Err(e) = docker.kill_container(&id, Some(kill)).await {
                tracing::warn!(container = %id, error = %e, "stop a container past its disk bound");
            }
            return;
        }
        interval = (started.elapsed() * 20).clamp(MIN_INTERVAL, MAX_INTERVAL);
    }
}
