//! The `[dataset]` table: where datasets go.

use std::path::PathBuf;

use serde::Serialize;

use super::read::{Compiler, Keys, Value, cut};

/// Where datasets go.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DatasetSettings {
    /// Dataset name: `<root>/<name>/`.
    pub name: String,
    /// Root directory of all datasets, resolved against the config file's directory.
    pub root: PathBuf,
}

/// Whether `name` can name a dataset: its directory under the root (the run store refuses what
/// this refuses) and the middle part of its image references.
#[must_use]
pub fn is_dataset_name(name: &str) -> bool {
    (1..=100).contains(&name.len())
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

/// Keys of the `[dataset]` table.
const DATASET_KEYS: &[&str] = &["name", "root"];

impl Compiler<'_> {
    /// Compiles `[dataset]`, which every config needs; `None` when it had errors (reported).
    pub(super) fn dataset(&mut self, value: Option<&Value<'_>>) -> Option<DatasetSettings> {
        let Some(value) = value else {
            self.error_at(
                0,
                "dataset",
                "missing required table [dataset] with `name`".into(),
            );
            return None;
        };
        let table = self.table(value, "dataset")?;
        let mut keys = Keys::new(table, "dataset", value.span().start);
        let name = self.required_string(&mut keys, "name");
        // The name is a directory under the root and part of image references: the run store
        // refuses what this refuses, so `kiln check` and `kiln run` agree.
        if let Ok(text) = &name
            && !is_dataset_name(text)
        {
            let at = keys.get("name").map_or(0, |v| v.span().start);
            self.error_at(
                at,
                "dataset.name",
                format!(
                    "\"{}\" is not a dataset name: use 1 to 100 letters, digits, `-`, `_` and `.`, \
                     not starting with `.`",
                    cut(text)
                ),
            );
        }
        let root = self.string_or(&mut keys, "root", "datasets");
        keys.finish(self, DATASET_KEYS);
        Some(DatasetSettings {
            name: name.ok()?,
            root: self.path_value(&root.ok()?),
        })
    }
}
