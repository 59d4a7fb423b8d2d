//! The demo on rootless Podman's Docker-compatible API (Debian's podman, run by an unprivileged
//! user, scripts/podman-engine.sh): every instance ends as it does on Docker, and kiln says at
//! start what this engine does differently.

use std::process::Command;

use kiln_schema::ReleaseInstance;

use crate::{kiln, run, tempdir, text, workspace_root};

/// The Podman service, stopped (and its storage emptied) when dropped.
struct Podman(String);

impl Podman {
    fn start() -> Self {
        let started = run(Command::new("bash")
            .arg(workspace_root().join("scripts/podman-engine.sh"))
            .arg("start"));
        assert!(started.status.success(), "{}", text(&started));
        Self(String::from_utf8_lossy(&started.stdout).trim().to_string())
    }
}

impl Drop for Podman {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(workspace_root().join("scripts/podman-engine.sh"))
            .arg("stop")
            .status();
    }
}

#[test]
fn the_demo_ends_on_rootless_podman_as_on_docker() {
    let podman = Podman::start();
    assert!(podman.0.starts_with("unix:///run/user/"), "{}", podman.0);
    let tmp = tempdir();
    let dir = tmp.path().join("demo");
    // Not --quiet: the notes kiln gives at start are checked below.
    let output = run(Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(["--json", "demo", "--dir"])
        .arg(&dir)
        .env("DOCKER_HOST", &podman.0));
    assert!(output.status.success(), "{}", text(&output));
    let report: serde_json::Value =
        serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{e}\n{}", text(&output)));
    crate::demo::check_instances(&report);

    // Said once, as a progress event: the engine, and what it does not enforce here.
    let notes: Vec<String> = String::from_utf8_lossy(&output.stderr)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["event"] == "note")
        .filter_map(|e| e["message"].as_str().map(str::to_string))
        .collect();
    let engine: Vec<&String> = notes
        .iter()
        .filter(|n| n.contains("rootless Podman 4"))
        .collect();
    assert_eq!(engine.len(), 1, "{notes:?}");

    // The release names images that exist on this engine with the digests its rows recorded
    // (Podman spells image ids without `sha256:`; kiln records Docker's form).
    let tag = crate::release_dir(&dir, "demo");
    let rows: Vec<ReleaseInstance> =
        kiln_store::read_parquet(&tag.join("data/test-00000-of-00001.parquet")).unwrap();
    assert_eq!(rows.len(), 2);
    for row in &rows {
        let digest = row.image_digest.as_deref().unwrap_or_default();
        assert!(
            digest.starts_with("sha256:"),
            "{}: {digest}",
            row.instance_id
        );
    }
    let checked = run(kiln()
        .args(["check-images", "--no-pull", "--release"])
        .arg(&tag)
        .arg("--config")
        .arg(dir.join("pipeline.toml"))
        .env("DOCKER_HOST", &podman.0));
    assert!(checked.status.success(), "{}", text(&checked));
}
