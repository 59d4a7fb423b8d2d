//! Uploads to a Hugging Face Hub dataset repository over the Hub's HTTP API, as the official
//! `huggingface_hub` client does it without Xet:
//!
//! 1. `POST /api/repos/create` (409: the repository exists, which is fine);
//! 2. `POST /api/datasets/{repo}/preupload/{rev}`: which files go through LFS, and the id of
//!    the file the Hub holds at that path (a file whose id equals the local one is unchanged and
//!    left out of the commit);
//! 3. `POST /datasets/{repo}.git/info/lfs/objects/batch`: upload actions for the LFS objects the
//!    Hub does not hold yet (an object it holds comes back without actions, so an interrupted
//!    push resumes where it stopped), then one `PUT` per object, or one per part and a
//!    completion `POST` when the Hub asks for multipart, and the `verify` call it names;
//! 4. `POST /api/datasets/{repo}/commit/{rev}` with every file in one NDJSON body: one commit.
//!
//! Requests that fail with a dropped connection, a 429 or a 5xx are retried, honouring
//! `Retry-After`. The token is sent as `Authorization: Bearer` to the Hub's own API only, never
//! to the storage URLs the Hub hands out, and never appears in an error.
//!
//! Every answer is read up to a cap, a listing's pages together up to a budget of entries and
//! bytes ([`ListingBudget`]), and what the Hub sent appears in an error only as a short quote
//! of its head and tail (`kiln_core::net::quote`).

use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use kiln_core::net::quote;
use serde::Deserialize;
use serde_json::{Value, json};
use sha1::Sha1;
use sha2::{Digest as _, Sha256};

/// The Hub's address when `HF_ENDPOINT` names none.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// Files per preupload and LFS batch request (the Hub's limit).
const BATCH: usize = 256;

/// Bytes of a file's head the preupload call samples.
const SAMPLE: usize = 512;

/// Content type of the LFS batch API.
const LFS_JSON: &str = "application/vnd.git-lfs+json";

/// Errors talking to the Hub; messages read after "failed to".
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    /// The HTTP client could not be set up.
    #[error("set up the Hub client: {0}")]
    Setup(String),
    /// The Hub answered with an error status.
    #[error("{what}: the Hub answered {status}: {message}")]
    Status {
        /// What kiln asked, as a verb phrase.
        what: String,
        /// HTTP status.
        status: u16,
        /// The body of the answer, cut.
        message: String,
    },
    /// The Hub could not be reached, or the connection broke.
    #[error("{what}: {message}")]
    Transport {
        /// What kiln asked.
        what: String,
        /// The error with its causes.
        message: String,
    },
    /// The Hub answered something its API does not document.
    #[error("{what}: the answer is not what the Hub's API documents: {message}")]
    Protocol {
        /// What kiln asked.
        what: String,
        /// What was wrong.
        message: String,
    },
    /// A listing went past what kiln reads of one listing across its pages
    /// ([`ListingBudget`]).
    #[error("{what}: the listing goes past its budget of {budget} (at page {page})")]
    OverBudget {
        /// The listing.
        what: String,
        /// The budget it went past: `500000 entries`, `256 MiB of answers`.
        budget: String,
        /// The page being read when it did.
        page: usize,
    },
    /// A local file could not be read.
    #[error("read {}: {message}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        message: String,
    },
}

/// Where a file's bytes come from.
#[derive(Debug, Clone)]
pub enum Content {
    /// A file on disk, read when it is uploaded.
    File(PathBuf),
    /// Bytes in memory (a generated card).
    Bytes(Vec<u8>),
}

/// One file to put in the repository.
#[derive(Debug, Clone)]
pub struct Upload {
    /// Its path in the repository (`releases/2024-09/data/test-00000-of-00001.parquet`).
    pub path_in_repo: String,
    /// Its bytes.
    pub content: Content,
}

/// What an upload did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The commit made; `None` when every file was unchanged (no empty commit is made).
    pub commit: Option<String>,
    /// The commit's address, as the Hub gives it.
    pub commit_url: Option<String>,
    /// LFS files whose bytes were sent.
    pub sent: Vec<String>,
    /// LFS files the Hub already held (an earlier, interrupted push sent them).
    pub already_stored: Vec<String>,
    /// Files committed inline (small text files).
    pub inline: Vec<String>,
    /// Files equal to those the Hub holds at their paths, left out of the commit.
    pub unchanged: Vec<String>,
}

/// The commit an upload makes.
#[derive(Debug, Clone, Default)]
pub struct CommitPlan<'a> {
    /// Its summary line.
    pub summary: &'a str,
    /// Its description.
    pub description: &'a str,
    /// Paths to delete in the same commit.
    pub delete: Vec<String>,
    /// The commit the Hub must still be at (the state the uploads were planned against).
    pub parent: Option<&'a str>,
}

/// An entry of a repository listing.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct TreeEntry {
    /// `file` or `directory`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Path in the repository.
    pub path: String,
}

/// What one listing ([`Hub::list_tree`]) may read across all its pages; past either bound
/// it is [`HubError::OverBudget`], so a Hub whose every page names another next page costs
/// bounded memory and time, not only a bounded number of pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListingBudget {
    /// Entries across all pages.
    pub entries: usize,
    /// Bytes across all pages: the answers' bodies and their `next` links.
    pub bytes: usize,
}

impl Default for ListingBudget {
    /// 500,000 entries and 256 MiB. The Hub advises fewer than 100,000 files per repository
    /// (and 10,000 per folder); a page of 1,000 entries is about 300 KB, so the whole tree of
    /// five times that repository is about 150 MB of answers. kiln lists its own release
    /// folders, a few thousand files.
    fn default() -> Self {
        Self {
            entries: 500_000,
            bytes: 256 << 20,
        }
    }
}

/// A file ready to upload: its size, hashes and head.
struct Prepared {
    upload: Upload,
    size: u64,
    sha256: String,
    /// Git's blob id of the contents, which the Hub reports for files not in LFS.
    git_sha1: String,
    sample: Vec<u8>,
}

/// Reads `content` once, for its size, SHA-256, git blob id and first bytes.
fn prepare(upload: Upload) -> Result<Prepared, HubError> {
    let mut sha256 = Sha256::new();
    let mut bytes_seen = 0u64;
    let mut sample = Vec::new();
    let mut blob = Vec::new();
    let mut feed = |chunk: &[u8], blob_ok: bool| {
        sha256.update(chunk);
        if sample.len() < SAMPLE {
            let take = (SAMPLE - sample.len()).min(chunk.len());
            sample.extend_from_slice(&chunk[..take]);
        }
        if blob_ok {
            blob.extend_from_slice(chunk);
        }
        bytes_seen += chunk.len() as u64;
    };
    match &upload.content {
        Content::Bytes(bytes) => feed(bytes, true),
        Content::File(path) => {
            let io = |e: std::io::Error| HubError::Io {
                path: path.clone(),
                message: e.to_string(),
            };
            let mut file = std::fs::File::open(path).map_err(io)?;
            let small = file.metadata().map_err(io)?.len() <= 10 << 20;
            let mut buffer = vec![0u8; 1 << 20];
            loop {
                let n = file.read(&mut buffer).map_err(io)?;
                if n == 0 {
                    break;
                }
                feed(&buffer[..n], small);
            }
        }
    }
    // The blob id is only compared for files the Hub keeps in git (small ones).
    let git_sha1 = if blob.len() as u64 == bytes_seen {
        let mut sha1 = Sha1::new();
        sha1.update(format!("blob {bytes_seen}\0").as_bytes());
        sha1.update(&blob);
        kiln_core::config::hex(&sha1.finalize())
    } else {
        String::new()
    };
    Ok(Prepared {
        upload,
        size: bytes_seen,
        sha256: kiln_core::config::hex(&sha256.finalize()),
        git_sha1,
        sample,
    })
}

/// Bytes `offset..offset + len` of a file (all of it with `len = u64::MAX`).
fn read_range(content: &Content, offset: u64, len: u64) -> Result<Vec<u8>, HubError> {
    match content {
        Content::Bytes(bytes) => {
            let start = usize::try_from(offset)
                .unwrap_or(usize::MAX)
                .min(bytes.len());
            let end = usize::try_from(offset.saturating_add(len))
                .unwrap_or(usize::MAX)
                .min(bytes.len());
            Ok(bytes[start..end].to_vec())
        }
        Content::File(path) => {
            let io = |e: std::io::Error| HubError::Io {
                path: path.clone(),
                message: e.to_string(),
            };
            let mut file = std::fs::File::open(path).map_err(io)?;
            file.seek(SeekFrom::Start(offset)).map_err(io)?;
            let mut out = Vec::new();
            file.take(len).read_to_end(&mut out).map_err(io)?;
            Ok(out)
        }
    }
}

/// A client of one Hub.
pub struct Hub {
    endpoint: String,
    token: Option<String>,
    http: reqwest::Client,
    retries: u32,
    backoff: Duration,
    /// How long an API answer's body may take once its headers came ([`BODY_DEADLINE`]).
    body_deadline: Duration,
    /// What one listing may read across its pages.
    listing_budget: ListingBudget,
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

    fn api(&self, path: &str) -> String {
        format!("{}{path}", self.endpoint)
    }

    fn authorized(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    /// Sends the request `build` makes, again after a dropped connection, a 429 or a 5xx; any
    /// other status is an error with the Hub's message.
    async fn send(
        &self,
        what: &str,
        ok_statuses: &[u16],
        build: impl Fn() -> reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, HubError> {
        self.send_with(what, ok_statuses, self.retries, build).await
    }

    /// [`Hub::send`] with `retries` retries (0 for a request that must not be sent twice).
    async fn send_with(
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

    fn redact(&self, text: &str) -> String {
        match &self.token {
            Some(token) => text.replace(token.as_str(), "<token>"),
            None => text.to_string(),
        }
    }

    async fn json(&self, what: &str, response: reqwest::Response) -> Result<Value, HubError> {
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
    async fn json_within(
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

    /// Has the Hub check a dataset card's YAML front matter (`POST /api/validate-yaml`, as the
    /// official client does before it uploads a card), so a card the Hub would not read stops
    /// the push before anything is sent.
    ///
    /// # Errors
    /// When the Hub finds the metadata invalid (its messages), or cannot be reached.
    pub async fn validate_card(&self, content: &str) -> Result<(), HubError> {
        let what = "validate the card's metadata";
        let body = json!({"content": content, "repoType": "dataset"});
        let response = self
            .send(what, &[400], || {
                self.authorized(self.http.post(self.api("/api/validate-yaml")))
                    .json(&body)
            })
            .await?;
        if response.status().as_u16() != 400 {
            return Ok(());
        }
        let body = error_body(response).await;
        let answer: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        let mut messages: Vec<String> = answer
            .get("errors")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|e| e.get("message").and_then(Value::as_str).map(str::to_string))
            .collect();
        if messages.is_empty() {
            messages.push(hub_message(&body));
        }
        Err(HubError::Status {
            what: what.to_string(),
            status: 400,
            message: quote(&messages.join("; ")),
        })
    }

    /// Creates the dataset repository `repo_id` (`namespace/name`); `Ok(false)` when it exists.
    ///
    /// # Errors
    /// When the Hub refuses (a bad token, a namespace the token may not write).
    pub async fn create_dataset_repo(
        &self,
        repo_id: &str,
        private: bool,
    ) -> Result<bool, HubError> {
        let (namespace, name) = split_repo(repo_id)?;
        let what = format!("create the dataset repository {repo_id}");
        // `private` only when asked: an organisation's default visibility stands otherwise.
        let mut body = json!({"name": name, "organization": namespace, "type": "dataset"});
        if private {
            body["private"] = json!(true);
        }
        let response = self
            .send(&what, &[401, 403, 409], || {
                self.authorized(self.http.post(self.api("/api/repos/create")))
                    .json(&body)
            })
            .await?;
        let status = response.status().as_u16();
        if response.status().is_success() {
            return Ok(true);
        }
        // A token that may write to the repository but not create repositories is refused
        // here; as the official client does, ask whether the repository exists.
        if self.head_commit(repo_id, "main").await.is_ok() {
            return Ok(false);
        }
        let message = hub_message(&error_body(response).await);
        Err(HubError::Status {
            what,
            status,
            message,
        })
    }

    /// The commit `revision` of the repository points at.
    ///
    /// # Errors
    /// When the repository or revision does not exist, or the Hub cannot be reached.
    pub async fn head_commit(&self, repo_id: &str, revision: &str) -> Result<String, HubError> {
        split_repo(repo_id)?;
        let what = format!("read revision {revision} of {repo_id}");
        let url = self.api(&format!(
            "/api/datasets/{repo_id}/revision/{}",
            encode_revision(revision)
        ));
        let response = self
            .send(&what, &[], || self.authorized(self.http.get(&url)))
            .await?;
        let answer = self.json(&what, response).await?;
        answer
            .get("sha")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| HubError::Protocol {
                what,
                message: format!("no sha in {}", quote(&answer)),
            })
    }

    /// The entries directly under `path` of the repository at `revision` (the whole tree with
    /// `recursive`); empty when the path or the repository holds nothing yet.
    ///
    /// # Errors
    /// When the Hub cannot be reached or refuses.
    pub async fn list_tree(
        &self,
        repo_id: &str,
        revision: &str,
        path: &str,
        recursive: bool,
    ) -> Result<Vec<TreeEntry>, HubError> {
        split_repo(repo_id)?;
        let path = path.trim_matches('/');
        let what = if path.is_empty() {
            format!("list the files of {repo_id}")
        } else {
            format!("list {path} in {repo_id}")
        };
        let mut url = self.api(&format!(
            "/api/datasets/{repo_id}/tree/{}/{path}?recursive={recursive}",
            encode_revision(revision),
        ));
        let budget = self.listing_budget;
        let over = |budget: String, page: usize| HubError::OverBudget {
            what: what.clone(),
            budget,
            page,
        };
        let mut entries = Vec::new();
        // Bytes of the answers and `next` links read so far (the links are kept in `seen`).
        let mut bytes_read = 0usize;
        let mut seen = std::collections::BTreeSet::new();
        loop {
            // A `next` link back to a page already read (or pages without end) would be
            // followed for ever.
            if !seen.insert(url.clone()) || seen.len() > MAX_PAGES {
                return Err(HubError::Protocol {
                    what,
                    message: format!(
                        "the listing's `next` links loop or exceed {MAX_PAGES} pages (at page {})",
                        seen.len()
                    ),
                });
            }
            let page_number = seen.len();
            let response = self
                .send(&what, &[404], || self.authorized(self.http.get(&url)))
                .await?;
            if response.status().as_u16() == 404 {
                // The path does not exist yet; a missing revision or repository is an error.
                let code = response
                    .headers()
                    .get("x-error-code")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_string();
                if code == "EntryNotFound" || code.is_empty() {
                    return Ok(entries);
                }
                return Err(HubError::Status {
                    what,
                    status: 404,
                    message: quote(&code),
                });
            }
            // Long listings come in pages, the next one named by `Link: <...>; rel="next"`.
            let next = response
                .headers()
                .get("link")
                .and_then(|v| v.to_str().ok())
                .and_then(next_link);
            bytes_read = bytes_read.saturating_add(next.as_ref().map_or(0, String::len));
            let bytes_budget = || format!("{} MiB of answers", budget.bytes >> 20);
            let room = budget.bytes.saturating_sub(bytes_read);
            if room == 0 {
                return Err(over(bytes_budget(), page_number));
            }
            // The page is read no further than the budget's rest: a listing never reads more
            // than its budget, whatever each page says of its length.
            let Some((value, length)) = self
                .json_within(&what, response, MAX_ANSWER_BYTES.min(room))
                .await?
            else {
                return Err(if room < MAX_ANSWER_BYTES {
                    over(bytes_budget(), page_number)
                } else {
                    HubError::Protocol {
                        what,
                        message: format!(
                            "the answer is larger than {} MiB",
                            MAX_ANSWER_BYTES >> 20
                        ),
                    }
                });
            };
            bytes_read += length;
            let page: Vec<TreeEntry> =
                serde_json::from_value(value).map_err(|e| HubError::Protocol {
                    what: what.clone(),
                    message: quote(&e),
                })?;
            if entries.len() + page.len() > budget.entries {
                return Err(over(format!("{} entries", budget.entries), page_number));
            }
            entries.extend(page);
            match next {
                Some(link) if same_origin(&link, &self.endpoint) => url = link,
                Some(link) => {
                    return Err(HubError::Protocol {
                        what,
                        message: format!(
                            "the next page is on another host: {}",
                            quote(&origin(&link))
                        ),
                    });
                }
                None => return Ok(entries),
            }
        }
    }

    /// Puts `uploads` into the repository at `revision` in one commit with `summary` and
    /// `description`; `note` hears what happens (files sent, files already stored). Files equal
    /// to what the Hub holds are left out; with nothing left, no commit is made.
    ///
    /// # Errors
    /// When a file cannot be read, or the Hub refuses or cannot be reached (after retries).
    pub async fn upload(
        &self,
        repo_id: &str,
        revision: &str,
        commit: &CommitPlan<'_>,
        uploads: Vec<Upload>,
        note: &(dyn Fn(&str) + Sync),
    ) -> Result<Outcome, HubError> {
        split_repo(repo_id)?;
        for path in uploads
            .iter()
            .map(|u| u.path_in_repo.as_str())
            .chain(commit.delete.iter().map(String::as_str))
        {
            if !valid_path(Path::new(path)) || path.contains('\\') {
                return Err(HubError::Protocol {
                    what: format!("commit to {repo_id}"),
                    message: format!("{path:?} is not a relative path inside the repository"),
                });
            }
        }
        let prepared: Vec<Prepared> = uploads.into_iter().map(prepare).collect::<Result<_, _>>()?;
        let modes = self.preupload(repo_id, revision, &prepared).await?;
        let mut outcome = Outcome::default();
        let mut changed: Vec<(&Prepared, bool)> = Vec::new();
        for file in &prepared {
            let path = &file.upload.path_in_repo;
            let (lfs, remote) = modes.get(path).cloned().ok_or_else(|| HubError::Protocol {
                what: format!("preupload to {repo_id}"),
                message: format!("no upload mode for {path}"),
            })?;
            // Empty files cannot go through LFS.
            let lfs = lfs && file.size > 0;
            let local = if lfs { &file.sha256 } else { &file.git_sha1 };
            if remote.as_deref() == Some(local.as_str()) && !local.is_empty() {
                outcome.unchanged.push(path.clone());
            } else {
                changed.push((file, lfs));
            }
        }
        // One object per content: files with the same bytes (two splits holding the same rows)
        // are sent once, and the commit points every path at it.
        let mut seen = std::collections::BTreeSet::new();
        let lfs_files: Vec<&Prepared> = changed
            .iter()
            .filter(|(_, l)| *l)
            .map(|(f, _)| *f)
            .filter(|f| seen.insert(f.sha256.clone()))
            .collect();
        for chunk in lfs_files.chunks(BATCH) {
            self.upload_lfs(repo_id, revision, chunk, &mut outcome, note)
                .await?;
        }
        if changed.is_empty() && commit.delete.is_empty() {
            note(&format!(
                "{repo_id}: every file is unchanged on the Hub; no commit made"
            ));
            return Ok(outcome);
        }
        let mut body = String::new();
        let mut value = json!({"summary": commit.summary, "description": commit.description});
        if let Some(parent) = commit.parent {
            // The Hub refuses the commit (412) if another landed since: the uploads were
            // planned against `parent`.
            value["parentCommit"] = json!(parent);
        }
        let header = json!({"key": "header", "value": value});
        body.push_str(&header.to_string());
        body.push('\n');
        for (file, lfs) in &changed {
            let path = &file.upload.path_in_repo;
            let line = if *lfs {
                json!({"key": "lfsFile", "value": {"path": path, "algo": "sha256", "oid": file.sha256, "size": file.size}})
            } else {
                outcome.inline.push(path.clone());
                let bytes = read_range(&file.upload.content, 0, u64::MAX)?;
                json!({"key": "file", "value": {"path": path, "content": base64::engine::general_purpose::STANDARD.encode(bytes), "encoding": "base64"}})
            };
            body.push_str(&line.to_string());
            body.push('\n');
        }
        for path in &commit.delete {
            let line = json!({"key": "deletedFile", "value": {"path": path}});
            body.push_str(&line.to_string());
            body.push('\n');
        }
        let what = format!("commit to {repo_id}");
        let url = self.api(&format!(
            "/api/datasets/{repo_id}/commit/{}",
            encode_revision(revision)
        ));
        // Never sent twice: a commit that landed before its answer was lost would land again;
        // a push run again finds what landed and sends only the rest.
        let response = self
            .send_with(&what, &[], 0, || {
                self.authorized(self.http.post(&url))
                    .header("content-type", "application/x-ndjson")
                    .body(body.clone())
            })
            .await?;
        let answer = self.json(&what, response).await?;
        let commit = answer
            .get("commitOid")
            .and_then(Value::as_str)
            .ok_or_else(|| HubError::Protocol {
                what: what.clone(),
                message: format!("no commitOid in {}", quote(&answer)),
            })?;
        outcome.commit = Some(commit.to_string());
        outcome.commit_url = answer
            .get("commitUrl")
            .and_then(Value::as_str)
            .map(str::to_string);
        Ok(outcome)
    }

    /// The Hub's upload mode (LFS or not) of every file, and the id of the file it holds at
    /// that path.
    async fn preupload(
        &self,
        repo_id: &str,
        revision: &str,
        files: &[Prepared],
    ) -> Result<std::collections::BTreeMap<String, (bool, Option<String>)>, HubError> {
        let what = format!("preupload to {repo_id}");
        let url = self.api(&format!(
            "/api/datasets/{repo_id}/preupload/{}",
            encode_revision(revision)
        ));
        let mut modes = std::collections::BTreeMap::new();
        for chunk in files.chunks(BATCH) {
            let body = json!({"files": chunk.iter().map(|f| json!({
                "path": f.upload.path_in_repo,
                "size": f.size,
                "sample": base64::engine::general_purpose::STANDARD.encode(&f.sample),
            })).collect::<Vec<_>>()});
            let response = self
                .send(&what, &[], || {
                    self.authorized(self.http.post(&url)).json(&body)
                })
                .await?;
            let answer = self.json(&what, response).await?;
            let listed = answer
                .get("files")
                .and_then(Value::as_array)
                .ok_or_else(|| HubError::Protocol {
                    what: what.clone(),
                    message: format!("no files list in {}", quote(&answer)),
                })?;
            for file in listed {
                let path = file.get("path").and_then(Value::as_str);
                let mode = file.get("uploadMode").and_then(Value::as_str);
                let (Some(path), Some(mode @ ("lfs" | "regular"))) = (path, mode) else {
                    return Err(HubError::Protocol {
                        what: what.clone(),
                        message: format!("a file without path or upload mode: {}", quote(file)),
                    });
                };
                let oid = file.get("oid").and_then(Value::as_str).map(str::to_string);
                modes.insert(path.to_string(), (mode == "lfs", oid));
            }
        }
        Ok(modes)
    }

    /// Asks the LFS batch API for upload actions and carries them out.
    async fn upload_lfs(
        &self,
        repo_id: &str,
        revision: &str,
        files: &[&Prepared],
        outcome: &mut Outcome,
        note: &(dyn Fn(&str) + Sync),
    ) -> Result<(), HubError> {
        let what = format!("ask the LFS batch API of {repo_id} where to upload");
        let url = self.api(&format!("/datasets/{repo_id}.git/info/lfs/objects/batch"));
        let body = json!({
            "operation": "upload",
            "transfers": ["basic", "multipart"],
            "objects": files.iter().map(|f| json!({"oid": f.sha256, "size": f.size})).collect::<Vec<_>>(),
            "hash_algo": "sha256",
            "ref": {"name": revision},
        });
        let response = self
            .send(&what, &[], || {
                self.authorized(self.http.post(&url))
                    .header("accept", LFS_JSON)
                    .header("content-type", LFS_JSON)
                    .body(body.to_string())
            })
            .await?;
        let answer = self.json(&what, response).await?;
        let objects = answer
            .get("objects")
            .and_then(Value::as_array)
            .ok_or_else(|| HubError::Protocol {
                what: what.clone(),
                message: format!("no objects in {}", quote(&answer)),
            })?;
        for object in objects {
            let oid = object.get("oid").and_then(Value::as_str).unwrap_or("");
            let Some(file) = files.iter().find(|f| f.sha256 == oid) else {
                return Err(HubError::Protocol {
                    what: what.clone(),
                    message: format!("an object kiln did not ask for: {}", quote(object)),
                });
            };
            let path = &file.upload.path_in_repo;
            if let Some(error) = object.get("error") {
                return Err(HubError::Protocol {
                    what: format!("upload {path}"),
                    message: format!("the LFS batch API refused it: {}", quote(error)),
                });
            }
            let Some(actions) = object.get("actions") else {
                outcome.already_stored.push(path.clone());
                note(&format!("{path}: already stored on the Hub"));
                continue;
            };
            let upload = actions.get("upload").ok_or_else(|| HubError::Protocol {
                what: format!("upload {path}"),
                message: format!("actions without upload: {}", quote(actions)),
            })?;
            let href =
                upload
                    .get("href")
                    .and_then(Value::as_str)
                    .ok_or_else(|| HubError::Protocol {
                        what: format!("upload {path}"),
                        message: format!("an upload action without href: {}", quote(upload)),
                    })?;
            let header = upload.get("header").cloned().unwrap_or(Value::Null);
            match header.get("chunk_size") {
                Some(chunk_size) => {
                    self.upload_parts(file, href, &header, chunk_size).await?;
                }
                None => {
                    let bytes = bytes::Bytes::from(read_range(&file.upload.content, 0, u64::MAX)?);
                    self.send(&format!("upload {path}"), &[], || {
                        self.http.put(href).body(bytes.clone())
                    })
                    .await?;
                }
            }
            if let Some(verify) = actions.get("verify") {
                let verify_url = verify.get("href").and_then(Value::as_str).ok_or_else(|| {
                    HubError::Protocol {
                        what: format!("verify {path}"),
                        message: format!("a verify action without href: {}", quote(verify)),
                    }
                })?;
                // The token goes to the Hub alone, never to an address on another host.
                if !same_origin(verify_url, &self.endpoint) {
                    return Err(HubError::Protocol {
                        what: format!("verify {path}"),
                        message: format!(
                            "the verify address is not on the Hub ({}), and it would be sent the token",
                            quote(&origin(verify_url))
                        ),
                    });
                }
                let body = json!({"oid": file.sha256, "size": file.size});
                self.send(&format!("verify the upload of {path}"), &[], || {
                    self.authorized(self.http.post(verify_url))
                        .header("accept", LFS_JSON)
                        .header("content-type", LFS_JSON)
                        .body(body.to_string())
                })
                .await?;
            }
            outcome.sent.push(path.clone());
            note(&format!("{path}: sent ({} bytes)", file.size));
        }
        Ok(())
    }

    /// A multipart upload: one `PUT` per part to the addresses the header lists under `"1"`,
    /// `"2"`, ..., then the part ETags to `href`.
    async fn upload_parts(
        &self,
        file: &Prepared,
        href: &str,
        header: &Value,
        chunk_size: &Value,
    ) -> Result<(), HubError> {
        let path = &file.upload.path_in_repo;
        let protocol = |message: String| HubError::Protocol {
            what: format!("upload {path} in parts"),
            message,
        };
        let chunk_size = chunk_size
            .as_u64()
            .or_else(|| chunk_size.as_str().and_then(|s| s.parse().ok()))
            .filter(|n| *n > 0)
            .ok_or_else(|| {
                protocol(format!(
                    "chunk_size {} is not a positive integer",
                    quote(chunk_size)
                ))
            })?;
        let mut parts: Vec<(u64, String)> = header
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.parse::<u64>().ok()?, v.as_str()?.to_string())))
            .collect();
        parts.sort();
        if parts.len() as u64 != file.size.div_ceil(chunk_size) {
            return Err(protocol(format!(
                "{} part addresses for {} bytes in parts of {chunk_size}",
                parts.len(),
                file.size
            )));
        }
        let mut etags = Vec::new();
        for (index, (number, url)) in parts.iter().enumerate() {
            let bytes = bytes::Bytes::from(read_range(
                &file.upload.content,
                index as u64 * chunk_size,
                chunk_size,
            )?);
            let response = self
                .send(&format!("upload part {number} of {path}"), &[], || {
                    self.http.put(url).body(bytes.clone())
                })
                .await?;
            let etag = response
                .headers()
                .get("etag")
                .and_then(|v| v.to_str().ok())
                .filter(|v| !v.is_empty())
                .ok_or_else(|| protocol(format!("part {number} came back without an ETag")))?;
            etags.push(json!({"partNumber": number, "etag": etag}));
        }
        let body = json!({"oid": file.sha256, "parts": etags});
        self.send(&format!("complete the upload of {path}"), &[], || {
            self.http
                .post(href)
                .header("accept", LFS_JSON)
                .header("content-type", LFS_JSON)
                .body(body.to_string())
        })
        .await?;
        Ok(())
    }
}

/// `scheme://host[:port]` of a URL.
fn origin(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    let end = url[after_scheme..]
        .find('/')
        .map_or(url.len(), |i| after_scheme + i);
    &url[..end]
}

/// Whether two URLs share scheme, host and port.
fn same_origin(url: &str, endpoint: &str) -> bool {
    origin(url).eq_ignore_ascii_case(origin(endpoint))
}

/// The `rel="next"` address of a `Link` header.
fn next_link(header: &str) -> Option<String> {
    header.split(',').find_map(|part| {
        let (target, params) = part.split_once(';')?;
        params
            .split(';')
            .any(|p| p.trim() == "rel=\"next\"")
            .then(|| {
                target
                    .trim()
                    .trim_start_matches('<')
                    .trim_end_matches('>')
                    .to_string()
            })
    })
}

/// `(namespace, name)` of `namespace/name`.
fn split_repo(repo_id: &str) -> Result<(&str, &str), HubError> {
    let valid = |part: &str| {
        !part.is_empty()
            && part.len() <= 96
            && part
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            && !part.starts_with(['-', '.'])
    };
    match repo_id.split_once('/') {
        Some((namespace, name)) if valid(namespace) && valid(name) => Ok((namespace, name)),
        _ => Err(HubError::Protocol {
            what: format!("use {repo_id:?} as a repository"),
            message: "write namespace/name, letters, digits, '-', '_' and '.' only".into(),
        }),
    }
}

/// Percent-encodes a revision for a URL path (`refs/pr/1` keeps no slash).
fn encode_revision(revision: &str) -> String {
    revision
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.') {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// The largest API answer kiln reads (a tree listing page of 1,000 entries is about 300 KB).
const MAX_ANSWER_BYTES: usize = 32 << 20;
/// How much of an error answer kiln reads: the message is cut to a line anyway.
const MAX_ERROR_BYTES: usize = 64 << 10;
/// The longest pause between two reads of an answer.
const READ_TIMEOUT: Duration = Duration::from_secs(120);
/// The longest an API answer's body may take to arrive once its headers came: a server that
/// drips bytes slower than this allows is given up, not waited on for the whole request timeout.
const BODY_DEADLINE: Duration = Duration::from_secs(120);
/// The most pages of one listing kiln follows.
const MAX_PAGES: usize = 10_000;

/// An answer body read up to a cap.
enum Body {
    /// All of it.
    Whole(Vec<u8>),
    /// The first `cap` bytes; more followed.
    Cut(Vec<u8>),
}

/// Reads `response`'s body up to `cap` bytes, within `deadline`; the error says what
/// went wrong (a dropped connection, the deadline).
async fn read_capped(
    mut response: reqwest::Response,
    cap: usize,
    deadline: Duration,
) -> Result<Body, String> {
    let read = async {
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| {
            format!(
                "the answer broke off: {}",
                kiln_core::net::error_chain(&e.without_url())
            )
        })? {
            let room = cap - bytes.len();
            if chunk.len() > room {
                bytes.extend_from_slice(&chunk[..room]);
                return Ok(Body::Cut(bytes));
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(Body::Whole(bytes))
    };
    match tokio::time::timeout(deadline, read).await {
        Ok(body) => body,
        Err(_) => Err(format!(
            "the answer did not arrive within {:.0} s of its headers",
            deadline.as_secs_f64()
        )),
    }
}

/// The text of an error answer, at most [`MAX_ERROR_BYTES`] of it (what arrived, if it broke
/// off).
async fn error_body(response: reqwest::Response) -> String {
    match read_capped(response, MAX_ERROR_BYTES, BODY_DEADLINE).await {
        Ok(Body::Whole(bytes) | Body::Cut(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(message) => message,
    }
}

/// The Hub's error message from an answer body (`{"error": "..."}`), on one line and cut by
/// [`quote`].
fn hub_message(body: &str) -> String {
    let text = serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v.get("error").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_else(|| body.to_string());
    quote(&text.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// The token from the environment: `HF_TOKEN`, else `HUGGING_FACE_HUB_TOKEN` (the names the
/// official client reads).
#[must_use]
pub fn token_from_env() -> Option<String> {
    ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"]
        .iter()
        .find_map(|name| std::env::var(name).ok().filter(|v| !v.trim().is_empty()))
}

/// The Hub's address from `HF_ENDPOINT`, else [`DEFAULT_ENDPOINT`].
#[must_use]
pub fn endpoint_from_env() -> String {
    std::env::var("HF_ENDPOINT")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string())
}

/// Whether `path` is a path the Hub accepts in a repository (relative, no `..` segment).
#[must_use]
pub fn valid_path(path: &Path) -> bool {
    path.is_relative()
        && path
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_blob_ids_and_hashes_match_git() {
        let prepared = prepare(Upload {
            path_in_repo: "a".into(),
            content: Content::Bytes(b"hello\n".to_vec()),
        })
        .unwrap();
        // `printf 'hello\n' | git hash-object --stdin`
        assert_eq!(
            prepared.git_sha1,
            "ce013625030ba8dba906f756967f9e9ca394464a"
        );
        assert_eq!(
            prepared.sha256,
            "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"
        );
        assert_eq!(prepared.size, 6);
        assert_eq!(prepared.sample, b"hello\n");
    }

    #[test]
    fn repository_ids_and_revisions() {
        assert!(split_repo("ns/name.v2").is_ok());
        assert!(split_repo("name").is_err());
        assert!(split_repo("ns/../x").is_err());
        assert!(split_repo("ns/a b").is_err());
        assert_eq!(encode_revision("refs/pr/1"), "refs%2Fpr%2F1");
        assert_eq!(encode_revision("main"), "main");
    }

    #[test]
    fn origins_and_links() {
        assert!(same_origin("https://hf.co/a?x=1", "https://hf.co"));
        assert!(!same_origin("https://s3.example/a", "https://hf.co"));
        assert!(!same_origin("http://hf.co:81/a", "http://hf.co"));
        assert_eq!(
            next_link(r#"<https://hf.co/api/x?cursor=abc>; rel="next""#).as_deref(),
            Some("https://hf.co/api/x?cursor=abc")
        );
        assert_eq!(next_link(r#"<https://hf.co/p1>; rel="prev""#), None);
    }

    #[test]
    fn ranges_of_bytes() {
        let content = Content::Bytes(b"abcdef".to_vec());
        assert_eq!(read_range(&content, 2, 3).unwrap_or_default(), b"cde");
        assert_eq!(read_range(&content, 4, 10).unwrap_or_default(), b"ef");
        assert_eq!(read_range(&content, 9, 1).unwrap_or_default(), b"");
    }
}
