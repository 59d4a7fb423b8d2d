//! What the fake GitHub knows: repositories with their pull requests and issues.

use chrono::{DateTime, Utc};

/// A repository the fake serves.
#[derive(Debug, Clone, PartialEq)]
pub struct FakeRepo {
    /// `owner/name`.
    pub full_name: String,
    /// Numeric id (REST `id`).
    pub id: u64,
    /// Main language (GitHub's name).
    pub language: Option<String>,
    /// Bytes of code per language, largest first.
    pub languages: Vec<(String, u64)>,
    /// Stars.
    pub stars: u64,
    /// Forks.
    pub forks: u64,
    /// Archived.
    pub archived: bool,
    /// A fork of another repository.
    pub fork: bool,
    /// Default branch.
    pub default_branch: String,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Last push.
    pub pushed_at: DateTime<Utc>,
    /// Pull requests.
    pub pulls: Vec<FakePull>,
    /// Issues (numbers shared with pull requests, as on GitHub).
    pub issues: Vec<FakeIssue>,
}

impl FakeRepo {
    /// A repository with defaults: Python, 120 stars, 30 forks, branch `main`.
    #[must_use]
    pub fn new(full_name: &str, id: u64) -> Self {
        let epoch = DateTime::parse_from_rfc3339("2020-01-01T00:00:00Z")
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or_default();
        Self {
            full_name: full_name.to_string(),
            id,
            language: Some("Python".into()),
            languages: vec![("Python".into(), 10_000)],
            stars: 120,
            forks: 30,
            archived: false,
            fork: false,
            default_branch: "main".into(),
            created_at: epoch,
            pushed_at: epoch,
            pulls: Vec::new(),
            issues: Vec::new(),
        }
    }

    /// `owner`.
    #[must_use]
    pub fn owner(&self) -> &str {
        self.full_name.split_once('/').map_or("", |(o, _)| o)
    }

    /// `name`.
    #[must_use]
    pub fn name(&self) -> &str {
        self.full_name
            .split_once('/')
            .map_or(self.full_name.as_str(), |(_, n)| n)
    }

    /// The issue numbered `number`.
    #[must_use]
    pub fn issue(&self, number: u64) -> Option<&FakeIssue> {
        self.issues.iter().find(|i| i.number == number)
    }

    /// The pull request numbered `number`.
    #[must_use]
    pub fn pull(&self, number: u64) -> Option<&FakePull> {
        self.pulls.iter().find(|p| p.number == number)
    }
}

/// A pull request.
#[derive(Debug, Clone, PartialEq)]
pub struct FakePull {
    /// Number.
    pub number: u64,
    /// Title.
    pub title: String,
    /// Body.
    pub body: String,
    /// Opened.
    pub created_at: DateTime<Utc>,
    /// Merged (`None`: closed without merging, or open).
    pub merged_at: Option<DateTime<Utc>>,
    /// Base branch.
    pub base_ref: String,
    /// Base commit.
    pub base_oid: String,
    /// Head commit.
    pub head_oid: String,
    /// Merge commit.
    pub merge_oid: Option<String>,
    /// Changed files.
    pub files: Vec<FakeFile>,
    /// The first commit: id, author date, commit date.
    pub first_commit: (String, DateTime<Utc>, DateTime<Utc>),
    /// Issues GitHub resolves as closed by this pull request: (`owner/name`, number).
    pub closing_issues: Vec<(String, u64)>,
}

/// A changed file of a pull request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeFile {
    /// Path.
    pub path: String,
    /// Lines added.
    pub additions: u64,
    /// Lines deleted.
    pub deletions: u64,
    /// `ADDED`, `MODIFIED`, `DELETED`, `RENAMED`.
    pub change_type: String,
}

/// An issue.
#[derive(Debug, Clone, PartialEq)]
pub struct FakeIssue {
    /// Number.
    pub number: u64,
    /// Title.
    pub title: String,
    /// Body.
    pub body: String,
    /// Opened.
    pub created_at: DateTime<Utc>,
    /// Comments in order.
    pub comments: Vec<FakeComment>,
}

/// An issue comment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeComment {
    /// Author login.
    pub author: String,
    /// Text.
    pub body: String,
    /// Written.
    pub created_at: DateTime<Utc>,
}

/// RFC 3339 with a `Z`, seconds precision, as GitHub prints times.
#[must_use]
pub fn github_time(time: &DateTime<Utc>) -> String {
    time.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Parses an RFC 3339 time or a `YYYY-MM-DD` date (midnight UTC).
#[must_use]
pub fn parse_time(text: &str) -> Option<DateTime<Utc>> {
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Some(t.with_timezone(&Utc));
    }
    chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc())
}
