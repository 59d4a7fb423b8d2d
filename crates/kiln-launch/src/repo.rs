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

#[cfg(test)]
mod tests {
    use super::*;

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
