//! Build plans: what the repository's own files say about installing, building and testing it.
//!
//! Each ecosystem module offers `plan(&PlanContext) -> Option<Plan>`; [`choose`] asks them in
//! order and takes the first that recognises the repository. A plan is data (commands, image,
//! parser), so launch runs every plan the same way and the Dockerfile replays any of them.

use std::path::Path;

use kiln_core::ImageBuild;

use crate::{go, java, native, node, python, rust};

/// What a plan may look at.
#[derive(Debug, Clone, Copy)]
pub struct PlanContext<'a> {
    /// The checkout at the base commit, on the host.
    pub root: &'a Path,
    /// Dependency cut-off (RFC 3339): unpinned dependencies resolve as of this date.
    pub cutoff: Option<&'a str>,
    /// CA bundle to install in the plan's image.
    pub ca_bundle: Option<&'a [u8]>,
}

/// A deterministic build plan.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// Plan name recorded in the environment row (`python-pyproject`, ...).
    pub name: String,
    /// Ecosystem (`python`, ...).
    pub language: &'static str,
    /// The base image to start from.
    pub image: ImageBuild,
    /// Why this image (and toolchain version) was chosen.
    pub version_reason: String,
    /// Setup commands, run in order from the repository root; all must succeed.
    pub setup: Vec<String>,
    /// Commands to re-run after the source changes, before the tests.
    pub rebuild: Vec<String>,
    /// The test command.
    pub test: String,
    /// The kiln-testlog parser that reads the test command's output.
    pub parser: &'static str,
    /// How dependency versions are fixed: the lockfile that pins them, the cut-off applied, or
    /// why none could be (`Cargo.lock pins every crate`, `npm install --before ...`).
    pub resolution: String,
    /// The dependency cut-off the commands actually apply, when they apply one; `None` when a
    /// lockfile pins the versions or the ecosystem offers no way to resolve as of a date.
    pub cutoff: Option<String>,
}

/// Commands every plan runs first: git must accept the copied-in repository, and commits made
/// while patching need an identity.
pub const GIT_SETUP: &str = "git config --global --add safe.directory '*' && git config --global user.email kiln@localhost && git config --global user.name kiln";

/// The first plan that recognises the repository, or `None`.
#[must_use]
pub fn choose(cx: &PlanContext<'_>) -> Option<Plan> {
    // Python first (a repository with bindings in several languages is most often tested from
    // Python), then the order of the brief: Rust, Node, Go, C/C++, Java. Within C/C++ the
    // build systems go from the most to the least structured.
    let planners: &[fn(&PlanContext<'_>) -> Option<Plan>] = &[
        python::plan,
        rust::plan,
        node::plan,
        go::plan,
        native::plan,
        java::plan,
    ];
    planners.iter().find_map(|planner| planner(cx))
}

/// The contents of `name` under `root`, when it is a readable text file.
pub(crate) fn read(root: &Path, name: &str) -> Option<String> {
    std::fs::read_to_string(root.join(name)).ok()
}

/// Quotes `text` for a POSIX shell.
pub(crate) fn shell_quote(text: &str) -> String {
    if !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:@,+".contains(c))
    {
        return text.to_string();
    }
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// The date part (`YYYY-MM-DD`) of an RFC 3339 cut-off.
pub(crate) fn cutoff_day(cutoff: &str) -> &str {
    cutoff.get(..10).unwrap_or(cutoff)
}

#[cfg(test)]
pub(crate) mod testutil {
    //! Temporary project trees for the planners' unit tests.

    /// Writes `files` (path, contents) under a new temporary directory.
    pub(crate) fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        for (name, text) in files {
            let path = tmp.path().join(name);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).unwrap_or_else(|e| panic!("{e}"));
            }
            std::fs::write(path, text).unwrap_or_else(|e| panic!("{e}"));
        }
        tmp
    }

    /// The plan of `planner` for a tree of `files`.
    pub(crate) fn plan_of(
        planner: fn(&super::PlanContext<'_>) -> Option<super::Plan>,
        files: &[(&str, &str)],
        cutoff: Option<&str>,
    ) -> Option<super::Plan> {
        let tmp = tree(files);
        planner(&super::PlanContext {
            root: tmp.path(),
            cutoff,
            ca_bundle: None,
        })
    }
}
