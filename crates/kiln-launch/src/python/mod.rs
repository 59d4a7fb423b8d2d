//! The Python plan: detect how a repository declares its dependencies and tests, and turn that
//! into install and test commands.

use std::path::Path;

use crate::images;
use crate::plan::{GIT_SETUP, Plan, PlanContext};

pub mod selection;
pub mod setup_py;

/// Where the plan puts the project's virtualenv inside the container.
pub const VENV: &str = "/opt/kiln/venv";

/// What the repository's files say about installing and testing it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PythonProject {
    /// Has a `pyproject.toml`, `setup.py` or `setup.cfg`: it installs as a package.
    pub installable: bool,
    /// Which file made it installable, for the plan name.
    pub manifest: &'static str,
    /// Extras that carry test dependencies (`test`, `tests`, `testing`, `dev`), as declared.
    pub test_extras: Vec<String>,
    /// Requirements files with dependencies the tests need, relative to the root.
    pub requirement_files: Vec<String>,
    /// `requires-python` or `python_requires`, when declared.
    pub requires_python: Option<String>,
    /// Further requirements the tests need: `deps` of tox's `[testenv]`, what a noxfile's
    /// sessions `session.install`, and the plugins that the pytest configuration's options use
    /// (`--cov` needs pytest-cov).
    pub extra_requirements: Vec<String>,
    /// Debian packages with the headers that well-known sdists named in the dependency files
    /// compile against (`psycopg2` needs `libpq-dev`), sorted.
    pub system_packages: Vec<String>,
    /// `[build-system] requires` of the pyproject, for repairs that build without isolation.
    pub build_requires: Vec<String>,
    /// `python_files` of the pytest configuration: the names pytest collects as test modules.
    pub python_files: Vec<String>,
}

/// Python distributions that build C extensions against system libraries when no wheel fits
/// (old releases on a newer Python), and the Debian packages with their headers.
const SDIST_HEADERS: &[(&str, &[&str])] = &[
    ("cffi", &["libffi-dev"]),
    ("argon2-cffi", &["libffi-dev"]),
    ("bcrypt", &["libffi-dev"]),
    ("pynacl", &["libffi-dev"]),
    ("cryptography", &["libffi-dev", "libssl-dev"]),
    ("pyopenssl", &["libffi-dev", "libssl-dev"]),
    ("pylibmc", &["libmemcached-dev", "zlib1g-dev"]),
    ("mysqlclient", &["default-libmysqlclient-dev", "pkg-config"]),
    ("psycopg2", &["libpq-dev"]),
    ("lxml", &["libxml2-dev", "libxslt1-dev"]),
    ("xmlsec", &["libxmlsec1-dev", "pkg-config"]),
    ("pillow", &["libjpeg-dev", "zlib1g-dev"]),
    ("pycairo", &["libcairo2-dev", "pkg-config"]),
    (
        "pygobject",
        &["libgirepository1.0-dev", "libcairo2-dev", "pkg-config"],
    ),
    ("python-ldap", &["libldap2-dev", "libsasl2-dev"]),
    ("pycurl", &["libcurl4-openssl-dev", "libssl-dev"]),
    ("pyyaml", &["libyaml-dev"]),
    ("h5py", &["libhdf5-dev", "pkg-config"]),
    ("gssapi", &["libkrb5-dev"]),
    ("pykerberos", &["libkrb5-dev"]),
    ("pyaudio", &["portaudio19-dev"]),
    (
        "dbus-python",
        &["libdbus-1-dev", "libglib2.0-dev", "pkg-config"],
    ),
    ("pyodbc", &["unixodbc-dev"]),
    ("gdal", &["libgdal-dev"]),
    ("python-snappy", &["libsnappy-dev"]),
    ("pyzmq", &["libzmq3-dev"]),
    ("scipy", &["gfortran", "libopenblas-dev", "pkg-config"]),
];

/// The Debian header packages for the well-known sdists that `texts` (dependency files) name.
/// A name counts when it stands alone: `pillow` in `Pillow>=6`, not in `pillow-heif`.
fn header_packages(texts: &[&str]) -> Vec<String> {
    let mut packages = std::collections::BTreeSet::new();
    for text in texts {
        let lower = text.to_ascii_lowercase().replace('_', "-");
        for (dist, debs) in SDIST_HEADERS {
            let standalone = lower.match_indices(dist).any(|(at, _)| {
                let before = lower[..at].chars().next_back();
                let after = lower[at + dist.len()..].chars().next();
                let boundary = |c: Option<char>| {
                    c.is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '-' || c == '.'))
                };
                boundary(before) && boundary(after)
            });
            if standalone {
                packages.extend(debs.iter().map(|d| (*d).to_string()));
            }
        }
    }
    packages.into_iter().collect()
}

/// Extras whose names mark test dependencies, most specific first.
const TEST_EXTRAS: &[&str] = &["test", "tests", "testing", "dev", "develop"];

/// Requirements files that hold runtime or test dependencies, in install order.
const REQUIREMENT_FILES: &[&str] = &[
    "requirements.txt",
    "requirements-test.txt",
    "requirements_test.txt",
    "requirements-tests.txt",
    "test-requirements.txt",
    "test_requirements.txt",
    "requirements-dev.txt",
    "requirements_dev.txt",
    "dev-requirements.txt",
    "requirements/test.txt",
    "requirements/tests.txt",
    "requirements/testing.txt",
    "requirements/dev.txt",
];

/// Reads the repository at `root`. Returns `None` when it is not a Python project.
#[must_use]
pub fn detect(root: &Path) -> Option<PythonProject> {
    let read = |name: &str| std::fs::read_to_string(root.join(name)).ok();
    let pyproject = read("pyproject.toml");
    let setup_cfg = read("setup.cfg");
    let setup_py = read("setup.py");
    let requirement_files: Vec<String> = REQUIREMENT_FILES
        .iter()
        .filter(|f| root.join(f).is_file())
        .map(|f| (*f).to_string())
        .collect();
    if pyproject.is_none()
        && setup_cfg.is_none()
        && setup_py.is_none()
        && requirement_files.is_empty()
    {
        return None;
    }
    let mut project = PythonProject {
        requirement_files,
        ..PythonProject::default()
    };
    let mut extras: Vec<String> = Vec::new();
    if let Some(text) = &pyproject
        && let Ok(doc) = text.parse::<toml::Table>()
    {
        {
            let table = doc.get("project").and_then(toml::Value::as_table);
            if let Some(optional) = table
                .and_then(|p| p.get("optional-dependencies"))
                .and_then(toml::Value::as_table)
            {
                extras.extend(optional.keys().cloned());
            }
            project.requires_python = table
                .and_then(|p| p.get("requires-python"))
                .and_then(toml::Value::as_str)
                .map(str::to_string);
            if let Some(requires) = doc
                .get("build-system")
                .and_then(|b| b.get("requires"))
                .and_then(toml::Value::as_array)
            {
                project.build_requires = requires
                    .iter()
                    .filter_map(toml::Value::as_str)
                    .map(str::to_string)
                    .collect();
            }
            // A pyproject without a build system table or [project] (only tool config) does
            // not make the repository installable by itself.
            if doc.contains_key("build-system") || table.is_some() {
                project.installable = true;
                project.manifest = "pyproject";
            }
            if let Some(poetry) = doc
                .get("tool")
                .and_then(|t| t.get("poetry"))
                .and_then(|p| p.get("extras"))
                .and_then(toml::Value::as_table)
            {
                extras.extend(poetry.keys().cloned());
            }
        }
    }
    if let Some(text) = &setup_cfg {
        extras.extend(ini_section_keys(text, "options.extras_require"));
        if project.requires_python.is_none() {
            project.requires_python = ini_value(text, "options", "python_requires");
        }
        if text.contains("[metadata]") || text.contains("[options]") {
            project.installable = true;
            if project.manifest.is_empty() {
                project.manifest = "setup-cfg";
            }
        }
    }
    if let Some(text) = &setup_py {
        extras.extend(setup_py::extras(text));
        if project.requires_python.is_none() {
            project.requires_python = setup_py_python_requires(text);
        }
        project.installable = true;
        if project.manifest.is_empty() {
            project.manifest = "setup-py";
        }
    }
    let tox = read("tox.ini");
    // tox's `extras` name the extras its test environment installs: the project's own word
    // for which extras the tests need, taken over the name-based guess.
    let mut tox_extras = Vec::new();
    if let Some(text) = &tox {
        let (specs, files) = tox_deps(text);
        project.extra_requirements.extend(specs);
        project.requirement_files.extend(files);
        if let Some(section) = ini_section(text, "testenv") {
            tox_extras = ini_list(&section, "extras")
                .iter()
                .flat_map(|line| line.split(','))
                .map(str::trim)
                .filter(|e| !e.is_empty() && !e.contains(['{', ':', ' ']))
                .map(str::to_string)
                .collect();
        }
    }
    if let Some(text) = read("noxfile.py") {
        let (specs, files) = nox_installs(&text);
        project.extra_requirements.extend(specs);
        project.requirement_files.extend(files);
    }
    let pytest_config = [
        read("pytest.ini").and_then(|t| ini_section(&t, "pytest")),
        tox.as_deref().and_then(|t| ini_section(t, "pytest")),
        setup_cfg
            .as_deref()
            .and_then(|t| ini_section(t, "tool:pytest")),
        pyproject.as_deref().and_then(pyproject_pytest_section),
    ];
    if let Some(section) = pytest_config.into_iter().flatten().next() {
        project.extra_requirements.extend(pytest_plugins(&section));
        project.python_files = ini_list(&section, "python_files");
    }
    let mut dependency_texts: Vec<String> = [&pyproject, &setup_cfg, &setup_py, &tox]
        .into_iter()
        .flatten()
        .cloned()
        .collect();
    let files = project.requirement_files.iter().map(String::as_str);
    dependency_texts.extend(
        files
            .chain(DJANGO_REQUIREMENTS.iter().copied())
            .filter_map(read),
    );
    dependency_texts.extend(project.extra_requirements.iter().cloned());
    project.system_packages = header_packages(
        &dependency_texts
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    let mut seen = std::collections::BTreeSet::new();
    project
        .requirement_files
        .retain(|f| root.join(f).is_file() && seen.insert(f.clone()));
    let mut seen = std::collections::BTreeSet::new();
    project
        .extra_requirements
        .retain(|r| seen.insert(requirement_name(r)));
    let declared: Vec<String> = tox_extras
        .into_iter()
        .filter(|e| extras.contains(e))
        .collect();
    project.test_extras = if declared.is_empty() {
        TEST_EXTRAS
            .iter()
            .filter(|name| extras.iter().any(|e| e == *name))
            .take(1)
            .map(|s| (*s).to_string())
            .collect()
    } else {
        declared
    };
    if project.manifest.is_empty() {
        project.manifest = "requirements";
    }
    Some(project)
}

/// Keys of one `[section]` of an INI file (setup.cfg).
fn ini_section_keys(text: &str, section: &str) -> Vec<String> {
    let mut inside = false;
    let mut keys = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            inside = trimmed == format!("[{section}]");
            continue;
        }
        // Continuation lines are indented; keys start at column 0.
        if inside
            && !line.starts_with(char::is_whitespace)
            && let Some((key, _)) = trimmed.split_once('=')
        {
            keys.push(key.trim().to_string());
        }
    }
    keys
}

/// The body of one `[section]` of an INI file, `None` when the section is absent.
fn ini_section(text: &str, section: &str) -> Option<String> {
    let mut inside = false;
    let mut found = false;
    let mut body = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') && trimmed.ends_with(']') {
            inside = trimmed == format!("[{section}]");
            found |= inside;
            continue;
        }
        if inside {
            body.push_str(line);
            body.push('\n');
        }
    }
    found.then_some(body)
}

/// A multi-line INI value (`key =` then indented lines), one entry per line.
fn ini_list(section: &str, key: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in section.lines() {
        if !line.starts_with(char::is_whitespace) {
            inside = false;
            if let Some((k, v)) = line.split_once('=')
                && k.trim() == key
            {
                inside = true;
                out.extend(Some(v.trim().to_string()).filter(|v| !v.is_empty()));
            }
        } else if inside {
            let entry = line.trim();
            if !entry.is_empty() && !entry.starts_with('#') {
                out.push(entry.to_string());
            }
        }
    }
    out
}

/// Whether `spec` reads as one plain requirement (`pytest`, `mock>=2`, `pkg[extra]==1.0`),
/// rather than an option, a path, a URL or a tox substitution.
fn is_plain_requirement(spec: &str) -> bool {
    let name_end = spec
        .find(|c: char| !(c.is_ascii_alphanumeric() || "._-".contains(c)))
        .unwrap_or(spec.len());
    name_end > 0
        && spec.starts_with(|c: char| c.is_ascii_alphanumeric())
        && !spec.contains(['{', '}', '/', '\\'])
        && !spec.contains("://")
        && spec[name_end..]
            .trim_start()
            .chars()
            .next()
            .is_none_or(|c| "[<>=!~;".contains(c))
}

/// The project name of a requirement, lower-cased with `_` as `-`, for de-duplication.
fn requirement_name(spec: &str) -> String {
    let end = spec
        .find(|c: char| !(c.is_ascii_alphanumeric() || "._-".contains(c)))
        .unwrap_or(spec.len());
    spec[..end].to_ascii_lowercase().replace('_', "-")
}

/// Requirements and requirement files from `deps` of tox.ini's `[testenv]`. Factor-conditional
/// lines (`py27: mock`) are left out: they belong to one environment, often an old Python.
fn tox_deps(text: &str) -> (Vec<String>, Vec<String>) {
    let mut specs = Vec::new();
    let mut files = Vec::new();
    let Some(section) = ini_section(text, "testenv") else {
        return (specs, files);
    };
    for dep in ini_list(&section, "deps") {
        if let Some(file) = dep.strip_prefix("-r") {
            let file = file.trim().trim_start_matches("{toxinidir}/");
            if !file.contains('{') {
                files.push(file.to_string());
            }
        } else if is_plain_requirement(&dep) {
            specs.push(dep);
        }
    }
    (specs, files)
}

/// Requirements and requirement files that a noxfile's `session.install(...)` calls name, as
/// string literals (`session.install("pytest", "-r", "requirements-test.txt")`).
fn nox_installs(text: &str) -> (Vec<String>, Vec<String>) {
    let mut specs = Vec::new();
    let mut files = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("session.install(") {
        rest = &rest[start + "session.install(".len()..];
        let args = &rest[..rest.find(')').unwrap_or(rest.len())];
        let literals: Vec<&str> = args.split(['"', '\'']).skip(1).step_by(2).collect();
        let mut literals = literals.into_iter();
        while let Some(arg) = literals.next() {
            if arg == "-r" {
                files.extend(literals.next().map(str::to_string));
            } else if is_plain_requirement(arg) {
                specs.push(arg.to_string());
            }
        }
    }
    (specs, files)
}

/// `[tool.pytest.ini_options]` of a pyproject as INI-like `key = value` lines.
fn pyproject_pytest_section(text: &str) -> Option<String> {
    let doc: toml::Table = text.parse().ok()?;
    let options = doc
        .get("tool")?
        .get("pytest")?
        .get("ini_options")?
        .as_table()?;
    let mut body = String::new();
    for (key, value) in options {
        let value = match value {
            toml::Value::String(s) => s.clone(),
            toml::Value::Array(items) => items
                .iter()
                .filter_map(toml::Value::as_str)
                .collect::<Vec<_>>()
                .join(" "),
            other => other.to_string(),
        };
        body.push_str(&format!("{key} = {value}\n"));
    }
    Some(body)
}

/// pytest plugins that a pytest configuration section relies on: options in `addopts` that
/// only a plugin defines, and keys that only a plugin reads. Without the plugin pytest stops
/// with "unrecognized arguments" before running anything.
fn pytest_plugins(section: &str) -> Vec<String> {
    let addopts = ini_list(section, "addopts").join(" ");
    let words: Vec<&str> = addopts.split_whitespace().collect();
    let has = |option: &str| {
        words
            .iter()
            .any(|w| *w == option || w.starts_with(&format!("{option}=")))
    };
    let key = |name: &str| {
        section
            .lines()
            .any(|l| l.split_once('=').is_some_and(|(k, _)| k.trim() == name))
    };
    let mut plugins = Vec::new();
    let mut want = |cond: bool, plugin: &str| {
        if cond {
            plugins.push(plugin.to_string());
        }
    };
    want(words.iter().any(|w| w.starts_with("--cov")), "pytest-cov");
    want(
        has("-n") || has("--numprocesses") || has("--dist"),
        "pytest-xdist",
    );
    want(has("--timeout") || key("timeout"), "pytest-timeout");
    want(has("--reruns"), "pytest-rerunfailures");
    want(
        words.iter().any(|w| w.starts_with("--benchmark")),
        "pytest-benchmark",
    );
    want(has("--doctest-plus"), "pytest-doctestplus");
    want(key("asyncio_mode"), "pytest-asyncio");
    want(key("DJANGO_SETTINGS_MODULE"), "pytest-django");
    want(key("mock_use_standalone_module"), "pytest-mock");
    plugins
}

fn ini_value(text: &str, section: &str, key: &str) -> Option<String> {
    let mut inside = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            inside = trimmed == format!("[{section}]");
        } else if inside
            && let Some((k, v)) = trimmed.split_once('=')
            && k.trim() == key
        {
            return Some(v.trim().to_string());
        }
    }
    None
}

/// The literal `python_requires='...'` of a setup.py.
fn setup_py_python_requires(text: &str) -> Option<String> {
    let start = text.find("python_requires")? + "python_requires".len();
    let rest = text[start..].trim_start().strip_prefix('=')?.trim_start();
    let quote = rest.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let body = &rest[1..];
    Some(body[..body.find(quote)?].to_string())
}

/// Whether a `requires-python` specifier admits `major.minor`. Only the common forms are read
/// (`>=3.8`, `>=3.8,<4`, `~=3.9`, `==3.11.*`); anything else is taken as admitting it.
#[must_use]
pub fn admits(spec: &str, major: u32, minor: u32) -> bool {
    let version = |s: &str| -> Option<(u32, u32)> {
        let mut parts = s.trim().trim_end_matches(".*").split('.');
        let a = parts.next()?.parse().ok()?;
        let b = parts.next().map_or(Some(0), |p| p.parse().ok())?;
        Some((a, b))
    };
    let have = (major, minor);
    spec.split(',').all(|clause| {
        let clause = clause.trim();
        let (op, rest) = ["~=", ">=", "<=", "==", "!=", ">", "<"]
            .iter()
            .find_map(|op| clause.strip_prefix(op).map(|rest| (*op, rest)))
            .unwrap_or(("", clause));
        let Some(want) = version(rest) else {
            return true;
        };
        match op {
            ">=" | "~=" => have >= want,
            ">" => have > want,
            "<=" => have <= want,
            "<" => have < want,
            "==" => have == want,
            "!=" => have != want || rest.contains('.') && rest.matches('.').count() > 1,
            _ => true,
        }
    })
}

/// The install commands of a project, in tiers: the project with its test extras first (and
/// pytest), then the test requirements (requirements files, tox's and nox's deps, pytest
/// plugins) as a command of their own. A tier that does not resolve is repaired on its own (the
/// `python-test-requirements` rule drops lint tools from the second); merged into one command,
/// an unsatisfiable pin in a requirements file would take the project's install down with it.
#[must_use]
pub fn install_commands(project: &PythonProject, cutoff: Option<&str>) -> Vec<String> {
    let mut first = install_base(cutoff, project.installable);
    if project.installable {
        match project.test_extras.as_slice() {
            [] => first.push_str(" -e ."),
            extras => first.push_str(&format!(" -e '.[{}]'", extras.join(","))),
        }
    }
    // pytest runs the suite whatever the project declares; uv merges it with any pin the
    // requirements hold.
    first.push_str(" pytest");
    let mut commands = vec![first];
    if !project.requirement_files.is_empty() || !project.extra_requirements.is_empty() {
        let mut second = install_base(cutoff, false);
        for file in &project.requirement_files {
            second.push_str(&format!(" -r {}", crate::plan::shell_quote(file)));
        }
        for spec in &project.extra_requirements {
            second.push(' ');
            second.push_str(&crate::plan::shell_quote(spec));
        }
        second.push(' ');
        second.push_str(crate::repair::TEST_REQUIREMENTS_MARK);
        commands.push(second);
    }
    commands
}

/// The test command: pytest with a summary line per test, read by the `pytest` parser.
///
/// `-v` as well as `-rA`: the short summary folds skips into `SKIPPED [n] file.py:12: reason`,
/// while the verbose lines name every skipped test by its node id.
///
/// `--continue-on-collection-errors`: a test patch often adds a module that cannot be imported
/// before the fix; without the flag pytest stops the whole session at collection, every other
/// test is absent, and validation would take them all for new (n2p) tests.
///
/// `-o console_output_style=classic`: verbose lines end with their status (`id PASSED`, no
/// `[ 50%]`), which the SWE-bench harness's `parse_log_pytest_v2` reads; pytest before 5 prints
/// no `PASSED` lines in the `-rA` summary, so without it no harness parser could read a passing
/// test of such a project (seen on sympy with pytest 3.5). pytest before 3.3 has no such
/// setting, and `-o` keeps it unread.
#[must_use]
pub fn test_command() -> String {
    format!(
        "{VENV}/bin/python -m pytest -rA -v -o console_output_style=classic --tb=short -p no:cacheprovider --color=no --continue-on-collection-errors"
    )
}

/// The Pythons of kiln's images: suite, minor version (3.x), and the day that Python was
/// released.
const PYTHONS: &[(images::Suite, u32, &str)] = &[
    (images::Suite::Bullseye, 9, "2020-10-05"),
    (images::Suite::Bookworm, 11, "2022-10-24"),
    (images::Suite::Trixie, 13, "2024-10-07"),
];

/// Describes one of [`PYTHONS`]: `Python 3.11 (Debian bookworm)`.
fn python_name(suite: images::Suite, minor: u32) -> String {
    format!("Python 3.{minor} (Debian {})", suite.name())
}

/// Picks the Python image from `.python-version` (first), `requires-python` and the commit's
/// date, with the reason.
///
/// 3.11 is the default: most of the ecosystem's history supports it, and older pins of test
/// tools often break on 3.13. A commit from before 3.11 was released gets 3.9 when the project
/// admits it: dependencies resolved as of that date often have no wheels for newer Pythons, and
/// their sdists no longer build there.
fn choose_python(
    requires: Option<&str>,
    pinned: Option<&str>,
    cutoff: Option<&str>,
) -> (images::Suite, String) {
    if let Some(line) = pinned.and_then(|p| {
        p.lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with('#'))
    }) {
        let mut parts = line.split('.');
        if let (Some("3"), Some(want)) = (
            parts.next(),
            parts.next().and_then(|m| m.parse::<u32>().ok()),
        ) {
            // The nearest configured version, the newer one on a tie.
            let (suite, minor, _) = PYTHONS
                .iter()
                .min_by_key(|(_, minor, _)| (minor.abs_diff(want), u32::MAX - minor))
                .copied()
                .unwrap_or(PYTHONS[1]);
            return (
                suite,
                format!(
                    "{}: .python-version asks for {line}",
                    python_name(suite, minor)
                ),
            );
        }
    }
    let admitted: Vec<(images::Suite, u32, &str)> = PYTHONS
        .iter()
        .copied()
        .filter(|(_, minor, _)| requires.is_none_or(|spec| admits(spec, 3, *minor)))
        .collect();
    let declared = match requires {
        Some(spec) => format!("requires-python `{spec}`"),
        None => "the repository declares no Python version".to_string(),
    };
    let day = cutoff.map(crate::plan::cutoff_day);
    let released_by = |released: &str| day.is_none_or(|d| d >= released);
    let find = |minor: u32| admitted.iter().copied().find(|p| p.1 == minor);
    let chosen = match (find(11), find(9)) {
        (Some(p311), _) if released_by(p311.2) => Some((p311, declared.clone())),
        (_, Some(p39)) => Some((
            p39,
            format!(
                "{declared}; the commit ({}) predates Python 3.11",
                day.unwrap_or("?")
            ),
        )),
        (Some(p311), None) => Some((p311, declared.clone())),
        (None, None) => admitted.first().map(|p| (*p, declared.clone())),
    };
    match chosen {
        Some(((suite, minor, _), why)) => (suite, format!("{}: {why}", python_name(suite, minor))),
        None => (
            images::Suite::Bookworm,
            format!(
                "Python 3.11 (Debian bookworm), though none of 3.9, 3.11 and 3.13 meets {declared}"
            ),
        ),
    }
}

/// Requirement files of Django's own test suite, newest layout first.
const DJANGO_REQUIREMENTS: &[&str] = &["tests/requirements/py3.txt", "tests/requirements/base.txt"];

/// Whether `root` is Django itself: `tests/runtests.py` next to the `django` package. Its
/// suite runs through that script (Django's own runner, not pytest).
fn is_django(root: &Path) -> bool {
    root.join("tests/runtests.py").is_file() && root.join("django/__init__.py").is_file()
}

/// Django test labels for the Python files under `tests/` that a test patch touches
/// (`tests/auth_tests/test_forms.py` is `auth_tests.test_forms`), as Django's own CI and the
/// SWE-bench harness select them: the whole suite is some 15 000 tests.
#[must_use]
pub fn django_labels(test_files: &[String]) -> Vec<String> {
    test_files
        .iter()
        .filter_map(|file| file.strip_prefix("tests/")?.strip_suffix(".py"))
        .filter(|module| *module != "runtests" && !module.contains('.') && !module.contains('-'))
        .map(|module| module.trim_end_matches("/__init__").replace('/', "."))
        .collect()
}

/// The plan for Django's own repository: an editable install, the suite's optional
/// requirements (each that fails to install is skipped and logged: Django skips the tests that
/// need it), and `tests/runtests.py` on the labels the test patch touches.
fn django_plan(cx: &PlanContext<'_>, project: &PythonProject) -> Plan {
    let install = install_base(cx.cutoff, true);
    let mut setup = vec![GIT_SETUP.to_string()];
    setup.extend(crate::plan::apt_install(&project.system_packages));
    setup.push(format!("python3 -m venv {VENV}"));
    setup.push(format!("{install} -e ."));
    if let Some(file) = DJANGO_REQUIREMENTS
        .iter()
        .find(|f| cx.root.join(f).is_file())
    {
        // Wheels first, all together; then line by line, a source build given at most five
        // minutes (a 2019 numpy on a newer Python builds for long and then fails). The
        // setuptools floor is left out: old sdists import what later setuptools removed.
        let install = install_base(cx.cutoff, false);
        setup.push(format!(
            "{install} --only-binary :all: -r {file} || {{ echo '[kiln] {file} has no wheels for everything; installing it line by line'; grep -v -E '^[[:space:]]*(#|$)' {file} | while IFS= read -r req; do {install} --only-binary :all: \"$req\" || timeout 300 {install} \"$req\" || echo \"[kiln] optional test requirement not installed: $req\"; done; }}"
        ));
    }
    // The whole suite is some 15 000 tests: `auto` selects, as `touched` does.
    let labels = if cx.scope == crate::plan::TestScope::All {
        Vec::new()
    } else {
        django_labels(cx.test_files)
    };
    let test_scope = if labels.is_empty() {
        "all".to_string()
    } else {
        format!("touched: {} Django test modules", labels.len())
    };
    let mut test = format!("cd tests && {VENV}/bin/python runtests.py --verbosity 2 --parallel 1");
    for label in &labels {
        test.push(' ');
        test.push_str(&crate::plan::shell_quote(label));
    }
    test.push_str(" 2>&1");
    let pinned = std::fs::read_to_string(cx.root.join(".python-version")).ok();
    let (suite, version_reason) = choose_python(
        project.requires_python.as_deref(),
        pinned.as_deref(),
        cx.cutoff,
    );
    Plan {
        name: "python-django-runtests".into(),
        language: "python",
        image: images::python_image_on(suite, cx.ca_bundle),
        version_reason,
        setup,
        rebuild: Vec::new(),
        test,
        test_scope,
        parser: "unittest",
        resolution: resolution(cx.cutoff),
        cutoff: cx.cutoff.map(str::to_string),
        repair: repair_context(suite, project, cx.cutoff),
    }
}

/// The oldest setuptools release date that editable installs may use: uv builds editables
/// only through PEP 660, which setuptools supports from 64.0 (August 2022). An older cut-off
/// would pick a setuptools that cannot build an editable at all; releases from the end of 2022
/// still accept the old `setup.py`/`setup.cfg` forms that later ones reject.
const SETUPTOOLS_FLOOR: &str = "2023-01-01T00:00:00Z";

/// `uv pip install` into the plan's venv, with the cut-off when there is one and, when
/// `editable` (the command installs the project itself), the setuptools floor.
fn install_base(cutoff: Option<&str>, editable: bool) -> String {
    let mut command = format!("uv pip install --no-cache --python {VENV}/bin/python");
    if let Some(cutoff) = cutoff {
        command.push_str(&format!(" --exclude-newer {cutoff}"));
        if editable && crate::plan::cutoff_day(cutoff) < crate::plan::cutoff_day(SETUPTOOLS_FLOOR) {
            command.push_str(&format!(
                " --exclude-newer-package setuptools={SETUPTOOLS_FLOOR}"
            ));
        }
    }
    command
}

fn resolution(cutoff: Option<&str>) -> String {
    match cutoff {
        Some(cutoff)
            if crate::plan::cutoff_day(cutoff) < crate::plan::cutoff_day(SETUPTOOLS_FLOOR) =>
        {
            format!(
                "uv pip install --exclude-newer {cutoff} (setuptools as of {SETUPTOOLS_FLOOR}: older releases cannot build editable installs)"
            )
        }
        Some(cutoff) => format!("uv pip install --exclude-newer {cutoff}"),
        None => "latest versions: no cut-off date was given".into(),
    }
}

/// The Python plan, when the repository is a Python project.
#[must_use]
pub fn plan(cx: &PlanContext<'_>) -> Option<Plan> {
    let project = detect(cx.root)?;
    if is_django(cx.root) {
        return Some(django_plan(cx, &project));
    }
    let pinned = std::fs::read_to_string(cx.root.join(".python-version")).ok();
    let (suite, version_reason) = choose_python(
        project.requires_python.as_deref(),
        pinned.as_deref(),
        cx.cutoff,
    );
    let (test, test_scope) = selection::scoped_command(
        &test_command(),
        cx.root,
        cx.scope,
        cx.test_files,
        &project.python_files,
    );
    Some(Plan {
        name: format!("python-{}", project.manifest),
        language: "python",
        image: images::python_image_on(suite, cx.ca_bundle),
        version_reason,
        setup: [GIT_SETUP.to_string()]
            .into_iter()
            .chain(crate::plan::apt_install(&project.system_packages))
            .chain([format!("python3 -m venv {VENV}")])
            .chain(install_commands(&project, cx.cutoff))
            .collect(),
        // An editable install picks up source changes without a rebuild.
        rebuild: Vec::new(),
        test,
        test_scope,
        parser: "pytest",
        resolution: resolution(cx.cutoff),
        cutoff: cx.cutoff.map(str::to_string),
        repair: repair_context(suite, &project, cx.cutoff),
    })
}

/// What the repair rules may use about a Python plan.
fn repair_context(
    suite: images::Suite,
    project: &PythonProject,
    cutoff: Option<&str>,
) -> crate::repair::RepairContext {
    crate::repair::RepairContext {
        suite: Some(suite),
        build_requires: project.build_requires.clone(),
        pip_base: install_base(cutoff, false),
        ..crate::repair::RepairContext::of("python")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project(files: &[(&str, &str)]) -> Option<PythonProject> {
        let tmp = tempfile::tempdir().unwrap();
        for (name, text) in files {
            let path = tmp.path().join(name);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).unwrap();
            }
            std::fs::write(path, text).unwrap();
        }
        detect(tmp.path())
    }

    #[test]
    fn pep621_test_extra_is_installed() {
        let p = project(&[(
            "pyproject.toml",
            "[build-system]\nrequires=['setuptools']\n[project]\nname='x'\nrequires-python='>=3.8'\n[project.optional-dependencies]\ndocs=['sphinx']\ntest=['pytest']\n",
        )])
        .unwrap_or_default();
        assert_eq!(p.test_extras, ["test"]);
        assert_eq!(p.requires_python.as_deref(), Some(">=3.8"));
        let commands = install_commands(&p, Some("2024-03-01T00:00:00Z"));
        assert_eq!(commands.len(), 1, "no test requirements besides the extra");
        assert!(
            commands[0].contains("--exclude-newer 2024-03-01T00:00:00Z -e '.[test]' pytest"),
            "{commands:?}"
        );
        assert_eq!(p.build_requires, ["setuptools"]);
    }

    #[test]
    fn setup_cfg_and_setup_py_extras_and_requirement_files() {
        let p = project(&[
            ("setup.cfg", "[metadata]\nname = x\n[options.extras_require]\ntesting =\n    pytest\ndocs = sphinx\n"),
            ("requirements-dev.txt", "pytest\n"),
        ])
        .unwrap_or_default();
        assert_eq!(p.test_extras, ["testing"]);
        assert_eq!(p.requirement_files, ["requirements-dev.txt"]);
        let p = project(&[(
            "setup.py",
            "setup(name='x', extras_require={'tests': ['pytest'], \"docs\": []})",
        )])
        .unwrap_or_default();
        assert_eq!(p.test_extras, ["tests"]);
        assert!(project(&[("README.md", "hi")]).is_none());
        // Extras one level down (a module-level dict), chosen by tox's `extras`.
        let p = project(&[
            (
                "setup.py",
                "EXTRAS_REQUIRE = {'docs': ['sphinx'], 'tests': ['pytest'], 'yaml': ['pyyaml']}
setup(name='x', extras_require=EXTRAS_REQUIRE)
",
            ),
            (
                "tox.ini",
                "[testenv]
extras =
    tests
    yaml
commands = pytest
",
            ),
        ])
        .unwrap_or_default();
        assert_eq!(p.test_extras, ["tests", "yaml"]);
        assert!(install_commands(&p, None)[0].ends_with(" -e '.[tests,yaml]' pytest"));
        let p = project(&[(
            "setup.py",
            "EXTRAS_REQUIRE = {'testing': ['pytest']}
setup(name='x', extras_require=EXTRAS_REQUIRE)
",
        )])
        .unwrap_or_default();
        assert_eq!(p.test_extras, ["testing"]);
    }

    #[test]
    fn tox_nox_and_pytest_config_add_test_requirements() {
        let p = project(&[
            ("setup.py", "setup(name='x')"),
            ("requirements-ci.txt", "hypothesis\n"),
            (
                "tox.ini",
                "[tox]\nenvlist = py38,py311\n\n[testenv]\ndeps =\n    pytest>=6\n    mock\n    py27: unittest2\n    -r{toxinidir}/requirements-ci.txt\n    -e .\n    {env:EXTRA:}\ncommands = pytest {posargs}\n\n[pytest]\naddopts = --cov=x -n auto\n",
            ),
            (
                "noxfile.py",
                "@nox.session\ndef tests(session):\n    session.install(\"-e\", \".\")\n    session.install(\"freezegun\", 'mock')\n",
            ),
        ])
        .unwrap_or_default();
        assert_eq!(p.requirement_files, ["requirements-ci.txt"]);
        assert_eq!(
            p.extra_requirements,
            [
                "pytest>=6",
                "mock",
                "freezegun",
                "pytest-cov",
                "pytest-xdist"
            ]
        );
        // Two tiers: the project, then its test requirements.
        let commands = install_commands(&p, None);
        assert!(commands[0].ends_with(" -e . pytest"), "{commands:?}");
        assert!(
            commands[1].ends_with(" -r requirements-ci.txt 'pytest>=6' mock freezegun pytest-cov pytest-xdist # kiln: test requirements"),
            "{commands:?}"
        );
        let p = project(&[(
            "pyproject.toml",
            "[project]\nname='x'\n[tool.pytest.ini_options]\naddopts = ['--timeout=30']\nasyncio_mode = 'auto'\n",
        )])
        .unwrap_or_default();
        assert_eq!(p.extra_requirements, ["pytest-timeout", "pytest-asyncio"]);
        assert!(is_plain_requirement("pkg[extra]==1.0"));
        assert!(is_plain_requirement("pkg ; python_version < '3.8'"));
        assert!(!is_plain_requirement("-e ."));
        assert!(!is_plain_requirement("git+https://x/y"));
        assert!(!is_plain_requirement("./local"));
    }

    #[test]
    fn well_known_sdists_bring_their_header_packages() {
        assert_eq!(
            header_packages(&[
                "Pillow>=6.2\npsycopg2-binary\n",
                "install_requires=['lxml']"
            ]),
            ["libjpeg-dev", "libxml2-dev", "libxslt1-dev", "zlib1g-dev"]
        );
        assert!(header_packages(&["pillow-heif\nmy_cffi_tool\n"]).is_empty());
        assert_eq!(header_packages(&["psycopg2==2.8"]), ["libpq-dev"]);
        let p = project(&[("requirements.txt", "argon2-cffi\n")]).unwrap_or_default();
        assert_eq!(p.system_packages, ["libffi-dev"]);
    }

    #[test]
    fn python_version_follows_the_repository() {
        use images::Suite::{Bookworm, Bullseye, Trixie};
        let recent = Some("2024-06-01T00:00:00Z");
        assert_eq!(choose_python(Some(">=3.8"), None, recent).0, Bookworm);
        assert_eq!(choose_python(None, None, None).0, Bookworm);
        assert_eq!(choose_python(Some(">=3.12"), None, recent).0, Trixie);
        assert_eq!(choose_python(None, Some("3.13.1\n"), recent).0, Trixie);
        assert_eq!(
            choose_python(Some(">=3.12"), Some("3.10"), recent).0,
            Bookworm
        );
        assert_eq!(choose_python(None, Some("3.8"), recent).0, Bullseye);
        assert_eq!(choose_python(Some(">=3.6,<3.10"), None, recent).0, Bullseye);
        let (suite, reason) = choose_python(Some(">=3.6"), None, Some("2019-09-17T12:00:00Z"));
        assert_eq!(suite, Bullseye);
        assert_eq!(
            reason,
            "Python 3.9 (Debian bullseye): requires-python `>=3.6`; the commit (2019-09-17) predates Python 3.11"
        );
        // A project that needs 3.11 gets it whatever its date.
        assert_eq!(
            choose_python(Some(">=3.11"), None, Some("2022-01-01T00:00:00Z")).0,
            Bookworm
        );
        let (suite, reason) = choose_python(Some(">=3.14"), None, recent);
        assert_eq!(suite, Bookworm);
        assert!(reason.contains("none of"), "{reason}");
    }

    #[test]
    fn django_runs_runtests_on_the_labels_of_the_test_patch() {
        let files = [
            "tests/auth_tests/test_forms.py".to_string(),
            "tests/migrations/test_base.py".to_string(),
            "tests/template_tests/templates/x.html".to_string(),
            "tests/i18n/sampleproject/__init__.py".to_string(),
            "django/contrib/auth/forms.py".to_string(),
            "docs/releases/3.1.txt".to_string(),
        ];
        assert_eq!(
            django_labels(&files),
            [
                "auth_tests.test_forms",
                "migrations.test_base",
                "i18n.sampleproject"
            ]
        );
        let tmp = crate::plan::testutil::tree(&[
            ("setup.py", "setup(name='Django', python_requires='>=3.6')"),
            ("django/__init__.py", ""),
            ("tests/runtests.py", ""),
            (
                "tests/requirements/py3.txt",
                "asgiref\npylibmc; sys_platform != 'win32'\n",
            ),
        ]);
        let plan = plan(&PlanContext {
            root: tmp.path(),
            cutoff: Some("2019-10-01T00:00:00Z"),
            ca_bundle: None,
            test_files: &files,
            scope: crate::plan::TestScope::Auto,
        })
        .expect("no plan");
        assert_eq!(plan.name, "python-django-runtests");
        assert!(
            plan.image.tag.starts_with("kiln/python:3.9-"),
            "{}",
            plan.image.tag
        );
        assert!(
            plan.version_reason
                .contains("`>=3.6`; the commit (2019-10-01) predates"),
            "{}",
            plan.version_reason
        );
        assert_eq!(plan.parser, "unittest");
        assert_eq!(
            plan.test,
            "cd tests && /opt/kiln/venv/bin/python runtests.py --verbosity 2 --parallel 1 auth_tests.test_forms migrations.test_base i18n.sampleproject 2>&1"
        );
        assert!(
            plan.setup[1]
                .contains("install -y --no-install-recommends libmemcached-dev zlib1g-dev &&"),
            "{}",
            plan.setup[1]
        );
        assert!(
            plan.setup[3].ends_with(
                "--exclude-newer 2019-10-01T00:00:00Z --exclude-newer-package setuptools=2023-01-01T00:00:00Z -e ."
            ),
            "{}",
            plan.setup[3]
        );
        assert!(
            plan.setup[4].contains("--only-binary :all: -r tests/requirements/py3.txt || {")
                && !plan.setup[4].contains("setuptools="),
            "{}",
            plan.setup[4]
        );
    }

    #[test]
    fn requires_python_is_compared() {
        assert!(admits(">=3.8", 3, 11));
        assert!(!admits(">=3.12", 3, 11));
        assert!(!admits(">=3.6,<3.10", 3, 11));
        assert!(admits("~=3.9", 3, 11));
        assert!(admits("weird", 3, 11));
    }
}
