//! The files a unified diff (git's format) changes, read from its `diff --git` headers, for the
//! stage crates that need them (launch: the test files a test patch touches; validate: the files
//! the SWE-bench harness's eval script resets).

/// One file of a diff: its path before (`None`: the diff creates it) and after (`None`: the diff
/// deletes it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangedFile {
    /// Path at the base (the `a/` side), unless the file is new.
    pub old: Option<String>,
    /// Path after the diff (the `b/` side), unless the file is deleted.
    pub new: Option<String>,
}

/// The files `patch` changes, in order of their headers.
#[must_use]
pub fn changed_files(patch: &str) -> Vec<ChangedFile> {
    let mut files: Vec<ChangedFile> = Vec::new();
    for line in patch.lines() {
        if let Some(rest) = line.strip_prefix("diff --git ") {
            // `a/<path> b/<path>`: equal unless renamed; the new name is after the last " b/".
            if let Some(index) = rest.rfind(" b/") {
                let side = |s: &str, prefix: &str| {
                    s.trim_matches('"').strip_prefix(prefix).map(str::to_string)
                };
                files.push(ChangedFile {
                    old: side(&rest[..index], "a/"),
                    new: Some(rest[index + 3..].trim_matches('"').to_string()),
                });
            }
        } else if let Some(file) = files.last_mut() {
            if line.starts_with("new file mode") {
                file.old = None;
            } else if line.starts_with("deleted file mode") {
                file.new = None;
            }
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_give_old_and_new_paths() {
        let patch = "diff --git a/t/x.py b/t/x.py\n--- a/t/x.py\n+++ b/t/x.py\n@@ -1 +1 @@\n-x\n+y\n\
                     diff --git a/old.py b/new.py\nrename from old.py\n\
                     diff --git a/t/new.py b/t/new.py\nnew file mode 100644\n--- /dev/null\n\
                     diff --git a/t/gone.py b/t/gone.py\ndeleted file mode 100644\n";
        let file = |old: Option<&str>, new: Option<&str>| ChangedFile {
            old: old.map(str::to_string),
            new: new.map(str::to_string),
        };
        assert_eq!(
            changed_files(patch),
            [
                file(Some("t/x.py"), Some("t/x.py")),
                file(Some("old.py"), Some("new.py")),
                file(None, Some("t/new.py")),
                file(Some("t/gone.py"), None),
            ]
        );
        assert!(changed_files("").is_empty());
    }
}
