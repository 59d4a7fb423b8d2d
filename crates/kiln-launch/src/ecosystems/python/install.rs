//! How a Python project is installed: the project with its test extras, then its test
//! requirements, into the plan's virtualenv with the dependency cut-off; and what the repair
//! rules may use about it.

use crate::debian::Suite;
use crate::plan::{RepairContext, cutoff_day};
use crate::steps::{PipInstall, PipPurpose, ProjectInstall, Step};

use super::detect::PythonProject;

/// The oldest setuptools release date that editable installs may use: uv builds editables
/// only through PEP 660, which setuptools supports from 64.0 (August 2022). An older cut-off
/// would pick a setuptools that cannot build an editable at all; releases from the end of 2022
/// still accept the old `setup.py`/`setup.cfg` forms that later ones reject.
const SETUPTOOLS_FLOOR: &str = "2023-01-01T00:00:00Z";

/// An install into the plan's venv with the cut-off when there is one and, when `editable`
/// (the step installs the project itself), the setuptools floor.
#[must_use]
pub fn install_base(cutoff: Option<&str>, editable: bool) -> PipInstall {
    let mut install = PipInstall::new(cutoff);
    if let Some(cutoff) = cutoff
        && editable
        && cutoff_day(cutoff) < cutoff_day(SETUPTOOLS_FLOOR)
    {
        install.floors = vec![("setuptools".into(), SETUPTOOLS_FLOOR.into())];
    }
    install
}

/// How the plan fixes dependency versions, for the row.
#[must_use]
pub fn resolution(cutoff: Option<&str>) -> String {
    match cutoff {
        Some(cutoff) if cutoff_day(cutoff) < cutoff_day(SETUPTOOLS_FLOOR) => {
            format!(
                "uv pip install --exclude-newer {cutoff} (setuptools as of {SETUPTOOLS_FLOOR}: older releases cannot build editable installs)"
            )
        }
        Some(cutoff) => format!("uv pip install --exclude-newer {cutoff}"),
        None => "latest versions: no cut-off date was given".into(),
    }
}

/// The install steps of a project, in tiers: the project with its test extras first (and
/// pytest), then the test requirements (requirements files, tox's and nox's deps, pytest
/// plugins) as a step of their own. A tier that does not resolve is repaired on its own (the
/// `python-test-requirements` rule drops lint tools from the second); merged into one step, an
/// unsatisfiable pin in a requirements file would take the project's install down with it.
#[must_use]
pub fn install_commands(project: &PythonProject, cutoff: Option<&str>) -> Vec<Step> {
    let mut first = install_base(cutoff, project.installable);
    if project.installable {
        first.project = Some(ProjectInstall {
            editable: true,
            extras: project.test_extras.clone(),
        });
    }
    // pytest runs the suite whatever the project declares; uv merges it with any pin the
    // requirements hold.
    first.specs.push("pytest".into());
    let mut steps = vec![Step::Pip(first)];
    if !project.requirement_files.is_empty() || !project.extra_requirements.is_empty() {
        steps.push(Step::Pip(PipInstall {
            purpose: PipPurpose::TestRequirements,
            files: project.requirement_files.clone(),
            specs: project.extra_requirements.clone(),
            ..install_base(cutoff, false)
        }));
    }
    steps
}

/// The Python packages the project's CI installs by name and kiln's steps do not (the optional
/// test dependencies whose absence makes tests skip: dask for a scientific project), as a
/// tolerant install of its own; `None` when there are none.
#[must_use]
pub fn ci_requirements(
    ci: &[String],
    project: &PythonProject,
    cutoff: Option<&str>,
) -> Option<Step> {
    let specs: Vec<String> = ci
        .iter()
        .filter(|spec| !project.extra_requirements.contains(spec))
        .cloned()
        .collect();
    (!specs.is_empty()).then(|| {
        Step::Pip(PipInstall {
            purpose: PipPurpose::TestRequirements,
            specs,
            tolerant: true,
            ..install_base(cutoff, false)
        })
    })
}

/// What the repair rules may use about a Python plan.
#[must_use]
pub fn repair_context(
    suite: Suite,
    project: &PythonProject,
    cutoff: Option<&str>,
) -> RepairContext {
    RepairContext {
        suite: Some(suite),
        build_requires: project.build_requires.clone(),
        pip: Some(install_base(cutoff, false)),
        ..RepairContext::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ecosystems::python::detect::tests::project;

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
            commands[0]
                .render()
                .contains("--exclude-newer 2024-03-01T00:00:00Z -e '.[test]' pytest"),
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
        assert!(
            install_commands(&p, None)[0]
                .render()
                .ends_with(" -e '.[tests,yaml]' pytest")
        );
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
        assert!(
            commands[0].render().ends_with(" -e . pytest"),
            "{commands:?}"
        );
        assert!(
            commands[1].render().ends_with(
                " -r requirements-ci.txt 'pytest>=6' mock freezegun pytest-cov pytest-xdist"
            ),
            "{commands:?}"
        );
        let p = project(&[(
            "pyproject.toml",
            "[project]\nname='x'\n[tool.pytest.ini_options]\naddopts = ['--timeout=30']\nasyncio_mode = 'auto'\n",
        )])
        .unwrap_or_default();
        assert_eq!(p.extra_requirements, ["pytest-timeout", "pytest-asyncio"]);
        assert!(crate::ecosystems::python::detect::is_plain_requirement(
            "pkg[extra]==1.0"
        ));
        assert!(crate::ecosystems::python::detect::is_plain_requirement(
            "pkg ; python_version < '3.8'"
        ));
        assert!(!crate::ecosystems::python::detect::is_plain_requirement(
            "-e ."
        ));
        assert!(!crate::ecosystems::python::detect::is_plain_requirement(
            "git+https://x/y"
        ));
        assert!(!crate::ecosystems::python::detect::is_plain_requirement(
            "./local"
        ));
    }
}
