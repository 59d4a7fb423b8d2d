//! The runner's own listing of the tests the test patch's files define, read from its output
//! in the `after` side's build: what the runner collects there, not what the files' text
//! suggests (inherited test methods, generated and parametrised tests, classes the runner does
//! not collect). A file the runner could not import is named apart: its tests are then counted
//! from its text ([`super::tests_collected`]), since the environment that lost them cannot list
//! them either.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;

/// The tests a listing named, and the files it could not collect.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Listing {
    /// Test ids, as the row's parser names them (`path::Class::test[param]`).
    pub ids: BTreeSet<String>,
    /// Files whose collection failed (`ERROR path`).
    pub errored: BTreeSet<String>,
}

/// pytest's last line of a listing: `3 tests collected in 0.01s`, `2/3 tests collected (1
/// deselected)`, `1 test collected, 1 error`, `no tests collected`.
static COLLECTED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?m)^=*\s*(\d+|no)(?:/\d+)? tests? collected").expect("regex"));
/// A file pytest could not collect, in its section header or in the short summary.
static ERRORED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?m)^(?:_+ ERROR collecting (\S+) _+|ERROR (\S+?)(?: - .*)?)\s*$").expect("regex")
});

impl Listing {
    /// `pytest --collect-only -q` output read: the node ids it lists before its first section
    /// (warnings, errors), and the files it names as failing to collect; `None` when the
    /// output does not end as a listing does (pytest did not run, or stopped), or lists
    /// another number of ids than it counts (a project's own `-v` in `addopts` turns the list
    /// into a tree of nodes).
    #[must_use]
    pub fn from_pytest(output: &str) -> Option<Self> {
        let count = COLLECTED.captures_iter(output).last()?;
        let count: usize = match &count[1] {
            "no" => 0,
            n => n.parse().ok()?,
        };
        let ids: BTreeSet<String> = output
            .lines()
            .take_while(|line| !line.starts_with('='))
            .filter(|line| {
                line.contains("::")
                    && !line.starts_with(char::is_whitespace)
                    && !line.starts_with("ERROR")
            })
            .map(|line| line.trim_end().to_string())
            .collect();
        if ids.len() != count {
            return None;
        }
        let errored = ERRORED
            .captures_iter(output)
            .filter_map(|c| c.get(1).or_else(|| c.get(2)))
            .map(|m| m.as_str().to_string())
            .collect();
        Some(Self { ids, errored })
    }

    /// Whether the runner failed to collect `path` (named from the repository's root; pytest
    /// names it from its rootdir, which may be a directory below).
    #[must_use]
    pub fn errored(&self, path: &str) -> bool {
        self.errored.iter().any(|file| same_file(file, path))
    }

    /// The ids the listing names in `path`.
    pub fn ids_of<'a>(&'a self, path: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.ids
            .iter()
            .filter(move |id| {
                id.split_once("::")
                    .is_some_and(|(file, _)| same_file(file, path))
            })
            .map(String::as_str)
    }
}

/// Whether a runner's name of a test's file (`file`, relative or absolute) is `path`.
pub(super) fn same_file(file: &str, path: &str) -> bool {
    file == path
        || file
            .strip_suffix(path)
            .is_some_and(|head| head.ends_with('/'))
        || path
            .strip_suffix(file)
            .is_some_and(|head| head.ends_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_names_its_tests_and_the_files_it_could_not_collect() {
        // pytest 7's output for two files, one of which fails to import, with a warning.
        let output = "tests/test_a.py::test_one\n\
                      tests/test_a.py::TestB::test_two[x y]\n\
                      \n\
                      ==================================== ERRORS ====================================\n\
                      _____________________ ERROR collecting tests/test_c.py ______________________\n\
                      ImportError while importing test module '/testbed/tests/test_c.py'.\n\
                      E   ModuleNotFoundError: No module named 'yaml'\n\
                      =============================== warnings summary ===============================\n\
                      tests/test_a.py::test_one\n  DeprecationWarning: old\n\
                      =========================== short test summary info ============================\n\
                      ERROR tests/test_c.py - ModuleNotFoundError: No module named 'yaml'\n\
                      2 tests collected, 1 error in 0.12s\n";
        let listing = Listing::from_pytest(output).unwrap();
        assert_eq!(
            listing.ids,
            BTreeSet::from([
                "tests/test_a.py::test_one".to_string(),
                "tests/test_a.py::TestB::test_two[x y]".to_string(),
            ])
        );
        assert!(listing.errored("tests/test_c.py"));
        assert!(!listing.errored("tests/test_a.py"));
        assert_eq!(listing.ids_of("tests/test_a.py").count(), 2);
        assert_eq!(listing.ids_of("tests/test_a").count(), 0);
        // pytest names files from its rootdir, which may be below the repository's root.
        assert_eq!(listing.ids_of("python/tests/test_a.py").count(), 2);
        assert!(listing.errored("python/tests/test_c.py"));
        // Deselected tests and an empty listing still end as listings; a crash does not.
        assert!(
            Listing::from_pytest("t.py::a\n\n1/2 tests collected (1 deselected) in 0.01s\n")
                .is_some()
        );
        assert_eq!(
            Listing::from_pytest("no tests collected in 0.01s\n"),
            Some(Listing::default())
        );
        assert_eq!(
            Listing::from_pytest("ERROR: usage: pytest [options]\n"),
            None
        );
        // A project's `-v` in addopts makes `-q` print the tree of nodes: no listing.
        let tree = "<Module tests/test_a.py>\n  <Function test_one>\n\n1 test collected in 0.01s\n";
        assert_eq!(Listing::from_pytest(tree), None);
    }
}
