//! One page of a repository's merged pull requests becomes rows: candidates, and dropped pull
//! requests with their reason.
//!
//! The checks run cheapest first: what the search answer alone decides (merged, a linked issue,
//! the file rules), then the few follow-up queries (issues linked only by a keyword, comments
//! past the first hundred), then the git work on the mirror (the diff, and whether it applies
//! to the base commit).

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use kiln_schema::{Candidate, CandidateStatus, DropReason, InstanceId};

use super::error::CrawlError;
use super::listing::{Listing, ListingBudget};
use super::query::{self, Issue, PullRequest};
use super::shared::{Shared, parse_time};
use super::{diff, links};
use kiln_core::net::quote;
use kiln_core::paths;

/// How an issue was linked, as recorded in `issue_links`.
const CLOSING_REFERENCE: &str = "closing-reference";
const KEYWORD: &str = "keyword";

/// A pull request that passed the checks the search answer allows, waiting for the rest.
struct Pending {
    row: Candidate,
    pr: PullRequest,
    closing: Vec<Issue>,
    keyword: Vec<u64>,
}

/// A pull request whose issues are known, waiting for its diff.
struct Ready {
    row: Candidate,
    base: String,
    head: String,
}

/// Rows of one page of `repo`'s search results, in result order: the checks the search answer
/// allows, then the linked issues, then the git work, the cheapest first so that most pull
/// requests cost no further request.
pub(super) async fn page_rows(
    shared: &Shared,
    repo: &str,
    language: &str,
    nodes: Vec<PullRequest>,
) -> Result<Vec<Candidate>, CrawlError> {
    let (mut rows, pending) = screen(shared, repo, language, nodes);
    let ready = link_issues(shared, repo, pending, &mut rows).await?;
    if !ready.is_empty() {
        rows.extend(diff_all(shared, repo, language, ready).await?);
    }
    Ok(within_budget(shared, rows))
}

/// What the search answer alone decides: the rows of the pull requests it drops (not merged,
/// no linked issue, too large, no test change, only tests), and those that pass, waiting for
/// their issues. Answers that are not pull requests, have no usable id or were crawled before
/// give nothing.
fn screen(
    shared: &Shared,
    repo: &str,
    language: &str,
    nodes: Vec<PullRequest>,
) -> (Vec<Candidate>, Vec<Pending>) {
    let settings = &shared.request.settings;
    let mut rows: Vec<Candidate> = Vec::new();
    let mut pending = Vec::new();
    for pr in nodes {
        if !(pr.typename.is_empty() || pr.typename == "PullRequest") {
            continue;
        }
        // A name GitHub answered with becomes file names and image tags later; one that is no
        // usable id (only a misbehaving server sends such names) is left out, not stored.
        let id = match InstanceId::new(&instance_id(repo, pr.number)) {
            Ok(id) => id,
            Err(e) => {
                tracing::warn!(
                    repo,
                    number = pr.number,
                    "pull request skipped: failed to {e}"
                );
                continue;
            }
        };
        if shared.request.prior.seen.contains(id.as_str()) {
            continue;
        }
        let language = pr
            .repository
            .primary_language
            .as_ref()
            .map(|l| l.name.clone())
            .filter(|l| !l.is_empty())
            .unwrap_or_else(|| language.to_string());
        let row = base_row(&id, repo, &pr, &language);
        if !pr.merged || pr.merged_at.is_none() {
            rows.push(dropped(row, DropReason::NotMerged));
            continue;
        }
        let closing: Vec<Issue> = pr
            .closing_issues_references
            .nodes
            .iter()
            .filter(|i| i.repository.name_with_owner.eq_ignore_ascii_case(repo))
            .cloned()
            .collect();
        let keyword: Vec<u64> = links::closing_keyword_issues(&pr.body, repo)
            .into_iter()
            .filter(|n| !closing.iter().any(|i| i.number == *n) && *n != pr.number)
            .collect();
        if closing.is_empty() && keyword.is_empty() {
            rows.push(dropped(row, DropReason::NoLinkedIssue));
            continue;
        }
        let files = pr.files.total_count.unwrap_or(pr.changed_files);
        let lines = pr.additions + pr.deletions;
        if files > u64::try_from(settings.max_files).unwrap_or(u64::MAX)
            || lines > u64::try_from(settings.max_changed_lines).unwrap_or(u64::MAX)
            || pr.files.page_info.has_next_page
        {
            rows.push(dropped(row, DropReason::TooLarge));
            continue;
        }
        let tests = pr
            .files
            .nodes
            .iter()
            .filter(|f| paths::is_test_path(&f.path, &language))
            .count();
        if tests == 0 {
            rows.push(dropped(row, DropReason::NoTestChange));
            continue;
        }
        if tests == pr.files.nodes.len() {
            rows.push(dropped(row, DropReason::OnlyTests));
            continue;
        }
        pending.push(Pending {
            row,
            pr,
            closing,
            keyword,
        });
    }

    (rows, pending)
}

/// Links each waiting pull request to its issues (those its closing references name, and
/// those a keyword names, fetched in one query), and writes the problem statement and the
/// hints (comments from before the fix began); a pull request whose keyword issues all turn
/// out missing gets a dropped row in `rows`.
async fn link_issues(
    shared: &Shared,
    repo: &str,
    pending: Vec<Pending>,
    rows: &mut Vec<Candidate>,
) -> Result<Vec<Ready>, CrawlError> {
    let wanted: BTreeSet<u64> = pending.iter().flat_map(|p| p.keyword.clone()).collect();
    let fetched = if wanted.is_empty() {
        BTreeMap::new()
    } else {
        issues_by_number(shared, repo, &wanted).await?
    };

    let mut ready = Vec::new();
    for item in pending {
        let Pending {
            mut row,
            pr,
            closing,
            keyword,
        } = item;
        let mut issues: Vec<(Issue, &str)> = closing
            .into_iter()
            .map(|i| (i, CLOSING_REFERENCE))
            .collect();
        let body_links = links::closing_keyword_issues(&pr.body, repo);
        for number in keyword {
            if let Some(issue) = fetched.get(&number) {
                issues.push((issue.clone(), KEYWORD));
            }
        }
        if issues.is_empty() {
            rows.push(dropped(row, DropReason::NoLinkedIssue));
            continue;
        }
        issues.sort_by_key(|(i, _)| i.number);
        // Hints are what was said before work on the fix began: comments older than the pull
        // request's first commit (its author date), or than the pull request when that is
        // unknown.
        let cutoff = pr
            .commits
            .nodes
            .first()
            .and_then(|c| parse_time(&c.commit.authored_date))
            .or_else(|| parse_time(&pr.created_at));
        let mut problem = String::new();
        let mut hints: Vec<String> = Vec::new();
        for (issue, how) in &issues {
            let number = issue.number.to_string();
            let kind = if *how == CLOSING_REFERENCE && body_links.contains(&issue.number) {
                format!("{CLOSING_REFERENCE}+{KEYWORD}")
            } else {
                (*how).to_string()
            };
            row.issue_links.insert(number.clone(), kind);
            row.issue_numbers.push(number);
            problem.push_str(&format!("{}\n{}\n", issue.title, issue.body));
            for comment in comments_before(shared, issue, cutoff).await? {
                hints.push(comment);
            }
        }
        row.problem_statement = problem;
        row.hints_text = hints.join("\n");
        ready.push(Ready {
            row,
            base: pr.base_ref_oid.clone(),
            head: pr.head_ref_oid.clone(),
        });
    }

    Ok(ready)
}

/// The diffs of the ready pull requests, computed and checked on the mirror in a blocking task
/// (git work must not hold an async worker).
async fn diff_all(
    shared: &Shared,
    repo: &str,
    language: &str,
    ready: Vec<Ready>,
) -> Result<Vec<Candidate>, CrawlError> {
    let mirrors = shared.request.mirrors.clone();
    let url = crate::clone_url(&shared.request.settings.clone_url, repo);
    let repo_name = repo.to_string();
    let language = language.to_string();
    tokio::task::spawn_blocking(move || with_diffs(&mirrors, &repo_name, &url, &language, ready))
        .await
        .map_err(|e| CrawlError::Config(format!("the diff task failed: {e}")))?
}

/// `rows` in result order, up to the crawl's candidate limit: once the limit is reached
/// nothing more goes out.
fn within_budget(shared: &Shared, mut rows: Vec<Candidate>) -> Vec<Candidate> {
    rows.sort_by_key(|r| r.pull_number);
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        if row.status == CandidateStatus::Ok {
            if shared
                .budget
                .fetch_sub(1, std::sync::atomic::Ordering::SeqCst)
                <= 0
            {
                break;
            }
        } else if !shared.budget_left() {
            break;
        }
        out.push(row);
    }
    out
}

/// `owner__name-N`.
fn instance_id(repo: &str, number: u64) -> String {
    let (owner, name) = repo.split_once('/').unwrap_or(("", repo));
    format!("{owner}__{name}-{number}")
}

/// The row of a pull request before its checks: what every row says, candidate or dropped.
fn base_row(id: &InstanceId, repo: &str, pr: &PullRequest, language: &str) -> Candidate {
    Candidate {
        repo: repo.to_string(),
        pull_number: i64::try_from(pr.number).ok(),
        base_commit: pr.base_ref_oid.clone(),
        created_at: pr.created_at.clone(),
        language: (!language.is_empty()).then(|| language.to_string()),
        head_commit: (!pr.head_ref_oid.is_empty()).then(|| pr.head_ref_oid.clone()),
        merge_commit: pr.merge_commit.as_ref().map(|c| c.oid.clone()),
        merged_at: pr.merged_at.clone(),
        origin: if pr.url.is_empty() {
            format!("github:{repo}#{}", pr.number)
        } else {
            pr.url.clone()
        },
        ..Candidate::new(id.clone())
    }
}

fn dropped(mut row: Candidate, reason: DropReason) -> Candidate {
    row.status = CandidateStatus::Dropped;
    row.drop_reason = Some(reason);
    row.patch.clear();
    row.test_patch.clear();
    row
}

/// Issues of `repo` by number (pull requests and missing numbers are left out), in one query.
async fn issues_by_number(
    shared: &Shared,
    repo: &str,
    numbers: &BTreeSet<u64>,
) -> Result<BTreeMap<u64, Issue>, CrawlError> {
    let (owner, name) = repo.split_once('/').unwrap_or(("", repo));
    let numbers: Vec<u64> = numbers.iter().copied().collect();
    let mut found = BTreeMap::new();
    // One query holds at most 50 aliases, keeping its node count far below GitHub's limit.
    for chunk in numbers.chunks(50) {
        let answer = shared
            .client
            .graphql(
                "issues",
                &query::issues_by_number(chunk),
                serde_json::json!({"owner": owner, "name": name}),
            )
            .await;
        let data = match answer {
            Ok(data) => data,
            // A number that is neither issue nor pull request is a NOT_FOUND error for its
            // alias; the others still answer in `data`, which GitHub sends beside the error.
            Err(CrawlError::NotFound(_)) => continue,
            Err(e) => return Err(e),
        };
        for number in chunk {
            let Some(value) = data.pointer(&format!("/repository/i{number}")) else {
                continue;
            };
            let issue: Issue = query::parse(value.clone()).map_err(|e| CrawlError::Answer {
                what: format!("issue #{number} of {repo}"),
                message: quote(&e),
            })?;
            if issue.typename.as_deref() == Some("Issue") {
                found.insert(*number, issue);
            }
        }
    }
    Ok(found)
}

/// Bodies of the comments on `issue` written before `cutoff`, fetching pages past the first
/// hundred only while they can still be that old.
async fn comments_before(
    shared: &Shared,
    issue: &Issue,
    cutoff: Option<DateTime<Utc>>,
) -> Result<Vec<String>, CrawlError> {
    let before = |created: &str| match (cutoff, parse_time(created)) {
        (Some(cutoff), Some(at)) => at < cutoff,
        // Without dates nothing can be shown to predate the fix.
        _ => false,
    };
    let mut out: Vec<String> = Vec::new();
    let mut page = issue.comments.clone();
    // The first page came with the issue; the listing counts its comments and the pages after.
    let mut listing = Listing::new(
        format!("the comments of issue #{}", issue.number),
        ListingBudget::ISSUE_COMMENTS,
    );
    loop {
        listing.add_entries(page.nodes.len())?;
        let mut all_before = true;
        for comment in &page.nodes {
            if before(&comment.created_at) {
                out.push(comment.body.clone());
            } else {
                all_before = false;
            }
        }
        let next = page.page_info.end_cursor.clone();
        if !(page.page_info.has_next_page && all_before && !issue.id.is_empty() && next.is_some()) {
            break;
        }
        let data = shared
            .client
            .graphql_page(
                &mut [&mut listing],
                "issue_comments",
                query::issue_comments(),
                serde_json::json!({"id": issue.id, "after": next}),
            )
            .await?;
        let answer: query::IssueCommentsAnswer =
            query::parse(data).map_err(|e| CrawlError::Answer {
                what: format!("the comments of issue #{}", issue.number),
                message: quote(&e),
            })?;
        match answer.node {
            Some(node) => page = node.comments,
            None => break,
        }
    }
    Ok(out)
}

/// The git part, off the async workers: makes the mirror hold every base and head commit, then
/// computes and checks each diff.
fn with_diffs(
    mirrors: &kiln_git::MirrorCache,
    repo: &str,
    url: &str,
    language: &str,
    ready: Vec<Ready>,
) -> Result<Vec<Candidate>, CrawlError> {
    let commits: Vec<&str> = ready
        .iter()
        .flat_map(|r| [r.base.as_str(), r.head.as_str()])
        .filter(|c| !c.is_empty())
        .collect();
    let (mirror, missing) = mirrors.update(repo, url, &commits)?;
    let missing: BTreeSet<String> = missing.into_iter().collect();
    let git = git2::Repository::open_bare(&mirror).map_err(|e| {
        CrawlError::Git(kiln_git::GitError {
            command: format!("open {}", mirror.display()),
            message: e.message().to_string(),
        })
    })?;
    let mut rows = Vec::with_capacity(ready.len());
    for item in ready {
        let Ready {
            mut row,
            base,
            head,
        } = item;
        if base.is_empty() || missing.contains(&base) {
            rows.push(dropped(row, DropReason::BaseUnreachable));
            continue;
        }
        if head.is_empty() || missing.contains(&head) {
            rows.push(dropped(row, DropReason::HeadUnreachable));
            continue;
        }
        let language = row.language.clone().unwrap_or_else(|| language.to_string());
        let split = match diff::pull_request_diff(&git, &base, &head, &language) {
            Ok(split) => split,
            Err(e) => {
                tracing::debug!(instance = %row.instance_id, "diff failed: {}", e.message());
                rows.push(dropped(row, DropReason::DiffFailed));
                continue;
            }
        };
        if split.test_patch.is_empty() {
            rows.push(dropped(row, DropReason::NoTestChange));
            continue;
        }
        if split.patch.is_empty() {
            rows.push(dropped(row, DropReason::OnlyTests));
            continue;
        }
        let whole = format!("{}{}", split.patch, split.test_patch);
        if !diff::applies_at(&git, &mirror, &base, &whole) {
            rows.push(dropped(row, DropReason::PatchDoesNotApply));
            continue;
        }
        row.patch = split.patch;
        row.test_patch = split.test_patch;
        rows.push(row);
    }
    Ok(rows)
}
