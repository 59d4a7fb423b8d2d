//! Build plans: what the repository's own files say about installing, building and testing it.
//!
//! Each ecosystem module offers `plan(&PlanContext) -> Option<Plan>`; [`choose`] asks them in
//! order and takes the first that recognises the repository. A plan is data (commands, image,
//! parser), so launch runs every plan the same way and the Dockerfile replays any of them.

use std::path::Path;

use kiln_core::ImageBuild;

use crate::python;

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
#[derive(Debug, Clone)]
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
}

/// Commands every plan runs first: git must accept the copied-in repository, and commits made
/// while patching need an identity.
pub const GIT_SETUP: &str = "git config --global --add safe.directory '*' && git config --global user.email kiln@localhost && git config --global user.name kiln";

/// The first plan that recognises the repository, or `None`.
#[must_use]
pub fn choose(cx: &PlanContext<'_>) -> Option<Plan> {
    let planners: &[fn(&PlanContext<'_>) -> Option<Plan>] = &[python::plan];
    planners.iter().find_map(|planner| planner(cx))
}
