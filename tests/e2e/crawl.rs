//! The crawl source through the binary: `kiln check` on bad crawl configs, kill -9 at random
//! points and re-runs (no candidate lost or duplicated, the same rows as an undisturbed run),
//! and a later crawl of the same dataset skipping what the earlier one found.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kiln_schema::Candidate;
use kiln_testkit::github::FakeGitHub;
use kiln_testkit::github::synthetic::{Synthetic, write_synthetic};

use crate::{kiln, run, tempdir, text};

const TOKEN_ENV: &str = "KILN_E2E_GITHUB_TOKEN";
const TOKEN: &str = "e2e-token";

fn config(dir: &Path, dataset: &str, url: &str, synthetic: &Synthetic) -> PathBuf {
    let repos: Vec<&str> = synthetic
        .repos
        .iter()
        .map(|r| r.full_name.as_str())
        .collect();
    let text = format!(
        "[dataset]\nname = \"{dataset}\"\n\n[sources.github]\nkind = \"crawl\"\napi_url = \"{url}\"\n\
         repos = {repos:?}\nmonth = \"2024-09\"\ntoken_env = [\"{TOKEN_ENV}\"]\nclone_url = \"{}\"\n",
        synthetic.clone_url_template
    );
    let path = dir.join(format!("{dataset}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

fn crawl_rows(dir: &Path, dataset: &str) -> Vec<Candidate> {
    let runs = dir.join("datasets").join(dataset).join("runs");
    let mut rows = Vec::new();
    for run in std::fs::read_dir(&runs).into_iter().flatten().flatten() {
        let stage = run.path().join("github");
        if stage.join("manifest.json").exists() {
            rows.extend(kiln_store::read_rows::<Candidate>(&stage).unwrap());
        }
    }
    rows.sort_by(|a, b| a.instance_id.cmp(&b.instance_id));
    rows
}

/// A small deterministic generator, so every run of the test kills at the same moments.
struct Lcg(u64);

impl Lcg {
    fn next_millis(&mut self, low: u64, high: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        low + (self.0 >> 33) % (high - low)
    }
}

#[test]
fn kill_9_during_a_crawl_loses_and_repeats_nothing() {
    let tmp = tempdir();
    let synthetic = write_synthetic(&tmp.path().join("fixtures"), 12, 150).unwrap();
    let fake = FakeGitHub::start(synthetic.repos.clone(), &[TOKEN]).unwrap();
    fake.keep_exchanges(false);
    // Slow answers stretch the crawl over seconds, so kills land between and inside pages.
    fake.set_delay(Duration::from_millis(150));
    let undisturbed = config(tmp.path(), "calm", &fake.url(), &synthetic);
    let output = run(kiln()
        .env(TOKEN_ENV, TOKEN)
        .args(["run", "--config"])
        .arg(&undisturbed));
    assert!(output.status.success(), "{}", text(&output));
    let expected = crawl_rows(tmp.path(), "calm");
    assert_eq!(expected.len(), 12 * 150);
    assert!(expected.iter().all(|r| r.status.as_str() == "ok"));

    let disturbed = config(tmp.path(), "killed", &fake.url(), &synthetic);
    let mut random = Lcg(0x6b69_6c6e);
    let mut kills = 0;
    for _ in 0..4 {
        let mut child = kiln()
            .env(TOKEN_ENV, TOKEN)
            .args(["run", "--config"])
            .arg(&disturbed)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(random.next_millis(300, 2500)));
        if child.try_wait().ok().flatten().is_none() {
            child.kill().unwrap();
            kills += 1;
        }
        let _ = child.wait();
        // Whatever was written is whole: every row once, each equal to the undisturbed one.
        let partial = crawl_rows(tmp.path(), "killed");
        let mut ids: Vec<&str> = partial.iter().map(|r| r.instance_id.as_str()).collect();
        ids.dedup();
        assert_eq!(ids.len(), partial.len(), "a row was written twice");
        for row in &partial {
            assert!(
                expected.contains(row),
                "{} differs from the undisturbed crawl",
                row.instance_id
            );
        }
    }
    assert!(
        kills >= 2,
        "the kills must land while the crawl runs ({kills})"
    );
    let output = run(kiln()
        .env(TOKEN_ENV, TOKEN)
        .args(["run", "--config"])
        .arg(&disturbed));
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(
        crawl_rows(tmp.path(), "killed"),
        expected,
        "the resumed crawl differs"
    );
    // Every re-run resumed the run a kill left incomplete: one run holds the rows, and every
    // run is complete. A kill that lands after a run wrote its end (the process was still
    // exiting) leaves it complete, and the next re-run rightly starts a new one, which finds
    // nothing new.
    let runs = tmp.path().join("datasets/killed/runs");
    let ids = kiln_store::run_ids(tmp.path().join("datasets").as_path(), "killed").unwrap();
    let with_rows: Vec<&String> = ids
        .iter()
        .filter(|id| {
            let stage = runs.join(id).join("github");
            stage.join("manifest.json").exists()
                && !kiln_store::read_rows::<Candidate>(&stage)
                    .unwrap()
                    .is_empty()
        })
        .collect();
    assert_eq!(with_rows.len(), 1, "the rows are split over runs {ids:?}");
    for id in &ids {
        let run = kiln_store::RunStore::open(tmp.path().join("datasets").as_path(), "killed", id)
            .unwrap();
        assert_eq!(
            run.info().status,
            kiln_store::Status::Complete,
            "run {id} of {ids:?} was left incomplete"
        );
    }
    // Nothing but runs: what a kill left of a run being created is gone.
    let entries = std::fs::read_dir(&runs).map(Iterator::count).unwrap_or(0);
    assert_eq!(entries, ids.len(), "{ids:?}");

    // A new run of the same window finds nothing new and asks GitHub nothing: the earlier run
    // finished the window long after it ended.
    fake.clear_logs();
    let output = run(kiln()
        .env(TOKEN_ENV, TOKEN)
        .args(["--json", "run", "--new", "--config"])
        .arg(&disturbed));
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(fake.requests().len(), 0, "{:?}", fake.requests());
    assert_eq!(
        crawl_rows(tmp.path(), "killed").len(),
        expected.len(),
        "no pull request twice"
    );
}

#[test]
fn check_reports_bad_crawl_configs_with_line_and_key() {
    let tmp = tempdir();
    let path = tmp.path().join("pipeline.toml");
    std::fs::write(
        &path,
        "[dataset]\nname = \"live\"\n\n[sources.github]\nkind = \"crawl\"\nrepos = [\"o/r\"]\n\
         since = \"2024-10-01\"\nuntil = \"2024-09-01\"\ntoken_env = [\"KILN_E2E_UNSET_TOKEN\"]\nrepo = \"typo\"\n",
    )
    .unwrap();
    let output = run(kiln()
        .env_remove("KILN_E2E_UNSET_TOKEN")
        .args(["check", "--config"])
        .arg(&path));
    assert_eq!(output.status.code(), Some(3), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let file = path.display();
    for line in [
        format!(
            "{file}:8:9: sources.github.until: the window ends (2024-09-01T00:00:00Z) before it starts (2024-10-01T00:00:00Z)"
        ),
        format!("{file}:10:1: sources.github.repo: unknown key (did you mean `repos`?)"),
    ] {
        assert!(stderr.contains(&line), "missing {line:?} in:\n{stderr}");
    }
    // With the config fixed, the unset token is the one problem, located at `token_env`.
    let text_fixed = std::fs::read_to_string(&path)
        .unwrap_or_default()
        .replace("until = \"2024-09-01\"\n", "until = \"2024-11-01\"\n")
        .replace("repo = \"typo\"\n", "");
    std::fs::write(&path, text_fixed).unwrap();
    let output = run(kiln()
        .env_remove("KILN_E2E_UNSET_TOKEN")
        .args(["check", "--config"])
        .arg(&path));
    assert_eq!(output.status.code(), Some(3), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!(
            "{file}:9:13: sources.github.token_env: environment variable KILN_E2E_UNSET_TOKEN is not set (or is empty)"
        )),
        "{stderr}"
    );
    let output = run(kiln()
        .env("KILN_E2E_UNSET_TOKEN", "x")
        .args(["check", "--config"])
        .arg(&path));
    assert!(output.status.success(), "{}", text(&output));
    // `run` refuses the same way, before anything is written.
    let output = run(kiln()
        .env_remove("KILN_E2E_UNSET_TOKEN")
        .args(["run", "--config"])
        .arg(&path));
    assert_eq!(output.status.code(), Some(3), "{}", text(&output));
    assert!(!tmp.path().join("datasets").exists());
}
