//! The demo fixtures: which files make each commit (embedded from `fixtures/` by `build.rs`),
//! and each fixture's task metadata and expected outcome.

/// One embedded fixture file.
pub(crate) struct FixtureFile {
    /// Fixture directory name (`calc`).
    pub fixture: &'static str,
    /// Commit step (`initial`, `second`, `base`, `fix`, `later`).
    pub step: &'static str,
    /// Path inside the repository.
    pub path: &'static str,
    /// File contents.
    pub contents: &'static str,
}

/// Every fixture file, sorted by fixture, step and path.
pub(crate) static FIXTURE_FILES: &[FixtureFile] =
    include!(concat!(env!("OUT_DIR"), "/fixture_files.rs"));

/// What a fixture's task should come to, before it is turned into the public `Expect`.
pub(crate) enum Outcome {
    /// Validates with exactly these lists.
    Validated,
    /// Validation rejects the instance with this failure class.
    Rejected(&'static str),
    /// Launch fails with this failure class.
    LaunchFailed(&'static str),
    /// Launch succeeds, validation cannot run to a decision, with this failure class.
    ValidateFailed(&'static str),
}

/// One fixture project and its task.
pub(crate) struct Fixture {
    /// Directory under `fixtures/`.
    pub dir: &'static str,
    /// GitHub-style owner.
    pub owner: &'static str,
    /// Repository name.
    pub name: &'static str,
    /// Pull request number (the instance id suffix).
    pub pr: u32,
    /// Number of the issue the pull request fixes (its commit message says `Fixes #<issue>`;
    /// issues and pull requests share one numbering on GitHub, so it differs from `pr`).
    pub issue: u32,
    /// Day of September 2024 of the first commit; the others follow a day apart, so fixtures
    /// do not share dates and every date is a realistic dependency cut-off.
    pub first_day: u32,
    /// Commit messages of `initial`, `second`, `base`, and the fix commit.
    pub messages: [&'static str; 4],
    /// Message of the commit on main after the merge.
    pub later_message: &'static str,
    /// The linked issue.
    pub problem_statement: &'static str,
    /// Issue comments before the fix.
    pub hints_text: &'static str,
    /// Version label of the task.
    pub version: &'static str,
    /// FAIL_TO_PASS as written to the task file (what the task's author claims).
    pub fail_to_pass: &'static [&'static str],
    /// PASS_TO_PASS as written to the task file.
    pub pass_to_pass: &'static [&'static str],
    /// What kiln should make of the task.
    pub outcome: Outcome,
}

impl Fixture {
    /// `owner/name`.
    pub fn repo(&self) -> String {
        format!("{}/{}", self.owner, self.name)
    }

    /// `owner__name-PR`.
    pub fn instance_id(&self) -> String {
        format!("{}__{}-{}", self.owner, self.name, self.pr)
    }

    /// Name of the pull request branch.
    pub fn branch(&self) -> String {
        format!("fix/issue-{}", self.pr)
    }

    /// Commit date of the `n`-th event (0 = first commit), RFC 3339.
    pub fn date(&self, n: u32) -> String {
        format!("2024-09-{:02}T10:00:00Z", self.first_day + n)
    }

    /// The files of one step, in path order.
    pub fn files(&self, step: &str) -> impl Iterator<Item = &'static FixtureFile> + use<'_> {
        let dir = self.dir;
        let step = step.to_string();
        FIXTURE_FILES
            .iter()
            .filter(move |f| f.fixture == dir && f.step == step)
    }
}

/// The demo fixtures, in instance order.
pub(crate) static FIXTURES: &[Fixture] = &[
    Fixture {
        dir: "calc",
        owner: "kiln-demo",
        name: "calc",
        pr: 2,
        issue: 1,
        first_day: 2,
        messages: [
            "Add basic arithmetic operations",
            "Add mean()",
            "Add an expression parser",
            "Fix division, empty mean and operator associativity\n\nFixes #1.",
        ],
        later_message: "Release 0.2.0",
        problem_statement: "Arithmetic results are wrong in several places\n\n\
`divide(7, 2)` returns `3`, but dividing should give the true quotient `3.5`.\n\n\
`parse(\"2 - 3 - 4\")` returns `3` instead of `-5`, and `parse(\"16 / 4 / 2\")` returns `8` \
instead of `2`: chains of `-` and `/` are evaluated right to left.\n\n\
`mean([])` raises `ZeroDivisionError`; it should raise `ValueError` like `statistics.mean`.\n",
        hints_text: "The parser recurses on the right operand of `-` and `/`, which makes them \
right-associative.\n",
        version: "0.1",
        fail_to_pass: &[
            "tests/test_ops.py::test_divide",
            "tests/test_parser.py::test_parse[16 / 4 / 2-2.0]",
            "tests/test_parser.py::test_parse[2 - 3 - 4--5]",
            "tests/test_stats.py::test_mean_empty_raises",
        ],
        pass_to_pass: &[
            "tests/test_ops.py::test_add",
            "tests/test_ops.py::test_divide_by_zero",
            "tests/test_ops.py::test_multiply",
            "tests/test_ops.py::test_subtract",
            "tests/test_parser.py::test_parse[(1 + 2) * 3-9]",
            "tests/test_parser.py::test_parse[1 + 2-3]",
            "tests/test_parser.py::test_parse[2 * 3 + 4-10]",
            "tests/test_parser.py::test_parse[8 / 2-4]",
            "tests/test_parser.py::test_parse_rejects_garbage",
            "tests/test_stats.py::test_mean",
        ],
        outcome: Outcome::Validated,
    },
    Fixture {
        dir: "textwrap2",
        owner: "kiln-demo",
        name: "textwrap2",
        pr: 3,
        issue: 2,
        first_day: 9,
        messages: [
            "Add greedy wrap()",
            "Add the attrs-based Wrapper with indentation",
            "Document Wrapper in the README",
            "Fill lines up to the width and validate it\n\nFixes #2.",
        ],
        later_message: "Release 1.1.0",
        problem_statement: "Wrapper breaks lines that exactly fit the width\n\n\
`Wrapper(width=9).wrap(\"abcd efgh ij\")` gives `[\"abcd\", \"efgh ij\"]`, but `abcd efgh` is \
9 characters and fits.\n\n\
Also, `Wrapper(width=0)` is accepted, and wrapping with it puts every word on its own line. \
A width below 1 should be rejected with a `ValueError` when the wrapper is created.\n",
        hints_text: "attrs validators can reject the width at construction time.\n",
        version: "1.0",
        fail_to_pass: &[
            "tests/test_wrapper.py::test_exact_fit",
            "tests/test_wrapper.py::test_width_must_be_positive[-3]",
            "tests/test_wrapper.py::test_width_must_be_positive[0]",
        ],
        pass_to_pass: &[
            "tests/test_wrap.py::test_wrap_long_text",
            "tests/test_wrap.py::test_wrap_short",
            "tests/test_wrapper.py::test_evolve_keeps_indent",
            "tests/test_wrapper.py::test_fill_with_indent",
        ],
        outcome: Outcome::Validated,
    },
    Fixture {
        dir: "badgold",
        owner: "kiln-demo",
        name: "badgold",
        pr: 4,
        issue: 3,
        first_day: 16,
        messages: [
            "Add slugify()",
            "Add a separator option",
            "Add a README",
            "Strip punctuation from slugs\n\nFixes #3.",
        ],
        later_message: "Release 0.3.1",
        problem_statement: "slugify keeps punctuation\n\n\
`slugify(\"Hello, World!\")` returns `\"hello,-world!\"`; slugs should only contain letters, \
digits and the separator: `\"hello-world\"`.\n",
        hints_text: "",
        version: "0.3",
        // What the task claims; the gold patch only strips commas, so the claim is false.
        fail_to_pass: &["tests/test_slugify.py::test_strips_punctuation"],
        pass_to_pass: &[
            "tests/test_slugify.py::test_collapses_whitespace",
            "tests/test_slugify.py::test_custom_separator",
            "tests/test_slugify.py::test_lowercase",
        ],
        outcome: Outcome::Rejected("no-fail-to-pass"),
    },
    Fixture {
        dir: "broken",
        owner: "kiln-demo",
        name: "broken",
        pr: 5,
        issue: 4,
        first_day: 23,
        messages: [
            "Add to_roman()",
            "Add from_roman() on top of the parsing backend",
            "Add a README",
            "Reject numbers without a Roman numeral\n\nFixes #4.",
        ],
        later_message: "Release 0.1.1",
        problem_statement: "to_roman accepts numbers it cannot represent\n\n\
`to_roman(0)` returns `\"\"` and `to_roman(4000)` returns `\"MMMM\"`. Both should raise \
`ValueError`.\n",
        hints_text: "",
        version: "0.1",
        fail_to_pass: &[
            "tests/test_roman.py::test_to_roman_out_of_range[-1]",
            "tests/test_roman.py::test_to_roman_out_of_range[0]",
            "tests/test_roman.py::test_to_roman_out_of_range[4000]",
        ],
        pass_to_pass: &["tests/test_roman.py::test_to_roman"],
        outcome: Outcome::LaunchFailed("dependency-resolution"),
    },
];

/// The fixture the rules cannot build, for the launch agent (`kiln demo --lm-url`): its tests
/// need the `xmllint` program (Debian's `libxml2-utils`, which no file of the repository names)
/// and an environment variable that only its code spells out, piece by piece.
pub(crate) static AGENT_FIXTURES: &[Fixture] = &[Fixture {
    dir: "weather",
    owner: "kiln-demo",
    name: "weather",
    pr: 6,
    issue: 5,
    first_day: 2,
    messages: [
        "Read station forecasts with xmllint",
        "Add mean_temperature() and warmest()",
        "Add a README",
        "warmest() returns the highest temperature\n\nFixes #5.",
    ],
    later_message: "Release 0.2.0",
    problem_statement: "warmest() returns the coldest day\n\n\
For the harbour forecast (12.5, 14.0 and 9.5 degrees) `warmest()` gives `9.5`; the warmest day \
is `14.0`.\n",
    hints_text: "",
    version: "0.1",
    fail_to_pass: &["tests/test_forecast.py::test_warmest"],
    pass_to_pass: &[
        "tests/test_forecast.py::test_display",
        "tests/test_forecast.py::test_mean",
        "tests/test_forecast.py::test_reads_temperatures",
    ],
    outcome: Outcome::Validated,
}];
