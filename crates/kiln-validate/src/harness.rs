//! What the official SWE-bench harness (`swebench` 5.x, `run_evaluation`) needs to evaluate a
//! kiln instance unchanged: a `log_parser` from its `PARSER_REGISTRY` that reads kiln's test
//! output to the same verdicts, and an `eval_script` in its shape.
//!
//! The harness runs `/bin/bash /eval.sh` in a container of the row's `image` after applying the
//! predicted patch in `/testbed`, cuts the output between its start and end markers, parses it
//! with the named parser and grades FAIL_TO_PASS and PASS_TO_PASS by name. [`choose_log_parser`]
//! replays that grading on kiln's own validation runs, so a row only names a parser the harness
//! will agree with.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use kiln_core::runtime::WORKDIR;
use kiln_testlog::swebench::{
    HarnessStatuses, OUTPUT_FILTER, harness_exit_code_agrees, harness_maintained, harness_parsers,
    harness_passed, harness_reads, id_script,
};

use crate::decide::Side;

/// The harness's marker before the test output.
pub const START_TEST_OUTPUT: &str = ">>>>> Start Test Output";
/// The harness's marker after the test output; the line before it must be the test command
/// (the harness inserts the capture of `$?` there).
pub const END_TEST_OUTPUT: &str = ">>>>> End Test Output";
/// `eval_type` of every kiln row: FAIL_TO_PASS must pass and PASS_TO_PASS must keep passing.
pub const EVAL_TYPE: &str = "pass_and_fail";

/// One validation run as the harness would see it: the side, the test command's exit code and
/// the status map of each candidate harness parser.
#[derive(Debug, Clone, Copy)]
pub struct HarnessRun<'a> {
    /// `before` (test patch only, like an empty prediction) or `after` (with the gold patch).
    pub side: Side,
    /// Exit code of the test command.
    pub exit_code: i64,
    /// Status maps by harness parser name.
    pub maps: &'a [(&'static str, HarnessStatuses)],
}

/// A harness parser that agrees with kiln, and the tests it cannot read at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HarnessChoice {
    /// The `PARSER_REGISTRY` name.
    pub parser: &'static str,
    /// Tests of FAIL_TO_PASS and PASS_TO_PASS that the parser finds in no run (an id with a
    /// line break or runs of spaces): the row is graded on the others.
    pub unread: Vec<String>,
}

/// The harness parser that grades every `after` run as resolved and every `before` run as not
/// resolved, given kiln's FAIL_TO_PASS and PASS_TO_PASS. A parser that reads every test is
/// preferred; else one that agrees on the tests it reads, when the tests it never reads leave
/// at least one FAIL_TO_PASS test. Otherwise why there is none, naming the first test the best
/// candidate misreads.
///
/// # Errors
/// The reason no harness parser agrees with kiln, for the row and the card.
pub fn choose_log_parser(
    kiln_parser: &str,
    runs: &[HarnessRun<'_>],
    fail_to_pass: &[String],
    pass_to_pass: &[String],
) -> Result<HarnessChoice, String> {
    let candidates = harness_parsers(kiln_parser);
    if candidates.is_empty() {
        return Err(format!(
            "the SWE-bench harness has no parser for kiln's `{kiln_parser}` output"
        ));
    }
    let mut first_reason = None;
    for &name in candidates {
        match disagreement(name, runs, fail_to_pass, pass_to_pass) {
            None => {
                return Ok(HarnessChoice {
                    parser: name,
                    unread: Vec::new(),
                });
            }
            Some(reason) => {
                first_reason.get_or_insert(format!("{name}: {reason}"));
            }
        }
    }
    for &name in candidates {
        let unread = unread(name, runs, fail_to_pass.iter().chain(pass_to_pass));
        if unread.is_empty() {
            continue;
        }
        let read = |list: &[String]| -> Vec<String> {
            list.iter()
                .filter(|id| !unread.contains(id))
                .cloned()
                .collect()
        };
        let fail_to_pass = read(fail_to_pass);
        if !fail_to_pass.is_empty()
            && disagreement(name, runs, &fail_to_pass, &read(pass_to_pass)).is_none()
        {
            return Ok(HarnessChoice {
                parser: name,
                unread,
            });
        }
    }
    Err(format!(
        "no SWE-bench parser reads kiln's `{kiln_parser}` output as kiln does ({})",
        first_reason.unwrap_or_default()
    ))
}

/// The tests of `ids` that the harness parser `name` finds in none of the runs.
fn unread<'a>(
    name: &str,
    runs: &[HarnessRun<'_>],
    ids: impl Iterator<Item = &'a String>,
) -> Vec<String> {
    let maps: Vec<&HarnessStatuses> = runs
        .iter()
        .filter_map(|run| run.maps.iter().find(|(n, _)| *n == name).map(|(_, m)| m))
        .collect();
    ids.filter(|id| !maps.iter().any(|map| harness_reads(id, map)))
        .cloned()
        .collect()
}

/// Where the harness parser `name` would grade a run differently from kiln.
fn disagreement(
    name: &str,
    runs: &[HarnessRun<'_>],
    fail_to_pass: &[String],
    pass_to_pass: &[String],
) -> Option<String> {
    let mut graded = 0;
    for run in runs {
        let Some((_, map)) = run.maps.iter().find(|(n, _)| *n == name) else {
            continue;
        };
        match run.side {
            Side::After => {
                graded += 1;
                if !harness_exit_code_agrees(run.exit_code, map) {
                    return Some(format!(
                        "a gold run exits {} and the parser reads no failure, which the harness \
                         takes for an invalid run",
                        run.exit_code
                    ));
                }
                if let Some(id) = fail_to_pass.iter().find(|id| !harness_passed(id, map)) {
                    return Some(format!("FAIL_TO_PASS `{id}` is not read as passed"));
                }
                if let Some(id) = pass_to_pass.iter().find(|id| !harness_maintained(id, map)) {
                    return Some(format!("PASS_TO_PASS `{id}` is not read as passed"));
                }
            }
            Side::Before => {
                graded += 1;
                if fail_to_pass.iter().all(|id| harness_passed(id, map)) {
                    return Some(
                        "every FAIL_TO_PASS test is read as passed without the gold patch".into(),
                    );
                }
            }
            Side::Base => {}
        }
    }
    (graded == 0).then(|| "no run was read".to_string())
}

/// A heredoc delimiter that does not occur in `text` (the harness's own scheme: `EOF_` and a
/// hash, re-hashed until absent).
fn heredoc_delimiter(text: &str) -> String {
    let mut seed = fnv(text.as_bytes());
    loop {
        let delimiter = format!("EOF_{seed:012x}");
        if !text.contains(&delimiter) {
            return delimiter;
        }
        seed = fnv(format!("{text}{delimiter}").as_bytes());
    }
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    }) & 0xffff_ffff_ffff
}

/// Quotes `s` for the shell.
pub(crate) fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Paths a unified diff changes, split into files that exist at the base commit (it modifies,
/// renames or deletes them) and files it creates.
fn patch_files(patch: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut existing = BTreeSet::new();
    let mut created = BTreeSet::new();
    for file in kiln_core::diff::changed_files(patch) {
        match (file.old, file.new) {
            (Some(old), _) => {
                existing.insert(old);
            }
            (None, Some(new)) => {
                created.insert(new);
            }
            (None, None) => {}
        }
    }
    (existing, created)
}

/// The commands that put the files `test_patch` touches back as `base_commit` has them, run in
/// the checkout: `git checkout <base> -- <the files it changes>` and `rm -f -- <the files it
/// creates>`, each only when there are such files. The eval script runs them before the test
/// patch and after the tests, Harbor's verifier before the test patch: whatever an agent did
/// to those files, the tests are the test patch's.
#[must_use]
pub fn reset_test_files(base_commit: &str, test_patch: &str) -> Vec<String> {
    let (existing, created) = patch_files(test_patch);
    let existing: Vec<String> = existing.iter().map(|p| quote(p)).collect();
    let created: Vec<String> = created.iter().map(|p| quote(p)).collect();
    let mut commands = Vec::new();
    if !existing.is_empty() {
        commands.push(format!(
            "git checkout {} -- {}",
            quote(base_commit),
            existing.join(" ")
        ));
    }
    if !created.is_empty() {
        commands.push(format!("rm -f -- {}", created.join(" ")));
    }
    commands
}

/// How the SWE-bench harness's view of a test command's output is made from the output, as
/// validation graded it ([`choose_log_parser`] reads kiln's runs so) and the eval script prints
/// it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HarnessView {
    /// The output as it is.
    Output,
    /// What this `sh` command prints reading the output on its standard input: the output, then
    /// lines of kiln's ids ([`kiln_testlog::swebench::output_filter_command`]).
    Filtered(String),
    /// The output, a line break, then what this `sh` script prints reading the output: the
    /// row's parser script, or its parser's id script ([`kiln_testlog::swebench::id_script`]).
    WithLines(String),
}

/// The harness's view of the output of a row with kiln parser `parser` and, where the launch
/// agent wrote one, `parser_script`.
#[must_use]
pub fn harness_view(parser: &str, parser_script: Option<&str>) -> HarnessView {
    if let Some(script) = parser_script {
        return HarnessView::WithLines(script.to_string());
    }
    if let Some(command) = kiln_testlog::swebench::output_filter_command(parser) {
        return HarnessView::Filtered(command);
    }
    match id_script(parser) {
        Some(script) => HarnessView::WithLines(script),
        None => HarnessView::Output,
    }
}

/// What the eval script prints, and exits on, when a rebuild command fails: the tests do not
/// run on the previous build.
pub const REBUILD_FAILED: &str =
    "[kiln] a rebuild command failed: the tests do not run on the previous build";

/// The harness's `eval_script` for an instance: reset the test files to the base commit, apply
/// the test patch from a heredoc, run the rebuild commands (the script ends, with no test
/// output, when one fails), then the test command between the harness's markers (the test
/// command last, where the harness captures its exit code), and reset the test files again.
/// The shell options are the harness's (`set -uxo pipefail`), with `-u` lifted, as kiln's own
/// runs have no `-u`, and standard error joins standard output, so the trace's markers and the
/// results reach the harness in the order they were written. When the kiln parser `parser`
/// has an output filter ([`kiln_testlog::swebench::output_filter`]), or the row has a parser
/// script ([`script_filter`]), the test command's output (both streams) is piped through it;
/// `pipefail` keeps the test command's exit code.
#[must_use]
pub fn eval_script(
    base_commit: &str,
    test_patch: &str,
    rebuild_commands: &[String],
    test_command: &str,
    parser: &str,
    parser_script: Option<&str>,
) -> String {
    let reset = reset_test_files(base_commit, test_patch);
    // One stream: the harness reads the markers from the shell's trace (standard error) and the
    // results from standard output, which the engine forwards as two pipes with no order
    // between them; a large output then ends past the end marker, and the harness reads only
    // what lies between the markers (seen on PrismJS: 3.5 MB of output, most results cut off).
    let mut script = String::from("#!/bin/bash\nset -uxo pipefail\nset +u\nexec 2>&1\n");
    let _ = writeln!(script, "cd {WORKDIR}");
    for command in &reset {
        let _ = writeln!(script, "{command}");
    }
    let delimiter = heredoc_delimiter(test_patch);
    let _ = writeln!(script, "git apply --verbose --binary - <<'{delimiter}'");
    script.push_str(test_patch);
    if !test_patch.ends_with('\n') {
        script.push('\n');
    }
    let _ = writeln!(script, "{delimiter}");
    // A rebuild that fails leaves the last build's binaries in place: tests run on them would
    // pass with any patch (fmt's test patch does not compile without the fix, and a no-op
    // patch then "resolved" the instance on the stale build). kiln's own runs count such a
    // side's tests as absent; the harness gets no test output at all.
    for command in rebuild_commands {
        let _ = writeln!(
            script,
            "{{ {}\n}} || {{ echo '{REBUILD_FAILED}'; exit 1; }}",
            command.trim_end()
        );
    }
    let filter = match harness_view(parser, parser_script) {
        HarnessView::Output => None,
        HarnessView::Filtered(command) => Some(format!("{OUTPUT_FILTER}() {{\n{command}\n}}")),
        HarnessView::WithLines(script) => Some(script_filter(&script)),
    };
    if let Some(filter) = &filter {
        let _ = writeln!(script, "{filter}");
    }
    let _ = writeln!(script, ": '{START_TEST_OUTPUT}'");
    match filter {
        Some(_) => {
            let _ = writeln!(
                script,
                "{{ {}\n}} 2>&1 | {OUTPUT_FILTER}",
                test_command.trim_end()
            );
        }
        None => {
            let _ = writeln!(script, "{}", test_command.trim_end());
        }
    }
    let _ = writeln!(script, ": '{END_TEST_OUTPUT}'");
    for command in &reset {
        let _ = writeln!(script, "{command}");
    }
    script
}

/// The output filter of a row read by a parser script: the shell function
/// [`OUTPUT_FILTER`] keeps the output in [`kiln_core::parser_script::OUTPUT_PATH`], prints it,
/// then writes the script from a heredoc and prints what it reads (`[PASSED] id` lines, which
/// `parse_log_jest_json` reads). kiln itself runs the script in a fresh container instead.
#[must_use]
pub fn script_filter(script: &str) -> String {
    use kiln_core::parser_script::{OUTPUT_PATH, SCRIPT_PATH};
    let delimiter = heredoc_delimiter(script);
    let mut body = script.to_string();
    if !body.ends_with('\n') {
        body.push('\n');
    }
    format!(
        "{OUTPUT_FILTER}() {{\ncat > {OUTPUT_PATH}\ncat {OUTPUT_PATH}\ncat > {SCRIPT_PATH} <<'{delimiter}'\n{body}{delimiter}\n{}\n}}",
        kiln_core::parser_script::command()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEST_PATCH: &str = "\
diff --git a/tests/test_calc.py b/tests/test_calc.py
--- a/tests/test_calc.py
+++ b/tests/test_calc.py
@@ -1 +1,2 @@
 x = 1
+y = 2
diff --git a/tests/test_new.py b/tests/test_new.py
new file mode 100644
--- /dev/null
+++ b/tests/test_new.py
@@ -0,0 +1 @@
+z = 3
";

    fn map(pairs: &[(&str, &str)]) -> HarnessStatuses {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect()
    }

    #[test]
    fn the_script_has_the_harness_shape() {
        let script = eval_script(
            "abc123",
            TEST_PATCH,
            &["make".into()],
            "pytest -rA tests",
            "pytest",
            None,
        );
        let lines: Vec<&str> = script.lines().collect();
        assert_eq!(
            &lines[..4],
            &["#!/bin/bash", "set -uxo pipefail", "set +u", "exec 2>&1"]
        );
        let end = lines
            .iter()
            .position(|l| l.contains(END_TEST_OUTPUT))
            .expect("end marker");
        // The harness inserts `SWEBENCH_TEST_EXIT_CODE=$?` before the end marker.
        assert_eq!(lines[end - 1], "pytest -rA tests");
        assert_eq!(lines[end - 2], format!(": '{START_TEST_OUTPUT}'"));
        assert_eq!(lines[end - 4], "{ make");
        assert_eq!(
            lines[end - 3],
            format!("}} || {{ echo '{REBUILD_FAILED}'; exit 1; }}")
        );
        assert_eq!(
            lines
                .iter()
                .filter(|l| **l == "git checkout 'abc123' -- 'tests/test_calc.py'")
                .count(),
            2
        );
        assert_eq!(lines.last(), Some(&"rm -f -- 'tests/test_new.py'"));
    }

    #[test]
    fn the_heredoc_carries_the_patch_verbatim() {
        let script = eval_script("abc", TEST_PATCH, &[], "true", "pytest", None);
        let delimiter = heredoc_delimiter(TEST_PATCH);
        // Only the heredoc, run by bash, with `cat` standing in for `git apply`.
        let start = script.find("git apply").expect("apply line");
        let end =
            script.find(&format!("\n{delimiter}\n")).expect("delimiter") + delimiter.len() + 2;
        let heredoc = script[start..end].replace("git apply --verbose --binary -", "cat");
        let out = std::process::Command::new("bash")
            .arg("-c")
            .arg(heredoc)
            .output()
            .expect("bash");
        assert_eq!(String::from_utf8_lossy(&out.stdout), TEST_PATCH);
    }

    /// A cargo row's test output reaches the harness through the id filter, both streams (cargo
    /// prints its `Running` lines on stderr), and the harness still captures the test command's
    /// own exit code on the line before the end marker.
    #[test]
    fn cargo_output_is_piped_through_the_id_filter_keeping_the_exit_code() {
        let command = "printf '%s\\n' '     Running tests/a.rs (target/debug/deps/a-0123abcd)' \
                       'test same ... ok' >&2; printf '%s\\n' \
                       '     Running tests/b.rs (target/debug/deps/b-4567ef01)' \
                       'test same ... FAILED'; exit 101";
        let script = eval_script("abc", TEST_PATCH, &[], command, "cargo", None);
        // The script from the filter's definition to the end marker, run by bash as the
        // harness's script would (with the capture it inserts).
        let from = script
            .find(&format!("{OUTPUT_FILTER}() {{"))
            .expect("filter");
        let to = script.find(&format!(": '{END_TEST_OUTPUT}'")).expect("end");
        let run = format!(
            "set -o pipefail\n{}CODE=$?\necho \"exit $CODE\"",
            &script[from..to]
        );
        let out = std::process::Command::new("bash")
            .arg("-c")
            .arg(run)
            .output()
            .expect("bash");
        let printed = String::from_utf8_lossy(&out.stdout);
        assert!(printed.ends_with("exit 101\n"), "{printed}");
        let map =
            kiln_testlog::swebench::harness_parse("parse_log_cargo", &printed).expect("ported");
        assert_eq!(map.get("a::test::same").map(String::as_str), Some("PASSED"));
        assert_eq!(map.get("b::test::same").map(String::as_str), Some("FAILED"));
        // Other parsers' rows keep the test command as it is.
        let plain = eval_script("abc", TEST_PATCH, &[], "pytest -rA", "pytest", None);
        assert!(!plain.contains(OUTPUT_FILTER));
    }

    /// A row with a parser script: the harness sees the test output, then the script's status
    /// lines, and still captures the test command's own exit code.
    #[test]
    fn a_parser_script_prints_its_lines_after_the_output_keeping_the_exit_code() {
        let command = "echo 'check one: good'; echo 'check two: BAD' >&2; exit 3";
        let parser = "sed -n 's/^check \\(.*\\): good$/[PASSED] \\1/p; s/^check \\(.*\\): BAD$/[FAILED] \\1/p'";
        let script = eval_script(
            "abc",
            TEST_PATCH,
            &[],
            command,
            "status-lines",
            Some(parser),
        );
        let from = script
            .find(&format!("{OUTPUT_FILTER}() {{"))
            .expect("filter");
        let to = script.find(&format!(": '{END_TEST_OUTPUT}'")).expect("end");
        let run = format!(
            "set -o pipefail\n{}CODE=$?\necho \"exit $CODE\"",
            &script[from..to]
        );
        let out = std::process::Command::new("bash")
            .arg("-c")
            .arg(run)
            .output()
            .expect("bash");
        let printed = String::from_utf8_lossy(&out.stdout);
        assert!(printed.starts_with("check one: good\n"), "{printed}");
        assert!(printed.ends_with("exit 3\n"), "{printed}");
        let map =
            kiln_testlog::swebench::harness_parse("parse_log_jest_json", &printed).expect("ported");
        assert_eq!(map.get("one").map(String::as_str), Some("PASSED"));
        assert_eq!(map.get("two").map(String::as_str), Some("FAILED"));
    }

    #[test]
    fn a_delimiter_never_occurs_in_the_patch() {
        let first = heredoc_delimiter("x");
        let patch = format!("+{first}\n");
        assert!(!patch.contains(&heredoc_delimiter(&patch)));
    }

    #[test]
    fn the_parser_must_grade_both_sides_as_kiln_did() {
        let f2p = vec!["t.py::test_div[1 / 2]".to_string()];
        let p2p = vec!["t.py::test_add".to_string()];
        let after_maps = vec![
            (
                "parse_log_pytest_v2",
                map(&[
                    ("t.py::test_div[1 / 2]", "PASSED"),
                    ("t.py::test_add", "PASSED"),
                ]),
            ),
            (
                "parse_log_pytest",
                map(&[("t.py::test_div[1", "PASSED"), ("t.py::test_add", "PASSED")]),
            ),
        ];
        let before_maps = vec![
            (
                "parse_log_pytest_v2",
                map(&[
                    ("t.py::test_div[1 / 2]", "FAILED"),
                    ("t.py::test_add", "PASSED"),
                ]),
            ),
            (
                "parse_log_pytest",
                map(&[("t.py::test_div[1", "FAILED"), ("t.py::test_add", "PASSED")]),
            ),
        ];
        let runs = [
            HarnessRun {
                side: Side::Before,
                exit_code: 1,
                maps: &before_maps,
            },
            HarnessRun {
                side: Side::After,
                exit_code: 0,
                maps: &after_maps,
            },
        ];
        assert_eq!(
            choose_log_parser("pytest", &runs, &f2p, &p2p).map(|c| (c.parser, c.unread)),
            Ok(("parse_log_pytest_v2", Vec::new()))
        );
        // A PASS_TO_PASS id no run prints in a form v2 reads (a line break in its parameters):
        // the row is graded on the rest, and the id is listed apart.
        let mut with_break = p2p.clone();
        with_break.push("t.py::test_doc[a\nb]".into());
        assert_eq!(
            choose_log_parser("pytest", &runs, &f2p, &with_break).map(|c| (c.parser, c.unread)),
            Ok((
                "parse_log_pytest_v2",
                vec!["t.py::test_doc[a\nb]".to_string()]
            ))
        );
        // Not when FAIL_TO_PASS would be left empty.
        let unreadable = vec!["t.py::test_doc[a\nb]".to_string()];
        assert!(choose_log_parser("pytest", &runs, &unreadable, &p2p).is_err());
        // A parser that cuts the id with spaces: no parser agrees, and the reason names the id.
        let cut_after = vec![(
            "parse_log_pytest_v2",
            map(&[("t.py::test_div[1", "PASSED"), ("t.py::test_add", "PASSED")]),
        )];
        let runs = [HarnessRun {
            side: Side::After,
            exit_code: 0,
            maps: &cut_after,
        }];
        let reason = choose_log_parser("pytest", &runs, &f2p, &p2p).expect_err("no parser");
        assert!(
            reason.contains("parse_log_pytest_v2: FAIL_TO_PASS `t.py::test_div[1 / 2]`"),
            "{reason}"
        );
        // A gold run that exits 1 with no failure read is an invalid run to the harness.
        let runs = [HarnessRun {
            side: Side::After,
            exit_code: 1,
            maps: &after_maps,
        }];
        let reason = choose_log_parser("pytest", &runs, &f2p, &p2p).expect_err("invalid");
        assert!(reason.contains("invalid run"), "{reason}");
        assert!(choose_log_parser("ctest", &runs, &f2p, &p2p).is_err());
    }
}
