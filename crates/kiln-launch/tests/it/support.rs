//! Shared helpers: a git repository from a list of files, and one launch of it.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kiln_core::config::{DockerSettings, LaunchSettings};
use kiln_core::runtime::OutputSink;
use kiln_core::{ContainerId, ContainerRuntime, NullReporter, RuntimeError};
use kiln_docker::DockerRuntime;
use kiln_launch::{LaunchError, LaunchRequest, launch as run_launch};
use kiln_schema::{Candidate, EnvironmentRecord, TestStatus};

/// Commit date of every generated repository: the dependency cut-off of its launch.
pub const COMMIT_DATE: &str = "2024-06-01T12:00:00Z";

/// The host's CA bundle, which containers here need for HTTPS (a TLS-inspecting proxy).
const HOST_CA: &str = "/etc/ssl/certs/ca-certificates.crt";

/// Runs git in `dir` with a fixed identity and dates, and checks that it succeeded.
pub fn git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_DATE", COMMIT_DATE)
        .env("GIT_COMMITTER_DATE", COMMIT_DATE)
        .env("GIT_AUTHOR_NAME", "kiln")
        .env("GIT_AUTHOR_EMAIL", "kiln@localhost")
        .env("GIT_COMMITTER_NAME", "kiln")
        .env("GIT_COMMITTER_EMAIL", "kiln@localhost")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Launches a repository holding `files`, whatever the outcome.
pub async fn launch_any(name: &str, files: &[(&str, &str)]) -> EnvironmentRecord {
    launch_with_test_patch(name, files, "").await
}

/// [`launch_any`] for an instance whose test patch is `test_patch` (plans may select tests
/// from the files it touches).
pub async fn launch_with_test_patch(
    name: &str,
    files: &[(&str, &str)],
    test_patch: &str,
) -> EnvironmentRecord {
    launch_history(name, &[files], &[], test_patch, false)
        .await
        .0
}

/// One commit per entry of `commits` (files written over the previous ones), a lightweight tag
/// on the commit of each `tags` entry (commit index, name), then a launch at the last commit.
/// With `keep_image`, the environment image stays for the caller to inspect and remove.
pub async fn launch_history(
    name: &str,
    commits: &[&[(&str, &str)]],
    tags: &[(usize, &str)],
    test_patch: &str,
    keep_image: bool,
) -> (EnvironmentRecord, Arc<dyn ContainerRuntime>, String) {
    let runtime = engine().await;
    let (result, image_tag) = launch_history_on(
        Arc::clone(&runtime),
        name,
        commits,
        tags,
        test_patch,
        keep_image,
    )
    .await;
    (result.unwrap(), runtime, image_tag)
}

/// Launches a repository holding `files` on `runtime` (a wrapper of the engine), whatever the
/// outcome, the launch's error included.
pub async fn launch_on(
    runtime: Arc<dyn ContainerRuntime>,
    name: &str,
    files: &[(&str, &str)],
) -> Result<EnvironmentRecord, LaunchError> {
    launch_history_on(runtime, name, &[files], &[], "", false)
        .await
        .0
}

async fn launch_history_on(
    runtime: Arc<dyn ContainerRuntime>,
    name: &str,
    commits: &[&[(&str, &str)]],
    tags: &[(usize, &str)],
    test_patch: &str,
    keep_image: bool,
) -> (Result<EnvironmentRecord, LaunchError>, String) {
    let (_tmp, repo, shas) = history(commits, tags);
    let at = At {
        base_commit: shas.last().map(String::as_str).unwrap_or_default(),
        test_patch,
        keep_image,
        reuse: None,
        instance: 1,
    };
    launch_repo(runtime, name, &repo, at).await
}

/// A git repository with one commit per entry of `commits` (files written over the previous
/// ones) and a lightweight tag on the commit of each `tags` entry; its directory (kept while
/// the first value lives) and the commits' ids, oldest first.
pub fn history(
    commits: &[&[(&str, &str)]],
    tags: &[(usize, &str)],
) -> (tempfile::TempDir, std::path::PathBuf, Vec<String>) {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    let mut shas = Vec::new();
    for (n, files) in commits.iter().enumerate() {
        for (path, text) in *files {
            let path = repo.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        git(&repo, &["add", "-A"]);
        git(
            &repo,
            &[
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                &format!("commit {n}"),
            ],
        );
        for (at, tag) in tags {
            if *at == n {
                git(&repo, &["tag", tag]);
            }
        }
        let head = std::process::Command::new("git")
            .args(["rev-parse", "HEAD"])
            .current_dir(&repo)
            .output()
            .unwrap();
        shas.push(String::from_utf8_lossy(&head.stdout).trim().to_string());
    }
    (tmp, repo, shas)
}

/// One launch of a generated repository.
pub struct At<'a> {
    /// The commit to launch.
    pub base_commit: &'a str,
    /// The instance's test patch.
    pub test_patch: &'a str,
    /// Keep the environment image for the caller (who removes it).
    pub keep_image: bool,
    /// `Some`: launch with `reuse` on, from these environments.
    pub reuse: Option<Vec<kiln_launch::ReuseSource>>,
    /// The instance's number (`kiln-it__<name>-<n>`), which names its image too.
    pub instance: u32,
}

/// Launches `repo` (made by [`history`]) at `at.base_commit` on `runtime`; the result and the
/// image tag.
pub async fn launch_repo(
    runtime: Arc<dyn ContainerRuntime>,
    name: &str,
    repo: &Path,
    at: At<'_>,
) -> (Result<EnvironmentRecord, LaunchError>, String) {
    let tmp = tempfile::tempdir().unwrap();
    let (base_commit, test_patch, keep_image) =
        (at.base_commit.to_string(), at.test_patch, at.keep_image);
    let image_tag = format!(
        "kiln-it/launch:{name}-{}-{}",
        at.instance,
        std::process::id()
    );
    let run_label = format!("it-{}-{name}", std::process::id());
    let request = LaunchRequest {
        candidate: Candidate {
            status: kiln_schema::CandidateStatus::Ok,
            error: None,
            repo: format!("kiln-it/{name}"),
            pull_number: Some(1),
            base_commit,
            patch: String::new(),
            test_patch: test_patch.to_string(),
            problem_statement: String::new(),
            hints_text: String::new(),
            created_at: COMMIT_DATE.into(),
            version: None,
            language: None,
            given_fail_to_pass: Vec::new(),
            given_pass_to_pass: Vec::new(),
            origin: "kiln-launch it".into(),
            ..Candidate::new(
                kiln_schema::InstanceId::new(&format!("kiln-it__{name}-{}", at.instance)).unwrap(),
            )
        },
        clone_url: repo.display().to_string(),
        cache_dir: tmp.path().join("cache"),
        log_dir: tmp.path().join("logs"),
        log_dir_label: "logs".into(),
        ca_bundle: std::fs::read(HOST_CA).ok().map(Arc::new),
        image_tag: image_tag.clone(),
        labels: BTreeMap::from([(kiln_core::runtime::LABEL_RUN.to_string(), run_label.clone())]),
        settings: LaunchSettings {
            concurrency: 1,
            command_timeout: Duration::from_secs(1200),
            test_timeout: Duration::from_secs(600),
            // The fixtures' tests take well under a second; one loops forever.
            case_timeout: Duration::from_secs(20),
            // Every fixture has one passing and one failing test.
            min_pass_ratio: 0.5,
            date_cutoff: true,
            verify_dockerfile: false,
            test_scope: "auto".into(),
            recipes: true,
            reuse: at.reuse.is_some(),
            verify_reuse: 0,
            tests: kiln_core::config::TestNetwork::default(),
            agent: None,
        },
        docker: DockerSettings {
            ca_bundle: None,
            memory_bytes: 4 << 30,
            cpus: 2.0,
            pids: 4096,
            disk_bytes: 20 << 30,
            image_prefix: "kiln-it".into(),
            min_free_bytes: 0,
            registry: None,
        },
        stage: "launch".into(),
        removals: kiln_core::Removals::default(),
        lm: None,
        recipes: None,
        reuse: at.reuse.unwrap_or_default(),
    };
    let started = Instant::now();
    let result = run_launch(Arc::clone(&runtime), &request, &NullReporter).await;
    // KILN_IT_LOGS=<dir> keeps each launch's logs there, under the test's name.
    if let Some(dir) = std::env::var_os("KILN_IT_LOGS") {
        let to = std::path::Path::new(&dir).join(name);
        std::fs::create_dir_all(&to).unwrap();
        for entry in std::fs::read_dir(&request.log_dir)
            .into_iter()
            .flatten()
            .flatten()
        {
            let _ = std::fs::copy(entry.path(), to.join(entry.file_name()));
        }
    }
    let not_removed = request.removals.wait().await;
    assert!(
        not_removed.is_empty(),
        "containers not removed: {not_removed:?}"
    );
    #[expect(
        clippy::print_stderr,
        reason = "the launch times are what the test log should show"
    )]
    match &result {
        Ok(record) => eprintln!(
            "[{name}] {} in {:.0}s (setup {:.0}s, tests {:.0}s); image {}",
            record.status,
            started.elapsed().as_secs_f64(),
            record.setup_seconds,
            record.test_seconds,
            record.base_image
        ),
        Err(e) => eprintln!(
            "[{name}] error after {:.0}s: {e}",
            started.elapsed().as_secs_f64()
        ),
    }
    if result.as_ref().is_ok_and(|r| r.image.is_some()) && !keep_image {
        let _ = runtime.remove_image(&image_tag).await;
    }
    // A repaired launch commits again under its tag; the image it replaced is left untagged
    // (the launch stage removes such leftovers after its items, as this does after the test).
    let _ = runtime
        .remove_leftover_images(kiln_core::runtime::LABEL_RUN, &run_label)
        .await;
    (result, image_tag)
}

/// The engine, or a panic saying how to start one.
pub async fn engine() -> Arc<dyn ContainerRuntime> {
    match DockerRuntime::connect().await {
        Ok(runtime) => Arc::new(runtime),
        Err(e) => panic!("these tests need a Docker engine (scripts/docker-engine.sh start): {e}"),
    }
}

/// Runs `script` in a fresh container from `image` (no network); the container, still there,
/// and the script's outcome.
async fn exec_in_image(
    runtime: &Arc<dyn ContainerRuntime>,
    image: &str,
    script: &str,
) -> (ContainerId, kiln_core::ExecOutcome) {
    let spec = kiln_core::ContainerSpec {
        image: image.to_string(),
        limits: DockerSettings::default().limits(),
        network: kiln_core::NetworkMode::None,
        workdir: Some(kiln_core::runtime::WORKDIR.into()),
        max_lifetime: Duration::from_secs(300),
        ..kiln_core::ContainerSpec::default()
    };
    let id = runtime.create(&spec).await.unwrap();
    let mut sink = |_: &[u8]| {};
    let outcome = runtime
        .exec(
            &id,
            &kiln_core::ExecSpec::new(script, Duration::from_secs(120)),
            &mut sink,
        )
        .await
        .unwrap();
    (id, outcome)
}

/// Runs `script` in a fresh container from `image` (no network) and returns its output.
pub async fn run_in_image(
    runtime: &Arc<dyn ContainerRuntime>,
    image: &str,
    script: &str,
) -> String {
    let (id, outcome) = exec_in_image(runtime, image, script).await;
    runtime.remove(&id).await.unwrap();
    outcome.output
}

/// Runs `script` in a container of `image` and commits it to `tag`; returns the new image's id.
pub async fn commit_in_image(
    runtime: &Arc<dyn ContainerRuntime>,
    image: &str,
    script: &str,
    tag: &str,
) -> String {
    let (id, outcome) = exec_in_image(runtime, image, script).await;
    assert_eq!(outcome.exit_code, 0, "{script}: {}", outcome.output);
    let committed = runtime
        .commit(&id, tag, &BTreeMap::new(), &[])
        .await
        .unwrap();
    runtime.remove(&id).await.unwrap();
    committed
}

/// Launches `repo` at `base_commit` as instance `instance` (from `reuse` when given) and keeps
/// its image; the row and the image's tag.
pub async fn launch_kept(
    runtime: &Arc<dyn ContainerRuntime>,
    name: &str,
    repo: &Path,
    base_commit: &str,
    instance: u32,
    reuse: Option<Vec<kiln_launch::ReuseSource>>,
) -> (EnvironmentRecord, String) {
    let at = At {
        base_commit,
        test_patch: "",
        keep_image: true,
        reuse,
        instance,
    };
    let (result, tag) = launch_repo(Arc::clone(runtime), name, repo, at).await;
    (result.unwrap(), tag)
}

/// The environment `record` (launched at `base_commit`) as a source of reuse.
pub fn reuse_source(record: &EnvironmentRecord, base_commit: &str) -> kiln_launch::ReuseSource {
    kiln_launch::ReuseSource {
        instance_id: record.instance_id.to_string(),
        image: record.image_digest.clone().unwrap(),
        base_commit: base_commit.to_string(),
        plan: record.plan.clone(),
        base_image: record.base_image.clone(),
        setup_commands: record.setup_commands.clone(),
        cutoff: record.dependency_cutoff.clone(),
    }
}

/// Launches a repository holding `files` and asserts that it built.
pub async fn launch(name: &str, files: &[(&str, &str)]) -> EnvironmentRecord {
    let record = launch_any(name, files).await;
    assert_eq!(
        record.status.as_str(),
        "built",
        "{name}: {:?} at {:?}\n{}",
        record.failure_class,
        record.failure_command,
        record.log_tail.as_deref().unwrap_or("")
    );
    record
}

/// The status of the one test whose id ends with `name`.
pub fn status_of(record: &EnvironmentRecord, name: &str) -> Option<TestStatus> {
    let matching: Vec<_> = record
        .baseline
        .iter()
        .filter(|(id, _)| id.ends_with(name))
        .collect();
    assert!(matching.len() <= 1, "{name}: {:?}", record.baseline);
    matching.first().map(|(_, status)| **status)
}

/// The engine with every container it creates cut off from the network (loopback only): a
/// registry outage, or an engine without a route out, as launch's containers see it.
pub struct Offline(pub Arc<dyn ContainerRuntime>);

#[async_trait::async_trait]
impl ContainerRuntime for Offline {
    async fn ping(&self) -> Result<kiln_core::EngineInfo, RuntimeError> {
        self.0.ping().await
    }
    async fn image_exists(&self, image: &str) -> Result<bool, RuntimeError> {
        self.0.image_exists(image).await
    }
    async fn build_image(
        &self,
        build: &kiln_core::ImageBuild,
        on_output: OutputSink<'_>,
    ) -> Result<(), RuntimeError> {
        self.0.build_image(build, on_output).await
    }
    async fn create(&self, spec: &kiln_core::ContainerSpec) -> Result<ContainerId, RuntimeError> {
        let mut spec = spec.clone();
        spec.network = kiln_core::NetworkMode::None;
        self.0.create(&spec).await
    }
    async fn exec(
        &self,
        id: &ContainerId,
        exec: &kiln_core::ExecSpec,
        on_output: OutputSink<'_>,
    ) -> Result<kiln_core::ExecOutcome, RuntimeError> {
        self.0.exec(id, exec, on_output).await
    }
    async fn copy_in(&self, id: &ContainerId, dir: &str, tar: Vec<u8>) -> Result<(), RuntimeError> {
        self.0.copy_in(id, dir, tar).await
    }
    async fn copy_out(&self, id: &ContainerId, path: &str) -> Result<Vec<u8>, RuntimeError> {
        self.0.copy_out(id, path).await
    }
    async fn commit(
        &self,
        id: &ContainerId,
        tag: &str,
        labels: &BTreeMap<String, String>,
        env: &[(String, String)],
    ) -> Result<String, RuntimeError> {
        self.0.commit(id, tag, labels, env).await
    }
    async fn remove(&self, id: &ContainerId) -> Result<(), RuntimeError> {
        self.0.remove(id).await
    }
    async fn remove_image(&self, tag: &str) -> Result<(), RuntimeError> {
        self.0.remove_image(tag).await
    }
    async fn remove_labelled(&self, label: &str, value: &str) -> Result<usize, RuntimeError> {
        self.0.remove_labelled(label, value).await
    }
    async fn list_labelled(
        &self,
        label: &str,
        value: &str,
    ) -> Result<Vec<ContainerId>, RuntimeError> {
        self.0.list_labelled(label, value).await
    }
    async fn pull_image(
        &self,
        image: &str,
        on_output: OutputSink<'_>,
    ) -> Result<bool, RuntimeError> {
        self.0.pull_image(image, on_output).await
    }
    async fn tag_image(&self, source: &str, target: &str) -> Result<(), RuntimeError> {
        self.0.tag_image(source, target).await
    }
    async fn push_image(
        &self,
        image: &str,
        on_output: OutputSink<'_>,
    ) -> Result<Option<String>, RuntimeError> {
        self.0.push_image(image, on_output).await
    }
    async fn import_image(
        &self,
        tag: &str,
        rootfs: &Path,
        changes: &[String],
    ) -> Result<(), RuntimeError> {
        self.0.import_image(tag, rootfs, changes).await
    }
    async fn remove_leftover_images(
        &self,
        label: &str,
        value: &str,
    ) -> Result<usize, RuntimeError> {
        self.0.remove_leftover_images(label, value).await
    }
}
