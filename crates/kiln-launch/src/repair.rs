//! Repair rules: known failure signatures of setup commands and test runs, each mapped to a
//! deterministic repair that is tried once before the launch is declared failed.
//!
//! A rule names the ecosystem it belongs to, optionally what the failing command must contain,
//! and a regular expression over the end of the command's output. Its repair is data: an
//! environment variable for the rest of the launch (and the image), commands to run before the
//! failing one is tried again, a rewritten command, another interpreter, or extra commands after
//! source changes. Every repair used is recorded in the environment row (`repairs`), so a
//! reader knows exactly what kiln did beyond the plan; `kiln repairs` lists the table.

use std::sync::LazyLock;

use regex::Regex;

use crate::images::Suite;
use crate::python::VENV;

/// The ecosystems that plans name in their [`RepairContext`] and rules in [`Scope::Language`].
pub const ECOSYSTEMS: &[&str] = &["python", "rust", "node", "go", "c", "java"];

/// Where a rule applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Any ecosystem.
    Any,
    /// Plans of one language (`python`, `node`, `rust`, `go`, `c`, `java`).
    Language(&'static str),
}

/// When in a launch a rule applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// A setup command failed.
    Setup,
    /// The baseline test run did not count as a working build.
    Tests,
}

/// What a repair does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Repair {
    /// Sets an environment variable for every later command and in the image.
    Env(String, String),
    /// Runs these commands, then the failing command again.
    Before(Vec<String>),
    /// Runs this command in place of the failing one.
    Replace(String),
    /// Runs `commands` in place of the failing one, and `rebuild` after every source change (a
    /// non-editable install must be reinstalled when a patch changes the sources).
    ReplaceWithRebuild {
        /// The commands that replace the failing one.
        commands: Vec<String>,
        /// Commands to add to the rebuild commands.
        rebuild: Vec<String>,
    },
    /// Starts the launch over on another Debian suite's interpreter.
    Interpreter(Suite),
    /// Goes on without the failing command (a step the tests may not need), which also leaves
    /// the rebuild commands.
    Skip(String),
    /// Runs this command, which resolves without the dependency cut-off, in place of the
    /// failing one; the row's cut-off is cleared.
    DropCutoff(String),
}

/// What a rule's repair can use besides the failure.
#[derive(Debug, Clone, Default)]
pub struct RepairContext {
    /// The plan's ecosystem, as [`Scope::Language`] names it (`python`, `node`, `rust`, `go`,
    /// `c`, `java`).
    pub language: &'static str,
    /// The Debian suite of the plan's image.
    pub suite: Option<Suite>,
    /// `[build-system] requires` of a Python project.
    pub build_requires: Vec<String>,
    /// The `uv pip install ...` prefix of the plan (cut-off included, no setuptools floor).
    pub pip_base: String,
    /// The Node major of a Node plan's image (0 otherwise).
    pub node_major: u32,
    /// Setup commands the test command may not need (a package's own build script): when one
    /// fails and no other rule repairs it, the launch goes on without it and the baseline run
    /// decides.
    pub optional: Vec<String>,
}

impl RepairContext {
    /// The context of a plan that offers the rules nothing but its ecosystem.
    #[must_use]
    pub fn of(language: &'static str) -> Self {
        Self {
            language,
            ..Self::default()
        }
    }
}

/// A failure the rules look at.
#[derive(Debug, Clone, Copy)]
pub struct Failed<'a> {
    /// Setup or tests.
    pub phase: Phase,
    /// The command that failed.
    pub command: &'a str,
    /// Its output (the end is what the signatures are matched against).
    pub output: &'a str,
}

/// One rule of the table.
pub struct Rule {
    /// Stable name (what the row records and `kiln repairs` lists).
    pub name: &'static str,
    /// Where it applies.
    pub scope: Scope,
    /// Setup or tests.
    pub phase: Phase,
    /// A string the failing command must contain, when any.
    pub command: Option<&'static str>,
    /// The signature, over the last [`TAIL_BYTES`] of the output.
    pub signature: &'static str,
    /// What it means and what the repair does, in a sentence.
    pub description: &'static str,
    /// The repair for a matching failure; `None` when this failure cannot use it after all.
    pub repair: fn(&Failed<'_>, &regex::Captures<'_>, &RepairContext) -> Option<Repair>,
}

/// How much of the end of a failing command's output the signatures see.
pub const TAIL_BYTES: usize = 64 * 1024;

/// Python tools for linting, typing, docs and releases: test requirement files list them, the
/// tests never import them, and their pins break resolution (yanked `types-*` releases, a
/// `mypy` pin for another Python). Dropped, when not imported by the tests, if the test
/// requirements do not resolve.
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

fn python_only(_f: &Failed<'_>, _c: &regex::Captures<'_>, cx: &RepairContext) -> bool {
    cx.language == "python"
}

/// `uv pip install ... -e X` into: build requirements (a setuptools with PEP 660 in place of
/// a pinned older one) installed in the venv, then the same install without build isolation.
fn editable_without_isolation(
    failed: &Failed<'_>,
    _c: &regex::Captures<'_>,
    cx: &RepairContext,
) -> Option<Repair> {
    if !failed.command.contains(" -e ") || failed.command.contains("--no-build-isolation") {
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
    let quoted: Vec<String> = requires
        .iter()
        .map(|r| crate::plan::shell_quote(r))
        .collect();
    let command = failed
        .command
        .replacen(" -e ", " --no-build-isolation -e ", 1);
    Some(Repair::Replace(format!(
        "{} {} && {command}",
        cx.pip_base,
        quoted.join(" ")
    )))
}

/// A project whose `setup.py` needs an old setuptools: installed without `-e` against
/// `setuptools<58`, and reinstalled (offline) after each source change.
fn old_setuptools_non_editable(
    failed: &Failed<'_>,
    _c: &regex::Captures<'_>,
    cx: &RepairContext,
) -> Option<Repair> {
    if !failed.command.contains("uv pip install") || failed.command.contains("setuptools<58") {
        return None;
    }
    let command = strip_setuptools_floor(failed.command)
        .replacen(" -e '.", " --no-build-isolation '.", 1)
        .replacen(" -e .", " --no-build-isolation .", 1);
    Some(Repair::ReplaceWithRebuild {
        commands: vec![format!("{} 'setuptools<58' wheel", cx.pip_base), command],
        rebuild: vec![format!(
            "uv pip install --offline --no-deps --no-build-isolation --python {VENV}/bin/python ."
        )],
    })
}

/// The command without its `--exclude-newer-package setuptools=...` floor.
fn strip_setuptools_floor(command: &str) -> String {
    const FLOOR: &str = " --exclude-newer-package setuptools=";
    match command.find(FLOOR) {
        Some(at) => {
            let value = at + FLOOR.len();
            let end = command[value..]
                .find(' ')
                .map_or(command.len(), |e| value + e);
            format!("{}{}", &command[..at], &command[end..])
        }
        None => command.to_string(),
    }
}

/// Test requirements that do not resolve together: lint and docs tools the tests never import
/// dropped, then the rest installed together, or line by line when that still fails, each
/// line that cannot be installed skipped and logged.
fn drop_non_test_tools(
    failed: &Failed<'_>,
    _c: &regex::Captures<'_>,
    cx: &RepairContext,
) -> Option<Repair> {
    if !failed.command.contains(TEST_REQUIREMENTS_MARK) {
        return None;
    }
    let (files, specs) = requirement_sources(failed.command);
    Some(Repair::Replace(tiered_install(
        &cx.pip_base,
        &files,
        &specs,
    )))
}

/// The marker that names the test requirements command of a Python plan.
pub const TEST_REQUIREMENTS_MARK: &str = "# kiln: test requirements";

/// The `-r FILE` files and plain requirements of a `uv pip install` command.
fn requirement_sources(command: &str) -> (Vec<String>, Vec<String>) {
    let command = command
        .split(TEST_REQUIREMENTS_MARK)
        .next()
        .unwrap_or(command);
    let words = shell_words(command);
    let mut files = Vec::new();
    let mut specs = Vec::new();
    let mut words = words
        .into_iter()
        .skip_while(|w| w != "install")
        .skip(1)
        .peekable();
    while let Some(word) = words.next() {
        match word.as_str() {
            "-r" => files.extend(words.next()),
            "--python" | "--exclude-newer" | "--exclude-newer-package" | "-c" => {
                words.next();
            }
            w if w.starts_with('-') => {}
            w => specs.push(w.to_string()),
        }
    }
    (files, specs)
}

/// Splits a command line the way a shell would for simple quoting (`'...'`, `"..."`).
fn shell_words(command: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for c in command.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => current.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (None, c) if c.is_whitespace() => {
                if any || !current.is_empty() {
                    words.push(std::mem::take(&mut current));
                }
                any = false;
            }
            (None, c) => current.push(c),
        }
    }
    if any || !current.is_empty() {
        words.push(current);
    }
    words
}

/// The shell script of [`drop_non_test_tools`].
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
        let quoted = crate::plan::shell_quote(file);
        let out = crate::plan::shell_quote(&format!("{file}.kiln-kept"));
        script.push_str(&format!("keep < {quoted} > {out}; "));
        filtered.push(out);
    }
    let spec_file = "'.kiln-test-requirements.txt'";
    let spec_lines: Vec<String> = specs.iter().map(|s| crate::plan::shell_quote(s)).collect();
    script.push_str(&format!(
        "printf '%s\\n' {} | keep > {spec_file}; ",
        if spec_lines.is_empty() {
            "''".to_string()
        } else {
            spec_lines.join(" ")
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

/// A missing header (`fatal error: foo/bar.h: No such file or directory`): the Debian package
/// that ships it, found in Debian's Contents index with apt-file, is installed.
fn package_for_header(
    _f: &Failed<'_>,
    caps: &regex::Captures<'_>,
    _cx: &RepairContext,
) -> Option<Repair> {
    let header = caps.get(1)?.as_str();
    if !header
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._+-".contains(c))
    {
        return None;
    }
    let pattern = format!("/usr/include/(.*/)?{}$", regex::escape(header));
    Some(Repair::Before(vec![apt_file_install(&pattern, header)]))
}

/// A missing shared library at link time (`/usr/bin/ld: cannot find -lfoo`): its `-dev`
/// package, found with apt-file.
fn package_for_library(
    _f: &Failed<'_>,
    caps: &regex::Captures<'_>,
    _cx: &RepairContext,
) -> Option<Repair> {
    let library = caps.get(1)?.as_str();
    if !library
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "._+-".contains(c))
    {
        return None;
    }
    let pattern = format!(
        "/usr/lib/(x86_64-linux-gnu/)?lib{}\\.(so|a)$",
        regex::escape(library)
    );
    Some(Repair::Before(vec![apt_file_install(
        &pattern,
        &format!("lib{library}"),
    )]))
}

/// Finds the `-dev` package holding a file matching `pattern` in Debian's Contents index and
/// installs it.
fn apt_file_install(pattern: &str, what: &str) -> String {
    format!(
        "apt-get update -qq && apt-get install -y -qq --no-install-recommends apt-file >/dev/null && apt-file update >/dev/null && pkg=$(apt-file search -x {} | cut -d: -f1 | grep -- '-dev$' | head -1) && test -n \"$pkg\" && echo \"[kiln] {what} is in the Debian package $pkg\" && apt-get install -y --no-install-recommends \"$pkg\" && rm -rf /var/lib/apt/lists/*",
        crate::plan::shell_quote(pattern)
    )
}

fn apt(packages: &[&str]) -> Repair {
    Repair::Before(crate::plan::apt_install(packages).into_iter().collect())
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
    // The project's own package (a C extension not built, a module the test patch adds) is
    // not something to download.
    Some(Repair::Before(vec![format!(
        "for d in {top} src/{top} lib/{top}; do if [ -e \"$d\" ] || [ -e \"$d.py\" ]; then echo \"[kiln] {top} is the project's own module, not a missing dependency\"; exit 1; fi; done; {} {} && echo '[kiln] installed {dist} for `import {module}`'",
        cx.pip_base,
        crate::plan::shell_quote(&dist)
    )]))
}

fn interpreter(target: Suite) -> impl Fn(&RepairContext) -> Option<Repair> {
    move |cx| (cx.suite != Some(target)).then_some(Repair::Interpreter(target))
}

/// The rules, in the order they are tried.
pub static RULES: &[Rule] = &[
    Rule {
        name: "python-editable-backend",
        scope: Scope::Language("python"),
        phase: Phase::Setup,
        command: Some("uv pip install"),
        signature: r"(?i)build_editable|does not support (pep ?660|editable)|editable mode currently requires|editable .*(not supported|unsupported)|\[pep 660\]",
        description: "the build backend the project pins cannot make an editable install (no PEP 660, setuptools before 64): its build requirements and a newer setuptools go into the venv and the project is installed without build isolation",
        repair: |f, c, cx| {
            python_only(f, c, cx)
                .then(|| editable_without_isolation(f, c, cx))
                .flatten()
        },
    },
    Rule {
        name: "python-old-setuptools",
        scope: Scope::Language("python"),
        phase: Phase::Setup,
        command: Some("uv pip install"),
        signature: r"(?i)use_2to3 is invalid|error in .* setup command|module 'setuptools(\.\w+)*' has no attribute|cannot import name '\w+' from 'setuptools|No module named 'setuptools\.(command\.)?(build|test|dep_util|extern)'|'Distribution' object has no attribute|invalid command 'bdist_wheel'",
        description: "the project's setup.py needs a setuptools older than the one its install got: it is installed without -e against setuptools<58 and reinstalled after each patch",
        repair: |f, c, cx| {
            python_only(f, c, cx)
                .then(|| old_setuptools_non_editable(f, c, cx))
                .flatten()
        },
    },
    Rule {
        name: "python-test-requirements",
        scope: Scope::Language("python"),
        phase: Phase::Setup,
        command: Some(TEST_REQUIREMENTS_MARK),
        signature: r"(?i)No solution found when resolving|unsatisfiable|Could not find a version that satisfies|No matching distribution|was yanked|conflict|not found in the package registry",
        description: "the test requirements do not resolve together: lint, typing and docs tools the tests never import are dropped, then the rest installed together or line by line, each line that cannot be installed logged",
        repair: drop_non_test_tools,
    },
    Rule {
        name: "python-needs-older-python",
        scope: Scope::Language("python"),
        phase: Phase::Setup,
        command: None,
        signature: r"(?i)current Python version \(3\.1[1-9][.\d]*\) does not satisfy|requires a different Python|not supported on Python 3\.1[1-9]|only versions (>|>=)=?[\d.]+,\s*<3\.1[01]\b|Python 3\.1[1-9] is not supported|longintrepr\.h: No such file|error: '_PyLong_\w+|PyCode_New|_PyUnicode_Ready|has no member named 'ob_digit'",
        description: "a dependency or the project does not support the image's Python (an old sdist, a C extension written for the 3.9 C API): the launch starts over on Debian bullseye's Python 3.9",
        repair: |f, c, cx| {
            python_only(f, c, cx)
                .then(|| interpreter(Suite::Bullseye)(cx))
                .flatten()
        },
    },
    Rule {
        name: "python-distutils",
        scope: Scope::Language("python"),
        phase: Phase::Setup,
        command: None,
        signature: r"No module named 'distutils'|ModuleNotFoundError: No module named 'distutils",
        description: "distutils is gone from Python 3.12 on: the launch starts over on Debian bookworm's Python 3.11",
        repair: |f, c, cx| {
            python_only(f, c, cx)
                .then(|| {
                    (cx.suite == Some(Suite::Trixie))
                        .then_some(Repair::Interpreter(Suite::Bookworm))
                })
                .flatten()
        },
    },
    Rule {
        name: "pkg-config",
        scope: Scope::Any,
        phase: Phase::Setup,
        command: None,
        signature: r"(?i)pkg-config: (command )?not found|could not find pkg-config|pkg-config (tool|executable|binary) .*(not found|could not be found)|the pkg-config script could not be found|Did not find pkg-config",
        description: "the build runs pkg-config, which the image lacks: Debian's pkg-config is installed",
        repair: |_, _, _| Some(apt(&["pkg-config"])),
    },
    Rule {
        name: "missing-header",
        scope: Scope::Any,
        phase: Phase::Setup,
        command: None,
        signature: r"fatal error: ([A-Za-z0-9_./+-]+\.h(?:pp)?): No such file or directory",
        description: "a C header is missing: the Debian -dev package that ships it (Debian's Contents index, through apt-file) is installed",
        repair: package_for_header,
    },
    Rule {
        name: "missing-library",
        scope: Scope::Any,
        phase: Phase::Setup,
        command: None,
        signature: r"/usr/bin/ld: cannot find -l([A-Za-z0-9_.+-]+)",
        description: "the linker cannot find a system library: its Debian -dev package (Debian's Contents index, through apt-file) is installed",
        repair: package_for_library,
    },
    Rule {
        name: "cmake",
        scope: Scope::Any,
        phase: Phase::Setup,
        command: None,
        signature: r"(?i)cmake: (command )?not found|is `cmake` not installed|failed to execute command: No such file or directory \(os error 2\)\s*is `cmake`|CMake must be installed",
        description: "the build runs cmake (a -sys crate, a CMake extension), which the image lacks: Debian's cmake is installed",
        repair: |_, _, _| Some(apt(&["cmake"])),
    },
    Rule {
        name: "node-legacy-openssl",
        scope: Scope::Language("node"),
        phase: Phase::Setup,
        command: None,
        signature: r"ERR_OSSL_EVP_UNSUPPORTED|digital envelope routines::unsupported",
        description: "webpack 4 and other tools hash with MD4, which OpenSSL 3 (Node 17 on) refuses: NODE_OPTIONS=--openssl-legacy-provider",
        // Older Node has OpenSSL 1.1 and refuses to start with the flag.
        repair: |_, _, cx| {
            (cx.node_major >= 17)
                .then(|| Repair::Env("NODE_OPTIONS".into(), "--openssl-legacy-provider".into()))
        },
    },
    Rule {
        name: "node-cutoff-admits-nothing",
        scope: Scope::Language("node"),
        phase: Phase::Setup,
        command: Some("npm install --before"),
        signature: r"ETARGET|ENOVERSIONS|No matching version found for|No versions available for|notarget",
        description: "no published version of a dependency satisfies its range as of the cut-off date (a range newer than the registry's dates, or a registry that reports later publish times): npm install without --before, the ranges as written",
        repair: |f, _, _| {
            let words = shell_words(f.command);
            let at = words.iter().position(|w| w == "--before")?;
            let mut kept: Vec<String> = words[..at].to_vec();
            kept.extend(words.iter().skip(at + 2).cloned());
            Some(Repair::DropCutoff(
                kept.iter()
                    .map(|w| crate::plan::shell_quote(w))
                    .collect::<Vec<_>>()
                    .join(" "),
            ))
        },
    },
    Rule {
        name: "node-native-addon-without-scripts",
        scope: Scope::Language("node"),
        phase: Phase::Setup,
        command: Some(" install"),
        signature: r"gyp ERR!|node-pre-gyp ERR!|prebuild-install (?:warn|WARN|ERR)|Failed at the \S+ install script|command failed\s*\n.*node-gyp",
        description: "a native addon's install script failed (its prebuilt binary is downloaded from a host the build cannot reach, or node-gyp cannot build it): the dependencies are installed again without install scripts, so the tests that do not load the addon run",
        repair: |f, _, _| without_install_scripts(f.command).map(Repair::Replace),
    },
    Rule {
        name: "node-require-async-module",
        scope: Scope::Language("node"),
        phase: Phase::Tests,
        command: None,
        signature: r"ERR_REQUIRE_ASYNC_MODULE",
        description: "Node 20.19 and 22.12 on let require() load ES modules, and one with top-level await then fails where earlier Node made the caller fall back to import() (jest loading an ESM config): the tests run with --no-experimental-require-module",
        repair: |f, _, _| without_require_module(f.command).map(Repair::Replace),
    },
    Rule {
        name: "python-missing-test-module",
        scope: Scope::Language("python"),
        phase: Phase::Tests,
        command: None,
        signature: r"(?m)(?:ModuleNotFoundError|ImportError): No module named '([A-Za-z0-9_.]+)'",
        description: "the tests import a module nothing installed (a test dependency no manifest declares): its distribution is installed and the tests run again; the project's own modules are left alone",
        repair: |f, c, cx| {
            python_only(f, c, cx)
                .then(|| missing_test_module(f, c, cx))
                .flatten()
        },
    },
    // Last: every more specific repair of the step is tried first.
    Rule {
        name: "optional-step",
        scope: Scope::Any,
        phase: Phase::Setup,
        command: None,
        signature: r"([^\n]*\S[^\n]*)\s*\z",
        description: "a step the tests may not need (the package's own build script) failed: the launch goes on without it, drops it from the rebuild commands, and lets the baseline test run decide",
        repair: |f, _, cx| {
            cx.optional
                .iter()
                .any(|c| c == f.command)
                .then(|| Repair::Skip(f.command.to_string()))
        },
    },
];

/// The compiled signatures, in [`RULES`] order (`None` for a signature that does not compile,
/// which a test rules out).
static COMPILED: LazyLock<Vec<Option<Regex>>> =
    LazyLock::new(|| RULES.iter().map(|r| Regex::new(r.signature).ok()).collect());

/// The end of `output` the signatures see.
fn tail(output: &str) -> &str {
    if output.len() <= TAIL_BYTES {
        return output;
    }
    let mut start = output.len() - TAIL_BYTES;
    while !output.is_char_boundary(start) {
        start += 1;
    }
    &output[start..]
}

/// The first rule not in `tried` that matches the failure, and its repair.
#[must_use]
pub fn find(
    failed: &Failed<'_>,
    cx: &RepairContext,
    tried: &[&str],
) -> Option<(&'static Rule, Repair, String)> {
    let text = tail(failed.output);
    for (rule, compiled) in RULES.iter().zip(COMPILED.iter()) {
        if rule.phase != failed.phase || tried.contains(&rule.name) {
            continue;
        }
        if let Scope::Language(language) = rule.scope
            && language != cx.language
        {
            continue;
        }
        if rule.command.is_some_and(|c| !failed.command.contains(c)) {
            continue;
        }
        let Some(regex) = compiled else { continue };
        let Some(caps) = regex.captures(text) else {
            continue;
        };
        if let Some(repair) = (rule.repair)(failed, &caps, cx) {
            let matched = caps
                .get(0)
                .map(|m| m.as_str().lines().next().unwrap_or("").trim().to_string())
                .unwrap_or_default();
            return Some((rule, repair, matched));
        }
    }
    None
}

/// How a repair is written in the environment row: the rule, what its repair did (the
/// commands themselves are among the setup commands), and the output line that triggered it.
#[must_use]
pub fn describe(rule: &Rule, repair: &Repair, matched: &str) -> String {
    let what = match repair {
        Repair::Env(k, v) => format!("set {k}={v}"),
        Repair::DropCutoff(command) => {
            format!("dropped the dependency cut-off: `{command}`")
        }
        Repair::Skip(command) => {
            format!("`{command}` failed; went on without it, the baseline test run decides")
        }
        Repair::Before(_) | Repair::Replace(_) | Repair::ReplaceWithRebuild { .. } => {
            let mut what = rule
                .description
                .split(": ")
                .nth(1)
                .unwrap_or(rule.description)
                .to_string();
            if let Repair::ReplaceWithRebuild { rebuild, .. } = repair {
                what.push_str(&format!(" (rebuild: `{}`)", rebuild.join(" && ")));
            }
            what
        }
        Repair::Interpreter(suite) => format!("started over on Debian {}'s Python", suite.name()),
    };
    let matched: String = matched.chars().take(200).collect();
    format!("{}: {what} (after: {matched})", rule.name)
}

/// The test command with require(esm) switched off: added to the command's own
/// `NODE_OPTIONS=...` assignment when it has one (an inline assignment would override an
/// exported one), else exported before it; `None` when it is off already.
fn without_require_module(command: &str) -> Option<String> {
    const FLAG: &str = "--no-experimental-require-module";
    if command.contains(FLAG) {
        return None;
    }
    if let Some(at) = command.find("NODE_OPTIONS=") {
        let value_at = at + "NODE_OPTIONS=".len();
        let rest = &command[value_at..];
        let (value, after) = match rest.strip_prefix(['\'', '"']) {
            Some(quoted) => {
                let quote = &rest[..1];
                let end = quoted.find(quote)?;
                (&quoted[..end], &quoted[end + 1..])
            }
            None => {
                let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
                (&rest[..end], &rest[end..])
            }
        };
        return Some(format!(
            "{}NODE_OPTIONS='{value} {FLAG}'{after}",
            &command[..at]
        ));
    }
    Some(format!(
        "export NODE_OPTIONS=\"${{NODE_OPTIONS:+$NODE_OPTIONS }}{FLAG}\"; {command}"
    ))
}

/// The install command with every `npm ci`, `npm install`, `yarn install` and `pnpm install`
/// told to run no install scripts; `None` when it holds none of them or already says so.
fn without_install_scripts(command: &str) -> Option<String> {
    if command.contains("--ignore-scripts") {
        return None;
    }
    let mut out = command.to_string();
    let mut changed = false;
    for install in ["npm ci", "npm install", "yarn install", "pnpm install"] {
        if out.contains(install) {
            out = out.replace(install, &format!("{install} --ignore-scripts"));
            changed = true;
        }
    }
    changed.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cx(language: &'static str) -> RepairContext {
        RepairContext {
            language,
            suite: Some(Suite::Bookworm),
            build_requires: vec![
                "setuptools~=62.0".into(),
                "setuptools_scm[toml]>=6.2".into(),
                "cython==0.29.22".into(),
            ],
            pip_base: "uv pip install --python /opt/kiln/venv/bin/python".into(),
            optional: vec!["npm run build".into()],
            node_major: 18,
        }
    }

    fn found(
        phase: Phase,
        command: &str,
        output: &str,
        language: &'static str,
    ) -> Option<(String, Repair)> {
        let failed = Failed {
            phase,
            command,
            output,
        };
        find(&failed, &cx(language), &[]).map(|(rule, repair, _)| (rule.name.to_string(), repair))
    }

    #[test]
    fn every_signature_compiles_and_names_are_unique() {
        let mut names = std::collections::BTreeSet::new();
        for (rule, compiled) in RULES.iter().zip(COMPILED.iter()) {
            assert!(compiled.is_some(), "{} does not compile", rule.name);
            assert!(names.insert(rule.name), "{} twice", rule.name);
            if let Scope::Language(language) = rule.scope {
                assert!(ECOSYSTEMS.contains(&language), "{}: {language}", rule.name);
            }
        }
    }

    #[test]
    fn an_editable_install_without_pep_660_is_built_without_isolation() {
        // uv 0.13's message for a setuptools 62 backend.
        let log = "  × Failed to build `pkg @ file:///testbed`\n  ├─▶ The build backend returned an error\n  ╰─▶ Call to `setuptools.build_meta.build_editable` failed (exit status: 1)\n      AttributeError: module 'setuptools.build_meta' has no attribute 'build_editable'";
        let command = "uv pip install --python /opt/kiln/venv/bin/python -e '.[test]' pytest";
        let (name, repair) = found(Phase::Setup, command, log, "python").expect("no rule");
        assert_eq!(name, "python-editable-backend");
        let Repair::Replace(new) = repair else {
            panic!("{repair:?}")
        };
        assert_eq!(
            new,
            "uv pip install --python /opt/kiln/venv/bin/python 'setuptools>=64' wheel 'setuptools_scm[toml]>=6.2' cython==0.29.22 && uv pip install --python /opt/kiln/venv/bin/python --no-build-isolation -e '.[test]' pytest"
        );
        // Not for other ecosystems; once tried, the next rule installs without -e.
        assert!(found(Phase::Setup, command, log, "rust").is_none());
        let failed = Failed {
            phase: Phase::Setup,
            command,
            output: log,
        };
        let next =
            find(&failed, &cx("python"), &["python-editable-backend"]).map(|(r, _, _)| r.name);
        assert_eq!(next, Some("python-old-setuptools"));
    }

    #[test]
    fn an_old_setup_py_gets_old_setuptools_and_a_rebuild() {
        let log = "      error in pkg setup command: use_2to3 is invalid.\n      [end of output]";
        let command = "uv pip install --python /opt/kiln/venv/bin/python --exclude-newer 2019-01-01T00:00:00Z --exclude-newer-package setuptools=2023-01-01T00:00:00Z -e . pytest";
        let (name, repair) = found(Phase::Setup, command, log, "python").expect("no rule");
        assert_eq!(name, "python-old-setuptools");
        let Repair::ReplaceWithRebuild { commands, rebuild } = repair else {
            panic!("{repair:?}")
        };
        assert_eq!(
            commands[1],
            "uv pip install --python /opt/kiln/venv/bin/python --exclude-newer 2019-01-01T00:00:00Z --no-build-isolation . pytest"
        );
        assert!(rebuild[0].contains("--offline --no-deps --no-build-isolation"));
    }

    #[test]
    fn unresolvable_test_requirements_drop_tools_the_tests_do_not_import() {
        let log = "  × No solution found when resolving dependencies:\n  ╰─▶ Because coverage<5 and coverage>=7.0 ...";
        let command = format!(
            "uv pip install --python /opt/kiln/venv/bin/python -r requirements-dev.txt 'coverage<5' mypy==0.9 {TEST_REQUIREMENTS_MARK}"
        );
        let (name, repair) = found(Phase::Setup, &command, log, "python").expect("no rule");
        assert_eq!(name, "python-test-requirements");
        let Repair::Replace(script) = repair else {
            panic!("{repair:?}")
        };
        assert!(
            script.contains("keep < requirements-dev.txt > requirements-dev.txt.kiln-kept"),
            "{script}"
        );
        assert!(
            script.contains("printf '%s\\n' 'coverage<5' mypy==0.9 | keep"),
            "{script}"
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
    fn headers_libraries_tools_and_interpreters() {
        let (name, repair) = found(
            Phase::Setup,
            "make",
            "src/x.c:3:10: fatal error: libxml/parser.h: No such file or directory",
            "c",
        )
        .expect("no rule");
        assert_eq!(name, "missing-header");
        let Repair::Before(commands) = repair else {
            panic!("{repair:?}")
        };
        assert!(
            commands[0].contains("apt-file search -x '/usr/include/(.*/)?libxml/parser\\.h$'"),
            "{}",
            commands[0]
        );
        let (name, _) = found(
            Phase::Setup,
            "make",
            "/usr/bin/ld: cannot find -lssl: No such file",
            "c",
        )
        .expect("no rule");
        assert_eq!(name, "missing-library");
        let (name, repair) = found(
            Phase::Setup,
            "pip",
            "./configure: line 12: pkg-config: command not found",
            "python",
        )
        .expect("no rule");
        assert_eq!(name, "pkg-config");
        assert!(matches!(repair, Repair::Before(c) if c[0].contains("pkg-config")));
        let (name, repair) = found(
            Phase::Setup,
            "npm run build",
            "Error: error:0308010C:digital envelope routines::unsupported",
            "node",
        )
        .expect("no rule");
        assert_eq!(
            (name.as_str(), repair),
            (
                "node-legacy-openssl",
                Repair::Env("NODE_OPTIONS".into(), "--openssl-legacy-provider".into())
            )
        );
        let (name, repair) = found(
            Phase::Setup,
            "uv pip install -e .",
            "      src/ext.c:4:10: fatal error: longintrepr.h: No such file or directory",
            "python",
        )
        .expect("no rule");
        assert_eq!(
            (name.as_str(), repair),
            (
                "python-needs-older-python",
                Repair::Interpreter(Suite::Bullseye)
            )
        );
        assert!(found(Phase::Setup, "cargo test", "thread 'main' panicked", "rust").is_none());
    }

    #[test]
    fn an_npm_cutoff_that_admits_nothing_is_dropped() {
        let log = "npm ERR! code ETARGET\nnpm ERR! notarget No matching version found for left-pad@^9.0.0.\n";
        let (name, repair) = found(
            Phase::Setup,
            "npm install --before 2019-06-01T00:00:00Z",
            log,
            "node",
        )
        .expect("no rule");
        assert_eq!(
            (name.as_str(), repair),
            (
                "node-cutoff-admits-nothing",
                Repair::DropCutoff("npm install".into())
            )
        );
        // Without a cut-off there is nothing to drop.
        assert!(found(Phase::Setup, "npm install", log, "node").is_none());
    }

    #[test]
    fn a_project_es_module_with_top_level_await_runs_without_require_esm() {
        // Captured from prettier at b26f56bd31 under Debian trixie's Node 20.19 (jest 29
        // loading jest.config.js, an ES module with top-level await).
        let log = "$ CI=true NODE_OPTIONS=--experimental-vm-modules yarn jest --runInBand --ci --json --outputFile=/tmp/kiln-jest.json\nError [ERR_REQUIRE_ASYNC_MODULE]: require() cannot be used on an ESM graph with top-level await. Use import() instead. To see where the top-level await comes from, use --experimental-print-required-tla.\n    at ModuleJobSync.runSync (node:internal/modules/esm/module_job:384:13)\n    at requireOrImportModule (/testbed/node_modules/jest-util/build/index.js:881:28)\n";
        let command = "rm -f /tmp/kiln-jest.json; CI=true NODE_OPTIONS=--experimental-vm-modules yarn jest --runInBand; rc=$?";
        let (name, repair) = found(Phase::Tests, command, log, "node").expect("no rule");
        assert_eq!(name, "node-require-async-module");
        assert_eq!(
            repair,
            Repair::Replace(
                "rm -f /tmp/kiln-jest.json; CI=true NODE_OPTIONS='--experimental-vm-modules --no-experimental-require-module' yarn jest --runInBand; rc=$?".into()
            )
        );
        assert_eq!(
            without_require_module("npx jest").as_deref(),
            Some(
                "export NODE_OPTIONS=\"${NODE_OPTIONS:+$NODE_OPTIONS }--no-experimental-require-module\"; npx jest"
            )
        );
        assert_eq!(
            without_require_module("NODE_OPTIONS=\"--a --b\" jest").as_deref(),
            Some("NODE_OPTIONS='--a --b --no-experimental-require-module' jest")
        );
        assert!(
            found(
                Phase::Tests,
                &without_require_module(command).unwrap_or_default(),
                log,
                "node"
            )
            .is_none()
        );
    }

    #[test]
    fn a_native_addon_that_cannot_build_is_installed_without_scripts() {
        // npm 9 on Node 18, re2's install script failing to fetch its prebuilt binary and to
        // build it (no Node headers: nodejs.org unreachable).
        let log = "npm ERR! code 1\nnpm ERR! path /testbed/node_modules/re2\nnpm ERR! command failed\nnpm ERR! command sh -c install-from-cache --artifact build/Release/re2.node --host-var RE2_DOWNLOAD_MIRROR --skip-path-var RE2_DOWNLOAD_SKIP_PATH --skip-ver-var RE2_DOWNLOAD_SKIP_VER || node-gyp -j max rebuild\nnpm ERR! gyp ERR! stack Error: 403 response downloading https://nodejs.org/download/release/v18.19.0/node-v18.19.0-headers.tar.gz\n";
        let (name, repair) = found(Phase::Setup, "npm install", log, "node").expect("no rule");
        assert_eq!(
            (name.as_str(), repair),
            (
                "node-native-addon-without-scripts",
                Repair::Replace("npm install --ignore-scripts".into())
            )
        );
        let locked = "npm ci || { echo '[kiln] lockfile out of date; npm install'; npm install; }";
        let (_, repair) = found(Phase::Setup, locked, log, "node").expect("no rule");
        assert_eq!(
            repair,
            Repair::Replace(
                "npm ci --ignore-scripts || { echo '[kiln] lockfile out of date; npm install --ignore-scripts'; npm install --ignore-scripts; }".into()
            )
        );
        // Tried once: a command that already skips scripts is not repaired again.
        assert!(found(Phase::Setup, "npm install --ignore-scripts", log, "node").is_none());
    }

    #[test]
    fn an_optional_step_is_skipped_only_after_the_specific_repairs() {
        let openssl = "> webpack\nError: error:0308010C:digital envelope routines::unsupported\n    at new Hash\n\n";
        let failed = Failed {
            phase: Phase::Setup,
            command: "npm run build",
            output: openssl,
        };
        let context = cx("node");
        let (rule, _, _) = find(&failed, &context, &[]).expect("no rule");
        assert_eq!(rule.name, "node-legacy-openssl");
        let (rule, repair, matched) =
            find(&failed, &context, &["node-legacy-openssl"]).expect("no rule");
        assert_eq!(
            (rule.name, &repair, matched.as_str()),
            (
                "optional-step",
                &Repair::Skip("npm run build".into()),
                "at new Hash"
            )
        );
        assert_eq!(
            describe(rule, &repair, &matched),
            "optional-step: `npm run build` failed; went on without it, the baseline test run decides (after: at new Hash)"
        );
        // Node 16 has OpenSSL 1.1: the switch does not exist there.
        let node16 = RepairContext {
            node_major: 16,
            ..cx("node")
        };
        let (rule, _, _) = find(&failed, &node16, &[]).expect("no rule");
        assert_eq!(rule.name, "optional-step");
        // A step the plan needs is never skipped.
        let install = Failed {
            command: "npm ci",
            ..failed
        };
        assert!(find(&install, &context, &["node-legacy-openssl"]).is_none());
    }

    #[test]
    fn a_missing_test_module_is_installed_unless_it_is_the_projects_own() {
        let log = "E   ModuleNotFoundError: No module named 'yaml'\n=== 3 errors in 0.2s ===";
        let (name, repair) = found(Phase::Tests, "pytest", log, "python").expect("no rule");
        assert_eq!(name, "python-missing-test-module");
        let Repair::Before(commands) = repair else {
            panic!("{repair:?}")
        };
        assert!(
            commands[0]
                .contains("uv pip install --python /opt/kiln/venv/bin/python pyyaml && echo"),
            "{}",
            commands[0]
        );
        assert!(
            found(Phase::Setup, "pytest", log, "python").is_none(),
            "tests only"
        );
    }
}
