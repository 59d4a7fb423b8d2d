//! The calls the scripted runtime logs, in the order received, and the engine failures tests
//! inject into them by operation and call number.

#[cfg(doc)]
use kiln_core::ContainerRuntime;
use kiln_core::{ContainerId, RuntimeError};

/// The operations of [`ContainerRuntime`], for injected failures and call counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operation {
    /// [`ContainerRuntime::ping`].
    Ping,
    /// [`ContainerRuntime::image_exists`] and [`ContainerRuntime::image_id`].
    ImageExists,
    /// [`ContainerRuntime::list_images`].
    ListImages,
    /// [`ContainerRuntime::list_containers`].
    ListContainers,
    /// [`ContainerRuntime::build_image`].
    BuildImage,
    /// [`ContainerRuntime::create`].
    Create,
    /// [`ContainerRuntime::exec`].
    Exec,
    /// [`ContainerRuntime::copy_in`].
    CopyIn,
    /// [`ContainerRuntime::copy_out`] and [`ContainerRuntime::stream_out`].
    CopyOut,
    /// [`ContainerRuntime::changes`].
    Changes,
    /// [`ContainerRuntime::commit`].
    Commit,
    /// [`ContainerRuntime::remove`].
    Remove,
    /// [`ContainerRuntime::remove_image`].
    RemoveImage,
    /// [`ContainerRuntime::remove_labelled`].
    RemoveLabelled,
    /// [`ContainerRuntime::list_labelled`].
    ListLabelled,
    /// [`ContainerRuntime::pull_image`].
    PullImage,
    /// [`ContainerRuntime::tag_image`].
    TagImage,
    /// [`ContainerRuntime::push_image`].
    PushImage,
    /// [`ContainerRuntime::import_image`].
    ImportImage,
    /// [`ContainerRuntime::remove_leftover_images`].
    RemoveLeftoverImages,
}

/// One call to the runtime, in the order received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// `ping`.
    Ping,
    /// `image_exists(image)` or `image_id(image)`.
    ImageExists(String),
    /// `list_images(label, value)`.
    ListImages(String, String),
    /// `list_containers`.
    ListContainers,
    /// `build_image` of this tag.
    BuildImage(String),
    /// `create` from this image; the id when it succeeded.
    Create {
        /// The spec's image.
        image: String,
        /// The new container, unless the call failed.
        id: Option<ContainerId>,
    },
    /// `exec` of this script.
    Exec {
        /// The container.
        container: ContainerId,
        /// The script.
        script: String,
    },
    /// `copy_in` of an archive.
    CopyIn {
        /// The container.
        container: ContainerId,
        /// The target directory.
        dir: String,
    },
    /// `copy_out` of a path.
    CopyOut {
        /// The container.
        container: ContainerId,
        /// The path.
        path: String,
    },
    /// `changes` of a container.
    Changes(ContainerId),
    /// `commit` of a container to a tag.
    Commit {
        /// The container.
        container: ContainerId,
        /// The tag.
        tag: String,
    },
    /// `remove` of a container.
    Remove(ContainerId),
    /// `remove_image` of a tag.
    RemoveImage(String),
    /// `remove_labelled(label, value)`.
    RemoveLabelled(String, String),
    /// `list_labelled(label, value)`.
    ListLabelled(String, String),
    /// `pull_image(image)`.
    PullImage(String),
    /// `tag_image(source, target)`.
    TagImage(String, String),
    /// `push_image(image)`.
    PushImage(String),
    /// `import_image(tag)`.
    ImportImage(String),
    /// `remove_leftover_images(label, value)`.
    RemoveLeftoverImages(String, String),
}

impl Call {
    /// The operation of the call.
    #[must_use]
    pub fn operation(&self) -> Operation {
        match self {
            Self::Ping => Operation::Ping,
            Self::ImageExists(_) => Operation::ImageExists,
            Self::ListImages(..) => Operation::ListImages,
            Self::ListContainers => Operation::ListContainers,
            Self::BuildImage(_) => Operation::BuildImage,
            Self::Create { .. } => Operation::Create,
            Self::Exec { .. } => Operation::Exec,
            Self::CopyIn { .. } => Operation::CopyIn,
            Self::CopyOut { .. } => Operation::CopyOut,
            Self::Changes(_) => Operation::Changes,
            Self::Commit { .. } => Operation::Commit,
            Self::Remove(_) => Operation::Remove,
            Self::RemoveImage(_) => Operation::RemoveImage,
            Self::RemoveLabelled(..) => Operation::RemoveLabelled,
            Self::ListLabelled(..) => Operation::ListLabelled,
            Self::PullImage(_) => Operation::PullImage,
            Self::TagImage(..) => Operation::TagImage,
            Self::PushImage(_) => Operation::PushImage,
            Self::ImportImage(_) => Operation::ImportImage,
            Self::RemoveLeftoverImages(..) => Operation::RemoveLeftoverImages,
        }
    }
}

/// An injected engine failure.
#[derive(Debug)]
pub(super) struct Fault {
    /// The operation that fails.
    pub(super) operation: Operation,
    /// 1-based call number of the operation.
    pub(super) from: usize,
    /// Every call from `from` on, or only that one.
    pub(super) sticky: bool,
    /// The error the call fails with.
    pub(super) error: RuntimeError,
}

impl Fault {
    /// Whether this fault fails the `count`th (1-based) call of `operation`.
    pub(super) fn hits(&self, operation: Operation, count: usize) -> bool {
        self.operation == operation && (self.from == count || (self.sticky && count > self.from))
    }
}

/// A copy of an engine error (errors are not `Clone`, answers and faults are reused).
pub(super) fn clone_error(error: &RuntimeError) -> RuntimeError {
    match error {
        RuntimeError::Unreachable { endpoint, message } => RuntimeError::Unreachable {
            endpoint: endpoint.clone(),
            message: message.clone(),
        },
        RuntimeError::ImageNotFound(image) => RuntimeError::ImageNotFound(image.clone()),
        RuntimeError::Build { image, message } => RuntimeError::Build {
            image: image.clone(),
            message: message.clone(),
        },
        RuntimeError::ContainerStopped { command, exit_code } => RuntimeError::ContainerStopped {
            command: command.clone(),
            exit_code: *exit_code,
        },
        RuntimeError::DiskExceeded { command, bound } => RuntimeError::DiskExceeded {
            command: command.clone(),
            bound: bound.clone(),
        },
        RuntimeError::Refused { operation, message } => RuntimeError::Refused {
            operation: operation.clone(),
            message: message.clone(),
        },
        RuntimeError::Engine { operation, message } => RuntimeError::Engine {
            operation: operation.clone(),
            message: message.clone(),
        },
    }
}
