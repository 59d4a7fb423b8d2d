//! LFS uploads: the batch and verify API on the Hub, and the storage side (S3 on the real Hub)
//! that takes objects whole or in parts at the presigned addresses the batch call hands out.

use bytes::Bytes;
use serde_json::{Value, json};

use super::model::State;
use super::wire::{LFS_JSON, error, repo_not_found, sha256};
use crate::http::{Reply, Request};

/// The LFS API of a repository (`/datasets/{repo}.git/info/lfs/objects/...`): the batch call
/// that hands out upload addresses, and the verify call.
pub(super) fn lfs_api(
    state: &mut State,
    request: &Request,
    repo: &str,
    rest: &str,
    base: &str,
) -> Reply {
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
pub(super) fn storage(state: &mut State, request: &Request, path: &str, base: &str) -> Reply {
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
