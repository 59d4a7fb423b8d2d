//! `kiln`: turns merged pull requests into verified, executable task instances.
//!
//! This binary only parses arguments, draws progress, maps errors to exit codes and calls the
//! libraries; see ARCHITECTURE.md for where the work happens.

// Printing is this binary's job; the workspace lints keep it out of the libraries.
#![expect(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "printing is what this program is for"
)]

mod exit;
mod progress;

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use kiln_core::config::Pipeline;
use kiln_core::runtime::LABEL_RUN;
use kiln_core::{ContainerRuntime, Reporter, RuntimeError};
use kiln_pipeline::{PipelineError, RunOptions, RunSelection, Runner};

use progress::{Mode, Progress};

#[derive(Parser)]
#[command(
    name = "kiln",
    version,
    about = "Build verified, executable software-engineering task instances from merged pull requests",
    long_about = "kiln reads task candidates (a SWE-bench or Multi-SWE-bench task file), filters them, \
builds each repository at its base commit inside Docker, validates FAIL_TO_PASS and PASS_TO_PASS by \
running the tests with the test patch and with the gold patch, and writes Parquet release shards.\n\n\
Stages and their settings are declared in the pipeline config (default: ./pipeline.toml). A run \
lives under <root>/<dataset>/runs/<run-id>/; every finished item is written at once, so an \
interrupted run resumes where it stopped.",
    after_help = exit::TABLE
)]
struct Cli {
    /// Pipeline config file.
    #[arg(
        long,
        short,
        global = true,
        default_value = "pipeline.toml",
        env = "KILN_CONFIG"
    )]
    config: PathBuf,
    /// Print data (status, summaries) as JSON on stdout and progress as JSON lines on stderr.
    #[arg(long, global = true)]
    json: bool,
    /// Show no progress.
    #[arg(long, short, global = true)]
    quiet: bool,
    /// More log output on stderr (-v: debug, -vv: trace); RUST_LOG overrides.
    #[arg(long, short, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run every stage of the pipeline, resuming the latest run if it is unfinished.
    Run {
        /// Start a new run even if the latest one is unfinished.
        #[arg(long, conflicts_with = "run")]
        new: bool,
        /// Resume this run id instead of the latest.
        #[arg(long)]
        run: Option<String>,
        /// Items built or validated at once (overrides the config).
        #[arg(long)]
        concurrency: Option<usize>,
        /// Let the export replace its release with this run's rows alone (by default the release
        /// keeps the rows of earlier runs that this run did not make).
        #[arg(long)]
        allow_fewer_rows: bool,
    },
    /// The monthly refresh: crawl the merged pull requests of one month, build and validate
    /// them, and publish the release tagged with the month, without the instances earlier
    /// releases hold. The config needs a crawl source; its window and the export's tag are set
    /// to the month. Safe to re-run: an interrupted refresh of the month resumes, a finished one
    /// adds only what is new to the month's release.
    Refresh {
        /// The month, YYYY-MM.
        #[arg(long, value_parser = parse_month)]
        month: String,
        /// Items built or validated at once (overrides the config).
        #[arg(long)]
        concurrency: Option<usize>,
        /// Then push the month's release to this Hugging Face dataset repository (see `kiln
        /// push`).
        #[arg(long, value_name = "NAMESPACE/NAME")]
        push: Option<String>,
    },
    /// Push a release to a Hugging Face Hub dataset repository in one commit (under
    /// `releases/<tag>/`, with a root card whose default config joins every release), and its
    /// environment images to the registry the release names. The token is read from HF_TOKEN
    /// (or HUGGING_FACE_HUB_TOKEN), the Hub's address from HF_ENDPOINT. Pushing a release again
    /// sends only what the Hub does not hold.
    Push {
        /// The release directory (`datasets/<name>/releases/<tag>`).
        #[arg(long)]
        release: PathBuf,
        /// The dataset repository, `namespace/name`.
        #[arg(long, value_name = "NAMESPACE/NAME")]
        repo: String,
        /// Create the repository private (when it does not exist yet).
        #[arg(long)]
        private: bool,
        /// Show what would be pushed; send nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Run one stage of the latest run (or --run), reading its inputs from disk.
    Stage {
        /// Stage name, as declared in the config.
        name: String,
        /// Only these instance ids (repeatable).
        #[arg(long = "only", value_name = "INSTANCE_ID")]
        only: Vec<String>,
        /// Redo items that already have rows: with --only just those, otherwise the whole stage.
        #[arg(long)]
        force: bool,
        /// Run id (default: the latest run).
        #[arg(long)]
        run: Option<String>,
        /// Items processed at once (overrides the config).
        #[arg(long)]
        concurrency: Option<usize>,
        /// Let an export replace its release with this run's rows alone (by default the release
        /// keeps the rows of earlier runs that this run did not make).
        #[arg(long)]
        allow_fewer_rows: bool,
    },
    /// Show the stages of the latest run (or --run): status, rows, outcomes.
    Status {
        /// Run id (default: the latest run).
        #[arg(long)]
        run: Option<String>,
    },
    /// Write one HTML page about a run (default: the latest), with no external assets: the
    /// funnel through the stages, outcome by language, failure classes, time per instance and
    /// per stage, LM tokens and cost.
    Report {
        /// Run id (default: the latest run).
        #[arg(long)]
        run: Option<String>,
        /// Where to write the page (default: report.html in the run directory).
        #[arg(long)]
        output: Option<PathBuf>,
    },
    /// Validate the pipeline config and report every problem at once.
    Check,
    /// Print the stage graph in Graphviz DOT.
    Graph,
    /// Read a test log as launch and validate do: the status of every test, the totals the
    /// framework printed, and whether the two agree (a run whose totals disagree is rejected as
    /// an invalid run). The format is detected from the log unless --parser names one.
    Parse {
        /// The log file (a command's output, as under the run's logs/).
        log: PathBuf,
        /// Parser to use (`pytest`, `cargo`, `go-test-json`, `junit-xml`, `jest-json`, ...;
        /// an unknown name lists them).
        #[arg(long)]
        parser: Option<String>,
    },
    /// List the repair rules launch tries, once each, before it declares a build failed.
    Repairs,
    /// Evaluate predicted patches (SWE-bench's `{instance_id, model_patch}` format) against a
    /// release: per instance resolved, partial, unresolved, patch-apply failure or infra failure.
    Evaluate {
        /// A release directory (its `data/*.parquet`) or one Parquet file.
        #[arg(long)]
        dataset: PathBuf,
        /// Predictions: a JSON array, a JSON object keyed by instance id, or JSONL.
        #[arg(long)]
        predictions: PathBuf,
        /// Where the report and logs go (default: ./evaluation-<time>).
        #[arg(long)]
        output: Option<PathBuf>,
        /// Only these instance ids (repeatable).
        #[arg(long = "only", value_name = "INSTANCE_ID")]
        only: Vec<String>,
        /// Instances evaluated at once.
        #[arg(long, default_value_t = 2)]
        concurrency: usize,
        /// Timeout of each test run, e.g. "30m".
        #[arg(long, default_value = "30m")]
        timeout: String,
        /// Give the test containers the network (default: loopback only).
        #[arg(long)]
        network: bool,
    },
    /// Build the fixture projects and run the whole pipeline on them with the local Docker engine.
    Demo {
        /// Directory for the fixtures, the config and the datasets (replaced if it holds an earlier demo).
        #[arg(long, default_value = "kiln-demo")]
        dir: PathBuf,
        /// Runs per side in validation.
        #[arg(long, default_value_t = 3)]
        repeats: u32,
        /// CA bundle to install in the images (default: the host's bundle, if present).
        #[arg(long)]
        ca_bundle: Option<PathBuf>,
        /// Judge the filter and split with this OpenAI-compatible endpoint (base URL up to
        /// `/v1`); the key is read from OPENAI_API_KEY when it is set. Without it the demo
        /// asks no LM.
        #[arg(long, value_name = "URL")]
        lm_url: Option<String>,
        /// Model to ask at --lm-url (default: the first the endpoint lists).
        #[arg(long, value_name = "NAME", requires = "lm_url")]
        lm_model: Option<String>,
    },
}

/// An error with the exit code it maps to.
struct Failure {
    code: u8,
    message: String,
}

impl Failure {
    fn new(code: u8, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

impl From<PipelineError> for Failure {
    fn from(e: PipelineError) -> Self {
        let code = match &e {
            PipelineError::Store(_) | PipelineError::Host { .. } => exit::STORE,
            PipelineError::Engine(_) | PipelineError::NoEngine(_) => exit::ENGINE,
            PipelineError::Answers(_) => exit::STORE,
            PipelineError::Internal(_) | PipelineError::NoLanguageModel(_) => exit::INTERNAL,
            PipelineError::Publish(_) => exit::PUBLISH,
            PipelineError::LmSetup(_)
            | PipelineError::Input { .. }
            | PipelineError::MissingInput { .. }
            | PipelineError::UnknownStage { .. }
            | PipelineError::NoRun(_) => exit::INPUT,
        };
        let mut message = format!("failed to {e}");
        if let PipelineError::Engine(RuntimeError::Unreachable { .. }) = &e {
            message.push_str(ENGINE_HINT);
        }
        Self { code, message }
    }
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Self::new(exit::INTERNAL, format!("{e:#}"))
    }
}

const ENGINE_HINT: &str = "\nhint: start a Docker engine (on Debian: `sudo bash scripts/docker-engine.sh start`, which installs docker.io and starts dockerd), or point DOCKER_HOST at one";

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(cli.verbose);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: failed to start the async runtime: {e}");
            return ExitCode::from(exit::INTERNAL);
        }
    };
    match runtime.block_on(dispatch(cli)) {
        Ok(code) => ExitCode::from(code),
        Err(failure) => {
            eprintln!("error: {}", failure.message);
            ExitCode::from(failure.code)
        }
    }
}

fn init_tracing(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "kiln=debug,info",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

async fn dispatch(cli: Cli) -> Result<u8, Failure> {
    let reporter: Arc<dyn Reporter> = Arc::new(Progress::new(Mode::detect(cli.json, cli.quiet)));
    match cli.command {
        Command::Check => {
            let pipeline = load(&cli.config)?;
            check_environment(&pipeline, None)?;
            if cli.json {
                print_json(
                    &serde_json::json!({"config": pipeline.path, "ok": true, "nodes": pipeline.nodes}),
                )?;
            } else {
                println!(
                    "{}: ok ({} sources and stages)",
                    pipeline.path.display(),
                    pipeline.nodes.len()
                );
            }
            Ok(exit::OK)
        }
        Command::Graph => {
            print!("{}", load(&cli.config)?.to_dot());
            Ok(exit::OK)
        }
        Command::Parse { log, parser } => parse_log(&log, parser.as_deref(), cli.json),
        Command::Repairs => {
            list_repairs(cli.json)?;
            Ok(exit::OK)
        }
        Command::Report { run, output } => {
            let pipeline = load(&cli.config)?;
            let selection = run.map_or(RunSelection::Latest, RunSelection::Id);
            write_report(&pipeline, &selection, output, cli.json)
        }
        Command::Status { run } => {
            let pipeline = load(&cli.config)?;
            let selection = run.map_or(RunSelection::Latest, RunSelection::Id);
            status(pipeline, &selection, cli.json)
        }
        Command::Run {
            new,
            run,
            concurrency,
            allow_fewer_rows,
        } => {
            let pipeline = load(&cli.config)?;
            let selection = match (new, run) {
                (_, Some(id)) => RunSelection::Id(id),
                (true, None) => RunSelection::New,
                (false, None) => RunSelection::ResumeOrNew,
            };
            let options = RunOptions {
                concurrency,
                allow_fewer_rows,
                ..RunOptions::default()
            };
            let runner = run_all(pipeline, &selection, options, reporter).await?;
            print_summary(&runner, cli.json)?;
            Ok(exit::OK)
        }
        Command::Refresh {
            month,
            concurrency,
            push,
        } => {
            let pipeline = load(&cli.config)?;
            let pipeline = pipeline
                .for_month(&month)
                .map_err(|e| Failure::new(exit::CONFIG, format!("failed to refresh: {e}")))?;
            let options = RunOptions {
                concurrency,
                ..RunOptions::default()
            };
            let runner = run_all(
                pipeline,
                &RunSelection::ResumeOrNew,
                options,
                reporter.clone(),
            )
            .await?;
            print_summary(&runner, cli.json)?;
            if let Some(repo) = push {
                let run = kiln_store::RunStore::open_dir(&runner.run_dir())
                    .map_err(|e| Failure::from(PipelineError::from(e)))?;
                for release in kiln_pipeline::release::run_releases(runner.pipeline(), &run) {
                    push_release(&release, &repo, false, false, &reporter, cli.json).await?;
                }
            }
            Ok(exit::OK)
        }
        Command::Push {
            release,
            repo,
            private,
            dry_run,
        } => {
            push_release(&release, &repo, private, dry_run, &reporter, cli.json).await?;
            Ok(exit::OK)
        }
        Command::Stage {
            name,
            only,
            force,
            run,
            concurrency,
            allow_fewer_rows,
        } => {
            let pipeline = load(&cli.config)?;
            check_environment(&pipeline, Some(&name))?;
            let engine = connect_if_needed(&pipeline, Some(&name)).await?;
            let selection = run.map_or(RunSelection::Latest, RunSelection::Id);
            let options = RunOptions {
                only: (!only.is_empty()).then(|| only.into_iter().collect::<BTreeSet<_>>()),
                force,
                concurrency,
                allow_fewer_rows,
                ..RunOptions::default()
            };
            let lm = kiln_pipeline::language_model(&pipeline, Some(&name), &options.secrets)?;
            let mut runner = with_lm(
                Runner::open(pipeline, &selection, reporter, engine.clone())?,
                lm,
            );
            let stage = name.clone();
            run_interruptibly(&mut runner, engine.as_ref(), |r| {
                Box::pin(async move { r.run_stage(&stage, &options).await.map(|_| ()) })
            })
            .await?;
            print_summary(&runner, cli.json)?;
            Ok(exit::OK)
        }
        Command::Evaluate {
            dataset,
            predictions,
            output,
            only,
            concurrency,
            timeout,
            network,
        } => {
            let args = EvaluateArgs {
                dataset,
                predictions,
                output,
                only,
                concurrency,
                timeout,
                network,
            };
            evaluate(args, reporter, cli.json).await
        }
        Command::Demo {
            dir,
            repeats,
            ca_bundle,
            lm_url,
            lm_model,
        } => {
            let args = DemoArgs {
                dir,
                repeats,
                ca_bundle,
                lm_url,
                lm_model,
            };
            demo(args, reporter, cli.json).await
        }
    }
}

/// Opens the run `selection` names and runs every stage of it, stopping cleanly on Ctrl-C.
async fn run_all(
    pipeline: Pipeline,
    selection: &RunSelection,
    options: RunOptions,
    reporter: Arc<dyn Reporter>,
) -> Result<Runner, Failure> {
    check_environment(&pipeline, None)?;
    let engine = connect_if_needed(&pipeline, None).await?;
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

/// `kiln push`: the release at `release` to the Hub repository `repo`, its images to their
/// registry; prints what was sent.
async fn push_release(
    release: &Path,
    repo: &str,
    private: bool,
    dry_run: bool,
    reporter: &Arc<dyn Reporter>,
    json: bool,
) -> Result<(), Failure> {
    let options = kiln_pipeline::publish::PushOptions {
        repo: repo.to_string(),
        endpoint: kiln_hub::endpoint_from_env(),
        token: kiln_hub::token_from_env(),
        private,
        dry_run,
    };
    if !dry_run && options.token.is_none() {
        return Err(Failure::new(
            exit::USAGE,
            "failed to push: no token; set HF_TOKEN to a Hugging Face token with write access",
        ));
    }
    let manifest = kiln_pipeline::release::ReleaseManifest::read(release)?;
    let engine = if !dry_run && manifest.image_registry.is_some() {
        Some(connect().await?)
    } else {
        None
    };
    let report = kiln_pipeline::publish::push(release, &options, engine, reporter).await?;
    if json {
        return print_json(&serde_json::to_value(&report).unwrap_or_default());
    }
    let verb = if dry_run { "would push" } else { "pushed" };
    for (image, digest) in &report.images {
        println!(
            "{verb} image {image}{}",
            digest
                .as_ref()
                .map(|d| format!(" ({d})"))
                .unwrap_or_default()
        );
    }
    let bytes: u64 = report.files.iter().map(|(_, b)| b).sum();
    println!(
        "{verb} release {} to {}/datasets/{repo}: {} files, {bytes} bytes",
        report.tag,
        options.endpoint,
        report.files.len()
    );
    for image in &report.images_skipped {
        println!("  image {image} left alone: it is not named in the release's registry");
    }
    if dry_run {
        for (path, size) in &report.files {
            println!("  {path} ({size} bytes)");
        }
        return Ok(());
    }
    for path in &report.deleted {
        println!("  deleted {path} (an earlier push of the release had it)");
    }
    match (&report.commit, &report.commit_url) {
        (Some(commit), url) => println!(
            "  commit {commit}{}: {} sent, {} already on the Hub, {} unchanged",
            url.as_ref().map(|u| format!(" ({u})")).unwrap_or_default(),
            report.sent.len(),
            report.already_stored.len(),
            report.unchanged.len()
        ),
        (None, _) => println!("  the Hub holds this release already: no commit made"),
    }
    Ok(())
}

/// `--month`: a calendar month, YYYY-MM.
fn parse_month(text: &str) -> Result<String, String> {
    let ok = text.len() == 7
        && text.as_bytes()[4] == b'-'
        && text[..4].bytes().all(|b| b.is_ascii_digit())
        && text[5..]
            .parse::<u32>()
            .is_ok_and(|m| (1..=12).contains(&m));
    if ok {
        Ok(text.to_string())
    } else {
        Err(format!(
            "\"{text}\" is not a month; write YYYY-MM, such as 2024-09"
        ))
    }
}

/// Gives the runner the LM client, when its stages need one.
fn with_lm(runner: Runner, lm: Option<Arc<dyn kiln_core::LanguageModel>>) -> Runner {
    match lm {
        Some(lm) => runner.with_language_model(lm),
        None => runner,
    }
}

fn parse_log(path: &Path, parser: Option<&str>, json: bool) -> Result<u8, Failure> {
    let names = kiln_testlog::parser_names();
    if let Some(name) = parser.filter(|n| !names.contains(n)) {
        return Err(Failure::new(
            exit::USAGE,
            format!("unknown parser `{name}`; kiln knows: {}", names.join(", ")),
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| {
        Failure::new(
            exit::INPUT,
            format!("failed to read {}: {e}", path.display()),
        )
    })?;
    let log = String::from_utf8_lossy(&bytes);
    let parser = match parser {
        Some(name) if names.contains(&name) => name.to_string(),
        Some(name) => {
            return Err(Failure::new(
                exit::USAGE,
                format!("unknown parser `{name}`; kiln knows: {}", names.join(", ")),
            ));
        }
        None => kiln_testlog::detect(&log, None)
            .ok_or_else(|| {
                Failure::new(
                    exit::INPUT,
                    format!(
                        "failed to recognise the format of {}; name a parser with --parser ({})",
                        path.display(),
                        names.join(", ")
                    ),
                )
            })?
            .to_string(),
    };
    let parsed = kiln_testlog::parse(&parser, &log)
        .map_err(|e| Failure::new(exit::USAGE, format!("failed to {e}")))?;
    let counts: std::collections::BTreeMap<&str, usize> = [
        kiln_schema::TestStatus::Pass,
        kiln_schema::TestStatus::Fail,
        kiln_schema::TestStatus::Skip,
        kiln_schema::TestStatus::Error,
    ]
    .into_iter()
    .map(|s| (s.as_str(), parsed.count(s)))
    .collect();
    if json {
        print_json(&serde_json::json!({
            "log": path, "parser": parser, "statuses": parsed.statuses, "counts": counts,
            "printed_totals": parsed.summary.map(|t| serde_json::json!({
                "passed": t.passed, "failed": t.failed, "skipped": t.skipped, "errors": t.errors})),
            "consistent": parsed.is_consistent(), "problems": parsed.problems,
        }))?;
        return Ok(exit::OK);
    }
    for (id, status) in &parsed.statuses {
        println!("{:<5} {id}", status.as_str());
    }
    println!(
        "\n{} tests by parser {parser}: {}",
        parsed.statuses.len(),
        counts
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    match parsed.summary {
        Some(t) => println!(
            "the log's own totals: passed={} failed={} skipped={} errors={}",
            t.passed, t.failed, t.skipped, t.errors
        ),
        None => println!("the log prints no totals to check against"),
    }
    if parsed.is_consistent() {
        println!("consistent: the statuses agree with the totals");
    } else {
        for problem in &parsed.problems {
            println!("problem: {problem}");
        }
        println!("inconsistent: validation would reject a run with this log as an invalid run");
    }
    Ok(exit::OK)
}

fn list_repairs(json: bool) -> Result<(), Failure> {
    let table = kiln_launch::rule_table();
    let scope = |ecosystems: &[kiln_launch::Ecosystem]| {
        if kiln_launch::applies_everywhere(ecosystems) {
            "any".to_string()
        } else {
            ecosystems
                .iter()
                .map(|e| e.name())
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    if json {
        let rules: Vec<serde_json::Value> = table
            .iter()
            .map(|(r, ecosystems)| {
                serde_json::json!({
                    "name": r.name, "scope": scope(ecosystems), "phase": r.phase.as_str(),
                    "step": r.target.describe(), "signature": r.signature,
                    "description": r.description,
                })
            })
            .collect();
        return print_json(&serde_json::json!({ "rules": rules }));
    }
    println!(
        "Repair rules, tried in this order within each ecosystem, each at most once per launch (a row's `repairs` says which ran):\n"
    );
    for (rule, ecosystems) in &table {
        println!(
            "{} ({} {}):",
            rule.name,
            scope(ecosystems),
            rule.phase.as_str()
        );
        println!("  {}", rule.description);
        if let Some(step) = rule.target.describe() {
            println!("  when the failing step is {step}");
        }
        println!("  signature: {}\n", rule.signature);
    }
    Ok(())
}

struct EvaluateArgs {
    dataset: PathBuf,
    predictions: PathBuf,
    output: Option<PathBuf>,
    only: Vec<String>,
    concurrency: usize,
    timeout: String,
    network: bool,
}

async fn evaluate(
    args: EvaluateArgs,
    reporter: Arc<dyn Reporter>,
    json: bool,
) -> Result<u8, Failure> {
    use kiln_pipeline::evaluate as eval;
    let timeout = kiln_core::config::parse_duration(&args.timeout)
        .map_err(|e| Failure::new(exit::USAGE, format!("--timeout: {e}")))?;
    let instances = eval::read_dataset(&args.dataset)?;
    let predictions = eval::read_predictions(&args.predictions)?;
    let engine = connect().await?;
    let stamp = kiln_store::time_id();
    let output = args
        .output
        .unwrap_or_else(|| PathBuf::from(format!("evaluation-{stamp}")));
    std::fs::create_dir_all(&output).map_err(|e| {
        Failure::new(
            exit::STORE,
            format!("failed to create {}: {e}", output.display()),
        )
    })?;
    let options = eval::EvaluateOptions {
        docker: kiln_core::config::DockerSettings::default(),
        concurrency: args.concurrency,
        timeout,
        network: if args.network {
            kiln_core::NetworkMode::Bridge
        } else {
            kiln_core::NetworkMode::None
        },
        log_dir: output.join("logs"),
        run_label: format!("evaluate/{stamp}"),
        only: (!args.only.is_empty()).then(|| args.only.into_iter().collect()),
    };
    let label = options.run_label.clone();
    let work = eval::evaluate_all(
        Arc::clone(&engine),
        instances,
        &predictions,
        &options,
        reporter,
    );
    let evaluations = tokio::select! {
        result = work => result?,
        () = shutdown_signal() => {
            let removed = engine.remove_labelled(LABEL_RUN, &label).await.unwrap_or(0);
            return Err(Failure::new(exit::INTERRUPTED, format!("interrupted; removed {removed} container(s)")));
        }
    };
    let summary = eval::summarize(&evaluations, predictions.len());
    let report = serde_json::json!({"summary": summary, "instances": evaluations});
    let report_path = output.join("report.json");
    let text = serde_json::to_vec_pretty(&report)
        .map_err(|e| Failure::new(exit::INTERNAL, e.to_string()))?;
    kiln_store::write_atomic(&report_path, &text)
        .map_err(|e| Failure::from(PipelineError::from(e)))?;
    if json {
        print_json(&report)?;
        return Ok(exit::OK);
    }
    for e in &evaluations {
        println!(
            "  {:<28} {:<20} {}",
            e.instance_id,
            e.resolution.as_str(),
            e.reason.as_deref().unwrap_or("")
        );
    }
    println!(
        "{} instances, {} predicted: {} ({:.1}% resolved)\nreport: {}",
        summary.total,
        summary.predicted,
        kiln_pipeline::counts_line(
            &summary
                .counts
                .iter()
                .map(|(k, v)| (k.clone(), *v as u64))
                .collect()
        ),
        summary.resolved_rate * 100.0,
        report_path.display()
    );
    Ok(exit::OK)
}

fn load(path: &Path) -> Result<Pipeline, Failure> {
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
fn check_environment(pipeline: &Pipeline, stage: Option<&str>) -> Result<(), Failure> {
    let names = stage.map(|s| vec![s]);
    let is_set = |name: &str| std::env::var(name).is_ok_and(|v| !v.trim().is_empty());
    pipeline
        .check_environment(names.as_deref(), &is_set)
        .map_err(|errors| {
            let count = errors.0.len();
            Failure::new(
                exit::CONFIG,
                format!("{count} problem(s) with what the pipeline config needs from this machine:\n{errors}"),
            )
        })
}

/// Connects to the engine when the pipeline (or the one stage asked for) runs containers.
async fn connect_if_needed(
    pipeline: &Pipeline,
    stage: Option<&str>,
) -> Result<Option<Arc<dyn ContainerRuntime>>, Failure> {
    let needs = pipeline
        .nodes
        .iter()
        .filter(|n| stage.is_none_or(|s| n.name == s))
        .any(kiln_core::config::Node::uses_engine);
    if !needs {
        return Ok(None);
    }
    connect().await.map(Some)
}

async fn connect() -> Result<Arc<dyn ContainerRuntime>, Failure> {
    match kiln_docker::DockerRuntime::connect().await {
        Ok(runtime) => Ok(Arc::new(runtime)),
        Err(e) => Err(Failure::new(
            exit::ENGINE,
            format!("failed to {e}{ENGINE_HINT}"),
        )),
    }
}

type Work<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), PipelineError>> + 'a>>;

/// Runs `work`, stopping it on Ctrl-C or SIGTERM: the in-flight items are dropped (their
/// sessions remove their containers), every container of the run is removed, and the run is
/// left `incomplete` so the next `kiln run` resumes it.
async fn run_interruptibly<'r>(
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

async fn shutdown_signal() {
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

fn print_json(value: &serde_json::Value) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, value)
        .map_err(|e| Failure::new(exit::INTERNAL, format!("failed to write JSON: {e}")))?;
    let _ = writeln!(out);
    Ok(())
}

/// The run `selection` names (the latest unless an id is given), opened for reading.
fn open_run(
    pipeline: &Pipeline,
    selection: &RunSelection,
) -> Result<kiln_store::RunStore, Failure> {
    let root = &pipeline.dataset.root;
    let name = &pipeline.dataset.name;
    let run_id = match selection {
        RunSelection::Id(id) => id.clone(),
        _ => kiln_store::latest(root, name)
            .map_err(|e| Failure::from(PipelineError::from(e)))?
            .ok_or_else(|| Failure::from(PipelineError::NoRun(name.clone())))?,
    };
    kiln_store::RunStore::open(root, name, &run_id)
        .map_err(|e| Failure::from(PipelineError::from(e)))
}

fn write_report(
    pipeline: &Pipeline,
    selection: &RunSelection,
    output: Option<PathBuf>,
    json: bool,
) -> Result<u8, Failure> {
    let run = open_run(pipeline, selection)?;
    let page = kiln_pipeline::report::render(pipeline, &run)?;
    let path = output.unwrap_or_else(|| run.dir().join("report.html"));
    kiln_store::write_atomic(&path, page.as_bytes())
        .map_err(|e| Failure::from(PipelineError::from(e)))?;
    if json {
        print_json(&serde_json::json!({"run_id": run.run_id(), "report": path}))?;
    } else {
        println!("{}", path.display());
    }
    Ok(exit::OK)
}

fn status(pipeline: Pipeline, selection: &RunSelection, json: bool) -> Result<u8, Failure> {
    let run = open_run(&pipeline, selection)?;
    let run_id = run.run_id().to_string();
    let stages = kiln_pipeline::stage_manifests(&pipeline, &run);
    if json {
        let stages: Vec<serde_json::Value> = stages
            .iter()
            .map(|(stage, manifest)| serde_json::json!({"stage": stage, "manifest": manifest}))
            .collect();
        let lm = kiln_pipeline::lm_spent(run.dir())?;
        print_json(
            &serde_json::json!({"run_id": run_id, "run_dir": run.dir(), "status": run.info().status, "stages": stages, "lm": lm}),
        )?;
        return Ok(exit::OK);
    }
    println!(
        "run {run_id} ({:?}) in {}",
        run.info().status,
        run.dir().display()
    );
    for (stage, manifest) in stages {
        match manifest {
            Some(m) => {
                println!(
                    "  {stage:<10} {:<10} {:>5} rows  {}",
                    format!("{:?}", m.status).to_lowercase(),
                    m.rows,
                    kiln_pipeline::counts_line(&m.counts)
                );
                if !m.stats.is_empty() {
                    println!("  {:<10} {}", "", kiln_pipeline::stats_line(&m.stats));
                }
            }
            None => println!("  {stage:<10} not started"),
        }
    }
    if let Some(spent) = kiln_pipeline::lm_spent(run.dir())? {
        println!("  {:<10} {}", "lm (run)", kiln_pipeline::spent_line(&spent));
    }
    Ok(exit::OK)
}

fn print_summary(runner: &Runner, json: bool) -> Result<(), Failure> {
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
        let detail = match s.state.as_str() {
            "validated" => format!(
                "{} FAIL_TO_PASS, {} PASS_TO_PASS{}",
                s.fail_to_pass.len(),
                s.pass_to_pass.len(),
                s.agreement
                    .as_ref()
                    .map(|a| format!("; published list: {a} (as strings/by meaning)"))
                    .unwrap_or_default()
            ),
            _ => [s.failure_class.clone(), s.reason.clone()]
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
            format!(
                "; {} left out as already published",
                release.duplicates.len()
            )
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
fn print_lm_lines(runner: &Runner, spent: Option<&kiln_pipeline::Spent>) {
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

struct DemoArgs {
    dir: PathBuf,
    repeats: u32,
    ca_bundle: Option<PathBuf>,
    lm_url: Option<String>,
    lm_model: Option<String>,
}

/// The demo's LM endpoint: the model given, or the first the endpoint lists.
async fn demo_lm(
    url: Option<String>,
    model: Option<String>,
) -> Result<Option<kiln_demo::DemoLm>, Failure> {
    let Some(base_url) = url else {
        return Ok(None);
    };
    let base_url = base_url.trim_end_matches('/').to_string();
    let model = match model {
        Some(model) => model,
        None => kiln_demo::first_model(&base_url).await.map_err(|e| {
            Failure::new(
                exit::INPUT,
                format!("failed to {e}; name one with --lm-model"),
            )
        })?,
    };
    Ok(Some(kiln_demo::DemoLm { base_url, model }))
}

async fn demo(args: DemoArgs, reporter: Arc<dyn Reporter>, json: bool) -> Result<u8, Failure> {
    let DemoArgs {
        dir,
        repeats,
        ca_bundle,
        lm_url,
        lm_model,
    } = args;
    let started = std::time::Instant::now();
    // The host's bundle is what its own tools trust; installing it in the images makes a
    // TLS-inspecting proxy work and changes nothing elsewhere.
    let host_bundle = PathBuf::from("/etc/ssl/certs/ca-certificates.crt");
    let ca_bundle = ca_bundle.or_else(|| host_bundle.exists().then_some(host_bundle));
    let engine = connect().await?;
    let lm = demo_lm(lm_url, lm_model).await?;
    let dir = std::path::absolute(dir).context("resolve the demo directory")?;
    let demo = kiln_demo::prepare_with_lm(&dir, ca_bundle.as_deref(), repeats, lm.as_ref())
        .map_err(|e| Failure::new(exit::INPUT, format!("failed to prepare the demo: {e}")))?;
    let pipeline = load(&demo.config_path)?;
    let mut options = RunOptions::default();
    options
        .secrets
        .insert(kiln_demo::DEMO_TOKEN_ENV, &demo.token);
    let client = kiln_pipeline::language_model(&pipeline, None, &options.secrets)?;
    let mut runner = with_lm(
        Runner::open(
            pipeline,
            &RunSelection::New,
            reporter,
            Some(Arc::clone(&engine)),
        )?,
        client,
    );
    run_interruptibly(&mut runner, Some(&engine), |r| {
        Box::pin(async move { r.run_all(&options).await.map(|_| ()) })
    })
    .await?;

    let run = kiln_store::RunStore::open_dir(&runner.run_dir())
        .map_err(|e| Failure::from(PipelineError::from(e)))?;
    let summaries = kiln_pipeline::instance_summaries(runner.pipeline(), &run)?;
    let release = runner.pipeline().dataset.root.join("demo").join("releases");
    let mut mismatches = Vec::new();
    let mut report = Vec::new();
    for expected in &demo.layout.instances {
        let summary = summaries
            .iter()
            .find(|s| s.instance_id == expected.instance_id.as_str());
        let verdict = match summary {
            Some(s) => kiln_demo::check_judged(&expected.expect, s, lm.is_some()),
            None => Err("no row in any stage".to_string()),
        };
        if let Err(why) = &verdict {
            mismatches.push(format!("{}: {why}", expected.instance_id));
        }
        report.push((expected.instance_id.clone(), summary.cloned(), verdict));
    }
    let count = |state: &str| {
        summaries
            .iter()
            .filter(|s| s.state.as_str() == state)
            .count()
    };
    let spent = kiln_pipeline::lm_spent(&runner.run_dir())?;
    let built = summaries
        .iter()
        .filter(|s| {
            matches!(
                s.state.as_str(),
                "validated" | "rejected" | "validate-failed"
            )
        })
        .count();
    if json {
        let instances: Vec<serde_json::Value> = report
            .iter()
            .map(|(id, s, v)| serde_json::json!({"instance_id": id, "summary": s, "as_expected": v.is_ok(), "mismatch": v.as_ref().err(), "judged": v.as_ref().ok().and_then(Option::as_ref)}))
            .collect();
        let stages: serde_json::Map<String, serde_json::Value> = runner
            .stage_manifests()
            .into_iter()
            .filter_map(|(stage, m)| m.map(|m| (stage, serde_json::json!(m.stats))))
            .collect();
        print_json(&serde_json::json!({
            "run_dir": runner.run_dir(), "release_dir": release, "seconds": started.elapsed().as_secs_f64(),
            "instances_in": summaries.len(), "built": built, "validated": count("validated"), "instances": instances,
            "lm": spent, "stage_stats": stages,
        }))?;
    } else {
        println!(
            "\nkiln demo: {} instances in, {built} built, {} validated, {} rejected, {} failed to launch ({:.0}s)",
            summaries.len(),
            count("validated"),
            count("rejected"),
            count("launch-failed"),
            started.elapsed().as_secs_f64()
        );
        for (id, summary, verdict) in &report {
            let mark = if verdict.is_ok() { "ok  " } else { "FAIL" };
            let detail = match summary {
                Some(s) if s.state == kiln_pipeline::InstanceState::Validated => format!(
                    "validated: FAIL_TO_PASS {:?}; {} PASS_TO_PASS",
                    s.fail_to_pass,
                    s.pass_to_pass.len()
                ),
                Some(s) => format!(
                    "{}: {}{}",
                    s.state,
                    s.failure_class.as_deref().unwrap_or("-"),
                    s.reason
                        .as_ref()
                        .map(|r| format!(" ({r})"))
                        .unwrap_or_default()
                ),
                None => "no row".into(),
            };
            println!("  [{mark}] {id:<24} {detail}");
            match verdict {
                Err(why) => println!("         expected otherwise: {why}"),
                Ok(Some(judged)) => println!("         {judged}"),
                Ok(None) => {}
            }
        }
        print_lm_lines(&runner, spent.as_ref());
        println!("release: {}", release.display());
        println!("run:     {} (logs under logs/)", runner.run_dir().display());
    }
    if mismatches.is_empty() {
        Ok(exit::OK)
    } else {
        Err(Failure::new(
            exit::DEMO_MISMATCH,
            format!(
                "{} instance(s) did not end as expected:\n{}",
                mismatches.len(),
                mismatches.join("\n")
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::{Cli, exit};

    #[test]
    fn usage_errors_exit_with_the_documented_code() {
        let error = Cli::try_parse_from(["kiln", "stage"]).err();
        assert_eq!(error.map(|e| e.exit_code()), Some(i32::from(exit::USAGE)));
    }

    #[test]
    fn help_lists_the_exit_codes() {
        let help = Cli::try_parse_from(["kiln", "--help"])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(help.contains("130  interrupted by Ctrl-C"), "{help}");
        assert!(help.contains("demo"), "{help}");
    }
}
