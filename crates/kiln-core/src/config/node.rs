//! Nodes of the pipeline: the closed set of kinds and the rules of the graph between them, and
//! the typed settings of each source and stage.

use std::fmt;

use serde::Serialize;

use super::hash::hex_sha256;
use super::read::cut;
use super::sources::{CrawlSettings, IngestSettings};
use super::stages::{
    ExportSettings, FilterSettings, LaunchSettings, SplitSettings, ValidateSettings,
};

/// The kind of a source or stage, a closed set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeKind {
    /// Reads a SWE-bench or Multi-SWE-bench task file (source).
    Ingest,
    /// Crawls merged, issue-linked pull requests from GitHub (source).
    Crawl,
    /// Judges candidates (keep or drop).
    Filter,
    /// Labels candidates with the operating system they need.
    Split,
    /// Builds an environment image per candidate.
    Launch,
    /// Computes FAIL_TO_PASS and PASS_TO_PASS.
    Validate,
    /// Writes a Parquet release.
    Export,
}

impl NodeKind {
    /// Every kind, in pipeline order.
    pub(super) const ALL: [NodeKind; 7] = [
        Self::Ingest,
        Self::Crawl,
        Self::Filter,
        Self::Split,
        Self::Launch,
        Self::Validate,
        Self::Export,
    ];

    /// The name used in `kind = "..."`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ingest => "ingest",
            Self::Crawl => "crawl",
            Self::Filter => "filter",
            Self::Split => "split",
            Self::Launch => "launch",
            Self::Validate => "validate",
            Self::Export => "export",
        }
    }

    /// Whether nodes of this kind produce candidates (and take no inputs).
    #[must_use]
    pub fn is_source(self) -> bool {
        matches!(self, Self::Ingest | Self::Crawl)
    }

    /// The kind this one counts as in the graph rules: every source kind plays the role of
    /// `ingest` (a stage reads candidates from one source, whichever kind it is).
    pub(super) fn role(self) -> NodeKind {
        if self.is_source() { Self::Ingest } else { self }
    }

    /// Input roles (see [`NodeKind::role`]) a node of this kind requires, and those it accepts
    /// besides.
    pub(super) fn input_rules(self) -> (&'static [NodeKind], &'static [NodeKind]) {
        use NodeKind::{Filter, Ingest, Launch, Split, Validate};
        match self {
            Self::Ingest | Self::Crawl => (&[], &[]),
            Self::Filter => (&[Ingest], &[]),
            Self::Split => (&[Ingest], &[Filter]),
            Self::Launch => (&[Ingest], &[Filter, Split]),
            Self::Validate => (&[Ingest, Launch], &[]),
            Self::Export => (&[Ingest, Launch, Validate], &[Split]),
        }
    }
}

impl NodeKind {
    /// How a required input of this role is named in messages.
    pub(super) fn role_name(self) -> String {
        if self == Self::Ingest {
            "a source input (ingest or crawl)".into()
        } else {
            format!("an input of kind {self}")
        }
    }
}

impl fmt::Display for NodeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Typed settings of a node.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum NodeSettings {
    /// See [`IngestSettings`].
    Ingest(IngestSettings),
    /// See [`CrawlSettings`].
    Crawl(CrawlSettings),
    /// See [`FilterSettings`].
    Filter(FilterSettings),
    /// See [`SplitSettings`].
    Split(SplitSettings),
    /// See [`LaunchSettings`].
    Launch(LaunchSettings),
    /// See [`ValidateSettings`].
    Validate(ValidateSettings),
    /// See [`ExportSettings`].
    Export(ExportSettings),
}

/// One source or stage of the compiled pipeline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Node {
    /// Its name (the TOML table name).
    pub name: String,
    /// Its kind.
    pub kind: NodeKind,
    /// Names of the nodes it reads.
    pub inputs: Vec<String>,
    /// Its settings.
    pub settings: NodeSettings,
}

impl Node {
    /// Whether this node needs a container engine: launch and validate run containers, and an
    /// export checks that the images its rows name exist (and, with an `image_registry`, tags
    /// them with the names it publishes).
    #[must_use]
    pub fn uses_engine(&self) -> bool {
        matches!(
            &self.settings,
            NodeSettings::Launch(_) | NodeSettings::Validate(_) | NodeSettings::Export(_)
        )
    }

    /// Whether this node asks the `[lm]` endpoint (a filter or split whose judge is `lm`).
    #[must_use]
    pub fn uses_lm(&self) -> bool {
        match &self.settings {
            NodeSettings::Filter(f) => f.judge == "lm",
            NodeSettings::Split(s) => s.judge == "lm",
            NodeSettings::Launch(l) => l.agent.is_some(),
            _ => false,
        }
    }

    /// Hash of this node's own settings, stored in its manifest to notice config changes.
    #[must_use]
    pub fn settings_hash(&self) -> String {
        let json = serde_json::to_string(self).unwrap_or_default();
        hex_sha256(json.as_bytes())
    }
}

/// Directories and files of a run directory that no stage may be named after.
const RESERVED_NODE_NAMES: &[&str] = &["logs", "lm"];

/// Why `name` cannot name a source or stage: it becomes a directory of the run and a node of
/// the DOT graph, so only a short plain name will do.
pub(super) fn node_name_problem(name: &str) -> Result<(), String> {
    if !(1..=64).contains(&name.len())
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_".contains(c))
    {
        return Err(format!(
            "\"{}\" is not a source or stage name: use 1 to 64 letters, digits, `-` and `_`",
            cut(name)
        ));
    }
    if RESERVED_NODE_NAMES.contains(&name) {
        return Err(format!(
            "\"{name}\" is reserved for a directory of the run; choose another name"
        ));
    }
    Ok(())
}
