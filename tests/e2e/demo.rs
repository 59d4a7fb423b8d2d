//! `kiln demo` on the real engine: every fixture ends exactly as it must.

use std::collections::BTreeMap;

use kiln_schema::{Difficulty, ReleaseInstance};

use crate::{containers_with_label, kiln, run, tempdir, text};

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_string()).collect()
}

/// The lists every validated fixture must produce, written out here (not taken from
/// kiln-testkit) so that a wrong fixture expectation cannot confirm itself. They were checked
/// by running pytest on the host (kiln-testkit's own integration test).
pub(crate) fn expected_lists() -> BTreeMap<&'static str, (Vec<String>, Vec<String>)> {
    BTreeMap::from([
        (
            "kiln-demo__calc-2",
            (
                strings(&[
                    "tests/test_ops.py::test_divide",
                    "tests/test_parser.py::test_parse[16 / 4 / 2-2.0]",
                    "tests/test_parser.py::test_parse[2 - 3 - 4--5]",
                    "tests/test_stats.py::test_mean_empty_raises",
                ]),
                strings(&[
                    "tests/test_ops.py::test_add",
                    "tests/test_ops.py::test_divide_by_zero",
                    "tests/test_ops.py::test_multiply",
                    "tests/test_ops.py::test_subtract",
                    "tests/test_parser.py::test_parse[(1 + 2) * 3-9]",
                    "tests/test_parser.py::test_parse[1 + 2-3]",
                    "tests/test_parser.py::test_parse[2 * 3 + 4-10]",
                    "tests/test_parser.py::test_parse[8 / 2-4]",
                    "tests/test_parser.py::test_parse_rejects_garbage",
                    "tests/test_stats.py::test_mean",
                ]),
            ),
        ),
        (
            "kiln-demo__textwrap2-3",
            (
                strings(&[
                    "tests/test_wrapper.py::test_exact_fit",
                    "tests/test_wrapper.py::test_width_must_be_positive[-3]",
                    "tests/test_wrapper.py::test_width_must_be_positive[0]",
                ]),
                strings(&[
                    "tests/test_wrap.py::test_wrap_long_text",
                    "tests/test_wrap.py::test_wrap_short",
                    "tests/test_wrapper.py::test_evolve_keeps_indent",
                    "tests/test_wrapper.py::test_fill_with_indent",
                ]),
            ),
        ),
    ])
}

/// Every instance of a `kiln --json demo` report ended as its fixture must: the two that
/// validate with exactly their lists, badgold rejected, broken failing to launch.
pub(crate) fn check_instances(report: &serde_json::Value) {
    let instances = report["instances"].as_array().cloned().unwrap_or_default();
    assert_eq!(instances.len(), 4, "{report:#}");
    let by_id: BTreeMap<String, serde_json::Value> = instances
        .into_iter()
        .map(|i| {
            (
                i["instance_id"].as_str().unwrap_or_default().to_string(),
                i["summary"].clone(),
            )
        })
        .collect();
    for (id, (fail_to_pass, pass_to_pass)) in expected_lists() {
        let summary = &by_id[id];
        assert_eq!(summary["state"], "validated", "{id}: {summary:#}");
        let list = |key: &str| -> Vec<String> {
            serde_json::from_value(summary[key].clone()).unwrap_or_default()
        };
        assert_eq!(list("fail_to_pass"), fail_to_pass, "{id}");
        assert_eq!(list("pass_to_pass"), pass_to_pass, "{id}");
    }
    let badgold = &by_id["kiln-demo__badgold-4"];
    assert_eq!(badgold["state"], "rejected", "{badgold:#}");
    assert_eq!(badgold["failure_class"], "no-fail-to-pass");
    let broken = &by_id["kiln-demo__broken-5"];
    assert_eq!(broken["state"], "launch-failed", "{broken:#}");
    assert_eq!(broken["failure_class"], "dependency-resolution");
    assert!(
        broken["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("uv pip install"),
        "the deciding command is named: {broken:#}"
    );
}

#[test]
fn demo_validates_the_fixtures_exactly_and_leaves_no_container() {
    let _demo = crate::demo_lock();
    let tmp = tempdir();
    let dir = tmp.path().join("demo");
    let mut command = kiln();
    command.args(["--json", "demo", "--dir"]).arg(&dir);
    let output = run(&mut command);
    assert!(output.status.success(), "{}", text(&output));
    let report: serde_json::Value =
        serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{e}\n{}", text(&output)));

    check_instances(&report);

    // The release holds exactly the validated instances, readable as Parquet.
    let tag = crate::release_dir(&dir, "demo");
    // A crawl of one calendar month publishes that month.
    assert!(tag.ends_with("2024-09"), "{}", tag.display());
    // The demo names the release it wrote, not the folder of releases.
    assert_eq!(
        std::path::Path::new(report["release_dir"].as_str().unwrap_or_default()),
        tag.as_path()
    );
    let shard = tag.join("data/test-00000-of-00001.parquet");
    let rows: Vec<ReleaseInstance> = kiln_store::read_parquet(&shard).unwrap();
    let ids: Vec<&str> = rows.iter().map(|r| r.instance_id.as_str()).collect();
    assert_eq!(ids, ["kiln-demo__calc-2", "kiln-demo__textwrap2-3"]);
    for row in &rows {
        let (fail_to_pass, pass_to_pass) = &expected_lists()[row.instance_id.as_str()];
        assert_eq!(&row.FAIL_TO_PASS, fail_to_pass);
        assert_eq!(&row.PASS_TO_PASS, pass_to_pass);
        assert!(row.image.starts_with("kiln-env/demo"), "{}", row.image);
        assert_eq!(row.parser, "pytest");
        // calc-2's parametrised ids hold spaces and ` - `: only v2 keeps them whole.
        assert_eq!(row.log_parser, "parse_log_pytest_v2", "{}", row.instance_id);
        assert_eq!(row.harness_note, "", "{}", row.instance_id);
        assert_eq!(row.eval_type, "pass_and_fail");
        // The quality signals: the fixtures' tests repeat exactly, their issues describe the
        // bugs without the fix's code, and the heuristic filter kept them.
        assert_eq!(
            (
                row.repeats,
                row.identical_runs_before,
                row.identical_runs_after
            ),
            (3, 3, 3),
            "{}",
            row.instance_id
        );
        assert!(
            !row.solution_leak && row.solution_leak_matches.is_empty(),
            "{}: {:?}",
            row.instance_id,
            row.solution_leak_matches
        );
        assert_eq!(row.filter_judge.as_deref(), Some("heuristic"));
        assert_eq!(row.filter_label.as_deref(), Some("ok"));
    }
    // calc-2 fixes three bugs in four functions of three files; textwrap2-3 one condition and
    // one field of one class.
    let bands: Vec<(&str, Option<Difficulty>)> = rows
        .iter()
        .map(|r| (r.instance_id.as_str(), r.difficulty))
        .collect();
    assert_eq!(
        bands,
        [
            ("kiln-demo__calc-2", Some(Difficulty::Hard)),
            ("kiln-demo__textwrap2-3", Some(Difficulty::Medium))
        ],
        "{:?}",
        rows.iter()
            .map(|r| &r.difficulty_measures)
            .collect::<Vec<_>>()
    );
    let card = std::fs::read_to_string(tag.join("README.md")).unwrap();
    assert!(
        card.contains("2 of 2 rows are evaluable unchanged by the official SWE-bench harness"),
        "{card}"
    );
    for line in [
        "## Quality signals",
        "| `identical_runs_before`, `identical_runs_after` (of `repeats`) | before 3/3, after 3/3: 2 |",
        "| `solution_leak` (`solution_leak_matches`) | none: 2 |",
        "| `difficulty` (`difficulty_measures`) | hard: 1, medium: 1, easy: 0 |",
        "| `filter_judge` (`filter_label`, `filter_reason`) | heuristic (ok): 2 |",
    ] {
        assert!(card.contains(line), "{line}\n{card}");
    }

    // The official SWE-bench harness (swebench 5.0.2 from PyPI) evaluates the release unchanged:
    // gold patches resolve both rows, a no-op and empty patches resolve none; `datasets` and
    // pandas read the card's counts, and every column of SWE-bench's rows has its type.
    crate::swebench_check(
        &tag,
        &tmp.path().join("swebench"),
        &[
            "gold resolves 2 of 2",
            "a no-op patch resolves 0 of 2 (2 completed)",
            "empty patches resolve 0 of 2",
            "datasets loads 2 rows, the card says 2",
            // Column by column against `swebench.types.SWEbenchInstance` (the published row shape).
            "column FAIL_TO_PASS is string, SWE-bench's is string",
            "column environment_setup_commit is string, SWE-bench's is string",
            "column image is string, SWE-bench's is string",
            "every row's test lists decode, version and license are filled",
        ],
    );

    // An export never drops rows of its release unless told to: a run that lost instances to
    // an outage must not shrink what users downloaded, and a later run of the month adds to
    // its release. The export keeps the row this run did not make.
    let mut more = rows.clone();
    more.push(ReleaseInstance {
        instance_id: kiln_schema::InstanceId::new("kiln-demo__earlier-9").unwrap(),
        pull_number: Some("9".into()),
        // Another issue: the same fix of the same issue would be a backport, left out.
        issue_numbers: vec!["8".into()],
        ..rows[0].clone()
    });
    kiln_store::write_release(&tag, "test", &more, 10_000).unwrap();
    let export = |extra: &[&str]| {
        run(kiln()
            .arg("--config")
            .arg(dir.join("pipeline.toml"))
            .args(["stage", "export"])
            .args(extra))
    };
    // The demo's config runs a later stage again (the exports below need no GitHub token); a
    // whole run, whose crawl needs the GitHub `kiln demo` serves, says how to go on instead.
    let whole = run(kiln()
        .arg("--config")
        .arg(dir.join("pipeline.toml"))
        .arg("check")
        .env_remove(kiln_demo::DEMO_TOKEN_ENV));
    assert_eq!(whole.status.code(), Some(3), "{}", text(&whole));
    assert!(
        String::from_utf8_lossy(&whole.stderr).contains("hint: this is the demo's config"),
        "{}",
        text(&whole)
    );
    let merged = export(&[]);
    assert!(merged.status.success(), "{}", text(&merged));
    assert!(
        String::from_utf8_lossy(&merged.stdout).contains("releases/2024-09: test 3"),
        "{}",
        text(&merged)
    );
    assert_eq!(
        kiln_store::release_split_rows(&tag, "test").ok(),
        Some(Some(3))
    );
    let replaced = export(&["--allow-fewer-rows"]);
    assert!(replaced.status.success(), "{}", text(&replaced));
    assert_eq!(
        kiln_store::release_split_rows(&tag, "test").ok(),
        Some(Some(2))
    );

    // History hygiene: from inside the environment image, no commit after the base commit
    // (the fix, the merge, the later release) can be reached, every tag names an ancestor, and no
    // remote exists.
    for row in &rows {
        let repo = dir.join("repos").join(&row.repo);
        let later = run(std::process::Command::new("git")
            .arg("-C")
            .arg(&repo)
            .args(["rev-list", &format!("{}..main", row.base_commit)]));
        let later: Vec<String> = String::from_utf8_lossy(&later.stdout)
            .lines()
            .map(str::to_string)
            .collect();
        assert!(
            later.len() >= 2,
            "the fixture has commits after its base: {later:?}"
        );
        let mut script = format!(
            "cd /testbed && test \"$(git rev-parse HEAD)\" = {} && for t in $(git tag); do git merge-base --is-ancestor \"$t\" HEAD || exit 1; done && test -z \"$(git remote)\"",
            row.base_commit
        );
        for sha in &later {
            script.push_str(&format!(" && ! git cat-file -e {sha} 2>/dev/null"));
        }
        script.push_str(
            " && ! git log --all --format=%H | grep -v -x -f <(git rev-list HEAD) && echo clean",
        );
        let output = run(std::process::Command::new("docker").args([
            "run",
            "--rm",
            "--network",
            "none",
            &row.image,
            "bash",
            "-c",
            &script,
        ]));
        assert_eq!(
            String::from_utf8_lossy(&output.stdout).trim(),
            "clean",
            "{}: {}",
            row.instance_id,
            text(&output)
        );
    }

    // Every built environment's Dockerfile was rebuilt and reproduced the baseline.
    let run_dir = report["run_dir"].as_str().unwrap_or_default();
    let environments: Vec<kiln_schema::EnvironmentRecord> =
        kiln_store::read_rows(&std::path::Path::new(run_dir).join("launch")).unwrap();
    for env in environments.iter().filter(|e| e.status.as_str() == "built") {
        let check = env.dockerfile_check.as_deref().unwrap_or_default();
        assert!(
            check.starts_with("rebuilt and passed ("),
            "{}: {check}",
            env.instance_id
        );
        assert!(
            env.dockerfile
                .as_deref()
                .is_some_and(|d| d.contains("COPY testbed /testbed"))
        );
    }

    let run_id = run_dir.rsplit('/').next().unwrap_or_default();
    let left = containers_with_label(&format!("kiln.run=demo/{run_id}"));
    assert!(left.is_empty(), "containers left behind: {left:?}");

    // `kiln gc`: the latest run keeps its environments; without it, only the environment no
    // release names (badgold-4's, built but rejected) would go.
    let gc = |extra: &[&str]| {
        let output = run(kiln()
            .arg("--json")
            .arg("--config")
            .arg(dir.join("pipeline.toml"))
            .args(["gc", "--dry-run"])
            .args(extra));
        assert!(output.status.success(), "{}", text(&output));
        let plan: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        plan["remove"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|g| g["tags"].as_array().cloned().unwrap_or_default())
            .filter_map(|t| t.as_str().map(str::to_string))
            .collect::<Vec<String>>()
    };
    assert_eq!(gc(&[]), Vec::<String>::new());
    let unreferenced = gc(&["--keep-last", "0"]);
    assert_eq!(unreferenced.len(), 1, "{unreferenced:?}");
    assert!(
        unreferenced[0].ends_with(":kiln-demo__badgold-4"),
        "{unreferenced:?}"
    );

    // The release's images exist with the digests its rows recorded. A removed image and a
    // name moved to another image are each reported (exit 6), and an export then refuses to
    // write a release naming them.
    for row in &rows {
        assert!(
            row.image_digest
                .as_deref()
                .is_some_and(|d| d.starts_with("sha256:")),
            "{}: {:?}",
            row.instance_id,
            row.image_digest
        );
    }
    let check_images = || {
        run(kiln()
            .args(["check-images", "--no-pull", "--release"])
            .arg(&tag))
    };
    let good = check_images();
    assert!(good.status.success(), "{}", text(&good));
    assert!(
        String::from_utf8_lossy(&good.stdout)
            .contains("2 of 2 image(s) exist with the digest their rows recorded"),
        "{}",
        text(&good)
    );
    // Every row's Dockerfile rebuilds into an environment whose tests end as the row says; a
    // row whose FAIL_TO_PASS names a test that passes without the fix is reported.
    let rebuild = |release: &std::path::Path| {
        run(kiln()
            .args(["check-images", "--no-pull", "--rebuild", "--config"])
            .arg(dir.join("pipeline.toml"))
            .arg("--release")
            .arg(release))
    };
    let rebuilt = rebuild(&tag);
    assert!(rebuilt.status.success(), "{}", text(&rebuilt));
    assert!(
        String::from_utf8_lossy(&rebuilt.stdout).contains(
            "2 of 2 environment(s) rebuilt from their Dockerfile with the tests the rows record"
        ),
        "{}",
        text(&rebuilt)
    );
    let tampered = tmp.path().join("tampered");
    let mut wrong = rows[0].clone();
    let passing = wrong.PASS_TO_PASS[0].clone();
    wrong.FAIL_TO_PASS.0.push(passing.clone());
    kiln_store::write_release(&tampered, "test", &[wrong], 100).unwrap();
    let differs = rebuild(&tampered);
    assert_eq!(differs.status.code(), Some(6), "{}", text(&differs));
    let printed = String::from_utf8_lossy(&differs.stdout).to_string();
    assert!(
        printed.contains(&format!("DIFFERS {}", rows[0].instance_id))
            && printed.contains(&format!(
                "without the fix 1 FAIL_TO_PASS test(s) pass, e.g. {passing}"
            )),
        "{}",
        text(&differs)
    );

    let docker = |args: &[&str]| {
        let output = run(std::process::Command::new("docker").args(args));
        assert!(
            output.status.success(),
            "docker {args:?}: {}",
            text(&output)
        );
    };
    docker(&["tag", &rows[0].image, &rows[1].image]);
    docker(&["rmi", &rows[0].image]);
    let bad = check_images();
    assert_eq!(bad.status.code(), Some(6), "{}", text(&bad));
    let printed = String::from_utf8_lossy(&bad.stdout);
    assert!(
        printed.contains(&format!(
            "MISSING {} {}",
            rows[0].instance_id, rows[0].image
        )),
        "{}",
        text(&bad)
    );
    assert!(
        printed.contains(&format!(
            "CHANGED {} {}",
            rows[1].instance_id, rows[1].image
        )),
        "{}",
        text(&bad)
    );
    let refused = export(&[]);
    assert_eq!(refused.status.code(), Some(6), "{}", text(&refused));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("nothing was written"),
        "{}",
        text(&refused)
    );
    assert_eq!(
        kiln_store::release_split_rows(&tag, "test").ok(),
        Some(Some(2))
    );
}
