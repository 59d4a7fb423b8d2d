//! What a release row says about the repository at its base commit besides its build: its own
//! version (SWE-bench groups environments by it; `major.minor`) and its licence (an SPDX id, so
//! users can keep permissive repositories only).
//!
//! The version is the one the project declares (`pyproject.toml`, `setup.cfg`, `setup.py`,
//! `Cargo.toml`, `package.json`, `pom.xml`), else the newest tag of the checkout (which keeps
//! only tags no newer than the base commit). The licence is the one the project declares in
//! its manifest when it is an SPDX id, else the one its licence file's text is recognised as,
//! else `NOASSERTION`.

use std::path::Path;
use std::process::Command;

use crate::plan::{ini_list, ini_section, read};

/// The licence id of a repository kiln cannot tell.
pub const NO_ASSERTION: &str = "NOASSERTION";

/// The repository's version at the checkout, as `major.minor`.
#[must_use]
pub fn version(root: &Path) -> Option<String> {
    declared_version(root).or_else(|| newest_tag(root).and_then(|v| major_minor(&v)))
}

/// The repository's licence at the checkout, as an SPDX id, or [`NO_ASSERTION`].
#[must_use]
pub fn license(root: &Path) -> String {
    declared_license(root)
        .or_else(|| license_file(root))
        .unwrap_or_else(|| NO_ASSERTION.to_string())
}

/// The manifest `name` under `root`, parsed as TOML.
fn toml_doc(root: &Path, name: &str) -> Option<toml::Table> {
    read(root, name)?.parse().ok()
}

/// The string at `path` of a TOML document (`["tool", "poetry", "version"]`).
fn toml_str(doc: &toml::Table, path: &[&str]) -> Option<String> {
    let (first, rest) = path.split_first()?;
    let mut value = doc.get(*first)?;
    for key in rest {
        value = value.get(key)?;
    }
    value.as_str().map(str::to_string)
}

fn json_string(text: &str, key: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    value.get(key)?.as_str().map(str::to_string)
}

/// The version a manifest declares, when it reads as `major.minor`.
fn declared_version(root: &Path) -> Option<String> {
    let pyproject = toml_doc(root, "pyproject.toml");
    let cargo = toml_doc(root, "Cargo.toml");
    let declared = [
        pyproject
            .as_ref()
            .and_then(|d| toml_str(d, &["project", "version"])),
        pyproject
            .as_ref()
            .and_then(|d| toml_str(d, &["tool", "poetry", "version"])),
        read(root, "setup.cfg")
            .and_then(|t| ini_section(&t, "metadata"))
            .and_then(|m| ini_list(&m, "version").into_iter().next()),
        read(root, "setup.py").and_then(|t| setup_py_version(&t)),
        cargo
            .as_ref()
            .and_then(|d| toml_str(d, &["package", "version"])),
        cargo
            .as_ref()
            .and_then(|d| toml_str(d, &["workspace", "package", "version"])),
        read(root, "package.json").and_then(|t| json_string(&t, "version")),
        read(root, "pom.xml").and_then(|t| pom_version(&t)),
    ];
    // A computed version (`attr: pkg.__version__`, `${revision}`) reads as none: the tags say.
    declared.iter().flatten().find_map(|v| major_minor(v))
}

/// A literal `version="1.2.3"` argument of `setup.py` (a computed one is not read).
fn setup_py_version(text: &str) -> Option<String> {
    let at = text.find("version=").or_else(|| text.find("version ="))?;
    let rest = text[at..].split_once('=')?.1.trim_start();
    let quote = rest.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    rest[1..].split(quote).next().map(str::to_string)
}

/// The project's own `<version>` in a Maven `pom.xml` (the one before `<dependencies>`, after
/// any `<parent>` block).
fn pom_version(text: &str) -> Option<String> {
    let head = text.split("<dependencies>").next()?;
    let head = match head.split_once("</parent>") {
        Some((_, after)) => after,
        None => head,
    };
    let start = head.find("<version>")? + "<version>".len();
    let end = head[start..].find("</version>")? + start;
    let version = head[start..end].trim();
    (!version.starts_with("${")).then(|| version.to_string())
}

/// The newest tag of the checkout by version order, if any.
fn newest_tag(root: &Path) -> Option<String> {
    let output = Command::new("git")
        .args(["tag", "--list", "--sort=-v:refname"])
        .current_dir(root)
        .output()
        .ok()?;
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find(|tag| major_minor(tag).is_some())
        .map(str::to_string)
}

/// `1.2` of `v1.2.3`, `release-1.2`, `1.2.0rc1`; `None` without a major and a minor number.
fn major_minor(version: &str) -> Option<String> {
    let start = version.find(|c: char| c.is_ascii_digit())?;
    let mut parts = version[start..].split('.');
    let major = parts.next()?;
    let minor: String = parts
        .next()?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    (major.chars().all(|c| c.is_ascii_digit()) && !minor.is_empty())
        .then(|| format!("{major}.{minor}"))
}

/// SPDX ids kiln recognises, with a phrase of each licence's text that tells it apart.
const TEXTS: &[(&str, &str)] = &[
    ("Apache-2.0", "apache license\nversion 2.0"),
    ("MPL-2.0", "mozilla public license version 2.0"),
    ("AGPL-3.0", "gnu affero general public license"),
    ("LGPL-3.0", "gnu lesser general public license\nversion 3"),
    ("LGPL-2.1", "gnu lesser general public license"),
    ("GPL-3.0", "gnu general public license\nversion 3"),
    ("GPL-2.0", "gnu general public license"),
    ("Unlicense", "this is free and unencumbered software"),
    (
        "ISC",
        "with or without fee is hereby granted, provided that the above copyright notice",
    ),
    ("0BSD", "with or without fee is hereby granted."),
    ("MIT", "permission is hereby granted, free of charge"),
    ("BSD-3-Clause", "neither the name"),
    (
        "BSD-2-Clause",
        "redistributions in binary form must reproduce",
    ),
];

/// Licence ids a manifest may give; others (a free text, a file reference) are not trusted.
const SPDX: &[&str] = &[
    "MIT",
    "Apache-2.0",
    "BSD-3-Clause",
    "BSD-2-Clause",
    "ISC",
    "MPL-2.0",
    "GPL-2.0",
    "GPL-2.0-only",
    "GPL-2.0-or-later",
    "GPL-3.0",
    "GPL-3.0-only",
    "GPL-3.0-or-later",
    "LGPL-2.1",
    "LGPL-2.1-only",
    "LGPL-2.1-or-later",
    "LGPL-3.0",
    "LGPL-3.0-only",
    "LGPL-3.0-or-later",
    "AGPL-3.0",
    "AGPL-3.0-only",
    "AGPL-3.0-or-later",
    "Unlicense",
    "0BSD",
    "Zlib",
    "PSF-2.0",
    "BSL-1.0",
    "CC0-1.0",
    "MIT OR Apache-2.0",
    "Apache-2.0 OR MIT",
];

fn declared_license(root: &Path) -> Option<String> {
    let cargo = toml_doc(root, "Cargo.toml");
    let pyproject = toml_doc(root, "pyproject.toml");
    let candidates = [
        read(root, "package.json").and_then(|t| json_string(&t, "license")),
        cargo
            .as_ref()
            .and_then(|d| toml_str(d, &["package", "license"])),
        cargo
            .as_ref()
            .and_then(|d| toml_str(d, &["workspace", "package", "license"])),
        pyproject
            .as_ref()
            .and_then(|d| toml_str(d, &["project", "license"])),
        pyproject
            .as_ref()
            .and_then(|d| toml_str(d, &["tool", "poetry", "license"])),
    ];
    candidates.into_iter().flatten().find_map(|declared| {
        let declared = declared.trim().replace('/', " OR ");
        SPDX.iter()
            .find(|id| id.eq_ignore_ascii_case(&declared))
            .map(|id| (*id).to_string())
    })
}

fn license_file(root: &Path) -> Option<String> {
    let entries = std::fs::read_dir(root).ok()?;
    let mut files: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| {
            let upper = name.to_ascii_uppercase();
            upper.starts_with("LICENSE")
                || upper.starts_with("LICENCE")
                || upper.starts_with("COPYING")
        })
        .collect();
    files.sort();
    for name in files {
        let text = read(root, &name)?.to_ascii_lowercase();
        let text: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
        for (id, phrase) in TEXTS {
            let phrase = phrase.replace('\n', " ");
            if text.contains(&phrase) {
                return Some((*id).to_string());
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::testutil::tree;

    #[test]
    fn the_declared_version_comes_first_as_major_minor() {
        let cases: &[(&str, &str, Option<&str>)] = &[
            (
                "pyproject.toml",
                "[project]\nname = \"x\"\nversion = \"3.0.2\"\n",
                Some("3.0"),
            ),
            (
                "pyproject.toml",
                "[tool.poetry]\nversion = '1.10.0b1'\n",
                Some("1.10"),
            ),
            (
                "setup.cfg",
                "[metadata]\nname = x\nversion = 0.18.1\n",
                Some("0.18"),
            ),
            (
                "setup.py",
                "setup(name='x', version=\"2.4.0\")\n",
                Some("2.4"),
            ),
            ("setup.py", "setup(name='x', version=get_version())\n", None),
            (
                "Cargo.toml",
                "[package]\nname = \"x\"\nversion = \"1.0.219\"\n",
                Some("1.0"),
            ),
            (
                "Cargo.toml",
                "[workspace.package]\nversion = \"4.5.1\"\n",
                Some("4.5"),
            ),
            (
                "package.json",
                r#"{"name":"x","version":"9.1.0"}"#,
                Some("9.1"),
            ),
            (
                "pom.xml",
                "<project><parent><version>1.0</version></parent><version>2.8.9</version><dependencies><version>5</version></dependencies></project>",
                Some("2.8"),
            ),
        ];
        for (file, text, expected) in cases {
            let root = tree(&[(file, text)]);
            assert_eq!(version(root.path()).as_deref(), *expected, "{file}: {text}");
        }
        assert_eq!(major_minor("v1.2.3"), Some("1.2".into()));
        assert_eq!(major_minor("release-10.4rc1"), Some("10.4".into()));
        assert_eq!(major_minor("latest"), None);
    }

    #[test]
    fn without_a_declared_version_the_newest_tag_gives_it() {
        let root = tree(&[("README.md", "x\n")]);
        let git = |args: &[&str]| {
            let status = Command::new("git")
                .args(args)
                .current_dir(root.path())
                .env("GIT_AUTHOR_NAME", "k")
                .env("GIT_AUTHOR_EMAIL", "k@example.com")
                .env("GIT_COMMITTER_NAME", "k")
                .env("GIT_COMMITTER_EMAIL", "k@example.com")
                .output()
                .unwrap()
                .status;
            assert!(status.success(), "git {args:?}");
        };
        git(&["init", "-q"]);
        git(&["add", "."]);
        git(&["commit", "-qm", "x"]);
        for tag in ["v1.9.0", "v1.10.2", "nightly"] {
            git(&["tag", tag]);
        }
        assert_eq!(version(root.path()).as_deref(), Some("1.10"));
    }

    #[test]
    fn the_licence_comes_from_the_manifest_then_the_licence_file() {
        let mit = "MIT License\n\nPermission is hereby granted, free of charge, to any person";
        let bsd3 = "Redistributions in binary form must reproduce ...\nNeither the name of the copyright holder";
        let apache = "                                 Apache License\n                           Version 2.0, January 2004";
        let cases: &[(&[(&str, &str)], &str)] = &[
            (&[("package.json", r#"{"license":"MIT"}"#)], "MIT"),
            (
                &[("Cargo.toml", "[package]\nlicense = \"MIT/Apache-2.0\"\n")],
                "MIT OR Apache-2.0",
            ),
            (&[("LICENSE", mit)], "MIT"),
            (&[("LICENSE.txt", bsd3)], "BSD-3-Clause"),
            (&[("LICENCE", apache)], "Apache-2.0"),
            // A manifest's free text is not trusted; the file decides.
            (
                &[
                    ("package.json", r#"{"license":"SEE LICENSE IN x"}"#),
                    ("COPYING", mit),
                ],
                "MIT",
            ),
            (&[("README.md", "no licence")], NO_ASSERTION),
        ];
        for (files, expected) in cases {
            let root = tree(files);
            assert_eq!(license(root.path()), *expected, "{files:?}");
        }
    }
}
