//! Repair rules of Python plans: build backends that cannot make an editable install, a
//! setup.py that needs an old setuptools, test requirements that do not resolve together, an
//! interpreter too new for the project, and test modules nothing installed.

use crate::debian::Suite;
use crate::plan::RepairContext;
use crate::repair::{Failed, Phase, Repair, Rule, Target};
use crate::steps::{PipInstall, PipPurpose, ProjectInstall, Step, VENV};

/// Import names of common distributions whose import name differs (`import yaml` needs
/// `pyyaml`).
const IMPORT_TO_DIST: &[(&str, &str)] = &[
    ("yaml", "pyyaml"),
    ("PIL", "pillow"),
    ("sklearn", "scikit-learn"),
    ("cv2", "opencv-python-headless"),
    ("bs4", "beautifulsoup4"),
    ("dateutil", "python-dateutil"),
    ("attr", "attrs"),
    ("jwt", "pyjwt"),
    ("magic", "python-magic"),
    ("serial", "pyserial"),
    ("usb", "pyusb"),
    ("Crypto", "pycryptodome"),
    ("OpenSSL", "pyopenssl"),
    ("google.protobuf", "protobuf"),
    ("dotenv", "python-dotenv"),
    ("multipart", "python-multipart"),
    ("git", "gitpython"),
    ("docx", "python-docx"),
    ("fitz", "pymupdf"),
    ("skimage", "scikit-image"),
    ("zmq", "pyzmq"),
    ("MySQLdb", "mysqlclient"),
    ("psycopg2", "psycopg2-binary"),
    ("pkg_resources", "setuptools"),
    ("setuptools", "setuptools"),
];

/// The failing step as a Python install, when it is one.
fn pip_step<'a>(failed: &'a Failed<'_>) -> Option<&'a PipInstall> {
    match failed.step()? {
        Step::Pip(install) => Some(install),
        _ => None,
    }
}

/// An editable install built in isolation becomes: the build requirements (a setuptools with
/// PEP 660 in place of a pinned older one) installed in the venv, the dependencies installed
/// as before (each built in isolation), then the project alone without build isolation.
fn editable_without_isolation(
    failed: &Failed<'_>,
    _c: &regex::Captures<'_>,
    cx: &RepairContext,
) -> Option<Repair> {
    let install = pip_step(failed)?;
    if !install.project.as_ref().is_some_and(|p| p.editable) || !install.build_isolation {
        return None;
    }
    let mut requires: Vec<String> = cx
        .build_requires
        .iter()
        .filter(|r| {
            let name = r.trim().to_ascii_lowercase();
            // setuptools itself and wheel are replaced; plugins such as setuptools_scm stay.
            let plugin = name.starts_with("setuptools_scm") || name.starts_with("setuptools-scm");
            (plugin || !name.starts_with("setuptools")) && !name.starts_with("wheel")
        })
        .cloned()
        .collect();
    requires.insert(0, "wheel".into());
    requires.insert(0, "setuptools>=64".into());
    Some(Repair::Replace(vec![Step::Pip(PipInstall {
        build_isolation: false,
        build_requirements: requires,
        ..install.clone()
    })]))
}

/// A project whose `setup.py` needs an old setuptools: installed without `-e` against
/// `setuptools<58` (and without the setuptools floor), and reinstalled (offline) after each
/// source change.
fn old_setuptools_non_editable(
    failed: &Failed<'_>,
    _c: &regex::Captures<'_>,
    cx: &RepairContext,
) -> Option<Repair> {
    let install = pip_step(failed)?;
    let old = "setuptools<58";
    if install.specs.iter().any(|s| s == old) || install.build_requirements.iter().any(|s| s == old)
    {
        return None;
    }
    let template = cx.pip.clone()?;
    // After python-editable-backend the install carries build requirements with a newer
    // setuptools: those go in with the older setuptools (the newer one left out), and the
    // install itself builds against the venv.
    let mut specs = vec![old.to_string(), "wheel".to_string()];
    specs.extend(
        install
            .build_requirements
            .iter()
            .filter(|r| {
                let name = r.trim().to_ascii_lowercase();
                let plugin =
                    name.starts_with("setuptools_scm") || name.starts_with("setuptools-scm");
                (plugin || !name.starts_with("setuptools")) && !name.starts_with("wheel")
            })
            .cloned(),
    );
    let mut retry = install.clone();
    retry.floors.clear();
    retry.build_requirements.clear();
    let mut rebuild = Vec::new();
    if let Some(project) = &mut retry.project {
        project.editable = false;
        retry.build_isolation = false;
        rebuild.push(Step::Pip(PipInstall {
            offline: true,
            build_isolation: false,
            project: Some(ProjectInstall::default()),
            ..PipInstall::default()
        }));
    }
    Some(Repair::ReplaceWithRebuild {
        steps: vec![
            Step::Pip(PipInstall { specs, ..template }),
            Step::Pip(retry),
        ],
        rebuild,
    })
}

/// Test requirements that do not resolve together: installed tolerantly (lint and docs tools
/// the tests never import dropped, then the rest together, or line by line).
fn drop_non_test_tools(
    failed: &Failed<'_>,
    _c: &regex::Captures<'_>,
    _cx: &RepairContext,
) -> Option<Repair> {
    let install = pip_step(failed)?;
    (!install.tolerant).then(|| {
        Repair::Replace(vec![Step::Pip(PipInstall {
            tolerant: true,
            ..install.clone()
        })])
    })
}

/// A module the test run cannot import that is not the project's own: its distribution,
/// installed.
fn missing_test_module(
    _f: &Failed<'_>,
    caps: &regex::Captures<'_>,
    cx: &RepairContext,
) -> Option<Repair> {
    let module = caps.get(1)?.as_str();
    let top = module.split('.').next()?;
    if top.is_empty() || !top.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return None;
    }
    let dist = IMPORT_TO_DIST
        .iter()
        .find(|(import, _)| *import == top || module.starts_with(&format!("{import}.")))
        .map_or_else(|| top.replace('_', "-"), |(_, dist)| (*dist).to_string());
    let install = PipInstall {
        specs: vec![dist.clone()],
        ..cx.pip.clone()?
    };
    // The project's own package (a C extension not built, a module the test patch adds) is
    // not something to download.
    Some(Repair::Before(vec![Step::Shell(format!(
        "for d in {top} src/{top} lib/{top}; do if [ -e \"$d\" ] || [ -e \"$d.py\" ]; then echo \"[kiln] {top} is the project's own module, not a missing dependency\"; exit 1; fi; done; {} && echo '[kiln] installed {dist} for `import {module}`'",
        install.render()
    ))]))
}

/// The packages the CI installs that the plan added on its own initiative (the optional step
/// of [`super::install::ci_requirements`]): when the baseline then fails at collection (a
/// plugin that imports the project while the project imports it, `partially initialized
/// module`), they are uninstalled and the tests run again, so the baseline is no worse for
/// them; the row names those dropped.
fn drop_optional_ci_packages(
    _f: &Failed<'_>,
    _c: &regex::Captures<'_>,
    cx: &RepairContext,
) -> Option<Repair> {
    let names: Vec<String> = cx
        .optional
        .iter()
        .filter_map(|step| match step {
            Step::Pip(install)
                if install.purpose == PipPurpose::TestRequirements && install.tolerant =>
            {
                Some(
                    install
                        .specs
                        .iter()
                        .map(|s| super::detect::requirement_name(s)),
                )
            }
            _ => None,
        })
        .flatten()
        .filter(|name| !name.is_empty() && name != "pytest")
        .collect();
    if names.is_empty() {
        return None;
    }
    // Only what is installed goes, and only that is named: the CI's lines may name more.
    let list = crate::shell::join(&names);
    let python = format!("{VENV}/bin/python");
    Some(Repair::Before(vec![Step::Shell(format!(
        "d=; for p in {list}; do uv pip show --python {python} \"$p\" >/dev/null 2>&1 && d=\"$d $p\"; done; \
if [ -n \"$d\" ]; then uv pip uninstall --python {python} $d && echo \"[kiln] dropped optional packages the CI installs:$d\"; fi"
    ))]))
}

/// Starts over on `target`'s Python unless the plan is there already.
fn interpreter(target: Suite, cx: &RepairContext) -> Option<Repair> {
    (cx.suite != Some(target)).then_some(Repair::Interpreter(target))
}

/// The rules of Python plans, in the order they are tried.
pub static RULES: &[Rule] = &[
    Rule {
        name: "python-editable-backend",
        phase: Phase::Setup,
        target: Target::Pip,
        signature: r"(?i)build_editable|does not support (pep ?660|editable)|editable mode currently requires|editable .*(not supported|unsupported)|\[pep 660\]",
        description: "the build backend the project pins cannot make an editable install (no PEP 660, setuptools before 64): its build requirements and a newer setuptools go into the venv, its dependencies are installed as before (each built in isolation), and the project alone without build isolation",
        repair: editable_without_isolation,
    },
    Rule {
        name: "python-old-setuptools",
        phase: Phase::Setup,
        target: Target::Pip,
        signature: r"(?i)use_2to3 is invalid|error in .* setup command|module 'setuptools(\.\w+)*' has no attribute|cannot import name '\w+' from 'setuptools|No module named 'setuptools\.(command\.)?(build|test|dep_util|extern)'|'Distribution' object has no attribute|invalid command 'bdist_wheel'",
        description: "the project's setup.py needs a setuptools older than the one its install got: it is installed without -e against setuptools<58 and reinstalled after each patch",
        repair: old_setuptools_non_editable,
    },
    Rule {
        name: "python-test-requirements",
        phase: Phase::Setup,
        target: Target::TestRequirements,
        signature: r"(?i)No solution found when resolving|unsatisfiable|Could not find a version that satisfies|No matching distribution|was yanked|conflict|not found in the package registry",
        description: "the test requirements do not resolve together: lint, typing and docs tools the tests never import are dropped, then the rest installed together or line by line, each line that cannot be installed logged",
        repair: drop_non_test_tools,
    },
    Rule {
        name: "python-needs-older-python",
        phase: Phase::Setup,
        target: Target::Any,
        signature: r"(?i)current Python version \(3\.1[1-9][.\d]*\) does not satisfy|requires a different Python|not supported on Python 3\.1[1-9]|only versions (>|>=)=?[\d.]+,\s*<3\.1[01]\b|Python 3\.1[1-9] is not supported|longintrepr\.h: No such file|error: '_PyLong_\w+|PyCode_New|_PyUnicode_Ready|has no member named 'ob_digit'",
        description: "a dependency or the project does not support the image's Python (an old sdist, a C extension written for the 3.9 C API): the launch starts over on Debian bullseye's Python 3.9",
        repair: |_, _, cx| interpreter(Suite::Bullseye, cx),
    },
    Rule {
        name: "python-distutils",
        phase: Phase::Setup,
        target: Target::Any,
        signature: r"No module named 'distutils'|ModuleNotFoundError: No module named 'distutils",
        description: "distutils is gone from Python 3.12 on: the launch starts over on Debian bookworm's Python 3.11",
        repair: |_, _, cx| {
            (cx.suite == Some(Suite::Trixie)).then_some(Repair::Interpreter(Suite::Bookworm))
        },
    },
    Rule {
        name: "python-optional-ci-packages",
        phase: Phase::Tests,
        target: Target::Any,
        signature: r"(?i)partially initialized module|ImportError while loading conftest|Interrupted: \d+ errors? during collection|\d+ errors? during collection",
        description: "the packages the project's CI installs, added by kiln on its own initiative, break the test session (a plugin imports the project while the project imports it): they are uninstalled and the tests run again",
        repair: drop_optional_ci_packages,
    },
    Rule {
        name: "python-missing-test-module",
        phase: Phase::Tests,
        target: Target::Any,
        signature: r"(?m)(?:ModuleNotFoundError|ImportError): No module named '([A-Za-z0-9_.]+)'",
        description: "the tests import a module nothing installed (a test dependency no manifest declares): its distribution is installed and the tests run again; the project's own modules are left alone",
        repair: missing_test_module,
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::repair::testutil::{cx, step_repair, test_repair};
    use crate::repair::{Failing, find};
    use crate::steps::{PipPurpose, TestCommand, tiered_install};

    fn rules() -> Vec<&'static Rule> {
        RULES.iter().collect()
    }

    /// A project install as the plan writes it, with the test context's options.
    fn project_install(extras: &[&str], specs: &[&str]) -> PipInstall {
        PipInstall {
            project: Some(ProjectInstall {
                editable: true,
                extras: extras.iter().map(|e| (*e).to_string()).collect(),
            }),
            specs: specs.iter().map(|s| (*s).to_string()).collect(),
            ..cx().pip.unwrap()
        }
    }

    #[test]
    fn an_editable_install_without_pep_660_is_built_without_isolation() {
        // uv 0.13's message for a setuptools 62 backend.
        let log = "  × Failed to build `pkg @ file:///testbed`\n  ├─▶ The build backend returned an error\n  ╰─▶ Call to `setuptools.build_meta.build_editable` failed (exit status: 1)\n      AttributeError: module 'setuptools.build_meta' has no attribute 'build_editable'";
        let step = Step::Pip(project_install(&["test"], &["pytest"]));
        assert_eq!(
            step.render(),
            "uv pip install --python /opt/kiln/venv/bin/python -e '.[test]' pytest"
        );
        let (name, repair) = step_repair(&rules(), &step, log).unwrap();
        assert_eq!(name, "python-editable-backend");
        let Repair::Replace(steps) = repair else {
            panic!("{repair:?}")
        };
        assert_eq!(
            steps[0].render(),
            "uv pip install --python /opt/kiln/venv/bin/python 'setuptools>=64' wheel 'setuptools_scm[toml]>=6.2' cython==0.29.22 && uv pip install --python /opt/kiln/venv/bin/python -r pyproject.toml --extra test pytest && uv pip install --python /opt/kiln/venv/bin/python --no-build-isolation --no-deps -e '.[test]'"
        );
        // Not for a step that is no Python install; once tried, the next rule installs
        // without -e.
        assert!(step_repair(&rules(), &Step::shell("cargo build"), log).is_none());
        let failed = crate::repair::Failed {
            failing: Failing::Step(&step),
            output: log,
        };
        let next =
            find(&failed, &cx(), &rules(), &["python-editable-backend"]).map(|(r, _, _)| r.name);
        assert_eq!(next, Some("python-old-setuptools"));
    }

    /// pydicom's CI installs pylibjpeg, whose plugin imports pydicom while pydicom imports it:
    /// every test module fails at collection; the packages kiln added go and the tests run
    /// again. Without such packages, or on another failure, the rule stays out.
    #[test]
    fn optional_ci_packages_that_break_collection_are_uninstalled() {
        let log = "ERROR tests/test_a.py - AttributeError: partially initialized module 'pydicom' has no attribute 'config' (most likely due to a circular import)\n!!!!!!!!!!!!!!!!!!!! Interrupted: 3 errors during collection !!!!!!!!!!!!!!!!!!!!\n";
        let command = TestCommand::plain("pytest");
        let ci_step = Step::Pip(PipInstall {
            purpose: PipPurpose::TestRequirements,
            tolerant: true,
            specs: vec!["pylibjpeg".into(), "pylibjpeg-openjpeg>=1.0".into()],
            ..PipInstall::default()
        });
        let with_ci = RepairContext {
            optional: vec![ci_step],
            ..cx()
        };
        let failed = crate::repair::Failed {
            failing: Failing::Tests(&command),
            output: log,
        };
        let (rule, repair, _) = find(&failed, &with_ci, &rules(), &[]).unwrap();
        assert_eq!(rule.name, "python-optional-ci-packages");
        let Repair::Before(steps) = repair else {
            panic!("{repair:?}")
        };
        assert_eq!(
            steps[0].render(),
            "d=; for p in pylibjpeg pylibjpeg-openjpeg; do uv pip show --python /opt/kiln/venv/bin/python \"$p\" >/dev/null 2>&1 && d=\"$d $p\"; done; if [ -n \"$d\" ]; then uv pip uninstall --python /opt/kiln/venv/bin/python $d && echo \"[kiln] dropped optional packages the CI installs:$d\"; fi"
        );
        // No package of the CI's was added: nothing to drop.
        assert!(
            find(&failed, &cx(), &rules(), &[])
                .is_none_or(|(r, _, _)| r.name != "python-optional-ci-packages")
        );
        // A test failing on its own is no collection failure.
        let plain = crate::repair::Failed {
            failing: Failing::Tests(&command),
            output: "FAILED tests/test_a.py::test_x - assert 1 == 2\n",
        };
        assert!(find(&plain, &with_ci, &rules(), &[]).is_none());
    }

    #[test]
    fn an_old_setup_py_gets_old_setuptools_and_a_rebuild() {
        let log = "      error in pkg setup command: use_2to3 is invalid.\n      [end of output]";
        let mut install = project_install(&[], &["pytest"]);
        install.cutoff = Some("2019-01-01T00:00:00Z".into());
        install.floors = vec![("setuptools".into(), "2023-01-01T00:00:00Z".into())];
        let step = Step::Pip(install);
        assert_eq!(
            step.render(),
            "uv pip install --python /opt/kiln/venv/bin/python --exclude-newer 2019-01-01T00:00:00Z --exclude-newer-package setuptools=2023-01-01T00:00:00Z -e . pytest"
        );
        let (name, repair) = step_repair(&rules(), &step, log).unwrap();
        assert_eq!(name, "python-old-setuptools");
        let Repair::ReplaceWithRebuild { steps, rebuild } = repair else {
            panic!("{repair:?}")
        };
        assert_eq!(
            steps[0].render(),
            "uv pip install --python /opt/kiln/venv/bin/python 'setuptools<58' wheel"
        );
        assert_eq!(
            steps[1].render(),
            "uv pip install --python /opt/kiln/venv/bin/python --exclude-newer 2019-01-01T00:00:00Z --no-build-isolation . pytest"
        );
        assert_eq!(
            rebuild[0].render(),
            "uv pip install --offline --no-deps --python /opt/kiln/venv/bin/python --no-build-isolation ."
        );
        // Tried once: an install that already pins the old setuptools is not repaired again.
        let Step::Pip(again) = &steps[0] else {
            panic!()
        };
        assert!(step_repair(&rules()[1..2], &Step::Pip(again.clone()), log).is_none());
    }

    #[test]
    fn an_old_setuptools_after_the_editable_repair_keeps_the_other_build_requirements() {
        let step = Step::Pip(project_install(&["test"], &["pytest"]));
        let editable =
            "AttributeError: module 'setuptools.build_meta' has no attribute 'build_editable'";
        let Some((_, Repair::Replace(steps))) = step_repair(&rules(), &step, editable) else {
            panic!("no editable repair")
        };
        let use_2to3 = "      error in pkg setup command: use_2to3 is invalid.";
        let (name, repair) = step_repair(&rules()[1..2], &steps[0], use_2to3).unwrap();
        assert_eq!(name, "python-old-setuptools");
        let Repair::ReplaceWithRebuild { steps, .. } = repair else {
            panic!("{repair:?}")
        };
        assert_eq!(
            steps[0].render(),
            "uv pip install --python /opt/kiln/venv/bin/python 'setuptools<58' wheel 'setuptools_scm[toml]>=6.2' cython==0.29.22"
        );
        assert_eq!(
            steps[1].render(),
            "uv pip install --python /opt/kiln/venv/bin/python --no-build-isolation '.[test]' pytest"
        );
    }

    #[test]
    fn unresolvable_test_requirements_drop_tools_the_tests_do_not_import() {
        let log = "  × No solution found when resolving dependencies:\n  ╰─▶ Because coverage<5 and coverage>=7.0 ...";
        let step = Step::Pip(PipInstall {
            purpose: PipPurpose::TestRequirements,
            files: vec!["requirements-dev.txt".into()],
            specs: vec!["coverage<5".into(), "mypy==0.9".into()],
            ..cx().pip.unwrap()
        });
        let (name, repair) = step_repair(&rules(), &step, log).unwrap();
        assert_eq!(name, "python-test-requirements");
        let Repair::Replace(steps) = repair else {
            panic!("{repair:?}")
        };
        let script = steps[0].render();
        assert!(
            script.contains("keep < requirements-dev.txt > requirements-dev.txt.kiln-kept"),
            "{script}"
        );
        assert!(
            script.contains("printf '%s\\n' 'coverage<5' mypy==0.9 | keep"),
            "{script}"
        );
        // The project's own install is not a test requirements install.
        let project = Step::Pip(project_install(&[], &["pytest"]));
        assert!(
            step_repair(&rules()[2..3], &project, log).is_none(),
            "only the test requirements tier"
        );
        // The script runs: in a scratch directory, mypy is dropped, pytest kept, and the
        // install command (here `echo`) gets the kept lines.
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(
            tmp.path().join("requirements-dev.txt"),
            "pytest>=7\nmypy==0.910\ntypes-requests\nblack; python_version>'3'\n",
        )
        .unwrap();
        std::fs::write(tmp.path().join("test_uses_black.py"), "import black\n").unwrap();
        // A stand-in installer that prints what it was given.
        let installer = r#"inst() { while [ $# -gt 0 ]; do if [ "$1" = -r ]; then cat "$2"; shift 2; else echo "$1"; shift; fi; done; }; "#;
        let script = tiered_install(
            "inst",
            &["requirements-dev.txt".into()],
            &["mypy".into(), "hypothesis".into()],
        );
        let out = std::process::Command::new("bash")
            .arg("-c")
            .arg(format!("{installer}{script}"))
            .current_dir(tmp.path())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert!(
            stdout.contains("pytest>=7")
                && stdout.contains("hypothesis")
                && stdout.contains("black; python_version"),
            "{stdout}"
        );
        assert!(
            !stdout.contains("mypy") && !stdout.contains("types-requests"),
            "{stdout}"
        );
        assert!(
            stderr.contains("[kiln] dropped test requirement: mypy==0.910"),
            "{stderr}"
        );
        assert!(
            !tmp.path().join("requirements-dev.txt.kiln-kept").exists(),
            "temporary files are removed"
        );
    }

    #[test]
    fn an_old_c_extension_starts_over_on_an_older_python() {
        let step = Step::Pip(project_install(&[], &[]));
        let (name, repair) = step_repair(
            &rules(),
            &step,
            "      src/ext.c:4:10: fatal error: longintrepr.h: No such file or directory",
        )
        .unwrap();
        assert_eq!(
            (name, repair),
            (
                "python-needs-older-python",
                Repair::Interpreter(Suite::Bullseye)
            )
        );
    }

    #[test]
    fn a_missing_test_module_is_installed_unless_it_is_the_projects_own() {
        let log = "E   ModuleNotFoundError: No module named 'yaml'\n=== 3 errors in 0.2s ===";
        let pytest = TestCommand::plain("pytest");
        let (name, repair) = test_repair(&rules(), &pytest, log).unwrap();
        assert_eq!(name, "python-missing-test-module");
        let Repair::Before(steps) = repair else {
            panic!("{repair:?}")
        };
        assert!(
            steps[0]
                .render()
                .contains("uv pip install --python /opt/kiln/venv/bin/python pyyaml && echo"),
            "{}",
            steps[0].render()
        );
        assert!(
            step_repair(&rules(), &Step::shell("pytest"), log).is_none(),
            "tests only"
        );
    }
}
