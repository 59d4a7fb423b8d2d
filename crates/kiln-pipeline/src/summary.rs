//! What became of each instance in a run, read back from the stage tables.

use std::collections::BTreeMap;

use kiln_core::config::{NodeKind, Pipeline};
use kiln_schema::{
    BuiltBy, Candidate, CandidateStatus, EnvironmentRecord, EnvironmentStatus, FailureClass,
    InstanceId, PlatformLabel, ValidationRecord, ValidationStatus, Verdict, rows_by_id,
};
use kiln_store::RunStore;
use serde::Serialize;

use crate::error::PipelineError;

/// Where an instance stopped, or that it went all the way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum InstanceState {
    /// No stage has decided it yet.
    Pending,
    /// Its task file entry could not be read.
    InvalidInput,
    /// The filter did not keep it.
    Filtered,
    /// It is labelled for a platform the run does not build.
    OtherPlatform,
    /// Its environment could not be built.
    LaunchFailed,
    /// Its validation could not run to a decision.
    ValidateFailed,
    /// The validation rejected it.
    Rejected,
    /// It validated.
    Validated,
}

impl InstanceState {
    /// The state's name, as `kiln status` prints it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::InvalidInput => "invalid-input",
            Self::Filtered => "filtered",
            Self::OtherPlatform => "other-platform",
            Self::LaunchFailed => "launch-failed",
            Self::ValidateFailed => "validate-failed",
            Self::Rejected => "rejected",
            Self::Validated => "validated",
        }
    }
}

impl std::fmt::Display for InstanceState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The furthest stage an instance reached and how it ended there.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InstanceSummary {
    /// Instance id.
    pub instance_id: InstanceId,
    /// Where it stopped.
    pub state: InstanceState,
    /// Why it stopped, when a stage gave a class: its launch's or validation's failure class,
    /// or `invalid-input` for a task file entry that could not be read.
    pub failure_class: Option<FailureClass>,
    /// The filter's label, when the filter left it out.
    pub filter_label: Option<String>,
    /// Reason in words, when there is one.
    pub reason: Option<String>,
    /// FAIL_TO_PASS of a validated instance.
    pub fail_to_pass: Vec<String>,
    /// PASS_TO_PASS of a validated instance.
    pub pass_to_pass: Vec<String>,
    /// Launch wall seconds.
    pub launch_seconds: Option<f64>,
    /// Validate wall seconds.
    pub validate_seconds: Option<f64>,
    /// Sum of the seconds of the validation test commands alone.
    pub validate_test_seconds: Option<f64>,
    /// Seconds of the launch setup commands alone.
    pub setup_seconds: Option<f64>,
    /// Seconds of the baseline test command alone.
    pub baseline_test_seconds: Option<f64>,
    /// How FAIL_TO_PASS agrees with the published list: as strings, then by meaning
    /// (`exact/exact`, `disjoint/superset`, ...); `None` when nothing was published.
    pub agreement: Option<String>,
    /// What built the environment: `rules`, `repair`, `recipe` or `agent`.
    pub built_by: Option<BuiltBy>,
    /// The launch agent's turns, tokens and dollars (zero when it did not run).
    pub agent_steps: i64,
    /// Tokens of the agent's requests.
    pub agent_tokens: i64,
    /// Dollars of the agent's requests.
    pub agent_cost_usd: f64,
}

impl InstanceSummary {
    /// Why it stopped, in a word: its failure class, or the filter's label.
    #[must_use]
    pub fn stop_class(&self) -> Option<&str> {
        self.failure_class
            .map(FailureClass::as_str)
            .or(self.filter_label.as_deref())
    }
}

/// Rows of every stage of `kind` in the run (the stages that have started).
pub(crate) fn rows<R: kiln_schema::Row>(
    pipeline: &Pipeline,
    run: &RunStore,
    kind: NodeKind,
) -> Result<Vec<R>, PipelineError> {
    let mut out = Vec::new();
    let wanted = |n: &&kiln_core::config::Node| {
        n.kind == kind || (kind == NodeKind::Ingest && n.kind.is_source())
    };
    for node in pipeline.nodes.iter().filter(wanted) {
        let dir = run.stage_dir(&node.name)?;
        if dir.join(kiln_store::MANIFEST).exists() {
            out.extend(kiln_store::read_rows::<R>(&dir)?);
        }
    }
    Ok(out)
}

/// One summary per candidate of the run, in id order. Pull requests a crawl dropped are not
/// candidates; the crawl stage's counts give their reasons.
///
/// # Errors
/// When a stage table cannot be read.
pub fn instance_summaries(
    pipeline: &Pipeline,
    run: &RunStore,
) -> Result<Vec<InstanceSummary>, PipelineError> {
    let by_id = |v: Vec<(InstanceId, String)>| v.into_iter().collect::<BTreeMap<_, _>>();
    let candidates = rows::<Candidate>(pipeline, run, NodeKind::Ingest)?;
    let verdicts = rows_by_id(rows::<Verdict>(pipeline, run, NodeKind::Filter)?);
    let platforms = by_id(
        rows::<PlatformLabel>(pipeline, run, NodeKind::Split)?
            .into_iter()
            .map(|p| (p.instance_id, p.platform))
            .collect(),
    );
    let environments = rows_by_id(rows::<EnvironmentRecord>(pipeline, run, NodeKind::Launch)?);
    let validations = rows_by_id(rows::<ValidationRecord>(pipeline, run, NodeKind::Validate)?);
    let mut out = Vec::new();
    for candidate in candidates
        .into_iter()
        .filter(|c| c.status != CandidateStatus::Dropped)
    {
        let id = candidate.instance_id.clone();
        let mut summary = InstanceSummary {
            instance_id: id.clone(),
            state: InstanceState::Pending,
            failure_class: None,
            filter_label: None,
            reason: None,
            fail_to_pass: Vec::new(),
            pass_to_pass: Vec::new(),
            launch_seconds: None,
            validate_seconds: None,
            validate_test_seconds: None,
            setup_seconds: None,
            baseline_test_seconds: None,
            agreement: None,
            built_by: None,
            agent_steps: 0,
            agent_tokens: 0,
            agent_cost_usd: 0.0,
        };
        if candidate.status != CandidateStatus::Ok {
            summary.state = InstanceState::InvalidInput;
            summary.failure_class = Some(FailureClass::InvalidInput);
            summary.reason = candidate.error.clone();
        } else if let Some(verdict) = verdicts.get(&id).filter(|v| !v.keep) {
            summary.state = InstanceState::Filtered;
            summary.filter_label = Some(verdict.label.clone());
            summary.reason = Some(verdict.reason.clone());
        } else if let Some(platform) = platforms.get(&id).filter(|p| *p != "linux") {
            summary.state = InstanceState::OtherPlatform;
            summary.reason = Some(format!("labelled {platform}"));
        }
        if let Some(env) = environments.get(&id) {
            summary.launch_seconds = Some(env.total_seconds);
            summary.setup_seconds = Some(env.setup_seconds);
            summary.baseline_test_seconds = Some(env.test_seconds);
            summary.built_by = env.built_by;
            summary.agent_steps = env.agent_steps;
            summary.agent_tokens = env.agent_tokens;
            summary.agent_cost_usd = env.agent_cost_usd;
            if env.status != EnvironmentStatus::Built {
                summary.state = InstanceState::LaunchFailed;
                summary.failure_class = env.failure_class;
                summary.reason = env
                    .failure_command
                    .as_ref()
                    .map(|c| format!("`{c}` failed"));
            }
        }
        if let Some(validation) = validations.get(&id) {
            summary.validate_seconds = Some(validation.total_seconds);
            summary.validate_test_seconds = Some(validation.test_seconds);
            summary.state = match validation.status {
                ValidationStatus::Validated => InstanceState::Validated,
                ValidationStatus::Rejected => InstanceState::Rejected,
                ValidationStatus::Failed => InstanceState::ValidateFailed,
            };
            summary.failure_class = validation.failure_class;
            summary.reason.clone_from(&validation.reason);
            summary.fail_to_pass.clone_from(&validation.FAIL_TO_PASS);
            if let (Some(exact), Some(meaning)) =
                (&validation.agreement, &validation.agreement_by_meaning)
            {
                summary.agreement = Some(format!("{exact}/{meaning}"));
            }
            summary.pass_to_pass.clone_from(&validation.PASS_TO_PASS);
        }
        out.push(summary);
    }
    Ok(out)
}

/// How many instances of a run reached each stage, and how the others ended: the funnel the
/// dataset card and the run report show.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct Funnel {
    /// Pull requests the source gave (a crawl's dropped ones included).
    pub pull_requests: u64,
    /// Task candidates (pull requests the crawl did not drop; task file lines that read).
    pub candidates: u64,
    /// Candidates the filter kept.
    pub kept: u64,
    /// Kept candidates for a platform the run builds (Linux).
    pub platform: u64,
    /// Environments built.
    pub built: u64,
    /// Instances validated.
    pub validated: u64,
    /// Pull requests the crawl dropped, by reason.
    pub dropped: BTreeMap<String, u64>,
    /// Candidates that stopped, by where (`filtered`, `invalid-input`, `other-platform`,
    /// `launch-failed`, `rejected`, `validate-failed`, `pending`) and then by failure class.
    pub failures: BTreeMap<String, BTreeMap<String, u64>>,
}

/// The funnel of a run, read from its stage tables.
///
/// # Errors
/// When a stage table cannot be read.
pub fn funnel(pipeline: &Pipeline, run: &RunStore) -> Result<Funnel, PipelineError> {
    let candidates = rows::<Candidate>(pipeline, run, NodeKind::Ingest)?;
    let mut funnel = Funnel {
        pull_requests: candidates.len() as u64,
        ..Funnel::default()
    };
    for dropped in candidates
        .iter()
        .filter(|c| c.status == CandidateStatus::Dropped)
    {
        let reason = dropped
            .drop_reason
            .map_or_else(|| "-".to_string(), |r| r.to_string());
        *funnel.dropped.entry(reason).or_default() += 1;
    }
    for summary in instance_summaries(pipeline, run)? {
        funnel.candidates += 1;
        let state = summary.state;
        let kept = !matches!(state, InstanceState::Filtered | InstanceState::InvalidInput);
        let platform = kept && state != InstanceState::OtherPlatform;
        let built = matches!(
            state,
            InstanceState::Validated | InstanceState::Rejected | InstanceState::ValidateFailed
        ) || (state == InstanceState::Pending && summary.launch_seconds.is_some());
        funnel.kept += u64::from(kept);
        funnel.platform += u64::from(platform);
        funnel.built += u64::from(built);
        funnel.validated += u64::from(state == InstanceState::Validated);
        if state != InstanceState::Validated {
            let class = summary.stop_class().unwrap_or("-").to_string();
            *funnel
                .failures
                .entry(state.to_string())
                .or_default()
                .entry(class)
                .or_default() += 1;
        }
    }
    Ok(funnel)
}
