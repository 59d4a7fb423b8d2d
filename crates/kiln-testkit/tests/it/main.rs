//! Integration tests of kiln-testkit: the demo repositories and task files are what they claim.
//!
//! `host_python_confirms_expected_test_lists` is the slow one (about 30 s, needs `python3` with
//! `venv` and `pip`, and PyPI): it checks every expectation of the demo against real pytest runs.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a panic is how a test fails"
)]

mod ecosystems;
mod fake_lm;
mod hub;
mod validation_cases;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kiln_testkit::{DemoLayout, Expect, write_demo, write_tasks_with_errors};
use serde_json::Value;

#[track_caller]
fn run(cmd: &mut Command) -> Output {
    // A match, not `unwrap_or_else`: a panic in a closure would not point at the caller.
    match cmd.output() {
        Ok(output) => output,
        Err(e) => panic!("cannot run {cmd:?}: {e}"),
    }
}

#[track_caller]
fn run_ok(cmd: &mut Command) -> String {
    let output = run(cmd);
    assert!(
        output.status.success(),
        "{cmd:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[track_caller]
fn git(dir: &Path, args: &[&str]) -> String {
    run_ok(
        Command::new("git")
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .args(args),
    )
}

fn tasks(layout: &DemoLayout) -> Vec<Value> {
    std::fs::read_to_string(&layout.tasks_file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn string_list(value: &Value) -> Vec<String> {
    serde_json::from_str(value.as_str().unwrap()).unwrap()
}

#[test]
fn demo_is_deterministic_and_swe_bench_shaped() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let layout = write_demo(a.path()).unwrap();
    write_demo(b.path()).unwrap();
    let text_a = std::fs::read_to_string(&layout.tasks_file).unwrap();
    let text_b = std::fs::read_to_string(b.path().join("tasks.jsonl")).unwrap();
    assert_eq!(
        text_a, text_b,
        "same fixtures must give the same shas and patches"
    );

    let ids: Vec<_> = layout
        .instances
        .iter()
        .map(|i| i.instance_id.as_str())
        .collect();
    assert_eq!(
        ids,
        [
            "kiln-demo__calc-2",
            "kiln-demo__textwrap2-3",
            "kiln-demo__badgold-4",
            "kiln-demo__broken-5"
        ]
    );
    let rows = tasks(&layout);
    assert_eq!(rows.len(), layout.instances.len());
    for (row, expected) in rows.iter().zip(&layout.instances) {
        assert_eq!(row["instance_id"], expected.instance_id.as_str());
        let repo = layout.repo_path(row["repo"].as_str().unwrap());
        let base = row["base_commit"].as_str().unwrap();
        assert_eq!(base.len(), 40);
        assert!(row["created_at"].as_str().unwrap().starts_with("2024-"));
        // Only main is left, the base commit is an ancestor of it but not its tip, and the
        // fix is reachable from main (merged), as in a real repository.
        assert_eq!(
            git(&repo, &["branch", "--format=%(refname)"]).trim(),
            "refs/heads/main"
        );
        let head = git(&repo, &["rev-parse", "HEAD"]);
        assert_ne!(head.trim(), base);
        git(&repo, &["merge-base", "--is-ancestor", base, "HEAD"]);
        assert!(
            git(&repo, &["log", "--format=%s", "-1", "HEAD^"]).starts_with("Merge pull request")
        );
        // The patches are git diffs that split code from tests.
        let patch = row["patch"].as_str().unwrap();
        let test_patch = row["test_patch"].as_str().unwrap();
        assert!(patch.starts_with("diff --git a/"), "{patch}");
        assert!(
            test_patch.starts_with("diff --git a/tests/"),
            "{test_patch}"
        );
        for line in patch.lines().filter(|l| l.starts_with("diff --git")) {
            assert!(!line.contains("/tests/"), "{line}");
        }
        for line in test_patch.lines().filter(|l| l.starts_with("diff --git")) {
            assert!(line.starts_with("diff --git a/tests/"), "{line}");
        }
        // Both apply to the base commit, test patch first.
        let work = a.path().join("apply").join(&expected.instance_id);
        git(
            a.path(),
            &[
                "clone",
                "-q",
                repo.to_str().unwrap(),
                work.to_str().unwrap(),
            ],
        );
        git(&work, &["checkout", "-q", base]);
        for (name, text) in [("test.diff", test_patch), ("gold.diff", patch)] {
            let file = a.path().join(format!("{}-{name}", expected.instance_id));
            std::fs::write(&file, text).unwrap();
            git(&work, &["apply", file.to_str().unwrap()]);
        }
    }
    // A second write into the same directory is refused rather than mixing two demos.
    assert!(write_demo(a.path()).is_err());
}

#[test]
fn tasks_with_errors_has_two_bad_lines() {
    let dir = tempfile::tempdir().unwrap();
    let layout = write_demo(dir.path()).unwrap();
    let errors = write_tasks_with_errors(&layout).unwrap();
    let text = std::fs::read_to_string(&errors.path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5);
    assert_eq!(
        errors.valid_instance_ids,
        ["kiln-demo__calc-2", "kiln-demo__textwrap2-3"]
    );
    assert!(serde_json::from_str::<Value>(lines[1]).is_err());
    let no_base: Value = serde_json::from_str(lines[2]).unwrap();
    assert_eq!(no_base["instance_id"], "kiln-demo__calc-99");
    assert!(no_base.get("base_commit").is_none());
    assert!(lines[3].is_empty());
    let bad: Vec<_> = errors
        .invalid_lines
        .iter()
        .map(|l| (l.line, l.instance_id.as_str()))
        .collect();
    assert_eq!(bad, [(2, "invalid-line-2"), (3, "kiln-demo__calc-99")]);
}

/// Test statuses from the short summary of `pytest -rA`.
fn parse_pytest_summary(log: &str) -> BTreeMap<String, String> {
    let mut statuses = BTreeMap::new();
    for line in log.lines() {
        let Some((status, rest)) = line.split_once(' ') else {
            continue;
        };
        if !["PASSED", "FAILED", "ERROR", "XFAIL", "XPASS"].contains(&status)
            || !rest.contains("::")
        {
            continue;
        }
        // `path::name` holds no space; parameters in brackets may hold anything, " - " too.
        let space = rest.find(' ').unwrap_or(rest.len());
        let id = match rest.find('[') {
            Some(open) if open < space => {
                match_bracket(rest, open).map_or(rest, |end| &rest[..=end])
            }
            _ => &rest[..space],
        };
        statuses.insert(id.to_string(), status.to_string());
    }
    statuses
}

fn match_bracket(text: &str, open: usize) -> Option<usize> {
    let mut depth = 0;
    for (i, c) in text[open..].char_indices() {
        match c {
            '[' => depth += 1,
            ']' => {
                depth -= 1;
                if depth == 0 {
                    return Some(open + i);
                }
            }
            _ => {}
        }
    }
    None
}

struct Checkout {
    work: PathBuf,
    python: PathBuf,
}

#[track_caller]
fn checkout(layout: &DemoLayout, scratch: &Path, row: &Value) -> Checkout {
    let id = row["instance_id"].as_str().unwrap();
    let repo = layout.repo_path(row["repo"].as_str().unwrap());
    let work = scratch.join("work").join(id);
    git(
        scratch,
        &[
            "clone",
            "-q",
            repo.to_str().unwrap(),
            work.to_str().unwrap(),
        ],
    );
    git(
        &work,
        &["checkout", "-q", row["base_commit"].as_str().unwrap()],
    );
    let venv = scratch.join("venv").join(id);
    run_ok(Command::new("python3").args(["-m", "venv"]).arg(&venv));
    Checkout {
        work,
        python: venv.join("bin").join("python"),
    }
}

fn pip_install(c: &Checkout) -> Output {
    let mut cmd = Command::new(&c.python);
    cmd.current_dir(&c.work)
        .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"]);
    // The fixtures declare test tools either as a `test` extra or in requirements-dev.txt.
    if c.work.join("requirements-dev.txt").exists() {
        cmd.args(["-e", ".", "-r", "requirements-dev.txt"]);
    } else {
        cmd.args(["-e", ".[test]"]);
    }
    run(&mut cmd)
}

#[track_caller]
fn apply(c: &Checkout, scratch: &Path, name: &str, patch: &str) {
    let file = scratch.join(name);
    std::fs::write(&file, patch).unwrap();
    git(&c.work, &["apply", file.to_str().unwrap()]);
}

#[track_caller]
fn pytest(c: &Checkout) -> BTreeMap<String, String> {
    let output = run(Command::new(&c.python).current_dir(&c.work).args([
        "-m",
        "pytest",
        "-rA",
        "-p",
        "no:cacheprovider",
    ]));
    let log = String::from_utf8_lossy(&output.stdout).into_owned();
    let statuses = parse_pytest_summary(&log);
    // The parsed ids must be exactly the collected ones, or the parser above is wrong.
    let collected = run_ok(Command::new(&c.python).current_dir(&c.work).args([
        "-m",
        "pytest",
        "--collect-only",
        "-q",
        "-p",
        "no:cacheprovider",
    ]));
    let collected: BTreeSet<&str> = collected.lines().filter(|l| l.contains("::")).collect();
    let parsed: BTreeSet<&str> = statuses.keys().map(String::as_str).collect();
    assert_eq!(parsed, collected, "pytest log:\n{log}");
    statuses
}

/// SLOW (about 30 s): builds a venv per fixture on the host, runs pytest -rA with the test patch
/// alone and with the gold patch too, and checks every expectation of the demo against it.
#[test]
fn host_python_confirms_expected_test_lists() {
    let dir = tempfile::tempdir().unwrap();
    let layout = write_demo(&dir.path().join("demo")).unwrap();
    for (row, expected) in tasks(&layout).iter().zip(&layout.instances) {
        let id = expected.instance_id.as_str();
        let scratch = dir.path().join("scratch").join(id);
        std::fs::create_dir_all(&scratch).unwrap();
        let c = checkout(&layout, &scratch, row);
        let install = pip_install(&c);
        if let Expect::LaunchFailed { failure_class } = &expected.expect {
            assert_eq!(*failure_class, "dependency-resolution");
            let stderr = String::from_utf8_lossy(&install.stderr);
            assert!(!install.status.success(), "{id}: install should fail");
            assert!(
                stderr.contains(
                    "No matching distribution found for kiln-nonexistent-dependency-0xdead"
                ),
                "{id}: {stderr}"
            );
            continue;
        }
        assert!(
            install.status.success(),
            "{id}: install failed: {}",
            String::from_utf8_lossy(&install.stderr)
        );
        apply(
            &c,
            &scratch,
            "test.diff",
            row["test_patch"].as_str().unwrap(),
        );
        let before = pytest(&c);
        apply(&c, &scratch, "gold.diff", row["patch"].as_str().unwrap());
        let after = pytest(&c);

        let passed =
            |s: &BTreeMap<String, String>, t: &str| s.get(t).is_some_and(|v| v == "PASSED");
        let f2p: Vec<String> = after
            .keys()
            .filter(|t| passed(&after, t) && !passed(&before, t))
            .cloned()
            .collect();
        let p2p: Vec<String> = after
            .keys()
            .filter(|t| passed(&after, t) && passed(&before, t))
            .cloned()
            .collect();
        let pass_to_fail: Vec<&String> = before
            .keys()
            .filter(|t| passed(&before, t) && !passed(&after, t))
            .collect();
        assert!(pass_to_fail.is_empty(), "{id}: {pass_to_fail:?}");
        eprintln!("{id}: F2P {f2p:?}\n{id}: P2P {p2p:?}");
        match &expected.expect {
            Expect::Validated {
                fail_to_pass,
                pass_to_pass,
            } => {
                assert_eq!(&f2p, fail_to_pass, "{id}");
                assert_eq!(&p2p, pass_to_pass, "{id}");
                assert!(fail_to_pass.len() >= 3 || id != "kiln-demo__calc-2");
                // The task file states the same lists.
                assert_eq!(&string_list(&row["FAIL_TO_PASS"]), fail_to_pass, "{id}");
                assert_eq!(&string_list(&row["PASS_TO_PASS"]), pass_to_pass, "{id}");
            }
            Expect::Rejected { failure_class } => {
                assert_eq!(*failure_class, "no-fail-to-pass");
                assert!(f2p.is_empty(), "{id}: {f2p:?}");
                // The claimed test exists and fails on both sides: the gold patch is wrong.
                for test in string_list(&row["FAIL_TO_PASS"]) {
                    assert_eq!(
                        before.get(&test).map(String::as_str),
                        Some("FAILED"),
                        "{id} {test}"
                    );
                    assert_eq!(
                        after.get(&test).map(String::as_str),
                        Some("FAILED"),
                        "{id} {test}"
                    );
                }
                assert_eq!(string_list(&row["PASS_TO_PASS"]), p2p, "{id}");
            }
            Expect::LaunchFailed { .. } | Expect::ValidateFailed { .. } => unreachable!(),
        }
    }
}
