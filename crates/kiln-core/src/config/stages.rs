//! Stages: the nodes that read other nodes' tables.

use std::time::Duration;

use serde::Serialize;

use super::lm::LmSettings;
use super::read::{Compiler, Keys, Need, Value, cut};

/// Settings of a `filter` stage.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FilterSettings {
    /// `heuristic` (the default, no LM) or `lm` (the `[lm]` endpoint judges, the heuristic
    /// judge stands in where no usable answer comes).
    pub judge: String,
    /// Smallest problem statement, in characters, the heuristic judge keeps.
    pub min_problem_chars: i64,
    /// Largest gold patch, in changed lines, either judge keeps.
    pub max_patch_lines: i64,
    /// Answers asked per candidate (LM judge); the majority label decides.
    pub votes: i64,
    /// Models that vote in turn (LM judge); `[lm] model` when the config names none.
    pub models: Vec<String>,
    /// Confounder flags that drop a candidate the judge would keep.
    pub drop_flags: Vec<String>,
    /// The endpoint, for the LM judge. Part of the settings so that answers from another
    /// endpoint or model make the stage start over.
    pub lm: Option<LmSettings>,
}

/// Settings of a `split` stage.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SplitSettings {
    /// Platforms that go on to launch.
    pub keep: Vec<String>,
    /// `keyword` (the default) or `lm`: the LM is asked where the keyword evidence is mixed.
    pub judge: String,
    /// The model asked (LM split); `[lm] model` when the config names none.
    pub model: Option<String>,
    /// The endpoint, for the LM split.
    pub lm: Option<LmSettings>,
}

/// Settings of a `launch` stage.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LaunchSettings {
    /// Instances built at once.
    pub concurrency: i64,
    /// Timeout of each setup command.
    pub command_timeout: Duration,
    /// Timeout of the test command.
    pub test_timeout: Duration,
    /// Timeout of one test, where the runner can stop one test and go on with the others
    /// (pytest, through kiln's plugin; CTest's `--timeout`): a test that hangs before the fix
    /// fails after this instead of holding every run until `test_timeout`. Zero: none.
    pub case_timeout: Duration,
    /// Share of parsed tests that must pass for a build to count.
    pub min_pass_ratio: f64,
    /// Resolve unpinned dependencies as of the base commit's date.
    pub date_cutoff: bool,
    /// Rebuild each environment from its synthesised Dockerfile and re-run the tests.
    pub verify_dockerfile: bool,
    /// Which tests the recorded test command runs: `touched` (the test files the instance's
    /// test patch touches, where the runner can select files, as the SWE-bench harness does),
    /// `all` (the whole suite), or `auto` (the whole suite unless it is large).
    pub test_scope: String,
    /// Try the repository's recipes (`<dataset>/recipes/`) before any LM call, and store one
    /// when the agent builds an environment.
    pub recipes: bool,
    /// Start an instance from the environment of an earlier commit of its repository (one whose
    /// base commit is an ancestor of its own, built in this run or an earlier one of the
    /// dataset): the checkout replaced, build outputs and installed dependencies kept, the
    /// setup steps run again and the same verification; a failure launches cold. On unless
    /// the stage says `reuse = false`.
    pub reuse: bool,
    /// With `reuse`: launch every Nth reused instance cold as well (the first, the N+1th, ...)
    /// and compare the baselines test by test (the row's `reuse_check`, the stage's `reuse.*`
    /// figures); 0: never. 10 unless the stage says otherwise: only this check sees a reused
    /// environment that ends otherwise than a cold one.
    pub verify_reuse: i64,
    /// Network of the baseline test run (setup steps always have the network).
    #[serde(flatten)]
    pub tests: TestNetwork,
    /// The launch agent, when `agent = true`: it takes over where the rules and repairs
    /// stopped.
    pub agent: Option<AgentSettings>,
}

/// Settings of the launch agent (`[stages.<launch>] agent = true` with an `[lm]` table).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentSettings {
    /// The model asked (`agent_model`; `[lm] model` when the config names none).
    pub model: String,
    /// Turns (answers) per instance.
    pub max_steps: i64,
    /// Prompt and completion tokens per instance.
    pub max_tokens: i64,
    /// Dollars per instance (the run's budget is `[lm] max_cost_usd`).
    pub max_cost_usd: f64,
    /// Wall time per instance, commands included.
    pub timeout: Duration,
    /// Timeout of each command the agent runs.
    pub command_timeout: Duration,
    /// The endpoint. Part of the settings so that another endpoint or model starts the stage
    /// over.
    pub lm: LmSettings,
}

/// Settings of a `validate` stage.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ValidateSettings {
    /// Runs per side.
    pub repeats: i64,
    /// Instances validated at once.
    pub concurrency: i64,
    /// Timeout of each test run.
    pub test_timeout: Duration,
    /// Network of the test containers.
    #[serde(flatten)]
    pub tests: TestNetwork,
    /// Also run the tests once on the untouched base commit, to catch regressions the test
    /// patch hides (a test it skips or removes that the gold patch breaks).
    pub base_run: bool,
    /// The share of the tests the test patch's files define that the runs with the gold patch
    /// must report (kiln-validate's `quality::tests_collected`); 0 turns the check off.
    pub min_collected: f64,
    /// Where launch narrowed the tests (`test_scope`), one validated row in this many (by a
    /// hash of its id) also runs the whole suite once with the test patch and once with both
    /// patches, and names the tests outside the scope the fix breaks; 0 turns it off.
    pub full_suite_every: i64,
}

/// The network of a stage's test runs (`network`, `network_repos`): none but loopback unless
/// the stage says otherwise, for every repository or for the ones named.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TestNetwork {
    /// `none` (loopback only, the default) or `bridge`.
    pub network: String,
    /// Repositories (`owner/name`) whose tests need the network.
    pub network_repos: Vec<String>,
}

impl Default for TestNetwork {
    fn default() -> Self {
        Self {
            network: "none".into(),
            network_repos: Vec::new(),
        }
    }
}

impl TestNetwork {
    /// The network the tests of `repo` run on.
    #[must_use]
    pub fn for_repo(&self, repo: &str) -> crate::NetworkMode {
        if self.network == "bridge" || self.network_repos.iter().any(|r| r == repo) {
            crate::NetworkMode::Bridge
        } else {
            crate::NetworkMode::None
        }
    }
}

/// Settings of an `export` stage.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExportSettings {
    /// Split name of the release shards.
    pub split: String,
    /// Release tag; empty means the run's month (`YYYY-MM`).
    pub tag: String,
    /// Rows per Parquet shard.
    pub rows_per_shard: i64,
    /// The card's `license` (a Hugging Face licence id such as `mit` or `cc-by-4.0`); empty
    /// leaves it out.
    pub license: String,
    /// Registry (and namespace) the environment images are pushed to, such as
    /// `registry.example.com/team`; rows then name `<registry>/<local image>`. Empty: rows name
    /// the local image.
    pub image_registry: String,
    /// Splits that keep the same rows in every release, by name.
    pub frozen: Vec<FrozenSplit>,
    /// What the release is written as: always Parquet, and Harbor task directories when
    /// listed.
    pub formats: Vec<ExportFormat>,
    /// Whether a Harbor task's `instruction.md` holds the hints (the comments before
    /// the fix) after the problem statement.
    pub harbor_hints: bool,
}

impl ExportSettings {
    /// Whether the release is written in `format` too.
    #[must_use]
    pub fn writes(&self, format: ExportFormat) -> bool {
        self.formats.contains(&format)
    }
}

/// A form a release is written in (`[stages.<export>] formats`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExportFormat {
    /// The Parquet shards, the dataset card and `release.json` (always written).
    Parquet,
    /// A Harbor task directory per row under `harbor/<instance_id>/`.
    Harbor,
}

impl ExportFormat {
    /// Every format, as the config names them.
    pub const ALL: [Self; 2] = [Self::Parquet, Self::Harbor];

    /// The name the config uses.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Parquet => "parquet",
            Self::Harbor => "harbor",
        }
    }
}

/// A split whose rows, once chosen, are the same in every later release of the dataset.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FrozenSplit {
    /// Split name (`lite`, `verified`).
    pub name: String,
    /// How its instances are chosen.
    pub choice: FrozenChoice,
}

/// How a frozen split's instances are chosen.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FrozenChoice {
    /// `size` instances of the first release that has any, drawn with `seed`, then kept.
    Sample {
        /// Instances drawn.
        size: i64,
        /// Seed of the draw.
        seed: i64,
    },
    /// The instances listed in a file the user keeps (one id per line, `#` comments), each
    /// with the row of the release that first published it.
    Ids {
        /// The list file.
        path: std::path::PathBuf,
    },
}

/// Keys of a `filter` stage.
pub(super) const FILTER_KEYS: &[&str] = &[
    "kind",
    "inputs",
    "judge",
    "min_problem_chars",
    "max_patch_lines",
    "votes",
    "models",
    "drop_flags",
];

/// Keys of a `split` stage.
pub(super) const SPLIT_KEYS: &[&str] = &["kind", "inputs", "keep", "judge", "model"];

/// Keys of a `launch` stage.
pub(super) const LAUNCH_KEYS: &[&str] = &[
    "kind",
    "inputs",
    "concurrency",
    "command_timeout",
    "test_timeout",
    "case_timeout",
    "min_pass_ratio",
    "date_cutoff",
    "verify_dockerfile",
    "test_scope",
    "recipes",
    "reuse",
    "verify_reuse",
    "network",
    "network_repos",
    "agent",
    "agent_model",
    "agent_max_steps",
    "agent_max_tokens",
    "agent_max_cost_usd",
    "agent_timeout",
    "agent_command_timeout",
];

/// Keys of a `validate` stage.
pub(super) const VALIDATE_KEYS: &[&str] = &[
    "kind",
    "inputs",
    "repeats",
    "concurrency",
    "test_timeout",
    "network",
    "network_repos",
    "base_run",
    "min_collected",
    "full_suite_every",
];

/// Keys of an `export` stage.
pub(super) const EXPORT_KEYS: &[&str] = &[
    "kind",
    "inputs",
    "split",
    "tag",
    "rows_per_shard",
    "license",
    "image_registry",
    "frozen",
    "formats",
    "harbor_hints",
];

/// Keys of a `[stages.<export>.frozen.<split>]` table.
const FROZEN_KEYS: &[&str] = &["sample", "seed", "ids"];

impl Compiler<'_> {
    /// Compiles a `filter` stage's keys ([`FILTER_KEYS`]); `lm` is the `[lm]` table as
    /// compiled (`None` when absent, `Err` when it had errors).
    pub(super) fn filter(
        &mut self,
        keys: &mut Keys<'_, '_>,
        lm: Option<&Result<LmSettings, ()>>,
    ) -> Result<FilterSettings, ()> {
        let judge_at = keys.get("judge").map_or(keys.at, |v| v.span().start);
        let judge = self.one_of(keys, "judge", "heuristic", &["heuristic", "lm"]);
        let min = self.read(keys, "min_problem_chars", 20, 0..=1_000_000);
        let max_patch_lines = self.read(keys, "max_patch_lines", 2000, 1..=100_000_000);
        let votes_given = keys.get("votes").map(|v| v.span().start);
        let votes = self.read(keys, "votes", 1, 1..=15);
        let models_given = keys.get("models").map(|v| v.span().start);
        let models = self.strings(keys, "models");
        let drop_flags_at = keys.get("drop_flags").map_or(keys.at, |v| v.span().start);
        let drop_flags = self.strings(keys, "drop_flags");
        if let Ok(flags) = &drop_flags {
            for flag in flags {
                if !kiln_schema::CONFOUNDER_FLAGS.contains(&flag.as_str()) {
                    let path = keys.path("drop_flags");
                    self.error_at(
                        drop_flags_at,
                        &path,
                        format!(
                            "unknown flag \"{}\"; expected one of: {}",
                            cut(flag),
                            kiln_schema::CONFOUNDER_FLAGS.join(", ")
                        ),
                    );
                }
            }
        }
        let judge = judge?;
        let mut models = models?;
        let lm = if judge == "lm" {
            let lm = self.lm_for(keys, judge_at, lm)?;
            if models.is_empty() {
                models.push(lm.model.clone());
            }
            let at = models_given.unwrap_or(judge_at);
            let key = keys.path(if models_given.is_some() {
                "models"
            } else {
                "judge"
            });
            self.check_prices(&lm, &models, at, &key)?;
            Some(lm)
        } else {
            for (given, key) in [(votes_given, "votes"), (models_given, "models")] {
                if let Some(at) = given {
                    let path = keys.path(key);
                    self.error_at(at, &path, "applies only to judge = \"lm\"".into());
                }
            }
            None
        };
        Ok(FilterSettings {
            judge,
            min_problem_chars: min?,
            max_patch_lines: max_patch_lines?,
            votes: votes?,
            models,
            drop_flags: drop_flags?,
            lm,
        })
    }

    /// The `[lm]` settings for a stage whose judge is `lm`; an error at `judge` without them.
    fn lm_for(
        &mut self,
        keys: &Keys<'_, '_>,
        judge_at: usize,
        lm: Option<&Result<LmSettings, ()>>,
    ) -> Result<LmSettings, ()> {
        match lm {
            Some(Ok(lm)) => Ok(lm.clone()),
            Some(Err(())) => Err(()),
            None => {
                let path = keys.path("judge");
                self.error_at(
                    judge_at,
                    &path,
                    "judge \"lm\" needs an [lm] table with `base_url` and `model`".into(),
                );
                Err(())
            }
        }
    }

    /// Compiles a `split` stage's keys ([`SPLIT_KEYS`]); `lm` as for [`Compiler::filter`].
    pub(super) fn split(
        &mut self,
        keys: &mut Keys<'_, '_>,
        lm: Option<&Result<LmSettings, ()>>,
    ) -> Result<SplitSettings, ()> {
        let judge_at = keys.get("judge").map_or(keys.at, |v| v.span().start);
        let judge = self.one_of(keys, "judge", "keyword", &["keyword", "lm"]);
        let model_at = keys.get("model").map(|v| v.span().start);
        let model = match self.string(keys, "model") {
            None => Ok(None),
            Some(Some(m)) => Ok(Some(m)),
            Some(None) => Err(()),
        };
        let keep_value = keys.get("keep");
        let keep = self.strings(keys, "keep")?;
        let keep = if keep.is_empty() && keep_value.is_none() {
            vec!["linux".to_string()]
        } else {
            keep
        };
        for platform in &keep {
            if !["linux", "windows", "macos"].contains(&platform.as_str()) {
                let at = keep_value.map_or(keys.at, |v| v.span().start);
                let path = keys.path("keep");
                self.error_at(
                    at,
                    &path,
                    format!(
                        "unknown platform \"{}\"; expected linux, windows or macos",
                        cut(platform)
                    ),
                );
                return Err(());
            }
        }
        let judge = judge?;
        let mut model = model?;
        let lm = if judge == "lm" {
            let lm = self.lm_for(keys, judge_at, lm)?;
            let asked = model.get_or_insert_with(|| lm.model.clone()).clone();
            let key = keys.path(if model_at.is_some() { "model" } else { "judge" });
            self.check_prices(&lm, &[asked], model_at.unwrap_or(judge_at), &key)?;
            Some(lm)
        } else {
            if let Some(at) = model_at {
                let path = keys.path("model");
                self.error_at(at, &path, "applies only to judge = \"lm\"".into());
            }
            None
        };
        Ok(SplitSettings {
            keep,
            judge,
            model,
            lm,
        })
    }

    /// Compiles a `launch` stage's keys ([`LAUNCH_KEYS`]); `lm` as for [`Compiler::filter`].
    pub(super) fn launch(
        &mut self,
        keys: &mut Keys<'_, '_>,
        lm: Option<&Result<LmSettings, ()>>,
    ) -> Result<LaunchSettings, ()> {
        let concurrency = self.read(keys, "concurrency", 2, 1..=256);
        let command_timeout = self.read(keys, "command_timeout", Duration::from_secs(30 * 60), ..);
        let test_timeout = self.read(keys, "test_timeout", Duration::from_secs(30 * 60), ..);
        let case_timeout = self.read(keys, "case_timeout", Duration::from_secs(5 * 60), ..);
        let min_pass_ratio = self.read(keys, "min_pass_ratio", 0.5, 0.0..=1.0);
        let date_cutoff = self.read(keys, "date_cutoff", true, ..);
        let verify_dockerfile = self.read(keys, "verify_dockerfile", false, ..);
        let test_scope = self.one_of(keys, "test_scope", "auto", &["auto", "touched", "all"]);
        let recipes = self.read(keys, "recipes", true, ..);
        let reuse = self.read(keys, "reuse", true, ..);
        let verify_reuse = self.read(keys, "verify_reuse", 10, 0..=1_000_000);
        let tests = self.test_network(keys);
        let agent = self.agent(keys, lm);
        Ok(LaunchSettings {
            concurrency: concurrency?,
            command_timeout: command_timeout?,
            test_timeout: test_timeout?,
            case_timeout: case_timeout?,
            min_pass_ratio: min_pass_ratio?,
            date_cutoff: date_cutoff?,
            verify_dockerfile: verify_dockerfile?,
            test_scope: test_scope?,
            recipes: recipes?,
            reuse: reuse?,
            verify_reuse: verify_reuse?,
            tests: tests?,
            agent: agent?,
        })
    }

    /// The launch agent's keys: `None` unless `agent = true`, which needs the `[lm]` table;
    /// the other `agent_*` keys are errors without it.
    fn agent(
        &mut self,
        keys: &mut Keys<'_, '_>,
        lm: Option<&Result<LmSettings, ()>>,
    ) -> Result<Option<AgentSettings>, ()> {
        let on_at = keys.get("agent").map_or(keys.at, |v| v.span().start);
        let on = self.read(keys, "agent", false, ..);
        let model_at = keys.get("agent_model").map(|v| v.span().start);
        let model = match self.string(keys, "agent_model") {
            None => Ok(None),
            Some(Some(m)) => Ok(Some(m)),
            Some(None) => Err(()),
        };
        let max_steps = self.read(keys, "agent_max_steps", 30, 1..=1000);
        let max_tokens = self.read(keys, "agent_max_tokens", 400_000, 1_000..=100_000_000);
        let max_cost_usd = self.read(keys, "agent_max_cost_usd", 1.0, 0.0..=10_000.0);
        let timeout = self.read(keys, "agent_timeout", Duration::from_secs(30 * 60), ..);
        let command_timeout = self.read(
            keys,
            "agent_command_timeout",
            Duration::from_secs(10 * 60),
            ..,
        );
        if !on? {
            for key in [
                "agent_model",
                "agent_max_steps",
                "agent_max_tokens",
                "agent_max_cost_usd",
                "agent_timeout",
                "agent_command_timeout",
            ] {
                if let Some(at) = keys.get(key).map(|v| v.span().start) {
                    let path = keys.path(key);
                    self.error_at(at, &path, "applies only with agent = true".into());
                }
            }
            return Ok(None);
        }
        let lm = match lm {
            Some(Ok(lm)) => lm.clone(),
            Some(Err(())) => return Err(()),
            None => {
                let path = keys.path("agent");
                self.error_at(
                    on_at,
                    &path,
                    "the launch agent needs an [lm] table with `base_url` and `model`".into(),
                );
                return Err(());
            }
        };
        let model = model?.unwrap_or_else(|| lm.model.clone());
        let key = keys.path(if model_at.is_some() {
            "agent_model"
        } else {
            "agent"
        });
        self.check_prices(
            &lm,
            std::slice::from_ref(&model),
            model_at.unwrap_or(on_at),
            &key,
        )?;
        Ok(Some(AgentSettings {
            model,
            max_steps: max_steps?,
            max_tokens: max_tokens?,
            max_cost_usd: max_cost_usd?,
            timeout: timeout?,
            command_timeout: command_timeout?,
            lm,
        }))
    }

    /// The `network` and `network_repos` keys of a stage that runs tests.
    fn test_network(&mut self, keys: &mut Keys<'_, '_>) -> Result<TestNetwork, ()> {
        let network = self.one_of(keys, "network", "none", &["none", "bridge"]);
        let network_repos = self.strings(keys, "network_repos");
        Ok(TestNetwork {
            network: network?,
            network_repos: network_repos?,
        })
    }

    /// Compiles a `validate` stage's keys ([`VALIDATE_KEYS`]).
    pub(super) fn validate(&mut self, keys: &mut Keys<'_, '_>) -> Result<ValidateSettings, ()> {
        let repeats = self.read(keys, "repeats", 3, 1..=20);
        let concurrency = self.read(keys, "concurrency", 2, 1..=256);
        let test_timeout = self.read(keys, "test_timeout", Duration::from_secs(30 * 60), ..);
        let tests = self.test_network(keys);
        let base_run = self.read(keys, "base_run", false, ..);
        let min_collected = self.read(keys, "min_collected", 0.9, 0.0..=1.0);
        let full_suite_every = self.read(keys, "full_suite_every", 10, 0..=1_000_000);
        Ok(ValidateSettings {
            repeats: repeats?,
            concurrency: concurrency?,
            test_timeout: test_timeout?,
            tests: tests?,
            base_run: base_run?,
            min_collected: min_collected?,
            full_suite_every: full_suite_every?,
        })
    }

    /// Compiles an `export` stage's keys ([`EXPORT_KEYS`]).
    pub(super) fn export(&mut self, keys: &mut Keys<'_, '_>) -> Result<ExportSettings, ()> {
        let split_at = keys.get("split").map_or(keys.at, |v| v.span().start);
        let split = self.string_or(keys, "split", "test");
        if let Ok(name) = &split {
            self.split_name(split_at, &keys.path("split"), name);
        }
        let tag_at = keys.get("tag").map_or(keys.at, |v| v.span().start);
        let tag = self.string_or(keys, "tag", "");
        if let Ok(tag) = &tag
            && !tag.is_empty()
            && (tag.starts_with('.')
                || tag.len() > 100
                || !tag
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        {
            let path = keys.path("tag");
            self.error_at(
                tag_at,
                &path,
                format!(
                    "\"{}\" is not a release tag: use ASCII letters, digits, '.', '_' and '-', not first '.' (it names a directory and a path on the Hub)",
                    cut(tag)
                ),
            );
        }
        let rows = self.read(keys, "rows_per_shard", 10_000, 1..=10_000_000);
        let license = self.string_or(keys, "license", "");
        let image_registry = self.string_or(keys, "image_registry", "");
        if let Ok(registry) = &image_registry
            && (registry.contains("://") || registry.ends_with('/') || registry.contains(' '))
        {
            let at = keys
                .get("image_registry")
                .map_or(keys.at, |v| v.span().start);
            let path = keys.path("image_registry");
            self.error_at(
                at,
                &path,
                format!(
                    "\"{}\" is not a registry reference; write host[:port][/namespace], such as registry.example.com/team",
                    cut(registry)
                ),
            );
        }
        let frozen = match keys.get("frozen") {
            None => Ok(Vec::new()),
            Some(value) => self.frozen(value, &keys.path("frozen")),
        };
        if let (Ok(split), Ok(frozen)) = (&split, &frozen)
            && let Some(same) = frozen.iter().find(|f| &f.name == split)
        {
            let path = keys.path("frozen");
            self.error_at(
                keys.at,
                &format!("{path}.{}", same.name),
                format!("`{split}` is the release's own split; name the frozen split otherwise"),
            );
        }
        let formats = self.formats(keys);
        let hints_at = keys.get("harbor_hints").map(|v| v.span().start);
        let harbor_hints = self.read(keys, "harbor_hints", false, ..);
        if let (Ok(formats), Ok(true), Some(at)) = (&formats, &harbor_hints, hints_at)
            && !formats.contains(&ExportFormat::Harbor)
        {
            let path = keys.path("harbor_hints");
            self.error_at(
                at,
                &path,
                "there are no Harbor tasks to give hints to: add \"harbor\" to `formats`".into(),
            );
        }
        Ok(ExportSettings {
            split: split?,
            tag: tag?,
            rows_per_shard: rows?,
            license: license?,
            image_registry: image_registry?,
            frozen: frozen?,
            formats: formats?,
            harbor_hints: harbor_hints?,
        })
    }

    /// `formats`: a list of [`ExportFormat`] names that holds `parquet` (the default, alone).
    fn formats(&mut self, keys: &mut Keys<'_, '_>) -> Result<Vec<ExportFormat>, ()> {
        let Some(value) = keys.get("formats") else {
            return Ok(vec![ExportFormat::Parquet]);
        };
        let path = keys.path("formats");
        let names: Vec<&str> = ExportFormat::ALL.iter().map(|f| f.as_str()).collect();
        let Some(items) = value.get_ref().as_array() else {
            self.error_at(
                value.span().start,
                &path,
                format!(
                    "expected an array of formats ({}), found {}",
                    names.join(", "),
                    value.get_ref().type_str()
                ),
            );
            return Err(());
        };
        let mut formats = Vec::new();
        let mut ok = true;
        for item in items.iter() {
            let found = item
                .get_ref()
                .as_str()
                .and_then(|name| ExportFormat::ALL.into_iter().find(|f| f.as_str() == name));
            match found {
                Some(format) if !formats.contains(&format) => formats.push(format),
                Some(format) => {
                    self.error_at(
                        item.span().start,
                        &path,
                        format!("\"{}\" is listed twice", format.as_str()),
                    );
                    ok = false;
                }
                None => {
                    let shown = item.get_ref().as_str().map_or_else(
                        || item.get_ref().type_str().to_string(),
                        |s| format!("\"{}\"", cut(s)),
                    );
                    self.error_at(
                        item.span().start,
                        &path,
                        format!(
                            "unknown format {shown}; expected one of: {}",
                            names.join(", ")
                        ),
                    );
                    ok = false;
                }
            }
        }
        if ok && !formats.contains(&ExportFormat::Parquet) {
            self.error_at(
                value.span().start,
                &path,
                "a release is always written as Parquet (its card, `release.json` and `kiln push` read the shards): list \"parquet\" too".into(),
            );
            ok = false;
        }
        if ok { Ok(formats) } else { Err(()) }
    }

    /// Reports a split name Hugging Face would refuse (it requires `\w+`).
    fn split_name(&mut self, at: usize, path: &str, name: &str) -> bool {
        let ok = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !ok {
            self.error_at(
                at,
                path,
                format!(
                    "\"{}\" is not a split name: use ASCII letters, digits and _",
                    cut(name)
                ),
            );
        }
        ok
    }

    /// `[stages.<export>.frozen.<split>]` tables: `sample` and `seed`, or `ids`.
    fn frozen(&mut self, value: &Value<'_>, key: &str) -> Result<Vec<FrozenSplit>, ()> {
        let table = self.table(value, key).ok_or(())?;
        let mut out = Vec::new();
        let mut ok = true;
        for (name, split) in table {
            let name = name.get_ref().to_string();
            let path = format!("{key}.{name}");
            if !self.split_name(split.span().start, &path, &name) {
                ok = false;
                continue;
            }
            let Some(inner) = self.table(split, &path) else {
                ok = false;
                continue;
            };
            let mut keys = Keys::new(inner, &path, split.span().start);
            let sample = keys.get("sample").is_some();
            let choice = if let Some(ids) = self.string(&mut keys, "ids") {
                if sample {
                    self.error_at(
                        split.span().start,
                        &path,
                        "give either `sample` (with `seed`) or `ids`, not both".into(),
                    );
                }
                match ids {
                    Some(file) if !sample => {
                        let path = self.path_value(&file);
                        let at = keys
                            .get("ids")
                            .map_or(split.span().start, |v| v.span().start);
                        self.require(at, &keys.path("ids"), Need::File(path.clone()));
                        Ok(FrozenChoice::Ids { path })
                    }
                    _ => Err(()),
                }
            } else if sample {
                let size = self.read(&mut keys, "sample", 0, 1..=1_000_000);
                let seed = self.read(&mut keys, "seed", 0, 0..=i64::MAX);
                match (size, seed) {
                    (Ok(size), Ok(seed)) => Ok(FrozenChoice::Sample { size, seed }),
                    _ => Err(()),
                }
            } else {
                // `seed` alone is not a second mistake: the missing `sample` is the one.
                keys.get("seed");
                self.error_at(
                    split.span().start,
                    &path,
                    "say how the split is chosen: `sample = N` (with `seed`) or `ids = \"FILE\"`"
                        .into(),
                );
                Err(())
            };
            keys.finish(self, FROZEN_KEYS);
            match choice {
                Ok(choice) => out.push(FrozenSplit { name, choice }),
                Err(()) => ok = false,
            }
        }
        if ok { Ok(out) } else { Err(()) }
    }
}
