//! Synthetic repositories for crawl benchmarks: many repositories with many merged pull
//! requests each, written with `git fast-import` (thousands of commits in seconds), every pull
//! request a real commit with a code file and a test file, its head at `refs/pull/<n>/head`,
//! closing an issue of its own with two comments.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use chrono::{DateTime, Duration, Utc};

use super::model::{FakeComment, FakeFile, FakeIssue, FakePull, FakeRepo, parse_time};
use crate::TestkitError;

/// What [`write_synthetic`] wrote.
#[derive(Debug, Clone)]
pub struct Synthetic {
    /// The fake's repositories.
    pub repos: Vec<FakeRepo>,
    /// Clone URL template reaching the written repositories.
    pub clone_url_template: String,
    /// Start of the month the pull requests were merged in.
    pub since: DateTime<Utc>,
    /// End (exclusive) of that month.
    pub until: DateTime<Utc>,
}

/// Writes `repos` repositories `synth/repo-NN` under `dir/repos`, each with `pulls` merged pull
/// requests spread over September 2024 (numbers `pulls+1 ..= 2*pulls`, closing issues
/// `1 ..= pulls`).
///
/// # Errors
/// When git cannot be run or a directory cannot be made.
pub fn write_synthetic(dir: &Path, repos: usize, pulls: usize) -> Result<Synthetic, TestkitError> {
    let repos_dir = dir.join("repos");
    let since = parse_time("2024-09-01T00:00:00Z").unwrap_or_default();
    let until = parse_time("2024-10-01T00:00:00Z").unwrap_or_default();
    let mut fakes = Vec::with_capacity(repos);
    for r in 0..repos {
        let name = format!("synth/repo-{r:02}");
        let path = repos_dir.join(&name);
        let heads = fast_import(&path, pulls, r)?;
        let mut repo = FakeRepo::new(&name, 6_000_000 + u64::try_from(r).unwrap_or(0));
        repo.pushed_at = until;
        let span = (until - since).num_seconds();
        for (i, (base, head)) in heads.into_iter().enumerate() {
            let n = u64::try_from(i).unwrap_or(0);
            let count = i64::try_from(pulls).unwrap_or(1).max(1);
            let merged =
                since + Duration::seconds(span * i64::try_from(i).unwrap_or(0) / count + 60);
            let created = merged - Duration::hours(5);
            let issue = n + 1;
            let number = u64::try_from(pulls).unwrap_or(0) + n + 1;
            repo.issues.push(FakeIssue {
                number: issue,
                title: format!("Module {i} is missing"),
                body: format!("Importing `synth.mod_{i}` fails with ModuleNotFoundError."),
                created_at: created - Duration::days(2),
                comments: vec![
                    FakeComment {
                        author: "reporter".into(),
                        body: "Seen on the main branch too.".into(),
                        created_at: created - Duration::days(1),
                    },
                    FakeComment {
                        author: "maintainer".into(),
                        body: format!("Fixed by #{number}."),
                        created_at: merged + Duration::hours(1),
                    },
                ],
            });
            repo.pulls.push(FakePull {
                number,
                title: format!("Add module {i}"),
                body: format!("Fixes #{issue}."),
                created_at: created,
                merged_at: Some(merged),
                base_ref: "main".into(),
                base_oid: base,
                head_oid: head.clone(),
                merge_oid: Some(format!("{:040x}", number * 1000 + n)),
                files: vec![
                    FakeFile {
                        path: format!("src/synth/mod_{i}.py"),
                        additions: 2,
                        deletions: 0,
                        change_type: "ADDED".into(),
                    },
                    FakeFile {
                        path: format!("tests/test_mod_{i}.py"),
                        additions: 5,
                        deletions: 0,
                        change_type: "ADDED".into(),
                    },
                ],
                first_commit: (head, created, created),
                closing_issues: vec![(name.clone(), issue)],
            });
        }
        fakes.push(repo);
    }
    Ok(Synthetic {
        repos: fakes,
        clone_url_template: format!("{}/{{owner}}/{{name}}", repos_dir.display()),
        since,
        until,
    })
}

/// Writes one repository: a base commit on `main` and one pull request commit per pull request
/// on top of it; returns (base, head) per pull request.
fn fast_import(
    path: &Path,
    pulls: usize,
    seed: usize,
) -> Result<Vec<(String, String)>, TestkitError> {
    std::fs::create_dir_all(path).map_err(|source| TestkitError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    crate::git::git(path, &["init", "-q", "-b", "main"], None)?;
    let mut stream = Vec::new();
    let stamp = 1_725_000_000 + seed * 10;
    let base_readme = format!("Synthetic repository {seed}\n");
    let init = b"";
    let _ = write!(
        stream,
        "commit refs/heads/main\nmark :1\ncommitter Kiln Demo <demo@kiln.invalid> {stamp} +0000\ndata 4\nbase\n\
         M 100644 inline README.md\ndata {}\n{base_readme}\n\
         M 100644 inline src/synth/__init__.py\ndata {}\n\n",
        base_readme.len(),
        init.len()
    );
    for i in 0..pulls {
        let code = format!("VALUE = {i}\n");
        let test = format!(
            "from synth.mod_{i} import VALUE\n\n\ndef test_value():\n    assert VALUE == {i}\n"
        );
        let message = format!("Add module {i}");
        let _ = write!(
            stream,
            "commit refs/pull/{number}/head\nmark :{mark}\ncommitter Kiln Demo <demo@kiln.invalid> {time} +0000\ndata {}\n{message}\nfrom :1\n\
             M 100644 inline src/synth/mod_{i}.py\ndata {}\n{code}\n\
             M 100644 inline tests/test_mod_{i}.py\ndata {}\n{test}\n",
            message.len(),
            code.len(),
            test.len(),
            number = pulls + i + 1,
            mark = i + 2,
            time = stamp + i + 1,
        );
    }
    let _ = writeln!(stream, "done");
    let mut child = Command::new("git")
        .arg("-C")
        .arg(path)
        .args(["fast-import", "--quiet", "--done"])
        .arg(format!(
            "--export-marks={}",
            path.join(".git/kiln-marks").display()
        ))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| TestkitError::GitSpawn { source })?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(&stream)
            .map_err(|source| TestkitError::Io {
                path: path.to_path_buf(),
                source,
            })?;
    }
    let output = child
        .wait_with_output()
        .map_err(|source| TestkitError::GitSpawn { source })?;
    if !output.status.success() {
        return Err(TestkitError::Git {
            args: "fast-import".into(),
            repo: path.to_path_buf(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        });
    }
    let marks_path: PathBuf = path.join(".git/kiln-marks");
    let marks = std::fs::read_to_string(&marks_path).map_err(|source| TestkitError::Io {
        path: marks_path.clone(),
        source,
    })?;
    let by_mark: std::collections::BTreeMap<usize, String> = marks
        .lines()
        .filter_map(|l| {
            let (mark, sha) = l.split_once(' ')?;
            Some((mark.trim_start_matches(':').parse().ok()?, sha.to_string()))
        })
        .collect();
    let base = by_mark.get(&1).cloned().unwrap_or_default();
    Ok((0..pulls)
        .map(|i| {
            (
                base.clone(),
                by_mark.get(&(i + 2)).cloned().unwrap_or_default(),
            )
        })
        .collect())
}
