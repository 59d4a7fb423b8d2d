//! [`Hub`], the client of one Hub: its settings, and the requests every call makes through it
//! (retries honouring `Retry-After`, the token on the Hub's own API only, answers read within
//! their caps).

use std::time::Duration;

use serde_json::Value;

use crate::error::HubError;
use crate::http::{
    BODY_DEADLINE, Body, MAX_ANSWER_BYTES, READ_TIMEOUT, error_body, hub_message, read_capped,
};
use crate::listing::ListingBudget;

/// A client of one Hub.
pub struct Hub {
    pub(crate) endpoint: String,
    pub(crate) token: Option<String>,
    pub(crate) http: reqwest::Client,
    pub(crate) retries: u32,
    pub(crate) backoff: Duration,
    /// How long an API answer's body may take once its headers came ([`BODY_DEADLINE`]).
    pub(crate) body_deadline: Duration,
    /// What one listing may read across its pages.
    pub(crate) listing_budget: ListingBudget,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub")
            .field("endpoint", &self.endpoint)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish_non_exhaustive()
    }
}

impl Hub {
    /// A client of the Hub at `endpoint` (`https://huggingface.co`, or `HF_ENDPOINT`), sending
    /// `token` to its API.
    ///
    /// # Errors
    /// When the HTTP client or the TLS roots cannot be set up.
    pub fn new(endpoint: &str, token: Option<String>) -> Result<Self, HubError> {
        let endpoint = endpoint.trim_end_matches('/').to_string();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(30))
            // A server that stops sending mid-answer is given up after READ_TIMEOUT; the whole
            // request (a large upload) may take up to 30 minutes.
            .read_timeout(READ_TIMEOUT)
            .timeout(Duration::from_secs(30 * 60))
            .user_agent(concat!("kiln/", env!("CARGO_PKG_VERSION")))
            .tls_backend_preconfigured(
                kiln_core::net::client_tls_config(endpoint.starts_with("https://"))
                    .map_err(HubError::Setup)?,
            )
            .build()
            .map_err(|e| HubError::Setup(kiln_core::net::error_chain(&e)))?;
        Ok(Self {
            endpoint,
            token: token.filter(|t| !t.trim().is_empty()),
            http,
            retries: 4,
            backoff: Duration::from_secs(1),
            body_deadline: BODY_DEADLINE,
            listing_budget: ListingBudget::default(),
        })
    }

    /// Sets the first wait between retries (doubling after each); tests shorten it.
    #[must_use]
    pub fn with_backoff(mut self, first: Duration) -> Self {
        self.backoff = first;
        self
    }

    /// Sets how long an answer's body may take once its headers came; tests shorten it.
    #[must_use]
    pub fn with_body_deadline(mut self, deadline: Duration) -> Self {
        self.body_deadline = deadline;
        self
    }

    /// Sets what one listing may read across its pages; tests lower it.
    #[must_use]
    pub fn with_listing_budget(mut self, budget: ListingBudget) -> Self {
        self.listing_budget = budget;
        self
    }

    /// The Hub's address.
    #[must_use]
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The address of `path` on the Hub.
    pub(crate) fn api(&self, path: &str) -> String {
        format!("{}{path}", self.endpoint)
    }

    /// `request` with the token, for the Hub's own API.
    pub(crate) fn authorized(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    /// Sends the request `build` makes, again after a dropped connection, a 429 or a 5xx; any
    /// other status is an error with the Hub's message.
    pub(crate) async fn send(
        &self,
        what: &str,
        ok_statuses: &[u16],
        build: impl Fn() -> reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, HubError> {
        self.send_with(what, ok_statuses, self.retries, build).await
    }

    /// [`Hub::send`] with `retries` retries (0 for a request that must not be sent twice).
    pub(crate) async fn send_with(
        &self,
        what: &str,
        ok_statuses: &[u16],
        retries: u32,
        build: impl Fn() -> reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, HubError> {
        let mut wait = self.backoff;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let retry_after = match build().send().await {
                Ok(response) => {
                    let status = response.status().as_u16();
                    if response.status().is_success() || ok_statuses.contains(&status) {
                        return Ok(response);
                    }
                    let retryable = status == 429 || status >= 500;
                    let after = response
                        .headers()
                        .get("retry-after")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.trim().parse::<u64>().ok())
                        .map(Duration::from_secs);
                    if !retryable || attempt > retries {
                        let body = error_body(response).await;
                        return Err(HubError::Status {
                            what: what.to_string(),
                            status,
                            message: hub_message(&body),
                        });
                    }
                    after
                }
                Err(e) => {
                    if attempt > retries {
                        // Without its URL: a storage address carries a signature.
                        let e = e.without_url();
                        return Err(HubError::Transport {
                            what: what.to_string(),
                            message: self.redact(&kiln_core::net::error_chain(&e)),
                        });
                    }
                    None
                }
            };
            tokio::time::sleep(retry_after.unwrap_or(wait).min(Duration::from_secs(60))).await;
            wait = (wait * 2).min(Duration::from_secs(30));
        }
    }

    /// `text` with the token replaced, for error messages.
    pub(crate) fn redact(&self, text: &str) -> String {
        match &self.token {
            Some(token) => text.replace(token.as_str(), "<token>"),
            None => text.to_string(),
        }
    }

    /// The answer's JSON, read up to [`MAX_ANSWER_BYTES`].
    pub(crate) async fn json(
        &self,
        what: &str,
        response: reqwest::Response,
    ) -> Result<Value, HubError> {
        match self.json_within(what, response, MAX_ANSWER_BYTES).await? {
            Some((value, _)) => Ok(value),
            None => Err(HubError::Protocol {
                what: what.to_string(),
                message: format!("the answer is larger than {} MiB", MAX_ANSWER_BYTES >> 20),
            }),
        }
    }

    /// The answer's JSON and its length in bytes; `None` when it is longer than `cap` (no more
    /// than `cap` bytes of it are read).
    pub(crate) async fn json_within(
        &self,
        what: &str,
        response: reqwest::Response,
        cap: usize,
    ) -> Result<Option<(Value, usize)>, HubError> {
        let protocol = |message: String| HubError::Protocol {
            what: what.to_string(),
            message,
        };
        let bytes = match read_capped(response, cap, self.body_deadline).await {
            Ok(Body::Whole(bytes)) => bytes,
            Ok(Body::Cut(_)) => return Ok(None),
            Err(message) => return Err(protocol(message)),
        };
        let value =
            serde_json::from_slice(&bytes).map_err(|e| protocol(format!("not JSON: {e}")))?;
        Ok(Some((value, bytes.len())))
    }
}
