//! The [`ContainerRuntime`] implementation of [`DockerRuntime`]: each call of the trait as
//! requests to the engine.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bollard::body_full;
use bollard::errors::Error as BollardError;
use bollard::models::{
    ContainerConfig, ContainerCreateBody, ContainerSummaryStateEnum, HostConfig,
};
use bollard::query_parameters::{
    BuildImageOptionsBuilder, CommitContainerOptionsBuilder, DownloadFromContainerOptionsBuilder,
    ListContainersOptionsBuilder, ListImagesOptionsBuilder, RemoveContainerOptionsBuilder,
    RemoveImageOptionsBuilder, StatsOptionsBuilder, UploadToContainerOptionsBuilder,
};
use bytes::Bytes;
use futures_util::StreamExt;
use kiln_core::capture::HeadTail;
use kiln_core::runtime::LABEL_SCRATCH;
use kiln_core::{
    ArchiveSink, ChangeKind, ContainerId, ContainerInfo, ContainerRuntime, ContainerSpec,
    EngineInfo, ExecOutcome, ExecSpec, FsChange, ImageBuild, ImageInfo, OutputSink, RuntimeError,
};

use super::client::DockerRuntime;
use super::errors::{describe, is_transport, refuses_archive, status};
use super::exec::{EXIT_KILLED, ExecCommand, RunEnd, backstop, timeout_arg};
use super::images::{image_info, registry_credentials, registry_host};
use super::names::{content_id, dockerfile_quote, managed, short, split_tag};
use crate::build::{build_context, step_image};
use crate::floor::{available_bytes, local_root};

/// Lifetime of a container whose spec leaves `max_lifetime` at zero (its `Default`): `sleep 0`
/// would stop the container at once, and no lifetime at all would let orphans live forever.
pub const DEFAULT_MAX_LIFETIME: Duration = Duration::from_secs(6 * 60 * 60);

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

    async fn cpu_used(&self, id: &ContainerId) -> Result<Option<Duration>, RuntimeError> {
        // One reading, at once: no second sample for a rate, which kiln does not need.
        let options = StatsOptionsBuilder::new()
            .stream(false)
            .one_shot(true)
            .build();
        let mut stats = self.docker.stats(&id.0, Some(options));
        match stats.next().await {
            Some(Ok(stats)) => Ok(stats
                .cpu_stats
                .and_then(|cpu| cpu.cpu_usage)
                .and_then(|usage| usage.total_usage)
                // A container that is not running reports nothing, as zero.
                .filter(|nanos| *nanos > 0)
                .map(Duration::from_nanos)),
            Some(Err(e)) if matches!(status(&e), Some(404 | 409)) => Ok(None),
            Some(Err(e)) => Err(self.fail(format!("read the statistics of {}", short(&id.0)), &e)),
            None => Ok(None),
        }
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
                labels: c.labels.unwrap_or_default().into_iter().collect(),
                created: c.created.unwrap_or_default(),
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
