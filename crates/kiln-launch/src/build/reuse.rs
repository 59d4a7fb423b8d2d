//! Environment reuse: where a launch starts when an earlier commit's environment of the same
//! plan is there (the nearest ancestor's), the delta that turns its checkout into this one's,
//! and the scripts that put the checkout in place in the container.

use std::time::Duration;

use kiln_core::{RuntimeError, Session};
use kiln_schema::FailureClass;

use crate::ecosystems;
use crate::plan::{Plan, PlanContext};
use crate::request::{LaunchRequest, ReuseSource};
use crate::steps;
use crate::verify::Failure;

/// Where a reused launch starts.
pub(super) struct Start {
    pub(super) source: ReuseSource,
    /// What the source's checkout lacks, when that is known.
    pub(super) delta: Option<Delta>,
    /// The plan made with the source's dependency cut-off, when no dependency manifest changed
    /// since its commit (and the plan is otherwise the same): what the source resolved stands,
    /// and the setup steps it ran whose inputs did not change are not run again. `None`:
    /// everything runs again, resolved as a cold launch resolves. (With changed manifests the
    /// source's older date is no choice: a requirement raised since may have no release before
    /// it, seen on serde, where `trybuild ^1.0.97` then resolved to a release for a newer rustc.)
    pub(super) kept: Option<Plan>,
}

/// What turns an earlier commit's checkout into this one's: the objects this commit's history
/// adds and its refs ([`kiln_git::HistoryDelta`], a tar under [`DELTA_DIR`]), applied in the
/// container by git, which writes only the files that differ. Unchanged files keep their
/// times, so the build outputs of the earlier commit stay up to date for them.
pub(super) struct Delta {
    pub(super) tar: Vec<u8>,
    /// The paths this commit added, changed or deleted since the earlier one.
    pub(super) changed: Vec<String>,
}

/// Where a [`Delta`] is unpacked in the container (and removed once applied).
pub(super) const DELTA_DIR: &str = "/tmp/kiln-reuse";

/// Where a launch of the checkout at `workdir` (planned as `plan`) starts: the environment of
/// the nearest ancestor of the same plan, if any, and what it lacks.
pub(super) fn start(
    workdir: &std::path::Path,
    plan_cx: &PlanContext<'_>,
    plan: &Plan,
    request: &LaunchRequest,
) -> Option<Start> {
    let base = &request.candidate.base_commit;
    let source = nearest_ancestor(workdir, base, plan, &request.reuse)?;
    let delta = delta(workdir, &source.base_commit, base);
    let kept = delta
        .as_ref()
        .filter(|d| !d.changed.iter().any(|p| steps::is_dependency_manifest(p)))
        .and_then(|_| {
            if source.cutoff == plan.cutoff {
                return Some(plan.clone());
            }
            // A source resolved without a cut-off (a lockfile pinned it) says nothing about a
            // date to resolve this commit at.
            source.cutoff.as_ref()?;
            let (_, kept) = ecosystems::choose(&PlanContext {
                cutoff: source.cutoff.as_deref(),
                ..*plan_cx
            })?;
            (kept.name == plan.name
                && kept.image.tag == plan.image.tag
                && kept.cutoff == source.cutoff)
                .then_some(kept)
        });
    Some(Start {
        source,
        delta,
        kept,
    })
}

/// The [`Delta`] from the checkout of `older` to the one at `workdir` (of `newer`); `None`
/// when a submodule changed (its contents are not in this repository) or the history cannot
/// be packed (a shallow checkout): the whole checkout is copied then.
pub(super) fn delta(workdir: &std::path::Path, older: &str, newer: &str) -> Option<Delta> {
    let changes = kiln_git::tree_changes(workdir, older, newer)?;
    let history = kiln_git::history_delta(workdir, older, newer)?;
    let tar = kiln_core::session::tar_files(&[
        (format!("{DELTA_DIR}/pack"), history.pack.as_slice()),
        (format!("{DELTA_DIR}/refs"), history.refs.as_bytes()),
    ])
    .ok()?;
    let mut changed = changes.written;
    changed.extend(changes.deleted);
    Some(Delta { tar, changed })
}

/// Of the environments of the same plan on the same base image, the one whose base commit is
/// the nearest ancestor of `base` in the checkout at `workdir`: nothing of a later commit may
/// reach this instance's environment, so a commit that is not an ancestor is never a source.
pub(super) fn nearest_ancestor(
    workdir: &std::path::Path,
    base: &str,
    plan: &Plan,
    sources: &[ReuseSource],
) -> Option<ReuseSource> {
    sources
        .iter()
        .filter(|s| s.plan == plan.name && s.base_image == plan.image.tag)
        .filter_map(|s| kiln_git::commits_ahead(workdir, &s.base_commit, base).map(|n| (n, s)))
        .min_by_key(|(n, _)| *n)
        .map(|(_, s)| s.clone())
}

/// How a reused attempt starts.
#[derive(Clone, Copy)]
pub(super) struct Reused<'a> {
    /// The archive is a [`Delta`] (else the whole checkout).
    pub(super) delta: bool,
    /// With the source's dependencies kept: the source, and the paths changed since its
    /// commit. A setup step the source ran as it is, none of whose inputs changed, is not run
    /// again.
    pub(super) skip: Option<(&'a ReuseSource, &'a [String])>,
}

/// Removes an earlier commit's checkout from a reused environment: its tracked files and its
/// `.git` (the new checkout brings its own); what the build left (`target/`, `node_modules/`,
/// build directories, caches) stays for the setup steps to reuse.
pub(super) const CLEAR_CHECKOUT: &str = "cd /testbed && git ls-files -z | xargs -0 -r rm -f -- && rm -rf .git \
     && find . -mindepth 1 -depth -type d -empty -delete";

/// Runs a script that turns a reused environment's checkout into this one's; `Some` failure
/// when it did not work (the launch then goes cold).
pub(super) async fn run_checkout_script(
    session: &mut Session,
    script: &str,
) -> Result<Option<Failure>, RuntimeError> {
    let outcome = session.run(script, Duration::from_secs(600)).await?;
    Ok((outcome.exit_code != 0)
        .then(|| Failure::new(FailureClass::Build, Some(script), &outcome.output)))
}
