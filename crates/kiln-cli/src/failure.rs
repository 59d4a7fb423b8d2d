//! Errors with the exit code they map to.

use kiln_core::RuntimeError;
use kiln_pipeline::PipelineError;

use crate::exit;

/// An error with the exit code it maps to.
pub struct Failure {
    /// The exit code.
    pub code: u8,
    /// What to print after `error: `.
    pub message: String,
}

impl Failure {
    /// Prints the failure on stderr: `error: ...` with its hints, or under `--json` one more
    /// JSON line after the progress lines, with the exit code.
    pub fn report(&self, json: bool) {
        if json {
            eprintln!(
                "{}",
                serde_json::json!({
                    "event": "error",
                    "exit_code": self.code,
                    "message": self.message,
                })
            );
        } else {
            eprintln!("{}", crate::paint::error(&self.message));
        }
    }

    /// A failure with its code and message.
    pub fn new(code: u8, message: impl Into<String>) -> Self {
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
            PipelineError::Engine(_)
            | PipelineError::NoEngine(_)
            | PipelineError::RegistryDown { .. }
            | PipelineError::Deferred { .. } => exit::ENGINE,
            PipelineError::Answers(_) => exit::STORE,
            PipelineError::Internal(_) | PipelineError::NoLanguageModel(_) => exit::INTERNAL,
            PipelineError::Publish(_) => exit::PUBLISH,
            PipelineError::LmSetup(_)
            | PipelineError::Input { .. }
            | PipelineError::MissingInput { .. }
            | PipelineError::UnknownStage { .. }
            | PipelineError::UnknownItems { .. }
            | PipelineError::NoRun { .. }
            | PipelineError::Merge { .. }
            | PipelineError::Unmerged { .. } => exit::INPUT,
        };
        let mut message = match &e {
            // One line per problem: a merge can find many.
            PipelineError::Merge {
                count, problems, ..
            } => format!(
                "failed to merge the {count} shards ({} problem(s), nothing was merged):\n  {}",
                problems.len(),
                problems.join("\n  ")
            ),
            _ => format!("failed to {e}"),
        };
        if let PipelineError::Engine(RuntimeError::Unreachable { .. }) = &e {
            message.push_str(ENGINE_HINT);
        }
        if let PipelineError::Deferred { reasons, .. } = &e
            && reasons
                .iter()
                .any(|r| r.contains("CERTIFICATE") || r.contains("certificate"))
        {
            message.push_str(
                "\nhint: the registry's certificate was refused; behind a TLS-inspecting proxy, give the containers its CA with `[docker] ca_bundle`",
            );
        }
        if let PipelineError::NoRun { .. } = &e {
            message.push_str(NO_RUN_HINT);
            // `scripts/demo.sh` writes its own config and dataset under `kiln-demo/`.
            if std::path::Path::new("kiln-demo/pipeline.toml").is_file() {
                message.push_str(
                    "\nhint: the demo's runs are under kiln-demo/: `kiln status --config kiln-demo/pipeline.toml`",
                );
            }
        }
        Self { code, message }
    }
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Self::new(exit::INTERNAL, format!("{e:#}"))
    }
}

/// What a user who expected a run is told.
const NO_RUN_HINT: &str = "\nhint: `--config FILE` reads the runs of another pipeline (`[dataset] root` and `name` say where they are)";

pub const ENGINE_HINT: &str = "\nhint: start a Docker engine (on Debian: `sudo bash scripts/docker-engine.sh start`, which installs docker.io and starts dockerd), or point DOCKER_HOST at one";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deferred_items_exit_4_naming_them_with_a_hint_for_a_refused_certificate() {
        let deferred = |reason: &str| {
            Failure::from(PipelineError::Deferred {
                stage: "launch".into(),
                items: vec!["o__r-1".into(), "o__r-2".into()],
                reasons: vec![reason.into()],
            })
        };
        let silent = deferred("https://pypi.org/simple/: Could not resolve host: pypi.org");
        assert_eq!(silent.code, exit::ENGINE);
        assert!(
            silent.message.contains("2 item(s) were deferred"),
            "{}",
            silent.message
        );
        assert!(
            silent.message.contains("o__r-1, o__r-2"),
            "{}",
            silent.message
        );
        assert!(!silent.message.contains("ca_bundle"), "{}", silent.message);
        let refused = deferred(
            "https://pypi.org/simple/: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed",
        );
        assert!(
            refused.message.contains("[docker] ca_bundle"),
            "{}",
            refused.message
        );
    }
}
