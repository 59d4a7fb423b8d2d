//! What an environment did to the repository's checkout, read from the engine.
//!
//! The invariant it keeps: what the tests see of the repository is the commit, plus the test
//! patch (plus the gold patch); the environment adds dependencies, never judges. Every check
//! reads the container's files as the engine hands them out (its archive and its list of
//! changes), so no command run in the container, and no tool inside it, can change what kiln
//! sees:
//! - [`scan`]: the whole checkout, streamed, against the commit's tree: the tracked files that
//!   differ or are gone, and the untracked files the environment added (launch, before the
//!   environment image is committed);
//! - [`Watch`]: what one command changed (the launch agent's and a recipe's commands): the
//!   files the test patch touches, the checkout's test configuration and shared manifests, and
//!   the paths the engine reports as new;
//! - [`check_run`]: a validation run's container after its patches and rebuild commands,
//!   against the tree the patches left on the host.
//!
//! Whether a change matters to the tests is [`crate::judge`]'s answer.

use std::collections::{BTreeMap, BTreeSet};

use crate::judge::{self, Content, FileChange};
use crate::runtime::WORKDIR;
use crate::tarstream::{self, EntryKind};
use crate::{ChangeKind, ContainerId, ContainerRuntime, FsChange, RuntimeError};

/// Git's mode of a symbolic link.
const MODE_SYMLINK: u32 = 0o120_000;
/// Git's mode of a submodule.
const MODE_GITLINK: u32 = 0o160_000;

/// Files kept whole when read from a container: documents to compare are small.
const DOCUMENT_CAP: u64 = 1 << 20;

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
    fn in_submodule(&self, path: &str) -> bool {
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
enum BlobHasher {
    Sha1(sha1::Sha1),
    Sha256(sha2::Sha256),
}

impl BlobHasher {
    fn new(size: u64, like: &str) -> Self {
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

    fn update(&mut self, bytes: &[u8]) {
        use sha2::Digest as _;
        match self {
            Self::Sha1(h) => h.update(bytes),
            Self::Sha256(h) => h.update(bytes),
        }
    }

    fn finish(self) -> String {
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
    fn matches(&self, tracked: &Tracked) -> bool {
        match self {
            Self::File { oid, .. } => tracked.mode != MODE_SYMLINK && *oid == tracked.oid,
            Self::Symlink(target) => {
                tracked.mode == MODE_SYMLINK
                    && blob_oid(target.as_bytes(), &tracked.oid) == tracked.oid
            }
            Self::Other => tracked.mode == MODE_GITLINK,
        }
    }

    fn content(&self) -> Option<Content<'_>> {
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
    let like = tree
        .files
        .values()
        .next()
        .map_or_else(String::new, |t| t.oid.clone());
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

/// The container's changes under the checkout, relative to it (`.git` left out).
fn checkout_changes(changes: &[FsChange]) -> BTreeMap<String, ChangeKind> {
    let prefix = format!("{WORKDIR}/");
    changes
        .iter()
        .filter_map(|c| {
            let path = c.path.strip_prefix(&prefix)?;
            (path != ".git" && !path.starts_with(".git/")).then(|| (path.to_string(), c.kind))
        })
        .collect()
}

/// Files outside the checkout that configure every Python process: a change to them is a
/// change of what judges the tests, whoever makes it.
fn is_interpreter_configuration(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path).to_ascii_lowercase();
    name == "sitecustomize.py" || name == "usercustomize.py"
}

/// A `.pth` file in a site directory: Python runs its `import` lines at every start.
fn is_site_pth(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    lower.ends_with(".pth")
        && (lower.contains("/site-packages/") || lower.contains("/dist-packages/"))
}

/// What a command may change outside the checkout: the engine's list of changes after it,
/// against the list before it. Refused: a `sitecustomize.py` or `usercustomize.py` added or
/// changed anywhere; a `.pth` file added to a site directory that no installed distribution's
/// `RECORD` there lists (pip and uv list every file they install, `.pth` files included).
async fn outside_effect(
    runtime: &dyn ContainerRuntime,
    id: &ContainerId,
    new: &[&FsChange],
) -> Result<Option<Refusal>, RuntimeError> {
    let prefix = format!("{WORKDIR}/");
    for change in new {
        if change.path.starts_with(&prefix) || change.kind == ChangeKind::Deleted {
            continue;
        }
        if is_interpreter_configuration(&change.path) {
            return Ok(Some(Refusal::TestConfiguration(format!(
                "{} configures every Python process the tests start",
                change.path
            ))));
        }
    }
    let pths: Vec<&str> = new
        .iter()
        .filter(|c| c.kind == ChangeKind::Added && is_site_pth(&c.path))
        .map(|c| c.path.as_str())
        .collect();
    let mut listed: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for pth in pths {
        let Some((site, name)) = pth.rsplit_once('/') else {
            continue;
        };
        if !listed.contains_key(site) {
            listed.insert(site, recorded_files(runtime, id, site).await?);
        }
        if !listed.get(site).is_some_and(|files| files.contains(name)) {
            return Ok(Some(Refusal::TestConfiguration(format!(
                "{pth} runs code at every Python start and no installed distribution lists it"
            ))));
        }
    }
    Ok(None)
}

/// The files the installed distributions of the site directory `site` list in their
/// `*.dist-info/RECORD` (the first column, relative to `site`), read from the engine's archive
/// of the directory.
async fn recorded_files(
    runtime: &dyn ContainerRuntime,
    id: &ContainerId,
    site: &str,
) -> Result<BTreeSet<String>, RuntimeError> {
    struct Records {
        files: BTreeSet<String>,
        current: Option<Vec<u8>>,
    }
    impl tarstream::Visitor for Records {
        fn entry(&mut self, entry: &tarstream::Entry) -> bool {
            // `site-packages/<name>.dist-info/RECORD`
            let parts: Vec<&str> = entry.path.split('/').collect();
            let wanted = entry.kind == EntryKind::File
                && entry.size <= DOCUMENT_CAP
                && parts.len() == 3
                && parts[1].ends_with(".dist-info")
                && parts[2] == "RECORD";
            self.current = wanted.then(Vec::new);
            wanted
        }
        fn data(&mut self, bytes: &[u8]) {
            if let Some(current) = &mut self.current {
                current.extend_from_slice(bytes);
            }
        }
        fn end(&mut self) {
            if let Some(record) = self.current.take() {
                for line in String::from_utf8_lossy(&record).lines() {
                    if let Some(path) = line.split(',').next() {
                        self.files.insert(path.to_string());
                    }
                }
            }
        }
    }
    let mut records = Records {
        files: BTreeSet::new(),
        current: None,
    };
    let mut reader = tarstream::Reader::new();
    let mut sink = |bytes: &[u8]| reader.push(bytes, &mut records);
    runtime.stream_out(id, site, &mut sink).await?;
    Ok(records.files)
}

/// The checks of one command's effect (the launch agent's, a recipe's): what it may not do to
/// the checkout and to the interpreter, read from the engine after it ran.
#[derive(Debug)]
pub struct Watch {
    tree: std::sync::Arc<Tree>,
    /// Files the test patch touches.
    test_files: Vec<String>,
    language: String,
    /// The engine's changes before the command.
    before: BTreeSet<FsChange>,
}

impl Watch {
    /// A watch over a checkout of `tree`, whose test patch touches `test_files`.
    #[must_use]
    pub fn new(tree: std::sync::Arc<Tree>, test_files: Vec<String>, language: &str) -> Self {
        Self {
            tree,
            test_files,
            language: language.to_string(),
            before: BTreeSet::new(),
        }
    }

    /// Notes the container's changes before a command runs.
    ///
    /// # Errors
    /// When the engine fails.
    pub async fn before(
        &mut self,
        runtime: &dyn ContainerRuntime,
        id: &ContainerId,
    ) -> Result<(), RuntimeError> {
        self.before = runtime.changes(id).await?.into_iter().collect();
        Ok(())
    }

    /// Why the command that ran since [`Watch::before`] is refused, from what it did:
    /// it changed a file the test patch touches (or created one), added test configuration to
    /// the checkout, changed a test setting of a tracked manifest, or configured the
    /// interpreter outside the checkout.
    ///
    /// # Errors
    /// When the engine fails.
    pub async fn after(
        &self,
        runtime: &dyn ContainerRuntime,
        id: &ContainerId,
    ) -> Result<Observed, RuntimeError> {
        let now = runtime.changes(id).await?;
        let new: Vec<&FsChange> = now.iter().filter(|c| !self.before.contains(*c)).collect();
        let gone = self.before.iter().any(|c| !now.iter().any(|n| n == c));
        let refusal = self.refusal(runtime, id, &now, &new).await?;
        Ok(Observed {
            refusal,
            changed: !new.is_empty() || gone,
        })
    }

    async fn refusal(
        &self,
        runtime: &dyn ContainerRuntime,
        id: &ContainerId,
        now: &[FsChange],
        new: &[&FsChange],
    ) -> Result<Option<Refusal>, RuntimeError> {
        let like = self
            .tree
            .files
            .values()
            .next()
            .map_or_else(String::new, |t| t.oid.clone());
        // The files the test patch touches, and the checkout's documents: read each, whatever
        // the engine's list says (a file copied in with the checkout is `added` already).
        let mut watched: BTreeSet<&str> = self.test_files.iter().map(String::as_str).collect();
        watched.extend(self.tree.paths().filter(|p| Tree::is_document(p)));
        for path in watched {
            let found = read(runtime, id, path, &like).await?;
            let same = match (self.tree.get(path), &found) {
                (Some(tracked), Some(found)) => found.matches(tracked),
                (None, None) => true,
                _ => false,
            };
            if same {
                continue;
            }
            if self.test_files.iter().any(|f| f == path) {
                return Ok(Some(Refusal::TestConfiguration(format!(
                    "the command changed {path}, a file the instance's test patch touches; the \
                     tests must run as the patch leaves them"
                ))));
            }
            let change = FileChange {
                path,
                before: self.tree.document(path).map(Content::File),
                after: found.as_ref().and_then(Found::content),
            };
            if let Some(why) = judge::judge(&change, &self.language) {
                return Ok(Some(Refusal::TestConfiguration(format!(
                    "the command changed {why}; an environment must run the tests as the \
                     repository configures them"
                ))));
            }
        }
        let checkout = checkout_changes(now);
        for change in new {
            let Some(path) = change.path.strip_prefix(&format!("{WORKDIR}/")) else {
                continue;
            };
            if checkout.get(path) == Some(&ChangeKind::Added)
                && self.tree.get(path).is_none()
                && is_added_test_configuration(path)
            {
                return Ok(Some(Refusal::TestConfiguration(format!(
                    "the command added test configuration to the checkout: {path}"
                ))));
            }
        }
        outside_effect(runtime, id, new).await
    }
}

/// What a [`Watch`] saw a command do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    /// Why the command is refused, if it is.
    pub refusal: Option<Refusal>,
    /// Whether the engine lists a change the command made (a file added, changed or deleted
    /// that was not listed before). A file changed again after an earlier change is not seen
    /// here; the refusal reads the files it watches whatever this says.
    pub changed: bool,
}

/// What a validation run's container must hold before its tests start: the tree the run's
/// patches left on the host (the commit's tree when it applies none).
#[derive(Debug, Clone, Copy)]
pub struct Expected<'a> {
    /// The tree after the run's patches.
    pub tree: &'a Tree,
    /// The paths the patches changed.
    pub patched: &'a BTreeSet<String>,
    /// The repository's language.
    pub language: &'a str,
}

/// Checks a validation run's container after its patches and rebuild commands, before its
/// tests: the files the patches changed are as the host's apply left them, no test file, test
/// configuration or test setting of the checkout differs from the tree, no test configuration
/// was added, and nothing configures the interpreter outside the checkout. Other tracked files
/// a rebuild command rewrites (build output kept in the repository) are the build's.
///
/// # Errors
/// When the engine fails.
pub async fn check_run(
    runtime: &dyn ContainerRuntime,
    id: &ContainerId,
    expected: Expected<'_>,
) -> Result<Option<Refusal>, RuntimeError> {
    let like = expected
        .tree
        .files
        .values()
        .next()
        .map_or_else(String::new, |t| t.oid.clone());
    for path in expected.patched {
        let found = read(runtime, id, path, &like).await?;
        let same = match (expected.tree.get(path), &found) {
            (Some(tracked), Some(found)) => found.matches(tracked),
            (None, None) => true,
            _ => false,
        };
        if !same {
            return Ok(Some(Refusal::Patched(format!(
                "{path} is not as the patches left it when kiln applied them on the host"
            ))));
        }
    }
    let changes = runtime.changes(id).await?;
    for (path, kind) in checkout_changes(&changes) {
        if expected.patched.contains(&path) || expected.tree.in_submodule(&path) {
            continue;
        }
        match expected.tree.get(&path) {
            None => {
                if kind == ChangeKind::Added && is_added_test_configuration(&path) {
                    return Ok(Some(Refusal::TestConfiguration(format!(
                        "a rebuild command added test configuration to the checkout: {path}"
                    ))));
                }
            }
            Some(tracked) => {
                let judged = Tree::is_document(&path)
                    || crate::paths::is_test_path(&path, expected.language);
                if !judged {
                    continue;
                }
                let found = if kind == ChangeKind::Deleted {
                    None
                } else {
                    read(runtime, id, &path, &like).await?
                };
                if found.as_ref().is_some_and(|f| f.matches(tracked)) {
                    continue;
                }
                let change = FileChange {
                    path: &path,
                    before: expected.tree.document(&path).map(Content::File),
                    after: found.as_ref().and_then(Found::content),
                };
                if let Some(why) = judge::judge(&change, expected.language) {
                    return Ok(Some(Refusal::TestConfiguration(format!(
                        "a rebuild command changed {why}"
                    ))));
                }
            }
        }
    }
    let all: Vec<&FsChange> = changes.iter().collect();
    outside_effect(runtime, id, &all).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> Tree {
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
