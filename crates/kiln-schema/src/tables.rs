//! The six tables of the pipeline, one per stage kind.

use std::collections::BTreeMap;

use crate::columns::table;
use crate::id::InstanceId;
use crate::status::{
    BuiltBy, CandidateStatus, Difficulty, DropReason, EnvironmentStatus, FailureClass, Relation,
    TestStatus, ValidationStatus,
};
use crate::test_list::TestList;

table! {
    /// A task candidate: a merged pull request with its linked issue, from a crawl or a task file.
    pub struct Candidate in "candidate" {
        /// `owner__repo-PR`, unique within a run.
        pub instance_id: InstanceId,
        /// Row status: `ok`; `error` when the source line could not be read (see `error`);
        /// `dropped` for a crawled pull request that is not a task candidate (see `drop_reason`).
        pub status: CandidateStatus,
        /// For `error` rows: what was wrong, with the source file and line.
        pub error: Option<String>,
        /// `owner/name` of the GitHub repository.
        pub repo: String,
        /// Pull request number, when known.
        pub pull_number: Option<i64>,
        /// Commit the task starts from (the PR's base SHA).
        pub base_commit: String,
        /// The gold patch: the PR's diff of non-test files.
        pub patch: String,
        /// The PR's diff of test files.
        pub test_patch: String,
        /// Title and body of the linked issues.
        pub problem_statement: String,
        /// Issue comments written before the PR's first commit.
        pub hints_text: String,
        /// Creation time of the PR (RFC 3339), used as the dependency cut-off date.
        pub created_at: String,
        /// Project version label, when the source gives one.
        pub version: Option<String>,
        /// Main language of the repository, when the source gives one.
        pub language: Option<String>,
        /// FAIL_TO_PASS as given by the source (empty for crawled candidates), kept for comparison.
        pub given_fail_to_pass: Vec<String>,
        /// PASS_TO_PASS as given by the source (empty for crawled candidates).
        pub given_pass_to_pass: Vec<String>,
        /// Numbers of the issues the pull request resolves (SWE-bench-Live's `issue_numbers`).
        pub issue_numbers: Vec<String>,
        /// How each linked issue (by number) was linked: `closing-reference` (GitHub's own
        /// resolution), `keyword` (a closing keyword in the pull request body), or
        /// `closing-reference+keyword`.
        pub issue_links: BTreeMap<String, String>,
        /// Head commit of the pull request, when crawled.
        pub head_commit: Option<String>,
        /// Merge commit of the pull request, when crawled.
        pub merge_commit: Option<String>,
        /// Merge time (RFC 3339), when crawled.
        pub merged_at: Option<String>,
        /// For `dropped` rows: why (`no-linked-issue`, `no-test-change`, `only-tests`,
        /// `too-large`, `not-merged`, `base-unreachable`, `head-unreachable`,
        /// `patch-does-not-apply`, `diff-failed`).
        pub drop_reason: Option<DropReason>,
        /// Where the row came from: `file:line` of a task file, or the GitHub API.
        pub origin: String,
    }
}

table! {
    /// The filter's verdict on one candidate.
    pub struct Verdict in "verdict" {
        /// The candidate's id.
        pub instance_id: InstanceId,
        /// Whether the candidate goes on to the next stages.
        pub keep: bool,
        /// Short label of the verdict: `ok`; the LM judge's `vague`, `unstated-requirements`,
        /// `solution-leak`; the heuristic judge's `invalid`, `no-test-patch`, `no-gold-patch`,
        /// `patch-too-large`, `empty-issue`, `link-only`, `vague`, `solution-in-issue`,
        /// `feature-request`, `question`; `flagged` when a `drop_flags` flag dropped it.
        pub label: String,
        /// Why, in a sentence.
        pub reason: String,
        /// The judge: `heuristic`, or the model names of an LM judge joined by `+`.
        pub judge: String,
        /// LM prompt tokens of the answers behind this verdict (usable or not, replayed or asked).
        pub prompt_tokens: Option<i64>,
        /// LM completion tokens of the answers behind this verdict.
        pub completion_tokens: Option<i64>,
        /// US dollars those tokens cost at the config's prices (null when no price is known).
        pub cost_usd: Option<f64>,
        /// Confounder flags the LM judge raised (by majority of the usable votes).
        pub flags: Vec<String>,
        /// Each vote in order: `<model>: <label>`, or `<model>: unusable: <why>`.
        pub votes: Vec<String>,
        /// The raw text of each vote's answer, in vote order (empty where none came).
        pub raw_answers: Vec<String>,
        /// Replay keys of the stored answers (`<run>/lm/answers/<key>.json`), in vote order.
        pub answer_keys: Vec<String>,
        /// Why the heuristic judge decided although the LM judge was configured (no usable
        /// answer, budget reached); null when the LM decided or was not configured.
        pub fallback: Option<String>,
    }
}

table! {
    /// The operating system a candidate needs.
    pub struct PlatformLabel in "platform_label" {
        /// The candidate's id.
        pub instance_id: InstanceId,
        /// `linux`, `windows` or `macos`.
        pub platform: String,
        /// The keywords found (`problem statement: win32`, `patch: msvc`).
        pub evidence: Vec<String>,
        /// `keyword` or the model name of an LM.
        pub labeller: String,
        /// What the keywords say: `none` (no platform words), `clear` (the problem statement
        /// and the patch name the same one platform) or `mixed` (the LM is asked, if configured).
        pub keyword_evidence: String,
        /// The LM's reason, when an LM labelled.
        pub reason: Option<String>,
        /// The raw text of the LM's answer, when one came.
        pub raw_answer: Option<String>,
        /// Replay keys of the stored answers (`<run>/lm/answers/<key>.json`).
        pub answer_keys: Vec<String>,
        /// Why the keyword label stands although the LM split was configured and asked.
        pub fallback: Option<String>,
        /// LM prompt tokens of the answer behind this label.
        pub prompt_tokens: Option<i64>,
        /// LM completion tokens of the answer behind this label.
        pub completion_tokens: Option<i64>,
        /// US dollars those tokens cost at the config's prices.
        pub cost_usd: Option<f64>,
    }
}

table! {
    /// An executable environment built for one candidate at its base commit, or why none was built.
    pub struct EnvironmentRecord in "environment" {
        /// The candidate's id.
        pub instance_id: InstanceId,
        /// `owner/name`.
        pub repo: String,
        /// The commit the environment holds.
        pub base_commit: String,
        /// `built` or `failed`.
        pub status: EnvironmentStatus,
        /// When `failed`: the failure class (`dependency-resolution`, `build`, `timeout`, ...).
        pub failure_class: Option<FailureClass>,
        /// When `failed`: the command that decided the failure.
        pub failure_command: Option<String>,
        /// When `failed`: the last lines of that command's output.
        pub log_tail: Option<String>,
        /// When `failed`: the lines of that command's output that name the error (a compiler's
        /// `error:`, `make: ***`, `npm ERR!`, `error[E…]`, a Python exception), wherever they
        /// stood: a parallel build's progress can push them out of the tail.
        pub error_lines: Vec<String>,
        /// Detected ecosystem (`python`, ...).
        pub language: String,
        /// The repository's own version at the base commit, `major.minor`: the one its
        /// manifest declares (`pyproject.toml`, `setup.cfg`, `setup.py`, `Cargo.toml`,
        /// `package.json`, `pom.xml`), else its newest tag no newer than the commit.
        pub project_version: Option<String>,
        /// The repository's licence at the base commit, an SPDX id: its manifest's when that is
        /// one, else its licence file's as recognised, else `NOASSERTION`.
        pub license: String,
        /// Name of the plan that built it (`python-pyproject`, ...).
        pub plan: String,
        /// The base image the container started from.
        pub base_image: String,
        /// Tag of the committed environment image (null when failed).
        pub image: Option<String>,
        /// The engine's id of that image as launch committed it (`sha256:…`): validation runs
        /// this image, whatever the tag points at by then (null when failed, or for rows of a
        /// kiln that did not record it).
        pub image_digest: Option<String>,
        /// The instance whose environment this launch started from (`reuse = true`: its image,
        /// the checkout replaced by this base commit's, the setup steps run again); null for a
        /// cold launch.
        pub reused_from: Option<String>,
        /// With `verify_reuse`: `same` when a cold launch of the instance gave the same baseline
        /// statuses as the reused one, else `differs: ` and the tests whose status differs
        /// (`id: reused → cold`), then both launch times in parentheses; null when not checked.
        pub reuse_check: Option<String>,
        /// The untracked files the environment left in the checkout (a directory holding only
        /// such files as `dir/`: `node_modules/`, `target/`), for a reviewer to see what the
        /// tests run beside; at most 200, then a count. Every tracked file is as the commit has
        /// it, but for lockfiles the plan's package manager rewrites.
        pub environment_files: Vec<String>,
        /// Setup commands that ran and succeeded, in order (a failing one is `failure_command`).
        pub setup_commands: Vec<String>,
        /// Repair rules applied, in order: the rule's name, what it did and the output line
        /// that triggered it (`kiln repairs` lists the rules).
        pub repairs: Vec<String>,
        /// Environment variables a repair set; the image carries them.
        pub environment: BTreeMap<String, String>,
        /// Commands to re-run after the source changes (before running tests).
        pub rebuild_commands: Vec<String>,
        /// The test command, run from the repository root.
        pub test_command: String,
        /// Which tests the test command runs: `all`, or the test files the instance's test
        /// patch touches and why (`touched: 2 of 812 test modules (more than 300)`).
        pub test_scope: String,
        /// Tests that failed for want of a network in the baseline (the parser's reading of
        /// the error), which the test command then leaves out, so that no validation run waits
        /// on them again; they are in neither list. A failed mocha hook leaves out the suite it
        /// guards. Empty when the runner has no way to leave tests out.
        pub tests_left_out: Vec<String>,
        /// When `test_scope` narrowed the tests: the command that runs the whole suite (with
        /// what the test command runs before it), which validation runs on a sample of its
        /// rows (`[stages.validate] full_suite_every`); null when the command runs the whole
        /// suite, or a repair changed the test command.
        pub whole_test_command: Option<String>,
        /// The command that lists the tests of the files given after it, one id a line as
        /// `parser` names them (`pytest --collect-only -q`), with what the test command runs
        /// before it; validation counts the tests the test patch's files define with it
        /// (`tests_defined`). Null where the runner has no such listing.
        pub collect_command: Option<String>,
        /// Name of the test-log parser that reads the test command's output.
        pub parser: String,
        /// When `parser` is `status-lines`: the `sh` script, written by the launch agent, that
        /// reads the test command's output on its standard input and prints one `[PASSED] id`
        /// (`[FAILED]`, `[SKIPPED]`, `[ERROR]`) line per test. It runs in a fresh container
        /// from the image, never in the one the tests ran in.
        pub parser_script: Option<String>,
        /// Dependency cut-off used for unpinned dependencies (RFC 3339), if any.
        pub dependency_cutoff: Option<String>,
        /// Why this interpreter/toolchain version was chosen.
        pub version_reason: String,
        /// Per-test statuses of the baseline test run at the base commit.
        pub baseline: BTreeMap<String, TestStatus>,
        /// Number of baseline tests that passed.
        pub baseline_passed: i64,
        /// Number of baseline tests that did not pass (fail, error).
        pub baseline_failed: i64,
        /// Seconds spent in setup commands.
        pub setup_seconds: f64,
        /// Seconds spent in the baseline test run.
        pub test_seconds: f64,
        /// Wall seconds for the whole launch of this instance, the Dockerfile check included (the
        /// time the CLI prints for the item).
        pub total_seconds: f64,
        /// CPU seconds the launch's containers spent in setup steps other than compiling
        /// (packages, dependencies, the agent's commands), from the engine's accounting.
        pub cpu_setup_seconds: f64,
        /// CPU seconds the launch's containers spent in the plan's compile steps.
        pub cpu_compile_seconds: f64,
        /// CPU seconds of the baseline test run (its parser script included).
        pub cpu_baseline_seconds: f64,
        /// A Dockerfile replaying the successful commands (build context: the checkout in `testbed/`).
        pub dockerfile: Option<String>,
        /// Result of rebuilding the Dockerfile and re-running the tests (`rebuilt and passed`,
        /// `rebuild failed: ...`), or null when the check is off.
        pub dockerfile_check: Option<String>,
        /// When built: `rules` (the plan as planned), `repair` (repair rules applied), `recipe`
        /// (a recipe an earlier agent launch of the repository stored) or `agent`.
        pub built_by: Option<BuiltBy>,
        /// Turns the launch agent took (0 when it did not run).
        pub agent_steps: i64,
        /// Tokens (prompt and completion) the launch agent's requests used, replayed ones
        /// included.
        pub agent_tokens: i64,
        /// Dollars the launch agent's requests cost when they were asked (0 when replayed or
        /// unpriced).
        pub agent_cost_usd: f64,
        /// Where the raw logs of this launch are, relative to the run directory (the agent's
        /// trajectory is `agent.jsonl` there).
        pub log_dir: String,
    }
}

table! {
    /// The verdict of validation: which tests the gold patch fixes, or why the instance was rejected.
    pub struct ValidationRecord in "validation" {
        /// The candidate's id.
        pub instance_id: InstanceId,
        /// `validated`, `rejected` (the instance is not a valid task) or `failed` (could not run).
        pub status: ValidationStatus,
        /// When not validated: the failure class (`no-fail-to-pass`, `pass-to-fail`, `invalid-run`, ...).
        pub failure_class: Option<FailureClass>,
        /// When not validated: the reason in words.
        pub reason: Option<String>,
        /// Tests that fail (or are absent) with the test patch alone and pass with the gold patch.
        pub FAIL_TO_PASS: Vec<String>,
        /// Tests that pass on both sides.
        pub PASS_TO_PASS: Vec<String>,
        /// Class of each FAIL_TO_PASS test: `f2p`, `e2p`, `s2p` or `n2p` (absent before).
        pub fail_to_pass_classes: BTreeMap<String, String>,
        /// Tests dropped as flaky, with their statuses per run (`before:1` ...).
        pub flaky: BTreeMap<String, BTreeMap<String, String>>,
        /// Tests that went from pass to fail.
        pub pass_to_fail: Vec<String>,
        /// How FAIL_TO_PASS agrees, as strings, with the list the source published
        /// (`given_fail_to_pass`): `exact`, `superset`, `subset`, `overlap` or `disjoint`;
        /// null when the source published none.
        pub agreement: Option<Relation>,
        /// The same by meaning, across granularities and qualifiers (a bare function name and
        /// a node id, a test file and its cases, a truncated parametrised id).
        pub agreement_by_meaning: Option<Relation>,
        /// Published FAIL_TO_PASS names that match no kiln test, by meaning.
        pub given_missing: Vec<String>,
        /// FAIL_TO_PASS tests that match no published name, by meaning.
        pub given_extra: Vec<String>,
        /// How PASS_TO_PASS agrees with the published list, by meaning (null when none).
        pub pass_to_pass_agreement: Option<Relation>,
        /// When validated: the SWE-bench harness parser (`PARSER_REGISTRY` of `swebench` 5.x)
        /// that grades every gold run as resolved and every test-patch-only run as not, as kiln
        /// did; null when none does (see `log_parser_reason`).
        pub log_parser: Option<String>,
        /// When validated and no harness parser agrees with kiln: why, naming the first test
        /// the best candidate misreads.
        pub log_parser_reason: Option<String>,
        /// Tests of FAIL_TO_PASS and PASS_TO_PASS that `log_parser` cannot read at all (an id
        /// with a line break or runs of spaces): the release lists them apart, so that the
        /// harness grades the row on the rest.
        pub harness_unread: Vec<String>,
        /// Tests in neither list that failed for want of a network (a host that could not be
        /// resolved or reached, with the test containers' `network` off): the tests of a
        /// network-free evaluation leave them out, and the row names them.
        pub needs_network: Vec<String>,
        /// Runs per side.
        pub repeats: i64,
        /// Runs of the `before` side (the test patch alone) whose statuses, test by test, are
        /// those of the side's first run, the first included: `repeats` when every run gave the
        /// same statuses, fewer when a run differed (0 when the side never ran).
        pub identical_runs_before: i64,
        /// The same for the `after` side (the test patch and the gold patch).
        pub identical_runs_after: i64,
        /// Whether the problem statement or the hints already show the fix: a line the gold
        /// patch adds, or a definition of a name it introduces, in their fenced code blocks or
        /// inline code spans (kiln-validate's `quality::solution_leak` gives the rules).
        pub solution_leak: bool,
        /// What was found: the gold patch's added lines (whitespace collapsed), then the
        /// definitions as the text writes them (`def parse_strict`).
        pub solution_leak_matches: Vec<String>,
        /// When validated: `easy`, `medium` or `hard`, from the points of the gold patch's size
        /// and the FAIL_TO_PASS count in `difficulty_measures` (kiln-validate's
        /// `quality::DifficultyMeasures` gives the bounds).
        pub difficulty: Option<Difficulty>,
        /// The measures behind `difficulty`: `lines`, `hunks`, `files`, `functions` (touched),
        /// `fail_to_pass`, and their `points`.
        pub difficulty_measures: BTreeMap<String, i64>,
        /// Tests the test patch's files define: the ids the runner's listing names in the
        /// `after` build (the environment's `collect_command`; pytest), else, and for a file
        /// the runner could not collect, the names read from the files at the patched commit
        /// in the row's language (kiln-validate's `quality::tests_collected` gives the rules);
        /// 0 when they define none kiln reads.
        pub tests_defined: i64,
        /// The share of `tests_defined` that the runs with the gold patch reported, in [0, 1];
        /// null when `tests_defined` is 0. Under `[stages.validate] min_collected` the row is
        /// rejected (`tests-not-collected`): its environment lost tests it should have run.
        pub tests_collected: Option<f64>,
        /// The defined tests no run with the gold patch reported, as `path::name` (at most 50).
        pub tests_not_collected: Vec<String>,
        /// The whole-suite check, when this validated row was in its sample (the environment's
        /// `whole_test_command`, once with the test patch and once with both patches): what
        /// each run reported, `before: 812 passed, 3 failed; after: ...`; null when not run.
        pub whole_suite: Option<String>,
        /// Tests outside the narrowed scope that passed in the whole suite's run with the test
        /// patch and did not pass with the gold patch too: what the fix breaks elsewhere.
        pub broken_outside_scope: Vec<String>,
        /// Network mode of the test containers (`none` or `bridge`).
        pub network: String,
        /// Per run: side, repeat, exit code, counts, patch method and seconds.
        pub runs: BTreeMap<String, BTreeMap<String, String>>,
        /// Per run: the statuses of every test, kept for audit.
        pub run_statuses: BTreeMap<String, BTreeMap<String, TestStatus>>,
        /// Sum of the seconds of the test commands alone.
        pub test_seconds: f64,
        /// Wall seconds for validating this instance.
        pub total_seconds: f64,
        /// CPU seconds of the sides' builds (patches applied, rebuild commands run), from the
        /// engine's accounting.
        pub cpu_build_seconds: f64,
        /// CPU seconds of the test runs (their parser scripts included).
        pub cpu_test_seconds: f64,
        /// Where the raw logs are, relative to the run directory.
        pub log_dir: String,
    }
}

table! {
    /// One task instance of a release, compatible with SWE-bench and SWE-bench-Live rows.
    pub struct ReleaseInstance in "release_instance" {
        /// `owner__repo-PR`.
        pub instance_id: InstanceId,
        /// `owner/name`.
        pub repo: String,
        /// Pull request number as a string, when known (SWE-bench-Live uses a string).
        pub pull_number: Option<String>,
        /// The commit to check out.
        pub base_commit: String,
        /// The gold patch.
        pub patch: String,
        /// The test patch.
        pub test_patch: String,
        /// The issue text.
        pub problem_statement: String,
        /// Issue comments before the fix.
        pub hints_text: String,
        /// PR creation time (RFC 3339).
        pub created_at: String,
        /// Project version label: the task file's, else the repository's own at the base
        /// commit (`major.minor`: its manifest's version, else its newest tag).
        pub version: Option<String>,
        /// The repository's licence at the base commit, an SPDX id, or `NOASSERTION`.
        pub license: String,
        /// Tests that the gold patch makes pass: a JSON list in a string, as SWE-bench stores it
        /// (`json.loads` gives the list).
        pub FAIL_TO_PASS: TestList,
        /// Tests that pass before and after: a JSON list in a string, as SWE-bench stores it.
        pub PASS_TO_PASS: TestList,
        /// FAIL_TO_PASS tests that kiln validated and the row's `log_parser` cannot read (an id
        /// with a line break or runs of spaces), kept out of `FAIL_TO_PASS` so that the SWE-bench
        /// harness grades the row on the tests it reads; kiln's own evaluation grades them too.
        pub FAIL_TO_PASS_UNGRADED: TestList,
        /// The same for PASS_TO_PASS.
        pub PASS_TO_PASS_UNGRADED: TestList,
        /// The environment image, by the name the SWE-bench harness reads (`image`;
        /// SWE-bench-Live's code reads `docker_image`): the registry's name once published.
        pub image: String,
        /// The image's content digest: the engine's image id (`sha256:…`) as launch committed
        /// it, which a push and a pull keep. Export checks that `image` is that image, and
        /// `kiln check-images` checks a published release (null for environments of a kiln that
        /// did not record it).
        pub image_digest: Option<String>,
        /// Setup commands that built the image.
        pub setup_commands: Vec<String>,
        /// Commands to run after applying a patch, before the tests (SWE-bench-Live's name).
        pub rebuild_cmds: Vec<String>,
        /// The test command, as SWE-bench-Live's one-element list.
        pub test_cmds: Vec<String>,
        /// Name of the test-log parser.
        pub parser: String,
        /// When `parser` is `status-lines`: the script that reads the test output and prints one
        /// status line per test (the `eval_script` runs it after the tests).
        pub parser_script: Option<String>,
        /// Ecosystem of the repository.
        pub language: String,
        /// `linux`, `windows` or `macos`.
        pub platform: String,
        /// Dockerfile that rebuilds the environment image.
        pub dockerfile: Option<String>,
        /// Seconds the launch took.
        pub launch_seconds: f64,
        /// Seconds the validation took.
        pub validate_seconds: f64,
        /// Runs per side validation made (`[stages.validate] repeats`).
        pub repeats: i64,
        /// Validation runs with the test patch alone whose statuses, test by test, were those
        /// of the first such run, the first included: `repeats` when the tests repeat exactly.
        pub identical_runs_before: i64,
        /// The same for the runs with the test patch and the gold patch.
        pub identical_runs_after: i64,
        /// Whether the problem statement or the hints already show the fix: one of the lines
        /// the gold patch adds (at least 12 characters, not a comment, not a line it also
        /// removes) in their fenced code blocks or inline code spans, or a definition there of a
        /// name the patch introduces.
        pub solution_leak: bool,
        /// The evidence of `solution_leak`: the added lines found (whitespace collapsed), then
        /// the definitions found (`def parse_strict`).
        pub solution_leak_matches: Vec<String>,
        /// `easy`, `medium` or `hard`: the points of five measures of the fix, each 0, 1 or 2
        /// (lines changed ≤ 6, ≤ 30, more; hunks 1, ≤ 3; files 1, 2; functions touched ≤ 1,
        /// ≤ 3; FAIL_TO_PASS tests ≤ 2, ≤ 10), summed: 0–1 easy, 7–10 hard, medium between.
        /// Documentation files are not counted.
        pub difficulty: Option<Difficulty>,
        /// The measures behind `difficulty` and their `points`: `lines`, `hunks`, `files`,
        /// `functions`, `fail_to_pass`.
        pub difficulty_measures: BTreeMap<String, i64>,
        /// Tests the test patch's files define: listed by the runner in the fixed build where
        /// it lists tests (pytest `--collect-only`), else read from the files at the patched
        /// commit (Python `def test…`, Go `func Test…`, Rust `#[test]` functions, JUnit `@Test`
        /// methods, literal `it`/`test` titles); 0 when they define none kiln reads (C and C++
        /// suites).
        pub tests_defined: i64,
        /// The share of `tests_defined` that validation's runs with the gold patch reported;
        /// null when `tests_defined` is 0. A row under `[stages.validate] min_collected` is not
        /// released.
        pub tests_collected: Option<f64>,
        /// Validation's whole-suite check of the row, when it was in the sample
        /// (`[stages.validate] full_suite_every`): what each run reported; null when not run.
        pub whole_suite: Option<String>,
        /// Tests outside the narrowed scope that the whole suite's run passed with the test
        /// patch alone and did not with the gold patch: what the fix breaks elsewhere.
        pub broken_outside_scope: Vec<String>,
        /// The filter's judge of the row: `heuristic`, or the model names of the LM judge joined
        /// by `+`; null when no filter stage judged it (a task file taken as it is).
        pub filter_judge: Option<String>,
        /// The filter's label (`ok` for a kept row; see the filter table's `label`).
        pub filter_label: Option<String>,
        /// The filter's reason, in a sentence: what the judge found about the issue's clarity,
        /// the tests and whether the issue gives the solution away.
        pub filter_reason: Option<String>,
        /// Confounder flags the LM judge raised (`exact-string-assertions`, `network-access`,
        /// `multiple-issues`, `image-only`); empty for the heuristic judge.
        pub filter_flags: Vec<String>,
        /// Why the heuristic judge decided although an LM judge was configured (no usable
        /// answer, budget reached); null otherwise.
        pub filter_fallback: Option<String>,
        /// The kiln run that produced this row.
        pub run_id: String,
        /// The script the SWE-bench harness runs (`/bin/bash /eval.sh`) after applying a
        /// prediction: the test files reset, the test patch applied from a heredoc, the rebuild
        /// commands, the test command between the harness's start and end markers (for `cargo`
        /// rows its output piped through an awk filter that repeats each result under kiln's
        /// id), the test files reset again.
        pub eval_script: String,
        /// The SWE-bench harness parser (`PARSER_REGISTRY`) that reads the test command's output
        /// as kiln does; empty when none does (`harness_note` says why).
        pub log_parser: String,
        /// How the SWE-bench harness grades the row: `pass_and_fail`.
        pub eval_type: String,
        /// Commit the environment was set up from (the base commit).
        pub environment_setup_commit: String,
        /// Numbers of the issues the pull request resolves.
        pub issue_numbers: Vec<String>,
        /// Web addresses of the pull request's head and merge commits, when known.
        pub commit_urls: Vec<String>,
        /// Empty when the SWE-bench harness evaluates the row unchanged; otherwise why not.
        pub harness_note: String,
    }
}

impl ReleaseInstance {
    /// The test command to run: `test_cmds` joined as SWE-bench-Live joins them (` ; `).
    #[must_use]
    pub fn test_command(&self) -> String {
        self.test_cmds.join(" ; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::columns::Row;

    /// A serialised row must have exactly the declared columns, in order: the column list is
    /// derived from the struct, and this catches a field added without going through `table!`.
    fn check_columns<R: Row>(row: &R) {
        let value = serde_json::to_value(row).unwrap_or_default();
        let keys: Vec<&str> = value
            .as_object()
            .map(|o| o.keys().map(String::as_str).collect())
            .unwrap_or_default();
        let mut names: Vec<&str> = R::columns().iter().map(|c| c.name).collect();
        let mut sorted_keys = keys.clone();
        sorted_keys.sort_unstable();
        names.sort_unstable();
        assert_eq!(sorted_keys, names, "table {}", R::TABLE);
        let back: R = serde_json::from_value(value).unwrap();
        assert_eq!(
            serde_json::to_value(back).ok(),
            serde_json::to_value(row).ok()
        );
    }

    #[test]
    fn verdict_columns_match_struct() {
        check_columns(&Verdict {
            instance_id: InstanceId::new("a__b-1").unwrap(),
            keep: true,
            label: "ok".into(),
            reason: "has tests".into(),
            judge: "heuristic".into(),
            prompt_tokens: None,
            completion_tokens: Some(3),
            cost_usd: Some(0.25),
            flags: vec!["image-only".into()],
            votes: vec!["m: ok".into()],
            raw_answers: vec!["{}".into()],
            answer_keys: vec!["ab".into()],
            fallback: None,
        });
    }

    #[test]
    fn platform_label_columns_match_struct() {
        check_columns(&PlatformLabel {
            instance_id: InstanceId::new("a__b-1").unwrap(),
            platform: "windows".into(),
            evidence: vec!["patch: win32".into()],
            labeller: "m".into(),
            keyword_evidence: "mixed".into(),
            reason: Some("uses the registry".into()),
            raw_answer: Some("{}".into()),
            answer_keys: vec![],
            fallback: None,
            prompt_tokens: Some(1),
            completion_tokens: Some(2),
            cost_usd: None,
        });
    }

    #[test]
    fn release_has_swe_bench_field_names() {
        let names: Vec<&str> = ReleaseInstance::columns().iter().map(|c| c.name).collect();
        for field in [
            "instance_id",
            "repo",
            "base_commit",
            "patch",
            "test_patch",
            "problem_statement",
            "hints_text",
            "created_at",
            "FAIL_TO_PASS",
            "PASS_TO_PASS",
        ] {
            assert!(names.contains(&field), "{field} missing");
        }
    }

    #[test]
    fn validation_round_trips() {
        let mut statuses = BTreeMap::new();
        statuses.insert("t::a".to_string(), TestStatus::Pass);
        let mut run_statuses = BTreeMap::new();
        run_statuses.insert("after:1".to_string(), statuses);
        check_columns(&ValidationRecord {
            instance_id: InstanceId::new("a__b-1").unwrap(),
            status: ValidationStatus::Validated,
            failure_class: None,
            reason: None,
            FAIL_TO_PASS: vec!["t::a".into()],
            PASS_TO_PASS: vec![],
            fail_to_pass_classes: BTreeMap::new(),
            flaky: BTreeMap::new(),
            pass_to_fail: vec![],
            agreement: Some(Relation::Exact),
            agreement_by_meaning: Some(Relation::Exact),
            given_missing: vec![],
            given_extra: vec![],
            pass_to_pass_agreement: None,
            log_parser: Some("parse_log_pytest_v2".into()),
            log_parser_reason: None,
            harness_unread: Vec::new(),
            needs_network: Vec::new(),
            repeats: 1,
            identical_runs_before: 1,
            identical_runs_after: 0,
            solution_leak: true,
            solution_leak_matches: vec!["return a / b".into()],
            difficulty: Some(crate::status::Difficulty::Medium),
            difficulty_measures: BTreeMap::from([("points".to_string(), 3)]),
            tests_defined: 0,
            tests_collected: None,
            tests_not_collected: Vec::new(),
            whole_suite: None,
            broken_outside_scope: Vec::new(),
            network: "none".into(),
            runs: BTreeMap::new(),
            run_statuses,
            test_seconds: 1.5,
            total_seconds: 2.0,
            cpu_build_seconds: 0.5,
            cpu_test_seconds: 1.25,
            log_dir: "logs/a__b-1/validate".into(),
        });
    }
}
