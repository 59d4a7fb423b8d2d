//! Shared helpers: connecting, containers that are removed when a test ends, tar archives.

use std::collections::BTreeMap;
use std::io::Read;
use std::time::Duration;

use kiln_core::{ContainerId, ContainerRuntime, ContainerSpec, ExecOutcome, ExecSpec};
use kiln_docker::DockerRuntime;

/// The base image every test container starts from.
pub const BASE: &str = "debian:bookworm";

/// Connects to the engine, failing the test (not skipping it) when there is none.
pub async fn runtime() -> DockerRuntime {
    match DockerRuntime::connect().await {
        Ok(runtime) => runtime,
        Err(e) => panic!("these tests need a Docker engine (scripts/docker-engine.sh start): {e}"),
    }
}

/// A label value unique to one test in one run of the binary.
pub fn unique(name: &str) -> String {
    format!("it-{}-{name}", std::process::id())
}

/// A spec for a `debian:bookworm` container labelled for the test `name`.
pub fn spec(name: &str) -> ContainerSpec {
    ContainerSpec {
        image: BASE.to_string(),
        labels: BTreeMap::from([(kiln_core::runtime::LABEL_RUN.to_string(), unique(name))]),
        max_lifetime: Duration::from_secs(600),
        ..ContainerSpec::default()
    }
}

/// Removes a container when dropped, so that a failing test leaves nothing behind. It uses the
/// docker CLI because drop cannot await.
pub struct Guard(pub ContainerId);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = std::process::Command::new("docker")
            .args(["rm", "-f", "-v", &self.0.0])
            .output();
    }
}

/// Creates a container from `spec` and guards it.
pub async fn start(runtime: &DockerRuntime, spec: &ContainerSpec) -> Guard {
    Guard(runtime.create(spec).await.unwrap())
}

/// Runs `script` with `timeout`, returning the outcome and everything the sink received.
pub async fn run(
    runtime: &DockerRuntime,
    id: &ContainerId,
    exec: &ExecSpec,
) -> (ExecOutcome, Vec<u8>) {
    let mut streamed = Vec::new();
    let outcome = runtime
        .exec(id, exec, &mut |chunk: &[u8]| {
            streamed.extend_from_slice(chunk)
        })
        .await
        .unwrap();
    (outcome, streamed)
}

/// Runs `script` (10 s timeout) and asserts that it succeeds; returns its output.
pub async fn sh(runtime: &DockerRuntime, id: &ContainerId, script: &str) -> String {
    let (outcome, _) = run(runtime, id, &ExecSpec::new(script, Duration::from_secs(10))).await;
    assert_eq!(outcome.exit_code, 0, "{script}: {}", outcome.output);
    outcome.output
}

/// A tar archive of (path, contents, mode) entries.
pub fn tar_of(files: &[(&str, &[u8], u32)]) -> Vec<u8> {
    let mut archive = tar::Builder::new(Vec::new());
    for (path, contents, mode) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(contents.len() as u64);
        header.set_mode(*mode);
        archive.append_data(&mut header, path, *contents).unwrap();
    }
    archive.into_inner().unwrap()
}

/// The regular files of a tar archive: (path, contents, mode).
pub fn files_of(tar: &[u8]) -> Vec<(String, Vec<u8>, u32)> {
    let mut archive = tar::Archive::new(tar);
    let mut files = Vec::new();
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        if entry.header().entry_type() != tar::EntryType::Regular {
            continue;
        }
        let path = entry.path().unwrap().to_string_lossy().into_owned();
        let mode = entry.header().mode().unwrap();
        let mut contents = Vec::new();
        entry.read_to_end(&mut contents).unwrap();
        files.push((path, contents, mode));
    }
    files.sort();
    files
}
