//! [`DockerRuntime`]: [`ContainerRuntime`] on the Docker Engine API through bollard.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bollard::errors::Error as BollardError;
use bollard::exec::{CreateExecOptions, StartExecResults};
use bollard::models::{
    ContainerConfig, ContainerCreateBody, ContainerSummaryStateEnum, HostConfig,
};
use bollard::query_parameters::{
    BuildImageOptionsBuilder, CommitContainerOptionsBuilder, DownloadFromContainerOptionsBuilder,
    ListContainersOptionsBuilder, ListImagesOptionsBuilder, RemoveContainerOptionsBuilder,
    RemoveImageOptionsBuilder, UploadToContainerOptionsBuilder,
};
use bollard::{API_DEFAULT_VERSION, Docker, body_full};
use bytes::Bytes;
use futures_util::StreamExt;
use kiln_core::{
    ArchiveSink, ChangeKind, ContainerId, ContainerInfo, ContainerRuntime, ContainerSpec,
    DiskBound, EngineInfo, ExecOutcome, ExecSpec, FsChange, ImageBuild, ImageInfo, OutputSink,
    RuntimeError,
};

use kiln_core::runtime::{LABEL_MANAGED, LABEL_SCRATCH};

use kiln_core::capture::HeadTail;

use crate::build::{build_context, step_image};
use crate::disk::DiskWatches;
use crate::floor::{FloorWatch, available_bytes, local_root};

/// Where the engine is looked for when `DOCKER_HOST` is unset.
pub const DEFAULT_ENDPOINT: &str = "unix:///var/run/docker.sock";

/// Request timeout given to bollard. Its default (2 minutes) also bounds the wait for response
/// headers, which a commit of a large container or an image build can exceed.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60 * 60);

/// How long [`DockerRuntime::connect`] waits for the engine's first answer: an unreachable TCP
/// endpoint would otherwise hang for the whole request timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// Lifetime of a container whose spec leaves `max_lifetime` at zero (its `Default`): `sleep 0`
/// would stop the container at once, and no lifetime at all would let orphans live forever.
pub const DEFAULT_MAX_LIFETIME: Duration = Duration::from_secs(6 * 60 * 60);

/// Exit code of a process killed by SIGKILL, as `timeout -s KILL` and the OOM killer leave it.
const EXIT_KILLED: i64 = 137;

/// A [`ContainerRuntime`] on a Docker engine.
///
/// Cheap to share behind an `Arc`; all methods take `&self`.
#[derive(Debug)]
pub struct DockerRuntime {
    docker: Docker,
    endpoint: String,
    /// Last OOM-kill count seen per container, so that an OOM kill is attributed to the command
    /// during which the count went up (the engine's own `OOMKilled` flag is sticky).
    oom_kills: Mutex<HashMap<String, u64>>,
    /// The disk bound's watch of every container this runtime created.
    disk: DiskWatches,
    /// The watch of the engine's free space under its floor, over the same containers.
    floor: FloorWatch,
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
    fn fail(&self, operation: impl Into<String>, e: &BollardError) -> RuntimeError {
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

    /// The error for a container found stopped while `command` ran in it. An engine going down
    /// stops its containers too, so the engine is asked first: only when it still answers is
    /// the stop the container's own doing ([`RuntimeError::ContainerStopped`]), or that of the
    /// disk bound or the engine's free-space floor ([`RuntimeError::DiskExceeded`]).
    async fn stopped(&self, id: &ContainerId, command: &str) -> RuntimeError {
        if let Err(e) = self.ping().await {
            return e;
        }
        if let Some(exceeded) = self.disk.exceeded(&id.0) {
            return RuntimeError::DiskExceeded {
                command: kiln_core::shown(command),
                bound: DiskBound::Container {
                    written: exceeded.written,
                    limit: exceeded.limit,
                },
            };
        }
        if let Some(bound) = self.floor.stopped(&id.0) {
            return RuntimeError::DiskExceeded {
                command: kiln_core::shown(command),
                bound,
            };
        }
        match self.docker.inspect_container(&id.0, None).await {
            Ok(inspected) => RuntimeError::ContainerStopped {
                command: kiln_core::shown(command),
                exit_code: inspected.state.and_then(|s| s.exit_code).unwrap_or(-1),
            },
            Err(e) if status(&e) == Some(404) => RuntimeError::engine(
                format!("run a command in {}", short(&id.0)),
                "the container was removed while kiln used it",
            ),
            Err(e) => self.fail(format!("inspect container {}", short(&id.0)), &e),
        }
    }

    /// Whether the container still runs; `Err` when the engine cannot say.
    async fn is_running(&self, id: &ContainerId) -> Result<bool, RuntimeError> {
        match self.docker.inspect_container(&id.0, None).await {
            Ok(inspected) => Ok(inspected.state.and_then(|s| s.running).unwrap_or(false)),
            Err(e) if status(&e) == Some(404) => Ok(false),
            Err(e) => Err(self.fail(format!("inspect container {}", short(&id.0)), &e)),
        }
    }

    /// Runs `cmd` in the container and drains its output into `sink` and `capture`, giving up on
    /// the stream after `backstop`. Returns the exit code (`None` if the process still ran when
    /// the backstop fired) and whether the backstop fired, or [`RunEnd::NotRunning`] when the
    /// engine refused to start the command because the container has stopped.
    async fn run(
        &self,
        id: &ContainerId,
        cmd: ExecCommand<'_>,
        backstop: Duration,
        sink: OutputSink<'_>,
        capture: &mut HeadTail,
    ) -> Result<RunEnd, RuntimeError> {
        let env: Vec<String> = cmd.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let created = match self
            .docker
            .create_exec(
                &id.0,
                CreateExecOptions {
                    cmd: Some(cmd.argv),
                    env: (!env.is_empty()).then_some(env),
                    working_dir: cmd.workdir.map(str::to_string),
                    attach_stdout: Some(true),
                    attach_stderr: Some(true),
                    attach_stdin: Some(false),
                    tty: Some(false),
                    ..Default::default()
                },
            )
            .await
        {
            Ok(created) => created,
            // "Container ... is not running" (HTTP 409).
            Err(e) if status(&e) == Some(409) => return Ok(RunEnd::NotRunning),
            Err(e) => return Err(self.fail(format!("create exec in {}", short(&id.0)), &e)),
        };
        let started = self
            .docker
            .start_exec(&created.id, None)
            .await
            .map_err(|e| self.fail(format!("start exec in {}", short(&id.0)), &e))?;
        let StartExecResults::Attached { mut output, .. } = started else {
            return Err(RuntimeError::engine(
                "start exec",
                "the engine detached an exec that was started attached",
            ));
        };
        let deadline = tokio::time::Instant::now() + backstop;
        let mut backstop_fired = false;
        loop {
            match tokio::time::timeout_at(deadline, output.next()).await {
                Ok(Some(Ok(frame))) => {
                    // Frames arrive in the order the engine read them, stdout and stderr
                    // interleaved as a user at a terminal would see them. The two are separate
                    // pipes read concurrently, so writes to both within a few milliseconds can
                    // swap; the engine gives no finer order.
                    let bytes = frame.into_bytes();
                    sink(&bytes);
                    capture.push(&bytes);
                }
                Ok(Some(Err(e))) => {
                    return Err(self.fail("read exec output", &e));
                }
                Ok(None) => break,
                Err(_) => {
                    backstop_fired = true;
                    break;
                }
            }
        }
        drop(output);
        // The stream can end a moment before the engine records the exit code.
        let mut exit_code = None;
        for attempt in 0..40 {
            let inspected = self
                .docker
                .inspect_exec(&created.id)
                .await
                .map_err(|e| self.fail("inspect exec", &e))?;
            if inspected.running != Some(true) {
                exit_code = inspected.exit_code;
                break;
            }
            if backstop_fired && attempt >= 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        if exit_code.is_none() && !backstop_fired {
            return Err(RuntimeError::engine(
                "inspect exec",
                "the engine reported no exit code after the output ended",
            ));
        }
        Ok(RunEnd::Finished {
            exit_code,
            backstop_fired,
        })
    }

    /// Whether the container's OOM killer fired since the last call for this container, read
    /// from its memory cgroup's `oom_kill` counter (cgroup v2 `memory.events`, or v1
    /// `memory.oom_control` on kernels since 4.13). `false` when the counter cannot be read.
    async fn oom_killed_since_last_check(&self, id: &ContainerId) -> bool {
        let cmd = [
            "sh",
            "-c",
            "cat /sys/fs/cgroup/memory.events 2>/dev/null \
             || cat /sys/fs/cgroup/memory/memory.oom_control",
        ]
        .map(str::to_string)
        .to_vec();
        let mut capture = HeadTail::new(4096);
        let run = self
            .run(
                id,
                ExecCommand {
                    argv: cmd,
                    env: &[],
                    workdir: None,
                },
                Duration::from_secs(10),
                &mut |_: &[u8]| {},
                &mut capture,
            )
            .await;
        let (text, _) = capture.finish();
        let count = match run {
            Ok(RunEnd::Finished {
                exit_code: Some(0), ..
            }) => parse_oom_kill(&text),
            _ => None,
        };
        let Some(count) = count else {
            tracing::debug!(
                container = short(&id.0),
                "no oom_kill counter in the container"
            );
            return false;
        };
        let Ok(mut seen) = self.oom_kills.lock() else {
            return false;
        };
        let previous = seen.insert(id.0.clone(), count).unwrap_or(0);
        count > previous
    }

    /// Removes image `id` if it has no name, with its untagged parents (the layers of a failed
    /// build's finished steps). One in use, tagged meanwhile, or a parent of another image
    /// stays: this only tidies up, so its errors are logged, not returned.
    async fn remove_untagged(&self, id: &str) {
        match self.docker.inspect_image(id).await {
            Ok(image) if image.repo_tags.as_ref().is_none_or(Vec::is_empty) => {}
            _ => return,
        }
        let options = RemoveImageOptionsBuilder::new().build();
        if let Err(e) = self.docker.remove_image(id, Some(options), None).await {
            tracing::debug!(image = short(id), error = %describe(&e), "keep a failed build's step image");
        }
    }
}

/// How a command in a container ended.
enum RunEnd {
    /// It ran: its exit code (`None` if it still ran when the backstop fired), and whether the
    /// backstop fired.
    Finished {
        exit_code: Option<i64>,
        backstop_fired: bool,
    },
    /// The engine would not start it: the container is not running.
    NotRunning,
}

/// Whether a bollard error is about the connection rather than an answer of the engine.
fn is_transport(e: &BollardError) -> bool {
    matches!(
        e,
        BollardError::RequestTimeoutError
            | BollardError::IOError { .. }
            | BollardError::HyperResponseError { .. }
            | BollardError::HyperLegacyError { .. }
            | BollardError::HttpClientError { .. }
            | BollardError::SocketNotFoundError(_)
    )
}

/// A process to start in a container.
struct ExecCommand<'a> {
    argv: Vec<String>,
    env: &'a [(String, String)],
    workdir: Option<&'a str>,
}

/// The `oom_kill N` count of a cgroup memory events file.
fn parse_oom_kill(text: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        (words.next() == Some("oom_kill"))
            .then(|| words.next()?.parse().ok())
            .flatten()
    })
}

/// First 12 characters of an id, as `docker ps` shows it.
fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

/// HTTP status of an engine error response.
fn status(e: &BollardError) -> Option<u16> {
    match e {
        BollardError::DockerResponseServerError { status_code, .. } => Some(*status_code),
        _ => None,
    }
}

/// Whether the engine's answer to an upload says it cannot unpack the archive (an entry type
/// it does not handle, a malformed header), as opposed to the engine failing (its disk full)
/// or the container being gone.
fn refuses_archive(e: &BollardError) -> bool {
    match e {
        BollardError::DockerResponseServerError {
            status_code,
            message,
        } => {
            // Only what the archive's content causes: an engine going down mid-upload also
            // fails the unpacking ("signal: killed"), and that must stay an engine failure.
            let message = message.to_ascii_lowercase();
            let content = [
                "unhandled tar header type",
                "invalid tar header",
                "archive/tar:",
            ];
            !message.contains("no space left")
                && (*status_code == 400 || content.iter().any(|c| message.contains(c)))
        }
        _ => false,
    }
}

/// An engine error as a message: the engine's own text when it sent one.
fn describe(e: &BollardError) -> String {
    match e {
        BollardError::DockerResponseServerError {
            status_code,
            message,
        } => format!("{message} (HTTP {status_code})"),
        other => other.to_string(),
    }
}

/// The registry host of an image name (`registry.example.com:5000/team/x` gives
/// `registry.example.com:5000`), or `docker.io` when the first part is no host.
fn registry_host(repo: &str) -> &str {
    kiln_core::runtime::registry_of(repo).unwrap_or("docker.io")
}

/// The login `docker login` stored for `host` in the client's config
/// (`$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`): the engine keeps no
/// credentials of its own, so a push sends them. Credential helpers (`credsStore`) are not
/// run; a push needing them fails with the registry's refusal.
fn registry_credentials(host: &str) -> Option<bollard::auth::DockerCredentials> {
    let dir = std::env::var_os("DOCKER_CONFIG")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".docker")))?;
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).ok()?).ok()?;
    let auths = config.get("auths")?.as_object()?;
    let entry = auths
        .iter()
        .find(|(key, _)| {
            let key = key
                .trim_start_matches("https://")
                .trim_start_matches("http://");
            key.split('/').next() == Some(host)
        })
        .map(|(_, v)| v)?;
    let auth = entry.get("auth")?.as_str()?;
    use base64::Engine as _;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(auth)
        .ok()?;
    let (user, password) = std::str::from_utf8(&decoded).ok()?.split_once(':')?;
    Some(bollard::auth::DockerCredentials {
        username: Some(user.to_string()),
        password: Some(password.to_string()),
        serveraddress: Some(host.to_string()),
        ..Default::default()
    })
}

/// Splits `repo[:tag]` at the tag's colon (a registry port's colon comes before a slash).
fn split_tag(reference: &str) -> (&str, &str) {
    match reference.rfind(':') {
        Some(i) if !reference[i..].contains('/') => (&reference[..i], &reference[i + 1..]),
        _ => (reference, "latest"),
    }
}

/// Labels with [`LABEL_MANAGED`] added.
fn managed(labels: &BTreeMap<String, String>) -> HashMap<String, String> {
    let mut all: HashMap<String, String> = labels.clone().into_iter().collect();
    all.insert(LABEL_MANAGED.to_string(), "1".to_string());
    all
}

/// Seconds for `timeout`, with millisecond precision: GNU `timeout` takes fractions, and a
/// duration of 0 would disable it, so the least is 1 ms.
fn timeout_arg(timeout: Duration) -> String {
    let millis = timeout.as_millis().max(1);
    format!("{}.{:03}", millis / 1000, millis % 1000)
}

/// The client-side backstop for a command: the in-container timeout plus a margin for engine
/// latency. It only fires when the in-container timeout could not end the output stream, e.g.
/// when a process that left the process group (`setsid`) still holds stdout open.
fn backstop(timeout: Duration) -> Duration {
    timeout + Duration::from_secs(10).max(timeout / 20)
}

#[async_trait]
impl ContainerRuntime for DockerRuntime {
    async fn ping(&self) -> Result<EngineInfo, RuntimeError> {
        let version = self
            .docker
            .version()
            .await
            .map_err(|e| RuntimeError::Unreachable {
                endpoint: self.endpoint.clone(),
                message: describe(&e),
            })?;
        Ok(EngineInfo {
            version: version.version.unwrap_or_else(|| "unknown".to_string()),
            api_version: self.docker.client_version().to_string(),
        })
    }

    async fn free_bytes(&self) -> Result<Option<(String, u64)>, RuntimeError> {
        let info = self
            .docker
            .info()
            .await
            .map_err(|e| self.fail("read the engine's information".to_string(), &e))?;
        // The data root is a path on the engine's machine: only when it exists here (a local
        // engine) does `df` on this host say anything about it.
        let Some(root) = local_root(info.docker_root_dir) else {
            return Ok(None);
        };
        Ok(available_bytes(&root).await.map(|free| (root, free)))
    }

    async fn image_exists(&self, image: &str) -> Result<bool, RuntimeError> {
        match self.docker.inspect_image(image).await {
            Ok(_) => Ok(true),
            Err(e) if status(&e) == Some(404) => Ok(false),
            Err(e) => Err(self.fail(format!("inspect image {image}"), &e)),
        }
    }

    async fn image_id(&self, image: &str) -> Result<Option<String>, RuntimeError> {
        match self.docker.inspect_image(image).await {
            Ok(inspect) => Ok(inspect.id.map(content_id)),
            Err(e) if status(&e) == Some(404) => Ok(None),
            Err(e) => Err(self.fail(format!("inspect image {image}"), &e)),
        }
    }

    async fn list_images(&self, label: &str, value: &str) -> Result<Vec<ImageInfo>, RuntimeError> {
        // An empty value asks for every image carrying the label, whatever its value.
        let selector = if value.is_empty() {
            label.to_string()
        } else {
            format!("{label}={value}")
        };
        let filters = HashMap::from([("label", vec![selector.clone()])]);
        let options = ListImagesOptionsBuilder::new().filters(&filters).build();
        let images = self
            .docker
            .list_images(Some(options))
            .await
            .map_err(|e| self.fail(format!("list images labelled {selector}"), &e))?;
        Ok(images.into_iter().map(image_info).collect())
    }

    async fn list_all_images(&self) -> Result<Option<Vec<ImageInfo>>, RuntimeError> {
        let options = ListImagesOptionsBuilder::new().all(true).build();
        let images = self
            .docker
            .list_images(Some(options))
            .await
            .map_err(|e| self.fail("list every image".to_string(), &e))?;
        Ok(Some(images.into_iter().map(image_info).collect()))
    }

    async fn list_containers(&self) -> Result<Vec<ContainerInfo>, RuntimeError> {
        let options = ListContainersOptionsBuilder::new().all(true).build();
        let containers = self
            .docker
            .list_containers(Some(options))
            .await
            .map_err(|e| self.fail("list every container".to_string(), &e))?;
        Ok(containers
            .into_iter()
            .map(|c| ContainerInfo {
                id: c.id.unwrap_or_default(),
                image: c.image_id.map(content_id).unwrap_or_default(),
                running: c.state == Some(ContainerSummaryStateEnum::RUNNING),
            })
            .collect())
    }

    async fn build_image(
        &self,
        build: &ImageBuild,
        on_output: OutputSink<'_>,
    ) -> Result<(), RuntimeError> {
        let build_error = |message: String| RuntimeError::Build {
            image: build.tag.clone(),
            message,
        };
        let labels = managed(&build.labels);
        let context = build_context(build, &labels)
            .map_err(|e| build_error(format!("pack the build context: {e}")))?;
        let options = BuildImageOptionsBuilder::new()
            .dockerfile("Dockerfile")
            .t(&build.tag)
            .rm(true)
            .forcerm(true)
            // Also in the context's Dockerfile; here for one that is left as it is (a heredoc).
            .labels(&labels)
            .build();
        // The end of the log says what failed; keep it for the error message.
        let mut log = HeadTail::new(8 << 10);
        // The image of the last step that finished: a failed build leaves it behind untagged.
        let mut last_step = None;
        let mut stream =
            self.docker
                .build_image(options, None, Some(body_full(Bytes::from(context))));
        let failure = loop {
            let Some(item) = stream.next().await else {
                break None;
            };
            match item {
                Ok(info) => {
                    for text in [info.stream, info.status].into_iter().flatten() {
                        on_output(text.as_bytes());
                        log.push(text.as_bytes());
                        if let Some(id) = step_image(&text) {
                            last_step = Some(id.to_string());
                        }
                    }
                    if let Some(detail) = info.error_detail {
                        break Some(detail.message.unwrap_or_default());
                    }
                }
                Err(e) if is_transport(&e) => {
                    return Err(self.fail(format!("build image {}", build.tag), &e));
                }
                Err(e) => {
                    break Some(match e {
                        BollardError::DockerStreamError { error } => error,
                        other => describe(&other),
                    });
                }
            }
        };
        // The classic builder reports some failures only by not tagging the image.
        let failure = match failure {
            Some(message) => message,
            None if self.image_exists(&build.tag).await? => return Ok(()),
            None => "the engine finished without tagging the image".to_string(),
        };
        if let Some(id) = last_step {
            self.remove_untagged(&id).await;
        }
        Err(build_error(format!("{failure}\n{}", log.finish().0)))
    }

    async fn create(&self, spec: &ContainerSpec) -> Result<ContainerId, RuntimeError> {
        let lifetime = if spec.max_lifetime.is_zero() {
            DEFAULT_MAX_LIFETIME
        } else {
            spec.max_lifetime
        };
        let limits = &spec.limits;
        let body = ContainerCreateBody {
            image: Some(spec.image.clone()),
            // The main process ends by itself, so a container orphaned by a killed kiln stops
            // (and, with `init`, reaps its zombies meanwhile).
            cmd: Some(vec![
                "sleep".to_string(),
                lifetime.as_secs().max(1).to_string(),
            ]),
            env: Some(spec.env.iter().map(|(k, v)| format!("{k}={v}")).collect()),
            labels: Some(managed(&spec.labels)),
            working_dir: spec.workdir.clone(),
            host_config: Some(HostConfig {
                memory: Some(limits.memory_bytes),
                // Equal to `memory`: no swap, so a memory-hungry test fails fast instead of
                // thrashing.
                memory_swap: Some(limits.memory_bytes),
                nano_cpus: Some((limits.cpus * 1e9).round() as i64),
                pids_limit: Some(limits.pids),
                network_mode: Some(spec.network.as_str().to_string()),
                init: Some(true),
                ..Default::default()
            }),
            ..Default::default()
        };
        let created = match self.docker.create_container(None, body).await {
            Ok(created) => created,
            Err(e) if status(&e) == Some(404) => {
                return Err(RuntimeError::ImageNotFound(spec.image.clone()));
            }
            Err(e) => {
                return Err(self.fail(format!("create a container from {}", spec.image), &e));
            }
        };
        let id = ContainerId(created.id);
        if let Err(e) = self.docker.start_container(&id.0, None).await {
            // Do not leave a created-but-never-started container behind.
            if let Err(cleanup) = self.remove(&id).await {
                tracing::warn!(container = short(&id.0), error = %cleanup, "remove unstarted container");
            }
            return Err(self.fail(format!("start a container from {}", spec.image), &e));
        }
        if let Ok(mut seen) = self.oom_kills.lock() {
            seen.insert(id.0.clone(), 0);
        }
        if limits.disk_bytes > 0 {
            self.disk.start(&self.docker, &id.0, limits.disk_bytes);
        }
        if let Ok(floor) = u64::try_from(limits.min_free_bytes)
            && floor > 0
        {
            self.floor.start(&self.docker, &id.0, floor);
        }
        Ok(id)
    }

    async fn exec(
        &self,
        id: &ContainerId,
        exec: &ExecSpec,
        on_output: OutputSink<'_>,
    ) -> Result<ExecOutcome, RuntimeError> {
        let started = Instant::now();
        let cmd = vec![
            "timeout".to_string(),
            "-s".to_string(),
            "KILL".to_string(),
            timeout_arg(exec.timeout),
            "bash".to_string(),
            "-c".to_string(),
            format!("set -o pipefail\n{}", exec.script),
        ];
        let mut capture = HeadTail::new(exec.output_cap);
        let end = self
            .run(
                id,
                ExecCommand {
                    argv: cmd,
                    env: &exec.env,
                    workdir: exec.workdir.as_deref(),
                },
                backstop(exec.timeout),
                on_output,
                &mut capture,
            )
            .await?;
        let RunEnd::Finished {
            exit_code,
            backstop_fired,
        } = end
        else {
            return Err(self.stopped(id, &exec.script).await);
        };
        // A command that failed may have failed because its container stopped under it (the
        // engine shutting down, or the command ending the container's main process); its exit
        // code then says nothing about the command.
        if exit_code != Some(0) {
            // A dying container SIGKILLs the command (137) a moment before the engine records
            // the container's own exit, so a killed command is looked at for a while.
            let looks = if exit_code == Some(EXIT_KILLED) {
                20
            } else {
                1
            };
            for look in 0..looks {
                if !self.is_running(id).await? {
                    return Err(self.stopped(id, &exec.script).await);
                }
                if look + 1 < looks {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
        let duration = started.elapsed();
        if backstop_fired {
            tracing::warn!(
                container = short(&id.0),
                still_running = exit_code.is_none(),
                "exec output outlived its timeout; remove the container to end what is left"
            );
        }
        // A command whose process outlived the backstop is reported as killed by its timeout;
        // the container (which the caller removes) is what ends it.
        let exit_code = exit_code.unwrap_or(EXIT_KILLED);
        // The OOM killer may have hit a child (a test worker) rather than the command itself, so
        // any failure is checked, at the cost of one more exec; successes are not, so an OOM kill
        // during a command that still exits 0 is reported with the next failing command.
        let oom_killed = exit_code != 0 && self.oom_killed_since_last_check(id).await;
        let timed_out = backstop_fired || (exit_code == EXIT_KILLED && duration >= exec.timeout);
        let (output, truncated) = capture.finish();
        Ok(ExecOutcome {
            exit_code,
            output,
            truncated,
            timed_out,
            oom_killed,
            duration,
        })
    }

    async fn copy_in(&self, id: &ContainerId, dir: &str, tar: Vec<u8>) -> Result<(), RuntimeError> {
        let options = UploadToContainerOptionsBuilder::new().path(dir).build();
        let Err(e) = self
            .docker
            .upload_to_container(&id.0, Some(options), body_full(Bytes::from(tar)))
            .await
        else {
            return Ok(());
        };
        let operation = format!("copy into {dir} of {}", short(&id.0));
        if refuses_archive(&e) {
            // An engine that cannot unpack what it was sent says so about the archive; only
            // when it still answers is that the item's input and not the engine failing.
            self.ping().await?;
            return Err(RuntimeError::Refused {
                operation,
                message: describe(&e),
            });
        }
        Err(self.fail(operation, &e))
    }

    async fn copy_out(&self, id: &ContainerId, path: &str) -> Result<Vec<u8>, RuntimeError> {
        let options = DownloadFromContainerOptionsBuilder::new()
            .path(path)
            .build();
        let mut stream = self.docker.download_from_container(&id.0, Some(options));
        let mut tar = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk =
                chunk.map_err(|e| self.fail(format!("copy {path} out of {}", short(&id.0)), &e))?;
            tar.extend_from_slice(&chunk);
        }
        Ok(tar)
    }

    async fn stream_out(
        &self,
        id: &ContainerId,
        path: &str,
        sink: ArchiveSink<'_>,
    ) -> Result<bool, RuntimeError> {
        let options = DownloadFromContainerOptionsBuilder::new()
            .path(path)
            .build();
        let mut stream = self.docker.download_from_container(&id.0, Some(options));
        let operation = || format!("copy {path} out of {}", short(&id.0));
        while let Some(chunk) = stream.next().await {
            let chunk = match chunk {
                Ok(chunk) => chunk,
                // The engine answers 404 for a path the container lacks (and for a container
                // it lacks, which the next call on it reports).
                Err(e) if status(&e) == Some(404) => return Ok(false),
                Err(e) => return Err(self.fail(operation(), &e)),
            };
            sink(&chunk).map_err(|e| RuntimeError::engine(operation(), e))?;
        }
        Ok(true)
    }

    async fn changes(&self, id: &ContainerId) -> Result<Vec<FsChange>, RuntimeError> {
        let changes = self
            .docker
            .container_changes(&id.0)
            .await
            .map_err(|e| self.fail(format!("list the changes of {}", short(&id.0)), &e))?;
        Ok(changes
            .unwrap_or_default()
            .into_iter()
            .map(|change| FsChange {
                kind: match change.kind {
                    bollard::models::ChangeType::_0 => ChangeKind::Modified,
                    bollard::models::ChangeType::_1 => ChangeKind::Added,
                    bollard::models::ChangeType::_2 => ChangeKind::Deleted,
                },
                path: change.path,
            })
            .collect())
    }

    async fn commit(
        &self,
        id: &ContainerId,
        tag: &str,
        labels: &BTreeMap<String, String>,
        env: &[(String, String)],
    ) -> Result<String, RuntimeError> {
        let (repo, version) = split_tag(tag);
        // Without pausing: kiln commits between commands, when nothing is running, and pausing
        // costs a freeze of the cgroup. Environment variables go in as `ENV` changes, which the
        // engine adds to the container's environment (a config `Env` would replace it).
        let changes: Vec<String> = env
            .iter()
            .map(|(k, v)| format!("ENV {k}={}", dockerfile_quote(v)))
            .collect();
        let mut options = CommitContainerOptionsBuilder::new()
            .container(&id.0)
            .repo(repo)
            .tag(version)
            .pause(false);
        if !changes.is_empty() {
            options = options.changes(&changes.join("\n"));
        }
        let options = options.build();
        // The engine fills what this config leaves empty (cmd, env, workdir) from the
        // container's, and adds the container's labels to these.
        let config = ContainerConfig {
            labels: Some(managed(labels)),
            ..Default::default()
        };
        let committed = self
            .docker
            .commit_container(options, config)
            .await
            .map_err(|e| self.fail(format!("commit {} to {tag}", short(&id.0)), &e))?;
        Ok(content_id(committed.id))
    }

    async fn remove(&self, id: &ContainerId) -> Result<(), RuntimeError> {
        let options = RemoveContainerOptionsBuilder::new()
            .force(true)
            .v(true)
            .build();
        let result = self.docker.remove_container(&id.0, Some(options)).await;
        if let Ok(mut seen) = self.oom_kills.lock() {
            seen.remove(&id.0);
        }
        self.disk.stop(&id.0);
        self.floor.stop(&id.0);
        match result {
            Ok(()) => Ok(()),
            Err(e) if status(&e) == Some(404) => Ok(()),
            // Another caller is removing it already (e.g. remove_labelled racing remove).
            Err(BollardError::DockerResponseServerError {
                status_code: 409,
                message,
            }) if message.contains("already in progress") => Ok(()),
            Err(e) => Err(self.fail(format!("remove container {}", short(&id.0)), &e)),
        }
    }

    async fn remove_image(&self, tag: &str) -> Result<(), RuntimeError> {
        let options = RemoveImageOptionsBuilder::new().build();
        match self.docker.remove_image(tag, Some(options), None).await {
            Ok(_) => Ok(()),
            Err(e) if status(&e) == Some(404) => Ok(()),
            // A container uses the image (the launch agent's container started from its
            // snapshot): forced, the engine only untags it and keeps the image for the
            // container.
            Err(e) if status(&e) == Some(409) => {
                let forced = RemoveImageOptionsBuilder::new().force(true).build();
                match self.docker.remove_image(tag, Some(forced), None).await {
                    Ok(_) => Ok(()),
                    Err(e) if status(&e) == Some(404) => Ok(()),
                    Err(e) => Err(self.fail(format!("untag image {tag}"), &e)),
                }
            }
            Err(e) => Err(self.fail(format!("remove image {tag}"), &e)),
        }
    }

    async fn remove_labelled(&self, label: &str, value: &str) -> Result<usize, RuntimeError> {
        let ids = self.list_labelled(label, value).await?;
        for id in &ids {
            self.remove(id).await?;
        }
        Ok(ids.len())
    }

    async fn remove_leftover_images(
        &self,
        label: &str,
        value: &str,
    ) -> Result<usize, RuntimeError> {
        let selector = format!("{label}={value}");
        let mut leftovers: Vec<String> = Vec::new();
        for filters in [
            HashMap::from([
                ("label", vec![selector.clone()]),
                ("dangling", vec!["true".to_string()]),
            ]),
            HashMap::from([(
                "label",
                vec![selector.clone(), format!("{LABEL_SCRATCH}=1")],
            )]),
        ] {
            let options = ListImagesOptionsBuilder::new().filters(&filters).build();
            let images = self
                .docker
                .list_images(Some(options))
                .await
                .map_err(|e| self.fail(format!("list images labelled {selector}"), &e))?;
            for image in images {
                // A tagged scratch image is removed by its tags (removing by id would refuse
                // an image with several); an untagged one by its id.
                let names: Vec<String> = image
                    .repo_tags
                    .into_iter()
                    .filter(|t| t != "<none>:<none>")
                    .collect();
                if names.is_empty() {
                    leftovers.push(image.id);
                } else {
                    leftovers.extend(names);
                }
            }
        }
        let mut removed = 0;
        for name in leftovers {
            let options = RemoveImageOptionsBuilder::new().build();
            match self.docker.remove_image(&name, Some(options), None).await {
                Ok(_) => removed += 1,
                // Gone already, or used by a container (of another dataset): not a leftover.
                Err(e) if matches!(status(&e), Some(404 | 409)) => {}
                Err(e) => return Err(self.fail(format!("remove image {name}"), &e)),
            }
        }
        Ok(removed)
    }

    async fn list_labelled(
        &self,
        label: &str,
        value: &str,
    ) -> Result<Vec<ContainerId>, RuntimeError> {
        let filters = HashMap::from([("label", vec![format!("{label}={value}")])]);
        let options = ListContainersOptionsBuilder::new()
            .all(true)
            .filters(&filters)
            .build();
        let containers = self
            .docker
            .list_containers(Some(options))
            .await
            .map_err(|e| self.fail(format!("list containers labelled {label}={value}"), &e))?;
        Ok(containers
            .into_iter()
            .filter_map(|c| c.id.map(ContainerId))
            .collect())
    }

    async fn pull_image(
        &self,
        image: &str,
        on_output: OutputSink<'_>,
    ) -> Result<bool, RuntimeError> {
        let (repo, tag) = split_tag(image);
        let options = bollard::query_parameters::CreateImageOptionsBuilder::new()
            .from_image(repo)
            .tag(tag)
            .build();
        let mut stream = self.docker.create_image(Some(options), None, None);
        while let Some(item) = stream.next().await {
            match item {
                Ok(info) => {
                    if let Some(status) = info.status {
                        on_output(format!("{status}\n").as_bytes());
                    }
                }
                // A registry that does not resolve, refuses or lacks the image: not an engine
                // failure, the caller makes the image another way.
                Err(e) => {
                    on_output(format!("pull {image}: {}\n", describe(&e)).as_bytes());
                    return Ok(false);
                }
            }
        }
        self.image_exists(image).await
    }

    async fn tag_image(&self, source: &str, target: &str) -> Result<(), RuntimeError> {
        let (repo, tag) = split_tag(target);
        let options = bollard::query_parameters::TagImageOptionsBuilder::new()
            .repo(repo)
            .tag(tag)
            .build();
        match self.docker.tag_image(source, Some(options)).await {
            Ok(()) => Ok(()),
            Err(e) if status(&e) == Some(404) => {
                Err(RuntimeError::ImageNotFound(source.to_string()))
            }
            Err(e) => Err(self.fail(format!("tag image {source} as {target}"), &e)),
        }
    }

    async fn push_image(
        &self,
        image: &str,
        on_output: OutputSink<'_>,
    ) -> Result<Option<String>, RuntimeError> {
        let (repo, tag) = split_tag(image);
        let options = bollard::query_parameters::PushImageOptionsBuilder::new()
            .tag(tag)
            .build();
        let credentials = registry_credentials(registry_host(repo));
        let mut stream = self.docker.push_image(repo, Some(options), credentials);
        let mut digest = None;
        while let Some(item) = stream.next().await {
            match item {
                Ok(info) => {
                    if let Some(status) = info.status {
                        // The last status line names the digest: "<tag>: digest: sha256:... size: N".
                        if let Some(rest) = status.split("digest: ").nth(1) {
                            digest = rest.split_whitespace().next().map(str::to_string);
                        }
                        on_output(format!("{status}\n").as_bytes());
                    }
                }
                Err(e) if status(&e) == Some(404) => {
                    return Err(RuntimeError::ImageNotFound(image.to_string()));
                }
                Err(e) => return Err(self.fail(format!("push image {image}"), &e)),
            }
        }
        Ok(digest)
    }

    async fn import_image(
        &self,
        tag: &str,
        rootfs: &std::path::Path,
        changes: &[String],
    ) -> Result<(), RuntimeError> {
        let fail = |message: String| RuntimeError::Build {
            image: tag.to_string(),
            message,
        };
        let file = tokio::fs::File::open(rootfs)
            .await
            .map_err(|e| fail(format!("open {}: {e}", rootfs.display())))?;
        // The archive is streamed in chunks: a Debian root file system is some 100 MiB.
        let chunks = futures_util::stream::unfold(file, |mut file| async move {
            use tokio::io::AsyncReadExt as _;
            let mut buffer = vec![0u8; 1 << 20];
            match file.read(&mut buffer).await {
                Ok(0) => None,
                Ok(n) => {
                    buffer.truncate(n);
                    Some((Ok(Bytes::from(buffer)), file))
                }
                Err(e) => Some((Err(e), file)),
            }
        });
        let (repo, version) = split_tag(tag);
        let mut options = bollard::query_parameters::CreateImageOptionsBuilder::new()
            .from_src("-")
            .repo(repo)
            .tag(version)
            .build();
        options.changes = changes.to_vec();
        let mut stream =
            self.docker
                .create_image(Some(options), Some(bollard::body_try_stream(chunks)), None);
        while let Some(item) = stream.next().await {
            if let Err(e) = item {
                return Err(fail(describe(&e)));
            }
        }
        if !self.image_exists(tag).await? {
            return Err(fail("the engine finished without tagging the image".into()));
        }
        Ok(())
    }
}

/// An image as the engine lists it.
fn image_info(image: bollard::models::ImageSummary) -> ImageInfo {
    ImageInfo {
        id: content_id(image.id),
        tags: image
            .repo_tags
            .into_iter()
            .filter(|t| t != "<none>:<none>")
            .collect(),
        size: image.size,
        created: image.created,
        labels: image.labels.into_iter().collect(),
        parent: if image.parent_id.is_empty() {
            String::new()
        } else {
            content_id(image.parent_id)
        },
    }
}

/// A value for a Dockerfile `ENV` line: double-quoted, with `\` and `"` escaped.
fn dockerfile_quote(value: &str) -> String {
    format!("\"{}\"", value.replace('\\', "\\\\").replace('"', "\\\""))
}

/// An image id as Docker spells it, `sha256:<hex>`: Podman's compatible API answers a commit,
/// and its image lists, with the bare hex, and a digest recorded one way must compare equal to
/// the same image inspected the other way.
fn content_id(id: String) -> String {
    if id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
        format!("sha256:{id}")
    } else {
        id
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{content_id, parse_oom_kill, registry_host, split_tag, timeout_arg};

    #[test]
    fn podman_bare_image_ids_get_dockers_prefix() {
        let hex = "fb84338616f78cbb27ec6239e8075b7bdab37307278bd660b0ea1fca193dcedd";
        assert_eq!(content_id(hex.into()), format!("sha256:{hex}"));
        assert_eq!(content_id(format!("sha256:{hex}")), format!("sha256:{hex}"));
        assert_eq!(content_id("abc".into()), "abc");
    }

    #[test]
    fn registry_hosts_of_image_names() {
        assert_eq!(registry_host("127.0.0.1:5000/kiln/env"), "127.0.0.1:5000");
        assert_eq!(
            registry_host("registry.example.com/team/x"),
            "registry.example.com"
        );
        assert_eq!(registry_host("localhost/x"), "localhost");
        assert_eq!(registry_host("kiln-env/demo"), "docker.io");
    }

    #[test]
    fn tags_split_at_the_last_colon_after_the_last_slash() {
        assert_eq!(split_tag("kiln/python:3.11-ab"), ("kiln/python", "3.11-ab"));
        assert_eq!(
            split_tag("localhost:5000/x"),
            ("localhost:5000/x", "latest")
        );
        assert_eq!(split_tag("localhost:5000/x:1"), ("localhost:5000/x", "1"));
        assert_eq!(split_tag("plain"), ("plain", "latest"));
    }

    #[test]
    fn timeouts_keep_milliseconds_and_never_reach_zero() {
        assert_eq!(timeout_arg(Duration::from_secs(30)), "30.000");
        assert_eq!(timeout_arg(Duration::from_millis(1500)), "1.500");
        assert_eq!(timeout_arg(Duration::ZERO), "0.001");
    }

    #[test]
    fn oom_kill_counts_are_read_from_v1_and_v2_files() {
        let v1 = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n";
        let v2 = "low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\n";
        assert_eq!(parse_oom_kill(v1), Some(3));
        assert_eq!(parse_oom_kill(v2), Some(2));
        assert_eq!(parse_oom_kill("oom_kill_disable 0\n"), None);
    }
}
