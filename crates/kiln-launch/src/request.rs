//! What one launch is asked to do.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use kiln_core::Removals;
use kiln_core::config::{DockerSettings, LaunchSettings};
use kiln_core::lm::LanguageModel;
use kiln_core::runtime::LABEL_RUN;
use kiln_schema::Candidate;

/// Everything launch needs for one candidate.
#[derive(Debug, Clone)]
pub struct LaunchRequest {
    /// The candidate.
    pub candidate: Candidate,
    /// Clone URL (or local path) of its repository.
    pub clone_url: String,
    /// Directory of repository mirrors.
    pub cache_dir: PathBuf,
    /// Directory for this instance's launch logs.
    pub log_dir: PathBuf,
    /// Log directory as recorded in the row (relative to the run directory).
    pub log_dir_label: String,
    /// A PEM CA bundle to install in the images (TLS-inspecting proxies).
    pub ca_bundle: Option<Arc<Vec<u8>>>,
    /// Tag to commit a successful environment to.
    pub image_tag: String,
    /// Labels for containers and images (run label included).
    pub labels: BTreeMap<String, String>,
    /// Stage settings.
    pub settings: LaunchSettings,
    /// Container limits.
    pub docker: DockerSettings,
    /// Stage name, for progress events.
    pub stage: String,
    /// Where the container's removal goes: the launch returns without waiting for it, the
    /// stage waits for all of them at its end.
    pub removals: Removals,
    /// The launch agent's model (the pipeline gives one that replays the run's stored answers
    /// and keeps to its budget), asked when the rules and repairs fail and `settings.agent`
    /// is set; `None`: no agent.
    pub lm: Option<AgentModel>,
    /// The dataset's recipe directory: recipes are replayed where the rules stop, and the
    /// agent's builds stored there. `None`: neither.
    pub recipes: Option<PathBuf>,
    /// Built environments of the same repository this launch may start from (with
    /// `settings.reuse`): launch takes the one whose base commit is the nearest ancestor of its
    /// own, and launches cold when none is.
    pub reuse: Vec<ReuseSource>,
}

/// A built environment another launch of its repository may start from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReuseSource {
    /// The instance it was built for.
    pub instance_id: String,
    /// Its image (the id, `sha256:…`, as committed).
    pub image: String,
    /// The base commit it was built at.
    pub base_commit: String,
    /// The plan that built it: only an environment of the same plan is reused.
    pub plan: String,
    /// The base image it was built on: only an environment on the image this launch's plan
    /// chose is reused (another interpreter or toolchain is another environment).
    pub base_image: String,
    /// The setup commands that built it, as its row lists them: a step this launch would run
    /// again is skipped when the source ran the same command and none of its inputs changed.
    pub setup_commands: Vec<String>,
    /// The dependency cut-off its plan applied: with no dependency manifest changed since its
    /// commit, this launch resolves as of the same date, so that the source's dependencies
    /// stand as they are.
    pub cutoff: Option<String>,
}

impl LaunchRequest {
    /// The network the repository's tests run on (the stage's `network`, `network_repos`).
    pub(crate) fn test_network(&self) -> kiln_core::NetworkMode {
        self.settings.tests.for_repo(&self.candidate.repo)
    }

    /// Labels of the images this launch commits: the request's, without the run's (an image
    /// outlives its run), with the instance's.
    pub(crate) fn image_labels(&self) -> BTreeMap<String, String> {
        let mut labels = self.labels.clone();
        labels.remove(LABEL_RUN);
        labels.insert(
            "kiln.instance".into(),
            self.candidate.instance_id.to_string(),
        );
        labels
    }
}

/// The launch agent's language model.
#[derive(Clone)]
pub struct AgentModel(pub Arc<dyn LanguageModel>);

impl std::fmt::Debug for AgentModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("AgentModel")
            .field(&self.0.endpoint())
            .finish()
    }
}
