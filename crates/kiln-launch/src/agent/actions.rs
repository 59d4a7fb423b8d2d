//! The agent's actions: each tool call carried out in its container, refused for what it would
//! do or for what it did, rolled back when it fails, and `finish` held to the rules' contract.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kiln_core::config::AgentSettings;
use kiln_core::lm::ToolCall;
use kiln_core::runtime::WORKDIR;
use kiln_core::{ContainerSpec, RuntimeError, Session};
use kiln_schema::{BuiltBy, EnvironmentRecord, FailureClass};

use super::guard;
use super::sandbox::{self, Sandbox};
use super::tools::{self, Action, Finish};
use super::transcript::{Logged, head_tail, one_line};
use crate::environment::Known;
use crate::recipe::Recipe;
use crate::request::LaunchRequest;
use crate::shell::quote;
use crate::verify::{BaselineRun, Failure, baseline};

/// Output of a `read_file`, in lines.
const READ_LINES: usize = 200;

/// What the agent did that stays: the recipe's material.
#[derive(Default)]
pub(super) struct Learned {
    pub(super) steps: Vec<String>,
    pub(super) environment: BTreeMap<String, String>,
    pub(super) summary: String,
}

impl Learned {
    pub(super) fn recipe(
        &self,
        record: &EnvironmentRecord,
        plan: &str,
        model: &str,
        tree: &kiln_core::checkout::Tree,
    ) -> Recipe {
        let (depends_on, depends_on_files) = crate::recipe::dependency_key(tree);
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
            depends_on,
            depends_on_files,
        }
    }
}

/// Everything an action may touch.
pub(super) struct Ctx<'a> {
    pub(super) session: &'a mut Session,
    pub(super) sandbox: &'a mut Sandbox,
    /// What each command changed, read from the engine.
    pub(super) watch: &'a mut kiln_core::checkout::Watch,
    pub(super) request: &'a LaunchRequest,
    pub(super) settings: &'a AgentSettings,
    pub(super) spec: &'a ContainerSpec,
    pub(super) known: &'a Known,
    pub(super) record: &'a mut EnvironmentRecord,
    pub(super) learned: &'a mut Learned,
    pub(super) test_files: &'a [String],
    pub(super) started: Instant,
    /// How the rules stopped: the row's failure if the agent gives up.
    pub(super) rules_failure: &'a Failure,
}

/// How one action went.
pub(super) struct Done {
    /// The tool result the model sees.
    pub(super) result: String,
    /// Its line in the log.
    pub(super) logged: Logged,
    pub(super) seconds: f64,
    pub(super) snapshot: Option<f64>,
    pub(super) rollback: Option<f64>,
    /// `finish` built the environment.
    pub(super) built: bool,
    /// The agent cannot go on (its container is gone).
    pub(super) stopped: Option<Failure>,
}

impl Done {
    pub(super) fn said(action: String, result: String, outcome: &str) -> Self {
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

pub(super) async fn act(call: &ToolCall, cx: &mut Ctx<'_>) -> Result<Done, RuntimeError> {
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
            cx.session.set_env(&cx.record.environment);
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
    let ran = baseline(cx.session, &run, cx.record).await?;
    let (verdict, outcome) = (ran.failure, ran.outcome);
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
