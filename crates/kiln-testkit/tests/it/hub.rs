//! The fake Hugging Face Hub against the official `huggingface_hub` client and `datasets`
//! (PyPI, at the versions `scripts/python-env.sh` pins): an upload through the LFS protocol,
//! multipart included, a listing, downloads, an unchanged re-upload that makes no commit, and
//! `datasets.load_dataset` reading the repository back.

use std::path::Path;
use std::process::Command;

use kiln_testkit::hub::FakeHub;

use crate::run;

fn workspace() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// The python of the checks' virtualenv (made on first use).
#[track_caller]
pub fn python() -> String {
    let output = run(Command::new("bash")
        .arg(workspace().join("scripts/python-env.sh"))
        .current_dir(workspace()));
    assert!(
        output.status.success(),
        "scripts/python-env.sh failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

#[test]
fn the_official_client_uploads_lists_downloads_and_loads_through_the_fake() {
    let hub = FakeHub::start(&["hf_check_token"]).unwrap();
    // 3 MiB parts: the 3 MiB + 17 B file of the check goes in two parts.
    hub.set_part_size(3 * 1024 * 1024);
    let work = tempfile::tempdir().unwrap();
    let output = run(Command::new(python())
        .arg(workspace().join("scripts/hub-check.py"))
        .args(["client", "check/hf-client"])
        .arg(work.path())
        .env("HF_ENDPOINT", hub.url())
        .env("HF_TOKEN", "hf_check_token")
        .env("HF_HUB_DISABLE_XET", "1")
        .env("HF_HOME", work.path().join("hf-home"))
        .env("HF_HUB_DISABLE_TELEMETRY", "1"));
    let printed = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let failed: Vec<String> = hub
        .requests()
        .iter()
        .filter(|r| r.status >= 400 && r.status != 404)
        .map(|r| format!("{} {} -> {}", r.method, r.path, r.status))
        .collect();
    assert!(
        output.status.success(),
        "{printed}\nrequests refused: {failed:#?}\nproblems: {:#?}",
        hub.problems()
    );
    assert!(hub.problems().is_empty(), "{:#?}", hub.problems());
    // The client went through every step of the protocol, parts included.
    let paths: Vec<String> = hub
        .requests()
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    for step in [
        "POST /api/repos/create",
        "POST /api/datasets/check/hf-client/preupload/main",
        "POST /datasets/check/hf-client.git/info/lfs/objects/batch",
        "/part/2",
        "/complete",
        "POST /datasets/check/hf-client.git/info/lfs/objects/verify",
        "POST /api/datasets/check/hf-client/commit/main",
    ] {
        assert!(
            paths.iter().any(|p| p.contains(step)),
            "no {step} in {paths:#?}"
        );
    }
    // One commit besides the Hub's initial one: the second upload changed nothing.
    let commits = hub.commits("check/hf-client");
    assert_eq!(commits.len(), 2, "{commits:#?}");
    assert_eq!(commits[1].summary, "first");
}
