//! How hard an instance looks from its fix: a band (`easy`, `medium`, `hard`) from the size of
//! the gold patch and the number of tests it makes pass.
//!
//! Five measures, each worth 0, 1 or 2 points by the bounds of [`BOUNDS`] (0 at or under the
//! first bound, 1 at or under the second, 2 above it):
//!
//! | measure | 0 points | 1 point | 2 points |
//! |---|---|---|---|
//! | lines changed (added and removed, not blank) | ≤ 6 | 7–30 | > 30 |
//! | hunks | 1 | 2–3 | > 3 |
//! | files | 1 | 2 | > 2 |
//! | functions touched | ≤ 1 | 2–3 | > 3 |
//! | FAIL_TO_PASS tests | ≤ 2 | 3–10 | > 10 |
//!
//! The band is `easy` for 0–1 points ([`EASY_UP_TO`]), `hard` for 7–10 ([`HARD_FROM`]),
//! `medium` between. Documentation files (`.md`, `.rst`, `.adoc`) are not counted. The
//! functions touched are, per file, the functions or classes the changed lines are in (the
//! nearest definition above each in its hunk, `def name`, `fn name`, `func name`,
//! `function name` or `class Name`, else the function context git writes after the hunk's
//! header, `@@ -1,3 +1,4 @@ def area(w, h):`) and those the changed lines define. The bounds
//! were set by hand, after SWE-bench Verified's bands (under 15 minutes; 15 minutes to an
//! hour; longer), not fitted to its labels.

use std::collections::{BTreeMap, BTreeSet};

use kiln_schema::Difficulty;

use super::code::{SCOPE_DEFINERS, definitions};
use super::patch::{Change, Hunk, read_patch};

/// What the band is made of.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DifficultyMeasures {
    /// Lines the gold patch adds or removes, blank ones not counted.
    pub lines: usize,
    /// Its hunks.
    pub hunks: usize,
    /// The files it changes (with at least one hunk).
    pub files: usize,
    /// The functions it touches.
    pub functions: usize,
    /// The tests it makes pass.
    pub fail_to_pass: usize,
}

/// The bounds of each measure's points, in the order of the fields of [`DifficultyMeasures`]:
/// a measure at or under the first bound is worth 0 points, at or under the second 1, else 2.
pub const BOUNDS: [(&str, usize, usize); 5] = [
    ("lines", 6, 30),
    ("hunks", 1, 3),
    ("files", 1, 2),
    ("functions", 1, 3),
    ("fail_to_pass", 2, 10),
];

/// The most points an `easy` instance has.
pub const EASY_UP_TO: usize = 1;

/// The fewest points a `hard` instance has.
pub const HARD_FROM: usize = 7;

impl DifficultyMeasures {
    /// The measures of `patch` (a gold patch) and a FAIL_TO_PASS list of `fail_to_pass` tests.
    #[must_use]
    pub fn of(patch: &str, fail_to_pass: usize) -> Self {
        let mut measures = Self {
            fail_to_pass,
            ..Self::default()
        };
        let files = read_patch(patch)
            .into_iter()
            .filter(|f| !f.hunks.is_empty() && !kiln_core::judge::is_documentation(&f.path));
        for file in files {
            measures.files += 1;
            measures.hunks += file.hunks.len();
            measures.lines += file
                .hunks
                .iter()
                .flat_map(|h| &h.lines)
                .filter(|(change, line)| *change != Change::Unchanged && !line.trim().is_empty())
                .count();
            measures.functions += touched_scopes(&file.hunks).len();
        }
        measures
    }

    /// The measures in the order of [`BOUNDS`], with their names.
    #[must_use]
    pub fn named(&self) -> [(&'static str, usize); 5] {
        [
            ("lines", self.lines),
            ("hunks", self.hunks),
            ("files", self.files),
            ("functions", self.functions),
            ("fail_to_pass", self.fail_to_pass),
        ]
    }

    /// The points of the measures, 0 to 10.
    #[must_use]
    pub fn points(&self) -> usize {
        self.named()
            .iter()
            .zip(BOUNDS)
            .map(|((_, value), (_, low, high))| match *value {
                v if v <= low => 0,
                v if v <= high => 1,
                _ => 2,
            })
            .sum()
    }

    /// The measures and their points by name, as the `difficulty_measures` column stores them.
    #[must_use]
    pub fn to_map(&self) -> BTreeMap<String, i64> {
        self.named()
            .into_iter()
            .chain([("points", self.points())])
            .map(|(name, value)| (name.to_string(), i64::try_from(value).unwrap_or(i64::MAX)))
            .collect()
    }

    /// The band of the points.
    #[must_use]
    pub fn band(&self) -> Difficulty {
        match self.points() {
            p if p <= EASY_UP_TO => Difficulty::Easy,
            p if p >= HARD_FROM => Difficulty::Hard,
            _ => Difficulty::Medium,
        }
    }
}

/// The functions (or classes) a file's hunks touch: for each changed line that is not blank,
/// the nearest definition above it in its hunk, else the one the hunk's header names (git's
/// function context, taken as it is when it defines nothing git's rules know, like an
/// `impl` line); and each one a changed line defines.
fn touched_scopes(hunks: &[Hunk]) -> BTreeSet<String> {
    let mut touched = BTreeSet::new();
    for hunk in hunks {
        let mut scope = scope_of(&hunk.context)
            .or_else(|| (!hunk.context.is_empty()).then(|| hunk.context.clone()));
        for (change, line) in &hunk.lines {
            let changed = *change != Change::Unchanged;
            if let Some(defined) = scope_of(line) {
                if changed {
                    touched.insert(defined.clone());
                }
                scope = Some(defined);
            }
            if changed
                && !line.trim().is_empty()
                && let Some(scope) = &scope
            {
                touched.insert(scope.clone());
            }
        }
    }
    touched
}

/// The function or class `line` defines, as `def name`.
fn scope_of(line: &str) -> Option<String> {
    definitions(line)
        .into_iter()
        .find(|(definer, _)| SCOPE_DEFINERS.contains(definer))
        .map(|(definer, name)| format!("{definer} {name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hunk of `file` at the line `at`, with `context` after its header, removing one line
    /// and adding `added`.
    fn hunk(context: &str, at: usize, added: &[&str]) -> String {
        let mut text = format!("@@ -{at} +{at},{} @@ {context}\n-old\n", added.len());
        for line in added {
            text.push_str(&format!("+{line}\n"));
        }
        text
    }

    fn file(path: &str, hunks: &[String]) -> String {
        format!(
            "diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n{}",
            hunks.concat()
        )
    }

    #[test]
    fn a_one_line_fix_is_easy() {
        let patch = file("src/ops.py", &[hunk("def divide(a, b):", 3, &["    x"])]);
        let measures = DifficultyMeasures::of(&patch, 1);
        assert_eq!(
            measures,
            DifficultyMeasures {
                lines: 2,
                hunks: 1,
                files: 1,
                functions: 1,
                fail_to_pass: 1
            }
        );
        assert_eq!((measures.points(), measures.band()), (0, Difficulty::Easy));
        assert_eq!(measures.to_map()["lines"], 2);
        assert_eq!(measures.to_map()["points"], 0);
        // The changelog beside it changes nothing.
        let with_changelog = patch.clone() + &file("CHANGELOG.md", &[hunk("", 1, &["- fixed"])]);
        assert_eq!(DifficultyMeasures::of(&with_changelog, 1), measures);
    }

    #[test]
    fn a_fix_across_functions_and_files_is_medium_or_hard() {
        // Two hunks in two functions of one file, 12 lines, 3 tests: 1 + 1 + 0 + 1 + 1 = 4.
        let ten = ["    y"; 10];
        let patch = file(
            "src/ops.py",
            &[hunk("def a():", 3, &ten), hunk("def b():", 30, &[])],
        );
        let measures = DifficultyMeasures::of(&patch, 3);
        assert_eq!(
            (measures.lines, measures.hunks, measures.functions),
            (12, 2, 2)
        );
        assert_eq!(
            (measures.points(), measures.band()),
            (4, Difficulty::Medium)
        );
        // Four files, a new function in each beside the one its hunk is in, 16 lines, 12
        // tests: 1 + 2 + 2 + 2 + 2.
        let new_fn = ["fn helper() {", "    x();", "}", "", "", "", "", "", ""];
        let files: String = ["a.rs", "b.rs", "c.rs", "d.rs"]
            .iter()
            .map(|path| file(path, &[hunk("fn main() {", 1, &new_fn)]))
            .collect();
        let measures = DifficultyMeasures::of(&files, 12);
        assert_eq!(
            measures,
            DifficultyMeasures {
                lines: 16,
                hunks: 4,
                files: 4,
                functions: 8,
                fail_to_pass: 12
            }
        );
        assert_eq!((measures.points(), measures.band()), (9, Difficulty::Hard));
    }

    /// A change is in the nearest definition above it in its hunk: git's header names the
    /// class, the hunk shows the methods.
    #[test]
    fn functions_touched_are_the_definitions_above_the_changes() {
        let patch = "diff --git a/p.py b/p.py\n--- a/p.py\n+++ b/p.py\n\
                     @@ -51,9 +51,9 @@ class _Parser:\n         return token\n \n     def expression(self):\n\
                     -        left = self.term()\n+        value = self.term()\n         return left\n \n\
                     \x20    def term(self):\n-        left = self.factor()\n+        value = self.factor()\n\
                     \x20    def factor(self):\n";
        let measures = DifficultyMeasures::of(patch, 1);
        assert_eq!((measures.functions, measures.lines), (2, 4));
        assert_eq!(
            touched_scopes(&read_patch(patch)[0].hunks),
            BTreeSet::from(["def expression".to_string(), "def term".to_string()])
        );
    }

    #[test]
    fn the_bands_meet_at_their_bounds() {
        let band = |lines, hunks, files, functions, fail_to_pass| {
            DifficultyMeasures {
                lines,
                hunks,
                files,
                functions,
                fail_to_pass,
            }
            .band()
        };
        assert_eq!(band(7, 1, 1, 1, 2), Difficulty::Easy);
        assert_eq!(band(7, 2, 1, 1, 2), Difficulty::Medium);
        assert_eq!(band(31, 4, 3, 1, 2), Difficulty::Medium);
        assert_eq!(band(31, 4, 3, 2, 2), Difficulty::Hard);
    }
}
