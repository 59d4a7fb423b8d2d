//! Build plans: what the repository's own files say about installing, building and testing it,
//! and the vocabulary the planners share.
//!
//! Each ecosystem folder offers `plan(&PlanContext) -> Option<Plan>`; the registry
//! (`ecosystems`) asks them in order. A plan is data (typed steps, image, parser), so launch
//! runs every plan the same way and the Dockerfile replays any of them.

use std::path::Path;

use kiln_core::ImageBuild;

use crate::debian::Suite;
use crate::steps::{PipInstall, Step, TestCommand};

/// What a plan may look at.
#[derive(Debug, Clone, Copy)]
pub struct PlanContext<'a> {
    /// The checkout at the base commit, on the host.
    pub root: &'a Path,
    /// Dependency cut-off (RFC 3339): unpinned dependencies resolve as of this date.
    pub cutoff: Option<&'a str>,
    /// CA bundle to install in the plan's image.
    pub ca_bundle: Option<&'a [u8]>,
    /// Files the instance's test patch touches (see [`patch_files`]): plans whose runner can
    /// select files run only the tests in these when [`PlanContext::scope`] says so.
    pub test_files: &'a [String],
    /// Which tests the plan's test command runs.
    pub scope: TestScope,
    /// Timeout of one test (`[launch] case_timeout`), for runners that can stop one test and
    /// go on; zero: none.
    pub case_timeout: std::time::Duration,
}

/// Which tests a plan's test command runs (`[launch] test_scope`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TestScope {
    /// The whole suite, unless it is large (see each planner): then the touched files.
    #[default]
    Auto,
    /// The test files the test patch touches, where the runner can select files.
    Touched,
    /// The whole suite.
    All,
}

impl TestScope {
    /// The setting's value (`auto`, `touched`, `all`); anything else is `auto`.
    #[must_use]
    pub fn parse(value: &str) -> Self {
        match value {
            "touched" => Self::Touched,
            "all" => Self::All,
            _ => Self::Auto,
        }
    }
}

/// A deterministic build plan.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// Plan name recorded in the environment row (`python-pyproject`, ...).
    pub name: String,
    /// The language the row records (`python`, `javascript`, `typescript`, `rust`, `go`,
    /// `cpp`, `java`).
    pub language: &'static str,
    /// The base image to start from.
    pub image: ImageBuild,
    /// Why this image (and toolchain version) was chosen.
    pub version_reason: String,
    /// Setup steps, run in order from the repository root; all must succeed.
    pub setup: Vec<Step>,
    /// Steps to re-run after the source changes, before the tests.
    pub rebuild: Vec<Step>,
    /// The test command.
    pub test: TestCommand,
    /// Which tests the test command runs, for the environment row: `all`, or the files it
    /// selects and why (`touched: 2 of 812 test modules`).
    pub test_scope: String,
    /// When `test_scope` narrows the tests: the command that runs the whole suite, for
    /// validation's sampled whole-suite check (the environment row's `whole_test_command`).
    pub whole_test: Option<TestCommand>,
    /// The command that lists the tests of the files given after it, one id per line as
    /// `parser` names them (`pytest --collect-only -q`), when the runner has one: validation
    /// counts the tests the test patch's files define with it (the environment row's
    /// `collect_command`).
    pub collect: Option<TestCommand>,
    /// The kiln-testlog parser that reads the test command's output.
    pub parser: &'static str,
    /// How dependency versions are fixed: the lockfile that pins them, the cut-off applied, or
    /// why none could be (`Cargo.lock pins every crate`, `npm install --before ...`).
    pub resolution: String,
    /// The dependency cut-off the commands actually apply, when they apply one; `None` when a
    /// lockfile pins the versions or the ecosystem offers no way to resolve as of a date.
    pub cutoff: Option<String>,
    /// What the repair rules may use about this plan.
    pub repair: RepairContext,
}

/// What a plan offers its repair rules besides the failure.
#[derive(Debug, Clone, Default)]
pub struct RepairContext {
    /// The Debian suite of the plan's image.
    pub suite: Option<Suite>,
    /// `[build-system] requires` of a Python project.
    pub build_requires: Vec<String>,
    /// A Python plan's install into its venv (cut-off included, nothing to install yet), for
    /// repairs that install something more.
    pub pip: Option<PipInstall>,
    /// The Node major of a Node plan's image (0 otherwise).
    pub node_major: u32,
    /// Setup steps the test command may not need (a package's own build script): when one
    /// fails and no other rule repairs it, the launch goes on without it and the baseline run
    /// decides.
    pub optional: Vec<Step>,
    /// The packages and features of a Cargo plan's commands, for repairs that widen them.
    pub cargo: Option<CargoScope>,
}

/// What a Cargo plan's compile step and test command select.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CargoScope {
    /// The `-p` specs of the packages the test patch touches; empty for the whole workspace.
    pub packages: Vec<String>,
    /// The features the commands turn on (`pkg/feature` or bare names).
    pub features: Vec<String>,
    /// `--all-features`.
    pub all_features: bool,
    /// The features the project's CI gives its `cargo test` commands, a candidate for a compile
    /// step that fails.
    pub ci_features: Option<crate::ci::CargoFeatures>,
}

/// The body of one `[section]` of an INI file, `None` when the section is absent.
pub(crate) fn ini_section(text: &str, section: &str) -> Option<String> {
    let mut inside = false;
    let mut found = false;
    let mut body = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') && trimmed.ends_with(']') {
            inside = trimmed == format!("[{section}]");
            found |= inside;
            continue;
        }
        if inside {
            body.push_str(line);
            body.push('\n');
        }
    }
    found.then_some(body)
}

/// A multi-line INI value (`key =` then indented lines), one entry per line.
pub(crate) fn ini_list(section: &str, key: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in section.lines() {
        if !line.starts_with(char::is_whitespace) {
            inside = false;
            if let Some((k, v)) = line.split_once('=')
                && k.trim() == key
            {
                inside = true;
                out.extend(Some(v.trim().to_string()).filter(|v| !v.is_empty()));
            }
        } else if inside {
            let entry = line.trim();
            if !entry.is_empty() && !entry.starts_with('#') {
                out.push(entry.to_string());
            }
        }
    }
    out
}

/// The contents of `name` under `root`, when it is a readable text file.
pub(crate) fn read(root: &Path, name: &str) -> Option<String> {
    std::fs::read_to_string(root.join(name)).ok()
}

/// Paths a unified diff leaves in the tree (the `b/` side of each `diff --git` header; files
/// it deletes are left out), in order, without duplicates.
#[must_use]
pub fn patch_files(patch: &str) -> Vec<String> {
    let mut files: Vec<String> = Vec::new();
    for path in kiln_core::diff::changed_files(patch)
        .into_iter()
        .filter_map(|f| f.new)
    {
        if !files.contains(&path) {
            files.push(path);
        }
    }
    files
}

/// `fnmatch` for file names: `*` any run of characters, `?` one character, the rest literal.
pub(crate) fn glob_match(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ni));
                pi += 1;
            }
            Some(&c) if c == '?' || c == n[ni] => {
                pi += 1;
                ni += 1;
            }
            _ => match star {
                Some((sp, sn)) => {
                    pi = sp + 1;
                    ni = sn + 1;
                    star = Some((sp, sn + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// The date part (`YYYY-MM-DD`) of an RFC 3339 cut-off.
pub(crate) fn cutoff_day(cutoff: &str) -> &str {
    cutoff.get(..10).unwrap_or(cutoff)
}

#[cfg(test)]
mod tests {
    #[test]
    fn globs_match_like_fnmatch() {
        assert!(super::glob_match("test_*.py", "test_x.py"));
        assert!(super::glob_match("*_test.py", "a_b_test.py"));
        assert!(super::glob_match("test?.py", "test1.py"));
        assert!(!super::glob_match("test_*.py", "xtest_x.py"));
        assert!(!super::glob_match("*_test.py", "test.py"));
        assert!(super::glob_match("*", "anything"));
    }

    #[test]
    fn patch_files_reads_the_git_headers() {
        let patch = "diff --git a/tests/a/test_x.py b/tests/a/test_x.py\n--- a/tests/a/test_x.py\n+++ b/tests/a/test_x.py\n@@ -1 +1 @@\n-x\n+y\ndiff --git a/old.py b/new.py\nrename from old.py\ndiff --git a/tests/a/test_x.py b/tests/a/test_x.py\ndiff --git a/tests/test_gone.py b/tests/test_gone.py\ndeleted file mode 100644\n";
        assert_eq!(super::patch_files(patch), ["tests/a/test_x.py", "new.py"]);
        assert!(super::patch_files("").is_empty());
    }
}

#[cfg(test)]
pub(crate) mod testutil {
    //! Temporary project trees for the planners' unit tests.

    pub(crate) use crate::testutil::tree;

    /// The plan of `planner` for a tree of `files`.
    pub(crate) fn plan_of(
        planner: fn(&super::PlanContext<'_>) -> Option<super::Plan>,
        files: &[(&str, &str)],
        cutoff: Option<&str>,
    ) -> Option<super::Plan> {
        let tmp = tree(files);
        planner(&super::PlanContext {
            root: tmp.path(),
            cutoff,
            ca_bundle: None,
            test_files: &[],
            scope: super::TestScope::Auto,
            case_timeout: std::time::Duration::from_secs(300),
        })
    }
}
