//! One test run: a fresh container from an environment image, patches applied, rebuild
//! commands, the test command, its output parsed. Validation and evaluation both use it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kiln_core::config::DockerSettings;
use kiln_core::runtime::WORKDIR;
use kiln_core::{
    ContainerRuntime, ContainerSpec, CpuPhase, NetworkMode, Removals, RuntimeError, Session,
};
use kiln_schema::{FailureClass, TestStatuses};

use kiln_core::apply as patch;

/// What to run.
#[derive(Debug, Clone)]
pub struct RunSpec<'a> {
    /// Environment image.
    pub image: &'a str,
    /// Patches to apply in order, by name (`test`, `gold`, `model`); empty ones are skipped.
    pub patches: Vec<(&'a str, &'a str)>,
    /// Commands to run after patching, before the tests.
    pub rebuild: &'a [String],
    /// The test command.
    pub test_command: &'a str,
    /// Parser of the test output.
    pub parser: &'a str,
    /// The row's parser script, for `status-lines` rows: it reads the output in a fresh
    /// container and its statuses must agree with the exit code.
    pub parser_script: Option<&'a str>,
    /// Container limits.
    pub docker: &'a DockerSettings,
    /// Network of the container.
    pub network: NetworkMode,
    /// Timeout of the test command (and of each rebuild command).
    pub timeout: Duration,
    /// Log file of the run.
    pub log: PathBuf,
    /// Container labels.
    pub labels: &'a BTreeMap<String, String>,
    /// Where the container's removal goes; `None` removes it before returning.
    pub removals: Option<&'a Removals>,
    /// Whether to read the output as the SWE-bench harness would too (validation, to choose the
    /// row's `log_parser`): the parser's id script then runs in a container of its own.
    pub harness_view: bool,
    /// What the checkout must hold when the tests start (validation): the tree the run's
    /// patches left on the host. Checked after the rebuild commands, before the test command,
    /// from the engine's account of the container ([`kiln_core::checkout::check_run`]).
    pub expected: Option<kiln_core::checkout::Expected<'a>>,
    /// Where the run's CPU time is charged: the build to
    /// [`CpuPhase::ValidationBuild`](kiln_core::CpuPhase), the tests and their parser script to
    /// [`CpuPhase::ValidationTests`](kiln_core::CpuPhase).
    pub cpu: Option<&'a kiln_core::CpuLedger>,
}

/// What a finished run produced.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutput {
    /// Exit code of the test command.
    pub exit_code: i64,
    /// Parsed statuses.
    pub statuses: TestStatuses,
    /// Problems the parser noticed (totals that do not add up).
    pub parse_problems: Vec<String>,
    /// Failing tests whose failure the log puts down to a missing network
    /// ([`kiln_testlog::ParsedLog::offline`]).
    pub offline: std::collections::BTreeSet<String>,
    /// `name:method` for each applied patch.
    pub patch_methods: Vec<String>,
    /// Seconds of the test command alone.
    pub test_seconds: f64,
    /// The output as each SWE-bench harness parser that may read it reads it
    /// ([`kiln_testlog::swebench::harness_parsers`] of the run's parser).
    pub harness: Vec<(&'static str, kiln_testlog::swebench::HarnessStatuses)>,
}

/// Why a run produced no output.
#[derive(Debug)]
pub enum RunFailure {
    /// The engine failed; unreachable engines stop the stage.
    Engine(RuntimeError),
    /// The item failed: a patch that applies nowhere, a rebuild that fails, a timeout.
    Item(FailureClass, String),
}

impl From<RuntimeError> for RunFailure {
    fn from(e: RuntimeError) -> Self {
        match e {
            // The engine still answers and refused this item's input: the item's row.
            e @ RuntimeError::Refused { .. } => {
                Self::Item(FailureClass::Infra, format!("failed to {e}"))
            }
            // What ran wrote past the container's disk bound.
            e @ RuntimeError::DiskExceeded { .. } => {
                Self::Item(FailureClass::Disk, format!("failed to {e}"))
            }
            e => Self::Engine(e),
        }
    }
}

/// The id script of the run's parser ([`kiln_testlog::swebench::id_script`]) when the run is
/// read as the harness reads it, unless the row has a parser script of its own.
fn id_script(spec: &RunSpec<'_>) -> Option<String> {
    if spec.parser_script.is_some() || !spec.harness_view {
        return None;
    }
    kiln_testlog::swebench::id_script(spec.parser)
}

/// Runs the tests once in a fresh container, which is removed whatever happens (in the
/// background when the spec says where removals go): patches, rebuild commands, the check of
/// what the checkout holds, the test command, in one container. Evaluation runs each predicted
/// patch so; validation builds each side once ([`build_side`]) and runs its tests in fresh
/// containers from that build ([`test_run`]).
///
/// Every step is a command of its own: each patch ([`patch::apply_script`]), each rebuild
/// command, the test command. What decides the run is taken from the engine, out of band:
/// each command's exit code as the engine reports it for that command's process, and the test
/// command's own output. There is no marker to forge and no secret to read: the code under test
/// can print anything and still not change an exit code, and the runner's scripts and patch
/// files are gone before it runs.
///
/// # Errors
/// See [`RunFailure`].
pub async fn run_tests(
    runtime: Arc<dyn ContainerRuntime>,
    spec: &RunSpec<'_>,
) -> Result<RunOutput, RunFailure> {
    let container = container_spec(spec, spec.image);
    let mut session = Session::start(Arc::clone(&runtime), &container, &spec.log).await?;
    charge(&mut session, spec, CpuPhase::ValidationBuild);
    let result = async {
        let patch_methods = prepare(&mut session, spec).await?;
        session.set_phase(CpuPhase::ValidationTests);
        let outcome = run_test_command(&mut session, spec).await?;
        Ok::<_, RunFailure>((outcome, patch_methods))
    }
    .await;
    close(session, spec).await?;
    let (outcome, patch_methods) = result?;
    read_run(runtime, &container, spec, &outcome, patch_methods).await
}

/// One side's build: its patches applied and its rebuild commands run once, the checkout
/// checked, the container committed to `tag` (labelled scratch, for the caller to remove).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SideBuild {
    /// The committed image's id (or `tag` when the engine gives none).
    pub image: String,
    /// `name:method` for each applied patch.
    pub patch_methods: Vec<String>,
}

/// Applies a side's patches and runs its rebuild commands once, in a fresh container from
/// `spec.image`, checks what the checkout holds, and commits the container to `tag` with
/// `labels`: every test run of the side then starts from that commit ([`test_run`]) instead of
/// compiling the same source again.
///
/// # Errors
/// See [`RunFailure`].
pub async fn build_side(
    runtime: Arc<dyn ContainerRuntime>,
    spec: &RunSpec<'_>,
    tag: &str,
    labels: &BTreeMap<String, String>,
) -> Result<SideBuild, RunFailure> {
    let container = container_spec(spec, spec.image);
    let mut session = Session::start(Arc::clone(&runtime), &container, &spec.log).await?;
    charge(&mut session, spec, CpuPhase::ValidationBuild);
    let result = async {
        let patch_methods = prepare(&mut session, spec).await?;
        let image = session.commit(tag, labels).await?;
        Ok::<_, RunFailure>(SideBuild {
            image: if image.is_empty() {
                tag.to_string()
            } else {
                image
            },
            patch_methods,
        })
    }
    .await;
    close(session, spec).await?;
    result
}

/// Runs the test command once, alone, in a fresh container from a side's build, and reads its
/// output as [`run_tests`] does.
///
/// # Errors
/// See [`RunFailure`].
pub async fn test_run(
    runtime: Arc<dyn ContainerRuntime>,
    spec: &RunSpec<'_>,
    build: &SideBuild,
) -> Result<RunOutput, RunFailure> {
    let container = container_spec(spec, &build.image);
    let mut session = Session::start(Arc::clone(&runtime), &container, &spec.log).await?;
    charge(&mut session, spec, CpuPhase::ValidationTests);
    let result = run_test_command(&mut session, spec).await;
    close(session, spec).await?;
    let outcome = result?;
    read_run(
        runtime,
        &container,
        spec,
        &outcome,
        build.patch_methods.clone(),
    )
    .await
}

/// Runs the spec's test command once, alone, in a fresh container from a side's build, and
/// gives its outcome unread (a listing of tests, say).
///
/// # Errors
/// See [`RunFailure`].
pub async fn command_run(
    runtime: Arc<dyn ContainerRuntime>,
    spec: &RunSpec<'_>,
    build: &SideBuild,
) -> Result<kiln_core::ExecOutcome, RunFailure> {
    let container = container_spec(spec, &build.image);
    let mut session = Session::start(Arc::clone(&runtime), &container, &spec.log).await?;
    charge(&mut session, spec, CpuPhase::ValidationTests);
    let result = run_test_command(&mut session, spec).await;
    close(session, spec).await?;
    result
}

/// Charges the session's commands to the spec's ledger, if it has one, under `phase`.
fn charge(session: &mut Session, spec: &RunSpec<'_>, phase: CpuPhase) {
    if let Some(ledger) = spec.cpu {
        session.charge_to(ledger, phase);
    }
}

/// The container a run's steps run in, from `image`: the spec's limits, labels and network,
/// alive long enough for its patches, rebuild commands and tests.
fn container_spec(spec: &RunSpec<'_>, image: &str) -> ContainerSpec {
    let patches = patch::non_empty(&spec.patches);
    let steps = u32::try_from(spec.rebuild.len() + 2).unwrap_or(u32::MAX);
    ContainerSpec {
        image: image.to_string(),
        env: Vec::new(),
        labels: spec.labels.clone(),
        limits: spec.docker.limits(),
        network: spec.network,
        workdir: Some(WORKDIR.into()),
        max_lifetime: spec.timeout.saturating_mul(steps)
            + PATCH_TIMEOUT.saturating_mul(u32::try_from(patches.len()).unwrap_or(u32::MAX))
            + Duration::from_secs(600),
    }
}

/// Removes the run's container: in the background when the spec says where removals go.
async fn close(session: Session, spec: &RunSpec<'_>) -> Result<(), RunFailure> {
    match spec.removals {
        Some(removals) => session.close_later(removals),
        None => session.close().await?,
    }
    Ok(())
}

/// Reads a test command's output as the row says: its parser, or its parser script in a fresh
/// container (whose statuses must agree with the exit code and with kiln's own parser), and as
/// the SWE-bench harness would read it.
async fn read_run(
    runtime: Arc<dyn ContainerRuntime>,
    container: &ContainerSpec,
    spec: &RunSpec<'_>,
    outcome: &kiln_core::ExecOutcome,
    patch_methods: Vec<String>,
) -> Result<RunOutput, RunFailure> {
    let (parsed, script_output) = match spec.parser_script {
        None => (
            kiln_testlog::parse(spec.parser, &outcome.output)
                .map_err(|e| RunFailure::Item(FailureClass::TestRun, e.to_string()))?,
            None,
        ),
        Some(script) => {
            let ran = kiln_core::parser_script::run(
                Arc::clone(&runtime),
                container,
                script,
                &outcome.output,
                &spec.log.with_extension("parser.log"),
                spec.cpu.map(|ledger| (ledger, CpuPhase::ValidationTests)),
            )
            .await?;
            if ran.exit_code != 0 {
                return Err(RunFailure::Item(
                    FailureClass::InvalidRun,
                    format!("the parser script exited {}", ran.exit_code),
                ));
            }
            let parsed = kiln_testlog::parse("status-lines", &ran.output)
                .map_err(|e| RunFailure::Item(FailureClass::TestRun, e.to_string()))?;
            if let Some(why) = kiln_testlog::status_lines::contradiction(&parsed, outcome.exit_code)
                .or_else(|| {
                    kiln_testlog::agree::disagreement(&parsed, &outcome.output, spec.test_command)
                })
            {
                return Err(RunFailure::Item(FailureClass::InvalidRun, why));
            }
            (parsed, Some(ran.output))
        }
    };
    let parsed = parsed.relative_to(WORKDIR);
    // The harness reads the output as the eval script prints it: through kiln's output filter
    // where the row's parser has one, followed by the lines of the parser script or of the
    // parser's id script where it has one (run here as the eval script runs it, in the image).
    let script_output = match (script_output, id_script(spec)) {
        (Some(lines), _) => Some(lines),
        (None, Some(script)) => {
            let log = spec.log.with_extension("ids.log");
            let ran = kiln_core::parser_script::run(
                runtime,
                container,
                &script,
                &outcome.output,
                &log,
                spec.cpu.map(|ledger| (ledger, CpuPhase::ValidationTests)),
            )
            .await?;
            // A script that fails (no node in the image) prints no id: no harness parser then
            // agrees, and the row says which test it misses.
            Some(ran.output).filter(|_| ran.exit_code == 0)
        }
        (None, None) => None,
    };
    let harness_log = match script_output {
        Some(lines) => std::borrow::Cow::Owned(format!("{}\n{lines}", outcome.output)),
        None => kiln_testlog::swebench::harness_log(spec.parser, &outcome.output),
    };
    let harness = kiln_testlog::swebench::harness_parsers(spec.parser)
        .iter()
        .filter_map(|name| {
            kiln_testlog::swebench::harness_parse(name, &harness_log).map(|map| (*name, map))
        })
        .collect();
    Ok(RunOutput {
        harness,
        exit_code: outcome.exit_code,
        statuses: parsed.statuses,
        parse_problems: parsed.problems,
        offline: parsed.offline,
        patch_methods,
        test_seconds: outcome.duration.as_secs_f64(),
    })
}

/// Room for the test log: the whole of it is parsed.
const OUTPUT_CAP: usize = kiln_core::session::TEST_OUTPUT_CAP;

/// Time allowed to apply one patch: git and patch take seconds even on large repositories.
const PATCH_TIMEOUT: Duration = Duration::from_secs(600);

/// Runs `command`; a container that the command stopped (the code under test can end its
/// container's main process) is a failure of class `class`, any other engine error stops.
async fn step(
    session: &mut Session,
    command: &str,
    shown_as: &str,
    timeout: Duration,
    class: FailureClass,
) -> Result<kiln_core::ExecOutcome, RunFailure> {
    match session
        .run_shown_as(command, shown_as, timeout, OUTPUT_CAP)
        .await
    {
        Ok(outcome) if outcome.oom_killed => Err(RunFailure::Item(
            FailureClass::Oom,
            format!("`{}` ran out of memory", kiln_core::shown(shown_as)),
        )),
        Ok(outcome) => Ok(outcome),
        Err(e @ RuntimeError::ContainerStopped { .. }) => {
            Err(RunFailure::Item(class, format!("failed to {e}")))
        }
        Err(e @ RuntimeError::DiskExceeded { .. }) => Err(RunFailure::Item(
            FailureClass::Disk,
            format!("failed to {e}"),
        )),
        Err(e) => Err(RunFailure::Engine(e)),
    }
}

/// Applies the run's patches, runs its rebuild commands, and checks what the checkout then
/// holds (against the tree the host's apply left, when the spec has one); gives how each
/// patch applied.
async fn prepare(session: &mut Session, spec: &RunSpec<'_>) -> Result<Vec<String>, RunFailure> {
    let patches = patch::non_empty(&spec.patches);
    let mut patch_methods = Vec::new();
    for (name, text) in &patches {
        // Copied in just before its own command, which removes it: a patch is never on disk
        // while another runs.
        session
            .write_files(&[(patch::patch_path(name), text.as_bytes())])
            .await?;
        let outcome = step(
            session,
            &patch::apply_script(name),
            &format!("apply the {name} patch"),
            PATCH_TIMEOUT,
            FailureClass::PatchApply,
        )
        .await?;
        match patch::Applied::from_exit_code(outcome.exit_code) {
            patch::Applied::With(method) => {
                patch_methods.push(format!("{name}:{}", method.as_str()))
            }
            patch::Applied::Failed => {
                return Err(RunFailure::Item(
                    FailureClass::PatchApply,
                    format!(
                        "the {name} patch applies with none of git apply, git apply --3way, patch --fuzz"
                    ),
                ));
            }
            patch::Applied::Unfinished(code) => {
                let class = if outcome.timed_out {
                    FailureClass::Timeout
                } else {
                    FailureClass::PatchApply
                };
                return Err(RunFailure::Item(
                    class,
                    format!(
                        "applying the {name} patch did not finish (exit {code} after {:.0}s)",
                        outcome.duration.as_secs_f64()
                    ),
                ));
            }
        }
    }
    for command in spec.rebuild {
        let outcome = step(session, command, command, spec.timeout, FailureClass::Build).await?;
        if outcome.timed_out {
            return Err(RunFailure::Item(
                FailureClass::Timeout,
                format!(
                    "rebuild command `{}` did not finish within {:.0}s",
                    kiln_core::shown(command),
                    spec.timeout.as_secs_f64()
                ),
            ));
        }
        if outcome.exit_code != 0 {
            return Err(RunFailure::Item(
                FailureClass::Build,
                format!(
                    "rebuild command `{}` exited {}",
                    kiln_core::shown(command),
                    outcome.exit_code
                ),
            ));
        }
    }
    if let Some(expected) = spec.expected {
        let runtime = Arc::clone(session.runtime());
        if let Some(refusal) =
            kiln_core::checkout::check_run(runtime.as_ref(), session.id(), expected).await?
        {
            let class = match refusal {
                kiln_core::checkout::Refusal::Patched(_) => FailureClass::PatchApply,
                kiln_core::checkout::Refusal::TestConfiguration(_) => {
                    FailureClass::EnvironmentEditsTests
                }
                kiln_core::checkout::Refusal::Changed(_) => FailureClass::EnvironmentEditsCheckout,
            };
            return Err(RunFailure::Item(class, refusal.reason().to_string()));
        }
    }
    Ok(patch_methods)
}

/// Runs the test command; a run that did not finish within the timeout is the item's failure.
async fn run_test_command(
    session: &mut Session,
    spec: &RunSpec<'_>,
) -> Result<kiln_core::ExecOutcome, RunFailure> {
    let outcome = step(
        session,
        spec.test_command,
        spec.test_command,
        spec.timeout,
        FailureClass::TestRun,
    )
    .await?;
    if outcome.timed_out {
        return Err(RunFailure::Item(
            FailureClass::Timeout,
            format!(
                "the test command did not finish (exit {} after {:.0}s)",
                outcome.exit_code,
                outcome.duration.as_secs_f64()
            ),
        ));
    }
    Ok(outcome)
}

/// Whether the engine has `image` (an id or a name). When it lacks it and `name` is on a
/// registry (`host:port/...`, `registry.example.com/...`), `name` is pulled first: launch
/// pushed it there (`[docker] registry`), and the stages may run on different machines.
///
/// # Errors
/// When the engine fails.
pub async fn have_or_pull(
    runtime: &dyn ContainerRuntime,
    image: &str,
    name: &str,
) -> Result<bool, RuntimeError> {
    if runtime.image_exists(image).await? {
        return Ok(true);
    }
    if kiln_core::runtime::registry_of(name).is_none() {
        return Ok(false);
    }
    let mut sink = |_: &[u8]| {};
    if !runtime.pull_image(name, &mut sink).await? {
        return Ok(false);
    }
    runtime.image_exists(image).await
}
