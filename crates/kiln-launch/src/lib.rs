//! The launch stage: build an executable environment for one candidate at its base commit.
//!
//! Rules first: the repository's own files choose a deterministic plan (Python, Rust, Node,
//! Go, C/C++ or Java, see [`plan::choose`]), whose commands run in a
//! container from the plan's base image. Unpinned dependencies are resolved as of the base
//! commit's date. The build counts when the test command's output parses into statuses and
//! enough of them pass; the container is then committed to a tagged image. Any failure is a
//! row with a failure class, the deciding command and its log tail, never an error that stops
//! the stage: only an unreachable engine does that.

pub mod dockerfile;
pub mod go;
pub mod images;
pub mod java;
pub mod native;
pub mod node;
pub mod plan;
pub mod python;
pub mod repo;
pub mod rust;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kiln_core::config::{DockerSettings, LaunchSettings};
use kiln_core::runtime::LABEL_RUN;
use kiln_core::session::tail;
use kiln_core::{
    ContainerRuntime, ContainerSpec, Event, ExecOutcome, NetworkMode, Removals, Reporter,
    RuntimeError, Session,
};
use kiln_schema::{Candidate, EnvironmentRecord, FailureClass, TestStatus};

pub use kiln_core::runtime::WORKDIR;

/// Everything launch needs for one candidate.
#[derive(Debug, Clone)]
pub struct LaunchRequest {
    /// The candidate.
    pub candidate: Candidate,
    /// Clone URL (or local path) of its repository.
    pub clone_url: String,
    /// Directory of repository mirrors.
    pub cache_dir: PathBuf,
    /// Directory for this instance's launch logs.
    pub log_dir: PathBuf,
    /// Log directory as recorded in the row (relative to the run directory).
    pub log_dir_label: String,
    /// A PEM CA bundle to install in the images (TLS-inspecting proxies).
    pub ca_bundle: Option<Arc<Vec<u8>>>,
    /// Tag to commit a successful environment to.
    pub image_tag: String,
    /// Labels for containers and images (run label included).
    pub labels: BTreeMap<String, String>,
    /// Stage settings.
    pub settings: LaunchSettings,
    /// Container limits.
    pub docker: DockerSettings,
    /// Stage name, for progress events.
    pub stage: String,
    /// Where the container's removal goes: the launch returns without waiting for it, the
    /// stage waits for all of them at its end.
    pub removals: Removals,
}

/// An infrastructure failure that stops the stage: it says nothing about the repository, so
/// it is never written as a row, and a re-run retries the item.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The engine went away or failed.
    #[error(transparent)]
    Engine(#[from] RuntimeError),
    /// The host could not hold the work (a full or read-only disk).
    #[error("{what}: {message}")]
    Host {
        /// What kiln was doing, as a verb phrase.
        what: String,
        /// The error.
        message: String,
    },
}

impl LaunchError {
    fn host(what: &str, message: impl std::fmt::Display) -> Self {
        Self::Host {
            what: what.to_string(),
            message: message.to_string(),
        }
    }
}

/// How a launch attempt ended, before it is written as a row.
struct Failure {
    class: FailureClass,
    command: Option<String>,
    log_tail: String,
}

impl Failure {
    fn new(class: FailureClass, command: Option<&str>, log: &str) -> Self {
        Self {
            class,
            command: command.map(str::to_string),
            log_tail: tail(log, 40),
        }
    }
}

/// Builds the environment for one candidate. Failures of the repository are returned as a
/// `failed` row; failures of the engine or the host are errors, never rows.
///
/// # Errors
/// [`LaunchError::Engine`] when the engine cannot be reached or fails, [`LaunchError::Host`]
/// when the host's disk cannot hold the work.
pub async fn launch(
    runtime: Arc<dyn ContainerRuntime>,
    request: &LaunchRequest,
    reporter: &dyn Reporter,
) -> Result<EnvironmentRecord, LaunchError> {
    let started = Instant::now();
    let candidate = &request.candidate;
    let mut record = EnvironmentRecord {
        instance_id: candidate.instance_id.clone(),
        repo: candidate.repo.clone(),
        base_commit: candidate.base_commit.clone(),
        status: "failed".into(),
        failure_class: None,
        failure_command: None,
        log_tail: None,
        language: "unknown".into(),
        plan: "none".into(),
        base_image: String::new(),
        image: None,
        setup_commands: Vec::new(),
        rebuild_commands: Vec::new(),
        test_command: String::new(),
        parser: String::new(),
        dependency_cutoff: None,
        version_reason: String::new(),
        baseline: BTreeMap::new(),
        baseline_passed: 0,
        baseline_failed: 0,
        setup_seconds: 0.0,
        test_seconds: 0.0,
        total_seconds: 0.0,
        dockerfile: None,
        dockerfile_check: None,
        log_dir: request.log_dir_label.clone(),
    };
    let step = |text: &str| {
        reporter.report(Event::ItemStep {
            stage: request.stage.clone(),
            item: candidate.instance_id.clone(),
            step: text.to_string(),
        });
    };
    let mut verify_context = None;
    let outcome = build(
        Arc::clone(&runtime),
        request,
        &mut record,
        &mut verify_context,
        &step,
    )
    .await;
    record.total_seconds = started.elapsed().as_secs_f64();
    // The Dockerfile check comes after the timing: it proves the record, it is not the launch.
    if let (Ok(None), Some(context)) = (&outcome, verify_context) {
        step("check the Dockerfile");
        let tag = format!("{}.dockerfile-check", request.image_tag);
        let checked = Instant::now();
        let verdict = dockerfile::verify(
            runtime.as_ref(),
            &record,
            &context,
            &tag,
            request.settings.test_timeout,
            &request.labels,
        )
        .await;
        record.dockerfile_check = Some(match verdict {
            Ok(verdict) => format!("{verdict} ({:.1}s)", checked.elapsed().as_secs_f64()),
            Err(e @ RuntimeError::ContainerStopped { .. }) => format!("rebuilt, but failed to {e}"),
            Err(e) => return Err(LaunchError::Engine(e)),
        });
    }
    match outcome {
        Ok(None) => record.status = "built".into(),
        Ok(Some(failure)) => {
            record.failure_class = Some(failure.class.as_str().to_string());
            record.failure_command = failure.command;
            record.log_tail = Some(failure.log_tail);
        }
        Err(e) => return Err(e),
    }
    Ok(record)
}

/// Wall time per phase of one launch, written as the last line of `launch.log` so that the
/// time kiln adds around the repository's own commands can be read off (`clone 0.08, ...`).
struct Phases {
    last: Instant,
    done: Vec<(&'static str, f64)>,
}

impl Phases {
    fn new() -> Self {
        Self {
            last: Instant::now(),
            done: Vec::new(),
        }
    }

    /// Ends the phase `name` now.
    fn end(&mut self, name: &'static str) {
        let now = Instant::now();
        self.done
            .push((name, now.duration_since(self.last).as_secs_f64()));
        self.last = now;
    }

    /// Appends the phases to the log at `path`.
    fn write(&self, path: &std::path::Path) {
        use std::io::Write as _;
        let list: Vec<String> = self
            .done
            .iter()
            .map(|(name, secs)| format!("{name} {secs:.2}"))
            .collect();
        if let Ok(mut log) = std::fs::OpenOptions::new().append(true).open(path) {
            let _ = writeln!(log, "# launch phases (s): {}", list.join(", "));
        }
    }
}

/// The launch proper; `Ok(Some(..))` is a failure of the repository, `Err` one of the engine or
/// the host.
async fn build(
    runtime: Arc<dyn ContainerRuntime>,
    request: &LaunchRequest,
    record: &mut EnvironmentRecord,
    verify_context: &mut Option<Vec<u8>>,
    step: &(dyn Fn(&str) + Sync),
) -> Result<Option<Failure>, LaunchError> {
    let candidate = &request.candidate;
    let _ = std::fs::create_dir_all(&request.log_dir);

    step("clone");
    let mut phases = Phases::new();
    let checkout = tempfile::Builder::new()
        .prefix("kiln-checkout-")
        .tempdir()
        .map_err(|e| LaunchError::host("create a temporary directory for the checkout", e))?;
    let workdir = checkout.path().join("repo");
    // Blocking git work (and possibly a wait for another launch cloning the same repository)
    // runs off the async workers.
    let (cache_dir, repo_name, url, base, dest) = (
        request.cache_dir.clone(),
        candidate.repo.clone(),
        request.clone_url.clone(),
        candidate.base_commit.clone(),
        workdir.clone(),
    );
    let cloned = tokio::task::spawn_blocking(move || {
        kiln_git::MirrorCache::new(&cache_dir)
            .and_then(|cache| cache.checkout(&repo_name, &url, &base, &dest))
    })
    .await
    .unwrap_or_else(|e| {
        Err(kiln_git::GitError {
            command: "git clone".into(),
            message: format!("the clone task failed: {e}"),
        })
    });
    let checkout_note = match cloned {
        Ok(note) => note,
        // A full or read-only disk is the host's failure, not the repository's.
        Err(e) if e.is_local_storage_problem() => {
            return Err(LaunchError::host("clone the repository", e));
        }
        Err(e) => {
            return Ok(Some(Failure::new(
                FailureClass::Clone,
                Some(&e.command),
                &e.message,
            )));
        }
    };
    if let Some(error) = kiln_git::init_submodules(&workdir, &request.clone_url) {
        // Not fatal: the C/C++ planner lets Debian packages stand in for what is missing and
        // says so in the version reason.
        tracing::warn!(instance = %candidate.instance_id, "git submodules not fetched: {error}");
    }
    let cutoff = if request.settings.date_cutoff {
        kiln_git::commit_date(&workdir, &candidate.base_commit).ok()
    } else {
        None
    };

    phases.end("clone");
    let test_files = plan::patch_files(&candidate.test_patch);
    let plan_cx = plan::PlanContext {
        root: &workdir,
        cutoff: cutoff.as_deref(),
        ca_bundle: request.ca_bundle.as_deref().map(Vec::as_slice),
        test_files: &test_files,
    };
    let Some(plan) = plan::choose(&plan_cx) else {
        return Ok(Some(Failure::new(
            FailureClass::UnsupportedProject,
            None,
            "no build plan matched the repository's files",
        )));
    };
    record.language = plan.language.into();
    record.plan.clone_from(&plan.name);
    record.base_image.clone_from(&plan.image.tag);
    // The row has no column of its own for how versions were fixed; it follows the image's
    // reason, and the cut-off column holds the date only when the plan applied it.
    record.version_reason = if plan.resolution.is_empty() {
        plan.version_reason.clone()
    } else {
        format!("{}; dependencies: {}", plan.version_reason, plan.resolution)
    };
    if let Some(note) = checkout_note {
        record.version_reason.push_str("; checkout: ");
        record.version_reason.push_str(&note);
    }
    record.dependency_cutoff.clone_from(&plan.cutoff);
    record.parser = plan.parser.into();
    record.test_command.clone_from(&plan.test);
    record.rebuild_commands.clone_from(&plan.rebuild);

    let tar = repo::tar_dir(&workdir, WORKDIR.trim_start_matches('/'))
        .map_err(|e| LaunchError::host("pack the checkout", e))?;
    drop(checkout);
    phases.end("plan+pack");

    step("base image");
    ensure_image(runtime.as_ref(), &plan.image, &request.log_dir).await?;
    phases.end("base image");

    step("start container");
    let spec = ContainerSpec {
        image: plan.image.tag.clone(),
        env: vec![("PIP_DISABLE_PIP_VERSION_CHECK".into(), "1".into())],
        labels: request.labels.clone(),
        limits: request.docker.limits(),
        network: NetworkMode::Bridge,
        workdir: Some(WORKDIR.into()),
        max_lifetime: request.settings.command_timeout * 4
            + request.settings.test_timeout
            + Duration::from_secs(600),
    };
    // The checkout doubles as the Dockerfile's build context when the Dockerfile is checked.
    let context = request.settings.verify_dockerfile.then(|| tar.clone());
    let mut session = Session::start(
        Arc::clone(&runtime),
        &spec,
        &request.log_dir.join("launch.log"),
    )
    .await?;
    phases.end("start");
    let result = run_plan(&mut session, request, record, &plan, tar, step, &mut phases).await;
    session.close_later(&request.removals);
    phases.write(&request.log_dir.join("launch.log"));
    let failure = result?;
    if failure.is_none() {
        *verify_context = context;
    }
    Ok(failure)
}

async fn run_plan(
    session: &mut Session,
    request: &LaunchRequest,
    record: &mut EnvironmentRecord,
    plan: &plan::Plan,
    tar: Vec<u8>,
    step: &(dyn Fn(&str) + Sync),
    phases: &mut Phases,
) -> Result<Option<Failure>, RuntimeError> {
    let runtime = Arc::clone(session.runtime());
    runtime.copy_in(session.id(), "/", tar).await?;
    phases.end("copy-in");

    let setup_started = Instant::now();
    for command in &plan.setup {
        step(short(command));
        let outcome = match run_or_fail(
            session,
            command,
            request.settings.command_timeout,
            FailureClass::Build,
        )
        .await?
        {
            Ok(outcome) => outcome,
            Err(failure) => return Ok(Some(failure)),
        };
        if outcome.exit_code != 0 {
            record.setup_seconds = setup_started.elapsed().as_secs_f64();
            return Ok(Some(Failure::new(
                classify_setup(&outcome),
                Some(command),
                &outcome.output,
            )));
        }
        record.setup_commands.push(command.clone());
    }
    record.setup_seconds = setup_started.elapsed().as_secs_f64();
    phases.end("setup");

    step("baseline tests");
    let outcome = match run_or_fail(
        session,
        &record.test_command,
        request.settings.test_timeout,
        FailureClass::TestRun,
    )
    .await?
    {
        Ok(outcome) => outcome,
        Err(failure) => return Ok(Some(failure)),
    };
    record.test_seconds = outcome.duration.as_secs_f64();
    if let Some(failure) = judge_tests(&outcome, record, request.settings.min_pass_ratio) {
        return Ok(Some(failure));
    }

    phases.end("tests");

    step("commit image");
    let mut labels = request.labels.clone();
    labels.remove(LABEL_RUN);
    labels.insert("kiln.instance".into(), record.instance_id.clone());
    session.commit(&request.image_tag, &labels).await?;
    phases.end("commit");
    record.image = Some(request.image_tag.clone());
    record.dockerfile = Some(dockerfile::dockerfile(record));
    Ok(None)
}

/// Runs `command` in the session. A container the command itself stopped is a failure of the
/// item (of `class`); every other engine error stays an error, which stops the stage.
async fn run_or_fail(
    session: &mut Session,
    command: &str,
    timeout: Duration,
    class: FailureClass,
) -> Result<Result<ExecOutcome, Failure>, RuntimeError> {
    match session.run(command, timeout).await {
        Ok(outcome) => Ok(Ok(outcome)),
        Err(e @ RuntimeError::ContainerStopped { .. }) => Ok(Err(Failure::new(
            class,
            Some(command),
            &format!("failed to {e}"),
        ))),
        Err(e) => Err(e),
    }
}

/// Builds the plan's base image unless it exists. Builds are serialised: concurrent items
/// usually want the same image, and building it twice at once wastes minutes. The base images
/// are kiln's own Dockerfiles, so a failed build is the machine's failure (no registry, no
/// network), never the repository's: it stops the stage.
async fn ensure_image(
    runtime: &dyn ContainerRuntime,
    image: &kiln_core::ImageBuild,
    log_dir: &std::path::Path,
) -> Result<(), RuntimeError> {
    static BUILDS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _guard = BUILDS.lock().await;
    let mut log = Vec::new();
    let mut sink = |bytes: &[u8]| log.extend_from_slice(bytes);
    let built = images::ensure_image(runtime, image, &mut sink).await;
    if !log.is_empty() {
        let _ = std::fs::write(log_dir.join("image-build.log"), &log);
    }
    built.map(|_| ())
}

/// Reads the baseline run into the record; `Some` when it does not count as a working build.
fn judge_tests(
    outcome: &ExecOutcome,
    record: &mut EnvironmentRecord,
    min_pass_ratio: f64,
) -> Option<Failure> {
    let command = Some(record.test_command.as_str());
    if outcome.timed_out {
        return Some(Failure::new(
            FailureClass::Timeout,
            command,
            &outcome.output,
        ));
    }
    if outcome.oom_killed {
        return Some(Failure::new(FailureClass::Oom, command, &outcome.output));
    }
    let parsed = match kiln_testlog::parse(&record.parser, &outcome.output) {
        Ok(parsed) => parsed.relative_to(WORKDIR),
        Err(e) => return Some(Failure::new(FailureClass::TestRun, command, &e.to_string())),
    };
    record.baseline = parsed.statuses.clone();
    let passed = parsed.count(TestStatus::Pass);
    let failed = parsed.count(TestStatus::Fail) + parsed.count(TestStatus::Error);
    record.baseline_passed = i64::try_from(passed).unwrap_or(i64::MAX);
    record.baseline_failed = i64::try_from(failed).unwrap_or(i64::MAX);
    if parsed.statuses.is_empty() {
        // pytest exits 5 when it collected nothing.
        let class = if outcome.exit_code == 5 {
            FailureClass::NoTests
        } else {
            FailureClass::TestRun
        };
        return Some(Failure::new(class, command, &outcome.output));
    }
    let ran = passed + failed;
    #[allow(clippy::cast_precision_loss)]
    let ratio = if ran == 0 {
        0.0
    } else {
        passed as f64 / ran as f64
    };
    if ratio < min_pass_ratio {
        let mut log = outcome.output.clone();
        log.push_str(&format!(
            "\n[kiln] {passed} of {ran} tests passed, below the required share of {min_pass_ratio}"
        ));
        return Some(Failure::new(FailureClass::TestsFailing, command, &log));
    }
    None
}

/// Classifies a failed setup command from its outcome and output.
#[must_use]
fn classify_setup(outcome: &ExecOutcome) -> FailureClass {
    if outcome.timed_out {
        return FailureClass::Timeout;
    }
    if outcome.oom_killed {
        return FailureClass::Oom;
    }
    const RESOLUTION: &[&str] = &[
        "No solution found when resolving",
        "not found in the package registry",
        "Could not find a version that satisfies",
        "No matching distribution found",
        "was not found in the package registry",
        "Failed to fetch",
        "Failed to download",
        "certificate verify failed",
        "self-signed certificate",
        // cargo
        "failed to download",
        "failed to get `",
        "failed to select a version for",
        "no matching package named",
        "failed to load source for dependency",
        // network, any tool
        "Could not resolve host",
        "Temporary failure in name resolution",
        "UnknownHostException",
        "dial tcp",
        "ETIMEDOUT",
        "ERR_SOCKET_TIMEOUT",
        "ECONNRESET",
        "operation timed out",
        "Connection timed out",
        // npm, yarn, pnpm
        "npm ERR! code E404",
        "npm error code E404",
        "ETARGET",
        "ENOTFOUND",
        "EAI_AGAIN",
        "ERR_PNPM_FETCH",
        "ERR_PNPM_NO_MATCHING_VERSION",
        "Couldn't find any versions for",
        // go
        "no required module provides",
        "missing go.sum entry",
        "reading https://proxy.golang.org",
        "unrecognized import path",
        // maven, gradle
        "Could not resolve dependencies",
        "Could not transfer artifact",
        "could not be resolved",
        "Could not resolve all files for configuration",
        "Could not resolve all dependencies",
        "Could not GET '",
        // pkg-config, apt
        "Unable to locate package",
    ];
    // pkg-config reports a missing module as `Package foo was not found in the pkg-config search
    // path` (autotools, meson) or `Package 'foo', required by ..., not found`.
    let pkg_config_missing = outcome.output.lines().any(|line| {
        let line = line.trim_start();
        line.contains("Package ")
            && (line.contains("not found") || line.contains("was not found"))
            && (line.contains("pkg-config")
                || line.contains("required by")
                || line.starts_with("Package "))
    });
    if pkg_config_missing
        || RESOLUTION
            .iter()
            .any(|needle| outcome.output.contains(needle))
    {
        FailureClass::DependencyResolution
    } else {
        FailureClass::Build
    }
}

fn short(command: &str) -> &str {
    let end = command
        .char_indices()
        .nth(60)
        .map_or(command.len(), |(i, _)| i);
    &command[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(exit_code: i64, output: &str) -> ExecOutcome {
        ExecOutcome {
            exit_code,
            output: output.into(),
            truncated: false,
            timed_out: false,
            oom_killed: false,
            duration: Duration::from_secs(1),
        }
    }

    #[test]
    fn setup_failures_are_classified() {
        let missing = outcome(
            1,
            "  × No solution found when resolving dependencies:\n  ╰─▶ Because kiln-nonexistent was not found in the package registry",
        );
        assert_eq!(classify_setup(&missing), FailureClass::DependencyResolution);
        assert_eq!(
            classify_setup(&outcome(1, "error: command 'gcc' failed")),
            FailureClass::Build
        );
        for log in [
            "error: failed to download `serde v1.0.0`",
            "npm ERR! code E404\nnpm ERR! 404 Not Found - GET https://registry.npmjs.org/nope",
            "npm ERR! code ERR_SOCKET_TIMEOUT\nnpm ERR! network Socket timeout",
            "npm ERR! code ETARGET\nnpm ERR! notarget No matching version found for left-pad@99",
            "go: github.com/pkg/errors@v0.9.1: Get \"https://proxy.golang.org/github.com/pkg/errors/@v/v0.9.1.mod\": dial tcp: lookup proxy.golang.org: no such host",
            "main.go:3:8: no required module provides package github.com/x/y; to add it:",
            "[ERROR] Failed to execute goal on project demo: Could not resolve dependencies for project demo:demo:jar:1.0",
            "[ERROR] Plugin org.apache.maven.plugins:maven-resources-plugin:2.6 or one of its dependencies could not be resolved: Failed to read artifact descriptor for org.apache.maven.plugins:maven-resources-plugin:jar:2.6: Could not transfer artifact org.apache.maven.plugins:maven-resources-plugin:pom:2.6 from/to central",
            "-- Checking for module 'libfoo'\n--   Package 'libfoo', required by 'virtual:world', not found",
            "checking for FOO... no\nconfigure: error: Package requirements (libfoo >= 1) were not met:\n\nPackage libfoo was not found in the pkg-config search path.",
            "curl: (6) Could not resolve host: example.com",
        ] {
            assert_eq!(
                classify_setup(&outcome(1, log)),
                FailureClass::DependencyResolution,
                "{log}"
            );
        }
        assert_eq!(
            classify_setup(&outcome(
                2,
                "src/main.rs:1:1: error[E0425]: cannot find value `x`"
            )),
            FailureClass::Build
        );
        let mut slow = outcome(137, "");
        slow.timed_out = true;
        assert_eq!(classify_setup(&slow), FailureClass::Timeout);
    }
}
