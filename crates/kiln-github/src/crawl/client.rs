//! The GitHub client of the crawl, on octocrab's transport.
//!
//! octocrab sends the requests (hyper, rustls, base URL, bearer token); this module decides what
//! to do with every answer, because the crawl's economy depends on it:
//! - primary rate limits are read from every response (`x-ratelimit-*` headers, GraphQL
//!   `rateLimit`), per token and per resource; a request goes to the token with the most quota
//!   left, and the client sleeps only when every token is below its reserve, until the earliest
//!   reset;
//! - secondary limits (`retry-after`, a 403 or 429 saying so) wait as told, or a minute and
//!   doubling when not told;
//! - 5xx answers, timeouts and dropped connections are retried with exponential backoff and
//!   jitter, a bounded number of times;
//! - a token GitHub rejects (401) is an error naming its variable, never a retry;
//! - REST GETs are conditional (`If-None-Match` with the ETag kept on disk), so an unchanged
//!   answer is a 304 that costs no quota;
//! - at most `requests_in_flight` requests are under way at once;
//! - every answer is read up to [`MAX_ANSWER_BYTES`] (refused at once when its
//!   `Content-Length` says more, else counted as it streams in), and the pages of a listing
//!   together up to its budget ([`Listing`]);
//! - what GitHub sent appears in an error or a note only as a short quote of its head and tail
//!   (`kiln_core::net::quote`);
//! - every request is counted by kind.
//!
//! Token values live only in the octocrab clients; errors, notes and counters name the
//! environment variable instead.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use http_body_util::BodyExt as _;
use kiln_core::net::quote;
use octocrab::Octocrab;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::error::CrawlError;
use super::listing::Listing;

/// The longest wait kiln takes when GitHub asks for one (`retry-after`, a rate limit's reset):
/// primary limits reset within the hour, secondary ones ask for seconds to minutes. A server
/// asking for longer is refused with an error rather than waited for.
pub const MAX_SERVER_WAIT: Duration = Duration::from_secs(3660);

pub use super::listing::MAX_ANSWER_BYTES;

/// A token and the environment variable it came from.
#[derive(Clone)]
pub struct Token {
    /// Name of the environment variable (what messages show).
    pub env: String,
    /// The value, never shown.
    secret: String,
}

impl Token {
    /// A token read from variable `env`.
    #[must_use]
    pub fn new(env: &str, secret: &str) -> Self {
        Self {
            env: env.to_string(),
            secret: secret.to_string(),
        }
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Token({}: <redacted>)", self.env)
    }
}

/// How the client talks to GitHub.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// REST root, without a trailing slash (`https://api.github.com`, `https://host/api/v3`).
    pub api_url: String,
    /// Requests under way at once.
    pub requests_in_flight: usize,
    /// First backoff after a server error (doubled each retry, with jitter); a secondary limit
    /// without `retry-after` waits 60 times this.
    pub backoff_base: Duration,
    /// Tries of one request before its failure is final.
    pub max_attempts: u32,
    /// Timeout of one request (connect and read).
    pub timeout: Duration,
    /// Quota kept back per token and resource: below it, the token counts as exhausted.
    pub reserve: u64,
    /// Where REST ETags and bodies are kept between runs (`None`: no conditional requests).
    pub etag_dir: Option<PathBuf>,
}

impl ClientOptions {
    /// Defaults for the public API at `api_url`.
    #[must_use]
    pub fn new(api_url: &str) -> Self {
        Self {
            api_url: api_url.trim_end_matches('/').to_string(),
            requests_in_flight: 2,
            backoff_base: Duration::from_secs(1),
            max_attempts: 6,
            timeout: Duration::from_secs(60),
            reserve: 50,
            etag_dir: None,
        }
    }

    /// The GraphQL endpoint's root: `https://api.github.com` for the public API, `https://host/api`
    /// for GitHub Enterprise Server, whose REST root is `https://host/api/v3`.
    fn graphql_root(&self) -> String {
        self.api_url
            .strip_suffix("/v3")
            .unwrap_or(&self.api_url)
            .to_string()
    }
}

/// Quota of one token for one resource, as the last response said.
#[derive(Debug, Clone, Copy, Default)]
struct Quota {
    remaining: Option<u64>,
    /// Unix seconds of the next reset.
    reset: Option<i64>,
}

struct TokenState {
    token: Token,
    rest: Octocrab,
    graphql: Octocrab,
    quotas: BTreeMap<&'static str, Quota>,
}

/// The rate-limit resource a request spends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    /// REST (`core`).
    Core,
    /// The GraphQL API.
    GraphQl,
}

impl Resource {
    fn name(self) -> &'static str {
        match self {
            Self::Core => "core",
            Self::GraphQl => "graphql",
        }
    }
}

/// A REST answer.
#[derive(Debug, Clone)]
pub struct RestAnswer {
    /// The status (304 answers are returned as the cached 200).
    pub status: u16,
    /// The JSON body (`null` when empty or not JSON).
    pub body: Value,
    /// Whether the body came from the ETag cache (a 304).
    pub not_modified: bool,
}

/// The crawl's GitHub client.
pub struct GitHub {
    options: ClientOptions,
    tokens: Mutex<Vec<TokenState>>,
    in_flight: tokio::sync::Semaphore,
    counters: Mutex<BTreeMap<String, u64>>,
    notes: Arc<dyn Fn(String) + Send + Sync>,
    jitter: AtomicU64,
}

impl GitHub {
    /// A client using `tokens` in turn; `notes` receives what a user should see (waits for a
    /// rate limit).
    ///
    /// # Errors
    /// When no token is given or a client cannot be built from the options.
    pub fn new(
        options: ClientOptions,
        tokens: Vec<Token>,
        notes: Arc<dyn Fn(String) + Send + Sync>,
    ) -> Result<Self, CrawlError> {
        if tokens.is_empty() {
            return Err(CrawlError::NoToken);
        }
        let build = |root: &str, token: &Token| -> Result<Octocrab, CrawlError> {
            Octocrab::builder()
                .base_uri(root)
                .map_err(|e| CrawlError::Config(format!("api_url {root}: {}", first_line(&e))))?
                .personal_token(token.secret.clone())
                .set_connect_timeout(Some(options.timeout))
                .set_read_timeout(Some(options.timeout))
                .set_write_timeout(Some(options.timeout))
                .build()
                .map_err(|e| CrawlError::Config(format!("build a client: {}", first_line(&e))))
        };
        let mut states = Vec::new();
        for token in tokens {
            states.push(TokenState {
                rest: build(&options.api_url, &token)?,
                graphql: build(&options.graphql_root(), &token)?,
                token,
                quotas: BTreeMap::new(),
            });
        }
        Ok(Self {
            in_flight: tokio::sync::Semaphore::new(options.requests_in_flight.max(1)),
            options,
            tokens: Mutex::new(states),
            counters: Mutex::new(BTreeMap::new()),
            notes,
            jitter: AtomicU64::new(0),
        })
    }

    /// Requests made so far, by kind (`graphql.search_prs`, `rest.repository`, ...), and the
    /// events around them (`http.304`, `retries`, `rate_limit.waits`, `graphql.points`).
    #[must_use]
    pub fn counters(&self) -> BTreeMap<String, u64> {
        self.counters.lock().map(|c| c.clone()).unwrap_or_default()
    }

    fn count(&self, key: &str, by: u64) {
        if let Ok(mut counters) = self.counters.lock() {
            *counters.entry(key.to_string()).or_default() += by;
        }
    }

    /// Sends a GraphQL query and returns its `data`. `kind` names the query in the counters.
    ///
    /// # Errors
    /// A rejected token, GraphQL errors in the answer, or a request that kept failing.
    pub async fn graphql(
        &self,
        kind: &str,
        query: &str,
        variables: Value,
    ) -> Result<Value, CrawlError> {
        match self
            .graphql_within(kind, query, variables, MAX_ANSWER_BYTES)
            .await?
        {
            Some((data, _)) => Ok(data),
            None => Err(too_large(&format!("graphql.{kind}"))),
        }
    }

    /// [`GitHub::graphql`] for one page of each of `listings` (a search's pages, and the
    /// discovery they are part of): the page counts against every listing's budget, and its
    /// answer is read no further than the smallest rest of their byte budgets.
    ///
    /// # Errors
    /// As [`GitHub::graphql`], and a listing past its budget of pages or bytes.
    pub async fn graphql_page(
        &self,
        listings: &mut [&mut Listing],
        kind: &str,
        query: &str,
        variables: Value,
    ) -> Result<Value, CrawlError> {
        let mut cap = MAX_ANSWER_BYTES;
        let mut tightest = None;
        for (index, listing) in listings.iter_mut().enumerate() {
            let room = listing.start_page()?;
            if room < cap || tightest.is_none() {
                cap = room.min(cap);
                tightest = Some(index);
            }
        }
        match self.graphql_within(kind, query, variables, cap).await? {
            Some((data, bytes)) => {
                for listing in listings.iter_mut() {
                    listing.add_bytes(bytes);
                }
                Ok(data)
            }
            None if cap < MAX_ANSWER_BYTES => Err(tightest
                .and_then(|index| listings.get(index))
                .map_or_else(|| too_large(&format!("graphql.{kind}")), |l| l.over_bytes())),
            None => Err(too_large(&format!("graphql.{kind}"))),
        }
    }

    /// Sends a GraphQL query and returns its `data` and the length of its answer; `None` when
    /// the answer is longer than `cap` bytes.
    async fn graphql_within(
        &self,
        kind: &str,
        query: &str,
        variables: Value,
        cap: usize,
    ) -> Result<Option<(Value, usize)>, CrawlError> {
        let body = serde_json::json!({"query": query, "variables": variables});
        let mut limited = 0;
        loop {
            let answer = self
                .send(Resource::GraphQl, &format!("graphql.{kind}"), cap, |octo| {
                    let body = body.clone();
                    Box::pin(async move { octo._post("/graphql", Some(&body)).await })
                })
                .await?;
            let Some((token_index, status, headers, bytes)) = answer else {
                return Ok(None);
            };
            let json: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            if status != 200 {
                return Err(CrawlError::Http {
                    status,
                    message: github_message(&json, &bytes),
                });
            }
            if let Some(limit) = json.pointer("/data/rateLimit") {
                self.note_graphql_limit(token_index, limit);
            }
            let errors = json.get("errors").and_then(Value::as_array);
            if let Some(errors) = errors.filter(|e| !e.is_empty()) {
                // GitHub answers 200 with a RATE_LIMITED error when the points run out.
                if errors
                    .iter()
                    .any(|e| e.get("type").and_then(Value::as_str) == Some("RATE_LIMITED"))
                    && limited < self.options.max_attempts
                {
                    limited += 1;
                    self.exhaust(token_index, Resource::GraphQl, &headers);
                    continue;
                }
                let messages: Vec<String> = errors
                    .iter()
                    .map(|e| {
                        e.get("message")
                            .and_then(Value::as_str)
                            .unwrap_or("an error without a message")
                            .to_string()
                    })
                    .collect();
                let message = quote(&messages.join("; "));
                let not_found = errors
                    .iter()
                    .all(|e| e.get("type").and_then(Value::as_str) == Some("NOT_FOUND"));
                return Err(if not_found {
                    CrawlError::NotFound(message)
                } else {
                    CrawlError::GraphQl(message)
                });
            }
            let data = json.get("data").cloned().unwrap_or(Value::Null);
            return Ok(Some((data, bytes.len())));
        }
    }

    /// A conditional REST GET of `path` (relative to the API root). 404 is an answer, not an
    /// error, so callers can say which repository does not exist.
    ///
    /// # Errors
    /// A rejected token, or a request that kept failing.
    pub async fn rest_get(&self, kind: &str, path: &str) -> Result<RestAnswer, CrawlError> {
        let cache = self.etag_entry(path);
        let cached: Option<(String, Value)> = cache.as_ref().and_then(|file| {
            let text = std::fs::read(file).ok()?;
            let value: Value = serde_json::from_slice(&text).ok()?;
            Some((
                value.get("etag")?.as_str()?.to_string(),
                value.get("body")?.clone(),
            ))
        });
        let etag = cached.as_ref().map(|(etag, _)| etag.clone());
        let path = path.to_string();
        let kind = format!("rest.{kind}");
        let answer = self
            .send(Resource::Core, &kind, MAX_ANSWER_BYTES, |octo| {
                let path = path.clone();
                let etag = etag.clone();
                Box::pin(async move {
                    let mut map = http::HeaderMap::new();
                    if let Some(value) = etag.and_then(|e| http::HeaderValue::from_str(&e).ok()) {
                        map.insert(http::header::IF_NONE_MATCH, value);
                    }
                    octo._get_with_headers(path.as_str(), Some(map)).await
                })
            })
            .await?;
        let Some((_, status, headers, bytes)) = answer else {
            return Err(too_large(&kind));
        };
        if status == 304
            && let Some((_, body)) = cached
        {
            self.count("http.304", 1);
            return Ok(RestAnswer {
                status: 200,
                body,
                not_modified: true,
            });
        }
        let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if (200..300).contains(&status) {
            if let (Some(file), Some(etag)) = (cache, headers.get("etag")) {
                let entry = serde_json::json!({"etag": etag, "body": body});
                // A cache entry that cannot be written only costs a full answer next time.
                let _ = write_file(&file, &serde_json::to_vec(&entry).unwrap_or_default());
            }
        } else if status != 404 {
            return Err(CrawlError::Http {
                status,
                message: github_message(&body, &bytes),
            });
        }
        Ok(RestAnswer {
            status,
            body,
            not_modified: false,
        })
    }

    /// The cache file of a REST path, when the cache is on.
    fn etag_entry(&self, path: &str) -> Option<PathBuf> {
        let dir = self.options.etag_dir.as_ref()?;
        let digest = Sha256::digest(format!("{}\n{path}", self.options.api_url).as_bytes());
        let name: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
        Some(dir.join(format!("{name}.json")))
    }

    /// Sends one request through `call`, handling limits, retries and errors as the module
    /// says. Returns the index of the token used, the status, the headers (lowercase names)
    /// and the body; `None` when the answer is longer than `cap` bytes (at most `cap` of them
    /// are read, none when its `Content-Length` says so).
    async fn send<F>(
        &self,
        resource: Resource,
        kind: &str,
        cap: usize,
        call: F,
    ) -> Result<Option<Answer>, CrawlError>
    where
        F: Fn(Octocrab) -> RequestFuture,
    {
        let mut failures = 0u32;
        let mut secondary = 0u32;
        loop {
            let (index, octo) = self.pick(resource).await?;
            let permit = self.in_flight.acquire().await;
            self.count(kind, 1);
            let result = tokio::time::timeout(self.options.timeout, async {
                let response = call(octo)
                    .await
                    .map_err(|e| Fetch::Failed(first_line(&e)))?;
                let (parts, body) = response.into_parts();
                // An answer that announces more than the cap is refused before a byte of it is
                // read; one that does not (a chunked body) is counted as it streams in.
                let announced = parts
                    .headers
                    .get(http::header::CONTENT_LENGTH)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok());
                if announced.is_some_and(|length| length > cap as u64) {
                    return Err(Fetch::TooLarge);
                }
                let bytes = http_body_util::Limited::new(body, cap)
                    .collect()
                    .await
                    .map_err(|e| {
                        if e.is::<http_body_util::LengthLimitError>() {
                            Fetch::TooLarge
                        } else {
                            Fetch::Failed(first_line(&e))
                        }
                    })?
                    .to_bytes()
                    .to_vec();
                Ok::<_, Fetch>((parts, bytes))
            })
            .await;
            drop(permit);
            let (parts, bytes) = match result {
                Ok(Ok(answer)) => answer,
                Ok(Err(Fetch::TooLarge)) => return Ok(None),
                Ok(Err(Fetch::Failed(e))) => {
                    failures += 1;
                    self.retry_or_fail(&mut failures, kind, &e).await?;
                    continue;
                }
                Err(_) => {
                    failures += 1;
                    let message = format!("no answer within {:?}", self.options.timeout);
                    self.retry_or_fail(&mut failures, kind, &message).await?;
                    continue;
                }
            };
            let status = parts.status.as_u16();
            let headers: BTreeMap<String, String> = parts
                .headers
                .iter()
                .map(|(k, v)| {
                    (
                        k.as_str().to_ascii_lowercase(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .collect();
            self.note_headers(index, resource, &headers);
            match status {
                401 => {
                    return Err(CrawlError::TokenRejected {
                        env: self.token_env(index),
                        message: github_message(
                            &serde_json::from_slice(&bytes).unwrap_or(Value::Null),
                            &bytes,
                        ),
                    });
                }
                403 | 429 => {
                    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                    let message = github_message(&body, &bytes);
                    if let Some(seconds) = headers
                        .get("retry-after")
                        .and_then(|v| v.trim().parse::<u64>().ok())
                    {
                        if seconds > MAX_SERVER_WAIT.as_secs() {
                            return Err(CrawlError::Refused(format!(
                                "it asked to wait {seconds} s (retry-after), longer than the {} s kiln waits for a server",
                                MAX_SERVER_WAIT.as_secs()
                            )));
                        }
                        secondary += 1;
                        self.count("secondary_limit.waits", 1);
                        (self.notes)(format!(
                            "GitHub asked to wait {seconds} s ({}); waiting",
                            message.trim_end_matches('.')
                        ));
                        tokio::time::sleep(
                            Duration::from_secs(seconds).max(Duration::from_millis(100)),
                        )
                        .await;
                    } else if headers.get("x-ratelimit-remaining").map(String::as_str) == Some("0")
                    {
                        self.exhaust(index, resource, &headers);
                    } else if message
                        .to_ascii_lowercase()
                        .contains("secondary rate limit")
                        || message.to_ascii_lowercase().contains("abuse")
                    {
                        let wait = self.options.backoff_base * 60 * 2u32.pow(secondary.min(4));
                        secondary += 1;
                        self.count("secondary_limit.waits", 1);
                        (self.notes)(format!(
                            "GitHub's secondary rate limit ({}); waiting {:.0} s",
                            message.trim_end_matches('.'),
                            wait.as_secs_f64()
                        ));
                        tokio::time::sleep(wait).await;
                    } else {
                        return Err(CrawlError::Http { status, message });
                    }
                    if secondary > self.options.max_attempts * 2 {
                        return Err(CrawlError::Http { status, message });
                    }
                }
                500..=599 => {
                    failures += 1;
                    let message = format!("HTTP {status} from GitHub");
                    self.retry_or_fail(&mut failures, kind, &message).await?;
                }
                _ => return Ok(Some((index, status, headers, bytes))),
            }
        }
    }

    /// Waits before the next try of a failed request, or gives up after `max_attempts`.
    async fn retry_or_fail(
        &self,
        failures: &mut u32,
        kind: &str,
        message: &str,
    ) -> Result<(), CrawlError> {
        if *failures >= self.options.max_attempts {
            return Err(CrawlError::Transport(format!(
                "{kind}: {message} ({} tries)",
                *failures
            )));
        }
        self.count("retries", 1);
        let exponent = (*failures - 1).min(6);
        let full = self.options.backoff_base * 2u32.pow(exponent);
        // Full jitter between half and all of the backoff, so parallel requests that failed
        // together do not come back together.
        let step = self.jitter.fetch_add(1, Ordering::Relaxed);
        let mix = Sha256::digest(format!("{step}{:?}", std::time::SystemTime::now()).as_bytes());
        let fraction = 0.5 + f64::from(mix[0]) / 510.0;
        let wait = full.mul_f64(fraction).min(Duration::from_secs(60));
        tracing::debug!(kind, message, wait = ?wait, "retrying a GitHub request");
        tokio::time::sleep(wait).await;
        Ok(())
    }

    /// The token to use next for `resource`: the one with the most quota above the reserve.
    /// When every token is below it, waits until the earliest reset, saying so.
    async fn pick(&self, resource: Resource) -> Result<(usize, Octocrab), CrawlError> {
        loop {
            let now = Utc::now().timestamp();
            let choice = {
                let Ok(mut tokens) = self.tokens.lock() else {
                    // A poisoned lock means a panic elsewhere; any token will do.
                    return Ok((0, Octocrab::default()));
                };
                let mut best: Option<(usize, u64)> = None;
                let mut earliest_reset: Option<i64> = None;
                for (i, state) in tokens.iter_mut().enumerate() {
                    let quota = state.quotas.entry(resource.name()).or_default();
                    // A reset in the past restores the quota (the next answer says how much).
                    // Resets are whole seconds: only a reset strictly before this second has
                    // surely happened.
                    if quota.reset.is_some_and(|r| r < now) {
                        *quota = Quota::default();
                    }
                    let left = quota.remaining.unwrap_or(u64::MAX);
                    if left > self.options.reserve {
                        if best.is_none_or(|(_, b)| left > b) {
                            best = Some((i, left));
                        }
                    } else if let Some(reset) = quota.reset {
                        earliest_reset = Some(earliest_reset.map_or(reset, |e| e.min(reset)));
                    }
                }
                match best {
                    Some((i, _)) => Ok((i, tokens[i].client(resource))),
                    None => Err(earliest_reset.unwrap_or(now + 60)),
                }
            };
            match choice {
                Ok(pick) => return Ok(pick),
                Err(reset) => {
                    // Until the second after the reset, which GitHub gives in whole seconds.
                    let wait = u64::try_from((reset - now).max(0) + 1).unwrap_or(1);
                    if wait > MAX_SERVER_WAIT.as_secs() {
                        return Err(CrawlError::Refused(format!(
                            "its {} rate limit resets in {wait} s (x-ratelimit-reset), later than the {} s kiln waits for a server",
                            resource.name(),
                            MAX_SERVER_WAIT.as_secs()
                        )));
                    }
                    self.count("rate_limit.waits", 1);
                    (self.notes)(format!(
                        "every GitHub token is out of {} quota; waiting {wait} s until {}",
                        resource.name(),
                        DateTime::from_timestamp(reset, 0)
                            .map(|t| t.to_rfc3339())
                            .unwrap_or_default()
                    ));
                    tokio::time::sleep(Duration::from_secs(wait)).await;
                }
            }
        }
    }

    fn token_env(&self, index: usize) -> String {
        self.tokens
            .lock()
            .ok()
            .and_then(|t| t.get(index).map(|s| s.token.env.clone()))
            .unwrap_or_default()
    }

    fn with_quota(&self, index: usize, resource: Resource, update: impl FnOnce(&mut Quota)) {
        if let Ok(mut tokens) = self.tokens.lock()
            && let Some(state) = tokens.get_mut(index)
        {
            update(state.quotas.entry(resource.name()).or_default());
        }
    }

    /// Reads `x-ratelimit-*` headers into the token's quota for `resource`. GitHub names the
    /// resource in `x-ratelimit-resource`; search answers count against `search`, which this
    /// client does not use, so those are ignored.
    fn note_headers(&self, index: usize, resource: Resource, headers: &BTreeMap<String, String>) {
        let Some(limits) = RateLimitHeaders::read(headers) else {
            return;
        };
        if limits
            .resource
            .as_deref()
            .is_some_and(|r| r != resource.name())
        {
            return;
        }
        self.with_quota(index, resource, |quota| {
            quota.remaining = Some(limits.remaining);
            quota.reset = Some(limits.reset);
        });
    }

    /// Reads GraphQL's `rateLimit { cost remaining resetAt }`.
    fn note_graphql_limit(&self, index: usize, limit: &Value) {
        if let Some(cost) = limit.get("cost").and_then(Value::as_u64) {
            self.count("graphql.points", cost);
        }
        let remaining = limit.get("remaining").and_then(Value::as_u64);
        let reset = limit
            .get("resetAt")
            .and_then(Value::as_str)
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.timestamp());
        self.with_quota(index, Resource::GraphQl, |quota| {
            if remaining.is_some() {
                quota.remaining = remaining;
            }
            if reset.is_some() {
                quota.reset = reset;
            }
        });
    }

    /// Marks a token out of quota for `resource` until the reset its answer gave.
    fn exhaust(&self, index: usize, resource: Resource, headers: &BTreeMap<String, String>) {
        let reset =
            RateLimitHeaders::read(headers).map_or(Utc::now().timestamp() + 60, |l| l.reset);
        self.with_quota(index, resource, |quota| {
            quota.remaining = Some(0);
            quota.reset = Some(reset);
        });
    }
}

/// What [`GitHub::send`] returns of an answer: the index of the token used, the status, the
/// headers (lowercase names) and the body.
type Answer = (usize, u16, BTreeMap<String, String>, Vec<u8>);

/// The error of an answer to `kind` past [`MAX_ANSWER_BYTES`].
fn too_large(kind: &str) -> CrawlError {
    CrawlError::Refused(format!(
        "its answer to {kind} was larger than {} MiB",
        MAX_ANSWER_BYTES >> 20
    ))
}

type RequestFuture = std::pin::Pin<
    Box<
        dyn std::future::Future<
                Output = Result<
                    http::Response<
                        http_body_util::combinators::BoxBody<bytes::Bytes, octocrab::Error>,
                    >,
                    octocrab::Error,
                >,
            > + Send,
    >,
>;

impl TokenState {
    fn client(&self, resource: Resource) -> Octocrab {
        match resource {
            Resource::Core => self.rest.clone(),
            Resource::GraphQl => self.graphql.clone(),
        }
    }
}

/// GitHub's rate-limit headers of one response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimitHeaders {
    /// `x-ratelimit-limit`.
    pub limit: u64,
    /// `x-ratelimit-remaining`.
    pub remaining: u64,
    /// `x-ratelimit-reset`, Unix seconds.
    pub reset: i64,
    /// `x-ratelimit-used`, when sent.
    pub used: Option<u64>,
    /// `x-ratelimit-resource` (`core`, `graphql`, `search`), when sent.
    pub resource: Option<String>,
}

impl RateLimitHeaders {
    /// Reads the headers (lowercase names); `None` when the response carries none.
    #[must_use]
    pub fn read(headers: &BTreeMap<String, String>) -> Option<Self> {
        let number = |name: &str| headers.get(name).and_then(|v| v.trim().parse::<u64>().ok());
        Some(Self {
            limit: number("x-ratelimit-limit")?,
            remaining: number("x-ratelimit-remaining")?,
            reset: headers.get("x-ratelimit-reset")?.trim().parse().ok()?,
            used: number("x-ratelimit-used"),
            resource: headers.get("x-ratelimit-resource").cloned(),
        })
    }
}

/// GitHub's error message of an answer (`{"message": ...}`), or its body, cut by
/// [`quote`].
#[must_use]
pub fn github_message(body: &Value, bytes: &[u8]) -> String {
    if let Some(message) = body.get("message").and_then(Value::as_str) {
        let details: Vec<String> = body
            .get("errors")
            .and_then(Value::as_array)
            .map(|errors| {
                errors
                    .iter()
                    .filter_map(|e| {
                        e.get("message")
                            .and_then(Value::as_str)
                            .map(str::to_string)
                            .or_else(|| {
                                Some(format!(
                                    "{} {} {}",
                                    e.get("resource")?.as_str()?,
                                    e.get("field")?.as_str()?,
                                    e.get("code")?.as_str()?
                                ))
                            })
                    })
                    .collect()
            })
            .unwrap_or_default();
        return if details.is_empty() {
            quote(&message)
        } else {
            quote(&format!("{message}: {}", details.join("; ")))
        };
    }
    quote(&String::from_utf8_lossy(bytes).trim())
}

/// How reading one answer failed.
enum Fetch {
    /// Past the cap of the request: refused, never retried.
    TooLarge,
    /// The transport failed (retried): its first line.
    Failed(String),
}

fn first_line(error: &dyn std::fmt::Display) -> String {
    error
        .to_string()
        .lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(300)
        .collect()
}

fn write_file(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let temp = path.with_extension(format!("tmp-{}", std::process::id()));
    std::fs::write(&temp, bytes)?;
    std::fs::rename(&temp, path)
}
