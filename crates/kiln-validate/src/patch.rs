//! Patch application inside a container: `git apply`, then `git apply --3way`, then
//! `patch --fuzz`, with the tree restored between tries.

use std::time::Duration;

use kiln_core::{RuntimeError, Session};

/// The method that applied a patch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// `git apply`: exact context.
    GitApply,
    /// `git apply --3way`: merged against the blobs the patch names.
    ThreeWay,
    /// `patch --fuzz=5`: context found at an offset or with fuzz.
    Fuzz,
}

impl Method {
    /// Name recorded in the run summary.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::GitApply => "git-apply",
            Self::ThreeWay => "git-apply-3way",
            Self::Fuzz => "patch-fuzz",
        }
    }
}

const TIMEOUT: Duration = Duration::from_secs(120);

/// Applies the patch at `path` (inside the container) to the repository in the working
/// directory. Returns the method that worked, or `None` when none did; the tree is then as it
/// was before the call.
///
/// # Errors
/// Only engine failures.
pub async fn apply(session: &mut Session, path: &str) -> Result<Option<Method>, RuntimeError> {
    // Every try starts from the same tree: a stash of whatever earlier patches changed is taken
    // as the restore point (`git stash create` leaves the tree as it is).
    let snapshot = session
        .run("git add -A >/dev/null 2>&1; git stash create", TIMEOUT)
        .await?;
    let restore_point = snapshot.output.trim().to_string();
    let restore = if restore_point.is_empty() {
        "git reset --quiet --hard HEAD && git clean -fdq".to_string()
    } else {
        format!(
            "git reset --quiet --hard HEAD && git clean -fdq && git stash apply --index --quiet {restore_point}"
        )
    };
    let tries = [
        (
            Method::GitApply,
            format!("git apply --verbose --binary {path}"),
        ),
        (
            Method::ThreeWay,
            format!("git apply --verbose --binary --3way {path}"),
        ),
        (
            Method::Fuzz,
            format!("patch --batch --forward --fuzz=5 -p1 -i {path}"),
        ),
    ];
    for (i, (method, command)) in tries.iter().enumerate() {
        if i > 0 {
            session.run(&restore, TIMEOUT).await?;
        }
        let outcome = session.run(command, TIMEOUT).await?;
        if outcome.exit_code == 0 {
            // Unstage, so later diffs and the tests see a plain working tree.
            session.run("git reset --quiet", TIMEOUT).await?;
            return Ok(Some(*method));
        }
    }
    session.run(&restore, TIMEOUT).await?;
    session.run("git reset --quiet", TIMEOUT).await?;
    Ok(None)
}
