//! The container runtime trait: what launch and validate need from a container engine.
//!
//! `kiln-docker` implements it on the Docker Engine API. Stages hold an
//! `Arc<dyn ContainerRuntime>` and never see the engine's own types.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;

/// Label put on every container and image kiln creates, so that leftovers can be found.
pub const LABEL_MANAGED: &str = "kiln.managed";
/// Label naming the run (`<dataset>/<run-id>`) a container belongs to.
pub const LABEL_RUN: &str = "kiln.run";
/// Label naming the dataset (its directory, absolute) a container or image was made for: while
/// a process holds the dataset's lock, every container with this label that the process did
/// not start is a leftover of a dead run.
pub const LABEL_DATASET: &str = "kiln.dataset";

/// The registry host an image name names (`registry.example.com:5000/team/x` gives
/// `registry.example.com:5000`, `localhost/x` gives `localhost`); `None` when its first
/// part is no host (`kiln-env/demo`, which Docker takes for Docker Hub).
#[must_use]
pub fn registry_of(name: &str) -> Option<&str> {
    match name.split_once('/') {
        Some((first, _)) if first.contains(['.', ':']) || first == "localhost" => Some(first),
        _ => None,
    }
}
/// Label of an image that only lives while kiln checks something (the Dockerfile rebuild):
/// one still there when no process holds its dataset's lock is a leftover.
pub const LABEL_SCRATCH: &str = "kiln.scratch";

/// Where the repository sits inside every container kiln runs (`/testbed`, as in SWE-bench).
pub const WORKDIR: &str = "/testbed";

/// Errors of a container runtime. Messages read well after "failed to".
///
/// Only [`RuntimeError::ContainerStopped`] and [`RuntimeError::DiskExceeded`] can be the doing
/// of the code under test, and [`RuntimeError::Refused`] of an item's input; every other error
/// is the engine's or the machine's, and stops a stage rather than becoming a row (an
/// infrastructure failure says nothing about the repository).
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The engine cannot be reached at all, or the connection to it broke.
    #[error("reach the Docker engine at {endpoint}: {message}")]
    Unreachable {
        /// Where kiln looked for the engine.
        endpoint: String,
        /// What the connection attempt said.
        message: String,
    },
    /// An image named in a container spec does not exist locally.
    #[error("find image {0}")]
    ImageNotFound(String),
    /// Building an image failed.
    #[error("build image {image}: {message}")]
    Build {
        /// Tag being built.
        image: String,
        /// Build output tail or engine error.
        message: String,
    },
    /// A container stopped while kiln was using it, and the engine itself still answers: what
    /// ran inside ended it (a process can kill its container's main process), so the item
    /// failed, not the engine.
    #[error("run `{command}`: the container stopped while it ran (exit {exit_code})")]
    ContainerStopped {
        /// The command kiln was running, cut for messages.
        command: String,
        /// The container's exit code, as the engine reports it.
        exit_code: i64,
    },
    /// What ran in a container wrote past a disk bound (its own, [`Limits::disk_bytes`], or
    /// the engine's free-space floor, [`Limits::min_free_bytes`]), and the container was
    /// stopped: the item failed, not the engine.
    #[error("run `{command}`: {bound}, and was stopped")]
    DiskExceeded {
        /// The command kiln was running, cut for messages.
        command: String,
        /// The bound that was crossed, with what was measured.
        bound: DiskBound,
    },
    /// The engine answered, and still answers, that it cannot take this item's input (an
    /// archive it cannot unpack): the item failed, not the engine.
    #[error("{operation}: the engine refused the input: {message}")]
    Refused {
        /// What kiln was doing.
        operation: String,
        /// The engine's message.
        message: String,
    },
    /// Any other engine error.
    #[error("{operation}: {message}")]
    Engine {
        /// What kiln was doing.
        operation: String,
        /// The engine's message.
        message: String,
    },
}

impl RuntimeError {
    /// Shorthand for an [`RuntimeError::Engine`] error.
    pub fn engine(operation: impl Into<String>, message: impl std::fmt::Display) -> Self {
        Self::Engine {
            operation: operation.into(),
            message: message.to_string(),
        }
    }

    /// Whether the error is about one item (its container, its input), not the engine: such
    /// an error is that item's failure row, and the stage goes on.
    #[must_use]
    pub fn is_item_failure(&self) -> bool {
        matches!(
            self,
            Self::ContainerStopped { .. } | Self::DiskExceeded { .. } | Self::Refused { .. }
        )
    }
}

/// The disk bound a container crossed, with what was measured when it was stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiskBound {
    /// Its own bound ([`Limits::disk_bytes`]), on its writable layer.
    Container {
        /// Bytes in the container's writable layer when it was stopped.
        written: i64,
        /// The bound.
        limit: i64,
    },
    /// The engine's data filesystem fell under its floor ([`Limits::min_free_bytes`]) while
    /// the container was among kiln's containers writing the most. This sees what the
    /// writable layer does not show, such as a file unlinked while it is still being written.
    EngineFloor {
        /// The engine's data root.
        root: String,
        /// Bytes free under it when the container was stopped.
        free: u64,
        /// The floor.
        floor: u64,
        /// Bytes the container had written lately (block-I/O writes since the previous look,
        /// and pages not yet written back), by which it was chosen.
        writing: u64,
    },
}

impl std::fmt::Display for DiskBound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Container { written, limit } => write!(
                f,
                "the container wrote {written} bytes, past its bound of {limit} bytes"
            ),
            Self::EngineFloor {
                root,
                free,
                floor,
                writing,
            } => write!(
                f,
                "the engine's disk went under [docker] min_free ({free} bytes free under {root}, \
                 the floor is {floor} bytes) while the container was among kiln's largest \
                 writers ({writing} bytes written lately)"
            ),
        }
    }
}

/// Network of a container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NetworkMode {
    /// The engine's default bridge network (registries reachable).
    #[default]
    Bridge,
    /// No network but loopback.
    None,
}

impl NetworkMode {
    /// The engine's name for the mode.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Bridge => "bridge",
            Self::None => "none",
        }
    }
}

/// Resource limits of one container.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// Memory limit in bytes (swap included).
    pub memory_bytes: i64,
    /// CPU limit in CPUs (fractions allowed).
    pub cpus: f64,
    /// Maximum number of processes.
    pub pids: i64,
    /// Bytes the container may write (its writable layer, as the engine measures it): past
    /// this the container is stopped and the command running in it ends with
    /// [`RuntimeError::DiskExceeded`].
    pub disk_bytes: i64,
    /// Bytes that must stay free on the engine's data filesystem while the container runs
    /// (`[docker] min_free`; 0: no floor). Under it, the runtime stops those of its
    /// containers that are writing, most first, until what they wrote covers the shortfall,
    /// and the command running in each ends with [`RuntimeError::DiskExceeded`].
    pub min_free_bytes: i64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory_bytes: 4 << 30,
            cpus: 2.0,
            pids: 4096,
            disk_bytes: 20 << 30,
            // No floor unless a config sets one: a container made outside a stage (a test,
            // a tool) is not stopped for what the rest of the machine does to the disk.
            min_free_bytes: 0,
        }
    }
}

/// What container to create.
#[derive(Debug, Clone, Default)]
pub struct ContainerSpec {
    /// Image to start from.
    pub image: String,
    /// Environment variables.
    pub env: Vec<(String, String)>,
    /// Labels, on top of [`LABEL_MANAGED`], which the runtime always adds.
    pub labels: BTreeMap<String, String>,
    /// Resource limits.
    pub limits: Limits,
    /// Network mode.
    pub network: NetworkMode,
    /// Working directory for commands.
    pub workdir: Option<String>,
    /// Upper bound on the container's life: its main process exits after this, so a container
    /// orphaned by a killed kiln process stops by itself.
    pub max_lifetime: Duration,
}

/// One command to run in a container.
#[derive(Debug, Clone)]
pub struct ExecSpec {
    /// A bash script, run with `bash -c` (with `set -o pipefail`).
    pub script: String,
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
    /// Working directory (the container's default if `None`).
    pub workdir: Option<String>,
    /// Hard timeout: the command runs under the container's own `timeout -s KILL`, because the
    /// engine cannot kill an exec and a client-side timeout leaves the process running.
    pub timeout: Duration,
    /// Bytes of output kept in [`ExecOutcome::output`]: the head and tail halves are kept and the
    /// middle dropped. The full output goes to the sink.
    pub output_cap: usize,
}

impl ExecSpec {
    /// A script with the given timeout, a 1 MiB output cap and no extra environment.
    #[must_use]
    pub fn new(script: impl Into<String>, timeout: Duration) -> Self {
        Self {
            script: script.into(),
            env: Vec::new(),
            workdir: None,
            timeout,
            output_cap: 1 << 20,
        }
    }
}

/// Result of one command.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecOutcome {
    /// Exit code (137 when killed by the timeout or the OOM killer), as the engine reports it
    /// for the command's own process: nothing the command prints can change it.
    pub exit_code: i64,
    /// Combined stdout and stderr, capped (see [`ExecSpec::output_cap`]).
    pub output: String,
    /// Whether the middle of the output was dropped.
    pub truncated: bool,
    /// Whether the command was killed by its timeout.
    pub timed_out: bool,
    /// Whether the container's OOM killer fired during the command.
    pub oom_killed: bool,
    /// Wall time of the command.
    pub duration: Duration,
}

/// Receives a command's output as it streams.
pub type OutputSink<'a> = &'a mut (dyn FnMut(&[u8]) + Send);

/// Opaque id of a running container.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ContainerId(pub String);

/// An image to build from a Dockerfile and a small context.
#[derive(Debug, Clone, Default)]
pub struct ImageBuild {
    /// Tag to give the image.
    pub tag: String,
    /// Dockerfile text.
    pub dockerfile: String,
    /// Extra files in the build context: (path inside the context, contents).
    pub context: Vec<(String, Vec<u8>)>,
    /// A tar archive added to the build context as it is, so that its file modes, symlinks and
    /// directories reach `COPY` unchanged (a repository checkout); empty for none.
    pub context_archive: Vec<u8>,
    /// Labels for the image.
    pub labels: BTreeMap<String, String>,
}

/// One image of the engine, as listed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ImageInfo {
    /// The image's id (`sha256:…`), its content digest on this engine.
    pub id: String,
    /// Its names (`repo:tag`); empty for an untagged image.
    pub tags: Vec<String>,
    /// Bytes on disk, shared layers counted in full.
    pub size: i64,
    /// Creation time, seconds since the Unix epoch.
    pub created: i64,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// The id of the image it was made from (a committed container's image, a build's last
    /// step); empty when it has none or the engine does not say.
    pub parent: String,
}

/// How a path of a container's file system differs from its image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ChangeKind {
    /// Changed (content, mode or owner; a directory whose entries changed).
    Modified,
    /// Not in the image.
    Added,
    /// In the image, gone from the container.
    Deleted,
}

/// One path a container changed since its image, as the engine's storage driver reports it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FsChange {
    /// The absolute path in the container.
    pub path: String,
    /// How it changed.
    pub kind: ChangeKind,
}

/// Where [`ContainerRuntime::stream_out`] sends an archive, chunk by chunk; an `Err` stops the
/// stream with that message.
pub type ArchiveSink<'a> = &'a mut (dyn FnMut(&[u8]) -> Result<(), String> + Send);

/// One container of the engine, as listed: what an image removal must not pull from under it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ContainerInfo {
    /// The container's id.
    pub id: String,
    /// The id (`sha256:…`) of the image it was made from.
    pub image: String,
    /// Whether it runs (else it is created, stopped, or being removed).
    pub running: bool,
    /// Its labels (its image's and its own, as the engine lists them).
    pub labels: BTreeMap<String, String>,
    /// When it was created, in seconds since the Unix epoch by the engine's clock; 0 when the
    /// engine does not say.
    pub created: i64,
}

/// Engine identity, for logs and error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineInfo {
    /// Engine version string.
    pub version: String,
    /// Negotiated API version.
    pub api_version: String,
}

/// A container engine.
#[async_trait]
pub trait ContainerRuntime: Send + Sync {
    /// Checks that the engine answers.
    async fn ping(&self) -> Result<EngineInfo, RuntimeError>;
    /// Whether an image exists locally.
    async fn image_exists(&self, image: &str) -> Result<bool, RuntimeError>;
    /// The id (`sha256:…`) of a local image by name or id; `None` when there is none. Engines
    /// of tests that never need it keep this default, which refuses.
    async fn image_id(&self, image: &str) -> Result<Option<String>, RuntimeError> {
        Err(RuntimeError::Engine {
            operation: format!("inspect image {image}"),
            message: "this runtime cannot inspect images".into(),
        })
    }
    /// The CPU time the container's processes have used since it started (its cgroup's total,
    /// as the engine reports it); `None` when the engine does not say (a stopped container, a
    /// runtime without the figure). Engines of tests that never need it keep this default.
    async fn cpu_used(&self, id: &ContainerId) -> Result<Option<Duration>, RuntimeError> {
        let _ = id;
        Ok(None)
    }
    /// The engine's data root (where images and containers live) and the bytes free under it,
    /// when the engine runs on this host; `None` when that cannot be known (a remote engine,
    /// or a test engine that keeps this default).
    async fn free_bytes(&self) -> Result<Option<(String, u64)>, RuntimeError> {
        Ok(None)
    }
    /// The local images carrying `label=value` (with an empty `value`: carrying `label`).
    /// Engines of tests that never need it keep this default, which refuses.
    async fn list_images(&self, label: &str, value: &str) -> Result<Vec<ImageInfo>, RuntimeError> {
        Err(RuntimeError::Engine {
            operation: format!("list images labelled {label}={value}"),
            message: "this runtime cannot list images".into(),
        })
    }
    /// Every local image, the intermediate ones of builds included (`docker images --all`),
    /// with their parents: what removing some frees is worked out from it. `None` when the
    /// engine cannot say (this default).
    async fn list_all_images(&self) -> Result<Option<Vec<ImageInfo>>, RuntimeError> {
        Ok(None)
    }
    /// Every container of the engine, running or not, whoever made it (a build's step
    /// containers included), with the image each was made from. Engines of tests that never
    /// need it keep this default, which refuses.
    async fn list_containers(&self) -> Result<Vec<ContainerInfo>, RuntimeError> {
        Err(RuntimeError::Engine {
            operation: "list containers".into(),
            message: "this runtime cannot list containers".into(),
        })
    }
    /// Builds an image; `on_output` receives the build log.
    async fn build_image(
        &self,
        build: &ImageBuild,
        on_output: OutputSink<'_>,
    ) -> Result<(), RuntimeError>;
    /// Creates and starts a container.
    async fn create(&self, spec: &ContainerSpec) -> Result<ContainerId, RuntimeError>;
    /// Runs a command to completion (or timeout), streaming its output to `on_output`.
    async fn exec(
        &self,
        id: &ContainerId,
        exec: &ExecSpec,
        on_output: OutputSink<'_>,
    ) -> Result<ExecOutcome, RuntimeError>;
    /// Extracts a tar archive into a directory of the container.
    async fn copy_in(&self, id: &ContainerId, dir: &str, tar: Vec<u8>) -> Result<(), RuntimeError>;
    /// Reads a file or directory of the container as a tar archive.
    async fn copy_out(&self, id: &ContainerId, path: &str) -> Result<Vec<u8>, RuntimeError>;
    /// Streams a file or directory of the container to `sink` as a tar archive, without
    /// holding it in memory whole; `Ok(false)` when the path does not exist. This default
    /// reads it whole with [`copy_out`](Self::copy_out), where a missing path is an error.
    async fn stream_out(
        &self,
        id: &ContainerId,
        path: &str,
        sink: ArchiveSink<'_>,
    ) -> Result<bool, RuntimeError> {
        let tar = self.copy_out(id, path).await?;
        sink(&tar).map_err(|e| RuntimeError::engine(format!("read {path}"), e))?;
        Ok(true)
    }
    /// The paths the container changed since its image (`GET /containers/{id}/changes`): the
    /// engine's own account, which nothing run in the container can edit. Engines of tests that
    /// never need it keep this default, which refuses.
    async fn changes(&self, id: &ContainerId) -> Result<Vec<FsChange>, RuntimeError> {
        Err(RuntimeError::Engine {
            operation: format!("list the changes of container {}", id.0),
            message: "this runtime cannot list a container's changes".into(),
        })
    }
    /// Commits the container's file system to an image tag, with `env` added to the image's
    /// environment (so every container made from it has them); returns the image id.
    async fn commit(
        &self,
        id: &ContainerId,
        tag: &str,
        labels: &BTreeMap<String, String>,
        env: &[(String, String)],
    ) -> Result<String, RuntimeError>;
    /// Stops and removes a container; removing a missing container is not an error.
    async fn remove(&self, id: &ContainerId) -> Result<(), RuntimeError>;
    /// Removes an image tag; removing a missing image is not an error. A tag whose image a
    /// container still uses is only untagged: the image goes once nothing uses it (the
    /// stage's leftover cleanup removes it).
    async fn remove_image(&self, tag: &str) -> Result<(), RuntimeError>;
    /// Removes every container carrying `label=value`; returns how many were removed.
    async fn remove_labelled(&self, label: &str, value: &str) -> Result<usize, RuntimeError>;
    /// Lists the ids of containers carrying `label=value`, running or not.
    async fn list_labelled(
        &self,
        label: &str,
        value: &str,
    ) -> Result<Vec<ContainerId>, RuntimeError>;
    /// Pulls `image` (`repo:tag`) from its registry; `Ok(false)` when no registry answers or
    /// none has it.
    async fn pull_image(
        &self,
        image: &str,
        on_output: OutputSink<'_>,
    ) -> Result<bool, RuntimeError>;
    /// Gives image `source` the further name `target` (`repo:tag`), as `docker tag` does.
    async fn tag_image(&self, source: &str, target: &str) -> Result<(), RuntimeError>;
    /// Pushes `image` (`registry/repo:tag`) to its registry, as `docker push` does, with the
    /// registry's progress lines to `on_output`; returns the digest the registry reports.
    /// Credentials are the engine's (`docker login` on the host is not read).
    async fn push_image(
        &self,
        image: &str,
        on_output: OutputSink<'_>,
    ) -> Result<Option<String>, RuntimeError>;
    /// Imports the root file system in the tar file `rootfs` (on the host) as image `tag`
    /// (`docker import`), with Dockerfile instructions such as `CMD ["bash"]` applied.
    async fn import_image(
        &self,
        tag: &str,
        rootfs: &std::path::Path,
        changes: &[String],
    ) -> Result<(), RuntimeError>;
    /// Removes the images carrying `label=value` that nothing refers to any more: untagged
    /// ones (a tag moved to a newer commit of the same instance) and scratch ones
    /// ([`LABEL_SCRATCH`]). An image a container still uses stays. Returns how many were
    /// removed.
    async fn remove_leftover_images(&self, label: &str, value: &str)
    -> Result<usize, RuntimeError>;
}
