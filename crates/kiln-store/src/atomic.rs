//! Atomic file replacement: write a temporary file in the same directory, fsync it, rename it
//! over the target, fsync the directory.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::StoreError;

/// Marker in the names of temporary files; files whose name starts with `.` and contains it are
/// leftovers of a crash and may be deleted by whoever owns the directory.
pub(crate) const TEMP_MARKER: &str = ".tmp-";

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// Whether `name` is a temporary file name made by this module.
pub(crate) fn is_temp_name(name: &str) -> bool {
    name.starts_with('.') && name.contains(TEMP_MARKER)
}

/// Writes `bytes` to `path` atomically: readers see the old content or the new one, never a
/// partial file, and once this returns the new content survives a crash or power loss.
///
/// The parent directory must exist.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let (atomic, mut file) = AtomicFile::create(path)?;
    file.write_all(bytes)
        .map_err(|e| StoreError::io("write", atomic.temp_path(), e))?;
    atomic.commit(file)
}

/// Fsyncs a directory so that renames and deletions in it are durable.
pub fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StoreError::io("fsync directory", dir, e))
}

/// A temporary file next to its target. [`AtomicFile::commit`] renames it over the target; if
/// dropped uncommitted, the temporary file is removed.
pub(crate) struct AtomicFile {
    target: PathBuf,
    temp: PathBuf,
}

impl AtomicFile {
    /// Creates the temporary file next to `target` and returns it open for writing.
    pub(crate) fn create(target: &Path) -> Result<(Self, File), StoreError> {
        let dir = parent(target);
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| StoreError::invalid(target, "path has no file name"))?;
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let temp = dir.join(format!(".{name}{TEMP_MARKER}{}-{n}", std::process::id()));
        let file = File::options()
            .write(true)
            .create_new(true)
            .open(&temp)
            .map_err(|e| StoreError::io("create", &temp, e))?;
        let this = Self {
            target: target.to_path_buf(),
            temp,
        };
        Ok((this, file))
    }

    /// Path of the temporary file.
    pub(crate) fn temp_path(&self) -> &Path {
        &self.temp
    }

    /// Fsyncs `file` (the one returned by `create`), renames it over the target and fsyncs the
    /// directory.
    pub(crate) fn commit(mut self, file: File) -> Result<(), StoreError> {
        file.sync_all()
            .map_err(|e| StoreError::io("fsync", &self.temp, e))?;
        drop(file);
        crate::crash::before_write();
        fs::rename(&self.temp, &self.target)
            .map_err(|e| StoreError::io("rename into place", &self.target, e))?;
        // Renamed: nothing left to clean up.
        self.temp = PathBuf::new();
        sync_dir(parent(&self.target))
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if !self.temp.as_os_str().is_empty() {
            let _ = fs::remove_file(&self.temp);
        }
    }
}

/// The directory containing `path` (`.` for a bare file name).
pub(crate) fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Where [`replace_dir`] keeps the directory it replaces until the new one is in place.
fn aside(target: &Path) -> Result<PathBuf, StoreError> {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| StoreError::invalid(target, "path has no file name"))?;
    Ok(parent(target).join(format!(".{name}.old")))
}

/// Puts the directory `staged` in place of `target`, which may not exist: `target` is renamed
/// aside, `staged` renamed into place, then the old directory removed. Readers see the old
/// directory or the new one whole; a crash between the two renames leaves the old one aside,
/// and [`recover_replaced`] puts it back.
pub fn replace_dir(staged: &Path, target: &Path) -> Result<(), StoreError> {
    let old = aside(target)?;
    if old.exists() {
        fs::remove_dir_all(&old).map_err(|e| StoreError::io("remove", &old, e))?;
    }
    let had_target = target.exists();
    if had_target {
        fs::rename(target, &old).map_err(|e| StoreError::io("move aside", target, e))?;
    }
    fs::rename(staged, target).map_err(|e| StoreError::io("move into place", staged, e))?;
    sync_dir(parent(target))?;
    if had_target {
        fs::remove_dir_all(&old).map_err(|e| StoreError::io("remove", &old, e))?;
    }
    Ok(())
}

/// Undoes a [`replace_dir`] a crash cut short: when `target` is missing and the directory it
/// replaced is still aside, that directory goes back; an aside copy next to a `target` is the
/// leftover of a finished replacement and is removed.
pub fn recover_replaced(target: &Path) -> Result<(), StoreError> {
    let old = aside(target)?;
    if !old.exists() {
        return Ok(());
    }
    if target.exists() {
        fs::remove_dir_all(&old).map_err(|e| StoreError::io("remove", &old, e))
    } else {
        fs::rename(&old, target).map_err(|e| StoreError::io("restore", &old, e))?;
        sync_dir(parent(target))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_atomic_replaces_and_leaves_no_temp() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("f.json");
        write_atomic(&path, b"one")?;
        write_atomic(&path, b"two")?;
        assert_eq!(fs::read(&path)?, b"two");
        assert_eq!(fs::read_dir(dir.path())?.count(), 1);
        Ok(())
    }

    #[test]
    fn dropped_atomic_file_is_removed() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let (atomic, _file) = AtomicFile::create(&dir.path().join("x"))?;
        let temp = atomic.temp_path().to_path_buf();
        assert!(temp.exists());
        let name = temp.file_name().map(|n| n.to_string_lossy().into_owned());
        assert!(name.is_some_and(|n| is_temp_name(&n)));
        drop(atomic);
        assert!(!temp.exists());
        assert!(!dir.path().join("x").exists());
        Ok(())
    }

    #[test]
    fn missing_directory_error_names_the_path() {
        let err = write_atomic(Path::new("/nonexistent-kiln-dir/f"), b"x")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("/nonexistent-kiln-dir/"), "{err}");
    }
}
