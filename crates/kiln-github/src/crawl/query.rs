//! The GraphQL documents the crawl sends, and the shapes of their answers.
//!
//! One search per repository and window returns up to 100 merged pull requests with everything
//! a candidate needs except its diff: base and head commits, changed paths, the first commit's
//! date, and the issues GitHub says they close, with the comments that become hints. The other
//! documents fill gaps: issues linked only by a keyword in the body, comments past the first
//! hundred, and repository discovery. Every document is checked against GitHub's published
//! schema in CI (`@octokit/graphql-schema`), through the fake GitHub's record of what it was sent.
//!
//! Answer types are lenient: every field has a default, so a `null` or a missing field (a
//! deleted author, an empty body) never fails a page.

use serde::Deserialize;

/// The selection of an issue: everything a candidate's problem statement and hints need.
const ISSUE_FIELDS: &str = "id number title body createdAt url \
repository { nameWithOwner } \
comments(first: 100) { pageInfo { hasNextPage endCursor } nodes { body createdAt } }";

/// Merged pull requests of one repository and window (`$query` holds the search qualifiers).
#[must_use]
pub fn pull_requests() -> String {
    format!(
        "query KilnPullRequests($query: String!, $after: String) {{ \
rateLimit {{ cost remaining resetAt limit }} \
search(query: $query, type: ISSUE, first: 100, after: $after) {{ \
issueCount pageInfo {{ hasNextPage endCursor }} \
nodes {{ __typename ... on PullRequest {{ \
number title body url createdAt mergedAt merged baseRefName baseRefOid headRefOid \
mergeCommit {{ oid }} additions deletions changedFiles \
repository {{ nameWithOwner primaryLanguage {{ name }} }} \
files(first: 100) {{ totalCount pageInfo {{ hasNextPage }} nodes {{ path additions deletions changeType }} }} \
commits(first: 1) {{ nodes {{ commit {{ oid authoredDate committedDate }} }} }} \
closingIssuesReferences(first: 10) {{ nodes {{ {ISSUE_FIELDS} }} }} \
}} }} }} }}"
    )
}

/// Issues (or pull requests) of one repository by number, one alias per number: the issues a
/// pull request body links by keyword that GitHub's closing references lack.
#[must_use]
pub fn issues_by_number(numbers: &[u64]) -> String {
    let aliases: String = numbers
        .iter()
        .map(|n| {
            format!(
                "i{n}: issueOrPullRequest(number: {n}) {{ __typename ... on Issue {{ {ISSUE_FIELDS} }} }} "
            )
        })
        .collect();
    format!(
        "query KilnIssues($owner: String!, $name: String!) {{ \
rateLimit {{ cost remaining resetAt limit }} \
repository(owner: $owner, name: $name) {{ {aliases}}} }}"
    )
}

/// The next page of an issue's comments.
#[must_use]
pub fn issue_comments() -> &'static str {
    "query KilnIssueComments($id: ID!, $after: String) { \
rateLimit { cost remaining resetAt limit } \
node(id: $id) { __typename ... on Issue { \
comments(first: 100, after: $after) { pageInfo { hasNextPage endCursor } nodes { body createdAt } } \
} } }"
}

/// Repositories by search (discovery), with the sizes of their main languages.
#[must_use]
pub fn repositories() -> &'static str {
    "query KilnRepositories($query: String!, $after: String) { \
rateLimit { cost remaining resetAt limit } \
search(query: $query, type: REPOSITORY, first: 100, after: $after) { \
repositoryCount pageInfo { hasNextPage endCursor } \
nodes { __typename ... on Repository { \
nameWithOwner stargazerCount forkCount isArchived isFork primaryLanguage { name } \
languages(first: 10, orderBy: { field: SIZE, direction: DESC }) { totalSize edges { size node { name } } } \
} } } }"
}

/// Parses an answer into `T`, treating `null` fields as absent (GitHub sends `null` for an
/// empty body, a deleted author, a missing merge commit), so the field's default applies, and
/// leaving `null` list entries out (a deleted object, or a search result of another type).
///
/// # Errors
/// When the answer's shape does not fit `T` at all.
pub fn parse<T: serde::de::DeserializeOwned>(
    mut value: serde_json::Value,
) -> Result<T, serde_json::Error> {
    strip_nulls(&mut value);
    serde_json::from_value(value)
}

fn strip_nulls(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(strip_nulls);
        }
        serde_json::Value::Array(items) => {
            items.retain(|v| !v.is_null());
            items.iter_mut().for_each(strip_nulls);
        }
        _ => {}
    }
}

/// `pageInfo`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PageInfo {
    /// More results follow.
    pub has_next_page: bool,
    /// Cursor of the last result.
    pub end_cursor: Option<String>,
}

/// A connection of nodes (`{ nodes [...] }`), with paging where selected.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Connection<T> {
    /// The nodes (`null` entries, such as deleted objects, are skipped).
    pub nodes: Vec<T>,
    /// Paging.
    pub page_info: PageInfo,
    /// Total count, where selected.
    pub total_count: Option<u64>,
}

impl<T> Default for Connection<T> {
    fn default() -> Self {
        Self {
            nodes: Vec::new(),
            page_info: PageInfo::default(),
            total_count: None,
        }
    }
}

/// The answer of [`pull_requests`].
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PullRequestSearch {
    /// The search.
    pub search: SearchResult<PullRequest>,
}

/// A search connection.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SearchResult<T> {
    /// Matches of an issue search.
    pub issue_count: u64,
    /// Matches of a repository search.
    pub repository_count: u64,
    /// Paging.
    pub page_info: PageInfo,
    /// Results of the selected type (others are `null` after the inline fragment).
    pub nodes: Vec<T>,
}

impl<T> Default for SearchResult<T> {
    fn default() -> Self {
        Self {
            issue_count: 0,
            repository_count: 0,
            page_info: PageInfo::default(),
            nodes: Vec::new(),
        }
    }
}

/// A pull request of the search.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PullRequest {
    /// `PullRequest` (issues matched by the search come back as other types).
    #[serde(rename = "__typename")]
    pub typename: String,
    /// Number.
    pub number: u64,
    /// Title.
    pub title: String,
    /// Body (Markdown).
    pub body: String,
    /// Web URL.
    pub url: String,
    /// Creation time.
    pub created_at: String,
    /// Merge time.
    pub merged_at: Option<String>,
    /// Whether it was merged.
    pub merged: bool,
    /// Branch it was merged into.
    pub base_ref_name: String,
    /// Base commit.
    pub base_ref_oid: String,
    /// Head commit.
    pub head_ref_oid: String,
    /// The merge commit.
    pub merge_commit: Option<Commit>,
    /// Lines added.
    pub additions: u64,
    /// Lines deleted.
    pub deletions: u64,
    /// Files changed.
    pub changed_files: u64,
    /// Its repository.
    pub repository: Repository,
    /// Changed files.
    pub files: Connection<ChangedFile>,
    /// The first commit.
    pub commits: Connection<CommitNode>,
    /// Issues GitHub says it closes.
    pub closing_issues_references: Connection<Issue>,
}

/// `{ oid }`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Commit {
    /// The commit id.
    pub oid: String,
}

/// `{ commit { oid authoredDate committedDate } }`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct CommitNode {
    /// The commit.
    pub commit: CommitDates,
}

/// A commit with its dates.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct CommitDates {
    /// The commit id.
    pub oid: String,
    /// When the change was written.
    pub authored_date: String,
    /// When it was committed.
    pub committed_date: String,
}

/// A repository as a pull request or issue names it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Repository {
    /// `owner/name`.
    pub name_with_owner: String,
    /// Main language.
    pub primary_language: Option<Language>,
}

/// `{ name }` of a language.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Language {
    /// GitHub's language name.
    pub name: String,
}

/// A changed file of a pull request.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ChangedFile {
    /// Path.
    pub path: String,
    /// Lines added.
    pub additions: u64,
    /// Lines deleted.
    pub deletions: u64,
    /// `ADDED`, `MODIFIED`, `DELETED`, `RENAMED`, ...
    pub change_type: String,
}

/// An issue with its first comments.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Issue {
    /// `Issue` or `PullRequest` where the type is asked.
    #[serde(rename = "__typename")]
    pub typename: Option<String>,
    /// Node id (for paging its comments).
    pub id: String,
    /// Number.
    pub number: u64,
    /// Title.
    pub title: String,
    /// Body (Markdown).
    pub body: String,
    /// Creation time.
    pub created_at: String,
    /// Web URL.
    pub url: String,
    /// Its repository.
    pub repository: Repository,
    /// Comments.
    pub comments: Connection<Comment>,
}

/// An issue comment.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Comment {
    /// Text (Markdown).
    pub body: String,
    /// Creation time.
    pub created_at: String,
}

/// The answer of [`issue_comments`].
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct IssueCommentsAnswer {
    /// The issue.
    pub node: Option<Issue>,
}

/// A repository of a discovery search.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct FoundRepository {
    /// `Repository` for repository results.
    #[serde(rename = "__typename")]
    pub typename: String,
    /// `owner/name`.
    pub name_with_owner: String,
    /// Stars.
    pub stargazer_count: u64,
    /// Forks.
    pub fork_count: u64,
    /// Archived.
    pub is_archived: bool,
    /// A fork.
    pub is_fork: bool,
    /// Main language.
    pub primary_language: Option<Language>,
    /// Sizes of its languages.
    pub languages: Languages,
}

/// `languages { totalSize edges { size node { name } } }`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Languages {
    /// Bytes of code in all languages.
    pub total_size: u64,
    /// Per language.
    pub edges: Vec<LanguageEdge>,
}

/// One language's size.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct LanguageEdge {
    /// Bytes.
    pub size: u64,
    /// The language.
    pub node: Language,
}

/// The answer of [`repositories`].
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct RepositorySearch {
    /// The search.
    pub search: SearchResult<FoundRepository>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_with_nulls_and_missing_fields_still_parse() {
        let answer = serde_json::json!({
            "search": {"issueCount": 2, "pageInfo": {"hasNextPage": false, "endCursor": null},
              "nodes": [null, {"__typename": "PullRequest", "number": 5, "body": null, "mergeCommit": null,
                "closingIssuesReferences": {"nodes": [null, {"number": 3, "comments": {"nodes": [{"body": "hi", "createdAt": "2024-01-01T00:00:00Z", "author": null}]}}]}}]}
        });
        let parsed: PullRequestSearch = parse(answer).unwrap();
        assert_eq!(parsed.search.nodes.len(), 1);
        let pr = &parsed.search.nodes[0];
        assert_eq!((pr.number, pr.body.as_str()), (5, ""));
        assert_eq!(
            pr.closing_issues_references.nodes[0].comments.nodes[0].body,
            "hi"
        );
    }

    #[test]
    fn issue_aliases_are_one_per_number() {
        let query = issues_by_number(&[3, 17]);
        assert!(query.contains("i3: issueOrPullRequest(number: 3)"));
        assert!(query.contains("i17: issueOrPullRequest(number: 17)"));
    }
}
