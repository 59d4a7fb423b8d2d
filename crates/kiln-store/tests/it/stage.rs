//! Stage tables: append, reopen, orphan cleanup, remove_keys, compaction, staleness.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use kiln_schema::{Candidate, Row, Verdict};
use kiln_store::{MANIFEST, Manifest, StageTable, Status, StoreError, read_rows};

use crate::samples;

fn inputs() -> BTreeMap<String, String> {
    BTreeMap::from([("crawl".to_string(), "h1".to_string())])
}

fn open(dir: &Path) -> StageTable<Candidate> {
    StageTable::open(dir, "filter", "cfg", inputs()).unwrap()
}

fn files(dir: &Path) -> BTreeSet<String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect()
}

fn keys_of(rows: &[Candidate]) -> Vec<String> {
    rows.iter().map(|r| r.key().to_string()).collect()
}

#[test]
fn open_creates_manifest() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run/filter");
    let table = open(&dir);
    assert!(!table.is_stale());
    let m = Manifest::read(&dir).unwrap();
    assert_eq!(m.status, Status::Incomplete);
    assert_eq!(m.table, "candidate");
    assert_eq!(m.stage, "filter");
    assert_eq!(m.config_hash, "cfg");
    assert_eq!(m.input_hashes, inputs());
    assert!(m.parts.is_empty());
    let json: serde_json::Value =
        serde_json::from_slice(&fs::read(dir.join(MANIFEST)).unwrap()).unwrap();
    for field in [
        "schema_version",
        "table",
        "stage",
        "status",
        "config_hash",
        "input_hashes",
        "parts",
        "rows",
        "counts",
        "updated_at",
    ] {
        assert!(json.get(field).is_some(), "manifest lacks {field}: {json}");
    }
    assert_eq!(json["status"], "incomplete");
}

#[test]
fn append_then_reopen_and_append_again() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("filter");
    let mut table = open(&dir);
    table.append(&samples::candidates(3, "a")).unwrap();
    table.append(&[]).unwrap();
    assert_eq!(table.manifest().parts, vec!["part-00000.parquet"]);
    drop(table);

    let mut table = open(&dir);
    assert!(!table.is_stale());
    assert_eq!(table.keys().unwrap().len(), 3);
    table.append(&samples::candidates(2, "b")).unwrap();
    assert_eq!(
        table.manifest().parts,
        vec!["part-00000.parquet", "part-00001.parquet"]
    );
    assert_eq!(table.manifest().rows, 5);
    let rows = read_rows::<Candidate>(&dir).unwrap();
    assert_eq!(keys_of(&rows), ["a-0", "a-1", "a-2", "b-0", "b-1"]);
    assert_eq!(table.rows().unwrap(), rows);
}

#[test]
fn duplicate_keys_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("filter");
    let mut table = open(&dir);
    table.append(&samples::candidates(2, "a")).unwrap();
    let err = table.append(&samples::candidates(1, "a")).unwrap_err();
    assert!(
        matches!(err, StoreError::DuplicateKey { ref key, .. } if key == "a-0"),
        "{err}"
    );
    let twice = vec![samples::candidate("x"), samples::candidate("x")];
    assert!(matches!(
        table.append(&twice),
        Err(StoreError::DuplicateKey { .. })
    ));
    // Nothing was written by the failed appends.
    assert_eq!(table.manifest().parts.len(), 1);
    assert_eq!(files(&dir).len(), 2);
    // Also after reopening (index rebuilt from disk).
    let mut table = open(&dir);
    assert!(table.append(&samples::candidates(1, "a")).is_err());
}

#[test]
fn orphans_and_temp_files_are_removed_on_open() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("filter");
    let mut table = open(&dir);
    table.append(&samples::candidates(2, "a")).unwrap();
    drop(table);
    // A crash after renaming a part but before the manifest listed it, and crashes while
    // writing a part and the manifest.
    fs::copy(
        dir.join("part-00000.parquet"),
        dir.join("part-00001.parquet"),
    )
    .unwrap();
    fs::write(dir.join(".part-00002.parquet.tmp-999-0"), b"PAR1 half").unwrap();
    fs::write(dir.join(".manifest.json.tmp-999-1"), b"{").unwrap();

    let mut table = open(&dir);
    assert_eq!(
        files(&dir),
        BTreeSet::from([
            "manifest.json".to_string(),
            "part-00000.parquet".to_string()
        ])
    );
    assert_eq!(keys_of(&table.rows().unwrap()), ["a-0", "a-1"]);
    // The next part reuses the orphan's number without trouble.
    table.append(&samples::candidates(1, "b")).unwrap();
    assert_eq!(keys_of(&read_rows(&dir).unwrap()), ["a-0", "a-1", "b-0"]);
}

#[test]
fn manifest_missing_after_crash_at_creation() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("filter");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("part-00000.parquet"), b"junk").unwrap();
    let table = open(&dir);
    assert!(table.rows().unwrap().is_empty());
    assert_eq!(files(&dir), BTreeSet::from(["manifest.json".to_string()]));
}

#[test]
fn remove_keys_rewrites_only_affected_parts() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("filter");
    let mut table = open(&dir);
    table.append(&samples::candidates(3, "a")).unwrap(); // part 0
    table.append(&samples::candidates(2, "b")).unwrap(); // part 1
    table.append(&samples::candidates(1, "c")).unwrap(); // part 2
    let before = table.rows().unwrap();
    let part1 = fs::read(dir.join("part-00001.parquet")).unwrap();

    let removed = table
        .remove_keys(&BTreeSet::from([
            "a-1".to_string(),
            "c-0".to_string(),
            "zzz".to_string(),
        ]))
        .unwrap();
    assert_eq!(removed, 2);
    // Part 1 untouched, byte for byte; part 0 rewritten under a new name; part 2 dropped.
    assert_eq!(
        table.manifest().parts,
        vec!["part-00003.parquet", "part-00001.parquet"]
    );
    assert_eq!(fs::read(dir.join("part-00001.parquet")).unwrap(), part1);
    assert_eq!(
        files(&dir),
        BTreeSet::from([
            "manifest.json".to_string(),
            "part-00001.parquet".to_string(),
            "part-00003.parquet".to_string()
        ])
    );
    assert_eq!(table.manifest().rows, 4);
    assert_eq!(table.manifest().status, Status::Incomplete);

    let after = read_rows::<Candidate>(&dir).unwrap();
    let expected: Vec<Candidate> = before
        .into_iter()
        .filter(|r| r.key() != "a-1" && r.key() != "c-0")
        .collect();
    assert_eq!(after, expected, "other rows keep their content and order");
    assert_eq!(
        table.keys().unwrap(),
        ["a-0", "a-2", "b-0", "b-1"].map(String::from).into()
    );
    // The removed keys can be redone.
    table.append(&[samples::candidate("a-1")]).unwrap();
    assert_eq!(table.manifest().rows, 5);
    assert_eq!(table.remove_keys(&BTreeSet::new()).unwrap(), 0);
}

#[test]
fn complete_counts_hash_and_compact() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("filter");
    let mut table = open(&dir);
    for i in 0..4 {
        table
            .append(&[samples::candidate(&format!("k{i}"))])
            .unwrap();
    }
    let hash_before = table.hash().unwrap();
    let counts = BTreeMap::from([("kept".to_string(), 3u64), ("dropped".to_string(), 1)]);
    table.set_complete(true, counts.clone()).unwrap();
    assert!(table.is_complete());
    let m = Manifest::read(&dir).unwrap();
    assert_eq!(m.status, Status::Complete);
    assert_eq!(m.counts, counts);
    assert_eq!(m.content_hash.as_deref(), Some(hash_before.as_str()));

    table.compact().unwrap();
    assert_eq!(table.manifest().parts, vec!["part-00004.parquet"]);
    assert_eq!(files(&dir).len(), 2);
    assert_eq!(
        table.hash().unwrap(),
        hash_before,
        "compaction keeps the hash"
    );
    assert!(table.is_complete());
    let rows = read_rows::<Candidate>(&dir).unwrap();
    assert_eq!(keys_of(&rows), ["k0", "k1", "k2", "k3"]);

    // The hash depends on the rows only, not on the order of appends.
    let other = tmp.path().join("other");
    let mut t2 = StageTable::<Candidate>::open(&other, "filter", "cfg", inputs()).unwrap();
    t2.append(&[samples::candidate("k3"), samples::candidate("k1")])
        .unwrap();
    t2.append(&[samples::candidate("k0"), samples::candidate("k2")])
        .unwrap();
    assert_eq!(t2.hash().unwrap(), hash_before);
    t2.remove_keys(&BTreeSet::from(["k0".to_string()])).unwrap();
    assert_ne!(t2.hash().unwrap(), hash_before);

    // Appending again makes the stage incomplete.
    let mut table = open(&dir);
    table.append(&[samples::candidate("k9")]).unwrap();
    assert_eq!(table.manifest().status, Status::Incomplete);
    assert_eq!(table.manifest().content_hash, None);
}

#[test]
fn changed_hashes_make_the_table_stale_until_reset() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("filter");
    let mut table = open(&dir);
    table.append(&samples::candidates(2, "a")).unwrap();
    drop(table);

    let mut table = StageTable::<Candidate>::open(&dir, "filter", "cfg2", inputs()).unwrap();
    assert!(table.is_stale());
    assert!(matches!(
        table.append(&samples::candidates(1, "z")),
        Err(StoreError::Stale { .. })
    ));
    // The old rows stay readable.
    assert_eq!(table.rows().unwrap().len(), 2);
    table.reset().unwrap();
    assert!(!table.is_stale());
    assert!(table.rows().unwrap().is_empty());
    assert_eq!(files(&dir), BTreeSet::from(["manifest.json".to_string()]));
    assert_eq!(Manifest::read(&dir).unwrap().config_hash, "cfg2");
    table.append(&samples::candidates(1, "a")).unwrap();

    let mut other_inputs = inputs();
    other_inputs.insert("crawl".into(), "h2".into());
    let table = StageTable::<Candidate>::open(&dir, "filter", "cfg2", other_inputs).unwrap();
    assert!(table.is_stale());
    let table = StageTable::<Candidate>::open(&dir, "filter", "cfg2", inputs()).unwrap();
    assert!(!table.is_stale());
}

#[test]
fn other_schema_version_or_table_in_manifest() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("filter");
    let mut table = open(&dir);
    table.append(&samples::candidates(1, "a")).unwrap();
    drop(table);

    // Another table type on the same directory.
    let t = StageTable::<Verdict>::open(&dir, "filter", "cfg", inputs()).unwrap();
    assert!(t.is_stale());
    assert!(matches!(t.rows(), Err(StoreError::TableMismatch { .. })));

    // A manifest from an older kiln.
    let mut m = Manifest::read(&dir).unwrap();
    m.schema_version = 0;
    fs::write(dir.join(MANIFEST), serde_json::to_vec(&m).unwrap()).unwrap();
    let err = read_rows::<Candidate>(&dir).unwrap_err();
    assert!(matches!(err, StoreError::SchemaVersion { .. }), "{err}");
    assert!(err.to_string().contains("manifest.json"), "{err}");
    let t = open(&dir);
    assert!(t.is_stale());
}

#[test]
fn read_rows_of_missing_stage_names_the_path() {
    let tmp = tempfile::tempdir().unwrap();
    let err = read_rows::<Candidate>(&tmp.path().join("nope")).unwrap_err();
    assert!(err.is_not_found());
    assert!(err.to_string().contains("nope/manifest.json"), "{err}");
}

#[test]
fn state_commits_with_its_rows_and_survives_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run/crawl");
    let mut table = open(&dir);
    let rows = samples::candidates(2, "s");
    let cursor = |c: &str| BTreeMap::from([("o/r".to_string(), serde_json::json!({"cursor": c}))]);
    table.append_with_state(&rows[..1], cursor("a")).unwrap();
    assert_eq!(table.state()["o/r"]["cursor"], "a");
    // A state update without rows is a manifest write of its own.
    table.append_with_state(&[], cursor("b")).unwrap();
    table
        .set_stats(BTreeMap::from([("requests".to_string(), 3.0)]))
        .unwrap();
    let reopened = open(&dir);
    assert_eq!(reopened.state()["o/r"]["cursor"], "b");
    assert_eq!(reopened.manifest().stats["requests"], 3.0);
    assert_eq!(reopened.keys().unwrap().len(), 1);
    // A duplicate key fails the whole append: the state does not move either.
    let mut table = reopened;
    assert!(table.append_with_state(&rows[..1], cursor("c")).is_err());
    assert_eq!(open(&dir).state()["o/r"]["cursor"], "b");
    // `null` removes an entry; reset clears state and stats.
    let mut table = open(&dir);
    table
        .append_with_state(
            &rows[1..],
            BTreeMap::from([("o/r".to_string(), serde_json::Value::Null)]),
        )
        .unwrap();
    assert!(table.state().is_empty());
    table.reset().unwrap();
    assert!(table.manifest().stats.is_empty());
}
