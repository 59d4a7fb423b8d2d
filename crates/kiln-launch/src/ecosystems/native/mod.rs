//! The C/C++ plan: CMake, Meson, autotools or a plain Makefile, on the GCC of the base commit's
//! era (see [`toolchain`]), with
//! the Debian `-dev` packages that the build files ask for (`find_package`, `pkg_check_modules`,
//! `dependency()`, `PKG_CHECK_MODULES`) installed by apt.

use std::path::Path;

use crate::debian::Suite;
use crate::plan::{Plan, PlanContext, RepairContext, read};
use crate::shell::quote as shell_quote;
use crate::steps::{FreshInstall, Step, TestCommand};

pub mod build_files;
pub mod submodules;
pub mod toolchain;

use super::entry::Entry;
use build_files::{call_args, find_files, package_for};
use submodules::Submodule;

pub use toolchain::image;

/// Build directory of the CMake and Meson plans; not `build`, which many repositories commit
/// (scripts, CMake modules).
pub const BUILD_DIR: &str = "build-kiln";

/// A new configure in an environment of CMake's: its cache goes (a cached option keeps its
/// old value when the project changed its default); the object files stay.
pub const FRESH: FreshInstall = FreshInstall {
    clears: "CMake's cache",
    script: || format!("rm -f {BUILD_DIR}/CMakeCache.txt"),
};

/// The build systems this plan drives, in the order they are looked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuildSystem {
    /// `CMakeLists.txt`.
    Cmake,
    /// `meson.build`.
    Meson,
    /// `configure`, `configure.ac` or `configure.in`.
    Autotools,
    /// A Makefile with a `test` or `check` target.
    Make {
        /// The target that runs the tests.
        target: &'static str,
    },
}

/// What the build files say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NativeProject {
    /// The build system.
    pub system: BuildSystem,
    /// Debian packages to install, sorted and deduplicated.
    pub packages: Vec<String>,
    /// Library names the table does not know, left to the image or the build.
    pub unknown: Vec<String>,
    /// The `-dev` packages the project's CI installs, added when some library is unknown:
    /// hints, installed tolerantly ([`Step::AptHints`]), not among `packages`.
    pub ci_packages: Vec<String>,
    /// CI packages left out as another toolchain's runtime (`libc++-8-dev` of a clang matrix
    /// entry): the plan builds with the image's GCC.
    pub other_toolchains: Vec<String>,
    /// CMake `option()`s that switch tests on (`FOO_BUILD_TESTS`), set ON by the plan.
    pub test_options: Vec<String>,
    /// Other `option()`s of the project that most CMake configure lines of its CI set, to one
    /// value (`-DCATCH_BUILD_EXAMPLES=OFF`; [`crate::ci::cmake_definitions`]), set so by the
    /// plan; options of suites and checks the image cannot run or does not need (GPU,
    /// sanitizers, warnings as errors, the CI's own targets: `JSON_CI`) left out.
    pub ci_options: Vec<(String, String)>,
    /// Git submodules declared in `.gitmodules` but absent from the checkout (they could not
    /// be fetched), and what stands in for each.
    pub missing_submodules: Vec<Submodule>,
    /// The build fetches sources at configure time (`FetchContent`, meson wraps).
    pub fetches: bool,
    /// `cmake_minimum_required(VERSION ...)`, when declared.
    pub cmake_minimum: Option<String>,
    /// The test framework whose output the plain-make plan reads, when one is recognised.
    pub framework: Option<&'static str>,
}

/// Library names that the build files of `system` ask for.
fn wanted_libraries(root: &Path, system: BuildSystem) -> Vec<String> {
    let mut names = Vec::new();
    let module_words = |words: &[String]| -> Vec<String> {
        // pkg-config module lists: `libfoo >= 1.0 bar`; versions and operators are not names.
        words
            .iter()
            .map(|w| w.split(['<', '>', '=']).next().unwrap_or("").to_string())
            .filter(|w| {
                !w.is_empty()
                    && !w.starts_with(|c: char| c.is_ascii_digit())
                    && !matches!(
                        w.as_str(),
                        "REQUIRED"
                            | "QUIET"
                            | "IMPORTED_TARGET"
                            | "GLOBAL"
                            | "NO_CMAKE_PATH"
                            | "NO_CMAKE_ENVIRONMENT_PATH"
                    )
            })
            .collect()
    };
    match system {
        BuildSystem::Cmake => {
            let files = find_files(root, &|n| n == "CMakeLists.txt" || n.ends_with(".cmake"));
            for file in files {
                let Ok(text) = std::fs::read_to_string(&file) else {
                    continue;
                };
                for words in call_args(&text, "find_package") {
                    if let Some(first) = words.first() {
                        names.push(first.clone());
                    }
                }
                for call in ["pkg_check_modules", "pkg_search_module"] {
                    for words in call_args(&text, call) {
                        names.extend(module_words(words.get(1..).unwrap_or_default()));
                    }
                }
            }
        }
        BuildSystem::Meson => {
            for file in find_files(root, &|n| n == "meson.build") {
                let Ok(text) = std::fs::read_to_string(&file) else {
                    continue;
                };
                for words in call_args(&text, "dependency") {
                    if let Some(first) = words.first() {
                        names.push(first.clone());
                    }
                }
            }
        }
        BuildSystem::Autotools => {
            for name in ["configure.ac", "configure.in"] {
                let Some(text) = read(root, name) else {
                    continue;
                };
                for words in call_args(&text, "PKG_CHECK_MODULES") {
                    names.extend(module_words(words.get(1..).unwrap_or_default()));
                }
                for words in call_args(&text, "AC_CHECK_LIB") {
                    if let Some(first) = words.first() {
                        names.push(first.clone());
                    }
                }
            }
        }
        BuildSystem::Make { .. } => {}
    }
    // Variables (`${PROJECT_NAME}`) and the project's own components are not libraries.
    names.retain(|n| !n.contains('$') && !n.contains('{'));
    names.sort();
    names.dedup();
    names
}

/// Whether a Makefile has `target:` as a rule.
fn has_target(makefile: &str, target: &str) -> bool {
    makefile.lines().any(|line| {
        line.split(':').next().is_some_and(|head| {
            line.contains(':')
                && !line.starts_with('\t')
                && head.split_whitespace().any(|t| t == target)
        })
    })
}

/// The C/C++ test framework the sources include, for plans whose test output has no
/// structure of its own.
fn framework_of(root: &Path) -> Option<&'static str> {
    let sources = find_files(root, &|n| {
        [".c", ".cc", ".cpp", ".cxx", ".h", ".hpp"]
            .iter()
            .any(|ext| n.ends_with(ext))
    });
    for file in sources.iter().take(300) {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        if text.contains("<gtest/gtest.h>") {
            return Some("gtest");
        }
        if text.contains("catch2/")
            || text.contains("<catch.hpp>")
            || text.contains("\"catch.hpp\"")
        {
            return Some("catch2");
        }
        if text.contains("doctest.h") {
            return Some("doctest");
        }
    }
    None
}

/// Words of CMake options that CI jobs turn on for checks of their own, which a test image
/// neither needs nor always has the tools for.
const CI_ONLY_CHECKS: &[&str] = &[
    "WERROR", "WARNINGS", "PEDANTIC", "TIDY", "CPPCHECK", "IWYU", "LTO", "IPO", "CCACHE", "STATIC",
    "ANALY", "LINT", "FORMAT",
];

/// Words of CMake test options that switch on suites other than the main one: accelerators
/// the image has none of, benchmarks, fuzzers, sanitizer and coverage runs, long or exhaustive
/// runs. Each costs build time (an accelerator suite took minutes on two cores) or cannot run.
const OTHER_SUITES: &[&str] = &[
    "CUDA",
    "GPU",
    "HIP",
    "ROCM",
    "SYCL",
    "OPENCL",
    "METAL",
    "VULKAN",
    "ONEAPI",
    "MPI",
    "BENCH",
    "FUZZ",
    "SANITIZ",
    "ASAN",
    "UBSAN",
    "TSAN",
    "MSAN",
    "VALGRIND",
    "COVERAGE",
    "PERF",
    "STRESS",
    "LONG",
    "EXHAUSTIVE",
    "SLOW",
    "ONLINE",
    "NETWORK",
    "INSTALL",
    "PACKAGE",
    "DOC",
];

/// Reads the build files at the root. `None` when no supported build system is found.
#[must_use]
pub fn detect(root: &Path) -> Option<NativeProject> {
    let makefile = ["GNUmakefile", "makefile", "Makefile"]
        .iter()
        .find_map(|name| read(root, name));
    let system = if root.join("CMakeLists.txt").is_file() {
        BuildSystem::Cmake
    } else if root.join("meson.build").is_file() {
        BuildSystem::Meson
    } else if ["configure", "configure.ac", "configure.in"]
        .iter()
        .any(|n| root.join(n).is_file())
    {
        BuildSystem::Autotools
    } else if let Some(text) = &makefile {
        if has_target(text, "test") {
            BuildSystem::Make { target: "test" }
        } else if has_target(text, "check") {
            BuildSystem::Make { target: "check" }
        } else {
            return None;
        }
    } else {
        return None;
    };
    let top_cmake = read(root, "CMakeLists.txt").unwrap_or_default();
    // The project's own name (`project(nlohmann_json ...)`): its tests may `find_package`
    // it, and a Debian copy of the project must not stand in for the code under test.
    let own = call_args(&top_cmake, "project")
        .into_iter()
        .next()
        .and_then(|words| words.into_iter().next())
        .map(|name| name.to_ascii_lowercase().replace('-', "_"));
    let mut packages = Vec::new();
    let mut unknown = Vec::new();
    let probes = wanted_libraries(root, system);
    for name in probes.iter().cloned() {
        if own
            .as_deref()
            .is_some_and(|own| own == name.to_ascii_lowercase().replace('-', "_"))
        {
            continue;
        }
        match package_for(&name) {
            Some(Some(package)) => packages.extend(package.split(' ').map(str::to_string)),
            Some(None) => {}
            None => unknown.push(name),
        }
    }
    // Libraries the table does not know: the `-dev` packages the project's CI installs stand
    // in (they are what its own builds had).
    let ci_commands = crate::ci::commands(root);
    let (other_toolchains, ci_packages) = ci_hints(&ci_commands, &unknown);
    let configure_ac = ["configure.ac", "configure.in"]
        .iter()
        .find_map(|name| read(root, name))
        .unwrap_or_default();
    let missing_submodules = submodules::missing(root, &probes, &top_cmake, &configure_ac);
    for submodule in &missing_submodules {
        if let submodules::StandIn::Package(package) = &submodule.stand_in {
            packages.extend(package.split(' ').map(str::to_string));
        }
    }
    packages.sort();
    packages.dedup();
    let ci_packages: Vec<String> = ci_packages
        .into_iter()
        .filter(|p| !packages.contains(p))
        .collect();
    let mut test_options: Vec<String> = call_args(&top_cmake, "option")
        .into_iter()
        .filter_map(|words| words.into_iter().next())
        .filter(|name| {
            let upper = name.to_ascii_uppercase();
            // simdjson and others build their tests only in a developer mode, Catch2 in its
            // development build.
            (upper.contains("TEST")
                || upper.ends_with("DEVELOPER_MODE")
                || upper.ends_with("DEVELOPMENT_BUILD"))
                && !upper.contains("DISABLE")
                && !upper.contains("NO_TEST")
                && !upper
                    .split('_')
                    .any(|word| OTHER_SUITES.iter().any(|w| word.starts_with(w)))
        })
        .collect();
    test_options.sort();
    test_options.dedup();
    let declared: Vec<String> = call_args(&top_cmake, "option")
        .into_iter()
        .filter_map(|words| words.into_iter().next())
        .collect();
    let ci_options = crate::ci::cmake_definitions(&ci_commands)
        .into_iter()
        .filter(|(name, value)| {
            let upper = name.to_ascii_uppercase();
            declared.contains(name)
                && !test_options.contains(name)
                && matches!(
                    value.to_ascii_uppercase().as_str(),
                    "ON" | "OFF" | "TRUE" | "FALSE" | "YES" | "NO" | "1" | "0"
                )
                && !upper.split('_').any(|word| {
                    word == "CI"
                        || OTHER_SUITES
                            .iter()
                            .chain(CI_ONLY_CHECKS)
                            .any(|w| word.starts_with(w))
                })
        })
        .collect();
    let fetches = match system {
        BuildSystem::Cmake => find_files(root, &|n| n == "CMakeLists.txt" || n.ends_with(".cmake"))
            .iter()
            .any(|f| {
                std::fs::read_to_string(f).is_ok_and(|t| {
                    t.contains("FetchContent_Declare") || t.contains("ExternalProject_Add")
                })
            }),
        BuildSystem::Meson => root.join("subprojects").is_dir(),
        _ => false,
    };
    let cmake_minimum = call_args(&top_cmake, "cmake_minimum_required")
        .into_iter()
        .next()
        .and_then(|words| {
            let at = words
                .iter()
                .position(|w| w.eq_ignore_ascii_case("VERSION"))?;
            words.get(at + 1).cloned()
        });
    let framework = match system {
        BuildSystem::Make { .. } => framework_of(root),
        _ => None,
    };
    Some(NativeProject {
        system,
        packages,
        unknown,
        ci_packages,
        other_toolchains,
        test_options,
        ci_options,
        missing_submodules,
        fetches,
        cmake_minimum,
        framework,
    })
}

/// The lines of an automake `make check` summary (`PASS: name`) rewritten as TAP, which the
/// `tap` parser reads: kiln-testlog has no automake parser. The raw log is printed first with
/// a `| ` prefix, so that nothing in it can be taken for a TAP line.
fn automake_as_tap(run: &str) -> String {
    let log = "/tmp/kiln-check.log";
    format!(
        "rm -f {log}; {run} >{log} 2>&1; rc=$?; sed 's/^/| /' {log}; echo '# automake results as TAP (kiln)'; \
sed -n -e 's/^PASS: \\(.*\\)/ok - \\1/p' -e 's/^XFAIL: \\(.*\\)/ok - \\1 # TODO expected failure/p' \
-e 's/^SKIP: \\(.*\\)/ok - \\1 # SKIP/p' -e 's/^FAIL: \\(.*\\)/not ok - \\1/p' \
-e 's/^XPASS: \\(.*\\)/not ok - \\1/p' -e 's/^ERROR: \\(.*\\)/not ok - \\1/p' {log}; exit $rc"
    )
}

/// For a missing submodule with a Debian stand-in, a command to run after `configure` that
/// fails, saying why, when the Makefiles configure wrote still link a library archive of the
/// submodule's empty directory (outside comments: automake comments out the branch of a
/// conditional not taken): the switch to the system copy did not take, and make would stop at
/// `No rule to make target '<path>/src/.libs/libx.la'` with no word of why.
fn links_bundled_copy(submodule: &Submodule) -> Option<String> {
    if !matches!(submodule.stand_in, submodules::StandIn::Package(_)) {
        return None;
    }
    let tried: Vec<&str> = submodule
        .switches
        .iter()
        .filter(|s| s.starts_with("--"))
        .map(String::as_str)
        .collect();
    let why = if tried.is_empty() {
        "configure offers no switch to the system copy that kiln knows".to_string()
    } else {
        format!("configure did not take {}", tried.join(" "))
    };
    let pattern = format!("^[^#]*{}/[^ ]*[.]la", regex_escape(&submodule.path));
    let message = format!(
        "kiln: the build still links the bundled copy in {} (a git submodule that could not be fetched): {why}",
        submodule.path
    );
    Some(format!(
        "{{ ! grep -rqs --include=Makefile -e {} . || {{ echo {} >&2; false; }}; }}",
        shell_quote(&pattern),
        shell_quote(&message)
    ))
}

/// `text` with the characters special to a basic regular expression (grep's) escaped.
fn regex_escape(text: &str) -> String {
    text.chars()
        .flat_map(|c| match c {
            '.' | '[' | ']' | '*' | '^' | '$' | '\\' => vec!['\\', c],
            c => vec![c],
        })
        .collect()
}

/// The C/C++ plan, when the root holds a supported build system.
#[must_use]
pub fn plan(cx: &PlanContext<'_>) -> Option<Plan> {
    let project = detect(cx.root)?;
    let mut setup = vec![Step::git_setup()];
    setup.extend(Step::apt(&project.packages));
    setup.extend(Step::apt_hints(&project.ci_packages));
    setup.extend(stub_makefiles(&project));
    let commands = build_commands(cx, &project);
    setup.extend(commands.configure);
    let build = Step::Shell(commands.build);
    setup.push(build.clone());
    let (suite, why) = toolchain::suite_for(
        cx.cutoff,
        toolchain::declared_standard(cx.root),
        project.cmake_minimum.as_deref(),
    );
    Some(Plan {
        name: commands.name.to_string(),
        language: "cpp",
        image: image(suite, cx.ca_bundle),
        version_reason: version_reason(&project, suite, &why),
        setup,
        rebuild: vec![build],
        test: TestCommand::plain(commands.test),
        test_scope: "all".into(),
        whole_test: None,
        collect: None,
        parser: commands.parser,
        resolution: resolution(&project, suite),
        cutoff: None,
        repair: RepairContext {
            suite: Some(suite),
            ..RepairContext::default()
        },
    })
}

/// The test command of [`bare`]: it says why there is nothing to run, and fails.
pub const BARE_TEST: &str = "echo '[kiln] no build plan matched the repository: the agent sets how to build and test it'; exit 1";

/// The plan of a repository no planner recognises, for the launch agent to build from (only
/// with `agent = true`): the era's toolchain image (git, compilers, make, CMake) holding the
/// checkout, no setup beyond git's, and a test command that fails ([`BARE_TEST`]), so the
/// baseline hands the container to the recipe and the agent, which set the test command.
#[must_use]
pub fn bare(cx: &PlanContext<'_>) -> Plan {
    let (suite, why) = toolchain::suite_for(cx.cutoff, None, None);
    Plan {
        name: "bare".into(),
        language: "unknown",
        image: image(suite, cx.ca_bundle),
        version_reason: format!(
            "no planner recognised the repository; {}: {why}",
            toolchain::compilers(suite)
        ),
        setup: vec![Step::git_setup()],
        rebuild: Vec::new(),
        test: TestCommand::plain(BARE_TEST),
        test_scope: "all".into(),
        whole_test: None,
        collect: None,
        parser: "status-lines",
        resolution: "none: the agent installs what the repository needs".into(),
        cutoff: None,
        repair: RepairContext {
            suite: Some(suite),
            ..RepairContext::default()
        },
    }
}

/// A build that recurses into an empty submodule directory stops at `No rule to make target
/// 'all'`: a Makefile there that does nothing lets it go on with the system copy (made before
/// configuring: automake also wants the directory to exist).
fn stub_makefiles(project: &NativeProject) -> Vec<Step> {
    project
        .missing_submodules
        .iter()
        .filter(|m| m.stub_makefile)
        .map(|submodule| {
            let path = shell_quote(&submodule.path);
            Step::Shell(format!(
                "mkdir -p {path} && [ -e {path}/Makefile ] || printf '.PHONY: all check install clean distclean distdir\\nall check install clean distclean distdir:\\n\\t@:\\n' > {path}/Makefile"
            ))
        })
        .collect()
}

/// What a build system's plan runs: its name, the configure steps, the build command, the
/// test command and the parser that reads it.
struct BuildCommands {
    name: &'static str,
    configure: Vec<Step>,
    build: String,
    test: String,
    parser: &'static str,
}

/// The commands of `project`'s build system.
fn build_commands(cx: &PlanContext<'_>, project: &NativeProject) -> BuildCommands {
    match project.system {
        BuildSystem::Cmake => cmake_commands(cx, project),
        BuildSystem::Meson => {
            let report = format!("{BUILD_DIR}/meson-logs/testlog.junit.xml");
            BuildCommands {
                name: "cpp-meson",
                configure: vec![Step::Shell(format!(
                    "meson setup {BUILD_DIR} --buildtype=debug"
                ))],
                build: format!("meson compile -C {BUILD_DIR}"),
                test: format!(
                    "rm -f {report}; meson test -C {BUILD_DIR} --print-errorlogs 2>&1; rc=$?; cat {report} 2>/dev/null; exit $rc"
                ),
                parser: "junit-xml",
            }
        }
        BuildSystem::Autotools => {
            let mut configure = if cx.root.join("configure").is_file() {
                "./configure".to_string()
            } else {
                "autoreconf -fi && ./configure".to_string()
            };
            for switch in project
                .missing_submodules
                .iter()
                .flat_map(|m| &m.switches)
                .filter(|s| s.starts_with("--"))
            {
                configure.push(' ');
                configure.push_str(&shell_quote(switch));
            }
            for submodule in &project.missing_submodules {
                if let Some(check) = links_bundled_copy(submodule) {
                    configure.push_str(" && ");
                    configure.push_str(&check);
                }
            }
            BuildCommands {
                name: "cpp-autotools",
                configure: vec![Step::Shell(configure)],
                build: "make -j2".to_string(),
                test: automake_as_tap("make -k check"),
                parser: "tap",
            }
        }
        BuildSystem::Make { target } => {
            let run = format!("make {target} 2>&1");
            BuildCommands {
                name: "cpp-make",
                configure: Vec::new(),
                build: "make -j2".to_string(),
                test: match project.framework {
                    Some(_) => run,
                    None => automake_as_tap(&format!("make {target}")),
                },
                parser: project.framework.unwrap_or("tap"),
            }
        }
    }
}

/// CMake's commands: configured with the tests on, the options the CI sets, the switches to the
/// system copies of missing submodules, and downloads at configure time taken from installed
/// packages first.
fn cmake_commands(cx: &PlanContext<'_>, project: &NativeProject) -> BuildCommands {
    let mut configure =
        format!("cmake -S . -B {BUILD_DIR} -DCMAKE_BUILD_TYPE=Debug -DBUILD_TESTING=ON");
    for option in &project.test_options {
        configure.push_str(&format!(" -D{}=ON", shell_quote(option)));
    }
    for (option, value) in &project.ci_options {
        configure.push_str(&format!(
            " -D{}={}",
            shell_quote(option),
            shell_quote(value)
        ));
    }
    for switch in project
        .missing_submodules
        .iter()
        .flat_map(|m| &m.switches)
        .filter(|s| s.starts_with("-D"))
    {
        configure.push(' ');
        configure.push_str(&shell_quote(switch));
    }
    if project.fetches {
        // FetchContent uses an installed package first (CMake 3.24+), so the image's
        // GoogleTest or Catch2 stand in for a download at configure time.
        configure.push_str(" -DFETCHCONTENT_TRY_FIND_PACKAGE_MODE=ALWAYS");
    }
    // `--timeout`: a test without a TIMEOUT of its own that still runs after the case timeout
    // is stopped (`***Timeout`, failed) and ctest goes on with the others.
    let timeout = match cx.case_timeout.as_secs() {
        0 => String::new(),
        seconds => format!(" --timeout {seconds}"),
    };
    BuildCommands {
        name: "cpp-cmake",
        configure: vec![Step::Shell(configure)],
        build: format!("cmake --build {BUILD_DIR} -j2"),
        // `--test-dir` is CMake 3.20's; bullseye has 3.18. A subshell keeps the eval script's
        // later commands in the checkout.
        test: format!("(cd {BUILD_DIR} && ctest --output-on-failure{timeout}) 2>&1"),
        parser: "ctest",
    }
}

/// Why this toolchain, in words: the compilers and why, the CMake minimum, the options the CI
/// sets, what stands in for missing submodules, the test framework of a plain Makefile.
fn version_reason(project: &NativeProject, suite: Suite, why: &str) -> String {
    let mut reason = format!("{}: {why}", toolchain::compilers(suite));
    if let Some(minimum) = &project.cmake_minimum {
        reason.push_str(&format!("; cmake_minimum_required {minimum}"));
    }
    if !project.ci_options.is_empty() {
        let list: Vec<String> = project
            .ci_options
            .iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect();
        reason.push_str(&format!(
            "; options as the CI sets them: {}",
            list.join(" ")
        ));
    }
    if !project.missing_submodules.is_empty() {
        let list: Vec<String> = project
            .missing_submodules
            .iter()
            .map(Submodule::describe)
            .collect();
        reason.push_str(&format!(
            "; git submodules that could not be fetched, and what stands in ({})",
            list.join(", ")
        ));
    }
    if let BuildSystem::Make { .. } = project.system {
        match project.framework {
            Some(framework) => reason.push_str(&format!("; tests use {framework}")),
            None => reason.push_str(
                "; no known test framework in the sources: automake-style PASS:/FAIL: lines are read as TAP",
            ),
        }
    }
    reason
}

/// The `-dev` packages the CI installs, when some library is `unknown` to the table: those
/// of another compiler's runtime, and the others (hints).
fn ci_hints(commands: &[crate::ci::CiCommand], unknown: &[String]) -> (Vec<String>, Vec<String>) {
    if unknown.is_empty() {
        return (Vec::new(), Vec::new());
    }
    crate::ci::apt_dev_packages(commands)
        .into_iter()
        .partition(|p| is_toolchain_runtime(p))
}

/// Whether the Debian package `name` is a compiler's own runtime or toolchain, of a version
/// (`libc++-8-dev`, `libc++abi-11-dev`, `libstdc++-9-dev`, `libomp-14-dev`, `libclang-15-dev`,
/// `llvm-14-dev`): what one entry of a CI's compiler matrix installs for its compiler, not a
/// library the project uses. Unversioned names (`libunwind-dev`, `llvm-dev`) are libraries.
fn is_toolchain_runtime(name: &str) -> bool {
    const RUNTIMES: &[&str] = &[
        "libc++-",
        "libc++abi-",
        "libstdc++-",
        "libgcc-",
        "libomp-",
        "libclang-",
        "libclang-cpp",
        "libllvm",
        "llvm-",
        "libunwind-",
        "libgfortran-",
        "gcc-",
        "g++-",
        "clang-",
    ];
    RUNTIMES.iter().any(|prefix| {
        name.strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
    })
}

/// How the dependencies were found: the Debian packages of the build files, what no package
/// maps, what the CI installs, and sources fetched at configure time.
fn resolution(project: &NativeProject, suite: Suite) -> String {
    let mut resolution = if project.packages.is_empty() {
        "no system packages needed beyond the image".to_string()
    } else {
        format!(
            "Debian {} packages from the build files: {}",
            suite.name(),
            project.packages.join(" ")
        )
    };
    if !project.unknown.is_empty() {
        resolution.push_str(&format!(
            "; not mapped to a package: {}",
            project.unknown.join(", ")
        ));
    }
    if !project.ci_packages.is_empty() {
        resolution.push_str(&format!(
            "; installed as the CI does, where the suite has them: {}",
            project.ci_packages.join(" ")
        ));
    }
    if !project.other_toolchains.is_empty() {
        resolution.push_str(&format!(
            "; left out as another toolchain's runtime (the build uses the image's GCC): {}",
            project.other_toolchains.join(" ")
        ));
    }
    if project.fetches {
        resolution.push_str("; the build fetches sources at configure time (not pinned by kiln)");
    }
    resolution
}

/// The line in the registry of C and C++ (CMake, Meson, autotools, make).
pub(crate) static ENTRY: Entry = Entry {
    name: "native",
    plan,
    rules: &[crate::repair::SYSTEM, toolchain::RULES, crate::repair::LAST],
    interpreter: Some((image, "toolchain")),
    fresh: Some(FRESH),
    rewrites: &[],
    // Their dependencies come from Debian's archive and the repository, no single index.
    package_index: None,
    leave_out: None,
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::testutil::{plan_of, tree};

    /// A library the table does not know: the `-dev` packages the CI installs stand in; with
    /// every library known, the CI's packages are not added.
    #[test]
    fn the_ci_s_dev_packages_stand_in_for_unknown_libraries() {
        let workflow = (
            ".github/workflows/ci.yml",
            "jobs:\n  build:\n    steps:\n      - run: sudo apt-get install -y libfrob-dev lcov\n",
        );
        let unknown = plan_of(
            plan,
            &[
                (
                    "CMakeLists.txt",
                    "project(x C)\nfind_package(Frobnicator REQUIRED)\n",
                ),
                workflow,
            ],
            None,
        )
        .unwrap();
        let apt = unknown.setup[1].render();
        assert!(
            apt.contains("libfrob-dev") && !apt.contains("lcov"),
            "{apt}"
        );
        assert!(
            unknown
                .resolution
                .ends_with("; installed as the CI does, where the suite has them: libfrob-dev"),
            "{}",
            unknown.resolution
        );
        let known = plan_of(
            plan,
            &[
                ("CMakeLists.txt", "project(x C)\nfind_package(ZLIB)\n"),
                workflow,
            ],
            None,
        )
        .unwrap();
        assert!(!known.setup[1].render().contains("libfrob-dev"));
    }

    /// A CI's compiler matrix names packages the suite may lack: they are hints installed
    /// tolerantly after the packages the build files need, and the runtimes of another
    /// compiler are not taken at all.
    #[test]
    fn ci_packages_are_hints_and_other_compilers_runtimes_are_left_out() {
        let workflow = (
            ".github/workflows/linux.yml",
            "jobs:\n  build:\n    strategy:\n      matrix:\n        include:\n          - cxx: clang++-8\n            install: sudo apt install clang-8 libc++-8-dev libc++abi-8-dev\n          - cxx: g++-11\n            install: sudo apt install g++-11 libfrob-dev libunwind-dev\n    steps:\n      - run: ${{matrix.install}}\n      - run: sudo apt-get install -y libc++-11-dev libc++abi-11-dev\n",
        );
        let plan = plan_of(
            plan,
            &[
                (
                    "CMakeLists.txt",
                    "project(x CXX)\nfind_package(Frobnicator REQUIRED)\nfind_package(ZLIB)\n",
                ),
                workflow,
            ],
            None,
        )
        .unwrap();
        let required = plan.setup[1].render();
        assert!(required.contains("zlib1g-dev"), "{required}");
        assert!(!required.contains("libfrob-dev"), "{required}");
        let Step::AptHints(hints) = &plan.setup[2] else {
            panic!("{:?}", plan.setup);
        };
        assert_eq!(hints, &["libfrob-dev", "libunwind-dev"], "{hints:?}");
        assert!(
            plan.resolution.contains(
                "left out as another toolchain's runtime (the build uses the image's GCC): \
                 libc++-11-dev libc++-8-dev libc++abi-11-dev libc++abi-8-dev"
            ),
            "{}",
            plan.resolution
        );
        for runtime in ["libc++-8-dev", "libstdc++-9-dev", "llvm-14-dev", "clang-15"] {
            assert!(is_toolchain_runtime(runtime), "{runtime}");
        }
        for library in ["libunwind-dev", "llvm-dev", "libfrob-dev", "libgcc-s1"] {
            assert!(!is_toolchain_runtime(library), "{library}");
        }
    }

    #[test]
    fn missing_submodules_get_stand_ins_and_the_project_is_not_its_own_dependency() {
        let tmp = tree(&[
            (
                "CMakeLists.txt",
                "project(nlohmann_json VERSION 3.11)\noption(JSON_DEVELOPER_MODE \"dev\" OFF)\noption(CATCH_DEVELOPMENT_BUILD \"tests\" OFF)\nfind_package(nlohmann_json)\nfind_package(ZLIB)\nadd_subdirectory(third_party/fmt)\n",
            ),
            (
                ".gitmodules",
                "[submodule \"fmt\"]\n\tpath = third_party/fmt\n\turl = https://github.com/fmtlib/fmt\n[submodule \"gt\"]\n\tpath = third_party/googletest\n\turl = ../googletest.git\n[submodule \"odd\"]\n\tpath = vendor/frobnicator\n\turl = x\n[submodule \"here\"]\n\tpath = vendor/present\n\turl = y\n",
            ),
            ("vendor/present/a.h", ""),
        ]);
        let project = detect(tmp.path()).expect("no project");
        assert_eq!(project.packages, ["libfmt-dev", "zlib1g-dev"]);
        let stand_ins: Vec<(&str, &submodules::StandIn)> = project
            .missing_submodules
            .iter()
            .map(|m| (m.path.as_str(), &m.stand_in))
            .collect();
        assert_eq!(
            stand_ins,
            [
                (
                    "third_party/fmt",
                    &submodules::StandIn::Package("libfmt-dev")
                ),
                ("third_party/googletest", &submodules::StandIn::Image),
                ("vendor/frobnicator", &submodules::StandIn::Nothing),
            ]
        );
        assert_eq!(
            project.test_options,
            ["CATCH_DEVELOPMENT_BUILD", "JSON_DEVELOPER_MODE"]
        );
        let plan = plan(&PlanContext {
            root: tmp.path(),
            cutoff: None,
            ca_bundle: None,
            test_files: &[],
            scope: crate::plan::TestScope::Auto,
            case_timeout: std::time::Duration::from_secs(300),
        })
        .expect("no plan");
        assert!(
            plan.version_reason.contains("(third_party/fmt: Debian libfmt-dev, third_party/googletest: the image's copy, vendor/frobnicator: no Debian package known)"),
            "{}",
            plan.version_reason
        );
    }

    #[test]
    fn cmake_packages_options_and_ctest() {
        let plan = plan_of(
            plan,
            &[
                (
                    "CMakeLists.txt",
                    "cmake_minimum_required(VERSION 3.14)\nproject(x)\noption(X_BUILD_TESTS \"tests\" OFF)\noption(X_BUILD_CUDA_TESTS \"gpu\" OFF)\noption(X_TEST_BENCHMARKS \"\" OFF)\noption(X_FUZZ_TESTS \"\" OFF)\nfind_package(ZLIB REQUIRED)\nfind_package(Threads)\nfind_package(OpenSSL 1.1 REQUIRED)\nfind_package(Frobnicate)\ninclude(FetchContent)\nFetchContent_Declare(googletest URL x)\n",
                ),
                (
                    "src/CMakeLists.txt",
                    "pkg_check_modules(DEPS REQUIRED IMPORTED_TARGET libcurl>=7 sqlite3)\n",
                ),
                (".gitmodules", "[submodule \"deps/json\"]\n\tpath = deps/json\n\turl = x\n"),
            ],
            None,
        )
        .expect("no plan");
        assert_eq!(plan.name, "cpp-cmake");
        assert_eq!(
            plan.setup[1],
            "apt-get update && apt-get install -y --no-install-recommends libcurl4-openssl-dev libsqlite3-dev libssl-dev nlohmann-json3-dev zlib1g-dev && rm -rf /var/lib/apt/lists/*"
        );
        assert_eq!(
            plan.setup[2],
            "cmake -S . -B build-kiln -DCMAKE_BUILD_TYPE=Debug -DBUILD_TESTING=ON -DX_BUILD_TESTS=ON -DFETCHCONTENT_TRY_FIND_PACKAGE_MODE=ALWAYS"
        );
        assert_eq!(plan.setup[3], "cmake --build build-kiln -j2");
        assert_eq!(plan.rebuild, [plan.setup[3].clone()]);
        assert_eq!(plan.parser, "ctest");
        assert_eq!(
            plan.test.render(),
            "(cd build-kiln && ctest --output-on-failure --timeout 300) 2>&1"
        );
        assert!(
            plan.resolution
                .contains("not mapped to a package: Frobnicate")
        );
        assert!(
            plan.version_reason
                .contains("deps/json: Debian nlohmann-json3-dev"),
            "{}",
            plan.version_reason
        );
        assert!(plan.version_reason.contains("cmake_minimum_required 3.14"));
    }

    /// Options most CMake configure lines of the CI set alike are set so; a matrix's switch,
    /// one job's check, the CI's own targets, an undeclared variable and a test option the rules
    /// turn on are left as the rules have them.
    #[test]
    fn cmake_options_the_ci_sets_alike() {
        let plan = plan_of(
            plan,
            &[
                (
                    "CMakeLists.txt",
                    "project(x)\noption(X_BUILD_TESTS \"\" OFF)\noption(X_BUILD_EXAMPLES \"\" ON)\noption(X_ENABLE_WERROR \"\" OFF)\noption(X_USE_SIMD \"\" ON)\noption(X_BUNDLE \"\" ON)\noption(X_CI \"\" OFF)\n",
                ),
                (
                    ".github/workflows/ci.yml",
                    "jobs:\n  linux:\n    steps:\n      - run: |\n          cmake -S . -B build -DX_BUILD_TESTS=OFF -DX_BUILD_EXAMPLES=OFF -DX_ENABLE_WERROR=ON -DX_USE_SIMD=${{ matrix.simd }} -DX_BUNDLE=ON -DCMAKE_CXX_COMPILER=clang++\n          cmake --build build\n      - run: cmake -B b2 -DX_BUILD_EXAMPLES:BOOL=OFF -DX_BUNDLE=OFF -DX_CI=ON\n      - run: cmake -B b3 -DX_CI=ON -DX_BUILD_EXAMPLES=OFF\n",
                ),
            ],
            None,
        )
        .expect("no plan");
        assert_eq!(
            plan.setup[1],
            "cmake -S . -B build-kiln -DCMAKE_BUILD_TYPE=Debug -DBUILD_TESTING=ON -DX_BUILD_TESTS=ON -DX_BUILD_EXAMPLES=OFF"
        );
        assert!(
            plan.version_reason
                .contains("options as the CI sets them: X_BUILD_EXAMPLES=OFF"),
            "{}",
            plan.version_reason
        );
    }

    /// The check after `configure`, run by sh on Makefiles as automake writes them: a
    /// conditional's branch not taken is commented out and does not count.
    #[test]
    fn a_build_still_linking_the_empty_submodule_stops_after_configure() {
        let submodule = Submodule {
            path: "modules/zlib".into(),
            stand_in: submodules::StandIn::Package("zlib1g-dev"),
            probe: None,
            switches: vec!["--with-system-zlib".into()],
            stub_makefile: false,
        };
        let check = links_bundled_copy(&submodule).expect("no check");
        let run = |makefile: &str| {
            let tmp = tree(&[("src/Makefile", makefile), ("Makefile", "all:\n")]);
            std::process::Command::new("sh")
                .arg("-c")
                .arg(&check)
                .current_dir(tmp.path())
                .output()
                .unwrap()
        };
        let taken =
            run("t_bound_LDADD = -lz\n#t_bound_LDADD = $(top_builddir)/modules/zlib/src/libz.la\n");
        assert!(taken.status.success(), "{taken:?}");
        let not_taken =
            run("#t_bound_LDADD = -lz\nt_bound_LDADD = $(top_builddir)/modules/zlib/src/libz.la\n");
        assert!(!not_taken.status.success());
        assert_eq!(
            String::from_utf8_lossy(&not_taken.stderr).trim(),
            "kiln: the build still links the bundled copy in modules/zlib (a git submodule that could not be fetched): configure did not take --with-system-zlib"
        );
        let nothing = Submodule {
            stand_in: submodules::StandIn::Nothing,
            ..submodule
        };
        assert_eq!(links_bundled_copy(&nothing), None);
    }

    #[test]
    fn meson_autotools_and_make() {
        let plan = plan_of(
            plan,
            &[(
                "meson.build",
                "project('x','c')\nglib = dependency('glib-2.0')\nt = dependency('threads')\n",
            )],
            None,
        )
        .expect("no plan");
        assert_eq!(plan.parser, "junit-xml");
        assert!(plan.setup[1].render().contains("libglib2.0-dev"));
        assert!(
            plan.test
                .render()
                .contains("cat build-kiln/meson-logs/testlog.junit.xml")
        );

        let plan = plan_of(
            plan_fn(),
            &[("configure.ac", "AC_INIT([x],[1])\nPKG_CHECK_MODULES([XML], [libxml-2.0 >= 2.9])\nAC_CHECK_LIB([m], [cos])\n")],
            None,
        )
        .expect("no plan");
        assert_eq!(plan.name, "cpp-autotools");
        assert!(
            plan.setup
                .contains(&Step::shell("autoreconf -fi && ./configure"))
        );
        assert!(
            plan.setup[1].render().contains("libxml2-dev"),
            "{:?}",
            plan.setup
        );
        assert_eq!(plan.parser, "tap");

        let plan = plan_of(
            plan_fn(),
            &[
                ("Makefile", "all:\n\tcc x.c\ntest: all\n\t./t\n"),
                ("t.cc", "#include <gtest/gtest.h>\n"),
            ],
            None,
        )
        .expect("no plan");
        assert_eq!(plan.test, "make test 2>&1");
        assert_eq!(plan.parser, "gtest");
        assert!(detect(tree(&[("Makefile", "all:\n\tcc x.c\n")]).path()).is_none());
    }

    #[test]
    fn automake_summaries_parse_as_tap() {
        // What the translation prints for a typical `make check`.
        let log = "| PASS: t/a\n# automake results as TAP (kiln)\nok - t/a\nnot ok - t/b\nok - t/c # SKIP\n";
        let parsed = kiln_testlog::parse("tap", log).unwrap();
        assert_eq!(parsed.statuses.len(), 3, "{:?}", parsed.statuses);
        assert_eq!(
            parsed.statuses.get("t/b"),
            Some(&kiln_schema::TestStatus::Fail)
        );
        let command = automake_as_tap("make -k check");
        assert!(command.starts_with("rm -f /tmp/kiln-check.log; make -k check >"));
        assert!(command.ends_with("exit $rc"));
    }

    fn plan_fn() -> fn(&PlanContext<'_>) -> Option<Plan> {
        plan
    }
}
