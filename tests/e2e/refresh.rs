//! `kiln refresh --month` over the fake GitHub, month after month: two consecutive refreshes
//! give two releases with no instance in both, the frozen splits keep the same rows, every
//! card's counts match its data, and running a finished month again changes nothing. Then
//! `kiln push` publishes both to the fake Hugging Face Hub (one commit each, nothing sent
//! twice) and their images to a real registry, and `datasets` loads them back from the Hub.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chrono::Duration;
use kiln_schema::ReleaseInstance;
use kiln_testkit::github::FakeGitHub;

use crate::{Registry, ca_bundle, kiln, run, tempdir, text, workspace_root};
use kiln_testkit::hub::FakeHub;

const TOKEN_ENV: &str = "KILN_E2E_REFRESH_TOKEN";
const TOKEN: &str = "e2e-refresh-token";

/// Every row of split `split` of a release, by instance id.
fn split_rows(release: &Path, split: &str) -> BTreeMap<String, ReleaseInstance> {
    kiln_store::analytics::split_shards(release, split)
        .unwrap()
        .iter()
        .flat_map(|shard| kiln_store::read_parquet::<ReleaseInstance>(shard).unwrap())
        .map(|r| (r.instance_id.to_string(), r))
        .collect()
}

/// `(split, rows)` of the card's split table, and the splits its YAML `configs` declare.
fn card_counts(release: &Path) -> (BTreeMap<String, usize>, Vec<String>) {
    let card = std::fs::read_to_string(release.join("README.md")).unwrap();
    let table = card
        .split("## Splits\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no split table in {card}"));
    let counts = table
        .lines()
        .skip(3)
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
            Some((cells.first()?.to_string(), cells.get(1)?.parse().ok()?))
        })
        .collect();
    let front = card.split("---\n").nth(1).unwrap_or_default();
    let declared = front
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- split: ").map(str::to_string))
        .collect();
    (counts, declared)
}

fn push(release: &Path, hub: &FakeHub, extra: &[&str]) -> std::process::Output {
    run(kiln()
        .env("HF_ENDPOINT", hub.url())
        .env("HF_TOKEN", HF_TOKEN)
        .arg("push")
        .arg("--release")
        .arg(release)
        .args(["--repo", "kiln-e2e/monthly"])
        .args(extra))
}

const HF_TOKEN: &str = "hf_e2e_token";

fn refresh(config: &Path, month: &str) -> std::process::Output {
    run(kiln()
        .env(TOKEN_ENV, TOKEN)
        .arg("--config")
        .arg(config)
        .args(["refresh", "--month", month]))
}

#[test]
fn two_monthly_refreshes_publish_disjoint_releases_with_frozen_splits() {
    let tmp = tempdir();
    let dir = tmp.path();
    let layout = kiln_testkit::write_demo(dir).unwrap();
    // Two of the four fixture pull requests were merged a month later: September's crawl
    // finds calc (validates) and badgold (rejected), October's textwrap2 (validates) and
    // broken (fails to launch).
    let mut repos = kiln_testkit::github::fake_repos(&layout).unwrap();
    for repo in &mut repos {
        if ["kiln-demo/textwrap2", "kiln-demo/broken"].contains(&repo.full_name.as_str()) {
            for pull in &mut repo.pulls {
                pull.merged_at = pull.merged_at.map(|t| t + Duration::days(30));
            }
        }
    }
    let github = FakeGitHub::start(repos, &[TOKEN]).unwrap();
    let registry = Registry::start(dir);
    let names: Vec<String> = layout.instances.iter().map(|i| i.repo.clone()).collect();
    let verified = dir.join("verified.txt");
    std::fs::write(
        &verified,
        "# reviewed by hand\nkiln-demo__textwrap2-3\nkiln-demo__calc-2\n",
    )
    .unwrap();
    let config_text = kiln_demo::crawl_config_text(
        "monthly",
        &github.url(),
        &names,
        ca_bundle().as_deref(),
        1,
    )
    .replace(
        "token_env = [\"KILN_DEMO_GITHUB_TOKEN\"]",
        &format!("token_env = [\"{TOKEN_ENV}\"]"),
    ) + &format!(
        "license = \"mit\"\nimage_registry = \"{}/kiln\"\n\n[stages.export.frozen.lite]\nsample = 1\nseed = 11\n\n\
         [stages.export.frozen.verified]\nids = \"verified.txt\"\n",
        registry.address
    );
    let config = dir.join("pipeline.toml");
    std::fs::write(&config, &config_text).unwrap();
    let releases = dir.join("datasets/monthly/releases");
    let release = |month: &str| -> PathBuf { releases.join(month) };

    let september = refresh(&config, "2024-09");
    assert!(september.status.success(), "{}", text(&september));
    assert!(
        String::from_utf8_lossy(&september.stdout).contains("release 2024-09 in "),
        "{}",
        text(&september)
    );
    let sept = release("2024-09");
    let sept_test = split_rows(&sept, "test");
    assert_eq!(
        sept_test.keys().collect::<Vec<_>>(),
        ["kiln-demo__calc-2"],
        "{}",
        text(&september)
    );
    let sept_lite = split_rows(&sept, "lite");
    assert_eq!(sept_lite.keys().collect::<Vec<_>>(), ["kiln-demo__calc-2"]);
    assert_eq!(
        sept_lite["kiln-demo__calc-2"],
        sept_test["kiln-demo__calc-2"]
    );
    // The verified list names an instance no release has yet: it waits for it.
    let sept_verified = split_rows(&sept, "verified");
    assert_eq!(
        sept_verified.keys().collect::<Vec<_>>(),
        ["kiln-demo__calc-2"]
    );
    let manifest = kiln_pipeline::release::ReleaseManifest::read(&sept).unwrap();
    assert_eq!(
        manifest.frozen["verified"].not_published,
        ["kiln-demo__textwrap2-3"]
    );
    assert_eq!(manifest.funnel.candidates, 2, "{manifest:#?}");
    assert_eq!(manifest.funnel.validated, 1, "{manifest:#?}");

    let october = refresh(&config, "2024-10");
    assert!(october.status.success(), "{}", text(&october));
    let oct = release("2024-10");
    let oct_test = split_rows(&oct, "test");
    assert_eq!(
        oct_test.keys().collect::<Vec<_>>(),
        ["kiln-demo__textwrap2-3"],
        "{}",
        text(&october)
    );
    // The frozen splits keep their rows, as first published.
    assert_eq!(split_rows(&oct, "lite"), sept_lite);
    let oct_verified = split_rows(&oct, "verified");
    assert_eq!(
        oct_verified.keys().collect::<Vec<_>>(),
        ["kiln-demo__calc-2", "kiln-demo__textwrap2-3"]
    );
    assert_eq!(
        oct_verified["kiln-demo__calc-2"],
        sept_test["kiln-demo__calc-2"]
    );
    assert_eq!(
        oct_verified["kiln-demo__textwrap2-3"],
        oct_test["kiln-demo__textwrap2-3"]
    );
    // No instance is published twice.
    assert!(
        sept_test.keys().all(|id| !oct_test.contains_key(id)),
        "{sept_test:?} {oct_test:?}"
    );

    // Every card's counts and declared splits match the data; the card says what is frozen.
    for (dir, rows) in [(&sept, [1, 1, 1]), (&oct, [1, 1, 2])] {
        let (counts, declared) = card_counts(dir);
        assert_eq!(declared, ["test", "lite", "verified"], "{}", dir.display());
        for (split, expected) in ["test", "lite", "verified"].iter().zip(rows) {
            assert_eq!(counts[*split], expected, "{split} of {}", dir.display());
            assert_eq!(split_rows(dir, split).len(), expected);
        }
        let card = std::fs::read_to_string(dir.join("README.md")).unwrap_or_default();
        assert!(card.contains("license: \"mit\""), "{card}");
        assert!(
            card.contains("`lite` is frozen: a sample of 1 drawn with seed 11 in release 2024-09"),
            "{card}"
        );
    }

    // A finished month refreshed again finds nothing new and leaves its release as it was.
    let before = std::fs::read(oct.join("data/test-00000-of-00001.parquet")).unwrap();
    let again = refresh(&config, "2024-10");
    assert!(again.status.success(), "{}", text(&again));
    assert_eq!(split_rows(&oct, "test"), oct_test, "{}", text(&again));
    let after = std::fs::read(oct.join("data/test-00000-of-00001.parquet")).unwrap();
    assert_eq!(before, after, "the re-export rewrote the shard differently");

    // A config without a crawl source cannot be refreshed: the message says why.
    let ingest = dir.join("ingest.toml");
    std::fs::write(&ingest, kiln_demo::config_text("ingested", None, 1, false)).unwrap();
    let refused = refresh(&ingest, "2024-10");
    assert_eq!(refused.status.code(), Some(3), "{}", text(&refused));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("has no crawl source"),
        "{}",
        text(&refused)
    );
    let bad_month = refresh(&config, "2024-13");
    assert_eq!(bad_month.status.code(), Some(2), "{}", text(&bad_month));

    // The rows name the images in the registry, and the local images carry that name too.
    for row in sept_test.values().chain(oct_test.values()) {
        assert!(
            row.image
                .starts_with(&format!("{}/kiln/kiln-env/monthly", registry.address)),
            "{}",
            row.image
        );
    }

    // Publishing: a dry run reaches no server and lists the commit's files.
    let hub = FakeHub::start(&[HF_TOKEN]).unwrap();
    let dry = push(&sept, &hub, &["--dry-run"]);
    assert!(dry.status.success(), "{}", text(&dry));
    let printed = String::from_utf8_lossy(&dry.stdout).to_string();
    for line in [
        "would push release 2024-09",
        "releases/2024-09/data/test-00000-of-00001.parquet",
        "releases/2024-09/release.json",
        "README.md (",
    ] {
        assert!(printed.contains(line), "{line}: {}", text(&dry));
    }
    assert!(hub.requests().is_empty(), "{:?}", hub.requests());
    // Without a token nothing is tried.
    let anonymous = run(kiln()
        .env("HF_ENDPOINT", hub.url())
        .env_remove("HF_TOKEN")
        .env_remove("HUGGING_FACE_HUB_TOKEN")
        .args(["push", "--repo", "kiln-e2e/monthly", "--release"])
        .arg(&sept));
    assert_eq!(anonymous.status.code(), Some(2), "{}", text(&anonymous));

    // September, then October: one commit each, every protocol step, every byte as on disk.
    for (release, month) in [(&sept, "2024-09"), (&oct, "2024-10")] {
        let pushed = push(release, &hub, &[]);
        assert!(pushed.status.success(), "{}", text(&pushed));
        assert!(
            String::from_utf8_lossy(&pushed.stdout).contains(&format!("pushed release {month}")),
            "{}",
            text(&pushed)
        );
    }
    assert!(hub.problems().is_empty(), "{:#?}", hub.problems());
    let commits = hub.commits("kiln-e2e/monthly");
    let summaries: Vec<&str> = commits.iter().map(|c| c.summary.as_str()).collect();
    assert_eq!(
        summaries,
        [
            "initial commit",
            "kiln release 2024-09",
            "kiln release 2024-10"
        ]
    );
    let on_hub = hub.files("kiln-e2e/monthly");
    for (release, month) in [(&sept, "2024-09"), (&oct, "2024-10")] {
        let manifest = kiln_pipeline::release::ReleaseManifest::read(release).unwrap();
        for file in manifest.all_files() {
            let local = std::fs::read(release.join(&file.path)).unwrap();
            assert_eq!(
                on_hub.get(&format!("releases/{month}/{}", file.path)),
                Some(&local),
                "{month}/{}",
                file.path
            );
        }
    }
    let steps: Vec<String> = hub
        .requests()
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    for step in [
        "POST /api/validate-yaml",
        "POST /api/repos/create",
        "GET /api/datasets/kiln-e2e/monthly/revision/main",
        "GET /api/datasets/kiln-e2e/monthly/tree/",
        "POST /api/datasets/kiln-e2e/monthly/preupload/main",
        "POST /datasets/kiln-e2e/monthly.git/info/lfs/objects/batch",
        "PUT /lfs-store/kiln-e2e/monthly/",
        "POST /datasets/kiln-e2e/monthly.git/info/lfs/objects/verify",
        "POST /api/datasets/kiln-e2e/monthly/commit/main",
    ] {
        assert!(
            steps.iter().any(|s| s.starts_with(step)),
            "no {step} in {steps:#?}"
        );
    }
    // The same release again: nothing sent, no commit.
    let requests_before = hub.requests().len();
    let again = push(&oct, &hub, &[]);
    assert!(again.status.success(), "{}", text(&again));
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("no commit made"),
        "{}",
        text(&again)
    );
    assert_eq!(hub.commits("kiln-e2e/monthly").len(), 3);
    assert!(
        hub.requests()[requests_before..]
            .iter()
            .all(|r| !r.path.starts_with("/lfs-store/")),
        "bytes were sent again"
    );
    // The images went to the registry under the names the rows give.
    for row in sept_test.values().chain(oct_test.values()) {
        let name = row
            .image
            .trim_start_matches(&format!("{}/", registry.address));
        let (repository, tag) = name.rsplit_once(':').unwrap_or_default();
        let tags = registry.tags(repository);
        assert!(tags.iter().any(|t| t == tag), "{tag} not in {tags:?}");
    }

    // October exported again with one row a shard: the push deletes the shard the Hub holds
    // from before, or the default config would read its rows twice.
    std::fs::write(
        &config,
        config_text.replace(
            "license = \"mit\"\n",
            "license = \"mit\"\nrows_per_shard = 1\n",
        ),
    )
    .unwrap();
    let smaller = refresh(&config, "2024-10");
    assert!(smaller.status.success(), "{}", text(&smaller));
    assert_eq!(split_rows(&oct, "verified").len(), 2);
    assert!(oct.join("data/verified-00001-of-00002.parquet").exists());
    let repushed = push(&oct, &hub, &[]);
    assert!(repushed.status.success(), "{}", text(&repushed));
    assert!(
        String::from_utf8_lossy(&repushed.stdout)
            .contains("deleted releases/2024-10/data/verified-00000-of-00001.parquet"),
        "{}",
        text(&repushed)
    );
    assert!(hub.problems().is_empty(), "{:#?}", hub.problems());

    // `datasets` and pandas read the releases back from the Hub: the default config joins
    // every month's test split and the latest frozen splits; a month's config holds that month.
    let python = run(std::process::Command::new("bash")
        .arg(workspace_root().join("scripts/python-env.sh"))
        .current_dir(workspace_root()));
    assert!(python.status.success(), "{}", text(&python));
    let python = String::from_utf8_lossy(&python.stdout).trim().to_string();
    let check = run(std::process::Command::new(python)
        .arg(workspace_root().join("scripts/hub-check.py"))
        .args([
            "load",
            "kiln-e2e/monthly",
            "default:test=2",
            "default:lite=1",
            "default:verified=2",
            "2024-09:test=1",
            "2024-10:test=1",
            "2024-10:verified=2",
        ])
        .env("HF_ENDPOINT", hub.url())
        .env("HF_TOKEN", HF_TOKEN)
        .env("HF_HUB_DISABLE_XET", "1")
        .env("HF_HOME", dir.join("hf-home"))
        .env("HF_HUB_DISABLE_TELEMETRY", "1"));
    assert!(check.status.success(), "{}", text(&check));
    // The images this test made, under both names, go with its directory (TestDir): by their
    // dataset label, so that a concurrent run of the same test elsewhere keeps its own.
}
