//! The scripted answers: what an exec answers ([`Answer`]), which commands a [`Script`]
//! answers (a pattern, optionally only its Nth match, one image's containers, or after another
//! command), and the choice of the script that answers a command.

use std::time::Duration;

use kiln_core::RuntimeError;
use regex::Regex;

use super::calls::clone_error;
use super::container::Container;
use super::files::{FileEffect, normalize};

/// How a script recognises the commands it answers.
#[derive(Debug, Clone)]
pub enum Pattern {
    /// The command's script contains this text.
    Contains(String),
    /// The regular expression matches somewhere in the command's script.
    Regex(Regex),
}

impl Pattern {
    /// Whether `script` matches.
    #[must_use]
    pub fn matches(&self, script: &str) -> bool {
        match self {
            Self::Contains(text) => script.contains(text.as_str()),
            Self::Regex(regex) => regex.is_match(script),
        }
    }
}

/// How a scripted command ends besides its exit code.
#[derive(Debug)]
pub(super) enum End {
    /// The command finished (or was killed) and the container still runs.
    Finished,
    /// The command stopped its container (exit code of the container).
    StopsContainer(i64),
    /// The engine fails the exec.
    Fails(RuntimeError),
}

/// What an exec answers: an outcome, a container stopped under the command, or an engine error.
#[derive(Debug)]
pub struct Answer {
    /// The exit code the outcome reports.
    pub(super) exit_code: i64,
    /// The command's combined output.
    pub(super) output: String,
    /// Killed by its timeout.
    pub(super) timed_out: bool,
    /// Killed by the OOM killer.
    pub(super) oom_killed: bool,
    /// How long the command took.
    pub(super) duration: Duration,
    /// How the command ends besides its exit code.
    pub(super) end: End,
    /// What the command does to the container's files, in order.
    pub(super) effects: Vec<FileEffect>,
}

impl Clone for Answer {
    fn clone(&self) -> Self {
        Self {
            exit_code: self.exit_code,
            output: self.output.clone(),
            timed_out: self.timed_out,
            oom_killed: self.oom_killed,
            duration: self.duration,
            end: match &self.end {
                End::Finished => End::Finished,
                End::StopsContainer(code) => End::StopsContainer(*code),
                End::Fails(error) => End::Fails(clone_error(error)),
            },
            effects: self.effects.clone(),
        }
    }
}

impl Default for Answer {
    fn default() -> Self {
        Self::ok()
    }
}

impl Answer {
    /// Exit 0 with no output.
    #[must_use]
    pub fn ok() -> Self {
        Self::exit(0)
    }

    /// Exit `code` with no output.
    #[must_use]
    pub fn exit(code: i64) -> Self {
        Self {
            exit_code: code,
            output: String::new(),
            timed_out: false,
            oom_killed: false,
            duration: Duration::from_millis(10),
            end: End::Finished,
            effects: Vec::new(),
        }
    }

    /// Killed by its timeout: exit 137, `timed_out`, and a duration of the exec's timeout.
    #[must_use]
    pub fn timed_out() -> Self {
        Self {
            timed_out: true,
            ..Self::exit(137)
        }
    }

    /// Killed by the OOM killer: exit 137 and `oom_killed`.
    #[must_use]
    pub fn oom_killed() -> Self {
        Self {
            oom_killed: true,
            ..Self::exit(137)
        }
    }

    /// The command stops its container, which exits with `exit_code`: the exec returns
    /// [`RuntimeError::ContainerStopped`], and so does every later exec in that container.
    #[must_use]
    pub fn stops_container(exit_code: i64) -> Self {
        Self {
            end: End::StopsContainer(exit_code),
            ..Self::exit(exit_code)
        }
    }

    /// The engine fails the exec with `error`.
    #[must_use]
    pub fn engine_error(error: RuntimeError) -> Self {
        Self {
            end: End::Fails(error),
            ..Self::exit(-1)
        }
    }

    /// A pytest run (`-rA -v`, as kiln's Python plans run it) with these results: node ids
    /// and pytest's status words (`PASSED`, `FAILED`, `ERROR`, `SKIPPED`), each on its `-v`
    /// line and in the short test summary, then the totals line. The exit code is pytest's: 1
    /// when a test failed or erred, 5 when there were no tests, 0 otherwise.
    #[must_use]
    pub fn pytest(results: &[(&str, &str)]) -> Self {
        let mut out = String::from(
            "============================= test session starts ==============================\n",
        );
        out.push_str(&format!("collected {} items\n\n", results.len()));
        for (id, status) in results {
            out.push_str(&format!("{id} {status}\n"));
        }
        out.push_str(
            "\n=========================== short test summary info ============================\n",
        );
        for (id, status) in results {
            out.push_str(&format!("{status} {id}\n"));
        }
        let count = |status: &str| results.iter().filter(|(_, s)| *s == status).count();
        let totals: Vec<String> = [
            ("FAILED", "failed", "failed"),
            ("PASSED", "passed", "passed"),
            ("SKIPPED", "skipped", "skipped"),
            ("ERROR", "error", "errors"),
        ]
        .iter()
        .filter(|(status, ..)| count(status) > 0)
        .map(|(status, one, many)| {
            let n = count(status);
            format!("{n} {}", if n == 1 { one } else { many })
        })
        .collect();
        let exit_code = if results.is_empty() {
            out.push_str("============================ no tests ran in 0.01s =============================\n");
            5
        } else {
            out.push_str(&format!(
                "========== {} in 0.05s ==========\n",
                totals.join(", ")
            ));
            i64::from(count("FAILED") + count("ERROR") > 0)
        };
        Self::exit(exit_code).output(out)
    }

    /// The same answer with `output` as the command's combined output (streamed to the sink,
    /// and capped in the outcome as the exec asks).
    #[must_use]
    pub fn output(mut self, output: impl Into<String>) -> Self {
        self.output = output.into();
        self
    }

    /// The same answer with another exit code (a report whose exit code contradicts it).
    #[must_use]
    pub fn with_exit_code(mut self, exit_code: i64) -> Self {
        self.exit_code = exit_code;
        self
    }

    /// The same answer, and the command writes `content` to the absolute `path` of its
    /// container (what `changes`, `copy_out` and later commits see).
    #[must_use]
    pub fn writes(mut self, path: &str, content: impl Into<Vec<u8>>) -> Self {
        self.effects
            .push(FileEffect::Write(normalize(path), content.into()));
        self
    }

    /// The same answer, and the command moves the checkout in `dir` (absolute, in the container)
    /// from commit `older` to commit `newer` of the git repository at `repo` on the host, as
    /// `git reset --hard` would: the files that differ are written, the ones `newer` lacks
    /// deleted (what a reused launch's delta script does in a real container).
    ///
    /// # Errors
    /// When git cannot read the two commits.
    pub fn moves_checkout(
        mut self,
        repo: &std::path::Path,
        dir: &str,
        older: &str,
        newer: &str,
    ) -> Result<Self, String> {
        let git = |args: &[&str]| -> Result<Vec<u8>, String> {
            let out = std::process::Command::new("git")
                .arg("-C")
                .arg(repo)
                .args(args)
                .output()
                .map_err(|e| e.to_string())?;
            if out.status.success() {
                Ok(out.stdout)
            } else {
                Err(String::from_utf8_lossy(&out.stderr).into_owned())
            }
        };
        let listing = git(&["diff", "--name-status", "--no-renames", "-z", older, newer])?;
        let fields: Vec<String> = listing
            .split(|b| *b == 0)
            .filter(|f| !f.is_empty())
            .map(|f| String::from_utf8_lossy(f).into_owned())
            .collect();
        for pair in fields.chunks(2) {
            let [status, path] = pair else { continue };
            let absolute = format!("{}/{path}", dir.trim_end_matches('/'));
            if status.starts_with('D') {
                self = self.deletes(&absolute);
            } else {
                let content = git(&["show", &format!("{newer}:{path}")])?;
                self = self.writes(&absolute, content);
            }
        }
        Ok(self)
    }

    /// The same answer, and the command deletes the absolute `path` (and what is under it).
    #[must_use]
    pub fn deletes(mut self, path: &str) -> Self {
        self.effects.push(FileEffect::Delete(normalize(path)));
        self
    }

    /// The same answer taking `duration` (a timed-out answer takes at least the exec's
    /// timeout).
    #[must_use]
    pub fn duration(mut self, duration: Duration) -> Self {
        self.duration = duration;
        self
    }
}

/// A scripted answer for the commands that match a pattern.
#[derive(Debug, Clone)]
pub struct Script {
    pattern: Pattern,
    nth: Option<usize>,
    image: Option<String>,
    after: Option<Pattern>,
    answers: Vec<Answer>,
}

impl Script {
    /// Answers commands whose script contains `text`.
    #[must_use]
    pub fn contains(text: impl Into<String>) -> Self {
        Self::new(Pattern::Contains(text.into()))
    }

    /// Answers commands whose script matches the regular expression `regex`.
    ///
    /// # Errors
    /// When `regex` does not compile.
    pub fn regex(regex: &str) -> Result<Self, regex::Error> {
        Ok(Self::new(Pattern::Regex(Regex::new(regex)?)))
    }

    fn new(pattern: Pattern) -> Self {
        Self {
            pattern,
            nth: None,
            image: None,
            after: None,
            answers: Vec::new(),
        }
    }

    /// Answers only the `n`th (1-based) command this script matches; the others go on to the
    /// next scripts.
    #[must_use]
    pub fn nth(mut self, n: usize) -> Self {
        self.nth = Some(n);
        self
    }

    /// Answers only in containers created from `image`.
    #[must_use]
    pub fn in_image(mut self, image: impl Into<String>) -> Self {
        self.image = Some(image.into());
        self
    }

    /// Answers only in containers where an earlier command's script contained `text` (a
    /// patch applied, a file written), run in the container itself or in one its image was
    /// committed from.
    #[must_use]
    pub fn after(mut self, text: impl Into<String>) -> Self {
        self.after = Some(Pattern::Contains(text.into()));
        self
    }

    /// Adds an answer. Answers are given in turn, one per command answered; the last one
    /// repeats. A script without answers answers exit 0 with no output.
    #[must_use]
    pub fn answer(mut self, answer: Answer) -> Self {
        self.answers.push(answer);
        self
    }

    /// Adds several answers, in turn (see [`Script::answer`]).
    #[must_use]
    pub fn answers(mut self, answers: impl IntoIterator<Item = Answer>) -> Self {
        self.answers.extend(answers);
        self
    }
}

/// A script and how often it has matched and answered.
#[derive(Debug)]
pub(super) struct ScriptState {
    script: Script,
    matched: usize,
    answered: usize,
}

impl ScriptState {
    /// A script that has not matched yet.
    pub(super) fn new(script: Script) -> Self {
        Self {
            script,
            matched: 0,
            answered: 0,
        }
    }
}

/// The answer of the first script that answers `script` in `container`, counting matches.
pub(super) fn choose(
    scripts: &mut [ScriptState],
    container: &Container,
    script: &str,
) -> Option<Answer> {
    for state in scripts {
        let rule = &state.script;
        if !rule.pattern.matches(script)
            || rule
                .image
                .as_ref()
                .is_some_and(|image| *image != container.spec.image)
            || rule.after.as_ref().is_some_and(|after| {
                !container.execs.iter().any(|e| after.matches(&e.script))
                    && !container.image_history.iter().any(|h| after.matches(h))
            })
        {
            continue;
        }
        state.matched += 1;
        if rule.nth.is_some_and(|n| n != state.matched) {
            continue;
        }
        let answer = rule
            .answers
            .get(state.answered)
            .or(rule.answers.last())
            .cloned()
            .unwrap_or_default();
        state.answered += 1;
        return Some(answer);
    }
    None
}
