//! Validation and evaluation on a scripted container runtime: no engine, every test in
//! milliseconds. The test command's output and each patch command's exit code are scripted
//! (`kiln_testkit::runtime::ScriptedRuntime`); what is asserted is what a user sees: the
//! validation row, the evaluation, the error, and the containers and commands the engine was
//! asked for.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a panic is how a test fails"
)]

mod evaluate;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kiln_core::config::{DockerSettings, ValidateSettings};
use kiln_core::runtime::LABEL_RUN;
use kiln_core::{ContainerRuntime, NetworkMode, NullReporter, RuntimeError};
use kiln_schema::{Candidate, EnvironmentRecord, FailureClass, TestStatus, ValidationRecord};
use kiln_testkit::runtime::{Answer, Call, Operation, Script, ScriptedRuntime};
use kiln_validate::patch::Method;
use kiln_validate::{RunFailure, RunSpec, ValidateError, ValidateRequest, run_tests, validate};

/// The environment image every run starts from.
const IMAGE: &str = "kiln-env/scripted__demo-1:latest";

/// The test command of the environment.
const TEST_COMMAND: &str = "/opt/kiln/venv/bin/python -m pytest -rA -v tests";

/// The test patch: a new test for the bug.
const TEST_PATCH: &str = "diff --git a/tests/test_demo.py b/tests/test_demo.py\n--- a/tests/test_demo.py\n+++ b/tests/test_demo.py\n@@ -1,2 +1,5 @@\n def test_old():\n     assert True\n+\n+def test_new():\n+    assert fixed()\n";

/// The gold patch: the fix.
const GOLD_PATCH: &str = "diff --git a/src/demo.py b/src/demo.py\n--- a/src/demo.py\n+++ b/src/demo.py\n@@ -1,2 +1,2 @@\n def fixed():\n-    return False\n+    return True\n";

/// The repository at the base commit: the demo's files, and manifests whose test settings the
/// gold check reads as documents.
const BASE_FILES: &[(&str, &str)] = &[
    ("src/demo.py", "def fixed():\n    return False\n"),
    ("src/demo/__init__.py", "def add(a, b):\n    return a + b\n"),
    ("tests/test_demo.py", "def test_old():\n    assert True\n"),
    (
        "setup.cfg",
        "[metadata]\nname = demo\n\n[tool:pytest]\naddopts =\n    -ra\n    --strict-markers\n",
    ),
    (
        "package.json",
        "{\n  \"name\": \"demo\",\n  \"jest\": {\n    \"testMatch\": [\"**/*.test.js\"],\n    \"verbose\": true\n  }\n}\n",
    ),
    (
        "Cargo.toml",
        "[package]\nname = \"demo\"\nversion = \"0.1.0\"\n\n[[test]]\nname = \"it\"\nharness = true\n",
    ),
];

/// The files the test patch and the gold patch leave (what a container's apply must write).
const TESTED: &str = "def test_old():\n    assert True\n\ndef test_new():\n    assert fixed()\n";
const FIXED: &str = "def fixed():\n    return True\n";

/// The demo repository at its base commit, in a temporary directory.
struct Repo {
    dir: tempfile::TempDir,
    commit: String,
}

impl Repo {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let git = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .arg("-C")
                .arg(dir.path())
                .args(["-c", "user.name=k", "-c", "user.email=k@k"])
                .args(args)
                .output()
                .unwrap();
            assert!(out.status.success(), "git {args:?}: {out:?}");
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        };
        git(&["init", "-q", "."]);
        for (path, content) in BASE_FILES {
            let file = dir.path().join(path);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(file, content).unwrap();
        }
        git(&["add", "-A"]);
        git(&["commit", "-qm", "base"]);
        let commit = git(&["rev-parse", "HEAD"]);
        Self { dir, commit }
    }

    fn source(&self) -> kiln_validate::gold::Source {
        kiln_validate::gold::Source {
            mirrors: self.dir.path().join(".mirrors"),
            clone_url: self.dir.path().display().to_string(),
        }
    }
}

/// The command that applies the patch of this name (its script names the patch's file).
fn applies(name: &str) -> String {
    format!("kiln_apply /tmp/kiln/{name}.patch")
}

const NEW: &str = "tests/test_demo.py::test_new";
const OLD: &str = "tests/test_demo.py::test_old";

/// A test run on the side with the gold patch (scripts are tried in order, so an `after`
/// script goes before the one for every other run).
fn after_gold() -> Script {
    Script::contains(TEST_COMMAND).after(applies("gold"))
}

/// Any test run not answered by an earlier script: the `before` side.
fn before_gold() -> Script {
    Script::contains(TEST_COMMAND)
}

fn settings(repeats: i64) -> ValidateSettings {
    ValidateSettings {
        repeats,
        concurrency: 1,
        test_timeout: Duration::from_secs(900),
        tests: kiln_core::config::TestNetwork::default(),
        base_run: false,
        min_collected: 0.9,
        full_suite_every: 0,
    }
}

/// The demo instance's request: its candidate, a built environment in [`IMAGE`] (changed by
/// `environment`), logs under `log_dir`.
fn demo_request(
    log_dir: &std::path::Path,
    repo: &Repo,
    settings: ValidateSettings,
    environment: impl FnOnce(&mut EnvironmentRecord),
) -> ValidateRequest {
    let id = kiln_schema::InstanceId::new("scripted__demo-1").unwrap();
    let mut env = EnvironmentRecord {
        repo: "scripted/demo".into(),
        status: kiln_schema::EnvironmentStatus::Built,
        image: Some(IMAGE.into()),
        test_command: TEST_COMMAND.into(),
        parser: "pytest".into(),
        language: "python".into(),
        ..EnvironmentRecord::new(id.clone())
    };
    environment(&mut env);
    ValidateRequest {
        candidate: Candidate {
            status: kiln_schema::CandidateStatus::Ok,
            repo: "scripted/demo".into(),
            base_commit: repo.commit.clone(),
            patch: GOLD_PATCH.into(),
            test_patch: TEST_PATCH.into(),
            ..Candidate::new(id)
        },
        environment: env,
        log_dir: log_dir.join("logs"),
        log_dir_label: "logs".into(),
        labels: BTreeMap::from([(LABEL_RUN.to_string(), "scripted/run-1".to_string())]),
        settings,
        docker: DockerSettings::default(),
        stage: "validate".into(),
        source: repo.source(),
    }
}

/// Patch commands apply with `git apply` unless a script the test added before says otherwise.
fn patches_apply(runtime: &ScriptedRuntime) {
    for name in ["test", "gold"] {
        runtime.script(Script::contains(applies(name)).answer(applied(name, Method::GitApply)));
    }
}

/// An answer of a patch command that applied: its exit code names the method, and it wrote
/// what the patch leaves (as `git apply` would).
fn applied(name: &str, method: Method) -> Answer {
    let answer = Answer::exit(method.exit_code());
    match name {
        "test" => answer.writes("/testbed/tests/test_demo.py", TESTED),
        _ => answer.writes("/testbed/src/demo.py", FIXED),
    }
}

/// Validates the demo instance on `runtime` (which holds its image) with `rebuild` commands.
/// Checks what every validation must do: each run in a container of its own from the
/// environment image, without network, every container removed at the end.
async fn validate_on(
    runtime: &Arc<ScriptedRuntime>,
    rebuild: &[&str],
    settings: ValidateSettings,
) -> Result<ValidationRecord, ValidateError> {
    validate_with(runtime, settings, |env| {
        env.rebuild_commands = rebuild.iter().map(|c| (*c).to_string()).collect();
    })
    .await
}

/// [`validate_on`], with the environment row changed by `environment`.
async fn validate_with(
    runtime: &Arc<ScriptedRuntime>,
    settings: ValidateSettings,
    environment: impl FnOnce(&mut EnvironmentRecord),
) -> Result<ValidationRecord, ValidateError> {
    let tmp = tempfile::tempdir().unwrap();
    let repo = Repo::new();
    let request = demo_request(tmp.path(), &repo, settings, environment);
    patches_apply(runtime);
    let engine: Arc<dyn ContainerRuntime> = Arc::clone(runtime) as _;
    let result = tokio::time::timeout(
        Duration::from_secs(180),
        validate(engine, &request, &NullReporter),
    )
    .await
    .expect("the validation did not end within 180 s");
    assert_live_containers_removed(runtime).await;
    assert_runs_start_from_the_sides_builds(runtime);
    result
}

/// What every validation must do with its containers: each side built once in a container of
/// its own from the environment image, committed, and every test run in a fresh container from
/// its side's commit; all without network, labelled with the run; no side image left.
#[track_caller]
fn assert_runs_start_from_the_sides_builds(runtime: &ScriptedRuntime) {
    let containers = runtime.containers();
    let builds: Vec<&kiln_testkit::runtime::Container> = containers
        .iter()
        .filter(|c| c.spec.image == IMAGE)
        .collect();
    for build in &builds {
        assert!(
            !build.commands().iter().any(|c| c.contains(TEST_COMMAND)),
            "a build runs no test: {:?}",
            build.commands()
        );
    }
    for container in &containers {
        if container.spec.image != IMAGE {
            assert!(
                container.spec.image.starts_with("sha256:"),
                "a test run starts from a side's commit, by id: {}",
                container.spec.image
            );
        }
        assert_eq!(container.spec.network, NetworkMode::None);
        assert_eq!(
            container.labels.get(LABEL_RUN).map(String::as_str),
            Some("scripted/run-1")
        );
    }
    let left: Vec<String> = runtime
        .image_tags()
        .into_iter()
        .filter(|t| t.contains(".validate-"))
        .collect();
    assert!(left.is_empty(), "side images left: {left:?}");
}

/// Waits briefly for removals that a dropped session hands to a spawned task, then asserts
/// that no container is left.
async fn assert_live_containers_removed(runtime: &ScriptedRuntime) {
    for _ in 0..100 {
        if runtime.live_containers().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(runtime.live_containers(), [], "containers left behind");
}

/// A runtime holding the environment image: the base commit's checkout in `/testbed`.
fn runtime() -> Arc<ScriptedRuntime> {
    let runtime = Arc::new(ScriptedRuntime::new());
    let files: Vec<(String, &[u8])> = BASE_FILES
        .iter()
        .map(|(path, content)| (format!("/testbed/{path}"), content.as_bytes()))
        .collect();
    let files: Vec<(&str, &[u8])> = files.iter().map(|(p, c)| (p.as_str(), *c)).collect();
    runtime.add_image_files(IMAGE, &files);
    runtime
}

fn validated(result: Result<ValidationRecord, ValidateError>) -> ValidationRecord {
    match result {
        Ok(record) => record,
        Err(e) => panic!("validation failed as a whole: {e}"),
    }
}

#[tokio::test]
async fn a_test_the_gold_patch_fixes_is_fail_to_pass() {
    let runtime = runtime();
    runtime.script(after_gold().answer(Answer::pytest(&[(NEW, "PASSED"), (OLD, "PASSED")])));
    runtime.script(before_gold().answer(Answer::pytest(&[(NEW, "FAILED"), (OLD, "PASSED")])));
    let record = validated(validate_on(&runtime, &[], settings(3)).await);

    assert_eq!(record.status.as_str(), "validated", "{:?}", record.reason);
    assert_eq!(record.FAIL_TO_PASS, [NEW]);
    assert_eq!(record.PASS_TO_PASS, [OLD]);
    assert_eq!(
        record.fail_to_pass_classes.get(NEW).map(String::as_str),
        Some("f2p")
    );
    assert!(record.flaky.is_empty() && record.pass_to_fail.is_empty());
    // Every run of a side gave its first run's statuses.
    assert_eq!(
        (record.identical_runs_before, record.identical_runs_after),
        (3, 3)
    );
    // The test file defines two tests, and the runs with the fix reported both.
    assert_eq!(
        (record.tests_defined, record.tests_collected),
        (2, Some(1.0))
    );
    assert!(record.tests_not_collected.is_empty());
    // A one-line fix for one test.
    assert_eq!(record.difficulty, Some(kiln_schema::Difficulty::Easy));
    assert_eq!(record.difficulty_measures["lines"], 2);
    assert_eq!(record.network, "none");
    assert_eq!(
        record.log_parser.as_deref(),
        Some("parse_log_pytest_v2"),
        "{:?}",
        record.log_parser_reason
    );
    // Three runs a side, each in a fresh container.
    let labels: Vec<&str> = record.runs.keys().map(String::as_str).collect();
    assert_eq!(
        labels,
        [
            "after:1", "after:2", "after:3", "before:1", "before:2", "before:3"
        ]
    );
    assert_eq!(record.runs["before:2"]["patch_methods"], "test:git-apply");
    assert_eq!(
        record.runs["after:2"]["patch_methods"],
        "test:git-apply,gold:git-apply"
    );
    assert_eq!(record.runs["before:1"]["failed"], "1");
    assert_eq!(
        record.run_statuses["after:3"].get(NEW),
        Some(&TestStatus::Pass)
    );
    // Each side built once (its patches, no test), then three runs a side, each only the test
    // command in a fresh container from its side's build, with the stage's timeout.
    let containers = runtime.containers();
    assert_eq!(containers.len(), 2 + 6);
    let (builds, tests): (Vec<_>, Vec<_>) = containers.iter().partition(|c| c.spec.image == IMAGE);
    assert_eq!(builds.len(), 2);
    for build in &builds {
        let commands = build.commands();
        // Each patch by a command of its own.
        assert!(commands[0].contains(&applies("test")), "{commands:#?}");
        if commands.len() == 2 {
            assert!(commands[1].contains(&applies("gold")), "{commands:#?}");
        }
        assert_eq!(
            build.file("/tmp/kiln/test.patch").as_deref(),
            Some(TEST_PATCH.as_bytes())
        );
        assert_eq!(build.commits.len(), 1, "each build is committed once");
    }
    for test in &tests {
        assert_eq!(test.commands(), [TEST_COMMAND]);
        assert_eq!(
            test.execs.last().map(|e| e.timeout),
            Some(Duration::from_secs(900))
        );
        // The build's patched checkout is what the tests see.
        assert_eq!(
            test.file("/testbed/tests/test_demo.py").as_deref(),
            Some(TESTED.as_bytes())
        );
    }
    // A patch is copied in just before its own command: the gold patch only after the test
    // patch's command ran.
    let after = builds.iter().find(|c| c.execs.len() == 2).unwrap();
    let calls: Vec<Call> = runtime
        .calls()
        .into_iter()
        .filter(|call| match call {
            Call::CopyIn { container, .. } | Call::Exec { container, .. } => *container == after.id,
            _ => false,
        })
        .collect();
    let kinds: Vec<&str> = calls
        .iter()
        .map(|c| match c {
            Call::CopyIn { .. } => "copy",
            _ => "exec",
        })
        .collect();
    assert_eq!(kinds, ["copy", "exec", "copy", "exec"]);
    assert_eq!(
        after.file("/tmp/kiln/gold.patch").as_deref(),
        Some(GOLD_PATCH.as_bytes())
    );
}

/// A compiled project's rebuild runs once per side, not once per run: the runs need fresh
/// containers, not fresh compiles.
#[tokio::test]
async fn the_rebuild_runs_once_a_side_whatever_the_repeats() {
    let runtime = runtime();
    runtime.script(after_gold().answer(Answer::pytest(&[(NEW, "PASSED"), (OLD, "PASSED")])));
    runtime.script(before_gold().answer(Answer::pytest(&[(NEW, "FAILED"), (OLD, "PASSED")])));
    let record = validated(validate_on(&runtime, &["make -j2"], settings(3)).await);
    assert_eq!(record.status.as_str(), "validated", "{:?}", record.reason);
    let commands = runtime.commands();
    assert_eq!(commands.iter().filter(|c| *c == "make -j2").count(), 2);
    assert_eq!(commands.iter().filter(|c| *c == TEST_COMMAND).count(), 6);
}

#[tokio::test]
async fn the_row_carries_the_cpu_of_the_sides_builds_and_of_their_test_runs() {
    let runtime = runtime();
    // The scripted engine counts an answer's duration as CPU time on one core.
    let second = Duration::from_secs(1);
    runtime.script(Script::contains("make -j2").answer(Answer::ok().duration(4 * second)));
    runtime.script(
        after_gold().answer(Answer::pytest(&[(NEW, "PASSED"), (OLD, "PASSED")]).duration(second)),
    );
    runtime.script(
        before_gold().answer(Answer::pytest(&[(NEW, "FAILED"), (OLD, "PASSED")]).duration(second)),
    );
    let record = validated(validate_on(&runtime, &["make -j2"], settings(3)).await);
    assert_eq!(record.status.as_str(), "validated", "{:?}", record.reason);
    // Two builds (one a side) of 4 s, six test runs of 1 s; every other command took 10 ms.
    assert!(
        record.cpu_build_seconds >= 8.0 && record.cpu_build_seconds < 8.2,
        "{}",
        record.cpu_build_seconds
    );
    assert!(
        record.cpu_test_seconds >= 6.0 && record.cpu_test_seconds < 6.2,
        "{}",
        record.cpu_test_seconds
    );
}

#[tokio::test]
async fn runs_that_lose_a_test_the_test_file_defines_reject_the_row_under_min_collected() {
    // An environment where `test_old` never runs (as when a module fails to import): the
    // fix still turns `test_new` from failing to passing.
    let script = |runtime: &ScriptedRuntime| {
        runtime.script(after_gold().answer(Answer::pytest(&[(NEW, "PASSED")])));
        runtime.script(before_gold().answer(Answer::pytest(&[(NEW, "FAILED")])));
    };
    let runtime = runtime();
    script(&runtime);
    let record = validated(validate_on(&runtime, &[], settings(2)).await);
    assert_eq!(record.status.as_str(), "rejected");
    assert_eq!(
        record.failure_class,
        Some(FailureClass::TestsNotCollected),
        "{:?}",
        record.reason
    );
    assert_eq!(
        (record.tests_defined, record.tests_collected),
        (2, Some(0.5))
    );
    assert_eq!(record.tests_not_collected, ["tests/test_demo.py::test_old"]);
    let reason = record.reason.unwrap_or_default();
    assert!(
        reason.contains("reported 1 of the 2 tests") && reason.contains("test_old"),
        "{reason}"
    );

    // With the check off the same runs validate, and the row still says what was lost.
    let runtime = self::runtime();
    script(&runtime);
    let lenient = ValidateSettings {
        min_collected: 0.0,
        ..settings(2)
    };
    let record = validated(validate_on(&runtime, &[], lenient).await);
    assert_eq!(record.status.as_str(), "validated", "{:?}", record.reason);
    assert_eq!(record.FAIL_TO_PASS, [NEW]);
    assert_eq!(record.tests_collected, Some(0.5));

    // A test the environment's command leaves out for want of a network is accounted for:
    // the row names it among those that need one, and nothing is lost.
    let runtime = self::runtime();
    script(&runtime);
    let old = "tests/test_demo.py::test_old".to_string();
    let record = validated(
        validate_with(&runtime, settings(2), |env| {
            env.tests_left_out = vec![old.clone()];
        })
        .await,
    );
    assert_eq!(record.status.as_str(), "validated", "{:?}", record.reason);
    assert_eq!(record.tests_collected, Some(1.0));
    assert_eq!(record.needs_network, [old]);

    // With the runner's listing, its ids are what the file defines: a listing that names
    // `test_new` alone (a test pytest does not collect is none) counts one of one.
    const COLLECT: &str = "/opt/kiln/venv/bin/python -m pytest --collect-only -q";
    let runtime = self::runtime();
    script(&runtime);
    runtime.script(
        Script::contains(COLLECT)
            .after(applies("gold"))
            .answer(Answer::ok().output(format!("{NEW}\n\n1 test collected in 0.01s\n"))),
    );
    let record = validated(
        validate_with(&runtime, settings(2), |env| {
            env.collect_command = Some(COLLECT.into());
        })
        .await,
    );
    assert_eq!(record.status.as_str(), "validated", "{:?}", record.reason);
    assert_eq!(
        (record.tests_defined, record.tests_collected),
        (1, Some(1.0))
    );
    let listings: Vec<String> = runtime
        .commands()
        .into_iter()
        .filter(|c| c.contains(COLLECT))
        .collect();
    assert_eq!(listings, [format!("{COLLECT} 'tests/test_demo.py'")]);
}

#[tokio::test]
async fn a_sampled_row_runs_the_whole_suite_once_a_side_and_names_what_the_fix_breaks_elsewhere() {
    const WHOLE: &str = "/opt/kiln/venv/bin/python -m pytest -rA -v everything";
    const ELSEWHERE: &str = "tests/test_other.py::test_broken";
    const KEPT: &str = "tests/test_other.py::test_kept";
    let script = |runtime: &ScriptedRuntime| {
        runtime.script(after_gold().answer(Answer::pytest(&[(NEW, "PASSED"), (OLD, "PASSED")])));
        runtime.script(before_gold().answer(Answer::pytest(&[(NEW, "FAILED"), (OLD, "PASSED")])));
        runtime.script(
            Script::contains(WHOLE)
                .after(applies("gold"))
                .answer(Answer::pytest(&[
                    (NEW, "PASSED"),
                    (OLD, "PASSED"),
                    (ELSEWHERE, "FAILED"),
                    (KEPT, "PASSED"),
                ])),
        );
        runtime.script(Script::contains(WHOLE).answer(Answer::pytest(&[
            (NEW, "FAILED"),
            (OLD, "PASSED"),
            (ELSEWHERE, "PASSED"),
            (KEPT, "PASSED"),
        ])));
    };
    let with_whole = |env: &mut EnvironmentRecord| env.whole_test_command = Some(WHOLE.into());
    let every = |n| ValidateSettings {
        full_suite_every: n,
        ..settings(2)
    };
    let runtime = runtime();
    script(&runtime);
    let record = validated(validate_with(&runtime, every(1), with_whole).await);
    assert_eq!(record.status.as_str(), "validated", "{:?}", record.reason);
    // The lists are the narrowed runs' alone.
    assert_eq!(record.FAIL_TO_PASS, [NEW]);
    assert_eq!(record.PASS_TO_PASS, [OLD]);
    assert_eq!(
        record.whole_suite.as_deref(),
        Some("before: 3 passed, 1 failed, 0 skipped; after: 3 passed, 1 failed, 0 skipped")
    );
    assert_eq!(record.broken_outside_scope, [ELSEWHERE]);
    let whole_runs = |runtime: &ScriptedRuntime| {
        runtime
            .commands()
            .iter()
            .filter(|c| c.contains(WHOLE))
            .count()
    };
    assert_eq!(whole_runs(&runtime), 2);

    // Not in the sample, or no whole-suite command: no such run, nothing said.
    for (n, whole) in [(0, true), (1, false)] {
        let runtime = self::runtime();
        script(&runtime);
        let record = validated(
            validate_with(&runtime, every(n), |env| {
                if whole {
                    with_whole(env);
                }
            })
            .await,
        );
        assert_eq!(record.status.as_str(), "validated", "{:?}", record.reason);
        assert_eq!(whole_runs(&runtime), 0);
        assert_eq!(record.whole_suite, None);
        assert!(record.broken_outside_scope.is_empty());
    }
}

#[tokio::test]
async fn a_flaky_test_is_dropped_and_recorded() {
    let runtime = runtime();
    let flaky = "tests/test_demo.py::test_timing";
    runtime.script(after_gold().answer(Answer::pytest(&[
        (NEW, "PASSED"),
        (OLD, "PASSED"),
        (flaky, "PASSED"),
    ])));
    runtime.script(before_gold().answers([
        Answer::pytest(&[(NEW, "FAILED"), (OLD, "PASSED"), (flaky, "PASSED")]),
        Answer::pytest(&[(NEW, "FAILED"), (OLD, "PASSED"), (flaky, "FAILED")]),
        Answer::pytest(&[(NEW, "FAILED"), (OLD, "PASSED"), (flaky, "PASSED")]),
    ]));
    let record = validated(validate_on(&runtime, &[], settings(3)).await);

    assert_eq!(record.status.as_str(), "validated", "{:?}", record.reason);
    assert_eq!(record.FAIL_TO_PASS, [NEW]);
    assert_eq!(
        record.PASS_TO_PASS,
        [OLD],
        "a flaky test is in neither list"
    );
    let runs = &record.flaky[flaky];
    assert_eq!(runs["before:1"], "pass");
    assert_eq!(runs["before:2"], "fail");
    assert_eq!(runs["after:2"], "pass");
    assert_eq!(record.flaky.len(), 1);
    // The second run without the fix differs from the first; the runs with it all agree.
    assert_eq!(
        (record.identical_runs_before, record.identical_runs_after),
        (2, 3)
    );
}

/// A pytest run in which `tests/test_data.py::test_download` fails for want of a network, as
/// urllib reports it with the network off, beside NEW (with `new`) and OLD (passing).
fn with_an_offline_test(new: &str) -> Answer {
    let failed = if new == "FAILED" { 2 } else { 1 };
    Answer::exit(1).output(format!(
        "============================= test session starts ==============================\n\
         {NEW} {new}\n{OLD} PASSED\n{DATA} FAILED\n\n\
         =================================== FAILURES ===================================\n\
         ________________________________ test_download _________________________________\n\
         tests/test_data.py:4: in test_download\n    urllib.request.urlopen(URL, timeout=30)\n\
         E   urllib.error.URLError: <urlopen error [Errno -3] Temporary failure in name resolution>\n\
         =========================== short test summary info ============================\n\
         {new} {NEW}\nPASSED {OLD}\n\
         FAILED {DATA} - urllib.error.URLError: <urlopen error [Errno -3] Temporary failure in na...\n\
         ========================= {failed} failed, {} passed in 0.30s =========================\n",
        3 - failed
    ))
}

const DATA: &str = "tests/test_data.py::test_download";

#[tokio::test]
async fn a_test_that_fails_for_want_of_a_network_is_named_and_in_neither_list() {
    let runtime = runtime();
    runtime.script(after_gold().answer(with_an_offline_test("PASSED")));
    runtime.script(before_gold().answer(with_an_offline_test("FAILED")));
    let record = validated(validate_on(&runtime, &[], settings(2)).await);
    assert_eq!(record.status.as_str(), "validated", "{:?}", record.reason);
    assert_eq!(record.FAIL_TO_PASS, [NEW]);
    assert_eq!(record.PASS_TO_PASS, [OLD]);
    assert_eq!(record.needs_network, [DATA]);

    // When it is the only test the patch concerns, the rejection says why it failed.
    let runtime = self::runtime();
    runtime.script(before_gold().answer(with_an_offline_test("PASSED")));
    let record = validated(validate_on(&runtime, &[], settings(1)).await);
    assert_eq!(record.status.as_str(), "rejected");
    assert_eq!(record.needs_network, [DATA]);
    let reason = record.reason.unwrap_or_default();
    assert!(
        reason.contains(&format!(
            "1 test(s) failed for want of a network (needs-network; the tests ran with network `none`): {DATA}"
        )),
        "{reason}"
    );
}

#[tokio::test]
async fn an_instance_whose_only_fix_is_flaky_is_rejected_as_flaky() {
    let runtime = runtime();
    runtime.script(after_gold().answers([
        Answer::pytest(&[(NEW, "PASSED"), (OLD, "PASSED")]),
        Answer::pytest(&[(NEW, "FAILED"), (OLD, "PASSED")]),
    ]));
    runtime.script(before_gold().answer(Answer::pytest(&[(NEW, "FAILED"), (OLD, "PASSED")])));
    let record = validated(validate_on(&runtime, &[], settings(2)).await);
    assert_eq!(record.status.as_str(), "rejected");
    assert_eq!(
        record.failure_class.map(kiln_schema::FailureClass::as_str),
        Some(FailureClass::Flaky.as_str())
    );
    assert!(record.FAIL_TO_PASS.is_empty());
    assert_eq!(record.flaky[NEW]["after:2"], "fail");
    // No task, no difficulty; the flaky run shows in the runs that differ.
    assert_eq!(record.difficulty, None);
    assert_eq!(
        (record.identical_runs_before, record.identical_runs_after),
        (2, 1)
    );
}

#[tokio::test]
async fn a_gold_patch_that_fixes_nothing_in_the_first_runs_is_rejected_without_the_repeats() {
    // The new test fails with and without the fix: no repeat can make it FAIL_TO_PASS.
    let runtime = runtime();
    runtime.script(after_gold().answer(Answer::pytest(&[(NEW, "FAILED"), (OLD, "PASSED")])));
    runtime.script(before_gold().answer(Answer::pytest(&[(NEW, "FAILED"), (OLD, "PASSED")])));
    let record = validated(validate_on(&runtime, &[], settings(3)).await);
    assert_eq!(record.status.as_str(), "rejected");
    assert_eq!(record.failure_class, Some(FailureClass::NoFailToPass));
    let labels: Vec<&str> = record.runs.keys().map(String::as_str).collect();
    assert_eq!(labels, ["after:1", "before:1"], "one run a side, not three");
    let reason = record.reason.unwrap_or_default();
    assert!(
        reason.contains("stopped after the first run of each side"),
        "{reason}"
    );
    let test_runs = runtime
        .containers()
        .iter()
        .filter(|c| c.commands().iter().any(|c| c.contains(TEST_COMMAND)))
        .count();
    assert_eq!(test_runs, 2);
}

#[tokio::test]
async fn a_test_the_gold_patch_breaks_rejects_the_instance() {
    let runtime = runtime();
    runtime.script(after_gold().answer(Answer::pytest(&[(NEW, "PASSED"), (OLD, "FAILED")])));
    runtime.script(before_gold().answer(Answer::pytest(&[(NEW, "FAILED"), (OLD, "PASSED")])));
    let record = validated(validate_on(&runtime, &[], settings(3)).await);
    assert_eq!(record.status.as_str(), "rejected");
    assert_eq!(
        record.failure_class.map(kiln_schema::FailureClass::as_str),
        Some(FailureClass::PassToFail.as_str())
    );
    assert_eq!(record.pass_to_fail, [OLD]);
    assert!(
        record.reason.as_deref().is_some_and(|r| r.contains(OLD)),
        "{:?}",
        record.reason
    );
}

#[tokio::test]
async fn a_failing_exit_with_no_failing_test_is_an_invalid_run() {
    // The after side prints passing tests and exits 1 (a crash after the report, or output
    // the code under test forged): the run is not a pass.
    let runtime = runtime();
    runtime.script(
        after_gold().answer(Answer::pytest(&[(NEW, "PASSED"), (OLD, "PASSED")]).with_exit_code(1)),
    );
    runtime.script(before_gold().answer(Answer::pytest(&[(NEW, "FAILED"), (OLD, "PASSED")])));
    let record = validated(validate_on(&runtime, &[], settings(1)).await);
    assert_eq!(record.status.as_str(), "rejected");
    assert_eq!(
        record.failure_class.map(kiln_schema::FailureClass::as_str),
        Some(FailureClass::InvalidRun.as_str())
    );
    assert!(
        record
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("after:1 exited 1 but no failing test was parsed")),
        "{:?}",
        record.reason
    );
    assert!(record.FAIL_TO_PASS.is_empty());
}

#[tokio::test]
async fn patch_methods_are_read_from_the_apply_commands_exit_codes() {
    // git apply fails for the test patch and --3way applies it; both git methods fail for
    // the gold patch and patch --fuzz applies it.
    let runtime = runtime();
    runtime.script(Script::contains(applies("test")).answer(applied("test", Method::ThreeWay)));
    runtime.script(Script::contains(applies("gold")).answer(applied("gold", Method::Fuzz)));
    runtime.script(after_gold().answer(Answer::pytest(&[(NEW, "PASSED"), (OLD, "PASSED")])));
    runtime.script(before_gold().answer(Answer::pytest(&[(NEW, "FAILED"), (OLD, "PASSED")])));
    let record = validated(validate_on(&runtime, &[], settings(1)).await);
    assert_eq!(record.status.as_str(), "validated", "{:?}", record.reason);
    assert_eq!(
        record.runs["before:1"]["patch_methods"],
        "test:git-apply-3way"
    );
    assert_eq!(
        record.runs["after:1"]["patch_methods"],
        "test:git-apply-3way,gold:patch-fuzz"
    );
}

#[tokio::test]
async fn a_gold_patch_that_applies_nowhere_is_a_patch_apply_failure() {
    let runtime = runtime();
    runtime.script(Script::contains(applies("gold")).answer(Answer::exit(1)));
    runtime.script(before_gold().answer(Answer::pytest(&[(NEW, "FAILED")])));
    let record = validated(validate_on(&runtime, &[], settings(3)).await);
    assert_eq!(record.status.as_str(), "failed");
    assert_eq!(
        record.failure_class.map(kiln_schema::FailureClass::as_str),
        Some(FailureClass::PatchApply.as_str())
    );
    assert_eq!(
        record.reason.as_deref(),
        Some(
            "after run 1: the gold patch applies with none of git apply, git apply --3way, patch --fuzz"
        )
    );
    // The tests never ran on the side the patch did not reach.
    let after = runtime
        .containers()
        .into_iter()
        .find(|c| c.commands().iter().any(|s| s.contains(&applies("gold"))))
        .unwrap();
    assert!(!after.commands().contains(&TEST_COMMAND));
}

#[tokio::test]
async fn a_before_side_that_does_not_build_makes_the_new_tests_absent_before() {
    // The new test uses API the gold patch adds: without it the rebuild fails.
    let runtime = runtime();
    runtime.script(Script::contains("make -j2").after(applies("gold")));
    runtime.script(
        Script::contains("make -j2").answer(Answer::exit(2).output("error: undefined: fixed\n")),
    );
    runtime.script(after_gold().answer(Answer::pytest(&[(NEW, "PASSED"), (OLD, "PASSED")])));
    let record = validated(validate_on(&runtime, &["make -j2"], settings(2)).await);
    assert_eq!(record.status.as_str(), "validated", "{:?}", record.reason);
    assert_eq!(record.FAIL_TO_PASS, [NEW, OLD]);
    assert_eq!(
        record.fail_to_pass_classes.get(NEW).map(String::as_str),
        Some("n2p")
    );
    assert_eq!(
        record.runs["before:1"]["build"],
        "failed: rebuild command `make -j2` exited 2"
    );
    // The test command never ran where the build failed.
    assert_eq!(
        runtime
            .commands()
            .iter()
            .filter(|c| *c == TEST_COMMAND)
            .count(),
        2
    );
}

#[tokio::test]
async fn an_engine_failure_is_an_error_not_a_row() {
    let runtime = runtime();
    runtime.fail_from(
        Operation::Create,
        3,
        RuntimeError::Unreachable {
            endpoint: "unix:///var/run/docker.sock".into(),
            message: "connection refused".into(),
        },
    );
    runtime.script(after_gold().answer(Answer::pytest(&[(NEW, "PASSED")])));
    runtime.script(before_gold().answer(Answer::pytest(&[(NEW, "FAILED")])));
    let result = validate_on(&runtime, &[], settings(3)).await;
    assert!(
        matches!(
            result,
            Err(ValidateError::Engine(RuntimeError::Unreachable { .. }))
        ),
        "{result:?}"
    );
    assert_eq!(runtime.count(Operation::Create), 3);
}

#[tokio::test]
async fn a_test_run_that_stops_its_container_is_a_failed_row() {
    let runtime = runtime();
    runtime.script(after_gold().answer(Answer::stops_container(137)));
    runtime.script(before_gold().answer(Answer::pytest(&[(NEW, "FAILED")])));
    let record = validated(validate_on(&runtime, &[], settings(3)).await);
    assert_eq!(record.status.as_str(), "failed");
    assert_eq!(
        record.failure_class.map(kiln_schema::FailureClass::as_str),
        Some(FailureClass::TestRun.as_str())
    );
    let reason = record.reason.unwrap_or_default();
    assert!(
        reason.starts_with("after run 1: failed to run") && reason.contains("container stopped"),
        "{reason}"
    );
}

#[tokio::test]
async fn runs_use_the_image_launch_committed_even_after_its_tag_moved() {
    let runtime = runtime();
    let committed = runtime.image(IMAGE).expect("the image").id;
    // Another dataset of the same name (another checkout) launches and moves the tag.
    runtime.add_image(IMAGE);
    assert_ne!(runtime.image(IMAGE).map(|i| i.id), Some(committed.clone()));
    runtime.script(after_gold().answer(Answer::pytest(&[(NEW, "PASSED"), (OLD, "PASSED")])));
    runtime.script(before_gold().answer(Answer::pytest(&[(NEW, "FAILED"), (OLD, "PASSED")])));
    patches_apply(&runtime);
    let repo = Repo::new();
    let validate_with = |digest: &str| {
        let runtime = Arc::clone(&runtime);
        let digest = digest.to_string();
        let repo = &repo;
        async move {
            let tmp = tempfile::tempdir().unwrap();
            let request = demo_request(tmp.path(), repo, settings(1), |env| {
                env.image_digest = Some(digest);
            });
            let engine: Arc<dyn ContainerRuntime> = runtime as _;
            validated(validate(engine, &request, &NullReporter).await)
        }
    };
    let record = validate_with(&committed).await;
    assert_eq!(record.status.as_str(), "validated", "{:?}", record.reason);
    // Every side's build starts from the image launch committed (and its runs from that).
    let containers = runtime.containers();
    assert!(!containers.is_empty());
    let builds: Vec<_> = containers
        .iter()
        .filter(|c| !c.commits.is_empty())
        .collect();
    assert_eq!(builds.len(), 2);
    for build in builds {
        assert_eq!(build.spec.image, committed);
    }
    assert!(!containers.iter().any(|c| c.spec.image == IMAGE));
    // An image that is gone is the item's infra row, naming both, and starts nothing.
    let record = validate_with("sha256:gone").await;
    assert_eq!(record.status.as_str(), "failed");
    assert_eq!(record.failure_class, Some(FailureClass::Infra));
    let reason = record.reason.unwrap_or_default();
    assert!(
        reason.contains(IMAGE) && reason.contains("sha256:gone") && reason.contains("--force"),
        "{reason}"
    );
    assert_eq!(runtime.containers().len(), containers.len());
}

#[tokio::test]
async fn a_test_run_past_the_disk_bound_is_a_disk_row() {
    let runtime = runtime();
    runtime.script(
        after_gold().answer(Answer::engine_error(RuntimeError::DiskExceeded {
            command: "pytest".into(),
            bound: kiln_core::DiskBound::Container {
                written: 300 << 20,
                limit: 200 << 20,
            },
        })),
    );
    runtime.script(before_gold().answer(Answer::pytest(&[(NEW, "FAILED")])));
    let record = validated(validate_on(&runtime, &[], settings(3)).await);
    assert_eq!(record.status.as_str(), "failed");
    assert_eq!(
        record.failure_class.map(kiln_schema::FailureClass::as_str),
        Some("disk")
    );
    assert!(record.FAIL_TO_PASS.is_empty());
    let reason = record.reason.unwrap_or_default();
    assert!(
        reason.contains("past its bound of 209715200 bytes"),
        "{reason}"
    );
}

#[tokio::test]
async fn an_environment_without_an_image_is_an_infra_row_and_starts_nothing() {
    let runtime = Arc::new(ScriptedRuntime::new());
    let tmp = tempfile::tempdir().unwrap();
    let request = ValidateRequest {
        candidate: Candidate::new(kiln_schema::InstanceId::new("nobody__nothing-1").unwrap()),
        environment: EnvironmentRecord {
            status: kiln_schema::EnvironmentStatus::Failed,
            ..EnvironmentRecord::new(kiln_schema::InstanceId::new("scripted__demo-1").unwrap())
        },
        log_dir: tmp.path().to_path_buf(),
        log_dir_label: "logs".into(),
        labels: BTreeMap::new(),
        settings: settings(3),
        docker: DockerSettings::default(),
        stage: "validate".into(),
        source: Repo::new().source(),
    };
    let engine: Arc<dyn ContainerRuntime> = Arc::clone(&runtime) as _;
    let record = validated(validate(engine, &request, &NullReporter).await);
    assert_eq!(record.status.as_str(), "failed");
    assert_eq!(
        record.failure_class.map(kiln_schema::FailureClass::as_str),
        Some(FailureClass::Infra.as_str())
    );
    assert!(runtime.calls().is_empty(), "{:?}", runtime.calls());
}

/// One run of `run_tests` on `runtime`, removing its container before returning.
async fn run_once(
    runtime: &Arc<ScriptedRuntime>,
    rebuild: &[String],
) -> Result<kiln_validate::RunOutput, RunFailure> {
    run_read_by(runtime, rebuild, None).await
}

/// [`run_once`], the output read by `parser_script` when there is one.
async fn run_read_by(
    runtime: &Arc<ScriptedRuntime>,
    rebuild: &[String],
    parser_script: Option<&str>,
) -> Result<kiln_validate::RunOutput, RunFailure> {
    let parser = if parser_script.is_some() {
        "status-lines"
    } else {
        "pytest"
    };
    run_parsed_by(runtime, rebuild, parser, parser_script, true).await
}

/// One run of `run_tests` whose output `parser` reads (or `parser_script`), read as the harness
/// reads it too when `harness_view` is set.
async fn run_parsed_by(
    runtime: &Arc<ScriptedRuntime>,
    rebuild: &[String],
    parser: &str,
    parser_script: Option<&str>,
    harness_view: bool,
) -> Result<kiln_validate::RunOutput, RunFailure> {
    let tmp = tempfile::tempdir().unwrap();
    let docker = DockerSettings::default();
    let labels = BTreeMap::new();
    let spec = RunSpec {
        image: IMAGE,
        patches: vec![("test", TEST_PATCH), ("gold", GOLD_PATCH), ("model", " \n")],
        rebuild,
        test_command: TEST_COMMAND,
        parser,
        parser_script,
        docker: &docker,
        network: NetworkMode::Bridge,
        timeout: Duration::from_secs(60),
        log: tmp.path().join("run.log"),
        labels: &labels,
        removals: None,
        harness_view,
        expected: None,
        cpu: None,
    };
    let engine: Arc<dyn ContainerRuntime> = Arc::clone(runtime) as _;
    let output = run_tests(engine, &spec).await;
    // Without a removal list, the container is gone when run_tests returns.
    assert_eq!(runtime.live_containers(), []);
    output
}

#[tokio::test]
async fn run_tests_parses_the_test_output_after_patches_and_rebuild() {
    let runtime = runtime();
    runtime.script(Script::contains(TEST_COMMAND).answer(
        Answer::pytest(&[(NEW, "PASSED"), (OLD, "SKIPPED")]).duration(Duration::from_secs(3)),
    ));
    let output = run_once(&runtime, &["pip install -e .".to_string()])
        .await
        .unwrap();
    assert_eq!(output.exit_code, 0);
    assert_eq!(output.statuses.get(NEW), Some(&TestStatus::Pass));
    assert_eq!(output.statuses.get(OLD), Some(&TestStatus::Skip));
    assert!(
        output.parse_problems.is_empty(),
        "{:?}",
        output.parse_problems
    );
    // The empty patch is skipped.
    assert_eq!(output.patch_methods, ["test:git-apply", "gold:git-apply"]);
    assert!(
        (output.test_seconds - 3.0).abs() < 1e-9,
        "{}",
        output.test_seconds
    );
    let containers = runtime.containers();
    assert_eq!(containers.len(), 1);
    assert_eq!(containers[0].spec.network, NetworkMode::Bridge);
    let commands = containers[0].commands();
    assert_eq!(commands.len(), 4, "{commands:#?}");
    assert_eq!(&commands[2..], ["pip install -e .", TEST_COMMAND]);
}

/// A parser script reads the output in a container of its own, from the image, without
/// network: nothing the test run left in its container can change how its output is read.
#[tokio::test]
async fn a_parser_script_reads_the_output_in_a_fresh_container() {
    const SCRIPT: &str = "sed -n 's/^check \\(.*\\): good$/[PASSED] \\1/p'";
    let output = "check one: good\ncheck two: BAD\n";
    let runtime = runtime();
    runtime.script(Script::contains(TEST_COMMAND).answer(Answer::exit(1).output(output)));
    runtime.script(
        Script::contains(kiln_core::parser_script::command())
            .answer(Answer::ok().output("[PASSED] one\n[FAILED] two\n")),
    );
    let run = run_read_by(&runtime, &[], Some(SCRIPT)).await.unwrap();
    assert_eq!(run.exit_code, 1);
    assert_eq!(run.statuses.get("one"), Some(&TestStatus::Pass));
    assert_eq!(run.statuses.get("two"), Some(&TestStatus::Fail));
    // The harness reads the output followed by the script's lines.
    let (name, map) = &run.harness[0];
    assert_eq!(*name, "parse_log_jest_json");
    assert_eq!(map.get("two").map(String::as_str), Some("FAILED"));

    let containers = runtime.containers();
    assert_eq!(containers.len(), 2);
    let reader = &containers[1];
    assert_eq!(reader.spec.image, IMAGE);
    assert_eq!(reader.spec.network, NetworkMode::None);
    assert_eq!(reader.commands(), [kiln_core::parser_script::command()]);
    let copied = reader.file(kiln_core::parser_script::OUTPUT_PATH).unwrap();
    assert_eq!(String::from_utf8_lossy(&copied), output);
    let script = reader.file(kiln_core::parser_script::SCRIPT_PATH).unwrap();
    assert_eq!(String::from_utf8_lossy(&script), SCRIPT);
    assert!(
        !containers[0]
            .commands()
            .iter()
            .any(|c| c.contains("kiln-parser")),
        "the script never runs where the tests ran"
    );
}

/// A mocha row is read as the harness would read it through its eval script: the parser's id
/// script runs over the output in a container of its own, from the image, without network, and
/// `parse_log_jest_json` reads the lines it printed. A script that fails (an image without node)
/// gives the harness no id; evaluation, which grades with kiln's parser, starts no such container.
#[tokio::test]
async fn a_report_row_is_read_for_the_harness_by_its_id_script_in_a_fresh_container() {
    let report = r#"{"stats": {"passes": 1, "failures": 1, "pending": 0},
 "passes": [{"title": "adds", "fullTitle": "math adds", "file": "/testbed/test/a.js"}],
 "failures": [{"title": "subtracts", "fullTitle": "math subtracts", "file": "/testbed/test/a.js"}],
 "pending": []}"#;
    let script = kiln_testlog::swebench::id_script("mocha-json").unwrap();
    let engine = runtime();
    engine.script(Script::contains(TEST_COMMAND).answer(Answer::exit(1).output(report)));
    engine.script(
        Script::contains(kiln_core::parser_script::command()).answer(
            Answer::ok()
                .output("[PASSED] test/a.js::math adds\n[FAILED] test/a.js::math subtracts\n"),
        ),
    );
    let run = run_parsed_by(&engine, &[], "mocha-json", None, true)
        .await
        .unwrap();
    assert_eq!(
        run.statuses.get("test/a.js::math adds"),
        Some(&TestStatus::Pass)
    );
    let (name, map) = &run.harness[0];
    assert_eq!(*name, "parse_log_jest_json");
    assert_eq!(
        map.get("test/a.js::math adds").map(String::as_str),
        Some("PASSED")
    );
    assert_eq!(
        map.get("test/a.js::math subtracts").map(String::as_str),
        Some("FAILED")
    );
    let containers = engine.containers();
    assert_eq!(containers.len(), 2);
    let reader = &containers[1];
    assert_eq!(
        (reader.spec.image.as_str(), reader.spec.network),
        (IMAGE, NetworkMode::None)
    );
    let written = reader.file(kiln_core::parser_script::SCRIPT_PATH).unwrap();
    assert_eq!(String::from_utf8_lossy(&written), script);
    let copied = reader.file(kiln_core::parser_script::OUTPUT_PATH).unwrap();
    assert_eq!(String::from_utf8_lossy(&copied), report);

    // No node in the image: the script fails and the harness reads no id.
    let nodeless = runtime();
    nodeless.script(Script::contains(TEST_COMMAND).answer(Answer::exit(1).output(report)));
    nodeless.script(
        Script::contains(kiln_core::parser_script::command())
            .answer(Answer::exit(127).output("sh: 1: node: not found\n")),
    );
    let run = run_parsed_by(&nodeless, &[], "mocha-json", None, true)
        .await
        .unwrap();
    assert_eq!(run.harness[0].1, Default::default());
    assert_eq!(run.statuses.len(), 2, "kiln's own reading is unchanged");

    // Evaluation grades with kiln's parser only.
    let evaluation = runtime();
    evaluation.script(Script::contains(TEST_COMMAND).answer(Answer::exit(1).output(report)));
    run_parsed_by(&evaluation, &[], "mocha-json", None, false)
        .await
        .unwrap();
    assert_eq!(evaluation.containers().len(), 1);
}

/// Statuses that contradict the exit code make the run invalid, on every run.
#[tokio::test]
async fn a_parser_script_that_contradicts_the_exit_code_invalidates_the_run() {
    let runtime = runtime();
    runtime.script(Script::contains(TEST_COMMAND).answer(Answer::exit(1).output("x\n")));
    runtime.script(
        Script::contains(kiln_core::parser_script::command())
            .answer(Answer::ok().output("[PASSED] one\n[PASSED] two\n")),
    );
    match run_read_by(&runtime, &[], Some("cat")).await {
        Err(RunFailure::Item(FailureClass::InvalidRun, reason)) => {
            assert!(reason.contains("exited 1"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn run_tests_reports_a_rebuild_killed_for_memory_and_a_test_timeout_as_item_failures() {
    let runtime = runtime();
    runtime.script(Script::contains("pip install").answer(Answer::oom_killed()));
    let rebuild = ["pip install -e .".to_string()];
    match run_once(&runtime, &rebuild).await {
        Err(RunFailure::Item(FailureClass::Oom, reason)) => {
            assert!(reason.contains("pip install -e ."), "{reason}");
        }
        other => panic!("{other:?}"),
    }

    let runtime = self::runtime();
    runtime.script(Script::contains(TEST_COMMAND).answer(Answer::timed_out()));
    match run_once(&runtime, &[]).await {
        Err(RunFailure::Item(FailureClass::Timeout, reason)) => {
            assert!(reason.contains("did not finish"), "{reason}");
        }
        other => panic!("{other:?}"),
    }

    let runtime = self::runtime();
    runtime.script(Script::contains(TEST_COMMAND).answer(Answer::engine_error(
        RuntimeError::engine(
            "run a command",
            "the container was removed while kiln used it",
        ),
    )));
    assert!(matches!(
        run_once(&runtime, &[]).await,
        Err(RunFailure::Engine(RuntimeError::Engine { .. }))
    ));
}

/// Validates the demo instance with `gold` as its gold patch; the gold check must reject it
/// before any container starts. Gives the row.
async fn examined(gold: &str) -> ValidationRecord {
    let runtime = runtime();
    let tmp = tempfile::tempdir().unwrap();
    let repo = Repo::new();
    let mut request = demo_request(tmp.path(), &repo, settings(2), |env| {
        env.language = "python".into();
    });
    request.candidate.patch = gold.into();
    let engine: Arc<dyn ContainerRuntime> = Arc::clone(&runtime) as _;
    let record = validated(validate(engine, &request, &NullReporter).await);
    assert!(record.FAIL_TO_PASS.is_empty());
    assert!(runtime.containers().is_empty(), "no run may start");
    record
}

/// The fix itself, which every forging patch below carries beside its forgery.
const FIX: &str = "diff --git a/src/demo.py b/src/demo.py\n--- a/src/demo.py\n+++ b/src/demo.py\n@@ -1,2 +1,2 @@\n def fixed():\n-    return False\n+    return True\n";

/// Asserts that `record` rejects its gold patch as editing the tests, for a reason naming
/// `what`.
#[track_caller]
fn rejected_as_editing_tests(record: &ValidationRecord, what: &str) {
    assert_eq!(record.status.as_str(), "rejected", "{:?}", record.reason);
    assert_eq!(
        record.failure_class,
        Some(FailureClass::GoldEditsTests),
        "{:?}",
        record.reason
    );
    let reason = record.reason.as_deref().unwrap_or_default();
    assert!(reason.contains(what), "{reason} / {what}");
}

/// A gold patch that makes tests pass by editing the tests' configuration (a `conftest.py` hook
/// turning every failed report into a pass, with a comment-only source change beside it) is
/// rejected before any container starts, whatever the runs would have said.
#[tokio::test]
async fn a_gold_patch_that_edits_the_tests_is_rejected_unrun() {
    const FORGING: &str = "diff --git a/conftest.py b/conftest.py\nnew file mode 100644\n--- /dev/null\n+++ b/conftest.py\n@@ -0,0 +1,6 @@\n+import pytest\n+\n+@pytest.hookimpl(hookwrapper=True)\n+def pytest_runtest_makereport(item, call):\n+    outcome = yield\n+    outcome.get_result().outcome = \"passed\"\ndiff --git a/src/demo/__init__.py b/src/demo/__init__.py\n--- a/src/demo/__init__.py\n+++ b/src/demo/__init__.py\n@@ -1,2 +1,3 @@\n+# fixes the issue\n def add(a, b):\n     return a + b\n";
    const COMMENT_ONLY: &str = "diff --git a/src/demo/__init__.py b/src/demo/__init__.py\n--- a/src/demo/__init__.py\n+++ b/src/demo/__init__.py\n@@ -1,2 +1,3 @@\n+# fixes the issue\n def add(a, b):\n     return a + b\n";
    rejected_as_editing_tests(&examined(FORGING).await, "conftest.py");
    let record = examined(COMMENT_ONLY).await;
    assert_eq!(record.status.as_str(), "rejected");
    assert_eq!(record.failure_class, Some(FailureClass::GoldWithoutCode));
}

/// A section in plain unified format (no `diff --git` line) after a git section: `git apply`
/// applies both, so the check reads the tree they leave, not the headers.
#[tokio::test]
async fn a_plain_unified_section_after_a_git_section_is_judged_by_its_effect() {
    let gold = format!(
        "{FIX}--- /dev/null\n+++ b/tests/conftest.py\n@@ -0,0 +1,2 @@\n+def pytest_configure(config):\n+    config.option.forcepass = True\n"
    );
    rejected_as_editing_tests(&examined(&gold).await, "tests/conftest.py");
}

/// A quoted header (`diff --git "a/conftest.py" "b/conftest.py"`), which `git apply` unquotes.
#[tokio::test]
async fn a_quoted_header_is_judged_by_its_effect() {
    let gold = format!(
        "{FIX}diff --git \"a/conftest.py\" \"b/conftest.py\"\nnew file mode 100644\n--- /dev/null\n+++ \"b/conftest.py\"\n@@ -0,0 +1 @@\n+import demo._forcepass\n"
    );
    rejected_as_editing_tests(&examined(&gold).await, "conftest.py");
}

/// A continuation line added under an existing multi-line `addopts` of `setup.cfg`'s
/// `[tool:pytest]`, with the module it loads: no changed line names a test setting by itself.
#[tokio::test]
async fn a_continuation_line_under_a_multiline_addopts_is_a_test_setting() {
    let gold = format!(
        "{FIX}diff --git a/setup.cfg b/setup.cfg\n--- a/setup.cfg\n+++ b/setup.cfg\n@@ -5,3 +5,4 @@ name = demo\n addopts =\n     -ra\n     --strict-markers\n+    -p demo._forcepass\ndiff --git a/src/demo/_forcepass.py b/src/demo/_forcepass.py\nnew file mode 100644\n--- /dev/null\n+++ b/src/demo/_forcepass.py\n@@ -0,0 +1,2 @@\n+def pytest_runtest_logreport(report):\n+    report.outcome = \"passed\"\n"
    );
    rejected_as_editing_tests(&examined(&gold).await, "[tool:pytest] addopts");
}

/// An inner line of `package.json`'s `"jest"` block, and of a Cargo `[[test]]` table: the
/// documents' test settings differ, though no changed line names them.
#[tokio::test]
async fn inner_lines_of_a_jest_block_and_a_cargo_test_table_are_test_settings() {
    let jest = format!(
        "{FIX}diff --git a/package.json b/package.json\n--- a/package.json\n+++ b/package.json\n@@ -3,3 +3,3 @@\n   \"jest\": {{\n-    \"testMatch\": [\"**/*.test.js\"],\n+    \"testMatch\": [\"**/none\"],\n     \"verbose\": true\n"
    );
    rejected_as_editing_tests(&examined(&jest).await, "`jest`");
    let cargo = format!(
        "{FIX}diff --git a/Cargo.toml b/Cargo.toml\n--- a/Cargo.toml\n+++ b/Cargo.toml\n@@ -5,3 +5,3 @@ version = \"0.1.0\"\n [[test]]\n-name = \"it\"\n+name = \"other\"\n harness = true\n"
    );
    rejected_as_editing_tests(&examined(&cargo).await, "`test`");
}

/// Every run checks its container before the tests start, from the engine's account of it: a
/// rebuild command that writes test configuration into the checkout (a `conftest.py` that
/// passes every test) or rewrites a file the test patch leaves ends the run, whatever its words.
#[tokio::test]
async fn a_rebuild_command_that_writes_test_configuration_is_refused_before_the_tests() {
    for (effect, expected) in [
        (
            Answer::ok().writes("/testbed/tests/conftest.py", "import demo._forcepass\n"),
            "added test configuration to the checkout: tests/conftest.py",
        ),
        (
            Answer::ok().writes("/testbed/src/sitecustomize.py", "import demo._forcepass\n"),
            "src/sitecustomize.py",
        ),
        (
            Answer::ok().writes(
                "/testbed/setup.cfg",
                "[metadata]\nname = demo\n\n[tool:pytest]\naddopts = -p demo._forcepass\n",
            ),
            "a test setting in setup.cfg",
        ),
        (
            Answer::ok().writes(
                "/opt/kiln/venv/lib/python3.11/site-packages/sitecustomize.py",
                "import demo._forcepass\n",
            ),
            "configures every Python process",
        ),
    ] {
        let runtime = runtime();
        runtime.script(Script::contains("make -j2").answer(effect));
        runtime.script(after_gold().answer(Answer::pytest(&[(NEW, "PASSED"), (OLD, "PASSED")])));
        runtime.script(before_gold().answer(Answer::pytest(&[(NEW, "PASSED"), (OLD, "PASSED")])));
        let record = validated(validate_on(&runtime, &["make -j2"], settings(1)).await);
        assert_eq!(record.status.as_str(), "failed", "{:?}", record.reason);
        assert_eq!(
            record.failure_class,
            Some(FailureClass::EnvironmentEditsTests),
            "{:?}",
            record.reason
        );
        let reason = record.reason.unwrap_or_default();
        assert!(reason.contains(expected), "{reason} / {expected}");
        assert!(
            !runtime.commands().iter().any(|c| c == TEST_COMMAND),
            "the tests ran"
        );
    }
}

/// A patch command whose exit code says it applied but which left a file other than the
/// host's apply did is no run of the instance's patches.
#[tokio::test]
async fn a_patch_applied_differently_in_the_container_fails_the_run() {
    let runtime = runtime();
    runtime.script(
        Script::contains(applies("gold")).answer(
            Answer::exit(Method::Fuzz.exit_code())
                .writes("/testbed/src/demo.py", "def fixed():\n    return 1\n"),
        ),
    );
    runtime.script(after_gold().answer(Answer::pytest(&[(NEW, "PASSED")])));
    runtime.script(before_gold().answer(Answer::pytest(&[(NEW, "FAILED")])));
    let record = validated(validate_on(&runtime, &[], settings(1)).await);
    assert_eq!(record.status.as_str(), "failed");
    assert_eq!(record.failure_class, Some(FailureClass::PatchApply));
    let reason = record.reason.unwrap_or_default();
    assert!(
        reason.contains("src/demo.py is not as the patches left it"),
        "{reason}"
    );
}
