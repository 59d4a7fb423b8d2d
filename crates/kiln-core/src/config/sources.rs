//! Sources: the nodes that produce candidates.

use serde::Serialize;
use std::path::PathBuf;

use super::NodeSettings;
use super::compile::{Compiler, Keys};

/// Settings of an `ingest` source.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IngestSettings {
    /// The task file (JSON array or JSONL), resolved against the config file's directory.
    pub path: PathBuf,
    /// Clone URL template with `{repo}`, `{owner}`, `{name}`.
    pub clone_url: String,
    /// Only these instance ids, when not empty.
    pub instances: Vec<String>,
}

impl Compiler<'_> {
    pub(super) fn ingest(&mut self, keys: &mut Keys<'_, '_>) -> Result<NodeSettings, ()> {
        let path = self.required_string(keys, "path");
        let clone_url = self.string_or(keys, "clone_url", "https://github.com/{repo}.git");
        if let Ok(url) = &clone_url
            && !url.contains("{repo}")
            && !(url.contains("{owner}") && url.contains("{name}"))
        {
            let at = keys.get("clone_url").map_or(keys.at, |v| v.span().start);
            let path = keys.path("clone_url");
            self.error_at(
                at,
                &path,
                "must contain {repo}, or {owner} and {name}".into(),
            );
        }
        let instances = self.strings(keys, "instances");
        Ok(NodeSettings::Ingest(IngestSettings {
            path: self.path_value(&path?),
            clone_url: self.expand_base(&clone_url?),
            instances: instances?,
        }))
    }

    /// Expands `{config_dir}` in templates, so a config can name mirrors next to itself.
    pub(super) fn expand_base(&self, template: &str) -> String {
        template.replace("{config_dir}", &self.base.to_string_lossy())
    }
}
