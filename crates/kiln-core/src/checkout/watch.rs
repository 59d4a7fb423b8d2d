//! What one command did (the launch agent's, a recipe's), and what a validation run's container
//! holds before its tests: read from the engine's list of changes and its files.

use std::collections::{BTreeMap, BTreeSet};

use super::scan::{Refusal, is_added_test_configuration};
use super::tree::{DOCUMENT_CAP, Found, Tree, read};
use crate::judge::{self, Content, FileChange};
use crate::runtime::WORKDIR;
use crate::tarstream::{self, EntryKind};
use crate::{ChangeKind, ContainerId, ContainerRuntime, FsChange, RuntimeError};

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
        let like = self.tree.like();
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
    let like = expected.tree.like();
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
