//! The ecosystem fixtures (`write_ecosystems`): SWE-bench-shaped, deterministic, and their
//! expected lists are what the real tools report, read with kiln-testlog's parsers.
//!
//! `host_tools_confirm_ecosystem_lists` runs each fixture's tests on the host with the tool
//! that is installed (cargo always; go, cmake, node/npm and maven only where present: the
//! skipped ones are printed), with the test patch alone and with the gold patch too.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use kiln_schema::TestStatus;
use kiln_testkit::{DemoLayout, Expect, write_ecosystems};

use crate::{git, run, run_ok, string_list, tasks};

#[test]
fn ecosystems_are_deterministic_and_split_code_from_tests() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let layout = write_ecosystems(a.path()).unwrap();
    write_ecosystems(b.path()).unwrap();
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
            "kiln-eco__runlength-11",
            "kiln-eco__durations-12",
            "kiln-eco__semver-13",
            "kiln-eco__ringbuf-14",
            "kiln-eco__csvline-15",
        ]
    );
    let rows = tasks(&layout);
    assert_eq!(rows.len(), 5);
    for (row, expected) in rows.iter().zip(&layout.instances) {
        let id = expected.instance_id.as_str();
        assert_eq!(row["instance_id"], id);
        let repo = layout.repo_path(row["repo"].as_str().unwrap());
        let base = row["base_commit"].as_str().unwrap();
        assert_ne!(git(&repo, &["rev-parse", "HEAD"]).trim(), base, "{id}");
        git(&repo, &["merge-base", "--is-ancestor", base, "HEAD"]);
        let files = |patch: &str| -> Vec<String> {
            patch
                .lines()
                .filter_map(|l| l.strip_prefix("diff --git a/"))
                .filter_map(|l| l.split(' ').next())
                .map(str::to_string)
                .collect()
        };
        let code = files(row["patch"].as_str().unwrap());
        let test = files(row["test_patch"].as_str().unwrap());
        assert!(
            !code.is_empty() && !test.is_empty(),
            "{id}: {code:?} {test:?}"
        );
        for path in &code {
            assert!(!path.contains("test"), "{id}: code patch touches {path}");
        }
        for path in &test {
            assert!(path.contains("test"), "{id}: test patch touches {path}");
        }
        let Expect::Validated {
            fail_to_pass,
            pass_to_pass,
        } = &expected.expect
        else {
            panic!("{id}: every ecosystem fixture validates");
        };
        assert_eq!(&string_list(&row["FAIL_TO_PASS"]), fail_to_pass, "{id}");
        assert_eq!(&string_list(&row["PASS_TO_PASS"]), pass_to_pass, "{id}");
    }
    assert!(write_ecosystems(a.path()).is_err());
}

/// How to build and test one fixture on the host.
struct HostPlan {
    /// Programs that must be on `PATH`; the fixture is skipped without them.
    tools: &'static [&'static str],
    /// Run once on the base checkout (installs, configures).
    setup: &'static [&'static str],
    /// Run before every test run (rebuilds after the patches).
    rebuild: &'static [&'static str],
    /// The test command; its stdout and stderr are parsed together.
    test: &'static str,
    /// The kiln-testlog parser.
    parser: &'static str,
}

#[track_caller]
fn host_plan(instance_id: &str) -> HostPlan {
    match instance_id {
        "kiln-eco__runlength-11" => HostPlan {
            tools: &["cargo"],
            setup: &[],
            rebuild: &[],
            test: "cargo test --locked --no-fail-fast",
            parser: "cargo",
        },
        "kiln-eco__durations-12" => HostPlan {
            tools: &["node", "npm"],
            setup: &["npm ci --no-audit --no-fund"],
            rebuild: &[],
            test: "npx jest --json",
            parser: "jest-json",
        },
        "kiln-eco__semver-13" => HostPlan {
            tools: &["go"],
            setup: &[],
            rebuild: &[],
            test: "go test -json ./...",
            parser: "go-test-json",
        },
        "kiln-eco__ringbuf-14" => HostPlan {
            tools: &["cmake", "cc", "make"],
            setup: &["cmake -S . -B build"],
            rebuild: &["cmake --build build"],
            test: "cd build && ctest",
            parser: "ctest",
        },
        // Maven needs JUnit and its plugins without Maven Central: Debian's packaged repository
        // (/usr/share/maven-repo, from `maven-debian-helper`, `junit4`, `libsurefire-java`)
        // serves them offline.
        "kiln-eco__csvline-15" => HostPlan {
            tools: &["mvn", "javac"],
            setup: &[],
            rebuild: &[],
            test: "mvn -B -o -Dmaven.repo.local=/usr/share/maven-repo test",
            parser: "junit-xml",
        },
        other => panic!("no host plan for {other}"),
    }
}

/// The tests of a fixture that fail for want of a network.
fn expected_offline(instance_id: &str) -> Vec<String> {
    match instance_id {
        "kiln-eco__durations-12" => {
            vec!["test/units.test.js::units › fetches the published unit table".to_string()]
        }
        _ => Vec::new(),
    }
}

fn on_path(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool} >/dev/null 2>&1")])
        .status()
        .is_ok_and(|s| s.success())
}

/// `sh -c cmd` in `work`, with a scratch target dir and caches so nothing leaks between runs;
/// returns the combined output.
#[track_caller]
fn shell(work: &Path, scratch: &Path, cmd: &str) -> (bool, String) {
    let output = run(Command::new("sh")
        .current_dir(work)
        .args(["-c", &format!("{cmd} 2>&1")])
        // The outer `cargo test` exports its own target dir; the fixture builds in its own.
        .env("CARGO_TARGET_DIR", scratch.join("cargo-target"))
        .env("GOFLAGS", "-mod=mod")
        .env("GOPROXY", "off")
        .env("GOTOOLCHAIN", "local")
        .env("CI", "true"));
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

/// Surefire writes one XML report per test class; they are the junit-xml parser's input.
fn surefire_reports(work: &Path) -> String {
    let dir = work.join("target/surefire-reports");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .map(|d| d.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    names.retain(|p: &std::path::PathBuf| p.extension().is_some_and(|e| e == "xml"));
    names.sort();
    names
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect()
}

/// The statuses of a test run, and the tests that failed for want of a network.
#[track_caller]
fn statuses(
    plan: &HostPlan,
    work: &Path,
    scratch: &Path,
    id: &str,
) -> (BTreeMap<String, TestStatus>, BTreeSet<String>) {
    for cmd in plan.rebuild {
        let (ok, log) = shell(work, scratch, cmd);
        assert!(ok, "{id}: `{cmd}` failed:\n{log}");
    }
    let (_, log) = shell(work, scratch, plan.test);
    let log = if plan.parser == "junit-xml" {
        surefire_reports(work)
    } else {
        log
    };
    // jest reports absolute file paths, which kiln makes relative to its checkout at /testbed;
    // the host checkout stands in for /testbed (a temporary path would read as `<tmp>`).
    let log = log.replace(&format!("{}/", work.display()), "/testbed/");
    let parsed = kiln_testlog::parse(plan.parser, &log)
        .unwrap()
        .relative_to("/testbed");
    assert!(parsed.is_consistent(), "{id}: {:?}\n{log}", parsed.problems);
    assert!(!parsed.statuses.is_empty(), "{id}: nothing parsed:\n{log}");
    (parsed.statuses.into_iter().collect(), parsed.offline)
}

fn lists(
    before: &BTreeMap<String, TestStatus>,
    after: &BTreeMap<String, TestStatus>,
) -> (Vec<String>, Vec<String>, Vec<String>) {
    let passed = |s: &BTreeMap<String, TestStatus>, t: &str| s.get(t) == Some(&TestStatus::Pass);
    let f2p = after
        .keys()
        .filter(|t| passed(after, t) && !passed(before, t))
        .cloned()
        .collect();
    let p2p = after
        .keys()
        .filter(|t| passed(after, t) && passed(before, t))
        .cloned()
        .collect();
    let p2f = before
        .keys()
        .filter(|t| passed(before, t) && !passed(after, t))
        .cloned()
        .collect();
    (f2p, p2p, p2f)
}

#[track_caller]
fn apply(work: &Path, scratch: &Path, name: &str, patch: &str) {
    let file = scratch.join(name);
    std::fs::write(&file, patch).unwrap();
    git(work, &["apply", file.to_str().unwrap()]);
}

/// SLOW where the tools exist (cargo: seconds; npm ci: about 20 s with a reachable npm
/// registry): every expected list equals what the tool reports through kiln-testlog.
#[test]
fn host_tools_confirm_ecosystem_lists() {
    let dir = tempfile::tempdir().unwrap();
    let layout: DemoLayout = write_ecosystems(&dir.path().join("eco")).unwrap();
    let mut skipped = Vec::new();
    let mut checked = Vec::new();
    for (row, expected) in tasks(&layout).iter().zip(&layout.instances) {
        let id = expected.instance_id.as_str();
        let plan = host_plan(id);
        let missing: Vec<&str> = plan.tools.iter().copied().filter(|t| !on_path(t)).collect();
        if !missing.is_empty() {
            skipped.push(format!("{id} (no {})", missing.join(", ")));
            continue;
        }
        if id == "kiln-eco__csvline-15" && !Path::new("/usr/share/maven-repo/junit/junit").is_dir()
        {
            skipped.push(format!("{id} (no Debian maven-repo with junit4)"));
            continue;
        }
        let scratch = dir.path().join("scratch").join(id);
        std::fs::create_dir_all(&scratch).unwrap();
        let work = scratch.join("work");
        let repo = layout.repo_path(row["repo"].as_str().unwrap());
        run_ok(
            Command::new("git")
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .args(["clone", "-q"])
                .arg(&repo)
                .arg(&work),
        );
        git(
            &work,
            &["checkout", "-q", row["base_commit"].as_str().unwrap()],
        );
        for cmd in plan.setup {
            let (ok, log) = shell(&work, &scratch, cmd);
            assert!(ok, "{id}: `{cmd}` failed:\n{log}");
        }
        apply(
            &work,
            &scratch,
            "test.diff",
            row["test_patch"].as_str().unwrap(),
        );
        let (before, _) = statuses(&plan, &work, &scratch, id);
        apply(&work, &scratch, "gold.diff", row["patch"].as_str().unwrap());
        let (after, offline) = statuses(&plan, &work, &scratch, id);
        let (f2p, p2p, p2f) = lists(&before, &after);
        eprintln!("{id}: F2P {f2p:?}\n{id}: P2P {p2p:?}");
        assert!(p2f.is_empty(), "{id}: pass -> fail {p2f:?}");
        let Expect::Validated {
            fail_to_pass,
            pass_to_pass,
        } = &expected.expect
        else {
            panic!("{id}: every ecosystem fixture validates");
        };
        assert_eq!(&f2p, fail_to_pass, "{id}");
        assert_eq!(&p2p, pass_to_pass, "{id}");
        // Everything the test patch leaves failing is fixed by the gold patch, but for the
        // tests that need a network (the Node fixture has one: `.invalid` never resolves).
        assert!(
            after
                .iter()
                .all(|(test, s)| *s == TestStatus::Pass || offline.contains(test)),
            "{id}: {after:?} (offline: {offline:?})"
        );
        assert_eq!(
            offline.into_iter().collect::<Vec<_>>(),
            expected_offline(id),
            "{id}"
        );
        checked.push(id.to_string());
    }
    eprintln!("checked on the host: {checked:?}");
    eprintln!("skipped (tool not installed): {skipped:?}");
    assert!(
        checked.iter().any(|id| id == "kiln-eco__runlength-11"),
        "cargo is always there"
    );
}
