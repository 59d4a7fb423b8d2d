//! The pipeline config (`pipeline.toml`) and its compiler.
//!
//! Compiling happens before anything runs, in two passes like vector's topology: the raw TOML is
//! walked key by key into typed settings, and then the graph is checked (inputs exist, kinds fit,
//! no cycles). Every error of both passes is collected and reported at once, each with the file,
//! line, column and dotted key it concerns. Unknown keys are errors: a typo must not be silence.

mod compile;
mod lm;
mod sources;
mod stages;

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use sha2::{Digest, Sha256};
use toml::de::DeTable;

use compile::{Compiler, config_dir};
pub use lm::{LmSettings, Price};
pub use sources::{CrawlSettings, DiscoverSettings, IngestSettings, format_time};
pub use stages::{
    ExportSettings, FilterSettings, FrozenChoice, FrozenSplit, LaunchSettings, SplitSettings,
    ValidateSettings,
};

/// One config error, located in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The config file.
    pub file: PathBuf,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// Dotted key the error concerns (empty for syntax errors).
    pub key: String,
    /// What is wrong, lowercase, no trailing period.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: ", self.file.display(), self.line, self.column)?;
        if !self.key.is_empty() {
            write!(f, "{}: ", self.key)?;
        }
        f.write_str(&self.message)
    }
}

/// All errors found in a config, in file order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

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
    const ALL: [NodeKind; 7] = [
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
    fn role(self) -> NodeKind {
        if self.is_source() { Self::Ingest } else { self }
    }

    /// Input roles (see [`NodeKind::role`]) a node of this kind requires, and those it accepts
    /// besides.
    fn input_rules(self) -> (&'static [NodeKind], &'static [NodeKind]) {
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
    fn role_name(self) -> String {
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

/// Where datasets go.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DatasetSettings {
    /// Dataset name: `<root>/<name>/`.
    pub name: String,
    /// Root directory of all datasets, resolved against the config file's directory.
    pub root: PathBuf,
}

/// Container settings shared by launch and validate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DockerSettings {
    /// A CA bundle to install in every image (TLS-inspecting proxies).
    pub ca_bundle: Option<PathBuf>,
    /// Memory limit per container, bytes.
    pub memory_bytes: i64,
    /// CPU limit per container.
    pub cpus: f64,
    /// Process limit per container.
    pub pids: i64,
    /// Prefix of the environment image tags.
    pub image_prefix: String,
}

impl Default for DockerSettings {
    /// The values a config without `[docker]` gets.
    fn default() -> Self {
        Self {
            ca_bundle: None,
            memory_bytes: 4 << 30,
            cpus: 2.0,
            pids: 4096,
            image_prefix: "kiln-env".into(),
        }
    }
}

impl DockerSettings {
    /// The resource limits of every container.
    #[must_use]
    pub fn limits(&self) -> crate::runtime::Limits {
        crate::runtime::Limits {
            memory_bytes: self.memory_bytes,
            cpus: self.cpus,
            pids: self.pids,
        }
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
    /// export with an `image_registry` tags the environment images with the names it publishes.
    #[must_use]
    pub fn uses_engine(&self) -> bool {
        match &self.settings {
            NodeSettings::Launch(_) | NodeSettings::Validate(_) => true,
            NodeSettings::Export(e) => !e.image_registry.is_empty(),
            _ => false,
        }
    }

    /// Whether this node asks the `[lm]` endpoint (a filter or split whose judge is `lm`).
    #[must_use]
    pub fn uses_lm(&self) -> bool {
        match &self.settings {
            NodeSettings::Filter(f) => f.judge == "lm",
            NodeSettings::Split(s) => s.judge == "lm",
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
}

/// Something a config needs from the machine it runs on, and where the config says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// The source or stage that needs it (`None` for the `[docker]` and `[dataset]` tables).
    pub node: Option<String>,
    /// Dotted key that names it.
    pub key: String,
    /// 1-based line of the key's value.
    pub line: usize,
    /// 1-based column of the key's value.
    pub column: usize,
    /// What is needed.
    pub need: Need,
}

/// What a [`Requirement`] asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Need {
    /// An environment variable that must be set and non-empty (a token).
    EnvVar(String),
    /// A file that must exist and be readable.
    File(PathBuf),
}

impl Pipeline {
    /// Reads and compiles a config file.
    ///
    /// # Errors
    /// Every problem found, located; an unreadable file is one error at line 1.
    pub fn load(path: &Path) -> Result<Self, ConfigErrors> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            ConfigErrors(vec![ConfigError {
                file: path.to_path_buf(),
                line: 1,
                column: 1,
                key: String::new(),
                message: format!("cannot read the file: {e}"),
            }])
        })?;
        Self::compile(path, &text)
    }

    /// Compiles config text; `path` locates errors and anchors relative paths.
    ///
    /// # Errors
    /// Every problem found, located.
    pub fn compile(path: &Path, text: &str) -> Result<Self, ConfigErrors> {
        let mut cx = Compiler {
            file: path.to_path_buf(),
            text,
            base: config_dir(path),
            errors: Vec::new(),
            requirements: Vec::new(),
            current_node: None,
            lm: None,
        };
        let (root, parse_errors) = DeTable::parse_recoverable(text);
        for error in parse_errors {
            let span = error.span().unwrap_or(0..0);
            cx.error_at(span.start, "", error.message().trim().to_string());
        }
        if !cx.errors.is_empty() {
            return Err(ConfigErrors(cx.errors));
        }
        let root = root.into_inner();
        let pipeline = cx.compile_root(&root);
        match pipeline {
            Some(pipeline) if cx.errors.is_empty() => Ok(pipeline),
            _ => {
                cx.errors.sort_by_key(|e| (e.line, e.column));
                Err(ConfigErrors(cx.errors))
            }
        }
    }

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
                // Opened and read as the stage will read it: a directory opens but does not
                // read.
                Need::File(path) if std::fs::read(path).is_err() => {
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

/// Directories and files of a run directory that no stage may be named after.
const RESERVED_NODE_NAMES: &[&str] = &["logs", "lm"];

/// Why `name` cannot name a source or stage: it becomes a directory of the run and a node of
/// the DOT graph, so only a short plain name will do.
fn node_name_problem(name: &str) -> Result<(), String> {
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

/// Whether `prefix` is the repository part of a Docker image reference that tags can be
/// appended to (`kiln-env`, `ghcr.io/org/kiln`, `localhost:5000/kiln`): an optional registry
/// host (with a `.` or a `:port`, or `localhost`), then lowercase path components of letters
/// and digits joined by `.`, `_`, `__` or dashes.
#[must_use]
pub fn is_image_prefix(prefix: &str) -> bool {
    let component = |part: &str| {
        let bytes = part.as_bytes();
        let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
        !part.is_empty()
            && bytes.first().is_some_and(alnum)
            && bytes.last().is_some_and(alnum)
            && bytes.iter().all(|b| alnum(b) || b"._-".contains(b))
            && !part.contains("..")
            && !part.contains("___")
            && !part.contains("._")
            && !part.contains("_.")
            && !part.contains(".-")
            && !part.contains("-.")
            && !part.contains("_-")
            && !part.contains("-_")
    };
    let host = |part: &str| {
        let (name, port) = match part.split_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (part, None),
        };
        (name.contains('.') || port.is_some() || name == "localhost")
            && !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || ".-".contains(c))
            && port.is_none_or(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
    };
    if prefix.len() > 200 {
        return false;
    }
    let parts: Vec<&str> = prefix.split('/').collect();
    let path = match parts.split_first() {
        Some((first, rest)) if !rest.is_empty() && host(first) => rest,
        _ => &parts[..],
    };
    !path.is_empty() && path.iter().all(|p| component(p))
}

/// A config value cut for messages: a typo is worth echoing, a 10 MB value is not (escaped, so
/// that every message stays on one line).
fn cut(text: &str) -> String {
    kiln_schema::shown(text)
}

/// A whole message kept to `max` characters and one line (control characters escaped), the
/// backstop for a message that quotes a value without [`cut`].
fn cut_long(text: &str, max: usize) -> String {
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if i == max {
            out.push_str(&format!("... ({} bytes)", text.len()));
            break;
        }
        if c.is_control() {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out
}

/// Lowercase hex SHA-256 of bytes.
#[must_use]
pub fn hex_sha256(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Lowercase hex of bytes (a digest).
#[must_use]
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// The longest duration any setting takes: a week. Longer ones are typos, and timeouts are
/// added and multiplied when containers are planned, which must not overflow.
pub const MAX_DURATION: Duration = Duration::from_secs(7 * 24 * 3600);

/// The largest memory limit a container may get (1 TiB).
pub const MAX_MEMORY_BYTES: i64 = 1 << 40;

/// The smallest memory limit the Docker engine accepts (6 MiB).
pub const MIN_MEMORY_BYTES: i64 = 6 << 20;

/// Parses `"90s"`, `"30m"`, `"2h"`, `"1h30m"`, at most [`MAX_DURATION`].
///
/// # Errors
/// A message saying what form is expected, or that the duration is out of range.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || {
        format!(
            "\"{}\" is not a duration; use a number with s, m or h, such as \"90s\" or \"30m\"",
            cut(text)
        )
    };
    let too_long = || {
        format!(
            "\"{}\" is longer than the longest duration allowed, 7 days (\"168h\")",
            cut(text)
        )
    };
    let mut total = 0u64;
    let mut number = String::new();
    let mut any = false;
    for c in text.trim().chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            _ => return Err(bad()),
        };
        if number.is_empty() {
            return Err(bad());
        }
        // Digits past u64 are a duration far over the limit, not a malformed one.
        let n: u64 = number.parse().map_err(|_| too_long())?;
        total = n
            .checked_mul(unit)
            .and_then(|s| total.checked_add(s))
            .ok_or_else(too_long)?;
        number.clear();
        any = true;
    }
    if !number.is_empty() || !any || total == 0 {
        return Err(bad());
    }
    let duration = Duration::from_secs(total);
    if duration > MAX_DURATION {
        return Err(too_long());
    }
    Ok(duration)
}

/// Parses `"512m"`, `"4g"`, `"1024k"` or a plain byte count into bytes, at most 1 TiB
/// ([`MAX_MEMORY_BYTES`]).
///
/// # Errors
/// A message saying what form is expected, or that the size is out of range.
pub fn parse_size(text: &str) -> Result<i64, String> {
    let t = text.trim().to_ascii_lowercase();
    let t = t.strip_suffix('b').unwrap_or(&t);
    let (digits, shift) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 10),
        Some('m') => (&t[..t.len() - 1], 20),
        Some('g') => (&t[..t.len() - 1], 30),
        _ => (t, 0),
    };
    let bad = || {
        format!(
            "\"{}\" is not a size; use a number with k, m or g, such as \"4g\"",
            cut(text)
        )
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return Err(bad());
    }
    let bytes = digits
        .parse::<i64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .filter(|n| *n <= MAX_MEMORY_BYTES);
    match bytes {
        Some(n) if n >= MIN_MEMORY_BYTES => Ok(n),
        Some(0) => Err(bad()),
        _ => Err(format!(
            "\"{}\" is out of range: a size between 6m and 1024g",
            cut(text)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compile(text: &str) -> Result<Pipeline, ConfigErrors> {
        Pipeline::compile(Path::new("/cfg/pipeline.toml"), text)
    }

    fn errors(text: &str) -> String {
        match compile(text) {
            Ok(_) => String::from("ok"),
            Err(e) => e.to_string(),
        }
    }

    const GOOD: &str = r#"
[dataset]
name = "demo"

[sources.tasks]
kind = "ingest"
path = "tasks.jsonl"

[stages.launch]
kind = "launch"
inputs = ["tasks"]

[stages.validate]
kind = "validate"
inputs = ["tasks", "launch"]

[stages.export]
kind = "export"
inputs = ["tasks", "launch", "validate"]
"#;

    #[test]
    fn good_config_compiles_in_topological_order() {
        let pipeline = compile(GOOD).unwrap();
        let names: Vec<&str> = pipeline.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["tasks", "launch", "validate", "export"]);
        assert_eq!(pipeline.dataset.root, PathBuf::from("/cfg/datasets"));
        let Some(NodeSettings::Validate(v)) = pipeline.node("validate").map(|n| &n.settings) else {
            panic!("validate settings missing");
        };
        assert_eq!(v.repeats, 3);
        assert_eq!(v.network, "none");
    }

    #[test]
    fn a_bare_file_name_anchors_paths_at_the_current_directory() {
        let text = GOOD.replace(
            "path = \"tasks.jsonl\"",
            "path = \"tasks.jsonl\"\nclone_url = \"{config_dir}/repos/{owner}/{name}\"",
        );
        let pipeline = Pipeline::compile(Path::new("pipeline.toml"), &text).unwrap();
        let cwd = std::env::current_dir().expect("a current directory");
        assert_eq!(pipeline.dataset.root, cwd.join("datasets"));
        let Some(NodeSettings::Ingest(ingest)) = pipeline.node("tasks").map(|n| &n.settings) else {
            panic!("ingest settings missing");
        };
        assert_eq!(ingest.path, cwd.join("tasks.jsonl"));
        assert_eq!(
            ingest.clone_url,
            format!("{}/repos/{{owner}}/{{name}}", cwd.display())
        );
    }

    #[test]
    fn every_error_is_reported_with_line_and_key() {
        let text = r#"
[dataset]
name = "demo"

[sources.tasks]
kind = "ingest"
path = "tasks.jsonl"

[stages.launch]
kind = "launch"
inputs = ["tasks"]
concurency = 4

[stages.validate]
kind = "validate"
inputs = ["tasks", "lunch"]
repeats = "three"

[stages.odd]
kind = "transmogrify"
"#;
        let message = errors(text);
        let expected = [
            "/cfg/pipeline.toml:12:1: stages.launch.concurency: unknown key (did you mean `concurrency`?)",
            "/cfg/pipeline.toml:16:10: stages.validate.inputs: input \"lunch\" is not a declared source or stage (did you mean `launch`?)",
            "/cfg/pipeline.toml:16:10: stages.validate.inputs: a validate stage needs an input of kind launch",
            "/cfg/pipeline.toml:17:11: stages.validate.repeats: expected an integer, found string",
            "/cfg/pipeline.toml:20:8: stages.odd.kind: unknown kind \"transmogrify\"",
        ];
        for line in expected {
            assert!(message.contains(line), "missing {line:?} in:\n{message}");
        }
        assert_eq!(message.lines().count(), 5, "{message}");
    }

    #[test]
    fn export_settings_frozen_splits_licence_and_registry() {
        let text = format!(
            "{GOOD}license = \"mit\"\nimage_registry = \"registry.example.com:5000/team\"\n\
             [stages.export.frozen.lite]\nsample = 50\nseed = 7\n\
             [stages.export.frozen.verified]\nids = \"verified.txt\"\n"
        );
        let pipeline = compile(&text).unwrap();
        let Some(NodeSettings::Export(export)) = pipeline.node("export").map(|n| &n.settings)
        else {
            panic!("no export");
        };
        assert_eq!(export.license, "mit");
        assert_eq!(export.image_registry, "registry.example.com:5000/team");
        assert_eq!(
            export.frozen,
            [
                FrozenSplit {
                    name: "lite".into(),
                    choice: FrozenChoice::Sample { size: 50, seed: 7 },
                },
                FrozenSplit {
                    name: "verified".into(),
                    choice: FrozenChoice::Ids {
                        path: PathBuf::from("/cfg/verified.txt"),
                    },
                },
            ]
        );
        assert!(pipeline.node("export").is_some_and(Node::uses_engine));

        let bad = format!(
            "{GOOD}split = \"te-st\"\ntag = \"../up\"\nimage_registry = \"https://r.example.com/\"\n\
             [stages.export.frozen.lite]\nsample = 0\n\
             [stages.export.frozen.both]\nsample = 5\nids = \"x.txt\"\n\
             [stages.export.frozen.none]\nseed = 5\n\
             [stages.export.frozen.\"bad-name\"]\nsample = 5\nsize = 3\n"
        );
        let message = errors(&bad);
        for line in [
            "stages.export.split: \"te-st\" is not a split name",
            "stages.export.tag: \"../up\" is not a release tag",
            "stages.export.image_registry: \"https://r.example.com/\" is not a registry reference",
            "stages.export.frozen.lite.sample: 0 is out of range 1..=1000000",
            "stages.export.frozen.both: give either `sample` (with `seed`) or `ids`, not both",
            "stages.export.frozen.none: say how the split is chosen",
            "stages.export.frozen.bad-name: \"bad-name\" is not a split name",
        ] {
            assert!(message.contains(line), "missing {line:?} in:\n{message}");
        }
        assert_eq!(message.lines().count(), 7, "{message}");
    }

    #[test]
    fn cycles_and_syntax_errors_are_reported() {
        let text = r#"
[dataset]
name = "demo"
[sources.tasks]
kind = "ingest"
path = "t.jsonl"
[stages.a]
kind = "filter"
inputs = ["tasks", "b"]
[stages.b]
kind = "split"
inputs = ["tasks", "a"]
"#;
        let message = errors(text);
        assert!(
            message.contains("form a cycle through: a -> b"),
            "{message}"
        );
        let message = errors("[dataset]\nname = \n");
        assert!(message.starts_with("/cfg/pipeline.toml:2:"), "{message}");
    }

    #[test]
    fn durations_and_sizes_parse() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("10").is_err());
        assert_eq!(parse_size("4g"), Ok(4 << 30));
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert!(parse_size("lots").is_err());
        assert_eq!(parse_duration("168h"), Ok(MAX_DURATION));
    }

    #[test]
    fn sizes_and_durations_out_of_range_are_errors_not_wraps_or_panics() {
        // 17179869184g is 2^64 bytes: shifted without a check it wraps to 0, which the engine
        // reads as "no limit".
        for size in [
            "17179869184g",
            "9223372036854775807k",
            "2048g",
            "1k",
            "0",
            "-1g",
            "1.5g",
        ] {
            assert!(parse_size(size).is_err(), "{size}");
        }
        assert!(
            parse_size("17179869184g").is_err_and(|e| e.contains("out of range")),
            "{:?}",
            parse_size("17179869184g")
        );
        assert_eq!(parse_size("1024g"), Ok(1 << 40));
        for duration in [
            "169h",
            "99999999999999999999s",
            "18446744073709551615h",
            "5124095576030431h",
            "m",
        ] {
            assert!(parse_duration(duration).is_err(), "{duration}");
        }
        let text = GOOD.replace(
            "inputs = [\"tasks\"]\n",
            "inputs = [\"tasks\"]\ncommand_timeout = \"18446744073709551615h\"\n",
        );
        let text = text.replace(
            "name = \"demo\"\n",
            "name = \"demo\"\n[docker]\nmemory = \"17179869184g\"\n",
        );
        let message = errors(&text);
        assert!(
            message.contains("docker.memory: \"17179869184g\" is out of range"),
            "{message}"
        );
        assert!(
            message.contains(
                "stages.launch.command_timeout: \"18446744073709551615h\" is longer than"
            ),
            "{message}"
        );
    }

    #[test]
    fn dot_lists_every_edge() {
        let pipeline = compile(GOOD).unwrap();
        let dot = pipeline.to_dot();
        assert!(dot.contains("\"tasks\" -> \"validate\""));
        assert!(dot.contains("\"launch\" -> \"export\""));
    }

    const CRAWL: &str = r#"
[dataset]
name = "live"

[sources.github]
kind = "crawl"
repos = ["pallets/flask", "serde-rs/serde"]
month = "2024-12"
token_env = ["GH_TOKEN_A", "GH_TOKEN_B"]

[stages.filter]
kind = "filter"
inputs = ["github"]
"#;

    #[test]
    fn a_crawl_source_compiles_and_feeds_stages() {
        let pipeline = compile(CRAWL).unwrap();
        let Some(NodeSettings::Crawl(crawl)) = pipeline.node("github").map(|n| &n.settings) else {
            panic!("crawl settings missing");
        };
        assert_eq!(crawl.since, "2024-12-01T00:00:00Z");
        assert_eq!(crawl.until.as_deref(), Some("2025-01-01T00:00:00Z"));
        assert_eq!(crawl.api_url, "https://api.github.com");
        assert_eq!(crawl.clone_url, "https://github.com/{repo}.git");
        assert_eq!(crawl.max_files, 50);
        let filter = pipeline.node("filter").expect("no filter");
        assert_eq!(
            pipeline.source_of(filter).map(|n| n.name.as_str()),
            Some("github")
        );
        // Tokens are checked against the environment, located at `token_env`, only on demand.
        let only_a = |name: &str| name == "GH_TOKEN_A";
        let message = pipeline
            .check_environment(None, &only_a)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert_eq!(
            message,
            "/cfg/pipeline.toml:9:13: sources.github.token_env: environment variable GH_TOKEN_B is not set (or is empty)"
        );
        assert!(
            pipeline
                .check_environment(Some(&["filter"]), &only_a)
                .is_ok()
        );
        assert!(pipeline.check_environment(None, &|_| true).is_ok());
        let text = CRAWL.replace("month = \"2024-12\"", "since = \"2024-12-01\"");
        let pipeline = compile(&text).unwrap();
        let Some(NodeSettings::Crawl(crawl)) = pipeline.node("github").map(|n| &n.settings) else {
            panic!("crawl settings missing");
        };
        assert_eq!(
            crawl.until, None,
            "an open window ends when the crawl starts"
        );
    }

    #[test]
    fn bad_crawl_settings_are_located() {
        let text = r#"
[dataset]
name = "live"

[sources.github]
kind = "crawl"
repos = ["pallets"]
since = "2024-12-10"
until = "2024-12-01T00:00:00+02:00"
token_env = ["not a name"]
max_fils = 10

[sources.other]
kind = "crawl"
month = "2024-13"
discover = { language = "Rust", min_stars = 10, max_stars = 5, stars = 1 }
"#;
        let message = errors(text);
        let expected = [
            "/cfg/pipeline.toml:7:9: sources.github.repos: \"pallets\" is not an owner/name repository",
            "/cfg/pipeline.toml:9:9: sources.github.until: the window ends (2024-11-30T22:00:00Z) before it starts (2024-12-10T00:00:00Z)",
            "/cfg/pipeline.toml:10:13: sources.github.token_env: \"not a name\" is not an environment variable name",
            "/cfg/pipeline.toml:11:1: sources.github.max_fils: unknown key (did you mean `max_files`?)",
            "/cfg/pipeline.toml:15:9: sources.other.month: \"2024-13\" is not a month",
            "sources.other.discover.max_stars: 5 is below min_stars 10",
            "sources.other.discover.stars: unknown key",
        ];
        for line in expected {
            assert!(message.contains(line), "missing {line:?} in:\n{message}");
        }
        assert_eq!(message.lines().count(), expected.len(), "{message}");
        let huge = format!("{}\n", "x".repeat(10_000_000));
        let message = errors(&CRAWL.replace(
            "month = \"2024-12\"",
            &format!("month = \"{}\"", huge.trim()),
        ));
        assert!(
            message.len() < 400,
            "values are cut in messages: {} bytes",
            message.len()
        );
    }

    #[test]
    fn names_the_run_store_or_docker_would_refuse_are_config_errors() {
        for (from, to, expected) in [
            (
                "name = \"demo\"",
                "name = \"..\"",
                "dataset.name: \"..\" is not a dataset name",
            ),
            (
                "name = \"demo\"",
                "name = \".hidden\"",
                "dataset.name: \".hidden\" is not a dataset name",
            ),
            (
                "[stages.launch]",
                "[stages.\"../x\"]",
                "stages.../x: \"../x\" is not a source or stage name",
            ),
            (
                "[stages.launch]",
                "[stages.logs]",
                "stages.logs: \"logs\" is reserved for a directory of the run",
            ),
            (
                "name = \"demo\"",
                "name = \"demo\"\n[docker]\nimage_prefix = \"Kiln Env\"",
                "docker.image_prefix: \"Kiln Env\" is not an image repository prefix",
            ),
            (
                "path = \"tasks.jsonl\"",
                "path = \"tasks.jsonl\"\ninstances = [\"ok__id-1\", \"../x\"]",
                "sources.tasks.instances: \"../x\" is not an instance id: it contains a path separator",
            ),
        ] {
            let message = errors(&GOOD.replacen(from, to, 1));
            assert!(message.contains(expected), "{to}: {message}");
        }
        for prefix in [
            "kiln-env",
            "ghcr.io/org/kiln-env",
            "localhost:5000/kiln",
            "a__b/c.d",
        ] {
            assert!(is_image_prefix(prefix), "{prefix}");
        }
        for prefix in ["", "Kiln", "a/", "/a", "a//b", "a:b", "-a", "a-", "a..b"] {
            assert!(!is_image_prefix(prefix), "{prefix}");
        }
    }

    #[test]
    fn no_message_echoes_a_huge_value_or_key() {
        // Every string-valued key of every table, and a key name, get a long text (200 kB each,
        // so that parsing stays quick in debug builds; `bad_crawl_settings_are_located` sends a
        // 10 MB one).
        let huge = "x".repeat(200_000);
        let template = r#"
[dataset]
name = "HUGE"
root = "datasets"
[docker]
memory = "HUGE"
image_prefix = "HUGE"
[lm]
base_url = "HUGE"
model = "m"
api_key_env = "HUGE"
timeout = "HUGE"
[sources.tasks]
kind = "ingest"
path = "tasks.jsonl"
clone_url = "HUGE"
instances = ["HUGE/"]
[sources.HUGE]
kind = "HUGE"
[stages.filter]
kind = "filter"
inputs = ["tasks", "HUGE"]
judge = "HUGE"
drop_flags = ["HUGE"]
[stages.split]
kind = "split"
inputs = ["tasks"]
keep = ["HUGE"]
[stages.launch]
kind = "launch"
inputs = ["tasks"]
command_timeout = "HUGE"
HUGE = 1
[stages.validate]
kind = "validate"
inputs = ["tasks", "launch"]
network = "HUGE"
test_timeout = "HUGE"
"#;
        let message = errors(&template.replace("HUGE", &huge));
        assert!(message.lines().count() >= 12, "{message}");
        for line in message.lines() {
            assert!(line.len() < 800, "a message of {} bytes", line.len());
        }
    }

    #[test]
    fn a_ca_bundle_that_is_a_directory_fails_the_check_as_it_would_fail_the_run() {
        let text = GOOD.replace(
            "name = \"demo\"\n",
            &format!(
                "name = \"demo\"\n[docker]\nca_bundle = {:?}\n",
                std::env::temp_dir()
            ),
        );
        let pipeline = compile(&text).unwrap();
        let message = pipeline
            .check_environment(None, &|_| true)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(message.contains("cannot be read as a file"), "{message}");
    }

    #[test]
    fn a_missing_ca_bundle_is_an_environment_error_of_the_container_stages() {
        let text = GOOD.replace(
            "name = \"demo\"\n",
            "name = \"demo\"\n[docker]\nca_bundle = \"/nonexistent/ca.pem\"\n",
        );
        let pipeline = compile(&text).unwrap();
        let message = pipeline
            .check_environment(None, &|_| true)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            message.ends_with("docker.ca_bundle: /nonexistent/ca.pem cannot be read as a file"),
            "{message}"
        );
        assert!(
            pipeline
                .check_environment(Some(&["launch"]), &|_| true)
                .is_err()
        );
        assert!(
            pipeline
                .check_environment(Some(&["tasks"]), &|_| true)
                .is_ok()
        );
    }
}
