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

pub const ENGINE_HINT: &str = "\nhint: start a Docker engine (on Debian: `sudo bash scripts/docker-engine.sh start`, which installs docker.io and starts dockerd), or point DOCKER_HOST at one";
