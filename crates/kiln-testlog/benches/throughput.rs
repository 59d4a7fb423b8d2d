//! Throughput and memory of the test-log parsers: `cargo bench -p kiln-testlog --bench throughput`.
//!
//! For each line-oriented parser, a large log is built by repeating a real captured log from
//! `tests/data/` with its tests renamed per copy (so every copy adds new tests), written to a
//! temporary directory, and parsed in a child process twice: whole (read into memory, then
//! [`kiln_testlog::parse`]) and streamed ([`kiln_testlog::parse_reader`] over a buffered file).
//! Each child reports its own peak RSS (`VmHWM`) before and after parsing, so the figures are
//! not mixed with the parent's. One extra streamed run repeats the log without renaming, to show
//! that memory follows the number of distinct tests rather than the size of the log. Last,
//! `parse_many` (rayon) on many small logs is compared with a sequential loop.

// A benchmark exists to print its figures.
#![expect(clippy::print_stdout, reason = "printing is what this program is for")]

use std::error::Error;
use std::fs;
use std::io::{BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

type Result<T> = std::result::Result<T, Box<dyn Error>>;

const MIB: usize = 1024 * 1024;
/// Environment variables that turn the binary into a measuring child.
const CHILD_MODE: &str = "KILN_TESTLOG_BENCH_MODE";
const CHILD_PARSER: &str = "KILN_TESTLOG_BENCH_PARSER";
const CHILD_FILE: &str = "KILN_TESTLOG_BENCH_FILE";

/// A synthetic log: a real log and the words renamed in each copy.
struct Case {
    label: &'static str,
    parser: &'static str,
    seed: &'static str,
    renamed: &'static [&'static str],
    mebibytes: usize,
}

const CASES: &[Case] = &[
    Case {
        label: "pytest -rA",
        parser: "pytest",
        seed: include_str!("../tests/data/pytest/ra_full.log"),
        renamed: &["test_"],
        mebibytes: 100,
    },
    Case {
        label: "go test -json",
        parser: "go-test-json",
        seed: include_str!("../tests/data/go-test-json/mixed.json"),
        renamed: &["goproj"],
        mebibytes: 100,
    },
    Case {
        label: "go test -v",
        parser: "go-test",
        seed: include_str!("../tests/data/go-test/verbose_mixed.log"),
        renamed: &["goproj"],
        mebibytes: 20,
    },
    Case {
        label: "cargo test",
        parser: "cargo",
        seed: include_str!("../tests/data/cargo/workspace_no_fail_fast.log"),
        renamed: &["foo", "tests::"],
        mebibytes: 20,
    },
    Case {
        label: "unittest -v",
        parser: "unittest",
        seed: include_str!("../tests/data/unittest/py311_verbose.log"),
        renamed: &["pkg."],
        mebibytes: 20,
    },
    Case {
        label: "TAP (prove -v)",
        parser: "tap",
        seed: include_str!("../tests/data/tap/prove_verbose.log"),
        renamed: &["t/"],
        mebibytes: 20,
    },
    Case {
        label: "node --test (TAP)",
        parser: "node-test",
        seed: include_str!("../tests/data/node-test/tap.log"),
        renamed: &[" - "],
        mebibytes: 20,
    },
    Case {
        label: "node --test (spec)",
        parser: "node-test",
        seed: include_str!("../tests/data/node-test/spec.log"),
        renamed: &["top ", "suite a"],
        mebibytes: 20,
    },
    Case {
        label: "mocha spec",
        parser: "mocha-spec",
        seed: include_str!("../tests/data/mocha-spec/mixed.log"),
        renamed: &["Array", "root level test"],
        mebibytes: 20,
    },
    Case {
        label: "ctest -V",
        parser: "ctest",
        seed: include_str!("../tests/data/ctest/verbose.log"),
        renamed: &[
            "gtest_all",
            "catch_all",
            "doctest_all",
            "always_passes",
            "skipped_by_code",
            "disabled_one",
            "times_out",
        ],
        mebibytes: 20,
    },
    Case {
        label: "gtest console",
        parser: "gtest",
        seed: include_str!("../tests/data/gtest/mixed.log"),
        renamed: &["MathTest", "ParamTest"],
        mebibytes: 20,
    },
];

/// Builds about `mebibytes` of log from `seed`, each copy with `renamed` words suffixed by the
/// copy number (no renaming when `renamed` is empty).
fn synthetic(seed: &str, renamed: &[&str], mebibytes: usize) -> String {
    let target = mebibytes * MIB;
    let mut log = String::with_capacity(target + seed.len() * 2);
    let mut copy = 0usize;
    while log.len() < target {
        let mut text = seed.to_owned();
        for word in renamed {
            let trimmed = word.trim_end();
            let replacement = if word.ends_with(' ') {
                format!("{trimmed}{copy} ")
            } else if let Some(stem) = word.strip_suffix("::") {
                format!("{stem}{copy}::")
            } else if let Some(stem) = word.strip_suffix('.') {
                format!("{stem}{copy}.")
            } else if let Some(stem) = word.strip_suffix('/') {
                format!("{stem}{copy}/")
            } else if let Some(stem) = word.strip_suffix('_') {
                format!("{stem}{copy}_")
            } else {
                format!("{word}{copy}")
            };
            text = text.replace(word, &replacement);
        }
        log.push_str(&text);
        if !log.ends_with('\n') {
            log.push('\n');
        }
        copy += 1;
    }
    log
}

/// Peak resident set size of this process so far, in KiB (`VmHWM` of `/proc/self/status`).
fn peak_rss_kib() -> u64 {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("VmHWM:"))
                .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// The child: parses one file whole or streamed and prints `seconds tests rss_before rss_after`.
fn child(mode: &str, parser: &str, file: &Path) -> Result<()> {
    let before = peak_rss_kib();
    let started = Instant::now();
    let parsed = if mode == "whole" {
        let text = fs::read_to_string(file)?;
        kiln_testlog::parse(parser, &text)?
    } else {
        let reader = BufReader::with_capacity(64 * 1024, fs::File::open(file)?);
        kiln_testlog::parse_reader(parser, reader)?
    };
    let seconds = started.elapsed().as_secs_f64();
    let after = peak_rss_kib();
    println!("{seconds} {} {before} {after}", parsed.statuses.len());
    Ok(())
}

/// What a child measured.
struct Run {
    seconds: f64,
    tests: usize,
    rss_before_kib: u64,
    rss_after_kib: u64,
}

fn run_child(mode: &str, parser: &str, file: &Path) -> Result<Run> {
    let output = Command::new(std::env::current_exe()?)
        .env(CHILD_MODE, mode)
        .env(CHILD_PARSER, parser)
        .env(CHILD_FILE, file)
        .output()?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!(
            "child {mode} {parser} failed: {}{}",
            stdout,
            String::from_utf8_lossy(&output.stderr)
        )
        .into());
    }
    let fields: Vec<&str> = stdout.split_whitespace().collect();
    let [seconds, tests, before, after] = fields[..] else {
        return Err(format!("child printed {stdout:?}").into());
    };
    Ok(Run {
        seconds: seconds.parse()?,
        tests: tests.parse()?,
        rss_before_kib: before.parse()?,
        rss_after_kib: after.parse()?,
    })
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn throughput(dir: &Path) -> Result<()> {
    println!(
        "{:<20} {:>7} {:>9} | {:>11} {:>13} | {:>11} {:>13}",
        "log", "MiB", "tests", "whole MB/s", "whole RSS MiB", "stream MB/s", "stream RSS MiB"
    );
    println!("{}", "-".repeat(100));
    let mut rows: Vec<(String, &'static str, String, usize)> = Vec::new();
    for case in CASES {
        rows.push((
            case.label.to_owned(),
            case.parser,
            synthetic(case.seed, case.renamed, case.mebibytes),
            0,
        ));
    }
    // The bounded-memory check: the same size, the same ids in every copy.
    rows.push((
        "pytest -rA, same ids".to_owned(),
        "pytest",
        synthetic(CASES[0].seed, &[], CASES[0].mebibytes),
        0,
    ));
    for (label, parser, log, _) in rows.drain(..) {
        let file: PathBuf = dir.join(format!("{}.log", parser));
        fs::File::create(&file)?.write_all(log.as_bytes())?;
        let bytes = log.len();
        drop(log);
        let whole = run_child("whole", parser, &file)?;
        let stream = run_child("stream", parser, &file)?;
        if whole.tests != stream.tests {
            return Err(format!("{label}: whole and streamed parses differ").into());
        }
        let megabytes = bytes as f64 / 1e6;
        println!(
            "{:<20} {:>7.1} {:>9} | {:>11.1} {:>6.1}->{:>6.1} | {:>11.1} {:>6.1}->{:>6.1}",
            label,
            bytes as f64 / MIB as f64,
            whole.tests,
            megabytes / whole.seconds,
            mib(whole.rss_before_kib),
            mib(whole.rss_after_kib),
            megabytes / stream.seconds,
            mib(stream.rss_before_kib),
            mib(stream.rss_after_kib),
        );
        fs::remove_file(&file)?;
    }
    Ok(())
}

fn best_of(runs: usize, mut work: impl FnMut()) -> Duration {
    (0..runs)
        .map(|_| {
            let started = Instant::now();
            work();
            started.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn batch() {
    let seeds = [
        (
            "pytest",
            include_str!("../tests/data/pytest/ra_full.log"),
            "test_",
        ),
        (
            "go-test-json",
            include_str!("../tests/data/go-test-json/mixed.json"),
            "goproj",
        ),
        (
            "cargo",
            include_str!("../tests/data/cargo/workspace_no_fail_fast.log"),
            "foo",
        ),
        (
            "junit-xml",
            include_str!("../tests/data/junit-xml/pytest_junit.xml"),
            "test_",
        ),
        (
            "jest-json",
            include_str!("../tests/data/jest-json/mixed.json"),
            "math",
        ),
        (
            "ctest",
            include_str!("../tests/data/ctest/verbose.log"),
            "_all",
        ),
    ];
    let logs: Vec<(&str, String)> = (0..6000)
        .map(|i| {
            let (parser, seed, word) = seeds[i % seeds.len()];
            (parser, seed.replace(word, &format!("{word}{i}")))
        })
        .collect();
    let jobs: Vec<(&str, &str)> = logs.iter().map(|(p, l)| (*p, l.as_str())).collect();
    let bytes: usize = jobs.iter().map(|(_, l)| l.len()).sum();
    let mut tests = 0usize;
    let sequential = best_of(3, || {
        tests = jobs
            .iter()
            .filter_map(|(parser, log)| kiln_testlog::parse(parser, log).ok())
            .map(|parsed| parsed.statuses.len())
            .sum();
    });
    let mut parallel_tests = 0usize;
    let parallel = best_of(3, || {
        parallel_tests = kiln_testlog::parse_many(&jobs)
            .into_iter()
            .filter_map(std::result::Result::ok)
            .map(|parsed| parsed.statuses.len())
            .sum();
    });
    println!();
    // Other work on the machine takes cores from rayon; the load average says how much.
    let load = fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load = load
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ");
    println!(
        "parse_many: {} logs, {:.1} MiB, {} tests, {} rayon threads, load average {load}",
        jobs.len(),
        bytes as f64 / MIB as f64,
        tests,
        rayon::current_num_threads()
    );
    println!(
        "  sequential loop {:>8.1} ms ({:.1} MB/s)",
        sequential.as_secs_f64() * 1e3,
        bytes as f64 / 1e6 / sequential.as_secs_f64()
    );
    println!(
        "  parse_many      {:>8.1} ms ({:.1} MB/s)  speed-up {:.2}x{}",
        parallel.as_secs_f64() * 1e3,
        bytes as f64 / 1e6 / parallel.as_secs_f64(),
        sequential.as_secs_f64() / parallel.as_secs_f64(),
        if parallel_tests == tests {
            ""
        } else {
            "  (RESULTS DIFFER)"
        }
    );
}

fn main() -> Result<()> {
    if let (Ok(mode), Ok(parser), Ok(file)) = (
        std::env::var(CHILD_MODE),
        std::env::var(CHILD_PARSER),
        std::env::var(CHILD_FILE),
    ) {
        return child(&mode, &parser, Path::new(&file));
    }
    // `cargo bench` passes `--bench`; anything else (a filter) is ignored.
    let started = Instant::now();
    let dir = std::env::temp_dir().join(format!("kiln-testlog-bench-{}", std::process::id()));
    fs::create_dir_all(&dir)?;
    let result = throughput(&dir);
    let _ = fs::remove_dir_all(&dir);
    result?;
    batch();
    println!();
    println!("total {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}
