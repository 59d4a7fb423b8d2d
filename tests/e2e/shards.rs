//! A split run on the real engine: the demo's fixtures as four shards in four processes, two of
//! them killed with SIGKILL in the middle of their work and started again, merged, and exported
//! into the release an unsharded run makes.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use kiln_schema::ReleaseInstance;

use crate::demo::expected_lists;
use crate::resume::{kiln_with_token, prepare};
use crate::{run, tempdir, text};

fn shard_runs(dir: &Path, dataset: &str, index: u32) -> PathBuf {
    dir.join("datasets")
        .join(dataset)
        .join("shards/of-4")
        .join(index.to_string())
        .join(dataset)
        .join("runs")
}

/// Whether the shard has started building: a launch log of one of its items exists.
fn launching(dir: &Path, dataset: &str, index: u32) -> bool {
    let Ok(runs) = std::fs::read_dir(shard_runs(dir, dataset, index)) else {
        return false;
    };
    runs.filter_map(Result::ok).any(|run| {
        std::fs::read_dir(run.path().join("logs"))
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .any(|item| item.path().join("launch").is_dir())
    })
}

fn spawn_shard(demo: &kiln_demo::Demo, config: &Path, index: u32, log: &Path) -> Child {
    let log = std::fs::File::create(log).unwrap();
    kiln_with_token(demo)
        .args(["run", "--shard", &format!("{index}/4"), "--config"])
        .arg(config)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap()
}

#[test]
fn four_shards_two_killed_and_restarted_merge_into_the_unsharded_release() {
    let _demo = crate::demo_lock();
    let tmp = tempdir();
    let dir = tmp.path().join("fixtures");
    let (demo, config) = prepare(&dir, "sharded");
    let log = |i: u32, attempt: &str| tmp.path().join(format!("shard-{i}-{attempt}.log"));

    let started = Instant::now();
    let mut children: Vec<Child> = (0..4)
        .map(|i| spawn_shard(&demo, &config, i, &log(i, "first")))
        .collect();
    // Shards 0 and 1 die by SIGKILL once they are building.
    for index in [0u32, 1] {
        let deadline = Instant::now() + Duration::from_secs(900);
        while !launching(&dir, "sharded", index) {
            if let Ok(Some(status)) = children[index as usize].try_wait() {
                panic!(
                    "shard {index} ended ({status}) before it was killed: {}",
                    std::fs::read_to_string(log(index, "first")).unwrap_or_default()
                );
            }
            assert!(
                Instant::now() < deadline,
                "shard {index} never started launching"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        children[index as usize].kill().unwrap();
        children[index as usize].wait().unwrap();
    }
    for index in [2usize, 3] {
        let status = children[index].wait().unwrap();
        assert!(
            status.success(),
            "shard {index}: {}",
            std::fs::read_to_string(log(index as u32, "first")).unwrap_or_default()
        );
    }
    // Killed shards are not finished: the merge names them and writes nothing.
    let refused = run(kiln_with_token(&demo)
        .args(["merge", "--shards", "4", "--config"])
        .arg(&config));
    assert_eq!(refused.status.code(), Some(6), "{}", text(&refused));
    let said = text(&refused);
    assert!(
        said.contains("shard 0/4 (run ") && said.contains("incomplete"),
        "{said}"
    );
    assert!(said.contains("shard 1/4 (run "), "{said}");
    assert!(
        !dir.join("datasets/sharded/runs").exists(),
        "nothing was merged"
    );

    // Started again, each resumes its own run.
    for index in [0u32, 1] {
        let status = spawn_shard(&demo, &config, index, &log(index, "again"))
            .wait()
            .unwrap();
        let said = std::fs::read_to_string(log(index, "again")).unwrap_or_default();
        assert!(status.success(), "shard {index}: {said}");
        let runs = std::fs::read_dir(shard_runs(&dir, "sharded", index))
            .unwrap()
            .count();
        assert_eq!(
            runs, 1,
            "shard {index} resumed its run rather than starting one"
        );
    }
    eprintln!("four shards took {:.0} s", started.elapsed().as_secs_f64());

    let status = run(kiln_with_token(&demo)
        .args(["status", "--shards", "--config"])
        .arg(&config));
    assert!(
        text(&status).contains("4 shards in") && text(&status).contains("4 finished"),
        "{}",
        text(&status)
    );
    let merged = run(kiln_with_token(&demo)
        .args(["merge", "--shards", "4", "--export", "--config"])
        .arg(&config));
    assert!(merged.status.success(), "{}", text(&merged));

    // The release is the unsharded run's: the same instances with the same lists (the demo test
    // checks that an unsharded run produces exactly these).
    let tag = crate::release_dir(&dir, "sharded");
    let rows: Vec<ReleaseInstance> =
        kiln_store::read_parquet(&tag.join("data/test-00000-of-00001.parquet")).unwrap();
    let ids: Vec<&str> = rows.iter().map(|r| r.instance_id.as_str()).collect();
    assert_eq!(ids, ["kiln-demo__calc-2", "kiln-demo__textwrap2-3"]);
    for row in &rows {
        let (fail_to_pass, pass_to_pass) = &expected_lists()[row.instance_id.as_str()];
        assert_eq!(&row.FAIL_TO_PASS, fail_to_pass, "{}", row.instance_id);
        assert_eq!(&row.PASS_TO_PASS, pass_to_pass, "{}", row.instance_id);
    }
    // Every instance's outcome is in the merged run, once.
    let runs = dir.join("datasets/sharded/runs");
    let run_dir = std::fs::read_dir(&runs)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let launched: Vec<kiln_schema::EnvironmentRecord> =
        crate::resume::rows(&run_dir.join("launch"));
    crate::resume::assert_unique(&launched);
    assert_eq!(launched.len(), 4);
}
