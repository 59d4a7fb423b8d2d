//! Parser scripts: a small `sh` script that reads a test command's captured output on its
//! standard input and prints one `[PASSED] id` (`[FAILED]`, `[SKIPPED]`, `[ERROR]`) line per
//! test, for frameworks no library parser reads. The launch agent writes them; launch,
//! validation and evaluation run them.
//!
//! A script always runs in a fresh container from the environment image, with the output copied
//! in, never in the container the tests ran in: what a test run leaves behind (a replaced
//! interpreter, an edited script) cannot change how its output is read.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::cpu::{CpuLedger, CpuPhase};
use crate::runtime::{ContainerRuntime, ContainerSpec, ExecOutcome, NetworkMode, RuntimeError};
use crate::session::Session;

/// Where the script is written in a container.
pub const SCRIPT_PATH: &str = "/tmp/kiln-parser.sh";

/// Where the captured test output is written in a container.
pub const OUTPUT_PATH: &str = "/tmp/kiln-test-output.log";

/// How long a script may take: it reads one log.
pub const TIMEOUT: Duration = Duration::from_secs(120);

/// The command that runs the script over the output, both already written.
#[must_use]
pub fn command() -> String {
    format!("sh {SCRIPT_PATH} < {OUTPUT_PATH}")
}

/// Runs `script` over `test_output` in a fresh container of `spec` (its network is taken away),
/// logging to `log`, its CPU time charged to `cpu` when given. The outcome's output is what
/// the script printed.
///
/// # Errors
/// Engine failures only; a failing script is an outcome with its exit code.
pub async fn run(
    runtime: Arc<dyn ContainerRuntime>,
    spec: &ContainerSpec,
    script: &str,
    test_output: &str,
    log: &Path,
    cpu: Option<(&CpuLedger, CpuPhase)>,
) -> Result<ExecOutcome, RuntimeError> {
    let spec = ContainerSpec {
        network: NetworkMode::None,
        max_lifetime: TIMEOUT + Duration::from_secs(60),
        ..spec.clone()
    };
    let mut session = Session::start(runtime, &spec, log).await?;
    if let Some((ledger, phase)) = cpu {
        session.charge_to(ledger, phase);
    }
    let ran = async {
        session
            .write_files(&[
                (SCRIPT_PATH.to_string(), script.as_bytes()),
                (OUTPUT_PATH.to_string(), test_output.as_bytes()),
            ])
            .await?;
        session
            .run_capped(&command(), TIMEOUT, crate::session::TEST_OUTPUT_CAP)
            .await
    }
    .await;
    let closed = session.close().await;
    let outcome = ran?;
    closed?;
    Ok(outcome)
}
