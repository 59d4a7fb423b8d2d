//! Evaluation of predicted patches against a released instance, on the scripted runtime.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kiln_core::config::DockerSettings;
use kiln_core::{ContainerRuntime, NetworkMode, RuntimeError};
use kiln_schema::ReleaseInstance;
use kiln_testkit::runtime::{Answer, Operation, Script, ScriptedRuntime};
use kiln_validate::{EvaluateRequest, Evaluation, Resolution, evaluate};

use crate::{IMAGE, NEW, OLD, TEST_COMMAND, TEST_PATCH, applies, assert_live_containers_removed};

/// A second test the gold patch fixes.
const NEWER: &str = "tests/test_demo.py::test_newer";

/// A predicted patch.
const MODEL_PATCH: &str = "diff --git a/src/demo.py b/src/demo.py\n--- a/src/demo.py\n+++ b/src/demo.py\n@@ -1,2 +1,2 @@\n def fixed():\n-    return False\n+    return 1 == 1\n";

/// Evaluates `model_patch` against the demo instance on `runtime`; every container it made
/// must be gone afterwards.
async fn evaluate_on(
    runtime: &Arc<ScriptedRuntime>,
    model_patch: Option<&str>,
) -> Result<Evaluation, RuntimeError> {
    evaluate_image(runtime, model_patch, IMAGE, None).await
}

/// [`evaluate_on`] of a release row naming `image`, with `digest` recorded.
async fn evaluate_image(
    runtime: &Arc<ScriptedRuntime>,
    model_patch: Option<&str>,
    image: &str,
    digest: Option<String>,
) -> Result<Evaluation, RuntimeError> {
    let tmp = tempfile::tempdir().unwrap();
    let request = EvaluateRequest {
        instance: ReleaseInstance {
            repo: "scripted/demo".into(),
            image: image.into(),
            image_digest: digest,
            test_patch: TEST_PATCH.into(),
            test_cmds: vec![TEST_COMMAND.into()],
            parser: "pytest".into(),
            rebuild_cmds: vec!["make -j2".into()],
            FAIL_TO_PASS: vec![NEW.into(), NEWER.into()].into(),
            PASS_TO_PASS: vec![OLD.into()].into(),
            ..ReleaseInstance::new(kiln_schema::InstanceId::new("scripted__demo-1").unwrap())
        },
        model_patch: model_patch.map(str::to_string),
        docker: DockerSettings::default(),
        network: NetworkMode::None,
        timeout: Duration::from_secs(300),
        log_dir: tmp.path().to_path_buf(),
        labels: BTreeMap::new(),
    };
    let engine: Arc<dyn ContainerRuntime> = Arc::clone(runtime) as _;
    let result = evaluate(engine, &request).await;
    assert_live_containers_removed(runtime).await;
    result
}

/// The test run after the predicted patch.
fn after_model() -> Script {
    Script::contains(TEST_COMMAND).after(applies("model"))
}

#[tokio::test]
async fn a_patch_that_fixes_every_test_is_resolved() {
    let runtime = crate::runtime();
    runtime.script(after_model().answer(Answer::pytest(&[
        (NEW, "PASSED"),
        (NEWER, "PASSED"),
        (OLD, "PASSED"),
    ])));
    let evaluation = evaluate_on(&runtime, Some(MODEL_PATCH)).await.unwrap();
    assert_eq!(
        evaluation.resolution,
        Resolution::Resolved,
        "{:?}",
        evaluation.reason
    );
    assert_eq!(evaluation.reason, None);
    assert_eq!(evaluation.fail_to_pass_passed, [NEW, NEWER]);
    assert!(evaluation.fail_to_pass_failed.is_empty());
    assert_eq!(
        evaluation.patch_methods,
        ["test:git-apply", "model:git-apply"]
    );
    assert_eq!(evaluation.exit_code, Some(0));
    // The test patch, the prediction, the rebuild, the tests: in one fresh container.
    let containers = runtime.containers();
    assert_eq!(containers.len(), 1);
    let commands = containers[0].commands();
    assert!(commands[0].contains(&applies("test")));
    assert!(commands[1].contains(&applies("model")));
    assert_eq!(&commands[2..], ["make -j2", TEST_COMMAND]);
    assert_eq!(
        containers[0].file("/tmp/kiln/model.patch").as_deref(),
        Some(MODEL_PATCH.as_bytes())
    );
}

#[tokio::test]
async fn a_patch_that_fixes_nothing_or_breaks_a_passing_test_is_unresolved() {
    let runtime = crate::runtime();
    runtime.script(after_model().answer(Answer::pytest(&[
        (NEW, "FAILED"),
        (NEWER, "FAILED"),
        (OLD, "PASSED"),
    ])));
    let evaluation = evaluate_on(&runtime, Some(MODEL_PATCH)).await.unwrap();
    assert_eq!(evaluation.resolution, Resolution::Unresolved);
    assert_eq!(evaluation.fail_to_pass_failed, [NEW, NEWER]);
    assert_eq!(
        evaluation.reason.as_deref(),
        Some("0 of 2 FAIL_TO_PASS pass; 0 PASS_TO_PASS fail")
    );

    // Every FAIL_TO_PASS test passes, but a PASS_TO_PASS test broke.
    let runtime = crate::runtime();
    runtime.script(after_model().answer(Answer::pytest(&[
        (NEW, "PASSED"),
        (NEWER, "PASSED"),
        (OLD, "FAILED"),
    ])));
    let evaluation = evaluate_on(&runtime, Some(MODEL_PATCH)).await.unwrap();
    assert_eq!(evaluation.resolution, Resolution::Unresolved);
    assert_eq!(evaluation.pass_to_pass_failed, [OLD]);
}

#[tokio::test]
async fn a_patch_that_fixes_some_tests_is_partial() {
    let runtime = crate::runtime();
    runtime.script(after_model().answer(Answer::pytest(&[(NEW, "PASSED"), (NEWER, "FAILED")])));
    let evaluation = evaluate_on(&runtime, Some(MODEL_PATCH)).await.unwrap();
    assert_eq!(evaluation.resolution, Resolution::Partial);
    assert_eq!(evaluation.fail_to_pass_passed, [NEW]);
    assert_eq!(evaluation.fail_to_pass_failed, [NEWER]);
    // A PASS_TO_PASS test missing from the log does not count against the patch.
    assert_eq!(evaluation.pass_to_pass_missing, [OLD]);
    assert!(evaluation.pass_to_pass_failed.is_empty());
}

#[tokio::test]
async fn a_patch_that_applies_nowhere_is_a_patch_apply_failure() {
    let runtime = crate::runtime();
    runtime.script(Script::contains(applies("model")).answer(Answer::exit(1)));
    let evaluation = evaluate_on(&runtime, Some(MODEL_PATCH)).await.unwrap();
    assert_eq!(evaluation.resolution, Resolution::PatchApplyFailure);
    assert!(
        evaluation
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("the model patch applies with none of")),
        "{:?}",
        evaluation.reason
    );
    assert_eq!(evaluation.exit_code, None);
    assert!(!runtime.commands().iter().any(|c| c == TEST_COMMAND));
}

#[tokio::test]
async fn a_missing_image_is_an_infra_failure_and_other_engine_failures_are_errors() {
    // The engine does not have the release's image: nothing is said about the patch.
    let runtime = Arc::new(ScriptedRuntime::new());
    let evaluation = evaluate_on(&runtime, Some(MODEL_PATCH)).await.unwrap();
    assert_eq!(evaluation.resolution, Resolution::InfraFailure);
    assert_eq!(
        evaluation.reason.as_deref(),
        Some(
            format!(
                "the environment image {IMAGE} is not on the engine, nor on a registry its name is on"
            )
            .as_str()
        )
    );
    assert_eq!(
        runtime.count(Operation::PullImage),
        0,
        "a local name is not pulled"
    );

    // A name on a registry is pulled when the engine lacks it; a digest the pulled image does
    // not have is refused.
    let registry_image = "localhost:5000/kiln/env:1";
    let runtime = crate::runtime();
    let pulled = evaluate_image(&runtime, Some(MODEL_PATCH), registry_image, None)
        .await
        .unwrap();
    assert_eq!(runtime.count(Operation::PullImage), 1);
    assert_ne!(pulled.resolution, Resolution::InfraFailure, "{pulled:?}");
    let runtime = crate::runtime();
    let changed = evaluate_image(
        &runtime,
        Some(MODEL_PATCH),
        registry_image,
        Some("sha256:recorded".into()),
    )
    .await
    .unwrap();
    assert_eq!(changed.resolution, Resolution::InfraFailure);
    assert!(
        changed
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("as the recorded sha256:recorded")),
        "{changed:?}"
    );

    // An engine that goes away mid-run stops the evaluation.
    let runtime = crate::runtime();
    runtime.fail(
        Operation::Exec,
        3,
        RuntimeError::Unreachable {
            endpoint: "unix:///var/run/docker.sock".into(),
            message: "connection reset by peer".into(),
        },
    );
    let result = evaluate_on(&runtime, Some(MODEL_PATCH)).await;
    assert!(
        matches!(result, Err(RuntimeError::Unreachable { .. })),
        "{result:?}"
    );
}

#[tokio::test]
async fn an_instance_without_a_prediction_is_unresolved_without_a_run() {
    let runtime = crate::runtime();
    let evaluation = evaluate_on(&runtime, None).await.unwrap();
    assert_eq!(evaluation.resolution, Resolution::Unresolved);
    assert_eq!(
        evaluation.reason.as_deref(),
        Some("no prediction for this instance")
    );
    assert_eq!(runtime.count(Operation::Create), 0);
}
