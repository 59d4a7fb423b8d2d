//! The variables a repository's CI sets for its jobs that the project itself reads: GitHub
//! Actions' `env:` (workflow, job and step), CircleCI's `environment:`, GitLab's and Azure's
//! `variables:`, Travis's `env:` (`global:` or a list of `NAME=value` words), and `NAME=value`
//! words in an inline `env:`.
//!
//! Kept: a variable set for every job (at the top of a workflow or GitLab/Azure file, in
//! Travis's `env: global:`; a job's or a step's own variables are one variant of the tests,
//! such as sympy's `USE_SYMENGINE` job), to a literal value (no expression, no `$`) that is
//! the same wherever the CI sets it (a matrix's variable, or one a job sets otherwise, is left
//! out), with a name no rule excludes (credentials,
//! colours, the CI's own, toolchain and installer settings, paths: what kiln's image decides
//! for itself), and a name the project's own files mention (its code, tests or configuration;
//! not the CI files, not its docs): `DJANGO_SETTINGS_MODULE`, `TZ`, `DATABASE_URL`, a
//! project's `SKIP_NETWORK_TESTS` are; `FORCE_COLOR` read only by a library is not.

use std::collections::BTreeMap;
use std::path::Path;

use super::yaml::{strip_comment, unquote, yaml_files};

/// Keys whose block holds variables.
const BLOCK_KEYS: &[&str] = &["env", "environment", "variables"];

/// Parts of a name that make it a credential or a terminal setting.
const EXCLUDED_PARTS: &[&str] = &[
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "KEY",
    "AUTH",
    "CREDENTIAL",
    "COLOR",
    "COLOUR",
];

/// Prefixes of the CI's own variables, cloud and registry settings, and the settings of the
/// toolchains and installers kiln's image chooses itself.
const EXCLUDED_PREFIXES: &[&str] = &[
    "GITHUB_",
    "RUNNER_",
    "ACTIONS_",
    "CI_",
    "CIRCLE",
    "TRAVIS",
    "APPVEYOR",
    "AZURE",
    "BUILD_",
    "SYSTEM_",
    "CODECOV",
    "COVERALLS",
    "SONAR",
    "DOCKER",
    "AWS_",
    "GCP_",
    "GOOGLE_",
    "TWINE_",
    "NPM_",
    "YARN_",
    "PNPM_",
    "PIP_",
    "POETRY_",
    "UV_",
    "PDM_",
    "HATCH_",
    "CONDA",
    "MAMBA",
    "HOMEBREW_",
    "CARGO_",
    "RUSTUP_",
    "CMAKE_",
    "CACHE",
    "TOX_",
    "LC_",
];

/// Whole names excluded: the shell's, the compilers' and their flags, the test runners'
/// extra options (they may name plugins kiln did not install).
const EXCLUDED_NAMES: &[&str] = &[
    "CI",
    "PATH",
    "HOME",
    "USER",
    "SHELL",
    "TERM",
    "LANG",
    "LANGUAGE",
    "DEBIAN_FRONTEND",
    "CC",
    "CXX",
    "FC",
    "CFLAGS",
    "CXXFLAGS",
    "CPPFLAGS",
    "LDFLAGS",
    "MAKEFLAGS",
    "RUSTFLAGS",
    "RUSTDOCFLAGS",
    "PYTEST_ADDOPTS",
    "TOXENV",
    "NOXSESSION",
    "PYTHONPATH",
];

/// Whether kiln may set `name` at all.
fn allowed(name: &str) -> bool {
    let shaped = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_uppercase() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
    shaped
        && !EXCLUDED_NAMES.contains(&name)
        && !EXCLUDED_PARTS.iter().any(|part| name.contains(part))
        && !EXCLUDED_PREFIXES.iter().any(|p| name.starts_with(p))
        && !["_VERSION", "_HOME", "PATH", "_DIR"]
            .iter()
            .any(|s| name.ends_with(s))
}

/// A literal value: no expression, variable or command substitution, one line.
fn literal(value: &str) -> Option<String> {
    let value = unquote(strip_comment(value.trim())).trim();
    let plain = !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.-/:=,+@%".contains(c));
    plain.then(|| value.to_string())
}

/// One assignment: the name, its value when it is a literal, and whether it is set for every
/// job.
type Assignment = (String, Option<String>, bool);

/// `NAME=value` words of a Travis-style line (`- A=1 B=2`).
fn assignments(text: &str, global: bool) -> Vec<Assignment> {
    text.split_whitespace()
        .filter_map(|word| {
            let (name, value) = word.split_once('=')?;
            Some((name.to_string(), literal(value), global))
        })
        .collect()
}

/// Every assignment of one CI file.
fn assigned(text: &str) -> Vec<Assignment> {
    let mut out = Vec::new();
    // The open variables block: its indent, and whether it holds every job's variables.
    let mut block: Option<(usize, bool)> = None;
    // Travis's top-level `env:` holds `global:` (every job) and `matrix:`/`jobs:` (one each).
    let mut travis_env = false;
    let mut global_list: Option<usize> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let indent = line.len() - trimmed.len();
        let item = trimmed.strip_prefix("- ");
        if let Some((at, _)) = block
            && (indent < at || (indent == at && item.is_none()))
        {
            block = None;
            travis_env = false;
        }
        if global_list.is_some_and(|at| indent <= at && item.is_none()) {
            global_list = None;
        }
        let body = item.unwrap_or(trimmed).trim_start();
        let pair = body
            .split_once(':')
            .filter(|(key, _)| !key.contains(' ') && !key.contains('='));
        if let Some((key, value)) = pair
            && BLOCK_KEYS.contains(&key.trim())
        {
            // A list item's (`- env: A=1`, one job of Travis's `jobs: include:`) is one job's.
            let top = indent == 0 && item.is_none();
            let value = strip_comment(value.trim());
            if value.is_empty() {
                block = Some((if item.is_some() { indent + 2 } else { indent }, top));
                travis_env = top && key.trim() == "env";
            } else {
                // Travis's `env: A=1 B=2`.
                out.extend(assignments(unquote(value), top));
            }
            continue;
        }
        let Some((_, global)) = block else {
            continue;
        };
        match pair {
            Some((key, value)) if item.is_none() => {
                if travis_env && value.trim().is_empty() {
                    // `global:` lists every job's variables; `matrix:` one job's each.
                    if key.trim() == "global" {
                        global_list = Some(indent);
                    }
                    continue;
                }
                out.push((key.trim().to_string(), literal(value), global));
            }
            // `- A=1 B=2`: Travis's `global:` list, or one row of its matrix.
            None if item.is_some() => {
                let every = global_list.is_some() || (global && !travis_env);
                out.extend(assignments(unquote(strip_comment(body)), every));
            }
            _ => {}
        }
    }
    out
}

/// Directories never read for mentions (besides hidden ones): dependencies, build outputs.
const SKIPPED_DIRS: &[&str] = &[
    "node_modules",
    "target",
    "build",
    "dist",
    "vendor",
    "third_party",
    "__pycache__",
];

/// Extensions of documentation, never read for mentions.
const DOC_EXTENSIONS: &[&str] = &[".md", ".rst", ".txt", ".html", ".adoc", ".mdx"];

/// Files read at most, and the largest read.
const MAX_FILES: usize = 20_000;
const MAX_BYTES: u64 = 1 << 20;

/// Whether `name` is in `text` as a whole word.
fn mentions(text: &str, name: &str) -> bool {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices(name).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + name.len()..].chars().next();
        !before.is_some_and(word) && !after.is_some_and(word)
    })
}

/// The names of `wanted` the project's own files at `root` mention.
fn mentioned(root: &Path, wanted: &[String]) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    let mut files = 0;
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                if !name.starts_with('.') && !SKIPPED_DIRS.contains(&name.as_str()) {
                    stack.push(entry.path());
                }
                continue;
            }
            let small = entry.metadata().is_ok_and(|m| m.len() <= MAX_BYTES);
            // Hidden files are the CI's (`.travis.yml`, `.gitlab-ci.yml`) or tools'.
            let skipped = name.starts_with('.')
                || name == "azure-pipelines.yml"
                || DOC_EXTENSIONS.iter().any(|e| name.ends_with(e));
            if !kind.is_file() || !small || skipped {
                continue;
            }
            files += 1;
            if files > MAX_FILES {
                return found;
            }
            let Ok(text) = std::fs::read_to_string(entry.path()) else {
                continue;
            };
            for name in wanted {
                if !found.contains(name) && mentions(&text, name) {
                    found.push(name.clone());
                }
            }
            if found.len() == wanted.len() {
                return found;
            }
        }
    }
    found
}

/// The variables the CI at `root` sets that kiln sets for the tests too, by name.
#[must_use]
pub fn environment(root: &Path) -> Vec<(String, String)> {
    // None: set to several values, or to one that is not a literal.
    let mut values: BTreeMap<String, Option<String>> = BTreeMap::new();
    let mut global: Vec<String> = Vec::new();
    for (_, text) in yaml_files(root) {
        for (name, value, every) in assigned(&text) {
            if !allowed(&name) {
                continue;
            }
            if every && !global.contains(&name) {
                global.push(name.clone());
            }
            values
                .entry(name)
                .and_modify(|v| {
                    if value.is_none() || *v != value {
                        *v = None;
                    }
                })
                .or_insert(value);
        }
    }
    values.retain(|name, _| global.contains(name));
    let single: Vec<(String, String)> = values
        .into_iter()
        .filter_map(|(name, value)| Some((name, value?)))
        .collect();
    if single.is_empty() {
        return single;
    }
    let names: Vec<String> = single.iter().map(|(n, _)| n.clone()).collect();
    let read = mentioned(root, &names);
    single
        .into_iter()
        .filter(|(name, _)| read.contains(name))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::tree;

    #[test]
    fn variables_the_ci_sets_for_every_job_and_the_project_reads() {
        let workflow = "name: tests\non: push\nenv:\n  FORCE_COLOR: 1\n  TZ: UTC  # the tests compare local times\n  DJANGO_SETTINGS_MODULE: \"app.settings.test\"\n  PYTHON_VERSION: '3.11'\n  ARCH: normal\njobs:\n  test:\n    runs-on: ubuntu-latest\n    env:\n      REDIS_HOST: localhost\n      ARCH: ${{ matrix.arch }}\n      API_TOKEN: ${{ secrets.TOKEN }}\n    steps:\n      - uses: actions/checkout@v4\n      - run: pytest\n        env:\n          TZ: UTC\n          USE_BACKEND: 1\n  other:\n    env:\n      DJANGO_SETTINGS_MODULE: app.settings.other\n";
        let travis = "language: python\nenv:\n  global:\n    - SKIP_NETWORK_TESTS=1 COLOR=1 TZ=UTC LOCALE=en\n  matrix:\n    - SUITE=unit\n    - ONLY_ONE=1\njobs:\n  include:\n    - env: LOCALE=fr\n";
        let gitlab = "variables:\n  DATABASE_URL: postgres://app:app@localhost:5432/app\n  UNUSED_BY_THE_CODE: yes\ntest:\n  variables:\n    JOB_ONLY: 1\n  script: pytest\n";
        let code = "import os\nTZ_NAME = os.environ['TZ']\nos.environ.setdefault('DJANGO_SETTINGS_MODULE', 'x')\nDB = os.getenv('DATABASE_URL')\nif os.getenv('USE_BACKEND'): pass\nif os.getenv('SKIP_NETWORK_TESTS'): pass\nARCH = os.getenv('ARCH')\nSUITE = os.getenv('SUITE')\nLOCALE = os.getenv('LOCALE')\nONLY_ONE = os.getenv('ONLY_ONE')\nJOB_ONLY = os.getenv('JOB_ONLY')\nREDIS_HOST = os.getenv('REDIS_HOST')\nFORCE_COLOR = os.getenv('FORCE_COLOR')\nPYTHON_VERSION = 1\nAPI_TOKEN = 2\n";
        let root = tree(&[
            (".github/workflows/test.yml", workflow),
            (".travis.yml", travis),
            (".gitlab-ci.yml", gitlab),
            ("app/conftest.py", code),
            ("README.md", "set UNUSED_BY_THE_CODE=yes to ..."),
        ]);
        // Not: a job's or a step's own (REDIS_HOST, USE_BACKEND, JOB_ONLY, Travis's matrix
        // rows), one a job sets otherwise (DJANGO_SETTINGS_MODULE, ARCH, LOCALE), excluded names,
        // one only the docs mention.
        assert_eq!(
            environment(root.path()),
            [
                (
                    "DATABASE_URL".to_string(),
                    "postgres://app:app@localhost:5432/app".to_string()
                ),
                ("SKIP_NETWORK_TESTS".to_string(), "1".to_string()),
                ("TZ".to_string(), "UTC".to_string()),
            ]
        );
    }

    #[test]
    fn no_ci_or_no_mention_sets_nothing() {
        assert!(environment(tree(&[("a.py", "import os\n")]).path()).is_empty());
        let root = tree(&[
            (
                ".gitlab-ci.yml",
                "variables:\n  PGHOST: db\ntest:\n  script: make test\n",
            ),
            ("docs/setup.md", "PGHOST"),
            ("node_modules/pg/index.js", "process.env.PGHOST"),
        ]);
        assert!(environment(root.path()).is_empty());
    }
}
