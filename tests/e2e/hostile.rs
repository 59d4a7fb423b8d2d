//! kiln against input written to break it, on the real engine: a test patch that forges its
//! validation, a test printing 2 GiB, ids with line breaks, path components or differing only
//! in case, and a release whose ids point outside the evaluation's output.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kiln_schema::{Candidate, EnvironmentRecord, ValidationRecord};

use crate::{ca_bundle, containers_with_label, kiln, run, tempdir, text};

/// Runs `kiln --json run` on the config in `dir` and returns the run directory.
fn run_pipeline(dir: &Path) -> PathBuf {
    let output = run(kiln()
        .args(["--json", "run", "--config"])
        .arg(dir.join("pipeline.toml")));
    assert!(output.status.success(), "{}", text(&output));
    let report: serde_json::Value =
        serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{e}\n{}", text(&output)));
    PathBuf::from(report["run_dir"].as_str().unwrap_or_default())
}

fn rows<R: kiln_schema::Row>(dir: &Path) -> BTreeMap<String, R> {
    kiln_store::read_rows::<R>(dir)
        .unwrap()
        .into_iter()
        .map(|r| (r.key().to_string(), r))
        .collect()
}

/// Every file under `dir`, with its size.
fn files(dir: &Path) -> Vec<(PathBuf, u64)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files(&path));
        } else {
            let size = entry.metadata().map(|m| m.len()).unwrap_or(0);
            out.push((path, size));
        }
    }
    out
}

/// No container of the run at `run_dir` of `dataset` is left on the engine.
fn assert_no_container_left(dataset: &str, run_dir: &Path) {
    let run_id = run_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let left = containers_with_label(&format!("kiln.run={dataset}/{run_id}"));
    assert!(left.is_empty(), "containers left behind: {left:?}");
}

/// Removes the images a test's dataset made, so that the shared engine keeps nothing.
fn remove_images(dataset: &str) {
    let output = run(std::process::Command::new("docker").args([
        "images",
        "-q",
        "--filter",
        &format!("reference=kiln-env/{dataset}-*"),
    ]));
    for id in String::from_utf8_lossy(&output.stdout).lines() {
        let _ = run(std::process::Command::new("docker").args(["rmi", "-f", id]));
    }
}

#[test]
fn a_forging_test_patch_is_rejected_and_two_gigabytes_of_output_stay_capped_on_disk() {
    let tmp = tempdir();
    let dir = tmp.path().join("hc");
    let dataset = format!("hard-hc-{}", std::process::id());
    let layout = kiln_testkit::write_hostile_cases(&dir).unwrap();
    std::fs::write(
        dir.join("pipeline.toml"),
        kiln_demo::config_text(&dataset, ca_bundle().as_deref(), 1, false),
    )
    .unwrap();
    let started = std::time::Instant::now();
    let run_dir = run_pipeline(&dir);
    eprintln!(
        "hostile cases ran in {:.0}s",
        started.elapsed().as_secs_f64()
    );
    remove_images(&dataset);
    let validations: BTreeMap<String, ValidationRecord> = rows(&run_dir.join("validate"));

    let forged = &validations["kiln-hc__forgery-21"];
    assert_eq!(forged.status.as_str(), "rejected", "{forged:#?}");
    assert_eq!(
        forged.failure_class.map(kiln_schema::FailureClass::as_str),
        Some("no-fail-to-pass"),
        "{forged:#?}"
    );
    assert!(forged.FAIL_TO_PASS.is_empty(), "{forged:#?}");

    let loud = &validations["kiln-hc__loud-22"];
    let Some(kiln_testkit::ExpectedInstance {
        expect:
            kiln_testkit::Expect::Validated {
                fail_to_pass,
                pass_to_pass,
            },
        ..
    }) = layout.instance("kiln-hc__loud-22")
    else {
        panic!("the loud case is expected to validate");
    };
    assert_eq!(loud.status.as_str(), "validated", "{loud:#?}");
    assert_eq!(&loud.FAIL_TO_PASS, fail_to_pass);
    assert_eq!(&loud.PASS_TO_PASS, pass_to_pass);
    // Two runs of 2 GiB each: every log file stays within the per-command cap.
    let cap = (kiln_core::session::LOG_HEAD_BYTES + kiln_core::session::LOG_TAIL_BYTES) as u64;
    let logs = files(&run_dir.join("logs"));
    assert!(!logs.is_empty());
    for (path, size) in &logs {
        assert!(
            *size <= cap + (1 << 16),
            "{} is {size} bytes",
            path.display()
        );
    }
    let loud_logs: u64 = logs
        .iter()
        .filter(|(p, _)| p.to_string_lossy().contains("kiln-hc__loud-22"))
        .map(|(_, s)| s)
        .sum();
    assert!(
        loud_logs > cap,
        "the loud runs were not logged: {loud_logs} bytes"
    );
    assert_no_container_left(&dataset, &run_dir);
}

#[test]
fn hostile_ids_become_error_rows_and_ids_differing_in_case_keep_their_own_images() {
    let tmp = tempdir();
    let dir = tmp.path().join("ids");
    let dataset = format!("hard-ids-{}", std::process::id());
    let layout = kiln_testkit::write_validation_cases(&dir).unwrap();
    let tasks: Vec<serde_json::Value> = std::fs::read_to_string(&layout.tasks_file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let task = |id: &str| {
        tasks
            .iter()
            .find(|t| t["instance_id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("no task {id}"))
    };
    let with_id = |mut task: serde_json::Value, id: &str| {
        task["instance_id"] = id.into();
        task.to_string()
    };
    // Two repositories under ids that differ only in case: one image tag each, or one would be
    // validated in the other's image. Then ids that would add a Dockerfile instruction, leave
    // the log directory, or name an absolute path.
    let hostile = [
        with_id(task("kiln-vc__inikit-14"), "kiln-vc__case-1"),
        with_id(task("kiln-vc__colorkit-15"), "KILN-VC__CASE-1"),
        with_id(task("kiln-vc__inikit-14"), "x\nRUN false"),
        with_id(task("kiln-vc__inikit-14"), "../../escape"),
        with_id(task("kiln-vc__inikit-14"), "/tmp/kiln-absolute"),
    ];
    std::fs::write(&layout.tasks_file, hostile.join("\n") + "\n").unwrap();
    std::fs::write(
        dir.join("pipeline.toml"),
        kiln_demo::config_text(&dataset, ca_bundle().as_deref(), 1, true),
    )
    .unwrap();
    let run_dir = run_pipeline(&dir);
    remove_images(&dataset);

    let candidates: BTreeMap<String, Candidate> = rows(&run_dir.join("tasks"));
    for (line, what) in [
        (3, "contains a line break"),
        (4, "contains a path separator"),
        (5, "contains a path separator"),
    ] {
        let row = &candidates[&format!("invalid-line-{line}")];
        assert_eq!(row.status.as_str(), "error");
        let error = row.error.as_deref().unwrap_or_default();
        assert!(error.contains(what), "line {line}: {error}");
    }
    let environments: BTreeMap<String, EnvironmentRecord> = rows(&run_dir.join("launch"));
    let launched: Vec<&str> = environments.keys().map(String::as_str).collect();
    assert_eq!(launched, ["KILN-VC__CASE-1", "kiln-vc__case-1"]);
    let images: Vec<Option<&String>> = environments.values().map(|e| e.image.as_ref()).collect();
    assert_ne!(images[0], images[1], "one image for two instances");
    for environment in environments.values() {
        assert_eq!(environment.status.as_str(), "built", "{environment:#?}");
        let check = environment.dockerfile_check.as_deref().unwrap_or_default();
        assert!(check.starts_with("rebuilt and passed"), "{check}");
    }
    let validations: BTreeMap<String, ValidationRecord> = rows(&run_dir.join("validate"));
    for (id, fixture) in [
        ("kiln-vc__case-1", "kiln-vc__inikit-14"),
        ("KILN-VC__CASE-1", "kiln-vc__colorkit-15"),
    ] {
        let row = &validations[id];
        let Some(kiln_testkit::Expect::Validated { fail_to_pass, .. }) =
            layout.instance(fixture).map(|i| &i.expect)
        else {
            panic!("{fixture} is expected to validate");
        };
        assert_eq!(row.status.as_str(), "validated", "{id}: {row:#?}");
        assert_eq!(
            &row.FAIL_TO_PASS, fail_to_pass,
            "{id}: validated in its own image"
        );
    }
    // No log directory outside the run's logs, and two for the two ids.
    assert!(!tmp.path().join("escape").exists());
    assert!(!Path::new("/tmp/kiln-absolute").exists());
    let logs: Vec<String> = std::fs::read_dir(run_dir.join("logs"))
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(logs.len(), 2, "{logs:?}");
    let status = run(kiln()
        .args(["--json", "status", "--config"])
        .arg(dir.join("pipeline.toml")));
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap_or_default();
    assert_eq!(status["status"], "complete", "{status:#}");
}

#[test]
fn evaluating_a_release_whose_ids_leave_the_output_writes_nothing_outside_it() {
    // What a kiln without the check once wrote there must not decide this run.
    let _ = std::fs::remove_dir_all("/tmp/kiln-e2e-absolute-evaluation");
    let tmp = tempdir();
    let release = tmp.path().join("release");
    let row = |id: &str| kiln_schema::ReleaseInstance {
        repo: "kiln-hc/evil".into(),
        image: "kiln-e2e/no-such-image:never".into(),
        test_cmds: vec!["true".into()],
        parser: "pytest".into(),
        ..kiln_schema::ReleaseInstance::new(kiln_schema::InstanceId::new(id).unwrap())
    };
    // kiln cannot write such ids (the column's type refuses them), so the release is written
    // with stand-ins and pyarrow puts the hostile ids in, as someone else's release would.
    let hostile = [
        "../../outside-evaluation",
        "/tmp/kiln-e2e-absolute-evaluation",
        "fine__id-1",
    ];
    let rows = [row("stand-in-1"), row("stand-in-2"), row("fine__id-1")];
    kiln_store::write_release(&release, "test", &rows, 10).unwrap();
    let rewrite = format!(
        "import glob, pyarrow as pa, pyarrow.parquet as pq\n\
         for path in glob.glob({dir:?} + '/data/*.parquet'):\n\
         \x20   table = pq.read_table(path)\n\
         \x20   ids = pa.array({ids:?}[:table.num_rows], type=table.schema.field('instance_id').type)\n\
         \x20   table = table.set_column(table.schema.get_field_index('instance_id'), 'instance_id', ids)\n\
         \x20   pq.write_table(table, path)\n",
        dir = release.display().to_string(),
        ids = hostile,
    );
    let output = run(std::process::Command::new("python3")
        .arg("-c")
        .arg(&rewrite));
    assert!(output.status.success(), "{}", text(&output));
    let predictions = tmp.path().join("preds.jsonl");
    let lines: String = hostile
        .iter()
        .map(|id| {
            format!(
                "{}\n",
                serde_json::json!({"instance_id": id, "model_patch": ""})
            )
        })
        .collect();
    std::fs::write(&predictions, lines).unwrap();
    let output_dir = tmp.path().join("a/b/out");
    let before: Vec<PathBuf> = files(tmp.path()).into_iter().map(|(p, _)| p).collect();
    let output = run(kiln()
        .args(["evaluate", "--dataset"])
        .arg(&release)
        .arg("--predictions")
        .arg(&predictions)
        .arg("--output")
        .arg(&output_dir));
    assert_eq!(output.status.code(), Some(6), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("\"../../outside-evaluation\"") && stderr.contains("path separator"),
        "{stderr}"
    );
    let after: Vec<PathBuf> = files(tmp.path()).into_iter().map(|(p, _)| p).collect();
    let new: Vec<&PathBuf> = after.iter().filter(|p| !before.contains(p)).collect();
    assert!(
        new.iter().all(|p| p.starts_with(&output_dir)),
        "written outside --output: {new:?}"
    );
    assert!(!Path::new("/tmp/kiln-e2e-absolute-evaluation").exists());
}

#[test]
fn evaluating_a_release_with_a_column_of_the_wrong_type_is_an_input_error() {
    let tmp = tempdir();
    let release = tmp.path().join("release");
    let row = kiln_schema::ReleaseInstance {
        repo: "kiln-hc/typed".into(),
        ..kiln_schema::ReleaseInstance::new(kiln_schema::InstanceId::new("typed__id-1").unwrap())
    };
    kiln_store::write_release(&release, "test", &[row], 10).unwrap();
    // The schema's metadata stays; only the column's type changes, as a hand-edited or
    // foreign release would have it.
    let rewrite = format!(
        "import glob, pyarrow as pa, pyarrow.parquet as pq\n\
         for path in glob.glob({dir:?} + '/data/*.parquet'):\n\
         \x20   table = pq.read_table(path)\n\
         \x20   i = table.schema.get_field_index('repo')\n\
         \x20   table = table.set_column(i, 'repo', pa.array([7] * table.num_rows, pa.int64()))\n\
         \x20   pq.write_table(table, path)\n",
        dir = release.display().to_string(),
    );
    let output = run(std::process::Command::new("python3")
        .arg("-c")
        .arg(&rewrite));
    assert!(output.status.success(), "{}", text(&output));
    let predictions = tmp.path().join("preds.jsonl");
    std::fs::write(&predictions, "").unwrap();
    let output = run(kiln()
        .args(["evaluate", "--dataset"])
        .arg(&release)
        .arg("--predictions")
        .arg(&predictions)
        .arg("--output")
        .arg(tmp.path().join("out")));
    assert_eq!(output.status.code(), Some(6), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("column repo") && stderr.contains("Int64"),
        "{stderr}"
    );
}

#[test]
fn test_runs_have_no_network_and_a_test_writing_past_the_disk_bound_is_stopped_and_classed() {
    let tmp = tempdir();
    let dir = tmp.path().join("sandbox");
    let dataset = format!("hard-sb-{}", std::process::id());
    kiln_testkit::write_sandbox_case(&dir).unwrap();
    let config = kiln_demo::config_text(&dataset, ca_bundle().as_deref(), 1, false);
    let config = if config.contains("[docker]\n") {
        config.replace("[docker]\n", "[docker]\ndisk = \"512m\"\n")
    } else {
        format!("{config}\n[docker]\ndisk = \"512m\"\n")
    };
    std::fs::write(dir.join("pipeline.toml"), config).unwrap();
    let started = std::time::Instant::now();
    let run_dir = run_pipeline(&dir);
    eprintln!(
        "sandbox case ran in {:.0}s",
        started.elapsed().as_secs_f64()
    );
    remove_images(&dataset);
    let id = "kiln-hc__sandbox-23";

    // The baseline ran where loopback is the only interface.
    let environments: BTreeMap<String, EnvironmentRecord> = rows(&run_dir.join("launch"));
    let environment = &environments[id];
    assert_eq!(environment.status.as_str(), "built", "{environment:#?}");
    assert_eq!(
        environment
            .baseline
            .get("tests/test_sandbox.py::test_only_loopback")
            .map(|s| s.as_str()),
        Some("pass"),
        "{:#?}",
        environment.baseline
    );

    // The test patch's 4 GiB were stopped at the bound.
    let validations: BTreeMap<String, ValidationRecord> = rows(&run_dir.join("validate"));
    let validation = &validations[id];
    assert_eq!(validation.status.as_str(), "failed", "{validation:#?}");
    assert_eq!(
        validation
            .failure_class
            .map(kiln_schema::FailureClass::as_str),
        Some("disk"),
        "{validation:#?}"
    );
    let reason = validation.reason.clone().unwrap_or_default();
    eprintln!("{reason}");
    let written: i64 = reason
        .split("wrote ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no byte count in {reason:?}"));
    assert!(
        (512 << 20..4 << 30).contains(&written),
        "{written} bytes written"
    );
    assert_no_container_left(&dataset, &run_dir);
}
