//! How kiln's FAIL_TO_PASS and PASS_TO_PASS agree with the lists a benchmark published for the
//! same instance: as strings, and by meaning across granularities.
//!
//! Benchmarks name tests at different grains and with different qualifiers: SWE-bench uses
//! pytest node ids, Verified's sympy rows bare function names (`test_Min`), Multi-SWE-bench
//! whatever its parser emitted (a cargo path, a ctest target, a Java class, a jest file), some
//! rows truncated parametrised ids. By meaning, a published name matches a kiln id when one is
//! the other with a qualifier added at a separator (`test_Min` and
//! `sympy/.../test_miscellaneous.py::test_Min`; `tests::it` and `dup::lib::tests::it`), when one
//! names a group the other lies in (`tests/test_x.py` and `tests/test_x.py::test_a`, a Java
//! class and its methods), when a cut-off parametrised id is a prefix, or when only a doctest's
//! `(line N)` differs.

use std::collections::BTreeSet;

pub use kiln_schema::Relation;

/// The agreement of kiln's list with a published one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agreement {
    /// As strings (after kiln's id normalisation).
    pub exact: Relation,
    /// By meaning.
    pub by_meaning: Relation,
    /// Published names that match no kiln id, by meaning.
    pub missing: Vec<String>,
    /// kiln ids that match no published name, by meaning.
    pub extra: Vec<String>,
}

/// Characters at which a qualifier or a group name ends.
const SEPARATORS: &[&str] = &["::", ".", "/", " ", "#", " > ", " › ", ":", "$"];

/// A doctest name without its `(line N)`, which moves with every edit above the example.
fn without_line(id: &str) -> &str {
    match id.rfind(" (line ") {
        Some(at) if id.ends_with(')') => &id[..at],
        _ => id,
    }
}

/// Whether `long` is `short` with something added at a separator, before or after.
fn extends(long: &str, short: &str) -> bool {
    if short.is_empty() || long.len() <= short.len() {
        return false;
    }
    let qualified_before = long.ends_with(short)
        && SEPARATORS
            .iter()
            .any(|s| long[..long.len() - short.len()].ends_with(s));
    let grouped_after = long.starts_with(short)
        && (SEPARATORS
            .iter()
            .any(|s| long[short.len()..].starts_with(s))
            || long[short.len()..].starts_with('['));
    qualified_before || grouped_after
}

/// A name with every separator written as one space: benchmarks join the same suite path
/// with different characters (`css.should markup url` for mocha's `css should markup url`).
fn canonical(id: &str) -> String {
    let mut text = id.to_string();
    for separator in ["::", " › ", " > ", ".", "/", "#", "$"] {
        text = text.replace(separator, " ");
    }
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Whether a published name and a kiln id name the same test (or one names a group holding the
/// other).
#[must_use]
pub fn same_by_meaning(published: &str, ours: &str) -> bool {
    let (p, o) = (without_line(published.trim()), without_line(ours.trim()));
    if p == o || extends(o, p) || extends(p, o) {
        return true;
    }
    let (cp, co) = (canonical(p), canonical(o));
    if !cp.is_empty() && (cp == co || extends(&co, &cp) || extends(&cp, &co)) {
        return true;
    }
    // A parametrised id cut short (`test_x[a very long par`): the kiln id continues it.
    if let Some(open) = p.rfind('[')
        && !p[open..].contains(']')
        && o.starts_with(p)
    {
        return true;
    }
    false
}

fn relation(all_given_matched: bool, all_ours_matched: bool, any: bool) -> Relation {
    match (all_given_matched, all_ours_matched) {
        (true, true) => Relation::Exact,
        (true, false) => Relation::Superset,
        (false, true) => Relation::Subset,
        (false, false) if any => Relation::Overlap,
        (false, false) => Relation::Disjoint,
    }
}

/// Compares kiln's list with a published one; `None` when nothing was published.
#[must_use]
pub fn compare(published: &[String], ours: &[String]) -> Option<Agreement> {
    if published.is_empty() {
        return None;
    }
    if ours.is_empty() {
        // An instance kiln found no test for (rejected) shares nothing with the published list.
        return Some(Agreement {
            exact: Relation::Disjoint,
            by_meaning: Relation::Disjoint,
            missing: published.to_vec(),
            extra: Vec::new(),
        });
    }
    let norm = |s: &String| kiln_testlog::normalize_test_id(s);
    let given: BTreeSet<String> = published.iter().map(norm).collect();
    let mine: BTreeSet<String> = ours.iter().map(norm).collect();
    let common = given.intersection(&mine).count();
    let exact = relation(common == given.len(), common == mine.len(), common > 0);
    let missing: Vec<String> = given
        .iter()
        .filter(|g| !mine.iter().any(|o| same_by_meaning(g, o)))
        .cloned()
        .collect();
    let extra: Vec<String> = mine
        .iter()
        .filter(|o| !given.iter().any(|g| same_by_meaning(g, o)))
        .cloned()
        .collect();
    let any = missing.len() < given.len();
    let by_meaning = relation(missing.is_empty(), extra.is_empty(), any);
    Some(Agreement {
        exact,
        by_meaning,
        missing,
        extra,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_string()).collect()
    }

    #[test]
    fn names_match_across_granularities() {
        for (published, ours) in [
            (
                "test_Min",
                "sympy/functions/elementary/tests/test_miscellaneous.py::test_Min",
            ),
            ("tests::same", "dup::lib::tests::same"),
            ("tests/test_x.py", "tests/test_x.py::test_a"),
            (
                "com.example.ParserTest",
                "com.example.ParserTest.parsesEmpty",
            ),
            (
                "tests/test_x.py::test_p[a very long para",
                "tests/test_x.py::test_p[a very long parameter]",
            ),
            ("src/lib.rs - add (line 5)", "src/lib.rs - add"),
            (
                "test/format.test.js",
                "test/format.test.js::format › round-trips",
            ),
            ("test_x.py::test_p", "test_x.py::test_p[1]"),
            // mocha's full title against a benchmark that joins the suite path with dots.
            (
                "css.should markup url",
                "test/markup/index.js::css should markup url",
            ),
            (
                "COMBINED: All grammars.have 7597 total regex",
                "test/regex/index.js::COMBINED: All grammars have 7597 total regex",
            ),
        ] {
            assert!(same_by_meaning(published, ours), "{published} ~ {ours}");
        }
        for (published, ours) in [
            ("test_Min", "tests/test_x.py::test_Minimum"),
            ("tests::same", "tests::same_name"),
            ("test_a", "test_ab"),
            (
                "css.should markup url",
                "test/markup/index.js::scss should markup url",
            ),
        ] {
            assert!(!same_by_meaning(published, ours), "{published} !~ {ours}");
        }
    }

    #[test]
    fn relations_as_strings_and_by_meaning() {
        let ours = strings(&[
            "pkg/tests/test_m.py::test_Min",
            "pkg/tests/test_m.py::test_Max",
        ]);
        let a = compare(&strings(&["test_Min", "test_Max"]), &ours).unwrap();
        assert_eq!(
            (a.exact, a.by_meaning),
            (Relation::Disjoint, Relation::Exact)
        );
        let a = compare(&strings(&["test_Min"]), &ours).unwrap();
        assert_eq!(a.by_meaning, Relation::Superset);
        assert_eq!(a.extra, ["pkg/tests/test_m.py::test_Max"]);
        let a = compare(&strings(&["test_Min", "test_Other"]), &ours).unwrap();
        assert_eq!(a.by_meaning, Relation::Overlap);
        assert_eq!(a.missing, ["test_Other"]);
        let a = compare(&ours, &ours).unwrap();
        assert_eq!((a.exact, a.by_meaning), (Relation::Exact, Relation::Exact));
        let a = compare(&strings(&["x"]), &[]).unwrap();
        assert_eq!(
            (a.exact, a.by_meaning),
            (Relation::Disjoint, Relation::Disjoint)
        );
        let a = compare(&ours, &ours[..1]).unwrap();
        assert_eq!(a.exact, Relation::Subset);
        assert!(compare(&[], &ours).is_none());
    }
}
