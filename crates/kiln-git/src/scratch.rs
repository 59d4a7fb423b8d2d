//! Patches applied to a scratch checkout on the host, and what they did to the tree.
//!
//! What a patch changes is read from the trees git writes after applying it, never from the
//! patch's text: a section in plain unified format after a git section, a quoted header, a
//! rename or a mode change are all changes of the tree, whatever the headers say. The patches
//! are applied by the shell function the caller gives (validation's chain: `git apply`, then
//! `git apply --3way`, then `patch --fuzz`), in a checkout of its own whose objects are read
//! from the source repository (git alternates), so nothing is copied but the work tree.

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::GitError;

/// Git's mode of a symbolic link.
pub const MODE_SYMLINK: u32 = 0o120_000;
/// Git's mode of a submodule (a commit, not a file).
pub const MODE_GITLINK: u32 = 0o160_000;

/// One file of a tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeEntry {
    /// Git's mode (`0o100644`, `0o100755`, [`MODE_SYMLINK`], [`MODE_GITLINK`]).
    pub mode: u32,
    /// The object id (hex).
    pub oid: String,
    /// The path, `/`-separated.
    pub path: String,
}

/// One path that differs between two trees: what it was and what it is (`None`: absent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeDiff {
    /// The path.
    pub path: String,
    /// Mode and object id before.
    pub old: Option<(u32, String)>,
    /// Mode and object id after.
    pub new: Option<(u32, String)>,
}

/// How applying one patch ended: the exit code of the caller's apply function (which names
/// the method that applied it, or says that none did).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApplyExit(pub i32);

/// A scratch checkout with patches applied in turn: the tree before the first and after each.
#[derive(Debug)]
pub struct Patched {
    dir: tempfile::TempDir,
    /// The tree of the base commit.
    pub base: String,
    /// After each patch: its apply function's exit code and, when it applied (exit codes the
    /// caller named as applied), the tree it left.
    pub steps: Vec<(ApplyExit, Option<String>)>,
}

impl Patched {
    fn repo(&self) -> PathBuf {
        self.dir.path().join("repo")
    }

    /// The paths that differ between two trees of this checkout (renames as a deletion and an
    /// addition).
    ///
    /// # Errors
    /// When git fails.
    pub fn diff(&self, from: &str, to: &str) -> Result<Vec<TreeDiff>, GitError> {
        diff_trees(&self.repo(), from, to)
    }

    /// Every file of `tree`.
    ///
    /// # Errors
    /// When git fails.
    pub fn entries(&self, tree: &str) -> Result<Vec<TreeEntry>, GitError> {
        ls_tree(&self.repo(), tree)
    }

    /// The tree `tree` of this checkout as kiln-core's checks read it, with its documents.
    ///
    /// # Errors
    /// When git fails.
    pub fn tree(&self, tree: &str) -> Result<kiln_core::checkout::Tree, GitError> {
        checkout_tree(&self.repo(), tree)
    }

    /// The contents of the blobs `oids` (`None` for an id no blob has).
    ///
    /// # Errors
    /// When git fails.
    pub fn blobs(&self, oids: &[&str]) -> Result<BTreeMap<String, Vec<u8>>, GitError> {
        read_blobs(&self.repo(), oids)
    }
}

/// Checks `commit` out of `source` (a repository holding it, bare or not) into a scratch
/// directory and applies `patches` in order, each written to a file outside the work tree and
/// applied by `bash -c "<function>\nkiln_apply <file>"` in the work tree. An exit code in
/// `applied` means the patch applied: the tree is then written (every file, ignored ones
/// included); any other code stops there.
///
/// # Errors
/// When git fails or the scratch directory cannot be made.
pub fn apply_patches(
    source: &Path,
    commit: &str,
    patches: &[&str],
    function: &str,
    applied: &[i32],
) -> Result<Patched, GitError> {
    let io = |what: &str| {
        let what = what.to_string();
        move |e: std::io::Error| GitError {
            command: what.clone(),
            message: e.to_string(),
        }
    };
    let dir = tempfile::Builder::new()
        .prefix("kiln-scratch-")
        .tempdir()
        .map_err(io("create a scratch directory"))?;
    let repo = dir.path().join("repo");
    let objects = crate::git(
        Some(source),
        &[
            "rev-parse",
            "--path-format=absolute",
            "--git-path",
            "objects",
        ],
    )?;
    // By id: a name (`HEAD`, a branch) would be read in the new repository.
    let commit = crate::git(
        Some(source),
        &["rev-parse", "--verify", &format!("{commit}^{{commit}}")],
    )?;
    let commit = commit.as_str();
    let repo_str = repo.to_string_lossy().to_string();
    crate::git(None, &["init", "--quiet", &repo_str])?;
    let alternates = repo.join(".git/objects/info/alternates");
    std::fs::write(&alternates, format!("{objects}\n"))
        .map_err(io(&format!("write {}", alternates.display())))?;
    crate::git(
        Some(&repo),
        &[
            "-c",
            "advice.detachedHead=false",
            "checkout",
            "-q",
            "--detach",
            commit,
        ],
    )?;
    let base = crate::git(Some(&repo), &["rev-parse", &format!("{commit}^{{tree}}")])?;
    let mut steps = Vec::new();
    for (n, patch) in patches.iter().enumerate() {
        let file = dir.path().join(format!("patch-{n}.diff"));
        std::fs::write(&file, patch).map_err(io(&format!("write {}", file.display())))?;
        let script = format!("{function}\nkiln_apply {}\n", file.display());
        let status = Command::new("bash")
            .arg("-c")
            .arg(&script)
            .current_dir(&repo)
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_AUTHOR_NAME", "kiln")
            .env("GIT_AUTHOR_EMAIL", "kiln@localhost")
            .env("GIT_COMMITTER_NAME", "kiln")
            .env("GIT_COMMITTER_EMAIL", "kiln@localhost")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(io("run bash"))?;
        let code = ApplyExit(status.code().unwrap_or(-1));
        if !applied.contains(&code.0) {
            steps.push((code, None));
            break;
        }
        crate::git(Some(&repo), &["add", "-A", "-f", "."])?;
        let tree = crate::git(Some(&repo), &["write-tree"])?;
        steps.push((code, Some(tree)));
    }
    Ok(Patched { dir, base, steps })
}

/// The tree of `treeish` in `repo` as kiln-core's checks read it: every path with its mode and
/// blob id, and the contents of its documents (shared manifests and test configuration,
/// [`kiln_core::checkout::Tree::is_document`]).
///
/// # Errors
/// When git fails.
pub fn checkout_tree(repo: &Path, treeish: &str) -> Result<kiln_core::checkout::Tree, GitError> {
    let entries = ls_tree(repo, treeish)?;
    let documents: Vec<(&str, &str)> = entries
        .iter()
        .filter(|e| e.mode != MODE_GITLINK && kiln_core::checkout::Tree::is_document(&e.path))
        .map(|e| (e.path.as_str(), e.oid.as_str()))
        .collect();
    let oids: Vec<&str> = documents.iter().map(|(_, oid)| *oid).collect();
    let blobs = read_blobs(repo, &oids)?;
    let documents = documents
        .iter()
        .filter_map(|(path, oid)| blobs.get(*oid).map(|b| ((*path).to_string(), b.clone())))
        .collect();
    Ok(kiln_core::checkout::Tree::new(
        entries.into_iter().map(|e| (e.path, e.mode, e.oid)),
        documents,
    ))
}

/// Runs `git -C repo <args>` and returns its standard output as bytes.
fn git_bytes(repo: &Path, args: &[&str]) -> Result<Vec<u8>, GitError> {
    let output = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .map_err(|e| GitError {
            command: format!("git {}", args.join(" ")),
            message: e.to_string(),
        })?;
    if output.status.success() {
        Ok(output.stdout)
    } else {
        Err(GitError {
            command: format!("git {}", args.join(" ")),
            message: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        })
    }
}

fn mode(text: &str) -> u32 {
    u32::from_str_radix(text, 8).unwrap_or(0)
}

/// Every file of `treeish` in `repo`, recursively (`git ls-tree -r -z --full-tree`).
///
/// # Errors
/// When git fails.
pub fn ls_tree(repo: &Path, treeish: &str) -> Result<Vec<TreeEntry>, GitError> {
    let raw = git_bytes(repo, &["ls-tree", "-r", "-z", "--full-tree", treeish])?;
    let mut entries = Vec::new();
    for record in raw.split(|b| *b == 0).filter(|r| !r.is_empty()) {
        let record = String::from_utf8_lossy(record);
        // `<mode> SP <type> SP <object> TAB <path>`
        let Some((meta, path)) = record.split_once('\t') else {
            continue;
        };
        let parts: Vec<&str> = meta.split(' ').collect();
        if parts.len() < 3 {
            continue;
        }
        entries.push(TreeEntry {
            mode: mode(parts[0]),
            oid: parts[2].to_string(),
            path: path.to_string(),
        });
    }
    Ok(entries)
}

/// The paths that differ between trees `from` and `to` (`git diff-tree -r -z --no-renames`).
///
/// # Errors
/// When git fails.
pub fn diff_trees(repo: &Path, from: &str, to: &str) -> Result<Vec<TreeDiff>, GitError> {
    let raw = git_bytes(
        repo,
        &["diff-tree", "-r", "-z", "--no-renames", "--raw", from, to],
    )?;
    let mut fields = raw.split(|b| *b == 0).filter(|f| !f.is_empty());
    let mut diffs = Vec::new();
    let zeros = |oid: &str| oid.bytes().all(|b| b == b'0');
    while let Some(meta) = fields.next() {
        let Some(path) = fields.next() else {
            break;
        };
        let meta = String::from_utf8_lossy(meta);
        // `:<old mode> <new mode> <old id> <new id> <status>`
        let parts: Vec<&str> = meta.trim_start_matches(':').split(' ').collect();
        if parts.len() < 5 {
            continue;
        }
        let side = |m: &str, oid: &str| (!zeros(oid)).then(|| (mode(m), oid.to_string()));
        diffs.push(TreeDiff {
            path: String::from_utf8_lossy(path).into_owned(),
            old: side(parts[0], parts[2]),
            new: side(parts[1], parts[3]),
        });
    }
    Ok(diffs)
}

/// The contents of the blobs `oids` in `repo`, in one `git cat-file --batch`; an id that
/// names no blob is left out.
///
/// # Errors
/// When git fails.
pub fn read_blobs(repo: &Path, oids: &[&str]) -> Result<BTreeMap<String, Vec<u8>>, GitError> {
    let fail = |message: String| GitError {
        command: "git cat-file --batch".into(),
        message,
    };
    let mut child = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["cat-file", "--batch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| fail(e.to_string()))?;
    let mut stdin = child.stdin.take().ok_or_else(|| fail("no stdin".into()))?;
    let input: String = oids.iter().map(|oid| format!("{oid}\n")).collect();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| fail("no stdout".into()))?;
    let mut reader = BufReader::new(stdout);
    let mut blobs = BTreeMap::new();
    for _ in oids {
        let mut header = String::new();
        if reader
            .read_line(&mut header)
            .map_err(|e| fail(e.to_string()))?
            == 0
        {
            break;
        }
        // `<oid> <type> <size>` or `<oid> missing`.
        let parts: Vec<&str> = header.split_whitespace().collect();
        let [oid, kind, size] = parts.as_slice() else {
            continue;
        };
        let size: usize = size
            .parse()
            .map_err(|_| fail(format!("bad header {header}")))?;
        let mut content = vec![0; size];
        reader
            .read_exact(&mut content)
            .map_err(|e| fail(e.to_string()))?;
        let mut newline = [0u8; 1];
        reader
            .read_exact(&mut newline)
            .map_err(|e| fail(e.to_string()))?;
        if *kind == "blob" {
            blobs.insert((*oid).to_string(), content);
        }
    }
    drop(reader);
    let _ = writer.join();
    let _ = child.wait();
    Ok(blobs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A function that applies with `git apply` alone (exit 0) or fails (1).
    const GIT_APPLY: &str = "kiln_apply() { git apply --binary \"$1\" && return 0; return 1; }";

    fn repo_with(files: &[(&str, &str)]) -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        crate::git(Some(dir), &["init", "-q", "."]).unwrap();
        for (path, content) in files {
            let file = dir.join(path);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(file, content).unwrap();
        }
        crate::git(Some(dir), &["add", "-A"]).unwrap();
        crate::git(
            Some(dir),
            &[
                "-c",
                "user.name=k",
                "-c",
                "user.email=k@k",
                "commit",
                "-qm",
                "base",
            ],
        )
        .unwrap();
        tmp
    }

    #[test]
    fn the_trees_say_what_every_section_changed_whatever_its_headers() {
        let tmp = repo_with(&[("src/x.py", "x = 1\n"), ("README", "r\n")]);
        // A git section, then a plain unified section that adds a conftest.py, then a quoted
        // header: git applies all three.
        let patch = "diff --git a/src/x.py b/src/x.py\n--- a/src/x.py\n+++ b/src/x.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n\
             --- /dev/null\n+++ b/tests/conftest.py\n@@ -0,0 +1 @@\n+import forcepass\n\
             diff --git \"a/conf test.py\" \"b/conf test.py\"\nnew file mode 100644\n--- /dev/null\n+++ \"b/conf test.py\"\n@@ -0,0 +1 @@\n+y = 1\n";
        let patched = apply_patches(tmp.path(), "HEAD", &[patch], GIT_APPLY, &[0]).unwrap();
        let (exit, tree) = &patched.steps[0];
        assert_eq!(*exit, ApplyExit(0));
        let diffs = patched.diff(&patched.base, tree.as_ref().unwrap()).unwrap();
        let paths: Vec<&str> = diffs.iter().map(|d| d.path.as_str()).collect();
        assert_eq!(paths, ["conf test.py", "src/x.py", "tests/conftest.py"]);
        let added = diffs
            .iter()
            .find(|d| d.path == "tests/conftest.py")
            .unwrap();
        assert_eq!(added.old, None);
        let (_, oid) = added.new.clone().unwrap();
        let blobs = patched.blobs(&[&oid]).unwrap();
        assert_eq!(blobs[&oid], b"import forcepass\n");
        // A patch that does not apply stops the sequence.
        let bad = "--- a/nowhere\n+++ b/nowhere\n@@ -1 +1 @@\n-a\n+b\n";
        let patched = apply_patches(tmp.path(), "HEAD", &[bad, patch], GIT_APPLY, &[0]).unwrap();
        assert_eq!(patched.steps, vec![(ApplyExit(1), None)]);
        let entries = patched.entries(&patched.base).unwrap();
        assert_eq!(entries.len(), 2);
        assert!(entries.iter().all(|e| e.mode == 0o100_644));
    }
}
