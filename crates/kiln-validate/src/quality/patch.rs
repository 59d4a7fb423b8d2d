//! A unified diff read file by file and hunk by hunk, as the quality signals need it: which
//! lines a hunk adds, removes and keeps, and the function context git writes after its header.

/// One file of a diff.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PatchFile {
    /// The path after the diff (the `b/` side of its `diff --git` header; empty when the diff
    /// has no such header).
    pub(crate) path: String,
    /// Its hunks, in order.
    pub(crate) hunks: Vec<Hunk>,
}

/// One hunk of a file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Hunk {
    /// What git writes after the header's second `@@`: the line that opens the enclosing
    /// function or class, by git's function-name rules (trimmed; empty when none).
    pub(crate) context: String,
    /// Its lines in order, each without its marker (`+`, `-` or a space).
    pub(crate) lines: Vec<(Change, String)>,
}

/// What a hunk does to one of its lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    /// The line is new.
    Added,
    /// The line goes.
    Removed,
    /// The line is shown around the others, unchanged.
    Unchanged,
}

impl Hunk {
    /// Its lines of one kind, in order.
    pub(crate) fn of(&self, change: Change) -> impl Iterator<Item = &String> {
        self.lines
            .iter()
            .filter(move |(c, _)| *c == change)
            .map(|(_, line)| line)
    }
}

/// The files and hunks of `patch`. A hunk's lines are read by the counts in its header, so a
/// removed line that starts with `--` or an added one with `++` is not taken for a file header.
pub(crate) fn read_patch(patch: &str) -> Vec<PatchFile> {
    let mut files: Vec<PatchFile> = Vec::new();
    let mut lines = patch.lines();
    while let Some(line) = lines.next() {
        if let Some(rest) = line.strip_prefix("diff --git ") {
            let path = rest
                .rfind(" b/")
                .map(|i| rest[i + 3..].trim_matches('"').to_string())
                .unwrap_or_default();
            files.push(PatchFile {
                path,
                hunks: Vec::new(),
            });
            continue;
        }
        let Some((mut old_left, mut new_left, context)) = hunk_header(line) else {
            continue;
        };
        if files.is_empty() {
            files.push(PatchFile::default());
        }
        let mut hunk = Hunk {
            context,
            ..Hunk::default()
        };
        while old_left > 0 || new_left > 0 {
            let Some(body) = lines.next() else { break };
            // Some tools strip the space of an empty unchanged line.
            let marker = body.chars().next();
            let text = &body[marker.map_or(0, char::len_utf8)..];
            match marker {
                Some('+') => {
                    hunk.lines.push((Change::Added, text.to_string()));
                    new_left -= 1;
                }
                Some('-') => {
                    hunk.lines.push((Change::Removed, text.to_string()));
                    old_left -= 1;
                }
                Some(' ') | None => {
                    hunk.lines.push((Change::Unchanged, text.to_string()));
                    old_left = old_left.saturating_sub(1);
                    new_left = new_left.saturating_sub(1);
                }
                // `\ No newline at end of file`.
                Some('\\') => {}
                _ => break,
            }
        }
        if let Some(file) = files.last_mut() {
            file.hunks.push(hunk);
        }
    }
    files
}

/// The line counts and function context of a hunk header (`@@ -1,3 +1,4 @@ def f():`).
fn hunk_header(line: &str) -> Option<(usize, usize, String)> {
    let rest = line.strip_prefix("@@ -")?;
    let (ranges, context) = rest.split_once(" @@").unwrap_or((rest, ""));
    let (old, new) = ranges.split_once(" +")?;
    let count = |range: &str| -> Option<usize> {
        match range.split_once(',') {
            Some((_, count)) => count.parse().ok(),
            None => range.parse::<usize>().ok().map(|_| 1),
        }
    };
    Some((count(old)?, count(new)?, context.trim().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hunks_are_read_by_their_counts() {
        let patch = "diff --git a/src/x.py b/src/x.py\nindex 1..2 100644\n--- a/src/x.py\n+++ b/src/x.py\n\
                     @@ -1,3 +1,3 @@ def area(w, h):\n     w = int(w)\n--- not a header\n+++ not one either\n \n\
                     @@ -10 +10,2 @@\n-x\n+y\n+z\n\\ No newline at end of file\n\
                     diff --git a/b.rs b/b.rs\n--- /dev/null\n+++ b/b.rs\n@@ -0,0 +1 @@\n+fn b() {}\n";
        let files = read_patch(patch);
        assert_eq!(files.len(), 2);
        assert_eq!(files[0].path, "src/x.py");
        let first = &files[0].hunks[0];
        assert_eq!(first.context, "def area(w, h):");
        let line = |change, text: &str| (change, text.to_string());
        assert_eq!(
            first.lines,
            [
                line(Change::Unchanged, "    w = int(w)"),
                line(Change::Removed, "-- not a header"),
                line(Change::Added, "++ not one either"),
                line(Change::Unchanged, ""),
            ]
        );
        let second = &files[0].hunks[1];
        assert_eq!(second.context, "");
        assert_eq!(second.of(Change::Removed).count(), 1);
        assert_eq!(second.of(Change::Added).collect::<Vec<_>>(), ["y", "z"]);
        assert_eq!(files[1].path, "b.rs");
        assert_eq!(
            files[1].hunks[0].of(Change::Added).collect::<Vec<_>>(),
            ["fn b() {}"]
        );
    }
}
