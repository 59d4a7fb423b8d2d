//! Commands in a container: an exec run to its end with its output streamed and captured, the
//! client-side backstop behind the in-container timeout, the OOM killer's count, and what a
//! container found stopped under a command means.

use std::time::Duration;

use bollard::exec::{CreateExecOptions, StartExecResults};
use futures_util::StreamExt;
use kiln_core::capture::HeadTail;
use kiln_core::{ContainerId, ContainerRuntime, DiskBound, OutputSink, RuntimeError};

use super::client::DockerRuntime;
use super::errors::status;
use super::names::short;

/// Exit code of a process killed by SIGKILL, as `timeout -s KILL` and the OOM killer leave it.
pub(super) const EXIT_KILLED: i64 = 137;

/// How a command in a container ended.
pub(super) enum RunEnd {
    /// It ran: its exit code (`None` if it still ran when the backstop fired), and whether the
    /// backstop fired.
    Finished {
        /// The exit code; `None` if it still ran when the backstop fired.
        exit_code: Option<i64>,
        /// Whether the backstop fired.
        backstop_fired: bool,
    },
    /// The engine would not start it: the container is not running.
    NotRunning,
}

/// A process to start in a container.
pub(super) struct ExecCommand<'a> {
    /// The program and its arguments.
    pub(super) argv: Vec<String>,
    /// Extra environment variables.
    pub(super) env: &'a [(String, String)],
    /// The working directory, if not the container's.
    pub(super) workdir: Option<&'a str>,
}

/// The `oom_kill N` count of a cgroup memory events file.
pub(super) fn parse_oom_kill(text: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        (words.next() == Some("oom_kill"))
            .then(|| words.next()?.parse().ok())
            .flatten()
    })
}

/// Seconds for `timeout`, with millisecond precision: GNU `timeout` takes fractions, and a
/// duration of 0 would disable it, so the least is 1 ms.
pub(super) fn timeout_arg(timeout: Duration) -> String {
    let millis = timeout.as_millis().max(1);
    format!("{}.{:03}", millis / 1000, millis % 1000)
}

/// The client-side backstop for a command: the in-container timeout plus a margin for engine
/// latency. It only fires when the in-container timeout could not end the output stream, e.g.
/// when a process that left the process group (`setsid`) still holds stdout open.
pub(super) fn backstop(timeout: Duration) -> Duration {
    timeout + Duration::from_secs(10).max(timeout / 20)
}

impl DockerRuntime {
    /// The error for a container found stopped while `command` ran in it. An engine going down
    /// stops its containers too, so the engine is asked first: only when it still answers is
    /// the stop the container's own doing ([`RuntimeError::ContainerStopped`]), or that of the
    /// disk bound or the engine's free-space floor ([`RuntimeError::DiskExceeded`]).
    pub(super) async fn stopped(&self, id: &ContainerId, command: &str) -> RuntimeError {
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
    pub(super) async fn is_running(&self, id: &ContainerId) -> Result<bool, RuntimeError> {
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
    pub(super) async fn run(
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
    pub(super) async fn oom_killed_since_last_check(&self, id: &ContainerId) -> bool {
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
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{parse_oom_kill, timeout_arg};

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
