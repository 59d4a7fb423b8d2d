//! Packing the checkout for the container (the git work itself is `kiln-git`'s).

use std::path::Path;

/// Packs a directory as a tar archive whose entries sit under `prefix/`.
///
/// Plain entries only: the tar crate writes a file with holes as a GNU sparse entry (type
/// `S`) unless told not to, and Docker's unpacker refuses those ("unhandled tar header type
/// 83"). A sparse file is packed whole, holes as zeros.
///
/// # Errors
/// When a file cannot be read.
pub fn tar_dir(dir: &Path, prefix: &str) -> std::io::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    builder.follow_symlinks(false);
    builder.sparse(false);
    builder.append_dir_all(prefix, dir)?;
    builder.into_inner()
}

/// Packs `paths` of `dir` (files and symlinks, relative to `dir`) and the whole of `dir/.git`
/// as a tar archive under `prefix/`: what an earlier checkout of the same repository lacks.
/// Entries keep their modification times (the checkout's, newer than anything built before
/// it), so that mtime-based builds redo exactly what the changed files touch.
///
/// # Errors
/// When a file cannot be read.
pub fn tar_paths(dir: &Path, prefix: &str, paths: &[String]) -> std::io::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    builder.follow_symlinks(false);
    builder.sparse(false);
    let git = dir.join(".git");
    if git.is_dir() {
        builder.append_dir_all(format!("{prefix}/.git"), &git)?;
    }
    for path in paths {
        builder.append_path_with_name(dir.join(path), format!("{prefix}/{path}"))?;
    }
    builder.into_inner()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_named_paths_and_the_git_directory_are_packed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".git/objects")).unwrap();
        std::fs::write(dir.path().join(".git/HEAD"), "ref").unwrap();
        std::fs::create_dir_all(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/changed.rs"), "new").unwrap();
        std::fs::write(dir.path().join("src/same.rs"), "old").unwrap();
        let packed = tar_paths(dir.path(), "testbed", &["src/changed.rs".into()]).unwrap();
        let mut archive = tar::Archive::new(packed.as_slice());
        let mut names: Vec<String> = archive
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert!(
            names.contains(&"testbed/.git/HEAD".to_string()),
            "{names:?}"
        );
        assert!(
            names.contains(&"testbed/src/changed.rs".to_string()),
            "{names:?}"
        );
        assert!(!names.iter().any(|n| n.ends_with("same.rs")), "{names:?}");
    }

    #[test]
    fn a_file_with_holes_is_packed_as_a_plain_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = std::fs::File::create(dir.path().join("holes.bin")).unwrap();
        // Only the last byte is written: a file system that keeps holes stores none of the
        // megabytes before it, which is what made the tar crate write a sparse entry.
        file.set_len(4 << 20).unwrap();
        std::os::unix::fs::FileExt::write_at(&file, b"x", (4 << 20) - 1).unwrap();
        drop(file);
        let packed = tar_dir(dir.path(), "testbed").unwrap();
        let mut archive = tar::Archive::new(packed.as_slice());
        let mut seen = 0;
        for entry in archive.entries().unwrap() {
            let mut entry = entry.unwrap();
            let path = entry.path().unwrap().to_path_buf();
            if path.ends_with("holes.bin") {
                seen += 1;
                assert_eq!(entry.header().entry_type(), tar::EntryType::Regular);
                let mut bytes = Vec::new();
                std::io::Read::read_to_end(&mut entry, &mut bytes).unwrap();
                assert_eq!(bytes.len(), 4 << 20);
                assert_eq!(bytes[bytes.len() - 1], b'x');
                assert!(bytes[..bytes.len() - 1].iter().all(|b| *b == 0));
            }
        }
        assert_eq!(seen, 1);
    }
}
