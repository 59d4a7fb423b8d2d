//! One attempt of the plan in a container: the checkout put in place, the setup phase, the
//! baseline phase.

use std::sync::Arc;

use kiln_core::runtime::WORKDIR;
use kiln_core::{RuntimeError, Session};
use kiln_schema::{EnvironmentRecord, FailureClass};

use super::baseline::run_baseline;
use super::phases::Phases;
use super::reuse::{CLEAR_CHECKOUT, DELTA_DIR, Reused, run_checkout_script};
use super::setup::{run_setup, skip_layered};
use super::work::{Attempt, Attempted, Work};
use crate::ecosystems;
use crate::request::LaunchRequest;
use crate::verify::Failure;

/// Runs one attempt of the plan in the session's container, from the checkout archive `tar`
/// (the whole checkout, or the delta from a reused environment's).
///
/// # Errors
/// Engine failures only.
pub(super) async fn run_plan(
    session: &mut Session,
    request: &LaunchRequest,
    record: &mut EnvironmentRecord,
    attempted: Attempted<'_>,
    tar: Vec<u8>,
    step: &(dyn Fn(&str) + Sync),
    phases: &mut Phases,
) -> Result<Attempt, RuntimeError> {
    if let Some(failed) = place_checkout(session, record, attempted, tar).await? {
        return Ok(Attempt::Done(Some(failed)));
    }
    phases.end("copy-in");
    let mut work = Work::new(attempted.plan, record);
    skip_layered(session, record, &mut work, attempted.layered);
    if let Some(end) = run_setup(session, request, record, attempted, &mut work, step).await? {
        return Ok(end);
    }
    phases.end("setup");
    let end = run_baseline(session, request, record, attempted, &mut work, step).await?;
    if matches!(end, Attempt::Done(None)) {
        phases.end("commit+tests");
    }
    Ok(end)
}

/// Puts this commit's checkout in the container: an earlier commit's checkout gives way to it
/// (by git from a delta, or cleared for a whole copy when a submodule changed), and when every
/// setup step runs again, what the reused environment's installs left that steers them is
/// cleared. `Some` failure when that did not work (a reused attempt then goes cold).
async fn place_checkout(
    session: &mut Session,
    record: &mut EnvironmentRecord,
    attempted: Attempted<'_>,
    tar: Vec<u8>,
) -> Result<Option<Failure>, RuntimeError> {
    let runtime = Arc::clone(session.runtime());
    let reused = attempted.reused;
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
        return Ok(Some(failed));
    }
    match runtime.copy_in(session.id(), "/", tar).await {
        Ok(()) => {}
        // The engine could not unpack this checkout: this item's row, the stage goes on.
        Err(e @ RuntimeError::Refused { .. }) => {
            return Ok(Some(Failure::new(
                FailureClass::Infra,
                None,
                &format!("failed to {e}"),
            )));
        }
        Err(e) => return Err(e),
    }
    if let Some(script) = &after
        && let Some(failed) = run_checkout_script(session, script).await?
    {
        return Ok(Some(failed));
    }
    // Every step runs again (a dependency manifest changed, or the source resolved at another
    // date): the installs must resolve as a cold launch does, not keep the source's versions.
    if let Some(Reused { skip: None, .. }) = reused
        && let Some(fresh) = ecosystems::fresh_install(attempted.ecosystem)
    {
        session
            .note("# reuse: dependencies are installed afresh; what the source's left is cleared");
        let script = format!("cd {WORKDIR} && {}", (fresh.script)());
        if let Some(failed) = run_checkout_script(session, &script).await? {
            return Ok(Some(failed));
        }
        record.version_reason.push_str(&format!(
            "; reuse: dependencies installed afresh (cleared from the source's environment: {})",
            fresh.clears
        ));
    }
    Ok(None)
}

/// Builds the plan's base image unless it exists. Builds are serialised: concurrent items
/// usually want the same image, and building it twice at once wastes minutes. The base images
/// are kiln's own Dockerfiles, so a failed build is the machine's failure (no registry, no
/// network), never the repository's: it stops the stage.
pub(super) async fn ensure_image(
    runtime: &dyn kiln_core::ContainerRuntime,
    image: &kiln_core::ImageBuild,
    log_dir: &std::path::Path,
) -> Result<(), RuntimeError> {
    static BUILDS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _guard = BUILDS.lock().await;
    let mut log = Vec::new();
    let mut sink = |bytes: &[u8]| log.extend_from_slice(bytes);
    let built = crate::images::ensure_image(runtime, image, &mut sink).await;
    if !log.is_empty() {
        let _ = std::fs::write(log_dir.join("image-build.log"), &log);
    }
    built.map(|_| ())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use kiln_core::checkout::Tree;
    use kiln_core::{ContainerRuntime, ContainerSpec};
    use kiln_testkit::runtime::{Operation, ScriptedRuntime};

    use super::*;
    use crate::ecosystems::Ecosystem;
    use crate::environment::Known;
    use crate::plan::testutil::plan_of;

    #[tokio::test]
    async fn a_reused_checkout_is_moved_by_its_delta_and_a_refused_archive_is_the_items_failure() {
        let tmp = tempfile::tempdir().unwrap();
        let runtime = Arc::new(ScriptedRuntime::new());
        runtime.add_image("img");
        let engine: Arc<dyn ContainerRuntime> = Arc::clone(&runtime) as _;
        let spec = ContainerSpec {
            image: "img".into(),
            ..ContainerSpec::default()
        };
        let plan = plan_of(
            crate::ecosystems::python::plan,
            &[(
                "setup.py",
                "from setuptools import setup\nsetup(name='x')\n",
            )],
            None,
        )
        .unwrap();
        let known = Known {
            tree: Arc::new(Tree::default()),
            test_files: Vec::new(),
            rewrites: &[],
            language: "python",
        };
        let reused = Reused {
            delta: true,
            skip: None,
        };
        let attempted = Attempted {
            ecosystem: Ecosystem(&crate::ecosystems::python::ENTRY),
            plan: &plan,
            spec: &spec,
            known: &known,
            layered: None,
            reused: Some(reused),
        };
        let mut record = EnvironmentRecord::new(kiln_schema::InstanceId::new("o__r-1").unwrap());
        let mut session = Session::start(Arc::clone(&engine), &spec, &tmp.path().join("log"))
            .await
            .unwrap();
        let tar =
            kiln_core::session::tar_files(&[("/tmp/kiln-reuse/pack".into(), b"p".as_slice())])
                .unwrap();
        let failed = place_checkout(&mut session, &mut record, attempted, tar.clone())
            .await
            .unwrap();
        assert!(failed.is_none(), "{:?}", failed.map(|f| f.log_tail));
        let commands = runtime.commands();
        // The delta is applied by git after it is copied in, then the reused installs' state is
        // cleared (every step runs again: nothing is skipped).
        assert!(commands[0].contains("git index-pack"), "{commands:?}");
        assert!(
            record.version_reason.contains("installed afresh"),
            "{}",
            record.version_reason
        );
        runtime.fail(
            Operation::CopyIn,
            2,
            RuntimeError::Refused {
                operation: "copy the checkout in".into(),
                message: "unknown entry type".into(),
            },
        );
        let cold = Attempted {
            reused: None,
            ..attempted
        };
        let failed = place_checkout(&mut session, &mut record, cold, tar)
            .await
            .unwrap()
            .expect("a refused archive fails the attempt");
        assert_eq!(failed.class, FailureClass::Infra);
        let _ = session.close().await;
    }
}
