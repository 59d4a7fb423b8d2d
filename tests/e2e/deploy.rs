//! The jobs `kiln deploy` writes, run or checked for real: the Slurm job array on a one-node
//! Slurm cluster (Debian's slurm-wlm and munge on loopback) with the merge as a dependent job,
//! and the Kubernetes Jobs against the Kubernetes API's published schemas (kubernetes-validate
//! from PyPI, strict: a field the API does not know fails).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use kiln_schema::ReleaseInstance;

use crate::demo::expected_lists;
use crate::resume::prepare;
use crate::{kiln, run, tempdir, text, workspace_root};

/// A one-node Slurm cluster, stopped when dropped.
struct Cluster(PathBuf);

impl Cluster {
    fn start(state: &Path) -> Self {
        let started = run(Command::new("bash")
            .arg(workspace_root().join("scripts/slurm-cluster.sh"))
            .arg("start")
            .arg(state));
        assert!(started.status.success(), "{}", text(&started));
        Self(state.to_path_buf())
    }

    fn conf(&self) -> PathBuf {
        self.0.join("slurm.conf")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(workspace_root().join("scripts/slurm-cluster.sh"))
            .arg("stop")
            .arg(&self.0)
            .status();
    }
}

#[test]
fn a_slurm_job_array_runs_the_shards_and_its_dependent_job_merges_and_exports() {
    let _demo = crate::demo_lock();
    let tmp = tempdir();
    let dir = tmp.path().join("fixtures");
    let (demo, config) = prepare(&dir, "slurmed");
    let cluster = Cluster::start(&tmp.path().join("slurm"));

    let script = tmp.path().join("submit.sh");
    let written = run(kiln()
        .args([
            "deploy", "slurm", "--shards", "4", "--cpus", "1", "--mem", "1g", "--time", "1:00:00",
        ])
        .args(["--config"])
        .arg(&config)
        .arg("--output")
        .arg(&script));
    assert!(written.status.success(), "{}", text(&written));
    let started = Instant::now();
    let submitted = run(Command::new("bash")
        .arg(&script)
        .env("SLURM_CONF", cluster.conf())
        .env(kiln_demo::DEMO_TOKEN_ENV, &demo.token));
    assert!(submitted.status.success(), "{}", text(&submitted));
    let said = String::from_utf8_lossy(&submitted.stdout).to_string();
    // The script ends by naming both jobs.
    let job_after = |words: &str| {
        said.split(words)
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("no job id after {words:?} in: {said}"))
            .to_string()
    };
    let merge_job = job_after("the merge as job ");
    let array_job = job_after("array job ");

    // Wait until Slurm holds none of the jobs (the merge waits for the array: afterany).
    let deadline = Instant::now() + Duration::from_secs(1800);
    loop {
        let queue = run(Command::new("squeue")
            .args([
                "-h",
                "-o",
                "%i %T",
                "-j",
                &format!("{array_job},{merge_job}"),
            ])
            .env("SLURM_CONF", cluster.conf()));
        if String::from_utf8_lossy(&queue.stdout).trim().is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the jobs did not finish: {}",
            text(&queue)
        );
        std::thread::sleep(Duration::from_secs(2));
    }
    eprintln!(
        "slurm array and merge took {:.0} s",
        started.elapsed().as_secs_f64()
    );
    let logs = dir.join("datasets/slurmed/shards/of-4");
    let merge_log = std::fs::read_to_string(logs.join(format!("slurm-{merge_job}-merge.log")))
        .unwrap_or_default();
    let shard_logs: String = (0..4)
        .map(|i| {
            std::fs::read_to_string(logs.join(format!("slurm-{array_job}_{i}.log")))
                .unwrap_or_default()
        })
        .collect();
    assert!(
        merge_log.contains("merged 4 shards into run"),
        "merge job:\n{merge_log}\nshards:\n{shard_logs}"
    );

    // Each array task ran one shard, and the merged run's release is the unsharded one.
    for index in 0..4 {
        let runs = logs.join(index.to_string()).join("slurmed/runs");
        assert_eq!(
            std::fs::read_dir(&runs).map(Iterator::count).unwrap_or(0),
            1,
            "shard {index}: {}",
            runs.display()
        );
    }
    let tag = crate::release_dir(&dir, "slurmed");
    let rows: Vec<ReleaseInstance> =
        kiln_store::read_parquet(&tag.join("data/test-00000-of-00001.parquet")).unwrap();
    let ids: Vec<&str> = rows.iter().map(|r| r.instance_id.as_str()).collect();
    assert_eq!(
        ids,
        ["kiln-demo__calc-2", "kiln-demo__textwrap2-3"],
        "{merge_log}"
    );
    for row in &rows {
        let (fail_to_pass, pass_to_pass) = &expected_lists()[row.instance_id.as_str()];
        assert_eq!(&row.FAIL_TO_PASS, fail_to_pass, "{}", row.instance_id);
        assert_eq!(&row.PASS_TO_PASS, pass_to_pass, "{}", row.instance_id);
    }
}

/// `kubernetes-validate --strict` of the virtualenv scripts/python-env.sh makes.
fn kubernetes_validate(file: &Path, version: &str) -> std::process::Output {
    let python = run(Command::new("bash").arg(workspace_root().join("scripts/python-env.sh")));
    assert!(python.status.success(), "{}", text(&python));
    let python = PathBuf::from(String::from_utf8_lossy(&python.stdout).trim());
    let validate = python.with_file_name("kubernetes-validate");
    run(Command::new(validate)
        .args(["--strict", "--kubernetes-version", version])
        .arg(file))
}

#[test]
fn the_kubernetes_jobs_match_the_published_api_schema() {
    let tmp = tempdir();
    let config = tmp.path().join("pipeline.toml");
    std::fs::write(
        &config,
        "[dataset]\nname = \"month\"\nroot = \"/data/datasets\"\n\
         [docker]\nregistry = \"registry.example:5000/kiln\"\ncpus = 1\nmemory = \"2g\"\n\
         [sources.tasks]\nkind = \"ingest\"\npath = \"tasks.jsonl\"\nclone_url = \"https://github.com/{owner}/{name}.git\"\n\
         [stages.launch]\nkind = \"launch\"\ninputs = [\"tasks\"]\nconcurrency = 2\n",
    )
    .unwrap();
    let manifests = tmp.path().join("jobs.yaml");
    let written = run(kiln()
        .args([
            "deploy",
            "k8s",
            "--shards",
            "6",
            "--image",
            "registry.example:5000/kiln:1",
        ])
        .args([
            "--volume-claim",
            "kiln-data",
            "--mount",
            "/data",
            "--config",
        ])
        .arg(&config)
        .arg("--output")
        .arg(&manifests));
    assert!(written.status.success(), "{}", text(&written));
    // Native sidecars (`restartPolicy` of an init container) came in 1.28 and
    // backoffLimitPerIndex in 1.28/1.29; the newest schema the package has too.
    for version in ["1.29.0", "1.37.0"] {
        let checked = kubernetes_validate(&manifests, version);
        assert!(checked.status.success(), "{version}: {}", text(&checked));
        assert_eq!(
            text(&checked).matches("passed for resource").count(),
            2,
            "{}",
            text(&checked)
        );
    }
    // What the fields say.
    let yaml = std::fs::read_to_string(&manifests).unwrap();
    let docs: Vec<serde_json::Value> = yaml
        .split("\n---\n")
        .skip(1)
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let shards = &docs[0]["spec"];
    assert_eq!(shards["completionMode"], "Indexed");
    assert_eq!(shards["completions"], 6);
    assert_eq!(shards["backoffLimitPerIndex"], 3);
    let rule = &shards["podFailurePolicy"]["rules"][0];
    assert_eq!(rule["action"], "FailIndex");
    assert_eq!(rule["onExitCodes"]["values"], serde_json::json!([2, 3, 6]));
    let kiln_container = &shards["template"]["spec"]["containers"][0];
    assert_eq!(
        kiln_container["args"],
        serde_json::json!([
            "--quiet",
            "run",
            "--config",
            config.display().to_string(),
            "--shard",
            "auto"
        ])
    );
    assert!(
        kiln_container["env"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "KILN_SHARD_COUNT" && e["value"] == "6")
    );
    assert_eq!(
        kiln_container["resources"]["requests"]["cpu"], "3",
        "2 x 1 CPU + 1"
    );
    let merge = &docs[1]["spec"]["template"]["spec"]["containers"][0]["args"];
    assert!(
        merge.as_array().unwrap().iter().any(|a| a == "--wait"),
        "{merge}"
    );

    // The check is strict: a field the API does not know fails it.
    let misspelt = tmp.path().join("misspelt.yaml");
    std::fs::write(
        &misspelt,
        yaml.replacen("\"backoffLimitPerIndex\"", "\"backoffLimitPerIndx\"", 1),
    )
    .unwrap();
    let refused = kubernetes_validate(&misspelt, "1.37.0");
    assert!(!refused.status.success(), "{}", text(&refused));
    assert!(
        text(&refused).contains("backoffLimitPerIndx"),
        "{}",
        text(&refused)
    );
}
