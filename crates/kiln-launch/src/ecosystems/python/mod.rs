//! The Python plan: detect how a repository declares its dependencies and tests, and turn that
//! into install steps and a pytest command (Django's own repository gets its runner).

pub mod detect;
pub mod django;
pub mod install;
pub mod interpreter;
pub mod repairs;
pub mod selection;
pub mod setup_py;

pub use interpreter::{default_image, image};

use crate::plan::{Plan, PlanContext};
use crate::steps::{FreshInstall, Step, TestCommand, VENV, remove_untracked};

use super::entry::Entry;
use detect::detect;
use install::{install_commands, repair_context, resolution};
use interpreter::choose_python;

/// A new install in an environment of Python's: uv and pip keep an installed version that still
/// satisfies a requirement, so the virtualenv goes, with the lockfiles an install wrote.
pub const FRESH: FreshInstall = FreshInstall {
    clears: "the virtualenv and untracked lockfiles",
    script: || {
        format!(
            "rm -rf {VENV} && {}",
            remove_untracked(&["poetry.lock", "uv.lock", "Pipfile.lock"])
        )
    },
};

/// The Python plan, when the repository is a Python project.
#[must_use]
pub fn plan(cx: &PlanContext<'_>) -> Option<Plan> {
    let project = detect(cx.root)?;
    if django::is_django(cx.root) {
        return Some(django::plan(cx, &project));
    }
    let pinned = std::fs::read_to_string(cx.root.join(".python-version")).ok();
    let (suite, version_reason) = choose_python(
        project.requires_python.as_deref(),
        pinned.as_deref(),
        cx.cutoff,
    );
    let whole = test_command(cx.case_timeout);
    let (test, test_scope) = selection::scoped_command(
        &whole,
        cx.root,
        cx.scope,
        cx.test_files,
        &project.python_files,
    );
    // The optional test dependencies the CI installs: a step the tests may do without.
    let ci_step = install::ci_requirements(
        &crate::ci::pip_packages(&crate::ci::commands(cx.root)),
        &project,
        cx.cutoff,
    );
    let mut repair = repair_context(suite, &project, cx.cutoff);
    repair.optional.extend(ci_step.clone());
    Some(Plan {
        name: format!("python-{}", project.manifest),
        language: "python",
        image: image(suite, cx.ca_bundle),
        version_reason,
        setup: [Step::git_setup()]
            .into_iter()
            .chain(Step::apt(&project.system_packages))
            .chain([
                Step::Shell(format!("python3 -m venv {VENV}")),
                Step::Shell(exit_plugin_step()),
            ])
            .chain(install_commands(&project, cx.cutoff))
            .chain(ci_step)
            .collect(),
        // An editable install picks up source changes without a rebuild.
        rebuild: Vec::new(),
        whole_test: (test != whole).then(|| TestCommand::plain(whole)),
        collect: Some(TestCommand::plain(collect_command())),
        test: TestCommand::plain(test),
        test_scope,
        parser: "pytest",
        resolution: resolution(cx.cutoff),
        cutoff: cx.cutoff.map(str::to_string),
        repair,
    })
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
///
/// `-p kiln_exit` ([`EXIT_PLUGIN`], installed by [`exit_plugin_step`]): the interpreter ends
/// as soon as the session is over. Tests that leave child processes or non-daemon threads
/// behind (a failing test of a worker pool) otherwise keep it waiting for them after the
/// summary, until the run's timeout: seen on rq, 30 minutes per run after a 3-minute suite.
/// `--kiln-case-timeout` (the same plugin; `case_timeout`, whole seconds, none when zero): a
/// test still running after it fails there and the session goes on, so a test that loops
/// forever before the fix costs each run that long, not the run's whole timeout.
#[must_use]
pub fn test_command(case_timeout: std::time::Duration) -> String {
    let mut command = format!(
        "{VENV}/bin/python -m pytest -rA -v -o console_output_style=classic --tb=short -p no:cacheprovider -p kiln_exit --color=no --continue-on-collection-errors"
    );
    let seconds = case_timeout.as_secs();
    if seconds > 0 {
        command.push_str(&format!(" --kiln-case-timeout={seconds}"));
    }
    command
}

/// The command that lists the tests of the files given after it, one node id a line
/// (`--collect-only -q`), as the test command's pytest would collect them: the same plugins
/// off, a module that fails to import named in an `ERROR` line while the others are listed.
#[must_use]
pub fn collect_command() -> String {
    format!(
        "{VENV}/bin/python -m pytest --collect-only -q -p no:cacheprovider --color=no --continue-on-collection-errors"
    )
}

/// The pytest plugin `kiln_exit`: it keeps the session's exit status and, after every other
/// plugin is done, flushes the output and ends the process with that status, without waiting
/// for what the tests left running (atexit handlers that join processes, non-daemon threads).
pub const EXIT_PLUGIN: &[&str] = &[
    "import signal",
    "import sys",
    "import threading",
    "",
    "# Bound now: the code under test, imported later, cannot change what ends the run.",
    "from os import _exit",
    "",
    "try:",
    "    from pytest import hookimpl",
    "except ImportError:  # pytest before 2.8",
    "    hookimpl = None",
    "",
    "_status = [0]",
    "",
    "",
    "def pytest_addoption(parser):",
    "    parser.addoption('--kiln-case-timeout', type=float, default=0,",
    "                     help='fail a test still running after this many seconds')",
    "",
    "",
    "def _alarm_free():",
    "    # SIGALRM in the main thread, and only when nothing else (the tests, pytest-timeout) uses it.",
    "    if not hasattr(signal, 'setitimer') or threading.current_thread().name != 'MainThread':",
    "        return False",
    "    return signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, None)",
    "",
    "",
    "def _case_timeout(item):",
    "    seconds = item.config.getoption('kiln_case_timeout') or 0",
    "    if seconds <= 0 or not _alarm_free():",
    "        return None",
    "    from pytest import fail",
    "",
    "    def expire(signum, frame):",
    "        fail('kiln: the test was still running after %g s (case_timeout)' % seconds, pytrace=False)",
    "",
    "    signal.signal(signal.SIGALRM, expire)",
    "    signal.setitimer(signal.ITIMER_REAL, seconds)",
    "    return seconds",
    "",
    "",
    "def _disarm():",
    "    signal.setitimer(signal.ITIMER_REAL, 0)",
    "    signal.signal(signal.SIGALRM, signal.SIG_DFL)",
    "",
    "",
    "if hookimpl is not None:",
    "    @hookimpl(hookwrapper=True)",
    "    def pytest_runtest_call(item):",
    "        armed = _case_timeout(item)",
    "        try:",
    "            yield",
    "        finally:",
    "            if armed:",
    "                _disarm()",
    "else:",
    "    def hookimpl(**_):",
    "        def mark(hook):",
    "            hook.trylast = True",
    "            return hook",
    "        return mark",
    "",
    "",
    "def pytest_sessionfinish(session, exitstatus):",
    "    _status[0] = int(exitstatus)",
    "",
    "",
    "@hookimpl(trylast=True)",
    "def pytest_unconfigure(config):",
    "    sys.stdout.flush()",
    "    sys.stderr.flush()",
    "    _exit(_status[0])",
];

/// The setup step that writes [`EXIT_PLUGIN`] into the virtualenv's `site-packages`, where
/// `-p kiln_exit` finds it.
#[must_use]
pub fn exit_plugin_step() -> String {
    format!(
        "printf '%s\\n' {} > \"$({VENV}/bin/python -c 'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])')/kiln_exit.py\"",
        crate::shell::join(EXIT_PLUGIN)
    )
}

/// Python's line in the registry (pytest; Django's own runner).
pub(crate) static ENTRY: Entry = Entry {
    name: "python",
    plan,
    rules: &[repairs::RULES, crate::repair::SYSTEM, crate::repair::LAST],
    interpreter: Some((image, "Python")),
    fresh: Some(FRESH),
    rewrites: &[],
    package_index: Some("${PIP_INDEX_URL:-${UV_INDEX_URL:-https://pypi.org/simple/}}"),
    leave_out: Some(selection::leave_out),
};

#[cfg(test)]
mod tests {
    use crate::steps::{PipPurpose, Step};

    /// The packages the CI installs by name that kiln's steps lack become a tolerant install of
    /// their own, which the plan may go on without.
    #[test]
    fn the_ci_s_optional_test_dependencies_are_installed_tolerantly() {
        let files = [
            (
                "pyproject.toml",
                "[build-system]\nrequires=['setuptools']\n[project]\nname='x'\n",
            ),
            (
                ".github/workflows/tests.yml",
                "jobs:\n  t:\n    steps:\n      - run: python -m pip install pytest-xdist dask[array] flake8\n",
            ),
        ];
        let plan = crate::plan::testutil::plan_of(super::plan, &files, None).unwrap();
        let step = plan.setup.last().unwrap();
        let Step::Pip(install) = step else {
            panic!("{step:?}");
        };
        assert_eq!(install.specs, ["pytest-xdist", "dask[array]"]);
        assert!(install.tolerant);
        assert_eq!(install.purpose, PipPurpose::TestRequirements);
        assert_eq!(plan.repair.optional, std::slice::from_ref(step));
        // Without a CI that installs anything: no such step.
        let plain = crate::plan::testutil::plan_of(super::plan, &files[..1], None).unwrap();
        assert!(plain.repair.optional.is_empty());
    }
}
