//! The host's part of a launch, before any container: the checkout (borrowed from the mirror
//! when an earlier environment may be reused), the commit's date and tree, the plan, the
//! version and licence, and the checkout packed for the container.

use kiln_core::runtime::WORKDIR;
use kiln_schema::FailureClass;

use super::checkout::{Checkout, check_out, whole_archive};
use super::error::LaunchError;
use super::phases::Phases;
use super::reuse::{Start, start};
use crate::ecosystems::{self, Ecosystem};
use crate::environment::Known;
use crate::plan::{Plan, PlanContext, TestScope};
use crate::request::LaunchRequest;
use crate::verify::Failure;
use crate::{about, repo};

/// What the host prepares before any container: the plan of the checkout and the checkout
/// packed for the container.
pub(super) struct Prepared {
    pub(super) ecosystem: Ecosystem,
    pub(super) plan: Plan,
    /// What the checkout did beyond a plain clone (tags kept, submodules missing).
    pub(super) checkout_note: Option<String>,
    /// The checkout as a tar archive whose entries sit under `testbed/`; `None` when the
    /// checkout borrowed the mirror's objects ([`Checkout::Borrowed`]): it is made and packed
    /// whole only if the launch goes cold.
    pub(super) tar: Option<Vec<u8>>,
    /// The repository's version (`major.minor`) and licence at the base commit.
    pub(super) version: Option<String>,
    pub(super) license: String,
    /// The environment to start from (`reuse`): the nearest ancestor's of the same plan.
    pub(super) reuse: Option<Start>,
    /// The commit's tree and the test patch's files.
    pub(super) known: Known,
}

/// Runs [`prepare`] off the async workers (git, possibly a wait for another launch cloning the
/// same repository, a walk of the tree, packing it), with the phases it timed.
///
/// # Errors
/// The host's failures, and a blocking task that did not finish.
pub(super) async fn on_host(
    request: &LaunchRequest,
) -> Result<(Result<Prepared, Failure>, Phases), LaunchError> {
    let request = request.clone();
    let (prepared, phases) = tokio::task::spawn_blocking(move || {
        let mut phases = Phases::new();
        let prepared = prepare(&request, &mut phases);
        (prepared, phases)
    })
    .await
    .map_err(|e| LaunchError::host("prepare the checkout", e))?;
    Ok((prepared?, phases))
}

/// Clones the candidate's repository at its base commit, fetches its submodules, reads the
/// commit's date, chooses the plan and packs the checkout: all of it blocking work (git, a
/// walk of the tree, a tar of it in memory), run in a blocking task by [`on_host`].
/// `Ok(Err(..))` is a failure of the repository.
///
/// With reuse on and earlier environments of the repository known, the checkout is first
/// [`Checkout::Borrowed`]; when that finds an environment to start from and the delta to it,
/// nothing is packed whole (the Dockerfile check needs the whole checkout, so it borrows
/// nothing). Otherwise the checkout is made whole, as for a cold launch.
fn prepare(
    request: &LaunchRequest,
    phases: &mut Phases,
) -> Result<Result<Prepared, Failure>, LaunchError> {
    let reuse = request.settings.reuse && !request.reuse.is_empty();
    if reuse && !request.settings.verify_dockerfile {
        match prepare_with(request, phases, Checkout::Borrowed) {
            Ok(Ok(prepared)) if matches!(&prepared.reuse, Some(Start { delta: Some(_), .. })) => {
                return Ok(Ok(prepared));
            }
            // No environment to start from, or one the checkout goes to whole (a submodule
            // changed): the plan and that choice stand, and only the whole checkout is made.
            Ok(Ok(prepared)) => {
                let whole = whole_archive(request)?;
                phases.end("clone");
                return Ok(whole.map(|whole| Prepared {
                    tar: Some(whole.tar),
                    checkout_note: whole.note,
                    ..prepared
                }));
            }
            // A borrowed checkout that failed: the whole checkout decides.
            _ => {}
        }
    }
    prepare_with(request, phases, Checkout::Whole { reuse })
}

/// [`prepare`] with the checkout made as `how` says.
fn prepare_with(
    request: &LaunchRequest,
    phases: &mut Phases,
    how: Checkout,
) -> Result<Result<Prepared, Failure>, LaunchError> {
    let candidate = &request.candidate;
    let checkout = match check_out(request, how)? {
        Ok(checkout) => checkout,
        Err(failure) => return Ok(Err(failure)),
    };
    let workdir = checkout.workdir();
    let cutoff = if request.settings.date_cutoff {
        kiln_git::commit_date(&workdir, &candidate.base_commit).ok()
    } else {
        None
    };
    phases.end(match how {
        Checkout::Borrowed => "checkout (borrowed)",
        Checkout::Whole { .. } => "clone",
    });
    let mut known = match Known::read(&workdir, &candidate.base_commit, &candidate.test_patch) {
        Ok(known) => known,
        Err(e) if e.is_local_storage_problem() => {
            return Err(LaunchError::host("read the checkout", e));
        }
        Err(e) => {
            return Ok(Err(Failure::new(
                FailureClass::Clone,
                Some(&e.command),
                &e.message,
            )));
        }
    };
    let plan_cx = PlanContext {
        root: &workdir,
        cutoff: cutoff.as_deref(),
        ca_bundle: request.ca_bundle.as_deref().map(Vec::as_slice),
        test_files: &known.test_files,
        scope: TestScope::parse(&request.settings.test_scope),
        case_timeout: request.settings.case_timeout,
    };
    // A repository no planner recognises is the agent's, when there is one.
    let agent = request.settings.agent.is_some() && request.lm.is_some();
    let chosen = ecosystems::choose(&plan_cx).or_else(|| agent.then(|| ecosystems::bare(&plan_cx)));
    let Some((ecosystem, plan)) = chosen else {
        return Ok(Err(Failure::new(
            FailureClass::UnsupportedProject,
            None,
            "no build plan matched the repository's files",
        )));
    };
    let tar = match how {
        Checkout::Borrowed => None,
        Checkout::Whole { .. } => Some(
            repo::tar_dir(&workdir, WORKDIR.trim_start_matches('/'))
                .map_err(|e| LaunchError::host("pack the checkout", e))?,
        ),
    };
    let (version, license) = (about::version(&workdir), about::license(&workdir));
    let reuse = match how {
        Checkout::Borrowed | Checkout::Whole { reuse: true } => {
            start(&workdir, &plan_cx, &plan, request)
        }
        Checkout::Whole { reuse: false } => None,
    };
    let checkout_note = checkout.note.clone();
    drop(checkout);
    known.rewrites = ecosystems::rewrites(ecosystem);
    known.language = plan.language;
    phases.end("plan+pack");
    Ok(Ok(Prepared {
        ecosystem,
        plan,
        checkout_note,
        tar,
        version,
        license,
        reuse,
        known,
    }))
}
