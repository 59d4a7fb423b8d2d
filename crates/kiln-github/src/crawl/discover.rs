//! Repository discovery: a repository search by language, stars, forks and recent pushes, with
//! each result's share of code in the main language, one GraphQL query per 100 repositories.
//!
//! GitHub stops a search at 1,000 results, so a star range with more is split in two (by
//! stars) until every part fits, as SWE-bench-Live's crawler does.

use std::collections::VecDeque;

use kiln_core::config::DiscoverSettings;
use kiln_core::net::quote;

use super::client::GitHub;
use super::error::CrawlError;
use super::listing::{Listing, ListingBudget};
use super::query::{self, FoundRepository, RepositorySearch};
use super::shared::SEARCH_CAP;

/// The repositories that match `settings`, most starred first, at most `max_repos`.
///
/// # Errors
/// When a search fails.
pub async fn discover(
    client: &GitHub,
    settings: &DiscoverSettings,
) -> Result<Vec<String>, CrawlError> {
    let mut ranges = VecDeque::from([(settings.min_stars, settings.max_stars)]);
    let mut found: Vec<FoundRepository> = Vec::new();
    let mut discovery = Listing::new(
        format!("the repository search of {}", settings.language),
        ListingBudget::DISCOVERY,
    );
    while let Some((low, high)) = ranges.pop_front() {
        let mut search = format!(
            "language:\"{}\" stars:{low}..{high} forks:>={} archived:false fork:false",
            settings.language, settings.min_forks
        );
        if let Some(pushed) = &settings.pushed_after {
            search.push_str(&format!(" pushed:>={}", &pushed[..10.min(pushed.len())]));
        }
        search.push_str(" sort:stars-desc");
        let mut cursor: Option<String> = None;
        let mut range = Listing::new(
            format!(
                "the repository search of {} with {low}..{high} stars",
                settings.language
            ),
            ListingBudget::REPOSITORY_SEARCH,
        );
        loop {
            let data = client
                .graphql_page(
                    &mut [&mut range, &mut discovery],
                    "search_repositories",
                    query::repositories(),
                    serde_json::json!({"query": search, "after": cursor}),
                )
                .await?;
            let page: RepositorySearch = query::parse(data).map_err(|e| CrawlError::Answer {
                what: "the repository search".into(),
                message: quote(&e),
            })?;
            range.add_entries(page.search.nodes.len())?;
            discovery.add_entries(page.search.nodes.len())?;
            if cursor.is_none() && page.search.repository_count > SEARCH_CAP && high > low {
                let middle = low + (high - low) / 2;
                ranges.push_back((low, middle));
                ranges.push_back((middle + 1, high));
                break;
            }
            found.extend(
                page.search
                    .nodes
                    .into_iter()
                    .filter(|r| r.typename.is_empty() || r.typename == "Repository"),
            );
            match page.search.page_info.end_cursor {
                Some(next) if page.search.page_info.has_next_page => cursor = Some(next),
                _ => break,
            }
        }
    }
    found.retain(|r| {
        !r.is_archived
            && !r.is_fork
            && language_share(r, &settings.language) >= settings.min_language_share
    });
    found.sort_by(|a, b| {
        b.stargazer_count
            .cmp(&a.stargazer_count)
            .then_with(|| a.name_with_owner.cmp(&b.name_with_owner))
    });
    found.dedup_by(|a, b| a.name_with_owner.eq_ignore_ascii_case(&b.name_with_owner));
    found.truncate(usize::try_from(settings.max_repos).unwrap_or(usize::MAX));
    Ok(found.into_iter().map(|r| r.name_with_owner).collect())
}

/// The share (0 to 1) of a repository's code in `language`, from the language sizes.
fn language_share(repo: &FoundRepository, language: &str) -> f64 {
    if repo.languages.total_size == 0 {
        return 0.0;
    }
    let size: u64 = repo
        .languages
        .edges
        .iter()
        .filter(|e| e.node.name.eq_ignore_ascii_case(language))
        .map(|e| e.size)
        .sum();
    // Byte counts are far below 2^52, so the conversions are exact.
    size as f64 / repo.languages.total_size as f64
}
