//! The whole checkout of a container, streamed from the engine and compared with the commit's
//! tree, and the judgement of what an environment left in it.

use std::collections::{BTreeMap, BTreeSet};

use super::tree::{BlobHasher, DOCUMENT_CAP, Found, MODE_GITLINK, Tree};
use crate::judge::{self, Content, FileChange};
use crate::runtime::WORKDIR;
use crate::tarstream::{self, EntryKind};
use crate::{ContainerId, ContainerRuntime, RuntimeError};

/// What [`scan`] found in a checkout.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scan {
    /// Tracked paths that differ from the tree: what is there now (`None`: gone).
    pub changed: BTreeMap<String, Option<Found>>,
    /// Untracked files and links, in archive order.
    pub untracked: Vec<String>,
}

/// Collects a [`Scan`] as the archive streams by.
struct Scanner<'a> {
    tree: &'a Tree,
    /// The archive's top directory (`testbed`).
    root: String,
    scan: Scan,
    seen: BTreeSet<String>,
    /// Blob ids of the regular files read so far, for hard links to them.
    oids: BTreeMap<String, String>,
    /// The entry being read: its path, its hasher and its kept bytes.
    current: Option<(String, BlobHasher, Option<Vec<u8>>)>,
    /// Any tracked id, to know the repository's hash.
    like: String,
}

impl Scanner<'_> {
    fn relative(&self, path: &str) -> Option<String> {
        let rest = path.strip_prefix(&self.root)?;
        let rest = rest.strip_prefix('/').unwrap_or(rest);
        (!rest.is_empty()).then(|| rest.to_string())
    }

    fn found(&mut self, path: String, found: Option<Found>) {
        match self.tree.get(&path) {
            Some(tracked) => {
                self.seen.insert(path.clone());
                let same = found.as_ref().is_some_and(|f| f.matches(tracked));
                if !same {
                    self.scan.changed.insert(path, found);
                }
            }
            None => self.scan.untracked.push(path),
        }
    }
}

impl tarstream::Visitor for Scanner<'_> {
    fn entry(&mut self, entry: &tarstream::Entry) -> bool {
        let Some(path) = self.relative(&entry.path) else {
            return false;
        };
        if path == ".git" || path.starts_with(".git/") || self.tree.in_submodule(&path) {
            return false;
        }
        match &entry.kind {
            EntryKind::File => {
                let keep = Tree::is_document(&path) && entry.size <= DOCUMENT_CAP;
                let hasher = BlobHasher::new(entry.size, &self.like);
                self.current = Some((path, hasher, keep.then(Vec::new)));
                true
            }
            EntryKind::Symlink(target) => {
                self.found(path, Some(Found::Symlink(target.clone())));
                false
            }
            EntryKind::HardLink(target) => {
                let oid = self
                    .relative(target)
                    .and_then(|t| self.oids.get(&t).cloned())
                    .unwrap_or_default();
                self.found(path, Some(Found::File { oid, content: None }));
                false
            }
            EntryKind::Directory => {
                // A directory where the tree has a file or link: the file is gone.
                if self.tree.get(&path).is_some_and(|t| t.mode != MODE_GITLINK) {
                    self.found(path, Some(Found::Other));
                }
                false
            }
            EntryKind::Other => {
                self.found(path, Some(Found::Other));
                false
            }
        }
    }

    fn data(&mut self, bytes: &[u8]) {
        if let Some((_, hasher, kept)) = &mut self.current {
            hasher.update(bytes);
            if let Some(kept) = kept {
                kept.extend_from_slice(bytes);
            }
        }
    }

    fn end(&mut self) {
        if let Some((path, hasher, content)) = self.current.take() {
            let oid = hasher.finish();
            self.oids.insert(path.clone(), oid.clone());
            self.found(path, Some(Found::File { oid, content }));
        }
    }
}

/// Reads the whole checkout of container `id` ([`WORKDIR`]) as the engine streams it and
/// compares it with `tree`: tracked files that differ or are gone, and untracked files. The
/// repository's `.git` and the contents of submodules are not compared.
///
/// # Errors
/// When the engine fails or the archive cannot be read.
pub async fn scan(
    runtime: &dyn ContainerRuntime,
    id: &ContainerId,
    tree: &Tree,
) -> Result<Scan, RuntimeError> {
    let like = tree.like();
    let mut scanner = Scanner {
        tree,
        root: WORKDIR.trim_start_matches('/').to_string(),
        scan: Scan::default(),
        seen: BTreeSet::new(),
        oids: BTreeMap::new(),
        current: None,
        like,
    };
    let mut reader = tarstream::Reader::new();
    let mut sink = |bytes: &[u8]| reader.push(bytes, &mut scanner);
    let exists = runtime.stream_out(id, WORKDIR, &mut sink).await?;
    if !exists {
        return Err(RuntimeError::engine(
            format!("read {WORKDIR} of {}", id.0),
            "the checkout is not in the container",
        ));
    }
    let mut scan = scanner.scan;
    for path in tree.paths() {
        if !scanner.seen.contains(path)
            && !scan.changed.contains_key(path)
            && tree.get(path).is_some_and(|t| t.mode != MODE_GITLINK)
        {
            scan.changed.insert(path.to_string(), None);
        }
    }
    Ok(scan)
}

/// Why an environment's effect on the checkout is refused: a failure class's worth of words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A tracked file changed or gone.
    Changed(String),
    /// Test configuration added (or a test setting changed).
    TestConfiguration(String),
    /// A file the run's patches changed is not as the host's apply left it.
    Patched(String),
}

impl Refusal {
    /// The reason in words.
    #[must_use]
    pub fn reason(&self) -> &str {
        match self {
            Self::Changed(r) | Self::TestConfiguration(r) | Self::Patched(r) => r,
        }
    }
}

/// Directories whose files no test runner reads as configuration of the repository's tests:
/// installed dependencies and build output.
const DEPENDENCY_DIRS: &[&str] = &[
    "node_modules",
    "target",
    ".tox",
    ".nox",
    ".venv",
    "venv",
    "__pycache__",
    "site-packages",
    "dist-packages",
    ".eggs",
    ".git",
];

/// Files that build tools generate in their build directories and that name test
/// configuration: CMake writes a `CTestTestfile.cmake` into every build directory.
const GENERATED_CONFIGURATION: &[&str] = &["ctesttestfile.cmake"];

/// Whether an untracked file at `path` is test configuration that the checkout may not gain:
/// a test configuration file by name, outside installed dependencies and build output.
#[must_use]
pub fn is_added_test_configuration(path: &str) -> bool {
    if !judge::is_test_configuration(path) {
        return false;
    }
    let name = path.rsplit('/').next().unwrap_or(path).to_ascii_lowercase();
    if GENERATED_CONFIGURATION.contains(&name.as_str()) {
        return false;
    }
    !path.split('/').any(|part| {
        DEPENDENCY_DIRS.contains(&part)
            || part.ends_with(".egg-info")
            || part.ends_with(".dist-info")
    })
}

/// Judges a [`Scan`] of an environment's checkout: every tracked file must be as the commit has
/// it, but for the files the plan declares its package manager rewrites (`rewrites`, by file
/// name: lockfiles), and no untracked file may be test configuration. `Ok` gives the untracked
/// files for the row, listed by [`Tree::collapse`].
///
/// # Errors
/// The [`Refusal`], naming the files.
pub fn judge_scan(
    tree: &Tree,
    scan: &Scan,
    rewrites: &[&str],
    language: &str,
) -> Result<Vec<String>, Refusal> {
    let added: Vec<&String> = scan
        .untracked
        .iter()
        .filter(|p| is_added_test_configuration(p))
        .collect();
    if let Some(first) = added.first() {
        return Err(Refusal::TestConfiguration(format!(
            "the environment added test configuration to the checkout: {}{}",
            first,
            more(added.len())
        )));
    }
    let changed: Vec<(&String, &Option<Found>)> = scan
        .changed
        .iter()
        .filter(|(path, _)| {
            let name = path.rsplit('/').next().unwrap_or(path);
            !rewrites.contains(&name)
        })
        .collect();
    // A change to what judges the tests is named first: it is the worse of the two.
    for (path, found) in &changed {
        let before = tree.document(path).map(Content::File);
        let after = found.as_ref().and_then(Found::content);
        let change = FileChange {
            path,
            before,
            after,
        };
        if let Some(why) = judge::judge(&change, language) {
            return Err(Refusal::TestConfiguration(format!(
                "the environment changed {why} in the checkout"
            )));
        }
    }
    if let Some((path, found)) = changed.first() {
        let what = if found.is_some() {
            "changed"
        } else {
            "deleted"
        };
        return Err(Refusal::Changed(format!(
            "the environment {what} the tracked file {path}{}; the tests must see the commit as it is",
            more(changed.len())
        )));
    }
    Ok(tree.collapse(&scan.untracked))
}

fn more(count: usize) -> String {
    if count > 1 {
        format!(" (and {} more)", count - 1)
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkout::tree::blob_oid;
    use crate::checkout::tree::tests::tree;

    #[test]
    fn a_scan_is_judged_by_what_it_found() {
        let tree = tree(&[
            ("src/a.py", "a"),
            ("setup.cfg", "[metadata]\n"),
            ("package-lock.json", "{}"),
        ]);
        let oid = |c: &str| blob_oid(c.as_bytes(), &"0".repeat(40));
        let clean = Scan {
            changed: BTreeMap::new(),
            untracked: vec![
                "node_modules/jest.config.js".into(),
                "build/CTestTestfile.cmake".into(),
            ],
        };
        assert_eq!(
            judge_scan(&tree, &clean, &[], "python"),
            Ok(vec!["build/".to_string(), "node_modules/".to_string()])
        );
        let conftest = Scan {
            changed: BTreeMap::new(),
            untracked: vec!["tests/conftest.py".into()],
        };
        assert!(matches!(
            judge_scan(&tree, &conftest, &[], "python"),
            Err(Refusal::TestConfiguration(r)) if r.contains("tests/conftest.py")
        ));
        let lockfile = Scan {
            changed: BTreeMap::from([(
                "package-lock.json".to_string(),
                Some(Found::File {
                    oid: oid("{ }"),
                    content: None,
                }),
            )]),
            untracked: Vec::new(),
        };
        assert!(judge_scan(&tree, &lockfile, &["package-lock.json"], "javascript").is_ok());
        assert!(matches!(
            judge_scan(&tree, &lockfile, &[], "javascript"),
            Err(Refusal::Changed(r)) if r.contains("package-lock.json")
        ));
        let addopts = Scan {
            changed: BTreeMap::from([(
                "setup.cfg".to_string(),
                Some(Found::File {
                    oid: oid("x"),
                    content: Some(b"[metadata]\n[tool:pytest]\naddopts = -p force\n".to_vec()),
                }),
            )]),
            untracked: Vec::new(),
        };
        assert!(matches!(
            judge_scan(&tree, &addopts, &[], "python"),
            Err(Refusal::TestConfiguration(r)) if r.contains("setup.cfg")
        ));
        let deleted = Scan {
            changed: BTreeMap::from([("src/a.py".to_string(), None)]),
            untracked: Vec::new(),
        };
        assert!(matches!(
            judge_scan(&tree, &deleted, &[], "python"),
            Err(Refusal::Changed(r)) if r.contains("deleted the tracked file src/a.py")
        ));
    }
}
