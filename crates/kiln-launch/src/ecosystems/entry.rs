//! What kiln knows of one ecosystem, in one value: its registry entry. Each ecosystem's folder
//! defines its `ENTRY`; nothing outside the folder and the registry knows one ecosystem from
//! another.

use kiln_core::ImageBuild;

use crate::debian::Suite;
use crate::plan::{Plan, PlanContext};
use crate::repair::Rule;
use crate::steps::{FreshInstall, TestCommand};

/// The test command without `tests` (ids as the parser named by `parser` reads them, among
/// `reported`, every id the run reported), and the ids it leaves out, when the command's runner
/// has a way to leave (some of) them out exactly; `None` otherwise.
pub(crate) type LeaveOut =
    fn(&TestCommand, &str, &[String], &[&str]) -> Option<(TestCommand, Vec<String>)>;

/// The image of a Debian suite's interpreter, with a CA bundle.
pub(crate) type InterpreterImage = fn(Suite, Option<&[u8]>) -> ImageBuild;

/// One line of the registry: everything launch asks of an ecosystem.
pub(crate) struct Entry {
    /// Its name, as `kiln repairs` shows it (`python`, `rust`, ...).
    pub(crate) name: &'static str,
    /// The plan, when the repository is of this ecosystem.
    pub(crate) plan: fn(&PlanContext<'_>) -> Option<Plan>,
    /// The rule tables that apply to its plans, in the order they are tried.
    pub(crate) rules: &'static [&'static [Rule]],
    /// The image of another Debian suite's interpreter, for repairs that start over on it, and
    /// what it holds in words (`Python`, `toolchain`).
    pub(crate) interpreter: Option<(InterpreterImage, &'static str)>,
    /// What to clear in a reused environment before its installs run again, if anything.
    pub(crate) fresh: Option<FreshInstall>,
    /// Tracked files (by name) its package managers rewrite during setup: lockfiles. A changed
    /// tracked file is otherwise the launch's failure (`crate::environment`).
    pub(crate) rewrites: &'static [&'static str],
    /// The shell expression of the package index its installers read, honouring the
    /// container's own settings (`PIP_INDEX_URL`, npm's `registry`, `GOPROXY`); asked after a
    /// dependency failure (`crate::package_index`). `None` when its dependencies come from no
    /// single index (C and C++).
    pub(crate) package_index: Option<&'static str>,
    /// How its test commands leave tests out, if they can: tests that failed for want of a
    /// network in the baseline cost every validation run their timeouts otherwise.
    pub(crate) leave_out: Option<LeaveOut>,
}

/// An ecosystem kiln has a planner for: a handle on its registry entry.
#[derive(Clone, Copy)]
pub struct Ecosystem(pub(crate) &'static Entry);

impl Ecosystem {
    /// The name `kiln repairs` shows (`python`, `rust`, `node`, `go`, `native`, `java`).
    #[must_use]
    pub fn name(self) -> &'static str {
        self.0.name
    }

    pub(crate) fn entry(self) -> &'static Entry {
        self.0
    }
}

impl PartialEq for Ecosystem {
    fn eq(&self, other: &Self) -> bool {
        self.0.name == other.0.name
    }
}

impl Eq for Ecosystem {}

impl std::fmt::Debug for Ecosystem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.name)
    }
}
