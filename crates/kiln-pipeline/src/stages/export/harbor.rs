//! The release as Harbor tasks (`[stages.export] formats = ["parquet", "harbor"]`): one task
//! directory per released instance, `harbor/<instance_id>/`, in the layout Harbor 0.25 reads
//! (`harbor run -p <release>/harbor`):
//!
//! ```text
//! instruction.md       the problem statement (and the hints, with `harbor_hints = true`)
//! task.toml            schema 1.4: kiln's facts in [metadata], timeouts, the image
//! tests/test.sh        the verifier, with the test patch, the lists and the grader
//! solution/solve.sh    the oracle, with the gold patch
//! ```
//!
//! What the files hold and why (kiln-validate's `harbor` module writes `tests/` and
//! `solution/`):
//! - The environment is `[environment] docker_image`, the row's image by name (the registry's
//!   once published), with no `environment/` directory: Harbor then starts the image as it is
//!   (no build per trial) and pulls it only when it is missing. The engine's image id is
//!   `image_digest` in `[metadata]`; `scripts/harbor-check.sh` checks that the name still
//!   points at it. Harbor cannot pin by digest offline: `name@sha256:<id>` makes compose pull
//!   (an image id is no registry digest), and a bare `sha256:<id>` cannot be pulled where the
//!   image is missing. An `environment/` holding anything but a Dockerfile would be uploaded
//!   into the container's working directory, so there is none.
//! - No network setting: Harbor's own `network_mode = "no-network"` (and the old
//!   `allow_internet = false`) needs its egress sidecar, whose images come from Docker Hub;
//!   without them the whole job aborts. Agents that install themselves need the network too.
//!   A run that must be offline adds a compose overlay (`--extra-docker-compose`) with
//!   `services.main.network_mode: none`, as `scripts/harbor-check.sh` does.
//! - Timeouts come from the row's measured test time ([`Timeouts`]).
//! - Harbor skips an invalid task directory without a word (a dataset run just has fewer
//!   trials), so a check compares the trial count with `release.json`'s task list.
//!
//! A row that a verifier could not grade as validation did (no image, no harness parser that
//! reads its output) is left out, with the reason in `release.json` and the card.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use kiln_core::Event;
use kiln_core::config::NodeKind;
use kiln_schema::{BuiltBy, EnvironmentRecord, InstanceId, ReleaseInstance, ValidationRecord};
use kiln_validate::harbor::{TaskFile, oracle_files, verifier_files};
use serde::Serialize;

use crate::error::PipelineError;
use crate::release::{HARBOR_DIR, HarborTasks, ReleaseFile};
use crate::stages::context::StageContext;

/// The `schema_version` of the `task.toml` files (Harbor 0.25's `harbor task init` writes it).
const TASK_SCHEMA_VERSION: &str = "1.4";

/// What the release row does not say about an instance and its task needs: from the launch
/// and validation rows of the run that made it, when that run is still on disk.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Facts {
    /// What built the environment.
    pub(super) built_by: Option<BuiltBy>,
    /// The longest run of the test command with the gold patch, in seconds.
    pub(super) test_seconds: Option<f64>,
}

/// The timeouts of a task, from the measured test time `t` (the longest run of the test
/// command with the gold patch; without it, the whole validation's wall time, which holds
/// every run and so bounds one).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Timeouts {
    /// The verifier runs the rebuild commands and the tests once: ten minutes (Harbor's own
    /// default) for the patch, the rebuild and a slower machine, plus ten times `t`.
    verifier: f64,
    /// An agent runs the tests many times while it works: an hour, or thirty times `t` when
    /// that is longer.
    agent: f64,
}

impl Timeouts {
    fn from_test_seconds(t: f64) -> Self {
        let t = if t.is_finite() && t > 0.0 { t } else { 0.0 };
        let whole_minutes = |s: f64| (s / 60.0).ceil() * 60.0;
        Self {
            verifier: whole_minutes(600.0 + 10.0 * t),
            agent: whole_minutes((30.0 * t).max(3600.0)),
        }
    }
}

/// `task.toml`.
#[derive(Serialize)]
struct TaskToml<'a> {
    schema_version: &'static str,
    metadata: Metadata<'a>,
    verifier: Timeout,
    agent: Timeout,
    environment: Environment<'a>,
}

/// `[metadata]`: free-form to Harbor; kiln's facts about the instance.
#[derive(Serialize)]
struct Metadata<'a> {
    source: &'static str,
    instance_id: &'a str,
    repository: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pull_number: Option<&'a str>,
    base_commit: &'a str,
    created_at: &'a str,
    language: &'a str,
    license: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<&'a str>,
    fail_to_pass_count: usize,
    pass_to_pass_count: usize,
    /// Validated tests the row's parser cannot read, which the verifier cannot grade.
    ungraded_count: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    built_by: Option<&'a str>,
    image: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    image_digest: Option<&'a str>,
    log_parser: &'a str,
    /// The measured test time the timeouts come from, and what it is.
    test_seconds: f64,
    test_seconds_from: &'static str,
    /// Quality signals (the card explains them): validation's runs per side, and how many of
    /// each side's runs repeated its first run's statuses.
    repeats: i64,
    identical_runs_before: i64,
    identical_runs_after: i64,
    solution_leak: bool,
    solution_leak_matches: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    difficulty: Option<&'static str>,
    tests_defined: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    tests_collected: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    whole_suite: Option<&'a str>,
    broken_outside_scope: &'a [String],
    /// The filter's verdict on the row (none when no filter judged it).
    #[serde(skip_serializing_if = "Option::is_none")]
    filter_judge: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    filter_label: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    filter_reason: Option<&'a str>,
    filter_flags: &'a [String],
    kiln_dataset: &'a str,
    kiln_release: &'a str,
    kiln_run_id: &'a str,
    tags: Vec<&'a str>,
}

#[derive(Serialize)]
struct Timeout {
    timeout_sec: f64,
}

#[derive(Serialize)]
struct Environment<'a> {
    docker_image: &'a str,
}

/// The release a task belongs to, for its metadata.
pub(super) struct Release<'a> {
    /// The dataset's name.
    pub(super) dataset: &'a str,
    /// The release's tag.
    pub(super) tag: &'a str,
    /// Whether `instruction.md` carries the hints.
    pub(super) hints: bool,
}

/// Writes a task directory per row of `split_rows` (each instance once, the main split's row
/// first) under `<staging>/harbor/`, and returns what `release.json` records of them.
///
/// # Errors
/// When a file cannot be written.
pub(super) fn write_tasks(
    staging: &Path,
    split_rows: &[(String, Vec<ReleaseInstance>)],
    facts: &BTreeMap<InstanceId, Facts>,
    release: &Release<'_>,
) -> Result<HarborTasks, PipelineError> {
    let mut seen = BTreeSet::new();
    let mut record = HarborTasks {
        tasks: Vec::new(),
        left_out: BTreeMap::new(),
        files: Vec::new(),
    };
    let rows = split_rows
        .iter()
        .flat_map(|(_, rows)| rows)
        .filter(|row| seen.insert(row.instance_id.clone()));
    for row in rows {
        let id = row.instance_id.as_str();
        let files = match task_files(row, facts.get(&row.instance_id), release) {
            Ok(files) => files,
            Err(reason) => {
                record.left_out.insert(id.to_string(), reason);
                continue;
            }
        };
        for file in files {
            let path = format!("{HARBOR_DIR}/{id}/{}", file.path);
            write_file(&staging.join(&path), &file)?;
            record.files.push(ReleaseFile::read(staging, &path)?);
        }
        record.tasks.push(id.to_string());
    }
    Ok(record)
}

/// Every file of the task of `row`, or why it cannot be one.
fn task_files(
    row: &ReleaseInstance,
    facts: Option<&Facts>,
    release: &Release<'_>,
) -> Result<Vec<TaskFile>, String> {
    let mut files = vec![
        TaskFile {
            path: "instruction.md".into(),
            contents: instruction(row, release.hints).into_bytes(),
            executable: false,
        },
        TaskFile {
            path: "task.toml".into(),
            contents: task_toml(row, facts, release)?.into_bytes(),
            executable: false,
        },
    ];
    files.extend(verifier_files(row)?);
    files.extend(oracle_files(row));
    Ok(files)
}

/// `instruction.md`: the problem statement as the row has it, then, when asked, the hints
/// under their own heading. Harbor reads it as text and drops leading lines that are
/// comments naming a canary; the statement is otherwise the agent's whole brief.
fn instruction(row: &ReleaseInstance, hints: bool) -> String {
    let mut text = row.problem_statement.clone();
    if hints && !row.hints_text.trim().is_empty() {
        if !text.ends_with('\n') {
            text.push('\n');
        }
        let _ = write!(text, "\n## Hints\n\n{}", row.hints_text);
    }
    text
}

/// `task.toml` of `row`.
fn task_toml(
    row: &ReleaseInstance,
    facts: Option<&Facts>,
    release: &Release<'_>,
) -> Result<String, String> {
    let measured = facts.and_then(|f| f.test_seconds);
    let (test_seconds, test_seconds_from) = match measured {
        Some(seconds) => (
            seconds,
            "the longest validation run of the test command with the gold patch",
        ),
        None => (
            row.validate_seconds,
            "the whole validation of the instance (its runs were not at hand)",
        ),
    };
    let timeouts = Timeouts::from_test_seconds(test_seconds);
    let toml = TaskToml {
        schema_version: TASK_SCHEMA_VERSION,
        metadata: Metadata {
            source: "kiln",
            instance_id: row.instance_id.as_str(),
            repository: &row.repo,
            pull_number: row.pull_number.as_deref(),
            base_commit: &row.base_commit,
            created_at: &row.created_at,
            language: &row.language,
            license: &row.license,
            version: row.version.as_deref(),
            fail_to_pass_count: row.FAIL_TO_PASS.len(),
            pass_to_pass_count: row.PASS_TO_PASS.len(),
            ungraded_count: row.FAIL_TO_PASS_UNGRADED.len() + row.PASS_TO_PASS_UNGRADED.len(),
            built_by: facts.and_then(|f| f.built_by).map(BuiltBy::as_str),
            image: &row.image,
            image_digest: row.image_digest.as_deref(),
            log_parser: &row.log_parser,
            test_seconds: (test_seconds * 100.0).round() / 100.0,
            test_seconds_from,
            repeats: row.repeats,
            identical_runs_before: row.identical_runs_before,
            identical_runs_after: row.identical_runs_after,
            solution_leak: row.solution_leak,
            solution_leak_matches: &row.solution_leak_matches,
            difficulty: row.difficulty.map(kiln_schema::Difficulty::as_str),
            tests_defined: row.tests_defined,
            tests_collected: row.tests_collected,
            whole_suite: row.whole_suite.as_deref(),
            broken_outside_scope: &row.broken_outside_scope,
            filter_judge: row.filter_judge.as_deref(),
            filter_label: row.filter_label.as_deref(),
            filter_reason: row.filter_reason.as_deref(),
            filter_flags: &row.filter_flags,
            kiln_dataset: release.dataset,
            kiln_release: release.tag,
            kiln_run_id: &row.run_id,
            tags: vec!["kiln", "swe-bench", row.language.as_str()],
        },
        verifier: Timeout {
            timeout_sec: timeouts.verifier,
        },
        agent: Timeout {
            timeout_sec: timeouts.agent,
        },
        environment: Environment {
            docker_image: &row.image,
        },
    };
    toml::to_string(&toml).map_err(|e| format!("its task.toml cannot be written: {e}"))
}

/// Writes one file of a task (scripts executable).
fn write_file(path: &Path, file: &TaskFile) -> Result<(), PipelineError> {
    let host = |what: &str, e: std::io::Error| PipelineError::Host {
        what: format!("{what} {}", path.display()),
        message: e.to_string(),
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| host("create", e))?;
    }
    std::fs::write(path, &file.contents).map_err(|e| host("write", e))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = if file.executable { 0o755 } else { 0o644 };
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            .map_err(|e| host("set the mode of", e))?;
    }
    Ok(())
}

/// The facts of `rows` from the runs that made them: this run's tables, and those of earlier
/// runs still on disk (a release keeps rows of earlier runs of its tag). Rows whose run is gone
/// have none, and the stage says how many.
pub(super) fn facts(
    cx: &StageContext<'_>,
    split_rows: &[(String, Vec<ReleaseInstance>)],
) -> BTreeMap<InstanceId, Facts> {
    let mut by_run: BTreeMap<&str, BTreeSet<&InstanceId>> = BTreeMap::new();
    for row in split_rows.iter().flat_map(|(_, rows)| rows) {
        by_run
            .entry(&row.run_id)
            .or_default()
            .insert(&row.instance_id);
    }
    let mut facts = BTreeMap::new();
    let mut missing = 0;
    for (run_id, ids) in by_run {
        let other;
        let run = if run_id == cx.run.run_id() {
            cx.run
        } else {
            let dataset = &cx.pipeline.dataset;
            match kiln_store::RunStore::open(&dataset.root, &dataset.name, run_id) {
                Ok(run) => {
                    other = run;
                    &other
                }
                Err(_) => {
                    missing += ids.len();
                    continue;
                }
            }
        };
        let read = run_facts(cx, run, &ids);
        missing += ids.len() - read.len();
        facts.extend(read);
    }
    if missing > 0 {
        cx.reporter.report(Event::Note {
            message: format!(
                "export: {missing} Harbor task(s) of rows whose run is gone or unreadable have no `built_by`, \
                 and timeouts from the whole validation's time"
            ),
        });
    }
    facts
}

/// The facts of `ids` from the launch and validation tables of `run`.
fn run_facts(
    cx: &StageContext<'_>,
    run: &kiln_store::RunStore,
    ids: &BTreeSet<&InstanceId>,
) -> BTreeMap<InstanceId, Facts> {
    let environments: Vec<EnvironmentRecord> =
        crate::summary::rows(cx.pipeline, run, NodeKind::Launch).unwrap_or_default();
    let validations: Vec<ValidationRecord> =
        crate::summary::rows(cx.pipeline, run, NodeKind::Validate).unwrap_or_default();
    let mut facts: BTreeMap<InstanceId, Facts> = BTreeMap::new();
    for environment in environments
        .into_iter()
        .filter(|e| ids.contains(&e.instance_id))
    {
        facts.entry(environment.instance_id).or_default().built_by = environment.built_by;
    }
    for validation in validations
        .into_iter()
        .filter(|v| ids.contains(&v.instance_id))
    {
        facts
            .entry(validation.instance_id.clone())
            .or_default()
            .test_seconds = gold_run_seconds(&validation);
    }
    facts
}

/// The longest run of the test command with the gold patch (`after:N` in `runs`).
fn gold_run_seconds(validation: &ValidationRecord) -> Option<f64> {
    validation
        .runs
        .iter()
        .filter(|(label, _)| label.starts_with("after"))
        .filter_map(|(_, run)| run.get("seconds")?.parse::<f64>().ok())
        .reduce(f64::max)
}

/// The card's paragraph on the Harbor tasks.
pub(super) fn card_paragraph(tasks: &HarborTasks) -> String {
    let mut text = format!(
        "\n{} row(s) are also Harbor tasks (`harbor/<instance_id>/`: `instruction.md`, `task.toml`, \
         `tests/test.sh`, `solution/solve.sh`), for `harbor run -p harbor` (Harbor 0.25) with any agent: the \
         verifier applies the test patch, runs the row's rebuild and test commands, reads the output with the \
         row's `log_parser` and writes reward 1 when every FAIL_TO_PASS and PASS_TO_PASS test passes, else 0; \
         the `oracle` agent applies the gold patch. Each task names the row's image as `docker_image`, which must \
         be on the engine or pullable. `kiln push --harbor` publishes them with the release.\n",
        tasks.tasks.len()
    );
    if !tasks.left_out.is_empty() {
        text.push_str("\nRows that are not Harbor tasks:\n\n");
        for (id, reason) in &tasks.left_out {
            let _ = writeln!(text, "- `{id}`: {reason}");
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use kiln_schema::{BuiltBy, InstanceId, ReleaseInstance};

    use super::*;

    fn row(id: &str) -> ReleaseInstance {
        ReleaseInstance {
            repo: "owner/repo".into(),
            pull_number: Some("7".into()),
            base_commit: "0123456789abcdef".into(),
            patch: "diff --git a/x b/x\n".into(),
            test_patch: "diff --git a/tests/t.py b/tests/t.py\n--- a/tests/t.py\n+++ b/tests/t.py\n@@ -1 +1 @@\n-a\n+b\n".into(),
            problem_statement: "Fix \"it\" — 'now'\r\nEOF\r\n$HOME `x` ünï ✓\n".into(),
            hints_text: "try `git log`\n".into(),
            created_at: "2024-09-01T00:00:00Z".into(),
            version: Some("1.2".into()),
            license: "MIT".into(),
            FAIL_TO_PASS: vec!["tests/t.py::test_a[x y]".to_string()].into(),
            PASS_TO_PASS: vec!["tests/t.py::test_b".to_string(), "tests/t.py::test_c".to_string()].into(),
            image: "kiln-env/demo:owner__repo-7".into(),
            image_digest: Some("sha256:abc".into()),
            test_cmds: vec!["pytest -rA tests".into()],
            parser: "pytest".into(),
            log_parser: "parse_log_pytest_v2".into(),
            language: "python".into(),
            platform: "linux".into(),
            validate_seconds: 42.0,
            repeats: 3,
            identical_runs_before: 3,
            identical_runs_after: 2,
            solution_leak: true,
            solution_leak_matches: vec!["return a / b".into()],
            difficulty: Some(kiln_schema::Difficulty::Medium),
            filter_judge: Some("heuristic".into()),
            filter_label: Some("ok".into()),
            filter_reason: Some("reports a defect".into()),
            run_id: "20240901-000000".into(),
            ..ReleaseInstance::new(InstanceId::new(id).unwrap())
        }
    }

    const RELEASE: Release<'static> = Release {
        dataset: "demo",
        tag: "2024-09",
        hints: false,
    };

    #[test]
    fn task_toml_carries_kiln_facts_in_harbor_schema() {
        let facts = Facts {
            built_by: Some(BuiltBy::Repair),
            test_seconds: Some(12.5),
        };
        let text = task_toml(&row("owner__repo-7"), Some(&facts), &RELEASE).unwrap();
        let doc: toml::Table = text.parse().unwrap();
        assert_eq!(doc["schema_version"].as_str(), Some("1.4"));
        let meta = doc["metadata"].as_table().unwrap();
        assert_eq!(meta["repository"].as_str(), Some("owner/repo"));
        assert_eq!(meta["base_commit"].as_str(), Some("0123456789abcdef"));
        assert_eq!(meta["language"].as_str(), Some("python"));
        assert_eq!(meta["license"].as_str(), Some("MIT"));
        assert_eq!(meta["version"].as_str(), Some("1.2"));
        assert_eq!(meta["fail_to_pass_count"].as_integer(), Some(1));
        assert_eq!(meta["pass_to_pass_count"].as_integer(), Some(2));
        assert_eq!(meta["built_by"].as_str(), Some("repair"));
        assert_eq!(meta["image_digest"].as_str(), Some("sha256:abc"));
        assert_eq!(meta["test_seconds"].as_float(), Some(12.5));
        assert_eq!(meta["repeats"].as_integer(), Some(3));
        assert_eq!(meta["identical_runs_before"].as_integer(), Some(3));
        assert_eq!(meta["identical_runs_after"].as_integer(), Some(2));
        assert_eq!(meta["solution_leak"].as_bool(), Some(true));
        assert_eq!(
            meta["solution_leak_matches"].as_array().map(Vec::len),
            Some(1)
        );
        assert_eq!(meta["difficulty"].as_str(), Some("medium"));
        assert_eq!(meta["filter_judge"].as_str(), Some("heuristic"));
        assert_eq!(meta["filter_label"].as_str(), Some("ok"));
        assert_eq!(meta["filter_flags"].as_array().map(Vec::len), Some(0));
        // 600 + 10 × 12.5 = 725 s, in whole minutes; the agent gets its hour.
        assert_eq!(doc["verifier"]["timeout_sec"].as_float(), Some(780.0));
        assert_eq!(doc["agent"]["timeout_sec"].as_float(), Some(3600.0));
        assert_eq!(
            doc["environment"]["docker_image"].as_str(),
            Some("kiln-env/demo:owner__repo-7")
        );
        // Nothing Harbor would read as a network policy or a build: those break offline runs.
        assert!(
            !text.contains("network") && !text.contains("allow_internet"),
            "{text}"
        );
        // Without the runs, the whole validation's time stands in, and built_by is left out.
        let text = task_toml(&row("owner__repo-7"), None, &RELEASE).unwrap();
        let doc: toml::Table = text.parse().unwrap();
        assert_eq!(doc["verifier"]["timeout_sec"].as_float(), Some(1020.0));
        assert!(doc["metadata"].get("built_by").is_none(), "{text}");
        // A row no filter judged has no verdict to carry.
        let unjudged = ReleaseInstance {
            filter_judge: None,
            filter_label: None,
            filter_reason: None,
            ..row("owner__repo-7")
        };
        let text = task_toml(&unjudged, None, &RELEASE).unwrap();
        assert!(!text.contains("filter_judge"), "{text}");
    }

    /// The measured test time is the longest gold run's, not a run without the fix (which may
    /// stop early) nor the sum of the runs.
    #[test]
    fn the_test_time_is_the_longest_gold_run() {
        let mut validation = kiln_schema::ValidationRecord::new(InstanceId::new("a__b-1").unwrap());
        let run = |seconds: &str| BTreeMap::from([("seconds".to_string(), seconds.to_string())]);
        assert_eq!(gold_run_seconds(&validation), None);
        validation.runs = BTreeMap::from([
            ("before:1".to_string(), run("90.00")),
            ("after:1".to_string(), run("2.50")),
            ("after:2".to_string(), run("3.25")),
            (
                "after:3".to_string(),
                BTreeMap::from([("build".to_string(), "failed: x".to_string())]),
            ),
        ]);
        assert_eq!(gold_run_seconds(&validation), Some(3.25));
    }

    #[test]
    fn timeouts_grow_with_the_measured_test_time() {
        let quick = Timeouts::from_test_seconds(1.0);
        assert_eq!((quick.verifier, quick.agent), (660.0, 3600.0));
        let slow = Timeouts::from_test_seconds(600.0);
        assert_eq!((slow.verifier, slow.agent), (6600.0, 18000.0));
        assert_eq!(Timeouts::from_test_seconds(f64::NAN).verifier, 600.0);
    }

    #[test]
    fn the_instruction_is_the_statement_exactly_and_hints_only_when_asked() {
        let row = row("owner__repo-7");
        assert_eq!(instruction(&row, false), row.problem_statement);
        let with_hints = instruction(&row, true);
        assert!(with_hints.starts_with(&row.problem_statement));
        assert!(
            with_hints.ends_with("\n## Hints\n\ntry `git log`\n"),
            "{with_hints}"
        );
    }

    /// Every row becomes a task directory with its files (scripts executable), an instance in
    /// two splits once, and a row no verifier can grade is left out with its reason.
    #[test]
    fn tasks_are_written_once_per_instance_and_unfit_rows_are_left_out() {
        let tmp = tempfile::tempdir().unwrap();
        let unreadable = ReleaseInstance {
            log_parser: String::new(),
            harness_note: "no SWE-bench parser reads kiln's `ctest` output".into(),
            ..row("owner__repo-8")
        };
        let split_rows = vec![
            ("test".to_string(), vec![row("owner__repo-7"), unreadable]),
            ("lite".to_string(), vec![row("owner__repo-7")]),
        ];
        let tasks = write_tasks(tmp.path(), &split_rows, &BTreeMap::new(), &RELEASE).unwrap();
        assert_eq!(tasks.tasks, ["owner__repo-7"]);
        assert!(
            tasks.left_out["owner__repo-8"].contains("no SWE-bench harness parser"),
            "{:?}",
            tasks.left_out
        );
        let dir = tmp.path().join("harbor/owner__repo-7");
        let mut written: Vec<String> = tasks
            .files
            .iter()
            .map(|f| {
                f.path
                    .trim_start_matches("harbor/owner__repo-7/")
                    .to_string()
            })
            .collect();
        written.sort();
        assert_eq!(
            written,
            [
                "instruction.md",
                "solution/gold.patch",
                "solution/solve.sh",
                "task.toml",
                "tests/FAIL_TO_PASS.txt",
                "tests/PASS_TO_PASS.txt",
                "tests/grade.awk",
                "tests/test.patch",
                "tests/test.sh",
            ]
        );
        assert!(!tmp.path().join("harbor/owner__repo-8").exists());
        let statement = std::fs::read(dir.join("instruction.md")).unwrap();
        assert_eq!(statement, row("owner__repo-7").problem_statement.as_bytes());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode =
                |p: &str| std::fs::metadata(dir.join(p)).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode("tests/test.sh"), 0o755);
            assert_eq!(mode("solution/solve.sh"), 0o755);
            assert_eq!(mode("task.toml"), 0o644);
        }
        let paragraph = card_paragraph(&tasks);
        assert!(
            paragraph.contains("\n1 row(s) are also Harbor tasks"),
            "{paragraph}"
        );
        assert!(
            paragraph.contains("- `owner__repo-8`: no SWE-bench harness parser"),
            "{paragraph}"
        );
    }
}
