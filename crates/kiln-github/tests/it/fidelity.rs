//! The fake GitHub and kiln's client against GitHub's own published artifacts (npm packages
//! installed by `scripts/node-deps.sh`): GraphQL queries and answers against
//! `@octokit/graphql-schema`, REST answers against `@octokit/openapi`, and kiln's response
//! handling on the real recorded exchanges of `@octokit/fixtures`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kiln_core::config::DiscoverSettings;
use kiln_github::crawl::client::github_message;
use kiln_github::crawl::{ClientOptions, GitHub, RateLimitHeaders, Token, discover};
use kiln_testkit::github::{FakeGitHub, FakeRepo};
use kiln_testkit::http::{Reply, Request, Server};
use serde_json::Value;

use crate::crawl::{client, demo_setup, edge_settings, edge_setup, request, run, settings};

/// Where `scripts/node-deps.sh` installed the packages.
#[track_caller]
fn node_modules() -> PathBuf {
    let dir = std::env::var_os("KILN_NODE_MODULES")
        .map_or_else(|| PathBuf::from("/var/cache/kiln-ci/node"), PathBuf::from);
    assert!(
        dir.join("node_modules/@octokit/graphql-schema/schema.graphql")
            .is_file(),
        "GitHub's published schemas are not installed in {}: run `bash scripts/node-deps.sh` \
         (scripts/test.sh does) or set KILN_NODE_MODULES",
        dir.display()
    );
    dir
}

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Repositories for discovery: 1,200 Rust repositories (more than one search can page through,
/// so the star range must be split), and some that discovery must leave out.
fn discovery_repos() -> Vec<FakeRepo> {
    let mut repos = Vec::new();
    for i in 0..1200u64 {
        let mut repo = FakeRepo::new(&format!("rusty/crate-{i:04}"), 9_000_000 + i);
        repo.language = Some("Rust".into());
        repo.stars = 100 + i * 3;
        repo.languages = vec![("Rust".into(), 90_000), ("Shell".into(), 10_000)];
        repos.push(repo);
    }
    let mut mostly_c = FakeRepo::new("rusty/bindings", 9_100_000);
    mostly_c.language = Some("Rust".into());
    mostly_c.stars = 50_000;
    mostly_c.languages = vec![("C".into(), 70_000), ("Rust".into(), 30_000)];
    repos.push(mostly_c);
    let mut archived = FakeRepo::new("rusty/old", 9_100_001);
    archived.language = Some("Rust".into());
    archived.stars = 40_000;
    archived.archived = true;
    repos.push(archived);
    repos
}

#[tokio::test]
async fn discovery_splits_star_ranges_and_keeps_the_main_language() {
    let fake = FakeGitHub::start(discovery_repos(), &["token-a"]).unwrap();
    let mut options = ClientOptions::new(&fake.url());
    options.backoff_base = Duration::from_millis(10);
    let client = GitHub::new(options, vec![Token::new("T", "token-a")], Arc::new(|_| {})).unwrap();
    let settings = DiscoverSettings {
        language: "Rust".into(),
        min_stars: 100,
        max_stars: 1_000_000,
        min_forks: 10,
        min_language_share: 0.6,
        pushed_after: Some("2019-06-01T00:00:00Z".into()),
        max_repos: 1500,
    };
    let found = discover(&client, &settings).await.unwrap();
    assert_eq!(found.len(), 1200, "every fitting repository, none twice");
    assert_eq!(found[0], "rusty/crate-1199", "most starred first");
    assert!(
        !found
            .iter()
            .any(|r| r == "rusty/bindings" || r == "rusty/old")
    );
    let searches = fake
        .requests()
        .iter()
        .filter(|r| r.kind == "graphql:KilnRepositories")
        .count();
    // 1,200 results: the full range is too many, its halves are not; 12 pages of 100 in all,
    // plus the one search that found the range too large.
    assert!(searches >= 13, "{searches} searches");
    let settings = DiscoverSettings {
        max_repos: 5,
        ..settings
    };
    assert_eq!(discover(&client, &settings).await.unwrap().len(), 5);
}

#[tokio::test]
async fn every_query_and_answer_fits_githubs_published_schemas() {
    let modules = node_modules();
    let out = tempfile::tempdir().unwrap();
    // The demo and the edge cases, with a discovery, a missing repository and rate limits, so
    // that every query kiln sends and every kind of answer is recorded.
    let setup = demo_setup();
    let crawled = run(
        request(&setup, settings(&setup)),
        client(&setup, &[("T", "token-a")]),
    )
    .await;
    assert!(crawled.summary.is_ok());
    setup.fake.write_exchanges(out.path()).unwrap();
    let (edge, _) = edge_setup();
    let mut missing = edge_settings(&edge);
    missing.repos.push("kiln-crawl/does-not-exist".into());
    let crawled = run(request(&edge, missing), client(&edge, &[("T", "token-a")])).await;
    assert_eq!(crawled.summary.map(|s| s.repositories_failed), Ok(1));
    edge.fake
        .set_quota("token-a", "graphql", 1, Duration::from_secs(1));
    let limited = client(&edge, &[("T", "token-a")]);
    let _ = limited
        .graphql(
            "probe",
            kiln_github::crawl::query::issue_comments(),
            serde_json::json!({"id": "I_nothing", "after": null}),
        )
        .await;
    edge.fake.write_exchanges(out.path()).unwrap();
    let fake = FakeGitHub::start(discovery_repos(), &["token-a"]).unwrap();
    let client = GitHub::new(
        ClientOptions::new(&fake.url()),
        vec![Token::new("T", "token-a")],
        Arc::new(|_| {}),
    )
    .unwrap();
    let settings = DiscoverSettings {
        language: "Rust".into(),
        min_stars: 100,
        max_stars: 2000,
        min_forks: 0,
        min_language_share: 0.5,
        pushed_after: None,
        max_repos: 10,
    };
    discover(&client, &settings).await.unwrap();
    fake.write_exchanges(out.path()).unwrap();

    let output = std::process::Command::new("node")
        .arg(workspace_root().join("scripts/github-fidelity.mjs"))
        .arg(out.path())
        .env("KILN_NODE_MODULES", &modules)
        .output()
        .unwrap();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "{report}");
    // Every kind of query kiln sends was among those checked.
    let recorded = std::fs::read_to_string(out.path().join("graphql.json")).unwrap();
    for operation in [
        "KilnPullRequests",
        "KilnIssues",
        "KilnIssueComments",
        "KilnRepositories",
    ] {
        assert!(
            recorded.contains(&format!("query {operation}(")),
            "{operation} not recorded"
        );
    }
    let rest = std::fs::read_to_string(out.path().join("rest.json")).unwrap();
    assert!(rest.contains("\"status\": 404") && rest.contains("\"status\": 200"));
}

/// One recorded exchange of `@octokit/fixtures`.
struct Recorded {
    method: String,
    path: String,
    status: u16,
    body: Value,
    headers: BTreeMap<String, String>,
}

#[track_caller]
fn scenario(name: &str) -> Vec<Recorded> {
    let path = node_modules().join(format!(
        "node_modules/@octokit/fixtures/scenarios/api.github.com/{name}/normalized-fixture.json"
    ));
    // A match, not `unwrap_or_else`: a panic in a closure would not point at the caller.
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) => panic!("{}: {e}", path.display()),
    };
    let entries: Vec<Value> = serde_json::from_str(&text).unwrap();
    entries
        .into_iter()
        .map(|e| Recorded {
            method: e["method"]
                .as_str()
                .unwrap_or_default()
                .to_ascii_uppercase(),
            path: e["path"].as_str().unwrap_or_default().to_string(),
            status: u16::try_from(e["status"].as_u64().unwrap_or(0)).unwrap(),
            body: e["response"].clone(),
            headers: e["headers"]
                .as_object()
                .map(|h| {
                    h.iter()
                        .map(|(k, v)| {
                            (
                                k.to_ascii_lowercase(),
                                v.as_str().unwrap_or_default().to_string(),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default(),
        })
        .collect()
}

/// Serves recorded exchanges: the answer whose method and path (with query) match.
fn replay(recorded: Vec<Recorded>) -> Server {
    let recorded = Arc::new(recorded);
    Server::start(move |request: Request, _base: &str| {
        let full = if request.query.is_empty() {
            request.path.clone()
        } else {
            format!("{}?{}", request.path, request.query)
        };
        match recorded
            .iter()
            .find(|r| r.method == request.method && r.path == full)
        {
            Some(r) => {
                let mut reply = Reply::json(r.status, &r.body);
                for (name, value) in &r.headers {
                    if name != "content-length" && name != "content-type" {
                        reply = reply.with_header(name, value.clone());
                    }
                }
                reply
            }
            None => Reply::json(
                404,
                &serde_json::json!({"message": format!("not recorded: {full}")}),
            ),
        }
    })
    .unwrap()
}

#[tokio::test]
async fn kiln_reads_githubs_recorded_answers() {
    // A real repository answer, through kiln's client (conditional GET, headers, body).
    let recorded = scenario("get-repository");
    let expected = recorded[0].body.clone();
    let server = replay(recorded);
    let dir = tempfile::tempdir().unwrap();
    let mut options = ClientOptions::new(&server.url());
    options.etag_dir = Some(dir.path().to_path_buf());
    let client = GitHub::new(options, vec![Token::new("T", "secret")], Arc::new(|_| {})).unwrap();
    let answer = client
        .rest_get("repository", "/repos/octokit-fixture-org/hello-world")
        .await
        .unwrap();
    assert_eq!(answer.status, 200);
    assert_eq!(answer.body, expected);
    assert_eq!(answer.body["full_name"], "octokit-fixture-org/hello-world");
    // The recorded ETag was kept for the next conditional request.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);

    // Rate-limit headers of every recorded answer read as GitHub wrote them.
    let mut read = 0;
    for name in [
        "get-repository",
        "paginate-issues",
        "search-issues",
        "errors",
        "get-organization",
        "labels",
        "get-content",
    ] {
        for exchange in scenario(name) {
            let Some(limits) = RateLimitHeaders::read(&exchange.headers) else {
                continue;
            };
            read += 1;
            assert_eq!(
                limits.remaining.to_string(),
                exchange.headers["x-ratelimit-remaining"],
                "{name} {}",
                exchange.path
            );
            assert_eq!(
                limits.limit.to_string(),
                exchange.headers["x-ratelimit-limit"]
            );
            assert_eq!(
                limits.reset.to_string(),
                exchange.headers["x-ratelimit-reset"]
            );
        }
    }
    assert!(read >= 10, "{read} answers with rate-limit headers");

    // GitHub's validation error, as kiln words it.
    let errors = scenario("errors");
    let message = github_message(&errors[0].body, b"");
    assert_eq!(errors[0].status, 422);
    assert!(message.starts_with("Validation Failed: "), "{message}");
    assert!(message.len() > "Validation Failed: ".len(), "{message}");
}
