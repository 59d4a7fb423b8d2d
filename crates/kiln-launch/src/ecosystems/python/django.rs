//! Django's own repository: an editable install, the suite's optional requirements, and
//! `tests/runtests.py` (Django's runner, not pytest) on the labels the test patch touches.

use std::path::Path;

use crate::plan::{Plan, PlanContext, TestScope};
use crate::shell;
use crate::steps::{ProjectInstall, Step, TestCommand, VENV};

use super::detect::{DJANGO_REQUIREMENTS, PythonProject};
use super::install::{install_base, repair_context, resolution};
use super::interpreter::{choose_python, image};

/// Whether `root` is Django itself: `tests/runtests.py` next to the `django` package. Its
/// suite runs through that script (Django's own runner, not pytest).
#[must_use]
pub fn is_django(root: &Path) -> bool {
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
#[must_use]
pub fn plan(cx: &PlanContext<'_>, project: &PythonProject) -> Plan {
    let mut install = install_base(cx.cutoff, true);
    install.project = Some(ProjectInstall {
        editable: true,
        extras: Vec::new(),
    });
    let mut setup = vec![Step::git_setup()];
    setup.extend(Step::apt(&project.system_packages));
    setup.push(Step::Shell(format!("python3 -m venv {VENV}")));
    setup.push(Step::Pip(install));
    if let Some(file) = DJANGO_REQUIREMENTS
        .iter()
        .find(|f| cx.root.join(f).is_file())
    {
        // Wheels first, all together; then line by line, a source build given at most five
        // minutes (a 2019 numpy on a newer Python builds for long and then fails). The
        // setuptools floor is left out: old sdists import what later setuptools removed.
        let install = install_base(cx.cutoff, false).render();
        setup.push(Step::Shell(format!(
            "{install} --only-binary :all: -r {file} || {{ echo '[kiln] {file} has no wheels for everything; installing it line by line'; grep -v -E '^[[:space:]]*(#|$)' {file} | while IFS= read -r req; do {install} --only-binary :all: \"$req\" || timeout 300 {install} \"$req\" || echo \"[kiln] optional test requirement not installed: $req\"; done; }}"
        )));
    }
    // The whole suite is some 15 000 tests: `auto` selects, as `touched` does.
    let labels = if cx.scope == TestScope::All {
        Vec::new()
    } else {
        django_labels(cx.test_files)
    };
    let test_scope = if labels.is_empty() {
        "all".to_string()
    } else {
        format!("touched: {} Django test modules", labels.len())
    };
    let runner = format!("cd tests && {VENV}/bin/python runtests.py --verbosity 2 --parallel 1");
    let mut test = runner.clone();
    for label in &labels {
        test.push(' ');
        test.push_str(&shell::quote(label));
    }
    test.push_str(" 2>&1");
    let whole_test = (!labels.is_empty()).then(|| TestCommand::plain(format!("{runner} 2>&1")));
    let pinned = std::fs::read_to_string(cx.root.join(".python-version")).ok();
    let (suite, version_reason) = choose_python(
        project.requires_python.as_deref(),
        pinned.as_deref(),
        cx.cutoff,
    );
    Plan {
        name: "python-django-runtests".into(),
        language: "python",
        image: image(suite, cx.ca_bundle),
        version_reason,
        setup,
        rebuild: Vec::new(),
        test: TestCommand::plain(test),
        test_scope,
        whole_test,
        collect: None,
        parser: "unittest",
        resolution: resolution(cx.cutoff),
        cutoff: cx.cutoff.map(str::to_string),
        repair: repair_context(suite, project, cx.cutoff),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let project =
            crate::ecosystems::python::detect::detect(tmp.path()).expect("a Python project");
        let plan = plan(
            &PlanContext {
                root: tmp.path(),
                cutoff: Some("2019-10-01T00:00:00Z"),
                ca_bundle: None,
                test_files: &files,
                scope: crate::plan::TestScope::Auto,
                case_timeout: std::time::Duration::from_secs(300),
            },
            &project,
        );
        let setup: Vec<String> = plan.setup.iter().map(Step::render).collect();
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
            plan.test.render(),
            "cd tests && /opt/kiln/venv/bin/python runtests.py --verbosity 2 --parallel 1 auth_tests.test_forms migrations.test_base i18n.sampleproject 2>&1"
        );
        assert!(
            setup[1].contains("install -y --no-install-recommends libmemcached-dev zlib1g-dev &&"),
            "{}",
            setup[1]
        );
        assert!(
            setup[3].ends_with(
                "--exclude-newer 2019-10-01T00:00:00Z --exclude-newer-package setuptools=2023-01-01T00:00:00Z -e ."
            ),
            "{}",
            setup[3]
        );
        assert!(
            setup[4].contains("--only-binary :all: -r tests/requirements/py3.txt || {")
                && !setup[4].contains("setuptools="),
            "{}",
            setup[4]
        );
    }
}
