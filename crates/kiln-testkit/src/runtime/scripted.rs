//! [`ScriptedRuntime`] and what tests do with it directly: add scripts, images, files and
//! faults before the code under test runs, and read the calls, containers and images after.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

#[cfg(doc)]
use kiln_core::ContainerRuntime;
use kiln_core::{ContainerId, ImageBuild, RuntimeError};

use super::calls::{Call, Fault, Operation};
use super::container::Container;
use super::files::{archive, normalize};
use super::images::{Image, ImageOrigin};
use super::script::{Answer, Script, ScriptState};
use super::state::State;

/// A [`ContainerRuntime`] that runs nothing: execs are answered from scripts, images and
/// containers are bookkeeping, and every call is logged. Share it as an
/// `Arc<ScriptedRuntime>` and hand a clone to the code under test as an
/// `Arc<dyn ContainerRuntime>`.
#[derive(Debug, Default)]
pub struct ScriptedRuntime {
    state: Mutex<State>,
}

impl ScriptedRuntime {
    /// A runtime with no images, no scripts, registries that have every image, and the default
    /// answer exit 0 with no output.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The state, locked; a test that panicked while holding it leaves it usable.
    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds a script. Scripts are tried in the order added; the first that answers a command
    /// answers it.
    pub fn script(&self, script: Script) {
        self.state().scripts.push(ScriptState::new(script));
    }

    /// Sets the answer for commands no script answers (by default exit 0, no output).
    pub fn set_default(&self, answer: Answer) {
        self.state().default = answer;
    }

    /// Adds an image, as if it had been built or pulled before.
    pub fn add_image(&self, tag: &str) {
        self.add_image_with(tag, BTreeMap::new(), Vec::new());
    }

    /// Adds an image with labels and environment.
    pub fn add_image_with(
        &self,
        tag: &str,
        labels: BTreeMap<String, String>,
        env: Vec<(String, String)>,
    ) {
        let mut state = self.state();
        let mut image = state.new_image(tag, ImageOrigin::Seeded);
        image.labels = labels;
        image.env = env;
        state.images.put(image);
    }

    /// Adds an image holding these files (absolute paths and contents), as if it had been
    /// committed from a container that wrote them.
    pub fn add_image_files(&self, tag: &str, files: &[(&str, &[u8])]) {
        let mut state = self.state();
        let mut image = state.new_image(tag, ImageOrigin::Seeded);
        image.fs = files
            .iter()
            .map(|(path, content)| (normalize(path), content.to_vec()))
            .collect();
        state.images.put(image);
    }

    /// Makes `free_bytes` answer this many bytes free under `/var/lib/docker` (`None`: unknown,
    /// the default).
    pub fn set_free_bytes(&self, free: Option<u64>) {
        self.state().free_bytes = free;
    }

    /// Makes registries have no image at all: pulls answer `Ok(false)`.
    pub fn set_unpullable(&self) {
        self.state().unpullable = true;
    }

    /// Makes `copy_out` of `path` (or of a directory above it) return this file, in every
    /// container.
    pub fn add_file(&self, path: &str, contents: impl Into<Vec<u8>>) {
        self.state().files.push((normalize(path), contents.into()));
    }

    /// Makes the `nth` (1-based) call of `operation` fail with `error`.
    pub fn fail(&self, operation: Operation, nth: usize, error: RuntimeError) {
        self.state().faults.push(Fault {
            operation,
            from: nth,
            sticky: false,
            error,
        });
    }

    /// Makes every call of `operation` from the `nth` (1-based) on fail with `error` (an
    /// engine that went away).
    pub fn fail_from(&self, operation: Operation, nth: usize, error: RuntimeError) {
        self.state().faults.push(Fault {
            operation,
            from: nth,
            sticky: true,
            error,
        });
    }

    /// Every call so far, in order.
    #[must_use]
    pub fn calls(&self) -> Vec<Call> {
        self.state().calls.clone()
    }

    /// How many calls of `operation` were made (failed ones included).
    #[must_use]
    pub fn count(&self, operation: Operation) -> usize {
        self.state()
            .counts
            .get(&operation)
            .copied()
            .unwrap_or_default()
    }

    /// Every container created, in creation order, removed ones included.
    #[must_use]
    pub fn containers(&self) -> Vec<Container> {
        self.state().containers.clone()
    }

    /// The container with this id.
    #[must_use]
    pub fn container(&self, id: &ContainerId) -> Option<Container> {
        self.state()
            .containers
            .iter()
            .find(|c| &c.id == id)
            .cloned()
    }

    /// Every script exec'd, in order, across containers.
    #[must_use]
    pub fn commands(&self) -> Vec<String> {
        self.state()
            .calls
            .iter()
            .filter_map(|c| match c {
                Call::Exec { script, .. } => Some(script.clone()),
                _ => None,
            })
            .collect()
    }

    /// The containers not removed.
    #[must_use]
    pub fn live_containers(&self) -> Vec<ContainerId> {
        self.state()
            .containers
            .iter()
            .filter(|c| !c.removed)
            .map(|c| c.id.clone())
            .collect()
    }

    /// The image under `tag`.
    #[must_use]
    pub fn image(&self, tag: &str) -> Option<Image> {
        self.state().images.tagged(tag).cloned()
    }

    /// The tags of every image, sorted.
    #[must_use]
    pub fn image_tags(&self) -> Vec<String> {
        self.state().images.tags()
    }

    /// Every image build asked for, in order.
    #[must_use]
    pub fn builds(&self) -> Vec<ImageBuild> {
        self.state().builds.clone()
    }

    /// The tar archive of `path` in container `id` as the engine gives it (entries named from
    /// the last component of `path` on), from the container's files and the scripted ones over
    /// them; `None` when nothing is there.
    pub(super) fn archive(
        &self,
        id: &ContainerId,
        path: &str,
    ) -> Result<Option<Vec<u8>>, RuntimeError> {
        let mut state = self.state();
        state.enter(Call::CopyOut {
            container: id.clone(),
            path: path.to_string(),
        })?;
        let operation = format!("copy {path} out of {}", id.0);
        let scripted: Vec<(String, Vec<u8>)> = state.files.clone();
        let container = state
            .container(id)
            .ok_or_else(|| RuntimeError::engine(&operation, "no such container"))?;
        let mut files = container.fs.clone();
        files.extend(scripted);
        archive(&files, &normalize(path)).map_err(|e| RuntimeError::engine(operation, e))
    }

    /// Every image pushed, in order.
    #[must_use]
    pub fn pushed(&self) -> Vec<String> {
        self.state().pushed.clone()
    }
}
