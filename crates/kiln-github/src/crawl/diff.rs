//! A pull request's diff, computed locally from the repository mirror with libgit2 and split into
//! the gold `patch` and the `test_patch` by file.
//!
//! The diff is GitHub's pull request diff: from the merge base of the base commit and the head
//! to the head, with renames found (a renamed test file stays one `rename from`/`rename to`
//! entry) and binary files as `GIT binary patch` literals, so `git apply` recreates them. Each
//! file's patch goes whole to one side; nothing is cut with line regexes.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use git2::{Diff, DiffFindOptions, DiffOptions, Oid, Patch, Repository};

use kiln_core::paths::is_test_path;

/// One file of a pull request's diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    /// Path after the change (before it, for a deletion).
    pub path: String,
    /// Path before a rename.
    pub old_path: Option<String>,
    /// Whether the file went to the test patch.
    pub test: bool,
    /// Whether git treats it as binary.
    pub binary: bool,
}

/// A diff split into code and tests.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SplitDiff {
    /// Diff of the non-test files (the gold patch).
    pub patch: String,
    /// Diff of the test files.
    pub test_patch: String,
    /// Every file, in diff order.
    pub files: Vec<FileChange>,
}

/// Computes the pull request diff `merge-base(base, head)..head` in `repo` and splits it.
///
/// # Errors
/// When a commit is missing or libgit2 fails.
pub fn pull_request_diff(
    repo: &Repository,
    base: &str,
    head: &str,
    language: &str,
) -> Result<SplitDiff, git2::Error> {
    let base = Oid::from_str(base)?;
    let head = Oid::from_str(head)?;
    let merge_base = repo.merge_base(base, head)?;
    let old_tree = repo.find_commit(merge_base)?.tree()?;
    let new_tree = repo.find_commit(head)?.tree()?;
    let mut options = DiffOptions::new();
    options
        .show_binary(true)
        .context_lines(3)
        .indent_heuristic(true);
    let mut diff = repo.diff_tree_to_tree(Some(&old_tree), Some(&new_tree), Some(&mut options))?;
    diff.find_similar(Some(DiffFindOptions::new().renames(true).copies(false)))?;
    split(&diff, language)
}

/// Splits a diff text (`git diff` or a `.diff` download) into code and tests.
///
/// # Errors
/// When libgit2 cannot parse the text.
pub fn split_text(text: &[u8], language: &str) -> Result<SplitDiff, git2::Error> {
    let diff = Diff::from_buffer(text)?;
    split(&diff, language)
}

/// Splits a parsed diff into code and tests, file by file.
///
/// # Errors
/// When libgit2 cannot print a file's patch.
pub fn split(diff: &Diff<'_>, language: &str) -> Result<SplitDiff, git2::Error> {
    let mut out = SplitDiff::default();
    for index in 0..diff.deltas().len() {
        let Some(delta) = diff.get_delta(index) else {
            continue;
        };
        let new_path = delta.new_file().path().map(path_text);
        let old_path = delta.old_file().path().map(path_text);
        let path = new_path
            .clone()
            .or_else(|| old_path.clone())
            .unwrap_or_default();
        let renamed_from = old_path.filter(|old| Some(old) != new_path.as_ref());
        // A renamed file is a test if either name is: moving a test out of `tests/` is still
        // a change to the tests.
        let test = is_test_path(&path, language)
            || renamed_from
                .as_deref()
                .is_some_and(|old| is_test_path(old, language));
        // libgit2 learns whether a file is binary when it loads the content for the patch.
        let (text, binary) = match Patch::from_diff(diff, index)? {
            Some(mut patch) => {
                let binary = patch.delta().flags().is_binary();
                let buf = patch.to_buf()?;
                (String::from_utf8_lossy(&buf).into_owned(), binary)
            }
            None => (String::new(), delta.flags().is_binary()),
        };
        if test {
            out.test_patch.push_str(&text);
        } else {
            out.patch.push_str(&text);
        }
        out.files.push(FileChange {
            path,
            old_path: renamed_from,
            test,
            binary,
        });
    }
    Ok(out)
}

fn path_text(path: &Path) -> String {
    path.to_string_lossy().replace('\\', "/")
}

/// Whether `patch` applies to the tree of `base` in the repository at `git_dir`.
///
/// libgit2 decides first (in process, exact positions); when it refuses, `git apply --check`
/// decides, which also accepts hunks that moved by a few lines: that is the case when the base
/// commit is newer than the pull request's merge base, and validation applies patches with git
/// too.
#[must_use]
pub fn applies_at(repo: &Repository, git_dir: &Path, base: &str, patch: &str) -> bool {
    if patch.is_empty() {
        return true;
    }
    let by_libgit2 = (|| -> Result<(), git2::Error> {
        let diff = Diff::from_buffer(patch.as_bytes())?;
        let tree = repo.find_commit(Oid::from_str(base)?)?.tree()?;
        repo.apply_to_tree(&tree, &diff, None)?;
        Ok(())
    })();
    by_libgit2.is_ok() || applies_by_git_cli(git_dir, base, patch)
}

fn applies_by_git_cli(git_dir: &Path, base: &str, patch: &str) -> bool {
    let index = temp_index_path();
    let run = |args: &[&str], input: Option<&str>| -> bool {
        let mut command = Command::new("git");
        command
            .arg("--git-dir")
            .arg(git_dir)
            .args(args)
            .env("GIT_INDEX_FILE", &index)
            .stdin(if input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let Ok(mut child) = command.spawn() else {
            return false;
        };
        if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
            let _ = stdin.write_all(text.as_bytes());
        }
        child.wait().is_ok_and(|s| s.success())
    };
    let ok =
        run(&["read-tree", base], None) && run(&["apply", "--cached", "--check", "-"], Some(patch));
    let _ = std::fs::remove_file(&index);
    ok
}

/// A fresh temporary index file name (the mirror is bare: its index is not used).
fn temp_index_path() -> std::path::PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    std::env::temp_dir().join(format!(
        "kiln-index-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn git(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    fn write(dir: &Path, path: &str, bytes: &[u8]) {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap_or(dir)).unwrap();
        std::fs::write(path, bytes).unwrap();
    }

    #[test]
    fn a_pull_request_splits_into_code_and_tests_with_renames_and_binaries() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        git(dir, &["init", "-q", "-b", "main"]);
        let old_test = "def test_a():\n    assert True\n\n".repeat(8);
        write(dir, "src/calc.py", b"def add(a, b):\n    return a - b\n");
        write(dir, "tests/test_old.py", old_test.as_bytes());
        git(dir, &["add", "-A"]);
        git(dir, &["commit", "-qm", "base"]);
        let base = git(dir, &["rev-parse", "HEAD"]);
        git(dir, &["checkout", "-qb", "pr"]);
        write(dir, "src/calc.py", b"def add(a, b):\n    return a + b\n");
        std::fs::remove_file(dir.join("tests/test_old.py")).unwrap();
        write(
            dir,
            "tests/test_calc.py",
            format!("{old_test}# renamed\n").as_bytes(),
        );
        write(
            dir,
            "tests/data/golden.png",
            &[0x89, b'P', b'N', b'G', 0, 1, 2, 3, 0, 255],
        );
        write(dir, "docs/logo.bin", &[0, 0, 1, 2, 0, 9]);
        git(dir, &["add", "-A"]);
        git(dir, &["commit", "-qm", "fix"]);
        let head = git(dir, &["rev-parse", "HEAD"]);
        let repo = Repository::open(dir).unwrap();
        let split = pull_request_diff(&repo, &base, &head, "Python").unwrap();
        let files: Vec<(&str, Option<&str>, bool, bool)> = split
            .files
            .iter()
            .map(|f| (f.path.as_str(), f.old_path.as_deref(), f.test, f.binary))
            .collect();
        assert_eq!(
            files,
            vec![
                ("docs/logo.bin", None, false, true),
                ("src/calc.py", None, false, false),
                ("tests/data/golden.png", None, true, true),
                ("tests/test_calc.py", Some("tests/test_old.py"), true, false),
            ]
        );
        assert!(split.patch.contains("+    return a + b"), "{}", split.patch);
        assert!(split.patch.contains("GIT binary patch"), "{}", split.patch);
        assert!(
            split.test_patch.contains("rename from tests/test_old.py"),
            "{}",
            split.test_patch
        );
        assert!(split.test_patch.contains("GIT binary patch"));
        assert!(!split.test_patch.contains("src/calc.py"));
        // Both halves apply to the base with git, binaries and rename included, and the text
        // parses back into the same split.
        for patch in [&split.patch, &split.test_patch] {
            assert!(applies_at(&repo, &dir.join(".git"), &base, patch));
        }
        let again = split_text(
            format!("{}{}", split.patch, split.test_patch).as_bytes(),
            "Python",
        )
        .unwrap();
        assert_eq!(again.files, split.files);
        git(dir, &["checkout", "-q", &base]);
        let work = dir.join("..").join("apply-check");
        let _ = std::fs::remove_dir_all(&work);
        git(
            dir,
            &["worktree", "add", "-q", &work.to_string_lossy(), &base],
        );
        for patch in [&split.patch, &split.test_patch] {
            let mut child = Command::new("git")
                .arg("-C")
                .arg(&work)
                .args(["apply", "-"])
                .stdin(Stdio::piped())
                .spawn()
                .unwrap();
            if let Some(mut stdin) = child.stdin.take() {
                stdin.write_all(patch.as_bytes()).unwrap();
            }
            assert!(child.wait().is_ok_and(|s| s.success()));
        }
        assert_eq!(
            std::fs::read(work.join("tests/data/golden.png")).ok(),
            Some(vec![0x89, b'P', b'N', b'G', 0, 1, 2, 3, 0, 255])
        );
        assert!(
            work.join("tests/test_calc.py").is_file() && !work.join("tests/test_old.py").exists()
        );
        let _ = std::fs::remove_dir_all(&work);
    }

    #[test]
    fn a_patch_that_does_not_fit_the_base_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        git(dir, &["init", "-q", "-b", "main"]);
        write(dir, "a.txt", b"one\ntwo\nthree\n");
        git(dir, &["add", "-A"]);
        git(dir, &["commit", "-qm", "base"]);
        let base = git(dir, &["rev-parse", "HEAD"]);
        let repo = Repository::open(dir).unwrap();
        let wrong = "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n-zwei\n+2\n three\n";
        assert!(!applies_at(&repo, &dir.join(".git"), &base, wrong));
        // Shifted by two lines: libgit2 refuses, git applies with an offset.
        let shifted = "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -3,3 +3,3 @@\n one\n-two\n+2\n three\n";
        assert!(applies_at(&repo, &dir.join(".git"), &base, shifted));
    }
}
