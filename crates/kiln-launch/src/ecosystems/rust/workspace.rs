//! The packages of a Cargo workspace, read from the manifests, and the ones an instance's test
//! patch touches: `cargo test --workspace` builds every member, and a demo or a benchmark whose
//! native dependencies the tests never use (cmake, freetype) then fails the whole launch.

use std::path::Path;

use crate::plan::{TestScope, glob_match, read};

/// One package of the workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// `[package] name`.
    pub name: String,
    /// Its directory relative to the root (`""` for the root package).
    pub dir: String,
    /// `[package] version` (or the workspace's, for `version.workspace = true`).
    pub version: Option<String>,
}

/// The packages of the workspace at `root`: the root package, if any, and every member that
/// `[workspace] members` names (globs expanded) and `exclude` does not, each with a readable
/// manifest and a package name.
#[must_use]
pub fn members(root: &Path) -> Vec<Member> {
    let Some(manifest) = read(root, "Cargo.toml").and_then(|t| t.parse::<toml::Table>().ok())
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let workspace_version = manifest
        .get("workspace")
        .and_then(|w| w.get("package")?.get("version")?.as_str())
        .map(str::to_string);
    if let Some(name) = package_name(&manifest) {
        out.push(Member {
            name,
            dir: String::new(),
            version: package_version(&manifest, workspace_version.as_deref()),
        });
    }
    let Some(workspace) = manifest.get("workspace").and_then(toml::Value::as_table) else {
        return out;
    };
    let list = |key: &str| -> Vec<String> {
        workspace
            .get(key)
            .and_then(toml::Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter_map(toml::Value::as_str)
                    .map(|s| s.trim_end_matches('/').trim_start_matches("./").to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    let exclude = list("exclude");
    let mut dirs: Vec<String> = list("members")
        .iter()
        .flat_map(|pattern| expand(root, pattern))
        .filter(|dir| {
            !exclude
                .iter()
                .any(|e| dir == e || dir.starts_with(&format!("{e}/")))
        })
        .collect();
    dirs.sort();
    dirs.dedup();
    for dir in dirs {
        let Some(manifest) =
            read(&root.join(&dir), "Cargo.toml").and_then(|t| t.parse::<toml::Table>().ok())
        else {
            continue;
        };
        if let Some(name) = package_name(&manifest)
            && !out.iter().any(|m| m.name == name)
        {
            let version = package_version(&manifest, workspace_version.as_deref());
            out.push(Member { name, dir, version });
        }
    }
    out
}

fn package_name(manifest: &toml::Table) -> Option<String> {
    manifest
        .get("package")?
        .get("name")?
        .as_str()
        .map(str::to_string)
}

fn package_version(manifest: &toml::Table, workspace: Option<&str>) -> Option<String> {
    let version = manifest.get("package")?.get("version")?;
    match version {
        toml::Value::String(v) => Some(v.clone()),
        toml::Value::Table(t)
            if t.get("workspace").and_then(toml::Value::as_bool) == Some(true) =>
        {
            workspace.map(str::to_string)
        }
        _ => None,
    }
}

/// The directories under `root` that a member pattern (`crates/*`, `tools/cli`) names.
fn expand(root: &Path, pattern: &str) -> Vec<String> {
    let mut found = vec![String::new()];
    for part in pattern.split('/').filter(|p| !p.is_empty() && *p != ".") {
        let mut next = Vec::new();
        for dir in &found {
            let join = |name: &str| {
                if dir.is_empty() {
                    name.to_string()
                } else {
                    format!("{dir}/{name}")
                }
            };
            if part.contains(['*', '?']) {
                let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
                    continue;
                };
                let mut names: Vec<String> = entries
                    .flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|name| glob_match(part, name))
                    .collect();
                names.sort();
                next.extend(names.iter().map(|n| join(n)));
            } else if root.join(join(part)).is_dir() {
                next.push(join(part));
            }
        }
        found = next;
    }
    found.retain(|d| !d.is_empty());
    found
}

/// The package that holds `file`: the member whose directory is the longest prefix of its
/// path, or the root package.
fn owner<'a>(members: &'a [Member], file: &str) -> Option<&'a Member> {
    members
        .iter()
        .filter(|m| m.dir.is_empty() || file.starts_with(&format!("{}/", m.dir)))
        .max_by_key(|m| m.dir.len())
}

/// What a Cargo plan tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// The packages to test, in workspace order.
    pub packages: Vec<String>,
    /// Their `-p` specifications: `name@version` where a package of the same name may also
    /// come in as a dependency (a crate whose dev-dependencies pull an older release of
    /// itself, as clap's do), which makes a bare `-p name` ambiguous to cargo; the name
    /// alone where `Cargo.lock` shows it once.
    pub specs: Vec<String>,
    /// Packages in the workspace.
    pub total: usize,
}

/// The packages the test patch touches, when `scope` allows selecting and the workspace has
/// more than one: `None` means the whole workspace. A touched file that belongs to no package
/// also means the whole workspace.
#[must_use]
pub fn select(root: &Path, scope: TestScope, test_files: &[String]) -> Option<Selection> {
    if scope == TestScope::All || test_files.is_empty() {
        return None;
    }
    let members = members(root);
    if members.len() < 2 {
        return None;
    }
    let mut packages: Vec<String> = Vec::new();
    for file in test_files {
        let member = owner(&members, file)?;
        if !packages.contains(&member.name) {
            packages.push(member.name.clone());
        }
    }
    let order = |name: &String| members.iter().position(|m| &m.name == name);
    packages.sort_by_key(order);
    let lock = read(root, "Cargo.lock");
    let specs = packages
        .iter()
        .map(|name| {
            let version = members
                .iter()
                .find(|m| &m.name == name)
                .and_then(|m| m.version.as_deref());
            let once = lock.as_deref().is_some_and(|lock| {
                lock.lines()
                    .filter(|l| l.trim() == format!("name = \"{name}\""))
                    .count()
                    == 1
            });
            match version {
                Some(version) if !once => format!("{name}@{version}"),
                _ => name.clone(),
            }
        })
        .collect();
    Some(Selection {
        packages,
        specs,
        total: members.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::testutil::tree;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn members_globs_and_excludes_are_read() {
        let tmp = tree(&[
            (
                "Cargo.toml",
                "[package]\nname = \"clap\"\n[workspace]\nmembers = [\"clap_*\", \"crates/*\", \"./tools/gen/\"]\nexclude = [\"crates/demo\"]\n",
            ),
            (
                "clap_derive/Cargo.toml",
                "[package]\nname = \"clap_derive\"\n",
            ),
            (
                "clap_bench/Cargo.toml",
                "[package]\nname = \"clap_bench\"\n",
            ),
            ("crates/lex/Cargo.toml", "[package]\nname = \"clap_lex\"\n"),
            ("crates/demo/Cargo.toml", "[package]\nname = \"demo\"\n"),
            ("crates/notes/README.md", ""),
            ("tools/gen/Cargo.toml", "[package]\nname = \"gen\"\n"),
        ]);
        let names: Vec<(String, String)> = members(tmp.path())
            .into_iter()
            .map(|m| (m.name, m.dir))
            .collect();
        assert_eq!(
            names,
            [
                ("clap".to_string(), String::new()),
                ("clap_bench".into(), "clap_bench".into()),
                ("clap_derive".into(), "clap_derive".into()),
                ("clap_lex".into(), "crates/lex".into()),
                ("gen".into(), "tools/gen".into()),
            ]
        );
    }

    #[test]
    fn the_touched_packages_are_selected() {
        let tmp = tree(&[
            (
                "Cargo.toml",
                "[workspace]\nmembers = [\"serde\", \"serde_derive\", \"test_suite\"]\n",
            ),
            ("serde/Cargo.toml", "[package]\nname = \"serde\"\n"),
            (
                "serde_derive/Cargo.toml",
                "[package]\nname = \"serde_derive\"\n",
            ),
            (
                "test_suite/Cargo.toml",
                "[package]\nname = \"serde_test_suite\"\n",
            ),
        ]);
        let touched = strings(&[
            "test_suite/tests/test_de.rs",
            "test_suite/tests/ui/x.stderr",
            "serde/src/lib.rs",
        ]);
        assert_eq!(
            select(tmp.path(), TestScope::Auto, &touched),
            Some(Selection {
                packages: strings(&["serde", "serde_test_suite"]),
                specs: strings(&["serde", "serde_test_suite"]),
                total: 3
            })
        );
        assert_eq!(select(tmp.path(), TestScope::All, &touched), None);
        // A file outside every package of a virtual workspace: the whole workspace.
        assert_eq!(
            select(
                tmp.path(),
                TestScope::Touched,
                &strings(&["tests/common.rs"])
            ),
            None
        );
        // A member whose name a dependency may also carry (no lockfile to say otherwise, or a
        // lockfile listing it twice) is named with its version, as cargo asks for then.
        let clap = tree(&[
            (
                "Cargo.toml",
                "[package]\nname = \"clap\"\nversion = \"3.0.0-beta.4\"\n[workspace]\nmembers = [\"clap_derive\"]\n[workspace.package]\nversion = \"3.0.0\"\n",
            ),
            (
                "clap_derive/Cargo.toml",
                "[package]\nname = \"clap_derive\"\nversion.workspace = true\n",
            ),
            (
                "Cargo.lock",
                "[[package]]\nname = \"clap\"\nversion = \"2.33.3\"\n\n[[package]]\nname = \"clap\"\nversion = \"3.0.0-beta.4\"\n\n[[package]]\nname = \"clap_derive\"\nversion = \"3.0.0\"\n",
            ),
        ]);
        let specs = |files: &[&str]| {
            select(clap.path(), TestScope::Touched, &strings(files)).map(|s| s.specs)
        };
        assert_eq!(
            specs(&["tests/help.rs", "clap_derive/tests/a.rs"]),
            Some(strings(&["clap@3.0.0-beta.4", "clap_derive"]))
        );
        std::fs::remove_file(clap.path().join("Cargo.lock")).unwrap();
        assert_eq!(
            specs(&["clap_derive/tests/a.rs"]),
            Some(strings(&["clap_derive@3.0.0"]))
        );
        // One package: nothing to select.
        let single = tree(&[("Cargo.toml", "[package]\nname = \"x\"\n")]);
        assert_eq!(
            select(single.path(), TestScope::Touched, &strings(&["tests/a.rs"])),
            None
        );
    }
}
