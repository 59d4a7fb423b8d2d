//! The command line: clap's definitions of `kiln` and its subcommands, and nothing else.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::exit;

/// `kiln` and its global options.
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
pub struct Cli {
    /// Pipeline config file.
    #[arg(
        long,
        short,
        global = true,
        default_value = "pipeline.toml",
        env = "KILN_CONFIG"
    )]
    pub config: PathBuf,
    /// Print data (status, summaries) as JSON on stdout and progress as JSON lines on stderr;
    /// an error is the last of them: `{"event":"error","exit_code":N,"message":...}`.
    #[arg(long, global = true)]
    pub json: bool,
    /// Show no progress.
    #[arg(long, short, global = true)]
    pub quiet: bool,
    /// Colour: on a terminal unless NO_COLOR is set (auto), always, or never.
    #[arg(long, global = true, value_enum, default_value_t = crate::paint::ColorChoice::Auto)]
    pub color: crate::paint::ColorChoice,
    /// More log output on stderr (-v: debug, -vv: trace); RUST_LOG overrides.
    #[arg(long, short, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// The subcommand.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Subcommand)]
pub enum Command {
    /// Run every stage of the pipeline, resuming the latest run if it is unfinished.
    Run(RunArgs),

    /// The monthly refresh: crawl the merged pull requests of one month, build and validate
    /// them, and publish the release tagged with the month, without the instances earlier
    /// releases hold. The config needs a crawl source; its window and the export's tag are set
    /// to the month. Safe to re-run: an interrupted refresh of the month resumes, a finished one
    /// adds only what is new to the month's release.
    Refresh(RefreshArgs),

    /// Push a release to a Hugging Face Hub dataset repository in one commit (under
    /// `releases/<tag>/`, with a root card whose default config joins every release), and its
    /// environment images to the registry the release names. The token is read from HF_TOKEN
    /// (or HUGGING_FACE_HUB_TOKEN), the Hub's address from HF_ENDPOINT. Pushing a release again
    /// sends only what the Hub does not hold.
    Push(PushArgs),

    /// Run one stage of the latest run (or --run), reading its inputs from disk.
    Stage(StageArgs),

    /// Show the stages of the latest run (or --run): status, rows, outcomes.
    Status(StatusArgs),

    /// Write one HTML page about a run (default: the latest), with no external assets: the
    /// funnel through the stages, outcome by language, failure classes, time per instance and
    /// per stage, LM tokens and cost.
    Report(ReportArgs),

    /// Validate the pipeline config and report every problem at once.
    Check,

    /// Print the stage graph in Graphviz DOT.
    Graph,

    /// Read a test log as launch and validate do: the status of every test, the totals the
    /// framework printed, and whether the two agree (a run whose totals disagree is rejected as
    /// an invalid run). The format is detected from the log unless --parser names one.
    Parse(ParseArgs),

    /// List the repair rules launch tries, once each, before it declares a build failed.
    Repairs,

    /// List the dataset's recipes: what the launch agent learned per repository (packages,
    /// variables, commands, test command, parser), replayed where the rules stop before any LM
    /// call. Each is a JSON file under <root>/<dataset>/recipes/ that may be read, edited or
    /// committed.
    Recipes,

    /// Evaluate predicted patches (SWE-bench's `{instance_id, model_patch}` format) against a
    /// release: per instance resolved, partial, unresolved, patch-apply failure or infra failure.
    /// Exits 0 when every instance was evaluated, however many resolved (the report and the
    /// last line give the counts); predictions for instances the release lacks are a warning.
    Evaluate(EvaluateArgs),

    /// Check the environment images a release names: each exists on the engine (or is pulled
    /// from its registry) and is the image its row recorded (`image_digest`); with --rebuild,
    /// each also rebuilds from its Dockerfile into an environment whose tests end as the row
    /// says. One line per instance; exits 0 when every image is good, 6 when one is missing,
    /// changed or not reproduced.
    CheckImages(CheckImagesArgs),

    /// Remove the dataset's environment images that nothing refers to: not named by a release
    /// of the dataset, not the environment of a run in progress or of the --keep-last most
    /// recent runs. --dry-run lists exactly what would go and the bytes it holds.
    Gc(GcArgs),

    /// Join the shard runs of a split run (`kiln run --shard I/N`) into one run of the dataset,
    /// every item exactly once; an item in two shards, a missing or unfinished shard, or shards
    /// of another config are reported with the shard and item, and nothing is merged. Then
    /// `kiln run` (or --export) writes the release from the merged run.
    Merge(MergeArgs),

    /// Write the job that runs a split run on a cluster engine: a Slurm job array or a
    /// Kubernetes Indexed Job, each with the merge as a job of its own.
    Deploy(DeployArgs),

    /// Build the fixture projects and run the whole pipeline on them with the local Docker engine.
    Demo(DemoArgs),
}

/// The arguments of `kiln gc`.
#[derive(Debug, Args)]
pub struct GcArgs {
    /// List what would be removed, and remove nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Keep the environments of this many most recent runs (runs in progress keep theirs too).
    #[arg(long, default_value_t = 1)]
    pub keep_last: usize,
    /// Also remove kiln images no dataset can use: those whose dataset directory no longer
    /// exists (any dataset), base images a newer build of the same name and version replaced
    /// (unless an image is made from one or a kept row names it), untagged images failed
    /// or killed builds left behind, and system layers (`kiln/layer:*`) no image is made from.
    /// Without it, a system layer goes only with the last image made from it.
    #[arg(long)]
    pub orphans: bool,
    /// Leave alone the images that are not this dataset's own (what --orphans removes, and
    /// system layers) until they are this old: a build of another kiln process on the same
    /// engine may be about to start its next step from one. Images a container (a build's
    /// running step included) was made from, or made from the image of a container that
    /// exists, always stay.
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = kiln_core::config::parse_duration)]
    pub min_age: std::time::Duration,
}

/// The arguments of `kiln check-images`.
#[derive(Debug, Args)]
pub struct CheckImagesArgs {
    /// A release directory (its `data/*.parquet`) or one Parquet file.
    #[arg(long)]
    pub release: PathBuf,
    /// Do not pull images the engine lacks from their registry.
    #[arg(long)]
    pub no_pull: bool,
    /// Also rebuild every row's environment from its Dockerfile (the repository at its base
    /// commit, cloned with the config's clone_url, as the build context) and check that its
    /// tests end as the row says: without the fix every FAIL_TO_PASS test fails and every
    /// PASS_TO_PASS test passes, with the gold patch the row is resolved.
    #[arg(long)]
    pub rebuild: bool,
    /// Only these instances (repeatable; with --rebuild).
    #[arg(long = "only", value_name = "INSTANCE_ID", value_parser = instance_id)]
    pub only: Vec<kiln_schema::InstanceId>,
    /// Timeout of each test run of --rebuild.
    #[arg(long, default_value = "30m")]
    pub timeout: String,
}

/// The arguments of `kiln run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Start a new run even if the latest one is unfinished.
    #[arg(long, conflicts_with = "run")]
    pub new: bool,
    /// Resume this run id instead of the latest.
    #[arg(long)]
    pub run: Option<String>,
    /// Items built or validated at once (overrides the config).
    #[arg(long)]
    pub concurrency: Option<usize>,
    /// Let the export replace its release with this run's rows alone (by default the release
    /// keeps the rows of earlier runs that this run did not make).
    #[arg(long)]
    pub allow_fewer_rows: bool,
    /// Do one shard of a split run: INDEX/COUNT (from 0, e.g. 0/4), or `auto` inside a Slurm
    /// job array (SLURM_ARRAY_TASK_ID) or a Kubernetes Indexed Job (JOB_COMPLETION_INDEX with
    /// KILN_SHARD_COUNT). The shard takes the repositories the shared plan gives it, keeps its
    /// run under <root>/<dataset>/shards/of-COUNT/INDEX/ and resumes it there; it stops before
    /// export, which runs on what `kiln merge` makes of all the shards.
    #[arg(long, value_name = "INDEX/COUNT|auto")]
    pub shard: Option<String>,
}

/// The arguments of `kiln refresh`.
#[derive(Debug, Args)]
pub struct RefreshArgs {
    /// The month, YYYY-MM.
    #[arg(long, value_parser = parse_month)]
    pub month: String,
    /// Items built or validated at once (overrides the config).
    #[arg(long)]
    pub concurrency: Option<usize>,
    /// Then push the month's release to this Hugging Face dataset repository (see `kiln
    /// push`).
    #[arg(long, value_name = "NAMESPACE/NAME", conflicts_with = "shard")]
    pub push: Option<String>,
    /// Do one shard of a split run: INDEX/COUNT (from 0, e.g. 0/4), or `auto` inside a Slurm
    /// job array (SLURM_ARRAY_TASK_ID) or a Kubernetes Indexed Job (JOB_COMPLETION_INDEX with
    /// KILN_SHARD_COUNT). The shard takes the repositories the shared plan gives it, keeps its
    /// run under <root>/<dataset>/shards/of-COUNT/INDEX/ and resumes it there; it stops before
    /// export, which runs on what `kiln merge` makes of all the shards.
    #[arg(long, value_name = "INDEX/COUNT|auto")]
    pub shard: Option<String>,
}

/// The arguments of `kiln push`.
#[derive(Debug, Args)]
pub struct PushArgs {
    /// The release directory (`datasets/<name>/releases/<tag>`).
    #[arg(long)]
    pub release: PathBuf,
    /// The dataset repository, `namespace/name`.
    #[arg(long, value_name = "NAMESPACE/NAME")]
    pub repo: String,
    /// Create the repository private (when it does not exist yet).
    #[arg(long)]
    pub private: bool,
    /// Show what would be pushed; send nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Send the release's Harbor tasks (`harbor/`, written when the export's `formats` lists
    /// "harbor") too; without it they are neither sent nor deleted on the Hub.
    #[arg(long)]
    pub harbor: bool,
}

/// The arguments of `kiln stage`.
#[derive(Debug, Args)]
pub struct StageArgs {
    /// Stage name, as declared in the config.
    pub name: String,
    /// Only these instance ids (repeatable).
    #[arg(long = "only", value_name = "INSTANCE_ID", value_parser = instance_id)]
    pub only: Vec<kiln_schema::InstanceId>,
    /// Redo items that already have rows: with --only just those, otherwise the whole stage.
    #[arg(long)]
    pub force: bool,
    /// Run id (default: the latest run).
    #[arg(long)]
    pub run: Option<String>,
    /// Items processed at once (overrides the config).
    #[arg(long)]
    pub concurrency: Option<usize>,
    /// Let an export replace its release with this run's rows alone (by default the release
    /// keeps the rows of earlier runs that this run did not make).
    #[arg(long)]
    pub allow_fewer_rows: bool,
    /// The shard whose run to work on (INDEX/COUNT or auto, as `kiln run --shard`).
    #[arg(long, value_name = "INDEX/COUNT|auto")]
    pub shard: Option<String>,
}

/// The arguments of `kiln status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Run id (default: the latest run).
    #[arg(long, conflicts_with_all = ["shards", "root"])]
    pub run: Option<String>,
    /// Show the shards of split runs instead: every shard's stages, the stragglers, the totals.
    #[arg(long)]
    pub shards: bool,
    /// The shared dataset root the shards write under (default: `[dataset] root` of the
    /// config); implies --shards.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
}

/// The arguments of `kiln merge`.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// How many shards the run was split into (`--shard I/COUNT`).
    #[arg(long, value_name = "COUNT")]
    pub shards: u32,
    /// The month the shards refreshed (`kiln refresh --month M --shard ...`).
    #[arg(long, value_parser = parse_month)]
    pub month: Option<String>,
    /// Then run what the merged run has left (its export), as `kiln run` would.
    #[arg(long)]
    pub export: bool,
    /// While shards are still at work or not started, wait for them (checking every 30
    /// seconds) instead of failing; problems no waiting mends still fail at once.
    #[arg(long)]
    pub wait: bool,
}

/// The arguments of `kiln deploy`.
#[derive(Debug, Args)]
pub struct DeployArgs {
    /// Which cluster engine.
    #[command(subcommand)]
    pub engine: DeployEngine,
}

/// The cluster engines `kiln deploy` writes jobs for.
#[derive(Debug, Subcommand)]
pub enum DeployEngine {
    /// An `sbatch --array` script: one task per shard (`kiln run --shard auto`), then `kiln
    /// merge --export` as a job that waits for the array (`--dependency=afterany`). Submit it
    /// with `bash FILE` (it calls sbatch twice).
    Slurm(SlurmArgs),
    /// A Kubernetes Indexed Job (one pod per shard, `kiln run --shard auto`) and the Job that
    /// merges and exports, as one YAML file for `kubectl apply -f`.
    K8s(K8sArgs),
}

/// What both engines' jobs need.
#[derive(Debug, Args)]
pub struct DeployCommon {
    /// How many shards.
    #[arg(long, value_name = "COUNT")]
    pub shards: u32,
    /// Where to write the job (default: standard output).
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// The config the jobs run, as the nodes see it (default: --config made absolute).
    #[arg(long, value_name = "PATH")]
    pub job_config: Option<PathBuf>,
}

/// The arguments of `kiln deploy slurm`.
#[derive(Debug, Args)]
pub struct SlurmArgs {
    #[command(flatten)]
    pub common: DeployCommon,
    /// The kiln binary on the nodes (default: this one's path).
    #[arg(long, value_name = "PATH")]
    pub kiln: Option<PathBuf>,
    /// Slurm partition (default: the cluster's default).
    #[arg(long)]
    pub partition: Option<String>,
    /// Time limit of each task, as sbatch reads it (e.g. 12:00:00).
    #[arg(long, default_value = "24:00:00")]
    pub time: String,
    /// Shards that run at once (`--array=0-N%K`; default: all).
    #[arg(long, value_name = "K")]
    pub at_once: Option<u32>,
    /// DOCKER_HOST for the tasks (e.g. unix:///run/user/1000/podman/podman.sock); default:
    /// the node's.
    #[arg(long, value_name = "URL")]
    pub docker_host: Option<String>,
    /// CPUs each task reserves (default: from the config, launch and validate concurrency
    /// times `[docker] cpus`, plus one).
    #[arg(long, value_name = "N")]
    pub cpus: Option<u32>,
    /// Memory each task reserves, e.g. 4g (default: from the config, concurrency times
    /// `[docker] memory`, plus 1 GiB).
    #[arg(long, value_name = "SIZE", value_parser = parse_memory)]
    pub mem: Option<i64>,
}

fn parse_memory(text: &str) -> Result<i64, String> {
    kiln_core::config::parse_size(text)
}

/// The arguments of `kiln deploy k8s`.
#[derive(Debug, Args)]
pub struct K8sArgs {
    #[command(flatten)]
    pub common: DeployCommon,
    /// The kiln image the pods run (built from the repository's Dockerfile).
    #[arg(long)]
    pub image: String,
    /// The PersistentVolumeClaim holding the shared dataset root (ReadWriteMany).
    #[arg(long, value_name = "NAME")]
    pub volume_claim: String,
    /// Where the claim is mounted in the pods; the config's `[dataset] root` must be under it.
    #[arg(long, value_name = "DIR", default_value = "/data")]
    pub mount: PathBuf,
    /// The Job's name (the merge Job is NAME-merge).
    #[arg(long, default_value = "kiln")]
    pub name: String,
    /// Retries of one shard's pod after an engine failure (`backoffLimitPerIndex`).
    #[arg(long, default_value_t = 3)]
    pub retries: u32,
}

/// The arguments of `kiln report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Run id (default: the latest run).
    #[arg(long)]
    pub run: Option<String>,
    /// Where to write the page (default: report.html in the run directory).
    #[arg(long)]
    pub output: Option<PathBuf>,
}

/// The arguments of `kiln parse`.
#[derive(Debug, Args)]
pub struct ParseArgs {
    /// The log file (a command's output, as under the run's logs/).
    pub log: PathBuf,
    /// Parser to use (`pytest`, `cargo`, `go-test-json`, `junit-xml`, `jest-json`, ...;
    /// an unknown name lists them).
    #[arg(long)]
    pub parser: Option<String>,
}

/// The arguments of `kiln evaluate`.
#[derive(Debug, Args)]
pub struct EvaluateArgs {
    /// A release directory (its `data/*.parquet`) or one Parquet file.
    #[arg(long)]
    pub dataset: PathBuf,
    /// Predictions: a JSON array, a JSON object keyed by instance id, or JSONL.
    #[arg(long)]
    pub predictions: PathBuf,
    /// Where the report and logs go (default: ./evaluation-<time>).
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Only these instance ids (repeatable).
    #[arg(long = "only", value_name = "INSTANCE_ID", value_parser = instance_id)]
    pub only: Vec<kiln_schema::InstanceId>,
    /// Instances evaluated at once.
    #[arg(long, default_value_t = 2)]
    pub concurrency: usize,
    /// Timeout of each test run, e.g. "30m".
    #[arg(long, default_value = "30m")]
    pub timeout: String,
    /// Give the test containers the network (default: loopback only).
    #[arg(long)]
    pub network: bool,
}

/// The arguments of `kiln demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Directory for the fixtures, the config and the datasets (replaced if it holds an earlier demo).
    #[arg(long, default_value = "kiln-demo")]
    pub dir: PathBuf,
    /// Runs per side in validation.
    #[arg(long, default_value_t = 3)]
    pub repeats: u32,
    /// CA bundle to install in the images (default: the host's bundle, if present).
    #[arg(long)]
    pub ca_bundle: Option<PathBuf>,
    /// Judge the filter and split with this OpenAI-compatible endpoint (base URL up to
    /// `/v1`), and turn the launch agent on, with a fifth fixture only the agent can build
    /// (its tests need a system package and an environment variable no file names); the key
    /// is read from OPENAI_API_KEY when it is set. Without it the demo asks no LM.
    #[arg(long, value_name = "URL")]
    pub lm_url: Option<String>,
    /// Model to ask at --lm-url (default: the first the endpoint lists).
    #[arg(long, value_name = "NAME", requires = "lm_url")]
    pub lm_model: Option<String>,
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

/// An instance id as `--only` takes it: checked here, where it enters, and typed from there on.
fn instance_id(text: &str) -> Result<kiln_schema::InstanceId, String> {
    kiln_schema::InstanceId::new(text).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::Cli;
    use crate::exit;

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
