//! The file model of the scripted runtime: what a container or an image holds is a map from
//! absolute path to content, changed by the archives copied in and by what scripted commands
//! write and delete, and read back as the engine gives it (a tar archive of a path, the list of
//! changes against the image).

use std::collections::BTreeMap;
use std::io::Read as _;

use kiln_core::{ChangeKind, FsChange};

/// A file system: every file's absolute path and content.
pub(super) type Files = BTreeMap<String, Vec<u8>>;

/// A tar archive copied into a container: the directory and the archive's bytes, as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopiedIn {
    /// Directory it was extracted into.
    pub dir: String,
    /// The archive.
    pub tar: Vec<u8>,
}

/// What a scripted command does to a file of its container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum FileEffect {
    /// Writes this content to the absolute path.
    Write(String, Vec<u8>),
    /// Deletes the absolute path (and everything under it).
    Delete(String),
}

/// Applies `effect` to `fs`.
pub(super) fn apply(fs: &mut Files, effect: &FileEffect) {
    match effect {
        FileEffect::Write(path, content) => {
            fs.insert(path.clone(), content.clone());
        }
        FileEffect::Delete(path) => {
            let under = format!("{}/", path.trim_end_matches('/'));
            fs.retain(|name, _| name != path && !name.starts_with(&under));
        }
    }
}

/// `path` as an absolute path without `.` components or a trailing slash.
pub(super) fn normalize(path: &str) -> String {
    let parts: Vec<&str> = path
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    format!("/{}", parts.join("/"))
}

/// The regular files of a copied archive, by absolute path. An archive that cannot be read
/// yields what could be read before the damage.
pub(super) fn tar_files(copied: &CopiedIn) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    let mut archive = tar::Archive::new(copied.tar.as_slice());
    let Ok(entries) = archive.entries() else {
        return files;
    };
    for entry in entries {
        let Ok(mut entry) = entry else { break };
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let Ok(name) = entry.path().map(|p| p.to_string_lossy().into_owned()) else {
            continue;
        };
        let mut contents = Vec::new();
        if entry.read_to_end(&mut contents).is_err() {
            break;
        }
        files.push((normalize(&format!("{}/{name}", copied.dir)), contents));
    }
    files
}

/// The tar archive of `path` (already normalised) in `files`, as the engine gives it: entries
/// named from the last component of `path` on; `None` when nothing is there.
///
/// # Errors
/// When the archive cannot be written.
pub(super) fn archive(files: &Files, wanted: &str) -> std::io::Result<Option<Vec<u8>>> {
    let under = format!("{}/", wanted.trim_end_matches('/'));
    let selected: Vec<(&String, &Vec<u8>)> = files
        .iter()
        .filter(|(name, _)| *name == wanted || name.starts_with(&under))
        .collect();
    if selected.is_empty() {
        return Ok(None);
    }
    let parent = match wanted.rsplit_once('/') {
        Some((parent, _)) => format!("{parent}/"),
        None => String::new(),
    };
    let mut builder = tar::Builder::new(Vec::new());
    for (name, contents) in selected {
        let mut header = tar::Header::new_gnu();
        header.set_size(contents.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_cksum();
        let relative = name.strip_prefix(&parent).unwrap_or(name);
        builder.append_data(&mut header, relative, contents.as_slice())?;
    }
    builder.into_inner().map(Some)
}

/// What changed in `fs` against the image's `image_fs`, as the engine lists it: added and
/// modified files in path order, then deleted ones.
pub(super) fn changes(fs: &Files, image_fs: &Files) -> Vec<FsChange> {
    let mut changes = Vec::new();
    for (path, content) in fs {
        match image_fs.get(path) {
            None => changes.push(FsChange {
                path: path.clone(),
                kind: ChangeKind::Added,
            }),
            Some(old) if old != content => changes.push(FsChange {
                path: path.clone(),
                kind: ChangeKind::Modified,
            }),
            Some(_) => {}
        }
    }
    for path in image_fs.keys() {
        if !fs.contains_key(path) {
            changes.push(FsChange {
                path: path.clone(),
                kind: ChangeKind::Deleted,
            });
        }
    }
    changes
}
