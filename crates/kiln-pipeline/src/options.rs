//! Which run to work on and the knobs of one invocation.

use std::collections::{BTreeMap, BTreeSet};

/// Which run to work on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunSelection {
    /// The latest run if it is incomplete and made with the same config, else a new one.
    ResumeOrNew,
    /// Always a new run.
    New,
    /// The latest run, which must exist.
    Latest,
    /// A run by id.
    Id(String),
}

/// Per-invocation options (runtime knobs, not config).
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Only these instance ids.
    pub only: Option<BTreeSet<kiln_schema::InstanceId>>,
    /// Redo items that already have rows (with `only`: just those; without: the whole stage).
    pub force: bool,
    /// Override the concurrency of launch and validate.
    pub concurrency: Option<usize>,
    /// Let an export replace a release of its tag with this run's rows alone. By default the
    /// release keeps the rows of earlier runs that this run did not make: a run that lost
    /// instances to an outage must not shrink a published release, and a second refresh of a
    /// month adds to its release.
    pub allow_fewer_rows: bool,
    /// Values for the environment variables a config names (`token_env`), used before the
    /// process environment: a program embedding kiln (or the demo) hands tokens over without
    /// putting them in the environment.
    pub secrets: Secrets,
}

/// Named secrets ([`RunOptions::secrets`]); their values never appear in `Debug` output.
#[derive(Clone, Default)]
pub struct Secrets(BTreeMap<String, String>);

impl Secrets {
    /// Sets the value of variable `name`.
    pub fn insert(&mut self, name: &str, value: &str) {
        self.0.insert(name.to_string(), value.to_string());
    }

    /// The value of `name`: the one set here, else the process environment's (empty counts as
    /// unset).
    #[must_use]
    pub fn get(&self, name: &str) -> Option<String> {
        self.0
            .get(name)
            .cloned()
            .or_else(|| std::env::var(name).ok())
            .filter(|v| !v.trim().is_empty())
    }
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.keys().map(|k| format!("{k}=<redacted>")))
            .finish()
    }
}
