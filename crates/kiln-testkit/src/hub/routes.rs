//! Which handler answers a request, by method and path, after the checks every request of
//! the Hub's API goes through.

use super::hostile::hostile_reply;
use super::lfs::{lfs_api, storage};
use super::model::State;
use super::read::{info, paths_info, resolve, tree};
use super::upload::{commit, create, preupload, validate_yaml};
use super::wire::{error, percent_decode, repo_not_found};
use crate::http::{Reply, Request};

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

/// Answers one request: the hostile mode or an injected fault first, then the token check
/// of writes, then the handler its method and path name.
pub(super) fn handle(state: &mut State, request: Request, base: &str) -> Reply {
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
