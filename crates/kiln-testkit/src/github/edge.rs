//! A repository of awkward pull requests for the crawl: one for every way a merged pull request
//! can fail to be a task, and candidates that exercise renames, binary files, keyword links and
//! issues with more comments than one page holds.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Duration, Utc};

use super::fixtures::changed_files;
use super::model::{FakeComment, FakeIssue, FakePull, FakeRepo, parse_time};
use crate::TestkitError;
use crate::git::git;

/// The repository kiln crawls.
pub const EDGE_REPO: &str = "kiln-crawl/edge";
/// A second repository, only for an issue another repository's pull request closes.
pub const OTHER_REPO: &str = "kiln-crawl/other";

/// What the crawl must make of one pull request of the edge repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EdgeExpectation {
    /// Pull request number.
    pub number: u64,
    /// `None`: a candidate; `Some(reason)`: dropped with that reason.
    pub drop_reason: Option<&'static str>,
    /// How each linked issue is linked (candidates only).
    pub links: Vec<(&'static str, &'static str)>,
}

/// The written edge repositories.
#[derive(Debug, Clone)]
pub struct EdgeCase {
    /// Where the repositories are: `<dir>/<owner>/<name>`.
    pub repos_dir: PathBuf,
    /// Clone URL template reaching them.
    pub clone_url_template: String,
    /// The fake's repositories (edge and other).
    pub repos: Vec<FakeRepo>,
    /// Rows the crawl of September 2024 must give, by pull request number; pull requests that
    /// must give no row (closed unmerged, merged outside the window) are absent.
    pub expected: Vec<EdgeExpectation>,
    /// Base commit of the candidates.
    pub base_commit: String,
    /// Number of comments on issue #1 written before pull request #2's first commit (more than
    /// one page of 100).
    pub early_comments: usize,
}

fn at(text: &str) -> DateTime<Utc> {
    parse_time(text).unwrap_or_default()
}

struct Repo<'a> {
    dir: &'a Path,
}

impl Repo<'_> {
    fn write(&self, path: &str, contents: &[u8]) -> Result<(), TestkitError> {
        let path = self.dir.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|source| TestkitError::Io {
                path: parent.to_path_buf(),
                source,
            })?;
        }
        std::fs::write(&path, contents).map_err(|source| TestkitError::Io { path, source })
    }

    fn remove(&self, path: &str) -> Result<(), TestkitError> {
        git(self.dir, &["rm", "-q", path], None).map(|_| ())
    }

    fn commit(&self, message: &str, date: &str) -> Result<String, TestkitError> {
        git(self.dir, &["add", "-A"], None)?;
        git(
            self.dir,
            &["commit", "-q", "--allow-empty", "-m", message],
            Some(date),
        )?;
        Ok(git(self.dir, &["rev-parse", "HEAD"], None)?
            .trim()
            .to_string())
    }

    fn checkout(&self, args: &[&str]) -> Result<(), TestkitError> {
        let mut all = vec!["checkout", "-q"];
        all.extend_from_slice(args);
        git(self.dir, &all, None).map(|_| ())
    }

    fn pull_ref(&self, number: u64, commit: &str) -> Result<(), TestkitError> {
        git(
            self.dir,
            &["update-ref", &format!("refs/pull/{number}/head"), commit],
            None,
        )
        .map(|_| ())
    }
}

const CORE: &str = "def answer():\n    return 41\n\n\ndef double(x):\n    return x + x\n";
const TEST_CORE: &str =
    "from edge.core import answer\n\n\ndef test_answer():\n    assert answer() == 42\n";
const TEST_OLD: &str = "from edge.core import double\n\n\ndef test_double():\n    assert double(2) == 4\n\n\ndef test_double_zero():\n    assert double(0) == 0\n";

/// A pull request to be written: its branch's changes on top of `base`.
struct Spec {
    number: u64,
    title: &'static str,
    body: &'static str,
    merged: Option<&'static str>,
    closes: Vec<(&'static str, u64)>,
    base_ref: &'static str,
}

/// A pull request written to the edge repository: what GitHub says of it, the head and base
/// commits it names, and its first commit's date.
struct Written {
    spec: Spec,
    head: String,
    base_oid: String,
    first_commit: DateTime<Utc>,
}

/// Writes the edge repositories under `dir` and returns what the fake serves and what the crawl
/// must give.
///
/// # Errors
/// When a file cannot be written or git fails.
pub fn write_edge_repos(dir: &Path) -> Result<EdgeCase, TestkitError> {
    let repos_dir = dir.join("repos");
    let edge_dir = repos_dir.join(EDGE_REPO);
    std::fs::create_dir_all(&edge_dir).map_err(|source| TestkitError::Io {
        path: edge_dir.clone(),
        source,
    })?;
    git(&edge_dir, &["init", "-q", "-b", "main"], None)?;
    let repo = Repo { dir: &edge_dir };
    let (first, base) = write_history(&repo)?;
    let mut pulls = vec![write_fix(&repo, &base)?];
    pulls.extend(write_search_cases(&repo, &base)?);
    pulls.extend(write_unlisted_and_unlinked_cases(&repo, &base)?);
    pulls.extend(write_git_cases(&repo, &first, &base)?);
    repo.checkout(&["main"])?;

    let mut edge = FakeRepo::new(EDGE_REPO, 8_000_001);
    edge.languages = vec![("Python".into(), 52_000), ("Shell".into(), 1_000)];
    edge.pushed_at = at("2024-09-20T10:00:00Z");
    let early_comments = 104;
    edge.issues = edge_issues(early_comments);
    edge.pulls = fake_pulls(&repo, &base, pulls)?;
    Ok(EdgeCase {
        clone_url_template: format!("{}/{{owner}}/{{name}}", repos_dir.display()),
        repos_dir,
        repos: vec![edge, other_repo()],
        expected: expectations(),
        base_commit: base,
        early_comments,
    })
}

/// The history every pull request branches from: the first commit, and the base commit (a
/// README change on top) of the candidates. Returns both.
fn write_history(repo: &Repo<'_>) -> Result<(String, String), TestkitError> {
    repo.write("README.md", b"Edge cases\n")?;
    repo.write("src/edge/__init__.py", b"")?;
    repo.write("src/edge/core.py", CORE.as_bytes())?;
    repo.write("tests/test_core.py", TEST_CORE.as_bytes())?;
    repo.write("tests/test_old_name.py", TEST_OLD.as_bytes())?;
    repo.write("docs/guide.md", b"# Guide\n")?;
    let first = repo.commit("Start the edge project", "2024-08-01T10:00:00Z")?;
    repo.write("README.md", b"Edge cases, with a better README\n")?;
    let base = repo.commit("Reword the README", "2024-08-05T10:00:00Z")?;
    Ok((first, base))
}

/// #2: the fix of issue #1, with a renamed test file and a binary test fixture.
fn write_fix(repo: &Repo<'_>, base: &str) -> Result<Written, TestkitError> {
    repo.checkout(&["-b", "pr-2", base])?;
    repo.write("src/edge/core.py", CORE.replace("41", "42").as_bytes())?;
    repo.remove("tests/test_old_name.py")?;
    repo.write(
        "tests/test_doubling.py",
        format!("{TEST_OLD}\n\ndef test_double_negative():\n    assert double(-1) == -2\n")
            .as_bytes(),
    )?;
    repo.write(
        "tests/data/golden.bin",
        &[0x89, b'K', b'L', b'N', 0, 0, 1, 2, 255, 0],
    )?;
    let head = repo.commit(
        "Return the right answer\n\nFixes #1.",
        "2024-09-02T09:00:00Z",
    )?;
    Ok(Written {
        spec: Spec {
            number: 2,
            title: "Return the right answer",
            body: "Fixes #1.\n\nAlso renames the doubling tests.",
            merged: Some("2024-09-03T10:00:00Z"),
            closes: vec![(EDGE_REPO, 1)],
            base_ref: "main",
        },
        head,
        base_oid: base.to_string(),
        first_commit: at("2024-09-02T09:00:00Z"),
    })
}

/// A code change with a test on branch `branch` from `base`, the change of the pull requests
/// whose files pass the rules; returns its commit.
fn code_and_test(
    repo: &Repo<'_>,
    base: &str,
    branch: &str,
    n: u64,
    date: &str,
) -> Result<String, TestkitError> {
    repo.checkout(&["-b", branch, base])?;
    repo.write(
        &format!("src/edge/extra_{n}.py"),
        format!("VALUE = {n}\n").as_bytes(),
    )?;
    repo.write(
        &format!("tests/test_extra_{n}.py"),
        format!(
            "from edge.extra_{n} import VALUE\n\n\ndef test_value():\n    assert VALUE == {n}\n"
        )
        .as_bytes(),
    )?;
    repo.commit(&format!("Add extra {n}"), date)
}

/// #4 to #8: what the search answer decides, the links and the file rules: a candidate
/// linked only by a keyword, and pull requests with no issue, only tests, no test, and too
/// many files.
fn write_search_cases(repo: &Repo<'_>, base: &str) -> Result<Vec<Written>, TestkitError> {
    let mut pulls = Vec::new();
    // #4: linked only by a keyword in its body (into a release branch, so GitHub's closing
    // references stay empty).
    pulls.push(Written {
        head: code_and_test(repo, base, "pr-4", 4, "2024-09-04T09:00:00Z")?,
        spec: Spec {
            number: 4,
            title: "Add extra 4",
            body: "This resolves #3.",
            merged: Some("2024-09-05T10:00:00Z"),
            closes: vec![],
            base_ref: "release-1.x",
        },
        base_oid: base.to_string(),
        first_commit: at("2024-09-04T09:00:00Z"),
    });
    // #5: no issue at all.
    pulls.push(Written {
        head: code_and_test(repo, base, "pr-5", 5, "2024-09-05T09:00:00Z")?,
        spec: Spec {
            number: 5,
            title: "Add extra 5",
            body: "Small improvement.",
            merged: Some("2024-09-06T10:00:00Z"),
            closes: vec![],
            base_ref: "main",
        },
        base_oid: base.to_string(),
        first_commit: at("2024-09-05T09:00:00Z"),
    });
    // #6: tests only.
    repo.checkout(&["-b", "pr-6", base])?;
    repo.write(
        "tests/test_core.py",
        format!("{TEST_CORE}\n\ndef test_answer_type():\n    assert isinstance(answer(), int)\n")
            .as_bytes(),
    )?;
    pulls.push(Written {
        head: repo.commit("Test the answer's type", "2024-09-06T09:00:00Z")?,
        spec: Spec {
            number: 6,
            title: "Test the answer's type",
            body: "Closes #3",
            merged: Some("2024-09-07T10:00:00Z"),
            closes: vec![(EDGE_REPO, 3)],
            base_ref: "main",
        },
        base_oid: base.to_string(),
        first_commit: at("2024-09-06T09:00:00Z"),
    });
    // #7: documentation only.
    repo.checkout(&["-b", "pr-7", base])?;
    repo.write("docs/guide.md", b"# Guide\n\nCall answer().\n")?;
    pulls.push(Written {
        head: repo.commit("Document answer()", "2024-09-07T09:00:00Z")?,
        spec: Spec {
            number: 7,
            title: "Document answer()",
            body: "Closes #3",
            merged: Some("2024-09-08T10:00:00Z"),
            closes: vec![(EDGE_REPO, 3)],
            base_ref: "main",
        },
        base_oid: base.to_string(),
        first_commit: at("2024-09-07T09:00:00Z"),
    });
    pulls.push(write_too_large(repo, base)?);
    Ok(pulls)
}

/// #8: 60 files, over `max_files`.
fn write_too_large(repo: &Repo<'_>, base: &str) -> Result<Written, TestkitError> {
    repo.checkout(&["-b", "pr-8", base])?;
    for i in 0..55 {
        repo.write(
            &format!("src/edge/generated/m{i:02}.py"),
            format!("N = {i}\n").as_bytes(),
        )?;
    }
    for i in 0..5 {
        repo.write(
            &format!("tests/generated/test_m{i}.py"),
            b"def test_ok():\n    pass\n",
        )?;
    }
    Ok(Written {
        head: repo.commit("Generate modules", "2024-09-08T09:00:00Z")?,
        spec: Spec {
            number: 8,
            title: "Generate modules",
            body: "Fixes #3",
            merged: Some("2024-09-09T10:00:00Z"),
            closes: vec![(EDGE_REPO, 3)],
            base_ref: "main",
        },
        base_oid: base.to_string(),
        first_commit: at("2024-09-08T09:00:00Z"),
    })
}

/// #9 to #13: a base commit the repository lacks, pull requests the crawl of the window must
/// not list (closed unmerged, merged after it), and links that name no issue of the
/// repository.
fn write_unlisted_and_unlinked_cases(
    repo: &Repo<'_>,
    base: &str,
) -> Result<Vec<Written>, TestkitError> {
    Ok(vec![
        // #9: a base commit the repository does not have (force-pushed away).
        Written {
            head: code_and_test(repo, base, "pr-9", 9, "2024-09-09T09:00:00Z")?,
            spec: Spec {
                number: 9,
                title: "Add extra 9",
                body: "Fixes #3",
                merged: Some("2024-09-10T10:00:00Z"),
                closes: vec![(EDGE_REPO, 3)],
                base_ref: "main",
            },
            base_oid: "1111111111111111111111111111111111111111".into(),
            first_commit: at("2024-09-09T09:00:00Z"),
        },
        // #10: closed without merging.
        Written {
            head: code_and_test(repo, base, "pr-10", 10, "2024-09-10T09:00:00Z")?,
            spec: Spec {
                number: 10,
                title: "Add extra 10",
                body: "Fixes #3",
                merged: None,
                closes: vec![],
                base_ref: "main",
            },
            base_oid: base.to_string(),
            first_commit: at("2024-09-10T09:00:00Z"),
        },
        // #11: merged after the window.
        Written {
            head: code_and_test(repo, base, "pr-11", 11, "2024-10-10T09:00:00Z")?,
            spec: Spec {
                number: 11,
                title: "Add extra 11",
                body: "Fixes #3",
                merged: Some("2024-10-15T10:00:00Z"),
                closes: vec![(EDGE_REPO, 3)],
                base_ref: "main",
            },
            base_oid: base.to_string(),
            first_commit: at("2024-10-10T09:00:00Z"),
        },
        // #12: closes an issue of another repository only.
        Written {
            head: code_and_test(repo, base, "pr-12", 12, "2024-09-12T09:00:00Z")?,
            spec: Spec {
                number: 12,
                title: "Add extra 12",
                body: "Fixes kiln-crawl/other#1",
                merged: Some("2024-09-13T10:00:00Z"),
                closes: vec![(OTHER_REPO, 1)],
                base_ref: "main",
            },
            base_oid: base.to_string(),
            first_commit: at("2024-09-12T09:00:00Z"),
        },
        // #13: its keyword names a pull request, not an issue.
        Written {
            head: code_and_test(repo, base, "pr-13", 13, "2024-09-13T09:00:00Z")?,
            spec: Spec {
                number: 13,
                title: "Add extra 13",
                body: "Fixes #2 properly.",
                merged: Some("2024-09-14T10:00:00Z"),
                closes: vec![],
                base_ref: "main",
            },
            base_oid: base.to_string(),
            first_commit: at("2024-09-13T09:00:00Z"),
        },
    ])
}

/// #14 and #15: what only the git work finds: a change that does not apply to the base, and
/// a head commit the repository does not have.
fn write_git_cases(repo: &Repo<'_>, first: &str, base: &str) -> Result<Vec<Written>, TestkitError> {
    // #14: branched before the README change; its own README change conflicts with the base.
    repo.checkout(&["-b", "pr-14", first])?;
    repo.write("README.md", b"Edge cases (renamed)\n")?;
    repo.write("src/edge/extra_14.py", b"VALUE = 14\n")?;
    repo.write(
        "tests/test_extra_14.py",
        b"from edge.extra_14 import VALUE\n\n\ndef test_value():\n    assert VALUE == 14\n",
    )?;
    let conflict = Written {
        head: repo.commit("Add extra 14", "2024-09-14T09:00:00Z")?,
        spec: Spec {
            number: 14,
            title: "Add extra 14",
            body: "Fixes #3",
            merged: Some("2024-09-15T10:00:00Z"),
            closes: vec![(EDGE_REPO, 3)],
            base_ref: "main",
        },
        base_oid: base.to_string(),
        first_commit: at("2024-09-14T09:00:00Z"),
    };
    // #15: a head commit the repository does not have.
    let missing_head = Written {
        spec: Spec {
            number: 15,
            title: "Add extra 15",
            body: "Fixes #3",
            merged: Some("2024-09-16T10:00:00Z"),
            closes: vec![(EDGE_REPO, 3)],
            base_ref: "main",
        },
        head: "2222222222222222222222222222222222222222".into(),
        base_oid: base.to_string(),
        first_commit: at("2024-09-15T09:00:00Z"),
    };
    Ok(vec![conflict, missing_head])
}

/// The edge repository's issues: #1, which the fix closes, with `early_comments` comments
/// (more than one page) before the fix began and one after, and #3, which the others name.
fn edge_issues(early_comments: usize) -> Vec<FakeIssue> {
    let mut comments: Vec<FakeComment> = (0..early_comments)
        .map(|i| FakeComment {
            author: format!("user{i}"),
            body: format!("Early comment {i}: answer() is off by one."),
            created_at: at("2024-08-20T00:00:00Z")
                + Duration::minutes(i64::try_from(i).unwrap_or(0)),
        })
        .collect();
    comments.push(FakeComment {
        author: "maintainer".into(),
        body: "Fixed in #2 (written after the fix started).".into(),
        created_at: at("2024-09-02T12:00:00Z"),
    });
    vec![
        FakeIssue {
            number: 1,
            title: "answer() returns 41".into(),
            body: "It should return 42.".into(),
            created_at: at("2024-08-19T10:00:00Z"),
            comments,
        },
        FakeIssue {
            number: 3,
            title: "More extras".into(),
            body: "Add the extra modules.".into(),
            created_at: at("2024-08-19T11:00:00Z"),
            comments: vec![],
        },
    ]
}

/// The fake's pull requests for the written ones, in order: their changed files from the
/// repository (a pull request whose base or head the repository lacks lists those of a
/// reachable one, as GitHub still lists its files), and a `refs/pull/N/head` for each head
/// the repository has, as GitHub keeps it.
fn fake_pulls(
    repo: &Repo<'_>,
    base: &str,
    pulls: Vec<Written>,
) -> Result<Vec<FakePull>, TestkitError> {
    let edge_dir = repo.dir;
    let mut out = Vec::new();
    for Written {
        spec,
        head,
        base_oid,
        first_commit,
    } in pulls
    {
        let files = if head.starts_with("2222") {
            changed_files(edge_dir, base, &pulls_head_fallback(edge_dir)?)?
        } else {
            changed_files(
                edge_dir,
                if base_oid.starts_with("1111") {
                    base
                } else {
                    &base_oid
                },
                &head,
            )?
        };
        if !head.starts_with("2222") {
            repo.pull_ref(spec.number, &head)?;
        }
        let merged = spec.merged.map(at);
        out.push(FakePull {
            number: spec.number,
            title: spec.title.into(),
            body: spec.body.into(),
            created_at: first_commit + Duration::hours(1),
            merged_at: merged,
            base_ref: spec.base_ref.into(),
            base_oid,
            head_oid: head,
            merge_oid: merged.map(|_| format!("{:040x}", spec.number)),
            files,
            first_commit: (String::new(), first_commit, first_commit),
            closing_issues: spec
                .closes
                .iter()
                .map(|(r, n)| ((*r).to_string(), *n))
                .collect(),
        });
    }
    Ok(out)
}

/// The second repository, with the one issue #12 closes.
fn other_repo() -> FakeRepo {
    let mut other = FakeRepo::new(OTHER_REPO, 8_000_002);
    other.issues = vec![FakeIssue {
        number: 1,
        title: "Elsewhere".into(),
        body: "Another repository's issue.".into(),
        created_at: at("2024-08-01T00:00:00Z"),
        comments: vec![],
    }];
    other
}

/// What the crawl of September 2024 must give for each pull request that gives a row.
fn expectations() -> Vec<EdgeExpectation> {
    vec![
        EdgeExpectation {
            number: 2,
            drop_reason: None,
            links: vec![("1", "closing-reference+keyword")],
        },
        EdgeExpectation {
            number: 4,
            drop_reason: None,
            links: vec![("3", "keyword")],
        },
        EdgeExpectation {
            number: 5,
            drop_reason: Some("no-linked-issue"),
            links: vec![],
        },
        EdgeExpectation {
            number: 6,
            drop_reason: Some("only-tests"),
            links: vec![],
        },
        EdgeExpectation {
            number: 7,
            drop_reason: Some("no-test-change"),
            links: vec![],
        },
        EdgeExpectation {
            number: 8,
            drop_reason: Some("too-large"),
            links: vec![],
        },
        EdgeExpectation {
            number: 9,
            drop_reason: Some("base-unreachable"),
            links: vec![],
        },
        EdgeExpectation {
            number: 12,
            drop_reason: Some("no-linked-issue"),
            links: vec![],
        },
        EdgeExpectation {
            number: 13,
            drop_reason: Some("no-linked-issue"),
            links: vec![],
        },
        EdgeExpectation {
            number: 14,
            drop_reason: Some("patch-does-not-apply"),
            links: vec![],
        },
        EdgeExpectation {
            number: 15,
            drop_reason: Some("head-unreachable"),
            links: vec![],
        },
    ]
}

/// A pull request whose head GitHub has but the repository does not still lists files; any
/// code-and-test head gives a realistic list.
fn pulls_head_fallback(dir: &Path) -> Result<String, TestkitError> {
    Ok(git(dir, &["rev-parse", "refs/heads/pr-4"], None)?
        .trim()
        .to_string())
}
