//! A fake Hugging Face Hub: the HTTP API that the official `huggingface_hub` client uses to
//! create a dataset repository and commit files without Xet (preupload, LFS batch with basic and
//! multipart transfers, verify, NDJSON commit), and the read side that `huggingface_hub` and
//! `datasets` use to load it back (repository info, tree listing, paths info, `resolve` with
//! ranges). It checks what a client sends as the Hub would: the token on API calls and never on
//! storage URLs, LFS content types, every uploaded object's size and SHA-256, multipart ETags,
//! and that a commit names only objects it holds. Requests are logged in order, and every
//! violation is recorded in [`FakeHub::problems`] besides being refused.
//!
//! Shapes follow `huggingface_hub` 2.x (`_commit_api.py`, `lfs.py`, `hf_api.py`), which the
//! fake is checked with (`scripts/hub-check.py`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use crate::TestkitError;
use crate::http::{Reply, Request, Server};

/// Content type of the LFS batch API.
const LFS_JSON: &str = "application/vnd.git-lfs+json";

/// One stored file of a commit.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Stored {
    /// In git.
    Regular(Vec<u8>),
    /// An LFS pointer to an object of the repository.
    Lfs { oid: String, size: u64 },
}

/// One commit.
#[derive(Debug, Clone)]
struct Commit {
    oid: String,
    summary: String,
    description: String,
    files: BTreeMap<String, Stored>,
}

#[derive(Debug, Default)]
struct Repo {
    private: bool,
    commits: Vec<Commit>,
    /// LFS objects by SHA-256.
    objects: BTreeMap<String, Vec<u8>>,
    /// Parts of multipart uploads in progress: oid -> part number -> (etag, bytes).
    parts: BTreeMap<String, BTreeMap<u64, (String, Vec<u8>)>>,
}

impl Repo {
    fn head(&self) -> Option<&Commit> {
        self.commits.last()
    }

    fn at(&self, revision: &str) -> Option<&Commit> {
        if revision == "main" {
            return self.head();
        }
        self.commits.iter().find(|c| c.oid == revision)
    }
}

/// A request as the fake logged it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubRequest {
    /// `GET`, `POST`, `PUT`, `HEAD`.
    pub method: String,
    /// Path without the query.
    pub path: String,
    /// The status answered.
    pub status: u16,
    /// Whether it carried an `Authorization` header.
    pub authorized: bool,
    /// Bytes of the answer's body (0 for a dropped connection).
    pub body_bytes: usize,
}

/// A commit as the fake holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubCommit {
    /// Commit id.
    pub oid: String,
    /// Its summary line.
    pub summary: String,
    /// Its description.
    pub description: String,
    /// Paths of every file in the repository after it.
    pub paths: Vec<String>,
}

#[derive(Debug, Default)]
struct State {
    tokens: Vec<String>,
    repos: BTreeMap<String, Repo>,
    log: Vec<HubRequest>,
    problems: Vec<String>,
    /// LFS objects larger than this are uploaded in parts of this size.
    part_size: Option<u64>,
    /// Entries per page of a tree listing (the Hub's is 1,000 without `expand`).
    page_size: Option<usize>,
    /// Requests whose path contains the key are answered with the status, that many times.
    faults: Vec<(String, u16, usize)>,
    /// How a hostile or broken Hub answers every request, when set.
    hostile: Option<Hostile>,
}

/// How a hostile or broken Hub answers every request ([`FakeHub::turn_hostile`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hostile {
    /// An empty listing page whose `next` link is the page itself.
    LoopingPages,
    /// A 200 answer of this many bytes.
    Huge(usize),
    /// A 400 answer of this many bytes.
    HugeError(usize),
    /// Headers at once, then one body byte every this many milliseconds.
    Drip(u64),
    /// Listing pages that do not end: every answer is a page of `entries` files, each path
    /// `path_bytes` long, whose `next` link names a cursor no page named before, up to page
    /// `pages`, which names none (so that a client without a budget ends too, and its test
    /// fails instead of running out of memory).
    EndlessPages {
        /// Entries per page.
        entries: usize,
        /// Bytes per path.
        path_bytes: usize,
        /// The page that ends the listing.
        pages: usize,
    },
    /// A 200 JSON object of this many bytes (one long string) holding none of the fields kiln
    /// reads (`sha`, `files`, `objects`, `commitOid`); its body is made as it is read.
    HugeJson(usize),
}

/// Bytes of a reply's body.
fn body_bytes(reply: &Reply) -> usize {
    match reply {
        Reply::Response { body, .. } | Reply::Drip { body, .. } => body.len(),
        Reply::Stream {
            head,
            fill_len,
            tail,
            ..
        } => head.len() + fill_len + tail.len(),
        Reply::Drop => 0,
    }
}

/// The hostile answer to a request for `target` (path and query) on `base`, the `number`th
/// request the fake answers (from 0).
fn hostile_reply(mode: Hostile, base: &str, target: &str, number: usize) -> Reply {
    match mode {
        Hostile::LoopingPages => Reply::json(200, &json!([]))
            .with_header("link", format!("<{base}{target}>; rel=\"next\"")),
        Hostile::EndlessPages {
            entries,
            path_bytes,
            pages,
        } => {
            let page: Vec<Value> = (0..entries)
                .map(|i| {
                    let name = format!("page-{number}/file-{i}-");
                    let pad = "x".repeat(path_bytes.saturating_sub(name.len()));
                    json!({"type": "file", "oid": "0", "size": 1, "path": format!("{name}{pad}")})
                })
                .collect();
            let reply = Reply::json(200, &Value::Array(page));
            if number + 1 >= pages {
                return reply;
            }
            let path = target.split_once('?').map_or(target, |(path, _)| path);
            reply.with_header(
                "link",
                format!("<{base}{path}?recursive=true&cursor=c{number}>; rel=\"next\""),
            )
        }
        Hostile::HugeJson(n) => {
            let (head, tail) = ("{\"padding\":\"", "\"}");
            Reply::Stream {
                status: 200,
                headers: vec![("content-type".into(), "application/json".into())],
                head: head.into(),
                fill: b'x',
                fill_len: n.saturating_sub(head.len() + tail.len()),
                tail: tail.into(),
                announced: true,
            }
        }
        Hostile::Huge(n) => {
            Reply::bytes(200, vec![b'x'; n]).with_header("content-type", "application/json")
        }
        Hostile::HugeError(n) => {
            Reply::bytes(400, vec![b'x'; n]).with_header("content-type", "application/json")
        }
        Hostile::Drip(every) => Reply::Drip {
            status: 200,
            headers: vec![("content-type".into(), "application/json".into())],
            body: vec![b' '; 1000].into(),
            every: std::time::Duration::from_millis(every),
        },
    }
}

/// The fake Hub; it answers while this lives.
pub struct FakeHub {
    server: Server,
    state: Arc<Mutex<State>>,
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn sha256(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Git's blob id of `bytes` (what the Hub reports as the `oid` of a file kept in git).
fn git_blob(bytes: &[u8]) -> String {
    let mut data = format!("blob {}\0", bytes.len()).into_bytes();
    data.extend_from_slice(bytes);
    sha1(&data)
}

/// SHA-1, for git blob and commit ids.
fn sha1(data: &[u8]) -> String {
    hex(&sha1::Sha1::digest(data))
}

/// The pointer file git keeps for an LFS object.
fn pointer(oid: &str, size: u64) -> Vec<u8> {
    format!("version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize {size}\n")
        .into_bytes()
}

/// The `.gitattributes` the Hub writes into a new dataset repository (abridged).
const GITATTRIBUTES: &str = "*.parquet filter=lfs diff=lfs merge=lfs -text\n*.arrow filter=lfs diff=lfs merge=lfs -text\n*.bin filter=lfs diff=lfs merge=lfs -text\n*.zip filter=lfs diff=lfs merge=lfs -text\n";

fn error(status: u16, message: &str) -> Reply {
    Reply::json(status, &json!({"error": message}))
}

fn repo_not_found(repo: &str) -> Reply {
    error(404, &format!("Repository not found: {repo}")).with_header("x-error-code", "RepoNotFound")
}

impl FakeHub {
    /// Starts a fake Hub that accepts the given tokens for writes.
    ///
    /// # Errors
    /// When the server cannot start.
    pub fn start(tokens: &[&str]) -> Result<Self, TestkitError> {
        let state = Arc::new(Mutex::new(State {
            tokens: tokens.iter().map(|t| (*t).to_string()).collect(),
            ..State::default()
        }));
        let shared = Arc::clone(&state);
        let server = Server::start(move |request: Request, base: &str| {
            let Ok(mut state) = shared.lock() else {
                return Reply::bytes(500, "poisoned");
            };
            let authorized = request.header("authorization").is_some();
            let (method, path) = (request.method.clone(), request.path.clone());
            let reply = handle(&mut state, request, base);
            state.log.push(HubRequest {
                method,
                path,
                status: reply.status().unwrap_or(0),
                authorized,
                body_bytes: body_bytes(&reply),
            });
            reply
        })?;
        Ok(Self { server, state })
    }

    /// `http://127.0.0.1:PORT`, what `HF_ENDPOINT` is set to.
    #[must_use]
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// LFS objects larger than `bytes` are uploaded in parts of `bytes` (multipart transfer).
    pub fn set_part_size(&self, bytes: u64) {
        if let Ok(mut state) = self.state.lock() {
            state.part_size = Some(bytes.max(1));
        }
    }

    /// Tree listings come in pages of `entries`, each naming the next in a `Link` header.
    pub fn set_page_size(&self, entries: usize) {
        if let Ok(mut state) = self.state.lock() {
            state.page_size = Some(entries.max(1));
        }
    }

    /// The next `times` requests whose path contains `path_part` are answered `status`.
    pub fn fail(&self, path_part: &str, status: u16, times: usize) {
        if let Ok(mut state) = self.state.lock() {
            state.faults.push((path_part.to_string(), status, times));
        }
    }

    /// From now on every request is answered as `mode` says: a hostile or broken Hub.
    pub fn turn_hostile(&self, mode: Hostile) {
        if let Ok(mut state) = self.state.lock() {
            state.hostile = Some(mode);
        }
    }

    /// Forgets the faults [`FakeHub::fail`] set that have not happened yet.
    pub fn clear_faults(&self) {
        if let Ok(mut state) = self.state.lock() {
            state.faults.clear();
        }
    }

    /// Every request, in order.
    #[must_use]
    pub fn requests(&self) -> Vec<HubRequest> {
        self.state.lock().map(|s| s.log.clone()).unwrap_or_default()
    }

    /// What clients did that the Hub would refuse (a token sent to storage, a wrong hash, a
    /// missing header), in order.
    #[must_use]
    pub fn problems(&self) -> Vec<String> {
        self.state
            .lock()
            .map(|s| s.problems.clone())
            .unwrap_or_default()
    }

    /// The commits of a repository, oldest first (the Hub's initial commit included).
    #[must_use]
    pub fn commits(&self, repo: &str) -> Vec<HubCommit> {
        let Ok(state) = self.state.lock() else {
            return Vec::new();
        };
        state
            .repos
            .get(repo)
            .map(|r| {
                r.commits
                    .iter()
                    .map(|c| HubCommit {
                        oid: c.oid.clone(),
                        summary: c.summary.clone(),
                        description: c.description.clone(),
                        paths: c.files.keys().cloned().collect(),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The bytes of every file at the head of a repository (LFS objects resolved).
    #[must_use]
    pub fn files(&self, repo: &str) -> BTreeMap<String, Vec<u8>> {
        let Ok(state) = self.state.lock() else {
            return BTreeMap::new();
        };
        let Some(repo) = state.repos.get(repo) else {
            return BTreeMap::new();
        };
        repo.head()
            .map(|c| {
                c.files
                    .iter()
                    .map(|(path, stored)| {
                        let bytes = match stored {
                            Stored::Regular(b) => b.clone(),
                            Stored::Lfs { oid, .. } => {
                                repo.objects.get(oid).cloned().unwrap_or_default()
                            }
                        };
                        (path.clone(), bytes)
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Splits `/api/datasets/<ns>/<name>/<rest>` (and the git and resolve forms) into the repo and
/// the rest of the path.
fn repo_and_rest<'p>(path: &'p str, prefix: &str) -> Option<(String, &'p str)> {
    let rest = path.strip_prefix(prefix)?;
    let mut parts = rest.splitn(3, '/');
    let namespace = parts.next()?;
    let name = parts.next()?;
    let tail = parts.next().unwrap_or("");
    (!namespace.is_empty() && !name.is_empty()).then(|| (format!("{namespace}/{name}"), tail))
}

fn handle(state: &mut State, request: Request, base: &str) -> Reply {
    if let Some(mode) = state.hostile {
        let target = if request.query.is_empty() {
            request.path.clone()
        } else {
            format!("{}?{}", request.path, request.query)
        };
        return hostile_reply(mode, base, &target, state.log.len());
    }
    if let Some(fault) = state
        .faults
        .iter_mut()
        .find(|(part, _, times)| *times > 0 && request.path.contains(part.as_str()))
    {
        fault.2 -= 1;
        return error(fault.1, "injected fault");
    }
    let path = percent_decode(&request.path);
    let method = request.method.as_str();
    if path.starts_with("/lfs-store/") {
        return storage(state, &request, &path, base);
    }
    let token_ok = request
        .header("authorization")
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|t| state.tokens.iter().any(|k| k == t));
    let writes = method != "GET"
        && method != "HEAD"
        && !path.contains("/paths-info/")
        && path != "/api/validate-yaml";
    if writes && !token_ok {
        return error(401, "Invalid username or password.");
    }
    if method == "POST" && path == "/api/repos/create" {
        return create(state, &request, base);
    }
    if method == "POST" && path == "/api/validate-yaml" {
        return validate_yaml(&request);
    }
    if let Some((repo, rest)) = repo_and_rest(&path, "/datasets/") {
        if let Some(git) = repo.strip_suffix(".git").map(str::to_string) {
            return lfs_api(state, &request, &git, rest, base);
        }
        if let Some(rest) = rest.strip_prefix("resolve/") {
            return resolve(state, &request, &repo, rest, token_ok);
        }
    }
    let Some((repo, rest)) = repo_and_rest(&path, "/api/datasets/") else {
        return error(404, &format!("no route for {method} {path}"));
    };
    let Some(record) = state.repos.get(&repo) else {
        return repo_not_found(&repo);
    };
    if record.private && !token_ok {
        return repo_not_found(&repo);
    }
    let (verb, revision_and_path) = rest.split_once('/').unwrap_or((rest, ""));
    match (method, verb) {
        ("POST", "preupload") => preupload(state, &request, &repo),
        ("POST", "commit") => commit(state, &request, &repo, revision_and_path, base),
        ("GET", "tree") => tree(state, &request, &repo, revision_and_path, base),
        ("POST", "paths-info") => paths_info(state, &request, &repo, revision_and_path),
        ("GET", "" | "revision") => info(state, &repo, revision_and_path),
        _ => error(404, &format!("no route for {method} {path}")),
    }
}

fn create(state: &mut State, request: &Request, base: &str) -> Reply {
    let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
    let name = body.get("name").and_then(Value::as_str).unwrap_or("");
    let namespace = body
        .get("organization")
        .and_then(Value::as_str)
        .unwrap_or("user");
    if body.get("type").and_then(Value::as_str) != Some("dataset") {
        state
            .problems
            .push(format!("repos/create without type dataset: {body}"));
        return error(400, "only dataset repositories are served here");
    }
    let repo = format!("{namespace}/{name}");
    let url = format!("{base}/datasets/{repo}");
    if state.repos.contains_key(&repo) {
        return error(409, "You already created this dataset repo")
            .with_header("x-error-code", "RepoExists");
    }
    let files = BTreeMap::from([(
        ".gitattributes".to_string(),
        Stored::Regular(GITATTRIBUTES.as_bytes().to_vec()),
    )]);
    let oid = sha1(format!("initial {repo}").as_bytes());
    state.repos.insert(
        repo.clone(),
        Repo {
            private: body
                .get("private")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            commits: vec![Commit {
                oid,
                summary: "initial commit".into(),
                description: String::new(),
                files,
            }],
            ..Repo::default()
        },
    );
    Reply::json(
        200,
        &json!({"url": url, "name": repo, "id": sha1(repo.as_bytes())}),
    )
}

/// `POST /api/validate-yaml`: the card's front matter must be YAML the Hub can read, and every
/// entry of `configs` needs a `config_name` and `data_files`. (The real Hub checks much more;
/// this catches a card whose front matter is not closed, holds tabs, or lists a config
/// without a name.)
fn validate_yaml(request: &Request) -> Reply {
    let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
    let content = body.get("content").and_then(Value::as_str).unwrap_or("");
    let mut errors = Vec::new();
    let front = content
        .strip_prefix("---\n")
        .and_then(|rest| rest.split_once("\n---\n").map(|(front, _)| front));
    match front {
        None if content.starts_with("---") => {
            errors.push("the metadata block is not closed by ---".to_string())
        }
        None => {}
        Some(front) => {
            if front.contains('\t') {
                errors.push("tabs are not allowed in YAML".into());
            }
            let mut in_configs = false;
            let mut config: Option<(bool, bool)> = None;
            let close = |config: &mut Option<(bool, bool)>, errors: &mut Vec<String>| {
                if let Some((name, files)) = config.take()
                    && !(name && files)
                {
                    errors.push("every entry of configs needs config_name and data_files".into());
                }
            };
            for line in front.lines() {
                if !line.starts_with([' ', '-']) {
                    close(&mut config, &mut errors);
                    in_configs = line.starts_with("configs:");
                    continue;
                }
                if !in_configs {
                    continue;
                }
                if let Some(item) = line.strip_prefix("- ") {
                    close(&mut config, &mut errors);
                    config = Some((
                        item.starts_with("config_name:"),
                        item.starts_with("data_files:"),
                    ));
                } else if let Some((name, files)) = config.as_mut() {
                    let key = line.trim_start();
                    *name |= key.starts_with("config_name:");
                    *files |= key.starts_with("data_files:");
                }
            }
            close(&mut config, &mut errors);
        }
    }
    let status = if errors.is_empty() { 200 } else { 400 };
    let errors: Vec<Value> = errors.iter().map(|m| json!({"message": m})).collect();
    Reply::json(status, &json!({"errors": errors, "warnings": []}))
}

/// Whether a file goes to LFS: by `.gitattributes`, size, or binary content, as the Hub decides.
fn is_lfs(path: &str, size: u64, sample: &[u8]) -> bool {
    let by_pattern = [".parquet", ".arrow", ".bin", ".zip"]
        .iter()
        .any(|ext| path.ends_with(ext));
    by_pattern || size > 10 << 20 || sample.contains(&0)
}

fn preupload(state: &mut State, request: &Request, repo: &str) -> Reply {
    let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
    let Some(files) = body.get("files").and_then(Value::as_array) else {
        state
            .problems
            .push(format!("preupload without files: {body}"));
        return error(400, "files is required");
    };
    if files.len() > 256 {
        state
            .problems
            .push(format!("preupload of {} files (at most 256)", files.len()));
        return error(400, "too many files");
    }
    let head = state.repos.get(repo).and_then(Repo::head);
    let mut out = Vec::new();
    for file in files {
        let path = file.get("path").and_then(Value::as_str).unwrap_or("");
        let size = file.get("size").and_then(Value::as_u64);
        let sample = file
            .get("sample")
            .and_then(Value::as_str)
            .and_then(|s| base64_decode(s).ok());
        let (Some(size), Some(sample)) = (size, sample) else {
            state.problems.push(format!(
                "preupload entry without size or base64 sample: {file}"
            ));
            return error(400, "each file needs path, size and sample");
        };
        if sample.len() > 512 {
            state.problems.push(format!(
                "{path}: a sample of {} bytes (at most 512)",
                sample.len()
            ));
        }
        let lfs = is_lfs(path, size, &sample);
        let oid = head
            .and_then(|c| c.files.get(path))
            .map(|stored| match stored {
                Stored::Regular(bytes) => git_blob(bytes),
                Stored::Lfs { oid, .. } => oid.clone(),
            });
        out.push(json!({"path": path, "uploadMode": if lfs {"lfs"} else {"regular"}, "shouldIgnore": false, "oid": oid}));
    }
    Reply::json(
        200,
        &json!({"files": out, "commitOid": head.map(|c| c.oid.clone())}),
    )
}

fn lfs_api(state: &mut State, request: &Request, repo: &str, rest: &str, base: &str) -> Reply {
    let lfs_reply = |status: u16, value: &Value| {
        Reply::bytes(status, Bytes::from(value.to_string())).with_header("content-type", LFS_JSON)
    };
    if !state.repos.contains_key(repo) {
        return repo_not_found(repo);
    }
    // The batch API wants the LFS media type both ways; verify takes any JSON (the official
    // client sends application/json there).
    let batch = rest == "info/lfs/objects/batch";
    let content_type_ok = request
        .header("content-type")
        .is_some_and(|v| v.starts_with(LFS_JSON) || (!batch && v.starts_with("application/json")));
    let accept_ok = !batch
        || request
            .header("accept")
            .is_some_and(|v| v.contains(LFS_JSON));
    if !content_type_ok || !accept_ok {
        state.problems.push(format!(
            "{rest}: content-type {:?}, accept {:?} (both must be {LFS_JSON})",
            request.header("content-type"),
            request.header("accept")
        ));
        return lfs_reply(415, &json!({"message": "wrong content type"}));
    }
    let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
    match rest {
        "info/lfs/objects/batch" => {
            if body.get("operation").and_then(Value::as_str) != Some("upload")
                || body
                    .get("hash_algo")
                    .and_then(Value::as_str)
                    .is_some_and(|a| a != "sha256")
            {
                state
                    .problems
                    .push(format!("LFS batch not an upload of sha256 objects: {body}"));
                return lfs_reply(422, &json!({"message": "unsupported batch"}));
            }
            let transfers: Vec<&str> = body
                .get("transfers")
                .and_then(Value::as_array)
                .map(|t| t.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let part_size = state.part_size.filter(|_| transfers.contains(&"multipart"));
            let Some(objects) = body.get("objects").and_then(Value::as_array) else {
                state
                    .problems
                    .push(format!("LFS batch without objects: {body}"));
                return lfs_reply(422, &json!({"message": "objects is required"}));
            };
            let Some(record) = state.repos.get(repo) else {
                return repo_not_found(repo);
            };
            let mut answered = Vec::new();
            let mut multipart = false;
            for object in objects {
                let oid = object
                    .get("oid")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                let size = object.get("size").and_then(Value::as_u64).unwrap_or(0);
                if oid.len() != 64 || !oid.bytes().all(|b| b.is_ascii_hexdigit()) {
                    answered.push(json!({"oid": oid, "size": size, "error": {"code": 422, "message": "oid is not a sha256"}}));
                    continue;
                }
                if record.objects.contains_key(&oid) {
                    answered.push(json!({"oid": oid, "size": size}));
                    continue;
                }
                let verify =
                    json!({"href": format!("{base}/datasets/{repo}.git/info/lfs/objects/verify")});
                let store = format!("{base}/lfs-store/{repo}/{oid}");
                let upload = match part_size {
                    Some(part) if size > part => {
                        multipart = true;
                        let mut header = serde_json::Map::new();
                        header.insert("chunk_size".into(), json!(part.to_string()));
                        for n in 1..=size.div_ceil(part) {
                            header.insert(
                                n.to_string(),
                                json!(format!("{store}/part/{n}?X-Amz-Signature=fake")),
                            );
                        }
                        json!({"href": format!("{store}/complete"), "header": header})
                    }
                    _ => json!({"href": format!("{store}?X-Amz-Signature=fake")}),
                };
                answered.push(json!({"oid": oid, "size": size, "authenticated": true, "actions": {"upload": upload, "verify": verify}}));
            }
            lfs_reply(
                200,
                &json!({"transfer": if multipart {"multipart"} else {"basic"}, "objects": answered}),
            )
        }
        "info/lfs/objects/verify" => {
            let oid = body.get("oid").and_then(Value::as_str).unwrap_or("");
            let size = body.get("size").and_then(Value::as_u64);
            match state.repos.get(repo).and_then(|r| r.objects.get(oid)) {
                Some(bytes) if Some(bytes.len() as u64) == size => lfs_reply(200, &json!({})),
                _ => {
                    state
                        .problems
                        .push(format!("verify of an object not stored: {body}"));
                    lfs_reply(404, &json!({"message": "object not found"}))
                }
            }
        }
        _ => error(404, &format!("no LFS route {rest}")),
    }
}

/// The storage side of LFS uploads (S3 on the real Hub): presigned addresses, no token.
fn storage(state: &mut State, request: &Request, path: &str, base: &str) -> Reply {
    let _ = base;
    if request.header("authorization").is_some() {
        state.problems.push(format!(
            "{} {path}: an Authorization header sent to a storage address (the token leaks to the storage service)",
            request.method
        ));
    }
    let rest = path.trim_start_matches("/lfs-store/");
    let parts: Vec<&str> = rest.split('/').collect();
    if parts.len() < 3 {
        return error(404, "no such storage address");
    }
    let repo = format!("{}/{}", parts[0], parts[1]);
    let oid = parts[2].to_string();
    let Some(record) = state.repos.get_mut(&repo) else {
        return repo_not_found(&repo);
    };
    match (request.method.as_str(), &parts[3..]) {
        ("PUT", []) => {
            let got = sha256(&request.body);
            if got != oid {
                state.problems.push(format!(
                    "upload of {oid}: the bytes hash to {got} ({} bytes)",
                    request.body.len()
                ));
                return error(400, "content does not match the oid");
            }
            record.objects.insert(oid.clone(), request.body.to_vec());
            Reply::bytes(200, "").with_header("etag", format!("\"{}\"", &oid[..32]))
        }
        ("PUT", ["part", n]) => {
            let Ok(n) = n.parse::<u64>() else {
                return error(400, "bad part number");
            };
            let etag = format!("\"{}\"", &sha256(&request.body)[..32]);
            record
                .parts
                .entry(oid)
                .or_default()
                .insert(n, (etag.clone(), request.body.to_vec()));
            Reply::bytes(200, "").with_header("etag", etag)
        }
        ("POST", ["complete"]) => {
            let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
            let listed: Vec<(u64, String)> = body
                .get("parts")
                .and_then(Value::as_array)
                .map(|parts| {
                    parts
                        .iter()
                        .filter_map(|p| {
                            Some((
                                p.get("partNumber")?.as_u64()?,
                                p.get("etag")?.as_str()?.to_string(),
                            ))
                        })
                        .collect()
                })
                .unwrap_or_default();
            let stored = record.parts.remove(&oid).unwrap_or_default();
            let mut bytes = Vec::new();
            for (i, (number, etag)) in listed.iter().enumerate() {
                match stored.get(number) {
                    Some((kept, part)) if kept == etag && *number == i as u64 + 1 => {
                        bytes.extend_from_slice(part);
                    }
                    _ => {
                        state.problems.push(format!(
                            "completion of {oid}: part {number} with etag {etag} was not uploaded as listed"
                        ));
                        return error(400, "parts do not match");
                    }
                }
            }
            if listed.len() != stored.len() || sha256(&bytes) != oid {
                state.problems.push(format!(
                    "completion of {oid}: {} parts listed, {} uploaded, assembled hash {}",
                    listed.len(),
                    stored.len(),
                    sha256(&bytes)
                ));
                return error(400, "assembled object does not match the oid");
            }
            record.objects.insert(oid, bytes);
            Reply::json(200, &json!({}))
        }
        _ => error(404, "no such storage address"),
    }
}

fn commit(state: &mut State, request: &Request, repo: &str, revision: &str, base: &str) -> Reply {
    if !request
        .header("content-type")
        .is_some_and(|v| v.starts_with("application/x-ndjson"))
    {
        state.problems.push(format!(
            "commit with content-type {:?} (application/x-ndjson expected)",
            request.header("content-type")
        ));
        return error(400, "commit bodies are NDJSON");
    }
    if revision != "main" {
        return error(404, &format!("Revision not found: {revision}"));
    }
    let text = String::from_utf8_lossy(&request.body).to_string();
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header: Value = lines
        .next()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or(Value::Null);
    if header.get("key").and_then(Value::as_str) != Some("header") {
        state
            .problems
            .push(format!("commit without a header line first: {header}"));
        return error(400, "the first line must be the header");
    }
    let summary = header
        .pointer("/value/summary")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let description = header
        .pointer("/value/description")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let Some(record) = state.repos.get_mut(repo) else {
        return repo_not_found(repo);
    };
    let parent = record.head().cloned();
    if let Some(expected) = header
        .pointer("/value/parentCommit")
        .and_then(Value::as_str)
        && parent.as_ref().map(|c| c.oid.as_str()) != Some(expected)
    {
        return error(
            412,
            "A commit has happened since. Please refresh and try again.",
        );
    }
    let mut files = parent.as_ref().map(|c| c.files.clone()).unwrap_or_default();
    let mut problems = Vec::new();
    for line in lines {
        let op: Value = serde_json::from_str(line).unwrap_or(Value::Null);
        let value = op.get("value").cloned().unwrap_or(Value::Null);
        let path = value
            .get("path")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if path.is_empty() || path.starts_with('/') || path.split('/').any(|s| s == "..") {
            problems.push(format!("commit operation with a bad path: {op}"));
            continue;
        }
        match op.get("key").and_then(Value::as_str) {
            Some("file") => {
                let encoding = value.get("encoding").and_then(Value::as_str);
                let content = value.get("content").and_then(Value::as_str).unwrap_or("");
                match (encoding, base64_decode(content)) {
                    (Some("base64"), Ok(bytes)) => {
                        files.insert(path, Stored::Regular(bytes));
                    }
                    _ => problems.push(format!("{path}: a file line without base64 content")),
                }
            }
            Some("lfsFile") => {
                let oid = value
                    .get("oid")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                let size = value.get("size").and_then(Value::as_u64).unwrap_or(0);
                let algo = value.get("algo").and_then(Value::as_str);
                match record.objects.get(&oid) {
                    Some(bytes) if bytes.len() as u64 == size && algo == Some("sha256") => {
                        files.insert(path, Stored::Lfs { oid, size });
                    }
                    _ => problems.push(format!(
                        "{path}: an LFS pointer to {oid} ({size} bytes, algo {algo:?}), which the Hub does not hold"
                    )),
                }
            }
            Some("deletedFile") => {
                files.remove(&path);
            }
            Some("deletedFolder") => {
                let prefix = format!("{}/", path.trim_end_matches('/'));
                files.retain(|p, _| !p.starts_with(&prefix));
            }
            _ => problems.push(format!("unknown commit operation: {op}")),
        }
    }
    if !problems.is_empty() {
        let message = problems.join("; ");
        state.problems.extend(problems);
        return error(422, &format!("Your push was rejected: {message}"));
    }
    let listing: String = files.iter().map(|(p, s)| format!("{p}:{s:?}\n")).collect();
    let oid = sha1(
        format!(
            "{}\n{summary}\n{listing}",
            parent.map(|c| c.oid).unwrap_or_default()
        )
        .as_bytes(),
    );
    let Some(record) = state.repos.get_mut(repo) else {
        return repo_not_found(repo);
    };
    record.commits.push(Commit {
        oid: oid.clone(),
        summary,
        description,
        files,
    });
    Reply::json(
        200,
        &json!({"success": true, "commitOid": oid, "commitUrl": format!("{base}/datasets/{repo}/commit/{oid}"), "hookOutput": ""}),
    )
}

/// The tree entry of one file, as `/tree` and `/paths-info` give it.
fn file_entry(path: &str, stored: &Stored) -> Value {
    match stored {
        Stored::Regular(bytes) => {
            json!({"type": "file", "oid": git_blob(bytes), "size": bytes.len(), "path": path})
        }
        Stored::Lfs { oid, size } => {
            let pointer = pointer(oid, *size);
            json!({"type": "file", "oid": git_blob(&pointer), "size": size, "path": path,
                   "lfs": {"oid": oid, "size": size, "pointerSize": pointer.len()}})
        }
    }
}

fn directory_entry(path: &str) -> Value {
    json!({"type": "directory", "oid": sha1(path.as_bytes()), "size": 0, "path": path})
}

/// `<revision>/<path>` split at the first slash.
fn revision_path(rest: &str) -> (&str, &str) {
    let (revision, path) = rest.split_once('/').unwrap_or((rest, ""));
    (revision, path.trim_matches('/'))
}

fn tree(state: &State, request: &Request, repo: &str, rest: &str, base: &str) -> Reply {
    let (revision, dir) = revision_path(rest);
    let Some(commit) = state.repos.get(repo).and_then(|r| r.at(revision)) else {
        return error(404, &format!("Revision not found: {revision}"))
            .with_header("x-error-code", "RevisionNotFound");
    };
    let recursive = request
        .query_param("recursive")
        .is_some_and(|v| v == "true" || v == "1");
    let prefix = if dir.is_empty() {
        String::new()
    } else {
        format!("{dir}/")
    };
    if !dir.is_empty() && !commit.files.keys().any(|p| p.starts_with(&prefix)) {
        return error(404, &format!("Entry not found: {dir}"))
            .with_header("x-error-code", "EntryNotFound");
    }
    let mut entries: BTreeMap<String, Value> = BTreeMap::new();
    for (path, stored) in &commit.files {
        let Some(below) = path.strip_prefix(&prefix) else {
            continue;
        };
        let segments: Vec<&str> = below.split('/').collect();
        if recursive {
            for depth in 1..segments.len() {
                let d = format!("{prefix}{}", segments[..depth].join("/"));
                entries
                    .entry(d.clone())
                    .or_insert_with(|| directory_entry(&d));
            }
            entries.insert(path.clone(), file_entry(path, stored));
        } else if segments.len() == 1 {
            entries.insert(path.clone(), file_entry(path, stored));
        } else {
            let d = format!("{prefix}{}", segments[0]);
            entries
                .entry(d.clone())
                .or_insert_with(|| directory_entry(&d));
        }
    }
    let all: Vec<Value> = entries.into_values().collect();
    let page = state.page_size.unwrap_or(1000);
    let start: usize = request
        .query_param("cursor")
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let end = (start + page).min(all.len());
    let mut reply = Reply::json(200, &Value::Array(all[start.min(end)..end].to_vec()));
    if end < all.len() {
        reply = reply.with_header(
            "link",
            format!(
                "<{base}{}?recursive={recursive}&cursor={end}>; rel=\"next\"",
                request.path
            ),
        );
    }
    reply
}

fn paths_info(state: &State, request: &Request, repo: &str, revision: &str) -> Reply {
    let Some(commit) = state
        .repos
        .get(repo)
        .and_then(|r| r.at(revision.trim_matches('/')))
    else {
        return error(404, &format!("Revision not found: {revision}"));
    };
    // `paths` arrives form-encoded (repeated) or as JSON.
    let body = String::from_utf8_lossy(&request.body).to_string();
    let paths: Vec<String> = match serde_json::from_str::<Value>(&body) {
        Ok(v) => v
            .get("paths")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default(),
        Err(_) => body
            .split('&')
            .filter_map(|pair| pair.split_once('='))
            .filter(|(k, _)| *k == "paths")
            .map(|(_, v)| percent_decode(&v.replace('+', " ")))
            .collect(),
    };
    let mut out = Vec::new();
    for path in paths {
        let path = path.trim_matches('/').to_string();
        if let Some(stored) = commit.files.get(&path) {
            out.push(file_entry(&path, stored));
        } else if commit
            .files
            .keys()
            .any(|p| p.starts_with(&format!("{path}/")))
        {
            out.push(directory_entry(&path));
        }
    }
    Reply::json(200, &Value::Array(out))
}

fn info(state: &State, repo: &str, rest: &str) -> Reply {
    let revision = if rest.is_empty() {
        "main"
    } else {
        rest.trim_matches('/')
    };
    let Some(record) = state.repos.get(repo) else {
        return repo_not_found(repo);
    };
    let Some(commit) = record.at(revision) else {
        return error(404, &format!("Revision not found: {revision}"))
            .with_header("x-error-code", "RevisionNotFound");
    };
    let (author, _) = repo.split_once('/').unwrap_or((repo, ""));
    let siblings: Vec<Value> = commit
        .files
        .keys()
        .map(|p| json!({"rfilename": p}))
        .collect();
    Reply::json(
        200,
        &json!({
            "_id": sha1(repo.as_bytes()),
            "id": repo,
            "author": author,
            "sha": commit.oid,
            "lastModified": "2026-12-01T00:00:00.000Z",
            "createdAt": "2026-12-01T00:00:00.000Z",
            "private": record.private,
            "gated": false,
            "disabled": false,
            "downloads": 0,
            "likes": 0,
            "tags": [],
            "siblings": siblings,
            "cardData": {},
        }),
    )
}

fn resolve(state: &State, request: &Request, repo: &str, rest: &str, token_ok: bool) -> Reply {
    let Some(record) = state.repos.get(repo) else {
        return repo_not_found(repo);
    };
    if record.private && !token_ok {
        return repo_not_found(repo);
    }
    let (revision, path) = revision_path(rest);
    let Some(commit) = record.at(revision) else {
        return error(404, &format!("Revision not found: {revision}"))
            .with_header("x-error-code", "RevisionNotFound");
    };
    let Some(stored) = commit.files.get(path) else {
        return error(404, &format!("Entry not found: {path}"))
            .with_header("x-error-code", "EntryNotFound");
    };
    let (bytes, etag) = match stored {
        Stored::Regular(b) => (b.clone(), git_blob(b)),
        Stored::Lfs { oid, .. } => (
            record.objects.get(oid).cloned().unwrap_or_default(),
            oid.clone(),
        ),
    };
    let total = bytes.len();
    let (status, body, range) = match request.header("range").and_then(|r| parse_range(r, total)) {
        Some((start, end)) => (
            206,
            bytes[start..=end].to_vec(),
            Some(format!("bytes {start}-{end}/{total}")),
        ),
        None => (200, bytes, None),
    };
    let mut reply = Reply::bytes(status, body)
        .with_header("etag", format!("\"{etag}\""))
        .with_header("x-repo-commit", commit.oid.clone())
        .with_header("accept-ranges", "bytes")
        .with_header("content-type", "application/octet-stream");
    if let Stored::Lfs { oid, size } = stored {
        reply = reply
            .with_header("x-linked-etag", format!("\"{oid}\""))
            .with_header("x-linked-size", size.to_string());
    }
    if let Some(range) = range {
        reply = reply.with_header("content-range", range);
    }
    reply
}

/// `bytes=a-b`, `bytes=a-` and `bytes=-n` of a body of `total` bytes, inclusive.
fn parse_range(header: &str, total: usize) -> Option<(usize, usize)> {
    let spec = header.strip_prefix("bytes=")?;
    let (start, end) = spec.split_once('-')?;
    if total == 0 {
        return None;
    }
    let (start, end) = match (start.parse::<usize>().ok(), end.parse::<usize>().ok()) {
        (Some(s), Some(e)) => (s, e.min(total - 1)),
        (Some(s), None) => (s, total - 1),
        (None, Some(n)) => (total.saturating_sub(n), total - 1),
        (None, None) => return None,
    };
    (start <= end).then_some((start, end))
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = bytes.get(i + 1..i + 3)
            && let Ok(b) = u8::from_str_radix(&String::from_utf8_lossy(hex), 16)
        {
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn base64_decode(text: &str) -> Result<Vec<u8>, ()> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_ids_ranges_and_escapes() {
        // `printf 'hello\n' | git hash-object --stdin`
        assert_eq!(
            git_blob(b"hello\n"),
            "ce013625030ba8dba906f756967f9e9ca394464a"
        );
        assert_eq!(base64_decode("aGVsbG8K").unwrap_or_default(), b"hello\n");
        assert_eq!(parse_range("bytes=2-4", 10), Some((2, 4)));
        assert_eq!(parse_range("bytes=-3", 10), Some((7, 9)));
        assert_eq!(parse_range("bytes=8-", 10), Some((8, 9)));
        assert_eq!(percent_decode("a%2Fb%20c"), "a/b c");
        assert_eq!(percent_decode("%é%"), "%é%");
    }
}
