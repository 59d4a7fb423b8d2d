//! The locks: one process per dataset ([`DatasetLock`]), one writing process per run directory
//! ([`RunLock`]).

use std::fs::{self, File};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use crate::atomic::sync_dir;
use crate::error::StoreError;

/// File name of the lock inside a run directory.
pub const LOCK_FILE: &str = "run.lock";

/// Exclusive hold on a run directory, as the file `<run>/run.lock` holding the holder's pid.
///
/// Taking the lock fails if the file names a live process; a lock left by a dead process is
/// taken over. The file is removed when the `RunLock` is dropped. The takeover of a stale lock
/// by two processes at the same instant is not fully race-free (both could delete and recreate
/// within microseconds); normal contention between a live holder and a newcomer is.
#[derive(Debug)]
pub struct RunLock {
    path: PathBuf,
    pid: u32,
}

/// Whether process `pid` exists (`kill(pid, 0)` semantics, via `/proc` on Linux).
#[must_use]
pub fn process_alive(pid: u32) -> bool {
    if pid == 0 {
        return false;
    }
    if Path::new("/proc/self").exists() {
        return Path::new("/proc").join(pid.to_string()).exists();
    }
    std::process::Command::new("kill")
        .args(["-0", &pid.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

impl RunLock {
    /// Takes the lock of the run directory `run_dir` (which must exist) for this process.
    ///
    /// Fails with [`StoreError::Locked`] naming the holder's pid if a live process (this one
    /// included) holds it.
    pub fn acquire(run_dir: &Path) -> Result<Self, StoreError> {
        let path = run_dir.join(LOCK_FILE);
        let pid = std::process::id();
        // Two rounds: the second after removing a stale lock.
        for _ in 0..2 {
            match File::options().write(true).create_new(true).open(&path) {
                Ok(mut file) => {
                    file.write_all(format!("{pid}\n").as_bytes())
                        .and_then(|()| file.sync_all())
                        .map_err(|e| StoreError::io("write", &path, e))?;
                    sync_dir(run_dir)?;
                    return Ok(Self { path, pid });
                }
                Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
                Err(e) => return Err(StoreError::io("create", &path, e)),
            }
            let text = match fs::read_to_string(&path) {
                Ok(text) => text,
                // Released between our create and read: try again.
                Err(e) if e.kind() == ErrorKind::NotFound => continue,
                Err(e) => return Err(StoreError::io("read", &path, e)),
            };
            match text.trim().parse::<u32>() {
                Ok(holder) if process_alive(holder) => {
                    return Err(StoreError::Locked { path, pid: holder });
                }
                Ok(holder) => {
                    tracing::warn!(path = %path.display(), pid = holder, "taking over the lock of a dead process");
                }
                // An empty or garbled file: a crash between create and write.
                Err(_) => {
                    tracing::warn!(path = %path.display(), "taking over a malformed lock file");
                }
            }
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(StoreError::io("remove stale lock", &path, e)),
            }
        }
        let holder = fs::read_to_string(&path)
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0);
        Err(StoreError::Locked { path, pid: holder })
    }

    /// Path of the lock file.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for RunLock {
    fn drop(&mut self) {
        // Only remove the file if it is still ours.
        let ours = fs::read_to_string(&self.path)
            .ok()
            .and_then(|t| t.trim().parse::<u32>().ok())
            == Some(self.pid);
        if ours {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// File name of the dataset lock inside a dataset directory.
pub const DATASET_LOCK_FILE: &str = "dataset.lock";

/// How long [`DatasetLock::acquire`] keeps trying a busy lock before it names the holder.
const RELEASE_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// Exclusive hold on a dataset: taken before a run is chosen or created, and held while the
/// run works, so that two invocations started at the same instant cannot both create a run
/// (and write the same release), and so that every container and scratch image of the dataset
/// found while holding it belongs to a dead process.
///
/// It is an advisory lock on `<root>/<dataset>/dataset.lock` (`flock`), which the kernel
/// releases when the holder dies however it dies: no stale lock is ever taken over. The file
/// holds the holder's pid, for messages.
#[derive(Debug)]
pub struct DatasetLock {
    path: PathBuf,
    _file: File,
}

impl DatasetLock {
    /// Takes the lock of dataset `dataset` under `root` (the directory is created), failing at
    /// with [`StoreError::Locked`] naming the holder when another process, or another runner
    /// of this one, holds it for longer than a second.
    pub fn acquire(root: &Path, dataset: &str) -> Result<Self, StoreError> {
        crate::names::check_component(root, "dataset name", dataset)?;
        let dir = root.join(dataset);
        fs::create_dir_all(&dir).map_err(|e| StoreError::io("create directory", &dir, e))?;
        let path = dir.join(DATASET_LOCK_FILE);
        let mut file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| StoreError::io("open", &path, e))?;
        // A lock whose holder has just let it go can still be held for a moment: a child this
        // process forked (to exec git, docker, ...) shares the open file description until it
        // execs, and `flock` belongs to the description. So a busy lock is tried again for
        // `RELEASE_GRACE` before it counts as held.
        let deadline = std::time::Instant::now() + RELEASE_GRACE;
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                Err(fs::TryLockError::WouldBlock) => {
                    // The holder writes its pid just after it takes the lock.
                    let mut holder = 0;
                    for _ in 0..20 {
                        holder = fs::read_to_string(&path)
                            .ok()
                            .and_then(|t| t.trim().parse().ok())
                            .unwrap_or(0);
                        if holder != 0 {
                            break;
                        }
                        std::thread::sleep(std::time::Duration::from_millis(10));
                    }
                    return Err(StoreError::Locked { path, pid: holder });
                }
                Err(fs::TryLockError::Error(e)) => return Err(StoreError::io("lock", &path, e)),
            }
        }
        // The pid is a courtesy for the message of whoever waits; the lock is the flock.
        let _ = file
            .set_len(0)
            .and_then(|()| file.write_all(format!("{}\n", std::process::id()).as_bytes()));
        Ok(Self { path, _file: file })
    }

    /// Path of the lock file.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A released lock whose open file description lives on for a moment (as in a child forked
    /// just before the release, until it execs) is taken once the description closes, not
    /// reported as held.
    #[test]
    fn a_lock_released_while_a_forked_child_shares_it_is_taken()
    -> Result<(), Box<dyn std::error::Error>> {
        let tmp = tempfile::tempdir()?;
        let first = DatasetLock::acquire(tmp.path(), "d")?;
        // A duplicate of the descriptor shares the description, as a forked child's copy does.
        let inherited = first._file.try_clone()?;
        drop(first);
        let closer = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(200));
            drop(inherited);
        });
        let second = DatasetLock::acquire(tmp.path(), "d");
        assert!(closer.join().is_ok());
        let second = second?;
        // And a lock that stays held is reported, with the holder's pid.
        match DatasetLock::acquire(tmp.path(), "d") {
            Err(StoreError::Locked { pid, .. }) => assert_eq!(pid, std::process::id()),
            other => panic!("{other:?}"),
        }
        drop(second);
        Ok(())
    }
}
