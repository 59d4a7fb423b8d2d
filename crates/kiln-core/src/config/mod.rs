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
pub use stages::{ExportSettings, FilterSettings, LaunchSettings, SplitSettings, ValidateSettings};

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
                Need::File(path) if std::fs::File::open(path).is_err() => {
                    Some(format!("{} cannot be read", path.display()))
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

/// A config value cut for messages: a typo is worth echoing, a 10 MB value is not.
fn cut(text: &str) -> String {
    const MAX: usize = 80;
    match text.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}... ({} bytes)", &text[..at], text.len()),
        None => text.to_string(),
    }
}

/// Lowercase hex SHA-256 of bytes.
#[must_use]
pub fn hex_sha256(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
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
        let pipeline = compile(CRAWL).unwrap_or_else(|e| panic!("{e}"));
        let Some(NodeSettings::Crawl(crawl)) = pipeline.node("github").map(|n| &n.settings) else {
            panic!("crawl settings missing");
        };
        assert_eq!(crawl.since, "2024-12-01T00:00:00Z");
        assert_eq!(crawl.until.as_deref(), Some("2025-01-01T00:00:00Z"));
        assert_eq!(crawl.api_url, "https://api.github.com");
        assert_eq!(crawl.clone_url, "https://github.com/{repo}.git");
        assert_eq!(crawl.max_files, 50);
        let filter = pipeline
            .node("filter")
            .unwrap_or_else(|| panic!("no filter"));
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
        let pipeline = compile(&text).unwrap_or_else(|e| panic!("{e}"));
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
    fn a_missing_ca_bundle_is_an_environment_error_of_the_container_stages() {
        let text = GOOD.replace(
            "name = \"demo\"\n",
            "name = \"demo\"\n[docker]\nca_bundle = \"/nonexistent/ca.pem\"\n",
        );
        let pipeline = compile(&text).unwrap_or_else(|e| panic!("{e}"));
        let message = pipeline
            .check_environment(None, &|_| true)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            message.ends_with("docker.ca_bundle: /nonexistent/ca.pem cannot be read"),
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
