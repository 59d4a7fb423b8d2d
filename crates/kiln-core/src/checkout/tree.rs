//! A commit's tree as the checks read it, git's blob ids, and one path of a container read
//! from the engine.

use std::collections::{BTreeMap, BTreeSet};

use crate::judge::{self, Content};
use crate::runtime::WORKDIR;
use crate::tarstream::{self, EntryKind};
use crate::{ContainerId, ContainerRuntime, RuntimeError};

pub(crate) const MODE_SYMLINK: u32 = 0o120_000;
/// Git's mode of a submodule.
pub(crate) const MODE_GITLINK: u32 = 0o160_000;

/// Files kept whole when read from a container: documents to compare are small.
pub(crate) const DOCUMENT_CAP: u64 = 1 << 20;

/// One tracked file: git's mode and object id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tracked {
    /// Git's mode (`0o100644`, `0o100755`, `0o120000`, `0o160000`).
    pub mode: u32,
    /// The blob's id (hex; 40 digits for SHA-1 repositories, 64 for SHA-256 ones).
    pub oid: String,
}

/// A commit's tree: every tracked path (files, links, submodules) with its mode and id, and
/// the contents of the ones whose changes are judged as documents (shared manifests, test
/// configuration).
#[derive(Debug, Clone, Default)]
pub struct Tree {
    files: BTreeMap<String, Tracked>,
    /// Every directory a tracked path lies in (`a`, `a/b` for `a/b/c`).
    dirs: BTreeSet<String>,
    /// The contents of documents ([`Tree::is_document`]), by path.
    documents: BTreeMap<String, Vec<u8>>,
}

impl Tree {
    /// The tree of `entries` (`(path, mode, oid)`), with the contents of its documents.
    #[must_use]
    pub fn new(
        entries: impl IntoIterator<Item = (String, u32, String)>,
        documents: BTreeMap<String, Vec<u8>>,
    ) -> Self {
        let mut tree = Self {
            documents,
            ..Self::default()
        };
        for (path, mode, oid) in entries {
            tree.insert(path, Tracked { mode, oid });
        }
        tree
    }

    fn insert(&mut self, path: String, tracked: Tracked) {
        let mut at = path.as_str();
        while let Some((dir, _)) = at.rsplit_once('/') {
            self.dirs.insert(dir.to_string());
            at = dir;
        }
        self.files.insert(path, tracked);
    }

    /// Whether a path's changes are judged as a document, so that its content is kept: a
    /// shared manifest or test configuration.
    #[must_use]
    pub fn is_document(path: &str) -> bool {
        judge::is_shared_manifest(path) || judge::is_test_configuration(path)
    }

    /// The tracked file at `path`.
    #[must_use]
    pub fn get(&self, path: &str) -> Option<&Tracked> {
        self.files.get(path)
    }

    /// Every tracked path, in order.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.files.keys().map(String::as_str)
    }

    /// How many paths are tracked.
    #[must_use]
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether nothing is tracked.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Any blob id of the tree: its length says which hash the repository uses.
    #[must_use]
    pub fn like(&self) -> String {
        self.files
            .values()
            .next()
            .map_or_else(String::new, |t| t.oid.clone())
    }

    /// The kept content of the document at `path`.
    #[must_use]
    pub fn document(&self, path: &str) -> Option<&[u8]> {
        self.documents.get(path).map(Vec::as_slice)
    }

    /// This tree with `changes` made: a path mapped to `None` is deleted; `documents` holds
    /// the new contents of changed documents.
    #[must_use]
    pub fn with(
        &self,
        changes: &BTreeMap<String, Option<Tracked>>,
        documents: &BTreeMap<String, Vec<u8>>,
    ) -> Self {
        let mut tree = Self {
            documents: self.documents.clone(),
            ..Self::default()
        };
        for (path, tracked) in &self.files {
            if !changes.contains_key(path) {
                tree.insert(path.clone(), tracked.clone());
            }
        }
        for (path, tracked) in changes {
            tree.documents.remove(path);
            if let Some(tracked) = tracked {
                tree.insert(path.clone(), tracked.clone());
            }
        }
        tree.documents.extend(
            documents
                .iter()
                .filter(|(p, _)| changes.contains_key(*p))
                .map(|(p, c)| (p.clone(), c.clone())),
        );
        tree
    }

    /// The submodule whose directory holds `path`, if any: its files come from another
    /// repository and are not this tree's.
    pub(crate) fn in_submodule(&self, path: &str) -> bool {
        let mut at = path;
        while let Some((dir, _)) = at.rsplit_once('/') {
            if self.files.get(dir).is_some_and(|t| t.mode == MODE_GITLINK) {
                return true;
            }
            at = dir;
        }
        false
    }

    /// `untracked` paths for a reader: each under its highest directory that holds nothing
    /// tracked, listed once as `dir/` (`node_modules/`, `target/`, `src/pkg/__pycache__/`);
    /// a file beside tracked ones as itself.
    #[must_use]
    pub fn collapse(&self, untracked: &[String]) -> Vec<String> {
        let mut listed = BTreeSet::new();
        for path in untracked {
            let parts: Vec<&str> = path.split('/').collect();
            let mut shown = path.clone();
            for end in 1..parts.len() {
                let dir = parts[..end].join("/");
                if !self.dirs.contains(&dir) && !self.files.contains_key(&dir) {
                    shown = format!("{dir}/");
                    break;
                }
            }
            listed.insert(shown);
        }
        listed.into_iter().collect()
    }
}

/// Git's object id of a blob (`blob <size>\0<content>`), SHA-1 or SHA-256 as `like`'s length
/// says.
#[must_use]
pub fn blob_oid(content: &[u8], like: &str) -> String {
    BlobHasher::new(content.len() as u64, like).finish_with(content)
}

/// A blob id computed as the content arrives.
pub(crate) enum BlobHasher {
    Sha1(sha1::Sha1),
    Sha256(sha2::Sha256),
}

impl BlobHasher {
    pub(crate) fn new(size: u64, like: &str) -> Self {
        use sha2::Digest as _;
        let header = format!("blob {size}\0");
        if like.len() == 64 {
            let mut hasher = sha2::Sha256::new();
            hasher.update(header.as_bytes());
            Self::Sha256(hasher)
        } else {
            let mut hasher = sha1::Sha1::new();
            hasher.update(header.as_bytes());
            Self::Sha1(hasher)
        }
    }

    pub(crate) fn update(&mut self, bytes: &[u8]) {
        use sha2::Digest as _;
        match self {
            Self::Sha1(h) => h.update(bytes),
            Self::Sha256(h) => h.update(bytes),
        }
    }

    pub(crate) fn finish(self) -> String {
        use sha2::Digest as _;
        let bytes: Vec<u8> = match self {
            Self::Sha1(h) => h.finalize().to_vec(),
            Self::Sha256(h) => h.finalize().to_vec(),
        };
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn finish_with(mut self, content: &[u8]) -> String {
        self.update(content);
        self.finish()
    }
}

/// What a path holds in a container, as read from the engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// A regular file: its blob id, and its bytes when it is a document.
    File {
        /// Git's id of its content.
        oid: String,
        /// The content, for documents under [`DOCUMENT_CAP`].
        content: Option<Vec<u8>>,
    },
    /// A symbolic link to this target.
    Symlink(String),
    /// A directory or anything else.
    Other,
}

impl Found {
    /// Whether this is what `tracked` says.
    pub(crate) fn matches(&self, tracked: &Tracked) -> bool {
        match self {
            Self::File { oid, .. } => tracked.mode != MODE_SYMLINK && *oid == tracked.oid,
            Self::Symlink(target) => {
                tracked.mode == MODE_SYMLINK
                    && blob_oid(target.as_bytes(), &tracked.oid) == tracked.oid
            }
            Self::Other => tracked.mode == MODE_GITLINK,
        }
    }

    pub(crate) fn content(&self) -> Option<Content<'_>> {
        match self {
            Self::File {
                content: Some(bytes),
                ..
            } => Some(Content::File(bytes)),
            Self::Symlink(target) => Some(Content::Symlink(target)),
            _ => Some(Content::Other),
        }
    }
}

/// Reads one path of the checkout of container `id`: what it is, with its content when it is
/// a document. `None` when it does not exist. `like` is any blob id of the repository (its
/// length says which hash it uses).
///
/// # Errors
/// When the engine fails.
pub async fn read(
    runtime: &dyn ContainerRuntime,
    id: &ContainerId,
    path: &str,
    like: &str,
) -> Result<Option<Found>, RuntimeError> {
    /// The first entry of the archive: the path itself.
    struct One<'a> {
        like: &'a str,
        keep: bool,
        entries: usize,
        found: Option<Found>,
        reading: Option<(BlobHasher, Option<Vec<u8>>)>,
    }
    impl tarstream::Visitor for One<'_> {
        fn entry(&mut self, entry: &tarstream::Entry) -> bool {
            self.entries += 1;
            if self.entries > 1 {
                return false;
            }
            match &entry.kind {
                EntryKind::File => {
                    let kept = (self.keep && entry.size <= DOCUMENT_CAP).then(Vec::new);
                    self.reading = Some((BlobHasher::new(entry.size, self.like), kept));
                    true
                }
                EntryKind::Symlink(target) => {
                    self.found = Some(Found::Symlink(target.clone()));
                    false
                }
                _ => {
                    self.found = Some(Found::Other);
                    false
                }
            }
        }
        fn data(&mut self, bytes: &[u8]) {
            if let Some((hasher, kept)) = &mut self.reading {
                hasher.update(bytes);
                if let Some(kept) = kept {
                    kept.extend_from_slice(bytes);
                }
            }
        }
        fn end(&mut self) {
            if let Some((hasher, content)) = self.reading.take() {
                self.found = Some(Found::File {
                    oid: hasher.finish(),
                    content,
                });
            }
        }
    }
    let mut one = One {
        like,
        keep: Tree::is_document(path),
        entries: 0,
        found: None,
        reading: None,
    };
    let mut reader = tarstream::Reader::new();
    let mut sink = |bytes: &[u8]| reader.push(bytes, &mut one);
    let absolute = format!("{WORKDIR}/{path}");
    if !runtime.stream_out(id, &absolute, &mut sink).await? {
        return Ok(None);
    }
    Ok(one.found)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A tree of `files` (path, content), its documents kept.
    pub(crate) fn tree(files: &[(&str, &str)]) -> Tree {
        Tree::new(
            files.iter().map(|(path, content)| {
                (
                    (*path).to_string(),
                    0o100_644,
                    blob_oid(content.as_bytes(), &"0".repeat(40)),
                )
            }),
            files
                .iter()
                .filter(|(p, _)| Tree::is_document(p))
                .map(|(p, c)| ((*p).to_string(), c.as_bytes().to_vec()))
                .collect(),
        )
    }

    #[test]
    fn blob_ids_are_gits() {
        // `printf 'hello\n' | git hash-object --stdin`
        assert_eq!(
            blob_oid(b"hello\n", &"0".repeat(40)),
            "ce013625030ba8dba906f756967f9e9ca394464a"
        );
        assert_eq!(blob_oid(b"", "x").len(), 40);
        assert_eq!(blob_oid(b"", &"0".repeat(64)).len(), 64);
    }

    #[test]
    fn untracked_files_are_listed_under_their_highest_new_directory() {
        let tree = tree(&[("src/pkg/a.py", "a"), ("README", "r")]);
        let listed = tree.collapse(&[
            "node_modules/x/index.js".into(),
            "node_modules/y/index.js".into(),
            "src/pkg/__pycache__/a.pyc".into(),
            "src/pkg/_version.py".into(),
            "build/lib/a.so".into(),
        ]);
        assert_eq!(
            listed,
            [
                "build/",
                "node_modules/",
                "src/pkg/__pycache__/",
                "src/pkg/_version.py"
            ]
        );
    }
}
