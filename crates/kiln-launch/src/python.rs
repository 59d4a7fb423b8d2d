//! The Python plan: detect how a repository declares its dependencies and tests, and turn that
//! into install and test commands.

use std::path::Path;

use crate::images;
use crate::plan::{GIT_SETUP, Plan, PlanContext};

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
        extras.extend(setup_py_extras(text));
        project.installable = true;
        if project.manifest.is_empty() {
            project.manifest = "setup-py";
        }
    }
    project.test_extras = TEST_EXTRAS
        .iter()
        .filter(|name| extras.iter().any(|e| e == *name))
        .take(1)
        .map(|s| (*s).to_string())
        .collect();
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

/// Extra names that appear as string keys after `extras_require` in a setup.py. A heuristic: it
/// reads the literal dict, which is how almost every setup.py declares extras.
fn setup_py_extras(text: &str) -> Vec<String> {
    let Some(start) = text.find("extras_require") else {
        return Vec::new();
    };
    let rest = &text[start..];
    let end = rest.find('}').unwrap_or(rest.len());
    let body = &rest[..end];
    let mut out = Vec::new();
    for quote in ['"', '\''] {
        let parts: Vec<&str> = body.split(quote).collect();
        for (i, part) in parts.iter().enumerate() {
            // A key is a quoted string followed by a colon.
            if i % 2 == 1
                && parts
                    .get(i + 1)
                    .is_some_and(|next| next.trim_start().starts_with(':'))
            {
                out.push((*part).to_string());
            }
        }
    }
    out
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

/// The install command for a project: one `uv pip install` resolving everything together.
#[must_use]
pub fn install_command(project: &PythonProject, cutoff: Option<&str>) -> String {
    let mut command = format!("uv pip install --no-cache --python {VENV}/bin/python");
    if let Some(cutoff) = cutoff {
        command.push_str(&format!(" --exclude-newer {cutoff}"));
    }
    if project.installable {
        match project.test_extras.first() {
            Some(extra) => command.push_str(&format!(" -e '.[{extra}]'")),
            None => command.push_str(" -e ."),
        }
    }
    for file in &project.requirement_files {
        command.push_str(&format!(" -r {file}"));
    }
    // pytest runs the suite whatever the project declares; uv merges it with any pin the
    // requirements hold.
    command.push_str(" pytest");
    command
}

/// The test command: pytest with a summary line per test, read by the `pytest` parser.
///
/// `--continue-on-collection-errors`: a test patch often adds a module that cannot be imported
/// before the fix; without the flag pytest stops the whole session at collection, every other
/// test is absent, and validation would take them all for new (n2p) tests.
#[must_use]
pub fn test_command() -> String {
    format!(
        "{VENV}/bin/python -m pytest -rA --tb=short -p no:cacheprovider --color=no --continue-on-collection-errors"
    )
}

/// Picks Python 3.11 (bookworm) or 3.13 (trixie) from `.python-version` (first) or
/// `requires-python`, with the reason. 3.11 is the default: most of the ecosystem's history
/// supports it, and older pins of test tools often break on 3.13.
fn choose_python(requires: Option<&str>, pinned: Option<&str>) -> (images::Suite, String) {
    use images::Suite::{Bookworm, Trixie};
    if let Some(line) = pinned.and_then(|p| {
        p.lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with('#'))
    }) {
        let mut parts = line.split('.');
        let minor = (
            parts.next(),
            parts.next().and_then(|m| m.parse::<u32>().ok()),
        );
        if let (Some("3"), Some(minor)) = minor {
            return if minor >= 12 {
                (
                    Trixie,
                    format!("Python 3.13 (Debian trixie): .python-version asks for {line}"),
                )
            } else {
                (
                    Bookworm,
                    format!("Python 3.11 (Debian bookworm): .python-version asks for {line}"),
                )
            };
        }
    }
    match requires {
        Some(spec) if admits(spec, 3, 11) => (
            Bookworm,
            format!("Python 3.11 (Debian bookworm) admits requires-python `{spec}`"),
        ),
        Some(spec) if admits(spec, 3, 13) => (
            Trixie,
            format!("Python 3.13 (Debian trixie): requires-python `{spec}` excludes 3.11"),
        ),
        Some(spec) => (
            Bookworm,
            format!(
                "Python 3.11 (Debian bookworm), though neither 3.11 nor 3.13 meets requires-python `{spec}`"
            ),
        ),
        None => (
            Bookworm,
            "Python 3.11 (Debian bookworm): the repository declares no Python version".into(),
        ),
    }
}

/// The Python plan, when the repository is a Python project.
#[must_use]
pub fn plan(cx: &PlanContext<'_>) -> Option<Plan> {
    let project = detect(cx.root)?;
    let pinned = std::fs::read_to_string(cx.root.join(".python-version")).ok();
    let (suite, version_reason) =
        choose_python(project.requires_python.as_deref(), pinned.as_deref());
    Some(Plan {
        name: format!("python-{}", project.manifest),
        language: "python",
        image: images::python_image_on(suite, cx.ca_bundle),
        version_reason,
        setup: vec![
            GIT_SETUP.to_string(),
            format!("python3 -m venv {VENV}"),
            install_command(&project, cx.cutoff),
        ],
        // An editable install picks up source changes without a rebuild.
        rebuild: Vec::new(),
        test: test_command(),
        parser: "pytest",
        resolution: match cx.cutoff {
            Some(cutoff) => format!("uv pip install --exclude-newer {cutoff}"),
            None => "latest versions: no cut-off date was given".into(),
        },
        cutoff: cx.cutoff.map(str::to_string),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project(files: &[(&str, &str)]) -> Option<PythonProject> {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        for (name, text) in files {
            let path = tmp.path().join(name);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).unwrap_or_else(|e| panic!("{e}"));
            }
            std::fs::write(path, text).unwrap_or_else(|e| panic!("{e}"));
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
        let command = install_command(&p, Some("2024-03-01T00:00:00Z"));
        assert!(
            command.contains("--exclude-newer 2024-03-01T00:00:00Z -e '.[test]' pytest"),
            "{command}"
        );
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
    }

    #[test]
    fn python_version_follows_the_repository() {
        use images::Suite::{Bookworm, Trixie};
        assert_eq!(choose_python(Some(">=3.8"), None).0, Bookworm);
        assert_eq!(choose_python(Some(">=3.12"), None).0, Trixie);
        assert_eq!(choose_python(None, Some("3.13.1\n")).0, Trixie);
        assert_eq!(choose_python(Some(">=3.12"), Some("3.10")).0, Bookworm);
        let (suite, reason) = choose_python(Some(">=3.14"), None);
        assert_eq!(suite, Bookworm);
        assert!(reason.contains("neither"), "{reason}");
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
