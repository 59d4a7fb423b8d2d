//! The GitHub crawl: merged pull requests that resolve an issue of their repository, turned
//! into candidate rows, at a fraction of an API call per candidate.
//!
//! For each repository (listed, or found by [`discover`]), the merge window is searched with one
//! GraphQL query per 100 pull requests ([`query::pull_requests`]), in chronological segments
//! small enough for GitHub's 1,000-result search cap. The answer carries each pull request's
//! base and head commits, changed paths and closing issues with their comments, so pull
//! requests that fail the file rules are dropped before anything else is fetched, and the diff
//! comes from the repository mirror (git, not the API). Every pull request seen becomes a row:
//! a candidate, or a `dropped` row with its reason.
//!
//! Progress is a [`RepoProgress`] per repository (a watermark: everything merged before it is
//! done; the current segment and its cursor), sent with the rows of each page so the caller
//! commits both at once; a crawl resumed from it does not repeat finished work, and pull requests
//! in [`Prior::seen`] (this run's rows, earlier runs') are skipped without a row.

mod candidate;
pub mod client;
pub mod diff;
mod discover;
mod error;
pub mod links;
pub mod listing;
pub mod query;
mod shared;

use std::sync::Arc;
use std::sync::atomic::AtomicI64;

use chrono::{DateTime, Duration as TimeDelta, Utc};
use kiln_core::net::quote;
use tokio::sync::mpsc;

pub use client::{ClientOptions, GitHub, RateLimitHeaders, Token};
pub use discover::discover;
pub use error::CrawlError;
pub use listing::{Listing, ListingBudget};
pub use shared::{CrawlRequest, Output, Prior, RepoProgress, Window};

use shared::{SEARCH_CAP, Shared, parse_time};

/// How long after a window's end its search results count as final (GitHub's search index
/// trails merges by minutes).
pub const SETTLE: TimeDelta = TimeDelta::hours(1);

/// What the crawl did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CrawlSummary {
    /// Repositories whose window is done.
    pub repositories_done: usize,
    /// Repositories that failed (their progress says why).
    pub repositories_failed: usize,
    /// Whether `max_candidates` stopped the crawl.
    pub limit_reached: bool,
}

/// Runs the crawl, sending rows and progress to `out` as pages finish.
///
/// # Errors
/// Only what stops every repository (no token works); a repository that fails is reported
/// in its progress and the others go on.
pub async fn crawl(
    request: CrawlRequest,
    client: Arc<GitHub>,
    out: mpsc::Sender<Output>,
) -> Result<CrawlSummary, CrawlError> {
    let budget = request
        .settings
        .max_candidates
        .map_or(i64::MAX, |max| max - request.kept_so_far);
    let concurrency = usize::try_from(request.settings.concurrency)
        .unwrap_or(1)
        .max(1);
    let shared = Arc::new(Shared {
        request,
        client,
        out,
        budget: AtomicI64::new(budget),
    });
    let repositories = match &shared.request.repositories {
        Some(repos) => repos.clone(),
        None => {
            let mut repos = shared.request.settings.repos.clone();
            if let Some(settings) = &shared.request.settings.discover {
                for found in discover(&shared.client, settings).await? {
                    if !repos.iter().any(|r| r.eq_ignore_ascii_case(&found)) {
                        repos.push(found);
                    }
                }
            }
            if let Some(shard) = shared.request.shard {
                repos
                    .retain(|r| kiln_core::config::repository_shard(r, shard.count) == shard.index);
            }
            shared.send(Output::Repositories(repos.clone())).await;
            repos
        }
    };
    let mut summary = CrawlSummary::default();
    let mut pending = repositories.into_iter();
    let mut running = tokio::task::JoinSet::new();
    let start = |running: &mut tokio::task::JoinSet<_>, repo: String| {
        let shared = Arc::clone(&shared);
        running.spawn(async move {
            let result = crawl_repository(&shared, &repo).await;
            (repo, result)
        });
    };
    for repo in pending.by_ref().take(concurrency) {
        start(&mut running, repo);
    }
    let mut fatal = None;
    while let Some(joined) = running.join_next().await {
        let (repo, result) = match joined {
            Ok(done) => done,
            Err(e) => return Err(CrawlError::Config(format!("a crawl task failed: {e}"))),
        };
        match result {
            Ok(true) => summary.repositories_done += 1,
            Ok(false) => {}
            Err(e) if e.is_fatal() => {
                fatal = Some(e);
                running.abort_all();
                break;
            }
            Err(e) => {
                summary.repositories_failed += 1;
                let mut progress = shared
                    .request
                    .progress
                    .get(&repo)
                    .cloned()
                    .unwrap_or_else(|| fresh_progress(&shared.request, &repo));
                progress.error = Some(e.to_string());
                shared
                    .send(Output::Note(format!(
                        "crawl of {repo} stopped: failed to {e}"
                    )))
                    .await;
                shared
                    .send(Output::Page {
                        repo: repo.clone(),
                        rows: Vec::new(),
                        progress,
                    })
                    .await;
            }
        }
        if shared.budget_left()
            && let Some(next) = pending.next()
        {
            start(&mut running, next);
        }
    }
    if let Some(e) = fatal {
        return Err(e);
    }
    summary.limit_reached = !shared.budget_left();
    Ok(summary)
}

fn fresh_progress(request: &CrawlRequest, repo: &str) -> RepoProgress {
    RepoProgress {
        repo: repo.to_string(),
        watermark: kiln_core::config::format_time(&request.since),
        ..RepoProgress::default()
    }
}

/// The parts of `[since, until)` that `covered` does not cover, in order.
fn gaps(since: DateTime<Utc>, until: DateTime<Utc>, covered: &[Window]) -> Vec<Window> {
    let mut covered: Vec<_> = covered.iter().filter(|(a, b)| a < b).copied().collect();
    covered.sort();
    let mut out = Vec::new();
    let mut at = since;
    for (start, end) in covered {
        if end <= at {
            continue;
        }
        if start >= until {
            break;
        }
        if start > at {
            out.push((at, start.min(until)));
        }
        at = at.max(end);
        if at >= until {
            break;
        }
    }
    if at < until {
        out.push((at, until));
    }
    out
}

/// Crawls one repository's window; `Ok(true)` when the window is done, `Ok(false)` when the
/// candidate limit stopped it.
async fn crawl_repository(shared: &Shared, repo: &str) -> Result<bool, CrawlError> {
    let request = &shared.request;
    let mut progress = request
        .progress
        .get(repo)
        .cloned()
        .unwrap_or_else(|| fresh_progress(request, repo));
    progress.error = None;
    if progress.done {
        return Ok(true);
    }
    let watermark = parse_time(&progress.watermark).unwrap_or(request.since);
    let covered = request
        .prior
        .covered
        .get(&repo.to_ascii_lowercase())
        .cloned()
        .unwrap_or_default();
    let todo: Vec<_> = gaps(request.since, request.until, &covered)
        .into_iter()
        .filter(|(_, end)| *end > watermark)
        .map(|(start, end)| (start.max(watermark), end))
        .collect();
    if !todo.is_empty() {
        let (name, language) = resolve_repository(shared, repo, &mut progress).await?;
        for (start, end) in todo {
            if !crawl_gap(shared, repo, &name, &language, &mut progress, start, end).await? {
                return Ok(false);
            }
        }
    }
    progress.done = true;
    progress.segment_end = None;
    progress.cursor = None;
    progress.watermark = kiln_core::config::format_time(&request.until);
    progress.finished_at = Some(kiln_core::config::format_time(&Utc::now()));
    shared
        .send(Output::Page {
            repo: repo.to_string(),
            rows: Vec::new(),
            progress,
        })
        .await;
    Ok(true)
}

/// The repository's current name (GitHub follows renames) and main language, from a
/// conditional REST GET (a 304 when nothing changed since the last crawl).
async fn resolve_repository(
    shared: &Shared,
    repo: &str,
    progress: &mut RepoProgress,
) -> Result<(String, String), CrawlError> {
    let answer = shared
        .client
        .rest_get("repository", &format!("/repos/{repo}"))
        .await?;
    if answer.status == 404 {
        return Err(CrawlError::NotFound(format!("repository {repo} on GitHub")));
    }
    let full_name = answer
        .body
        .get("full_name")
        .and_then(serde_json::Value::as_str)
        .unwrap_or(repo)
        .to_string();
    if !full_name.eq_ignore_ascii_case(repo) {
        shared
            .send(Output::Note(format!(
                "{repo} is now {} on GitHub; crawling it under that name",
                quote(&full_name)
            )))
            .await;
    }
    progress.canonical = (full_name != repo).then(|| full_name.clone());
    let language = answer
        .body
        .get("language")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default()
        .to_string();
    Ok((full_name, language))
}

/// Crawls `[start, end)` of one repository in segments under the search cap; `Ok(false)` when
/// the candidate limit stopped it.
async fn crawl_gap(
    shared: &Shared,
    repo: &str,
    name: &str,
    language: &str,
    progress: &mut RepoProgress,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
) -> Result<bool, CrawlError> {
    let now = Utc::now();
    let mut segment_start = start;
    // A segment under way when an earlier start stopped: its cursor is good only if its
    // results can no longer change (the segment ended long enough ago); otherwise the segment
    // is paged again from its start and the rows already written are skipped as seen.
    let mut resumed = progress
        .segment_end
        .as_deref()
        .and_then(parse_time)
        .filter(|e| *e > start && *e <= end)
        .map(|e| {
            let cursor = progress.cursor.clone().filter(|_| e + SETTLE <= now);
            (e, cursor)
        });
    while segment_start < end {
        let (mut segment_end, mut cursor) = resumed.take().unwrap_or((end, None));
        // The pages of one search; a shortened segment is another search, with a budget of its
        // own.
        let mut listing = search_listing(name, segment_start, segment_end);
        loop {
            if !shared.budget_left() {
                return Ok(false);
            }
            let search = format!(
                "repo:{name} is:pr is:merged merged:{}..{} sort:created-asc",
                kiln_core::config::format_time(&segment_start),
                kiln_core::config::format_time(&(segment_end - TimeDelta::seconds(1)))
            );
            let data = shared
                .client
                .graphql_page(
                    &mut [&mut listing],
                    "search_prs",
                    &query::pull_requests(),
                    serde_json::json!({"query": search, "after": cursor}),
                )
                .await?;
            let page: query::PullRequestSearch =
                query::parse(data).map_err(|e| CrawlError::Answer {
                    what: format!("the pull request search of {name}"),
                    message: quote(&e),
                })?;
            listing.add_entries(page.search.nodes.len())?;
            let count = page.search.issue_count;
            if cursor.is_none()
                && count > SEARCH_CAP
                && segment_end - segment_start > TimeDelta::seconds(2)
            {
                // Too many results for one search: shorten the segment in proportion, aiming
                // at 90 % of the cap (merges are not spread evenly; a second shortening
                // follows when needed).
                let span = (segment_end - segment_start).num_seconds();
                let keep = span * 900 / i64::try_from(count).unwrap_or(i64::MAX).max(1);
                segment_end = segment_start + TimeDelta::seconds(keep.max(1));
                listing = search_listing(name, segment_start, segment_end);
                continue;
            }
            let rows = candidate::page_rows(shared, name, language, page.search.nodes).await?;
            let next = page
                .search
                .page_info
                .end_cursor
                .clone()
                .filter(|_| page.search.page_info.has_next_page);
            match &next {
                Some(c) => {
                    progress.segment_end = Some(kiln_core::config::format_time(&segment_end));
                    progress.cursor = Some(c.clone());
                }
                None => {
                    progress.segment_end = None;
                    progress.cursor = None;
                    progress.watermark = kiln_core::config::format_time(&segment_end);
                }
            }
            shared
                .send(Output::Page {
                    repo: repo.to_string(),
                    rows,
                    progress: progress.clone(),
                })
                .await;
            match next {
                Some(c) => cursor = Some(c),
                None => break,
            }
        }
        segment_start = segment_end;
    }
    Ok(true)
}

/// The listing of one search of `name`'s pull requests merged in `[start, end)`.
fn search_listing(name: &str, start: DateTime<Utc>, end: DateTime<Utc>) -> Listing {
    Listing::new(
        format!(
            "the pull request search of {name} merged {}..{}",
            kiln_core::config::format_time(&start),
            kiln_core::config::format_time(&end)
        ),
        ListingBudget::PULL_REQUEST_SEARCH,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(day: u32) -> DateTime<Utc> {
        parse_time(&format!("2024-09-{day:02}T00:00:00Z")).unwrap_or_default()
    }

    #[test]
    fn gaps_are_what_earlier_crawls_left() {
        assert_eq!(gaps(t(1), t(30), &[]), vec![(t(1), t(30))]);
        assert_eq!(
            gaps(t(1), t(30), &[(t(5), t(10)), (t(8), t(12)), (t(20), t(30))]),
            vec![(t(1), t(5)), (t(12), t(20))]
        );
        assert!(gaps(t(2), t(9), &[(t(1), t(10))]).is_empty());
        assert_eq!(gaps(t(2), t(9), &[(t(9), t(10))]), vec![(t(2), t(9))]);
    }
}
