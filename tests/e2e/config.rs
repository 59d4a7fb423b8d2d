//! Bad input gets a clear error, a documented exit code, and loses nothing.

use std::path::{Path, PathBuf};

use kiln_schema::Candidate;

use crate::{kiln, run, tempdir, text, workspace_root};

#[test]
fn the_checked_in_pipeline_is_valid_and_graphs() {
    let config = workspace_root().join("pipeline.toml");
    // The one thing it needs from the user is the task file its source names.
    let output = run(kiln().args(["check", "--config"]).arg(&config));
    assert_eq!(output.status.code(), Some(3), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("1 problem(s)")
            && stderr.contains("sources.tasks.path:")
            && stderr.contains("tasks.jsonl cannot be read as a file"),
        "{stderr}"
    );
    let tmp = tempdir();
    std::fs::copy(&config, tmp.path().join("pipeline.toml")).unwrap();
    std::fs::write(tmp.path().join("tasks.jsonl"), "").unwrap();
    let output = run(kiln()
        .args(["check", "--config"])
        .arg(tmp.path().join("pipeline.toml")));
    assert!(output.status.success(), "{}", text(&output));
    let output = run(kiln().args(["graph", "--config"]).arg(&config));
    assert!(output.status.success(), "{}", text(&output));
    let dot = String::from_utf8_lossy(&output.stdout);
    assert!(dot.starts_with("digraph kiln {"), "{dot}");
    assert!(dot.contains("\"launch\" -> \"validate\""), "{dot}");
    // Under --json, the same graph as JSON.
    let output = run(kiln().args(["--json", "graph", "--config"]).arg(&config));
    let graph: serde_json::Value =
        serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&output)));
    assert!(
        graph["edges"].as_array().is_some_and(
            |edges| edges.contains(&serde_json::json!({"from": "launch", "to": "validate"}))
        ),
        "{graph}"
    );
    assert_eq!(graph["nodes"][0]["kind"], "ingest", "{graph}");
}

#[test]
fn a_malformed_config_names_every_key_and_line() {
    let tmp = tempdir();
    let config = tmp.path().join("pipeline.toml");
    std::fs::write(
        &config,
        "[dataset]\nname = \"x\"\n\n[sources.tasks]\nkind = \"ingest\"\npath = \"t.jsonl\"\n\n\
         [stages.launch]\nkind = \"launch\"\ninputs = [\"tasks\"]\ntimeout = \"10m\"\n\n\
         [stages.validate]\nkind = \"validate\"\ninputs = [\"tasks\", \"launch\"]\nrepeats = 0\n",
    )
    .unwrap();
    let output = run(kiln().args(["check", "--config"]).arg(&config));
    assert_eq!(output.status.code(), Some(3), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let path = config.display().to_string();
    assert!(
        stderr.contains(&format!("{path}:11:1: stages.launch.timeout: unknown key")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "{path}:16:11: stages.validate.repeats: 0 is out of range 1..=20"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("2 problem(s)"), "{stderr}");
    // `run` refuses the same config before touching anything.
    let output = run(kiln().args(["run", "--config"]).arg(&config));
    assert_eq!(output.status.code(), Some(3), "{}", text(&output));
    assert!(
        !tmp.path().join("datasets").exists(),
        "nothing may be written for a bad config"
    );
}

#[test]
fn no_engine_is_one_clear_line_and_exit_code_4() {
    let tmp = tempdir();
    let demo = kiln_demo::prepare(&tmp.path().join("d"), None, 1).unwrap();
    let output = run(kiln()
        .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
        .env(kiln_demo::DEMO_TOKEN_ENV, &demo.token)
        .args(["run", "--config"])
        .arg(&demo.config_path));
    assert_eq!(output.status.code(), Some(4), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let first = stderr.lines().next().unwrap_or_default();
    assert!(
        first.starts_with(
            "error: failed to reach the Docker engine at unix:///nonexistent/docker.sock"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("scripts/docker-engine.sh start"),
        "says how to start one: {stderr}"
    );
}

/// The one run under `runs`.
fn only_run(runs: &Path) -> PathBuf {
    std::fs::read_dir(runs)
        .ok()
        .and_then(|mut d| d.next())
        .and_then(Result::ok)
        .map(|e| e.path())
        .unwrap_or_else(|| panic!("no run in {}", runs.display()))
}

/// A task file as the Hub publishes SWE-bench (Parquet, every column a string, the test lists
/// JSON text), written by pyarrow, is ingested as its JSONL form is; a row pyarrow wrote with
/// a null id is that row's error.
#[test]
fn a_parquet_task_file_in_swe_benchs_schema_is_ingested_like_its_jsonl() {
    let tmp = tempdir();
    let layout = kiln_testkit::write_demo(&tmp.path().join("d")).unwrap();
    let parquet = tmp.path().join("tasks.parquet");
    let convert = format!(
        "import json, pyarrow as pa, pyarrow.parquet as pq\n\
         rows = [json.loads(l) for l in open({jsonl:?}) if l.strip()]\n\
         rows.append(dict(rows[0], instance_id=None))\n\
         names = sorted(rows[0])\n\
         table = pa.table({{n: pa.array([r.get(n) for r in rows], pa.string()) for n in names}})\n\
         pq.write_table(table, {out:?})\n",
        jsonl = layout.tasks_file.display().to_string(),
        out = parquet.display().to_string(),
    );
    let output = run(std::process::Command::new("python3")
        .arg("-c")
        .arg(&convert));
    assert!(output.status.success(), "{}", text(&output));
    let ingest = |path: &std::path::Path, name: &str| {
        let config = tmp.path().join(format!("{name}.toml"));
        std::fs::write(
            &config,
            format!(
                "[dataset]\nname = \"{name}\"\n[sources.tasks]\nkind = \"ingest\"\npath = {:?}\n",
                path.to_string_lossy()
            ),
        )
        .unwrap();
        let output = run(kiln().args(["run", "--config"]).arg(&config));
        assert!(output.status.success(), "{}", text(&output));
        let runs = tmp.path().join(format!("datasets/{name}/runs"));
        let run_dir = only_run(&runs);
        let rows: Vec<Candidate> = kiln_store::read_rows(&run_dir.join("tasks")).unwrap();
        rows
    };
    let from_jsonl = ingest(&layout.tasks_file, "from-jsonl");
    let mut from_parquet = ingest(&parquet, "from-parquet");
    let broken = from_parquet.pop().expect("the broken row");
    assert_eq!(broken.status.as_str(), "error", "{broken:?}");
    assert!(
        broken
            .error
            .as_deref()
            .is_some_and(|e| e.starts_with("tasks.parquet:") && e.contains("instance_id")),
        "{broken:?}"
    );
    assert_eq!(from_parquet.len(), from_jsonl.len());
    for (parquet, jsonl) in from_parquet.iter().zip(&from_jsonl) {
        assert_eq!(parquet.instance_id, jsonl.instance_id);
        assert_eq!(parquet.status, jsonl.status, "{parquet:?}");
        assert_eq!(parquet.patch, jsonl.patch);
        assert_eq!(parquet.test_patch, jsonl.test_patch);
        assert_eq!(parquet.base_commit, jsonl.base_commit);
        assert_eq!(parquet.given_fail_to_pass, jsonl.given_fail_to_pass);
        assert_eq!(parquet.given_pass_to_pass, jsonl.given_pass_to_pass);
        assert!(!parquet.given_fail_to_pass.is_empty());
        assert_eq!(parquet.created_at, jsonl.created_at);
    }
}

#[test]
fn malformed_task_lines_are_recorded_and_the_others_proceed() {
    let tmp = tempdir();
    let layout = kiln_testkit::write_demo(&tmp.path().join("d")).unwrap();
    let bad = kiln_testkit::write_tasks_with_errors(&layout).unwrap();
    let config = tmp.path().join("pipeline.toml");
    std::fs::write(
        &config,
        format!(
            "[dataset]\nname = \"errors\"\n[sources.tasks]\nkind = \"ingest\"\npath = {:?}\n\
             [stages.filter]\nkind = \"filter\"\ninputs = [\"tasks\"]\n",
            bad.path.to_string_lossy()
        ),
    )
    .unwrap();
    let output = run(kiln().args(["run", "--config"]).arg(&config));
    assert!(output.status.success(), "{}", text(&output));
    let runs = tmp.path().join("datasets/errors/runs");
    let run_dir = only_run(&runs);
    let rows: Vec<Candidate> = kiln_store::read_rows(&run_dir.join("tasks")).unwrap();
    let ok: Vec<&str> = rows
        .iter()
        .filter(|r| r.status.as_str() == "ok")
        .map(|r| r.instance_id.as_str())
        .collect();
    assert_eq!(
        ok,
        bad.valid_instance_ids
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
    );
    for invalid in &bad.invalid_lines {
        let row = rows
            .iter()
            .find(|r| r.instance_id == invalid.instance_id.as_str())
            .unwrap_or_else(|| panic!("no row for line {}", invalid.line));
        assert_eq!(row.status.as_str(), "error");
        let error = row.error.clone().unwrap_or_default();
        assert!(
            error.starts_with(&format!("tasks-with-errors.jsonl:{}:", invalid.line)),
            "the error names the file and line: {error}"
        );
        if let Some(field) = invalid.missing_field {
            assert!(
                error.contains(field),
                "the error names the missing field: {error}"
            );
        }
    }
}

/// `kiln status` before any run says where it looked and how to look elsewhere, and in a
/// checkout where the demo ran, where the demo's runs are.
#[test]
fn status_without_a_run_says_where_it_looked() {
    let tmp = tempdir();
    let config = tmp.path().join("pipeline.toml");
    std::fs::copy(workspace_root().join("pipeline.toml"), &config).unwrap();
    let output = run(kiln()
        .args(["status", "--config"])
        .arg(&config)
        .current_dir(tmp.path()));
    assert_eq!(output.status.code(), Some(6), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("datasets/kiln/runs"), "{stderr}");
    assert!(stderr.contains("hint: `--config FILE`"), "{stderr}");
    assert!(!stderr.contains("kiln-demo"), "{stderr}");
    std::fs::create_dir_all(tmp.path().join("kiln-demo")).unwrap();
    std::fs::write(tmp.path().join("kiln-demo/pipeline.toml"), "").unwrap();
    let output = run(kiln()
        .args(["status", "--config"])
        .arg(&config)
        .current_dir(tmp.path()));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("kiln status --config kiln-demo/pipeline.toml"),
        "{stderr}"
    );
}

/// `scripts/docker-engine.sh stop` stops only an engine its own checkout (or invocation)
/// started: run from another checkout, it finds no pid file of its own and the engine these
/// tests use goes on answering.
#[test]
fn an_engine_stop_from_another_checkout_stops_nothing() {
    let tmp = tempdir();
    let scripts = tmp.path().join("scripts");
    std::fs::create_dir_all(&scripts).unwrap();
    std::fs::copy(
        workspace_root().join("scripts/docker-engine.sh"),
        scripts.join("docker-engine.sh"),
    )
    .unwrap();
    let output = run(std::process::Command::new("bash")
        .arg(scripts.join("docker-engine.sh"))
        .arg("stop")
        .env_remove("KILN_DOCKERD_STATE"));
    assert!(output.status.success(), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("nothing to stop"), "{stderr}");
    let info = run(std::process::Command::new("docker").arg("info"));
    assert!(
        info.status.success(),
        "the engine is still up: {}",
        text(&info)
    );
}
