//! The built-in demo: fixture repositories from `kiln-testkit`, served through the fake GitHub,
//! and a pipeline config that crawls them as a monthly run would.

use std::path::{Path, PathBuf};

use kiln_testkit::github::FakeGitHub;
use kiln_testkit::{DemoLayout, Expect};

use crate::summary::InstanceSummary;

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
    #[error("{} exists and is not a kiln demo directory; choose another with --dir", .0.display())]
    NotADemo(PathBuf),
    /// A file operation failed.
    #[error("{}: {source}", path.display())]
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

/// Writes the fixtures and a config into `dir`, replacing an earlier demo there.
///
/// `ca_bundle` is installed in the images (a TLS-inspecting proxy's CA, or the host's bundle).
///
/// # Errors
/// When `dir` holds something else, or a write fails.
pub fn prepare(dir: &Path, ca_bundle: Option<&Path>, repeats: u32) -> Result<Demo, DemoError> {
    if dir.exists() {
        if !dir.join(DEMO_MARKER).exists() {
            return Err(DemoError::NotADemo(dir.to_path_buf()));
        }
        std::fs::remove_dir_all(dir).map_err(|source| DemoError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    let layout = kiln_testkit::write_demo(dir)?;
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
    std::fs::write(
        &config_path,
        crawl_config_text("demo", &github.url(), &repos, ca_bundle, repeats),
    )
    .map_err(io(&config_path))?;
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
            if summary.state != "validated" {
                return Err(format!(
                    "expected validated, got {} ({})",
                    summary.state,
                    summary.failure_class.as_deref().unwrap_or("-")
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
        Expect::Rejected { failure_class } => expect_class("rejected", failure_class, summary),
        Expect::LaunchFailed { failure_class } => {
            expect_class("launch-failed", failure_class, summary)
        }
    }
}

fn expect_class(state: &str, class: &str, summary: &InstanceSummary) -> Result<(), String> {
    if summary.state == state && summary.failure_class.as_deref() == Some(class) {
        Ok(())
    } else {
        Err(format!(
            "expected {state} ({class}), got {} ({})",
            summary.state,
            summary.failure_class.as_deref().unwrap_or("-")
        ))
    }
}
