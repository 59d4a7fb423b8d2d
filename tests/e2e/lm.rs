//! The LM layer through the binary, against the fake endpoint on loopback: replay, `--force`,
//! tokens and cost in rows, `kiln status` and the summary, the budget, and a key that never
//! shows up anywhere.

use std::path::{Path, PathBuf};

use kiln_schema::{PlatformLabel, Verdict};
use kiln_testkit::fake_lm::{FakeLm, FakeLmOptions, LmReply};
use serde_json::json;

use crate::{kiln, run, tempdir, text};

const KEY: &str = "sk-kiln-e2e-secret-5f0c7d1e9a";
const KEY_VAR: &str = "KILN_E2E_LM_KEY";

/// The fake: `ok` for every task but badgold, whose answer is prose (unusable, with usage).
fn fake() -> FakeLm {
    let options = FakeLmOptions {
        api_key: Some(KEY.into()),
        ..FakeLmOptions::default()
    };
    FakeLm::start(options, |call| {
        // The launch agent's requests offer tools; it gets the plan that builds the weather
        // fixture.
        if !call.tools.is_empty() {
            return crate::agent::agent_turn(call);
        }
        if call.user_text().contains("kiln-demo/badgold") {
            LmReply::ContentWithUsage {
                content: "This looks like a reasonable task to me.".into(),
                prompt_tokens: 900,
                completion_tokens: 11,
            }
        } else {
            LmReply::json(&json!({"label": "ok", "reason": "The issue states the wrong and the expected result.", "flags": []}))
        }
    })
    .unwrap()
}

/// Demo fixtures with a config of ingest, an LM filter and an LM split only (no engine needed).
fn prepare(dir: &Path, url: &str, budget: Option<f64>) -> PathBuf {
    kiln_testkit::write_demo(dir).unwrap();
    let budget = budget.map_or(String::new(), |b| format!("max_cost_usd = {b}\n"));
    let config = dir.join("pipeline.toml");
    std::fs::write(
        &config,
        format!(
            r#"[dataset]
name = "lm"

[lm]
base_url = "{url}"
model = "fake-judge-1"
api_key_env = "{KEY_VAR}"
retries = 1
{budget}prices."fake-judge-1" = {{ prompt = 2.5, completion = 10.0 }}

[sources.tasks]
kind = "ingest"
path = "tasks.jsonl"

[stages.filter]
kind = "filter"
inputs = ["tasks"]
judge = "lm"
min_problem_chars = 20

[stages.split]
kind = "split"
inputs = ["tasks", "filter"]
judge = "lm"
"#
        ),
    )
    .unwrap();
    config
}

fn only_run(dir: &Path) -> PathBuf {
    let runs = dir.join("datasets/lm/runs");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&runs)
        .map(|d| d.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    assert_eq!(found.len(), 1, "{found:?}");
    found.remove(0)
}

fn stats(stage_dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(stage_dir.join("manifest.json")).unwrap_or_default();
    serde_json::from_str::<serde_json::Value>(&text).unwrap_or_default()["stats"].clone()
}

/// Every file under `dir`, read as bytes (lossy text), with its path.
fn all_files(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(all_files(&path));
        } else {
            let bytes = std::fs::read(&path).unwrap_or_default();
            out.push((path, String::from_utf8_lossy(&bytes).into_owned()));
        }
    }
    out
}

#[test]
fn the_lm_filter_replays_its_answers_and_force_asks_again() {
    let tmp = tempdir();
    let dir = tmp.path().join("fixtures");
    let fake = fake();
    let config = prepare(&dir, &fake.url(), None);
    let mut outputs = Vec::new();
    let mut kiln_with_key = |args: &[&str]| {
        let output = run(kiln()
            .env(KEY_VAR, KEY)
            .args(args)
            .arg("--config")
            .arg(&config));
        assert!(output.status.success(), "{args:?}: {}", text(&output));
        outputs.push(text(&output));
        String::from_utf8_lossy(&output.stdout).into_owned()
    };

    let summary = kiln_with_key(&["run"]);
    assert_eq!(fake.chat_requests().len(), 4, "one answer per candidate");
    let run_dir = only_run(&dir);
    let verdicts: Vec<Verdict> = kiln_store::read_rows(&run_dir.join("filter")).unwrap();
    assert_eq!(verdicts.len(), 4);
    for verdict in &verdicts {
        assert!(verdict.prompt_tokens.is_some_and(|t| t > 0), "{verdict:?}");
        assert!(verdict.cost_usd.is_some_and(|c| c > 0.0), "{verdict:?}");
        assert_eq!(verdict.answer_keys.len(), 1);
        if verdict.instance_id == "kiln-demo__badgold-4" {
            // Unusable, but its tokens are counted.
            assert_eq!(verdict.judge, "heuristic");
            assert_eq!(
                (verdict.prompt_tokens, verdict.completion_tokens),
                (Some(900), Some(11))
            );
            assert!(
                verdict
                    .fallback
                    .as_deref()
                    .is_some_and(|f| f.contains("holds no JSON object")),
                "{verdict:?}"
            );
        } else {
            assert_eq!(verdict.judge, "fake-judge-1", "{verdict:?}");
            assert_eq!(verdict.fallback, None);
        }
    }
    let labels: Vec<PlatformLabel> = kiln_store::read_rows(&run_dir.join("split")).unwrap();
    assert!(
        labels.iter().all(|l| l.keyword_evidence == "none"),
        "{labels:?}"
    );
    let filter_stats = stats(&run_dir.join("filter"));
    assert_eq!(filter_stats["lm.requests"], 4.0);
    assert_eq!(filter_stats["lm.fallback_rows"], 1.0);
    let tokens: i64 = verdicts.iter().map(|v| v.prompt_tokens.unwrap_or(0)).sum();
    let paid_prompt = tokens as f64;
    assert_eq!(filter_stats["lm.prompt_tokens"], paid_prompt);
    let filter_line = summary
        .lines()
        .find(|l| l.starts_with("lm filter "))
        .unwrap_or_default();
    assert!(filter_line.contains(" requests=4"), "{summary}");
    assert!(summary.contains("lm run      "), "{summary}");

    let status = kiln_with_key(&["status"]);
    assert!(status.contains("lm.requests=4"), "{status}");
    assert!(status.contains("lm.cost_usd=0.0"), "{status}");
    assert!(status.contains("lm (run)   "), "{status}");
    assert!(status.contains("requests=4"), "{status}");

    // Re-running the stage makes no request.
    kiln_with_key(&["stage", "filter"]);
    assert_eq!(fake.chat_requests().len(), 4);

    // Settings that do not change the question start the stage over from the stored answers.
    let text = std::fs::read_to_string(&config).unwrap_or_default();
    std::fs::write(
        &config,
        text.replace("min_problem_chars = 20", "min_problem_chars = 25"),
    )
    .unwrap();
    kiln_with_key(&["stage", "filter"]);
    assert_eq!(
        fake.chat_requests().len(),
        4,
        "replayed answers cost no request"
    );
    let replayed = stats(&run_dir.join("filter"));
    assert_eq!(replayed["lm.replayed"], 4.0);
    assert_eq!(replayed["lm.requests"], 0.0);
    let again: Vec<Verdict> = kiln_store::read_rows(&run_dir.join("filter")).unwrap();
    assert_eq!(again.len(), 4);

    // --force asks again, for the whole stage or for one instance.
    kiln_with_key(&["stage", "filter", "--force"]);
    assert_eq!(fake.chat_requests().len(), 8);
    kiln_with_key(&["stage", "filter", "--force", "--only", "kiln-demo__calc-2"]);
    assert_eq!(fake.chat_requests().len(), 9);
    let spent: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(run_dir.join("lm/spent.json")).unwrap_or_default(),
    )
    .unwrap_or_default();
    assert_eq!(
        spent["requests"], 9,
        "the run's ledger counts every request"
    );

    // The key went to the endpoint and nowhere else: not in any file of the dataset (rows,
    // manifests, answers, the config snapshot) nor in anything kiln printed.
    assert!(
        fake.chat_requests()
            .iter()
            .all(|r| r.headers.get("authorization").map(String::as_str)
                == Some(&format!("Bearer {KEY}")))
    );
    for (path, content) in all_files(&dir.join("datasets")) {
        assert!(!content.contains(KEY), "{} holds the key", path.display());
    }
    for output in &outputs {
        assert!(!output.contains(KEY), "kiln printed the key:\n{output}");
    }
}

#[test]
fn the_budget_stops_asking_and_the_rows_say_so() {
    let tmp = tempdir();
    let dir = tmp.path().join("fixtures");
    let fake = fake();
    // Less than one request's worst case: nothing may be sent.
    let config = prepare(&dir, &fake.url(), Some(0.0001));
    let output = run(kiln()
        .env(KEY_VAR, KEY)
        .arg("run")
        .arg("--config")
        .arg(&config));
    assert!(output.status.success(), "{}", text(&output));
    assert!(fake.requests().is_empty(), "{:?}", fake.requests());
    let run_dir = only_run(&dir);
    let verdicts: Vec<Verdict> = kiln_store::read_rows(&run_dir.join("filter")).unwrap();
    assert_eq!(verdicts.len(), 4);
    for verdict in &verdicts {
        assert_eq!(verdict.judge, "heuristic");
        assert!(
            verdict
                .fallback
                .as_deref()
                .is_some_and(|f| f.starts_with("the run's budget of $0.0001 was reached")),
            "{verdict:?}"
        );
    }
    let filter_stats = stats(&run_dir.join("filter"));
    assert_eq!(filter_stats["lm.over_budget"], 4.0);
    assert_eq!(filter_stats["lm.requests"], 0.0);
    let status = run(kiln().args(["status", "--config"]).arg(&config));
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(status.contains("lm.over_budget=4"), "{status}");
}

/// `kiln demo --lm-url`: the demo's filter and split go through the endpoint, the launch agent
/// builds the fixture the rules cannot, every fixture ends as expected, the release names the
/// answers behind it. Needs the Docker engine.
#[test]
fn demo_judged_through_an_lm_endpoint() {
    let _demo = crate::demo_lock();
    let tmp = tempdir();
    let fake = fake();
    let dir = tmp.path().join("demo");
    let output = run(kiln()
        .env("OPENAI_API_KEY", KEY)
        .args(["--json", "demo", "--repeats", "1", "--lm-url"])
        .arg(fake.url())
        .arg("--dir")
        .arg(&dir));
    assert!(output.status.success(), "{}", text(&output));
    assert!(!text(&output).contains(KEY));
    let report: serde_json::Value =
        serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{e}\n{}", text(&output)));
    let instances = report["instances"].as_array().cloned().unwrap_or_default();
    assert_eq!(instances.len(), 5, "{report:#}");
    assert!(
        instances.iter().all(|i| i["as_expected"] == true),
        "{report:#}"
    );
    // No --lm-model: the first model the endpoint lists was asked.
    let models: Vec<String> = fake
        .requests()
        .into_iter()
        .filter(|r| r.path == "/v1/models")
        .map(|r| r.method)
        .collect();
    assert_eq!(models, ["GET"]);
    // One filter answer per candidate; the agent's four turns for the weather fixture and one
    // (it gives up) for the fixture whose dependency does not exist.
    assert_eq!(fake.chat_requests().len(), 10);
    assert_eq!(report["lm"]["requests"], 10);
    assert!(
        report["lm"]["prompt_tokens"]
            .as_u64()
            .is_some_and(|t| t > 900)
    );
    assert_eq!(report["stage_stats"]["filter"]["lm.requests"], 5.0);
    assert_eq!(report["stage_stats"]["launch"]["lm.requests"], 5.0);
    let weather = instances
        .iter()
        .find(|i| i["instance_id"] == "kiln-demo__weather-6")
        .expect("the agent's fixture");
    assert_eq!(weather["summary"]["built_by"], "agent", "{weather:#}");
    assert_eq!(weather["summary"]["agent_steps"], 4, "{weather:#}");
    let broken = instances
        .iter()
        .find(|i| i["instance_id"] == "kiln-demo__broken-5")
        .expect("the broken fixture");
    assert_eq!(
        broken["summary"]["failure_class"], "dependency-resolution",
        "the agent gave up and the rules' failure stands: {broken:#}"
    );
    let run_dir = PathBuf::from(report["run_dir"].as_str().unwrap_or_default());
    let verdicts: Vec<Verdict> = kiln_store::read_rows(&run_dir.join("filter")).unwrap();
    let judges: Vec<(&str, &str)> = verdicts
        .iter()
        .map(|v| (v.instance_id.as_str(), v.judge.as_str()))
        .collect();
    assert!(
        judges.contains(&("kiln-demo__badgold-4", "heuristic")),
        "{judges:?}"
    );
    assert!(
        judges.contains(&("kiln-demo__calc-2", "fake-judge-1")),
        "{judges:?}"
    );
    // The release lists the filter's answers behind its three rows.
    let tag = crate::release_dir(&dir, "demo");
    let answers = std::fs::read_to_string(tag.join("lm-answers.jsonl")).unwrap_or_default();
    let ids: Vec<String> = answers
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap_or_default()["instance_id"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert_eq!(ids.len(), 3, "{answers}");
    assert!(ids.contains(&"kiln-demo__calc-2".to_string()), "{ids:?}");
    assert!(
        ids.contains(&"kiln-demo__textwrap2-3".to_string()),
        "{ids:?}"
    );
    let card = std::fs::read_to_string(tag.join("README.md")).unwrap_or_default();
    assert!(
        card.contains("The 3 LM answers behind the filter and split"),
        "{card}"
    );

    // The run report draws every figure in Chromium, the LM's tokens included.
    let data = crate::report::check_report(&dir.join("pipeline.toml"), tmp.path());
    let funnel: Vec<u64> = data["funnel"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f[1].as_u64())
        .collect();
    assert_eq!(funnel, [5, 5, 5, 5, 4, 3, 3], "{data:#}");
    assert_eq!(data["lm_requests"], 10, "{data:#}");
    assert_eq!(data["tokens"][0]["stage"], "filter", "{data:#}");
    assert_eq!(data["instances"].as_array().map(Vec::len), Some(5));
    let builders = data["builders"].as_array().cloned().unwrap_or_default();
    assert!(builders.contains(&json!(["agent", 1])), "{builders:?}");
    assert!(builders.contains(&json!(["rules", 3])), "{builders:?}");
}

/// The commented `[lm]` example of the checked-in pipeline.toml, uncommented, with both
/// judges switched to the LM and the launch agent on, is a valid config: the documentation
/// cannot drift from the keys.
#[test]
fn the_documented_lm_keys_compile() {
    let documented =
        std::fs::read_to_string(crate::workspace_root().join("pipeline.toml")).unwrap();
    let mut out = String::new();
    let mut in_lm = false;
    for line in documented.lines() {
        let bare = line.strip_prefix("# ").unwrap_or(line);
        in_lm = in_lm || bare.starts_with("[lm]");
        let line = if in_lm && line.starts_with("# ") {
            bare
        } else if line.starts_with("# votes")
            || line.starts_with("# models")
            || line.starts_with("# agent_")
            || line.starts_with("# [stages.export.frozen")
            || ["# sample =", "# seed =", "# ids ="]
                .iter()
                .any(|key| line.starts_with(key))
        {
            line.trim_start_matches("# ")
        } else {
            line
        };
        if in_lm && line.is_empty() {
            in_lm = false;
        }
        out.push_str(
            &line
                .replace("judge = \"heuristic\"", "judge = \"lm\"")
                .replace("judge = \"keyword\"", "judge = \"lm\"")
                .replace("agent = false", "agent = true"),
        );
        out.push('\n');
    }
    assert!(out.contains("\n[lm]\nbase_url = "), "{out}");
    assert!(
        out.contains("\nagent = true") && out.contains("\nagent_max_steps = "),
        "{out}"
    );
    assert!(
        out.contains("\n[stages.export.frozen.lite]\nsample = "),
        "{out}"
    );
    let tmp = tempdir();
    let config = tmp.path().join("pipeline.toml");
    // The frozen split's id list and the task file must exist for `kiln check`.
    std::fs::write(tmp.path().join("verified.txt"), "o__r-1\n").unwrap();
    std::fs::write(tmp.path().join("tasks.jsonl"), "").unwrap();
    std::fs::write(&config, &out).unwrap();
    let output = run(kiln().args(["--json", "check", "--config"]).arg(&config));
    assert!(output.status.success(), "{}\n{out}", text(&output));
    let checked: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap_or_default();
    let filter = checked["nodes"]
        .as_array()
        .and_then(|n| n.iter().find(|n| n["name"] == "filter"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(filter["settings"]["judge"], "lm", "{checked:#}");
    assert_eq!(filter["settings"]["votes"], 3, "{checked:#}");
    assert_eq!(filter["settings"]["lm"]["api_key_env"], "OPENAI_API_KEY");
}
