//! [`FakeHub`]: the server, and what tests set and read on it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use super::hostile::Hostile;
use super::model::{HubCommit, HubRequest, State, Stored};
use super::routes::handle;
use crate::TestkitError;
use crate::http::{Reply, Request, Server};

/// The fake Hub; it answers while this lives.
pub struct FakeHub {
    server: Server,
    state: Arc<Mutex<State>>,
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
