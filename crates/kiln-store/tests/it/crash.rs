//! SIGKILL a writing process at arbitrary instants and check that no acknowledged row is lost,
//! no row is duplicated, and every stored row is intact.
//!
//! The parent test re-runs this test binary as a child that only runs [`child_writer`].

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kiln_schema::{Candidate, Row};
use kiln_store::{RunLock, StageTable, read_rows};

use crate::samples;

const ENV: &str = "KILN_STORE_CRASH_CHILD_DIR";
const ROUNDS: usize = 12;
const MARK: &str = "@@kiln@@ ";

/// The message in a line of the child's output, if any.
fn message(line: &str) -> Option<&str> {
    line.rsplit_once(MARK).map(|(_, m)| m)
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    // libtest may have printed `test crash::child_writer ... ` without a newline: the marker
    // lets the parent find our messages anyway.
    let _ = writeln!(out, "{MARK}{line}");
    let _ = out.flush();
}

/// The child: appends rows one by one, sometimes removes and re-adds one or compacts, and says
/// which operations returned.
#[test]
fn child_writer() {
    let Some(run) = std::env::var_os(ENV) else {
        return;
    };
    let run = Path::new(&run);
    let _lock = RunLock::acquire(run).unwrap();
    let dir = run.join("stage");
    let mut table = StageTable::<Candidate>::open(&dir, "stage", "c", BTreeMap::new()).unwrap();
    let start = table.keys().unwrap().len();
    say("opened");
    for i in start..start + 100_000 {
        let key = format!("k{i:06}");
        table.append(&[samples::candidate(&key)]).unwrap();
        say(&format!("acked {key}"));
        if i % 5 == 4 {
            let victim = format!("k{:06}", i - 2);
            // Said before the removal: a kill between the removal and the next line must not
            // make the parent expect the row.
            say(&format!("removing {victim}"));
            table
                .remove_keys(&BTreeSet::from([victim.clone()]))
                .unwrap();
            say(&format!("removed {victim}"));
            table.append(&[samples::candidate(&victim)]).unwrap();
            say(&format!("acked {victim}"));
        }
        if i % 11 == 10 {
            table.compact().unwrap();
        }
    }
}

/// Tiny xorshift generator so the test needs no extra crate.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[test]
fn sigkill_never_loses_or_duplicates_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path();
    let exe = std::env::current_exe().unwrap();
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
        | 1;
    let mut rng = Rng(seed);
    // Last thing each key's process told us: true = present (acked), false = removed.
    let mut told: BTreeMap<String, bool> = BTreeMap::new();
    let mut kills_mid_write = 0;
    for round in 0..ROUNDS {
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "crash::child_writer",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(ENV, run)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        // Wait until the child opened the table, then let it write for a random while.
        for line in lines.by_ref() {
            if message(&line.unwrap()) == Some("opened") {
                break;
            }
        }
        let delay = Duration::from_micros(5_000 + rng.below(250_000));
        let began = Instant::now();
        while began.elapsed() < delay {
            std::thread::sleep(Duration::from_micros(500));
        }
        child.kill().unwrap();
        let status = child.wait().unwrap();
        let mut acked_now = 0;
        for line in lines {
            let line = line.unwrap();
            let Some(line) = message(&line) else { continue };
            if let Some(key) = line.strip_prefix("acked ") {
                told.insert(key.to_string(), true);
                acked_now += 1;
            } else if let Some(key) = line
                .strip_prefix("removed ")
                .or_else(|| line.strip_prefix("removing "))
            {
                told.insert(key.to_string(), false);
            }
        }
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9),
            "round {round}: the child was not killed by SIGKILL but ended with {status}; stderr: {}",
            {
                let mut s = String::new();
                let _ = std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut s);
                s
            }
        );

        let dir = run.join("stage");
        // Whatever a reader sees right after the crash is consistent.
        let rows = read_rows::<Candidate>(&dir).unwrap();
        let keys: Vec<&str> = rows.iter().map(Row::key).collect();
        let unique: BTreeSet<&str> = keys.iter().copied().collect();
        assert_eq!(keys.len(), unique.len(), "round {round}: duplicated rows");
        for (key, present) in &told {
            if *present {
                assert!(unique.contains(key.as_str()), "round {round}: lost {key}");
            }
        }
        for row in &rows {
            assert_eq!(
                row,
                &samples::candidate(row.key()),
                "round {round}: corrupt row"
            );
        }
        let manifest = kiln_store::Manifest::read(&dir).unwrap();
        assert_eq!(
            manifest.rows as usize,
            rows.len(),
            "round {round}: row count"
        );
        let files = std::fs::read_dir(&dir).unwrap().count();
        if files > manifest.parts.len() + 1 {
            kills_mid_write += 1;
        }
        // Make the next child resume from a contiguous key range: re-add keys killed between
        // their removal and re-append.
        let mut table = StageTable::<Candidate>::open(&dir, "stage", "c", BTreeMap::new()).unwrap();
        let have = table.keys().unwrap();
        let missing: Vec<Candidate> = told
            .iter()
            .filter(|(k, _)| !have.contains(*k))
            .map(|(k, _)| samples::candidate(k))
            .collect();
        // Keys that were being appended when killed (not acked, not stored) are simply redone.
        table.append(&missing).unwrap();
        for row in &missing {
            told.insert(row.key().to_string(), true);
        }
        let have = table.keys().unwrap();
        let max = have.iter().next_back().cloned().unwrap_or_default();
        for key in &have {
            told.insert(key.clone(), true);
        }
        assert_eq!(
            have.len(),
            told.len(),
            "round {round}: keys not contiguous up to {max}"
        );
        eprintln!(
            "round {round}: {acked_now} acks, {} rows stored",
            have.len()
        );
    }
    eprintln!("{kills_mid_write} of {ROUNDS} kills left unlisted files behind");
    assert!(
        told.len() > 10,
        "the children wrote too little to test anything"
    );
}
