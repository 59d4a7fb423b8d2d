//! The workspace's own rules: crate boundaries (DESIGN.md) and schema files in sync with the
//! row types.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use crate::{run, text, workspace_root};

/// Normal (non-dev) dependencies of every workspace crate, by crate name.
fn dependencies() -> BTreeMap<String, BTreeSet<String>> {
    let output = run(Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(workspace_root()));
    assert!(output.status.success(), "{}", text(&output));
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap_or_default();
    let mut out = BTreeMap::new();
    for package in metadata["packages"].as_array().cloned().unwrap_or_default() {
        let name = package["name"].as_str().unwrap_or_default().to_string();
        let deps = package["dependencies"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|d| d["kind"].is_null())
            .map(|d| d["name"].as_str().unwrap_or_default().to_string())
            .collect();
        out.insert(name, deps);
    }
    out
}

#[test]
fn crate_boundaries_hold() {
    let deps = dependencies();
    assert!(deps.len() >= 12, "workspace crates not found: {deps:?}");
    let mut broken = Vec::new();
    // Only one crate may use each of these third-party crates.
    let owners: &[(&str, &[&str])] = &[
        ("bollard", &["kiln-docker"]),
        ("octocrab", &["kiln-github"]),
        ("git2", &["kiln-github"]),
        ("arrow", &["kiln-store"]),
        ("parquet", &["kiln-store"]),
        ("polars", &["kiln-store"]),
        ("indicatif", &["kiln-cli"]),
        ("anyhow", &["kiln-cli"]),
    ];
    for (dependency, allowed) in owners {
        for (krate, list) in &deps {
            if list.contains(*dependency) && !allowed.contains(&krate.as_str()) {
                broken.push(format!(
                    "{krate} depends on {dependency}, which only {allowed:?} may use"
                ));
            }
        }
    }
    // Stage crates meet only through kiln-core and kiln-schema.
    let stages = ["kiln-github", "kiln-lm", "kiln-launch", "kiln-validate"];
    for stage in stages {
        for other in stages {
            if deps.get(stage).is_some_and(|d| d.contains(other)) {
                broken.push(format!(
                    "stage crate {stage} depends on stage crate {other}"
                ));
            }
        }
    }
    // The pure crates depend on nothing that does IO.
    for pure in ["kiln-schema", "kiln-testlog"] {
        let allowed: BTreeSet<&str> = [
            "kiln-schema",
            "serde",
            "serde_json",
            "regex",
            "quick-xml",
            "rayon",
            "sha2",
            "thiserror",
        ]
        .into();
        for dependency in deps.get(pure).into_iter().flatten() {
            if !allowed.contains(dependency.as_str()) {
                broken.push(format!("{pure} must do no IO but depends on {dependency}"));
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn pure_crates_do_no_io() {
    let mut found = Vec::new();
    for krate in ["kiln-schema", "kiln-testlog"] {
        let src = workspace_root().join("crates").join(krate).join("src");
        for entry in walk(&src) {
            let text = std::fs::read_to_string(&entry).unwrap_or_default();
            for needle in [
                "std::fs",
                "std::net",
                "std::process",
                "File::open",
                "tokio::",
            ] {
                if text.contains(needle) {
                    found.push(format!("{} uses {needle}", entry.display()));
                }
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// `schemas/<table>.schema.json` must equal the schema generated from the row types. Run with
/// `KILN_BLESS=1` to rewrite the files after an intended change (and bump SCHEMA_VERSION when a
/// column changes meaning or type).
#[test]
fn schema_files_match_the_row_types() {
    let dir = workspace_root().join("schemas");
    let bless = std::env::var_os("KILN_BLESS").is_some();
    let mut drift = Vec::new();
    let mut expected_files = BTreeSet::new();
    for (table, doc, columns) in kiln_schema::all_tables() {
        let file = format!("{table}.schema.json");
        expected_files.insert(file.clone());
        let path = dir.join(&file);
        let mut generated =
            serde_json::to_string_pretty(&kiln_schema::json_schema(table, doc, &columns))
                .unwrap_or_default();
        generated.push('\n');
        if bless {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &generated).unwrap();
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(generated.as_str()) {
            drift.push(format!(
                "{} differs from the row type `{table}`",
                path.display()
            ));
        }
    }
    let present: BTreeSet<String> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with(".schema.json"))
        .collect();
    for stray in present.difference(&expected_files) {
        drift.push(format!("schemas/{stray} has no row type"));
    }
    assert!(
        drift.is_empty(),
        "{}\nrun with KILN_BLESS=1 to regenerate",
        drift.join("\n")
    );
}

/// Verbs an error message of a library crate may start with: every message is a fragment that
/// reads after "failed to" (the CLI prints `error: failed to <message>`), so it starts with
/// what kiln was doing. A message starting otherwise ("cannot ...", "invalid ...") once made
/// "failed to cannot read ...".
const ERROR_VERBS: &[&str] = &[
    "accept",
    "append",
    "build",
    "convert",
    "find",
    "finish",
    "get",
    "lock",
    "merge",
    "page",
    "parse",
    "publish",
    "reach",
    "read",
    "rebuild",
    "replace",
    "run",
    "serialise",
    "serialize",
    "set",
    "start",
    "store",
    "use",
    "write",
];

/// Placeholders an error message may start with: fields that hold a verb phrase by contract
/// (`operation`, `what`, `action`, `op`).
const VERB_FIELDS: &[&str] = &["{operation}", "{what}", "{action}", "{op}"];

/// Every `#[error("...")]` message of the workspace's library crates, with where it is.
fn error_messages() -> Vec<(String, String)> {
    let mut files = Vec::new();
    for krate in std::fs::read_dir(workspace_root().join("crates"))
        .into_iter()
        .flatten()
        .flatten()
    {
        files.extend(walk(&krate.path().join("src")));
    }
    let mut messages = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        for (at, _) in text.match_indices("#[error(") {
            let rest = &text[at + "#[error(".len()..];
            let rest = rest.trim_start();
            if rest.starts_with("transparent") {
                continue;
            }
            let Some(body) = rest.strip_prefix('"') else {
                messages.push((file.display().to_string(), rest.chars().take(40).collect()));
                continue;
            };
            let end = body.find('"').unwrap_or(body.len());
            messages.push((file.display().to_string(), body[..end].to_string()));
        }
    }
    messages
}

#[test]
fn every_error_message_reads_after_failed_to() {
    let messages = error_messages();
    assert!(
        messages.len() > 40,
        "error messages not found: {messages:?}"
    );
    let bad: Vec<String> = messages
        .iter()
        .filter(|(_, message)| {
            let first = message.split([' ', ':']).next().unwrap_or_default();
            !ERROR_VERBS.contains(&first) && !VERB_FIELDS.contains(&first)
        })
        .map(|(file, message)| format!("{file}: {message:?}"))
        .collect();
    assert!(
        bad.is_empty(),
        "error messages that do not read after \"failed to\":\n{}",
        bad.join("\n")
    );
}
