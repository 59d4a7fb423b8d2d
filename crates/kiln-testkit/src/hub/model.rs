//! What the fake Hub holds: repositories with their commits and LFS objects, the request log,
//! and the faults and hostile modes tests set.

use std::collections::BTreeMap;

use super::hostile::Hostile;

/// One stored file of a commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Stored {
    /// In git.
    Regular(Vec<u8>),
    /// An LFS pointer to an object of the repository.
    Lfs {
        /// The object's SHA-256.
        oid: String,
        /// Its size in bytes.
        size: u64,
    },
}

/// One commit.
#[derive(Debug, Clone)]
pub(super) struct Commit {
    /// Commit id.
    pub(super) oid: String,
    /// Its summary line.
    pub(super) summary: String,
    /// Its description.
    pub(super) description: String,
    /// Every file of the repository after it.
    pub(super) files: BTreeMap<String, Stored>,
}

/// A dataset repository: its commits, oldest first, and its LFS objects.
#[derive(Debug, Default)]
pub(super) struct Repo {
    /// Visible only with a token.
    pub(super) private: bool,
    /// Commits, oldest first (the initial commit included).
    pub(super) commits: Vec<Commit>,
    /// LFS objects by SHA-256.
    pub(super) objects: BTreeMap<String, Vec<u8>>,
    /// Parts of multipart uploads in progress: oid -> part number -> (etag, bytes).
    pub(super) parts: BTreeMap<String, BTreeMap<u64, (String, Vec<u8>)>>,
}

impl Repo {
    /// The latest commit.
    pub(super) fn head(&self) -> Option<&Commit> {
        self.commits.last()
    }

    /// The commit `revision` names: `main` or a commit id.
    pub(super) fn at(&self, revision: &str) -> Option<&Commit> {
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

/// Everything behind the fake's lock.
#[derive(Debug, Default)]
pub(super) struct State {
    /// Tokens accepted for writes.
    pub(super) tokens: Vec<String>,
    /// Repositories by `namespace/name`.
    pub(super) repos: BTreeMap<String, Repo>,
    /// Every request, in order.
    pub(super) log: Vec<HubRequest>,
    /// What clients did that the Hub would refuse.
    pub(super) problems: Vec<String>,
    /// LFS objects larger than this are uploaded in parts of this size.
    pub(super) part_size: Option<u64>,
    /// Entries per page of a tree listing (the Hub's is 1,000 without `expand`).
    pub(super) page_size: Option<usize>,
    /// Requests whose path contains the key are answered with the status, that many times.
    pub(super) faults: Vec<(String, u16, usize)>,
    /// How a hostile or broken Hub answers every request, when set.
    pub(super) hostile: Option<Hostile>,
}
