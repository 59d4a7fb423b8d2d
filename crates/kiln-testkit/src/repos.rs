//! The machinery every fixture set shares: real git repositories built from fixture sources
//! with fixed identities and dates, their task file rows, and what kiln must make of each.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::TestkitError;
use crate::fixtures::{Fixture, Outcome};
use crate::git::git;

/// Where [`write_demo`] put things, and what kiln must make of each task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DemoLayout {
    /// The directory passed to [`write_demo`].
    pub root: PathBuf,
    /// `root/repos`; repository `owner/name` is at `repos_dir/owner/name`, so the clone URL
    /// template `<repos_dir>/{owner}/{name}` reaches every fixture.
    pub repos_dir: PathBuf,
    /// `root/tasks.jsonl`, the SWE-bench task file.
    pub tasks_file: PathBuf,
    /// One entry per task, in task file order.
    pub instances: Vec<ExpectedInstance>,
    /// The pull request behind each task, in the same order, for the fake GitHub.
    pub pulls: Vec<WrittenPull>,
}

/// A pull request a fixture repository holds: its commits (the head is also
/// `refs/pull/<number>/head`, as on GitHub) and the issue it fixes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrittenPull {
    /// `owner/name`.
    pub repo: String,
    /// The repository on disk.
    pub repo_dir: PathBuf,
    /// Pull request number.
    pub number: u32,
    /// Number of the issue it fixes.
    pub issue: u32,
    /// The fix commit's message (the pull request's title and body).
    pub message: String,
    /// Base commit.
    pub base_commit: String,
    /// Head commit (the fix).
    pub head_commit: String,
    /// Merge commit on `main`.
    pub merge_commit: String,
    /// Time of the fix commit (RFC 3339), when the pull request was opened.
    pub created_at: String,
    /// Time of the merge (RFC 3339).
    pub merged_at: String,
    /// The issue's text: title, a blank line, the body.
    pub problem_statement: String,
    /// A comment on the issue from before the fix (empty: none).
    pub hints_text: String,
}

impl DemoLayout {
    /// The local path of repository `owner/name`.
    #[must_use]
    pub fn repo_path(&self, repo: &str) -> PathBuf {
        self.repos_dir.join(repo)
    }

    /// A clone URL template (for `kiln-github`'s `clone_url`) that points at the fixture repos.
    #[must_use]
    pub fn clone_url_template(&self) -> String {
        format!("{}/{{owner}}/{{name}}", self.repos_dir.display())
    }

    /// The expectation for one instance id.
    #[must_use]
    pub fn instance(&self, instance_id: &str) -> Option<&ExpectedInstance> {
        self.instances.iter().find(|i| i.instance_id == instance_id)
    }
}

/// One task of the demo and what kiln must make of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectedInstance {
    /// `owner__name-PR`.
    pub instance_id: String,
    /// `owner/name`.
    pub repo: String,
    /// The expected outcome.
    pub expect: Expect,
}

/// The outcome kiln must reach for one task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// Launch and validation succeed with exactly these lists (sorted test ids as kiln-testlog's
    /// parser gives them: pytest node ids as `pytest -rA` prints them for the demo, e.g.
    /// `tests/test_ops.py::test_add`; see [`write_ecosystems`] for the other ecosystems).
    Validated {
        /// Tests failing with the test patch alone and passing with the gold patch too.
        fail_to_pass: Vec<String>,
        /// Tests passing on both sides.
        pass_to_pass: Vec<String>,
    },
    /// Launch succeeds, validation rejects the instance.
    Rejected {
        /// The failure class (`no-fail-to-pass`).
        failure_class: &'static str,
    },
    /// Launch fails.
    LaunchFailed {
        /// The failure class (`dependency-resolution`).
        failure_class: &'static str,
    },
    /// Launch succeeds, validation cannot run to a decision.
    ValidateFailed {
        /// The failure class (`disk`).
        failure_class: &'static str,
    },
}

/// The commits [`write_demo`] made in one repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BuiltRepo {
    pub(crate) base_commit: String,
    pub(crate) head_commit: String,
    pub(crate) merge_commit: String,
    pub(crate) patch: String,
    pub(crate) test_patch: String,
}

/// One line of a SWE-bench task file, fields in SWE-bench's order.
#[derive(Debug, Serialize)]
#[expect(non_snake_case, reason = "SWE-bench's field names")]
pub(crate) struct TaskRow {
    repo: String,
    instance_id: String,
    base_commit: String,
    patch: String,
    test_patch: String,
    problem_statement: String,
    hints_text: String,
    created_at: String,
    version: String,
    /// A JSON string holding a list, as in the SWE-bench datasets.
    FAIL_TO_PASS: String,
    /// A JSON string holding a list, as in the SWE-bench datasets.
    PASS_TO_PASS: String,
    environment_setup_commit: String,
}

/// Writes one fixture set into `dir`: each fixture's repository, built by `build`, under
/// `repos/<owner>/<name>/`, and the task file `tasks.jsonl` in fixture order.
pub(crate) fn write_set<'a>(
    dir: &Path,
    fixtures: impl IntoIterator<Item = &'a Fixture>,
    build: impl Fn(&Fixture, &Path) -> Result<BuiltRepo, TestkitError>,
) -> Result<DemoLayout, TestkitError> {
    let repos_dir = dir.join("repos");
    let tasks_file = dir.join("tasks.jsonl");
    for path in [&repos_dir, &tasks_file] {
        if path.exists() {
            return Err(TestkitError::AlreadyExists { path: path.clone() });
        }
    }
    let mut lines = String::new();
    let mut instances = Vec::new();
    let mut pulls = Vec::new();
    for fixture in fixtures {
        let repo_dir = repos_dir.join(fixture.owner).join(fixture.name);
        let built = build(fixture, &repo_dir)?;
        pulls.push(WrittenPull {
            repo: fixture.repo(),
            repo_dir: repo_dir.clone(),
            number: fixture.pr,
            issue: fixture.issue,
            message: fixture.messages[3].to_string(),
            base_commit: built.base_commit.clone(),
            head_commit: built.head_commit.clone(),
            merge_commit: built.merge_commit.clone(),
            created_at: fixture.date(3),
            merged_at: fixture.date(4),
            problem_statement: fixture.problem_statement.to_string(),
            hints_text: fixture.hints_text.to_string(),
        });
        let row = task_row(fixture, &built)?;
        lines.push_str(&serde_json::to_string(&row)?);
        lines.push('\n');
        instances.push(ExpectedInstance {
            instance_id: fixture.instance_id(),
            repo: fixture.repo(),
            expect: expectation(fixture),
        });
    }
    write_file(&tasks_file, &lines)?;
    Ok(DemoLayout {
        root: dir.to_path_buf(),
        repos_dir,
        tasks_file,
        instances,
        pulls,
    })
}

/// The public expectation of a fixture.
pub(crate) fn expectation(fixture: &Fixture) -> Expect {
    let sorted = |tests: &[&str]| {
        let mut tests: Vec<String> = tests.iter().map(|t| (*t).to_string()).collect();
        tests.sort();
        tests
    };
    match fixture.outcome {
        Outcome::Validated => Expect::Validated {
            fail_to_pass: sorted(fixture.fail_to_pass),
            pass_to_pass: sorted(fixture.pass_to_pass),
        },
        Outcome::Rejected(failure_class) => Expect::Rejected { failure_class },
        Outcome::LaunchFailed(failure_class) => Expect::LaunchFailed { failure_class },
        Outcome::ValidateFailed(failure_class) => Expect::ValidateFailed { failure_class },
    }
}

/// The task file row of a built fixture.
pub(crate) fn task_row(fixture: &Fixture, built: &BuiltRepo) -> Result<TaskRow, TestkitError> {
    let list = |tests: &[&str]| serde_json::to_string(tests);
    Ok(TaskRow {
        repo: fixture.repo(),
        instance_id: fixture.instance_id(),
        base_commit: built.base_commit.clone(),
        patch: built.patch.clone(),
        test_patch: built.test_patch.clone(),
        problem_statement: fixture.problem_statement.to_string(),
        hints_text: fixture.hints_text.to_string(),
        // The pull request was opened when its commit was made.
        created_at: fixture.date(3),
        version: fixture.version.to_string(),
        FAIL_TO_PASS: list(fixture.fail_to_pass)?,
        PASS_TO_PASS: list(fixture.pass_to_pass)?,
        environment_setup_commit: built.base_commit.clone(),
    })
}

/// Builds one fixture repository at `repo_dir` and returns its base commit and patches.
pub(crate) fn build_repo(fixture: &Fixture, repo_dir: &Path) -> Result<BuiltRepo, TestkitError> {
    build_repo_with(fixture, repo_dir, is_test_path)
}

/// [`build_repo`] with the ecosystem's own rule for which changed files are tests (Go keeps its
/// tests beside the code as `*_test.go`, which the Python rule would call code).
pub(crate) fn build_repo_with(
    fixture: &Fixture,
    repo_dir: &Path,
    is_test: fn(&str) -> bool,
) -> Result<BuiltRepo, TestkitError> {
    if repo_dir.exists() {
        return Err(TestkitError::AlreadyExists {
            path: repo_dir.to_path_buf(),
        });
    }
    create_dir(repo_dir)?;
    git(repo_dir, &["init", "-q", "-b", "main"], None)?;

    // History up to and including the base commit.
    for (n, step) in ["initial", "second", "base"].into_iter().enumerate() {
        commit_step(fixture, repo_dir, step, n)?;
    }
    let base_commit = rev_parse(repo_dir, "HEAD")?;

    // The pull request: a branch from base with the fix, merged with a merge commit.
    let branch = fixture.branch();
    git(repo_dir, &["checkout", "-q", "-b", &branch], None)?;
    commit_step(fixture, repo_dir, "fix", 3)?;
    let fix_commit = rev_parse(repo_dir, "HEAD")?;
    git(repo_dir, &["checkout", "-q", "main"], None)?;
    let merge_message = format!(
        "Merge pull request #{} from {}/{}",
        fixture.pr, fixture.owner, branch
    );
    git(
        repo_dir,
        &[
            "merge",
            "-q",
            "--no-ff",
            "--no-edit",
            "-m",
            &merge_message,
            &branch,
        ],
        Some(&fixture.date(4)),
    )?;
    git(repo_dir, &["branch", "-q", "-D", &branch], None)?;
    let merge_commit = rev_parse(repo_dir, "HEAD")?;
    // GitHub keeps every pull request's head as `refs/pull/<n>/head`; mirrors fetch it.
    git(
        repo_dir,
        &[
            "update-ref",
            &format!("refs/pull/{}/head", fixture.pr),
            &fix_commit,
        ],
        None,
    )?;
    commit_later(fixture, repo_dir)?;

    // Split the pull request's diff into code and tests, as the crawl does.
    let changed = git(
        repo_dir,
        &[
            "diff",
            "--name-only",
            "--no-renames",
            &base_commit,
            &fix_commit,
        ],
        None,
    )?;
    let (tests, code): (Vec<&str>, Vec<&str>) = changed
        .lines()
        .filter(|l| !l.is_empty())
        .partition(|path| is_test(path));
    let patch = diff(repo_dir, &base_commit, &fix_commit, &code)?;
    let test_patch = diff(repo_dir, &base_commit, &fix_commit, &tests)?;
    Ok(BuiltRepo {
        base_commit,
        head_commit: fix_commit,
        merge_commit,
        patch,
        test_patch,
    })
}

/// Writes one step's files and commits them with the step's message and date.
pub(crate) fn commit_step(
    fixture: &Fixture,
    repo_dir: &Path,
    step: &str,
    n: usize,
) -> Result<(), TestkitError> {
    write_step_files(fixture, repo_dir, step)?;
    git(repo_dir, &["add", "-A"], None)?;
    let message = fixture.messages.get(n).copied().unwrap_or(step);
    let date = fixture.date(u32::try_from(n).unwrap_or(0));
    git(repo_dir, &["commit", "-q", "-m", message], Some(&date))?;
    Ok(())
}

/// The commit on `main` after the merge.
pub(crate) fn commit_later(fixture: &Fixture, repo_dir: &Path) -> Result<(), TestkitError> {
    write_step_files(fixture, repo_dir, "later")?;
    git(repo_dir, &["add", "-A"], None)?;
    git(
        repo_dir,
        &["commit", "-q", "-m", fixture.later_message],
        Some(&fixture.date(5)),
    )?;
    Ok(())
}

/// Writes the files of one step over the work tree.
pub(crate) fn write_step_files(
    fixture: &Fixture,
    repo_dir: &Path,
    step: &str,
) -> Result<(), TestkitError> {
    for file in fixture.files(step) {
        let path = repo_dir.join(file.path);
        if let Some(parent) = path.parent() {
            create_dir(parent)?;
        }
        write_file(&path, file.contents)?;
    }
    Ok(())
}

/// `git diff` between two commits, restricted to `paths` (empty when there are none).
pub(crate) fn diff(
    repo_dir: &Path,
    from: &str,
    to: &str,
    paths: &[&str],
) -> Result<String, TestkitError> {
    if paths.is_empty() {
        return Ok(String::new());
    }
    let mut args = vec![
        "diff",
        "--no-color",
        "--no-ext-diff",
        "--no-renames",
        from,
        to,
        "--",
    ];
    args.extend_from_slice(paths);
    git(repo_dir, &args, None)
}

/// The full sha of a revision.
pub(crate) fn rev_parse(repo_dir: &Path, rev: &str) -> Result<String, TestkitError> {
    Ok(git(repo_dir, &["rev-parse", "--verify", rev], None)?
        .trim()
        .to_string())
}

/// Whether a Python repository path is a test file: under a `tests`/`test` directory, or named
/// `test_*.py`, `*_test.py` or `conftest.py`.
pub(crate) fn is_test_path(path: &str) -> bool {
    let mut parts = path.split('/');
    let file = parts.next_back().unwrap_or_default();
    parts.any(|dir| dir == "tests" || dir == "test")
        || (file.starts_with("test_") && file.ends_with(".py"))
        || file.ends_with("_test.py")
        || file == "conftest.py"
}

pub(crate) fn create_dir(path: &Path) -> Result<(), TestkitError> {
    std::fs::create_dir_all(path).map_err(|source| TestkitError::Io {
        path: path.to_path_buf(),
        source,
    })
}

pub(crate) fn write_file(path: &Path, contents: &str) -> Result<(), TestkitError> {
    std::fs::write(path, contents).map_err(|source| TestkitError::Io {
        path: path.to_path_buf(),
        source,
    })
}
