//! The built-in demo: fixture repositories from `kiln-testkit` and a pipeline config for them.

use std::path::{Path, PathBuf};

use kiln_testkit::{DemoLayout, Expect};

use crate::summary::InstanceSummary;

/// Marker file that identifies a demo directory, so `kiln demo` only ever deletes its own.
pub const DEMO_MARKER: &str = ".kiln-demo";

/// A written demo: the fixtures and the config that runs them.
#[derive(Debug, Clone)]
pub struct Demo {
    /// Fixture layout and expectations.
    pub layout: DemoLayout,
    /// The demo's `pipeline.toml`.
    pub config_path: PathBuf,
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
    std::fs::write(&config_path, config_text("demo", ca_bundle, repeats, true))
        .map_err(io(&config_path))?;
    Ok(Demo {
        layout,
        config_path,
    })
}

/// The demo's pipeline config for fixtures written next to it (`tasks.jsonl`, `repos/`), under
/// dataset name `dataset`; the system tests run other fixture sets with it too.
#[must_use]
pub fn config_text(
    dataset: &str,
    ca_bundle: Option<&Path>,
    repeats: u32,
    verify_dockerfile: bool,
) -> String {
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
[sources.tasks]
kind = "ingest"
path = "tasks.jsonl"
clone_url = "{{config_dir}}/repos/{{owner}}/{{name}}"

[stages.filter]
kind = "filter"
inputs = ["tasks"]

[stages.split]
kind = "split"
inputs = ["tasks", "filter"]

[stages.launch]
kind = "launch"
inputs = ["tasks", "filter", "split"]
command_timeout = "15m"
test_timeout = "5m"
verify_dockerfile = {verify_dockerfile}

[stages.validate]
kind = "validate"
inputs = ["tasks", "launch"]
repeats = {repeats}
test_timeout = "5m"

[stages.export]
kind = "export"
inputs = ["tasks", "split", "launch", "validate"]
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
