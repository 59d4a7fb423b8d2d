//! Run directories and the run lock.

use std::fs;

use kiln_store::{LOCK_FILE, RunLock, RunStore, Status, StoreError, latest, process_alive};

#[test]
fn create_open_latest() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    assert_eq!(latest(root, "ds").unwrap(), None);

    let toml = "[crawl]\nrepos = [\"a/b\"]\n";
    let run = RunStore::create(root, "ds", None, toml, "h").unwrap();
    let id = run.run_id().to_string();
    assert_eq!(id.len(), 15, "{id}");
    assert!(id.as_bytes()[8] == b'-' && id.bytes().filter(u8::is_ascii_digit).count() == 14);
    assert_eq!(run.dir(), root.join("ds/runs").join(&id));
    let json: serde_json::Value =
        serde_json::from_slice(&fs::read(run.dir().join("run.json")).unwrap()).unwrap();
    assert_eq!(json["run_id"], id.as_str());
    assert_eq!(json["dataset"], "ds");
    assert_eq!(json["config_hash"], "h");
    assert_eq!(json["config"], toml);
    assert_eq!(json["status"], "incomplete");
    assert!(json["started_at"].as_str().unwrap().ends_with('Z'));

    // Same second: suffixes, and `latest` orders them numerically.
    let second = RunStore::create(root, "ds", None, toml, "h").unwrap();
    assert_ne!(second.run_id(), id);
    let base = &second.run_id()[..15];
    fs::create_dir_all(root.join("ds/runs").join(format!("{base}-10"))).unwrap();
    fs::write(
        root.join("ds/runs").join(format!("{base}-10/run.json")),
        b"{}",
    )
    .unwrap();
    fs::create_dir_all(root.join("ds/runs").join(format!("{base}-9"))).unwrap();
    fs::write(
        root.join("ds/runs").join(format!("{base}-9/run.json")),
        b"{}",
    )
    .unwrap();
    fs::create_dir_all(root.join("ds/runs/99999999-999999-no-run-json")).unwrap();
    assert_eq!(latest(root, "ds").unwrap(), Some(format!("{base}-10")));

    let mut reopened = RunStore::open(root, "ds", &id).unwrap();
    assert_eq!(reopened.info(), run.info());
    reopened.set_status(Status::Complete).unwrap();
    assert_eq!(
        RunStore::open(root, "ds", &id).unwrap().info().status,
        Status::Complete
    );

    // Explicit ids: taken once.
    RunStore::create(root, "ds", Some("manual"), toml, "h").unwrap();
    assert!(RunStore::create(root, "ds", Some("manual"), toml, "h").is_err());
    assert!(RunStore::create(root, "ds", Some("../x"), toml, "h").is_err());
}

#[test]
fn stage_and_log_dirs() {
    let tmp = tempfile::tempdir().unwrap();
    let run = RunStore::create(tmp.path(), "ds", Some("r1"), "", "h").unwrap();
    assert_eq!(run.stage_dir("filter").unwrap(), run.dir().join("filter"));
    let id = |text: &str| kiln_schema::InstanceId::new(text).unwrap();
    assert_eq!(
        run.log_dir(&id("a__b-1"), "launch").unwrap(),
        run.dir().join("logs/a__b-1/launch")
    );
    assert!(run.stage_dir("../etc").is_err());
    assert!(run.stage_dir("logs").is_err());
    // Ids that differ only in case get directories of their own, on any file system.
    let upper = run.log_dir(&id("A__b-1"), "launch").unwrap();
    assert_ne!(upper, run.dir().join("logs/a__b-1/launch"));
    assert!(upper.starts_with(run.dir().join("logs")));
    assert!(run.log_dir(&id("a__b-1"), "../x").is_err());
    let mut table = run
        .stage::<kiln_schema::Verdict>("filter", "c", Default::default())
        .unwrap();
    table.append(&[crate::samples::verdict("v")]).unwrap();
    assert_eq!(
        kiln_store::read_rows::<kiln_schema::Verdict>(&run.dir().join("filter"))
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn lock_held_then_released() {
    let tmp = tempfile::tempdir().unwrap();
    let lock = RunLock::acquire(tmp.path()).unwrap();
    let text = fs::read_to_string(tmp.path().join(LOCK_FILE)).unwrap();
    assert_eq!(text.trim(), std::process::id().to_string());

    let err = RunLock::acquire(tmp.path()).unwrap_err();
    assert!(
        matches!(err, StoreError::Locked { pid, .. } if pid == std::process::id()),
        "{err}"
    );
    let msg = err.to_string();
    assert!(msg.contains(&std::process::id().to_string()), "{msg}");
    assert!(msg.contains("run.lock"), "{msg}");

    drop(lock);
    assert!(!tmp.path().join(LOCK_FILE).exists());
    let _again = RunLock::acquire(tmp.path()).unwrap();
}

#[test]
fn lock_held_by_another_live_process() {
    let tmp = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    fs::write(tmp.path().join(LOCK_FILE), format!("{}\n", child.id())).unwrap();
    let err = RunLock::acquire(tmp.path()).unwrap_err();
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        matches!(err, StoreError::Locked { pid, .. } if pid == child.id()),
        "{err}"
    );
    // Now the holder is dead: the lock is taken over.
    assert!(!process_alive(child.id()));
    let lock = RunLock::acquire(tmp.path()).unwrap();
    let text = fs::read_to_string(lock.path()).unwrap();
    assert_eq!(text.trim(), std::process::id().to_string());
}

#[test]
fn stale_and_malformed_locks_are_taken_over() {
    let tmp = tempfile::tempdir().unwrap();
    // Above the kernel's pid_max limit (2^22): never a live process.
    fs::write(tmp.path().join(LOCK_FILE), "999999999\n").unwrap();
    let lock = RunLock::acquire(tmp.path()).unwrap();
    drop(lock);
    fs::write(tmp.path().join(LOCK_FILE), "").unwrap();
    let _lock = RunLock::acquire(tmp.path()).unwrap();
    assert!(process_alive(std::process::id()));
}

/// A staged run is no run until it is published: listings pass it by, publishing renames it
/// into place whole under a fresh id, and one never published is what `remove_unfinished` removes.
#[test]
fn a_staged_run_is_listed_only_once_published() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let earlier = RunStore::create(root, "ds", Some("20240101-000000"), "", "h").unwrap();
    let staged = RunStore::create_staged(root, "ds", "config", "h").unwrap();
    let name = staged
        .dir()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(name.starts_with(kiln_store::STAGED_PREFIX), "{name}");
    assert_eq!(staged.dir().parent(), earlier.dir().parent());
    staged
        .stage::<kiln_schema::Verdict>("filter", "c", Default::default())
        .unwrap();
    assert_eq!(
        kiln_store::run_ids(root, "ds").unwrap(),
        ["20240101-000000"]
    );
    assert_eq!(
        latest(root, "ds").unwrap().as_deref(),
        Some("20240101-000000")
    );
    // Only staged runs are published.
    assert!(earlier.clone().publish().is_err());

    let published = staged.publish().unwrap();
    let id = published.run_id().to_string();
    assert_eq!(latest(root, "ds").unwrap(), Some(id.clone()));
    assert_eq!(published.dir(), root.join("ds/runs").join(&id));
    assert!(published.dir().join("filter/manifest.json").is_file());
    let reopened = RunStore::open(root, "ds", &id).unwrap();
    assert_eq!(reopened.info(), published.info());
    assert_eq!(reopened.info().config, "config");
    assert!(!root.join("ds/runs").join(&name).exists());

    // A staged run its process never published is removed; runs stay.
    let left = RunStore::create_staged(root, "ds", "", "h").unwrap();
    assert_eq!(kiln_store::remove_unfinished(root, "ds").unwrap(), 1);
    assert!(!left.dir().exists());
    assert_eq!(
        kiln_store::run_ids(root, "ds").unwrap(),
        ["20240101-000000", id.as_str()]
    );
    assert_eq!(kiln_store::remove_unfinished(root, "ds").unwrap(), 0);
}

/// A run directory claimed by a process killed before its `run.json` was in place is no run,
/// and goes with the staged ones; a directory holding anything else stays.
#[test]
fn a_run_directory_claimed_and_never_written_is_removed_with_the_staged_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let run = RunStore::create(root, "ds", Some("20240101-000000"), "", "h").unwrap();
    let runs = root.join("ds/runs");
    // Killed right after the claim, and killed before the rename of `run.json`.
    fs::create_dir(runs.join("20240101-000001")).unwrap();
    fs::create_dir(runs.join("20240101-000002")).unwrap();
    fs::write(runs.join("20240101-000002/.run.json.tmp-77-0"), "{").unwrap();
    // Not kiln's to judge: something else lives there.
    fs::create_dir(runs.join("20240101-000003")).unwrap();
    fs::write(runs.join("20240101-000003/notes.txt"), "mine").unwrap();
    assert_eq!(kiln_store::remove_unfinished(root, "ds").unwrap(), 2);
    assert!(!runs.join("20240101-000001").exists());
    assert!(!runs.join("20240101-000002").exists());
    assert!(runs.join("20240101-000003/notes.txt").is_file());
    assert!(run.dir().join(kiln_store::RUN_FILE).is_file());
    assert_eq!(kiln_store::remove_unfinished(root, "ds").unwrap(), 0);
}
