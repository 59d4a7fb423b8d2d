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
use crate::{parsed::ParsedLog, parsed::Summary};

static RUNNING: Re = Re::new(r"^\s*Running (?:(unittests) )?(\S+)(?: \((.+)\))?\s*$");
static DOC_TESTS: Re = Re::new(r"^\s*Doc-tests (\S+)\s*$");
/// `test path ... ok`; libtest appends ` - should panic` to should_panic tests.
static TEST_LINE: Re = Re::new(r"^test (.+?) \.\.\. (ok|FAILED|ignored|bench)(?:, .*|:.*)?$");
static RESULT_LINE: Re = Re::new(
    r"^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored; (\d+) measured(?:; (\d+) filtered out)?",
);
/// `src/lib.rs - add (line 5)`, optionally followed by ` - compile fail` and the like.
static DOCTEST_NAME: Re = Re::new(r"^(.+?) \(line (\d+)\)((?: - .*)?)$");
/// `---- tests::x stdout ----`: the output of a failed test, in the `failures:` section.
static SECTION: Re = Re::new(r"^---- (.+) stdout ----$");
/// `thread 'tests::x' panicked at src/lib.rs:5:9:` (the message on the next line, since Rust
/// 1.73) or `thread 'tests::x' panicked at 'message', src/lib.rs:5:9` (before).
static PANICKED: Re = Re::new(r"^thread '[^']*' panicked at (?:'(.*)', \S+|\S+:)$");

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

/// One result line, in the order of the log.
struct Entry {
    /// The prefix of its binary (see the module docs).
    prefix: String,
    /// The name libtest printed, `- should panic` dropped; for a doctest, without its line.
    name: String,
    status: TestStatus,
    /// For a doctest: its line (replaced by a rank at the end) and what follows it
    /// (` - compile fail`).
    doctest: Option<(u64, String)>,
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
    /// Every result: whether a name needs its binary's prefix, and a doctest's rank, are known
    /// only at the end.
    entries: Vec<Entry>,
    /// The failed test whose output section is being read, and whether its panic message
    /// comes on the next line.
    section: Option<(String, bool)>,
    /// Tests (prefix, name) whose panic message names a missing network.
    offline: BTreeSet<(String, String)>,
}

impl Cargo {
    /// Reads a line of a failed test's output section: its panic message says whether it failed
    /// for want of a network. An assertion's message never counts (it may quote such text).
    fn section_line(&mut self, line: &str) {
        let Some((name, next_is_message)) = &mut self.section else {
            return;
        };
        let message = if *next_is_message {
            *next_is_message = false;
            Some(line)
        } else if let Some(caps) = PANICKED.captures(line) {
            *next_is_message = caps.get(1).is_none();
            caps.get(1).map(|m| m.as_str())
        } else {
            None
        };
        if let Some(message) = message
            && !message.starts_with("assertion")
            && crate::network::names_missing_network(message)
        {
            let key = (self.prefix.clone(), name.clone());
            self.offline.insert(key);
        }
    }
}

impl LineParser for Cargo {
    fn line(&mut self, raw_line: &str) {
        let line = strip_ansi(raw_line);
        let line = line.trim_end();
        if let Some(caps) = SECTION.captures(line) {
            self.section = Some((caps[1].to_owned(), false));
            return;
        }
        if line == "failures:" || line.starts_with("test result: ") {
            self.section = None;
        }
        self.section_line(line);
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
            let prefix = self
                .doc_prefix
                .as_deref()
                .unwrap_or(&self.prefix)
                .to_owned();
            let entry = match (&self.doc_prefix, DOCTEST_NAME.captures(name)) {
                (Some(_), Some(doc)) => Entry {
                    prefix,
                    name: doc[1].to_owned(),
                    status,
                    doctest: Some((count(&doc[2]), doc[3].to_owned())),
                },
                _ => Entry {
                    prefix,
                    name: name.to_owned(),
                    status,
                    doctest: None,
                },
            };
            self.entries.push(entry);
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
        for (id, entry) in ids(&self.entries).into_iter().zip(&self.entries) {
            out.record(&id.id, id.status);
            if id.status == TestStatus::Fail
                && self
                    .offline
                    .contains(&(entry.prefix.clone(), entry.name.clone()))
            {
                out.record_offline(&id.id);
            }
        }
        out.finish(self.summary)
    }
}

/// A test's id, in the order of the log.
struct Id {
    id: String,
    status: TestStatus,
    doctest: bool,
}

/// Each entry's id, in the order of the log: a doctest's line is replaced by its rank among
/// the doctests of the same item (`add`, `add#2`, ... by line), then a name printed by two
/// binaries keeps both apart with their binaries' prefixes, any other keeps its name.
fn ids(entries: &[Entry]) -> Vec<Id> {
    let mut ranks = vec![0usize; entries.len()];
    let mut items: BTreeMap<(&str, &str), Vec<(u64, usize)>> = BTreeMap::new();
    for (i, entry) in entries.iter().enumerate() {
        if let Some((line, _)) = &entry.doctest {
            items
                .entry((&entry.prefix, &entry.name))
                .or_default()
                .push((*line, i));
        }
    }
    for doctests in items.values_mut() {
        doctests.sort_unstable();
        for (rank, (_, i)) in doctests.iter().enumerate() {
            ranks[*i] = rank + 1;
        }
    }
    let names: Vec<String> = entries
        .iter()
        .zip(&ranks)
        .map(|(entry, rank)| match &entry.doctest {
            Some((_, suffix)) if *rank > 1 => format!("{}#{rank}{suffix}", entry.name),
            Some((_, suffix)) => format!("{}{suffix}", entry.name),
            None => entry.name.clone(),
        })
        .collect();
    let mut binaries: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (entry, name) in entries.iter().zip(&names) {
        binaries.entry(name).or_default().insert(&entry.prefix);
    }
    entries
        .iter()
        .zip(&names)
        .map(|(entry, name)| Id {
            id: if binaries.get(name.as_str()).is_some_and(|b| b.len() > 1) {
                format!("{}{name}", entry.prefix)
            } else {
                name.clone()
            },
            status: entry.status,
            doctest: entry.doctest.is_some(),
        })
        .collect()
}

/// The lines [`IDS_AWK`] appends to a `cargo test` log, for the SWE-bench harness to read
/// kiln's ids with one of its own parsers. Its `parse_log_cargo` reads a name only as libtest
/// printed it, so a name that two binaries print (kept apart by kiln, merged by the harness)
/// and a `- should panic` test (not read at all) would be misgraded, and a doctest (its id
/// holds spaces) is never read. First `test <id> ... ok|FAILED|ignored` for every test that is
/// not a doctest (for `parse_log_cargo`), then `[PASSED] <id>` or `[FAILED] <id>` for every
/// test that ran, doctests included (for `parse_log_jest_json`, whose lines take any id).
pub(crate) fn echoed_ids(log: &str) -> String {
    let mut parser = Cargo::default();
    crate::lines::feed_str(&mut parser, log);
    let ids = ids(&parser.entries);
    let mut out = String::new();
    for id in ids.iter().filter(|id| !id.doctest) {
        let word = match id.status {
            TestStatus::Pass => "ok",
            TestStatus::Fail => "FAILED",
            _ => "ignored",
        };
        let _ = writeln!(out, "test {} ... {word}", id.id);
    }
    for id in &ids {
        match id.status {
            TestStatus::Pass => {
                let _ = writeln!(out, "[PASSED] {}", id.id);
            }
            TestStatus::Fail => {
                let _ = writeln!(out, "[FAILED] {}", id.id);
            }
            _ => {}
        }
    }
    out
}

/// The awk program (POSIX awk: Debian's mawk, gawk, busybox) that prints every line of a
/// `cargo test` log and then [`echoed_ids`]'s lines. It reads the log as this module does.
pub(crate) const IDS_AWK: &str = include_str!("cargo_ids.awk");

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
            &SECTION,
            &PANICKED,
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
