//! A container session: one container, its command log on disk, and the promise that the
//! container is removed however the work ends.
//!
//! Launch and validate both drive containers the same way: start one, run commands with a
//! timeout each, keep every command's full output in a log file (the returned output is capped),
//! and remove the container at the end. [`Session`] is that, once. The removal can run in the
//! background ([`Session::close_later`]) when the caller has other work to do meanwhile.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::task::JoinHandle;

use crate::cpu::{Account, CpuLedger, CpuPhase};
use crate::runtime::{
    ContainerId, ContainerRuntime, ContainerSpec, ExecOutcome, ExecSpec, RuntimeError,
};

/// Bytes of a test run's output kept in memory for its parser, in launch's baseline run and in
/// validation alike: the whole report is parsed (a mocha JSON report of a few thousand tests is
/// several MiB), so the cap only guards against runaway output.
pub const TEST_OUTPUT_CAP: usize = 256 << 20;

/// Bytes of a command's output written to the log as they come: the start, where the command
/// says what it does.
pub const LOG_HEAD_BYTES: usize = 8 << 20;

/// Bytes of a command's output kept for the log's end: where failures are reported. Between
/// head and tail a log holds a line saying how much was left out, so a command printing
/// gigabytes costs the host at most 16 MiB of log.
pub const LOG_TAIL_BYTES: usize = 8 << 20;

/// One command's output on its way to the log: the head written through, the tail held in
/// memory until the command ends.
struct CappedLog {
    head_left: usize,
    tail: crate::capture::HeadTail,
    last: Option<u8>,
}

impl CappedLog {
    fn new(head: usize, tail: usize) -> Self {
        Self {
            head_left: head,
            tail: crate::capture::HeadTail::with_caps(0, tail),
            last: None,
        }
    }

    /// Writes what fits in the head to `log`, keeps the rest for the tail. A log that cannot be
    /// written loses evidence, not the item, so errors are dropped.
    fn write(&mut self, log: &mut impl Write, bytes: &[u8]) {
        let n = bytes.len().min(self.head_left);
        if n > 0 {
            let _ = log.write_all(&bytes[..n]);
            self.head_left -= n;
            self.last = bytes[..n].last().copied();
        }
        if n < bytes.len() {
            self.tail.push(&bytes[n..]);
        }
    }

    /// Writes the tail, after a line saying how many bytes were left out.
    fn finish(self, log: &mut impl Write) {
        if self.tail.total() == 0 {
            return;
        }
        if self.tail.omitted() > 0 && self.last.is_some_and(|b| b != b'\n') {
            let _ = log.write_all(b"\n");
        }
        let (text, _) = self.tail.finish();
        let _ = log.write_all(text.as_bytes());
    }
}

/// Opens `path` to append to, creating it.
fn append_to(path: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
}

/// One running container with a log file.
pub struct Session {
    runtime: Arc<dyn ContainerRuntime>,
    id: ContainerId,
    /// Set once the container is removed, so the drop guard does nothing.
    removed: bool,
    log_path: PathBuf,
    log: Option<File>,
    env: Vec<(String, String)>,
    workdir: Option<String>,
    /// Where the container's CPU time is charged, when the caller keeps account of it.
    account: Option<Account>,
}

impl Session {
    /// Creates and starts a container from `spec`, logging to `log_path` (created, parents too).
    ///
    /// # Errors
    /// When the engine cannot create the container.
    pub async fn start(
        runtime: Arc<dyn ContainerRuntime>,
        spec: &ContainerSpec,
        log_path: &Path,
    ) -> Result<Self, RuntimeError> {
        // A log that cannot be written is a loss of evidence, not a reason to fail the item.
        // It is written in append mode, so that a sibling's lines (see [`Session::sibling`])
        // stay where they were written.
        let log = log_path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| File::create(log_path))
            .and_then(|_| append_to(log_path))
            .ok();
        let id = runtime.create(spec).await?;
        let mut session = Self {
            runtime,
            id,
            removed: false,
            log_path: log_path.to_path_buf(),
            log,
            env: Vec::new(),
            workdir: spec.workdir.clone(),
            account: None,
        };
        session.note(&format!("# container from image {}", spec.image));
        Ok(session)
    }

    /// Starts a container from `spec` that carries on this session: same log file (appended to;
    /// this session writes no more to it), same environment. This session still has to be
    /// closed.
    ///
    /// # Errors
    /// When the engine cannot create the container.
    pub async fn next(&mut self, spec: &ContainerSpec) -> Result<Self, RuntimeError> {
        self.log = None;
        self.sibling(spec).await
    }

    /// Starts a container from `spec` beside this one, with this session's environment, that
    /// writes to the same log (both append, so lines stay in the order they were written);
    /// for a run that must leave this container as it is. Both sessions have to be closed.
    ///
    /// # Errors
    /// When the engine cannot create the container.
    pub async fn sibling(&self, spec: &ContainerSpec) -> Result<Self, RuntimeError> {
        let log = append_to(&self.log_path).ok();
        let id = self.runtime.create(spec).await?;
        let mut session = Self {
            runtime: Arc::clone(&self.runtime),
            id,
            removed: false,
            log_path: self.log_path.clone(),
            log,
            env: self.env.clone(),
            workdir: spec.workdir.clone(),
            // The same ledger and phase; the new container's total starts from nothing.
            account: self.account.as_ref().map(|a| Account {
                ledger: a.ledger.clone(),
                phase: a.phase,
                seen: Duration::ZERO,
            }),
        };
        session.note(&format!("# container from image {}", spec.image));
        Ok(session)
    }

    /// The container id.
    #[must_use]
    pub fn id(&self) -> &ContainerId {
        &self.id
    }

    /// Where the log is written.
    #[must_use]
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// Charges the CPU time of this container's later commands (and of the containers that
    /// [`next`](Self::next) and [`sibling`](Self::sibling) start from it) to `ledger`, under
    /// `phase` until [`set_phase`](Self::set_phase) names another. The container's total is
    /// read from the engine after every command.
    pub fn charge_to(&mut self, ledger: &CpuLedger, phase: CpuPhase) {
        let seen = self.account.as_ref().map_or(Duration::ZERO, |a| a.seen);
        self.account = Some(Account {
            ledger: ledger.clone(),
            phase,
            seen,
        });
    }

    /// The ledger and phase this session charges, for a container started apart from it (a
    /// parser script's) to charge the same.
    #[must_use]
    pub fn charged(&self) -> Option<(CpuLedger, CpuPhase)> {
        self.account.as_ref().map(|a| (a.ledger.clone(), a.phase))
    }

    /// The phase later commands are charged to (nothing, without a ledger).
    pub fn set_phase(&mut self, phase: CpuPhase) {
        if let Some(account) = &mut self.account {
            account.phase = phase;
        }
    }

    /// Environment variables passed to every later command, and to the image it commits
    /// (a row's `environment`: those repairs, recipes and the agent set).
    pub fn set_env(&mut self, env: &std::collections::BTreeMap<String, String>) {
        self.env = env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    }

    /// Writes a line to the log.
    pub fn note(&mut self, line: &str) {
        if let Some(log) = &mut self.log {
            let _ = writeln!(log, "{line}");
        }
    }

    /// Runs a script with a timeout; the full output goes to the log, a capped copy is returned.
    ///
    /// # Errors
    /// Only engine failures; a failing command is an `Ok` outcome with its exit code.
    pub async fn run(
        &mut self,
        script: &str,
        timeout: Duration,
    ) -> Result<ExecOutcome, RuntimeError> {
        self.run_capped(script, timeout, 1 << 20).await
    }

    /// [`Session::run`], keeping up to `output_cap` bytes of output in the outcome.
    ///
    /// # Errors
    /// Only engine failures.
    pub async fn run_capped(
        &mut self,
        script: &str,
        timeout: Duration,
        output_cap: usize,
    ) -> Result<ExecOutcome, RuntimeError> {
        self.run_shown_as(script, script, timeout, output_cap).await
    }

    /// [`Session::run_capped`], writing `shown_as` to the log in place of the script (a long
    /// script of kiln's own is logged by what it does).
    ///
    /// # Errors
    /// Only engine failures.
    pub async fn run_shown_as(
        &mut self,
        script: &str,
        shown_as: &str,
        timeout: Duration,
        output_cap: usize,
    ) -> Result<ExecOutcome, RuntimeError> {
        let mut exec = ExecSpec::new(script, timeout);
        exec.output_cap = output_cap;
        exec.env = self.env.clone();
        exec.workdir = self.workdir.clone();
        self.note(&format!("$ {shown_as}"));
        let id = self.id.clone();
        let mut log = self.log.take();
        let mut capped = CappedLog::new(LOG_HEAD_BYTES, LOG_TAIL_BYTES);
        let result = {
            let mut sink = |bytes: &[u8]| {
                if let Some(log) = &mut log {
                    capped.write(log, bytes);
                }
            };
            self.runtime.exec(&id, &exec, &mut sink).await
        };
        if let Some(log) = &mut log {
            capped.finish(log);
        }
        self.log = log;
        match &result {
            Ok(outcome) => self.note(&format!(
                "# exit {} after {:.1}s{}{}",
                outcome.exit_code,
                outcome.duration.as_secs_f64(),
                if outcome.timed_out {
                    " (timed out)"
                } else {
                    ""
                },
                if outcome.oom_killed {
                    " (out of memory)"
                } else {
                    ""
                },
            )),
            Err(e) => self.note(&format!("# engine error: {e}")),
        }
        // What the command used. A figure the engine cannot give loses evidence, not the item.
        if let Some(account) = &mut self.account
            && let Ok(Some(total)) = self.runtime.cpu_used(&id).await
        {
            account.charge(total);
        }
        result
    }

    /// Copies files into the container (absolute paths; parent directories are created), in
    /// one upload.
    ///
    /// # Errors
    /// When the engine refuses the upload.
    pub async fn write_files(&mut self, files: &[(String, &[u8])]) -> Result<(), RuntimeError> {
        let tar = tar_files(files).map_err(|e| RuntimeError::engine("pack files", e))?;
        self.runtime.copy_in(&self.id, "/", tar).await
    }

    /// The runtime this session runs on.
    #[must_use]
    pub fn runtime(&self) -> &Arc<dyn ContainerRuntime> {
        &self.runtime
    }

    /// Commits the container to an image tag; the session's environment (see
    /// [`Session::set_env`]) becomes part of the image's.
    ///
    /// # Errors
    /// When the engine cannot commit.
    pub async fn commit(
        &mut self,
        tag: &str,
        labels: &std::collections::BTreeMap<String, String>,
    ) -> Result<String, RuntimeError> {
        self.note(&format!("# commit to {tag}"));
        let id = self.id.clone();
        let env = self.env.clone();
        self.runtime.commit(&id, tag, labels, &env).await
    }

    /// Removes the container.
    ///
    /// # Errors
    /// When the engine cannot remove it (the drop guard then tries once more).
    pub async fn close(mut self) -> Result<(), RuntimeError> {
        self.runtime.remove(&self.id).await?;
        self.removed = true;
        Ok(())
    }

    /// Hands the container's removal to `removals` and returns at once: the item's result
    /// need not wait while the engine deletes a large build tree. Must be called inside a
    /// Tokio runtime.
    pub fn close_later(mut self, removals: &Removals) {
        let runtime = Arc::clone(&self.runtime);
        let id = self.id.clone();
        self.removed = true;
        removals.push(tokio::spawn(async move { runtime.remove(&id).await }));
    }
}

/// Container removals running in the background ([`Session::close_later`]). Whoever owns the
/// work waits for them before it reports the work done ([`Removals::wait`]); cloning shares
/// the list.
#[derive(Clone, Debug, Default)]
pub struct Removals {
    pending: Arc<Mutex<Vec<Removal>>>,
}

/// One background removal.
type Removal = JoinHandle<Result<(), RuntimeError>>;

impl Removals {
    fn push(&self, task: Removal) {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(task);
    }

    /// Waits for every removal handed over so far and returns the ones that failed (their
    /// containers keep the run label, so the next run of the same id removes them).
    pub async fn wait(&self) -> Vec<RuntimeError> {
        let tasks =
            std::mem::take(&mut *self.pending.lock().unwrap_or_else(PoisonError::into_inner));
        let mut failed = Vec::new();
        for task in tasks {
            match task.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => failed.push(e),
                Err(e) => failed.push(RuntimeError::engine("remove a container", e.to_string())),
            }
        }
        failed
    }
}

impl Drop for Session {
    /// A session dropped without `close` (an error path, or a cancelled future on Ctrl-C) still
    /// removes its container: the removal is handed to the async runtime if one is running.
    fn drop(&mut self) {
        if !self.removed {
            let id = self.id.clone();
            let runtime = Arc::clone(&self.runtime);
            if let Ok(handle) = tokio::runtime::Handle::try_current() {
                handle.spawn(async move {
                    let _ = runtime.remove(&id).await;
                });
            }
        }
    }
}

/// A tar archive of files at absolute paths (stored relative to `/`): plain files, mode 0644,
/// without entries for their parent directories. The engine creates a missing parent (mode
/// 0755), and an entry for an existing one would reset its mode in the container, and so in
/// an image committed from it: a `tmp/` entry of mode 0755 took `/tmp`'s sticky,
/// world-writable 1777 away on Docker, and then every user but root failed to write there.
///
/// # Errors
/// Only when a name is unusable in a tar header.
pub fn tar_files(files: &[(String, &[u8])]) -> std::io::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    for (path, contents) in files {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_size(contents.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_cksum();
        builder.append_data(&mut header, path.trim_start_matches('/'), *contents)?;
    }
    builder.into_inner()
}

#[cfg(test)]
mod tests {
    use super::{CappedLog, tar_files};

    #[test]
    fn files_are_packed_without_entries_for_their_directories() {
        let packed = tar_files(&[
            ("/tmp/kiln/a.patch".into(), b"A".as_slice()),
            ("/testbed/b".into(), b"BB".as_slice()),
        ])
        .unwrap();
        let mut archive = tar::Archive::new(packed.as_slice());
        let entries: Vec<(String, tar::EntryType, u32, u64)> = archive
            .entries()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let h = e.header();
                (
                    e.path().unwrap().to_string_lossy().into_owned(),
                    h.entry_type(),
                    h.mode().unwrap(),
                    h.size().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            entries,
            [
                ("tmp/kiln/a.patch".into(), tar::EntryType::Regular, 0o644, 1),
                ("testbed/b".into(), tar::EntryType::Regular, 0o644, 2),
            ]
        );
    }

    #[test]
    fn a_huge_output_costs_head_and_tail_on_disk() {
        let mut log = Vec::new();
        let mut capped = CappedLog::new(10, 6);
        for chunk in [&b"start-"[..], b"0123456789", b"middle", b"...the end"] {
            capped.write(&mut log, chunk);
        }
        capped.finish(&mut log);
        assert_eq!(
            String::from_utf8_lossy(&log),
            "start-0123\n... [16 bytes omitted] ...\nhe end"
        );
        let mut log = Vec::new();
        let mut capped = CappedLog::new(10, 6);
        capped.write(&mut log, b"short\n");
        capped.finish(&mut log);
        assert_eq!(log, b"short\n");
        // 2 GiB of output in 1 MiB lines: the log stays within the caps.
        let mut written = super::CountingWriter::default();
        let mut capped = CappedLog::new(super::LOG_HEAD_BYTES, super::LOG_TAIL_BYTES);
        let line = vec![b'x'; 1 << 20];
        for _ in 0..2048 {
            capped.write(&mut written, &line);
        }
        capped.finish(&mut written);
        assert!(
            written.0 <= super::LOG_HEAD_BYTES + super::LOG_TAIL_BYTES + 100,
            "{} bytes logged",
            written.0
        );
    }
}

/// Counts what is written, for tests of the log cap.
#[cfg(test)]
#[derive(Default)]
struct CountingWriter(usize);

#[cfg(test)]
impl Write for CountingWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The last `lines` lines of a text, for failure records.
#[must_use]
pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    let start = all.len().saturating_sub(lines);
    all[start..].join("\n")
}
