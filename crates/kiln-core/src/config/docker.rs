//! The `[docker]` table: container settings shared by launch and validate.

use std::path::PathBuf;

use serde::Serialize;

use super::read::{Compiler, Keys, Need, Value, cut};
use super::units::parse_size;
use crate::runtime::Limits;

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
    /// Bytes each container may write, past which it is stopped (`disk`).
    pub disk_bytes: i64,
    /// Prefix of the environment image tags (`<prefix>/<dataset>-<directory hash>:<instance>`).
    pub image_prefix: String,
    /// Bytes that must stay free under the engine's data root: launch and validate refuse to
    /// start below it and wait between items when a run falls below it, and a run's containers
    /// that are writing when it falls below it are stopped (class `disk`) (0: no floor).
    pub min_free_bytes: i64,
    /// A registry (`host:port/prefix`) that launch pushes every environment image to, under
    /// `<registry>/<image>`, which the row then names; validate and evaluate pull an image the
    /// engine lacks from there, so that the stages can run on different machines.
    pub registry: Option<String>,
}

impl Default for DockerSettings {
    /// The values a config without `[docker]` gets.
    fn default() -> Self {
        Self {
            ca_bundle: None,
            memory_bytes: 4 << 30,
            cpus: 2.0,
            pids: 4096,
            disk_bytes: 20 << 30,
            image_prefix: "kiln-env".into(),
            min_free_bytes: 5 << 30,
            registry: None,
        }
    }
}

impl DockerSettings {
    /// The resource limits of every container.
    #[must_use]
    pub fn limits(&self) -> Limits {
        Limits {
            memory_bytes: self.memory_bytes,
            cpus: self.cpus,
            pids: self.pids,
            disk_bytes: self.disk_bytes,
            min_free_bytes: self.min_free_bytes,
        }
    }
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

/// Keys of the `[docker]` table.
const DOCKER_KEYS: &[&str] = &[
    "ca_bundle",
    "memory",
    "cpus",
    "pids",
    "disk",
    "image_prefix",
    "registry",
    "min_free",
];

impl Compiler<'_> {
    /// A size key of `[docker]` (`"4g"`), `default` when absent.
    fn size(&mut self, keys: &mut Keys<'_, '_>, key: &str, default: &str) -> Result<i64, ()> {
        let at = keys.get(key).map_or(0, |v| v.span().start);
        let text = self.string_or(keys, key, default)?;
        parse_size(&text).map_err(|message| {
            self.error_at(at, &format!("docker.{key}"), message);
        })
    }

    /// Compiles `[docker]`, the defaults when absent; `None` when it had errors (reported).
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
        let memory = self.size(&mut keys, "memory", "4g");
        let disk = self.size(&mut keys, "disk", "20g");
        // "0" turns the floor off; any other value is a size.
        let min_free_at = keys.get("min_free").map_or(0, |v| v.span().start);
        let min_free = self
            .string_or(&mut keys, "min_free", "5g")
            .and_then(|text| match text.trim() {
                "0" => Ok(0),
                _ => parse_size(&text).map_err(|message| {
                    self.error_at(min_free_at, "docker.min_free", message);
                }),
            });
        let cpus = self.read(&mut keys, "cpus", defaults.cpus, 0.1..=1024.0);
        let pids = self.read(&mut keys, "pids", defaults.pids, 64..=1 << 22);
        let image_prefix_at = keys.get("image_prefix").map_or(0, |v| v.span().start);
        let image_prefix = self
            .string_or(&mut keys, "image_prefix", &defaults.image_prefix)
            .and_then(|prefix| {
                if is_image_prefix(&prefix) {
                    Ok(prefix)
                } else {
                    self.error_at(
                        image_prefix_at,
                        "docker.image_prefix",
                        format!(
                            "\"{}\" is not an image repository prefix: lowercase path components \
                             (letters, digits, `.`, `_`, `-`) joined by `/`, optionally after a \
                             registry host such as `registry.example.com:5000/`",
                            cut(&prefix)
                        ),
                    );
                    Err(())
                }
            });
        let registry_at = keys.get("registry").map_or(0, |v| v.span().start);
        let registry = match self.string(&mut keys, "registry") {
            Some(Some(registry)) => {
                let has_host = crate::runtime::registry_of(&registry).is_some();
                if is_image_prefix(&registry) && has_host {
                    Ok(Some(registry))
                } else {
                    self.error_at(
                        registry_at,
                        "docker.registry",
                        format!(
                            "\"{}\" is not a registry and prefix: a host (with a `.` or a `:port`, \
                             or `localhost`), then lowercase path components, such as \
                             `localhost:5000/kiln` or `registry.example.com/team/kiln`",
                            cut(&registry)
                        ),
                    );
                    Err(())
                }
            }
            Some(None) => Err(()),
            None => Ok(None),
        };
        keys.finish(self, DOCKER_KEYS);
        Some(DockerSettings {
            registry: registry.ok()?,
            min_free_bytes: min_free.ok()?,
            ca_bundle: ca_bundle.ok()?,
            memory_bytes: memory.ok()?,
            cpus: cpus.ok()?,
            pids: pids.ok()?,
            disk_bytes: disk.ok()?,
            image_prefix: image_prefix.ok()?,
        })
    }
}
