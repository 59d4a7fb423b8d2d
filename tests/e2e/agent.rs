//! The launch agent through the binary, on the real engine, driven by the fake LM endpoint
//! speaking tool calls: the fixture the rules cannot build (it needs `libxml2-utils` and
//! `WEATHER_UNITS`, named by none of its files) is built by the agent, one deliberately bad
//! command rolled back on the way, and validates with its exact FAIL_TO_PASS; only then is its
//! recipe kept. A re-run of the launch replays the stored answers without a request, and a new
//! run with a second instance of the repository builds both from the recipe without one.

use std::path::{Path, PathBuf};

use kiln_schema::{BuiltBy, EnvironmentRecord, ValidationRecord, ValidationStatus};
use kiln_testkit::fake_lm::{ChatCall, FakeLm, FakeLmOptions, LmReply};
use serde_json::{Value, json};

use crate::{ca_bundle, kiln, run, tempdir, text};

const FIRST: &str = "kiln-demo__weather-6";
const SECOND: &str = "kiln-demo__weather-7";

/// The agent's plan, by the number of turns already taken: a package name that does not exist
/// (rolled back), the package that holds xmllint, the variable, then `finish` with the rules'
/// own test command, read from the hand-over.
pub(crate) fn agent_turn(call: &ChatCall) -> LmReply {
    // Only the weather fixture needs the agent; any other repository it is handed is given up.
    if !call
        .messages
        .iter()
        .any(|(_, text)| text.contains("kiln-demo/weather"))
    {
        return LmReply::call(
            "give_up",
            json!({"reason": "a dependency of the project does not exist"}),
        );
    }
    let taken = call
        .messages
        .iter()
        .filter(|(role, _)| role == "assistant")
        .count();
    match taken {
        0 => LmReply::call("run", json!({"command": "apt-get install -y xmllint"})),
        1 => LmReply::call(
            "run",
            json!({"command": "apt-get update -qq && apt-get install -y -qq --no-install-recommends libxml2-utils"}),
        ),
        2 => LmReply::call(
            "set_env",
            json!({"name": "WEATHER_UNITS", "value": "metric"}),
        ),
        _ => {
            let handover = call
                .messages
                .iter()
                .find(|(role, _)| role == "user")
                .map(|(_, text)| text.as_str())
                .unwrap_or_default();
            let test_command = handover
                .split("The rules' test command: `")
                .nth(1)
                .and_then(|rest| rest.split("` (parser").next())
                .unwrap_or("python -m pytest -rA");
            LmReply::call(
                "finish",
                json!({"test_command": test_command, "parser": "pytest", "summary": "xmllint from libxml2-utils; WEATHER_UNITS=metric"}),
            )
        }
    }
}

/// The two weather tasks: the fixture's, and one at its base commit's parent with the same
/// patches (the code and tests they touch are the same there). The task file holds the first
/// alone; the second is returned, for a later run.
fn write_tasks(dir: &Path) -> Value {
    kiln_testkit::write_demo_with_agent(dir).unwrap();
    let tasks = std::fs::read_to_string(dir.join("tasks.jsonl")).unwrap();
    let first: Value = tasks
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|t| t["instance_id"] == FIRST)
        .expect("the weather task");
    let repo = dir.join("repos/kiln-demo/weather");
    let base = first["base_commit"].as_str().unwrap_or_default();
    let parent = run(std::process::Command::new("git")
        .args(["rev-parse", &format!("{base}^")])
        .current_dir(&repo));
    let mut second = first.clone();
    second["instance_id"] = json!(SECOND);
    second["base_commit"] = json!(String::from_utf8_lossy(&parent.stdout).trim());
    std::fs::write(dir.join("tasks.jsonl"), format!("{first}\n")).unwrap();
    second
}

fn config(dir: &Path, url: &str) -> PathBuf {
    let text = kiln_demo::config_text("agent", ca_bundle().as_deref(), 1, false)
        .replacen(
            "[sources.",
            &format!(
                "[lm]\nbase_url = \"{url}\"\nmodel = \"fake-judge-1\"\nprices.\"fake-judge-1\" = {{ prompt = 0.15, completion = 0.6 }}\n\n[sources."
            ),
            1,
        )
        .replacen(
            "[stages.launch]\nkind = \"launch\"\n",
            // One at a time, in creation order (no reuse, whose order is by base commit).
            "[stages.launch]\nkind = \"launch\"\nconcurrency = 1\nagent = true\nrecipes = true\nreuse = false\n",
            1,
        );
    let path = dir.join("pipeline.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn stats(stage_dir: &Path) -> Value {
    let text = std::fs::read_to_string(stage_dir.join("manifest.json")).unwrap_or_default();
    serde_json::from_str::<Value>(&text).unwrap_or_default()["stats"].clone()
}

fn environment<'a>(rows: &'a [EnvironmentRecord], id: &str) -> &'a EnvironmentRecord {
    rows.iter()
        .find(|e| e.instance_id.as_str() == id)
        .unwrap_or_else(|| panic!("no row of {id}"))
}

/// Every validation row of the run validated, with the fixture's FAIL_TO_PASS.
fn assert_validated(run_dir: &Path, count: usize) {
    let validations: Vec<ValidationRecord> =
        kiln_store::read_rows(&run_dir.join("validate")).unwrap();
    assert_eq!(validations.len(), count);
    for validation in &validations {
        assert_eq!(
            validation.status,
            ValidationStatus::Validated,
            "{validation:#?}"
        );
        assert_eq!(
            validation.FAIL_TO_PASS,
            ["tests/test_forecast.py::test_warmest"]
        );
        assert_eq!(validation.agreement, Some(kiln_schema::Relation::Exact));
    }
}

fn run_dir_of(output: &std::process::Output) -> PathBuf {
    assert!(output.status.success(), "{}", text(output));
    let report: Value =
        serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{e}\n{}", text(output)));
    PathBuf::from(report["run_dir"].as_str().unwrap_or_default())
}

#[test]
fn the_agent_builds_what_the_rules_cannot_and_its_recipe_and_replay_cost_no_request() {
    let tmp = tempdir();
    let dir = tmp.path().join("agent");
    let second_task = write_tasks(&dir);
    let fake = FakeLm::start(FakeLmOptions::default(), agent_turn).unwrap();
    let config = config(&dir, &fake.url());

    let run_dir = run_dir_of(&run(kiln()
        .args(["--json", "run", "--config"])
        .arg(&config)));
    let environments: Vec<EnvironmentRecord> =
        kiln_store::read_rows(&run_dir.join("launch")).unwrap();
    let first = environment(&environments, FIRST);
    assert_eq!(first.built_by, Some(BuiltBy::Agent), "{first:#?}");
    assert_eq!(first.agent_steps, 4);
    assert!(
        first.agent_tokens > 0 && first.agent_cost_usd > 0.0,
        "{first:#?}"
    );
    assert_eq!(
        first.environment.get("WEATHER_UNITS").map(String::as_str),
        Some("metric")
    );
    assert!(
        !first
            .setup_commands
            .iter()
            .any(|c| c.contains("install -y xmllint")),
        "the rolled-back command is no setup step: {:?}",
        first.setup_commands
    );
    assert_eq!(fake.chat_requests().len(), 4, "four turns");
    assert_validated(&run_dir, 1);

    // The trajectory: four turns, one rollback, and what the snapshots cost here.
    let trajectory =
        std::fs::read_to_string(run_dir.join(&first.log_dir).join("agent.jsonl")).unwrap();
    let end: Value = trajectory
        .lines()
        .last()
        .map(|l| serde_json::from_str(l).unwrap())
        .unwrap_or_default();
    assert_eq!(end["end"], "built", "{trajectory}");
    assert_eq!(
        end["rollbacks"].as_array().map(Vec::len),
        Some(1),
        "{trajectory}"
    );
    eprintln!(
        "agent on {FIRST}: {} turns, {} tokens, {:.1}s; snapshots (s) {}, rollbacks (s) {}",
        end["turns"],
        end["tokens"],
        end["seconds"].as_f64().unwrap_or(0.0),
        end["snapshots"],
        end["rollbacks"]
    );
    // The instance validated, so its recipe is kept.
    let recipe = dir.join("datasets/agent/recipes/kiln-demo__weather.json");
    let recipe_text = std::fs::read_to_string(&recipe).unwrap();
    assert!(recipe_text.contains("libxml2-utils"), "{recipe_text}");
    let listed = run(kiln().args(["recipes", "--config"]).arg(&config));
    assert!(listed.status.success(), "{}", text(&listed));
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.contains("kiln-demo/weather") && listed.contains(FIRST),
        "{listed}"
    );

    // A re-run without recipes starts the launch over; the agent's answers are replayed.
    let with_recipes = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        with_recipes.replace("recipes = true", "recipes = false"),
    )
    .unwrap();
    let output = run(kiln()
        .args(["stage", "launch", "--only", FIRST, "--config"])
        .arg(&config));
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(fake.chat_requests().len(), 4, "the re-run asked nothing");
    let replayed = stats(&run_dir.join("launch"));
    assert_eq!(replayed["lm.replayed"], 4.0, "{replayed}");
    assert_eq!(replayed["lm.requests"], 0.0, "{replayed}");
    let environments: Vec<EnvironmentRecord> =
        kiln_store::read_rows(&run_dir.join("launch")).unwrap();
    let again = environment(&environments, FIRST);
    assert_eq!(again.built_by, Some(BuiltBy::Agent), "{again:#?}");

    // A new run with a second instance of the repository: both build from the recipe, and
    // nothing is asked.
    std::fs::write(&config, with_recipes).unwrap();
    let tasks = dir.join("tasks.jsonl");
    let first_task = std::fs::read_to_string(&tasks).unwrap();
    std::fs::write(&tasks, format!("{first_task}{second_task}\n")).unwrap();
    let run_dir = run_dir_of(&run(kiln()
        .args(["--json", "run", "--new", "--config"])
        .arg(&config)));
    let environments: Vec<EnvironmentRecord> =
        kiln_store::read_rows(&run_dir.join("launch")).unwrap();
    for id in [FIRST, SECOND] {
        let row = environment(&environments, id);
        assert_eq!(row.built_by, Some(BuiltBy::Recipe), "{row:#?}");
        assert_eq!(row.agent_steps, 0);
    }
    assert_eq!(
        fake.chat_requests().len(),
        4,
        "the recipe's instances asked nothing"
    );
    assert_validated(&run_dir, 2);
}
