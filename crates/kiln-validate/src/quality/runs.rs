//! Whether the repeated runs of a side agree: a run whose tests end otherwise than the side's
//! first run shows an environment or a test that does not repeat, even when no single test was
//! dropped as flaky.

use crate::decide::{RunResult, Side};

/// How many runs of `side` gave, test by test, the statuses of the side's first run (the one
/// with the lowest repeat number), the first included: the side's run count when every run
/// agreed, 0 when the side has no run. A test present in one run and absent from another is a
/// difference.
#[must_use]
pub fn identical_runs(runs: &[RunResult], side: Side) -> usize {
    let of_side: Vec<&RunResult> = runs.iter().filter(|r| r.side == side).collect();
    let Some(first) = of_side.iter().min_by_key(|r| r.repeat) else {
        return 0;
    };
    of_side
        .iter()
        .filter(|r| r.statuses == first.statuses)
        .count()
}

#[cfg(test)]
mod tests {
    use kiln_schema::{TestStatus, TestStatuses};

    use super::*;

    fn run(side: Side, repeat: usize, statuses: &[(&str, TestStatus)]) -> RunResult {
        RunResult {
            side,
            repeat,
            exit_code: 1,
            statuses: statuses
                .iter()
                .map(|(id, s)| ((*id).to_string(), *s))
                .collect::<TestStatuses>(),
            parse_problems: Vec::new(),
        }
    }

    /// Three runs a side that agree count 3; a run where one test changed status, or where a
    /// test is missing, does not count; each side is counted on its own.
    #[test]
    fn runs_that_repeat_the_first_are_counted_per_side() {
        use TestStatus::{Fail, Pass};
        let steady = [("t::a", Fail), ("t::b", Pass)];
        let runs = vec![
            run(Side::Before, 1, &steady),
            run(Side::After, 1, &[("t::a", Pass), ("t::b", Pass)]),
            run(Side::Before, 2, &steady),
            run(Side::After, 2, &[("t::a", Pass), ("t::b", Fail)]),
            run(Side::Before, 3, &steady),
            run(Side::After, 3, &[("t::a", Pass)]),
        ];
        assert_eq!(identical_runs(&runs, Side::Before), 3);
        assert_eq!(identical_runs(&runs, Side::After), 1);
        assert_eq!(identical_runs(&runs, Side::Base), 0);
        // The first run is the lowest repeat, whatever the order the runs came in.
        let reordered = vec![
            run(Side::After, 2, &[("t::a", Fail)]),
            run(Side::After, 1, &[("t::a", Pass)]),
            run(Side::After, 3, &[("t::a", Pass)]),
        ];
        assert_eq!(identical_runs(&reordered, Side::After), 2);
    }
}
