//! The built-in demo: fixture repositories from `kiln-testkit`, served through the fake GitHub,
//! and a pipeline config that crawls them as a monthly run would.

use std::path::{Path, PathBuf};

use kiln_testkit::github::FakeGitHub;
use kiln_testkit::{DemoLayout, Expect};

use kiln_pipeline::{InstanceState, InstanceSummary};

/// Marker file that identifies a demo directory, so `kiln demo` only ever deletes its own.
pub const DEMO_MARKER: &str = ".kiln-demo";

/// The variable the demo's config names in `token_env`.
pub const DEMO_TOKEN_ENV: &str = "KILN_DEMO_GITHUB_TOKEN";

/// A written demo: the fixtures, the fake GitHub serving them, and the config that crawls it.
pub struct Demo {
    /// Fixture layout and expectations.
    pub layout: DemoLayout,
    /// The demo's `pipeline.toml`.
    pub config_path: PathBuf,
    /// The fake GitHub the config's crawl source points at; it answers while this lives.
    pub github: FakeGitHub,
    /// The token the fake accepts, for the variable [`DEMO_TOKEN_ENV`].
    pub token: String,
}

/// Errors preparing the demo directory.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// The directory exists and is not an earlier demo.
    #[error("use {} for the demo: it exists and is not a kiln demo directory; choose another with --dir", .0.display())]
    NotADemo(PathBuf),
    /// A file operation failed.
    #[error("write {}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// Building the fixtures failed.
    #[error(transparent)]
    Fixtures(#[from] kiln_testkit::TestkitError),
}

/// An LM endpoint for the demo's filter and split (`kiln demo --lm-url URL --lm-model NAME`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DemoLm {
    /// Base URL of the OpenAI-compatible API.
    pub base_url: String,
    /// Model to ask.
    pub model: String,
}

/// Writes the fixtures and a config into `dir`, replacing an earlier demo there.
///
/// `ca_bundle` is installed in the images (a TLS-inspecting proxy's CA, or the host's bundle).
///
/// # Errors
/// When `dir` holds something else, or a write fails.
pub fn prepare(dir: &Path, ca_bundle: Option<&Path>, repeats: u32) -> Result<Demo, DemoError> {
    prepare_with_lm(dir, ca_bundle, repeats, None)
}

/// [`prepare`], with the filter and split judged by `lm` when given (the key is read from
/// `OPENAI_API_KEY` when it is set).
///
/// # Errors
/// When `dir` holds something else, or a write fails.
pub fn prepare_with_lm(
    dir: &Path,
    ca_bundle: Option<&Path>,
    repeats: u32,
    lm: Option<&DemoLm>,
) -> Result<Demo, DemoError> {
    if dir.exists() {
        if !dir.join(DEMO_MARKER).exists() {
            return Err(DemoError::NotADemo(dir.to_path_buf()));
        }
        std::fs::remove_dir_all(dir).map_err(|source| DemoError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    // With an LM, the demo holds the fixture only the launch agent can build.
    let layout = if lm.is_some() {
        kiln_testkit::write_demo_with_agent(dir)?
    } else {
        kiln_testkit::write_demo(dir)?
    };
    // A token of this demo alone: another demo's fake on this machine rejects it.
    let token = format!(
        "kiln-demo-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    );
    let github = FakeGitHub::start(
        kiln_testkit::github::fake_repos(&layout)?,
        &[token.as_str()],
    )?;
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| DemoError::Io { path, source }
    };
    let marker = dir.join(DEMO_MARKER);
    std::fs::write(
        &marker,
        "written by `kiln demo`; the directory is replaced by the next demo\n",
    )
    .map_err(io(&marker))?;
    let config_path = dir.join("pipeline.toml");
    let repos: Vec<String> = layout.instances.iter().map(|i| i.repo.clone()).collect();
    let mut text = crawl_config_text("demo", &github.url(), &repos, ca_bundle, repeats);
    if let Some(lm) = lm {
        text = with_lm(&text, lm);
    }
    std::fs::write(&config_path, text).map_err(io(&config_path))?;
    Ok(Demo {
        layout,
        config_path,
        github,
        token,
    })
}

/// The demo's pipeline config: the fixture repositories crawled from the fake GitHub at
/// `api_url` for September 2024 (the month their pull requests were merged), through every
/// stage, under dataset name `dataset`.
#[must_use]
pub fn crawl_config_text(
    dataset: &str,
    api_url: &str,
    repos: &[String],
    ca_bundle: Option<&Path>,
    repeats: u32,
) -> String {
    let source = format!(
        r#"[sources.github]
kind = "crawl"
api_url = "{api_url}"
repos = {repos:?}
month = "2024-09"
token_env = ["{DEMO_TOKEN_ENV}"]
clone_url = "{{config_dir}}/repos/{{owner}}/{{name}}"
"#
    );
    pipeline_text(dataset, &source, "github", ca_bundle, repeats, true)
}

/// A pipeline config for fixtures written next to it (`tasks.jsonl`, `repos/`), ingested from
/// the task file, under dataset name `dataset`; the system tests run fixture sets with it.
#[must_use]
pub fn config_text(
    dataset: &str,
    ca_bundle: Option<&Path>,
    repeats: u32,
    verify_dockerfile: bool,
) -> String {
    let source = r#"[sources.tasks]
kind = "ingest"
path = "tasks.jsonl"
clone_url = "{config_dir}/repos/{owner}/{name}"
"#;
    pipeline_text(
        dataset,
        source,
        "tasks",
        ca_bundle,
        repeats,
        verify_dockerfile,
    )
}

/// A config with `source` (the TOML of one source named `source_name`) and every stage.
fn pipeline_text(
    dataset: &str,
    source: &str,
    source_name: &str,
    ca_bundle: Option<&Path>,
    repeats: u32,
    verify_dockerfile: bool,
) -> String {
    let s = source_name;
    let docker = match ca_bundle {
        Some(path) => format!("[docker]\nca_bundle = {:?}\n", path.to_string_lossy()),
        None => String::new(),
    };
    format!(
        r#"# kiln fixture projects, run through every stage on the local engine.
[dataset]
name = "{dataset}"
root = "datasets"

{docker}
{source}
[stages.filter]
kind = "filter"
inputs = ["{s}"]

[stages.split]
kind = "split"
inputs = ["{s}", "filter"]

[stages.launch]
kind = "launch"
inputs = ["{s}", "filter", "split"]
command_timeout = "15m"
test_timeout = "5m"
verify_dockerfile = {verify_dockerfile}

[stages.validate]
kind = "validate"
inputs = ["{s}", "launch"]
repeats = {repeats}
test_timeout = "5m"

[stages.export]
kind = "export"
inputs = ["{s}", "split", "launch", "validate"]
"#
    )
}

/// The first model an endpoint lists, for `kiln demo --lm-url` without `--lm-model` (the key is
/// read from `OPENAI_API_KEY` when it is set).
///
/// # Errors
/// When the endpoint cannot be reached or lists no model.
pub async fn first_model(base_url: &str) -> Result<String, kiln_core::LmError> {
    let settings = kiln_core::config::LmSettings {
        base_url: base_url.to_string(),
        model: String::new(),
        api_key_env: "OPENAI_API_KEY".into(),
        timeout: std::time::Duration::from_secs(30),
        retries: 0,
        max_in_flight: 1,
        temperature: 0.0,
        max_tokens: 16,
        json_schema: false,
        max_cost_usd: None,
        prices: std::collections::BTreeMap::new(),
    };
    let models = kiln_lm::OpenAiClient::new(&settings)?.models().await?;
    models
        .into_iter()
        .next()
        .ok_or_else(|| kiln_core::LmError::Malformed {
            endpoint: base_url.to_string(),
            message: "the endpoint lists no model".into(),
            usage: None,
            attempts: 1,
        })
}

/// The demo config with an `[lm]` table, the filter and split judged by it, and the launch
/// agent on.
#[must_use]
pub fn with_lm(config: &str, lm: &DemoLm) -> String {
    let table = format!(
        "[lm]\nbase_url = {:?}\nmodel = {:?}\napi_key_env = \"OPENAI_API_KEY\"\n\n",
        lm.base_url, lm.model
    );
    config
        .replacen("[sources.", &format!("{table}[sources."), 1)
        .replacen(
            "[stages.filter]\nkind = \"filter\"\n",
            "[stages.filter]\nkind = \"filter\"\njudge = \"lm\"\n",
            1,
        )
        .replacen(
            "[stages.split]\nkind = \"split\"\n",
            "[stages.split]\nkind = \"split\"\njudge = \"lm\"\n",
            1,
        )
        .replacen(
            "[stages.launch]\nkind = \"launch\"\n",
            "[stages.launch]\nkind = \"launch\"\nagent = true\n",
            1,
        )
}

/// [`check`] for a demo judged by an LM: an instance the LM filtered out, or labelled for
/// another platform, ended as its judge decided rather than as the fixture expects; that is
/// `Ok` with the reason, not a mismatch.
///
/// # Errors
/// A sentence describing the mismatch.
pub fn check_judged(
    expect: &Expect,
    summary: &InstanceSummary,
    lm_judged: bool,
) -> Result<Option<String>, String> {
    if lm_judged
        && matches!(
            summary.state,
            InstanceState::Filtered | InstanceState::OtherPlatform
        )
    {
        return Ok(Some(format!(
            "{} by the LM judge: {}",
            summary.state,
            summary.reason.as_deref().unwrap_or("-")
        )));
    }
    // The agent may fail where the rules fail: that is the model's result, not a mismatch.
    if lm_judged && summary.state == InstanceState::LaunchFailed && summary.agent_steps > 0 {
        return Ok(Some(format!(
            "the launch agent did not build it in {} turns ({}): {}",
            summary.agent_steps,
            summary.stop_class().unwrap_or("-"),
            summary.reason.as_deref().unwrap_or("-")
        )));
    }
    check(expect, summary).map(|()| None)
}

/// How one instance of the demo ended, against what its fixture says.
#[derive(Debug, Clone)]
pub struct InstanceVerdict {
    /// The fixture's instance id.
    pub instance_id: String,
    /// What the run made of it; `None` when no stage has a row for it.
    pub summary: Option<InstanceSummary>,
    /// As expected (with what an LM judge decided, when it decided), or how it differs.
    pub verdict: Result<Option<String>, String>,
}

/// A demo run judged against the fixtures.
#[derive(Debug, Clone)]
pub struct Verdicts {
    /// One per fixture instance, in fixture order.
    pub instances: Vec<InstanceVerdict>,
    /// Instances the run has.
    pub instances_in: usize,
    /// Instances whose environment was built.
    pub built: usize,
    /// Instances validated.
    pub validated: usize,
    /// Instances rejected.
    pub rejected: usize,
    /// Instances whose launch failed.
    pub launch_failed: usize,
}

impl Verdicts {
    /// `<id>: <how it differs>` for every instance that did not end as expected.
    #[must_use]
    pub fn mismatches(&self) -> Vec<String> {
        self.instances
            .iter()
            .filter_map(|i| {
                i.verdict
                    .as_ref()
                    .err()
                    .map(|why| format!("{}: {why}", i.instance_id))
            })
            .collect()
    }
}

/// Judges the run's `summaries` against the fixtures of `layout`; `lm_judged` when an LM judged
/// the filter and split (it may keep or drop what the fixtures expect otherwise).
#[must_use]
pub fn judge(layout: &DemoLayout, summaries: &[InstanceSummary], lm_judged: bool) -> Verdicts {
    let instances = layout
        .instances
        .iter()
        .map(|expected| {
            let summary = summaries
                .iter()
                .find(|s| s.instance_id == expected.instance_id.as_str());
            InstanceVerdict {
                instance_id: expected.instance_id.clone(),
                summary: summary.cloned(),
                verdict: match summary {
                    Some(s) => check_judged(&expected.expect, s, lm_judged),
                    None => Err("no row in any stage".to_string()),
                },
            }
        })
        .collect();
    let count = |state: InstanceState| summaries.iter().filter(|s| s.state == state).count();
    Verdicts {
        instances,
        instances_in: summaries.len(),
        built: summaries
            .iter()
            .filter(|s| {
                matches!(
                    s.state,
                    InstanceState::Validated
                        | InstanceState::Rejected
                        | InstanceState::ValidateFailed
                )
            })
            .count(),
        validated: count(InstanceState::Validated),
        rejected: count(InstanceState::Rejected),
        launch_failed: count(InstanceState::LaunchFailed),
    }
}

/// Whether an instance ended as the fixture says it must; `Err` says how it differs.
///
/// # Errors
/// A sentence describing the mismatch.
pub fn check(expect: &Expect, summary: &InstanceSummary) -> Result<(), String> {
    match expect {
        Expect::Validated {
            fail_to_pass,
            pass_to_pass,
        } => {
            if summary.state != InstanceState::Validated {
                return Err(format!(
                    "expected validated, got {} ({})",
                    summary.state,
                    summary.stop_class().unwrap_or("-")
                ));
            }
            if &summary.fail_to_pass != fail_to_pass {
                return Err(format!(
                    "FAIL_TO_PASS {:?}, expected {fail_to_pass:?}",
                    summary.fail_to_pass
                ));
            }
            if &summary.pass_to_pass != pass_to_pass {
                return Err(format!(
                    "PASS_TO_PASS {:?}, expected {pass_to_pass:?}",
                    summary.pass_to_pass
                ));
            }
            Ok(())
        }
        Expect::Rejected { failure_class } => {
            expect_class(InstanceState::Rejected, failure_class, summary)
        }
        Expect::LaunchFailed { failure_class } => {
            expect_class(InstanceState::LaunchFailed, failure_class, summary)
        }
        Expect::ValidateFailed { failure_class } => {
            expect_class(InstanceState::ValidateFailed, failure_class, summary)
        }
    }
}

fn expect_class(
    state: InstanceState,
    class: &str,
    summary: &InstanceSummary,
) -> Result<(), String> {
    if summary.state == state && summary.stop_class() == Some(class) {
        Ok(())
    } else {
        Err(format!(
            "expected {state} ({class}), got {} ({})",
            summary.state,
            summary.stop_class().unwrap_or("-")
        ))
    }
}
