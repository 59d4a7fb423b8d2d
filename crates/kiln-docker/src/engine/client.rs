//! [`DockerRuntime`]: the connection to the engine, what it does differently (Podman), and the
//! error every failed request becomes.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use bollard::errors::Error as BollardError;
use bollard::{API_DEFAULT_VERSION, Docker};
use kiln_core::{ContainerRuntime, RuntimeError};

use super::errors::{describe, is_transport};
use crate::disk::DiskWatches;
use crate::floor::FloorWatch;

/// Where the engine is looked for when `DOCKER_HOST` is unset.
pub const DEFAULT_ENDPOINT: &str = "unix:///var/run/docker.sock";

/// Request timeout given to bollard. Its default (2 minutes) also bounds the wait for response
/// headers, which a commit of a large container or an image build can exceed.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60 * 60);

/// How long [`DockerRuntime::connect`] waits for the engine's first answer: an unreachable TCP
/// endpoint would otherwise hang for the whole request timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// A [`ContainerRuntime`] on a Docker engine.
///
/// Cheap to share behind an `Arc`; all methods take `&self`.
#[derive(Debug)]
pub struct DockerRuntime {
    /// The bollard client.
    pub(super) docker: Docker,
    /// Where the engine is.
    pub(super) endpoint: String,
    /// Last OOM-kill count seen per container, so that an OOM kill is attributed to the command
    /// during which the count went up (the engine's own `OOMKilled` flag is sticky).
    pub(super) oom_kills: Mutex<HashMap<String, u64>>,
    /// The disk bound's watch of every container this runtime created.
    pub(super) disk: DiskWatches,
    /// The watch of the engine's free space under its floor, over the same containers.
    pub(super) floor: FloorWatch,
}

impl DockerRuntime {
    /// Connects to the engine named by `DOCKER_HOST` (`unix://` or `tcp://`), else to the local
    /// socket, negotiates the API version and checks that the engine answers.
    ///
    /// # Errors
    /// [`RuntimeError::Unreachable`] if the engine does not answer.
    pub async fn connect() -> Result<Self, RuntimeError> {
        let endpoint = std::env::var("DOCKER_HOST")
            .ok()
            .filter(|host| !host.is_empty())
            .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string());
        Self::connect_to(&endpoint).await
    }

    /// Connects to the engine at `endpoint` (`unix:///path`, `/path`, `tcp://host:port` or
    /// `http://host:port`), negotiates the API version and checks that the engine answers.
    ///
    /// # Errors
    /// [`RuntimeError::Unreachable`] if the endpoint is malformed or the engine does not answer.
    pub async fn connect_to(endpoint: &str) -> Result<Self, RuntimeError> {
        let unreachable = |message: String| RuntimeError::Unreachable {
            endpoint: endpoint.to_string(),
            message,
        };
        let timeout = REQUEST_TIMEOUT.as_secs();
        let docker = if let Some(path) = endpoint.strip_prefix("unix://") {
            Docker::connect_with_unix(path, timeout, API_DEFAULT_VERSION)
        } else if endpoint.starts_with('/') {
            Docker::connect_with_unix(endpoint, timeout, API_DEFAULT_VERSION)
        } else if endpoint.starts_with("tcp://") || endpoint.starts_with("http://") {
            Docker::connect_with_http(endpoint, timeout, API_DEFAULT_VERSION)
        } else {
            return Err(unreachable(
                "unsupported scheme: kiln speaks to Docker over unix:// or tcp:// (no TLS, no ssh)"
                    .to_string(),
            ));
        }
        .map_err(|e| match e {
            BollardError::SocketNotFoundError(path) => unreachable(format!(
                "no socket at {path}: is dockerd running? (`scripts/docker-engine.sh start` \
                 starts one; DOCKER_HOST names another engine)"
            )),
            other => unreachable(other.to_string()),
        })?;
        // bollard does not send the version in request paths today (bollard#736), so this only
        // matters once it does; an engine older than the client would then reject requests.
        let docker = match tokio::time::timeout(CONNECT_TIMEOUT, docker.negotiate_version()).await {
            Ok(Ok(docker)) => docker,
            Ok(Err(e)) => return Err(unreachable(describe(&e))),
            Err(_) => {
                return Err(unreachable(format!(
                    "no answer within {} s",
                    CONNECT_TIMEOUT.as_secs()
                )));
            }
        };
        let runtime = Self {
            docker,
            endpoint: endpoint.to_string(),
            oom_kills: Mutex::new(HashMap::new()),
            disk: DiskWatches::default(),
            floor: FloorWatch::default(),
        };
        let info = runtime.ping().await?;
        tracing::debug!(
            endpoint,
            version = %info.version,
            api = %info.api_version,
            "connected to the Docker engine"
        );
        Ok(runtime)
    }

    /// What this engine does differently from Docker that a user should know before a run:
    /// empty for Docker. Podman's Docker-compatible API runs kiln unchanged (its bare image ids
    /// are given Docker's `sha256:` form where read), but rootless Podman on cgroup v1 ignores
    /// every resource limit, and its `vfs` storage copies each layer whole.
    pub async fn caveats(&self) -> Vec<String> {
        let Ok(version) = self.docker.version().await else {
            return Vec::new();
        };
        let podman = version
            .components
            .iter()
            .flatten()
            .find(|c| c.name.contains("Podman"))
            .map(|c| c.version.clone());
        let Some(podman) = podman else {
            return Vec::new();
        };
        let Ok(info) = self.docker.info().await else {
            return vec![format!("the engine is Podman {podman}")];
        };
        let root = info.docker_root_dir.unwrap_or_default();
        // Rootful Podman keeps its storage under /var/lib/containers; a rootless one under the
        // user's home (`~/.local/share/containers/storage`).
        let rootless = !root.is_empty() && !root.starts_with("/var/lib/");
        let cgroup_v1 = info.cgroup_version.is_some_and(|v| v.to_string() == "1");
        let mut caveats = vec![format!(
            "the engine is {} Podman {podman} (storage {root})",
            if rootless { "rootless" } else { "rootful" }
        )];
        if rootless && cgroup_v1 {
            caveats.push(
                "rootless Podman on cgroup v1 ignores memory, CPU and process limits: [docker] \
                 memory, cpus and pids are not enforced (cgroup v2 with delegation enforces them)"
                    .into(),
            );
        }
        if info.driver.as_deref() == Some("vfs") {
            caveats.push(
                "its storage driver is vfs, which copies every layer whole: builds are slower and \
                 each image takes its full size on disk (fuse-overlayfs or overlay share layers)"
                    .into(),
            );
        }
        caveats
    }

    /// The endpoint this runtime talks to.
    #[must_use]
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The bollard client, for what the trait does not cover (tests, diagnostics).
    #[must_use]
    pub fn client(&self) -> &Docker {
        &self.docker
    }

    /// The error for a failed request: a broken or refused connection (the engine stopped, or
    /// its socket is gone) is [`RuntimeError::Unreachable`], an answer of the engine is
    /// [`RuntimeError::Engine`].
    pub(super) fn fail(&self, operation: impl Into<String>, e: &BollardError) -> RuntimeError {
        let operation = operation.into();
        if is_transport(e) {
            RuntimeError::Unreachable {
                endpoint: self.endpoint.clone(),
                message: format!(
                    "the connection broke while kiln tried to {operation}: {}",
                    describe(e)
                ),
            }
        } else {
            RuntimeError::engine(operation, describe(e))
        }
    }
}
