//! The repository calls of [`Hub`]: the card check, creation, a revision's commit and the
//! paged tree listing.

use kiln_core::net::quote;
use serde_json::{Value, json};

use crate::client::Hub;
use crate::error::HubError;
use crate::http::{MAX_ANSWER_BYTES, error_body, hub_message, next_link, origin, same_origin};
use crate::listing::{MAX_PAGES, TreeEntry};
use crate::names::{encode_revision, split_repo};

impl Hub {
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
}
