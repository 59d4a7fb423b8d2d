//! The fake GitHub's view of written fixture repositories: each pull request with its issue,
//! files and dates, read from the repositories themselves so the two always agree.

use std::path::Path;

use chrono::{DateTime, Duration, Utc};

use super::model::{FakeComment, FakeFile, FakeIssue, FakePull, FakeRepo, parse_time};
use crate::git::git;
use crate::{DemoLayout, TestkitError, WrittenPull};

/// Repositories for every pull request of `layout` (one repository may hold several).
///
/// Each issue has the fixture's problem statement (first line as title), the fixture's hint as a
/// comment written before the fix, and a comment written after the merge, which is not a hint.
///
/// # Errors
/// When git cannot read a repository.
pub fn fake_repos(layout: &DemoLayout) -> Result<Vec<FakeRepo>, TestkitError> {
    let mut repos: Vec<FakeRepo> = Vec::new();
    for (index, pull) in layout.pulls.iter().enumerate() {
        let position = match repos.iter().position(|r| r.full_name == pull.repo) {
            Some(p) => p,
            None => {
                let id = 7_000_000 + u64::try_from(index).unwrap_or(0);
                repos.push(FakeRepo::new(&pull.repo, id));
                repos.len() - 1
            }
        };
        let repo = &mut repos[position];
        let (pr, issue) = fake_pull(pull)?;
        repo.pushed_at = repo.pushed_at.max(pr.merged_at.unwrap_or(pr.created_at));
        repo.languages = vec![("Python".into(), 4096 + 512 * u64::from(pull.number))];
        repo.pulls.push(pr);
        repo.issues.push(issue);
    }
    Ok(repos)
}

fn time(text: &str) -> DateTime<Utc> {
    parse_time(text).unwrap_or_default()
}

fn fake_pull(pull: &WrittenPull) -> Result<(FakePull, FakeIssue), TestkitError> {
    let created = time(&pull.created_at);
    let merged = time(&pull.merged_at);
    let (title, body) = split_message(&pull.message);
    let files = changed_files(&pull.repo_dir, &pull.base_commit, &pull.head_commit)?;
    let (issue_title, issue_body) = split_message(&pull.problem_statement);
    let mut comments = Vec::new();
    if !pull.hints_text.is_empty() {
        comments.push(FakeComment {
            author: "maintainer".into(),
            body: pull.hints_text.clone(),
            created_at: created - Duration::hours(2),
        });
    }
    comments.push(FakeComment {
        author: "reporter".into(),
        body: format!("Confirmed fixed by #{}, thank you.", pull.number),
        created_at: merged + Duration::hours(1),
    });
    let pr = FakePull {
        number: u64::from(pull.number),
        title,
        body,
        created_at: created,
        merged_at: Some(merged),
        base_ref: "main".into(),
        base_oid: pull.base_commit.clone(),
        head_oid: pull.head_commit.clone(),
        merge_oid: Some(pull.merge_commit.clone()),
        files,
        first_commit: (pull.head_commit.clone(), created, created),
        closing_issues: vec![(pull.repo.clone(), u64::from(pull.issue))],
    };
    let issue = FakeIssue {
        number: u64::from(pull.issue),
        title: issue_title,
        body: issue_body,
        created_at: created - Duration::hours(20),
        comments,
    };
    Ok((pr, issue))
}

/// A commit message or issue text as GitHub shows it: the first line, and the rest.
#[must_use]
pub fn split_message(text: &str) -> (String, String) {
    match text.split_once('\n') {
        Some((title, rest)) => (
            title.trim().to_string(),
            rest.trim_start_matches('\n').to_string(),
        ),
        None => (text.trim().to_string(), String::new()),
    }
}

/// The files a pull request changes, as GitHub lists them (from the merge base to the head).
///
/// # Errors
/// When git fails.
pub fn changed_files(
    repo_dir: &Path,
    base: &str,
    head: &str,
) -> Result<Vec<FakeFile>, TestkitError> {
    let merge_base = git(repo_dir, &["merge-base", base, head], None)?
        .trim()
        .to_string();
    let numstat = git(
        repo_dir,
        &["diff", "--numstat", "-M", "-z", &merge_base, head],
        None,
    )?;
    let status = git(
        repo_dir,
        &["diff", "--name-status", "-M", &merge_base, head],
        None,
    )?;
    let mut kinds = std::collections::BTreeMap::new();
    for line in status.lines() {
        let parts: Vec<&str> = line.split('\t').collect();
        let kind = match parts.first().map(|k| k.chars().next().unwrap_or('M')) {
            Some('A') => "ADDED",
            Some('D') => "DELETED",
            Some('R') => "RENAMED",
            Some('C') => "COPIED",
            _ => "MODIFIED",
        };
        if let Some(path) = parts.last() {
            kinds.insert((*path).to_string(), kind);
        }
    }
    // `--numstat -z`: "added\tdeleted\tpath\0", or for a rename "added\tdeleted\t\0old\0new\0".
    let mut files = Vec::new();
    let mut fields = numstat.split('\0').peekable();
    while let Some(entry) = fields.next() {
        if entry.is_empty() {
            continue;
        }
        let mut parts = entry.splitn(3, '\t');
        let added = parts.next().unwrap_or("0");
        let deleted = parts.next().unwrap_or("0");
        let mut path = parts.next().unwrap_or_default().to_string();
        if path.is_empty() {
            let _old = fields.next();
            path = fields.next().unwrap_or_default().to_string();
        }
        files.push(FakeFile {
            change_type: kinds.get(&path).copied().unwrap_or("MODIFIED").to_string(),
            path,
            // Binary files count as 0 lines, as on GitHub.
            additions: added.parse().unwrap_or(0),
            deletions: deleted.parse().unwrap_or(0),
        });
    }
    Ok(files)
}
