//! The write side of the fake Hub's API: repository creation, the card check, preupload and
//! the NDJSON commit.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::model::{Commit, Repo, State, Stored};
use super::wire::{base64_decode, error, git_blob, repo_not_found, sha1};
use crate::http::{Reply, Request};

/// The `.gitattributes` the Hub writes into a new dataset repository (abridged).
const GITATTRIBUTES: &str = "*.parquet filter=lfs diff=lfs merge=lfs -text\n*.arrow filter=lfs diff=lfs merge=lfs -text\n*.bin filter=lfs diff=lfs merge=lfs -text\n*.zip filter=lfs diff=lfs merge=lfs -text\n";

/// `POST /api/repos/create`: a dataset repository with the Hub's initial commit.
pub(super) fn create(state: &mut State, request: &Request, base: &str) -> Reply {
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
pub(super) fn validate_yaml(request: &Request) -> Reply {
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

/// `POST /api/datasets/{repo}/preupload/{rev}`: for each file, whether it goes through LFS
/// and the id of the file the head holds at its path.
pub(super) fn preupload(state: &mut State, request: &Request, repo: &str) -> Reply {
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

/// `POST /api/datasets/{repo}/commit/{rev}`: one NDJSON commit whose LFS lines must name
/// objects the repository holds.
pub(super) fn commit(
    state: &mut State,
    request: &Request,
    repo: &str,
    revision: &str,
    base: &str,
) -> Reply {
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
