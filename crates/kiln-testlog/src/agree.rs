//! A parser script's reading of a test run checked against kiln's own: where one of kiln's
//! parsers reads the run's output, a script that passes what that parser reads as failed is not
//! to be trusted (it may be forged, as an agent's script that prints every test `[PASSED]`).

use kiln_schema::TestStatus;

use crate::parsed::ParsedLog;

/// Why a parser script's statuses cannot stand beside kiln's own reading of the same output,
/// or `None`: where one of kiln's parsers reads the output (detected from it, with the test
/// command as a hint), a test that parser reads as failing (or erring) must not be passing in
/// the script's lines, and a script that reads no failing test where the parser reads some
/// disagrees with it whatever its ids.
#[must_use]
pub fn disagreement(script: &ParsedLog, output: &str, test_command: &str) -> Option<String> {
    let parser = crate::detect(output, Some(test_command))?;
    if parser == "status-lines" {
        return None;
    }
    let own = crate::parse(parser, output).ok()?;
    let failing: Vec<&String> = own
        .statuses
        .iter()
        .filter(|(_, s)| matches!(s, TestStatus::Fail | TestStatus::Error))
        .map(|(id, _)| id)
        .collect();
    let first = failing.first()?;
    if let Some(id) = failing
        .iter()
        .find(|id| script.statuses.get(id.as_str()) == Some(&TestStatus::Pass))
    {
        return Some(format!(
            "the parser script reads `{id}` as passed; kiln's `{parser}` parser reads the same \
             output as a failure"
        ));
    }
    let script_failing = script.count(TestStatus::Fail) + script.count(TestStatus::Error);
    (script_failing == 0).then(|| {
        format!(
            "the parser script reads no failing test; kiln's `{parser}` parser reads {} in the \
             same output (`{first}` among them)",
            failing.len()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(log: &str) -> ParsedLog {
        let mut parser: Box<dyn crate::lines::LineParser> =
            Box::new(crate::status_lines::StatusLines::default());
        crate::lines::feed_str(parser.as_mut(), log);
        parser.finish()
    }

    /// A script that prints every test passed, where the runner's own report (which kiln's
    /// parser reads) says one failed, disagrees with it, by id or, when its ids differ, by count.
    #[test]
    fn a_script_that_passes_what_the_runner_failed_disagrees() {
        let output = "============================= test session starts ==============================\n\
collected 2 items\n\n\
tests/test_a.py::test_one PASSED [ 50%]\n\
tests/test_a.py::test_two FAILED [100%]\n\n\
=========================== short test summary info ============================\n\
FAILED tests/test_a.py::test_two - RuntimeError\n\
========================= 1 failed, 1 passed in 0.02s ==========================\n";
        let forged =
            parse("[PASSED] tests/test_a.py::test_one\n[PASSED] tests/test_a.py::test_two\n");
        let why = disagreement(&forged, output, "pytest -rA tests");
        assert!(
            why.as_deref().is_some_and(|w| w.contains("test_two")),
            "{why:?}"
        );
        let renamed = parse("[PASSED] one\n[PASSED] two\n");
        let why = disagreement(&renamed, output, "pytest -rA tests");
        assert!(
            why.as_deref().is_some_and(|w| w.contains("reads 1")),
            "{why:?}"
        );
        let honest = parse("[PASSED] one\n[FAILED] two\n");
        assert_eq!(disagreement(&honest, output, "pytest -rA tests"), None);
        // Output no parser of kiln's reads: the script is all there is.
        assert_eq!(
            disagreement(&forged, "ran 2 cases, all fine\n", "./run"),
            None
        );
    }
}
