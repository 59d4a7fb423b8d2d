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

/// Packs `files` (path in the archive, contents) as a tar archive of plain files, mode 0644,
/// without entries for their parent directories: the engine creates missing ones, and an entry
/// for an existing one would reset its mode in the image that is committed (Docker applies a
/// `tmp/` entry's 0755 to `/tmp`, which `kiln_core::session::tar_files` writes).
///
/// # Errors
/// When the archive cannot be written.
pub fn tar_files(files: &[(String, &[u8])]) -> std::io::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    for (path, contents) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(contents.len() as u64);
        header.set_mode(0o644);
        header.set_entry_type(tar::EntryType::Regular);
        builder.append_data(&mut header, path, *contents)?;
    }
    builder.into_inner()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_files_are_packed_with_their_contents() {
        let packed = tar_files(&[("tmp/x/pack".into(), b"PACK".as_slice())]).unwrap();
        let mut archive = tar::Archive::new(packed.as_slice());
        let mut entry = archive.entries().unwrap().next().unwrap().unwrap();
        assert_eq!(entry.path().unwrap().to_string_lossy(), "tmp/x/pack");
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut entry, &mut bytes).unwrap();
        assert_eq!(bytes, b"PACK");
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
