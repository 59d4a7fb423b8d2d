//! The launch loop on a scripted container runtime: no engine, each test in well under a
//! second. A real git repository is cloned as in production; the commands it plans are
//! answered by `kiln_testkit::runtime::ScriptedRuntime`, so repairs, failure classes and engine
//! failures can be provoked at will.
//!
//! These tests assert only on what a user of `launch` sees (the row, the error, the commands
//! the engine was asked to run and the images left behind), never on launch's internals.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kiln_core::config::{DockerSettings, LaunchSettings};

use crate::support::{COMMIT_DATE, git};
use kiln_core::runtime::LABEL_RUN;
use kiln_core::{ContainerRuntime, NullReporter, RuntimeError};
use kiln_launch::{LaunchError, LaunchRequest, launch};
use kiln_schema::{Candidate, EnvironmentRecord, EnvironmentStatus, FailureClass, TestStatus};
use kiln_testkit::runtime::{Answer, Call, ImageOrigin, Operation, Script, ScriptedRuntime};

/// A Python project with a `test` extra: the plan installs it editable, then runs pytest.
pub(crate) const PYTHON: &[(&str, &str)] = &[
    (
        "pyproject.toml",
        "[build-system]\nrequires = [\"setuptools>=61\"]\nbuild-backend = \"setuptools.build_meta\"\n\n[project]\nname = \"demo\"\nversion = \"0.1.0\"\nrequires-python = \">=3.8\"\n\n[project.optional-dependencies]\ntest = [\"pytest\"]\n",
    ),
    ("src/demo/__init__.py", "def add(a, b):\n    return a + b\n"),
    (
        "tests/test_demo.py",
        "from demo import add\n\ndef test_adds():\n    assert add(1, 2) == 3\n\ndef test_fails():\n    assert add(1, 2) == 4\n",
    ),
];

/// A Node project whose entry point is a build output, so the plan builds it (a step the
/// tests may not need) before `node --test`.
const NODE: &[(&str, &str)] = &[
    (
        "package.json",
        r#"{"name":"demo","version":"1.0.0","main":"dist/index.js","scripts":{"build":"webpack","test":"node --test"},"engines":{"node":">=18"}}"#,
    ),
    (
        "test/math.test.js",
        "const test = require('node:test');\nconst assert = require('node:assert');\ntest('adds', () => assert.strictEqual(1 + 2, 3));\n",
    ),
];

/// What the plan's editable install prints when the pinned backend has no PEP 660 (uv 0.13).
const NO_BUILD_EDITABLE: &str = "  × Failed to build `demo @ file:///testbed`\n  ├─▶ The build backend returned an error\n  ╰─▶ Call to `setuptools.build_meta.build_editable` failed (exit status: 1)\n      AttributeError: module 'setuptools.build_meta' has no attribute 'build_editable'\n";

/// The baseline every Python launch here gets unless a test says otherwise: one test passes,
/// one fails, which counts as a working build.
pub(crate) fn pytest_baseline() -> Answer {
    Answer::pytest(&[
        ("tests/test_demo.py::test_adds", "PASSED"),
        ("tests/test_demo.py::test_fails", "FAILED"),
    ])
}

/// pytest failing to import a test module for want of `yaml`.
fn pytest_without_yaml() -> Answer {
    Answer::exit(2).output(
        "==================================== ERRORS ====================================\n\
         _____________________ ERROR collecting tests/test_demo.py ______________________\n\
         ImportError while importing test module '/testbed/tests/test_demo.py'.\n\
         tests/test_demo.py:1: in <module>\n    import yaml\n\
         E   ModuleNotFoundError: No module named 'yaml'\n\
         =========================== short test summary info ============================\n\
         ERROR tests/test_demo.py\n\
         =============================== 1 error in 0.12s ===============================\n",
    )
}

/// `node --test` TAP output with one passing test.
fn node_test_passing() -> Answer {
    Answer::ok().output("TAP version 13\nok 1 - adds\n1..1\n# tests 1\n# pass 1\n# fail 0\n")
}

/// One launch of a repository holding `files` on `runtime`.
pub(crate) struct Launched {
    pub(crate) result: Result<EnvironmentRecord, LaunchError>,
    pub(crate) image_tag: String,
    /// The launch's log directory (kept until this is dropped).
    pub(crate) log_dir: std::path::PathBuf,
    _tmp: tempfile::TempDir,
}

impl Launched {
    /// The row, which the launch must have returned.
    pub(crate) fn record(&self) -> &EnvironmentRecord {
        match &self.result {
            Ok(record) => record,
            Err(e) => panic!("the launch failed as a whole: {e}"),
        }
    }
}

/// Commits `files` to a fresh git repository and launches it on `runtime`. Checks what every
/// launch must do whatever its outcome: every container it created is removed by the time the
/// stage's removals are waited for, and carries the run label.
async fn launch_on(runtime: &Arc<ScriptedRuntime>, files: &[(&str, &str)]) -> Launched {
    launch_with(runtime, files, |_| {}).await
}

/// [`launch_on`], with the request changed by `configure` before the launch.
pub(crate) async fn launch_with(
    runtime: &Arc<ScriptedRuntime>,
    files: &[(&str, &str)],
    configure: impl FnOnce(&mut LaunchRequest),
) -> Launched {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    for (path, text) in files {
        let path = repo.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "base"]);
    let head = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(&repo)
        .output()
        .unwrap();
    let base_commit = String::from_utf8_lossy(&head.stdout).trim().to_string();
    let image_tag = "kiln-env/scripted__demo-1:latest".to_string();
    let mut request = LaunchRequest {
        candidate: Candidate {
            status: kiln_schema::CandidateStatus::Ok,
            repo: "scripted/demo".into(),
            pull_number: Some(1),
            base_commit,
            created_at: COMMIT_DATE.into(),
            origin: "kiln-launch scripted".into(),
            ..Candidate::new(kiln_schema::InstanceId::new("scripted__demo-1").unwrap())
        },
        clone_url: repo.display().to_string(),
        cache_dir: tmp.path().join("cache"),
        log_dir: tmp.path().join("logs"),
        log_dir_label: "logs".into(),
        ca_bundle: None,
        image_tag: image_tag.clone(),
        labels: BTreeMap::from([(LABEL_RUN.to_string(), "scripted/run-1".to_string())]),
        settings: LaunchSettings {
            concurrency: 1,
            command_timeout: Duration::from_secs(1200),
            test_timeout: Duration::from_secs(600),
            case_timeout: Duration::from_secs(300),
            min_pass_ratio: 0.5,
            date_cutoff: true,
            verify_dockerfile: false,
            test_scope: "all".into(),
            recipes: true,
            reuse: false,
            verify_reuse: 0,
            tests: kiln_core::config::TestNetwork::default(),
            agent: None,
        },
        docker: DockerSettings::default(),
        stage: "launch".into(),
        removals: kiln_core::Removals::default(),
        lm: None,
        recipes: None,
        reuse: Vec::new(),
    };
    configure(&mut request);
    let engine: Arc<dyn ContainerRuntime> = Arc::clone(runtime) as _;
    // A loop that never ends (a repair tried again and again) fails the test, not the run. The
    // bound is loose: a launch here takes a second idle, and many times that beside the
    // real-engine tests on two busy cores.
    let result = tokio::time::timeout(
        Duration::from_secs(180),
        launch(engine, &request, &NullReporter),
    )
    .await
    .expect("the launch did not end within 180 s");
    let not_removed = request.removals.wait().await;
    assert!(not_removed.is_empty(), "removals failed: {not_removed:?}");
    // A session dropped on an error path removes its container from a spawned task.
    for _ in 0..100 {
        if runtime.live_containers().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(runtime.live_containers(), [], "containers left behind");
    for container in runtime.containers() {
        assert_eq!(
            container.labels.get(LABEL_RUN).map(String::as_str),
            Some("scripted/run-1"),
            "{:?}",
            container.spec.image
        );
    }
    Launched {
        result,
        image_tag,
        log_dir: request.log_dir.clone(),
        _tmp: tmp,
    }
}

/// Index of the first command at or after `from` that contains `needle`.
fn position(commands: &[String], from: usize, needle: &str) -> usize {
    commands
        .iter()
        .skip(from)
        .position(|c| c.contains(needle))
        .map(|at| at + from)
        .unwrap_or_else(|| panic!("no command with {needle:?} from {from} in {commands:#?}"))
}

fn count_containing(commands: &[String], needle: &str) -> usize {
    commands.iter().filter(|c| c.contains(needle)).count()
}

/// The editable install of the plan, as the engine was asked to run it.
fn is_project_install(command: &str) -> bool {
    command.contains("uv pip install") && command.contains(" -e '.[test]'")
}

#[tokio::test]
async fn a_setup_failure_a_rule_knows_is_repaired_once_and_recorded() {
    let runtime = Arc::new(ScriptedRuntime::new());
    runtime.script(
        Script::contains(" -e '.[test]'")
            .nth(1)
            .answer(Answer::exit(1).output(NO_BUILD_EDITABLE)),
    );
    runtime.script(Script::contains("-m pytest").answer(pytest_baseline()));
    let launched = launch_on(&runtime, PYTHON).await;
    let record = launched.record();

    assert_eq!(record.status.as_str(), "built", "{:?}", record.log_tail);
    assert_eq!(record.repairs.len(), 1, "{:?}", record.repairs);
    assert!(
        record.repairs[0].starts_with("python-editable-backend: "),
        "{:?}",
        record.repairs
    );
    assert!(
        record.repairs[0].ends_with("(after: build_editable)"),
        "the row names what triggered the repair: {}",
        record.repairs[0]
    );
    // The failing install, then the repaired one right after it, then the tests.
    let commands = runtime.commands();
    let failed = position(&commands, 0, " -e '.[test]'");
    assert!(!commands[failed].contains("--no-build-isolation"));
    let repaired = &commands[failed + 1];
    assert!(
        repaired.contains("'setuptools>=64'")
            && repaired.contains("-r pyproject.toml --extra test")
            && repaired.contains("--no-build-isolation --no-deps -e"),
        "{repaired}"
    );
    assert_eq!(
        commands.iter().filter(|c| is_project_install(c)).count(),
        2,
        "{commands:#?}"
    );
    assert_eq!(commands.last(), Some(&record.test_command));
    // The row replays what worked, not what failed.
    assert!(record.setup_commands.contains(repaired));
    assert!(!record.setup_commands.contains(&commands[failed]));
    assert!(
        record
            .dockerfile
            .as_deref()
            .is_some_and(|d| d.contains("--no-build-isolation")),
        "{:?}",
        record.dockerfile
    );
    assert_eq!(
        record.baseline.get("tests/test_demo.py::test_adds"),
        Some(&TestStatus::Pass)
    );
    assert_eq!(record.image.as_deref(), Some(launched.image_tag.as_str()));
}

#[tokio::test]
async fn a_built_environment_is_committed_before_its_baseline_runs() {
    let runtime = Arc::new(ScriptedRuntime::new());
    runtime.script(Script::contains("-m pytest").answer(pytest_baseline()));
    let launched = launch_on(&runtime, PYTHON).await;
    let record = launched.record();
    assert_eq!(record.status.as_str(), "built", "{:?}", record.log_tail);
    assert!(record.repairs.is_empty());
    assert_eq!(
        (record.baseline_passed, record.baseline_failed),
        (1, 1),
        "{:?}",
        record.baseline
    );

    // Setup in one container, from the plan's base image, which was built (its Debian base
    // pulled first), on the network; the repository copied into it before any command ran.
    let containers = runtime.containers();
    assert_eq!(containers.len(), 2, "{containers:#?}");
    let container = &containers[0];
    assert_eq!(container.spec.image, record.base_image);
    assert_eq!(container.spec.network, kiln_core::NetworkMode::Bridge);
    assert_eq!(
        runtime.image(&record.base_image).map(|i| i.origin),
        Some(ImageOrigin::Built)
    );
    assert_eq!(
        runtime
            .builds()
            .iter()
            .map(|b| b.tag.as_str())
            .collect::<Vec<_>>(),
        [record.base_image.as_str()]
    );
    assert_eq!(
        container.file("/testbed/tests/test_demo.py").as_deref(),
        Some(PYTHON[2].1.as_bytes())
    );
    // Commit, then the test command, in a container of its own from the committed image and
    // without network: the image never holds what the tests leave, and the tests run as
    // validation runs them.
    let calls = runtime.calls();
    let commit = calls
        .iter()
        .position(|c| matches!(c, Call::Commit { tag, .. } if *tag == launched.image_tag))
        .expect("no commit");
    let tests = calls
        .iter()
        .position(|c| matches!(c, Call::Exec { script, .. } if *script == record.test_command))
        .expect("no test run");
    assert!(commit < tests, "{calls:#?}");
    assert!(
        !container.commands().contains(&record.test_command.as_str()),
        "{:?}",
        container.commands()
    );
    let tests = &containers[1];
    assert_eq!(
        Some(tests.spec.image.as_str()),
        record.image_digest.as_deref()
    );
    assert_eq!(tests.spec.network, kiln_core::NetworkMode::None);
    assert_eq!(tests.commands(), [record.test_command.as_str()]);
    let image = runtime
        .image(&launched.image_tag)
        .expect("no environment image");
    assert_eq!(image.origin, ImageOrigin::Committed(container.id.clone()));
    // The row names the image by the id the commit gave, which validation runs.
    assert_eq!(record.image_digest.as_deref(), Some(image.id.as_str()));
    assert_eq!(
        image.labels.get("kiln.instance").map(String::as_str),
        Some("scripted__demo-1")
    );
    assert!(
        !image.labels.contains_key(LABEL_RUN),
        "the image outlives the run: {:?}",
        image.labels
    );
}

#[tokio::test]
async fn a_setup_failure_no_rule_knows_is_a_failed_row_with_its_class() {
    let runtime = Arc::new(ScriptedRuntime::new());
    let message = "  × No solution found when resolving dependencies:\n  ╰─▶ Because kiln-nonexistent was not found in the package registry and demo depends on it, we can conclude that demo's requirements are unsatisfiable.\n";
    runtime.script(Script::contains(" -e '.[test]'").answer(Answer::exit(1).output(message)));
    let launched = launch_on(&runtime, PYTHON).await;
    let record = launched.record();

    assert_eq!(record.status.as_str(), "failed");
    assert_eq!(
        record.failure_class.map(kiln_schema::FailureClass::as_str),
        Some("dependency-resolution")
    );
    let commands = runtime.commands();
    let install = &commands[position(&commands, 0, " -e '.[test]'")];
    assert_eq!(record.failure_command.as_ref(), Some(install));
    assert!(
        record
            .log_tail
            .as_deref()
            .is_some_and(|t| t.contains("kiln-nonexistent was not found")),
        "{:?}",
        record.log_tail
    );
    assert!(record.repairs.is_empty(), "{:?}", record.repairs);
    // Nothing ran after the failing command but the registry check (which the scripted
    // container answers with no complaint), and no environment was committed.
    let after = &commands[position(&commands, 0, " -e '.[test]'") + 1..];
    assert_eq!(after.len(), 1, "{after:?}");
    assert!(after[0].contains("kiln-registry:"), "{after:?}");
    assert_eq!(runtime.count(Operation::Commit), 0);
    assert!(runtime.image(&launched.image_tag).is_none());
    assert_eq!(record.image, None);
}

/// A dependency failure while the registry does not answer from the container says nothing
/// about the repository: the launch ends with an error that names the registry, no row, no
/// image, and no repair is tried.
#[tokio::test]
async fn a_dependency_failure_while_the_registry_is_silent_is_an_error_not_a_row() {
    let runtime = Arc::new(ScriptedRuntime::new());
    let message = "  × Failed to fetch: `https://pypi.org/simple/pytest/`\n  ╰─▶ dns error: failed to lookup address information: Temporary failure in name resolution\n";
    runtime.script(Script::contains(" -e '.[test]'").answer(Answer::exit(1).output(message)));
    runtime.script(Script::contains("kiln-registry:").answer(Answer::ok().output(
        "kiln-registry: down https://pypi.org/simple/: curl: (6) Could not resolve host: pypi.org\n",
    )));
    let launched = launch_on(&runtime, PYTHON).await;
    match &launched.result {
        Err(LaunchError::RegistryDown { url, error }) => {
            assert_eq!(url, "https://pypi.org/simple/");
            assert!(error.contains("Could not resolve host"), "{error}");
        }
        other => panic!("expected the registry to be blamed: {other:?}"),
    }
    assert_eq!(runtime.count(Operation::Commit), 0);
    assert!(runtime.image(&launched.image_tag).is_none());
    let commands = runtime.commands();
    assert_eq!(
        count_containing(&commands, " -e '.[test]'"),
        1,
        "{commands:?}"
    );
    // The check honours the container's own index setting.
    assert!(commands.iter().any(|c| c.contains("${PIP_INDEX_URL:-")));
    let log = std::fs::read_to_string(launched.log_dir.join("launch.log")).unwrap();
    assert!(log.contains("$ kiln registry check"), "{log}");
}

#[tokio::test]
async fn a_compiler_failure_no_rule_knows_is_a_build_failure() {
    let runtime = Arc::new(ScriptedRuntime::new());
    runtime.script(
        Script::contains(" -e '.[test]'")
            .answer(Answer::exit(1).output("src/ext.c:10:5: error: unknown type name 'foo'\nerror: command '/usr/bin/gcc' failed with exit code 1\n")),
    );
    let record = launch_on(&runtime, PYTHON).await.record().clone();
    assert_eq!(record.status.as_str(), "failed");
    assert_eq!(
        record.failure_class.map(kiln_schema::FailureClass::as_str),
        Some("build")
    );
    assert!(record.repairs.is_empty(), "{:?}", record.repairs);
}

#[tokio::test]
async fn every_setup_rule_is_tried_at_most_once() {
    // Every install of the project fails the same way: the editable-backend repair is tried,
    // then the next rule whose signature matches, and neither again.
    let runtime = Arc::new(ScriptedRuntime::new());
    runtime.script(Script::contains(" -e '.").answer(Answer::exit(1).output(NO_BUILD_EDITABLE)));
    runtime.script(
        Script::contains("--no-build-isolation '.")
            .answer(Answer::exit(1).output(NO_BUILD_EDITABLE)),
    );
    let launched = launch_on(&runtime, PYTHON).await;
    let record = launched.record();

    assert_eq!(record.status.as_str(), "failed");
    assert_eq!(
        record.failure_class.map(kiln_schema::FailureClass::as_str),
        Some("build")
    );
    let rules: Vec<&str> = record
        .repairs
        .iter()
        .map(|r| r.split(':').next().unwrap_or_default())
        .collect();
    assert_eq!(
        rules,
        ["python-editable-backend", "python-old-setuptools"],
        "{:#?}",
        record.repairs
    );
    let commands = runtime.commands();
    assert_eq!(count_containing(&commands, "-m pytest"), 0, "{commands:#?}");
    assert!(runtime.image(&launched.image_tag).is_none());
}

#[tokio::test]
async fn a_repair_that_asks_for_an_older_setuptools_gets_it() {
    // The editable-backend repair installs a newer setuptools; when the project then turns
    // out to need one older than 58, the next repair must leave the older one in place for
    // the install that follows.
    let runtime = Arc::new(ScriptedRuntime::new());
    runtime.script(
        Script::contains("--no-build-isolation --no-deps -e").answer(Answer::exit(1).output(
            "      error in demo setup command: use_2to3 is invalid.\n      [end of output]\n",
        )),
    );
    runtime.script(
        Script::contains(" -e '.[test]'")
            .nth(1)
            .answer(Answer::exit(1).output(NO_BUILD_EDITABLE)),
    );
    runtime.script(Script::contains("-m pytest").answer(pytest_baseline()));
    // A build plugin besides setuptools, which the build without isolation needs.
    let mut files = PYTHON.to_vec();
    files[0].1 = "[build-system]\nrequires = [\"setuptools>=40\", \"setuptools_scm>=3\"]\nbuild-backend = \"setuptools.build_meta\"\n\n[project]\nname = \"demo\"\nversion = \"0.1.0\"\n\n[project.optional-dependencies]\ntest = [\"pytest\"]\n";
    let launched = launch_on(&runtime, &files).await;
    let record = launched.record();

    assert_eq!(record.status.as_str(), "built", "{:?}", record.log_tail);
    let rules: Vec<&str> = record
        .repairs
        .iter()
        .map(|r| r.split(':').next().unwrap_or_default())
        .collect();
    assert_eq!(
        rules,
        ["python-editable-backend", "python-old-setuptools"],
        "{:#?}",
        record.repairs
    );
    // After `setuptools<58` is installed (with the build plugin), no later setup command
    // installs a newer one.
    let commands = runtime.commands();
    let old = position(&commands, 0, "'setuptools<58'");
    assert!(
        commands[old].contains("setuptools_scm>=3"),
        "{}",
        commands[old]
    );
    for later in &commands[old + 1..] {
        assert!(
            !later.contains("setuptools>=64"),
            "a later command undoes the older setuptools: {later}"
        );
    }
    let install = &commands[old + 1];
    assert!(
        install.contains("--no-build-isolation '.[test]'") && !install.contains(" -e "),
        "{install}"
    );
    assert_eq!(
        install.matches("--no-build-isolation").count(),
        1,
        "{install}"
    );
    // The non-editable install is redone after every patch.
    assert!(
        record
            .rebuild_commands
            .iter()
            .any(|c| c.contains("--no-build-isolation")),
        "{:?}",
        record.rebuild_commands
    );
}

#[tokio::test]
async fn a_test_run_repair_installs_the_missing_module_in_the_setup_container_and_commits_again() {
    let runtime = Arc::new(ScriptedRuntime::new());
    runtime
        .script(Script::contains("-m pytest").answers([pytest_without_yaml(), pytest_baseline()]));
    let launched = launch_on(&runtime, PYTHON).await;
    let record = launched.record();

    assert_eq!(record.status.as_str(), "built", "{:?}", record.log_tail);
    assert_eq!(record.repairs.len(), 1, "{:?}", record.repairs);
    assert!(
        record.repairs[0].starts_with("python-missing-test-module: "),
        "{:?}",
        record.repairs
    );
    // tests, the install of the module's distribution, tests again.
    let commands = runtime.commands();
    let first = position(&commands, 0, "-m pytest");
    let install = position(&commands, first + 1, "pyyaml");
    let second = position(&commands, install + 1, "-m pytest");
    assert_eq!((install, second), (first + 1, first + 2), "{commands:#?}");
    assert!(record.setup_commands.contains(&commands[install]));
    // Each test run in a container of its own from the image committed just before it; the
    // repair in the setup container, which the first run left as it was, and the environment
    // committed again from it before the second run.
    let containers = runtime.containers();
    assert_eq!(containers.len(), 3, "{containers:#?}");
    let setup = &containers[0];
    assert_eq!(setup.commands().last(), Some(&commands[install].as_str()));
    assert_eq!(
        setup.commits,
        [launched.image_tag.as_str(), launched.image_tag.as_str()]
    );
    assert_eq!(
        Some(containers[2].spec.image.as_str()),
        record.image_digest.as_deref()
    );
    for (run, command) in containers[1..].iter().zip([first, second]) {
        assert!(run.spec.image.starts_with("sha256:"), "{}", run.spec.image);
        assert_eq!(run.spec.network, kiln_core::NetworkMode::None);
        assert_eq!(run.commands(), [commands[command].as_str()]);
    }
    assert_eq!(
        runtime.image(&launched.image_tag).map(|i| i.origin),
        Some(ImageOrigin::Committed(setup.id.clone()))
    );
    assert_eq!(
        record.baseline.get("tests/test_demo.py::test_adds"),
        Some(&TestStatus::Pass)
    );
}

/// A baseline where `tests/test_net.py::test_download` fails for want of a network, read
/// from its traceback, beside `test_adds`, which passes, and `test_fails`, when `with_failure`.
fn pytest_with_a_test_offline(with_failure: bool) -> Answer {
    let (failing, summary, totals) = if with_failure {
        (
            "tests/test_demo.py::test_fails FAILED\n",
            "FAILED tests/test_demo.py::test_fails\n",
            "2 failed, 1 passed",
        )
    } else {
        ("", "", "1 failed, 1 passed")
    };
    Answer::exit(1).output(format!(
        "============================= test session starts ==============================\n\
         tests/test_demo.py::test_adds PASSED\n{failing}\
         tests/test_net.py::test_download FAILED\n\n\
         =================================== FAILURES ===================================\n\
         ________________________________ test_download _________________________________\n\
         E   urllib.error.URLError: <urlopen error [Errno -3] Temporary failure in name resolution>\n\
         =========================== short test summary info ============================\n\
         PASSED tests/test_demo.py::test_adds\n{summary}\
         FAILED tests/test_net.py::test_download\n\
         ========================= {totals} in 30.12s =========================\n"
    ))
}

#[tokio::test]
async fn tests_that_failed_for_want_of_a_network_are_left_out_of_the_command_and_the_row_says_so() {
    let runtime = Arc::new(ScriptedRuntime::new());
    runtime.script(
        // 1 of 3 passed: below the pass ratio until the test that needs a network is out.
        Script::contains("-m pytest")
            .answers([pytest_with_a_test_offline(true), pytest_baseline()]),
    );
    let launched = launch_on(&runtime, PYTHON).await;
    let record = launched.record();

    assert_eq!(record.status.as_str(), "built", "{:?}", record.log_tail);
    assert_eq!(record.tests_left_out, ["tests/test_net.py::test_download"]);
    // The baseline ran again with the narrowed command, which the row records, and which is
    // what validation runs; its statuses are the row's.
    let commands = runtime.commands();
    let runs: Vec<&String> = commands
        .iter()
        .filter(|c| c.contains("-m pytest"))
        .collect();
    assert_eq!(runs.len(), 2, "{commands:#?}");
    assert!(!runs[0].contains("PYTEST_ADDOPTS"), "{}", runs[0]);
    assert!(
        runs[1].contains("export PYTEST_ADDOPTS=")
            && runs[1].contains("--deselect=tests/test_net.py::test_download"),
        "{}",
        runs[1]
    );
    assert_eq!(&record.test_command, runs[1]);
    assert!(
        !record
            .baseline
            .contains_key("tests/test_net.py::test_download")
    );
    assert_eq!(record.built_by, Some(kiln_schema::BuiltBy::Rules));
}

#[tokio::test]
async fn tests_that_still_fail_without_those_that_need_a_network_are_the_launchs_failure() {
    let runtime = Arc::new(ScriptedRuntime::new());
    let still_failing = Answer::pytest(&[
        ("tests/test_demo.py::test_adds", "FAILED"),
        ("tests/test_demo.py::test_fails", "FAILED"),
    ]);
    runtime.script(
        Script::contains("-m pytest").answers([pytest_with_a_test_offline(true), still_failing]),
    );
    let launched = launch_on(&runtime, PYTHON).await;
    let record = launched.record();

    assert_eq!(record.status.as_str(), "failed");
    assert_eq!(
        record.failure_class.map(FailureClass::as_str),
        Some("tests-failing")
    );
    // Not run a third time: the whole command failed as well.
    let commands = runtime.commands();
    assert_eq!(count_containing(&commands, "-m pytest"), 2, "{commands:#?}");
}

#[tokio::test]
async fn tests_that_need_a_network_are_left_out_after_a_repair_and_a_narrowed_run_that_stops_brings_the_whole_command_back()
 {
    // A missing module repaired first; the next baseline shows the test that needs a network.
    let runtime = Arc::new(ScriptedRuntime::new());
    runtime.script(Script::contains("-m pytest").answers([
        pytest_without_yaml(),
        pytest_with_a_test_offline(false),
        pytest_baseline(),
    ]));
    let launched = launch_on(&runtime, PYTHON).await;
    let record = launched.record();
    assert_eq!(record.status.as_str(), "built", "{:?}", record.log_tail);
    assert_eq!(record.tests_left_out, ["tests/test_net.py::test_download"]);
    assert!(
        record.test_command.contains("--deselect="),
        "{}",
        record.test_command
    );

    // The narrowed run times out where the whole one counted: the whole command again.
    let runtime = Arc::new(ScriptedRuntime::new());
    runtime.script(Script::contains("-m pytest").answers([
        pytest_with_a_test_offline(false),
        Answer::timed_out(),
        pytest_with_a_test_offline(false),
    ]));
    let launched = launch_on(&runtime, PYTHON).await;
    let record = launched.record();
    assert_eq!(record.status.as_str(), "built", "{:?}", record.log_tail);
    assert!(
        record.tests_left_out.is_empty(),
        "{:?}",
        record.tests_left_out
    );
    assert!(
        !record.test_command.contains("PYTEST_ADDOPTS"),
        "{}",
        record.test_command
    );
    let commands = runtime.commands();
    assert_eq!(count_containing(&commands, "-m pytest"), 3, "{commands:#?}");
}

#[tokio::test]
async fn a_runner_that_cannot_leave_tests_out_keeps_the_whole_command() {
    let runtime = Arc::new(ScriptedRuntime::new());
    // pytest before 3.5 knows no --deselect: a usage error, no test.
    let usage = Answer::exit(4).output(
        "ERROR: usage: python -m pytest [options] [file_or_dir] [file_or_dir] [...]\n\
         python -m pytest: error: unrecognized arguments: --deselect=tests/test_net.py::test_download\n",
    );
    runtime.script(Script::contains("-m pytest").answers([
        pytest_with_a_test_offline(false),
        usage,
        pytest_with_a_test_offline(false),
    ]));
    let launched = launch_on(&runtime, PYTHON).await;
    let record = launched.record();

    assert_eq!(record.status.as_str(), "built", "{:?}", record.log_tail);
    assert!(
        record.tests_left_out.is_empty(),
        "{:?}",
        record.tests_left_out
    );
    let commands = runtime.commands();
    let runs: Vec<&String> = commands
        .iter()
        .filter(|c| c.contains("-m pytest"))
        .collect();
    assert_eq!(runs.len(), 3, "{commands:#?}");
    assert_eq!(runs[0], runs[2]);
    assert_eq!(&record.test_command, runs[2]);
    assert_eq!(
        record.baseline.get("tests/test_net.py::test_download"),
        Some(&TestStatus::Fail)
    );
    // Leaving out is no repair, and is not tried twice.
    assert!(record.repairs.is_empty(), "{:?}", record.repairs);
}

#[tokio::test]
async fn a_test_run_rule_is_not_tried_twice() {
    let runtime = Arc::new(ScriptedRuntime::new());
    runtime.script(Script::contains("-m pytest").answer(pytest_without_yaml()));
    let launched = launch_on(&runtime, PYTHON).await;
    let record = launched.record();

    assert_eq!(record.status.as_str(), "failed");
    assert_eq!(record.repairs.len(), 1, "{:?}", record.repairs);
    let commands = runtime.commands();
    assert_eq!(count_containing(&commands, "-m pytest"), 2, "{commands:#?}");
    assert_eq!(count_containing(&commands, "pyyaml"), 1, "{commands:#?}");
    assert_eq!(record.failure_command.as_ref(), Some(&record.test_command));
    // The collection error is a parsed test that does not pass.
    assert_eq!(
        record.failure_class.map(kiln_schema::FailureClass::as_str),
        Some("tests-failing")
    );
    assert_eq!(
        record.baseline.get("tests/test_demo.py"),
        Some(&TestStatus::Error)
    );
    // The image of a failed launch is no environment.
    assert!(runtime.image(&launched.image_tag).is_none());
    assert_eq!(record.image, None);
}

#[tokio::test]
async fn an_engine_failure_mid_launch_is_an_error_not_a_row() {
    let runtime = Arc::new(ScriptedRuntime::new());
    runtime.script(
        Script::contains(" -e '.[test]'").answer(Answer::engine_error(RuntimeError::Unreachable {
            endpoint: "unix:///var/run/docker.sock".into(),
            message: "connection reset by peer".into(),
        })),
    );
    let launched = launch_on(&runtime, PYTHON).await;
    assert!(
        matches!(
            launched.result,
            Err(LaunchError::Engine(RuntimeError::Unreachable { .. }))
        ),
        "{:?}",
        launched.result
    );
    assert_eq!(count_containing(&runtime.commands(), "-m pytest"), 0);
    assert!(runtime.image(&launched.image_tag).is_none());
}

#[tokio::test]
async fn a_checkout_the_engine_cannot_unpack_is_the_items_row_and_the_next_item_builds() {
    let runtime = Arc::new(ScriptedRuntime::new());
    runtime.script(Script::contains("-m pytest").answer(pytest_baseline()));
    runtime.fail(
        Operation::CopyIn,
        1,
        RuntimeError::Refused {
            operation: "copy into / of 0123456789ab".into(),
            message: "Error processing tar file(exit status 1): unhandled tar header type 83 \
                      (HTTP 500)"
                .into(),
        },
    );
    let refused = launch_on(&runtime, PYTHON).await;
    let row = refused.result.as_ref().expect("a row, not a stage error");
    assert_eq!(row.status, EnvironmentStatus::Failed);
    assert_eq!(row.failure_class, Some(FailureClass::Infra));
    let tail = row.log_tail.as_deref().unwrap_or_default();
    assert!(tail.contains("unhandled tar header type 83"), "{tail}");
    assert_eq!(count_containing(&runtime.commands(), "-m pytest"), 0);
    // The engine answers: the next item of the stage launches as usual.
    let next = launch_on(&runtime, PYTHON).await;
    let row = next.result.as_ref().unwrap();
    assert_eq!(row.status, EnvironmentStatus::Built, "{row:?}");
}

#[tokio::test]
async fn a_commit_the_engine_refuses_is_an_error_not_a_row() {
    let runtime = Arc::new(ScriptedRuntime::new());
    runtime.fail(
        Operation::Commit,
        1,
        RuntimeError::engine("commit a container", "no space left on device"),
    );
    let launched = launch_on(&runtime, PYTHON).await;
    assert!(
        matches!(
            &launched.result,
            Err(LaunchError::Engine(RuntimeError::Engine { message, .. })) if message.contains("no space left")
        ),
        "{:?}",
        launched.result
    );
    assert_eq!(count_containing(&runtime.commands(), "-m pytest"), 0);
}

#[tokio::test]
async fn a_base_image_that_cannot_be_built_is_an_error_not_a_row() {
    let runtime = Arc::new(ScriptedRuntime::new());
    runtime.fail(
        Operation::BuildImage,
        1,
        RuntimeError::Build {
            image: "kiln/python".into(),
            message: "apt-get update: network unreachable".into(),
        },
    );
    let launched = launch_on(&runtime, PYTHON).await;
    assert!(
        matches!(
            launched.result,
            Err(LaunchError::Engine(RuntimeError::Build { .. }))
        ),
        "{:?}",
        launched.result
    );
    assert_eq!(runtime.count(Operation::Create), 0);
}

#[tokio::test]
async fn a_container_stopped_by_the_tests_is_a_failed_row() {
    let runtime = Arc::new(ScriptedRuntime::new());
    runtime.script(Script::contains("-m pytest").answer(Answer::stops_container(137)));
    let launched = launch_on(&runtime, PYTHON).await;
    let record = launched.record();

    assert_eq!(record.status.as_str(), "failed");
    assert_eq!(
        record.failure_class.map(kiln_schema::FailureClass::as_str),
        Some("test-run")
    );
    assert_eq!(record.failure_command.as_ref(), Some(&record.test_command));
    assert!(
        record
            .log_tail
            .as_deref()
            .is_some_and(|t| t.contains("the container stopped")),
        "{:?}",
        record.log_tail
    );
    assert!(runtime.image(&launched.image_tag).is_none());
}

#[tokio::test]
async fn a_baseline_past_the_disk_bound_is_a_disk_row() {
    let runtime = Arc::new(ScriptedRuntime::new());
    runtime.script(Script::contains("-m pytest").answer(Answer::engine_error(
        RuntimeError::DiskExceeded {
            command: "pytest".into(),
            bound: kiln_core::DiskBound::Container {
                written: 300 << 20,
                limit: 200 << 20,
            },
        },
    )));
    let launched = launch_on(&runtime, PYTHON).await;
    let record = launched.record();
    assert_eq!(record.status.as_str(), "failed");
    assert_eq!(
        record.failure_class.map(kiln_schema::FailureClass::as_str),
        Some("disk")
    );
    assert_eq!(record.failure_command.as_ref(), Some(&record.test_command));
    assert!(runtime.image(&launched.image_tag).is_none());
}

#[tokio::test]
async fn a_container_stopped_during_setup_is_a_build_failure() {
    let runtime = Arc::new(ScriptedRuntime::new());
    runtime.script(Script::contains(" -e '.[test]'").answer(Answer::stops_container(1)));
    let record = launch_on(&runtime, PYTHON).await.record().clone();
    assert_eq!(record.status.as_str(), "failed");
    assert_eq!(
        record.failure_class.map(kiln_schema::FailureClass::as_str),
        Some("build")
    );
    assert!(
        record
            .failure_command
            .as_deref()
            .is_some_and(is_project_install),
        "{:?}",
        record.failure_command
    );
}

#[tokio::test]
async fn a_timed_out_setup_command_is_a_timeout_and_is_not_repaired() {
    // The output matches a rule's signature, but a killed command's output says nothing.
    let runtime = Arc::new(ScriptedRuntime::new());
    runtime.script(
        Script::contains(" -e '.[test]'").answer(Answer::timed_out().output(NO_BUILD_EDITABLE)),
    );
    let launched = launch_on(&runtime, PYTHON).await;
    let record = launched.record();
    assert_eq!(record.status.as_str(), "failed");
    assert_eq!(
        record.failure_class.map(kiln_schema::FailureClass::as_str),
        Some("timeout")
    );
    assert!(record.repairs.is_empty(), "{:?}", record.repairs);
    assert_eq!(
        runtime
            .commands()
            .iter()
            .filter(|c| is_project_install(c))
            .count(),
        1
    );
    // The command ran with the stage's setup timeout.
    let install = runtime
        .containers()
        .into_iter()
        .flat_map(|c| c.execs)
        .find(|e| is_project_install(&e.script))
        .unwrap();
    assert_eq!(install.timeout, Duration::from_secs(1200));
}

#[tokio::test]
async fn a_test_run_killed_for_memory_is_an_oom_row() {
    let runtime = Arc::new(ScriptedRuntime::new());
    runtime.script(Script::contains("-m pytest").answer(Answer::oom_killed()));
    let launched = launch_on(&runtime, PYTHON).await;
    let record = launched.record();
    assert_eq!(record.status.as_str(), "failed");
    assert_eq!(
        record.failure_class.map(kiln_schema::FailureClass::as_str),
        Some("oom")
    );
    assert!(runtime.image(&launched.image_tag).is_none());
    let test_run = runtime
        .containers()
        .into_iter()
        .flat_map(|c| c.execs)
        .find(|e| e.script == record.test_command)
        .unwrap();
    assert_eq!(test_run.timeout, Duration::from_secs(600));
}

#[tokio::test]
async fn a_repair_variable_reaches_later_commands_and_the_image() {
    let runtime = Arc::new(ScriptedRuntime::new());
    runtime.script(
        Script::contains("npm run build").nth(1).answer(
            Answer::exit(1)
                .output("> webpack\nError: error:0308010C:digital envelope routines::unsupported\n    at new Hash (node:internal/crypto/hash:69:19)\n"),
        ),
    );
    runtime.script(Script::contains("node --test").answer(node_test_passing()));
    let launched = launch_on(&runtime, NODE).await;
    let record = launched.record();

    assert_eq!(record.status.as_str(), "built", "{:?}", record.log_tail);
    assert_eq!(record.repairs.len(), 1, "{:?}", record.repairs);
    assert!(
        record.repairs[0]
            .starts_with("node-legacy-openssl: set NODE_OPTIONS=--openssl-legacy-provider"),
        "{:?}",
        record.repairs
    );
    assert_eq!(
        record.environment.get("NODE_OPTIONS").map(String::as_str),
        Some("--openssl-legacy-provider")
    );
    // The build ran twice, the second time with the variable; the tests had it too.
    let execs: Vec<_> = runtime
        .containers()
        .into_iter()
        .flat_map(|c| c.execs)
        .collect();
    let builds: Vec<_> = execs
        .iter()
        .filter(|e| e.script.contains("npm run build"))
        .collect();
    assert_eq!(builds.len(), 2);
    assert_eq!(builds[0].env_var("NODE_OPTIONS"), None);
    assert_eq!(
        builds[1].env_var("NODE_OPTIONS"),
        Some("--openssl-legacy-provider")
    );
    let tests = execs
        .iter()
        .find(|e| e.script == record.test_command)
        .unwrap();
    assert_eq!(
        tests.env_var("NODE_OPTIONS"),
        Some("--openssl-legacy-provider")
    );
    // Every container made from the environment image has it.
    let image = runtime.image(&launched.image_tag).unwrap();
    assert!(
        image.env.contains(&(
            "NODE_OPTIONS".to_string(),
            "--openssl-legacy-provider".to_string()
        )),
        "{:?}",
        image.env
    );
    assert_eq!(record.baseline.get("adds"), Some(&TestStatus::Pass));
}

#[tokio::test]
async fn the_row_carries_the_cpu_its_setup_compile_and_baseline_used() {
    let runtime = Arc::new(ScriptedRuntime::new());
    // The scripted engine counts an answer's duration as CPU time on one core.
    runtime.script(
        Script::contains("npm install").answer(Answer::ok().duration(Duration::from_secs(3))),
    );
    runtime.script(
        Script::contains("npm run build").answer(Answer::ok().duration(Duration::from_secs(5))),
    );
    runtime.script(
        Script::contains("node --test")
            .answer(node_test_passing().duration(Duration::from_secs(2))),
    );
    let launched = launch_on(&runtime, NODE).await;
    let record = launched.record();
    assert_eq!(record.status.as_str(), "built", "{:?}", record.log_tail);
    assert!(
        record
            .setup_commands
            .iter()
            .any(|c| c.contains("npm install")),
        "{:?}",
        record.setup_commands
    );
    // The build is the plan's compile step; the other steps took 10 ms each.
    assert!(
        (record.cpu_compile_seconds - 5.0).abs() < 1e-9,
        "{record:#?}"
    );
    assert!(
        (record.cpu_baseline_seconds - 2.0).abs() < 1e-9,
        "{record:#?}"
    );
    assert!(
        record.cpu_setup_seconds >= 3.0 && record.cpu_setup_seconds < 3.2,
        "{}",
        record.cpu_setup_seconds
    );
}

#[tokio::test]
async fn an_optional_step_that_keeps_failing_is_skipped_and_the_tests_decide() {
    let runtime = Arc::new(ScriptedRuntime::new());
    runtime.script(
        Script::contains("npm run build").answer(
            Answer::exit(1)
                .output("> webpack\nError: error:0308010C:digital envelope routines::unsupported\n    at new Hash (node:internal/crypto/hash:69:19)\n"),
        ),
    );
    runtime.script(Script::contains("node --test").answer(node_test_passing()));
    let launched = launch_on(&runtime, NODE).await;
    let record = launched.record();

    assert_eq!(record.status.as_str(), "built", "{:?}", record.log_tail);
    let rules: Vec<&str> = record
        .repairs
        .iter()
        .map(|r| r.split(':').next().unwrap_or_default())
        .collect();
    assert_eq!(rules, ["node-legacy-openssl", "optional-step"]);
    let commands = runtime.commands();
    assert_eq!(count_containing(&commands, "npm run build"), 2);
    assert!(!record.setup_commands.iter().any(|c| c == "npm run build"));
    assert!(
        !record.rebuild_commands.iter().any(|c| c == "npm run build"),
        "{:?}",
        record.rebuild_commands
    );
    assert_eq!(commands.last(), Some(&record.test_command));
}

/// With `reuse`, a launch starts from the environment of an ancestor commit: a container from
/// that image, its checkout cleared before the new one is copied in, the setup steps run again,
/// and the row names its source. A launch from it that fails launches cold and says why; a
/// source whose commit is not an ancestor is never used.
#[tokio::test]
async fn a_launch_starts_from_an_ancestors_environment_and_falls_back_to_cold() {
    let runtime = Arc::new(ScriptedRuntime::new());
    runtime.script(Script::contains("-m pytest").answer(pytest_baseline()));
    let cold = launch_on(&runtime, PYTHON).await.record().clone();
    let source_image = cold.image_digest.clone().unwrap();
    let source = |base_commit: &str| kiln_launch::ReuseSource {
        instance_id: "scripted__demo-0".into(),
        image: source_image.clone(),
        base_commit: base_commit.into(),
        plan: cold.plan.clone(),
        base_image: cold.base_image.clone(),
        setup_commands: cold.setup_commands.clone(),
        cutoff: cold.dependency_cutoff.clone(),
    };
    let reusing = |r: &mut LaunchRequest| {
        r.settings.reuse = true;
        r.reuse = vec![source(&r.candidate.base_commit)];
    };

    let cold_containers = runtime.containers().len();
    let reused_launch = launch_with(&runtime, PYTHON, reusing).await;
    let reused = reused_launch.record().clone();
    assert_eq!(reused.status, EnvironmentStatus::Built, "{reused:?}");
    assert_eq!(reused.reused_from.as_deref(), Some("scripted__demo-0"));
    // The host's checkout borrowed the mirror's objects; nothing was cloned or packed whole.
    let phases = phases_of(&reused_launch.log_dir.join("launch.log"));
    assert!(
        phases.contains("checkout (borrowed) ") && !phases.contains("clone "),
        "{phases}"
    );
    let from_source: Vec<_> = runtime.containers()[cold_containers..]
        .iter()
        .filter(|c| c.spec.image == source_image)
        .cloned()
        .collect();
    assert_eq!(from_source.len(), 1, "one setup container from the source");
    let commands = from_source[0].commands();
    assert!(commands[0].contains("git reset -q --hard"), "{commands:?}");
    assert!(
        commands[0].contains("git index-pack --stdin"),
        "{commands:?}"
    );
    // Nothing changed since the source's commit: no setup step runs again, and the row still
    // lists every one (its Dockerfile builds the same environment cold).
    assert!(
        !commands.iter().any(|c| c.contains(" -e '.[test]'")),
        "{commands:?}"
    );
    assert_eq!(reused.setup_commands, cold.setup_commands);
    assert!(
        reused
            .version_reason
            .contains("not run again (scripted__demo-0's environment ran them"),
        "{}",
        reused.version_reason
    );
    assert_eq!(reused.baseline, cold.baseline);

    // A source resolved as of an earlier date, no manifest changed since: this commit resolves
    // as of that date too (what the source installed stands), so its install runs again with
    // the source's cut-off.
    assert!(cold.dependency_cutoff.is_some(), "{cold:?}");
    let earlier = "2024-05-02T03:04:05Z";
    let before = runtime.containers().len();
    let dated = launch_with(&runtime, PYTHON, |r| {
        r.settings.reuse = true;
        r.reuse = vec![kiln_launch::ReuseSource {
            cutoff: Some(earlier.into()),
            ..source(&r.candidate.base_commit)
        }];
    })
    .await
    .record()
    .clone();
    assert_eq!(dated.reused_from.as_deref(), Some("scripted__demo-0"));
    assert_eq!(dated.dependency_cutoff.as_deref(), Some(earlier));
    assert!(
        dated.version_reason.contains(&format!(
            "dependencies resolved as of scripted__demo-0's cut-off {earlier}"
        )),
        "{}",
        dated.version_reason
    );
    let ran: Vec<String> = runtime.containers()[before..]
        .iter()
        .filter(|c| c.spec.image == source_image)
        .flat_map(|c| {
            c.commands()
                .into_iter()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        ran.iter()
            .any(|c| c.contains(" -e '.[test]'") && c.contains(earlier)),
        "{ran:?}"
    );

    // A source whose setup differs runs the steps again; here every one fails in it: a cold
    // launch builds it.
    runtime.script(
        Script::contains(" -e '.[test]'")
            .in_image(source_image.clone())
            .answer(Answer::exit(1).output("error: something of the old build\n")),
    );
    let fallback = launch_with(&runtime, PYTHON, |r| {
        r.settings.reuse = true;
        r.reuse = vec![kiln_launch::ReuseSource {
            setup_commands: Vec::new(),
            ..source(&r.candidate.base_commit)
        }];
    })
    .await;
    let row = fallback.record();
    assert_eq!(row.status, EnvironmentStatus::Built, "{row:?}");
    assert_eq!(row.reused_from, None);
    assert!(
        row.version_reason.contains(
            "reuse: starting from scripted__demo-0's environment failed (build), launched cold"
        ),
        "{}",
        row.version_reason
    );
    // The cold attempt made the whole checkout the borrowed one had spared.
    assert!(
        phases_of(&fallback.log_dir.join("launch-reused.log")).contains("checkout (borrowed) ")
    );
    assert!(phases_of(&fallback.log_dir.join("launch.log")).contains("clone "));

    // A source whose commit is not an ancestor of the base commit is never started from.
    let before = runtime.containers().len();
    let unrelated = launch_with(&runtime, PYTHON, |r| {
        r.settings.reuse = true;
        r.reuse = vec![source(&"0".repeat(40))];
    })
    .await;
    assert_eq!(unrelated.record().reused_from, None);
    // Nor one built on another base image (another interpreter).
    let other_image = launch_with(&runtime, PYTHON, |r| {
        r.settings.reuse = true;
        r.reuse = vec![kiln_launch::ReuseSource {
            base_image: "kiln/python:2.7-buster".into(),
            ..source(&r.candidate.base_commit)
        }];
    })
    .await;
    assert_eq!(other_image.record().reused_from, None);
    assert!(
        runtime.containers()[before..]
            .iter()
            .all(|c| c.spec.image != source_image)
    );
}

/// The phases line `launch.log` ends with (`# launch phases (s): clone 0.08, ...`).
fn phases_of(log: &std::path::Path) -> String {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .rfind(|l| l.starts_with("# launch phases (s): "))
        .unwrap_or_default()
        .to_string()
}

/// [`PYTHON`] depending on `psycopg2`, whose headers come from Debian: its plan installs
/// `libpq-dev` with apt before anything of the checkout is read.
fn python_with_system_packages() -> Vec<(&'static str, &'static str)> {
    let mut files = PYTHON.to_vec();
    files.push(("requirements.txt", "psycopg2==2.8\n"));
    files
}

#[tokio::test]
async fn cold_launches_share_the_system_layer_of_their_packages() {
    let runtime = Arc::new(ScriptedRuntime::new());
    runtime.script(Script::contains("-m pytest").answer(pytest_baseline()));
    let files = python_with_system_packages();
    let first = launch_on(&runtime, &files).await.record().clone();
    assert_eq!(first.status, EnvironmentStatus::Built, "{first:?}");
    let apt = first
        .setup_commands
        .iter()
        .find(|c| c.contains("apt-get install") && c.contains("libpq-dev"))
        .expect("the plan installs libpq-dev")
        .clone();

    // The packages went into a layer of their own, on the base image, in a container that
    // ran only what reads nothing of the checkout; the environment was made from the layer.
    let layers: Vec<String> = runtime
        .image_tags()
        .into_iter()
        .filter(|t| t.starts_with(kiln_launch::LAYER_PREFIX))
        .collect();
    assert_eq!(layers.len(), 1, "{:?}", runtime.image_tags());
    let containers = runtime.containers();
    let [layered, setup, _tests] = containers.as_slice() else {
        panic!("{containers:#?}");
    };
    assert_eq!(layered.spec.image, first.base_image);
    let ran = layered.commands();
    assert!(
        ran.len() == 2 && ran[0].contains("safe.directory") && ran[1] == apt,
        "{ran:?}"
    );
    assert!(layered.file("/testbed/requirements.txt").is_none());
    assert_eq!(
        runtime.image(&layers[0]).map(|i| i.origin),
        Some(ImageOrigin::Committed(layered.id.clone()))
    );
    let layer_labels = runtime.image(&layers[0]).unwrap().labels;
    assert!(
        !layer_labels.contains_key(kiln_core::runtime::LABEL_DATASET),
        "a layer is no dataset's: {layer_labels:?}"
    );
    assert_eq!(setup.spec.image, layers[0]);
    assert!(!setup.commands().contains(&apt.as_str()), "{setup:#?}");

    // A second cold launch with the same packages starts from the same layer and installs
    // nothing with apt; both rows list the step, so their Dockerfiles run it.
    let before = runtime.containers().len();
    let second = launch_on(&runtime, &files).await.record().clone();
    assert_eq!(second.status, EnvironmentStatus::Built, "{second:?}");
    let later = &runtime.containers()[before..];
    assert_eq!(later.len(), 2, "{later:#?}");
    assert_eq!(later[0].spec.image, layers[0]);
    assert_eq!(count_containing(&runtime.commands(), "apt-get install"), 1);
    assert_eq!(second.setup_commands, first.setup_commands);
    assert!(
        second
            .dockerfile
            .as_deref()
            .is_some_and(|d| d.contains("libpq-dev")),
        "{:?}",
        second.dockerfile
    );
}

#[tokio::test]
async fn packages_the_layer_cannot_install_are_installed_by_the_launch_itself() {
    let runtime = Arc::new(ScriptedRuntime::new());
    runtime.script(Script::contains("-m pytest").answer(pytest_baseline()));
    runtime.script(
        Script::contains("apt-get install")
            .nth(1)
            .answer(Answer::exit(100).output("E: Unable to locate package libpq-dev\n")),
    );
    let record = launch_on(&runtime, &python_with_system_packages())
        .await
        .record()
        .clone();
    assert_eq!(record.status, EnvironmentStatus::Built, "{record:?}");
    assert!(
        !runtime
            .image_tags()
            .iter()
            .any(|t| t.starts_with(kiln_launch::LAYER_PREFIX)),
        "{:?}",
        runtime.image_tags()
    );
    let containers = runtime.containers();
    let setup = &containers[1];
    assert_eq!(setup.spec.image, record.base_image);
    assert!(
        setup
            .commands()
            .iter()
            .any(|c| c.contains("apt-get install")),
        "{setup:#?}"
    );
    assert!(
        record
            .setup_commands
            .iter()
            .any(|c| c.contains("apt-get install"))
    );
}

/// What an environment left in the checkout decides, whoever built it: a setup step that writes
/// a `conftest.py` (here the plan's own install, as a hostile `setup.py` would) leaves no
/// environment, and no image.
#[tokio::test]
async fn an_environment_that_adds_test_configuration_is_refused() {
    let runtime = Arc::new(ScriptedRuntime::new());
    runtime.script(
        Script::contains(" -e '.[test]'")
            .answer(Answer::ok().writes("/testbed/tests/conftest.py", "import demo._forcepass\n")),
    );
    runtime.script(Script::contains("-m pytest").answer(pytest_baseline()));
    let launched = launch_on(&runtime, PYTHON).await;
    let record = launched.record();
    assert_eq!(record.status, EnvironmentStatus::Failed);
    assert_eq!(
        record.failure_class,
        Some(FailureClass::EnvironmentEditsTests),
        "{:?}",
        record.log_tail
    );
    let tail = record.log_tail.as_deref().unwrap_or_default();
    assert!(
        tail.contains("added test configuration to the checkout: tests/conftest.py"),
        "{tail}"
    );
    assert!(runtime.image(&launched.image_tag).is_none());
    assert!(
        !runtime.commands().contains(&record.test_command),
        "the tests ran"
    );
}

/// A tracked file the setup changed is the launch's failure, unless the plan declares that its
/// package manager rewrites it (a lockfile); the untracked files it added are listed in the row.
#[tokio::test]
async fn a_changed_tracked_file_fails_the_launch_unless_the_plan_declares_it() {
    let runtime = Arc::new(ScriptedRuntime::new());
    runtime.script(
        Script::contains(" -e '.[test]'").answer(Answer::ok().writes(
            "/testbed/src/demo/__init__.py",
            "def add(a, b):\n    return 3\n",
        )),
    );
    runtime.script(Script::contains("-m pytest").answer(pytest_baseline()));
    let record = launch_on(&runtime, PYTHON).await.record().clone();
    assert_eq!(
        record.failure_class,
        Some(FailureClass::EnvironmentEditsCheckout),
        "{:?}",
        record.log_tail
    );
    assert!(
        record
            .log_tail
            .as_deref()
            .is_some_and(|t| t.contains("changed the tracked file src/demo/__init__.py")),
        "{:?}",
        record.log_tail
    );

    // npm rewrites package-lock.json; what else the install and the build leave is listed.
    let node = [
        NODE[0],
        NODE[1],
        ("package-lock.json", "{\"lockfileVersion\": 3}\n"),
    ];
    let runtime = Arc::new(ScriptedRuntime::new());
    runtime.script(
        Script::contains("npm ").answer(
            Answer::ok()
                .writes(
                    "/testbed/package-lock.json",
                    "{\"lockfileVersion\": 3, \"x\": 1}\n",
                )
                .writes("/testbed/node_modules/a/index.js", "")
                .writes("/testbed/node_modules/a/jest.config.js", "")
                .writes("/testbed/dist/index.js", ""),
        ),
    );
    runtime.script(Script::contains("node --test").answer(node_test_passing()));
    let record = launch_on(&runtime, &node).await.record().clone();
    assert_eq!(
        record.status,
        EnvironmentStatus::Built,
        "{:?}",
        record.log_tail
    );
    assert_eq!(record.environment_files, ["dist/", "node_modules/"]);
}
