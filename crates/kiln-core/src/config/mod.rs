//! The pipeline config (`pipeline.toml`) and its compiler.
//!
//! Compiling happens before anything runs, in two passes like vector's topology: the raw TOML is
//! walked key by key into typed settings, and then the graph is checked (inputs exist, kinds fit,
//! no cycles). Every error of both passes is collected and reported at once, each with the file,
//! line, column and dotted key it concerns. Unknown keys are errors: a typo must not be silence.

mod compile;
mod sources;
mod stages;

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use sha2::{Digest, Sha256};
use toml::de::DeTable;

use compile::{Compiler, config_dir};
pub use sources::IngestSettings;
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
}
