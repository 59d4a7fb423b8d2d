//! One test run: a fresh container from an environment image, patches applied, rebuild
//! commands, the test command, its output parsed. Validation and evaluation both use it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kiln_core::config::DockerSettings;
use kiln_core::runtime::WORKDIR;
use kiln_core::{ContainerRuntime, ContainerSpec, NetworkMode, Removals, RuntimeError, Session};
use kiln_schema::{FailureClass, TestStatuses};

use crate::patch;

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
    /// `name:method` for each applied patch.
    pub patch_methods: Vec<String>,
    /// Seconds of the test command alone.
    pub test_seconds: f64,
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
        Self::Engine(e)
    }
}

/// Runs the tests once in a fresh container, which is removed whatever happens (in the
/// background when the spec says where removals go).
///
/// # Errors
/// See [`RunFailure`].
pub async fn run_tests(
    runtime: Arc<dyn ContainerRuntime>,
    spec: &RunSpec<'_>,
) -> Result<RunOutput, RunFailure> {
    let container = ContainerSpec {
        image: spec.image.to_string(),
        env: Vec::new(),
        labels: spec.labels.clone(),
        limits: spec.docker.limits(),
        network: spec.network,
        workdir: Some(WORKDIR.into()),
        max_lifetime: spec.timeout * 2 + Duration::from_secs(600),
    };
    let mut session = Session::start(runtime, &container, &spec.log).await?;
    let result = run_in(&mut session, spec).await;
    match spec.removals {
        Some(removals) => session.close_later(removals),
        None => session.close().await?,
    }
    result
}

/// Room for the test log: the whole of it is parsed, so the cap only guards against runaway
/// output.
const OUTPUT_CAP: usize = 256 << 20;

async fn run_in(session: &mut Session, spec: &RunSpec<'_>) -> Result<RunOutput, RunFailure> {
    let script = patch::RunScript::new(&spec.patches);
    session
        .write_files(&patch::RunScript::files(&spec.patches))
        .await?;
    // One timeout for the whole script: patching and rebuilding take a fraction of the tests.
    let timeout = spec.timeout + spec.timeout / 2;
    let outcome = session
        .run_capped(
            &script.script(spec.rebuild, spec.test_command),
            timeout,
            OUTPUT_CAP,
        )
        .await?;
    if outcome.oom_killed {
        return Err(RunFailure::Item(
            FailureClass::Oom,
            "the run ran out of memory".into(),
        ));
    }
    match script.read(&outcome.output) {
        patch::ScriptResult::PatchFailed(name) => Err(RunFailure::Item(
            FailureClass::PatchApply,
            format!(
                "the {name} patch applies with none of git apply, git apply --3way, patch --fuzz"
            ),
        )),
        patch::ScriptResult::RebuildFailed { index, code } => Err(RunFailure::Item(
            FailureClass::Build,
            format!(
                "rebuild command `{}` exited {code}",
                spec.rebuild.get(index).map_or("?", String::as_str)
            ),
        )),
        patch::ScriptResult::Unfinished { test_started } => {
            let what = if test_started {
                "the test command"
            } else {
                "patching and rebuilding"
            };
            let class = if outcome.timed_out {
                FailureClass::Timeout
            } else {
                FailureClass::TestRun
            };
            Err(RunFailure::Item(
                class,
                format!(
                    "{what} did not finish (exit {} after {:.0}s)",
                    outcome.exit_code,
                    outcome.duration.as_secs_f64()
                ),
            ))
        }
        patch::ScriptResult::Tested {
            patch_methods,
            exit_code,
            seconds,
            output,
        } => {
            let parsed = kiln_testlog::parse(spec.parser, &output)
                .map_err(|e| RunFailure::Item(FailureClass::TestRun, e.to_string()))?
                .relative_to(WORKDIR);
            Ok(RunOutput {
                exit_code,
                statuses: parsed.statuses,
                parse_problems: parsed.problems,
                patch_methods,
                test_seconds: seconds,
            })
        }
    }
}
