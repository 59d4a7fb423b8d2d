//! Serves synthetic repositories through the fake GitHub, for the crawl benchmark
//! (`scripts/bench-crawl.sh`).
//!
//! Usage: `fake-github DIR REPOS PULLS`
//!
//! Writes `REPOS` repositories of `PULLS` merged pull requests each under `DIR/repos`, starts the
//! fake on loopback and prints one JSON line (`url`, `token`, `clone_url`, `repos`, `since`,
//! `until`). When its standard input closes it prints the requests it answered, by kind, as a
//! second JSON line, and exits.
#![expect(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "printing is what this program is for"
)]

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::PathBuf;
use std::process::ExitCode;

use kiln_testkit::github::FakeGitHub;
use kiln_testkit::github::synthetic::write_synthetic;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(dir), Some(repos), Some(pulls)) = (
        args.first().map(PathBuf::from),
        args.get(1).and_then(|a| a.parse::<usize>().ok()),
        args.get(2).and_then(|a| a.parse::<usize>().ok()),
    ) else {
        eprintln!("usage: fake-github DIR REPOS PULLS");
        return ExitCode::from(2);
    };
    let started = std::time::Instant::now();
    let synthetic = match write_synthetic(&dir, repos, pulls) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("fake-github: {e}");
            return ExitCode::FAILURE;
        }
    };
    let written = started.elapsed().as_secs_f64();
    let names: Vec<String> = synthetic
        .repos
        .iter()
        .map(|r| r.full_name.clone())
        .collect();
    let token = "kiln-bench-token";
    let fake = match FakeGitHub::start(synthetic.repos, &[token]) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("fake-github: {e}");
            return ExitCode::FAILURE;
        }
    };
    // The benchmark sends thousands of answers; keeping them would only cost memory.
    fake.keep_exchanges(false);
    println!(
        "{}",
        serde_json::json!({
            "url": fake.url(), "token": token, "clone_url": synthetic.clone_url_template,
            "repos": names, "since": synthetic.since.to_rfc3339(), "until": synthetic.until.to_rfc3339(),
            "write_seconds": written,
        })
    );
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    let requests = fake.requests();
    for request in &requests {
        let kind = if request.kind.starts_with("rest:") {
            "rest"
        } else {
            request.kind.as_str()
        };
        *kinds.entry(kind.to_string()).or_default() += 1;
    }
    println!(
        "{}",
        serde_json::json!({"requests": requests.len(), "by_kind": kinds})
    );
    ExitCode::SUCCESS
}
