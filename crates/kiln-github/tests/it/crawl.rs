//! The crawl against the fake GitHub: candidate rows, request counts, faults, resumption.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use kiln_core::config::CrawlSettings;
use kiln_github::crawl::{
    ClientOptions, CrawlRequest, CrawlSummary, GitHub, Output, Prior, RepoProgress, Token, crawl,
};
use kiln_schema::Candidate;
use kiln_testkit::github::{FakeGitHub, fake_repos};
use kiln_testkit::{DemoLayout, write_demo};

pub struct Setup {
    pub _dir: tempfile::TempDir,
    pub layout: DemoLayout,
    pub fake: FakeGitHub,
    pub cache: std::path::PathBuf,
}

pub fn demo_setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let layout = write_demo(&dir.path().join("demo")).unwrap();
    let fake = FakeGitHub::start(fake_repos(&layout).unwrap(), &["token-a", "token-b"]).unwrap();
    let cache = dir.path().join("cache");
    Setup {
        _dir: dir,
        layout,
        fake,
        cache,
    }
}

fn time(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .unwrap()
        .with_timezone(&Utc)
}

pub fn settings(setup: &Setup) -> CrawlSettings {
    CrawlSettings {
        api_url: setup.fake.url(),
        repos: setup
            .layout
            .instances
            .iter()
            .map(|i| i.repo.clone())
            .collect(),
        discover: None,
        since: "2024-09-01T00:00:00Z".into(),
        until: Some("2024-10-01T00:00:00Z".into()),
        token_env: vec!["KILN_TEST_TOKEN".into()],
        max_candidates: None,
        clone_url: setup.layout.clone_url_template(),
        max_files: 50,
        max_changed_lines: 2000,
        concurrency: 2,
        requests_in_flight: 2,
    }
}

pub fn request(setup: &Setup, settings: CrawlSettings) -> CrawlRequest {
    CrawlRequest {
        since: time(&settings.since),
        until: time(settings.until.as_deref().unwrap()),
        settings,
        mirrors: kiln_git::MirrorCache::new(&setup.cache).unwrap(),
        prior: Prior::default(),
        repositories: None,
        progress: BTreeMap::new(),
        kept_so_far: 0,
        shard: None,
    }
}

pub fn client(setup: &Setup, tokens: &[(&str, &str)]) -> Arc<GitHub> {
    client_with_notes(setup, tokens).0
}

pub type Notes = Arc<std::sync::Mutex<Vec<String>>>;

/// A client with short backoffs and timeouts, and the notes it gives.
pub fn client_with_notes(setup: &Setup, tokens: &[(&str, &str)]) -> (Arc<GitHub>, Notes) {
    let mut options = ClientOptions::new(&setup.fake.url());
    options.backoff_base = Duration::from_millis(20);
    options.timeout = Duration::from_secs(2);
    options.reserve = 5;
    options.etag_dir = Some(setup.cache.join("etags"));
    let notes: Notes = Arc::default();
    let sink = Arc::clone(&notes);
    let client = GitHub::new(
        options,
        tokens
            .iter()
            .map(|(env, value)| Token::new(env, value))
            .collect(),
        Arc::new(move |note| sink.lock().unwrap().push(note)),
    )
    .unwrap();
    (Arc::new(client), notes)
}

/// Everything a crawl sent, and its summary.
pub struct Crawled {
    pub rows: Vec<Candidate>,
    pub progress: BTreeMap<String, RepoProgress>,
    pub summary: Result<CrawlSummary, String>,
    pub notes: Vec<String>,
}

pub async fn run(request: CrawlRequest, client: Arc<GitHub>) -> Crawled {
    let (tx, mut rx) = tokio::sync::mpsc::channel(16);
    let work = tokio::spawn(crawl(request, client, tx));
    let mut out = Crawled {
        rows: Vec::new(),
        progress: BTreeMap::new(),
        summary: Err(String::new()),
        notes: Vec::new(),
    };
    while let Some(output) = rx.recv().await {
        match output {
            Output::Page {
                repo,
                rows,
                progress,
            } => {
                out.rows.extend(rows);
                out.progress.insert(repo, progress);
            }
            Output::Note(note) => out.notes.push(note),
            Output::Repositories(_) => {}
        }
    }
    out.summary = work.await.unwrap().map_err(|e| e.to_string());
    out.rows.sort_by(|a, b| a.instance_id.cmp(&b.instance_id));
    out
}

#[tokio::test]
async fn the_demo_repositories_crawl_into_the_task_files_candidates() {
    let setup = demo_setup();
    let tasks = kiln_github::read_task_file(&setup.layout.tasks_file).unwrap();
    let crawled = run(
        request(&setup, settings(&setup)),
        client(&setup, &[("KILN_TEST_TOKEN", "token-a")]),
    )
    .await;
    assert_eq!(
        crawled.summary,
        Ok(CrawlSummary {
            repositories_done: 4,
            repositories_failed: 0,
            limit_reached: false
        })
    );
    assert_eq!(crawled.rows.len(), tasks.len());
    for task in &tasks {
        let row = crawled
            .rows
            .iter()
            .find(|r| r.instance_id == task.instance_id)
            .unwrap_or_else(|| panic!("no row for {}", task.instance_id));
        assert_eq!(row.status.as_str(), "ok", "{row:?}");
        assert_eq!(row.base_commit, task.base_commit);
        // The diff computed from the mirror is exactly what the fixture's own split wrote.
        assert_eq!(row.patch, task.patch, "{}", row.instance_id);
        assert_eq!(row.test_patch, task.test_patch, "{}", row.instance_id);
        assert_eq!(row.created_at, task.created_at);
        assert_eq!(row.pull_number, task.pull_number);
        // Title and body of the issue, as SWE-bench writes them.
        assert_eq!(
            row.problem_statement.trim_end(),
            task.problem_statement.replacen("\n\n", "\n", 1).trim_end(),
            "{}",
            row.instance_id
        );
        // The comment made before the fix is a hint; the one after the merge is not.
        assert_eq!(row.hints_text, task.hints_text, "{}", row.instance_id);
        assert!(!row.hints_text.contains("Confirmed fixed"));
        let issue = (task.pull_number.unwrap() - 1).to_string();
        assert_eq!(row.issue_numbers, vec![issue.clone()]);
        assert_eq!(
            row.issue_links,
            BTreeMap::from([(issue, "closing-reference+keyword".to_string())])
        );
        assert_eq!(row.language.as_deref(), Some("Python"));
        assert!(row.merge_commit.is_some() && row.head_commit.is_some());
    }
    // One repository call and one search per repository; nothing else.
    let kinds: BTreeMap<String, usize> =
        setup
            .fake
            .requests()
            .iter()
            .fold(BTreeMap::new(), |mut m, r| {
                *m.entry(r.kind.clone()).or_default() += 1;
                m
            });
    assert_eq!(kinds.get("graphql:KilnPullRequests"), Some(&4), "{kinds:?}");
    assert_eq!(kinds.values().sum::<usize>(), 8, "{kinds:?}");
}

pub fn edge_setup() -> (Setup, kiln_testkit::github::edge::EdgeCase) {
    let dir = tempfile::tempdir().unwrap();
    let edge = kiln_testkit::github::edge::write_edge_repos(dir.path()).unwrap();
    let layout = DemoLayout {
        root: dir.path().to_path_buf(),
        repos_dir: edge.repos_dir.clone(),
        tasks_file: dir.path().join("none.jsonl"),
        instances: Vec::new(),
        pulls: Vec::new(),
    };
    let fake = FakeGitHub::start(edge.repos.clone(), &["token-a", "token-b"]).unwrap();
    let cache = dir.path().join("cache");
    (
        Setup {
            _dir: dir,
            layout,
            fake,
            cache,
        },
        edge,
    )
}

pub fn edge_settings(setup: &Setup) -> CrawlSettings {
    CrawlSettings {
        repos: vec![kiln_testkit::github::edge::EDGE_REPO.to_string()],
        ..settings(setup)
    }
}

fn kinds(fake: &FakeGitHub) -> BTreeMap<String, usize> {
    fake.requests().iter().fold(BTreeMap::new(), |mut m, r| {
        *m.entry(r.kind.clone()).or_default() += 1;
        m
    })
}

/// The rows as (number, drop reason), for comparing runs.
fn outcome(rows: &[Candidate]) -> Vec<(i64, Option<String>)> {
    let mut out: Vec<_> = rows
        .iter()
        .map(|r| {
            (
                r.pull_number.unwrap_or(0),
                r.drop_reason.map(|d| d.to_string()),
            )
        })
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn every_kind_of_pull_request_gets_its_row() {
    let (setup, edge) = edge_setup();
    let crawled = run(
        request(&setup, edge_settings(&setup)),
        client(&setup, &[("KILN_TEST_TOKEN", "token-a")]),
    )
    .await;
    assert!(crawled.summary.is_ok(), "{:?}", crawled.summary);
    let expected: Vec<(i64, Option<String>)> = edge
        .expected
        .iter()
        .map(|e| {
            (
                i64::try_from(e.number).unwrap(),
                e.drop_reason.map(str::to_string),
            )
        })
        .collect();
    assert_eq!(outcome(&crawled.rows), expected);
    for row in &crawled.rows {
        let want = edge
            .expected
            .iter()
            .find(|e| Some(i64::try_from(e.number).unwrap()) == row.pull_number)
            .unwrap();
        let status = if want.drop_reason.is_some() {
            "dropped"
        } else {
            "ok"
        };
        assert_eq!(row.status.as_str(), status, "{row:?}");
        assert_eq!(row.instance_id, format!("kiln-crawl__edge-{}", want.number));
        if want.drop_reason.is_none() {
            let links: Vec<(String, String)> = row.issue_links.clone().into_iter().collect();
            let want_links: Vec<(String, String)> = want
                .links
                .iter()
                .map(|(n, k)| ((*n).to_string(), (*k).to_string()))
                .collect();
            assert_eq!(links, want_links, "{}", row.instance_id);
            assert_eq!(row.base_commit, edge.base_commit);
            assert!(!row.patch.is_empty() && !row.test_patch.is_empty());
        } else {
            assert!(row.patch.is_empty() && row.test_patch.is_empty());
        }
    }
    let fix = crawled
        .rows
        .iter()
        .find(|r| r.pull_number == Some(2))
        .unwrap();
    assert!(fix.patch.contains("src/edge/core.py") && !fix.patch.contains("tests/"));
    assert!(
        fix.test_patch
            .contains("rename from tests/test_old_name.py"),
        "{}",
        fix.test_patch
    );
    assert!(fix.test_patch.contains("rename to tests/test_doubling.py"));
    assert!(fix.test_patch.contains("GIT binary patch"));
    assert_eq!(
        fix.problem_statement,
        "answer() returns 41\nIt should return 42.\n"
    );
    // All 104 comments written before the first commit (two pages), and not the one after.
    let hints: Vec<&str> = fix.hints_text.lines().collect();
    assert_eq!(hints.len(), edge.early_comments);
    assert!(hints.iter().all(|h| h.starts_with("Early comment")));
    let keyword = crawled
        .rows
        .iter()
        .find(|r| r.pull_number == Some(4))
        .unwrap();
    assert_eq!(
        keyword.problem_statement,
        "More extras\nAdd the extra modules.\n"
    );
    // One repository call, one search, one batch of keyword-linked issues, one more page of
    // comments: four requests for eleven rows.
    let kinds = kinds(&setup.fake);
    assert_eq!(
        kinds,
        BTreeMap::from([
            ("graphql:KilnIssueComments".to_string(), 1),
            ("graphql:KilnIssues".to_string(), 1),
            ("graphql:KilnPullRequests".to_string(), 1),
            ("rest:/repos/kiln-crawl/edge".to_string(), 1),
        ])
    );
}

#[tokio::test]
async fn faults_and_rate_limits_do_not_change_the_rows() {
    use kiln_testkit::github::Fault;
    let (clean_setup, _) = edge_setup();
    let clean = run(
        request(&clean_setup, edge_settings(&clean_setup)),
        client(&clean_setup, &[("KILN_TEST_TOKEN", "token-a")]),
    )
    .await;
    let (setup, _) = edge_setup();
    // Every fault GitHub answers with, at the first requests of the crawl.
    let faults = [
        Fault::Status(502),
        Fault::Drop,
        Fault::SecondaryLimit {
            retry_after: Some(1),
        },
        Fault::Status(500),
        Fault::Slow(Duration::from_secs(3)),
        Fault::TooManyRequests { retry_after: 1 },
        Fault::SecondaryLimit { retry_after: None },
        Fault::PrimaryLimit {
            reset_after: Duration::from_secs(30),
        },
        Fault::Status(503),
    ];
    // One after the other: they hit the first request and its retries (each retry is a request
    // of its own), five failures within the six tries allowed.
    for (n, fault) in faults.into_iter().enumerate() {
        setup.fake.inject(u64::try_from(n).unwrap() + 1, fault);
    }
    let (faulty_client, notes) = client_with_notes(
        &setup,
        &[
            ("KILN_TEST_TOKEN", "token-a"),
            ("KILN_TEST_TOKEN_2", "token-b"),
        ],
    );
    let faulty = run(
        request(&setup, edge_settings(&setup)),
        Arc::clone(&faulty_client),
    )
    .await;
    assert!(faulty.summary.is_ok(), "{:?}", faulty.summary);
    assert_eq!(faulty.rows, clean.rows);
    let notes = notes.lock().unwrap().clone();
    assert!(
        notes.iter().any(|n| n.contains("secondary rate limit")),
        "{notes:?}"
    );
    let counters = faulty_client.counters();
    assert_eq!(
        counters.get("secondary_limit.waits"),
        Some(&3),
        "{counters:?}"
    );
    assert_eq!(counters.get("retries"), Some(&5), "{counters:?}");
    // The primary limit sent token-a's later requests to token-b.
    let requests = setup.fake.requests();
    let limited = requests.iter().position(|r| r.number == 8).unwrap();
    assert!(
        requests[limited + 1..]
            .iter()
            .any(|r| r.token.as_deref() == Some("token-b")),
        "{requests:#?}"
    );
}

#[tokio::test]
async fn exhausted_tokens_wait_for_their_reset_and_go_on() {
    let (setup, _) = edge_setup();
    // A search costs 13 points: 14 points per 2 s leave the token below the reserve after it.
    setup
        .fake
        .set_quota("token-a", "graphql", 14, Duration::from_secs(2));
    let (clean_setup, _) = edge_setup();
    let clean = run(
        request(&clean_setup, edge_settings(&clean_setup)),
        client(&clean_setup, &[("KILN_TEST_TOKEN", "token-a")]),
    )
    .await;
    let (client, notes) = client_with_notes(&setup, &[("A", "token-a")]);
    let crawled = run(request(&setup, edge_settings(&setup)), Arc::clone(&client)).await;
    assert!(crawled.summary.is_ok(), "{:?}", crawled.summary);
    assert_eq!(crawled.rows, clean.rows, "{:?}", crawled.notes);
    let notes = notes.lock().unwrap().clone();
    assert!(
        notes.iter().any(|n| n.contains("out of graphql quota")),
        "{notes:?}"
    );
    assert!(
        client
            .counters()
            .get("rate_limit.waits")
            .copied()
            .unwrap_or(0)
            >= 1
    );
    assert_eq!(
        client.counters().get("graphql.points").copied(),
        Some(13 + 1 + 1)
    );
}

#[tokio::test]
async fn a_rejected_token_is_an_error_naming_its_variable() {
    let (setup, _) = edge_setup();
    let crawled = run(
        request(&setup, edge_settings(&setup)),
        client(&setup, &[("MY_GITHUB_TOKEN", "not-a-token")]),
    )
    .await;
    let error = crawled.summary.err().unwrap_or_default();
    assert_eq!(
        error,
        "use the GitHub token in $MY_GITHUB_TOKEN: GitHub rejected it (Bad credentials)"
    );
    assert!(!error.contains("not-a-token"));
    assert_eq!(setup.fake.requests().len(), 1, "no retry loop");
}

#[tokio::test]
async fn a_second_crawl_asks_conditionally_and_skips_what_it_has() {
    let setup = demo_setup();
    let first = run(
        request(&setup, settings(&setup)),
        client(&setup, &[("T", "token-a")]),
    )
    .await;
    assert_eq!(first.rows.len(), 4);
    setup.fake.clear_logs();
    // The same window again, as a run that has every row already: the repository answers are
    // 304s (no quota spent) and no row is made twice.
    let mut again = request(&setup, settings(&setup));
    again.prior.seen = first
        .rows
        .iter()
        .map(|r| r.instance_id.to_string())
        .collect();
    let second_client = client(&setup, &[("T", "token-a")]);
    let second = run(again, Arc::clone(&second_client)).await;
    assert!(second.summary.is_ok());
    assert!(second.rows.is_empty(), "{:?}", second.rows);
    let rest: Vec<_> = setup
        .fake
        .requests()
        .into_iter()
        .filter(|r| r.kind.starts_with("rest:"))
        .collect();
    assert_eq!(rest.len(), 4);
    assert!(
        rest.iter().all(|r| r.conditional && r.status == Some(304)),
        "{rest:?}"
    );
    assert_eq!(second_client.counters().get("http.304"), Some(&4));
    // A window an earlier run finished is not searched at all.
    setup.fake.clear_logs();
    let mut covered = request(&setup, settings(&setup));
    for repo in &covered.settings.repos {
        covered.prior.covered.insert(
            repo.to_ascii_lowercase(),
            vec![(covered.since, covered.until)],
        );
    }
    let third = run(covered, client(&setup, &[("T", "token-a")])).await;
    assert_eq!(third.summary.map(|s| s.repositories_done), Ok(4));
    assert!(setup.fake.requests().is_empty());
}

/// A GitHub whose every answer drips (its headers at once, then one byte per second) costs
/// the crawl one request timeout per try, then ends the repository with an error that says
/// so: the timeout bounds the whole answer, not the wait between bytes.
#[tokio::test]
async fn a_dripping_answer_ends_within_the_request_timeout_of_each_try() {
    use kiln_testkit::github::Fault;
    let (setup, _) = edge_setup();
    for n in 1..=6 {
        setup.fake.inject(n, Fault::Drip(Duration::from_secs(1)));
    }
    let started = std::time::Instant::now();
    let crawled = run(
        request(&setup, edge_settings(&setup)),
        client(&setup, &[("KILN_TEST_TOKEN", "token-a")]),
    )
    .await;
    let took = started.elapsed();
    // A transport failure is the repository's, which the crawl records and goes on from.
    assert_eq!(
        crawled.summary.as_ref().map(|s| s.repositories_failed),
        Ok(1),
        "{:?}",
        crawled.summary
    );
    let error = crawled
        .notes
        .iter()
        .find(|n| n.contains("stopped"))
        .unwrap_or_else(|| panic!("no note says why: {:?}", crawled.notes));
    eprintln!("six dripping tries ended the repository in {took:?}: {error}");
    assert!(error.contains("no answer within 2s (6 tries)"), "{error}");
    assert!(error.len() < 400, "the error quotes no body: {error}");
    // Six tries of 2 s and the backoffs between them (20 ms doubling).
    assert!(took < Duration::from_secs(20), "{took:?}");
}

/// A GitHub that asks for a wait of years, or answers with more than kiln reads, ends the crawl
/// at once with an error that says so, instead of hanging or filling memory.
#[tokio::test]
async fn hostile_waits_and_answers_are_refused_at_once() {
    use kiln_testkit::github::Fault;
    for (fault, expected) in [
        (
            Fault::SecondaryLimit {
                retry_after: Some(99_999_999),
            },
            "asked to wait 99999999 s",
        ),
        (
            Fault::TooManyRequests {
                retry_after: 99_999_999,
            },
            "asked to wait 99999999 s",
        ),
        (Fault::Huge(80 << 20), "larger than 64 MiB"),
        (Fault::HugeChunked(80 << 20), "larger than 64 MiB"),
        (
            Fault::PrimaryLimit {
                reset_after: Duration::from_secs(99_999_999),
            },
            "rate limit resets in",
        ),
    ] {
        let (setup, _) = edge_setup();
        setup.fake.inject(1, fault.clone());
        let started = std::time::Instant::now();
        let crawled = run(
            request(&setup, edge_settings(&setup)),
            client(&setup, &[("KILN_TEST_TOKEN", "token-a")]),
        )
        .await;
        let error = crawled.summary.expect_err("the crawl must stop");
        assert!(error.contains(expected), "{fault:?}: {error}");
        assert!(error.len() < 400, "the error quotes no body: {error}");
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{fault:?} took {:?}",
            started.elapsed()
        );
    }
}

/// A search whose every page names a new next page stops at its budget, whichever it passes
/// first: its entries (pages of 1,000 results), its pages (empty ones) or its bytes (pages of
/// 60 MiB, the fifth refused from its `Content-Length` before it is read). The repository
/// fails with the error; the crawl goes on. The fake ends each search a few pages after the
/// budget, so a client without one finishes the repository instead.
#[tokio::test]
async fn endless_searches_stop_at_their_budgets() {
    use kiln_testkit::github::EndlessSearch;
    use kiln_testkit::github::edge::EDGE_REPO;
    for (endless, expected, searches) in [
        (
            EndlessSearch {
                nodes: 1000,
                padding: 0,
                pages: 20,
            },
            "budget of 10000 entries (at page 11)",
            11,
        ),
        (
            EndlessSearch {
                nodes: 0,
                padding: 0,
                pages: 150,
            },
            "budget of 100 pages (at page 101)",
            100,
        ),
        (
            EndlessSearch {
                nodes: 0,
                padding: 60 << 20,
                pages: 8,
            },
            "budget of 256 MiB of answers (at page 5)",
            5,
        ),
    ] {
        let (setup, _) = edge_setup();
        setup.fake.set_endless_search(Some(endless));
        let crawled = run(
            request(&setup, edge_settings(&setup)),
            client(&setup, &[("KILN_TEST_TOKEN", "token-a")]),
        )
        .await;
        let summary = crawled
            .summary
            .expect("a repository's failure does not stop the crawl");
        assert_eq!(summary.repositories_failed, 1, "{endless:?}: {summary:?}");
        let error = crawled.progress[EDGE_REPO]
            .error
            .clone()
            .unwrap_or_default();
        assert!(
            error.contains(
                "page through the pull request search of kiln-crawl/edge merged 2024-09-01T00:00:00Z..2024-10-01T00:00:00Z"
            ) && error.contains(expected),
            "{endless:?}: {error}"
        );
        let asked = setup
            .fake
            .requests()
            .iter()
            .filter(|r| r.kind == "graphql:KilnPullRequests")
            .count();
        assert_eq!(asked, searches, "{endless:?}: no page past the budget");
    }
}

/// A discovery's star range whose pages never end stops at the range's budget, and the
/// discovery with it.
#[tokio::test]
async fn endless_discoveries_stop_at_their_budget() {
    use kiln_core::config::DiscoverSettings;
    use kiln_testkit::github::EndlessSearch;
    let (setup, _) = edge_setup();
    setup.fake.set_endless_search(Some(EndlessSearch {
        nodes: 1000,
        padding: 0,
        pages: 20,
    }));
    let settings = DiscoverSettings {
        language: "Rust".into(),
        min_stars: 100,
        max_stars: 1_000_000,
        min_forks: 10,
        min_language_share: 0.6,
        pushed_after: None,
        max_repos: 100,
    };
    let client = client(&setup, &[("KILN_TEST_TOKEN", "token-a")]);
    let error = kiln_github::crawl::discover(&client, &settings)
        .await
        .expect_err("a discovery past its budget must be an error")
        .to_string();
    assert!(
        error.contains(
            "page through the repository search of Rust with 100..1000000 stars: it goes past its budget of 10000 entries (at page 11)"
        ),
        "{error}"
    );
    assert_eq!(setup.fake.requests().len(), 11);
}

/// An error answer whose message is 30 MB (REST's `message`, GraphQL's `errors`) fails the
/// repository with a message that quotes its head and tail only.
#[tokio::test]
async fn huge_error_messages_are_quoted_short() {
    use kiln_testkit::github::Fault;
    use kiln_testkit::github::edge::EDGE_REPO;
    let cap = kiln_core::net::QUOTE_HEAD + kiln_core::net::QUOTE_TAIL + 256;
    // Request 1 is the repository's REST GET, request 2 its first search.
    for (number, expected) in [(1, "(HTTP 422): xxx"), (2, "run a GitHub query: xxx")] {
        let (setup, _) = edge_setup();
        setup.fake.inject(number, Fault::HugeMessage(30 << 20));
        let crawled = run(
            request(&setup, edge_settings(&setup)),
            client(&setup, &[("KILN_TEST_TOKEN", "token-a")]),
        )
        .await;
        let error = crawled.progress[EDGE_REPO]
            .error
            .clone()
            .unwrap_or_default();
        let start = &error[..error.len().min(300)];
        assert!(error.contains(expected), "request {number}: {start}");
        assert!(
            error.contains("bytes left out"),
            "request {number}: {start}"
        );
        assert!(
            error.len() < cap,
            "request {number}: a message of {} bytes",
            error.len()
        );
        let note = crawled
            .notes
            .iter()
            .map(String::len)
            .max()
            .unwrap_or_default();
        assert!(note < cap, "request {number}: a note of {note} bytes");
    }
}
