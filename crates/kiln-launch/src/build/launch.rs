//! One launch from request to row: the host's part, then attempts of the plan (from an earlier
//! commit's environment first when one is reused; again on another interpreter when a repair
//! asks), then the Dockerfile check and the push.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kiln_core::runtime::WORKDIR;
use kiln_core::{
    ContainerRuntime, ContainerSpec, CpuLedger, CpuPhase, Event, NetworkMode, Reporter,
    RuntimeError, Session,
};
use kiln_schema::{EnvironmentRecord, EnvironmentStatus, FailureClass};

use super::attempt::{ensure_image, run_plan};
use super::checkout::whole_archive;
use super::error::LaunchError;
use super::phases::Phases;
use super::prepare::{Prepared, on_host};
use super::reuse::{Reused, Start};
use super::work::{Attempt, Attempted};
use crate::ecosystems::{self, Ecosystem};
use crate::environment::Known;
use crate::plan::Plan;
use crate::request::LaunchRequest;
use crate::steps::Step;
use crate::verify::Failure;
use crate::{debian, dockerfile, images, layer};

/// Builds the environment for one candidate. Failures of the repository are returned as a
/// `failed` row; failures of the engine or the host are errors, never rows.
///
/// # Errors
/// [`LaunchError::Engine`] when the engine cannot be reached or fails, [`LaunchError::RegistryDown`]
/// when a dependency failed while its registry did not answer, [`LaunchError::Host`]
/// when the host's disk cannot hold the work.
pub async fn launch(
    runtime: Arc<dyn ContainerRuntime>,
    request: &LaunchRequest,
    reporter: &dyn Reporter,
) -> Result<EnvironmentRecord, LaunchError> {
    let started = Instant::now();
    let candidate = &request.candidate;
    // A row starts as a failure (`EnvironmentStatus::Failed`, the default) until the launch
    // says otherwise.
    let mut record = EnvironmentRecord {
        repo: candidate.repo.clone(),
        base_commit: candidate.base_commit.clone(),
        language: "unknown".into(),
        plan: "none".into(),
        log_dir: request.log_dir_label.clone(),
        ..EnvironmentRecord::new(candidate.instance_id.clone())
    };
    let step = |text: &str| {
        reporter.report(Event::ItemStep {
            stage: request.stage.clone(),
            item: candidate.instance_id.to_string(),
            step: text.to_string(),
        });
    };
    let mut verify_context = None;
    let cpu = CpuLedger::new();
    let outcome = build(
        Arc::clone(&runtime),
        request,
        &mut record,
        &mut verify_context,
        &cpu,
        &step,
    )
    .await;
    record.cpu_setup_seconds = cpu.seconds(CpuPhase::Setup);
    record.cpu_compile_seconds = cpu.seconds(CpuPhase::Compile);
    record.cpu_baseline_seconds = cpu.seconds(CpuPhase::Baseline);
    if let (Ok(None), Some(context)) = (&outcome, verify_context) {
        check_dockerfile(&runtime, request, &mut record, &context, &step).await?;
    }
    if let Ok(None) = &outcome {
        push(&runtime, request, &mut record, &step).await?;
    }
    record.total_seconds = started.elapsed().as_secs_f64();
    match outcome? {
        None => record.status = EnvironmentStatus::Built,
        Some(failure) => {
            record.failure_class = Some(failure.class);
            record.failure_command = failure.command;
            record.log_tail = Some(failure.log_tail);
            record.error_lines = failure.error_lines;
        }
    }
    Ok(record)
}

/// The Dockerfile check proves the record; its own time is in `dockerfile_check`, and the row's
/// total includes it, so that the CLI, the card and the report give one time.
async fn check_dockerfile(
    runtime: &Arc<dyn ContainerRuntime>,
    request: &LaunchRequest,
    record: &mut EnvironmentRecord,
    context: &[u8],
    step: &(dyn Fn(&str) + Sync),
) -> Result<(), LaunchError> {
    step("check the Dockerfile");
    let tag = format!("{}.dockerfile-check", request.image_tag);
    let checked = Instant::now();
    let verdict = dockerfile::verify(
        runtime,
        record,
        context,
        &tag,
        request.settings.test_timeout,
        &ContainerSpec {
            labels: request.labels.clone(),
            limits: request.docker.limits(),
            network: request.test_network(),
            ..ContainerSpec::default()
        },
        &request.log_dir,
    )
    .await;
    record.dockerfile_check = Some(match verdict {
        Ok(verdict) => format!("{verdict} ({:.1}s)", checked.elapsed().as_secs_f64()),
        Err(e @ (RuntimeError::ContainerStopped { .. } | RuntimeError::DiskExceeded { .. })) => {
            format!("rebuilt, but failed to {e}")
        }
        Err(e) => return Err(LaunchError::Engine(e)),
    });
    Ok(())
}

/// With `[docker] registry`, the environment goes to the registry, and the row names it there,
/// so that validation and evaluation can run on another machine.
async fn push(
    runtime: &Arc<dyn ContainerRuntime>,
    request: &LaunchRequest,
    record: &mut EnvironmentRecord,
    step: &(dyn Fn(&str) + Sync),
) -> Result<(), LaunchError> {
    let (Some(registry), Some(local)) = (&request.docker.registry, record.image.clone()) else {
        return Ok(());
    };
    step("push the image");
    let published = format!("{registry}/{local}");
    runtime.tag_image(&local, &published).await?;
    let mut sink = |_: &[u8]| {};
    runtime.push_image(&published, &mut sink).await?;
    record.image = Some(published);
    Ok(())
}

/// What a launch carries from one attempt to the next.
struct Launch {
    ecosystem: Ecosystem,
    plan: Plan,
    /// The row's `version_reason` so far (each attempt adds to a copy).
    version_reason: String,
    /// The whole checkout, packed; made when the first cold attempt needs it.
    tar: Option<Vec<u8>>,
    /// The environment the first attempt may start from.
    reuse: Option<Start>,
    known: Known,
    /// Whether a repair restarted the launch on another interpreter already (once at most).
    restarted: bool,
    phases: Phases,
    /// Where the attempts' containers charge their CPU time.
    cpu: CpuLedger,
}

/// How an attempt's end leaves the launch.
enum Next {
    /// Another attempt: cold after a reused one that failed, or on another interpreter.
    Again,
    /// The launch ends: built (`None`) or failed.
    Ends(Option<Failure>),
}

/// The launch proper; `Ok(Some(..))` is a failure of the repository, `Err` one of the engine or
/// the host. On success `verify_context` holds the Dockerfile check's build context, when the
/// check is on. The containers' CPU time goes to `cpu`.
async fn build(
    runtime: Arc<dyn ContainerRuntime>,
    request: &LaunchRequest,
    record: &mut EnvironmentRecord,
    verify_context: &mut Option<Vec<u8>>,
    cpu: &CpuLedger,
    step: &(dyn Fn(&str) + Sync),
) -> Result<Option<Failure>, LaunchError> {
    let _ = std::fs::create_dir_all(&request.log_dir);
    step("clone");
    let (prepared, phases) = on_host(request).await?;
    let prepared = match prepared {
        Ok(prepared) => prepared,
        Err(failure) => return Ok(Some(failure)),
    };
    let mut launch = Launch::describe(prepared, record, phases, cpu.clone());
    // The checkout doubles as the Dockerfile's build context when the Dockerfile is checked.
    let context = launch
        .tar
        .clone()
        .filter(|_| request.settings.verify_dockerfile);
    loop {
        let reused = launch.take_reuse(&runtime).await?;
        let result = launch
            .attempt(&runtime, request, record, reused.as_ref(), step)
            .await;
        let outcome = match result {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(failure)) => return Ok(Some(failure)),
            Err(e) => {
                launch.phases.write(&request.log_dir.join("launch.log"));
                return Err(e);
            }
        };
        match launch.settle(outcome, reused.as_ref(), request, record)? {
            Next::Again => {}
            Next::Ends(failure) => {
                if failure.is_none() {
                    record.reused_from = reused.map(|s| s.source.instance_id);
                    *verify_context = context;
                }
                return Ok(failure);
            }
        }
    }
}

impl Launch {
    /// Writes what the host found into the row (version, licence, language, plan, parser, test
    /// command and scope) and starts the launch's state.
    fn describe(
        prepared: Prepared,
        record: &mut EnvironmentRecord,
        phases: Phases,
        cpu: CpuLedger,
    ) -> Self {
        let Prepared {
            ecosystem,
            plan,
            checkout_note,
            tar,
            version,
            license,
            reuse,
            known,
        } = prepared;
        record.project_version = version;
        record.license = license;
        record.language = plan.language.into();
        record.plan.clone_from(&plan.name);
        record.parser = plan.parser.into();
        record.test_command = plan.test.render();
        record.test_scope.clone_from(&plan.test_scope);
        // The row has no column of its own for how versions were fixed; it follows the image's
        // reason, and the cut-off column holds the date only when the plan applied it.
        let mut version_reason = if plan.resolution.is_empty() {
            plan.version_reason.clone()
        } else {
            format!("{}; dependencies: {}", plan.version_reason, plan.resolution)
        };
        if let Some(note) = checkout_note {
            version_reason.push_str("; checkout: ");
            version_reason.push_str(&note);
        }
        Self {
            ecosystem,
            plan,
            version_reason,
            tar,
            reuse,
            known,
            restarted: false,
            phases,
            cpu,
        }
    }

    /// The environment the first attempt starts from, if it is still there.
    async fn take_reuse(
        &mut self,
        runtime: &Arc<dyn ContainerRuntime>,
    ) -> Result<Option<Start>, RuntimeError> {
        match self.reuse.take() {
            Some(start) if runtime.image_exists(&start.source.image).await? => Ok(Some(start)),
            Some(start) => {
                self.version_reason.push_str(&format!(
                    "; reuse: the environment of {} is gone, launched cold",
                    start.source.instance_id
                ));
                Ok(None)
            }
            None => Ok(None),
        }
    }

    /// What the container starts from: the delta to the environment it starts from, or the
    /// whole checkout, made now if the checkout was borrowed. `Ok(Err(..))`: the repository's
    /// failure.
    async fn archive(
        &mut self,
        request: &LaunchRequest,
        reused: Option<&Start>,
        step: &(dyn Fn(&str) + Sync),
    ) -> Result<Result<Vec<u8>, Failure>, LaunchError> {
        if let Some(Start {
            delta: Some(delta), ..
        }) = reused
        {
            return Ok(Ok(delta.tar.clone()));
        }
        if self.tar.is_none() {
            step("clone");
            let whole = {
                let request = request.clone();
                tokio::task::spawn_blocking(move || whole_archive(&request))
                    .await
                    .map_err(|e| LaunchError::host("prepare the checkout", e))??
            };
            let whole = match whole {
                Ok(whole) => whole,
                Err(failure) => return Ok(Err(failure)),
            };
            if let Some(note) = whole.note {
                self.version_reason.push_str("; checkout: ");
                self.version_reason.push_str(&note);
            }
            self.tar = Some(whole.tar);
            self.phases.end("clone");
        }
        self.tar.clone().map(Ok).ok_or_else(|| {
            LaunchError::host("pack the checkout", "the whole checkout was not packed")
        })
    }

    /// One attempt: the row reset, the checkout archive, the plan it runs (the one made with a
    /// reused source's cut-off when its dependencies stand), the container it starts from
    /// (base image, system layer, or the reused environment), then the plan in it.
    async fn attempt(
        &mut self,
        runtime: &Arc<dyn ContainerRuntime>,
        request: &LaunchRequest,
        record: &mut EnvironmentRecord,
        reused: Option<&Start>,
        step: &(dyn Fn(&str) + Sync),
    ) -> Result<Result<Attempt, Failure>, LaunchError> {
        record.base_image.clone_from(&self.plan.image.tag);
        record.setup_commands.clear();
        record.environment.clear();
        let archive = match self.archive(request, reused, step).await? {
            Ok(archive) => archive,
            Err(failure) => return Ok(Err(failure)),
        };
        record.version_reason.clone_from(&self.version_reason);
        if reused.is_none() {
            self.base_image(runtime, request, step).await?;
        }
        let attempt_plan = attempt_plan(&self.plan, reused, record);
        record.dependency_cutoff.clone_from(&attempt_plan.cutoff);
        record.rebuild_commands = attempt_plan.rebuild.iter().map(Step::render).collect();
        let (spec, layered) = container_spec(
            runtime,
            request,
            attempt_plan,
            reused,
            step,
            &mut self.phases,
        )
        .await?;
        step(
            match reused {
                Some(start) => format!(
                    "start container from {}'s environment",
                    start.source.instance_id
                ),
                None => "start container".to_string(),
            }
            .as_str(),
        );
        let mut session = Session::start(
            Arc::clone(runtime),
            &spec,
            &request.log_dir.join("launch.log"),
        )
        .await?;
        session.charge_to(&self.cpu, CpuPhase::Setup);
        self.phases.end("start");
        let attempted = Attempted {
            ecosystem: self.ecosystem,
            plan: attempt_plan,
            spec: &spec,
            known: &self.known,
            layered: layered.as_ref().map(|(tag, n)| (tag.as_str(), *n)),
            reused: reused.map(|start| Reused {
                delta: start.delta.is_some(),
                skip: match (&start.kept, &start.delta) {
                    (Some(_), Some(delta)) => Some((&start.source, delta.changed.as_slice())),
                    _ => None,
                },
            }),
        };
        let result = run_plan(
            &mut session,
            request,
            record,
            attempted,
            archive,
            step,
            &mut self.phases,
        )
        .await;
        session.close_later(&request.removals);
        Ok(Ok(result?))
    }

    /// Makes the plan's base image unless it exists (its Debian base pulled, else made with
    /// debootstrap), saying so when that takes a while.
    async fn base_image(
        &mut self,
        runtime: &Arc<dyn ContainerRuntime>,
        request: &LaunchRequest,
        step: &(dyn Fn(&str) + Sync),
    ) -> Result<(), RuntimeError> {
        step("base image");
        let image = &self.plan.image;
        if let Some(base) = images::base_image(&image.dockerfile)
            && debian::suite_of(&base).is_some()
            && !runtime.image_exists(&image.tag).await?
            && !runtime.image_exists(&base).await?
        {
            step(&format!(
                "base image: making {base} (a pull, else debootstrap)"
            ));
        }
        ensure_image(runtime.as_ref(), image, &request.log_dir).await?;
        self.phases.end("base image");
        Ok(())
    }

    /// What an attempt's end means for the launch: a reused attempt that failed goes cold (its
    /// log kept beside), a restart goes on the other interpreter once, anything else ends it.
    fn settle(
        &mut self,
        outcome: Attempt,
        reused: Option<&Start>,
        request: &LaunchRequest,
        record: &mut EnvironmentRecord,
    ) -> Result<Next, LaunchError> {
        let log = request.log_dir.join("launch.log");
        match outcome {
            // A launch from an earlier environment that did not build says nothing about the
            // repository: it launches cold, and the first attempt's log stays beside.
            Attempt::Done(Some(failure)) if reused.is_some() => {
                self.phases.write(&log);
                let _ = std::fs::rename(&log, request.log_dir.join("launch-reused.log"));
                self.version_reason.push_str(&format!(
                    "; reuse: starting from {}'s environment failed ({}), launched cold",
                    reused.map_or("", |s| s.source.instance_id.as_str()),
                    failure.class
                ));
                record.repairs.clear();
                record.baseline.clear();
                (record.baseline_passed, record.baseline_failed) = (0, 0);
                (record.setup_seconds, record.test_seconds) = (0.0, 0.0);
                self.phases = Phases::new();
                Ok(Next::Again)
            }
            Attempt::Restart(suite, Some(image)) if !self.restarted => {
                self.restarted = true;
                // The first attempt's log stays, as launch-1.log.
                let _ = std::fs::rename(&log, request.log_dir.join("launch-1.log"));
                self.plan.image = image;
                self.plan.repair.suite = Some(suite);
                self.version_reason = format!(
                    "{} (a repair started the launch over on Debian {}'s {})",
                    self.version_reason,
                    suite.name(),
                    ecosystems::interpreter_name(self.ecosystem)
                );
                Ok(Next::Again)
            }
            Attempt::Restart(..) => {
                self.phases.write(&log);
                Ok(Next::Ends(Some(Failure::new(
                    FailureClass::Build,
                    record.setup_commands.last().map(String::as_str),
                    "a repair asked for another interpreter a second time",
                ))))
            }
            Attempt::RegistryDown(down) => {
                self.phases.write(&log);
                Err(LaunchError::RegistryDown {
                    url: down.url,
                    error: down.error,
                })
            }
            Attempt::Done(failure) => {
                self.phases.write(&log);
                Ok(Next::Ends(failure))
            }
        }
    }
}

/// The plan an attempt runs: a reused attempt that keeps the source's dependencies runs the
/// plan made with its cut-off (and says so in the row); any other the launch's plan.
fn attempt_plan<'a>(
    plan: &'a Plan,
    reused: Option<&'a Start>,
    record: &mut EnvironmentRecord,
) -> &'a Plan {
    let Some(Start {
        source,
        kept: Some(kept),
        ..
    }) = reused
    else {
        return plan;
    };
    if kept.cutoff != plan.cutoff
        && let Some(cutoff) = &kept.cutoff
    {
        record.version_reason.push_str(&format!(
            "; reuse: dependencies resolved as of {}'s cut-off {cutoff} (no dependency manifest changed since its commit)",
            source.instance_id
        ));
    }
    kept
}

/// The container an attempt starts: from the plan's base image, or, cold, from the system
/// layer of the plan's first steps (made once for every launch that shares them), or, reused,
/// from the source's environment. With the system layer it started from, and how many of the
/// plan's steps that layer ran.
async fn container_spec(
    runtime: &Arc<dyn ContainerRuntime>,
    request: &LaunchRequest,
    plan: &Plan,
    reused: Option<&Start>,
    step: &(dyn Fn(&str) + Sync),
    phases: &mut Phases,
) -> Result<(ContainerSpec, Option<(String, usize)>), RuntimeError> {
    let mut spec = ContainerSpec {
        image: plan.image.tag.clone(),
        env: vec![("PIP_DISABLE_PIP_VERSION_CHECK".into(), "1".into())],
        labels: request.labels.clone(),
        limits: request.docker.limits(),
        network: NetworkMode::Bridge,
        workdir: Some(WORKDIR.into()),
        max_lifetime: request.settings.command_timeout * 4
            + request.settings.test_timeout
            + crate::fallback::agent_lifetime(request)
            + Duration::from_secs(600),
    };
    if let Some(start) = reused {
        spec.image.clone_from(&start.source.image);
        return Ok((spec, None));
    }
    let system = layer::system_steps(&plan.setup);
    if system == 0 {
        return Ok((spec, None));
    }
    step("system layer");
    let built = layer::ensure(
        runtime,
        &spec,
        &plan.setup[..system],
        request.settings.command_timeout,
        &request.log_dir.join("layer.log"),
    )
    .await?;
    phases.end("system layer");
    let layered = built.map(|tag| {
        spec.image.clone_from(&tag);
        (tag, system)
    });
    Ok((spec, layered))
}
