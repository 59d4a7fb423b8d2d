//! What Harbor (the `harbor` CLI, 0.25) runs to judge a released instance: the verifier
//! `tests/test.sh` with the files it reads, and the oracle `solution/solve.sh` with the gold
//! patch. The export writes them into each task directory beside `instruction.md` and
//! `task.toml`.
//!
//! Harbor copies `tests/` to `/tests` after the agent has run, in the agent's own container
//! (its "shared" verifier, the only one that sees the agent's edits), and runs
//! `(/tests/test.sh) > /logs/verifier/test-stdout.txt 2>&1` as the image's user in its
//! working directory; the reward is what the script leaves in `/logs/verifier/reward.txt`,
//! whatever its exit status. The oracle agent copies `solution/` to `/solution` and runs
//! `solve.sh`. Both scripts are run directly, so they start with `#!/bin/bash` and have LF
//! line ends (a CR after the shebang makes the kernel look for `bash\r`).
//!
//! The verifier does what a validation run does, in the same order and with the same commands:
//! the files the test patch touches are put back as the base commit has them (an agent's
//! edits to them do not count), the test patch is applied with kiln's chain
//! ([`kiln_core::apply`]), each rebuild command and the test command run in a `bash -c` of
//! their own in the checkout, and the output is read as validation read it for the SWE-bench
//! harness ([`crate::harness::harness_view`]): by the row's `log_parser`, ported to awk
//! ([`kiln_testlog::swebench::GRADE_AWK`]) because the image may have no Python. The reward is
//! 1 only when every test of FAIL_TO_PASS and PASS_TO_PASS passes and the exit code does not
//! contradict the statuses; it is written as 0 first, so that a verifier cut short still leaves
//! one. Patches and lists are files of their own, never text inside a script: no quoting, no
//! heredoc, byte for byte as the row holds them.
//!
//! Unlike validation, the parser script (or id script) runs in the container the tests ran
//! in, as in the SWE-bench harness's eval script: Harbor has no other container to offer.

use std::fmt::Write as _;

use kiln_core::runtime::WORKDIR;
use kiln_schema::ReleaseInstance;
use kiln_testlog::swebench::{GRADE_AWK, GRADED_PARSERS};

use crate::harness::{HarnessView, harness_view, quote, reset_test_files};

/// Where Harbor puts the task's `tests/` in the container.
pub const TESTS_DIR: &str = "/tests";
/// Where Harbor puts the task's `solution/` in the container (oracle runs only).
pub const SOLUTION_DIR: &str = "/solution";
/// Where a verifier leaves its reward and logs; Harbor copies it out after the run.
pub const VERIFIER_LOGS: &str = "/logs/verifier";

/// The test patch, in `tests/`.
pub const TEST_PATCH: &str = "test.patch";
/// The gold patch, in `solution/`.
pub const GOLD_PATCH: &str = "gold.patch";
/// FAIL_TO_PASS, one id a line, in `tests/`.
pub const FAIL_TO_PASS: &str = "FAIL_TO_PASS.txt";
/// PASS_TO_PASS, one id a line, in `tests/`.
pub const PASS_TO_PASS: &str = "PASS_TO_PASS.txt";
/// The grader ([`GRADE_AWK`]), in `tests/`.
pub const GRADER: &str = "grade.awk";
/// The command or script that makes the harness's view of the output, in `tests/`, for rows
/// that have one.
pub const VIEW_SCRIPT: &str = "harness-view.sh";

/// One file of a task directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskFile {
    /// Path relative to the task directory (`tests/test.sh`).
    pub path: String,
    /// Contents, byte for byte.
    pub contents: Vec<u8>,
    /// Whether it is a script Harbor runs (written with mode 755).
    pub executable: bool,
}

impl TaskFile {
    fn new(path: &str, contents: impl Into<Vec<u8>>, executable: bool) -> Self {
        Self {
            path: path.to_string(),
            contents: contents.into(),
            executable,
        }
    }
}

/// Why a released row cannot be a Harbor task: its verifier would not grade it as validation
/// did. `None` when it can.
#[must_use]
pub fn unfit(row: &ReleaseInstance) -> Option<String> {
    if row.image.is_empty() {
        return Some("the environment has no image".into());
    }
    if row.platform != "linux" {
        return Some(format!(
            "its platform is {}; Harbor's docker environment runs linux images",
            row.platform
        ));
    }
    if row.log_parser.is_empty() {
        return Some(format!(
            "no SWE-bench harness parser reads its test output as kiln does ({})",
            row.harness_note
        ));
    }
    if !GRADED_PARSERS.contains(&row.log_parser.as_str()) {
        return Some(format!(
            "its log parser {} has no port in the verifier's grader",
            row.log_parser
        ));
    }
    if row.FAIL_TO_PASS.is_empty() {
        return Some("no FAIL_TO_PASS test is read by its log parser".into());
    }
    let listed = row.FAIL_TO_PASS.iter().chain(row.PASS_TO_PASS.iter());
    if let Some(id) = listed.into_iter().find(|id| id.contains(['\n', '\r'])) {
        return Some(format!(
            "the test id {id:?} holds a line break, which a list of one id a line cannot"
        ));
    }
    None
}

/// The files of `tests/`: the verifier `test.sh`, the test patch, both lists, the grader, and
/// the harness view's script where the row has one.
///
/// # Errors
/// The reason of [`unfit`] when the row cannot be a task.
pub fn verifier_files(row: &ReleaseInstance) -> Result<Vec<TaskFile>, String> {
    if let Some(reason) = unfit(row) {
        return Err(reason);
    }
    let view = harness_view(&row.parser, row.parser_script.as_deref());
    let mut files = vec![
        TaskFile::new("tests/test.sh", verifier_script(row, &view), true),
        TaskFile::new(
            &format!("tests/{TEST_PATCH}"),
            row.test_patch.clone(),
            false,
        ),
        TaskFile::new(
            &format!("tests/{FAIL_TO_PASS}"),
            list(&row.FAIL_TO_PASS),
            false,
        ),
        TaskFile::new(
            &format!("tests/{PASS_TO_PASS}"),
            list(&row.PASS_TO_PASS),
            false,
        ),
        TaskFile::new(&format!("tests/{GRADER}"), GRADE_AWK, false),
    ];
    match view {
        HarnessView::Output => {}
        HarnessView::Filtered(script) | HarnessView::WithLines(script) => {
            files.push(TaskFile::new(
                &format!("tests/{VIEW_SCRIPT}"),
                script,
                false,
            ));
        }
    }
    Ok(files)
}

/// The files of `solution/`: the oracle `solve.sh` and the gold patch.
#[must_use]
pub fn oracle_files(row: &ReleaseInstance) -> Vec<TaskFile> {
    vec![
        TaskFile::new("solution/solve.sh", oracle_script(row), true),
        TaskFile::new(&format!("solution/{GOLD_PATCH}"), row.patch.clone(), false),
    ]
}

/// A list file: one id a line.
fn list(ids: &[String]) -> String {
    ids.iter().fold(String::new(), |mut text, id| {
        text.push_str(id);
        text.push('\n');
        text
    })
}

/// `bash -c` of `command` as validation runs a command: a fresh shell with `pipefail`, in the
/// checkout.
fn own_shell(command: &str) -> String {
    format!("bash -c {}", quote(&format!("set -o pipefail\n{command}")))
}

/// `solution/solve.sh`: the gold patch applied to the checkout with kiln's chain; exits 1 when
/// no method applies it.
fn oracle_script(row: &ReleaseInstance) -> String {
    let mut script = String::from("#!/bin/bash\n");
    let _ = writeln!(
        script,
        "# Harbor's oracle for the kiln instance {}.\n\
         # The gold patch ({GOLD_PATCH}) is applied to {WORKDIR} with the chain validation used\n\
         # (git apply, then git apply --3way, then patch --fuzz).",
        row.instance_id
    );
    let _ = writeln!(script, "cd {WORKDIR} || exit 1");
    let _ = writeln!(script, "{}", kiln_core::apply::function());
    let _ = writeln!(script, "kiln_apply {SOLUTION_DIR}/{GOLD_PATCH}");
    let _ = writeln!(
        script,
        "case $? in\n\
         0 | 3 | 4) echo \"the gold patch applied\" ;;\n\
         *) echo \"the gold patch applies with none of git apply, git apply --3way and patch --fuzz\" >&2; exit 1 ;;\n\
         esac"
    );
    script
}

/// `tests/test.sh`; see the module documentation.
fn verifier_script(row: &ReleaseInstance, view: &HarnessView) -> String {
    let logs = VERIFIER_LOGS;
    let tests = TESTS_DIR;
    let mut script = String::from("#!/bin/bash\n");
    let _ = writeln!(
        script,
        "# Harbor's verifier for the kiln instance {id}.\n\
         # The files the test patch touches are put back as the base commit has them, the test\n\
         # patch ({TEST_PATCH}) is applied, the rebuild commands and the test command run, and the\n\
         # output is read by the SWE-bench harness parser {parser} ({GRADER}):\n\
         # reward 1 when every test of {FAIL_TO_PASS} and {PASS_TO_PASS} passes, else 0.\n\
         # The reward, the test output and the grading are in {logs}/.",
        id = row.instance_id,
        parser = row.log_parser,
    );
    let _ = writeln!(script, "mkdir -p {logs}");
    let _ = writeln!(script, "echo 0 > {logs}/reward.txt");
    let _ = writeln!(
        script,
        "cd {WORKDIR} || {{ echo \"not graded: no {WORKDIR} in this container\" > {logs}/grading.txt; exit 0; }}"
    );
    for command in reset_test_files(&row.base_commit, &row.test_patch) {
        let _ = writeln!(script, "{command}");
    }
    let _ = writeln!(script, "{}", kiln_core::apply::function());
    let _ = writeln!(
        script,
        "kiln_apply {tests}/{TEST_PATCH} > {logs}/test-patch.txt 2>&1\n\
         case $? in\n\
         0 | 3 | 4) ;;\n\
         *)\n\
         \x20   echo \"not graded: the test patch applies with none of git apply, git apply --3way and patch --fuzz\" > {logs}/grading.txt\n\
         \x20   exit 0 ;;\n\
         esac"
    );
    for command in &row.rebuild_cmds {
        let _ = writeln!(script, "{} >> {logs}/rebuild.txt 2>&1", own_shell(command));
    }
    let _ = writeln!(
        script,
        "{} > {logs}/test-output.txt 2>&1",
        own_shell(&row.test_command())
    );
    let _ = writeln!(script, "test_exit_code=$?");
    let view_path = match view {
        HarnessView::Output => format!("{logs}/test-output.txt"),
        HarnessView::Filtered(_) => {
            let _ = writeln!(
                script,
                "sh {tests}/{VIEW_SCRIPT} < {logs}/test-output.txt > {logs}/harness-view.txt 2>> {logs}/grading.txt"
            );
            format!("{logs}/harness-view.txt")
        }
        HarnessView::WithLines(_) => {
            let _ = writeln!(
                script,
                "if sh {tests}/{VIEW_SCRIPT} < {logs}/test-output.txt > {logs}/test-ids.txt 2>> {logs}/grading.txt; then\n\
                 \x20   {{ cat {logs}/test-output.txt; echo; cat {logs}/test-ids.txt; }} > {logs}/harness-view.txt\n\
                 else\n\
                 \x20   cp {logs}/test-output.txt {logs}/harness-view.txt\n\
                 fi"
            );
            format!("{logs}/harness-view.txt")
        }
    };
    let _ = writeln!(
        script,
        "if LC_ALL=C awk -v parser={parser} -v exit_code=\"$test_exit_code\" \\\n\
         \x20   -v fail_to_pass={tests}/{FAIL_TO_PASS} -v pass_to_pass={tests}/{PASS_TO_PASS} \\\n\
         \x20   -f {tests}/{GRADER} {view_path} >> {logs}/grading.txt 2>&1; then\n\
         \x20   echo 1 > {logs}/reward.txt\n\
         fi\n\
         cat {logs}/grading.txt",
        parser = quote(&row.log_parser),
    );
    script
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::process::Command;

    use kiln_schema::InstanceId;

    use super::*;

    /// Runs `script` with bash in `dir`, with a git identity; returns stdout and stderr.
    fn sh(dir: &Path, script: &str) -> std::process::Output {
        Command::new("bash")
            .arg("-c")
            .arg(script)
            .current_dir(dir)
            .env("GIT_AUTHOR_NAME", "k")
            .env("GIT_AUTHOR_EMAIL", "k@k")
            .env("GIT_COMMITTER_NAME", "k")
            .env("GIT_COMMITTER_EMAIL", "k@k")
            .output()
            .unwrap()
    }

    #[track_caller]
    fn ok(dir: &Path, script: &str) -> String {
        let out = sh(dir, script);
        assert!(out.status.success(), "{script}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    }

    /// The fixture's test runner: each `tests/case_*.sh` is a test, printed in the format its
    /// argument names; exits 1 when one fails.
    const RUNNER: &str = r#"#!/bin/sh
fmt=$1
status=0
for case in tests/case_*.sh; do
  name=$(basename "$case" .sh)
  if sh "$case"; then ok=1; else ok=0; status=1; fi
  case $fmt in
  pytest) if [ $ok = 1 ]; then echo "PASSED $case::$name"; else echo "FAILED $case::$name - assert 1 - 2"; fi ;;
  cargo) echo "     Running tests/$name.rs (target/debug/deps/$name-0123abcd)"
         if [ $ok = 1 ]; then echo "test same ... ok"; else echo "test same ... FAILED"; fi ;;
  lines) if [ $ok = 1 ]; then echo "check $name: good"; else echo "check $name: BAD"; fi ;;
  esac
done
exit $status
"#;

    /// Awkward text for files, patches and the problem statement: quotes, a line that is a
    /// heredoc delimiter, `$` and backticks, non-ASCII, CRLF line ends.
    const AWKWARD: &str =
        "EOF\r\n'single' \"double\" $HOME `tick` \\n\r\nünïcödé ✓ 中文\r\nEOF_0\r\n";

    /// A repository at `dir/testbed` with a bug (`src/value.txt` is 1), and the row whose test
    /// patch adds a test of it and whose gold patch fixes it; patches made by git.
    fn fixture(dir: &Path, format: &str) -> ReleaseInstance {
        let repo = dir.join("testbed");
        std::fs::create_dir_all(repo.join("src")).unwrap();
        std::fs::create_dir_all(repo.join("tests")).unwrap();
        std::fs::write(repo.join("src/value.txt"), "1\n").unwrap();
        std::fs::write(repo.join("src/notes.txt"), AWKWARD).unwrap();
        std::fs::write(repo.join("tests/run.sh"), RUNNER).unwrap();
        std::fs::write(repo.join("tests/case_old.sh"), "grep -q . src/value.txt\n").unwrap();
        ok(
            &repo,
            "git init -q . && git add -A && git commit -qm base && git rev-parse HEAD > ../base",
        );
        std::fs::write(repo.join("src/value.txt"), "2\n").unwrap();
        std::fs::write(repo.join("src/notes.txt"), format!("{AWKWARD}fixed ✓\r\n")).unwrap();
        let patch = ok(&repo, "git diff --binary && git checkout -q -- .");
        let commented: String = AWKWARD
            .split_inclusive('\n')
            .map(|line| format!("# {line}"))
            .collect();
        std::fs::write(
            repo.join("tests/case_new.sh"),
            format!("{commented}grep -qx 2 src/value.txt\n"),
        )
        .unwrap();
        std::fs::write(
            repo.join("tests/case_old.sh"),
            "# 'kept' \"passing\"\ngrep -q . src/value.txt\n",
        )
        .unwrap();
        let test_patch = ok(
            &repo,
            "git add -A && git diff --cached --binary && git reset -q --hard",
        );
        let base = std::fs::read_to_string(dir.join("base")).unwrap();
        let (parser, log_parser, parser_script, fail_to_pass, pass_to_pass) = match format {
            "pytest" => (
                "pytest",
                "parse_log_pytest_v2",
                None,
                "tests/case_new.sh::case_new",
                "tests/case_old.sh::case_old",
            ),
            "cargo" => (
                "cargo",
                "parse_log_cargo",
                None,
                "case_new::test::same",
                "case_old::test::same",
            ),
            _ => (
                "status-lines",
                "parse_log_jest_json",
                Some(
                    "sed -n 's/^check \\(.*\\): good$/[PASSED] \\1/p; s/^check \\(.*\\): BAD$/[FAILED] \\1/p'",
                ),
                "case_new",
                "case_old",
            ),
        };
        ReleaseInstance {
            base_commit: base.trim().to_string(),
            patch,
            test_patch,
            image: "kiln-env/fixture:x".into(),
            platform: "linux".into(),
            parser: parser.into(),
            parser_script: parser_script.map(str::to_string),
            log_parser: log_parser.into(),
            test_cmds: vec![format!("sh tests/run.sh {format}")],
            rebuild_cmds: vec!["echo rebuilt > /dev/null".into()],
            FAIL_TO_PASS: vec![fail_to_pass.to_string()].into(),
            PASS_TO_PASS: vec![pass_to_pass.to_string()].into(),
            ..ReleaseInstance::new(InstanceId::new("kiln__fixture-1").unwrap())
        }
    }

    /// Writes `files` under `dir`, the container's absolute paths moved under `dir` too.
    fn install(dir: &Path, files: &[TaskFile]) {
        for file in files {
            let path = dir.join(&file.path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            let mut contents = file.contents.clone();
            if file.executable {
                contents = relocate(dir, &String::from_utf8(contents).unwrap()).into_bytes();
            }
            std::fs::write(path, contents).unwrap();
        }
    }

    /// A script's container paths (`/testbed`, `/tests/`, `/solution/`, `/logs/verifier`)
    /// moved under `dir`: only this test does so.
    fn relocate(dir: &Path, script: &str) -> String {
        let at = |p: &str| dir.join(p).to_string_lossy().into_owned();
        script
            .replace(VERIFIER_LOGS, &at("logs"))
            .replace(&format!("cd {WORKDIR}"), &format!("cd {}", at("testbed")))
            .replace(&format!("{TESTS_DIR}/"), &format!("{}/", at("tests")))
            .replace(&format!("{SOLUTION_DIR}/"), &format!("{}/", at("solution")))
    }

    fn reward(dir: &Path) -> String {
        std::fs::read_to_string(dir.join("logs/reward.txt")).unwrap()
    }

    fn grading(dir: &Path) -> String {
        std::fs::read_to_string(dir.join("logs/grading.txt")).unwrap_or_default()
    }

    /// Harbor's order: the agent (here none, or the oracle) in the checkout, then the tests
    /// copied in and `test.sh` run; returns the reward.
    fn trial(format: &str, oracle: bool, agent: &str) -> (PathBuf, tempfile::TempDir, String) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let row = fixture(&dir, format);
        install(&dir, &oracle_files(&row));
        ok(&dir.join("testbed"), agent);
        if oracle {
            let out = sh(&dir, "bash solution/solve.sh");
            assert!(out.status.success(), "{out:?}");
        }
        install(&dir, &verifier_files(&row).unwrap());
        let out = sh(&dir, "bash tests/test.sh");
        assert!(out.status.success(), "{out:?}");
        let reward = reward(&dir);
        (dir, tmp, reward)
    }

    #[test]
    fn the_oracle_scores_1_and_no_change_scores_0_for_every_harness_view() {
        for format in ["pytest", "cargo", "lines"] {
            let (dir, _tmp, with_fix) = trial(format, true, "true");
            assert_eq!(with_fix, "1\n", "{format}: {}", grading(&dir));
            assert!(
                grading(&dir).contains("resolved: all 2"),
                "{}",
                grading(&dir)
            );
            let (dir, _tmp, without) = trial(format, false, "true");
            assert_eq!(without, "0\n", "{format}: {}", grading(&dir));
            assert!(
                grading(&dir).contains("not resolved: 1 of 2"),
                "{}",
                grading(&dir)
            );
        }
    }

    /// What an agent did to the test patch's files does not count: a test it edited to pass and
    /// a test file it created are put back before the test patch.
    #[test]
    fn the_agent_cannot_grade_itself_through_the_test_files() {
        let cheat =
            "printf 'exit 0\\n' > tests/case_new.sh && printf 'exit 1\\n' > tests/case_old.sh";
        let (dir, _tmp, cheated) = trial("pytest", false, cheat);
        assert_eq!(cheated, "0\n", "{}", grading(&dir));
        assert!(
            grading(&dir).contains("FAIL_TO_PASS FAILED: tests/case_new.sh::case_new"),
            "{}",
            grading(&dir)
        );
        // The edited passing test was put back and passes again.
        assert!(
            grading(&dir).contains("PASS_TO_PASS PASSED: tests/case_old.sh::case_old"),
            "{}",
            grading(&dir)
        );
        let (dir, _tmp, fixed) = trial("pytest", true, cheat);
        assert_eq!(fixed, "1\n", "{}", grading(&dir));
    }

    /// A test run that exits non-zero while printing only passes (a patch that prints its own
    /// PASSED lines) scores 0, as the harness has it.
    #[test]
    fn printed_passes_with_a_failing_exit_code_score_0() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let mut row = fixture(dir, "pytest");
        row.test_cmds = vec![
            "echo 'PASSED tests/case_new.sh::case_new'; echo 'PASSED tests/case_old.sh::case_old'; exit 1"
                .into(),
        ];
        install(dir, &verifier_files(&row).unwrap());
        let out = sh(dir, "bash tests/test.sh");
        assert!(out.status.success(), "{out:?}");
        assert_eq!(reward(dir), "0\n");
        assert!(grading(dir).contains("an invalid run"), "{}", grading(dir));
    }

    /// Patches and lists reach the task byte for byte (CRLF, quotes, `EOF` lines, non-ASCII),
    /// the oracle applies the gold patch exactly, and both scripts are LF bash scripts.
    #[test]
    fn awkward_text_survives_into_the_task_exactly() {
        let (dir, _tmp, _) = trial("pytest", true, "true");
        let row = fixture(&tempfile::tempdir().unwrap().path().join("x"), "pytest");
        let files: Vec<TaskFile> = oracle_files(&row)
            .into_iter()
            .chain(verifier_files(&row).unwrap())
            .collect();
        let find = |path: &str| -> &TaskFile {
            files
                .iter()
                .find(|f| f.path == path)
                .unwrap_or_else(|| panic!("no {path}"))
        };
        assert_eq!(find("solution/gold.patch").contents, row.patch.as_bytes());
        assert_eq!(find("tests/test.patch").contents, row.test_patch.as_bytes());
        assert!(row.patch.contains("\r\n") && row.patch.contains("ünïcödé ✓ 中文"));
        assert!(
            row.test_patch.contains("\n+# EOF\r\n"),
            "{}",
            row.test_patch
        );
        assert_eq!(
            find("tests/FAIL_TO_PASS.txt").contents,
            b"tests/case_new.sh::case_new\n"
        );
        for script in ["tests/test.sh", "solution/solve.sh"] {
            let file = find(script);
            assert!(file.executable, "{script}");
            let text = String::from_utf8(file.contents.clone()).unwrap();
            assert!(text.starts_with("#!/bin/bash\n"), "{script}");
            assert!(!text.contains('\r'), "{script} holds a CR");
            let syntax = Command::new("bash").args(["-n", "-c", &text]).status();
            assert!(syntax.is_ok_and(|s| s.success()), "{script}");
        }
        // The checkout after the oracle and the verifier holds the fixed files byte for byte.
        assert_eq!(
            std::fs::read_to_string(dir.join("testbed/src/notes.txt")).unwrap(),
            format!("{AWKWARD}fixed ✓\r\n")
        );
    }

    #[test]
    fn rows_the_grader_cannot_judge_are_unfit() {
        let tmp = tempfile::tempdir().unwrap();
        let row = fixture(tmp.path(), "pytest");
        assert_eq!(unfit(&row), None);
        let no_parser = ReleaseInstance {
            log_parser: String::new(),
            harness_note: "no SWE-bench parser reads kiln's `x` output".into(),
            ..row.clone()
        };
        assert!(
            unfit(&no_parser).is_some_and(|r| r.contains("no SWE-bench parser")),
            "{:?}",
            unfit(&no_parser)
        );
        let no_image = ReleaseInstance {
            image: String::new(),
            ..row.clone()
        };
        assert!(verifier_files(&no_image).is_err());
        let windows = ReleaseInstance {
            platform: "windows".into(),
            ..row.clone()
        };
        assert!(unfit(&windows).is_some());
        let no_tests = ReleaseInstance {
            FAIL_TO_PASS: Vec::new().into(),
            ..row
        };
        assert!(unfit(&no_tests).is_some());
    }
}
