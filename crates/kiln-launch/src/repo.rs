//! Host-side git work: a mirror cache per repository, and a checkout at the base commit whose
//! history holds nothing newer than that commit.
//!
//! The git CLI does the work rather than libgit2: cloning from a local mirror is 8x faster
//! with it (measured: 0.59 s against 4.9 s for psf/requests), it speaks every transport without
//! linking OpenSSL, and fetching one commit by id into an empty repository (protocol v2) gives
//! exactly the history up to that commit, which is what history hygiene needs.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A git failure, with the command and its stderr.
#[derive(Debug, Clone, thiserror::Error)]
#[error("run `{command}`: {message}")]
pub struct GitError {
    /// The git command line.
    pub command: String,
    /// Its stderr, or why it could not start.
    pub message: String,
}

fn git(dir: Option<&Path>, args: &[&str]) -> Result<String, GitError> {
    let mut command = Command::new("git");
    if let Some(dir) = dir {
        command.arg("-C").arg(dir);
    }
    command.args(args);
    // Never prompt for credentials: a private or missing repository must fail, not hang.
    command.env("GIT_TERMINAL_PROMPT", "0");
    let line = format!("git {}", args.join(" "));
    let output = command.output().map_err(|e| GitError {
        command: line.clone(),
        message: e.to_string(),
    })?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
    } else {
        Err(GitError {
            command: line,
            message: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        })
    }
}

/// Path of the mirror of `repo` (`owner/name`) under `cache_dir`.
#[must_use]
pub fn mirror_path(cache_dir: &Path, repo: &str) -> PathBuf {
    cache_dir.join(format!("{}.git", repo.replace('/', "__")))
}

/// Makes sure the mirror of `repo` holds `commit`, cloning or fetching from `url` as needed.
///
/// # Errors
/// When the clone or fetch fails or the commit does not exist upstream.
pub fn ensure_mirror(
    cache_dir: &Path,
    repo: &str,
    url: &str,
    commit: &str,
) -> Result<PathBuf, GitError> {
    std::fs::create_dir_all(cache_dir).map_err(|e| GitError {
        command: format!("mkdir {}", cache_dir.display()),
        message: e.to_string(),
    })?;
    // The mirror is later read from other working directories (`git -C <checkout> fetch
    // <mirror>`), so a relative dataset root must not leak into its path.
    let cache_dir = &std::path::absolute(cache_dir).map_err(|e| GitError {
        command: format!("realpath {}", cache_dir.display()),
        message: e.to_string(),
    })?;
    let mirror = mirror_path(cache_dir, repo);
    let has_commit = |m: &Path| {
        git(
            Some(m),
            &["cat-file", "-e", &format!("{commit}^{{commit}}")],
        )
        .is_ok()
    };
    if mirror.join("HEAD").exists() {
        if !has_commit(&mirror) {
            git(
                Some(&mirror),
                &["fetch", "--quiet", "--prune", "origin", "+refs/*:refs/*"],
            )?;
        }
    } else {
        // Clone into a temporary name and rename, so a crash never leaves a half mirror behind.
        let partial = cache_dir.join(format!(
            ".partial-{}-{}",
            repo.replace('/', "__"),
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&partial);
        let partial_str = partial.to_string_lossy().to_string();
        git(None, &["clone", "--quiet", "--mirror", url, &partial_str])?;
        std::fs::rename(&partial, &mirror).map_err(|e| GitError {
            command: format!("rename {} {}", partial.display(), mirror.display()),
            message: e.to_string(),
        })?;
    }
    if !has_commit(&mirror) {
        return Err(GitError {
            command: format!("git cat-file -e {commit}"),
            message: format!("commit {commit} is not in {url}"),
        });
    }
    Ok(mirror)
}

/// Creates `dest` as a repository checked out at `commit` on branch `main`, holding only the
/// history reachable from `commit`: no later commit, no tag, no remote, no reflog.
///
/// When the mirror cannot send that history (a copy with objects missing from old commits),
/// the checkout holds the commit alone (`--depth 1`); the returned note says so.
///
/// # Errors
/// When a git step fails.
pub fn checkout_at(mirror: &Path, commit: &str, dest: &Path) -> Result<Option<String>, GitError> {
    let dest_str = dest.to_string_lossy().to_string();
    let mirror_str = mirror.to_string_lossy().to_string();
    git(
        None,
        &["init", "--quiet", "--initial-branch=main", &dest_str],
    )?;
    let mut note = None;
    if let Err(full) = git(
        Some(dest),
        &["fetch", "--quiet", "--no-tags", &mirror_str, commit],
    ) {
        git(
            Some(dest),
            &[
                "fetch",
                "--quiet",
                "--no-tags",
                "--depth",
                "1",
                &mirror_str,
                commit,
            ],
        )
        .map_err(|_| full.clone())?;
        note = Some(format!(
            "the history before {commit} could not be fetched ({}); the checkout holds that commit alone",
            full.message.lines().next().unwrap_or("")
        ));
    }
    git(Some(dest), &["reset", "--quiet", "--hard", commit])?;
    git(Some(dest), &["reflog", "expire", "--expire=now", "--all"])?;
    // FETCH_HEAD names the mirror path, which means nothing inside a container.
    let _ = std::fs::remove_file(dest.join(".git/FETCH_HEAD"));
    Ok(note)
}

/// Fetches the git submodules of the checkout at `dest` (recursively), resolving relative
/// submodule URLs against `clone_url` as a clone from there would. Without `.gitmodules` this
/// does nothing. Returns why the fetch failed, if it did: the planners then see the submodule
/// directories empty and let system packages stand in.
#[must_use]
pub fn init_submodules(dest: &Path, clone_url: &str) -> Option<String> {
    if !dest.join(".gitmodules").is_file() {
        return None;
    }
    let origin = format!("remote.origin.url={clone_url}");
    // `timeout` bounds a fetch from a host that accepts the connection and then stalls.
    let mut command = Command::new("timeout");
    command
        .args(["600", "git", "-C"])
        .arg(dest)
        .args([
            "-c",
            &origin,
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "update",
            "--init",
            "--recursive",
            "--quiet",
        ])
        .env("GIT_TERMINAL_PROMPT", "0");
    match command.output() {
        Ok(out) if out.status.success() => None,
        Ok(out) => Some(String::from_utf8_lossy(&out.stderr).trim().to_string()),
        Err(e) => Some(e.to_string()),
    }
}

/// Committer date of `commit` in RFC 3339.
///
/// # Errors
/// When git cannot read the commit.
pub fn commit_date(repo: &Path, commit: &str) -> Result<String, GitError> {
    git(Some(repo), &["show", "-s", "--format=%cI", commit])
}

/// Packs a directory as a tar archive whose entries sit under `prefix/`.
///
/// # Errors
/// When a file cannot be read.
pub fn tar_dir(dir: &Path, prefix: &str) -> std::io::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    builder.follow_symlinks(false);
    builder.append_dir_all(prefix, dir)?;
    builder.into_inner()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit(dir: &Path, file: &str, text: &str) -> String {
        std::fs::write(dir.join(file), text).unwrap_or_else(|e| panic!("{e}"));
        let ok = |args: &[&str]| git(Some(dir), args).unwrap_or_else(|e| panic!("{e}"));
        ok(&["add", "-A"]);
        ok(&[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "--quiet",
            "-m",
            text,
        ]);
        ok(&["rev-parse", "HEAD"])
    }

    #[test]
    fn checkout_holds_no_later_history() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let upstream = tmp.path().join("up");
        git(None, &["init", "--quiet", &upstream.to_string_lossy()])
            .unwrap_or_else(|e| panic!("{e}"));
        let base = commit(&upstream, "a.txt", "one");
        let fix = commit(&upstream, "a.txt", "two");
        git(Some(&upstream), &["tag", "v2"]).unwrap_or_else(|e| panic!("{e}"));

        let cache = tmp.path().join("cache");
        let mirror = ensure_mirror(&cache, "o/up", &upstream.to_string_lossy(), &base)
            .unwrap_or_else(|e| panic!("{e}"));
        let dest = tmp.path().join("work");
        assert_eq!(
            checkout_at(&mirror, &base, &dest).unwrap_or_else(|e| panic!("{e}")),
            None
        );

        assert_eq!(
            std::fs::read_to_string(dest.join("a.txt")).ok().as_deref(),
            Some("one")
        );
        assert!(
            git(Some(&dest), &["cat-file", "-e", &fix]).is_err(),
            "fix commit leaked"
        );
        assert_eq!(git(Some(&dest), &["tag"]).ok().as_deref(), Some(""));
        assert_eq!(git(Some(&dest), &["remote"]).ok().as_deref(), Some(""));
        let all = git(Some(&dest), &["rev-list", "--all"]).unwrap_or_default();
        assert_eq!(all.lines().collect::<Vec<_>>(), vec![base.as_str()]);
    }

    #[test]
    fn a_relative_cache_dir_gives_a_mirror_usable_from_elsewhere() {
        // Tests run in the crate directory; the cache is named relative to it, as a dataset
        // root of `datasets` in pipeline.toml is.
        let local = tempfile::Builder::new()
            .prefix(".kiln-repo-test-")
            .tempdir_in(".")
            .unwrap_or_else(|e| panic!("{e}"));
        let name = local
            .path()
            .file_name()
            .map(PathBuf::from)
            .unwrap_or_default();
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let upstream = tmp.path().join("up");
        git(None, &["init", "--quiet", &upstream.to_string_lossy()])
            .unwrap_or_else(|e| panic!("{e}"));
        let base = commit(&upstream, "a.txt", "one");
        let mirror = ensure_mirror(
            &name.join("cache"),
            "o/up",
            &upstream.to_string_lossy(),
            &base,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(mirror.is_absolute(), "{}", mirror.display());
        assert_eq!(
            checkout_at(&mirror, &base, &tmp.path().join("work")).unwrap_or_else(|e| panic!("{e}")),
            None
        );
    }

    #[test]
    fn submodules_are_fetched_from_relative_urls_or_reported() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ok =
            |dir: Option<&Path>, args: &[&str]| git(dir, args).unwrap_or_else(|e| panic!("{e}"));
        let lib = tmp.path().join("lib");
        ok(None, &["init", "--quiet", &lib.to_string_lossy()]);
        commit(&lib, "lib.h", "int f(void);");
        let up = tmp.path().join("up");
        ok(None, &["init", "--quiet", &up.to_string_lossy()]);
        commit(&up, "a.txt", "one");
        ok(
            Some(&up),
            &[
                "-c",
                "protocol.file.allow=always",
                "submodule",
                "add",
                "--quiet",
                "../lib",
                "third_party/lib",
            ],
        );
        let base = commit(&up, "b.txt", "with a submodule");

        let mirror = ensure_mirror(
            &tmp.path().join("cache"),
            "o/up",
            &up.to_string_lossy(),
            &base,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let dest = tmp.path().join("work");
        assert_eq!(
            checkout_at(&mirror, &base, &dest).unwrap_or_else(|e| panic!("{e}")),
            None
        );
        assert!(!dest.join("third_party/lib/lib.h").exists());
        assert_eq!(init_submodules(&dest, &up.to_string_lossy()), None);
        assert!(dest.join("third_party/lib/lib.h").is_file());

        let dest = tmp.path().join("work2");
        assert_eq!(
            checkout_at(&mirror, &base, &dest).unwrap_or_else(|e| panic!("{e}")),
            None
        );
        let missing = tmp.path().join("elsewhere/up");
        let error = init_submodules(&dest, &missing.to_string_lossy()).unwrap_or_default();
        assert!(!error.is_empty());
        assert!(!dest.join("third_party/lib/lib.h").exists());
        assert_eq!(init_submodules(&tmp.path().join("lib"), "x"), None);
    }

    #[test]
    fn a_mirror_missing_old_objects_gives_the_commit_alone() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let up = tmp.path().join("up");
        git(None, &["init", "--quiet", &up.to_string_lossy()]).unwrap_or_else(|e| panic!("{e}"));
        commit(&up, "old.txt", "old contents that go missing");
        let base = commit(&up, "a.txt", "base");
        // Remove the blob of the first commit's file from the object store: the base tree
        // no longer holds it, so the base is intact while its history is not.
        let blob = git(Some(&up), &["rev-parse", &format!("{base}~1:old.txt")])
            .unwrap_or_else(|e| panic!("{e}"));
        git(Some(&up), &["rm", "--quiet", "old.txt"]).unwrap_or_else(|e| panic!("{e}"));
        let base = commit(&up, "b.txt", "base without old.txt");
        let object = up.join(".git/objects").join(&blob[..2]).join(&blob[2..]);
        std::fs::remove_file(&object).unwrap_or_else(|e| panic!("{}: {e}", object.display()));

        let dest = tmp.path().join("work");
        let note = checkout_at(&up, &base, &dest).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            note.as_deref()
                .is_some_and(|n| n.contains("holds that commit alone")),
            "{note:?}"
        );
        assert!(dest.join("b.txt").is_file());
        let all = git(Some(&dest), &["rev-list", "--all"]).unwrap_or_default();
        assert_eq!(all, base);
    }

    #[test]
    fn missing_commit_is_a_clear_error() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let upstream = tmp.path().join("up");
        git(None, &["init", "--quiet", &upstream.to_string_lossy()])
            .unwrap_or_else(|e| panic!("{e}"));
        commit(&upstream, "a.txt", "one");
        let missing = "0123456789abcdef0123456789abcdef01234567";
        let error = ensure_mirror(
            &tmp.path().join("c"),
            "o/up",
            &upstream.to_string_lossy(),
            missing,
        )
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(error.contains("is not in"), "{error}");
    }
}
