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

mod ecosystems;
mod error;
pub mod fake_lm;
mod fixtures;
mod git;
pub mod github;
mod hostile;
mod repos;
pub use hostile::{write_hostile_cases, write_sandbox_case};
pub mod http;
pub mod hub;
pub mod runtime;

pub use ecosystems::write_ecosystems;
pub use error::TestkitError;
pub use repos::{DemoLayout, Expect, ExpectedInstance, WrittenPull};
mod validation_cases;
pub use validation_cases::write_validation_cases;

use fixtures::{AGENT_FIXTURES, FIXTURES};
use repos::{build_repo, write_file, write_set};

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

/// [`write_demo`], with a fifth instance that kiln's rules cannot build:
/// `kiln-demo__weather-6`, whose tests need the `xmllint` program (Debian's `libxml2-utils`,
/// named by no file of the repository) and the variable `WEATHER_UNITS` set to `metric`
/// (which its code spells out piece by piece). The launch agent builds it; the rules alone
/// fail it with `tests-failing`. Its base commit's parent (`second`) holds the same code and
/// tests, so a second task of the repository can be made from it with the same patches.
///
/// # Errors
/// As [`write_demo`].
pub fn write_demo_with_agent(dir: &Path) -> Result<DemoLayout, TestkitError> {
    write_set(dir, FIXTURES.iter().chain(AGENT_FIXTURES), build_repo)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::repos::is_test_path;

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
