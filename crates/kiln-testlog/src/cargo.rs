//! `cargo test` output (libtest's text format), several test binaries and doctests in one log.
//!
//! Ids are the names libtest prints (`parser::tests::parses_empty`), as other benchmarks' lists
//! have them. Only a name that two test binaries both print is qualified by the binary, read
//! from cargo's `Running` and `Doc-tests` lines: `Running unittests src/lib.rs
//! (target/debug/deps/foo-1a2b)` gives `foo::lib::<test path>`, `src/main.rs` or `src/bin/x.rs`
//! give `<name>::bin::`, `Running tests/it.rs (...)` gives `it::test::`, benches and examples
//! `::bench::` and `::example::`; `Doc-tests foo` gives `foo::doc::`. Old cargo (`Running
//! target/debug/deps/foo-1a2b`) gives `foo::`.
//!
//! Doctest names carry the line of the example (`src/lib.rs - add (line 5)`), which moves whenever
//! the file above it is edited; the line is replaced by the example's rank among the examples of
//! the same item (`add`, `add#2`, ...), so a patch does not rename every doctest below it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use kiln_schema::TestStatus;

use crate::lines::LineParser;
use crate::util::{Collector, Re, count, strip_ansi};
use crate::{ParsedLog, Summary};

static RUNNING: Re = Re::new(r"^\s*Running (?:(unittests) )?(\S+)(?: \((.+)\))?\s*$");
static DOC_TESTS: Re = Re::new(r"^\s*Doc-tests (\S+)\s*$");
/// `test path ... ok`; libtest appends ` - should panic` to should_panic tests.
static TEST_LINE: Re = Re::new(r"^test (.+?) \.\.\. (ok|FAILED|ignored|bench)(?:, .*|:.*)?$");
static RESULT_LINE: Re = Re::new(
    r"^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored; (\d+) measured(?:; (\d+) filtered out)?",
);
/// `src/lib.rs - add (line 5)`, optionally followed by ` - compile fail` and the like.
static DOCTEST_NAME: Re = Re::new(r"^(.+?) \(line (\d+)\)((?: - .*)?)$");

/// The artifact name of a `target/debug/deps/foo-0123abcd` path.
fn artifact_name(path: &str) -> &str {
    let file = path.rsplit(['/', '\\']).next().unwrap_or(path);
    let file = file.strip_suffix(".exe").unwrap_or(file);
    match file.rsplit_once('-') {
        Some((name, hash)) if !hash.is_empty() && hash.chars().all(|c| c.is_ascii_hexdigit()) => {
            name
        }
        _ => file,
    }
}

/// The prefix of the tests of one `Running` line.
fn target_prefix(kind: Option<&str>, source: &str, binary: Option<&str>) -> String {
    let name = artifact_name(binary.unwrap_or(source));
    let top_dir = source.split(['/', '\\']).next().unwrap_or("");
    let kind = match (kind, binary) {
        (Some(_), _) if source.ends_with("lib.rs") => "lib",
        (Some(_), _) if source.contains("/bin/") || source.ends_with("main.rs") => "bin",
        (Some(_), _) => "unit",
        // Since cargo 1.52 the source is named and the binary follows in parentheses.
        (None, Some(_)) if top_dir == "tests" => "test",
        (None, Some(_)) if top_dir == "benches" => "bench",
        (None, Some(_)) if top_dir == "examples" => "example",
        _ => return format!("{name}::"),
    };
    format!("{name}::{kind}::")
}

struct Doctest {
    name: String,
    line: u64,
    suffix: String,
    status: TestStatus,
}

/// Reads `cargo test` output line by line.
#[derive(Default)]
pub(crate) struct Cargo {
    out: Collector,
    summary: Option<Summary>,
    /// Prefix of the tests of the binary that runs now.
    prefix: String,
    /// Set while the doctests of a crate run.
    doc_prefix: Option<String>,
    /// Doctests are ranked once all are known (see the module docs).
    doctests: Vec<(String, Doctest)>,
    /// Every other test as (binary prefix, name, status): whether a name needs its binary's
    /// prefix is known only at the end.
    tests: Vec<(String, String, TestStatus)>,
}

impl LineParser for Cargo {
    fn line(&mut self, raw_line: &str) {
        let line = strip_ansi(raw_line);
        let line = line.trim_end();
        if let Some(caps) = RUNNING.captures(line) {
            self.prefix = target_prefix(
                caps.get(1).map(|m| m.as_str()),
                &caps[2],
                caps.get(3).map(|m| m.as_str()),
            );
            self.doc_prefix = None;
        } else if let Some(caps) = DOC_TESTS.captures(line) {
            self.doc_prefix = Some(format!("{}::doc::", &caps[1]));
        } else if let Some(caps) = TEST_LINE.captures(line) {
            let status = match &caps[2] {
                "ok" | "bench" => TestStatus::Pass,
                "FAILED" => TestStatus::Fail,
                _ => TestStatus::Skip,
            };
            let name = caps[1].strip_suffix(" - should panic").unwrap_or(&caps[1]);
            match (&self.doc_prefix, DOCTEST_NAME.captures(name)) {
                (Some(doc_prefix), Some(doc)) => self.doctests.push((
                    doc_prefix.clone(),
                    Doctest {
                        name: doc[1].to_owned(),
                        line: count(&doc[2]),
                        suffix: doc[3].to_owned(),
                        status,
                    },
                )),
                _ => {
                    let prefix = self.doc_prefix.as_deref().unwrap_or(&self.prefix);
                    self.tests
                        .push((prefix.to_owned(), name.to_owned(), status));
                }
            }
        } else if let Some(caps) = RESULT_LINE.captures(line) {
            let totals = self.summary.get_or_insert_with(Summary::default);
            totals.passed = totals.passed.saturating_add(count(&caps[1]));
            totals.failed = totals.failed.saturating_add(count(&caps[2]));
            totals.skipped = totals.skipped.saturating_add(count(&caps[3]));
            // Benchmarks run under `cargo test` report `bench` lines counted as measured.
            totals.passed = totals.passed.saturating_add(count(&caps[4]));
        }
    }

    fn finish(self: Box<Self>) -> ParsedLog {
        let mut out = self.out;
        let mut named = ranked_doctests(self.doctests);
        named.extend(self.tests);
        for (id, status) in ids(&named) {
            out.record(&id, status);
        }
        out.finish(self.summary)
    }
}

/// Each test's id in order: a name printed by two binaries keeps both apart with their
/// binaries' prefixes, any other keeps the name libtest printed.
fn ids(named: &[(String, String, TestStatus)]) -> impl Iterator<Item = (String, TestStatus)> {
    let mut binaries: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (prefix, name, _) in named {
        binaries.entry(name).or_default().insert(prefix);
    }
    named.iter().map(move |(prefix, name, status)| {
        if binaries.get(name.as_str()).is_some_and(|b| b.len() > 1) {
            (format!("{prefix}{name}"), *status)
        } else {
            (name.clone(), *status)
        }
    })
}

/// The lines [`IDS_AWK`] appends to a `cargo test` log: `test <kiln id> ... ok|FAILED|ignored`
/// for every test that is not a doctest, in the order libtest printed them. The SWE-bench
/// harness's `parse_log_cargo` reads a name only as libtest printed it, so a name that two
/// binaries print (kept apart by kiln, merged by the harness) and a `- should panic` test (not
/// read at all) would be misgraded; with these lines it reads kiln's ids. Doctests are left out:
/// their ids hold spaces, which the harness parser never reads.
pub(crate) fn echoed_ids(log: &str) -> String {
    let mut parser = Cargo::default();
    crate::lines::feed_str(&mut parser, log);
    let mut out = String::new();
    for (id, status) in ids(&parser.tests) {
        let word = match status {
            TestStatus::Pass => "ok",
            TestStatus::Fail => "FAILED",
            _ => "ignored",
        };
        let _ = writeln!(out, "test {id} ... {word}");
    }
    out
}

/// The awk program (POSIX awk: Debian's mawk, gawk, busybox) that prints every line of a
/// `cargo test` log and then [`echoed_ids`]'s lines. It reads the log as this module does.
pub(crate) const IDS_AWK: &str = include_str!("cargo_ids.awk");

/// Doctests as (prefix, name, status), their line replaced by their rank within the same item.
fn ranked_doctests(mut doctests: Vec<(String, Doctest)>) -> Vec<(String, String, TestStatus)> {
    let mut out = Vec::with_capacity(doctests.len());
    doctests.sort_by(|(pa, a), (pb, b)| (pa, &a.name, a.line).cmp(&(pb, &b.name, b.line)));
    let mut rank: BTreeMap<(String, String), usize> = BTreeMap::new();
    for (prefix, doctest) in doctests {
        let n = rank
            .entry((prefix.clone(), doctest.name.clone()))
            .and_modify(|n| *n += 1)
            .or_insert(1);
        let name = if *n == 1 {
            format!("{}{}", doctest.name, doctest.suffix)
        } else {
            format!("{}#{n}{}", doctest.name, doctest.suffix)
        };
        out.push((prefix, name, doctest.status));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_compile() {
        for re in [
            &RUNNING,
            &DOC_TESTS,
            &TEST_LINE,
            &RESULT_LINE,
            &DOCTEST_NAME,
        ] {
            assert!(re.compiles());
        }
    }

    #[test]
    fn artifact_names() {
        assert_eq!(artifact_name("/t/debug/deps/foo-28a01a7770d7ff1d"), "foo");
        assert_eq!(
            artifact_name("target/debug/deps/my_crate-0a1b.exe"),
            "my_crate"
        );
        assert_eq!(artifact_name("src/lib.rs"), "lib.rs");
    }
}
