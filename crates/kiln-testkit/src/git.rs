//! A deterministic `git` runner: fixed identity, fixed dates, no user or system configuration.

use std::path::Path;
use std::process::Command;

use crate::error::TestkitError;

/// Name and e-mail of every fixture commit; part of what makes the shas stable.
const AUTHOR_NAME: &str = "Kiln Demo";
const AUTHOR_EMAIL: &str = "demo@kiln.invalid";

/// Runs `git <args>` in `repo`, with `date` as author and committer date when given, and returns
/// its standard output.
pub(crate) fn git(repo: &Path, args: &[&str], date: Option<&str>) -> Result<String, TestkitError> {
    let mut cmd = Command::new("git");
    cmd.current_dir(repo)
        // The user's and the system's configuration (signing, hooks path, default branch, diff
        // prefixes, autocrlf, ...) would change the shas or the diffs.
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", AUTHOR_NAME)
        .env("GIT_AUTHOR_EMAIL", AUTHOR_EMAIL)
        .env("GIT_COMMITTER_NAME", AUTHOR_NAME)
        .env("GIT_COMMITTER_EMAIL", AUTHOR_EMAIL)
        .env("GIT_LITERAL_PATHSPECS", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("LC_ALL", "C");
    // Set when running inside a git hook or a worktree of kiln itself; they would redirect
    // every command to the wrong repository.
    for var in [
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_OBJECT_DIRECTORY",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_CEILING_DIRECTORIES",
        "GIT_AUTHOR_DATE",
        "GIT_COMMITTER_DATE",
    ] {
        cmd.env_remove(var);
    }
    if let Some(date) = date {
        cmd.env("GIT_AUTHOR_DATE", date)
            .env("GIT_COMMITTER_DATE", date);
    }
    cmd.args([
        "-c",
        "init.defaultBranch=main",
        "-c",
        "commit.gpgsign=false",
        "-c",
        "core.autocrlf=false",
        "-c",
        "core.fileMode=true",
    ]);
    cmd.args(args);
    let output = cmd
        .output()
        .map_err(|source| TestkitError::GitSpawn { source })?;
    if !output.status.success() {
        return Err(TestkitError::Git {
            args: args.join(" "),
            repo: repo.to_path_buf(),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}
