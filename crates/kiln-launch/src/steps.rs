//! Typed setup steps and test commands: what a plan runs, kept as values until it is executed
//! or written into a Dockerfile. Repairs change these values (a flag, a cut-off, a list), never
//! the text they render to, and nothing parses a rendered command back.

use crate::shell;

/// Where Python plans put the project's virtualenv inside the container.
pub const VENV: &str = "/opt/kiln/venv";

/// What every plan runs first: git must accept the copied-in repository, and commits made
/// while patching need an identity.
pub const GIT_SETUP: &str = "git config --global --add safe.directory '*' && git config --global user.email kiln@localhost && git config --global user.name kiln";

/// What an ecosystem's installs leave in an environment that would steer the same installs,
/// run again there, away from what a cold launch resolves (an installer keeps an installed
/// version that still satisfies a requirement, a lockfile the install wrote, a cached build
/// option), and the script that clears it: run in a reused environment before every setup
/// step runs again. What only makes builds faster (`target/`, object files, package caches)
/// is not in it.
#[derive(Debug, Clone, Copy)]
pub struct FreshInstall {
    /// What the script clears, for the row (`the virtualenv, ...`).
    pub clears: &'static str,
    /// The script, run in the checkout's directory.
    pub script: fn() -> String,
}

/// A script that removes those of `files` (paths relative to the checkout) that the repository
/// does not track: an install wrote them.
#[must_use]
pub fn remove_untracked(files: &[&str]) -> String {
    format!(
        "for f in {}; do if [ -z \"$(git ls-files -- \"$f\")\" ]; then rm -f -- \"$f\"; fi; done",
        shell::join(files)
    )
}

/// One setup step of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Debian packages installed with apt (recommended packages left out).
    Apt(Vec<String>),
    /// Debian packages a hint source names (the CI's install lines): candidates, not needs.
    /// Installed together when they all can be, else one by one; one the suite lacks or that
    /// fails to install is skipped (the row names it: [`Step::hints_check`]), and the step
    /// never fails the launch by itself.
    AptHints(Vec<String>),
    /// Python distributions installed with uv into the plan's virtualenv.
    Pip(PipInstall),
    /// A Node project's dependencies, installed by its package manager.
    Node(NodeInstall),
    /// A command that resolves or fetches what the project's dependency manifests declare and
    /// reads nothing else of the checkout (`cargo fetch`, `go mod download`).
    Resolve(String),
    /// A command run as written.
    Shell(String),
}

/// What [`Step::hints_check`] prints before each hinted package not installed.
const SKIPPED_HINT: &str = "kiln: hint package not installed: ";

impl Step {
    /// A command run as written.
    #[must_use]
    pub fn shell(command: impl Into<String>) -> Self {
        Self::Shell(command.into())
    }

    /// The git setup every plan starts with ([`GIT_SETUP`]).
    #[must_use]
    pub fn git_setup() -> Self {
        Self::shell(GIT_SETUP)
    }

    /// An apt step for `packages`, or `None` when there are none.
    #[must_use]
    pub fn apt<S: AsRef<str>>(packages: &[S]) -> Option<Self> {
        (!packages.is_empty())
            .then(|| Self::Apt(packages.iter().map(|p| p.as_ref().to_string()).collect()))
    }

    /// A tolerant apt step for the hinted `packages`, or `None` when there are none.
    #[must_use]
    pub fn apt_hints<S: AsRef<str>>(packages: &[S]) -> Option<Self> {
        (!packages.is_empty())
            .then(|| Self::AptHints(packages.iter().map(|p| p.as_ref().to_string()).collect()))
    }

    /// For an [`Step::AptHints`] step, a command that prints, for each hinted package not
    /// installed in the container (whether the step ran there, a system layer or a reused
    /// environment did), a line [`Step::skipped_hints`] reads: what dpkg holds, not what the
    /// step said.
    #[must_use]
    pub fn hints_check(&self) -> Option<String> {
        let Self::AptHints(packages) = self else {
            return None;
        };
        Some(format!(
            "for p in {}; do dpkg-query -W -f='${{Status}}' \"$p\" 2>/dev/null | grep -q 'ok installed' || echo \"{SKIPPED_HINT}$p\"; done; true",
            shell::join(packages)
        ))
    }

    /// The hinted packages a [`Step::hints_check`] command's `output` names, in order.
    #[must_use]
    pub fn skipped_hints(output: &str) -> Vec<String> {
        output
            .lines()
            .filter_map(|l| l.trim().strip_prefix(SKIPPED_HINT))
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty())
            .collect()
    }

    /// The shell command the step runs.
    #[must_use]
    pub fn render(&self) -> String {
        match self {
            Self::Apt(packages) => format!(
                "apt-get update && apt-get install -y --no-install-recommends {} && rm -rf /var/lib/apt/lists/*",
                shell::join(packages)
            ),
            Self::AptHints(packages) => {
                let list = shell::join(packages);
                format!(
                    "apt-get update; apt-get install -y --no-install-recommends {list} || \
for p in {list}; do apt-get install -y --no-install-recommends \"$p\" || true; done; \
rm -rf /var/lib/apt/lists/*; true"
                )
            }
            Self::Pip(install) => install.render(),
            Self::Node(install) => install.render(),
            Self::Resolve(command) | Self::Shell(command) => command.clone(),
        }
    }

    /// Whether the step reads nothing of the checkout: git's setup, and apt (its package list
    /// is in the command). Such steps can run before the checkout is in the container.
    #[must_use]
    pub fn reads_no_checkout(&self) -> bool {
        matches!(self, Self::Apt(_) | Self::AptHints(_)) || *self == Self::git_setup()
    }

    /// Whether what this step made in an environment is still what it would make after the
    /// checkout changed `changed` (paths relative to the root): none of the files it reads
    /// is among them. Apt reads no file of the checkout (its package list is in the command);
    /// dependency installs read the manifests, requirement files and, for an editable install,
    /// the sources of compiled extensions (a non-editable install copies every file); a shell
    /// command may read anything.
    #[must_use]
    pub fn unaffected_by(&self, changed: &[String]) -> bool {
        let untouched = |reads: &dyn Fn(&str) -> bool| !changed.iter().any(|p| reads(p));
        match self {
            Self::Apt(_) | Self::AptHints(_) => true,
            Self::Resolve(_) | Self::Node(_) => untouched(&|p| is_dependency_manifest(p)),
            Self::Pip(install) => {
                let declared =
                    |p: &str| is_dependency_manifest(p) || install.files.iter().any(|f| f == p);
                match &install.project {
                    Some(project) if !project.editable => changed.is_empty(),
                    Some(_) => untouched(&|p| declared(p) || is_compiled_source(p)),
                    None => untouched(&declared),
                }
            }
            Self::Shell(_) => changed.is_empty(),
        }
    }
}

/// Whether `path` (relative to the root) declares dependencies or how they are resolved or
/// built: a manifest, lockfile, requirement file or package-manager setting of any ecosystem.
#[must_use]
pub fn is_dependency_manifest(path: &str) -> bool {
    const NAMES: &[&str] = &[
        "Cargo.toml",
        "Cargo.lock",
        "rust-toolchain",
        "rust-toolchain.toml",
        "go.mod",
        "go.sum",
        "go.work",
        "go.work.sum",
        "package.json",
        "package-lock.json",
        "npm-shrinkwrap.json",
        "yarn.lock",
        "pnpm-lock.yaml",
        "pnpm-workspace.yaml",
        "bun.lockb",
        ".npmrc",
        ".yarnrc",
        ".yarnrc.yml",
        ".nvmrc",
        ".node-version",
        "setup.py",
        "setup.cfg",
        "pyproject.toml",
        "MANIFEST.in",
        "Pipfile",
        "Pipfile.lock",
        "poetry.lock",
        "pdm.lock",
        "uv.lock",
        "environment.yml",
        "tox.ini",
        "noxfile.py",
        ".python-version",
        "pom.xml",
        "build.gradle",
        "build.gradle.kts",
        "settings.gradle",
        "settings.gradle.kts",
        "gradle.properties",
        "CMakeLists.txt",
        "configure.ac",
        "meson.build",
        ".gitmodules",
    ];
    let name = path.rsplit('/').next().unwrap_or(path);
    let lower = name.to_ascii_lowercase();
    NAMES.contains(&name)
        || ((lower.contains("requirements") || lower.starts_with("constraints"))
            && (lower.ends_with(".txt") || lower.ends_with(".in")))
        || [
            ".cargo/",
            ".yarn/",
            ".mvn/",
            "gradle/",
            "patches/",
            "requirements/",
        ]
        .iter()
        .any(|dir| path.starts_with(dir) || path.contains(&format!("/{dir}")))
}

/// Whether `path` is a source a Python build compiles (C, C++, Cython, Fortran, CUDA, Rust):
/// an editable install holds what was built from it.
#[must_use]
pub fn is_compiled_source(path: &str) -> bool {
    const EXTENSIONS: &[&str] = &[
        "c", "h", "cc", "cpp", "cxx", "hh", "hpp", "hxx", "inc", "pyx", "pxd", "pxi", "f", "f90",
        "for", "cu", "cuh", "rs", "l", "y", "i", "swg",
    ];
    path.rsplit_once('.')
        .is_some_and(|(_, ext)| EXTENSIONS.contains(&ext.to_ascii_lowercase().as_str()))
}

/// What a Python install is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PipPurpose {
    /// The project itself (with its test extras), or anything else.
    #[default]
    Project,
    /// The test requirements: requirement files, tox's and nox's deps, pytest plugins. They
    /// are a step of their own so that one that does not resolve can be repaired alone.
    TestRequirements,
}

/// The project installed from the checkout (`.`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProjectInstall {
    /// An editable install (`-e .`), which picks up source changes without a reinstall.
    pub editable: bool,
    /// Extras installed with it (`.[test]`).
    pub extras: Vec<String>,
}

impl ProjectInstall {
    /// What the install names: `.`, or `'.[extra,...]'` with its extras.
    fn target(&self) -> String {
        if self.extras.is_empty() {
            ".".to_string()
        } else {
            shell::quote(&format!(".[{}]", self.extras.join(",")))
        }
    }
}

/// `uv pip install` into [`VENV`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PipInstall {
    /// What it installs the requirements for.
    pub purpose: PipPurpose,
    /// `--no-cache`: the image does not keep uv's cache.
    pub no_cache: bool,
    /// `--offline --no-deps`: reinstall the project from what is installed already (a
    /// rebuild after a source change).
    pub offline: bool,
    /// The dependency cut-off (`--exclude-newer`, RFC 3339).
    pub cutoff: Option<String>,
    /// Later cut-offs for single packages (`--exclude-newer-package setuptools=<date>`).
    pub floors: Vec<(String, String)>,
    /// Build in an isolated environment (uv's default); `false` builds against the venv.
    pub build_isolation: bool,
    /// Installed into the venv first, when building without isolation needs them there.
    pub build_requirements: Vec<String>,
    /// The project itself, from the checkout.
    pub project: Option<ProjectInstall>,
    /// Requirement files (`-r`).
    pub files: Vec<String>,
    /// Requirement specifiers (`pytest`, `mock>=2`).
    pub specs: Vec<String>,
    /// Lint, typing and docs tools the tests do not import are dropped from the files and
    /// specs, and what does not resolve together is installed line by line, each line that
    /// fails logged (see [`NON_TEST_TOOLS`]).
    pub tolerant: bool,
}

impl PipInstall {
    /// An install into the venv with the dependency cut-off, when there is one, and nothing
    /// to install yet.
    #[must_use]
    pub fn new(cutoff: Option<&str>) -> Self {
        Self {
            no_cache: true,
            cutoff: cutoff.map(str::to_string),
            build_isolation: true,
            ..Self::default()
        }
    }

    /// The command up to what it installs, floors left out when `floors` is false.
    fn options(&self, floors: bool) -> String {
        let mut command = String::from("uv pip install");
        if self.no_cache {
            command.push_str(" --no-cache");
        }
        if self.offline {
            command.push_str(" --offline --no-deps");
        }
        command.push_str(&format!(" --python {VENV}/bin/python"));
        if let Some(cutoff) = &self.cutoff {
            command.push_str(&format!(" --exclude-newer {cutoff}"));
        }
        if floors {
            for (package, date) in &self.floors {
                command.push_str(&format!(" --exclude-newer-package {package}={date}"));
            }
        }
        command
    }

    /// An editable install without build isolation, in two: the dependencies (read from
    /// `pyproject.toml`, with the extras, files and specs) installed with isolation, so each
    /// sdist among them builds with its own build requirements (`setuptools_scm` versioning a
    /// package as itself, not `0.0.0`); then the project alone without isolation, against the
    /// build requirements in the venv. `None` for any other install.
    fn dependencies_then_project(&self, base: &str) -> Option<String> {
        let project = self.project.as_ref()?;
        if self.build_isolation || !project.editable || self.offline {
            return None;
        }
        let mut dependencies = format!("{base} -r pyproject.toml");
        for extra in &project.extras {
            dependencies.push_str(&format!(" --extra {}", shell::quote(extra)));
        }
        for file in &self.files {
            dependencies.push_str(&format!(" -r {}", shell::quote(file)));
        }
        for spec in &self.specs {
            dependencies.push(' ');
            dependencies.push_str(&shell::quote(spec));
        }
        let target = project.target();
        Some(format!(
            "{dependencies} && {base} --no-build-isolation --no-deps -e {target}"
        ))
    }

    /// The shell command.
    #[must_use]
    pub fn render(&self) -> String {
        let base = self.options(true);
        let mut command = if self.tolerant {
            tiered_install(&base, &self.files, &self.specs)
        } else if let Some(command) = self.dependencies_then_project(&base) {
            command
        } else {
            let mut command = base;
            if !self.build_isolation {
                command.push_str(" --no-build-isolation");
            }
            if let Some(project) = &self.project {
                let target = project.target();
                command.push_str(if project.editable { " -e " } else { " " });
                command.push_str(&target);
            }
            for file in &self.files {
                command.push_str(&format!(" -r {}", shell::quote(file)));
            }
            for spec in &self.specs {
                command.push(' ');
                command.push_str(&shell::quote(spec));
            }
            command
        };
        if !self.build_requirements.is_empty() {
            command = format!(
                "{} {} && {command}",
                self.options(false),
                shell::join(&self.build_requirements)
            );
        }
        command
    }
}

/// Python tools for linting, typing, docs and releases: test requirement files list them, the
/// tests never import them, and their pins break resolution (yanked `types-*` releases, a
/// `mypy` pin for another Python). A [`PipInstall::tolerant`] install drops them when the
/// tests do not import them.
pub const NON_TEST_TOOLS: &[&str] = &[
    "mypy",
    "types-[a-z0-9-]+",
    "flake8",
    "flake8-[a-z0-9-]+",
    "pyflakes",
    "pycodestyle",
    "pydocstyle",
    "pylint",
    "black",
    "isort",
    "ruff",
    "pre-commit",
    "tox",
    "nox",
    "sphinx",
    "sphinx-[a-z0-9-]+",
    "furo",
    "myst-parser",
    "twine",
    "bump2version",
    "bumpversion",
    "check-manifest",
    "codecov",
    "coveralls",
    "pyright",
    "yapf",
    "autopep8",
    "docformatter",
    "pip-tools",
    "safety",
    "bandit",
    "doc8",
    "rstcheck",
    "towncrier",
    "readme-renderer",
    "pyroma",
    "interrogate",
    "darglint",
    "blacken-docs",
    "pyupgrade",
];

/// The shell script of a tolerant install: the requirement files and specs with the tools
/// of [`NON_TEST_TOOLS`] the test sources do not import dropped, installed together with
/// `pip_base`, or line by line when that fails, each line that cannot be installed skipped and
/// logged.
#[must_use]
pub fn tiered_install(pip_base: &str, files: &[String], specs: &[String]) -> String {
    let tools = NON_TEST_TOOLS.join("|");
    let mut script = format!("tools='^[[:space:]]*({tools})([[:space:]]*([<>=!~;\\[]|$))'; ");
    // A tool is kept when the test sources import it.
    script.push_str(
        "imported() { m=$(printf '%s' \"$1\" | tr - _); grep -rqsE \"^[[:space:]]*(import|from)[[:space:]]+$m([. ]|$)\" --include='*.py' . ; }; ",
    );
    script.push_str("keep() { while IFS= read -r line; do name=$(printf '%s' \"$line\" | sed -nE \"s/$tools.*/\\1/Ip\"); if [ -n \"$name\" ] && ! imported \"$name\"; then echo \"[kiln] dropped test requirement: $line (a tool the tests do not import)\" >&2; else printf '%s\\n' \"$line\"; fi; done; }; ");
    let mut filtered = Vec::new();
    for file in files {
        let quoted = shell::quote(file);
        let out = shell::quote(&format!("{file}.kiln-kept"));
        script.push_str(&format!("keep < {quoted} > {out}; "));
        filtered.push(out);
    }
    let spec_file = "'.kiln-test-requirements.txt'";
    script.push_str(&format!(
        "printf '%s\\n' {} | keep > {spec_file}; ",
        if specs.is_empty() {
            "''".to_string()
        } else {
            shell::join(specs)
        }
    ));
    filtered.push(spec_file.to_string());
    let all: Vec<String> = filtered.iter().map(|f| format!("-r {f}")).collect();
    script.push_str(&format!(
        "{{ {pip_base} {} || {{ echo '[kiln] the test requirements do not resolve together; installing them line by line'; cat {} | grep -v -E '^[[:space:]]*(#|$|-)' | while IFS= read -r req; do {pip_base} \"$req\" || echo \"[kiln] test requirement not installed: $req\"; done; }}; }}; status=$?; rm -f {}; exit $status",
        all.join(" "),
        filtered.join(" "),
        filtered.join(" ")
    ));
    script
}

/// How a Node project's dependencies are installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeManager {
    /// `npm ci` from `package-lock.json` (or `npm-shrinkwrap.json`), `npm install` when the
    /// lockfile no longer matches `package.json`.
    NpmLocked,
    /// `npm install` without a lockfile.
    Npm,
    /// Yarn 1 with its lockfile.
    YarnClassic,
    /// Yarn 2 and later with its lockfile.
    YarnBerry,
    /// pnpm with its lockfile.
    Pnpm,
}

/// A Node project's dependency install.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInstall {
    /// The package manager and lockfile.
    pub manager: NodeManager,
    /// `npm install --before <cut-off>` (unlocked npm only).
    pub cutoff: Option<String>,
    /// `--ignore-scripts`: no install scripts run (a native addon that cannot be built).
    pub ignore_scripts: bool,
}

impl NodeInstall {
    /// An install by `manager`, scripts on, no cut-off.
    #[must_use]
    pub fn new(manager: NodeManager) -> Self {
        Self {
            manager,
            cutoff: None,
            ignore_scripts: false,
        }
    }

    /// The shell command.
    #[must_use]
    pub fn render(&self) -> String {
        let scripts = if self.ignore_scripts {
            " --ignore-scripts"
        } else {
            ""
        };
        match self.manager {
            // A lockfile out of step with package.json makes `npm ci` refuse; `npm install`
            // then keeps every version the lockfile still allows.
            NodeManager::NpmLocked => format!(
                "npm ci{scripts} || {{ echo '[kiln] package-lock.json does not match package.json; npm install{scripts}'; npm install{scripts}; }}"
            ),
            NodeManager::Npm => match &self.cutoff {
                Some(cutoff) => format!("npm install{scripts} --before {}", shell::quote(cutoff)),
                None => format!("npm install{scripts}"),
            },
            NodeManager::YarnClassic => {
                format!("yarn install{scripts} --frozen-lockfile --non-interactive")
            }
            NodeManager::YarnBerry => format!("yarn install{scripts} --immutable"),
            NodeManager::Pnpm => format!("pnpm install{scripts} --frozen-lockfile"),
        }
    }
}

/// A plan's test command.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TestCommand {
    /// Variables assigned for the runner alone (`CI=true`), as `NAME` and a shell word (the
    /// project's own text, or quoted by kiln).
    pub env: Vec<(String, String)>,
    /// The runner's command line.
    pub run: String,
    /// A report file the runner writes: removed before the run (the image keeps the
    /// baseline's, and a run that crashes before writing its own must not be read as the
    /// baseline again) and printed after it.
    pub report: Option<String>,
    /// Commands run before everything else, because every container a test command runs in
    /// is fresh: those that start the services the tests talk to (a Redis or PostgreSQL
    /// server the project's CI starts beside its jobs), then the `export`s of the variables
    /// the CI sets for them.
    pub prelude: Vec<String>,
}

impl TestCommand {
    /// A command run as written.
    #[must_use]
    pub fn plain(run: impl Into<String>) -> Self {
        Self {
            run: run.into(),
            ..Self::default()
        }
    }

    /// The shell command.
    #[must_use]
    pub fn render(&self) -> String {
        let mut run: String = self
            .env
            .iter()
            .map(|(name, value)| format!("{name}={value} "))
            .collect();
        run.push_str(&self.run);
        let run = match &self.report {
            Some(file) => {
                format!("rm -f {file}; {run}; rc=$?; echo; cat {file} 2>/dev/null; exit $rc")
            }
            None => run,
        };
        if self.prelude.is_empty() {
            run
        } else {
            format!("{}; {run}", self.prelude.join("; "))
        }
    }
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render())
    }
}

impl std::fmt::Display for TestCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render())
    }
}

/// Tests compare steps and test commands with the commands they render to.
#[cfg(test)]
impl PartialEq<&str> for Step {
    fn eq(&self, other: &&str) -> bool {
        self.render() == *other
    }
}

#[cfg(test)]
impl PartialEq<&str> for TestCommand {
    fn eq(&self, other: &&str) -> bool {
        self.render() == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_is_affected_only_by_the_files_it_reads() {
        let changed = |paths: &[&str]| paths.iter().map(|p| (*p).to_string()).collect::<Vec<_>>();
        let sources = changed(&["src/lib.rs", "docs/index.md"]);
        let manifest = changed(&["src/lib.rs", "crates/core/Cargo.toml"]);
        let fetch = Step::Resolve("cargo fetch".into());
        assert!(fetch.unaffected_by(&changed(&["src/main.py"])));
        assert!(!fetch.unaffected_by(&manifest));
        assert!(Step::Apt(vec!["libssl-dev".into()]).unaffected_by(&manifest));
        assert!(!Step::shell("make").unaffected_by(&sources));
        assert!(Step::shell("make").unaffected_by(&[]));

        let mut editable = PipInstall::new(Some("2022-03-31"));
        editable.project = Some(ProjectInstall {
            editable: true,
            extras: vec!["test".into()],
        });
        editable.files = vec!["ci/extra-deps.txt".into()];
        let editable = Step::Pip(editable);
        assert!(!editable.unaffected_by(&changed(&["ci/extra-deps.txt"])));
        assert!(editable.unaffected_by(&changed(&["pkg/core.py", "docs/x.rst"])));
        assert!(!editable.unaffected_by(&changed(&["pkg/_speedups.pyx"])));
        assert!(!editable.unaffected_by(&changed(&["cextern/lib/fits.c"])));
        assert!(!editable.unaffected_by(&changed(&["setup.cfg"])));
        let mut copied = PipInstall::new(None);
        copied.project = Some(ProjectInstall::default());
        assert!(!Step::Pip(copied).unaffected_by(&changed(&["pkg/core.py"])));
        let mut requirements = PipInstall::new(None);
        requirements.files = vec!["ci/test-deps.txt".into()];
        let requirements = Step::Pip(requirements);
        assert!(requirements.unaffected_by(&changed(&["pkg/core.py"])));
        assert!(!requirements.unaffected_by(&changed(&["ci/test-deps.txt"])));
        assert!(!requirements.unaffected_by(&changed(&["requirements/dev.in"])));
        assert!(
            !Step::Node(NodeInstall::new(NodeManager::Npm))
                .unaffected_by(&changed(&["packages/app/package.json"]))
        );
    }

    #[test]
    fn pip_installs_render_options_then_what_they_install() {
        let mut install = PipInstall::new(Some("2019-01-01T00:00:00Z"));
        install.floors = vec![("setuptools".into(), "2023-01-01T00:00:00Z".into())];
        install.project = Some(ProjectInstall {
            editable: true,
            extras: vec!["test".into(), "yaml".into()],
        });
        install.specs = vec!["pytest".into()];
        assert_eq!(
            install.render(),
            "uv pip install --no-cache --python /opt/kiln/venv/bin/python --exclude-newer 2019-01-01T00:00:00Z --exclude-newer-package setuptools=2023-01-01T00:00:00Z -e '.[test,yaml]' pytest"
        );
        let rebuild = PipInstall {
            offline: true,
            build_isolation: false,
            project: Some(ProjectInstall::default()),
            ..PipInstall::default()
        };
        assert_eq!(
            rebuild.render(),
            "uv pip install --offline --no-deps --python /opt/kiln/venv/bin/python --no-build-isolation ."
        );
        let requirements = PipInstall {
            purpose: PipPurpose::TestRequirements,
            files: vec!["requirements dev.txt".into()],
            specs: vec!["mock>=2".into()],
            ..PipInstall::new(None)
        };
        assert_eq!(
            requirements.render(),
            "uv pip install --no-cache --python /opt/kiln/venv/bin/python -r 'requirements dev.txt' 'mock>=2'"
        );
    }

    #[test]
    fn node_installs_and_test_commands_render() {
        let mut locked = NodeInstall::new(NodeManager::NpmLocked);
        assert_eq!(
            locked.render(),
            "npm ci || { echo '[kiln] package-lock.json does not match package.json; npm install'; npm install; }"
        );
        locked.ignore_scripts = true;
        assert_eq!(
            locked.render(),
            "npm ci --ignore-scripts || { echo '[kiln] package-lock.json does not match package.json; npm install --ignore-scripts'; npm install --ignore-scripts; }"
        );
        let dated = NodeInstall {
            cutoff: Some("2019-06-01T00:00:00Z".into()),
            ..NodeInstall::new(NodeManager::Npm)
        };
        assert_eq!(dated.render(), "npm install --before 2019-06-01T00:00:00Z");
        let mut jest = TestCommand {
            env: vec![("CI".into(), "true".into())],
            run: "npx --no-install jest --json --outputFile=/tmp/r.json 2>&1".into(),
            report: Some("/tmp/r.json".into()),
            prelude: Vec::new(),
        };
        assert_eq!(
            jest.render(),
            "rm -f /tmp/r.json; CI=true npx --no-install jest --json --outputFile=/tmp/r.json 2>&1; rc=$?; echo; cat /tmp/r.json 2>/dev/null; exit $rc"
        );
        // Services start first; the runner's variables stay the runner's.
        jest.prelude = vec![
            "redis-server --daemonize yes".into(),
            "service postgresql start".into(),
        ];
        assert_eq!(
            jest.render(),
            "redis-server --daemonize yes; service postgresql start; rm -f /tmp/r.json; CI=true npx --no-install jest --json --outputFile=/tmp/r.json 2>&1; rc=$?; echo; cat /tmp/r.json 2>/dev/null; exit $rc"
        );
        assert_eq!(
            Step::apt(&["libpq-dev", "pkg-config"]).map(|s| s.render()),
            Some("apt-get update && apt-get install -y --no-install-recommends libpq-dev pkg-config && rm -rf /var/lib/apt/lists/*".into())
        );
        assert_eq!(Step::apt::<&str>(&[]), None);
    }
}
