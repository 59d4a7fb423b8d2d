//! [`Hub::upload`]: files into a repository in one commit, through preupload, the LFS batch
//! API (basic and multipart transfers, verify) and one NDJSON commit.

use std::path::Path;

use base64::Engine as _;
use kiln_core::net::quote;
use serde_json::{Value, json};

use crate::client::Hub;
use crate::content::{Prepared, Upload, prepare, read_range};
use crate::error::HubError;
use crate::http::{LFS_JSON, origin, same_origin};
use crate::names::{encode_revision, split_repo, valid_path};

/// Files per preupload and LFS batch request (the Hub's limit).
const BATCH: usize = 256;

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

impl Hub {
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
