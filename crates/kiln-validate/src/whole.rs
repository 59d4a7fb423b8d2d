//! The sampled whole-suite check: where launch narrowed the tests to the files the test patch
//! touches (`test_scope`), a fix can still break a part of the suite no validation run looks
//! at. One validated row in `full_suite_every` (by a hash of its id, so that a re-run, a resumed
//! stage and every shard sample the same rows) runs the environment's `whole_test_command` once
//! in each side's build, and the row names the tests outside the narrowed scope that passed
//! with the test patch alone and fail or err with the gold patch too.

use std::collections::BTreeSet;

use kiln_schema::{TestStatus, TestStatuses};

/// Whether the row of `instance_id` is in the sample of one in `every` (none when `every` is 0,
/// all when it is 1): FNV-1a of the id, so the sample is the same on every machine and run.
#[must_use]
pub fn sampled(instance_id: &str, every: i64) -> bool {
    let Ok(every) = u64::try_from(every) else {
        return false;
    };
    if every == 0 {
        return false;
    }
    let hash = instance_id
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        });
    hash % every == 0
}

/// What one side's whole-suite run gave.
#[derive(Debug, Clone, PartialEq)]
pub enum SideRun {
    /// The statuses it reported.
    Ran(TestStatuses),
    /// Why it gave none: the side did not build, the run timed out.
    Missing(String),
}

/// The two runs of the check.
#[derive(Debug, Clone, PartialEq)]
pub struct WholeSuite {
    /// With the test patch alone.
    pub before: SideRun,
    /// With both patches.
    pub after: SideRun,
}

impl WholeSuite {
    /// The row's `whole_suite`: what each run reported, `before: 812 passed, 3 failed; after:
    /// 811 passed, 4 failed`.
    #[must_use]
    pub fn summary(&self) -> String {
        let side = |run: &SideRun| match run {
            SideRun::Ran(statuses) => {
                let count = |wanted: &[TestStatus]| {
                    statuses.values().filter(|s| wanted.contains(s)).count()
                };
                format!(
                    "{} passed, {} failed, {} skipped",
                    count(&[TestStatus::Pass]),
                    count(&[TestStatus::Fail, TestStatus::Error]),
                    count(&[TestStatus::Skip]),
                )
            }
            SideRun::Missing(why) => why.clone(),
        };
        format!(
            "before: {}; after: {}",
            side(&self.before),
            side(&self.after)
        )
    }

    /// The tests outside `scope` (the ids the narrowed runs reported) that passed before and
    /// failed or erred after; none unless both runs reported.
    #[must_use]
    pub fn broken_outside(&self, scope: &BTreeSet<&str>) -> Vec<String> {
        let (SideRun::Ran(before), SideRun::Ran(after)) = (&self.before, &self.after) else {
            return Vec::new();
        };
        before
            .iter()
            .filter(|(id, status)| {
                **status == TestStatus::Pass
                    && !scope.contains(id.as_str())
                    && matches!(
                        after.get(id.as_str()),
                        Some(TestStatus::Fail | TestStatus::Error)
                    )
            })
            .map(|(id, _)| id.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn statuses(pairs: &[(&str, TestStatus)]) -> TestStatuses {
        pairs
            .iter()
            .map(|(id, s)| ((*id).to_string(), *s))
            .collect()
    }

    #[test]
    fn one_row_in_every_is_sampled_the_same_way_each_time() {
        let ids: Vec<String> = (0..1000).map(|i| format!("owner__repo-{i}")).collect();
        let picked = ids.iter().filter(|id| sampled(id, 10)).count();
        assert!((70..=130).contains(&picked), "{picked} of 1000");
        assert_eq!(
            ids.iter().filter(|id| sampled(id, 10)).collect::<Vec<_>>(),
            ids.iter().filter(|id| sampled(id, 10)).collect::<Vec<_>>()
        );
        assert!(ids.iter().all(|id| sampled(id, 1)));
        assert!(!ids.iter().any(|id| sampled(id, 0) || sampled(id, -3)));
    }

    #[test]
    fn a_test_outside_the_scope_that_the_fix_breaks_is_named() {
        use TestStatus::{Error, Fail, Pass, Skip};
        let check = WholeSuite {
            before: SideRun::Ran(statuses(&[
                ("a::in_scope", Pass),
                ("b::broken", Pass),
                ("b::crashes", Pass),
                ("b::was_failing", Fail),
                ("b::skipped_after", Pass),
                ("b::gone_after", Pass),
            ])),
            after: SideRun::Ran(statuses(&[
                ("a::in_scope", Fail),
                ("b::broken", Fail),
                ("b::crashes", Error),
                ("b::was_failing", Fail),
                ("b::skipped_after", Skip),
            ])),
        };
        let scope = BTreeSet::from(["a::in_scope"]);
        assert_eq!(check.broken_outside(&scope), ["b::broken", "b::crashes"]);
        assert_eq!(
            check.summary(),
            "before: 5 passed, 1 failed, 0 skipped; after: 0 passed, 4 failed, 1 skipped"
        );
        let unbuilt = WholeSuite {
            before: SideRun::Missing("did not build".into()),
            ..check
        };
        assert!(unbuilt.broken_outside(&scope).is_empty());
        assert!(
            unbuilt
                .summary()
                .starts_with("before: did not build; after: 0 passed")
        );
    }
}
