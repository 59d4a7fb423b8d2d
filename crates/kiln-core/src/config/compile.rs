//! The compiler's machinery: walking TOML tables key by key, typed key readers that report
//! located errors, the `[dataset]` and `[docker]` tables, node dispatch and the graph check.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::ops::{RangeFull, RangeInclusive};
use std::path::{Path, PathBuf};
use std::time::Duration;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::lm::LmSettings;
use super::{
    ConfigError, DatasetSettings, DockerSettings, Need, Node, NodeKind, NodeSettings, Pipeline,
    Requirement, hex_sha256, parse_duration, parse_size,
};

pub(super) type Table<'a> = DeTable<'a>;
pub(super) type Value<'a> = Spanned<DeValue<'a>>;

/// A node as declared, before the graph is checked; `settings` is `None` when they had errors.
pub(super) struct Draft {
    key: String,
    node_name: String,
    kind: NodeKind,
    inputs: Vec<String>,
    inputs_at: usize,
    settings: Option<NodeSettings>,
}

pub(super) struct Compiler<'t> {
    pub(super) file: PathBuf,
    pub(super) text: &'t str,
    pub(super) base: PathBuf,
    pub(super) errors: Vec<ConfigError>,
    /// What the config needs from the machine it runs on, checked apart from compiling.
    pub(super) requirements: Vec<Requirement>,
    /// The node being compiled, for the requirements it declares.
    pub(super) current_node: Option<String>,
    /// The `[lm]` table, compiled before the nodes that use it: `None` when absent, `Err` when
    /// it had errors (already reported, so the nodes do not report it missing).
    pub(super) lm: Option<Result<LmSettings, ()>>,
}

/// Reads the keys of one table, remembering which were consumed so the rest are reported unknown.
pub(super) struct Keys<'a, 'b> {
    pub(super) table: &'b Table<'a>,
    pub(super) prefix: String,
    /// Span of the table header, for "missing key" errors.
    pub(super) at: usize,
    seen: BTreeSet<String>,
}

impl<'a, 'b> Keys<'a, 'b> {
    pub(super) fn new(table: &'b Table<'a>, prefix: &str, at: usize) -> Self {
        Self {
            table,
            prefix: prefix.to_string(),
            at,
            seen: BTreeSet::new(),
        }
    }

    pub(super) fn get(&mut self, key: &str) -> Option<&'b Value<'a>> {
        self.seen.insert(key.to_string());
        self.table
            .iter()
            .find(|(k, _)| k.get_ref().as_ref() == key)
            .map(|(_, v)| v)
    }

    pub(super) fn path(&self, key: &str) -> String {
        if self.prefix.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.prefix)
        }
    }

    /// Reports keys that were never asked for.
    pub(super) fn finish(self, cx: &mut Compiler<'_>, allowed: &[&str]) {
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

/// A type a key's value is read as by [`Compiler::read`].
pub(super) trait FromValue: Sized {
    /// The value as this type, or the message that says what was expected instead.
    fn from_value(value: &DeValue<'_>) -> Result<Self, String>;
}

impl FromValue for i64 {
    fn from_value(value: &DeValue<'_>) -> Result<Self, String> {
        value
            .as_integer()
            .and_then(|i| i64::from_str_radix(&i.as_str().replace('_', ""), i.radix()).ok())
            .ok_or_else(|| format!("expected an integer, found {}", value.type_str()))
    }
}

/// A number: a float, or an integer read as one.
impl FromValue for f64 {
    fn from_value(value: &DeValue<'_>) -> Result<Self, String> {
        match value {
            DeValue::Float(f) => f.as_str().replace('_', "").parse::<f64>().ok(),
            DeValue::Integer(i) => i.as_str().replace('_', "").parse::<f64>().ok(),
            _ => None,
        }
        .ok_or_else(|| format!("expected a number, found {}", value.type_str()))
    }
}

impl FromValue for bool {
    fn from_value(value: &DeValue<'_>) -> Result<Self, String> {
        value
            .as_bool()
            .ok_or_else(|| format!("expected true or false, found {}", value.type_str()))
    }
}

impl FromValue for String {
    fn from_value(value: &DeValue<'_>) -> Result<Self, String> {
        value
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| format!("expected a string, found {}", value.type_str()))
    }
}

/// The values of its type a key admits: `..` (all of them) or `min..=max`.
pub(super) trait Bounds<T> {
    /// The message saying why `value` is not admitted, if it is not.
    fn check(&self, value: &T) -> Result<(), String>;
}

impl<T> Bounds<T> for RangeFull {
    fn check(&self, _: &T) -> Result<(), String> {
        Ok(())
    }
}

impl<T: PartialOrd + fmt::Display> Bounds<T> for RangeInclusive<T> {
    fn check(&self, value: &T) -> Result<(), String> {
        if self.contains(value) {
            Ok(())
        } else {
            Err(format!(
                "{value} is out of range {}..={}",
                self.start(),
                self.end()
            ))
        }
    }
}

/// A duration key: a string that [`parse_duration`] reads.
impl FromValue for Duration {
    fn from_value(value: &DeValue<'_>) -> Result<Self, String> {
        match value.as_str() {
            Some(text) => parse_duration(text),
            None => Err("expected a duration string such as \"90s\", \"30m\" or \"2h\"".into()),
        }
    }
}

impl Compiler<'_> {
    pub(super) fn error_at(&mut self, offset: usize, key: &str, message: String) {
        // Every value a message quotes is cut where it is quoted; this is the backstop that keeps
        // a message one readable line whatever a config holds (keys are text from the file too).
        const MAX_MESSAGE: usize = 600;
        let key = super::cut_long(key, 120);
        let message = if message.len() > MAX_MESSAGE || message.contains(['\n', '\r']) {
            super::cut_long(&message, MAX_MESSAGE)
        } else {
            message
        };
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

    pub(super) fn compile_root(&mut self, root: &Table<'_>) -> Option<Pipeline> {
        let mut keys = Keys::new(root, "", 0);
        let dataset = self.dataset(keys.get("dataset"));
        let docker = self.docker(keys.get("docker"));
        let lm = self.lm(keys.get("lm"));
        self.lm = lm.clone().transpose();
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
                if let Err(problem) = super::node_name_problem(&name_str) {
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
                if let Some(draft) = self.node(section, &name_str, value) {
                    nodes.push(draft);
                }
            }
        }
        keys.finish(self, &["dataset", "docker", "lm", "sources", "stages"]);
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
            lm: lm.ok()?,
            nodes,
            requirements: std::mem::take(&mut self.requirements),
        })
    }

    /// Records that the config needs `need` from its environment, located at `offset`.
    pub(super) fn require(&mut self, offset: usize, key: &str, need: Need) {
        let offset = offset.min(self.text.len());
        let before = &self.text[..offset];
        let line = before.matches('\n').count() + 1;
        let column = before
            .rfind('\n')
            .map_or(offset, |nl| offset - nl - 1)
            .saturating_add(1);
        self.requirements.push(Requirement {
            node: self.current_node.clone(),
            key: key.to_string(),
            line,
            column,
            need,
        });
    }

    pub(super) fn table<'a, 'b>(
        &mut self,
        value: &'b Value<'a>,
        key: &str,
    ) -> Option<&'b Table<'a>> {
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

    /// The value of `key` as a `T` that `bounds` admits, `None` when the key is absent;
    /// `Err(())` when it is present but wrong (reported at the value).
    pub(super) fn read_optional<T: FromValue>(
        &mut self,
        keys: &mut Keys<'_, '_>,
        key: &str,
        bounds: impl Bounds<T>,
    ) -> Result<Option<T>, ()> {
        let Some(value) = keys.get(key) else {
            return Ok(None);
        };
        let read =
            T::from_value(value.get_ref()).and_then(|read| bounds.check(&read).map(|()| read));
        match read {
            Ok(read) => Ok(Some(read)),
            Err(message) => {
                let path = keys.path(key);
                self.error_at(value.span().start, &path, message);
                Err(())
            }
        }
    }

    /// The value of `key` as a `T` that `bounds` admits, `default` when the key is absent;
    /// `Err(())` when it is present but wrong (reported at the value).
    pub(super) fn read<T: FromValue>(
        &mut self,
        keys: &mut Keys<'_, '_>,
        key: &str,
        default: T,
        bounds: impl Bounds<T>,
    ) -> Result<T, ()> {
        Ok(self.read_optional(keys, key, bounds)?.unwrap_or(default))
    }

    /// A string key: `None` when absent, `Some(None)` when present but not a string (reported).
    pub(super) fn string(&mut self, keys: &mut Keys<'_, '_>, key: &str) -> Option<Option<String>> {
        match self.read_optional(keys, key, ..) {
            Ok(None) => None,
            Ok(Some(s)) => Some(Some(s)),
            Err(()) => Some(None),
        }
    }

    /// A string key with a default; `Err(())` when present but wrong (already reported).
    pub(super) fn string_or(
        &mut self,
        keys: &mut Keys<'_, '_>,
        key: &str,
        default: &str,
    ) -> Result<String, ()> {
        self.read(keys, key, default.to_string(), ..)
    }

    pub(super) fn required_string(
        &mut self,
        keys: &mut Keys<'_, '_>,
        key: &str,
    ) -> Result<String, ()> {
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

    pub(super) fn strings(
        &mut self,
        keys: &mut Keys<'_, '_>,
        key: &str,
    ) -> Result<Vec<String>, ()> {
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
            match String::from_value(item.get_ref()) {
                Ok(s) => out.push(s),
                Err(message) => {
                    self.error_at(item.span().start, &path, message);
                    ok = false;
                }
            }
        }
        if ok { Ok(out) } else { Err(()) }
    }

    pub(super) fn one_of(
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
                    "unknown value \"{}\"; expected one of: {}",
                    super::cut(&s),
                    allowed.join(", ")
                ),
            );
            Err(())
        }
    }

    pub(super) fn path_value(&self, raw: &str) -> PathBuf {
        let path = PathBuf::from(raw);
        if path.is_absolute() {
            path
        } else {
            self.base.join(path)
        }
    }

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
            && !super::is_dataset_name(text)
        {
            let at = keys.get("name").map_or(0, |v| v.span().start);
            self.error_at(
                at,
                "dataset.name",
                format!(
                    "\"{}\" is not a dataset name: use 1 to 100 letters, digits, `-`, `_` and `.`, \
                     not starting with `.`",
                    super::cut(text)
                ),
            );
        }
        let root = self.string_or(&mut keys, "root", "datasets");
        keys.finish(self, &["name", "root"]);
        Some(DatasetSettings {
            name: name.ok()?,
            root: self.path_value(&root.ok()?),
        })
    }

    pub(super) fn docker(&mut self, value: Option<&Value<'_>>) -> Option<DockerSettings> {
        let defaults = DockerSettings::default();
        let Some(value) = value else {
            return Some(defaults);
        };
        let table = self.table(value, "docker")?;
        let mut keys = Keys::new(table, "docker", value.span().start);
        let ca_bundle_at = keys.get("ca_bundle").map_or(0, |v| v.span().start);
        let ca_bundle = match self.string(&mut keys, "ca_bundle") {
            Some(Some(s)) => {
                let path = self.path_value(&s);
                self.require(ca_bundle_at, "docker.ca_bundle", Need::File(path.clone()));
                Ok(Some(path))
            }
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
        let cpus = self.read(&mut keys, "cpus", defaults.cpus, 0.1..=1024.0);
        let pids = self.read(&mut keys, "pids", defaults.pids, 64..=1 << 22);
        let image_prefix_at = keys.get("image_prefix").map_or(0, |v| v.span().start);
        let image_prefix = self
            .string_or(&mut keys, "image_prefix", &defaults.image_prefix)
            .and_then(|prefix| {
                if super::is_image_prefix(&prefix) {
                    Ok(prefix)
                } else {
                    self.error_at(
                        image_prefix_at,
                        "docker.image_prefix",
                        format!(
                            "\"{}\" is not an image repository prefix: lowercase path components \
                             (letters, digits, `.`, `_`, `-`) joined by `/`, optionally after a \
                             registry host such as `registry.example.com:5000/`",
                            super::cut(&prefix)
                        ),
                    );
                    Err(())
                }
            });
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

    pub(super) fn node(&mut self, section: &str, name: &str, value: &Value<'_>) -> Option<Draft> {
        self.current_node = Some(name.to_string());
        let draft = self.node_inner(section, name, value);
        self.current_node = None;
        draft
    }

    fn node_inner(&mut self, section: &str, name: &str, value: &Value<'_>) -> Option<Draft> {
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
                            super::cut(&k),
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
            NodeKind::Crawl => (self.crawl(&mut keys), super::sources::CRAWL_KEYS),
            NodeKind::Filter => (
                self.filter(&mut keys),
                &[
                    "kind",
                    "inputs",
                    "judge",
                    "min_problem_chars",
                    "max_patch_lines",
                    "votes",
                    "models",
                    "drop_flags",
                ],
            ),
            NodeKind::Split => (
                self.split(&mut keys),
                &["kind", "inputs", "keep", "judge", "model"],
            ),
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
                    "test_scope",
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
                &[
                    "kind",
                    "inputs",
                    "split",
                    "tag",
                    "rows_per_shard",
                    "license",
                    "image_registry",
                    "frozen",
                ],
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

    /// Checks inputs and kinds, and orders the nodes so each comes after its inputs.
    pub(super) fn check_graph(&mut self, nodes: Vec<Draft>) -> Vec<Node> {
        let by_name: BTreeMap<&str, &Draft> =
            nodes.iter().map(|n| (n.node_name.as_str(), n)).collect();
        for node in &nodes {
            let key = format!("{}.inputs", node.key);
            let at = &node.inputs_at;
            let (required, optional) = node.kind.input_rules();
            let mut roles_seen: BTreeMap<NodeKind, &str> = BTreeMap::new();
            for input in &node.inputs {
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
                            super::cut(input)
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
                            super::cut(input),
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
                            super::cut(other),
                            super::cut(input)
                        ),
                    );
                }
            }
            for role in required {
                if !roles_seen.contains_key(role) {
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

/// The directory of the config file, absolute: relative paths and `{config_dir}` are anchored
/// there. A bare file name (`--config pipeline.toml`) has an empty parent, which is the current
/// directory.
pub(super) fn config_dir(path: &Path) -> PathBuf {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    std::path::absolute(parent).unwrap_or_else(|_| parent.to_path_buf())
}

/// The allowed name closest to `name`, when close enough to be a likely typo.
pub(super) fn closest<'s>(name: &str, allowed: &[&'s str]) -> Option<&'s str> {
    let limit = |a: &str| 2.max(a.len() / 4);
    allowed
        .iter()
        // The distance is at least the difference in length: a name far longer than every
        // allowed one (a 10 MB key) is no typo, and is not compared character by character.
        .filter(|a| name.len().abs_diff(a.len()) <= limit(a))
        .map(|a| (edit_distance(name, a), *a))
        .filter(|(d, a)| *d <= limit(a))
        .min_by_key(|(d, _)| *d)
        .map(|(_, a)| a)
}

pub(super) fn edit_distance(a: &str, b: &str) -> usize {
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
