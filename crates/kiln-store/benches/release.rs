//! Release writing and dedupe at scale: `cargo bench -p kiln-store --bench release [-- ROWS]`.
//!
//! 1. Writing a release of ROWS (default 100,000) synthetic rows with realistic sizes (gold
//!    and test patches, problem statements, hundreds of PASS_TO_PASS ids, eval scripts) as
//!    `data/test-NNNNN-of-NNNNN.parquet` shards of 10,000 rows: kiln's [`write_release`]
//!    (arrow-rs) against pyarrow writing the same rows from Python objects with the same
//!    settings (zstd level 1, the same shards). Each side runs in a child process that first
//!    holds the rows in memory (not timed), then resets its peak RSS (`/proc/self/clear_refs`)
//!    and writes: the figures are the write's seconds and its peak RSS above the rows'.
//! 2. Dedupe of ROWS new rows against three earlier releases of ROWS rows each (5 % of the new
//!    rows share an id with an earlier row, 3 % a pull request under another id, 1 % repeat a
//!    pull request within the export): kiln's polars analytics ([`Published::except`] then
//!    [`dedupe`]) against pandas doing the same three rules over the same Parquet shards; both
//!    must keep the same rows.
//!
//! The Python side is `scripts/bench-release.py`, run with the interpreter of
//! `scripts/python-env.sh` (pyarrow, pandas).

#![expect(clippy::print_stdout, reason = "a benchmark prints its figures")]

use std::error::Error;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use kiln_schema::ReleaseInstance;
use kiln_store::analytics::{Published, dedupe};
use kiln_store::write_release;

type Result<T> = std::result::Result<T, Box<dyn Error>>;

const PER_SHARD: usize = 10_000;
const MODE: &str = "KILN_RELEASE_BENCH_MODE";

/// A small deterministic generator: the same rows on every run and in every process.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    /// A size in `low..high`, skewed towards `low` (most patches are small, a few are large).
    fn skewed(&mut self, low: u64, high: u64) -> usize {
        let u = (self.below(1_000_000) as f64) / 1_000_000.0;
        usize::try_from(low + ((high - low) as f64 * u * u * u) as u64).unwrap_or(0)
    }
}

const WORDS: &[&str] = &[
    "self",
    "value",
    "return",
    "if",
    "else",
    "for",
    "in",
    "None",
    "result",
    "parser",
    "config",
    "request",
    "response",
    "raise",
    "ValueError",
    "assert",
    "def",
    "class",
    "import",
    "from",
    "items",
    "key",
    "data",
    "len",
    "path",
    "token",
    "error",
    "index",
    "name",
    "args",
    "kwargs",
    "True",
    "False",
    "list",
    "dict",
    "str",
    "int",
    "cache",
    "open",
    "read",
    "write",
    "line",
];

fn words(rng: &mut Lcg, bytes: usize) -> String {
    let mut out = String::with_capacity(bytes + 16);
    while out.len() < bytes {
        out.push_str(WORDS[rng.below(WORDS.len() as u64) as usize]);
        out.push(if rng.below(9) == 0 { '\n' } else { ' ' });
    }
    out
}

fn diff(rng: &mut Lcg, file: &str, bytes: usize) -> String {
    let mut out = format!("diff --git a/{file} b/{file}\n--- a/{file}\n+++ b/{file}\n");
    let mut hunk = 1;
    while out.len() < bytes {
        out.push_str(&format!("@@ -{hunk},7 +{hunk},8 @@\n"));
        for _ in 0..8 {
            let sign = [" ", "+", "-", " "][rng.below(4) as usize];
            out.push_str(sign);
            out.push_str(&words(rng, 40).replace('\n', " "));
            out.push('\n');
        }
        hunk += 23;
    }
    out
}

/// Row `i` of a release; `salt` tells releases apart.
fn row(i: usize, salt: u64) -> ReleaseInstance {
    let mut rng = Lcg(salt.wrapping_mul(1_000_003).wrapping_add(i as u64 + 1));
    let repo_n = rng.below(2_000);
    let repo = format!("org{}/project{repo_n}", repo_n % 97);
    let pull = 1 + salt * 1_000_000 + i as u64;
    let module = format!("src/pkg{}/mod{}.py", rng.below(30), rng.below(50));
    let test_file = format!("tests/test_mod{}.py", rng.below(50));
    let patch_size = rng.skewed(200, 12_000);
    let patch = diff(&mut rng, &module, patch_size);
    let test_patch_size = rng.skewed(300, 10_000);
    let test_patch = diff(&mut rng, &test_file, test_patch_size);
    let problem_size = rng.skewed(300, 6_000);
    let hints_size = if rng.below(3) == 0 {
        rng.skewed(50, 2_000)
    } else {
        0
    };
    let f2p = 1 + rng.below(12) as usize;
    let p2p = rng.skewed(0, 400);
    let ids = |rng: &mut Lcg, n: usize| -> Vec<String> {
        (0..n)
            .map(|k| {
                format!(
                    "{test_file}::test_{}_{k}[{}]",
                    WORDS[rng.below(WORDS.len() as u64) as usize],
                    rng.below(1000)
                )
            })
            .collect()
    };
    let image = format!("kiln-env/bench:{}", repo.replace('/', "__"));
    ReleaseInstance {
        instance_id: kiln_schema::InstanceId::new(&format!(
            "{}__{}-{pull}",
            repo.split('/').next().unwrap_or(""),
            repo_n
        ))
        .expect("a synthetic id is an id"),
        repo: repo.clone(),
        pull_number: Some(pull.to_string()),
        base_commit: format!("{:040x}", rng.next() as u128 * rng.next() as u128),
        problem_statement: words(&mut rng, problem_size),
        hints_text: words(&mut rng, hints_size),
        created_at: format!(
            "2024-{:02}-{:02}T10:00:00Z",
            1 + rng.below(12),
            1 + rng.below(28)
        ),
        version: Some(format!("{}.{}", rng.below(5), rng.below(20))),
        license: "MIT".into(),
        FAIL_TO_PASS: ids(&mut rng, f2p).into(),
        PASS_TO_PASS: ids(&mut rng, p2p).into(),
        FAIL_TO_PASS_UNGRADED: kiln_schema::TestList::default(),
        PASS_TO_PASS_UNGRADED: kiln_schema::TestList::default(),
        image_digest: Some(format!("sha256:{:064x}", rng.below(1 << 30))),
        setup_commands: vec![
            "uv venv /opt/kiln/venv".into(),
            "uv pip install -e '.[test]' pytest".into(),
        ],
        parser: "pytest".into(),
        parser_script: None,
        language: ["python", "rust", "javascript", "go"][rng.below(4) as usize].into(),
        platform: "linux".into(),
        dockerfile: Some(words(&mut rng, 800)),
        launch_seconds: rng.below(600) as f64 / 3.0,
        validate_seconds: rng.below(300) as f64 / 3.0,
        repeats: 3,
        identical_runs_before: 3,
        identical_runs_after: 3,
        solution_leak: false,
        solution_leak_matches: Vec::new(),
        difficulty: Some(kiln_schema::Difficulty::Hard),
        difficulty_measures: std::collections::BTreeMap::from([("lines".to_string(), 40)]),
        tests_defined: 4,
        tests_collected: Some(1.0),
        whole_suite: None,
        broken_outside_scope: Vec::new(),
        filter_judge: Some("heuristic".into()),
        filter_label: Some("ok".into()),
        filter_reason: Some("reports a defect".into()),
        filter_flags: Vec::new(),
        filter_fallback: None,
        run_id: "20261201-000000".into(),
        eval_script: format!(
            "#!/bin/bash\nset -uxo pipefail\ngit apply -v - <<'EOF_114329324912'\n{test_patch}\nEOF_114329324912\n: '>>>>> Start Test Output'\npytest {test_file}\n: '>>>>> End Test Output'\n"
        ),
        log_parser: "parse_log_pytest_v2".into(),
        eval_type: "pass_and_fail".into(),
        environment_setup_commit: String::new(),
        image,
        rebuild_cmds: vec![],
        test_cmds: vec![format!(
            "pytest -rA -o console_output_style=classic {test_file}"
        )],
        issue_numbers: vec![(pull - 1).to_string()],
        commit_urls: vec![format!("https://github.com/{repo}/commit/abc")],
        harness_note: String::new(),
        patch,
        test_patch,
    }
}

/// ROWS new rows: mostly fresh, some repeating earlier releases or each other.
fn fresh_rows(n: usize) -> Vec<ReleaseInstance> {
    (0..n)
        .map(|i| {
            let mut r = row(i, 9);
            match i % 100 {
                // The same id as row i of release 1.
                0..=4 => r.instance_id = row(i, 1).instance_id,
                // The same pull request as row i of release 2, under another id.
                5..=7 => {
                    let earlier = row(i, 2);
                    r.repo = earlier.repo;
                    r.pull_number = earlier.pull_number;
                }
                // The pull request of the previous new row, under another id.
                8 if i > 0 => {
                    let previous = row(i - 1, 9);
                    r.repo = previous.repo;
                    r.pull_number = previous.pull_number;
                }
                _ => {}
            }
            r
        })
        .collect()
}

/// CPU seconds (user and system) this process has used, from `/proc/self/stat`: the figure
/// that the other work on a shared machine disturbs least.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of stat(5), 11 and 12 after the name; 100 ticks a
    // second on Linux.
    (ticks(11) + ticks(12)) / 100.0
}

fn status(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or(0)
}

/// The child that writes: rows in memory first, then the peak reset, then the timed write.
fn child_write(rows: usize, out: &Path) -> Result<()> {
    let all: Vec<ReleaseInstance> = (0..rows).map(|i| row(i, 9)).collect();
    let before = status("VmRSS:");
    std::fs::write("/proc/self/clear_refs", "5")?;
    let (started, cpu) = (Instant::now(), cpu_seconds());
    write_release(out, "test", &all, PER_SHARD)?;
    let seconds = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu;
    let peak = status("VmHWM:");
    println!("{seconds} {} {cpu}", peak.saturating_sub(before));
    Ok(())
}

fn python() -> Result<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new("bash")
        .arg(root.join("scripts/python-env.sh"))
        .current_dir(&root)
        .output()?;
    if !out.status.success() {
        return Err(format!(
            "scripts/python-env.sh: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/bench-release.py")
}

fn figures(output: &std::process::Output, who: &str) -> Result<Vec<f64>> {
    if !output.status.success() {
        return Err(format!(
            "{who} failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
        .into());
    }
    Ok(String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect())
}

fn main() -> Result<()> {
    let rows: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(100_000);
    if let Ok(out) = std::env::var(MODE) {
        return child_write(rows, Path::new(&out));
    }
    let python = python()?;
    let work = tempfile::tempdir()?;
    let me = std::env::current_exe()?;

    // 1. Writing the release. The rows go to Python as JSON lines (not timed).
    let jsonl = work.path().join("rows.jsonl");
    {
        let mut file = std::io::BufWriter::new(std::fs::File::create(&jsonl)?);
        let mut text_bytes = 0usize;
        for i in 0..rows {
            let r = row(i, 9);
            text_bytes += r.patch.len()
                + r.test_patch.len()
                + r.problem_statement.len()
                + r.eval_script.len();
            serde_json::to_writer(&mut file, &r)?;
            file.write_all(b"\n")?;
        }
        file.flush()?;
        println!(
            "release of {rows} rows: {:.0} MiB of patches, problem statements and eval scripts; shards of {PER_SHARD} rows, zstd level 1",
            text_bytes as f64 / 1_048_576.0
        );
    }
    let kiln = figures(
        &Command::new(&me)
            .arg(rows.to_string())
            .env(MODE, work.path().join("kiln"))
            .output()?,
        "kiln's writer",
    )?;
    let pyarrow = figures(
        &Command::new(&python)
            .arg(script())
            .args([
                "write",
                &jsonl.to_string_lossy(),
                &work.path().join("pyarrow").to_string_lossy(),
            ])
            .arg(PER_SHARD.to_string())
            .output()?,
        "pyarrow",
    )?;
    let (kiln_s, kiln_kib, kiln_cpu) = (kiln[0], kiln[1], kiln[2]);
    let (py_s, py_kib, py_cpu) = (pyarrow[0], pyarrow[1], pyarrow[2]);
    println!("                    wall s    CPU s   peak RSS above the rows (MiB)");
    println!(
        "  kiln (arrow-rs) {kiln_s:>8.2} {kiln_cpu:>8.2}   {:>8.0}",
        kiln_kib / 1024.0
    );
    println!(
        "  pyarrow         {py_s:>8.2} {py_cpu:>8.2}   {:>8.0}",
        py_kib / 1024.0
    );
    println!(
        "  kiln is {:.2}x faster than pyarrow by the wall clock, {:.2}x by CPU time, with {:.2}x its extra memory",
        py_s / kiln_s,
        py_cpu / kiln_cpu.max(0.01),
        kiln_kib / py_kib.max(1.0)
    );
    std::fs::remove_file(&jsonl)?;

    // 2. Dedupe against three earlier releases.
    let releases = work.path().join("releases");
    for (n, tag) in ["2024-01", "2024-02", "2024-03"].iter().enumerate() {
        let earlier: Vec<ReleaseInstance> = (0..rows).map(|i| row(i, n as u64 + 1)).collect();
        write_release(&releases.join(tag), "test", &earlier, PER_SHARD)?;
    }
    let fresh = fresh_rows(rows);
    let keys = work.path().join("fresh-keys.jsonl");
    {
        let mut file = std::io::BufWriter::new(std::fs::File::create(&keys)?);
        for r in &fresh {
            serde_json::to_writer(
                &mut file,
                &serde_json::json!({"instance_id": r.instance_id, "repo": r.repo, "pull_number": r.pull_number}),
            )?;
            file.write_all(b"\n")?;
        }
    }
    let started = Instant::now();
    let published = Published::except(&releases, "2024-04", "test")?;
    let deduped = dedupe(&fresh, &published, "2024-04")?;
    let polars_s = started.elapsed().as_secs_f64();
    let pandas = figures(
        &Command::new(&python)
            .arg(script())
            .args([
                "dedupe",
                &releases.to_string_lossy(),
                &keys.to_string_lossy(),
            ])
            .output()?,
        "pandas",
    )?;
    let (pandas_s, pandas_kept) = (pandas[0], pandas[1]);
    println!(
        "dedupe of {rows} new rows against {} published in 3 releases: kiln keeps {}, pandas keeps {pandas_kept}",
        published.len(),
        deduped.keep.len()
    );
    if (pandas_kept as usize) != deduped.keep.len() {
        return Err("kiln and pandas disagree on the rows to keep".into());
    }
    println!("  polars (kiln)     {polars_s:>10.3} s");
    println!("  pandas            {pandas_s:>10.3} s");
    println!("  polars is {:.2}x faster than pandas", pandas_s / polars_s);
    Ok(())
}
