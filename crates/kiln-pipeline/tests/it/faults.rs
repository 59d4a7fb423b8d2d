//! An engine that fails mid-stage stops the stage: no row is written for the items it was
//! working on, the stage and the run stay incomplete, and a re-run finds them still to do.

use std::path::Path;
use std::sync::Arc;

use kiln_core::config::Pipeline;
use kiln_core::{ContainerRuntime, NullReporter};
use kiln_pipeline::{PipelineError, RunOptions, RunSelection, Runner};
use kiln_schema::{EnvironmentRecord, ValidationRecord};
use kiln_store::Status;

use crate::engine::BrokenEngine;

/// The demo's task file through ingest, launch and validate, under dataset `dataset`.
fn pipeline(dir: &Path, dataset: &str) -> Pipeline {
    let layout = kiln_testkit::write_demo(&dir.join("fixtures")).unwrap();
    let text = format!(
        "[dataset]\nname = \"{dataset}\"\nroot = \"datasets\"\n\
         [sources.tasks]\nkind = \"ingest\"\npath = {tasks:?}\nclone_url = \"{repos}/{{owner}}/{{name}}\"\n\
         [stages.launch]\nkind = \"launch\"\ninputs = [\"tasks\"]\n\
         [stages.validate]\nkind = \"validate\"\ninputs = [\"tasks\", \"launch\"]\n",
        tasks = layout.tasks_file,
        repos = layout.repos_dir.display(),
    );
    let path = dir.join("pipeline.toml");
    std::fs::write(&path, &text).unwrap();
    Pipeline::load(&path).unwrap()
}

/// Opens (or resumes) the run of `pipeline` on `engine`.
pub(crate) fn open<E: ContainerRuntime + 'static>(pipeline: &Pipeline, engine: &Arc<E>) -> Runner {
    let runtime: Arc<dyn ContainerRuntime> = engine.clone();
    Runner::open(
        pipeline.clone(),
        &RunSelection::ResumeOrNew,
        Arc::new(NullReporter),
        Some(runtime),
    )
    .unwrap()
}

#[tokio::test]
async fn an_engine_failing_mid_launch_writes_no_row_and_leaves_the_run_to_resume() {
    let tmp = tempfile::tempdir().unwrap();
    let pipeline = pipeline(tmp.path(), "faults-launch");
    let engine = Arc::new(BrokenEngine::default());
    let mut runner = open(&pipeline, &engine);
    let error = runner.run_all(&RunOptions::default()).await.err();
    assert!(
        matches!(&error, Some(PipelineError::Engine(_))),
        "the stage must stop on the engine's failure: {error:?}"
    );
    assert!(engine.failed_requests() > 0, "the engine was never asked");
    let launch = runner.run_dir().join("launch");
    let rows: Vec<EnvironmentRecord> = kiln_store::read_rows(&launch).unwrap_or_default();
    assert!(
        rows.is_empty(),
        "an engine failure became rows: {:?}",
        rows.iter()
            .map(|r| (&r.instance_id, &r.failure_class))
            .collect::<Vec<_>>()
    );
    let run_dir = runner.run_dir();
    drop(runner);
    let run = kiln_store::RunStore::open_dir(&run_dir).unwrap();
    assert_eq!(run.info().status, Status::Incomplete);
    let manifest = kiln_store::Manifest::read(&launch).unwrap();
    assert_eq!(manifest.status, Status::Incomplete);
    // The next invocation resumes the same run, with every item still to do.
    let again = open(&pipeline, &engine);
    assert_eq!(again.run_dir(), run_dir);
}

#[tokio::test]
async fn an_engine_failing_mid_validate_writes_no_row() {
    let tmp = tempfile::tempdir().unwrap();
    let pipeline = pipeline(tmp.path(), "faults-validate");
    let engine = Arc::new(BrokenEngine::default());
    let mut runner = open(&pipeline, &engine);
    let options = RunOptions::default();
    runner.run_stage("tasks", &options).await.unwrap();
    // Launch rows as a working engine would have left them.
    let store = kiln_store::RunStore::open_dir(&runner.run_dir()).unwrap();
    let node = pipeline.node("launch").unwrap();
    let mut table = store
        .stage::<EnvironmentRecord>("launch", &node.settings_hash(), Default::default())
        .unwrap();
    let built: Vec<EnvironmentRecord> = pipeline_ids(&runner)
        .into_iter()
        .map(|id| EnvironmentRecord {
            image: Some(format!("kiln-env/faults-validate:{id}")),
            status: kiln_schema::EnvironmentStatus::Built,
            test_command: "pytest".into(),
            parser: "pytest".into(),
            ..EnvironmentRecord::new(id)
        })
        .collect();
    table.append(&built).unwrap();
    table.set_complete(true, Default::default()).unwrap();
    let error = runner.run_stage("validate", &options).await.err();
    assert!(
        matches!(&error, Some(PipelineError::Engine(_))),
        "the stage must stop on the engine's failure: {error:?}"
    );
    let rows: Vec<ValidationRecord> =
        kiln_store::read_rows(&runner.run_dir().join("validate")).unwrap_or_default();
    assert!(
        rows.is_empty(),
        "an engine failure became rows: {:?}",
        rows.iter()
            .map(|r| (&r.instance_id, &r.failure_class, &r.reason))
            .collect::<Vec<_>>()
    );
}

/// The ids of the run's candidates that ingest accepted.
fn pipeline_ids(runner: &Runner) -> Vec<kiln_schema::InstanceId> {
    let rows: Vec<kiln_schema::Candidate> =
        kiln_store::read_rows(&runner.run_dir().join("tasks")).unwrap();
    rows.into_iter()
        .filter(|c| c.status == kiln_schema::CandidateStatus::Ok)
        .map(|c| c.instance_id)
        .collect()
}

/// A forced stage of a finished run that stops half-way (here: the engine fails) leaves the run
/// incomplete, so the next `kiln run` resumes it instead of starting a new run.
#[tokio::test]
async fn an_interrupted_forced_stage_leaves_the_run_to_resume() {
    let tmp = tempfile::tempdir().unwrap();
    let pipeline = pipeline(tmp.path(), "faults-force");
    let engine = Arc::new(BrokenEngine::default());
    let mut runner = open(&pipeline, &engine);
    runner
        .run_stage("tasks", &RunOptions::default())
        .await
        .unwrap();
    let run_dir = runner.run_dir();
    drop(runner);
    // The run as a finished one is marked.
    kiln_store::RunStore::open_dir(&run_dir)
        .unwrap()
        .set_status(Status::Complete)
        .unwrap();
    let runtime: Arc<dyn ContainerRuntime> = engine.clone();
    let mut runner = Runner::open(
        pipeline.clone(),
        &RunSelection::Latest,
        Arc::new(NullReporter),
        Some(runtime),
    )
    .unwrap();
    let forced = RunOptions {
        force: true,
        ..RunOptions::default()
    };
    let error = runner.run_stage("launch", &forced).await.err();
    assert!(
        matches!(&error, Some(PipelineError::Engine(_))),
        "{error:?}"
    );
    drop(runner);
    let run = kiln_store::RunStore::open_dir(&run_dir).unwrap();
    assert_eq!(run.info().status, Status::Incomplete);
    let again = open(&pipeline, &engine);
    assert_eq!(again.run_dir(), run_dir, "the next run resumes this one");
}

/// A registry outage is not data: when every dependency step fails while the registry does not
/// answer from the containers (the registry check fails), launch finishes with
/// [`PipelineError::Deferred`] (exit 4) naming the items and the registry, writes no row, and
/// the resume builds them once the registry answers.
#[tokio::test]
async fn a_registry_outage_defers_launch_items_and_the_resume_builds_them() {
    use kiln_testkit::runtime::{Answer, Script, ScriptedRuntime};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let layout = kiln_testkit::write_demo(&dir.join("fixtures")).unwrap();
    let ids = ["kiln-demo__calc-2", "kiln-demo__textwrap2-3"];
    let text = format!(
        "[dataset]\nname = \"faults-registry\"\nroot = \"datasets\"\n\
         [sources.tasks]\nkind = \"ingest\"\npath = {tasks:?}\nclone_url = \"{repos}/{{owner}}/{{name}}\"\n\
         instances = {ids:?}\n\
         [stages.launch]\nkind = \"launch\"\ninputs = [\"tasks\"]\n",
        tasks = layout.tasks_file,
        repos = layout.repos_dir.display(),
    );
    let path = dir.join("pipeline.toml");
    std::fs::write(&path, &text).unwrap();
    let pipeline = Pipeline::load(&path).unwrap();

    // The outage: installs cannot fetch, and the check finds PyPI silent.
    let outage = Arc::new(ScriptedRuntime::new());
    outage.script(Script::contains("pip install").answer(Answer::exit(1).output(
        "  × Failed to fetch: `https://pypi.org/simple/attrs/`\n  ╰─▶ dns error: Temporary failure in name resolution\n",
    )));
    outage.script(Script::contains("kiln-registry:").answer(Answer::ok().output(
        "kiln-registry: down https://pypi.org/simple/: curl: (6) Could not resolve host: pypi.org\n",
    )));
    let mut runner = open(&pipeline, &outage);
    let options = RunOptions::default();
    runner.run_stage("tasks", &options).await.unwrap();
    let error = runner.run_stage("launch", &options).await.err();
    match &error {
        Some(PipelineError::Deferred {
            stage,
            items,
            reasons,
        }) => {
            assert_eq!(stage, "launch");
            let mut items = items.clone();
            items.sort();
            assert_eq!(items, ids);
            assert_eq!(
                reasons,
                &["https://pypi.org/simple/: curl: (6) Could not resolve host: pypi.org"]
            );
        }
        other => panic!("the stage must defer both items: {other:?}"),
    }
    let message = error.map(|e| e.to_string()).unwrap_or_default();
    assert!(message.contains("kiln stage launch"), "{message}");
    let launch = runner.run_dir().join("launch");
    let rows: Vec<EnvironmentRecord> = kiln_store::read_rows(&launch).unwrap_or_default();
    assert!(rows.is_empty(), "an outage became rows: {rows:?}");
    assert_eq!(
        kiln_store::Manifest::read(&launch).unwrap().status,
        Status::Incomplete
    );
    let run_dir = runner.run_dir();
    drop(runner);

    // The registry answers again: the resume builds both.
    let answering = Arc::new(ScriptedRuntime::new());
    answering.script(Script::contains("-m pytest").answer(Answer::pytest(&[
        ("tests/test_calc.py::test_add", "PASSED"),
        ("tests/test_calc.py::test_other", "FAILED"),
    ])));
    let mut runner = open(&pipeline, &answering);
    assert_eq!(runner.run_dir(), run_dir);
    runner.run_stage("launch", &options).await.unwrap();
    let rows: Vec<EnvironmentRecord> = kiln_store::read_rows(&launch).unwrap();
    let built: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r.instance_id.as_str(), r.status.as_str()))
        .collect();
    assert_eq!(built.len(), 2, "{built:?}");
    assert!(built.iter().all(|(_, s)| *s == "built"), "{built:?}");
}

/// Under the free-disk floor (`[docker] min_free`, 5g by default) of the engine's data root,
/// launch refuses to start, with the reading and what to do, and writes nothing; with room it
/// runs.
#[tokio::test]
async fn launch_refuses_to_start_below_the_free_disk_floor() {
    use kiln_testkit::runtime::{Answer, Script, ScriptedRuntime};
    let tmp = tempfile::tempdir().unwrap();
    let pipeline = pipeline(tmp.path(), "faults-disk-floor");
    let runtime = Arc::new(ScriptedRuntime::new());
    runtime.script(Script::contains("-m pytest").answer(Answer::pytest(&[
        ("tests/test_calc.py::test_add", "PASSED"),
        ("tests/test_calc.py::test_other", "FAILED"),
    ])));
    runtime.set_free_bytes(Some(1 << 30));
    let mut runner = open(&pipeline, &runtime);
    let options = RunOptions::default();
    runner.run_stage("tasks", &options).await.unwrap();
    let error = runner.run_stage("launch", &options).await.err();
    let message = error.as_ref().map(ToString::to_string).unwrap_or_default();
    assert!(
        matches!(error, Some(PipelineError::Host { .. })),
        "{error:?}"
    );
    assert!(
        message.contains("/var/lib/docker has 1.1 GB free, under [docker] min_free (5.4 GB)"),
        "{message}"
    );
    let rows: Vec<EnvironmentRecord> =
        kiln_store::read_rows(&runner.run_dir().join("launch")).unwrap_or_default();
    assert!(rows.is_empty());
    assert_eq!(runtime.count(kiln_testkit::runtime::Operation::Create), 0);
    runtime.set_free_bytes(Some(100 << 30));
    runner.run_stage("launch", &options).await.unwrap();
    let rows: Vec<EnvironmentRecord> =
        kiln_store::read_rows(&runner.run_dir().join("launch")).unwrap();
    assert!(!rows.is_empty());
}
