//! A fake GitHub on loopback: the REST and GraphQL subset kiln's crawl uses, in GitHub's real
//! response shapes, with GitHub's rate-limit accounting and faults on a schedule.
//!
//! - `POST /graphql` runs any query over the fake's repositories ([`graphql`]), charging its
//!   cost in points as GitHub computes it and answering `rateLimit` truthfully.
//! - `GET /repos/{owner}/{repo}` answers a `full-repository` with an `ETag`; `If-None-Match`
//!   gets a 304 that costs no quota, as on GitHub.
//! - `GET /rate_limit` answers every token's quotas.
//! - Every answer carries `x-ratelimit-*` headers; a token over its quota gets GitHub's primary
//!   limit answers (403 for REST, a `RATE_LIMITED` error for GraphQL); an unknown token gets 401.
//! - [`FakeGitHub::inject`] schedules faults by request number: 401, secondary limits with or
//!   without `retry-after`, primary limits, 5xx, slow answers and dropped connections.
//! - Every request is logged ([`FakeGitHub::requests`]), and every GraphQL exchange kept
//!   ([`FakeGitHub::exchanges`]) so CI can check queries and answers against GitHub's schema.

pub mod edge;
pub mod encoding;
pub mod fixtures;
pub mod graphql;
pub mod model;
pub mod rest;
mod search;
pub mod synthetic;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

pub use fixtures::fake_repos;
pub use model::{FakeComment, FakeFile, FakeIssue, FakePull, FakeRepo};

use crate::TestkitError;
use crate::http::{Reply, Request, Server};

/// A fault the fake answers with instead of (or on top of) the normal answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// This status with GitHub's error body (500, 502, 503).
    Status(u16),
    /// 401 Bad credentials, whatever the token.
    Unauthorized,
    /// A secondary rate limit: 403 with `retry-after` when given, else the message alone.
    SecondaryLimit {
        /// Seconds in `retry-after`.
        retry_after: Option<u64>,
    },
    /// 429 Too Many Requests with `retry-after`.
    TooManyRequests {
        /// Seconds in `retry-after`.
        retry_after: u64,
    },
    /// The token's quota of the request's resource runs out now, resetting after this long.
    PrimaryLimit {
        /// Time until the reset.
        reset_after: Duration,
    },
    /// The normal answer, after this delay.
    Slow(Duration),
    /// The connection closes without an answer.
    Drop,
    /// A 200 answer of this many bytes (a JSON string of padding) with its `Content-Length`:
    /// a hostile or broken server. Its headers go out at once and its body as it is read.
    Huge(usize),
    /// [`Fault::Huge`] without `Content-Length` (a chunked body): only reading it tells its size.
    HugeChunked(usize),
    /// An error whose message is this many bytes: a 422 `{"message": ...}` to a REST request,
    /// a 200 with `{"errors": [{"message": ...}]}` to a GraphQL one.
    HugeMessage(usize),
    /// The normal answer, its headers at once and its body one byte per this long.
    Drip(Duration),
}

/// Searches that do not end ([`FakeGitHub::set_endless_search`]): every answer to a search
/// (of pull requests or of repositories) is a page whose `pageInfo` names a next page with a
/// cursor no page named before. Its results are issues or users, which the crawl leaves out,
/// and its count stays under the search cap, so no segment or star range is split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndlessSearch {
    /// Results per page (GitHub sends at most 100; a hostile server, any number).
    pub nodes: usize,
    /// Bytes of padding per answer, in its `extensions`; the answer is made as it is read.
    pub padding: usize,
    /// The page that names no next page, so that a client without a budget ends too and its
    /// test fails instead of running for ever.
    pub pages: u64,
}

/// One logged request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LoggedRequest {
    /// 1-based number in arrival order.
    pub number: u64,
    /// `GET`, `POST`.
    pub method: String,
    /// Path.
    pub path: String,
    /// `graphql:<operation name>` or `rest:<path>`.
    pub kind: String,
    /// Status answered (`None`: dropped).
    pub status: Option<u16>,
    /// Whether the request was conditional (`If-None-Match`).
    pub conditional: bool,
    /// The token it carried (the fake's tokens are test values).
    pub token: Option<String>,
}

/// One REST answer of the fake, for the OpenAPI check.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RestAnswer {
    /// Method.
    pub method: String,
    /// Path.
    pub path: String,
    /// Status.
    pub status: u16,
    /// JSON body (`null` when empty).
    pub body: Value,
}

/// One GraphQL exchange: what was asked and answered.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Exchange {
    /// The query document.
    pub query: String,
    /// Its variables.
    pub variables: Value,
    /// The answer body.
    pub response: Value,
}

#[derive(Debug, Clone, Copy)]
struct Quota {
    limit: u64,
    remaining: u64,
    reset: DateTime<Utc>,
    window: Duration,
}

impl Quota {
    fn new(limit: u64, window: Duration) -> Self {
        Self {
            limit,
            remaining: limit,
            reset: whole_seconds(Utc::now() + window),
            window,
        }
    }

    fn refresh(&mut self, now: DateTime<Utc>) {
        if now >= self.reset {
            self.remaining = self.limit;
            self.reset = whole_seconds(now + self.window);
        }
    }
}

struct TokenQuotas {
    core: Quota,
    graphql: Quota,
}

struct State {
    repos: Vec<FakeRepo>,
    tokens: BTreeMap<String, TokenQuotas>,
    faults: BTreeMap<u64, Fault>,
    next: u64,
    requests: Vec<LoggedRequest>,
    exchanges: Vec<Exchange>,
    rest_answers: Vec<RestAnswer>,
    keep_exchanges: bool,
    delay: Duration,
    endless: Option<EndlessSearch>,
}

/// The running fake GitHub.
pub struct FakeGitHub {
    server: Server,
    state: Arc<Mutex<State>>,
}

/// GitHub's defaults: 5,000 REST requests and 5,000 GraphQL points an hour per token.
const DEFAULT_LIMIT: u64 = 5000;

impl FakeGitHub {
    /// Serves `repos` to clients holding one of `tokens`, each with GitHub's default quotas.
    ///
    /// # Errors
    /// When the server cannot start.
    pub fn start(repos: Vec<FakeRepo>, tokens: &[&str]) -> Result<Self, TestkitError> {
        Self::start_on(repos, tokens, 0)
    }

    /// [`FakeGitHub::start`] on a chosen port (0 = any).
    ///
    /// # Errors
    /// When the server cannot start.
    pub fn start_on(
        repos: Vec<FakeRepo>,
        tokens: &[&str],
        port: u16,
    ) -> Result<Self, TestkitError> {
        let hour = Duration::from_secs(3600);
        let state = Arc::new(Mutex::new(State {
            repos,
            tokens: tokens
                .iter()
                .map(|t| {
                    (
                        (*t).to_string(),
                        TokenQuotas {
                            core: Quota::new(DEFAULT_LIMIT, hour),
                            graphql: Quota::new(DEFAULT_LIMIT, hour),
                        },
                    )
                })
                .collect(),
            faults: BTreeMap::new(),
            next: 0,
            requests: Vec::new(),
            exchanges: Vec::new(),
            rest_answers: Vec::new(),
            keep_exchanges: true,
            delay: Duration::ZERO,
            endless: None,
        }));
        let shared = Arc::clone(&state);
        let server = Server::start_on(
            move |request: Request, base: &str| handle(&shared, request, base),
            port,
        )?;
        Ok(Self { server, state })
    }

    /// The API root (`http://127.0.0.1:PORT`), for kiln's `api_url`.
    #[must_use]
    pub fn url(&self) -> String {
        self.server.url()
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut state)
    }

    /// Answers request number `number` (1-based, counting every request) with `fault`.
    pub fn inject(&self, number: u64, fault: Fault) {
        self.with(|s| s.faults.insert(number, fault));
    }

    /// Sets a token's quota of `resource` (`core` or `graphql`): `limit` per `window`, full now.
    pub fn set_quota(&self, token: &str, resource: &str, limit: u64, window: Duration) {
        self.with(|s| {
            if let Some(quotas) = s.tokens.get_mut(token) {
                let quota = Quota::new(limit, window);
                if resource == "graphql" {
                    quotas.graphql = quota;
                } else {
                    quotas.core = quota;
                }
            }
        });
    }

    /// Delays every answer by `delay` (a slow network), for tests that must interrupt a crawl.
    pub fn set_delay(&self, delay: Duration) {
        self.with(|s| s.delay = delay);
    }

    /// From now on, searches answer as `endless` says (`None`: as GitHub does).
    pub fn set_endless_search(&self, endless: Option<EndlessSearch>) {
        self.with(|s| s.endless = endless);
    }

    /// Whether GraphQL exchanges are kept (on by default; a benchmark turns it off).
    pub fn keep_exchanges(&self, keep: bool) {
        self.with(|s| s.keep_exchanges = keep);
    }

    /// Every request so far.
    #[must_use]
    pub fn requests(&self) -> Vec<LoggedRequest> {
        self.with(|s| s.requests.clone())
    }

    /// Every GraphQL exchange so far.
    #[must_use]
    pub fn exchanges(&self) -> Vec<Exchange> {
        self.with(|s| s.exchanges.clone())
    }

    /// Every REST answer so far.
    #[must_use]
    pub fn rest_answers(&self) -> Vec<RestAnswer> {
        self.with(|s| s.rest_answers.clone())
    }

    /// Forgets the logs (not the quotas or the schedule).
    pub fn clear_logs(&self) {
        self.with(|s| {
            s.requests.clear();
            s.exchanges.clear();
            s.rest_answers.clear();
        });
    }

    /// Appends the GraphQL exchanges to `dir/graphql.json` and the REST answers to
    /// `dir/rest.json` (JSON arrays), for `scripts/github-fidelity.mjs`.
    ///
    /// # Errors
    /// When a file cannot be read or written.
    pub fn write_exchanges(&self, dir: &Path) -> Result<(), TestkitError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| TestkitError::Io { path, source }
        };
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let append = |name: &str, items: Vec<Value>| -> Result<(), TestkitError> {
            let path = dir.join(name);
            let mut all: Vec<Value> = match std::fs::read(&path) {
                Ok(text) => serde_json::from_slice(&text)?,
                Err(_) => Vec::new(),
            };
            all.extend(items);
            std::fs::write(&path, serde_json::to_vec_pretty(&all)?).map_err(io(&path))
        };
        let exchanges = self
            .exchanges()
            .into_iter()
            .map(|e| serde_json::to_value(e).unwrap_or_default())
            .collect();
        append("graphql.json", exchanges)?;
        let answers = self
            .rest_answers()
            .into_iter()
            .map(|a| serde_json::to_value(a).unwrap_or_default())
            .collect();
        append("rest.json", answers)
    }

    /// Adds a repository, or replaces the one with its name (a later month's data).
    pub fn put_repo(&self, repo: FakeRepo) {
        self.with(|s| {
            s.repos.retain(|r| r.full_name != repo.full_name);
            s.repos.push(repo);
        });
    }
}

/// GitHub resets quotas on whole seconds (`x-ratelimit-reset` is Unix seconds).
fn whole_seconds(time: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp(time.timestamp(), 0).unwrap_or(time)
}

fn handle(state: &Mutex<State>, request: Request, base: &str) -> Reply {
    let mut state = state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    state.next += 1;
    let number = state.next;
    let fault = state.faults.remove(&number);
    let conditional = request.header("if-none-match").is_some();
    let kind = if request.path == "/graphql" {
        let operation = serde_json::from_slice::<Value>(&request.body)
            .ok()
            .and_then(|v| v.get("query").and_then(Value::as_str).map(operation_name))
            .unwrap_or_default();
        format!("graphql:{operation}")
    } else {
        format!("rest:{}", request.path)
    };
    let mut reply = match &fault {
        Some(Fault::Drop) => Reply::Drop,
        Some(Fault::Status(status)) => Reply::json(
            *status,
            &json!({"message": "Server Error", "documentation_url": "https://docs.github.com/rest"}),
        ),
        Some(Fault::Unauthorized) => unauthorized(),
        Some(Fault::SecondaryLimit { retry_after }) => {
            let reply = Reply::json(
                403,
                &json!({"message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID.", "documentation_url": "https://docs.github.com/free-pro-team@latest/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}),
            );
            match retry_after {
                Some(seconds) => reply.with_header("retry-after", seconds.to_string()),
                None => reply,
            }
        }
        Some(Fault::TooManyRequests { retry_after }) => Reply::json(
            429,
            &json!({"message": "Too many requests", "documentation_url": "https://docs.github.com/rest"}),
        )
        .with_header("retry-after", retry_after.to_string()),
        Some(Fault::PrimaryLimit { reset_after }) => {
            let token = bearer(&request).unwrap_or_default();
            let graphql = request.path == "/graphql";
            if let Some(quotas) = state.tokens.get_mut(&token) {
                let quota = if graphql { &mut quotas.graphql } else { &mut quotas.core };
                quota.remaining = 0;
                quota.reset = whole_seconds(Utc::now() + *reset_after);
            }
            answer(&mut state, &request, base)
        }
        Some(Fault::Slow(delay)) => answer(&mut state, &request, base).delayed(*delay),
        Some(Fault::Drip(every)) => match answer(&mut state, &request, base) {
            Reply::Response {
                status,
                headers,
                body,
                ..
            } => Reply::Drip {
                status,
                headers,
                body,
                every: *every,
            },
            other => other,
        },
        Some(Fault::Huge(bytes)) => huge(*bytes, true),
        Some(Fault::HugeChunked(bytes)) => huge(*bytes, false),
        Some(Fault::HugeMessage(bytes)) => {
            let (status, head, tail) = if request.path == "/graphql" {
                (
                    200,
                    "{\"data\":null,\"errors\":[{\"type\":\"UNPROCESSABLE\",\"message\":\"",
                    "\"}]}",
                )
            } else {
                (422, "{\"message\":\"", "\"}")
            };
            Reply::Stream {
                status,
                headers: vec![("content-type".into(), "application/json".into())],
                head: head.into(),
                fill: b'x',
                fill_len: *bytes,
                tail: tail.into(),
                announced: true,
            }
        }
        None => match state.endless {
            Some(endless) if bearer(&request).is_some() && kind_is_search(&kind) => {
                endless_page(endless, &request)
            }
            _ => answer(&mut state, &request, base).delayed(state.delay),
        },
    };
    if fault.is_some()
        && !matches!(
            fault,
            Some(
                Fault::PrimaryLimit { .. }
                    | Fault::Slow(_)
                    | Fault::Drop
                    | Fault::Huge(_)
                    | Fault::HugeChunked(_)
                    | Fault::HugeMessage(_)
                    | Fault::Drip(_)
            )
        )
    {
        // Fault answers carry the token's quota headers, as GitHub's error answers do.
        let token = bearer(&request).unwrap_or_default();
        let resource = if request.path == "/graphql" {
            "graphql"
        } else {
            "core"
        };
        if let Some(quotas) = state.tokens.get(&token) {
            let quota = if resource == "graphql" {
                quotas.graphql
            } else {
                quotas.core
            };
            reply = with_quota_headers(reply, &quota, resource);
        }
    }
    if request.path != "/graphql"
        && state.keep_exchanges
        && let Reply::Response { status, body, .. } = &reply
    {
        let body = serde_json::from_slice(body).unwrap_or(Value::Null);
        state.rest_answers.push(RestAnswer {
            method: request.method.clone(),
            path: request.path.clone(),
            status: *status,
            body,
        });
    }
    state.requests.push(LoggedRequest {
        number,
        method: request.method.clone(),
        path: request.path.clone(),
        kind,
        status: reply.status(),
        conditional,
        token: bearer(&request),
    });
    reply.with_header("x-github-request-id", format!("KILN:{number:08X}"))
}

/// A 200 answer of `bytes` bytes, `{"data":"xxx…"}`, made as the client reads it; its length
/// is announced in `Content-Length` when `announced`.
fn huge(bytes: usize, announced: bool) -> Reply {
    let head = "{\"data\":\"";
    let tail = "\"}";
    Reply::Stream {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        head: head.into(),
        fill: b'x',
        fill_len: bytes.saturating_sub(head.len() + tail.len()),
        tail: tail.into(),
        announced,
    }
}

/// Whether a request of `kind` (`graphql:<operation>`) is one of the crawl's searches.
fn kind_is_search(kind: &str) -> bool {
    matches!(
        kind,
        "graphql:KilnPullRequests" | "graphql:KilnRepositories"
    )
}

/// A page of an endless search: its number is one more than the one its `after` cursor
/// (`endless-N`) names.
fn endless_page(endless: EndlessSearch, request: &Request) -> Reply {
    let after = serde_json::from_slice::<Value>(&request.body)
        .ok()
        .and_then(|body| {
            body.pointer("/variables/after")
                .and_then(Value::as_str)
                .and_then(|a| a.strip_prefix("endless-"))
                .and_then(|n| n.parse::<u64>().ok())
        })
        .unwrap_or(0);
    let page = after + 1;
    let nodes: Vec<Value> = (0..endless.nodes)
        .map(|i| json!({"__typename": "User", "number": i, "nameWithOwner": format!("endless/user-{i}")}))
        .collect();
    let data = json!({"search": {
        "issueCount": 500,
        "repositoryCount": 500,
        "pageInfo": {"hasNextPage": page < endless.pages, "endCursor": format!("endless-{page}")},
        "nodes": nodes,
    }});
    // `{"data": ..., "extensions": {"padding": "xxx…"}}`, the padding made as it is read.
    let head = format!("{{\"data\":{data},\"extensions\":{{\"padding\":\"");
    let tail = "\"}}";
    Reply::Stream {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        head: head.into(),
        fill: b'x',
        fill_len: endless.padding,
        tail: tail.into(),
        announced: true,
    }
}

/// The operation name of a query document (`query Name(...)`), or empty.
fn operation_name(query: &str) -> String {
    let rest = query.trim_start();
    let Some(rest) = rest.strip_prefix("query") else {
        return String::new();
    };
    rest.trim_start()
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

fn bearer(request: &Request) -> Option<String> {
    let value = request.header("authorization")?;
    value
        .strip_prefix("Bearer ")
        .or_else(|| value.strip_prefix("bearer "))
        .or_else(|| value.strip_prefix("token "))
        .map(str::to_string)
}

fn unauthorized() -> Reply {
    Reply::json(401, &rest::basic_error("Bad credentials", "", 401))
}

fn with_quota_headers(reply: Reply, quota: &Quota, resource: &str) -> Reply {
    reply
        .with_header("x-ratelimit-limit", quota.limit.to_string())
        .with_header("x-ratelimit-remaining", quota.remaining.to_string())
        .with_header("x-ratelimit-reset", quota.reset.timestamp().to_string())
        .with_header(
            "x-ratelimit-used",
            (quota.limit - quota.remaining).to_string(),
        )
        .with_header("x-ratelimit-resource", resource)
}

/// The normal answer to a request.
fn answer(state: &mut State, request: &Request, base: &str) -> Reply {
    let Some(token) = bearer(request) else {
        return Reply::json(
            401,
            &rest::basic_error(
                "Requires authentication",
                "/overview/authenticating-to-the-rest-api",
                401,
            ),
        );
    };
    if !state.tokens.contains_key(&token) {
        return unauthorized();
    }
    let now = Utc::now();
    match (request.method.as_str(), request.path.as_str()) {
        ("POST", "/graphql") => graphql_answer(state, &token, request, now),
        ("GET", "/rate_limit") => {
            let Some(quotas) = state.tokens.get_mut(&token) else {
                return unauthorized();
            };
            quotas.core.refresh(now);
            quotas.graphql.refresh(now);
            let entry = |q: &Quota| json!({"limit": q.limit, "remaining": q.remaining, "reset": q.reset.timestamp(), "used": q.limit - q.remaining});
            let body = json!({
                "resources": {"core": entry(&quotas.core), "graphql": entry(&quotas.graphql)},
                "rate": entry(&quotas.core)
            });
            let core = quotas.core;
            with_quota_headers(Reply::json(200, &body), &core, "core")
        }
        ("GET", path) if path.starts_with("/repos/") => {
            rest_repository(state, &token, request, base, now)
        }
        _ => Reply::json(404, &rest::basic_error("Not Found", "", 404)),
    }
}

fn rest_repository(
    state: &mut State,
    token: &str,
    request: &Request,
    base: &str,
    now: DateTime<Utc>,
) -> Reply {
    let full_name = request
        .path
        .trim_start_matches("/repos/")
        .trim_end_matches('/');
    let body = state
        .repos
        .iter()
        .find(|r| {
            r.full_name.eq_ignore_ascii_case(full_name) && full_name.matches('/').count() == 1
        })
        .map(|repo| rest::full_repository(repo, base));
    let Some(quotas) = state.tokens.get_mut(token) else {
        return unauthorized();
    };
    let quota = &mut quotas.core;
    quota.refresh(now);
    if quota.remaining == 0 {
        let q = *quota;
        return with_quota_headers(
            Reply::json(
                403,
                &json!({"message": "API rate limit exceeded for user ID 1000. If you reach out to GitHub Support for help, please include the request ID.", "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"}),
            ),
            &q,
            "core",
        );
    }
    let Some(body) = body else {
        quota.remaining -= 1;
        let q = *quota;
        return with_quota_headers(
            Reply::json(
                404,
                &rest::basic_error("Not Found", "/repos/repos#get-a-repository", 404),
            ),
            &q,
            "core",
        );
    };
    let text = serde_json::to_vec(&body).unwrap_or_default();
    let digest = Sha256::digest(&text);
    let etag = format!(
        "W/\"{}\"",
        digest
            .iter()
            .take(16)
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    );
    if request.header("if-none-match") == Some(etag.as_str()) {
        // A 304 costs no quota.
        let q = *quota;
        return with_quota_headers(Reply::bytes(304, Vec::new()), &q, "core")
            .with_header("etag", etag);
    }
    quota.remaining -= 1;
    let q = *quota;
    with_quota_headers(Reply::json(200, &body), &q, "core")
        .with_header("etag", etag)
        .with_header("cache-control", "private, max-age=60, s-maxage=60")
        .with_header("vary", "Accept, Authorization, Cookie, X-GitHub-OTP")
}

fn graphql_answer(state: &mut State, token: &str, request: &Request, now: DateTime<Utc>) -> Reply {
    let Ok(body) = serde_json::from_slice::<Value>(&request.body) else {
        return Reply::json(
            400,
            &json!({"message": "Problems parsing JSON", "documentation_url": "https://docs.github.com/graphql"}),
        );
    };
    let query = body
        .get("query")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let variables = body.get("variables").cloned().unwrap_or(Value::Null);
    let prepared = match graphql::prepare(&query, &variables) {
        Ok(p) => p,
        Err(errors) => return Reply::json(200, &errors),
    };
    let Some(quotas) = state.tokens.get_mut(token) else {
        return unauthorized();
    };
    let quota = &mut quotas.graphql;
    quota.refresh(now);
    let response = if quota.remaining < prepared.cost {
        json!({"errors": [{"type": "RATE_LIMITED", "code": "graphql_rate_limit", "message": "API rate limit already exceeded for user ID 1000."}]})
    } else {
        quota.remaining -= prepared.cost;
        let rate = graphql::RateInfo {
            cost: prepared.cost,
            limit: quota.limit,
            remaining: quota.remaining,
            reset_at: quota.reset,
        };
        graphql::execute(&prepared, &state.repos, &variables, rate)
    };
    let q = state.tokens.get(token).map(|t| t.graphql);
    if state.keep_exchanges {
        state.exchanges.push(Exchange {
            query,
            variables,
            response: response.clone(),
        });
    }
    let reply = Reply::json(200, &response);
    match q {
        Some(q) => with_quota_headers(reply, &q, "graphql"),
        None => reply,
    }
}
