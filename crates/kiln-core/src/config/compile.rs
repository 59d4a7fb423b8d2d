//! The dispatcher on top of the tables' compilers: the parse, the root table's keys, each node
//! handed to the compiler of its kind, and the graph check.
//!
//! Each table's compiler is a method its own module (`dataset`, `docker`, `lm`, `sources`,
//! `stages`) adds to [`Compiler`], beside the list of keys that table may hold; this module
//! calls them and imports their key lists, and none of them imports this one.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use toml::de::DeTable;

use super::hash::hex_sha256;
use super::lm::LmSettings;
use super::node::{Node, NodeKind, NodeSettings, node_name_problem};
use super::pipeline::Pipeline;
use super::read::{Compiler, ConfigError, ConfigErrors, Keys, Table, Value, closest, cut};
use super::{sources, stages};

/// Keys of the root table.
const ROOT_KEYS: &[&str] = &["dataset", "docker", "lm", "sources", "stages"];

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
        let mut cx = Compiler::new(path, text);
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
}

/// A node as declared, before the graph is checked; `settings` is `None` when they had errors.
struct Draft {
    key: String,
    node_name: String,
    kind: NodeKind,
    inputs: Vec<String>,
    inputs_at: usize,
    settings: Option<NodeSettings>,
}

impl Compiler<'_> {
    /// Compiles the root table: `[dataset]`, `[docker]` and `[lm]` first, then every node.
    fn compile_root(&mut self, root: &Table<'_>) -> Option<Pipeline> {
        let mut keys = Keys::new(root, "", 0);
        let dataset = self.dataset(keys.get("dataset"));
        let docker = self.docker(keys.get("docker"));
        let lm = self.lm(keys.get("lm"));
        // Compiled before the nodes that use it: `None` when absent, `Err` when it had errors
        // (already reported, so the nodes do not report it missing).
        let lm_table = lm.clone().transpose();
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
                if let Err(problem) = node_name_problem(&name_str) {
                    self.error_at(name.span().start, &key, problem);
                    continue;
                }
                if names.insert(name_str.clone(), name.span().start).is_some() {
                    self.error_at(
                        name.span().start,
                        &key,
                        "a source or stage with this name is already declared".into(),
                    );
                    continue;
                }
                if let Some(draft) = self.node(section, &name_str, value, lm_table.as_ref()) {
                    nodes.push(draft);
                }
            }
        }
        keys.finish(self, ROOT_KEYS);
        if nodes.is_empty() && self.errors.is_empty() {
            self.error_at(0, "", "no sources or stages are declared".into());
        }
        let nodes = self.check_graph(nodes, &names);
        Some(Pipeline {
            path: self.file.clone(),
            text: self.text.to_string(),
            hash: hex_sha256(self.text.as_bytes()),
            dataset: dataset?,
            docker: docker?,
            lm: lm.ok()?,
            nodes,
            requirements: std::mem::take(&mut self.requirements),
            shard: None,
        })
    }

    fn node(
        &mut self,
        section: &str,
        name: &str,
        value: &Value<'_>,
        lm: Option<&Result<LmSettings, ()>>,
    ) -> Option<Draft> {
        self.current_node = Some(name.to_string());
        let draft = self.node_inner(section, name, value, lm);
        self.current_node = None;
        draft
    }

    fn node_inner(
        &mut self,
        section: &str,
        name: &str,
        value: &Value<'_>,
        lm: Option<&Result<LmSettings, ()>>,
    ) -> Option<Draft> {
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
                            "unknown kind \"{}\"; expected one of: {}",
                            cut(&k),
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
        // Each kind's compiler owns its settings and the keys its table may hold.
        let (settings, allowed): (Result<NodeSettings, ()>, &[&str]) = match kind {
            NodeKind::Ingest => (
                self.ingest(&mut keys).map(NodeSettings::Ingest),
                sources::INGEST_KEYS,
            ),
            NodeKind::Crawl => (
                self.crawl(&mut keys).map(NodeSettings::Crawl),
                sources::CRAWL_KEYS,
            ),
            NodeKind::Filter => (
                self.filter(&mut keys, lm).map(NodeSettings::Filter),
                stages::FILTER_KEYS,
            ),
            NodeKind::Split => (
                self.split(&mut keys, lm).map(NodeSettings::Split),
                stages::SPLIT_KEYS,
            ),
            NodeKind::Launch => (
                self.launch(&mut keys, lm).map(NodeSettings::Launch),
                stages::LAUNCH_KEYS,
            ),
            NodeKind::Validate => (
                self.validate(&mut keys).map(NodeSettings::Validate),
                stages::VALIDATE_KEYS,
            ),
            NodeKind::Export => (
                self.export(&mut keys).map(NodeSettings::Export),
                stages::EXPORT_KEYS,
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

    /// Checks inputs and kinds, and orders the nodes so each comes after its inputs. An input
    /// naming a declared node that did not compile (an unknown kind) has its error at that
    /// node already: it is not reported again, nor are the roles it may have filled.
    fn check_graph(&mut self, nodes: Vec<Draft>, declared: &BTreeMap<String, usize>) -> Vec<Node> {
        let by_name: BTreeMap<&str, &Draft> =
            nodes.iter().map(|n| (n.node_name.as_str(), n)).collect();
        for node in &nodes {
            let key = format!("{}.inputs", node.key);
            let at = &node.inputs_at;
            let (required, optional) = node.kind.input_rules();
            let mut roles_seen: BTreeMap<NodeKind, &str> = BTreeMap::new();
            let mut unknown_roles = false;
            for input in &node.inputs {
                if !by_name.contains_key(input.as_str()) && declared.contains_key(input) {
                    unknown_roles = true;
                    continue;
                }
                let Some(target) = by_name.get(input.as_str()) else {
                    let names: Vec<&str> = by_name.keys().copied().collect();
                    let hint = closest(input, &names)
                        .map(|s| format!(" (did you mean `{s}`?)"))
                        .unwrap_or_default();
                    self.error_at(
                        *at,
                        &key,
                        format!(
                            "input \"{}\" is not a declared source or stage{hint}",
                            cut(input)
                        ),
                    );
                    continue;
                };
                let role = target.kind.role();
                if !required.contains(&role) && !optional.contains(&role) {
                    self.error_at(
                        *at,
                        &key,
                        format!(
                            "a {} stage cannot read \"{}\", a {} node",
                            node.kind,
                            cut(input),
                            target.kind
                        ),
                    );
                }
                if let Some(other) = roles_seen.insert(role, input) {
                    let what = if role == NodeKind::Ingest {
                        "sources".to_string()
                    } else {
                        format!("{role} nodes")
                    };
                    self.error_at(
                        *at,
                        &key,
                        format!(
                            "inputs \"{}\" and \"{}\" are both {what}; name one",
                            cut(other),
                            cut(input)
                        ),
                    );
                }
            }
            for role in required {
                if !unknown_roles && !roles_seen.contains_key(role) {
                    self.error_at(
                        *at,
                        &key,
                        format!("a {} stage needs {}", node.kind, role.role_name()),
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

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use crate::config::docker::is_image_prefix;
    use crate::config::node::{Node, NodeSettings};
    use crate::config::pipeline::Pipeline;
    use crate::config::read::ConfigErrors;
    use crate::config::stages::{FrozenChoice, FrozenSplit};
    use crate::config::units::{parse_duration, parse_size};

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
        assert_eq!(v.tests.network, "none");
    }

    #[test]
    fn launch_and_validate_name_the_network_of_their_test_runs_alike() {
        use crate::NetworkMode;
        let text = GOOD.replace(
            "inputs = [\"tasks\"]\n",
            "inputs = [\"tasks\"]\nnetwork_repos = [\"o/needs-net\"]\n",
        );
        let pipeline = compile(&text).unwrap();
        let Some(NodeSettings::Launch(launch)) = pipeline.node("launch").map(|n| &n.settings)
        else {
            panic!("launch settings missing");
        };
        assert_eq!(launch.tests.for_repo("o/needs-net"), NetworkMode::Bridge);
        assert_eq!(launch.tests.for_repo("o/other"), NetworkMode::None);
        let Some(NodeSettings::Validate(validate)) = pipeline.node("validate").map(|n| &n.settings)
        else {
            panic!("validate settings missing");
        };
        assert_eq!(validate.tests.for_repo("o/needs-net"), NetworkMode::None);
        let text = GOOD.replace(
            "inputs = [\"tasks\"]\n",
            "inputs = [\"tasks\"]\nnetwork = \"host\"\n",
        );
        let error = errors(&text);
        assert!(error.contains("stages.launch.network"), "{error}");
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
    fn a_stage_of_an_unknown_kind_is_one_error_not_one_per_reader() {
        let text = GOOD.replace(
            "kind = \"launch\"\ninputs = [\"tasks\"]",
            "kind = \"lunch\"\ninputs = [\"tasks\"]",
        );
        let message = errors(&text);
        assert!(
            message.contains("stages.launch.kind: unknown kind \"lunch\""),
            "{message}"
        );
        assert_eq!(message.lines().count(), 1, "{message}");
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
    fn export_formats_are_parquet_unless_harbor_is_listed_and_bad_ones_are_located() {
        let export = |text: &str| -> crate::config::ExportSettings {
            match compile(text)
                .unwrap()
                .node("export")
                .map(|n| n.settings.clone())
            {
                Some(NodeSettings::Export(export)) => export,
                other => panic!("no export: {other:?}"),
            }
        };
        use crate::config::ExportFormat;
        let plain = export(GOOD);
        assert_eq!(plain.formats, [ExportFormat::Parquet]);
        assert!(!plain.writes(ExportFormat::Harbor) && !plain.harbor_hints);
        let both = export(&format!(
            "{GOOD}formats = [\"parquet\", \"harbor\"]\nharbor_hints = true\n"
        ));
        assert!(both.writes(ExportFormat::Harbor) && both.harbor_hints);

        // Each bad value is named with the file, its line and column, and the key.
        let lines = GOOD.lines().count();
        let message = errors(&format!("{GOOD}formats = [\"parquet\", \"harbour\", 3]\n"));
        assert_eq!(
            message,
            format!(
                "/cfg/pipeline.toml:{line}:23: stages.export.formats: unknown format \"harbour\"; expected one of: parquet, harbor\n\
                 /cfg/pipeline.toml:{line}:34: stages.export.formats: unknown format integer; expected one of: parquet, harbor",
                line = lines + 1
            )
        );
        for (text, expected) in [
            (
                "formats = [\"harbor\"]\n",
                "stages.export.formats: a release is always written as Parquet",
            ),
            (
                "formats = \"harbor\"\n",
                "stages.export.formats: expected an array of formats (parquet, harbor), found string",
            ),
            (
                "formats = [\"parquet\", \"parquet\"]\n",
                "stages.export.formats: \"parquet\" is listed twice",
            ),
            (
                "harbor_hints = true\n",
                "stages.export.harbor_hints: there are no Harbor tasks to give hints to",
            ),
            (
                "formats = [\"parquet\", \"harbor\"]\nharbor_hint = true\n",
                "stages.export.harbor_hint: unknown key (did you mean `harbor_hints`?)",
            ),
        ] {
            let message = errors(&format!("{GOOD}{text}"));
            assert!(message.contains(expected), "{text}: {message}");
            assert!(message.starts_with("/cfg/pipeline.toml:"), "{message}");
            assert_eq!(message.lines().count(), 1, "{message}");
        }
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
                "name = \"demo\"",
                "name = \"demo\"\n[docker]\nregistry = \"kiln\"",
                "docker.registry: \"kiln\" is not a registry and prefix",
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
    fn a_missing_task_file_is_an_environment_error_of_its_source() {
        let pipeline = compile(&GOOD.replace(
            "path = \"tasks.jsonl\"",
            "path = \"/nonexistent/tasks.jsonl\"",
        ))
        .unwrap();
        let message = pipeline
            .check_environment(Some(&["tasks"]), &|_| true)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            message
                .ends_with("sources.tasks.path: /nonexistent/tasks.jsonl cannot be read as a file"),
            "{message}"
        );
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
        // A task file that exists: only the bundle is missing.
        let tasks = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
        let text = GOOD
            .replace(
                "name = \"demo\"\n",
                "name = \"demo\"\n[docker]\nca_bundle = \"/nonexistent/ca.pem\"\n",
            )
            .replace("path = \"tasks.jsonl\"", &format!("path = {tasks:?}"));
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

/// Tests of the `[lm]` table and the stages that ask it.
#[cfg(test)]
mod lm_tests {
    use std::path::Path;

    use crate::config::node::{Node, NodeSettings};
    use crate::config::pipeline::Pipeline;

    const BASE: &str = r#"
[dataset]
name = "demo"

[sources.tasks]
kind = "ingest"
path = "tasks.jsonl"
"#;

    fn compile(extra: &str) -> Result<Pipeline, String> {
        Pipeline::compile(Path::new("/cfg/pipeline.toml"), &format!("{BASE}{extra}"))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn an_lm_filter_and_split_compile_with_the_endpoint_in_their_settings() {
        let pipeline = compile(
            r#"
[lm]
base_url = "http://localhost:8000/v1/"
model = "qwen"
api_key_env = "VLLM_KEY"
timeout = "30s"
max_cost_usd = 2.5
prices."qwen" = { prompt = 0.1, completion = 0.3 }
prices."judge-b" = { prompt = 1, completion = 2 }

[stages.filter]
kind = "filter"
inputs = ["tasks"]
judge = "lm"
votes = 3
models = ["qwen", "judge-b"]
drop_flags = ["image-only"]

[stages.split]
kind = "split"
inputs = ["tasks", "filter"]
judge = "lm"
"#,
        )
        .unwrap();
        let lm = pipeline.lm.clone().expect("no [lm]");
        assert_eq!(lm.base_url, "http://localhost:8000/v1");
        assert_eq!(lm.api_key_env, "VLLM_KEY");
        assert_eq!(lm.max_cost_usd, Some(2.5));
        assert_eq!(lm.price("judge-b").map(|p| p.cost(1_000_000, 0)), Some(1.0));
        let Some(NodeSettings::Filter(filter)) = pipeline.node("filter").map(|n| &n.settings)
        else {
            panic!("filter settings missing");
        };
        assert_eq!(filter.votes, 3);
        assert_eq!(filter.models, ["qwen", "judge-b"]);
        assert_eq!(filter.lm.as_ref(), Some(&lm));
        let Some(NodeSettings::Split(split)) = pipeline.node("split").map(|n| &n.settings) else {
            panic!("split settings missing");
        };
        assert_eq!(
            split.model.as_deref(),
            Some("qwen"),
            "[lm] model by default"
        );
        assert!(pipeline.nodes.iter().filter(|n| n.uses_lm()).count() == 2);
        // The settings hash changes with the endpoint, so answers of another model are not kept.
        let other = compile(
            &pipeline
                .text
                .replace(BASE, "")
                .replace("localhost:8000", "localhost:9000"),
        )
        .unwrap();
        assert_ne!(
            pipeline.node("filter").map(Node::settings_hash),
            other.node("filter").map(Node::settings_hash)
        );
    }

    #[test]
    fn the_launch_agent_takes_the_endpoint_and_its_budgets() {
        let pipeline = compile(
            r#"
[lm]
base_url = "http://localhost:8000/v1"
model = "qwen"

[stages.launch]
kind = "launch"
inputs = ["tasks"]
agent = true
agent_max_steps = 12
agent_timeout = "5m"
"#,
        )
        .unwrap();
        let Some(NodeSettings::Launch(launch)) = pipeline.node("launch").map(|n| &n.settings)
        else {
            panic!("launch settings missing");
        };
        let agent = launch.agent.as_ref().expect("agent on");
        assert_eq!(agent.model, "qwen");
        assert_eq!(agent.max_steps, 12);
        assert_eq!(agent.timeout, std::time::Duration::from_secs(300));
        assert!((agent.max_cost_usd - 1.0).abs() < 1e-9);
        assert!(launch.recipes);
        assert!(pipeline.node("launch").is_some_and(Node::uses_lm));
    }

    #[test]
    fn an_agent_without_an_endpoint_or_agent_keys_without_the_agent_are_errors() {
        let message =
            compile("[stages.launch]\nkind = \"launch\"\ninputs = [\"tasks\"]\nagent = true\n")
                .unwrap_err();
        assert!(
            message.contains("stages.launch.agent: the launch agent needs an [lm] table"),
            "{message}"
        );
        let message = compile(
            "[stages.launch]\nkind = \"launch\"\ninputs = [\"tasks\"]\nagent_max_steps = 3\n",
        )
        .unwrap_err();
        assert!(
            message.contains("stages.launch.agent_max_steps: applies only with agent = true"),
            "{message}"
        );
    }

    #[test]
    fn lm_mistakes_are_located_and_secrets_refused() {
        let message = compile(
            r#"
[lm]
base_url = "https://user:sk-secret@api.example.com/v1"
model = "m"
api_key = "sk-secret"
api_key_env = "sk-secret"
prices.other = { prompt = 1 }

[stages.filter]
kind = "filter"
inputs = ["tasks"]
judge = "lm"
drop_flags = ["typo-flag"]

[stages.filter2]
kind = "filter"
inputs = ["tasks"]
votes = 3
"#,
        )
        .err()
        .unwrap_or_default();
        let expected = [
            "/cfg/pipeline.toml:10:12: lm.base_url: credentials do not belong in the URL",
            "/cfg/pipeline.toml:12:11: lm.api_key: an API key does not belong in the config",
            "/cfg/pipeline.toml:13:15: lm.api_key_env: must be the name of an environment variable",
            "/cfg/pipeline.toml:14:16: lm.prices.\"other\": give both `prompt` and `completion`",
            "/cfg/pipeline.toml:20:14: stages.filter.drop_flags: unknown flag \"typo-flag\"",
            "/cfg/pipeline.toml:25:9: stages.filter2.votes: applies only to judge = \"lm\"",
        ];
        for line in expected {
            assert!(message.contains(line), "missing {line:?} in:\n{message}");
        }
        assert_eq!(message.lines().count(), expected.len(), "{message}");
        let message = compile(
            "[lm]\nbase_url = \"http://x/v1\"\nmodel = \"m\"\nmax_cost_usd = 1.0\n\
             [stages.filter]\nkind = \"filter\"\ninputs = [\"tasks\"]\njudge = \"lm\"\n",
        )
        .err()
        .unwrap_or_default();
        assert!(
            message.contains("/cfg/pipeline.toml:15:9: stages.filter.judge: [lm] sets max_cost_usd, so every model needs a price in [lm.prices]; missing: m"),
            "{message}"
        );
        assert!(
            !message.contains("sk-secret"),
            "no error repeats a key: {message}"
        );
        let message =
            compile("[stages.filter]\nkind = \"filter\"\ninputs = [\"tasks\"]\njudge = \"lm\"\n")
                .err()
                .unwrap_or_default();
        assert!(
            message.contains("stages.filter.judge: judge \"lm\" needs an [lm] table"),
            "{message}"
        );
    }
}
