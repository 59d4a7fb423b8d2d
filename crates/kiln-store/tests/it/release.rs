//! Releases: shard naming, dataset card, and reading them with pyarrow.

use std::fs;
use std::process::Command;

use kiln_schema::ReleaseInstance;
use kiln_store::{read_parquet, write_dataset_card, write_release};

use crate::samples;

fn rows(n: usize) -> Vec<ReleaseInstance> {
    (0..n)
        .map(|i| samples::release(&format!("r-{i}"), if i % 3 == 0 { "x" } else { "y" }))
        .collect()
}

fn data_files(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir.join("data"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

#[test]
fn shards_are_named_like_hugging_face() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let all = rows(7);
    let written = write_release(dir, "train", &all, 3).unwrap();
    assert_eq!(written.len(), 3);
    assert_eq!(
        data_files(dir),
        [
            "train-00000-of-00003.parquet",
            "train-00001-of-00003.parquet",
            "train-00002-of-00003.parquet"
        ]
    );
    let mut back = Vec::new();
    for path in &written {
        back.extend(read_parquet::<ReleaseInstance>(path).unwrap());
    }
    assert_eq!(back, all);

    // Another split lives alongside; rewriting a split removes its older shards only.
    write_release(dir, "test", &all[..1], 100).unwrap();
    write_release(dir, "train", &all, 10).unwrap();
    assert_eq!(
        data_files(dir),
        [
            "test-00000-of-00001.parquet",
            "train-00000-of-00001.parquet"
        ]
    );
    // An empty split still has one (empty) shard.
    write_release::<ReleaseInstance>(dir, "test", &[], 100).unwrap();
    assert!(
        read_parquet::<ReleaseInstance>(&dir.join("data/test-00000-of-00001.parquet"))
            .unwrap()
            .is_empty()
    );
    assert!(write_release(dir, "bad/split", &all, 10).is_err());
    assert!(write_release(dir, "", &all, 10).is_err());
}

#[test]
fn dataset_card_has_configs_and_statistics() {
    let tmp = tempfile::tempdir().unwrap();
    let meta = kiln_store::CardMeta {
        name: "kiln-py \"2025-01\"",
        license: "mit",
        lists: &[("tags", vec!["swe-bench".to_string()])],
    };
    let path = write_dataset_card(
        tmp.path(),
        &meta,
        &[("train".to_string(), 7), ("test".to_string(), 1)],
        "## Notes\n\nBuilt by kiln.\n",
    )
    .unwrap();
    let card = fs::read_to_string(path).unwrap();
    let expected_front = "---\npretty_name: \"kiln-py \\\"2025-01\\\"\"\nlicense: \"mit\"\ntags:\n- \"swe-bench\"\nconfigs:\n- config_name: default\n  data_files:\n  - split: train\n    path: data/train-*\n  - split: test\n    path: data/test-*\n---\n";
    assert!(card.starts_with(expected_front), "{card}");
    assert!(card.contains("| train | 7 |"), "{card}");
    assert!(card.ends_with("Built by kiln.\n"), "{card}");
}

/// pyarrow must read a release and filter on a string column (this fails on string-view files);
/// the test lists are JSON text, as SWE-bench stores them. A release written before schema
/// version 9 (test lists as `list<string>`, no `image_digest`; pyarrow writes one here from a new
/// one) still reads.
#[test]
fn pyarrow_reads_and_filters_a_release() {
    let probe = Command::new("python3")
        .args(["-c", "import pyarrow.parquet"])
        .output();
    match probe {
        Ok(out) if out.status.success() => {}
        _ => {
            println!("SKIPPED pyarrow_reads_and_filters_a_release: python3 cannot import pyarrow");
            return;
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut all = rows(10);
    all[0].FAIL_TO_PASS = vec!["t::a".into(), "t::b[x, \"y\"]".into()].into();
    let written = write_release(tmp.path(), "train", &all, 4).unwrap();
    let old = tmp.path().join("old.parquet");
    let script = r#"
import json, sys, pyarrow as pa, pyarrow.parquet as pq
version, old, files = sys.argv[1], sys.argv[2], sys.argv[3:]
n = 0
for f in files:
    t = pq.read_table(f, filters=[('repo', '=', 'x')])
    assert set(t.column('repo').to_pylist()) <= {'x'}, t
    n += t.num_rows
    s = pq.read_schema(f)
    assert s.field('repo').type == pa.string(), s
    assert s.field('FAIL_TO_PASS').type == pa.string(), s
    assert s.field('setup_commands').type == pa.list_(pa.string()), s
    assert s.field('launch_seconds').type == pa.float64(), s
    assert s.field('version').nullable and not s.field('repo').nullable, s
    assert s.metadata[b'kiln.schema_version'] == version.encode(), s.metadata
first = pq.read_table(files[0])
lists = [json.loads(text) for text in first.column('FAIL_TO_PASS').to_pylist()]
assert lists[0] == ['t::a', 't::b[x, "y"]'], lists
index = first.schema.get_field_index('FAIL_TO_PASS')
old_shape = first.set_column(index, 'FAIL_TO_PASS', pa.array(lists, pa.list_(pa.string())))
pq.write_table(old_shape.drop_columns(['image_digest']), old)
print(n)
"#;
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(kiln_schema::SCHEMA_VERSION.to_string())
        .arg(&old)
        .args(&written)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "pyarrow failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "4");
    let new: Vec<ReleaseInstance> = read_parquet(&written[0]).unwrap();
    let before_v9: Vec<ReleaseInstance> = read_parquet(&old).unwrap();
    // The digest column it lacks reads as null; everything else as written.
    assert!(before_v9.iter().all(|r| r.image_digest.is_none()));
    let without_digest: Vec<ReleaseInstance> = new
        .iter()
        .cloned()
        .map(|r| ReleaseInstance {
            image_digest: None,
            ..r
        })
        .collect();
    assert_eq!(before_v9, without_digest);
    assert_eq!(new[0].FAIL_TO_PASS, all[0].FAIL_TO_PASS);
}

#[test]
fn a_directory_is_replaced_whole_and_a_cut_replacement_recovers() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("2024-09");
    let staged = tmp.path().join(".2024-09.staging");
    fs::create_dir_all(&staged).unwrap();
    fs::write(staged.join("a"), "new").unwrap();
    kiln_store::replace_dir(&staged, &target).unwrap();
    assert_eq!(fs::read_to_string(target.join("a")).unwrap(), "new");
    assert!(!staged.exists());
    // A crash between the two renames: the old directory aside, none in place.
    fs::rename(&target, tmp.path().join(".2024-09.old")).unwrap();
    kiln_store::recover_replaced(&target).unwrap();
    assert_eq!(fs::read_to_string(target.join("a")).unwrap(), "new");
    // After a finished replacement, an aside leftover is removed.
    fs::create_dir_all(tmp.path().join(".2024-09.old")).unwrap();
    kiln_store::recover_replaced(&target).unwrap();
    assert!(!tmp.path().join(".2024-09.old").exists());
    assert!(target.join("a").exists());
}
