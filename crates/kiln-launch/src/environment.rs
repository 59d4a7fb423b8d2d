//! What launch knows of the checkout, and the check of what an environment did to it.
//!
//! The environment adds dependencies; it never judges. So before launch commits an image
//! (whoever built it: the rules and their repairs, a recipe, the agent), the checkout in the
//! container is read whole from the engine and compared with the commit's tree
//! ([`kiln_core::checkout::scan`]): a tracked file changed or deleted is the launch's failure
//! (`environment-edits-checkout`) unless the plan's package manager is declared to rewrite it
//! (a lockfile), and test configuration added anywhere in the checkout, or a changed test file
//! or test setting, is refused (`environment-edits-tests`). The untracked files it added are the
//! row's `environment_files`, for a reviewer to see.

use std::sync::Arc;

use kiln_core::checkout::{self, Refusal, Tree};
use kiln_core::{ContainerId, ContainerRuntime, RuntimeError};
use kiln_schema::FailureClass;

/// At most this many untracked paths are listed in a row; the rest are counted.
const LISTED: usize = 200;

/// What the host learned of the checkout before any container: the commit's tree and the
/// paths the test patch changes (read from the tree applying it leaves, not its headers).
#[derive(Debug, Clone)]
pub(crate) struct Known {
    /// The base commit's tree.
    pub(crate) tree: Arc<Tree>,
    /// The paths the test patch changes.
    pub(crate) test_files: Vec<String>,
    /// File names the plan's package manager rewrites (lockfiles).
    pub(crate) rewrites: &'static [&'static str],
    /// The repository's language, as the row names it.
    pub(crate) language: &'static str,
}

impl Known {
    /// Reads the tree of `commit` in the checkout at `workdir`, and applies `test_patch` to a
    /// scratch checkout of it to learn what it changes; blocking (git). A test patch that
    /// applies nowhere leaves its files to its headers: validation rejects such an instance
    /// anyway.
    ///
    /// # Errors
    /// When git cannot read the checkout.
    pub(crate) fn read(
        workdir: &std::path::Path,
        commit: &str,
        test_patch: &str,
    ) -> Result<Self, kiln_git::GitError> {
        let tree = kiln_git::scratch::checkout_tree(workdir, commit)?;
        let test_files = if test_patch.trim().is_empty() {
            Vec::new()
        } else {
            let patched = kiln_git::scratch::apply_patches(
                workdir,
                commit,
                &[test_patch],
                kiln_core::apply::function(),
                &kiln_core::apply::applied_codes(),
            )?;
            match patched.steps.first() {
                Some((_, Some(after))) => patched
                    .diff(&patched.base, after)?
                    .into_iter()
                    .map(|d| d.path)
                    .collect(),
                _ => crate::plan::patch_files(test_patch),
            }
        };
        Ok(Self {
            tree: Arc::new(tree),
            test_files,
            rewrites: &[],
            language: "",
        })
    }
}

/// Reads the checkout of container `id` and judges it against `known`: `Ok(Ok(files))` with
/// the untracked files the environment added (collapsed by directory, at most [`LISTED`]),
/// `Ok(Err(..))` with the failure class and the reason.
///
/// # Errors
/// When the engine fails.
pub(crate) async fn check(
    runtime: &dyn ContainerRuntime,
    id: &ContainerId,
    known: &Known,
) -> Result<Result<Vec<String>, (FailureClass, String)>, RuntimeError> {
    let scan = checkout::scan(runtime, id, &known.tree).await?;
    Ok(
        match checkout::judge_scan(&known.tree, &scan, known.rewrites, known.language) {
            Ok(mut files) => {
                if files.len() > LISTED {
                    let more = files.len() - LISTED;
                    files.truncate(LISTED);
                    files.push(format!("… and {more} more"));
                }
                Ok(files)
            }
            Err(refusal) => Err((class(&refusal), refusal.reason().to_string())),
        },
    )
}

/// The failure class of a refusal.
pub(crate) fn class(refusal: &Refusal) -> FailureClass {
    match refusal {
        Refusal::Changed(_) => FailureClass::EnvironmentEditsCheckout,
        Refusal::TestConfiguration(_) | Refusal::Patched(_) => FailureClass::EnvironmentEditsTests,
    }
}
