//! kiln's system tests: the `kiln` binary on the real Docker engine and the real file system,
//! driven as a user drives it. The engine must be running (`scripts/docker-engine.sh start`)
//! with `debian:bookworm` present (`scripts/base-images.sh`); `.ci/run` does both.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a panic is how a test fails"
)]

mod agent;
mod config;
mod crawl;
mod demo;
mod deploy;
mod ecosystems;
mod faults;
mod harbor;
mod hostile;
mod leftovers;
mod lm;
mod modules;
mod podman;
mod refresh;
mod registry;
mod report;
mod resume;
mod shards;
mod tools;
mod validation;
mod workspace;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `kiln` binary built for these tests.
pub fn kiln() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_kiln"));
    command.arg("--quiet");
    command
}

/// Runs a command to completion.
pub fn run(command: &mut Command) -> Output {
    command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {command:?}: {e}"))
}

/// Stdout and stderr of an output, for assertion messages.
pub fn text(output: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `scripts/swebench-check.sh` (the official SWE-bench harness and `datasets`) on the
/// release at `tag`, its logs under `work`, and asserts that it passed and printed every line of
/// `expected`.
pub fn swebench_check(tag: &Path, work: &Path, expected: &[&str]) {
    let check = run(Command::new("bash")
        .arg(workspace_root().join("scripts/swebench-check.sh"))
        .arg(tag)
        .arg("--work")
        .arg(work));
    assert!(check.status.success(), "{}", text(&check));
    let printed = String::from_utf8_lossy(&check.stdout);
    for line in expected {
        assert!(printed.contains(line), "{line}: {}", text(&check));
    }
}

/// Ids of containers carrying a label (`key=value`), running or not, via the docker CLI.
pub fn containers_with_label(label: &str) -> Vec<String> {
    docker_ids(&["ps", "-aq", "--filter", &format!("label={label}")])
}

/// Ids of untagged images carrying a label (`key=value`) that no image is made from: what a
/// dead run's cut-off build or moved tag leaves.
pub fn dangling_images_with_label(label: &str) -> Vec<String> {
    docker_ids(&[
        "images",
        "-q",
        "--filter",
        "dangling=true",
        "--filter",
        &format!("label={label}"),
    ])
}

/// The lines `docker <args>` prints.
fn docker_ids(args: &[&str]) -> Vec<String> {
    let output = run(Command::new("docker").args(args));
    assert!(
        output.status.success(),
        "docker {args:?} failed: {}",
        text(&output)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// Held by every test that runs `kiln demo`: the demo's dataset name and image tags are fixed,
/// so two demos at once would build and remove each other's images.
pub fn demo_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The only release tag directory under `<dir>/datasets/<dataset>/releases`.
pub fn release_dir(dir: &Path, dataset: &str) -> PathBuf {
    let releases = dir.join("datasets").join(dataset).join("releases");
    std::fs::read_dir(&releases)
        .ok()
        .and_then(|mut entries| entries.next())
        .and_then(Result::ok)
        .map(|e| e.path())
        .unwrap_or_else(|| panic!("no release under {}", releases.display()))
}

/// A temporary directory for one test.
pub fn tempdir() -> TestDir {
    TestDir(
        tempfile::Builder::new()
            .prefix("kiln-e2e-")
            .tempdir()
            .unwrap(),
    )
}

/// A test's scratch directory, removed at the end together with the containers and images kiln
/// made for datasets under it (found by their `kiln.dataset` label), even when the test fails:
/// the suite leaves nothing on the engine it shares with the machine's other users.
pub struct TestDir(tempfile::TempDir);

impl TestDir {
    /// The directory.
    pub fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        remove_engine_leftovers(self.0.path());
    }
}

/// Removes the containers, then the images, whose `kiln.dataset` label names a directory under
/// `dir`. Without an engine there is nothing to remove.
fn remove_engine_leftovers(dir: &Path) {
    let prefix = dir.to_string_lossy().into_owned();
    let labelled = |kind: &[&str], inspect: &[&str]| -> Vec<String> {
        let Ok(listed) = Command::new("docker")
            .args(kind)
            .args(["-q", "--filter", "label=kiln.dataset"])
            .output()
        else {
            return Vec::new();
        };
        let ids: Vec<String> = String::from_utf8_lossy(&listed.stdout)
            .lines()
            .map(str::to_string)
            .collect();
        if ids.is_empty() {
            return ids;
        }
        let Ok(inspected) = Command::new("docker")
            .args(inspect)
            .args(["-f", "{{.Id}} {{index .Config.Labels \"kiln.dataset\"}}"])
            .args(&ids)
            .output()
        else {
            return Vec::new();
        };
        String::from_utf8_lossy(&inspected.stdout)
            .lines()
            .filter_map(|line| line.split_once(' '))
            .filter(|(_, dataset)| dataset.starts_with(&prefix))
            .map(|(id, _)| id.to_string())
            .collect()
    };
    let containers = labelled(&["ps", "-a"], &["container", "inspect"]);
    if !containers.is_empty() {
        let _ = Command::new("docker")
            .args(["rm", "-f"])
            .args(&containers)
            .output();
    }
    let images = labelled(&["images"], &["image", "inspect"]);
    if !images.is_empty() {
        let _ = Command::new("docker")
            .args(["rmi", "-f"])
            .args(&images)
            .output();
    }
}

/// The host's CA bundle, installed in the images so that a TLS-inspecting proxy works.
pub fn ca_bundle() -> Option<PathBuf> {
    let path = PathBuf::from("/etc/ssl/certs/ca-certificates.crt");
    path.exists().then_some(path)
}

/// A Docker registry (Debian's `docker-registry`, which scripts/test.sh installs) on a free
/// loopback port, stopped when dropped.
pub struct Registry {
    child: std::process::Child,
    /// `127.0.0.1:<port>`.
    pub address: String,
}

impl Registry {
    /// Starts one with its storage under `dir`.
    pub fn start(dir: &std::path::Path) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap();
        let address = format!("127.0.0.1:{port}");
        let config = dir.join("registry.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {address}\n",
                dir.join("registry").display()
            ),
        )
        .unwrap();
        let child = std::process::Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start docker-registry ({e}); scripts/test.sh installs Debian's docker-registry")
            });
        for _ in 0..100 {
            if std::net::TcpStream::connect(&address).is_ok() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        Self { child, address }
    }

    /// The tags the registry holds for `repository`.
    pub fn tags(&self, repository: &str) -> Vec<String> {
        let output = run(std::process::Command::new("python3").arg("-c").arg(format!(
            "import json, urllib.request; print('\\n'.join(json.load(urllib.request.urlopen('http://{}/v2/{repository}/tags/list'))['tags'] or []))",
            self.address
        )));
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
