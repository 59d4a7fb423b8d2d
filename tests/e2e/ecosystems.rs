//! `kiln run` on one fixture project per ecosystem (Rust, Node, Go, C, Java) from kiln-testkit:
//! every instance validates with exactly the lists the real tools give, and no container is
//! left behind.

use std::collections::BTreeMap;
use std::path::Path;

use kiln_schema::{EnvironmentRecord, ReleaseInstance, ValidationRecord};

use crate::{ca_bundle, containers_with_label, kiln, run, tempdir, text};

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_string()).collect()
}

/// FAIL_TO_PASS and PASS_TO_PASS of every instance, written out here (not taken from
/// kiln-testkit) so that a wrong fixture expectation cannot confirm itself. They were read from
/// real runs of cargo, jest, go test, ctest and Maven/surefire through kiln-testlog's parsers
/// (kiln-testkit's `host_tools_confirm_ecosystem_lists`, and Maven offline in Docker).
fn expected_lists() -> BTreeMap<&'static str, (Vec<String>, Vec<String>)> {
    BTreeMap::from([
        (
            "kiln-eco__runlength-11",
            (
                strings(&["decodes_multi_digit_counts", "round_trips_long_runs"]),
                strings(&[
                    "decodes_runs",
                    "encodes_empty_text",
                    "encodes_runs",
                    "encodes_single_characters",
                    "rejects_missing_count",
                    "rejects_trailing_count",
                    "tests::errors_name_the_character",
                    "tests::runs_are_counted_in_decimal",
                ]),
            ),
        ),
        (
            "kiln-eco__durations-12",
            (
                strings(&[
                    "test/format.test.js::format › round-trips 1500 through parse",
                    "test/format.test.js::format › round-trips 3723004 through parse",
                    "test/parse.test.js::parse › reads milliseconds",
                ]),
                strings(&[
                    "test/format.test.js::format › formats hours and minutes",
                    "test/format.test.js::format › formats zero",
                    "test/format.test.js::format › rejects negative numbers",
                    "test/parse.test.js::parse › reads hours and minutes",
                    "test/parse.test.js::parse › reads seconds",
                    "test/parse.test.js::parse › rejects garbage",
                ]),
            ),
        ),
        (
            "kiln-eco__semver-13",
            (
                strings(&[
                    "github.com/kiln-eco/semver::TestCompare",
                    "github.com/kiln-eco/semver::TestCompare/1.10.0_vs_1.9.0",
                    "github.com/kiln-eco/semver::TestCompare/1.2.9_vs_1.2.10",
                    "github.com/kiln-eco/semver::TestParseLeadingZeros",
                ]),
                strings(&[
                    "github.com/kiln-eco/semver::TestCompare/1.2.3_vs_1.2.3",
                    "github.com/kiln-eco/semver::TestCompare/1.2.3_vs_1.2.4",
                    "github.com/kiln-eco/semver::TestCompare/2.0.0_vs_1.9.9",
                    "github.com/kiln-eco/semver::TestParse",
                    "github.com/kiln-eco/semver::TestParseRejects",
                ]),
            ),
        ),
        (
            "kiln-eco__ringbuf-14",
            (
                strings(&["ringbuf.fifo_after_wrap", "ringbuf.interleaved"]),
                strings(&[
                    "ringbuf.empty",
                    "ringbuf.full",
                    "ringbuf.peek",
                    "ringbuf.push_pop",
                    "ringbuf.wraparound",
                ]),
            ),
        ),
        (
            "kiln-eco__csvline-15",
            (
                strings(&[
                    "dev.kilneco.csvline.CsvLineTest::unescapesDoubledQuotes",
                    "dev.kilneco.csvline.JoinTest::roundTripsQuotes",
                ]),
                strings(&[
                    "dev.kilneco.csvline.CsvLineTest::keepsCommasInQuotes",
                    "dev.kilneco.csvline.CsvLineTest::keepsEmptyFields",
                    "dev.kilneco.csvline.CsvLineTest::splitsPlainFields",
                    "dev.kilneco.csvline.JoinTest::joinsPlainFields",
                    "dev.kilneco.csvline.JoinTest::quotesCommas",
                    "dev.kilneco.csvline.JoinTest::roundTripsCommas",
                ]),
            ),
        ),
    ])
}

/// The last `lines` lines of a text.
fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// What launch recorded for an instance, for a failure message: plan, class, command, log tail.
fn launch_report(run_dir: &Path, id: &str) -> String {
    let rows: Vec<EnvironmentRecord> =
        kiln_store::read_rows(&run_dir.join("launch")).unwrap_or_default();
    let Some(row) = rows.iter().find(|r| r.instance_id == id) else {
        return "no launch row".to_string();
    };
    let log = std::fs::read_to_string(run_dir.join("logs").join(id).join("launch/launch.log"))
        .unwrap_or_default();
    format!(
        "launch {} (plan {}, image {}, class {:?})\n  failed command: {:?}\n  log tail:\n{}\n  launch.log tail:\n{}",
        row.status,
        row.plan,
        row.base_image,
        row.failure_class,
        row.failure_command,
        row.log_tail
            .as_deref()
            .map(|t| tail(t, 25))
            .unwrap_or_default(),
        tail(&log, 25),
    )
}

/// SLOW (minutes; the first run builds one image per ecosystem): every ecosystem fixture
/// through `kiln run` on the real engine. All instances are checked before anything is asserted,
/// so one run reports every ecosystem that does not validate.
#[test]
// Which ecosystems validated is printed even when all do: the plans change under this test.
fn ecosystem_fixtures_validate_exactly_and_leave_no_container() {
    let tmp = tempdir();
    let dir = tmp.path().join("eco");
    let layout = kiln_testkit::write_ecosystems(&dir).unwrap();
    let config = dir.join("pipeline.toml");
    std::fs::write(
        &config,
        kiln_demo::config_text("eco", ca_bundle().as_deref(), 1, false),
    )
    .unwrap();

    let output = run(kiln().args(["--json", "run", "--config"]).arg(&config));
    let report: serde_json::Value =
        serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{e}\n{}", text(&output)));
    let run_dir = Path::new(report["run_dir"].as_str().unwrap_or_default()).to_path_buf();
    let run_id = report["run_id"].as_str().unwrap_or_default().to_string();
    let by_id: BTreeMap<String, serde_json::Value> = report["instances"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|i| {
            (
                i["instance_id"].as_str().unwrap_or_default().to_string(),
                i.clone(),
            )
        })
        .collect();
    let mut ids: Vec<&String> = layout.instances.iter().map(|i| &i.instance_id).collect();
    ids.sort();
    assert_eq!(by_id.keys().collect::<Vec<_>>(), ids, "{report:#}");

    let mut failures = Vec::new();
    let mut passed = Vec::new();
    for (id, (fail_to_pass, pass_to_pass)) in expected_lists() {
        let summary = &by_id[id];
        let list = |key: &str| -> Vec<String> {
            serde_json::from_value(summary[key].clone()).unwrap_or_default()
        };
        let problem = if summary["state"] != "validated" {
            Some(format!(
                "state {} ({}): {}",
                summary["state"], summary["failure_class"], summary["reason"]
            ))
        } else if summary["agreement"] != "exact/exact" {
            // The task file publishes each fixture's own lists: validation must report that it
            // agrees with them.
            Some(format!(
                "agreement with the published list: {}",
                summary["agreement"]
            ))
        } else if list("fail_to_pass") != fail_to_pass || list("pass_to_pass") != pass_to_pass {
            Some(format!(
                "lists differ:\n  FAIL_TO_PASS {:?}\n   expected    {fail_to_pass:?}\n  PASS_TO_PASS {:?}\n   expected    {pass_to_pass:?}",
                list("fail_to_pass"),
                list("pass_to_pass")
            ))
        } else {
            None
        };
        match problem {
            Some(problem) => {
                failures.push(format!("{id}: {problem}\n{}", launch_report(&run_dir, id)));
            }
            None => passed.push(id),
        }
    }
    eprintln!("validated end to end: {passed:?}");

    let left = containers_with_label(&format!("kiln.run=eco/{run_id}"));
    assert!(left.is_empty(), "containers left behind: {left:?}");
    assert!(
        failures.is_empty(),
        "{} of 5 ecosystems did not validate as expected:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    assert!(output.status.success(), "{}", text(&output));

    // The Node fixture's test that fetches from a host fails in both runs: it is in neither
    // list, and the row says why (validation's containers have no network).
    let validated: Vec<ValidationRecord> =
        kiln_store::read_rows(&run_dir.join("validate")).unwrap();
    let needs_network: BTreeMap<&str, &[String]> = validated
        .iter()
        .filter(|r| !r.needs_network.is_empty())
        .map(|r| (r.instance_id.as_str(), r.needs_network.as_slice()))
        .collect();
    assert_eq!(
        needs_network,
        BTreeMap::from([(
            "kiln-eco__durations-12",
            &["test/units.test.js::units › fetches the published unit table".to_string()][..]
        )])
    );

    // The official SWE-bench harness grades the release unchanged: every row
    // names a parser of its registry (jest's report, CTest's lines and go's JSON events through
    // the id scripts, cargo's through its filter), gold patches resolve those rows, a no-op and
    // empty patches none. Surefire's XML reports too, through their id script.
    let tag = crate::release_dir(&dir, "eco");
    let rows: Vec<ReleaseInstance> =
        kiln_store::read_parquet(&tag.join("data/test-00000-of-00001.parquet")).unwrap();
    let parsers: BTreeMap<&str, &str> = rows
        .iter()
        .map(|r| (r.instance_id.as_str(), r.log_parser.as_str()))
        .collect();
    assert_eq!(
        parsers,
        BTreeMap::from([
            ("kiln-eco__csvline-15", "parse_log_jest_json"),
            ("kiln-eco__durations-12", "parse_log_jest_json"),
            ("kiln-eco__ringbuf-14", "parse_log_jest_json"),
            ("kiln-eco__runlength-11", "parse_log_cargo"),
            ("kiln-eco__semver-13", "parse_log_jest_json"),
        ]),
        "{rows:#?}"
    );
    crate::swebench_check(
        &tag,
        &tmp.path().join("swebench"),
        &[
            "gold resolves 5 of 5",
            "a no-op patch resolves 0 of 5 (5 completed)",
            "empty patches resolve 0 of 5",
        ],
    );

    // Harbor grades the same release as tasks, in these images, which need not have Python
    // (the Go and Java ones have none): the verifier reads each row's output with the harness
    // parser ported to awk (cargo's through its filter, the others through their id scripts).
    let release = crate::harbor::export_harbor_tasks(&dir, "eco");
    let ids: Vec<&str> = expected_lists().into_keys().collect();
    crate::harbor::check_with_harbor(&release, &tmp.path().join("harbor"), &ids);
}
