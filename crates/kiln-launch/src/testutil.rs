//! Temporary project trees for unit tests. It imports nothing of the crate, so the tests of any
//! module may use it (`plan::testutil` re-exports it for the planners').

/// Writes `files` (path, contents) under a new temporary directory.
pub(crate) fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for (name, text) in files {
        let path = tmp.path().join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(path, text).unwrap();
    }
    tmp
}
