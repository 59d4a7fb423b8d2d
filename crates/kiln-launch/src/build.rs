//! The launch loop: the checkout, its plan and its packing on the host (in a blocking task),
//! then the plan's steps in a container with the repair rules of its ecosystem, the image
//! committed before the baseline test run, and the Dockerfile check.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kiln_core::runtime::WORKDIR;
use kiln_core::{
    ContainerRuntime, ContainerSpec, Event, NetworkMode, Reporter, RuntimeError, Session,
};
use kiln_schema::{BuiltBy, EnvironmentRecord, EnvironmentStatus, FailureClass};

use crate::classify::classify_setup;
use crate::debian::{self, Suite};
use crate::ecosystems::{self, Ecosystem};
use crate::environment::Known;
use crate::fallback::{Stopped, fall_back};
use crate::plan::{Plan, PlanContext, TestScope};
use crate::repair::{self, Failed, Failing, Repair};
use crate::request::{LaunchRequest, ReuseSource};
use crate::steps::{self, Step};
use crate::verify::{BaselineRun, Failure, baseline, run_or_fail};
use crate::{about, dockerfile, images, layer, registry, repo};

/// An infrastructure failure that stops the stage: it says nothing about the repository, so
/// it is never written as a row, and a re-run retries the item.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The engine went away or failed.
    #[error(transparent)]
    Engine(#[from] RuntimeError),
    /// A dependency step failed while the ecosystem's package registry did not answer from
    /// the container: an outage or a missing route, not the repository's fault.
    #[error("reach the package registry {url} from the container ({error})")]
    RegistryDown {
        /// The registry address asked.
        url: String,
        /// What the request reported.
        error: String,
    },
    /// The host could not hold the work (a full or read-only disk).
    #[error("{what}: {message}")]
    Host {
        /// What kiln was doing, as a verb phrase.
        what: String,
        /// The error.
        message: String,
    },
}

impl LaunchError {
    fn host(what: &str, message: impl std::fmt::Display) -> Self {
        Self::Host {
            what: what.to_string(),
            message: message.to_string(),
        }
    }
}

/// Builds the environment for one candidate. Failures of the repository are returned as a
/// `failed` row; failures of the engine or the host are errors, never rows.
///
/// # Errors
/// [`LaunchError::Engine`] when the engine cannot be reached or fails, [`LaunchError::RegistryDown`]
/// when a dependency failed while its registry did not answer, [`LaunchError::Host`]
/// when the host's disk cannot hold the work.
pub async fn launch(
    runtime: Arc<dyn ContainerRuntime>,
    request: &LaunchRequest,
    reporter: &dyn Reporter,
) -> Result<EnvironmentRecord, LaunchError> {
    let started = Instant::now();
    let candidate = &request.candidate;
    // A row starts as a failure (`EnvironmentStatus::Failed`, the default) until the launch
    // says otherwise.
    let mut record = EnvironmentRecord {
        repo: candidate.repo.clone(),
        base_commit: candidate.base_commit.clone(),
        language: "unknown".into(),
        plan: "none".into(),
        log_dir: request.log_dir_label.clone(),
        ..EnvironmentRecord::new(candidate.instance_id.clone())
    };
    let step = |text: &str| {
        reporter.report(Event::ItemStep {
            stage: request.stage.clone(),
            item: candidate.instance_id.to_string(),
            step: text.to_string(),
        });
    };
    let mut verify_context = None;
    let outcome = build(
        Arc::clone(&runtime),
        request,
        &mut record,
        &mut verify_context,
        &step,
    )
    .await;
    // The Dockerfile check proves the record; its own time is in `dockerfile_check`, and the
    // row's total includes it, so that the CLI, the card and the report give one time.
    if let (Ok(None), Some(context)) = (&outcome, verify_context) {
        step("check the Dockerfile");
        let tag = format!("{}.dockerfile-check", request.image_tag);
        let checked = Instant::now();
        let verdict = dockerfile::verify(
            &runtime,
            &record,
            &context,
            &tag,
            request.settings.test_timeout,
            &ContainerSpec {
                labels: request.labels.clone(),
                limits: request.docker.limits(),
                network: request.test_network(),
                ..ContainerSpec::default()
            },
            &request.log_dir,
        )
        .await;
        record.dockerfile_check = Some(match verdict {
            Ok(verdict) => format!("{verdict} ({:.1}s)", checked.elapsed().as_secs_f64()),
            Err(
                e @ (RuntimeError::ContainerStopped { .. } | RuntimeError::DiskExceeded { .. }),
            ) => {
                format!("rebuilt, but failed to {e}")
            }
            Err(e) => return Err(LaunchError::Engine(e)),
        });
    }
    // With `[docker] registry`, the environment goes to the registry, and the row names it
    // there, so that validation and evaluation can run on another machine.
    if let (Ok(None), Some(registry), Some(local)) =
        (&outcome, &request.docker.registry, record.image.clone())
    {
        step("push the image");
        let published = format!("{registry}/{local}");
        runtime.tag_image(&local, &published).await?;
        let mut sink = |_: &[u8]| {};
        runtime.push_image(&published, &mut sink).await?;
        record.image = Some(published);
    }
    record.total_seconds = started.elapsed().as_secs_f64();
    match outcome {
        Ok(None) => record.status = EnvironmentStatus::Built,
        Ok(Some(failure)) => {
            record.failure_class = Some(failure.class);
            record.failure_command = failure.command;
            record.log_tail = Some(failure.log_tail);
            record.error_lines = failure.error_lines;
        }
        Err(e) => return Err(e),
    }
    Ok(record)
}

/// Wall time per phase of one launch, written as the last line of `launch.log` so that the
/// time kiln adds around the repository's own commands can be read off (`clone 0.08, ...`).
struct Phases {
    last: Instant,
    done: Vec<(&'static str, f64)>,
}

impl Phases {
    fn new() -> Self {
        Self {
            last: Instant::now(),
            done: Vec::new(),
        }
    }

    /// Ends the phase `name` now.
    fn end(&mut self, name: &'static str) {
        let now = Instant::now();
        self.done
            .push((name, now.duration_since(self.last).as_secs_f64()));
        self.last = now;
    }

    /// Appends the phases to the log at `path`.
    fn write(&self, path: &std::path::Path) {
        use std::io::Write as _;
        let list: Vec<String> = self
            .done
            .iter()
            .map(|(name, secs)| format!("{name} {secs:.2}"))
            .collect();
        if let Ok(mut log) = std::fs::OpenOptions::new().append(true).open(path) {
            let _ = writeln!(log, "# launch phases (s): {}", list.join(", "));
        }
    }
}

/// What the host prepares before any container: the plan of the checkout and the checkout
/// packed for the container.
struct Prepared {
    ecosystem: Ecosystem,
    plan: Plan,
    /// What the checkout did beyond a plain clone (tags kept, submodules missing).
    checkout_note: Option<String>,
    /// The checkout as a tar archive whose entries sit under `testbed/`; `None` when the
    /// checkout borrowed the mirror's objects ([`Checkout::Borrowed`]): it is made and packed
    /// whole only if the launch goes cold.
    tar: Option<Vec<u8>>,
    /// The repository's version (`major.minor`) and licence at the base commit.
    version: Option<String>,
    license: String,
    /// The environment to start from (`reuse`): the nearest ancestor's of the same plan.
    reuse: Option<Start>,
    /// The commit's tree and the test patch's files.
    known: Known,
}

/// Where a reused launch starts.
struct Start {
    source: ReuseSource,
    /// What the source's checkout lacks, when that is known.
    delta: Option<Delta>,
    /// The plan made with the source's dependency cut-off, when no dependency manifest changed
    /// since its commit (and the plan is otherwise the same): what the source resolved stands,
    /// and the setup steps it ran whose inputs did not change are not run again. `None`:
    /// everything runs again, resolved as a cold launch resolves. (With changed manifests the
    /// source's older date is no choice: a requirement raised since may have no release before
    /// it, seen on serde, where `trybuild ^1.0.97` then resolved to a release for a newer rustc.)
    kept: Option<Plan>,
}

/// What turns an earlier commit's checkout into this one's: the objects this commit's history
/// adds and its refs ([`kiln_git::HistoryDelta`], a tar under [`DELTA_DIR`]), applied in the
/// container by git, which writes only the files that differ. Unchanged files keep their
/// times, so the build outputs of the earlier commit stay up to date for them.
struct Delta {
    tar: Vec<u8>,
    /// The paths this commit added, changed or deleted since the earlier one.
    changed: Vec<String>,
}

/// Where a [`Delta`] is unpacked in the container (and removed once applied).
const DELTA_DIR: &str = "/tmp/kiln-reuse";

/// How [`prepare`] checks the repository out on the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Checkout {
    /// A checkout that reads its objects from the mirror ([`kiln_git::borrow_at`]): seconds
    /// where copying a long history takes many, and enough to plan and to pack the [`Delta`]
    /// an earlier commit's environment needs. Nothing of it goes to a container whole.
    Borrowed,
    /// A checkout of its own with exactly the base commit's history, packed whole; `reuse`
    /// says whether to look for an environment to start from.
    Whole { reuse: bool },
}

/// Clones the candidate's repository at its base commit, fetches its submodules, reads the
/// commit's date, chooses the plan and packs the checkout: all of it blocking work (git, a
/// walk of the tree, a tar of it in memory), run in a blocking task by [`build`].
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

/// A checkout of the candidate's base commit in a temporary directory, its submodules fetched
/// where they can be.
struct HostCheckout {
    dir: tempfile::TempDir,
    /// What the checkout did beyond a plain clone (tags kept, history cut).
    note: Option<String>,
    /// The mirror's lock, held while a borrowed checkout reads from it.
    _borrowed: Option<kiln_git::Borrowed>,
}

impl HostCheckout {
    fn workdir(&self) -> std::path::PathBuf {
        self.dir.path().join("repo")
    }
}

/// Checks the candidate's base commit out on the host as `how` says; `Ok(Err(..))` is a
/// failure of the repository.
fn check_out(
    request: &LaunchRequest,
    how: Checkout,
) -> Result<Result<HostCheckout, Failure>, LaunchError> {
    let candidate = &request.candidate;
    let dir = tempfile::Builder::new()
        .prefix("kiln-checkout-")
        .tempdir()
        .map_err(|e| LaunchError::host("create a temporary directory for the checkout", e))?;
    let workdir = dir.path().join("repo");
    let mut borrowed = None;
    let cloned = kiln_git::MirrorCache::new(&request.cache_dir).and_then(|cache| match how {
        Checkout::Borrowed => cache
            .borrowed_checkout(
                &candidate.repo,
                &request.clone_url,
                &candidate.base_commit,
                &workdir,
            )
            .map(|guard| {
                borrowed = Some(guard);
                None
            }),
        Checkout::Whole { .. } => cache.checkout(
            &candidate.repo,
            &request.clone_url,
            &candidate.base_commit,
            &workdir,
        ),
    });
    let note = match cloned {
        Ok(note) => note,
        // A full or read-only disk is the host's failure, not the repository's.
        Err(e) if e.is_local_storage_problem() => {
            return Err(LaunchError::host("clone the repository", e));
        }
        Err(e) => {
            return Ok(Err(Failure::new(
                FailureClass::Clone,
                Some(&e.command),
                &e.message,
            )));
        }
    };
    if let Some(error) = kiln_git::init_submodules(&workdir, &request.clone_url) {
        // Not fatal: the C/C++ planner lets Debian packages stand in for what is missing and
        // says so in the version reason.
        tracing::warn!(instance = %candidate.instance_id, "git submodules not fetched: {error}");
    }
    Ok(Ok(HostCheckout {
        dir,
        note,
        _borrowed: borrowed,
    }))
}

/// The whole checkout packed for the container, and what the checkout did beyond a plain
/// clone: what a launch that borrowed its checkout needs once it goes cold.
struct Packed {
    tar: Vec<u8>,
    note: Option<String>,
}

/// Makes and packs the whole checkout ([`Packed`]); `Ok(Err(..))` is a failure of the
/// repository.
fn whole_archive(request: &LaunchRequest) -> Result<Result<Packed, Failure>, LaunchError> {
    let checkout = match check_out(request, Checkout::Whole { reuse: false })? {
        Ok(checkout) => checkout,
        Err(failure) => return Ok(Err(failure)),
    };
    let tar = repo::tar_dir(&checkout.workdir(), WORKDIR.trim_start_matches('/'))
        .map_err(|e| LaunchError::host("pack the checkout", e))?;
    Ok(Ok(Packed {
        tar,
        note: checkout.note,
    }))
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
    let Some((ecosystem, plan)) = ecosystems::choose(&plan_cx) else {
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

/// Where a launch of the checkout at `workdir` (planned as `plan`) starts: the environment of
/// the nearest ancestor of the same plan, if any, and what it lacks.
fn start(
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
fn delta(workdir: &std::path::Path, older: &str, newer: &str) -> Option<Delta> {
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
fn nearest_ancestor(
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

/// The launch proper; `Ok(Some(..))` is a failure of the repository, `Err` one of the engine or
/// the host.
async fn build(
    runtime: Arc<dyn ContainerRuntime>,
    request: &LaunchRequest,
    record: &mut EnvironmentRecord,
    verify_context: &mut Option<Vec<u8>>,
    step: &(dyn Fn(&str) + Sync),
) -> Result<Option<Failure>, LaunchError> {
    let _ = std::fs::create_dir_all(&request.log_dir);

    step("clone");
    // The host's part (git, possibly a wait for another launch cloning the same repository, a
    // walk of the tree, packing it) runs off the async workers.
    let (prepared, mut phases) = {
        let request = request.clone();
        tokio::task::spawn_blocking(move || {
            let mut phases = Phases::new();
            let prepared = prepare(&request, &mut phases);
            (prepared, phases)
        })
        .await
        .map_err(|e| LaunchError::host("prepare the checkout", e))?
    };
    let Prepared {
        ecosystem,
        mut plan,
        checkout_note,
        mut tar,
        version,
        license,
        mut reuse,
        known,
    } = match prepared? {
        Ok(prepared) => prepared,
        Err(failure) => return Ok(Some(failure)),
    };
    record.project_version = version;
    record.license = license;
    record.language = plan.language.into();
    record.plan.clone_from(&plan.name);
    record.parser = plan.parser.into();
    record.test_command = plan.test.render();
    record.test_scope.clone_from(&plan.test_scope);
    // The row has no column of its own for how versions were fixed; it follows the image's
    // reason, and the cut-off column holds the date only when the plan applied it.
    let mut version_reason = if plan.resolution.is_empty() {
        plan.version_reason.clone()
    } else {
        format!("{}; dependencies: {}", plan.version_reason, plan.resolution)
    };
    if let Some(note) = checkout_note {
        version_reason.push_str("; checkout: ");
        version_reason.push_str(&note);
    }
    // The checkout doubles as the Dockerfile's build context when the Dockerfile is checked.
    let context = tar.clone().filter(|_| request.settings.verify_dockerfile);

    // A repair may start the launch over on another interpreter, once.
    let mut restarted = false;
    loop {
        record.base_image.clone_from(&plan.image.tag);
        record.setup_commands.clear();
        record.environment.clear();

        // The first attempt may start from an earlier commit's environment, if it is still there.
        let reused = match reuse.take() {
            Some(start) if runtime.image_exists(&start.source.image).await? => Some(start),
            Some(start) => {
                version_reason.push_str(&format!(
                    "; reuse: the environment of {} is gone, launched cold",
                    start.source.instance_id
                ));
                None
            }
            None => None,
        };
        // What the container starts from: the delta to the environment it starts from, or the
        // whole checkout, made now if the checkout was borrowed.
        let archive = match &reused {
            Some(Start {
                delta: Some(delta), ..
            }) => delta.tar.clone(),
            _ => {
                if tar.is_none() {
                    step("clone");
                    let whole = {
                        let request = request.clone();
                        tokio::task::spawn_blocking(move || whole_archive(&request))
                            .await
                            .map_err(|e| LaunchError::host("prepare the checkout", e))??
                    };
                    let whole = match whole {
                        Ok(whole) => whole,
                        Err(failure) => return Ok(Some(failure)),
                    };
                    if let Some(note) = whole.note {
                        version_reason.push_str("; checkout: ");
                        version_reason.push_str(&note);
                    }
                    tar = Some(whole.tar);
                    phases.end("clone");
                }
                tar.clone().ok_or_else(|| {
                    LaunchError::host("pack the checkout", "the whole checkout was not packed")
                })?
            }
        };
        record.version_reason.clone_from(&version_reason);
        // A reused attempt that keeps the source's dependencies runs the plan made with its
        // cut-off.
        let attempt_plan = match &reused {
            Some(Start {
                source,
                kept: Some(kept),
                ..
            }) => {
                if kept.cutoff != plan.cutoff
                    && let Some(cutoff) = &kept.cutoff
                {
                    record.version_reason.push_str(&format!(
                        "; reuse: dependencies resolved as of {}'s cut-off {cutoff} (no dependency manifest changed since its commit)",
                        source.instance_id
                    ));
                }
                kept
            }
            _ => &plan,
        };
        record.dependency_cutoff.clone_from(&attempt_plan.cutoff);
        record.rebuild_commands = attempt_plan.rebuild.iter().map(Step::render).collect();

        step("base image");
        if reused.is_none()
            && let Some(base) = images::base_image(&plan.image.dockerfile)
            && debian::suite_of(&base).is_some()
            && !runtime.image_exists(&plan.image.tag).await?
            && !runtime.image_exists(&base).await?
        {
            step(&format!(
                "base image: making {base} (a pull, else debootstrap)"
            ));
        }
        if reused.is_none() {
            ensure_image(runtime.as_ref(), &plan.image, &request.log_dir).await?;
        }
        phases.end("base image");

        let mut spec = ContainerSpec {
            image: plan.image.tag.clone(),
            env: vec![("PIP_DISABLE_PIP_VERSION_CHECK".into(), "1".into())],
            labels: request.labels.clone(),
            limits: request.docker.limits(),
            network: NetworkMode::Bridge,
            workdir: Some(WORKDIR.into()),
            max_lifetime: request.settings.command_timeout * 4
                + request.settings.test_timeout
                + crate::fallback::agent_lifetime(request)
                + Duration::from_secs(600),
        };
        // A cold attempt starts from the system layer of its first steps, made once for every
        // launch that shares them; a reused one from its source's environment.
        let system = layer::system_steps(&attempt_plan.setup);
        let layered = match &reused {
            Some(start) => {
                spec.image.clone_from(&start.source.image);
                None
            }
            None if system > 0 => {
                step("system layer");
                let built = layer::ensure(
                    &runtime,
                    &spec,
                    &attempt_plan.setup[..system],
                    request.settings.command_timeout,
                    &request.log_dir.join("layer.log"),
                )
                .await?;
                phases.end("system layer");
                built.map(|tag| {
                    spec.image.clone_from(&tag);
                    (tag, system)
                })
            }
            None => None,
        };

        step(
            match &reused {
                Some(start) => format!(
                    "start container from {}'s environment",
                    start.source.instance_id
                ),
                None => "start container".to_string(),
            }
            .as_str(),
        );
        let mut session = Session::start(
            Arc::clone(&runtime),
            &spec,
            &request.log_dir.join("launch.log"),
        )
        .await?;
        phases.end("start");
        let result = run_plan(
            &mut session,
            request,
            record,
            Attempted {
                ecosystem,
                plan: attempt_plan,
                spec: &spec,
                known: &known,
                layered: layered.as_ref().map(|(tag, n)| (tag.as_str(), *n)),
                reused: reused.as_ref().map(|start| Reused {
                    delta: start.delta.is_some(),
                    skip: match (&start.kept, &start.delta) {
                        (Some(_), Some(delta)) => Some((&start.source, delta.changed.as_slice())),
                        _ => None,
                    },
                }),
            },
            archive,
            step,
            &mut phases,
        )
        .await;
        session.close_later(&request.removals);
        let outcome = match result {
            Ok(outcome) => outcome,
            Err(e) => {
                phases.write(&request.log_dir.join("launch.log"));
                return Err(e.into());
            }
        };
        match outcome {
            // A launch from an earlier environment that did not build says nothing about the
            // repository: it launches cold, and the first attempt's log stays beside.
            Attempt::Done(Some(failure)) if reused.is_some() => {
                let log = request.log_dir.join("launch.log");
                phases.write(&log);
                let _ = std::fs::rename(&log, request.log_dir.join("launch-reused.log"));
                version_reason.push_str(&format!(
                    "; reuse: starting from {}'s environment failed ({}), launched cold",
                    reused
                        .as_ref()
                        .map_or("", |s| s.source.instance_id.as_str()),
                    failure.class
                ));
                record.repairs.clear();
                record.baseline.clear();
                (record.baseline_passed, record.baseline_failed) = (0, 0);
                (record.setup_seconds, record.test_seconds) = (0.0, 0.0);
                phases = Phases::new();
            }
            Attempt::Restart(suite, Some(image)) if !restarted => {
                restarted = true;
                // The first attempt's log stays, as launch-1.log.
                let log = request.log_dir.join("launch.log");
                let _ = std::fs::rename(&log, request.log_dir.join("launch-1.log"));
                plan.image = image;
                plan.repair.suite = Some(suite);
                version_reason = format!(
                    "{} (a repair started the launch over on Debian {}'s {})",
                    version_reason,
                    suite.name(),
                    match ecosystem {
                        Ecosystem::Native => "toolchain",
                        _ => "Python",
                    }
                );
            }
            Attempt::Restart(..) => {
                phases.write(&request.log_dir.join("launch.log"));
                return Ok(Some(Failure::new(
                    FailureClass::Build,
                    record.setup_commands.last().map(String::as_str),
                    "a repair asked for another interpreter a second time",
                )));
            }
            Attempt::RegistryDown(down) => {
                phases.write(&request.log_dir.join("launch.log"));
                return Err(LaunchError::RegistryDown {
                    url: down.url,
                    error: down.error,
                });
            }
            Attempt::Done(failure) => {
                phases.write(&request.log_dir.join("launch.log"));
                if failure.is_none() {
                    record.reused_from = reused.map(|s| s.source.instance_id);
                    *verify_context = context;
                }
                return Ok(failure);
            }
        }
    }
}

/// How one attempt of the plan ended.
enum Attempt {
    /// A dependency step failed and the ecosystem's registry did not answer: the item is
    /// deferred (no row).
    RegistryDown(registry::Unanswered),
    /// Built (`None`) or failed.
    Done(Option<Failure>),
    /// A repair asked to start over on another Debian suite's interpreter, with the image of
    /// that interpreter (`None` when the ecosystem has no such images).
    Restart(Suite, Option<kiln_core::ImageBuild>),
}

/// What one attempt runs: the plan of an ecosystem in a container of `spec`, `reused` when
/// `spec`'s image is an earlier commit's environment.
#[derive(Clone, Copy)]
struct Attempted<'a> {
    ecosystem: Ecosystem,
    plan: &'a Plan,
    spec: &'a ContainerSpec,
    /// The commit's tree and the test patch's files.
    known: &'a Known,
    /// The system layer `spec`'s image is, and how many of the plan's first steps it ran.
    layered: Option<(&'a str, usize)>,
    reused: Option<Reused<'a>>,
}

/// How a reused attempt starts.
#[derive(Clone, Copy)]
struct Reused<'a> {
    /// The archive is a [`Delta`] (else the whole checkout).
    delta: bool,
    /// With the source's dependencies kept: the source, and the paths changed since its
    /// commit. A setup step the source ran as it is, none of whose inputs changed, is not run
    /// again.
    skip: Option<(&'a ReuseSource, &'a [String])>,
}

/// Removes an earlier commit's checkout from a reused environment: its tracked files and its
/// `.git` (the new checkout brings its own); what the build left (`target/`, `node_modules/`,
/// build directories, caches) stays for the setup steps to reuse.
const CLEAR_CHECKOUT: &str = "cd /testbed && git ls-files -z | xargs -0 -r rm -f -- && rm -rf .git \
     && find . -mindepth 1 -depth -type d -empty -delete";

/// Runs a script that turns a reused environment's checkout into this one's; `Some` failure
/// when it did not work (the launch then goes cold).
async fn run_checkout_script(
    session: &mut Session,
    script: &str,
) -> Result<Option<Failure>, RuntimeError> {
    let outcome = session.run(script, Duration::from_secs(600)).await?;
    Ok((outcome.exit_code != 0)
        .then(|| Failure::new(FailureClass::Build, Some(script), &outcome.output)))
}

/// Adds the `[kiln] ...` lines a repaired command printed (what it dropped, which package
/// held a header) to the latest repair of the row, from `from` on.
fn note_repair_output(record: &mut EnvironmentRecord, output: &str, from: usize) {
    if record.repairs.len() <= from {
        return;
    }
    let notes: Vec<&str> = output
        .lines()
        .filter_map(|l| l.trim().strip_prefix("[kiln] "))
        .take(20)
        .collect();
    if let (false, Some(last)) = (notes.is_empty(), record.repairs.last_mut()) {
        last.push_str("; ");
        last.push_str(&notes.join("; "));
    }
}

/// Marks `rule` tried, and writes the repair into the row and the log.
fn record_repair(
    session: &mut Session,
    record: &mut EnvironmentRecord,
    tried: &mut Vec<&'static str>,
    rule: &'static repair::Rule,
    repair: &Repair,
    matched: &str,
) {
    tried.push(rule.name);
    record.repairs.push(repair::describe(rule, repair, matched));
    session.note(&format!(
        "# kiln repair {}: {}",
        rule.name, rule.description
    ));
}

/// At most this many repairs in one launch: each costs a retry, and a repository that needs
/// more is better left failed with its log.
const MAX_REPAIRS: usize = 6;

/// The steps and test command of one attempt, as repairs change them.
struct Work {
    /// Setup steps still to run.
    queue: std::collections::VecDeque<Step>,
    /// Steps to re-run after a source change.
    rebuild: Vec<Step>,
    /// The test command.
    test: TestCommandSlot,
}

/// Applies a setup-phase repair; `Some` when it restarts the launch on another interpreter.
fn apply_repair(
    session: &mut Session,
    record: &mut EnvironmentRecord,
    work: &mut Work,
    failed: Step,
    repair: Repair,
) -> Option<Suite> {
    match repair {
        Repair::Env(name, value) => {
            record.environment.insert(name, value);
            session.set_env(
                record
                    .environment
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            );
            work.queue.push_front(failed);
        }
        Repair::Before(steps) => {
            work.queue.push_front(failed);
            for step in steps.into_iter().rev() {
                work.queue.push_front(step);
            }
        }
        Repair::Replace(steps) => {
            for step in steps.into_iter().rev() {
                work.queue.push_front(step);
            }
        }
        Repair::ReplaceWithRebuild { steps, rebuild } => {
            for step in steps.into_iter().rev() {
                work.queue.push_front(step);
            }
            work.rebuild.extend(rebuild);
        }
        Repair::Tests(test) => {
            work.test.set(test, record);
            work.queue.push_front(failed);
        }
        Repair::Retarget {
            step, test, scope, ..
        } => {
            for rebuild in &mut work.rebuild {
                if *rebuild == failed {
                    *rebuild = step.clone();
                }
            }
            work.test.set(test, record);
            if let Some(scope) = scope {
                record.test_scope = scope;
            }
            work.queue.push_front(step);
        }
        Repair::Interpreter(suite) => return Some(suite),
        Repair::Skip(step) => work.rebuild.retain(|s| *s != step),
        Repair::DropCutoff(step) => {
            record.dependency_cutoff = None;
            work.queue.push_front(step);
        }
    }
    record.rebuild_commands = work.rebuild.iter().map(Step::render).collect();
    None
}

async fn run_plan(
    session: &mut Session,
    request: &LaunchRequest,
    record: &mut EnvironmentRecord,
    attempted: Attempted<'_>,
    tar: Vec<u8>,
    step: &(dyn Fn(&str) + Sync),
    phases: &mut Phases,
) -> Result<Attempt, RuntimeError> {
    let Attempted {
        ecosystem,
        plan,
        spec,
        known,
        layered,
        reused,
    } = attempted;
    let runtime = Arc::clone(session.runtime());
    // An earlier checkout gives way to this one: by git from a delta, or cleared for a whole
    // copy (a submodule changed).
    let (before, after) = match reused.map(|r| r.delta) {
        Some(true) => (
            None,
            Some(format!(
                "cd {WORKDIR} && {}",
                kiln_git::HistoryDelta::apply_script(DELTA_DIR)
            )),
        ),
        Some(false) => (Some(CLEAR_CHECKOUT.to_string()), None),
        None => (None, None),
    };
    if let Some(script) = &before
        && let Some(failed) = run_checkout_script(session, script).await?
    {
        return Ok(Attempt::Done(Some(failed)));
    }
    match runtime.copy_in(session.id(), "/", tar).await {
        Ok(()) => {}
        // The engine could not unpack this checkout: this item's row, the stage goes on.
        Err(e @ RuntimeError::Refused { .. }) => {
            return Ok(Attempt::Done(Some(Failure::new(
                FailureClass::Infra,
                None,
                &format!("failed to {e}"),
            ))));
        }
        Err(e) => return Err(e),
    }
    if let Some(script) = &after
        && let Some(failed) = run_checkout_script(session, script).await?
    {
        return Ok(Attempt::Done(Some(failed)));
    }
    // Every step runs again (a dependency manifest changed, or the source resolved at another
    // date): the installs must resolve as a cold launch does, not keep the source's versions.
    if let Some(Reused { skip: None, .. }) = reused
        && let Some(fresh) = ecosystems::fresh_install(ecosystem)
    {
        session
            .note("# reuse: dependencies are installed afresh; what the source's left is cleared");
        let script = format!("cd {WORKDIR} && {}", (fresh.script)());
        if let Some(failed) = run_checkout_script(session, &script).await? {
            return Ok(Attempt::Done(Some(failed)));
        }
        record.version_reason.push_str(&format!(
            "; reuse: dependencies installed afresh (cleared from the source's environment: {})",
            fresh.clears
        ));
    }
    phases.end("copy-in");

    let rules = ecosystems::rules(ecosystem);
    let mut tried: Vec<&'static str> = Vec::new();
    // What the rules see of the plan; a repair that retargets the commands updates it.
    let mut context = plan.repair.clone();
    // The row's repairs from this index on may still gain what their commands report.
    let repaired_from = record.repairs.len();
    let mut work = Work {
        queue: plan.setup.iter().cloned().collect(),
        rebuild: plan.rebuild.clone(),
        test: TestCommandSlot::new(plan.test.clone(), record),
    };
    if let Some((tag, count)) = layered {
        for done in work.queue.drain(..count) {
            let command = done.render();
            session.note(&format!(
                "# in the system layer {tag} (not run again): {}",
                short(&command)
            ));
            record.setup_commands.push(command);
        }
    }
    let setup_started = Instant::now();
    let mut skipped = 0;
    while let Some(setup_step) = work.queue.pop_front() {
        let command = setup_step.render();
        if let Some((source, changed)) = reused.and_then(|r| r.skip)
            && source.setup_commands.contains(&command)
            && setup_step.unaffected_by(changed)
        {
            session.note(&format!(
                "# reuse: not run again ({}'s environment ran it; none of its inputs changed): {}",
                source.instance_id,
                short(&command)
            ));
            record.setup_commands.push(command);
            skipped += 1;
            continue;
        }
        step(short(&command));
        let outcome = match run_or_fail(
            session,
            &command,
            request.settings.command_timeout,
            FailureClass::Build,
        )
        .await?
        {
            Ok(outcome) => outcome,
            Err(failure) => {
                record.setup_seconds = setup_started.elapsed().as_secs_f64();
                return Ok(Attempt::Done(Some(failure)));
            }
        };
        if outcome.exit_code == 0 {
            note_repair_output(record, &outcome.output, repaired_from);
            record.setup_commands.push(command);
            continue;
        }
        let class = classify_setup(&outcome);
        if class == FailureClass::DependencyResolution
            && let Some(down) = registry::unanswered(session, ecosystem).await?
        {
            return Ok(Attempt::RegistryDown(down));
        }
        let failed = Failed {
            failing: Failing::Step(&setup_step),
            output: &outcome.output,
        };
        let found = (!outcome.timed_out && !outcome.oom_killed && tried.len() < MAX_REPAIRS)
            .then(|| repair::find(&failed, &context, &rules, &tried))
            .flatten();
        let Some((rule, repair, matched)) = found else {
            record.setup_seconds = setup_started.elapsed().as_secs_f64();
            let stopped = Stopped {
                failure: Failure::new(class, Some(&command), &outcome.output),
                plan: &plan.name,
                language: plan.language,
                remaining: work.queue.iter().map(Step::render).collect(),
                spec,
                known,
            };
            let end = fall_back(session, request, record, stopped, step).await?;
            return Ok(Attempt::Done(end));
        };
        record_repair(session, record, &mut tried, rule, &repair, &matched);
        if let Repair::Retarget { cargo, .. } = &repair {
            context.cargo = Some(cargo.clone());
        }
        if let Some(suite) = apply_repair(session, record, &mut work, setup_step, repair) {
            record.setup_seconds = setup_started.elapsed().as_secs_f64();
            let ca_bundle = request.ca_bundle.as_deref().map(Vec::as_slice);
            let image = ecosystems::interpreter_image(ecosystem, suite, ca_bundle);
            return Ok(Attempt::Restart(suite, image));
        }
    }
    record.setup_seconds = setup_started.elapsed().as_secs_f64();
    if let Some((source, _)) = reused.and_then(|r| r.skip)
        && skipped > 0
    {
        record.version_reason.push_str(&format!(
            "; reuse: {skipped} setup step(s) not run again ({}'s environment ran them and none of their inputs changed)",
            source.instance_id
        ));
    }
    phases.end("setup");

    // The environment is committed before the baseline run, so that nothing the tests write
    // (temporary files, caches, files in the checkout) reaches the image that validation
    // starts every run from.
    step("commit image");
    let baseline_run = BaselineRun::new(request, spec, known);
    loop {
        step("baseline tests");
        let (failure, outcome) = match baseline(session, &baseline_run, record).await? {
            (None, _) => {
                phases.end("commit+tests");
                record.built_by = Some(if record.repairs.is_empty() {
                    BuiltBy::Rules
                } else {
                    BuiltBy::Repair
                });
                return Ok(Attempt::Done(None));
            }
            (Some(failure), Some(outcome)) => (failure, outcome),
            (Some(stopped), None) => {
                // The run stopped its container: there is no output to repair by.
                runtime.remove_image(&request.image_tag).await?;
                return Ok(Attempt::Done(Some(stopped)));
            }
        };
        let test = work.test.command.clone();
        let failed = Failed {
            failing: Failing::Tests(&test),
            output: &outcome.output,
        };
        let found = (!outcome.timed_out && !outcome.oom_killed && tried.len() < MAX_REPAIRS)
            .then(|| repair::find(&failed, &context, &rules, &tried))
            .flatten();
        let Some((rule, repair, matched)) = found else {
            // The image of a failed launch is no environment.
            runtime.remove_image(&request.image_tag).await?;
            let stopped = Stopped {
                failure,
                plan: &plan.name,
                language: plan.language,
                remaining: Vec::new(),
                spec,
                known,
            };
            let end = fall_back(session, request, record, stopped, step).await?;
            return Ok(Attempt::Done(end));
        };
        record_repair(session, record, &mut tried, rule, &repair, &matched);
        // A test-run repair adds setup steps, which run before the next commit, or changes the
        // test command. The baseline ran in a container of its own, so this one is still the
        // committed image.
        let steps = match repair {
            Repair::Before(steps) => steps,
            Repair::Tests(test) => {
                work.test.set(test, record);
                Vec::new()
            }
            _ => {
                runtime.remove_image(&request.image_tag).await?;
                return Ok(Attempt::Done(Some(failure)));
            }
        };
        for setup_step in steps {
            let command = setup_step.render();
            step(short(&command));
            let outcome = run_or_fail(
                session,
                &command,
                request.settings.command_timeout,
                FailureClass::Build,
            )
            .await?;
            let outcome = match outcome {
                Ok(outcome) => outcome,
                Err(stopped) => {
                    runtime.remove_image(&request.image_tag).await?;
                    return Ok(Attempt::Done(Some(stopped)));
                }
            };
            if outcome.exit_code != 0 {
                runtime.remove_image(&request.image_tag).await?;
                return Ok(Attempt::Done(Some(failure)));
            }
            note_repair_output(record, &outcome.output, repaired_from);
            record.setup_commands.push(command);
        }
    }
}

/// The test command of an attempt, kept typed for the repairs and rendered into the row
/// whenever it changes.
struct TestCommandSlot {
    command: crate::steps::TestCommand,
}

impl TestCommandSlot {
    fn new(command: crate::steps::TestCommand, record: &mut EnvironmentRecord) -> Self {
        record.test_command = command.render();
        Self { command }
    }

    /// A repaired command; what the plan runs before the tests (services, the CI's variables)
    /// stays.
    fn set(&mut self, mut command: crate::steps::TestCommand, record: &mut EnvironmentRecord) {
        if command.prelude.is_empty() {
            command.prelude.clone_from(&self.command.prelude);
        }
        record.test_command = command.render();
        self.command = command;
    }
}

/// Builds the plan's base image unless it exists. Builds are serialised: concurrent items
/// usually want the same image, and building it twice at once wastes minutes. The base images
/// are kiln's own Dockerfiles, so a failed build is the machine's failure (no registry, no
/// network), never the repository's: it stops the stage.
async fn ensure_image(
    runtime: &dyn ContainerRuntime,
    image: &kiln_core::ImageBuild,
    log_dir: &std::path::Path,
) -> Result<(), RuntimeError> {
    static BUILDS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _guard = BUILDS.lock().await;
    let mut log = Vec::new();
    let mut sink = |bytes: &[u8]| log.extend_from_slice(bytes);
    let built = images::ensure_image(runtime, image, &mut sink).await;
    if !log.is_empty() {
        let _ = std::fs::write(log_dir.join("image-build.log"), &log);
    }
    built.map(|_| ())
}

fn short(command: &str) -> &str {
    let end = command
        .char_indices()
        .nth(60)
        .map_or(command.len(), |(i, _)| i);
    &command[..end]
}
