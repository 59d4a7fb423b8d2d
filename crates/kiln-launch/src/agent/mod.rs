//! The launch agent: when the rules and their repairs cannot build a repository and an LM is
//! configured, a model finishes the build in the same container, one tool call at a time.
//!
//! It is handed what the rules know (the plan, the commands that worked, the failing command
//! and its log tail, the steps not run, the test command) and works with five tools: run a
//! command, read a file, list a directory, write a file, set an environment variable; then
//! `finish`, which declares the test command and parser, or `give_up`. Commands that may
//! change the container are snapshotted before and rolled back when they fail ([`sandbox`]);
//! actions that would defeat validation are refused with the reason ([`guard`]). A `finish` is
//! held to the rules' contract: the container is committed, the baseline tests run, their
//! output is read by the named parser or by the agent's parser script (in a fresh container),
//! and enough tests must pass; otherwise the agent is told why and goes on. Steps, tokens,
//! dollars and wall time are bounded per instance; running out is a row of class
//! `agent-budget`.
//!
//! What worked is written to the row (the commands that stayed, the environment, the test
//! command, `built_by = agent`, turns, tokens, dollars), to `agent.jsonl` in the launch's logs
//! (every turn and action, with snapshot and rollback seconds), and to the repository's
//! recipe, which later launches replay before asking the LM ([`crate::recipe`]).

mod actions;
pub(crate) mod guard;
mod handover;
pub(crate) mod sandbox;
mod spent;
pub(crate) mod tools;
mod trajectory;
pub(crate) mod transcript;

use std::sync::Arc;
use std::time::Instant;

use kiln_core::checkout::Watch;
use kiln_core::config::AgentSettings;
use kiln_core::lm::{ChatAnswer, ChatRequest, LanguageModel, LmError};
use kiln_core::{ContainerSpec, RuntimeError, Session};
use kiln_schema::{EnvironmentRecord, FailureClass};
use serde_json::json;

use self::actions::{Ctx, Learned, act};
pub(crate) use self::handover::Handover;
use self::handover::{describe, list_files};
use self::sandbox::Sandbox;
use self::spent::Spent;
use self::trajectory::Trajectory;
use self::transcript::Transcript;
use crate::environment::Known;
use crate::request::LaunchRequest;
use crate::verify::Failure;

/// The container and the launch the agent works in.
pub(crate) struct Workplace<'a> {
    pub(crate) session: &'a mut Session,
    /// The spec the container was started from (rollbacks replace its image).
    pub(crate) spec: &'a ContainerSpec,
    /// The commit's tree and the test patch's files.
    pub(crate) known: &'a Known,
    pub(crate) request: &'a LaunchRequest,
    pub(crate) settings: &'a AgentSettings,
    pub(crate) lm: &'a dyn LanguageModel,
    pub(crate) step: &'a (dyn Fn(&str) + Sync),
}

/// Room for each answer: commands and parser scripts need more than a verdict does.
const MIN_ANSWER_TOKENS: i64 = 4096;

const SYSTEM: &str = "You finish building a test environment for a repository, in a Debian \
container where kiln's build rules stopped. The goal: the repository's test suite runs and \
most of its tests pass, so that the tests of a later patch can be checked in this environment. \
You work in /testbed (the repository at the commit to test) as root; package registries (apt, \
PyPI, npm, crates.io) are reachable. Each turn costs money: prefer one command that does several \
things, read only what you need, and stop exploring once the tests run. Never change the files \
the instance's test patch touches, never skip, deselect or ignore tests, and never make the test \
command hide failures: such actions are refused. A failing command that may change the container \
is rolled back, so the container stays as it was before it. When the tests run, call finish with \
the test command and the parser that reads its output; if none of the parsers reads it, write a \
parser script.";

/// What one agent run carries from turn to turn.
struct Agent {
    transcript: Transcript,
    /// Every request's fixed part: model, tools, room for the answer.
    template: ChatRequest,
    sandbox: Sandbox,
    trajectory: Trajectory,
    /// Every command is judged by what it did to the container, read from the engine.
    watch: Watch,
    learned: Learned,
    spent: Spent,
    started: Instant,
}

/// How a turn ended.
enum Turn {
    /// The agent goes on.
    Again,
    /// The agent ended: built (`None`) or the row's failure.
    Ends(Option<Failure>),
}

/// Runs the agent until it builds the environment or a budget ends it. `Ok(None)`: built, and
/// the record says so; `Ok(Some(..))`: the row's failure.
///
/// # Errors
/// Engine failures only.
pub(crate) async fn take_over(
    mut place: Workplace<'_>,
    record: &mut EnvironmentRecord,
    handover: Handover,
) -> Result<Option<Failure>, RuntimeError> {
    let mut agent = Agent::start(&mut place, record, &handover).await?;
    // The row of a failed launch names the rules' test command, not an attempt's.
    let rules_test = (
        record.test_command.clone(),
        record.parser.clone(),
        record.rebuild_commands.clone(),
    );
    let end = loop {
        match agent.turn(&mut place, record, &handover).await? {
            Turn::Again => {}
            Turn::Ends(end) => break end,
        }
    };
    if end.is_none() {
        keep_recipe(&mut place, record, &agent.learned, &handover.plan);
    } else {
        (record.test_command, record.parser, record.rebuild_commands) = rules_test;
        record.parser_script = None;
    }
    finish_up(
        place.session,
        &agent.sandbox,
        record,
        &agent.spent,
        &mut agent.trajectory,
        end,
        agent.started,
    )
    .await
}

impl Agent {
    /// Tells the model what the rules know, and readies the snapshot, the trajectory and the
    /// watch of its commands.
    async fn start(
        place: &mut Workplace<'_>,
        record: &EnvironmentRecord,
        handover: &Handover,
    ) -> Result<Self, RuntimeError> {
        let (request, settings) = (place.request, place.settings);
        (place.step)("agent: taking over");
        place.session.note(&format!(
            "# kiln agent takes over ({}): the rules stopped",
            settings.model
        ));
        let files = list_files(place.session).await?;
        let (handover_text, key) = describe(record, handover, &files);
        Ok(Self {
            transcript: Transcript::new(SYSTEM.to_string(), handover_text, key),
            template: ChatRequest {
                model: settings.model.clone(),
                messages: Vec::new(),
                temperature: settings.lm.temperature,
                max_tokens: u32::try_from(settings.lm.max_tokens.max(MIN_ANSWER_TOKENS))
                    .unwrap_or(u32::MAX),
                schema: None,
                sample: 0,
                tools: tools::specs(),
                tool_choice: Some("required".into()),
                replay_key: None,
            },
            sandbox: Sandbox::new(
                format!("{}.agent-snapshot", request.image_tag),
                request.image_labels(),
                place.spec.clone(),
            ),
            trajectory: Trajectory::open(&request.log_dir.join("agent.jsonl")),
            watch: Watch::new(
                Arc::clone(&place.known.tree),
                place.known.test_files.clone(),
                place.known.language,
            ),
            learned: Learned::default(),
            spent: Spent::default(),
            started: Instant::now(),
        })
    }

    /// One turn: unless a budget is used up, the model is asked and its tool calls carried
    /// out in turn, until one builds the environment or stops the agent.
    async fn turn(
        &mut self,
        place: &mut Workplace<'_>,
        record: &mut EnvironmentRecord,
        handover: &Handover,
    ) -> Result<Turn, RuntimeError> {
        if let Some(why) = self.spent.exhausted(place.settings, self.started.elapsed()) {
            return Ok(Turn::Ends(Some(Failure::new(
                FailureClass::AgentBudget,
                None,
                &format!("the agent stopped: {why}"),
            ))));
        }
        let asked = Instant::now();
        let answer = match self.ask(place).await {
            Ok(answer) => answer,
            Err(failure) => return Ok(Turn::Ends(Some(failure))),
        };
        let content = answer.content.clone().unwrap_or_default();
        self.transcript.answer(&content, &answer.tool_calls);
        let mut actions = Vec::new();
        let mut end = Turn::Again;
        for call in &answer.tool_calls {
            let done = act(
                call,
                &mut Ctx {
                    session: &mut *place.session,
                    sandbox: &mut self.sandbox,
                    watch: &mut self.watch,
                    request: place.request,
                    settings: place.settings,
                    spec: place.spec,
                    known: place.known,
                    record: &mut *record,
                    learned: &mut self.learned,
                    test_files: &handover.test_files,
                    started: self.started,
                    rules_failure: &handover.failure,
                },
            )
            .await?;
            self.transcript
                .result(&call.id, &done.result, done.logged.clone());
            actions.push(json!({
                "tool": call.function.name,
                "arguments": call.function.arguments,
                "outcome": done.logged.outcome,
                "seconds": done.seconds,
                "snapshot_seconds": done.snapshot,
                "rollback_seconds": done.rollback,
            }));
            if let Some(failure) = done.stopped {
                end = Turn::Ends(Some(failure));
                break;
            }
            if done.built {
                end = Turn::Ends(None);
                break;
            }
        }
        self.trajectory
            .turn(&self.spent, &answer, &content, &actions, asked);
        Ok(end)
    }

    /// Asks the model for its next tool calls, with what is left of its budgets; a run out of
    /// LM budget, or an LM that fails, ends the agent with the row's failure.
    async fn ask(&mut self, place: &Workplace<'_>) -> Result<ChatAnswer, Failure> {
        let budget = self.spent.left(place.settings, self.started.elapsed());
        let request = self.transcript.request(&self.template, &budget);
        (place.step)(&format!("agent: turn {}", self.spent.turns + 1));
        match place.lm.chat(&request).await {
            Ok(answer) => {
                self.spent.add(&answer);
                Ok(answer)
            }
            Err(LmError::OverBudget { spent, limit }) => Err(Failure::new(
                FailureClass::AgentBudget,
                None,
                &format!(
                    "the agent stopped: the run's LM budget is spent (${spent:.4} of ${limit:.4})"
                ),
            )),
            Err(e) => Err(Failure::new(
                FailureClass::Infra,
                None,
                &format!("the launch agent's LM failed: {e}"),
            )),
        }
    }
}

/// Keeps what the agent learned as a recipe, apart until the instance validates: only then is
/// it the repository's ([`crate::recipe::store_pending`]).
fn keep_recipe(
    place: &mut Workplace<'_>,
    record: &EnvironmentRecord,
    learned: &Learned,
    plan: &str,
) {
    let Some(dir) = &place.request.recipes else {
        return;
    };
    let recipe = learned.recipe(record, plan, &place.settings.model, &place.known.tree);
    match crate::recipe::store_pending(dir, record.instance_id.as_str(), &record.repo, recipe) {
        Ok(path) => place.session.note(&format!(
            "# kiln agent: recipe kept in {} until the instance validates",
            path.display()
        )),
        Err(e) => place
            .session
            .note(&format!("# kiln agent: the recipe was not stored: {e}")),
    }
}

/// Writes the agent's figures into the record and its trajectory, removes the snapshot, and
/// returns `end`.
async fn finish_up(
    session: &mut Session,
    sandbox: &Sandbox,
    record: &mut EnvironmentRecord,
    spent: &Spent,
    trajectory: &mut Trajectory,
    end: Option<Failure>,
    started: Instant,
) -> Result<Option<Failure>, RuntimeError> {
    record.agent_steps = i64::from(spent.turns);
    record.agent_tokens = i64::try_from(spent.tokens).unwrap_or(i64::MAX);
    record.agent_cost_usd = spent.cost_usd;
    trajectory.write(&json!({
        "end": end.as_ref().map_or("built", |f| f.class.as_str()),
        "turns": spent.turns,
        "tokens": spent.tokens,
        "cost_usd": spent.cost_usd,
        "replayed": spent.replayed,
        "seconds": started.elapsed().as_secs_f64(),
        "snapshots": sandbox.snapshots,
        "rollbacks": sandbox.rollbacks,
    }));
    sandbox.remove(session).await?;
    Ok(end)
}
