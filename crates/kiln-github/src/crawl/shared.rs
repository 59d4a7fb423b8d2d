//! What the crawl and its per-repository tasks share: the request, the progress and output
//! types, and the state of one crawl.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use chrono::{DateTime, Utc};
use kiln_core::config::CrawlSettings;
use kiln_git::MirrorCache;
use kiln_schema::Candidate;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use super::client::GitHub;

/// Where the crawl of one repository stands; stored with the rows it belongs to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepoProgress {
    /// `owner/name` as configured (or discovered).
    pub repo: String,
    /// The repository's name on GitHub now, when it differs (a rename).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canonical: Option<String>,
    /// Every pull request merged before this time (within the window) is done.
    pub watermark: String,
    /// End of the segment being paged, when one is under way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment_end: Option<String>,
    /// Cursor of the next page of that segment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// The whole window is done.
    pub done: bool,
    /// When the window was finished (the crawl's own clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// Why the repository could not be crawled, when it could not: retried by the next start,
    /// unless the repository does not exist (then `done` is set too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A merge window: its start (inclusive) and end (exclusive).
pub type Window = (DateTime<Utc>, DateTime<Utc>);

/// What earlier crawls of the dataset did.
#[derive(Debug, Clone, Default)]
pub struct Prior {
    /// Instance ids that already have a row (this run, earlier runs): skipped, no new row.
    pub seen: BTreeSet<String>,
    /// Per repository (lowercase `owner/name`), merge windows an earlier run finished whose
    /// results were final when it finished them: not searched again.
    pub covered: BTreeMap<String, Vec<Window>>,
}

/// What the crawl sends its caller, in order.
#[derive(Debug, Clone)]
pub enum Output {
    /// The repositories the crawl covers (once, before any page; discovery's result).
    Repositories(Vec<String>),
    /// Rows of one page of one repository, and the progress they complete.
    Page {
        /// The repository.
        repo: String,
        /// Rows (candidates and dropped pull requests).
        rows: Vec<Candidate>,
        /// Progress including these rows.
        progress: RepoProgress,
    },
    /// Something the user should see.
    Note(String),
}

/// One crawl: settings resolved to a window, the mirror cache, what earlier crawls did and where
/// this one stands.
#[derive(Debug, Clone)]
pub struct CrawlRequest {
    /// The source's settings.
    pub settings: CrawlSettings,
    /// Window start.
    pub since: DateTime<Utc>,
    /// Window end (exclusive), fixed when the crawl first started.
    pub until: DateTime<Utc>,
    /// Mirrors, shared with launch.
    pub mirrors: MirrorCache,
    /// Earlier work.
    pub prior: Prior,
    /// Repositories from an earlier start of this crawl (discovery is not repeated).
    pub repositories: Option<Vec<String>>,
    /// Progress per repository from an earlier start.
    pub progress: BTreeMap<String, RepoProgress>,
    /// Kept candidates this run already has (counted against `max_candidates`).
    pub kept_so_far: i64,
    /// The shard of a split run: only the repositories whose name hashes to it are crawled
    /// ([`kiln_core::config::repository_shard`]).
    pub shard: Option<kiln_core::config::ShardId>,
}

/// Largest search result set GitHub pages through.
pub(crate) const SEARCH_CAP: u64 = 1000;

/// Shared by the tasks of one crawl.
pub(crate) struct Shared {
    pub(crate) request: CrawlRequest,
    pub(crate) client: Arc<GitHub>,
    pub(crate) out: mpsc::Sender<Output>,
    /// Kept candidates still allowed (`i64::MAX` without a limit).
    pub(crate) budget: AtomicI64,
}

impl Shared {
    pub(crate) async fn send(&self, output: Output) {
        // A caller that stopped listening is shutting down; there is nothing left to tell.
        let _ = self.out.send(output).await;
    }

    pub(crate) fn budget_left(&self) -> bool {
        self.budget.load(Ordering::SeqCst) > 0
    }
}

/// An RFC 3339 time, in UTC.
pub(crate) fn parse_time(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}
