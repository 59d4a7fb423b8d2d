//! The read side of the fake Hub that `huggingface_hub` and `datasets` use to load a
//! repository back: repository information, tree listings, paths info and `resolve`.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::model::{State, Stored};
use super::wire::{error, git_blob, parse_range, percent_decode, pointer, repo_not_found, sha1};
use crate::http::{Reply, Request};

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

/// The tree entry of a directory.
fn directory_entry(path: &str) -> Value {
    json!({"type": "directory", "oid": sha1(path.as_bytes()), "size": 0, "path": path})
}

/// `<revision>/<path>` split at the first slash.
fn revision_path(rest: &str) -> (&str, &str) {
    let (revision, path) = rest.split_once('/').unwrap_or((rest, ""));
    (revision, path.trim_matches('/'))
}

/// `GET /api/datasets/{repo}/tree/{rev}/{path}`: the entries under a path (all of them with
/// `recursive`), in pages linked by `Link` headers.
pub(super) fn tree(state: &State, request: &Request, repo: &str, rest: &str, base: &str) -> Reply {
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

/// `POST /api/datasets/{repo}/paths-info/{rev}`: the entries of the paths asked for.
pub(super) fn paths_info(state: &State, request: &Request, repo: &str, revision: &str) -> Reply {
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

/// `GET /api/datasets/{repo}` and `.../revision/{rev}`: the repository's information.
pub(super) fn info(state: &State, repo: &str, rest: &str) -> Reply {
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

/// `GET /datasets/{repo}/resolve/{rev}/{path}`: a file's bytes (LFS objects resolved), with
/// ranges.
pub(super) fn resolve(
    state: &State,
    request: &Request,
    repo: &str,
    rest: &str,
    token_ok: bool,
) -> Reply {
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
