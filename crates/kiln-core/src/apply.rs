//! Applying one patch: `git apply`, then `git apply --3way`, then `patch --fuzz`, with the tree
//! restored between tries. Validation runs the chain in its containers; the host runs the same
//! chain in a scratch checkout to learn what a patch changes (`kiln_git::scratch`).
//!
//! Each patch is applied by a command of its own, and the method that applied it is that
//! command's exit code as the engine reports it, never a line of output: the code under test
//! runs in the same container (rebuild commands, git filters a repository may configure), and
//! whatever it prints cannot say how a patch applied. The patch file is removed by the same
//! command, so nothing that runs later finds out which patches a run applied from kiln's files.

/// The method that applied a patch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// `git apply`: exact context.
    GitApply,
    /// `git apply --3way`: merged against the blobs the patch names.
    ThreeWay,
    /// `patch --fuzz=5`: context found at an offset or with fuzz.
    Fuzz,
}

impl Method {
    /// Name recorded in the run summary.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::GitApply => "git-apply",
            Self::ThreeWay => "git-apply-3way",
            Self::Fuzz => "patch-fuzz",
        }
    }

    /// Exit code of [`apply_script`] when this method applied the patch.
    #[must_use]
    pub fn exit_code(self) -> i64 {
        match self {
            Self::GitApply => 0,
            Self::ThreeWay => 3,
            Self::Fuzz => 4,
        }
    }
}

/// How an [`apply_script`] command ended, read from its exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The patch applied with this method.
    With(Method),
    /// No method applied it.
    Failed,
    /// The command did not finish (killed by its timeout, or the shell died): the exit code.
    Unfinished(i64),
}

impl Applied {
    /// Reads an exit code of [`apply_script`].
    #[must_use]
    pub fn from_exit_code(code: i64) -> Self {
        match [Method::GitApply, Method::ThreeWay, Method::Fuzz]
            .into_iter()
            .find(|m| m.exit_code() == code)
        {
            Some(method) => Self::With(method),
            None if code == FAILED => Self::Failed,
            None => Self::Unfinished(code),
        }
    }
}

/// Exit code of [`apply_script`] when no method applies the patch.
const FAILED: i64 = 1;

/// Where patches are put inside the container, each only until its command has applied it.
pub const PATCH_DIR: &str = "/tmp/kiln";

/// The shell function that applies one patch with the fallback chain; its exit code names the
/// method ([`Method::exit_code`]), 1 when none applies.
///
/// `git apply` and `patch` (after its dry run) are all-or-nothing, so only a failed `--3way`,
/// which can leave conflict markers, needs the tree restored: to the state before the patch,
/// saved with `git stash create` (which leaves the working tree alone). What git and patch
/// print goes to the run's log for people; kiln reads nothing of it.
const APPLY_FUNCTION: &str = r#"kiln_apply() {
  local file=$1 snap
  if git apply --verbose --binary "$file"; then return 0; fi
  snap=$(git add -A >/dev/null 2>&1; git stash create); git reset -q
  if git apply --verbose --binary --3way "$file"; then git reset -q; return 3; fi
  git reset -q --hard HEAD && git clean -fdq
  if [ -n "$snap" ]; then git stash apply --index -q "$snap"; git reset -q; fi
  if patch --batch --forward --no-backup-if-mismatch --fuzz=5 -p1 --dry-run -i "$file" >/dev/null && patch --batch --forward --no-backup-if-mismatch --fuzz=5 -p1 -i "$file"; then
    return 4
  fi
  return 1
}"#;

/// The shell function `kiln_apply FILE` that applies a patch file in the current directory's
/// work tree with the chain; its exit code is [`Method::exit_code`], or 1 when nothing applies.
#[must_use]
pub fn function() -> &'static str {
    APPLY_FUNCTION
}

/// The exit codes of [`function`] that mean the patch applied.
#[must_use]
pub fn applied_codes() -> Vec<i32> {
    [Method::GitApply, Method::ThreeWay, Method::Fuzz]
        .iter()
        .filter_map(|m| i32::try_from(m.exit_code()).ok())
        .collect()
}

/// The file a patch named `name` is copied to before its command runs.
#[must_use]
pub fn patch_path(name: &str) -> String {
    format!("{PATCH_DIR}/{name}.patch")
}

/// The command that applies the patch at [`patch_path`]`(name)` and removes it, whatever the
/// outcome; its exit code says how the patch applied ([`Applied::from_exit_code`]).
#[must_use]
pub fn apply_script(name: &str) -> String {
    let file = patch_path(name);
    format!("{APPLY_FUNCTION}\nkiln_apply {file}\nrc=$?\nrm -rf {PATCH_DIR}\nexit $rc\n")
}

/// The patches of a run that have something to apply: `(name, text)`, empty ones skipped.
#[must_use]
pub fn non_empty<'a>(patches: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    patches
        .iter()
        .filter(|(_, text)| !text.trim().is_empty())
        .copied()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_name_the_method_and_nothing_else_does() {
        for method in [Method::GitApply, Method::ThreeWay, Method::Fuzz] {
            assert_eq!(
                Applied::from_exit_code(method.exit_code()),
                Applied::With(method)
            );
        }
        assert_eq!(Applied::from_exit_code(1), Applied::Failed);
        assert_eq!(Applied::from_exit_code(137), Applied::Unfinished(137));
        assert_eq!(Applied::from_exit_code(2), Applied::Unfinished(2));
    }

    #[test]
    fn the_script_removes_the_patch_and_runs_in_bash() {
        let script = apply_script("gold");
        assert!(
            script.contains("kiln_apply /tmp/kiln/gold.patch"),
            "{script}"
        );
        assert!(script.contains("rm -rf /tmp/kiln"), "{script}");
        let status = std::process::Command::new("bash")
            .args(["-n", "-c", &script])
            .status();
        assert!(status.is_ok_and(|s| s.success()), "{script}");
        assert_eq!(
            non_empty(&[("test", "x"), ("gold", " \n"), ("model", "y")]),
            vec![("test", "x"), ("model", "y")]
        );
    }

    /// The apply chain on a real repository: exact, 3-way and fuzzy patches, and one that
    /// applies nowhere, each read from the exit code alone.
    #[test]
    fn each_method_is_read_from_the_exit_code() {
        let tmp = tempfile::tempdir().unwrap();
        let sh = |script: &str| {
            std::process::Command::new("bash")
                .args(["-c", script])
                .current_dir(tmp.path())
                .env("GIT_AUTHOR_NAME", "k")
                .env("GIT_AUTHOR_EMAIL", "k@k")
                .env("GIT_COMMITTER_NAME", "k")
                .env("GIT_COMMITTER_EMAIL", "k@k")
                .output()
                .unwrap()
        };
        let setup = sh("git init -q . && seq 1 20 > a.txt && git add a.txt && git commit -qm a");
        assert!(setup.status.success(), "{setup:?}");
        let exact = "--- a/a.txt\n+++ b/a.txt\n@@ -9,3 +9,3 @@\n 9\n-10\n+ten\n 11\n";
        // The same change with a context line that no longer matches: only fuzz applies it.
        let fuzzy = "--- a/a.txt\n+++ b/a.txt\n@@ -9,3 +9,3 @@\n nine\n-10\n+ten\n 11\n";
        let nowhere = "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n x\n-y\n+z\n w\n";
        for (patch, expected) in [
            (exact, Applied::With(Method::GitApply)),
            (fuzzy, Applied::With(Method::Fuzz)),
            (nowhere, Applied::Failed),
        ] {
            let _ = sh("git checkout -q -- . && git clean -fdq");
            std::fs::create_dir_all(tmp.path().join("k")).unwrap();
            std::fs::write(tmp.path().join("k/p.patch"), patch).unwrap();
            let script = apply_script("p").replace(PATCH_DIR, "k");
            let out = sh(&script);
            let code = i64::from(out.status.code().unwrap_or(-1));
            assert_eq!(Applied::from_exit_code(code), expected, "{patch}\n{out:?}");
            assert!(!tmp.path().join("k").exists(), "the patch file was left");
        }
    }
}
