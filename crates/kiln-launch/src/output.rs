//! Reading a test run's output as its row says: the row's library parser, or its parser script
//! in a fresh container. Launch's baseline, the Dockerfile check and the agent's `finish` read
//! output this way.

use std::path::Path;
use std::sync::Arc;

use kiln_core::runtime::WORKDIR;
use kiln_core::session::tail;
use kiln_core::{ContainerRuntime, ContainerSpec, CpuLedger, CpuPhase, ExecOutcome, RuntimeError};
use kiln_schema::EnvironmentRecord;
use kiln_testlog::ParsedLog;

/// Reads a test run's output as the row says: with its library parser, or, when the row has a
/// parser script, with the script in a fresh container from `image` (logged to `log`), whose
/// statuses must agree with the run's exit code, with the totals it read, and with kiln's own
/// parser where one reads the output; the script's CPU time goes to `cpu` when given.
/// `Ok(Err(..))` says why the output cannot be read.
///
/// # Errors
/// Engine failures only.
pub(crate) async fn read_output(
    runtime: &Arc<dyn ContainerRuntime>,
    record: &EnvironmentRecord,
    image: &ContainerSpec,
    outcome: &ExecOutcome,
    log: &Path,
    cpu: Option<(&CpuLedger, CpuPhase)>,
) -> Result<Result<ParsedLog, String>, RuntimeError> {
    let Some(script) = &record.parser_script else {
        return Ok(kiln_testlog::parse(&record.parser, &outcome.output)
            .map(|parsed| parsed.relative_to(WORKDIR))
            .map_err(|e| e.to_string()));
    };
    let ran = kiln_core::parser_script::run(
        Arc::clone(runtime),
        image,
        script,
        &outcome.output,
        log,
        cpu,
    )
    .await?;
    if ran.exit_code != 0 {
        return Ok(Err(format!(
            "the parser script exited {}:\n{}",
            ran.exit_code,
            tail(&ran.output, 20)
        )));
    }
    let parsed = match kiln_testlog::parse("status-lines", &ran.output) {
        Ok(parsed) => parsed.relative_to(WORKDIR),
        Err(e) => return Ok(Err(e.to_string())),
    };
    Ok(
        match kiln_testlog::status_lines::contradiction(&parsed, outcome.exit_code).or_else(|| {
            kiln_testlog::agree::disagreement(&parsed, &outcome.output, &record.test_command)
        }) {
            Some(why) => Err(why),
            None => Ok(parsed),
        },
    )
}
