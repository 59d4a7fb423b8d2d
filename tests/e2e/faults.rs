//! Fault injection on the real engine: `kill -9` at seeded points of every stage, the engine
//! stopped and restarted in the middle of launch and of validate (a second Docker daemon with its
//! own data root, socket and bridge, started here), the run directory made read-only, the disk
//! full (a small loop-mounted file system). After each, a resume must finish with every item
//! exactly once, the release of an undisturbed run, and no container or image of kiln's left
//! behind. Each test prints a `fault tally:` line.
//!
//! `KILN_FAULT_SEED` chooses the kill points (the default is fixed, so CI is repeatable).

#![expect(
    clippy::print_stderr,
    reason = "the tallies are the point of these tests"
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use kiln_schema::{
    Candidate, EnvironmentRecord, PlatformLabel, ReleaseInstance, Row, ValidationRecord, Verdict,
};

use crate::resume::{assert_unique, kiln_with_token, manifest_rows, only_run, prepare, rows};
use crate::{run, tempdir, text};

/// The stages of the demo's pipeline, in order, by their directory in the run.
const STAGES: [&str; 6] = ["github", "filter", "split", "launch", "validate", "export"];

/// What a finished run of the demo amounts to, independent of its dataset name and times.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Outcome {
    /// Per stage: each item's key with its outcome.
    stages: BTreeMap<String, Vec<String>>,
    /// The release: per row, id, lists and the harness fields.
    release: Vec<String>,
}

/// Reads what the finished run of `dataset` under `dir` produced, checking on the way that no
/// stage holds an item twice, that the run is complete, and that nothing of kiln's is left on
/// the engine at `docker_host` (`None`: the default one).
fn outcome(dir: &Path, dataset: &str, docker_host: Option<&str>) -> Outcome {
    let run_dir = only_run(dir, dataset);
    let mut stages = BTreeMap::new();
    fn keyed<R: Row>(rows: &[R], describe: impl Fn(&R) -> String) -> Vec<String> {
        assert_unique(rows);
        let mut out: Vec<String> = rows
            .iter()
            .map(|r| format!("{} {}", r.key(), describe(r)))
            .collect();
        out.sort();
        out
    }
    let stage = |name: &str| run_dir.join(name);
    stages.insert(
        "github".into(),
        keyed(&rows::<Candidate>(&stage("github")), |c| {
            c.status.to_string()
        }),
    );
    stages.insert(
        "filter".into(),
        keyed(&rows::<Verdict>(&stage("filter")), |v| {
            format!("{} {}", v.keep, v.label)
        }),
    );
    stages.insert(
        "split".into(),
        keyed(&rows::<PlatformLabel>(&stage("split")), |p| {
            p.platform.clone()
        }),
    );
    let environments = rows::<EnvironmentRecord>(&stage("launch"));
    stages.insert(
        "launch".into(),
        keyed(&environments, |e| {
            format!("{} {:?}", e.status, e.failure_class)
        }),
    );
    stages.insert(
        "validate".into(),
        keyed(&rows::<ValidationRecord>(&stage("validate")), |v| {
            format!(
                "{} {:?} {:?} {:?}",
                v.status, v.failure_class, v.FAIL_TO_PASS, v.PASS_TO_PASS
            )
        }),
    );
    let exported = rows::<ReleaseInstance>(&stage("export"));
    stages.insert("export".into(), keyed(&exported, |_| String::new()));
    for name in STAGES {
        let manifest =
            std::fs::read_to_string(stage(name).join("manifest.json")).unwrap_or_default();
        assert!(
            manifest.contains("\"status\": \"complete\""),
            "{name} is not complete: {manifest}"
        );
    }

    let release_dir = crate::release_dir(dir, dataset);
    let shard = release_dir.join("data/test-00000-of-00001.parquet");
    let released: Vec<ReleaseInstance> = kiln_store::read_parquet(&shard).unwrap();
    assert_unique(&released);
    let release = released
        .iter()
        .map(|r| {
            format!(
                "{} {:?} {:?} {} {:?} {}",
                r.instance_id,
                r.FAIL_TO_PASS,
                r.PASS_TO_PASS,
                r.log_parser,
                r.harness_note,
                r.eval_script.len()
            )
        })
        .collect();

    // Nothing of kiln's left: no container of the run, no untagged or scratch image of the
    // dataset, and the tagged images are exactly the built environments'.
    let run_id = run_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let containers = docker(
        docker_host,
        &["ps", "-aq", "--filter"],
        &format!("label=kiln.run={dataset}/{run_id}"),
    );
    assert!(containers.is_empty(), "containers left: {containers:?}");
    let label = dataset_filter(dir, dataset);
    let mut images = docker(
        docker_host,
        &["images", "--format", "{{.Repository}}:{{.Tag}}", "--filter"],
        &label,
    );
    images.sort();
    let mut built: Vec<String> = environments
        .iter()
        .filter_map(|e| e.image.clone())
        .collect();
    built.sort();
    assert_eq!(
        images, built,
        "images of the dataset other than its environments"
    );
    Outcome { stages, release }
}

/// The `docker` CLI, talking to the engine at `host` (`None`: the default one).
fn docker_cli(host: Option<&str>) -> Command {
    let mut command = Command::new("docker");
    if let Some(host) = host {
        command.args(["-H", host]);
    }
    command
}

/// The `docker` filter for the images of a dataset (their `kiln.dataset` label).
fn dataset_filter(dir: &Path, dataset: &str) -> String {
    format!(
        "label=kiln.dataset={}",
        std::path::absolute(dir.join("datasets").join(dataset))
            .unwrap_or_default()
            .display()
    )
}

/// Lines printed by `docker [-H host] <args> <last>`.
fn docker(host: Option<&str>, args: &[&str], last: &str) -> Vec<String> {
    let output = run(docker_cli(host).args(args).arg(last));
    assert!(output.status.success(), "{}", text(&output));
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// The outcome of an undisturbed run, computed once for all the tests here.
fn undisturbed() -> &'static Outcome {
    static BASELINE: OnceLock<Outcome> = OnceLock::new();
    BASELINE.get_or_init(|| {
        let tmp = tempdir();
        let dir = tmp.path().join("fixtures");
        let (demo, config) = prepare(&dir, "fault-base");
        resume(&demo, &config, None);
        finish(&dir, "fault-base", None)
    })
}

/// Removes the environment images of a dataset (each test's dataset is its own).
fn remove_images(host: Option<&str>, dir: &Path, dataset: &str) {
    let label = dataset_filter(dir, dataset);
    let images = docker(host, &["images", "-q", "--filter"], &label);
    if !images.is_empty() {
        let _ = run(docker_cli(host).args(["rmi", "-f"]).args(&images));
    }
}

/// `kiln run` to the end (on the engine at `host`), which must succeed.
fn resume(demo: &kiln_demo::Demo, config: &Path, host: Option<&str>) {
    let mut command = kiln_with_token(demo);
    if let Some(host) = host {
        command.env("DOCKER_HOST", host);
    }
    let output = run(command.args(["run", "--config"]).arg(config));
    assert!(output.status.success(), "{}", text(&output));
}

/// The [`outcome`] of the finished run, after which the dataset's images are removed.
fn finish(dir: &Path, dataset: &str, host: Option<&str>) -> Outcome {
    let outcome = outcome(dir, dataset, host);
    remove_images(host, dir, dataset);
    outcome
}

/// A small deterministic generator (splitmix64) for the kill points.
struct Seeded(u64);

impl Seeded {
    fn from_env() -> Self {
        let seed = std::env::var("KILN_FAULT_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0x6b69_6c6e_u64);
        eprintln!("fault seed: {seed} (KILN_FAULT_SEED)");
        Self(seed)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n.max(1)
    }
}

/// The first stage of the run under `runs` whose manifest is not complete, with its rows.
fn stage_in_progress(runs: &Path) -> Option<(String, u64)> {
    let run_dir = std::fs::read_dir(runs)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.is_dir())?;
    STAGES.iter().find_map(|name| {
        let dir = run_dir.join(name);
        let manifest = std::fs::read_to_string(dir.join("manifest.json")).unwrap_or_default();
        (!manifest.contains("\"status\": \"complete\""))
            .then(|| ((*name).to_string(), manifest_rows(&dir)))
    })
}

fn spawn(mut command: Command, log: &Path) -> Child {
    let file = std::fs::File::create(log).unwrap();
    let err = file.try_clone().unwrap();
    command
        .stdout(Stdio::from(file))
        .stderr(Stdio::from(err))
        .spawn()
        .unwrap()
}

/// Waits for `child` to exit, at most `limit`; kills it and fails the test after that.
fn wait_exit(child: &mut Child, limit: Duration, log: &Path) -> Option<i32> {
    let deadline = Instant::now() + limit;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return status.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "kiln did not exit within {limit:?}: {}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn kill_9_at_seeded_points_of_every_stage_then_a_resume_gives_the_undisturbed_release() {
    let baseline = undisturbed();
    let tmp = tempdir();
    let dir = tmp.path().join("fixtures");
    let dataset = "fault-kill";
    let (demo, config) = prepare(&dir, dataset);
    let runs = dir.join("datasets").join(dataset).join("runs");
    let mut seeded = Seeded::from_env();
    // Kills per stage, and the longest delay after the stage is seen to start: the first four
    // take milliseconds, launch and validate tens of seconds.
    let plan: [(&str, u32, u64); 6] = [
        ("github", 2, 30),
        ("filter", 1, 20),
        ("split", 1, 20),
        ("launch", 4, 25_000),
        ("validate", 3, 2_500),
        ("export", 1, 50),
    ];
    let mut tally: Vec<String> = Vec::new();
    let mut landed: BTreeMap<String, u32> = BTreeMap::new();
    let log = tmp.path().join("kiln.log");
    for (stage, kills, max_ms) in plan {
        for _ in 0..kills {
            // Another `kiln run` of a finished run would start a new run of the month.
            if runs.exists() && stage_in_progress(&runs).is_none() {
                tally.push(format!("aimed at {stage}: the run had finished"));
                continue;
            }
            let mut command = kiln_with_token(&demo);
            command
                .args(["run", "--concurrency", "1", "--config"])
                .arg(&config);
            let mut child = spawn(command, &log);
            let deadline = Instant::now() + Duration::from_secs(900);
            let mut exited = None;
            let target = STAGES.iter().position(|s| *s == stage).unwrap_or(0);
            let reached = |runs: &Path| match stage_in_progress(runs) {
                Some((name, _)) => STAGES.iter().position(|s| *s == name).unwrap_or(0) >= target,
                None => runs.exists(),
            };
            while !reached(&runs) {
                if let Ok(Some(status)) = child.try_wait() {
                    exited = Some(status);
                    break;
                }
                assert!(Instant::now() < deadline, "{stage} never started");
                std::thread::sleep(Duration::from_millis(2));
            }
            if let Some(status) = exited {
                tally.push(format!("{stage}: the run finished first ({status})"));
                continue;
            }
            let delay = seeded.below(max_ms + 1);
            std::thread::sleep(Duration::from_millis(delay));
            let at = stage_in_progress(&runs);
            let _ = child.kill();
            let _ = child.wait();
            match at {
                Some((name, rows)) => {
                    *landed.entry(name.clone()).or_default() += 1;
                    tally.push(format!(
                        "aimed at {stage} +{delay} ms: killed in {name} with {rows} rows"
                    ));
                }
                None => tally.push(format!(
                    "aimed at {stage} +{delay} ms: the run was complete"
                )),
            }
        }
    }
    // The resume (unless the last kill came after the run finished: another `kiln run` would
    // then start a new run of the month, which finds no new pull request).
    if stage_in_progress(&runs).is_some() {
        resume(&demo, &config, None);
    }
    let after = finish(&dir, dataset, None);
    eprintln!(
        "fault tally: kill -9, {} kills: {}",
        tally.len(),
        tally.join("; ")
    );
    eprintln!("fault tally: kills landing mid-stage: {landed:?}");
    assert!(tally.len() >= 10, "{tally:?}");
    for stage in ["launch", "validate"] {
        assert!(
            landed.get(stage).copied().unwrap_or(0) >= 2,
            "kills must land inside {stage}: {tally:?}"
        );
    }
    assert_eq!(
        &after, baseline,
        "the resumed run differs from an undisturbed one"
    );
}

/// A second Docker daemon with its own socket, data root, exec root and bridge, so that stopping
/// it disturbs no other test. Stopped and its bridge removed on drop.
struct SecondDaemon {
    root: PathBuf,
    host: String,
    process: Option<Child>,
}

const BRIDGE: &str = "kilnfault0";

impl SecondDaemon {
    fn new(root: &Path) -> Self {
        let _ = run(Command::new("ip").args(["link", "del", BRIDGE]));
        for args in [
            vec!["link", "add", BRIDGE, "type", "bridge"],
            vec!["addr", "add", "172.30.231.1/24", "dev", BRIDGE],
            vec!["link", "set", BRIDGE, "up"],
        ] {
            let output = run(Command::new("ip").args(&args));
            assert!(output.status.success(), "ip {args:?}: {}", text(&output));
        }
        let daemon = Self {
            root: root.to_path_buf(),
            host: format!("unix://{}", root.join("docker.sock").display()),
            process: None,
        };
        std::fs::create_dir_all(root).unwrap();
        daemon
    }

    fn start(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.root.join("dockerd.log"))
            .unwrap();
        let err = log.try_clone().unwrap();
        let child = Command::new("dockerd")
            .arg("-H")
            .arg(&self.host)
            .arg("--data-root")
            .arg(self.root.join("data"))
            .arg("--exec-root")
            .arg(self.root.join("exec"))
            .arg("--pidfile")
            .arg(self.root.join("dockerd.pid"))
            .args(["--bridge", BRIDGE, "--storage-driver", "overlay2"])
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(err))
            .spawn()
            .expect("dockerd");
        self.process = Some(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let ok = Command::new("docker")
                .args(["-H", &self.host, "info"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the second daemon did not answer: {}",
                std::fs::read_to_string(self.root.join("dockerd.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.process.take() {
            let _ = run(Command::new("kill").args(["-TERM", &child.id().to_string()]));
            let deadline = Instant::now() + Duration::from_secs(60);
            while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Copies images from the default engine (`docker save | docker load`).
    fn load(&self, images: &[String]) {
        let script = format!(
            "docker save {} | docker -H {} load -q",
            images.join(" "),
            self.host
        );
        let output = run(Command::new("bash").args(["-o", "pipefail", "-c", &script]));
        assert!(output.status.success(), "{}", text(&output));
    }
}

impl Drop for SecondDaemon {
    fn drop(&mut self) {
        // Its containers stop with it; its data root goes with the test's directory.
        self.stop();
        let _ = Command::new("ip").args(["link", "del", BRIDGE]).output();
    }
}

#[test]
fn the_engine_stopped_mid_launch_and_mid_validate_stops_the_stage_and_a_resume_finishes() {
    let baseline = undisturbed();
    let tmp = tempdir();
    let mut daemon = SecondDaemon::new(&tmp.path().join("engine"));
    daemon.start();
    // The base images the demo's plans start from, so the second engine builds nothing twice.
    let mut images: Vec<String> = docker(
        None,
        &["images", "--format", "{{.Repository}}:{{.Tag}}"],
        "kiln/python",
    )
    .into_iter()
    .collect();
    images.push("debian:bookworm".into());
    daemon.load(&images);

    let dir = tmp.path().join("fixtures");
    let dataset = "fault-engine";
    let (demo, config) = prepare(&dir, dataset);
    let runs = dir.join("datasets").join(dataset).join("runs");
    let log = tmp.path().join("kiln.log");
    let mut tally = Vec::new();
    for stage in ["launch", "validate"] {
        let mut command = kiln_with_token(&demo);
        command
            .env("DOCKER_HOST", &daemon.host)
            .args(["run", "--concurrency", "1", "--config"])
            .arg(&config);
        let mut child = spawn(command, &log);
        // Mid-stage: launch after its first row, validate a few seconds in.
        let deadline = Instant::now() + Duration::from_secs(900);
        loop {
            let at = stage_in_progress(&runs);
            let ready = match (&at, stage) {
                (Some((name, rows)), "launch") => name == "launch" && *rows >= 1,
                (Some((name, _)), _) => name == stage,
                (None, _) => false,
            };
            if ready {
                break;
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "kiln exited ({status}) before {stage}: {}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
            assert!(Instant::now() < deadline, "{stage} never started");
            std::thread::sleep(Duration::from_millis(20));
        }
        if stage == "validate" {
            std::thread::sleep(Duration::from_secs(3));
        }
        let at = stage_in_progress(&runs);
        let stopped = Instant::now();
        daemon.stop();
        let code = wait_exit(&mut child, Duration::from_secs(300), &log);
        let printed = std::fs::read_to_string(&log).unwrap_or_default();
        assert_eq!(
            code,
            Some(4),
            "the engine's failure stops the run: {printed}"
        );
        let run_dir = only_run(&dir, dataset);
        let environments: Vec<EnvironmentRecord> = rows(&run_dir.join("launch"));
        let validations: Vec<ValidationRecord> = if run_dir.join("validate").exists() {
            rows(&run_dir.join("validate"))
        } else {
            Vec::new()
        };
        let infra = environments
            .iter()
            .filter_map(|e| e.failure_class.map(kiln_schema::FailureClass::as_str))
            .chain(
                validations
                    .iter()
                    .filter_map(|v| v.failure_class.map(kiln_schema::FailureClass::as_str)),
            )
            .filter(|c| *c == "infra")
            .count();
        assert_eq!(infra, 0, "an engine failure became rows: {printed}");
        tally.push(format!(
            "engine stopped in {:?}: kiln exited {code:?} after {:.1} s, {} launch and {} validate rows kept, 0 infra rows",
            at,
            stopped.elapsed().as_secs_f64(),
            environments.len(),
            validations.len()
        ));
        daemon.start();
    }
    resume(&demo, &config, Some(&daemon.host));
    let after = finish(&dir, dataset, Some(&daemon.host));
    eprintln!("fault tally: engine stopped twice: {}", tally.join("; "));
    assert_eq!(
        &after, baseline,
        "the resumed run differs from an undisturbed one"
    );
}

/// Runs `command` (a mount or umount) and fails the test if it fails.
fn sh(command: &str) {
    let output = run(Command::new("bash").args(["-c", command]));
    assert!(output.status.success(), "{command}: {}", text(&output));
}

/// Starts `kiln run` and returns it once launch has written a row.
fn run_until_a_launch_row(demo: &kiln_demo::Demo, config: &Path, runs: &Path, log: &Path) -> Child {
    let mut command = kiln_with_token(demo);
    command
        .args(["run", "--concurrency", "1", "--config"])
        .arg(config);
    let mut child = spawn(command, log);
    let deadline = Instant::now() + Duration::from_secs(900);
    while !stage_in_progress(runs).is_some_and(|(s, rows)| s == "launch" && rows >= 1) {
        assert!(
            child.try_wait().ok().flatten().is_none(),
            "kiln exited early: {}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        assert!(Instant::now() < deadline, "launch wrote no row");
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

/// Starts `kiln run` and kills it once launch has written a row: a run in the middle.
fn interrupted_run(demo: &kiln_demo::Demo, config: &Path, runs: &Path, log: &Path) {
    let mut child = run_until_a_launch_row(demo, config, runs, log);
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn a_read_only_run_directory_is_a_store_error_and_a_resume_finishes() {
    let baseline = undisturbed();
    let tmp = tempdir();
    let dir = tmp.path().join("fixtures");
    let dataset = "fault-ro";
    let (demo, config) = prepare(&dir, dataset);
    let runs = dir.join("datasets").join(dataset).join("runs");
    let log = tmp.path().join("kiln.log");
    interrupted_run(&demo, &config, &runs, &log);
    let run_dir = only_run(&dir, dataset);
    let launch_rows = manifest_rows(&run_dir.join("launch"));

    // Root ignores file modes: a read-only bind mount is what a read-only disk looks like.
    let target = run_dir.display().to_string();
    sh(&format!(
        "mount --bind '{target}' '{target}' && mount -o remount,bind,ro '{target}'"
    ));
    let output = run(kiln_with_token(&demo)
        .args(["run", "--config"])
        .arg(&config));
    sh(&format!("umount '{target}'"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(5), "{}", text(&output));
    assert!(
        stderr.contains("Read-only file system") && stderr.contains(&target),
        "the error names the file and the cause: {stderr}"
    );
    assert_eq!(manifest_rows(&run_dir.join("launch")), launch_rows);

    resume(&demo, &config, None);
    let after = finish(&dir, dataset, None);
    eprintln!(
        "fault tally: read-only run directory: kiln exited 5 ({} launch rows kept), the resume finished",
        launch_rows
    );
    assert_eq!(
        &after, baseline,
        "the resumed run differs from an undisturbed one"
    );
}

#[test]
fn a_full_disk_stops_the_run_and_a_resume_after_freeing_space_finishes() {
    let baseline = undisturbed();
    let tmp = tempdir();
    let dir = tmp.path().join("fixtures");
    let dataset = "fault-full";
    let (demo, config) = prepare(&dir, dataset);
    // The dataset root (runs, logs, the mirror cache) on a file system of its own.
    let image = tmp.path().join("disk.img");
    let mount = dir.join("datasets");
    std::fs::create_dir_all(&mount).unwrap();
    sh(&format!(
        "truncate -s 256M '{img}' && mkfs.ext4 -q -F -m 0 '{img}' && mount -o loop '{img}' '{mnt}'",
        img = image.display(),
        mnt = mount.display()
    ));
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).output();
        }
    }
    let _unmount = Unmount(mount.clone());
    let runs = mount.join(dataset).join("runs");
    let log = tmp.path().join("kiln.log");

    let mut child = run_until_a_launch_row(&demo, &config, &runs, &log);
    // Fill every free block: large writes first, then, once ext4 has settled its delayed
    // allocations, the last blocks with small ones (a single `dd` leaves megabytes free).
    let mnt = mount.display();
    sh(&format!(
        "dd if=/dev/zero of='{mnt}/filler' bs=1M status=none; sync; \
         dd if=/dev/zero of='{mnt}/filler2' bs=4k status=none; \
         dd if=/dev/zero of='{mnt}/filler3' bs=512 status=none; true"
    ));
    let code = wait_exit(&mut child, Duration::from_secs(900), &log);
    let printed = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        matches!(code, Some(4 | 5)),
        "a full disk stops the run with a host or store error: {printed}"
    );
    assert!(printed.contains("No space left on device"), "{printed}");
    let environments: Vec<EnvironmentRecord> = rows(&only_run(&dir, dataset).join("launch"));
    assert!(
        environments.iter().all(|e| !e
            .log_tail
            .as_deref()
            .unwrap_or_default()
            .contains("No space left")),
        "a full disk became a row"
    );
    sh(&format!(
        "rm -f '{mnt}/filler' '{mnt}/filler2' '{mnt}/filler3'"
    ));

    resume(&demo, &config, None);
    let after = finish(&dir, dataset, None);
    eprintln!(
        "fault tally: full disk: kiln exited {code:?} with {} launch rows kept, the resume after freeing space finished",
        environments.len()
    );
    assert_eq!(
        &after, baseline,
        "the resumed run differs from an undisturbed one"
    );
}
