//! Repair rules: known failure signatures of setup steps and test runs, each mapped to a
//! deterministic repair that is tried once before the launch is declared failed.
//!
//! This module is the engine and the rules every ecosystem shares (system packages, tools, an
//! optional step); each ecosystem folder keeps its own rules, and the registry
//! (`ecosystems`) says which rules apply to a plan, in which order. A rule names the phase it
//! applies to, the kind of step it repairs and a regular expression over the end of the
//! failure's output. Its repair is data: an environment variable for the rest of the launch
//! (and the image), steps to run before the failing one is tried again, steps in its place,
//! another test command, another interpreter. Repairs change typed steps, never command text.
//! Every repair used is recorded in the environment row (`repairs`); `kiln repairs` lists the
//! table.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use regex::Regex;

use crate::debian::Suite;
use crate::plan::{CargoScope, RepairContext};
use crate::shell;
use crate::steps::{PipPurpose, Step, TestCommand};

/// When in a launch a rule applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// A setup step failed.
    Setup,
    /// The baseline test run did not count as a working build.
    Tests,
}

impl Phase {
    /// `setup` or `tests`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Setup => "setup",
            Self::Tests => "tests",
        }
    }
}

/// The kind of step a rule repairs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Any step (or the test command, for a rule of the tests phase).
    Any,
    /// A Python install (`uv pip install`).
    Pip,
    /// The install of a Python project's test requirements.
    TestRequirements,
    /// A Node project's dependency install.
    NodeInstall,
}

impl Target {
    /// What a listing says about the target, `None` for any.
    #[must_use]
    pub fn describe(self) -> Option<&'static str> {
        match self {
            Self::Any => None,
            Self::Pip => Some("a Python install (uv pip install)"),
            Self::TestRequirements => Some("the install of the test requirements"),
            Self::NodeInstall => Some("the Node dependency install"),
        }
    }

    fn matches(self, failing: Failing<'_>) -> bool {
        match (self, failing) {
            (Self::Any, _) => true,
            (Self::Pip, Failing::Step(Step::Pip(_))) => true,
            (Self::TestRequirements, Failing::Step(Step::Pip(install))) => {
                install.purpose == PipPurpose::TestRequirements
            }
            (Self::NodeInstall, Failing::Step(Step::Node(_))) => true,
            _ => false,
        }
    }
}

/// What a repair does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Repair {
    /// Sets an environment variable for every later command and in the image.
    Env(String, String),
    /// Runs these steps, then the failing one again.
    Before(Vec<Step>),
    /// Runs these steps in place of the failing one.
    Replace(Vec<Step>),
    /// Runs `steps` in place of the failing one, and `rebuild` after every source change (a
    /// non-editable install must be reinstalled when a patch changes the sources).
    ReplaceWithRebuild {
        /// The steps that replace the failing one.
        steps: Vec<Step>,
        /// Steps to add to the rebuild steps.
        rebuild: Vec<Step>,
    },
    /// Runs the tests with this command from now on.
    Tests(TestCommand),
    /// Starts the launch over on another Debian suite's interpreter.
    Interpreter(Suite),
    /// Goes on without the failing step (one the tests may not need), which also leaves the
    /// rebuild steps.
    Skip(Step),
    /// Runs this step, which resolves without the dependency cut-off, in place of the failing
    /// one; the row's cut-off is cleared.
    DropCutoff(Step),
    /// Runs `step` in place of the failing one, wherever that one is a rebuild step too, and the
    /// tests with `test`: the compile step and the test command select other packages or
    /// features together.
    Retarget {
        /// The step that replaces the failing one.
        step: Step,
        /// The test command from now on.
        test: TestCommand,
        /// What the commands select now (the row's `test_scope`), when that changes.
        scope: Option<String>,
        /// What later rules see of the Cargo commands (`RepairContext::cargo`).
        cargo: CargoScope,
    },
}

/// What failed.
#[derive(Debug, Clone, Copy)]
pub enum Failing<'a> {
    /// A setup step.
    Step(&'a Step),
    /// The baseline test run.
    Tests(&'a TestCommand),
}

/// A failure the rules look at.
#[derive(Debug, Clone, Copy)]
pub struct Failed<'a> {
    /// The step or test command that failed.
    pub failing: Failing<'a>,
    /// Its output (the end is what the signatures are matched against).
    pub output: &'a str,
}

impl Failed<'_> {
    /// The phase of the failure.
    #[must_use]
    pub fn phase(&self) -> Phase {
        match self.failing {
            Failing::Step(_) => Phase::Setup,
            Failing::Tests(_) => Phase::Tests,
        }
    }

    /// The failing step, in the setup phase.
    #[must_use]
    pub fn step(&self) -> Option<&Step> {
        match self.failing {
            Failing::Step(step) => Some(step),
            Failing::Tests(_) => None,
        }
    }
}

/// One rule.
pub struct Rule {
    /// Stable name (what the row records and `kiln repairs` lists).
    pub name: &'static str,
    /// Setup or tests.
    pub phase: Phase,
    /// The kind of step it repairs.
    pub target: Target,
    /// The signature, over the last [`TAIL_BYTES`] of the output.
    pub signature: &'static str,
    /// What it means and what the repair does, in a sentence.
    pub description: &'static str,
    /// The repair for a matching failure; `None` when this failure cannot use it after all.
    pub repair: fn(&Failed<'_>, &regex::Captures<'_>, &RepairContext) -> Option<Repair>,
}

/// How much of the end of a failing command's output the signatures see.
pub const TAIL_BYTES: usize = 64 * 1024;

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
fn apt_file_install(pattern: &str, what: &str) -> Step {
    Step::Shell(format!(
        "apt-get update -qq && apt-get install -y -qq --no-install-recommends apt-file >/dev/null && apt-file update >/dev/null && pkg=$(apt-file search -x {} | cut -d: -f1 | grep -- '-dev$' | head -1) && test -n \"$pkg\" && echo \"[kiln] {what} is in the Debian package $pkg\" && apt-get install -y --no-install-recommends \"$pkg\" && rm -rf /var/lib/apt/lists/*",
        shell::quote(pattern)
    ))
}

/// An apt step for `packages`, run before the failing step.
fn apt(packages: &[&str]) -> Repair {
    Repair::Before(Step::apt(packages).into_iter().collect())
}

/// Rules for what a build finds missing on the system, whatever the ecosystem: tools and
/// `-dev` packages.
pub static SYSTEM: &[Rule] = &[
    Rule {
        name: "pkg-config",
        phase: Phase::Setup,
        target: Target::Any,
        signature: r"(?i)pkg-config: (command )?not found|could not find pkg-config|pkg-config (tool|executable|binary) .*(not found|could not be found)|the pkg-config script could not be found|Did not find pkg-config",
        description: "the build runs pkg-config, which the image lacks: Debian's pkg-config is installed",
        repair: |_, _, _| Some(apt(&["pkg-config"])),
    },
    Rule {
        name: "missing-header",
        phase: Phase::Setup,
        target: Target::Any,
        signature: r"fatal error: ([A-Za-z0-9_./+-]+\.h(?:pp)?): No such file or directory",
        description: "a C header is missing: the Debian -dev package that ships it (Debian's Contents index, through apt-file) is installed",
        repair: package_for_header,
    },
    Rule {
        name: "missing-library",
        phase: Phase::Setup,
        target: Target::Any,
        signature: r"/usr/bin/ld: cannot find -l([A-Za-z0-9_.+-]+)",
        description: "the linker cannot find a system library: its Debian -dev package (Debian's Contents index, through apt-file) is installed",
        repair: package_for_library,
    },
    Rule {
        name: "cmake",
        phase: Phase::Setup,
        target: Target::Any,
        signature: r"(?i)cmake: (command )?not found|is `cmake` not installed|failed to execute command: No such file or directory \(os error 2\)\s*is `cmake`|CMake must be installed",
        description: "the build runs cmake (a -sys crate, a CMake extension), which the image lacks: Debian's cmake is installed",
        repair: |_, _, _| Some(apt(&["cmake"])),
    },
];

/// The rule tried after every more specific repair of a step.
pub static LAST: &[Rule] = &[Rule {
    name: "optional-step",
    phase: Phase::Setup,
    target: Target::Any,
    signature: r"([^\n]*\S[^\n]*)\s*\z",
    description: "a step the tests may not need (the package's own build script) failed: the launch goes on without it, drops it from the rebuild commands, and lets the baseline test run decide",
    repair: |f, _, cx| {
        let step = f.step()?;
        cx.optional
            .contains(step)
            .then(|| Repair::Skip(step.clone()))
    },
}];

/// Compiled signatures, by signature text (`None` for one that does not compile, which the
/// registry's tests rule out).
static COMPILED: LazyLock<Mutex<HashMap<&'static str, Option<Regex>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// The compiled signature of `rule`.
fn compiled(rule: &Rule) -> Option<Regex> {
    let mut cache = COMPILED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    cache
        .entry(rule.signature)
        .or_insert_with(|| Regex::new(rule.signature).ok())
        .clone()
}

/// Whether `rule`'s signature compiles.
#[cfg(test)]
pub fn compiles(rule: &Rule) -> bool {
    compiled(rule).is_some()
}

/// The end of `output` the signatures see.
pub(crate) fn tail(output: &str) -> &str {
    if output.len() <= TAIL_BYTES {
        return output;
    }
    let mut start = output.len() - TAIL_BYTES;
    while !output.is_char_boundary(start) {
        start += 1;
    }
    &output[start..]
}

/// The first of `rules` not in `tried` that matches the failure, its repair, and the output
/// line that matched.
#[must_use]
pub fn find(
    failed: &Failed<'_>,
    cx: &RepairContext,
    rules: &[&'static Rule],
    tried: &[&str],
) -> Option<(&'static Rule, Repair, String)> {
    let text = tail(failed.output);
    for rule in rules {
        if rule.phase != failed.phase()
            || tried.contains(&rule.name)
            || !rule.target.matches(failed.failing)
        {
            continue;
        }
        let Some(regex) = compiled(rule) else {
            continue;
        };
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
        Repair::DropCutoff(step) => {
            format!("dropped the dependency cut-off: `{}`", step.render())
        }
        Repair::Skip(step) => {
            format!(
                "`{}` failed; went on without it, the baseline test run decides",
                step.render()
            )
        }
        Repair::Retarget { step, .. } => {
            format!("compiled and tested as `{}`", step.render())
        }
        Repair::Before(_)
        | Repair::Replace(_)
        | Repair::ReplaceWithRebuild { .. }
        | Repair::Tests(_) => {
            let mut what = rule
                .description
                .split(": ")
                .nth(1)
                .unwrap_or(rule.description)
                .to_string();
            if let Repair::ReplaceWithRebuild { rebuild, .. } = repair {
                let rebuild: Vec<String> = rebuild.iter().map(Step::render).collect();
                what.push_str(&format!(" (rebuild: `{}`)", rebuild.join(" && ")));
            }
            what
        }
        Repair::Interpreter(suite) => format!("started over on Debian {}'s Python", suite.name()),
    };
    let matched: String = matched.chars().take(200).collect();
    format!("{}: {what} (after: {matched})", rule.name)
}

#[cfg(test)]
pub(crate) mod testutil {
    //! A failure and a context for the rule tests of every ecosystem.

    use super::{Failed, Failing, Repair, Rule, find};
    use crate::debian::Suite;
    use crate::plan::RepairContext;
    use crate::steps::{PipInstall, Step, TestCommand};

    /// A context with something in every field.
    pub(crate) fn cx() -> RepairContext {
        RepairContext {
            suite: Some(Suite::Bookworm),
            build_requires: vec![
                "setuptools~=62.0".into(),
                "setuptools_scm[toml]>=6.2".into(),
                "cython==0.29.22".into(),
            ],
            pip: Some(PipInstall {
                no_cache: false,
                ..PipInstall::new(None)
            }),
            optional: vec![Step::shell("npm run build")],
            node_major: 18,
            cargo: None,
        }
    }

    /// The rule of `rules` that repairs a failed step, and its repair.
    pub(crate) fn step_repair(
        rules: &[&'static Rule],
        step: &Step,
        output: &str,
    ) -> Option<(&'static str, Repair)> {
        step_repair_in(rules, step, output, &cx())
    }

    /// [`step_repair`] for a plan whose repair context is `context`.
    pub(crate) fn step_repair_in(
        rules: &[&'static Rule],
        step: &Step,
        output: &str,
        context: &RepairContext,
    ) -> Option<(&'static str, Repair)> {
        let failed = Failed {
            failing: Failing::Step(step),
            output,
        };
        find(&failed, context, rules, &[]).map(|(rule, repair, _)| (rule.name, repair))
    }

    /// The rule of `rules` that repairs a failed test run, and its repair.
    pub(crate) fn test_repair(
        rules: &[&'static Rule],
        command: &TestCommand,
        output: &str,
    ) -> Option<(&'static str, Repair)> {
        let failed = Failed {
            failing: Failing::Tests(command),
            output,
        };
        find(&failed, &cx(), rules, &[]).map(|(rule, repair, _)| (rule.name, repair))
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::step_repair;
    use super::*;

    fn system() -> Vec<&'static Rule> {
        SYSTEM.iter().chain(LAST).collect()
    }

    #[test]
    fn every_signature_compiles() {
        for rule in system() {
            assert!(compiles(rule), "{} does not compile", rule.name);
        }
    }

    #[test]
    fn headers_libraries_and_tools() {
        let make = Step::shell("make");
        let (name, repair) = step_repair(
            &system(),
            &make,
            "src/x.c:3:10: fatal error: libxml/parser.h: No such file or directory",
        )
        .expect("no rule");
        assert_eq!(name, "missing-header");
        let Repair::Before(steps) = repair else {
            panic!("{repair:?}")
        };
        assert!(
            steps[0]
                .render()
                .contains("apt-file search -x '/usr/include/(.*/)?libxml/parser\\.h$'"),
            "{}",
            steps[0].render()
        );
        let (name, _) = step_repair(
            &system(),
            &make,
            "/usr/bin/ld: cannot find -lssl: No such file",
        )
        .expect("no rule");
        assert_eq!(name, "missing-library");
        let pip = Step::shell("pip");
        let (name, repair) = step_repair(
            &system(),
            &pip,
            "./configure: line 12: pkg-config: command not found",
        )
        .expect("no rule");
        assert_eq!(name, "pkg-config");
        assert!(matches!(repair, Repair::Before(s) if s[0].render().contains("pkg-config")));
        let cargo = Step::shell("cargo test");
        assert!(step_repair(&system(), &cargo, "thread 'main' panicked").is_none());
    }

    #[test]
    fn an_optional_step_is_skipped_and_described() {
        let build = Step::shell("npm run build");
        let output = "> webpack\nError: something\n    at new Hash\n\n";
        let failed = Failed {
            failing: Failing::Step(&build),
            output,
        };
        let (rule, repair, matched) =
            find(&failed, &testutil::cx(), &system(), &[]).expect("no rule");
        assert_eq!(
            (rule.name, &repair, matched.as_str()),
            (
                "optional-step",
                &Repair::Skip(Step::shell("npm run build")),
                "at new Hash"
            )
        );
        assert_eq!(
            describe(rule, &repair, &matched),
            "optional-step: `npm run build` failed; went on without it, the baseline test run decides (after: at new Hash)"
        );
        // A step the plan needs is never skipped.
        let install = Step::shell("npm ci");
        assert!(step_repair(&system(), &install, output).is_none());
    }
}
