//! What a gold patch may change, judged by its effect before any run: code, not the tests that
//! judge it.
//!
//! A task set from the wild (someone else's task file, a crawl of hostile pull requests) can
//! carry a gold patch that makes tests pass by editing the tests or their configuration: a
//! `conftest.py` hook that turns every failed report into a pass validates with any number of
//! FAIL_TO_PASS tests. So the test patch and the gold patch are applied on the host, to a
//! scratch checkout of the base commit, with the chain validation applies them with
//! ([`kiln_core::apply`]), and what each changed is read from the trees git writes: added,
//! deleted, renamed (a deletion and an addition), mode-changed and symlinked paths alike,
//! whatever the patch's headers say. Each path the gold patch changes, with its content before
//! and after, goes to [`kiln_core::judge`]:
//! - `gold-edits-tests`: it changes a path the test patch changes, a test file, test
//!   configuration, or a test setting of a shared manifest (compared as documents), directly or
//!   through a tracked symbolic link that names it;
//! - `gold-without-code`: every line it changes is blank, a comment, or in documentation.
//!
//! The trees are kept ([`Effect`]): every validation run checks that its container holds what
//! the host's apply left ([`kiln_core::checkout::check_run`]).

use std::collections::BTreeSet;
use std::path::PathBuf;

use kiln_core::checkout::Tree;
use kiln_core::judge::{self, Content, FileChange};
use kiln_git::scratch::{MODE_GITLINK, MODE_SYMLINK, Patched, TreeDiff};
use kiln_schema::FailureClass;

/// Where the repository's history is: the mirror cache and the clone URL of the repository.
#[derive(Debug, Clone)]
pub struct Source {
    /// The mirror cache's directory (launch's).
    pub mirrors: PathBuf,
    /// The repository's clone URL (or local path).
    pub clone_url: String,
}

/// One side's tree: the base commit's with the side's patches applied on the host.
#[derive(Debug, Clone, Default)]
pub struct Side {
    /// The tree, with its documents.
    pub tree: Tree,
    /// The paths the side's patches changed.
    pub patched: BTreeSet<String>,
}

/// What the patches do, as the host applied them.
#[derive(Debug, Clone, Default)]
pub struct Effect {
    /// The base commit (no patch).
    pub base: Side,
    /// With the test patch.
    pub before: Side,
    /// With the test patch and the gold patch.
    pub after: Side,
    /// The files the test patch changes, as both patches leave them (path and content; files
    /// over the content cap and deleted files left out): what the tests define is read there.
    pub test_sources: Vec<(String, Vec<u8>)>,
}

/// Files read whole to judge a change: manifests and code files are small.
const CONTENT_CAP: usize = 1 << 20;

/// A changed path with both sides' contents, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changed {
    /// The path.
    pub path: String,
    /// Before (mode and content; `None`: absent).
    pub before: Option<(u32, Vec<u8>)>,
    /// After.
    pub after: Option<(u32, Vec<u8>)>,
}

impl Changed {
    fn change(&self) -> FileChange<'_> {
        fn side(s: &Option<(u32, Vec<u8>)>) -> Option<Content<'_>> {
            s.as_ref().map(|(mode, bytes)| match *mode {
                MODE_SYMLINK => Content::Symlink(std::str::from_utf8(bytes).unwrap_or_default()),
                MODE_GITLINK => Content::Other,
                _ => Content::File(bytes),
            })
        }
        FileChange {
            path: &self.path,
            before: side(&self.before),
            after: side(&self.after),
        }
    }
}

/// Applies the candidate's test patch and gold patch to a scratch checkout of `commit` and
/// judges the gold patch by what it changed; blocking (git). `Err` is the row's failure: a
/// patch that applies nowhere (`patch-apply`), a gold patch that edits the tests or changes no
/// code, or a repository kiln cannot read (`infra`).
///
/// # Errors
/// The failure class and the reason.
pub fn examine(
    source: &Source,
    repo: &str,
    commit: &str,
    test_patch: &str,
    gold_patch: &str,
    language: &str,
) -> Result<Effect, (FailureClass, String)> {
    let infra = |e: kiln_git::GitError| {
        (
            FailureClass::Infra,
            format!("the gold patch could not be examined on a checkout of the base commit: {e}"),
        )
    };
    let mirrors = kiln_git::MirrorCache::new(&source.mirrors).map_err(infra)?;
    let mirror = mirrors
        .ensure(repo, &source.clone_url, &[commit])
        .map_err(infra)?;
    let patches: Vec<&str> = [test_patch, gold_patch]
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .collect();
    let patched = kiln_git::scratch::apply_patches(
        &mirror,
        commit,
        &patches,
        kiln_core::apply::function(),
        &kiln_core::apply::applied_codes(),
    )
    .map_err(infra)?;
    let names: Vec<&str> = [("test", test_patch), ("gold", gold_patch)]
        .into_iter()
        .filter(|(_, p)| !p.trim().is_empty())
        .map(|(name, _)| name)
        .collect();
    let mut trees = vec![patched.base.clone()];
    for (n, (_, tree)) in patched.steps.iter().enumerate() {
        match tree {
            Some(tree) => trees.push(tree.clone()),
            None => {
                return Err((
                    FailureClass::PatchApply,
                    format!(
                        "the {} patch applies to a checkout of the base commit with none of git \
                         apply, git apply --3way, patch --fuzz",
                        names.get(n).copied().unwrap_or("")
                    ),
                ));
            }
        }
    }
    let has_test = !test_patch.trim().is_empty();
    let base = patched.base.clone();
    let before = if has_test {
        trees[1].clone()
    } else {
        base.clone()
    };
    let after = trees.last().cloned().unwrap_or_else(|| base.clone());
    let test_paths: BTreeSet<String> = paths(&patched.diff(&base, &before).map_err(infra)?);
    let gold = patched.diff(&before, &after).map_err(infra)?;
    let changed = contents(&patched, &gold).map_err(infra)?;
    let after_entries = patched.entries(&after).map_err(infra)?;
    // What the after tree's symbolic links point at, and the test patch's files as the tests
    // will read them, in one read of the blobs.
    let read: Vec<&kiln_git::scratch::TreeEntry> = after_entries
        .iter()
        .filter(|e| {
            e.mode == MODE_SYMLINK || (test_paths.contains(&e.path) && e.mode != MODE_GITLINK)
        })
        .collect();
    let oids: Vec<&str> = read.iter().map(|e| e.oid.as_str()).collect();
    let blobs = patched.blobs(&oids).map_err(infra)?;
    let (links, tests): (Vec<_>, Vec<_>) = read
        .into_iter()
        .filter_map(|e| Some((e, blobs.get(&e.oid)?)))
        .partition(|(e, _)| e.mode == MODE_SYMLINK);
    let symlinks: Vec<(String, String)> = links
        .into_iter()
        .map(|(e, target)| (e.path.clone(), String::from_utf8_lossy(target).into_owned()))
        .collect();
    if let Some(rejection) = judge_gold(&changed, &test_paths, &symlinks, language) {
        return Err(rejection);
    }
    let side = |tree: &str, patched_paths: BTreeSet<String>| -> Result<Side, kiln_git::GitError> {
        Ok(Side {
            tree: patched.tree(tree)?,
            patched: patched_paths,
        })
    };
    let after_paths = paths(&patched.diff(&base, &after).map_err(infra)?);
    let test_sources = tests
        .into_iter()
        .filter(|(_, content)| content.len() <= CONTENT_CAP)
        .map(|(e, content)| (e.path.clone(), content.clone()))
        .collect();
    Ok(Effect {
        base: side(&base, BTreeSet::new()).map_err(infra)?,
        before: side(&before, test_paths).map_err(infra)?,
        after: side(&after, after_paths).map_err(infra)?,
        test_sources,
    })
}

fn paths(diffs: &[TreeDiff]) -> BTreeSet<String> {
    diffs.iter().map(|d| d.path.clone()).collect()
}

/// The gold patch's changed paths with their contents (a file over [`CONTENT_CAP`] stands for
/// its blob id: it counts as code, and a manifest that large is compared by id, as text).
fn contents(patched: &Patched, diffs: &[TreeDiff]) -> Result<Vec<Changed>, kiln_git::GitError> {
    let oids: Vec<&str> = diffs
        .iter()
        .flat_map(|d| [&d.old, &d.new])
        .flatten()
        .filter(|(mode, _)| *mode != MODE_GITLINK)
        .map(|(_, oid)| oid.as_str())
        .collect();
    let blobs = patched.blobs(&oids)?;
    let side = |s: &Option<(u32, String)>| {
        s.as_ref().map(|(mode, oid)| {
            let content = blobs
                .get(oid)
                .filter(|b| b.len() <= CONTENT_CAP)
                .cloned()
                .unwrap_or_else(|| oid.as_bytes().to_vec());
            (*mode, content)
        })
    };
    Ok(diffs
        .iter()
        .map(|d| Changed {
            path: d.path.clone(),
            before: side(&d.old),
            after: side(&d.new),
        })
        .collect())
}

/// Where a symbolic link at `link` with `target` points, relative to the repository root;
/// `None` when it leaves the repository.
fn resolve(link: &str, target: &str) -> Option<String> {
    if target.starts_with('/') {
        return None;
    }
    let mut parts: Vec<&str> = link.split('/').collect();
    parts.pop();
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            part => parts.push(part),
        }
    }
    Some(parts.join("/"))
}

/// Why the gold patch may not be used, from what it changed: `changed` (its paths, with
/// contents), `test_paths` (what the test patch changed) and the tracked symbolic links after
/// it (`(link, target)`), through which a path can be read under another name.
#[must_use]
pub fn judge_gold(
    changed: &[Changed],
    test_paths: &BTreeSet<String>,
    symlinks: &[(String, String)],
    language: &str,
) -> Option<(FailureClass, String)> {
    let edits_tests = |reason: String| Some((FailureClass::GoldEditsTests, reason));
    for change in changed {
        let path = &change.path;
        if test_paths.contains(path) {
            return edits_tests(format!(
                "the gold patch edits {path}, which the test patch edits too"
            ));
        }
        if let Some(why) = judge::judge(&change.change(), language) {
            return edits_tests(format!("the gold patch changes {why}"));
        }
        // The same file under the name of a link to it (or to a directory above it).
        for (link, target) in symlinks {
            let Some(target) = resolve(link, target) else {
                continue;
            };
            let alias = if *path == target {
                link.clone()
            } else if let Some(rest) = path.strip_prefix(&format!("{target}/")) {
                format!("{link}/{rest}")
            } else {
                continue;
            };
            let aliased = Changed {
                path: alias.clone(),
                ..change.clone()
            };
            if let Some(why) = judge::judge(&aliased.change(), language) {
                return edits_tests(format!(
                    "the gold patch changes {path}, which is {why} through the link {link}"
                ));
            }
        }
    }
    if !changed.is_empty() && !changed.iter().any(|c| judge::changes_code(&c.change())) {
        return Some((
            FailureClass::GoldWithoutCode,
            "the gold patch changes no code: only comments, blank lines or documentation".into(),
        ));
    }
    None
}

/// The side's expected tree for a run that applies `patches` by name.
#[must_use]
pub fn side<'a>(effect: &'a Effect, patches: &[(&str, &str)]) -> &'a Side {
    let names: BTreeSet<&str> = kiln_core::apply::non_empty(patches)
        .iter()
        .map(|(n, _)| *n)
        .collect();
    if names.contains("gold") {
        &effect.after
    } else if names.contains("test") {
        &effect.before
    } else {
        &effect.base
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, before: Option<&str>, after: Option<&str>) -> Changed {
        let side = |s: Option<&str>| s.map(|t| (0o100_644, t.as_bytes().to_vec()));
        Changed {
            path: path.into(),
            before: side(before),
            after: side(after),
        }
    }

    fn judged(changed: &[Changed]) -> Option<(FailureClass, String)> {
        let tests = BTreeSet::from(["tests/test_x.py".to_string()]);
        judge_gold(changed, &tests, &[], "python")
    }

    #[test]
    fn code_changes_pass() {
        assert_eq!(
            judged(&[file("src/x.py", Some("x = 1\n"), Some("x = 2\n"))]),
            None
        );
        assert_eq!(
            judged(&[
                file("CHANGELOG.md", Some("a\n"), Some("a\nb\n")),
                file("src/x.py", Some("x = 1\n"), Some("x = 2\n")),
                file(
                    "package.json",
                    Some("{\"dependencies\": {\"left-pad\": \"1.0.0\"}}"),
                    Some("{\"dependencies\": {\"left-pad\": \"1.0.1\"}}")
                ),
            ]),
            None
        );
    }

    #[test]
    fn edits_of_tests_their_configuration_or_the_test_patch_files_are_refused() {
        for (change, expected) in [
            (
                file("tests/test_x.py", Some("a\n"), Some("b\n")),
                "which the test patch edits too",
            ),
            (
                file("tests/helpers.py", Some("a\n"), Some("b\n")),
                "test file",
            ),
            (
                file("pkg/conftest.py", None, Some("import x\n")),
                "test configuration pkg/conftest.py",
            ),
            (
                file(
                    "setup.cfg",
                    Some("[tool:pytest]\naddopts =\n    -ra\n"),
                    Some("[tool:pytest]\naddopts =\n    -ra\n    -p pkg._forcepass\n"),
                ),
                "a test setting in setup.cfg",
            ),
        ] {
            let got = judged(&[file("src/x.py", Some("1\n"), Some("2\n")), change]);
            match got {
                Some((FailureClass::GoldEditsTests, reason)) => {
                    assert!(reason.contains(expected), "{reason} / {expected}");
                }
                other => panic!("{expected}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_file_read_as_test_configuration_through_a_link_is_refused() {
        let links = vec![("conftest.py".to_string(), "src/plugin.py".to_string())];
        let got = judge_gold(
            &[file("src/plugin.py", Some("a\n"), Some("b\n"))],
            &BTreeSet::new(),
            &links,
            "python",
        );
        assert!(
            matches!(&got, Some((FailureClass::GoldEditsTests, r)) if r.contains("through the link conftest.py")),
            "{got:?}"
        );
        assert_eq!(resolve("a/b/link", "../c"), Some("a/c".into()));
        assert_eq!(resolve("link", "../outside"), None);
    }

    #[test]
    fn gold_patches_without_code_are_refused() {
        for changed in [
            vec![file("src/x.py", Some("x = 1\n"), Some("# new\nx = 1\n\n"))],
            vec![file("README.md", None, Some("fixed\n"))],
        ] {
            assert!(
                matches!(judged(&changed), Some((FailureClass::GoldWithoutCode, _))),
                "{changed:?}"
            );
        }
    }
}
