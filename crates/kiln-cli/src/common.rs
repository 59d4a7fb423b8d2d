//! What several commands share: loading and checking the config, connecting to the engine,
//! running stages so that Ctrl-C stops them cleanly, and printing a run's summary.

use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;

use kiln_core::config::Pipeline;
use kiln_core::runtime::LABEL_RUN;
use kiln_core::{ContainerRuntime, Reporter};
use kiln_pipeline::{PipelineError, RunOptions, RunSelection, Runner};

use crate::exit;
use crate::failure::{ENGINE_HINT, Failure};

/// Opens the run `selection` names and runs every stage of it, stopping cleanly on Ctrl-C.
pub async fn run_all(
    pipeline: Pipeline,
    selection: &RunSelection,
    options: RunOptions,
    reporter: Arc<dyn Reporter>,
) -> Result<Runner, Failure> {
    check_environment(&pipeline, None)?;
    let engine = connect_if_needed(&pipeline, None, &reporter).await?;
    let lm = kiln_pipeline::language_model(&pipeline, None, &options.secrets)?;
    let mut runner = with_lm(
        Runner::open(pipeline, selection, reporter, engine.clone())?,
        lm,
    );
    run_interruptibly(&mut runner, engine.as_ref(), |r| {
        Box::pin(async move { r.run_all(&options).await.map(|_| ()) })
    })
    .await?;
    Ok(runner)
}

/// Gives the runner the LM client, when its stages need one.
pub fn with_lm(runner: Runner, lm: Option<Arc<dyn kiln_core::LanguageModel>>) -> Runner {
    match lm {
        Some(lm) => runner.with_language_model(lm),
        None => runner,
    }
}

/// The pipeline as the shard `spec` (`--shard`) runs it; unchanged without one.
pub fn for_shard(pipeline: Pipeline, spec: Option<&str>) -> Result<Pipeline, Failure> {
    let Some(spec) = spec else {
        return Ok(pipeline);
    };
    let id = kiln_core::config::ShardId::parse(spec, &|name| std::env::var(name).ok())
        .map_err(|e| Failure::new(exit::USAGE, format!("failed to read --shard: {e}")))?;
    Ok(pipeline.for_shard(id))
}

pub fn load(path: &Path) -> Result<Pipeline, Failure> {
    Pipeline::load(path).map_err(|errors| {
        let count = errors.0.len();
        Failure::new(
            exit::CONFIG,
            format!("{count} problem(s) in the pipeline config:\n{errors}"),
        )
    })
}

/// Checks what the config needs from this machine (token variables, the CA bundle) for all of
/// it, or for one stage; located like compile errors, with the same exit code.
pub fn check_environment(pipeline: &Pipeline, stage: Option<&str>) -> Result<(), Failure> {
    let names = stage.map(|s| vec![s]);
    let is_set = |name: &str| std::env::var(name).is_ok_and(|v| !v.trim().is_empty());
    pipeline
        .check_environment(names.as_deref(), &is_set)
        .map_err(|errors| {
            let count = errors.0.len();
            // The demo's crawl reads the GitHub `kiln demo` serves while it runs.
            let hint = if errors.to_string().contains(kiln_demo::DEMO_TOKEN_ENV) {
                "\nhint: this is the demo's config: its crawl reads the GitHub that `kiln demo` serves while it runs; run a later stage again with `kiln stage NAME` (for example `kiln stage validate --only ID --force`), or everything with `kiln demo`"
            } else {
                ""
            };
            Failure::new(
                exit::CONFIG,
                format!("{count} problem(s) with what the pipeline config needs from this machine:\n{errors}{hint}"),
            )
        })
}

/// Connects to the engine when the pipeline (or the one stage asked for) runs containers.
pub async fn connect_if_needed(
    pipeline: &Pipeline,
    stage: Option<&str>,
    reporter: &Arc<dyn Reporter>,
) -> Result<Option<Arc<dyn ContainerRuntime>>, Failure> {
    let needs = pipeline
        .nodes
        .iter()
        .filter(|n| stage.is_none_or(|s| n.name == s))
        .any(kiln_core::config::Node::uses_engine);
    if !needs {
        return Ok(None);
    }
    connect(reporter).await.map(Some)
}

/// Connects to the engine `DOCKER_HOST` names (else the local socket) and says, once per
/// process, what that engine does differently from Docker (rootless Podman's ignored limits).
pub async fn connect(reporter: &Arc<dyn Reporter>) -> Result<Arc<dyn ContainerRuntime>, Failure> {
    static SAID: std::sync::Once = std::sync::Once::new();
    match kiln_docker::DockerRuntime::connect().await {
        Ok(runtime) => {
            let caveats = runtime.caveats().await;
            SAID.call_once(|| {
                for message in caveats {
                    reporter.report(kiln_core::Event::Note { message });
                }
            });
            Ok(Arc::new(runtime))
        }
        Err(e) => Err(Failure::new(
            exit::ENGINE,
            format!("failed to {e}{ENGINE_HINT}"),
        )),
    }
}

pub type Work<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), PipelineError>> + 'a>>;

/// Runs `work`, stopping it on Ctrl-C or SIGTERM: the in-flight items are dropped (their
/// sessions remove their containers), every container of the run is removed, and the run is
/// left `incomplete` so the next `kiln run` resumes it.
pub async fn run_interruptibly<'r>(
    runner: &'r mut Runner,
    engine: Option<&Arc<dyn ContainerRuntime>>,
    work: impl FnOnce(&'r mut Runner) -> Work<'r>,
) -> Result<(), Failure> {
    let label = runner.run_label();
    let run_dir = runner.run_dir();
    let interrupted = {
        let future = work(runner);
        tokio::select! {
            result = future => { result?; false }
            () = shutdown_signal() => true,
        }
    };
    if !interrupted {
        return Ok(());
    }
    let removed = match engine {
        Some(engine) => engine.remove_labelled(LABEL_RUN, &label).await.unwrap_or(0),
        None => 0,
    };
    Err(Failure::new(
        exit::INTERRUPTED,
        format!(
            "interrupted; removed {removed} container(s); finished items are kept in {} and `kiln run` resumes the rest",
            run_dir.display()
        ),
    ))
}

pub async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
}

pub fn print_json(value: &serde_json::Value) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    if let Err(e) = serde_json::to_writer_pretty(&mut out, value) {
        // A reader that went away (`kiln --json status | head -1`) ends the program quietly,
        // with the status a shell gives a program SIGPIPE ended.
        if e.io_error_kind() == Some(std::io::ErrorKind::BrokenPipe) {
            std::process::exit(141);
        }
        return Err(Failure::new(
            exit::INTERNAL,
            format!("failed to write JSON: {e}"),
        ));
    }
    let _ = writeln!(out);
    Ok(())
}

pub fn print_summary(runner: &Runner, json: bool) -> Result<(), Failure> {
    let summaries = kiln_pipeline::instance_summaries(
        runner.pipeline(),
        &kiln_store::RunStore::open_dir(&runner.run_dir())
            .map_err(|e| Failure::from(PipelineError::from(e)))?,
    )?;
    let stages: Vec<serde_json::Value> = runner
        .stage_manifests()
        .into_iter()
        .filter_map(|(stage, manifest)| {
            manifest
                .map(|m| serde_json::json!({"stage": stage, "counts": m.counts, "stats": m.stats}))
        })
        .collect();
    let lm = kiln_pipeline::lm_spent(&runner.run_dir())?;
    if json {
        return print_json(
            &serde_json::json!({"run_id": runner.run_id(), "run_dir": runner.run_dir(), "instances": summaries, "stages": stages, "lm": lm}),
        );
    }
    println!("run {} in {}", runner.run_id(), runner.run_dir().display());
    for s in &summaries {
        let detail = match s.state {
            kiln_pipeline::InstanceState::Validated => format!(
                "{} FAIL_TO_PASS, {} PASS_TO_PASS{}",
                s.fail_to_pass.len(),
                s.pass_to_pass.len(),
                s.agreement
                    .as_ref()
                    .map(|a| format!("; published list: {a} (as strings/by meaning)"))
                    .unwrap_or_default()
            ),
            _ => [s.stop_class().map(str::to_string), s.reason.clone()]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(": "),
        };
        println!("  {:<28} {:<15} {detail}", s.instance_id, s.state);
    }
    // What the stages measured besides the LM (a crawl's requests, calls per candidate and
    // points), with their outcomes: a crawl's dropped pull requests are not instances.
    for (stage, manifest) in runner.stage_manifests() {
        let Some(m) = manifest else { continue };
        let stats: std::collections::BTreeMap<String, f64> = m
            .stats
            .iter()
            .filter(|(k, _)| !k.starts_with("lm."))
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        if !stats.is_empty() {
            println!(
                "  {stage}: {} | {}",
                kiln_pipeline::counts_line(&m.counts),
                kiln_pipeline::stats_line(&stats)
            );
        }
    }
    print_lm_lines(runner, lm.as_ref());
    let run = kiln_store::RunStore::open_dir(&runner.run_dir())
        .map_err(|e| Failure::from(PipelineError::from(e)))?;
    for dir in kiln_pipeline::release::run_releases(runner.pipeline(), &run) {
        let Ok(release) = kiln_pipeline::release::ReleaseManifest::read(&dir) else {
            continue;
        };
        let splits: Vec<String> = release
            .splits
            .iter()
            .map(|(name, split)| format!("{name} {}", split.rows))
            .collect();
        let left_out = if release.duplicates.is_empty() {
            String::new()
        } else {
            format!("; {} left out as duplicates", release.duplicates.len())
        };
        println!(
            "release {} in {}: {}{left_out}",
            release.tag,
            dir.display(),
            splits.join(", ")
        );
    }
    Ok(())
}

/// The LM figures of each stage that asked, and of the whole run.
pub fn print_lm_lines(runner: &Runner, spent: Option<&kiln_pipeline::Spent>) {
    let Some(spent) = spent else {
        return;
    };
    for (stage, manifest) in runner.stage_manifests() {
        let Some(manifest) = manifest else { continue };
        let lm: std::collections::BTreeMap<String, f64> = manifest
            .stats
            .iter()
            .filter_map(|(k, v)| k.strip_prefix("lm.").map(|k| (k.to_string(), *v)))
            .collect();
        if !lm.is_empty() {
            println!("lm {stage:<8} {}", kiln_pipeline::stats_line(&lm));
        }
    }
    println!("lm run      {}", kiln_pipeline::spent_line(spent));
}
