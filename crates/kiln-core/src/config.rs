//! The pipeline config (`pipeline.toml`) and its compiler.
//!
//! Compiling happens before anything runs, in two passes like vector's topology: the raw TOML is
//! walked key by key into typed settings, and then the graph is checked (inputs exist, kinds fit,
//! no cycles). Every error of both passes is collected and reported at once, each with the file,
//! line, column and dotted key it concerns. Unknown keys are errors: a typo must not be silence.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use sha2::{Digest, Sha256};
use toml::Spanned;
use toml::de::{DeTable, DeValue};

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
    const ALL: [NodeKind; 6] = [
        Self::Ingest,
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
            Self::Filter => "filter",
            Self::Split => "split",
            Self::Launch => "launch",
            Self::Validate => "validate",
            Self::Export => "export",
        }
    }

    fn is_source(self) -> bool {
        self == Self::Ingest
    }

    /// Input kinds a node of this kind requires, and those it accepts besides.
    fn input_rules(self) -> (&'static [NodeKind], &'static [NodeKind]) {
        use NodeKind::{Filter, Ingest, Launch, Split, Validate};
        match self {
            Self::Ingest => (&[], &[]),
            Self::Filter => (&[Ingest], &[]),
            Self::Split => (&[Ingest], &[Filter]),
            Self::Launch => (&[Ingest], &[Filter, Split]),
            Self::Validate => (&[Ingest, Launch], &[]),
            Self::Export => (&[Ingest, Launch, Validate], &[Split]),
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

/// Settings of a `filter` stage.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FilterSettings {
    /// `heuristic` (the only judge without an LM endpoint).
    pub judge: String,
    /// Smallest problem statement, in characters, the heuristic judge keeps.
    pub min_problem_chars: i64,
}

/// Settings of a `split` stage.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SplitSettings {
    /// Platforms that go on to launch.
    pub keep: Vec<String>,
}

/// Settings of a `launch` stage.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LaunchSettings {
    /// Instances built at once.
    pub concurrency: i64,
    /// Timeout of each setup command.
    pub command_timeout: Duration,
    /// Timeout of the test command.
    pub test_timeout: Duration,
    /// Share of parsed tests that must pass for a build to count.
    pub min_pass_ratio: f64,
    /// Resolve unpinned dependencies as of the base commit's date.
    pub date_cutoff: bool,
    /// Rebuild each environment from its synthesised Dockerfile and re-run the tests.
    pub verify_dockerfile: bool,
}

/// Settings of a `validate` stage.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ValidateSettings {
    /// Runs per side.
    pub repeats: i64,
    /// Instances validated at once.
    pub concurrency: i64,
    /// Timeout of each test run.
    pub test_timeout: Duration,
    /// Network of the test containers: `none` (loopback only) or `bridge`.
    pub network: String,
    /// Repositories (`owner/name`) whose tests need the network.
    pub network_repos: Vec<String>,
    /// Also run the tests once on the untouched base commit, to catch regressions the test
    /// patch hides (a test it skips or removes that the gold patch breaks).
    pub base_run: bool,
}

/// Settings of an `export` stage.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExportSettings {
    /// Split name of the release shards.
    pub split: String,
    /// Release tag; empty means the run's month (`YYYY-MM`).
    pub tag: String,
    /// Rows per Parquet shard.
    pub rows_per_shard: i64,
}

/// Typed settings of a node.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum NodeSettings {
    /// See [`IngestSettings`].
    Ingest(IngestSettings),
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
    /// Sources and stages, each after all of its inputs.
    pub nodes: Vec<Node>,
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

/// Lowercase hex SHA-256 of bytes.
#[must_use]
pub fn hex_sha256(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

type Table<'a> = DeTable<'a>;
type Value<'a> = Spanned<DeValue<'a>>;

/// A node as declared, before the graph is checked; `settings` is `None` when they had errors.
struct Draft {
    key: String,
    node_name: String,
    kind: NodeKind,
    inputs: Vec<String>,
    inputs_at: usize,
    settings: Option<NodeSettings>,
}

struct Compiler<'t> {
    file: PathBuf,
    text: &'t str,
    base: PathBuf,
    errors: Vec<ConfigError>,
}

/// Reads the keys of one table, remembering which were consumed so the rest are reported unknown.
struct Keys<'a, 'b> {
    table: &'b Table<'a>,
    prefix: String,
    /// Span of the table header, for "missing key" errors.
    at: usize,
    seen: BTreeSet<String>,
}

impl<'a, 'b> Keys<'a, 'b> {
    fn new(table: &'b Table<'a>, prefix: &str, at: usize) -> Self {
        Self {
            table,
            prefix: prefix.to_string(),
            at,
            seen: BTreeSet::new(),
        }
    }

    fn get(&mut self, key: &str) -> Option<&'b Value<'a>> {
        self.seen.insert(key.to_string());
        self.table
            .iter()
            .find(|(k, _)| k.get_ref().as_ref() == key)
            .map(|(_, v)| v)
    }

    fn path(&self, key: &str) -> String {
        if self.prefix.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.prefix)
        }
    }

    /// Reports keys that were never asked for.
    fn finish(self, cx: &mut Compiler<'_>, allowed: &[&str]) {
        for (key, _) in self.table {
            let name = key.get_ref().as_ref();
            if !self.seen.contains(name) {
                let suggestion = closest(name, allowed)
                    .map(|s| format!(" (did you mean `{s}`?)"))
                    .unwrap_or_default();
                cx.error_at(
                    key.span().start,
                    &self.path(name),
                    format!(
                        "unknown key{suggestion}; expected one of: {}",
                        allowed.join(", ")
                    ),
                );
            }
        }
    }
}

impl Compiler<'_> {
    fn error_at(&mut self, offset: usize, key: &str, message: String) {
        let offset = offset.min(self.text.len());
        let before = &self.text[..offset];
        let line = before.matches('\n').count() + 1;
        let column = before
            .rfind('\n')
            .map_or(offset, |nl| offset - nl - 1)
            .saturating_add(1);
        self.errors.push(ConfigError {
            file: self.file.clone(),
            line,
            column,
            key: key.to_string(),
            message,
        });
    }

    fn compile_root(&mut self, root: &Table<'_>) -> Option<Pipeline> {
        let mut keys = Keys::new(root, "", 0);
        let dataset = self.dataset(keys.get("dataset"));
        let docker = self.docker(keys.get("docker"));
        let mut nodes = Vec::new();
        let mut names: BTreeMap<String, usize> = BTreeMap::new();
        for section in ["sources", "stages"] {
            let Some(value) = keys.get(section) else {
                continue;
            };
            let Some(table) = self.table(value, section) else {
                continue;
            };
            for (name, value) in table {
                let name_str = name.get_ref().to_string();
                let key = format!("{section}.{name_str}");
                if names.insert(name_str.clone(), name.span().start).is_some() {
                    self.error_at(
                        name.span().start,
                        &key,
                        "a source or stage with this name is already declared".into(),
                    );
                    continue;
                }
                if let Some(draft) = self.node(section, &name_str, value) {
                    nodes.push(draft);
                }
            }
        }
        keys.finish(self, &["dataset", "docker", "sources", "stages"]);
        if nodes.is_empty() && self.errors.is_empty() {
            self.error_at(0, "", "no sources or stages are declared".into());
        }
        let nodes = self.check_graph(nodes);
        Some(Pipeline {
            path: self.file.clone(),
            text: self.text.to_string(),
            hash: hex_sha256(self.text.as_bytes()),
            dataset: dataset?,
            docker: docker?,
            nodes,
        })
    }

    fn table<'a, 'b>(&mut self, value: &'b Value<'a>, key: &str) -> Option<&'b Table<'a>> {
        if let DeValue::Table(table) = value.get_ref() {
            Some(table)
        } else {
            self.error_at(
                value.span().start,
                key,
                format!("expected a table, found {}", value.get_ref().type_str()),
            );
            None
        }
    }

    fn string(&mut self, keys: &mut Keys<'_, '_>, key: &str) -> Option<Option<String>> {
        let value = keys.get(key)?;
        if let Some(s) = value.get_ref().as_str() {
            Some(Some(s.to_string()))
        } else {
            let path = keys.path(key);
            self.error_at(
                value.span().start,
                &path,
                format!("expected a string, found {}", value.get_ref().type_str()),
            );
            Some(None)
        }
    }

    /// A string key with a default; `Err(())` when present but wrong (already reported).
    fn string_or(
        &mut self,
        keys: &mut Keys<'_, '_>,
        key: &str,
        default: &str,
    ) -> Result<String, ()> {
        match self.string(keys, key) {
            None => Ok(default.to_string()),
            Some(Some(s)) => Ok(s),
            Some(None) => Err(()),
        }
    }

    fn required_string(&mut self, keys: &mut Keys<'_, '_>, key: &str) -> Result<String, ()> {
        match self.string(keys, key) {
            None => {
                let (at, path) = (keys.at, keys.path(key));
                self.error_at(at, &path, "missing required key".into());
                Err(())
            }
            Some(Some(s)) => Ok(s),
            Some(None) => Err(()),
        }
    }

    fn strings(&mut self, keys: &mut Keys<'_, '_>, key: &str) -> Result<Vec<String>, ()> {
        let Some(value) = keys.get(key) else {
            return Ok(Vec::new());
        };
        let path = keys.path(key);
        let Some(array) = value.get_ref().as_array() else {
            self.error_at(
                value.span().start,
                &path,
                format!(
                    "expected an array of strings, found {}",
                    value.get_ref().type_str()
                ),
            );
            return Err(());
        };
        let mut out = Vec::new();
        let mut ok = true;
        for item in array.iter() {
            if let Some(s) = item.get_ref().as_str() {
                out.push(s.to_string());
            } else {
                self.error_at(
                    item.span().start,
                    &path,
                    format!("expected a string, found {}", item.get_ref().type_str()),
                );
                ok = false;
            }
        }
        if ok { Ok(out) } else { Err(()) }
    }

    /// An integer in `min..=max`, with a default.
    fn int(
        &mut self,
        keys: &mut Keys<'_, '_>,
        key: &str,
        default: i64,
        min: i64,
        max: i64,
    ) -> Result<i64, ()> {
        let Some(value) = keys.get(key) else {
            return Ok(default);
        };
        let path = keys.path(key);
        let parsed = value
            .get_ref()
            .as_integer()
            .and_then(|i| i64::from_str_radix(&i.as_str().replace('_', ""), i.radix()).ok());
        match parsed {
            Some(n) if (min..=max).contains(&n) => Ok(n),
            Some(n) => {
                self.error_at(
                    value.span().start,
                    &path,
                    format!("{n} is out of range {min}..={max}"),
                );
                Err(())
            }
            None => {
                self.error_at(
                    value.span().start,
                    &path,
                    format!("expected an integer, found {}", value.get_ref().type_str()),
                );
                Err(())
            }
        }
    }

    /// A number (integer or float) in `min..=max`, with a default.
    fn float(
        &mut self,
        keys: &mut Keys<'_, '_>,
        key: &str,
        default: f64,
        min: f64,
        max: f64,
    ) -> Result<f64, ()> {
        let Some(value) = keys.get(key) else {
            return Ok(default);
        };
        let path = keys.path(key);
        let parsed = match value.get_ref() {
            DeValue::Float(f) => f.as_str().replace('_', "").parse::<f64>().ok(),
            DeValue::Integer(i) => i.as_str().replace('_', "").parse::<f64>().ok(),
            _ => None,
        };
        match parsed {
            Some(n) if n >= min && n <= max => Ok(n),
            Some(n) => {
                self.error_at(
                    value.span().start,
                    &path,
                    format!("{n} is out of range {min}..={max}"),
                );
                Err(())
            }
            None => {
                self.error_at(
                    value.span().start,
                    &path,
                    format!("expected a number, found {}", value.get_ref().type_str()),
                );
                Err(())
            }
        }
    }

    fn bool(&mut self, keys: &mut Keys<'_, '_>, key: &str, default: bool) -> Result<bool, ()> {
        let Some(value) = keys.get(key) else {
            return Ok(default);
        };
        if let Some(b) = value.get_ref().as_bool() {
            Ok(b)
        } else {
            let path = keys.path(key);
            self.error_at(
                value.span().start,
                &path,
                format!(
                    "expected true or false, found {}",
                    value.get_ref().type_str()
                ),
            );
            Err(())
        }
    }

    fn duration(
        &mut self,
        keys: &mut Keys<'_, '_>,
        key: &str,
        default: Duration,
    ) -> Result<Duration, ()> {
        let Some(value) = keys.get(key) else {
            return Ok(default);
        };
        let path = keys.path(key);
        match value.get_ref().as_str().map(parse_duration) {
            Some(Ok(d)) => Ok(d),
            Some(Err(message)) => {
                self.error_at(value.span().start, &path, message);
                Err(())
            }
            None => {
                self.error_at(
                    value.span().start,
                    &path,
                    "expected a duration string such as \"90s\", \"30m\" or \"2h\"".into(),
                );
                Err(())
            }
        }
    }

    fn one_of(
        &mut self,
        keys: &mut Keys<'_, '_>,
        key: &str,
        default: &str,
        allowed: &[&str],
    ) -> Result<String, ()> {
        let value = keys.get(key);
        let s = self.string_or(keys, key, default)?;
        if allowed.contains(&s.as_str()) {
            Ok(s)
        } else {
            let at = value.map_or(keys.at, |v| v.span().start);
            let path = keys.path(key);
            self.error_at(
                at,
                &path,
                format!(
                    "unknown value \"{s}\"; expected one of: {}",
                    allowed.join(", ")
                ),
            );
            Err(())
        }
    }

    fn path_value(&self, raw: &str) -> PathBuf {
        let path = PathBuf::from(raw);
        if path.is_absolute() {
            path
        } else {
            self.base.join(path)
        }
    }

    fn dataset(&mut self, value: Option<&Value<'_>>) -> Option<DatasetSettings> {
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
        if let Ok(name) = &name
            && (name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)))
        {
            let at = keys.get("name").map_or(0, |v| v.span().start);
            self.error_at(
                at,
                "dataset.name",
                "must be non-empty and use only letters, digits, `-`, `_` and `.`".into(),
            );
        }
        let root = self.string_or(&mut keys, "root", "datasets");
        keys.finish(self, &["name", "root"]);
        Some(DatasetSettings {
            name: name.ok()?,
            root: self.path_value(&root.ok()?),
        })
    }

    fn docker(&mut self, value: Option<&Value<'_>>) -> Option<DockerSettings> {
        let defaults = DockerSettings::default();
        let Some(value) = value else {
            return Some(defaults);
        };
        let table = self.table(value, "docker")?;
        let mut keys = Keys::new(table, "docker", value.span().start);
        let ca_bundle = match self.string(&mut keys, "ca_bundle") {
            Some(Some(s)) => Ok(Some(self.path_value(&s))),
            Some(None) => Err(()),
            None => Ok(None),
        };
        let memory_value = keys.get("memory");
        let memory = match self.string_or(&mut keys, "memory", "4g") {
            Ok(s) => match parse_size(&s) {
                Ok(n) => Ok(n),
                Err(message) => {
                    self.error_at(
                        memory_value.map_or(0, |v| v.span().start),
                        "docker.memory",
                        message,
                    );
                    Err(())
                }
            },
            Err(()) => Err(()),
        };
        let cpus = self.float(&mut keys, "cpus", defaults.cpus, 0.1, 1024.0);
        let pids = self.int(&mut keys, "pids", defaults.pids, 64, 1 << 22);
        let image_prefix = self.string_or(&mut keys, "image_prefix", &defaults.image_prefix);
        keys.finish(
            self,
            &["ca_bundle", "memory", "cpus", "pids", "image_prefix"],
        );
        Some(DockerSettings {
            ca_bundle: ca_bundle.ok()?,
            memory_bytes: memory.ok()?,
            cpus: cpus.ok()?,
            pids: pids.ok()?,
            image_prefix: image_prefix.ok()?,
        })
    }

    fn node(&mut self, section: &str, name: &str, value: &Value<'_>) -> Option<Draft> {
        let key = format!("{section}.{name}");
        let table = self.table(value, &key)?;
        let mut keys = Keys::new(table, &key, value.span().start);
        let kind_value = keys.get("kind");
        let kind = match self.required_string(&mut keys, "kind") {
            Ok(k) => match NodeKind::ALL.iter().find(|n| n.as_str() == k) {
                Some(kind) => Some(*kind),
                None => {
                    let names: Vec<&str> = NodeKind::ALL.iter().map(|k| k.as_str()).collect();
                    self.error_at(
                        kind_value.map_or(0, |v| v.span().start),
                        &format!("{key}.kind"),
                        format!(
                            "unknown kind \"{k}\"; expected one of: {}",
                            names.join(", ")
                        ),
                    );
                    None
                }
            },
            Err(()) => None,
        };
        let inputs_at = keys
            .get("inputs")
            .map_or(value.span().start, |v| v.span().start);
        let inputs = self.strings(&mut keys, "inputs");
        let Some(kind) = kind else {
            // Without a kind the other keys cannot be checked; mark them seen.
            for (k, _) in table {
                keys.get(k.get_ref());
            }
            return None;
        };
        let wrong_section = (section == "sources") != kind.is_source();
        if wrong_section {
            let place = if kind.is_source() {
                "[sources]"
            } else {
                "[stages]"
            };
            self.error_at(
                kind_value.map_or(0, |v| v.span().start),
                &format!("{key}.kind"),
                format!("kind \"{kind}\" belongs under {place}"),
            );
        }
        let (settings, allowed): (Result<NodeSettings, ()>, &[&str]) = match kind {
            NodeKind::Ingest => (
                self.ingest(&mut keys),
                &["kind", "path", "clone_url", "instances"],
            ),
            NodeKind::Filter => (
                self.filter(&mut keys),
                &["kind", "inputs", "judge", "min_problem_chars"],
            ),
            NodeKind::Split => (self.split(&mut keys), &["kind", "inputs", "keep"]),
            NodeKind::Launch => (
                self.launch(&mut keys),
                &[
                    "kind",
                    "inputs",
                    "concurrency",
                    "command_timeout",
                    "test_timeout",
                    "min_pass_ratio",
                    "date_cutoff",
                    "verify_dockerfile",
                ],
            ),
            NodeKind::Validate => (
                self.validate(&mut keys),
                &[
                    "kind",
                    "inputs",
                    "repeats",
                    "concurrency",
                    "test_timeout",
                    "network",
                    "network_repos",
                    "base_run",
                ],
            ),
            NodeKind::Export => (
                self.export(&mut keys),
                &["kind", "inputs", "split", "tag", "rows_per_shard"],
            ),
        };
        if kind.is_source()
            && keys
                .table
                .iter()
                .any(|(k, _)| k.get_ref().as_ref() == "inputs")
        {
            let at = keys
                .table
                .iter()
                .find(|(k, _)| k.get_ref().as_ref() == "inputs")
                .map_or(0, |(k, _)| k.span().start);
            self.error_at(
                at,
                &format!("{key}.inputs"),
                "a source takes no inputs".into(),
            );
        }
        keys.finish(self, allowed);
        Some(Draft {
            key,
            node_name: name.to_string(),
            kind,
            inputs: inputs.unwrap_or_default(),
            inputs_at,
            settings: settings.ok(),
        })
    }

    fn ingest(&mut self, keys: &mut Keys<'_, '_>) -> Result<NodeSettings, ()> {
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
    fn expand_base(&self, template: &str) -> String {
        template.replace("{config_dir}", &self.base.to_string_lossy())
    }

    fn filter(&mut self, keys: &mut Keys<'_, '_>) -> Result<NodeSettings, ()> {
        let judge = self.one_of(keys, "judge", "heuristic", &["heuristic"]);
        let min = self.int(keys, "min_problem_chars", 20, 0, 1_000_000);
        Ok(NodeSettings::Filter(FilterSettings {
            judge: judge?,
            min_problem_chars: min?,
        }))
    }

    fn split(&mut self, keys: &mut Keys<'_, '_>) -> Result<NodeSettings, ()> {
        let keep_value = keys.get("keep");
        let keep = self.strings(keys, "keep")?;
        let keep = if keep.is_empty() && keep_value.is_none() {
            vec!["linux".to_string()]
        } else {
            keep
        };
        for platform in &keep {
            if !["linux", "windows", "macos"].contains(&platform.as_str()) {
                let at = keep_value.map_or(keys.at, |v| v.span().start);
                let path = keys.path("keep");
                self.error_at(
                    at,
                    &path,
                    format!("unknown platform \"{platform}\"; expected linux, windows or macos"),
                );
                return Err(());
            }
        }
        Ok(NodeSettings::Split(SplitSettings { keep }))
    }

    fn launch(&mut self, keys: &mut Keys<'_, '_>) -> Result<NodeSettings, ()> {
        let concurrency = self.int(keys, "concurrency", 2, 1, 256);
        let command_timeout = self.duration(keys, "command_timeout", Duration::from_secs(30 * 60));
        let test_timeout = self.duration(keys, "test_timeout", Duration::from_secs(30 * 60));
        let min_pass_ratio = self.float(keys, "min_pass_ratio", 0.5, 0.0, 1.0);
        let date_cutoff = self.bool(keys, "date_cutoff", true);
        let verify_dockerfile = self.bool(keys, "verify_dockerfile", false);
        Ok(NodeSettings::Launch(LaunchSettings {
            concurrency: concurrency?,
            command_timeout: command_timeout?,
            test_timeout: test_timeout?,
            min_pass_ratio: min_pass_ratio?,
            date_cutoff: date_cutoff?,
            verify_dockerfile: verify_dockerfile?,
        }))
    }

    fn validate(&mut self, keys: &mut Keys<'_, '_>) -> Result<NodeSettings, ()> {
        let repeats = self.int(keys, "repeats", 3, 1, 20);
        let concurrency = self.int(keys, "concurrency", 2, 1, 256);
        let test_timeout = self.duration(keys, "test_timeout", Duration::from_secs(30 * 60));
        let network = self.one_of(keys, "network", "none", &["none", "bridge"]);
        let network_repos = self.strings(keys, "network_repos");
        let base_run = self.bool(keys, "base_run", false);
        Ok(NodeSettings::Validate(ValidateSettings {
            repeats: repeats?,
            concurrency: concurrency?,
            test_timeout: test_timeout?,
            network: network?,
            network_repos: network_repos?,
            base_run: base_run?,
        }))
    }

    fn export(&mut self, keys: &mut Keys<'_, '_>) -> Result<NodeSettings, ()> {
        let split = self.string_or(keys, "split", "test");
        let tag = self.string_or(keys, "tag", "");
        let rows = self.int(keys, "rows_per_shard", 10_000, 1, 10_000_000);
        Ok(NodeSettings::Export(ExportSettings {
            split: split?,
            tag: tag?,
            rows_per_shard: rows?,
        }))
    }

    /// Checks inputs and kinds, and orders the nodes so each comes after its inputs.
    fn check_graph(&mut self, nodes: Vec<Draft>) -> Vec<Node> {
        let by_name: BTreeMap<&str, &Draft> =
            nodes.iter().map(|n| (n.node_name.as_str(), n)).collect();
        for node in &nodes {
            let key = format!("{}.inputs", node.key);
            let at = &node.inputs_at;
            let (required, optional) = node.kind.input_rules();
            let mut kinds_seen: BTreeMap<NodeKind, &str> = BTreeMap::new();
            for input in &node.inputs {
                let Some(target) = by_name.get(input.as_str()) else {
                    let names: Vec<&str> = by_name.keys().copied().collect();
                    let hint = closest(input, &names)
                        .map(|s| format!(" (did you mean `{s}`?)"))
                        .unwrap_or_default();
                    self.error_at(
                        *at,
                        &key,
                        format!("input \"{input}\" is not a declared source or stage{hint}"),
                    );
                    continue;
                };
                if !required.contains(&target.kind) && !optional.contains(&target.kind) {
                    self.error_at(
                        *at,
                        &key,
                        format!(
                            "a {} stage cannot read \"{input}\", a {} node",
                            node.kind, target.kind
                        ),
                    );
                }
                if let Some(other) = kinds_seen.insert(target.kind, input) {
                    self.error_at(
                        *at,
                        &key,
                        format!(
                            "inputs \"{other}\" and \"{input}\" are both {} nodes; name one",
                            target.kind
                        ),
                    );
                }
            }
            for kind in required {
                if !kinds_seen.contains_key(kind) {
                    self.error_at(
                        *at,
                        &key,
                        format!("a {} stage needs an input of kind {kind}", node.kind),
                    );
                }
            }
        }
        // Kahn's algorithm; what is left over lies on a cycle.
        let mut order = Vec::new();
        let mut placed: BTreeSet<String> = BTreeSet::new();
        let mut remaining: Vec<&Draft> = nodes.iter().collect();
        loop {
            let before = remaining.len();
            remaining.retain(|node| {
                let ready = node
                    .inputs
                    .iter()
                    .all(|i| placed.contains(i) || !by_name.contains_key(i.as_str()));
                if ready {
                    placed.insert(node.node_name.clone());
                    if let Some(settings) = &node.settings {
                        order.push(Node {
                            name: node.node_name.clone(),
                            kind: node.kind,
                            inputs: node.inputs.clone(),
                            settings: settings.clone(),
                        });
                    }
                }
                !ready
            });
            if remaining.is_empty() || remaining.len() == before {
                break;
            }
        }
        if !remaining.is_empty() {
            let names: Vec<&str> = remaining.iter().map(|n| n.node_name.as_str()).collect();
            let at = remaining.iter().map(|n| n.inputs_at).min().unwrap_or(0);
            self.error_at(
                at,
                "stages",
                format!("the inputs form a cycle through: {}", names.join(" -> ")),
            );
        }
        order
    }
}

/// Parses `"90s"`, `"30m"`, `"2h"`, `"1h30m"`.
///
/// # Errors
/// A message saying what form is expected.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || {
        format!(
            "\"{text}\" is not a duration; use a number with s, m or h, such as \"90s\" or \"30m\""
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
        let n: u64 = number.parse().map_err(|_| bad())?;
        total = total.saturating_add(n.saturating_mul(unit));
        number.clear();
        any = true;
    }
    if !number.is_empty() || !any || total == 0 {
        return Err(bad());
    }
    Ok(Duration::from_secs(total))
}

/// Parses `"512m"`, `"4g"`, `"1024k"` or a plain byte count into bytes.
///
/// # Errors
/// A message saying what form is expected.
pub fn parse_size(text: &str) -> Result<i64, String> {
    let t = text.trim().to_ascii_lowercase();
    let t = t.strip_suffix('b').unwrap_or(&t);
    let (digits, shift) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 10),
        Some('m') => (&t[..t.len() - 1], 20),
        Some('g') => (&t[..t.len() - 1], 30),
        _ => (t, 0),
    };
    match digits.parse::<i64>() {
        Ok(n) if n > 0 => Ok(n << shift),
        _ => Err(format!(
            "\"{text}\" is not a size; use a number with k, m or g, such as \"4g\""
        )),
    }
}

/// The directory of the config file, absolute: relative paths and `{config_dir}` are anchored
/// there. A bare file name (`--config pipeline.toml`) has an empty parent, which is the current
/// directory.
fn config_dir(path: &Path) -> PathBuf {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    std::path::absolute(parent).unwrap_or_else(|_| parent.to_path_buf())
}

/// The allowed name closest to `name`, when close enough to be a likely typo.
fn closest<'s>(name: &str, allowed: &[&'s str]) -> Option<&'s str> {
    allowed
        .iter()
        .map(|a| (edit_distance(name, a), *a))
        .filter(|(d, a)| *d <= 2.max(a.len() / 4))
        .min_by_key(|(d, _)| *d)
        .map(|(_, a)| a)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            current.push(
                (previous[j] + cost)
                    .min(previous[j + 1] + 1)
                    .min(current[j] + 1),
            );
        }
        previous = current;
    }
    previous[b.len()]
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
        let pipeline = compile(GOOD).unwrap_or_else(|e| panic!("{e}"));
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
        let pipeline =
            Pipeline::compile(Path::new("pipeline.toml"), &text).unwrap_or_else(|e| panic!("{e}"));
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
    }

    #[test]
    fn dot_lists_every_edge() {
        let pipeline = compile(GOOD).unwrap_or_else(|e| panic!("{e}"));
        let dot = pipeline.to_dot();
        assert!(dot.contains("\"tasks\" -> \"validate\""));
        assert!(dot.contains("\"launch\" -> \"export\""));
    }
}
