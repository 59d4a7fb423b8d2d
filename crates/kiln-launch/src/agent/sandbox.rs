//! Snapshots and rollback of the agent's container.
//!
//! A snapshot is a `docker commit` of the container to one scratch tag; a rollback starts a
//! new container from it in place of the old one (same log, same environment variables). Only
//! commands that may change the container are snapshotted before and rolled back after a
//! failure, and a snapshot is only taken when something changed since the last one: reading
//! files and listing directories cost nothing, and ten failed installs in a row cost one
//! commit. See `agent.jsonl` in the launch's logs for each snapshot's and rollback's seconds.

use std::collections::BTreeMap;
use std::time::Instant;

use kiln_core::{ContainerSpec, Removals, RuntimeError, Session};

/// Commands that only read: their first word, when no output goes to a file.
const READ_ONLY: &[&str] = &[
    "ls",
    "cat",
    "head",
    "tail",
    "grep",
    "egrep",
    "fgrep",
    "rg",
    "pwd",
    "which",
    "whereis",
    "type",
    "env",
    "printenv",
    "echo",
    "wc",
    "file",
    "stat",
    "du",
    "df",
    "uname",
    "id",
    "whoami",
    "tree",
    "sort",
    "uniq",
    "cut",
    "nl",
    "diff",
    "cmp",
    "md5sum",
    "sha256sum",
    "readlink",
    "realpath",
    "basename",
    "dirname",
    "true",
    "test",
    "[",
];

/// Whether `command` can only read: every part of it (split at `;`, `&&`, `||`, `|`) starts with
/// a reading command (or `git` with a reading subcommand, `find` without actions, a tool's
/// `--version`), and nothing is redirected into a file.
#[must_use]
pub(crate) fn is_read_only(command: &str) -> bool {
    let cleaned = command
        .replace("2>&1", "")
        .replace(">/dev/null", "")
        .replace("> /dev/null", "");
    if cleaned.contains('>')
        || command.contains("$(")
        || command.contains('`')
        || command.contains('\n')
    {
        return false;
    }
    cleaned
        .split(['|', ';', '&'])
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .all(|part| {
            let words: Vec<&str> = part.split_whitespace().collect();
            match words.as_slice() {
                ["git", sub, ..] => matches!(
                    *sub,
                    "status"
                        | "log"
                        | "show"
                        | "diff"
                        | "ls-files"
                        | "rev-parse"
                        | "branch"
                        | "describe"
                        | "grep"
                ),
                ["find", rest @ ..] => !rest
                    .iter()
                    .any(|w| matches!(*w, "-delete" | "-exec" | "-execdir" | "-ok" | "-fprint")),
                ["sed", rest @ ..] => !rest.iter().any(|w| w.starts_with("-i")),
                [tool, "--version"] | [tool, "-V"] | [tool, "version"] => !tool.is_empty(),
                ["pip" | "pip3", "list" | "show" | "freeze", ..] => true,
                [
                    "python" | "python3",
                    "-m",
                    "pip",
                    "list" | "show" | "freeze",
                    ..,
                ] => true,
                ["dpkg", "-l" | "-L" | "-s" | "-S", ..] | ["apt-cache", ..] => true,
                [first, ..] => READ_ONLY.contains(first),
                [] => true,
            }
        })
}

/// The agent's container with its snapshot.
pub(crate) struct Sandbox {
    /// Tag of the snapshot image.
    tag: String,
    /// Labels of the snapshot image (the dataset's, so a killed run's are found).
    labels: BTreeMap<String, String>,
    /// The container spec rollbacks start from (its image replaced by the snapshot).
    spec: ContainerSpec,
    /// Whether a snapshot exists.
    taken: bool,
    /// Whether the container changed since the snapshot.
    pub(crate) dirty: bool,
    /// Steps kept since the snapshot (commands that changed the container and stayed).
    kept_since: usize,
    /// Snapshots taken and their seconds.
    pub(crate) snapshots: Vec<f64>,
    /// Rollbacks done and their seconds.
    pub(crate) rollbacks: Vec<f64>,
}

impl Sandbox {
    pub(crate) fn new(tag: String, labels: BTreeMap<String, String>, spec: ContainerSpec) -> Self {
        Self {
            tag,
            labels,
            spec,
            taken: false,
            dirty: true,
            kept_since: 0,
            snapshots: Vec::new(),
            rollbacks: Vec::new(),
        }
    }

    /// Takes a snapshot when the container changed since the last one; the seconds it took.
    pub(crate) async fn before_change(
        &mut self,
        session: &mut Session,
    ) -> Result<Option<f64>, RuntimeError> {
        if !self.dirty && self.taken {
            return Ok(None);
        }
        let started = Instant::now();
        session.commit(&self.tag, &self.labels).await?;
        let seconds = started.elapsed().as_secs_f64();
        self.snapshots.push(seconds);
        self.taken = true;
        self.dirty = false;
        self.kept_since = 0;
        Ok(Some(seconds))
    }

    /// Counts a step kept since the snapshot: it changed the container.
    pub(crate) fn kept(&mut self) {
        self.dirty = true;
        self.kept_since += 1;
    }

    /// How many steps a roll back to the snapshot undoes beyond the last command.
    pub(crate) fn dropped_since_snapshot(&self) -> usize {
        self.kept_since
    }

    /// Replaces the session's container with a new one from the snapshot; `None` when there
    /// is none. The old container is removed in the background.
    pub(crate) async fn roll_back(
        &mut self,
        session: &mut Session,
        removals: &Removals,
    ) -> Result<Option<f64>, RuntimeError> {
        if !self.taken {
            return Ok(None);
        }
        let started = Instant::now();
        let spec = ContainerSpec {
            image: self.tag.clone(),
            ..self.spec.clone()
        };
        let mut fresh = session.next(&spec).await?;
        std::mem::swap(session, &mut fresh);
        fresh.close_later(removals);
        session.note("# kiln agent: rolled back to the snapshot before the last command");
        let seconds = started.elapsed().as_secs_f64();
        self.rollbacks.push(seconds);
        self.dirty = false;
        self.kept_since = 0;
        Ok(Some(seconds))
    }

    /// Removes the snapshot image.
    pub(crate) async fn remove(&self, session: &Session) -> Result<(), RuntimeError> {
        if self.taken {
            session.runtime().remove_image(&self.tag).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::is_read_only;

    #[test]
    fn reading_commands_are_told_from_changing_ones() {
        for command in [
            "ls -la",
            "cat setup.py | head -50",
            "grep -rn UNITS src/ 2>&1 | head",
            "git log --oneline -3",
            "find . -name '*.cfg'",
            "python3 --version",
            "pip list",
            "sed -n 1,20p tox.ini",
            "dpkg -l | grep libyaml",
        ] {
            assert!(is_read_only(command), "{command}");
        }
        for command in [
            "pip install -e .",
            "apt-get install -y jq",
            "cat a > b",
            "echo x >> setup.cfg",
            "find . -name '*.pyc' -delete",
            "sed -i s/a/b/ f",
            "ls $(rm -rf /x)",
            "git checkout -- .",
            "python -m pytest -rA",
            "ls && make",
        ] {
            assert!(!is_read_only(command), "{command}");
        }
    }
}
