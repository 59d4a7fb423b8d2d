//! The launch agent on the scripted runtime with a scripted model: what it may do, what it is
//! refused, how it ends, and what it leaves (the row, its trajectory, the recipe). The model is
//! an in-process `LanguageModel` that answers each request with the next planned tool calls and
//! keeps every request for the assertions.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kiln_core::config::{AgentSettings, LmSettings};
use kiln_core::lm::{ChatAnswer, ChatRequest, LanguageModel, LmError, ToolCall, Usage};
use kiln_launch::{AgentModel, LaunchRequest};
use kiln_schema::{BuiltBy, EnvironmentStatus, FailureClass, TestStatus};
use kiln_testkit::runtime::{Answer, Script, ScriptedRuntime};
use serde_json::{Value, json};

use crate::scripted::{PYTHON, launch_with};

/// A model that answers with planned tool calls, one list per request.
struct PlannedModel {
    plan: Mutex<VecDeque<Vec<(&'static str, Value)>>>,
    requests: Mutex<Vec<ChatRequest>>,
}

impl PlannedModel {
    fn new(turns: Vec<Vec<(&'static str, Value)>>) -> Arc<Self> {
        Arc::new(Self {
            plan: Mutex::new(turns.into()),
            requests: Mutex::new(Vec::new()),
        })
    }

    fn requests(&self) -> Vec<ChatRequest> {
        self.requests.lock().unwrap().clone()
    }

    /// The tool results the agent sent back in request `n` (0-based), as text.
    fn results_seen_by(&self, n: usize) -> String {
        self.requests()[n]
            .messages
            .iter()
            .filter(|m| m.tool_call_id.is_some())
            .map(|m| m.content.clone())
            .collect::<Vec<_>>()
            .join("\n---\n")
    }
}

#[async_trait::async_trait]
impl LanguageModel for PlannedModel {
    fn endpoint(&self) -> String {
        "planned://model".into()
    }

    async fn chat(&self, request: &ChatRequest) -> Result<ChatAnswer, LmError> {
        let n = {
            let mut requests = self.requests.lock().unwrap();
            requests.push(request.clone());
            requests.len()
        };
        let Some(calls) = self.plan.lock().unwrap().pop_front() else {
            return Err(LmError::OverBudget {
                spent: 1.0,
                limit: 1.0,
            });
        };
        let tool_calls = calls
            .into_iter()
            .enumerate()
            .map(|(i, (name, arguments))| ToolCall::new(format!("call_{n}_{i}"), name, &arguments))
            .collect();
        Ok(ChatAnswer {
            id: Some(format!("chatcmpl-{n}")),
            model: Some("planned".into()),
            content: None,
            refusal: None,
            tool_calls,
            finish_reason: Some("tool_calls".into()),
            usage: Some(Usage {
                prompt_tokens: 1_000,
                completion_tokens: 50,
            }),
            structured: false,
            attempts: 1,
            request_body: Value::Null,
            response_body: Value::Null,
            cost_usd: Some(0.001),
            replayed: false,
        })
    }
}

fn agent_settings(max_steps: i64) -> AgentSettings {
    AgentSettings {
        model: "planned".into(),
        max_steps,
        max_tokens: 1_000_000,
        max_cost_usd: 5.0,
        timeout: Duration::from_secs(600),
        command_timeout: Duration::from_secs(60),
        lm: LmSettings {
            base_url: "http://127.0.0.1:9/v1".into(),
            model: "planned".into(),
            api_key_env: String::new(),
            timeout: Duration::from_secs(30),
            retries: 0,
            max_in_flight: 1,
            temperature: 0.0,
            max_tokens: 1024,
            json_schema: false,
            max_cost_usd: None,
            prices: std::collections::BTreeMap::new(),
        },
    }
}

/// The request with the agent on (`model`), recipes in `recipes`, and a test patch that
/// touches the demo's test file.
fn with_agent(
    model: Option<&Arc<PlannedModel>>,
    max_steps: i64,
    recipes: Option<&std::path::Path>,
) -> impl FnOnce(&mut LaunchRequest) {
    let model = model.map(|m| AgentModel(Arc::clone(m) as Arc<dyn LanguageModel>));
    let recipes = recipes.map(std::path::Path::to_path_buf);
    move |request: &mut LaunchRequest| {
        request.settings.agent = Some(agent_settings(max_steps));
        request.lm = model;
        request.recipes = recipes;
        request.candidate.test_patch = "diff --git a/tests/test_demo.py b/tests/test_demo.py\n--- a/tests/test_demo.py\n+++ b/tests/test_demo.py\n@@ -1 +1,2 @@\n from demo import add\n+# new\n".into();
    }
}

/// Every pytest run fails both tests, unless `jq` was installed in the same container.
fn runtime_needing_jq() -> Arc<ScriptedRuntime> {
    let runtime = Arc::new(ScriptedRuntime::new());
    runtime.script(
        Script::contains("-m pytest")
            .after("apt-get install -y jq")
            .answer(crate::scripted::pytest_baseline()),
    );
    runtime.script(
        Script::contains("no-such-package")
            .answer(Answer::exit(100).output("E: Unable to locate package no-such-package\n")),
    );
    runtime.script(Script::contains("-m pytest").answer(Answer::pytest(&[
        ("tests/test_demo.py::test_adds", "FAILED"),
        ("tests/test_demo.py::test_fails", "FAILED"),
    ])));
    runtime
}

fn the_agents_build() -> Vec<Vec<(&'static str, Value)>> {
    vec![
        vec![(
            "run",
            json!({"command": "apt-get install -y no-such-package"}),
        )],
        vec![("run", json!({"command": "apt-get install -y jq"}))],
        vec![(
            "set_env",
            json!({"name": "WEATHER_UNITS", "value": "metric"}),
        )],
        vec![(
            "finish",
            json!({"test_command": "python -m pytest -rA tests", "parser": "pytest", "summary": "needs jq and WEATHER_UNITS"}),
        )],
    ]
}

#[tokio::test]
async fn a_test_phase_repair_that_fails_hands_the_failure_to_the_agent() {
    // The baseline fails on a module nothing installed; the rule that installs it fails too
    // (no such distribution); the agent, given the failure that stands, installs what the
    // tests need.
    let runtime = Arc::new(ScriptedRuntime::new());
    runtime.script(
        Script::contains("-m pytest")
            .after("apt-get install -y jq")
            .answer(crate::scripted::pytest_baseline()),
    );
    runtime.script(
        Script::contains("for `import weatherlib`").answer(
            Answer::exit(1).output("ERROR: No matching distribution found for weatherlib\n"),
        ),
    );
    runtime.script(Script::contains("-m pytest").answer(Answer::exit(2).output(
        "E   ModuleNotFoundError: No module named 'weatherlib'\n1 error during collection\n",
    )));
    let model = PlannedModel::new(vec![
        vec![("run", json!({"command": "apt-get install -y jq"}))],
        vec![(
            "finish",
            json!({"test_command": "python -m pytest -rA tests", "parser": "pytest", "summary": "weatherlib is jq's"}),
        )],
    ]);
    let launched = launch_with(&runtime, PYTHON, with_agent(Some(&model), 10, None)).await;
    let record = launched.record();
    assert_eq!(
        record.status,
        EnvironmentStatus::Built,
        "{:?}",
        record.log_tail
    );
    assert_eq!(record.built_by, Some(BuiltBy::Agent));
    assert!(
        record
            .repairs
            .iter()
            .any(|r| r.starts_with("python-missing-test-module")),
        "{:?}",
        record.repairs
    );
    // The agent was told what stands: the module the tests could not import.
    let first = model.requests()[0]
        .messages
        .iter()
        .map(|m| m.content.clone())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(first.contains("No module named 'weatherlib'"), "{first}");
    // And what the rules tried: the rule, and how its step failed.
    assert!(
        first.contains("python-missing-test-module was tried and did not help")
            && first.contains("No matching distribution found for weatherlib"),
        "{first}"
    );
}

#[tokio::test]
async fn a_repository_no_planner_recognises_is_the_agents_when_there_is_one() {
    // Shell scripts and a test script: no manifest any planner reads.
    const SHELL: &[(&str, &str)] = &[
        ("lib/demo.sh", "add() { echo $(($1 + $2)); }\n"),
        ("tests/test_demo.py", "from demo import add\n"),
        ("run-tests", "#!/bin/sh\n. lib/demo.sh\n"),
    ];
    let shell_suite = || {
        let runtime = Arc::new(ScriptedRuntime::new());
        runtime.script(Script::contains("sh run-tests").answer(
            Answer::exit(1).output("TAP version 13\nok 1 - adds\nnot ok 2 - fails\n1..2\n"),
        ));
        runtime
    };
    // Without the agent: no plan, no container.
    let runtime = shell_suite();
    let launched = launch_with(&runtime, SHELL, with_agent(None, 5, None)).await;
    let record = launched.record();
    assert_eq!(record.failure_class, Some(FailureClass::UnsupportedProject));
    assert!(runtime.containers().is_empty());

    // With it: the bare plan's container, its failing test command, then the agent's.
    let runtime = shell_suite();
    let model = PlannedModel::new(vec![vec![(
        "finish",
        json!({"test_command": "sh run-tests", "parser": "tap", "summary": "a shell suite"}),
    )]]);
    let launched = launch_with(&runtime, SHELL, with_agent(Some(&model), 5, None)).await;
    let record = launched.record();
    assert_eq!(
        record.status,
        EnvironmentStatus::Built,
        "{:?} {}",
        record.log_tail,
        model.results_seen_by(1)
    );
    assert_eq!(record.plan, "bare");
    assert_eq!(record.built_by, Some(BuiltBy::Agent));
    assert_eq!(record.test_command, "sh run-tests");
    assert_eq!(
        record
            .baseline
            .values()
            .filter(|s| **s == TestStatus::Pass)
            .count(),
        1,
        "{:?}",
        record.baseline
    );
    let first = model.requests()[0]
        .messages
        .iter()
        .map(|m| m.content.clone())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        first.contains("no build plan matched the repository"),
        "{first}"
    );
}

#[tokio::test]
async fn the_agent_builds_where_the_rules_stop_rolls_back_a_failed_command_and_leaves_a_recipe() {
    let recipes = tempfile::tempdir().unwrap();
    let runtime = runtime_needing_jq();
    let model = PlannedModel::new(the_agents_build());
    let launched = launch_with(
        &runtime,
        PYTHON,
        with_agent(Some(&model), 10, Some(recipes.path())),
    )
    .await;
    let record = launched.record();
    assert_eq!(
        record.status,
        EnvironmentStatus::Built,
        "{:?}",
        record.log_tail
    );
    assert_eq!(record.built_by, Some(BuiltBy::Agent));
    assert_eq!(record.agent_steps, 4);
    assert_eq!(record.agent_tokens, 4 * 1_050);
    assert!((record.agent_cost_usd - 0.004).abs() < 1e-9);
    assert_eq!(record.test_command, "python -m pytest -rA tests");
    assert_eq!(
        record.environment.get("WEATHER_UNITS").map(String::as_str),
        Some("metric")
    );
    assert!(
        record
            .setup_commands
            .iter()
            .any(|c| c == "apt-get install -y jq")
    );
    assert!(
        !record
            .setup_commands
            .iter()
            .any(|c| c.contains("no-such-package")),
        "a rolled-back command is no setup step: {:?}",
        record.setup_commands
    );
    assert_eq!(
        record.baseline.get("tests/test_demo.py::test_adds"),
        Some(&TestStatus::Pass)
    );
    let dockerfile = record.dockerfile.as_deref().unwrap_or_default();
    assert!(
        dockerfile.contains("ENV WEATHER_UNITS=\"metric\""),
        "{dockerfile}"
    );
    assert!(
        dockerfile.contains("RUN apt-get install -y jq"),
        "{dockerfile}"
    );

    // The failed install was rolled back: the next command ran in a container started from
    // the snapshot; the finish's tests ran in a container of their own from the committed
    // image (the last one, after the rules' baseline), without network, with the variable set.
    let snapshot = format!("{}.agent-snapshot", launched.image_tag);
    let containers = runtime.containers();
    let rolled_back = containers
        .iter()
        .find(|c| c.spec.image == snapshot)
        .expect("a container from the snapshot");
    let commands = rolled_back.commands();
    assert!(commands.contains(&"apt-get install -y jq"), "{commands:?}");
    let tests = containers
        .iter()
        .rfind(|c| Some(c.spec.image.as_str()) == record.image_digest.as_deref())
        .expect("a container from the committed image");
    assert_eq!(tests.spec.network, kiln_core::NetworkMode::None);
    let test_run = tests
        .execs
        .iter()
        .find(|e| e.script.contains("python -m pytest"))
        .expect("the agent's test run");
    assert_eq!(test_run.env_var("WEATHER_UNITS"), Some("metric"));
    assert!(
        runtime.image(&snapshot).is_none(),
        "the snapshot image is removed"
    );
    assert!(runtime.image(&launched.image_tag).is_some());

    // The model saw the rules' failure, then the rollback; every turn carried a replay key.
    let requests = model.requests();
    assert_eq!(requests.len(), 4);
    assert!(
        requests[0].messages[1].content.contains("tests-failing"),
        "{}",
        requests[0].messages[1].content
    );
    assert!(model.results_seen_by(1).contains("rolled back"));
    assert!(
        requests
            .iter()
            .all(|r| r.replay_key.is_some() && r.tools.len() == 7)
    );

    // The trajectory has a line per turn and one with the totals, snapshot seconds included.
    let trajectory = std::fs::read_to_string(launched.log_dir.join("agent.jsonl")).unwrap();
    let lines: Vec<Value> = trajectory
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 5, "{trajectory}");
    assert_eq!(lines[4]["end"], "built");
    assert_eq!(lines[4]["rollbacks"].as_array().map(Vec::len), Some(1));
    assert!(
        lines[0]["actions"][0]["snapshot_seconds"].is_number(),
        "{}",
        lines[0]
    );

    // The recipe holds what stayed, kept apart until the instance validates (the validate
    // stage promotes it); the next instance of the repository then builds from it without a
    // single request.
    assert_eq!(
        kiln_launch::recipe::read(recipes.path(), "scripted/demo").unwrap(),
        None,
        "a recipe is the repository's only once its instance validated"
    );
    kiln_launch::recipe::promote(recipes.path(), "scripted__demo-1")
        .unwrap()
        .expect("a recipe waiting for validation");
    let stored = kiln_launch::recipe::read(recipes.path(), "scripted/demo")
        .unwrap()
        .expect("a recipe file");
    let recipe = &stored.recipes[0];
    assert_eq!(recipe.steps, ["apt-get install -y jq"]);
    assert_eq!(recipe.test_command, "python -m pytest -rA tests");
    assert_eq!(recipe.learned_from, "scripted__demo-1");

    let runtime = runtime_needing_jq();
    let silent = PlannedModel::new(Vec::new());
    let again = launch_with(
        &runtime,
        PYTHON,
        with_agent(Some(&silent), 10, Some(recipes.path())),
    )
    .await;
    let record = again.record();
    assert_eq!(
        record.status,
        EnvironmentStatus::Built,
        "{:?}",
        record.log_tail
    );
    assert_eq!(record.built_by, Some(BuiltBy::Recipe));
    assert_eq!(record.agent_steps, 0);
    assert_eq!(silent.requests().len(), 0, "a recipe build asks nothing");
    assert_eq!(recipe.depends_on_files, ["pyproject.toml"]);

    // A commit whose manifest changed (a new test requirement) is not what the recipe relied
    // on: it is not replayed, and the agent is asked.
    let moved: Vec<(&str, &str)> = PYTHON
        .iter()
        .map(|(path, text)| match *path {
            "pyproject.toml" => (*path, "[build-system]\nrequires = [\"setuptools>=61\"]\nbuild-backend = \"setuptools.build_meta\"\n\n[project]\nname = \"demo\"\nversion = \"0.1.0\"\nrequires-python = \">=3.8\"\n\n[project.optional-dependencies]\ntest = [\"pytest\", \"pytest-timeout\"]\n"),
            _ => (*path, *text),
        })
        .collect();
    let runtime = runtime_needing_jq();
    let asked = PlannedModel::new(the_agents_build());
    let moved_on = launch_with(
        &runtime,
        &moved,
        with_agent(Some(&asked), 10, Some(recipes.path())),
    )
    .await;
    let record = moved_on.record();
    assert_eq!(
        record.built_by,
        Some(BuiltBy::Agent),
        "{:?}",
        record.log_tail
    );
    assert!(!asked.requests().is_empty());
}

#[tokio::test]
async fn edits_of_test_files_masked_test_commands_and_collect_only_are_refused_until_the_budget_ends()
 {
    let runtime = runtime_needing_jq();
    let model = PlannedModel::new(vec![
        vec![("run", json!({"command": "rm -f tests/test_demo.py"}))],
        vec![(
            "write_file",
            json!({"path": "tests/test_demo.py", "content": "def test_ok():\n    pass\n"}),
        )],
        vec![(
            "finish",
            json!({"test_command": "python -m pytest -rA tests || true", "parser": "pytest"}),
        )],
        vec![(
            "finish",
            json!({"test_command": "python -m pytest --collect-only tests", "parser": "pytest"}),
        )],
        vec![(
            "write_file",
            json!({"path": "conftest.py", "content": "collect_ignore = [\"tests\"]\n"}),
        )],
    ]);
    let launched = launch_with(&runtime, PYTHON, with_agent(Some(&model), 5, None)).await;
    let record = launched.record();
    assert_eq!(record.status, EnvironmentStatus::Failed);
    assert_eq!(record.failure_class, Some(FailureClass::AgentBudget));
    assert!(
        record
            .log_tail
            .as_deref()
            .unwrap_or_default()
            .contains("agent_max_steps"),
        "{:?}",
        record.log_tail
    );
    assert_eq!(record.agent_steps, 5);
    // The row names the rules' test command, not a refused one.
    assert!(
        !record.test_command.contains("|| true"),
        "{}",
        record.test_command
    );
    assert_eq!(model.requests().len(), 5);
    let seen = model.results_seen_by(4);
    assert_eq!(seen.matches("refused").count(), 4, "{seen}");
    assert!(
        seen.contains("a file the instance's test patch touches"),
        "{seen}"
    );
    assert!(seen.contains("`|| true`"), "{seen}");
    assert!(seen.contains("--collect-only"), "{seen}");
    // Nothing refused reached the container.
    for command in runtime.commands() {
        assert!(!command.contains("rm -f tests/test_demo.py"), "{command}");
        assert!(!command.contains("|| true"), "{command}");
        assert!(!command.contains("--collect-only"), "{command}");
    }
    for container in runtime.containers() {
        assert!(container.file("/testbed/conftest.py").is_none());
    }
}

#[tokio::test]
async fn an_agent_that_gives_up_leaves_the_rules_failure_with_its_reason() {
    let runtime = runtime_needing_jq();
    let model = PlannedModel::new(vec![vec![(
        "give_up",
        json!({"reason": "the tests need a service this container cannot run"}),
    )]]);
    let launched = launch_with(&runtime, PYTHON, with_agent(Some(&model), 5, None)).await;
    let record = launched.record();
    assert_eq!(record.failure_class, Some(FailureClass::TestsFailing));
    assert_eq!(record.agent_steps, 1);
    let tail = record.log_tail.as_deref().unwrap_or_default();
    assert!(
        tail.contains("the launch agent gave up: the tests need a service"),
        "{tail}"
    );
}

#[tokio::test]
async fn the_runs_lm_budget_ends_the_agent_with_a_row_not_an_error() {
    let runtime = runtime_needing_jq();
    // No planned answer: the model answers the first request as an over-budget asker does.
    let model = PlannedModel::new(Vec::new());
    let launched = launch_with(&runtime, PYTHON, with_agent(Some(&model), 5, None)).await;
    let record = launched.record();
    assert_eq!(record.failure_class, Some(FailureClass::AgentBudget));
    assert!(
        record
            .log_tail
            .as_deref()
            .unwrap_or_default()
            .contains("the run's LM budget"),
        "{:?}",
        record.log_tail
    );
}

/// A test runner no library parser reads: `check <name>: ok|FAIL` lines.
fn runtime_with_a_custom_runner(script_output: &str) -> Arc<ScriptedRuntime> {
    let runtime = Arc::new(ScriptedRuntime::new());
    runtime.script(
        Script::contains(kiln_core::parser_script::command())
            .answer(Answer::ok().output(script_output)),
    );
    runtime.script(
        Script::contains("./run-checks").answer(
            Answer::exit(1).output("check adds: ok\ncheck fails: FAIL\n2 checks, 1 failed\n"),
        ),
    );
    runtime.script(Script::contains("-m pytest").answer(Answer::exit(4).output("no tests here\n")));
    runtime
}

const PARSER: &str =
    "sed -n 's/^check \\(.*\\): ok$/[PASSED] \\1/p; s/^check \\(.*\\): FAIL$/[FAILED] \\1/p'";

fn finish_with_script() -> Vec<Vec<(&'static str, Value)>> {
    vec![vec![(
        "finish",
        json!({"test_command": "./run-checks", "parser": "script", "parser_script": PARSER}),
    )]]
}

#[tokio::test]
async fn a_parser_script_is_accepted_when_it_agrees_with_the_exit_code() {
    let runtime =
        runtime_with_a_custom_runner("[PASSED] adds\n[FAILED] fails\n[TOTALS] passed=1 failed=1\n");
    let model = PlannedModel::new(finish_with_script());
    let launched = launch_with(&runtime, PYTHON, with_agent(Some(&model), 3, None)).await;
    let record = launched.record();
    assert_eq!(
        record.status,
        EnvironmentStatus::Built,
        "{:?}",
        record.log_tail
    );
    assert_eq!(record.parser, "status-lines");
    assert_eq!(record.parser_script.as_deref(), Some(PARSER));
    assert_eq!(record.baseline.get("adds"), Some(&TestStatus::Pass));
    assert_eq!(record.baseline.get("fails"), Some(&TestStatus::Fail));
    // The script read the output in a container of its own, from the environment image (by
    // the id its commit gave), without network.
    let reader = runtime
        .containers()
        .into_iter()
        .find(|c| c.commands() == [kiln_core::parser_script::command()])
        .expect("the parser's container");
    assert_eq!(
        Some(reader.spec.image.as_str()),
        record.image_digest.as_deref()
    );
    assert_eq!(reader.spec.network, kiln_core::NetworkMode::None);
    let output = reader.file(kiln_core::parser_script::OUTPUT_PATH).unwrap();
    assert!(String::from_utf8_lossy(&output).contains("check fails: FAIL"));
}

#[tokio::test]
async fn a_parser_script_that_contradicts_the_exit_code_is_refused() {
    // Both checks read as passed while the runner exited 1.
    let runtime = runtime_with_a_custom_runner("[PASSED] adds\n[PASSED] fails\n");
    let model = PlannedModel::new(finish_with_script());
    let launched = launch_with(&runtime, PYTHON, with_agent(Some(&model), 3, None)).await;
    let record = launched.record();
    assert_eq!(record.status, EnvironmentStatus::Failed);
    assert_eq!(record.parser_script, None);
    // The agent was told why and asked again (its plan had ended: the run's budget).
    assert_eq!(model.requests().len(), 2);
    let seen = model.results_seen_by(1);
    assert!(
        seen.contains("exited 1 but the parser script reads no failing test"),
        "{seen}"
    );
    assert!(
        runtime.image(&launched.image_tag).is_none(),
        "no environment image is left"
    );
}

/// A hook that turns every failed report into a pass, written as a `conftest.py`: no word of
/// the write switches a test off, and it is refused all the same, for what it adds.
const FORCEPASS: &str = "import pytest\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n    outcome = yield\n    outcome.get_result().outcome = \"passed\"\n";

#[tokio::test]
async fn what_the_agent_does_is_judged_by_its_effect_whatever_its_words() {
    let runtime = runtime_needing_jq();
    // The command's words write nothing the guard reads; its effect rewrites the test file.
    let rewrite = "python3 -c \"import pathlib; pathlib.Path('tests/test_demo.py').write_text('def test_ok(): pass')\"";
    runtime.script(
        Script::contains("pathlib.Path('tests/test_demo.py')")
            .answer(Answer::ok().writes("/testbed/tests/test_demo.py", "def test_ok(): pass")),
    );
    runtime.script(
        Script::contains("pip install ./forcepass").answer(Answer::ok().writes(
            "/opt/kiln/venv/lib/python3.11/site-packages/forcepass.pth",
            "import forcepass\n",
        )),
    );
    let model = PlannedModel::new(vec![
        vec![(
            "write_file",
            json!({"path": "conftest.py", "content": FORCEPASS}),
        )],
        vec![("run", json!({"command": rewrite}))],
        vec![("run", json!({"command": "pip install ./forcepass"}))],
        vec![(
            "set_env",
            json!({"name": "PYTEST_ADDOPTS", "value": "-p forcepass"}),
        )],
        vec![(
            "finish",
            json!({"test_command": "python -m pytest -rA tests; echo done", "parser": "pytest"}),
        )],
    ]);
    let launched = launch_with(&runtime, PYTHON, with_agent(Some(&model), 6, None)).await;
    let record = launched.record();
    assert_eq!(record.status, EnvironmentStatus::Failed);
    assert_eq!(record.failure_class, Some(FailureClass::AgentBudget));
    let seen = model.results_seen_by(5);
    assert!(
        seen.contains("added test configuration to the checkout: conftest.py"),
        "{seen}"
    );
    assert!(
        seen.contains("changed tests/test_demo.py, a file the instance's test patch touches"),
        "{seen}"
    );
    assert!(
        seen.contains("forcepass.pth runs code at every Python start"),
        "{seen}"
    );
    assert!(
        seen.contains("`PYTEST_ADDOPTS` configures the test runner"),
        "{seen}"
    );
    assert!(
        seen.contains("`echo done`'s, not the test runner's"),
        "{seen}"
    );
    assert_eq!(seen.matches("refused").count(), 5, "{seen}");
    // Each refused change was rolled back: the container the agent works in holds none of it,
    // and the row keeps none of it.
    let last = runtime
        .containers()
        .into_iter()
        .rfind(|c| !c.commands().is_empty())
        .unwrap();
    assert!(last.file("/testbed/conftest.py").is_none());
    assert_eq!(
        last.file("/testbed/tests/test_demo.py").as_deref(),
        Some(PYTHON[2].1.as_bytes())
    );
    assert!(!record.environment.contains_key("PYTEST_ADDOPTS"));
    assert!(
        !record
            .setup_commands
            .iter()
            .any(|c| c.contains("forcepass"))
    );
}

#[tokio::test]
async fn a_parser_script_that_passes_what_the_runner_failed_is_refused() {
    // The runner exits 0 (its status forged) and prints pytest's report of a failure; the
    // script reads every test as passed.
    let runtime = Arc::new(ScriptedRuntime::new());
    runtime.script(
        Script::contains(kiln_core::parser_script::command()).answer(Answer::ok().output(
            "[PASSED] tests/test_demo.py::test_adds\n[PASSED] tests/test_demo.py::test_fails\n",
        )),
    );
    runtime.script(
        Script::contains("./run-tests").answer(
            Answer::pytest(&[
                ("tests/test_demo.py::test_adds", "PASSED"),
                ("tests/test_demo.py::test_fails", "FAILED"),
            ])
            .with_exit_code(0),
        ),
    );
    runtime.script(Script::contains("-m pytest").answer(Answer::exit(4).output("no tests here\n")));
    let model = PlannedModel::new(vec![vec![(
        "finish",
        json!({"test_command": "./run-tests", "parser": "script", "parser_script": "sed -n p"}),
    )]]);
    let launched = launch_with(&runtime, PYTHON, with_agent(Some(&model), 3, None)).await;
    let record = launched.record();
    assert_eq!(record.status, EnvironmentStatus::Failed);
    let seen = model.results_seen_by(1);
    assert!(
        seen.contains("reads `tests/test_demo.py::test_fails` as passed; kiln's `pytest` parser"),
        "{seen}"
    );
}

#[tokio::test]
async fn a_recipe_that_forges_is_refused_at_its_step_naming_the_file() {
    let recipes = tempfile::tempdir().unwrap();
    let forging = kiln_launch::recipe::Recipe {
        plan: "python-pyproject".into(),
        learned_from: "scripted__demo-0".into(),
        created_at: "2026-12-01T00:00:00Z".into(),
        model: "edited by hand".into(),
        environment: std::collections::BTreeMap::new(),
        steps: vec![
            "apt-get install -y jq".into(),
            format!("cat > /testbed/conftest.py <<'EOF'\n{FORCEPASS}EOF"),
        ],
        test_command: "python -m pytest -rA tests".into(),
        rebuild_commands: Vec::new(),
        parser: "pytest".into(),
        parser_script: None,
        // Written by hand, with no key: it serves any commit of its plan.
        depends_on: String::new(),
        depends_on_files: Vec::new(),
    };
    let plan = {
        // The plan the rules choose for the demo, as the row names it.
        let runtime = runtime_needing_jq();
        let launched = launch_with(&runtime, PYTHON, with_agent(None, 1, None)).await;
        launched.record().plan.clone()
    };
    kiln_launch::recipe::store(
        recipes.path(),
        "scripted/demo",
        kiln_launch::recipe::Recipe { plan, ..forging },
    )
    .unwrap();
    let runtime = runtime_needing_jq();
    runtime.script(
        Script::contains("cat > /testbed/conftest.py")
            .answer(Answer::ok().writes("/testbed/conftest.py", FORCEPASS)),
    );
    let model = PlannedModel::new(Vec::new());
    let launched = launch_with(
        &runtime,
        PYTHON,
        with_agent(Some(&model), 3, Some(recipes.path())),
    )
    .await;
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
        tail.contains("refused at this step") && tail.contains("conftest.py"),
        "{tail}"
    );
    assert!(
        record
            .failure_command
            .as_deref()
            .is_some_and(|c| c.starts_with("cat > /testbed/conftest.py")),
        "{:?}",
        record.failure_command
    );
    assert_eq!(
        model.requests().len(),
        0,
        "the agent is not asked to build on it"
    );
    assert!(runtime.image(&launched.image_tag).is_none());
}
