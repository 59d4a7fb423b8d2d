//! What a Python repository's files say about installing and testing it: the manifests
//! (pyproject, setup.cfg, setup.py), requirement files, tox's and nox's test dependencies, the
//! pytest configuration's plugins, and the system packages well-known sdists compile against.

use std::path::Path;

use super::setup_py;
use crate::plan::{ini_list, ini_section};

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
    if let Some(text) = &pyproject {
        read_pyproject(text, &mut project, &mut extras);
    }
    if let Some(text) = &setup_cfg {
        read_setup_cfg(text, &mut project, &mut extras);
    }
    if let Some(text) = &setup_py {
        read_setup_py(text, &mut project, &mut extras);
    }
    let tox = read("tox.ini");
    let tox_extras = tox
        .as_deref()
        .map(|text| read_tox(text, &mut project))
        .unwrap_or_default();
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
    let manifests: Vec<String> = [&pyproject, &setup_cfg, &setup_py, &tox]
        .into_iter()
        .flatten()
        .cloned()
        .collect();
    project.system_packages = system_packages(root, &project, manifests);
    dedupe(root, &mut project);
    project.test_extras = test_extras(tox_extras, &extras);
    if project.manifest.is_empty() {
        project.manifest = "requirements";
    }
    Some(project)
}

/// What `pyproject.toml` says: its extras (PEP 621 and Poetry), `requires-python`, the build
/// requirements, and whether it makes the repository installable.
fn read_pyproject(text: &str, project: &mut PythonProject, extras: &mut Vec<String>) {
    let Ok(doc) = text.parse::<toml::Table>() else {
        return;
    };
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
    // A pyproject without a build system table or [project] (only tool config) does not make
    // the repository installable by itself.
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

/// What `setup.cfg` says: its extras, `python_requires`, and whether it makes the repository
/// installable.
fn read_setup_cfg(text: &str, project: &mut PythonProject, extras: &mut Vec<String>) {
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

/// What `setup.py` says: its extras and `python_requires`; it makes the repository installable.
fn read_setup_py(text: &str, project: &mut PythonProject, extras: &mut Vec<String>) {
    extras.extend(setup_py::extras(text));
    if project.requires_python.is_none() {
        project.requires_python = setup_py_python_requires(text);
    }
    project.installable = true;
    if project.manifest.is_empty() {
        project.manifest = "setup-py";
    }
}

/// What `tox.ini` adds: its test environment's dependencies and requirement files, and the
/// extras it installs (returned): the project's own word for which extras the tests need,
/// taken over the name-based guess.
fn read_tox(text: &str, project: &mut PythonProject) -> Vec<String> {
    let (specs, files) = tox_deps(text);
    project.extra_requirements.extend(specs);
    project.requirement_files.extend(files);
    let Some(section) = ini_section(text, "testenv") else {
        return Vec::new();
    };
    ini_list(&section, "extras")
        .iter()
        .flat_map(|line| line.split(','))
        .map(str::trim)
        .filter(|e| !e.is_empty() && !e.contains(['{', ':', ' ']))
        .map(str::to_string)
        .collect()
}

/// The Debian packages the dependencies' native builds need, from the headers and libraries
/// that the manifests, the requirement files and the extra requirements name.
fn system_packages(root: &Path, project: &PythonProject, manifests: Vec<String>) -> Vec<String> {
    let read = |name: &str| std::fs::read_to_string(root.join(name)).ok();
    let mut texts = manifests;
    let files = project.requirement_files.iter().map(String::as_str);
    texts.extend(
        files
            .chain(DJANGO_REQUIREMENTS.iter().copied())
            .filter_map(read),
    );
    texts.extend(project.extra_requirements.iter().cloned());
    header_packages(&texts.iter().map(String::as_str).collect::<Vec<_>>())
}

/// Each requirement file (that exists) and each extra requirement once.
fn dedupe(root: &Path, project: &mut PythonProject) {
    let mut seen = std::collections::BTreeSet::new();
    project
        .requirement_files
        .retain(|f| root.join(f).is_file() && seen.insert(f.clone()));
    let mut seen = std::collections::BTreeSet::new();
    project
        .extra_requirements
        .retain(|r| seen.insert(requirement_name(r)));
}

/// The extras the tests need: those tox installs that the project declares, else the first
/// declared one with a test-like name.
fn test_extras(tox_extras: Vec<String>, extras: &[String]) -> Vec<String> {
    let declared: Vec<String> = tox_extras
        .into_iter()
        .filter(|e| extras.contains(e))
        .collect();
    if !declared.is_empty() {
        return declared;
    }
    TEST_EXTRAS
        .iter()
        .filter(|name| extras.iter().any(|e| e == *name))
        .take(1)
        .map(|s| (*s).to_string())
        .collect()
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

/// Whether `spec` reads as one plain requirement (`pytest`, `mock>=2`, `pkg[extra]==1.0`),
/// rather than an option, a path, a URL or a tox substitution.
pub fn is_plain_requirement(spec: &str) -> bool {
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
pub(crate) fn requirement_name(spec: &str) -> String {
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

/// Requirement files of Django's own test suite, newest layout first.
pub const DJANGO_REQUIREMENTS: &[&str] =
    &["tests/requirements/py3.txt", "tests/requirements/base.txt"];

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn project(files: &[(&str, &str)]) -> Option<PythonProject> {
        detect(crate::testutil::tree(files).path())
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
}
