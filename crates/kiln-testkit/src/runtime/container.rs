//! The containers of the scripted runtime: what each was made from, its files, and every
//! command run in it with how it ended, for tests to assert on.

use std::collections::BTreeMap;
use std::time::Duration;

use kiln_core::{ContainerId, ContainerSpec};

use super::files::{CopiedIn, FileEffect, apply, normalize};

/// How one exec ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecResult {
    /// The command finished (or was killed by its timeout or the OOM killer).
    Exited {
        /// Its exit code.
        exit_code: i64,
        /// Killed by its timeout.
        timed_out: bool,
        /// Killed by the OOM killer.
        oom_killed: bool,
    },
    /// The command stopped its container, which exited with this code.
    StoppedContainer(i64),
    /// The engine failed the exec; the error's message.
    EngineError(String),
}

/// One exec, as the runtime received it.
#[derive(Debug, Clone)]
pub struct ExecRecord {
    /// The script.
    pub script: String,
    /// Extra environment of the command.
    pub env: Vec<(String, String)>,
    /// Working directory of the command.
    pub workdir: Option<String>,
    /// Its timeout.
    pub timeout: Duration,
    /// Bytes of output the caller keeps.
    pub output_cap: usize,
    /// How it ended.
    pub result: ExecResult,
}

impl ExecRecord {
    /// The value of the command's extra environment variable `name`.
    #[must_use]
    pub fn env_var(&self, name: &str) -> Option<&str> {
        self.env
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A container the runtime created, with everything done to it.
#[derive(Debug, Clone)]
pub struct Container {
    /// Its id.
    pub id: ContainerId,
    /// The spec it was created from.
    pub spec: ContainerSpec,
    /// The id of the image it was made from (the spec's image, resolved when it was created).
    pub image_id: String,
    /// Its labels: the spec's, plus [`LABEL_MANAGED`](kiln_core::runtime::LABEL_MANAGED).
    pub labels: BTreeMap<String, String>,
    /// Its environment: the image's, then the spec's.
    pub env: Vec<(String, String)>,
    /// Files from its image.
    pub image_files: Vec<CopiedIn>,
    /// The scripts that made its image ([`Image::history`](super::Image::history)).
    pub image_history: Vec<String>,
    /// Archives copied into it, in order.
    pub copied_in: Vec<CopiedIn>,
    /// Its image's file system ([`Image::fs`](super::Image::fs)).
    pub image_fs: BTreeMap<String, Vec<u8>>,
    /// Its file system now: the image's, then what was copied in and what commands wrote
    /// and deleted ([`Answer::writes`](super::Answer::writes),
    /// [`Answer::deletes`](super::Answer::deletes)), in order.
    pub fs: BTreeMap<String, Vec<u8>>,
    /// Commands run in it, in order.
    pub execs: Vec<ExecRecord>,
    /// CPU time its commands used: each finished command's answer takes its
    /// [`duration`](super::Answer::duration) on one core.
    pub cpu: Duration,
    /// Tags it was committed to, in order.
    pub commits: Vec<String>,
    /// The container's exit code once a command stopped it.
    pub stopped: Option<i64>,
    /// Whether it was removed.
    pub removed: bool,
}

impl Container {
    /// The scripts run in it, in order.
    #[must_use]
    pub fn commands(&self) -> Vec<&str> {
        self.execs.iter().map(|e| e.script.as_str()).collect()
    }

    /// The contents of the file at absolute `path` as the copied archives and the commands
    /// left it.
    #[must_use]
    pub fn file(&self, path: &str) -> Option<Vec<u8>> {
        self.fs.get(&normalize(path)).cloned()
    }

    /// Applies what a command did to a file.
    pub(super) fn apply(&mut self, effect: &FileEffect) {
        apply(&mut self.fs, effect);
    }
}
