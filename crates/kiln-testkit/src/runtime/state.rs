//! Everything behind the scripted runtime's lock: the scripts, the injected faults and call
//! counts, the call log, the images and the containers.

use std::collections::BTreeMap;

use kiln_core::{ContainerId, ImageBuild, RuntimeError};

use super::calls::{Call, Fault, Operation, clone_error};
use super::container::Container;
use super::images::{Image, ImageOrigin, Images};
use super::script::{Answer, ScriptState};

/// Everything behind the runtime's lock.
#[derive(Debug, Default)]
pub(super) struct State {
    /// Scripts in the order added, with their match counts.
    pub(super) scripts: Vec<ScriptState>,
    /// The answer of commands no script answers.
    pub(super) default: Answer,
    /// Injected engine failures.
    pub(super) faults: Vec<Fault>,
    /// Calls per operation, failed ones included.
    pub(super) counts: BTreeMap<Operation, usize>,
    /// Every call, in order.
    pub(super) calls: Vec<Call>,
    /// The images, tagged and dangling.
    pub(super) images: Images,
    /// Every image build asked for, in order.
    pub(super) builds: Vec<ImageBuild>,
    /// Every image pushed, in order.
    pub(super) pushed: Vec<String>,
    /// Containers in creation order.
    pub(super) containers: Vec<Container>,
    /// Files `copy_out` finds in every container, over the container's own.
    pub(super) files: Vec<(String, Vec<u8>)>,
    /// Registries have no image at all.
    pub(super) unpullable: bool,
    /// The last number handed out for an id.
    pub(super) next_id: usize,
    /// What `free_bytes` answers.
    pub(super) free_bytes: Option<u64>,
}

impl State {
    /// Logs `call`, counts it, and returns the injected failure for it, if any.
    pub(super) fn enter(&mut self, call: Call) -> Result<(), RuntimeError> {
        let operation = call.operation();
        self.calls.push(call);
        let count = self.counts.entry(operation).or_default();
        *count += 1;
        let count = *count;
        match self.faults.iter().find(|f| f.hits(operation, count)) {
            Some(fault) => Err(clone_error(&fault.error)),
            None => Ok(()),
        }
    }

    /// The container `id`, unless it was removed.
    pub(super) fn container(&mut self, id: &ContainerId) -> Option<&mut Container> {
        self.containers
            .iter_mut()
            .find(|c| &c.id == id && !c.removed)
    }

    /// A new id: `prefix` and the next number.
    pub(super) fn fresh_id(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        format!("{prefix}{:04}", self.next_id)
    }

    /// A new empty image under `tag`, with a fresh id and creation count (not yet stored).
    pub(super) fn new_image(&mut self, tag: &str, origin: ImageOrigin) -> Image {
        let id = format!("sha256:{}", self.fresh_id("scripted-image-"));
        Image {
            tag: tag.to_string(),
            id,
            labels: BTreeMap::new(),
            env: Vec::new(),
            origin,
            files: Vec::new(),
            fs: BTreeMap::new(),
            history: Vec::new(),
            parent: String::new(),
            created: self.next_id as i64,
            size: 1 << 20,
        }
    }
}
