//! kiln-testkit: fixture repositories for kiln's demo and end-to-end tests.
//!
//! [`write_demo`] builds small Python projects as real git repositories, each with a real bug,
//! the pull request that fixed it merged on `main`, and a later commit on top, plus a SWE-bench
//! task file describing them. [`DemoLayout::instances`] says what kiln must make of every task;
//! those expectations were checked against real pytest runs (see the crate's integration test).
//! [`write_tasks_with_errors`] writes a task file with broken lines for error-handling tests.
//! [`fake_lm`] is a fake OpenAI-compatible LM endpoint on the loopback server of [`http`].
//! [`runtime`] is a scripted container runtime: kiln's `ContainerRuntime` without an engine.
//!
//! Everything is deterministic: the same fixture sources give the same commit shas on every
//! machine, because identity, dates and git configuration are all fixed.

use std::path::{Path, PathBuf};

use serde::Serialize;

mod ecosystems;
pub mod fake_lm;
mod fixtures;
mod git;
pub mod github;
mod hostile;
pub use hostile::write_hostile_cases;
pub mod http;
pub mod hub;
pub mod runtime;

pub use ecosystems::write_ecosystems;
mod validation_cases;
pub use validation_cases::write_validation_cases;

use fixtures::{FIXTURES, Fixture, Outcome};
use git::git;

/// Errors from building fixtures.
#[derive(Debug, thiserror::Error)]
pub enum TestkitError {
    /// A file or directory could not be written or read.
    #[error("read or write {}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying IO error.
        #[source]
        source: std::io::Error,
    },
    /// The target already exists; fixtures are never written over existing files.
    #[error("write {}: it already exists", path.display())]
    AlreadyExists {
        /// The existing path.
        path: PathBuf,
    },
    /// `git` could not be started (not installed, not on `PATH`).
    #[error("start git: {source}")]
    GitSpawn {
        /// The underlying IO error.
        #[source]
        source: std::io::Error,
    },
    /// A `git` command failed.
    #[error("run `git {args}` in {}: {stderr}", repo.display())]
    Git {
        /// The arguments passed to git.
        args: String,
        /// The repository it ran in.
        repo: PathBuf,
        /// What git printed on standard error.
        stderr: String,
    },
    /// A task row could not be serialized.
    #[error("serialize a task: {0}")]
    Json(#[from] serde_json::Error),
}

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
}

/// The commits [`write_demo`] made in one repository.
#[derive(Debug, Clone, PartialEq, Eq)]
struct BuiltRepo {
    base_commit: String,
    head_commit: String,
    merge_commit: String,
    patch: String,
    test_patch: String,
}

/// One line of a SWE-bench task file, fields in SWE-bench's order.
#[derive(Debug, Serialize)]
#[expect(non_snake_case, reason = "SWE-bench's field names")]
struct TaskRow {
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

/// Writes the demo: fixture repositories under `dir/repos/<owner>/<name>/` and the task file
/// `dir/tasks.jsonl`.
///
/// The instances, in task file order:
/// 1. `kiln-demo__calc-2`: three bugs fixed in one patch (F2P: a changed existing test, a new
///    test, two new parametrized cases whose ids hold spaces and brackets), many P2P tests;
///    pure stdlib, `pyproject.toml` with a `test` extra, `src/` layout.
/// 2. `kiln-demo__textwrap2-3`: depends on `attrs` from PyPI, and the fix uses it; test
///    dependencies are declared in `requirements-dev.txt` instead of an extra.
/// 3. `kiln-demo__badgold-4`: the gold patch does not fix the bug, so validation must reject the
///    task with `no-fail-to-pass` (the task file still claims a FAIL_TO_PASS, as a wrong
///    dataset would).
/// 4. `kiln-demo__broken-5`: declares a dependency that does not exist on PyPI, so launch must
///    fail with `dependency-resolution`.
///
/// Each repository has three commits up to the base commit, then the fix on a pull request
/// branch merged into `main` with a merge commit (the branch is deleted, as GitHub does), then
/// one later commit: the base commit is never the tip, so history hygiene has something to
/// remove. `patch` and `test_patch` are `git diff` output between the base commit and the fix
/// commit, split into non-test and test files. Commit dates are in September 2024.
///
/// `dir` is created if needed; it must not already hold `tasks.jsonl` or `repos/`.
///
/// # Errors
/// [`TestkitError`] when a target already exists, a file cannot be written, or git fails.
pub fn write_demo(dir: &Path) -> Result<DemoLayout, TestkitError> {
    write_set(dir, FIXTURES, build_repo)
}

/// Writes one fixture set into `dir`: each fixture's repository, built by `build`, under
/// `repos/<owner>/<name>/`, and the task file `tasks.jsonl` in fixture order.
fn write_set(
    dir: &Path,
    fixtures: &[Fixture],
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

/// A task file with broken lines, written by [`write_tasks_with_errors`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TasksWithErrors {
    /// The task file.
    pub path: PathBuf,
    /// Ids of the valid tasks in it, in file order.
    pub valid_instance_ids: Vec<String>,
    /// The broken lines, in file order.
    pub invalid_lines: Vec<InvalidLine>,
}

/// One broken line of a task file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidLine {
    /// 1-based line number.
    pub line: usize,
    /// The id ingest gives the row: the task's own id when it can be read, otherwise the
    /// placeholder `invalid-line-<line>`.
    pub instance_id: String,
    /// The missing field, or `None` when the line is not valid JSON.
    pub missing_field: Option<&'static str>,
}

/// Writes `layout.root/tasks-with-errors.jsonl`: the calc task (line 1), a truncated JSON object
/// (line 2), a task without `base_commit` (line 3, id `kiln-demo__calc-99`), an empty line
/// (line 4, to be skipped) and the textwrap2 task (line 5).
///
/// `layout` must come from [`write_demo`]: the valid lines are copied from its task file, so
/// they point at the real fixture repositories.
///
/// # Errors
/// [`TestkitError`] when the demo task file cannot be read or the new file cannot be written.
pub fn write_tasks_with_errors(layout: &DemoLayout) -> Result<TasksWithErrors, TestkitError> {
    let path = layout.root.join("tasks-with-errors.jsonl");
    if path.exists() {
        return Err(TestkitError::AlreadyExists { path });
    }
    let tasks = std::fs::read_to_string(&layout.tasks_file).map_err(|source| TestkitError::Io {
        path: layout.tasks_file.clone(),
        source,
    })?;
    let mut valid = tasks.lines().filter(|l| !l.trim().is_empty());
    let missing = |what: &str| TestkitError::Io {
        path: layout.tasks_file.clone(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string()),
    };
    let calc = valid.next().ok_or_else(|| missing("no first task"))?;
    let textwrap = valid.next().ok_or_else(|| missing("no second task"))?;

    let mut no_base: serde_json::Value = serde_json::from_str(calc)?;
    if let Some(obj) = no_base.as_object_mut() {
        obj.remove("base_commit");
        obj.insert("instance_id".into(), "kiln-demo__calc-99".into());
    }
    // A proper prefix of a JSON object is never valid JSON: its closing brace is missing.
    let cut = (0..=calc.len() / 2)
        .rev()
        .find(|i| calc.is_char_boundary(*i))
        .unwrap_or(0);
    let truncated = &calc[..cut];
    let text = format!("{calc}\n{truncated}\n{no_base}\n\n{textwrap}\n");
    write_file(&path, &text)?;
    let id_of = |line: &str| -> Result<String, TestkitError> {
        let value: serde_json::Value = serde_json::from_str(line)?;
        Ok(value["instance_id"]
            .as_str()
            .unwrap_or_default()
            .to_string())
    };
    Ok(TasksWithErrors {
        path,
        valid_instance_ids: vec![id_of(calc)?, id_of(textwrap)?],
        invalid_lines: vec![
            InvalidLine {
                line: 2,
                instance_id: "invalid-line-2".into(),
                missing_field: None,
            },
            InvalidLine {
                line: 3,
                instance_id: "kiln-demo__calc-99".into(),
                missing_field: Some("base_commit"),
            },
        ],
    })
}

/// The public expectation of a fixture.
fn expectation(fixture: &Fixture) -> Expect {
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
    }
}

/// The task file row of a built fixture.
fn task_row(fixture: &Fixture, built: &BuiltRepo) -> Result<TaskRow, TestkitError> {
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
fn build_repo(fixture: &Fixture, repo_dir: &Path) -> Result<BuiltRepo, TestkitError> {
    build_repo_with(fixture, repo_dir, is_test_path)
}

/// [`build_repo`] with the ecosystem's own rule for which changed files are tests (Go keeps its
/// tests beside the code as `*_test.go`, which the Python rule would call code).
fn build_repo_with(
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
fn commit_step(
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
fn commit_later(fixture: &Fixture, repo_dir: &Path) -> Result<(), TestkitError> {
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
fn write_step_files(fixture: &Fixture, repo_dir: &Path, step: &str) -> Result<(), TestkitError> {
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
fn diff(repo_dir: &Path, from: &str, to: &str, paths: &[&str]) -> Result<String, TestkitError> {
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
fn rev_parse(repo_dir: &Path, rev: &str) -> Result<String, TestkitError> {
    Ok(git(repo_dir, &["rev-parse", "--verify", rev], None)?
        .trim()
        .to_string())
}

/// Whether a Python repository path is a test file: under a `tests`/`test` directory, or named
/// `test_*.py`, `*_test.py` or `conftest.py`.
fn is_test_path(path: &str) -> bool {
    let mut parts = path.split('/');
    let file = parts.next_back().unwrap_or_default();
    parts.any(|dir| dir == "tests" || dir == "test")
        || (file.starts_with("test_") && file.ends_with(".py"))
        || file.ends_with("_test.py")
        || file == "conftest.py"
}

fn create_dir(path: &Path) -> Result<(), TestkitError> {
    std::fs::create_dir_all(path).map_err(|source| TestkitError::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn write_file(path: &Path, contents: &str) -> Result<(), TestkitError> {
    std::fs::write(path, contents).map_err(|source| TestkitError::Io {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_paths_are_classified() {
        assert!(is_test_path("tests/test_ops.py"));
        assert!(is_test_path("tests/data/input.txt"));
        assert!(is_test_path("pkg/test_x.py"));
        assert!(is_test_path("pkg/x_test.py"));
        assert!(is_test_path("conftest.py"));
        assert!(!is_test_path("src/calc/ops.py"));
        assert!(!is_test_path("src/calc/testing.py"));
        assert!(!is_test_path("CHANGELOG.md"));
    }

    #[test]
    fn every_fixture_has_every_step() {
        for fixture in FIXTURES {
            for step in ["initial", "second", "base", "fix", "later"] {
                assert!(
                    fixture.files(step).next().is_some(),
                    "{} has no {step} files",
                    fixture.dir
                );
            }
        }
    }
}
