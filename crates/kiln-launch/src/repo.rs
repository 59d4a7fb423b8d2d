//! Packing the checkout for the container (the git work itself is `kiln-git`'s).

use std::path::Path;

/// Packs a directory as a tar archive whose entries sit under `prefix/`.
///
/// # Errors
/// When a file cannot be read.
pub fn tar_dir(dir: &Path, prefix: &str) -> std::io::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    builder.follow_symlinks(false);
    builder.append_dir_all(prefix, dir)?;
    builder.into_inner()
}
