//! The compiled pipeline and what it answers: the environment it needs, the nodes' inputs, the
//! month a refresh runs, the DAG in DOT. Compiling one is the dispatcher's (`compile`).

use std::path::PathBuf;

use super::dataset::DatasetSettings;
use super::docker::DockerSettings;
use super::hash::hex_sha256;
use super::lm::LmSettings;
use super::node::{Node, NodeKind, NodeSettings};
use super::read::{ConfigError, ConfigErrors, Need, Requirement};
use super::shard::{Shard, ShardId, shard_root};

/// A compiled pipeline: settings checked, nodes in topological order.
#[derive(Debug, Clone)]
pub struct Pipeline {
    /// The config file.
    pub path: PathBuf,
    /// Its text, kept for the run snapshot.
    pub text: String,
    /// SHA-256 of the text.
    pub hash: String,
    /// Dataset location.
    pub dataset: DatasetSettings,
    /// Container settings.
    pub docker: DockerSettings,
    /// The LM endpoint (`[lm]`), when the config declares one.
    pub lm: Option<LmSettings>,
    /// Sources and stages, each after all of its inputs.
    pub nodes: Vec<Node>,
    /// What the config needs from the machine (environment variables, files), checked by
    /// [`Pipeline::check_environment`] when a command is about to use it.
    pub requirements: Vec<Requirement>,
    /// The shard this pipeline runs (`--shard`), set by [`Pipeline::for_shard`]: its dataset
    /// root is then the shard's own directory under the shared one.
    pub shard: Option<Shard>,
}

impl Pipeline {
    /// Checks what the config needs from this machine: for the nodes named in `nodes` (all
    /// nodes when `None`) and the tables every container stage shares. `env` answers whether an
    /// environment variable is set (the process environment in the CLI; a map in tests).
    ///
    /// # Errors
    /// Every unmet requirement, located at the key that states it.
    pub fn check_environment(
        &self,
        nodes: Option<&[&str]>,
        env: &dyn Fn(&str) -> bool,
    ) -> Result<(), ConfigErrors> {
        let containers = self.nodes.iter().any(|n| {
            nodes.is_none_or(|names| names.contains(&n.name.as_str()))
                && matches!(n.kind, NodeKind::Launch | NodeKind::Validate)
        });
        let mut errors = Vec::new();
        for requirement in &self.requirements {
            let applies = match (&requirement.node, nodes) {
                (_, None) => true,
                (Some(node), Some(names)) => names.contains(&node.as_str()),
                // The shared tables matter to the stages that run containers.
                (None, Some(_)) => containers,
            };
            if !applies {
                continue;
            }
            let message = match &requirement.need {
                Need::EnvVar(name) if !env(name) => Some(format!(
                    "environment variable {name} is not set (or is empty)"
                )),
                // Opened and read as the stage will read it (its first bytes: a task file may
                // be large): a directory opens but does not read.
                Need::File(path) if !readable(path) => {
                    Some(format!("{} cannot be read as a file", path.display()))
                }
                _ => None,
            };
            if let Some(message) = message {
                errors.push(ConfigError {
                    file: self.path.clone(),
                    line: requirement.line,
                    column: requirement.column,
                    key: requirement.key.clone(),
                    message,
                });
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(ConfigErrors(errors))
        }
    }

    /// The source a node reads its candidates from (its input of a source kind), if any.
    #[must_use]
    pub fn source_of(&self, node: &Node) -> Option<&Node> {
        node.inputs
            .iter()
            .filter_map(|i| self.node(i))
            .find(|n| n.kind.is_source())
    }

    /// The pipeline as `kiln run --shard` runs it: the same config (and hash), with the dataset
    /// root moved to the shard's own directory under the configured one ([`shard_root`]).
    #[must_use]
    pub fn for_shard(&self, id: ShardId) -> Self {
        let mut out = self.clone();
        let home = self.home_root().to_path_buf();
        out.dataset.root = shard_root(&home, &self.dataset.name, id);
        out.shard = Some(Shard { id, home });
        out
    }

    /// The dataset root the shards share: the configured one (a shard's own root is under it).
    #[must_use]
    pub fn home_root(&self) -> &std::path::Path {
        self.shard.as_ref().map_or(&self.dataset.root, |s| &s.home)
    }

    /// The pipeline as `kiln refresh --month` runs it: every crawl source's merge window set
    /// to `month` (`YYYY-MM`) and every export without a `tag` tagged with it. The hash covers
    /// the month, so each month's run is resumed by a refresh of the same month only, and the
    /// text kept in the run says what was changed.
    ///
    /// # Errors
    /// When `month` is not a month, or the pipeline has no crawl source to refresh.
    pub fn for_month(&self, month: &str) -> Result<Self, String> {
        let mut out = self.clone();
        let mut crawls = 0;
        for node in &mut out.nodes {
            match &mut node.settings {
                NodeSettings::Crawl(crawl) => {
                    crawl.set_month(month)?;
                    crawls += 1;
                }
                NodeSettings::Export(export) if export.tag.is_empty() => {
                    export.tag = month.to_string();
                }
                NodeSettings::Export(export) => {
                    return Err(format!(
                        "export stage `{}` has tag = \"{}\": a refresh tags each release with its month; \
                         leave `tag` empty in {}",
                        node.name,
                        export.tag,
                        self.path.display()
                    ));
                }
                _ => {}
            }
        }
        if crawls == 0 {
            return Err(format!(
                "{} has no crawl source: a refresh crawls the month's merged pull requests; \
                 add a `kind = \"crawl\"` source (see pipeline.toml)",
                self.path.display()
            ));
        }
        out.text = format!(
            "{}\n# kiln refresh --month {month}: every crawl source's window is {month}, and \
             the release is tagged {month}.\n",
            self.text.trim_end()
        );
        out.hash = hex_sha256(format!("{}\nrefresh-month={month}", self.hash).as_bytes());
        Ok(out)
    }

    /// The node named `name`.
    #[must_use]
    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.name == name)
    }

    /// The input of `node` that has kind `kind`, if any (the compiler allows at most one).
    #[must_use]
    pub fn input_of_kind(&self, node: &Node, kind: NodeKind) -> Option<&Node> {
        node.inputs
            .iter()
            .filter_map(|i| self.node(i))
            .find(|n| n.kind == kind)
    }

    /// The DAG in Graphviz DOT.
    #[must_use]
    pub fn to_dot(&self) -> String {
        let mut out = String::from("digraph kiln {\n  rankdir=LR;\n");
        for node in &self.nodes {
            let shape = if node.kind.is_source() {
                "cylinder"
            } else {
                "box"
            };
            out.push_str(&format!(
                "  \"{}\" [shape={shape}, label=\"{}\\n({})\"];\n",
                node.name, node.name, node.kind
            ));
        }
        for node in &self.nodes {
            for input in &node.inputs {
                out.push_str(&format!("  \"{input}\" -> \"{}\";\n", node.name));
            }
        }
        out.push_str("}\n");
        out
    }
}

/// Whether `path` opens and reads as a file.
fn readable(path: &std::path::Path) -> bool {
    use std::io::Read as _;
    std::fs::File::open(path).is_ok_and(|mut file| file.read(&mut [0u8; 1]).is_ok())
}
