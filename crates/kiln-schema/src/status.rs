//! Statuses and failure classes: the closed sets of values rows store as names.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Outcome of one test in one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TestStatus {
    /// The test ran and passed (pytest's XFAIL counts as a pass: the expected failure happened).
    Pass,
    /// The test ran and an assertion failed (pytest's XPASS under `strict` counts as a failure).
    Fail,
    /// The test was collected and skipped.
    Skip,
    /// The test could not run: a fixture, setup or collection error.
    Error,
}

impl TestStatus {
    /// Lowercase name, as stored.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::Fail => "fail",
            Self::Skip => "skip",
            Self::Error => "error",
        }
    }
}

/// Per-test statuses of one run, keyed by normalised test id.
pub type TestStatuses = BTreeMap<String, TestStatus>;

/// Declares an enum stored as one of a closed set of names: `as_str`, `Display`, serde as the
/// name, `Default` (the first variant).
macro_rules! named {
    (
        $(#[doc = $doc:literal])*
        pub enum $name:ident {
            $( $(#[doc = $vdoc:literal])+ $variant:ident = $text:literal, )+
        }
    ) => {
        $(#[doc = $doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub enum $name {
            $( $(#[doc = $vdoc])+ #[serde(rename = $text)] $variant, )+
        }

        impl $name {
            /// The stored name.
            #[must_use]
            pub fn as_str(self) -> &'static str {
                match self {
                    $( Self::$variant => $text, )+
                }
            }
        }

        impl Default for $name {
            fn default() -> Self {
                [$(Self::$variant),+][0]
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

named! {
    /// Where a candidate row stands after the crawl or the ingest.
    pub enum CandidateStatus {
        /// A candidate the later stages take.
        Ok = "ok",
        /// A pull request the crawl saw and left out (`drop_reason` says why).
        Dropped = "dropped",
        /// A task file entry that could not be read (`error` says why).
        Error = "error",
    }
}

named! {
    /// Why the crawl left a pull request out.
    pub enum DropReason {
        /// It was closed without being merged.
        NotMerged = "not-merged",
        /// No issue it closes or names could be found.
        NoLinkedIssue = "no-linked-issue",
        /// Its diff is past the crawl's size bound.
        TooLarge = "too-large",
        /// It changes no test.
        NoTestChange = "no-test-change",
        /// It changes only tests (no fix to validate).
        OnlyTests = "only-tests",
        /// Its base commit cannot be fetched.
        BaseUnreachable = "base-unreachable",
        /// Its head commit cannot be fetched.
        HeadUnreachable = "head-unreachable",
        /// Its diff could not be made from the mirror.
        DiffFailed = "diff-failed",
        /// Its patches do not apply to its base commit.
        PatchDoesNotApply = "patch-does-not-apply",
    }
}

named! {
    /// How kiln's list of tests relates to a published one.
    pub enum Relation {
        /// The same tests.
        Exact = "exact",
        /// kiln's list holds every published test and more.
        Superset = "superset",
        /// The published list holds every kiln test and more.
        Subset = "subset",
        /// Some in common, some not on either side.
        Overlap = "overlap",
        /// Nothing in common.
        Disjoint = "disjoint",
    }
}

named! {
    /// How hard an instance looks from its gold patch and FAIL_TO_PASS (kiln-validate's
    /// `quality::DifficultyMeasures` gives the rules).
    pub enum Difficulty {
        /// A small fix in one place.
        Easy = "easy",
        /// Between the two.
        Medium = "medium",
        /// A large fix across functions and files, or many tests to make pass.
        Hard = "hard",
    }
}

named! {
    /// What built an environment.
    pub enum BuiltBy {
        /// The plan the repository's files chose, as planned.
        Rules = "rules",
        /// The plan with one or more repair rules applied.
        Repair = "repair",
        /// The plan with a recipe an earlier agent launch of the repository stored.
        Recipe = "recipe",
        /// The launch agent, after the rules and repairs had failed.
        Agent = "agent",
    }
}

named! {
    /// How a launch ended.
    pub enum EnvironmentStatus {
        /// No environment: `failure_class` says why.
        Failed = "failed",
        /// An environment image was built and its baseline run counts.
        Built = "built",
    }
}

named! {
    /// How a validation ended.
    pub enum ValidationStatus {
        /// The validation could not run to a decision (`failure_class` says why).
        Failed = "failed",
        /// The instance holds: FAIL_TO_PASS is not empty and nothing contradicts it.
        Validated = "validated",
        /// The runs contradict the instance (`failure_class` says how).
        Rejected = "rejected",
    }
}

/// Why a repository or instance did not make it through a stage. Stored as its kebab-case name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureClass {
    /// The task row itself is malformed (bad JSON, missing field).
    InvalidInput,
    /// The repository could not be cloned or the base commit is missing.
    Clone,
    /// No build plan matched the repository's files.
    UnsupportedProject,
    /// A dependency could not be resolved or downloaded.
    DependencyResolution,
    /// Installing or compiling the project failed.
    Build,
    /// The test command could not run or produced no parseable statuses.
    TestRun,
    /// The test run produced too few passing tests to count as a working environment.
    TestsFailing,
    /// A command ran past its timeout.
    Timeout,
    /// A command was killed for exceeding the memory limit.
    Oom,
    /// A container wrote past its disk bound (`[docker] disk`) and was stopped.
    Disk,
    /// The test or gold patch applied nowhere.
    PatchApply,
    /// The test run found no tests.
    NoTests,
    /// Flaky tests left nothing to validate.
    Flaky,
    /// The gold patch did not make any test go from failing to passing.
    NoFailToPass,
    /// A test passed before the gold patch and fails after it.
    PassToFail,
    /// A run's exit code contradicts its parsed statuses.
    InvalidRun,
    /// Docker, disk or other infrastructure failed for this item.
    Infra,
    /// The launch agent ran out of its steps, tokens, dollars or time before the build worked.
    AgentBudget,
    /// The gold patch edits the tests that judge it: a file the test patch edits, a test file,
    /// or a test runner's configuration.
    GoldEditsTests,
    /// The gold patch changes no code: only comments, blank lines or documentation.
    GoldWithoutCode,
    /// The environment (setup, the launch agent, a recipe, a rebuild command) changed what
    /// judges the tests: it added test configuration to the checkout, changed a test file, a
    /// test configuration or a test setting, or configured the interpreter the tests run in.
    EnvironmentEditsTests,
    /// The environment changed or deleted a tracked file of the checkout that its plan does not
    /// declare (a lockfile its package manager rewrites): the tests must see the commit as it is.
    EnvironmentEditsCheckout,
    /// The runs with the gold patch reported too few of the tests the test patch's files
    /// define (`[stages.validate] min_collected`): the environment lost tests it should run.
    TestsNotCollected,
}

impl FailureClass {
    /// The stored kebab-case name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidInput => "invalid-input",
            Self::Clone => "clone",
            Self::UnsupportedProject => "unsupported-project",
            Self::DependencyResolution => "dependency-resolution",
            Self::Build => "build",
            Self::TestRun => "test-run",
            Self::TestsFailing => "tests-failing",
            Self::Timeout => "timeout",
            Self::Oom => "oom",
            Self::Disk => "disk",
            Self::PatchApply => "patch-apply",
            Self::NoTests => "no-tests",
            Self::Flaky => "flaky",
            Self::NoFailToPass => "no-fail-to-pass",
            Self::PassToFail => "pass-to-fail",
            Self::InvalidRun => "invalid-run",
            Self::Infra => "infra",
            Self::AgentBudget => "agent-budget",
            Self::GoldEditsTests => "gold-edits-tests",
            Self::GoldWithoutCode => "gold-without-code",
            Self::EnvironmentEditsTests => "environment-edits-tests",
            Self::EnvironmentEditsCheckout => "environment-edits-checkout",
            Self::TestsNotCollected => "tests-not-collected",
        }
    }
}

impl std::fmt::Display for FailureClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_class_names_match_serde() {
        for class in [
            FailureClass::InvalidInput,
            FailureClass::DependencyResolution,
            FailureClass::PassToFail,
            FailureClass::Oom,
            FailureClass::Disk,
        ] {
            let json = serde_json::to_value(class).unwrap_or_default();
            assert_eq!(json, serde_json::json!(class.as_str()));
        }
        for band in [Difficulty::Easy, Difficulty::Medium, Difficulty::Hard] {
            let json = serde_json::to_value(band).unwrap_or_default();
            assert_eq!(json, serde_json::json!(band.as_str()));
        }
    }
}
