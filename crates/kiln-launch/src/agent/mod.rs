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

pub(crate) mod guard;
pub(crate) mod sandbox;
pub(crate) mod tools;
pub(crate) mod transcript;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kiln_core::config::AgentSettings;
use kiln_core::lm::{ChatAnswer, ChatRequest, LanguageModel, LmError, ToolCall};
use kiln_core::runtime::WORKDIR;
use kiln_core::session::tail;
use kiln_core::{ContainerSpec, RuntimeError, Session};
use kiln_schema::{BuiltBy, EnvironmentRecord, FailureClass};
use serde_json::json;

use self::sandbox::Sandbox;
use self::tools::{Action, Finish};
use self::transcript::{Logged, Transcript, head_tail, one_line};
use crate::environment::Known;
use crate::recipe::Recipe;
use crate::request::LaunchRequest;
use crate::shell::quote;
use crate::verify::{BaselineRun, Failure, baseline};

/// What the rules leave the agent.
pub(crate) struct Handover {
    /// How the rules' attempt ended.
    pub(crate) failure: Failure,
    /// The plan's name and language.
    pub(crate) plan: String,
    pub(crate) language: String,
    /// Setup steps the rules had not run when they stopped.
    pub(crate) remaining: Vec<String>,
    /// Files the instance's test patch touches.
    pub(crate) test_files: Vec<String>,
    /// What was tried before the agent besides the rules (a recipe that did not build).
    pub(crate) note: Option<String>,
}

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

/// Output of a `read_file`, in lines.
const READ_LINES: usize = 200;

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

/// Runs the agent until it builds the environment or a budget ends it. `Ok(None)`: built, and
/// the record says so; `Ok(Some(..))`: the row's failure.
///
/// # Errors
/// Engine failures only.
pub(crate) async fn take_over(
    place: Workplace<'_>,
    record: &mut EnvironmentRecord,
    handover: Handover,
) -> Result<Option<Failure>, RuntimeError> {
    let Workplace {
        session,
        spec,
        known,
        request,
        settings,
        lm,
        step,
    } = place;
    let started = Instant::now();
    step("agent: taking over");
    session.note(&format!(
        "# kiln agent takes over ({}): the rules stopped",
        settings.model
    ));
    let files = list_files(session).await?;
    let (handover_text, key) = describe(record, &handover, &files);
    let mut transcript = Transcript::new(SYSTEM.to_string(), handover_text, key);
    let template = ChatRequest {
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
    };
    let mut sandbox = Sandbox::new(
        format!("{}.agent-snapshot", request.image_tag),
        request.image_labels(),
        spec.clone(),
    );
    let mut trajectory = Trajectory::open(&request.log_dir.join("agent.jsonl"));
    // Every command is judged by what it did to the container, read from the engine.
    let mut watch = kiln_core::checkout::Watch::new(
        Arc::clone(&known.tree),
        known.test_files.clone(),
        known.language,
    );
    let mut learned = Learned::default();
    let rules_test = (
        record.test_command.clone(),
        record.parser.clone(),
        record.rebuild_commands.clone(),
    );
    let mut spent = Spent::default();

    let end = 'turns: loop {
        if let Some(why) = spent.exhausted(settings, started.elapsed()) {
            break Some(Failure::new(
                FailureClass::AgentBudget,
                None,
                &format!("the agent stopped: {why}"),
            ));
        }
        let budget = spent.left(settings, started.elapsed());
        let request_body = transcript.request(&template, &budget);
        step(&format!("agent: turn {}", spent.turns + 1));
        let asked = Instant::now();
        let answer = match lm.chat(&request_body).await {
            Ok(answer) => answer,
            Err(LmError::OverBudget { spent, limit }) => {
                break Some(Failure::new(
                    FailureClass::AgentBudget,
                    None,
                    &format!(
                        "the agent stopped: the run's LM budget is spent (${spent:.4} of ${limit:.4})"
                    ),
                ));
            }
            Err(e) => {
                break Some(Failure::new(
                    FailureClass::Infra,
                    None,
                    &format!("the launch agent's LM failed: {e}"),
                ));
            }
        };
        spent.add(&answer);
        let content = answer.content.clone().unwrap_or_default();
        transcript.answer(&content, &answer.tool_calls);
        let mut actions = Vec::new();
        let mut built = false;
        for call in &answer.tool_calls {
            let done = act(
                call,
                &mut Ctx {
                    session: &mut *session,
                    sandbox: &mut sandbox,
                    watch: &mut watch,
                    request,
                    settings,
                    spec,
                    known,
                    record: &mut *record,
                    learned: &mut learned,
                    test_files: &handover.test_files,
                    started,
                    rules_failure: &handover.failure,
                },
            )
            .await?;
            transcript.result(&call.id, &done.result, done.logged.clone());
            actions.push(json!({
                "tool": call.function.name,
                "arguments": call.function.arguments,
                "outcome": done.logged.outcome,
                "seconds": done.seconds,
                "snapshot_seconds": done.snapshot,
                "rollback_seconds": done.rollback,
            }));
            if let Some(failure) = done.stopped {
                trajectory.turn(&spent, &answer, &content, &actions, asked);
                break 'turns Some(failure);
            }
            if done.built {
                built = true;
                break;
            }
        }
        trajectory.turn(&spent, &answer, &content, &actions, asked);
        if built {
            break None;
        }
    };
    if end.is_none() {
        if let Some(dir) = &request.recipes {
            let recipe = learned.recipe(record, &handover.plan, &settings.model);
            // Kept apart until the instance validates: only then is it the repository's.
            match crate::recipe::store_pending(
                dir,
                record.instance_id.as_str(),
                &record.repo,
                recipe,
            ) {
                Ok(path) => session.note(&format!(
                    "# kiln agent: recipe kept in {} until the instance validates",
                    path.display()
                )),
                Err(e) => session.note(&format!("# kiln agent: the recipe was not stored: {e}")),
            }
        }
    } else {
        // The row of a failed launch names the rules' test command, not an attempt's.
        (record.test_command, record.parser, record.rebuild_commands) = rules_test;
        record.parser_script = None;
    }
    finish_up(
        session,
        &sandbox,
        record,
        &spent,
        &mut trajectory,
        end,
        started,
    )
    .await
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

/// What the agent's answers cost.
#[derive(Default)]
struct Spent {
    turns: u32,
    tokens: u64,
    cost_usd: f64,
    replayed: u32,
}

impl Spent {
    fn add(&mut self, answer: &ChatAnswer) {
        self.turns += 1;
        if let Some(usage) = answer.usage {
            self.tokens += usage.prompt_tokens + usage.completion_tokens;
        }
        if answer.replayed {
            self.replayed += 1;
        } else {
            self.cost_usd += answer.cost_usd.unwrap_or(0.0);
        }
    }

    /// Which budget is used up, if any.
    fn exhausted(&self, settings: &AgentSettings, elapsed: Duration) -> Option<String> {
        let turns = u64::from(self.turns);
        if turns >= u64::try_from(settings.max_steps).unwrap_or(0) {
            return Some(format!(
                "it used all {} turns (agent_max_steps)",
                settings.max_steps
            ));
        }
        if self.tokens >= u64::try_from(settings.max_tokens).unwrap_or(0) {
            return Some(format!(
                "it used {} tokens, the limit is {} (agent_max_tokens)",
                self.tokens, settings.max_tokens
            ));
        }
        if self.cost_usd >= settings.max_cost_usd {
            return Some(format!(
                "it spent ${:.4}, the limit is ${:.4} (agent_max_cost_usd)",
                self.cost_usd, settings.max_cost_usd
            ));
        }
        if elapsed >= settings.timeout {
            return Some(format!(
                "it ran {:.0}s, the limit is {:.0}s (agent_timeout)",
                elapsed.as_secs_f64(),
                settings.timeout.as_secs_f64()
            ));
        }
        None
    }

    /// The line that tells the model what is left.
    fn left(&self, settings: &AgentSettings, elapsed: Duration) -> String {
        format!(
            "Left: {} turns, {} tokens, {:.0} minutes.",
            u64::try_from(settings.max_steps)
                .unwrap_or(0)
                .saturating_sub(u64::from(self.turns)),
            u64::try_from(settings.max_tokens)
                .unwrap_or(0)
                .saturating_sub(self.tokens),
            settings.timeout.saturating_sub(elapsed).as_secs_f64() / 60.0
        )
    }
}

/// What the agent did that stays: the recipe's material.
#[derive(Default)]
struct Learned {
    steps: Vec<String>,
    environment: BTreeMap<String, String>,
    summary: String,
}

impl Learned {
    fn recipe(&self, record: &EnvironmentRecord, plan: &str, model: &str) -> Recipe {
        Recipe {
            plan: plan.to_string(),
            learned_from: record.instance_id.to_string(),
            created_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            model: model.to_string(),
            environment: self.environment.clone(),
            steps: self.steps.clone(),
            test_command: record.test_command.clone(),
            rebuild_commands: record.rebuild_commands.clone(),
            parser: record.parser.clone(),
            parser_script: record.parser_script.clone(),
        }
    }
}

/// Everything an action may touch.
struct Ctx<'a> {
    session: &'a mut Session,
    sandbox: &'a mut Sandbox,
    /// What each command changed, read from the engine.
    watch: &'a mut kiln_core::checkout::Watch,
    request: &'a LaunchRequest,
    settings: &'a AgentSettings,
    spec: &'a ContainerSpec,
    known: &'a Known,
    record: &'a mut EnvironmentRecord,
    learned: &'a mut Learned,
    test_files: &'a [String],
    started: Instant,
    /// How the rules stopped: the row's failure if the agent gives up.
    rules_failure: &'a Failure,
}

/// How one action went.
struct Done {
    /// The tool result the model sees.
    result: String,
    /// Its line in the log.
    logged: Logged,
    seconds: f64,
    snapshot: Option<f64>,
    rollback: Option<f64>,
    /// `finish` built the environment.
    built: bool,
    /// The agent cannot go on (its container is gone).
    stopped: Option<Failure>,
}

impl Done {
    fn said(action: String, result: String, outcome: &str) -> Self {
        Self {
            result,
            logged: Logged {
                action,
                outcome: outcome.to_string(),
            },
            seconds: 0.0,
            snapshot: None,
            rollback: None,
            built: false,
            stopped: None,
        }
    }
}

async fn act(call: &ToolCall, cx: &mut Ctx<'_>) -> Result<Done, RuntimeError> {
    let started = Instant::now();
    let action = match tools::read(call) {
        Ok(action) => action,
        Err(why) => {
            return Ok(Done::said(
                one_line(&call.function.name, &call.function.arguments),
                format!("error: {why}"),
                "invalid call",
            ));
        }
    };
    let mut done = match action {
        Action::Run { command, timeout } => run(cx, &command, timeout).await?,
        Action::ReadFile { path, from_line } => {
            let end = from_line + READ_LINES - 1;
            let script = format!(
                "wc -l < {p} && sed -n '{from_line},{end}p' {p}",
                p = quote(&path)
            );
            let outcome = cx.session.run(&script, Duration::from_secs(60)).await?;
            let outcome_text = format!("exit {}", outcome.exit_code);
            Done::said(
                one_line("read_file", &format!("{path} from line {from_line}")),
                head_tail(&outcome.output),
                &outcome_text,
            )
        }
        Action::ListDir { path } => {
            let script = format!(
                "ls -la --group-directories-first {} | head -n 300",
                quote(&path)
            );
            let outcome = cx.session.run(&script, Duration::from_secs(60)).await?;
            let outcome_text = format!("exit {}", outcome.exit_code);
            Done::said(
                one_line("list_dir", &path),
                head_tail(&outcome.output),
                &outcome_text,
            )
        }
        Action::WriteFile { path, content } => write(cx, &path, &content).await?,
        Action::SetEnv { name, value } if kiln_core::judge::is_test_variable(&name, &value) => {
            let why = format!(
                "refused: `{name}` configures the test runner; an environment must run the \
                 tests as the repository configures them"
            );
            cx.session
                .note(&format!("# kiln agent: refused setting {name}: {why}"));
            Done::said(one_line("set_env", &name), why, "refused")
        }
        Action::SetEnv { name, value } => {
            cx.record.environment.insert(name.clone(), value.clone());
            cx.learned.environment.insert(name.clone(), value.clone());
            cx.session.set_env(
                cx.record
                    .environment
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            );
            cx.session.note(&format!("# kiln agent: set {name}"));
            Done::said(
                one_line("set_env", &format!("{name}={value}")),
                format!("{name} is set for every later command, the tests and the image"),
                "set",
            )
        }
        Action::Finish(finish) => finish_build(cx, finish).await?,
        Action::GiveUp { reason } => {
            let mut done = Done::said(one_line("give_up", &reason), "stopped".into(), "gave up");
            done.stopped = Some(Failure {
                class: cx.rules_failure.class,
                command: cx.rules_failure.command.clone(),
                log_tail: format!(
                    "{}\n[kiln] the launch agent gave up: {reason}",
                    cx.rules_failure.log_tail
                ),
                error_lines: cx.rules_failure.error_lines.clone(),
            });
            done
        }
    };
    done.seconds = started.elapsed().as_secs_f64();
    Ok(done)
}

/// `run`: refused, or run with a snapshot before it and a rollback after a failure when it may
/// change the container.
async fn run(
    cx: &mut Ctx<'_>,
    command: &str,
    timeout: Option<Duration>,
) -> Result<Done, RuntimeError> {
    let action = one_line("run", command);
    if let Some(why) = guard::check_command(command, cx.test_files) {
        cx.session
            .note(&format!("# kiln agent: refused `{command}`: {why}"));
        return Ok(Done::said(action, why, "refused"));
    }
    let runtime = Arc::clone(cx.session.runtime());
    cx.watch.before(runtime.as_ref(), cx.session.id()).await?;
    // Which commands are snapshotted first is read from their words (reading costs nothing);
    // what a command may do is judged by what it did.
    let mut changes = !sandbox::is_read_only(command);
    let snapshot = if changes {
        cx.sandbox.before_change(cx.session).await?
    } else {
        None
    };
    let left = cx.settings.timeout.saturating_sub(cx.started.elapsed());
    let timeout = timeout
        .unwrap_or(cx.settings.command_timeout)
        .min(cx.settings.command_timeout)
        .min(left.max(Duration::from_secs(1)));
    let outcome = match cx.session.run(command, timeout).await {
        Ok(outcome) => outcome,
        Err(e @ (RuntimeError::ContainerStopped { .. } | RuntimeError::DiskExceeded { .. })) => {
            // The command ended the container, or wrote past its disk bound: back to the
            // snapshot, or the end.
            let rollback = cx
                .sandbox
                .roll_back(cx.session, &cx.request.removals)
                .await?;
            let mut done = Done::said(
                action,
                format!("the command stopped the container ({e}); it was rolled back"),
                "stopped the container, rolled back",
            );
            done.snapshot = snapshot;
            done.rollback = rollback;
            if rollback.is_none() {
                let class = if matches!(e, RuntimeError::DiskExceeded { .. }) {
                    FailureClass::Disk
                } else {
                    FailureClass::Build
                };
                done.stopped = Some(Failure::new(
                    class,
                    Some(command),
                    &format!("the agent's command stopped the container: {e}"),
                ));
            }
            return Ok(done);
        }
        Err(e) => return Err(e),
    };
    let observed = cx.watch.after(runtime.as_ref(), cx.session.id()).await?;
    if let Some(refusal) = observed.refusal {
        let mut done = refuse_effect(cx, action, command, &refusal, changes).await?;
        done.snapshot = snapshot;
        return Ok(done);
    }
    // A command whose words read as reading but that changed the container is a setup step.
    let snapshotted = changes;
    changes = changes || observed.changed;
    let mut text = format!("exit {}", outcome.exit_code);
    if outcome.timed_out {
        text.push_str(&format!(" (killed after {:.0}s)", timeout.as_secs_f64()));
    }
    let mut rollback = None;
    let mut logged_outcome = format!("exit {}", outcome.exit_code);
    if changes && outcome.exit_code == 0 {
        cx.sandbox.kept();
        cx.record.setup_commands.push(command.to_string());
        cx.learned.steps.push(command.to_string());
    } else if changes {
        rollback = undo(cx, snapshotted).await?.0;
        if rollback.is_some() {
            text.push_str("; rolled back: the container is as it was before this command");
            logged_outcome.push_str(", rolled back");
        }
    }
    let mut done = Done::said(
        action,
        format!("{text}\n{}", head_tail(&outcome.output)),
        &logged_outcome,
    );
    done.snapshot = snapshot;
    done.rollback = rollback;
    Ok(done)
}

/// `write_file`: refused, or written (after a snapshot) and kept as a setup command that
/// writes the same content, so that the Dockerfile and the recipe replay it.
async fn write(cx: &mut Ctx<'_>, path: &str, content: &str) -> Result<Done, RuntimeError> {
    let action = one_line("write_file", path);
    if let Some(why) = guard::check_write(path, content, cx.test_files) {
        cx.session
            .note(&format!("# kiln agent: refused writing {path}: {why}"));
        return Ok(Done::said(action, why, "refused"));
    }
    let absolute = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("{WORKDIR}/{path}")
    };
    let runtime = Arc::clone(cx.session.runtime());
    cx.watch.before(runtime.as_ref(), cx.session.id()).await?;
    let snapshot = cx.sandbox.before_change(cx.session).await?;
    match cx
        .session
        .write_files(&[(absolute.clone(), content.as_bytes())])
        .await
    {
        Ok(()) => {}
        // A path the engine cannot write (a directory there, say) is the agent's to fix.
        Err(e @ RuntimeError::Refused { .. }) => {
            let mut done = Done::said(action, format!("failed to {e}"), "refused by the engine");
            done.snapshot = snapshot;
            return Ok(done);
        }
        Err(e) => return Err(e),
    }
    let observed = cx.watch.after(runtime.as_ref(), cx.session.id()).await?;
    if let Some(refusal) = observed.refusal {
        let mut done =
            refuse_effect(cx, action, &format!("write {absolute}"), &refusal, true).await?;
        done.snapshot = snapshot;
        return Ok(done);
    }
    cx.sandbox.kept();
    let command = write_command(&absolute, content);
    cx.session.note(&format!("# kiln agent: wrote {absolute}"));
    cx.record.setup_commands.push(command.clone());
    cx.learned.steps.push(command);
    let mut done = Done::said(
        action,
        format!("wrote {} bytes to {absolute}", content.len()),
        "written",
    );
    done.snapshot = snapshot;
    Ok(done)
}

/// Refuses an action for what it did ([`kiln_core::checkout::Watch`]): the container goes back
/// to the snapshot before it. `snapshotted` says whether one was taken right before it; when
/// not (its words read as reading), the latest snapshot is restored and the steps kept since
/// it are dropped with it; with no snapshot at all the agent cannot go on.
async fn refuse_effect(
    cx: &mut Ctx<'_>,
    action: String,
    what: &str,
    refusal: &kiln_core::checkout::Refusal,
    snapshotted: bool,
) -> Result<Done, RuntimeError> {
    let why = format!("refused: {}", refusal.reason());
    cx.session.note(&format!(
        "# kiln agent: refused `{}`: {why}",
        one_line("", what)
    ));
    let (rollback, dropped) = undo(cx, snapshotted).await?;
    let mut done = Done::said(
        action,
        format!("{why}; the container was rolled back to before the command"),
        "refused by its effect, rolled back",
    );
    done.rollback = rollback;
    if rollback.is_none() {
        done.stopped = Some(Failure::new(
            crate::environment::class(refusal),
            Some(what),
            &format!(
                "the agent's command did what an environment may not: {}",
                refusal.reason()
            ),
        ));
        return Ok(done);
    }
    if dropped > 0 {
        done.result.push_str(&format!(
            "; the {dropped} command(s) kept since the last snapshot are undone too"
        ));
    }
    Ok(done)
}

/// Rolls the container back to the latest snapshot, undoing the last command; when no snapshot
/// was taken right before it (`snapshotted` false), the steps kept since that snapshot go too
/// and are dropped from the row and the recipe. The rollback's seconds (`None`: no snapshot)
/// and how many kept steps were dropped.
async fn undo(cx: &mut Ctx<'_>, snapshotted: bool) -> Result<(Option<f64>, usize), RuntimeError> {
    let dropped = if snapshotted {
        0
    } else {
        cx.sandbox.dropped_since_snapshot()
    };
    let rollback = cx
        .sandbox
        .roll_back(cx.session, &cx.request.removals)
        .await?;
    if rollback.is_some() && dropped > 0 {
        let keep = cx.learned.steps.len().saturating_sub(dropped);
        cx.learned.steps.truncate(keep);
        let keep = cx.record.setup_commands.len().saturating_sub(dropped);
        cx.record.setup_commands.truncate(keep);
    }
    Ok((rollback, dropped))
}

/// A shell command that writes `content` to `path` (directories created), from a heredoc whose
/// delimiter does not occur in the content.
fn write_command(path: &str, content: &str) -> String {
    let mut n = 0u32;
    let delimiter = loop {
        let candidate = format!("KILN_FILE_{n}");
        if !content.contains(&candidate) {
            break candidate;
        }
        n += 1;
    };
    let dir = Path::new(path)
        .parent()
        .map_or_else(|| "/".to_string(), |d| d.display().to_string());
    let mut body = content.to_string();
    // A heredoc ends with a line break; for a file without one, `head -c -1` drops it.
    let exact = if body.ends_with('\n') || body.is_empty() {
        format!(
            "cat > {p} <<'{delimiter}'\n{body}{delimiter}",
            p = quote(path)
        )
    } else {
        body.push('\n');
        format!(
            "cat <<'{delimiter}' | head -c -1 > {p}\n{body}{delimiter}",
            p = quote(path)
        )
    };
    format!("mkdir -p {} && {exact}", quote(&dir))
}

/// `finish`: the rules' contract. The container is committed, the baseline tests run and are
/// read; the environment counts when they parse and enough pass.
async fn finish_build(cx: &mut Ctx<'_>, finish: Finish) -> Result<Done, RuntimeError> {
    let action = one_line("finish", &finish.test_command);
    if let Some(why) = guard::check_test_command(&finish.test_command)
        .or_else(|| guard::masked_status(&finish.test_command))
    {
        return Ok(Done::said(action, why, "refused"));
    }
    let (parser, script) = match (finish.parser.as_str(), finish.parser_script) {
        ("script" | "status-lines", Some(script)) if !script.trim().is_empty() => {
            ("status-lines".to_string(), Some(script))
        }
        ("script" | "status-lines", _) => {
            return Ok(Done::said(
                action,
                "error: parser `script` needs parser_script".into(),
                "invalid call",
            ));
        }
        (name, _) if kiln_testlog::parser_names().contains(&name) => (name.to_string(), None),
        (name, _) => {
            return Ok(Done::said(
                action,
                format!(
                    "error: there is no parser `{name}`; name one from finish's description or use `script`"
                ),
                "invalid call",
            ));
        }
    };
    cx.record.test_command = finish.test_command.clone();
    cx.record.parser = parser;
    cx.record.parser_script = script;
    if let Some(rebuild) = finish.rebuild_commands {
        cx.record.rebuild_commands = rebuild;
    }
    cx.learned.summary = finish.summary;

    let runtime = Arc::clone(cx.session.runtime());
    let run = BaselineRun::new(cx.request, cx.spec, cx.known);
    let (verdict, outcome) = baseline(cx.session, &run, cx.record).await?;
    if let (Some(stopped), None) = (&verdict, &outcome) {
        // The tests ran in a container of their own, which they ended; the agent's container
        // is as it was.
        runtime.remove_image(&cx.request.image_tag).await?;
        return Ok(Done::said(
            action,
            format!(
                "the test command stopped the container it ran in (a copy of yours; yours is \
                 unchanged): {}",
                head_tail(&stopped.log_tail)
            ),
            "stopped the container",
        ));
    }
    match verdict {
        None => {
            cx.record.built_by = Some(BuiltBy::Agent);
            if !cx.learned.summary.is_empty() {
                cx.record.version_reason.push_str("; agent: ");
                cx.record.version_reason.push_str(&cx.learned.summary);
            }
            let mut done = Done::said(
                action,
                format!(
                    "built: {} tests passed, {} did not",
                    cx.record.baseline_passed, cx.record.baseline_failed
                ),
                "built",
            );
            done.built = true;
            Ok(done)
        }
        Some(failure) => {
            runtime.remove_image(&cx.request.image_tag).await?;
            let outcome = format!("not built: {}", failure.class);
            Ok(Done::said(
                action,
                format!(
                    "the build does not count yet ({}): {}\n{}",
                    failure.class,
                    match failure.class {
                        FailureClass::TestsFailing => "too few tests pass",
                        FailureClass::NoTests => "no tests were collected",
                        FailureClass::Timeout => "the tests ran past the timeout",
                        _ => "the output gives no test statuses with this parser",
                    },
                    head_tail(&failure.log_tail)
                ),
                &outcome,
            ))
        }
    }
}

/// The repository's files, two levels deep, for the hand-over.
async fn list_files(session: &mut Session) -> Result<String, RuntimeError> {
    let outcome = session
        .run(
            "git ls-files 2>/dev/null | awk -F/ 'NF<=2' | head -n 150",
            Duration::from_secs(60),
        )
        .await?;
    Ok(outcome.output)
}

/// The hand-over message, and the stable part of it that starts the replay key (no log
/// output, which may hold timings).
fn describe(record: &EnvironmentRecord, handover: &Handover, files: &str) -> (String, String) {
    let failure = &handover.failure;
    let command = failure.command.as_deref().unwrap_or("(no command)");
    let mut text = format!(
        "Repository {} at {}. kiln's rules chose the plan `{}` ({}).\n",
        record.repo, record.base_commit, handover.plan, handover.language
    );
    if record.setup_commands.is_empty() {
        text.push_str("No setup command succeeded.\n");
    } else {
        text.push_str("Setup commands that succeeded, in order:\n");
        for done in &record.setup_commands {
            text.push_str(&format!("  $ {}\n", tail(done, 3)));
        }
    }
    if !record.environment.is_empty() {
        let names: Vec<&str> = record.environment.keys().map(String::as_str).collect();
        text.push_str(&format!(
            "Environment variables set: {}\n",
            names.join(", ")
        ));
    }
    text.push_str(&format!(
        "Then this failed ({}):\n  $ {command}\nIts output ended with:\n{}\n",
        failure.class,
        tail(&failure.log_tail, 40)
    ));
    let earlier: Vec<&String> = failure
        .error_lines
        .iter()
        .filter(|line| !failure.log_tail.contains(line.as_str()))
        .collect();
    if !earlier.is_empty() {
        text.push_str(
            "Error lines earlier in its output:
",
        );
        for line in earlier {
            text.push_str(&format!(
                "  {line}
"
            ));
        }
    }
    if !handover.remaining.is_empty() {
        text.push_str("Steps the rules had not run yet:\n");
        for step in &handover.remaining {
            text.push_str(&format!("  $ {step}\n"));
        }
    }
    if let Some(note) = &handover.note {
        text.push_str(&format!("Also: {note}\n"));
    }
    text.push_str(&format!(
        "The rules' test command: `{}` (parser `{}`).\n",
        record.test_command, record.parser
    ));
    if !record.rebuild_commands.is_empty() {
        text.push_str(&format!(
            "The rules' rebuild commands (run after a patch, before the tests; kept unless \
             finish names others): {}\n",
            record
                .rebuild_commands
                .iter()
                .map(|c| format!("`{c}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if !handover.test_files.is_empty() {
        text.push_str(&format!(
            "The instance's test patch (applied later, when the environment is validated) \
             touches: {}. These files must not be changed.\n",
            handover.test_files.join(", ")
        ));
    }
    text.push_str(&format!("Files (two levels deep):\n{files}"));
    let key = format!(
        "kiln-agent-1\n{}\n{}\n{}\n{}\n{}\n{}",
        record.repo,
        record.base_commit,
        handover.plan,
        failure.class,
        command,
        record.setup_commands.join("\n")
    );
    (text, key)
}

/// `agent.jsonl`: one line per turn and a last line with the totals.
struct Trajectory {
    file: Option<std::fs::File>,
}

impl Trajectory {
    fn open(path: &Path) -> Self {
        Self {
            file: std::fs::File::create(path).ok(),
        }
    }

    fn write(&mut self, value: &serde_json::Value) {
        if let Some(file) = &mut self.file {
            let _ = writeln!(file, "{value}");
        }
    }

    fn turn(
        &mut self,
        spent: &Spent,
        answer: &ChatAnswer,
        content: &str,
        actions: &[serde_json::Value],
        asked: Instant,
    ) {
        self.write(&json!({
            "turn": spent.turns,
            "replayed": answer.replayed,
            "prompt_tokens": answer.usage.map(|u| u.prompt_tokens),
            "completion_tokens": answer.usage.map(|u| u.completion_tokens),
            "cost_usd": answer.cost_usd,
            "content": content,
            "actions": actions,
            "seconds": asked.elapsed().as_secs_f64(),
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::write_command;

    #[test]
    fn a_written_file_replays_byte_for_byte() {
        for content in [
            "a\nb\n",
            "no newline",
            "",
            "KILN_FILE_0\nx\n",
            "it's \"quoted\" $HOME\n",
        ] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("sub/f.txt");
            let command = write_command(&path.display().to_string(), content);
            let out = std::process::Command::new("bash")
                .arg("-c")
                .arg(&command)
                .output()
                .unwrap();
            assert!(out.status.success(), "{command}: {out:?}");
            assert_eq!(
                std::fs::read_to_string(&path).unwrap(),
                content,
                "{command}"
            );
        }
    }
}
