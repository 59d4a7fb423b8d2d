//! What the Hub accepts as names: repository ids, revisions in a URL, paths in a repository.

use std::path::Path;

use crate::error::HubError;

/// `(namespace, name)` of `namespace/name`.
pub(crate) fn split_repo(repo_id: &str) -> Result<(&str, &str), HubError> {
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
pub(crate) fn encode_revision(revision: &str) -> String {
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
    fn repository_ids_and_revisions() {
        assert!(split_repo("ns/name.v2").is_ok());
        assert!(split_repo("name").is_err());
        assert!(split_repo("ns/../x").is_err());
        assert!(split_repo("ns/a b").is_err());
        assert_eq!(encode_revision("refs/pr/1"), "refs%2Fpr%2F1");
        assert_eq!(encode_revision("main"), "main");
    }
}
