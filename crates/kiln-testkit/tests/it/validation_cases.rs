//! The validation cases are what they claim: their repositories and patches are well formed, and
//! real pytest runs on the host (python3 with `venv`, pytest from PyPI) give the outcomes that
//! `write_validation_cases` documents. About 15 s: one venv with pytest, the projects put on
//! `PYTHONPATH` rather than installed (their installs are the same as the demo's).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kiln_testkit::{DemoLayout, Expect, write_validation_cases};
use serde_json::Value;

#[track_caller]
fn run(cmd: &mut Command) -> Output {
    // A match, not `unwrap_or_else`: a panic in a closure would not point at the caller.
    match cmd.output() {
        Ok(output) => output,
        Err(e) => panic!("cannot run {cmd:?}: {e}"),
    }
}

fn text(output: &Output) -> String {
    format!(
        "exit {:?}\n{}\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[track_caller]
fn run_ok(cmd: &mut Command) -> String {
    let output = run(cmd);
    assert!(output.status.success(), "{cmd:?} failed: {}", text(&output));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn git_cmd(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1");
    cmd
}

#[track_caller]
fn git(dir: &Path, args: &[&str]) -> String {
    run_ok(git_cmd(dir).args(args))
}

fn tasks(layout: &DemoLayout) -> BTreeMap<String, Value> {
    std::fs::read_to_string(&layout.tasks_file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|v| (v["instance_id"].as_str().unwrap().to_string(), v))
        .collect()
}

#[test]
fn cases_are_deterministic_and_swe_bench_shaped() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let layout = write_validation_cases(a.path()).unwrap();
    write_validation_cases(b.path()).unwrap();
    assert_eq!(
        std::fs::read_to_string(&layout.tasks_file).unwrap(),
        std::fs::read_to_string(b.path().join("tasks.jsonl")).unwrap(),
        "same fixtures must give the same shas and patches"
    );
    let ids: Vec<&str> = layout
        .instances
        .iter()
        .map(|i| i.instance_id.as_str())
        .collect();
    assert_eq!(
        ids,
        [
            "kiln-vc__dice-11",
            "kiln-vc__units-12",
            "kiln-vc__strutil-13",
            "kiln-vc__inikit-14",
            "kiln-vc__colorkit-15",
        ]
    );
    let rows = tasks(&layout);
    for expected in &layout.instances {
        let row = &rows[&expected.instance_id];
        let repo = layout.repo_path(row["repo"].as_str().unwrap());
        let base = row["base_commit"].as_str().unwrap();
        git(&repo, &["merge-base", "--is-ancestor", base, "HEAD"]);
        assert_ne!(git(&repo, &["rev-parse", "HEAD"]).trim(), base);
        for (key, tests_only) in [("patch", false), ("test_patch", true)] {
            let patch = row[key].as_str().unwrap();
            assert!(patch.starts_with("diff --git a/"), "{patch}");
            for line in patch.lines().filter(|l| l.starts_with("diff --git")) {
                assert_eq!(
                    line.starts_with("diff --git a/tests/"),
                    tests_only,
                    "{}: {line}",
                    expected.instance_id
                );
            }
        }
    }
    assert!(write_validation_cases(a.path()).is_err());
}

/// Test statuses from the short summary of `pytest -rA` (ids holding no spaces, as in these
/// fixtures); collection errors, which name a file and no test, are left out.
fn parse_summary(log: &str) -> BTreeMap<String, String> {
    let mut statuses = BTreeMap::new();
    for line in log.lines() {
        let Some((status, rest)) = line.split_once(' ') else {
            continue;
        };
        if !["PASSED", "FAILED", "ERROR", "SKIPPED"].contains(&status) || !rest.contains("::") {
            continue;
        }
        let id = rest.split(' ').next().unwrap_or(rest);
        // A test reported twice (pytest's line, then a fake one) keeps its worst status.
        let entry = statuses.entry(id.to_string()).or_insert(status.to_string());
        if status != "PASSED" {
            *entry = status.to_string();
        }
    }
    statuses
}

struct Host {
    python: PathBuf,
    scratch: PathBuf,
}

struct Checkout<'h> {
    host: &'h Host,
    id: String,
    work: PathBuf,
    row: Value,
}

/// One pytest run: exit code, parsed statuses and the whole log.
struct PytestRun {
    code: Option<i32>,
    statuses: BTreeMap<String, String>,
    log: String,
}

impl Checkout<'_> {
    #[track_caller]
    fn new<'h>(host: &'h Host, layout: &DemoLayout, row: &Value) -> Checkout<'h> {
        let id = row["instance_id"].as_str().unwrap().to_string();
        let repo = layout.repo_path(row["repo"].as_str().unwrap());
        let work = host.scratch.join(&id);
        git(
            &host.scratch,
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
        Checkout {
            host,
            id,
            work,
            row: row.clone(),
        }
    }

    #[track_caller]
    fn patch_file(&self, key: &str) -> PathBuf {
        let file = self.host.scratch.join(format!("{}-{key}.diff", self.id));
        std::fs::write(&file, self.row[key].as_str().unwrap()).unwrap();
        file
    }

    #[track_caller]
    fn git_apply(&self, key: &str) {
        let file = self.patch_file(key);
        git(&self.work, &["apply", file.to_str().unwrap()]);
    }

    /// kiln's pytest command (`kiln-launch`'s `test_command`), plus `extra` arguments.
    #[track_caller]
    fn pytest(&self, extra: &[&str]) -> PytestRun {
        let output = run(Command::new(&self.host.python)
            .current_dir(&self.work)
            .env("PYTHONPATH", self.work.join("src"))
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .args([
                "-m",
                "pytest",
                "-rA",
                "--tb=short",
                "-p",
                "no:cacheprovider",
                "--color=no",
            ])
            .args(extra));
        let log = String::from_utf8_lossy(&output.stdout).into_owned();
        PytestRun {
            code: output.status.code(),
            statuses: parse_summary(&log),
            log,
        }
    }
}

fn passed(run: &PytestRun, test: &str) -> bool {
    run.statuses.get(test).is_some_and(|s| s == "PASSED")
}

/// FAIL_TO_PASS, PASS_TO_PASS and pass-to-fail of one run per side, leaving out `ignore`.
fn lists(
    before: &PytestRun,
    after: &PytestRun,
    ignore: &[&str],
) -> (Vec<String>, Vec<String>, Vec<String>) {
    let keep = |t: &&String| !ignore.contains(&t.as_str());
    let f2p = after
        .statuses
        .keys()
        .filter(keep)
        .filter(|t| passed(after, t) && !passed(before, t))
        .cloned()
        .collect();
    let p2p = after
        .statuses
        .keys()
        .filter(keep)
        .filter(|t| passed(after, t) && passed(before, t))
        .cloned()
        .collect();
    let p2f = before
        .statuses
        .keys()
        .filter(keep)
        .filter(|t| passed(before, t) && !passed(after, t))
        .cloned()
        .collect();
    (f2p, p2p, p2f)
}

#[track_caller]
fn expected_lists(layout: &DemoLayout, id: &str) -> (Vec<String>, Vec<String>) {
    match &layout.instance(id).unwrap().expect {
        Expect::Validated {
            fail_to_pass,
            pass_to_pass,
        } => (fail_to_pass.clone(), pass_to_pass.clone()),
        other => panic!("{id}: expected a validated case, got {other:?}"),
    }
}

#[track_caller]
fn rejected_class(layout: &DemoLayout, id: &str) -> &'static str {
    match &layout.instance(id).unwrap().expect {
        Expect::Rejected { failure_class } => failure_class,
        other => panic!("{id}: expected a rejected case, got {other:?}"),
    }
}

/// Runs every case with pytest on the host, one run per side, and checks the documented
/// outcome of each (the flaky case only for its non-flaky tests).
#[test]
fn host_pytest_confirms_the_cases() {
    let dir = tempfile::tempdir().unwrap();
    let layout = write_validation_cases(&dir.path().join("cases")).unwrap();
    let rows = tasks(&layout);
    let scratch = dir.path().join("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    let venv = dir.path().join("venv");
    run_ok(Command::new("python3").args(["-m", "venv"]).arg(&venv));
    let python = venv.join("bin").join("python");
    run_ok(Command::new(&python).args([
        "-m",
        "pip",
        "install",
        "-q",
        "--disable-pip-version-check",
        "pytest",
    ]));
    let host = Host { python, scratch };

    // 1. flaky: the fairness cases fail or error, never pass; the rest gives the lists.
    let id = "kiln-vc__dice-11";
    let c = Checkout::new(&host, &layout, &rows[id]);
    c.git_apply("test_patch");
    let before = c.pytest(&[]);
    c.git_apply("patch");
    let after = c.pytest(&[]);
    let fairness = [
        "tests/test_fairness.py::test_roll_is_fair[2]",
        "tests/test_fairness.py::test_roll_is_fair[4]",
        "tests/test_fairness.py::test_roll_is_fair[6]",
        "tests/test_fairness.py::test_roll_is_fair[8]",
        "tests/test_fairness.py::test_roll_is_fair[20]",
    ];
    for run in [&before, &after] {
        assert_eq!(run.code, Some(1), "{id}: {}", run.log);
        for test in fairness {
            let status = run.statuses.get(test).map(String::as_str);
            assert!(
                matches!(status, Some("FAILED" | "ERROR")),
                "{id} {test}: {status:?}\n{}",
                run.log
            );
        }
    }
    let (f2p, p2p, p2f) = lists(&before, &after, &fairness);
    assert_eq!((f2p, p2p), expected_lists(&layout, id), "{id}");
    assert!(p2f.is_empty(), "{id}: {p2f:?}");

    // 2. pass-to-fail: the fix breaks two formatting tests.
    let id = "kiln-vc__units-12";
    let c = Checkout::new(&host, &layout, &rows[id]);
    c.git_apply("test_patch");
    let before = c.pytest(&[]);
    c.git_apply("patch");
    let after = c.pytest(&[]);
    assert_eq!((before.code, after.code), (Some(1), Some(1)), "{id}");
    let (f2p, _, p2f) = lists(&before, &after, &[]);
    assert_eq!(f2p, ["tests/test_length.py::test_inches_to_centimetres"]);
    assert_eq!(
        p2f,
        [
            "tests/test_format.py::test_format_length",
            "tests/test_format.py::test_format_length_rounds",
        ]
    );
    assert_eq!(rejected_class(&layout, id), "pass-to-fail");

    // 3. fake pass: before is a consistent failing run; after exits 3 in the middle of the
    // run, with nothing failing in its log and no summary.
    let id = "kiln-vc__strutil-13";
    let c = Checkout::new(&host, &layout, &rows[id]);
    c.git_apply("test_patch");
    let before = c.pytest(&[]);
    assert_eq!(before.code, Some(1), "{id}: {}", before.log);
    assert_eq!(
        before
            .statuses
            .get("tests/test_case.py::test_title_case_collapses_whitespace")
            .map(String::as_str),
        Some("FAILED"),
        "{id}: {}",
        before.log
    );
    c.git_apply("patch");
    let after = c.pytest(&[]);
    assert_eq!(after.code, Some(3), "{id}: {}", after.log);
    assert!(
        after.statuses.values().all(|s| s == "PASSED"),
        "{id}: {}",
        after.log
    );
    assert!(
        !after.log.contains(" passed") && !after.log.contains(" failed"),
        "{id}: the run ends before its summary\n{}",
        after.log
    );
    assert_eq!(rejected_class(&layout, id), "invalid-run");

    // 4. fuzz: neither git apply nor a 3-way merge takes the gold patch, patch --fuzz=5 does,
    // and the result is exactly the fixed file.
    let id = "kiln-vc__inikit-14";
    let c = Checkout::new(&host, &layout, &rows[id]);
    c.git_apply("test_patch");
    let before = c.pytest(&[]);
    let gold = c.patch_file("patch");
    let gold = gold.to_str().unwrap();
    let plain = run(git_cmd(&c.work).args(["apply", gold]));
    assert!(!plain.status.success(), "{id}: git apply took it");
    let three_way = run(git_cmd(&c.work).args(["apply", "--3way", gold]));
    assert!(
        !three_way.status.success(),
        "{id}: git apply --3way took it"
    );
    assert!(
        String::from_utf8_lossy(&three_way.stderr).contains("lacks the necessary blob"),
        "{id}: {}",
        text(&three_way)
    );
    // The tree is untouched by both failures; `patch` applies with fuzz, as kiln calls it.
    assert_eq!(git(&c.work, &["status", "--porcelain", "--", "src"]), "");
    let fuzzed = run_ok(Command::new("patch").current_dir(&c.work).args([
        "--batch",
        "--forward",
        "--fuzz=5",
        "-p1",
        "-i",
        gold,
    ]));
    assert!(fuzzed.contains("with fuzz 1"), "{id}: {fuzzed}");
    assert!(fuzzed.contains("offset -3 lines"), "{id}: {fuzzed}");
    let fixed = git(&c.work, &["show", "main:src/inikit/parser.py"]);
    assert_eq!(
        std::fs::read_to_string(c.work.join("src/inikit/parser.py")).unwrap(),
        fixed,
        "{id}"
    );
    let after = c.pytest(&[]);
    let (f2p, p2p, p2f) = lists(&before, &after, &[]);
    assert_eq!((f2p, p2p), expected_lists(&layout, id), "{id}");
    assert!(p2f.is_empty(), "{id}: {p2f:?}");

    // 5. n2p: the new module errors at collection before the fix. With kiln's command pytest
    // then stops the whole session; past the error, the older tests pass and the new module's
    // tests are absent.
    let id = "kiln-vc__colorkit-15";
    let c = Checkout::new(&host, &layout, &rows[id]);
    c.git_apply("test_patch");
    let interrupted = c.pytest(&[]);
    assert_eq!(interrupted.code, Some(2), "{id}: {}", interrupted.log);
    assert!(
        interrupted.log.contains("ERROR tests/test_rgb_to_hex.py")
            && interrupted
                .log
                .contains("Interrupted: 1 error during collection"),
        "{id}: {}",
        interrupted.log
    );
    assert!(interrupted.statuses.is_empty(), "{id}: {}", interrupted.log);
    let before = c.pytest(&["--continue-on-collection-errors"]);
    assert_eq!(before.code, Some(1), "{id}: {}", before.log);
    c.git_apply("patch");
    let after = c.pytest(&[]);
    assert_eq!(after.code, Some(0), "{id}: {}", after.log);
    let (f2p, p2p, p2f) = lists(&before, &after, &[]);
    for test in &f2p {
        assert!(
            !before.statuses.contains_key(test),
            "{id}: {test} ran before"
        );
    }
    assert_eq!((f2p, p2p), expected_lists(&layout, id), "{id}");
    assert!(p2f.is_empty(), "{id}: {p2f:?}");
}
